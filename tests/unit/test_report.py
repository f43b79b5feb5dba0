"""quicbed report on small results folders built from the committed real captures
(tests/fixtures/analysis): statistics against scipy, gains, intervals, the study's headline,
pages, links and figures. Runs that do not simply count and broken folders are in
test_report_flagged_runs.py."""

from __future__ import annotations

import json
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from quicbed.analysis.stats import relative_gain
from quicbed.cli import main
from quicbed.report import ReportError, ReportOptions, build_report

from report_fixtures import GOODPUT, make_matrix_folder, make_parallel_folder, read_summary, summary_row

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def matrix_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = make_matrix_folder(tmp_path_factory.mktemp("report") / "e-matrix")
    build_report(folder, ReportOptions())
    return folder


# --------------------------------------------------------------------------- statistics


def test_summary_csv_has_mean_ci_median_of_counted_runs_only(matrix_report: Path) -> None:
    summary = read_summary(matrix_report)
    row = summary_row(summary, "quic", 0, "goodput")
    values = np.array(GOODPUT["quic"])  # not the warm-up (1e6), failed (99e6) or invalid (20e6) run
    low, high = sps.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=sps.sem(values))
    assert row["ci_method"] == "t"
    assert row["n"] == 3
    assert row["mean"] == pytest.approx(values.mean())
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row["ci_half_width"] == pytest.approx((high - low) / 2)
    assert row["median"] == pytest.approx(9e6)
    assert row["std"] == pytest.approx(values.std(ddof=1))
    assert (row["runs_total"], row["failed_excluded"], row["invalid_excluded"], row["warmup_excluded"]) == (6, 1, 1, 1)
    # base units plus display units from the catalogue
    assert (row["base_unit"], row["unit"], row["scale"]) == ("bit/s", "Mbit/s", 1e-6)
    assert row["mean_shown"] == pytest.approx(values.mean() / 1e6)
    loss = summary_row(summary, "tcp", 2, "goodput")
    assert loss["mean"] == pytest.approx(np.mean(GOODPUT["tcp"]) / 2) and loss["failed_excluded"] == 0
    share = summary_row(summary, "bquic", 0, "loss")
    assert (share["base_unit"], share["unit"]) == ("share", "%")
    assert share["mean_shown"] == pytest.approx(share["mean"] * 100)


def test_runs_csv_is_one_row_per_run_with_its_axes_and_metrics(matrix_report: Path) -> None:
    runs = pd.read_csv(matrix_report / "runs.csv")
    records = [json.loads(line) for line in (matrix_report / "results.jsonl").read_text().splitlines() if line]
    assert sorted(runs["run_id"]) == sorted({record["run_id"] for record in records})
    assert {"transport", "link.bottleneck.loss", "status", "warmup", "goodput"} <= set(runs.columns)
    quic = runs[
        (runs["transport"] == "quic") & (runs["link.bottleneck.loss"] == 0) & (runs["status"] == "ok") & ~runs["warmup"]
    ]
    assert sorted(quic["goodput"]) == pytest.approx(sorted(GOODPUT["quic"]))
    assert set(runs["status"]) >= {"ok", "failed", "invalid"}  # every run, not only the counted ones


