"""Real HTTP/3 server and client processes over loopback (no namespaces, no root needed),
on both implementations: aioquic with the quic and bquic profiles, the native (quinn)
endpoint with quic. The same options, ready file, stats lines and records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quicbed.analysis.qlog import load_trace
from quicbed.apps import objects
from quicbed.apps.quic import certs
from quicbed.apps.quic.implementations import IMPLEMENTATIONS, native_binary
from quicbed.apps.quic.profiles import get_profile
from quicbed.apps.quic.qlog import read_events
from quicbed.apps.record import SHARED_FIELDS, ClientRecord

REPO = Path(__file__).resolve().parents[2]
BULK = 2_000_000
PAGE = objects.PageShape(12, 56)
READY_TIMEOUT = 20.0


@pytest.fixture(scope="module")
def content(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("quic-loopback")
    root = base / "www"
    objects.generate(root, bulk=[BULK], pages=[PAGE], seed=1)
    cert, key = certs.write(base / "tls")
    return {"base": base, "root": root, "cert": cert, "key": key}


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class Server:
    def __init__(self, content: dict[str, Path], implementation: str, profile: str, purpose: str = "server") -> None:
        self.implementation = implementation
        self.key = profile if implementation == "aioquic" else f"{implementation}-{profile}"
        self.directory = content["base"] / f"{purpose}-{self.key}"
        self.directory.mkdir()
        self.ready_file = self.directory / "ready.json"
        self.stats_file = self.directory / "stats.jsonl"
        self.qlog_dir = self.directory / "qlog"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                *IMPLEMENTATIONS[implementation].server,
                "--root",
                str(content["root"]),
                "--cert",
                str(content["cert"]),
                "--key",
                str(content["key"]),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--profile",
                profile,
                "--ready-file",
                str(self.ready_file),
                "--stats-file",
                str(self.stats_file),
                "--qlog-dir",
                str(self.qlog_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"server did not get ready: {self.process.stderr.read()}")
            time.sleep(0.05)
        self.info = json.loads(self.ready_file.read_text())
        self.port = int(self.info["port"])

    def stop(self) -> tuple[str, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, err = self.process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        return out, err


@pytest.fixture(
    scope="module",
    params=[("aioquic", "quic"), ("aioquic", "bquic"), ("quinn", "quic")],
    ids=["quic", "bquic", "quinn-quic"],
)
def server(request: pytest.FixtureRequest, content: dict[str, Path]) -> Iterator[Server]:
    implementation, profile = request.param
    if implementation == "quinn" and native_binary() is None:
        pytest.skip("the native QUIC endpoint is not built (./scripts/install.sh builds it)")
    running = Server(content, implementation, profile)
    yield running
    running.stop()


def _client(
    content: dict[str, Path], server: Server, name: str, *arguments: str, timeout: float = 60.0
) -> tuple[int, dict[str, Any], str]:
    output = server.directory / f"{name}.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            *IMPLEMENTATIONS[server.implementation].client,
            "--host",
            "127.0.0.1",
            "--port",
            str(server.port),
            "--ca-cert",
            str(content["cert"]),
            "--server-name",
            "localhost",
            "--profile",
            server.info["profile"],
            "--timeout",
            str(timeout),
            "--output",
            str(output),
            *arguments,
        ],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=timeout + 30,
    )
    record = json.loads(output.read_text()) if output.exists() else {}
    return completed.returncode, record, completed.stderr


@pytest.fixture(scope="module")
def aioquic_bulk_records(content: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """One bulk download over aioquic with each of the quic and bquic profiles, made here so
    that a test comparing them runs alone, in any order."""
    records = {}
    for profile in ("quic", "bquic"):
        running = Server(content, "aioquic", profile, purpose="compared")
        try:
            code, records[profile], stderr = _client(content, running, "bulk", "--path", "/bulk/2MB.bin")
            assert code == 0, stderr
        finally:
            running.stop()
    return records


def test_server_ready_line_and_file(server: Server) -> None:
    profile = server.info["profile"]
    assert server.info["knobs"] == get_profile(profile).knobs()
    assert server.info["socket"]["rcvbuf"] >= 4 * 1024 * 1024 or server.info["socket"]["capped"]
    assert server.info["host"] == "127.0.0.1" and server.port > 0


def test_bulk_download(content: dict[str, Path], server: Server) -> None:
    profile = server.info["profile"]
    qlog_dir = server.directory / "client-qlog"
    code, record, stderr = _client(content, server, "bulk", "--path", "/bulk/2MB.bin", "--qlog-dir", str(qlog_dir))
    assert code == 0, stderr
    assert record["ok"] is True and record["error"] is None
    # exactly ClientRecord's keys, as the runner reads them (tests/unit/test_client_record.py)
    read = ClientRecord.from_dict(record)
    assert read.extra == {} and set(SHARED_FIELDS) <= set(record) and read.to_dict() == record
    assert record["bytes"] == BULK
    assert record["profile"] == profile and record["knobs"] == get_profile(profile).knobs()
    assert 0 < record["handshake_time"] < record["total_time"]
    assert 0 < record["ttfb"] <= record["completion_time"] < record["total_time"]
    assert abs(record["started_at"] - time.time()) < 120
    (item,) = record["objects"]
    assert item["status"] == 200 and item["size"] == BULK
    assert item["start"] <= item["first_byte"] <= item["end"]
    transport = record["transport"]
    if server.implementation == "quinn":
        assert record["implementation"] == "quinn" and record["versions"]["quinn"]
        for key in ("packets_sent", "datagrams_received", "packets_lost", "rtt_min", "rtt_smoothed", "cwnd"):
            assert transport[key] is not None, key
        assert transport["datagrams_received"] >= BULK // 1500
        # quinn's own qlog, streamed as JSON-SEQ
        (qlog_file,) = record["qlog"]
        assert Path(qlog_file).read_bytes()[:1] == b"\x1e"
        assert load_trace(qlog_file).named("recovery:metrics_updated")
        return
    assert record["aioquic_version"]
    for key in (
        "packets_sent",
        "packets_received",
        "ack_only_packets_sent",
        "packets_lost",
        "rtt_min",
        "rtt_smoothed",
        "cwnd",
    ):
        assert transport[key] is not None, key
    assert transport["ack_eliciting_packets_received"] >= BULK // 1300
    # the filtered qlog of the client: ACK frames and recovery metrics only
    (qlog_file,) = record["qlog"]
    names = {event["name"] for event in read_events(qlog_file)}
    assert names <= {
        "recovery:metrics_updated",
        "recovery:packet_lost",
        "recovery:congestion_state_updated",
        "transport:packet_sent",
        "transport:packet_received",
        "transport:parameters_set",
    }
    sent_acks = [e for e in read_events(qlog_file, ["transport:packet_sent"]) if e["data"]["ack_only"]]
    assert len(sent_acks) == transport["ack_only_packets_sent"]


def test_page_download(content: dict[str, Path], server: Server) -> None:
    code, record, stderr = _client(
        content, server, "page", "--manifest", str(content["root"]), "--page", PAGE.name, "--parallel", "4"
    )
    assert code == 0, stderr
    assert record["request"]["page"] == PAGE.name and record["request"]["parallel"] == 4
    assert record["objects_completed"] == PAGE.objects == len(record["objects"])
    assert record["bytes"] == PAGE.total_bytes
    manifest = objects.load_manifest(content["root"])
    sizes = {o["path"]: o["size"] for o in objects.page_objects(manifest, PAGE.name)}
    assert {o["path"]: o["size"] for o in record["objects"]} == sizes
    assert all(o["status"] == 200 and o["end"] >= o["first_byte"] >= o["start"] for o in record["objects"])
    # no more than 4 requests were open at once
    events = sorted(
        [(o["start"], 1) for o in record["objects"]] + [(o["end"], -1) for o in record["objects"]],
        key=lambda e: (e[0], e[1]),
    )
    open_now = peak = 0
    for _, change in events:
        open_now += change
        peak = max(peak, open_now)
    assert peak <= 4


def test_errors_give_exit_1_and_an_error_field(content: dict[str, Path], server: Server) -> None:
    code, record, _ = _client(content, server, "missing", "--path", "/nope.bin")
    assert code == 1 and record["error"] == "HTTP status 404 for /nope.bin"
    assert record["ok"] is False


def test_server_stats_and_qlog_after_shutdown(server: Server) -> None:
    _, err = server.stop()
    assert "Traceback" not in err
    lines = [json.loads(line) for line in server.stats_file.read_text().splitlines()]
    assert len(lines) >= 2 and {line["profile"] for line in lines} == {server.info["profile"]}
    assert max(line["transport"]["packets_sent"] for line in lines) > BULK // 1500
    qlogs = sorted(server.qlog_dir.glob("*_server.qlog" if server.implementation == "aioquic" else "server-*.sqlog"))
    assert len(qlogs) == len(lines)
    metrics = [e for q in qlogs for e in load_trace(q).named("recovery:metrics_updated")]
    assert any("cwnd" in e["data"] for e in metrics)
    assert not server.ready_file.exists()


def test_bquic_client_acks_less_than_quic(aioquic_bulk_records: dict[str, dict[str, Any]]) -> None:
    ratio = {
        name: aioquic_bulk_records[name]["transport"]["ack_only_per_ack_eliciting_received"]
        for name in ("quic", "bquic")
    }
    assert ratio["quic"] == pytest.approx(0.5, abs=0.08)
    assert ratio["bquic"] < 0.8 * ratio["quic"]


def test_timeout_without_server(content: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "timeout.json"
    started = time.monotonic()
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "quicbed.apps.quic.client",
            "--host",
            "127.0.0.1",
            "--port",
            "9",
            "--insecure",
            "--path",
            "/x",
            "--timeout",
            "1.5",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
    )
    assert completed.returncode == 1
    record = json.loads(output.read_text())
    assert record["error"] == "timeout after 1.5s" and record["ok"] is False
    assert time.monotonic() - started < 30
