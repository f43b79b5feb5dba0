"""The metrics of one finished run, from the artifacts in its folder (docs/results.md).

Every metric is optional: a run without captures has no loss or one-way delay, a TCP run
without ``ss`` samples has no cwnd. Names and units: quicbed/analysis/catalogue.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quicbed.analysis.catalogue import MAX_HOP_METRICS, METRICS
from quicbed.analysis.metrics import (
    FlowKey,
    data_flows,
    data_packets,
    download_time,
    inter_packet_times,
    main_flow,
    run_metrics,
    short_gap_share,
    tcp_retransmissions,
)
from quicbed.analysis.packets import Packet, read_pcap
from quicbed.analysis.stats import jain_index, state_shares, time_weighted_mean_var


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


def capture_metrics(folder: Path, record: dict[str, Any], competitor_record: dict[str, Any] | None = None
                    ) -> dict[str, float]:
    server, client = folder / "server.pcap", folder / "client.pcap"
    if not (server.exists() and client.exists()):
        return {}
    server_packets, client_packets = read_pcap(server), read_pcap(client)
    # with a competitor the captures hold two downloads: measure the one from the record's port
    flow = download_flow(client_packets, (record.get("server") or {}).get("port"))
    result = run_metrics(server_packets, client_packets, record, flow=flow).to_dict()
    values = {name: result[name] for name in ("throughput", "transfer_time", "loss", "loss_burst_mean", "owd_mean", "owd_p95",
                                              "ipt_server_short_share", "ipt_client_short_share",
                                              "out_of_order", "ack_ratio")}
    values.update({f"idi_server_k{k}": v for k, v in result["idi_server"].items()})
    flow = flow or main_flow(client_packets)
    if flow[4] == "tcp":  # QUIC's come from the sender's qlog
        retransmitted, spurious = tcp_retransmissions(data_packets(server_packets, flow),
                                                      data_packets(client_packets, flow))
        values["losses_declared"] = retransmitted
        if retransmitted:
            values["spurious_loss_share"] = spurious / retransmitted
    rival = download_flow(client_packets, ((competitor_record or {}).get("server") or {}).get("port"))
    if rival is not None:
        values["competitor_ipt_server_short_share"] = short_gap_share(
            inter_packet_times(data_packets(server_packets, rival)))
    return values


def client_sockets(record: dict[str, Any]) -> set[str]:
    """``addr:port`` of the TCP client's connections (TCP_INFO in its record): other clients'
    downloads from the same server port are told apart by them."""
    return {f"{c['local']}:{c['local_port']}" for c in (record.get("transport") or {}).get("connections") or []
            if c.get("local") and c.get("local_port")}


def sender_mss(record: dict[str, Any]) -> float | None:
    """The sender's segment size as the TCP client saw it (TCP_INFO rcv_mss)."""
    for connection in (record.get("transport") or {}).get("connections") or []:
        if connection.get("rcv_mss"):
            return float(connection["rcv_mss"])
    return None


@dataclass(frozen=True)
class CwndSeries:
    """The sender's congestion window over its transfer (bytes, epoch seconds)."""

    times: np.ndarray
    cwnd: np.ndarray
    start: float
    end: float
    min_rtt: float  # s; the smallest RTT the sender measured (tcp_probe: smoothed RTT)


