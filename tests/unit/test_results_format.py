"""The run record and its one reader (quicbed/results.py): every consumer reads results.jsonl
through it, as RunRecords, with one policy for torn, damaged, version-less and newer lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quicbed.errors import QuicbedError
from quicbed.report.load import read_attempts, runs_frame
from quicbed.results import FORMAT_VERSION, RECORD_FIELDS, RunRecord, read_records, upgrade
from quicbed.runner.folder import read_results

ROOT = Path(__file__).resolve().parents[2]


def _folder(tmp_path: Path, name: str, lines: list[str], end: str = "\n") -> Path:
    path = tmp_path / name / "results.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + end)
    return path


def _line(run_id: str, **fields: object) -> str:
    return json.dumps({"run_id": run_id, **fields})


def test_a_record_has_every_key_with_its_default_and_the_format() -> None:
    record = RunRecord("c000-r001", 0, 0, {"transport": "quic"}, 1, False).to_dict()
    assert tuple(record) == RECORD_FIELDS
    assert record["format"] == FORMAT_VERSION and record["status"] == "ok" and record["metrics"] == {}
    assert record["cpu_unknown_reasons"] == ["no CPU record"]  # unknown until its CPU figures are read
    # every key is documented in docs/results.md
    documented = (ROOT / "docs" / "results.md").read_text()
    assert [key for key in RECORD_FIELDS if f"`{key}`" not in documented] == []


def test_a_torn_last_line_is_tolerated_and_reported_by_every_reader(tmp_path: Path) -> None:
    path = _folder(tmp_path, "torn", [_line("a"), _line("b"), '{"run_id": "c", "sta'], end="")
    records, warnings = read_records(path, strict=True)
    assert [r.run_id for r in records] == ["a", "b"] and "line 3 is truncated" in warnings[0]
    assert [r.run_id for r in read_results(path)] == ["a", "b"]
    assert [r["run_id"] for r in read_attempts(path)[0]] == ["a", "b"]


def test_a_damaged_middle_line_is_an_error_when_strict_and_a_warning_in_the_report(tmp_path: Path) -> None:
    path = _folder(tmp_path, "middle", [_line("a"), "not json", _line("c")])
    with pytest.raises(QuicbedError, match="line 2 is not JSON"):
        read_records(path, strict=True)
    with pytest.raises(QuicbedError, match="line 2 is not JSON"):
        read_results(path)
    records, _, warnings = read_attempts(path)
    assert [r["run_id"] for r in records] == ["a", "c"] and "line 2 is not JSON" in warnings[0]


def test_a_newer_format_is_refused_and_a_versionless_folder_is_version_1(tmp_path: Path) -> None:
    old = _folder(tmp_path, "old", [_line("a"), _line("b")])  # written before records had a format
    assert len(read_records(old, strict=True)[0]) == 2
    newer = _folder(tmp_path, "newer", [_line("a", format=FORMAT_VERSION + 1)])
    for strict in (True, False):
        with pytest.raises(
            QuicbedError,
            match=rf"format {FORMAT_VERSION + 1}; this quicbed reads up to format "
            rf"{FORMAT_VERSION}",
        ):
            read_records(newer, strict=strict)


def test_an_attempt_made_again_is_kept_quietly_and_a_good_run_made_again_is_reported(tmp_path: Path) -> None:
    retried = _folder(
        tmp_path, "retried", [_line("a", status="invalid"), _line("a", status="failed"), _line("a", status="ok")]
    )
    records, superseded, warnings = read_attempts(retried)
    assert [r["status"] for r in records] == ["ok"] and [r["status"] for r in superseded] == ["invalid", "failed"]
    assert warnings == []
    twice = _folder(tmp_path, "twice", [_line("a", status="ok", order=1), _line("a", status="ok", order=2)])
    records, superseded, warnings = read_attempts(twice)
    assert [r["order"] for r in records] == [2] and len(superseded) == 1
    assert warnings == [f"{twice}: run a completed twice; the later record counts"]


#: two lines as the first quicbed runner wrote them (before records had a format, a clock, a
#: host, attempts or CPU reasons), one with a key added by hand
FORMAT_1_LINES = [
    '{"run_id":"c000-r001","index":0,"cell_index":0,"cell":{"transport":"quic"},"repetition":1,"warmup":false,'
    '"status":"ok","error":null,"invalid_reasons":[],"transport":{"name":"quic","kind":"quic"},'
    '"workload":{"object":200000,"parallel":6},"client":"client","server":"server","backend":"netns",'
    '"started":1795966373.6056888,"finished":1795966378.871587,"metrics":{"download_time":1.25,"goodput":1280000.0},'
    '"folder":"runs/c000-r001"}',
    '{"run_id":"c000-r002","index":1,"cell_index":0,"cell":{"transport":"quic"},"repetition":2,"warmup":false,'
    '"status":"failed","error":"download failed: timeout after 60s","invalid_reasons":[],'
    '"transport":{"name":"quic","kind":"quic"},"workload":{"object":200000,"parallel":6},"client":"client",'
    '"server":"server","backend":"netns","started":1795966379.1,"finished":1795966440.2,"metrics":{},'
    '"folder":"runs/c000-r002","note":"the link was re-cabled"}',
]


def test_a_format_1_folder_is_read_as_run_records_with_defaults_for_what_it_lacks(tmp_path: Path) -> None:
    path = _folder(tmp_path, "format-1", FORMAT_1_LINES)
    for strict in (True, False):
        records, warnings = read_records(path, strict=strict)
        assert warnings == [] and all(isinstance(record, RunRecord) for record in records)
        first, second = records
        assert (first.run_id, first.status, first.metrics["goodput"]) == ("c000-r001", "ok", 1280000.0)
        assert (first.format, first.clock, first.attempt, first.earlier_attempts) == (1, "real", 1, [])
        assert {"format", "clock", "kernel", "host", "attempt", "cpu_unknown_reasons"} <= first.absent
        assert second.status == "failed" and second.extra == {"note": "the link was re-cabled"}  # kept, never refused
    # written again, each line is the line read, byte for byte (what merge writes)
    assert [json.dumps(r.to_dict(), separators=(",", ":")) for r in records] == FORMAT_1_LINES
    # the report reads them as written: a record that does not say its CPU state, without CPU
    # figures, is unknown for want of figures, not for want of a CPU record
    report_records = read_attempts(path)[0]
    assert report_records == [json.loads(line) for line in FORMAT_1_LINES]
    assert list(runs_frame(report_records)[0]["cpu_unknown_reasons"]) == ["no CPU figures in the record"] * 2


def test_upgrade_is_where_an_older_format_becomes_this_one(tmp_path: Path) -> None:
    line = json.loads(FORMAT_1_LINES[0])
    assert upgrade(line, 1) == json.loads(FORMAT_1_LINES[0])  # format 1 is today's: unchanged
    assert FORMAT_VERSION == 1, "a new format: upgrade() converts format-1 lines, and this test says how"


def test_a_record_written_and_read_again_is_the_same_record() -> None:
    record = RunRecord(
        "c000-r001",
        0,
        0,
        {"transport": "quic"},
        1,
        False,
        status="invalid",
        invalid_reasons=["ns-3 behind"],
        metrics={"goodput": 1e6},
        folder="runs/c000-r001",
    )
    line = json.dumps(record.to_dict())
    again = RunRecord.from_dict(json.loads(line))
    assert again == record and again.absent == frozenset() and again.extra == {}
    assert json.dumps(again.to_dict()) == line
    # a field set after reading is written, although the line lacked it
    partial = RunRecord.from_dict({"run_id": "a"})
    partial.status = "failed"
    assert partial.to_dict() == {"run_id": "a", "status": "failed"}
