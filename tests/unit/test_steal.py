"""The hypervisor's share of the CPU time and waiting for a quiet machine (quicbed/host/steal.py)."""

from __future__ import annotations

import pytest

from quicbed.host import steal
from quicbed.host.procfs import MachineTicks


def test_steal_is_the_hypervisors_share_of_the_cpu_time_between_two_readings():
    assert steal.steal_share(MachineTicks(100, 100, 0), MachineTicks(180, 110, 10)) == pytest.approx(0.1)
    assert steal.steal_share(MachineTicks(1, 1, 1), MachineTicks(1, 1, 1)) == 0.0


def test_waiting_for_a_quiet_machine_ends_when_steal_falls_or_before_the_time_allowed(monkeypatch):
    clock = [0.0]
    shares = iter([0.05, 0.03, 0.002])
    monkeypatch.setattr(steal, "steal_share", lambda start, end: next(shares))
    monkeypatch.setattr(steal.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(steal.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    assert steal.wait_for_quiet_machine(limit=0.01, span=2.0, longest=60.0) == (4.0, 0.002)
    shares = iter([0.05] * 100)
    clock[0] = 0.0
    assert steal.wait_for_quiet_machine(limit=0.01, span=2.0, longest=10.0) == (8.0, 0.05)  # gave up at 10 s


def _calibrator_whose_probes_are_late(monkeypatch: pytest.MonkeyPatch, shares: list[float]):
    """A LinkCalibrator (no network) whose every probe finds the channel late, measured under
    these steal shares, one per attempt."""
    from quicbed import calibration
    from quicbed.host.steal import Steal

    readings = iter(shares)

    class Meter(Steal):
        def __exit__(self, *args: object) -> None:
            self.share = next(readings)

    waits = []
    monkeypatch.setattr(calibration, "Steal", Meter)
    monkeypatch.setattr(calibration, "wait_for_quiet_machine", lambda: waits.append(1) or (0.0, 0.0))
    calibrator = calibration.LinkCalibrator.__new__(calibration.LinkCalibrator)
    monkeypatch.setattr(calibrator, "configure", lambda shape: None, raising=False)
    monkeypatch.setattr(calibrator, "_probe_once", lambda configured, plan: (0, ["ns-3 ran behind"]), raising=False)
    return calibrator, waits


def test_a_calibration_that_the_hypervisor_spoilt_every_time_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from quicbed.calibration import PROBE_ATTEMPTS, ProbePlan
    from quicbed.errors import MachineBusy

    calibrator, waits = _calibrator_whose_probes_are_late(monkeypatch, [0.154, 0.02, 0.115])
    with pytest.raises(MachineBusy, match=r"the hypervisor took 2\.0%-15\.4% of the CPU time during each"):
        calibrator.probe({"corrupt": 5}, ProbePlan())
    assert len(waits) == PROBE_ATTEMPTS - 1  # a quiet machine before each attempt after the first


def test_a_calibration_late_on_a_quiet_attempt_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from quicbed.calibration import ProbePlan
    from quicbed.errors import BackendError, MachineBusy

    calibrator, _ = _calibrator_whose_probes_are_late(monkeypatch, [0.154, 0.001, 0.115])
    with pytest.raises(BackendError, match="the machine was too busy") as error:
        calibrator.probe({"corrupt": 5}, ProbePlan())
    assert not isinstance(error.value, MachineBusy)
