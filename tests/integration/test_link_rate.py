"""Rate limits (tbf) need no netem: measured here on the host kernel.

A deep bucket does not depend on timers and shows that the configured rate itself is right.
The default bucket holds 1 ms of traffic (at least two frames): a timer that fires late on a
busy machine costs it capacity, by a few percent and sometimes far more (bench/links.py
prints the figure), so here it is only held to never exceeding the rate.
"""

import pytest

from quicbed.calibration import LinkCalibrator

pytestmark = pytest.mark.needs_root


@pytest.fixture(scope="module")
def calibrator():
    with LinkCalibrator() as calibrator:
        yield calibrator


@pytest.mark.parametrize("rate", ["5mbit", "20mbit"])
def test_tbf_with_a_deep_bucket_delivers_the_configured_rate(calibrator, rate):
    shape, measured = calibrator.rate({"rate": rate, "queue_limit": 200, "burst": 64_000})
    assert measured / shape.rate == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("rate", ["5mbit", "20mbit"])
def test_tbf_with_the_default_bucket_never_exceeds_the_rate(calibrator, rate):
    shape, measured = calibrator.rate({"rate": rate, "queue_limit": 200})
    assert 0.5 < measured / shape.rate < 1.02
