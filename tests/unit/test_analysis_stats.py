"""Statistics against scipy and against hand computations on fixed data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from quicbed.analysis import metrics, stats
from quicbed.analysis.packets import read_pcap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
DATA = np.array([9.1, 8.7, 9.9, 10.4, 8.2, 9.5, 9.0, 10.1])


def test_mean_ci_is_scipys_student_t_interval() -> None:
    result = stats.mean_ci(DATA)
    low, high = sps.t.interval(0.95, len(DATA) - 1, loc=DATA.mean(), scale=sps.sem(DATA))
    assert (result.low, result.high) == pytest.approx((low, high), rel=1e-12)
    assert result.mean == pytest.approx(74.9 / 8)
    assert result.median == pytest.approx(9.3) and result.n == 8
    assert result.std == pytest.approx(DATA.std(ddof=1))
    # by hand: t_{0.975, 7} = 2.364624, s = 0.7347..., half width = t s / sqrt(8)
    assert result.half_width == pytest.approx(2.364624 * DATA.std(ddof=1) / math.sqrt(8), rel=1e-6)
    ninety = stats.mean_ci(DATA, 0.90)
    assert ninety.half_width < result.half_width


def test_mean_ci_edge_cases() -> None:
    assert stats.mean_ci([]).n == 0 and math.isnan(stats.mean_ci([]).mean)
    one = stats.mean_ci([3.0])
    assert one.mean == 3.0 and math.isnan(one.low)
    assert stats.mean_ci([1.0, np.nan, 3.0]).n == 2  # NaNs (failed runs) dropped


def test_summarize_groups() -> None:
    frame = pd.DataFrame(
        {
            "proto": ["quic"] * 4 + ["bquic"] * 4,
            "hops": [1, 1, 2, 2] * 2,
            "mbps": [8.0, 10.0, 6.0, 6.0, 9.0, 11.0, 7.0, 9.0],
        }
    )
    table = stats.summarize(frame, ["proto", "hops"], "mbps")
    assert table[["proto", "hops"]].values.tolist() == [["bquic", 1], ["bquic", 2], ["quic", 1], ["quic", 2]]
    assert table["mean"].tolist() == [10.0, 8.0, 9.0, 6.0]
    # two values 8 and 10: s = sqrt(2), t_{0.975,1} = 12.7062: 9 ± 12.7062 * sqrt(2)/sqrt(2)
    quic1 = table.iloc[2]
    assert (quic1["ci_low"], quic1["ci_high"]) == pytest.approx((9 - 12.706205, 9 + 12.706205), rel=1e-6)
    assert table.iloc[3]["ci_low"] == table.iloc[3]["ci_high"] == 6.0  # no variance


def test_relative_gain_delta_method_by_hand() -> None:
    """The interval is the delta-method interval of log(mB / mA), mapped back: for these
    values [-5.14 %, +87.4 %] (the interval of the ratio itself was [-12.1 %, +78.7 %])."""
    a, b = [10.0, 12.0, 14.0], [15.0, 15.0, 18.0]
    gain = stats.relative_gain(a, b)
    # mA = 12, sA^2 = 4; mB = 16, sB^2 = 3; g = 16/12 - 1 = 1/3
    va, vb = 4 / (3 * 144), 3 / (3 * 256)  # squared relative standard errors = variances of log(mean)
    se = math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    t = sps.t.ppf(0.975, dof)
    assert gain.gain == pytest.approx(1 / 3)
    assert (gain.low, gain.high) == pytest.approx(
        (math.expm1(math.log(4 / 3) - t * se), math.expm1(math.log(4 / 3) + t * se))
    )
    assert (gain.low, gain.high) == pytest.approx((-0.05141, 0.87412), abs=1e-5)
    assert dof == pytest.approx(3.4326, abs=1e-3) and gain.method.startswith("delta")


def test_a_relative_gain_interval_never_goes_below_minus_100_percent() -> None:
    """A precise baseline and a small, noisy transport: the interval of the ratio went down to
    -152 %, which no ratio of two positive means can reach; the one of its log does not."""
    a, b = [10.0, 10.5, 9.5], [0.1, 5.0, 0.2]
    gain = stats.relative_gain(a, b)
    assert gain.gain == pytest.approx(5.3 / 3 / 10 - 1)
    assert -1 < gain.low == pytest.approx(-0.99654, abs=1e-5)
    assert gain.high == pytest.approx(8.0155, abs=1e-3)
    assert gain.low < gain.gain < gain.high


def test_relative_gain_intervals_are_reciprocal_when_the_baseline_changes() -> None:
    """On the log scale, B over A and A over B are the same interval with the sign changed:
    (1 + low(B/A)) * (1 + high(A/B)) = 1."""
    a, b = [9.0, 10.0, 11.5, 10.2], [12.0, 13.5, 11.0]
    forward, backward = stats.relative_gain(a, b), stats.relative_gain(b, a)
    assert (1 + forward.low) * (1 + backward.high) == pytest.approx(1)
    assert (1 + forward.high) * (1 + backward.low) == pytest.approx(1)


def test_an_uncertain_baseline_gives_the_absolute_difference() -> None:
    """A baseline whose 95 % CI includes 0 (1, 9, 20: [-14.2, 34.2]) is not divided by: the
    comparison is B - A with Welch's interval, the one scipy's Welch t-test gives."""
    a, b = [1.0, 9.0, 20.0], [30.0, 31.0, 29.0]
    assert "includes 0" in (stats.baseline_problem(a) or "")
    with pytest.raises(ValueError, match="no relative gain: the baseline"):
        stats.relative_gain(a, b)
    comparison = stats.compare_means(a, b)
    assert comparison.gain is None and "includes 0" in comparison.why_absolute
    welch = sps.ttest_ind(b, a, equal_var=False).confidence_interval()
    difference = comparison.difference
    assert difference.difference == pytest.approx(20.0)
    assert (difference.low, difference.high) == pytest.approx((welch.low, welch.high))
    assert (difference.low, difference.high) == pytest.approx((-3.3427, 43.3427), abs=1e-4)


def test_a_baseline_above_the_relative_error_bound_gives_the_absolute_difference() -> None:
    """Mean 10, relative standard error 22.4 %: its CI [4.9, 15.1] excludes 0, but the ratio
    would still be biased by about RSE^2 (5 %) and its interval unreliable: absolute."""
    a = [2.0, 19.0, 3.0, 18.0, 10.0, 1.0, 20.0, 9.0, 11.0, 7.0]
    b = [12.0, 13.0, 11.0, 12.5]
    assert stats.relative_standard_error(a) == pytest.approx(math.sqrt(0.05))
    assert stats.mean_ci(a).low > 0
    assert "relative standard error 22 %" in (stats.baseline_problem(a) or "")
    comparison = stats.compare_means(a, b)
    assert comparison.gain is None and comparison.difference.difference == pytest.approx(2.125)
    # a precise baseline keeps the relative gain; the difference is there as well
    precise = stats.compare_means([10.0, 11.0, 9.0, 10.0], b)
    assert precise.gain is not None and precise.why_absolute == ""
    assert precise.gain.gain == pytest.approx(12.125 / 10 - 1)
    assert precise.difference.difference == pytest.approx(2.125)
    assert stats.baseline_problem([10.0, 11.0, 9.0, 10.0]) is None


def test_a_zero_or_negative_mean_is_never_divided_by() -> None:
    assert "mean is 0" in (stats.baseline_problem([0.0, 0.0, 0.0]) or "")
    assert stats.compare_means([0.0, 0.0, 0.0], [0.01, 0.02]).gain is None
    # a transport whose mean is 0 has no log-ratio: the difference, saying why
    nothing = stats.compare_means([0.02, 0.021, 0.019], [0.0, 0.0])
    assert nothing.gain is None and "the compared transport's mean is 0" in nothing.why_absolute
    assert (nothing.difference.low, nothing.difference.high) == pytest.approx(
        (-0.02 - 0.0024841, -0.02 + 0.0024841), abs=1e-6
    )


def test_relative_gain_methods_agree_and_cover() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(100, 10, 60), rng.normal(110, 12, 60)
    delta = stats.relative_gain(a, b)
    boot = stats.relative_gain(a, b, method="bootstrap", resamples=4000)
    assert boot.gain == delta.gain
    assert boot.low == pytest.approx(delta.low, abs=0.01)
    assert boot.high == pytest.approx(delta.high, abs=0.01)
    # coverage of the delta interval for a true gain of 0.1 (300 simulated studies)
    hits = 0
    for _ in range(300):
        x, y = rng.normal(100, 10, 30), rng.normal(110, 12, 30)
        result = stats.relative_gain(x, y)
        hits += result.low <= 0.1 <= result.high
    assert 0.91 <= hits / 300 <= 0.99
    with pytest.raises(ValueError):
        stats.relative_gain([1.0], [2.0, 3.0])
    with pytest.raises(ValueError):
        stats.relative_gain(a, b, method="magic")  # type: ignore[arg-type]


def test_ecdf_is_scipys_and_the_dkw_band_is_massarts() -> None:
    values = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 4.0, 2.0, 1.5, 6.0, 3.5])
    table = stats.ecdf(values)
    if hasattr(sps, "ecdf"):  # scipy >= 1.11
        evaluate = sps.ecdf(values).cdf.evaluate
    else:  # share of values <= x, counted

        def evaluate(x: np.ndarray) -> np.ndarray:
            return np.array([np.mean(values <= point) for point in x])

    assert table["x"].tolist() == sorted(set(values.tolist()))
    assert table["F"].to_numpy() == pytest.approx(evaluate(table["x"].to_numpy()))
    assert table["F"].iloc[-1] == 1.0 and table["F"].iloc[1] == pytest.approx(0.2)  # <= 1.5
    epsilon = math.sqrt(math.log(2 / 0.05) / (2 * 10))  # 0.42946
    assert stats.dkw_epsilon(10) == pytest.approx(epsilon) == pytest.approx(0.4294694, rel=1e-6)
    assert table["low"].to_numpy() == pytest.approx(np.clip(table["F"] - epsilon, 0, 1))
    assert table["high"].to_numpy() == pytest.approx(np.clip(table["F"] + epsilon, 0, 1))
    complementary = stats.ccdf(values)
    assert complementary["P"].to_numpy() == pytest.approx(1 - evaluate(table["x"].to_numpy()))
    assert (complementary["low"] <= complementary["P"]).all()
    assert (complementary["P"] <= complementary["high"]).all()


def test_dkw_band_covers_the_true_cdf() -> None:
    rng = np.random.default_rng(3)
    grid = np.linspace(0, 1, 201)
    misses = 0
    for _ in range(400):
        sample = rng.uniform(size=50)
        table = stats.ecdf(sample)
        position = np.searchsorted(table["x"], grid, side="right") - 1
        low = np.where(position >= 0, table["low"].to_numpy()[position.clip(0)], 0)
        high = np.where(position >= 0, table["high"].to_numpy()[position.clip(0)], stats.dkw_epsilon(50))
        misses += bool(np.any((grid < low) | (grid > high)))  # true CDF of U(0,1) is x
    assert misses / 400 <= 0.05 + 0.02  # simultaneous 95 % band (conservative)


def test_jain_index() -> None:
    assert stats.jain_index([5, 5, 5, 5]) == pytest.approx(1.0)  # equal shares
    assert stats.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)  # one of four gets all
    assert stats.jain_index([1, 2, 3]) == pytest.approx(36 / 42)  # (1+2+3)^2 / (3 * 14)
    assert math.isnan(stats.jain_index([0, 0])) and math.isnan(stats.jain_index([]))


def test_binned_bytes_shares_and_jain_over_time() -> None:
    events = pd.DataFrame(
        {
            "time": [10.00, 10.01, 10.02, 10.06, 10.07, 10.16],
            "flow": ["a", "b", "b", "a", "a", "b"],
            "bytes": [100, 100, 100, 300, 100, 50],
        }
    )
    binned = stats.binned_bytes(events, 0.05)
    # bins from 10.00: [0, 50) ms: a 100, b 200; [50, 100): a 400; [100, 150): none;
    # [150, 200): b 50
    assert binned["time"].tolist() == pytest.approx([0, 0, 0.05, 0.05, 0.10, 0.10, 0.15, 0.15])
    assert binned["flow"].tolist() == ["a", "b"] * 4
    assert binned["bytes"].tolist() == [100, 200, 400, 0, 0, 0, 0, 50]
    assert binned["throughput"].iloc[0] == pytest.approx(100 * 8 / 0.05)
    shares = stats.bandwidth_share(binned)
    assert shares["share"].iloc[:4].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0, 0.0])
    assert shares["share"].iloc[4:6].isna().all()
    jain = stats.jain_over_time(binned)
    assert jain["time"].tolist() == [0.0]  # the only bin where both sent
    assert jain["jain"].iloc[0] == pytest.approx(300**2 / (2 * (100**2 + 200**2)))
    assert len(stats.jain_over_time(binned, active_only=False).dropna()) == 3


def test_shares_of_the_parallel_fixture() -> None:
    # tcpdump -ttnr parallel/client.pcap '<QUIC data> or <TCP data>' | awk: bytes per 50 ms
    # bin from the first data packet and per server port. Bin 5: 4433 (QUIC) 33282 B,
    # 8080 (TCP) 26064 B; bin 0: QUIC only, 59449 B; bin 10: TCP only, 60816 B.
    packets = read_pcap(FIXTURES / "parallel/client.pcap")
    flows = metrics.data_flows(packets)
    events = pd.DataFrame(
        [(p.ts, p.sport, p.payload_len) for p in packets if p.flow in flows and metrics.is_data(p)],
        columns=["time", "flow", "bytes"],
    )
    binned = stats.binned_bytes(events, 0.05)
    by_bin = binned.set_index(["time", "flow"])["bytes"]
    assert by_bin[(0.25, 4433)] == 33282 and by_bin[(0.25, 8080)] == 26064
    assert by_bin[(0.0, 4433)] == 59449 and by_bin[(0.0, 8080)] == 0
    assert by_bin[(0.5, 8080)] == 60816
    shares = stats.bandwidth_share(binned).set_index(["time", "flow"])["share"]
    assert shares[(0.25, 4433)] == pytest.approx(33282 / (33282 + 26064))
    jain = stats.jain_over_time(binned).set_index("time")["jain"]
    assert jain[0.25] == pytest.approx(59346**2 / (2 * (33282**2 + 26064**2)))
    assert set(jain.index) == {0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45}  # both active


def test_time_weighted_series() -> None:
    times, values = [0.0, 1.0, 3.0], [10.0, 20.0, 40.0]
    # 10 for 1 s, 20 for 2 s, 40 for 1 s (until end = 4)
    mean, var = stats.time_weighted_mean_var(times, values, end=4.0)
    assert mean == pytest.approx((10 + 40 + 40) / 4)
    assert var == pytest.approx((1 * 12.5**2 + 2 * 2.5**2 + 1 * 17.5**2) / 4)
    # clipped to [0.5, 2]: 10 for 0.5 s, 20 for 1 s
    assert stats.time_weighted_mean_var(times, values, 0.5, 2.0)[0] == pytest.approx(50 / 3)
    shares = stats.state_shares(times, ["a", "b", "a"], end=4.0)
    assert shares == pytest.approx({"a": 0.5, "b": 0.5})
    assert stats.step_durations([0.0, 1.0, 3.0]).tolist() == [1.0, 2.0, 0.0]


# --------------------------------------------------------------------------- intervals of bounded metrics


LOSS = [0.0, 0.0, 0.02, 0.05]


def test_loss_interval_is_the_t_interval_cut_at_zero() -> None:
    from quicbed.analysis.catalogue import metric

    bounds = metric("loss").bounds
    assert bounds == (0.0, 1.0)
    plain = stats.mean_ci(LOSS)
    assert plain.low < 0  # what the Student-t interval alone gives
    result = stats.metric_mean_ci(LOSS, bounds)
    assert result.method == "t-truncated" and result.mean == pytest.approx(0.0175)
    assert (result.low, result.high) == (0.0, pytest.approx(plain.high))
    assert result.std == pytest.approx(np.std(LOSS, ddof=1)) and result.median == pytest.approx(0.01)


def test_both_ends_are_cut_and_an_interval_inside_the_range_is_untouched() -> None:
    share = stats.metric_mean_ci([0.0, 0.9, 1.0], (0.0, 1.0))  # t: [-0.73, 2.0]
    assert (share.low, share.high, share.method) == (0.0, 1.0, "t-truncated")
    rates = stats.metric_mean_ci(DATA, (0.0, None))  # far from zero: plain t
    assert rates == stats.mean_ci(DATA) and rates.method == "t"
    assert stats.metric_mean_ci([1.0, 1.0, 1.0], (0.0, 1.0)) == stats.mean_ci([1.0, 1.0, 1.0])


def test_unbounded_metrics_keep_the_student_t_interval() -> None:
    from quicbed.analysis.catalogue import metric

    assert metric("not_in_the_catalogue").bounds is None
    result = stats.metric_mean_ci([-5.0, 1.0, 2.0], None)
    assert result == stats.mean_ci([-5.0, 1.0, 2.0]) and result.low < -5
    table = stats.summarize(pd.DataFrame({"g": ["a"] * len(DATA), "v": DATA}), "g", "v")
    assert table["ci_method"].tolist() == ["t"]
    bounded = stats.summarize(pd.DataFrame({"g": ["a"] * 4, "v": LOSS}), "g", "v", bounds=(0.0, 1.0))
    assert bounded["ci_method"].tolist() == ["t-truncated"] and bounded["ci_low"].iloc[0] == 0


def test_intervals_without_enough_runs() -> None:
    one = stats.metric_mean_ci([0.3], (0.0, 1.0))
    assert one.n == 1 and one.mean == 0.3 and math.isnan(one.low) and math.isnan(one.high)
    assert stats.metric_mean_ci([], (0.0, 1.0)).n == 0
    assert stats.metric_mean_ci([0.1, np.nan, 0.3], (0.0, 1.0)).n == 2  # NaNs dropped


def test_catalogue_declares_the_range_of_every_metric() -> None:
    from quicbed.analysis.catalogue import METRICS

    fractions = {
        "loss",
        "out_of_order",
        "ipt_server_short_share",
        "ipt_client_short_share",
        "jain_index",
        "airtime_share",
        "phase_slow_start",
        "phase_congestion_avoidance",
        "phase_recovery",
        "lag_behind_share",
        "lag_slow_share",
        "cpu_server_bound",
        "cpu_client_bound",
        "cpu_competitor_bound",
        "cpu_channel_bound",
        "cpu_machine_busy",
        "cpu_machine_steal",
        "cwnd_above_bdp",
        "slow_start_exit_delay",
        "spurious_loss_share",
        "competitor_ipt_server_short_share",
        "goodput_share",
        "client_throttled",
        "client_device_busy",
        "ofdma_ppdu_share",
        "ofdma_uplink_share",
    }
    for name, entry in METRICS.items():
        assert entry.bounds == ((0.0, 1.0) if name in fractions else (0.0, None)), name
        if entry.unit == "%":  # every share shown in percent is a fraction
            assert name in fractions, name
    assert METRICS["ack_ratio"].bounds == (0.0, None)  # can exceed 1
