"""iperf3 and ping helpers between namespaces of a rate-limited dumbbell (20 Mbit/s)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from quicbed.apps import iperf, ping
from quicbed.backends.netns import NamespaceNetwork
from quicbed.spec.loader import load_topology

pytestmark = [pytest.mark.needs_root]

ROOT = Path(__file__).resolve().parents[2]
RATE = 20e6


@pytest.fixture(scope="module")
def net() -> Iterator[NamespaceNetwork]:
    topo = load_topology(
        str(ROOT / "topologies" / "dumbbell.py"),
        {
            "rate": "20mbit",
            "delay": "0ms",
            "queue_limit": 100,
            # a deep bucket: late timers on a busy host cost the default 1 ms
            # bucket rate (bench/README.md); these tests compare with the rate
            "burst": 64_000,
        },
    )
    with NamespaceNetwork(topo) as network:
        yield network


@pytest.fixture(scope="module")
def servers(net: NamespaceNetwork, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, iperf.IperfServer]]:
    logs = tmp_path_factory.mktemp("iperf")
    started = {port: iperf.start_server(net.node("server"), port=port, log_dir=logs) for port in (5201, 5202)}
    yield started
    for server in started.values():
        server.stop()


def test_tcp_capacity_probe_measures_the_link(net: NamespaceNetwork) -> None:
    result = iperf.capacity_probe(net.node("client"), net.node("server"), duration=2, port=5210)
    assert result.ok and result.protocol == "tcp" and result.reverse
    assert 0.8 * RATE < result.throughput < 1.03 * RATE
    assert result.retransmits is not None and result.retransmits >= 0
    assert result.bytes_received > 0 and result.duration == pytest.approx(2, abs=0.3)
    assert result.congestion_control


def test_udp_at_a_set_rate(net: NamespaceNetwork, servers: dict[int, iperf.IperfServer]) -> None:
    result = iperf.run(
        net.node("client"), net.node("server").address, port=5201, protocol="udp", rate="5mbit", duration=2
    )
    assert result.protocol == "udp" and result.target_bps == 5e6
    assert result.throughput == pytest.approx(5e6, rel=0.05)
    assert result.lost_packets == 0 and result.lost_percent == 0
    assert result.packets and result.packets > 800  # 5 Mbit/s of 1448-byte datagrams for 2 s
    assert result.jitter is not None and 0 <= result.jitter < 0.01


def test_udp_cross_traffic_takes_its_share(net: NamespaceNetwork, servers: dict[int, iperf.IperfServer]) -> None:
    client, server = net.node("client"), net.node("server")
    cross = iperf.cross_traffic(client, server.address, rate="8mbit", duration=3, port=5202)
    tcp = iperf.run(client, server.address, port=5201, duration=2, reverse=True, omit=0.5)
    background = cross.result()
    assert background.ok, background.error
    assert background.sent_bps == pytest.approx(8e6, rel=0.05)  # iperf3 paces at the set rate
    # datagrams that meet the queue TCP keeps full are dropped: most arrive, never more than sent
    assert 0.5 * background.sent_bps < background.throughput <= 1.01 * background.sent_bps
    assert background.lost_packets is not None and background.lost_packets >= 0
    # TCP gets roughly what is left of the 20 Mbit/s
    assert tcp.throughput < 0.75 * RATE
    assert tcp.throughput + background.throughput < 1.05 * RATE


def test_iperf_errors_are_reported(net: NamespaceNetwork) -> None:
    with pytest.raises(iperf.IperfError, match="unable to connect"):
        iperf.run(net.node("client"), net.node("server").address, port=5299, duration=1)
    result = iperf.run(net.node("client"), net.node("server").address, port=5299, duration=1, check=False)
    assert not result.ok and result.throughput is None


def test_ping_rtt_probe(net: NamespaceNetwork) -> None:
    result = ping.ping(net.node("client"), net.node("server").address, count=10, interval=0.02)
    assert result.error is None
    assert result.transmitted == 10 and result.received == 10 and result.loss == 0
    assert len(result.rtts) == 10 and [r.seq for r in result.replies] == list(range(1, 11))
    assert 0 < result.min <= result.avg <= result.max < 0.05
    assert result.min == pytest.approx(min(result.rtts), abs=2e-6)
    assert all(r.time for r in result.replies)


def test_ping_to_nowhere_is_all_lost(net: NamespaceNetwork) -> None:
    result = ping.ping(net.node("client"), "10.0.0.99", count=3, interval=0.05, reply_timeout=0.5)
    assert result.transmitted == 3 and result.received == 0 and result.loss == 1.0
    assert result.rtts == [] and result.avg is None


def test_rtt_grows_under_load(net: NamespaceNetwork, servers: dict[int, iperf.IperfServer]) -> None:
    """A background ping sees the bottleneck queue fill under a saturating UDP flow."""
    client, server = net.node("client"), net.node("server")
    idle = ping.ping(client, server.address, count=5, interval=0.02)
    probe = ping.start(client, server.address, count=40, interval=0.025)
    flood = iperf.run(client, server.address, port=5201, protocol="udp", rate="30mbit", duration=1.5, reverse=True)
    loaded = probe.result()
    assert flood.ok
    assert loaded.received >= 20
    # 100 packets of 1.5 kB queued at 20 Mbit/s: ~60 ms of queueing at the peak
    assert max(loaded.rtts) > idle.max + 0.02
    assert statistics.median(loaded.rtts) > idle.avg


def test_background_probes_remove_their_scratch_folders(
    net: NamespaceNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: dict[int, iperf.IperfServer]
) -> None:
    """Without a log folder, a background iperf3 or ping writes into a folder of its own, which
    goes once its output has been read (result() or stop())."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    client, server = net.node("client"), net.node("server")
    probe = ping.start(client, server.address, count=3, interval=0.05)
    cross = iperf.cross_traffic(client, server.address, rate="1mbit", duration=1, port=5202)
    assert len(list(tmp_path.glob("quicbed-*"))) == 2  # they are writing
    assert probe.result().received == 3
    assert cross.result().ok
    stopped = iperf.cross_traffic(client, server.address, rate="1mbit", duration=5, port=5202)
    stopped.stop()
    assert list(tmp_path.glob("quicbed-*")) == []
    late = iperf.cross_traffic(client, server.address, rate="1mbit", duration=5, port=5202)
    assert "did not finish" in (late.result(timeout=0.2).error or "")  # given up on: its folder goes too
    assert list(tmp_path.glob("quicbed-*")) == []


