"""HTTP/1.1 and HTTP/2 client over TCP+TLS: fetches an object or a page, writes a JSON record
with the same layout as the HTTP/3 client's (:mod:`quicbed.apps.quic.client`).

    python -m quicbed.apps.tcp.client --host 10.0.0.2 --port 8443 --http 2 \\
        --path /bulk/10MB.bin --ca-cert cert.pem --output run.json
    python -m quicbed.apps.tcp.client --host 10.0.0.2 --port 8443 --http 1.1 \\
        --manifest /srv/quicbed --page p86-839k --parallel 6 --output page.json

How a page is fetched: ``--parallel N`` (default 6, as the HTTP/3 client) requests in
flight at once. HTTP/2 puts them all on ONE connection as concurrent streams; HTTP/1.1
opens up to N parallel keep-alive connections, like browsers (6 per host), each taking
the next object when its current one is done.

Why our own client (engine ``python``, the default) and not curl: it was tried first. curl
7.88 (Debian 12) writes its per-transfer reports in batches, up to ~20 ms after the
transfers ended, and times a transfer that waited for a multiplexed connection from two
different start points, so per-object times of a page - the E1b/E3 metric - could not be
had exactly from it. This client is asyncio (the same event-loop model as the aioquic
client it is compared with) with OpenSSL doing TLS, the ``h2`` package framing HTTP/2,
and HTTP/1.1 parsed here; every instant is taken on one monotonic clock when the bytes
are handed over by the kernel, and TCP_INFO comes from its own sockets (getsockopt, read
just before each connection closes). Its CPU cost is in every record (``cpu``) and its
limit is measured in bench/endpoints.py (docs/endpoints.md): far above the rates quicbed
emulates. ``--engine curl`` (:mod:`quicbed.apps.tcp.curl`) remains for reference and for a
curl with HTTP/3; its record has the same layout, with ``timing: approximate`` for pages.

Record times (as the HTTP/3 client's): ``started_at`` is the wall clock when the first
connection started; every other time is a monotonic duration in seconds from that moment.
``handshake_time`` TCP connect + TLS handshake of the first connection, ``ttfb`` first
request sent -> first response byte, ``completion_time`` first request sent -> last byte
(download time / page load time), ``total_time`` first connect -> last byte. Per object:
``start`` (request written), ``first_byte``, ``end``, ``size``, ``connection`` (local port).
``transport``: this side's TCP_INFO per connection and sums over connections, named as in
the HTTP/3 record where they mean the same; ``ack_only_per_data_packet_received`` (pure
ACKs sent per data segment received) is the counterpart of the HTTP/3 client's
``ack_only_per_ack_eliciting_received``. The exit status is 0 on success, 1 on failure or
timeout (the record then has an ``error``), 2 on bad arguments.

``--resumption ticket``: a priming connection asks for an object the server does not have
and keeps the TLS 1.3 session ticket that comes with the answer; every measured connection
then resumes with it (no certificate on the wire), and ``record["resumption"]`` says how it
went. No 0-RTT: Python's ssl module cannot send early data.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import resource
import socket
import ssl
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# imported here, not when the first connection is made: importing h2 took 12-38 ms, which
# fell between the TCP handshake and the ClientHello and counted as connection set-up
from h2 import events
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

from quicbed.apps.record import (
    PRIMING_PATH,
    ObjectTiming,
    add_request_arguments,
    base_record,
    request_fields,
    run_client,
)
from quicbed.apps.tcp import tcpinfo
from quicbed.apps.tcp.settings import DEFAULT_TCPINFO_INTERVAL, ENGINES, PROTOCOLS, ClientSettings
from quicbed.errors import QuicbedError

ALPN = {"1.1": "http/1.1", "2": "h2"}
# HTTP/2 receive windows: large, as browsers use, so flow control never limits a download
H2_STREAM_WINDOW = 16 * 1024 * 1024
H2_CONNECTION_WINDOW = 64 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
#: how long the priming connection waits for a session ticket after its answer
TICKET_WAIT = 1.0


# --------------------------------------------------------------------------- the record


def new_record(settings: ClientSettings) -> dict[str, Any]:
    """The result record, before the run fills it in: the HTTP/3 client's keys, plus
    ``engine``, ``curl_version``, ``connections``, ``cpu`` and ``timing``."""
    record = base_record("quicbed-tcp-client", settings)
    record.update({
        "aioquic_version": None,
        "engine": settings.engine,
        "curl_version": None,
        "profile": settings.protocol,
        "knobs": {"http_version": settings.http, "parallel": settings.parallel,
                  "client_congestion_control": None},
        "protocol": settings.protocol,
        "connections": 0,  # TCP connections opened
        "cpu": None,  # CPU seconds of the client process (or of curl)
        "timing": "exact",  # "approximate": curl engine, several objects
    })
    return record


def _read_sysctl(name: str) -> str | None:
    try:
        return " ".join(Path("/proc/sys", name.replace(".", "/")).read_text().split())
    except OSError:
        return None


def socket_settings(buffer: int | None = None) -> dict[str, Any]:
    return {"tcp_rmem": _read_sysctl("net.ipv4.tcp_rmem"),
            "tcp_wmem": _read_sysctl("net.ipv4.tcp_wmem"),
            "congestion_control": _read_sysctl("net.ipv4.tcp_congestion_control"),
            "rcvbuf": buffer, "autotuning": buffer is None}


def transport_summary(connections: Sequence[tcpinfo.TcpInfo], complete: bool,
                      samples: int | None = None, interval: float | None = None) -> dict[str, Any]:
    """Sums and extremes over this side's connections (the HTTP/3 record's names where they
    mean the same)."""

    def total(name: str) -> int | None:
        values = [getattr(c, name) for c in connections if getattr(c, name) is not None]
        return sum(values) if values else None

    sent, received = total("segs_out"), total("segs_in")
    data_sent, data_received = total("data_segs_out"), total("data_segs_in")
    ack_only = sent - data_sent if sent is not None and data_sent is not None else None
    main = max(connections, key=lambda c: c.bytes_received or 0, default=None)
    min_rtts = [c.min_rtt for c in connections if c.min_rtt]
    return {
        "packets_sent": sent,
        "packets_received": received,
        "data_packets_sent": data_sent,
        "data_packets_received": data_received,
        "ack_only_packets_sent": ack_only,
        "ack_only_per_data_packet_received": (ack_only / data_received
                                              if ack_only is not None and data_received else None),
        "bytes_sent": total("bytes_sent"),
        "bytes_received": total("bytes_received"),
        "retransmits": total("total_retrans"),
        "packets_lost": None,  # a TCP receiver does not see the sender's losses
        "rtt_min": min(min_rtts) if min_rtts else None,
        "rtt_smoothed": main.rtt if main else None,
        "rcv_rtt": main.rcv_rtt if main else None,
        "cwnd": main.snd_cwnd if main else None,
        "congestion_control": main.congestion_control if main else None,
        "complete": complete,  # read when each connection ended (not an earlier sample)
        "samples": samples,
        "sample_interval": interval,
        "connections": [c.to_dict() for c in connections],
    }


def fill_times(record: dict[str, Any], objects: list[dict[str, Any]], origin: float,
               expected: int) -> None:
    """Objects (absolute monotonic times) -> the record's offsets and summary times."""
    requests = [o["start"] for o in objects if o["start"] is not None]
    first_bytes = [o["first_byte"] for o in objects if o["first_byte"] is not None]
    done = [o for o in objects if o["status"] == 200 and o["end"] is not None and "error" not in o]
    for item in objects:
        for key in ("start", "first_byte", "end"):
            if item[key] is not None:
                item[key] -= origin
    record["objects"] = objects
    record["objects_completed"] = len(done)
    record["bytes"] = sum(o["size"] for o in objects)
    if requests and first_bytes:
        record["ttfb"] = min(first_bytes) - min(requests)
    if requests and done and len(done) == expected:
        last = max(o["end"] for o in done) + origin
        record["completion_time"] = last - min(requests)
        record["total_time"] = last - origin


