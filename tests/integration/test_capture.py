"""tcpdump captures at node interfaces: known transfers are seen packet for packet, the
pcap is complete once stopped, tcpdump's counters are reported."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quicbed.apps.capture import Capture, CaptureSet
from quicbed.apps.launch import module_argv
from quicbed.backends.netns import NamespaceNetwork
from quicbed.errors import BackendError
from quicbed.spec.loader import load_topology

pytestmark = [pytest.mark.needs_root]

ROOT = Path(__file__).resolve().parents[2]
COUNT = 500
PAYLOAD = 300


@pytest.fixture(scope="module")
def net() -> Iterator[NamespaceNetwork]:
    topo = load_topology(
        str(ROOT / "topologies" / "dumbbell.py"), {"rate": "20mbit", "delay": "0ms", "queue_limit": 1000}
    )
    with NamespaceNetwork(topo) as network:
        yield network


def _send(net: NamespaceNetwork, port: int, count: int = COUNT, rate: int = 4000, size: int = PAYLOAD) -> None:
    net.node("client").run(
        module_argv(
            "quicbed.apps.udpprobe",
            [
                "send",
                "--dest",
                net.node("server").address,
                "--port",
                str(port),
                "--count",
                str(count),
                "--rate",
                str(rate),
                "--size",
                str(size),
            ],
        ),
        timeout=30,
    )


def _udp_to(path: Path, port: int) -> list:
    from quicbed.analysis.packets import read_pcap

    return [p for p in read_pcap(path) if p.proto == "udp" and p.dport == port]


def test_known_udp_transfer_is_captured_at_both_ends(net: NamespaceNetwork, tmp_path: Path) -> None:
    captures = CaptureSet(tmp_path)
    captures.add(net.node("client"), "eth0")
    captures.add(net.node("server"), "eth0")
    with captures:
        captures.start()
        _send(net, 5999)
        stopped_at = time.time()
    # stopped right after the last datagram left: nothing is missing
    for name in ("client-eth0", "server-eth0"):
        stats = captures.stats[name]
        assert stats.complete and stats.dropped_by_kernel == 0 and stats.unwritten == 0
        assert stats.captured is not None and stats.captured >= COUNT
        packets = _udp_to(captures.path(name), 5999)
        assert len(packets) == COUNT, name
        assert all(p.payload_len == PAYLOAD and p.ip_len == PAYLOAD + 28 for p in packets)
        assert packets[-1].ts <= stopped_at
    # both captures share the host's clock: each datagram reaches the server after it left
    sent = {p.payload_hash: p.ts for p in _udp_to(captures.path("client-eth0"), 5999)}
    arrived = {p.payload_hash: p.ts for p in _udp_to(captures.path("server-eth0"), 5999)}
    assert sent.keys() == arrived.keys()
    delays = [arrived[key] - sent[key] for key in sent]
    assert min(delays) >= 0 and max(delays) < 0.05
    info = captures.info()["server-eth0"]
    assert info["snaplen"] == 128 and info["stats"]["dropped"] == 0


def test_pcap_file_is_whole_headers_only_and_nanosecond(net: NamespaceNetwork, tmp_path: Path) -> None:
    capture = Capture(net.node("server"), "eth0", tmp_path / "server.pcap")
    with capture:
        _send(net, 5998, count=100, rate=1000, size=1200)  # below the link rate
    data = (tmp_path / "server.pcap").read_bytes()
    magic, _, _, _, _, snaplen, linktype = struct.unpack("<IHHiIII", data[:24])
    assert magic == (0xA1B23C4D if capture.nanoseconds else 0xA1B2C3D4)
    assert snaplen == 128 and linktype == 1
    offset, records, lengths = 24, 0, []
    while offset < len(data):
        _, _, caplen, wirelen = struct.unpack("<IIII", data[offset : offset + 16])
        offset += 16 + caplen
        records += 1
        lengths.append((caplen, wirelen))
    assert offset == len(data), "the last record is cut"
    assert records == capture.stats.captured
    full = [(c, w) for c, w in lengths if w == 14 + 20 + 8 + 1200]
    assert len(full) == 100 and all(c == 128 for c, _ in full)


def test_filter_keeps_only_matching_packets(net: NamespaceNetwork, tmp_path: Path) -> None:
    capture = Capture(net.node("server"), "eth0", tmp_path / "filtered.pcap", bpf_filter="udp dst port 5997")
    with capture:
        _send(net, 5997, count=50)
        _send(net, 5996, count=50)
    from quicbed.analysis.packets import read_pcap

    packets = read_pcap(tmp_path / "filtered.pcap")
    assert len(packets) == 50 and {p.dport for p in packets} == {5997}
    assert capture.stats.captured == 50


def test_without_immediate_mode_the_last_block_is_waited_for(net: NamespaceNetwork, tmp_path: Path) -> None:
    capture = Capture(net.node("client"), "eth0", tmp_path / "blocks.pcap", immediate=False)
    with capture:
        _send(net, 5995, count=200)
    assert capture.stats.unwritten == 0
    assert len(_udp_to(tmp_path / "blocks.pcap", 5995)) == 200


def test_bad_interface_fails_fast(net: NamespaceNetwork, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BackendError, match="tcpdump on server-nope"):
        Capture(net.node("server"), "nope", tmp_path / "x.pcap").start()
    assert time.monotonic() - started < 10


@pytest.fixture(scope="module")
def shaped_sender() -> Iterator[NamespaceNetwork]:
    """client --- server, the client's own interface (only) shaped to 2 Mbit/s with a 20-packet queue."""
    from quicbed import Topology

    topo = Topology("shaped-sender")
    client, server = topo.add_host("client"), topo.add_host("server")
    topo.add_link(client, server, name="access", forward={"rate": "2mbit", "queue_limit": 20})
    with NamespaceNetwork(topo) as network:
        yield network


