"""The microVM's processes on the host: vng runs in a session of its own, whose members
(vng, qemu, virtiofsd) are found, recorded and killed together; the console and the
command's output are copied while the VM runs."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO


def session_members(session: int) -> list[int]:
    """Pids whose session id is ``session`` (vng runs in a session of its own)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(session):
            members.append(int(entry.name))
    return sorted(members)


def kill_session(process: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    members = set(session_members(process.pid)) | {process.pid}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        for pid in members:  # members that left the process group (qemu daemonising, ...)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        try:
            process.wait(timeout=grace)
            if not session_members(process.pid):
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the VM runs, SIGTERM (if nobody handles it) stops the VM like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class ConsoleReader(threading.Thread):
    """Copies vng's output (the console) to the log, optionally to the user; keeps a tail."""

    def __init__(self, source: BinaryIO, log: BinaryIO, echo: TextIO | None) -> None:
        super().__init__(daemon=True, name="quicbed-vm-console")
        self.source, self.log, self.echo = source, log, echo
        self.tail: collections.deque[str] = collections.deque(maxlen=60)

    def run(self) -> None:
        for raw in iter(self.source.readline, b""):
            self.log.write(raw)
            self.log.flush()
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.tail.append(line)
            if self.echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.echo.write(f"[vm] {line}\n")
                    self.echo.flush()


class OutputFollower:
    """Copies what the guest appends to the output file to a stream, as it appears."""

    def __init__(self, path: Path, stream: TextIO | BinaryIO | None) -> None:
        self.path, self.stream, self.offset = path, stream, 0

    def poll(self) -> None:
        if self.stream is None:
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        if not data:
            return
        self.offset += len(data)
        target = getattr(self.stream, "buffer", None)
        with contextlib.suppress(OSError, ValueError):
            if target is not None:  # a text stream with a byte buffer (sys.stdout)
                self.stream.flush()
                target.write(data)
                target.flush()
            elif hasattr(self.stream, "encoding"):  # a text stream without one (StringIO)
                self.stream.write(data.decode("utf-8", "replace"))  # type: ignore[arg-type]
            else:
                self.stream.write(data)  # type: ignore[arg-type]
                self.stream.flush()
