"""TCP congestion state from the kernel's tracepoints: ``tcp:tcp_probe`` (cwnd, ssthresh,
srtt at every ACK) and ``tcp:tcp_cong_state_set`` (Linux's CA state), for one sender port.

    with TcpTracepoints(port=8443, output=folder / "tcp_probe.txt.gz") as trace:
        ...                                  # the TCP download
    trace.meta    # {"trace_clock": "mono", "mono_to_epoch": ..., "overruns": 0}

Events go to a private trace instance (``instances/quicbed-<pid>-<n>``), so the global
trace buffer and other users of tracefs are left alone; tracefs is mounted (and left
mounted) when it is not. Tracepoints are kernel-wide (not per namespace): the filter on the
sender's port keeps other sockets out. Read the file with
:func:`quicbed.analysis.tcpstate.read_trace` and ``clock_offset=meta["mono_to_epoch"]``.
"""

from __future__ import annotations

import gzip
import itertools
import os
import subprocess
import time
from pathlib import Path
from typing import Any

TRACING = Path("/sys/kernel/tracing")
EVENTS = ("tcp_probe", "tcp_cong_state_set")
BUFFER_KB = 8192  # per CPU: a 10 MB download at 1448-byte segments is ~7000 ACK events
_instances = itertools.count()


def _mounted() -> bool:
    return (TRACING / "events").is_dir()


def unavailable() -> str | None:
    """Why the tracepoints cannot be used here (None: they can)."""
    if os.geteuid() != 0:
        return "tracefs needs root"
    if (
        not _mounted()
        and subprocess.run(
            ["mount", "-t", "tracefs", "nodev", str(TRACING)], capture_output=True, check=False
        ).returncode
        != 0
    ):
        return "tracefs cannot be mounted"
    if not (TRACING / "events" / "tcp" / "tcp_probe").is_dir():
        return "this kernel has no tcp:tcp_probe tracepoint"
    return None


class TcpTracepoints:
    def __init__(self, port: int, output: Path) -> None:
        self.port = port
        self.output = output
        self.instance = TRACING / "instances" / f"quicbed-{os.getpid()}-{next(_instances)}"
        self.meta: dict[str, Any] = {}

    def __enter__(self) -> TcpTracepoints:
        reason = unavailable()
        if reason:
            raise OSError(reason)
        self.instance.mkdir()
        try:
            (self.instance / "trace_clock").write_text("mono")
            (self.instance / "buffer_size_kb").write_text(str(BUFFER_KB))
            for event in EVENTS:
                directory = self.instance / "events" / "tcp" / event
                if directory.is_dir():
                    (directory / "filter").write_text(f"sport == {self.port}")  # the sender's socket
                    (directory / "enable").write_text("1")
            self.meta = {"trace_clock": "mono", "mono_to_epoch": time.time() - time.monotonic(), "port": self.port}
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            (self.instance / "tracing_on").write_text("0")
            self.meta["overruns"] = sum(
                int(line.split(":")[1])
                for stats in self.instance.glob("per_cpu/cpu*/stats")
                for line in stats.read_text().splitlines()
                if line.startswith(("overrun", "dropped events"))
            )
            lines = [line for line in (self.instance / "trace").read_text().splitlines() if not line.startswith("#")]
            self.output.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
        finally:
            self._remove()

    def _remove(self) -> None:
        for event in EVENTS:
            enable = self.instance / "events" / "tcp" / event / "enable"
            if enable.exists():
                enable.write_text("0")
        if self.instance.exists():
            self.instance.rmdir()
