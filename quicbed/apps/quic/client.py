"""HTTP/3 client: fetches one object or a whole page over one connection, writes a JSON record.

    python -m quicbed.apps.quic.client --host 10.0.0.2 --port 4433 --profile bquic \\
        --path /bulk/10MB.bin --output run.json
    python -m quicbed.apps.quic.client --host 10.0.0.2 --manifest /srv/quicbed \\
        --page p86-839k --parallel 6 --output page.json

The record (see :func:`new_record`) holds the timings, per-object timings, transport
counters (packets sent/received, ACK-only packets, losses, RTT, cwnd), the transport
profile with its resolved knobs and the aioquic version. ``started_at`` is the wall clock
(``time.time()``) when the client started; every other time is a monotonic duration in
seconds from that moment. The exit status is 0 on success, 1 on failure or timeout (the
record then has an ``error``), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ssl
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.tls import SessionTicket

from quicbed import __version__
from quicbed.apps.client_device import CostMeter, device_cost, device_names
from quicbed.apps.quic import aioquic_hooks
from quicbed.apps.quic.profiles import (
    TransportProfile,
    add_profile_arguments,
    profile_from_arguments,
)
from quicbed.apps.quic.qlog import QLOG_MODES, QlogWriter, make_qlog_writer
from quicbed.apps.quic.sockets import DEFAULT_BUFFER, bound_udp_socket, resolve
from quicbed.apps.record import (
    PRIMING_PATH,
    RESUMPTION_MODES,
    ObjectTiming,
    RequestSettings,
    add_request_arguments,
    base_record,
    request_fields,
    run_client,
)
from quicbed.errors import QuicbedError
from quicbed.host.clock import current_clock
from quicbed.spec.units import parse_size

USER_AGENT = f"quicbed/{__version__}".encode()
CLOSE_WAIT = 2.0  # seconds granted to the closing handshake (qlog is written at its end)
TICKET_WAIT = 1.0  # seconds the priming connection waits for a session ticket after its answer


@dataclass(kw_only=True)
class ClientSettings(RequestSettings):
    profile: TransportProfile
    port: int = 4433
    bind: str = ""
    socket_buffer: int = DEFAULT_BUFFER
    qlog_dir: Path | None = None
    qlog_mode: str = "filtered"
    device: str | None = None  # --client-device: a device class whose time per datagram the client takes


class Http3ClientProtocol(QuicConnectionProtocol):
    """Issues GET requests, at most ``parallel`` at a time, and times each object."""

    def __init__(
        self,
        quic: QuicConnection,
        stream_handler: Any = None,
        *,
        settings: ClientSettings,
        hooks: aioquic_hooks.ConnectionHooks,
        meter: CostMeter | None = None,
    ) -> None:
        super().__init__(quic, stream_handler)
        self.settings = settings
        self.hooks = hooks
        self.meter = meter
        self._http = H3Connection(quic)
        self._queue: deque[str] = deque()
        self.active: dict[int, ObjectTiming] = {}
        self.finished: list[ObjectTiming] = []
        self.done: asyncio.Future[None] = self._loop.create_future()
        self.terminated: events.ConnectionTerminated | None = None
        self.handshake_at: float | None = None
        self.early_data_accepted: bool | None = None

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        if self.meter is not None:  # the device works on the datagram before anything comes of it
            self.meter.charge(received=1)
        super().datagram_received(data, addr)

    def transmit(self) -> None:
        before = self.hooks.counters.datagrams_sent
        super().transmit()
        if self.meter is not None:
            self.meter.charge(sent=self.hooks.counters.datagrams_sent - before)

    def fetch(self, paths: Sequence[str]) -> asyncio.Future[None]:
        self._queue.extend(paths)
        if not self._queue and not self.done.done():
            self.done.set_result(None)
        self._start_requests()
        return self.done

    def _start_requests(self) -> None:
        while self._queue and len(self.active) < self.settings.parallel:
            path = self._queue.popleft()
            stream_id = self._quic.get_next_available_stream_id()
            authority = self.settings.server_name or self.settings.host
            self._http.send_headers(
                stream_id,
                [
                    (b":method", b"GET"),
                    (b":scheme", b"https"),
                    (b":authority", f"{authority}:{self.settings.port}".encode()),
                    (b":path", path.encode()),
                    (b"user-agent", USER_AGENT),
                ],
                end_stream=True,
            )
            self.active[stream_id] = ObjectTiming(path, self._loop.time())
        self.transmit()

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.HandshakeCompleted):
            self.handshake_at = self._loop.time()
            self.early_data_accepted = event.early_data_accepted
        elif isinstance(event, events.ConnectionTerminated):
            self.terminated = event
            if not self.done.done():
                self.done.set_exception(
                    ConnectionError(f"connection closed: error 0x{event.error_code:x} {event.reason_phrase}".strip())
                )
            return
        for http_event in self._http.handle_event(event):
            stream_id = getattr(http_event, "stream_id", -1)
            timing = self.active.get(stream_id)
            if timing is None:
                continue
            now = self._loop.time()
            if timing.first_byte is None:
                timing.first_byte = now
            ended = False
            if isinstance(http_event, HeadersReceived):
                status = dict(http_event.headers).get(b":status", b"0")
                timing.status = int(status) if status.isdigit() else 0
                ended = http_event.stream_ended
            elif isinstance(http_event, DataReceived):
                timing.size += len(http_event.data)
                ended = http_event.stream_ended
            if ended:
                timing.end = now
                self.finished.append(self.active.pop(stream_id))
                self._start_requests()
                if not self.active and not self._queue and not self.done.done():
                    self.done.set_result(None)


def client_configuration(settings: ClientSettings, qlog: QlogWriter | None) -> QuicConfiguration:
    configuration = QuicConfiguration(
        is_client=True,
        alpn_protocols=list(H3_ALPN),
        server_name=settings.server_name or settings.host,
        quic_logger=qlog,
    )
    if settings.insecure:
        configuration.verify_mode = ssl.CERT_NONE
    elif settings.ca_file is not None:
        configuration.load_verify_locations(str(settings.ca_file))
    if settings.keylog is not None:
        # line-buffered: every secret is on disk before the packets it protects are captured
        configuration.secrets_log_file = settings.keylog.open("a", buffering=1)
    return aioquic_hooks.configure(configuration, settings.profile)


def new_record(settings: ClientSettings) -> dict[str, Any]:
    """The result record, before the run fills it in."""
    record = base_record("quicbed-quic-client", settings)
    record.update({"aioquic_version": aioquic_hooks.aioquic_version(), "protocol": "h3", **settings.profile.record()})
    return record


async def fetch(settings: ClientSettings) -> dict[str, Any]:
    """Connect, fetch ``settings.paths`` over one connection, return the record."""
    record = new_record(settings)
    loop = asyncio.get_running_loop()
    record["started_at"] = time.time()
    origin = loop.time()
    qlog = make_qlog_writer(settings.qlog_dir, settings.qlog_mode)
    meter = None
    if settings.device is not None:
        cost = device_cost(settings.device, "aioquic", current_clock())
        record["device"], meter = cost.record(), CostMeter(cost)
    protocol: Http3ClientProtocol | None = None
    transport: asyncio.BaseTransport | None = None
    tickets: list[SessionTicket] = []
    try:
        family, address = resolve(settings.host, settings.port)
        record["server"]["address"] = address[0]
        configuration = client_configuration(settings, qlog)
        if settings.resumption != "none":
            priming = _prime(settings, family, address, tickets, meter)
            record["resumption"] = {
                "asked": settings.resumption,
                "priming": await asyncio.wait_for(priming, timeout=max(0.0, settings.timeout - (loop.time() - origin))),
            }
            if not tickets:
                raise QuicbedError("no session ticket to resume with: the priming connection received none")
            # with ticket, the same ticket without the early data it allows
            configuration.session_ticket = (
                tickets[-1]
                if settings.resumption == "0rtt"
                else dataclasses.replace(tickets[-1], max_early_data_size=None)
            )
            settings.barrier.wait()  # primed: the run's captures may start now
            record["started_at"], origin = time.time(), loop.time()  # the measured connection's times
        sock, buffers = bound_udp_socket(settings.bind, 0, settings.socket_buffer, family=family)
        record["socket"] = buffers.to_dict()
        connection = QuicConnection(configuration=configuration)
        hooks = aioquic_hooks.install(connection, settings.profile)
        transport, created = await loop.create_datagram_endpoint(
            lambda: Http3ClientProtocol(connection, settings=settings, hooks=hooks, meter=meter), sock=sock
        )
        protocol = created
        assert protocol is not None
        run = _run(protocol, address, settings.paths, early=settings.resumption == "0rtt")
        await asyncio.wait_for(run, timeout=max(0.0, settings.timeout - (loop.time() - origin)))
        record["ok"] = True
    except asyncio.TimeoutError:
        record["error"] = f"timeout after {settings.timeout:g}s"
    except (ConnectionError, OSError, QuicbedError) as error:
        record["error"] = str(error) or type(error).__name__
    finally:
        if "resumption" in record:
            record["resumption"].update(
                tickets_received=len(tickets),
                ticket_offered=bool(tickets),
                early_data_accepted=protocol.early_data_accepted
                if protocol is not None and settings.resumption == "0rtt"
                else None,
            )
        if protocol is not None:
            if protocol.done.done() and not protocol.done.cancelled():
                protocol.done.exception()  # retrieved: no "never retrieved" warning
            _fill(record, protocol, origin)
            if protocol.terminated is None:
                protocol.close()
                try:
                    await asyncio.wait_for(protocol.wait_closed(), CLOSE_WAIT)
                except asyncio.TimeoutError:
                    pass
        if transport is not None:
            transport.close()
        if qlog is not None:
            written = qlog.close()
            record["qlog"] = [str(path) for path in written]
        if meter is not None:
            record["device"]["applied"] = meter.summary()
    failed = [o for o in record["objects"] if o["status"] != 200]
    if record["ok"] and failed:
        record["ok"] = False
        record["error"] = f"HTTP status {failed[0]['status']} for {failed[0]['path']}"
    elif record["ok"] and record["objects_completed"] != len(settings.paths):
        record["ok"] = False
        record["error"] = "not every object completed"
    return record


async def _run(protocol: Http3ClientProtocol, address: Any, paths: Sequence[str], early: bool = False) -> None:
    """Connect and fetch; ``early``: send the requests before the handshake ends (0-RTT)."""
    protocol.connect(address)
    if not early:
        await protocol.wait_connected()
    await protocol.fetch(paths)


async def _prime(
    settings: ClientSettings, family: int, address: Any, tickets: list[SessionTicket], meter: CostMeter | None
) -> dict[str, Any]:
    """The priming connection of a resumed one: a request for an object the server does not
    have, then up to TICKET_WAIT s for its session tickets (appended to ``tickets``); its own
    times, never the run's."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    sock, _ = bound_udp_socket(settings.bind, 0, settings.socket_buffer, family=family)
    connection = QuicConnection(
        configuration=client_configuration(settings, None), session_ticket_handler=tickets.append
    )
    hooks = aioquic_hooks.install(connection, settings.profile)
    transport, protocol = await loop.create_datagram_endpoint(
        lambda: Http3ClientProtocol(connection, settings=settings, hooks=hooks, meter=meter), sock=sock
    )
    assert isinstance(protocol, Http3ClientProtocol)
    try:
        await _run(protocol, address, [PRIMING_PATH])
        deadline = loop.time() + TICKET_WAIT
        while not tickets and loop.time() < deadline:
            await asyncio.sleep(0.005)
    finally:
        protocol.close()
        try:
            await asyncio.wait_for(protocol.wait_closed(), CLOSE_WAIT)
        except asyncio.TimeoutError:
            pass
        transport.close()
    (timing,) = protocol.finished
    return {
        "handshake_time": None if protocol.handshake_at is None else protocol.handshake_at - start,
        "total_time": loop.time() - start,
        "status": timing.status,
        "error": None,
    }


