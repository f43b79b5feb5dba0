"""The metrics of one finished run, from the artifacts in its folder (docs/results.md).

Every metric is optional: a run without captures has no loss or one-way delay, a TCP run
without ``ss`` samples has no cwnd. Names and units: quicbed/analysis/catalogue.py.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from quicbed.analysis.catalogue import MAX_HOP_METRICS, METRICS, UncataloguedMetric
from quicbed.analysis.metrics import (
    FlowKey,
    connect_time,
    data_packets,
    download_flows,
    download_time,
    first_byte_time,
    goodput,
    inter_packet_times,
    request_time,
    response_data,
    reverse,
    run_metrics,
    short_gap_share,
    total_time,
)
from quicbed.analysis.mac import merge_nodes, receiver_summary
from quicbed.analysis.matching import tcp_retransmissions
from quicbed.analysis.mobility import aps_used, capture_outages, handovers
from quicbed.analysis.packets import ACK, SYN, Packet, read_pcap
from quicbed.analysis.stats import jain_index, state_shares, time_weighted_mean_var
from quicbed.apps.client_device import busy_share
from quicbed.apps.transports.tcp_state import TRACE_META

#: the interface MTU a captured packet must not exceed (bytes of IP packet): a larger one is
#: a segmentation-offload super-packet, not what the link carried
DEFAULT_MTU = 1500


def _finite(metrics: dict[str, Any]) -> dict[str, float]:
    """Only catalogued, finite numbers: NaN has no place in a JSON line. A name the catalogue
    lacks is said (UncataloguedMetric), not dropped in silence."""
    clean: dict[str, float] = {}
    for name, value in metrics.items():
        if name not in METRICS:
            warnings.warn(
                f"metric {name!r} is not in quicbed.analysis.catalogue.METRICS, so it is left out of "
                "the results (fix: add its entry there)",
                UncataloguedMetric,
                stacklevel=2,
            )
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            clean[name] = float(value)
    return clean


def record_metrics(record: dict[str, Any]) -> dict[str, float]:
    """Download time, goodput and the times of the whole exchange from the client's own record."""
    values: dict[str, float] = {}
    if not record.get("ok"):
        return values
    values["download_time"] = download_time(record)
    values["goodput"] = goodput(record)
    values["connect_time"] = connect_time(record)
    values["ttfb"] = first_byte_time(record)
    values["total_time"] = total_time(record)
    busy = busy_share(record)
    if busy is not None:
        values["client_device_busy"] = busy
    return values


def record_port(record: dict[str, Any] | None) -> int | None:
    """The server port a client record downloaded from (quicbed's clients: ``server.port``;
    curl: ``remote_port``)."""
    if not record:
        return None
    port = (record.get("server") or {}).get("port") or record.get("remote_port")
    return int(port) if port else None


def record_protocol(record: dict[str, Any]) -> str | None:
    """The transport protocol of a client record's download (None: cannot tell)."""
    if record.get("tool") == "quicbed-quic-client":
        return "udp"
    if record.get("tool") == "quicbed-tcp-client" or "size_download" in record:
        return "tcp"
    return None


def download_flow(packets: list[Packet], port: int | None) -> FlowKey | None:
    """The first data flow the server sends from ``port`` (None without a port or a flow)."""
    if port is None:
        return None
    return next(iter(download_flows(packets, port)), None)


def record_flows(packets: list[Packet], record: dict[str, Any]) -> list[FlowKey]:
    """Every connection of a record's download in the client capture: the data flows from the
    record's server port (and address, when it names one). Nothing else is taken instead:
    another flow (a competitor, background traffic) would describe another download."""
    port = record_port(record)
    if port is None:
        return []
    address = (record.get("server") or {}).get("address") or record.get("remote_ip")
    return download_flows(packets, port, address, record_protocol(record))


@lru_cache(maxsize=4)
def _read_capture(path: str, modified_ns: int, size: int) -> tuple[Packet, ...]:
    return tuple(read_pcap(path))


