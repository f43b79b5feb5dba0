"""Each transport knob acts: deterministic client/server runs on a virtual clock.

Two aioquic ``QuicConnection`` objects exchange datagrams in memory (no sockets, no real
time) over a link with a 20 ms RTT; every assertion is about numbers.
"""

from __future__ import annotations

import pytest

from quicbed.apps.quic import aioquic_hooks
from quicbed.apps.quic.profiles import get_profile
from quicbed.apps.quic.virtual_link import DOWN, UP, Datagram, VirtualLink

ONE_WAY = 0.010  # 20 ms RTT
RATE = 50e6  # 1250-byte packets 0.2 ms apart: ten arrive well within min_rtt/4 = 5 ms


def _ack_frames_per_packet(profile_name: str, size: int = 1_200_000, after: int = 100) -> tuple[float, float]:
    """ACK frames the client sent per ack-eliciting packet received: up to ``after``
    packets, and from then on."""
    link = VirtualLink(get_profile(profile_name), delay=ONE_WAY, rate=RATE)
    link.handshake()
    counters = link.client_hooks.counters
    start = (counters.ack_eliciting_packets_received, counters.ack_frames_sent)
    link.request(size)
    snapshot: list[tuple[int, int]] = []

    def done() -> bool:
        if not snapshot and counters.ack_eliciting_packets_received - start[0] >= after:
            snapshot.append((counters.ack_eliciting_packets_received, counters.ack_frames_sent))
        return link.response_complete

    link.run_until(done)
    ((received_at, acks_at),) = snapshot
    early = (acks_at - start[1]) / (received_at - start[0])
    late = (counters.ack_frames_sent - acks_at) / (counters.ack_eliciting_packets_received - received_at)
    assert link.server_hooks.counters.packets_lost == 0
    return early, late


def test_ack_frequency_quic_every_second_packet() -> None:
    early, late = _ack_frames_per_packet("quic")
    assert early == pytest.approx(0.5, abs=0.03)
    assert late == pytest.approx(0.5, abs=0.01)


def test_ack_frequency_bquic_every_tenth_after_first_hundred() -> None:
    early, late = _ack_frames_per_packet("bquic")
    # the first 100 packets are acknowledged like quic's (slow start not slowed) ...
    assert early == pytest.approx(0.5, abs=0.03)
    # ... then one ACK per 10 packets: min_rtt/4 (5 ms) does not cut the decimation short
    assert late == pytest.approx(0.1, abs=0.01)


def test_ack_frequency_aioquic_native_is_timer_driven() -> None:
    _, late = _ack_frames_per_packet("aioquic")
    # 1 ms timer at one packet per 0.2 ms: neither every 2nd nor every 10th packet
    assert 0.12 < late < 0.3


def _request_ack_delay(profile_name: str, **knobs: object) -> float:
    """How long the server held the ACK of the client's single request packet."""
    link = VirtualLink(get_profile(profile_name, overrides=knobs), delay=ONE_WAY)
    link.handshake()
    link.run_for(0.2)
    up_before, down_before = len(link.sent[UP]), len(link.sent[DOWN])
    link.request(1000)
    link.run_until(lambda: link.response_complete)
    link.run_for(0.1)
    request = link.sent[UP][up_before]
    ack_only = [d for d in link.sent[DOWN][down_before:] if d.size < 60]
    return ack_only[0].sent_at - (request.sent_at + ONE_WAY)


def test_delayed_ack_timer_max_ack_delay_and_rtt_fraction() -> None:
    # quic: a lone packet waits the full max_ack_delay
    assert _request_ack_delay("quic") == pytest.approx(0.025, abs=1e-5)
    assert _request_ack_delay("quic", max_ack_delay="10ms") == pytest.approx(0.010, abs=1e-5)
    # bquic: min(25 ms, min_rtt / 4) with min_rtt = 20 ms
    assert _request_ack_delay("bquic") == pytest.approx(0.005, abs=1e-5)
    assert _request_ack_delay("bquic", ack_delay_rtt_fraction="1/2") == pytest.approx(0.010, abs=1e-5)


