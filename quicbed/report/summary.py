"""Statistics per matrix cell and metric, and relative gains against a baseline transport.

Runs that count: status ``ok`` (and ``invalid`` with ``include_invalid``), not warm-up.
Failed runs are counted beside n in every table (``failed``, of which ``timed_out``). A run
whose download timed out is a result, not a gap: it is a right-censored observation (the
download would have taken longer than the limit). The mean of the completed runs leaves it
out, so each row also carries ``median_with_timeouts``: the median of the completed runs' values
with the timed-out runs ranked worst (the longest time, the lowest goodput), for metrics with a
better direction. With every timeout censored at one limit beyond every completed download,
this is the Kaplan-Meier estimate of the median; it is infinite (shown "timed out") when at
least half the runs timed out. Other failures (a crashed process) say nothing about the
network and are only counted.
Values stay in base units (catalogue); ``*_shown`` columns carry them in display units.
Confidence intervals are Student t, cut at the metric's declared range (catalogue ``bounds``;
``ci_method`` "t-truncated" then: :func:`quicbed.analysis.stats.metric_mean_ci`).
``ci_half_width`` is ``(ci_high - ci_low) / 2``; a cut interval is not symmetric about the mean,
so read ``ci_low``/``ci_high``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis.catalogue import Metric, metric
from quicbed.analysis.stats import compare_means, metric_mean_ci
from quicbed.report.load import ReportError, LoadedResults

#: display unit -> the base unit results.jsonl stores (docs/results.md, "Metrics")
BASE_UNITS = {
    "s": "s",
    "ms": "s",
    "Mbit/s": "bit/s",
    "kbit/s": "bit/s",
    "%": "share",
    "kB": "bytes",
    "MB": "bytes",
    "": "",
}

SUMMARY_COLUMNS = (
    "metric",
    "label",
    "n",
    "mean",
    "ci_low",
    "ci_high",
    "ci_half_width",
    "ci_method",
    "median",
    "std",
    "base_unit",
    "unit",
    "scale",
    "mean_shown",
    "ci_low_shown",
    "ci_high_shown",
    "ci_half_width_shown",
    "median_shown",
    "std_shown",
    "runs_total",
    "failed_excluded",
    "invalid_excluded",
    "warmup_excluded",
    "timed_out",
    "median_with_timeouts",
    "median_with_timeouts_shown",
)
GAIN_COLUMNS = (
    "metric",
    "label",
    "baseline",
    "transport",
    "n_baseline",
    "n_transport",
    "mean_baseline",
    "mean_transport",
    "comparison",
    "gain",
    "ci_low",
    "ci_high",
    "difference",
    "difference_ci_low",
    "difference_ci_high",
    "better",
    "verdict",
    "note",
    "failed_baseline",
    "failed_transport",
    "timed_out_baseline",
    "timed_out_transport",
    "median_with_timeouts_baseline",
    "median_with_timeouts_transport",
    "hosts",
)
#: what the clients (quicbed's, curl, the native one) write when the download hit the timeout
TIMEOUT_ERROR = re.compile(r"timeout after|timed out", re.IGNORECASE)


def catalogue_entry(column: str) -> Metric:
    """The catalogue entry of a metric column (``metric.NAME`` when renamed on load)."""
    return metric(column.removeprefix("metric."))


def base_unit(entry: Metric) -> str:
    return BASE_UNITS.get(entry.unit, "base")


@dataclass
class Summary:
    """The statistics of one results folder."""

    table: pd.DataFrame  # one row per cell x metric (cell columns, then SUMMARY_COLUMNS)
    gains: pd.DataFrame  # one row per other-axes value x metric x transport (empty: no gains)
    counts: pd.DataFrame  # one row per cell: runs, used (counted), failed, invalid, warmup, attempts, ...
    baseline: str | None
    include_invalid: bool
    cell_columns: list[str]  # cell_index, cell, the axes
    #: per cell with invalid attempts and valid runs: the headline metric of both (:func:`rerun_bias`)
    bias: pd.DataFrame = field(default_factory=pd.DataFrame)
    bias_metric: str | None = None


def counted(runs: pd.DataFrame, include_invalid: bool) -> pd.Series:
    """Which runs enter the statistics."""
    statuses = {"ok", "invalid"} if include_invalid else {"ok"}
    return runs["status"].isin(statuses) & ~runs["warmup"]


def failed(runs: pd.DataFrame) -> pd.Series:
    """Measured (not warm-up) runs that did not complete."""
    return ~runs["warmup"] & ~runs["status"].isin({"ok", "invalid"})


def timed_out(runs: pd.DataFrame) -> pd.Series:
    """Failed runs whose download hit the experiment's timeout (censored observations)."""
    return failed(runs) & runs["error"].fillna("").astype(str).str.contains(TIMEOUT_ERROR)


