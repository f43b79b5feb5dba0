"""The ns3 backend's cables, measured as the netem ones are (tests/integration/test_link_accuracy.py):
the calibrator rebuilds the ns-3 network for each case, since its cables are fixed when the
channel program starts. Same bounds: 99.9 % intervals for loss counts and loss-burst means,
delays never early. bench/backends.py prints both emulators side by side."""

from __future__ import annotations

import os

import pytest

from quicbed.analysis.linkstats import Z999, loss_count_interval, mean_burst_interval
from quicbed.backends.ns3 import build
from quicbed.calibration import LinkCalibrator, ProbePlan

NS3_MISSING = build.missing()
pytestmark = [pytest.mark.needs_root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and TAP devices"),
              pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")]


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