@pytest.mark.parametrize("lost", ["reply", "request"])
def test_a_udp_test_whose_stream_set_up_was_lost_is_started_again(net: NamespaceNetwork, lost: str) -> None:
    """iperf3 sets a UDP stream up with one 4-byte datagram each way and never resends them:
    nftables drops the first of one kind on arrival (the server's reply at the client, or the
    client's request at the server: then iperf3 waits 30 s for the reply and is stopped at the
    test's limit, 8 s: room for a 1 s test on a busy machine), and the test is started again
    and measures."""
    port = 5203
    # (on arrival: a datagram dropped on its way out fails the sender's write, unlike a loss)
    node, match = (
        (net.node("client"), f"udp sport {port}") if lost == "reply" else (net.node("server"), f"udp dport {port}")
    )
    table = "quicbed_test_setup_loss"
    node.run(["nft", "add", "table", "inet", table])
    try:
        node.run(["nft", "add", "chain", "inet", table, "input", "{ type filter hook input priority 0; }"])
        # a quota of 40 bytes: the first 4-byte datagram (32 bytes of IP) and no other
        node.run(
            [
                "nft",
                "add",
                "rule",
                "inet",
                table,
                "input",
                *match.split(),
                "udp",
                "length",
                "12",
                "quota",
                "until",
                "40",
                "bytes",
                "counter",
                "drop",
            ]
        )
        with iperf.start_server(net.node("server"), port=port):
            result = iperf.run(
                net.node("client"),
                net.node("server").address,
                port=port,
                protocol="udp",
                rate="2mbit",
                duration=1,
                reverse=True,
                timeout=8,
            )
        ruleset = node.run(["nft", "list", "table", "inet", table]).stdout
    finally:
        node.run(["nft", "delete", "table", "inet", table], check=False)
    assert "packets 1 " in ruleset, ruleset  # one datagram was dropped
    assert result.ok and result.attempts == 2, result
    assert result.throughput == pytest.approx(2e6, rel=0.1)
