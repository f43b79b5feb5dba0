"""Everything quicbed does to aioquic beyond its public API, in one place.

aioquic has extension points for some knobs (``QuicConfiguration``,
``register_congestion_control``) and none for others. This module is the only one in
quicbed that touches aioquic's private attributes; ``tests/unit/test_aioquic_hooks.py``
checks each of them (:func:`check_internals`) so that a new aioquic release that moves
them fails loudly instead of silently measuring something else.

What is touched, per connection (never module-wide), and why:

* ACK scheduling (knobs ``ack_every``, ``ack_decimation_after``, ``max_ack_delay``,
  ``ack_delay_rtt_fraction``, ``immediate_ack_on_gap``). aioquic sets
  ``space.ack_at = now + 1 ms`` inside ``QuicConnection.receive_datagram`` for every
  ack-eliciting packet and has no every-N rule. The instance's ``receive_datagram`` is
  wrapped: after aioquic handled a datagram, :class:`AckScheduler` rewrites ``ack_at`` of
  the application space (now, or at the delayed-ACK deadline). ``_payload_received`` is
  wrapped to learn whether a packet was ack-eliciting, ``_write_ack_frame`` to learn when
  an ACK left. ``_serialize_transport_parameters`` is wrapped to advertise the profile's
  max_ack_delay instead of aioquic's fixed 25 ms.
* Pacing (``pacing``): the recovery's ``_pacer`` is replaced by :class:`NoPacer`
  (aioquic's own tests do the same to disable pacing).
* Slow-start exit (``slow_start_exit_rtt_increase``): a congestion controller registered
  through ``register_congestion_control`` subclasses aioquic's reno/cubic and replaces
  their ``_rtt_monitor`` by :class:`DelayIncreaseMonitor`; with ``initial_window`` it
  also sets the window its constructor starts from (public ``congestion_window``).
* Loss thresholds (``loss_time_threshold``, ``loss_packet_threshold``): aioquic reads the
  module globals ``K_TIME_THRESHOLD``/``K_PACKET_THRESHOLD`` in
  ``QuicPacketRecovery._detect_loss``. The connection's recovery gets its own copy of that
  function bound to a private globals dict holding the profile's thresholds; aioquic's
  module is never modified.
* Counters for the result records: ``on_packet_sent`` and ``_on_packets_lost`` of the
  recovery and the connection's ``datagrams_to_send`` are wrapped (counting only).
"""

from __future__ import annotations

import functools
import inspect
import math
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import aioquic
from aioquic import tls
from aioquic.buffer import Buffer
from aioquic.quic import recovery as aioquic_recovery
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.congestion import base as congestion_base
from aioquic.quic.congestion.base import K_GRANULARITY, register_congestion_control
from aioquic.quic.congestion.cubic import CubicCongestionControl
from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import pull_quic_transport_parameters, push_quic_transport_parameters
from aioquic.quic.recovery import QuicPacketPacer, QuicPacketRecovery

from quicbed.apps.quic.profiles import ACK_EVERY_BEFORE_DECIMATION, TransportProfile
from quicbed.errors import QuicbedError

# The aioquic releases these hooks were checked against (setup.py pins the same range).
SUPPORTED_AIOQUIC = ">=1.2,<1.8"
_SUPPORTED_MIN = (1, 2)
_SUPPORTED_BELOW = (1, 8)
# aioquic applies pacing when ``ack_at >= now`` even though the ACK is due: an ACK meant
# to go "now" is marked due this much earlier so the receiver's own pacer never holds it.
ACK_DUE_EPSILON = 1e-6
# The max_ack_delay aioquic advertises (milliseconds, fixed in its source).
AIOQUIC_ADVERTISED_MAX_ACK_DELAY_MS = 25
_APPLICATION_EPOCHS = (tls.Epoch.ZERO_RTT, tls.Epoch.ONE_RTT)
_CC_BASES: dict[str, type] = {"reno": RenoCongestionControl, "cubic": CubicCongestionControl}


class AioquicIncompatible(QuicbedError):
    """The installed aioquic lacks an internal quicbed's hooks rely on."""


