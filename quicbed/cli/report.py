"""quicbed report: statistics, figures and pages for a results folder."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.table import Table

from quicbed.cli.console import output_console
from quicbed.errors import QuicbedError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="summarise a results folder: tables, figures, summary.csv/.md, index.html",
        description="Summarise a results folder written by 'quicbed run': per matrix cell and metric the mean "
        "with its 95 % Student-t confidence interval, median and std; the relative gain of each "
        "transport over a baseline; figures (PNG and SVG in RESULTS/report/). Writes "
        "RESULTS/summary.csv, summary.md and index.html and prints the summary table. Runs that "
        "failed, are invalid or are warm-up runs do not count.",
    )
    parser.add_argument("results", type=Path, help="results folder, e.g. results/e4-random-loss-20261121-120000")
    parser.add_argument(
        "--baseline",
        metavar="TRANSPORT",
        help="transport the gains are relative to (default: the first transport of the matrix)",
    )
    parser.add_argument(
        "--metrics",
        metavar="A,B",
        help="metrics to tabulate and plot, comma-separated "
        "(default: the headline metrics the runs have; summary.csv always has all)",
    )
    parser.add_argument(
        "--include-invalid", action="store_true", help="count runs marked invalid in the statistics too"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the figures (fast: reads no captures)")
    parser.add_argument(
        "--max-runs-per-figure",
        type=int,
        default=3,
        metavar="N",
        help="runs per transport in the inter-packet-time figure, and bandwidth-share figures at most (default 3)",
    )
    parser.set_defaults(handler=handle)


def _progress(started: float) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(f"report [{time.monotonic() - started:5.1f} s] {message}", file=sys.stderr, flush=True)

    return say


def handle(args: argparse.Namespace) -> int:
    folder: Path = args.results
    from quicbed.report import ReportOptions, build_report
    from quicbed.report.markdown import excluded_runs
    from quicbed.report.tables import headlines, overview_table

    if args.max_runs_per_figure < 1:
        raise QuicbedError("--max-runs-per-figure must be at least 1")
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()] if args.metrics else None
    options = ReportOptions(
        baseline=args.baseline,
        metrics=metrics,
        include_invalid=args.include_invalid,
        plots=not args.no_plots,
        max_runs_per_figure=args.max_runs_per_figure,
        progress=_progress(time.monotonic()),
    )
    report = build_report(folder, options)
    for warning in report.results.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    # a pipe or a log file gets the whole table rather than 80 columns of wrapped cells
    console = output_console()
    overview = overview_table(report.summary, report.metrics)
    table = Table(title=f"{report.results.name}: mean ± 95 % CI half-width")
    cell_columns = len(overview.header) - len(report.metrics) - 1
    for number, heading in enumerate(overview.header):
        table.add_column(
            heading.replace(" (", "\n("),
            justify="left" if number < cell_columns else "right",
            no_wrap=number <= cell_columns,
        )
    for row in overview.rows:
        table.add_row(*row)
    console.print(table)
    runs = report.results.runs
    measured = runs[~runs["warmup"]]
    for status in ("failed", "invalid"):
        count = (
            int((measured["status"] == status).sum())
            if status == "invalid"
            else int((~measured["status"].isin({"ok", "invalid"})).sum())
        )
        if count:
            verb = "counted (--include-invalid)" if status == "invalid" and args.include_invalid else "excluded"
            print(f"{count} {status} run(s) {verb}")
    warmups = int(runs["warmup"].sum())
    if warmups:
        print(f"{warmups} warm-up run(s) excluded")
    for headline in headlines(report.results.runs, report.summary):
        print(headline)
    for line in excluded_runs(report.results, args.include_invalid):
        print(f"  {line}")
    for note in report.figures.notes:
        print(f"note: {note}", file=sys.stderr)
    if report.summary.baseline:
        print(f"gains relative to {report.summary.baseline}: summary.md, index.html, gains.csv")
    print(
        f"figures: {len(report.figures.figures)} in {folder / 'report'}" if report.figures.figures else "figures: none"
    )
    print(f"report: {folder / 'index.html'}  (also {folder / 'summary.md'}, {folder / 'summary.csv'})")
    return 0
