"""Per-run metrics from the server-side and client-side captures of one download.

The two captures of a run share one clock (emulation: one kernel), so a packet's one-way
delay is exact. Functions here are pure: they take lists of :class:`Packet` (from
:func:`quicbed.analysis.packets.read_pcap`) or arrays and return numbers or arrays; the
definitions are in their docstrings and in ``docs/metrics.md``.

Vocabulary:

* the **data flow** is the server -> client direction of the download (5-tuple
  ``(src, sport, dst, dport, proto)``), the **reverse flow** its client -> server direction;
* a **data packet** is a packet of the data flow that carries transport payload after the
  connection set-up: TCP segments with payload (SYN/FIN/RST segments without payload are
  not data); QUIC short-header (1-RTT) datagrams with a UDP payload larger than
  :data:`QUIC_ACK_ONLY_MAX` bytes. QUIC encrypts its frames, so a capture cannot tell an
  ACK-only datagram from a small data datagram; ACK-only 1-RTT datagrams are 1 (flags) +
  connection ID (8 with aioquic) + 1-4 (packet number) + the ACK frame (5-15 bytes with a
  few ranges) + 16 (AEAD tag) <= 44 bytes, so 48 separates them with a margin. Handshake
  (long-header) datagrams are set-up, never data.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis.packets import FIN, RST, SYN, Packet, seconds_between

#: UDP payloads of at most this many bytes are taken for QUIC ACK-only datagrams
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
    return [key for key, total in sorted(totals.items(), key=lambda item: -item[1])
            if total >= min_bytes and total > totals.get(reverse(key), 0)]


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


def is_data(packet: Packet) -> bool:
    """True if ``packet`` is a data packet (module docstring)."""
    if packet.proto == "tcp":
        return packet.payload_len > 0 and not (packet.tcp_flags or 0) & (SYN | RST)
    return packet.quic_long_header is False and packet.payload_len > QUIC_ACK_ONLY_MAX


def data_packets(packets: Iterable[Packet], flow: FlowKey) -> list[Packet]:
    """The data packets of ``flow`` in capture order."""
    return [packet for packet in packets if packet.flow == flow and is_data(packet)]


def is_ack(packet: Packet) -> bool:
    """True for an acknowledgement-only packet: a TCP segment without payload and without
    SYN/FIN/RST, or a QUIC 1-RTT datagram of at most :data:`QUIC_ACK_ONLY_MAX` bytes."""
    if packet.proto == "tcp":
        return packet.payload_len == 0 and not (packet.tcp_flags or 0) & (SYN | FIN | RST)
    return packet.quic_long_header is False and 0 < packet.payload_len <= QUIC_ACK_ONLY_MAX


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
    client record's ``bytes``) when given, else the transport payload of all data packets
    (retransmissions included: on a capture at the client that is what the link carried).
    """
    duration = transfer_time(data)
    if not duration > 0:
        return math.nan
    total = app_bytes if app_bytes is not None else sum(p.payload_len for p in data)
    return 8.0 * total / duration


def binned_throughput(data: Sequence[Packet], bin_width: float = 0.05,
                      start: float | None = None) -> pd.DataFrame:
    """Throughput in consecutive bins of ``bin_width`` seconds.

    Columns: ``time`` (bin start, seconds from ``start``, default the first packet),
    ``bytes`` (payload bytes of the packets captured in the bin) and ``throughput``
    (``8 * bytes / bin_width`` bit/s). Bins run from ``start`` to the last packet; empty
    bins are kept (0).
    """
    if not data:
        return pd.DataFrame({"time": [], "bytes": [], "throughput": []})
    times = _offsets(data, start)
    sizes = np.array([p.payload_len for p in data], dtype=float)
    count = math.floor(times.max() / bin_width) + 1
    index = np.clip(np.floor(times / bin_width).astype(int), 0, None)
    totals = np.bincount(index, weights=sizes, minlength=count)[:count]
    return pd.DataFrame({"time": np.round(np.arange(count) * bin_width, 9), "bytes": totals,
                         "throughput": 8.0 * totals / bin_width})


