"""What an accelerating ns-3 access point's ACKs (FastACK, docs/ns3-backend.md) carry on the
station's behalf: a slow reader's window updates and its answers to zero-window probes, windows
when the sender does not scale them, timestamps or none, ECN echoes (one CE mark, one
reduction), and the station's own sequence number when it sends data too. The cell and its
captures are in tests/fastack_cell.py; each download's digest is checked."""

from __future__ import annotations

import hashlib
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from quicbed.apps import objects
from quicbed.backends.ns3 import build

from fastack_cell import (
    ACK,
    CWR,
    ECE,
    MSS,
    SIZE,
    SYN,
    Segment,
    assert_ended_cleanly,
    captured,
    cell_topology,
    measure_download,
    needs_nft,
    read_segments,
    resent_segments,
    running_cell,
    seq_after,
)

NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]


# -- windows -------------------------------------------------------------------------------------


READER = r"""
import hashlib, socket, sys, time
host, path = sys.argv[1], sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
s.connect((host, 8000))
s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
data, paused = bytearray(), False
while chunk := s.recv(16384):
    data += chunk
    time.sleep(0.03)
    if len(data) > 300_000 and not paused:
        paused = True
        time.sleep(0.8)  # long enough for the sender's zero-window probes
print(hashlib.sha256(data[data.index(b"\r\n\r\n") + 4:]).hexdigest())
"""


def _station_scale(segments: Sequence[Segment], station: str) -> int:
    """The window shift of the station's segments: its SYN's option, when both SYNs carry one."""
    offered = {s.src == station: s.wscale for s in segments if s.flags & SYN}
    return offered[True] if offered[True] is not None and offered[False] is not None else 0


def test_a_slow_readers_window_updates_reach_the_sender(tmp_path: Path) -> None:
    """A reader with a 32 KB buffer reads 16 KB every 30 ms and once pauses 0.8 s: its window
    closes and reopens with updates that carry the same ACK number. The AP passes each one on
    at once (it used to consume them, and count them as duplicate ACKs, so the sender waited
    for its zero-window probe, and a third one resent a segment); the probes of the long pause
    get the AP's answer echoing their TSval (RFC 7323), not the last data segment's."""
    size = 1_000_000
    with running_cell(tmp_path, cell_topology(air_loss=0), [size]) as cell:
        script = tmp_path / "reader.py"
        script.write_text(READER)
        with captured(cell) as captures:
            path = f"/bulk/{objects.bulk_name(size)}.bin"
            result = cell.station.run([sys.executable, str(script), cell.server.address, path], timeout=60)
        assert result.stdout.strip() == hashlib.sha256(cell.object(size).read_bytes()).hexdigest()
        fastack = cell.settled()
        station, server = read_segments(captures.path("station")), read_segments(captures.path("server"))
        station_address, server_address = cell.station.address, cell.server.address
    scale = _station_scale(station, station_address)
    # the station reopening a window it had closed (less than a segment), with the same ACK number
    reopened, previous = [], None
    for s in station:
        if s.src == station_address and s.pure_ack:
            if previous and s.ack == previous.ack and (previous.window << scale) < MSS <= (s.window << scale):
                reopened.append(s)
            previous = s
    assert reopened, "the reader's window never closed"
    heard = [s for s in server if s.src == station_address and s.pure_ack and (s.window << scale) >= MSS]
    late = [r for r in reopened if not any(r.ack == h.ack and 0 <= h.time - r.time <= 0.05 for h in heard)]
    assert not late, f"{len(late)} of {len(reopened)} window updates not at the server within 50 ms"
    assert fastack["window_updates"] >= len(reopened) * 0.9 and fastack["local_retransmissions"] == 0, fastack
    # the zero-window probes (a byte below what was acknowledged, no data) and their answers
    highest_ack = 0
    probes = []
    for s in server:
        if s.src == station_address and s.flags & ACK:
            highest_ack = s.ack
        elif s.src == server_address and s.payload == 0 and s.flags == ACK and s.seq == (highest_ack - 1) % 2**32:
            probes.append(s)
    assert probes, "no zero-window probe"
    answers = [s for s in server if s.src == station_address and s.pure_ack]
    for probe in probes:
        assert any(a.tsecr == probe.tsval and 0 < a.time - probe.time < 0.05 for a in answers), probe
    assert_ended_cleanly(fastack, 1)


def test_a_sender_without_window_scaling(tmp_path: Path) -> None:
    """The server's SYN-ACK carries no window-scale option, so neither end scales (RFC 7323):
    the AP's windows are read as sent, and stay within the station's own. The AP used to
    assume the station's scale and advertise a 128th of its room: 1 MB took a minute."""
    size = 1_000_000
    run = measure_download(tmp_path, size=size, sysctls={"server": ["net.ipv4.tcp_window_scaling=0"]}, max_time=20)
    assert _station_scale(run.station, run.station_address) == 0
    station_windows = [s.window for s in run.station if s.src == run.station_address and s.pure_ack]
    ap_windows = [s.window for s in run.server if s.src == run.station_address and s.pure_ack]
    assert max(ap_windows) >= 32768 and max(ap_windows) <= max(station_windows), (max(ap_windows), max(station_windows))
    data = [s for s in run.station if s.src == run.server_address and s.payload]
    goodput = size * 8 / (data[-1].time - data[0].time) / 1e6
    assert goodput >= 5, f"{goodput:.1f} Mbit/s"
    assert_ended_cleanly(run.fastack, 1)


