"""The pcap / pcap-ng reader, on the committed real captures and on hand-built files.

Expected values for the real captures come from tcpdump 4.99.3 reading the same files
(``tcpdump -ttvnr FILE``, ``tcpdump -nr FILE | wc -l``, ``tcpdump -nr FILE 'udp and
udp[8] & 0x80 != 0' | wc -l``), i.e. from libpcap's reader and tcpdump's dissectors, not
from this module. The hand-built files exercise the formats tcpdump does not write by
default (nanosecond magic, big-endian, pcap-ng, other link types, IPv6, VLAN tags).
"""

from __future__ import annotations

import hashlib
import socket
import struct
from pathlib import Path

import pytest

from quicbed.analysis.packets import (
    ACK,
    HASH_BYTES,
    PSH,
    SYN,
    Packet,
    PcapError,
    flags_text,
    payload_hash,
    quic_one_rtt_length,
    read_pcap,
    seconds_between,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"


# --------------------------------------------------------------------------- real captures


@pytest.mark.parametrize(
    ("name", "total", "long_headers"),
    [
        # tcpdump -nr F | wc -l ; tcpdump -nr F 'udp and udp[8] & 0x80 != 0' | wc -l
        ("quic/server.pcap", 361, 3),
        ("quic/client.pcap", 361, 3),
        ("bquic/server.pcap", 378, 3),
        ("bquic/client.pcap", 373, 3),
        ("tcp/server.pcap", 240, 0),
        ("tcp/client.pcap", 239, 0),
        ("parallel/client.pcap", 1154, 3),
    ],
)
def test_packet_counts_agree_with_tcpdump(name: str, total: int, long_headers: int) -> None:
    packets = read_pcap(FIXTURES / name)
    assert len(packets) == total
    assert sum(1 for p in packets if p.quic_long_header) == long_headers


def test_first_quic_packets_as_tcpdump_prints_them() -> None:
    # tcpdump -ttvnr quic/server.pcap | head -4:
    # 1795257016.307180 IP (tos 0x0, ttl 64, id 27722, ..., flags [DF], proto UDP (17), length 1228)
    #     10.0.0.1.59186 > 10.0.0.2.4433: UDP, length 1200
    # 1795257016.310538 IP (tos 0x0, ttl 64, id 34210, ..., length 1228)
    #     10.0.0.2.4433 > 10.0.0.1.59186: UDP, length 1200
    first, second = read_pcap(FIXTURES / "quic/server.pcap")[:2]
    assert first.ts_ns == 1795257016_307180_000
    assert first.ts == pytest.approx(1795257016.307180, abs=1e-6)
    assert (first.src, first.sport, first.dst, first.dport) == (CLIENT, 59186, SERVER, 4433)
    assert (first.proto, first.ip_len, first.payload_len, first.ip_id) == ("udp", 1228, 1200, 27722)
    assert first.quic_long_header is True and first.quic_type == "initial"
    assert first.tcp_flags is None and first.tcp_seq is None
    assert (second.ts_ns, second.ip_id, second.src) == (1795257016_310538_000, 34210, SERVER)
    assert seconds_between(first, second) == pytest.approx(0.003358, abs=1e-12)


def test_tcp_handshake_as_tcpdump_prints_it() -> None:
    # tcpdump -S -ttvnr tcp/server.pcap -c 3:
    # 1795257025.923124 ... id 42473 ... length 60  10.0.0.1.59360 > 10.0.0.2.8080: Flags [S],
    #     seq 1932681664, ... length 0
    # 1795257025.923158 ... id 0 ... length 60  10.0.0.2.8080 > 10.0.0.1.59360: Flags [S.],
    #     seq 562515882, ack 1932681665
    # 1795257025.923179 ... id 42474 ... length 52  ... Flags [.], ack 562515883
    syn, syn_ack, ack = read_pcap(FIXTURES / "tcp/server.pcap")[:3]
    assert (syn.tcp_flags, syn.tcp_seq, syn.ip_id, syn.ip_len) == (SYN, 1932681664, 42473, 60)
    assert syn.sport == 59360 and syn.dport == 8080 and syn.payload_len == 0
    assert (syn_ack.tcp_flags, syn_ack.tcp_seq, syn_ack.tcp_ack) == (SYN | ACK, 562515882, 1932681665)
    assert syn_ack.ip_id == 0  # Linux: SYN-ACKs of a listener carry ID 0
    assert (ack.tcp_flags, ack.tcp_ack, ack.ip_len) == (ACK, 562515883, 52)
    assert flags_text(syn_ack.tcp_flags) == "S." and flags_text(ack.tcp_flags) == "."
    # the first data segment: "seq 562516087:562517535, ... length 1448"
    data = next(p for p in read_pcap(FIXTURES / "tcp/server.pcap") if p.src == SERVER and p.payload_len == 1448)
    assert data.tcp_seq == 562516087 and data.ip_len == 1500
    assert data.ts_ns == 1795257025_927915_000


def test_the_same_packet_hashes_alike_at_both_ends() -> None:
    server = read_pcap(FIXTURES / "quic/server.pcap")
    client = read_pcap(FIXTURES / "quic/client.pcap")
    # no loss in this run (same counts): the i-th packet of the data direction is the same
    down = [p for p in server if p.src == SERVER]
    arrived = [p for p in client if p.src == SERVER]
    assert [(p.ip_id, p.payload_hash) for p in down] == [(p.ip_id, p.payload_hash) for p in arrived]
    assert len({p.payload_hash for p in down}) == len(down)  # ciphertext: all distinct


# --------------------------------------------------------------------------- hand-built files


def _ipv4_udp(
    src: str, dst: str, sport: int, dport: int, payload: bytes, ident: int = 7, fragment: int = 0x4000
) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(udp),
        ident,
        fragment,
        64,
        17,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return header + udp


def _ipv4_tcp(
    src: str, dst: str, payload: bytes, flags: int = PSH | ACK, seq: int = 1000, ack: int = 2000, ident: int = 9
) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 8080, 40000, seq, ack, 5 << 4, flags, 512, 0, 0) + payload
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), ident, 0x4000, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst)
    )
    return header + tcp