def test_gains_against_the_first_transport_of_the_matrix(matrix_report: Path) -> None:
    gains = pd.read_csv(matrix_report / "gains.csv")
    assert set(gains["baseline"]) == {"quic"} and set(gains["transport"]) == {"bquic", "tcp"}
    row = gains[
        (gains["metric"] == "goodput") & (gains["transport"] == "bquic") & (gains["link.bottleneck.loss"] == 0)
    ].iloc[0]
    expected = relative_gain(GOODPUT["quic"], GOODPUT["bquic"])
    assert row["gain"] == pytest.approx(np.mean(GOODPUT["bquic"]) / np.mean(GOODPUT["quic"]) - 1)
    assert row["gain"] < 0 and (row["ci_low"], row["ci_high"]) == (
        pytest.approx(expected.low),
        pytest.approx(expected.high),
    )
    assert row["verdict"] == "worse"  # lower goodput, CI excludes 0
    time_gain = gains[
        (gains["metric"] == "download_time") & (gains["transport"] == "bquic") & (gains["link.bottleneck.loss"] == 0)
    ].iloc[0]
    assert time_gain["gain"] == pytest.approx(
        np.mean(1 / np.array(GOODPUT["bquic"])) / np.mean(1 / np.array(GOODPUT["quic"])) - 1
    )
    # the interval of the log of the ratio: +0.2 % to +74 %, so bquic's longer download time is significant
    assert 0 < time_gain["ci_low"] < 0.01 < time_gain["gain"] and time_gain["verdict"] == "worse"
    assert (row["comparison"], time_gain["comparison"]) == ("relative", "relative")
    loss = gains[
        (gains["metric"] == "loss") & (gains["transport"] == "bquic") & (gains["link.bottleneck.loss"] == 0)
    ].iloc[0]
    # QUIC lost nothing: no gain over a zero mean, the difference instead
    assert math.isnan(loss["gain"]) and loss["comparison"] == "absolute" and "quic's mean is 0" in loss["note"]
    assert loss["difference"] == pytest.approx(loss["mean_transport"] - loss["mean_baseline"])
    tcp = gains[
        (gains["metric"] == "goodput") & (gains["transport"] == "tcp") & (gains["link.bottleneck.loss"] == 2)
    ].iloc[0]
    assert tcp["gain"] > 0 and tcp["verdict"] == "no significant difference"


def test_baseline_option_and_its_errors(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "e")
    build_report(folder, ReportOptions(baseline="tcp", plots=False))
    gains = pd.read_csv(folder / "gains.csv")
    assert set(gains["baseline"]) == {"tcp"} and set(gains["transport"]) == {"quic", "bquic"}
    with pytest.raises(ReportError, match=r"--baseline udp: no such transport .*fix: one of quic, bquic, tcp"):
        build_report(folder, ReportOptions(baseline="udp", plots=False))
    with pytest.raises(ReportError, match=r"--metrics: nonsense not in .*fix: choose from"):
        build_report(folder, ReportOptions(metrics=["nonsense"], plots=False))


# --------------------------------------------------------------------------- pages


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.targets.append(value)


def test_index_html_tables_figures_and_every_link_resolves(matrix_report: Path) -> None:
    from urllib.parse import unquote

    text = (matrix_report / "index.html").read_text()
    parser = _Links()
    parser.feed(text)
    assert parser.scripts == 0
    assert not any(target.startswith(("http:", "https:", "//")) for target in parser.targets)  # self-contained
    for target in parser.targets:
        assert (matrix_report / unquote(target)).exists(), target
    targets = set(parser.targets)
    for name in (
        "summary.csv",
        "summary.md",
        "gains.csv",
        "metadata.json",
        "results.jsonl",
        "runs/c000-r001/server.pcap",
        "runs/c004-r002/ss.txt",
        "runs/c000-r001/server.qlog",
        "report/bars-goodput.png",
        "report/bars-goodput.svg",
        "report/sender-runs-0.png",
        "report/sender-cells-0.csv",
    ):
        assert name in targets, name
    assert "report-test" in text and "three transports, two loss rates" in text
    assert "testhost (Debian 12, 2 CPUs)" in text and "6.18.44" in text and "abc1234" in text  # environment
    assert '<th class="text">in microVM</th><td class="text">no</td>' in text
    assert "client timed out after 300 s" in text and "ns-3 fell 40 ms behind real time" in text
    assert "goodput (Mbit/s)" in text and "Relative gain over quic" in text
    mean = np.mean(GOODPUT["quic"]) / 1e6
    assert f"{mean:.3g}" in text


def test_summary_md_tables_and_images(matrix_report: Path) -> None:
    text = (matrix_report / "summary.md").read_text()
    assert text.startswith("# report-test")
    assert "## goodput (Mbit/s)" in text and "## Relative gain over quic" in text
    assert "| transport | link.bottleneck.loss | n | failed | mean |" in text
    assert "c000-r004 failed: client timed out after 300 s" in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        assert (matrix_report / target).exists(), target
    assert "](report/throughput-bins.png)" in text


