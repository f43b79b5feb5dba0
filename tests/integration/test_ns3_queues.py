"""Queue models of the ns3 backend's radios on the wire (docs/ns3-backend.md, "Queue models"):
CoDel keeps the AP's standing queue near its target under a TCP download, FQ-CoDel keeps a
sparse flow out of a bulk flow's queue, mac80211's per-station queues share the airtime
between a fast and a slow station, and a FIFO is what it was."""

from __future__ import annotations

import statistics
import threading
from pathlib import Path
from typing import Any

import pytest

from quicbed import Topology
from quicbed.apps import iperf
from quicbed.apps.ping import ping
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network
from quicbed.spec.loader import load_topology
from realtime import in_real_time

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]


def _bulk_download(queue: Any, rate: float | None = None, probe: bool = False) -> dict[str, Any]:
    """A 5 s iperf3 download to sta1 (TCP, or UDP at ``rate``) through one AP whose radios have
    ``queue``; with ``probe``, the server pings sta1 every 30 ms from 1.5 s on. The AP radio's
    statistics, the flow and the ping, from a download the channel kept in real time."""

    def attempt(_number: int) -> tuple[dict[str, Any], list[str]]:
        measured = _bulk_download_once(queue, rate, probe)
        return measured, measured["invalid_reasons"]

    return in_real_time(attempt, f"{queue} download")[0]


def _bulk_download_once(queue: Any, rate: float | None, probe: bool) -> dict[str, Any]:
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"queue": queue})
    with Ns3Network(topo) as network:
        network.reset_stats()
        flows: list[iperf.IperfResult] = []
        rate_option = {"rate": rate} if rate else {}
        download = threading.Thread(
            target=lambda: flows.append(iperf.between(network, "sta1", "server", duration=5, **rate_option))
        )
        download.start()
        replies = None
        if probe:
            download.join(1.5)
            replies = ping(network.node("server"), network.node("sta1").address, count=100, interval=0.03)
        download.join()
        stats = network.mac_stats()
    assert flows and flows[0].throughput > 0, "the download did not run"
    return {
        "ap": stats["radios"]["ap1:wifi"],
        "flow": flows[0],
        "ping": replies,
        "invalid_reasons": stats["invalid_reasons"],
    }


def _median_rtt(replies) -> float:
    rtts = [reply.rtt for reply in replies.replies if reply.rtt is not None]
    assert len(rtts) >= 30, replies.output  # (one CoDel queue drops about a third of the flood and of the pings)
    return statistics.median(rtts)


def test_codel_keeps_the_standing_queue_near_its_target():
    """A TCP download through CoDel (target 5 ms): half of the frames wait under 2x the target
    in the discipline, CoDel drops to get there, and the link stays as busy as with a FIFO.
    Measured over 8 runs: sojourn median 3.4-7.2 ms (mean 5.3, sd 1.4: the 10 ms bound is 3.4
    sd away, a false failure about once in 3000 runs if normal), 2-13 drops, 50-52 Mbit/s
    (FIFO 51.6)."""
    fifo = _bulk_download("fifo")
    codel = _bulk_download("codel")
    assert "queue_disc" not in fifo["ap"]
    discipline = codel["ap"]["queue_disc"]
    assert discipline["kind"] == "codel" and discipline["limit_packets"] == 1000
    assert discipline["sojourn"]["median_s"] < 0.010, discipline
    assert discipline["drops"] > 0 and discipline["drop_reasons"], discipline
    assert codel["flow"].throughput > 0.9 * fifo["flow"].throughput, (codel["flow"], fifo["flow"])
    # the MAC delay counts the discipline's time too: from the AP's queue to the station's ACK
    assert codel["ap"]["mac_delay"]["median_s"] > discipline["sojourn"]["median_s"]


def test_fq_codel_keeps_a_sparse_flow_out_of_a_bulk_flow_queue():
    """A UDP flood at 80 Mbit/s (the link carries ~59) and a ping every 30 ms: one CoDel queue
    makes the ping wait behind the flood (CoDel's drops do not catch up with an unresponsive
    flow: 211-216 ms over 5 runs), FQ-CoDel serves the ping's flow first, leaving it only the
    MAC queue's wait (23-24 ms), while the flood's own frames wait long in their flow queue
    (614-650 ms)."""
    codel = _bulk_download("codel", rate=80e6, probe=True)
    fq = _bulk_download("fq_codel", rate=80e6, probe=True)
    shared, isolated = _median_rtt(codel["ping"]), _median_rtt(fq["ping"])
    assert isolated < 0.25 * shared, (isolated, shared)
    assert isolated < 0.06
    # the flood itself is not isolated from itself: its frames wait in FQ-CoDel as in CoDel
    assert fq["ap"]["queue_disc"]["sojourn"]["median_s"] > 5 * isolated, fq["ap"]["queue_disc"]


#: the slow station's distance: Minstrel settles on a lower rate there (the fast one is at 5 m)
SLOW_DISTANCE = 37.0
#: each station's UDP download (bit/s): more than the AP can send either, so both queues stay full
FLOOD = 40e6


