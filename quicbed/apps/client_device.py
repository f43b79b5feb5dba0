"""A weak client as an explicit cost (``stress.client_device``): the time a slower device's
CPU takes per datagram, charged where the client receives and sends them, in both clocks.

The cost of a datagram is what ``bench/client_cpu.py`` measured it to cost each QUIC client
on the reference host, scaled to the device's core by a CPU benchmark
(:mod:`quicbed.host.device_cpu`). The client sleeps it: it is a single-threaded client, so
the time is time the whole client is busy, as on a slow single core, while its datagrams
wait in the socket buffer. What the client sleeps is what the device takes beyond what this
run already takes: in virtual time computing takes no time, so the whole cost; in real time
the client's own CPU on this host already takes the reference cost, so the difference.
docs/metrics.md, "A weak client CPU", compares this with a CPU quota.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quicbed.devices import DEVICE_CLASSES, device_class
from quicbed.host.clock import VIRTUAL
from quicbed.host.device_cpu import CLIENT_PACKET_COSTS, device_packet_costs

#: a debt below this is carried to the next datagram, not slept (each sleep overshoots by the
#: timer's slack; what is overslept is credited all the same). The native client's is the same.
QUANTUM = 50e-6


def device_names() -> tuple[str, ...]:
    return tuple(device.name for device in DEVICE_CLASSES)


@dataclass(frozen=True)
class DeviceCost:
    """What one client's datagrams cost on ``device``, and what it sleeps for them here."""

    device: str
    implementation: str
    clock: str
    per_received: float  # the device's seconds per received datagram
    per_sent: float  # per datagram it sends (ACKs, in a download)
    added_per_received: float  # what the client sleeps per received datagram in this clock
    added_per_sent: float

    def record(self) -> dict[str, Any]:
        """The client record's ``device`` (the client adds ``applied``: what it charged)."""
        return {
            "name": self.device,
            "implementation": self.implementation,
            "clock": self.clock,
            "per_received": self.per_received,
            "per_sent": self.per_sent,
        }


def device_cost(device: str, implementation: str, clock: str) -> DeviceCost:
    """The cost of ``implementation``'s datagrams on ``device`` (a device class name) in ``clock``."""
    if implementation not in CLIENT_PACKET_COSTS:
        raise ValueError(
            f"no measured packet costs for the {implementation} client: bench/client_cpu.py measures "
            f"{', '.join(sorted(CLIENT_PACKET_COSTS))}"
        )
    costs = device_packet_costs(device_class(device), implementation)
    host = CLIENT_PACKET_COSTS[implementation]
    if clock == VIRTUAL:
        added = (costs.per_received, costs.per_sent)
    else:  # the client's own run here already takes the reference host's time
        added = (max(0.0, costs.per_received - host.per_received), max(0.0, costs.per_sent - host.per_sent))
    return DeviceCost(device, implementation, clock, costs.per_received, costs.per_sent, *added)


class CostMeter:
    """Sleeps what datagrams cost, paying the debt once it reaches :data:`QUANTUM`."""

    def __init__(
        self,
        cost: DeviceCost,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cost = cost
        self._sleep, self._clock = sleep, clock
        self.received = self.sent = 0
        self.slept = 0.0
        self._debt = 0.0

    def charge(self, received: int = 0, sent: int = 0) -> None:
        self.received += received
        self.sent += sent
        self._debt += received * self.cost.added_per_received + sent * self.cost.added_per_sent
        if self._debt < QUANTUM:
            return
        start = self._clock()
        self._sleep(self._debt)
        slept = self._clock() - start
        self._debt -= slept
        self.slept += slept

    def summary(self) -> dict[str, Any]:
        """The record's ``device.applied`` (the native client writes the same keys)."""
        return {
            "received": self.received,
            "sent": self.sent,
            "added_per_received": self.cost.added_per_received,
            "added_per_sent": self.cost.added_per_sent,
            "slept": self.slept,
        }


def busy_share(record: dict[str, Any]) -> float | None:
    """The share of a client record's connection time (``total_time``) its device spent on the
    datagrams it charged, or None without a device or a time. At most 1: the datagrams of a
    priming connection and of the closing handshake are charged too, outside that time."""
    device, seconds = record.get("device") or {}, record.get("total_time")
    applied = device.get("applied")
    if not applied or not isinstance(seconds, (int, float)) or seconds <= 0:
        return None
    busy = device["per_received"] * applied["received"] + device["per_sent"] * applied["sent"]
    return min(1.0, busy / seconds)
