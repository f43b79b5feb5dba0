"""The run record: one line of a results folder's ``results.jsonl`` (docs/results.md), its
format version, and the one reader every consumer uses (the runner, --resume, merge, the
labs and the report), which upgrades older formats to this one."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
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
    #: what a line read from a file holds besides the fields above (an older quicbed's keys, or
    #: added by hand): kept, and written again by :meth:`to_dict`
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: the fields the line it was read from lacked (written before they existed): left out by
    #: :meth:`to_dict` while they hold their default, so a line read and written again is the
    #: same line, and readers can tell "not said" from a default (the report does, e.g. for a
    #: record written before runs said their CPU state)
    absent: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The line's keys and values (copies): every field, then ``extra``."""
        line = asdict(self)
        extra, absent = line.pop("extra"), line.pop("absent")
        for name in absent:
            if name in line and line[name] == _default(name):
                del line[name]
        return {**line, **extra}

    @classmethod
    def from_dict(cls, line: dict[str, Any]) -> RunRecord:
        """A record from a line as written (by any quicbed of this format): the fields it lacks
        take their defaults (and are ``absent``), keys it has that this quicbed does not know
        go to ``extra``. The values are taken as written: readers judge them."""
        known = {name: line[name] for name in RECORD_FIELDS if name in line}
        absent = frozenset(name for name in RECORD_FIELDS if name not in line)
        return cls(
            **{**_read_fallbacks(), **known},
            extra={key: value for key, value in line.items() if key not in RECORD_FIELDS},
            absent=absent,
        )


#: the keys of a line, in order (the bookkeeping fields ``extra`` and ``absent`` are none)
RECORD_FIELDS = tuple(f.name for f in fields(RunRecord) if f.name not in ("extra", "absent"))


def _read_fallbacks() -> dict[str, Any]:
    """What :meth:`RunRecord.from_dict` takes for a field without a default that a line lacks
    (only a hand-made line can: quicbed has written them all since its first format)."""
    return {"run_id": "", "index": 0, "cell_index": 0, "cell": {}, "repetition": 0, "warmup": False}


def _default(name: str) -> Any:
    """The value :meth:`RunRecord.from_dict` gives field ``name`` when a line lacks it."""
    fallbacks = _read_fallbacks()
    if name in fallbacks:
        return fallbacks[name]
    spec = next(f for f in fields(RunRecord) if f.name == name)
    return spec.default_factory() if spec.default_factory is not MISSING else spec.default


def record_version(record: dict[str, Any]) -> int:
    version = record.get("format", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def check_version(version: int, where: str) -> None:
    """Refuse what a newer quicbed wrote: its fields may mean something this one cannot tell."""
    if version > FORMAT_VERSION:
        raise QuicbedError(
            f"{where} was written in results format {version}; this quicbed reads up to format "
            f"{FORMAT_VERSION} (fix: read it with the quicbed that wrote it, or a newer one)"
        )


def upgrade(record: dict[str, Any], version: int) -> dict[str, Any]:
    """A line written in results format ``version`` as a line of this quicbed's format: the
    one place a format change converts older lines (a key renamed, a value re-meant), step by
    step from ``version`` up. Only format 1 exists, so a line is returned as it is; keys
    added within format 1 (``clock``, ``cpu_unknown_reasons``, ...) are left out, not
    invented: :meth:`RunRecord.from_dict` marks them ``absent``. ``version`` is at most
    :data:`FORMAT_VERSION` (:func:`check_version` refused newer ones)."""
    return record


def read_records(path: Path, *, strict: bool) -> tuple[list[RunRecord], list[str]]:
    """The run records of a results.jsonl in file order (each line upgraded to this format),
    and what was said about its lines.

    A last line that does not parse is a run being appended (or a write a kill cut short):
    always left out, with a warning. A bad line before it is an error when ``strict`` (the
    runner, --resume, merge, the labs: a folder they would build on), a warning otherwise (the
    report shows the rest). A line written in a newer format is an error either way. Keys
    this quicbed does not know are kept (``RunRecord.extra``) either way: a key an older
    quicbed wrote is no damage.
    """
    if not path.exists():
        return [], []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records: list[RunRecord] = []
    warnings: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            last = all(not rest.strip() for rest in lines[number:])
            if last:
                warnings.append(
                    f"{path}: line {number} is truncated (a run being written or an interrupted write); ignored"
                )
                continue
            problem = f"{path}: line {number} is not JSON ({error.msg})"
            if strict:
                raise QuicbedError(
                    f"{problem} (the file was edited or damaged; fix: restore it, or remove that "
                    "line to make the run again with --resume)"
                ) from None
            warnings.append(f"{problem}; ignored")
            continue
        if not isinstance(record, dict) or not record.get("run_id"):
            problem = f"{path}: line {number} is not a run record (no run_id)"
            if strict:
                raise QuicbedError(problem)
            warnings.append(f"{problem}; ignored")
            continue
        version = record_version(record)
        check_version(version, f"{path}: line {number}")
        records.append(RunRecord.from_dict(upgrade(record, version)))
    return records, warnings
