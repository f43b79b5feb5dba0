"""What Mininet-WiFi is asked to build for a resolved Topology (pure, unit-tested)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from quicbed.errors import BackendError
from quicbed.spec.link import HT_STANDARDS, Radio, WiredLink, WirelessLink
from quicbed.spec.node import AccessPoint, Host, MeshPoint, Station, Switch
from quicbed.spec.resolve import ResolvedTopology
from quicbed.spec.topology import Topology

WMEDIUMD_MODES = ("interference", "snr", "error_prob")


@dataclass
class MininetWifiOptions:
    """How Mininet-WiFi realises the radios."""

    #: simulate the medium with wmediumd (positions, propagation, interference) instead of
    #: Mininet-WiFi's tc-based link shaping
    wmediumd: bool = False
    #: wmediumd mode: interference (positions + propagation), snr, error_prob
    wmediumd_mode: str = "interference"
    #: Mininet-WiFi propagation model (friis, logDistance, logNormalShadowing, ...) and exponent
    propagation_model: str | None = None
    propagation_exp: float | None = None
    #: regulatory domain set before radios start (5 GHz channels are no-IR in the world domain)
    country: str = "US"
    #: start a private Open vSwitch when none runs: None = only inside the microVM
    private_ovs: bool | None = None
    association_timeout_s: float = 90.0
    #: a station not associated after this many seconds gets its connect re-issued (scan on the
    #: AP's channel, then connect), and again every as many seconds until association_timeout_s:
    #: Mininet-WiFi asks each station to connect once and never retries, so a failed attempt
    #: (scan missed the AP, authentication timed out: seen under wmediumd in the slow microVM)
    #: leaves the station unassociated for good. 0: never
    association_retry_s: float = 30.0
    mesh_timeout_s: float = 90.0
    stop_timeout_s: float = 90.0
    #: a roaming station's background scanning, in wpa_supplicant's own syntax
    #: ``simple:SHORT_S:THRESHOLD_DBM:LONG_S``: below the threshold it scans every SHORT_S
    #: seconds (else every LONG_S) and moves to a stronger AP of its network when it finds one
    bgscan: str = "simple:2:-65:10"
    #: how often a moving station's position is set along its trajectory (s)
    motion_step_s: float = 0.2


# -- translation (pure) ------------------------------------------------------------------


def mode_of(radio: Radio) -> str:
    """Mininet-WiFi's ``mode`` for a radio (802.11n: ``n2`` in 2.4 GHz, ``n`` in 5 GHz;
    802.11ax: ``ax2`` and ``ax5``, hostapd's ``ieee80211ax=1``)."""
    if radio.standard == "802.11n":
        return "n2" if radio.band == "2.4GHz" else "n"
    if radio.standard == "802.11ax":
        return "ax2" if radio.band == "2.4GHz" else "ax5"
    return {"802.11g": "g", "802.11a": "a", "802.11ac": "ac"}[radio.standard]


def frequency_mhz(band: str, channel: int) -> int:
    """Centre frequency of a 20 MHz channel (2.4 GHz: 1-14, 5 GHz: 36-177)."""
    if band == "2.4GHz":
        return 2484 if channel == 14 else 2407 + 5 * channel
    return 5000 + 5 * channel


def reconnect_commands(device: str, ssid: str, freq: int, bssid: str) -> list[list[str]]:
    """iw commands that re-issue a station's connect to its AP (run in the station's namespace).

    ``disconnect`` drops a connect attempt that is stuck or failed, the active
    scan on the AP's channel puts the BSS into cfg80211's cache (and, under wmediumd, makes the
    station transmit, so that wmediumd learns its radio address), and ``connect`` with SSID,
    frequency and BSSID then authenticates without another full scan.
    """
    return [
        ["iw", "dev", device, "disconnect"],
        ["iw", "dev", device, "scan", "freq", str(freq), "ssid", ssid],
        ["iw", "dev", device, "connect", ssid, str(freq), bssid],
    ]


#: the passphrase of the WPA2 network a roaming station's APs form (wpa_supplicant roams only
#: within a network block it manages; an open cell is joined by iw, which never roams)
ROAMING_PASSPHRASE = "quicbed-roaming"


