"""The metrics of one finished run, from the artifacts in its folder (docs/results.md).

Every metric is optional: a run without captures has no loss or one-way delay, a TCP run
without ``ss`` samples has no cwnd. Names and units: quicbed/analysis/catalogue.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from quicbed.analysis.catalogue import METRICS
from quicbed.analysis.metrics import FlowKey, data_flows, download_time, run_metrics
from quicbed.analysis.packets import Packet, read_pcap
from quicbed.analysis.stats import jain_index


def _finite(metrics: dict[str, Any]) -> dict[str, float]:
    """Only catalogued, finite numbers: NaN has no place in a JSON line."""
    clean: dict[str, float] = {}
    for name, value in metrics.items():
        if name in METRICS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            clean[name] = float(value)
    return clean


def record_metrics(record: dict[str, Any]) -> dict[str, float]:
    """Download time and goodput from the client's own record."""
    values: dict[str, float] = {}
    if not record.get("ok"):
        return values
    seconds = download_time(record)
    values["download_time"] = seconds
    if seconds > 0 and record.get("bytes"):
        values["goodput"] = 8.0 * float(record["bytes"]) / seconds
    return values


def download_flow(packets: list[Packet], port: int | None) -> FlowKey | None:
    """The data flow the server sends from ``port`` (None: the largest flow)."""
    if port is None:
        return None
    return next((flow for flow in data_flows(packets) if flow[1] == port), None)


def capture_metrics(folder: Path, record: dict[str, Any]) -> dict[str, float]:
    server, client = folder / "server.pcap", folder / "client.pcap"
    if not (server.exists() and client.exists()):
        return {}
    client_packets = read_pcap(client)
    # with a competitor the captures hold two downloads: measure the one from the record's port
    flow = download_flow(client_packets, (record.get("server") or {}).get("port"))
    result = run_metrics(read_pcap(server), client_packets, record, flow=flow).to_dict()
    values = {name: result[name] for name in ("throughput", "transfer_time", "loss", "loss_burst_mean", "owd_mean", "owd_p95",
                                              "ipt_server_short_share", "ipt_client_short_share",
                                              "out_of_order", "ack_ratio")}
    values.update({f"idi_server_k{k}": v for k, v in result["idi_server"].items()})
    return values


def sender_mss(record: dict[str, Any]) -> float | None:
    """The sender's segment size as the TCP client saw it (TCP_INFO rcv_mss)."""
    for connection in (record.get("transport") or {}).get("connections") or []:
        if connection.get("rcv_mss"):
            return float(connection["rcv_mss"])
    return None


def sender_metrics(folder: Path, record: dict[str, Any]) -> dict[str, float]:
    """cwnd, smoothed RTT and phase shares: the server's qlog (QUIC), or the kernel's
    tcp_probe events or ``ss`` samples (TCP)."""
    summary: dict[str, Any] | None = None
    if (folder / "server.qlog").exists():
        from quicbed.analysis.qlog import summarize_qlog

        # the server's file, whatever vantage it declares (quinn's say "unknown")
        qlog = summarize_qlog(folder / "server.qlog", vantage=None).to_dict()
        summary = {"cwnd_mean": qlog["cwnd_mean"], "srtt_mean": qlog["smoothed_rtt_mean"], **{
            f"phase_{phase}": share for phase, share in qlog["phases"].items()}}
    elif (folder / "tcp_probe.txt.gz").exists():
        from quicbed.analysis.tcpstate import read_trace, sender_probes, summarize_probe

        probe, states = read_trace(folder / "tcp_probe.txt.gz")
        probe = sender_probes(probe)
        if len(probe) > 1:
            tcp = summarize_probe(probe, states).to_dict()
            mss = sender_mss(record)  # tcp_probe counts cwnd in segments
            summary = {"srtt_mean": tcp["srtt_mean"], **{f"phase_{phase}": share for phase, share in
                                                         tcp["phases"].items()}}
            if mss:
                summary["cwnd_mean"] = tcp["cwnd_mean"] * mss
    elif (folder / "ss.txt").exists():
        from quicbed.analysis.tcpstate import connection, read_ss, summarize_ss

        samples = read_ss(folder / "ss.txt")
        if not samples.empty:
            tcp = summarize_ss(connection(samples)).to_dict()
            summary = {"cwnd_mean": tcp["cwnd_bytes_mean"], "srtt_mean": tcp["srtt_mean"], **{
                f"phase_{phase}": share for phase, share in tcp["phases"].items()}}
    return summary or {}


