"""From a resolved Topology to the JSON description the ns-3 channel program builds (pure).

The description lists ns-3 *nodes*, each with *ports*, and the *wires* between them:

* ``tap``  - a TAP device the channel program creates inside a namespace (one per
  interface of a host, station or mesh point; same name as the interface quicbed resolved);
* ``wifi`` - an 802.11 radio (role ``ap``, ``sta`` or ``adhoc``) with its PHY/MAC settings
  (quicbed.backends.ns3.radios), its peers (radio ids) and per-peer frame error rates;
* ``wire`` - one end of a wired link (``end`` 0 is the link's node1).

Node kinds say how a node forwards frames between its ports:

* ``switch``  - learning bridge: access points, Ethernet switches, and each wired
  interface of a routed node (its TAP joined to its cable);
* ``station`` - a TAP and a STA radio sharing one MAC address (the program sets the TAP's
  MAC to the radio's): the namespace's interface *is* the station;
* ``mesh``    - a mesh point's TAP and one ad-hoc radio per channel its peerings use, with
  ``routes``: destination mesh interface -> (local radio, next-hop radio), shortest paths
  over the declared peerings.

Schema (version 1)::

    {"version": 1, "seed": 1, "run": 1, "stats_file", "snapshot_file", "live_file",
     "lag_interval_us": 1000, "live_interval_ms": 1000,
     "warmup": {"packets": 8, "bytes": 200, "timeout_s": 20},
     "propagation": {"model": "log_distance", "exponent": 3.0,
                     "reference_loss_db": {"2.4GHz": .., "5GHz": .., "6GHz": ..}},
     "wires": [{"name", "forward": SHAPE, "backward": SHAPE}],
     "nodes": [{"name", "kind", "position": [x, y, z], "ports": [PORT...], "routes": {...}}]}
    SHAPE = {"rate_bps", "delay_s", "jitter_s", "jitter_distribution", "queue_packets",
             "loss": {"model": "bernoulli", "probability"} |
                     {"model": "gilbert_elliott", "p", "r", "loss_bad", "loss_good"},
             "corrupt", "trace_file"}
    (with "trace_file", a Mahimahi delivery trace replaces the rate; the queue is in front of it)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from quicbed.backends.ns3.radios import common_radio, mac_queue_packets, radio_settings, reference_loss_db
from quicbed.errors import BackendError
from quicbed.spec.link import Radio, Shape, WiredLink, WirelessLink
from quicbed.spec.loss import Bernoulli, GilbertElliott
from quicbed.spec.node import AccessPoint, MeshPoint, Station, Switch
from quicbed.spec.resolve import Interface, ResolvedTopology
from quicbed.spec.topology import Topology

SCHEMA_VERSION = 1
DEFAULT_DISTANCE = 5.0  # metres between a station and its AP when nothing says otherwise
DEFAULT_MESH_SPACING = 10.0  # metres between mesh peers without positions or distance
DEFAULT_WIRE_QUEUE = 1000  # packets, like the kernel's txqueuelen (netns backend default)


REALTIME_SIMULATORS = ("paced", "ns3")


@dataclass
class Ns3Options:
    """Settings of the simulated medium and of the real-time discipline."""

    #: runs in which the simulator spent more than this share of the time more than 4 ms
    #: behind the wall clock are invalid (bench/validity.py: keeps goodput errors below 1 %)
    max_behind_share: float = 0.01
    #: period of the lag probe event
    lag_interval_us: int = 1000
    #: SCHED_FIFO priority of the ns-3 process (0: normal scheduling, not recommended)
    realtime_priority: int = 50
    #: WiFi MAC queue per radio and access category (packets); node option 'ns3_queue' overrides
    mac_queue_packets: int = 500
    #: transmit power of every radio (dBm); node option 'ns3_tx_power_dbm' overrides
    tx_power_dbm: float = 16.0206
    #: propagation loss: "log_distance" (with exponent), "friis" or "fixed_rss" (rss_dbm)
    propagation: str = "log_distance"
    path_loss_exponent: float = 3.0
    rss_dbm: float = -50.0
    #: give every namespace permanent neighbour (ARP) entries for its segments: no ARP
    #: broadcasts at start-up, which collide (broadcasts get no MAC retransmission) when
    #: dozens of stations start at once
    static_arp: bool = True
    #: warm-up: frames per peer per round, and how long to wait for association + block ACK
    warmup_packets: int = 8
    warmup_timeout_s: float = 20.0
    seed: int = 1
    #: ns-3's RNG run number (substream); None: a fresh one for every network the backend
    #: builds, so that networks built again (another cell, a failed run) draw independent
    #: losses, backoffs and frame errors instead of repeating the same ones
    run: int | None = None
    #: the threads that read frames from the TAPs run one SCHED_FIFO priority above the
    #: simulator (True) or at its priority (False). With isolate_channel all channel threads
    #: share one core; bench/validity.py --placement measured no gain from raising them on a
    #: light cell and a loss near saturation (readers preempting the simulator: 257-260 vs
    #: 285-287 Mbit/s, 31-53 % vs 4-12 % of the run more than 1 ms behind)
    tap_readers_above_simulator: bool = False
    #: the same for the thread that writes frames into the TAPs (its writes run the receiving
    #: namespace's network stack, which would then delay the simulator)
    tap_writer_above_simulator: bool = False
    #: frames a TAP reader lets wait for the simulator before it drops (and counts) one
    tap_pending_limit: int = 1000
    #: frames the TAP writer lets wait before it drops (and counts) one
    tap_writer_queue_limit: int = 4096
    #: radios judge the MPDUs of a PSDU addressed to another radio at the end of the PPDU, not
    #: one event per MPDU: the same outcome and random draws as ns-3's own path, 38-41 % fewer
    #: simulator events at 10-20 stations (docs/ns3-backend.md, "Skimming receivers"); node
    #: option 'ns3_skim_receivers' overrides
    skim_receivers: bool = True
    #: the real-time simulator: "paced" (quicbed's, docs/ns3-backend.md "The real-time
    #: simulator") or "ns3" (ns-3's RealtimeSimulatorImpl), for comparison
    realtime: str = "paced"
    #: the paced simulator spins on the clock (instead of sleeping) before an event this close
    #: (0: always sleeps; spinning gained nothing measurable here: bench/README.md)
    realtime_spin_us: int = 0
    #: follow every unicast IPv4 frame from its TAP read to its TAP write or a counted drop; a
    #: frame that did neither within frame_ledger_settle_s vanished inside the channel, which
    #: makes the run invalid (docs/ns3-backend.md, "The frame ledger")
    frame_ledger: bool = True
    frame_ledger_settle_s: float = 2.0
    #: extra keys merged into the description (for experiments with the channel program)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.realtime not in REALTIME_SIMULATORS:
            raise ValueError(f"ns3 option realtime={self.realtime!r}: choose {' or '.join(REALTIME_SIMULATORS)}")
        if self.realtime_spin_us < 0:
            raise ValueError(f"ns3 option realtime_spin_us={self.realtime_spin_us}: must be 0 or more")
        if self.frame_ledger_settle_s <= 0:
            raise ValueError(
                f"ns3 option frame_ledger_settle_s={self.frame_ledger_settle_s}: must be more than 0 "
                "(seconds a frame may stay in the channel before it counts as vanished)"
            )


#: the MAC queue lifetime of an access point with FastACK (ms): an hour, longer than any run, so
#: that only the air, never the queue's age, drops data the AP has acknowledged for a station
FASTACK_QUEUE_LIFETIME_MS = 3_600_000


def links_stations(links: list[WirelessLink], ap: str) -> list[str]:
    """The stations of an AP's wireless links (the other end of each)."""
    return [link.node1 if link.node2 == ap else link.node2 for link in links]


