"""What every download client shares (HTTP/3 and TCP alike): its request options, the JSON
record it writes (:class:`ClientRecord`, which the runner reads), and how the record is
emitted."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict, TypeVar

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
    what.add_argument("--manifest", type=Path, help="manifest.json (or its directory) of the served content")
    what.add_argument("--page", help="page (or bulk object) name in the manifest")
    parser.add_argument("--parallel", type=int, default=6, help=parallel_help)
    parser.add_argument("--timeout", type=float, default=60.0, help="overall limit in seconds")
    parser.add_argument("--output", type=Path, help="write the JSON record here (default stdout)")
    parser.add_argument("--label", help="free text copied into the record")
    start = parser.add_argument_group("starting together (several clients at once)")
    start.add_argument(
        "--ready-file",
        type=Path,
        help="create this file once started up (and primed, with --resumption), before connecting",
    )
    start.add_argument("--start-file", type=Path, help="connect only once this file exists (bounded by --timeout)")
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--server-name", help="TLS server name (default --host)")
    tls.add_argument("--ca-cert", type=Path, help="CA (or the self-signed certificate) to trust")
    tls.add_argument("--insecure", action="store_true", help="do not verify the certificate")
    tls.add_argument(
        "--keylog",
        type=Path,
        help="append the TLS secrets to this file in NSS key log format "
        "(Wireshark: tls.keylog_file), to decrypt the captures",
    )
    tls.add_argument(
        "--resumption",
        choices=RESUMPTION_MODES,
        default="none",
        help="none: a new connection; ticket: a priming connection receives a session ticket "
        "and the measured one resumes with it; 0rtt: the same, its requests sent as 0-RTT "
        "data (the record's times are the measured connection's; 0rtt: the QUIC clients only)",
    )


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
            raise QuicbedError(
                f"--resumption {self.resumption}: this client "
                f"{'resumes with ' + ' or '.join(can) if can else 'makes new connections only'}; "
                "the QUIC clients also send 0-RTT data (0rtt)"
            )
        if not self.paths:
            raise QuicbedError("nothing to fetch: give --path or --manifest with --page")
        if self.parallel < 1:
            raise QuicbedError("--parallel must be at least 1")
        if self.timeout <= 0:
            raise QuicbedError("--timeout must be positive")


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """:class:`RequestSettings`'s fields from the arguments of :func:`add_request_arguments`."""
    return {
        "host": args.host,
        "port": args.port,
        "paths": requested_paths(args),
        "parallel": args.parallel,
        "timeout": args.timeout,
        "server_name": args.server_name,
        "ca_file": args.ca_cert,
        "insecure": args.insecure,
        "keylog": args.keylog,
        "page": args.page,
        "label": args.label,
        "resumption": args.resumption,
        "barrier": StartBarrier(args.ready_file, args.start_file, args.timeout),
    }


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

        return {
            "path": self.path,
            "status": self.status,
            "start": offset(self.start),
            "first_byte": offset(self.first_byte),
            "end": offset(self.end),
            "size": self.size,
        }


def requested_paths(args: argparse.Namespace) -> list[str]:
    """The --path objects, then those of --page from the manifest."""
    paths = list(args.path)
    if args.page:
        if args.manifest is None:
            raise QuicbedError("--page needs --manifest")
        paths += [item["path"] for item in page_objects(load_manifest(args.manifest), args.page)]
    return paths


class ServerEndpoint(TypedDict):
    """A client record's ``server``: where it downloaded from."""

    host: str
    port: int
    address: str | None  # the address it connected to (null until resolved)


class RequestAsked(TypedDict):
    """A client record's ``request``: what the client was asked to fetch (its options)."""

    page: str | None
    paths: list[str]
    parallel: int
    timeout: float
    resumption: str


#: the fields of :class:`ClientRecord` that only some clients write (each says which)
OPTIONAL_FIELDS = (
    "aioquic_version",
    "protocol",
    "profile",
    "knobs",
    "resumption",
    "implementation",
    "versions",
    "engine",
    "curl_version",
    "curl_messages",
    "connections",
    "cpu",
    "timing",
    "device",
)


