"""The ACK accelerator's model (quicbed/backends/ns3/channel/fastack.cc) on ns-3's simulated
clock, segment by segment: channel_models/fastack_driver.cc plays the access point around it
(a radio queue these tests empty by hand, the switch, the wire to the sender), so each rule of
docs/ns3-backend.md's "ACK acceleration" is checked on exact sequence numbers, windows and
timestamps, with no real time or kernel in the way. tests/integration/test_fastack.py and
test_fastack_ack_fields.py run the same model in the real-time channel under Linux TCP."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from channel_driver import DriverProcess, compile_driver
from quicbed.backends.ns3 import build

NS3_MISSING = build.missing()
pytestmark = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")

FIN, SYN, RST, PSH, ACK, ECE = 0x01, 0x02, 0x04, 0x08, 0x10, 0x40
MSS = 1448
MAX_RESENDS = 4  # FastAck::MAX_RESENDS
MAX_SILENT_EXPIRIES = 64  # FastAck::MAX_SILENT_EXPIRIES
FIRST_TIMEOUT_MS = 300  # FastAck's repair timer, first expiry
SERVER, STATION = (0x0A000001, 8000), (0x0A000002, 40000)  # 10.0.0.1:8000, 10.0.0.2:40000
SERVER_ISN, STATION_ISN = 5000, 90000
BASE = SERVER_ISN + 1  # the server's first data byte
SCALE = 7


# --------------------------------------------------------------------------- segments


@dataclass(frozen=True)
class Segment:
    src: tuple[int, int]
    dst: tuple[int, int]
    seq: int
    ack: int
    flags: int
    window: int
    payload: int
    ts: tuple[int, int] | None = None  # (TSval, TSecr)
    sacks: tuple[tuple[int, int], ...] = ()
    wscale: int | None = None
    sack_permitted: bool = False

    def encode(self) -> bytes:
        options = b""
        if self.sack_permitted:
            options += b"\x04\x02"
        if self.wscale is not None:
            options += bytes([1, 3, 3, self.wscale])
        if self.ts is not None:
            options += b"\x01\x01\x08\x0a" + struct.pack("!II", *self.ts)
        if self.sacks:
            options += b"\x01\x01\x05" + bytes([2 + 8 * len(self.sacks)])
            options += b"".join(struct.pack("!II", *block) for block in self.sacks)
        options += b"\x00" * (-len(options) % 4)
        tcp = (
            struct.pack(
                "!HHIIBBHHH",
                self.src[1],
                self.dst[1],
                self.seq % 2**32,
                self.ack % 2**32,
                (20 + len(options)) // 4 << 4,
                self.flags,
                self.window,
                0,
                0,
            )
            + options
        )
        total = 20 + len(tcp) + self.payload
        ip = struct.pack("!BBHHHBBHII", 0x45, 0, total, 0, 0x4000, 64, 6, 0, self.src[0], self.dst[0])
        return ip + tcp + b"\x5a" * self.payload

    @property
    def end(self) -> int:
        return self.seq + self.payload + (1 if self.flags & FIN else 0)


def decode(packet: bytes) -> Segment:
    ihl = (packet[0] & 0x0F) * 4
    (total,) = struct.unpack_from("!H", packet, 2)
    src_ip, dst_ip = struct.unpack_from("!II", packet, 12)
    sport, dport, seq, ack, offset, flags, window = struct.unpack_from("!HHIIBBH", packet, ihl)
    header = (offset >> 4) * 4
    ts, sacks, at = None, [], ihl + 20
    while at < ihl + header and packet[at] != 0:
        if packet[at] == 1:
            at += 1
            continue
        kind, length = packet[at], packet[at + 1]
        if kind == 8:
            ts = struct.unpack_from("!II", packet, at + 2)
        if kind == 5:
            sacks = [struct.unpack_from("!II", packet, at + 2 + 8 * n) for n in range((length - 2) // 8)]
        at += length
    return Segment((src_ip, sport), (dst_ip, dport), seq, ack, flags, window, total - ihl - header, ts, tuple(sacks))


# --------------------------------------------------------------------------- the driver


@dataclass
class Events:
    """What one or more commands caused, by kind."""

    lines: list[tuple[float, str, Any]] = field(default_factory=list)

    def __add__(self, other: Events) -> Events:
        return Events(self.lines + other.lines)

    def of(self, kind: str) -> list[Any]:
        return [item for _, k, item in self.lines if k == kind]


class Model(DriverProcess):
    """One access point's accelerator, commanded line by line."""

    def do(self, command: str) -> Events:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        events = Events()
        for line in iter(self.process.stdout.readline, ""):
            if line.strip() == "done":
                return events
            ms, kind, text = line.split(" ", 2)
            item = json.loads(text) if kind == "stats" else decode(bytes.fromhex(text.strip()))
            events.lines.append((float(ms), kind, item))
        raise AssertionError(f"the driver ended on {command!r} with status {self.process.wait()}")

    def sender(self, segment: Segment) -> Events:
        return self.do(f"sender {segment.encode().hex()}")

    def station(self, segment: Segment) -> Events:
        return self.do(f"station {segment.encode().hex()}")

    def air(self, frames: int = 1) -> Events:
        return self.do(f"air {frames}")

    def drop(self, frames: int = 1) -> Events:
        return self.do(f"drop {frames}")

    def expire(self, frames: int = 1) -> Events:
        return self.do(f"expire {frames}")

    def air_at(self, frame: int) -> Events:
        """The station's MAC confirms queued frame ``frame`` (0: the first) before those ahead of it."""
        return self.do(f"air_at {frame}")

    def wait(self, ms: float) -> Events:
        return self.do(f"wait {ms}")

    def stats(self) -> dict[str, int]:
        return self.do("stats").of("stats")[0]


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver(
        tmp_path_factory.mktemp("fastack-model") / "driver", "fastack_driver.cc", ["fastack.cc"], ["network", "core"]
    )