def read_capture(path: Path) -> list[Packet]:
    """:func:`read_pcap`, kept while the file is unchanged: a run's captures are read for its
    checks and again for its metrics."""
    stat = path.stat()
    return list(_read_capture(str(path), stat.st_mtime_ns, stat.st_size))


@dataclass
class CaptureAnalysis:
    """What a run's captures say about its download: flat metrics, each connection's own
    figures, the client's work before its first packet, and warnings (a metric left out says
    why here)."""

    metrics: dict[str, float] = field(default_factory=dict)
    connections: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    setup_lead: float | None = None


#: the record's clock and the captures' (both this host's wall clock) agree to this
CLOCK_TOLERANCE_S = 0.002


def setup_lead(client_packets: list[Packet], record: dict[str, Any], flows: list[FlowKey]) -> float | None:
    """Seconds from the record's start (its first connect call) to the first packet of its
    first connection at the client capture (the client's SYN or QUIC Initial): the client's
    own work before anything reaches the wire. Only a packet that opens a connection counts: a
    resumed run's capture may begin while its priming connection's last packets are still on
    the way, on the same addresses and ports with quinn. None without a start or a packet."""
    started = record.get("started_at")
    if not isinstance(started, (int, float)) or not flows:
        return None
    towards_server = {reverse(flow) for flow in flows}
    first = min(
        (packet.ts for packet in client_packets if packet.flow in towards_server and _opens(packet)), default=None
    )
    return None if first is None else first - started


def _opens(packet: Packet) -> bool:
    """A client's first packet of a connection: a SYN without ACK, or a QUIC Initial."""
    if packet.proto == "tcp":
        return packet.has_flags(SYN) and not packet.has_flags(ACK)
    return packet.quic_type == "initial"


def exchange_times(record: dict[str, Any], lead: float | None, warnings: list[str]) -> dict[str, float]:
    """connect_time, ttfb and total_time counted from the first packet: the record's, less the
    client's work before that packet (aioquic builds its first flight in Python: 8-13 ms on a
    2-core host, more than half of a 20 ms handshake)."""
    if lead is None:
        return {}
    if lead < -CLOCK_TOLERANCE_S:
        warnings.append(
            f"the client capture's first packet came {-lead * 1e3:.1f} ms before the record's start: "
            "the clocks differ, so connect_time, ttfb and total_time are the record's"
        )
        return {}
    lead = max(lead, 0.0)
    return {
        name: value - lead
        for name, value in (
            ("connect_time", connect_time(record)),
            ("ttfb", first_byte_time(record)),
            ("total_time", total_time(record)),
        )
        if value >= lead
    }


