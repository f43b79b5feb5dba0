"""ns3 backend: an ns-3 real-time process simulates the 802.11 cells, meshes and cables;
every host, station and mesh point is a real network namespace plugged into it by a TAP.

    with Ns3Network(load_topology("topologies/wifi_ap.py")) as network:
        network.node("server").start(["iperf3", "-s"])
        network.node("sta1").run(["iperf3", "-c", network.node("server").address, "-R"])
        print(network.mac_stats()["nodes"]["ap1"]["mean_mpdus_per_ampdu"])

Design
------
*Namespaces.* Every routed node (host, station, mesh point) gets a namespace
``qb<run>-<node>`` (the netns backend's naming, so ``quicbed clean`` knows it) and, for
each interface ``topo.resolve()`` gave it, a TAP device of the same name (``wlan0``,
``eth0``, ``mesh0``) with the same address and routes. Apps connect to
``network.node(name).address`` exactly as with the netns backend. Access points and
switches exist only inside ns-3 (``node("ap1")`` refuses to run processes).

*TAP handling.* The channel program opens /dev/net/tun *inside* each namespace (setns,
TUNSETIFF with IFF_TAP|IFF_NO_PI, setns back) before ns-3 starts any thread, and gives the
descriptor to an ns-3 FdNetDevice (the packaged TapBridge/tap-creator path is broken).
The TAPs vanish with the process; quicbed then sets addresses, offloads (TSO/GSO/GRO off,
so that frames are at most one MTU like on a real NIC), links and routes.

*Addressing and forwarding: layer 2 inside ns-3, no ns-3 IP stack.* A segment keeps one
subnet, as resolve() assigned it, because ns-3 forwards Ethernet frames, not IP packets:
- An access point (and a switch) is a learning bridge over its radio and its cables. ns-3's
  AP MAC may send frames on behalf of other addresses and relays between its stations.
- A station is the one case where a bridge would be needed and ns-3 (like any 3-address
  802.11 station) cannot bridge: a STA may only send its own frames. So the station's TAP
  gets *the station radio's MAC address*: the namespace's interface is the station, every
  frame it sends is the station's own, and frames for the station are delivered to the TAP.
  The WiFi hop therefore stays an L2 hop (as with a real AP), ARP runs end to end, and no
  proxy ARP, per-hop subnets, TTL decrement or ns-3 routing table is involved.
- Mesh points use one ad-hoc HT/VHT radio per channel their peerings use (hops on
  different channels do not interfere; hops sharing a channel contend and interfere).
  Frames cross the mesh hop by hop inside an 18-byte mesh header (final destination,
  origin, TTL, sequence number), the counterpart of 802.11s's mesh control field with
  address extension (12 bytes in 802.11s), along static shortest paths over the declared
  peerings: what HWMP converges to on a static mesh. Broadcasts (ARP) are flooded with
  duplicate suppression. Intermediate mesh points forward in ns-3, not in their namespace,
  like mac80211 does for 802.11s; a gateway's cable is a separate interface routed by the
  namespace's Linux stack, as in a real mesh gateway.
- Cables are simulated in the same process (rate counting the Ethernet header like tbf,
  delay, uniform/normal jitter, drop-tail queue, Bernoulli or Gilbert-Elliott loss,
  corruption as loss), so a WiFi experiment needs no netem.

*Real time.* The program runs ns-3's RealtimeSimulatorImpl (best effort) under SCHED_FIFO
(``chrt -f 50``; mlockall). A probe event every ``lag_interval_us`` records how far the
simulator runs behind the wall clock (RealtimeNow - Now); mean, max and percentiles are
in every statistics file and ``mac_stats()``/``describe()``. A run in which the simulator
spent more than ``max_behind_share`` of the time more than 4 ms behind is marked invalid
(``mac_stats()["valid"]``; the rule and its measurement: docs/metrics.md).

*Start-up.* ``start()`` returns once every station is associated and every block-ack
agreement (each direction of each radio link with A-MPDU) exists: the program sends
warm-up frames (ethertype 0x88B6, never forwarded to a namespace) until ns-3 reports the
agreements, prints ``QUICBED-NS3 READY`` and resets its counters.

*Statistics and ownership.* ``mac_stats()`` (SIGUSR1 snapshot while running, final file
after ``stop()``), ``reset_stats()`` (SIGUSR2). The ns-3 pid is recorded in the ownership
record next to the namespaces, so ``quicbed clean`` removes both after a kill -9; the
process also dies with its parent (PDEATHSIG).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from quicbed.backends.base import Network
from quicbed.host.prctl import die_with_parent
from quicbed.host.signals import how_it_ended
from quicbed.backends.namespaces import (
    NamespaceNode,
    allow_congestion_controls,
    remove_leftovers,
    require_root_and_tools,
    run_checked,
)
from quicbed.backends.ns3.build import ensure_built
from quicbed.backends.ns3.description import Ns3Options, describe, radio_owner
from quicbed.backends.ns3.stats import summarize
from quicbed.errors import BackendError, MissingDependency
from quicbed.host import ownership
from quicbed.spec.topology import Topology

PREFIX = "QUICBED-NS3 "


class Ns3Node(NamespaceNode):
    """A host, station or mesh point: a namespace whose interfaces are TAPs into ns-3."""

    network: "Ns3Network"


class Ns3Network(Network):
    backend_name = "ns3"

    def __init__(
        self,
        topology: Topology,
        run_id: str | None = None,
        log_dir: str | Path | None = None,
        options: Ns3Options | None = None,
        **option_overrides: Any,
    ) -> None:
        super().__init__(topology)
        known = {f.name for f in dataclasses.fields(Ns3Options)}
        unknown = set(option_overrides) - known
        if unknown:
            raise BackendError(f"unknown ns3 backend option(s) {sorted(unknown)} (known: {', '.join(sorted(known))})")
        try:
            self.options = dataclasses.replace(options or Ns3Options(), **option_overrides)
        except ValueError as error:
            raise BackendError(str(error)) from None
        if self.options.run is None:  # recorded in describe(): a run can be repeated with run=...
            self.options = dataclasses.replace(self.options, run=secrets.randbelow(2**31 - 1) + 1)
        self.run_id = run_id or ownership.new_run_id()
        self._nodes = {name: Ns3Node(self, name) for name, node in topology.nodes.items() if node.routed}
        self.record = ownership.Ownership.create(self.run_id)
        self.log_dir = Path(log_dir) if log_dir else None
        self.work_dir = self.log_dir or Path(tempfile.gettempdir()) / f"quicbed-ns3-{self.run_id}"
        self.files = {
            "stats_file": str(self.work_dir / "ns3-stats.json"),
            "snapshot_file": str(self.work_dir / "ns3-snapshot.json"),
            "live_file": str(self.work_dir / "ns3-live.json"),
        }
        # built now so that unsupported features are reported before anything is created
        self.description = describe(
            self.resolved, {n: node.namespace for n, node in self._nodes.items()}, self.options, self.files
        )
        self._owners = radio_owner(self.description)
        for tap_id in (p["id"] for n in self.description["nodes"] for p in n["ports"] if p["kind"] == "tap"):
            self._owners.setdefault(tap_id, tap_id.partition(":")[0])
        self.binary: Path | None = None
        self.channel: subprocess.Popen | None = None
        self.ready_info: dict[str, Any] | None = None
        self.final_stats: dict[str, Any] | None = None
        #: how the channel ended when it ended before quicbed stopped it (killed, crashed)
        self.channel_ended: str | None = None
        self._out_offset = 0
        self._made_work_dir = False
        self.warnings: list[str] = []

    # -- queries -----------------------------------------------------------------------------
    def node(self, name: str) -> Ns3Node:
        try:
            return self._nodes[name]
        except KeyError:
            if name in self.topology.nodes:
                raise BackendError(
                    f"{name} is a {self.topology.nodes[name].kind} simulated inside ns-3; it "
                    "runs no processes (fix: run them on a host, station or mesh point)"
                ) from None
            raise BackendError(f"no node {name!r} in this network (nodes: {', '.join(self._nodes)})") from None

    @property
    def running(self) -> bool:
        return self.channel is not None and self.channel.poll() is None

    def service_processes(self) -> dict[str, int]:
        return {"channel": self.channel.pid} if self.channel is not None and self.running else {}

    def service_failure(self) -> str | None:
        if self.started and self.channel is not None and self.channel.poll() is not None:
            self.channel_ended = f"the ns-3 channel {how_it_ended(self.channel.returncode)}"
        return self.channel_ended

    def describe(self) -> dict[str, Any]:
        stats: dict[str, Any] | None = None
        try:
            stats = self.mac_stats() if (self.running or self.final_stats) else None
        except BackendError:
            stats = None
        return {
            "backend": self.backend_name,
            "run_id": self.run_id,
            "namespaces": {name: n.namespace for name, n in self._nodes.items()},
            "channel": {
                "binary": str(self.binary) if self.binary else None,
                "pid": self.channel.pid if self.channel else None,
                "realtime_priority": self.options.realtime_priority,
                "rng": {"seed": self.options.seed, "run": self.options.run},
                "config": str(self.work_dir / "channel.json"),
            },
            "options": dataclasses.asdict(self.options),
            "ready": self.ready_info,
            "warnings": self.warnings,
            "max_behind_share": self.options.max_behind_share,
            "lag": stats["lag"] if stats else None,
            "valid": stats["valid"] if stats else None,
            "invalid_reasons": stats["invalid_reasons"] if stats else None,
            "failure": self.service_failure(),
        }

    def mac_stats(self, timeout: float = 5.0, window: tuple[float, float] | None = None) -> dict[str, Any]:
        """MAC statistics since start-up (or the last ``reset_stats``): per radio and node
        MPDUs per A-MPDU, airtime, retries, drops; wired-link counters; lag and validity, the
        latter judged over ``window`` (CLOCK_MONOTONIC seconds: a transfer) when given."""
        raw = self._snapshot(reset=False, timeout=timeout) if self.running else self.final_stats
        if raw is None:
            why = self.service_failure() or (
                "the network was never started"
                if self.channel is None
                else "the ns-3 channel wrote no final statistics"
            )
            raise BackendError(f"no ns-3 statistics: {why}")
        return summarize(raw, self.options.max_behind_share, self._owners, window)

    def reset_stats(self, timeout: float = 5.0) -> None:
        """Zero the MAC counters and lag statistics (e.g. at the start of a run)."""
        if not self.running:
            raise BackendError(self.service_failure() or "the ns-3 channel is not running")
        self._snapshot(reset=True, timeout=timeout)

    def _read_json(self, path: str) -> dict[str, Any] | None:
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None

    def _snapshot(self, reset: bool, timeout: float) -> dict[str, Any]:
        assert self.channel is not None
        before = self._read_json(self.files["snapshot_file"]) or {"snapshot": -1, "resets": -1}
        os.kill(self.channel.pid, signal.SIGUSR2 if reset else signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self._read_json(self.files["snapshot_file"])
            if (
                current
                and current["snapshot"] > before["snapshot"]
                and (not reset or current["resets"] > before["resets"])
            ):
                return current
            if self.channel.poll() is not None:
                break
            time.sleep(0.01)
        raise BackendError(f"the ns-3 channel did not write statistics within {timeout:g} s{self._channel_failure()}")

    # -- building ------------------------------------------------------------------------------
    def start(self) -> None:
        check_requirements(self.options)
        self.binary = ensure_built()
        if not self.work_dir.exists():
            self._made_work_dir = self.log_dir is None
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for path in self.files.values():
            Path(path).unlink(missing_ok=True)
        self.record.namespaces = [n.namespace for n in self._nodes.values()]
        if self._made_work_dir:
            self.record.scratch_dirs = [str(self.work_dir)]
        self.record.save()  # before anything exists, so a kill -9 from here on is cleanable
        allow_congestion_controls(self.record)
        for node in self._nodes.values():
            run_checked(["ip", "netns", "add", node.namespace], "creating a namespace")
            run_checked(["ip", "-n", node.namespace, "link", "set", "lo", "up"], f"configuring {node.name}")
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
                    "net.ipv4.ip_forward=1",
                ],
                "setting namespace sysctls",
            )
        config = self.work_dir / "channel.json"
        config.write_text(json.dumps(self.description, indent=1))
        argv = [str(self.binary), str(config)]
        if self.options.realtime_priority > 0:
            priority = str(self.options.realtime_priority)
            if subprocess.run(["chrt", "-f", priority, "true"], capture_output=True, check=False).returncode == 0:
                argv = ["chrt", "-f", priority, *argv]
            else:
                self.warnings.append(
                    f"SCHED_FIFO (chrt -f {priority}) is not permitted here: ns-3 runs at normal "
                    "priority and will lag on a busy host (check mac_stats()['valid'])"
                )
        with open(self.work_dir / "channel.out", "wb") as out, open(self.work_dir / "channel.err", "wb") as err:
            self._out_offset = 0
            self.channel = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.record.pids.append(self.channel.pid)
        self.record.save()
        taps = json.loads(self._wait_for("TAPS", timeout=30.0) or "{}")
        self._configure_namespaces(taps if self.options.static_arp else None)
        payload = self._wait_for("READY", timeout=self.options.warmup_timeout_s + 15.0, failure="NOT-READY")
        self.ready_info = json.loads(payload) if payload else {}
        self.started = True

    def _channel_failure(self) -> str:
        err = self.work_dir / "channel.err"
        text = err.read_text(errors="replace").strip() if err.exists() else ""
        code = self.channel.poll() if self.channel else None
        detail = f" (the ns-3 channel {how_it_ended(code)})" if code is not None else ""
        return detail + (f": {text[-1500:]}" if text else "")

    def _wait_for(self, keyword: str, timeout: float, failure: str | None = None) -> str:
        """Wait for the line 'QUICBED-NS3 KEYWORD payload' of the channel program; return payload."""
        path = self.work_dir / "channel.out"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(path, "rb") as stream:
                stream.seek(self._out_offset)
                chunk = stream.read()
            while b"\n" in chunk:  # complete lines only; a partial line is read again later
                raw, _, chunk = chunk.partition(b"\n")
                self._out_offset += len(raw) + 1
                line = raw.decode(errors="replace")
                if not line.startswith(PREFIX):
                    continue
                word, _, payload = line[len(PREFIX) :].partition(" ")
                if word == keyword:
                    return payload
                if word == "ERROR":
                    raise BackendError(f"ns-3 channel: {payload}")
                if failure and word == failure:
                    raise BackendError(f"the simulated medium did not come up: {payload}{_hint(payload)}")
            if self.channel is None or self.channel.poll() is not None:
                raise BackendError(f"the ns-3 channel stopped before {keyword}{self._channel_failure()}")
            time.sleep(0.02)
        raise BackendError(f"the ns-3 channel did not report {keyword} within {timeout:g} s")

    def _configure_namespaces(self, tap_macs: dict[str, str] | None) -> None:
        """Offloads off, addresses, links up, routes; with ``tap_macs`` (TAP id -> MAC) also
        permanent neighbour entries for every other address on each interface's segment."""
        members: dict[int, list[tuple[str, str]]] = {}  # segment -> [(address, MAC)]
        for iface in self.resolved.interfaces:
            mac = (tap_macs or {}).get(f"{iface.node}:{iface.name}")
            if iface.address and mac:
                members.setdefault(iface.segment, []).append((iface.address.split("/")[0], mac))
        for node in self._nodes.values():
            interfaces = self.resolved.interfaces_of(node.name)
            batch = []
            for iface in interfaces:
                node.offloads_off(iface.name)
                if iface.address:
                    batch.append(f"addr add {iface.address} dev {iface.name}")
                batch.append(f"link set {iface.name} up")
            for route in (r for r in self.resolved.routes if r.node == node.name):
                batch.append(f"route add {route.destination} via {route.via} dev {route.device}")
            for iface in interfaces:
                own = iface.address.split("/")[0] if iface.address else None
                batch += [
                    f"neigh replace {address} lladdr {mac} dev {iface.name} nud permanent"
                    for address, mac in members.get(iface.segment, [])
                    if address != own
                ]
            result = subprocess.run(
                ["ip", "-n", node.namespace, "-batch", "-"],
                input="\n".join(batch) + "\n",
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise BackendError(f"configuring {node.name} failed: {result.stderr.strip()}")

    # -- tearing down ----------------------------------------------------------------------
    def _stop_channel(self) -> None:
        if self.channel is None:
            return
        self.service_failure()  # an end before this stop is a failure, and stays described
        if self.channel.poll() is None:
            self.channel.send_signal(signal.SIGTERM)
            try:
                self.channel.wait(15.0)
            except subprocess.TimeoutExpired:
                self.channel.kill()
                self.channel.wait()
        self.final_stats = self._read_json(self.files["stats_file"]) or self.final_stats

    def _teardown(self) -> None:
        self._stop_channel()
        remove_leftovers(self.record)
        if self._made_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def _hint(payload: str) -> str:
    try:
        reason = json.loads(payload).get("reason", "")
    except ValueError:
        return ""
    if reason == "association":
        return (
            " (fix: the stations hear no beacon: bring them closer to their AP (distance=), raise "
            "tx_power_dbm, or use propagation='fixed_rss'; ns-3 detects preambles above -82 dBm)"
        )
    if reason == "block-ack agreements":
        return " (fix: check the frame error rate (loss=) and the distance of these links)"
    return ""


def check_requirements(options: Ns3Options) -> None:
    require_root_and_tools(
        "the ns3 backend needs root to create namespaces and TAP devices",
        (("ip", "apt-get install iproute2"), ("ethtool", "apt-get install ethtool")),
    )
    if options.realtime_priority > 0 and shutil.which("chrt") is None:
        raise MissingDependency(
            "'chrt' is not installed; ns-3 needs SCHED_FIFO to keep real time (fix: apt-get install util-linux)"
        )
    if not Path("/dev/net/tun").exists():
        raise MissingDependency(
            "/dev/net/tun is missing: the kernel has no TUN/TAP support (fix: modprobe tun, or run with --vm)"
        )
