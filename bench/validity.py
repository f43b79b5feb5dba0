"""What a late ns-3 channel does to the figures, and which validity rule catches it (prints figures).

    sudo python bench/validity.py                     # ~6 minutes
    sudo python bench/validity.py --seconds 6 --repetitions 1 --json out.json

A TCP download (iperf3, reverse) through a wired ns-3 dumbbell (10 Mbit/s, 10 ms, the link where
single lag spikes used to invalidate most runs) while known faults hit the channel:
  * stalls: the channel process is stopped (SIGSTOP) for L ms every P s, then continued; the
    simulator then runs behind the wall clock and catches up;
  * CPU hogs: busy loops at normal priority on every core (the channel runs under SCHED_FIFO,
    the endpoints do not).
For each fault: goodput and its error against the fault-free runs, the channel's lag statistics
(max, p99, share of time more than 4 ms behind) and which rule flags the run: the old one
(largest lag > 10 ms) and the one quicbed uses (time behind; quicbed/backends/ns3/stats.py).
Fault-free runs give the noise and the false-positive rate.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.apps import iperf  # noqa: E402
from quicbed.backends.ns3 import build, stats  # noqa: E402
from quicbed.backends.ns3.network import Ns3Network  # noqa: E402
from quicbed.spec.loader import load_topology  # noqa: E402

OLD_MAX_LAG_MS = 10.0


@dataclass(frozen=True)
class Fault:
    name: str
    stall_ms: float = 0.0
    period_s: float = 0.0
    hogs: int = 0

    def describe(self) -> str:
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
    Fault("hogs", hogs=os.cpu_count() or 2),
)


class Staller(threading.Thread):
    """Stops and continues a process on a fixed schedule until told to end."""

    def __init__(self, pid: int, stall_s: float, period_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.stall_s, self.period_s = pid, stall_s, period_s
        self.done = threading.Event()
        self.stalls = 0

    def run(self) -> None:
        while not self.done.wait(self.period_s - self.stall_s):
            os.kill(self.pid, signal.SIGSTOP)
            try:
                time.sleep(self.stall_s)
            finally:
                os.kill(self.pid, signal.SIGCONT)
            self.stalls += 1


def measure(fault: Fault, seconds: float, rate: str) -> dict:
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"rate": rate, "delay": "10ms"})
    hogs: list[subprocess.Popen] = []
    with Ns3Network(topo) as network:
        assert network.channel is not None
        network.reset_stats()
        stall = Staller(network.channel.pid, fault.stall_ms / 1000, fault.period_s) if fault.stall_ms else None
        try:
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(fault.hogs)]
            if stall:
                stall.start()
            result = iperf.between(network, "client", "server", duration=seconds)
        finally:
            if stall:
                stall.done.set()
                stall.join()
            for hog in hogs:
                hog.kill()
                hog.wait()
        summary = network.mac_stats()
    lag = summary["lag"]
    behind = stats.time_behind_share(lag, summary["interval"].get("sim_s") or seconds)
    return {"goodput": result.throughput, "lag_max_ms": lag.get("max_ms", 0.0), "lag_p99_ms": lag.get("p99_ms", 0.0),
            "behind_share": behind, "old_rule_flags": lag.get("max_ms", 0.0) > OLD_MAX_LAG_MS,
            "rule_flags": not summary["valid"], "stalls": stall.stalls if stall else 0,
            "channel_cpu": summary["cpu_share"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each download (default 8)")
    parser.add_argument("--repetitions", type=int, default=2, help="runs per fault (default 2; fault-free: 2x)")
    parser.add_argument("--rate", default="10mbit", help="the dumbbell's rate (default 10mbit)")
    parser.add_argument("--faults", help="comma-separated fault names (default: all)")
    parser.add_argument("--json", type=Path, help="also write all figures here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/validity.py needs root (namespaces, TAP devices): sudo python bench/validity.py",
              file=sys.stderr)
        return 2
    reason = build.missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    build.ensure_built(quiet=False)
    chosen = [f for f in FAULTS if not args.faults or f.name in args.faults.split(",")]
    started = time.monotonic()
    print(f"## TCP download, ns-3 wired dumbbell {args.rate} 10 ms, {args.seconds:g} s per run; rule in use: "
          f"time more than {stats.BEHIND_MS:g} ms behind <= {stats.MAX_BEHIND_SHARE:.1%} of the run")
    print("fault                  goodput Mbit/s   error     lag max  p99 ms  behind   old rule  rule   ns-3 CPU")
    figures: dict = {"settings": vars(args) | {"json": str(args.json)}, "faults": {}}
    baseline: list[float] = []
    for fault in chosen:
        runs = [measure(fault, args.seconds, args.rate)
                for _ in range(args.repetitions * (2 if fault.name == "none" else 1))]
        if fault.name == "none":
            baseline = [r["goodput"] for r in runs]
        reference = statistics.mean(baseline) if baseline else None
        for run in runs:
            run["error"] = (run["goodput"] / reference - 1) if reference else None
            error = f"{run['error']:+7.1%}" if run["error"] is not None else "     - "
            print(f"{fault.describe():<23}{run['goodput'] / 1e6:8.2f}        {error}   {run['lag_max_ms']:6.1f}"
                  f"  {run['lag_p99_ms']:5.1f}   {run['behind_share']:6.2%}   {'FLAG' if run['old_rule_flags'] else 'ok':<8}"
                  f"  {'FLAG' if run['rule_flags'] else 'ok':<5}  {run['channel_cpu']:4.0%}", flush=True)
        figures["faults"][fault.name] = {"fault": fault.describe(), "runs": runs}
    if baseline:
        noise = statistics.pstdev(baseline) / statistics.mean(baseline)
        clean = figures["faults"].get("none", {}).get("runs", [])
        print(f"\nfault-free: goodput spread {noise:.2%} (relative s.d.); flagged by the old rule "
              f"{sum(r['old_rule_flags'] for r in clean)}/{len(clean)}, by the rule in use "
              f"{sum(r['rule_flags'] for r in clean)}/{len(clean)}")
    moved = [r for f in figures["faults"].values() for r in f["runs"]
             if r["error"] is not None and abs(r["error"]) > 0.01]
    print(f"runs whose goodput moved by more than 1 %: {len(moved)}; caught by the rule in use: "
          f"{sum(r['rule_flags'] for r in moved)}; by the old rule: {sum(r['old_rule_flags'] for r in moved)}")
    print(f"bench took {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
