"""An ns-3 cell whose access point accelerates TCP ACKs (FastACK, docs/ns3-backend.md), for
tests/integration/test_fastack.py and test_fastack_ack_fields.py: the topology (a server 10 ms
of cable from the AP, stations over a lossy radio), the running cell serving bulk objects over
HTTP, downloads over it captured at the station and at the server (made again when the channel
did not keep real time) with the AP's counters, and the TCP segments of those captures with the
options the tests read."""

from __future__ import annotations

import hashlib
import shutil
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from quicbed import Topology
from quicbed.analysis.packets import iter_frames, read_pcap
from quicbed.apps import objects
from quicbed.apps.capture import CaptureSet
from quicbed.backends.ns3.network import Ns3Network, Ns3Node
from realtime import in_real_time

SIZE = 3_000_000
MSS = 1448
FIN, SYN, RST, ACK, ECE, CWR = 0x01, 0x02, 0x04, 0x10, 0x40, 0x80
CABLE_DELAY = 0.010  # one way, server to AP
PORT = 8000
needs_nft = pytest.mark.skipif(shutil.which("nft") is None, reason="needs nftables (nft) in the namespaces")


def cell_topology(
    fastack: bool = True,
    wired_loss: float = 0,
    ack_loss: float = 0,
    air_loss: float = 30,
    amsdu: bool = False,
    mcs: int = 7,
    stations: int = 1,
) -> Topology:
    """server --10 ms-- ap1 ))) sta1 (.. staN), air_loss % of the frames lost on the air (the MAC
    retries); wired_loss both ways on the cable, ack_loss only from the AP towards the server."""
    topo = Topology("fastack-cell")
    radio = {"amsdu": True} if amsdu else {}
    server, ap = topo.add_host("server"), topo.add_access_point("ap1", fastack=fastack, mcs=mcs, **radio)
    topo.add_link(
        server, ap, name="wired", delay="10ms", loss=wired_loss, backward={"loss": ack_loss} if ack_loss else None
    )
    for number in range(1, stations + 1):
        topo.add_wireless_link(topo.add_station(f"sta{number}", position=(5.0, number - 1.0, 0.0)), ap, loss=air_loss)
    return topo


@dataclass
class Segment:
    """A TCP segment as captured, with the options this module reads."""

    time: float
    src: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    window: int
    payload: int
    tsval: int | None = None
    tsecr: int | None = None
    sack: list[tuple[int, int]] = field(default_factory=list)
    wscale: int | None = None  # a SYN's window scale option
    ecn: int = 0  # the IP header's ECN bits

    @property
    def end(self) -> int:
        return (self.seq + self.payload) % 2**32

    @property
    def pure_ack(self) -> bool:
        return self.payload == 0 and self.flags & (SYN | FIN | RST) == 0 and bool(self.flags & ACK)


def read_segments(path: Path) -> list[Segment]:
    """The IPv4 TCP segments of an Ethernet capture."""
    segments = []
    for ts_ns, _linktype, frame in iter_frames(path):
        if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ihl = (frame[14] & 0x0F) * 4
        total = struct.unpack("!H", frame[16:18])[0]
        tcp = frame[14 + ihl :]
        offset = (tcp[12] >> 4) * 4
        sport, dport, seq, ack = struct.unpack("!HHII", tcp[:12])
        segment = Segment(
            ts_ns / 1e9,
            ".".join(map(str, frame[26:30])),
            sport,
            dport,
            seq,
            ack,
            tcp[13],
            struct.unpack("!H", tcp[14:16])[0],
            total - ihl - offset,
            ecn=frame[15] & 3,
        )
        options, at = tcp[20:offset], 0
        while at < len(options) and options[at] != 0:
            if options[at] == 1:
                at += 1
                continue
            if at + 1 >= len(options) or options[at + 1] < 2:
                break
            kind, length = options[at], options[at + 1]
            if kind == 8 and length == 10:
                segment.tsval, segment.tsecr = struct.unpack("!II", options[at + 2 : at + 10])
            elif kind == 3 and length == 3:
                segment.wscale = options[at + 2]
            elif kind == 5:
                segment.sack = [struct.unpack("!II", options[i : i + 8]) for i in range(at + 2, at + length - 7, 8)]
            at += length
        segments.append(segment)
    return segments


def seq_after(a: int, b: int) -> bool:
    """a after b in sequence space."""
    return 0 < (a - b) % 2**32 < 2**31


def count_pure_acks(path: Path, source: str) -> int:
    return sum(
        1 for p in read_pcap(path) if p.proto == "tcp" and p.src == source and p.payload_len == 0 and p.tcp_flags == ACK
    )


