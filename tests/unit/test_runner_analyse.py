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
from quicbed.analysis.packets import read_pcap
from quicbed.analysis.qlog import summarize_qlog
from quicbed.runner.analyse import (
    CwndSeries,
    bdp_metrics,
    competitor_metrics,
    download_flow,
    mac_metrics,
    run_metrics_of,
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
    values = competitor_metrics({"goodput": 12e6}, rival)
    assert values["competitor_goodput"] == 4e6 and values["competitor_download_time"] == 2.0
    assert values["jain_index"] == pytest.approx((12 + 4) ** 2 / (2 * (12 ** 2 + 4 ** 2)))
    assert values["goodput_share"] == pytest.approx(12 / 16)


def test_mac_metrics_of_the_radio_carrying_the_download(tmp_path: Path) -> None:
    (tmp_path / "mac-stats.json").write_text(json.dumps({
        "nodes": {"ap1": {"mean_mpdus_per_ampdu": 21.5, "airtime_share": 0.4, "airtime_s": 0.25, "retries": 3},
                  "sta1": {"mean_mpdus_per_ampdu": 1.0, "airtime_share": 0.05, "retries": 0}},
        "radios": {"r0": {"node": "ap1", "per_receiver": {"sta1": {"psdus": 10, "mean_mpdus_per_ampdu": 24.0}}},
                   "r1": {"node": "sta1", "per_receiver": {"ap1": {"psdus": 40, "mean_mpdus_per_ampdu": 1.5}}}},
        "lag": {"max_ms": 2.5, "mean_ms": 0.1, "p99_ms": 0.5}, "behind_share": 0.002}))
    lag = {"lag_max": 0.0025, "lag_p99": 0.0005, "lag_behind_share": 0.002}
    # the node's mean mixes every receiver; the hop's is the AP's frames to the station only
    assert mac_metrics(tmp_path, [("ap1", "sta1")]) == {"ampdu_mean": 21.5, "airtime_share": 0.4, "mac_retries": 3,
                                                         "ampdu_hop1": 24.0, **lag}
    assert mac_metrics(tmp_path, []) == lag
    # 0.25 s of airtime for 2 MB delivered: 0.125 s per megabyte
    assert mac_metrics(tmp_path, [("ap1", "sta1")], app_bytes=2_000_000)["airtime_per_mb"] == pytest.approx(0.125)


def test_the_wireless_hops_of_a_download_from_the_server_side() -> None:
    from quicbed.runner.engine import wireless_hops
    from quicbed.spec.loader import load_topology

    chain = load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 3})
    assert wireless_hops(chain, "server", "client") == [("gw", "mp1"), ("mp1", "mp2"), ("mp2", "client")]
    assert wireless_hops(load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 0}), "server",
                         "client") == []
    cell = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"stations": 2})
    assert wireless_hops(cell, "server", "sta2") == [("ap1", "sta2")]


def test_a_tcp_run_takes_cwnd_from_the_kernel_tracepoint_when_it_has_one(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "tcp" / "tcp_probe.txt.gz", tmp_path / "tcp_probe.txt.gz")
    shutil.copy(FIXTURES / "tcp" / "ss.txt", tmp_path / "ss.txt")  # ignored: the tracepoint is exact
    record = {"tool": "quicbed-tcp-client", "ok": True, "bytes": 200_000, "completion_time": 0.2,
              "transport": {"connections": [{"rcv_mss": 1448}]}}
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
    tcp = {"tool": "quicbed-tcp-client", "ok": True, "bytes": curl["size_download"],
           "completion_time": curl["time_total"] - curl["time_pretransfer"]}
    main = run_metrics_of(Path("/nonexistent"), quic)
    values = competitor_metrics(main, tcp)
    assert main["goodput"] == pytest.approx(6.803e6, rel=1e-3)
    assert values["competitor_goodput"] == pytest.approx(5.377e6, rel=1e-3)
    assert values["goodput_share"] == pytest.approx(6.803 / (6.803 + 5.377), rel=1e-3)
    assert values["jain_index"] == pytest.approx((6.803 + 5.377) ** 2 / (2 * (6.803 ** 2 + 5.377 ** 2)), rel=1e-3)


def test_many_clients_give_aggregate_spread_fairness_and_aggregation_per_client(tmp_path: Path) -> None:
    from quicbed.runner.analyse import clients_metrics

    clients = [{"node": "sta1", "ok": True, "bytes": 2_000_000, "download_time": 1.0, "goodput": 16e6},
               {"node": "sta2", "ok": True, "bytes": 2_000_000, "download_time": 2.0, "goodput": 8e6},
               {"node": "sta3", "ok": True, "bytes": 2_000_000, "download_time": 4.0, "goodput": 4e6}]
    radio = {"role": "ap", "per_receiver": {"sta1": {"psdus": 10, "mean_mpdus_per_ampdu": 20.0},
                                            "sta2": {"psdus": 10, "mean_mpdus_per_ampdu": 12.0},
                                            "sta3": {"psdus": 10, "mean_mpdus_per_ampdu": 6.0},
                                            "other": {"psdus": 5, "mean_mpdus_per_ampdu": 1.0}}}
    (tmp_path / "mac-stats.json").write_text(json.dumps({"radios": {"ap1:wifi": radio}}))
    values = clients_metrics(tmp_path, clients)
    # 48 Mbit over the longest download (4 s); Jain: (28)^2 / (3 * (256 + 64 + 16)) = 784 / 1008
    assert values == pytest.approx({"clients": 3, "aggregate_goodput": 12e6, "client_goodput_min": 4e6,
                                    "client_goodput_median": 8e6, "jain_index": 784 / 1008,
                                    "ampdu_client_min": 6.0, "ampdu_client_median": 12.0, "ampdu_client_max": 20.0})
    assert set(values) <= set(METRICS)
    failed = clients_metrics(tmp_path, [*clients[:2], {"node": "sta3", "ok": False, "bytes": None}])
    assert "aggregate_goodput" not in failed and failed["clients"] == 3  # not a fair aggregate without every client