def _ipv6_udp(payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", 4433, 5555, 8 + len(payload), 0) + payload
    return (
        struct.pack(
            "!IHBB16s16s",
            6 << 28,
            len(udp),
            17,
            64,
            socket.inet_pton(socket.AF_INET6, "2001:db8::2"),
            socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
        )
        + udp
    )


def _ethernet(ip: bytes, ethertype: int = 0x0800, vlan: int | None = None) -> bytes:
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return b"\x02" * 6 + b"\x04" * 6 + tag + struct.pack("!H", ethertype) + ip


def _pcap(
    records: list[tuple[int, int, bytes]],
    linktype: int = 1,
    *,
    nano: bool = False,
    big: bool = False,
    snaplen: int = 65535,
) -> bytes:
    """records: (seconds, fraction in us or ns, frame)."""
    order = ">" if big else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)
    for seconds, fraction, frame in records:
        data = frame[:snaplen]
        out += struct.pack(order + "IIII", seconds, fraction, len(data), len(frame)) + data
    return out


def _block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def _pcapng(frames: list[tuple[int, bytes]], tsresol: int | None = 9, linktype: int = 1) -> bytes:
    """frames: (timestamp in ticks of 10^-tsresol s, frame)."""
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    options = b""
    if tsresol is not None:
        options = struct.pack("<HHB3x", 9, 1, tsresol) + struct.pack("<HH", 0, 0)
    idb = _block(1, struct.pack("<HHI", linktype, 0, 0) + options)
    out = shb + idb
    for ticks, frame in frames:
        out += _block(6, struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(frame), len(frame)) + frame)
    return out + _block(5, b"")  # an interface statistics block: skipped


