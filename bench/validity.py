"""What a late ns-3 channel does to the figures, and which validity rule catches it (prints figures).

    sudo python bench/validity.py                     # ~8 minutes
    sudo python bench/validity.py --seconds 6 --repetitions 1 --json out.json

A TCP download (iperf3, reverse) through a wired ns-3 dumbbell (10 Mbit/s, 10 ms, the link where
single lag spikes used to invalidate most runs), then an idle-path ping (100 probes, 10 ms
apart), while known faults hit the channel:
  * stalls: the channel process is stopped (SIGSTOP) for L ms every P s, then continued; the
    simulator then runs behind the wall clock and catches up;
  * sustained small lag: stalls of 1-3 ms every few ms, so the simulator hovers a few ms
    behind and never passes 4 ms (as a channel short of CPU does);
  * CPU hogs: busy loops at normal priority on every core (the channel runs under SCHED_FIFO,
    the endpoints do not).
With --placement instead: where the TAP reader threads run. One 802.11n station (MCS 7) of
topologies/wifi_ap.py, the channel pinned to one core as the runner's isolate_channel does (its
simulator thread and its TAP threads share that core), a saturated TCP download and a UDP
download at 20 Mbit/s, with the readers one SCHED_FIFO priority above the simulator and at
the same priority, downlink and uplink: goodput, MPDUs per A-MPDU of the sending radio (a
reader that waits for the simulator to yield batches frames, and the radio aggregates the
batch), the TAP delays and the lag.

For each fault: goodput and its error against the fault-free runs, the idle RTT and what the
fault added to it, the channel's lag statistics (max, share of time more than 4 ms and more
than 1 ms behind), the TAP path's delays, and which rule flags the run: the old one (largest
lag > 10 ms) and the two quicbed uses (quicbed/backends/ns3/stats.py). Fault-free runs give
the noise and the false-positive rate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.apps import iperf, ping  # noqa: E402
from quicbed.backends.ns3 import build, stats  # noqa: E402
from quicbed.backends.ns3.network import Ns3Network  # noqa: E402
from quicbed.host.affinity import set_process_affinity  # noqa: E402
from quicbed.host.stalls import Stalls  # noqa: E402
from quicbed.spec.loader import load_topology  # noqa: E402

OLD_MAX_LAG_MS = 10.0


@dataclass(frozen=True)
class Fault:
    name: str
    stall_ms: float = 0.0
    period_s: float = 0.0
    hogs: int = 0

    def describe(self) -> str:
        if self.stall_ms and self.period_s < 0.1:
            return f"stall {self.stall_ms:g} ms every {self.period_s * 1e3:g} ms"
        if self.stall_ms:
            return f"stall {self.stall_ms:g} ms every {self.period_s:g} s"
        if self.hogs:
            return f"{self.hogs} CPU hogs"
        return "none"


FAULTS = (
    Fault("none"),
    Fault("stall-2ms/1s", 2, 1.0),
    Fault("stall-5ms/1s", 5, 1.0),
    Fault("stall-10ms/1s", 10, 1.0),
    Fault("stall-20ms/1s", 20, 1.0),
    Fault("stall-50ms/2s", 50, 2.0),
    Fault("stall-100ms/2s", 100, 2.0),
    Fault("stall-20ms/0.2s", 20, 0.2),
    Fault("stall-1ms/8ms", 1, 0.008),
    Fault("stall-1ms/4ms", 1, 0.004),
    Fault("stall-2ms/4ms", 2, 0.004),
    Fault("stall-3ms/6ms", 3, 0.006),
    Fault("hogs", hogs=os.cpu_count() or 2),
)


def measure(fault: Fault, seconds: float, rate: str) -> dict:
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"rate": rate, "delay": "10ms"})
    with Ns3Network(topo) as network:
        assert network.channel is not None
        network.reset_stats()
        stalls = Stalls(network.channel.pid, fault.stall_ms / 1000, fault.period_s) if fault.stall_ms else None
        hogs: list[subprocess.Popen] = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(fault.hogs)
        ]
        try:
            with stalls or contextlib.nullcontext():
                result = iperf.between(network, "client", "server", duration=seconds)
                idle = ping.ping(network.node("client"), network.node("server").address, count=100, interval=0.01)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        summary = network.mac_stats()
    lag = summary["lag"]
    tap = summary["tap"]
    return {
        "goodput": result.throughput,
        "rtt_idle_ms": (idle.avg or 0.0) * 1e3,
        "lag_max_ms": lag.get("max_ms", 0.0),
        "lag_p99_ms": lag.get("p99_ms", 0.0),
        "behind_share": summary["behind_share"],
        "slow_share": summary["slow_share"],
        "old_rule_flags": lag.get("max_ms", 0.0) > OLD_MAX_LAG_MS,
        "behind_rule_flags": summary["behind_share"] > stats.MAX_BEHIND_SHARE,
        "slow_rule_flags": summary["slow_share"] > stats.MAX_SLOW_SHARE,
        "rule_flags": not summary["valid"],
        "stalls": stalls.record.stops if stalls else 0,
        "stall_longest_ms": stalls.record.longest_s * 1e3 if stalls else 0.0,
        "tap_rx_p95_ms": (tap["rx_delay"]["p95_s"] or 0.0) * 1e3,
        "tap_tx_p95_ms": (tap["tx_delay"]["p95_s"] or 0.0) * 1e3,
        "tap_drops": tap["rx_drops"] + tap["tx_drops"],
        "channel_cpu": summary["cpu_share"],
    }


def measure_placement(readers_above: bool, seconds: float, flow: dict, cell: dict) -> dict:
    """One WiFi download with the channel on one core (as isolate_channel places it)."""
    topo = load_topology(
        str(ROOT / "topologies" / "wifi_ap.py"), {"stations": 1, "mcs": 7, "wired_delay": "3ms", **cell}
    )
    cores = sorted(os.sched_getaffinity(0))
    with Ns3Network(topo, tap_readers_above_simulator=readers_above) as network:
        assert network.channel is not None
        if len(cores) > 1:
            set_process_affinity(network.channel.pid, {cores[-1]})
            network.endpoint_cores = set(cores[:-1])
        network.reset_stats()
        result = iperf.between(network, "sta1", "server", duration=seconds, **flow)
        summary = network.mac_stats()
    sender = summary["radios"]["ap1:wifi" if flow.get("reverse", True) else "sta1:wlan0"]
    tap = summary["tap"]
    return {
        "goodput": result.throughput,
        "mpdus_per_ampdu": sender["mpdus_per_ampdu"]["mean"],
        "tap_rx_p95_ms": (tap["rx_delay"]["p95_s"] or 0.0) * 1e3,
        "tap_rx_max_ms": tap["rx_delay"]["max_s"] * 1e3,
        "tap_tx_p95_ms": (tap["tx_delay"]["p95_s"] or 0.0) * 1e3,
        "lag_max_ms": summary["lag"].get("max_ms", 0.0),
        "slow_share": summary["slow_share"],
        "channel_cpu": summary["cpu_share"],
        "valid": summary["valid"],
    }


def placement(args: argparse.Namespace) -> dict:
    cell = dict(item.split("=", 1) for item in args.cell.split(",")) if args.cell else {}
    print(
        f"## TAP readers' placement: one station of topologies/wifi_ap.py (MCS 7{', ' if cell else ''}"
        f"{args.cell or ''}), channel pinned to one core, {args.seconds:g} s per run"
    )
    print("flow            readers      goodput  MPDUs/A-MPDU  TAP rx p95/max ms  tx p95  lag max  >1 ms   ns-3 CPU")
    figures: dict = {}
    for name, flow in (
        ("TCP down", {}),
        ("TCP up", {"reverse": False}),
        ("UDP 20 Mbit/s", {"rate": 20e6}),
        ("UDP 20 up", {"rate": 20e6, "reverse": False}),
    ):
        for above in (True, False):
            for _ in range(args.repetitions):
                run = measure_placement(above, args.seconds, flow, cell)
                figures.setdefault(f"{name}/{'above' if above else 'same'}", []).append(run)
                print(
                    f"{name:<15} {'above' if above else 'same':<11}{run['goodput'] / 1e6:7.2f}  {run['mpdus_per_ampdu']:10.1f}"
                    f"    {run['tap_rx_p95_ms']:6.2f}/{run['tap_rx_max_ms']:6.2f}  {run['tap_tx_p95_ms']:6.2f}"
                    f"  {run['lag_max_ms']:6.1f}  {run['slow_share']:6.2%}  {run['channel_cpu']:4.0%}",
                    flush=True,
                )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each download (default 8)")
    parser.add_argument("--repetitions", type=int, default=2, help="runs per fault (default 2; fault-free: 2x)")
    parser.add_argument("--rate", default="10mbit", help="the dumbbell's rate (default 10mbit)")
    parser.add_argument("--faults", help="comma-separated fault names (default: all)")
    parser.add_argument("--json", type=Path, help="also write all figures here")
    parser.add_argument("--placement", action="store_true", help="measure where the TAP readers run instead")
    parser.add_argument(
        "--cell", help="with --placement: topologies/wifi_ap.py parameters, e.g. standard=802.11ac,width=80,mcs=9"
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/validity.py needs root (namespaces, TAP devices): sudo python bench/validity.py", file=sys.stderr)
        return 2
    reason = build.missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    build.ensure_built(quiet=False)
    if args.placement:
        figures = placement(args)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        return 0
    chosen = [f for f in FAULTS if not args.faults or f.name in args.faults.split(",")]
    started = time.monotonic()
    print(
        f"## TCP download, ns-3 wired dumbbell {args.rate} 10 ms, {args.seconds:g} s per run, then an idle ping; "
        f"rules in use: time more than {stats.BEHIND_MS:g} ms behind <= {stats.MAX_BEHIND_SHARE:.0%}, more than "
        f"{stats.SLOW_MS:g} ms behind <= {stats.MAX_SLOW_SHARE:.0%}"
    )
    print(
        "fault                   stop max  goodput  error   idle RTT  added  lag max  >4 ms   >1 ms   old   4 ms  "
        "1 ms  TAP rx/tx p95  ns-3 CPU"
    )
    figures: dict = {"settings": vars(args) | {"json": str(args.json)}, "faults": {}}
    baseline: list[float] = []
    baseline_rtt: list[float] = []
    flag = {True: "FLAG", False: "ok"}
    for fault in chosen:
        runs = [
            measure(fault, args.seconds, args.rate)
            for _ in range(args.repetitions * (2 if fault.name == "none" else 1))
        ]
        if fault.name == "none":
            baseline = [r["goodput"] for r in runs]
            baseline_rtt = [r["rtt_idle_ms"] for r in runs]
        reference = statistics.mean(baseline) if baseline else None
        reference_rtt = statistics.mean(baseline_rtt) if baseline_rtt else None
        for run in runs:
            run["error"] = (run["goodput"] / reference - 1) if reference else None
            run["rtt_added_ms"] = run["rtt_idle_ms"] - reference_rtt if reference_rtt else None
            error = f"{run['error']:+6.1%}" if run["error"] is not None else "    - "
            added = f"{run['rtt_added_ms']:+5.2f}" if run["rtt_added_ms"] is not None else "    -"
            longest = f"{run['stall_longest_ms']:6.1f}  " if run["stalls"] else "     -  "
            print(
                f"{fault.describe():<23} {longest}{run['goodput'] / 1e6:7.2f}  {error}  {run['rtt_idle_ms']:6.2f}"
                f"  {added}"
                f"  {run['lag_max_ms']:6.1f}  {run['behind_share']:6.2%}  {run['slow_share']:6.2%}  "
                f"{flag[run['old_rule_flags']]:<4}  {flag[run['behind_rule_flags']]:<4}  "
                f"{flag[run['slow_rule_flags']]:<4}  {run['tap_rx_p95_ms']:5.2f}/{run['tap_tx_p95_ms']:5.2f}"
                f"{'  drops ' + str(run['tap_drops']) if run['tap_drops'] else ''}  {run['channel_cpu']:4.0%}",
                flush=True,
            )
        figures["faults"][fault.name] = {"fault": fault.describe(), "runs": runs}
    if baseline:
        noise = statistics.pstdev(baseline) / statistics.mean(baseline)
        clean = figures["faults"].get("none", {}).get("runs", [])
        print(
            f"\nfault-free: goodput spread {noise:.2%} (relative s.d.); flagged by the old rule "
            f"{sum(r['old_rule_flags'] for r in clean)}/{len(clean)}, by the rule in use "
            f"{sum(r['rule_flags'] for r in clean)}/{len(clean)}"
        )
    moved = [
        r for f in figures["faults"].values() for r in f["runs"] if r["error"] is not None and abs(r["error"]) > 0.01
    ]
    print(
        f"runs whose goodput moved by more than 1 %: {len(moved)}; caught by the rules in use: "
        f"{sum(r['rule_flags'] for r in moved)}; by the old rule: {sum(r['old_rule_flags'] for r in moved)}"
    )
    delayed = [
        r
        for f in figures["faults"].values()
        for r in f["runs"]
        if r["rtt_added_ms"] is not None and r["rtt_added_ms"] > 0.5
    ]
    print(
        f"runs whose idle RTT grew by more than 0.5 ms: {len(delayed)}; caught by the rules in use: "
        f"{sum(r['rule_flags'] for r in delayed)}; by the 4 ms rule alone: "
        f"{sum(r['behind_rule_flags'] for r in delayed)}"
    )
    print(f"bench took {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
