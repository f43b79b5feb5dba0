"""Placing a running process's threads on cores (the ns-3 channel: isolate_channel)."""

from __future__ import annotations

import os


def set_process_affinity(pid: int, cores: set[int], but: int | None = None) -> None:
    """Restrict every thread of a running process to ``cores`` (sched_setaffinity is per
    thread), except the thread ``but``."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) == but:
            continue
        try:
            os.sched_setaffinity(int(tid), cores)
        except ProcessLookupError:
            pass  # the thread ended meanwhile
