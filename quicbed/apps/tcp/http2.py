"""HTTP/2 for the python engine: the page's requests as concurrent streams on one connection,
framed by the ``h2`` package, with receive windows large enough never to limit a download."""

from __future__ import annotations

import asyncio

# imported with this module (so with the client), not when the first connection is made:
# importing h2 took 12-38 ms, which fell between the TCP handshake and the ClientHello and
# counted as connection set-up
from h2 import events
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

from quicbed.apps.tcp.connection import (
    MAX_HEADER_BYTES,
    Connection,
    ConnectionRecord,
    Fetch,
    TcpObjectTiming,
    read_tcp_info,
)

# HTTP/2 receive windows: large, as browsers use, so flow control never limits a download
H2_STREAM_WINDOW = 16 * 1024 * 1024
H2_CONNECTION_WINDOW = 64 * 1024 * 1024


class Http2Connection(Connection):
    """HTTP/2 (h2 package): up to ``parallel`` concurrent streams on this one connection."""

    def __init__(self, fetch: Fetch, record: ConnectionRecord) -> None:
        super().__init__(fetch, record)
        self.h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.streams: dict[int, TcpObjectTiming] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # set before initiate_connection: sent in the first SETTINGS frame
        self.h2.local_settings = Settings(
            client=True,
            initial_values={
                SettingCodes.INITIAL_WINDOW_SIZE: H2_STREAM_WINDOW,
                SettingCodes.ENABLE_PUSH: 0,
                SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_BYTES,
            },
        )
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
            self.h2.send_headers(
                stream_id,
                [
                    (b":method", b"GET"),
                    (b":scheme", b"https"),
                    (b":authority", authority),
                    (b":path", path.encode()),
                    (b"user-agent", settings.user_agent.encode()),
                    (b"accept", b"*/*"),
                ],
                end_stream=True,
            )
            timing = TcpObjectTiming(path, self.loop.time(), connection=self.record.local_port or 0, http_version="2")
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
