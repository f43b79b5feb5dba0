"""Session resumption and 0-RTT on both QUIC implementations (aioquic and the native quinn
endpoints), over loopback, checked on the wire: tshark decrypts the capture with the client's
key log and lists each connection's TLS handshake messages and QUIC packet types. A new
connection's server sends its certificate; a resumed one's does not; a 0-RTT one's client
sends 0-RTT packets before the handshake ends. The TCP client, which cannot send early data,
refuses 0rtt (its ticket resumption is checked in tests/integration/test_runner.py)."""

from __future__ import annotations

import json
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps import objects
from quicbed.apps.quic import certs
from quicbed.apps.quic.implementations import IMPLEMENTATIONS, native_binary
from quicbed.apps.record import ClientRecord

REPO = Path(__file__).resolve().parents[2]
OBJECT = "/bulk/100kB.bin"
CERTIFICATE, CERTIFICATE_VERIFY = 11, 15  # TLS handshake message types
INITIAL, ZERO_RTT = 0, 1  # QUIC long header packet types
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(
        shutil.which("tcpdump") is None or shutil.which("tshark") is None,
        reason="needs tcpdump and tshark (apt-get install tcpdump tshark)",
    ),
]


@dataclass
class Connection:
    """What the capture shows of one QUIC connection (by the client's connection ID)."""

    server_messages: set[int] = field(default_factory=set)  # TLS handshake message types
    client_packet_types: list[int] = field(default_factory=list)  # long header packet types


@dataclass
class Fetch:
    record: dict[str, Any]
    connections: list[Connection]  # in the order they started


