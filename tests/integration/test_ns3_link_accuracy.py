"""The ns3 backend's cables, measured as the netem ones are (tests/integration/test_link_accuracy.py):
the calibrator rebuilds the ns-3 network for each case, since its cables are fixed when the
channel program starts. Same bounds: 99.9 % intervals for loss counts and loss-burst means,
delays never early. bench/backends.py prints both emulators side by side."""

from __future__ import annotations

import itertools

import pytest

from quicbed.analysis.linkstats import Z999, loss_count_interval, mean_burst_interval
from quicbed.backends.ns3 import build
from quicbed.calibration import LinkCalibrator, ProbePlan

NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]


@pytest.fixture(scope="module")
def calibrator():
    with LinkCalibrator(backend="ns3") as calibrator:
        yield calibrator


def test_delay_and_gilbert_elliott_loss_on_an_ns3_cable(calibrator):
    shape, stats = calibrator.probe({"delay": "20ms"}, ProbePlan(count=500, rate=200))
    assert shape.delay <= stats.owd_min and stats.owd_median <= shape.delay + 0.002
    assert stats.loss == 0
    plan = ProbePlan(count=4000, rate=1000)
    shape, stats = calibrator.probe({"loss": {"ge_mean": 10}}, plan)
    low, high = loss_count_interval(shape.loss, plan.count, z=Z999)
    assert low <= stats.lost <= high, f"{stats.lost} of {plan.count} outside [{low:.0f}, {high:.0f}]"
    low, high = mean_burst_interval(shape.loss, plan.count, z=Z999)
    assert low <= stats.mean_burst <= high
    assert calibrator.network.backend_name == "ns3"


def test_an_ns3_cable_keeps_its_rate(calibrator):
    shape, measured = calibrator.rate({"rate": "8mbit", "queue_limit": 200})
    assert abs(measured / shape.rate - 1) < 0.02, measured


def test_bit_errors_drop_the_corrupted_share_on_an_ns3_cable(calibrator):
    """netem's corrupt means: that share of packets fails its checksum and the receiver drops
    it. The ns3 cable drops the same share (a Bernoulli draw per packet)."""
    from quicbed.spec.loss import Bernoulli

    plan = ProbePlan(count=4000, rate=1000)
    _, stats = calibrator.probe({"corrupt": 5}, plan)
    low, high = loss_count_interval(Bernoulli(0.05), plan.count, z=Z999)
    assert low <= stats.lost <= high, f"{stats.lost} of {plan.count} outside [{low:.0f}, {high:.0f}]"


def _known_trace() -> list[int]:
    """0-3 opportunities per ms in a 6 ms pattern (14 Mbit/s), and a 200 ms outage each 1.5 s."""
    times = [ms for ms in range(1, 1501) if not 700 <= ms < 900 for _ in range((0, 1, 2, 1, 0, 3)[ms % 6])]
    return times if times[-1] == 1500 else times + [1500]


def test_a_trace_lets_packets_out_at_its_opportunities(calibrator, tmp_path):
    """A saturated probe (24 Mbit/s of full-size datagrams into a 1000-packet queue): every
    delivery leaves at the opportunity the trace gives it, one per opportunity (bench/links.py
    prints the same figures)."""
    from quicbed.analysis.linkstats import trace_timing
    from quicbed.traces.format import write_trace

    times = _known_trace()
    write_trace(tmp_path / "known.trace", times)
    shape, _ = calibrator.probe(
        {"trace": str(tmp_path / "known.trace"), "queue_limit": 1000, "delay": "5ms"},
        ProbePlan(count=3000, rate=2000, size=1472),
    )
    assert shape.trace is not None and shape.trace.opportunities == len(times)
    received = calibrator.last_log().received_ns
    settled = [ns for ns in received if ns - received[0] >= 200e6]  # the queue is full from here on
    timing = trace_timing(times, settled)
    within = sum(abs(error) <= 1.0 for error in timing.errors_ms) / timing.delivered
    assert timing.abs_percentile(0.5) < 0.2 and within >= 0.97, (timing.abs_percentile(0.5), within)
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(settled)]
    assert max(gaps) == pytest.approx(202, abs=1.5)  # the outage: from 699 ms (the last opportunity before) to 901
