"""The hypervisor's share of this machine's CPU time (steal), and waiting until it is small.

In a virtual machine the hypervisor takes CPU time in spells of seconds to minutes (up to a
sixth of this VM's for half an hour); a real-time run made inside one falls behind like the
one before it, so the runner (and the tests) wait for a quiet machine before making such a
run again.
"""

from __future__ import annotations

import time
from pathlib import Path

from quicbed.host.cpu import MachineTicks, parse_proc_stat


def steal_share(start: MachineTicks, end: MachineTicks) -> float:
    """The share of the machine's CPU time the hypervisor took between two readings."""
    total = (end.busy - start.busy) + (end.idle - start.idle) + (end.steal - start.steal)
    return (end.steal - start.steal) / total if total > 0 else 0.0


#: a quiet machine: the hypervisor took less than QUIET_STEAL of the CPU time over
#: QUIET_SPAN_S; QUIET_WAIT_S bounds the wait for one
QUIET_STEAL, QUIET_SPAN_S, QUIET_WAIT_S = 0.01, 2.0, 60.0


def wait_for_quiet_machine(limit: float = QUIET_STEAL, span: float = QUIET_SPAN_S,
                           longest: float = QUIET_WAIT_S) -> tuple[float, float]:
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
