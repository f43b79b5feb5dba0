"""HTTP/1.1 for the python engine: one keep-alive connection asking for one object at a
time, the response header parsed here (Content-Length bodies only)."""

from __future__ import annotations

import asyncio

from quicbed.apps.tcp.connection import (
    MAX_HEADER_BYTES,
    Connection,
    ConnectionRecord,
    Fetch,
    FetchError,
    TcpObjectTiming,
)


class Http1Connection(Connection):
    """HTTP/1.1 keep-alive: one request at a time, Content-Length bodies."""

    def __init__(self, fetch: Fetch, record: ConnectionRecord) -> None:
        super().__init__(fetch, record)
        self.current: TcpObjectTiming | None = None
        self.header = bytearray()
        self.remaining = 0
        self.in_body = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.start_next()

    def start_next(self) -> None:
        path = self.fetch.next_path()
        if path is None:
            self.current = None
            self.finish()
            return
        settings = self.fetch.settings
        authority = settings.server_name or settings.host
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {authority}:{settings.port}\r\n"
            f"User-Agent: {settings.user_agent}\r\nAccept: */*\r\n\r\n"
        ).encode()
        self.current = TcpObjectTiming(
            path, self.loop.time(), connection=self.record.local_port or 0, http_version="1.1"
        )
        self.fetch.timings.append(self.current)
        self.record.objects += 1
        self.header.clear()
        self.in_body = False
        assert self.transport is not None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        now = self.loop.time()
        view = memoryview(data)
        while view:
            current = self.current
            if current is None:
                self.fetch.fail(f"unexpected {len(view)} bytes from the server")
                return
            if current.first_byte is None:
                current.first_byte = now
            if not self.in_body:
                self.header += view
                end = self.header.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.header) > MAX_HEADER_BYTES:
                        self.fetch.fail("response header too large")
                    return
                rest = bytes(self.header[end + 4 :])
                try:
                    self._parse_header(bytes(self.header[:end]), current)
                except FetchError as error:
                    self.fetch.fail(str(error))
                    return
                view = memoryview(rest)
                self.in_body = True
            take = min(self.remaining, len(view))
            current.size += take
            self.remaining -= take
            view = view[take:]
            if self.remaining == 0:
                current.end = now
                self.fetch.object_done(current)
                self.start_next()

    def _parse_header(self, text: bytes, current: TcpObjectTiming) -> None:
        lines = text.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise FetchError(f"bad status line {lines[0]!r}")
        current.status = int(parts[1])
        current.http_version = parts[0][5:]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise FetchError(f"chunked response for {current.path} (not supported)")
        length = headers.get("content-length")
        if length is None or not length.isdigit():
            raise FetchError(f"no Content-Length for {current.path}")
        self.remaining = int(length)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and (self.current is not None or self.fetch.queue):
            self.fetch.fail(f"connection closed by the server{f': {exc}' if exc else ''}")
        self.closed = True