def test_figures_exist_as_png_and_svg(matrix_report: Path) -> None:
    from matplotlib import image

    figures = matrix_report / "report"
    for stem in (
        "bars-goodput",
        "bars-download_time",
        "bars-loss",
        "bars-ack_ratio",
        "ccdf-goodput-link.bottleneck.loss-0",
        "ccdf-goodput-link.bottleneck.loss-2",
        "ipt-server",
        "sender-runs-0",
        "sender-cells-0",
        "throughput-bins",
        "sequence-quic",
        "sequence-bquic",
        "sequence-tcp",
    ):
        png, svg = figures / f"{stem}.png", figures / f"{stem}.svg"
        assert png.exists() and svg.exists(), stem
        assert image.imread(png).std() > 0.01
        assert "<svg" in svg.read_text()
    bars = (figures / "bars-goodput.svg").read_text()
    assert "goodput (Mbit/s)" in bars and "link.bottleneck.loss" in bars and "bquic" in bars
    assert not list(figures.glob(".staging-*")) and not list(matrix_report.glob(".*.tmp-*"))


def _patches(written: list[Path]) -> int:
    svg = next(path for path in written if path.suffix == ".svg").read_text()
    return svg.count('<g id="patch_')


def test_a_sigma_ellipse_has_the_points_spread_along_its_axes() -> None:
    from quicbed.analysis.plots import sigma_ellipse

    rng = np.random.default_rng(1)
    along, across = rng.normal(0, 3.0, 20000), rng.normal(0, 1.0, 20000)
    turn = np.radians(30)
    xs, ys = 5 + along * np.cos(turn) - across * np.sin(turn), 7 + along * np.sin(turn) + across * np.cos(turn)
    (cx, cy), width, height, angle = sigma_ellipse(xs, ys)
    assert (cx, cy) == pytest.approx((5, 7), abs=0.05)
    assert width == pytest.approx(6.0, rel=0.02) and height == pytest.approx(2.0, rel=0.02)
    assert angle % 180 == pytest.approx(30, abs=1)
    assert sigma_ellipse(xs[:2], ys[:2]) is None


def test_goodput_against_delay_per_run(tmp_path: Path) -> None:
    """Pantheon's view: one point per run, the delay axis reversed; without a delay metric
    (these fixture runs have none) the report says why it drew none."""
    from quicbed.analysis import plots
    from quicbed.report.build import build_report as build

    runs = pd.DataFrame(
        {
            "transport": ["quic", "quic", "tcp", "tcp"],
            "owd_p95": [0.012, 0.014, 0.030, 0.035],
            "goodput": [18e6, 17e6, 19e6, 19.5e6],
        }
    )
    written = plots.delay_throughput_plot(
        runs,
        tmp_path / "scatter",
        delay="owd_p95",
        throughput="goodput",
        xlabel="one-way delay p95 (ms)",
        ylabel="goodput (Mbit/s)",
        group="transport",
        delay_scale=1e3,
        throughput_scale=1e-6,
    )
    svg = next(path for path in written if path.suffix == ".svg").read_text()
    assert "(lower is right)" in svg and "goodput (Mbit/s)" in svg and "tcp" in svg
    # an ellipse per cell of 3 runs or more: two cells of quic, one of tcp with 2 runs (none)
    cells = pd.DataFrame(
        {
            "transport": ["quic"] * 6 + ["tcp"] * 2,
            "cell": [0, 0, 0, 1, 1, 1, 2, 2],
            "owd_p95": [0.012, 0.014, 0.013, 0.020, 0.024, 0.022, 0.03, 0.031],
            "goodput": [18e6, 17e6, 17.5e6, 15e6, 14e6, 14.8e6, 19e6, 19.5e6],
        }
    )
    plain = _patches(
        plots.delay_throughput_plot(
            cells.drop(columns="cell"),
            tmp_path / "plain",
            delay="owd_p95",
            throughput="goodput",
            xlabel="d",
            ylabel="g",
            group="transport",
        )
    )
    per_cell = _patches(
        plots.delay_throughput_plot(
            cells,
            tmp_path / "cells",
            delay="owd_p95",
            throughput="goodput",
            xlabel="d",
            ylabel="g",
            group="transport",
            cell="cell",
        )
    )
    assert per_cell == plain + 1  # per transport: one for quic's 6 runs; per cell: quic's two cells
    folder = make_matrix_folder(tmp_path / "e")
    notes = build(folder, ReportOptions(max_runs_per_figure=1)).figures.notes
    assert any(note.startswith("Goodput against delay, per run: skipped (no counted run has both") for note in notes)


