#!/usr/bin/env python3
"""Link-emulation accuracy: configured vs measured rate, delay, jitter, loss and loss bursts.

    sudo .venv/bin/python bench/links.py            # full sample sizes
    sudo .venv/bin/python bench/links.py --quick    # small samples (a few minutes)

Rate limits are measured on this host's kernel. Cases that need netem run where netem is:
here if this kernel has it, otherwise in the microVM (one boot for all of them), and the
table says where each row was measured. Loss rows show the 99 % interval of the lost count
for the sample size (binomial for Bernoulli, the chain's variance for Gilbert-Elliott).
Delivery traces are replayed by the ns3 backend on this host: a saturated probe's packets
must leave at the trace's opportunities, each delivery within 1 ms of its opportunity.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.analysis.linkstats import (  # noqa: E402
    Z99,
    expected_iqr,
    loss_count_interval,
    mean_burst_interval,
    trace_timing,
)
from quicbed.calibration import LinkCalibrator, ProbePlan  # noqa: E402
from quicbed.traces.format import BYTES_PER_OPPORTUNITY, write_trace  # noqa: E402

RATE_CASES = ["2mbit", "10mbit", "50mbit", "200mbit"]
VM_RATE_CASES = ["2mbit", "8mbit"]
DELAY_CASES = [("10ms", None, None), ("50ms", None, None), ("20ms", "4ms", "uniform"), ("20ms", "4ms", "normal")]
LOSS_CASES = [
    {"loss": 1},
    {"loss": 5},
    {"loss": 20},
    {"loss": {"ge_mean": 2}},
    {"loss": {"ge_mean": 10}},
    {"loss": {"ge_mean": 25}},
    {"loss": {"gemodel": {"p": 2, "r": 25, "loss_bad": 90, "loss_good": 0.5}}},
]


def where() -> str:
    from quicbed.host.vm import inside_vm

    return "microVM" if inside_vm() else "host"


def rate_rows(calibrator: LinkCalibrator, rates: list[str]) -> list[dict]:
    rows = []
    for rate in rates:
        shape, measured = calibrator.rate({"rate": rate, "queue_limit": 200})
        rows.append(
            {
                "case": f"rate {rate}",
                "where": where(),
                "configured": shape.rate / 1e6,
                "measured": measured / 1e6,
                "unit": "Mbit/s",
                "ratio": measured / shape.rate,
            }
        )
    return rows


def iqr_tolerance(samples: int) -> float:
    """Relative half-width of the 99 % interval of a sample IQR: its standard error is at
    most 1.17 / sqrt(n) of the IQR (normal: 1.166, uniform: 1.0, asymptotically)."""
    return Z99 * 1.17 / max(1, samples) ** 0.5


def netem_rows(calibrator: LinkCalibrator, quick: bool) -> list[dict]:
    rows = []
    scale = 0.3 if quick else 1.0
    for delay, jitter, distribution in DELAY_CASES:
        shape = {"delay": delay, **({"jitter": jitter, "jitter_distribution": distribution} if jitter else {})}
        configured, stats = calibrator.probe(shape, ProbePlan(count=int(2000 * scale), rate=200))
        rows.append(
            {
                "case": f"delay {delay}",
                "where": where(),
                "configured": configured.delay * 1e3,
                "measured": stats.owd_median * 1e3,
                "unit": "ms (median OWD)",
                "ratio": stats.owd_median / configured.delay,
                "note": f"min {stats.owd_min * 1e3:.2f}, p99 {stats.owd_p99 * 1e3:.2f} ms",
            }
        )
        if jitter:
            expected = expected_iqr(configured.jitter, distribution)
            rows.append(
                {
                    "case": f"jitter {jitter} {distribution}",
                    "where": where(),
                    "configured": expected * 1e3,
                    "measured": stats.owd_iqr * 1e3,
                    "unit": "ms (OWD IQR)",
                    "ratio": stats.owd_iqr / expected,
                    "tolerance": iqr_tolerance(stats.received),
                }
            )
    for shape in LOSS_CASES:
        packets = int(20000 * scale)
        configured, stats = calibrator.probe(shape, ProbePlan(count=packets, rate=2000))
        model = configured.loss
        low, high = loss_count_interval(model, packets)
        label = json.dumps(shape["loss"]).replace('"', "")
        rows.append(
            {
                "case": f"loss {label}",
                "where": where(),
                "configured": model.mean_loss * 100,
                "measured": stats.loss * 100,
                "unit": "% lost",
                "ratio": stats.loss / model.mean_loss,
                "note": f"99% interval {low / packets * 100:.2f}-{high / packets * 100:.2f} %, "
                f"{'inside' if low <= stats.lost <= high else 'OUTSIDE'}",
            }
        )
        burst_low, burst_high = mean_burst_interval(model, packets)
        rows.append(
            {
                "case": "  mean loss burst",
                "where": where(),
                "configured": model.mean_burst_length,
                "measured": stats.mean_burst,
                "unit": "packets",
                "ratio": stats.mean_burst / model.mean_burst_length,
                "interval": [burst_low, burst_high],
                "note": f"99% interval {burst_low:.3f}-{burst_high:.3f} (the model's sampling), "
                f"{'inside' if burst_low <= stats.mean_burst <= burst_high else 'OUTSIDE'}, "
                f"{stats.loss_runs} runs",
            }
        )
    return rows


#: every delivery of a trace replay within this of its opportunity
TRACE_TOLERANCE_MS = 1.0
#: the probe's deliveries in its first this many ms are left out: the queue is still filling
TRACE_SETTLE_MS = 200


def bench_trace(seconds: int, seed: int = 7) -> list[int]:
    """A trace with structure to match against: 0-3 opportunities per ms (mean ~14 Mbit/s, peaks
    of 36), and a 150 ms outage each second."""
    import random

    draw = random.Random(seed)
    times = []
    for ms in range(1, seconds * 1000 + 1):
        if ms % 1000 >= 850:
            continue
        times += [ms] * draw.choice((0, 0, 1, 1, 2, 3))
    return times + ([seconds * 1000] if times[-1] != seconds * 1000 else [])


def trace_rows(quick: bool) -> list[dict]:
    """A saturated probe (24 Mbit/s of full-size datagrams into a 2000-packet queue) over a
    traced link on ns3: each delivery against the opportunity that let it out."""
    from quicbed.backends.ns3.build import missing

    if missing():
        print(f"trace replay not measured: {missing()}", file=sys.stderr)
        return []
    seconds = 2 if quick else 5
    times = bench_trace(seconds)
    with LinkCalibrator(backend="ns3") as calibrator:
        trace = calibrator.work_dir / "bench.trace"
        write_trace(trace, times)
        payload = BYTES_PER_OPPORTUNITY - 28  # IPv4 + UDP headers: one datagram per opportunity
        calibrator.probe(
            {"trace": str(trace), "queue_limit": 2000, "delay": "10ms"},
            ProbePlan(count=2000 * seconds, rate=2000, size=payload),
        )
        log = calibrator.last_log()
        lag = calibrator.network.mac_stats().get("lag", {})  # type: ignore[attr-defined]
    first = log.received_ns[0]
    received = [ns for ns in log.received_ns if ns - first >= TRACE_SETTLE_MS * 1e6]
    timing = trace_timing(times, received)
    within = sum(abs(e) <= TRACE_TOLERANCE_MS for e in timing.errors_ms) / timing.delivered
    span_s = (received[-1] - received[0]) / 1e9
    offered = timing.delivered * BYTES_PER_OPPORTUNITY * 8 / span_s
    return [
        {
            "case": "trace replay: |delivery - opportunity|",
            "where": "host (ns3)",
            "configured": TRACE_TOLERANCE_MS,
            "measured": timing.abs_percentile(0.99),
            "unit": "ms (p99; configured: the bound)",
            "ratio": timing.abs_percentile(0.99) / TRACE_TOLERANCE_MS,
            "note": f"{timing.delivered} deliveries, median {timing.abs_percentile(0.5):.3f}, max "
            f"{max(abs(e) for e in timing.errors_ms):.3f} ms, {within:.1%} within {TRACE_TOLERANCE_MS:g} ms; "
            f"ns-3 behind real time by up to {lag.get('max_ms', float('nan')):.1f} ms "
            f"(p99 {lag.get('p99_ms', float('nan')):.2f})",
        },
        {
            "case": "trace replay: delivered rate",
            "where": "host (ns3)",
            "configured": _trace_rate(times, timing.first_opportunity, timing.delivered) / 1e6,
            "measured": offered / 1e6,
            "unit": "Mbit/s (the trace's over the same opportunities)",
            "ratio": offered / _trace_rate(times, timing.first_opportunity, timing.delivered),
        },
    ]


def _trace_rate(times: list[int], first: int, count: int) -> float:
    """bit/s of ``count`` opportunities from index ``first`` of the looped trace, over their span."""
    n, period = len(times), times[-1]
    last = first + count - 1
    span_ms = (last // n) * period + times[last % n] - times[first]
    return count * BYTES_PER_OPPORTUNITY * 8 / (span_ms / 1000)


def print_table(rows: list[dict]) -> None:
    print(f"{'case':<40} {'where':<8} {'configured':>11} {'measured':>10} {'ratio':>7}  unit / note")
    for row in rows:
        note = row["unit"] + (f"; {row['note']}" if row.get("note") else "")
        print(
            f"{row['case']:<40} {row['where']:<8} {row['configured']:>11.3f} {row['measured']:>10.3f} "
            f"{row['ratio']:>7.3f}  {note}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller samples")
    parser.add_argument("--netem-only", action="store_true", help=argparse.SUPPRESS)  # the in-VM half
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()

    from quicbed.host.capabilities import has_netem
    from quicbed.host.vm import inside_vm, run_in_vm

    started = time.time()
    rows: list[dict] = []
    with LinkCalibrator() as calibrator:
        if args.netem_only:
            rows += rate_rows(calibrator, VM_RATE_CASES)
            rows += netem_rows(calibrator, args.quick)
        else:
            rows += rate_rows(calibrator, RATE_CASES)
            if has_netem():
                rows += netem_rows(calibrator, args.quick)
    if not args.netem_only:
        rows += trace_rows(args.quick)
    if not args.netem_only and not has_netem() and not inside_vm():
        print("this kernel has no netem: measuring netem cases in the microVM ...", file=sys.stderr, flush=True)
        out = ROOT / "results" / ".bench-links-vm.json"
        out.parent.mkdir(exist_ok=True)
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--netem-only",
            "--json",
            str(out),
            *(["--quick"] if args.quick else []),
        ]
        result = run_in_vm(argv, cwd=ROOT, timeout=3600)
        if result.returncode != 0:
            print(result.output[-3000:], file=sys.stderr)
            return result.returncode
        rows += json.loads(out.read_text())
        out.unlink()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not args.netem_only:
        kernel = platform.release()
        print(
            f"quicbed link accuracy, {time.strftime('%Y-%m-%d')}, host {platform.node()} "
            f"({subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, kernel {kernel}), "
            f"{time.time() - started:.0f} s"
        )
        print_table(rows)
        saved = save_host_summary(rows)
        print(f"\nthis host's rate accuracy kept in {saved} (results folders record it as calibration)")
    return 0


#: a rate limit counts as accurate when the measured rate is within this share of the configured one
RATE_TOLERANCE = 0.02


def save_host_summary(rows: list[dict]) -> Path:
    """Keep what the rate rows measured on this host's kernel, and the highest configured rate
    that stayed within RATE_TOLERANCE (results folders carry it; see quicbed.host.bench_results)."""
    from quicbed.host import bench_results

    rates = [
        {"configured_mbit": row["configured"], "measured_mbit": row["measured"], "ratio": row["ratio"]}
        for row in rows
        if row["case"].startswith("rate ") and row["where"] == "host"
    ]
    accurate = [rate["configured_mbit"] for rate in rates if abs(rate["ratio"] - 1) <= RATE_TOLERANCE]
    return bench_results.save(
        "links",
        {
            "measured": time.strftime("%Y-%m-%d"),
            "rates": rates,
            "tolerance": RATE_TOLERANCE,
            "accurate_up_to_mbit": max(accurate) if accurate else None,
            "netem_measured": sorted({row["where"] for row in rows if not row["case"].startswith("rate ")}),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
