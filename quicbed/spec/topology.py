"""The Topology: nodes and links written in plain Python, Mininet style.

    topo = Topology("dumbbell")
    client, server = topo.add_host("client"), topo.add_host("server")
    topo.add_link(client, server, rate="20mbit", delay="10ms", loss=1)

``Topology`` only records what the network is. ``resolve()`` turns it into interfaces,
addresses and routes (pure computation); backends realise the resolved form.
"""

from __future__ import annotations

import ipaddress
import math
import re
import sys
from dataclasses import fields
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from quicbed.errors import SpecError
from quicbed.spec.link import (
    STANDARDS,
    RADIO_FIELDS,
    SHAPE_FIELDS,
    Link,
    Radio,
    RadioQueue,
    Shape,
    WiredLink,
    WirelessLink,
    parse_shape,
)
from quicbed.spec.mobility import parse_mobility, parse_waypoints
from quicbed.spec.node import AccessPoint, Host, MeshPoint, Node, Station, Switch

if TYPE_CHECKING:
    from quicbed.spec.resolve import ResolvedTopology

NodeT = TypeVar("NodeT", bound=Node)

NODE_NAME = re.compile(r"[a-z][a-z0-9_]{0,14}")
DEFAULT_SUBNET_POOL = "10.0.0.0/16"


_SPEC_DIR = __file__.rsplit("/", 1)[0] + "/"
_BANDS = {band.lower(): band for bands in STANDARDS.values() for band in bands}


