"""Delivery traces in Mahimahi's format, read, checked, summarised and written.

A trace file lists delivery opportunities, one per line, as whole milliseconds since the
trace's start, in non-decreasing order; each opportunity lets 1500 bytes through, and
several lines with the same time are several opportunities in that millisecond. A link
replays the trace in a loop whose period is the last line's time (so the last time must be
above 0). A constant 12 Mbit/s is one line per millisecond: 1, 2, 3, ...
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quicbed.atomic import replacing
from quicbed.errors import SpecError
from quicbed.paths import SHIPPED_ROOT

BYTES_PER_OPPORTUNITY = 1500
#: the traces quicbed ships (``trace="step-drop.down"`` finds traces/step-drop.down)
SHIPPED_TRACES = SHIPPED_ROOT / "traces"


@dataclass(frozen=True)
class DeliveryTrace:
    """A checked trace file: where it is, and enough about it to describe and compare it."""

    path: str  # absolute
    opportunities: int
    period_ms: int
    digest: str  # sha256 of the file, first 16 hex digits: the same name may hold another trace later

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def mean_rate(self) -> float:
        """bit/s over one period."""
        return self.opportunities * BYTES_PER_OPPORTUNITY * 8 / (self.period_ms / 1000)

    def describe(self) -> str:
        return f"trace {self.name} (mean {self.mean_rate / 1e6:.3g} Mbit/s, repeats every {self.period_ms / 1000:g} s)"


def find_trace(text: str) -> Path | None:
    """A trace named by a path (absolute, or from the working folder) or by the name of a
    shipped one (``step-drop.down`` or ``traces/step-drop.down``)."""
    path = Path(text).expanduser()
    for candidate in (path, SHIPPED_ROOT / path, SHIPPED_TRACES / path):
        if candidate.is_file():
            return candidate.resolve()
    return None


def read_opportunities(path: Path) -> list[int]:
    """The opportunity times (ms) of a trace file; SpecError naming the line that is wrong."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read the trace: {error}", source=str(path)) from None
    times: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            ms = int(line)
        except ValueError:
            raise SpecError(
                f"line {number}: {line.strip()[:40]!r} is not a whole number of milliseconds",
                source=str(path),
                fix="one delivery opportunity per line, e.g. 17",
            ) from None
        if ms < 0:
            raise SpecError(f"line {number}: negative time {ms}", source=str(path))
        if times and ms < times[-1]:
            raise SpecError(
                f"line {number}: {ms} ms comes after {times[-1]} ms",
                source=str(path),
                fix="sort the lines: the times never decrease",
            )
        times.append(ms)
    if not times or times[-1] <= 0:
        raise SpecError(
            "the trace has no delivery opportunity after time 0",
            source=str(path),
            fix="the last line's time is the period the trace repeats with; it must be above 0",
        )
    return times


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int, size: int) -> DeliveryTrace:
    times = read_opportunities(Path(path))
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return DeliveryTrace(path, len(times), times[-1], digest)


def load_trace(raw: object, field: str) -> DeliveryTrace:
    """The trace a link parameter names (a path or a shipped trace's name), checked."""
    if isinstance(raw, DeliveryTrace):
        return raw
    if not isinstance(raw, (str, Path)) or not str(raw).strip():
        raise SpecError(
            f"expected the path of a trace file, got {raw!r}",
            field=field,
            fix="e.g. trace='step-drop.down' (shipped, see traces/) or a Mahimahi trace file",
        )
    path = find_trace(str(raw))
    if path is None:
        shipped = ", ".join(sorted(p.name for p in SHIPPED_TRACES.glob("*") if p.suffix in (".up", ".down")))
        raise SpecError(
            f"no trace file {str(raw)!r} (looked in the working folder and {SHIPPED_TRACES})",
            field=field,
            fix=f"give a trace file's path, or a shipped trace: {shipped or 'none'}",
        )
    stat = path.stat()
    try:
        return _load(str(path), stat.st_mtime_ns, stat.st_size)
    except SpecError as error:
        raise SpecError(error.message, field=field, fix=error.fix, source=error.source) from None


def capacity(times: list[int], bin_ms: int = 1000) -> list[float]:
    """The capacity (bit/s) of each ``bin_ms`` of one period. The opportunity at time t counts
    in the millisecond (t-1, t] that earned it (so a constant trace reads the same rate in every
    bin, and bins line up with a model's steps), and a last bin shorter than ``bin_ms`` is
    measured over its real length (not as a false drop)."""
    period_ms = times[-1]
    counts = [0] * max(1, -(-period_ms // bin_ms))
    for ms in times:
        counts[max(0, ms - 1) // bin_ms] += 1
    rates = [count * BYTES_PER_OPPORTUNITY * 8 / (bin_ms / 1000) for count in counts]
    rates[-1] *= bin_ms / (period_ms - (len(counts) - 1) * bin_ms)
    return rates


def write_trace(path: Path, times: Iterable[int]) -> int:
    """Write a trace file atomically (checked as it is read back); the number of opportunities."""
    lines = [str(int(ms)) for ms in times]
    with replacing(path) as temporary:
        temporary.write_text("\n".join(lines) + "\n")
        read_opportunities(temporary)  # a SpecError leaves the old file as it was
    return len(lines)