def test_max_ack_delay_is_advertised_to_the_peer() -> None:
    link = VirtualLink(
        get_profile("quic", overrides={"max_ack_delay": "40ms"}), server_profile=get_profile("quic"), delay=ONE_WAY
    )
    link.handshake()
    link.run_for(0.1)
    assert link.server.connection._loss.max_ack_delay == pytest.approx(0.040)
    assert link.client.connection._loss.max_ack_delay == pytest.approx(0.025)


def _gap_reaction(immediate: bool) -> tuple[int, float | None, int]:
    """Drop one server datagram once decimation is on; return the client's immediate-ACK
    count, the time from the next arrival to the client's next datagram, and the
    scheduler's pending count right after that arrival."""
    holder: dict[str, VirtualLink] = {}
    state: dict[str, float | int | None] = {"dropped": None}

    def lose(datagram: Datagram) -> bool:
        link = holder["link"]
        scheduler = link.client_hooks.scheduler
        assert scheduler is not None
        if (
            datagram.direction == DOWN
            and state["dropped"] is None
            and scheduler.received > 150
            and scheduler.pending == 1
        ):
            state["dropped"] = datagram.index
            return True
        return False

    profile = get_profile("bquic", overrides={"immediate_ack_on_gap": immediate})
    link = VirtualLink(profile, delay=ONE_WAY, rate=RATE, lose_on_arrival=lose)
    holder["link"] = link
    link.handshake()
    link.request(600_000)
    link.run_until(lambda: state["dropped"] is not None)
    client = link.client
    delivered = link.delivered[DOWN]
    releases = len(client.releases)
    link.run_until(lambda: link.delivered[DOWN] > delivered)  # the datagram after the gap
    arrival = link.now
    pending = link.client_hooks.scheduler.pending  # type: ignore[union-attr]
    link.run_until(lambda: len(client.releases) > releases)
    reaction = client.releases[releases].time - arrival
    return link.client_hooks.counters.immediate_acks, reaction, pending


def test_immediate_ack_on_gap() -> None:
    immediate, reaction, pending = _gap_reaction(immediate=True)
    assert immediate == 1  # exactly the one gap (the handshake's gap-free)
    assert reaction == 0.0  # the ACK left in the same instant the gap showed
    assert pending == 0

    immediate, reaction, pending = _gap_reaction(immediate=False)
    assert immediate == 0
    assert pending == 2  # the packet after the gap just waits for the 10-packet rule
    assert reaction is not None and reaction > 0.0


def _first_flight(profile_name: str, **knobs: object) -> tuple[list[int], float, float]:
    """Datagrams per ``datagrams_to_send`` call of the server's first RTT of response, the
    time it took to send the first 10 response datagrams, and the pacer's packet time."""
    link = VirtualLink(get_profile(profile_name, overrides=knobs), delay=ONE_WAY)
    link.handshake()
    link.run_for(0.2)
    packet_time = link.server.connection._loss._pacer.packet_time or 0.0
    releases_before, sent_before = len(link.server.releases), len(link.sent[DOWN])
    link.request(200_000)
    link.run_until(lambda: len(link.sent[DOWN]) >= sent_before + 10)
    first_sent = link.sent[DOWN][sent_before].sent_at
    link.run_for(first_sent + 2 * ONE_WAY - link.now - 1e-4)
    counts = [r.count for r in link.server.releases[releases_before:] if r.time < first_sent + 2 * ONE_WAY]
    spread = link.sent[DOWN][sent_before + 9].sent_at - first_sent
    return counts, spread, packet_time


def test_pacing_spreads_the_first_flight() -> None:
    counts, spread, packet_time = _first_flight("quic")
    # cwnd ~13 kB over srtt 20 ms: one 1200-B packet per ~1.85 ms after a 3-packet bucket
    assert packet_time == pytest.approx(0.00185, abs=0.0001)
    assert counts[0] == 3 and max(counts) <= 3
    assert spread == pytest.approx(7 * packet_time, rel=0.01)

    counts, spread, _ = _first_flight("quic", pacing=False)
    assert counts[0] >= 10  # the whole initial window in one call
    assert spread == 0.0

    counts, spread, _ = _first_flight("bquic")
    assert counts[0] >= 10 and spread == 0.0
    counts, spread, packet_time = _first_flight("bquic", pacing=True)
    assert max(counts) <= 3 and spread == pytest.approx(7 * packet_time, rel=0.06)


