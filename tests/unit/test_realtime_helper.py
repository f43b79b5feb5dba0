"""Measurements made again while the channel did not keep time (tests/realtime.py)."""

from __future__ import annotations

import pytest

from quicbed.errors import MachineBusy
from realtime import Steal, in_real_time


def quiet() -> tuple[float, float]:
    return (0.0, 0.0)  # the machine is quiet at once: no wait between attempts


def stolen(*shares: float) -> type[Steal]:
    """A steal meter that reads these shares, one per attempt."""
    readings = iter(shares)

    class Meter(Steal):
        def __exit__(self, *args: object) -> None:
            self.share = next(readings)

    return Meter


def test_the_first_measurement_in_time_is_kept_with_the_reasons_before_it() -> None:
    verdicts = iter([["behind 5 ms"], [], ["never asked"]])
    made = []

    def measure(attempt: int) -> tuple[int, list[str]]:
        made.append(attempt)
        return attempt * 10, next(verdicts)

    assert in_real_time(measure, "download", quiet=quiet) == (20, [["behind 5 ms"]])
    assert made == [1, 2]


def test_no_measurement_in_time_fails_naming_every_reason() -> None:
    # one of the attempts had the machine to itself: the channel, not the hypervisor, was late
    with pytest.raises(AssertionError, match=r"none of 2 attempts at the download: \[\['a'\], \['b'\]\]"):
        in_real_time(
            lambda attempt: (attempt, ["a" if attempt == 1 else "b"]),
            "download",
            attempts=2,
            quiet=quiet,
            meter=stolen(0.09, 0.004),
        )


def test_no_measurement_in_time_while_the_hypervisor_took_cpu_in_each_skips_saying_so() -> None:
    with pytest.raises(
        MachineBusy,
        match=r"the hypervisor took 2\.0%-9\.2% of the CPU time during each "
        r"of the 2 attempts at the download",
    ):
        in_real_time(
            lambda attempt: (attempt, ["behind"]), "download", attempts=2, quiet=quiet, meter=stolen(0.092, 0.02)
        )


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
