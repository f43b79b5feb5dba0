"""Stations that move: a trajectory of timed waypoints, given or drawn as a random walk.

    topo.add_station("sta1", waypoints=[(0, 5, 0), (10, 5, 0), (40, 65, 0)])
    topo.add_station("sta2", position=(20, 20),
                     mobility={"model": "random_walk", "speed": 1.5, "bounds": (0, 0, 40, 40), "seed": 3})

Times are seconds from the start of a run's transfer (the moment its statistics start);
before the first waypoint the station stands at it, after the last one it stays there, and
between two it moves in a straight line at constant speed. A random walk is drawn here, from
its seed, into waypoints: every backend moves the station along the same recorded path.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from quicbed.errors import SpecError

Point = tuple[float, float, float, float]  # (t, x, y, z): seconds, metres

#: random walk defaults: a walking pace, a new direction every 2 s, a path long enough for any run
DEFAULT_WALK = {"speed": 1.4, "turn_every": 2.0, "duration": 600.0, "seed": 1}
MOBILITY_MODELS = ("random_walk",)


@dataclass(frozen=True)
class Trajectory:
    """Where a station is over a run: timed waypoints and the model that made them."""

    points: tuple[Point, ...]
    model: str = "waypoints"
    #: the model's settings as used (a random walk's speed, bounds, seed, ...)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def start(self) -> tuple[float, float, float]:
        return self.points[0][1:]

    @property
    def duration(self) -> float:
        return self.points[-1][0]

    def position_at(self, t: float) -> tuple[float, float, float]:
        """The position ``t`` seconds after the transfer started."""
        if t <= self.points[0][0]:
            return self.start
        for (t0, *a), (t1, *b) in zip(self.points, self.points[1:]):
            if t <= t1:
                share = (t - t0) / (t1 - t0)
                x, y, z = (a[i] + share * (b[i] - a[i]) for i in range(3))
                return (x, y, z)
        return self.points[-1][1:]

    def top_speed(self) -> float:
        """The fastest leg's speed (m/s)."""
        return max((math.dist(a[1:], b[1:]) / (b[0] - a[0]) for a, b in zip(self.points, self.points[1:])), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            **({"settings": self.settings} if self.settings else {}),
            "waypoints": [list(p) for p in self.points],
        }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_waypoints(value: Any, where: str) -> Trajectory:
    """``[(t, x, y), (t, x, y, z), ...]``: seconds from the transfer's start, metres."""
    example = "e.g. waypoints=[(0, 5, 0), (30, 65, 0)]"
    if not isinstance(value, (list, tuple)) or not value:
        raise SpecError(
            f"waypoints must be a list of (t, x, y) or (t, x, y, z), got {value!r}", field=where, fix=example
        )
    points: list[Point] = []
    for index, point in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(point, (list, tuple)) or len(point) not in (3, 4) or not all(map(_number, point)):
            raise SpecError(
                f"a waypoint is (t, x, y) or (t, x, y, z) of finite numbers, got {point!r}", field=here, fix=example
            )
        t, x, y, *z = (float(c) for c in point)
        if t < 0:
            raise SpecError(
                f"waypoint time {t:g} s is negative",
                field=here,
                fix="times count seconds from the start of the transfer: 0 or more",
            )
        if points and t <= points[-1][0]:
            raise SpecError(
                f"waypoint times must increase: {t:g} s follows {points[-1][0]:g} s",
                field=here,
                fix="list the waypoints in time order, each at a later time",
            )
        points.append((t, x, y, z[0] if z else 0.0))
    return Trajectory(tuple(points))


