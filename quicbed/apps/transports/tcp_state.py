"""The TCP sender's state during a run (``qlog: true`` of a TCP transport): the kernel's
tcp_probe tracepoints where they can be used (``tcp_probe.txt.gz``, with the trace clock's
offset in ``tcp_probe.json``), else ``ss -tin`` samples (``ss.txt``). Both are read by
:mod:`quicbed.analysis.tcpstate`."""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import AbstractContextManager
from typing import Any

from quicbed.apps.launch import Started
from quicbed.apps.transports.base import Download, RunContext

#: beside a run's tcp_probe trace: its clock's offset, which puts its events on the captures' clock
TRACE_META = "tcp_probe.json"
SS_INTERVAL = 0.01

SS_SAMPLER = """
import subprocess, sys, time
interval, port = float(sys.argv[1]), sys.argv[2]
argv = ["ss", "-tin", f"( sport = :{port} )"]
while True:
    text = subprocess.run(argv, capture_output=True, text=True).stdout
    sys.stdout.write(f"# {time.time():.6f}\\n{text}")
    sys.stdout.flush()
    time.sleep(interval)
"""


def ss_sampler_command(port: int, interval: float = 0.01) -> list[str]:
    """A sampler printing ``# <epoch>`` and ``ss -tin`` of the sockets with local ``port``
    every ``interval`` s to stdout (run it in the sender's namespace; stop it with SIGTERM).

    One fork per sample (ss itself): a shell loop with ``date`` forks three times and
    samples about half as often on a loaded machine. The stamp is taken when ss has
    returned (ss spends most of its run time starting up and reads the socket table at
    its end). No state filter: once the application closes the socket (FIN-WAIT-1) the
    rest of the transfer is still shown.
    """
    return [sys.executable, "-c", SS_SAMPLER, f"{interval:g}", str(port)]


def record_tcp_state(run: RunContext, download: Download) -> AbstractContextManager[object]:
    """The kernel's tcp_probe tracepoint when it can be used, else ``ss`` samples."""
    from quicbed.apps.tcp import tracepoints

    reason = tracepoints.unavailable()
    if reason is None:
        return _Traced(tracepoints.TcpTracepoints(download.port, run.folder / "tcp_probe.txt.gz"), run.details)
    run.details["tcp_state"] = {"source": "ss", "why": reason}
    return _ss_sampler(run, download)


def _ss_sampler(run: RunContext, download: Download) -> Started:
    process = run.server.start(ss_sampler_command(download.port, SS_INTERVAL), name="ss-sampler", log_dir=run.logs)
    run.watch("the TCP state sampler", process)

    def keep() -> None:
        if process.stdout_path and process.stdout_path.exists():
            shutil.copyfile(process.stdout_path, run.folder / "ss.txt")

    return Started(process.stop, keep)


class _Traced:
    def __init__(self, trace: Any, details: dict[str, Any]) -> None:
        self.trace = trace
        self.details = details

    def __enter__(self) -> _Traced:
        self.trace.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.trace.__exit__(*exc)
        self.details["tcp_state"] = {"source": "tcp_probe", **self.trace.meta}
        # the trace clock's offset beside the trace: the analysis puts its events on the captures' clock
        (self.trace.output.parent / TRACE_META).write_text(json.dumps(self.trace.meta) + "\n")