def _slow_start(profile_name: str, rtt_increase: float) -> tuple[int | None, int, int]:
    """Run slow start for 70 ms, raise the RTT by ``rtt_increase`` (fraction), run 80 ms
    more; return the server's ssthresh and cwnd before and after."""
    link = VirtualLink(get_profile(profile_name), delay=ONE_WAY)
    link.handshake()
    link.request(3_000_000)
    link.run_for(0.070)
    cc = link.server.connection._loss._cc
    assert cc.ssthresh is None
    cwnd_before = cc.congestion_window
    link.delay[UP] += ONE_WAY * rtt_increase
    link.delay[DOWN] += ONE_WAY * rtt_increase
    link.run_for(0.080)
    assert not link.response_complete  # still sending: not application-limited
    assert link.server_hooks.counters.packets_lost == 0
    return cc.ssthresh, cwnd_before, cc.congestion_window


def test_slow_start_exit_on_rtt_increase() -> None:
    # quic leaves slow start when RTT grows by more than 1/8: +30 % does it, within an RTT
    ssthresh, cwnd_before, _ = _slow_start("quic", 0.30)
    assert ssthresh is not None and ssthresh < 2.5 * cwnd_before
    # same run without the increase: still in slow start
    ssthresh, _, _ = _slow_start("quic", 0.0)
    assert ssthresh is None
    # bquic tolerates up to 1/2: +30 % leaves it in slow start, cwnd keeps doubling
    ssthresh, cwnd_before, cwnd_after = _slow_start("bquic", 0.30)
    assert ssthresh is None and cwnd_after > 4 * cwnd_before
    # ... but not +60 %
    ssthresh, _, _ = _slow_start("bquic", 0.60)
    assert ssthresh is not None


