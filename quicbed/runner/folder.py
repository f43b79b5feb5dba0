"""A results folder: the lock, metadata.json, results.jsonl and the run folders (docs/results.md).

Nothing already written is ever rewritten in place: a run folder is built as
``runs/.ID.partial`` and renamed when complete, ``results.jsonl`` only grows by whole
lines, ``metadata.json`` is replaced atomically (temp file + rename).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from quicbed.errors import QuicbedError

RESULTS = "results.jsonl"
METADATA = "metadata.json"
EXPERIMENT_COPY = "experiment.yaml"
LOCK = ".lock"


def write_json_atomic(path: Path, data: Any) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(temporary, path)


def read_results(path: Path) -> list[dict[str, Any]]:
    """The lines of a results.jsonl; a torn last line (a crash while appending) is ignored."""
    if not path.exists():
        return []
    records = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                print(f"warning: {path}:{number}: incomplete last line ignored", file=sys.stderr)
                continue
            raise QuicbedError(f"{path}:{number}: not a JSON line (the file was edited or damaged)") from None
    return records


def latest_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per run id, in first-seen order: a run made again (an invalid run's rerun,
    a resumed or retried run) appends a line that supersedes its earlier ones."""
    by_id: dict[str, dict[str, Any]] = {}
    for record in records:
        by_id[record["run_id"]] = record
    return list(by_id.values())


class ResultsFolder:
    """One experiment's results folder, locked for the lifetime of this object."""

    def __init__(self, path: Path, experiment_file: Path, *, resume: bool) -> None:
        self.path = path
        self.runs_dir = path / "runs"
        self.results_path = path / RESULTS
        self.metadata_path = path / METADATA
        if path.exists() and not path.is_dir():
            raise QuicbedError(f"{path} is a file, not a results folder (fix: choose another --out)")
        existing = path.exists() and any(path.iterdir())
        if existing and not resume:
            raise QuicbedError(f"{path} exists and is not empty; results are never overwritten "
                               "(fix: choose another --out, or add --resume to continue that experiment)")
        if resume and not (path / RESULTS).exists() and not (path / METADATA).exists():
            raise QuicbedError(f"{path} holds no interrupted experiment to resume (no {METADATA}) "
                               "(fix: drop --resume, or give the folder of the interrupted run with --out)")
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = (path / LOCK).open("a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise QuicbedError(f"another experiment is writing into {path} right now (fix: wait for it, or "
                               "choose another --out)") from None
        if resume:
            self._check_same_experiment(experiment_file)
        else:
            shutil.copyfile(experiment_file, path / EXPERIMENT_COPY)
        self._drop_partial_runs()

    def _check_same_experiment(self, experiment_file: Path) -> None:
        copy = self.path / EXPERIMENT_COPY
        if copy.exists() and copy.read_bytes() != experiment_file.read_bytes():
            raise QuicbedError(f"{experiment_file} differs from the experiment that wrote {self.path} "
                               f"({copy}); resuming would mix two experiments (fix: resume with {copy})")

    def _drop_partial_runs(self) -> None:
        """Runs interrupted last time left a ``.partial`` folder: it is not a result."""
        for partial in self.runs_dir.glob(".*.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    # -- runs ------------------------------------------------------------------------------
    def finished(self) -> dict[str, dict[str, Any]]:
        """Runs already recorded, by run id (their folder must exist, too; the last line of a
        run made again counts)."""
        return {r["run_id"]: r for r in latest_records(read_results(self.results_path))
                if (self.path / r.get("folder", f"runs/{r['run_id']}")).is_dir()}

    def begin_run(self, run_id: str) -> Path:
        """The partial folder of a run about to be made; an earlier attempt's folder (a failed run
        made again, or a folder whose line never got written) moves to ``attempts/``."""
        self.set_aside(run_id)
        partial = self.runs_dir / f".{run_id}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        return partial

    def commit_run(self, run_id: str, partial: Path, record: dict[str, Any]) -> Path:
        """Write run.json, move the folder into place, then append the results line."""
        final = self.runs_dir / run_id  # free: begin_run moved any earlier attempt away
        # paths into the run's folder are kept relative to it: the partial name goes away
        text = json.dumps({**record, "folder": f"runs/{run_id}"}, default=str).replace(f"{partial}/", "")
        record = json.loads(text)
        (partial / "run.json").write_text(json.dumps(record, indent=1) + "\n")
        os.replace(partial, final)
        line = json.dumps({k: v for k, v in record.items() if k != "details"}, separators=(",", ":"))
        # one write(2) of a whole line with O_APPEND: readers never see half a line
        fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return final

    def set_aside(self, run_id: str) -> Path | None:
        """Move a recorded run's folder to ``attempts/`` before the run is made again
        (its results line stays; the new line, appended later, supersedes it)."""
        final = self.runs_dir / run_id
        if not final.exists():
            return None
        attempts = self.path / "attempts"
        attempts.mkdir(exist_ok=True)
        number = 1 + sum(1 for _ in attempts.glob(f"{run_id}-*"))
        target = attempts / f"{run_id}-{number}"
        os.replace(final, target)
        return target

    def abandon_run(self, partial: Path) -> None:
        shutil.rmtree(partial, ignore_errors=True)

    # -- metadata ----------------------------------------------------------------------------
    def read_metadata(self) -> dict[str, Any]:
        if not self.metadata_path.exists():
            return {}
        return json.loads(self.metadata_path.read_text())

    def write_metadata(self, metadata: dict[str, Any]) -> None:
        write_json_atomic(self.metadata_path, metadata)

    def close(self) -> None:
        if not self._lock_file.closed:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