# -- the description ---------------------------------------------------------------------


def _shape(shape: Shape, where: str) -> dict[str, Any]:
    unsupported = [name for name in ("reorder", "duplicate", "slot") if getattr(shape, name)]
    if unsupported:
        raise BackendError(
            f"{where}: the ns3 backend does not model {', '.join(unsupported)} on wired "
            "links (fix: remove them, or use the netns backend for this link)"
        )
    out: dict[str, Any] = {"queue_packets": shape.queue_limit or DEFAULT_WIRE_QUEUE}
    if shape.rate:
        out["rate_bps"] = shape.rate
    if shape.delay:
        out["delay_s"] = shape.delay
    if shape.jitter:
        out["jitter_s"] = shape.jitter
        if shape.jitter_distribution not in ("uniform", "normal"):
            raise BackendError(
                f"{where}: the ns3 backend draws jitter from uniform or normal "
                f"distributions, not {shape.jitter_distribution}"
            )
        out["jitter_distribution"] = shape.jitter_distribution
    if isinstance(shape.loss, Bernoulli):
        out["loss"] = {"model": "bernoulli", "probability": shape.loss.probability}
    elif isinstance(shape.loss, GilbertElliott):
        ge = shape.loss
        out["loss"] = {
            "model": "gilbert_elliott",
            "p": ge.p,
            "r": ge.r,
            "loss_bad": ge.loss_bad,
            "loss_good": ge.loss_good,
        }
    if shape.corrupt:
        out["corrupt"] = shape.corrupt
    if shape.trace:
        out["trace_file"] = shape.trace.path
    return out


