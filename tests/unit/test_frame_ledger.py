"""The ns-3 channel's frame ledger (quicbed/backends/ns3/channel/ledger.cc) on ns-3's clock:
channel_models/ledger_driver.cc feeds it frames the way the channel's hooks do (read from a
TAP, copied, dropped behind an Ethernet or LLC header, written out) and prints its
statistics. A frame keeps its identity through what the channel changes in it (TTL and
checksums, the headers around it), and one that neither leaves nor is dropped within the
settle time is reported as vanished, with the last stage it reached.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from channel_driver import DriverProcess, compile_driver
from quicbed.backends.ns3 import build

NS3_MISSING = build.missing()
pytestmark = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")
STATION = "00:00:00:00:00:02"
MESH_PROTO = 0x88B5


def ipv4(payload: bytes, proto: int, ident: int, ttl: int = 64, src: str = "10.0.0.1", dst: str = "10.0.1.2") -> bytes:
    addresses = bytes(int(x) for x in src.split(".")) + bytes(int(x) for x in dst.split("."))
    header = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(payload), ident, 0x4000, ttl, proto, 0) + addresses
    return header + payload


def tcp(seq: int, ident: int, checksum: int = 0, ttl: int = 64, data: bytes = b"x" * 100) -> bytes:
    segment = struct.pack("!HHIIBBHHH", 443, 40000, seq, 1, 0x50, 0x10, 512, checksum, 0) + data
    return ipv4(segment, 6, ident, ttl, src="10.0.0.1", dst="10.0.1.2")


def udp(seq: int, ident: int = 0) -> bytes:
    payload = struct.pack("!III", 1, 2, seq) + b"\0" * 20
    return ipv4(struct.pack("!HHHH", 5201, 40000, 8 + len(payload), 0) + payload, 17, ident)


def ethernet(ip: bytes) -> bytes:
    return bytes(6) + bytes(6) + struct.pack("!H", 0x0800) + ip


def llc_mesh(ip: bytes) -> bytes:
    """An MSDU of a mesh radio: LLC/SNAP for the mesh ethertype, the 18-byte mesh header
    (its inner ethertype first: mesh.cc), the IPv4 packet."""
    mesh = struct.pack("!H", 0x0800) + bytes(12) + bytes([5, 0, 0, 1])
    return bytes([0xAA, 0xAA, 0x03, 0, 0, 0]) + struct.pack("!H", MESH_PROTO) + mesh + ip


class Ledger(DriverProcess):
    def send(self, *lines: str) -> None:
        assert self.process.stdin
        for line in lines:
            self.process.stdin.write(line + "\n")

    def stats(self) -> dict:
        assert self.process.stdin and self.process.stdout
        self.send("json")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver(
        tmp_path_factory.mktemp("frame-ledger") / "driver",
        "ledger_driver.cc",
        ["ledger.cc"],
        ["wifi", "network", "core"],
    )


@pytest.fixture
def ledger(driver: Path):
    running = Ledger(driver)
    yield running
    running.close()


def test_a_frame_is_known_again_after_the_hops_change_its_ttl_and_tcp_checksum(ledger: Ledger) -> None:
    """FastACK resends a segment with the sender's latest TSval, so a new TCP checksum."""
    ledger.send(f"enter {STATION} {tcp(1000, 7).hex()}", f"left {tcp(1000, 7, checksum=0xBEEF, ttl=63).hex()}")
    stats = ledger.stats()
    assert (stats["entered"], stats["left"], stats["left_unentered"], stats["in_flight"]) == (1, 1, 0, 0)
    # another segment (its sequence number) or another datagram (its IP ID) is another frame
    ledger.send(f"enter {STATION} {tcp(1000, 8).hex()}", f"left {tcp(2000, 8).hex()}", f"left {tcp(1000, 9).hex()}")
    stats = ledger.stats()
    assert (stats["left"], stats["left_unentered"], stats["in_flight"]) == (1, 2, 1)


def test_drops_are_matched_behind_the_headers_the_channel_adds(ledger: Ledger) -> None:
    frames = [udp(seq) for seq in range(3)]
    ledger.send(
        *(f"enter {STATION} {frame.hex()}" for frame in frames),
        f"drop ethernet wire_loss {ethernet(frames[0]).hex()}",
        f"drop llc mac_retry_limit {llc_mesh(frames[1]).hex()}",
        f"drop ip queue_disc {frames[2].hex()}",
    )
    stats = ledger.stats()
    assert stats["dropped"] == {"wire_loss": 1, "mac_retry_limit": 1, "queue_disc": 1}
    assert (stats["entered"], stats["in_flight"], stats["vanished"]) == (3, 0, 0)


def test_only_unicast_ipv4_frames_are_entered(ledger: Ledger) -> None:
    arp = bytes(6) + bytes(22)
    ledger.send(f"enter ff:ff:ff:ff:ff:ff {udp(1).hex()}", f"enter {STATION} {arp.hex()}", f"left {arp.hex()}")
    stats = ledger.stats()
    assert (stats["entered"], stats["left_unentered"], stats["in_flight"]) == (0, 0, 0)


def test_a_flooded_frame_leaves_once_per_copy(ledger: Ledger) -> None:
    frame = udp(5)
    ledger.send(f"enter {STATION} {frame.hex()}", f"copied ip 2 {frame.hex()}", f"left {frame.hex()}")
    assert ledger.stats()["in_flight"] == 2
    ledger.send(f"drop ip same_segment {frame.hex()}", f"left {frame.hex()}")
    stats = ledger.stats()
    assert (stats["left"], stats["dropped"], stats["in_flight"], stats["copies_made"]) == (2, {"same_segment": 1}, 0, 2)


def test_a_frame_that_neither_leaves_nor_is_dropped_vanishes_after_the_settle_time(ledger: Ledger) -> None:
    lost, late = udp(1, ident=11), udp(2, ident=12)
    ledger.send(
        "wait 500",
        f"enter {STATION} {lost.hex()}",
        f"queue {lost.hex()}",
        f"stage acked {lost.hex()}",
        "wait 1000",
        f"enter {STATION} {late.hex()}",
        "wait 1200",
    )
    stats = ledger.stats()  # 2.2 s after the first entered, 1.2 s after the second
    assert (stats["vanished"], stats["in_flight"], stats["settle_s"]) == (1, 1, 2)
    assert stats["vanished_frames"] == [
        {
            "entered_s": 0.5,
            "stage": "acked",
            "protocol": 17,
            "src": "10.0.0.1:5201",
            "dst": "10.0.1.2:40000",
            "ip_bytes": len(lost),
            "copies": 1,
        }
    ]
    # a frame in a queue that still holds frames is held, however old: a deep queue drains slowly
    waiting = udp(3, ident=13)
    ledger.send(f"enter {STATION} {waiting.hex()}", f"queue {waiting.hex()}", "holding 8000", "wait 2500")
    stats = ledger.stats()
    assert (stats["vanished"], stats["held"], stats["in_flight"]) == (2, 1, 1), stats
    ledger.send("holding 0")  # the queue drained, and the frame did not leave it for anywhere
    stats = ledger.stats()
    assert (stats["vanished"], stats["held"]) == (3, 0)
    assert stats["vanished_frames"][-1]["stage"] == "queued"
    # a reset starts a new interval: what was in flight is forgotten, and its leaving is not matched
    ledger.send("reset", f"left {late.hex()}")
    stats = ledger.stats()
    assert (stats["entered"], stats["left"], stats["left_unentered"], stats["vanished"]) == (0, 0, 1, 0)
