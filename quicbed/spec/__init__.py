"""Spec layer: topologies and experiments as pure, validated data."""

from quicbed.spec.link import Radio, Shape, Slot, WiredLink, WirelessLink
from quicbed.spec.loss import Bernoulli, GilbertElliott
from quicbed.spec.node import AccessPoint, Host, MeshPoint, Node, Station, Switch
from quicbed.spec.resolve import Interface, ResolvedTopology, Route
from quicbed.spec.topology import Topology

__all__ = [
    "AccessPoint",
    "Bernoulli",
    "GilbertElliott",
    "Host",
    "Interface",
    "MeshPoint",
    "Node",
    "Radio",
    "ResolvedTopology",
    "Route",
    "Shape",
    "Slot",
    "Station",
    "Switch",
    "Topology",
    "WiredLink",
    "WirelessLink",
]
