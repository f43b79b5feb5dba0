"""The ns-3 channel's real-time validity on this host, with faults injected into the real channel
process: a stall inside a short transfer surrounded by idle time, a channel hovering a few ms
behind, and a TAP path that drops frames.

Needs root (namespaces, TAP devices) and libns3-dev. Each test keeps its traffic to a few
seconds. The stalls are SIGSTOP/SIGCONT of the channel process, so the simulator really falls
behind the wall clock and catches up, as it does when it is short of CPU.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from quicbed.apps import iperf, ping
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network
from quicbed.backends.ns3.stats import BEHIND_MS
from quicbed.host.stalls import Stalls, stop_once
from quicbed.spec.loader import load_topology
from realtime import Steal, in_real_time

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]


#: the steal an idle VM here shows (0-0.3 %, /proc/stat)
STEAL_FLOOR = 0.003


def dumbbell(**options) -> Ns3Network:
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"rate": "20mbit", "delay": "5ms"})
    return Ns3Network(topo, **options)


def test_a_stall_inside_a_short_transfer_invalidates_it_though_the_run_would_pass():
    """2.5 s of idle, a 1 s ping burst with a 30 ms stall in it, 2.5 s of idle: the stall is
    about 0.4 % of the 6 s run (the old judgement: valid, even if the stall overran to 60 ms)
    but about 2.5 % of the transfer. Made again when the machine stalled the channel too (the
    idle spells invalid, or steal), or the helper making the stop overran it past 60 ms."""

    def attempt(_number: int) -> tuple[tuple, list[str]]:
        with dumbbell() as network, Steal() as steal:
            assert network.channel is not None
            network.reset_stats()
            began = time.monotonic()
            time.sleep(2.5)
            client, server = network.node("client"), network.node("server")
            probe = ping.start(client, server.address, count=100, interval=0.01)
            start = time.monotonic()
            time.sleep(0.4)
            stopped = stop_once(network.channel.pid, 0.030)
            result = probe.result()
            end = time.monotonic()
            time.sleep(2.5)
            whole = network.mac_stats()
            transfer = network.mac_stats(window=(start, end))
            idle = [network.mac_stats(window=window) for window in ((began, start), (end, time.monotonic()))]
        overran = [f"the stop lasted {stopped * 1e3:.0f} ms (meant 30 ms)"] if stopped > 0.060 else []
        return (result, whole, transfer, end - start), [
            r for stats in idle for r in stats["invalid_reasons"]
        ] + steal.reasons() + overran

    (result, whole, transfer, seconds), _ = in_real_time(attempt, "stalled ping burst")
    assert result.received >= 95  # the stall delayed replies, it lost none
    assert whole["judged_over"] == "run" and transfer["judged_over"] == "transfer"
    assert transfer["judged_sim_s"] == pytest.approx(seconds, abs=0.05)
    # ~26 probes more than 4 ms late: under 1 % of ~6 s, over 1 % of ~1.1 s
    assert whole["behind_share"] < 0.01 <= transfer["behind_share"]
    assert whole["valid"] and not transfer["valid"]
    assert "of the transfer" in transfer["invalid_reasons"][0]
    print(f"behind: {whole['behind_share']:.2%} of the run, {transfer['behind_share']:.2%} of the transfer")


def test_a_channel_hovering_a_few_ms_behind_is_flagged():
    """Stopped for 3 ms every 6 ms for a second: the simulator never falls 4 ms behind, yet
    every packet waits for it; the second rule (time more than 1 ms behind) flags the run,
    and the idle RTT shows what it cost. Made again when the machine took CPU meanwhile
    (steal), which would add stalls of its own, or when the stops that lasted 4 ms or more (the
    helper making them was late to continue the channel) alone put it over the rule's limit.
    The stops come from a helper process (quicbed.host.stalls): in a thread of pytest, one
    lasted as long as a garbage collection of pytest's heap held the interpreter lock."""

    def attempt(_number: int) -> tuple[tuple, list[str]]:
        with dumbbell() as network, Steal() as steal:
            assert network.channel is not None
            client, server = network.node("client"), network.node("server")
            network.reset_stats()
            began = time.monotonic()
            calm = ping.ping(client, server.address, count=50, interval=0.01)
            start = time.monotonic()
            with Stalls(network.channel.pid, stop_s=0.003, period_s=0.006) as stalls:
                slowed = ping.ping(client, server.address, count=100, interval=0.01)
            stats = network.mac_stats(window=(start, time.monotonic()))
            before = network.mac_stats(window=(began, start))
        # the stops keep the channel under 4 ms behind: 0-0.5 % of the window in 80 quiet runs,
        # their longest stops 3.5-7.1 ms (a false failure: rarer than 1 in 27 at 95 % confidence,
        # and it needs twice the worst seen). The hypervisor pushes it over: 0.37 % with 0.9 %
        # steal here, 1.13 % with 1.0 % in a fresh-root run. So a window over 1 % with steal
        # above the idle floor is made again, and so is one that the helper's late continues
        # alone (stops of 4 ms or more) put over 1 %; on a quiet machine it fails the test.
        stolen = steal.reasons(limit=STEAL_FLOOR) if stats["behind_share"] > 0.01 else []
        overran = stalls.record.beyond(BEHIND_MS / 1000) / stats["judged_sim_s"]
        late = (
            [
                f"stops of up to {stalls.record.longest_s * 1e3:.1f} ms (meant 3 ms) held the channel more than "
                f"{BEHIND_MS:g} ms behind for {overran:.2%} of the window"
            ]
            if stats["behind_share"] > 0.01 >= stats["behind_share"] - overran
            else []
        )
        return (calm, slowed, stats), before["invalid_reasons"] + steal.reasons() + stolen + late

    (calm, slowed, stats), _ = in_real_time(attempt, "hovering ping")
    assert stats["behind_share"] <= 0.01  # the time-behind rule alone would pass it
    assert stats["slow_share"] > 0.1
    assert not stats["valid"]
    assert any("more than 1 ms behind" in reason for reason in stats["invalid_reasons"])
    assert slowed.avg > calm.avg + 0.001  # it was no false alarm: the RTT grew by more than 1 ms
    print(
        f"hovering: {stats['slow_share']:.1%} of the transfer > 1 ms behind, RTT {calm.avg * 1e3:.2f} -> "
        f"{slowed.avg * 1e3:.2f} ms"
    )


