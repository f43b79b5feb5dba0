"""Nodes of a topology. Hosts, stations and mesh points run endpoints and have IP addresses;
switches and access points join links into one layer-2 segment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from quicbed.spec.mobility import Trajectory


@dataclass
class Node:
    name: str
    position: tuple[float, float, float] | None = None
    #: Free-form per-node options for backends and apps (e.g. cpu limits); recorded in results.
    options: dict[str, object] = field(default_factory=dict)

    kind: ClassVar[str] = "node"
    #: Whether the node has an IP stack (runs processes, gets addresses, routes).
    routed: ClassVar[bool] = True
    #: Whether the node bridges the links attached to it into one segment.
    bridges: ClassVar[bool] = False
    wireless: ClassVar[bool] = False


@dataclass
class Host(Node):
    """A wired end system (client, server, router)."""

    kind: ClassVar[str] = "host"


@dataclass
class Switch(Node):
    """An Ethernet switch: all links attached to it form one subnet."""

    kind: ClassVar[str] = "switch"
    routed: ClassVar[bool] = False
    bridges: ClassVar[bool] = True


@dataclass
class Station(Node):
    """A WiFi client; associates with an access point through a wireless link (with several
    APs of one SSID, it roams between them). ``trajectory``: where it moves during a run."""

    trajectory: Trajectory | None = None
    kind: ClassVar[str] = "station"
    wireless: ClassVar[bool] = True


@dataclass
class AccessPoint(Node):
    """An 802.11 access point bridging its stations and wired links into one subnet.

    ``ssid`` names the BSS; ``radio`` keyword arguments given to ``Topology.add_access_point``
    become the defaults of every wireless link to it.
    """

    ssid: str = ""
    #: TCP ACK acceleration at the AP (Meraki's FastACK; ns3 backend only, docs/ns3-backend.md)
    fastack: bool = False
    kind: ClassVar[str] = "ap"
    routed: ClassVar[bool] = False
    bridges: ClassVar[bool] = True
    wireless: ClassVar[bool] = True


@dataclass
class MeshPoint(Node):
    """An 802.11s mesh node; routes IP and may also have wired links (a mesh gateway)."""

    mesh_id: str = "quicbed-mesh"
    kind: ClassVar[str] = "mesh"
    wireless: ClassVar[bool] = True


NODE_KINDS: dict[str, type[Node]] = {cls.kind: cls for cls in (Host, Switch, Station, AccessPoint, MeshPoint)}
