"""MAC statistics of the ns-3 channel program, summarised per run (pure functions).

The channel program writes raw statistics (JSON) at exit, on SIGUSR1 (snapshot) and on
SIGUSR2 (reset + snapshot); see quicbed/backends/ns3/channel/qbchannel.cc. ``summarize``
adds what a run record needs: validity against the lag threshold, per-node and
per-channel airtime, MPDUs per A-MPDU, retries and drops.
"""

from __future__ import annotations

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


def validity(raw: dict[str, Any], lag_threshold_ms: float) -> tuple[bool, list[str]]:
    """Whether the simulator kept real time (and had started properly) during the interval."""
    reasons = []
    lag = raw.get("lag", {})
    if lag.get("max_ms", 0) > lag_threshold_ms:
        reasons.append(f"ns-3 fell {lag['max_ms']:.1f} ms behind the wall clock "
                       f"(threshold {lag_threshold_ms:g} ms; mean {lag.get('mean_ms', 0):.2f} ms)")
    if not lag.get("samples"):
        reasons.append("no lag samples (the simulator did not run)")
    if not raw.get("ready", True):
        reasons.append("the medium never became ready (association or block-ack set-up failed)")
    return not reasons, reasons


def summarize(raw: dict[str, Any], lag_threshold_ms: float, owners: dict[str, str] | None = None) -> dict[str, Any]:
    """Per-run MAC statistics from a raw snapshot or final file of the channel program."""
    owners = owners or {}
    valid, reasons = validity(raw, lag_threshold_ms)
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
            "per_receiver": {
                owners.get(key, key): {"psdus": v["psdus"], "mpdus": v["mpdus"], "retries": v["retries"],
                                       "mean_mpdus_per_ampdu": v["mean_mpdus_per_psdu"],
                                       "histogram": v["mpdus_per_psdu"]}
                for key, v in radio.get("per_receiver", {}).items()},
        }
        radios[radio["id"]] = entry
        summary = nodes.setdefault(node, {"airtime_s": 0.0, "airtime_share": 0.0, "data_psdus": 0,
                                          "data_mpdus": 0, "retries": 0, "mac_drops": 0, "queue_drops": 0,
                                          "histogram": {}})
        summary["airtime_s"] += radio["airtime_s"]["total"]
        summary["airtime_share"] += radio["airtime_share"]
        summary["data_psdus"] += tx["psdus"]
        summary["data_mpdus"] += tx["mpdus"]
        summary["retries"] += tx["retries"]
        summary["mac_drops"] += entry["mac_drops"]
        summary["queue_drops"] += entry["queue_drops"]
        summary["histogram"] = merge_histograms(summary["histogram"], tx["mpdus_per_psdu"])
        channel = channels.setdefault(str(radio["channel"]), {"airtime_s": 0.0, "radios": []})
        channel["airtime_s"] += radio["airtime_s"]["total"]
        channel["radios"].append(radio["id"])
    for summary in nodes.values():
        summary["mean_mpdus_per_ampdu"] = (summary["data_mpdus"] / summary["data_psdus"]
                                           if summary["data_psdus"] else 0.0)
    for channel in channels.values():
        channel["busy_share"] = channel["airtime_s"] / sim if sim else 0.0
        for radio_id in channel["radios"]:
            radios[radio_id]["channel_airtime_share"] = (radios[radio_id]["airtime_s"]["total"] / channel["airtime_s"]
                                                         if channel["airtime_s"] else 0.0)
    return {
        "valid": valid, "invalid_reasons": reasons, "lag_threshold_ms": lag_threshold_ms,
        "final": raw.get("final", False), "lag": raw.get("lag", {}), "interval": interval,
        "cpu_share": interval.get("cpu_share"),
        "nodes": nodes, "radios": radios, "channels": channels,
        "wires": {w["name"]: {"forward": w["forward"], "backward": w["backward"]} for w in raw.get("wires", [])},
        "taps": {t["id"]: {k: v for k, v in t.items() if k != "id"} for t in raw.get("taps", [])},
        "mesh": {m["node"]: {k: v for k, v in m.items() if k != "node"} for m in raw.get("mesh", [])},
        "bridges": {b["node"]: {k: v for k, v in b.items() if k != "node"} for b in raw.get("bridges", [])},
    }
