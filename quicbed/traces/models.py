"""Capacity models that generate delivery traces (opportunity times in ms, ``format``'s lines).

Every model describes the link's capacity over time as pieces of constant rate and hands
them to ``from_capacity``, which turns them into delivery opportunities of 1500 bytes.
Rates are bit/s (a number, or a string such as '20mbit'), durations seconds (a number, or
a string such as '500ms'); every piece is rounded to whole milliseconds. The random models
draw from ``random.Random(seed)``, so the same parameters and seed give the same trace.

- ``constant(rate, duration)``: ``rate`` throughout.
- ``steps([(duration, rate), ...])``: each rate for its duration, in order (0 is an outage).
- ``on_off(rate, on, off, duration)``: ``rate`` for ``on``, nothing for ``off``, repeated
  until ``duration`` (the last cycle is cut short).
- ``random_walk(start, low, high, step, interval, duration, seed)``: starts at ``start``;
  after each ``interval`` the rate moves by a normal step of standard deviation ``step``,
  clamped to [``low``, ``high``].
- ``markov(model, duration, seed)``: a ``MarkovModel`` (rate ``levels``, a row-stochastic
  ``transitions`` matrix, ``interval`` per step, ``start`` state); after each interval the
  next state is drawn from the current state's row.

``fit_markov(times, levels, interval)`` is how a measured trace (e.g. a cellular drive
recording in Mahimahi's format) becomes a model: its capacity per ``interval`` is split into
``levels`` states, and the state changes between consecutive intervals give the matrix.
Generate new traces of any length from the fitted model with ``markov``
(``quicbed trace fit`` then ``quicbed trace markov --model``; docs/traces.md).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from quicbed.errors import SpecError
from quicbed.spec.units import format_rate, format_time, parse_rate, parse_time
from quicbed.traces.format import BYTES_PER_OPPORTUNITY, capacity

BITS_PER_OPPORTUNITY = BYTES_PER_OPPORTUNITY * 8
#: tolerance on a row's sum in a transition matrix
ROW_SUM_TOLERANCE = 1e-6
#: floating-point slack when counting whole opportunities out of accumulated credit
_CREDIT_SLACK = 1e-6


def rate_value(value: float | str, field: str) -> float:
    """bit/s from a number of bit/s or a string like '20mbit'; 0 (an outage) is allowed."""
    if isinstance(value, str) and re.fullmatch(r"\s*0+(\.0*)?\s*[A-Za-z/]*\s*", value):
        return 0.0  # '0', '0mbit': parse_rate refuses 0, which on a tc link means no limit
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise SpecError(f"rate must be 0 or more bit/s, got {value!r}", field=field, fix="e.g. 12e6 or '12mbit'")
        return float(value)
    return parse_rate(value, field)


def seconds_value(value: float | str, field: str) -> float:
    """Seconds from a number of seconds or a string like '500ms'; at least 1 ms."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0:
            raise SpecError(f"duration must be a positive number of seconds, got {value!r}", field=field)
    else:
        seconds = parse_time(value, field)
    if round(seconds * 1000) < 1:
        raise SpecError(
            f"duration {value!r} is shorter than 1 ms",
            field=field,
            fix="traces have a resolution of 1 ms: give at least '1ms'",
        )
    return seconds


def _whole_ms(seconds: float) -> int:
    return round(seconds * 1000)


def from_capacity(segments: Iterable[tuple[float, float]]) -> list[int]:
    """Opportunity times (ms) of piecewise-constant capacity: ``(duration_s, rate_bps)`` pieces.

    Each millisecond earns rate x 1 ms / 12000 bits of credit, and a whole credit is one
    opportunity at that millisecond's end, so opportunities are spread evenly: 12 Mbit/s
    is 1, 2, 3, ... and 24 Mbit/s two lines per millisecond. Credit left over at a piece's
    end carries into the next. The trace's period must equal the total duration, so when
    no opportunity falls on the final millisecond one is added there: at most 1500 bytes
    more per period than the pieces say.
    """
    times: list[int] = []
    now_ms = 0
    carry = 0.0  # credit below one opportunity, carried across pieces
    for number, (duration_s, rate_bps) in enumerate(segments, 1):
        field = f"piece {number}"
        if not math.isfinite(rate_bps) or rate_bps < 0:
            raise SpecError(f"rate {rate_bps!r} bit/s is not 0 or more", field=field)
        length_ms = _whole_ms(duration_s) if math.isfinite(duration_s) else 0
        if length_ms < 1:
            raise SpecError(
                f"duration {duration_s!r} s is shorter than 1 ms",
                field=field,
                fix="traces have a resolution of 1 ms: give every piece at least 1 ms",
            )
        per_ms = rate_bps / 1000 / BITS_PER_OPPORTUNITY
        emitted = 0
        for offset in range(1, length_ms + 1):
            # credit as a product, not a running sum, so rounding errors do not accumulate
            due = math.floor(carry + per_ms * offset + _CREDIT_SLACK)
            times.extend([now_ms + offset] * (due - emitted))
            emitted = due
        carry = max(0.0, carry + per_ms * length_ms - emitted)
        now_ms += length_ms
    if now_ms == 0:
        raise SpecError("the capacity has no duration", fix="give at least one piece of 1 ms or more")
    if not times or times[-1] != now_ms:
        times.append(now_ms)  # closes the period: the last line's time is the period
    return times


