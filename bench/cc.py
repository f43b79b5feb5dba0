"""Do quicbed's QUIC congestion controllers behave like their namesakes? (prints figures)

    sudo python bench/cc.py                                 # step-drop, 3 runs each: ~12 minutes
    sudo python bench/cc.py --traces step-drop,markov-drive --repetitions 5 --json out.json
    python bench/cc.py --analyse FOLDER [FOLDER...]         # the figures of earlier bench runs

Runs experiments/e3-cc-series.yaml (its topology, object and transports) on the given traces
and compares each QUIC controller of quinn with the kernel's TCP controller of the same name,
like for like: NewReno and CUBIC without pacing (Linux paces neither; `pacing: false`), BBR
paced (both pace). The paced quic-reno and quic-cubic that the E3 files run are measured
too and shown against the same TCP rows, marked "paced": their differences are pacing's, not
the controller's. Per trace:

* loss (the sender's, from the captures), smoothed RTT, goodput;
* time to react to a capacity drop, when the window at the drop is more than the path holds
  at the new capacity (its BDP plus the drop-tail queue): from the drop until the window
  first falls below 85 % of its value at the drop (the queue overflows, the sender detects
  the loss and cuts); a window that still fits needs no cut ("-");
* time to adapt to a rise: from the rise until cwnd / smoothed RTT first reaches 80 % of the
  new capacity;
* the congestion window against what the path holds during the low phase, median ratio:
  above 1, the queue cannot take what the window lets out.
From the window, not the bytes in flight: tcp_probe's in flight (snd_nxt - snd_una) counts
SACKed bytes too.

The drops and rises are the steps of the trace the download crosses (100 ms bins, a change of
more than 2x); a trace with more than 4 steps per period (markov-drive) gets loss, RTT and
goodput only. A QUIC controller passes when, on loss and on both times, the median of
its runs is within the spread of its namesake's: no worse than the namesake's worst run plus a
floor (0.5 percentage points of loss, 0.25 s).
Runs that were invalid (behind real time) or CPU-bound at an endpoint are named and left out,
so every figure is about the emulated link.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from quicbed.report.artifacts import RunFiles  # noqa: E402
from quicbed.runner.folder import read_results  # noqa: E402
from quicbed.traces.format import capacity, read_opportunities  # noqa: E402
from quicbed.spec.units import parse_time  # noqa: E402

EXPERIMENT = ROOT / "experiments" / "e3-cc-series.yaml"
UNPACED = {
    name: {"kind": "quic", "impl": "quinn", "profile": "quic", "knobs": {"congestion_control": cc, "pacing": False}}
    for name, cc in (("quic-reno-unpaced", "reno"), ("quic-cubic-unpaced", "cubic"))
}
#: (QUIC, TCP namesake, like for like): the pairs the verdict is about, then the paced ones E3 runs
PAIRS = (
    ("quic-reno-unpaced", "tcp-reno", True),
    ("quic-cubic-unpaced", "tcp-cubic", True),
    ("quic-bbr", "tcp-bbr", True),
    ("quic-reno", "tcp-reno", False),
    ("quic-cubic", "tcp-cubic", False),
)
TRANSPORTS = list(dict.fromkeys(name for quic, tcp, _ in PAIRS for name in (quic, tcp)))
BIN_MS = 100
STEP_FACTOR = 2.0  # a capacity change of more than this between bins is a step
MAX_STEPS = 4  # per trace period; more is a varying link, not a step change
PACKET = 1500  # bytes a drop-tail queue slot holds
RISE_SHARE = 0.8
REACTION_CUT = 0.85  # a window below this share of its value at the drop: the controller reacted
FLOORS = {"loss": 0.005, "react_drop": 0.25, "adapt_rise": 0.25}
CPU_BOUND_LIMIT = 0.05  # share of the transfer an endpoint may spend CPU-bound


@dataclass(frozen=True)
class Step:
    at: float  # s into the trace's period
    before: float  # bit/s
    after: float


def steps(times: list[int]) -> list[Step]:
    """The trace's capacity steps within one period (bins of BIN_MS)."""
    rates = capacity(times, BIN_MS)
    found = []
    for index in range(1, len(rates)):
        low, high = sorted((rates[index - 1], rates[index]))
        if low > 0 and high / low > STEP_FACTOR or low == 0 < high:
            found.append(Step(index * BIN_MS / 1000, rates[index - 1], rates[index]))
    return found


@dataclass
class RunFigures:
    transport: str
    trace: str
    loss: float
    srtt: float
    goodput: float
    react_drop: float | None = None
    adapt_rise: float | None = None
    overshoot: float | None = None  # median cwnd / (BDP + queue) in the low phase