@dataclass
class ClientRecord:
    """A download client's JSON record (a run folder's ``client.json``): what it was asked,
    how it went, its times and its transport's counters. Times are seconds: ``started_at`` on
    the wall clock, the others durations from it (objects: offsets from it).

    Every client writes the fields down to ``error`` (:func:`base_record` builds them; the
    native client receives them as ``--record-template`` and fills them in, in
    native/quinn/src/client.rs); the fields after it are what some clients add. ``to_dict``
    writes those when they are set, or when the record was read with them (the TCP client
    writes ``curl_version: null``)."""

    tool: str = ""  # quicbed-quic-client (aioquic and quinn) or quicbed-tcp-client
    quicbed_version: str = __version__
    label: str | None = None  # --label, copied
    server: ServerEndpoint = field(default_factory=lambda: ServerEndpoint(host="", port=0, address=None))
    request: RequestAsked = field(
        default_factory=lambda: RequestAsked(page=None, paths=[], parallel=6, timeout=60.0, resumption="none")
    )
    started_at: float | None = None  # wall clock, seconds since the epoch (a resumed run: the measured connection's)
    handshake_time: float | None = None  # connect -> (TLS/QUIC) handshake complete
    ttfb: float | None = None  # first request sent -> first response byte
    completion_time: float | None = None  # first request sent -> last byte (download time / PLT)
    total_time: float | None = None  # connect -> last byte
    bytes: int = 0  # response body bytes
    objects_completed: int = 0
    #: per object: path, status, start, first_byte, end (offsets from started_at), size (the
    #: TCP client adds its connection, HTTP version and error)
    objects: list[dict[str, Any]] = field(default_factory=list)
    transport: dict[str, Any] | None = None  # the client's transport counters (names shared where meanings are)
    socket: dict[str, Any] | None = None  # the UDP socket's buffers (QUIC) or the TCP sysctls
    qlog: list[str] | None = None  # the qlog files the client wrote
    ok: bool = False
    error: str | None = None
    # -- what some clients add
    aioquic_version: str | None = None  # aioquic client (the TCP client: null)
    protocol: str | None = None  # "h3" (QUIC clients) or the TCP client's HTTP version
    profile: str | None = None  # the transport profile (the TCP client: its protocol)
    knobs: dict[str, Any] | None = None  # the profile's resolved knobs
    #: --resumption ticket or 0rtt: asked, the priming connection's times, tickets received
    #: and offered, early_data_accepted (quinn: the address-validation tokens too)
    resumption: dict[str, Any] | None = None
    implementation: str | None = None  # the native client: "quinn"
    versions: dict[str, Any] | None = None  # the native client: its crates' versions
    engine: str | None = None  # TCP client: "python" or "curl"
    curl_version: str | None = None  # TCP client with the curl engine
    curl_messages: list[str] | None = None  # TCP client: curl's last messages, when it said any
    connections: int | None = None  # TCP client: TCP connections opened
    cpu: dict[str, Any] | None = None  # TCP client: CPU seconds of the client process (or of curl)
    timing: str | None = None  # TCP client: "exact", or "approximate" (curl engine, several objects)
    #: QUIC clients with --client-device: the device, its time per datagram received and sent,
    #: and ``applied``: datagrams charged, what was added per datagram in this clock, slept in all
    device: dict[str, Any] | None = None
    #: keys of a record read that this quicbed does not know (e.g. a native binary built from
    #: other sources): kept, and written again by :meth:`to_dict`
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: the optional fields the record was read with (written again even when null)
    carried: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (copies): the shared fields, the optional ones set or carried, ``extra``."""
        record = asdict(self)
        extra, carried = record.pop("extra"), record.pop("carried")
        for name in OPTIONAL_FIELDS:
            if record[name] is None and name not in carried:
                del record[name]
        return {**record, **extra}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> ClientRecord:
        """A record as a client wrote it: fields it lacks take their defaults, keys this quicbed
        does not know go to ``extra`` (kept: a run is not lost to a key more). Values are taken
        as written, unchecked: readers judge them."""
        known = {name: value for name, value in record.items() if name in CLIENT_RECORD_FIELDS}
        return cls(
            **known,
            extra={key: value for key, value in record.items() if key not in CLIENT_RECORD_FIELDS},
            carried=frozenset(name for name in OPTIONAL_FIELDS if name in record),
        )

    @property
    def ended_at(self) -> float | None:
        """Wall clock of the last byte (``started_at + total_time``), None when the record does not say."""
        if isinstance(self.started_at, (int, float)) and isinstance(self.total_time, (int, float)):
            return self.started_at + self.total_time
        return None

    @property
    def transfer(self) -> tuple[float, float] | None:
        """Wall clock of the connect and of the last byte, None when the record does not say
        (or says the transfer took no time)."""
        start, seconds = self.started_at, self.total_time
        if not isinstance(start, (int, float)) or not isinstance(seconds, (int, float)) or seconds <= 0:
            return None
        return start, start + seconds


#: every key a client record may have (the bookkeeping fields ``extra`` and ``carried`` are none)
CLIENT_RECORD_FIELDS = tuple(f.name for f in fields(ClientRecord) if f.name not in ("extra", "carried"))
#: the keys every client's record has
SHARED_FIELDS = tuple(name for name in CLIENT_RECORD_FIELDS if name not in OPTIONAL_FIELDS)


def base_record(tool: str, settings: RequestSettings) -> dict[str, Any]:
    """The keys shared by all clients' records (:data:`SHARED_FIELDS`), before a run fills them in."""
    return ClientRecord(
        tool=tool,
        label=settings.label,
        server=ServerEndpoint(host=settings.host, port=settings.port, address=None),
        request=RequestAsked(
            page=settings.page,
            paths=list(settings.paths),
            parallel=settings.parallel,
            timeout=settings.timeout,
            resumption=settings.resumption,
        ),
    ).to_dict()


def run_client(
    args: argparse.Namespace, make_settings: Callable[[argparse.Namespace], S], download: Callable[[S], dict[str, Any]]
) -> int:
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