def _fast_and_slow(queue: Any, rate: float | None = FLOOD) -> dict[str, Any]:
    """5 s downloads to a station 5 m from the AP and one 37 m away, at once (Minstrel picks
    each station's rate), UDP at ``rate`` each (TCP with None): per station its goodput and
    its share of the AP's data airtime, from a run the channel kept in real time and whose
    UDP senders sent what they were asked (a starved sender would leave its station's short
    CoDel queue empty, and the other station would take the airtime) and started together."""

    def attempt(_number: int) -> tuple[dict[str, Any], list[str]]:
        topo = Topology("fast-and-slow")
        ap = topo.add_access_point(
            "ap1", position=(0, 0, 0), rate_control="minstrel", mcs=None, queue=None if queue == "fifo" else queue
        )
        topo.add_link(ap, topo.add_host("server"), name="wired", rate="1gbit", delay="2ms")
        for name, distance in (("fast", 5.0), ("slow", SLOW_DISTANCE)):
            topo.add_wireless_link(topo.add_station(name, position=(distance, 0, 0)), ap, distance=distance)
        flows: dict[str, iperf.IperfResult] = {}
        errors: dict[str, BaseException] = {}

        def download(name: str, port: int) -> None:
            try:
                flows[name] = iperf.between(network, name, "server", duration=5, port=port, rate=rate)
            except BaseException as error:  # (the thread would only print it)
                errors[name] = error

        with Ns3Network(topo) as network:
            network.reset_stats()
            downloads = [
                threading.Thread(target=download, args=(name, port)) for name, port in (("fast", 5201), ("slow", 5202))
            ]
            for thread in downloads:
                thread.start()
            for thread in downloads:
                thread.join()
            stats = network.mac_stats()
        if errors and stats["invalid_reasons"]:
            return {}, stats["invalid_reasons"]  # (a late channel: made again, whatever failed in it)
        assert not errors, (errors, {"drops": stats["radios"]["ap1:wifi"]["drops"], "tap": stats["tap"]})
        receivers = stats["radios"]["ap1:wifi"]["per_receiver"]
        airtime = {name: receivers[name]["airtime_s"] for name in flows}
        measured = {
            name: {
                "goodput": flows[name].throughput,
                "airtime_share": airtime[name] / sum(airtime.values()),
                "queue": receivers[name].get("queue"),
                # the station's own radio: one queue, for everything it sends to its AP
                "uplink_queue": stats["radios"][f"{name}:wlan0"]["per_receiver"]["ap1"].get("queue"),
            }
            for name in flows
        }
        short = [
            f"the {name} flow's sender sent {flows[name].sent_bps / 1e6:.1f} of {rate / 1e6:.0f} Mbit/s"
            for name in flows
            if rate and (flows[name].sent_bps or 0) < 0.95 * rate
        ]
        # (iperf3 made a lost UDP set-up again: that flood started late, the other had the AP alone)
        late = [f"the {name} flow's UDP set-up was lost and made again" for name in flows if flows[name].attempts > 1]
        return measured, stats["invalid_reasons"] + short + late

    return in_real_time(attempt, f"pair of {queue} downloads")[0]


def test_airtime_fairness_gives_a_slow_station_its_share_of_airtime_not_of_bytes():
    """mac80211's queues (per-station FQ-CoDel, airtime deficit round robin) with both
    stations' queues full: the slow station gets half of the AP's data airtime, where a FIFO
    gives both stations about the same frames and so the slow one most of the airtime; the
    fast station's goodput rises with what the slow one no longer takes.

    Measured behind the FIFO: the slow station's share 0.613-0.641 over 8 runs (sd 0.010);
    the fast station's goodput 18.6-23.0 Mbit/s in 32 of 37 runs and 25.5-26.0 in 5, the
    rate Minstrel settled on for the slow station deciding (it got 24.0-24.3 Mbit/s in those
    of them that kept its figure, 19.8-22.5 in the others). With mac80211 queues the fast
    station got 27.6-31.8 Mbit/s (34 runs, mean 29.5, sd 0.8): its gain is 1.06x or more, not
    a fixed factor, so the bound is the FIFO run's goodput itself, which the mean exceeds by
    4.4 sd even in the FIFO's upper mode (a false failure under 1 in 10^5 if normal). The slow
    station's share has two modes: 0.485-0.503 in 37 of 41 runs, and 0.437 in 4 (with either
    real-time simulator, valid runs, the slow station's goodput unchanged and the fast one's
    31.6 Mbit/s): a state of the simulated cell that recurs to the third digit, not noise of
    the machine, and not yet explained. The bounds hold both modes with 0.015 to spare and
    stay 4-5 sd from the FIFO's mean."""
    fifo = _fast_and_slow("fifo")
    fair = _fast_and_slow("mac80211")
    assert fifo["slow"]["airtime_share"] > 0.58, fifo
    assert 0.42 < fair["slow"]["airtime_share"] < 0.53, fair
    assert fair["fast"]["goodput"] > fifo["fast"]["goodput"], (fifo, fair)
    # each station's own queue: its frames, their time in it, the airtime it was charged, and
    # CoDel's drops (a flood does not slow down: its queue stays full)
    for name in ("fast", "slow"):
        queue = fair[name]["queue"]
        assert queue["enqueued"] > 1000 and queue["drops"] > 0 and queue["turns"] > 0, queue
        assert queue["airtime_s"] > 1.0 and queue["sojourn"]["median_s"] > 0, queue
        assert fair[name]["uplink_queue"]["enqueued"] > 0, fair[name]["uplink_queue"]
    assert fifo["fast"]["queue"] is None
