"""MAC statistics of the ns-3 channel program summarised per run: airtime, aggregation, MAC
delay, queue disciplines and the run's validity (quicbed/backends/ns3/stats.py, pure, no root)."""

from __future__ import annotations

import pytest

from quicbed.analysis.mac import aggregated_mean, delay_summary, merge_histograms
from quicbed.backends.ns3.stats import summarize, time_behind_share, validity


def test_stats_summary_and_validity():
    histogram = {"1": 10, "10": 5, "20": 5}
    assert aggregated_mean(histogram) == 15
    assert merge_histograms({"2": 1}, {"10": 1, "2": 2}) == {"2": 3, "10": 1}
    radio = {
        "id": "ap1:wifi",
        "node": "ap1",
        "role": "ap",
        "mac": "00:00:00:00:00:01",
        "channel": 36,
        "tx_data": {
            "psdus": 20,
            "mpdus": 160,
            "bytes": 1,
            "retries": 3,
            "mean_mpdus_per_psdu": 8.0,
            "mpdus_per_psdu": histogram,
        },
        "airtime_s": {"data": 0.4, "control": 0.05, "management": 0.05, "total": 0.5},
        "airtime_share": 0.25,
        "drops": {"queue_full": 2, "retry_limit": 1, "lifetime": 0, "other": 0, "not_associated": 0, "frame_errors": 0},
        "per_receiver": {
            "sta1:wlan0": {
                "psdus": 20,
                "mpdus": 160,
                "retries": 3,
                "mean_mpdus_per_psdu": 8.0,
                "mpdus_per_psdu": histogram,
            }
        },
    }
    raw = {
        "final": True,
        "ready": True,
        "interval": {"sim_s": 2.0, "wall_s": 2.0, "cpu_s": 1.0, "cpu_share": 0.5},
        "lag": {"samples": 2000, "max_ms": 3.0, "mean_ms": 0.1},
        "radios": [radio],
        "wires": [],
        "taps": [],
        "mesh": [],
    }
    summary = summarize(raw, 0.01, {"ap1:wifi": "ap1", "sta1:wlan0": "sta1"})
    assert summary["valid"] and summary["invalid_reasons"] == []
    assert summary["nodes"]["ap1"]["airtime_share"] == 0.25 and summary["nodes"]["ap1"]["mean_mpdus_per_ampdu"] == 8
    assert summary["radios"]["ap1:wifi"]["per_receiver"]["sta1"]["mean_mpdus_per_ampdu"] == 8
    assert summary["radios"]["ap1:wifi"]["mac_drops"] == 1 and summary["radios"]["ap1:wifi"]["queue_drops"] == 2
    assert summary["channels"]["36"]["busy_share"] == 0.25
    # one spike of 25 ms in 2 s: 21 probes (1 ms apart) more than 4 ms late = 1.05 % of the run
    spike = {
        "samples": 2000,
        "max_ms": 25.0,
        "mean_ms": 0.2,
        "p99_ms": 16.4,
        "probe_interval_ms": 1.0,
        "over_1ms": 24,
        "over_4ms": 21,
        "over_16ms": 9,
    }
    valid, reasons, _ = validity({**raw, "lag": spike}, 0.01)
    assert not valid and "for 1.1% of the run (limit 1.0%" in reasons[0] and "largest lag 25.0 ms" in reasons[0]
    assert validity({**raw, "lag": spike}, 0.02)[:2] == (True, [])
    # the old rule's false alarm: a single 10 ms late wake-up in an otherwise punctual run
    single = {**spike, "max_ms": 10.2, "over_4ms": 6, "over_16ms": 0}
    assert validity({**raw, "lag": single})[:2] == (True, [])
    assert summarize({**raw, "lag": spike})["behind_share"] == pytest.approx(0.0105)


