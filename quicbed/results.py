"""The run record: one line of a results folder's ``results.jsonl`` (docs/results.md), its
format version, and the one reader every consumer uses (the runner, --resume, merge, the
labs and the report)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from quicbed.errors import QuicbedError

RESULTS_FILE = "results.jsonl"
#: the format of results.jsonl and metadata.json this quicbed writes; folders written before
#: records carried one are version 1
FORMAT_VERSION = 1
#: a run's CPU state until its CPU accounting is read ("not CPU-bound" rests on figures)
NO_CPU_RECORD = "no CPU record"


@dataclass
class RunRecord:
    """Every key of a run's line, with its value before the run fills it in."""

    run_id: str
    index: int
    cell_index: int
    cell: dict[str, Any]
    repetition: int
    warmup: bool
    #: ok, failed (error says why) or invalid (invalid_reasons say why)
    status: str = "ok"
    error: str | None = None
    invalid_reasons: list[str] = field(default_factory=list)
    transport: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    competitor: dict[str, Any] | None = None
    client: str | None = None
    server: str | None = None
    backend: str | None = None
    #: real (the host's clock) or virtual (User-Mode Linux's time travel, docs/clocks.md)
    clock: str = "real"
    #: the kernel the run's network ran on (uname -r)
    kernel: str | None = None
    #: the machine the run ran on (its hostname; a guest's host for the microVM and virtual time)
    host: str | None = None
    #: epoch seconds
    started: float | None = None
    finished: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    attempt: int = 1
    earlier_attempts: list[dict[str, Any]] = field(default_factory=list)
    #: why the run was CPU-bound, or why its CPU state is unknown (empty: neither)
    cpu_bound_reasons: list[str] = field(default_factory=list)
    cpu_unknown_reasons: list[str] = field(default_factory=lambda: [NO_CPU_RECORD])
    #: the run's folder, relative to the results folder
    folder: str | None = None
    format: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


RECORD_FIELDS = tuple(f.name for f in fields(RunRecord))


def record_version(record: dict[str, Any]) -> int:
    version = record.get("format", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def check_version(version: int, where: str) -> None:
    """Refuse what a newer quicbed wrote: its fields may mean something this one cannot tell."""
    if version > FORMAT_VERSION:
        raise QuicbedError(f"{where} was written in results format {version}; this quicbed reads up to format "
                           f"{FORMAT_VERSION} (fix: read it with the quicbed that wrote it, or a newer one)")


def read_records(path: Path, *, strict: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The run records of a results.jsonl in file order, and what was said about its lines.

    A last line that does not parse is a run being appended (or a write a kill cut short):
    always left out, with a warning. A bad line before it is an error when ``strict`` (the
    runner, --resume, merge, the labs: a folder they would build on), a warning otherwise (the
    report shows the rest). A line written in a newer format is an error either way.
    """
    if not path.exists():
        return [], []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            last = all(not rest.strip() for rest in lines[number:])
            if last:
                warnings.append(f"{path}: line {number} is truncated (a run being written or an interrupted "
                                "write); ignored")
                continue
            problem = f"{path}: line {number} is not JSON ({error.msg})"
            if strict:
                raise QuicbedError(f"{problem} (the file was edited or damaged; fix: restore it, or remove that "
                                   "line to make the run again with --resume)") from None
            warnings.append(f"{problem}; ignored")
            continue
        if not isinstance(record, dict) or not record.get("run_id"):
            problem = f"{path}: line {number} is not a run record (no run_id)"
            if strict:
                raise QuicbedError(problem)
            warnings.append(f"{problem}; ignored")
            continue
        check_version(record_version(record), f"{path}: line {number}")
        records.append(record)
    return records, warnings
