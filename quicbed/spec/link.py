"""Links: wired (netem/tbf impairments or a delivery trace, per direction) and wireless
(802.11 parameters)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from quicbed.errors import SpecError
from quicbed.spec.loss import LossModel, parse_loss
from quicbed.spec.units import parse_percent, parse_rate, parse_size, parse_time
from quicbed.traces.format import DeliveryTrace, load_trace

JITTER_DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")


@dataclass(frozen=True)
class Slot:
    """netem ``slot``: packets leave in bursts at slot boundaries (a crude bursty-MAC model)."""

    min_delay: float
    max_delay: float
    packets: int | None = None
    bytes: int | None = None


@dataclass(frozen=True)
class Shape:
    """What one direction of a wired link does to packets. SI units; fractions for probabilities."""

    rate: float | None = None
    delay: float = 0.0
    jitter: float = 0.0
    jitter_distribution: str = "uniform"
    loss: LossModel | None = None
    corrupt: float = 0.0
    reorder: float = 0.0
    reorder_gap: int | None = None
    duplicate: float = 0.0
    queue_limit: int | None = None
    #: token-bucket depth in bytes for the rate limit (default: see quicbed.backends.tc.tbf_burst)
    burst: int | None = None
    slot: Slot | None = None
    #: Mahimahi delivery trace: the capacity varies as the trace says (instead of rate; ns3 only)
    trace: DeliveryTrace | None = None

    def needs_netem(self) -> bool:
        """Whether this direction needs the netem qdisc (rate and queue alone need only tbf)."""
        return any((self.delay, self.jitter, self.loss, self.corrupt, self.reorder, self.duplicate, self.slot))

    def is_ideal(self) -> bool:
        return self == Shape()


SHAPE_FIELDS = tuple(f.name for f in fields(Shape))


#: Mininet's TCLink names, and what quicbed calls them
MININET_NAMES = {
    "bw": "quicbed calls it rate, with a unit: rate='10mbit' (Mininet's bw is in Mbit/s)",
    "max_queue_size": "quicbed calls it queue_limit (packets)",
    "use_htb": "quicbed shapes with tbf (and netem); there is no choice to make",
}


def parse_shape(params: dict[str, Any], where: str, base: Shape | None = None) -> Shape:
    """Build a Shape from user parameters (strings with units, percentages), over ``base``."""
    values: dict[str, Any] = {}
    for key, raw in params.items():
        name = f"{where}.{key}"
        if key not in SHAPE_FIELDS:
            hint = MININET_NAMES.get(key)
            raise SpecError(
                f"unknown link parameter {key!r}", field=name, fix=hint or f"wired links take {', '.join(SHAPE_FIELDS)}"
            )
        if raw is None:
            values[key] = getattr(Shape(), key)
            continue
        if key == "rate":
            values[key] = parse_rate(raw, name)
        elif key in ("delay", "jitter"):
            values[key] = parse_time(raw, name)
        elif key == "jitter_distribution":
            if raw not in JITTER_DISTRIBUTIONS:
                raise SpecError(
                    f"unknown jitter distribution {raw!r}",
                    field=name,
                    fix=f"use one of {', '.join(JITTER_DISTRIBUTIONS)}",
                )
            values[key] = raw
        elif key == "loss":
            values[key] = parse_loss(raw, name)
        elif key in ("corrupt", "reorder", "duplicate"):
            values[key] = parse_percent(raw, name)
        elif key == "reorder_gap":
            values[key] = _positive_int(raw, name)
        elif key == "queue_limit":
            values[key] = _positive_int(raw, name)
        elif key == "burst":
            values[key] = parse_size(raw, name)
        elif key == "slot":
            values[key] = _parse_slot(raw, name)
        elif key == "trace":
            values[key] = load_trace(raw, name)
        else:
            raise SpecError(
                f"unknown link parameter {key!r}", field=name, fix=f"wired links take {', '.join(SHAPE_FIELDS)}"
            )
    shape = replace(base or Shape(), **values)
    if shape.trace and (shape.rate or shape.burst):
        raise SpecError(
            "a delivery trace sets the link's capacity; it cannot have a rate (or burst) too",
            field=f"{where}.{'trace' if 'trace' in values else 'rate'}",
            fix="drop rate (and burst) from this direction, or drop the trace",
        )
    if shape.reorder and not shape.delay:
        raise SpecError(
            "reordering needs a delay (netem reorders by sending some packets at once)",
            field=f"{where}.reorder",
            fix="give the link a delay, e.g. delay='10ms'",
        )
    if shape.jitter and shape.jitter > shape.delay and shape.jitter_distribution != "uniform":
        raise SpecError(
            "jitter larger than the delay would need negative delays",
            field=f"{where}.jitter",
            fix="keep jitter <= delay",
        )
    return shape


def _positive_int(raw: Any, name: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise SpecError(f"expected a positive whole number, got {raw!r}", field=name)
    return raw


def _parse_slot(raw: Any, name: str) -> Slot:
    if isinstance(raw, Slot):
        return raw
    if isinstance(raw, str):
        raw = {"min_delay": raw}
    if not isinstance(raw, dict) or "min_delay" not in raw:
        raise SpecError(
            f"cannot read slot {raw!r}",
            field=name,
            fix="write slot={'min_delay': '1ms', 'max_delay': '4ms', 'packets': 32}",
        )
    unknown = set(raw) - {"min_delay", "max_delay", "packets", "bytes"}
    if unknown:
        raise SpecError(
            f"unknown slot option(s) {sorted(unknown)}", field=name, fix="use min_delay, max_delay, packets, bytes"
        )
    low = parse_time(raw["min_delay"], f"{name}.min_delay", allow_zero=False)
    high = parse_time(raw.get("max_delay", raw["min_delay"]), f"{name}.max_delay", allow_zero=False)
    if high < low:
        raise SpecError("max_delay is below min_delay", field=f"{name}.max_delay")
    return Slot(
        low,
        high,
        _positive_int(raw["packets"], f"{name}.packets") if "packets" in raw else None,
        parse_size(raw["bytes"], f"{name}.bytes") if "bytes" in raw else None,
    )


@dataclass
class WiredLink:
    """A full-duplex cable between two nodes; ``forward`` shapes node1->node2, ``backward`` the reverse."""

    node1: str
    node2: str
    name: str
    forward: Shape = field(default_factory=Shape)
    backward: Shape = field(default_factory=Shape)
    addr1: str | None = None
    addr2: str | None = None

    kind = "wired"

    def needs_netem(self) -> bool:
        return self.forward.needs_netem() or self.backward.needs_netem()

    def ends(self) -> tuple[str, str]:
        return self.node1, self.node2


STANDARDS = {
    "802.11g": ("2.4GHz",),
    "802.11a": ("5GHz",),
    "802.11n": ("2.4GHz", "5GHz"),
    "802.11ac": ("5GHz",),
    "802.11ax": ("2.4GHz", "5GHz", "6GHz"),
}
CHANNELS = {
    "2.4GHz": tuple(range(1, 15)),
    "5GHz": (
        36,
        40,
        44,
        48,
        52,
        56,
        60,
        64,
        100,
        104,
        108,
        112,
        116,
        120,
        124,
        128,
        132,
        136,
        140,
        144,
        149,
        153,
        157,
        161,
        165,
    ),
    # 802.11ax-2021 27.3.23.2: the 20 MHz channels of 5925-7125 MHz (U-NII-5 to -8)
    "6GHz": tuple(range(1, 234, 4)),
}
WIDTHS = {
    "802.11g": (20,),
    "802.11a": (20,),
    "802.11n": (20, 40),
    "802.11ac": (20, 40, 80, 160),
    "802.11ax": (20, 40, 80, 160),
}
#: the widest channel of the 2.4 GHz band
WIDEST_2_4GHZ = 40
MAX_MCS = {"802.11n": 31, "802.11ac": 9, "802.11ax": 11}
#: the standards whose radios aggregate (A-MPDU), use QoS and take spatial streams
HT_STANDARDS = ("802.11n", "802.11ac", "802.11ax")
#: guard intervals in ns, by name or duration: HT/VHT's long and short, HE's three
GUARD_INTERVALS = {"802.11n": (800, 400), "802.11ac": (800, 400), "802.11ax": (800, 1600, 3200)}
GUARD_INTERVAL_NAMES = {"long": 800, "short": 400}
#: what ofdma= takes besides True and False
OFDMA_DIRECTIONS = ("downlink", "both")
#: 802.11ax BSS colours (6 bits; 0 means none)
MAX_BSS_COLOR = 63
#: the OBSS-PD levels the standard allows (dBm)
OBSS_PD_RANGE = (-82.0, -62.0)


def guard_interval_ns(value: str) -> int:
    """A guard interval in ns: 'long' is 800 (HT/VHT's long, HE's shortest), 'short' 400, or a
    duration such as '1.6us' (HE)."""
    named = GUARD_INTERVAL_NAMES.get(value)
    return named if named is not None else round(parse_time(value, "guard_interval") * 1e9)


RATE_CONTROLS = ("constant", "minstrel")
#: spatial streams (and antennas) the HT/VHT radios take
MAX_STREAMS = 4
#: VHT (width, streams, MCS) the standard leaves out, up to 4 streams (IEEE 802.11-2016
#: 21.5: the data or coded bits per symbol do not split evenly over the symbol or its encoders)
VHT_EXCLUDED = {(20, 1, 9), (20, 2, 9), (20, 4, 9), (80, 3, 6), (160, 3, 9)}
MAX_AMPDU_BYTES = {"802.11n": 65535, "802.11ac": 1048575, "802.11ax": 6500631}


QUEUE_KINDS = ("fifo", "codel", "fq_codel", "mac80211")
#: the kinds each setting applies to (besides kind and packets)
QUEUE_SETTING_KINDS = {
    "target": ("codel", "fq_codel", "mac80211"),
    "interval": ("codel", "fq_codel", "mac80211"),
    "mac_packets": ("codel", "fq_codel", "mac80211"),
    "flows": ("fq_codel", "mac80211"),
    "quantum": ("fq_codel", "mac80211"),
    "weight": ("mac80211",),
}
#: mac80211's own CoDel target for its station queues (20 ms; Linux's qdiscs use 5 ms)
MAC80211_TARGET = 0.020


@dataclass(frozen=True)
class RadioQueue:
    """A radio's transmit queue (ns3 backend; docs/ns3-backend.md, "Queue models").

    ``fifo`` is the MAC queue alone, dropping the newest frame when full (``packets`` long,
    the backend's 500 when None). ``codel`` and ``fq_codel`` put ns-3's queue discipline
    (``packets`` long: 1000 and 10240 when None, Linux's defaults) in front of a MAC queue of
    ``mac_packets`` (one block-ack window: what a driver has in flight to one receiver), which pulls from the
    discipline through the device's flow control. ``mac80211`` is Linux mac80211's queueing at
    an access point: an FQ-CoDel per station (``packets`` each, 8192 when None; target 20 ms
    when given none, ``quantum`` 300 bytes), served by an airtime deficit round robin
    (``weight`` of airtime per turn, 256 us) into a MAC queue of ``mac_packets`` MPDUs in all
    (64, one aggregate's worth), a block-ack window's worth per station at most."""

    kind: str = "fifo"
    packets: int | None = None
    target: float = 0.005
    interval: float = 0.1
    mac_packets: int = 64
    #: fq_codel and mac80211: flow queues, and bytes a flow sends per round (None: the MTU,
    #: or 300 for mac80211)
    flows: int = 1024
    quantum: int | None = None
    #: mac80211 only: airtime a station is given per round of the scheduler (s)
    weight: float = 256e-6

    @classmethod
    def parse(cls, value: Any, where: str) -> RadioQueue:
        """From a kind ('codel') or a mapping ({kind: codel, target: 5ms, ...})."""
        if isinstance(value, RadioQueue):
            return value
        if isinstance(value, str):
            value = {"kind": value}
        if not isinstance(value, dict):
            raise SpecError(
                f"queue must be a kind or a mapping, got {value!r}",
                field=where,
                fix="e.g. queue='fq_codel' or queue={'kind': 'codel', 'target': '5ms'}",
            )
        unknown = set(value) - {f.name for f in fields(cls)}
        if unknown:
            raise SpecError(
                f"unknown queue setting(s) {', '.join(sorted(map(str, unknown)))}",
                field=where,
                fix=f"queue settings are {', '.join(f.name for f in fields(cls))}",
            )
        kind = value.get("kind", "fifo")
        if kind not in QUEUE_KINDS:
            raise SpecError(
                f"unknown queue kind {kind!r}", field=f"{where}.kind", fix=f"use one of {', '.join(QUEUE_KINDS)}"
            )
        for name, kinds in QUEUE_SETTING_KINDS.items():
            if name in value and kind not in kinds:
                raise SpecError(
                    f"{name} does not apply to a {kind} queue",
                    field=f"{where}.{name}",
                    fix=f"leave {name} out, or use kind {' or '.join(kinds)}",
                )
        settings: dict[str, Any] = {"kind": kind}
        if kind == "mac80211":
            settings["target"] = MAC80211_TARGET
        for name in ("packets", "mac_packets", "flows", "quantum"):
            if value.get(name) is not None:
                number = value[name]
                if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                    raise SpecError(f"{name} must be a positive whole number, got {number!r}", field=f"{where}.{name}")
                settings[name] = number
        for name in ("target", "interval", "weight"):
            if name in value:
                settings[name] = parse_time(value[name], f"{where}.{name}", allow_zero=False)
        queue = cls(**settings)
        if queue.target >= queue.interval:
            raise SpecError(
                f"target {queue.target * 1e3:g} ms is not shorter than interval {queue.interval * 1e3:g} ms",
                field=f"{where}.target",
                fix="CoDel's target is a few percent of its interval (5ms of 100ms)",
            )
        return queue


@dataclass(frozen=True)
class Radio:
    """802.11 PHY/MAC settings shared by the two ends of a wireless link."""

    standard: str = "802.11n"
    band: str = "5GHz"
    channel: int = 36
    width: int = 20
    guard_interval: str = "long"
    mcs: int | None = 7
    rate_control: str = "constant"
    ampdu: bool = True
    ampdu_max_size: int | None = None
    amsdu: bool = False
    spatial_streams: int | None = None  # None: 802.11n's from its MCS (8-15: 2, ...), otherwise 1
    queue: RadioQueue | None = None  # None: the backend's FIFO
    #: 802.11ax APs: OFDMA (ns-3's round-robin multi-user scheduler): True or "downlink" for
    #: downlink multi-user PPDUs, "both" for uplink ones too (trigger frames, HE TB PPDUs)
    ofdma: bool | str = False
    #: 802.11ax: the colour (1-63) an AP gives its BSS; its stations learn it from its beacons
    bss_color: int | None = None
    #: 802.11ax spatial reuse: a PPDU of another BSS colour heard below this level (dBm, -82 to
    #: -62) is ignored, and the next transmission's power is capped by the standard's rule
    obss_pd: float | None = None

    @property
    def guard_interval_ns(self) -> int:
        return guard_interval_ns(self.guard_interval)

    @property
    def streams(self) -> int:
        """The spatial streams (and antennas) of the radio."""
        if self.spatial_streams is not None:
            return self.spatial_streams
        if self.standard == "802.11n" and self.rate_control == "constant" and self.mcs is not None:
            return self.mcs // 8 + 1
        return 1

    def check(self, where: str) -> None:
        for name, (kinds, text) in _RADIO_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise SpecError(f"{name} must be {text}, got {value!r}", field=f"{where}.{name}")
        if self.standard not in STANDARDS:
            raise SpecError(
                f"unknown standard {self.standard!r}",
                field=f"{where}.standard",
                fix=f"use one of {', '.join(STANDARDS)}",
            )
        if self.band not in STANDARDS[self.standard]:
            raise SpecError(
                f"{self.standard} does not use the {self.band} band",
                field=f"{where}.band",
                fix=f"use {' or '.join(STANDARDS[self.standard])}",
            )
        if self.channel not in CHANNELS[self.band]:
            raise SpecError(
                f"channel {self.channel} is not a {self.band} channel",
                field=f"{where}.channel",
                fix=f"use one of {', '.join(map(str, CHANNELS[self.band][:8]))}, ...",
            )
        if self.width not in WIDTHS[self.standard]:
            raise SpecError(
                f"{self.standard} has no {self.width} MHz channels",
                field=f"{where}.width",
                fix=f"use one of {', '.join(map(str, WIDTHS[self.standard]))}",
            )
        if self.band == "2.4GHz" and self.width > WIDEST_2_4GHZ:
            raise SpecError(
                f"the 2.4 GHz band has no {self.width} MHz channels",
                field=f"{where}.width",
                fix="use 20 or 40, or band='5GHz'",
            )
        self._check_guard_interval(where)
        if self.rate_control not in RATE_CONTROLS:
            raise SpecError(
                f"unknown rate control {self.rate_control!r}",
                field=f"{where}.rate_control",
                fix=f"use one of {', '.join(RATE_CONTROLS)}",
            )
        if self.rate_control == "constant":
            limit = MAX_MCS.get(self.standard)
            if limit is None:
                if self.mcs is not None:
                    raise SpecError(
                        f"{self.standard} has no MCS indexes",
                        field=f"{where}.mcs",
                        fix="leave mcs out (legacy rates) or use 802.11n/ac/ax",
                    )
            elif self.mcs is None or not 0 <= self.mcs <= limit:
                raise SpecError(
                    f"MCS {self.mcs!r} is outside 0..{limit} for {self.standard}",
                    field=f"{where}.mcs",
                    fix=f"give an MCS from 0 to {limit}, or rate_control='minstrel'",
                )
        if self.rate_control == "minstrel" and self.standard == "802.11ax":
            raise SpecError(
                "ns-3's Minstrel has no HE (802.11ax) rates",
                field=f"{where}.rate_control",
                fix="use rate_control='constant' with an mcs from 0 to 11",
            )
        if isinstance(self.ofdma, str) and self.ofdma not in OFDMA_DIRECTIONS:
            raise SpecError(
                f"unknown OFDMA direction {self.ofdma!r}",
                field=f"{where}.ofdma",
                fix="use True or 'downlink' (downlink only), 'both' (uplink too) or False",
            )
        if self.ofdma and self.standard != "802.11ax":
            raise SpecError(
                f"OFDMA is part of 802.11ax, not {self.standard}",
                field=f"{where}.ofdma",
                fix="use standard='802.11ax', or leave ofdma out",
            )
        self._check_spatial_reuse(where)
        self._check_streams(where)
        if self.ampdu_max_size is not None:
            limit = MAX_AMPDU_BYTES.get(self.standard, 0)
            if not 0 < self.ampdu_max_size <= limit:
                raise SpecError(
                    f"A-MPDU size {self.ampdu_max_size} is outside 1..{limit} bytes for {self.standard}",
                    field=f"{where}.ampdu_max_size",
                )

    def _check_guard_interval(self, where: str) -> None:
        name, allowed = f"{where}.guard_interval", GUARD_INTERVALS.get(self.standard, (800,))
        fix = (
            "use 'long' or 'short'"
            if self.standard in ("802.11n", "802.11ac")
            else "use '0.8us', '1.6us' or '3.2us' ('long' is 0.8us)"
            if self.standard == "802.11ax"
            else "leave guard_interval out: legacy OFDM has one guard interval"
        )
        try:
            value = self.guard_interval_ns
        except SpecError:
            raise SpecError(f"cannot read guard interval {self.guard_interval!r}", field=name, fix=fix) from None
        if value not in allowed:
            raise SpecError(f"{self.standard} has no {value} ns guard interval", field=name, fix=fix)

    def _check_spatial_reuse(self, where: str) -> None:
        for name in ("bss_color", "obss_pd"):
            if getattr(self, name) is not None and self.standard != "802.11ax":
                raise SpecError(
                    f"{name} is part of 802.11ax, not {self.standard}",
                    field=f"{where}.{name}",
                    fix=f"use standard='802.11ax', or leave {name} out",
                )
        if self.bss_color is not None and not 1 <= self.bss_color <= MAX_BSS_COLOR:
            raise SpecError(
                f"BSS colour {self.bss_color} is outside 1..{MAX_BSS_COLOR}",
                field=f"{where}.bss_color",
                fix=f"give each neighbouring AP its own colour from 1 to {MAX_BSS_COLOR}",
            )
        if self.obss_pd is None:
            return
        low, high = OBSS_PD_RANGE
        if not low <= self.obss_pd <= high:
            raise SpecError(
                f"OBSS-PD level {self.obss_pd:g} dBm is outside {low:g}..{high:g} dBm",
                field=f"{where}.obss_pd",
                fix="e.g. obss_pd=-72 (the standard allows -82 to -62)",
            )
        if self.bss_color is None:
            raise SpecError(
                "OBSS-PD tells other BSSs' frames apart by their colour, and this BSS has none",
                field=f"{where}.obss_pd",
                fix="give the AP a bss_color too (1-63)",
            )

    def _check_streams(self, where: str) -> None:
        streams, name = self.spatial_streams, f"{where}.spatial_streams"
        if streams is None:
            return
        if self.standard not in MAX_MCS:
            if streams != 1:
                raise SpecError(
                    f"{self.standard} has one spatial stream, not {streams}",
                    field=name,
                    fix="leave spatial_streams out, or use 802.11n/ac/ax",
                )
            return
        if not 1 <= streams <= MAX_STREAMS:
            raise SpecError(
                f"{streams} spatial streams is outside 1..{MAX_STREAMS}", field=name, fix=f"give 1 to {MAX_STREAMS}"
            )
        if self.rate_control != "constant" or self.mcs is None:
            return
        if self.standard == "802.11n" and streams != self.mcs // 8 + 1:
            first = (streams - 1) * 8
            raise SpecError(
                f"802.11n MCS {self.mcs} has {self.mcs // 8 + 1} spatial stream(s), not {streams}",
                field=name,
                fix=f"for {streams} streams give mcs {first}-{first + 7} (the MCS "
                "index says the streams in 802.11n), or leave spatial_streams out",
            )
        if self.standard == "802.11ac" and (self.width, streams, self.mcs) in VHT_EXCLUDED:
            raise SpecError(
                f"802.11ac has no MCS {self.mcs} with {streams} spatial stream(s) at {self.width} MHz",
                field=name,
                fix=f"use another MCS, width or stream count (left out: "
                f"{', '.join(f'{w} MHz x{n} MCS {m}' for w, n, m in sorted(VHT_EXCLUDED))})",
            )


RADIO_FIELDS = tuple(f.name for f in fields(Radio))
#: what each radio setting may hold, and how to say it
_RADIO_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "standard": ((str,), "a name like '802.11n'"),
    "band": ((str,), "'2.4GHz', '5GHz' or '6GHz'"),
    "channel": ((int,), "a channel number"),
    "width": ((int,), "a width in MHz"),
    "guard_interval": ((str,), "'long', 'short' or a duration like '1.6us'"),
    "mcs": ((int, type(None)), "an MCS index or None"),
    "rate_control": ((str,), "'constant' or 'minstrel'"),
    "ampdu": ((bool,), "True or False"),
    "ampdu_max_size": ((int, type(None)), "a size in bytes or None"),
    "amsdu": ((bool,), "True or False"),
    "spatial_streams": ((int, type(None)), "a number of streams (1-4) or None"),
    "queue": ((RadioQueue, type(None)), "a queue kind or mapping (read with RadioQueue.parse)"),
    "ofdma": ((bool, str), "True, False, 'downlink' or 'both'"),
    "bss_color": ((int, type(None)), "a colour from 1 to 63 or None"),
    "obss_pd": ((int, float, type(None)), "a level in dBm (-82 to -62) or None"),
}


@dataclass
class WirelessLink:
    """An 802.11 association (station-AP) or mesh peering (mesh point-mesh point)."""

    node1: str
    node2: str
    name: str
    radio: Radio = field(default_factory=Radio)
    distance: float | None = None  # metres; otherwise from node positions
    loss: float = 0.0  # fixed frame error rate on top of the channel model (fraction)
    addr1: str | None = None
    addr2: str | None = None

    kind = "wireless"

    def needs_netem(self) -> bool:
        return False

    def ends(self) -> tuple[str, str]:
        return self.node1, self.node2


Link = WiredLink | WirelessLink
