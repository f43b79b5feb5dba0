"""Readiness: wait (bounded) until a process in a node listens on a port, or has written
its ready file.

A socket in LISTEN state accepts connections (the kernel completes handshakes into its
backlog), so "``ss`` shows the listener" is "the port accepts connections". ``ss`` runs in
the node's namespace; nothing is sent on the emulated links.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from quicbed.errors import BackendError

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle, Process

POLL_INTERVAL = 0.05


def listening(node: NodeHandle, port: int, protocol: str = "tcp") -> bool:
    """Whether some socket in the node listens on ``port`` (``protocol`` "tcp" or "udp")."""
    flag = {"tcp": "-t", "udp": "-u"}[protocol]
    result = node.run(["ss", "-H", "-l", "-n", flag, f"sport = :{port}"], timeout=10, check=False)
    return result.returncode == 0 and bool(result.stdout.strip())


def wait_for_listener(
    node: NodeHandle,
    port: int,
    *,
    protocol: str = "tcp",
    timeout: float = 10.0,
    process: Process | None = None,
    what: str = "server",
) -> float:
    """Wait until ``port`` listens in ``node``; return the seconds waited.

    Raises BackendError when ``process`` (if given) exits first or after ``timeout``
    seconds, with the process's error output.
    """
    started = time.monotonic()
    deadline = started + timeout
    while True:
        if listening(node, port, protocol):
            return time.monotonic() - started
        if process is not None and not process.running:
            raise BackendError(
                f"{what} on {node.name} exited ({process.returncode}) before "
                f"listening on {protocol} port {port}: "
                f"{process.errors().strip()[-2000:]}"
            )
        if time.monotonic() > deadline:
            detail = f": {process.errors().strip()[-2000:]}" if process is not None else ""
            raise BackendError(
                f"{what} on {node.name} not listening on {protocol} port {port} after {timeout:g} s{detail}"
            )
        time.sleep(POLL_INTERVAL)


def wait_for_file(path: Path, process: Process, what: str, timeout: float) -> None:
    """Wait until ``process`` has written ``path``; BackendError if it exits first or after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if not process.running:
            raise BackendError(f"{what} exited at start-up: {process.errors().strip()[-500:]}")
        if time.monotonic() > deadline:
            raise BackendError(f"{what} not ready after {timeout:g} s")
        time.sleep(0.05)
