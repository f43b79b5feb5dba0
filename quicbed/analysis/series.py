"""The sender's state over time, one frame per run whatever wrote it (docs/metrics.md,
"Sender time series"), and the median with a band over the runs of a cell.

Columns: ``time`` (epoch s), ``cwnd``, ``bytes_in_flight`` (bytes), ``smoothed_rtt``,
``min_rtt`` (s), ``pacing_rate`` (bit/s); NaN where the source cannot say.

- QUIC, the server's qlog (``recovery:metrics_updated``): everything. The pacing rate is
  the logged one when the stack logs it (BBR, paced at it); otherwise the rate the stack's pacer
  derives from the window, as it does: quinn 1.25 x cwnd / smoothed RTT, aioquic
  cwnd / smoothed RTT; none when the profile turned pacing off (BQUIC).
- TCP, the kernel's ``tcp_probe`` events: cwnd x MSS, snd_nxt - snd_una in flight, the
  smoothed RTT; no min RTT or pacing rate.
- TCP, ``ss`` samples (every 10 ms): cwnd x MSS, unacknowledged segments x MSS in flight,
  the smoothed and min RTT and the kernel's pacing rate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from quicbed.analysis.qlog import QlogTrace, metrics_frame, transfer_window

SERIES = ("cwnd", "bytes_in_flight", "smoothed_rtt", "min_rtt", "pacing_rate")
COLUMNS = ("time", *SERIES)
#: the pacer's rate per byte of window and second of smoothed RTT, per qlog producer
PACER_GAIN = {"quinn": 1.25, "unknown": 1.0}
SEQUENCE_SPACE = 2**32


def from_qlog(trace: QlogTrace, pacing: bool = True) -> pd.DataFrame:
    """Until the end of the transfer (the last event with bytes in flight)."""
    metrics = metrics_frame(trace)
    if metrics.empty:
        return pd.DataFrame(columns=COLUMNS)
    _, end = transfer_window(metrics)
    metrics = metrics[metrics["time"] <= end]
    derived = PACER_GAIN.get(trace.producer, 1.0) * metrics["cwnd"] * 8 / metrics["smoothed_rtt"]
    logged = metrics["pacing_rate"]
    pacing_rate = logged.where(logged.notna(), derived if pacing else math.nan)
    return pd.DataFrame(
        {
            "time": metrics["time"],
            "cwnd": metrics["cwnd"],
            "bytes_in_flight": metrics["bytes_in_flight"],
            "smoothed_rtt": metrics["smoothed_rtt"],
            "min_rtt": metrics["min_rtt"],
            "pacing_rate": pacing_rate,
        }
    ).reset_index(drop=True)


def from_tcp_probe(probe: pd.DataFrame, mss: float) -> pd.DataFrame:
    """One sending socket's events (tcpstate.sender_probes), until snd_una last advanced."""
    if probe.empty:
        return pd.DataFrame(columns=COLUMNS)
    advanced = np.flatnonzero(np.diff(probe["snd_una"].to_numpy(dtype=float)) > 0)
    probe = probe.iloc[: (advanced[-1] + 2 if advanced.size else len(probe))]
    in_flight = (probe["snd_nxt"].to_numpy(dtype=np.int64) - probe["snd_una"].to_numpy(dtype=np.int64)) % SEQUENCE_SPACE
    return pd.DataFrame(
        {
            "time": probe["time"],
            "cwnd": probe["cwnd"] * mss,
            "bytes_in_flight": in_flight,
            "smoothed_rtt": probe["srtt"],
            "min_rtt": math.nan,
            "pacing_rate": math.nan,
        }
    ).reset_index(drop=True)


def from_ss(samples: pd.DataFrame) -> pd.DataFrame:
    """One connection's samples (tcpstate.connection), until the one after the last ACKed growth."""
    if samples.empty:
        return pd.DataFrame(columns=COLUMNS)
    grew = np.flatnonzero(np.diff(samples["bytes_acked"].to_numpy(dtype=float)) > 0)
    samples = samples.iloc[: (grew[-1] + 2 if grew.size else len(samples))]
    return pd.DataFrame(
        {
            "time": samples["time"],
            "cwnd": samples["cwnd_bytes"],
            "bytes_in_flight": samples["unacked"] * samples["mss"],
            "smoothed_rtt": samples["rtt"],
            "min_rtt": samples["min_rtt"],
            "pacing_rate": samples["pacing_rate"],
        }
    ).reset_index(drop=True)


def median_band(
    runs: list[pd.DataFrame], column: str, step: float = 0.05, band: tuple[float, float] = (0.25, 0.75)
) -> pd.DataFrame:
    """``column`` of several runs (``time`` in s from each run's own zero) on a common grid of
    ``step`` s, each run's last value held until its next sample and nothing after its end:
    ``time``, ``median``, ``low``, ``high`` (the band's quantiles), ``runs`` (how many runs
    still had a value there)."""
    usable = [run[["time", column]].dropna() for run in runs]
    usable = [run.sort_values("time") for run in usable if not run.empty]
    if not usable:
        return pd.DataFrame(columns=["time", "median", "low", "high", "runs"])
    end = max(float(run["time"].iloc[-1]) for run in usable)
    grid = np.arange(0.0, end + step / 2, step)
    held = np.full((len(usable), grid.size), np.nan)
    for row, run in enumerate(usable):
        times, values = run["time"].to_numpy(dtype=float), run[column].to_numpy(dtype=float)
        index = np.searchsorted(times, grid, side="right") - 1
        inside = (index >= 0) & (grid <= times[-1])
        held[row, inside] = values[index[inside]]
    counts = np.sum(~np.isnan(held), axis=0)
    keep = counts > 0
    held, grid, counts = held[:, keep], grid[keep], counts[keep]
    return pd.DataFrame(
        {
            "time": grid,
            "median": np.nanmedian(held, axis=0),
            "low": np.nanquantile(held, band[0], axis=0),
            "high": np.nanquantile(held, band[1], axis=0),
            "runs": counts,
        }
    )
