"""Statistics over runs: means with Student-t confidence intervals (kept within a metric's
range: :func:`metric_mean_ci`), relative gains or differences against a baseline
(:func:`compare_means`), ECDF/CCDF with DKW bands, Jain's
fairness index and bandwidth shares of parallel flows.

Pure functions over sequences, numpy arrays and tidy pandas frames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd
from scipy import stats as sps

ArrayLike: TypeAlias = Sequence[float] | np.ndarray | pd.Series
#: a metric's declared range (catalogue ``Metric.bounds``): (low, high), high None for no upper bound
Bounds = tuple[float, float | None]


def _clean(values: ArrayLike) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[~np.isnan(array)]


# --------------------------------------------------------------------------- means


@dataclass(frozen=True)
class MeanCI:
    """Sample mean with a two-sided Student-t confidence interval (``method`` "t-truncated":
    cut at the metric's range, :func:`metric_mean_ci`)."""

    n: int
    mean: float
    low: float
    high: float
    std: float  # sample standard deviation (ddof=1)
    median: float
    confidence: float
    method: str = "t"

    @property
    def half_width(self) -> float:
        """Half the interval's width, ``(high - low) / 2``. A truncated interval is not
        symmetric about the mean: then ``mean ± half_width`` is not the interval (use
        ``low``/``high``)."""
        return (self.high - self.low) / 2


def mean_ci(values: ArrayLike, confidence: float = 0.95) -> MeanCI:
    """Mean and ``confidence`` interval ``mean ± t_{(1+c)/2, n-1} * s / sqrt(n)``.

    NaNs are dropped. With one value the interval is (nan, nan); with none, all is nan.
    Assumes runs are independent and the mean roughly normal (many runs, or normal data).
    """
    data = _clean(values)
    n = int(data.size)
    if n == 0:
        return MeanCI(0, math.nan, math.nan, math.nan, math.nan, math.nan, confidence)
    mean = float(data.mean())
    median = float(np.median(data))
    if n == 1:
        return MeanCI(1, mean, math.nan, math.nan, math.nan, median, confidence)
    std = float(data.std(ddof=1))
    half = float(sps.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return MeanCI(n, mean, mean - half, mean + half, std, median, confidence)


def metric_mean_ci(values: ArrayLike, bounds: Bounds | None, confidence: float = 0.95) -> MeanCI:
    """Mean and confidence interval of a metric over runs, within the metric's declared range
    (catalogue ``Metric.bounds``): the Student-t interval (:func:`mean_ci`) intersected with
    the range. Loss of 0, 0, 2 and 5 % has the t interval [-2.0 %, 5.5 %]; shown: [0, 5.5 %].

    Why an intersection and not a bootstrap or Wilson interval: the true mean lies inside the
    range, so it lies in the intersection exactly when it lies in the t interval: coverage
    stays 95 %. A percentile bootstrap of 3 runs is their range and covers the mean about
    74 % of the time; Wilson needs counts of trials, and runs give per-run shares.
    ``MeanCI.method`` is "t" or, when an end was cut at a bound, "t-truncated" (then the
    interval is not symmetric about the mean). NaNs dropped; n < 2: no interval (nan).
    """
    result = mean_ci(values, confidence)
    if bounds is None or math.isnan(result.low):
        return result
    low = max(result.low, bounds[0])
    high = result.high if bounds[1] is None else min(result.high, bounds[1])
    if (low, high) == (result.low, result.high):
        return result
    return replace(result, low=low, high=high, method="t-truncated")


def summarize(
    frame: pd.DataFrame, by: str | Sequence[str], value: str, confidence: float = 0.95, bounds: Bounds | None = None
) -> pd.DataFrame:
    """Per group of ``by``: ``n``, ``mean``, ``ci_low``, ``ci_high``, ``std``, ``median``,
    ``ci_method`` of column ``value`` (Student t, cut at ``bounds``: :func:`metric_mean_ci`)."""
    keys = [by] if isinstance(by, str) else list(by)
    rows = []
    for group, part in frame.groupby(keys, sort=True):
        group_values = group if isinstance(group, tuple) else (group,)
        result = metric_mean_ci(part[value], bounds, confidence)
        rows.append(
            {
                **dict(zip(keys, group_values, strict=True)),
                "n": result.n,
                "mean": result.mean,
                "ci_low": result.low,
                "ci_high": result.high,
                "std": result.std,
                "median": result.median,
                "ci_method": result.method,
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "n", "mean", "ci_low", "ci_high", "std", "median", "ci_method"])


# --------------------------------------------------------------------------- gain

#: the largest relative standard error ``s / (sqrt(n) mean)`` of a baseline mean that a gain may
#: divide by. The ratio of means overestimates the true ratio by about RSE^2 (E[1/mean] is about
#: (1 + RSE^2) / mu), 4 % at this bound, and its delta interval rests on 1/mean being nearly
#: linear; a noisier baseline is compared by the difference of means instead (docs/metrics.md 4).
MAX_BASELINE_RSE = 0.2


@dataclass(frozen=True)
class Gain:
    """Relative gain ``(mean(B) - mean(A)) / mean(A)`` with a confidence interval."""

    gain: float
    low: float
    high: float
    method: str
    confidence: float


@dataclass(frozen=True)
class Difference:
    """``mean(B) - mean(A)`` in the metric's own unit, with Welch's t interval."""

    difference: float
    low: float
    high: float
    confidence: float
    method: str = "Welch t"


@dataclass(frozen=True)
class Comparison:
    """B against the baseline A: the relative gain when A's mean is precise enough to divide
    by, and always the difference of the means; ``why_absolute`` says why there is no gain."""

    gain: Gain | None
    difference: Difference
    why_absolute: str = ""


def relative_standard_error(values: ArrayLike) -> float:
    """``s / (sqrt(n) |mean|)``: how uncertain a mean is relative to itself (NaN for n < 2,
    inf for a zero mean)."""
    data = _clean(values)
    if data.size < 2:
        return math.nan
    mean = float(data.mean())
    error = float(data.std(ddof=1)) / math.sqrt(data.size)
    return math.inf if mean == 0 else error / abs(mean)


def baseline_problem(values: ArrayLike, confidence: float = 0.95, max_rse: float = MAX_BASELINE_RSE) -> str | None:
    """Why the mean of ``values`` should not be the denominator of a relative gain, or None.

    Dividing by a mean that may be near 0 gives gains of thousands of percent that mean
    nothing: a baseline is refused when its mean is not positive, when its ``confidence``
    interval includes 0, or when its relative standard error exceeds ``max_rse``."""
    data = _clean(values)
    if data.size < 2:
        return "the baseline needs at least two values"
    mean = float(data.mean())
    if mean == 0:
        return "the baseline's mean is 0"
    if mean < 0:
        return f"the baseline's mean is negative ({mean:.3g})"
    rse = relative_standard_error(data)
    if mean_ci(data, confidence).low <= 0:
        return (
            f"the baseline's {round(100 * confidence)} % CI includes 0 (relative standard error {round(100 * rse)} %)"
        )
    if rse > max_rse:
        return f"the baseline's relative standard error {round(100 * rse)} % exceeds {round(100 * max_rse)} %"
    return None


def _welch(va: float, na: int, vb: float, nb: int) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of two variance terms ``va``, ``vb``
    estimated from ``na``, ``nb`` values (inf when both are 0)."""
    denominator = vb * vb / (nb - 1) + va * va / (na - 1)
    return (va + vb) ** 2 / denominator if denominator > 0 else math.inf


def _quantile(confidence: float, dof: float) -> float:
    two_sided = (1 + confidence) / 2
    return float(sps.t.ppf(two_sided, dof)) if math.isfinite(dof) else float(sps.norm.ppf(two_sided))


def relative_gain(
    a: ArrayLike,
    b: ArrayLike,
    confidence: float = 0.95,
    method: Literal["delta", "bootstrap"] = "delta",
    resamples: int = 10_000,
    seed: int = 0,
    max_baseline_rse: float = MAX_BASELINE_RSE,
) -> Gain:
    """Relative gain of B over A, ``g = mean(B)/mean(A) - 1``, for independent samples.

    ``ValueError`` when A's mean is too uncertain to divide by (:func:`baseline_problem`):
    compare such samples by :func:`mean_difference` (:func:`compare_means` chooses).

    ``delta``: first-order delta method on the log of the ratio,
    ``se(log(mB/mA)) = sqrt(vA + vB)``, ``vX = sX^2/(nX mX^2)`` (the squared relative
    standard errors), interval ``exp(log(mB/mA) ± t * se) - 1`` with Welch-Satterthwaite
    degrees of freedom ``(vB + vA)^2 / (vB^2/(nB-1) + vA^2/(nA-1))``. Why the log: a ratio of
    positive means cannot fall below 0, nor the gain below -100 %, yet the symmetric interval
    of the ratio itself did (a small, noisy B gave [-152 %, -13 %]); on the log scale the
    interval stays above -100 % and B over A is exactly the reciprocal of A over B. Needs
    mean(B) > 0.

    ``bootstrap``: percentile interval of ``g`` over ``resamples`` independent resamples
    of A and of B (with replacement; seeded, so reproducible). No normality assumption,
    but a little narrow for small n.
    """
    xa, xb = _clean(a), _clean(b)
    if xa.size < 2 or xb.size < 2:
        raise ValueError("relative_gain needs at least two values per sample")
    problem = baseline_problem(xa, confidence, max_baseline_rse)
    if problem is not None:
        raise ValueError(f"no relative gain: {problem}")
    ma, mb = float(xa.mean()), float(xb.mean())
    gain = mb / ma - 1
    if method == "delta":
        if mb <= 0:
            raise ValueError(
                f"the compared mean is {'0' if mb == 0 else 'negative'}: no interval for the log of the ratio"
            )
        va = xa.var(ddof=1) / (xa.size * ma * ma)
        vb = xb.var(ddof=1) / (xb.size * mb * mb)
        spread = _quantile(confidence, _welch(va, xa.size, vb, xb.size)) * math.sqrt(va + vb)
        log_ratio = math.log(mb / ma)
        # capped: exp() of a huge upper end (a B mean near 0) would overflow; the gain is unbounded then
        low, high = (math.expm1(min(log_ratio + sign * spread, 700.0)) for sign in (-1, 1))
        return Gain(gain, low, high, "delta on the log ratio (Welch-Satterthwaite t)", confidence)
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        mean_a = rng.choice(xa, size=(resamples, xa.size), replace=True).mean(axis=1)
        mean_b = rng.choice(xb, size=(resamples, xb.size), replace=True).mean(axis=1)
        gains = mean_b / mean_a - 1
        alpha = 1 - confidence
        low, high = np.quantile(gains, [alpha / 2, 1 - alpha / 2])
        return Gain(gain, float(low), float(high), f"bootstrap percentile ({resamples})", confidence)
    raise ValueError(f"unknown method {method!r} (delta or bootstrap)")


def mean_difference(a: ArrayLike, b: ArrayLike, confidence: float = 0.95) -> Difference:
    """``mean(B) - mean(A)`` with Welch's t interval (unequal variances): what a comparison
    shows when A's mean cannot be divided by. Needs two values per sample."""
    xa, xb = _clean(a), _clean(b)
    if xa.size < 2 or xb.size < 2:
        raise ValueError("mean_difference needs at least two values per sample")
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    difference = float(xb.mean() - xa.mean())
    spread = _quantile(confidence, _welch(va, xa.size, vb, xb.size)) * math.sqrt(va + vb)
    return Difference(difference, difference - spread, difference + spread, confidence)


def compare_means(
    a: ArrayLike, b: ArrayLike, confidence: float = 0.95, max_baseline_rse: float = MAX_BASELINE_RSE
) -> Comparison:
    """B against the baseline A: the relative gain (:func:`relative_gain`, delta method) when
    A's mean can be divided by and B's mean is positive, with the difference of the means in
    any case; ``why_absolute`` names the reason when there is no gain. Needs two values per
    sample (``ValueError``)."""
    difference = mean_difference(a, b, confidence)
    problem = baseline_problem(a, confidence, max_baseline_rse)
    mean_b = float(_clean(b).mean())
    if problem is None and mean_b <= 0:
        problem = f"the compared transport's mean is {'0' if mean_b == 0 else 'negative'}"
    if problem is not None:
        return Comparison(None, difference, problem)
    return Comparison(relative_gain(a, b, confidence, max_baseline_rse=max_baseline_rse), difference)


# --------------------------------------------------------------------------- distributions


def dkw_epsilon(n: int, confidence: float = 0.95) -> float:
    """Half-width of the Dvoretzky-Kiefer-Wolfowitz band: ``sqrt(ln(2/alpha) / (2n))``.

    With probability at least ``confidence`` the true CDF lies within ``±epsilon`` of the
    empirical one *everywhere at once* (a simultaneous band, Massart's constant)."""
    if n < 1:
        return math.nan
    return math.sqrt(math.log(2 / (1 - confidence)) / (2 * n))


def ecdf(values: ArrayLike, confidence: float = 0.95) -> pd.DataFrame:
    """Empirical CDF at each distinct value with a DKW band.

    Columns ``x`` (sorted distinct values), ``F`` (share of values <= x), ``low``/``high``
    (``F ∓ epsilon`` clipped to [0, 1], :func:`dkw_epsilon`). Draw as a right-continuous
    step function (``where="post"``).
    """
    data = np.sort(_clean(values))
    if data.size == 0:
        return pd.DataFrame({"x": [], "F": [], "low": [], "high": []})
    x, counts = np.unique(data, return_counts=True)
    cdf = np.cumsum(counts) / data.size
    epsilon = dkw_epsilon(int(data.size), confidence)
    return pd.DataFrame({"x": x, "F": cdf, "low": np.clip(cdf - epsilon, 0, 1), "high": np.clip(cdf + epsilon, 0, 1)})


def ccdf(values: ArrayLike, confidence: float = 0.95) -> pd.DataFrame:
    """Complementary CDF ``P(X > x)`` at each distinct value with its DKW band.

    Columns ``x``, ``P`` (= 1 - F), ``low``, ``high``.
    """
    table = ecdf(values, confidence)
    return pd.DataFrame({"x": table["x"], "P": 1 - table["F"], "low": 1 - table["high"], "high": 1 - table["low"]})


# --------------------------------------------------------------------------- time series


def step_durations(times: ArrayLike, end: float | None = None) -> np.ndarray:
    """How long each sample of a sample-and-hold series holds: ``t[i+1] - t[i]``, and for
    the last sample ``end - t[-1]`` (0 without ``end``). Negative durations become 0."""
    stamps = np.asarray(times, dtype=float)
    if stamps.size == 0:
        return stamps
    following = np.append(stamps[1:], stamps[-1] if end is None else end)
    return np.clip(following - stamps, 0, None)


def clip_series(
    times: ArrayLike, values: ArrayLike, start: float | None = None, end: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A sample-and-hold series restricted to ``[start, end]``: samples before ``start``
    are dropped except the last one, which is moved to ``start`` (it holds there)."""
    stamps = np.asarray(times, dtype=float)
    data = np.asarray(values)
    if start is not None and stamps.size:
        before = np.flatnonzero(stamps <= start)
        first = before[-1] if before.size else 0
        stamps, data = stamps[first:].copy(), data[first:]
        if before.size:
            stamps[0] = start
    if end is not None:
        keep = stamps <= end
        stamps, data = stamps[keep], data[keep]
    return stamps, data


def time_weighted_mean_var(
    times: ArrayLike, values: ArrayLike, start: float | None = None, end: float | None = None
) -> tuple[float, float]:
    """Mean and variance of a sample-and-hold series over ``[start, end]``, each value
    weighted by how long it held: ``m = sum(v_i d_i) / sum(d_i)``,
    ``var = sum(d_i (v_i - m)^2) / sum(d_i)``. NaN, NaN if the series spans no time."""
    stamps, data = clip_series(times, values, start, end)
    durations = step_durations(stamps, end)
    numbers = np.asarray(data, dtype=float)
    mask = ~np.isnan(numbers)
    total = float(durations[mask].sum())
    if total <= 0:
        return math.nan, math.nan
    mean = float(np.sum(durations[mask] * numbers[mask]) / total)
    variance = float(np.sum(durations[mask] * (numbers[mask] - mean) ** 2) / total)
    return mean, variance


def state_shares(
    times: ArrayLike, states: Sequence[str] | np.ndarray, start: float | None = None, end: float | None = None
) -> dict[str, float]:
    """Share of ``[start, end]`` spent in each state of a sample-and-hold state series
    (each state holds until the next sample). Shares sum to 1 over the states seen."""
    stamps, labels = clip_series(times, np.asarray(states, dtype=object), start, end)
    durations = step_durations(stamps, end)
    total = float(durations.sum())
    if total <= 0:
        return {}
    shares: dict[str, float] = {}
    for label, duration in zip(labels, durations, strict=True):
        shares[str(label)] = shares.get(str(label), 0.0) + float(duration) / total
    return shares


# --------------------------------------------------------------------------- fairness


def jain_index(allocations: ArrayLike) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 for equal shares, ``1/n``
    when one of ``n`` flows gets everything. NaN if all are zero or none given."""
    data = _clean(allocations)
    if data.size == 0:
        return math.nan
    squares = float(np.sum(data * data))
    if squares == 0:
        return math.nan
    return float(np.sum(data)) ** 2 / (data.size * squares)


def binned_bytes(
    events: pd.DataFrame, bin_width: float, start: float | None = None, end: float | None = None
) -> pd.DataFrame:
    """Bytes per flow and time bin from per-packet rows.

    ``events`` has columns ``time`` (s), ``flow`` (any label) and ``bytes``. Bins of
    ``bin_width`` s start at ``start`` (default the first event) and cover up to ``end``
    (default the last event). Returns every (bin, flow) pair, also empty ones: columns
    ``time`` (bin start in s from ``start``, rounded to the ns so that 3 * 0.05 is 0.15),
    ``flow``, ``bytes``, ``throughput`` (bit/s).
    """
    if events.empty:
        return pd.DataFrame({"time": [], "flow": [], "bytes": [], "throughput": []})
    origin = float(events["time"].min()) if start is None else start
    last = float(events["time"].max()) if end is None else end
    count = math.floor((last - origin) / bin_width) + 1
    flows = list(dict.fromkeys(events["flow"]))
    index = np.floor((events["time"].to_numpy(dtype=float) - origin) / bin_width).astype(int)
    keep = (index >= 0) & (index < count)
    rows = []
    for flow in flows:
        mask = keep & (events["flow"].to_numpy() == flow)
        totals = np.bincount(index[mask], weights=events["bytes"].to_numpy(dtype=float)[mask], minlength=count)
        for position, total in enumerate(totals):
            rows.append((round(position * bin_width, 9), flow, float(total), 8 * float(total) / bin_width))
    frame = pd.DataFrame(rows, columns=["time", "flow", "bytes", "throughput"])
    return frame.sort_values("time", kind="stable").reset_index(drop=True)  # flows in order


def bandwidth_share(binned: pd.DataFrame) -> pd.DataFrame:
    """Each flow's share of the bytes in each bin: ``bytes_f / sum_g bytes_g``.

    Input: :func:`binned_bytes` output (``time``, ``flow``, ``bytes``). Adds ``share``
    (NaN in bins where no flow sent anything).
    """
    frame = binned.copy()
    totals = frame.groupby("time")["bytes"].transform("sum")
    frame["share"] = np.where(totals > 0, frame["bytes"] / totals.where(totals > 0, 1), np.nan)
    return frame


def jain_over_time(binned: pd.DataFrame, active_only: bool = True) -> pd.DataFrame:
    """Jain's index of the per-flow throughputs in each bin (columns ``time``, ``jain``).

    ``active_only``: only bins in which every flow sent something (before one flow starts
    or after one ends, the index says nothing about how they share).
    """
    rows = []
    for time, part in binned.groupby("time", sort=True):
        values = part["bytes"].to_numpy(dtype=float)
        if active_only and not np.all(values > 0):
            continue
        rows.append((time, jain_index(values)))
    return pd.DataFrame(rows, columns=["time", "jain"])


__all__ = [
    "MAX_BASELINE_RSE",
    "Bounds",
    "Comparison",
    "Difference",
    "Gain",
    "MeanCI",
    "bandwidth_share",
    "baseline_problem",
    "binned_bytes",
    "ccdf",
    "clip_series",
    "compare_means",
    "dkw_epsilon",
    "ecdf",
    "jain_index",
    "jain_over_time",
    "mean_ci",
    "mean_difference",
    "metric_mean_ci",
    "relative_gain",
    "relative_standard_error",
    "state_shares",
    "step_durations",
    "summarize",
    "time_weighted_mean_var",
]
