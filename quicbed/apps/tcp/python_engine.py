"""The client's own engine (``--engine python``, the default): asyncio, OpenSSL for TLS, one
monotonic clock for every instant. Opens the connections, fetches every path, and fills the
record with the times, TCP_INFO and (with ``--resumption ticket``) how resumption went."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

from quicbed.apps.tcp import tcpinfo
from quicbed.apps.tcp.connect import open_connection
from quicbed.apps.tcp.connection import Connection, Fetch, FetchError
from quicbed.apps.tcp.fetch_record import fill_times, transport_summary
from quicbed.apps.tcp.settings import ClientSettings
from quicbed.apps.tcp.tls import prime_session, ssl_context
from quicbed.errors import QuicbedError


async def fetch_with_python(settings: ClientSettings, record: dict[str, Any]) -> None:
    """Fetch ``settings.paths`` (after priming a session to resume, if asked) and fill
    ``record`` in; a failure is the record's ``error``, never an exception."""
    loop = asyncio.get_running_loop()
    context = ssl_context(settings)
    if settings.primes:
        record["resumption"] = {"asked": settings.resumption, "priming": None, "early_data_accepted": None}
        try:
            record["resumption"]["priming"] = await asyncio.wait_for(prime_session(settings, context), settings.timeout)
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
        sampler = tcpinfo.Sampler(
            tcpinfo.Filter(remote_port=settings.port), settings.tcpinfo_interval, settings.tcpinfo_log
        ).start()
    count = 1 if settings.http == "2" else min(settings.parallel, len(settings.paths))
    opening = [asyncio.ensure_future(open_connection(fetch, index, context)) for index in range(count)]
    protocols: list[Connection] = []
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
            elif not future.cancelled() and future.exception() is None and future.result() not in protocols:
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
    fill_times(record, [t.to_dict() for t in sorted(fetch.timings, key=lambda t: t.start)], first, len(settings.paths))
    infos = [c.tcp_info for c in fetch.connections if c.tcp_info is not None]
    record["transport"] = transport_summary(
        infos,
        complete=all(c.tcp_info is not None for c in fetch.connections),
        samples=sampler.samples if sampler else None,
        interval=settings.tcpinfo_interval if sampler else None,
    )
    record["transport"]["connection_times"] = [c.to_dict(first) for c in fetch.connections]
    if "resumption" in record:
        # Python's ssl keeps the newest ticket only: the one every connection offered
        record["resumption"].update(
            tickets_received=1, ticket_offered=True, resumed_connections=sum(bool(c.resumed) for c in fetch.connections)
        )
        if not record["error"] and not all(c.resumed for c in fetch.connections):
            record["error"] = "the server did not resume the TLS session (it sent its certificate again)"