def judge(record: dict[str, Any], expected: int, wanted_version: str) -> None:
    """Set ``ok``/``error`` from the objects (unless an error is already set)."""
    if record["error"]:
        return
    failed = [o for o in record["objects"] if o["status"] != 200 or "error" in o]
    wrong = [o for o in record["objects"] if o.get("http_version") not in (None, wanted_version)]
    if failed:
        first = failed[0]
        record["error"] = first.get("error") or f"HTTP status {first['status']} for {first['path']}"
    elif record["objects_completed"] != expected:
        record["error"] = "not every object completed"
    elif wrong:
        record["error"] = (f"asked for HTTP/{wanted_version}, got HTTP/{wrong[0]['http_version']} "
                           f"for {wrong[0]['path']}")
    else:
        record["ok"] = True


# --------------------------------------------------------------------------- python engine


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

        return {"index": self.index, "local_port": self.local_port,
                "connect_start": offset(self.connect_start), "connected": offset(self.connected),
                "tls_done": offset(self.tls_done), "alpn": self.alpn,
                "tls_version": self.tls_version, "resumed": self.resumed, "objects": self.objects}


class FetchError(Exception):
    pass


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
    return tcpinfo.from_raw(raw, local=local, remote=peer,
                            congestion_control=congestion.split(b"\0", 1)[0].decode())


