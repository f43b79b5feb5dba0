"""TCP apps without namespaces: nginx config generation, nginx -V and access-log parsing,
TCP_INFO decoding, the client's record building, and the client against an in-process
HTTPS server on loopback (HTTP/1.1 and HTTP/2)."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps.quic import certs
from quicbed.apps.quic.client import ClientSettings as QuicClientSettings
from quicbed.apps.quic.client import new_record as quic_new_record
from quicbed.apps.quic.profiles import get_profile
from quicbed.apps.tcp import client, curl, fetch_record, nginx, tcpinfo
from quicbed.apps.tcp.connection import read_tcp_info
from quicbed.errors import MissingDependency, QuicbedError

needs_h2 = pytest.mark.skipif(not client.h2_available(), reason="needs the Python package h2")
HTTP_VERSIONS = ["1.1", pytest.param("2", marks=needs_h2)]

DEBIAN_V = """nginx version: nginx/1.22.1
built with OpenSSL 3.0.20 7 Apr 2026 (running with OpenSSL 3.0.19 27 Jan 2026)
TLS SNI support enabled
configure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf --with-http_ssl_module --with-http_v2_module --with-threads
"""
ORG_V = """nginx version: nginx/1.26.2
built by gcc 12.2.0 (Debian 12.2.0-14)
configure arguments: --prefix=/etc/nginx --with-http_ssl_module --with-http_v2_module --with-http_v3_module --with-stream
"""


# --------------------------------------------------------------------------- nginx


def test_parse_build_of_debian_and_nginx_org() -> None:
    debian = nginx.parse_build(DEBIAN_V)
    assert debian.version == (1, 22, 1) and debian.ssl and debian.http_v2
    assert not debian.http_v3_module
    assert "has no HTTP/3" in debian.http3_unavailable
    org = nginx.parse_build(ORG_V)
    assert org.version == (1, 26, 2) and org.http3_unavailable is None
    no_module = nginx.parse_build(ORG_V.replace(" --with-http_v3_module", ""))
    assert "without --with-http_v3_module" in no_module.http3_unavailable
    with pytest.raises(MissingDependency):
        nginx.parse_build("bash: nginx: command not found")


def _settings(tmp_path: Path, **changes: Any) -> nginx.NginxSettings:
    return nginx.NginxSettings(
        root=tmp_path / "www", certificate=tmp_path / "tls/cert.pem", private_key=tmp_path / "tls/key.pem", **changes
    )


def test_config_lives_in_the_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    text = nginx.render_config(_settings(tmp_path), run, nginx.parse_build(DEBIAN_V), as_root=True)
    # as root, the workers keep the user quicbed runs as (the test may run unprivileged)
    user = pwd.getpwuid(os.geteuid()).pw_name
    for line in (
        "daemon off;",
        "master_process on;",
        "worker_processes 1;",
        f"pid {run}/nginx.pid;",
        f"error_log {run}/logs/error.log notice;",
        f"user {user} ",
        "sendfile on;",
        "tcp_nodelay on;",
        "keepalive_timeout 65s;",
        "send_timeout 60s;",
    ):
        assert line in text, line
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f"{kind}_temp_path {run}/tmp/{kind};" in text
    assert f"access_log {run}/logs/access.jsonl quicbed;" in text
    assert "/etc/nginx" not in text and "/var/" not in text and "include" not in text
    assert f"root {tmp_path}/www;" in text
    assert "listen 0.0.0.0:8443 ssl http2 backlog=1024 sndbuf=4194304 rcvbuf=4194304;" in text
    assert "http2 on;" not in text and " quic " not in text and "http3" not in text
    assert "application/octet-stream bin;" in text and "font/woff2 woff2;" in text
    assert "user " not in nginx.render_config(_settings(tmp_path), run, nginx.parse_build(DEBIAN_V), as_root=False)
    # the session ticket key: nginx's own random one per start, or a file kept across starts
    assert "ssl_session_ticket_key" not in text
    keyed = nginx.render_config(
        _settings(tmp_path, session_ticket_key=tmp_path / "tls/ticket.key"),
        run,
        nginx.parse_build(DEBIAN_V),
        as_root=False,
    )
    assert f"ssl_session_ticket_key {tmp_path}/tls/ticket.key;" in keyed


def test_config_for_newer_nginx_and_http3(tmp_path: Path) -> None:
    settings = _settings(tmp_path, http3=True, port=9443, socket_buffer=None, host="::")
    text = nginx.render_config(settings, tmp_path, nginx.parse_build(ORG_V), as_root=False)
    assert "listen [::]:9443 ssl backlog=1024;" in text  # autotuning: no sndbuf/rcvbuf
    assert "listen [::]:9443 quic reuseport;" in text and "http3 on;" in text
    assert "http2 on;" in text
    assert "Alt-Svc 'h3=\":9443\"; ma=86400'" in text
    # asking for HTTP/3 on an nginx without it serves HTTP/1.1 and HTTP/2 only
    text = nginx.render_config(settings, tmp_path, nginx.parse_build(DEBIAN_V), as_root=False)
    assert " quic " not in text and "http3" not in text


@pytest.mark.parametrize(
    "change, message",
    [
        ({"congestion_control": "vegas"}, "unknown TCP congestion control"),
        ({"port": 0}, "out of range"),
        ({"socket_buffer": 100}, "too small"),
        ({"send_timeout": 0}, "send_timeout 0 must be a positive"),
        ({"keepalive_timeout": -1.0}, "keepalive_timeout -1.0 must be a positive"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(QuicbedError, match=message):
        nginx.render_config(_settings(tmp_path, **change), tmp_path, nginx.parse_build(DEBIAN_V))


def test_access_log_format_is_json_and_parses() -> None:
    assert json.loads(nginx.log_format().replace("$", "")).keys() >= {"status", "tcpinfo_rtt_us"}
    line = json.dumps(
        {
            "time": "1700000000.123",
            "connection": "3",
            "requests": "2",
            "remote_addr": "10.0.0.1",
            "remote_port": "40000",
            "protocol": "HTTP/2.0",
            "method": "GET",
            "path": "/bulk/2MB.bin",
            "status": "200",
            "bytes_sent": "2002312",
            "body_bytes": "2000000",
            "request_time": "0.812",
            "tls": "TLSv1.3",
            "tcpinfo_rtt_us": "940",
            "tcpinfo_rttvar_us": "1488",
            "tcpinfo_snd_cwnd": "19",
            "tcpinfo_rcv_space": "",
        }
    )
    (entry,) = nginx.parse_access_log(line + "\n\n")
    assert entry["status"] == 200 and entry["body_bytes"] == 2_000_000
    assert entry["request_time"] == 0.812 and entry["tcpinfo_rtt"] == pytest.approx(0.00094)
    assert entry["tcpinfo_rcv_space"] is None and entry["protocol"] == "HTTP/2.0"


def test_certificate_is_made_once_per_testbed(tmp_path: Path) -> None:
    first = nginx.ensure_certificate(tmp_path / "tls", ["10.0.0.2", "localhost"])
    content = first[0].read_bytes()
    second = nginx.ensure_certificate(tmp_path / "tls", ["10.0.0.2", "localhost"])
    assert first == second and second[0].read_bytes() == content


# --------------------------------------------------------------------------- TCP_INFO


def _tcp_info_bytes(**fields: int) -> bytes:
    head = struct.pack("=BBBBBBBB", 1, 3, 0, 0, 0, 0, 0x77, 0)
    body = bytearray(240)
    for name, packer, offset in tcpinfo._LAYOUT:
        if name in fields:
            packer.pack_into(body, offset - 8, fields[name])
    return head + bytes(body)


def test_decode_tcp_info_layout() -> None:
    raw = _tcp_info_bytes(
        rtt=12345,
        snd_cwnd=42,
        snd_mss=1448,
        total_retrans=7,
        bytes_received=2_000_000,
        segs_in=1400,
        data_segs_in=1390,
        delivery_rate=123456789,
        snd_wnd=65536,
    )
    values = tcpinfo.decode_tcp_info(raw)
    assert values["state"] == 1 and values["ca_state"] == 3
    assert values["rtt"] == 12345 and values["snd_cwnd"] == 42 and values["total_retrans"] == 7
    assert values["bytes_received"] == 2_000_000 and values["delivery_rate"] == 123456789
    assert values["snd_wnd"] == 65536
    # the kernel's offsets (include/uapi/linux/tcp.h)
    offsets = {name: offset for name, _, offset in tcpinfo._LAYOUT}
    assert offsets["rtt"] == 68 and offsets["total_retrans"] == 100
    assert offsets["pacing_rate"] == 104 and offsets["bytes_received"] == 128
    assert offsets["delivery_rate"] == 160 and offsets["bytes_sent"] == 200
    assert offsets["snd_wnd"] == 228
    info = tcpinfo.from_raw(raw, local=("10.0.0.1", 1000), remote=("10.0.0.2", 8443), congestion_control="cubic")
    assert info.state == "ESTABLISHED" and info.ca_state == "recovery"
    assert info.rtt == pytest.approx(0.012345) and info.cwnd_bytes == 42 * 1448
    # an older kernel's shorter struct: missing fields are None
    short = tcpinfo.decode_tcp_info(raw[:104])
    assert short["total_retrans"] is None or short["total_retrans"] == 7
    assert short["bytes_received"] is None


@pytest.fixture
def loopback_pair() -> Iterator[tuple[socket.socket, socket.socket, int]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    near = socket.create_connection(("127.0.0.1", port))
    far, _ = listener.accept()
    yield near, far, port
    for sock in (near, far, listener):
        sock.close()


def test_netlink_snapshot_matches_getsockopt(loopback_pair: tuple[socket.socket, socket.socket, int]) -> None:
    near, far, port = loopback_pair
    far.sendall(b"x" * 500_000)
    received = 0
    while received < 500_000:
        received += len(near.recv(1 << 20))
    time.sleep(0.05)
    found = tcpinfo.snapshot(tcpinfo.Filter(port=port))
    assert len(found) == 2
    (mine,) = [i for i in found if i.local_port == near.getsockname()[1]]
    own = read_tcp_info(near)
    assert own is not None and own.key == mine.key
    assert mine.bytes_received == own.bytes_received == 500_000
    assert mine.congestion_control == own.congestion_control
    assert mine.state == "ESTABLISHED"
    sampler = tcpinfo.Sampler(tcpinfo.Filter(remote_port=port), interval=0.01).start()
    time.sleep(0.05)
    last = sampler.stop()
    assert sampler.samples >= 2 and list(last) == [mine.key]


# --------------------------------------------------------------------------- the client


def test_settings_are_checked() -> None:
    with pytest.raises(QuicbedError, match="nothing to fetch"):
        client.ClientSettings(host="x", paths=[]).check()
    with pytest.raises(QuicbedError, match="engine curl"):
        client.ClientSettings(host="x", paths=["/"], http="3").check()
    with pytest.raises(QuicbedError, match="at least 1"):
        client.ClientSettings(host="x", paths=["/"], parallel=0).check()
    assert client.main(["--host", "x"]) == 2


def test_record_has_the_http3_record_keys() -> None:
    record = fetch_record.new_record(client.ClientSettings(host="10.0.0.2", paths=["/a"]))
    quic = quic_new_record(QuicClientSettings(host="x", paths=["/"], profile=get_profile("quic")))
    assert set(quic) <= set(record)
    assert record["protocol"] == "h2" and record["tool"] == "quicbed-tcp-client"


def test_curl_command_line(tmp_path: Path) -> None:
    settings = client.ClientSettings(
        host="10.0.0.2",
        paths=["/a.js", "/b c.css"],
        http="1.1",
        port=8443,
        parallel=4,
        server_name="localhost",
        ca_file=tmp_path / "cert.pem",
        engine="curl",
    )
    argv, config = curl.curl_command(settings)
    assert argv[0] == "curl" and "--http1.1" in argv and "--no-progress-meter" in argv
    assert argv[argv.index("--parallel-max") + 1] == "4"
    assert argv[argv.index("--resolve") + 1] == "localhost:8443:10.0.0.2"
    assert argv[argv.index("--cacert") + 1] == str(tmp_path / "cert.pem")
    assert argv[-2:] == ["--config", "-"]  # after every option of the fetching operation
    assert config.splitlines() == [
        'url = "https://localhost:8443/a.js"',
        'output = "/dev/null"',
        'url = "https://localhost:8443/b c.css"',
        'output = "/dev/null"',
    ]
    single, held = curl.curl_command(
        client.ClientSettings(host="h", paths=["/x"], insecure=True, timeout=20), "http://127.0.0.1:4000/hold"
    )
    assert "--parallel" not in single and "--insecure" in single and "--http2" in single
    # the hold transfer is an operation of its own: no report, no HTTP/2, no proxy
    assert held.splitlines()[2:] == [
        "next",
        'url = "http://127.0.0.1:4000/hold"',
        'output = "/dev/null"',
        'noproxy = "*"',
        "max-time = 30",
    ]


def test_curl_stays_until_the_exit_hold_is_released() -> None:
    hold = curl.ExitHold(avoid_port=0)
    done = threading.Event()
    answer: list[bytes] = []

    def fetch() -> None:
        with socket.create_connection(hold.listener.getsockname(), timeout=10) as connection:
            connection.sendall(b"GET /quicbed-exit-hold HTTP/1.1\r\nHost: x\r\n\r\n")
            answer.append(connection.recv(4096))
        done.set()

    thread = threading.Thread(target=fetch)
    thread.start()
    try:
        assert not done.wait(0.5)  # no answer before the release
        hold.released.set()
        assert done.wait(5)
        assert answer[0].startswith(b"HTTP/1.1 204 ")
    finally:
        hold.close()
        thread.join(5)


def test_curl_version_parsing() -> None:
    build = curl.parse_curl_version(
        "curl 7.88.1 (x86_64-pc-linux-gnu) libcurl/7.88.1\nFeatures: alt-svc AsynchDNS HTTP2 HTTPS-proxy IPv6\n"
    )
    assert build.version == "7.88.1" and "HTTP2" in build.features and "HTTP3" not in build.features


def _report(
    number: int,
    total: float,
    pretransfer: float,
    starttransfer: float,
    connects: int = 0,
    size: int = 100,
    code: int = 200,
) -> dict[str, Any]:
    return {
        "urlnum": number,
        "time_total": total,
        "time_pretransfer": pretransfer,
        "time_starttransfer": starttransfer,
        "time_connect": 0.001 if connects else 0,
        "time_appconnect": 0.004 if connects else 0,
        "num_connects": connects,
        "size_download": size,
        "response_code": code,
        "local_port": 40000 + number,
        "http_version": "2",
        "exitcode": 0,
        "remote_ip": "10.0.0.2",
    }


def test_curl_reports_become_the_record() -> None:
    settings = client.ClientSettings(host="10.0.0.2", paths=["/a", "/b"], engine="curl")
    transfers = [
        curl.Transfer(10.0, _report(0, 0.5, 0.005, 0.1, connects=1)),
        curl.Transfer(10.2, _report(1, 0.6, 0.001, 0.2)),
    ]
    objects, origin, facts = curl.objects_from_transfers(settings, transfers)
    assert origin == pytest.approx(9.5)
    assert objects[0]["start"] == pytest.approx(9.505) and objects[0]["end"] == 10.0
    assert objects[1]["first_byte"] == pytest.approx(9.8)
    assert facts == {"connections": 1, "address": "10.0.0.2", "handshake_time": 0.004}
    record = fetch_record.new_record(settings)
    fetch_record.fill_times(record, objects, origin, 2)
    fetch_record.judge(record, 2, "2")
    assert record["ok"] and record["bytes"] == 200 and record["objects_completed"] == 2
    assert record["completion_time"] == pytest.approx(10.2 - 9.505)
    assert record["total_time"] == pytest.approx(0.7)
    assert record["objects"][0]["start"] == pytest.approx(0.005)


def test_judge_names_the_first_problem() -> None:
    settings = client.ClientSettings(host="h", paths=["/a", "/b"])
    record = fetch_record.new_record(settings)
    record["objects"] = [
        {"path": "/a", "status": 200, "http_version": "2"},
        {"path": "/b", "status": 404, "http_version": "2"},
    ]
    fetch_record.judge(record, 2, "2")
    assert record["error"] == "HTTP status 404 for /b" and not record["ok"]
    record = fetch_record.new_record(settings)
    record["objects"] = [{"path": "/a", "status": 200, "http_version": "1.1"}]
    record["objects_completed"] = 1
    fetch_record.judge(record, 1, "2")
    assert record["error"] == "asked for HTTP/2, got HTTP/1.1 for /a"


def test_transport_summary_sums_connections() -> None:
    def info(
        port: int, segs_out: int, data_out: int, segs_in: int, data_in: int, received: int, min_rtt: float
    ) -> tcpinfo.TcpInfo:
        raw = _tcp_info_bytes(
            segs_out=segs_out,
            data_segs_out=data_out,
            segs_in=segs_in,
            data_segs_in=data_in,
            bytes_received=received,
            min_rtt=int(min_rtt * 1e6),
            rtt=int(min_rtt * 2e6),
            snd_cwnd=10,
        )
        return tcpinfo.from_raw(raw, local=("10.0.0.1", port), remote=("10.0.0.2", 8443), congestion_control="cubic")

    summary = fetch_record.transport_summary(
        [info(1, 60, 10, 120, 100, 150_000, 0.002), info(2, 30, 5, 60, 50, 70_000, 0.001)], complete=True
    )
    assert summary["packets_sent"] == 90 and summary["data_packets_received"] == 150
    assert summary["ack_only_packets_sent"] == 75
    assert summary["ack_only_per_data_packet_received"] == pytest.approx(0.5)
    assert summary["rtt_min"] == pytest.approx(0.001) and summary["rtt_smoothed"] == pytest.approx(0.004)
    assert summary["bytes_received"] == 220_000 and len(summary["connections"]) == 2
    empty = fetch_record.transport_summary([], complete=False)
    assert empty["packets_sent"] is None and empty["ack_only_per_data_packet_received"] is None


# ------------------------------------------------- the client against an in-process server

BODIES = {"/small.js": b"s" * 1000, "/big.bin": bytes(range(256)) * 4000, "/empty.json": b""}


class TinyServer:
    """HTTPS on 127.0.0.1 speaking HTTP/1.1 (responses dribbled in small pieces, to test the
    parser) or HTTP/2 (h2), chosen by ALPN; /chunked answers with chunked encoding."""

    def __init__(self, directory: Path) -> None:
        cert, key = certs.write(directory, ["127.0.0.1", "localhost"])
        self.cert = cert
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert), str(key))
        self.context.set_alpn_protocols(["h2", "http/1.1"])
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.connections = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        try:
            if alpn == "h2":
                await self._serve_h2(reader, writer)
            else:
                await self._serve_h1(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _serve_h1(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ")[1].decode()
            if path == "/chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                await writer.drain()
                continue
            body = BODIES.get(path)
            status = b"200 OK" if body is not None else b"404 Not Found"
            body = b"nope" if body is None else body
            response = (
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nContent-Type: application/octet-stream\r\n\r\n"
                + body
            )
            for offset in range(0, min(len(response), 300), 7):  # a dribbled start
                writer.write(response[offset : min(offset + 7, 300)])
                await writer.drain()
                await asyncio.sleep(0.0005)
            writer.write(response[300:])
            await writer.drain()

    async def _serve_h2(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from h2 import events
        from h2.config import H2Configuration
        from h2.connection import H2Connection

        connection = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        connection.initiate_connection()
        writer.write(connection.data_to_send())
        pending: dict[int, tuple[bytes, int]] = {}
        while True:
            data = await reader.read(65536)
            if not data:
                return
            for event in connection.receive_data(data):
                if isinstance(event, events.RequestReceived):
                    path = dict(event.headers)[b":path"].decode()
                    body = BODIES.get(path, b"nope")
                    status = b"200" if path in BODIES else b"404"
                    connection.send_headers(
                        event.stream_id,
                        [(b":status", status), (b"content-length", str(len(body)).encode())],
                        end_stream=not body,
                    )
                    if body:
                        pending[event.stream_id] = (body, 0)
            for stream_id, (body, sent) in list(pending.items()):
                window = min(
                    connection.local_flow_control_window(stream_id),
                    connection.max_outbound_frame_size,
                    len(body) - sent,
                )
                while window > 0:
                    connection.send_data(stream_id, body[sent : sent + window], end_stream=sent + window == len(body))
                    sent += window
                    window = min(
                        connection.local_flow_control_window(stream_id),
                        connection.max_outbound_frame_size,
                        len(body) - sent,
                    )
                if sent == len(body):
                    del pending[stream_id]
                else:
                    pending[stream_id] = (body, sent)
            writer.write(connection.data_to_send())
            await writer.drain()

    def close(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TinyServer]:
    server = TinyServer(tmp_path_factory.mktemp("tiny-tls"))
    yield server
    server.close()


def _fetch(tiny: TinyServer, http: str, paths: list[str], **changes: Any) -> dict[str, Any]:
    settings = client.ClientSettings(
        host="127.0.0.1", port=tiny.port, http=http, paths=paths, ca_file=tiny.cert, timeout=10, **changes
    )
    return client.fetch(settings)


@pytest.mark.parametrize("http", HTTP_VERSIONS)
def test_client_fetches_and_times_objects(tiny: TinyServer, http: str) -> None:
    paths = ["/small.js", "/big.bin", "/empty.json", "/small.js"]
    record = _fetch(tiny, http, paths, parallel=2)
    assert record["ok"] is True, record["error"]
    assert record["bytes"] == sum(len(BODIES[p]) for p in paths)
    assert [o["size"] for o in record["objects"]] == [len(BODIES[o["path"]]) for o in record["objects"]]
    assert sorted(o["path"] for o in record["objects"]) == sorted(paths)
    assert all(o["http_version"] == http and o["status"] == 200 for o in record["objects"])
    assert all(0 <= o["start"] <= o["first_byte"] <= o["end"] for o in record["objects"])
    assert record["connections"] == (1 if http == "2" else 2)
    assert 0 < record["handshake_time"] < record["total_time"]
    assert record["transport"]["complete"] and len(record["transport"]["connections"]) == record["connections"]
    assert record["transport"]["bytes_received"] > record["bytes"]
    assert record["cpu"]["process"] == "python" and record["cpu"]["cpu_s"] > 0
    assert record["server"]["address"] == "127.0.0.1"


@pytest.mark.parametrize("http", HTTP_VERSIONS)
def test_client_reports_http_errors(tiny: TinyServer, http: str) -> None:
    record = _fetch(tiny, http, ["/small.js", "/missing"])
    assert record["ok"] is False and record["error"] == "HTTP status 404 for /missing"
    assert record["objects_completed"] == 1


def test_client_refuses_chunked_and_verifies_the_certificate(tiny: TinyServer) -> None:
    record = _fetch(tiny, "1.1", ["/chunked"])
    assert not record["ok"] and "chunked" in record["error"]
    settings = client.ClientSettings(host="127.0.0.1", port=tiny.port, http="1.1", paths=["/small.js"], timeout=5)
    record = client.fetch(settings)  # the system's CAs do not know the self-signed cert
    assert not record["ok"] and "CERTIFICATE_VERIFY_FAILED" in record["error"]
    settings.insecure = True
    assert client.fetch(settings)["ok"]


def test_client_times_out(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts TCP, never speaks TLS
    try:
        settings = client.ClientSettings(
            host="127.0.0.1", port=listener.getsockname()[1], paths=["/x"], insecure=True, timeout=0.5
        )
        started = time.monotonic()
        record = client.fetch(settings)
        assert record["error"] == "timeout after 0.5s" and time.monotonic() - started < 5
    finally:
        listener.close()


def test_cli_writes_the_record(tiny: TinyServer, tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    code = client.main(
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(tiny.port),
            "--http",
            "1.1",
            "--ca-cert",
            str(tiny.cert),
            "--path",
            "/big.bin",
            "--output",
            str(output),
            "--label",
            "unit",
        ]
    )
    record = json.loads(output.read_text())
    assert code == 0 and record["label"] == "unit" and record["bytes"] == len(BODIES["/big.bin"])


def test_http2_without_the_h2_package_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "h2_available", lambda: False)
    record = client.fetch(client.ClientSettings(host="127.0.0.1", port=9, paths=["/x"]))
    assert not record["ok"] and "h2" in record["error"] and "--engine curl" in record["error"]


def test_clients_say_ready_then_wait_for_the_start_file(tmp_path):
    import threading

    from quicbed.apps.record import StartBarrier
    from quicbed.errors import QuicbedError

    threading.Timer(0.2, (tmp_path / "go").touch).start()
    StartBarrier(tmp_path / "ready", tmp_path / "go", 5.0).wait()
    assert (tmp_path / "ready").exists()
    with pytest.raises(QuicbedError, match="did not appear within 0.05 s"):
        StartBarrier(None, tmp_path / "never", 0.05).wait()


def test_the_tcp_client_resumes_with_a_ticket_but_sends_no_early_data():
    from quicbed.errors import QuicbedError

    client.ClientSettings(host="127.0.0.1", paths=["/x"], resumption="ticket").check()
    with pytest.raises(QuicbedError, match="--resumption 0rtt: this client resumes with ticket"):
        client.ClientSettings(host="127.0.0.1", paths=["/x"], resumption="0rtt").check()
    # curl's engine: one invocation per fetch, so no ticket outlives a priming connection
    with pytest.raises(QuicbedError, match="--resumption ticket: this client makes new connections only"):
        client.ClientSettings(host="127.0.0.1", paths=["/x"], resumption="ticket", engine="curl").check()
