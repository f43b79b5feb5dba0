"""nginx + quicbed's TCP client between two namespaces through a rate-limited dumbbell.

client ===bottleneck 20 Mbit/s=== s1 --- server (nginx)
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps import objects
from quicbed.apps.quic.client import ClientSettings as QuicClientSettings
from quicbed.apps.quic.client import new_record as quic_new_record
from quicbed.apps.quic.profiles import get_profile
from quicbed.apps.tcp import client as tcp_client
from quicbed.apps.tcp import nginx
from quicbed.apps.launch import module_argv
from quicbed.apps.record import SHARED_FIELDS, ClientRecord
from quicbed.backends.netns import NamespaceNetwork
from quicbed.errors import BackendError
from quicbed.spec.loader import load_topology

pytestmark = [pytest.mark.needs_root]

ROOT = Path(__file__).resolve().parents[2]
needs_h2 = pytest.mark.skipif(not tcp_client.h2_available(), reason="needs the Python package h2")
HTTP_VERSIONS = ["1.1", pytest.param("2", marks=needs_h2)]
BULK = 2_000_000
PAGE = objects.PageShape(25, 441)
PORT = 8443
RATE = 20e6


class Bed:
    def __init__(
        self, net: NamespaceNetwork, base: Path, root: Path, cert: Path, key: Path, server: nginx.NginxServer
    ) -> None:
        self.net, self.base, self.root, self.cert, self.key = net, base, root, cert, key
        self.server = server
        self.client = net.node("client")
        self.server_node = net.node("server")
        self.runs = 0

    def fetch(self, *arguments: str, timeout: float = 30.0, port: int = PORT) -> tuple[int, dict[str, Any], str]:
        self.runs += 1
        output = self.base / f"client-{self.runs}.json"
        completed = self.client.run(
            module_argv(
                "quicbed.apps.tcp.client",
                [
                    "--host",
                    self.server_node.address,
                    "--port",
                    str(port),
                    "--ca-cert",
                    str(self.cert),
                    "--timeout",
                    str(timeout),
                    "--output",
                    str(output),
                    *arguments,
                ],
            ),
            timeout=timeout + 30,
            check=False,
        )
        record = json.loads(output.read_text()) if output.exists() else {}
        return completed.returncode, record, completed.stderr


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    base = tmp_path_factory.mktemp("tcp-endpoints")
    root = base / "www"
    objects.generate(root, bulk=[BULK], pages=[PAGE], seed=2)
    topo = load_topology(
        str(ROOT / "topologies" / "dumbbell.py"),
        {
            "rate": "20mbit",
            "delay": "0ms",
            "queue_limit": 100,
            # a deep bucket: late timers on a busy host cost the default 1 ms
            # bucket rate (bench/README.md); these tests compare with the rate
            "burst": 64_000,
        },
    )
    with NamespaceNetwork(topo) as net:
        server_node = net.node("server")
        cert, key = nginx.ensure_certificate(base / "tls", [server_node.address, "localhost"])
        settings = nginx.NginxSettings(
            root=root, certificate=cert, private_key=key, port=PORT, congestion_control="cubic"
        )
        with nginx.NginxServer(server_node, settings, base / "nginx") as server:
            yield Bed(net, base, root, cert, key, server)


def test_nginx_runs_from_its_own_folder(bed: Bed) -> None:
    info = bed.server.info()
    assert info["protocols"][:2] == ["http/1.1", "h2"]
    assert info["congestion_control"] == "cubic" and bed.server.congestion_control() == "cubic"
    assert bed.server.ready_after is not None and bed.server.ready_after < 10
    config = bed.server.config_path.read_text()
    assert "/etc/nginx" not in config and "/var/lib/nginx" not in config
    pid = int((bed.base / "nginx" / "nginx.pid").read_text())
    assert pid == bed.server.process.pid  # the master runs in the foreground, owned by quicbed


@pytest.mark.parametrize("http", HTTP_VERSIONS)
def test_bulk_download(bed: Bed, http: str) -> None:
    code, record, stderr = bed.fetch("--http", http, "--path", "/bulk/2MB.bin")
    assert code == 0, stderr
    assert record["ok"] is True and record["error"] is None
    assert record["protocol"] == {"1.1": "http/1.1", "2": "h2"}[http]
    assert record["bytes"] == BULK and record["objects_completed"] == 1
    (item,) = record["objects"]
    assert item["status"] == 200 and item["size"] == BULK and item["http_version"] == http
    assert 0 <= item["start"] <= item["first_byte"] <= item["end"]
    assert 0 < record["handshake_time"] < record["total_time"]
    assert 0 < record["ttfb"] <= record["completion_time"] < record["total_time"]
    assert abs(record["started_at"] - time.time()) < 120
    assert record["connections"] == 1
    # the bottleneck bounds the goodput; the client keeps up with it
    goodput = BULK * 8 / record["completion_time"]
    assert 0.6 * RATE < goodput < 1.05 * RATE
    transport = record["transport"]
    assert transport["complete"] is True
    assert transport["bytes_received"] >= BULK
    assert transport["data_packets_received"] >= BULK // 1448
    # Linux acknowledges about every second segment (quick ACKs at the start)
    assert 0.3 < transport["ack_only_per_data_packet_received"] < 1.0
    assert transport["rtt_min"] > 0 and transport["rtt_smoothed"] > 0
    (connection,) = transport["connections"]
    assert connection["remote_port"] == PORT and connection["local_port"] == item["connection"]
    assert record["cpu"]["cpu_s"] < record["completion_time"]  # not CPU-bound at 20 Mbit/s


def test_record_layout_matches_the_http3_client(bed: Bed) -> None:
    _, record, _ = bed.fetch("--http", "1.1", "--path", "/bulk/2MB.bin")
    quic = quic_new_record(QuicClientSettings(host="x", paths=["/"], profile=get_profile("quic")))
    assert set(quic) <= set(record)
    read = ClientRecord.from_dict(record)  # exactly ClientRecord's keys (tests/unit/test_client_record.py)
    assert read.extra == {} and set(SHARED_FIELDS) <= set(record) and read.to_dict() == record
    assert set(quic["request"]) <= set(record["request"])
    assert set(quic["server"]) <= set(record["server"])
    assert {"path", "status", "start", "first_byte", "end", "size"} <= set(record["objects"][0])
    for key in (
        "packets_sent",
        "packets_received",
        "ack_only_packets_sent",
        "packets_lost",
        "rtt_min",
        "rtt_smoothed",
        "cwnd",
        "congestion_control",
    ):
        assert key in record["transport"]


def _peak_concurrency(items: list[dict[str, Any]]) -> int:
    events = sorted([(o["start"], 1) for o in items] + [(o["end"], -1) for o in items], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, change in events:
        now += change
        peak = max(peak, now)
    return peak


@pytest.mark.parametrize("http", HTTP_VERSIONS)
def test_page_download(bed: Bed, http: str) -> None:
    code, record, stderr = bed.fetch("--http", http, "--manifest", str(bed.root), "--page", PAGE.name)
    assert code == 0, stderr
    assert record["request"]["page"] == PAGE.name and record["request"]["parallel"] == 6
    assert record["objects_completed"] == PAGE.objects == len(record["objects"])
    assert record["bytes"] == PAGE.total_bytes
    manifest = objects.load_manifest(bed.root)
    sizes = {o["path"]: o["size"] for o in objects.page_objects(manifest, PAGE.name)}
    assert {o["path"]: o["size"] for o in record["objects"]} == sizes
    assert all(o["status"] == 200 and o["start"] <= o["first_byte"] <= o["end"] for o in record["objects"])
    assert _peak_concurrency(record["objects"]) <= 6
    connections = {o["connection"] for o in record["objects"]}
    if http == "2":
        assert record["connections"] == 1 and len(connections) == 1  # all streams on one
    else:
        assert record["connections"] == 6 and len(connections) == 6  # like browsers
        for port in connections:  # one request at a time on each HTTP/1.1 connection
            on_it = sorted((o for o in record["objects"] if o["connection"] == port), key=lambda o: o["start"])
            assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(on_it))
    assert len(record["transport"]["connections"]) == record["connections"]
    assert record["completion_time"] > 0 and record["ttfb"] < record["completion_time"]


def test_nginx_access_log_has_every_request_with_tcp_info(bed: Bed) -> None:
    entries = bed.server.access_log()
    assert entries, "nothing logged"
    bulk = [e for e in entries if e["path"] == "/bulk/2MB.bin"]
    assert bulk and all(e["status"] == 200 and e["body_bytes"] == BULK for e in bulk)
    assert {"HTTP/1.1", "HTTP/2.0"} <= {e["protocol"] for e in entries}
    assert all(e["tcpinfo_rtt"] and e["tcpinfo_snd_cwnd"] for e in bulk)


def test_missing_object_and_refused_connection(bed: Bed) -> None:
    code, record, _ = bed.fetch("--http", "1.1", "--path", "/nope.bin")
    assert code == 1 and record["error"] == "HTTP status 404 for /nope.bin"
    assert record["ok"] is False
    code, record, _ = bed.fetch("--http", "1.1", "--path", "/bulk/2MB.bin", "--port", "9", port=9)
    assert code == 1 and "refused" in record["error"].lower()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (apt-get install curl)")
def test_curl_engine_gives_the_same_record(bed: Bed) -> None:
    code, record, stderr = bed.fetch("--engine", "curl", "--http", "2", "--path", "/bulk/2MB.bin")
    assert code == 0, stderr
    assert record["engine"] == "curl" and record["curl_version"]
    assert record["bytes"] == BULK and record["timing"] == "exact"
    assert 0 < record["handshake_time"] and 0 < record["ttfb"] <= record["completion_time"]
    # curl is held open until the last TCP_INFO sample: it has every byte
    assert record["transport"]["complete"] is True
    assert record["transport"]["bytes_received"] >= BULK
    code, record, _ = bed.fetch("--engine", "curl", "--http", "1.1", "--manifest", str(bed.root), "--page", PAGE.name)
    assert code == 0 and record["objects_completed"] == PAGE.objects
    assert record["timing"] == "approximate" and record["connections"] == 6
    assert record["transport"]["complete"] is True
    assert len(record["transport"]["connections"]) == 6
    assert record["transport"]["bytes_received"] >= PAGE.total_bytes


def _server_sockets(bed: Bed, port: int) -> str:
    return bed.server_node.run(["ss", "-t", "-i", "-n", "-H", "state", "established", "sport", "=", f":{port}"]).stdout


@pytest.mark.parametrize("congestion", ["cubic", "reno", "bbr"])
def test_congestion_control_is_applied_in_the_server_namespace(bed: Bed, congestion: str) -> None:
    """ss -ti in the server's namespace during a transfer shows the chosen algorithm."""
    port = PORT + 1 + nginx.CONGESTION_CONTROLS.index(congestion)
    settings = nginx.NginxSettings(
        root=bed.root, certificate=bed.cert, private_key=bed.key, port=port, congestion_control=congestion
    )
    with nginx.NginxServer(bed.server_node, settings, bed.base / f"nginx-{congestion}"):
        output = bed.base / f"cc-{congestion}.json"
        fetching = bed.client.start(
            module_argv(
                "quicbed.apps.tcp.client",
                [
                    "--host",
                    bed.server_node.address,
                    "--port",
                    str(port),
                    "--insecure",
                    "--http",
                    "1.1",
                    "--path",
                    "/bulk/2MB.bin",
                    "--timeout",
                    "20",
                    "--output",
                    str(output),
                ],
            ),
            name=f"client-{congestion}",
            log_dir=bed.base,
        )
        seen = ""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and fetching.running:
            seen = _server_sockets(bed, port)
            if seen.strip():
                break
            time.sleep(0.05)
        fetching.wait(30)
    assert seen.strip(), "no established connection seen in the server namespace"
    algorithms = set(seen.split()) & set(nginx.CONGESTION_CONTROLS)
    assert algorithms == {congestion}, seen
    record = json.loads(output.read_text())
    assert record["ok"] is True


def test_http3_is_skipped_with_a_reason_or_served(bed: Bed) -> None:
    settings = nginx.NginxSettings(
        root=bed.root, certificate=bed.cert, private_key=bed.key, port=PORT + 10, http3=True, congestion_control=None
    )
    server = nginx.NginxServer(bed.server_node, settings, bed.base / "nginx-h3")
    with server:
        if server.build.http3_unavailable is not None:
            assert server.http3_skipped and "HTTP/3" in server.http3_skipped
            assert server.protocols == ["http/1.1", "h2"]
        else:
            assert "h3" in server.protocols


def test_bad_config_is_reported(bed: Bed) -> None:
    settings = nginx.NginxSettings(
        root=bed.root, certificate=bed.base / "missing.pem", private_key=bed.key, port=PORT + 20
    )
    with pytest.raises(BackendError, match="missing.pem"):
        nginx.NginxServer(bed.server_node, settings, bed.base / "nginx-bad").start()
