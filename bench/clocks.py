"""Real time against virtual time: the same cells both ways, and what a simulated second costs (prints figures).

    sudo .venv/bin/python bench/clocks.py                         # every cell, 3 repetitions each way
    sudo .venv/bin/python bench/clocks.py --cells quickstart,e1 --repetitions 2
    sudo .venv/bin/python bench/clocks.py --scale                 # wall seconds per simulated second only

Each cell runs with 'quicbed run --clock real' and '--clock virtual' on the same backend (ns3),
the same topology and workload. For every transport and metric it prints the real-time runs'
median and range, the virtual-time runs' median and range, and whether they agree. With 5 or
more runs a side that is a two-sided exact Mann-Whitney test at p < 0.01 (a false DIFFER in
about 1 row of 100); with fewer it is the virtual median inside the range of the valid
real-time runs, or both within 2 % of each other (a range of 3 runs is narrow; 2 % is below
the run-to-run spread of every WiFi figure in bench/README.md), and a DIFFER is a lead. A row
that disagrees needs a mechanism, not a wider range: docs/clocks.md names the ones measured.
Who limited the real-time runs is printed too (how many were CPU-bound or invalid), because a
figure of a CPU-bound real-time run is the CPU's, not the network's.

--scale prints wall seconds per simulated second in virtual time for 1-40 stations on one
802.11ac AP and for 2-6 mesh hops, so that a study's duration can be planned.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.runner.folder import latest_records, read_results  # noqa: E402

METRICS = (
    "download_time",
    "goodput",
    "aggregate_goodput",
    "ampdu_mean",
    "ampdu_client_median",
    "ack_ratio",
    "ipt_server_short_share",
    "mac_delay_median",
    "owd_mean",
    "loss",
)
#: agreement where the real-time range is narrower than this (relative)
TOLERANCE = 0.02
#: runs a side from which the verdict is a rank test (5 and 5 can reach p 0.008), and its level
RANK_TEST_RUNS = 5
RANK_TEST_ALPHA = 0.01


@dataclass(frozen=True)
class Cell:
    name: str
    experiment: str
    sets: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    #: transports compared (the matrix's transport axis)
    transports: tuple[str, ...] = ("quic-native", "bquic-native", "tcp")
    extra_axes: tuple[str, ...] = field(default=())


CELLS = (
    Cell("quickstart", "experiments/quickstart.yaml", transports=("quic", "bquic", "tcp")),
    Cell("e1", "experiments/e1-wifi-bquic.yaml", sets=("workload.object=5MB",)),
    Cell(
        "e4-loss5", "experiments/e4-random-loss.yaml", sets=("matrix.link.bottleneck.loss=[5]", "workload.object=4MB")
    ),
    Cell(
        "mesh-2hops",
        "experiments/e2-hops.yaml",
        sets=("matrix.params.hops=[2]", "matrix.params.distinct_channels=[true]", "workload.object=5MB"),
    ),
    Cell(
        "e5-5sta",
        "experiments/e5-fastack.yaml",
        sets=("matrix.params.stations=[5]",),
        transports=("tcp",),
        extra_axes=("params.fastack",),
    ),
)


def run(cell: Cell, clock: str, repetitions: int, out: Path) -> tuple[list[dict[str, Any]], float]:
    """The cell's valid and invalid records (last attempt of each run) and the wall seconds."""
    folder = out / cell.name / clock
    shutil.rmtree(folder, ignore_errors=True)  # the bench's own scratch folder from an earlier run
    argv = [
        sys.executable,
        "-m",
        "quicbed",
        "run",
        cell.experiment,
        "--clock",
        clock,
        "--backend",
        "ns3",
        "--repetitions",
        str(repetitions),
        "--warmup",
        "0",
        "--no-report",
        "--out",
        str(folder),
        "--set",
        f"matrix.transport=[{', '.join(cell.transports)}]",
        *(f"--set={assignment}" for assignment in cell.sets),
        *(f"-p{param}" for param in cell.params),
    ]
    started = time.monotonic()
    finished = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if finished.returncode != 0:
        print(
            f"{cell.name} {clock}: quicbed run failed (exit {finished.returncode}):\n{finished.stderr[-2000:]}",
            file=sys.stderr,
        )
    return latest_records(read_results(folder / "results.jsonl")), seconds


def group_of(record: dict[str, Any], cell: Cell) -> str:
    parts = [str(record["cell"].get("transport"))]
    parts += [f"{axis.split('.')[-1]}={record['cell'].get(axis)}" for axis in cell.extra_axes]
    return " ".join(parts)