@pytest.fixture
def model(driver: Path) -> Iterator[Model]:
    running = Model(driver)
    yield running
    running.close()


# --------------------------------------------------------------------------- a connection


class Connection:
    """The station's connection to the server through the AP, its handshake done: the server
    sends data at offsets from its first byte, the station acknowledges."""

    def __init__(
        self,
        model: Model,
        *,
        server_scale: int | None = SCALE,
        timestamps: bool = True,
        sack: bool = True,
        station_window: int = 65535,
    ) -> None:
        self.model, self.timestamps, self.clock = model, timestamps, 100
        self.station_seq = STATION_ISN + 1
        model.station(
            Segment(
                STATION, SERVER, STATION_ISN, 0, SYN, station_window, 0, self._ts(0), wscale=SCALE, sack_permitted=sack
            )
        )
        model.sender(
            Segment(
                SERVER,
                STATION,
                SERVER_ISN,
                STATION_ISN + 1,
                SYN | ACK,
                65535,
                0,
                self._ts(1),
                wscale=server_scale,
                sack_permitted=sack,
            )
        )
        model.air()  # the SYN-ACK
        self.scale = SCALE if server_scale is not None else 0
        model.station(self.ack(BASE, window=station_window >> self.scale))

    def _ts(self, echo: int) -> tuple[int, int] | None:
        self.clock += 1
        return (self.clock, echo) if self.timestamps else None

    def data(self, offset: int, length: int = MSS, tsval: int | None = None, flags: int = ACK) -> Segment:
        ts = (tsval if tsval is not None else self.clock + 1, 7) if self.timestamps else None
        self.clock = ts[0] if ts else self.clock
        return Segment(SERVER, STATION, BASE + offset, self.station_seq, flags, 502, length, ts)

    def send(self, *offsets: int) -> Events:
        return sum((self.model.sender(self.data(offset)) for offset in offsets), Events())

    def ack(self, number: int, window: int = 512, flags: int = ACK, payload: int = 0) -> Segment:
        segment = Segment(STATION, SERVER, self.station_seq, number, flags, window, payload, self._ts(7))
        self.station_seq += payload
        return segment


def room(window: int, outstanding: int) -> int:
    """The window the AP advertises: the station's (scaled) less what it has not acknowledged."""
    return ((window << SCALE) - outstanding) >> SCALE


def acks(events: Events) -> list[int]:
    return [segment.ack - BASE for segment in events.of("to_sender")]


# --------------------------------------------------------------------------- the published design


