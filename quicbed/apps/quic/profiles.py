"""Transport profiles: named sets of QUIC transport knobs for quicbed's aioquic endpoints.

A profile resolves to a flat dict of knob values (:meth:`TransportProfile.knobs`) that goes
into every result record, so a run always says exactly how its transport behaved. The
built-in profiles (``aioquic``, ``quic``, ``bquic``) live in ``profiles.yaml`` beside this
module; users add their own in files of the same shape (``--profiles-file``), usually by
extending a built-in one and changing a knob or two::

    version: 1
    profiles:
      bquic-paced:
        extends: bquic
        description: BQUIC with pacing back on
        pacing: true

Run ``python -m quicbed.apps.quic.profiles --list-knobs`` for every knob.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from quicbed.errors import QuicbedError, SpecError
from quicbed.spec.units import format_time, parse_time

BUILTIN_PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
FILE_VERSION = 1
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")
# The transport parameter max_ack_delay must be below 2^14 ms (RFC 9000 section 18.2).
MAX_ACK_DELAY_LIMIT = 2**14 / 1000.0
# ACK every this many ack-eliciting packets before decimation starts (RFC 9000 13.2.2).
ACK_EVERY_BEFORE_DECIMATION = 2
# What the ACK knobs mean when quicbed's ACK scheduler is on and a profile leaves them out.
DEFAULT_MAX_ACK_DELAY = 0.025

_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_META_KEYS = ("extends", "description")


@dataclass(frozen=True)
class TransportProfile:
    """One transport profile. Knob defaults are aioquic's behaviour as shipped."""

    name: str
    description: str = ""
    source: str = ""
    congestion_control: str = "reno"
    ack_every: int | None = None
    ack_decimation_after: int = 0
    max_ack_delay: float | None = None
    ack_delay_rtt_fraction: float | None = None
    immediate_ack_on_gap: bool = False
    pacing: bool = True
    slow_start_exit_rtt_increase: float | None = None
    loss_time_threshold: float = 9 / 8
    loss_packet_threshold: int = 3
    initial_window: int | None = None
    mtu_discovery: bool | None = None
    pacing_burst: int | None = None

    @property
    def native_acks(self) -> bool:
        """Whether aioquic schedules ACKs itself (quicbed's ACK scheduler is off)."""
        return self.ack_every is None

    def knobs(self) -> dict[str, Any]:
        """The flat knob dict that result records carry (SI units: seconds, fractions)."""
        return {name: getattr(self, name) for name in KNOB_NAMES}

    def record(self) -> dict[str, Any]:
        """``{"profile": name, "knobs": {...}}`` for result records."""
        return {"profile": self.name, "knobs": self.knobs()}

    def ack_delay(self, min_rtt: float | None) -> float:
        """The delayed-ACK timeout of quicbed's scheduler given the receiver's min RTT."""
        delay = self.max_ack_delay if self.max_ack_delay is not None else DEFAULT_MAX_ACK_DELAY
        if self.ack_delay_rtt_fraction is not None and min_rtt is not None and math.isfinite(min_rtt):
            delay = min(delay, self.ack_delay_rtt_fraction * min_rtt)
        return delay

    def with_knobs(self, overrides: Mapping[str, Any], *, source: str = "override") -> TransportProfile:
        """A copy with knobs changed; values are parsed like the YAML file's."""
        if not overrides:
            return self
        changes = {
            str(key): _parse_knob(str(key), raw, field=str(key), source=source) for key, raw in overrides.items()
        }
        return _build(
            self.name, _merge(self.knobs(), changes), description=self.description, source=self.source, where=source
        )


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str
    doc: str
    parse: Callable[[Any, str], Any]


