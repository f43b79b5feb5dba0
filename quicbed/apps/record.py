"""What every download client shares (HTTP/3 and TCP alike): its request options, the JSON
record it writes, and how the record is emitted."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from quicbed import __version__
from quicbed.apps.objects import load_manifest, page_objects
from quicbed.errors import QuicbedError

S = TypeVar("S", bound="RequestSettings")
#: how a client connects: a new connection, TLS session resumption, and resumption with 0-RTT data
RESUMPTION_MODES = ("none", "ticket", "0rtt")
#: what a priming connection asks for: nothing the servers have (the native client's too)
PRIMING_PATH = "/.quicbed-priming"


def add_request_arguments(parser: argparse.ArgumentParser, *, port: int, parallel_help: str) -> None:
    """Server, what to fetch, limits, output and TLS options."""
    parser.add_argument("--host", required=True, help="server name or address")
    parser.add_argument("--port", type=int, default=port)
    what = parser.add_argument_group("what to fetch")
    what.add_argument("--path", action="append", default=[], help="object path (repeatable)")
    what.add_argument("--manifest", type=Path, help="manifest.json (or its directory) of the "
                      "served content")
    what.add_argument("--page", help="page (or bulk object) name in the manifest")
    parser.add_argument("--parallel", type=int, default=6, help=parallel_help)
    parser.add_argument("--timeout", type=float, default=60.0, help="overall limit in seconds")
    parser.add_argument("--output", type=Path, help="write the JSON record here (default stdout)")
    parser.add_argument("--label", help="free text copied into the record")
    start = parser.add_argument_group("starting together (several clients at once)")
    start.add_argument("--ready-file", type=Path, help="create this file once started up (and primed, with "
                       "--resumption), before connecting")
    start.add_argument("--start-file", type=Path, help="connect only once this file exists (bounded by --timeout)")
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--server-name", help="TLS server name (default --host)")
    tls.add_argument("--ca-cert", type=Path, help="CA (or the self-signed certificate) to trust")
    tls.add_argument("--insecure", action="store_true", help="do not verify the certificate")
    tls.add_argument("--keylog", type=Path, help="append the TLS secrets to this file in NSS key log format "
                     "(Wireshark: tls.keylog_file), to decrypt the captures")
    tls.add_argument("--resumption", choices=RESUMPTION_MODES, default="none",
                     help="none: a new connection; ticket: a priming connection receives a session ticket "
                          "and the measured one resumes with it; 0rtt: the same, its requests sent as 0-RTT "
                          "data (the record's times are the measured connection's; 0rtt: the QUIC clients only)")


@dataclass(frozen=True)
class StartBarrier:
    """``--ready-file`` and ``--start-file``: a client says it is ready, then waits for the
    start, so that downloads sharing a link begin together whatever each client's start-up
    took. A client that resumes passes it after its priming connection, which then stays out
    of the run's captures and statistics."""

    ready_file: Path | None = None
    start_file: Path | None = None
    timeout: float = 60.0

    def wait(self) -> None:
        if self.ready_file is not None:
            self.ready_file.touch()
        if self.start_file is None:
            return
        deadline = time.monotonic() + self.timeout
        while not self.start_file.exists():
            if time.monotonic() > deadline:
                raise QuicbedError(f"{self.start_file} did not appear within {self.timeout:g} s")
            time.sleep(0.001)


