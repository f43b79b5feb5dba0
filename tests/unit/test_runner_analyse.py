"""Per-run metrics from a run folder's artifacts (real captures, qlog and ss samples)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from quicbed.analysis import metrics
from quicbed.analysis.catalogue import METRICS
from quicbed.analysis.mac import summarise_node
from quicbed.analysis.packets import read_pcap
from quicbed.analysis.qlog import summarize_qlog
from quicbed.runner.analyse import (
    CwndSeries,
    bdp_metrics,
    competitor_metrics,
    download_flow,
    mac_metrics,
    measurement_invalid_reasons,
    review_measurement,
    run_metrics_of,
    sender_metrics,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "analysis"


@pytest.fixture
def quic_run(tmp_path: Path) -> Path:
    """A run folder as the runner writes it, from the committed QUIC fixture."""
    for name in ("server.pcap", "client.pcap", "client.json"):
        shutil.copy(FIXTURES / "quic" / name, tmp_path / name)
    (tmp_path / "server.qlog").write_bytes(gzip.decompress((FIXTURES / "quic" / "server.qlog.gz").read_bytes()))
    return tmp_path


def test_a_quic_run_gets_every_metric_its_artifacts_allow(quic_run: Path) -> None:
    record = json.loads((quic_run / "client.json").read_text())
    values = run_metrics_of(quic_run, record)
    assert set(values) <= set(METRICS) and all(math.isfinite(v) for v in values.values())
    assert values["download_time"] == record["completion_time"]
    assert values["goodput"] == pytest.approx(8 * record["bytes"] / record["completion_time"])
    server, client = read_pcap(quic_run / "server.pcap"), read_pcap(quic_run / "client.pcap")
    expected = metrics.run_metrics(server, client, record)
    assert values["loss"] == expected.loss and values["ack_ratio"] == expected.ack_ratio
    assert values["idi_server_k10"] == expected.idi_server[10]
    qlog = summarize_qlog(quic_run / "server.qlog")
    assert values["cwnd_mean"] == qlog.cwnd_mean and values["srtt_mean"] == qlog.smoothed_rtt_mean
    assert "ampdu_mean" not in values  # no MAC statistics on a wired run
    # the sender left slow start on the delay rule and declared no loss (test_analysis_qlog)
    assert values["slow_start_exit_delay"] == 1.0 and values["slow_start_exit"] > 0
    assert values["losses_declared"] == 0 and "spurious_loss_share" not in values
    # a 10 Mbit/s path with a ~1.3 ms minimum RTT: a BDP of a couple of kB, far below the window
    bdp = values["throughput"] / 8 * qlog.min_rtt
    assert values["cwnd_over_bdp"] == pytest.approx(qlog.cwnd_mean / bdp)
    assert values["cwnd_above_bdp"] > 0.9


def test_a_failed_download_has_no_metrics(quic_run: Path) -> None:
    record = {**json.loads((quic_run / "client.json").read_text()), "ok": False, "error": "timeout"}
    assert run_metrics_of(quic_run, record) == {}


def test_a_tcp_run_takes_cwnd_from_its_ss_samples(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tcp" / "ss.txt", tmp_path / "ss.txt")
    record = json.loads((FIXTURES / "tcp" / "curl.json").read_text())
    record["ok"] = True
    values = run_metrics_of(tmp_path, record)
    assert values["cwnd_mean"] > 10_000  # bytes: segments x MSS
    assert 0 < values["srtt_mean"] < 1 and "loss" not in values  # no captures here


def test_the_measured_download_is_told_apart_from_its_competitor_by_port() -> None:
    packets = read_pcap(FIXTURES / "parallel" / "client.pcap")
    quic, tcp = download_flow(packets, 4433), download_flow(packets, 8080)
    assert quic is not None and quic[1] == 4433 and quic[4] == "udp"
    assert tcp is not None and tcp[1] == 8080 and tcp[4] == "tcp"
    assert download_flow(packets, None) is None


def test_competitor_metrics_and_fairness() -> None:
    rival = {"tool": "quicbed-tcp-client", "ok": True, "bytes": 1_000_000, "completion_time": 2.0}
    values = competitor_metrics({"goodput": 12e6}, [rival])
    assert values["competitor_goodput"] == 4e6 and values["competitor_download_time"] == 2.0
    assert values["jain_index"] == pytest.approx((12 + 4) ** 2 / (2 * (12**2 + 4**2)))
    assert values["goodput_share"] == pytest.approx(12 / 16)
    # three competitors at once: theirs together (4 + 2 + 6 Mbit/s), the longest download, and
    # Jain's index of all four downloads
    others = [rival, {**rival, "completion_time": 4.0}, {**rival, "completion_time": 4 / 3}]
    values = competitor_metrics({"goodput": 12e6}, others)
    assert values["competitor_goodput"] == pytest.approx(12e6) and values["competitor_download_time"] == 4.0
    assert values["jain_index"] == pytest.approx((12 + 4 + 2 + 6) ** 2 / (4 * (12**2 + 4**2 + 2**2 + 6**2)))
    assert values["goodput_share"] == pytest.approx(12 / 24) and "competitor_ttfb" not in values


def test_mac_metrics_of_the_radio_carrying_the_download(tmp_path: Path) -> None:
    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                "nodes": {
                    "ap1": {"mean_mpdus_per_ampdu": 21.5, "airtime_share": 0.4, "airtime_s": 0.25, "retries": 3},
                    "sta1": {"mean_mpdus_per_ampdu": 1.0, "airtime_share": 0.05, "retries": 0},
                },
                "radios": {
                    "r0": {"node": "ap1", "per_receiver": {"sta1": {"psdus": 10, "mean_mpdus_per_ampdu": 24.0}}},
                    "r1": {"node": "sta1", "per_receiver": {"ap1": {"psdus": 40, "mean_mpdus_per_ampdu": 1.5}}},
                },
                "lag": {"max_ms": 2.5, "mean_ms": 0.1, "p99_ms": 0.5},
                "behind_share": 0.002,
            }
        )
    )
    lag = {"lag_max": 0.0025, "lag_p99": 0.0005, "lag_behind_share": 0.002}
    # the node's mean mixes every receiver; the hop's is the AP's frames to the station only
    assert mac_metrics(tmp_path, [("ap1", "sta1")]) == {
        "ampdu_mean": 21.5,
        "airtime_share": 0.4,
        "mac_retries": 3,
        "ampdu_hop1": 24.0,
        **lag,
    }
    assert mac_metrics(tmp_path, []) == lag
    # 0.25 s of airtime for 2 MB delivered: 0.125 s per megabyte
    assert mac_metrics(tmp_path, [("ap1", "sta1")], app_bytes=2_000_000)["airtime_per_mb"] == pytest.approx(0.125)


def test_mac_metrics_are_the_clients_own_over_the_transfer(tmp_path: Path) -> None:
    """An AP sends to the client (sta1) and to a competitor's station (sta2); the snapshot was
    taken 2 s after a 0.5 s transfer. The last hop's figures are the frames to sta1 alone, and
    its airtime share is over the transfer, not over the snapshot's idle tail. On a relay
    (mp1, two radios) only the radio that sends to the client counts, not the upstream one
    whose frames are ACKs."""

    def receiver(psdus: int, mpdus: int, retries: int, airtime: float, delays: dict[str, int]) -> dict:
        return {
            "psdus": psdus,
            "mpdus": mpdus,
            "retries": retries,
            "airtime_s": airtime,
            "mean_mpdus_per_ampdu": mpdus / psdus,
            "histogram": {str(mpdus // psdus): psdus},
            "mac_delay_100us": delays,
        }

    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                "nodes": {
                    "ap1": summarise_node(
                        {
                            "airtime_s": 0.6,
                            "airtime_share": 0.24,
                            "data_psdus": 150,
                            "data_mpdus": 2100,
                            "retries": 25,
                            "mac_drops": 0,
                            "queue_drops": 0,
                            "discipline_drops": 0,
                            "histogram": {},
                            "mac_delay_100us": {"30": 150},
                            "sojourn_100us": {},
                        }
                    )
                },
                "radios": {
                    "r0": {
                        "node": "ap1",
                        "per_receiver": {
                            "sta1": receiver(100, 2000, 5, 0.2, {"10": 100}),  # the download
                            "sta2": receiver(50, 100, 20, 0.4, {"80": 50}),
                        },
                    }
                },  # the competitor's station
                "interval": {"sim_s": 2.5},
            }
        )
    )
    values = mac_metrics(tmp_path, [("ap1", "sta1")], app_bytes=1_000_000, window_s=0.5)
    assert values["ampdu_mean"] == 20.0 and values["mac_retries"] == 5
    assert values["airtime_share"] == pytest.approx(0.2 / 0.5) and values["airtime_per_mb"] == pytest.approx(0.2)
    assert values["mac_delay_median"] == pytest.approx(1.05e-3)
    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                "nodes": {"mp1": {"mean_mpdus_per_ampdu": 5.0, "airtime_share": 0.5, "airtime_s": 1.0, "retries": 9}},
                "radios": {
                    "up": {"node": "mp1", "per_receiver": {"mp0": receiver(400, 400, 8, 0.3, {"5": 400})}},
                    "down": {"node": "mp1", "per_receiver": {"sta1": receiver(40, 800, 1, 0.1, {"12": 40})}},
                },
            }
        )
    )
    values = mac_metrics(tmp_path, [("mp0", "mp1"), ("mp1", "sta1")], window_s=1.0)
    assert values["ampdu_mean"] == 20.0 and values["mac_retries"] == 1 and values["airtime_share"] == pytest.approx(0.1)


def test_mac_metrics_of_a_roaming_client_take_every_ap_it_used(tmp_path: Path) -> None:
    """The route names ap1 (the topology's first AP), but sta1 walked to ap2: the last hop's
    figures are both APs' frames together, not ap1's alone."""

    def ap(psdus: int, mpdus: int, delays: dict[str, int]) -> dict:
        return summarise_node(
            {
                "airtime_s": psdus * 0.001,
                "airtime_share": psdus / 1000,
                "data_psdus": psdus,
                "data_mpdus": mpdus,
                "retries": psdus // 10,
                "mac_drops": 0,
                "queue_drops": 0,
                "discipline_drops": 0,
                "histogram": {},
                "mac_delay_100us": delays,
                "sojourn_100us": {},
            }
        )

    timeline = {
        "samples": [
            {"t": 0.25, "ap": "ap1", "rx_bytes": 9000},
            {"t": 0.5, "ap": None, "rx_bytes": 0},
            {"t": 0.75, "ap": "ap2", "rx_bytes": 9000},
        ],
        "events": [{"t": 0.3, "event": "lost", "ap": "ap1"}, {"t": 0.6, "event": "associated", "ap": "ap2"}],
    }
    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                "nodes": {"ap1": ap(100, 2000, {"10": 90, "50": 10}), "ap2": ap(300, 3000, {"20": 300})},
                "radios": {
                    "r0": {"node": "ap1", "per_receiver": {"sta1": {"psdus": 100, "mean_mpdus_per_ampdu": 20.0}}},
                    "r1": {"node": "ap2", "per_receiver": {"sta1": {"psdus": 300, "mean_mpdus_per_ampdu": 10.0}}},
                },
                "motion": {"interval_s": 0.25, "stations": {"sta1": timeline}},
            }
        )
    )
    values = mac_metrics(tmp_path, [("ap1", "sta1")])
    assert values["ampdu_mean"] == pytest.approx(5000 / 400) and values["ampdu_hop1"] == pytest.approx(5000 / 400)
    assert values["airtime_share"] == pytest.approx(0.4) and values["mac_retries"] == 40
    # 400 frames: the median and the 95th percentile in ap2's bucket 20 (2.05 ms)
    assert values["mac_delay_median"] == pytest.approx(2.05e-3) and values["mac_delay_p95"] == pytest.approx(2.05e-3)
    assert values["handovers"] == 1
    # a station that stayed with ap1 (its timeline names no other) is ap1's alone
    timeline["samples"][2]["ap"], timeline["events"] = "ap1", []
    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                **json.loads((tmp_path / "mac-stats.json").read_text()),
                "motion": {"interval_s": 0.25, "stations": {"sta1": timeline}},
            }
        )
    )
    values = mac_metrics(tmp_path, [("ap1", "sta1")])
    assert (
        values["ampdu_mean"] == 20
        and values["ampdu_hop1"] == 20
        and values["mac_delay_median"] == pytest.approx(1.05e-3)
    )


def test_ofdma_metrics_of_the_radio_carrying_the_download(tmp_path: Path) -> None:
    """100 downlink MU PPDUs carried 250 stations' PSDUs; with 50 single-user PPDUs beside
    them the radio counted 300 data PSDUs: 150 PPDUs, two thirds of them multi-user."""
    (tmp_path / "mac-stats.json").write_text(
        json.dumps(
            {
                "radios": {
                    "r0": {"node": "ap1", "data_psdus": 300, "mu_ppdus": 100, "mu_psdus": 250, "per_receiver": {}},
                    "r1": {"node": "sta1", "data_psdus": 40, "mu_ppdus": 0, "mu_psdus": 0, "per_receiver": {}},
                }
            }
        )
    )
    values = mac_metrics(tmp_path, [("ap1", "sta1")])
    assert values["ofdma_users_per_ppdu"] == 2.5 and values["ofdma_ppdu_share"] == pytest.approx(100 / 150)
    assert "ofdma_users_per_ppdu" not in mac_metrics(tmp_path, [("sta1", "ap1")])  # no MU PPDUs: no figure
    assert "ofdma_uplink_share" not in values  # the client sent no HE TB PPDU
    # uplink OFDMA: 30 of the station's 40 data PSDUs went in resource units its AP triggered
    stats = json.loads((tmp_path / "mac-stats.json").read_text())
    stats["radios"]["r1"]["ul_mu_data_psdus"] = 30
    (tmp_path / "mac-stats.json").write_text(json.dumps(stats))
    assert mac_metrics(tmp_path, [("ap1", "sta1")])["ofdma_uplink_share"] == pytest.approx(0.75)


def test_the_wireless_hops_of_a_download_from_the_server_side() -> None:
    from quicbed.runner.engine import wireless_hops
    from quicbed.spec.loader import load_topology

    chain = load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 3})
    assert wireless_hops(chain, "server", "client") == [("gw", "mp1"), ("mp1", "mp2"), ("mp2", "client")]
    assert (
        wireless_hops(load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 0}), "server", "client") == []
    )
    cell = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"stations": 2})
    assert wireless_hops(cell, "server", "sta2") == [("ap1", "sta2")]


def test_a_tcp_run_takes_cwnd_from_the_kernel_tracepoint_when_it_has_one(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tcp" / "tcp_probe.txt.gz", tmp_path / "tcp_probe.txt.gz")
    shutil.copy(FIXTURES / "tcp" / "ss.txt", tmp_path / "ss.txt")  # ignored: the tracepoint is exact
    record = {
        "tool": "quicbed-tcp-client",
        "ok": True,
        "bytes": 200_000,
        "completion_time": 0.2,
        "transport": {"connections": [{"rcv_mss": 1448}]},
    }
    values = run_metrics_of(tmp_path, record)
    from quicbed.analysis.tcpstate import read_trace, sender_probes, summarize_probe

    probe, states = read_trace(tmp_path / "tcp_probe.txt.gz")
    summary = summarize_probe(sender_probes(probe), states)
    assert values["cwnd_mean"] == pytest.approx(summary.cwnd_mean * 1448)
    assert values["phase_slow_start"] == summary.phases["slow_start"]
    del record["transport"]  # without the MSS no byte count is made up
    assert "cwnd_mean" not in run_metrics_of(tmp_path, record)


def test_the_window_against_the_bdp() -> None:
    # 8 Mbit/s x 10 ms = 10 kB; cwnd 5 kB for 1 s, 20 kB for 3 s (the last sample ends the transfer)
    series = CwndSeries(np.array([0.0, 1.0, 4.0]), np.array([5000.0, 20000.0, 20000.0]), 0.0, 4.0, 0.010)
    values = bdp_metrics(series, 8e6)
    assert values["cwnd_above_bdp"] == pytest.approx(0.75)
    assert values["cwnd_over_bdp"] == pytest.approx((5000 * 1 + 20000 * 3) / 4 / 10_000)
    assert bdp_metrics(series, None) == {} and bdp_metrics(None, 8e6) == {}


def test_a_tcp_run_counts_its_retransmissions_from_the_captures(tmp_path: Path) -> None:
    for name in ("server.pcap", "client.pcap"):
        shutil.copy(FIXTURES / "tcp" / name, tmp_path / name)
    record = {**json.loads((FIXTURES / "tcp" / "curl.json").read_text()), "ok": True}
    values = run_metrics_of(tmp_path, record)
    assert values["losses_declared"] == 1 and values["spurious_loss_share"] == 0.0


def test_fairness_of_the_committed_parallel_run() -> None:
    """The parallel fixture: a 400 kB HTTP/3 and a 400 kB TCP download at once. From the two
    records: QUIC 400000 B in 0.47034 s (8 * 400000 / 0.47034 = 6.803 Mbit/s), TCP (curl)
    in 0.62245 - 0.027306 = 0.59514 s (5.377 Mbit/s)."""
    quic = json.loads((FIXTURES / "parallel" / "quic.json").read_text())
    curl = json.loads((FIXTURES / "parallel" / "curl.json").read_text())
    # as quicbed's TCP client records it (the competitor is always quicbed's client)
    tcp = {
        "tool": "quicbed-tcp-client",
        "ok": True,
        "bytes": curl["size_download"],
        "completion_time": curl["time_total"] - curl["time_pretransfer"],
    }
    main = run_metrics_of(Path("/nonexistent"), quic)
    values = competitor_metrics(main, [tcp])
    assert main["goodput"] == pytest.approx(6.803e6, rel=1e-3)
    assert values["competitor_goodput"] == pytest.approx(5.377e6, rel=1e-3)
    assert values["goodput_share"] == pytest.approx(6.803 / (6.803 + 5.377), rel=1e-3)
    assert values["jain_index"] == pytest.approx((6.803 + 5.377) ** 2 / (2 * (6.803**2 + 5.377**2)), rel=1e-3)


def test_many_clients_give_aggregate_spread_fairness_and_aggregation_per_client(tmp_path: Path) -> None:
    from quicbed.runner.analyse import clients_metrics

    clients = [
        {"node": "sta1", "ok": True, "bytes": 2_000_000, "download_time": 1.0, "goodput": 16e6},
        {"node": "sta2", "ok": True, "bytes": 2_000_000, "download_time": 2.0, "goodput": 8e6},
        {"node": "sta3", "ok": True, "bytes": 2_000_000, "download_time": 4.0, "goodput": 4e6},
    ]
    radio = {
        "role": "ap",
        "per_receiver": {
            "sta1": {"psdus": 10, "mean_mpdus_per_ampdu": 20.0},
            "sta2": {"psdus": 10, "mean_mpdus_per_ampdu": 12.0},
            "sta3": {"psdus": 10, "mean_mpdus_per_ampdu": 6.0},
            "other": {"psdus": 5, "mean_mpdus_per_ampdu": 1.0},
        },
    }
    (tmp_path / "mac-stats.json").write_text(json.dumps({"radios": {"ap1:wifi": radio}}))
    values = clients_metrics(tmp_path, clients)
    # 48 Mbit over the longest download (4 s); Jain: (28)^2 / (3 * (256 + 64 + 16)) = 784 / 1008
    assert values == pytest.approx(
        {
            "clients": 3,
            "aggregate_goodput": 12e6,
            "client_goodput_min": 4e6,
            "client_goodput_median": 8e6,
            "jain_index": 784 / 1008,
            "ampdu_client_min": 6.0,
            "ampdu_client_median": 12.0,
            "ampdu_client_max": 20.0,
        }
    )
    assert set(values) <= set(METRICS)
    # sta3's download started a second after the others (its SYN was resent): 48 Mbit over the
    # 5 s from the first start to the last end, not over its own 4 s
    ended = [
        {**client, "download_end": 100.0 + client["download_time"] + (1.0 if client["node"] == "sta3" else 0)}
        for client in clients
    ]
    assert clients_metrics(tmp_path, ended)["aggregate_goodput"] == pytest.approx(48e6 / 5)
    failed = clients_metrics(tmp_path, [*clients[:2], {"node": "sta3", "ok": False, "bytes": None}])
    assert "aggregate_goodput" not in failed and failed["clients"] == 3  # not a fair aggregate without every client


# --------------------------------------------------------------------------- every connection, no stand-in flow


def _copy_run(tmp_path: Path, name: str) -> tuple[Path, dict]:
    """A run folder from a committed fixture (qlogs decompressed, as the runner leaves them)."""
    for path in (FIXTURES / name).iterdir():
        if path.name == "server.qlog.gz":
            (tmp_path / "server.qlog").write_bytes(gzip.decompress(path.read_bytes()))
        else:
            shutil.copy(path, tmp_path / path.name)
    return tmp_path, json.loads((tmp_path / "client.json").read_text())


def test_every_connection_of_a_six_connection_page_is_analysed(tmp_path: Path) -> None:
    """page/: p8-262k over HTTP/1.1, six connections (client ports 59678 59684 59688 59690
    59702 59716). Per connection c, R_c = started_at + the earliest ``start`` of its objects
    (client.json); ``tcpdump -ttnr client.pcap 'TCP_DATA and dst port c' | awk '$1 >= R_c'``,
    from the first packet of at least half the upper median size (1448; the two 287-byte
    session tickets skipped): packets / bytes / first / last
    59678: 50 69487 .413500 .657499   59684: 37 52423 .458068 .656290
    59688: 23 31051 .469002 .633225   59690: 20 28942 .467802 .576919
    59702: 27 37899 .464809 .612345   59716: 31 44619 .466579 .630403
    so 188 packets, 264421 bytes (274197 IP bytes: 52 more per packet, IP and TCP with
    timestamps) from .413500 to .657499 (0.243999 s). Server side, joined
    on the IP ID: sent 59 46 36 31 40 47 (259), lost 9 9 13 11 13 16 (71). The tcp_probe
    events of the six sockets (``zcat | grep dest=10.0.0.1:c``, mono_to_epoch of
    tcp_probe.json added), each from its first event to its last snd_una advance, plain
    time-weighted loop: 24.4037 9.6987 6.7788 8.0105 7.8927 7.8170 segments over 0.256195
    0.254939 0.231698 0.175143 0.210383 0.227883 s: 11.163306 segments, x 1448 bytes."""
    folder, record = _copy_run(tmp_path, "page")
    values = run_metrics_of(folder, record)
    assert values["throughput"] == pytest.approx(8 * (264421 + 188 * 52) / 0.243999)
    assert values["transfer_time"] == pytest.approx(0.243999, abs=1e-9)
    assert values["loss"] == pytest.approx(71 / 259)
    assert values["cwnd_mean"] == pytest.approx(11.163306283971016 * 1448)
    review = review_measurement(folder, record, {})
    connections = review["connections"]
    assert [c["flow"][3] for c in connections] == [59678, 59684, 59688, 59690, 59702, 59716]
    assert [c["data_packets_received"] for c in connections] == [50, 37, 23, 20, 27, 31]
    assert [c["payload_bytes"] for c in connections] == [69487, 52423, 31051, 28942, 37899, 44619]
    assert [c["lost"] for c in connections] == [9, 9, 13, 11, 13, 16]
    assert review["warnings"] == [] and review["invalid_reasons"] == []
    # TCP's declared losses are each connection's retransmitted segments, summed
    assert values["losses_declared"] == sum(c["losses_declared"] for c in connections) >= 71


def _raw_ipv4(src: str, dst: str, sport: int, dport: int, payload: int, ident: int, proto: str = "udp") -> bytes:
    """An IPv4 packet as a 128-byte capture keeps it: headers, then the first payload bytes
    (a QUIC short header: 0x40, then the IP ID, so that every datagram hashes apart)."""
    import socket
    import struct

    body = bytes([0x40]) + ident.to_bytes(4, "big") + bytes(27)
    if proto == "udp":
        transport = struct.pack("!HHHH", sport, dport, 8 + payload, 0)
        number = 17
    else:
        transport = struct.pack("!HHIIBBHHH", sport, dport, ident * 1448, 1, 5 << 4, 0x18, 512, 0, 0)
        number = 6
    total = 20 + len(transport) + payload
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, total, ident, 0x4000, 64, number, 0, socket.inet_aton(src), socket.inet_aton(dst)
    )
    return header + transport + body[: min(payload, 32)]


def _write_capture(path: Path, packets: list[tuple[float, bytes]]) -> None:
    """A classic pcap of raw IPv4 packets (link type 101), microsecond stamps."""
    import struct

    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 128, 101)
    for when, data in packets:
        seconds = int(when)
        total = struct.unpack("!H", data[2:4])[0]
        out += struct.pack("<IIII", seconds, round((when - seconds) * 1e6), len(data), total) + data
    path.write_bytes(out)


def _small_object_beside_background(tmp_path: Path) -> None:
    """A 5 kB HTTP/3 response (five 1000-byte datagrams from port 4433) and 100 UDP datagrams
    of 1200 bytes from an iperf3 server (port 5201) at the same time, the same at both ends."""
    server, client = "10.0.0.2", "10.0.0.1"
    packets = [(1000.0 + 0.001 * i, _raw_ipv4(server, client, 5201, 40000, 1200, 100 + i)) for i in range(100)]
    packets += [(1000.0105 + 0.002 * i, _raw_ipv4(server, client, 4433, 50000, 1000, 500 + i)) for i in range(5)]
    packets += [(1000.0115 + 0.004 * i, _raw_ipv4(client, server, 50000, 4433, 30, 700 + i)) for i in range(3)]
    packets.sort()
    _write_capture(tmp_path / "server.pcap", packets)
    _write_capture(tmp_path / "client.pcap", [(when + 0.010, data) for when, data in packets])


def test_a_small_download_is_never_replaced_by_a_larger_flow(tmp_path: Path) -> None:
    _small_object_beside_background(tmp_path)
    record = {
        "tool": "quicbed-quic-client",
        "ok": True,
        "bytes": 4800,
        "completion_time": 0.02,
        "server": {"host": "10.0.0.2", "port": 4433, "address": "10.0.0.2"},
    }
    values = run_metrics_of(tmp_path, record)
    # the 5 kB response: 5 x 1000 bytes (1028 IP bytes) from 1000.0205 to 1000.0285 at the client, 3 ACKs
    assert values["throughput"] == pytest.approx(8 * 5 * 1028 / 0.008)
    assert values["ack_ratio"] == pytest.approx(3 / 5)
    # a record whose port sent nothing has no capture metrics, and says why
    values = run_metrics_of(tmp_path, {**record, "server": {"port": 4434}})
    assert "throughput" not in values and "loss" not in values and values["goodput"] > 0
    (warning,) = review_measurement(tmp_path, {**record, "server": {"port": 4434}}, {})["warnings"]
    assert "port 4434" in warning
    # a request time after the last packet (a record on another clock) is said, not measured
    late = {**record, "started_at": 2000.0, "objects": [{"start": 0.0}]}
    assert "throughput" not in run_metrics_of(tmp_path, late)
    assert "after the record's request time" in review_measurement(tmp_path, late, {})["warnings"][0]


def test_tcp_probe_events_are_put_on_the_captures_clock(tmp_path: Path) -> None:
    """tls/: the first tcp_probe event (the ClientHello reaching nginx) is at 494.706729 on the
    trace clock; tcp_probe.json's mono_to_epoch 1795676049.8861132 puts it at
    1795676544.592842, 4 us after the server capture saw the ClientHello (.592838)."""
    folder, record = _copy_run(tmp_path, "tls")
    _, series = sender_metrics(folder, record)
    assert series is not None
    assert series.times[0] == pytest.approx(1795676544.592842, abs=2e-6)
    assert series.start == series.times[0]


def test_what_makes_a_measurement_invalid(tmp_path: Path) -> None:
    details = {
        "capture_stats": {
            "server": {"captured": 90, "received_by_filter": 100, "dropped_by_kernel": 0, "unwritten": 10},
            "client": {"captured": 100, "received_by_filter": 100, "unwritten": 0},
        },
        "tcp_state": {"source": "tcp_probe", "overruns": 3},
        "background": {"kind": "udp", "rate": 10e6, "bytes_received": 0, "received_bps": 0.0},
    }
    assert measurement_invalid_reasons(tmp_path, details) == [
        "the server capture did not write 10 packets its filter accepted",
        "the background traffic delivered nothing (iperf3's UDP stream set-up was lost, or its sender never "
        "sent): the transfer ran without it",
        "the tcp_probe trace lost 3 events (trace buffer overrun)",
    ]
    # background that flowed, none asked for (rate 0), or a record from before the figure was kept
    for background in (
        {"rate": 10e6, "bytes_received": 12_000_000},
        {"rate": 0.0, "bytes_received": None},
        {"rate": 10e6},
    ):
        assert measurement_invalid_reasons(tmp_path, {"background": background}) == []
    # a TCP segment of 2 x 1448 bytes: what the capture shows when segmentation offload is on
    big = _raw_ipv4("10.0.0.2", "10.0.0.1", 8443, 50000, 2896, 9, proto="tcp")
    normal = _raw_ipv4("10.0.0.2", "10.0.0.1", 8443, 50000, 1448, 10, proto="tcp")
    _write_capture(tmp_path / "server.pcap", [(1.0, big), (1.001, normal)])
    _write_capture(tmp_path / "client.pcap", [(1.01, normal)])
    assert measurement_invalid_reasons(tmp_path, {}) == [
        "the server capture holds 1 packets larger than the 1500-byte MTU (segmentation or receive offload on)"
    ]
    assert measurement_invalid_reasons(tmp_path, {}, mtu=9000) == []
    assert measurement_invalid_reasons(FIXTURES / "page", {}) == []


def test_a_flawed_measurement_makes_the_run_invalid():
    """The reasons review_measurement records reach the run's status, beside the channel's."""
    from quicbed.runner.engine import invalid_reasons

    details = {
        "mac_stats": {"invalid_reasons": ["ns-3 ran behind"]},
        "measurement": {"invalid_reasons": ["the tcp_probe trace lost 3 events (trace buffer overrun)"]},
    }
    assert invalid_reasons(details) == ["ns-3 ran behind", "the tcp_probe trace lost 3 events (trace buffer overrun)"]
    assert invalid_reasons({"measurement": {"invalid_reasons": []}}) == []


def test_a_run_whose_competition_failed_is_invalid():
    """A failed competitor, or background traffic that delivered nothing, leaves a download that
    ran alone: the run must not count as a competing one."""
    from quicbed.runner.engine import invalid_reasons

    competing = {"competitors": [{"ok": True}, {"ok": False, "error": "timed out after 60 s"}]}
    assert invalid_reasons(competing) == [
        "competitor 2 failed (timed out after 60 s): the download did not compete with it to the end"
    ]
    assert invalid_reasons({"competitors": [{"ok": True}]}) == []
    silent = {"background": {"kind": "udp", "from": "bg-src", "to": "bg-dst", "bytes_received": 0}}
    assert invalid_reasons(silent) == [
        "the background traffic (udp, bg-src -> bg-dst) delivered nothing: the download ran without it"
    ]
    assert invalid_reasons({"background": {"kind": "udp", "bytes_received": 125000}}) == []


@pytest.mark.parametrize(
    "name, times",
    [
        # first packet (tcpdump -ttnr client.pcap | head -1) less the record's started_at = lead;
        # handshake_time, the earliest object's first_byte and total_time of client.json, less it
        (
            "tls",
            {"lead": 544.592005 - 544.5916765, "connect_time": 0.0029240, "ttfb": 0.0151283, "total_time": 0.1691687},
        ),  # a SYN 0.33 ms after the connect call
        (
            "page",
            {"lead": 546.398332 - 546.3979926, "connect_time": 0.0143259, "ttfb": 0.0269086, "total_time": 0.2593012},
        ),  # six HTTP/1.1 connections: the first one's SYN
        (
            "quic",
            {"lead": 16.307166 - 16.2988677, "connect_time": 0.0097512, "ttfb": 0.0237238, "total_time": 0.1962446},
        ),  # aioquic's Initial 8.3 ms after its connect call
    ],
)
def test_the_whole_exchange_is_timed_from_the_first_packet(tmp_path: Path, name: str, times: dict) -> None:
    folder, record = _copy_run(tmp_path, name)
    values = run_metrics_of(folder, record)
    for metric in ("connect_time", "ttfb", "total_time"):
        assert values[metric] == pytest.approx(times[metric], abs=2e-6), metric
    assert review_measurement(folder, record, {})["setup_lead_s"] == pytest.approx(times["lead"], abs=2e-6)
    # the download time stays request -> last byte
    assert values["download_time"] == record["completion_time"] < values["total_time"]


def test_without_captures_or_with_clocks_apart_the_record_times_are_kept(tmp_path: Path) -> None:
    folder, record = _copy_run(tmp_path, "quic")
    apart = {**record, "started_at": record["started_at"] + 0.020}  # the first packet 11.7 ms "before" it
    values = run_metrics_of(folder, apart)
    assert (values["connect_time"], values["total_time"]) == (record["handshake_time"], record["total_time"])
    assert any("before the record's start" in w for w in review_measurement(folder, apart, {})["warnings"])
    for path in folder.glob("*.pcap"):
        path.unlink()
    assert run_metrics_of(folder, record)["connect_time"] == record["handshake_time"]


def test_curl_records_give_the_exchange_times_too() -> None:
    record = json.loads((FIXTURES / "tcp" / "curl.json").read_text())  # plain HTTP: no appconnect
    assert metrics.connect_time(record) == record["time_connect"] == 0.000184
    assert metrics.first_byte_time(record) == record["time_starttransfer"]
    assert metrics.total_time(record) == record["time_total"]


def test_the_first_packet_is_one_that_opens_the_connection() -> None:
    """A resumed run's capture may begin while its priming connection's last packets are still
    on the way (with quinn on the same addresses and ports): the lead counts from the client's
    SYN or QUIC Initial, not from those."""
    from quicbed.analysis.packets import ACK, SYN, Packet
    from quicbed.runner.analyse import setup_lead

    server, client = ("10.0.0.2", 4433), ("10.0.0.1", 50000)

    def packet(ts: float, source: tuple[str, int], kind: str) -> Packet:
        to = client if source == server else server
        if kind in ("syn", "ack"):
            return Packet(
                ts, source[0], to[0], source[1], to[1], "tcp", 60, 0, 0, 0, tcp_flags=SYN if kind == "syn" else ACK
            )
        return Packet(
            ts,
            source[0],
            to[0],
            source[1],
            to[1],
            "udp",
            100,
            72,
            0,
            0,
            quic_long_header=kind != "1rtt",
            quic_type=kind,
        )

    quic = [
        packet(99.990, client, "1rtt"),
        packet(99.991, server, "1rtt"),  # the priming connection's last
        packet(100.002, client, "initial"),
        packet(100.030, server, "initial"),
    ]
    data_flow = quic[1].flow  # server -> client
    assert setup_lead(quic, {"started_at": 100.0}, [data_flow]) == pytest.approx(0.002)
    tcp = [packet(99.995, client, "ack"), packet(100.0004, client, "syn")]
    assert setup_lead(tcp, {"started_at": 100.0}, [(*server, *client, "tcp")]) == pytest.approx(0.0004)
    assert setup_lead(quic[:2], {"started_at": 100.0}, [data_flow]) is None  # no opening packet: no lead


def test_a_server_shaped_on_its_own_interface_is_named_in_the_warnings() -> None:
    from quicbed.runner.analyse import layout_warnings

    limited = {
        "captures": {
            "server": {
                "tapped": "before the tbf qdisc, mirrored to qbtap-eth0",
                "own_qdisc": {"kind": "tbf", "dropped": 12, "overlimits": 3400},
            }
        }
    }
    assert layout_warnings(limited)[0].startswith(
        "the server's own interface was the bottleneck (its tbf qdisc held packets back 3400 times and dropped 12)"
    )
    # a 1 Gbit/s shaping that never held anything back (a WiFi cell behind it) is no bottleneck
    idle = {
        "captures": {
            "server": {
                "tapped": "before the tbf qdisc, mirrored to qbtap-eth0",
                "own_qdisc": {"kind": "tbf", "dropped": 0, "overlimits": 0},
            }
        }
    }
    assert layout_warnings(idle) == []
    assert layout_warnings({"captures": {"server": {"tapped": "at the interface"}}}) == [] and layout_warnings({}) == []


def test_every_metric_of_the_catalogue_is_in_the_docs_table() -> None:
    from quicbed.analysis.catalogue import markdown_table

    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    assert markdown_table() in docs, "regenerate docs/metrics.md section 8: python -m quicbed.analysis.catalogue"


def test_a_metric_the_catalogue_lacks_is_said_not_dropped_in_silence() -> None:
    from quicbed.analysis.catalogue import UncataloguedMetric
    from quicbed.runner.analyse import _finite

    with pytest.warns(UncataloguedMetric, match="'goodput_typo' is not in quicbed.analysis.catalogue.METRICS"):
        assert _finite({"goodput": 1.0, "goodput_typo": 2.0}) == {"goodput": 1.0}
