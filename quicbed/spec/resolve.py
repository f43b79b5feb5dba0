"""From a Topology to interfaces, subnets, addresses and static routes, with validation.

Segments are layer-2 domains: a switch or an access point with everything attached to it,
all mesh peerings of one mesh id, or a single point-to-point link. Each segment is one IP
subnet; routed nodes (hosts, stations, mesh points) get one address per segment they touch
and shortest-path static routes to every other segment.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quicbed.errors import SpecError
from quicbed.spec.link import WirelessLink
from quicbed.spec.node import AccessPoint, MeshPoint, Station

if TYPE_CHECKING:
    from quicbed.spec.topology import Topology


@dataclass(frozen=True)
class Interface:
    node: str
    name: str
    segment: int
    address: str | None  # "10.0.1.2/24" on routed nodes, None on switch/AP ports
    link: str


@dataclass(frozen=True)
class Route:
    node: str
    destination: str
    via: str
    device: str


@dataclass
class ResolvedTopology:
    """Interfaces, segments, addresses and routes derived from a Topology."""

    topology: Topology
    interfaces: list[Interface]
    segments: dict[int, str]  # segment id -> subnet
    routes: list[Route]

    def interfaces_of(self, node: str) -> list[Interface]:
        return [i for i in self.interfaces if i.node == node]

    def address(self, node: str) -> str:
        """The node's first IP address (without prefix length), for apps to connect to."""
        for iface in self.interfaces_of(node):
            if iface.address:
                return iface.address.split("/")[0]
        raise SpecError(
            f"node {node!r} has no IP address",
            field=f"nodes[{node}]",
            fix="only hosts, stations and mesh points have addresses",
        )


class SpecErrors(SpecError):
    """Several problems found at once; each is listed on its own line."""

    def __init__(self, errors: list[SpecError]) -> None:
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)

    def located(self, source: str) -> "SpecErrors":
        return SpecErrors([e.located(source) for e in self.errors])


def check_structure(topo: Topology) -> list[SpecError]:
    """Problems that do not depend on addressing: link kinds, duplicates, connectivity."""
    errors: list[SpecError] = []
    if not topo.nodes:
        return [SpecError("the topology has no nodes", field="nodes", fix="add nodes with add_host() etc.")]
    seen_pairs: set[frozenset[str]] = set()
    for link in topo.links:
        where = f"links[{link.name}]"
        a, b = topo.nodes[link.node1], topo.nodes[link.node2]
        if a.name == b.name:
            errors.append(SpecError("a link cannot connect a node to itself", field=where))
            continue
        pair = frozenset((a.name, b.name))
        if pair in seen_pairs:
            errors.append(
                SpecError(f"{a.name} and {b.name} are linked twice", field=where, fix="keep one link per pair of nodes")
            )
        seen_pairs.add(pair)
        if isinstance(link, WirelessLink):
            kinds = {a.kind, b.kind}
            if kinds == {"station", "ap"}:
                station = a if isinstance(a, Station) else b
                ap = b if station is a else a
                if isinstance(station, Station) and station.trajectory is not None and link.distance is not None:
                    errors.append(
                        SpecError(
                            f"station {station.name} moves, so its distance to {ap.name} changes",
                            field=f"{where}.distance",
                            fix="leave distance out: its waypoints place the station",
                        )
                    )
            elif kinds != {"mesh"}:
                stray = next((node for node in (a, b) if isinstance(node, Station)), None)
                fix = (
                    (
                        f"link {stray.name} to an access point ({_known_aps(topo)}), or make both ends hosts "
                        "and use add_link() for a cable"
                    )
                    if stray
                    else "use add_link() for cables"
                )
                errors.append(
                    SpecError(
                        f"a wireless link joins a station to an access point or two mesh "
                        f"points, not a {a.kind} and a {b.kind}",
                        field=where,
                        fix=fix,
                    )
                )
            try:
                link.radio.check(where)
            except SpecError as error:
                errors.append(error)
        else:
            for node in (a, b):
                if isinstance(node, Station):
                    errors.append(
                        SpecError(
                            f"station {node.name} has a cable; stations connect through an access point",
                            field=where,
                            fix=f"link {node.name} to an access point with add_wireless_link() "
                            f"({_known_aps(topo)}), or make it a host with add_host() to "
                            "give it a cable",
                        )
                    )
    errors += _check_bss_radios(topo)
    errors += _check_connected(topo)
    if not errors:
        errors += _check_roaming(topo)
    return errors


