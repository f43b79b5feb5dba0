"""Per-run metrics from a run folder's artifacts (real captures, qlog and ss samples)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from quicbed.analysis import metrics
from quicbed.analysis.catalogue import METRICS
from quicbed.analysis.packets import read_pcap
from quicbed.analysis.qlog import summarize_qlog
from quicbed.runner.analyse import competitor_metrics, download_flow, mac_metrics, run_metrics_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"


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


def test_mac_metrics_of_the_radio_carrying_the_download(tmp_path: Path) -> None:
    (tmp_path / "mac-stats.json").write_text(json.dumps({
        "nodes": {"ap1": {"mean_mpdus_per_ampdu": 21.5, "airtime_share": 0.4, "airtime_s": 0.25, "retries": 3},
                  "sta1": {"mean_mpdus_per_ampdu": 1.0, "airtime_share": 0.05, "retries": 0}},
        "lag": {"max_ms": 2.5, "mean_ms": 0.1, "p99_ms": 0.5}, "behind_share": 0.002}))
    lag = {"lag_max": 0.0025, "lag_p99": 0.0005, "lag_behind_share": 0.002}
    assert mac_metrics(tmp_path, "ap1") == {"ampdu_mean": 21.5, "airtime_share": 0.4, "mac_retries": 3, **lag}
    assert mac_metrics(tmp_path, None) == lag
    # 0.25 s of airtime for 2 MB delivered: 0.125 s per megabyte
    assert mac_metrics(tmp_path, "ap1", app_bytes=2_000_000)["airtime_per_mb"] == pytest.approx(0.125)


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