def aioquic_version() -> str:
    try:
        return version("aioquic")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return str(getattr(aioquic, "__version__", "unknown"))


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def is_supported_version(text: str | None = None) -> bool:
    current = _version_tuple(text or aioquic_version())
    return _SUPPORTED_MIN <= current[:2] < _SUPPORTED_BELOW


# --------------------------------------------------------------------------- slow start


class DelayIncreaseMonitor:
    """Slow-start exit on delay increase, with a configurable threshold.

    Same interface and sampling as aioquic's ``QuicRttMonitor`` (at most one RTT sample
    per millisecond), different rule: exit once the smallest of the last ``samples``
    samples exceeds the smallest sample ever seen by more than ``rtt_increase`` times it.
    Taking the smallest of five makes a single jittery sample harmless.
    """

    def __init__(self, rtt_increase: float, samples: int = 5) -> None:
        if rtt_increase <= 0 or samples < 1:
            raise ValueError("rtt_increase must be > 0 and samples >= 1")
        self.rtt_increase = rtt_increase
        self.samples = samples
        self.min_rtt = math.inf
        self._recent: list[float] = []
        self._sample_time = -math.inf

    def is_rtt_increasing(self, *, now: float, rtt: float) -> bool:
        if now <= self._sample_time + K_GRANULARITY:
            return False
        self._sample_time = now
        self.min_rtt = min(self.min_rtt, rtt)
        self._recent.append(rtt)
        if len(self._recent) > self.samples:
            del self._recent[0]
        return len(self._recent) == self.samples and min(self._recent) > self.min_rtt * (1.0 + self.rtt_increase)


def congestion_control_name(profile: TransportProfile) -> str:
    """Register (once) and return the aioquic congestion-control name for a profile."""
    base_name = profile.congestion_control
    if profile.slow_start_exit_rtt_increase is None and profile.initial_window is None:
        return base_name
    return _register_variant(base_name, profile.slow_start_exit_rtt_increase, profile.initial_window)


@functools.cache
def _register_variant(base_name: str, rtt_increase: float | None, initial_window: int | None) -> str:
    """A controller with the profile's slow-start exit rule and initial window."""
    base_class = _CC_BASES[base_name]

    class Variant(base_class):  # type: ignore[misc, valid-type]  # mypy takes no base chosen at run time
        def __init__(self, *, max_datagram_size: int) -> None:
            super().__init__(max_datagram_size=max_datagram_size)
            if rtt_increase is not None:
                self._rtt_monitor = DelayIncreaseMonitor(rtt_increase)
            if initial_window is not None:
                self.congestion_window = initial_window

    Variant.__name__ = (
        base_class.__name__
        + ("SlowStartExit" if rtt_increase is not None else "")
        + (f"InitialWindow{initial_window}" if initial_window is not None else "")
    )
    Variant.__qualname__ = Variant.__name__
    name = (
        base_name
        + (f"+ssexit={rtt_increase:g}" if rtt_increase is not None else "")
        + (f"+iw={initial_window}" if initial_window is not None else "")
    )
    register_congestion_control(name, Variant)
    return name


def configure(configuration: QuicConfiguration, profile: TransportProfile) -> QuicConfiguration:
    """Put a profile's configuration-level knobs (congestion control) on a configuration."""
    from quicbed.apps.quic.implementations import quic_implementation

    quic_implementation("aioquic").require_supported(profile)
    configuration.congestion_control_algorithm = congestion_control_name(profile)
    return configuration


# --------------------------------------------------------------------------- pacing


class NoPacer(QuicPacketPacer):
    """A pacer that never holds a packet back."""

    def next_send_time(self, now: float) -> float | None:  # type: ignore[override]  # aioquic's returns None too
        return None

    def update_after_send(self, now: float) -> None:
        return None

    def update_rate(self, congestion_window: int, smoothed_rtt: float) -> None:
        return None


# --------------------------------------------------------------------------- loss thresholds


@functools.cache
def detect_loss_function(time_threshold: float, packet_threshold: int) -> Callable[..., None]:
    """aioquic's ``QuicPacketRecovery._detect_loss`` with its own threshold constants."""
    original = QuicPacketRecovery._detect_loss
    namespace = dict(original.__globals__)
    namespace["K_TIME_THRESHOLD"] = time_threshold
    namespace["K_PACKET_THRESHOLD"] = packet_threshold
    function = types.FunctionType(
        original.__code__, namespace, original.__name__, original.__defaults__, original.__closure__
    )
    function.__kwdefaults__ = original.__kwdefaults__
    function.__qualname__ = original.__qualname__
    return function