def _known_aps(topo: Topology) -> str:
    names = [node.name for node in topo.nodes.values() if isinstance(node, AccessPoint)]
    return f"known: {', '.join(names)}" if names else "there is none yet: add one with add_access_point()"


def _check_roaming(topo: Topology) -> list[SpecError]:
    """A station linked to several APs roams among them: one SSID, one subnet (its address
    stays when it moves on)."""
    errors = []
    segment_of_link, _ = _segments(topo)
    segment = {link.name: segment_of_link[index] for index, link in enumerate(topo.links)}
    for station, aps in topo.roaming_stations().items():
        where = f"nodes[{station}]"
        # roaming_stations() lists access points only
        ssids = {node.ssid for node in (topo.nodes[ap] for ap in aps) if isinstance(node, AccessPoint)}
        if len(ssids) > 1:
            errors.append(
                SpecError(
                    f"station {station} is linked to {', '.join(aps)}, which have different SSIDs "
                    f"({', '.join(sorted(ssids))}); a station roams within one SSID",
                    field=where,
                    fix="give these access points one ssid=, or link the station to one of them",
                )
            )
        segments = {
            segment[link.name] for link in topo.links if isinstance(link, WirelessLink) and station in link.ends()
        }
        if len(segments) > 1:
            errors.append(
                SpecError(
                    f"station {station} roams between {', '.join(aps)}, which are not bridged into "
                    "one subnet: it would need a new address at each",
                    field=where,
                    fix="connect the access points to one switch (or to each other) by cable",
                )
            )
    return errors


def _check_bss_radios(topo: Topology) -> list[SpecError]:
    errors = []
    for ap in (n for n in topo.nodes.values() if isinstance(n, AccessPoint)):
        radios = {
            (each.radio.standard, each.radio.band, each.radio.channel, each.radio.width): each.name
            for each in topo.links
            if isinstance(each, WirelessLink) and ap.name in each.ends()
        }
        if len(radios) > 1:
            errors.append(
                SpecError(
                    f"stations of {ap.name} use different standards, bands, channels "
                    f"or widths ({', '.join(radios.values())})",
                    field=f"nodes[{ap.name}]",
                    fix="set radio parameters on add_access_point() only",
                )
            )
    return errors


def _check_connected(topo: Topology) -> list[SpecError]:
    adjacency: dict[str, set[str]] = {name: set() for name in topo.nodes}
    for link in topo.links:
        adjacency[link.node1].add(link.node2)
        adjacency[link.node2].add(link.node1)
    first = next(iter(topo.nodes))
    reached = {first}
    queue = deque([first])
    while queue:
        for neighbour in adjacency[queue.popleft()] - reached:
            reached.add(neighbour)
            queue.append(neighbour)
    missing = [name for name in topo.nodes if name not in reached]
    if not missing:
        return []
    return [
        SpecError(
            f"node(s) {', '.join(missing)} cannot reach {first}",
            field=f"nodes[{missing[0]}]",
            fix="link every node to the rest of the network",
        )
    ]


