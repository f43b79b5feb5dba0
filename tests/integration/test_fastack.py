"""ACK acceleration at an ns-3 access point (FastACK-style, docs/ns3-backend.md): with it on a
download over a lossy cell and a lossy cable arrives byte for byte, the station's own ACKs
stop at the AP, and the sender hears the AP's; with it off nothing of that happens."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

from quicbed import Topology
from quicbed.analysis.packets import read_pcap
from quicbed.apps import objects
from quicbed.apps.capture import CaptureSet
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network

NS3_MISSING = build.missing()
pytestmark = [pytest.mark.needs_root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and TAP devices"),
              pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")]

SIZE = 3_000_000
ACK = 0x10


def _cell(fastack: bool, wired_loss: float) -> Topology:
    """server --10 ms-- ap1 ))) sta1, 30 % of the frames lost on the air (the MAC retries)."""
    topo = Topology("fastack-cell")
    server, ap = topo.add_host("server"), topo.add_access_point("ap1", fastack=fastack, mcs=7)
    topo.add_link(server, ap, name="wired", delay="10ms", loss=wired_loss)
    topo.add_wireless_link(topo.add_station("sta1"), ap, loss=30)
    return topo


def _pure_acks(path: Path, source: str) -> int:
    return sum(1 for p in read_pcap(path) if p.proto == "tcp" and p.src == source and p.payload_len == 0
               and p.tcp_flags == ACK)


def _download(tmp_path: Path, fastack: bool, wired_loss: float = 0) -> tuple[dict, int, int]:
    """Fetch the object over plain HTTP; its digest is checked. Returns the AP's bridge
    statistics and the pure ACKs from the station sent at the station and seen at the server."""
    root = tmp_path / "www"
    objects.generate(root, bulk=[SIZE], seed=3)
    name = f"bulk/{objects.bulk_name(SIZE)}.bin"
    with Ns3Network(_cell(fastack, wired_loss), log_dir=tmp_path / "ns3") as network:
        station, server = network.node("sta1"), network.node("server")
        http = server.start([sys.executable, "-m", "http.server", "8000", "--directory", str(root)], name="http",
                            log_dir=tmp_path)
        deadline = time.monotonic() + 20
        while station.run(["curl", "-s", "-o", "/dev/null", f"http://{server.address}:8000/"], check=False).returncode:
            assert http.running and time.monotonic() < deadline, http.errors()
            time.sleep(0.2)
        network.reset_stats()
        with CaptureSet(tmp_path / "pcap") as captures:
            captures.add(station, "wlan0", "station")
            captures.add(server, "eth0", "server")
            captures.start()
            fetched = tmp_path / "fetched.bin"
            result = station.run(["curl", "-s", "--max-time", "90", "-o", str(fetched),
                                  f"http://{server.address}:8000/{name}"], timeout=120, check=False)
            time.sleep(0.5)  # the last ACKs cross the cable
            captures.stop()
        assert result.returncode == 0, result.stderr
        assert hashlib.sha256(fetched.read_bytes()).digest() == hashlib.sha256((root / name).read_bytes()).digest()
        bridge = network.mac_stats()["bridges"]["ap1"]
        sent = _pure_acks(captures.path("station"), station.address)
        heard = _pure_acks(captures.path("server"), station.address)
    return bridge, sent, heard


def test_with_acceleration_the_station_acks_stop_at_the_ap(tmp_path: Path) -> None:
    bridge, sent, heard = _download(tmp_path, fastack=True)
    fastack = bridge["fastack"]
    assert fastack["accelerated"] >= SIZE // 1448 and fastack["out_of_order"] == 0, fastack
    # nearly every pure ACK of the station stops at the AP; the server hears the AP's instead
    assert fastack["station_acks_swallowed"] >= 0.9 * sent, (sent, fastack)
    assert fastack["acks_sent"] <= heard <= fastack["acks_sent"] + fastack["station_acks_passed"], (heard, fastack)


def test_every_byte_arrives_when_the_cable_before_the_ap_loses_too(tmp_path: Path) -> None:
    """1 % lost on the cable: the sender repairs those (the station's ACKs pass while a gap is
    open), the AP what the air loses; the download is byte-identical (checked in _download)."""
    bridge, _, _ = _download(tmp_path, fastack=True, wired_loss=1)
    fastack = bridge["fastack"]
    assert fastack["out_of_order"] > 0 and fastack["station_acks_passed"] > 0, fastack
    assert fastack["accelerated"] >= SIZE // 1448 and fastack["station_acks_swallowed"] > 0, fastack


def test_without_it_the_station_acks_reach_the_sender(tmp_path: Path) -> None:
    bridge, sent, heard = _download(tmp_path, fastack=False)
    assert "fastack" not in bridge
    # every pure ACK the station sent and the air did not lose for good (30 % of frames lost,
    # 7 tries), none made up
    assert 0.97 * sent <= heard <= sent and sent > 0, (heard, sent)
