"""TLS for the python engine: the client's SSL context (it can resume a session, and is warmed
up before the first connection), and the priming connection that fetches the TLS 1.3 session
ticket every measured connection then resumes with (``--resumption ticket``)."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from typing import Any

from quicbed.apps.record import PRIMING_PATH
from quicbed.apps.tcp.connect import ALPN, open_connection
from quicbed.apps.tcp.connection import Fetch, FetchError
from quicbed.apps.tcp.settings import ClientSettings

#: how long the priming connection waits for a session ticket after its answer
TICKET_WAIT = 1.0


class ResumingContext(ssl.SSLContext):
    """An SSLContext whose TLS objects resume ``session`` (asyncio makes them with
    ``wrap_bio`` and offers no way to pass a session)."""

    session: ssl.SSLSession | None = None

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
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


async def prime_session(settings: ClientSettings, context: ResumingContext) -> dict[str, Any]:
    """The priming connection: one request for an object the server does not have, then up to
    TICKET_WAIT s for a session ticket, which ``context`` resumes from then on; its own times,
    never the run's."""
    loop = asyncio.get_running_loop()
    fetch = Fetch(dataclasses.replace(settings, paths=[PRIMING_PATH]), loop)
    protocol = await open_connection(fetch, 0, context)
    try:
        await fetch.done
        ssl_object = protocol.transport.get_extra_info("ssl_object") if protocol.transport else None
        deadline = loop.time() + TICKET_WAIT
        # TLS 1.3 tickets come after the handshake; OpenSSL reads them with the data
        while (
            ssl_object is not None
            and not (ssl_object.session and ssl_object.session.has_ticket)
            and loop.time() < deadline
        ):
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
    return {
        "handshake_time": None if connection.tls_done is None else connection.tls_done - connection.connect_start,
        "total_time": end - connection.connect_start,
        "status": timing.status,
        "error": None,
    }
