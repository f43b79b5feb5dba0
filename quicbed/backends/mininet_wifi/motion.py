"""Stations that move on mininet-wifi: their trajectories stepped in real time, and the
associations their access points' hostapd logged.

Mininet-WiFi places a radio where its node stands (``setPosition``); under wmediumd's
interference mode the signal each radio hears follows, and a roaming station's wpa_supplicant
moves to a stronger AP of its network by its own background scans (bgscan). quicbed only sets
the positions; what the station does about them is the real user space's decision.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from quicbed.spec.mobility import Trajectory

Position = tuple[float, float, float]

#: hostapd -t: "1732761234.123456: ap1-wlan1: AP-STA-CONNECTED 02:00:00:00:01:00"
_EVENT = re.compile(r"^(\d+\.\d+): (\S+): AP-STA-(CONNECTED|DISCONNECTED) ([0-9a-f:]{17})", re.MULTILINE)


class Mover:
    """Sets each moving station's position along its trajectory every ``step_s`` seconds,
    from :meth:`start` (a trajectory's time 0) until the last waypoint of the longest one."""

    def __init__(
        self, trajectories: Mapping[str, Trajectory], set_position: Callable[[str, Position], None], step_s: float
    ) -> None:
        self.trajectories = dict(trajectories)
        self.set_position = set_position
        self.step_s = step_s
        self.started: float | None = None  # wall clock (s since the epoch) of time 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop()
        self._stop.clear()
        self.started = time.time()
        self._thread = threading.Thread(target=self._run, args=(time.monotonic(),), name="quicbed-motion", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    @property
    def moving(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, origin: float) -> None:
        end = max(trajectory.points[-1][0] for trajectory in self.trajectories.values())
        while True:
            t = time.monotonic() - origin
            for station, trajectory in self.trajectories.items():
                try:
                    self.set_position(station, trajectory.position_at(t))
                except Exception as error:  # noqa: BLE001 - kept for the run's record, the walk goes on
                    if len(self.errors) < 10:
                        self.errors.append(f"{station} at {t:.1f} s: {error}")
            if t >= end or self._stop.wait(self.step_s):
                return


def association_events(
    logs: Mapping[str, str], stations: Mapping[str, str], since: float | None = None
) -> list[dict[str, Any]]:
    """(Dis)associations of ``stations`` (MAC -> station) in the access points' hostapd logs
    (AP -> log text), in time order: ``t`` (s since the epoch, or since ``since``), ``ap``,
    ``station``, ``event`` (``associated`` when hostapd let it in, with its keys where the
    network has them; ``disassociated``)."""
    events = []
    for ap, text in logs.items():
        for stamp, _device, kind, mac in _EVENT.findall(text):
            if mac in stations:
                t = float(stamp) - (since or 0.0)
                if since is None or t >= 0:
                    events.append(
                        {
                            "t": round(t, 6),
                            "ap": ap,
                            "station": stations[mac],
                            "event": "associated" if kind == "CONNECTED" else "disassociated",
                        }
                    )
    return sorted(events, key=lambda e: e["t"])


def aps_in_order(events: Iterable[Mapping[str, Any]], station: str) -> list[str]:
    """The APs ``station`` associated with, in order (one entry per association)."""
    return [e["ap"] for e in events if e["station"] == station and e["event"] == "associated"]