def _fill(record: dict[str, Any], protocol: Http3ClientProtocol, origin: float) -> None:
    timings = sorted(protocol.finished + list(protocol.active.values()), key=lambda t: t.start)
    record["objects"] = [t.to_dict(origin) for t in timings]
    record["objects_completed"] = len(protocol.finished)
    record["bytes"] = sum(t.size for t in timings)
    record["transport"] = protocol.hooks.stats()
    if protocol.handshake_at is not None:
        record["handshake_time"] = protocol.handshake_at - origin
    if timings:
        first_request = min(t.start for t in timings)
        first_bytes = [t.first_byte for t in timings if t.first_byte is not None]
        if first_bytes:
            record["ttfb"] = min(first_bytes) - first_request
        if not protocol.active and protocol.finished:
            last = max(t.end for t in protocol.finished if t.end is not None)
            record["completion_time"] = last - first_request
            record["total_time"] = last - origin


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.quic.client", description="Fetch objects over HTTP/3 and record timings."
    )
    add_request_arguments(
        parser, port=4433, parallel_help="concurrent request streams on the one connection (default 6)"
    )
    parser.add_argument("--bind", default="", help="local address to bind (default any)")
    parser.add_argument("--socket-buffer", default=str(DEFAULT_BUFFER), metavar="SIZE")
    parser.add_argument("--qlog-dir", type=Path, default=None)
    parser.add_argument("--qlog-mode", choices=QLOG_MODES, default="filtered")
    parser.add_argument(
        "--client-device",
        choices=device_names(),
        help="take this device's CPU time per datagram, in either clock (quicbed.apps.client_device)",
    )
    add_profile_arguments(parser)
    return parser


def settings_from_arguments(args: argparse.Namespace) -> ClientSettings:
    settings = ClientSettings(
        **request_fields(args),
        profile=profile_from_arguments(args),
        bind=args.bind,
        socket_buffer=parse_size(args.socket_buffer, "--socket-buffer"),
        qlog_dir=args.qlog_dir,
        qlog_mode=args.qlog_mode,
        device=args.client_device,
    )
    settings.check(RESUMPTION_MODES)
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_client(args, settings_from_arguments, lambda settings: asyncio.run(fetch(settings)))


if __name__ == "__main__":
    sys.exit(main())
