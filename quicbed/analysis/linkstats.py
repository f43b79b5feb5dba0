"""What a link did to a probe stream, and what theory says it should have done.

Pure functions over the receiver's log of a UDP probe (sequence, send time, receive time).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quicbed.spec.loss import Bernoulli, GilbertElliott, LossModel

Z99 = 2.5758293035489  # two-sided 99 % quantile of the standard normal
Z999 = 3.2905267314919  # two-sided 99.9 %
HEADERS_BYTES = 14 + 20 + 8  # Ethernet + IPv4 + UDP: what tbf counts on top of the payload

if TYPE_CHECKING:  # numpy is imported where it is used: the module loads without it
    import numpy as np


@dataclass(frozen=True)
class ProbeLog:
    sequences: list[int]
    sent_ns: list[int]
    received_ns: list[int]
    sizes: list[int]

    @classmethod
    def read(cls, path: Path) -> "ProbeLog":
        columns: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        with path.open() as handle:
            for row in csv.DictReader(handle):
                for column, key in zip(columns, ("sequence", "sent_ns", "received_ns", "bytes")):
                    column.append(int(row[key]))
        return cls(*columns)


@dataclass(frozen=True)
class LinkStats:
    sent: int
    received: int
    duplicates: int
    lost: int
    loss: float
    loss_runs: int
    mean_burst: float
    burst_stderr: float
    reordered: float
    owd_mean: float
    owd_std: float
    owd_min: float
    owd_median: float
    #: interquartile range of the one-way delay: a jitter measure robust to rare outliers
    owd_iqr: float
    owd_p99: float
    #: wire rate (payload + headers) over the receive interval, bit/s
    rate: float


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


def link_stats(log: ProbeLog, sent: int) -> LinkStats:
    """Loss, loss-run lengths, one-way delay and rate of a probe of ``sent`` datagrams."""
    unique = set(log.sequences)
    arrived = [seq in unique for seq in range(sent)]
    runs: list[int] = []
    current = 0
    for ok in arrived:
        if ok:
            if current:
                runs.append(current)
            current = 0
        else:
            current += 1
    if current:
        runs.append(current)
    lost = sent - len(unique)
    mean_burst = sum(runs) / len(runs) if runs else 0.0
    if len(runs) > 1:
        variance = sum((r - mean_burst) ** 2 for r in runs) / (len(runs) - 1)
        burst_stderr = math.sqrt(variance / len(runs))
    else:
        burst_stderr = math.inf
    delays = [(r - s) / 1e9 for r, s in zip(log.received_ns, log.sent_ns)]
    owd_mean = sum(delays) / len(delays) if delays else math.nan
    owd_std = math.sqrt(sum((d - owd_mean) ** 2 for d in delays) / (len(delays) - 1)) if len(delays) > 1 else 0.0
    out_of_order = sum(1 for a, b in zip(log.sequences, log.sequences[1:]) if b < a)
    rate = math.nan
    if len(log.received_ns) > 1:
        span = (max(log.received_ns) - min(log.received_ns)) / 1e9
        bits = sum((size + HEADERS_BYTES) * 8 for size in log.sizes[1:])
        rate = bits / span if span > 0 else math.nan
    return LinkStats(
        sent=sent,
        received=len(unique),
        duplicates=len(log.sequences) - len(unique),
        lost=lost,
        loss=lost / sent if sent else math.nan,
        loss_runs=len(runs),
        mean_burst=mean_burst,
        burst_stderr=burst_stderr,
        reordered=out_of_order / max(1, len(log.sequences) - 1),
        owd_mean=owd_mean,
        owd_std=owd_std,
        owd_min=min(delays) if delays else math.nan,
        owd_median=_percentile(delays, 0.5),
        owd_iqr=_percentile(delays, 0.75) - _percentile(delays, 0.25),
        owd_p99=_percentile(delays, 0.99),
        rate=rate,
    )


def expected_iqr(jitter: float, distribution: str) -> float:
    """Interquartile range of netem's delay for a jitter setting: uniform on [-j, j] gives j,
    normal with sigma j gives 1.349 j. Pareto tables are not symmetric: no closed form here."""
    factors = {"uniform": 1.0, "normal": 1.3489795}
    if distribution not in factors:
        raise ValueError(f"no closed-form IQR for {distribution} jitter")
    return factors[distribution] * jitter


def loss_count_interval(model: LossModel, packets: int, z: float = Z99) -> tuple[float, float]:
    """Interval that holds the number of lost packets with the confidence of ``z``.

    Bernoulli: the exact binomial interval. Gilbert-Elliott: normal approximation with the
    chain's asymptotic variance, n [m(1-m) + 2 lambda/(1-lambda) piG piB (lG-lB)^2], where
    lambda = 1-p-r; losses are correlated, so this is wider than the binomial one.
    """
    mean = model.mean_loss
    if isinstance(model, Bernoulli):
        from scipy.stats import binom, norm

        confidence = 2 * norm.cdf(z) - 1
        low, high = binom.interval(confidence, packets, mean)
        return float(low), float(high)
    assert isinstance(model, GilbertElliott)
    decay = 1 - model.p - model.r
    correlated = 2 * decay / (1 - decay) * model.pi_good * model.pi_bad * (model.loss_good - model.loss_bad) ** 2
    spread = z * math.sqrt(packets * (mean * (1 - mean) + correlated))
    return packets * mean - spread, packets * mean + spread


def _loss_runs(lost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a (replicas x packets) boolean loss matrix: packets lost and loss runs."""
    import numpy as np

    padded = np.pad(lost.astype(np.int8), ((0, 0), (1, 0)))
    run_starts = (np.diff(padded, axis=1) == 1).sum(axis=1)
    return lost.sum(axis=1), run_starts


