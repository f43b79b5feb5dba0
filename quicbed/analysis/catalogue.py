"""The per-run metrics a results folder carries: name, label, unit, direction and range.

``results.jsonl`` stores every metric in base units (seconds, bit/s, bytes, shares in
[0, 1]); tables and plots show them scaled (``scale``) in ``unit``. Runners write only names
listed here, so a report never has to guess what a column means.
"""

from __future__ import annotations

from dataclasses import dataclass

from quicbed.analysis.metrics import IDI_KS

#: wireless hops whose aggregation is a metric of its own (ampdu_hop1 ... from the server's side)
MAX_HOP_METRICS = 6
#: a share, ratio or probability in [0, 1]
FRACTION: tuple[float, float | None] = (0.0, 1.0)
#: a quantity that cannot be negative (no upper bound)
NON_NEGATIVE: tuple[float, float | None] = (0.0, None)


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str  # the unit shown (after scaling)
    scale: float  # shown value = stored value * scale
    better: str | None  # "higher", "lower" or None (descriptive)
    source: str  # where it comes from: record, captures, qlog, tcp, mac, cpu
    description: str
    #: the range the stored (base-unit) value cannot leave: (0, 1) for shares, ratios and
    #: probabilities that are fractions, (0, None) for non-negative quantities (times, rates,
    #: counts, bytes, CPU seconds and cores, ratios that can exceed 1), None when unknown or
    #: unbounded. Confidence intervals never leave it (stats.metric_mean_ci).
    bounds: tuple[float, float | None] | None = None

    def show(self, value: float) -> float:
        return value * self.scale

    @property
    def axis_label(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


# a table: one metric to a few lines reads better than one argument to a line
# fmt: off
_METRICS = [
    Metric("download_time", "download time", "s", 1.0, "lower", "record",
           "first request to last byte of the last object, at the client (page load time for pages)",
           bounds=NON_NEGATIVE),
    Metric("connect_time", "connect time", "s", 1.0, "lower", "record",
           "the first connection's first packet (SYN or QUIC Initial) to its handshake done (TCP and TLS, or "
           "QUIC), at the client: the record's, counted from that packet in the client capture",
           bounds=NON_NEGATIVE),
    Metric("ttfb", "time to first byte", "s", 1.0, "lower", "record",
           "the first connection's first packet to the first response byte, at the client (set-up included; "
           "the record's own ttfb counts from the request)", bounds=NON_NEGATIVE),
    Metric("total_time", "total time", "s", 1.0, "lower", "record",
           "the first connection's first packet to the last byte of the last object, at the client (a page's "
           "load time with its connections' set-up)", bounds=NON_NEGATIVE),
    Metric("goodput", "goodput", "Mbit/s", 1e-6, "higher", "record",
           "the client record's application bytes over its download time (first request to last byte)",
           bounds=NON_NEGATIVE),
    Metric("throughput", "throughput", "Mbit/s", 1e-6, "higher", "captures",
           "IP bytes (headers included, the same for TCP and QUIC) received over first-to-last data packet of the "
           "response at the client capture, "
           "every connection of the download (handshake data before the response excluded)", bounds=NON_NEGATIVE),
    Metric("transfer_time", "transfer time", "s", 1.0, "lower", "captures",
           "first to last data packet of the response at the client capture, over every connection",
           bounds=NON_NEGATIVE),
    Metric("loss", "loss", "%", 100.0, "lower", "captures",
           "data packets sent by the server never seen at the client", bounds=FRACTION),
    Metric("loss_burst_mean", "loss burst", "pkts", 1.0, None, "captures",
           "mean run of consecutively lost data packets, in the server's send order (Bernoulli: 1/(1-p))",
           bounds=NON_NEGATIVE),
    Metric("owd_mean", "one-way delay", "ms", 1e3, "lower", "captures", "mean server-to-client delay of data packets",
           bounds=NON_NEGATIVE),
    Metric("owd_p95", "one-way delay p95", "ms", 1e3, "lower", "captures", "95th percentile of the one-way delay",
           bounds=NON_NEGATIVE),
    Metric("ipt_server_short_share", "short gaps at server", "%", 100.0, None, "captures",
           "share of inter-packet times below 100 us between data packets leaving the server (burstiness)",
           bounds=FRACTION),
    Metric("ipt_client_short_share", "short gaps at client", "%", 100.0, None, "captures",
           "share of inter-packet times below 100 us between data packets arriving at the client", bounds=FRACTION),
    *(Metric(f"idi_server_k{k}", f"IDI k={k} at server", "", 1.0, None, "captures",
             f"index of dispersion for intervals over {k} server departures (1: Poisson, >1: bursty)",
             bounds=NON_NEGATIVE)
      for k in IDI_KS),
    Metric("out_of_order", "out of order", "%", 100.0, "lower", "captures",
           "data packets arriving after a packet the server sent later", bounds=FRACTION),
    Metric("ack_ratio", "ACK ratio", "", 1.0, None, "captures",
           "ACK-carrying client-to-server packets (TCP: pure ACKs; QUIC: every 1-RTT packet, whatever its size) "
           "per server-to-client data packet of the response", bounds=NON_NEGATIVE),
    Metric("cwnd_mean", "mean cwnd", "kB", 1e-3, None, "qlog/tcp",
           "congestion window of the sender, time-weighted over the transfer (several TCP connections: each "
           "connection's, averaged weighted by its transfer's duration)", bounds=NON_NEGATIVE),
    Metric("srtt_mean", "smoothed RTT", "ms", 1e3, "lower", "qlog/tcp", "sender's smoothed RTT, time-weighted",
           bounds=NON_NEGATIVE),
    Metric("phase_slow_start", "slow start", "%", 100.0, None, "qlog/tcp", "share of the transfer in slow start",
           bounds=FRACTION),
    Metric("phase_congestion_avoidance", "congestion avoidance", "%", 100.0, None, "qlog/tcp",
           "share of the transfer in congestion avoidance", bounds=FRACTION),
    Metric("phase_recovery", "recovery", "%", 100.0, None, "qlog/tcp", "share of the transfer in loss recovery",
           bounds=FRACTION),
    Metric("cwnd_over_bdp", "cwnd / BDP", "", 1.0, None, "qlog/tcp",
           "mean congestion window (several TCP connections: their sum) over the path's BDP (the download's "
           "throughput times the sender's minimum RTT)",
           bounds=NON_NEGATIVE),
    Metric("cwnd_above_bdp", "cwnd above BDP", "%", 100.0, None, "qlog/tcp",
           "share of the transfer with the congestion window above the path's BDP (data queued in the network)",
           bounds=FRACTION),
    Metric("slow_start_exit", "slow-start exit", "ms", 1e3, None, "qlog",
           "time from the sender's first packet to its first exit from slow start (runs that left it)",
           bounds=NON_NEGATIVE),
    Metric("slow_start_exit_delay", "exit on delay", "%", 100.0, None, "qlog",
           "1 when the sender left slow start on an RTT increase, 0 on a loss (mean: share of runs)",
           bounds=FRACTION),
    Metric("losses_declared", "losses declared", "pkts", 1.0, "lower", "qlog/captures",
           "packets whose data the sender sent again (QUIC: qlog packet_lost, probe timeouts included; TCP: "
           "retransmitted segments, summed over connections)",
           bounds=NON_NEGATIVE),
    Metric("spurious_loss_share", "spurious losses", "%", 100.0, "lower", "qlog/captures",
           "share of the declared losses whose packet had reached the client (QUIC: acknowledged later; "
           "TCP: every byte of the retransmission had been sent before in segments the client capture saw)",
           bounds=FRACTION),
    Metric("ampdu_mean", "MPDUs per A-MPDU", "", 1.0, None, "mac",
           "mean MPDUs per PSDU the radio carrying the download (the AP for a station client) sent to the "
           "client",
           bounds=NON_NEGATIVE),
    Metric("ofdma_users_per_ppdu", "stations per OFDMA PPDU", "", 1.0, None, "mac",
           "mean number of stations a downlink multi-user (OFDMA) PPDU of the radio carrying the download "
           "served, each in its resource unit (802.11ax with ofdma; absent without such PPDUs)",
           bounds=NON_NEGATIVE),
    Metric("ofdma_ppdu_share", "OFDMA PPDUs", "%", 100.0, None, "mac",
           "share of that radio's data PPDUs sent as downlink multi-user (OFDMA) PPDUs", bounds=FRACTION),
    Metric("ofdma_uplink_share", "uplink OFDMA PSDUs", "%", 100.0, None, "mac",
           "share of the client's own data PSDUs (a TCP client's ACKs) sent in its resource unit of an uplink "
           "multi-user PPDU its AP triggered (802.11ax with ofdma_uplink; absent when it sent none)",
           bounds=FRACTION),
    Metric("handovers", "handovers", "", 1.0, None, "mac",
           "times the client station associated with an access point during the run (a station that moves or "
           "roams; ns3: the channel's events, mininet-wifi: its APs' hostapd logs)", bounds=NON_NEGATIVE),
    Metric("handover_outage", "handover outage", "s", 1.0, "lower", "mac",
           "longest time without a frame delivered to the client across a handover: from the last one through "
           "the AP it lost to the first through its next AP (mininet-wifi: the gap in the client's capture "
           "around its re-association)", bounds=NON_NEGATIVE),
    Metric("handover_recovery", "handover recovery", "s", 1.0, "lower", "mac",
           "longest time from a re-association to the end of the first 250 ms sample after it in which the "
           "client received at least half its median rate over the run", bounds=NON_NEGATIVE),
    Metric("mac_delay_median", "MAC delay, median", "ms", 1e3, "lower", "mac",
           "median time a data frame of the node sending the download's last hop (the AP for a station) "
           "spent from entering its radio queue to the receiver's MAC acknowledgement (queueing, channel "
           "access, retries), over its frames to the client", bounds=NON_NEGATIVE),
    Metric("mac_delay_p95", "MAC delay, 95th percentile", "ms", 1e3, "lower", "mac",
           "95th percentile of that time", bounds=NON_NEGATIVE),
    Metric("queue_delay_median", "queue delay, median", "ms", 1e3, "lower", "mac",
           "median time a frame of that node spent in its radio's queue discipline (codel or fq_codel, "
           "in front of the MAC queue) before the MAC took it; only with a discipline", bounds=NON_NEGATIVE),
    Metric("queue_delay_p95", "queue delay, 95th percentile", "ms", 1e3, "lower", "mac",
           "95th percentile of that time", bounds=NON_NEGATIVE),
    Metric("queue_disc_drops", "queue discipline drops", "pkts", 1.0, "lower", "mac",
           "frames that node's queue discipline dropped (CoDel's drops and overflow)", bounds=NON_NEGATIVE),
    *(Metric(f"ampdu_hop{k}", f"MPDUs per A-MPDU, hop {k}", "", 1.0, None, "mac",
             f"mean MPDUs per A-MPDU sent on the download's wireless hop {k}, counted from the server's side "
             "(that hop's sender to its receiver)", bounds=NON_NEGATIVE)
      for k in range(1, MAX_HOP_METRICS + 1)),
    Metric("airtime_share", "airtime", "%", 100.0, None, "mac",
           "share of the download's time (first connection to last byte) the radio carrying it spent "
           "transmitting data PSDUs to the client", bounds=FRACTION),
    Metric("airtime_per_mb", "airtime per MB", "ms", 1e3, "lower", "mac",
           "transmit time of the data PSDUs the radio carrying the download sent to the client, per "
           "megabyte delivered: what aggregation saves", bounds=NON_NEGATIVE),
    Metric("mac_retries", "MAC retries", "", 1.0, "lower", "mac", "retransmitted MPDUs of that radio to the client",
           bounds=NON_NEGATIVE),
    Metric("lag_max", "ns-3 lag max", "ms", 1e3, "lower", "mac", "largest lag of the simulator behind the wall clock",
           bounds=NON_NEGATIVE),
    Metric("lag_p99", "ns-3 lag p99", "ms", 1e3, "lower", "mac",
           "99th percentile of the simulator's lag (upper bound of its power-of-two histogram bucket)",
           bounds=NON_NEGATIVE),
    Metric("lag_behind_share", "ns-3 time behind", "%", 100.0, "lower", "mac",
           "share of the transfer the simulator spent more than 4 ms behind the wall clock (a validity rule)",
           bounds=FRACTION),
    Metric("lag_slow_share", "ns-3 time 1 ms behind", "%", 100.0, "lower", "mac",
           "share of the transfer the simulator spent more than 1 ms behind the wall clock (a validity rule: "
           "sustained small lag)", bounds=FRACTION),
    Metric("tap_rx_delay_p95", "TAP-to-simulator delay p95", "ms", 1e3, "lower", "mac",
           "95th percentile of a frame's wait from its TAP read to the simulator taking it up (a validity rule)",
           bounds=NON_NEGATIVE),
    Metric("tap_tx_delay_p95", "simulator-to-TAP delay p95", "ms", 1e3, "lower", "mac",
           "95th percentile of a frame's wait in the TAP writer's queue until written (a validity rule)",
           bounds=NON_NEGATIVE),
    Metric("tap_drops", "TAP path drops", "", 1.0, "lower", "mac",
           "frames the TAP path dropped outside the model (readers' and writer's queues full; any invalidates)",
           bounds=NON_NEGATIVE),
    Metric("frames_vanished", "frames vanished in the channel", "", 1.0, "lower", "mac",
           "unicast IPv4 frames the ns-3 channel neither delivered nor dropped for a counted reason "
           "(its frame ledger; any invalidates)", bounds=NON_NEGATIVE),
    Metric("cpu_server", "server CPU", "s", 1.0, None, "cpu", "CPU seconds of the server role over the transfer",
           bounds=NON_NEGATIVE),
    Metric("cpu_server_peak", "server CPU peak", "cores", 1.0, None, "cpu",
           "the server's busiest 100 ms, in cores", bounds=NON_NEGATIVE),
    Metric("cpu_server_bound", "server CPU-bound", "%", 100.0, "lower", "cpu",
           "share of the transfer the server used >= 90 % of a core", bounds=FRACTION),
    Metric("cpu_client", "client CPU", "s", 1.0, None, "cpu", "CPU seconds of the client role over the transfer",
           bounds=NON_NEGATIVE),
    Metric("cpu_client_peak", "client CPU peak", "cores", 1.0, None, "cpu",
           "the client's busiest 100 ms, in cores", bounds=NON_NEGATIVE),
    Metric("cpu_client_bound", "client CPU-bound", "%", 100.0, "lower", "cpu",
           "share of the transfer the client used >= 90 % of a core", bounds=FRACTION),
    Metric("cpu_competitor", "competitor CPU", "s", 1.0, None, "cpu",
           "CPU seconds of the competing download's client and server over the transfer", bounds=NON_NEGATIVE),
    Metric("cpu_competitor_peak", "competitor CPU peak", "cores", 1.0, None, "cpu",
           "the competing download's busiest 100 ms, in cores", bounds=NON_NEGATIVE),
    Metric("cpu_competitor_bound", "competitor CPU-bound", "%", 100.0, "lower", "cpu",
           "share of the transfer the competing download's client or server wanted a whole core", bounds=FRACTION),
    Metric("cpu_channel", "channel CPU", "s", 1.0, None, "cpu", "CPU seconds of the ns-3 channel over the transfer",
           bounds=NON_NEGATIVE),
    Metric("cpu_channel_peak", "channel CPU peak", "cores", 1.0, None, "cpu",
           "the ns-3 channel's busiest 100 ms, in cores", bounds=NON_NEGATIVE),
    Metric("cpu_channel_bound", "channel CPU-bound", "%", 100.0, "lower", "cpu",
           "share of the transfer the ns-3 channel used >= 90 % of a core", bounds=FRACTION),
    Metric("cpu_machine_busy", "machine busy", "%", 100.0, None, "cpu",
           "share of all cores' time the machine was busy during the transfer", bounds=FRACTION),
    Metric("cpu_machine_steal", "CPU steal", "%", 100.0, "lower", "cpu",
           "share of all cores' time the hypervisor took (steal) during the transfer", bounds=FRACTION),
    Metric("cpu_stress", "stress load CPU", "s", 1.0, None, "cpu",
           "CPU seconds the stress load processes used over the transfer (E2 CPU stress)", bounds=NON_NEGATIVE),
    Metric("stress_cpu_quota", "client CPU quota", "cores", 1.0, None, "stress",
           "the cgroup CPU quota the client ran under (cores' worth of CPU time per period)", bounds=NON_NEGATIVE),
    Metric("stress_load", "stress load", "procs", 1.0, None, "stress",
           "CPU-bound processes running in the client's node during the run", bounds=NON_NEGATIVE),
    Metric("client_throttled", "client throttled", "%", 100.0, None, "stress",
           "share of the quota's 100 ms periods in which the kernel held the client back", bounds=FRACTION),
    Metric("client_device_busy", "client device busy", "%", 100.0, None, "stress",
           "share of the client's connection time its emulated device (stress.client_device) spent on datagrams; "
           "near 100 % the device, not the network, set the pace", bounds=FRACTION),
    Metric("competitor_download_time", "competitor download time", "s", 1.0, None, "record",
           "download time of the competing transport's download (shared medium; several competitors: the "
           "longest)", bounds=NON_NEGATIVE),
    Metric("competitor_goodput", "competitor goodput", "Mbit/s", 1e-6, None, "record",
           "goodput of the competing transport's download (shared medium; several competitors: together)",
           bounds=NON_NEGATIVE),
    Metric("competitor_ipt_server_short_share", "competitor short gaps at server", "%", 100.0, None, "captures",
           "share of inter-packet times below 100 us between the (first) competing download's data packets at "
           "the server",
           bounds=FRACTION),
    Metric("goodput_share", "goodput share", "%", 100.0, None, "record",
           "the measured download's share of the downloads' summed goodput (with one competitor, 50 %: an "
           "equal split)",
           bounds=FRACTION),
    Metric("jain_index", "Jain's fairness", "", 1.0, "higher", "record",
           "Jain's index of the downloads' goodputs: every download of a competitor run, or every client of a "
           "many-client run (1: equal shares, 1/n: one takes all)", bounds=FRACTION),
    Metric("clients", "clients", "", 1.0, None, "record",
           "downloads at the same time in a many-client run (experiment field clients)", bounds=NON_NEGATIVE),
    Metric("aggregate_goodput", "aggregate goodput", "Mbit/s", 1e-6, "higher", "record",
           "every client's bytes over the time from the first client's request to the last client's last byte "
           "(a many-client run)",
           bounds=NON_NEGATIVE),
    Metric("client_goodput_min", "smallest client goodput", "Mbit/s", 1e-6, "higher", "record",
           "the goodput of the slowest client of a many-client run", bounds=NON_NEGATIVE),
    Metric("client_goodput_median", "median client goodput", "Mbit/s", 1e-6, "higher", "record",
           "the median of the clients' goodputs in a many-client run", bounds=NON_NEGATIVE),
    Metric("ampdu_client_min", "MPDUs per A-MPDU, smallest client", "", 1.0, None, "mac",
           "the smallest of the clients' mean A-MPDU sizes (the AP's frames to each client) in a many-client run",
           bounds=NON_NEGATIVE),
    Metric("ampdu_client_median", "MPDUs per A-MPDU, median client", "", 1.0, None, "mac",
           "the median of the clients' mean A-MPDU sizes in a many-client run", bounds=NON_NEGATIVE),
    Metric("ampdu_client_max", "MPDUs per A-MPDU, largest client", "", 1.0, None, "mac",
           "the largest of the clients' mean A-MPDU sizes in a many-client run", bounds=NON_NEGATIVE),
    Metric("background_throughput", "background", "Mbit/s", 1e-6, None, "background",
           "background traffic received during the run (iperf3)", bounds=NON_NEGATIVE),
]
# fmt: on

METRICS: dict[str, Metric] = {metric.name: metric for metric in _METRICS}

#: the metrics a report shows first, in this order, when a run has them
HEADLINE = (
    "download_time",
    "total_time",
    "connect_time",
    "goodput",
    "loss",
    "ack_ratio",
    "ipt_server_short_share",
    "cwnd_mean",
    "ampdu_mean",
    "competitor_goodput",
    "jain_index",
    "cpu_server_bound",
    "cpu_client_bound",
    "cpu_machine_busy",
)


class UncataloguedMetric(UserWarning):
    """A metric computed under a name METRICS does not list: it is left out of the results
    (the test suite turns this warning into an error, pytest.ini)."""


def markdown_table() -> str:
    """Every metric as a Markdown table, the one docs/metrics.md carries (section 8):
    ``python -m quicbed.analysis.catalogue`` prints it."""
    lines = ["| metric | unit | better | from | what it is |", "| --- | --- | --- | --- | --- |"]
    for entry in _METRICS:
        description = entry.description.replace("|", "/")
        lines.append(
            f"| `{entry.name}` | {entry.unit or '-'} | {entry.better or '-'} | {entry.source} | {description} |"
        )
    return "\n".join(lines)


def metric(name: str) -> Metric:
    """The catalogue entry of ``name`` (a descriptive stand-in for names it does not list)."""
    return METRICS.get(name) or Metric(name, name.replace("_", " "), "", 1.0, None, "other", "")


if __name__ == "__main__":
    print(markdown_table())
