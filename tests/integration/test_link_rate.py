"""Rate limits (tbf) need no netem: measured here on the host kernel."""

import pytest

from quicbed.calibration import LinkCalibrator

pytestmark = pytest.mark.needs_root


@pytest.mark.parametrize("rate", ["5mbit", "20mbit"])
def test_tbf_rate_limit_is_accurate(rate):
    with LinkCalibrator() as calibrator:
        shape, measured = calibrator.rate({"rate": rate, "queue_limit": 200})
    assert measured / shape.rate == pytest.approx(1.0, abs=0.03)