def test_the_ap_acknowledges_a_segment_once_the_station_mac_has_it(model: Model) -> None:
    flow = Connection(model)
    queued = flow.send(0)
    assert [s.seq - BASE for s in queued.of("radio")] == [0] and not queued.of("to_sender")
    answer = model.air().of("to_sender")
    assert [(a.ack - BASE, a.flags) for a in answer] == [(MSS, ACK)]
    # from the station: its address, its next sequence number, its window less what it owes
    assert answer[0].src == STATION and answer[0].seq == flow.station_seq
    assert answer[0].window == room(65535 >> SCALE, MSS)
    stats = model.stats()
    assert (stats["accelerated"], stats["delivered_over_air"], stats["flows_active"]) == (1, 1, 1)


def test_the_station_acks_free_the_cache_and_stop_at_the_ap(model: Model) -> None:
    flow = Connection(model)
    flow.send(0, MSS)
    model.air(2)
    consumed = model.station(flow.ack(BASE + 2 * MSS))
    assert not consumed.of("passed") and not consumed.of("to_sender")
    stats = model.stats()
    assert (stats["held_bytes"], stats["station_acks_swallowed"]) == (0, 1)


def test_a_block_ack_gets_one_ack_for_all_it_confirmed(model: Model) -> None:
    flow = Connection(model)
    flow.send(0, MSS, 2 * MSS)
    assert acks(model.air(3)) == [3 * MSS]


# --------------------------------------------------------------------------- item 7


def test_a_repeated_ack_echoes_the_retransmissions_tsval(model: Model) -> None:
    """RFC 7323 4.3: the sender's retransmission, at or below what the AP acknowledged, is
    answered with the AP's ACK echoing the retransmission's TSval, not the original's."""
    flow = Connection(model)
    assert [a.ts[1] for a in (model.sender(flow.data(0, tsval=500)) + model.air()).of("to_sender")] == [500]
    repeated = model.sender(flow.data(0, tsval=900)).of("to_sender")
    assert [(a.ack - BASE, a.ts[1]) for a in repeated] == [(MSS, 900)]
    assert model.stats()["acks_repeated"] == 1


def test_the_ap_repeats_its_ack_with_the_radio_queue_full(model: Model) -> None:
    """The repeated ACK goes to the sender, not the radio: a full radio queue does not stop it."""
    flow = Connection(model)
    flow.send(0)
    model.air()
    model.do("capacity 2")
    flow.send(MSS, 2 * MSS)  # the queue is full now
    refused = flow.send(3 * MSS)
    assert refused.of("refused") and not refused.of("to_sender")
    repeated = model.sender(flow.data(0))
    assert acks(repeated) == [MSS] and not repeated.of("radio") and not repeated.of("refused")
    stats = model.stats()
    assert (stats["acks_repeated"], stats["queue_refused"]) == (1, 1)


def test_the_repair_timer_leaves_segments_still_queued_to_the_mac(model: Model) -> None:
    """With the station's TCP silent, the fallback timer resends what the station's MAC got
    (its TCP may have lost it), never what still waits in the radio queue."""
    flow = Connection(model)
    flow.send(0, MSS)
    delivered_at = model.air(1).lines[0][0]  # the first delivered (and acknowledged), the second still queued
    waited = model.wait(2500)
    resent = [(ms - delivered_at, s.seq - BASE) for ms, kind, s in waited.lines if kind == "radio"]
    assert resent == [(300, 0)]  # the first timeout; then everything held is queued, the timer stops
    assert model.stats()["timer_resends"] == 1


def test_a_longer_retransmission_with_the_same_start_is_held(model: Model) -> None:
    """Linux may resend two segments as one: the AP queues and holds the longer copy, and
    acknowledges all of it once the station's MAC has it."""
    flow = Connection(model)
    flow.send(0)
    longer = model.sender(flow.data(0, 2 * MSS))
    assert [(s.seq - BASE, s.payload) for s in longer.of("radio")] == [(0, 2 * MSS)]
    model.air()  # the short copy: no longer the one the AP holds
    assert acks(longer + model.air())[-1:] == [2 * MSS]
    assert model.stats()["held_bytes"] == 2 * MSS


def test_the_station_sequence_number_in_the_aps_acks_never_moves_backwards(model: Model) -> None:
    flow = Connection(model)
    first = flow.ack(BASE, payload=300, flags=ACK | PSH)
    model.station(first)
    model.station(Segment(STATION, SERVER, first.seq, BASE, ACK | PSH, 512, 100, (flow.clock, 7)))  # resent, shorter
    answer = (flow.send(0) + model.air()).of("to_sender")
    assert [a.seq for a in answer] == [first.seq + 300]


