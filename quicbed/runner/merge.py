"""One results folder from the folders of an experiment's shards (``quicbed merge``).

Shards are the folders ``quicbed run --shard K/N`` wrote, usually on different machines.
They merge only when they ran the same experiment file with the same settings and the
same code (``force`` turns these refusals into warnings kept in the metadata); a run id
found in two shards is always refused, since nothing says which one counts. The merged
folder has every shard's run folders (hard links where the file system allows, else
copies), their results lines in run order, and metadata that lists each shard with its
host, kernel, tool versions, code and calibration. It is built beside ``out`` and renamed
into place, so a failed merge leaves nothing behind and the shards are never changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicbed import atomic
from quicbed.errors import QuicbedError
from quicbed.results import RunRecord
from quicbed.runner.fingerprint import differences as fingerprint_differences
from quicbed.runner.folder import (
    EXPERIMENT_COPY,
    LOCK,
    METADATA,
    RESULTS,
    read_results,
    write_json_atomic,
    write_text_atomic,
)
from quicbed.spec.experiment import Run

#: metadata.json keys of the resolved experiment that may differ between shards
PER_SHARD_KEYS = ("runs",)


@dataclass
class ShardFolder:
    path: Path
    metadata: dict[str, Any]
    experiment_file: bytes
    records: list[RunRecord]  # every line, in the order written

    @property
    def run_ids(self) -> list[str]:
        return list(dict.fromkeys(record.run_id for record in self.records))

    @property
    def shard(self) -> dict[str, Any] | None:
        return self.metadata.get("shard")

    def describe(self) -> str:
        shard = self.shard
        split = f"shard {shard['index']}/{shard['count']} by {shard['by']}" if shard else "unsharded"
        return f"{self.path} ({split})"


@dataclass
class MergeResult:
    out: Path
    shards: list[ShardFolder]
    expected: list[str]
    present: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        present = set(self.present)
        return [run_id for run_id in self.expected if run_id not in present]


@contextlib.contextmanager
def holding(path: Path) -> Iterator[None]:
    """The shard folder's lock, held while the merge reads and copies it, so that no resumed
    experiment writes into it meanwhile (a folder without a lock file is not being written)."""
    lock = path / LOCK
    if not lock.exists():
        yield
        return
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise QuicbedError(
                f"{path} is being written by a running experiment (fix: wait until it has finished)"
            ) from None
        yield


def read_shard(path: Path) -> ShardFolder:
    for name in (METADATA, EXPERIMENT_COPY):
        if not (path / name).is_file():
            raise QuicbedError(
                f"{path} is not a results folder of 'quicbed run' (no {name}) (fix: give the "
                "folders that 'quicbed run --shard K/N' wrote)"
            )
    try:
        metadata = json.loads((path / METADATA).read_text())
    except ValueError as error:
        raise QuicbedError(f"{path / METADATA} is not JSON ({error})") from None
    if not isinstance(metadata, dict):
        raise QuicbedError(
            f"{path / METADATA} is not a JSON object (fix: give the folders that "
            "'quicbed run --shard K/N' wrote; this file was edited or damaged)"
        )
    _check_experiment(path / METADATA, metadata.get("experiment"))
    return ShardFolder(path, metadata, (path / EXPERIMENT_COPY).read_bytes(), read_results(path / RESULTS))


def _check_experiment(path: Path, experiment: Any) -> None:
    """What the merge counts on in metadata.json's ``experiment``: its cells and run counts."""
    experiment = experiment if isinstance(experiment, dict) else {}
    cells = experiment.get("cells", [{}])
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise QuicbedError(
            f"{path}: experiment.cells is not a list of cells (fix: the file was edited or damaged; "
            "merge the folders 'quicbed run --shard K/N' wrote)"
        )
    for key, low in (("repetitions", 1), ("warmup", 0)):
        value = experiment.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise QuicbedError(
                f"{path}: experiment.{key} is {value!r}, not a whole number >= {low} (fix: the file "
                "was edited or damaged; merge the folders 'quicbed run --shard K/N' wrote)"
            )


