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
and HTTP/1.1 parsed by quicbed (:mod:`quicbed.apps.tcp.python_engine` and the modules it
uses); every instant is taken on one monotonic clock when the bytes are handed over by the
kernel, and TCP_INFO comes from its own sockets (getsockopt, read just before each
connection closes). Its CPU cost is in every record (``cpu``) and its
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
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from quicbed.apps.record import add_request_arguments, request_fields, run_client
from quicbed.apps.tcp.fetch_record import judge, new_record, socket_settings

# imports h2 now, not when the first connection is made (see quicbed.apps.tcp.http2)
from quicbed.apps.tcp.python_engine import fetch_with_python
from quicbed.apps.tcp.settings import DEFAULT_TCPINFO_INTERVAL, ENGINES, PROTOCOLS, ClientSettings
from quicbed.errors import QuicbedError


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
        from quicbed.apps.tcp.curl import fetch_with_curl  # only this engine needs it

        try:
            fetch_with_curl(settings, record)
        except QuicbedError as error:
            record["error"] = str(error)
    elif settings.http == "2" and not h2_available():
        record["error"] = "HTTP/2 needs the Python package h2 (pip install 'h2>=4.1,<5'), or use --engine curl"
    else:
        before = resource.getrusage(resource.RUSAGE_SELF)
        asyncio.run(fetch_with_python(settings, record))
        after = resource.getrusage(resource.RUSAGE_SELF)
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        record["cpu"] = {
            "process": "python",
            "user_s": user,
            "system_s": system,
            "cpu_s": user + system,
            "max_rss_kb": after.ru_maxrss,
        }
    judge(record, len(settings.paths), settings.http)
    return record


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.tcp.client",
        description="Fetch objects over HTTP/1.1 or HTTP/2 (TCP+TLS) and record timings and TCP_INFO.",
    )
    add_request_arguments(
        parser,
        port=8443,
        parallel_help="requests in flight at once (HTTP/2: "
        "streams on one connection; HTTP/1.1: parallel connections; default 6)",
    )
    parser.add_argument(
        "--http",
        choices=sorted(PROTOCOLS),
        default="2",
        help="HTTP version (default 2; 3 only with --engine curl and a curl that has HTTP3)",
    )
    parser.add_argument("--engine", choices=ENGINES, default="python", help="python (default, exact timings) or curl")
    parser.add_argument("--curl", default="curl", help="curl binary (--engine curl)")
    parser.add_argument(
        "--socket-buffer", type=int, default=None, metavar="BYTES", help="SO_RCVBUF (default: kernel autotuning)"
    )
    parser.add_argument(
        "--tcpinfo-log", type=Path, help="sample TCP_INFO of the connections over time into this JSON lines file"
    )
    parser.add_argument(
        "--tcpinfo-interval",
        type=float,
        default=DEFAULT_TCPINFO_INTERVAL,
        metavar="SECONDS",
        help="sampling period for --tcpinfo-log and the curl engine (default 0.05)",
    )
    return parser


def settings_from_arguments(args: argparse.Namespace) -> ClientSettings:
    settings = ClientSettings(
        **request_fields(args),
        http=args.http,
        engine=args.engine,
        curl=args.curl,
        socket_buffer=args.socket_buffer,
        tcpinfo_interval=args.tcpinfo_interval,
        tcpinfo_log=args.tcpinfo_log,
    )
    settings.check()
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_client(args, settings_from_arguments, fetch)


if __name__ == "__main__":
    sys.exit(main())