def analyse_captures(
    folder: Path, record: dict[str, Any], competitor_records: Sequence[dict[str, Any]] = ()
) -> CaptureAnalysis:
    """The capture metrics of the record's download over all its connections
    (:func:`quicbed.analysis.metrics.run_metrics`), TCP's declared and spurious losses summed
    over them, and the (first) competitor's server-side gaps."""
    analysis = CaptureAnalysis()
    server, client = folder / "server.pcap", folder / "client.pcap"
    if not (server.exists() and client.exists()):
        return analysis
    server_packets, client_packets = read_capture(server), read_capture(client)
    flows = record_flows(client_packets, record)
    if not flows:
        analysis.warnings.append(
            f"no data from the record's server port {record_port(record)} in the client capture: capture metrics "
            "left out (no other flow is taken in its place)"
        )
        return analysis
    if request_time(record) is None:
        analysis.warnings.append(
            "the client record has no request time: each connection's data window starts at "
            "its first data packet (TLS handshake data included)"
        )
    result = run_metrics(server_packets, client_packets, record, flows=flows)
    if not result.data_packets_received:
        analysis.warnings.append(
            "no data packet of the download reached the client capture after the record's "
            "request time: capture metrics left out (are the clocks of the record and the "
            "captures the same?)"
        )
        return analysis
    summary = result.to_dict()
    values = {
        name: summary[name]
        for name in (
            "throughput",
            "transfer_time",
            "loss",
            "loss_burst_mean",
            "owd_mean",
            "owd_p95",
            "ipt_server_short_share",
            "ipt_client_short_share",
            "out_of_order",
            "ack_ratio",
        )
    }
    values.update({f"idi_server_k{k}": v for k, v in summary["idi_server"].items()})
    connections = [{**item, "flow": list(item["flow"])} for item in summary["connections"]]
    if flows[0][4] == "tcp":  # QUIC's come from the sender's qlog
        declared = spurious = 0
        for item, flow in zip(connections, flows, strict=True):
            start = item["request_time"]
            sent, spurious_here = tcp_retransmissions(
                response_data(data_packets(server_packets, flow), start),
                response_data(data_packets(client_packets, flow), start),
            )
            item.update(losses_declared=sent, losses_spurious=spurious_here)
            declared, spurious = declared + sent, spurious + spurious_here
        values["losses_declared"] = declared
        if declared:
            values["spurious_loss_share"] = spurious / declared
    rival = download_flow(client_packets, record_port(competitor_records[0])) if competitor_records else None
    if rival is not None:
        values["competitor_ipt_server_short_share"] = short_gap_share(
            inter_packet_times(data_packets(server_packets, rival))
        )
    analysis.setup_lead = setup_lead(client_packets, record, flows)
    values.update(exchange_times(record, analysis.setup_lead, analysis.warnings))
    analysis.metrics, analysis.connections = values, connections
    return analysis


def capture_metrics(
    folder: Path, record: dict[str, Any], competitor_records: Sequence[dict[str, Any]] = ()
) -> dict[str, float]:
    """The flat capture metrics of :func:`analyse_captures`."""
    return analyse_captures(folder, record, competitor_records).metrics


def oversized_packets(packets: list[Packet], mtu: int = DEFAULT_MTU) -> int:
    """Captured packets whose IP length exceeds the interface MTU: segmentation or receive
    offload left on (a super-packet the capture saw but no link carried), which makes
    packet counts, gaps and one-way delays describe the offload instead of the network."""
    return sum(1 for packet in packets if packet.ip_len > mtu)


def measurement_invalid_reasons(folder: Path, details: dict[str, Any], mtu: int = DEFAULT_MTU) -> list[str]:
    """Why a run's own measurements cannot be trusted: a capture whose filter accepted packets
    that never reached its file (tcpdump stopped before writing them), tracepoint events lost
    to ring-buffer overruns, captured packets larger than the MTU (offload on), background
    traffic that never flowed. Dropped by the kernel is already a reason of the runner's
    (invalid_reasons)."""
    reasons = []
    for name, stats in (details.get("capture_stats") or {}).items():
        unwritten = (stats or {}).get("unwritten") or 0
        if unwritten:
            reasons.append(f"the {name} capture did not write {unwritten} packets its filter accepted")
    background = details.get("background") or {}
    if background.get("rate") and "bytes_received" in background and not background["bytes_received"]:
        reasons.append(
            "the background traffic delivered nothing (iperf3's UDP stream set-up was lost, or its "
            "sender never sent): the transfer ran without it"
        )
    overruns = (details.get("tcp_state") or {}).get("overruns") or 0
    if overruns:
        reasons.append(f"the tcp_probe trace lost {overruns} events (trace buffer overrun)")
    for name in ("server", "client"):
        path = folder / f"{name}.pcap"
        if path.exists():
            large = oversized_packets(read_capture(path), mtu)
            if large:
                reasons.append(
                    f"the {name} capture holds {large} packets larger than the {mtu}-byte MTU "
                    "(segmentation or receive offload on)"
                )
    return reasons