def expected_run_ids(metadata: dict[str, Any]) -> list[str]:
    """Every run id of the whole (unsharded) experiment, from its resolved description."""
    experiment = metadata.get("experiment") or {}
    cells = experiment.get("cells") or [{}]
    repetitions, warmup = int(experiment.get("repetitions", 1)), int(experiment.get("warmup", 0))
    ids = [Run(0, c, cell, r, True).run_id for r in range(1, warmup + 1) for c, cell in enumerate(cells)]
    return ids + [Run(0, c, cell, r, False).run_id for r in range(1, repetitions + 1) for c, cell in enumerate(cells)]


def _settings(shard: ShardFolder) -> dict[str, Any]:
    experiment = shard.metadata.get("experiment") or {}
    return {key: value for key, value in experiment.items() if key not in PER_SHARD_KEYS}


def _code(shard: ShardFolder) -> tuple[Any, Any]:
    git = shard.metadata.get("git") or {}
    return (git.get("commit"), (shard.metadata.get("versions") or {}).get("quicbed"))


def differences(shards: list[ShardFolder]) -> list[str]:
    """Why these shards are not parts of one experiment (empty when they are)."""
    first, problems = shards[0], []
    for other in shards[1:]:
        if other.experiment_file != first.experiment_file:
            problems.append(
                f"{other.path} ran another experiment file than {first.path} (their experiment.yaml differ)"
            )
        elif _settings(other) != _settings(first):
            changed = sorted(
                key
                for key in set(_settings(other)) | set(_settings(first))
                if _settings(other).get(key) != _settings(first).get(key)
            )
            problems.append(
                f"{other.path} ran the experiment with other settings than {first.path} "
                f"({', '.join(changed)} differ: --set, -p or --backend)"
            )
        before, now = first.metadata.get("fingerprint"), other.metadata.get("fingerprint")
        if before and now:
            changed = fingerprint_differences(before, now)
            if changed:
                problems.append(
                    f"{other.path} ran with other code, tools, traces or kernel than {first.path} "
                    f"({'; '.join(changed)})"
                )
        elif _code(other) != _code(first):  # folders of a quicbed that recorded no fingerprint
            problems.append(
                f"{other.path} ran other code than {first.path} (commit {_code(other)[0]}, quicbed "
                f"{_code(other)[1]} against commit {_code(first)[0]}, quicbed {_code(first)[1]})"
            )
    splits = {((s.shard or {}).get("count"), (s.shard or {}).get("by"), (s.shard or {}).get("split")) for s in shards}
    if len(splits) > 1:
        problems.append("the folders come from different splits (" + ", ".join(s.describe() for s in shards) + ")")
    problems += [
        f"{shard.path} mixes fingerprints already (resumed with --force: "
        f"{'; '.join(shard.metadata['mixed_fingerprints'])})"
        for shard in shards
        if shard.metadata.get("mixed_fingerprints")
    ]
    problems += [
        f"{shard.path} has uncommitted code changes (git status was not clean)"
        for shard in shards
        if (shard.metadata.get("git") or {}).get("dirty")
    ]
    return problems


def duplicates(shards: list[ShardFolder]) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for shard in shards:
        for run_id in shard.run_ids:
            found.setdefault(run_id, []).append(shard.path)
    return {run_id: paths for run_id, paths in found.items() if len(paths) > 1}


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _shard_entry(shard: ShardFolder) -> dict[str, Any]:
    metadata = shard.metadata
    return {
        "folder": str(shard.path.resolve()),
        "shard": shard.shard,
        "runs": len(shard.run_ids),
        "status": metadata.get("status"),
        "started": metadata.get("started"),
        "finished": metadata.get("finished"),
        "host": metadata.get("host"),
        "versions": metadata.get("versions"),
        "git": metadata.get("git"),
        "calibration": metadata.get("calibration"),
        "backend": metadata.get("backend"),
    }


