"""A lab's checks and the score sheet they produce.

A lab's ``checks.py`` holds functions decorated with :func:`check`. Each gets the
:class:`~quicbed.labs.session.CheckSession` and returns a :class:`Verdict`: passed or not,
what it saw and, when that depends on the student's files, what it expected. A check that
cannot run on this machine (a backend or tool is missing) raises :class:`CannotCheck`:
it is skipped with the reason, never failed.

    @check("the bottleneck shapes to the rate you set", needs=["topology_loads"],
           hint="iperf3 measures the slowest link on the path: which link has rate=?")
    def rate_is_shaped(session):
        ...
        return Verdict(low <= measured <= high, seen=f"{measured:.1f} Mbit/s",
                       expected=f"{low:.1f}-{high:.1f} Mbit/s")
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from quicbed.errors import MissingDependency, QuicbedError, SpecError

#: the attribute that marks a function of a lab's checks.py as a check
CHECK_MARK = "__quicbed_lab_check__"
STATUSES = ("pass", "fail", "skip")
#: exit status of ``quicbed lab check``: every check passed / one failed / none failed but
#: some could not run here
EXIT_PASSED, EXIT_FAILED, EXIT_UNCHECKED = 0, 1, 3


class CannotCheck(QuicbedError):
    """This machine cannot run the check (say what is missing and how to get it)."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    seen: str
    expected: str | None = None  # None: the check's declared expectation
    hint: str | None = None  # None: the check's declared hint (shown when it fails)


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    expected: str
    hint: str
    points: int
    needs: tuple[str, ...]
    function: Callable[[Any], Verdict]


def check(
    title: str, *, expected: str = "", hint: str = "", points: int = 1, needs: Sequence[str] = ()
) -> Callable[[Callable[[Any], Verdict]], Callable[[Any], Verdict]]:
    """Mark ``function`` as one of the lab's checks (run in the order they are defined).
    ``needs``: names of checks that must pass first; if one did not, this one fails saying so."""
    if points < 0:
        raise ValueError("points must not be negative")

    def mark(function: Callable[[Any], Verdict]) -> Callable[[Any], Verdict]:
        setattr(function, CHECK_MARK, Check(function.__name__, title, expected, hint, points, tuple(needs), function))
        return function

    return mark


@dataclass
class CheckResult:
    name: str
    title: str
    status: str  # pass, fail, skip
    seen: str
    expected: str
    hint: str
    points: int
    seconds: float

    @property
    def score(self) -> int:
        return self.points if self.status == "pass" else 0


@dataclass
class ScoreSheet:
    """Every check's result for one student folder; ``to_dict`` is the JSON graders read."""

    lab: str
    title: str
    folder: str
    backend: str
    results: list[CheckResult] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for result in self.results if result.status == status)

    @property
    def score(self) -> int:
        return sum(result.score for result in self.results)

    @property
    def total(self) -> int:
        return sum(result.points for result in self.results)

    @property
    def exit_status(self) -> int:
        if self.count("fail"):
            return EXIT_FAILED
        return EXIT_UNCHECKED if self.count("skip") else EXIT_PASSED

    def to_dict(self) -> dict[str, Any]:
        from quicbed import __version__

        return {
            "lab": self.lab,
            "title": self.title,
            "folder": self.folder,
            "backend": self.backend,
            "score": self.score,
            "total": self.total,
            **{status: self.count(status) for status in STATUSES},
            "exit_status": self.exit_status,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 1),
            "quicbed_version": __version__,
            "checks": [{**asdict(result), "score": result.score} for result in self.results],
        }


def _outcome(item: Check, session: Any) -> tuple[str, str, str | None, str | None]:
    """(status, seen, expected, hint) of one check."""
    try:
        verdict = item.function(session)
    except CannotCheck as error:
        return "skip", f"not checked here: {error}", None, None
    except MissingDependency as error:
        return "skip", f"not checked here: {error}", None, None
    except SpecError as error:  # the student's topology or experiment file is invalid
        return "fail", error.render(), None, None
    except QuicbedError as error:  # building or running what the files describe failed
        return "fail", str(error), None, None
    except Exception as error:  # noqa: BLE001 - a fault in the lab's checks: report it, go on
        where = traceback.extract_tb(error.__traceback__)[-1]
        return (
            "fail",
            (
                f"the check itself failed ({type(error).__name__}: {error}, "
                f"{where.filename}:{where.lineno}); tell your teacher"
            ),
            None,
            None,
        )
    if not isinstance(verdict, Verdict):
        return "fail", f"the check returned {verdict!r} instead of a Verdict; tell your teacher", None, None
    return ("pass" if verdict.passed else "fail"), verdict.seen, verdict.expected, verdict.hint


def run_checks(
    checks: Sequence[Check],
    session: Any,
    sheet: ScoreSheet,
    progress: Callable[[int, int, CheckResult | None, Check], None] | None = None,
) -> ScoreSheet:
    """Run ``checks`` in order into ``sheet``; ``progress`` hears of each before and after."""
    began = time.monotonic()
    status_of: dict[str, str] = {}
    for number, item in enumerate(checks, 1):
        if progress:
            progress(number, len(checks), None, item)
        started = time.monotonic()
        unmet = [name for name in item.needs if status_of.get(name) != "pass"]
        expected: str | None
        hint: str | None
        if unmet:
            skipped = any(status_of.get(name) == "skip" for name in unmet)
            status = "skip" if skipped else "fail"
            seen = f"not checked: it needs {', '.join(unmet)} to pass first"
            expected, hint = "", f"make {unmet[0]} pass first"
        else:
            status, seen, expected, hint = _outcome(item, session)
        status_of[item.name] = status
        result = CheckResult(
            item.name,
            item.title,
            status,
            seen,
            expected if expected is not None else item.expected,
            (hint if hint is not None else item.hint) if status == "fail" else "",
            item.points,
            round(time.monotonic() - started, 2),
        )
        sheet.results.append(result)
        if progress:
            progress(number, len(checks), result, item)
    sheet.seconds = time.monotonic() - began
    return sheet
