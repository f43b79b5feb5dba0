"""Per-run metrics on the committed captures and on tiny synthetic packet lists.

Expected values for the captures were computed independently of quicbed with tcpdump
4.99.3 and awk/join on its text output (the scripts are quoted in the tests), with the
same definitions:

* data packets, QUIC: ``tcpdump -ttnr F 'src host 10.0.0.2 and udp and udp[8] & 0x80 == 0
  and udp[4:2] - 8 > 48'``; TCP: ``'src host 10.0.0.2 and tcp[tcpflags] & (tcp-syn|tcp-rst)
  == 0 and (ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2)) > 0'``;
* then ``awk '{n++; t=$1; if (n==1) first=t; if (n>1 && t-prev < 0.0001) short++; prev=t;
  sub(/.*length /,""); bytes+=$1} END {...}'`` for counts, first/last time, payload bytes
  and back-to-back gaps;
* one-way delays and losses: ``tcpdump -ttvnr`` of both captures, the "id N" of each data
  packet, ``sort | join`` on the ID (and ``join -v1`` for the lost ones);
* ACKs: client -> server packets with no payload and no SYN/FIN/RST (TCP) or any 1-RTT
  datagram (QUIC: ``'src host 10.0.0.1 and udp and udp[8] & 0x80 == 0'``, whatever its
  size), counted from the first data packet's time on;
* IDI: a plain loop over the tcpdump times (Python ``decimal`` differences,
  ``statistics.variance`` of every sum of k consecutive gaps / (k * mean gap^2)).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from quicbed.analysis import matching, metrics
from quicbed.analysis.packets import ACK, FIN, PSH, SYN, Packet, read_pcap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"


def _load(name: str) -> tuple[list[Packet], list[Packet], metrics.FlowKey]:
    server = read_pcap(FIXTURES / name / "server.pcap")
    client = read_pcap(FIXTURES / name / "client.pcap")
    return server, client, metrics.main_flow(client)


# --------------------------------------------------------------------------- fixtures

# name: (side, data packets, first, last, payload bytes, gaps < 100 us, ACKs from first data,
# IP bytes). IP bytes: TCP's from tcpdump -v (the IP lengths of the server port's packets with
# payload); QUIC's are the payload and 28 bytes (IPv4, UDP) per datagram.
TCPDUMP = {
    # quic: 118 client datagrams of <= 48 bytes, and 5 larger 1-RTT ones (its request, 76
    # bytes, and four of 77 bytes), all of them ACK-carrying packets now
    ("quic", "server"): (233, 1795257016.322590, 1795257016.477310, 208400, 98, 123, 208400 + 233 * 28),
    ("quic", "client"): (233, 1795257016.322606, 1795257016.502510, 208400, 11, 123, 208400 + 233 * 28),
    ("bquic", "server"): (245, 1795257021.326307, 1795257021.595105, 212384, 107, 124, 212384 + 245 * 28),
    ("bquic", "client"): (240, 1795257021.326321, 1795257021.595128, 208636, 33, 124, 208636 + 240 * 28),
    ("tcp", "server"): (141, 1795257025.927792, 1795257026.091776, 201652, 65, 92, 208984),
    ("tcp", "client"): (140, 1795257025.927805, 1795257026.092972, 200204, 0, 92, 207484),
}


@pytest.mark.parametrize("key", sorted(TCPDUMP))
def test_data_packets_throughput_gaps_and_acks_match_tcpdump(key: tuple[str, str]) -> None:
    name, side = key
    count, first, last, payload, short, acks, ip_bytes = TCPDUMP[key]
    server, client, flow = _load(name)
    capture = server if side == "server" else client
    assert flow == (SERVER, 4433 if name != "tcp" else 8080, CLIENT, flow[3], "tcp" if name == "tcp" else "udp")
    data = metrics.data_packets(capture, flow)
    assert len(data) == count
    assert data[0].ts == pytest.approx(first, abs=1e-6)
    assert data[-1].ts == pytest.approx(last, abs=1e-6)
    duration = round(last - first, 6)
    assert metrics.transfer_time(data) == pytest.approx(duration, abs=1e-9)
    assert sum(p.payload_len for p in data) == payload
    assert metrics.throughput(data) == pytest.approx(8 * ip_bytes / duration, rel=1e-9)
    gaps = metrics.inter_packet_times(data)
    assert len(gaps) == count - 1
    assert metrics.short_gap_share(gaps) == pytest.approx(short / (count - 1))
    assert metrics.ack_ratio(capture, flow) == pytest.approx(acks / count)


def test_goodput_uses_the_application_bytes_of_the_record() -> None:
    _, client, flow = _load("quic")
    data = metrics.data_packets(client, flow)
    record = json.loads((FIXTURES / "quic/client.json").read_text())
    assert record["bytes"] == 200_000
    # 200 kB over first -> last data packet at the client (0.179904 s, tcpdump above)
    assert metrics.throughput(data, record["bytes"]) == pytest.approx(8 * 200_000 / 0.179904)


def test_loss_and_one_way_delay_match_the_ip_id_join() -> None:
    # sort/join on the IP ID of the data packets of both captures (module docstring):
    #   quic : matched 233, mean OWD 0.0206609 s, min 0.000006, max 0.026748, none lost
    #   bquic: matched 240, mean 0.0079959, min 0.000004, max 0.029577, lost IDs 35101 35102
    #          35125 35128 35133
    #   tcp  : matched 140, mean 0.0239926, min 0.000013, max 0.030255, lost ID 18902
    expected = {
        "quic": (233, 0.0206609, 0.000006, 0.026748, []),
        "bquic": (240, 0.0079959, 0.000004, 0.029577, [35101, 35102, 35125, 35128, 35133]),
        "tcp": (140, 0.0239926, 0.000013, 0.030255, [18902]),
    }
    for name, (matched, mean, low, high, lost_ids) in expected.items():
        server, client, flow = _load(name)
        sent, received = metrics.data_packets(server, flow), metrics.data_packets(client, flow)
        delays = matching.one_way_delays(sent, received)
        assert np.count_nonzero(~np.isnan(delays)) == matched, name
        assert np.nanmean(delays) == pytest.approx(mean, abs=5e-8), name
        assert np.nanmin(delays) == pytest.approx(low, abs=1e-9)
        assert np.nanmax(delays) == pytest.approx(high, abs=1e-9)
        assert [p.ip_id for p in matching.lost_packets(sent, received)] == lost_ids
        assert matching.loss_rate(sent, received) == pytest.approx(len(lost_ids) / len(sent))
        assert matching.out_of_order_rate(sent, received) == 0.0  # one FIFO queue: no reordering


def test_bquic_losses_in_the_captures_are_the_losses_in_the_qlog() -> None:
    # zcat bquic/server.qlog.gz | grep -o '"recovery:packet_lost"' | wc -l  ->  5
    server, client, flow = _load("bquic")
    lost = matching.lost_packets(metrics.data_packets(server, flow), metrics.data_packets(client, flow))
    assert len(lost) == 5


def test_tcp_retransmission_shows_as_out_of_sequence_at_the_client() -> None:
    server, client, flow = _load("tcp")
    received = metrics.data_packets(client, flow)
    # one segment was lost and retransmitted: its retransmission arrives after segments
    # with higher sequence numbers, and nothing else does
    assert matching.tcp_out_of_sequence_rate(received) == pytest.approx(1 / 140)
    lost = matching.lost_packets(metrics.data_packets(server, flow), received)
    resent = [p for p in received if p.tcp_seq == lost[0].tcp_seq]
    assert len(resent) == 1 and resent[0].ip_id != lost[0].ip_id


@pytest.mark.parametrize(
    ("name", "side", "expected"),
    [
        # naive loop over tcpdump times: k = 1, 2, 5, 10
        ("quic", "server", (2.379041, 1.728527, 1.270371, 0.955732)),
        ("quic", "client", (0.609228, 0.311777, 0.231083, 0.273003)),
        ("bquic", "server", (3.554374, 3.595286, 4.347574, 6.116052)),
        ("bquic", "client", (1.530682, 1.404641, 1.569208, 1.954072)),
        ("tcp", "server", (4.574234, 2.431908, 1.396622, 1.226124)),
        ("tcp", "client", (0.017208, 0.020265, 0.008171, 0.004304)),
    ],
)
def test_idi_of_the_captures(name: str, side: str, expected: tuple[float, ...]) -> None:
    server, client, flow = _load(name)
    gaps = metrics.inter_packet_times(metrics.data_packets(server if side == "server" else client, flow))
    values = [metrics.idi(gaps, k) for k in (1, 2, 5, 10)]
    assert values == pytest.approx(expected, abs=1e-6)


def test_download_time_from_both_record_kinds() -> None:
    quic = json.loads((FIXTURES / "quic/client.json").read_text())
    assert metrics.download_time(quic) == quic["completion_time"]
    curl = json.loads((FIXTURES / "tcp/curl.json").read_text())
    assert metrics.download_time(curl) == pytest.approx(curl["time_total"] - curl["time_pretransfer"])
    with pytest.raises(ValueError):
        metrics.download_time({"something": 1})


def test_run_metrics_summary_of_the_bquic_run() -> None:
    """The response window: the request left at R = started_at + objects[0].start =
    1795257021.3248298 (client.json). From R on, data packets (the tcpdump filter of the module
    docstring, ``awk '$1 >= R'``) have an upper median of 1200 bytes; the first, 259 bytes at
    .326307 (server), is the handshake's tail (HANDSHAKE_DONE, tickets), sent 8.5 ms before
    the response; the window starts at the next, the first of at least 600 bytes:
    server 244 packets from .334819, client 239 from .334846 to .595128 with 208377 bytes
    (215069 IP bytes: 28 more per datagram) (0.260282 s). Join on the IP ID of those: 239 matched, mean OWD 0.0080293 s, the same 5
    lost IDs. ACKs: client 1-RTT datagrams from .334846 on: 123."""
    server, client, _ = _load("bquic")
    record = json.loads((FIXTURES / "bquic/client.json").read_text())
    summary = metrics.run_metrics(server, client, record)
    assert (summary.proto, summary.data_packets_sent, summary.data_packets_received) == ("udp", 244, 239)
    assert summary.loss == pytest.approx(5 / 244)
    assert summary.throughput == pytest.approx(8 * (208377 + 239 * 28) / 0.260282)
    assert summary.transfer_time == pytest.approx(0.260282, abs=1e-9)
    # goodput is the record's: application bytes over the download time
    assert summary.goodput == pytest.approx(8 * 200_000 / record["completion_time"])
    assert summary.owd_mean == pytest.approx(0.0080293, abs=5e-8)
    assert summary.ack_ratio == pytest.approx(123 / 239)
    assert summary.download_time == record["completion_time"]
    assert set(summary.to_dict()) >= {"throughput", "loss", "idi_server", "connections"}
    (connection,) = summary.connections
    assert connection.request_time == pytest.approx(1795257021.3248298)
    assert (connection.data_packets_sent, connection.data_packets_received, connection.lost) == (244, 239, 5)


def test_parallel_capture_has_two_downloads() -> None:
    packets = read_pcap(FIXTURES / "parallel/client.pcap")
    flows = metrics.data_flows(packets)
    assert [flow[4] for flow in flows] == ["udp", "tcp"]  # 416 kB of QUIC payload, 400 kB TCP
    tcp = metrics.data_packets(packets, flows[1])
    assert sum(p.payload_len for p in tcp) == 400_204  # the 400 kB object + 204 B of headers


def test_sequence_frame_of_the_tcp_run() -> None:
    server, client, flow = _load("tcp")
    rows = metrics.sequence_frame(server, client, flow)
    counts = rows["kind"].value_counts().to_dict()
    assert counts == {"sent": 140, "received": 140, "ack": 92, "lost": 1}
    # offsets are sequence numbers relative to the first data byte (the HTTP response)
    offsets = {kind: set(part["offset"]) for kind, part in rows.groupby("kind")}
    assert min(offsets["sent"]) == 0
    # the lost segment was sent again with the same sequence number, so every offset
    # sent arrived in the end
    assert offsets["lost"] <= offsets["sent"] and offsets["received"] == offsets["sent"]
    # the last ACK covers the 204 + 200000 bytes of response and the server's FIN
    assert max(offsets["ack"]) == 204 + 200_000 + 1


# --------------------------------------------------------------------------- synthetic


def _udp(ts: float, ident: int, size: int = 1200, src: str = SERVER, long: bool = False) -> Packet:
    sport, dport = (4433, 5000) if src == SERVER else (5000, 4433)
    dst = CLIENT if src == SERVER else SERVER
    return Packet(
        ts,
        src,
        dst,
        sport,
        dport,
        "udp",
        size + 28,
        size,
        ident,
        ident * 7919,
        quic_long_header=long,
        quic_type="initial" if long else "1rtt",
        ts_ns=round(ts * 1e9),
    )


def test_matching_loss_owd_and_reordering_on_a_handmade_run() -> None:
    sent = [_udp(0.000 + i * 0.001, i) for i in range(10)]
    # 3 and 7 lost; every packet takes 10 ms except 5 (8 ms), which overtakes 4
    received = [_udp(sent[i].ts + (0.008 if i == 5 else 0.010), i) for i in (0, 1, 2, 4, 5, 6, 8, 9)]
    received.sort(key=lambda p: p.ts)
    assert [p.ip_id for p in received] == [0, 1, 2, 5, 4, 6, 8, 9]  # 5 at 13 ms, 4 at 14
    assert [p.ip_id for p in matching.lost_packets(sent, received)] == [3, 7]
    assert matching.loss_rate(sent, received) == pytest.approx(0.2)
    assert matching.loss_bursts(sent, received) == [1, 1]
    delays = matching.one_way_delays(sent, received)
    assert np.isnan(delays[3]) and np.isnan(delays[7])
    assert delays[5] == pytest.approx(0.008) and delays[0] == pytest.approx(0.010)
    # 4 arrives after 5, which the server sent later: 1 of 8 received is out of order
    assert matching.out_of_order_rate(sent, received) == pytest.approx(1 / 8)


def test_loss_bursts_are_runs_of_lost_packets_in_send_order() -> None:
    sent = [_udp(i * 0.001, i) for i in range(12)]
    kept = (0, 4, 5, 7, 8)  # lost: 1-3 (3), 6 (1), 9-11 (3, at the end)
    received = [_udp(sent[i].ts + 0.01, i) for i in kept]
    assert matching.loss_bursts(sent, received) == [3, 1, 3]
    assert matching.loss_bursts(sent, sent) == []
    # the bquic fixture lost IP IDs 35101 35102 35125 35128 35133: one pair, three single
    server, client, flow = _load("bquic")
    assert sorted(matching.loss_bursts(metrics.data_packets(server, flow), metrics.data_packets(client, flow))) == [
        1,
        1,
        1,
        2,
    ]
    assert metrics.run_metrics(server, client, flow=flow).loss_burst_mean == pytest.approx(1.25)


def test_repeated_keys_are_paired_in_order() -> None:
    a, b = _udp(0.0, 1), _udp(0.001, 1)  # same ID and hash (e.g. ID 0 and equal payload)
    assert matching.match([a, b], [_udp(0.01, 1)]) == [0, None]


def test_data_and_ack_classification() -> None:
    assert metrics.is_data(_udp(0, 1, size=49)) and not metrics.is_data(_udp(0, 1, size=48))
    assert not metrics.is_data(_udp(0, 1, long=True))  # handshake is set-up, not data
    assert metrics.is_ack(_udp(0, 1, size=33, src=CLIENT))
    syn = Packet(0, SERVER, CLIENT, 80, 9, "tcp", 60, 0, 0, 0, tcp_flags=SYN | ACK)
    fin_data = Packet(0, SERVER, CLIENT, 80, 9, "tcp", 1000, 948, 0, 0, tcp_flags=FIN | ACK)
    pure_ack = Packet(0, CLIENT, SERVER, 9, 80, "tcp", 52, 0, 0, 0, tcp_flags=ACK)
    fin = Packet(0, CLIENT, SERVER, 9, 80, "tcp", 52, 0, 0, 0, tcp_flags=FIN | ACK)
    assert not metrics.is_data(syn) and metrics.is_data(fin_data)
    assert metrics.is_ack(pure_ack) and not metrics.is_ack(fin) and not metrics.is_ack(syn)
    push = Packet(0, SERVER, CLIENT, 80, 9, "tcp", 100, 48, 0, 0, tcp_flags=PSH | ACK)
    assert metrics.is_data(push)


def test_throughput_and_bins_of_equal_spacing() -> None:
    # 11 packets of 1000 B payload (1028 IP bytes) every 10 ms: 11308 B over 0.1 s = 904.64 kbit/s
    data = [_udp(i * 0.01, i, size=1000) for i in range(11)]
    assert metrics.transfer_time(data) == pytest.approx(0.1)
    assert metrics.throughput(data) == pytest.approx(904_640)
    assert metrics.throughput(data[:1]) != metrics.throughput(data[:1])  # NaN for one packet
    bins = metrics.binned_throughput(data, bin_width=0.05)
    # bins [0,50) ms: 5 packets, [50,100): 5, [100,150): 1
    assert bins["bytes"].tolist() == [5140, 5140, 1028]
    assert bins["throughput"].tolist() == pytest.approx([822_400, 822_400, 164_480])
    assert bins["time"].tolist() == pytest.approx([0, 0.05, 0.1])


def test_idi_of_known_processes() -> None:
    assert metrics.idi(np.full(1000, 0.001), 1) == pytest.approx(0, abs=1e-20)  # equal spacing
    assert metrics.idi(np.full(1000, 0.001), 10) == pytest.approx(0, abs=1e-20)
    rng = np.random.default_rng(12345)
    poisson = rng.exponential(0.001, 200_000)
    for k in (1, 10, 100):
        assert metrics.idi(poisson, k) == pytest.approx(1.0, abs=0.05)  # Poisson: 1 at all k
    # bursts of 10 back-to-back packets (gap 0) every 10 ms, a regular pattern: IDI falls
    # to 0 once k spans a period. k = 1: gaps are 0 (9 of 10) or 10 ms: mean 1 ms,
    # var = 0.1 * 100 - 1 = 9 ms^2 -> 9
    bursty = np.tile(np.r_[np.zeros(9), 0.01], 1000)
    assert metrics.idi(bursty, 1) == pytest.approx(9.0, rel=1e-3)
    # k = 5: half the windows hold the 10 ms gap: Var(S_5) = 0.25 * (10 ms)^2 -> 25/5 = 5
    assert metrics.idi(bursty, 5) == pytest.approx(5.0, rel=1e-3)
    assert metrics.idi(bursty, 10) == pytest.approx(0.0, abs=1e-9)  # every window: 10 ms
    assert math.isnan(metrics.idi([0.1, 0.2], 5))
    curve = metrics.idi_curve(bursty, ks=(1, 10, 100_000))
    assert curve["k"].tolist() == [1, 10]
    with pytest.raises(ValueError):
        metrics.idi(bursty, 0)


def test_short_gaps() -> None:
    assert metrics.short_gap_share([50e-6, 99e-6, 100e-6, 1e-3]) == 0.5
    assert math.isnan(metrics.short_gap_share([]))


def test_ack_ratio_counts_acks_from_the_first_data_packet() -> None:
    packets = [
        _udp(0.000, 1, size=1200, src=CLIENT, long=True),  # handshake: not counted
        _udp(0.001, 2, size=30, src=CLIENT),
    ]  # before data: not counted
    packets += [_udp(0.010 + i * 0.001, 10 + i) for i in range(10)]
    packets += [_udp(0.012 + i * 0.002, 30 + i, size=33, src=CLIENT) for i in range(5)]
    flow = metrics.main_flow(packets)
    assert flow == (SERVER, 4433, CLIENT, 5000, "udp")
    assert metrics.ack_ratio(packets, flow) == pytest.approx(0.5)


def _segment(ts: float, seq: int, length: int = 1000) -> Packet:
    return Packet(
        ts,
        SERVER,
        CLIENT,
        443,
        5000,
        "tcp",
        length + 52,
        length,
        int(ts * 1e6) % 65536,
        seq,
        tcp_flags=0x18,
        tcp_seq=seq,
        tcp_ack=1,
    )


def test_tcp_retransmissions_and_the_spurious_ones() -> None:
    # sequence numbers near the 32-bit wrap; segments of 1000 bytes from base
    base = (1 << 32) - 1500
    sent = [_segment(0.001 * i, (base + 1000 * i) % (1 << 32)) for i in range(6)]
    # segment 2 is lost and resent; segment 4 is resent too early (its original arrived):
    # spurious; the resend of 2 covers 2 and half of 3 (new boundaries)
    sent += [_segment(0.010, (base + 2000) % (1 << 32), 1500), _segment(0.011, (base + 4000) % (1 << 32))]
    received = [sent[i] for i in (0, 1, 3, 4, 5, 6, 7)]
    assert matching.tcp_retransmissions(sent, received) == (2, 1)
    assert matching.tcp_retransmissions([], []) == (0, 0)


def test_the_committed_tcp_run_retransmitted_its_one_lost_segment_and_nothing_spurious() -> None:
    server, client, flow = _load("tcp")
    sent, received = metrics.data_packets(server, flow), metrics.data_packets(client, flow)
    assert len(matching.lost_packets(sent, received)) == 1
    assert matching.tcp_retransmissions(sent, received) == (1, 0)


# --------------------------------------------------------------------------- response window, ACKs, losses

TCP_DATA = (
    "src host 10.0.0.2 and tcp[tcpflags] & (tcp-syn|tcp-rst) == 0 and "
    "(ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2)) > 0"
)


def test_the_tls_download_window_starts_at_the_response() -> None:
    """nginx over TLS 1.3 and quicbed's TCP client (tls/). The request left at R =
    started_at + objects[0].start = 1795676544.5916765 + 0.0032667 = 1795676544.594943
    (client.json). ``tcpdump -ttnr tls/client.pcap TCP_DATA``: the server's flight
    (ServerHello .. Finished, 758 bytes) arrived at .593645, before R; after R come two
    session tickets of 287 bytes (.595105, .595137: OpenSSL sends them on the client's
    Finished, which travelled with the request) and the response from .595322 (1448 bytes;
    upper median of the sizes from R on: 1448). Response window: 140 packets, .595322 to
    .761077, 200513 bytes (207793 IP bytes: tcpdump -v of the server port's packets from
    .595322), 0.165755 s. From the first data packet instead (the old rule):
    143 packets from .593645, 201845 bytes, 0.167432 s. Server capture: 173 packets from
    .595310."""
    server, client, flow = _load("tls")
    record = json.loads((FIXTURES / "tls" / "client.json").read_text())
    assert metrics.request_time(record) == pytest.approx(1795676544.594943, abs=1e-6)
    summary = metrics.run_metrics(server, client, record)
    assert (summary.data_packets_sent, summary.data_packets_received) == (173, 140)
    assert summary.transfer_time == pytest.approx(0.165755, abs=1e-9)
    assert summary.throughput == pytest.approx(8 * 207793 / 0.165755)
    assert summary.connections[0].first == pytest.approx(1795676544.595322, abs=1e-6)
    everything = metrics.data_packets(client, flow)
    assert len(everything) == 143 and metrics.transfer_time(everything) == pytest.approx(0.167432, abs=1e-9)


def test_quic_acks_are_counted_whatever_their_size() -> None:
    """bquic_acks/: 400 kB over BQUIC with 13 losses, so the client's ACK frames carry up to 12
    ranges. The response window at the client starts at .760154 (R = 1795676550.7539694; the
    259-byte HANDSHAKE_DONE packet at .755041 skipped; 437 data packets). ``tcpdump -ttnr
    client.pcap 'src host 10.0.0.1 and udp and udp[8] & 0x80 == 0' | awk '$1 >= 1795676550.760154'``:
    171 1-RTT datagrams, 6 of them larger than 48 bytes (50, 51, 53, 55, 49, 49: ACK frames with
    many ranges). The server's qlog says what they were: 171 1-RTT packets with an ACK frame
    (packet numbers 5-175); number 5 (41 bytes) left the client at .756970, before the
    response, and the client's last datagram (30 bytes, CONNECTION_CLOSE) has none: 170 ACKs
    in the window, 171 counted (the close, as before). A 48-byte limit counted 165."""
    server, client, flow = _load("bquic_acks")
    record = json.loads((FIXTURES / "bquic_acks" / "client.json").read_text())
    summary = metrics.run_metrics(server, client, record)
    assert summary.data_packets_received == 437
    assert summary.ack_ratio == pytest.approx(171 / 437)
    start = metrics.response_data(metrics.data_packets(client, flow), metrics.request_time(record))[0].ts
    back = [p for p in client if p.flow == metrics.reverse(flow) and p.ts >= start and metrics.is_ack(p)]
    assert len(back) == 171 and sum(1 for p in back if p.payload_len > metrics.QUIC_ACK_ONLY_MAX) == 6


def _coalesced(ts: float, src: str, one_rtt: int) -> Packet:
    """A datagram of a 40-byte Handshake packet and a 1-RTT packet of ``one_rtt`` bytes."""
    sport, dport = (4433, 5000) if src == SERVER else (5000, 4433)
    dst = CLIENT if src == SERVER else SERVER
    return Packet(
        ts,
        src,
        dst,
        sport,
        dport,
        "udp",
        28 + 40 + one_rtt,
        40 + one_rtt,
        1,
        2,
        quic_long_header=True,
        quic_type="handshake",
        ts_ns=round(ts * 1e9),
        quic_1rtt_len=one_rtt,
    )


def test_a_handshake_packet_in_front_does_not_hide_1rtt_data_or_acks() -> None:
    assert metrics.is_data(_coalesced(0.0, SERVER, 1100))
    assert not metrics.is_data(_coalesced(0.0, SERVER, 0))
    assert metrics.is_ack(_coalesced(0.0, CLIENT, 30)) and not metrics.is_ack(_coalesced(0.0, CLIENT, 0))
    assert metrics.is_ack(_udp(0, 1, size=120, src=CLIENT))  # a large ACK (many ranges, MAX_DATA)


def test_goodput_is_the_records_bytes_over_its_download_time() -> None:
    """The research brief's goodput: the client record's bytes over its download time (quic/:
    200000 B in completion_time 0.179933262 s), not over the capture's data window."""
    server, client, _ = _load("quic")
    record = json.loads((FIXTURES / "quic" / "client.json").read_text())
    assert metrics.run_metrics(server, client, record).goodput == pytest.approx(8 * 200_000 / 0.17993326200030424)
    assert metrics.goodput(record) == pytest.approx(8 * 200_000 / 0.17993326200030424)


def test_a_spurious_retransmission_is_told_by_its_original_arriving() -> None:
    # segments 0-4 of 1000 bytes; 2 is resent though it arrived (spurious) and the resend is
    # lost; 3 is lost and resent (a real loss); 4 arrives twice because the network duplicated
    # it (no retransmission at all)
    sent = [_segment(0.001 * i, 1000 * i) for i in range(5)]
    sent += [_segment(0.010, 2000), _segment(0.011, 3000)]
    received = [sent[i] for i in (0, 1, 2, 4, 6)] + [sent[4]]
    assert matching.tcp_retransmissions(sent, received) == (2, 1)