@pytest.fixture(scope="module", params=["quinn", "aioquic"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    implementation = request.param
    if implementation == "quinn" and native_binary() is None:
        pytest.skip("the native QUIC endpoint is not built (./scripts/install.sh builds it)")
    base = tmp_path_factory.mktemp(f"resumption-{implementation}")
    objects.generate(base / "www", bulk=[100_000], pages=[], seed=1)
    cert, key = certs.write(base / "tls")
    ready = base / "ready.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            *IMPLEMENTATIONS[implementation].server,
            "--root",
            str(base / "www"),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--profile",
            "quic",
            "--ready-file",
            str(ready),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the server did not get ready"
        time.sleep(0.05)
    yield {
        "base": base,
        "cert": cert,
        "port": json.loads(ready.read_text())["port"],
        "client": IMPLEMENTATIONS[implementation].client,
    }
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=15)


#: fetches made again when the capture lacks a handshake the client's record says it made: in 2
#: of 69 runs of this module one capture held one handshake of two, with nearly all the bytes
#: (cause not found), which alone would fail the module 1 run in 35; three attempts make that
#: about 1 in 10^6
ATTEMPTS = 3


def _fetch(server: dict[str, Any], resumption: str) -> Fetch:
    """A download with ``resumption``, captured; made again while the capture misses a connection."""
    for attempt in range(1, ATTEMPTS + 1):
        fetch = _fetch_once(server, resumption, f"{resumption}-{attempt}")
        if len(fetch.connections) >= (1 if resumption == "none" else 2) or not fetch.record.get("ok"):
            return fetch
    return fetch


def _fetch_once(server: dict[str, Any], resumption: str, name: str) -> Fetch:
    base, port = server["base"], server["port"]
    pcap, keys, output = (base / f"{name}.{suffix}" for suffix in ("pcap", "keys", "json"))
    dump = subprocess.Popen(
        [
            "tcpdump",
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-n",
            "-Z",
            "root",
            "-w",
            str(pcap),
            "udp",
            "port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    said = ""
    while "listening on" not in said:  # tcpdump's first words once it captures
        ready, _, _ = select.select([dump.stderr], [], [], 10)
        assert ready and dump.poll() is None, f"tcpdump did not start: {said}"
        said += dump.stderr.readline()
    command = [
        sys.executable,
        "-m",
        *server["client"],
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ca-cert",
        str(server["cert"]),
        "--server-name",
        "localhost",
        "--profile",
        "quic",
        "--path",
        OBJECT,
        "--resumption",
        resumption,
        "--keylog",
        str(keys),
        "--output",
        str(output),
    ]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    time.sleep(0.2)
    dump.send_signal(signal.SIGINT)
    dump.wait(timeout=10)
    record = (
        json.loads(output.read_text())
        if output.exists()
        else {"exit": completed.returncode, "stderr": completed.stderr}
    )
    return Fetch(record, _connections(pcap, keys, port) if keys.exists() else [])


def _connections(pcap: Path, keys: Path, port: int) -> list[Connection]:
    fields = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-o",
            f"tls.keylog_file:{keys}",
            "-d",
            f"udp.port=={port},quic",
            "-T",
            "fields",
            "-e",
            "udp.srcport",
            "-e",
            "quic.long.packet_type",
            "-e",
            "tls.handshake.type",
            "-e",
            "quic.scid",
            "-e",
            "quic.dcid",
            "-E",
            "occurrence=a",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_client_id: dict[str, Connection] = {}
    for line in fields.splitlines():
        source, packet_types, messages, scid, dcid = (line.split("\t") + [""] * 5)[:5]
        types = [int(t) for t in packet_types.split(",") if t]
        if not types:
            continue  # short header packets only: their connection IDs are any the peer issued
        from_server = int(source) == port
        client_id = (dcid if from_server else scid).split(",")[0]  # the client's, in the handshake
        connection = by_client_id.setdefault(client_id, Connection())
        if from_server:
            connection.server_messages |= {int(m) for m in messages.split(",") if m}
        else:
            connection.client_packet_types += types
    return list(by_client_id.values())


def test_a_new_connection_sends_the_certificate(server: dict[str, Any]) -> None:
    fetch = _fetch(server, "none")
    assert fetch.record["ok"] is True and "resumption" not in fetch.record, fetch.record
    (connection,) = fetch.connections
    assert {CERTIFICATE, CERTIFICATE_VERIFY} <= connection.server_messages
    assert ZERO_RTT not in connection.client_packet_types


def test_a_resumed_connection_skips_the_certificate(server: dict[str, Any]) -> None:
    fetch = _fetch(server, "ticket")
    resumption = fetch.record["resumption"]
    assert fetch.record["ok"] is True, fetch.record
    assert ClientRecord.from_dict(fetch.record).extra == {}  # ClientRecord's keys (tests/unit/test_client_record.py)
    assert resumption["asked"] == "ticket" and resumption["ticket_offered"] is True
    assert resumption["tickets_received"] >= 1
    assert resumption["early_data_accepted"] is None and resumption["priming"]["status"] == 404
    priming, measured = fetch.connections
    assert CERTIFICATE in priming.server_messages and CERTIFICATE not in measured.server_messages
    assert CERTIFICATE_VERIFY not in measured.server_messages
    assert ZERO_RTT not in measured.client_packet_types
    # the record's times are the measured connection's, the priming one's apart
    assert 0 < fetch.record["handshake_time"] < fetch.record["total_time"]
    assert 0 < resumption["priming"]["handshake_time"] < resumption["priming"]["total_time"]


def test_a_0rtt_connection_sends_its_request_before_the_handshake_ends(server: dict[str, Any]) -> None:
    fetch = _fetch(server, "0rtt")
    resumption = fetch.record["resumption"]
    assert fetch.record["ok"] is True and resumption["early_data_accepted"] is True, fetch.record
    priming, measured = fetch.connections
    assert ZERO_RTT not in priming.client_packet_types and ZERO_RTT in measured.client_packet_types
    assert CERTIFICATE not in measured.server_messages


def test_the_tcp_client_refuses_0rtt() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "quicbed.apps.tcp.client",
            "--host",
            "127.0.0.1",
            "--path",
            OBJECT,
            "--resumption",
            "0rtt",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--resumption 0rtt: this client resumes with ticket" in completed.stderr