def test_bandwidth_share_for_parallel_flows_and_no_gains_without_transport_axis(tmp_path: Path) -> None:
    folder = make_parallel_folder(tmp_path / "shared")
    result = build_report(folder, ReportOptions())
    assert result.summary.baseline is None and not (folder / "gains.csv").exists()
    assert (folder / "report" / "share-c000-r001.png").exists() and (folder / "report" / "share-c000-r001.svg").exists()
    share = next(figure for figure in result.figures.figures if figure.stem == "share-c000-r001")
    assert "Jain's index" in share.caption
    # no server capture, qlog or ss samples here: those figures are skipped with a note
    notes = " ".join(result.figures.notes)
    assert "Inter-packet times at the server: skipped (no run has server.pcap)" in notes
    assert "Sender state over time: skipped (no run has server.qlog, tcp_probe.txt.gz or ss.txt" in notes
    assert (folder / "report" / "throughput-bins.png").exists()
    text = (folder / "index.html").read_text()
    assert "Relative gain" not in text and "share-c000-r001.png" in text


# --------------------------------------------------------------------------- command


def test_command_prints_the_summary_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_matrix_folder(tmp_path / "e")
    assert main(["report", str(folder), "--no-plots", "--metrics", "goodput,download_time"]) == 0
    out = capsys.readouterr().out
    assert "goodput" in out and "(Mbit/s)" in out and "download time" in out
    mean, half = np.mean(GOODPUT["quic"]) / 1e6, sps.sem(GOODPUT["quic"]) * sps.t.ppf(0.975, 2) / 1e6
    decimals = max(0, 1 - int(np.floor(np.log10(half))))  # the half-width to two significant digits
    assert f"{mean:.{decimals}f} ± {half:.{decimals}f}" in out
    assert "1 failed run(s) excluded" in out and "1 invalid run(s) excluded" in out
    assert "6 warm-up run(s) excluded" in out
    assert (folder / "summary.csv").exists() and not (folder / "report").exists()


# --------------------------------------------------------------------------- intervals of bounded metrics


def test_intervals_are_cut_at_the_metric_range(tmp_path: Path) -> None:
    """Catalogued metrics keep their interval within their range; unknown (unbounded) ones keep plain t.
    A CPU-bound share of 0, 0.9 and 1 has the t interval [-73 %, 200 %]: shown as [0, 100]."""
    from quicbed.report.tables import metric_table, overview_table

    folder = make_matrix_folder(tmp_path / "e")
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    offsets = {"c000-r001": -1.5, "c000-r002": 0.5, "c000-r003": 2.0}
    shares = {"c000-r001": 0.0, "c000-r002": 0.9, "c000-r003": 1.0}
    for line in lines:
        if line["metrics"]:
            line["metrics"]["custom_offset"] = offsets.get(line["run_id"], 0.0)
            line["metrics"]["cpu_client_bound"] = shares.get(line["run_id"], 0.5)
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = build_report(folder, ReportOptions(plots=False))
    summary = read_summary(folder)
    custom = summary_row(summary, "quic", 0, "custom_offset")
    values = np.array([-1.5, 0.5, 2.0])
    low, high = sps.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=sps.sem(values))
    assert custom["ci_method"] == "t" and (custom["ci_low"], custom["ci_high"]) == (
        pytest.approx(low),
        pytest.approx(high),
    )
    row = summary_row(summary, "quic", 0, "cpu_client_bound")
    assert row["ci_method"] == "t-truncated" and (row["ci_low_shown"], row["ci_high_shown"]) == (0, 100)
    for metric in ("loss", "goodput", "download_time", "ack_ratio", "ipt_server_short_share", "cpu_client_bound"):
        rows = summary[summary["metric"] == metric]
        assert (rows["ci_low"] >= 0).all() and (rows["ci_low"] <= rows["mean"] + 1e-12).all(), metric
    overview = overview_table(result.summary, ["goodput", "cpu_client_bound"])
    column = overview.header.index("client CPU-bound (%)")
    assert overview.rows[0][column] == "63.3 [0, 100]"
    for cells in overview.rows:  # every number shown lies in [0, 100] %
        numbers = [float(text) for text in re.findall(r"-?\d+(?:\.\d+)?", cells[column])]
        assert numbers and all(0 <= value <= 100 for value in numbers), cells[column]
    assert overview.rows[1][column] == "50 ± 0"  # equal values: a zero-width interval
    table = metric_table(result.summary, "cpu_client_bound")
    assert table.rows[0][4:7] == ["63.3", "−63.3 +36.7", "[0, 100]"]
    assert "63.3 [0, 100]" in (folder / "summary.md").read_text()


