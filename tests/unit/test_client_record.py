"""The download clients' record (quicbed.apps.record.ClientRecord): the keys each client
writes are ClientRecord's (the shared ones all, the optional ones that client's), for the
TCP and aioquic clients as they run, and for the native (Rust) client both from its source
and, where it is built, as it runs. A client writing a key ClientRecord does not know, or
leaving out a shared one, fails here rather than in a reader."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps.quic import client as aioquic_client
from quicbed.apps.quic import native
from quicbed.apps.quic.implementations import native_binary
from quicbed.apps.record import (
    CLIENT_RECORD_FIELDS,
    OPTIONAL_FIELDS,
    SHARED_FIELDS,
    ClientRecord,
    RequestSettings,
    base_record,
)
from quicbed.apps.tcp import client as tcp_client

ROOT = Path(__file__).resolve().parents[2]
NATIVE_CLIENT_SOURCE = ROOT / "native" / "quinn" / "src" / "client.rs"
#: what each client adds to the shared keys (on a run that fails to connect, as these do)
AIOQUIC_KEYS = {"aioquic_version", "protocol", "profile", "knobs"}
QUINN_KEYS = {"protocol", "profile", "knobs", "implementation", "versions"}
TCP_KEYS = {"aioquic_version", "engine", "curl_version", "profile", "knobs", "protocol", "connections", "cpu", "timing"}


def _free_port(kind: int) -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def assert_client_record(record: dict[str, Any], optional: set[str]) -> None:
    """``record`` has exactly ClientRecord's keys: every shared one, the ``optional`` ones,
    nothing ClientRecord does not know; and it reads and writes back unchanged."""
    read = ClientRecord.from_dict(record)
    assert read.extra == {}, f"keys ClientRecord lacks: {sorted(read.extra)}"
    assert [key for key in SHARED_FIELDS if key not in record] == []
    assert set(record) - set(SHARED_FIELDS) == optional
    assert read.to_dict() == record


def test_base_record_is_the_shared_fields_in_their_order() -> None:
    settings = RequestSettings(host="10.0.0.2", port=4433, paths=["/a", "/b"], page="p", label="x")
    record = base_record("quicbed-quic-client", settings)
    assert tuple(record) == SHARED_FIELDS and set(SHARED_FIELDS) | set(OPTIONAL_FIELDS) == set(CLIENT_RECORD_FIELDS)
    assert record["server"] == {"host": "10.0.0.2", "port": 4433, "address": None}
    assert record["request"] == {
        "page": "p",
        "paths": ["/a", "/b"],
        "parallel": 6,
        "timeout": 60.0,
        "resumption": "none",
    }
    assert (record["ok"], record["error"], record["bytes"], record["objects"]) == (False, None, 0, [])
    assert_client_record(record, set())


def test_a_record_keeps_what_it_does_not_know_and_the_nulls_it_was_read_with() -> None:
    record = {
        **base_record("quicbed-tcp-client", RequestSettings(host="h", port=443, paths=["/"])),
        "curl_version": None,
        "connections": 2,
        "from_a_newer_client": [1],
    }
    read = ClientRecord.from_dict(record)
    assert read.connections == 2 and read.curl_version is None and read.extra == {"from_a_newer_client": [1]}
    assert read.to_dict() == record  # the null it was read with is written again, the unknown key too
    read.engine = "python"  # set after reading: written, although the record lacked it
    assert read.to_dict()["engine"] == "python"


def test_the_transfer_span_is_said_only_by_numbers() -> None:
    read = ClientRecord.from_dict({"started_at": 100.0, "total_time": 2.5})
    assert (read.ended_at, read.transfer) == (102.5, (100.0, 102.5))
    assert ClientRecord.from_dict({"started_at": 100.0, "total_time": 0}).transfer is None
    assert ClientRecord.from_dict({"started_at": 100.0}).ended_at is None
    assert ClientRecord.from_dict({"started_at": "soon", "total_time": 1.0}).transfer is None


def test_the_aioquic_client_writes_client_record_keys(tmp_path: Path) -> None:
    output = tmp_path / "client.json"
    status = aioquic_client.main(
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port(socket.SOCK_DGRAM)),
            "--path",
            "/a",
            "--insecure",
            "--timeout",
            "0.3",
            "--output",
            str(output),
        ]
    )
    record = json.loads(output.read_text())
    assert status == 1 and record["error"] == "timeout after 0.3s"
    assert_client_record(record, AIOQUIC_KEYS)


@pytest.mark.parametrize("engine", ["python", "curl"])
def test_the_tcp_client_writes_client_record_keys(tmp_path: Path, engine: str) -> None:
    output = tmp_path / "client.json"
    status = tcp_client.main(
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port(socket.SOCK_STREAM)),
            "--path",
            "/a",
            "--http",
            "1.1",
            "--engine",
            engine,
            "--insecure",
            "--timeout",
            "5",
            "--output",
            str(output),
        ]
    )
    record = json.loads(output.read_text())
    assert status == 1 and record["error"] and record["engine"] == engine
    if engine == "curl" and record["curl_version"] is None:
        pytest.skip(f"curl did not run: {record['error']}")
    assert_client_record(record, TCP_KEYS | ({"curl_messages"} if "curl_messages" in record else set()))


def test_the_native_client_source_sets_only_client_record_keys() -> None:
    """Every top-level key native/quinn/src/client.rs reads or sets in the record (it only ever
    indexes it as ``record["key"]``) is ClientRecord's."""
    source = NATIVE_CLIENT_SOURCE.read_text()
    assert not re.search(r"record\s*\.\s*(as_object_mut|insert|pointer_mut|entry)\b", source), (
        "client.rs writes the record in a way this scan cannot see: extend it"
    )
    keys = set(re.findall(r'\brecord\["(\w+)"\]', source))
    assert {"started_at", "ok", "error", "objects", "implementation", "versions"} <= keys, "the scan finds nothing"
    assert sorted(keys - set(CLIENT_RECORD_FIELDS)) == []