def parse_mobility(value: Any, start: tuple[float, float, float] | None, where: str) -> Trajectory:
    """A mobility model's settings (``{"model": "random_walk", ...}``) drawn into a trajectory."""
    if not isinstance(value, dict) or value.get("model") not in MOBILITY_MODELS:
        raise SpecError(
            f"mobility must be a dict with a model ({', '.join(MOBILITY_MODELS)}), got {value!r}",
            field=where,
            fix='e.g. mobility={"model": "random_walk", "speed": 1.5, "bounds": (0, 0, 40, 40)}',
        )
    known = {"model", "speed", "bounds", "seed", "turn_every", "duration"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise SpecError(
            f"unknown random_walk setting(s) {unknown}", field=where, fix=f"the settings are {', '.join(sorted(known))}"
        )
    settings = {**DEFAULT_WALK, **{k: v for k, v in value.items() if k != "model"}}
    for name in ("speed", "turn_every", "duration"):
        if not _number(settings[name]) or settings[name] <= 0:
            raise SpecError(
                f"{name} must be a positive number, got {settings[name]!r}",
                field=f"{where}.{name}",
                fix={
                    "speed": "metres per second, e.g. 1.4 (walking)",
                    "turn_every": "seconds between changes of direction, e.g. 2",
                    "duration": "seconds of path to draw, e.g. 600",
                }[name],
            )
    if not isinstance(settings["seed"], int) or isinstance(settings["seed"], bool):
        raise SpecError(f"seed must be an integer, got {settings['seed']!r}", field=f"{where}.seed")
    bounds = settings.get("bounds")
    if (
        not isinstance(bounds, (list, tuple))
        or len(bounds) != 4
        or not all(map(_number, bounds))
        or bounds[0] >= bounds[2]
        or bounds[1] >= bounds[3]
    ):
        raise SpecError(
            f"bounds must be (x_min, y_min, x_max, y_max) with min < max, got {bounds!r}",
            field=f"{where}.bounds",
            fix="e.g. bounds=(0, 0, 40, 40): a 40 m square",
        )
    x_min, y_min, x_max, y_max = (float(b) for b in bounds)
    if start is None:
        start = ((x_min + x_max) / 2, (y_min + y_max) / 2, 0.0)
    elif not (x_min <= start[0] <= x_max and y_min <= start[1] <= y_max):
        raise SpecError(
            f"the station starts at ({start[0]:g}, {start[1]:g}), outside its bounds {tuple(bounds)}",
            field=f"{where}.bounds",
            fix="move its position inside the bounds, or widen them",
        )
    settings["bounds"] = [x_min, y_min, x_max, y_max]
    points = random_walk(
        start,
        float(settings["speed"]),
        (x_min, y_min, x_max, y_max),
        settings["seed"],
        float(settings["turn_every"]),
        float(settings["duration"]),
    )
    return Trajectory(points, "random_walk", settings)


def random_walk(
    start: tuple[float, float, float],
    speed: float,
    bounds: tuple[float, float, float, float],
    seed: int,
    turn_every: float,
    duration: float,
) -> tuple[Point, ...]:
    """ns-3's RandomWalk2d in its time mode, drawn ahead: every ``turn_every`` seconds a
    uniformly random heading at ``speed``; the walk reflects off the bounds (a waypoint where
    it does)."""
    rng = random.Random(seed)
    x_min, y_min, x_max, y_max = bounds
    t, x, y, z = 0.0, start[0], start[1], start[2]
    points: list[Point] = [(0.0, x, y, z)]
    while t < duration - 1e-6:
        heading = rng.uniform(0, 2 * math.pi)
        dx, dy = speed * math.cos(heading), speed * math.sin(heading)
        leg_end = min(t + turn_every, duration)
        while t < leg_end - 1e-6:
            wall_x = (x_max - x) / dx if dx > 0 else (x_min - x) / dx if dx < 0 else math.inf
            wall_y = (y_max - y) / dy if dy > 0 else (y_min - y) / dy if dy < 0 else math.inf
            step = min(leg_end - t, wall_x, wall_y)
            if step > 1e-6:
                t, x, y = t + step, min(max(x + dx * step, x_min), x_max), min(max(y + dy * step, y_min), y_max)
                points.append((round(t, 6), round(x, 6), round(y, 6), z))
            if wall_x <= step + 1e-6:
                dx = -dx
            if wall_y <= step + 1e-6:
                dy = -dy
    return tuple(points)