def test_mac_delay_per_radio_receiver_and_node():
    """The channel counts data MPDUs in 100 us buckets of their time from the radio queue to
    the receiver's MAC ACK; a frame counts at its bucket's middle."""
    assert delay_summary({}) == {"frames": 0, "mean_s": None, "median_s": None, "p95_s": None}
    # 10 frames at 0.25 ms (bucket 2), 9 at 5.05 ms (bucket 50), 1 at 20.05 ms (bucket 200)
    delays = {"2": 10, "50": 9, "200": 1}
    summary = delay_summary(delays)
    assert summary["frames"] == 20 and summary["median_s"] == pytest.approx(0.25e-3)
    assert summary["p95_s"] == pytest.approx(5.05e-3)  # the 19th frame of 20
    assert summary["mean_s"] == pytest.approx((10 * 0.25 + 9 * 5.05 + 20.05) / 20 * 1e-3)
    tx = {"psdus": 2, "mpdus": 20, "bytes": 1, "retries": 0, "mean_mpdus_per_psdu": 10.0, "mpdus_per_psdu": {"10": 2}}
    radio = {
        "id": "ap1:wifi",
        "node": "ap1",
        "role": "ap",
        "mac": "00:00:00:00:00:01",
        "channel": 36,
        "tx_data": {**tx, "mac_delay_100us": delays},
        "airtime_s": {"data": 0.4, "control": 0.05, "management": 0.05, "total": 0.5},
        "airtime_share": 0.25,
        "drops": {"queue_full": 0, "retry_limit": 0, "lifetime": 0, "other": 0, "not_associated": 0, "frame_errors": 0},
        "per_receiver": {
            "sta1:wlan0": {**tx, "mac_delay_100us": {"2": 10}},
            "sta2:wlan0": {**tx, "mac_delay_100us": {"50": 9, "200": 1}},
        },
    }
    raw = {"interval": {"sim_s": 2.0}, "lag": {}, "radios": [radio]}
    stats = summarize(raw, 0.01, {"ap1:wifi": "ap1", "sta1:wlan0": "sta1", "sta2:wlan0": "sta2"})
    assert stats["radios"]["ap1:wifi"]["mac_delay"] == summary == stats["nodes"]["ap1"]["mac_delay"]
    assert stats["radios"]["ap1:wifi"]["per_receiver"]["sta1"]["mac_delay"]["median_s"] == pytest.approx(0.25e-3)
    assert stats["radios"]["ap1:wifi"]["per_receiver"]["sta2"]["mac_delay"]["frames"] == 10
    # a channel from before the measurement: no frames, no figure
    old = {**radio, "tx_data": tx, "per_receiver": {}}
    assert summarize({**raw, "radios": [old]})["nodes"]["ap1"]["mac_delay"]["frames"] == 0


def test_time_behind_share_reads_the_probe_counters():
    lag = {"probe_interval_ms": 0.5, "over_1ms": 400, "over_4ms": 100, "over_16ms": 10}
    assert time_behind_share(lag, 10.0) == pytest.approx(0.005)
    assert time_behind_share(lag, 10.0, behind_ms=16.0) == pytest.approx(0.0005)
    assert time_behind_share(lag, 0.0) == 0.0
    with pytest.raises(ValueError, match="no lag counter for 3"):
        time_behind_share(lag, 10.0, behind_ms=3.0)


