"""A station walking between two access points of one SSID through the real-time ns-3 channel:
it moves along its waypoints from the run's start, Minstrel lowers its rate as the signal
fades, it changes AP when ns-3's station has missed its AP's beacons, and a TCP download
carries on through the new AP (topologies/roaming.py; docs/ns3-backend.md, "Mobility and
roaming")."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

import pytest

from quicbed.analysis.mobility import handovers
from quicbed.apps import iperf
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network
from quicbed.runner.transfer import isolated_channel
from quicbed.spec.loader import load_topology
from quicbed.spec.topology import Topology
from realtime import in_real_time

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")]


def test_a_walking_station_hands_over_and_its_download_goes_on_through_the_next_ap():
    """10 m/s from 10 m to 70 m (ap2 at 80 m) after 1 s: the station leaves ap1 about 55 m out
    (ns-3's preamble detection needs -82 dBm: ap1's beacons stop there), 5-6 s into the run,
    after ten missed beacons (1.02 s) and a 120 ms passive scan. The outage then ends with TCP's
    next packet: 1.12-1.18 s when the server sent it right after the association, 1.89-2.15 s
    when it came one backed-off retransmission timeout later (14 runs here; the association
    comes 1.1 s after the last delivery in each, so the timeout after that one is later still)."""
    topo = load_topology(str(ROOT / "topologies" / "roaming.py"), {"speed": 10.0, "pause": 1.0})
    trajectory = topo.nodes["sta1"].trajectory

    def walk(attempt: int) -> tuple[tuple[iperf.IperfResult, dict], list[str]]:
        with Ns3Network(topo) as network:
            with isolated_channel(network):
                network.reset_stats()  # (the walk starts now)
                flow = iperf.between(network, "sta1", "server", duration=11)
                stats = network.mac_stats()
        return (flow, stats), stats["invalid_reasons"]

    (flow, stats), _ = in_real_time(walk, "walk from ap1 to ap2")
    timeline = stats["motion"]["stations"]["sta1"]
    interval = stats["motion"]["interval_s"]
    samples, events = timeline["samples"], timeline["events"]
    # it moved along its waypoints, sampled every 250 ms from the start of the run
    assert interval == 0.25 and len(samples) >= 44
    for sample in samples:
        assert (sample["x"], sample["y"]) == pytest.approx(trajectory.position_at(sample["t"])[:2], abs=0.01)
    # one handover, ap1 -> ap2, where ap1 fades out
    assert [(e["event"], e["ap"]) for e in events] == [
        ("lost", "ap1"),
        ("associated", "ap2"),
        ("first_delivery", "ap2"),
    ], events
    lost, associated, delivered = (e["t"] for e in events)
    where = trajectory.position_at(lost)[0]
    assert 45 < where < 65, (where, events)
    assert associated - lost < 0.5  # (a passive scan of 120 ms, then association)
    figures = handovers(timeline, interval)
    assert figures["handovers"] == 1 and 1.0 < figures["handover_outage"] < 2.5, figures
    # before the station left, it heard ap1 fade and ap2 come up, and Minstrel slowed down
    near = [s for s in samples if s["x"] < 20 and s["mcs"] is not None]
    edge = [s for s in samples if 45 < s["x"] < where and s["ap"] == "ap1" and s["mcs"] is not None]
    assert near and edge
    assert mean(s["signal_dbm"]["ap1"] for s in near) > mean(s["signal_dbm"]["ap1"] for s in edge) + 15
    assert mean(s["mcs"] for s in near) > mean(s["mcs"] for s in edge) + 1.5
    assert any("ap2" in s["signal_dbm"] for s in samples if s["ap"] == "ap1")
    # the download went on through ap2: its bytes after the handover (4.5-5 s of it, 15-20 MB
    # once it recovered), and in the iperf total
    after = sum(s["rx_bytes"] for s in samples if s["t"] - interval >= delivered)
    assert after > 5e6, samples
    assert flow.throughput > 10e6, flow


def test_a_random_walk_moves_the_station_along_its_drawn_path():
    """A station on a random walk round its AP (one AP: nothing to roam to) is where its drawn
    path says at every sample, and stays associated."""
    topo = Topology("walk")
    ap = topo.add_access_point("ap1", position=(0, 0), rate_control="minstrel")
    topo.add_link(ap, topo.add_host("server"))
    station = topo.add_station(
        "sta1",
        position=(10, 0),
        mobility={"model": "random_walk", "speed": 3.0, "bounds": (-15, -15, 15, 15), "seed": 4},
    )
    topo.add_wireless_link(station, ap)

    def walk(attempt: int) -> tuple[dict, list[str]]:
        with Ns3Network(topo) as network:
            with isolated_channel(network):
                network.reset_stats()
                iperf.between(network, "sta1", "server", duration=4, rate=5e6)
                stats = network.mac_stats()
        return stats, stats["invalid_reasons"]

    stats, _ = in_real_time(walk, "random walk")
    timeline = stats["motion"]["stations"]["sta1"]
    assert len(timeline["samples"]) >= 16 and timeline["events"] == []
    for sample in timeline["samples"]:
        assert (sample["x"], sample["y"]) == pytest.approx(station.trajectory.position_at(sample["t"])[:2], abs=0.01)
        assert sample["ap"] == "ap1"
    moved = {(round(s["x"]), round(s["y"])) for s in timeline["samples"]}
    assert len(moved) > 8  # 3 m/s for more than 4 s
