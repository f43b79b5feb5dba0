"""MAC statistics of the ns-3 channel program, summarised per run (pure functions).

The channel program writes raw statistics (JSON) at exit, on SIGUSR1 (snapshot) and on
SIGUSR2 (reset + snapshot); see quicbed/backends/ns3/channel/qbchannel.cc. ``summarize``
adds what a run record needs: validity (time spent behind real time), per-node and
per-channel airtime, MPDUs per A-MPDU, retries, drops and MAC delay (a data frame's time
from entering its radio queue to the receiver's MAC acknowledgement).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Any


def mean_from_histogram(histogram: dict[str, int]) -> float:
    total = sum(histogram.values())
    return sum(int(k) * v for k, v in histogram.items()) / total if total else 0.0


def aggregated_mean(histogram: dict[str, int]) -> float:
    """Mean MPDUs per A-MPDU counting only PSDUs that carried more than one MPDU."""
    multi = {k: v for k, v in histogram.items() if int(k) > 1}
    return mean_from_histogram(multi)


def merge_histograms(*histograms: dict[str, int]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for histogram in histograms:
        for key, count in histogram.items():
            merged[key] = merged.get(key, 0) + count
    return dict(sorted(merged.items(), key=lambda item: int(item[0])))


#: the width (s) of the channel's MAC delay buckets ("mac_delay_100us")
DELAY_BUCKET_S = 100e-6


def delay_summary(histogram: dict[str, int]) -> dict[str, Any]:
    """Frames, mean, median and 95th percentile (s) of a MAC delay histogram (bucket index ->
    count), each frame taken at its bucket's middle."""
    frames = sum(histogram.values())
    if not frames:
        return {"frames": 0, "mean_s": None, "median_s": None, "p95_s": None}
    buckets = sorted((int(k), v) for k, v in histogram.items())
    cumulative = list(accumulate(count for _, count in buckets))

    def quantile(q: float) -> float:  # the bucket holding the q-th frame
        return (buckets[bisect_left(cumulative, q * frames)][0] + 0.5) * DELAY_BUCKET_S

    mean = sum((bucket + 0.5) * count for bucket, count in buckets) / frames * DELAY_BUCKET_S
    return {"frames": frames, "mean_s": mean, "median_s": quantile(0.5), "p95_s": quantile(0.95)}


#: the lag counter the time-behind rule reads: probes more than this many ms late
BEHIND_MS = 4.0
#: the share of the run the simulator may spend more than BEHIND_MS behind (set from bench/validity.py)
MAX_BEHIND_SHARE = 0.01
_OVER_COUNTERS = {1.0: "over_1ms", 4.0: "over_4ms", 16.0: "over_16ms"}


def time_behind_share(lag: dict[str, Any], sim_seconds: float, behind_ms: float = BEHIND_MS) -> float:
    """The share of the interval the simulator ran more than ``behind_ms`` behind the wall clock.

    A probe event fires every ``probe_interval_ms`` of simulated time; while the simulator is
    behind, each probe records how late it fired, so the probes late by more than
    ``behind_ms``, times the probe interval, measure (in simulated time) how long it was behind.
    """
    counter = _OVER_COUNTERS.get(behind_ms)
    if counter is None:
        raise ValueError(f"no lag counter for {behind_ms} ms (the channel counts {sorted(_OVER_COUNTERS)})")
    if sim_seconds <= 0:
        return 0.0
    return min(1.0, lag.get(counter, 0) * lag.get("probe_interval_ms", 1.0) / 1000.0 / sim_seconds)


def validity(raw: dict[str, Any], max_behind_share: float = MAX_BEHIND_SHARE) -> tuple[bool, list[str]]:
    """Whether the simulator kept real time (and had started properly) during the interval.

    The rule is the time spent behind, not the largest lag: a single late wake-up of tens
    of ms moves a run's goodput by well under 1 %, while being behind for a share of the run
    moves it by about that share (bench/validity.py, docs/metrics.md).
    """
    reasons = []
    lag = raw.get("lag", {})
    sim = (raw.get("interval") or {}).get("sim_s") or 0.0
    behind = time_behind_share(lag, sim)
    if behind > max_behind_share:
        reasons.append(f"ns-3 ran more than {BEHIND_MS:g} ms behind the wall clock for {behind:.1%} of the run "
                       f"(limit {max_behind_share:.1%}; largest lag {lag.get('max_ms', 0):.1f} ms, "
                       f"p99 {lag.get('p99_ms', 0):.1f} ms)")
    if not lag.get("samples"):
        reasons.append("no lag samples (the simulator did not run)")
    if not raw.get("ready", True):
        reasons.append("the medium never became ready (association or block-ack set-up failed)")
    return not reasons, reasons


