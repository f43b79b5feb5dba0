"""netns backend: wired topologies from network namespaces, veth pairs, bridges and tc.

Every node is a namespace ``qb<RUNID>-<node>``; switches are namespaces holding a bridge.
Veth pairs are created directly inside the two namespaces, so nothing is ever added to the
host's own namespace, and deleting the namespaces removes every link and qdisc. The only
host-wide change is widening ``net.ipv4.tcp_allowed_congestion_control`` (so namespaces
can choose cubic, reno or bbr), recorded and restored when the last network stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from quicbed.backends import ownership
from quicbed.backends.base import Network, NodeHandle
from quicbed.backends.tc import qdisc_commands
from quicbed.errors import BackendError, MissingDependency
from quicbed.spec.link import WiredLink, WirelessLink
from quicbed.spec.topology import Topology

ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
OFFLOADS = ("tso", "gso", "gro", "lro", "tx-checksumming")
#: seconds a failing undo command of a dead network is retried (see remove_leftovers)
UNDO_RETRY_S = 20.0


def _run(argv: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BackendError(f"{what} failed: {' '.join(argv)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class NamespaceNode(NodeHandle):
    network: "NamespaceNetwork"

    @property
    def namespace(self) -> str:
        return ownership.namespace_name(self.network.run_id, self.name)

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]

    def sysctl(self, key: str, value: str) -> None:
        """Set a per-namespace sysctl (e.g. net.ipv4.tcp_congestion_control)."""
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])

    def qdisc_show(self) -> str:
        return _run(["tc", "-n", self.namespace, "qdisc", "show"], "tc qdisc show").stdout


class NamespaceNetwork(Network):
    backend_name = "netns"

    def __init__(self, topology: Topology, run_id: str | None = None) -> None:
        wireless = [link.name for link in topology.links if isinstance(link, WirelessLink)]
        if wireless:
            raise BackendError(
                f"the netns backend realises wired links only; {', '.join(wireless)} "
                f"{'is' if len(wireless) == 1 else 'are'} wireless (fix: run with --backend ns3 for "
                "802.11 airtime and aggregation, or --backend mininet-wifi for the Linux WiFi stack)")
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
        return {"backend": self.backend_name, "run_id": self.run_id,
                "namespaces": {name: n.namespace for name, n in self._nodes.items()}}

    # -- building ----------------------------------------------------------------------
    def start(self) -> None:
        check_requirements(self.topology)
        self.record.namespaces = [n.namespace for n in self._nodes.values()]
        self.record.save()  # before anything exists, so a kill -9 from here on is cleanable
        self._allow_congestion_controls()
        for node in self._nodes.values():
            _run(["ip", "netns", "add", node.namespace], "creating a namespace")
            self._ip(node, "link set lo up")
            _run(["ip", "netns", "exec", node.namespace, "sysctl", "-q", "-w",
                  "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                  f"net.ipv4.ip_forward={1 if self.topology.nodes[node.name].routed else 0}"],
                 "setting namespace sysctls")
        iface_of = self._iface_of
        for link in self.topology.links:
            assert isinstance(link, WiredLink)
            a, b = iface_of[(link.node1, link.name)], iface_of[(link.node2, link.name)]
            ns_a, ns_b = self._nodes[a.node].namespace, self._nodes[b.node].namespace
            _run(["ip", "-n", ns_a, "link", "add", a.name, "type", "veth", "peer", "name", b.name,
                  "netns", ns_b], f"creating link {link.name}")
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
                links = _run(["ip", "-n", node.namespace, "-o", "link", "show"], "reading link state").stdout
                pending += [f"{node.name}:{line.split(':')[1].strip()}" for line in links.splitlines()
                            if "NO-CARRIER" in line]
                if self.topology.nodes[node.name].bridges:
                    ports = _run(["bridge", "-n", node.namespace, "link", "show"], "reading bridge ports").stdout
                    pending += [f"{node.name}:{line.split(':')[1].strip()}" for line in ports.splitlines()
                                if "state forwarding" not in line]
            if not pending:
                return
            time.sleep(0.05)
        raise BackendError(f"interfaces not ready after {timeout:g} s: {', '.join(pending)}")

    def set_link_shape(self, name: str, direction: str = "both", reset: bool = False, **shape: Any) -> None:
        """Change a wired link's impairments while the network runs (see Topology.set_link_shape)."""
        self.topology.set_link_shape(name, direction, reset, **shape)
        self._reapply(self.topology.link(name))  # type: ignore[arg-type]

    def replace_link_shapes(self, link: WiredLink) -> None:
        """Give the live link of the same name ``link``'s impairments (both directions)."""
        live = self.topology.link(link.name)
        assert isinstance(live, WiredLink)
        live.forward, live.backward = link.forward, link.backward
        self._reapply(live)

    def _reapply(self, link: WiredLink) -> None:
        from quicbed.host.capabilities import has_netem

        if link.needs_netem() and not has_netem():
            raise MissingDependency(f"link {link.name} would need netem, which this host's kernel lacks "
                                    "(fix: run with --vm)")
        self._apply_shapes(link, replace=True)

    def _apply_shapes(self, link: WiredLink, replace: bool = False) -> None:
        for end, shape in ((link.node1, link.forward), (link.node2, link.backward)):
            namespace = self._nodes[end].namespace
            device = self._iface_of[(end, link.name)].name
            if replace:
                subprocess.run(["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"],
                               capture_output=True, check=False)  # fails harmlessly when there is none
            for command in qdisc_commands(device, shape):
                _run(["tc", "-n", namespace, *command], f"shaping link {link.name}")

    def _ip(self, node: NamespaceNode, command: str) -> None:
        _run(["ip", "-n", node.namespace, *command.split()], f"configuring {node.name}")

    def _configure_node(self, node: NamespaceNode) -> None:
        spec = self.topology.nodes[node.name]
        interfaces = self.resolved.interfaces_of(node.name)
        if spec.bridges:
            self._ip(node, "link add br0 type bridge forward_delay 0 stp_state 0")
        for iface in interfaces:
            _run(["ip", "netns", "exec", node.namespace, "ethtool", "-K", iface.name,
                  *(word for offload in OFFLOADS for word in (offload, "off"))],
                 f"turning offloads off on {node.name}:{iface.name}")
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


