"""RESULTS/summary.md: the summary tables in display units, the gains, the figures."""

from __future__ import annotations

from quicbed.report.figure_context import FigureFile, Figures
from quicbed.report.hosts import hosts_table
from quicbed.report.load import LoadedResults
from quicbed.report.summary import Summary
from quicbed.report.tables import (
    counts_table,
    gains_explanation,
    gains_table,
    headlines,
    metric_heading,
    metric_table,
    overview_table,
)

#: run ids a line about runs of unknown CPU state names before "…"
NAMED_RUNS = 5


def excluded_runs(results: LoadedResults, include_invalid: bool) -> list[str]:
    """One line per failed or invalid run with its reason."""
    runs = results.runs
    lines = []
    for _, run in runs[runs["status"] != "ok"].iterrows():
        reason = run["error"] if run["status"] != "invalid" else run["invalid_reasons"]
        counted = " (counted: --include-invalid)" if run["status"] == "invalid" and include_invalid else ""
        warmup = " (warm-up)" if run["warmup"] else ""
        lines.append(f"{run['run_id']} {run['status']}{warmup}{counted}: {reason or 'no reason recorded'}")
    return lines


def cpu_bound_runs(results: LoadedResults) -> list[str]:
    """One line per counted run that was CPU-bound, with its reasons."""
    runs = results.runs
    flagged = runs[(runs["cpu_bound_reasons"] != "") & ~runs["warmup"] & (runs["status"] == "ok")]
    return [f"{run['run_id']}: {run['cpu_bound_reasons']}" for _, run in flagged.iterrows()]


def cpu_unknown_runs(results: LoadedResults) -> list[str]:
    """One line per reason a counted run's CPU state is unknown: the reason, how many runs and
    the first of them (a host without accounting gives the same reason for every run)."""
    runs = results.runs
    unknown = runs[(runs["cpu_unknown_reasons"] != "") & ~runs["warmup"] & (runs["status"] == "ok")]
    lines = []
    for reason, part in unknown.groupby("cpu_unknown_reasons", sort=False):
        names = list(part["run_id"])
        shown = ", ".join(names[:NAMED_RUNS]) + (", …" if len(names) > NAMED_RUNS else "")
        lines.append(f"{reason}: {len(names)} run(s): {shown}")
    return lines


def _figure_markdown(figure: FigureFile) -> list[str]:
    svg = f" ([SVG]({figure.svg.as_posix()}))" if figure.svg else ""
    data = f" ([CSV]({figure.csv.as_posix()}))" if figure.csv else ""
    return [f"![{figure.title}]({figure.png.as_posix()})", "", f"{figure.caption}{svg}{data}", ""]


def render_markdown(results: LoadedResults, summary: Summary, metrics: list[str], figures: Figures) -> str:
    parts = [f"# {results.name}", ""]
    if results.description:
        parts += [results.description, ""]
    counted = "ok and invalid" if summary.include_invalid else "ok"
    parts += [
        (
            f"Results folder `{results.path.name}`: {len(results.runs)} run(s) recorded. Statistics use "
            f"{counted} runs that are not warm-up runs; mean ± half-width of the 95 % Student-t confidence "
            "interval. Base-unit values: `summary.csv`."
        ),
        "",
    ]
    for headline in headlines(results.runs, summary):
        parts += [f"**{headline}**", ""]
    for figure in figures.headline:
        parts += [f"## {figure.title}", "", *_figure_markdown(figure)]
    parts += [
        "## Overview",
        "",
        overview_table(summary, metrics).markdown(),
        "",
        "## Runs per cell",
        "",
        counts_table(summary).markdown(),
        "",
    ]
    hosts = hosts_table(results.metadata, len(results.runs))
    if hosts is not None:
        parts += ["## Hosts", "", hosts.markdown(), ""]
    excluded = excluded_runs(results, summary.include_invalid)
    if excluded:
        parts += ["Failed and invalid runs:", "", *(f"- {line}" for line in excluded), ""]
    flagged = cpu_bound_runs(results)
    if flagged:
        parts += [
            "CPU-bound runs (counted; `validity: {cpu_bound: exclude}` leaves them out):",
            "",
            *(f"- {line}" for line in flagged),
            "",
        ]
    unknown = cpu_unknown_runs(results)
    if unknown:
        parts += [
            "Runs whose CPU state is unknown (counted; whether they were CPU-bound cannot be told):",
            "",
            *(f"- {line}" for line in unknown),
            "",
        ]
    for column in metrics:
        parts += [f"## {metric_heading(column)}", "", metric_table(summary, column).markdown(), ""]
    if summary.baseline and not summary.gains.empty:
        parts += [
            f"## Relative gain over {summary.baseline}",
            "",
            gains_explanation(summary.baseline),
            "",
            gains_table(summary, metrics).markdown(),
            "",
        ]
    if figures.figures:
        parts += ["## Figures", ""]
        for figure in figures.figures:
            parts += [f"### {figure.title}", "", *_figure_markdown(figure)]
    notes = [*results.warnings, *figures.notes]
    if notes:
        parts += ["## Notes", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(parts)
