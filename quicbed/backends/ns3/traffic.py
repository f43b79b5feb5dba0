"""iperf3 between two nodes of a running network (used by bench/wifi.py and the ns3 tests).

    result = iperf3(network, client="sta1", server="server", seconds=5, reverse=True)
    result.goodput_bps

``reverse`` makes the server send (a download, as in the studies). UDP: ``udp_rate`` in
bit/s; ``burst`` sends that many datagrams back to back per burst (iperf3 '-b RATE/BURST');
``pacing_timer_us`` sets iperf3's pacing tick (smaller = smoother).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from quicbed.backends.base import Network
from quicbed.errors import BackendError

UDP_PAYLOAD = 1472  # a 1500-byte IP packet


@dataclass
class Iperf3Result:
    goodput_bps: float
    sent_bps: float
    lost_percent: float = 0.0
    retransmits: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def iperf3(network: Network, client: str, server: str, seconds: float = 5.0, reverse: bool = True,
           udp_rate: float | None = None, burst: int | None = None, length: int | None = None,
           pacing_timer_us: int | None = None, port: int = 5201, congestion: str | None = None) -> Iperf3Result:
    server_node, client_node = network.node(server), network.node(client)
    listener = server_node.start(["iperf3", "-s", "-1", "-p", str(port)], name=f"iperf3-s{port}")
    argv = ["iperf3", "-c", server_node.address, "-p", str(port), "-t", f"{seconds:g}", "-J"]
    if reverse:
        argv.append("-R")
    if udp_rate is not None:
        argv += ["-u", "-b", f"{int(udp_rate)}" + (f"/{burst}" if burst else ""), "-l", str(length or UDP_PAYLOAD)]
    if pacing_timer_us:
        argv += ["--pacing-timer", str(pacing_timer_us)]
    if congestion:
        argv += ["-C", congestion]
    try:
        deadline = time.monotonic() + 15.0  # the listener needs a moment to bind (longer on a busy host)
        while time.monotonic() < deadline and listener.running:
            listening = server_node.run(["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip()
            if listening:
                break
            time.sleep(0.05)
        result = client_node.run(argv, timeout=seconds + 30, check=False)
        try:
            report = json.loads(result.stdout)
        except ValueError:
            raise BackendError(f"iperf3 on {client} gave no report: {result.stderr.strip()[-500:]}") from None
        if "error" in report and report.get("end", {}) == {}:
            raise BackendError(f"iperf3 on {client}: {report['error']}")
        end = report["end"]
        if udp_rate is not None:
            received = end.get("sum_received") or end["sum"]
            sent = end.get("sum_sent") or end["sum"]
            goodput = received["bits_per_second"]
            if "sum_received" not in end:  # older iperf3: sum is the sender's view plus losses
                goodput *= 1 - received.get("lost_percent", 0) / 100
            return Iperf3Result(goodput, sent["bits_per_second"], received.get("lost_percent", 0.0), None, end)
        return Iperf3Result(end["sum_received"]["bits_per_second"], end["sum_sent"]["bits_per_second"], 0.0,
                            end["sum_sent"].get("retransmits"), end)
    finally:
        listener.stop(grace=1.0)
