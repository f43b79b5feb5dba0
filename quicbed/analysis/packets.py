"""Packets of a capture file: a small pcap / pcap-ng reader for TCP and UDP over IPv4/IPv6.

``read_pcap(path)`` returns one :class:`Packet` per captured TCP or UDP packet (other
protocols, non-first IP fragments and truncated headers are skipped), in file order.
It reads what ``tcpdump -w`` writes (classic pcap, microsecond or nanosecond magic, either
byte order) and pcap-ng (section/interface/enhanced packet blocks, ``if_tsresol`` and
``if_tsoffset``), on Ethernet (with 802.1Q tags), Linux cooked (SLL, SLL2), raw IP and
BSD loopback link types. No third-party dependency.

Matching a packet across two captures (server and client side of a link):

* ``ip_id`` is the IPv4 identification (0 for IPv6). Linux puts a per-socket counter there
  for connected sockets (TCP) even with DF set. For DF packets of unconnected UDP sockets
  (aioquic's) older kernels write 0; the 6.18 kernel of the fixtures writes a per-socket
  counter too. Matching never relies on the ID alone.
* ``payload_hash`` is a stable 64-bit hash (BLAKE2b) of the first :data:`HASH_BYTES` bytes
  of the transport payload as captured (fewer if the payload or the snaplen is shorter),
  combined with the payload length. QUIC payloads are ciphertext, so this identifies a
  datagram; it does not depend on the link type or on header fields a router changes.
  It is *not* Python's salted ``hash()``: it is the same in every process.

QUIC datagrams can coalesce packets (RFC 9000, 12.2): Initial and Handshake packets with
a length field, and a 1-RTT (short-header) packet, which has none and so can only come last.
``quic_1rtt_len`` walks the long headers within the captured bytes to find whether a
datagram ends with a 1-RTT packet and how long it is, so that a Handshake packet in front
of 1-RTT data does not hide the data.

Timestamps: ``ts`` is float seconds since the epoch (a double resolves 0.24 us at
today's epoch) and ``ts_ns`` the exact integer nanoseconds of the file; differences of
close times (inter-packet gaps, one-way delays) should use ``ts_ns``
(:func:`seconds_between`), which keeps microsecond captures exact.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import BinaryIO, Literal

#: transport payload bytes that enter :attr:`Packet.payload_hash`; with snaplen 128 they
#: are captured even behind IPv6 + TCP with timestamps + a Linux SLL2 header (124 bytes).
HASH_BYTES = 32

# TCP flag bits
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80

QUIC_LONG_TYPES = ("initial", "0rtt", "handshake", "retry")  # QUIC v1 long packet types
#: long packet type bits (first byte >> 4 & 3) per QUIC version: v1 (RFC 9000), v2 (RFC 9369)
_QUIC_VERSION_TYPES = {0x00000001: QUIC_LONG_TYPES, 0x6B3343CF: ("retry", "initial", "0rtt", "handshake")}

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

_PCAP_MAGIC = {  # magic as read little-endian -> (byte order, ticks per second)
    0xA1B2C3D4: ("<", 1_000_000),
    0xD4C3B2A1: (">", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000),
    0x4D3CB2A1: (">", 1_000_000_000),
}
_PCAPNG_SHB = 0x0A0D0D0A
_ETHERTYPE_IPV4, _ETHERTYPE_IPV6 = 0x0800, 0x86DD
_VLAN_TYPES = (0x8100, 0x88A8, 0x9100)
_IPV6_EXTENSIONS = (0, 43, 60)  # hop-by-hop, routing, destination options (skipped over)
_IPV6_FRAGMENT = 44


class PcapError(ValueError):
    """The file is not a pcap/pcap-ng capture or is damaged."""


@dataclass(frozen=True, slots=True)
class Packet:
    """One captured TCP or UDP packet.

    ``ip_len`` is the IP total length (IPv4 total length; IPv6 payload length + 40), i.e.
    the packet size without link-layer header; ``payload_len`` the transport payload
    length from the headers (not limited by the snaplen). TCP fields are None for UDP;
    the QUIC fields are None for TCP and for empty UDP payloads.
    """

    ts: float
    src: str
    dst: str
    sport: int
    dport: int
    proto: Literal["udp", "tcp"]
    ip_len: int
    payload_len: int
    ip_id: int
    payload_hash: int
    tcp_flags: int | None = None
    tcp_seq: int | None = None
    tcp_ack: int | None = None
    #: QUIC header form bit (first payload byte & 0x80): True long header, False short
    quic_long_header: bool | None = None
    #: "initial", "0rtt", "handshake", "retry" for long headers (QUIC v1), "1rtt" for short
    quic_type: str | None = None
    #: the capture time in integer nanoseconds since the epoch (None if made by hand)
    ts_ns: int | None = None
    #: bytes of the datagram in its 1-RTT packet: the whole UDP payload for a short header,
    #: the rest after coalesced long-header packets, 0 without one; None when unknown (TCP,
    #: made by hand, or a long header cut off by the snaplen)
    quic_1rtt_len: int | None = None

    @property
    def flow(self) -> tuple[str, int, str, int, str]:
        """(src, sport, dst, dport, proto): the direction-sensitive 5-tuple."""
        return (self.src, self.sport, self.dst, self.dport, self.proto)

    def has_flags(self, flags: int) -> bool:
        """True if this is a TCP packet with all of ``flags`` set."""
        return self.tcp_flags is not None and self.tcp_flags & flags == flags


def read_pcap(path: str | os.PathLike[str]) -> list[Packet]:
    """All TCP/UDP packets of a pcap or pcap-ng file, in file order."""
    packets: list[Packet] = []
    for ts_ns, linktype, frame in iter_frames(path):
        packet = parse_frame(ts_ns, linktype, frame)
        if packet is not None:
            packets.append(packet)
    return packets


def iter_frames(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, bytes]]:
    """(time in ns since the epoch, link type, captured bytes) of every frame of a
    pcap/pcap-ng file."""
    with open(path, "rb") as handle:
        head = handle.read(4)
        if len(head) < 4:
            raise PcapError(f"{path}: too short for a capture file")
        (magic,) = struct.unpack("<I", head)
        if magic == _PCAPNG_SHB:
            yield from _pcapng_frames(handle, head, str(path))
        elif magic in _PCAP_MAGIC:
            yield from _pcap_frames(handle, magic, str(path))
        else:
            raise PcapError(f"{path}: not a pcap or pcap-ng file (magic 0x{magic:08x})")


def _pcap_frames(handle: BinaryIO, magic: int, name: str) -> Iterator[tuple[int, int, bytes]]:
    order, ticks = _PCAP_MAGIC[magic]
    scale = 1_000_000_000 // ticks
    rest = handle.read(20)
    if len(rest) < 20:
        raise PcapError(f"{name}: truncated pcap header")
    _major, _minor, _zone, _sigfigs, _snaplen, linktype = struct.unpack(order + "HHiIII", rest)
    linktype &= 0x0FFFFFFF  # upper bits: FCS length flags
    record = struct.Struct(order + "IIII")
    while True:
        header = handle.read(16)
        if len(header) < 16:
            return  # end of file (a truncated last record header is ignored, as tcpdump does)
        seconds, fraction, caplen, _origlen = record.unpack(header)
        data = handle.read(caplen)
        if len(data) < caplen:
            return  # capture cut off while being written
        yield seconds * 1_000_000_000 + fraction * scale, linktype, data


def _pcapng_frames(handle: BinaryIO, head: bytes, name: str) -> Iterator[tuple[int, int, bytes]]:
    order = "<"
    interfaces: list[tuple[int, Fraction, int]] = []  # (link type, ns per tick, offset ns)
    block_type_raw = head
    while True:
        if len(block_type_raw) < 4:
            return
        length_raw = handle.read(4)
        if len(length_raw) < 4:
            return
        if struct.unpack("<I", block_type_raw)[0] == _PCAPNG_SHB:
            magic_raw = handle.read(4)
            if magic_raw == b"\x4d\x3c\x2b\x1a":
                order = "<"
            elif magic_raw == b"\x1a\x2b\x3c\x4d":
                order = ">"
            else:
                raise PcapError(f"{name}: bad pcap-ng byte-order magic")
            (length,) = struct.unpack(order + "I", length_raw)
            body = magic_raw + handle.read(length - 12)
            interfaces = []  # interface ids are per section
        else:
            (length,) = struct.unpack(order + "I", length_raw)
            body = handle.read(length - 8)
        if length < 12 or len(body) < length - 8:
            return  # truncated block at the end of the file
        (block_type,) = struct.unpack(order + "I", block_type_raw)
        content = body[:-4]  # drop the trailing length copy
        if block_type == 1:  # interface description
            linktype = struct.unpack(order + "H", content[:2])[0]
            interfaces.append((linktype, *_pcapng_interface_clock(content[8:], order)))
        elif block_type == 6:  # enhanced packet
            iface, high, low, caplen, _origlen = struct.unpack(order + "IIIII", content[:20])
            linktype, tick, offset = _interface(interfaces, iface, name)
            yield (int((high << 32 | low) * tick) + offset, linktype, content[20 : 20 + caplen])
        elif block_type == 2:  # obsolete packet block
            iface, _drops, high, low, caplen, _origlen = struct.unpack(order + "HHIIII", content[:20])
            linktype, tick, offset = _interface(interfaces, iface, name)
            yield (int((high << 32 | low) * tick) + offset, linktype, content[20 : 20 + caplen])
        # simple packet blocks carry no timestamp and are skipped, like other blocks
        block_type_raw = handle.read(4)


def _interface(interfaces: list[tuple[int, Fraction, int]], index: int, name: str) -> tuple[int, Fraction, int]:
    if index >= len(interfaces):
        raise PcapError(f"{name}: packet block names interface {index}, which is not described")
    return interfaces[index]


def _pcapng_interface_clock(options: bytes, order: str) -> tuple[Fraction, int]:
    """(nanoseconds per timestamp tick, nanoseconds added) from an IDB's options."""
    tick, offset = Fraction(1000), 0
    position = 0
    while position + 4 <= len(options):
        code, size = struct.unpack(order + "HH", options[position : position + 4])
        value = options[position + 4 : position + 4 + size]
        if code == 0:
            break
        if code == 9 and size >= 1:  # if_tsresol
            resolution = value[0]
            exponent = resolution & 0x7F
            base = 2 if resolution & 0x80 else 10
            tick = Fraction(1_000_000_000, base**exponent)
        elif code == 14 and size >= 8:  # if_tsoffset (seconds)
            offset = struct.unpack(order + "q", value[:8])[0] * 1_000_000_000
        position += 4 + (size + 3) // 4 * 4
    return tick, offset