def _fraction(
    minimum: float, maximum: float | None = None, include_minimum: bool = False
) -> Callable[[Any, str], float]:
    def parse(value: Any, field: str) -> float:
        number: float
        if isinstance(value, bool):
            raise SpecError(f"expected a number or a fraction like '9/8', got {value!r}", field=field)
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(Fraction(value.replace(" ", "")))
            except (ValueError, ZeroDivisionError):
                raise SpecError(
                    f"cannot read {value!r} as a number",
                    field=field,
                    fix="write a number (1.125) or a fraction ('9/8')",
                ) from None
        else:
            raise SpecError(f"expected a number, got {type(value).__name__}", field=field)
        low_ok = number >= minimum if include_minimum else number > minimum
        if not math.isfinite(number) or not low_ok or (maximum is not None and number > maximum):
            bound = f"{'>=' if include_minimum else '>'} {minimum:g}"
            if maximum is not None:
                bound += f" and <= {maximum:g}"
            raise SpecError(f"{value!r} is out of range (must be {bound})", field=field)
        return number

    return parse


def _integer(minimum: int) -> Callable[[Any, str], int]:
    def parse(value: Any, field: str) -> int:
        if isinstance(value, str) and value.strip().lstrip("+").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"expected a whole number, got {value!r}", field=field)
        if value < minimum:
            raise SpecError(f"{value} is out of range (must be >= {minimum})", field=field)
        return value

    return parse


_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")


def _boolean(value: Any, field: str) -> bool:
    if isinstance(value, str) and value.lower() in _TRUE_WORDS + _FALSE_WORDS:
        return value.lower() in _TRUE_WORDS
    if not isinstance(value, bool):
        raise SpecError(f"expected true or false, got {value!r}", field=field)
    return value


def _duration(value: Any, field: str) -> float:
    seconds = parse_time(value, field=field, allow_zero=False)
    if seconds >= MAX_ACK_DELAY_LIMIT:
        raise SpecError(f"{format_time(seconds)} is too large (max_ack_delay must be < 16384ms)", field=field)
    return seconds


def _congestion_control(value: Any, field: str) -> str:
    if value not in CONGESTION_CONTROLS:
        raise SpecError(
            f"unknown congestion control {value!r}", field=field, fix=f"use one of {', '.join(CONGESTION_CONTROLS)}"
        )
    return str(value)


