"""Parsing of rates, times, sizes and percentages as users write them ("20mbit", "10ms", "2%").

Every parser returns SI base units (bit/s, seconds, bytes, a fraction 0..1) and raises
SpecError with the accepted forms when the value cannot be read.
"""

from __future__ import annotations

import math
import re

from quicbed.errors import SpecError

_NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "bit": 1.0,
    "bps": 1.0,
    "b/s": 1.0,
    "kbit": 1e3,
    "kb/s": 1e3,
    "kbit/s": 1e3,
    "mbit": 1e6,
    "mb/s": 1e6,
    "mbit/s": 1e6,
    "gbit": 1e9,
    "gb/s": 1e9,
    "gbit/s": 1e9,
}
_AMBIGUOUS_RATE = {"kbps", "mbps", "gbps"}
_TIME_UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
}


def _finite(number: float | int, value: object, field: str) -> float:
    """``number`` as a float, refused when it is not a finite number (nan, inf, 1e400)."""
    try:
        result = float(number)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise SpecError(f"{value!r} is not a finite number", field=field, fix="give a value of a usable size")
    return result


def _split(value: str) -> tuple[float, str] | None:
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-zµ/%]*)", value.strip())
    if not match:
        return None
    return float(match.group(1)), match.group(2).lower()


#: a bare number below this many bit/s is taken for a forgotten unit (Mininet's bw is in Mbit/s,
#: up to 1000 for 1 Gbit/s; no link quicbed emulates is slower than 10 kbit/s)
MIN_BARE_RATE = 10_000


def parse_rate(value: object, field: str = "rate") -> float:
    """Rate in bit/s. Accepts '20mbit', '1.5 Mbit/s', '500kbit', or a number of bit/s."""
    if isinstance(value, bool):
        raise SpecError(f"rate must be a number or a string like '20mbit', got {value!r}", field=field)
    if isinstance(value, (int, float)):
        rate = _finite(value, value, field)
    elif isinstance(value, str):
        parts = _split(value)
        if parts and parts[1] in _AMBIGUOUS_RATE:
            raise SpecError(
                f"rate {value!r} is ambiguous (tc reads '{parts[1]}' as bytes per second)",
                field=field,
                fix=f"write bits per second, e.g. '{parts[0]:g}{parts[1][0]}bit'",
            )
        if not parts or parts[1] not in _RATE_UNITS:
            raise SpecError(
                f"cannot read rate {value!r}",
                field=field,
                fix="use a number and one of bit, kbit, mbit, gbit, e.g. '20mbit'",
            )
        rate = _finite(parts[0] * _RATE_UNITS[parts[1]], value, field)
    else:
        raise SpecError(f"rate must be a string like '20mbit', got {type(value).__name__}", field=field)
    if rate <= 0:
        raise SpecError(
            f"rate must be positive, got {value!r}", field=field, fix="leave the rate out for an unlimited link"
        )
    if isinstance(value, (int, float)) and rate < MIN_BARE_RATE:
        raise SpecError(
            f"a rate of {value!r} is {value!r} bit/s: a bare number is bits per second",
            field=field,
            fix=f"write the unit, e.g. '{value:g}mbit' (Mininet's bw={value:g} is Mbit/s)",
        )
    return rate


def parse_time(value: object, field: str = "time", allow_zero: bool = True) -> float:
    """Duration in seconds. Accepts '10ms', '1.5s', '200us'; a bare 0 is allowed."""
    if isinstance(value, bool):
        raise SpecError(f"expected a duration like '10ms', got {value!r}", field=field)
    if isinstance(value, (int, float)):
        if value < 0:
            raise SpecError(f"duration must not be negative, got {value!r}", field=field)
        if value != 0:
            raise SpecError(
                f"duration {value!r} has no unit",
                field=field,
                fix=f"write it with a unit, e.g. '{value}ms' or '{value}s'",
            )
        seconds = 0.0
    elif isinstance(value, str):
        parts = _split(value)
        if not parts or parts[1] not in _TIME_UNITS:
            raise SpecError(
                f"cannot read duration {value!r}", field=field, fix="use a number and one of s, ms, us, ns, e.g. '10ms'"
            )
        seconds = _finite(parts[0] * _TIME_UNITS[parts[1]], value, field)
    else:
        raise SpecError(f"expected a duration like '10ms', got {type(value).__name__}", field=field)
    if seconds < 0:
        raise SpecError(f"duration must not be negative, got {value!r}", field=field)
    if seconds == 0 and not allow_zero:
        raise SpecError(f"duration must be positive, got {value!r}", field=field)
    return seconds


def parse_size(value: object, field: str = "size") -> int:
    """Size in bytes. Accepts 10000, '10MB', '64KiB', '1.5mb' (decimal k/M/G, binary KiB/MiB/GiB)."""
    if isinstance(value, bool):
        raise SpecError(f"expected a size like '10MB', got {value!r}", field=field)
    if isinstance(value, int):
        size = value
        _finite(size, value, field)
    elif isinstance(value, str):
        parts = _split(value)
        if not parts or parts[1] not in _SIZE_UNITS:
            raise SpecError(
                f"cannot read size {value!r}",
                field=field,
                fix="use bytes or a unit among B, kB, MB, GB, KiB, MiB, GiB, e.g. '10MB'",
            )
        size = round(_finite(parts[0] * _SIZE_UNITS[parts[1]], value, field))
    else:
        raise SpecError(f"expected a size like '10MB', got {type(value).__name__}", field=field)
    if size < 0:
        raise SpecError(f"size must not be negative, got {value!r}", field=field)
    return size


def parse_percent(value: object, field: str = "percent") -> float:
    """A probability as a fraction 0..1 from a percentage: 2, 2.5, '2%', '0.5%'."""
    if isinstance(value, bool):
        raise SpecError(f"expected a percentage like 2 or '2%', got {value!r}", field=field)
    if isinstance(value, (int, float)):
        percent = _finite(value, value, field) if not isinstance(value, float) or not math.isnan(value) else value
    elif isinstance(value, str):
        match = re.fullmatch(_NUMBER + r"\s*%?", value.strip())
        if not match:
            raise SpecError(f"cannot read percentage {value!r}", field=field, fix="write e.g. 2 or '2%'")
        percent = float(match.group(1))
    else:
        raise SpecError(f"expected a percentage, got {type(value).__name__}", field=field)
    if not 0 <= percent <= 100:
        raise SpecError(
            f"percentage must be within 0..100, got {value!r}",
            field=field,
            fix="percentages are written 0 to 100, e.g. 2 for 2 %",
        )
    return percent / 100.0


def format_rate(bits_per_second: float) -> str:
    """Human form of a rate, also valid tc syntax: 20000000 -> '20mbit'."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:g}{unit}"
    return f"{bits_per_second:g}bit"


def format_time(seconds: float) -> str:
    """Human form of a duration, also valid tc syntax: 0.01 -> '10ms'."""
    if seconds == 0:
        return "0ms"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{round(seconds / scale, 6):g}{unit}"
    return f"{round(seconds / 1e-9):g}ns"