def describe(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


def agree(real: list[float], virtual: list[float]) -> str:
    """With RANK_TEST_RUNS or more a side, a two-sided exact Mann-Whitney test: DIFFER when the
    two samples' ranks separate at p < RANK_TEST_ALPHA (a false DIFFER 1 row in 100); fewer
    runs cannot reach that, so the range rule serves, and its DIFFER is a lead."""
    if not real or not virtual:
        return "?"
    if min(len(real), len(virtual)) >= RANK_TEST_RUNS:
        from scipy.stats import mannwhitneyu

        if len(set(real) | set(virtual)) == 1:
            return "agree (equal)"
        p = float(mannwhitneyu(real, virtual, alternative="two-sided", method="exact").pvalue)
        return f"{'DIFFER' if p < RANK_TEST_ALPHA else 'agree'} (p {p:.3f})"
    middle, low, high = statistics.median(virtual), min(real), max(real)
    reference = statistics.median(real)
    if low <= middle <= high:
        return "agree"
    if reference and abs(middle - reference) <= TOLERANCE * abs(reference):
        return "agree (2 %)"
    return "DIFFER"


def compare(cells: list[Cell], repetitions: int, out: Path) -> list[dict[str, Any]]:
    rows = []
    for cell in cells:
        records = {}
        for clock in ("real", "virtual"):
            records[clock], seconds = run(cell, clock, repetitions, out)
            simulated = sum(r["metrics"].get("download_time", 0) or 0 for r in records[clock])
            counted = [r for r in records[clock] if r["status"] == "ok"]
            print(
                f"{cell.name:11s} {clock:7s} {len(counted)}/{len(records[clock])} valid, "
                f"{sum(1 for r in counted if r['cpu_bound_reasons'])} CPU-bound, "
                f"{sum(r['attempt'] - 1 for r in records[clock])} remade; {seconds:.0f} s wall for "
                f"{simulated:.1f} s of transfers",
                flush=True,
            )
        groups = sorted({group_of(r, cell) for clock in records for r in records[clock]})
        for group in groups:
            for metric in METRICS:
                values = {
                    clock: [
                        float(r["metrics"][metric])
                        for r in records[clock]
                        if r["status"] == "ok" and group_of(r, cell) == group and r["metrics"].get(metric) is not None
                    ]
                    for clock in records
                }
                if not values["real"] and not values["virtual"]:
                    continue
                bound = sum(
                    1
                    for r in records["real"]
                    if r["status"] == "ok" and group_of(r, cell) == group and r["cpu_bound_reasons"]
                )
                rows.append(
                    {
                        "cell": cell.name,
                        "group": group,
                        "metric": metric,
                        "real": describe(values["real"]),
                        "virtual": describe(values["virtual"]),
                        "verdict": agree(values["real"], values["virtual"])
                        + (f" (real: {bound} CPU-bound)" if bound else ""),
                    }
                )
    return rows


SCALE_STATIONS = (1, 10, 20, 40)
SCALE_HOPS = (2, 4, 6)


def scale(out: Path) -> list[dict[str, Any]]:
    """Wall seconds per simulated second in virtual time (the transfers' time)."""
    rows = []
    plans = [
        (
            f"{n} stations",
            "experiments/e5-fastack.yaml",
            (
                f"matrix.params.stations=[{n}]",
                "matrix.params.fastack=[false]",
                "workload.object=2MB",
                "study.headline={metric: aggregate_goodput, x: params.stations}",
            ),
        )  # (one FastACK value)
        for n in SCALE_STATIONS
    ]
    plans += [
        (
            f"{h} mesh hops",
            "experiments/e2-hops.yaml",
            (
                f"matrix.params.hops=[{h}]",
                "matrix.params.distinct_channels=[true]",
                "workload.object=5MB",
                "matrix.transport=[tcp]",
            ),
        )
        for h in SCALE_HOPS
    ]
    for name, experiment, sets in plans:
        cell = Cell(name.replace(" ", "-"), experiment, sets=sets, transports=("tcp",))
        records, seconds = run(cell, "virtual", 1, out / "scale")
        simulated = max((r["metrics"].get("download_time") or 0 for r in records), default=0)
        valid = sum(1 for r in records if r["status"] == "ok")
        rows.append(
            {
                "cell": name,
                "valid": f"{valid}/{len(records)}",
                "wall_s": round(seconds, 1),
                "simulated_s": round(simulated, 2),
                "wall_per_simulated": round(seconds / simulated, 1) if simulated else None,
            }
        )
        print(
            f"{name:14s} {valid}/{len(records)} valid, {seconds:6.1f} s wall, {simulated:6.2f} s simulated "
            f"({rows[-1]['wall_per_simulated']} s per simulated second, boot and set-up included)",
            flush=True,
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cells", default=",".join(c.name for c in CELLS), help="comma-separated: " + ", ".join(c.name for c in CELLS)
    )
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="only the wall time per simulated second")
    parser.add_argument("--out", type=Path, default=Path("/var/tmp/quicbed-bench-clocks"))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    known = {c.name: c for c in CELLS}
    wanted = [name.strip() for name in args.cells.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        parser.error(f"unknown cell(s) {', '.join(unknown)} (known: {', '.join(known)})")
    started = time.monotonic()
    print(f"quicbed clocks, {time.strftime('%Y-%m-%d')}, results in {args.out}", flush=True)
    if args.scale:
        rows = scale(args.out)
    else:
        rows = compare([known[name] for name in wanted], args.repetitions, args.out)
        print(
            f"\n{'cell':11s} {'group':22s} {'metric':24s} {'real: median [range]':28s} "
            f"{'virtual: median [range]':28s} verdict"
        )
        for row in rows:
            print(
                f"{row['cell']:11s} {row['group']:22s} {row['metric']:24s} {row['real']:28s} {row['virtual']:28s} "
                f"{row['verdict']}"
            )
    print(f"\n{time.monotonic() - started:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
