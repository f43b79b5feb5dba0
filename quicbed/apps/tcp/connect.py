"""Opening one of the python engine's connections: TCP connect (no Nagle, the asked receive
buffer), then TLS with the ALPN of the asked HTTP version, then that version's protocol."""

from __future__ import annotations

import socket
import ssl

from quicbed.apps.tcp.connection import Connection, ConnectionRecord, Fetch
from quicbed.apps.tcp.http1 import Http1Connection

# at import time, never lazily: it imports h2 (see there why)
from quicbed.apps.tcp.http2 import Http2Connection

#: the protocol each HTTP version asks for in the TLS handshake
ALPN = {"1.1": "http/1.1", "2": "h2"}


async def open_connection(fetch: Fetch, index: int, context: ssl.SSLContext) -> Connection:
    """Connection ``index`` of ``fetch``, TLS up; it starts asking for paths at once."""
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
            lambda: kind(fetch, record),
            sock=sock,
            ssl=context,
            server_hostname=settings.server_name or settings.host,
            ssl_handshake_timeout=settings.timeout,
        )
    except BaseException:
        sock.close()
        raise
    if record.alpn != ALPN[settings.http]:
        fetch.fail(f"asked for {ALPN[settings.http]} with ALPN, the server chose {record.alpn}")
    return protocol