@dataclass(kw_only=True)
class RequestSettings:
    """What every client is asked to fetch, from where, within which limits, and its TLS
    options (each client's ``ClientSettings`` adds how it fetches)."""

    host: str
    paths: list[str]
    port: int
    parallel: int = 6
    timeout: float = 60.0
    server_name: str | None = None
    ca_file: Path | None = None
    insecure: bool = False
    keylog: Path | None = None  # NSS key log file the TLS secrets are appended to
    page: str | None = None
    label: str | None = None
    resumption: str = "none"
    barrier: StartBarrier = StartBarrier()

    @property
    def primes(self) -> bool:
        """Whether a priming connection comes first (and the client passes the barrier after it)."""
        return self.resumption != "none"

    def check(self, resumptions: tuple[str, ...] = ("none",)) -> None:
        """Raise a QuicbedError for a setting out of range; ``resumptions``: the modes this
        client can make."""
        if self.resumption not in resumptions:
            can = [mode for mode in resumptions if mode != "none"]
            raise QuicbedError(f"--resumption {self.resumption}: this client "
                               f"{'resumes with ' + ' or '.join(can) if can else 'makes new connections only'}; "
                               "the QUIC clients also send 0-RTT data (0rtt)")
        if not self.paths:
            raise QuicbedError("nothing to fetch: give --path or --manifest with --page")
        if self.parallel < 1:
            raise QuicbedError("--parallel must be at least 1")
        if self.timeout <= 0:
            raise QuicbedError("--timeout must be positive")


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """:class:`RequestSettings`'s fields from the arguments of :func:`add_request_arguments`."""
    return {"host": args.host, "port": args.port, "paths": requested_paths(args), "parallel": args.parallel,
            "timeout": args.timeout, "server_name": args.server_name, "ca_file": args.ca_cert,
            "insecure": args.insecure, "keylog": args.keylog, "page": args.page, "label": args.label,
            "resumption": args.resumption,
            "barrier": StartBarrier(args.ready_file, args.start_file, args.timeout)}


@dataclass
class ObjectTiming:
    """One object's request, its times on the client's monotonic clock."""

    path: str
    start: float  # the request was written
    status: int | None = None
    first_byte: float | None = None
    end: float | None = None
    size: int = 0

    def to_dict(self, origin: float = 0.0) -> dict[str, Any]:
        """The record's entry, times as offsets from ``origin``."""
        def offset(value: float | None) -> float | None:
            return None if value is None else value - origin

        return {"path": self.path, "status": self.status, "start": offset(self.start),
                "first_byte": offset(self.first_byte), "end": offset(self.end), "size": self.size}


def requested_paths(args: argparse.Namespace) -> list[str]:
    """The --path objects, then those of --page from the manifest."""
    paths = list(args.path)
    if args.page:
        if args.manifest is None:
            raise QuicbedError("--page needs --manifest")
        paths += [item["path"] for item in page_objects(load_manifest(args.manifest), args.page)]
    return paths


def base_record(tool: str, settings: RequestSettings) -> dict[str, Any]:
    """The keys shared by all clients' records, before a run fills them in."""
    return {
        "tool": tool,
        "quicbed_version": __version__,
        "label": settings.label,
        "server": {"host": settings.host, "port": settings.port, "address": None},
        "request": {"page": settings.page, "paths": list(settings.paths), "parallel": settings.parallel,
                    "timeout": settings.timeout, "resumption": settings.resumption},
        "started_at": None,  # wall clock, seconds since the epoch
        "handshake_time": None,  # connect -> (TLS/QUIC) handshake complete
        "ttfb": None,  # first request sent -> first response byte
        "completion_time": None,  # first request sent -> last byte (download time / PLT)
        "total_time": None,  # connect -> last byte
        "bytes": 0,  # response body bytes
        "objects_completed": 0,
        "objects": [],  # per object: start, first_byte, end (offsets from started_at), size
        "transport": None,  # the client's transport counters
        "socket": None,
        "qlog": None,
        "ok": False,
        "error": None,
    }


def run_client(args: argparse.Namespace, make_settings: Callable[[argparse.Namespace], S],
               download: Callable[[S], dict[str, Any]]) -> int:
    """A client's main: settings from the arguments, the start barrier (the client passes it
    itself after priming), the download, the record. Exit status 2 on bad arguments (or a
    start file that never came), else as :func:`emit`."""
    try:
        settings = make_settings(args)
        if not settings.primes:
            settings.barrier.wait()
    except QuicbedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return emit(download(settings), args.output)


def emit(record: dict[str, Any], output: Path | None) -> int:
    """Write the record to ``output`` (or print it); the client's exit status: 0 if ok, else 1."""
    text = json.dumps(record, indent=1)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    if record["error"]:
        print(f"error: {record['error']}", file=sys.stderr)
    return 0 if record["ok"] else 1