def adaptation(
    frame: Any, started: float, period: float, trace_steps: list[Step], base_rtt: float, queue_bytes: float
) -> tuple[float | None, float | None, float | None]:
    """(time to react to the first drop, to adapt to the first rise, cwnd over what the path
    holds in the low phase). From the congestion window, not the bytes in flight: tcp_probe's
    in flight (snd_nxt - snd_una) counts SACKed bytes too."""
    time = frame["time"].to_numpy(dtype=float) - started
    cwnd = frame["cwnd"].to_numpy(dtype=float)
    srtt = frame["smoothed_rtt"].to_numpy(dtype=float)
    end = time[-1] if len(time) else 0.0
    drop = next((s for s in trace_steps if s.after < s.before), None)
    rise = next((s for s in trace_steps if s.after > s.before and drop and s.at > drop.at), None)
    react = adapt_rise = overshoot = None
    if drop and drop.at < end:
        holds = drop.after / 8 * base_rtt + queue_bytes
        at_drop = (cwnd[time <= drop.at][-1:] if (time <= drop.at).any() else cwnd[:1])[0]
        if at_drop > holds:  # a window that still fits the path needs no cut
            cut = (time >= drop.at) & (cwnd < REACTION_CUT * at_drop)
            react = float(time[cut][0] - drop.at) if cut.any() else math.inf
        low = (time >= drop.at) & (time < (rise.at if rise else period))
        if low.any():
            overshoot = float(statistics.median(cwnd[low] / holds))
    if rise and rise.at < end:
        known = srtt > 0
        rate = cwnd[known] * 8 / srtt[known]
        reached = (time[known] >= rise.at) & (rate >= RISE_SHARE * rise.after)
        adapt_rise = float(time[known][reached][0] - rise.at) if reached.any() else math.inf
    return react, adapt_rise, overshoot


def run_experiment(traces: list[str], transports: list[str], repetitions: int, out: Path) -> None:
    added = [f"--set=transports.{name}={json.dumps(spec)}" for name, spec in UNPACED.items() if name in transports]
    command = [
        sys.executable,
        "-m",
        "quicbed",
        "run",
        str(EXPERIMENT),
        "--out",
        str(out),
        "--no-report",
        "--repetitions",
        str(repetitions),
        "--warmup",
        "0",
        *added,
        f"--set=matrix.params.trace={json.dumps(traces)}",
        f"--set=matrix.transport={json.dumps(transports)}",
    ]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


HEADROOM = {
    "cpu_client_bound": "client CPU-bound",
    "cpu_server_bound": "server CPU-bound",
    "cpu_channel_peak": "channel's core peak",
    "cpu_machine_busy": "machine busy",
    "lag_behind_share": "more than 4 ms behind real time",
}


def headroom(out: Path) -> str:
    """Who could have limited the figures: the largest share of each resource over the runs."""
    rows = [row.get("metrics") or {} for row in read_results(out / "results.jsonl")]
    return ", ".join(f"{label} {max((m.get(key) or 0) for m in rows):.1%}" for key, label in HEADROOM.items())


def figures(out: Path, experiment: dict[str, Any], transports: list[str]) -> tuple[list[RunFigures], list[str]]:
    """The figures of each usable run of ``transports`` in the results folder ``out``, and why
    the others were left out."""
    params = experiment["topology"].get("params") or {}
    base_rtt = 2 * parse_time(params.get("delay", "20ms"), "delay")
    queue_bytes = int(params.get("queue_limit", 200)) * PACKET
    files = RunFiles(out)
    found, left_out = [], []
    for row in read_results(out / "results.jsonl"):
        if row["cell"].get("transport") not in transports:
            continue
        metrics, name = row.get("metrics") or {}, f"{row['run_id']} ({row['cell'].get('transport')})"
        if row.get("status") != "ok":
            left_out.append(f"{name}: {row.get('status')} {row.get('error') or row.get('invalid_reasons')}")
            continue
        bound = max(metrics.get("cpu_client_bound") or 0, metrics.get("cpu_server_bound") or 0)
        if bound > CPU_BOUND_LIMIT:
            left_out.append(f"{name}: an endpoint CPU-bound {bound:.0%} of the transfer")
            continue
        run = RunFigures(
            row["cell"]["transport"],
            row["cell"]["params.trace"],
            metrics.get("loss", math.nan),
            metrics.get("srtt_mean", math.nan),
            metrics.get("goodput", math.nan),
        )
        folder = f"runs/{row['run_id']}"
        frame = files.sender_series(folder)
        traces = [t for t in files.run_details(folder).get("traces") or [] if t.get("towards_client")]
        if frame is not None and traces:
            times = read_opportunities(Path(traces[0]["path"]))
            trace_steps = steps(times)
            if len(trace_steps) <= MAX_STEPS:
                run.react_drop, run.adapt_rise, run.overshoot = adaptation(
                    frame, traces[0]["started"], times[-1] / 1000, trace_steps, base_rtt, queue_bytes
                )
        found.append(run)
    return found, left_out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(known) if known else None