def _reordered_response(
    profile_name: str, extra: float, size: int = 2000, **knobs: object
) -> tuple[int, list[float], float]:
    """Delay the first packet of a response (two packets by default) by ``extra`` s: the
    later ones are acked first. Return packets the server declared lost, when (s after
    sending), and the RTT estimate loss detection used."""
    target: dict[str, int] = {}

    def impair(datagram: Datagram) -> float:
        return extra if datagram.direction == DOWN and datagram.index == target.get("i") else 0.0

    link = VirtualLink(get_profile(profile_name, overrides=knobs), delay=ONE_WAY, impair=impair)
    link.handshake()
    link.run_for(0.2)
    loss = link.server.connection._loss
    rtt_estimate = max(loss._rtt_latest, loss._rtt_smoothed)
    target["i"] = len(link.sent[DOWN])
    link.request(size)
    link.run_until(lambda: link.response_complete)
    link.run_for(0.2)
    first = link.sent[DOWN][target["i"]]
    packets = -(-size // 1150)
    retransmissions = [d.sent_at - first.sent_at for d in link.sent[DOWN][target["i"] + packets :] if d.size > 1000]
    return link.server_hooks.counters.packets_lost, retransmissions, rtt_estimate


def test_loss_time_threshold() -> None:
    # The second packet's ACK reaches the server after 1 RTT (20 ms); the first packet's
    # after 20 ms + extra. quic gives up at 9/8 RTT = 22.5 ms, bquic at 5/4 = 25 ms.
    lost, retransmitted, rtt = _reordered_response("quic", 0.004)
    assert rtt == pytest.approx(0.020, abs=1e-4)
    assert lost == 1
    assert retransmitted == [pytest.approx(9 / 8 * rtt, abs=1e-5)]

    lost, retransmitted, _ = _reordered_response("bquic", 0.004)
    assert lost == 0 and retransmitted == []

    lost, retransmitted, rtt = _reordered_response("bquic", 0.006)
    assert lost == 1 and retransmitted == [pytest.approx(5 / 4 * rtt, abs=1e-5)]

    lost, _, _ = _reordered_response("quic", 0.001)  # inside both thresholds
    assert lost == 0
    # the knob alone: quic with bquic's threshold behaves like bquic
    lost, _, _ = _reordered_response("quic", 0.004, loss_time_threshold="5/4")
    assert lost == 0


def test_loss_packet_threshold() -> None:
    # bquic sends a 10-packet response back to back; the first arrives 1 ms late, within
    # the time threshold, after 9 later ones: the packet threshold (3) declares it lost.
    lost, retransmitted, _ = _reordered_response("bquic", 0.001, size=11_000)
    assert lost == 1 and len(retransmitted) == 1
    assert retransmitted[0] == pytest.approx(0.020, abs=0.001)  # on the first ACK round
    lost, retransmitted, _ = _reordered_response("bquic", 0.001, size=11_000, loss_packet_threshold=20)
    assert lost == 0 and retransmitted == []


def test_delay_increase_monitor_thresholds() -> None:
    def exits(rtt_increase: float, samples: list[float]) -> bool:
        monitor = aioquic_hooks.DelayIncreaseMonitor(rtt_increase)
        return any(monitor.is_rtt_increasing(now=1.0 + i * 0.002, rtt=rtt) for i, rtt in enumerate(samples))

    base = [0.020] * 10
    assert exits(1 / 8, base + [0.0226] * 5)  # +13 % for 5 samples
    assert not exits(1 / 8, base + [0.0224] * 5)  # +12 %
    assert not exits(1 / 8, base + [0.0226] * 4 + [0.020])  # one sample back at min
    assert not exits(1 / 8, base + [0.026] * 4)  # only 4 samples
    assert not exits(1 / 2, base + [0.026] * 20)  # +30 % under bquic's threshold
    assert exits(1 / 2, base + [0.0302] * 5)  # +51 %
    # samples closer than 1 ms count once, like aioquic's monitor
    monitor = aioquic_hooks.DelayIncreaseMonitor(1 / 8)
    for rtt in base:
        monitor.is_rtt_increasing(now=1.0, rtt=rtt)
    assert monitor.min_rtt == 0.020 and not any(monitor.is_rtt_increasing(now=1.0005, rtt=0.030) for _ in range(10))


def test_slow_start_exit_knob_selects_the_congestion_controller() -> None:
    from aioquic.quic.congestion.base import QuicRttMonitor, create_congestion_control

    names = {name: aioquic_hooks.congestion_control_name(get_profile(name)) for name in ("aioquic", "quic", "bquic")}
    assert names == {"aioquic": "reno", "quic": "cubic+ssexit=0.125", "bquic": "cubic+ssexit=0.5"}
    assert type(create_congestion_control("reno", max_datagram_size=1200)._rtt_monitor) is QuicRttMonitor
    monitor = create_congestion_control(names["bquic"], max_datagram_size=1200)._rtt_monitor
    assert isinstance(monitor, aioquic_hooks.DelayIncreaseMonitor)
    assert monitor.rtt_increase == 0.5
    reno = aioquic_hooks.congestion_control_name(get_profile("bquic", overrides={"congestion_control": "reno"}))
    assert reno == "reno+ssexit=0.5"
    assert type(create_congestion_control(reno, max_datagram_size=1200)).__mro__[1].__name__ == "RenoCongestionControl"


def test_profiles_do_not_leak_between_connections() -> None:
    from aioquic.quic import recovery

    quic = VirtualLink(get_profile("quic"), delay=ONE_WAY)
    bquic = VirtualLink(get_profile("bquic"), delay=ONE_WAY)
    assert recovery.K_TIME_THRESHOLD == 9 / 8 and recovery.K_PACKET_THRESHOLD == 3
    assert type(quic.server.connection._loss._pacer) is not aioquic_hooks.NoPacer
    assert type(bquic.server.connection._loss._pacer) is aioquic_hooks.NoPacer
    assert quic.server.connection._loss._detect_loss.__func__.__globals__["K_TIME_THRESHOLD"] == 9 / 8
    assert bquic.server.connection._loss._detect_loss.__func__.__globals__["K_TIME_THRESHOLD"] == 5 / 4
