"""A results folder: the lock, metadata.json, results.jsonl and the run folders (docs/results.md).

Nothing already written is ever rewritten in place: a run folder is built as
``runs/.ID.partial`` and renamed when complete, ``results.jsonl`` only grows by whole
lines, ``metadata.json`` is replaced atomically (temp file + rename). When the disk is full
or the folder read-only, a write fails as a :class:`StorageError` naming the path and the
fix, and leaves what was there before: a line that could not be written whole is cut off
again, a temporary file is removed, so ``--resume`` continues once the space is back.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quicbed import atomic
from quicbed.results import RESULTS_FILE, RunRecord, read_records
from quicbed.errors import QuicbedError

RESULTS = RESULTS_FILE
METADATA = "metadata.json"
EXPERIMENT_COPY = "experiment.yaml"
LOCK = ".lock"


class StorageError(QuicbedError):
    """The results folder cannot be written: no space left, read-only, no permission."""


#: errno -> what it means for the results folder, and what to do about it
_STORAGE_PROBLEMS = {
    errno.ENOSPC: ("no space left on the device", "free space there"),
    errno.EDQUOT: ("the disk quota is used up", "free space there or raise the quota"),
    errno.EROFS: ("the file system is read-only", "remount it read-write"),
    errno.EACCES: ("permission denied", "make it writable for this user"),
    errno.EPERM: ("permission denied", "make it writable for this user"),
}


def storage_error(error: BaseException, path: Path | str | None = None) -> StorageError | None:
    """``error`` as a StorageError naming the path and the fix, if it is one (None if not)."""
    if isinstance(error, StorageError):
        return error
    if not isinstance(error, OSError) or error.errno not in _STORAGE_PROBLEMS:
        return None
    problem, fix = _STORAGE_PROBLEMS[error.errno]
    where = error.filename or path
    return StorageError(
        f"cannot write {where}: {problem} (fix: {fix}, or move the folder elsewhere; then continue "
        "the experiment with 'quicbed run --resume --out FOLDER EXPERIMENT': what was written so "
        "far is kept)"
    )


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """Turn a failed write under ``path`` into a StorageError that says why and what to do."""
    try:
        yield
    except OSError as error:
        problem = storage_error(error, path)
        if problem is None:
            raise
        raise problem from None


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` whole, or leave it as it was (no temporary file behind); a
    full disk or a read-only folder is a StorageError naming it."""
    with writing(path):
        atomic.write_text_atomic(path, text)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single write(2) (readers never see half of it); a write the
    device could not take whole (a full disk) is cut off again, so the file ends with a whole
    line and a later append does not glue onto a torn one."""
    data = (line + "\n").encode()
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def repair_torn_end(path: Path) -> Path | None:
    """Cut a file of lines back to its last newline, keeping the cut bytes beside it (in
    ``NAME.torn-N``); returns that file, or None when the file ends with a whole line.

    A power loss or a crashed guest kernel can leave results.jsonl without its final newline.
    The next append would glue its line onto the torn one and a reader would drop both as one
    unparsable last line, silently losing a run (seen after a resume)."""
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    number = 1 + sum(1 for _ in path.parent.glob(f"{path.name}.torn-*"))
    torn = path.with_name(f"{path.name}.torn-{number}")
    with writing(torn), atomic.replacing(torn) as temporary:
        temporary.write_bytes(data[keep:])
    with writing(path):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
    return torn


def read_results(path: Path) -> list[RunRecord]:
    """The records of a results.jsonl, strictly (quicbed.results.read_records): a torn last
    line is left out with a warning on stderr, a damaged one before it is an error."""
    records, warnings = read_records(path, strict=True)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return records


def latest_records(records: list[RunRecord]) -> list[RunRecord]:
    """One record per run id, in first-seen order: a run made again (an invalid run's rerun,
    a resumed or retried run) appends a line that supersedes its earlier ones."""
    by_id: dict[str, RunRecord] = {}
    for record in records:
        by_id[record.run_id] = record
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
            raise QuicbedError(
                f"{path} exists and is not empty; results are never overwritten "
                "(fix: choose another --out, or add --resume to continue that experiment)"
            )
        if resume and not (path / RESULTS).exists() and not (path / METADATA).exists():
            raise QuicbedError(
                f"{path} holds no interrupted experiment to resume (no {METADATA}) "
                "(fix: drop --resume, or give the folder of the interrupted run with --out)"
            )
        new = not path.exists()
        try:
            with writing(path):
                self.runs_dir.mkdir(parents=True, exist_ok=True)
                self._lock_file = (path / LOCK).open("a+")
        except StorageError:
            if new:  # a folder that holds nothing yet must not stand in the way of a second try
                shutil.rmtree(path, ignore_errors=True)
            raise
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise QuicbedError(
                f"another experiment is writing into {path} right now (fix: wait for it, or choose another --out)"
            ) from None
        if resume:
            self._check_same_experiment(experiment_file)
            torn = repair_torn_end(self.results_path)
            if torn is not None:
                print(
                    f"warning: {self.results_path} ended in a torn line (an interrupted write); it was cut "
                    f"off and kept in {torn}, and its run is made again",
                    file=sys.stderr,
                )
        else:
            try:
                write_text_atomic(path / EXPERIMENT_COPY, experiment_file.read_text())
            except StorageError:
                self.discard()
                raise
        self._drop_partial_runs()

    def _check_same_experiment(self, experiment_file: Path) -> None:
        copy = self.path / EXPERIMENT_COPY
        if copy.exists() and copy.read_bytes() != experiment_file.read_bytes():
            raise QuicbedError(
                f"{experiment_file} differs from the experiment that wrote {self.path} "
                f"({copy}); resuming would mix two experiments (fix: resume with {copy})"
            )

    def _drop_partial_runs(self) -> None:
        """Runs interrupted last time left a ``.partial`` folder: it is not a result."""
        for partial in self.runs_dir.glob(".*.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    # -- runs ------------------------------------------------------------------------------
    def finished(self) -> dict[str, RunRecord]:
        """Runs already recorded, by run id (their folder must exist, too; the last line of a
        run made again counts)."""
        return {
            r.run_id: r
            for r in latest_records(read_results(self.results_path))
            if (self.path / (r.folder or f"runs/{r.run_id}")).is_dir()
        }

    def begin_run(self, run_id: str) -> Path:
        """The partial folder of a run about to be made; an earlier attempt's folder (a failed run
        made again, or a folder whose line never got written) moves to ``attempts/``."""
        partial = self.runs_dir / f".{run_id}.partial"
        with writing(partial):
            self.set_aside(run_id)
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
        return partial

    def commit_run(self, run_id: str, partial: Path, record: RunRecord, details: dict[str, Any]) -> Path:
        """Write run.json (the record and the run's ``details``), move the folder into place,
        then append the results line (the record alone)."""
        final = self.runs_dir / run_id  # free: begin_run moved any earlier attempt away
        # paths into the run's folder are kept relative to it: the partial name goes away
        text = json.dumps({**record.to_dict(), "folder": f"runs/{run_id}", "details": details}, default=str).replace(
            f"{partial}/", ""
        )
        stored = json.loads(text)
        with writing(partial / "run.json"):
            (partial / "run.json").write_text(json.dumps(stored, indent=1) + "\n")
        line = json.dumps({k: v for k, v in stored.items() if k != "details"}, separators=(",", ":"))
        with writing(final):
            # the folder's files on disk before it is renamed into place, and the rename before
            # the line that says it is a result
            atomic.sync_tree(partial)
            os.replace(partial, final)
            atomic.sync_folder(self.runs_dir)
        try:
            append_line(self.results_path, line)
        except StorageError:
            # without its line the folder is not a result: --resume makes the run again
            with contextlib.suppress(OSError):
                os.replace(final, partial)
            raise
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

    def discard(self) -> None:
        """Remove a new folder before anything was recorded in it (its set-up failed): a folder
        that holds no experiment must not stand in the way of the next try."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> None:
        if not self._lock_file.closed:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
