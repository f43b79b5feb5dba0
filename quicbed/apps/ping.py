"""ping between nodes: an RTT probe with per-packet RTTs and ping's own summary.

    from quicbed.apps import ping
    result = ping.ping(net.node("client"), net.node("server").address, count=20, interval=0.05)
    result.avg, result.mdev, result.loss        # seconds, seconds, fraction
    [p.rtt for p in result.replies]             # per packet (seconds), with icmp_seq and time
    probe = ping.start(client, address, count=200, interval=0.02)   # RTT under load
    ...                                                             # a transfer
    probe.result()

Runs ``ping -n -D -O -c COUNT -i INTERVAL -W TIMEOUT`` (numeric, wall-clock stamps, report
missing replies), bounded by a process timeout. Intervals below 0.2 s need root, which quicbed's
namespaces have.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicbed.errors import BackendError, MissingDependency, QuicbedError

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle, Process

_REPLY = re.compile(
    r"^(?:\[(?P<time>[\d.]+)\]\s*)?(?P<bytes>\d+) bytes from (?P<source>[^:]+): "
    r"icmp_seq=(?P<seq>\d+)(?: ttl=(?P<ttl>\d+))?(?: time=(?P<rtt>[\d.]+) ms)?"
    r"(?P<dup> \(DUP!\))?"
)
_MISSING = re.compile(r"^(?:\[(?P<time>[\d.]+)\]\s*)?no answer yet for icmp_seq=(?P<seq>\d+)")
_COUNTS = re.compile(
    r"(?P<sent>\d+) packets transmitted, (?P<received>\d+) received"
    r"(?:, \+(?P<duplicates>\d+) duplicates)?(?:, \+(?P<errors>\d+) errors)?"
)
_SUMMARY = re.compile(
    r"rtt min/avg/max/mdev = (?P<min>[\d.]+)/(?P<avg>[\d.]+)/(?P<max>[\d.]+)/"
    r"(?P<mdev>[\d.]+) ms"
)


@dataclass
class Reply:
    seq: int
    rtt: float | None  # seconds
    time: float | None  # wall clock when ping printed it (-D)
    ttl: int | None = None
    size: int | None = None
    duplicate: bool = False


@dataclass
class PingResult:
    destination: str
    transmitted: int = 0
    received: int = 0
    duplicates: int = 0
    errors: int = 0
    min: float | None = None  # seconds (ping's summary)
    avg: float | None = None
    max: float | None = None
    mdev: float | None = None
    replies: list[Reply] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # icmp_seq reported without an answer
    error: str | None = None
    output: str = field(default="", repr=False)

    @property
    def loss(self) -> float | None:
        """Fraction of echo requests without a reply."""
        if not self.transmitted:
            return None
        return 1.0 - self.received / self.transmitted

    @property
    def rtts(self) -> list[float]:
        """Per-packet RTTs in seconds (duplicates left out), in arrival order."""
        return [r.rtt for r in self.replies if r.rtt is not None and not r.duplicate]

    def to_dict(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "transmitted": self.transmitted,
            "received": self.received,
            "duplicates": self.duplicates,
            "errors": self.errors,
            "loss": self.loss,
            "min": self.min,
            "avg": self.avg,
            "max": self.max,
            "mdev": self.mdev,
            "rtts": self.rtts,
            "missing": self.missing,
            "replies": [vars(r) for r in self.replies],
            "error": self.error,
        }


def parse_output(text: str, destination: str = "") -> PingResult:
    """A :class:`PingResult` from the output of iputils ``ping`` (with or without ``-D``)."""
    result = PingResult(destination=destination, output=text)
    for line in text.splitlines():
        line = line.strip()
        match = _REPLY.match(line)
        if match:
            rtt = match.group("rtt")
            result.replies.append(
                Reply(
                    seq=int(match.group("seq")),
                    rtt=float(rtt) / 1000.0 if rtt else None,
                    time=float(match.group("time")) if match.group("time") else None,
                    ttl=int(match.group("ttl")) if match.group("ttl") else None,
                    size=int(match.group("bytes")),
                    duplicate=bool(match.group("dup")),
                )
            )
            continue
        match = _MISSING.match(line)
        if match:
            if int(match.group("seq")) not in result.missing:
                result.missing.append(int(match.group("seq")))
            continue
        match = _COUNTS.search(line)
        if match:
            result.transmitted = int(match.group("sent"))
            result.received = int(match.group("received"))
            result.duplicates = int(match.group("duplicates") or 0)
            result.errors = int(match.group("errors") or 0)
            continue
        match = _SUMMARY.search(line)
        if match:
            for name in ("min", "avg", "max", "mdev"):
                setattr(result, name, float(match.group(name)) / 1000.0)
    if not result.transmitted and not result.replies:
        result.error = "no ping output"
    return result


def ping_argv(
    destination: str, count: int = 10, interval: float = 0.2, size: int | None = None, reply_timeout: float = 1.0
) -> list[str]:
    """ping sends ``count`` requests ``interval`` apart and waits ``reply_timeout`` for the
    last reply (no ``-w``: with it, ping would go on sending until ``count`` replies came)."""
    if count < 1:
        raise QuicbedError("count must be at least 1")
    if interval < 0.002:
        raise QuicbedError("interval must be at least 0.002 s")
    if shutil.which("ping") is None:
        raise MissingDependency("'ping' is not installed (fix: apt-get install iputils-ping)")
    argv = ["ping", "-n", "-D", "-O", "-c", str(count), "-i", f"{interval:g}", "-W", f"{reply_timeout:g}"]
    if size is not None:
        argv += ["-s", str(size)]
    return [*argv, destination]


def _limit(count: int, interval: float, reply_timeout: float) -> float:
    """How long a ping run may take before it is stopped (a generous bound)."""
    return count * interval * 1.5 + reply_timeout + 10.0


def ping(
    node: NodeHandle,
    destination: str,
    count: int = 10,
    interval: float = 0.2,
    size: int | None = None,
    reply_timeout: float = 1.0,
) -> PingResult:
    """Ping ``destination`` from ``node`` ``count`` times; bounded by a process timeout."""
    argv = ping_argv(destination, count, interval, size, reply_timeout=reply_timeout)
    completed = node.run(argv, timeout=_limit(count, interval, reply_timeout), check=False)
    result = parse_output(completed.stdout, destination)
    if result.error and completed.stderr.strip():
        result.error = completed.stderr.strip()
    return result


class PingProbe:
    """A ping running in the background (RTT under load); ``result()`` waits for it."""

    def __init__(self, process: Process, destination: str, limit: float, scratch: Path | None = None) -> None:
        self.process = process
        self.destination = destination
        self.limit = limit
        self.started = time.monotonic()
        #: a folder made for the output alone: removed once the output has been read
        self.scratch = scratch
        self._text: str | None = None

    def _output(self) -> str:
        if self._text is None:
            self._text = self.process.output()
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        return self._text

    def result(self) -> PingResult:
        try:
            self.process.wait(max(0.1, self.limit - (time.monotonic() - self.started)))
        except BackendError:
            self.process.stop()
        return parse_output(self._output(), self.destination)

    def stop(self) -> PingResult:
        """Stop early (SIGINT: ping prints its summary) and parse what it printed."""
        import os
        import signal

        if self.process.running:
            try:
                os.kill(self.process.pid, signal.SIGINT)
                self.process.wait(5)
            except (ProcessLookupError, BackendError):
                self.process.stop()
        return parse_output(self._output(), self.destination)


def start(
    node: NodeHandle,
    destination: str,
    count: int = 100,
    interval: float = 0.05,
    size: int | None = None,
    log_dir: Path | None = None,
    name: str = "ping",
    reply_timeout: float = 1.0,
) -> PingProbe:
    argv = ping_argv(destination, count, interval, size, reply_timeout=reply_timeout)
    scratch = None if log_dir is not None else Path(tempfile.mkdtemp(prefix="quicbed-ping-"))
    try:
        process = node.start(argv, name=name, log_dir=Path(log_dir) if log_dir is not None else scratch)
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    return PingProbe(process, destination, _limit(count, interval, reply_timeout), scratch)
