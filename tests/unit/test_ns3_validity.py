"""Real-time validity of the ns-3 channel judged from its statistics (quicbed/backends/ns3/stats.py):
over the transfer rather than the whole run, for sustained small lag, and over the TAP path.

The snapshots below have the shape the channel program writes (stats.cc): every probe at least
1 ms late is kept with its simulated time (``late_sim_us``, ``late_us``), and ``interval``
places the snapshot on CLOCK_MONOTONIC (``mono_at_sim_start``).
"""

from __future__ import annotations

import json

import pytest

from quicbed.backends.ns3.stats import (
    MAX_SLOW_SHARE,
    frames_summary,
    lag_in_window,
    summarize,
    tap_summary,
    time_behind_share,
    validity,
)
from quicbed.runner.analyse import mac_metrics

ORIGIN = 1000.0  # CLOCK_MONOTONIC seconds at the snapshot's simulated time 0


def snapshot(
    late: list[tuple[float, int]],
    sim_s: float = 3.0,
    taps: list[dict] | None = None,
    writer: dict | None = None,
    frames: dict | None = None,
) -> dict:
    """A 3 s snapshot with the probes late by ``lag_us`` at ``t`` seconds of simulated time."""
    return {
        "ready": True,
        "interval": {"sim_s": sim_s, "mono_at_sim_start": ORIGIN},
        "lag": {
            "samples": int(sim_s * 1000),
            "probe_interval_ms": 1.0,
            "max_ms": max((us for _, us in late), default=0) / 1e3,
            "over_1ms": sum(us >= 1024 for _, us in late),
            "over_4ms": sum(us >= 4096 for _, us in late),
            "over_16ms": sum(us >= 16384 for _, us in late),
            "late_min_us": 1000,
            "late_not_kept": 0,
            "late_sim_us": [round(t * 1e6) for t, _ in late],
            "late_us": [us for _, us in late],
        },
        "radios": [],
        "wires": [],
        "taps": taps or [],
        "mesh": [],
        "tap_writer": writer or {},
        **({"frames": frames} if frames else {}),
    }


def ledger(vanished: list[dict], in_flight: int = 0) -> dict:
    """The frame ledger's part of a snapshot (ledger.cc), 100 frames entered."""
    dropped = {"queue_disc": 3}
    return {
        "enabled": True,
        "settle_s": 2,
        "entered": 100,
        "copies_made": 0,
        "left": 100 - 3 - len(vanished) - in_flight,
        "left_unentered": 0,
        "dropped": dropped,
        "in_flight": in_flight,
        "held": 0,
        "vanished": len(vanished),
        "vanished_frames": vanished,
    }


def stall(start_s: float, ms: int) -> list[tuple[float, int]]:
    """The probes of a stall of ``ms`` milliseconds: the first fires ``ms`` late, the next one less..."""
    return [(start_s + i / 1000, (ms - i) * 1000) for i in range(ms) if (ms - i) * 1000 >= 1000]


def test_a_stall_inside_a_short_transfer_is_judged_over_the_transfer():
    """A 0.9 s transfer inside a 3 s run: a 31 ms stall in the transfer leaves 27 probes more
    than 4 ms late: 0.9 % of the run (valid before) but 3 % of the transfer (invalid now)."""
    raw = snapshot(stall(1.2, 31))
    assert sum(us > 4000 for _, us in stall(1.2, 31)) == 27
    valid, reasons, figures = validity(raw)  # no window: the whole run, as before
    assert valid and figures["judged_over"] == "run" and figures["behind_share"] == pytest.approx(0.009)
    transfer = (ORIGIN + 1.0, ORIGIN + 1.9)
    valid, reasons, figures = validity(raw, window=transfer)
    assert not valid and figures["judged_over"] == "transfer"
    assert figures["behind_share"] == pytest.approx(27 / 900)
    assert "for 3.0% of the transfer" in reasons[0]
    # the same stall in the idle time after the transfer does not count against it
    assert validity(snapshot(stall(2.5, 31)), window=transfer)[:2] == (True, [])
    # summarize (what the runner records) judges the same window and keeps the per-probe list out
    summary = summarize(raw, window=transfer)
    assert not summary["valid"] and summary["behind_share"] == pytest.approx(0.03)
    assert "late_us" not in summary["lag"] and summary["lag"]["samples"] == 3000


def test_a_window_the_snapshot_cannot_place_falls_back_to_the_run():
    raw = snapshot(stall(1.2, 31))
    assert lag_in_window(raw, ORIGIN + 5.0, ORIGIN + 6.0) is None  # after the snapshot's interval
    older = {**raw, "interval": {"sim_s": 3.0}}  # a channel that did not say where its interval lies
    assert validity(older, window=(ORIGIN + 1.0, ORIGIN + 1.9))[2]["judged_over"] == "run"