def median_with_timeouts(values: Any, timeouts: int, better: str | None) -> float:
    """The median of ``values`` and ``timeouts`` runs ranked worst (``better`` "lower": +inf,
    "higher": -inf); infinite when at least half timed out, NaN without a better direction or runs."""
    completed = np.asarray(pd.Series(values).dropna(), dtype=float)
    if better not in ("lower", "higher") or completed.size + timeouts == 0:
        return math.nan
    worst = math.inf if better == "lower" else -math.inf
    ranked = np.sort(np.concatenate([completed, np.full(timeouts, worst)]))
    middle = ranked.size // 2
    # (np.median would average inf and -inf halves into nan; the lower or upper middle decides)
    if ranked.size % 2:
        return float(ranked[middle])
    low, high = ranked[middle - 1], ranked[middle]
    return float(worst) if worst in (low, high) else float((low + high) / 2)


def cell_counts(results: LoadedResults, include_invalid: bool) -> pd.DataFrame:
    """Per cell: runs, ``used`` (counted), of those ``cpu_bound`` and ``cpu_unknown`` (no CPU
    figures, or only some), ``failed`` (of which ``timed_out``), ``invalid``, ``warmup``, ``remade`` (kept runs that
    were made again), and ``attempts`` (completed attempts, the superseded invalid ones
    included) of which ``invalid_attempts``: the share of the cell's attempts that did not
    count, which the kept runs alone hide."""
    runs = results.runs
    used = counted(runs, include_invalid)
    measured = ~runs["warmup"]
    completed = measured & runs["status"].isin({"ok", "invalid"})
    invalid = measured & (runs["status"] == "invalid")
    cpu_bound = used & (runs["cpu_bound_reasons"] != "")
    cpu_unknown = used & (runs["cpu_unknown_reasons"] != "")
    remade = measured & (runs["attempt"] > 1)
    earlier = runs["earlier_invalid"].where(measured, 0)
    frame = runs[["cell_index", "cell", *results.axes]].assign(
        used=used,
        failed=failed(runs),
        timed_out=timed_out(runs),
        invalid=invalid,
        warmup=runs["warmup"],
        cpu_bound=cpu_bound,
        cpu_unknown=cpu_unknown,
        remade=remade,
        attempts=completed.astype(int) + earlier,
        invalid_attempts=invalid.astype(int) + earlier,
    )
    grouped = frame.groupby("cell_index", sort=True)
    first = grouped[["cell", *results.axes]].first()
    totals = (
        grouped[
            [
                "used",
                "failed",
                "timed_out",
                "invalid",
                "warmup",
                "cpu_bound",
                "cpu_unknown",
                "remade",
                "attempts",
                "invalid_attempts",
            ]
        ]
        .sum()
        .astype(int)
    )
    totals.insert(0, "runs", grouped.size())
    return first.join(totals).reset_index()


BIAS_COLUMNS = ("metric", "n_invalid", "mean_invalid", "n_valid", "mean_valid", "ci_low", "ci_high", "outside")


