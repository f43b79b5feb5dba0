"""HTTP/3 server: serves a directory of objects over aioquic with a transport profile.

    python -m quicbed.apps.quic.server --root /srv/quicbed --cert cert.pem --key key.pem \\
        --port 4433 --profile bquic [--qlog-dir DIR] [--ready-file FILE] [--stats-file FILE]

Once listening it prints one line starting with ``quicbed-quic-server ready`` and, with
``--ready-file``, writes that file (JSON: address, port, pid, profile, knobs, socket
buffers) so a runner can wait for it. SIGTERM or SIGINT stops it cleanly: open qlog traces
are written, the ready file is removed. ``--stats-file`` gets one JSON line per ended
connection with the server's transport counters.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.tls import SessionTicket

from quicbed.apps.objects import content_type
from quicbed.apps.quic import aioquic_hooks
from quicbed.apps.quic.profiles import (
    TransportProfile,
    add_profile_arguments,
    profile_from_arguments,
)
from quicbed.apps.quic.qlog import QLOG_MODES, QlogWriter, make_qlog_writer
from quicbed.apps.quic.sockets import DEFAULT_BUFFER, BufferReport, bound_udp_socket
from quicbed.atomic import write_text_atomic
from quicbed.errors import QuicbedError
from quicbed.spec.units import parse_size

READY_PREFIX = "quicbed-quic-server ready"
SERVER_HEADER = b"quicbed"


@dataclass
class ServerSettings:
    root: Path
    certificate: Path
    private_key: Path
    profile: TransportProfile
    host: str = "0.0.0.0"
    port: int = 4433
    qlog_dir: Path | None = None
    qlog_mode: str = "filtered"
    socket_buffer: int = DEFAULT_BUFFER
    ready_file: Path | None = None
    stats_file: Path | None = None
    idle_timeout: float = 60.0


@dataclass
class ServerState:
    settings: ServerSettings
    root: Path
    qlog: QlogWriter | None
    connections: int = 0
    requests: int = 0
    open_protocols: set[Http3ServerProtocol] = field(default_factory=set)

    def record_connection(self, protocol: Http3ServerProtocol) -> None:
        """Once per connection, when it ended (or at shutdown): a --stats-file line."""
        if protocol not in self.open_protocols:
            return
        self.open_protocols.discard(protocol)
        if self.settings.stats_file is None:
            return
        entry = {
            "ended_at": time.time(),
            "peer": _address_text(protocol.peer),
            "requests": protocol.requests,
            "body_bytes": protocol.body_bytes,
            **self.settings.profile.record(),
            "transport": protocol.hooks.stats(),
        }
        with open(self.settings.stats_file, "a", encoding="utf-8") as output:
            output.write(json.dumps(entry) + "\n")


def _address_text(address: Any) -> str | None:
    if not address:
        return None
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def resolve_object(root: Path, raw_path: str) -> Path | None:
    """The file under ``root`` for a request path, or None (missing, outside, not a file)."""
    path = unquote(urlsplit(raw_path).path)
    candidate = (root / path.lstrip("/")).resolve()
    if candidate != root and root not in candidate.parents:
        return None
    return candidate if candidate.is_file() else None


class Http3ServerProtocol(QuicConnectionProtocol):
    """One HTTP/3 connection: GET requests answered with files from the served root."""

    def __init__(self, quic: QuicConnection, stream_handler: Any = None, *, state: ServerState) -> None:
        self.hooks = aioquic_hooks.install(quic, state.settings.profile)
        super().__init__(quic, stream_handler)
        self._state = state
        self._http = H3Connection(quic)
        self.requests = 0
        self.body_bytes = 0
        self.peer: Any = None
        state.connections += 1
        state.open_protocols.add(self)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        if self.peer is None:
            self.peer = addr
        super().datagram_received(data, addr)

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ConnectionTerminated):
            self._state.record_connection(self)
            return
        for http_event in self._http.handle_event(event):
            if isinstance(http_event, HeadersReceived):
                self._answer(http_event.stream_id, dict(http_event.headers))

    def _answer(self, stream_id: int, headers: dict[bytes, bytes]) -> None:
        self.requests += 1
        self._state.requests += 1
        method = headers.get(b":method", b"").decode(errors="replace")
        path = headers.get(b":path", b"/").decode(errors="replace")
        if method not in ("GET", "HEAD"):
            self._respond(stream_id, 405, b"method not allowed\n", "text/plain")
            return
        target = resolve_object(self._state.root, path)
        if target is None:
            self._respond(stream_id, 404, b"not found\n", "text/plain")
            return
        body = target.read_bytes()
        self._respond(stream_id, 200, b"" if method == "HEAD" else body, content_type(path), length=len(body))

    def _respond(self, stream_id: int, status: int, body: bytes, kind: str, length: int | None = None) -> None:
        self._http.send_headers(
            stream_id,
            [
                (b":status", str(status).encode()),
                (b"server", SERVER_HEADER),
                (b"content-type", kind.encode()),
                (b"content-length", str(len(body) if length is None else length).encode()),
            ],
            end_stream=not body,
        )
        if body:
            self._http.send_data(stream_id, body, end_stream=True)
            self.body_bytes += len(body)
        self.transmit()


def make_configuration(settings: ServerSettings, qlog: QlogWriter | None) -> QuicConfiguration:
    configuration = QuicConfiguration(
        is_client=False, alpn_protocols=list(H3_ALPN), idle_timeout=settings.idle_timeout, quic_logger=qlog
    )
    configuration.load_cert_chain(str(settings.certificate), str(settings.private_key))
    return aioquic_hooks.configure(configuration, settings.profile)


@dataclass
class RunningServer:
    """A listening server (for embedding in tests or a runner)."""

    transport: asyncio.DatagramTransport
    server: QuicServer
    state: ServerState
    address: tuple[Any, ...]
    buffers: BufferReport

    def ready_info(self) -> dict[str, Any]:
        return {
            "host": self.address[0],
            "port": self.address[1],
            "pid": os.getpid(),
            **self.state.settings.profile.record(),
            "aioquic_version": aioquic_hooks.aioquic_version(),
            "socket": self.buffers.to_dict(),
            "qlog_dir": str(self.state.settings.qlog_dir) if self.state.settings.qlog_dir else None,
        }

    async def aclose(self, grace: float = 2.0) -> None:
        """Close connections (CONNECTION_CLOSE), give their closing periods up to ``grace``
        seconds to end (so their stats and qlog are complete), stop listening, then write
        whatever is left."""
        for protocol in list(self.state.open_protocols):
            protocol.close()
        deadline = asyncio.get_running_loop().time() + grace
        while self.state.open_protocols and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for protocol in list(self.state.open_protocols):
            self.state.record_connection(protocol)
        self.server.close()
        if self.state.qlog is not None:
            self.state.qlog.close()


class SessionTickets:
    """The TLS session tickets the server issued, each usable once (so a 0-RTT request cannot
    be replayed with it): what lets a client resume, with or without 0-RTT data, as long as
    the server runs."""

    def __init__(self) -> None:
        self._tickets: dict[bytes, SessionTicket] = {}

    def add(self, ticket: SessionTicket) -> None:
        self._tickets[ticket.ticket] = ticket

    def pop(self, label: bytes) -> SessionTicket | None:
        return self._tickets.pop(label, None)


async def start_server(settings: ServerSettings) -> RunningServer:
    """Bind, listen and return; the caller runs the loop and calls close()."""
    aioquic_hooks.require_compatible()
    root = settings.root.resolve()
    if not root.is_dir():
        raise QuicbedError(f"{settings.root}: served root is not a directory")
    qlog = make_qlog_writer(settings.qlog_dir, settings.qlog_mode)
    configuration = make_configuration(settings, qlog)
    state = ServerState(settings=settings, root=root, qlog=qlog)
    sock, buffers = bound_udp_socket(settings.host, settings.port, settings.socket_buffer)
    loop = asyncio.get_running_loop()
    tickets = SessionTickets()
    transport, server = await loop.create_datagram_endpoint(
        lambda: QuicServer(
            configuration=configuration,
            create_protocol=functools.partial(Http3ServerProtocol, state=state),
            session_ticket_fetcher=tickets.pop,
            session_ticket_handler=tickets.add,
        ),
        sock=sock,
    )
    return RunningServer(transport=transport, server=server, state=state, address=sock.getsockname(), buffers=buffers)


def _write_ready_file(path: Path, info: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(info, indent=1) + "\n")


async def serve_forever(settings: ServerSettings) -> None:
    running = await start_server(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    info = running.ready_info()
    warning = running.buffers.warning()
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    if settings.ready_file is not None:
        _write_ready_file(settings.ready_file, info)
    print(
        f"{READY_PREFIX} host={info['host']} port={info['port']} profile={info['profile']} "
        f"knobs={json.dumps(info['knobs'], separators=(',', ':'))}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await running.aclose()
        if settings.ready_file is not None:
            settings.ready_file.unlink(missing_ok=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.quic.server", description="Serve a directory over HTTP/3 (aioquic)."
    )
    parser.add_argument("--root", required=True, type=Path, help="directory to serve as /")
    parser.add_argument("--cert", required=True, type=Path, help="PEM certificate (chain)")
    parser.add_argument("--key", required=True, type=Path, help="PEM private key")
    parser.add_argument("--host", default="0.0.0.0", help="bind address (default 0.0.0.0; '::' for IPv6 and IPv4)")
    parser.add_argument("--port", type=int, default=4433, help="UDP port (0: any free port)")
    parser.add_argument("--qlog-dir", type=Path, default=None, help="write qlog files here")
    parser.add_argument(
        "--qlog-mode",
        choices=QLOG_MODES,
        default="filtered",
        help="filtered (default): what analysis needs; full: every event",
    )
    parser.add_argument(
        "--socket-buffer", default=str(DEFAULT_BUFFER), metavar="SIZE", help="SO_RCVBUF/SO_SNDBUF size (default 4MiB)"
    )
    parser.add_argument("--ready-file", type=Path, default=None, help="create this file (JSON) once listening")
    parser.add_argument("--stats-file", type=Path, default=None, help="append one JSON line per ended connection")
    parser.add_argument("--idle-timeout", type=float, default=60.0, metavar="SECONDS")
    add_profile_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = ServerSettings(
            root=args.root,
            certificate=args.cert,
            private_key=args.key,
            profile=profile_from_arguments(args),
            host=args.host,
            port=args.port,
            qlog_dir=args.qlog_dir,
            qlog_mode=args.qlog_mode,
            socket_buffer=parse_size(args.socket_buffer, "--socket-buffer"),
            ready_file=args.ready_file,
            stats_file=args.stats_file,
            idle_timeout=args.idle_timeout,
        )
        asyncio.run(serve_forever(settings))
    except QuicbedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
