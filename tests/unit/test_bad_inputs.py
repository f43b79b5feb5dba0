"""The bad-input corpus (tests/fixtures/bad-inputs/): each case runs a quicbed command line in a
scratch copy of the corpus's input files and must end with the documented exit status and its
error fragment, print no traceback, and leave nothing behind: no file created or changed in its
working folder, no quicbed-* folder in the temporary directory, no network namespace.

The cases are data (cases.yaml; the README there says how to add one). A Python process costs
about half a second to start, so the cases run in a few worker processes (this file, run as a
script), each calling the command's entry point once per case as ``python -m`` would, in the
case's folder and environment; the first case of every module also runs as a real
``python -m`` subprocess, which must end the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import shutil
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "bad-inputs"
INPUTS = CORPUS / "inputs"
#: a worker is stopped after this long: bad inputs must be refused, not worked on
WORKER_TIMEOUT = 300
CASE_FIELDS = {"id", "argv", "status", "error", "env", "module"}


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    status: int
    error: str
    env: dict[str, str]
    module: str = "quicbed"


@dataclass
class Outcome:
    status: int | None
    output: str
    created: list[str]
    changed: list[str]
    seconds: float = 0.0


def load_cases() -> list[Case]:
    import yaml

    entries: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text())
    cases = []
    for entry in entries:
        unknown = set(entry) - CASE_FIELDS
        assert not unknown, f"case {entry.get('id')}: unknown field(s) {sorted(unknown)}"
        cases.append(
            Case(
                entry["id"],
                [str(word) for word in entry["argv"]],
                int(entry["status"]),
                str(entry["error"]),
                {k: str(v) for k, v in (entry.get("env") or {}).items()},
                entry.get("module", "quicbed"),
            )
        )
    return cases


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` (bytecode caches aside) with its size and modification time."""
    found = {}
    for path in folder.rglob("*"):
        if "__pycache__" not in path.parts:
            stat = path.lstat()
            found[str(path.relative_to(folder))] = (stat.st_size if path.is_file() else -1, stat.st_mtime_ns)
    return found


def prepare(work: Path) -> Path:
    """A fresh copy of the corpus's inputs: a case's working folder."""
    shutil.copytree(INPUTS, work, symlinks=True)
    return work


def compare(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[list[str], list[str]]:
    created = sorted(set(after) - set(before))
    changed = sorted(path for path in before if path in after and after[path] != before[path])
    return created, changed


def case_environment(case: Case, work: Path) -> dict[str, str]:
    return {name: value.replace("{cwd}", str(work)) for name, value in case.env.items()}


# --------------------------------------------------------------------------- in a worker process


def _call_entry_point(module: str, argv: list[str]) -> int:
    """What ``python -m MODULE ARGV`` does, in this process: its exit status, and an uncaught
    exception printed as Python prints it."""
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - what the interpreter would print and exit 1 with
        traceback.print_exc()
        return 1
    return 0


def run_in_worker(case: Case, work: Path) -> Outcome:
    before = snapshot(work)
    saved_environment, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(case_environment(case, work))
    output = io.StringIO()
    started = time.monotonic()
    try:
        os.chdir(work)
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            status = _call_entry_point(case.module, case.argv)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environment)
    return Outcome(status, output.getvalue(), *compare(before, snapshot(work)), time.monotonic() - started)


def worker(job: Path) -> None:
    """Run the cases listed in ``job`` (JSON), each in the worker's copy of the inputs (made again
    after a case that changed it), and write their outcomes beside it."""
    task = json.loads(job.read_text())
    work = Path(task["folder"])
    outcomes = {}
    for entry in task["cases"]:
        case = Case(**entry)
        outcome = outcomes[case.id] = run_in_worker(case, work)
        if outcome.created or outcome.changed:
            shutil.rmtree(work)
            prepare(work)
    job.with_suffix(".out").write_text(json.dumps({name: asdict(outcome) for name, outcome in outcomes.items()}))


# --------------------------------------------------------------------------- from the test session


