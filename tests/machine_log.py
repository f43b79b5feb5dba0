"""How busy the machine was while tests ran: a failed test's report quotes it (tests/conftest.py)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

from quicbed.host.procfs import MachineTicks, parse_proc_stat


class MachineLog:
    """/proc/stat sampled every ``interval`` seconds in a daemon thread, so that a failed
    test's report can say how busy the machine was and how much CPU the hypervisor took
    (steal) over the test and over its module so far (module fixtures, where the data of
    many tests is made, run inside the first test), and in the worst second: steal comes in
    bursts that an average over minutes hides."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[tuple[float, MachineTicks]] = []  # (monotonic time, MachineTicks)
        self.cores = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="machine-log", daemon=True)

    def start(self) -> MachineLog:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def sample(self) -> None:
        try:
            ticks, self.cores = parse_proc_stat(Path("/proc/stat").read_text())
        except OSError:
            return
        self.samples.append((time.monotonic(), ticks))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def summary(self, since: float) -> str | None:
        """The machine since ``since`` (monotonic), up to now; None without two samples."""
        self.sample()
        return describe([(t, ticks) for t, ticks in self.samples if t >= since - self.interval], self.cores)


def describe(window: list[tuple[float, MachineTicks]], cores: int) -> str | None:
    """Busy, idle and stolen shares between the first and last of the samples (monotonic time,
    cumulative ticks), and the largest steal between two consecutive samples."""
    if len(window) < 2:
        return None
    first, last = window[0][1], window[-1][1]
    busy, idle, steal = last.busy - first.busy, last.idle - first.idle, last.steal - first.steal
    total = busy + idle + steal
    if total <= 0:
        return None
    worst, worst_at, worst_step = 0.0, 0.0, 0.0
    for (t0, a), (t1, b) in itertools.pairwise(window):
        step = (b.busy - a.busy) + (b.idle - a.idle) + (b.steal - a.steal)
        if step > 0 and (b.steal - a.steal) / step > worst:
            worst, worst_at, worst_step = (b.steal - a.steal) / step, t0 - window[0][0], t1 - t0
    tick = os.sysconf("SC_CLK_TCK")
    worst_text = f"; at worst {worst:.0%} for {worst_step:.1f} s, {worst_at:.0f} s in" if worst else ""
    return (
        f"{cores} CPUs over {window[-1][0] - window[0][0]:.0f} s: busy {busy / total:.0%}, idle "
        f"{idle / total:.0%}, stolen by the hypervisor {steal / total:.1%} ({steal / tick:.1f} CPU-seconds"
        f"{worst_text})"
    )