def summarize(raw: dict[str, Any], max_behind_share: float = MAX_BEHIND_SHARE,
              owners: dict[str, str] | None = None) -> dict[str, Any]:
    """Per-run MAC statistics from a raw snapshot or final file of the channel program."""
    owners = owners or {}
    valid, reasons = validity(raw, max_behind_share)
    interval = raw.get("interval", {})
    sim = interval.get("sim_s") or 0.0
    radios: dict[str, Any] = {}
    nodes: dict[str, dict[str, Any]] = {}
    channels: dict[str, dict[str, Any]] = {}
    for radio in raw.get("radios", []):
        node = owners.get(radio["id"], radio.get("node", "").partition(":")[0])
        tx = radio["tx_data"]
        drops = radio["drops"]
        entry = {
            "node": node, "role": radio["role"], "mac": radio["mac"], "channel": radio["channel"],
            "airtime_s": radio["airtime_s"], "airtime_share": radio["airtime_share"],
            "data_psdus": tx["psdus"], "data_mpdus": tx["mpdus"], "data_bytes": tx["bytes"],
            "retries": tx["retries"],
            "mpdus_per_ampdu": {"mean": tx["mean_mpdus_per_psdu"],
                                "mean_aggregated": aggregated_mean(tx["mpdus_per_psdu"]),
                                "histogram": tx["mpdus_per_psdu"]},
            "mac_drops": drops["retry_limit"] + drops["lifetime"] + drops["other"],
            "queue_drops": drops["queue_full"], "drops": drops,
            "mac_delay": delay_summary(tx.get("mac_delay_100us", {})),
            "per_receiver": {
                owners.get(key, key): {"psdus": v["psdus"], "mpdus": v["mpdus"], "retries": v["retries"],
                                       "mean_mpdus_per_ampdu": v["mean_mpdus_per_psdu"],
                                       "histogram": v["mpdus_per_psdu"],
                                       "mac_delay": delay_summary(v.get("mac_delay_100us", {}))}
                for key, v in radio.get("per_receiver", {}).items()},
        }
        radios[radio["id"]] = entry
        summary = nodes.setdefault(node, {"airtime_s": 0.0, "airtime_share": 0.0, "data_psdus": 0,
                                          "data_mpdus": 0, "retries": 0, "mac_drops": 0, "queue_drops": 0,
                                          "histogram": {}, "mac_delay_100us": {}})
        summary["airtime_s"] += radio["airtime_s"]["total"]
        summary["airtime_share"] += radio["airtime_share"]
        summary["data_psdus"] += tx["psdus"]
        summary["data_mpdus"] += tx["mpdus"]
        summary["retries"] += tx["retries"]
        summary["mac_drops"] += entry["mac_drops"]
        summary["queue_drops"] += entry["queue_drops"]
        summary["histogram"] = merge_histograms(summary["histogram"], tx["mpdus_per_psdu"])
        summary["mac_delay_100us"] = merge_histograms(summary["mac_delay_100us"], tx.get("mac_delay_100us", {}))
        channel = channels.setdefault(str(radio["channel"]), {"airtime_s": 0.0, "radios": []})
        channel["airtime_s"] += radio["airtime_s"]["total"]
        channel["radios"].append(radio["id"])
    for summary in nodes.values():
        summary["mean_mpdus_per_ampdu"] = (summary["data_mpdus"] / summary["data_psdus"]
                                           if summary["data_psdus"] else 0.0)
        summary["mac_delay"] = delay_summary(summary.pop("mac_delay_100us"))
    for channel in channels.values():
        channel["busy_share"] = channel["airtime_s"] / sim if sim else 0.0
        for radio_id in channel["radios"]:
            radios[radio_id]["channel_airtime_share"] = (radios[radio_id]["airtime_s"]["total"] / channel["airtime_s"]
                                                         if channel["airtime_s"] else 0.0)
    return {
        "valid": valid, "invalid_reasons": reasons, "max_behind_share": max_behind_share,
        "behind_share": time_behind_share(raw.get("lag", {}), sim),
        "final": raw.get("final", False), "lag": raw.get("lag", {}), "interval": interval,
        "cpu_share": interval.get("cpu_share"),
        "nodes": nodes, "radios": radios, "channels": channels,
        "wires": {w["name"]: {"forward": w["forward"], "backward": w["backward"]} for w in raw.get("wires", [])},
        "taps": {t["id"]: {k: v for k, v in t.items() if k != "id"} for t in raw.get("taps", [])},
        "mesh": {m["node"]: {k: v for k, v in m.items() if k != "node"} for m in raw.get("mesh", [])},
        "bridges": {b["node"]: {k: v for k, v in b.items() if k != "node"} for b in raw.get("bridges", [])},
    }
