"""The sender's state over time from qlog, tcp_probe and ss fixtures (tests/fixtures/analysis),
and the median with its band over runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quicbed.analysis import qlog, series, tcpstate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
META = json.loads((FIXTURES / "meta.json").read_text())


def test_quinn_qlog_gives_every_column_and_the_pacers_rate():
    trace = qlog.load_trace(FIXTURES / "quinn" / "server.sqlog.gz")
    frame = series.from_qlog(trace)
    assert list(frame.columns) == list(series.COLUMNS) and len(frame) > 10
    assert frame["cwnd"].iloc[0] == 12000 and frame["smoothed_rtt"].iloc[0] == pytest.approx(0.333)
    # quinn's pacer: 1.25 windows per smoothed RTT
    expected = 1.25 * frame["cwnd"] * 8 / frame["smoothed_rtt"]
    assert np.allclose(frame["pacing_rate"], expected)
    assert frame["bytes_in_flight"].iloc[-1] > 0  # ends with the transfer, not the idle close


def test_a_profile_without_pacing_has_no_pacing_rate():
    trace = qlog.load_trace(FIXTURES / "bquic" / "server.qlog.gz", "server")
    paced, unpaced = series.from_qlog(trace), series.from_qlog(trace, pacing=False)
    assert unpaced["pacing_rate"].isna().all()
    assert np.allclose(paced["pacing_rate"], paced["cwnd"] * 8 / paced["smoothed_rtt"], equal_nan=True)  # aioquic: 1.0
    assert unpaced["min_rtt"].notna().any() and (unpaced["min_rtt"].dropna() <= unpaced["smoothed_rtt"].max()).all()


def test_tcp_probe_events_give_cwnd_in_flight_and_srtt_on_the_epoch_clock():
    probe, _ = tcpstate.read_trace(FIXTURES / "tcp_long" / "tcp_probe.txt.gz", META["tcp_long"]["mono_to_epoch"])
    sender = tcpstate.sender_probes(probe)
    frame = series.from_tcp_probe(sender, 1448)
    assert frame["time"].iloc[0] > 1.7e9
    assert np.array_equal(frame["cwnd"], sender["cwnd"].iloc[: len(frame)] * 1448)
    flight = (sender["snd_nxt"] - sender["snd_una"]).iloc[: len(frame)]
    assert np.array_equal(frame["bytes_in_flight"], flight) and (frame["bytes_in_flight"] >= 0).all()
    assert frame["min_rtt"].isna().all() and frame["pacing_rate"].isna().all()


def test_sequence_numbers_that_wrap_still_give_what_is_in_flight():
    probe = pd.DataFrame(
        {
            "time": [0.0, 0.1],
            "snd_nxt": [2**32 - 1000, 500],
            "snd_una": [2**32 - 3000, 2**32 - 1000],
            "cwnd": [10.0, 10.0],
            "srtt": [0.02, 0.02],
        }
    )
    assert list(series.from_tcp_probe(probe, 1000)["bytes_in_flight"]) == [2000, 1500]


def test_ss_samples_give_every_column():
    samples = tcpstate.connection(tcpstate.read_ss(FIXTURES / "tcp_long" / "ss.txt"))
    frame = series.from_ss(samples)
    head = samples.iloc[: len(frame)]
    assert np.allclose(frame["bytes_in_flight"], head["unacked"] * head["mss"])
    assert frame["pacing_rate"].notna().all() and frame["min_rtt"].notna().all()
    assert (frame["min_rtt"] <= frame["smoothed_rtt"] + 1e-9).all()


def test_median_band_holds_each_run_until_its_next_sample_and_ends_with_it():
    runs = [
        pd.DataFrame({"time": [0.0, 0.1], "cwnd": [10.0, 20.0]}),
        pd.DataFrame({"time": [0.0, 0.05, 0.2], "cwnd": [30.0, 40.0, 50.0]}),
        pd.DataFrame({"time": [0.0], "cwnd": [60.0]}),
    ]
    band = series.median_band(runs, "cwnd", step=0.05, band=(0.0, 1.0))
    assert list(band["time"]) == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    assert list(band["runs"]) == [3, 2, 2, 1, 1]
    assert list(band["median"]) == [30.0, 25.0, 30.0, 40.0, 50.0]
    assert list(band["low"]) == [10.0, 10.0, 20.0, 40.0, 50.0] and list(band["high"]) == [60.0, 40.0, 40.0, 40.0, 50.0]
    assert series.median_band([pd.DataFrame({"time": [0.0], "cwnd": [math.nan]})], "cwnd").empty


def test_a_quinn_qlog_that_names_its_start_is_on_the_epoch_clock(tmp_path):
    header = {
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "description": "quicbed-quinn: RTTs in seconds, changed fields only; start 1795641576.500000 s since the epoch",
        "trace": {"vantage_point": {"type": "unknown"}},
    }
    event = {
        "time": 250.0,
        "name": "recovery:metrics_updated",
        "data": {"congestion_window": 12000, "bytes_in_flight": 1200, "smoothed_rtt": 0.04, "min_rtt": 0.04},
    }
    path = tmp_path / "server.sqlog"
    path.write_text("\x1e" + json.dumps(header) + "\n\x1e" + json.dumps(event) + "\n")
    frame = series.from_qlog(qlog.load_trace(path))
    assert frame["time"].iloc[0] == pytest.approx(1795641576.75)
    assert frame["pacing_rate"].iloc[0] == pytest.approx(1.25 * 12000 * 8 / 0.04)
