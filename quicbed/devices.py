"""The classes of client device quicbed can model (a weak client: ``stress.cpu_quota`` sized by
quicbed.host.device_cpu, or ``stress.client_device``, quicbed.apps.client_device), named for every
layer: each is a core's score on one CPU benchmark (sysbench's, one thread)."""

from __future__ import annotations

from dataclasses import dataclass

#: where the devices' figures come from, with the command that made them
SOURCE = (
    "https://leoncode.co.uk/articles/raspberry-pi-benchmarks: sysbench 1.0.20, "
    "'sysbench cpu --threads=1 --time=60 run' (primes up to 10000), events per second"
)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    cpu: str
    events_per_second: float  # the benchmark, one core


#: the E1 study's weaker client class, a Cortex-A53 at 1.2 GHz (Raspberry Pi 3B): no published
#: score, so the Pi 3B+'s (the same core at 1.4 GHz) scaled by the clock, 1.2 / 1.4 (the
#: benchmark's prime loop runs from the core's caches, so its rate follows the clock)
CORTEX_A53_1_2GHZ = DeviceClass("cortex-a53-1.2ghz", "Cortex-A53 at 1.2 GHz", round(687.45 * 1.2 / 1.4, 2))

DEVICE_CLASSES: tuple[DeviceClass, ...] = (
    CORTEX_A53_1_2GHZ,
    DeviceClass("raspberry-pi-3b+", "Cortex-A53", 687.45),
    DeviceClass("raspberry-pi-4", "Cortex-A72", 1477.83),
    DeviceClass("raspberry-pi-5", "Cortex-A76", 2737.49),
)


def device_class(name: str) -> DeviceClass:
    """The device class called ``name`` (KeyError naming the known ones otherwise)."""
    for device in DEVICE_CLASSES:
        if device.name == name:
            return device
    raise KeyError(f"no device class {name!r}: known are {', '.join(d.name for d in DEVICE_CLASSES)}")
