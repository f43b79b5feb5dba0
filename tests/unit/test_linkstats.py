"""Link statistics on a hand-made probe log (expected values worked out by hand)."""

import pytest

from quicbed.analysis.linkstats import (
    ProbeLog,
    expected_iqr,
    link_stats,
    loss_count_interval,
    mean_burst_interval,
    trace_timing,
)
from quicbed.spec.loss import Bernoulli, GilbertElliott

MS = 1_000_000


def test_loss_runs_delay_and_reordering_of_a_small_log(tmp_path):
    # 10 sent; 2, 3, 4 and 8 lost (runs of 3 and 1); 6 arrives before 5; 9 arrives twice.
    rows = [(0, 0, 10), (1, 1, 11), (6, 6, 17), (5, 5, 18), (7, 7, 17), (9, 9, 21), (9, 9, 22)]
    path = tmp_path / "probe.csv"
    path.write_text(
        "sequence,sent_ns,received_ns,bytes\n" + "".join(f"{s},{t * MS},{r * MS},158\n" for s, t, r in rows)
    )
    stats = link_stats(ProbeLog.read(path), sent=10)
    assert (stats.received, stats.lost, stats.duplicates) == (6, 4, 1)
    assert stats.loss == pytest.approx(0.4)
    assert stats.loss_runs == 2 and stats.mean_burst == pytest.approx(2.0)
    # delays (ms): 10, 10, 11, 13, 10, 12, 13 -> mean 11.2857, median 11, min 10
    assert stats.owd_mean == pytest.approx(79 / 7 / 1000)
    assert stats.owd_median == pytest.approx(0.011)
    assert stats.owd_min == pytest.approx(0.010)
    assert stats.reordered == pytest.approx(1 / 6)
    # 6 datagrams after the first, 200 bytes on the wire each, over 12 ms
    assert stats.rate == pytest.approx(6 * 200 * 8 / 0.012)


def test_binomial_interval_and_the_wider_gilbert_elliott_interval():
    low, high = loss_count_interval(Bernoulli(0.05), 5000)
    assert (low, high) == (211.0, 291.0)  # 250 ± 2.576 * 15.4, on whole packets
    ge_low, ge_high = loss_count_interval(GilbertElliott.from_mean_loss(0.05), 5000)
    assert ge_low < low and ge_high > high  # correlated losses vary more
    assert (ge_low + ge_high) / 2 == pytest.approx(250)


def test_mean_burst_interval_from_the_models_sampling_distribution():
    # Bernoulli: runs are geometric, mean 1/(1-p); ~190 runs in 4000 packets at 5 %
    low, high = mean_burst_interval(Bernoulli(0.05), 4000, z=3.29)
    assert low < 1 / 0.95 < high and high - low < 0.15
    assert mean_burst_interval(Bernoulli(0.05), 4000, z=3.29) == (low, high)  # seeded
    # E4's chain: the interval holds the analytical mean and is wider than the runs' own
    # standard error gives (correlated runs within a Bad sojourn)
    ge = GilbertElliott.from_mean_loss(0.05)
    ge_low, ge_high = mean_burst_interval(ge, 15000, z=3.29, replicas=1000)
    assert ge_low < ge.mean_burst_length < ge_high
    # a real 15000-packet probe of this chain: 3.29 x the runs' standard error was +-0.033
    assert (ge_high - ge_low) / 2 > 0.045


def test_expected_iqr():
    assert expected_iqr(0.002, "uniform") == pytest.approx(0.002)
    assert expected_iqr(0.002, "normal") == pytest.approx(0.0026979, rel=1e-4)


def test_trace_timing_finds_the_opportunity_each_delivery_left_at():
    times = [1, 1, 2, 5, 9, 9, 9, 12, 20]  # period 20 ms
    # a saturated link from opportunity 3 (5 ms) on, over two periods: 14 deliveries, 30 ms later,
    # each within +-0.3 ms of its opportunity
    opportunities = [(k // 9) * 20 + times[k % 9] for k in range(3, 17)]
    received_ns = [int((30 + ms + (0.3 if i % 2 else -0.3)) * 1e6) for i, ms in enumerate(opportunities)]
    timing = trace_timing(times, received_ns)
    assert timing.delivered == 14 and timing.first_opportunity == 3
    assert timing.abs_percentile(1.0) == pytest.approx(0.3, abs=1e-6)
    # on time but for one delivery 2 ms late, which stands out
    exact = [int((30 + ms) * 1e6) for ms in opportunities]
    exact[6] += 2_000_000
    errors = trace_timing(times, exact).errors_ms
    assert errors[6] == pytest.approx(2.0) and max(abs(e) for i, e in enumerate(errors) if i != 6) < 1e-9
