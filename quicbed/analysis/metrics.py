"""Per-run metrics from the server-side and client-side captures of one download.

The two captures of a run share one clock (emulation: one kernel), so a packet's one-way
delay is exact. Functions here are pure: they take lists of :class:`Packet` (from
:func:`quicbed.analysis.packets.read_pcap`) or arrays and return numbers or arrays; the
definitions are in their docstrings and in ``docs/metrics.md``. What the network did to each
packet between the two captures (losses, one-way delays, reordering, TCP's retransmissions) is
in :mod:`quicbed.analysis.matching`.

Vocabulary:

* the **data flow** is the server -> client direction of the download (5-tuple
  ``(src, sport, dst, dport, proto)``), the **reverse flow** its client -> server direction;
* a **data packet** is a packet of the data flow that carries transport payload after the
  connection set-up: TCP segments with payload (SYN/FIN/RST segments without payload are
  not data); QUIC datagrams whose 1-RTT packet (alone, or coalesced after Handshake
  packets) is larger than :data:`QUIC_ACK_ONLY_MAX` bytes. QUIC encrypts its frames, so a
  capture cannot tell an ACK-only datagram of the sender from a small data datagram;
  the sender's own ACK-only 1-RTT datagrams acknowledge the few packets the receiver sends
  and stay small (1 + 8-byte connection ID + packet number + a one-range ACK frame + 16-byte
  AEAD tag <= 44 bytes). Long-header packets are set-up, never data;
* the **response window** of a connection starts with the response's first data packet:
  the first one after the client sent its first request on it (the client record's
  ``started_at`` plus the object's ``start``, on the captures' clock) that is not a small
  leftover of the handshake; data packets before it are handshake data (TCP's TLS flight
  and session tickets, QUIC's 0.5-RTT packets and HANDSHAKE_DONE), not the download
  (:func:`request_time`, :func:`response_data`);
* an **ACK packet** is any packet of the reverse flow that carries an acknowledgement: TCP
  segments without payload and without SYN/FIN/RST; every QUIC 1-RTT packet of the
  receiver, whatever its size (a receiver of a download sends ACK frames, with as many
  ranges as its losses left, and the flow-control credit it bundles with them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis.matching import loss_bursts, lost_packets, match, one_way_delays, out_of_order_counts
from quicbed.analysis.packets import FIN, RST, SYN, Packet, seconds_between

#: a sender's QUIC 1-RTT packets of at most this many bytes are taken for ACK-only packets
QUIC_ACK_ONLY_MAX = 48
#: inter-packet gaps below this many seconds count as "back to back" (the studies' threshold)
SHORT_GAP = 100e-6
#: window sizes reported for the index of dispersion for intervals
IDI_KS = (1, 2, 5, 10, 20, 50, 100)

FlowKey = tuple[str, int, str, int, str]  # (src, sport, dst, dport, proto)


# --------------------------------------------------------------------------- flows


def flow_bytes(packets: Iterable[Packet]) -> dict[FlowKey, int]:
    """Transport payload bytes per direction-sensitive 5-tuple."""
    totals: dict[FlowKey, int] = defaultdict(int)
    for packet in packets:
        totals[packet.flow] += packet.payload_len
    return dict(totals)


def data_flows(packets: Iterable[Packet], min_bytes: int = 10_000) -> list[FlowKey]:
    """The download directions of a capture, largest first: directions with at least
    ``min_bytes`` of payload and more payload than their reverse direction."""
    totals = flow_bytes(packets)
    return [
        key
        for key, total in sorted(totals.items(), key=lambda item: -item[1])
        if total >= min_bytes and total > totals.get(reverse(key), 0)
    ]


def main_flow(packets: Sequence[Packet]) -> FlowKey:
    """The data flow of a single-download capture: the direction with the most payload."""
    totals = flow_bytes(packets)
    if not totals:
        raise ValueError("no TCP or UDP packets in the capture")
    return max(totals, key=lambda key: totals[key])


def reverse(flow: FlowKey) -> FlowKey:
    """The other direction of a flow."""
    src, sport, dst, dport, proto = flow
    return (dst, dport, src, sport, proto)


def of_flow(packets: Iterable[Packet], flow: FlowKey) -> list[Packet]:
    """The packets of one direction, in capture order."""
    return [packet for packet in packets if packet.flow == flow]


def download_flows(
    packets: Iterable[Packet], port: int, address: str | None = None, proto: str | None = None
) -> list[FlowKey]:
    """Every connection of one download in a client capture: the directions that carry data
    packets from the server's ``port`` (and ``address``, ``proto`` when given), in the order
    they started. An HTTP/1.1 page uses several connections; a small object's flow counts
    however small it is (no size threshold that would pick another flow instead)."""
    flows: dict[FlowKey, None] = {}
    for packet in packets:
        if (
            packet.sport == port
            and (address is None or packet.src == address)
            and (proto is None or packet.proto == proto)
            and is_data(packet)
        ):
            flows.setdefault(packet.flow)
    return list(flows)


def quic_one_rtt_bytes(packet: Packet) -> int:
    """Bytes of a UDP datagram in its QUIC 1-RTT packet (:attr:`Packet.quic_1rtt_len`; for a
    packet made without it, the whole payload of a short-header datagram, else 0)."""
    if packet.quic_1rtt_len is not None:
        return packet.quic_1rtt_len
    return packet.payload_len if packet.quic_long_header is False else 0


def is_data(packet: Packet) -> bool:
    """True if ``packet`` is a data packet (module docstring)."""
    if packet.proto == "tcp":
        return packet.payload_len > 0 and not (packet.tcp_flags or 0) & (SYN | RST)
    return quic_one_rtt_bytes(packet) > QUIC_ACK_ONLY_MAX


def data_packets(packets: Iterable[Packet], flow: FlowKey) -> list[Packet]:
    """The data packets of ``flow`` in capture order."""
    return [packet for packet in packets if packet.flow == flow and is_data(packet)]


def is_ack(packet: Packet) -> bool:
    """True for a reverse-flow packet that carries an acknowledgement: a TCP segment without
    payload and without SYN/FIN/RST; any QUIC datagram with a 1-RTT packet, whatever its size
    (ACK frames grow with every range a loss leaves, with ECN counts and with the MAX_DATA
    a receiver bundles; a size limit would miss exactly the ACKs sent under loss)."""
    if packet.proto == "tcp":
        return packet.payload_len == 0 and not (packet.tcp_flags or 0) & (SYN | FIN | RST)
    return quic_one_rtt_bytes(packet) > 0


def request_time(record: Mapping[str, Any] | None, local_port: int | None = None) -> float | None:
    """When the client sent its first request, in epoch seconds (the captures' clock).

    quicbed's clients record ``started_at`` (wall clock) and per object its ``start``
    (seconds from ``started_at``); the TCP client also names each object's ``connection``
    (its local port). With ``local_port``, the first request on that connection (an HTTP/1.1
    page spreads its objects over several); the record's first request when no object names
    it. None when the record has no such times (curl's own ``-w '%{json}'`` output).
    """
    if not record or not isinstance(record.get("started_at"), (int, float)):
        return None
    timed = [item for item in record.get("objects") or [] if isinstance(item.get("start"), (int, float))]
    mine = [item for item in timed if local_port is not None and item.get("connection") == local_port]
    chosen = mine or timed
    if not chosen:
        return None
    return float(record["started_at"]) + min(float(item["start"]) for item in chosen)


def response_data(data: Sequence[Packet], start: float | None) -> list[Packet]:
    """The data packets of the response: from the first data packet captured at or after
    ``start`` (the request time) that is at least half as large as the median data packet
    from ``start`` on. ``start`` None (the record does not say): every data packet.

    Before the request the server sends only handshake data (TCP: the TLS ServerHello
    flight; QUIC: 0.5-RTT packets such as HTTP/3 SETTINGS), one round trip or more before
    the response, which would stretch a short download's window. Just after the request it
    can still send the handshake's tail: TLS 1.3 session tickets (OpenSSL sends them when
    the client's Finished arrives, often with the request) and QUIC's HANDSHAKE_DONE,
    NEW_TOKEN and tickets (when the client's Finished and request travel apart, which one
    wins is a race), a few hundred bytes each, a server processing time (aioquic: several
    milliseconds) before the response. The response's first packet is full-size unless the
    whole response fits in less than a packet (then the median is small too, and the
    handshake's tail may stay in the window); half the median leaves room for packets
    smaller than the rest (QUIC before its path-MTU probe has raised the size). A response
    whose header goes in a small packet of its own (not quicbed's servers) starts one packet
    later.
    """
    if start is None:
        return list(data)
    after = [packet for packet in data if packet.ts >= start]
    if not after:
        return []
    sizes = sorted(packet.payload_len for packet in after)
    full = sizes[len(sizes) // 2]
    first = next(index for index, packet in enumerate(after) if 2 * packet.payload_len >= full)
    return after[first:]


# --------------------------------------------------------------------------- throughput


def transfer_time(data: Sequence[Packet]) -> float:
    """Seconds from the first to the last data packet (``data`` from :func:`data_packets`)."""
    if len(data) < 2:
        return math.nan
    return seconds_between(data[0], data[-1])


def throughput(data: Sequence[Packet], app_bytes: int | None = None) -> float:
    """Throughput in bit/s, connection set-up excluded.

    ``8 * B / (t_last - t_first)`` where ``t_first``/``t_last`` are the capture times of the
    first and last data packet and ``B`` is ``app_bytes`` (application bytes, e.g. the
    client record's ``bytes``) when given, else the IP bytes of all data packets
    (retransmissions included: on a capture at the client that is what the link carried).
    IP bytes, headers included, are the one measure TCP and QUIC share: the transport payload
    would count QUIC's packet headers and AEAD tags (about 3 % of a full packet) but only
    TLS's record overhead of TCP (about 0.1 %). Goodput, from the application's bytes, stays
    the headline.
    """
    duration = transfer_time(data)
    if not duration > 0:
        return math.nan
    total = app_bytes if app_bytes is not None else sum(p.ip_len for p in data)
    return 8.0 * total / duration


def binned_throughput(data: Sequence[Packet], bin_width: float = 0.05, start: float | None = None) -> pd.DataFrame:
    """Throughput in consecutive bins of ``bin_width`` seconds.

    Columns: ``time`` (bin start, seconds from ``start``, default the first packet),
    ``bytes`` (IP bytes of the packets captured in the bin, as :func:`throughput`) and ``throughput``
    (``8 * bytes / bin_width`` bit/s). Bins run from ``start`` to the last packet; empty
    bins are kept (0).
    """
    if not data:
        return pd.DataFrame({"time": [], "bytes": [], "throughput": []})
    times = _offsets(data, start)
    sizes = np.array([p.ip_len for p in data], dtype=float)
    count = math.floor(times.max() / bin_width) + 1
    index = np.clip(np.floor(times / bin_width).astype(int), 0, None)
    totals = np.bincount(index, weights=sizes, minlength=count)[:count]
    return pd.DataFrame(
        {"time": np.round(np.arange(count) * bin_width, 9), "bytes": totals, "throughput": 8.0 * totals / bin_width}
    )


def _offsets(packets: Sequence[Packet], start: float | None = None) -> np.ndarray:
    """Seconds from ``start`` (default: the first packet, exactly) to each packet."""
    if start is None:
        return np.array([seconds_between(packets[0], p) for p in packets], dtype=float)
    return np.array([p.ts - start for p in packets], dtype=float)


#: the clients whose records quicbed writes (its TCP client also when it runs curl)
QUICBED_CLIENTS = ("quicbed-quic-client", "quicbed-tcp-client")


def download_time(record: Mapping[str, Any]) -> float:
    """Download time in seconds from a client record: request start to last byte.

    quicbed's HTTP/3 and TCP clients: ``completion_time`` (first request sent -> last byte).
    curl's ``-w '%{json}'``: ``time_total - time_pretransfer`` (request about to be sent ->
    last byte), so that both exclude the connection set-up.
    """
    if record.get("tool") in QUICBED_CLIENTS:
        value = record.get("completion_time")
        return math.nan if value is None else float(value)
    if "time_total" in record and "time_pretransfer" in record:
        return float(record["time_total"]) - float(record["time_pretransfer"])
    raise ValueError("not a quicbed HTTP/3 client record nor curl -w '%{json}' output")


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def connect_time(record: Mapping[str, Any]) -> float:
    """Connection set-up in seconds: the first connection's first packet (its SYN or QUIC
    Initial) to its handshake done (TCP connect and TLS, or QUIC's), at the client.

    quicbed's clients: ``handshake_time`` (counted from the connect call that sends that
    packet). curl's ``-w '%{json}'``: ``time_appconnect`` (``time_connect`` without TLS).
    NaN when the record has neither.
    """
    if record.get("tool") in QUICBED_CLIENTS:
        return _seconds(record.get("handshake_time"))
    appconnect = _seconds(record.get("time_appconnect"))
    return appconnect if appconnect > 0 else _seconds(record.get("time_connect"))


def first_byte_time(record: Mapping[str, Any]) -> float:
    """Time to first byte in seconds, connection set-up included: the first connection's first
    packet to the first response byte. (The record's own ``ttfb`` counts from the first
    request.) quicbed's clients: the earliest object's ``first_byte`` (offsets from that first
    packet); curl: ``time_starttransfer``."""
    if record.get("tool") in QUICBED_CLIENTS:
        firsts = [_seconds(item.get("first_byte")) for item in record.get("objects") or []]
        firsts = [value for value in firsts if not math.isnan(value)]
        return min(firsts) if firsts else math.nan
    return _seconds(record.get("time_starttransfer"))


def total_time(record: Mapping[str, Any]) -> float:
    """The whole exchange in seconds: the first connection's first packet to the last byte of
    the last object (a page's load time with its connections' set-up). quicbed's clients:
    ``total_time``; curl: ``time_total``."""
    key = "total_time" if record.get("tool") in QUICBED_CLIENTS else "time_total"
    return _seconds(record.get(key))


def app_bytes(record: Mapping[str, Any] | None) -> int | None:
    """The application bytes a client record counts: ``bytes`` of quicbed's clients (response
    bodies), ``size_download`` of curl; None when it has neither."""
    if not record:
        return None
    for name in ("bytes", "size_download"):
        if record.get(name):
            return int(record[name])
    return None


def goodput(record: Mapping[str, Any]) -> float:
    """Goodput in bit/s from a client record: ``8 * app_bytes / download_time`` (application
    bytes from the first request to the last byte, connection set-up excluded). NaN when the
    record lacks either."""
    size = app_bytes(record)
    seconds = download_time(record)
    if size is None or not seconds > 0:
        return math.nan
    return 8.0 * size / seconds


# --------------------------------------------------------------------------- timing


def inter_packet_times(data: Sequence[Packet]) -> np.ndarray:
    """Gaps (s) between consecutive packets in capture order: inter-departure times on the
    server capture, inter-arrival times on the client capture. ``len(data) - 1`` values."""
    return np.array([seconds_between(a, b) for a, b in pairwise(data)], dtype=float)


def short_gap_share(gaps: Sequence[float] | np.ndarray, threshold: float = SHORT_GAP) -> float:
    """Share of gaps strictly below ``threshold`` seconds (default 100 us): packets sent or
    received back to back."""
    values = np.asarray(gaps, dtype=float)
    return float(np.mean(values < threshold)) if values.size else math.nan


def idi(intervals: Sequence[float] | np.ndarray, k: int) -> float:
    """Index of dispersion for intervals (Gusella 1991) at lag ``k``.

    ``IDI_k = Var(S_k) / (k * E[X]^2)`` with ``X_i`` the inter-packet intervals and
    ``S_k = X_i + ... + X_{i+k-1}`` the sum of ``k`` consecutive intervals. Estimated over
    all (overlapping) windows of ``k`` consecutive intervals, unbiased variance
    (``ddof=1``), ``E[X]`` the mean of all intervals. ``IDI_1`` is the squared coefficient
    of variation. A Poisson process has ``IDI_k = 1`` for every ``k``; equally spaced
    packets have 0. Bursts (short gaps alternating with long ones) give a large
    ``IDI_1``; the curve grows with ``k`` when intervals are positively correlated (runs
    of short gaps, then runs of long ones, of varying length) and falls toward 0 once
    ``k`` spans whole periods of a regular on/off pattern. NaN if fewer than ``k + 1``
    intervals.
    """
    values = np.asarray(intervals, dtype=float)
    if k < 1:
        raise ValueError("k must be at least 1")
    if values.size < k + 1:
        return math.nan
    mean = values.mean()
    if mean <= 0:
        return math.nan
    sums = np.convolve(values, np.ones(k), mode="valid")  # all windows of k intervals
    return float(sums.var(ddof=1) / (k * mean * mean))


def idi_curve(intervals: Sequence[float] | np.ndarray, ks: Iterable[int] = IDI_KS) -> pd.DataFrame:
    """:func:`idi` for each ``k`` that the data allow (columns ``k``, ``idi``)."""
    values = np.asarray(intervals, dtype=float)
    rows = [(k, idi(values, k)) for k in ks if values.size >= k + 1]
    return pd.DataFrame(rows, columns=["k", "idi"])


def ack_ratio(packets: Sequence[Packet], flow: FlowKey, start: float | None = None) -> float:
    """ACK frequency: acknowledgement packets of the reverse flow per data packet.

    ``N_ack / N_data`` with ``N_data`` the data packets of ``flow`` in the response window
    (from ``start``, the request time; None: all) and ``N_ack`` the packets of the reverse
    flow for which :func:`is_ack` holds, captured from the first of those data packets on
    (earlier ones acknowledge the handshake). On either capture: with no loss between the
    capture points both see the same packets. ~0.5 for ACK every second packet, ~0.1 for
    BQUIC's every tenth.
    """
    acks, data = ack_counts(packets, flow, start)
    return acks / data if data else math.nan


def ack_counts(packets: Sequence[Packet], flow: FlowKey, start: float | None = None) -> tuple[int, int]:
    """(ACK packets, data packets) of :func:`ack_ratio`, to pool over connections."""
    data = response_data(data_packets(packets, flow), start)
    if not data:
        return 0, 0
    first = data[0].ts
    back = reverse(flow)
    acks = sum(1 for p in packets if p.flow == back and p.ts >= first and is_ack(p))
    return acks, len(data)


# --------------------------------------------------------------------------- diagrams


def sequence_frame(server: Sequence[Packet], client: Sequence[Packet], flow: FlowKey) -> pd.DataFrame:
    """Tidy rows for a sequence/ACK (time-sequence) diagram of one run.

    Columns: ``time`` (s since the first data packet at the server), ``offset`` (bytes),
    ``kind``: ``sent`` (data packet at the server), ``received`` (at the client),
    ``lost`` (sent, never received), ``ack`` (reverse-flow ACK at the client).
    TCP offsets are sequence and acknowledgement numbers relative to the first data byte.
    QUIC hides both, so a data packet's offset is the payload the server had sent before
    it (a retransmission gets a new offset) and an ACK's offset is the payload received
    at the client up to that moment.
    """
    data = data_packets(server, flow)
    if not data:
        return pd.DataFrame({"time": [], "offset": [], "kind": []})
    origin = data[0].ts
    arrivals = data_packets(client, flow)
    matched = match(data, arrivals)
    rows: list[tuple[float, float, str]] = []
    tcp = flow[4] == "tcp"
    base = data[0].tcp_seq or 0

    def offset_of(packet: Packet, running: int) -> int:
        return ((packet.tcp_seq or 0) - base) % (1 << 32) if tcp else running

    running = 0
    offsets: list[int] = []
    for packet, index in zip(data, matched, strict=True):
        offset = offset_of(packet, running)
        offsets.append(offset)
        running += packet.payload_len
        rows.append((packet.ts - origin, offset, "sent" if index is not None else "lost"))
    received_offset = {index: offset for offset, index in zip(offsets, matched, strict=True) if index is not None}
    for index, packet in enumerate(arrivals):
        if index in received_offset:
            rows.append((packet.ts - origin, received_offset[index], "received"))
    received_bytes = 0
    back = reverse(flow)
    for packet in client:
        if packet.flow == flow and is_data(packet):
            received_bytes += packet.payload_len
        elif packet.flow == back and is_ack(packet) and packet.ts >= origin:
            value = ((packet.tcp_ack or 0) - base) % (1 << 32) if tcp else received_bytes
            rows.append((packet.ts - origin, value, "ack"))
    return pd.DataFrame(rows, columns=["time", "offset", "kind"])


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class ConnectionMetrics:
    """One connection of a download (an HTTP/1.1 page has several), over its response window."""

    flow: FlowKey
    request_time: float | None  # epoch s; None when the record does not say
    data_packets_sent: int
    data_packets_received: int
    payload_bytes: int  # transport payload received
    lost: int
    first: float  # epoch s of the first and last data packet received
    last: float
    transfer_time: float
    throughput: float
    owd_mean: float
    ack_ratio: float


@dataclass(frozen=True)
class RunMetrics:
    """The scalar metrics of one download (units: s, bit/s, shares in [0, 1]); with several
    connections, over all of them (``connections`` keeps each one's own figures)."""

    proto: str
    data_packets_sent: int
    data_packets_received: int
    throughput: float  # client capture, transport payload over the combined response window
    goodput: float  # the record's application bytes over its download time, else NaN
    transfer_time: float  # client capture, first to last data packet of the download
    download_time: float  # client record
    loss: float
    loss_burst_mean: float  # packets; NaN without loss
    owd_mean: float
    owd_median: float
    owd_p95: float
    ipt_server_short_share: float
    ipt_client_short_share: float
    idi_server: dict[int, float]
    idi_client: dict[int, float]
    out_of_order: float
    ack_ratio: float
    connections: tuple[ConnectionMetrics, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Window:
    """The response-window data packets of one connection at both capture points."""

    flow: FlowKey
    start: float | None
    sent: list[Packet]
    received: list[Packet]


def _window(
    server: Sequence[Packet], client: Sequence[Packet], flow: FlowKey, record: Mapping[str, Any] | None
) -> _Window:
    start = request_time(record, flow[3])
    return _Window(
        flow, start, response_data(data_packets(server, flow), start), response_data(data_packets(client, flow), start)
    )


def _capture_order(packets: Iterable[Packet]) -> list[Packet]:
    """Packets of several flows merged in capture order (exact nanoseconds when known)."""
    return sorted(packets, key=lambda p: p.ts_ns if p.ts_ns is not None else round(p.ts * 1e9))


def _connection_metrics(window: _Window, client: Sequence[Packet]) -> ConnectionMetrics:
    delays = one_way_delays(window.sent, window.received)
    received = window.received
    return ConnectionMetrics(
        flow=window.flow,
        request_time=window.start,
        data_packets_sent=len(window.sent),
        data_packets_received=len(received),
        payload_bytes=sum(p.payload_len for p in received),
        lost=len(lost_packets(window.sent, received)),
        first=received[0].ts if received else math.nan,
        last=received[-1].ts if received else math.nan,
        transfer_time=transfer_time(received),
        throughput=throughput(received),
        owd_mean=float(np.nanmean(delays)) if np.any(~np.isnan(delays)) else math.nan,
        ack_ratio=ack_ratio(client, window.flow, window.start),
    )


def run_metrics(
    server: Sequence[Packet],
    client: Sequence[Packet],
    record: Mapping[str, Any] | None = None,
    flow: FlowKey | None = None,
    ks: Iterable[int] = IDI_KS,
    flows: Sequence[FlowKey] | None = None,
) -> RunMetrics:
    """All scalar metrics of one run from its two captures (and the client record).

    ``flows``: every connection of the download (:func:`download_flows`); else ``flow``, else
    the capture's largest flow. Each connection's data packets are taken from its request
    on (:func:`response_data`, the record's request times). Over all connections: bytes and
    packets summed and the window from the first to the last data packet of any of them
    (throughput, transfer time), losses and ACKs summed, one-way delays pooled, inter-packet
    times of the merged packet stream (what the server sent towards this client and what
    arrived), out-of-order counts summed per connection.
    """
    keys = list(flows) if flows else [flow if flow is not None else main_flow(client)]
    windows = [_window(server, client, key, record) for key in keys]
    sent = _capture_order(p for w in windows for p in w.sent)
    received = _capture_order(p for w in windows for p in w.received)
    delays = np.concatenate([one_way_delays(w.sent, w.received) for w in windows])
    delays = delays[~np.isnan(delays)]
    bursts = [length for w in windows for length in loss_bursts(w.sent, w.received)]
    lost = sum(len(lost_packets(w.sent, w.received)) for w in windows)
    late, matched = map(sum, zip(*(out_of_order_counts(w.sent, w.received) for w in windows), strict=True))
    acks, counted = map(sum, zip(*(ack_counts(client, w.flow, w.start) for w in windows), strict=True))
    ipt_server, ipt_client = inter_packet_times(sent), inter_packet_times(received)
    ks = list(ks)

    def quantile(q: float) -> float:
        return float(np.quantile(delays, q)) if delays.size else math.nan

    return RunMetrics(
        proto=keys[0][4],
        data_packets_sent=len(sent),
        data_packets_received=len(received),
        throughput=throughput(received),
        goodput=goodput(record) if record and app_bytes(record) is not None else math.nan,
        transfer_time=transfer_time(received),
        download_time=download_time(record) if record else math.nan,
        loss=lost / len(sent) if sent else math.nan,
        loss_burst_mean=float(np.mean(bursts)) if bursts else math.nan,
        owd_mean=float(delays.mean()) if delays.size else math.nan,
        owd_median=quantile(0.5),
        owd_p95=quantile(0.95),
        ipt_server_short_share=short_gap_share(ipt_server),
        ipt_client_short_share=short_gap_share(ipt_client),
        idi_server={k: idi(ipt_server, k) for k in ks},
        idi_client={k: idi(ipt_client, k) for k in ks},
        out_of_order=late / matched if matched else math.nan,
        ack_ratio=acks / counted if counted else math.nan,
        connections=tuple(_connection_metrics(w, client) for w in windows),
    )


__all__ = [
    "IDI_KS",
    "QUIC_ACK_ONLY_MAX",
    "SHORT_GAP",
    "ConnectionMetrics",
    "FlowKey",
    "RunMetrics",
    "ack_counts",
    "ack_ratio",
    "app_bytes",
    "binned_throughput",
    "data_flows",
    "data_packets",
    "download_flows",
    "download_time",
    "flow_bytes",
    "goodput",
    "idi",
    "idi_curve",
    "inter_packet_times",
    "is_ack",
    "is_data",
    "main_flow",
    "of_flow",
    "quic_one_rtt_bytes",
    "request_time",
    "response_data",
    "reverse",
    "run_metrics",
    "sequence_frame",
    "short_gap_share",
    "throughput",
    "transfer_time",
]