def verdicts(runs: list[RunFigures]) -> list[dict[str, Any]]:
    rows = []
    for trace in sorted({run.trace for run in runs}):
        for quic, tcp, like_for_like in PAIRS:
            cells = {name: [r for r in runs if r.trace == trace and r.transport == name] for name in (quic, tcp)}
            if not all(cells.values()):
                continue
            row: dict[str, Any] = {
                "trace": trace,
                "pair": f"{quic} / {tcp}",
                "runs": f"{len(cells[quic])} / {len(cells[tcp])}",
            }
            passed = True
            for metric in ("loss", "srtt", "goodput", "react_drop", "adapt_rise", "overshoot"):
                values = {name: [getattr(r, metric) for r in cell] for name, cell in cells.items()}
                medians = {name: _median(v) for name, v in values.items()}
                row[metric] = (medians[quic], medians[tcp])
                if metric in FLOORS and None not in medians.values():
                    # no worse than the namesake's worst run, and a floor
                    limit = max(v for v in values[tcp] if v is not None) + FLOORS[metric]
                    row[f"{metric}_ok"] = medians[quic] <= limit
                    passed &= row[f"{metric}_ok"]
            row["verdict"] = ("within spread" if passed else "DEPARTS") + ("" if like_for_like else " (paced)")
            rows.append(row)
    return rows


def _pair(values: tuple[float | None, float | None], scale: float = 1.0, digits: int = 2) -> str:
    return " / ".join("-" if v is None else ("never" if math.isinf(v) else f"{v * scale:.{digits}f}") for v in values)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        "trace",
        "QUIC / TCP",
        "runs",
        "loss %",
        "sRTT ms",
        "Mbit/s",
        "react drop s",
        "adapt rise s",
        "cwnd/path low",
        "verdict",
    )
    lines = [header]
    for row in rows:
        mark = {m: "" if row.get(f"{m}_ok", True) else " !" for m in FLOORS}
        lines.append(
            (
                row["trace"],
                row["pair"],
                row["runs"],
                _pair(row["loss"], 100, 1) + mark["loss"],
                _pair(row["srtt"], 1000, 0),
                _pair(row["goodput"], 1e-6, 1),
                _pair(row["react_drop"]) + mark["react_drop"],
                _pair(row["adapt_rise"]) + mark["adapt_rise"],
                _pair(row["overshoot"], 1, 1),
                row["verdict"],
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(str(value).ljust(width) for value, width in zip(line, widths)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default="step-drop", help="comma-separated shipped trace pairs (default step-drop)")
    parser.add_argument(
        "--transports",
        default=",".join(TRANSPORTS),
        help=f"comma-separated, of {', '.join(TRANSPORTS)} (default: all); with --analyse, the runs of these only",
    )
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--out", type=Path, help="results folder (default: a temporary one, kept)")
    parser.add_argument("--analyse", type=Path, nargs="+", help="only analyse these folders of earlier bench runs")
    parser.add_argument("--json", type=Path, help="write the rows and the runs here")
    args = parser.parse_args()
    experiment = yaml.safe_load(EXPERIMENT.read_text(encoding="utf-8"))
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    unknown = sorted(set(transports) - set(TRANSPORTS))
    if unknown:
        parser.error(f"--transports: unknown {', '.join(unknown)} (choose from {', '.join(TRANSPORTS)})")
    folders = args.analyse or [args.out or Path(tempfile.mkdtemp(prefix="bench-cc-"))]
    if args.analyse is None:
        run_experiment(
            [t.strip() for t in args.traces.split(",") if t.strip()], transports, args.repetitions, folders[0]
        )
    runs, left_out = [], []
    for folder in folders:
        found, skipped = figures(folder, experiment, transports)
        runs += found
        left_out += skipped
    rows = verdicts(runs)
    print(f"\nresults: {' '.join(map(str, folders))}")
    print_table(rows)
    for reason in left_out:
        print(f"left out: {reason}")
    for folder in folders:
        print(f"headroom, the most over the runs of {folder}: {headroom(folder)}")
    print(
        f"'!': the QUIC median is worse than the namesake's worst run plus a floor (loss {FLOORS['loss']:.1%}, "
        f"times {FLOORS['react_drop']} s); 'never': not within the transfer; '-': not "
        "measured (a window that fitted the path at the drop needs no cut); (paced): paced QUIC against unpaced TCP"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "runs": [asdict(r) for r in runs], "left_out": left_out}, indent=1, default=str),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
