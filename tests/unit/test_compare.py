"""quicbed compare: two results folders matched cell by cell (fixture folders of
tests/report_fixtures.py, their statistics against numpy and the stats module)."""

from __future__ import annotations

import json
import math
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
    table = compare_folders(before, after, ["goodput"]).table
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


def test_folders_of_other_matrices_or_without_shared_runs_are_refused(tmp_path: Path) -> None:
    first = make_matrix_folder(tmp_path / "a")
    other = make_matrix_folder(tmp_path / "b")
    lines = [json.loads(line) for line in (other / "results.jsonl").read_text().splitlines()]
    for record in lines:
        record["cell"] = {"transport": record["cell"]["transport"]}  # no loss axis
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(ReportError, match="cells can only be matched on the same axes"):
        compare_folders(first, other, ["goodput"])
    with pytest.raises(ReportError, match="share no cell with a counted run of nonsense"):
        compare_folders(first, make_matrix_folder(tmp_path / "c"), ["nonsense"])
    assert not math.isnan(compare_folders(first, first, ["goodput"]).table["gain"].iloc[0])
