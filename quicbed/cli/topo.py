"""quicbed topo: show and validate topology scripts."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.table import Table

from quicbed.backend_registry import BACKEND_NAMES
from quicbed.cli.console import output_console
from quicbed.errors import BackendError, SpecError
from quicbed.spec.link import WiredLink
from quicbed.spec.loader import applied_parameters, load_topology
from quicbed.spec.units import format_rate, format_time


def parse_params(pairs: list[str]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"cannot read parameter {pair!r}", field="-p", fix="write NAME=VALUE, e.g. -p hops=3")
        params[key.strip()] = value.strip()
    return params


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topo",
        help="show or validate topology scripts",
        description="A topology is a Python file with a function topology(**params) returning a "
        "quicbed.Topology. 'show' prints its nodes, links, addresses and routes; "
        "'validate' checks files and reports each problem with file, field and fix.",
    )
    sub = parser.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show",
        help="print nodes, links, addresses and routes",
        description="Print what a topology script builds, after addressing and routing.",
    )
    show.add_argument("file", help="topology script (FILE.py or FILE.py:FUNCTION)")
    show.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a parameter of the topology function (repeatable)",
    )
    show.add_argument("--json", action="store_true", help="print the description as JSON")
    show.set_defaults(handler=handle_show)
    up = sub.add_parser(
        "up",
        help="build the network and keep it up until Ctrl-C",
        description="Build the topology with a backend (netns by default) and wait. Enter "
        "a node with the printed command; Ctrl-C (or SIGTERM) tears everything "
        "down. WiFi topologies need --backend ns3 (802.11 airtime and "
        "aggregation) or --backend mininet-wifi (the Linux 802.11 stack).",
    )
    up.add_argument("file", help="topology script")
    up.add_argument(
        "--backend",
        choices=list(BACKEND_NAMES),
        default="netns",
        help="emulator that realises the topology (default: netns, wired links only)",
    )
    up.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    up.add_argument(
        "--exec",
        action="append",
        default=[],
        metavar="NODE:COMMAND",
        dest="commands",
        help="start COMMAND (a shell line) on NODE once the network is up (repeatable)",
    )
    up.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="tear down after this many seconds instead of waiting for Ctrl-C",
    )
    up.set_defaults(handler=handle_up)
    validate = sub.add_parser(
        "validate",
        help="check topology scripts",
        description="Load each file with its default parameters (or -p ones) "
        "and report problems. Exit status 1 if any file is invalid.",
    )
    validate.add_argument("files", nargs="+", help="topology scripts")
    validate.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    validate.set_defaults(handler=handle_validate)


def handle_validate(args: argparse.Namespace) -> int:
    console = output_console(highlight=False)
    params = parse_params(args.param)
    failures = 0
    for file in args.files:
        try:
            load_topology(file, params)
        except SpecError as error:
            failures += 1
            console.print(f"[red]invalid[/] {file}")
            for line in error.render().splitlines():
                console.print(f"  {line}", markup=False)
        else:
            console.print(f"[green]ok[/]      {file}")
    return 1 if failures else 0


def handle_show(args: argparse.Namespace) -> int:
    given = parse_params(args.param)
    topo = load_topology(args.file, given)
    resolved = topo.resolve()
    applied = applied_parameters(args.file, given)
    if args.json:
        print(
            json.dumps(
                {
                    **topo.to_dict(),
                    "parameters": applied,
                    "interfaces": [vars(i) for i in resolved.interfaces],
                    "subnets": resolved.segments,
                    "resolved_routes": [vars(r) for r in resolved.routes],
                },
                indent=1,
            )
        )
        return 0
    console = output_console(highlight=False)
    console.print(f"[bold]{topo.name}[/] ({Path(args.file).name})  {topo.description}")
    if applied:
        console.print(
            "parameters: " + ", ".join(f"{k}={v!r}" + (" (given)" if k in given else "") for k, v in applied.items()),
            markup=False,
        )
    nodes = Table("node", "kind", "interfaces", title="nodes")
    for node in topo.nodes.values():
        ifaces = ", ".join(f"{i.name} {i.address or ''}".strip() for i in resolved.interfaces_of(node.name))
        nodes.add_row(node.name, node.kind, ifaces)
    console.print(nodes)
    links = Table("link", "ends", "kind", "parameters", title="links")
    for link in topo.links:
        links.add_row(link.name, f"{link.node1} - {link.node2}", link.kind, describe_link(link))
    console.print(links)
    roaming = topo.roaming_stations()
    moving = {station.name: station for station in topo.moving_stations()}
    if moving or roaming:
        table = Table("station", "path", "access points", title="stations that move or roam")
        for name in dict.fromkeys([*moving, *roaming]):
            table.add_row(
                name,
                describe_path(moving[name].trajectory) if name in moving else "stays put",
                ", ".join(roaming.get(name, [])) or "one",
            )
        console.print(table)
    if resolved.routes:
        routes = Table("node", "destination", "via", "device", title="routes")
        for route in resolved.routes:
            routes.add_row(route.node, route.destination, route.via, route.device)
        console.print(routes)
    return 0


def describe_path(trajectory) -> str:
    """A trajectory in a line: its model, waypoints, where it starts and ends, over how long."""
    start, end = trajectory.start, trajectory.points[-1][1:]
    where = ", ".join(f"{c:g}" for c in start), ", ".join(f"{c:g}" for c in end)
    return (
        f"{trajectory.model}: {len(trajectory.points)} waypoints, ({where[0]}) at 0 s to ({where[1]}) at "
        f"{trajectory.duration:g} s, at most {trajectory.top_speed():.3g} m/s"
    )


def describe_link(link) -> str:
    if not isinstance(link, WiredLink):
        radio = link.radio
        text = f"{radio.standard} {radio.band} ch{radio.channel} {radio.width}MHz " + (
            f"MCS{radio.mcs}" if radio.rate_control == "constant" else radio.rate_control
        )
        return text + (" A-MPDU" if radio.ampdu else " no A-MPDU")
    parts = []
    for label, shape in (("->", link.forward), ("<-", link.backward)):
        if shape.is_ideal():
            continue
        items = []
        if shape.trace:
            items.append(shape.trace.describe())
        if shape.rate:
            items.append(format_rate(shape.rate))
        if shape.delay:
            items.append(format_time(shape.delay) + (f"±{format_time(shape.jitter)}" if shape.jitter else ""))
        if shape.loss:
            items.append(shape.loss.describe())
        for name in ("corrupt", "reorder", "duplicate"):
            if getattr(shape, name):
                items.append(f"{name} {getattr(shape, name) * 100:g} %")
        if shape.queue_limit:
            items.append(f"queue {shape.queue_limit} pkts")
        if shape.slot:
            items.append(f"slot {format_time(shape.slot.min_delay)}-{format_time(shape.slot.max_delay)}")
        parts.append(f"{label} " + ", ".join(items))
    if len(parts) == 2 and link.forward == link.backward:
        return parts[0].replace("->", "<->", 1)
    return "; ".join(parts) or "ideal"


def handle_up(args: argparse.Namespace) -> int:
    import time

    from quicbed.backends import create
    from quicbed.host.signals import install_termination_handlers, raise_if_interrupted

    topo = load_topology(args.file, parse_params(args.param))
    starts = []
    for item in args.commands:
        node, sep, command = item.partition(":")
        if not sep or node not in topo.nodes:
            raise SpecError(
                f"cannot read --exec {item!r}",
                field="--exec",
                fix=f"write NODE:COMMAND with NODE among {', '.join(topo.nodes)}",
            )
        starts.append((node, command))
    install_termination_handlers()
    with create(args.backend, topo) as network:
        for node, command in starts:
            network.node(node).start(["sh", "-c", command], name=f"exec-{node}")
        description = network.describe()
        for warning in description.get("warnings") or []:
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        print(f"network {getattr(network, 'run_id', '')} is up ({args.backend}):", flush=True)
        for name in topo.nodes:
            print(f"  {name:<12} {enter_command(network, name)}", flush=True)
        for ap, log in (description.get("hostapd_logs") or {}).items():
            print(f"  {ap} hostapd log: {log}", flush=True)
        print("press Ctrl-C to tear it down", flush=True)
        deadline = time.monotonic() + args.duration if args.duration else None
        while deadline is None or time.monotonic() < deadline:
            raise_if_interrupted()  # a Ctrl-C lost while the --exec commands started
            time.sleep(0.2)
    print("network removed")
    return 0


def enter_command(network, name: str) -> str:
    """The shell command that opens a shell in node ``name`` (or why there is none)."""
    import shlex

    try:
        handle = network.node(name)
    except BackendError as error:
        return f"({str(error).split(':')[0]})"
    return " ".join(shlex.quote(word) for word in handle.command(["bash"]))