def _segments(topo: Topology) -> tuple[list[int], int]:
    """Segment id of each link (index-aligned with topo.links) and the number of segments."""
    parent = list(range(len(topo.links)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_bridge: dict[str, int] = {}
    by_mesh: dict[str, int] = {}
    for index, link in enumerate(topo.links):
        keys = []
        for end in link.ends():
            node = topo.nodes[end]
            if node.bridges:
                keys.append((by_bridge, end))
        if isinstance(link, WirelessLink) and isinstance(node1 := topo.nodes[link.node1], MeshPoint):
            keys.append((by_mesh, node1.mesh_id))
        for table, key in keys:
            if key in table:
                parent[find(index)] = find(table[key])
            else:
                table[key] = index
    roots: dict[int, int] = {}
    ids = [roots.setdefault(find(i), len(roots)) for i in range(len(topo.links))]
    return ids, len(roots)


def resolve(topo: Topology) -> ResolvedTopology:
    errors = check_structure(topo)
    if errors:
        raise SpecErrors(errors)
    link_segment, count = _segments(topo)

    # One interface per (routed node, segment); ports on switches and APs.
    interfaces: dict[tuple[str, int], dict] = {}
    counters: dict[tuple[str, str], int] = {}
    for index, link in enumerate(topo.links):
        segment = link_segment[index]
        for end, requested in ((link.node1, link.addr1), (link.node2, link.addr2)):
            node = topo.nodes[end]
            key = (end, segment) if node.routed else (end, -1 - index)
            if key in interfaces:
                if requested:
                    interfaces[key]["requested"] = requested
                continue
            if isinstance(link, WirelessLink):
                prefix = "mesh" if isinstance(node, MeshPoint) else "wlan"
            else:
                prefix = "eth"
            number = counters.get((end, prefix), 0)
            counters[(end, prefix)] = number + 1
            if requested and not node.routed:
                raise SpecErrors(
                    [
                        SpecError(
                            f"{end} is a {node.kind} and has no IP address",
                            field=f"links[{link.name}].addr{1 if end == link.node1 else 2}",
                            fix="give addresses to hosts, stations and mesh points only",
                        )
                    ]
                )
            interfaces[key] = {
                "node": end,
                "name": f"{prefix}{number}",
                "segment": segment,
                "requested": requested,
                "link": link.name,
                "routed": node.routed,
            }

    subnets, addresses = _assign_addresses(topo, interfaces, count)
    resolved_ifaces = [
        Interface(
            i["node"],
            i["name"],
            i["segment"],
            addresses.get((i["node"], i["segment"])) if i["routed"] else None,
            i["link"],
        )
        for i in interfaces.values()
    ]
    routes = _routes(topo, resolved_ifaces, subnets)
    return ResolvedTopology(topo, resolved_ifaces, subnets, routes)


def _assign_addresses(topo: Topology, interfaces: dict[tuple[str, int], dict], count: int):
    errors: list[SpecError] = []
    subnets: dict[int, ipaddress.IPv4Network] = {}
    addresses: dict[tuple[str, int], str] = {}
    taken: dict[ipaddress.IPv4Address, str] = {}
    for iface in interfaces.values():
        if not iface["requested"]:
            continue
        where = f"links[{iface['link']}].addr"
        try:
            address = ipaddress.IPv4Interface(iface["requested"])
        except ValueError:
            errors.append(
                SpecError(
                    f"cannot read address {iface['requested']!r}",
                    field=where,
                    fix="write an IPv4 address with prefix length, e.g. '10.1.0.1/24'",
                )
            )
            continue
        if "/" not in iface["requested"]:
            errors.append(
                SpecError(
                    f"address {iface['requested']!r} has no prefix length",
                    field=where,
                    fix=f"write e.g. '{iface['requested']}/24'",
                )
            )
            continue
        segment = iface["segment"]
        if segment in subnets and subnets[segment] != address.network:
            errors.append(
                SpecError(
                    f"{address} is not in {subnets[segment]}, the subnet of its segment",
                    field=where,
                    fix="give all nodes of a switch, AP or mesh one subnet",
                )
            )
            continue
        if address.ip in taken:
            errors.append(
                SpecError(
                    f"address {address.ip} is used by {taken[address.ip]} and {iface['node']}",
                    field=where,
                    fix="give every interface its own address",
                )
            )
            continue
        if address.ip in (address.network.network_address, address.network.broadcast_address):
            errors.append(
                SpecError(
                    f"{address.ip} is the network or broadcast address of {address.network}",
                    field=where,
                    fix="pick a host address inside the subnet",
                )
            )
            continue
        subnets[segment] = address.network
        taken[address.ip] = iface["node"]
        addresses[(iface["node"], segment)] = str(address)
    try:
        pool = ipaddress.IPv4Network(topo.subnet_pool)
    except ValueError:
        raise SpecErrors(
            [
                SpecError(
                    f"cannot read subnet pool {topo.subnet_pool!r}", field="subnet_pool", fix="write e.g. '10.0.0.0/16'"
                )
            ]
        ) from None
    free = (net for net in pool.subnets(new_prefix=24) if not any(net.overlaps(used) for used in subnets.values()))
    for segment in range(count):
        if segment not in subnets:
            try:
                subnets[segment] = next(free)
            except StopIteration:
                errors.append(
                    SpecError(
                        f"subnet pool {pool} has too few /24 subnets for {count} segments",
                        field="subnet_pool",
                        fix="use a larger pool, e.g. '10.0.0.0/16'",
                    )
                )
                break
    if errors:
        raise SpecErrors(errors)
    for iface in interfaces.values():
        key = (iface["node"], iface["segment"])
        if not iface["routed"] or key in addresses:
            continue
        hosts = (ip for ip in subnets[iface["segment"]].hosts() if ip not in taken)
        ip = next(hosts, None)
        if ip is None:
            raise SpecErrors(
                [SpecError(f"subnet {subnets[iface['segment']]} is full", field=f"links[{iface['link']}]")]
            )
        taken[ip] = iface["node"]
        addresses[key] = f"{ip}/{subnets[iface['segment']].prefixlen}"
    return {s: str(n) for s, n in sorted(subnets.items())}, addresses


def _routes(topo: Topology, interfaces: list[Interface], subnets: dict[int, str]) -> list[Route]:
    routed = [i for i in interfaces if i.address]
    on_segment: dict[int, list[Interface]] = {}
    for iface in routed:
        on_segment.setdefault(iface.segment, []).append(iface)
    routes: list[Route] = []
    overrides = {(node, ipaddress.IPv4Network(dest, strict=False)): via for node, dest, via in topo.routes}
    for source in (n for n in topo.nodes.values() if n.routed):
        own = {i.segment: i for i in routed if i.node == source.name}
        # Breadth-first search over routed nodes; remember the first hop taken to reach each.
        first_hop: dict[str, tuple[Interface, Interface]] = {}
        distance = {source.name: 0}
        queue = deque([source.name])
        while queue:
            current = queue.popleft()
            for mine in (i for i in routed if i.node == current):
                for neighbour in on_segment[mine.segment]:
                    if neighbour.node in distance:
                        continue
                    distance[neighbour.node] = distance[current] + 1
                    first_hop[neighbour.node] = first_hop[current] if current != source.name else (mine, neighbour)
                    queue.append(neighbour.node)
        for segment, subnet in subnets.items():
            if segment in own or segment not in on_segment:
                continue
            members = [i.node for i in on_segment[segment] if i.node in distance]
            if not members:
                continue
            if (source.name, ipaddress.IPv4Network(subnet)) in overrides:
                continue
            nearest = min(members, key=lambda n: distance[n])
            out, gateway = first_hop[nearest]
            assert gateway.address is not None  # on_segment holds routed interfaces only
            routes.append(Route(source.name, subnet, gateway.address.split("/")[0], out.name))
    for (node, dest), via in overrides.items():
        device = _device_for(via, [i for i in routed if i.node == node])
        if device is None:
            raise SpecErrors(
                [
                    SpecError(
                        f"gateway {via} of the route to {dest} is not on a subnet of {node}",
                        field=f"routes[{node}]",
                        fix="use a neighbour's address as 'via'",
                    )
                ]
            )
        routes.append(Route(node, str(dest), via, device))
    return routes


def _device_for(via: str, interfaces: list[Interface]) -> str | None:
    try:
        gateway = ipaddress.IPv4Address(via)
    except ValueError:
        return None
    for iface in interfaces:
        if gateway in ipaddress.IPv4Interface(iface.address).network:
            return iface.name
    return None