def test_queue_discipline_statistics_per_radio_and_node():
    """The channel's "queue_disc" (aqm.cc): its sojourn histogram summarised like the MAC delay,
    drops at both ends of the discipline added up; the run metrics of the AP carrying a download."""
    tx = {"psdus": 1, "mpdus": 10, "bytes": 1, "retries": 0, "mean_mpdus_per_psdu": 10.0, "mpdus_per_psdu": {"10": 1}}
    discipline = {
        "kind": "codel",
        "limit_packets": 1000,
        "enqueued": 20,
        "marks": 0,
        "backlog_packets": 0,
        "drops": {
            "at_enqueue": 1,
            "at_dequeue": 3,
            "reasons": {"Dropped after dequeue": 3, "Queue disc limit exceeded": 1},
        },
        "sojourn_100us": {"10": 15, "300": 5},
    }
    radio = {
        "id": "ap1:wifi",
        "node": "ap1",
        "role": "ap",
        "mac": "00:00:00:00:00:01",
        "channel": 36,
        "tx_data": {**tx, "mac_delay_100us": {"200": 20}},
        "airtime_s": {"data": 0.1, "control": 0, "management": 0, "total": 0.1},
        "airtime_share": 0.05,
        "drops": {"queue_full": 0, "retry_limit": 0, "lifetime": 0, "other": 0, "not_associated": 0, "frame_errors": 0},
        "queue_disc": discipline,
        "per_receiver": {},
    }
    stats = summarize({"interval": {"sim_s": 2.0}, "lag": {}, "radios": [radio]}, 0.01, {"ap1:wifi": "ap1"})
    entry = stats["radios"]["ap1:wifi"]["queue_disc"]
    assert entry["kind"] == "codel" and entry["drops"] == 4 and entry["enqueued"] == 20
    assert entry["sojourn"]["median_s"] == pytest.approx(1.05e-3) and entry["sojourn"]["p95_s"] == pytest.approx(
        30.05e-3
    )
    node = stats["nodes"]["ap1"]
    assert node["discipline_drops"] == 4 and node["queue_disc_sojourn"] == entry["sojourn"]
    # a mac80211 queue's stations: each receiver's own queue beside its transmissions
    station_queue = {
        **{k: discipline[k] for k in ("enqueued", "drops", "backlog_packets", "sojourn_100us")},
        "marks": 0,
        "airtime_s": 0.08,
        "turns": 312,
    }
    fair = summarize(
        {
            "interval": {"sim_s": 2.0},
            "lag": {},
            "radios": [
                {
                    **radio,
                    "per_receiver": {
                        "sta1:wifi": {**tx, "airtime_s": 0.09, "mac_delay_100us": {"200": 20}, "queue": station_queue}
                    },
                }
            ],
        },
        0.01,
        {"ap1:wifi": "ap1", "sta1:wifi": "sta1"},
    )
    receiver = fair["radios"]["ap1:wifi"]["per_receiver"]["sta1"]
    assert (
        receiver["airtime_s"] == 0.09 and receiver["queue"]["airtime_s"] == 0.08 and receiver["queue"]["turns"] == 312
    )
    assert receiver["queue"]["drops"] == 4 and receiver["queue"]["sojourn"] == entry["sojourn"]
    plain = summarize({"interval": {"sim_s": 2.0}, "lag": {}, "radios": [{**radio, "queue_disc": None}]})
    assert (
        "queue_disc" not in plain["radios"]["ap1:wifi"] and plain["nodes"]["ap1"]["queue_disc_sojourn"]["frames"] == 0
    )


def test_a_fastack_that_gave_up_on_a_flow_makes_the_run_invalid():
    """After its resends ran out the AP forgets data it had acknowledged: the sender freed it, so
    only a copy still queued can bring it to the station, and the run must not count."""
    raw = {
        "final": True,
        "ready": True,
        "interval": {"sim_s": 2.0, "wall_s": 2.0, "cpu_s": 1.0, "cpu_share": 0.5},
        "lag": {"samples": 2000, "max_ms": 0.5, "mean_ms": 0.1},
        "radios": [],
        "wires": [],
        "taps": [],
        "mesh": [],
        "bridges": [{"node": "ap1", "fastack": {"flows_abandoned": 0, "flows_ended": 1}}],
    }
    assert summarize(raw)["valid"]
    raw["bridges"][0]["fastack"]["flows_abandoned"] = 1
    summary = summarize(raw)
    assert not summary["valid"]
    assert summary["invalid_reasons"] == [
        "access point ap1's FastACK gave up on 1 flow(s): data it had acknowledged "
        "for the station may never have reached it, and the flow ran on "
        "unaccelerated (docs/ns3-backend.md, 'ACK acceleration')"
    ]