def sender_metrics(folder: Path, record: dict[str, Any]) -> tuple[dict[str, float], CwndSeries | None]:
    """cwnd, smoothed RTT and phase shares: the server's qlog (QUIC, with the slow-start
    exit and the declared and spurious losses), or the kernel's tcp_probe events or ``ss``
    samples (TCP); and the cwnd series they came from."""
    if (folder / "server.qlog").exists():
        from quicbed.analysis import qlog

        # the server's file, whatever vantage it declares (quinn's say "unknown")
        trace = qlog.load_trace(folder / "server.qlog", vantage=None)
        summary = qlog.summarize_trace(trace)
        values = {"cwnd_mean": summary.cwnd_mean, "srtt_mean": summary.smoothed_rtt_mean,
                  **{f"phase_{phase}": share for phase, share in summary.phases.items()}}
        exit_ = qlog.slow_start_exit(trace)
        if exit_.reason in ("loss", "delay"):
            values["slow_start_exit"] = exit_.time
            values["slow_start_exit_delay"] = float(exit_.reason == "delay")
        losses = qlog.declared_losses(trace)
        if losses is not None:
            values["losses_declared"] = losses.declared
            if losses.declared:
                values["spurious_loss_share"] = losses.spurious / losses.declared
        frame = qlog.metrics_frame(trace)
        return values, CwndSeries(frame["time"].to_numpy(), frame["cwnd"].to_numpy(), summary.start,
                                  summary.end, summary.min_rtt)
    if (folder / "tcp_probe.txt.gz").exists():
        from quicbed.analysis.tcpstate import read_trace, sender_probes, summarize_probe

        probe, states = read_trace(folder / "tcp_probe.txt.gz")
        probe = sender_probes(probe, peers=client_sockets(record))
        if len(probe) > 1:
            tcp = summarize_probe(probe, states)
            values = {"srtt_mean": tcp.srtt_mean, **{f"phase_{phase}": share for phase, share in tcp.phases.items()}}
            mss = sender_mss(record)  # tcp_probe counts cwnd in segments
            if not mss:
                return values, None
            values["cwnd_mean"] = tcp.cwnd_mean * mss
            return values, CwndSeries(probe["time"].to_numpy(), probe["cwnd"].to_numpy() * mss, tcp.start, tcp.end,
                                      float(probe["srtt"].min()))
    if (folder / "ss.txt").exists():
        from quicbed.analysis.tcpstate import connection, read_ss, summarize_ss

        samples = connection(read_ss(folder / "ss.txt"), peers=client_sockets(record))
        if not samples.empty:
            tcp = summarize_ss(samples)
            values = {"cwnd_mean": tcp.cwnd_bytes_mean, "srtt_mean": tcp.srtt_mean,
                      **{f"phase_{phase}": share for phase, share in tcp.phases.items()}}
            return values, CwndSeries(samples["time"].to_numpy(), samples["cwnd_bytes"].to_numpy(), tcp.start,
                                      tcp.end, float(samples["min_rtt"].min()))
    return {}, None


def bdp_metrics(series: CwndSeries | None, delivery_rate: float | None) -> dict[str, float]:
    """The window against the path's bandwidth-delay product, taken as the flow's delivery
    rate (bit/s) times the sender's minimum RTT: a window above it keeps data queued in the
    network."""
    if series is None or not delivery_rate or not math.isfinite(series.min_rtt) or series.min_rtt <= 0:
        return {}
    bdp = delivery_rate / 8 * series.min_rtt
    mean, _ = time_weighted_mean_var(series.times, series.cwnd, series.start, series.end)
    shares = state_shares(series.times, np.where(series.cwnd > bdp, "above", "below"), series.start, series.end)
    if not shares:
        return {}
    return {"cwnd_over_bdp": mean / bdp, "cwnd_above_bdp": shares.get("above", 0.0)}


def mac_metrics(folder: Path, hops: list[tuple[str, str]], app_bytes: int | None = None) -> dict[str, float]:
    """A-MPDU size, airtime (and per megabyte of the ``app_bytes`` delivered), retries and MAC
    delay of the node that transmits the download's last hop to the client (the AP for a station);
    MPDUs per A-MPDU on each wireless hop (sender to receiver, from the server's side); and
    the simulator's lag."""
    path = folder / "mac-stats.json"
    if not path.exists():
        return {}
    stats = json.loads(path.read_text())
    values: dict[str, float] = {}
    node = stats.get("nodes", {}).get(hops[-1][0]) if hops else None
    if node:
        values.update(ampdu_mean=node["mean_mpdus_per_ampdu"], airtime_share=node["airtime_share"],
                      mac_retries=node["retries"])
        if app_bytes:
            values["airtime_per_mb"] = node["airtime_s"] / (app_bytes / 1e6)
        delay = node.get("mac_delay") or {}
        if delay.get("frames"):
            values.update(mac_delay_median=delay["median_s"], mac_delay_p95=delay["p95_s"])
    for number, (sender, receiver) in enumerate(hops[:MAX_HOP_METRICS], start=1):
        for radio in stats.get("radios", {}).values():
            link = radio.get("per_receiver", {}).get(receiver)
            if radio.get("node") == sender and link and link.get("psdus"):
                values[f"ampdu_hop{number}"] = link["mean_mpdus_per_ampdu"]
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
        total = main["goodput"] + rival["goodput"]
        if total > 0:
            values["goodput_share"] = main["goodput"] / total
    return values