def _optional(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def parse_or_none(value: Any, field: str) -> Any:
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none")):
            return None
        return parse(value, field)

    return parse_or_none


KNOBS: tuple[Knob, ...] = (
    Knob(
        "congestion_control",
        "reno | cubic | bbr",
        "Congestion controller: NewReno or CUBIC (both get the slow-start exit rule of "
        "slow_start_exit_rtt_increase), or BBR (quinn only).",
        _congestion_control,
    ),
    Knob(
        "ack_every",
        "int >= 1 | null",
        "Receiver: send an ACK once this many ack-eliciting packets are unacknowledged. "
        "null = aioquic's own ACK scheduling (ACK 1 ms after the first unacknowledged "
        "packet); the other ACK knobs then must stay unset.",
        _optional(_integer(1)),
    ),
    Knob(
        "ack_decimation_after",
        "int >= 0",
        f"Receiver: ACK every {ACK_EVERY_BEFORE_DECIMATION} packets until this many "
        "ack-eliciting packets arrived, ack_every after that (keeps slow start fast).",
        _integer(0),
    ),
    Knob(
        "max_ack_delay",
        "duration | null",
        "Receiver: longest an ACK is delayed after the first unacknowledged ack-eliciting "
        "packet; also advertised to the peer (transport parameter). Default 25ms when "
        "ack_every is set.",
        _optional(_duration),
    ),
    Knob(
        "ack_delay_rtt_fraction",
        "fraction (0, 1] | null",
        "Receiver: cap the ACK delay at this fraction of the receiver's own min RTT "
        "(BQUIC: 1/4). aioquic clamps min RTT to >= 1 ms.",
        _optional(_fraction(0.0, 1.0)),
    ),
    Knob(
        "immediate_ack_on_gap",
        "bool",
        "Receiver: ACK at once when a packet arrives out of order or leaves a gap (RFC 9000 section 13.2.1).",
        _boolean,
    ),
    Knob(
        "pacing",
        "bool",
        "Sender: aioquic's token-bucket pacer (rate cwnd/srtt, bursts up to 16 packets); "
        "false sends whatever the congestion window allows back to back.",
        _boolean,
    ),
    Knob(
        "slow_start_exit_rtt_increase",
        "fraction > 0 | null",
        "Sender: leave slow start once the smallest of the last 5 RTT samples exceeds "
        "min RTT by more than this fraction of min RTT. null = aioquic's own monitor "
        "(>= 1/4 over five samples).",
        _optional(_fraction(0.0)),
    ),
    Knob(
        "loss_time_threshold",
        "fraction >= 1",
        "Sender: a packet is lost when a later one was acknowledged and it was sent more "
        "than this many RTTs ago (RFC 9002 kTimeThreshold, 9/8).",
        _fraction(1.0, include_minimum=True),
    ),
    Knob(
        "loss_packet_threshold",
        "int >= 1",
        "Sender: a packet is lost when a packet this many numbers later was acknowledged "
        "(RFC 9002 kPacketThreshold, 3).",
        _integer(1),
    ),
    Knob(
        "initial_window",
        "bytes >= 2400 | null",
        "Sender: the congestion window before the first loss or ACK, in bytes. null = RFC 9002's "
        "10 datagrams of 1200 bytes (12000); Linux TCP's is 10 segments (14480 bytes at a 1448-byte "
        "MSS).",
        _optional(_integer(2400)),
    ),
    Knob(
        "mtu_discovery",
        "bool | null",
        "Both: probe for larger datagrams than 1200 bytes after the handshake (DPLPMTUD, RFC 8899); "
        "the probes take room in the congestion window. null = the implementation's own (quinn: on; "
        "aioquic has none).",
        _optional(_boolean),
    ),
    Knob(
        "pacing_burst",
        "int >= 1 | null",
        "Sender: packets the pacer lets leave back to back before it waits for the next release "
        "(quinn only; its endpoint then runs on timers finer than a millisecond). null = the "
        "implementation's own: quinn 2 ms of the window, at least 10 packets.",
        _optional(_integer(1)),
    ),
)
KNOB_NAMES: tuple[str, ...] = tuple(knob.name for knob in KNOBS)
_KNOBS_BY_NAME = {knob.name: knob for knob in KNOBS}
_ACK_SCHEDULER_KNOBS = ("ack_decimation_after", "max_ack_delay", "ack_delay_rtt_fraction", "immediate_ack_on_gap")


def _parse_knob(key: str, raw: Any, *, field: str, source: str) -> Any:
    knob = _KNOBS_BY_NAME.get(key)
    if knob is None:
        raise SpecError(f"unknown knob {key!r}", field=field, source=source, fix=f"knobs are: {', '.join(KNOB_NAMES)}")
    try:
        return knob.parse(raw, field)
    except SpecError as error:
        raise error.located(source) from None


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` applied; switching the ACK scheduler off (ack_every null)
    also resets the ACK knobs the change does not set itself."""
    values = dict(base)
    values.update(changes)
    if "ack_every" in changes and changes["ack_every"] is None:
        defaults = TransportProfile(name="defaults")
        for key in _ACK_SCHEDULER_KNOBS:
            if key not in changes:
                values[key] = getattr(defaults, key)
    return values


def _build(name: str, values: Mapping[str, Any], *, description: str, source: str, where: str) -> TransportProfile:
    """Check the knobs together and fill the ACK scheduler's defaults."""
    knobs = dict(values)
    field = f"profiles.{name}"
    if knobs.get("ack_every") is None:
        defaults = TransportProfile(name=name)
        for key in _ACK_SCHEDULER_KNOBS:
            if knobs.get(key, getattr(defaults, key)) != getattr(defaults, key):
                raise SpecError(
                    f"{key} needs quicbed's ACK scheduler, which is off (ack_every is null)",
                    field=f"{field}.{key}",
                    source=where,
                    fix="set ack_every (2 is RFC 9000's rule) or leave the knob out",
                )
    elif knobs.get("max_ack_delay") is None:
        knobs["max_ack_delay"] = DEFAULT_MAX_ACK_DELAY
    return TransportProfile(name=name, description=description, source=source, **knobs)


def _read_file(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"cannot read profiles file: {error.strerror}", source=source) from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise SpecError(f"not valid YAML: {getattr(error, 'problem', error)}", source=where) from None
    if not isinstance(document, dict):
        raise SpecError(
            "a profiles file is a mapping with 'version' and 'profiles'",
            source=source,
            fix="start the file with 'version: 1' and 'profiles:'",
        )
    unknown = set(document) - {"version", "profiles"}
    if unknown:
        raise SpecError(
            f"unknown top-level key(s) {', '.join(sorted(map(str, unknown)))}",
            source=source,
            fix="only 'version' and 'profiles' are allowed",
        )
    if document.get("version") != FILE_VERSION:
        raise SpecError(
            f"unsupported version {document.get('version')!r}",
            field="version",
            source=source,
            fix=f"write 'version: {FILE_VERSION}'",
        )
    profiles = document.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        raise SpecError("'profiles' must map profile names to their knobs", field="profiles", source=source)
    return profiles


def load_profiles(extra_files: Iterable[str | Path] = (), *, builtin: bool = True) -> dict[str, TransportProfile]:
    """All profiles: the built-in file first, then each extra file in order.

    A profile may extend one defined earlier in the same file or in a file before it.
    Redefining a name is an error (give the variant its own name and ``extends``).
    """
    files = ([BUILTIN_PROFILES_FILE] if builtin else []) + [Path(p) for p in extra_files]
    profiles: dict[str, TransportProfile] = {}
    for path in files:
        source = str(path)
        raw_profiles = _read_file(path)
        pending = {str(name): body for name, body in raw_profiles.items()}
        for name, body in pending.items():
            field = f"profiles.{name}"
            if not _PROFILE_NAME.fullmatch(name):
                raise SpecError(
                    f"invalid profile name {name!r}",
                    field=field,
                    source=source,
                    fix="use letters, digits and _ . + - (not starting with a symbol)",
                )
            if name in profiles:
                raise SpecError(
                    f"profile {name!r} is already defined in {profiles[name].source}",
                    field=field,
                    source=source,
                    fix=f"give it another name and 'extends: {name}'",
                )
            if body is None:
                body = {}
            if not isinstance(body, dict):
                raise SpecError("a profile is a mapping of knobs", field=field, source=source)
        for name in pending:
            _resolve(name, pending, profiles, source, chain=())
    return profiles


def _resolve(
    name: str, pending: Mapping[str, Any], done: dict[str, TransportProfile], source: str, chain: tuple[str, ...]
) -> TransportProfile:
    if name in done:
        return done[name]
    field = f"profiles.{name}"
    if name in chain:
        raise SpecError(
            f"profiles extend each other in a cycle: {' -> '.join(chain + (name,))}", field=field, source=source
        )
    body: dict[str, Any] = dict(pending[name] or {})
    parent_name = body.pop("extends", None)
    description = body.pop("description", "")
    if not isinstance(description, str):
        raise SpecError("description must be text", field=f"{field}.description", source=source)
    if parent_name is not None:
        parent_name = str(parent_name)
        if parent_name in pending:
            parent = _resolve(parent_name, pending, done, source, chain + (name,))
        elif parent_name in done:
            parent = done[parent_name]
        else:
            known = ", ".join(sorted(set(done) | set(pending)))
            raise SpecError(
                f"extends unknown profile {parent_name!r}",
                field=f"{field}.extends",
                source=source,
                fix=f"known profiles: {known}",
            )
        base = parent.knobs()
    else:
        base = TransportProfile(name=name).knobs()
    changes = {str(key): _parse_knob(str(key), raw, field=f"{field}.{key}", source=source) for key, raw in body.items()}
    profile = _build(
        name, _merge(base, changes), description=" ".join(description.split()), source=source, where=source
    )
    done[name] = profile
    return profile


def get_profile(
    name: str, extra_files: Iterable[str | Path] = (), overrides: Mapping[str, Any] | None = None
) -> TransportProfile:
    """Look a profile up by name and apply knob overrides (e.g. from ``--knob``)."""
    extra = list(extra_files)
    profiles = load_profiles(extra)
    if name not in profiles:
        files = ", ".join(str(p) for p in [BUILTIN_PROFILES_FILE, *extra])
        raise SpecError(
            f"unknown transport profile {name!r}",
            field="profile",
            source=files,
            fix=f"choose one of {', '.join(profiles)} or define it in a --profiles-file",
        )
    return profiles[name].with_knobs(overrides or {}, source="--knob")


def parse_knob_assignments(assignments: Sequence[str]) -> dict[str, Any]:
    """``["pacing=false", "ack_every=4"]`` -> ``{"pacing": False, "ack_every": 4}``."""
    result: dict[str, Any] = {}
    for text in assignments:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise SpecError(
                f"cannot read knob assignment {text!r}",
                field="--knob",
                fix="write KNOB=VALUE, e.g. --knob pacing=false",
            )
        try:
            parsed = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            parsed = value
        result[key.strip()] = parsed
    return result


def describe_knobs() -> str:
    """A plain-text table of the knobs, for --help and docs."""
    default = TransportProfile(name="aioquic")
    lines = []
    for knob in KNOBS:
        lines.append(f"{knob.name} ({knob.kind}; aioquic default: {getattr(default, knob.name)!r})")
        lines.append(f"    {knob.doc}")
    return "\n".join(lines)


def add_profile_arguments(parser: argparse.ArgumentParser, default: str = "quic") -> None:
    """The --profile/--profiles-file/--knob/--cc options that server and client share."""
    group = parser.add_argument_group("transport profile")
    group.add_argument(
        "--profile", default=default, help=f"transport profile name (default {default}); see --list-profiles"
    )
    group.add_argument(
        "--profiles-file",
        action="append",
        default=[],
        metavar="FILE",
        help="extra YAML file with profiles (repeatable)",
    )
    group.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="override one knob of the profile (repeatable), e.g. pacing=false",
    )
    group.add_argument(
        "--cc",
        choices=CONGESTION_CONTROLS,
        default=None,
        help="congestion control (shortcut for --knob congestion_control=...)",
    )


def profile_from_arguments(args: argparse.Namespace) -> TransportProfile:
    overrides = parse_knob_assignments(args.knob)
    if args.cc is not None:
        overrides["congestion_control"] = args.cc
    return get_profile(args.profile, args.profiles_file, overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.quic.profiles", description="List and show quicbed transport profiles."
    )
    parser.add_argument("--profiles-file", action="append", default=[], metavar="FILE")
    parser.add_argument("--list-knobs", action="store_true", help="describe every knob")
    parser.add_argument("--show", metavar="NAME", help="print a profile's resolved knobs as JSON")
    parser.add_argument("--knob", action="append", default=[], metavar="KNOB=VALUE")
    args = parser.parse_args(argv)
    try:
        if args.list_knobs:
            print(describe_knobs())
        elif args.show:
            profile = get_profile(args.show, args.profiles_file, parse_knob_assignments(args.knob))
            print(
                json.dumps({**profile.record(), "description": profile.description, "source": profile.source}, indent=2)
            )
        else:
            for profile in load_profiles(args.profiles_file).values():
                print(f"{profile.name:16} {profile.description}")
    except QuicbedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "ACK_EVERY_BEFORE_DECIMATION",
    "BUILTIN_PROFILES_FILE",
    "CONGESTION_CONTROLS",
    "KNOBS",
    "KNOB_NAMES",
    "TransportProfile",
    "add_profile_arguments",
    "describe_knobs",
    "get_profile",
    "load_profiles",
    "parse_knob_assignments",
    "profile_from_arguments",
]

if __name__ == "__main__":
    sys.exit(main())