def constant(rate: float | str, duration: float | str) -> list[int]:
    """``rate`` for ``duration``."""
    return from_capacity([(seconds_value(duration, "duration"), rate_value(rate, "rate"))])


def steps(pieces: Iterable[tuple[float | str, float | str]]) -> list[int]:
    """Each ``(duration, rate)`` in order."""
    segments = [
        (seconds_value(duration, f"steps[{number}].duration"), rate_value(rate, f"steps[{number}].rate"))
        for number, (duration, rate) in enumerate(pieces)
    ]
    if not segments:
        raise SpecError("no steps given", field="steps", fix="give at least one (duration, rate) step")
    return from_capacity(segments)


def on_off(rate: float | str, on: float | str, off: float | str, duration: float | str) -> list[int]:
    """``rate`` for ``on``, 0 for ``off``, repeated until ``duration`` (the last cycle cut short)."""
    rate_bps = rate_value(rate, "rate")
    cycle = ((_whole_ms(seconds_value(on, "on")), rate_bps), (_whole_ms(seconds_value(off, "off")), 0.0))
    return from_capacity(_repeat_ms(cycle, _whole_ms(seconds_value(duration, "duration"))))


def _repeat_ms(cycle: Sequence[tuple[int, float]], total_ms: int) -> list[tuple[float, float]]:
    """``(ms, rate)`` pieces repeated and cut to ``total_ms``, as ``(seconds, rate)``."""
    segments: list[tuple[float, float]] = []
    now_ms = 0
    while now_ms < total_ms:
        for length_ms, rate_bps in cycle:
            length_ms = min(length_ms, total_ms - now_ms)
            if length_ms > 0:
                segments.append((length_ms / 1000, rate_bps))
                now_ms += length_ms
    return segments


def _intervals_ms(interval_s: float, duration_s: float) -> list[int]:
    """The lengths (ms) of the steps of a stepwise model; the last one cut short."""
    interval_ms, total_ms = _whole_ms(interval_s), _whole_ms(duration_s)
    return [min(interval_ms, total_ms - start) for start in range(0, total_ms, interval_ms)]


def random_walk(
    start: float | str,
    low: float | str,
    high: float | str,
    step: float | str,
    interval: float | str,
    duration: float | str,
    seed: int,
) -> list[int]:
    """A rate that moves by a normal step (standard deviation ``step``) after each ``interval``,
    clamped to [``low``, ``high``], starting at ``start``."""
    low_bps, high_bps = rate_value(low, "low"), rate_value(high, "high")
    start_bps, step_bps = rate_value(start, "start"), rate_value(step, "step")
    if low_bps > high_bps:
        raise SpecError(
            f"low {format_rate(low_bps)} is above high {format_rate(high_bps)}", field="low", fix="give low <= high"
        )
    if not low_bps <= start_bps <= high_bps:
        raise SpecError(
            f"start {format_rate(start_bps)} is outside [{format_rate(low_bps)}, {format_rate(high_bps)}]",
            field="start",
            fix="give a start between low and high",
        )
    chooser = random.Random(seed)
    segments = []
    rate_bps = start_bps
    for length_ms in _intervals_ms(seconds_value(interval, "interval"), seconds_value(duration, "duration")):
        segments.append((length_ms / 1000, rate_bps))
        rate_bps = min(high_bps, max(low_bps, rate_bps + chooser.gauss(0.0, step_bps)))
    return from_capacity(segments)