QUIC_SHORT = bytes([0x43]) + bytes(range(1, 60))  # header form bit clear: 1-RTT
QUIC_INITIAL = bytes([0xC3, 0, 0, 0, 1]) + bytes(40)  # long header, type 0


@pytest.mark.parametrize(("nano", "big"), [(False, False), (True, False), (False, True), (True, True)])
def test_classic_pcap_in_every_byte_order_and_resolution(tmp_path: Path, nano: bool, big: bool) -> None:
    fraction = 123_456_789 if nano else 123_456
    frame = _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, QUIC_SHORT))
    path = tmp_path / "x.pcap"
    path.write_bytes(_pcap([(1_700_000_000, fraction, frame)], nano=nano, big=big))
    (packet,) = read_pcap(path)
    assert packet.ts_ns == 1_700_000_000_000_000_000 + (fraction if nano else fraction * 1000)
    assert (packet.src, packet.sport, packet.dst, packet.dport) == (SERVER, 4433, CLIENT, 5000)
    assert packet.payload_len == len(QUIC_SHORT) and packet.ip_len == 20 + 8 + len(QUIC_SHORT)
    assert packet.quic_long_header is False and packet.quic_type == "1rtt"
    assert packet.ip_id == 7


def test_pcapng_with_nanosecond_and_default_resolution(tmp_path: Path) -> None:
    frame = _ethernet(_ipv4_udp(CLIENT, SERVER, 5000, 4433, QUIC_INITIAL))
    path = tmp_path / "ns.pcapng"
    path.write_bytes(_pcapng([(1_700_000_000_123_456_789, frame)], tsresol=9))
    (packet,) = read_pcap(path)
    assert packet.ts_ns == 1_700_000_000_123_456_789
    assert packet.quic_long_header is True and packet.quic_type == "initial"
    path.write_bytes(_pcapng([(1_700_000_000_123_456, frame)], tsresol=None))  # default: us
    assert read_pcap(path)[0].ts_ns == 1_700_000_000_123_456_000


def test_link_types_vlan_and_ipv6(tmp_path: Path) -> None:
    ip = _ipv4_tcp(SERVER, CLIENT, b"hello world")
    sll = struct.pack("!HHH8sH", 4, 1, 6, b"\0" * 8, 0x0800) + ip
    sll2 = struct.pack("!HHIHBB8s", 0x0800, 0, 2, 1, 4, 6, b"\0" * 8) + ip
    cases = {1: _ethernet(ip, vlan=100), 113: sll, 276: sll2, 101: ip, 228: ip}
    for linktype, frame in cases.items():
        path = tmp_path / f"{linktype}.pcap"
        path.write_bytes(_pcap([(1, 0, frame)], linktype=linktype))
        (packet,) = read_pcap(path)
        assert (packet.proto, packet.tcp_seq, packet.tcp_ack) == ("tcp", 1000, 2000), linktype
        assert packet.payload_len == 11 and packet.tcp_flags == PSH | ACK
    path = tmp_path / "v6.pcap"
    path.write_bytes(_pcap([(1, 0, _ethernet(_ipv6_udp(QUIC_SHORT), 0x86DD))]))
    (packet,) = read_pcap(path)
    assert (packet.src, packet.dst, packet.ip_id) == ("2001:db8::2", "2001:db8::1", 0)
    assert packet.ip_len == 40 + 8 + len(QUIC_SHORT) and packet.quic_type == "1rtt"


def test_non_ip_fragments_and_cut_files_are_skipped(tmp_path: Path) -> None:
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + bytes(28)
    later_fragment = _ethernet(_ipv4_udp(SERVER, CLIENT, 1, 2, b"x" * 10, fragment=0x0010))
    good = _ethernet(_ipv4_udp(SERVER, CLIENT, 1, 2, b"x" * 10))
    content = _pcap([(1, 0, arp), (2, 0, later_fragment), (3, 0, good), (4, 0, good)])
    path = tmp_path / "cut.pcap"
    path.write_bytes(content[:-5])  # the last record is cut off mid-way
    packets = read_pcap(path)
    assert [p.ts_ns for p in packets] == [3_000_000_000]
    path.write_bytes(b"not a capture file at all")
    with pytest.raises(PcapError, match="not a pcap"):
        read_pcap(path)