def resent_segments(segments: Sequence[Segment], source: str) -> list[Segment]:
    """Data segments from source ending at or before the highest byte it had sent."""
    highest: dict[tuple[int, int], int] = {}  # by connection
    resent = []
    for s in segments:
        if s.src != source or not s.payload:
            continue
        if (s.sport, s.dport) in highest and not seq_after(s.end, highest[s.sport, s.dport]):
            resent.append(s)
        else:
            highest[s.sport, s.dport] = s.end
    return resent


def digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def tcp_ext_counters(node: Ns3Node) -> dict[str, int]:
    """The node's TcpExt counters (per network namespace)."""
    lines = node.run(["cat", "/proc/net/netstat"]).stdout.splitlines()
    names, values = next(
        (lines[i].split(), lines[i + 1].split()) for i in range(0, len(lines), 2) if lines[i].startswith("TcpExt:")
    )
    return {name: int(value) for name, value in zip(names[1:], values[1:])}


class Cell:
    """A running cell whose server serves bulk objects over HTTP/1.0 on port 8000."""

    def __init__(self, network: Ns3Network, root: Path, tmp_path: Path) -> None:
        self.network = network
        self.root = root
        self.tmp_path = tmp_path
        self.station, self.server = network.node("sta1"), network.node("server")

    def url(self, size: int) -> str:
        return f"http://{self.server.address}:{PORT}/bulk/{objects.bulk_name(size)}.bin"

    def object(self, size: int) -> Path:
        return self.root / "bulk" / f"{objects.bulk_name(size)}.bin"

    def fetch(self, size: int, name: str, max_time: float = 60) -> Path:
        """Download the object with curl; its digest is checked."""
        fetched = self.tmp_path / name
        result = self.station.run(
            ["curl", "-s", "--max-time", str(max_time), "-o", str(fetched), self.url(size)],
            timeout=max_time + 30,
            check=False,
        )
        assert result.returncode == 0, f"{name}: curl exit {result.returncode}"
        assert digest(fetched) == digest(self.object(size)), name
        return fetched

    def fastack(self) -> dict[str, Any]:
        return self.network.mac_stats()["bridges"]["ap1"].get("fastack", {})

    def settled(self, within: float = 5) -> dict[str, Any]:
        """The AP's counters once its flows have closed (a FIN lost on the cable is resent
        after the station's retransmission timeout), or after `within` seconds."""
        deadline = time.monotonic() + within
        while (fastack := self.fastack()).get("flows_active") and time.monotonic() < deadline:
            time.sleep(0.2)
        return fastack


@contextmanager
def running_cell(
    tmp_path: Path, topo: Topology, sizes: Sequence[int], sysctls: dict[str, Sequence[str]] | None = None
) -> Iterator[Cell]:
    """The cell up, sysctls applied per node (they are per network namespace), the HTTP server
    answering, the statistics reset once the warm-up connection has closed."""
    root = tmp_path / "www"
    objects.generate(root, bulk=sizes, seed=3)
    with Ns3Network(topo, log_dir=tmp_path / "ns3") as network:
        cell = Cell(network, root, tmp_path)
        for node, settings in (sysctls or {}).items():
            network.node(node).run(["sysctl", "-qw", *settings])
        http = cell.server.start(
            [sys.executable, "-m", "http.server", str(PORT), "--directory", str(root)], name="http", log_dir=tmp_path
        )
        deadline = time.monotonic() + 20
        while cell.station.run(
            ["curl", "-s", "-o", "/dev/null", f"http://{cell.server.address}:{PORT}/"], check=False
        ).returncode:
            assert http.running and time.monotonic() < deadline, http.errors()
            time.sleep(0.2)
        time.sleep(0.5)  # the warm-up connection's last ACK crosses the cable
        # its flow must have ended at the AP before the counters restart, or its end is counted
        # against the downloads (4 started, 5 ended). With 30 % lost towards the server the
        # station's FIN is lost too, and the AP ends the flow only when the server acknowledges
        # it: its first two copies lost (the third goes about 0.6 s after the first) is 9 % of runs.
        # Its resends back off (0.2, 0.4, 0.8, ... s): 15 s covers 6 losses in a row (0.07 %).
        warm = cell.settled(within=15)
        assert not warm.get("flows_active"), f"the warm-up connection's flow never ended at the AP: {warm}"
        network.reset_stats()
        yield cell


@contextmanager
def captured(cell: Cell) -> Iterator[CaptureSet]:
    with CaptureSet(cell.tmp_path / "pcap") as captures:
        captures.add(cell.station, "wlan0", "station")
        captures.add(cell.server, "eth0", "server")
        captures.start()
        yield captures
        time.sleep(0.5)  # the last ACKs cross the cable
        captures.stop()