# --------------------------------------------------------------------------- ACK scheduling


@dataclass
class TransportCounters:
    """What the hooks count on one connection (all directions from this endpoint's view)."""

    datagrams_sent: int = 0
    datagrams_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    packets_sent: int = 0
    ack_eliciting_packets_sent: int = 0
    ack_only_packets_sent: int = 0  # not ack-eliciting: ACK (+PADDING), CONNECTION_CLOSE
    packets_received: int = 0
    ack_eliciting_packets_received: int = 0
    ack_frames_sent: int = 0
    packets_lost: int = 0
    packets_rescheduled: int = 0  # retransmitted on PTO without a congestion event
    immediate_acks: int = 0  # quicbed scheduler: ACK made due at once on reorder/gap
    threshold_acks: int = 0  # quicbed scheduler: ACK made due at once by ack_every


@dataclass
class AckScheduler:
    """quicbed's receiver-side ACK policy for the application packet space."""

    profile: TransportProfile
    counters: TransportCounters
    received: int = 0  # ack-eliciting application packets received in total
    pending: int = 0  # ... since the last ACK frame was written
    first_pending_at: float | None = None

    def on_ack_eliciting(self, *, space: Any, count: int, now: float, largest_before: int, min_rtt: float) -> None:
        """After a datagram carried ``count`` ack-eliciting application packets."""
        self.received += count
        if self.pending == 0 or self.first_pending_at is None:
            self.first_pending_at = now
        self.pending += count
        ack_every = self.profile.ack_every or 1
        if self.received <= self.profile.ack_decimation_after:
            ack_every = min(ack_every, ACK_EVERY_BEFORE_DECIMATION)
        largest = space.largest_received_packet
        # The first application packet cannot be out of order: aioquic numbers packets
        # across all packet spaces, so it seldom is number 0.
        disorder = largest_before >= 0 and (largest <= largest_before or largest > largest_before + 1)
        if self.profile.immediate_ack_on_gap and disorder:
            self.counters.immediate_acks += 1
            due = now
        elif self.pending >= ack_every:
            self.counters.threshold_acks += 1
            due = now
        else:
            due = self.first_pending_at + self.profile.ack_delay(min_rtt if math.isfinite(min_rtt) else None)
        space.ack_at = due - ACK_DUE_EPSILON

    def on_ack_sent(self) -> None:
        self.pending = 0
        self.first_pending_at = None