def mean_burst_interval(
    model: LossModel, packets: int, z: float = Z99, replicas: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Interval that holds the measured mean loss-run length of a ``packets`` probe with the
    confidence of ``z``, from the model's own sampling distribution.

    The measured mean is a ratio (lost packets / loss runs) over runs that are skewed and,
    for Gilbert-Elliott, correlated within a Bad sojourn: the runs' own standard error
    understates its spread (by a third for E4's chain; a 99.9 % check then failed one probe
    in fifty). So the chain is simulated ``replicas`` times for ``packets`` packets and the
    interval is the simulated mean +- z simulated standard deviations (the mean of ~100+
    runs is close to normal; its bias, a few hundredths of a packet, is in the simulated mean).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    if isinstance(model, Bernoulli):
        lost = rng.random((replicas, packets)) < model.probability
    else:
        lost = np.empty((replicas, packets), dtype=bool)
        bad = rng.random(replicas) < model.pi_bad
        for index in range(packets):
            lost[:, index] = rng.random(replicas) < np.where(bad, model.loss_bad, model.loss_good)
            move = rng.random(replicas)
            bad = np.where(bad, move >= model.r, move < model.p)
    total, runs = _loss_runs(lost)
    means = total[runs > 0] / runs[runs > 0]
    centre, spread = float(means.mean()), float(means.std(ddof=1))
    return centre - z * spread, centre + z * spread


@dataclass(frozen=True)
class TraceTiming:
    """How closely the deliveries of a saturated probe followed a delivery trace."""

    delivered: int  # deliveries compared
    first_opportunity: int  # the trace opportunity (index, 0-based, within a period) of the first of them
    errors_ms: tuple[float, ...]  # each delivery's time minus its opportunity's, the common offset removed

    def abs_percentile(self, fraction: float) -> float:
        return _percentile(sorted(abs(e) for e in self.errors_ms), fraction)


def trace_timing(times_ms: list[int], received_ns: list[int]) -> TraceTiming:
    """Match each delivery (receive times in order, while the link's queue never ran empty:
    one full-size packet per opportunity) with the trace's opportunity that let it out.

    The k-th delivery left at opportunity j0 + k of the looped trace; j0 is the index whose
    matching makes the deliveries' offsets from their opportunities the most alike (the
    offset itself, base delay and the clock difference, is the median and is removed).
    """
    import numpy as np

    offsets = np.asarray(times_ms, dtype=float)
    period, n = float(times_ms[-1]), len(times_ms)
    received = (np.asarray(received_ns, dtype=np.int64) - received_ns[0]) / 1e6
    index = np.arange(len(received))
    best: tuple[float, int, np.ndarray] | None = None
    for start in range(n):
        k = start + index
        residual = received - ((k // n) * period + offsets[k % n])
        residual -= np.median(residual)
        score = float(np.mean(np.abs(residual)))
        if best is None or score < best[0]:
            best = (score, start, residual)
    assert best is not None
    return TraceTiming(len(received), best[1], tuple(float(e) for e in best[2]))