def rerun_bias(results: LoadedResults, metric_name: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per cell with both: the metric over its invalid attempts (superseded or kept) against its
    valid runs, and whether the invalid attempts' mean lies ``outside`` the valid runs' CI.

    Why: an invalid run is made again and only its last attempt is kept. If the runs that go
    invalid are the fast ones (a transfer that pushes the channel behind), the kept runs lean
    slow; the reader needs to see that the left-out attempts looked different. A mean outside
    the valid runs' interval is the check because one invalid attempt is common, and one value
    has no variance for a test of its own."""
    entry = catalogue_entry(metric_name)
    columns = ["cell_index", "cell", *results.axes, "status", "warmup", metric_name]
    frames = [results.runs] + ([results.superseded] if results.superseded is not None else [])
    attempts = pd.concat([frame.reindex(columns=columns) for frame in frames if not frame.empty])
    attempts = attempts[~attempts["warmup"].astype(bool) & attempts["status"].isin({"ok", "invalid"})]
    rows = []
    for cell_index, part in attempts.groupby("cell_index", sort=True):
        invalid = part.loc[part["status"] == "invalid", metric_name].dropna().astype(float)
        # the valid runs are the kept ones: an ok attempt is superseded only when a resumed run is made again
        kept = results.runs[
            (results.runs["cell_index"] == cell_index) & (results.runs["status"] == "ok") & ~results.runs["warmup"]
        ]
        interval = metric_mean_ci(kept[metric_name] if metric_name in kept else [], entry.bounds, confidence)
        if invalid.empty or interval.n < 2:
            continue
        mean_invalid = float(invalid.mean())
        rows.append(
            {
                "cell_index": cell_index,
                "cell": part["cell"].iloc[0],
                **{axis: part[axis].iloc[0] for axis in results.axes},
                "metric": metric_name,
                "n_invalid": int(invalid.size),
                "mean_invalid": mean_invalid,
                "n_valid": interval.n,
                "mean_valid": interval.mean,
                "ci_low": interval.low,
                "ci_high": interval.high,
                "outside": bool(mean_invalid < interval.low or mean_invalid > interval.high),
            }
        )
    return pd.DataFrame(rows, columns=["cell_index", "cell", *results.axes, *BIAS_COLUMNS])


def summarize_cells(results: LoadedResults, include_invalid: bool = False, confidence: float = 0.95) -> pd.DataFrame:
    """n, mean, confidence interval (Student t within the metric's range: ``ci_method``),
    median and std per cell and metric (rows with n >= 1)."""
    runs = results.runs
    used = counted(runs, include_invalid)
    counts = cell_counts(results, include_invalid).set_index("cell_index")
    rows = []
    for cell_index, cell in counts.iterrows():
        part = runs[used & (runs["cell_index"] == cell_index)]
        timeouts = int(cell["timed_out"])
        for column in results.metric_names:
            entry = catalogue_entry(column)
            stats = metric_mean_ci(part[column], entry.bounds, confidence)
            censored = median_with_timeouts(part[column], timeouts, entry.better)
            if stats.n == 0 and (not timeouts or math.isnan(censored)):
                continue
            row: dict[str, Any] = {
                "cell_index": cell_index,
                "cell": cell["cell"],
                **{axis: cell[axis] for axis in results.axes},
                "metric": column,
                "label": entry.label,
                "n": stats.n,
                "mean": stats.mean,
                "ci_low": stats.low,
                "ci_high": stats.high,
                "ci_half_width": stats.half_width,
                "ci_method": stats.method,
                "median": stats.median,
                "std": stats.std,
                "base_unit": base_unit(entry),
                "unit": entry.unit,
                "scale": entry.scale,
                "median_with_timeouts": censored,
            }
            for name in ("mean", "ci_low", "ci_high", "ci_half_width", "median", "std", "median_with_timeouts"):
                row[f"{name}_shown"] = row[name] * entry.scale
            row.update(
                {
                    "runs_total": int(cell["runs"]),
                    "failed_excluded": int(cell["failed"]),
                    "invalid_excluded": 0 if include_invalid else int(cell["invalid"]),
                    "warmup_excluded": int(cell["warmup"]),
                    "timed_out": timeouts,
                }
            )
            rows.append(row)
    columns = ["cell_index", "cell", *results.axes, *SUMMARY_COLUMNS]
    return pd.DataFrame(rows, columns=columns)


def _verdict(gain: float, low: float, high: float, better: str | None) -> str:
    if math.isnan(gain) or math.isnan(low):
        return ""
    if low <= 0 <= high:
        return "no significant difference"
    if better is None:
        return "higher" if gain > 0 else "lower"
    return "better" if (gain > 0) == (better == "higher") else "worse"


def relative_gains(
    results: LoadedResults, baseline: str, metrics: list[str], include_invalid: bool = False, confidence: float = 0.95
) -> pd.DataFrame:
    """Each transport against ``baseline`` per value of the other axes and metric: the gain
    ``mean(T) / mean(baseline) - 1`` with its interval on the log of the ratio, and the
    difference ``mean(T) - mean(baseline)`` with Welch's interval (stats.compare_means).
    ``comparison`` says which one the report shows: "relative", or "absolute" when the
    baseline's mean is too uncertain to divide by (``note`` says why)."""
    every = results.runs
    keep = counted(every, include_invalid)
    every = every.assign(_counted=keep, _failed=failed(every), _timed_out=timed_out(every))
    others = results.other_axes
    rows = []
    groups = every.groupby(others, sort=False, dropna=False) if others else [((), every)]
    for key, whole in groups:
        values = key if isinstance(key, tuple) else (key,)
        where = dict(zip(others, values, strict=True))
        part = whole[whole["_counted"]]
        reference = part[part["transport"] == baseline]
        outcome = {
            transport: (
                int(whole.loc[whole["transport"] == transport, "_failed"].sum()),
                int(whole.loc[whole["transport"] == transport, "_timed_out"].sum()),
            )
            for transport in results.transports
        }
        hosts = {
            transport: sorted(set(part.loc[part["transport"] == transport, "host"]) - {""})
            for transport in results.transports
        }
        for column in metrics:
            entry = catalogue_entry(column)
            base_values = reference[column].dropna().to_numpy(dtype=float)
            for transport in results.transports:
                if transport == baseline:
                    continue
                other_values = part.loc[part["transport"] == transport, column].dropna().to_numpy(dtype=float)
                if other_values.size == 0 and base_values.size == 0:
                    continue
                row = {
                    **where,
                    "metric": column,
                    "label": entry.label,
                    "baseline": baseline,
                    "transport": transport,
                    "n_baseline": int(base_values.size),
                    "n_transport": int(other_values.size),
                    "mean_baseline": float(base_values.mean()) if base_values.size else math.nan,
                    "mean_transport": float(other_values.mean()) if other_values.size else math.nan,
                    "comparison": "",
                    "gain": math.nan,
                    "ci_low": math.nan,
                    "ci_high": math.nan,
                    "difference": math.nan,
                    "difference_ci_low": math.nan,
                    "difference_ci_high": math.nan,
                    "better": entry.better or "",
                    "verdict": "",
                    "note": "",
                    "failed_baseline": outcome[baseline][0],
                    "failed_transport": outcome[transport][0],
                    "timed_out_baseline": outcome[baseline][1],
                    "timed_out_transport": outcome[transport][1],
                    "median_with_timeouts_baseline": median_with_timeouts(
                        base_values, outcome[baseline][1], entry.better
                    ),
                    "median_with_timeouts_transport": median_with_timeouts(
                        other_values, outcome[transport][1], entry.better
                    ),
                    "hosts": _hosts_apart(hosts[transport], hosts[baseline]),
                }
                row.update(
                    _comparison_columns(base_values, other_values, baseline, transport, entry.better, confidence)
                )
                rows.append(row)
    return pd.DataFrame(rows, columns=[*others, *GAIN_COLUMNS])


def _hosts_apart(transport: list[str], baseline: list[str]) -> str:
    """ "a vs b" when the runs of a comparison ran on different machines (a host effect enters
    the gain), else "" (one machine, or machines not recorded)."""
    if not transport or not baseline or (transport == baseline and len(transport) == 1):
        return ""
    return f"{', '.join(transport)} vs {', '.join(baseline)}"


def _comparison_columns(
    base_values: np.ndarray,
    other_values: np.ndarray,
    baseline: str,
    transport: str,
    better: str | None,
    confidence: float,
) -> dict[str, Any]:
    """The gain or difference columns of one row of :func:`relative_gains`."""
    try:
        comparison = compare_means(base_values, other_values, confidence)
    except ValueError as error:  # fewer than two runs: a point estimate at most, no interval
        columns: dict[str, Any] = {"note": str(error)}
        if base_values.size and other_values.size:
            columns["difference"] = float(np.mean(other_values) - np.mean(base_values))
            if np.mean(base_values) > 0:
                columns["gain"] = float(np.mean(other_values) / np.mean(base_values) - 1)
        return columns
    difference = comparison.difference
    columns = {
        "difference": difference.difference,
        "difference_ci_low": difference.low,
        "difference_ci_high": difference.high,
    }
    if comparison.gain is not None:
        gain = comparison.gain
        return {
            **columns,
            "comparison": "relative",
            "gain": gain.gain,
            "ci_low": gain.low,
            "ci_high": gain.high,
            "verdict": _verdict(gain.gain, gain.low, gain.high, better),
        }
    why = comparison.why_absolute.replace("the baseline's", f"{baseline}'s").replace("of B", f"of {transport}")
    return {
        **columns,
        "comparison": "absolute",
        "verdict": _verdict(difference.difference, difference.low, difference.high, better),
        "note": f"{transport} - {baseline}, not a gain: {why}",
    }


def choose_baseline(results: LoadedResults, requested: str | None) -> str | None:
    """The baseline transport: ``requested``, else the matrix's first; None without a
    transport axis (there is nothing to compare)."""
    if not results.has_transport_axis:
        if requested:
            raise ReportError(
                f"--baseline {requested}: {results.path} has no transport axis in its matrix, "
                "so there are no gains to compute (fix: leave out --baseline)"
            )
        return None
    if requested is None:
        return results.transports[0] if results.transports else None
    if requested not in results.transports:
        raise ReportError(
            f"--baseline {requested}: no such transport in {results.path} (fix: one of {', '.join(results.transports)})"
        )
    return requested


def summarize_results(
    results: LoadedResults,
    metrics: list[str],
    baseline: str | None,
    include_invalid: bool = False,
    bias_metric: str | None = None,
) -> Summary:
    """Everything the report's tables show; ``bias_metric`` (default: the first of ``metrics``)
    is the one the invalid attempts are compared in (:func:`rerun_bias`)."""
    gains = (
        relative_gains(results, baseline, metrics, include_invalid)
        if baseline
        else pd.DataFrame(columns=[*results.other_axes, *GAIN_COLUMNS])
    )
    bias_metric = bias_metric or (metrics[0] if metrics else None)
    bias = (
        rerun_bias(results, bias_metric)
        if bias_metric
        else pd.DataFrame(columns=["cell_index", "cell", *results.axes, *BIAS_COLUMNS])
    )
    return Summary(
        table=summarize_cells(results, include_invalid),
        gains=gains,
        counts=cell_counts(results, include_invalid),
        baseline=baseline,
        include_invalid=include_invalid,
        cell_columns=["cell_index", "cell", *results.axes],
        bias=bias,
        bias_metric=bias_metric,
    )


def select_metrics(
    results: LoadedResults, requested: list[str] | None, headline: tuple[str, ...], include_invalid: bool = False
) -> list[str]:
    """The metrics to tabulate and plot: ``requested`` (checked), else the headline metrics
    that counted runs have, else every metric they have."""
    runs = results.runs[counted(results.runs, include_invalid)]
    present = [column for column in results.metric_names if runs[column].notna().any()]
    if requested:
        unknown = [name for name in requested if name not in results.metric_names]
        if unknown:
            raise ReportError(
                f"--metrics: {', '.join(unknown)} not in {results.path}/results.jsonl "
                f"(fix: choose from {', '.join(results.metric_names) or 'none recorded'})"
            )
        return requested
    chosen = [name for name in headline if name in present]
    return chosen or present
