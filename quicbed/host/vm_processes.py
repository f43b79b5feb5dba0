"""A guest kernel's processes on the host (the microVM's vng, qemu and virtiofsd; User-Mode
Linux's one host process per guest address space): they run in a session of their own,
whose members are found, recorded for ``quicbed clean`` and killed together; the console
and the command's output are copied while the guest runs (:func:`supervise`)."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, TextIO, cast

from quicbed.host import ownership


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
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
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

    def __init__(self, source: IO[bytes], log: BinaryIO, echo: TextIO | None) -> None:
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
                # cast: mypy's hasattr narrowing keeps BinaryIO (a subclass might have an encoding)
                cast(TextIO, self.stream).write(data.decode("utf-8", "replace"))
            else:
                self.stream.write(data)
                self.stream.flush()


@dataclass
class Supervised:
    """How a guest kernel's host processes ended."""

    seconds: float
    timed_out: bool
    #: the console's last lines
    console: list[str]
    #: the first host process's exit status (vng's is meaningless: the guest writes its own)
    returncode: int | None
    #: why the watchdog stopped the guest ('' if it did not)
    stalled: str = ""


def supervise(
    command: Sequence[str],
    *,
    cwd: os.PathLike[str] | str,
    env: Mapping[str, str],
    run_id: str,
    job_dir: Path,
    log: Path,
    stream: TextIO | BinaryIO | None,
    verbose: bool,
    timeout: float | None,
    watchdog: Callable[[], str] | None = None,
) -> Supervised:
    """Run ``command`` (a guest kernel) in a session of its own until it ends or ``timeout``
    seconds pass: its processes are listed in an ownership record while it runs, its console
    goes to ``log`` (and stderr if ``verbose``), the guest's output file to ``stream``;
    Ctrl-C, SIGTERM and the timeout kill the whole session. ``watchdog`` is asked every
    0.2 s; a non-empty answer (why the guest is stuck) kills the session too."""
    record = ownership.Ownership.create(run_id)
    started = time.monotonic()
    follower = OutputFollower(job_dir / "output", stream)
    timed_out = False
    stalled = ""
    with open(log, "wb") as log_file, sigterm_as_interrupt():
        process = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env),
        )
        known: set[int] = set()

        def note(members: set[int]) -> None:
            if record is not None and members - known:
                known.update(members)
                record.pids = sorted(known)
                with contextlib.suppress(OSError):
                    record.save()

        # at once, before anything else: a quicbed killed from here on leaves a VM 'quicbed clean' finds
        note({process.pid})
        assert process.stdout is not None  # stdout=PIPE
        reader = ConsoleReader(process.stdout, log_file, sys.stderr if verbose else None)
        reader.start()
        try:
            next_scan = 0.0
            while process.poll() is None:
                now = time.monotonic()
                if now >= next_scan:
                    note(set(session_members(process.pid)) | {process.pid})
                    next_scan = now + (0.5 if now - started < 30 else 5.0)
                follower.poll()
                if timeout is not None and now - started > timeout:
                    timed_out = True
                    kill_session(process)
                    break
                stalled = watchdog() if watchdog is not None else ""
                if stalled:
                    kill_session(process)
                    break
                time.sleep(0.2)
        except BaseException:
            kill_session(process)
            raise
        finally:
            if process.poll() is None:
                kill_session(process)
            # a helper (qemu, a UML process) may outlive the first process for a moment
            leftovers = session_members(process.pid)
            if leftovers:
                kill_session(process)
            reader.join(timeout=5)
            if record is not None:
                record.remove()
            follower.poll()
            (job_dir / "finished").write_text(f"{time.monotonic() - started:.1f}\n")
    return Supervised(time.monotonic() - started, timed_out, list(reader.tail), process.returncode, stalled)