class ConnectionHooks:
    """The hooks installed on one ``QuicConnection``; see the module docstring."""

    def __init__(self, connection: QuicConnection, profile: TransportProfile) -> None:
        self.connection = connection
        self.profile = profile
        self.counters = TransportCounters()
        self.scheduler = None if profile.native_acks else AckScheduler(profile, self.counters)
        self._application_eliciting = 0
        self._install()

    # -- installation

    def _install(self) -> None:
        connection = self.connection
        loss = connection._loss
        if connection._configuration.congestion_control_algorithm != congestion_control_name(self.profile):
            raise ValueError("the configuration was not prepared with aioquic_hooks.configure() for this profile")
        if not self.profile.pacing:
            loss._pacer = NoPacer(max_datagram_size=connection._max_datagram_size)
        if (
            self.profile.loss_time_threshold != aioquic_recovery.K_TIME_THRESHOLD
            or self.profile.loss_packet_threshold != aioquic_recovery.K_PACKET_THRESHOLD
        ):
            detect = detect_loss_function(self.profile.loss_time_threshold, self.profile.loss_packet_threshold)
            loss._detect_loss = types.MethodType(detect, loss)  # type: ignore[method-assign]  # patching aioquic
        self._wrap(connection, "receive_datagram", self._receive_datagram)
        self._wrap(connection, "datagrams_to_send", self._datagrams_to_send)
        self._wrap(connection, "_payload_received", self._payload_received)
        self._wrap(connection, "_write_ack_frame", self._write_ack_frame)
        self._wrap(loss, "on_packet_sent", self._on_packet_sent)
        self._wrap(loss, "_on_packets_lost", self._on_packets_lost)
        advertised = self.advertised_max_ack_delay_ms()
        if advertised != AIOQUIC_ADVERTISED_MAX_ACK_DELAY_MS:
            self._wrap(
                connection,
                "_serialize_transport_parameters",
                functools.partial(self._serialize_transport_parameters, advertised),
            )

    @staticmethod
    def _wrap(target: Any, name: str, wrapper: Callable[..., Any]) -> None:
        original = getattr(target, name)
        setattr(target, name, functools.partial(wrapper, original))

    def advertised_max_ack_delay_ms(self) -> int:
        if self.profile.max_ack_delay is None:
            return AIOQUIC_ADVERTISED_MAX_ACK_DELAY_MS
        return max(1, math.ceil(round(self.profile.max_ack_delay * 1000, 6)))

    # -- wrappers (first argument: the original bound method)

    def _receive_datagram(self, original: Callable[..., None], data: bytes, addr: Any, now: float) -> None:
        self.counters.datagrams_received += 1
        self.counters.bytes_received += len(data)
        if self.scheduler is None:
            original(data, addr, now=now)
            return
        space = self.connection._spaces.get(tls.Epoch.ONE_RTT)
        largest_before = space.largest_received_packet if space is not None else -1
        self._application_eliciting = 0
        original(data, addr, now=now)
        if self._application_eliciting:
            self.scheduler.on_ack_eliciting(
                space=self.connection._spaces[tls.Epoch.ONE_RTT],
                count=self._application_eliciting,
                now=now,
                largest_before=largest_before,
                min_rtt=self.connection._loss._rtt_min,
            )

    def _datagrams_to_send(
        self, original: Callable[..., list[tuple[bytes, Any]]], now: float
    ) -> list[tuple[bytes, Any]]:
        datagrams = original(now=now)
        self.counters.datagrams_sent += len(datagrams)
        self.counters.bytes_sent += sum(len(data) for data, _ in datagrams)
        return datagrams

    def _payload_received(
        self, original: Callable[..., tuple[bool, bool]], context: Any, *args: Any, **kwargs: Any
    ) -> tuple[bool, bool]:
        result = original(context, *args, **kwargs)
        self.counters.packets_received += 1
        if result[0]:
            self.counters.ack_eliciting_packets_received += 1
            if context.epoch in _APPLICATION_EPOCHS:
                self._application_eliciting += 1
        return result

    def _write_ack_frame(self, original: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        self.counters.ack_frames_sent += 1
        space = kwargs["space"] if "space" in kwargs else args[1]
        if self.scheduler is not None and space is self.connection._spaces.get(tls.Epoch.ONE_RTT):
            self.scheduler.on_ack_sent()

    def _on_packet_sent(self, original: Callable[..., None], **kwargs: Any) -> None:
        packet = kwargs["packet"]
        self.counters.packets_sent += 1
        if packet.is_ack_eliciting:
            self.counters.ack_eliciting_packets_sent += 1
        else:
            self.counters.ack_only_packets_sent += 1
        original(**kwargs)

    def _on_packets_lost(self, original: Callable[..., None], **kwargs: Any) -> None:
        packets = list(kwargs["packets"])
        kwargs["packets"] = packets
        if kwargs.get("congestion_event", True):
            self.counters.packets_lost += len(packets)
        else:
            self.counters.packets_rescheduled += len(packets)
        original(**kwargs)

    def _serialize_transport_parameters(self, advertised_ms: int, original: Callable[[], bytes]) -> bytes:
        data = original()
        parameters = pull_quic_transport_parameters(Buffer(data=data))
        parameters.max_ack_delay = advertised_ms
        buf = Buffer(capacity=len(data) + 16)
        push_quic_transport_parameters(buf, parameters)
        return buf.data

    # -- reading state for result records

    def stats(self) -> dict[str, Any]:
        """Counters plus RTT and congestion state, in SI units (seconds, bytes)."""
        loss = self.connection._loss

        def seconds(value: float) -> float | None:
            return value if math.isfinite(value) and value > 0 else None

        counters = asdict(self.counters)
        received = counters["ack_eliciting_packets_received"]
        return {
            **counters,
            "ack_only_per_ack_eliciting_received": (counters["ack_only_packets_sent"] / received if received else None),
            "rtt_min": seconds(loss._rtt_min),
            "rtt_smoothed": seconds(loss._rtt_smoothed),
            "rtt_latest": seconds(loss._rtt_latest),
            "rtt_variance": loss._rtt_variance,
            "cwnd": loss.congestion_window,
            "bytes_in_flight": loss.bytes_in_flight,
            "ssthresh": loss._cc.ssthresh,
            "congestion_control": type(loss._cc).__name__,
            "pacer": type(loss._pacer).__name__,
        }


def install(connection: QuicConnection, profile: TransportProfile) -> ConnectionHooks:
    """Apply a profile to a connection (before its first packet) and start counting."""
    require_compatible()
    return ConnectionHooks(connection, profile)


# --------------------------------------------------------------------------- self-check


def _names(function: Any) -> set[str]:
    """Global, attribute and keyword-argument names a function's code refers to."""
    code = getattr(function, "__code__", None)
    return _code_names(code) if code is not None else set()


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested comprehensions and lambdas
            names |= _code_names(const)
        elif isinstance(const, tuple):  # keyword names of calls
            names |= {item for item in const if isinstance(item, str)}
    return names


def _parameters(function: Any) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


def check_internals() -> list[str]:
    """Problems with the aioquic internals the hooks rely on (empty when all is well)."""
    problems: list[str] = []

    def expect(condition: bool, what: str) -> None:
        if not condition:
            problems.append(what)

    def expect_method(
        cls: type, name: str, parameters: list[str], uses: frozenset[str] | set[str] = frozenset()
    ) -> None:
        method = getattr(cls, name, None)
        if not callable(method):
            problems.append(f"{cls.__name__}.{name} is missing")
            return
        found = _parameters(method)
        expect(
            found[: len(parameters)] == parameters, f"{cls.__name__}.{name} takes {found}, expected {parameters} first"
        )
        missing = uses - _names(method)
        expect(not missing, f"{cls.__name__}.{name} no longer refers to {sorted(missing)}")

    # ACK scheduling happens inside receive_datagram and is read by _write_application
    expect_method(
        QuicConnection,
        "receive_datagram",
        ["data", "addr", "now"],
        {"ack_at", "_ack_delay", "_payload_received", "largest_received_packet"},
    )
    expect_method(QuicConnection, "datagrams_to_send", ["now"])
    expect_method(QuicConnection, "_payload_received", ["context", "plain"])
    expect_method(QuicConnection, "_write_ack_frame", ["builder", "space", "now"], {"ack_at"})
    expect_method(
        QuicConnection,
        "_write_application",
        ["builder", "network_path", "now"],
        {"ack_at", "_write_ack_frame", "_pacer", "next_send_time", "update_after_send"},
    )
    expect_method(QuicConnection, "_serialize_transport_parameters", [], {"max_ack_delay"})
    # loss detection and recovery
    expect_method(QuicPacketRecovery, "_detect_loss", ["now", "space"], {"K_TIME_THRESHOLD", "K_PACKET_THRESHOLD"})
    detect = getattr(QuicPacketRecovery, "_detect_loss", None)
    expect(detect is not None and not detect.__code__.co_freevars, "QuicPacketRecovery._detect_loss became a closure")
    expect(
        hasattr(aioquic_recovery, "K_TIME_THRESHOLD") and hasattr(aioquic_recovery, "K_PACKET_THRESHOLD"),
        "aioquic.quic.recovery no longer defines K_TIME_THRESHOLD/K_PACKET_THRESHOLD",
    )
    expect_method(QuicPacketRecovery, "on_packet_sent", ["packet", "space"])
    expect_method(QuicPacketRecovery, "_on_packets_lost", [])
    lost = getattr(QuicPacketRecovery, "_on_packets_lost", None)
    if lost is not None:
        expect(
            {"now", "packets", "space"} <= set(_parameters(lost)),
            "QuicPacketRecovery._on_packets_lost lost its now/packets/space parameters",
        )
    expect_method(QuicPacketRecovery, "on_ack_received", [], {"on_rtt_measurement", "_rtt_min"})
    # pacer
    expect_method(QuicPacketPacer, "next_send_time", ["now"])
    expect_method(QuicPacketPacer, "update_after_send", ["now"])
    expect_method(QuicPacketPacer, "update_rate", ["congestion_window", "smoothed_rtt"])
    # slow start
    expect(
        callable(getattr(congestion_base, "register_congestion_control", None)),
        "aioquic.quic.congestion.base.register_congestion_control is missing",
    )
    for name, cc_class in _CC_BASES.items():
        expect_method(cc_class, "on_rtt_measurement", ["now", "rtt"], {"_rtt_monitor", "is_rtt_increasing"})
        try:
            instance = cc_class(max_datagram_size=1200)
            expect(hasattr(instance, "_rtt_monitor"), f"{name} has no _rtt_monitor")
        except Exception as error:  # noqa: BLE001 - report whatever broke
            problems.append(f"{name} cannot be created: {error}")
    expect_method(congestion_base.QuicRttMonitor, "is_rtt_increasing", ["now", "rtt"])
    # instance attributes, on a client connection that never touches the network
    try:
        configuration = QuicConfiguration(is_client=True)
        connection = QuicConnection(configuration=configuration)
        connection.connect(("127.0.0.1", 4433), now=0.0)
        loss = connection._loss
        for attribute in (
            "_pacer",
            "_cc",
            "_rtt_min",
            "_rtt_smoothed",
            "_rtt_latest",
            "_rtt_variance",
            "congestion_window",
            "bytes_in_flight",
        ):
            expect(hasattr(loss, attribute), f"QuicPacketRecovery has no {attribute}")
        expect(
            isinstance(getattr(loss, "_pacer", None), QuicPacketPacer),
            "QuicPacketRecovery._pacer is not a QuicPacketPacer",
        )
        expect(hasattr(connection, "_max_datagram_size"), "QuicConnection has no _max_datagram_size")
        expect(getattr(connection, "_ack_delay", None) == K_GRANULARITY, "QuicConnection._ack_delay is no longer 1 ms")
        space = getattr(connection, "_spaces", {}).get(tls.Epoch.ONE_RTT)
        expect(
            space is not None and hasattr(space, "ack_at") and hasattr(space, "largest_received_packet"),
            "QuicConnection._spaces[ONE_RTT] lacks ack_at/largest_received_packet",
        )
        data = connection._serialize_transport_parameters()
        parameters = pull_quic_transport_parameters(Buffer(data=data))
        expect(
            parameters.max_ack_delay == AIOQUIC_ADVERTISED_MAX_ACK_DELAY_MS,
            f"aioquic advertises max_ack_delay {parameters.max_ack_delay}, expected 25",
        )
        buf = Buffer(capacity=len(data) + 16)
        push_quic_transport_parameters(buf, parameters)
        expect(buf.data == data, "transport parameters do not survive a pull/push round trip")
    except Exception as error:  # noqa: BLE001 - report whatever broke
        problems.append(f"cannot inspect a QuicConnection: {type(error).__name__}: {error}")
    return problems


@functools.lru_cache(maxsize=1)
def _compatibility_problems() -> tuple[str, ...]:
    return tuple(check_internals())


def require_compatible() -> None:
    """Raise AioquicIncompatible if the installed aioquic breaks the hooks' assumptions."""
    problems = _compatibility_problems()
    if problems:
        raise AioquicIncompatible(
            f"aioquic {aioquic_version()} is incompatible with quicbed's transport hooks "
            f"(supported: aioquic{SUPPORTED_AIOQUIC}): "
            + "; ".join(problems)
            + ". Fix: pip install 'aioquic"
            + SUPPORTED_AIOQUIC
            + "'"
        )


__all__ = [
    "ACK_DUE_EPSILON",
    "AckScheduler",
    "AioquicIncompatible",
    "ConnectionHooks",
    "DelayIncreaseMonitor",
    "NoPacer",
    "SUPPORTED_AIOQUIC",
    "TransportCounters",
    "aioquic_version",
    "check_internals",
    "configure",
    "congestion_control_name",
    "detect_loss_function",
    "install",
    "is_supported_version",
    "require_compatible",
]