class _Connection(asyncio.Protocol):
    """What the HTTP/1.1 and HTTP/2 protocols share."""

    def __init__(self, fetch: Fetch, record: ConnectionRecord) -> None:
        self.fetch = fetch
        self.record = record
        self.loop = fetch.loop
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.record.tls_done = self.loop.time()  # asyncio calls this once TLS is up
        self.transport = transport  # type: ignore[assignment]
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


class Http1Connection(_Connection):
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
        request = (f"GET {path} HTTP/1.1\r\nHost: {authority}:{settings.port}\r\n"
                   f"User-Agent: {settings.user_agent}\r\nAccept: */*\r\n\r\n").encode()
        self.current = TcpObjectTiming(path, self.loop.time(), connection=self.record.local_port or 0,
                                       http_version="1.1")
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
                rest = bytes(self.header[end + 4:])
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


class Http2Connection(_Connection):
    """HTTP/2 (h2 package): up to ``parallel`` concurrent streams on this one connection."""

    def __init__(self, fetch: Fetch, record: ConnectionRecord) -> None:
        super().__init__(fetch, record)
        self.h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.streams: dict[int, TcpObjectTiming] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # set before initiate_connection: sent in the first SETTINGS frame
        self.h2.local_settings = Settings(client=True, initial_values={
            SettingCodes.INITIAL_WINDOW_SIZE: H2_STREAM_WINDOW, SettingCodes.ENABLE_PUSH: 0,
            SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_BYTES})
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(H2_CONNECTION_WINDOW - 65535)
        self.start_requests()

    def start_requests(self) -> None:
        settings = self.fetch.settings
        limit = min(settings.parallel, self.h2.remote_settings.max_concurrent_streams)
        authority = f"{settings.server_name or settings.host}:{settings.port}".encode()
        while len(self.streams) < limit:
            path = self.fetch.next_path()
            if path is None:
                break
            stream_id = self.h2.get_next_available_stream_id()
            self.h2.send_headers(stream_id, [
                (b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority),
                (b":path", path.encode()), (b"user-agent", settings.user_agent.encode()),
                (b"accept", b"*/*")], end_stream=True)
            timing = TcpObjectTiming(path, self.loop.time(), connection=self.record.local_port or 0,
                                     http_version="2")
            self.streams[stream_id] = timing
            self.fetch.timings.append(timing)
            self.record.objects += 1
        self.flush()
        if not self.streams and not self.fetch.queue:
            self.finish()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:

        now = self.loop.time()
        try:
            received = self.h2.receive_data(data)
        except ProtocolError as error:
            self.fetch.fail(f"HTTP/2 protocol error: {error}")
            return
        ended = False
        for event in received:
            if isinstance(event, events.DataReceived):
                timing = self.streams.get(event.stream_id)
                if timing is not None:
                    timing.size += len(event.data)
                    if timing.first_byte is None:
                        timing.first_byte = now
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, events.ResponseReceived):
                timing = self.streams.get(event.stream_id)
                if timing is not None:
                    status = dict(event.headers).get(b":status", b"0")
                    timing.status = int(status) if status.isdigit() else 0
                    if timing.first_byte is None:
                        timing.first_byte = now
            elif isinstance(event, events.StreamEnded):
                timing = self.streams.pop(event.stream_id, None)
                if timing is not None:
                    timing.end = now
                    self.fetch.object_done(timing)
                    ended = True
            elif isinstance(event, events.StreamReset):
                timing = self.streams.pop(event.stream_id, None)
                if timing is not None:
                    timing.error = f"stream reset ({event.error_code!r}) for {timing.path}"
                    self.fetch.fail(timing.error)
            elif isinstance(event, events.ConnectionTerminated):
                self.fetch.fail(f"server closed the HTTP/2 connection ({event.error_code!r})")
            elif isinstance(event, events.RemoteSettingsChanged):
                ended = True  # the stream limit may have changed
        if ended:
            self.start_requests()
        else:
            self.flush()

    def finish(self) -> None:
        if self.closed or self.transport is None:
            return
        self.record.tcp_info = read_tcp_info(self.transport.get_extra_info("socket"))
        self.h2.close_connection()
        self.flush()
        super().finish()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and (self.streams or self.fetch.queue):
            self.fetch.fail(f"connection closed by the server{f': {exc}' if exc else ''}")
        self.closed = True