@pytest.mark.skipif(
    native_binary() is None,
    reason="the native QUIC client (quicbed-quinn) is not built: ./scripts/install.sh builds it",
)
@pytest.mark.parametrize("resumption", ["none", "ticket"])
def test_the_native_client_writes_client_record_keys(tmp_path: Path, resumption: str) -> None:
    """The binary, given the template quicbed gives it (apps/quic/native.py), fills in a
    record with ClientRecord's keys (here of a download that finds no server)."""
    output = tmp_path / "client.json"
    command = native.client_argv(
        [
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port(socket.SOCK_DGRAM)),
            "--path",
            "/a",
            "--insecure",
            "--timeout",
            "0.5",
            "--resumption",
            resumption,
            "--output",
            str(output),
        ]
    )
    finished = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert finished.returncode == 1, finished.stderr
    record = json.loads(output.read_text())
    assert record["error"] and record["implementation"] == "quinn"
    assert_client_record(record, QUINN_KEYS | ({"resumption"} if resumption != "none" else set()))


def test_the_runner_reads_a_record_through_client_record() -> None:
    from quicbed.runner.transfer import record_summary, transfer_window

    settings = RequestSettings(host="10.0.0.2", port=4433, paths=["/a"])
    timed = {
        **base_record("quicbed-quic-client", settings),
        "error": "timeout after 60s",
        "bytes": 10,
        "started_at": 100.0,
        "total_time": 2.0,
    }
    untimed = base_record("quicbed-quic-client", settings)
    assert record_summary(timed) == {"ok": False, "error": "timeout after 60s", "bytes": 10, "download_end": 102.0}
    assert record_summary(untimed) == {"ok": False, "error": None, "bytes": 0}
    start, end = transfer_window([timed, untimed]) or (0.0, 0.0)
    assert end - start == pytest.approx(2.0)
    assert transfer_window([untimed]) is None
