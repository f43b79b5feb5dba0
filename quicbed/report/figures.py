"""The report's figures (docs/metrics.md, "Plots") in RESULTS/report/: those over runs
(study_figures) and those of single runs (run_figures), in the order the pages show them.
Nothing here raises for a missing or broken file: a step that fails becomes a note.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

from quicbed.report.artifacts import Progress, RunFiles
from quicbed.report.figure_context import FIGURES_FOLDER, FigureContext, Figures
from quicbed.report.files import move_into, remove_tree
from quicbed.report.load import LoadedResults
from quicbed.report.run_figures import (
    candidate_runs,
    focus_runs,
    ipt_figure,
    mobility_figures,
    sender_figures,
    sequence_figures,
    share_figures,
    throughput_bins_figure,
)
from quicbed.report.study_figures import (
    bar_figures,
    ccdf_figures,
    clients_figures,
    cpu_figure,
    delay_throughput_figure,
    headline_figures,
)
from quicbed.report.summary import Summary


def make_figures(
    results: LoadedResults,
    summary: Summary,
    metric_names: Sequence[str],
    max_runs: int = 3,
    progress: Progress | None = None,
) -> Figures:
    """Draw every figure into RESULTS/report/ (PNG and SVG); each file appears only when
    complete (drawn in a staging folder, then renamed)."""
    out = Figures()
    folder = results.path / FIGURES_FOLDER
    staging = folder / f".staging-{os.getpid()}"
    remove_tree(staging)
    staging.mkdir(parents=True)
    say = progress or (lambda _: None)
    context = FigureContext(results, summary, RunFiles(results.path, say), staging, max(1, max_runs), out)
    try:
        _guarded(context, "headline", lambda: headline_figures(context))
        say("drawing bar charts")
        _guarded(context, "bar charts", lambda: bar_figures(context, metric_names))
        _guarded(context, "CCDF", lambda: ccdf_figures(context))
        _guarded(context, "CPU by role", lambda: cpu_figure(context))
        _guarded(context, "goodput against delay", lambda: delay_throughput_figure(context))
        focus, where = focus_runs(context)
        candidates = candidate_runs(context, focus)
        if not candidates:
            context.skip("single-run figures", "no counted run")
        else:
            say("drawing single-run figures")
            for title, step in (
                ("inter-packet times", ipt_figure),
                ("throughput bins", throughput_bins_figure),
                ("sequence diagrams", sequence_figures),
            ):
                _guarded(context, title, partial(step, context, candidates, where))
        _guarded(context, "bandwidth share", lambda: share_figures(context))
        _guarded(context, "client distributions", lambda: clients_figures(context))
        _guarded(context, "mobility", lambda: mobility_figures(context))
        say("drawing the sender's state over time")
        _guarded(context, "sender state", lambda: sender_figures(context))
        move_into(sorted(staging.iterdir()), folder)
    finally:
        remove_tree(staging)
    out.notes.extend(context.files.problems)
    return out


def _guarded(context: FigureContext, title: str, step: Callable[[], None]) -> None:
    """Run one figure step; an unexpected failure becomes a note (the report goes on)."""
    try:
        step()
    except Exception as error:  # noqa: BLE001 (artifacts come from experiments that may have gone wrong)
        context.skip(title, f"{type(error).__name__}: {error}")
