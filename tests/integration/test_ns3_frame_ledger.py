"""The ns-3 channel's frame ledger on real traffic (docs/ns3-backend.md, "The frame ledger"):
every unicast IPv4 frame read from a TAP is written to a TAP or dropped at a counted place,
the ledger's drops agree with the counters of the places that dropped them, and nothing
vanishes. A frame lost inside the channel without a counted reason would make the run invalid
(tests/unit/test_frame_ledger.py shows the ledger reporting one).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps import iperf
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]


def _download(topology: str, params: dict[str, Any], **flow: Any) -> dict[str, Any]:
    """The channel's statistics after a 4 s iperf3 download to the topology's client (and 1 s
    for the frames still in flight to settle)."""
    topo = load_topology(str(ROOT / "topologies" / topology), params)
    client = "sta1" if topology == "wifi_ap.py" else "client"
    with Ns3Network(topo, frame_ledger_settle_s=1.0) as network:
        network.reset_stats()
        flows: list[iperf.IperfResult] = []
        download = threading.Thread(
            target=lambda: flows.append(iperf.between(network, client, "server", duration=4, **flow))
        )
        download.start()
        download.join()
        threading.Event().wait(1.2)
        stats = network.mac_stats()
    assert flows and flows[0].throughput > 0, "the download did not run"
    return stats


def _balanced(frames: dict[str, Any]) -> bool:
    return (
        frames["entered"] + frames["copies_made"]
        == frames["left"] + sum(frames["dropped"].values()) + frames["in_flight"] + frames["vanished"]
    )


def test_a_lossy_cable_drops_every_frame_it_loses_in_the_ledger():
    """5 % lost each way on the bottleneck: the ledger's `wire_loss` drops are the cables' own
    loss counts (no ARP crosses: quicbed gives the namespaces static neighbour entries)."""
    stats = _download("dumbbell.py", {"rate": "20mbit", "delay": "5ms", "loss": 5.0})
    frames = stats["frames"]
    lost = sum(
        wire[direction]["loss_drops"] for wire in stats["wires"].values() for direction in ("forward", "backward")
    )
    assert lost > 50 and frames["dropped"].get("wire_loss") == lost, (lost, frames)
    assert frames["vanished"] == 0 and frames["entered"] > 1000 and _balanced(frames), frames
    assert stats["valid"] or not any("vanished" in reason for reason in stats["invalid_reasons"])


def test_a_codel_queue_and_the_mac_drop_every_frame_they_discard_in_the_ledger():
    """A UDP flood at 80 Mbit/s into an 802.11n MCS 7 cell (about 55 Mbit/s) behind CoDel: the
    discipline drops a third of it, and the ledger has every one of those drops."""
    stats = _download("wifi_ap.py", {"queue": "codel"}, rate=80e6)
    frames = stats["frames"]
    discipline = stats["radios"]["ap1:wifi"]["queue_disc"]["drops"]
    assert discipline > 1000 and frames["dropped"].get("queue_disc") == discipline, (discipline, frames)
    mac = sum(radio["mac_drops"] + radio["queue_drops"] for radio in stats["radios"].values())
    assert sum(n for reason, n in frames["dropped"].items() if reason.startswith("mac_")) == mac, frames
    assert frames["vanished"] == 0 and _balanced(frames), frames
