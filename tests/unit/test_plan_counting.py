"""Plans are counted, not listed: a matrix's size, its estimate, its shards' sizes and the refusal
above LARGE_PLAN runs come from arithmetic, and runs are made one at a time, in the order (and
with the ids) that listing them all gave."""

from __future__ import annotations

import itertools
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quicbed.spec.experiment as experiment_module
from quicbed.cli import main
from quicbed.runner.plan import LARGE_PLAN, Plan, summary_lines
from quicbed.spec.experiment import Experiment, Run, RunSequence
from quicbed.spec.shard import Shard

ROOT = Path(__file__).resolve().parents[2]


def listed_runs(exp: Experiment) -> list[Run]:
    """The runs as quicbed listed them before it counted them (the reference order)."""
    keys = list(exp.matrix)
    cells = [dict(zip(keys, values)) for values in itertools.product(*exp.matrix.values())] if keys else [{}]
    warmups = [Run(0, c, cell, r, True) for r in range(1, exp.warmup + 1) for c, cell in enumerate(cells)]
    measured = [Run(0, c, cell, r, False) for r in range(1, exp.repetitions + 1) for c, cell in enumerate(cells)]
    if exp.order == "random":
        random.Random(exp.seed).shuffle(measured)
    return [Run(i, r.cell_index, r.cell, r.repetition, r.warmup) for i, r in enumerate(warmups + measured)]


axes = st.dictionaries(
    st.sampled_from(["transport", "link.bottleneck.loss", "params.delay", "stress.load"]),
    st.lists(st.sampled_from([0, 1, 2, "a", "b", 2.0]), min_size=1, max_size=4),
    max_size=3,
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(
    axes,
    st.integers(1, 4),
    st.integers(0, 2),
    st.sampled_from(["round-robin", "random"]),
    st.integers(0, 9),
    st.integers(1, 5),
    st.data(),
)
def test_counted_runs_are_the_listed_runs_and_shards_split_them_alike(
    matrix: dict[str, list[Any]], repetitions: int, warmup: int, order: str, seed: int, count: int, data: st.DataObject
) -> None:
    exp = Experiment(
        "e",
        Path("e.yaml"),
        Path("t.py"),
        {},
        matrix=matrix,
        repetitions=repetitions,
        warmup=warmup,
        order=order,
        seed=seed,
    )
    listed = listed_runs(exp)
    sequence = RunSequence(exp)
    assert len(sequence) == len(listed) and list(sequence) == listed
    assert exp.cell_count() == len(exp.cells()) and [exp.cell_at(i) for i in range(exp.cell_count())] == exp.cells()
    by = data.draw(st.sampled_from(["cell", "run", *matrix]))
    for index in range(1, count + 1):
        shard = Shard(index, count, by)
        selected = shard.select(listed)
        plan = Plan.of(exp, "netns", shard)
        assert list(plan.runs) == selected and len(plan.runs) == len(selected)
    assert sum(Plan.of(exp, "netns", Shard(1, count, by)).shard_sizes()) == len(listed)


# --------------------------------------------------------------------------- ten million runs

HUGE_RUNS = 10**7


@pytest.fixture
def huge_experiment(tmp_path: Path) -> Path:
    """2 transports x 100 objects x 100 loads = 20,000 cells, x 500 repetitions: 10^7 runs."""
    objects = ", ".join(f"{size}kB" for size in range(1, 101))
    loads = ", ".join(str(load) for load in range(100))
    path = tmp_path / "huge.yaml"
    path.write_text(
        f"name: huge\ntopology: {{script: {ROOT / 'topologies' / 'dumbbell.py'}}}\nbackend: netns\n"
        f"matrix:\n  transport: [quic, tcp]\n  workload.object: [{objects}]\n  stress.load: [{loads}]\n"
        "repetitions: 500\norder: random\nseed: 3\n"
    )
    return path


@pytest.fixture
def runs_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many Run objects the run sequence makes (one counter, increased per run)."""
    made = [0]

    def counted(*arguments: Any) -> Run:
        made[0] += 1
        return Run(*arguments)

    monkeypatch.setattr(experiment_module, "Run", counted)
    return made


def test_ten_million_runs_are_sized_estimated_and_refused_without_being_made(
    huge_experiment: Path, runs_made: list[int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", str(huge_experiment), "--dry-run", "--repetitions", "1"]) == 0  # imports what it needs
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(["run", str(huge_experiment), "--dry-run"]) == 0
        summary = capsys.readouterr().out
        assert main(["run", str(huge_experiment), "--dry-run", "--shard", "2/7", "--shard-by", "workload.object"]) == 0
        sharded = capsys.readouterr().out
        assert main(["run", str(huge_experiment), "--out", str(tmp_path / "out")]) == 1
        refusal = capsys.readouterr().err
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "20000 cell(s) x 500 repetition(s) = 10000000 runs, order random (seed 3)" in summary
    assert "at most 333333.3 h" in summary and "not listed one by one" in summary
    sizes = [int(n) for n in sharded.split("runs per shard (1..7): ")[1].splitlines()[0].split(", ")]
    assert sum(sizes) == HUGE_RUNS and "shard 2/7 (by workload.object): 1500000 of the 10000000 runs" in sharded
    assert f"{HUGE_RUNS} runs" in refusal and "add --yes" in refusal and not (tmp_path / "out").exists()
    assert runs_made[0] == 0, "no run is made to size, estimate or refuse a plan"
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MiB to size a plan"


def test_a_run_of_ten_million_is_computed_from_its_position(huge_experiment: Path, runs_made: list[int]) -> None:
    from quicbed.spec.experiment import load_experiment

    exp = load_experiment(huge_experiment, {"order": "round-robin"})
    plan = Plan.of(exp, "netns", Shard(3, 4, "run"))
    assert len(plan.every_run) == HUGE_RUNS and plan.large and plan.large_here and len(plan.runs) == HUGE_RUNS // 4
    last = plan.every_run[HUGE_RUNS - 1]
    assert (last.run_id, last.repetition, last.cell) == (
        "c19999-r500",
        500,
        {"transport": "tcp", "workload.object": "100kB", "stress.load": 99},
    )
    first_of_shard = next(iter(plan.runs))
    assert first_of_shard.index == 2 and runs_made[0] == 1 + 3  # the last run, then the shard's first three
    assert "10000000 runs" in summary_lines(plan)[0] and "2500000 of the 10000000 runs" in summary_lines(plan)[0]
    assert LARGE_PLAN < HUGE_RUNS