@dataclass(frozen=True)
class Bgscan:
    """wpa_supplicant's ``bgscan="simple:SHORT:THRESHOLD:LONG"``, split into Mininet-WiFi's
    station parameters."""

    short_s: int
    threshold_dbm: int
    long_s: int

    @classmethod
    def parse(cls, text: str) -> "Bgscan":
        module, _, rest = text.partition(":")
        fields = rest.split(":")
        try:
            short, threshold, long = (int(field) for field in fields)
        except ValueError:
            short = threshold = long = 0
        if module != "simple" or len(fields) != 3 or not 0 < short <= long or not -100 <= threshold < 0:
            raise BackendError(
                f"bgscan {text!r}: expected simple:SHORT_S:THRESHOLD_DBM:LONG_S with 0 < SHORT_S <= "
                "LONG_S and a threshold between -100 and -1 dBm (fix: e.g. bgscan='simple:2:-65:10')"
            )
        return cls(short, threshold, long)

    def station_params(self) -> dict[str, Any]:
        # (Mininet-WiFi spells the short interval "s_inverval")
        return {
            "bgscan_module": "simple",
            "s_inverval": self.short_s,
            "bgscan_threshold": self.threshold_dbm,
            "l_interval": self.long_s,
        }


def secondary_above(radio: Radio) -> bool:
    """Whether a 40 MHz channel's secondary 20 MHz lies above the primary (HT40+)."""
    if radio.band == "2.4GHz":
        return radio.channel + 4 <= 13
    return (radio.channel // 4) % 2 == 1  # 36, 44, 52, ...: HT40+; 40, 48, ...: HT40-


def ht_capab(radio: Radio) -> str:
    """hostapd ``ht_capab`` for 802.11n/ac/ax radios ('' for legacy g/a)."""
    if radio.standard not in HT_STANDARDS:
        return ""
    flags = []
    if radio.width >= 40:
        flags.append("[HT40+]" if secondary_above(radio) else "[HT40-]")
    if radio.guard_interval == "short":
        flags.append("[SHORT-GI-40]" if radio.width >= 40 else "[SHORT-GI-20]")
    return "".join(flags)


def mesh_ht_cap(radio: Radio) -> str:
    """The channel type ``iw mesh join ... freq F TYPE`` takes ('' for legacy radios)."""
    if radio.standard not in HT_STANDARDS:
        return ""
    if radio.width >= 40:
        return "HT40+" if secondary_above(radio) else "HT40-"
    return "HT20"


def wmediumd_warnings(radios: Sequence[Radio], wmediumd: bool) -> list[str]:
    """wmediumd handles HT/VHT MCS indexes as legacy rate indexes: HT links lose most frames."""
    if not wmediumd:
        return []
    high = sorted({r.standard for r in radios if r.standard in HT_STANDARDS})
    if not high:
        return []
    return [
        f"wmediumd treats {'/'.join(high)} MCS indexes as legacy rates, so HT links lose most packets "
        "under it (fix: run HT radios without wmediumd, or use standard='802.11g'/'802.11a' with wmediumd)"
    ]


def ignored_settings_warnings(topo: Topology) -> list[str]:
    """Wireless settings this backend cannot apply, where a link sets them away from the
    defaults (they matter on the ns3 backend; docs/mininet-wifi.md)."""
    default = Radio()
    aggregation = "mac80211_hwsim has no aggregation timing to model"
    reasons = {
        "mcs": "the kernel's rate control (minstrel_ht) picks rates",
        "ampdu": aggregation,
        "ampdu_max_size": aggregation,
        "amsdu": aggregation,
        "spatial_streams": "mac80211_hwsim radios have one antenna",
        "queue": "the kernel queues a radio's frames itself (its qdiscs are in the run's metadata, radio_queues)",
        "distance": "only node positions place radios (fix: give the nodes position=)",
        "loss": "a fixed frame error rate exists only in the ns3 channel",
        "ofdma": "mac80211_hwsim sends no multi-user (OFDMA) PPDUs",
        "bss_color": "quicbed does not pass hostapd a colour (he_bss_color) yet",
        "obss_pd": "mac80211_hwsim has no preamble detection to adjust",
        "guard_interval": "hostapd has no setting for HE guard intervals: the kernel picks them",
    }
    ignored: dict[str, dict[str, Any]] = {}  # setting -> link name -> value
    for link in topo.links:
        if not isinstance(link, WirelessLink):
            continue
        values: dict[str, Any] = {
            name: getattr(link.radio, name)
            for name in reasons
            if hasattr(default, name) and getattr(link.radio, name) != getattr(default, name)
        }
        if link.radio.rate_control != "constant" or link.radio.mcs is None:
            values.pop("mcs", None)  # a rate control or legacy rates: the kernel's is used
        if link.distance is not None and any(topo.nodes[end].position is None for end in link.ends()):
            values["distance"] = f"{link.distance:g} m"
        if link.loss:
            values["loss"] = f"{link.loss * 100:g} %"
        if link.radio.standard != "802.11ax" or link.radio.guard_interval_ns == 800:
            values.pop("guard_interval", None)  # HT/VHT: hostapd's ht_capab carries it
        if "queue" in values:
            assert link.radio.queue is not None  # it differs from the default's None
            values["queue"] = link.radio.queue.kind
        for name, value in values.items():
            ignored.setdefault(name, {})[link.name] = value
    warnings = []
    for name, per_link in ignored.items():
        links = list(per_link)  # topology order
        shown = ", ".join(links[:3]) + (f" and {len(links) - 3} more" if len(links) > 3 else "")
        value_text = ", ".join(sorted({str(v) for v in per_link.values()}))
        warnings.append(f"not applied by Mininet-WiFi: {name} {value_text} on {shown}: {reasons[name]}")
    return warnings


def position_text(position: tuple[float, float, float] | None) -> str | None:
    return None if position is None else ",".join(f"{c:g}" for c in position)


@dataclass(frozen=True)
class MeshRadio:
    """One mesh interface: a mesh point's radio on one channel, joined to one MBSS."""

    node: str
    index: int  # the node's radio number (Mininet-WiFi interface NODE-wlanINDEX)
    mesh_id: str
    radio: Radio
    #: mesh points of this MBSS that are declared neighbours (may peer)
    neighbours: tuple[str, ...]
    #: mesh points of this MBSS that are not (their peerings are blocked)
    blocked: tuple[str, ...]

    @property
    def mbss(self) -> tuple[str, str, int, str]:
        return (self.mesh_id, self.radio.band, self.radio.channel, mode_of(self.radio))


@dataclass
class WifiPlan:
    """What Mininet-WiFi builds for a topology (names are quicbed node names)."""

    access_points: dict[str, dict[str, Any]] = field(default_factory=dict)
    stations: dict[str, dict[str, Any]] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    associations: list[tuple[str, str]] = field(default_factory=list)  # (station, ap)
    #: access point -> centre frequency (MHz) of its channel
    ap_frequencies: dict[str, int] = field(default_factory=dict)
    mesh_radios: list[MeshRadio] = field(default_factory=list)
    #: roaming station -> its access points (all of one WPA2 network; it is linked to the first)
    roaming: dict[str, list[str]] = field(default_factory=dict)
    #: wired link name -> (interface name at node1, interface name at node2)
    wired: dict[str, tuple[str, str]] = field(default_factory=dict)
    radios: list[Radio] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def mesh_radios_of(self, node: str) -> list[MeshRadio]:
        return [m for m in self.mesh_radios if m.node == node]


def plan(resolved: ResolvedTopology, options: MininetWifiOptions | None = None) -> WifiPlan:
    """Translate a resolved topology into Mininet-WiFi nodes, links and radios."""
    options = options or MininetWifiOptions()
    topo = resolved.topology
    roaming = topo.roaming_stations()
    if roaming and not (options.wmediumd and options.wmediumd_mode == "interference"):
        station, aps = next(iter(roaming.items()))
        raise BackendError(
            f"nodes[{station}]: station {station} roams between {', '.join(aps)}: on mininet-wifi "
            "wpa_supplicant decides when to roam, by the signal it hears, and only wmediumd makes "
            "the signal follow positions (fix: wmediumd=True with wmediumd_mode='interference', or "
            "the ns3 backend)"
        )
    bgscan = Bgscan.parse(options.bgscan)
    six = next((link for link in topo.links if isinstance(link, WirelessLink) and link.radio.band == "6GHz"), None)
    if six is not None:
        raise BackendError(
            f"links[{six.name}].band: the mininet-wifi backend does not set up 6 GHz radios (hostapd "
            "there needs an operating class and WPA3-SAE, which it does not configure) (fix: use the "
            "ns3 backend, or band='5GHz')"
        )
    result = WifiPlan()
    for node in topo.nodes.values():
        if isinstance(node, AccessPoint):
            radio = _ap_radio(topo, node.name)
            result.access_points[node.name] = {
                "ssid": node.ssid,
                "mode": mode_of(radio),
                "channel": radio.channel,
                "ht_capab": ht_capab(radio),
                "failMode": "standalone",
                "position": position_text(node.position),
            }
            result.ap_frequencies[node.name] = frequency_mhz(radio.band, radio.channel)
        elif isinstance(node, (Station, MeshPoint)):
            result.stations[node.name] = {"position": position_text(node.position), "wlans": 1}
            if node.name in roaming:
                result.stations[node.name].update(bgscan.station_params())
        elif isinstance(node, Switch):
            result.switches.append(node.name)
        elif isinstance(node, Host):
            result.hosts.append(node.name)
    for link in topo.links:
        if isinstance(link, WirelessLink):
            result.radios.append(link.radio)
            if {topo.nodes[link.node1].kind, topo.nodes[link.node2].kind} == {"station", "ap"}:
                station, ap = (
                    (link.node1, link.node2) if topo.nodes[link.node1].kind == "station" else (link.node2, link.node1)
                )
                if station not in roaming or ap == roaming[station][0]:
                    # a roaming station is linked once: its wpa_supplicant picks the AP, then others
                    result.associations.append((station, ap))
        else:
            result.wired[link.name] = (_wired_name(resolved, link, link.node1), _wired_name(resolved, link, link.node2))
    result.mesh_radios = _mesh_radios(topo)
    result.roaming = roaming
    for ap in {ap for aps in roaming.values() for ap in aps}:
        result.access_points[ap].update(encrypt="wpa2", passwd=ROAMING_PASSPHRASE)
    for name in {m.node for m in result.mesh_radios}:
        result.stations[name]["wlans"] = len(result.mesh_radios_of(name))
    result.warnings = ignored_settings_warnings(topo) + wmediumd_warnings(result.radios, options.wmediumd)
    moving = [station.name for station in topo.moving_stations()]
    if moving and not options.wmediumd:
        result.warnings.append(
            f"{', '.join(moving)} move, but without wmediumd only Mininet-WiFi's range check "
            "follows their positions, not the signal they hear (fix: wmediumd=True)"
        )
    if not options.motion_step_s > 0:
        raise BackendError(f"motion_step_s {options.motion_step_s!r}: must be positive (fix: e.g. 0.2)")
    if options.wmediumd_mode not in WMEDIUMD_MODES:
        raise BackendError(
            f"unknown wmediumd mode {options.wmediumd_mode!r} (fix: use one of {', '.join(WMEDIUMD_MODES)})"
        )
    return result


def _ap_radio(topo: Topology, ap: str) -> Radio:
    for link in topo.links:
        if isinstance(link, WirelessLink) and ap in link.ends():
            return link.radio
    return Radio(**topo._ap_radio.get(ap, {}))  # an AP without stations keeps its own settings


def _wired_name(resolved: ResolvedTopology, link: WiredLink, node: str) -> str:
    """Resolved name for routed nodes (eth0); NODE-ethN for switch/AP ports (root namespace)."""
    for iface in resolved.interfaces_of(node):
        if iface.link == link.name:
            return iface.name if iface.address else f"{node}-{iface.name}"
    raise BackendError(f"no interface of {node} for link {link.name}")


def _mesh_radios(topo: Topology) -> list[MeshRadio]:
    """One radio per mesh point and MBSS (mesh id + channel); peerings limited to declared links."""
    mesh_links = [
        link for link in topo.links if isinstance(link, WirelessLink) and isinstance(topo.nodes[link.node1], MeshPoint)
    ]
    neighbours: dict[tuple[str, tuple], set[str]] = {}
    members: dict[tuple, list[str]] = {}
    radios: dict[tuple, Radio] = {}
    order: list[tuple[str, tuple]] = []
    for link in mesh_links:
        mesh_point = topo.nodes[link.node1]
        assert isinstance(mesh_point, MeshPoint)  # mesh_links start at mesh points
        mesh_id = mesh_point.mesh_id
        key = (mesh_id, link.radio.band, link.radio.channel, mode_of(link.radio))
        radios.setdefault(key, link.radio)
        for me, other in ((link.node1, link.node2), (link.node2, link.node1)):
            if (me, key) not in neighbours:
                neighbours[(me, key)] = set()
                order.append((me, key))
                members.setdefault(key, []).append(me)
            neighbours[(me, key)].add(other)
    result = []
    index: dict[str, int] = {}
    for me, key in order:
        number = index.get(me, 0)
        index[me] = number + 1
        mine = neighbours[(me, key)]
        result.append(
            MeshRadio(
                me,
                number,
                key[0],
                radios[key],
                tuple(sorted(mine)),
                tuple(sorted(m for m in members[key] if m != me and m not in mine)),
            )
        )
    return result


# -- requirements ------------------------------------------------------------------------------
