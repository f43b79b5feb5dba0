"""An experiment file's measured wall time (``wall_time: {runs: 54, time: 89min, host: ...}``):
how long its runs took where it was written, which the dry run scales to its plan when this
host has no earlier results of the experiment (quicbed.runner.plan.estimate). ``clock:
virtual`` says it was measured in virtual time, whose wall time is another matter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quicbed.errors import SpecError
from quicbed.clocks import CLOCKS, REAL
from quicbed.spec.units import parse_time

EXAMPLE = "wall_time: {runs: 54, time: 89min, host: '2 cores, ns3 backend'}"


@dataclass(frozen=True)
class WallTime:
    runs: int
    seconds: float
    host: str
    clock: str = REAL

    @property
    def per_run(self) -> float:
        return self.seconds / self.runs


def parse_wall_time(raw: Any) -> WallTime | None:
    """The ``wall_time`` field, checked (None when the file states none)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError(f"wall_time must be a mapping, got {raw!r}", field="wall_time", fix=f"write {EXAMPLE}")
    unknown = set(raw) - {"runs", "time", "host", "clock"}
    if unknown or not {"runs", "time"} <= set(raw):
        raise SpecError(
            "wall_time needs runs and time (and may name the host and the clock)"
            + (f", not {sorted(unknown)}" if unknown else ""),
            field="wall_time",
            fix=f"write {EXAMPLE}",
        )
    runs = raw["runs"]
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise SpecError(f"expected a whole number >= 1, got {runs!r}", field="wall_time.runs")
    try:
        seconds = parse_time(raw["time"], "wall_time.time", allow_zero=False)
    except SpecError as error:
        raise SpecError(
            error.message, field="wall_time.time", fix=f"a duration such as 89min or 5340s ({EXAMPLE})"
        ) from None
    clock = raw.get("clock", REAL)
    if clock not in CLOCKS:
        raise SpecError(
            f"expected one of {', '.join(CLOCKS)}, got {clock!r}",
            field="wall_time.clock",
            fix="the clock the runs were measured on: real (the default) or virtual",
        )
    return WallTime(runs, seconds, str(raw.get("host") or "unstated"), clock)