@dataclass
class Download:
    fastack: dict[str, Any]  # the AP's counters (absent with it off)
    station: list[Segment]  # captured at the station
    server: list[Segment]  # captured at the server
    station_address: str
    server_address: str
    station_acks_sent: int  # the station's pure ACKs, at the station
    station_acks_heard: int  # the station's pure ACKs (and the AP's on its behalf), at the server
    server_netstat: dict[str, int]  # TcpExt counters of the server during the downloads
    ap_bytes_per_mpdu: float  # the AP radio's data bytes per data MPDU (above one MSDU's: A-MSDUs)


def _stalls(judged: dict[str, Any], limit: float) -> list[str]:
    """Why the captures' clocks may be off by more than ``limit`` seconds for some packets:
    the channel fell that far behind the wall clock once, or its TAP writer held a frame that
    long. A run stays valid through one such stall (it moves goodput by little), but a capture
    stamp taken during it is late by the stall: a hypervisor taking both CPUs for 8 ms every
    0.6 s made the channel 9 ms late and the AP's ACKs seem to lead the station's data by
    5-6 ms instead of 10 (in 2 of 5 downloads; none in 21 without it, the largest lag 1 ms)."""
    lag_ms, writer_s = judged["judged_lag_max_ms"], judged["tap"]["tx_delay"]["max_s"]
    found = [f"the channel fell {lag_ms:.1f} ms behind"] if lag_ms > limit * 1e3 else []
    return found + ([f"the TAP writer held a frame {writer_s * 1e3:.1f} ms"] if writer_s > limit else [])


def measure_download(
    tmp_path: Path,
    fastack: bool = True,
    wired_loss: float = 0,
    ack_loss: float = 0,
    times: int = 1,
    size: int = SIZE,
    sysctls: dict[str, Sequence[str]] | None = None,
    amsdu: bool = False,
    max_time: float = 60,
    stamps_within: float | None = None,
    mcs: int = 7,
) -> Download:
    """Fetch the object over plain HTTP, times connections one after the other, in a cell the
    channel kept in real time; with ``stamps_within`` (s), also in time to that for every
    packet (tests comparing two captures' stamps packet by packet)."""

    def attempt(number: int) -> tuple[Download | None, list[str]]:
        folder = tmp_path / f"attempt-{number}"
        with running_cell(
            folder, cell_topology(fastack, wired_loss, ack_loss, amsdu=amsdu, mcs=mcs), [size], sysctls
        ) as cell:
            before = tcp_ext_counters(cell.server)
            with captured(cell) as captures:
                for fetched in range(times):
                    cell.fetch(size, f"fetched-{fetched}.bin", max_time=max_time)
            after = tcp_ext_counters(cell.server)
            # the flows close once the server has acknowledged the station's FIN; across a lossy
            # cable a lost FIN waits for the station's retransmission timeout, which an earlier
            # loss may have backed off to seconds (a request lost three times at 30 %: RTO 2 s, and
            # two FINs lost took the flow past 5 s). 15 s, as for the warm-up, covers four copies.
            fastack_counters = cell.settled(within=15)
            judged = cell.network.mac_stats()
            late = judged["invalid_reasons"] + (_stalls(judged, stamps_within) if stamps_within else [])
            if late:
                return None, late
            return Download(
                fastack=fastack_counters,
                station=read_segments(captures.path("station")),
                server=read_segments(captures.path("server")),
                station_address=cell.station.address,
                server_address=cell.server.address,
                station_acks_sent=count_pure_acks(captures.path("station"), cell.station.address),
                station_acks_heard=count_pure_acks(captures.path("server"), cell.station.address),
                server_netstat={k: after[k] - before.get(k, 0) for k in after},
                ap_bytes_per_mpdu=_bytes_per_mpdu(judged, "ap1"),
            ), []

    download, _ = in_real_time(attempt, "download")
    assert download is not None
    return download


def _bytes_per_mpdu(stats: dict[str, Any], node: str) -> float:
    radio = next(radio for radio in stats["radios"].values() if radio["node"] == node)
    return radio["data_bytes"] / radio["data_mpdus"] if radio["data_mpdus"] else 0.0


def assert_ended_cleanly(fastack: dict[str, Any], flows: int) -> None:
    """Every flow ended with its FINs: none left, nothing held, none given up."""
    assert fastack["flows_started"] == flows and fastack["flows_ended"] == flows, fastack
    assert fastack["flows_active"] == 0 and fastack["held_bytes"] == 0 and fastack["flows_abandoned"] == 0, fastack