def review_measurement(
    folder: Path, record: dict[str, Any], details: dict[str, Any], mtu: int = DEFAULT_MTU
) -> dict[str, Any]:
    """What a run keeps in its details about its own measurement, once its processes are
    stopped: each connection's capture figures, the warnings of the capture analysis, and
    the reasons its measurements are invalid (:func:`measurement_invalid_reasons`)."""
    analysis = (
        analyse_captures(folder, record, details.get("competitors", ())) if record.get("ok") else CaptureAnalysis()
    )
    return {
        "connections": analysis.connections,
        "warnings": analysis.warnings + layout_warnings(details),
        "setup_lead_s": analysis.setup_lead,
        "invalid_reasons": measurement_invalid_reasons(folder, details, mtu),
    }


def layout_warnings(details: dict[str, Any]) -> list[str]:
    """What the run's layout means for its figures: when the server's own interface was shaped
    and its qdisc held packets back (the token bucket ran out) or dropped some, the bottleneck
    was a queue on the sending host. Its capture stays right (taken before that qdisc), but
    there Linux's TCP small queues throttle a TCP sender before the queue drops, while a QUIC
    sender's excess is dropped; a router's queue treats both alike."""
    server = (details.get("captures") or {}).get("server") or {}
    own = server.get("own_qdisc") or {}
    if not (own.get("overlimits") or own.get("dropped")):
        return []
    return [
        f"the server's own interface was the bottleneck (its {own.get('kind')} qdisc held packets back "
        f"{own.get('overlimits') or 0} times and dropped {own.get('dropped') or 0}): the capture shows what the "
        "server sent, but a queue on the sending host throttles TCP (TCP small queues) before it drops, unlike a "
        "router's; shape a link between routers to emulate a network bottleneck (docs/metrics.md, section 1)"
    ]


def client_sockets(record: dict[str, Any]) -> set[str]:
    """``addr:port`` of the TCP client's connections (TCP_INFO in its record): other clients'
    downloads from the same server port are told apart by them."""
    return {
        f"{c['local']}:{c['local_port']}"
        for c in (record.get("transport") or {}).get("connections") or []
        if c.get("local") and c.get("local_port")
    }


def sender_mss(record: dict[str, Any], peer: str | None = None) -> float | None:
    """The sender's segment size as the TCP client saw it (TCP_INFO rcv_mss): of the
    connection whose client socket is ``peer`` (``addr:port``), else of the first one."""
    connections = (record.get("transport") or {}).get("connections") or []
    mine = [c for c in connections if peer and f"{c.get('local')}:{c.get('local_port')}" == peer]
    for connection in mine or connections:
        if connection.get("rcv_mss"):
            return float(connection["rcv_mss"])
    return None


@dataclass(frozen=True)
class CwndSeries:
    """The sender's congestion window over its transfer (bytes, epoch seconds); with several
    connections, the sum of their windows (each counted while its transfer lasts)."""

    times: np.ndarray
    cwnd: np.ndarray
    start: float
    end: float
    min_rtt: float  # s; the smallest RTT the sender measured (tcp_probe: smoothed RTT)


@dataclass(frozen=True)
class SocketState:
    """One sending socket's congestion window and RTT over its own transfer."""

    times: np.ndarray
    cwnd: np.ndarray  # bytes
    srtt: np.ndarray  # s
    start: float
    end: float
    phases: dict[str, float]
    min_rtt: float