def _merged_metadata(shards: list[ShardFolder], result: MergeResult, force: bool) -> dict[str, Any]:
    first = shards[0].metadata
    hostnames = list(dict.fromkeys(str((s.metadata.get("host") or {}).get("hostname")) for s in shards))
    started = [s.metadata["started"] for s in shards if isinstance(s.metadata.get("started"), (int, float))]
    finished = [s.metadata["finished"] for s in shards if isinstance(s.metadata.get("finished"), (int, float))]
    complete = not result.missing and all(s.metadata.get("status") == "complete" for s in shards)
    return {
        **{key: value for key, value in first.items() if key not in ("shard", "calibration")},
        "host": {**(first.get("host") or {}), "hostname": ", ".join(hostnames), "hosts": len(hostnames)},
        "started": min(started) if started else None,
        "finished": max(finished) if finished else None,
        "status": "complete" if complete else "incomplete",
        "sessions": [{**session, "shard": s.shard} for s in shards for session in s.metadata.get("sessions", [])],
        "shards": [_shard_entry(s) for s in shards],
        "merged": {
            "runs": len(result.present),
            "expected": len(result.expected),
            "missing": result.missing,
            "force": force,
            "warnings": result.warnings,
        },
    }


def merge(folders: list[Path], out: Path, force: bool = False) -> MergeResult:
    if not folders:
        raise QuicbedError("nothing to merge (fix: give the shard folders, e.g. quicbed merge shards/* --out DIR)")
    if any(folder.resolve() == out.resolve() for folder in folders):
        raise QuicbedError(f"--out {out} is one of the shard folders (fix: merge into a new folder)")
    given = [folder.resolve() for folder in folders]
    twice = next((folder for folder, resolved in zip(folders, given) if given.count(resolved) > 1), None)
    if twice is not None:
        raise QuicbedError(f"{twice} is given twice (fix: name each shard's folder once)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise QuicbedError(f"{out} exists; results are never overwritten (fix: choose another --out)")
    with contextlib.ExitStack() as locks:
        for folder in folders:
            if (folder / METADATA).is_file():
                locks.enter_context(holding(folder))
        return _merge_locked([read_shard(folder) for folder in folders], out, force)


def _merge_locked(shards: list[ShardFolder], out: Path, force: bool) -> MergeResult:
    doubled = duplicates(shards)
    if doubled:
        run_id, paths = next(iter(doubled.items()))
        raise QuicbedError(
            f"{len(doubled)} run id(s) are in more than one folder, e.g. {run_id} in "
            f"{', '.join(map(str, paths))}; nothing says which counts (fix: merge each shard once, "
            "and only shards of one split)"
        )
    problems = differences(shards)
    refusals = [p for p in problems if "uncommitted" not in p]
    if refusals and not force:
        raise QuicbedError(
            "these folders are not shards of one experiment:\n  "
            + "\n  ".join(refusals)
            + "\n(fix: run every shard with the same experiment file, options and code; --force "
            "merges them anyway and records why)"
        )
    present = [run_id for shard in shards for run_id in shard.run_ids]
    result = MergeResult(out, shards, expected_run_ids(shards[0].metadata), present, warnings=problems)
    building = out.parent / f".{out.name}.merging-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        (building / "runs").mkdir(parents=True)
        lines: list[RunRecord] = []
        for shard in shards:
            for record in shard.records:
                lines.append(record)
            for run_id in shard.run_ids:
                source = shard.path / "runs" / run_id
                if source.is_dir():
                    shutil.copytree(source, building / "runs" / run_id, copy_function=_link_or_copy)
            if (shard.path / "attempts").is_dir():
                shutil.copytree(
                    shard.path / "attempts", building / "attempts", copy_function=_link_or_copy, dirs_exist_ok=True
                )
        lines.sort(key=lambda record: int(record.index))  # stable: a run's later line stays later
        write_text_atomic(
            building / RESULTS, "".join(json.dumps(r.to_dict(), separators=(",", ":")) + "\n" for r in lines)
        )
        shutil.copyfile(shards[0].path / EXPERIMENT_COPY, building / EXPERIMENT_COPY)
        write_json_atomic(building / METADATA, _merged_metadata(shards, result, force))
        atomic.sync_tree(building)  # copies on disk before the folder appears under its name
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(building, out)
        atomic.sync_folder(out.parent)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return result