def test_ece_from_the_station_is_passed_on_until_it_stops(model: Model) -> None:
    flow = Connection(model)
    flow.send(0, MSS)
    model.air()
    model.station(flow.ack(BASE + MSS, flags=ACK | ECE))
    assert [a.flags & ECE for a in model.air().of("to_sender")] == [ECE]
    model.station(flow.ack(BASE + 2 * MSS))
    assert [a.flags & ECE for a in (flow.send(2 * MSS) + model.air()).of("to_sender")] == [0]


def test_a_hole_before_the_ap_gets_duplicate_acks_with_what_the_station_has(model: Model) -> None:
    flow = Connection(model)
    flow.send(0, 2 * MSS, 3 * MSS)  # the segment at MSS was lost on the cable
    # one block ACK: the ACK for the first segment, then a duplicate for each above the hole
    answers = model.air(3).of("to_sender")
    assert [(a.ack - BASE, [(s - BASE, e - BASE) for s, e in a.sacks]) for a in answers] == [
        (MSS, [(2 * MSS, 3 * MSS)]),
        (MSS, [(2 * MSS, 3 * MSS)]),
        (MSS, [(2 * MSS, 4 * MSS)]),
    ]
    assert len({a.window for a in answers}) == 1  # duplicates: the window unchanged (RFC 5681)
    stats = model.stats()
    assert (stats["duplicate_acks_sent"], stats["out_of_order"]) == (2, 2)  # both arrived above the hole
    assert acks(model.sender(flow.data(MSS)) + model.air()) == [4 * MSS]  # the repair fills it


def test_a_mac_drop_above_a_hole_is_reported_in_its_place_once_repaired(model: Model) -> None:
    """A frame the MAC gave up on, above a hole before the AP: the AP queues it again, and
    until that copy arrives the sender hears nothing of what came after it (as if the MAC kept
    trying it). Reported at once, the segments behind it were SACKed first and the sender's
    RACK resent the dropped one, which the station then had twice."""
    flow = Connection(model)
    flow.send(0, 2 * MSS, 3 * MSS)  # the segment at MSS was lost on the cable
    assert acks(model.air()) == [MSS]
    repair = model.drop()  # the segment at 2 MSS: queued again, behind the one at 3 MSS
    assert [s.seq - BASE for s in repair.of("radio")] == [2 * MSS] and not repair.of("to_sender")
    assert not model.air().of("to_sender")  # 3 MSS reached the station: not reported yet
    answers = model.air().of("to_sender")  # the repair: both, in the sender's order
    assert [(a.ack - BASE, [(s - BASE, e - BASE) for s, e in a.sacks]) for a in answers] == [
        (MSS, [(2 * MSS, 3 * MSS)]),
        (MSS, [(2 * MSS, 4 * MSS)]),
    ]
    assert model.stats()["mac_drops_repaired"] == 1


def test_a_station_ack_ahead_of_the_ap_waits_for_the_repair(model: Model) -> None:
    """The station's MAC moved past a dropped frame and its TCP acknowledges the hole's
    retransmission that was queued before the repair: its ACK is ahead of the AP's. Passed,
    its SACK blocks (the station's latest few) told the sender of segments after the repair
    but not of all before them, and its RACK resent those the station had (35 and 67 segments
    in the two runs caught); the AP's ACK after it then echoed an older TSval than the station's,
    which Linux counts as reordering. It waits for the repair, whose ACK echoes the station's."""
    flow = Connection(model)
    flow.send(0, 2 * MSS, 3 * MSS)  # the segment at MSS was lost on the cable
    assert acks(model.air()) == [MSS]
    retransmission = flow.data(MSS, tsval=900)
    model.sender(retransmission)  # queued behind 2 and 3 MSS
    repair = model.drop()  # the segment at 2 MSS: queued again, behind the retransmission
    assert [s.seq - BASE for s in repair.of("radio")] == [2 * MSS]
    assert not model.air(2).of("to_sender")  # 3 MSS and the retransmission: nothing reported yet
    ahead = Segment(
        STATION, SERVER, flow.station_seq, BASE + 2 * MSS, ACK, 512, 0, (950, 900), ((BASE + 3 * MSS, BASE + 4 * MSS),)
    )
    answer = model.station(ahead)
    assert not answer.of("passed") and not answer.of("to_sender")
    # the repair: the segments after it in the order the AP queued them (a duplicate ACK for
    # each above the hole), then the ACK covering the retransmission, echoing its TSval
    reported = model.air().of("to_sender")
    assert [(a.ack - BASE, [(s - BASE, e - BASE) for s, e in a.sacks]) for a in reported] == [
        (MSS, [(2 * MSS, 3 * MSS)]),
        (MSS, [(2 * MSS, 4 * MSS)]),
        (4 * MSS, []),
    ]
    assert reported[-1].ts[1] == 900
    stats = model.stats()
    assert (stats["station_acks_held"], stats["mac_drops_repaired"]) == (1, 1)
    assert stats["station_acks_passed"] == 1  # the handshake's


