"""MAC statistics of the ns-3 channel program, summarised per run (pure functions).

The channel program writes raw statistics (JSON) at exit, on SIGUSR1 (snapshot) and on
SIGUSR2 (reset + snapshot); see quicbed/backends/ns3/channel/qbchannel.cc. ``summarize``
adds what a run record needs: validity (time spent behind real time), per-node and
per-channel airtime, MPDUs per A-MPDU, retries, drops and MAC delay (a data frame's time
from entering its radio queue to the receiver's MAC acknowledgement).
"""

from __future__ import annotations

from typing import Any

from quicbed.analysis.mac import aggregated_mean, delay_summary, merge_histograms, summarise_node


#: the lag the time-behind rule counts: probes more than this many ms late
BEHIND_MS = 4.0
#: the share of the transfer the simulator may spend more than BEHIND_MS behind (set from bench/validity.py)
MAX_BEHIND_SHARE = 0.01
#: the smaller lag a second rule counts: sustained lag under BEHIND_MS still adds to every packet's delay
SLOW_MS = 1.0
#: the share of the transfer the simulator may spend more than SLOW_MS behind (set from bench/validity.py)
MAX_SLOW_SHARE = 0.02
_OVER_COUNTERS = {1.0: "over_1ms", 4.0: "over_4ms", 16.0: "over_16ms"}
#: a frame may wait this long (s) between its TAP read and the simulator, or in the TAP writer's
#: queue, at the 95th percentile (set from bench/validity.py)
MAX_TAP_DELAY_P95 = 0.002


def time_behind_share(lag: dict[str, Any], sim_seconds: float, behind_ms: float = BEHIND_MS) -> float:
    """The share of the interval the simulator ran more than ``behind_ms`` behind the wall clock.

    A probe event fires every ``probe_interval_ms`` of simulated time; while the simulator is
    behind, each probe records how late it fired, so the probes late by more than
    ``behind_ms``, times the probe interval, measure (in simulated time) how long it was behind.
    Counted from the probes the channel kept one by one (``late_us``, every probe at least
    1 ms late) when it has them, else from its power-of-two counters (whose "4 ms" is 4.096).
    """
    if sim_seconds <= 0:
        return 0.0
    if "late_us" in lag and behind_ms * 1000 >= lag.get("late_min_us", 1000):
        late = sum(1 for us in lag["late_us"] if us > behind_ms * 1000) + lag.get("late_not_kept", 0)
    else:
        counter = _OVER_COUNTERS.get(behind_ms)
        if counter is None:
            raise ValueError(f"no lag counter for {behind_ms} ms (the channel counts {sorted(_OVER_COUNTERS)})")
        late = lag.get(counter, 0)
    return min(1.0, late * lag.get("probe_interval_ms", 1.0) / 1000.0 / sim_seconds)


def lag_in_window(raw: dict[str, Any], start_mono: float, end_mono: float) -> tuple[dict[str, Any], float] | None:
    """The lag record restricted to the probes due between ``start_mono`` and ``end_mono``
    (CLOCK_MONOTONIC seconds, the clock the runner times transfers with), and the window's
    length in simulated seconds; None when the snapshot cannot be placed on that clock (an
    older channel) or the window lies outside its interval."""
    lag, interval = raw.get("lag") or {}, raw.get("interval") or {}
    origin = interval.get("mono_at_sim_start")
    if not origin or "late_sim_us" not in lag:
        return None
    first = max(0.0, start_mono - origin)
    last = min(interval.get("sim_s") or 0.0, end_mono - origin)
    if last <= first:
        return None
    inside = [(t, us) for t, us in zip(lag["late_sim_us"], lag["late_us"]) if first <= t / 1e6 <= last]
    window = {
        "probe_interval_ms": lag.get("probe_interval_ms", 1.0),
        "late_min_us": lag.get("late_min_us", 1000),
        "late_us": [us for _, us in inside],
        "late_sim_us": [t for t, _ in inside],
        "late_not_kept": lag.get("late_not_kept", 0),
        "samples": lag.get("samples", 0),
        "max_ms": max((us for _, us in inside), default=0) / 1000.0,
    }
    return window, last - first


def tap_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """The path between the namespaces and the simulator: frames dropped because the simulator
    did not take them up in time (a TAP reader's queue, the writer's queue) and the delays
    frames waited there (s: median, 95th percentile and largest, over every TAP's frames)."""
    taps = raw.get("taps") or []
    writer = raw.get("tap_writer") or {}
    read = merge_histograms(*(t.get("delay_100us", {}) for t in taps))
    return {
        "rx_drops": sum(t.get("rx_drops", 0) for t in taps),
        "rx_pending_max": max((t.get("rx_pending_max", 0) for t in taps), default=0),
        "rx_delay": {**delay_summary(read), "max_s": max((t.get("delay_max_us", 0) for t in taps), default=0) / 1e6},
        "tx_drops": writer.get("drops", 0),
        "tx_queue_max": writer.get("queue_max", 0),
        "tx_delay": {**delay_summary(writer.get("delay_100us", {})), "max_s": writer.get("delay_max_us", 0) / 1e6},
        "measured": bool(writer) and all("rx_drops" in t for t in taps),
    }


