"""netns backend: wired topologies from network namespaces, veth pairs, bridges and tc.

Every node is a namespace ``qb<RUNID>-<node>``; switches are namespaces holding a bridge.
Veth pairs are created directly inside the two namespaces, so nothing is ever added to the
host's own namespace, and deleting the namespaces removes every link and qdisc. The only
host-wide change is widening ``net.ipv4.tcp_allowed_congestion_control`` (so namespaces
can choose cubic, reno or bbr), recorded and restored when the last network stops.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from quicbed.backends.base import Network
from quicbed.backends.namespaces import (
    NamespaceNode,
    allow_congestion_controls,
    remove_leftovers,
    require_root_and_tools,
    run_checked,
)
from quicbed.backends.tc import qdisc_commands, unrealisable
from quicbed.errors import BackendError, MissingDependency
from quicbed.host import ownership
from quicbed.spec.link import WiredLink, WirelessLink
from quicbed.spec.topology import Topology


class NamespaceNetwork(Network):
    backend_name = "netns"

    def __init__(self, topology: Topology, run_id: str | None = None) -> None:
        wireless = [link.name for link in topology.links if isinstance(link, WirelessLink)]
        if wireless:
            raise BackendError(
                f"the netns backend realises wired links only; {', '.join(wireless)} "
                f"{'is' if len(wireless) == 1 else 'are'} wireless (fix: run with --backend ns3 for "
                "802.11 airtime and aggregation, or --backend mininet-wifi for the Linux WiFi stack)"
            )
        super().__init__(topology)
        self.run_id = run_id or ownership.new_run_id()
        self._nodes = {name: NamespaceNode(self, name) for name in topology.nodes}
        self.record = ownership.Ownership.create(self.run_id)
        self._iface_of = {(i.node, i.link): i for i in self.resolved.interfaces}

    def node(self, name: str) -> NamespaceNode:
        try:
            return self._nodes[name]
        except KeyError:
            raise BackendError(f"no node {name!r} in this network (nodes: {', '.join(self._nodes)})") from None

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend_name,
            "run_id": self.run_id,
            "namespaces": {name: n.namespace for name, n in self._nodes.items()},
        }

    # -- building ----------------------------------------------------------------------
    def start(self) -> None:
        check_requirements(self.topology)
        self.record.namespaces = [n.namespace for n in self._nodes.values()]
        self.record.save()  # before anything exists, so a kill -9 from here on is cleanable
        self._allow_congestion_controls()
        for node in self._nodes.values():
            run_checked(["ip", "netns", "add", node.namespace], "creating a namespace")
            self._ip(node, "link set lo up")
            run_checked(
                [
                    "ip",
                    "netns",
                    "exec",
                    node.namespace,
                    "sysctl",
                    "-q",
                    "-w",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                    f"net.ipv4.ip_forward={1 if self.topology.nodes[node.name].routed else 0}",
                ],
                "setting namespace sysctls",
            )
        iface_of = self._iface_of
        for link in self.topology.links:
            assert isinstance(link, WiredLink)
            a, b = iface_of[(link.node1, link.name)], iface_of[(link.node2, link.name)]
            ns_a, ns_b = self._nodes[a.node].namespace, self._nodes[b.node].namespace
            run_checked(
                ["ip", "-n", ns_a, "link", "add", a.name, "type", "veth", "peer", "name", b.name, "netns", ns_b],
                f"creating link {link.name}",
            )
        for node in self._nodes.values():
            self._configure_node(node)
        for link in self.topology.links:
            assert isinstance(link, WiredLink)
            self._apply_shapes(link)
        self._wait_until_forwarding()
        self.started = True

    def _wait_until_forwarding(self, timeout: float = 10.0) -> None:
        """Wait for carrier on every interface and forwarding on every bridge port.

        The kernel reports a veth's carrier through linkwatch, which may take up to a second;
        until then a bridge port is 'disabled' and the first packets of a run would wait.
        """
        deadline = time.monotonic() + timeout
        pending: list[str] = []
        while time.monotonic() < deadline:
            pending = []
            for node in self._nodes.values():
                links = run_checked(["ip", "-n", node.namespace, "-o", "link", "show"], "reading link state").stdout
                pending += [
                    f"{node.name}:{line.split(':')[1].strip()}" for line in links.splitlines() if "NO-CARRIER" in line
                ]
                if self.topology.nodes[node.name].bridges:
                    ports = run_checked(["bridge", "-n", node.namespace, "link", "show"], "reading bridge ports").stdout
                    pending += [
                        f"{node.name}:{line.split(':')[1].strip()}"
                        for line in ports.splitlines()
                        if "state forwarding" not in line
                    ]
            if not pending:
                return
            time.sleep(0.05)
        raise BackendError(f"interfaces not ready after {timeout:g} s: {', '.join(pending)}")

    def set_link_shape(self, name: str, direction: str = "both", reset: bool = False, **shape: Any) -> None:
        """Change a wired link's impairments while the network runs (see Topology.set_link_shape)."""
        self.topology.set_link_shape(name, direction, reset, **shape)
        link = self.topology.link(name)
        assert isinstance(link, WiredLink)  # set_link_shape() refuses a wireless link
        self._reapply(link)

    def replace_link_shapes(self, link: WiredLink) -> None:
        """Give the live link of the same name ``link``'s impairments (both directions)."""
        live = self.topology.link(link.name)
        assert isinstance(live, WiredLink)
        live.forward, live.backward = link.forward, link.backward
        self._reapply(live)

    def _reapply(self, link: WiredLink) -> None:
        from quicbed.host.capabilities import has_netem

        if link.needs_netem() and not has_netem():
            raise MissingDependency(
                f"link {link.name} would need netem, which this host's kernel lacks (fix: run with --vm)"
            )
        self._apply_shapes(link, replace=True)

    def _apply_shapes(self, link: WiredLink, replace: bool = False) -> None:
        for end, shape in ((link.node1, link.forward), (link.node2, link.backward)):
            namespace = self._nodes[end].namespace
            device = self._iface_of[(end, link.name)].name
            if replace:
                subprocess.run(
                    ["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"], capture_output=True, check=False
                )  # fails harmlessly when there is none
            for command in qdisc_commands(device, shape):
                run_checked(["tc", "-n", namespace, *command], f"shaping link {link.name}")

    def _ip(self, node: NamespaceNode, command: str) -> None:
        run_checked(["ip", "-n", node.namespace, *command.split()], f"configuring {node.name}")

    def _configure_node(self, node: NamespaceNode) -> None:
        spec = self.topology.nodes[node.name]
        interfaces = self.resolved.interfaces_of(node.name)
        if spec.bridges:
            self._ip(node, "link add br0 type bridge forward_delay 0 stp_state 0")
        for iface in interfaces:
            node.offloads_off(iface.name)
            if spec.bridges:
                self._ip(node, f"link set {iface.name} master br0")
            elif iface.address:
                self._ip(node, f"addr add {iface.address} dev {iface.name}")
            self._ip(node, f"link set {iface.name} up")
        if spec.bridges:
            self._ip(node, "link set br0 up")
        for route in (r for r in self.resolved.routes if r.node == node.name):
            self._ip(node, f"route add {route.destination} via {route.via} dev {route.device}")

    def _allow_congestion_controls(self) -> None:
        allow_congestion_controls(self.record)

    # -- tearing down ------------------------------------------------------------------
    def _teardown(self) -> None:
        remove_leftovers(self.record)


def kernel_problem(topology: Topology | None) -> str | None:
    """What this kernel lacks for the topology's links: netem, for delay, loss or jitter."""
    from quicbed.host.capabilities import has_netem

    if topology is not None and topology.needs_netem() and not has_netem():
        return "this kernel has no netem"
    return None


def check_requirements(topology: Topology) -> None:
    from quicbed.host.capabilities import has_netem

    require_root_and_tools(
        "the netns backend needs root to create network namespaces",
        (
            ("ip", "apt-get install iproute2"),
            ("tc", "apt-get install iproute2"),
            ("ethtool", "apt-get install ethtool"),
        ),
    )
    problems = unrealisable(topology.links)
    if problems:
        raise BackendError("the netns backend cannot build these links: " + "; ".join(problems))
    if topology.needs_netem() and not has_netem():
        needing = [link.name for link in topology.links if link.needs_netem()]
        raise MissingDependency(
            f"link(s) {', '.join(needing)} need netem (delay, loss, jitter, ...) and this host's kernel "
            "has no sch_netem (fix: run with --vm to use a microVM with a full kernel, see 'quicbed vm')"
        )