def test_a_station_ack_ahead_of_the_ap_passes_when_no_repair_is_awaited(model: Model) -> None:
    """Ahead of the AP because its block ACK was lost: the station's ACK reaches the sender."""
    flow = Connection(model)
    flow.send(0, MSS)
    passed = model.station(flow.ack(BASE + 2 * MSS))  # the AP has not seen the MAC's confirmation
    assert passed.of("passed")
    assert model.stats()["station_acks_held"] == 0


def test_after_a_station_ack_passed_the_ap_echoes_no_older_tsval(model: Model) -> None:
    """The passed ACK echoed the retransmission's TSval; the AP's duplicate ACK after it echoed
    the original's (measured: 215 such ACKs after one passed), which a sender in recovery takes
    for the original arriving (Linux: TCPTSReorder, an undo)."""
    flow = Connection(model)
    assert [a.ts[1] for a in (model.sender(flow.data(0, tsval=500)) + model.air()).of("to_sender")] == [500]
    model.sender(flow.data(MSS, tsval=900))  # the retransmission of a segment lost on the cable
    # the station got it, its block ACK lost: the AP has not seen it
    ahead = Segment(STATION, SERVER, flow.station_seq, BASE + 2 * MSS, ACK, 512, 0, (950, 900))
    assert model.station(ahead).of("passed")
    model.sender(flow.data(3 * MSS, tsval=1000))  # the segment at 2 MSS lost on the cable
    duplicates = model.air(2).of("to_sender")
    assert [(a.ack - BASE, a.ts[1]) for a in duplicates] == [(2 * MSS, 900)]


def test_a_mac_drop_the_full_queue_cannot_repair_is_resent_by_the_timer(model: Model) -> None:
    """With no room for the repair the station's MAC moves past the dropped frame; the AP
    still repairs it, from its timer, and the sender hears of nothing but the result."""
    flow = Connection(model)
    flow.send(0, MSS)
    model.do("capacity 1")
    assert not model.drop().of("radio")  # refused: the queue still holds the segment at MSS
    assert not model.air().of("to_sender")
    model.do("capacity 10")
    assert [s.seq - BASE for s in model.wait(FIRST_TIMEOUT_MS).of("radio")] == [0]
    assert acks(model.air()) == [2 * MSS]


def test_without_sack_the_duplicates_carry_no_blocks(model: Model) -> None:
    flow = Connection(model, sack=False)
    flow.send(0, 2 * MSS)
    answers = model.air(2).of("to_sender")
    assert [(a.ack - BASE, a.sacks) for a in answers] == [(MSS, ()), (MSS, ())]  # the new ACK, one duplicate


def test_a_segment_the_full_radio_queue_refused_is_a_hole_before_the_ap(model: Model) -> None:
    """The AP drops what its radio queue refuses: the next segment arrives out of order, as
    after a loss on the cable, and the sender repairs it."""
    flow = Connection(model)
    model.do("capacity 1")
    assert flow.send(0).of("radio") and flow.send(MSS).of("refused")
    model.air()
    flow.send(2 * MSS)
    stats = model.stats()
    assert (stats["queue_refused"], stats["out_of_order"]) == (1, 1)


# --------------------------------------------------------------------------- windows


def test_a_window_update_is_forwarded_and_not_taken_for_a_duplicate(model: Model) -> None:
    flow = Connection(model)
    flow.send(0)
    model.air()
    assert not model.station(flow.ack(BASE + MSS, window=0)).of("to_sender")  # a slow reader
    flow.send(MSS)
    closed = model.air().of("to_sender")
    assert [(a.ack - BASE, a.window) for a in closed] == [(2 * MSS, 0)]
    update = model.station(flow.ack(BASE + MSS, window=256)).of("to_sender")
    assert [(a.ack - BASE, a.window) for a in update] == [(2 * MSS, room(256, MSS))]
    stats = model.stats()
    assert (stats["window_updates"], stats["station_duplicate_acks"]) == (1, 0)


