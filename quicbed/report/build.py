"""The whole report of one results folder: statistics, figures, summary.csv, summary.md
and index.html (each file written atomically)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from quicbed.analysis.catalogue import HEADLINE
from quicbed.errors import SpecError
from quicbed.report.artifacts import Progress
from quicbed.report.figure_context import Figures
from quicbed.report.figures import make_figures
from quicbed.report.files import write_text_atomic
from quicbed.report.html import render_html
from quicbed.report.load import ReportError, LoadedResults, load_results
from quicbed.report.markdown import render_markdown
from quicbed.report.summary import (
    Summary,
    choose_baseline,
    counted,
    select_metrics,
    summarize_results,
)

SUMMARY_CSV = "summary.csv"
#: one row per run: its cell's axes, status and every metric in base units (for pandas, R, a spreadsheet)
RUNS_CSV = "runs.csv"
GAINS_CSV = "gains.csv"
SUMMARY_MD = "summary.md"
INDEX_HTML = "index.html"


@dataclass
class ReportOptions:
    baseline: str | None = None  # transport the gains compare against (default: the matrix's first)
    metrics: list[str] | None = None  # metrics to tabulate and plot (default: the headline ones present)
    include_invalid: bool = False
    plots: bool = True
    max_runs_per_figure: int = 3
    progress: Progress | None = None


@dataclass
class ReportResult:
    results: LoadedResults
    summary: Summary
    metrics: list[str]
    figures: Figures
    written: list[Path] = field(default_factory=list)


def study_metrics(results: LoadedResults) -> tuple[str, ...]:
    """The metrics the experiment's study section asks the tables for (none if it cannot be read)."""
    try:
        study = results.parsed_study()
    except SpecError:
        return ()  # the headline figure's note says why
    return study.metrics if study else ()


def study_headline_metric(results: LoadedResults) -> str | None:
    """The metric of the experiment's headline comparison (None without one, or if the study
    section cannot be read)."""
    try:
        study = results.parsed_study()
    except SpecError:
        return None
    return study.headline.metric if study and study.headline else None


def build_report(folder: Path, options: ReportOptions | None = None) -> ReportResult:
    """Write the report files into ``folder``; :class:`ReportError` when there is nothing to
    report on (no results.jsonl, no complete record, or no run that counts: then the pages
    are still written, listing the runs and their errors)."""
    options = options or ReportOptions()
    say = options.progress or (lambda _: None)
    results = load_results(folder)
    baseline = choose_baseline(results, options.baseline)
    metrics = select_metrics(results, options.metrics, study_metrics(results) or HEADLINE, options.include_invalid)
    summary = summarize_results(results, metrics, baseline, options.include_invalid, study_headline_metric(results))
    any_counted = bool(counted(results.runs, options.include_invalid).any())
    figures = Figures()
    if options.plots and any_counted:
        figures = make_figures(results, summary, metrics, options.max_runs_per_figure, say)
    elif not options.plots:
        figures.notes.append("figures not drawn (--no-plots)")
    written = [
        write_text_atomic(folder / SUMMARY_CSV, summary.table.to_csv(index=False)),
        write_text_atomic(folder / RUNS_CSV, results.runs.to_csv(index=False)),
    ]
    outputs = [SUMMARY_CSV, RUNS_CSV]
    if not summary.gains.empty:
        written.append(write_text_atomic(folder / GAINS_CSV, summary.gains.to_csv(index=False)))
        outputs.append(GAINS_CSV)
    written.append(write_text_atomic(folder / SUMMARY_MD, render_markdown(results, summary, metrics, figures)))
    outputs.append(SUMMARY_MD)
    written.append(write_text_atomic(folder / INDEX_HTML, render_html(results, summary, metrics, figures, outputs)))
    if not any_counted:
        runs = results.runs
        statuses = ", ".join(f"{count} {status}" for status, count in runs["status"].value_counts().items())
        first = next(
            (
                f"{run.run_id!s}: {run.error or run.invalid_reasons!s}"
                for run in runs.itertuples()
                if run.status != "ok" and (run.error or run.invalid_reasons)
            ),
            "",
        )
        hint = (
            " (fix: --include-invalid counts invalid runs)"
            if (runs["status"] == "invalid").any() and not options.include_invalid
            else f" (fix: see {folder}/runs/RUN/logs/ for why they failed, then run the experiment again)"
        )
        raise ReportError(
            f"no run in {folder} counts for the statistics ({statuses or 'no runs'}"
            f"{'; only warm-up runs are ok' if (runs['status'] == 'ok').any() else ''})"
            f"{'; first: ' + first if first else ''}; {folder / INDEX_HTML} lists them{hint}"
        )
    return ReportResult(results, summary, metrics, figures, written)
