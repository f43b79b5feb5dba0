"""Measurements made again while the channel did not keep time (tests/realtime.py)."""

from __future__ import annotations

import pytest

from realtime import Steal, in_real_time

QUIET = (lambda: (0.0, 0.0))  # the machine is quiet at once: no wait between attempts


def test_the_first_measurement_in_time_is_kept_with_the_reasons_before_it() -> None:
    verdicts = iter([["behind 5 ms"], [], ["never asked"]])
    made = []

    def measure(attempt: int) -> tuple[int, list[str]]:
        made.append(attempt)
        return attempt * 10, next(verdicts)

    assert in_real_time(measure, "download", quiet=QUIET) == (20, [["behind 5 ms"]])
    assert made == [1, 2]


def test_no_measurement_in_time_fails_naming_every_reason() -> None:
    with pytest.raises(AssertionError, match=r"none of 2 attempts at the download: \[\['a'\], \['b'\]\]"):
        in_real_time(lambda attempt: (attempt, ["a" if attempt == 1 else "b"]), "download", attempts=2,
                     quiet=QUIET)


def test_steal_is_a_share_of_this_machines_cpu_time_over_the_block() -> None:
    with Steal() as steal:
        sum(range(200_000))
    assert 0.0 <= steal.share <= 1.0
    assert steal.reasons(limit=1.0) == []
    steal.share = 0.034
    assert steal.reasons(limit=0.01) == ["the hypervisor took 3.4% of the CPU time (steal)"]


def test_an_attempt_made_again_waits_for_the_hypervisor_and_says_so() -> None:
    verdicts = iter([["behind 5 ms"], []])
    result, earlier = in_real_time(lambda attempt: (attempt, next(verdicts)), "download", quiet=lambda: (12.0, 0.004))
    assert result == 2
    assert earlier == [["behind 5 ms", "then waited 12 s for the hypervisor to take less than 1% (last 0.4%)"]]