def test_without_window_scaling_on_the_sender_the_window_is_read_unscaled(model: Model) -> None:
    """RFC 7323: scaling needs both SYNs to offer it; the station's windows are then bytes."""
    flow = Connection(model, server_scale=None, station_window=60000)
    flow.send(0)
    answer = model.air().of("to_sender")
    assert [a.window for a in answer] == [60000 - MSS]
    assert flow.scale == 0


def test_without_timestamps_the_acks_carry_none(model: Model) -> None:
    flow = Connection(model, timestamps=False)
    flow.send(0)
    assert [a.ts for a in model.air().of("to_sender")] == [None]


def test_a_connection_whose_handshake_the_ap_missed_is_not_accelerated(model: Model) -> None:
    data = Segment(SERVER, STATION, BASE, STATION_ISN + 1, ACK, 502, MSS, (5, 7))
    assert model.sender(data).of("switched") and not model.air().of("to_sender")
    assert model.stats()["accelerated"] == 0


# --------------------------------------------------------------------------- repair and lifecycle


def test_three_duplicate_acks_resend_what_the_station_lacks(model: Model) -> None:
    flow = Connection(model)
    flow.send(0, MSS)
    model.air(2)
    model.station(flow.ack(BASE + MSS))
    resent = sum((model.station(flow.ack(BASE + MSS)) for _ in range(3)), Events())
    assert [s.seq - BASE for s in resent.of("radio")] == [MSS]
    assert not resent.of("to_sender")  # the sender need not hear of it
    assert model.stats()["local_retransmissions"] == 1


def test_a_mac_drop_is_resent_at_once_then_by_the_timer_and_never_given_up(model: Model) -> None:
    """The sender freed what the AP acknowledged, so the AP keeps it until the station has it:
    the air's failures get MAX_RESENDS immediate resends, then the timer's backoff resends it
    (before, the fifth failure abandoned the connection and the data with it)."""
    flow = Connection(model)
    flow.send(0)
    resends = []
    for _ in range(MAX_RESENDS + 1):
        resends += model.drop().of("radio")
    assert [s.seq - BASE for s in resends] == [0] * MAX_RESENDS  # the fifth failure: none at once
    assert [s.seq - BASE for s in model.wait(FIRST_TIMEOUT_MS).of("radio")] == [0]
    assert acks(model.air()) == [MSS]
    stats = model.stats()
    assert (stats["mac_drops_repaired"], stats["timer_resends"], stats["flows_abandoned"]) == (MAX_RESENDS, 1, 0)
    assert stats["flows_active"] == 1


def test_after_a_timer_resend_each_partial_ack_brings_the_next_lacking_segment(model: Model) -> None:
    """The station's MAC got five segments its TCP lost (a full socket buffer, a firewall): the
    timer resends the first, and each ACK for a resend brings the next at once (RFC 6582's
    partial ACK), not one segment per timer expiry (five would have taken 0.3+0.6+1.2+2+2 s)."""
    flow = Connection(model)
    flow.send(*(k * MSS for k in range(5)))
    model.air(5)  # delivered to the station's MAC; its TCP says nothing
    assert [s.seq - BASE for s in model.wait(FIRST_TIMEOUT_MS).of("radio")] == [0]
    for k in range(1, 5):
        model.air()
        assert [s.seq - BASE for s in model.station(flow.ack(BASE + k * MSS)).of("radio")] == [k * MSS]
    model.air()
    assert not model.station(flow.ack(BASE + 5 * MSS)).of("radio")
    stats = model.stats()
    assert (stats["timer_resends"], stats["partial_ack_resends"], stats["held_bytes"]) == (1, 4, 0), stats
    assert not model.wait(5000).of("radio")