class ResumingContext(ssl.SSLContext):
    """An SSLContext whose TLS objects resume ``session`` (asyncio makes them with
    ``wrap_bio`` and offers no way to pass a session)."""

    session: ssl.SSLSession | None = None

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, server_side: bool = False,
                 server_hostname: str | bytes | None = None,
                 session: ssl.SSLSession | None = None) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session or self.session)


def ssl_context(settings: ClientSettings) -> ResumingContext:
    # as ssl.create_default_context for a client, in the class that can resume
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)
    if settings.ca_file:
        context.load_verify_locations(cafile=str(settings.ca_file))
    else:
        context.load_default_certs()
    if settings.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols([ALPN[settings.http]])
    if settings.keylog is not None:
        context.keylog_filename = str(settings.keylog)
    _warm(context, settings.server_name or settings.host)
    return context


def _warm(context: ssl.SSLContext, server_name: str) -> None:
    """Build one ClientHello in memory before any connection: OpenSSL's first use in a process
    (2-3 ms idle, 12 ms on a loaded 2-core host between the SYN-ACK and the ClientHello) is
    then not counted in the first connection's set-up (connect_time)."""
    hello = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=server_name)
    try:
        hello.do_handshake()
    except ssl.SSLWantReadError:
        pass  # the ClientHello is written; nothing will answer it


async def _open(fetch: Fetch, index: int, context: ssl.SSLContext) -> _Connection:
    settings = fetch.settings
    loop = fetch.loop
    infos = await loop.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _, _, _, address = infos[0]
    fetch.address = address[0]
    record = ConnectionRecord(index=index, connect_start=loop.time())
    fetch.connections.append(record)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if settings.socket_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, settings.socket_buffer)
        await loop.sock_connect(sock, address)
        record.connected = loop.time()
        record.local_port = sock.getsockname()[1]
        kind = Http2Connection if settings.http == "2" else Http1Connection
        _, protocol = await loop.create_connection(
            lambda: kind(fetch, record), sock=sock, ssl=context,
            server_hostname=settings.server_name or settings.host,
            ssl_handshake_timeout=settings.timeout)
    except BaseException:
        sock.close()
        raise
    if record.alpn != ALPN[settings.http]:
        fetch.fail(f"asked for {ALPN[settings.http]} with ALPN, the server chose {record.alpn}")
    return protocol  # type: ignore[return-value]


async def _prime(settings: ClientSettings, context: ResumingContext) -> dict[str, Any]:
    """The priming connection: one request for an object the server does not have, then up to
    TICKET_WAIT s for a session ticket, which ``context`` resumes from then on; its own times,
    never the run's."""
    loop = asyncio.get_running_loop()
    fetch = Fetch(dataclasses.replace(settings, paths=[PRIMING_PATH]), loop)
    protocol = await _open(fetch, 0, context)
    try:
        await fetch.done
        ssl_object = protocol.transport.get_extra_info("ssl_object") if protocol.transport else None
        deadline = loop.time() + TICKET_WAIT
        # TLS 1.3 tickets come after the handshake; OpenSSL reads them with the data
        while ssl_object is not None and not (ssl_object.session and ssl_object.session.has_ticket) \
                and loop.time() < deadline:
            await asyncio.sleep(0.005)
        session = ssl_object.session if ssl_object is not None else None
    finally:
        protocol.finish()
    (connection,), (timing,) = fetch.connections, fetch.timings
    if connection.connected is not None:
        # its closing packets (close_notify, FIN) come back within a round trip: let them, so
        # that none reaches the run's captures, which start once the client passes the barrier
        await asyncio.sleep(2 * (connection.connected - connection.connect_start))
    if session is None or not session.has_ticket:
        raise FetchError("no session ticket to resume with: the priming connection received none")
    context.session = session
    end = timing.end or loop.time()
    return {"handshake_time": None if connection.tls_done is None else connection.tls_done - connection.connect_start,
            "total_time": end - connection.connect_start, "status": timing.status, "error": None}