def frames_summary(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The channel's frame ledger (ledger.h): unicast IPv4 frames read from the TAPs, written
    to them, dropped at a counted place (by reason), still in flight (of which ``held``: older
    than ``settle_s``, in a queue that still holds frames), and vanished (neither, longer than
    ``settle_s`` after they entered, and not in such a queue: lost inside the emulator), with up to 20 of the
    vanished frames (when they entered, in seconds from the reset; the last stage they reached).
    None for a channel without a ledger, or with it switched off."""
    frames = raw.get("frames")
    if not frames or not frames.get("enabled"):
        return None
    return {
        key: frames[key]
        for key in (
            "entered",
            "copies_made",
            "left",
            "left_unentered",
            "dropped",
            "in_flight",
            "held",
            "vanished",
            "vanished_frames",
            "settle_s",
        )
    }


def validity(
    raw: dict[str, Any],
    max_behind_share: float = MAX_BEHIND_SHARE,
    window: tuple[float, float] | None = None,
    max_slow_share: float = MAX_SLOW_SHARE,
) -> tuple[bool, list[str], dict[str, Any]]:
    """Whether the simulator kept real time (and had started properly) while it mattered.

    Judged over ``window`` (the transfer, CLOCK_MONOTONIC seconds) when given and placeable,
    else over the whole interval; idle time before and after a transfer would otherwise dilute
    a stall inside it. Two rules: the time spent more than BEHIND_MS behind (a single late
    wake-up of tens of ms moves a run's goodput by well under 1 %, being behind for a share
    of the run moves it by about that share) and the time spent more than SLOW_MS behind
    (a channel hovering a few ms behind adds that to every packet's delay without ever
    passing BEHIND_MS); and the TAP path: frames it dropped, or held too long, are outside
    the model (bench/validity.py, docs/metrics.md). Returns validity, the reasons, and the
    figures it judged.
    """
    reasons = []
    lag = raw.get("lag", {})
    sim = (raw.get("interval") or {}).get("sim_s") or 0.0
    judged, what = lag, "run"
    placed = lag_in_window(raw, *window) if window else None
    if placed is not None:
        (judged, sim), what = placed, "transfer"
    behind = time_behind_share(judged, sim)
    slow = time_behind_share(judged, sim, SLOW_MS)
    if behind > max_behind_share:
        reasons.append(
            f"ns-3 ran more than {BEHIND_MS:g} ms behind the wall clock for {behind:.1%} of the {what} "
            f"(limit {max_behind_share:.1%}; largest lag {judged.get('max_ms', 0):.1f} ms)"
        )
    if slow > max_slow_share:
        reasons.append(
            f"ns-3 ran more than {SLOW_MS:g} ms behind the wall clock for {slow:.1%} of the {what} "
            f"(limit {max_slow_share:.0%}): every packet was delayed by it"
        )
    if not lag.get("samples"):
        reasons.append("no lag samples (the simulator did not run)")
    if not raw.get("ready", True):
        reasons.append("the medium never became ready (association or block-ack set-up failed)")
    taps = tap_summary(raw)
    if taps["rx_drops"]:
        reasons.append(
            f"{taps['rx_drops']} frames from the namespaces were dropped before the simulator took them "
            "up (its TAP readers' queues were full)"
        )
    if taps["tx_drops"]:
        reasons.append(f"{taps['tx_drops']} frames to the namespaces were dropped in the TAP writer's full queue")
    frames = frames_summary(raw)
    if frames and frames["vanished"]:
        stages = sorted({f["stage"] for f in frames["vanished_frames"]})
        reasons.append(
            f"{frames['vanished']} frames vanished inside the channel: read from a TAP, neither written "
            f"to one nor dropped for a counted reason within {frames['settle_s']:g} s (last stage: "
            f"{', '.join(stages)}; mac-stats.json 'frames' lists them)"
        )
    for direction, words in (
        ("rx_delay", "from the namespaces waited to enter the simulator"),
        ("tx_delay", "waited in the TAP writer's queue"),
    ):
        p95 = taps[direction]["p95_s"]
        if p95 is not None and p95 > MAX_TAP_DELAY_P95:
            reasons.append(
                f"frames {words} {p95 * 1e3:.1f} ms at the 95th percentile (limit {MAX_TAP_DELAY_P95 * 1e3:g} ms)"
            )
    figures = {
        "judged_over": what,
        "judged_sim_s": sim,
        "behind_share": behind,
        "slow_share": slow,
        "judged_lag_max_ms": judged.get("max_ms", 0.0),
        "tap": taps,
        "frames": frames,
    }
    return not reasons, reasons, figures


def _queue(raw: dict[str, Any]) -> dict[str, Any]:
    """A queue discipline's counters (aqm.cc): frames enqueued, drops at both ends added up
    with ns-3's reasons, and the frames' time in it."""
    return {
        "enqueued": raw["enqueued"],
        "drops": raw["drops"]["at_enqueue"] + raw["drops"]["at_dequeue"],
        "drop_reasons": raw["drops"]["reasons"],
        "sojourn": delay_summary(raw["sojourn_100us"]),
    }


def _receiver(raw: dict[str, Any]) -> dict[str, Any]:
    """One receiver's share of a radio's transmissions, and (mac80211 queues) its own queue."""
    entry = {
        "psdus": raw["psdus"],
        "mpdus": raw["mpdus"],
        "retries": raw["retries"],
        "airtime_s": raw.get("airtime_s", 0.0),
        "mean_mpdus_per_ampdu": raw["mean_mpdus_per_psdu"],
        "histogram": raw["mpdus_per_psdu"],
        "mac_delay": delay_summary(raw.get("mac_delay_100us", {})),
        "mac_delay_100us": raw.get("mac_delay_100us", {}),
    }
    if queue := raw.get("queue"):
        entry["queue"] = {
            **_queue(queue),
            "backlog_packets": queue["backlog_packets"],
            "airtime_s": queue["airtime_s"],
            "turns": queue["turns"],
        }
    return entry


def summarize(
    raw: dict[str, Any],
    max_behind_share: float = MAX_BEHIND_SHARE,
    owners: dict[str, str] | None = None,
    window: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Per-run MAC statistics from a raw snapshot or final file of the channel program; validity
    over ``window`` (the transfer, CLOCK_MONOTONIC seconds) when given."""
    owners = owners or {}
    valid, reasons, judged = validity(raw, max_behind_share, window)
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
            "node": node,
            "role": radio["role"],
            "mac": radio["mac"],
            "channel": radio["channel"],
            "airtime_s": radio["airtime_s"],
            "airtime_share": radio["airtime_share"],
            "data_psdus": tx["psdus"],
            "data_mpdus": tx["mpdus"],
            "data_bytes": tx["bytes"],
            "retries": tx["retries"],
            "mpdus_per_ampdu": {
                "mean": tx["mean_mpdus_per_psdu"],
                "mean_aggregated": aggregated_mean(tx["mpdus_per_psdu"]),
                "histogram": tx["mpdus_per_psdu"],
            },
            "mac_drops": drops["retry_limit"] + drops["lifetime"] + drops["other"],
            "queue_drops": drops["queue_full"],
            "drops": drops,
            "mac_delay": delay_summary(tx.get("mac_delay_100us", {})),
            # the fastest data PPDU and its spatial streams (0 when it sent none)
            "data_phy_rate_max_bps": radio.get("data_phy_rate_max_bps", 0),
            "data_streams_max": radio.get("data_streams_max", 0),
            # downlink OFDMA (802.11ax, ofdma=True): multi-user PPDUs, and the PSDUs they carried
            "mu_ppdus": radio.get("mu_ppdus", 0),
            "mu_psdus": radio.get("mu_psdus", 0),
            # 802.11ax spatial reuse: PPDUs of another BSS colour this radio ignored (obss_pd)
            "obss_pd_resets": radio.get("obss_pd_resets", 0),
            "ul_mu_ppdus": radio.get("ul_mu_ppdus", 0),
            "ul_mu_data_psdus": radio.get("ul_mu_data_psdus", 0),
            "trigger_frames": radio.get("trigger_frames", 0),
            # PSDUs received on ns-3's own path, those addressed to others it skimmed, and of the
            # latter's MPDUs those judged and those that only drew their random number (skim.h)
            "psdus_received": radio.get("psdus_received", 0),
            "psdus_skimmed": radio.get("psdus_skimmed", 0),
            "skimmed_mpdus_judged": radio.get("skimmed_mpdus_judged", 0),
            "skimmed_mpdus_drawn_only": radio.get("skimmed_mpdus_drawn_only", 0),
            "per_receiver": {owners.get(key, key): _receiver(v) for key, v in radio.get("per_receiver", {}).items()},
        }
        discipline = radio.get("queue_disc")
        if discipline:
            # a queue discipline in front of the MAC queue (aqm.h): its time in it and its drops
            entry["queue_disc"] = {
                "kind": discipline["kind"],
                "limit_packets": discipline["limit_packets"],
                "marks": discipline["marks"],
                **_queue(discipline),
            }
        radios[radio["id"]] = entry
        summary = nodes.setdefault(
            node,
            {
                "airtime_s": 0.0,
                "airtime_share": 0.0,
                "data_psdus": 0,
                "data_mpdus": 0,
                "retries": 0,
                "mac_drops": 0,
                "queue_drops": 0,
                "histogram": {},
                "mac_delay_100us": {},
                "sojourn_100us": {},
                "discipline_drops": 0,
            },
        )
        summary["airtime_s"] += radio["airtime_s"]["total"]
        summary["airtime_share"] += radio["airtime_share"]
        summary["data_psdus"] += tx["psdus"]
        summary["data_mpdus"] += tx["mpdus"]
        summary["retries"] += tx["retries"]
        summary["mac_drops"] += entry["mac_drops"]
        summary["queue_drops"] += entry["queue_drops"]
        summary["histogram"] = merge_histograms(summary["histogram"], tx["mpdus_per_psdu"])
        summary["mac_delay_100us"] = merge_histograms(summary["mac_delay_100us"], tx.get("mac_delay_100us", {}))
        if discipline:
            summary["sojourn_100us"] = merge_histograms(summary["sojourn_100us"], discipline["sojourn_100us"])
            summary["discipline_drops"] += entry["queue_disc"]["drops"]
        channel = channels.setdefault(str(radio["channel"]), {"airtime_s": 0.0, "radios": []})
        channel["airtime_s"] += radio["airtime_s"]["total"]
        channel["radios"].append(radio["id"])
    for summary in nodes.values():
        summarise_node(summary)
    for channel in channels.values():
        channel["busy_share"] = channel["airtime_s"] / sim if sim else 0.0
        for radio_id in channel["radios"]:
            radios[radio_id]["channel_airtime_share"] = (
                radios[radio_id]["airtime_s"]["total"] / channel["airtime_s"] if channel["airtime_s"] else 0.0
            )
    bridges = {b["node"]: {k: v for k, v in b.items() if k != "node"} for b in raw.get("bridges", [])}
    for name, bridge in bridges.items():
        abandoned = (bridge.get("fastack") or {}).get("flows_abandoned") or 0
        if abandoned:  # the sender freed data the AP acknowledged for it: that connection stalled for good
            valid = False
            reasons = [
                *reasons,
                f"access point {name}'s FastACK gave up on {abandoned} flow(s): data it had "
                "acknowledged for the station may never have reached it, and the flow ran on unaccelerated "
                "(docs/ns3-backend.md, 'ACK acceleration')",
            ]
    return {
        "valid": valid,
        "invalid_reasons": reasons,
        "max_behind_share": max_behind_share,
        "max_slow_share": MAX_SLOW_SHARE,
        **judged,
        "final": raw.get("final", False),
        "interval": interval,
        # the probes kept one by one are for judging windows, not for the record
        "lag": {k: v for k, v in (raw.get("lag") or {}).items() if k not in ("late_sim_us", "late_us")},
        "cpu_share": interval.get("cpu_share"),
        "nodes": nodes,
        "radios": radios,
        "channels": channels,
        "wires": {w["name"]: {"forward": w["forward"], "backward": w["backward"]} for w in raw.get("wires", [])},
        "taps": {t["id"]: {k: v for k, v in t.items() if k != "id"} for t in raw.get("taps", [])},
        "mesh": {m["node"]: {k: v for k, v in m.items() if k != "node"} for m in raw.get("mesh", [])},
        "bridges": bridges,
        **({"motion": _motion(raw["motion"], owners)} if raw.get("motion") else {}),
    }


def _motion(raw: dict[str, Any], owners: dict[str, str]) -> dict[str, Any]:
    """The moving and roaming stations' timeline by node name: samples every ``interval_s``
    (position, AP, mean signal per AP in dBm, mean MCS received, bytes delivered in the
    interval) and association events, in seconds from the start of the motion (the run's
    statistics reset)."""

    def name(radio_id: str | None) -> str | None:
        return None if radio_id is None else owners.get(radio_id, radio_id.partition(":")[0])

    stations = {}
    for radio_id, timeline in raw["stations"].items():
        stations[name(radio_id)] = {
            "samples": [
                {**s, "ap": name(s["ap"]), "signal_dbm": {name(k): v for k, v in s["signal_dbm"].items()}}
                for s in timeline["samples"]
            ],
            "events": [{**e, "ap": name(e["ap"])} for e in timeline["events"]],
        }
    return {"interval_s": raw["interval_s"], "stations": stations}