def test_a_station_silent_for_two_minutes_is_given_up(model: Model) -> None:
    """Only a station whose TCP answers none of MAX_SILENT_EXPIRIES timer resends (300 ms
    doubling to 2 s: about two minutes) has its connection given up: it crashed or was
    removed, as a station that leaves its AP is refused with FastACK. Its run is invalid."""
    flow = Connection(model)
    flow.send(0)
    model.air()  # the station's MAC has it; its TCP never answers
    waited = 0.0
    while model.stats()["flows_active"]:
        assert waited < 200_000, model.stats()
        model.wait(2000)
        model.air()  # the timer's resend reaches the station's MAC, and again nothing
        waited += 2000
    stats = model.stats()
    assert (stats["flows_abandoned"], stats["timer_resends"]) == (1, MAX_SILENT_EXPIRIES), stats
    assert 110_000 < waited < 140_000, waited


@pytest.mark.parametrize("side", ["sender", "station"])
def test_a_reset_either_way_ends_the_connection(model: Model, side: str) -> None:
    flow = Connection(model)
    flow.send(0, MSS)
    model.air()
    if side == "sender":
        model.sender(Segment(SERVER, STATION, BASE + 2 * MSS, 0, RST, 0, 0))
    else:
        model.station(Segment(STATION, SERVER, flow.station_seq, 0, RST, 0, 0))
    stats = model.stats()
    assert (stats["flows_ended"], stats["flows_active"], stats["held_bytes"]) == (1, 0, 0)
    assert not model.wait(20_000).lines  # no resend of what was held


def test_both_fins_acknowledged_end_the_connection(model: Model) -> None:
    flow = Connection(model)
    model.sender(flow.data(0, flags=ACK | FIN))
    assert acks(model.air()) == [MSS + 1]
    model.station(flow.ack(BASE + MSS + 1, flags=ACK | FIN))
    assert model.stats()["flows_active"] == 1  # the station's FIN still unacknowledged
    model.sender(Segment(SERVER, STATION, BASE + MSS + 1, flow.station_seq + 1, ACK, 502, 0, (flow.clock + 1, 7)))
    stats = model.stats()
    assert (stats["flows_ended"], stats["flows_active"]) == (1, 0)


def test_the_stations_ack_of_the_last_fin_ends_the_connection_though_the_ap_answered_it(model: Model) -> None:
    """The station closes first and the server acknowledges its FIN; the server's last data and
    FIN are then acknowledged by the AP, so the station's own ACK of that FIN stops at the AP.
    That ACK is the connection's last packet: the flow ends on it, or never."""
    flow = Connection(model)
    model.station(flow.ack(BASE, flags=ACK | FIN))
    flow.station_seq += 1  # the FIN's sequence number
    model.sender(Segment(SERVER, STATION, BASE, flow.station_seq, ACK, 502, 0, (flow.clock + 1, 7)))
    assert model.stats()["flows_active"] == 1  # the server's side is still open
    model.sender(flow.data(0, flags=ACK | FIN))
    assert acks(model.air(2)) == [MSS + 1]  # the server's ACK of the station's FIN, then its data
    swallowed = model.station(flow.ack(BASE + MSS + 1))
    assert not swallowed.of("passed")
    stats = model.stats()
    assert (stats["flows_ended"], stats["flows_active"], stats["held_bytes"]) == (1, 0, 0)


# --------------------------------------------------------------------------- probes and FINs the sender must hear


def test_an_idle_keepalive_from_the_station_reaches_the_sender(model: Model) -> None:
    """A keep-alive is a pure ACK one byte before the station's next sequence number, sent so
    that the server answers: consumed at the AP it would go unanswered and, after the probes,
    the station's TCP would drop an idle connection that is alive."""
    flow = Connection(model)
    flow.send(0)
    model.air()
    model.station(flow.ack(BASE + MSS))  # the ordinary ACK: swallowed, the AP answered already
    keepalive = Segment(STATION, SERVER, flow.station_seq - 1, BASE + MSS, ACK, 512, 0, (flow.clock + 1, 7))
    passed = model.station(keepalive).of("passed")
    assert [(s.seq, s.ack) for s in passed] == [(flow.station_seq - 1, BASE + MSS)]
    assert model.stats()["station_acks_passed"] >= 1


def test_an_upload_to_a_slow_reader_keeps_probing_the_closed_window(model: Model) -> None:
    """The station uploads; the server's reader is slow and its window closes. The station's
    zero-window probes (Linux: a pure ACK at snd_una - 1) must reach the server, whose answers
    reopen the window; consumed, the upload would wait for good."""
    flow = Connection(model)
    upload = flow.ack(BASE, payload=1000)
    assert model.station(upload).of("passed")  # data always passes
    model.sender(Segment(SERVER, STATION, BASE, flow.station_seq, ACK, 0, 0, (flow.clock + 1, 7)))  # window 0
    probe = Segment(STATION, SERVER, flow.station_seq - 1, BASE, ACK, 512, 0, (flow.clock + 2, 7))
    for _ in range(3):
        assert [s.seq for s in model.station(probe).of("passed")] == [flow.station_seq - 1]


