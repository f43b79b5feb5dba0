"""The Mininet-WiFi backend fails loudly when a device keeps an offload that merges or splits
packets: its captures would hold super-packets larger than the MTU."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from quicbed.backends.mininet_wifi.network import MininetWifiNetwork, offloads_left_on
from quicbed.errors import BackendError
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]

# ``ethtool -k`` of a mac80211_hwsim radio after ``ethtool -K wlan0 tso off gso off gro off
# lro off tx-checksumming off`` when the driver refused GRO (abridged; the layout is ethtool's)
REFUSED = """Features for sta1-wlan0:
rx-checksumming: off [fixed]
tx-checksumming: off
\ttx-checksum-ipv4: off [fixed]
scatter-gather: off
tcp-segmentation-offload: off
\ttx-tcp-segmentation: off [fixed]
generic-segmentation-offload: off
generic-receive-offload: on [fixed]
large-receive-offload: off [fixed]
"""


def test_an_offload_left_on_is_named() -> None:
    assert offloads_left_on(REFUSED) == ["generic-receive-offload"]
    assert offloads_left_on(REFUSED.replace("generic-receive-offload: on", "generic-receive-offload: off")) == []
    # a checksum offload changes no packet size: not a reason to stop
    assert offloads_left_on("tx-checksumming: on [fixed]\n") == []


class _Node:
    """A node handle that answers ``ethtool -k`` with ``features`` and runs nothing else."""

    def __init__(self, features: str) -> None:
        self.features = features
        self.commands: list[list[str]] = []

    def run(
        self, argv: list[str], timeout: float = 60.0, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(argv))
        stdout = self.features if argv[:2] == ["ethtool", "-k"] else ""
        return subprocess.CompletedProcess(argv, 0, stdout, "")


def test_the_network_stops_when_a_device_keeps_an_offload_on() -> None:
    network = MininetWifiNetwork(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {}))
    network._nodes = {name: _Node(REFUSED) for name in network._nodes}  # type: ignore[misc]
    with pytest.raises(BackendError, match="keeps generic-receive-offload on"):
        network._configure_addresses()
    network._nodes = {name: _Node(REFUSED.replace(": on", ": off")) for name in network._nodes}  # type: ignore[misc]
    network._configure_addresses()  # every offload off: the network goes on
    checked = [
        node for node in network._nodes.values() if any(command[:2] == ["ethtool", "-k"] for command in node.commands)
    ]  # type: ignore[attr-defined]
    assert len(checked) == len(network._nodes)  # every node's devices were checked