def _environment(scratch: Path) -> dict[str, str]:
    # wide, plain output: a fragment is never cut by a line wrap; a temporary directory of the
    # corpus's own, where anything left is the corpus's (other tests may run at the same time);
    # bytecode writing on, as for most users, so a __pycache__ left beside their file shows
    inherited = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {
        **inherited,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "TMPDIR": str(scratch / "tmp"),
    }


def networks_of(pids: set[int]) -> list[str]:
    """The networks whose quicbed record (quicbed clean's records) names one of ``pids`` as owner."""
    records = Path("/run/quicbed/networks")
    owned = []
    for record in records.glob("*.json") if records.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record.read_text()).get("owner_pid") in pids:
                owned.append(record.stem)
    return owned


def run_workers(cases: list[Case], scratch: Path, count: int, pids: set[int]) -> dict[str, Outcome]:
    jobs = []
    for number in range(count):
        job = scratch / f"job-{number}.json"
        folder = prepare(scratch / f"worker-{number}")
        job.write_text(json.dumps({"folder": str(folder), "cases": [asdict(c) for c in cases[number::count]]}))
        jobs.append(job)
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, str(job)], cwd=scratch, env=_environment(scratch), stdin=subprocess.DEVNULL
        )
        for job in jobs
    ]
    pids.update(process.pid for process in processes)
    for process in processes:
        assert process.wait(timeout=WORKER_TIMEOUT) == 0, "a corpus worker failed (its output is above)"
    outcomes: dict[str, Outcome] = {}
    for job in jobs:
        outcomes.update(
            {name: Outcome(**value) for name, value in json.loads(job.with_suffix(".out").read_text()).items()}
        )
    return outcomes


def run_as_command(case: Case, work: Path, scratch: Path, pids: set[int]) -> Outcome:
    """The case as a user types it: ``python -m MODULE ARGV`` in its own process."""
    before = snapshot(work)
    with subprocess.Popen(
        [sys.executable, "-m", case.module, *case.argv],
        cwd=work,
        stdin=subprocess.DEVNULL,
        env={**_environment(scratch), **case_environment(case, work)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        pids.add(process.pid)
        out, err = process.communicate(timeout=WORKER_TIMEOUT)
    return Outcome(process.returncode, out + err, *compare(before, snapshot(work)))


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
    sys.exit(0)


import pytest  # noqa: E402 - the worker above runs without pytest

CASES = load_cases()
#: the first case of each module also runs as a real command
AS_COMMANDS = list(
    {case.module + case.argv[0] if case.argv else case.module: case for case in reversed(CASES)}.values()
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case's outcome, and each command-run case's outcome under "command:ID"."""
    scratch = tmp_path_factory.mktemp("bad-inputs")
    (scratch / "tmp").mkdir()
    pids: set[int] = set()
    found = run_workers(CASES, scratch, max(2, os.cpu_count() or 1), pids)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        ran = pool.map(
            lambda case: run_as_command(case, prepare(scratch / "commands" / case.id), scratch, pids), AS_COMMANDS
        )
        found.update({f"command:{case.id}": outcome for case, outcome in zip(AS_COMMANDS, ran)})
    left = sorted(path.name for path in (scratch / "tmp").iterdir())
    assert not left, f"the corpus left {left} in its temporary directory"
    assert not networks_of(pids), f"the corpus left networks behind: {networks_of(pids)}"
    shutil.rmtree(scratch)
    return found


def _check(case: Case, outcome: Outcome) -> None:
    shown = f"{case.module} {' '.join(case.argv)}\n{outcome.output}"
    assert "Traceback" not in outcome.output, shown
    assert outcome.status == case.status, shown
    assert case.error in outcome.output, shown
    assert not outcome.created, f"created {outcome.created}\n{shown}"
    assert not outcome.changed, f"changed {outcome.changed}\n{shown}"


def test_the_corpus_is_large_and_its_ids_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) >= 100 and len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_bad_input_is_refused_plainly(case: Case, outcomes: dict[str, Outcome]) -> None:
    _check(case, outcomes[case.id])


@pytest.mark.parametrize("case", AS_COMMANDS, ids=[case.id for case in AS_COMMANDS])
def test_the_entry_point_refuses_it_the_same_way(case: Case, outcomes: dict[str, Outcome]) -> None:
    _check(case, outcomes[f"command:{case.id}"])
