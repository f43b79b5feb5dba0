"""What every figure step draws through and what the report keeps of each figure: the
context (the results, the summary, the runs' files, a staging folder) and the figure files."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from quicbed.report.artifacts import RunFiles
from quicbed.report.load import LoadedResults
from quicbed.report.summary import Summary, counted

FIGURES_FOLDER = "report"


@dataclass
class FigureFile:
    """One figure: ``stem`` in the report folder with a PNG and an SVG."""

    stem: str
    title: str
    caption: str
    files: list[Path]  # relative to the results folder

    @property
    def png(self) -> Path:
        return next(path for path in self.files if path.suffix == ".png")

    @property
    def svg(self) -> Path | None:
        return next((path for path in self.files if path.suffix == ".svg"), None)

    @property
    def csv(self) -> Path | None:
        """The figure's data, when it is written beside it."""
        return next((path for path in self.files if path.suffix == ".csv"), None)


@dataclass
class Figures:
    figures: list[FigureFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # figures skipped, and why
    #: the study's headline figures (quicbed.spec.study), shown before the tables
    headline: list[FigureFile] = field(default_factory=list)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-").lower() or "all"


@dataclass
class FigureContext:
    """What a figure step reads (the results, the summary, the runs' files) and where it draws
    (the staging folder; the figures and notes so far)."""

    results: LoadedResults
    summary: Summary
    files: RunFiles
    staging: Path
    max_runs: int
    out: Figures

    @property
    def runs(self) -> pd.DataFrame:
        return self.results.runs[counted(self.results.runs, self.summary.include_invalid)]

    def draw(self, stem: str, title: str, caption: str, plot: Callable[[Path], list[Path]]) -> None:
        """Call ``plot(staging/stem)``; a failure becomes a note, not a crash."""
        try:
            written = plot(self.staging / stem)
        except Exception as error:  # noqa: BLE001 (a broken artifact must not stop the report)
            self.out.notes.append(f"{title}: skipped ({type(error).__name__}: {error})")
            return
        self.out.figures.append(
            FigureFile(stem, title, caption, [Path(FIGURES_FOLDER) / path.name for path in written])
        )

    def skip(self, title: str, reason: str) -> None:
        self.out.notes.append(f"{title}: skipped ({reason})")