def test_snaplen_limits_the_hash_input_not_the_lengths(tmp_path: Path) -> None:
    payload = bytes(range(200))
    frame = _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, payload))
    full, short = tmp_path / "full.pcap", tmp_path / "short.pcap"
    full.write_bytes(_pcap([(1, 0, frame)]))
    short.write_bytes(_pcap([(1, 0, frame)], snaplen=14 + 20 + 8 + HASH_BYTES))
    (a,), (b,) = read_pcap(full), read_pcap(short)
    assert a.payload_len == b.payload_len == 200
    assert a.payload_hash == b.payload_hash  # both hash the first HASH_BYTES bytes
    # the hash is BLAKE2b-64 of those bytes, salted with the payload length (any process)
    expected = hashlib.blake2b(payload[:HASH_BYTES], digest_size=8, salt=(200).to_bytes(8, "big")).digest()
    assert a.payload_hash == int.from_bytes(expected, "big")
    assert payload_hash(payload, 200) != payload_hash(payload, 201)


def test_packet_helpers() -> None:
    packet = Packet(1.0, SERVER, CLIENT, 80, 1234, "tcp", 52, 0, 1, 0, tcp_flags=ACK | PSH)
    assert packet.flow == (SERVER, 80, CLIENT, 1234, "tcp")
    assert packet.has_flags(ACK) and not packet.has_flags(SYN)
    assert flags_text(None) == "" and flags_text(PSH | ACK) == "P."
    later = Packet(1.5, CLIENT, SERVER, 1234, 80, "tcp", 52, 0, 2, 0)
    assert seconds_between(packet, later) == 0.5  # no ts_ns: falls back to ts


def _handshake_packet(body: int) -> bytes:
    """A QUIC v1 Handshake packet (RFC 9000, 17.2.4) with ``body`` bytes after its Length
    field (packet number and protected payload): first byte 0xE0 (long header, fixed bit,
    type 2), version 1, 8-byte connection IDs, a 2-byte Length varint."""
    return (
        bytes([0xE0])
        + (1).to_bytes(4, "big")
        + bytes([8])
        + bytes(range(8))
        + bytes([8])
        + bytes(range(8, 16))
        + bytes([0x40 | body >> 8, body & 0xFF])
        + bytes(body)
    )


def test_a_1rtt_packet_coalesced_after_a_handshake_packet_is_found(tmp_path: Path) -> None:
    handshake = _handshake_packet(22)  # 1 + 4 + 9 + 9 + 2 + 22 = 47 bytes
    assert len(handshake) == 47
    one_rtt = bytes([0x41]) + bytes(range(1, 100))  # 100 bytes, short header
    frames = [
        _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, handshake + one_rtt)),
        _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, handshake)),
        _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, handshake + bytes(20))),  # zero padding after it
        _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, QUIC_SHORT)),
        _ethernet(_ipv4_udp(SERVER, CLIENT, 4433, 5000, QUIC_INITIAL + bytes(1000))),
    ]
    path = tmp_path / "coalesced.pcap"
    path.write_bytes(_pcap([(1, index, frame) for index, frame in enumerate(frames)], snaplen=128))
    coalesced, alone, padded, short, initial = read_pcap(path)
    assert coalesced.quic_type == "handshake" and coalesced.quic_1rtt_len == 100
    assert alone.quic_1rtt_len == 0 and padded.quic_1rtt_len == 0
    assert short.quic_1rtt_len == len(QUIC_SHORT)
    # QUIC_INITIAL's connection IDs, token and Length are all empty: a 9-byte packet; the zero
    # bytes after it are padding, not a packet
    assert initial.quic_1rtt_len == 0
    # a second long header beyond the captured bytes cannot be read: unknown, not guessed
    assert quic_one_rtt_length(handshake[:40], 47 + 100) is None
