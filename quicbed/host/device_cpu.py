"""Weak client CPUs: what a received packet and a sent ACK cost a QUIC client, and the CPU
quota that makes a client on this host as slow as a named class of device.

A device's speed relative to this host is the ratio of one benchmark run on both: sysbench's
CPU test (``sysbench cpu --threads=1 run``, version 1.0.20, primes up to 10000, events per
second on one core). The devices' figures are published ones (quicbed.devices); this host's
comes from running the same command (``bench/client_cpu.py``). A client limited to
``speed`` cores (``stress.cpu_quota``) then has as much CPU time per second as the device's
one core, for work that scales as that benchmark does; docs/metrics.md, "A weak client CPU",
says what this leaves out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from quicbed.devices import DeviceClass

#: the same benchmark on this host (seconds: 10 keep it to a short wait)
HOST_COMMAND = ("sysbench", "cpu", "--threads=1", "--time=10", "run")


def sysbench_score(output: str) -> float:
    """Events per second from sysbench's CPU test output."""
    match = re.search(r"events per second:\s*([0-9.]+)", output)
    if match is None:
        raise ValueError("no 'events per second' in sysbench's output (is it sysbench 1.0's cpu test?)")
    return float(match.group(1))


def relative_speed(device: DeviceClass, host_events_per_second: float) -> float:
    """The device's core as a fraction of one of this host's cores (above 1: faster)."""
    if host_events_per_second <= 0:
        raise ValueError("the host's score must be positive")
    return device.events_per_second / host_events_per_second


def quota_for(device: DeviceClass, host_events_per_second: float) -> float | None:
    """The ``stress.cpu_quota`` (cores) that gives a client the device's one core, or None
    where the device is not slower than this host's core (no quota would model it)."""
    speed = relative_speed(device, host_events_per_second)
    return round(speed, 3) if speed < 1 else None


@dataclass(frozen=True)
class PacketCosts:
    """CPU seconds a client spends per received datagram and per datagram it sends (ACKs,
    in a download), fitted from downloads with different ACK frequencies."""

    per_received: float
    per_sent: float

    def packets_per_second(self, ack_every: float, speed: float = 1.0) -> float:
        """Datagrams one core of relative ``speed`` can receive, sending an ACK every
        ``ack_every`` of them."""
        return speed / (self.per_received + self.per_sent / ack_every)


#: what bench/client_cpu.py measured each QUIC client's datagrams to cost (fit a, b; qlog off) on
#: the reference host, whose sysbench score it printed beside them (2026-11-27, an idle 2-core
#: Debian 12 VM, AMD EPYC; bench/README.md)
REFERENCE_HOST_SCORE = 4336.0
CLIENT_PACKET_COSTS: dict[str, PacketCosts] = {
    "aioquic": PacketCosts(per_received=178.8e-6, per_sent=85.0e-6),
    "quinn": PacketCosts(per_received=24.8e-6, per_sent=8.0e-6),
}


def device_packet_costs(device: DeviceClass, implementation: str) -> PacketCosts:
    """What a datagram costs ``implementation``'s client on one core of ``device``: the
    reference host's cost, scaled by how much slower the device's core is."""
    host = CLIENT_PACKET_COSTS[implementation]
    slower = REFERENCE_HOST_SCORE / device.events_per_second
    return PacketCosts(per_received=host.per_received * slower, per_sent=host.per_sent * slower)


def fit_packet_costs(samples: Sequence[tuple[float, float, float]]) -> PacketCosts:
    """Least squares of ``cpu = per_received * received + per_sent * sent`` (no intercept:
    the fixed cost of a download is subtracted before) over (cpu seconds, received, sent)
    samples. They must vary the ratio of sent to received, e.g. with two ACK frequencies."""
    if len(samples) < 2:
        raise ValueError("at least two downloads are needed")
    rr = sum(r * r for _, r, _ in samples)
    ss = sum(s * s for _, _, s in samples)
    rs = sum(r * s for _, r, s in samples)
    cr = sum(c * r for c, r, _ in samples)
    cs = sum(c * s for c, _, s in samples)
    determinant = rr * ss - rs * rs
    if determinant <= 1e-9 * rr * ss:
        raise ValueError("the downloads all sent the same share of ACKs: vary the ACK frequency")
    return PacketCosts(per_received=(cr * ss - cs * rs) / determinant, per_sent=(cs * rr - cr * rs) / determinant)