def test_a_shaped_senders_capture_sees_what_it_sent(shaped_sender: NamespaceNetwork, tmp_path: Path) -> None:
    """tcpdump at a shaped interface sees departures after the qdisc; the capture taps before it,
    so the sender's capture holds every datagram, at the sending rate, and the queue's drops show
    as packets the receiver's capture lacks."""
    captures = CaptureSet(tmp_path)
    captures.add(shaped_sender.node("client"), "eth0")
    captures.add(shaped_sender.node("server"), "eth0")
    with captures:
        captures.start()
        _send(shaped_sender, 5997, count=COUNT, rate=4000)  # 9.6 Mbit/s into a 2 Mbit/s link
        time.sleep(0.5)  # the queue drains
    sent = _udp_to(captures.path("client-eth0"), 5997)
    received = _udp_to(captures.path("server-eth0"), 5997)
    assert len(sent) == COUNT  # the old capture, after the qdisc, missed what the queue dropped
    assert sent[-1].ts - sent[0].ts < 0.5 * COUNT * (PAYLOAD + 42) * 8 / 2e6  # not spaced by the link
    assert 0 < len(received) < COUNT * 0.5
    assert {p.payload_hash for p in received} <= {p.payload_hash for p in sent}
    info = captures.info()
    assert info["client-eth0"]["tapped"].startswith("before the tbf qdisc")
    own = info["client-eth0"]["own_qdisc"]  # the token bucket held the burst back and its queue overflowed
    assert own["kind"] == "tbf" and own["overlimits"] > 0 and own["dropped"] >= COUNT - len(received) > 0
    assert info["server-eth0"]["tapped"] == "at the interface"
    # the tap is gone with the capture
    links = shaped_sender.node("client").run(["ip", "-o", "link", "show"]).stdout
    filters = shaped_sender.node("client").run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    assert "qbtap" not in links and "clsact" not in filters


TCP_BYTES = 300_000
TCP_SINK = (
    "import socket, sys; s = socket.create_server(('0.0.0.0', 5996)); c, _ = s.accept(); n = 0\n"
    "while (b := c.recv(65536)): n += len(b)\n"
    "print(n)"
)
TCP_SOURCE = (
    f"import socket, sys; c = socket.create_connection((sys.argv[1], 5996)); c.sendall(bytes({TCP_BYTES})); c.close()"
)


def test_a_shaped_tcp_senders_capture_holds_the_links_packets(shaped_sender: NamespaceNetwork, tmp_path: Path) -> None:
    """TCP hands the qdisc super-packets of up to 64 kB even with the interface's offloads off;
    the tap before the qdisc must show the packets the link carried, none larger than the MTU
    (the report counts a larger one as an offload left on and rejects the run)."""
    import sys

    client, server = shaped_sender.node("client"), shaped_sender.node("server")
    captures = CaptureSet(tmp_path)
    captures.add(client, "eth0")
    with captures:
        captures.start()
        sink = server.start([sys.executable, "-c", TCP_SINK], name="sink", log_dir=tmp_path)
        time.sleep(0.5)
        client.run([sys.executable, "-c", TCP_SOURCE, server.address], timeout=30)
        assert sink.wait(timeout=30) == 0
    assert int(sink.output().strip()) == TCP_BYTES
    from quicbed.analysis.packets import read_pcap

    data = [p for p in read_pcap(captures.path("client-eth0")) if p.proto == "tcp" and p.dport == 5996]
    assert captures.info()["client-eth0"]["tapped"].startswith("before the tbf qdisc")
    assert max(p.ip_len for p in data) <= 1500  # was 7-26 kB before the tap's ifb segmented
    assert sum(p.payload_len for p in data) >= TCP_BYTES  # every byte (resent ones counted again)