def test_without_timestamps_the_ap_sends_none(tmp_path: Path) -> None:
    run = measure_download(tmp_path, sysctls={"server": ["net.ipv4.tcp_timestamps=0"]})
    assert all(s.tsval is None for s in run.server if s.src == run.station_address and not s.flags & SYN)
    assert run.fastack["accelerated"] >= SIZE // (MSS + 12) and run.fastack["station_acks_swallowed"] > 0, run.fastack
    assert_ended_cleanly(run.fastack, 1)


# -- ECN -----------------------------------------------------------------------------------------


MARK_CE = """table ip fastack_ce {
  chain prerouting {
    type filter hook prerouting priority raw; policy accept;
    tcp sport 8000 numgen random mod 100 < 2 ip ecn set ce
  }
}
"""


@needs_nft
def test_congestion_marks_reach_the_sender(tmp_path: Path) -> None:
    """ECN on both ends; 2 % of the data marked CE as it enters the station. The station's
    ACKs echo that (ECE) until the sender's CWR; the AP's ACKs carry ECE while the station's
    do (they used to drop it with the ACKs they replaced, so the sender never reacted)."""
    sysctls = {"server": ["net.ipv4.tcp_ecn=1"], "sta1": ["net.ipv4.tcp_ecn=1"]}
    with running_cell(tmp_path, cell_topology(), [SIZE], sysctls) as cell:
        cell.station.run(["nft", "-f", "-"], input=MARK_CE)
        with captured(cell) as captures:
            cell.fetch(SIZE, "fetched.bin")
        fastack = cell.settled()
        server = read_segments(captures.path("server"))
        station_address, server_address = cell.station.address, cell.server.address
    echoed = [s for s in server if s.src == station_address and s.pure_ack and s.flags & ECE]
    reduced = [s for s in server if s.src == server_address and s.payload and s.flags & CWR]
    assert len(reduced) >= 3, f"the server sent CWR {len(reduced)} times"
    assert fastack["ece_echoed"] > 0 and len(echoed) >= fastack["ece_echoed"] * 0.9, fastack


MARK_ONE_CE = """table ip fastack_ce {
  chain prerouting {
    type filter hook prerouting priority raw; policy accept;
    tcp sport 8000 tcp flags & (syn | fin) == 0 numgen inc mod 1000000 == 300 ip ecn set ce
  }
}
"""


@needs_nft
def test_one_congestion_mark_halves_the_senders_window_once(tmp_path: Path) -> None:
    """One data segment marked CE. Linux's receiver echoes ECE on every ACK until the sender's
    CWR segment reaches it, so the station's ACKs sent meanwhile still carry ECE; echoed on the
    AP's ACKs of the CWR segment and after, they read as new congestion once the sender's CWR
    state ended, and it reduced again. One mark, one reduction: one segment with CWR."""
    sysctls = {"server": ["net.ipv4.tcp_ecn=1"], "sta1": ["net.ipv4.tcp_ecn=1"]}
    with running_cell(tmp_path, cell_topology(air_loss=0), [SIZE], sysctls) as cell:
        cell.station.run(["nft", "-f", "-"], input=MARK_ONE_CE)
        with captured(cell) as captures:
            cell.fetch(SIZE, "fetched.bin")
        fastack = cell.settled()
        server = read_segments(captures.path("server"))
        server_address = cell.server.address
    reduced = [s.seq for s in server if s.src == server_address and s.payload and s.flags & CWR]
    assert fastack["ece_echoed"] > 0, fastack
    assert len(reduced) == 1, f"one CE mark, {len(reduced)} segments with CWR at {reduced}"


# -- data both ways ------------------------------------------------------------------------------


PEER = r"""
import hashlib, random, socket, sys, threading
role, host, send_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "server":
    listener = socket.create_server((host, 9000))
    s, _ = listener.accept()
else:
    s = socket.create_connection((host, 9000))
received = hashlib.sha256()
def read():
    while chunk := s.recv(65536):
        received.update(chunk)
reader = threading.Thread(target=read)
reader.start()
s.sendall(random.Random(role).randbytes(send_size))
s.shutdown(socket.SHUT_WR)
reader.join()
print(received.hexdigest())
"""


def test_data_both_ways_keeps_the_stations_sequence(tmp_path: Path) -> None:
    """One connection carrying 2 MB down and 1 MB up at once, 5 % of the uplink lost on the
    cable: the station's data passes (with its ACK), and its retransmissions never move the
    sequence number the AP's ACKs carry backwards (the AP used to copy the last segment's,
    and Linux discards an ACK whose sequence number is below its window)."""
    down, up = 2_000_000, 1_000_000
    topo = cell_topology(ack_loss=5)
    with running_cell(tmp_path, topo, [down]) as cell:
        script = tmp_path / "peer.py"
        script.write_text(PEER)
        with captured(cell) as captures:
            server = cell.server.start(
                [sys.executable, str(script), "server", cell.server.address, str(down)],
                name="peer-server",
                log_dir=tmp_path,
            )
            time.sleep(0.5)
            client = cell.station.run([sys.executable, str(script), "client", cell.server.address, str(up)], timeout=60)
            server.wait(30)
        assert client.stdout.strip() == hashlib.sha256(random.Random("server").randbytes(down)).hexdigest()
        assert server.output().strip() == hashlib.sha256(random.Random("client").randbytes(up)).hexdigest()
        fastack = cell.settled()
        segments = read_segments(captures.path("server"))
        station_address = cell.station.address
    assert resent_segments(segments, station_address), "nothing of the uplink was resent"
    previous = None
    for s in segments:
        if s.src == station_address and s.pure_ack:
            assert previous is None or not seq_after(previous, s.seq), f"the ACKs' sequence went back to {s.seq}"
            previous = s.seq
    assert fastack["accelerated"] >= down // MSS and fastack["station_acks_passed"] > up // MSS, fastack
    assert_ended_cleanly(fastack, 1)
