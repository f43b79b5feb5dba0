"""MAC statistics a WiFi channel records (mac-stats.json): histograms of MPDUs per A-MPDU and
of MAC delays, and the per-node summaries made from them (the ns3 backend's ``nodes``)."""

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


#: a node summary's counts, summed when nodes are taken together
NODE_SUMS = (
    "airtime_s",
    "airtime_share",
    "data_psdus",
    "data_mpdus",
    "retries",
    "mac_drops",
    "queue_drops",
    "discipline_drops",
)
NODE_HISTOGRAMS = ("histogram", "mac_delay_100us", "sojourn_100us")


def summarise_node(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures of a node summary (mac_stats()["nodes"]) from its counts and histograms."""
    summary["mean_mpdus_per_ampdu"] = summary["data_mpdus"] / summary["data_psdus"] if summary["data_psdus"] else 0.0
    summary["mac_delay"] = delay_summary(summary["mac_delay_100us"])
    summary["queue_disc_sojourn"] = delay_summary(summary["sojourn_100us"])
    return summary


def merge_nodes(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Node summaries taken as one sender: a station that roamed got its frames from each AP
    in turn. Counts and airtime add up; A-MPDU sizes and delays come from the merged counts."""
    merged: dict[str, Any] = {key: sum(s.get(key, 0) for s in summaries) for key in NODE_SUMS}
    merged.update({key: merge_histograms(*(s.get(key, {}) for s in summaries)) for key in NODE_HISTOGRAMS})
    return summarise_node(merged)


def receiver_summary(radios: dict[str, Any], senders: list[str], receiver: str) -> dict[str, Any] | None:
    """What the ``senders``' radios sent to ``receiver`` alone (their ``per_receiver`` entries):
    PSDUs, MPDUs, retries, airtime, the A-MPDU and MAC delay histograms, and the figures made
    from them. Other receivers of the same AP, and a relay's other radio (its upstream ACKs),
    stay out. None when no radio kept per-receiver figures with histograms (older folders)."""
    entries = [
        radio["per_receiver"][receiver]
        for radio in radios.values()
        if radio.get("node") in senders and receiver in (radio.get("per_receiver") or {})
    ]
    if not entries or any("mac_delay_100us" not in entry for entry in entries):
        return None
    summary: dict[str, Any] = {
        key: sum(entry[key] for entry in entries) for key in ("psdus", "mpdus", "retries", "airtime_s")
    }
    summary["histogram"] = merge_histograms(*(entry["histogram"] for entry in entries))
    summary["mac_delay_100us"] = merge_histograms(*(entry["mac_delay_100us"] for entry in entries))
    summary["mean_mpdus_per_ampdu"] = summary["mpdus"] / summary["psdus"] if summary["psdus"] else 0.0
    summary["mac_delay"] = delay_summary(summary["mac_delay_100us"])
    return summary