def test_a_bare_fin_sent_again_after_its_ack_was_lost_is_answered(model: Model) -> None:
    """The server's bare FIN reached the station, whose ACK passed to the server and was lost on
    the wire; the server sends the FIN again. The station's ACK of the copy is no news to the AP
    (it would stop there), so the AP answers the FIN itself, as it does for data sent again."""
    flow = Connection(model)
    flow.send(0)
    model.air()
    fin = Segment(SERVER, STATION, BASE + MSS, flow.station_seq, ACK | FIN, 502, 0, (flow.clock + 1, 7))
    model.sender(fin)
    model.air()
    model.station(flow.ack(BASE + MSS + 1))  # ahead of the AP: passed, and lost after the AP
    again = model.sender(Segment(SERVER, STATION, BASE + MSS, flow.station_seq, ACK | FIN, 502, 0, (flow.clock + 2, 7)))
    assert acks(again) == [MSS + 1]
    assert not again.of("radio")  # not sent to the station again


CWR = 0x80


def test_a_late_ece_is_not_echoed_after_the_senders_cwr(model: Model) -> None:
    """Linux's receiver sets ECE on every ACK from a CE mark until a segment with CWR reaches it
    (RFC 3168 6.1.3). The sender reduces its window once and marks its next segment CWR; the
    station's ACKs sent before that segment arrived still carry ECE. Echoed on the AP's ACKs of
    data after the CWR, they would read as new congestion: a second reduction. A station ECE on
    an ACK that covers the CWR segment is a new mark, and is echoed."""
    flow = Connection(model)
    flow.send(0, MSS)
    model.air()
    model.station(flow.ack(BASE + MSS, flags=ACK | ECE))
    assert [a.flags & ECE for a in model.air().of("to_sender")] == [ECE]
    cwr = flow.data(2 * MSS, flags=ACK | CWR)
    model.sender(cwr)
    model.station(flow.ack(BASE + 2 * MSS, flags=ACK | ECE))  # sent before the CWR segment reached it
    assert [a.flags & ECE for a in model.air().of("to_sender")] == [0]  # the AP's ACK of the CWR segment
    flow.send(3 * MSS)
    model.station(flow.ack(BASE + 3 * MSS, flags=ACK | ECE))  # covers the CWR segment: a new CE
    assert [a.flags & ECE for a in model.air().of("to_sender")] == [ECE]


def test_a_frame_the_mac_confirms_out_of_order_is_acknowledged_with_those_before_it(model: Model) -> None:
    """A block ACK may confirm a later MPDU first. The AP acknowledges only what the station has
    without a gap: nothing while the frame before is pending, then both at once."""
    flow = Connection(model)
    flow.send(0, MSS, 2 * MSS)
    assert acks(model.air_at(1)) == []  # the second segment first: the first is still pending
    assert acks(model.air()) == [2 * MSS]  # the first: both
    assert acks(model.air()) == [3 * MSS]
    stats = model.stats()
    assert stats["delivered_over_air"] == 3


def test_copies_that_outlive_the_queue_are_resent_without_giving_up(model: Model) -> None:
    """A copy dropped for its age in a slow cell's queue says nothing of the station: it is sent
    again every time, and counts towards nothing (before, the fourth expiry abandoned the flow
    and the data the AP had acknowledged). The air's failures still count towards the timer."""
    flow = Connection(model)
    flow.send(0)
    for _ in range(3 * MAX_RESENDS):
        assert [s.seq - BASE for s in model.expire().of("radio")] == [0]
    assert acks(model.air()) == [MSS]
    stats = model.stats()
    assert stats["flows_abandoned"] == 0 and stats["most_resends"] == 0
    flow.send(MSS)
    for _ in range(MAX_RESENDS):
        assert [s.seq - BASE for s in model.drop().of("radio")] == [MSS]
    assert not model.drop().of("radio")  # the air failed a fifth time: the timer resends it
    assert model.stats()["flows_abandoned"] == 0
