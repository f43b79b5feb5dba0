"""One server port gets its own TCP congestion control while the namespace default stays (real kernel)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quicbed.apps.tcp import port_cc
from quicbed.apps.tcp.port_cc import PortCongestionControl
from quicbed.backends.netns import NamespaceNetwork
from quicbed.spec.loader import load_topology

pytestmark = [pytest.mark.needs_root]

ROOT = Path(__file__).resolve().parents[2]
PORTS = (8443, 8444)
LISTEN = """
import socket, sys, time
listeners = []
for port in map(int, sys.argv[2:]):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], port)); s.listen(); listeners.append(s)
print("ready", flush=True)
accepted = [s.accept() for s in listeners]
time.sleep(30)
"""
CONNECT = """
import socket, sys, time
held = [socket.create_connection((sys.argv[1], int(port)), timeout=10) for port in sys.argv[2:]]
time.sleep(30)
"""


@pytest.fixture(scope="module")
def net() -> Iterator[NamespaceNetwork]:
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"delay": "0ms"})
    with NamespaceNetwork(topo) as network:
        network.node("server").sysctl("net.ipv4.tcp_congestion_control", "cubic")
        yield network


def _server_congestion_controls(net: NamespaceNetwork) -> dict[int, str]:
    """Local port -> congestion control of the server's established connections (ss -ti)."""
    lines = net.node("server").run(["ss", "-Htin", "state", "established"]).stdout.splitlines()
    found = {}
    for socket_line, info in zip(lines[::2], lines[1::2]):
        local = socket_line.split()[2]
        found[int(local.rsplit(":", 1)[1])] = info.split()[0]
    return found


def _rules(net: NamespaceNetwork) -> str:
    return net.node("server").run(["ip", "rule", "show"]).stdout


def test_a_port_runs_its_own_congestion_control_next_to_the_default(net: NamespaceNetwork, tmp_path: Path) -> None:
    server, client = net.node("server"), net.node("client")
    setting = PortCongestionControl(port=PORTS[1], client=client.address, algorithm="reno")
    undo = port_cc.apply(server, setting)
    listener = server.start(
        [sys.executable, "-c", LISTEN, server.address, *map(str, PORTS)], name="listen", log_dir=tmp_path
    )
    connector = None
    try:
        assert f"sport {PORTS[1]} lookup {port_cc.TABLE_BASE + PORTS[1]}" in _rules(net)
        deadline = time.monotonic() + 20
        while "ready" not in (tmp_path / "listen.out").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        connector = client.start(
            [sys.executable, "-c", CONNECT, server.address, *map(str, PORTS)], name="connect", log_dir=tmp_path
        )
        found: dict[int, str] = {}
        while len(found) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            found = _server_congestion_controls(net)
        assert found == {PORTS[0]: "cubic", PORTS[1]: "reno"}
    finally:
        for process in (connector, listener):
            if process is not None:
                process.stop()
        undo()
    assert "sport" not in _rules(net)
    table = server.run(["ip", "route", "show", "table", str(port_cc.TABLE_BASE + PORTS[1])], check=False)
    assert table.stdout.strip() == ""