@dataclass(frozen=True)
class MarkovModel:
    """Capacity that jumps between ``levels`` (bit/s) every ``interval`` seconds; row i of
    ``transitions`` holds the probabilities of going from state i to each state."""

    levels: tuple[float, ...]
    transitions: tuple[tuple[float, ...], ...]
    interval: float
    start: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(float(level) for level in self.levels))
        object.__setattr__(self, "transitions", tuple(tuple(float(p) for p in row) for row in self.transitions))
        count = len(self.levels)
        if count == 0:
            raise SpecError("no levels", field="levels", fix="give one rate per state, e.g. [2mbit, 20mbit]")
        for number, level in enumerate(self.levels):
            if not math.isfinite(level) or level < 0:
                raise SpecError(f"level {level!r} bit/s is not 0 or more", field=f"levels[{number}]")
        if len(self.transitions) != count:
            raise SpecError(
                f"{len(self.transitions)} rows for {count} levels",
                field="transitions",
                fix="one row per level, each with one probability per level",
            )
        for number, row in enumerate(self.transitions):
            self._check_row(number, row)
        if _whole_ms(self.interval) < 1:
            raise SpecError(
                f"interval {self.interval!r} s is shorter than 1 ms",
                field="interval",
                fix="give an interval of 1 ms or more, e.g. '200ms'",
            )
        if not 0 <= self.start < count:
            raise SpecError(f"start state {self.start} does not exist (states 0..{count - 1})", field="start")

    def _check_row(self, number: int, row: tuple[float, ...]) -> None:
        field = f"transitions[{number}]"
        if len(row) != len(self.levels):
            raise SpecError(
                f"{len(row)} probabilities for {len(self.levels)} levels", field=field, fix="one probability per level"
            )
        if any(not math.isfinite(p) or not 0 <= p <= 1 for p in row):
            raise SpecError(f"probabilities {list(row)} are not all within 0..1", field=field)
        if abs(sum(row) - 1) > ROW_SUM_TOLERANCE:
            raise SpecError(
                f"the probabilities add up to {sum(row):.6g}, not 1",
                field=field,
                fix="each row lists where state goes next: its probabilities add up to 1",
            )

    @classmethod
    def sticky(cls, levels: Sequence[float], stay: float, interval: float, start: int = 0) -> MarkovModel:
        """Each state stays with probability ``stay``; the rest is spread evenly over the others."""
        if not 0 <= stay <= 1:
            raise SpecError(f"stay probability {stay!r} is not within 0..1", field="stay", fix="e.g. 0.9")
        if len(levels) == 1:
            return cls(tuple(levels), ((1.0,),), interval, start)
        move = (1 - stay) / (len(levels) - 1)
        rows = tuple(tuple(stay if i == j else move for j in range(len(levels))) for i in range(len(levels)))
        return cls(tuple(levels), rows, interval, start)

    def to_dict(self) -> dict:
        """The model as YAML-ready data: rates like '12mbit', the interval like '200ms'."""
        return {
            "levels": [format_rate(level) if level > 0 else 0 for level in self.levels],
            "transitions": [list(row) for row in self.transitions],
            "interval": format_time(self.interval),
            "start": self.start,
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "") -> MarkovModel:
        """A model from ``to_dict``'s form (rates as '12mbit' or bit/s, interval as '200ms')."""
        try:
            return cls._from_dict(data)
        except SpecError as error:
            raise error.located(source) from None

    @classmethod
    def _from_dict(cls, data: object) -> MarkovModel:
        if not isinstance(data, dict):
            raise SpecError(
                f"expected a mapping with levels, transitions, interval, got {type(data).__name__}",
                fix="see traces/markov-drive.yaml for an example",
            )
        unknown = sorted(set(data) - {"levels", "transitions", "interval", "start"})
        if unknown:
            raise SpecError(
                f"unknown key(s) {', '.join(map(str, unknown))}",
                fix="a model has levels, transitions, interval and start",
            )
        missing = [key for key in ("levels", "transitions", "interval") if key not in data]
        if missing:
            raise SpecError(
                f"missing {', '.join(missing)}", field=missing[0], fix="see traces/markov-drive.yaml for an example"
            )
        levels, rows = data["levels"], data["transitions"]
        if not isinstance(levels, list):
            raise SpecError("expected a list of rates", field="levels", fix="e.g. [2mbit, 20mbit]")
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise SpecError(
                "expected a list of rows of probabilities", field="transitions", fix="e.g. [[0.9, 0.1], [0.1, 0.9]]"
            )
        for number, row in enumerate(rows):
            if not all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in row):
                raise SpecError(f"expected numbers, got {row!r}", field=f"transitions[{number}]")
        start = data.get("start", 0)
        if not isinstance(start, int) or isinstance(start, bool):
            raise SpecError(f"expected a state number, got {start!r}", field="start")
        return cls(
            levels=tuple(rate_value(level, f"levels[{n}]") for n, level in enumerate(levels)),
            transitions=tuple(tuple(row) for row in rows),
            interval=parse_time(data["interval"], "interval", allow_zero=False),
            start=start,
        )