def test_sustained_lag_under_4_ms_is_flagged():
    """A channel hovering 3 ms behind through the transfer: never 4 ms late, so the time-behind
    rule passes it; half the probes are more than 1 ms late, which the second rule flags."""
    hovering = [(1.0 + i / 1000, 3000) for i in range(0, 900, 2)]
    valid, reasons, figures = validity(snapshot(hovering), window=(ORIGIN + 1.0, ORIGIN + 1.9))
    assert figures["behind_share"] == 0.0
    assert figures["slow_share"] == pytest.approx(450 / 900)
    assert not valid and len(reasons) == 1 and "more than 1 ms behind" in reasons[0]
    # a fault-free run's handful of probes just over 1 ms stays well under the limit
    calm = [(1.0 + i / 100, 1100) for i in range(5)]
    assert validity(snapshot(calm), window=(ORIGIN + 1.0, ORIGIN + 1.9))[:2] == (True, [])
    assert 5 / 900 < MAX_SLOW_SHARE


def test_the_4_ms_rule_counts_from_4_ms_not_from_the_histograms_4096_us():
    """Probes late by 4.05 ms count as more than 4 ms behind; the power-of-two counter put
    them below its 4.096 ms bucket edge."""
    raw = snapshot([(1.0 + i / 1000, 4050) for i in range(60)])
    assert raw["lag"]["over_4ms"] == 0
    assert time_behind_share(raw["lag"], 3.0) == pytest.approx(60 / 3000)
    old = {key: value for key, value in raw["lag"].items() if not key.startswith("late")}
    assert time_behind_share(old, 3.0) == 0.0  # an older channel: its counters are all there is


def test_frames_the_tap_path_drops_or_holds_make_a_run_invalid():
    quiet = {
        "id": "server:eth0",
        "rx_read": 100,
        "rx_drops": 0,
        "rx_pending_max": 3,
        "rx_pending_limit": 1000,
        "delay_100us": {"0": 95, "1": 5},
        "delay_max_us": 180,
    }
    writer = {"drops": 0, "queue_max": 4, "delay_100us": {"0": 100}, "delay_max_us": 90}
    valid, reasons, figures = validity(snapshot([], taps=[quiet], writer=writer))
    assert valid and figures["tap"]["rx_delay"]["p95_s"] == pytest.approx(50e-6)
    overloaded = {**quiet, "rx_drops": 7, "rx_pending_max": 1000}
    reasons = validity(snapshot([], taps=[quiet, overloaded], writer=writer))[1]
    assert reasons == [
        "7 frames from the namespaces were dropped before the simulator took them up "
        "(its TAP readers' queues were full)"
    ]
    batched = {**quiet, "delay_100us": {"0": 80, "40": 20}}  # a fifth of the frames waited 4 ms
    reasons = validity(snapshot([], taps=[batched], writer={**writer, "drops": 2}))[1]
    assert any("dropped in the TAP writer's full queue" in r for r in reasons)
    assert any("waited to enter the simulator 4.0 ms at the 95th percentile" in r for r in reasons)
    # an older channel measured none of this: nothing to judge, nothing reported as a metric
    assert not tap_summary(snapshot([]))["measured"]


def test_a_frame_that_vanished_inside_the_channel_makes_a_run_invalid():
    """The ledger's frames dropped at a counted place (a queue discipline) or still in flight
    are accounted for; one neither written out nor dropped, 2 s after it entered, is not."""
    assert validity(snapshot([], frames=ledger([], in_flight=5)))[:2] == (True, [])
    lost = {
        "entered_s": 0.41,
        "stage": "acked",
        "protocol": 17,
        "src": "10.0.0.1:5201",
        "dst": "10.0.1.2:40000",
        "ip_bytes": 32,
        "copies": 1,
    }
    valid, reasons, figures = validity(snapshot([], frames=ledger([lost])))
    assert not valid and reasons == [
        "1 frames vanished inside the channel: read from a TAP, neither written to one nor dropped for a "
        "counted reason within 2 s (last stage: acked; mac-stats.json 'frames' lists them)"
    ]
    assert figures["frames"]["vanished_frames"] == [lost] and figures["frames"]["dropped"] == {"queue_disc": 3}
    # a channel without a ledger, or with it switched off (frame_ledger: false), is not judged by it
    assert frames_summary(snapshot([])) is None
    assert frames_summary(snapshot([], frames={**ledger([lost]), "enabled": False})) is None


def test_the_judged_figures_become_run_metrics(tmp_path):
    quiet = {
        "id": "server:eth0",
        "rx_drops": 0,
        "rx_pending_max": 3,
        "delay_100us": {"0": 95, "3": 5},
        "delay_max_us": 310,
    }
    writer = {"drops": 1, "queue_max": 4, "delay_100us": {"0": 100}, "delay_max_us": 90}
    hovering = [(1.0 + i / 1000, 3000) for i in range(0, 900, 2)]
    stats = summarize(
        snapshot(hovering, taps=[quiet], writer=writer, frames=ledger([])), window=(ORIGIN + 1.0, ORIGIN + 1.9)
    )
    (tmp_path / "mac-stats.json").write_text(json.dumps(stats))
    values = mac_metrics(tmp_path, [])
    assert values["lag_slow_share"] == pytest.approx(0.5) and values["lag_behind_share"] == 0.0
    assert values["tap_drops"] == 1 and values["frames_vanished"] == 0
    assert values["tap_rx_delay_p95"] == pytest.approx(50e-6) and values["tap_tx_delay_p95"] == pytest.approx(50e-6)
