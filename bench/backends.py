#!/usr/bin/env python3
"""Do the two wired link emulators agree? The same links on netns (tc: tbf + netem) and on
ns3 (simulated cables), measured the same way, side by side.

    sudo .venv/bin/python bench/backends.py            # full sample sizes
    sudo .venv/bin/python bench/backends.py --quick    # 30 % of the probes, 3 downloads per transport

Rows: rate limits (configured vs measured wire rate), delay (median one-way delay), jitter
(IQR of the one-way delay against the distribution's), Bernoulli loss (inside the binomial
99 % interval?), Gilbert-Elliott loss (mean inside the chain's 99 % interval, mean loss-burst
length against the model's), reordering (netem only: ns3 refuses it), and one E4 cell's
download times (TCP and the native QUIC endpoint, median of several downloads) on both.
Rates stay where the microVM can carry them: on a kernel without netem the netns half runs
there (one boot), the ns3 half on this host. The last column says whether the two agree.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import links  # noqa: E402  (bench/links.py: the same link cases)

from quicbed.calibration import LinkCalibrator, ProbePlan  # noqa: E402

RATES = ["2mbit", "8mbit"]
REORDER = {"delay": "20ms", "reorder": 10}
#: the E4 cell both emulators run: e4-random-loss's link and loss at a rate the microVM carries
DOWNLOAD_CELL = {"rate": "5mbit", "delay": "5ms", "queue_limit": 100, "loss": 2}
DOWNLOAD_OBJECT = "1MB"
DOWNLOAD_TRANSPORTS = ("tcp", "quic-native")
#: tolerances for "agree"
RATE_TOLERANCE = 0.02
DELAY_TOLERANCE_S = 0.001
DOWNLOAD_TOLERANCE = 0.10


def emulator_rows(backend: str, quick: bool) -> list[dict]:
    with LinkCalibrator(backend=backend) as calibrator:
        rows = links.rate_rows(calibrator, RATES) + links.netem_rows(calibrator, quick)
        if backend == "netns":
            _, stats = calibrator.probe(REORDER, ProbePlan(count=int(2000 * (0.3 if quick else 1)), rate=200))
            rows.append(
                {
                    "case": "reorder 10 % (delay 20ms)",
                    "where": links.where(),
                    "configured": 10.0,
                    "measured": stats.reordered * 100,
                    "unit": "% out of order",
                    "ratio": stats.reordered / 0.1,
                }
            )
    loss_case = ""
    for row in rows:
        row["backend"] = backend
        if row["case"].startswith("loss"):
            loss_case = row["case"][len("loss ") :]
        elif row["case"].strip() == "mean loss burst":  # one per loss case: name it after its case
            row["case"] = f"  mean loss burst ({loss_case})"
    return rows


def download_rows(backend: str, repetitions: int, work: Path) -> list[dict]:
    """Median download time per transport of DOWNLOAD_CELL on ``backend`` (netns: in the microVM
    when this kernel has no netem; quicbed run decides)."""
    params = ", ".join(f"{k}: {v}" for k, v in DOWNLOAD_CELL.items())
    experiment = work / f"agreement-{backend}.yaml"
    experiment.write_text(
        f"name: agreement-{backend}\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        f"  params: {{{params}}}\nbackend: {backend}\nworkload: {{object: {DOWNLOAD_OBJECT}}}\n"
        f"matrix:\n  transport: [{', '.join(DOWNLOAD_TRANSPORTS)}]\nrepetitions: {repetitions}\nwarmup: 1\n"
        "timeout: 120s\ncaptures: false\nvalidity: {reruns: 0}\n"
    )
    out = Path(tempfile.mkdtemp(prefix=f"agreement-{backend}-", dir=ROOT / "results"))
    out.rmdir()
    result = subprocess.run(
        [sys.executable, "-m", "quicbed", "run", str(experiment), "--out", str(out), "--no-report"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=7200,
    )
    if result.returncode != 0:
        raise SystemExit(f"quicbed run on {backend} failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    in_vm = json.loads((out / "metadata.json").read_text())["host"].get("in_microvm")
    rows = []
    for transport in DOWNLOAD_TRANSPORTS:
        times = sorted(
            line["metrics"]["download_time"]
            for line in lines
            if line["cell"]["transport"] == transport and not line["warmup"] and line["status"] == "ok"
        )
        cpu_bound = sum(1 for line in lines if line["cell"]["transport"] == transport and line.get("cpu_bound_reasons"))
        rows.append(
            {
                "case": f"download {DOWNLOAD_OBJECT} {transport}",
                "backend": backend,
                "where": "microVM" if in_vm else "host",
                "configured": None,
                "measured": statistics.median(times) if times else float("nan"),
                "unit": "s (median)",
                "ratio": None,
                "note": f"{len(times)} downloads, {times[0]:.2f}-{times[-1]:.2f} s"
                + (f", {cpu_bound} CPU-bound" if cpu_bound else "")
                if times
                else "none ok",
            }
        )
    return rows


def verdict(case: str, netns: dict | None, ns3: dict | None) -> str:
    """Whether the two rows of one case agree, and by which criterion."""
    if netns is None or ns3 is None:
        return "ns3 does not model it (refused)" if ns3 is None else "-"
    if case.startswith("rate"):
        ok = abs(netns["ratio"] - 1) <= RATE_TOLERANCE and abs(ns3["ratio"] - 1) <= RATE_TOLERANCE
        return f"{'yes' if ok else 'NO'}: both within {RATE_TOLERANCE:.0%} of the rate"
    if case.startswith("delay"):
        gap = abs(netns["measured"] - ns3["measured"]) / 1e3
        return f"{'yes' if gap <= DELAY_TOLERANCE_S else 'NO'}: medians {gap * 1e3:.2f} ms apart"
    if case.startswith("jitter"):
        tolerance = max(netns["tolerance"], ns3["tolerance"])
        ok = abs(netns["ratio"] - 1) <= netns["tolerance"] and abs(ns3["ratio"] - 1) <= ns3["tolerance"]
        return f"{'yes' if ok else 'NO'}: both IQRs within their 99 % interval (±{tolerance:.0%})"
    if case.startswith("loss"):
        ok = "OUTSIDE" not in netns.get("note", "") + ns3.get("note", "")
        return f"{'yes' if ok else 'NO'}: both inside their 99 % interval"
    if case.strip().startswith("mean loss burst"):
        ok = all(row["interval"][0] <= row["measured"] <= row["interval"][1] for row in (netns, ns3))
        return f"{'yes' if ok else 'NO'}: both inside the model's 99 % interval"
    if case.startswith("download"):
        gap = abs(ns3["measured"] / netns["measured"] - 1)
        return f"{'yes' if gap <= DOWNLOAD_TOLERANCE else 'NO'}: medians {gap:.1%} apart"
    return "-"


def print_table(rows: list[dict]) -> None:
    cases = list(dict.fromkeys(row["case"] for row in rows))
    by = {(row["case"], row["backend"]): row for row in rows}
    print(f"{'case':<34} {'configured':>10} {'netns':>9} {'where':<8} {'ns3':>9}  unit; agreement")
    for case in cases:
        netns, ns3 = by.get((case, "netns")), by.get((case, "ns3"))
        first = netns or ns3
        configured = "" if first.get("configured") is None else f"{first['configured']:.3f}"

        def value(row: dict | None) -> str:
            return "refused" if row is None else f"{row['measured']:.3f}"

        print(
            f"{case:<34} {configured:>10} {value(netns):>9} {(netns or {}).get('where', ''):<8} {value(ns3):>9}  "
            f"{first['unit']}; {verdict(case, netns, ns3)}"
        )
        for row in (netns, ns3):
            if row and row.get("note") and not case.startswith(("rate", "delay", "jitter")):
                print(f"{'':<34} {'':>10} {row['backend']:>9}: {row['note']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller samples, fewer downloads")
    parser.add_argument("--netns-only", action="store_true", help=argparse.SUPPRESS)  # the in-VM half
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()

    from quicbed.host.capabilities import has_netem
    from quicbed.host.vm import inside_vm, run_in_vm

    started = time.time()
    if args.netns_only:
        rows = emulator_rows("netns", args.quick)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    rows = emulator_rows("ns3", args.quick)
    if has_netem() or inside_vm():
        rows += emulator_rows("netns", args.quick)
    else:
        print("this kernel has no netem: measuring the netns links in the microVM ...", file=sys.stderr, flush=True)
        out = ROOT / "results" / ".bench-backends-vm.json"
        out.parent.mkdir(exist_ok=True)
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--netns-only",
            "--json",
            str(out),
            *(["--quick"] if args.quick else []),
        ]
        result = run_in_vm(argv, cwd=ROOT, timeout=7200)
        if result.returncode != 0:
            print(result.output[-3000:], file=sys.stderr)
            return result.returncode
        rows += json.loads(out.read_text())
        out.unlink()
    repetitions = 3 if args.quick else 10
    with tempfile.TemporaryDirectory(prefix="quicbed-agreement-") as work:
        for backend in ("ns3", "netns"):
            rows += download_rows(backend, repetitions, Path(work))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(
        f"quicbed emulator agreement, {time.strftime('%Y-%m-%d')}, host {platform.node()} "
        f"({subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, kernel "
        f"{platform.release()}), {time.time() - started:.0f} s"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