def test_frames_the_tap_readers_cannot_queue_are_dropped_counted_and_invalidate_the_run():
    """A reader that may keep only one frame waiting for the simulator drops frames of a TCP
    download's bursts (counted, the run invalid); the default limit drops none of the same flow,
    in a download the channel kept in real time (made again otherwise: a stalled channel makes
    frames wait at its readers)."""

    def download(limit: int) -> dict:
        with dumbbell(tap_pending_limit=limit) as network:
            network.reset_stats()
            iperf.between(network, "client", "server", duration=1.5)
            return network.mac_stats()

    def in_time(_number: int) -> tuple[dict, list[str]]:
        stats = download(1000)
        # every reason but the one under test is the machine's: a channel that fell behind, or
        # frames that waited more than 2 ms at a reader or the writer (a late simulator thread)
        return stats, [r for r in stats["invalid_reasons"] if "were dropped" not in r]

    for limit, stats in ((1, download(1)), (1000, in_real_time(in_time, "download with the default limit")[0])):
        tap = stats["tap"]
        assert tap["measured"] and tap["rx_delay"]["frames"] > 100  # TCP slows down when frames are dropped
        if limit == 1:
            assert tap["rx_drops"] > 0 and tap["rx_pending_max"] <= limit
            assert not stats["valid"]
            assert any("dropped before the simulator took them up" in r for r in stats["invalid_reasons"])
        else:
            assert tap["rx_drops"] == 0 and tap["tx_drops"] == 0 and stats["valid"], stats["invalid_reasons"]
            assert tap["rx_delay"]["p95_s"] < 0.002 and tap["tx_delay"]["p95_s"] < 0.002
        print(f"pending limit {limit}: {tap['rx_drops']} drops, rx p95 {tap['rx_delay']['p95_s'] * 1e3:.2f} ms")
