"""The hypervisor's share of the CPU time and waiting for a quiet machine (quicbed/host/steal.py)."""

from __future__ import annotations

import pytest

from quicbed.host import steal
from quicbed.host.cpu import MachineTicks


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
