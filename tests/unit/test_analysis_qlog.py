"""QUIC sender state from qlog: the committed server qlogs (quicbed's filtered format and
aioquic's full format) and small hand-written traces.

Counts quoted in the tests come from ``zcat F | grep -o '"recovery:metrics_updated"' | wc -l``
(and likewise for ``recovery:packet_lost``, ``recovery:congestion_state_updated``,
``"cwnd":N`` and ``"min_rtt":N``). Time-weighted means are recomputed in the tests by a
plain loop over the raw JSON events.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from quicbed.analysis import qlog
from quicbed.analysis.packets import read_pcap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"

# name: (metrics events, packet_lost, congestion_state_updated, max cwnd, last min_rtt (ms))
GREP = {
    "quic": (356, 0, 2, 33947, 1.29),
    "bquic": (388, 5, 4, 39387, 4.327),
    "quic_full": (76, 0, 0, 30157, 1.6834030002428335),
}


def _raw_metrics(name: str) -> list[dict[str, Any]]:
    document = json.loads(gzip.decompress((FIXTURES / name / "server.qlog.gz").read_bytes()))
    return [e for e in document["traces"][0]["events"] if e["name"] == "recovery:metrics_updated"]


@pytest.mark.parametrize("name", sorted(GREP))
def test_counts_and_extremes_match_grep(name: str) -> None:
    metrics_count, lost, states, cwnd_max, min_rtt = GREP[name]
    trace = qlog.load_trace(FIXTURES / name / "server.qlog.gz", "server")
    assert trace.vantage == "server"
    frame = qlog.metrics_frame(trace)
    assert len(frame) == metrics_count
    assert len(trace.named("recovery:packet_lost")) == lost
    assert len(trace.named("recovery:congestion_state_updated")) == states
    summary = qlog.summarize_trace(trace)
    assert summary.cwnd_max == cwnd_max
    assert summary.min_rtt == pytest.approx(min_rtt / 1000)
    assert summary.packets_lost == lost
    assert summary.states_source == ("derived" if name == "quic_full" else "logged")
    assert sum(summary.phases.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", sorted(GREP))
def test_time_weighted_cwnd_by_a_plain_loop(name: str) -> None:
    events = _raw_metrics(name)
    times = [e["time"] / 1000 for e in events]
    flight, last_busy = 0, None
    for when, event in zip(times, events, strict=True):
        flight = event["data"].get("bytes_in_flight", flight)
        if flight > 0:
            last_busy = when
    start, end = times[0], last_busy
    area = area2 = span = 0.0
    for (when, event), following in zip(zip(times, events, strict=True), [*times[1:], end], strict=True):
        stop = min(following, end)
        if stop <= when:
            continue
        cwnd = event["data"]["cwnd"]
        area += cwnd * (stop - when)
        area2 += cwnd * cwnd * (stop - when)
        span += stop - when
    mean = area / span
    summary = qlog.summarize_qlog(FIXTURES / name / "server.qlog.gz")
    assert (summary.start, summary.end) == pytest.approx((start, end), abs=1e-9)
    assert summary.cwnd_mean == pytest.approx(mean, rel=1e-9)
    assert summary.cwnd_var == pytest.approx(area2 / span - mean * mean, rel=1e-6)


def test_metrics_frame_is_forward_filled_in_seconds() -> None:
    frame = qlog.metrics_frame(qlog.load_trace(FIXTURES / "quic/server.qlog.gz"))
    # the raw events: {"cwnd":12000,"bytes_in_flight":177} at 1795257016310.328 ms, ...,
    # {"cwnd":12852,"bytes_in_flight":0,...,"smoothed_rtt":7.633,...} at 1795257016317.949
    first, fifth, sixth = frame.iloc[0], frame.iloc[4], frame.iloc[5]
    assert first["time"] == pytest.approx(1795257016.310328, abs=1e-6)
    assert (first["cwnd"], first["bytes_in_flight"]) == (12000, 177)
    assert math.isnan(first["smoothed_rtt"]) and math.isnan(first["ssthresh"])
    assert fifth["smoothed_rtt"] == pytest.approx(0.007633)
    assert sixth["smoothed_rtt"] == pytest.approx(0.007633)  # not logged again: carried on


def test_qlog_times_are_on_the_capture_clock() -> None:
    trace = qlog.load_trace(FIXTURES / "quic/server.qlog.gz")
    first_metrics = qlog.metrics_frame(trace)["time"].iloc[0]
    first_from_server = next(p for p in read_pcap(FIXTURES / "quic/server.pcap") if p.sport == 4433)
    # the server's first Initial is logged (metrics_updated on send), then captured
    assert 0 <= first_from_server.ts - first_metrics < 0.005


@pytest.mark.parametrize("name", ["quic", "bquic"])
def test_derived_states_equal_the_logged_ones(name: str) -> None:
    trace = qlog.load_trace(FIXTURES / name / "server.qlog.gz")
    logged = [(round(e["time"], 6), e["data"]["new"]) for e in trace.named("recovery:congestion_state_updated")]
    derived = [
        (round(when, 6), state)
        for when, state in qlog.derive_congestion_states(trace.named("recovery:metrics_updated"))
    ]
    assert derived == logged
    if name == "bquic":  # the run with losses went through recovery
        assert [state for _, state in logged] == [
            "slow_start",
            "congestion_avoidance",
            "recovery",
            "congestion_avoidance",
        ]


def test_full_aioquic_qlog_is_read() -> None:
    trace = qlog.load_trace(FIXTURES / "quic_full/server.qlog.gz")
    names = {event["name"] for event in trace.events}
    assert {
        "transport:packet_sent",
        "transport:datagrams_sent",
        "http:frame_created",
        "recovery:metrics_updated",
    } <= names
    states = qlog.congestion_states(trace)
    assert states["state"].tolist() == ["slow_start", "congestion_avoidance"]
    assert (states["source"] == "derived").all()


# --------------------------------------------------------------------------- hand-written


def _write(path: Path, events: list[dict[str, Any]], common: dict[str, Any] | None = None) -> Path:
    document = {
        "qlog_version": "0.3",
        "qlog_format": "JSON",
        "traces": [{"vantage_point": {"type": "server"}, "common_fields": common or {}, "events": events}],
    }
    path.write_text(json.dumps(document))
    return path


def _metric(time: float, cwnd: int, flight: int, **extra: float) -> dict[str, Any]:
    return {
        "time": time,
        "name": "recovery:metrics_updated",
        "data": {"cwnd": cwnd, "bytes_in_flight": flight, **extra},
    }


def test_phases_and_app_limited_of_a_small_trace(tmp_path: Path) -> None:
    # ms: 0 slow start (no ssthresh), window full; 100 loss -> cwnd halves: recovery;
    # 150 cwnd grows: congestion avoidance, window has room (app-limited); 300 nothing in
    # flight (end)
    events = [
        _metric(1000.0, 20000, 19500, smoothed_rtt=10.0, min_rtt=8.0),
        _metric(1100.0, 10000, 9500, ssthresh=10000),
        _metric(1150.0, 11000, 5000, ssthresh=10000),
        _metric(1200.0, 11000, 4000, ssthresh=10000),
        _metric(1300.0, 11000, 0, ssthresh=10000),
    ]
    trace = qlog.load_trace(_write(tmp_path / "t.qlog", events))
    assert qlog.transfer_window(qlog.metrics_frame(trace)) == pytest.approx((1.0, 1.2))
    states = qlog.congestion_states(trace)
    assert states["state"].tolist() == ["slow_start", "recovery", "congestion_avoidance"]
    summary = qlog.summarize_trace(trace)
    assert summary.phases == pytest.approx({"slow_start": 0.5, "recovery": 0.25, "congestion_avoidance": 0.25})
    # room >= 1200 B from 1150 ms on (11000 - 5000): 50 of 200 ms
    assert summary.app_limited == pytest.approx(0.25)
    # cwnd 20000 for 100 ms, 10000 for 50, 11000 for 50: mean 15250
    assert summary.cwnd_mean == pytest.approx(15250)
    assert summary.min_rtt == pytest.approx(0.008)
    assert summary.smoothed_rtt_mean == pytest.approx(0.010)


def test_relative_and_delta_times_and_json_seq(tmp_path: Path) -> None:
    relative = _write(
        tmp_path / "rel.qlog",
        [_metric(0.0, 1, 1), _metric(250.0, 2, 1)],
        {"reference_time": 1_700_000_000_000.0, "time_format": "relative"},
    )
    assert [e["time"] for e in qlog.load_trace(relative).events] == [1_700_000_000.0, 1_700_000_000.25]
    delta = _write(
        tmp_path / "delta.qlog",
        [_metric(10.0, 1, 1), _metric(5.0, 2, 1)],
        {"reference_time": 1000.0, "time_format": "delta"},
    )
    assert [e["time"] for e in qlog.load_trace(delta).events] == pytest.approx([1.01, 1.015])
    header = {
        "qlog_version": "0.4",
        "qlog_format": "JSON-SEQ",
        "trace": {"vantage_point": {"type": "client"}, "common_fields": {"reference_time": 2000.0}},
    }
    lines = [json.dumps(header)] + [json.dumps(_metric(t, 5, 1)) for t in (1.0, 3.0)]
    sequential = tmp_path / "x.sqlog"
    sequential.write_text("".join("\x1e" + line + "\n" for line in lines))
    trace = qlog.load_trace(sequential, "client")
    assert [e["time"] for e in trace.events] == pytest.approx([2.001, 2.003])
    with pytest.raises(ValueError, match="expected one trace of server"):
        qlog.load_trace(sequential, "server")


def test_quinn_qlog_units_and_names() -> None:
    """quicbed's native endpoint (quinn) logs RTTs in seconds and the window as
    congestion_window, and (its transfer never left slow start) no ssthresh: read in this
    module's units, phases not guessed.
    Expected values: zcat server.sqlog.gz | grep min_rtt (smallest 5.453e-05) and
    grep -o congestion_window (largest 278944)."""
    trace = qlog.load_trace(FIXTURES / "quinn" / "server.sqlog.gz")
    assert trace.producer == "quinn" and not trace.logs_ssthresh
    metrics = qlog.metrics_frame(trace)
    assert metrics["min_rtt"].min() == pytest.approx(5.453e-05)
    assert metrics["cwnd"].max() == 278944
    summary = qlog.summarize_trace(trace)
    assert summary.phases == {} and summary.states_source == "none"
    assert summary.cwnd_mean > 0


def test_a_quinn_file_in_milliseconds_reads_as_the_one_in_seconds(tmp_path: Path) -> None:
    """quinn's qlog now has RTTs in milliseconds, as qlog says (the rtt-ms patch); its description
    no longer says "RTTs in seconds". The fixture, rewritten so, reads to the same figures."""
    text = gzip.decompress((FIXTURES / "quinn" / "server.sqlog.gz").read_bytes()).decode()
    records = [json.loads(chunk) for line in text.split("\n") for chunk in line.split("\x1e") if chunk.strip()]
    for record in (records[0], records[0]["trace"]):
        record["description"] = record["description"].replace("RTTs in seconds, ", "")
    for event in records[1:]:
        if event.get("name") == "recovery:metrics_updated":
            event["data"] = {
                k: v * 1000 if k in ("min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance") else v
                for k, v in event["data"].items()
            }
    path = tmp_path / "server.sqlog"
    path.write_text("".join("\x1e" + json.dumps(record) + "\n" for record in records))
    old, new = (qlog.load_trace(p) for p in (FIXTURES / "quinn" / "server.sqlog.gz", path))
    assert old.rtt_in_seconds and not new.rtt_in_seconds and new.producer == "quinn"
    pd.testing.assert_frame_equal(qlog.metrics_frame(old), qlog.metrics_frame(new), rtol=1e-6)


# --------------------------------------------------------------------------- slow-start exit, spurious losses


def test_slow_start_exit_of_the_committed_runs() -> None:
    """Both aioquic runs left slow start on the delay rule, into congestion avoidance with the
    window kept: grep '"congestion_state_updated"' gives slow_start at 1795257021319.452 ms and
    congestion_avoidance at ...353.741 (bquic), the first metrics event at ...319.452."""
    trace = qlog.load_trace(FIXTURES / "bquic" / "server.qlog.gz")
    exit_ = qlog.slow_start_exit(trace)
    assert exit_.reason == "delay" and exit_.time == pytest.approx(0.034289, abs=2e-6)
    assert qlog.slow_start_exit(qlog.load_trace(FIXTURES / "quinn" / "server.sqlog.gz")).reason == "unknown"


def _lost(time: float, number: int) -> dict[str, Any]:
    return {"time": time, "name": "recovery:packet_lost", "data": {"type": "1RTT", "packet_number": number}}


def _acks(time: float, *ranges: tuple[int, int]) -> dict[str, Any]:
    return {
        "time": time,
        "name": "transport:packet_received",
        "data": {
            "header": {"packet_type": "1RTT", "packet_number": 0},
            "frames": [{"frame_type": "ack", "acked_ranges": [list(r) for r in ranges]}],
        },
    }


def test_a_loss_exit_and_a_spurious_loss(tmp_path: Path) -> None:
    # 9 and 12 declared lost at 1050 ms; 12 is acknowledged at 1060 ms: one spurious loss;
    # 9 was acknowledged only before it was declared (impossible in a real sender, but
    # an ACK before the declaration must not count)
    events = [
        _metric(1000.0, 20000, 19000),
        _acks(1040.0, (0, 9)),
        _lost(1050.0, 9),
        _lost(1050.0, 12),
        _metric(1050.0, 10000, 9000, ssthresh=10000),
        _acks(1060.0, (10, 14)),
    ]
    trace = qlog.load_trace(_write(tmp_path / "t.qlog", events))
    assert qlog.slow_start_exit(trace) == qlog.SlowStartExit(pytest.approx(0.05), "loss")
    assert qlog.declared_losses(trace) == qlog.DeclaredLosses(declared=2, spurious=1)
    no_acks = qlog.load_trace(_write(tmp_path / "n.qlog", [e for e in events if "ack" not in json.dumps(e)]))
    assert qlog.declared_losses(no_acks) is None  # cannot tell, so no number


def test_the_bquic_run_declared_its_five_losses_and_none_was_spurious() -> None:
    # grep -o '"recovery:packet_lost"' -> 5; the captures lose the same 5 (test_analysis_metrics)
    trace = qlog.load_trace(FIXTURES / "bquic" / "server.qlog.gz")
    assert qlog.declared_losses(trace) == qlog.DeclaredLosses(declared=5, spurious=0)


def test_a_quinn_trace_that_logs_ssthresh_only_when_it_changes(tmp_path: Path) -> None:
    """quinn logs the fields that changed; with quicbed's controllers ssthresh appears once
    slow start ends, and the states are derived from the forward-filled values."""
    header = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "description": "quicbed-quinn: RTTs in seconds",
        "trace": {"vantage_point": {"type": "unknown"}},
    }
    events = [
        {"time": 0.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000}},
        {"time": 10.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 24000}},
        {"time": 20.0, "name": "recovery:metrics_updated", "data": {"ssthresh": 24000}},
        {"time": 30.0, "name": "recovery:metrics_updated", "data": {"bytes_in_flight": 5000}},
        {"time": 40.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 25200}},
    ]
    path = tmp_path / "q.sqlog"
    path.write_text("".join("\x1e" + json.dumps(record) + "\n" for record in [header, *events]))
    trace = qlog.load_trace(path)
    assert trace.producer == "quinn" and trace.logs_ssthresh
    assert qlog.congestion_states(trace)["state"].tolist() == ["slow_start", "congestion_avoidance"]
    assert qlog.slow_start_exit(trace) == qlog.SlowStartExit(pytest.approx(0.02), "delay")
