"""The weak-client CPU model's arithmetic (quicbed/host/device_cpu.py) on fixtures: sysbench's
output, the device scaling and the per-packet fit of bench/client_cpu.py."""

from __future__ import annotations

import pytest

from quicbed.devices import DEVICE_CLASSES, DeviceClass
from quicbed.host.device_cpu import (
    PacketCosts,
    fit_packet_costs,
    quota_for,
    relative_speed,
    sysbench_score,
)

# sysbench 1.0.20's cpu test on this host (Debian 12), its first lines
SYSBENCH_OUTPUT = """\
sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 1
Initializing random number generator from current time


Prime numbers limit: 10000

Initializing worker threads...

Threads started!

CPU speed:
    events per second:  3154.39

General statistics:
    total time:                          2.0036s
    total number of events:              6322
"""


def test_the_host_score_is_read_from_sysbench() -> None:
    assert sysbench_score(SYSBENCH_OUTPUT) == 3154.39
    with pytest.raises(ValueError, match="events per second"):
        sysbench_score("sysbench: unknown test 'cpus'")


def test_a_slower_device_gets_its_share_of_a_core_and_a_faster_one_none() -> None:
    pi4 = next(d for d in DEVICE_CLASSES if d.name == "raspberry-pi-4")
    assert relative_speed(pi4, 2955.66) == pytest.approx(0.5)
    assert quota_for(pi4, 2955.66) == 0.5
    assert quota_for(DeviceClass("fast", "x", 4000.0), 2000.0) is None
    with pytest.raises(ValueError):
        relative_speed(pi4, 0)
    # the published scores are ordered as the boards are
    scores = [d.events_per_second for d in DEVICE_CLASSES]
    assert scores == sorted(scores)


def test_the_fit_recovers_known_costs_from_two_ack_frequencies() -> None:
    per_received, per_sent = 20e-6, 12e-6
    samples = []
    for received, sent in ((8000, 4000), (8100, 4050), (8000, 800), (7950, 795)):
        samples.append((per_received * received + per_sent * sent, received, sent))
    costs = fit_packet_costs(samples)
    assert costs.per_received == pytest.approx(per_received) and costs.per_sent == pytest.approx(per_sent)
    # one core here: 1 / (20 us + 12 us / 2) packets per second; half as fast a core, half as many
    assert costs.packets_per_second(2) == pytest.approx(1 / 26e-6)
    assert costs.packets_per_second(10, speed=0.5) == pytest.approx(0.5 / 21.2e-6)


def test_the_fit_needs_downloads_that_differ_in_their_acks() -> None:
    with pytest.raises(ValueError, match="vary the ACK frequency"):
        fit_packet_costs([(0.2, 8000, 4000), (0.4, 16000, 8000)])
    with pytest.raises(ValueError, match="at least two"):
        fit_packet_costs([(0.2, 8000, 4000)])
    assert PacketCosts(1e-5, 1e-5).packets_per_second(1) == pytest.approx(5e4)