def combine_sockets(sockets: list[SocketState]) -> tuple[dict[str, float], CwndSeries | None]:
    """The run's window metrics from every sending socket of its download.

    ``cwnd_mean``, ``srtt_mean`` and the phase shares are each socket's time-weighted value
    over its own transfer, averaged with weights equal to those transfers' durations: the
    window of a connection, as QUIC's one connection has it. The series (for the BDP
    metrics) is the sum of the windows of the sockets transferring at each instant: what
    the download as a whole may keep in flight."""
    active = [s for s in sockets if math.isfinite(s.start) and math.isfinite(s.end) and s.end > s.start]
    if not active:
        return {}, None
    weights = np.array([s.end - s.start for s in active])

    def weighted(values: list[float]) -> float:
        data = np.array(values, dtype=float)
        keep = ~np.isnan(data)
        return float(np.sum(data[keep] * weights[keep]) / np.sum(weights[keep])) if keep.any() else math.nan

    values = {
        "cwnd_mean": weighted([time_weighted_mean_var(s.times, s.cwnd, s.start, s.end)[0] for s in active]),
        "srtt_mean": weighted([time_weighted_mean_var(s.times, s.srtt, s.start, s.end)[0] for s in active]),
    }
    for phase in sorted({name for s in active for name in s.phases}):
        values[f"phase_{phase}"] = weighted([s.phases.get(phase, 0.0) for s in active])
    times = np.unique(np.concatenate([s.times for s in active]))
    total = np.zeros(times.size)
    for state in active:
        held = np.searchsorted(state.times, times, side="right") - 1
        inside = (held >= 0) & (times >= state.start) & (times <= state.end)
        total[inside] += state.cwnd[held[inside]]
    series = CwndSeries(
        times, total, min(s.start for s in active), max(s.end for s in active), min(s.min_rtt for s in active)
    )
    return values, series


def trace_clock_offset_of(folder: Path) -> float:
    """Epoch minus the tracepoints' clock for the trace in ``folder`` (``tcp_probe.json``,
    written with the trace); 0 when it is missing (times then stay on the trace clock)."""
    from quicbed.analysis.tcpstate import trace_clock_offset

    path = folder / TRACE_META
    return trace_clock_offset(json.loads(path.read_text())) if path.exists() else 0.0


def probe_sockets(folder: Path, record: dict[str, Any]) -> list[SocketState]:
    """Each sending socket of the record's download from its ``tcp_probe`` events, on the
    captures' clock; none without the MSS (tcp_probe counts the window in segments)."""
    from quicbed.analysis.tcpstate import probes_by_socket, read_trace, summarize_probe

    probe, states = read_trace(folder / "tcp_probe.txt.gz", trace_clock_offset_of(folder))
    sockets = []
    for events in probes_by_socket(probe, peers=client_sockets(record)):
        mss = sender_mss(record, str(events["dst"].iloc[0]))
        if len(events) < 2 or not mss:
            continue
        summary = summarize_probe(events, states)
        sockets.append(
            SocketState(
                events["time"].to_numpy(),
                events["cwnd"].to_numpy() * mss,
                events["srtt"].to_numpy(),
                summary.start,
                summary.end,
                summary.phases,
                float(events["srtt"].min()),
            )
        )
    return sockets


def ss_sockets(folder: Path, record: dict[str, Any]) -> list[SocketState]:
    """Each sending socket of the record's download from the ``ss`` samples."""
    from quicbed.analysis.tcpstate import connections, read_ss, summarize_ss

    sockets = []
    for samples in connections(read_ss(folder / "ss.txt"), peers=client_sockets(record)):
        if samples.empty:
            continue
        summary = summarize_ss(samples)
        sockets.append(
            SocketState(
                samples["time"].to_numpy(),
                samples["cwnd_bytes"].to_numpy(dtype=float),
                samples["rtt"].to_numpy(dtype=float),
                summary.start,
                summary.end,
                summary.phases,
                float(samples["min_rtt"].min()),
            )
        )
    return sockets


def sender_metrics(folder: Path, record: dict[str, Any]) -> tuple[dict[str, float], CwndSeries | None]:
    """cwnd, smoothed RTT and phase shares: the server's qlog (QUIC, with the slow-start
    exit and the declared and spurious losses), or the kernel's tcp_probe events or ``ss``
    samples (TCP, every connection of the download: :func:`combine_sockets`); and the cwnd
    series they came from."""
    if (folder / "server.qlog").exists():
        from quicbed.analysis import qlog

        # the server's file, whatever vantage it declares (quinn's say "unknown")
        trace = qlog.load_trace(folder / "server.qlog", vantage=None)
        summary = qlog.summarize_trace(trace)
        values = {
            "cwnd_mean": summary.cwnd_mean,
            "srtt_mean": summary.smoothed_rtt_mean,
            **{f"phase_{phase}": share for phase, share in summary.phases.items()},
        }
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
        return values, CwndSeries(
            frame["time"].to_numpy(), frame["cwnd"].to_numpy(), summary.start, summary.end, summary.min_rtt
        )
    if (folder / "tcp_probe.txt.gz").exists():
        probed = probe_sockets(folder, record)
        if probed:
            return combine_sockets(probed)
        if not sender_mss(record):  # the events are there, the MSS to count their windows in bytes is not
            return {}, None
    if (folder / "ss.txt").exists():
        return combine_sockets(ss_sockets(folder, record))
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