def _offsets(packets: Sequence[Packet], start: float | None = None) -> np.ndarray:
    """Seconds from ``start`` (default: the first packet, exactly) to each packet."""
    if start is None:
        return np.array([seconds_between(packets[0], p) for p in packets], dtype=float)
    return np.array([p.ts - start for p in packets], dtype=float)


def download_time(record: Mapping[str, Any]) -> float:
    """Download time in seconds from a client record: request start to last byte.

    quicbed's HTTP/3 and TCP clients: ``completion_time`` (first request sent -> last byte).
    curl's ``-w '%{json}'``: ``time_total - time_pretransfer`` (request about to be sent ->
    last byte), so that both exclude the connection set-up.
    """
    if record.get("tool") in ("quicbed-quic-client", "quicbed-tcp-client"):
        value = record.get("completion_time")
        return math.nan if value is None else float(value)
    if "time_total" in record and "time_pretransfer" in record:
        return float(record["time_total"]) - float(record["time_pretransfer"])
    raise ValueError("not a quicbed HTTP/3 client record nor curl -w '%{json}' output")


# --------------------------------------------------------------------------- matching


def packet_key(packet: Packet) -> tuple[int, int]:
    """What identifies a packet in both captures: (IPv4 ID, payload hash)."""
    return (packet.ip_id, packet.payload_hash)


def match(sent: Sequence[Packet], received: Sequence[Packet]) -> list[int | None]:
    """For each sent packet, the index in ``received`` of the same packet, or None.

    Packets are the same when :func:`packet_key` is equal; repeated keys are paired in
    capture order (first sent with first received). Each received packet is used once.
    """
    waiting: dict[tuple[int, int], deque[int]] = defaultdict(deque)
    for index, packet in enumerate(received):
        waiting[packet_key(packet)].append(index)
    matched: list[int | None] = []
    for packet in sent:
        queue = waiting.get(packet_key(packet))
        matched.append(queue.popleft() if queue else None)
    return matched


def lost_packets(sent: Sequence[Packet], received: Sequence[Packet]) -> list[Packet]:
    """The packets of ``sent`` (server capture) never seen in ``received`` (client capture)."""
    return [packet for packet, index in zip(sent, match(sent, received), strict=True) if index is None]


def loss_rate(sent: Sequence[Packet], received: Sequence[Packet]) -> float:
    """Share of the data packets sent by the server (server capture) that never reached the
    client (client capture): ``lost / sent``, packets matched by :func:`packet_key`.

    The server capture must see packets before the bottleneck queue: tcpdump taps an
    interface after its qdisc, so on a host whose own interface carries the bottleneck's
    rate limit, drops of that queue are invisible.
    """
    if not sent:
        return math.nan
    return len(lost_packets(sent, received)) / len(sent)


def loss_bursts(sent: Sequence[Packet], received: Sequence[Packet]) -> list[int]:
    """Lengths of the runs of consecutively lost data packets, in the server's send order.

    Bernoulli loss gives runs of mean 1/(1-p); a Gilbert-Elliott channel's Bad state gives
    longer ones. Packets the server sent back to back met the link back to back, so this is
    the link's loss-burst length as the flow saw it.
    """
    bursts, length = [], 0
    for index in match(sent, received):
        if index is None:
            length += 1
        elif length:
            bursts.append(length)
            length = 0
    if length:
        bursts.append(length)
    return bursts


def one_way_delays(sent: Sequence[Packet], received: Sequence[Packet]) -> np.ndarray:
    """Per sent packet: arrival time at the client minus departure time at the server (s),
    NaN for lost packets. Both captures must share one clock."""
    arrivals = match(sent, received)
    return np.array([math.nan if index is None else seconds_between(packet, received[index])
                     for packet, index in zip(sent, arrivals, strict=True)], dtype=float)