class Topology:
    """A network description: nodes, links, optional address and route overrides."""

    def __init__(self, name: str = "topology", subnet_pool: str = DEFAULT_SUBNET_POOL, description: str = "") -> None:
        self.name = name
        self.description = description
        self.subnet_pool = subnet_pool
        self.nodes: dict[str, Node] = {}
        self.links: list[Link] = []
        self.routes: list[tuple[str, str, str]] = []  # (node, destination prefix, gateway)
        self._ap_radio: dict[str, dict[str, Any]] = {}
        #: where each node and link was added ("nodes[NAME]"/"links[NAME]" -> (file, line)): the
        #: checks that run after the script name the line that made what they refuse
        self.defined_at: dict[str, tuple[str, int]] = {}

    # -- nodes -------------------------------------------------------------------------
    def _add(self, node: NodeT, position: tuple[float, ...] | None = None) -> NodeT:
        """Record ``node``, placed at ``position`` ((x, y) or (x, y, z), checked here)."""
        if not isinstance(node.name, str) or not NODE_NAME.fullmatch(node.name):
            raise SpecError(
                f"invalid node name {node.name!r}",
                field=f"nodes[{node.name}]",
                fix="use 1-15 lower-case letters, digits or '_', starting with a letter",
            )
        if node.name in self.nodes:
            raise SpecError(
                f"node {node.name!r} is defined twice", field=f"nodes[{node.name}]", fix="give every node its own name"
            )
        if position is not None:
            checked = _position(position)
            if checked is None:
                raise SpecError(
                    f"position must be (x, y) or (x, y, z) in metres, got {position!r}",
                    field=f"nodes[{node.name}].position",
                    fix="e.g. position=(10, 0)",
                )
            node.position = checked
        self.nodes[node.name] = node
        self._note_caller(f"nodes[{node.name}]")
        return node

    def _note_caller(self, key: str) -> None:
        """Remember the first frame outside quicbed's spec package: the script's line."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_SPEC_DIR):
            frame = frame.f_back
        if frame is not None:
            self.defined_at[key] = (frame.f_code.co_filename, frame.f_lineno)

    def add_host(self, name: str, **options: Any) -> Host:
        return self._add(Host(name, options=options))

    def add_switch(self, name: str) -> Switch:
        return self._add(Switch(name))

    def add_station(
        self,
        name: str,
        position: tuple[float, ...] | None = None,
        waypoints: list[tuple[float, ...]] | None = None,
        mobility: dict[str, Any] | None = None,
        **options: Any,
    ) -> Station:
        """A station; it moves along ``waypoints`` ([(t, x, y[, z]), ...], seconds from the start
        of the transfer) or a drawn ``mobility`` model (quicbed/spec/mobility.py)."""
        station = self._add(Station(name, options=options), position)
        where = f"nodes[{name}]"
        try:
            if waypoints is not None and mobility is not None:
                raise SpecError(
                    "a station has waypoints or a mobility model, not both", field=where, fix="keep one of them"
                )
            if waypoints is not None:
                if position is not None:
                    raise SpecError(
                        "a station with waypoints starts at its first one; position is not used",
                        field=f"{where}.position",
                        fix="leave position out",
                    )
                station.trajectory = parse_waypoints(waypoints, f"{where}.waypoints")
            elif mobility is not None:
                station.trajectory = parse_mobility(mobility, station.position, f"{where}.mobility")
        except SpecError:
            del self.nodes[name]  # nothing half-created
            raise
        if station.trajectory is not None:
            station.position = station.trajectory.start
        return station

    def add_access_point(
        self,
        name: str,
        ssid: str | None = None,
        position: tuple[float, ...] | None = None,
        fastack: bool = False,
        **radio: Any,
    ) -> AccessPoint:
        """An AP; radio settings (standard, band, channel, width, ...) apply to all its stations.
        ``fastack``: the AP acknowledges TCP data to the sender on its stations' behalf once their
        MAC has it, as Meraki's FastACK does (ns3 only; docs/ns3-backend.md)."""
        radio = self._parse_radio(radio, f"nodes[{name}]")
        Radio(**radio).check(f"nodes[{name}]")
        if not isinstance(fastack, bool):
            raise SpecError(f"fastack must be true or false, got {fastack!r}", field=f"nodes[{name}].fastack")
        node = self._add(AccessPoint(name, ssid=ssid or f"quicbed-{name}", fastack=fastack), position)
        self._ap_radio[name] = radio
        return node

    def add_mesh_point(
        self, name: str, position: tuple[float, ...] | None = None, mesh_id: str = "quicbed-mesh", **options: Any
    ) -> MeshPoint:
        return self._add(MeshPoint(name, mesh_id=mesh_id, options=options), position)

    # -- links -------------------------------------------------------------------------
    def _node_name(self, node: Node | str, field: str) -> str:
        name = node.name if isinstance(node, Node) else node
        if name not in self.nodes:
            known = ", ".join(sorted(self.nodes)) or "none yet"
            raise SpecError(
                f"unknown node {name!r}", field=field, fix=f"add the node before linking it (known: {known})"
            )
        return name

    def _link_name(self, name: str | None, a: str, b: str) -> str:
        name = name or f"{a}-{b}"
        if any(link.name == name for link in self.links):
            raise SpecError(
                f"link {name!r} is defined twice", field=f"links[{name}]", fix="give each link a distinct name="
            )
        return name

    def add_link(
        self,
        node1: Node | str,
        node2: Node | str,
        name: str | None = None,
        addr1: str | None = None,
        addr2: str | None = None,
        forward: dict[str, Any] | None = None,
        backward: dict[str, Any] | None = None,
        **shape: Any,
    ) -> WiredLink:
        """A wired link. Impairments (rate, delay, jitter, loss, ...) apply in both directions;
        ``forward``/``backward`` dicts override them for node1->node2 / node2->node1 only."""
        a = self._node_name(node1, "links.node1")
        b = self._node_name(node2, "links.node2")
        link_name = self._link_name(name, a, b)
        where = f"links[{link_name}]"
        both = parse_shape(shape, where)
        link = WiredLink(
            a,
            b,
            link_name,
            forward=parse_shape(forward or {}, f"{where}.forward", both),
            backward=parse_shape(backward or {}, f"{where}.backward", both),
            addr1=addr1,
            addr2=addr2,
        )
        self.links.append(link)
        self._note_caller(f"links[{link.name}]")
        return link

    def add_wireless_link(
        self,
        node1: Node | str,
        node2: Node | str,
        name: str | None = None,
        distance: float | None = None,
        loss: Any = 0,
        addr1: str | None = None,
        addr2: str | None = None,
        **radio: Any,
    ) -> WirelessLink:
        """A station-AP association or a mesh peering. Radio keywords override the AP's."""
        from quicbed.spec.units import parse_percent

        a = self._node_name(node1, "links.node1")
        b = self._node_name(node2, "links.node2")
        link_name = self._link_name(name, a, b)
        where = f"links[{link_name}]"
        radio = self._parse_radio(radio, where)
        inherited: dict[str, Any] = {}
        for end in (a, b):
            inherited.update(self._ap_radio.get(end, {}))
        if distance is not None and (
            isinstance(distance, bool) or not isinstance(distance, (int, float)) or distance <= 0
        ):
            raise SpecError(
                f"distance must be a positive number of metres, got {distance!r}", field=f"{where}.distance"
            )
        link_radio = Radio(**{**inherited, **radio})
        link_radio.check(where)
        link = WirelessLink(
            a,
            b,
            link_name,
            radio=link_radio,
            distance=float(distance) if distance is not None else None,
            loss=parse_percent(loss, f"{where}.loss"),
            addr1=addr1,
            addr2=addr2,
        )
        self.links.append(link)
        self._note_caller(f"links[{link.name}]")
        return link

    @classmethod
    def _parse_radio(cls, radio: dict[str, Any], where: str) -> dict[str, Any]:
        """Radio keywords checked by name, with a queue model read into a RadioQueue."""
        cls._check_radio_keys(radio, where)
        if radio.get("queue") is not None:
            return {**radio, "queue": RadioQueue.parse(radio["queue"], f"{where}.queue")}
        return radio

    @staticmethod
    def _check_radio_keys(radio: dict[str, Any], where: str) -> None:
        band = radio.get("band")
        if isinstance(band, str):  # '5ghz', '2.4 GHz': the band meant, written as the others are
            radio["band"] = _BANDS.get(band.replace(" ", "").lower(), band)
        unknown = set(radio) - set(RADIO_FIELDS)
        if unknown:
            raise SpecError(
                f"unknown radio parameter(s) {sorted(unknown)}",
                field=where,
                fix=f"radio parameters are {', '.join(RADIO_FIELDS)}",
            )

    def add_route(self, node: Node | str, destination: str, via: str) -> None:
        """A static route that replaces the automatic one for ``destination`` on ``node``."""
        name = self._node_name(node, "routes.node")
        try:
            ipaddress.IPv4Network(destination, strict=False)
        except (ValueError, TypeError):
            raise SpecError(
                f"cannot read route destination {destination!r}",
                field=f"routes[{name}]",
                fix="write an IPv4 prefix, e.g. '10.1.0.0/24'",
            ) from None
        try:
            ipaddress.IPv4Address(via)
        except (ValueError, TypeError):
            raise SpecError(
                f"cannot read gateway {via!r}",
                field=f"routes[{name}]",
                fix="write a neighbour's IPv4 address, e.g. '10.0.0.1'",
            ) from None
        self.routes.append((name, destination, via))

    # -- queries -----------------------------------------------------------------------
    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        raise SpecError(
            f"no link named {name!r}", field="link", fix=f"links are: {', '.join(each.name for each in self.links)}"
        )

    def set_link_shape(self, name: str, direction: str = "both", reset: bool = False, **shape: Any) -> None:
        """Change impairments of a wired link (used by experiment matrices and calibration).

        ``direction`` is "both", "forward" (node1->node2) or "backward"; with ``reset`` the
        new parameters replace the old ones instead of being merged into them.
        """
        link = self.link(name)
        where = f"links[{name}]"
        if not isinstance(link, WiredLink):
            raise SpecError(f"link {name!r} is wireless and has no wired impairments", field=where)
        if direction not in ("both", "forward", "backward"):
            raise SpecError(f"unknown direction {direction!r}", field=where, fix="use both, forward or backward")
        for side in ("forward", "backward"):
            if direction in ("both", side):
                setattr(link, side, parse_shape(shape, where, Shape() if reset else getattr(link, side)))

    def moving_stations(self) -> list[Station]:
        return [n for n in self.nodes.values() if isinstance(n, Station) and n.trajectory is not None]

    def roaming_stations(self) -> dict[str, list[str]]:
        """Stations linked to several access points (they roam among them): station -> APs."""
        aps: dict[str, list[str]] = {}
        for link in self.links:
            if isinstance(link, WirelessLink):
                ends = [self.nodes[end] for end in link.ends()]
                if {n.kind for n in ends} == {"station", "ap"}:
                    station, ap = sorted(ends, key=lambda n: n.kind != "station")
                    aps.setdefault(station.name, []).append(ap.name)
        return {station: names for station, names in aps.items() if len(names) > 1}

    def has_wireless(self) -> bool:
        return any(isinstance(link, WirelessLink) for link in self.links)

    def needs_netem(self) -> bool:
        return any(link.needs_netem() for link in self.links)

    def shortest_paths(self, start: str) -> dict[str, tuple[str, Link | None, int]]:
        """For every node reachable from ``start``: the node before it on a path of fewest
        links, the link between them and the number of links (``start`` maps to itself, None
        and 0). Ties go to the link added first."""
        reached: dict[str, tuple[str, Link | None, int]] = {start: (start, None, 0)}
        frontier = [start]
        while frontier:
            node = frontier.pop(0)
            for link in self.links:
                for here, there in ((link.node1, link.node2), (link.node2, link.node1)):
                    if here == node and there not in reached:
                        reached[there] = (node, link, reached[node][2] + 1)
                        frontier.append(there)
        return reached

    def resolve(self) -> ResolvedTopology:
        from quicbed.spec.resolve import resolve  # resolve.py reads Topology: imported when used

        return resolve(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, recorded with results and handed to external emulators."""
        return {
            "name": self.name,
            "description": self.description,
            "nodes": [
                {
                    "name": n.name,
                    "kind": n.kind,
                    "position": n.position,
                    **({"ssid": n.ssid, "fastack": n.fastack} if isinstance(n, AccessPoint) else {}),
                    **({"mesh_id": n.mesh_id} if isinstance(n, MeshPoint) else {}),
                    **({"trajectory": n.trajectory.to_dict()} if isinstance(n, Station) and n.trajectory else {}),
                    "options": n.options,
                }
                for n in self.nodes.values()
            ],
            "links": [_link_dict(link) for link in self.links],
            "routes": [{"node": n, "destination": d, "via": v} for n, d, v in self.routes],
        }


def _position(value: Any) -> tuple[float, float, float] | None:
    """(x, y, z) in metres from (x, y) or (x, y, z) of finite numbers; None for anything else."""
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        return None
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in value):
        return None
    x, y, *z = (float(c) for c in value)
    return (x, y, z[0] if z else 0.0)


def _link_dict(link: Link) -> dict[str, Any]:
    from dataclasses import asdict

    data: dict[str, Any] = {"name": link.name, "kind": link.kind, "node1": link.node1, "node2": link.node2}
    if isinstance(link, WiredLink):
        for direction in ("forward", "backward"):
            shape: Shape = getattr(link, direction)
            entry = {k: v for k, v in asdict(shape).items() if v not in (None, 0, 0.0)}
            if not shape.jitter:
                del entry["jitter_distribution"]
            if shape.loss is not None:
                entry["loss"] = {"model": type(shape.loss).__name__, **asdict(shape.loss), "mean": shape.loss.mean_loss}
            if shape.trace is not None:
                entry["trace"]["mean_rate"] = shape.trace.mean_rate
            data[direction] = entry
    else:
        data["radio"] = {f.name: getattr(link.radio, f.name) for f in fields(Radio)}
        data["distance"] = link.distance
        data["loss"] = link.loss
    return data


__all__ = ["Topology", "SHAPE_FIELDS"]
