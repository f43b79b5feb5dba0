"""ACK acceleration at an ns-3 access point (FastACK-style, docs/ns3-backend.md): with it on a
download over a lossy cell and a lossy cable arrives byte for byte (also when the cable loses
the AP's own ACKs), the station's own ACKs stop at the AP, and the sender hears the AP's; with
it off nothing of that happens."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
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


def _cell(fastack: bool, wired_loss: float, ack_loss: float) -> Topology:
    """server --10 ms-- ap1 ))) sta1, 30 % of the frames lost on the air (the MAC retries);
    wired_loss both ways on the cable, ack_loss only from the AP towards the server."""
    topo = Topology("fastack-cell")
    server, ap = topo.add_host("server"), topo.add_access_point("ap1", fastack=fastack, mcs=7)
    topo.add_link(server, ap, name="wired", delay="10ms", loss=wired_loss,
                  backward={"loss": ack_loss} if ack_loss else None)
    topo.add_wireless_link(topo.add_station("sta1"), ap, loss=30)
    return topo


def _pure_acks(path: Path, source: str) -> int:
    return sum(1 for p in read_pcap(path) if p.proto == "tcp" and p.src == source and p.payload_len == 0
               and p.tcp_flags == ACK)


def _resent_segments(path: Path, source: str) -> int:
    """Data segments from source ending at or before the highest byte it had sent on their
    connection."""
    highest: dict[int, int] = {}  # by the receiver's port
    resent = 0
    for p in read_pcap(path):
        if p.proto != "tcp" or p.src != source or not p.payload_len or p.tcp_seq is None:
            continue
        end = (p.tcp_seq + p.payload_len) % 2**32
        if p.dport in highest and not 0 < (end - highest[p.dport]) % 2**32 < 2**31:
            resent += 1
        else:
            highest[p.dport] = end
    return resent


def _digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


@dataclass
class Download:
    fastack: dict  # the AP's counters (absent with it off)
    ap_queue_drops: int
    station_acks_sent: int  # the station's pure ACKs, at the station
    station_acks_heard: int  # the station's pure ACKs (and the AP's on its behalf), at the server
    server_resent: int  # data segments the server sent again


def _download(tmp_path: Path, fastack: bool, wired_loss: float = 0, ack_loss: float = 0,
              times: int = 1) -> Download:
    """Fetch the object over plain HTTP, times connections one after the other; each copy's
    digest is checked."""
    root = tmp_path / "www"
    objects.generate(root, bulk=[SIZE], seed=3)
    name = f"bulk/{objects.bulk_name(SIZE)}.bin"
    with Ns3Network(_cell(fastack, wired_loss, ack_loss), log_dir=tmp_path / "ns3") as network:
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
            for attempt in range(times):
                fetched = tmp_path / f"fetched-{attempt}.bin"
                result = station.run(["curl", "-s", "--max-time", "90", "-o", str(fetched),
                                      f"http://{server.address}:8000/{name}"], timeout=120, check=False)
                assert result.returncode == 0, f"download {attempt + 1}: curl exit {result.returncode}"
                assert _digest(fetched) == _digest(root / name), f"download {attempt + 1}"
            time.sleep(0.5)  # the last ACKs cross the cable
            captures.stop()
        stats = network.mac_stats()
        return Download(fastack=stats["bridges"]["ap1"].get("fastack", {}),
                        ap_queue_drops=sum(r["queue_drops"] for r in stats["radios"].values() if r["node"] == "ap1"),
                        station_acks_sent=_pure_acks(captures.path("station"), station.address),
                        station_acks_heard=_pure_acks(captures.path("server"), station.address),
                        server_resent=_resent_segments(captures.path("server"), server.address))


def test_with_acceleration_the_station_acks_stop_at_the_ap(tmp_path: Path) -> None:
    run = _download(tmp_path, fastack=True)
    fastack = run.fastack
    assert fastack["accelerated"] >= SIZE // 1448 and fastack["out_of_order"] == 0, fastack
    # the station's MAC confirmed nearly every segment, which frees the AP's window (a few are
    # covered by the station's TCP ACK first, when a block ACK is lost on the air)
    assert fastack["delivered_over_air"] >= 0.98 * fastack["accelerated"], fastack
    # nearly every pure ACK of the station stops at the AP; the server hears the AP's instead
    assert fastack["station_acks_swallowed"] >= 0.9 * run.station_acks_sent, run
    assert fastack["acks_sent"] <= run.station_acks_heard <= fastack["acks_sent"] + fastack["station_acks_passed"], run


def test_every_byte_arrives_when_the_cable_before_the_ap_loses_too(tmp_path: Path) -> None:
    """1 % lost on the cable: the sender repairs its data's losses (the station's ACKs pass
    while a gap is open), the AP what the air loses; the download is byte-identical (checked
    in _download)."""
    fastack = _download(tmp_path, fastack=True, wired_loss=1).fastack
    assert fastack["out_of_order"] > 0 and fastack["station_acks_passed"] > 0, fastack
    assert fastack["accelerated"] >= SIZE // 1448 and fastack["station_acks_swallowed"] > 0, fastack


def test_the_ap_answers_again_when_the_cable_loses_its_acks(tmp_path: Path) -> None:
    """30 % of the AP's ACKs lost on the way to the server: when the sender sends again what
    the AP acknowledged (its tail, a window probe) the AP acknowledges it again, as the station
    would (whose answer the AP swallows). Without that about half the downloads stalled for
    good at their tail; four in a row make that case near certain."""
    run = _download(tmp_path, fastack=True, ack_loss=30, times=4)
    assert run.fastack["out_of_order"] == 0, run  # nothing lost towards the AP
    # every segment the server sent again reached the AP, which had acknowledged it
    if run.ap_queue_drops == 0:
        assert run.fastack["acks_repeated"] >= run.server_resent, run


def test_without_it_the_station_acks_reach_the_sender(tmp_path: Path) -> None:
    run = _download(tmp_path, fastack=False)
    assert run.fastack == {}
    # every pure ACK the station sent and the air did not lose for good (30 % of frames lost,
    # 7 tries), none made up
    assert 0.97 * run.station_acks_sent <= run.station_acks_heard <= run.station_acks_sent, run
    assert run.station_acks_sent > 0, run