def out_of_order_rate(sent: Sequence[Packet], received: Sequence[Packet]) -> float:
    """Share of the received data packets that arrived out of order.

    A packet is out of order when some packet the server sent *after* it arrived before
    it: with ``s(j)`` the position in the server capture of the ``j``-th packet received,
    packet ``j`` is out of order if ``s(j) < max(s(1..j-1))``. This is reordering by the
    network only (a retransmission is a new packet, sent later). Unmatched received
    packets are ignored.
    """
    position = {index: order for order, index in enumerate(match(sent, received))
                if index is not None}
    order = [position[index] for index in range(len(received)) if index in position]
    if not order:
        return math.nan
    highest, late = -1, 0
    for value in order:
        if value < highest:
            late += 1
        highest = max(highest, value)
    return late / len(order)


def tcp_out_of_sequence_rate(received: Sequence[Packet]) -> float:
    """TCP only, one capture: share of data segments whose sequence number is below the
    highest sequence number already seen (out-of-order arrivals *and* retransmissions,
    what a receiver sees as "not the next segment"). Sequence wrap-around is handled."""
    if not received:
        return math.nan
    base = received[0].tcp_seq or 0
    highest_end, late = -1, 0
    for packet in received:
        seq = ((packet.tcp_seq or 0) - base) % (1 << 32)
        if seq < highest_end:
            late += 1
        highest_end = max(highest_end, seq + packet.payload_len)
    return late / len(received)


def _relative_ranges(packets: Sequence[Packet], base: int) -> list[tuple[int, int]]:
    return [(seq, seq + packet.payload_len) for packet in packets
            for seq in [((packet.tcp_seq or 0) - base) % (1 << 32)]]


def tcp_retransmissions(sent: Sequence[Packet], received: Sequence[Packet]) -> tuple[int, int]:
    """TCP only: (segments the server sent again, of them the ones whose bytes had all
    reached the client already). The second are the sender's spurious loss declarations:
    data it took for lost that the receiver had. Server capture: a segment starting below
    the highest byte sent so far is a retransmission; client capture: a segment whose bytes
    had all arrived before is a duplicate."""
    if not sent:
        return 0, 0
    base = sent[0].tcp_seq or 0
    highest_end, retransmitted = 0, 0
    for start, end in _relative_ranges(sent, base):
        if start < highest_end:
            retransmitted += 1
        highest_end = max(highest_end, end)
    starts: list[int] = []  # the bytes received so far, as disjoint sorted [start, end) runs
    ends: list[int] = []
    duplicates = 0
    for start, end in _relative_ranges(received, base):
        if end <= start:
            continue
        at = bisect.bisect_right(starts, start) - 1
        if at >= 0 and ends[at] >= end:
            duplicates += 1
            continue
        # merge [start, end) with every run it touches
        low = at if at >= 0 and ends[at] >= start else at + 1
        high = bisect.bisect_right(starts, end)
        if low < high:
            start, end = min(start, starts[low]), max(end, ends[high - 1])
        starts[low:high], ends[low:high] = [start], [end]
    return retransmitted, min(duplicates, retransmitted)


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


def idi_curve(intervals: Sequence[float] | np.ndarray,
              ks: Iterable[int] = IDI_KS) -> pd.DataFrame:
    """:func:`idi` for each ``k`` that the data allow (columns ``k``, ``idi``)."""
    values = np.asarray(intervals, dtype=float)
    rows = [(k, idi(values, k)) for k in ks if values.size >= k + 1]
    return pd.DataFrame(rows, columns=["k", "idi"])


