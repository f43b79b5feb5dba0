"""quicbed compare: two results folders matched cell by cell (fixture folders of
tests/report_fixtures.py, their statistics against numpy and the stats module)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quicbed.cli import main
from quicbed.report.compare import compare_folders
from quicbed.report.load import ReportError
from tests.report_fixtures import GOODPUT, make_matrix_folder


def _scaled(folder: Path, factor: float, transport: str) -> None:
    """Every goodput of ``transport`` times ``factor`` (its download time divided by it)."""
    lines = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["cell"].get("transport") == transport and "goodput" in record.get("metrics", {}):
            record["metrics"]["goodput"] *= factor
        lines.append(json.dumps(record))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def test_the_second_folder_against_the_first_per_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = make_matrix_folder(tmp_path / "before"), make_matrix_folder(tmp_path / "after")
    _scaled(after, 1.5, "quic")
    table = compare_folders([before, after], ["goodput"]).table
    assert len(table) == 6  # 3 transports x 2 loss rates, every cell in both
    quic = table[(table["transport"] == "quic") & (table["link.bottleneck.loss"] == "0")].iloc[0]
    assert quic["mean_first"] == pytest.approx(np.mean(GOODPUT["quic"]))
    assert quic["mean_second"] == pytest.approx(1.5 * np.mean(GOODPUT["quic"]))
    assert quic["gain"] == pytest.approx(0.5) and quic["gain_low"] < 0.5 < quic["gain_high"]
    assert (quic["n_first"], quic["n_second"]) == (3, 3)  # failed, invalid and warm-up runs left out
    tcp = table[(table["transport"] == "tcp") & (table["link.bottleneck.loss"] == "0")].iloc[0]
    assert tcp["gain"] == pytest.approx(0.0) and tcp["difference"] == pytest.approx(0.0)
    csv = tmp_path / "cmp.csv"
    assert main(["compare", str(before), str(after), "--metrics", "goodput", "--csv", str(csv)]) == 0
    shown = capsys.readouterr().out
    assert "+50.0 %" in shown and "(n=3)" in shown
    assert len(pd.read_csv(csv)) == 6


def _without_loss_axis(folder: Path, loss: float = 0) -> Path:
    """The folder as an experiment that varies only the transport, at one loss rate."""
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    kept = []
    for record in lines:
        if record["cell"]["link.bottleneck.loss"] == loss:
            record["cell"] = {"transport": record["cell"]["transport"]}
            kept.append(record)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    experiment = json.loads((folder / "experiment.yaml").read_text())
    experiment["matrix"] = {"transport": experiment["matrix"]["transport"]}
    (folder / "experiment.yaml").write_text(json.dumps(experiment))
    metadata = json.loads((folder / "metadata.json").read_text())
    metadata["experiment"] = experiment
    (folder / "metadata.json").write_text(json.dumps(metadata))
    return folder


def test_folders_of_other_experiments_match_on_shared_axes_with_the_rest_held(tmp_path: Path) -> None:
    """A folder that varies loss against one that does not: refused until --where holds loss at
    one value, then matched on the transport alone."""
    first = make_matrix_folder(tmp_path / "a")
    other = _without_loss_axis(make_matrix_folder(tmp_path / "b"))
    with pytest.raises(
        ReportError,
        match=r"varies link.bottleneck.loss \(0, 2\) and another folder does not: .*"
        r"--where link.bottleneck.loss=0",
    ):
        compare_folders([first, other], ["goodput"])
    comparison = compare_folders([first, other], ["goodput"], where={"link.bottleneck.loss": "0"})
    assert comparison.axes == ["transport"] and len(comparison.table) == 3
    assert comparison.table["gain"].to_numpy() == pytest.approx([0, 0, 0])
    with pytest.raises(ReportError, match="no counted run has link.bottleneck.loss=7"):
        compare_folders([first, other], ["goodput"], where={"link.bottleneck.loss": "7"})
    with pytest.raises(ReportError, match="--where hops: no folder varies it"):
        compare_folders([first, other], ["goodput"], where={"hops": "2"})
    with pytest.raises(ReportError, match="share no cell with a counted run of nonsense"):
        compare_folders([first, make_matrix_folder(tmp_path / "c")], ["nonsense"])


def test_three_folders_against_the_first_with_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = [make_matrix_folder(tmp_path / name) for name in ("base", "faster", "slower")]
    _scaled(folders[1], 1.5, "quic")
    _scaled(folders[2], 0.5, "quic")
    comparison = compare_folders(folders, ["goodput"])
    quic = comparison.table[
        (comparison.table["transport"] == "quic") & (comparison.table["link.bottleneck.loss"] == "2")
    ].set_index("folder")["gain"]
    assert quic[str(folders[1])] == pytest.approx(0.5) and quic[str(folders[2])] == pytest.approx(-0.5)
    assert main(["compare", *map(str, folders), "--metrics", "goodput", "--figures", str(tmp_path / "fig")]) == 0
    shown = capsys.readouterr().out
    assert "faster against" in shown and "slower against" in shown and "figures: 1 in" in shown
    drawn = pd.read_csv(tmp_path / "fig" / "compare-goodput.csv")
    assert sorted(set(drawn["folder"])) == ["base", "faster", "slower"] and len(drawn) == 18  # 6 cells x 3
    svg = (tmp_path / "fig" / "compare-goodput.svg").read_text()
    assert "goodput (Mbit/s)" in svg and "slower" in svg
    assert main(["compare", str(folders[0]), str(folders[1]), "--where", "nonsense"]) != 0