def parse_frame(ts_ns: int, linktype: int, frame: bytes) -> Packet | None:
    """The TCP/UDP packet in one captured frame (captured at ``ts_ns`` ns since the epoch),
    or None if it carries none."""
    located = _network_layer(linktype, frame)
    if located is None:
        return None
    version, offset = located
    if version == 4:
        return _parse_ipv4(ts_ns, frame, offset)
    return _parse_ipv6(ts_ns, frame, offset)


def _network_layer(linktype: int, frame: bytes) -> tuple[int, int] | None:
    """(IP version, offset of the IP header) in a frame of the given link type."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        offset, ethertype = 14, struct.unpack_from("!H", frame, 12)[0]
        while ethertype in _VLAN_TYPES and len(frame) >= offset + 4:
            ethertype = struct.unpack_from("!H", frame, offset + 2)[0]
            offset += 4
        return _by_ethertype(ethertype, offset)
    if linktype == LINKTYPE_LINUX_SLL:
        if len(frame) < 16:
            return None
        return _by_ethertype(struct.unpack_from("!H", frame, 14)[0], 16)
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(frame) < 20:
            return None
        return _by_ethertype(struct.unpack_from("!H", frame, 0)[0], 20)
    if linktype in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return _by_version(frame, 0)
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        return _by_version(frame, 4)  # the 4-byte address family says no more than the header
    return None


def _by_ethertype(ethertype: int, offset: int) -> tuple[int, int] | None:
    if ethertype == _ETHERTYPE_IPV4:
        return 4, offset
    if ethertype == _ETHERTYPE_IPV6:
        return 6, offset
    return None


def _by_version(frame: bytes, offset: int) -> tuple[int, int] | None:
    if len(frame) <= offset:
        return None
    version = frame[offset] >> 4
    return (version, offset) if version in (4, 6) else None


def _parse_ipv4(ts_ns: int, frame: bytes, offset: int) -> Packet | None:
    if len(frame) < offset + 20:
        return None
    first, _tos, total, ident, fragment, _ttl, proto = struct.unpack_from("!BBHHHBB", frame, offset)
    header_len = (first & 0x0F) * 4
    if fragment & 0x1FFF:  # not the first fragment: no transport header
        return None
    src = socket.inet_ntop(socket.AF_INET, frame[offset + 12 : offset + 16])
    dst = socket.inet_ntop(socket.AF_INET, frame[offset + 16 : offset + 20])
    return _parse_transport(ts_ns, frame, offset + header_len, proto, total - header_len, src, dst, total, ident)


def _parse_ipv6(ts_ns: int, frame: bytes, offset: int) -> Packet | None:
    if len(frame) < offset + 40:
        return None
    payload_length, next_header = struct.unpack_from("!HB", frame, offset + 4)
    src = socket.inet_ntop(socket.AF_INET6, frame[offset + 8 : offset + 24])
    dst = socket.inet_ntop(socket.AF_INET6, frame[offset + 24 : offset + 40])
    position, remaining = offset + 40, payload_length
    while next_header in _IPV6_EXTENSIONS or next_header == _IPV6_FRAGMENT:
        if len(frame) < position + 8:
            return None
        if next_header == _IPV6_FRAGMENT:
            if struct.unpack_from("!H", frame, position + 2)[0] & 0xFFF8:
                return None  # not the first fragment
            size = 8
        else:
            size = (frame[position + 1] + 1) * 8
        next_header = frame[position]
        position += size
        remaining -= size
    return _parse_transport(ts_ns, frame, position, next_header, remaining, src, dst, payload_length + 40, 0)


def _parse_transport(
    ts_ns: int, frame: bytes, offset: int, proto: int, length: int, src: str, dst: str, ip_len: int, ip_id: int
) -> Packet | None:
    if proto == 17:
        if len(frame) < offset + 8:
            return None
        sport, dport = struct.unpack_from("!HH", frame, offset)
        payload_len = max(0, length - 8)
        captured = frame[offset + 8 : offset + 8 + payload_len]
        payload = captured[:HASH_BYTES]
        long_header: bool | None = None
        quic_type: str | None = None
        one_rtt: int | None = None
        if payload:
            long_header = bool(payload[0] & 0x80)
            quic_type = QUIC_LONG_TYPES[(payload[0] >> 4) & 0x03] if long_header else "1rtt"
            one_rtt = quic_one_rtt_length(captured, payload_len)
        return Packet(
            ts_ns / 1e9,
            src,
            dst,
            sport,
            dport,
            "udp",
            ip_len,
            payload_len,
            ip_id,
            payload_hash(payload, payload_len),
            quic_long_header=long_header,
            quic_type=quic_type,
            ts_ns=ts_ns,
            quic_1rtt_len=one_rtt,
        )
    if proto == 6:
        if len(frame) < offset + 14:
            return None
        sport, dport, seq, ack, data_offset, flags = struct.unpack_from("!HHIIBB", frame, offset)
        header_len = (data_offset >> 4) * 4
        payload_len = max(0, length - header_len)
        start = offset + header_len
        payload = frame[start : start + min(payload_len, HASH_BYTES)]
        return Packet(
            ts_ns / 1e9,
            src,
            dst,
            sport,
            dport,
            "tcp",
            ip_len,
            payload_len,
            ip_id,
            payload_hash(payload, payload_len),
            tcp_flags=flags,
            tcp_seq=seq,
            tcp_ack=ack,
            ts_ns=ts_ns,
        )
    return None


def _varint(data: bytes, offset: int) -> tuple[int, int] | None:
    """(value, bytes used) of the QUIC variable-length integer at ``offset``, or None if cut off."""
    if offset >= len(data):
        return None
    size = 1 << (data[offset] >> 6)
    if offset + size > len(data):
        return None
    value = data[offset] & 0x3F
    for byte in data[offset + 1 : offset + size]:
        value = value << 8 | byte
    return value, size


def _long_packet_length(data: bytes, offset: int) -> int | None:
    """Bytes of the long-header packet at ``offset`` (header + its Length field's payload); the
    rest of the datagram for Retry and Version Negotiation, which have no length; None when a
    field lies beyond the captured bytes or the version is unknown."""
    if offset + 6 > len(data):
        return None
    version = int.from_bytes(data[offset + 1 : offset + 5], "big")
    if version == 0:  # version negotiation
        return len(data) - offset
    types = _QUIC_VERSION_TYPES.get(version)
    if types is None:
        return None
    position = offset + 5
    for _ in range(2):  # destination and source connection IDs
        if position >= len(data):
            return None
        position += 1 + data[position]
    kind = types[(data[offset] >> 4) & 0x03]
    if kind == "retry":
        return None
    if kind == "initial":
        token = _varint(data, position)
        if token is None:
            return None
        position += token[1] + token[0]
    length = _varint(data, position)
    if length is None:
        return None
    return position + length[1] + length[0] - offset


def quic_one_rtt_length(captured: bytes, payload_len: int) -> int | None:
    """Bytes of a UDP datagram (``captured``: its payload as captured, ``payload_len`` its full
    length) that belong to a QUIC 1-RTT packet.

    A datagram starting with a short header is one 1-RTT packet. Otherwise its long-header
    packets are walked by their Length fields; what remains is a coalesced 1-RTT packet
    (RFC 9000, 12.2: it has no length field, so it comes last), unless it starts with a zero
    byte (padding after the last packet, which no QUIC packet starts with). 0 when the
    datagram holds no 1-RTT packet; None when a long header lies beyond the captured bytes.
    """
    if not captured:
        return None
    offset = 0
    while offset < payload_len:
        if offset >= len(captured):
            return None
        first = captured[offset]
        if not first & 0x80:
            return payload_len - offset if offset == 0 or first else 0
        size = _long_packet_length(captured, offset)
        if size is None:
            return None
        offset += size
    return 0


def payload_hash(captured: bytes, payload_len: int) -> int:
    """64-bit BLAKE2b of the payload's length and its first :data:`HASH_BYTES` captured bytes."""
    digest = hashlib.blake2b(captured[:HASH_BYTES], digest_size=8, salt=payload_len.to_bytes(8, "big"))
    return int.from_bytes(digest.digest(), "big")


def seconds_between(earlier: Packet, later: Packet) -> float:
    """``later.ts - earlier.ts`` in seconds, exact from ``ts_ns`` when both have it."""
    if earlier.ts_ns is not None and later.ts_ns is not None:
        return (later.ts_ns - earlier.ts_ns) / 1e9
    return later.ts - earlier.ts


def flags_text(flags: int | None) -> str:
    """TCP flags as tcpdump prints them: 'S', 'S.', '.', 'P.', 'F.', 'R' ... ('' for UDP)."""
    if flags is None:
        return ""
    text = "".join(
        letter
        for bit, letter in ((SYN, "S"), (FIN, "F"), (PSH, "P"), (RST, "R"), (URG, "U"), (ECE, "E"), (CWR, "W"))
        if flags & bit
    )
    return text + "." if flags & ACK else text


__all__ = [
    "ACK",
    "FIN",
    "HASH_BYTES",
    "PSH",
    "RST",
    "SYN",
    "Packet",
    "PcapError",
    "flags_text",
    "iter_frames",
    "parse_frame",
    "payload_hash",
    "quic_one_rtt_length",
    "read_pcap",
    "seconds_between",
]
