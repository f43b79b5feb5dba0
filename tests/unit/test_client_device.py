"""A weak client's cost per datagram (quicbed/apps/client_device.py, quicbed/host/device_cpu.py):
the device scaling, what each clock adds, the meter's sleeping on a fake clock, the busy share."""

from __future__ import annotations

import pytest

from quicbed.apps.client_device import QUANTUM, CostMeter, busy_share, device_cost
from quicbed.host.clock import REAL, VIRTUAL
from quicbed.devices import CORTEX_A53_1_2GHZ, device_class
from quicbed.host.device_cpu import CLIENT_PACKET_COSTS, REFERENCE_HOST_SCORE, device_packet_costs


def test_a_device_takes_the_reference_cost_times_how_much_slower_its_core_is() -> None:
    # the Pi 3B+'s score (Cortex-A53, 1.4 GHz) at 1.2 GHz
    assert CORTEX_A53_1_2GHZ.events_per_second == pytest.approx(687.45 * 1.2 / 1.4, abs=0.01)
    slower = REFERENCE_HOST_SCORE / CORTEX_A53_1_2GHZ.events_per_second  # about 7.4
    for implementation, host in CLIENT_PACKET_COSTS.items():
        costs = device_packet_costs(CORTEX_A53_1_2GHZ, implementation)
        assert costs.per_received == pytest.approx(host.per_received * slower)
        assert costs.per_sent == pytest.approx(host.per_sent * slower)
    # quinn on such a core: about 180 us per received datagram, 60 us per ACK
    quinn = device_packet_costs(CORTEX_A53_1_2GHZ, "quinn")
    assert 175e-6 < quinn.per_received < 190e-6 and 55e-6 < quinn.per_sent < 62e-6
    with pytest.raises(KeyError, match="no device class 'pi'.*cortex-a53-1.2ghz"):
        device_class("pi")


def test_virtual_time_adds_the_whole_cost_real_time_what_this_host_does_not_take() -> None:
    virtual = device_cost("cortex-a53-1.2ghz", "quinn", VIRTUAL)
    real = device_cost("cortex-a53-1.2ghz", "quinn", REAL)
    host = CLIENT_PACKET_COSTS["quinn"]
    assert (virtual.added_per_received, virtual.added_per_sent) == (virtual.per_received, virtual.per_sent)
    assert real.added_per_received == pytest.approx(real.per_received - host.per_received)
    assert real.added_per_sent == pytest.approx(real.per_sent - host.per_sent)
    assert real.record() == {
        "name": "cortex-a53-1.2ghz",
        "implementation": "quinn",
        "clock": REAL,
        "per_received": real.per_received,
        "per_sent": real.per_sent,
    }
    with pytest.raises(ValueError, match="no measured packet costs for the picoquic client"):
        device_cost("cortex-a53-1.2ghz", "picoquic", REAL)


class FakeClock:
    """A clock that a sleep moves, overshooting each sleep by ``slack`` (a timer's lateness)."""

    def __init__(self, slack: float) -> None:
        self.now, self.slack, self.sleeps = 0.0, slack, []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds + self.slack

    def time(self) -> float:
        return self.now


def test_the_meter_sleeps_the_debt_and_credits_what_it_overslept() -> None:
    cost = device_cost("cortex-a53-1.2ghz", "quinn", VIRTUAL)
    clock = FakeClock(slack=60e-6)
    meter = CostMeter(cost, sleep=clock.sleep, clock=clock.time)
    for _ in range(1000):
        meter.charge(received=1)
        meter.charge(sent=1 if _ % 2 else 0)
    owed = 1000 * cost.per_received + 500 * cost.per_sent
    # each sleep overshoots by 60 us, and the next one is shorter by as much: the total stays
    # within a sleep's slack of what was owed
    assert owed - QUANTUM <= meter.slept <= owed + clock.slack
    assert clock.now == pytest.approx(meter.slept)
    assert len(clock.sleeps) < 1500 and min(clock.sleeps) >= QUANTUM - 1e-12
    assert meter.summary() == {
        "received": 1000,
        "sent": 500,
        "added_per_received": cost.added_per_received,
        "added_per_sent": cost.added_per_sent,
        "slept": meter.slept,
    }


def test_small_costs_are_slept_once_they_add_up_to_a_quantum() -> None:
    cost = device_cost("raspberry-pi-5", "quinn", REAL)  # a Pi 5 is slower than the reference host by ~1.6x
    clock = FakeClock(slack=0.0)
    meter = CostMeter(cost, sleep=clock.sleep, clock=clock.time)
    meter.charge(received=1)
    assert cost.added_per_received < QUANTUM and clock.sleeps == []
    for _ in range(10):
        meter.charge(received=1)
    assert clock.sleeps and all(s >= QUANTUM for s in clock.sleeps)


def test_the_busy_share_is_the_devices_time_over_the_connection() -> None:
    record = {
        "total_time": 2.0,
        "device": {"per_received": 100e-6, "per_sent": 50e-6, "applied": {"received": 10000, "sent": 4000}},
    }
    assert busy_share(record) == pytest.approx((1.0 + 0.2) / 2.0)
    assert busy_share({**record, "total_time": 1.0}) == 1.0  # (a priming connection's datagrams too)
    assert busy_share({"total_time": 2.0}) is None
    assert busy_share({**record, "total_time": None}) is None
    assert busy_share({**record, "device": {**record["device"], "applied": None}}) is None
