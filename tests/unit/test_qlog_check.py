"""qlog files checked against what qvis reads (quicbed.analysis.qlog_check): the committed
fixtures of both implementations load, and each way of breaking a file is named."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from quicbed.analysis.qlog_check import check_qlog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"


@pytest.mark.parametrize(
    "name", ["quic/server.qlog.gz", "bquic/server.qlog.gz", "quic_full/server.qlog.gz", "quinn/server.sqlog.gz"]
)
def test_both_implementations_qlogs_load_in_qvis(name: str) -> None:
    check = check_qlog(FIXTURES / name)
    assert check.problems == [] and check.version == "0.3" and check.traces == 1 and check.events > 200
    assert check.format == ("JSON-SEQ" if name.startswith("quinn") else "JSON")
    # quinn's RTTs are in seconds where qlog (and qvis) say milliseconds: said, not hidden
    assert bool(check.caveats) == name.startswith("quinn")


def _aioquic(tmp_path: Path, change) -> Path:
    document = json.loads(gzip.decompress((FIXTURES / "quic" / "server.qlog.gz").read_bytes()))
    change(document)
    path = tmp_path / "changed.qlog"
    path.write_text(json.dumps(document))
    return path


def test_what_qvis_cannot_read_is_named(tmp_path: Path) -> None:
    def version(document):
        document["qlog_version"] = "0.4"

    def relative(document):
        document["traces"][0]["common_fields"]["time_format"] = "relative"

    def events(document):
        document["traces"][0]["events"][1]["name"] = "packet_sent"
        del document["traces"][0]["events"][2]["time"]
        document["traces"][0]["events"][3]["data"] = []

    assert check_qlog(_aioquic(tmp_path, version)).problems == [
        "qlog_version '0.4': qvis reads draft-02, draft-02-RC1, qlog-03-WIP, 0.3"
    ]
    assert check_qlog(_aioquic(tmp_path, relative)).problems == [
        "the trace: relative times without common_fields.reference_time"
    ]
    assert check_qlog(_aioquic(tmp_path, events)).problems == [
        "the trace: 1 event(s) with a name that is not category:type (e.g. event 1)",
        "the trace: 1 event(s) with no numeric time (e.g. event 2)",
        "the trace: 1 event(s) with no data object (e.g. event 3)",
    ]
    headless = tmp_path / "headless.sqlog"
    headless.write_text('\x1e{"qlog_version": "0.3", "qlog_format": "JSON-SEQ"}\n\x1e{"time": 0}\n')
    assert check_qlog(headless).problems == ["JSON-SEQ without a header record holding 'trace'"]
    other = tmp_path / "other.json"
    other.write_text('{"traces": []}')
    assert "no qlog_version" in check_qlog(other).problems[0]