# --------------------------------------------------------------------------- the study's headline


def test_the_study_headline_comes_first_with_its_relative_change(tmp_path: Path) -> None:
    study = {
        "headline": {
            "metric": "goodput",
            "x": "link.bottleneck.loss",
            "compare": ["quic", "bquic"],
            "title": "Goodput per loss rate",
        },
        "metrics": ["download_time", "goodput"],
    }
    folder = make_matrix_folder(tmp_path / "e-study", study=study)
    build_report(folder, ReportOptions())
    text = (folder / "summary.md").read_text()
    assert text.index("## Goodput per loss rate") < text.index("## Overview")
    # counted goodputs: quic 8, 9, 10.5 and bquic 6, 7, 7.5 Mbit/s at loss 0, halved at loss 2:
    # 6.833 / 9.167 - 1 = -25 % in both
    caption = text[text.index("## Goodput per loss rate") : text.index("## Overview")]
    assert "relative change of bquic against quic" in caption
    for loss in (0, 2):
        change = re.search(rf"{loss}: ([+-]\d+)% \[([+-]\d+)%, ([+-]\d+)%\]", caption)
        assert change is not None, caption
        assert int(change.group(1)) == round(100 * (sum(GOODPUT["bquic"]) / sum(GOODPUT["quic"]) - 1)) == -25
        assert int(change.group(2)) < -25 < int(change.group(3))
    assert (folder / "report" / "headline-goodput-link.bottleneck.loss-0.png").exists() is False  # loss is x
    assert (folder / "report" / "headline-goodput.png").exists()
    html = (folder / "index.html").read_text()
    assert html.index("<h2>Goodput per loss rate</h2>") < html.index("<h2>Overview</h2>")
    # the tables show the study's metrics, not the catalogue's headline ones
    assert "## download time (s)" in text and "## goodput (Mbit/s)" in text and "## loss (%)" not in text


def test_parallel_flows_are_named_by_their_downloads_with_their_gaps_at_the_server(tmp_path: Path) -> None:
    """A fairness run: client.json and competitor.json name the server ports (4433 HTTP/3,
    8080 TCP in the parallel fixture), and the server capture (here the client capture
    standing in for it: the same two flows) gives each flow's inter-packet times."""
    folder = make_parallel_folder(tmp_path / "fair")
    for run in ("c000-r001", "c000-r002"):
        run_folder = folder / "runs" / run
        (run_folder / "quic.json").rename(run_folder / "client.json")
        (run_folder / "competitor.json").write_text(json.dumps({"server": {"port": 8080}}))
        shutil.copy(run_folder / "client.pcap", run_folder / "server.pcap")
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    for line in lines:
        line["competitor"] = {"name": "tcp", "kind": "tcp"}
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    build_report(folder, ReportOptions())
    for stem in ("share-c000-r001", "ipt-flows-c000-r001"):
        svg = (folder / "report" / f"{stem}.svg").read_text()
        assert "quic+tcp" in svg and "tcp (competitor)" in svg, stem