def read_markov(path: Path) -> MarkovModel:
    """A model from a YAML file (``MarkovModel.to_dict``'s form)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read the model: {error}", source=str(path)) from None
    except yaml.YAMLError as error:
        raise SpecError(f"not valid YAML: {error}", source=str(path)) from None
    return MarkovModel.from_dict(data, source=str(path))


def markov(model: MarkovModel, duration: float | str, seed: int) -> list[int]:
    """``model``'s capacity for ``duration``: its start level, then a state drawn after each interval."""
    chooser = random.Random(seed)
    state = model.start
    segments = []
    for length_ms in _intervals_ms(model.interval, seconds_value(duration, "duration")):
        segments.append((length_ms / 1000, model.levels[state]))
        state = _next_state(model.transitions[state], chooser.random())
    return from_capacity(segments)


def _next_state(row: Sequence[float], draw: float) -> int:
    total = 0.0
    for state, probability in enumerate(row):
        total += probability
        if draw < total:
            return state
    # rounding left the row's sum a hair under 1: the last state that can happen
    return max(state for state, probability in enumerate(row) if probability > 0)


def fit_markov(times: list[int], levels: int, interval: float) -> MarkovModel:
    """A ``MarkovModel`` of a measured trace: its capacity per ``interval`` in ``levels`` states.

    The capacity per interval is ``format.capacity`` (each
    opportunity in the millisecond that earned it). The bins are first split into ``levels``
    groups of equal size by rank (quantiles), then each boundary moves to halfway between the
    means of its neighbouring groups until no bin changes group (1-D k-means): a fixed-rank
    cut would put some bins of a level in the next state whenever levels are not equally
    frequent. A state's level is the mean capacity of its bins; row i of the matrix counts
    which state follows state i between consecutive bins, normalised (a state never left
    stays with probability 1); the start state is the first bin's.
    """
    if levels < 1:
        raise SpecError(f"{levels} levels", field="levels", fix="give 1 level or more, e.g. 3")
    bin_ms = _whole_ms(interval)
    if bin_ms < 1:
        raise SpecError(f"interval {interval!r} s is shorter than 1 ms", field="interval", fix="e.g. '500ms'")
    rates = capacity(times, bin_ms)
    if len(rates) < max(2, levels):
        raise SpecError(
            f"the trace lasts {len(rates)} interval(s) of {format_time(interval)}, too few for {levels} levels",
            field="interval",
            fix="use a shorter interval or a longer trace",
        )
    distinct = len(set(rates))
    if distinct < levels:
        raise SpecError(
            f"the trace's capacity per {format_time(interval)} takes only {distinct} distinct value(s)",
            field="levels",
            fix=f"use at most {distinct} level(s)",
        )
    states = _cluster(rates, levels)
    means = [_mean([rate for rate, state in zip(rates, states) if state == k]) for k in range(levels)]
    counts = [[0] * levels for _ in range(levels)]
    for here, after in itertools.pairwise(states):
        counts[here][after] += 1
    rows = []
    for k, row in enumerate(counts):
        total = sum(row)
        rows.append(tuple(count / total for count in row) if total else tuple(float(j == k) for j in range(levels)))
    return MarkovModel(tuple(means), tuple(rows), bin_ms / 1000, states[0])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _cluster(rates: list[float], levels: int) -> list[int]:
    """The state (0 = lowest) of each rate: quantile groups refined by 1-D k-means."""
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    states = [0] * len(rates)
    for rank, index in enumerate(order):
        states[index] = rank * levels // len(rates)
    for _ in range(100):
        members = [[rate for rate, state in zip(rates, states) if state == k] for k in range(levels)]
        if not all(members):
            break  # cannot happen with as many distinct rates as levels, but never divide by zero
        means = [_mean(group) for group in members]
        bounds = [(low + high) / 2 for low, high in itertools.pairwise(means)]
        moved = [sum(rate > bound for bound in bounds) for rate in rates]
        if moved == states or len(set(moved)) < levels:
            break
        states = moved
    return states