def unrealisable(topo: Topology) -> list[str]:
    """Why the ns3 backend cannot build these wired links as configured (empty when it can)."""
    problems = []
    for link in topo.links:
        if isinstance(link, WiredLink):
            for direction in ("forward", "backward"):
                try:
                    _shape(getattr(link, direction), f"links[{link.name}].{direction}")
                except BackendError as error:
                    problems.append(str(error))
    return problems


def link_segments(resolved: ResolvedTopology) -> dict[str, int]:
    """Segment id of every link."""
    from quicbed.spec.resolve import _segments  # the same grouping resolve() used

    ids, _ = _segments(resolved.topology)
    return {link.name: ids[index] for index, link in enumerate(resolved.topology.links)}


def tap_mac(index: int) -> str:
    """A locally administered MAC for the TAP of a wired or mesh interface ('QB' prefix)."""
    return f"02:51:42:{(index >> 16) & 0xFF:02x}:{(index >> 8) & 0xFF:02x}:{index & 0xFF:02x}"


def _unit(vector: Sequence[float]) -> tuple[float, ...] | None:
    length = math.sqrt(sum(c * c for c in vector))
    return None if length < 1e-9 else tuple(c / length for c in vector)


def _place(anchor: Sequence[float], distance: float, direction: Sequence[float]) -> list[float]:
    return [round(anchor[i] + distance * direction[i], 6) for i in range(3)]


