"""What an experiment (or one shard of it) will run, and about how long that takes.

The time estimate has two parts: an upper bound (every run hitting its timeout) and the
number of runs times a run's duration: the median of earlier results folders of the same
experiment in ``results/`` (measured on this host), else the experiment file's own
``wall_time`` (measured where it was written), else, for wired networks, a rough figure from
the bytes over the narrowest link. In virtual time a run's records hold the
guest's clock, not the wall's, so the estimate reads what the host measured around each
guest (``GUEST_WALL_TIME_FILE``), and a timeout bounds no wall time. A plan above
``LARGE_PLAN`` runs is summarised instead of listed, and a real run (or shard) that large asks
for ``--yes``.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from quicbed.errors import QuicbedError
from quicbed.host.clock import REAL, VIRTUAL
from quicbed.results import RESULTS_FILE, read_records
from quicbed.spec.experiment import Experiment, Run, RunSequence
from quicbed.spec.shard import Shard

#: more runs than this: --dry-run prints a summary (unless --all), a real run needs --yes
LARGE_PLAN = 2000
#: how many earlier runs are enough to estimate a run's duration
ESTIMATE_RUNS = 200
#: a results folder's wall time around each virtual-time guest: one JSON line a guest
GUEST_WALL_TIME_FILE = "guest-wall-time.jsonl"


class ShardRuns:
    """One shard's runs, in the experiment's order: counted by arithmetic, made one at a time."""

    def __init__(self, every_run: RunSequence, shard: Shard) -> None:
        self.every_run = every_run
        self.shard = shard
        self._size = shard.size(every_run.experiment)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Run]:
        owns = self.shard.owner(self.every_run.experiment)
        return (run for run in self.every_run if owns(run))


@dataclass
class Plan:
    experiment: Experiment
    backend: str
    shard: Shard | None
    every_run: RunSequence
    runs: RunSequence | ShardRuns  # this shard's, or all

    @classmethod
    def of(cls, experiment: Experiment, backend: str, shard: Shard | None = None) -> Plan:
        every_run = RunSequence(experiment)
        return cls(experiment, backend, shard, every_run, ShardRuns(every_run, shard) if shard else every_run)

    @property
    def large(self) -> bool:
        """Too many runs to list one by one (the whole experiment's)."""
        return len(self.every_run) > LARGE_PLAN

    @property
    def large_here(self) -> bool:
        """Too many runs to start without --yes (this shard's, or all)."""
        return len(self.runs) > LARGE_PLAN

    def shard_sizes(self) -> list[int]:
        if self.shard is None:
            return [len(self.runs)]
        return [Shard(k, self.shard.count, self.shard.by).size(self.experiment) for k in range(1, self.shard.count + 1)]


def measured_run_seconds(
    name: str, results_root: Path = Path("results"), clock: str = REAL
) -> tuple[float, int] | None:
    """Median wall duration of the finished runs of earlier folders of experiment ``name``
    under ``results_root`` on ``clock`` (newest folders first, up to ESTIMATE_RUNS runs), and
    how many runs."""
    durations: list[float] = []
    folders = (
        sorted(results_root.glob(f"{name}-*/{RESULTS_FILE}"), key=lambda p: p.stat().st_mtime, reverse=True)
        if results_root.is_dir()
        else []
    )
    for results in folders:
        if clock == VIRTUAL:
            durations += _guest_run_seconds(results.parent)
        else:
            durations += _record_seconds(results, clock)
        if len(durations) >= ESTIMATE_RUNS:
            break
    return (statistics.median(durations), len(durations)) if durations else None


def _record_seconds(results: Path, clock: str) -> list[float]:
    try:
        records, _ = read_records(results, strict=False)
    except QuicbedError:  # a folder of a newer quicbed: no estimate from it
        return []
    durations = []
    for record in records:
        if (record.clock or REAL) != clock:
            continue
        if record.finished is None or record.started is None:  # not finished
            continue
        try:
            duration = float(record.finished) - float(record.started)
        except (ValueError, TypeError):  # edited by hand
            continue
        if duration > 0:
            durations.append(duration)
    return durations


def _guest_run_seconds(folder: Path) -> list[float]:
    """Each run's share of the wall time of the virtual-time guests that made them."""
    path = folder / GUEST_WALL_TIME_FILE
    durations: list[float] = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            guest = json.loads(line)
            runs, seconds = int(guest["runs"]), float(guest["wall_seconds"])
        except (ValueError, KeyError, TypeError):  # a line torn by a crash
            continue
        if runs > 0 and seconds > 0:
            durations += [seconds / runs] * runs
    return durations


def record_guest_wall_time(folder: Path, runs: int, seconds: float) -> None:
    """Adds one virtual-time guest's wall time and the runs it made to ``folder``'s file."""
    if runs > 0 and (folder / RESULTS_FILE).is_file():
        line = json.dumps({"runs": runs, "wall_seconds": round(seconds, 1), "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
        with open(folder / GUEST_WALL_TIME_FILE, "a") as file:
            file.write(line + "\n")


def finished_runs(folder: Path) -> int:
    """Lines in ``folder``'s results file: runs finished there, on any clock."""
    try:
        with open(folder / RESULTS_FILE, "rb") as file:
            return sum(1 for line in file if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0


def _hours(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"


def estimate(plan: Plan, results_root: Path = Path("results"), clock: str = REAL) -> str:
    """'about 3.2 h at the 9.1 s median of 200 earlier runs; at most 41.7 h (every run at its 60 s timeout)':
    from this host's earlier runs of the experiment on the same clock, else from the file's
    ``wall_time`` measured on that clock, else none."""
    count = len(plan.runs)
    timeout = plan.experiment.timeout
    if clock == VIRTUAL:  # the timeout is virtual too: it bounds no wall time
        bound = f"the {timeout:g} s timeout counts virtual time and bounds no wall time"
    else:
        bound = f"at most {_hours(count * timeout)} (every run at its {timeout:g} s timeout)"
    measured = measured_run_seconds(plan.experiment.name, results_root, clock)
    if measured is not None:
        median, runs = measured
        where = " in virtual time" if clock == VIRTUAL else ""
        return (
            f"about {_hours(count * median)} at the {median:.1f} s median of {runs} earlier runs here{where}; {bound}"
        )
    wall = plan.experiment.wall_time
    if wall is not None and wall.clock == clock:
        return (
            f"about {_hours(count * wall.per_run)} from the file's wall_time ({wall.runs} run(s) in "
            f"{_hours(wall.seconds)} on {wall.host}{' in virtual time' if clock == VIRTUAL else ''}: "
            f"{wall.per_run:.1f} s a run); {bound}"
        )
    rough = rough_run_seconds(plan.experiment) if clock == REAL else None
    if rough is not None:
        return (
            f"roughly {_hours(count * rough)}, a rough figure: each run's objects over its narrowest wired link "
            f"plus {SETUP_SECONDS:g} s of set-up ({rough:.1f} s a run; no earlier run of {plan.experiment.name} in "
            f"{results_root}/ and no wall_time in the file: run it once with --repetitions 1 for a measured one); "
            f"{bound}"
        )
    if clock == VIRTUAL:
        return (
            f"no estimate: no earlier virtual-time run of {plan.experiment.name} in {results_root}/ nor a "
            "wall_time with clock: virtual in the file (in "
            "bench/clocks.py a cell took 1.7-11 times its real-time wall time here: run it once with "
            f"--repetitions 1 to have one); {bound}"
        )
    return (
        f"{bound}; no estimate: no earlier run of {plan.experiment.name} in {results_root}/ and no wall_time in "
        "the file (run it once with --repetitions 1 to have one)"
    )


#: what a real-time run costs besides its transfer (network, endpoints, captures, analysis):
#: the quickstart's 18 runs took 48 s, 0.8 s of each the transfer (2 MB at 20 Mbit/s)
SETUP_SECONDS = 1.9
#: cells looked at for a rough figure (each loads its topology script)
ROUGH_CELLS = 50


def rough_run_seconds(experiment: Experiment) -> float | None:
    """A run's mean duration from its workload's bytes over the narrowest rate-limited wired
    link of its network, plus SETUP_SECONDS: for wired networks with one download at a time
    (None otherwise: a WiFi cell's rate is the simulation's to find)."""
    from quicbed.apps.objects import PAGE_SHAPES
    from quicbed.runner.transfer import workload_of
    from quicbed.spec.experiment import topology_for
    from quicbed.spec.link import WiredLink

    if experiment.clients is not None or experiment.competitor is not None:
        return None
    pages = {shape.name: shape.total_bytes for shape in PAGE_SHAPES}
    seconds = []
    for cell in itertools.islice(experiment.iter_cells(), ROUGH_CELLS):
        workload = workload_of(experiment, cell)
        size = workload.get("object") or pages.get(str(workload.get("page")), 0)
        links = topology_for(experiment, cell, {}).links
        rates = [
            shape.rate
            for link in links
            if isinstance(link, WiredLink)
            for shape in (link.forward, link.backward)
            if shape.rate
        ]
        if not rates or not size or not all(isinstance(link, WiredLink) for link in links):
            return None
        seconds.append(SETUP_SECONDS + 8 * size / min(rates))
    return statistics.fmean(seconds) if seconds else None


def header(plan: Plan) -> str:
    exp = plan.experiment
    warmup = f" + {exp.warmup} warm-up run(s) per cell" if exp.warmup else ""
    order = f"order {exp.order}{f' (seed {exp.seed})' if exp.order == 'random' else ''}"
    text = (
        f"{exp.name}: {exp.cell_count()} cell(s) x {exp.repetitions} repetition(s){warmup} = "
        f"{len(plan.every_run)} runs, {order}, backend {plan.backend}, timeout {exp.timeout:g} s per run"
    )
    if plan.shard is not None:
        text += f"\nshard {plan.shard}: {len(plan.runs)} of the {len(plan.every_run)} runs"
    return text


def summary_lines(plan: Plan, results_root: Path = Path("results"), clock: str = REAL) -> list[str]:
    """What --dry-run prints for a large plan instead of every run."""
    lines = [header(plan)]
    if plan.shard is not None:
        sizes = plan.shard_sizes()
        lines.append(f"runs per shard (1..{plan.shard.count}): {', '.join(map(str, sizes))}")
    lines.append(f"time: {estimate(plan, results_root, clock)}")
    lines.append(f"(more than {LARGE_PLAN} runs: not listed one by one; --all lists them)")
    return lines


def run_lines(plan: Plan) -> list[str]:
    return [
        f"{run.index + 1:>5}  {run.run_id}  {'warm-up  ' if run.warmup else ''}{run.label or '(single cell)'}"
        for run in plan.runs
    ]
