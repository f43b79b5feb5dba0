"""quicbed report on the runs that do not simply count and on folders that are incomplete or
broken: invalid, CPU-bound, CPU-unknown and failed (timed-out) runs, runs made again, runs of
several machines; missing artifacts, a truncated results.jsonl, a broken study section. What
counts, how the report names the rest, and the errors that name the folder and the fix. The
folders are built from the committed real captures (tests/fixtures/analysis)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quicbed.cli import main
from quicbed.report import ReportError, ReportOptions, build_report
from quicbed.report.load import read_results_lines

from report_fixtures import GOODPUT, make_matrix_folder, read_summary, record, summary_row

# --------------------------------------------------------------------------- invalid, CPU-bound, remade runs


def test_invalid_runs_count_when_asked(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "e")
    build_report(folder, ReportOptions(include_invalid=True, plots=False))
    row = summary_row(read_summary(folder), "quic", 0, "goodput")
    assert row["n"] == 4 and row["invalid_excluded"] == 0
    assert row["mean"] == pytest.approx(np.mean([*GOODPUT["quic"], 20e6]))


def test_cpu_bound_runs_are_counted_named_and_drawn(tmp_path: Path) -> None:
    """Runs flagged CPU-bound stay counted, appear per cell and in the headline; CPU by role is drawn;
    a run made again after an invalid attempt is counted as such."""
    folder = make_matrix_folder(tmp_path / "e")
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    for line in lines:
        quic = line["transport"]["name"] == "quic"
        if quic and line["status"] == "ok":
            line["cpu_bound_reasons"] = ["client was CPU-bound (>= 90 % of a core) for 64 % of the transfer"]
        if line["status"] != "failed":
            line["metrics"].update(
                cpu_server=0.5, cpu_client=1.5 if quic else 0.4, cpu_channel=2.0, cpu_client_bound=0.64 if quic else 0.0
            )
        if line["run_id"] == "c002-r001":
            line.update(
                attempt=2, earlier_attempts=[{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]
            )
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = build_report(folder, ReportOptions())
    counts = result.summary.counts.set_index("cell_index")
    assert list(counts["cpu_bound"]) == [3, 3, 0, 0, 0, 0]  # counted quic runs only, not the warm-up
    assert list(counts["remade"]) == [0, 0, 1, 0, 0, 0]
    summary_md = (folder / "summary.md").read_text()
    assert "CPU-bound runs (an endpoint or the ns-3 channel" in summary_md
    assert "quic 0: 3 of 3, quic 2: 3 of 3" in summary_md
    assert "c000-r001: client was CPU-bound" in summary_md
    assert "of which CPU-bound" in summary_md and "made again" in summary_md
    assert "CPU-bound runs" in (folder / "index.html").read_text()
    # every table and figure marks the cells that hold them
    assert "| quic | 0 | 3 | 1 timed out |" in summary_md
    assert "CPU-bound 3/3" in summary_md.split("## Overview")[1].split("\n\n")[1].splitlines()[2]
    gains = summary_md[summary_md.index("## Relative gain over quic") :]
    assert "quic: CPU-bound 3/3" in gains
    assert "Hatched bars: cells whose counted runs include CPU-bound runs" in summary_md
    svg = (folder / "report" / "bars-goodput.svg").read_text()
    assert "<pattern" in svg and "CPU-bound or CPU unknown runs" in svg
    assert (folder / "report" / "cpu-by-role.png").exists() and (folder / "report" / "cpu-by-role.svg").exists()
    client = summary_row(read_summary(folder), "quic", 0, "cpu_client_bound")
    assert client["mean"] == pytest.approx(0.64)


def _rewrite(folder: Path, change) -> list[dict]:  # type: ignore[no-untyped-def]
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    lines = [changed for line in lines for changed in change(line)]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_runs_whose_cpu_state_is_unknown_are_counted_and_named_never_passed_as_fine(tmp_path: Path) -> None:
    """A run whose CPU accounting saw nothing (no cgroup, no /proc, no samples over the transfer)
    is not "not CPU-bound": the report counts such runs per cell and names them; a record from
    before runs said so counts as unknown when it has no CPU figures."""
    folder = make_matrix_folder(tmp_path / "e")

    def change(line: dict) -> list[dict]:
        if line["status"] != "failed":
            line["metrics"].update(cpu_server=0.5, cpu_client=0.4, cpu_machine_busy=0.4, cpu_machine_steal=0.0)
            line["cpu_unknown_reasons"] = []
        if line["run_id"] in ("c000-r001", "c003-r002"):
            line["cpu_unknown_reasons"] = ["CPU accounting unavailable: no /proc/stat"]
            line["metrics"] = {key: value for key, value in line["metrics"].items() if not key.startswith("cpu_")}
        if line["run_id"] == "c004-r003":  # older record: no field and no CPU figures
            line.pop("cpu_unknown_reasons")
            line["metrics"] = {key: value for key, value in line["metrics"].items() if not key.startswith("cpu_")}
        return [line]

    _rewrite(folder, change)
    result = build_report(folder, ReportOptions(plots=False))
    counts = result.summary.counts.set_index("cell_index")
    assert list(counts["cpu_unknown"]) == [1, 0, 0, 1, 1, 0]
    assert list(counts["cpu_bound"]) == [0] * 6
    text = (folder / "summary.md").read_text()
    assert "of which CPU unknown" in text
    assert (
        "CPU state unknown (no CPU figures, or only some: it may have been CPU-bound): quic 0: 1 of 3, "
        "bquic 2: 1 of 3, tcp 0: 1 of 3"
    ) in text
    assert "- CPU accounting unavailable: no /proc/stat: 2 run(s): c000-r001, c003-r002" in text
    assert "- no CPU figures in the record: 1 run(s): c004-r003" in text
    assert "CPU state unknown" in (folder / "index.html").read_text()


def test_invalid_attempts_per_cell_and_a_warning_when_they_differ_from_the_valid_runs(tmp_path: Path) -> None:
    """Invalid runs are made again and only the last attempt is kept: the report shows the
    invalid attempts per cell against all completed ones, and warns where the invalid attempts'
    mean of the headline metric lies outside the valid runs' 95 % CI (the kept runs may lean)."""
    study = {"headline": {"metric": "goodput", "x": "link.bottleneck.loss", "compare": ["quic", "bquic"]}}
    folder = make_matrix_folder(tmp_path / "e", study=study)

    def change(line: dict) -> list[dict]:
        if line["run_id"] == "c002-r001":  # bquic at loss 0: an invalid first attempt, 12 Mbit/s, made again
            first = {**json.loads(json.dumps(line)), "status": "invalid", "invalid_reasons": ["ns-3 behind"]}
            first["metrics"]["goodput"] = 12e6
            line.update(
                attempt=2, earlier_attempts=[{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]
            )
            return [first, line]
        if line["run_id"] == "c004-r001":  # tcp at loss 0: an invalid attempt like the valid runs
            first = {**json.loads(json.dumps(line)), "status": "invalid", "invalid_reasons": ["ns-3 behind"]}
            line.update(
                attempt=2, earlier_attempts=[{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]
            )
            return [first, line]
        return [line]

    _rewrite(folder, change)
    result = build_report(folder, ReportOptions(plots=False))
    counts = result.summary.counts.set_index("cell_index")
    # cell 0 keeps its invalid run (20 Mbit/s, the budget spent) and has a failed one, which is no attempt
    assert list(counts["attempts"]) == [4, 3, 4, 3, 4, 3]
    assert list(counts["invalid_attempts"]) == [1, 0, 1, 0, 1, 0]
    assert list(counts["remade"]) == [0, 0, 1, 0, 1, 0]
    bias = result.summary.bias.set_index("cell_index")
    assert result.summary.bias_metric == "goodput"
    assert list(bias.index) == [0, 2, 4]
    assert bias.loc[2, "mean_invalid"] == pytest.approx(12e6) and bias.loc[2, "n_valid"] == 3
    assert bias.loc[2, "mean_valid"] == pytest.approx(np.mean(GOODPUT["bquic"]))
    assert list(bias["outside"]) == [True, True, False]
    text = (folder / "summary.md").read_text()
    assert "| invalid attempts |" in text and "| 1 of 4 (25 %) |" in text
    assert ("bquic 0: 1 invalid attempt(s) averaged 12 Mbit/s, the 3 valid runs 6.83 [4.94, 8.73] Mbit/s") in text
    warning = next(line for line in text.splitlines() if line.startswith("**Invalid attempts differ"))
    assert "quic 0: 1 invalid attempt(s) averaged 20 Mbit/s" in warning and "tcp 0:" not in warning
    assert "averaged 12 Mbit/s" in (folder / "index.html").read_text()


def test_the_report_command_prints_the_rerun_warning_first(tmp_path: Path, capsys) -> None:
    from quicbed.cli import main

    study = {"headline": {"metric": "goodput", "x": "link.bottleneck.loss", "compare": ["quic", "bquic"]}}
    folder = make_matrix_folder(tmp_path / "e", study=study)

    def change(line: dict) -> list[dict]:
        if line["run_id"] == "c002-r001":  # an invalid first attempt far from the valid runs
            first = {**json.loads(json.dumps(line)), "status": "invalid", "invalid_reasons": ["ns-3 behind"]}
            first["metrics"]["goodput"] = 12e6
            line.update(
                attempt=2, earlier_attempts=[{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]
            )
            return [first, line]
        return [line]

    _rewrite(folder, change)
    assert main(["report", str(folder), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "Invalid attempts differ from the valid runs in goodput" in printed
    assert "bquic 0: 1 invalid attempt(s) averaged 12 Mbit/s" in printed


# --------------------------------------------------------------------------- failed runs


def test_the_median_with_timeouts_ranks_them_worst() -> None:
    from quicbed.report.summary import median_with_timeouts

    assert median_with_timeouts([1.0, 2.0, 3.0], 0, "lower") == 2.0
    assert median_with_timeouts([1.0, 2.0, 3.0], 1, "lower") == 2.5  # [1, 2, 3, inf]
    assert median_with_timeouts([1.0, 2.0, 3.0], 2, "lower") == 3.0
    assert median_with_timeouts([1.0, 2.0, 3.0], 3, "lower") == math.inf  # half timed out: beyond the limit
    assert median_with_timeouts([1.0, 2.0, 3.0], 1, "higher") == 1.5  # [-inf, 1, 2, 3]
    assert median_with_timeouts([], 2, "higher") == -math.inf
    assert math.isnan(median_with_timeouts([1.0], 1, None))  # no better direction: no ranking


def test_timed_out_runs_are_counted_beside_n_and_in_a_median_and_unequal_failures_are_named(tmp_path: Path) -> None:
    """Cell 0 (quic, loss 0) has one run that timed out: the mean leaves it out, the table shows it
    beside n, the median with timeouts ranks it last, and the gains against quic say that the
    compared transports failed unequally."""
    folder = make_matrix_folder(tmp_path / "e")
    build_report(folder, ReportOptions())
    summary = read_summary(folder)
    goodput = summary_row(summary, "quic", 0, "goodput")
    values = sorted(GOODPUT["quic"])
    assert goodput["n"] == 3 and goodput["failed_excluded"] == 1 and goodput["timed_out"] == 1
    assert goodput["mean"] == pytest.approx(np.mean(values))
    assert goodput["median_with_timeouts"] == pytest.approx((values[0] + values[1]) / 2)  # [-inf, a, b, c]
    runs = pd.read_csv(folder / "runs.csv")
    times = sorted(runs[(runs["cell_index"] == 0) & (runs["status"] == "ok") & ~runs["warmup"]]["download_time"])
    download = summary_row(summary, "quic", 0, "download_time")
    assert download["median_with_timeouts"] == pytest.approx((times[1] + times[2]) / 2)  # [a, b, c, inf]
    assert summary_row(summary, "tcp", 0, "goodput")["timed_out"] == 0
    gains = pd.read_csv(folder / "gains.csv")
    row = gains[(gains["transport"] == "tcp") & (gains["link.bottleneck.loss"] == 0) & (gains["metric"] == "goodput")]
    assert list(row[["failed_baseline", "failed_transport", "timed_out_baseline"]].iloc[0]) == [1, 0, 1]
    text = (folder / "summary.md").read_text()
    assert "Failed runs, left out of every mean and gain: quic 0: 1 timed out of 5" in text
    assert "The compared transports failed unequally (0 bquic 0 vs quic 1; 0 tcp 0 vs quic 1)" in text
    assert "| quic | 0 | 3 | 1 timed out |" in text


# --------------------------------------------------------------------------- runs of several machines


def test_a_comparison_across_machines_is_flagged(tmp_path: Path) -> None:
    """Sharding by cell can put the compared transports on different hosts: each run names its
    host, and the gains that compare runs of different hosts say so, first."""
    folder = make_matrix_folder(tmp_path / "e")
    _rewrite(folder, lambda line: [{**line, "host": "alpha" if line["transport"]["name"] == "quic" else "beta"}])
    build_report(folder, ReportOptions())
    gains = pd.read_csv(folder / "gains.csv", keep_default_na=False)
    assert set(gains["hosts"]) == {"beta vs alpha"}
    runs = pd.read_csv(folder / "runs.csv")
    assert set(runs["host"]) == {"alpha", "beta"}
    text = (folder / "summary.md").read_text()
    assert "Comparisons across machines: 0 bquic vs quic: beta vs alpha;" in text
    _rewrite(folder, lambda line: [{**line, "host": "alpha"}])
    build_report(folder, ReportOptions())
    assert "Comparisons across machines" not in (folder / "summary.md").read_text()


# --------------------------------------------------------------------------- broken folders


def test_missing_artifacts_do_not_crash(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "e")
    for pattern in ("server.pcap", "server.qlog", "ss.txt"):
        for path in folder.glob(f"runs/*/{pattern}"):
            path.unlink()
    shutil.rmtree(folder / "runs" / "c001-r002")
    (folder / "runs" / "c002-r001" / "client.pcap").write_bytes(b"not a pcap")
    result = build_report(folder, ReportOptions())
    notes = " ".join(result.figures.notes)
    assert (
        "Sender state over time (link.bottleneck.loss=0): skipped (no run has server.qlog, tcp_probe.txt.gz or "
        "ss.txt (set qlog: true))"
    ) in notes
    assert (folder / "report" / "bars-goodput.png").exists() and (folder / "index.html").exists()
    assert "runs/c002-r001/client.pcap cannot be read" in notes  # another run of its transport is used
    assert "run folder missing" in (folder / "index.html").read_text()


def test_truncated_last_line_is_ignored_with_a_warning(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "e")
    with (folder / "results.jsonl").open("a") as handle:
        handle.write('{"run_id": "c005-r004", "status": "ok", "metr')
    records, warnings = read_results_lines(folder / "results.jsonl")
    assert len(records) == 6 * 4 + 2 and len(warnings) == 1 and "truncated" in warnings[0]
    result = build_report(folder, ReportOptions(plots=False))
    assert any("truncated" in warning for warning in result.results.warnings)
    assert summary_row(read_summary(folder), "tcp", 2, "goodput")["n"] == 3
    assert "truncated" in (folder / "index.html").read_text()


@pytest.mark.parametrize(
    "state, message",
    [
        ("missing", r"results folder .* not found \(fix: give the folder 'quicbed run' printed"),
        ("no-results", r"has no results.jsonl \(fix: give a folder written by 'quicbed run'"),
        ("empty", r"results.jsonl holds no complete run record \(fix: wait until the first run has finished"),
        (
            "all-failed",
            (
                r"no run in .* counts for the statistics \(2 failed\); first: c000-r001: boom; .*index.html "
                r"lists them \(fix: see"
            ),
        ),
    ],
)
def test_clear_errors_naming_the_folder_and_the_fix(tmp_path: Path, state: str, message: str) -> None:
    folder = tmp_path / "results-x"
    if state != "missing":
        folder.mkdir()
    if state == "empty":
        (folder / "results.jsonl").write_text("")
    if state == "all-failed":
        (folder / "results.jsonl").write_text(
            "".join(
                json.dumps(record(f"c000-r00{rep}", rep, 0, {"transport": "quic"}, rep, status="failed", error="boom"))
                + "\n"
                for rep in (1, 2)
            )
        )
    with pytest.raises(ReportError, match=message) as raised:
        build_report(folder, ReportOptions())
    assert str(folder) in str(raised.value)
    if state == "all-failed":
        assert (folder / "index.html").exists()


def test_command_error_for_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nowhere")]) == 1
    assert "not found" in capsys.readouterr().err


def test_a_broken_study_section_is_a_note_not_a_crash(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "e-bad", study={"headline": {"metric": "speed"}})
    build_report(folder, ReportOptions())
    text = (folder / "summary.md").read_text()
    assert "headline: skipped (the experiment's study section: study.headline.metric: unknown metric 'speed'" in text
