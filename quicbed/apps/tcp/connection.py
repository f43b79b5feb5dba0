"""What the python engine's HTTP/1.1 and HTTP/2 connections share: one fetch's state (the
paths still to ask for, the objects' timings), each connection's own record, TCP_INFO read
from our own sockets, and the asyncio protocol both HTTP versions build on."""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

from quicbed.apps.record import ObjectTiming
from quicbed.apps.tcp import tcpinfo
from quicbed.apps.tcp.settings import ClientSettings

MAX_HEADER_BYTES = 64 * 1024


@dataclass(kw_only=True)
class TcpObjectTiming(ObjectTiming):
    """Also the connection (its local port) and HTTP version that carried the object."""

    connection: int
    http_version: str | None = None
    error: str | None = None

    def to_dict(self, origin: float = 0.0) -> dict[str, Any]:
        item = {**super().to_dict(origin), "connection": self.connection, "http_version": self.http_version}
        if self.error:
            item["error"] = self.error
        return item


@dataclass
class ConnectionRecord:
    """One connection's instants (monotonic) and what its TLS handshake settled."""

    index: int
    connect_start: float
    connected: float | None = None  # TCP handshake done
    tls_done: float | None = None
    local_port: int | None = None
    alpn: str | None = None
    tls_version: str | None = None
    resumed: bool | None = None  # TLS session resumed (a ticket accepted)
    objects: int = 0
    tcp_info: tcpinfo.TcpInfo | None = None

    def to_dict(self, origin: float) -> dict[str, Any]:
        def offset(value: float | None) -> float | None:
            return None if value is None else value - origin

        return {
            "index": self.index,
            "local_port": self.local_port,
            "connect_start": offset(self.connect_start),
            "connected": offset(self.connected),
            "tls_done": offset(self.tls_done),
            "alpn": self.alpn,
            "tls_version": self.tls_version,
            "resumed": self.resumed,
            "objects": self.objects,
        }


class FetchError(Exception):
    """The fetch failed: the record's ``error``."""


class Fetch:
    """State shared by the connections of one fetch."""

    def __init__(self, settings: ClientSettings, loop: asyncio.AbstractEventLoop) -> None:
        self.settings = settings
        self.loop = loop
        self.queue: deque[str] = deque(settings.paths)
        self.timings: list[TcpObjectTiming] = []
        self.connections: list[ConnectionRecord] = []
        self.completed = 0
        self.done: asyncio.Future[None] = loop.create_future()
        self.address: Any = None

    def next_path(self) -> str | None:
        return self.queue.popleft() if self.queue else None

    def object_done(self, timing: TcpObjectTiming) -> None:
        self.completed += 1
        if timing.status != 200 and not timing.error:
            timing.error = f"HTTP status {timing.status} for {timing.path}"
        if self.completed == len(self.settings.paths) and not self.done.done():
            self.done.set_result(None)

    def fail(self, message: str) -> None:
        if not self.done.done():
            self.done.set_exception(FetchError(message))


def read_tcp_info(sock: Any) -> tcpinfo.TcpInfo | None:
    """TCP_INFO of one of our sockets (asyncio's TransportSocket or a socket)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)
        congestion = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
        local, peer = sock.getsockname(), sock.getpeername()
    except OSError:
        return None
    return tcpinfo.from_raw(raw, local=local, remote=peer, congestion_control=congestion.split(b"\0", 1)[0].decode())


class Connection(asyncio.Protocol):
    """What the HTTP/1.1 and HTTP/2 protocols share."""

    def __init__(self, fetch: Fetch, record: ConnectionRecord) -> None:
        self.fetch = fetch
        self.record = record
        self.loop = fetch.loop
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.record.tls_done = self.loop.time()  # asyncio calls this once TLS is up
        self.transport = transport  # type: ignore[assignment]  # asyncio passes a BaseTransport; TCP gives a Transport
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.record.alpn = ssl_object.selected_alpn_protocol()
            self.record.tls_version = ssl_object.version()
            self.record.resumed = ssl_object.session_reused

    def finish(self) -> None:
        """Read TCP_INFO, then close (nothing left for this connection)."""
        if self.closed or self.transport is None:
            return
        self.record.tcp_info = read_tcp_info(self.transport.get_extra_info("socket"))
        self.closed = True
        self.transport.close()

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            if self.record.tcp_info is None:
                self.record.tcp_info = read_tcp_info(self.transport.get_extra_info("socket"))
            self.closed = True
            self.transport.abort()