def mac_metrics(folder: Path, sender_node: str | None, app_bytes: int | None = None) -> dict[str, float]:
    """A-MPDU size, airtime (and per megabyte of the ``app_bytes`` delivered) and retries of
    the node that transmits the download's last hop to the client (the AP for a station),
    and the simulator's lag."""
    path = folder / "mac-stats.json"
    if not path.exists():
        return {}
    stats = json.loads(path.read_text())
    values: dict[str, float] = {}
    node = stats.get("nodes", {}).get(sender_node) if sender_node else None
    if node:
        values.update(ampdu_mean=node["mean_mpdus_per_ampdu"], airtime_share=node["airtime_share"],
                      mac_retries=node["retries"])
        if app_bytes:
            values["airtime_per_mb"] = node["airtime_s"] / (app_bytes / 1e6)
    lag = stats.get("lag", {})
    if lag.get("max_ms") is not None:
        values["lag_max"] = lag["max_ms"] / 1e3
    if lag.get("p99_ms") is not None:
        values["lag_p99"] = lag["p99_ms"] / 1e3
    if stats.get("behind_share") is not None:
        values["lag_behind_share"] = stats["behind_share"]
    return values


def competitor_metrics(main: dict[str, float], rival_record: dict[str, Any]) -> dict[str, float]:
    """The competitor's download time and goodput, and Jain's index of the two goodputs."""
    rival = record_metrics(rival_record)
    values = {f"competitor_{name}": value for name, value in rival.items()}
    if "goodput" in main and "goodput" in rival:
        values["jain_index"] = jain_index([main["goodput"], rival["goodput"]])
    return values


#: roles whose CPU becomes metrics (the others stay in run.json's details.cpu)
CPU_METRIC_ROLES = ("server", "client", "channel")


def cpu_metrics(cpu: dict[str, Any] | None) -> dict[str, float]:
    """CPU seconds and busiest-interval share per endpoint role and the channel, and the
    machine's busy and steal shares, over the transfer (details.cpu of a run)."""
    if not cpu or "roles" not in cpu:
        return {}
    values: dict[str, float] = {}
    for role in CPU_METRIC_ROLES:
        usage = cpu["roles"].get(role)
        if usage and (role != "channel" or usage["cpu_seconds"] > 0):
            values[f"cpu_{role}"] = usage["cpu_seconds"]
            values[f"cpu_{role}_peak"] = usage["peak_share"]
            values[f"cpu_{role}_bound"] = usage["saturated_share"]
    values["cpu_machine_busy"] = cpu["machine"]["busy_share"]
    values["cpu_machine_steal"] = cpu["machine"]["steal_share"]
    return values


def run_metrics_of(folder: Path, record: dict[str, Any], wireless_sender: str | None = None,
                   competitor_record: dict[str, Any] | None = None) -> dict[str, float]:
    """Every metric this run's artifacts allow, in base units."""
    values: dict[str, float] = {}
    values.update(record_metrics(record))
    if competitor_record is not None:
        values.update(competitor_metrics(values, competitor_record))
    if record.get("ok"):
        values.update(capture_metrics(folder, record))
        values.update(sender_metrics(folder, record))
    values.update(mac_metrics(folder, wireless_sender, record.get("bytes") if record.get("ok") else None))
    return _finite(values)