async def _fetch_python(settings: ClientSettings, record: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    context = ssl_context(settings)
    if settings.primes:
        record["resumption"] = {"asked": settings.resumption, "priming": None, "early_data_accepted": None}
        try:
            record["resumption"]["priming"] = await asyncio.wait_for(_prime(settings, context), settings.timeout)
            settings.barrier.wait()  # primed: the run's captures may start now
        except asyncio.TimeoutError:  # noqa: UP041 (distinct from TimeoutError on Python 3.10)
            record["error"] = f"priming connection: timeout after {settings.timeout:g}s"
        except (FetchError, QuicbedError) as error:
            record["error"] = str(error)
        except (OSError, ssl.SSLError) as error:
            record["error"] = f"priming connection: {type(error).__name__}: {error}"
        if record["error"]:
            return
    fetch = Fetch(settings, loop)
    wall, origin = time.time(), loop.time()
    sampler = None
    if settings.tcpinfo_log is not None:
        sampler = tcpinfo.Sampler(tcpinfo.Filter(remote_port=settings.port),
                                  settings.tcpinfo_interval, settings.tcpinfo_log).start()
    count = 1 if settings.http == "2" else min(settings.parallel, len(settings.paths))
    opening = [asyncio.ensure_future(_open(fetch, index, context)) for index in range(count)]
    protocols: list[_Connection] = []
    try:
        async def run() -> None:
            for future in asyncio.as_completed(opening):
                protocols.append(await future)
            await fetch.done

        await asyncio.wait_for(run(), timeout=settings.timeout)
    except asyncio.TimeoutError:  # noqa: UP041 (distinct from TimeoutError on Python 3.10)
        record["error"] = f"timeout after {settings.timeout:g}s"
    except FetchError as error:
        record["error"] = str(error)
    except (OSError, ssl.SSLError) as error:
        record["error"] = f"{type(error).__name__}: {error}"
    finally:
        for future in opening:
            if not future.done():
                future.cancel()
            elif (not future.cancelled() and future.exception() is None
                  and future.result() not in protocols):
                protocols.append(future.result())
        for protocol in protocols:
            protocol.abort()  # no-op for connections that finished (TCP_INFO already read)
        if sampler is not None:
            sampler.stop()
    record["server"]["address"] = fetch.address
    record["connections"] = len(fetch.connections)
    starts = [c.connect_start for c in fetch.connections]
    first = min(starts) if starts else origin
    record["started_at"] = wall + (first - origin)
    first_connection = min(fetch.connections, key=lambda c: c.connect_start, default=None)
    if first_connection is not None and first_connection.tls_done is not None:
        record["handshake_time"] = first_connection.tls_done - first_connection.connect_start
    fill_times(record, [t.to_dict() for t in sorted(fetch.timings, key=lambda t: t.start)],
               first, len(settings.paths))
    infos = [c.tcp_info for c in fetch.connections if c.tcp_info is not None]
    record["transport"] = transport_summary(
        infos, complete=all(c.tcp_info is not None for c in fetch.connections),
        samples=sampler.samples if sampler else None,
        interval=settings.tcpinfo_interval if sampler else None)
    record["transport"]["connection_times"] = [c.to_dict(first) for c in fetch.connections]
    if "resumption" in record:
        # Python's ssl keeps the newest ticket only: the one every connection offered
        record["resumption"].update(tickets_received=1, ticket_offered=True,
                                    resumed_connections=sum(bool(c.resumed) for c in fetch.connections))
        if not record["error"] and not all(c.resumed for c in fetch.connections):
            record["error"] = "the server did not resume the TLS session (it sent its certificate again)"


def _fetch_curl(settings: ClientSettings, record: dict[str, Any]) -> None:
    from quicbed.apps.tcp import curl

    build = curl.curl_build(settings.curl)
    record["curl_version"] = build.version
    feature = curl.CURL_FEATURES.get(settings.http)
    if feature and feature not in build.features:
        record["error"] = (f"curl {build.version} has no {feature} (features: "
                           f"{' '.join(sorted(build.features))})")
        return
    run = curl.run_curl(settings)
    if run.usage is not None:
        record["cpu"] = {"process": "curl", "user_s": run.usage.ru_utime,
                         "system_s": run.usage.ru_stime,
                         "cpu_s": run.usage.ru_utime + run.usage.ru_stime,
                         "max_rss_kb": run.usage.ru_maxrss}
    if run.transfers:
        objects, origin, facts = curl.objects_from_transfers(settings, run.transfers)
        record["started_at"] = run.spawned_wall + (origin - run.spawned_mono)
        record["connections"] = facts["connections"]
        record["handshake_time"] = facts["handshake_time"]
        record["server"]["address"] = facts["address"]
        fill_times(record, objects, origin, len(settings.paths))
        if len(settings.paths) > 1:
            record["timing"] = "approximate"
    connections = sorted(run.sampler.last.values(),
                         key=lambda c: run.sampler.first_seen.get(c.key, 0))
    record["transport"] = transport_summary(connections, run.complete, run.sampler.samples,
                                            settings.tcpinfo_interval)
    if run.messages:
        record["curl_messages"] = run.messages[-20:]
    if run.timed_out:
        record["error"] = f"timeout after {settings.timeout:g}s"
    elif not run.transfers:
        record["error"] = run.messages[-1] if run.messages else f"curl exit {run.returncode}"


def h2_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("h2") is not None


def fetch(settings: ClientSettings) -> dict[str, Any]:
    """Fetch ``settings.paths``; return the record (never raises for network failures)."""
    settings.check()
    record = new_record(settings)
    record["socket"] = socket_settings(settings.socket_buffer)
    record["knobs"]["client_congestion_control"] = record["socket"]["congestion_control"]
    if settings.engine == "curl":
        try:
            _fetch_curl(settings, record)
        except QuicbedError as error:
            record["error"] = str(error)
    elif settings.http == "2" and not h2_available():
        record["error"] = ("HTTP/2 needs the Python package h2 (pip install 'h2>=4.1,<5'), "
                           "or use --engine curl")
    else:
        before = resource.getrusage(resource.RUSAGE_SELF)
        asyncio.run(_fetch_python(settings, record))
        after = resource.getrusage(resource.RUSAGE_SELF)
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        record["cpu"] = {"process": "python", "user_s": user, "system_s": system,
                         "cpu_s": user + system, "max_rss_kb": after.ru_maxrss}
    judge(record, len(settings.paths), settings.http)
    return record


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m quicbed.apps.tcp.client",
                                     description="Fetch objects over HTTP/1.1 or HTTP/2 (TCP+TLS) "
                                     "and record timings and TCP_INFO.")
    add_request_arguments(parser, port=8443, parallel_help="requests in flight at once (HTTP/2: "
                          "streams on one connection; HTTP/1.1: parallel connections; default 6)")
    parser.add_argument("--http", choices=sorted(PROTOCOLS), default="2",
                        help="HTTP version (default 2; 3 only with --engine curl and a curl "
                        "that has HTTP3)")
    parser.add_argument("--engine", choices=ENGINES, default="python",
                        help="python (default, exact timings) or curl")
    parser.add_argument("--curl", default="curl", help="curl binary (--engine curl)")
    parser.add_argument("--socket-buffer", type=int, default=None, metavar="BYTES",
                        help="SO_RCVBUF (default: kernel autotuning)")
    parser.add_argument("--tcpinfo-log", type=Path, help="sample TCP_INFO of the connections "
                        "over time into this JSON lines file")
    parser.add_argument("--tcpinfo-interval", type=float, default=DEFAULT_TCPINFO_INTERVAL,
                        metavar="SECONDS", help="sampling period for --tcpinfo-log and the curl "
                        "engine (default 0.05)")
    return parser


def settings_from_arguments(args: argparse.Namespace) -> ClientSettings:
    settings = ClientSettings(
        **request_fields(args), http=args.http, engine=args.engine, curl=args.curl,
        socket_buffer=args.socket_buffer, tcpinfo_interval=args.tcpinfo_interval, tcpinfo_log=args.tcpinfo_log)
    settings.check()
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_client(args, settings_from_arguments, fetch)


if __name__ == "__main__":
    sys.exit(main())