def test_a_baseline_too_uncertain_to_divide_by_is_compared_by_the_difference(tmp_path: Path) -> None:
    """quic's goodputs 1, 9 and 20 Mbit/s (its CI includes 0) against bquic's 6, 7, 7.5: the
    ratio's interval was -32 % [-188 %, +125 %], below what any ratio can reach. The report
    shows bquic - quic = -3.17 Mbit/s with Welch's interval instead, naming quic as the baseline."""
    study = {"headline": {"metric": "goodput", "x": "link.bottleneck.loss", "compare": ["quic", "bquic"]}}
    folder = make_matrix_folder(tmp_path / "e", study=study)
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    noisy = {"c000-r001": 1e6, "c000-r002": 9e6, "c000-r003": 20e6}
    for line in lines:
        if line["run_id"] in noisy:
            line["metrics"]["goodput"] = noisy[line["run_id"]]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    build_report(folder, ReportOptions())
    gains = pd.read_csv(folder / "gains.csv")
    row = gains[
        (gains["metric"] == "goodput") & (gains["transport"] == "bquic") & (gains["link.bottleneck.loss"] == 0)
    ].iloc[0]
    welch = sps.ttest_ind(GOODPUT["bquic"], list(noisy.values()), equal_var=False).confidence_interval()
    assert row["comparison"] == "absolute" and math.isnan(row["gain"]) and math.isnan(row["ci_low"])
    assert row["difference"] == pytest.approx(np.mean(GOODPUT["bquic"]) - 10e6)
    assert (row["difference_ci_low"], row["difference_ci_high"]) == (
        pytest.approx(welch.low),
        pytest.approx(welch.high),
    )
    assert row["verdict"] == "no significant difference" and "quic's 95 % CI includes 0" in row["note"]
    other = gains[
        (gains["metric"] == "goodput") & (gains["transport"] == "bquic") & (gains["link.bottleneck.loss"] == 2)
    ].iloc[0]
    assert other["comparison"] == "relative" and other["ci_low"] > -1
    text = (folder / "summary.md").read_text()
    assert "| link.bottleneck.loss | metric | transport vs quic | n | failed | gain (or difference) |" in text
    assert "| 0 | goodput (Mbit/s) | bquic | 3 vs 3 | 0 vs 1 timed out | -3.17 Mbit/s | [" in text
    assert "Where quic's mean is too uncertain to divide by" in text
    caption = text[text.index("## goodput by link.bottleneck.loss") : text.index("## Overview")]
    assert "0: -3.17 Mbit/s [" in caption and "(a difference: quic's mean is too uncertain to divide by)" in caption
    for low in re.findall(r": ([+-]\d+)% \[([+-]\d+)%", caption):
        assert int(low[1]) > -100


def test_a_mean_is_shown_to_the_precision_of_its_interval() -> None:
    from quicbed.report.tables import mean_pm

    assert mean_pm(0.92, 0.00123) == "0.9200 ± 0.0012"
    assert mean_pm(48.27, 12.6) == "48 ± 13"
    assert mean_pm(0.0144, 0.0989) == "0.014 ± 0.099"
    assert mean_pm(50.0, 0.0) == "50 ± 0" and mean_pm(3.0, float("nan")) == "3"
    assert mean_pm(1e-7, 3e-8) == "1e-07 ± 3e-08"


def test_moving_stations_are_drawn_the_downloads_client_first(tmp_path: Path) -> None:
    """Every station of the run's motion record that has samples gets its figure and CSV, the
    run's client first and named so; one without samples gets none."""
    folder = make_parallel_folder(tmp_path / "walk")
    samples = [
        {
            "t": 0.25 * i,
            "x": float(i),
            "y": 0.0,
            "ap": "ap1" if i < 6 else "ap2",
            "signal_dbm": {"ap1": -60.0 - i, "ap2": -80.0 + i},
            "mcs": 7,
            "rx_bytes": 100_000,
        }
        for i in range(1, 12)
    ]
    timeline = {"samples": samples, "events": [{"t": 1.4, "event": "associated", "ap": "ap2"}]}
    for run in ("c000-r001", "c000-r002"):
        run_folder = folder / "runs" / run
        (run_folder / "mac-stats.json").write_text(
            json.dumps(
                {
                    "motion": {
                        "interval_s": 0.25,
                        "stations": {"sta1": timeline, "sta2": timeline, "sta3": {"samples": [], "events": []}},
                    }
                }
            )
        )
        (run_folder / "run.json").write_text(json.dumps({"client": "sta2", "details": {}}))
    build_report(folder, ReportOptions())
    drawn = sorted(p.name for p in (folder / "report").glob("mobility-c000-r001*"))
    assert drawn == [
        f"mobility-c000-r001-{station}.{suffix}" for station in ("sta1", "sta2") for suffix in ("csv", "png", "svg")
    ]
    page = (folder / "index.html").read_text()
    assert page.index("Station sta2 (the download&#x27;s client)") < page.index("Station sta1 (another station)")
