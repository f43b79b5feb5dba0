"""The curl engine of the TCP client (``--engine curl``): curl fetches, Python records.

curl is C (libcurl, nghttp2, OpenSSL) and costs little CPU, so it is the reference for
"is the client the bottleneck?" (bench/endpoints.py runs both engines), and it is the way
to HTTP/3 over TCP-less QUIC where the curl build has it. Its timings are exact for one
object per run; for pages fetched in parallel they are not (curl 7.88, measured): curl
writes its per-transfer reports (``--write-out %{json}``) in batches, up to ~20 ms after the
transfers ended, and a transfer that waited for a multiplexed connection has its
``time_pretransfer``/``time_starttransfer`` counted from when it got the connection but its
``time_total`` from when it was queued. Per-object times of parallel transfers are
therefore reconstructed from the report arrival times and flagged ``approximate`` in the
record (``timing``). The default engine (quicbed's own, in Python) has none of this.

TCP_INFO: curl's sockets are not ours, so this process (in curl's namespace) reads
TCP_INFO over netlink (:mod:`quicbed.apps.tcp.tcpinfo`), every ``tcpinfo_interval`` and once
more when each transfer report arrives. curl closes its connections as soon as it exits, and
a closed connection leaves TCP_INFO within microseconds (TIME_WAIT has none), so the last
report alone races with the exit. curl is therefore kept alive by one more transfer, to a
loopback listener of this process (:class:`ExitHold`) that answers only after the final
sample: that sample sees every connection with all its bytes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quicbed.apps.tcp import tcpinfo
from quicbed.apps.tcp.fetch_record import fill_times, transport_summary
from quicbed.apps.tcp.settings import ClientSettings
from quicbed.errors import MissingDependency

WRITE_OUT_MARK = "QBCURL "
CURL_FLAGS = {"1.1": "--http1.1", "2": "--http2", "3": "--http3-only"}
CURL_FEATURES = {"2": "HTTP2", "3": "HTTP3"}
HOLD_SPARE_S = 10.0  # the hold transfer outlives the others' --max-time by this much
# curl's per-transfer times (seconds from the transfer's start) kept in each object
CURL_TIMES = ("time_connect", "time_appconnect", "time_pretransfer", "time_starttransfer", "time_total")


@dataclass(frozen=True)
class CurlBuild:
    version: str
    features: frozenset[str]
    text: str


_CURL_BUILDS: dict[str, CurlBuild] = {}


def parse_curl_version(text: str) -> CurlBuild:
    """Version and features from ``curl -V`` output."""
    version = re.search(r"curl (\S+)", text)
    features = re.search(r"^Features:(.*)$", text, re.MULTILINE)
    return CurlBuild(
        version=version.group(1) if version else "unknown",
        features=frozenset(features.group(1).split()) if features else frozenset(),
        text=text,
    )


def curl_build(binary: str = "curl") -> CurlBuild:
    """Version and features of a curl binary, cached."""
    if binary not in _CURL_BUILDS:
        path = shutil.which(binary)
        if path is None:
            raise MissingDependency(f"'{binary}' is not installed (fix: apt-get install curl)")
        text = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10, check=False).stdout
        _CURL_BUILDS[binary] = parse_curl_version(text)
    return _CURL_BUILDS[binary]


def url(settings: ClientSettings, path: str) -> str:
    name = settings.server_name or settings.host
    authority = f"[{name}]" if ":" in name else name
    return f"https://{authority}:{settings.port}{path if path.startswith('/') else '/' + path}"


def _config_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def curl_command(settings: ClientSettings, hold_url: str | None = None) -> tuple[list[str], str]:
    """(argv, config text for stdin) of the curl run that fetches ``settings.paths``, then
    ``hold_url`` (see :class:`ExitHold`) as a separate operation: no report, HTTP/1.1."""
    argv = [
        settings.curl,
        "--silent",
        "--show-error",
        "--no-progress-meter",
        CURL_FLAGS[settings.http],
        "--user-agent",
        settings.user_agent,
        "--max-time",
        f"{settings.timeout:g}",
        "--connect-timeout",
        f"{min(settings.timeout, 30.0):g}",
        "--write-out",
        "%{stderr}" + WRITE_OUT_MARK + "%{json}\\n",
    ]
    if len(settings.paths) > 1:
        argv += ["--parallel", "--parallel-max", str(min(settings.parallel, 300))]
    if settings.insecure:
        argv.append("--insecure")
    elif settings.ca_file is not None:
        argv += ["--cacert", str(settings.ca_file)]
    if settings.server_name and settings.server_name != settings.host:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        argv += ["--resolve", f"{settings.server_name}:{settings.port}:{host}"]
    argv += ["--config", "-"]  # last: its "next" ends the operation the options above set
    config = "".join(f'url = {_config_quote(url(settings, path))}\noutput = "/dev/null"\n' for path in settings.paths)
    if hold_url is not None:
        config += (
            f'next\nurl = {_config_quote(hold_url)}\noutput = "/dev/null"\n'
            f'noproxy = "*"\nmax-time = {settings.timeout + HOLD_SPARE_S:g}\n'
        )
    return argv, config


class ExitHold:
    """A loopback HTTP listener that answers curl's last transfer only when released, so
    curl keeps its connections open until their final TCP_INFO has been read."""

    def __init__(self, avoid_port: int) -> None:
        self.released = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        if self.listener.getsockname()[1] == avoid_port:  # the sampler matches that port
            taken, self.listener = self.listener, socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.bind(("127.0.0.1", 0))  # while ``taken`` holds the other one
            taken.close()
        self.listener.listen(1)
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/quicbed-exit-hold"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="curl-exit-hold", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                connection.settimeout(1.0)
                try:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        chunk = connection.recv(4096)
                        if not chunk:
                            break
                        request += chunk
                    self.released.wait()  # close() releases too
                    connection.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass
            return

    def close(self) -> None:
        self.released.set()
        self._stopped.set()
        self._thread.join(timeout=5)
        self.listener.close()


@dataclass
class Transfer:
    """One curl transfer report and the monotonic time it arrived."""

    arrived: float
    report: dict[str, Any]

    @property
    def start(self) -> float:  # curl queued this transfer (time_total counts from here)
        return self.arrived - float(self.report.get("time_total") or 0.0)

    def at(self, key: str) -> float | None:
        value = self.report.get(key)
        return None if value is None else self.start + float(value)


def objects_from_transfers(
    settings: ClientSettings, transfers: Sequence[Transfer]
) -> tuple[list[dict[str, Any]], float, dict[str, Any]]:
    """(objects with absolute monotonic times, origin, connection facts) from curl reports.

    With one transfer every time is curl's own, exact; with several, ``end`` is the
    report's arrival and the rest follows by subtraction (approximate, see module doc).
    """
    by_number = sorted(transfers, key=lambda t: int(t.report.get("urlnum", 0)))
    origin = min(t.start for t in by_number)
    objects = []
    for transfer in by_number:
        report = transfer.report
        number = int(report.get("urlnum", 0))
        path = settings.paths[number] if 0 <= number < len(settings.paths) else report.get("url")
        failed = int(report.get("exitcode") or 0) != 0
        request = transfer.at("time_pretransfer")
        first = None if failed or not report.get("time_starttransfer") else transfer.at("time_starttransfer")
        end = None if failed else transfer.arrived
        item = {
            "path": path,
            "status": int(report.get("response_code") or 0) or None,
            "start": request,
            "first_byte": first,
            "end": end,
            "size": int(report.get("size_download") or 0),
            "connection": report.get("local_port"),
            "new_connection": bool(report.get("num_connects")),
            "http_version": report.get("http_version"),
            "curl_times": {key[5:]: report.get(key) for key in CURL_TIMES},
        }
        if failed:
            item["error"] = report.get("errormsg") or f"curl exit {report.get('exitcode')}"
        objects.append(item)
    first_connect = min((t for t in by_number if t.report.get("num_connects")), key=lambda t: t.start, default=None)
    facts: dict[str, Any] = {
        "connections": sum(int(t.report.get("num_connects") or 0) for t in by_number),
        "address": next((t.report.get("remote_ip") for t in by_number if t.report.get("remote_ip")), None),
        "handshake_time": None,
    }
    if first_connect is not None:
        report = first_connect.report
        facts["handshake_time"] = float(report.get("time_appconnect") or report.get("time_connect") or 0) or None
    return objects, origin, facts


@dataclass
class CurlRun:
    """What one curl run gave: reports, messages, CPU, the TCP_INFO sampler."""

    transfers: list[Transfer]
    messages: list[str]
    returncode: int | None
    timed_out: bool
    usage: Any
    sampler: tcpinfo.Sampler
    complete: bool
    spawned_wall: float
    spawned_mono: float


def run_curl(settings: ClientSettings) -> CurlRun:
    """Run curl for ``settings.paths`` and collect its reports (bounded by the timeout)."""
    hold = ExitHold(avoid_port=settings.port)
    argv, config = curl_command(settings, hold.url)
    sampler = tcpinfo.Sampler(
        tcpinfo.Filter(remote_port=settings.port), settings.tcpinfo_interval, settings.tcpinfo_log
    )
    transfers: list[Transfer] = []
    messages: list[str] = []
    state = {"complete": False}
    diag: tcpinfo.DiagSocket | None = None
    try:
        diag = tcpinfo.DiagSocket()
    except OSError as error:
        messages.append(f"no TCP_INFO: {error}")
    sampler.start()
    spawned_wall, spawned_mono = time.time(), time.monotonic()
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError:
        hold.close()
        sampler.stop()
        if diag is not None:
            diag.close()
        raise

    def read_reports() -> None:
        assert process.stderr is not None
        for raw in iter(process.stderr.readline, b""):
            arrived = time.monotonic()
            line = raw.decode(errors="replace").rstrip("\n")
            before, mark, report = line.partition(WRITE_OUT_MARK)
            if before.strip():
                messages.append(before.strip().split("\r")[-1])
            if not mark:
                continue
            try:
                transfers.append(Transfer(arrived, json.loads(report)))
            except json.JSONDecodeError:
                messages.append(line)
                continue
            last = len(transfers) == len(settings.paths)
            if diag is not None:
                try:  # curl waits on the hold transfer: every connection is still open
                    found = sampler.sample_once(diag)
                    state["complete"] = last and set(sampler.last) <= found
                except OSError:
                    pass
            if last:
                hold.released.set()

    reader = threading.Thread(target=read_reports, name="curl-reports", daemon=True)
    reader.start()
    assert process.stdin is not None
    process.stdin.write(config.encode())
    process.stdin.close()
    deadline = spawned_mono + settings.timeout + 5.0
    timed_out = False
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            timed_out = True
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.005)
    process.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=5)
    hold.close()
    sampler.stop()
    if diag is not None:
        diag.close()
    if any(m.startswith("curl: (28)") for m in messages):
        timed_out = True
    return CurlRun(
        transfers=transfers,
        messages=messages,
        returncode=process.returncode,
        timed_out=timed_out,
        usage=usage,
        sampler=sampler,
        complete=state["complete"],
        spawned_wall=spawned_wall,
        spawned_mono=spawned_mono,
    )


def fetch_with_curl(settings: ClientSettings, record: dict[str, Any]) -> None:
    """Fetch ``settings.paths`` with curl and fill ``record`` in (its error too: a curl
    without the asked HTTP version, a timeout, no transfer at all)."""
    build = curl_build(settings.curl)
    record["curl_version"] = build.version
    feature = CURL_FEATURES.get(settings.http)
    if feature and feature not in build.features:
        record["error"] = f"curl {build.version} has no {feature} (features: {' '.join(sorted(build.features))})"
        return
    run = run_curl(settings)
    if run.usage is not None:
        record["cpu"] = {
            "process": "curl",
            "user_s": run.usage.ru_utime,
            "system_s": run.usage.ru_stime,
            "cpu_s": run.usage.ru_utime + run.usage.ru_stime,
            "max_rss_kb": run.usage.ru_maxrss,
        }
    if run.transfers:
        objects, origin, facts = objects_from_transfers(settings, run.transfers)
        record["started_at"] = run.spawned_wall + (origin - run.spawned_mono)
        record["connections"] = facts["connections"]
        record["handshake_time"] = facts["handshake_time"]
        record["server"]["address"] = facts["address"]
        fill_times(record, objects, origin, len(settings.paths))
        if len(settings.paths) > 1:
            record["timing"] = "approximate"
    connections = sorted(run.sampler.last.values(), key=lambda c: run.sampler.first_seen.get(c.key, 0))
    record["transport"] = transport_summary(connections, run.complete, run.sampler.samples, settings.tcpinfo_interval)
    if run.messages:
        record["curl_messages"] = run.messages[-20:]
    if run.timed_out:
        record["error"] = f"timeout after {settings.timeout:g}s"
    elif not run.transfers:
        record["error"] = run.messages[-1] if run.messages else f"curl exit {run.returncode}"
