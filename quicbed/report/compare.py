"""Results folders side by side: the same cells measured before and after a change, on two
machines, on two emulators, or by two experiment files that share axes. Per cell the reference
(the first folder) and another folder both have, and per metric: each folder's mean and runs,
and the other against the reference (relative gain with its interval, or the difference of the
means when the reference is too uncertain to divide by; quicbed.analysis.stats).

Cells are matched on the axes the folders share. An axis only some folders vary must be held
at one value in them, by their matrix or by ``where`` (``{"link.bottleneck.loss": "2"}``):
pooling its values would compare a mixture with a cell."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from quicbed.analysis import plots, stats
from quicbed.report.load import LoadedResults, ReportError, load_results
from quicbed.report.summary import catalogue_entry, counted

#: the table's columns besides the matched axes
COLUMNS = (
    "folder",
    "metric",
    "n_first",
    "n_second",
    "mean_first",
    "mean_second",
    "gain",
    "gain_low",
    "gain_high",
    "difference",
    "difference_low",
    "difference_high",
    "note",
)


@dataclass
class Comparison:
    folders: list[LoadedResults]  # the reference first
    axes: list[str]  # the axes cells are matched on
    #: one row per other folder, shared cell and metric ("first": the reference, "second": that folder)
    table: pd.DataFrame
    #: the counted runs of every folder, with its cell key (for figures)
    runs: list[pd.DataFrame] = field(default_factory=list)
    #: cells only some folders have: folder -> cells the reference lacks, or the reference's it lacks
    unmatched: dict[str, list[str]] = field(default_factory=dict)


def _cell_key(runs: pd.DataFrame, axes: list[str]) -> pd.Series:
    return (
        runs[axes].apply(lambda row: json.dumps({axis: str(row[axis]) for axis in axes}), axis=1)
        if axes
        else pd.Series(["{}"] * len(runs), index=runs.index, dtype=object)
    )


def _held(results: LoadedResults, runs: pd.DataFrame, axes: list[str], where: Mapping[str, str]) -> pd.DataFrame:
    """``runs`` with ``where`` applied to the axes this folder has; an error naming the axis
    when one of ``axes`` (those not every folder varies) still has several values."""
    for axis, value in where.items():
        if axis in results.axes:
            runs = runs[runs[axis].astype(str) == value]
            if runs.empty:
                raise ReportError(
                    f"{results.path}: no counted run has {axis}={value} (fix: one of "
                    f"{', '.join(sorted(set(results.runs[axis].astype(str))))})"
                )
    for axis in axes:
        values = sorted(set(runs[axis].astype(str)))
        if len(values) > 1:
            raise ReportError(
                f"{results.path} varies {axis} ({', '.join(values)}) and another folder does not: "
                f"its cells would be pooled over it (fix: --where {axis}={values[0]}, or compare "
                "folders with the same matrix)"
            )
    return runs


def compare_folders(
    folders: Sequence[Path],
    metrics: list[str],
    include_invalid: bool = False,
    confidence: float = 0.95,
    where: Mapping[str, str] | None = None,
) -> Comparison:
    """Every folder after the first against the first, cell by cell."""
    if len(folders) < 2:
        raise ReportError("compare needs two folders or more (fix: quicbed compare REFERENCE OTHER...)")
    where = dict(where or {})
    loaded = [load_results(folder) for folder in folders]
    unknown = [axis for axis in where if not any(axis in results.axes for results in loaded)]
    if unknown:
        raise ReportError(
            f"--where {unknown[0]}: no folder varies it (fix: one of "
            f"{', '.join(sorted({a for r in loaded for a in r.axes}))})"
        )
    shared = [axis for axis in loaded[0].axes if all(axis in results.axes for results in loaded)]
    shared = [axis for axis in shared if axis not in where]
    runs = []
    for results in loaded:
        own = results.runs[counted(results.runs, include_invalid)]
        held = _held(results, own, [axis for axis in results.axes if axis not in shared and axis not in where], where)
        runs.append(held.assign(_cell=_cell_key(held, shared)))
    reference = runs[0]
    rows: list[dict[str, Any]] = []
    unmatched: dict[str, list[str]] = {}
    for results, other in zip(loaded[1:], runs[1:]):
        keys = list(dict.fromkeys(reference["_cell"]))
        unmatched[str(results.path)] = sorted(set(other["_cell"]) - set(keys))
        missing = sorted(set(keys) - set(other["_cell"]))
        if missing:
            unmatched[f"{loaded[0].path} (not in {results.path})"] = missing
        for key in keys:
            part_a, part_b = reference[reference["_cell"] == key], other[other["_cell"] == key]
            if part_b.empty:
                continue
            for metric in metrics:
                row = _compared(part_a, part_b, metric, confidence)
                if row is not None:
                    rows.append({**json.loads(key), "folder": str(results.path), **row})
    if not rows:
        raise ReportError(
            f"{', '.join(map(str, folders))} share no cell with a counted run of {', '.join(metrics)} "
            "(fix: compare folders with shared axes, and name metrics they have with --metrics)"
        )
    return Comparison(loaded, shared, pd.DataFrame(rows, columns=[*shared, *COLUMNS]), runs, unmatched)


def _compared(part_a: pd.DataFrame, part_b: pd.DataFrame, metric: str, confidence: float) -> dict[str, Any] | None:
    if metric not in part_a or metric not in part_b:
        return None
    xa, xb = part_a[metric].dropna().to_numpy(float), part_b[metric].dropna().to_numpy(float)
    if not len(xa) or not len(xb):
        return None
    row: dict[str, Any] = {
        "metric": metric,
        "n_first": len(xa),
        "n_second": len(xb),
        "mean_first": float(xa.mean()),
        "mean_second": float(xb.mean()),
        "gain": math.nan,
        "gain_low": math.nan,
        "gain_high": math.nan,
        "difference": float(xb.mean() - xa.mean()),
        "difference_low": math.nan,
        "difference_high": math.nan,
        "note": "",
    }
    try:
        result = stats.compare_means(xa, xb, confidence)
    except ValueError as error:  # fewer than two runs on a side
        row["note"] = str(error)
    else:
        row.update(difference_low=result.difference.low, difference_high=result.difference.high)
        if result.gain is not None:
            row.update(gain=result.gain.gain, gain_low=result.gain.low, gain_high=result.gain.high)
        row["note"] = result.why_absolute
    return row


def figures(comparison: Comparison, metrics: list[str], folder: Path, confidence: float = 0.95) -> list[Path]:
    """Per metric, ``compare-METRIC.png/.svg``: each matched cell's mean with its confidence
    interval, one bar per folder (labelled by its folder name), and the data as CSV."""
    folder.mkdir(parents=True, exist_ok=True)
    names = _short_names([results.path for results in comparison.folders])
    written: list[Path] = []
    for metric in metrics:
        frames = []
        for name, runs in zip(names, comparison.runs):
            part = runs.dropna(subset=[metric]) if metric in runs else runs.iloc[:0]
            if not part.empty:
                frames.append(
                    stats.summarize(
                        part.assign(cell=part["_cell"].map(_cell_label)), "cell", metric, confidence
                    ).assign(folder=name)
                )
        if len(frames) < 2:
            continue
        summary = pd.concat(frames, ignore_index=True)
        entry = catalogue_entry(metric)
        scaled = summary.assign(**{column: summary[column] * entry.scale for column in ("mean", "ci_low", "ci_high")})
        stem = folder / f"compare-{metric}"
        written += plots.bar_ci(
            scaled, stem, x="cell", hue="folder", ylabel=entry.axis_label, xlabel=", ".join(comparison.axes) or None
        )
        scaled.to_csv(stem.with_suffix(".csv"), index=False)
        written.append(stem.with_suffix(".csv"))
    return written


def _cell_label(key: str) -> str:
    return ", ".join(str(value) for value in json.loads(key).values()) or "all runs"


def _short_names(paths: Sequence[Path]) -> list[str]:
    """Folder names, or the whole paths when two folders have the same name."""
    names = [path.name for path in paths]
    if len(set(names)) == len(names):
        return names
    return [str(path) for path in paths]


def shown(row: pd.Series) -> tuple[str, str, str]:
    """The two means and the comparison, in the metric's display unit."""
    entry = catalogue_entry(str(row["metric"]))
    unit = f" {entry.unit}" if entry.unit else ""

    def value(x: float) -> str:
        return f"{x * entry.scale:.4g}"

    if not math.isnan(row["gain"]):
        change = f"{row['gain'] * 100:+.1f} % [{row['gain_low'] * 100:+.1f}, {row['gain_high'] * 100:+.1f}]"
    elif not math.isnan(row["difference_low"]):
        change = (
            f"{value(row['difference'])}{unit} [{value(row['difference_low'])}, {value(row['difference_high'])}]"
            f" ({row['note']})"
        )
    else:
        change = f"{value(row['difference'])}{unit} ({row['note']})"
    return (
        f"{value(row['mean_first'])}{unit} (n={row['n_first']})",
        f"{value(row['mean_second'])}{unit} (n={row['n_second']})",
        change,
    )