def describe(
    resolved: ResolvedTopology,
    namespaces: dict[str, str],
    options: Ns3Options | None = None,
    files: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The channel program's description of ``resolved``.

    ``namespaces`` maps each routed node to its namespace; ``files`` gives stats_file,
    snapshot_file and live_file.
    """
    options = options or Ns3Options()
    built = _Description(resolved, namespaces, options)
    built.add_wires()
    built.add_access_points()
    built.add_mesh_segments()
    built.add_switches()
    return {
        "version": SCHEMA_VERSION,
        "topology": resolved.topology.name,
        "seed": options.seed,
        "run": options.run or 1,
        **(files or {}),
        "lag_interval_us": options.lag_interval_us,
        "live_interval_ms": 1000,
        "realtime": options.realtime,
        "realtime_spin_us": options.realtime_spin_us,
        "tap_readers_above_simulator": options.tap_readers_above_simulator,
        "tap_writer_above_simulator": options.tap_writer_above_simulator,
        "tap_pending_limit": options.tap_pending_limit,
        "tap_writer_queue_limit": options.tap_writer_queue_limit,
        "frame_ledger": options.frame_ledger,
        "frame_ledger_settle_ms": round(options.frame_ledger_settle_s * 1000),
        "warmup": {"packets": options.warmup_packets, "bytes": 200, "timeout_s": options.warmup_timeout_s},
        "propagation": {
            "model": options.propagation,
            "exponent": options.path_loss_exponent,
            "rss_dbm": options.rss_dbm,
            "reference_loss_db": {band: round(reference_loss_db(band), 3) for band in ("2.4GHz", "5GHz", "6GHz")},
        },
        "wires": built.wires,
        "nodes": built.nodes,
        "spectrum_bands": spectrum_bands(resolved.topology),
        **options.extra,
    }


def spectrum_bands(topo: Topology) -> list[str]:
    """Bands whose radios are all SpectrumWifiPhys: those where a radio uses OFDMA (ns-3
    receives a multi-user PPDU's resource units only there; radios of one band share one
    channel object, so all of them move)."""
    return sorted({link.radio.band for link in topo.links if isinstance(link, WirelessLink) and link.radio.ofdma})


class _Description:
    """The nodes and wires of a description, built section by section: wires first (each
    routed end is joined to its segment's node later), then access points with their
    stations, mesh segments, and last switches and the routed nodes' wired interfaces.
    The order of the sections is the order of the TAPs' MAC addresses."""

    def __init__(self, resolved: ResolvedTopology, namespaces: dict[str, str], options: Ns3Options) -> None:
        self.resolved = resolved
        self.topo = resolved.topology
        self.namespaces = namespaces
        self.options = options
        self.segment_of = link_segments(resolved)
        self.interface_of: dict[tuple[str, int], Interface] = {
            (i.node, i.segment): i for i in resolved.interfaces if i.address
        }
        self.nodes: list[dict[str, Any]] = []
        self.wires: list[dict[str, Any]] = []
        self.taps = 0
        self.wire_ends: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # ns-3 node name -> ports

    # -- ports --------------------------------------------------------------------------------

    def routed_interface(self, node: str, link_name: str) -> Interface:
        return self.interface_of[(node, self.segment_of[link_name])]

    def node_option(self, node: str, key: str, default: Any) -> Any:
        return self.topo.nodes[node].options.get(key, default)

    def tap_port(self, node: str, iface: Interface, mac: bool = True) -> dict[str, Any]:
        self.taps += 1
        port = {"kind": "tap", "id": f"{node}:{iface.name}", "namespace": self.namespaces[node], "ifname": iface.name}
        if mac:
            port["mac"] = tap_mac(self.taps)
        return port

    def radio_port(
        self, radio_id: str, node: str, role: str, radio: Radio, peers: list[str], extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        options = self.options
        return {
            "kind": "wifi",
            "id": radio_id,
            "role": role,
            **radio_settings(radio),
            "peers": peers,
            "queue_packets": mac_queue_packets(
                radio, int(self.node_option(node, "ns3_queue", options.mac_queue_packets))
            ),
            "tx_power_dbm": float(self.node_option(node, "ns3_tx_power_dbm", options.tx_power_dbm)),
            "skim_receivers": bool(self.node_option(node, "ns3_skim_receivers", options.skim_receivers)),
            **(extra or {}),
        }

    # -- sections -----------------------------------------------------------------------------

    def add_wires(self) -> None:
        """One wire per wired link; remember which ns-3 node holds each end."""
        for link in self.topo.links:
            if not isinstance(link, WiredLink):
                continue
            where = f"links[{link.name}]"
            self.wires.append(
                {
                    "name": link.name,
                    "forward": _shape(link.forward, f"{where}.forward"),
                    "backward": _shape(link.backward, f"{where}.backward"),
                }
            )
            for end, node in enumerate(link.ends()):
                owner = (
                    f"{node}:{self.routed_interface(node, link.name).name}" if self.topo.nodes[node].routed else node
                )
                self.wire_ends.setdefault(owner, []).append(
                    (link.name, {"kind": "wire", "wire": link.name, "end": end})
                )

    def add_access_points(self) -> None:
        roaming = self.topo.roaming_stations()
        for ap in (n for n in self.topo.nodes.values() if isinstance(n, AccessPoint)):
            self.add_access_point(ap, roaming)
        for station, aps in roaming.items():
            self.add_roaming_station(station, aps)

    def station_node(
        self, station: str, link: WirelessLink, aps: list[AccessPoint], position: list[float]
    ) -> dict[str, Any]:
        """A station's node: its TAP and its STA radio, which may associate with ``aps``
        (one SSID); a moving station carries its trajectory."""
        iface = self.routed_interface(station, link.name)
        radio_id = f"{station}:{iface.name}"
        losses = {
            f"{ap.name}:wifi": each.loss
            for ap in aps
            for each in self.topo.links
            if isinstance(each, WirelessLink) and set(each.ends()) == {station, ap.name} and each.loss
        }
        sta_port = self.radio_port(
            radio_id,
            station,
            "sta",
            link.radio,
            [f"{ap.name}:wifi" for ap in aps],
            {"ssid": aps[0].ssid, **({"frame_error": losses} if losses else {})},
        )
        node = {
            "name": radio_id,
            "kind": "station",
            "position": position,
            "ports": [self.tap_port(station, iface, mac=False), sta_port],
        }
        spec = self.topo.nodes[station]
        assert isinstance(spec, Station)  # resolve(): an access point's wireless peers are stations
        trajectory = spec.trajectory
        if trajectory is not None:
            node["trajectory"] = [list(point) for point in trajectory.points]
        return node

    def add_roaming_station(self, station: str, aps: list[str]) -> None:
        links = [each for each in self.topo.links if isinstance(each, WirelessLink) and station in each.ends()]
        radios = {(each.radio.standard, each.radio.band, each.radio.channel, each.radio.width) for each in links}
        if len(radios) > 1:
            raise BackendError(
                f"nodes[{station}]: station {station} roams between {', '.join(aps)} on different channels; ns-3 "
                "3.37's station scans only the channel it is on (fix: put these access points on one channel, "
                "or use the mininet-wifi backend)"
            )
        position = list(self.topo.nodes[station].position or (0.0, 0.0, 0.0))
        # roaming_stations() names access points only
        access_points = [node for node in (self.topo.nodes[ap] for ap in aps) if isinstance(node, AccessPoint)]
        self.nodes.append(self.station_node(station, links[0], access_points, position))

    def add_access_point(self, ap: AccessPoint, roaming: dict[str, list[str]]) -> None:
        """The AP (a switch with its radio and cables) first in the list, its stations after
        (those that roam after every AP)."""
        links = [each for each in self.topo.links if isinstance(each, WirelessLink) and ap.name in each.ends()]
        ap_radio_id = f"{ap.name}:wifi"
        ap_position = tuple(ap.position or (0.0, 0.0, 0.0))
        ports: list[dict[str, Any]] = []
        if links:
            common = common_radio(f"access point {ap.name}", links)
            if ap.fastack and common.queue is not None and common.queue.kind != "fifo":
                raise BackendError(
                    f"nodes[{ap.name}].fastack: ACK acceleration needs the AP's MAC queue alone, not a "
                    f"{common.queue.kind} discipline in front of it (the discipline drops data the AP has "
                    "already acknowledged) (fix: drop fastack, or give the AP queue='fifo')"
                )
            roamers = sorted(s for s, aps in roaming.items() if ap.name in aps)
            movers = sorted(
                name for name in links_stations(links, ap.name) if getattr(self.topo.nodes[name], "trajectory", None)
            )
            if ap.fastack and movers:
                raise BackendError(
                    f"nodes[{ap.name}].fastack: {', '.join(movers)} move(s), and a station that moves out of "
                    f"{ap.name}'s range still acknowledges frames at the MAC and drops them, so the AP would "
                    "acknowledge bytes the station never got (fix: drop fastack, or the trajectory)"
                )
            if ap.fastack and roamers:
                raise BackendError(
                    f"nodes[{ap.name}].fastack: {', '.join(roamers)} roam(s) to and from {ap.name}, and the "
                    "acknowledgements it gave for a station that left would be lies the sender never learns "
                    "of (fix: drop fastack on access points whose stations roam)"
                )
            # HT/VHT: a short guard interval where both ends support one (ns-3's rule), so the AP
            # supports it if a station does; HE: one guard interval per radio (common_radio)
            short = common.standard != "802.11ax" and any(each.radio.guard_interval == "short" for each in links)
            sgi = "short" if short else common.guard_interval
            station_ids = []
            frame_errors = {}
            for index, link in enumerate(links):
                station = link.node1 if link.node2 == ap.name else link.node2
                station_radio_id = f"{station}:{self.routed_interface(station, link.name).name}"
                station_ids.append(station_radio_id)
                if link.loss:
                    frame_errors[station_radio_id] = link.loss
                if station not in roaming:
                    position = self.station_position(station, link, ap_position, index, len(links))
                    self.nodes.append(self.station_node(station, link, [ap], position))
            ap_radio = replace(common, guard_interval=sgi)
            ports.append(
                self.radio_port(
                    ap_radio_id,
                    ap.name,
                    "ap",
                    ap_radio,
                    station_ids,
                    {
                        "ssid": ap.ssid,
                        **({"frame_error": frame_errors} if frame_errors else {}),
                        # an accelerating AP keeps what it acknowledged until the station
                        # has it: no 500 ms queue lifetime (ns-3's) in a slow cell
                        **({"queue_max_delay_ms": FASTACK_QUEUE_LIFETIME_MS} if ap.fastack else {}),
                    },
                )
            )
        elif ap.fastack:
            raise BackendError(
                f"nodes[{ap.name}].fastack: access point {ap.name} has no stations to accelerate "
                "(fix: link stations to it, or drop fastack)"
            )
        ports += [port for _, port in self.wire_ends.pop(ap.name, [])]
        announce = any(ap.name in aps for aps in roaming.values())
        self.nodes.insert(
            0,
            {
                "name": ap.name,
                "kind": "switch",
                "position": list(ap_position),
                "ports": ports,
                **({"fastack": True} if ap.fastack else {}),
                **({"announce_associations": True} if announce else {}),
            },
        )

    def station_position(
        self, station: str, link: WirelessLink, ap_position: tuple[float, ...], index: int, count: int
    ) -> list[float]:
        """At the link's distance from its AP (towards the station's own position, else spread
        round the AP), else its own position, else DEFAULT_DISTANCE round the AP."""
        own = self.topo.nodes[station].position
        angle = 2 * math.pi * index / count
        around = (math.cos(angle), math.sin(angle), 0.0)
        if link.distance is not None:
            direction = _unit(tuple(own[i] - ap_position[i] for i in range(3))) if own else None
            return _place(ap_position, link.distance, direction or around)
        if own:
            return list(own)
        return _place(ap_position, DEFAULT_DISTANCE, around)

    def add_mesh_segments(self) -> None:
        mesh_links = [
            each
            for each in self.topo.links
            if isinstance(each, WirelessLink) and isinstance(self.topo.nodes[each.node1], MeshPoint)
        ]
        by_segment: dict[int, list[WirelessLink]] = {}
        for link in mesh_links:
            by_segment.setdefault(self.segment_of[link.name], []).append(link)
        for segment, links in sorted(by_segment.items()):
            self.add_mesh_segment(segment, links)

    def add_mesh_segment(self, segment: int, links: list[WirelessLink]) -> None:
        """One node per mesh point: its TAP, one ad-hoc radio per channel, its routes."""
        members = sorted({end for link in links for end in link.ends()})
        iface = {m: self.interface_of[(m, segment)] for m in members}
        tap_id = {m: f"{m}:{iface[m].name}" for m in members}
        radios: dict[tuple[str, int], list[WirelessLink]] = {}
        for link in links:
            for end in link.ends():
                radios.setdefault((end, link.radio.channel), []).append(link)
        radio_id = {key: f"{tap_id[key[0]]}:ch{key[1]}" for key in radios}
        neighbours: dict[str, list[tuple[str, WirelessLink]]] = {m: [] for m in members}
        for link in links:
            neighbours[link.node1].append((link.node2, link))
            neighbours[link.node2].append((link.node1, link))
        positions = self.mesh_positions(members, neighbours)
        routes = _mesh_routes(members, neighbours, tap_id, radio_id)
        for member in members:
            ports = [self.tap_port(member, iface[member])]
            for (node, channel), radio_links in sorted(radios.items()):
                if node != member:
                    continue
                radio = common_radio(f"mesh point {member} (channel {channel})", radio_links)
                if radio.bss_color is not None or radio.obss_pd is not None:
                    raise BackendError(
                        f"links[{radio_links[0].name}]: BSS colour and OBSS-PD belong to an access "
                        "point's BSS, not to mesh peerings (fix: leave bss_color and obss_pd out)"
                    )
                peers, frame_errors = [], {}
                for link in radio_links:
                    other = link.node2 if link.node1 == member else link.node1
                    peers.append(radio_id[(other, channel)])
                    if link.loss:
                        frame_errors[radio_id[(other, channel)]] = link.loss
                ports.append(
                    self.radio_port(
                        radio_id[(member, channel)],
                        member,
                        "adhoc",
                        radio,
                        peers,
                        {"frame_error": frame_errors} if frame_errors else {},
                    )
                )
            self.nodes.append(
                {
                    "name": tap_id[member],
                    "kind": "mesh",
                    "position": positions[member],
                    "ports": ports,
                    "routes": routes[member],
                }
            )

    def mesh_positions(
        self, members: list[str], neighbours: dict[str, list[tuple[str, WirelessLink]]]
    ) -> dict[str, list[float]]:
        """Given positions, then breadth first along +x at the link distance."""
        placed = {m: list(position) for m in members if (position := self.topo.nodes[m].position)}
        for start in members:
            if not placed:
                placed[start] = [0.0, 0.0, 0.0]
            if start not in placed:
                continue
            queue = deque([start])
            while queue:
                current = queue.popleft()
                for other, link in sorted(neighbours[current], key=lambda pair: pair[0]):
                    if other in placed:
                        continue
                    spacing = link.distance or DEFAULT_MESH_SPACING
                    placed[other] = _place(tuple(placed[current]), spacing, (1.0, 0.0, 0.0))
                    queue.append(other)
        return {member: placed.get(member, [0.0, 0.0, 0.0]) for member in members}

    def add_switches(self) -> None:
        """Switches first in the list; then each routed node's wired interface, a switch of its
        TAP and its one cable."""
        for switch in (n for n in self.topo.nodes.values() if isinstance(n, Switch)):
            self.nodes.insert(
                0,
                {
                    "name": switch.name,
                    "kind": "switch",
                    "ports": [port for _, port in self.wire_ends.pop(switch.name, [])],
                },
            )
        for owner, ends in sorted(self.wire_ends.items()):
            node, _, ifname = owner.partition(":")
            if len(ends) > 1:
                raise BackendError(
                    f"{node} has {len(ends)} cables into one segment "
                    f"({', '.join(n for n, _ in ends)}); that would be a bridging loop "
                    "(fix: connect it once per switch/AP segment)"
                )
            iface = next(i for i in self.resolved.interfaces_of(node) if i.name == ifname)
            self.nodes.append(
                {"name": owner, "kind": "switch", "ports": [self.tap_port(node, iface), *(port for _, port in ends)]}
            )


def _mesh_routes(
    members: list[str],
    neighbours: dict[str, list[tuple[str, WirelessLink]]],
    tap_id: dict[str, str],
    radio_id: dict[tuple[str, int], str],
) -> dict[str, dict[str, dict[str, str]]]:
    """Static shortest paths over the peerings (what HWMP converges to on a static mesh):
    per mesh point, destination TAP -> its radio and the next hop's."""
    routes: dict[str, dict[str, dict[str, str]]] = {m: {} for m in members}
    for source in members:
        first_hop: dict[str, tuple[str, WirelessLink]] = {}
        seen = {source}
        queue = deque([source])
        while queue:
            current = queue.popleft()
            for other, link in sorted(neighbours[current], key=lambda pair: pair[0]):
                if other in seen:
                    continue
                seen.add(other)
                first_hop[other] = first_hop[current] if current != source else (other, link)
                queue.append(other)
        for destination, (hop, link) in first_hop.items():
            routes[source][tap_id[destination]] = {
                "radio": radio_id[(source, link.radio.channel)],
                "next_hop": radio_id[(hop, link.radio.channel)],
            }
    return routes


def interface_names(description: dict[str, Any]) -> dict[str, str]:
    """TAP id ('node:ifname') -> namespace, for every TAP in a description."""
    return {
        port["id"]: port["namespace"]
        for node in description["nodes"]
        for port in node["ports"]
        if port["kind"] == "tap"
    }


def radio_owner(description: dict[str, Any]) -> dict[str, str]:
    """Radio id -> quicbed node name."""
    owners = {}
    for node in description["nodes"]:
        base = node["name"].partition(":")[0]
        for port in node["ports"]:
            if port["kind"] == "wifi":
                owners[port["id"]] = base
    return owners