def ack_ratio(packets: Sequence[Packet], flow: FlowKey) -> float:
    """ACK frequency: acknowledgement packets of the reverse flow per data packet.

    ``N_ack / N_data`` with ``N_data`` the data packets of ``flow`` and ``N_ack`` the
    packets of the reverse flow for which :func:`is_ack` holds, captured from the first
    data packet on (earlier ones acknowledge the handshake). On either capture: with
    no loss between the capture points both see the same packets. ~0.5 for ACK every
    second packet, ~0.1 for BQUIC's every tenth.
    """
    data = data_packets(packets, flow)
    if not data:
        return math.nan
    start = data[0].ts
    back = reverse(flow)
    acks = sum(1 for p in packets if p.flow == back and p.ts >= start and is_ack(p))
    return acks / len(data)


# --------------------------------------------------------------------------- diagrams


def sequence_frame(server: Sequence[Packet], client: Sequence[Packet],
                   flow: FlowKey) -> pd.DataFrame:
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
    received_offset = {index: offset for offset, index in zip(offsets, matched, strict=True)
                       if index is not None}
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
class RunMetrics:
    """The scalar metrics of one download (units: s, bit/s, shares in [0, 1])."""

    proto: str
    data_packets_sent: int
    data_packets_received: int
    throughput: float  # client capture, transport payload
    goodput: float  # client capture, application bytes (record) when known, else NaN
    transfer_time: float  # client capture, first to last data packet
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_metrics(server: Sequence[Packet], client: Sequence[Packet],
                record: Mapping[str, Any] | None = None, flow: FlowKey | None = None,
                ks: Iterable[int] = IDI_KS) -> RunMetrics:
    """All scalar metrics of one run from its two captures (and the client record)."""
    key = flow if flow is not None else main_flow(client)
    sent, received = data_packets(server, key), data_packets(client, key)
    delays = one_way_delays(sent, received)
    delays = delays[~np.isnan(delays)]
    bursts = loss_bursts(sent, received)
    ipt_server, ipt_client = inter_packet_times(sent), inter_packet_times(received)
    ks = list(ks)
    app_bytes = int(record["bytes"]) if record and record.get("bytes") else (
        int(record["size_download"]) if record and record.get("size_download") else None)

    def quantile(q: float) -> float:
        return float(np.quantile(delays, q)) if delays.size else math.nan

    return RunMetrics(
        proto=key[4],
        data_packets_sent=len(sent),
        data_packets_received=len(received),
        throughput=throughput(received),
        goodput=throughput(received, app_bytes) if app_bytes is not None else math.nan,
        transfer_time=transfer_time(received),
        download_time=download_time(record) if record else math.nan,
        loss=loss_rate(sent, received),
        loss_burst_mean=float(np.mean(bursts)) if bursts else math.nan,
        owd_mean=float(delays.mean()) if delays.size else math.nan,
        owd_median=quantile(0.5),
        owd_p95=quantile(0.95),
        ipt_server_short_share=short_gap_share(ipt_server),
        ipt_client_short_share=short_gap_share(ipt_client),
        idi_server={k: idi(ipt_server, k) for k in ks},
        idi_client={k: idi(ipt_client, k) for k in ks},
        out_of_order=out_of_order_rate(sent, received),
        ack_ratio=ack_ratio(client, key),
    )


__all__ = [
    "IDI_KS",
    "QUIC_ACK_ONLY_MAX",
    "SHORT_GAP",
    "FlowKey",
    "RunMetrics",
    "ack_ratio",
    "binned_throughput",
    "data_flows",
    "data_packets",
    "download_time",
    "flow_bytes",
    "idi",
    "idi_curve",
    "inter_packet_times",
    "is_ack",
    "is_data",
    "loss_rate",
    "loss_bursts",
    "lost_packets",
    "main_flow",
    "match",
    "of_flow",
    "one_way_delays",
    "out_of_order_rate",
    "packet_key",
    "reverse",
    "run_metrics",
    "sequence_frame",
    "short_gap_share",
    "tcp_out_of_sequence_rate",
    "tcp_retransmissions",
    "throughput",
    "transfer_time",
]