def mac_metrics(
    folder: Path, hops: list[tuple[str, str]], app_bytes: int | None = None, window_s: float | None = None
) -> dict[str, float]:
    """A-MPDU size, airtime (its share of the download's ``window_s``, and per megabyte of the
    ``app_bytes`` delivered), retries and MAC delay of what the node that transmits the
    download's last hop (the AP for a station, every AP a roaming client used) sent to the
    client alone; its queue discipline and downlink OFDMA, and the client's uplink OFDMA;
    MPDUs per A-MPDU on each wireless hop (sender to receiver, from the server's side); and
    the simulator's lag. Folders from before per-receiver histograms fall back to the sender's
    figures over every receiver and the whole snapshot."""
    path = folder / "mac-stats.json"
    if not path.exists():
        return {}
    stats = json.loads(path.read_text())
    values: dict[str, float] = {}
    motion = stats.get("motion")
    timeline = motion["stations"].get(hops[-1][1]) if hops and motion else None
    # the last hop's senders: the client's AP, or every AP it roamed to
    senders = aps_used(timeline) or [hops[-1][0]] if hops else []
    summaries = [stats.get("nodes", {})[name] for name in senders if name in stats.get("nodes", {})]
    # one AP's summary as written: results folders from before the node histograms were kept
    # have its figures but not the histograms a merge needs
    node = summaries[0] if len(summaries) == 1 else merge_nodes(summaries) if summaries else None
    own = receiver_summary(stats.get("radios", {}), senders, hops[-1][1]) if hops else None
    if own:
        values.update(ampdu_mean=own["mean_mpdus_per_ampdu"], mac_retries=own["retries"])
        if window_s:
            values["airtime_share"] = own["airtime_s"] / window_s
        if app_bytes:
            values["airtime_per_mb"] = own["airtime_s"] / (app_bytes / 1e6)
        if own["mac_delay"]["frames"]:
            values.update(mac_delay_median=own["mac_delay"]["median_s"], mac_delay_p95=own["mac_delay"]["p95_s"])
    if node:
        if not own:
            values.update(
                ampdu_mean=node["mean_mpdus_per_ampdu"],
                airtime_share=node["airtime_share"],
                mac_retries=node["retries"],
            )
            if app_bytes:
                values["airtime_per_mb"] = node["airtime_s"] / (app_bytes / 1e6)
            delay = node.get("mac_delay") or {}
            if delay.get("frames"):
                values.update(mac_delay_median=delay["median_s"], mac_delay_p95=delay["p95_s"])
        sojourn = node.get("queue_disc_sojourn") or {}
        if sojourn.get("frames"):
            values.update(
                queue_delay_median=sojourn["median_s"],
                queue_delay_p95=sojourn["p95_s"],
                queue_disc_drops=node["discipline_drops"],
            )
    if hops:  # OFDMA (802.11ax): how many stations shared a downlink multi-user PPDU; the client's uplink
        sending = [radio for radio in stats.get("radios", {}).values() if radio.get("node") in senders]
        multi_user, carried = (sum(radio.get(key, 0) for radio in sending) for key in ("mu_ppdus", "mu_psdus"))
        if multi_user:
            ppdus = sum(radio["data_psdus"] for radio in sending) - carried + multi_user  # (a PSDU per station)
            values.update(ofdma_users_per_ppdu=carried / multi_user, ofdma_ppdu_share=multi_user / ppdus)
        client = [radio for radio in stats.get("radios", {}).values() if radio.get("node") == hops[-1][1]]
        uplink, sent = (sum(radio.get(key, 0) for radio in client) for key in ("ul_mu_data_psdus", "data_psdus"))
        if uplink and sent:  # uplink OFDMA: the client's data in the resource units its AP triggered
            values["ofdma_uplink_share"] = uplink / sent
    if timeline is not None:  # a client that moved or roamed
        values.update(handovers(timeline, motion["interval_s"]))
    for number, (sender, receiver) in enumerate(hops[:MAX_HOP_METRICS], start=1):
        hop_senders = senders if number == len(hops) else [sender]
        links = [
            radio["per_receiver"][receiver]
            for radio in stats.get("radios", {}).values()
            if radio.get("node") in hop_senders and radio.get("per_receiver", {}).get(receiver, {}).get("psdus")
        ]
        if links:  # PSDU-weighted: the MPDUs of every A-MPDU the receiver was sent, over their count
            values[f"ampdu_hop{number}"] = sum(link["psdus"] * link["mean_mpdus_per_ampdu"] for link in links) / sum(
                link["psdus"] for link in links
            )
    lag = stats.get("lag", {})
    if lag.get("max_ms") is not None:
        values["lag_max"] = lag["max_ms"] / 1e3
    if lag.get("p99_ms") is not None:
        values["lag_p99"] = lag["p99_ms"] / 1e3
    if stats.get("behind_share") is not None:
        values["lag_behind_share"] = stats["behind_share"]
    if stats.get("slow_share") is not None:
        values["lag_slow_share"] = stats["slow_share"]
    tap = stats.get("tap") or {}
    if tap.get("measured"):
        values["tap_drops"] = tap["rx_drops"] + tap["tx_drops"]
        for direction in ("rx", "tx"):
            if tap[f"{direction}_delay"]["p95_s"] is not None:
                values[f"tap_{direction}_delay_p95"] = tap[f"{direction}_delay"]["p95_s"]
    if frames := stats.get("frames"):
        values["frames_vanished"] = frames["vanished"]
    return values


