"""Which clock a run keeps: the host's real time, or virtual time inside quicbed's User-Mode
Linux kernel (:mod:`quicbed.host.uml`), read from the running kernel itself."""

from __future__ import annotations

import platform
from pathlib import Path

from quicbed.clocks import CLOCKS, REAL, VIRTUAL

__all__ = ["CLOCKS", "REAL", "VIRTUAL", "VIRTUAL_CPU", "current_clock"]
#: what a virtual-time run's CPU record says instead of "not CPU-bound"
VIRTUAL_CPU = (
    "virtual time: computing takes no time there, so no role can be CPU-bound; the CPU figures "
    "are host seconds that cost wall time, not time of the run"
)


def _cmdline() -> str:
    try:
        return Path("/proc/cmdline").read_text()
    except OSError:
        return ""


def current_clock(cmdline: str | None = None) -> str:
    """``virtual`` inside a kernel booted with time travel, else ``real``."""
    options = (_cmdline() if cmdline is None else cmdline).split()
    return VIRTUAL if any(option.startswith("time-travel=inf-cpu") for option in options) else REAL


def kernel_release() -> str:
    """``uname -r`` of the kernel this process runs on (quicbed's UML kernel ends in -quicbed)."""
    return platform.release()
