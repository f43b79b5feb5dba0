"""Stations that moved or roamed: figures from the timeline the ns3 channel records for them
(``motion`` in a run's mac-stats.json: samples of position, AP, signal per AP, MCS and bytes
delivered, and association events; seconds from the start of the run's transfer)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd


def handovers(timeline: dict[str, Any], interval: float) -> dict[str, float]:
    """Figures of a station's handovers from its timeline (:func:`_motion`): their number,
    the longest outage (from the last frame delivered through the AP it lost to the first
    delivered through the next one) and the longest recovery (from a re-association to the
    end of the first sample after it that delivered at least half the median rate of the
    run's samples; resolution: one sample)."""
    events = timeline["events"]
    associations = [e for e in events if e["event"] == "associated"]
    values: dict[str, float] = {"handovers": float(len(associations))}
    outages, recoveries = [], []
    samples = timeline["samples"]
    rates = sorted(s["rx_bytes"] for s in samples)
    target = rates[len(rates) // 2] / 2 if rates else 0.0
    for lost in (e for e in events if e["event"] == "lost"):
        after = next((e for e in events if e["event"] == "first_delivery" and e["t"] > lost["t"]), None)
        if after is not None and lost.get("last_delivery") is not None:
            outages.append(after["t"] - lost["last_delivery"])
        association = next((e for e in associations if e["t"] > lost["t"]), None)
        if association is not None and target > 0:
            back = next(
                (s["t"] for s in samples if s["t"] - interval >= association["t"] - 1e-9 and s["rx_bytes"] >= target),
                None,
            )
            if back is not None:
                recoveries.append(back - association["t"])
    if outages:
        values["handover_outage"] = max(outages)
    if recoveries:
        values["handover_recovery"] = max(recoveries)
    return values


def capture_outages(arrivals: Sequence[float], associations: Sequence[float]) -> list[float]:
    """Per re-association (a time), the gap between the client's last data packet before it
    and its first after it (``arrivals``: the times its capture received the download's data
    packets, sorted), where packets came on both sides. Where no per-frame record says when
    the old AP stopped delivering (mininet-wifi), this gap bounds the outage from the client's
    side."""
    gaps = []
    for moment in associations:
        after = bisect.bisect_right(arrivals, moment)
        if 0 < after < len(arrivals):
            gaps.append(arrivals[after] - arrivals[after - 1])
    return gaps


def aps_used(timeline: dict[str, Any] | None) -> list[str]:
    """The APs a station was with over its timeline (in a sample, or an association event), in
    the order it first was; empty without a timeline."""
    if not timeline:
        return []
    seen = sorted(
        [(s["t"], s["ap"]) for s in timeline["samples"] if s.get("ap")]
        + [(e["t"], e["ap"]) for e in timeline["events"] if e["event"] == "associated" and e.get("ap")]
    )
    return list(dict.fromkeys(ap for _, ap in seen))


def timeline_frame(timeline: dict[str, Any], interval: float) -> pd.DataFrame:
    """One row per sample: ``t`` (the sample's end, s), ``x``, ``y`` (m), ``ap``, ``rate``
    (bit/s delivered in the sample), ``mcs`` (mean received, NaN when no data frame came)
    and ``signal:AP`` (mean dBm heard from each AP, NaN when none)."""
    aps = sorted({ap for s in timeline["samples"] for ap in s["signal_dbm"]})
    rows = [
        {
            "t": s["t"],
            "x": s["x"],
            "y": s["y"],
            "ap": s["ap"] or "",
            "rate": s["rx_bytes"] * 8 / interval,
            "mcs": math.nan if s["mcs"] is None else s["mcs"],
            **{f"signal:{ap}": s["signal_dbm"].get(ap, math.nan) for ap in aps},
        }
        for s in timeline["samples"]
    ]
    return pd.DataFrame(rows, columns=["t", "x", "y", "ap", "rate", "mcs", *(f"signal:{ap}" for ap in aps)])
