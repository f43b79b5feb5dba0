"""The Linux prctl(2) calls quicbed makes, through libc (each a no-op where libc refuses)."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, *arguments: int) -> bool:
    """Whether prctl(option, arguments...) succeeded."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, *arguments) == 0
    except OSError:
        return False


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """In a child before exec: get ``sig`` when the parent dies."""
    return prctl(PR_SET_PDEATHSIG, int(sig))


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (so that they can be reaped here)."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