def competitor_metrics(main: dict[str, float], rival_records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The competitors' download time (the longest) and goodput (together), Jain's index of
    every download's goodput, and the measured download's share of them all."""
    rivals = [record_metrics(record) for record in rival_records]
    values: dict[str, float] = {}
    if all("goodput" in rival for rival in rivals):
        values["competitor_goodput"] = sum(rival["goodput"] for rival in rivals)
    if all("download_time" in rival for rival in rivals):
        values["competitor_download_time"] = max(rival["download_time"] for rival in rivals)
    if rivals and "goodput" in main and all("goodput" in rival for rival in rivals):
        goodputs = [main["goodput"], *(rival["goodput"] for rival in rivals)]
        values["jain_index"] = jain_index(goodputs)
        if sum(goodputs) > 0:
            values["goodput_share"] = main["goodput"] / sum(goodputs)
    return values


def clients_metrics(folder: Path, clients: list[dict[str, Any]]) -> dict[str, float]:
    """A many-client run (details.clients: node, goodput, bytes, download_time and
    download_end per client): their count, aggregate goodput (every byte over the time from
    the first download's start to the last one's end: downloads that did not start together,
    one client's connection set-up a second late, are not counted as if they overlapped;
    over the longest download where the records do not say when they ended), the smallest and median client goodput,
    Jain's index of the goodputs, and the spread of the A-MPDU sizes the APs sent to each
    client (mac-stats.json)."""
    goodputs = [client["goodput"] for client in clients if client.get("goodput")]
    values: dict[str, float] = {"clients": float(len(clients))}
    if len(goodputs) == len(clients) and goodputs:
        span = max(client["download_time"] for client in clients)
        if all(isinstance(client.get("download_end"), (int, float)) for client in clients):
            span = max(client["download_end"] for client in clients) - min(
                client["download_end"] - client["download_time"] for client in clients
            )
        values.update(
            aggregate_goodput=8.0 * sum(client["bytes"] for client in clients) / span,
            client_goodput_min=min(goodputs),
            client_goodput_median=float(np.median(goodputs)),
            jain_index=jain_index(goodputs),
        )
    path = folder / "mac-stats.json"
    if path.exists():
        radios = json.loads(path.read_text()).get("radios", {}).values()
        nodes = {client["node"] for client in clients}
        sizes = [
            link["mean_mpdus_per_ampdu"]
            for radio in radios
            if radio.get("role") == "ap"
            for receiver, link in (radio.get("per_receiver") or {}).items()
            if receiver in nodes and link.get("psdus")
        ]
        if sizes:
            values.update(
                ampdu_client_min=min(sizes), ampdu_client_median=float(np.median(sizes)), ampdu_client_max=max(sizes)
            )
    return values


#: roles whose CPU becomes metrics (the others stay in run.json's details.cpu)
CPU_METRIC_ROLES = ("server", "client", "competitor", "channel")
#: roles every run has; the others only where the run started them (a competitor, the channel)
CPU_ROLES_OF_EVERY_RUN = ("server", "client")


def cpu_metrics(cpu: dict[str, Any] | None) -> dict[str, float]:
    """CPU seconds and busiest-interval share per endpoint role and the channel, and the
    machine's busy and steal shares, over the transfer (details.cpu of a run). None where no
    sample covered the transfer: zeros would read as an idle machine."""
    if not cpu or "roles" not in cpu or cpu.get("window_s", 1.0) <= 0:
        return {}
    values: dict[str, float] = {}
    for role in CPU_METRIC_ROLES:
        usage = cpu["roles"].get(role)
        if usage and (role in CPU_ROLES_OF_EVERY_RUN or usage["cpu_seconds"] > 0):
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


def run_metrics_of(
    folder: Path,
    record: dict[str, Any],
    wireless_hops: list[tuple[str, str]] | None = None,
    competitor_records: Sequence[dict[str, Any]] = (),
    clients: list[dict[str, Any]] | None = None,
) -> dict[str, float]:
    """Every metric this run's artifacts allow, in base units (what they leave out and why:
    :func:`review_measurement`, kept in the run's details)."""
    values: dict[str, float] = {}
    values.update(record_metrics(record))
    if competitor_records:
        values.update(competitor_metrics(values, competitor_records))
    if clients:
        values.update(clients_metrics(folder, clients))
    if record.get("ok"):
        values.update(capture_metrics(folder, record, competitor_records))
        sender, series = sender_metrics(folder, record)
        values.update(sender)
        values.update(bdp_metrics(series, values.get("throughput") or values.get("goodput")))
    values.update(
        mac_metrics(
            folder,
            wireless_hops or [],
            record.get("bytes") if record.get("ok") else None,
            record.get("total_time") if record.get("ok") else None,
        )
    )
    if wireless_hops and "handovers" not in values:
        values.update(association_metrics(folder, record, wireless_hops[-1][1]))
    return _finite(values)


def association_metrics(folder: Path, record: dict[str, Any], client: str) -> dict[str, float]:
    """Handovers of a client from the associations its APs logged during the transfer
    (associations.json, written where the backend reads hostapd's logs: mininet-wifi), and the
    longest gap in the data packets of the record's download (every connection of it, nothing
    else) in the client's capture across one of them (handover_outage)."""
    path = folder / "associations.json"
    if not path.exists():
        return {}
    logged = json.loads(path.read_text())
    moments = [
        logged["since"] + e["t"] for e in logged["events"] if e["station"] == client and e["event"] == "associated"
    ]
    values = {"handovers": float(len(moments))}
    capture = folder / "client.pcap"
    if moments and capture.exists():
        packets = read_capture(capture)
        arrivals = sorted(p.ts for flow in record_flows(packets, record) for p in data_packets(packets, flow))
        outages = capture_outages(arrivals, moments)
        if outages:
            values["handover_outage"] = max(outages)
    return values
