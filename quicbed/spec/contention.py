"""What a run's download shares its network and its client with, as an experiment file says:
background traffic, competing downloads over other transports, other clients downloading at
once, and CPU stress on the measured client (``background``, ``competitor``, ``clients``,
``stress``). Each section is checked here, with errors that name file, line, field and fix;
the matrix axes that vary them (``competitor.transport``, ``stress.*``) use the same checks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quicbed.devices import DEVICE_CLASSES
from quicbed.spec.transport import Transport
from quicbed.spec.units import parse_rate
from quicbed.spec.values import among, choice, count, expect_mapping, suggest
from quicbed.spec.yamlfile import LocatedData

if TYPE_CHECKING:
    from quicbed.spec.topology import Topology


@dataclass(frozen=True)
class Background:
    kind: str  # "udp" or "tcp"
    rate: float | None  # bit/s for UDP
    source: str
    destination: str


#: a competitor.transport value: every other transport of the run's transport axis at once
OTHERS = "others"


@dataclass(frozen=True)
class Competitor:
    """Downloads over other transports, started with the run's own (shared medium): one
    transport ("tcp-bbr"), several at once ("tcp-bbr+quic-cubic"), or "others"."""

    transport: str  # the default; a ``competitor.transport`` matrix axis sets it per cell
    client: str


@dataclass(frozen=True)
class Stress:
    """CPU stress on the measured client (docs/studies.md, E2): defaults of the
    ``stress.cpu_quota`` and ``stress.load`` matrix axes."""

    #: cores' worth of CPU time the client's processes may use (a cgroup CPU quota); None: no quota
    cpu_quota: float | None = None
    #: CPU-bound processes started in the client's node, on the cores the client runs on
    load: int = 0
    #: a device class whose CPU time per datagram the (QUIC) client takes, in both clocks
    #: (quicbed.apps.client_device); None: this host's own speed
    client_device: str | None = None


def parse_background(doc: LocatedData, value: Any, server: str, client: str, topo: Topology) -> Background | None:
    """``background``: UDP (at a rate) or TCP traffic, from the server to the client unless
    it names other nodes; None when the file has no such section."""
    if value is None:
        return None
    background = expect_mapping(doc, value, "background")
    kind = choice(doc, background.get("kind", "udp"), "background.kind", ("udp", "tcp"))
    rate = background.get("rate")
    parsed = Background(
        kind,
        parse_rate(rate, "background.rate") if rate else None,
        background.get("from", server),
        background.get("to", client),
    )
    for end in ("from", "to"):
        node = background.get(end)
        if node is not None and not among(node, topo.nodes):
            raise doc.error(f"unknown node {node!r}", f"background.{end}", fix=f"nodes are {', '.join(topo.nodes)}")
    return parsed


def parse_competitor(
    doc: LocatedData, value: Any, matrix: Any, transports: dict[str, Transport], client: str, topo: Topology
) -> Competitor | None:
    """``competitor``: its transport (or the first of a ``competitor.transport`` axis of
    ``matrix``) and the node it downloads to (the measured client unless named)."""
    if value is None:
        return None
    competitor = expect_mapping(doc, value, "competitor")
    unknown = set(competitor) - {"transport", "client"}
    if unknown:
        key = sorted(unknown)[0]
        raise doc.error(
            f"unknown competitor option {key!r}", f"competitor.{key}", fix="a competitor takes transport and client"
        )
    axis = expect_mapping(doc, matrix, "matrix").get("competitor.transport")
    rival = competitor.get("transport")
    if rival is None and isinstance(axis, list) and axis:
        rival = axis[0]  # a default only: the axis is checked with the matrix
    elif rival is None:
        raise doc.error(
            "a competitor needs a transport",
            "competitor",
            fix="write competitor: {transport: tcp}, or give a competitor.transport matrix axis",
        )
    else:
        check_competitors(doc, rival, "competitor.transport", transports)
    node = competitor.get("client", client)
    if not among(node, topo.nodes) or not topo.nodes[node].routed:
        raise doc.error(
            f"competitor client {node!r} is not a host, station or mesh point of the topology", "competitor.client"
        )
    return Competitor(rival, node)


def check_competitors(doc: LocatedData, value: Any, field: str, transports: dict[str, Transport]) -> None:
    """A competitor.transport value: a transport, several joined by "+", or "others"."""
    if value == OTHERS:
        if OTHERS in transports:
            raise doc.error(
                f"a transport is named {OTHERS!r}, which competitor.transport reserves",
                field,
                fix="rename that transport",
            )
        return
    names = value.split("+") if isinstance(value, str) else [value]
    for name in names:
        if not among(name, transports):
            raise doc.error(
                f"unknown transport {name!r}",
                field,
                fix=f"{suggest(str(name), list(transports))}use one of {', '.join(transports)}, "
                f"several joined by '+' (tcp-bbr+quic-cubic), or {OTHERS!r} (every other transport "
                "of the transport axis)",
            )


def parse_clients(
    doc: LocatedData, value: Any, client: str, competitor: Competitor | None, topo: Topology
) -> tuple[str, ...] | str | None:
    """``clients``: "stations" or a list of nodes; each downloads with the run's transport and
    workload at the same time as ``client`` (which must be one of them)."""
    if value is None:
        return None
    if competitor is not None:
        raise doc.error(
            "clients and competitor cannot be combined",
            "clients",
            fix="many clients download with one transport; a competitor is a second transport",
        )
    stations = [n for n, node in topo.nodes.items() if node.kind == "station"]
    if value == "stations":
        if client not in stations:
            raise doc.error(
                f"client {client!r} is not a station of the topology",
                "client",
                fix=f"with clients: stations, the measured client is one of them, e.g. {stations[:1]}"
                if stations
                else "this topology has no stations: list the clients by name",
            )
        return "stations"
    if not isinstance(value, list) or not value or not all(isinstance(name, str) for name in value):
        raise doc.error(
            f"expected 'stations' or a list of nodes, got {value!r}",
            "clients",
            fix="write clients: stations, or clients: [sta1, sta2]",
        )
    for index, name in enumerate(value):
        if not among(name, topo.nodes) or not topo.nodes[name].routed:
            raise doc.error(
                f"{name!r} is not a host, station or mesh point of the topology",
                f"clients[{index}]",
                fix=f"choose among {', '.join(n for n, v in topo.nodes.items() if v.routed)}",
            )
    if client not in value:
        raise doc.error(
            f"the measured client {client!r} is not among the clients",
            "clients",
            fix=f"add {client} to the list, or set client: to one of them",
        )
    return tuple(value)


def parse_stress(doc: LocatedData, value: Any) -> Stress:
    """``stress``: a CPU quota, a count of busy processes and a client device (no stress when absent)."""
    stress = expect_mapping(doc, value, "stress")
    unknown = set(stress) - {"cpu_quota", "load", "client_device"}
    if unknown:
        key = min(unknown)
        raise doc.error(
            f"unknown stress option {key!r}",
            f"stress.{key}",
            fix="stress takes cpu_quota (cores, or null), load (a count of busy processes) and "
            "client_device (a device class, or null)",
        )
    return Stress(
        parse_cpu_quota(doc, stress.get("cpu_quota"), "stress.cpu_quota"),
        count(doc, stress.get("load", 0), "stress.load", 0),
        parse_client_device(doc, stress.get("client_device"), "stress.client_device"),
    )


def parse_client_device(doc: LocatedData, value: Any, field: str) -> str | None:
    """A device class name (quicbed.host.device_cpu), or null for this host's own speed."""
    if value is None:
        return None
    names = [device.name for device in DEVICE_CLASSES]
    if value not in names:
        raise doc.error(
            f"unknown client device {value!r}",
            field,
            fix=f"one of {', '.join(names)} (or null); docs/metrics.md, 'A weak client CPU', says what each models",
        )
    return str(value)


def parse_cpu_quota(doc: LocatedData, value: Any, field: str) -> float | None:
    """A CPU quota in cores (0.5: half of one core), or null for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.01 <= value <= (os.cpu_count() or 1):
        raise doc.error(
            f"expected a number of cores from 0.01 to {os.cpu_count() or 1} (or null), got {value!r}",
            field,
            fix="e.g. 0.5 lets the client use half of one core",
        )
    return float(value)