def allow_congestion_controls(record: ownership.Ownership) -> None:
    """Namespaces may only pick algorithms listed in the host-wide allowed list: widen it
    (recording the old value in ``record``, restored when the last network stops)."""
    try:
        allowed = ALLOWED_CC.read_text().split()
        available = AVAILABLE_CC.read_text().split()
    except OSError:
        return
    wanted = allowed + [cc for cc in available if cc not in allowed]
    if wanted != allowed:
        record.restore_sysctls[str(ALLOWED_CC)] = " ".join(allowed)
        record.save()
        ALLOWED_CC.write_text(" ".join(wanted))


def check_requirements(topology: Topology) -> None:
    from quicbed.host.capabilities import has_netem

    if os.geteuid() != 0:
        raise MissingDependency("the netns backend needs root to create network namespaces "
                                "(fix: run quicbed with sudo)")
    for binary, package in (("ip", "iproute2"), ("tc", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(binary) is None:
            raise MissingDependency(f"'{binary}' is not installed (fix: apt-get install {package})")
    if topology.needs_netem() and not has_netem():
        needing = [link.name for link in topology.links if link.needs_netem()]
        raise MissingDependency(
            f"link(s) {', '.join(needing)} need netem (delay, loss, jitter, ...) and this host's kernel "
            "has no sch_netem (fix: run with --vm to use a microVM with a full kernel, see 'quicbed vm')")


def _kill_namespace_processes(namespace: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        result = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False)
        pids = [int(p) for p in result.stdout.split() if p.isdigit()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.05)


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def remove_leftovers(record: ownership.Ownership) -> list[str]:
    """Kill processes in the record's namespaces, delete them, restore sysctls; returns what was removed."""
    removed = []
    existing = set(ownership.quicbed_namespaces())
    for pid in record.pids:
        try:
            os.kill(pid, signal.SIGKILL)
            removed.append(f"process {pid}")
        except ProcessLookupError:
            pass
    for namespace in record.namespaces:
        if namespace not in existing:
            continue
        _kill_namespace_processes(namespace)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        removed.append(f"namespace {namespace}")
    # What the killed processes held is released asynchronously (a radio returns to the root
    # namespace once its namespace is gone): a failing command is retried for a few seconds.
    retry_until = time.monotonic() + UNDO_RETRY_S
    for argv in record.undo_commands:
        while not (done := _succeeds(argv)) and time.monotonic() < retry_until:
            time.sleep(0.25)
        removed.append(f"with: {' '.join(argv)}" if done else f"nothing with: {' '.join(argv)} (it failed)")
    for directory in record.scratch_dirs:
        if Path(directory).is_dir():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(f"folder {directory}")
    record.remove()
    others_alive = any(r.owner_alive() for r in ownership.load_all() if r.run_id != record.run_id)
    if not others_alive:
        for path, value in record.restore_sysctls.items():
            try:
                Path(path).write_text(value)
                removed.append(f"restored {path}")
            except OSError:
                pass
    return removed


def clean(include_live: bool = False) -> list[str]:
    """Remove what networks whose quicbed process is gone left behind (``quicbed clean``)."""
    removed: list[str] = []
    records = ownership.load_all()
    live_ids = set()
    for record in records:
        if record.owner_alive() and not include_live:
            live_ids.add(record.run_id)
            continue
        removed += remove_leftovers(record)
    # Marked namespaces without a record (e.g. the record's folder was wiped on reboot).
    for namespace in ownership.quicbed_namespaces():
        match = ownership.NAMESPACE_PATTERN.fullmatch(namespace)
        if match and match.group(1) not in live_ids:
            _kill_namespace_processes(namespace)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
            removed.append(f"namespace {namespace}")
    return removed
