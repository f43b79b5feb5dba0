"""Two results folders side by side: the same cells measured before and after a change, on two
machines or on two emulators. Per cell both folders have, and per metric: each folder's mean
and runs, and the second against the first (relative gain with its interval, or the difference
of the means when the first is too uncertain to divide by; quicbed.analysis.stats)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from quicbed.analysis import stats
from quicbed.report.load import ReportError, LoadedResults, load_results
from quicbed.report.summary import catalogue_entry, counted


@dataclass
class Comparison:
    first: LoadedResults
    second: LoadedResults
    #: one row per shared cell and metric
    table: pd.DataFrame
    #: cells only one folder has, by folder
    unmatched: dict[str, list[str]] = field(default_factory=dict)


def _cell_key(runs: pd.DataFrame, axes: list[str]) -> pd.Series:
    return runs[axes].apply(lambda row: json.dumps({axis: str(row[axis]) for axis in axes}), axis=1) \
        if axes else pd.Series(["{}"] * len(runs), index=runs.index)


def compare_folders(first: Path, second: Path, metrics: list[str], include_invalid: bool = False,
                    confidence: float = 0.95) -> Comparison:
    a, b = load_results(first), load_results(second)
    axes = [axis for axis in a.axes if axis in b.axes]
    if set(a.axes) != set(b.axes):
        raise ReportError(f"{first} varies {', '.join(a.axes) or 'nothing'} and {second} "
                          f"{', '.join(b.axes) or 'nothing'}: cells can only be matched on the same axes (fix: "
                          "compare folders of the same experiment file, or of files with the same matrix)")
    runs_a, runs_b = (r.runs[counted(r.runs, include_invalid)] for r in (a, b))
    keys_a, keys_b = _cell_key(runs_a, axes), _cell_key(runs_b, axes)
    shared = [key for key in dict.fromkeys(keys_a) if key in set(keys_b)]
    unmatched = {str(first): sorted(set(keys_a) - set(keys_b)), str(second): sorted(set(keys_b) - set(keys_a))}
    rows: list[dict[str, Any]] = []
    for key in shared:
        cell = json.loads(key)
        part_a, part_b = runs_a[keys_a == key], runs_b[keys_b == key]
        for metric in metrics:
            if metric not in part_a or metric not in part_b:
                continue
            xa, xb = part_a[metric].dropna().to_numpy(float), part_b[metric].dropna().to_numpy(float)
            if not len(xa) or not len(xb):
                continue
            row: dict[str, Any] = {**cell, "metric": metric, "n_first": len(xa), "n_second": len(xb),
                                   "mean_first": float(xa.mean()), "mean_second": float(xb.mean()),
                                   "gain": math.nan, "gain_low": math.nan, "gain_high": math.nan,
                                   "difference": float(xb.mean() - xa.mean()), "difference_low": math.nan,
                                   "difference_high": math.nan, "note": ""}
            try:
                result = stats.compare_means(xa, xb, confidence)
            except ValueError as error:  # fewer than two runs on a side
                row["note"] = str(error)
            else:
                row.update(difference_low=result.difference.low, difference_high=result.difference.high)
                if result.gain is not None:
                    row.update(gain=result.gain.gain, gain_low=result.gain.low, gain_high=result.gain.high)
                row["note"] = result.why_absolute
            rows.append(row)
    if not rows:
        raise ReportError(f"{first} and {second} share no cell with a counted run of {', '.join(metrics)} "
                          "(fix: compare folders of the same experiment, and name metrics both have with --metrics)")
    return Comparison(a, b, pd.DataFrame(rows), unmatched)


def shown(row: pd.Series) -> tuple[str, str, str]:
    """The two means and the comparison, in the metric's display unit."""
    entry = catalogue_entry(str(row["metric"]))
    unit = f" {entry.unit}" if entry.unit else ""

    def value(x: float) -> str:
        return f"{x * entry.scale:.4g}"

    if not math.isnan(row["gain"]):
        change = f"{row['gain'] * 100:+.1f} % [{row['gain_low'] * 100:+.1f}, {row['gain_high'] * 100:+.1f}]"
    elif not math.isnan(row["difference_low"]):
        change = (f"{value(row['difference'])}{unit} [{value(row['difference_low'])}, {value(row['difference_high'])}]"
                  f" ({row['note']})")
    else:
        change = f"{value(row['difference'])}{unit} ({row['note']})"
    return (f"{value(row['mean_first'])}{unit} (n={row['n_first']})",
            f"{value(row['mean_second'])}{unit} (n={row['n_second']})", change)
