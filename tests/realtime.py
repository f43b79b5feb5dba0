"""Measurements through the real-time ns-3 channel, made again when it did not keep time.

A test of the channel's model measures the machine instead when the channel fell behind the
wall clock (a hypervisor taking the CPU, another real-time process on its core): TCP's and
QUIC's timers, capture stamps and queue delays all shift. quicbed's runner makes such runs
again (validity.reruns); these tests do the same, with the channel's own judgement
(``mac_stats()["invalid_reasons"]``, or a stricter one a test needs), and fail saying why
when no attempt was in time, or skip saying so when the hypervisor took CPU during each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from quicbed.errors import MachineBusy
from quicbed.host.steal import QUIET_STEAL, Steal, wait_for_quiet_machine

#: measurements made in all before a test gives up: two stalls in a row are rare on a quiet
#: machine, three mean the machine cannot host the channel right now
ATTEMPTS = 3

T = TypeVar("T")


def in_real_time(
    measure: Callable[[int], tuple[T, list[str]]],
    what: str,
    attempts: int = ATTEMPTS,
    quiet: Callable[[], tuple[float, float]] | None = None,
    meter: Callable[[], Steal] | None = None,
) -> tuple[T, list[list[str]]]:
    """``measure(attempt)`` (from 1) returns a result and why the channel did not keep time
    while it was made ([] when it did); the first result made in time, and the reasons the
    attempts before it were made again. Each new attempt waits for a quiet machine first
    (quicbed.host.steal.wait_for_quiet_machine, or ``quiet``). When no attempt was in time and
    the hypervisor took more than QUIET_STEAL of the CPU during every one of them (``meter``
    measures it), MachineBusy says so: the machine, not the channel, was judged."""
    earlier: list[list[str]] = []
    stolen: list[float] = []
    for attempt in range(1, attempts + 1):
        with (meter or Steal)() as steal:
            result, late = measure(attempt)
        if not late:
            return result, earlier
        earlier.append(late)
        stolen.append(steal.share)
        print(f"{what} {attempt} made again: {late}")
        if attempt < attempts:
            waited, share = (quiet or wait_for_quiet_machine)()
            if waited >= 1:  # (a span or two of waiting is no news)
                earlier[-1] = [*late, quiet_note(waited, share)]
    if min(stolen) > QUIET_STEAL:  # tests/conftest.py makes it a skip, as for the link calibrator
        raise MachineBusy(
            f"the hypervisor took {min(stolen):.1%}-{max(stolen):.1%} of the CPU time during each of the "
            f"{attempts} attempts at the {what}, so this machine could not judge the channel's real time "
            f"(why each was made again: {earlier})"
        )
    raise AssertionError(f"the channel kept time in none of {attempts} attempts at the {what}: {earlier}")


def quiet_note(waited: float, steal: float) -> str:
    return f"then waited {waited:.0f} s for the hypervisor to take less than {QUIET_STEAL:.0%} (last {steal:.1%})"
