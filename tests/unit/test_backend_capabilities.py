"""What each backend offers beyond a Network, as the runner asks it (quicbed.backends.base)."""

from __future__ import annotations

from pathlib import Path

from quicbed.backends.base import MacStatistics, ReshapableLinks, WalkedStations
from quicbed.backends.mininet_wifi.network import MininetWifiNetwork
from quicbed.backends.netns import NamespaceNetwork
from quicbed.backends.ns3.network import Ns3Network
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = (MacStatistics, WalkedStations, ReshapableLinks)


def _offers(network: object) -> list[str]:
    return [capability.__name__ for capability in CAPABILITIES if isinstance(network, capability)]


def test_each_backend_offers_what_the_runner_asks_of_it() -> None:
    # built, not started: nothing is created on the host
    wired = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"rate": "20mbit", "delay": "0ms"})
    cell = load_topology(str(ROOT / "topologies" / "roaming.py"), {})
    assert _offers(Ns3Network(cell)) == ["MacStatistics"]
    assert _offers(NamespaceNetwork(wired)) == ["ReshapableLinks"]
    assert _offers(MininetWifiNetwork(cell, wmediumd=True)) == ["WalkedStations"]