def clients_metrics(folder: Path, clients: list[dict[str, Any]]) -> dict[str, float]:
    """A many-client run (details.clients: node, goodput, bytes, download_time per client):
    their count, aggregate goodput (every byte over the longest download: they start
    together), the smallest and median client goodput, Jain's index of the goodputs, and the
    spread of the A-MPDU sizes the APs sent to each client (mac-stats.json)."""
    goodputs = [client["goodput"] for client in clients if client.get("goodput")]
    values: dict[str, float] = {"clients": float(len(clients))}
    if len(goodputs) == len(clients) and goodputs:
        longest = max(client["download_time"] for client in clients)
        values.update(aggregate_goodput=8.0 * sum(client["bytes"] for client in clients) / longest,
                      client_goodput_min=min(goodputs), client_goodput_median=float(np.median(goodputs)),
                      jain_index=jain_index(goodputs))
    path = folder / "mac-stats.json"
    if path.exists():
        radios = json.loads(path.read_text()).get("radios", {}).values()
        nodes = {client["node"] for client in clients}
        sizes = [link["mean_mpdus_per_ampdu"] for radio in radios if radio.get("role") == "ap"
                 for receiver, link in (radio.get("per_receiver") or {}).items()
                 if receiver in nodes and link.get("psdus")]
        if sizes:
            values.update(ampdu_client_min=min(sizes), ampdu_client_median=float(np.median(sizes)),
                          ampdu_client_max=max(sizes))
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
    stress = cpu["roles"].get("stress")
    if stress and stress["cpu_seconds"] > 0:
        values["cpu_stress"] = stress["cpu_seconds"]
    return values


def stress_metrics(stress: dict[str, Any] | None) -> dict[str, float]:
    """The CPU stress a run applied to its client (details.stress): the quota in cores, the
    number of load processes, and the share of CFS periods in which the quota held it back."""
    if not stress:
        return {}
    values = {"stress_load": float(stress.get("load") or 0)}
    if stress.get("cpu_quota") is not None:
        values["stress_cpu_quota"] = float(stress["cpu_quota"])
    throttling = stress.get("throttling") or {}
    if throttling.get("periods"):
        values["client_throttled"] = throttling["throttled_periods"] / throttling["periods"]
    return values


def run_metrics_of(folder: Path, record: dict[str, Any], wireless_hops: list[tuple[str, str]] | None = None,
                   competitor_record: dict[str, Any] | None = None,
                   clients: list[dict[str, Any]] | None = None) -> dict[str, float]:
    """Every metric this run's artifacts allow, in base units."""
    values: dict[str, float] = {}
    values.update(record_metrics(record))
    if competitor_record is not None:
        values.update(competitor_metrics(values, competitor_record))
    if clients:
        values.update(clients_metrics(folder, clients))
    if record.get("ok"):
        values.update(capture_metrics(folder, record, competitor_record))
        sender, series = sender_metrics(folder, record)
        values.update(sender)
        values.update(bdp_metrics(series, values.get("throughput") or values.get("goodput")))
    values.update(mac_metrics(folder, wireless_hops or [], record.get("bytes") if record.get("ok") else None))
    return _finite(values)
