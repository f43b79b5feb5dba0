"""Packets matched between the two captures of a run, and what the network did to them.

A packet sent by the server (server capture) is the same packet as one received by the client
(client capture) when their IPv4 ID and payload hash agree (:func:`packet_key`); the two
captures share one clock, so the pairs give each packet's fate exactly: lost or not, the runs of
losses, its one-way delay, whether it arrived out of order. TCP's retransmissions and
out-of-sequence arrivals are read from sequence numbers. Functions here are pure: they take
lists of :class:`Packet` (the data packets of one flow, from
:func:`quicbed.analysis.metrics.data_packets`) and return numbers or arrays; the definitions
are in their docstrings and in ``docs/metrics.md``.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from collections.abc import Sequence

import numpy as np

from quicbed.analysis.packets import Packet, seconds_between


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
    return np.array(
        [
            math.nan if index is None else seconds_between(packet, received[index])
            for packet, index in zip(sent, arrivals, strict=True)
        ],
        dtype=float,
    )


def out_of_order_rate(sent: Sequence[Packet], received: Sequence[Packet]) -> float:
    """Share of the received data packets that arrived out of order.

    A packet is out of order when some packet the server sent *after* it arrived before
    it: with ``s(j)`` the position in the server capture of the ``j``-th packet received,
    packet ``j`` is out of order if ``s(j) < max(s(1..j-1))``. This is reordering by the
    network only (a retransmission is a new packet, sent later). Unmatched received
    packets are ignored.
    """
    late, total = out_of_order_counts(sent, received)
    return late / total if total else math.nan


def out_of_order_counts(sent: Sequence[Packet], received: Sequence[Packet]) -> tuple[int, int]:
    """(received packets out of order, received packets matched): the counts behind
    :func:`out_of_order_rate`, to pool over the connections of a download."""
    position = {index: order for order, index in enumerate(match(sent, received)) if index is not None}
    order = [position[index] for index in range(len(received)) if index in position]
    highest, late = -1, 0
    for value in order:
        if value < highest:
            late += 1
        highest = max(highest, value)
    return late, len(order)


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


def _relative_range(packet: Packet, base: int) -> tuple[int, int]:
    start = ((packet.tcp_seq or 0) - base) % (1 << 32)
    return start, start + packet.payload_len


class _ByteRuns:
    """A set of byte offsets kept as disjoint, sorted ``[start, end)`` runs."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def covers(self, start: int, end: int) -> bool:
        at = bisect.bisect_right(self.starts, start) - 1
        return at >= 0 and self.ends[at] >= end

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        at = bisect.bisect_right(self.starts, start) - 1
        low = at if at >= 0 and self.ends[at] >= start else at + 1
        high = bisect.bisect_right(self.starts, end)
        if low < high:
            start, end = min(start, self.starts[low]), max(end, self.ends[high - 1])
        self.starts[low:high], self.ends[low:high] = [start], [end]


def tcp_retransmissions(sent: Sequence[Packet], received: Sequence[Packet]) -> tuple[int, int]:
    """TCP only, one connection: (segments the server sent again, of them the spurious ones).

    The definition shared with QUIC's ``recovery:packet_lost`` (docs/metrics.md): a
    *declared loss* is a packet whose data the sender sent again; it is *spurious* when the
    packet it took for lost had reached the receiver. Server capture: a segment starting
    below the highest byte sent so far is a retransmission (fast retransmit, RACK, tail loss
    probe or timeout alike: aioquic also declares the packet it resends at a probe timeout
    lost). It is spurious when every byte of it had been sent before in segments that reached
    the client capture (at any time: QUIC's counterpart is an acknowledgement that comes
    after the declaration). A retransmission that is itself lost is still told right; a
    packet the network duplicated is no retransmission.
    """
    if not sent:
        return 0, 0
    base = sent[0].tcp_seq or 0
    arrived = match(sent, received)
    delivered = _ByteRuns()  # bytes of earlier transmissions that reached the client
    highest_end, retransmitted, spurious = 0, 0, 0
    for packet, index in zip(sent, arrived, strict=True):
        start, end = _relative_range(packet, base)
        if start < highest_end:
            retransmitted += 1
            spurious += delivered.covers(start, end)
        highest_end = max(highest_end, end)
        if index is not None:
            delivered.add(start, end)
    return retransmitted, spurious


__all__ = [
    "loss_bursts",
    "loss_rate",
    "lost_packets",
    "match",
    "one_way_delays",
    "out_of_order_counts",
    "out_of_order_rate",
    "packet_key",
    "tcp_out_of_sequence_rate",
    "tcp_retransmissions",
]
