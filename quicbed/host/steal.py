"""The hypervisor's share of this machine's CPU time (steal), and waiting until it is small.

In a virtual machine the hypervisor takes CPU time in spells of seconds to minutes (up to a
sixth of this VM's for half an hour); a real-time run made inside one falls behind like the
one before it, so the runner (and the tests) wait for a quiet machine before making such a
run again.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType

from quicbed.host.procfs import MachineTicks, parse_proc_stat


def steal_share(start: MachineTicks, end: MachineTicks) -> float:
    """The share of the machine's CPU time the hypervisor took between two readings."""
    total = (end.busy - start.busy) + (end.idle - start.idle) + (end.steal - start.steal)
    return (end.steal - start.steal) / total if total > 0 else 0.0


#: a quiet machine: the hypervisor took less than QUIET_STEAL of the CPU time over
#: QUIET_SPAN_S; QUIET_WAIT_S bounds the wait for one
QUIET_STEAL, QUIET_SPAN_S, QUIET_WAIT_S = 0.01, 2.0, 60.0


def wait_for_quiet_machine(
    limit: float = QUIET_STEAL, span: float = QUIET_SPAN_S, longest: float = QUIET_WAIT_S
) -> tuple[float, float]:
    """Returns once the steal share over ``span`` seconds is under ``limit``, or before the
    wait would pass ``longest`` seconds: (seconds waited beyond the first span, the last
    span's steal share). A machine without a hypervisor returns after one span."""
    began = time.monotonic()
    while True:
        start = parse_proc_stat(Path("/proc/stat").read_text())[0]
        time.sleep(span)
        share = steal_share(start, parse_proc_stat(Path("/proc/stat").read_text())[0])
        elapsed = time.monotonic() - began
        if share < limit or elapsed + span > longest:
            return max(0.0, elapsed - span), share


class Steal:
    """The share of the machine's CPU time the hypervisor took (steal, /proc/stat) while the
    block ran: a measurement of the real-time channel made meanwhile measured the machine
    too, and a test that injects its own stalls cannot tell them from the machine's by the
    channel's lag record alone."""

    def __init__(self) -> None:
        self.share = 0.0
        self._start: MachineTicks | None = None

    @staticmethod
    def _ticks() -> MachineTicks:
        return parse_proc_stat(Path("/proc/stat").read_text())[0]

    def __enter__(self) -> Steal:
        self._start = self._ticks()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._start is not None
        self.share = steal_share(self._start, self._ticks())

    def reasons(self, limit: float = QUIET_STEAL) -> list[str]:
        """Why the block did not have the machine to itself: [] under ``limit`` of steal (a
        30 ms theft from one of two CPUs in a 1.5 s block is 1 %; an idle VM here shows 0-0.3 %)."""
        return [f"the hypervisor took {self.share:.1%} of the CPU time (steal)"] if self.share > limit else []
