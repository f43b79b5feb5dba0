"""MininetWifiNetwork: a Topology realised by Mininet-WiFi (see the package docstring)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from quicbed.backends.base import Network, NodeHandle
from quicbed.backends.mininet_wifi.host import (
    WMEDIUMD_SOCKET,
    DaemonReaper,
    ExclusiveLock,
    PrivateOpenVSwitch,
    check_requirements,
    ensure_debugfs,
    hwsim_radios_of,
    kill_and_wait,
    ovs_running,
    run_checked,
    versions,
    wait_for_wmediumd_socket,
)
from quicbed.backends.mininet_wifi.motion import Mover, Position, association_events
from quicbed.backends.mininet_wifi.plan import (
    MeshRadio,
    MininetWifiOptions,
    mesh_ht_cap,
    mode_of,
    plan,
    reconnect_commands,
)
from quicbed.backends.namespaces import OFFLOADS, allow_congestion_controls
from quicbed.backends.tc import parse_qdiscs, qdisc_commands
from quicbed.errors import BackendError, MissingDependency
from quicbed.host import ownership
from quicbed.spec.link import WiredLink, WirelessLink
from quicbed.spec.node import MeshPoint
from quicbed.spec.topology import Topology


class MininetNode(NodeHandle):
    """A host, station or mesh point: Mininet's node shell holds its network namespace."""

    network: "MininetWifiNetwork"

    @property
    def pid(self) -> int:
        return int(self.network.mn_node(self.name).pid)

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv]

    def qdisc_show(self) -> str:
        return self.run(["tc", "qdisc", "show"]).stdout


#: ``ethtool -k`` names of the offloads that merge or split packets: one left on makes the
#: captures show super-packets larger than the MTU, which no link carried
PACKET_SIZE_OFFLOADS = (
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "large-receive-offload",
)


def offloads_left_on(features: str) -> list[str]:
    """The packet-size offloads that ``ethtool -k`` output (``features``) still shows on."""
    state = dict(re.findall(r"^([a-z-]+): (on|off)", features, re.MULTILINE))
    return [name for name in PACKET_SIZE_OFFLOADS if state.get(name) == "on"]


# -- the network -----------------------------------------------------------------------------


class MininetWifiNetwork(Network):
    backend_name = "mininet-wifi"

    def __init__(
        self,
        topology: Topology,
        run_id: str | None = None,
        log_dir: str | Path | None = None,
        options: MininetWifiOptions | None = None,
        **option_overrides: Any,
    ) -> None:
        super().__init__(topology)
        known = {f.name for f in dataclasses.fields(MininetWifiOptions)}
        unknown = set(option_overrides) - known
        if unknown:
            raise BackendError(
                f"unknown mininet-wifi backend option(s) {sorted(unknown)} (known: {', '.join(sorted(known))})"
            )
        self.options = dataclasses.replace(options or MininetWifiOptions(), **option_overrides)
        self.plan = plan(self.resolved, self.options)
        self.warnings: list[str] = list(self.plan.warnings)
        self.run_id = run_id or ownership.new_run_id()
        self.record = ownership.Ownership.create(self.run_id)
        self.log_dir = Path(log_dir) if log_dir else None
        self._nodes = {name: MininetNode(self, name) for name, node in topology.nodes.items() if node.routed}
        self.net: Any = None
        self.work_dir: Path | None = None
        self._lock = ExclusiveLock()
        self._reaper = DaemonReaper()
        self._ovs: PrivateOpenVSwitch | None = None
        self._names: dict[tuple[str, str], str] = {}  # (node, resolved name) -> real device
        self.radio_queues: dict[str, list[dict[str, Any]]] = {}  # node:device -> its qdiscs
        self.mesh_macs: dict[tuple[str, int], str] = {}
        #: station -> how often its connect was re-issued (see MininetWifiOptions.association_retry_s)
        self.association_retries: dict[str, int] = {}
        self._mover: Mover | None = None

    # -- queries ---------------------------------------------------------------------------
    def node(self, name: str) -> MininetNode:
        try:
            return self._nodes[name]
        except KeyError:
            if name in self.topology.nodes:
                raise BackendError(
                    f"{name} is a {self.topology.nodes[name].kind}: an Open vSwitch bridge in the "
                    "root namespace that runs no processes (fix: run them on a host, station or "
                    "mesh point)"
                ) from None
            raise BackendError(f"no node {name!r} in this network (nodes: {', '.join(self._nodes)})") from None

    def mn_node(self, name: str) -> Any:
        if self.net is None:
            raise BackendError("the Mininet-WiFi network is not started")
        return self.net.nameToNode[name]

    def device(self, node: str, resolved_name: str) -> str:
        """The real device name behind a resolved interface name (wlan0 -> sta1-wlan0)."""
        return self._names.get((node, resolved_name), resolved_name)

    def hostapd_log(self, ap: str) -> Path:
        """hostapd's log of access point ``ap`` (associations, authentications; -t timestamps)."""
        if ap not in self.plan.access_points or self.work_dir is None:
            raise BackendError(f"{ap} is not an access point of this network (or the network is not started)")
        return self.work_dir / f"hostapd-{ap}.log"

    def ap_run(self, ap: str, argv: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` where access point ``ap`` lives: Mininet-WiFi's kernel APs keep their
        radio (``ap1-wlan1``) in the root namespace, e.g. ``iw dev ap1-wlan1 station dump``."""
        if ap not in self.plan.access_points:
            raise BackendError(f"{ap} is not an access point of this network")
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BackendError(f"{' '.join(argv)} for {ap} did not finish within {timeout:g} s") from None

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend_name,
            "run_id": self.run_id,
            "emulator": {"name": "Mininet-WiFi", **versions()},
            "wmediumd": {
                "enabled": self.options.wmediumd,
                "mode": self.options.wmediumd_mode if self.options.wmediumd else None,
            },
            "propagation": {"model": self.options.propagation_model, "exp": self.options.propagation_exp},
            "open_vswitch": "private" if self._ovs and self._ovs.started else "system",
            "devices": {f"{node}:{name}": real for (node, name), real in self._names.items()},
            "node_pids": ({name: n.pid for name, n in self._nodes.items()} if self.net is not None else {}),
            "association_retries": dict(self.association_retries),
            "roaming": {
                station: {"aps": aps, "bgscan": self.options.bgscan, "security": "WPA2-PSK"}
                for station, aps in self.plan.roaming.items()
            },
            "hostapd_logs": (
                {ap: str(self.hostapd_log(ap)) for ap in self.plan.access_points} if self.work_dir is not None else {}
            ),
            "options": dataclasses.asdict(self.options),
            "warnings": self.warnings,
            # the kernel queues every radio's frames itself (a radio's queue setting is an ns3 model)
            "radio_queues": self.radio_queues,
        }

    # -- stations that move ------------------------------------------------------------------
    def start_trajectories(self) -> None:
        """Start the moving stations' trajectories now (their time 0; again from the start if
        they ran before). Until then each stands at its first waypoint."""
        trajectories = {s.name: s.trajectory for s in self.topology.moving_stations() if s.trajectory}
        if not trajectories:
            return
        if self._mover is None:
            self._mover = Mover(trajectories, self._set_position, self.options.motion_step_s)
        self._mover.start()

    @property
    def motion_errors(self) -> list[str]:
        """Positions that could not be set during the walks (the first ten)."""
        return list(self._mover.errors) if self._mover is not None else []

    def _set_position(self, station: str, position: Position) -> None:
        self.mn_node(station).setPosition(",".join(f"{c:.2f}" for c in position))

    def association_events(self, since: float | None = None) -> list[dict[str, Any]]:
        """The stations' (dis)associations in the APs' hostapd logs, in time order (s since the
        epoch, or since ``since``; see motion.association_events)."""
        logs = {
            ap: self.hostapd_log(ap).read_text(errors="replace") if self.hostapd_log(ap).exists() else ""
            for ap in self.plan.access_points
        }
        macs = {
            self.mn_node(name).wintfs[0].mac: name
            for name in self.plan.stations
            if getattr(self.mn_node(name), "wintfs", None)
        }
        return association_events(logs, macs, since)

    # -- building ----------------------------------------------------------------------------
    def start(self) -> None:
        check_requirements(self.topology, self.options)
        self._lock.acquire()
        self.record.save()
        self._start_ovs_if_needed()
        ensure_debugfs()
        allow_congestion_controls(self.record)
        self._reaper.start()
        self.work_dir = (
            (self.log_dir / "mininet-wifi")
            if self.log_dir
            else Path(tempfile.mkdtemp(prefix=f"quicbed-mnwifi-{self.run_id}-"))
        )
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.plan.radios and self.options.country:
            subprocess.run(["iw", "reg", "set", self.options.country], capture_output=True, check=False)
        with _working_directory(self.work_dir), _quiet_mininet():
            self._build()
        self._record_processes()
        self._configure_addresses()
        self._apply_wired_shapes()
        self._wait_associated()
        self._restrict_mesh_peerings()
        self._wait_mesh_peered()
        self._record_radio_queues()
        self.started = True

    def _record_radio_queues(self) -> None:
        """The qdiscs in front of each radio, as the kernel set them up (on 6.1's mac80211_hwsim:
        mq with an fq_codel per access category), for the run's metadata."""
        for node in [*self.net.stations, *self.net.aps]:
            for intf in getattr(node, "wintfs", {}).values():
                self.radio_queues[f"{node.name}:{intf.name}"] = parse_qdiscs(node.cmd(f"tc qdisc show dev {intf.name}"))

    def _start_ovs_if_needed(self) -> None:
        needs_ovs = bool(self.plan.access_points or self.plan.switches)
        if not needs_ovs or ovs_running():
            return
        private = self.options.private_ovs
        if private is None:
            private = os.environ.get("QUICBED_IN_VM") == "1"
        if not private:
            raise MissingDependency(
                "Open vSwitch is not running; Mininet-WiFi's access points need it before they "
                "are created (fix: systemctl start openvswitch-switch, or pass "
                "private_ovs=True to start a private one)"
            )
        self._ovs = PrivateOpenVSwitch()
        self._ovs.start()

    def _build(self) -> None:
        from mininet.link import Link
        from mininet.node import OVSBridge
        from mn_wifi import wmediumdConnector
        from mn_wifi.link import mesh, wmediumd
        from mn_wifi.net import Mininet_wifi
        from mn_wifi.node import OVSKernelAP

        kwargs: dict[str, Any] = {
            "accessPoint": OVSKernelAP,
            "controller": None,
            "autoSetMacs": False,
            "allAutoAssociation": True,
        }
        if self.options.wmediumd:
            _patch_wmediumd_connect(wmediumdConnector)
            kwargs["link"] = wmediumd
            kwargs["wmediumd_mode"] = getattr(wmediumdConnector, self.options.wmediumd_mode)
        net = Mininet_wifi(**kwargs)
        self.net = net
        for name in self.plan.hosts:
            net.addHost(name, ip=None)
        for name, params in self.plan.stations.items():
            net.addStation(name, ip=None, ip6=None, **_without_none(params))
        for name, params in self.plan.access_points.items():
            # -f: hostapd logs to a file of the run instead of syslog, -t with timestamps
            net.addAccessPoint(name, hostapd_flags=f"-t -f {self.hostapd_log(name)}", **_without_none(params))
        for name in self.plan.switches:
            net.addSwitch(name, cls=OVSBridge, failMode="standalone")
        if self.options.propagation_model:
            model: dict[str, Any] = {"model": self.options.propagation_model}
            if self.options.propagation_exp is not None:
                model["exp"] = self.options.propagation_exp
            net.setPropagationModel(**model)
        net.configureNodes()
        for station, ap in self.plan.associations:
            net.addLink(station, ap)
        for radio in self.plan.mesh_radios:
            params = {
                "intf": f"{radio.node}-wlan{radio.index}",
                "ssid": radio.mesh_id,
                "channel": radio.radio.channel,
                "mode": mode_of(radio.radio),
            }
            if mesh_ht_cap(radio.radio):
                params["ht_cap"] = mesh_ht_cap(radio.radio)
            net.addLink(net.nameToNode[radio.node], cls=mesh, **params)
        for link in self.topology.links:
            if isinstance(link, WiredLink):
                name1, name2 = self.plan.wired[link.name]
                net.addLink(link.node1, link.node2, cls=Link, intfName1=name1, intfName2=name2)
        net.build()
        net.start()

    def _record_processes(self) -> None:
        """Node shells and the daemons whose working folder is ours go into the ownership record,
        and how to remove the bridges and radios, so that ``quicbed clean`` can after a kill -9
        (Mininet-WiFi's own ``mn -c`` would also kill every hostapd/wpa_supplicant on the host)."""
        pids = [int(node.pid) for node in self.net.values() if getattr(node, "pid", None)]
        for pid in _daemon_pids(self.work_dir, pids):
            if pid not in pids:
                pids.append(pid)
        self.record.pids = pids
        self.record.undo_commands = [
            *(["ovs-vsctl", "--if-exists", "del-br", name] for name in [*self.plan.access_points, *self.plan.switches]),
            *(["hwsim_mgmt", "-x", radio] for radio in hwsim_radios_of(os.getpid())),
            *(self._ovs.undo_commands() if self._ovs else []),
            # a folder of our own (not the run's log folder) goes with the network
            *([["rm", "-rf", str(self.work_dir)]] if self.work_dir is not None and self.log_dir is None else []),
        ]
        self.record.save()

    def _configure_addresses(self) -> None:
        """quicbed's addresses, routes, names and sysctls replace Mininet-WiFi's defaults."""
        for name, handle in self._nodes.items():
            spec = self.topology.nodes[name]
            batch = []
            handle.run(
                [
                    "sysctl",
                    "-q",
                    "-w",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                    "net.ipv4.ip_forward=1",
                ]
            )
            for iface in self.resolved.interfaces_of(name):
                device = self._device_for(spec, iface.name, iface.link)
                self._names[(name, iface.name)] = device
                if device != iface.name:
                    handle.run(["ip", "link", "property", "add", "dev", device, "altname", iface.name], check=False)
                # it fails on a feature the driver cannot change, also one that leaves packet sizes alone
                # (tx-checksumming): what counts, packets no larger than the MTU, is checked next
                handle.run(["ethtool", "-K", device, *(w for o in OFFLOADS for w in (o, "off"))], check=False)
                left = offloads_left_on(handle.run(["ethtool", "-k", device]).stdout)
                if left:
                    raise BackendError(
                        f"{name}:{device} keeps {', '.join(left)} on after ethtool -K ... off: its "
                        "captures would hold super-packets larger than the MTU (fix: a driver whose "
                        "offloads can be turned off, or report the device)"
                    )
                batch += [f"addr flush dev {device}", f"link set {device} up"]
                if iface.address:
                    batch.append(f"addr add {iface.address} dev {device}")
            for route in (r for r in self.resolved.routes if r.node == name):
                batch.append(f"route replace {route.destination} via {route.via} dev {self.device(name, route.device)}")
            handle.run(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        self._warn_of_stranded_radios()

    def _warn_of_stranded_radios(self) -> None:
        """A radio's namespace dies with its node; the kernel then moves the radio back to the root
        namespace, which fails if an alternative name we gave it is taken there (e.g. wlan0 of
        radios created when mac80211_hwsim loaded). stop() drops the names first; after a kill -9
        the radio stays stranded and neither quicbed clean nor mn -c can remove it."""
        wireless = {link.name for link in self.topology.links if isinstance(link, WirelessLink)}
        taken = sorted(
            {
                iface.name
                for node in self._nodes
                for iface in self.resolved.interfaces_of(node)
                if iface.link in wireless
                and self._names.get((node, iface.name), iface.name) != iface.name
                and Path("/sys/class/net", iface.name).exists()
            }
        )
        if taken:
            self.warnings.append(
                f"the root namespace has interfaces named {', '.join(taken)}, as some radios' "
                "alternative names: if quicbed is killed (SIGKILL) those radios cannot return to "
                "the root namespace and stay until mac80211_hwsim is reloaded (fix: load "
                "mac80211_hwsim with radios=0, as Mininet-WiFi does)"
            )

    def _device_for(self, spec: Any, resolved_name: str, link_name: str) -> str:
        link = self.topology.link(link_name)
        if isinstance(link, WiredLink):
            return resolved_name
        if isinstance(spec, MeshPoint):
            radios = self.plan.mesh_radios_of(spec.name)
            devices = [self._mesh_device(spec.name, r.index) for r in radios]
            if len(devices) == 1:
                return devices[0]
            return self._mesh_bridge(spec.name, resolved_name, devices)
        return f"{spec.name}-wlan0"

    def _mesh_device(self, node: str, index: int) -> str:
        mn = self.mn_node(node)
        names = [intf.name for intf in mn.wintfs.values() if "-mp" in intf.name]
        return names[index] if index < len(names) else f"{node}-mp{index}"

    def _mesh_bridge(self, node: str, name: str, devices: list[str]) -> str:
        """A mesh point on several channels forwards between its MBSSs through a bridge."""
        handle = self._nodes[node]
        handle.run(["ip", "link", "add", name, "type", "bridge", "forward_delay", "0", "stp_state", "0"])
        for device in devices:
            handle.run(["ip", "addr", "flush", "dev", device])
            handle.run(["ip", "link", "set", device, "master", name])
        return name

    def _apply_wired_shapes(self) -> None:
        for link in self.topology.links:
            if not isinstance(link, WiredLink):
                continue
            names = self.plan.wired[link.name]
            for end, device, shape in ((link.node1, names[0], link.forward), (link.node2, names[1], link.backward)):
                argv_prefix = self._nodes[end].command(["tc"]) if end in self._nodes else ["tc"]
                subprocess.run([*argv_prefix, "qdisc", "del", "dev", device, "root"], capture_output=True, check=False)
                for command in qdisc_commands(device, shape):
                    run_checked([*argv_prefix, *command], f"shaping link {link.name}")

    def _wait_associated(self) -> None:
        """Wait until every station is associated, re-issuing connects that got stuck.

        Mininet-WiFi connects each station once (``iwconfig essid/ap``: cfg80211's SME scans,
        then authenticates) and never retries. If that attempt fails (its scan does not find the
        AP, or authentication times out), the station stays unassociated for good. Under
        wmediumd in the slow microVM this happens now and then: every frame takes the detour
        kernel -> wmediumd -> kernel, hostapd answers probes in user space, and wmediumd cannot
        deliver frames to a radio before it has transmitted (it learns the radio's hwsim
        address from its first frame). So a station not associated after
        ``association_retry_s`` gets its connect re-issued with a scan on the AP's channel
        (:func:`reconnect_commands`), again every ``association_retry_s``.
        """
        start = time.monotonic()
        deadline = start + self.options.association_timeout_s
        retry = self.options.association_retry_s
        next_retry = start + retry if retry > 0 else float("inf")
        pending = list(self.plan.associations)
        while pending and time.monotonic() < deadline:
            pending = [(sta, ap) for sta, ap in pending if not self._associated(sta)]
            if pending and time.monotonic() >= next_retry:
                # (a roaming station's wpa_supplicant retries by itself: iw would fight it)
                for sta, ap in pending:
                    if sta not in self.plan.roaming:
                        self._reconnect(sta, ap)
                next_retry = time.monotonic() + retry
            elif pending:
                time.sleep(0.5)
        if pending:
            raise BackendError(
                f"station(s) {', '.join(s for s, _ in pending)} did not associate within "
                f"{self.options.association_timeout_s:g} s (fix: check positions/distance and the "
                f"AP's range; see {self.work_dir})"
            )

    def _associated(self, station: str) -> bool:
        link = self._nodes[station].run(["iw", "dev", f"{station}-wlan0", "link"], check=False).stdout
        return "Connected to" in link

    def _reconnect(self, station: str, ap: str) -> None:
        """Re-issue a station's connect to its AP (scan on the AP's channel, then connect)."""
        bssid = self.mn_node(ap).wintfs[0].mac
        commands = reconnect_commands(
            f"{station}-wlan0", self.plan.access_points[ap]["ssid"], self.plan.ap_frequencies[ap], bssid
        )
        for argv in commands:
            try:
                self._nodes[station].run(argv, timeout=120, check=False)
            except BackendError:  # a hung iw: the next round re-issues the connect again
                break
        self.association_retries[station] = self.association_retries.get(station, 0) + 1

    def _mesh_macs(self) -> dict[tuple[str, int], str]:
        if not self.mesh_macs:
            for radio in self.plan.mesh_radios:
                device = self._mesh_device(radio.node, radio.index)
                # ip, not /sys/class/net: nsenter --net keeps the root namespace's sysfs
                shown = self._nodes[radio.node].run(["ip", "-o", "link", "show", "dev", device]).stdout.split()
                self.mesh_macs[(radio.node, radio.index)] = shown[shown.index("link/ether") + 1]
        return self.mesh_macs

    def _mesh_peers(self, radio: MeshRadio) -> dict[str, str]:
        """MAC -> plink state of the peers a mesh interface has heard."""
        device = self._mesh_device(radio.node, radio.index)
        text = self._nodes[radio.node].run(["iw", "dev", device, "station", "dump"], check=False).stdout
        peers: dict[str, str] = {}
        current = None
        for line in text.splitlines():
            words = line.split()
            if line.startswith("Station") and len(words) > 1:
                current = words[1]
                peers[current] = ""
            elif current and line.strip().startswith("mesh plink:"):
                peers[current] = words[-1]
        return peers

    def _macs_of(self, nodes: Sequence[str], radio: MeshRadio) -> dict[str, str]:
        macs = self._mesh_macs()
        return {
            macs[(m.node, m.index)]: m.node for m in self.plan.mesh_radios if m.node in nodes and m.mbss == radio.mbss
        }

    def _restrict_mesh_peerings(self) -> None:
        """Block peerings that are not declared links, as soon as each peer has been heard."""
        todo = {(r.node, r.index): self._macs_of(r.blocked, r) for r in self.plan.mesh_radios if r.blocked}
        deadline = time.monotonic() + self.options.mesh_timeout_s
        while todo and time.monotonic() < deadline:
            for radio in [r for r in self.plan.mesh_radios if (r.node, r.index) in todo]:
                heard = self._mesh_peers(radio)
                device = self._mesh_device(radio.node, radio.index)
                for mac in [m for m in todo[(radio.node, radio.index)] if m in heard]:
                    self._nodes[radio.node].run(["iw", "dev", device, "station", "set", mac, "plink_action", "block"])
                    del todo[(radio.node, radio.index)][mac]
                if not todo[(radio.node, radio.index)]:
                    del todo[(radio.node, radio.index)]
            if todo:
                time.sleep(0.3)
        if todo:
            missing = ", ".join(f"{node}:{sorted(macs.values())}" for (node, _), macs in todo.items())
            raise BackendError(f"mesh points never heard some peers whose peering must be blocked ({missing})")

    def _wait_mesh_peered(self) -> None:
        deadline = time.monotonic() + self.options.mesh_timeout_s
        pending: list[str] = []
        while time.monotonic() < deadline:
            pending = []
            for radio in self.plan.mesh_radios:
                peers = self._mesh_peers(radio)
                for mac, node in self._macs_of(radio.neighbours, radio).items():
                    if peers.get(mac) != "ESTAB":
                        pending.append(f"{radio.node}-{node}")
            if not pending:
                return
            time.sleep(0.5)
        raise BackendError(
            f"mesh peerings not established within {self.options.mesh_timeout_s:g} s: "
            f"{', '.join(pending)} (fix: check channels and distances of these links)"
        )

    # -- tearing down ------------------------------------------------------------------------
    def _teardown(self) -> None:
        if self._mover is not None:
            self._mover.stop()
        try:
            if self.net is not None:
                self._remove_names()
                self._stop_mininet()
        finally:
            self.net = None
            for pid in self.record.pids:
                kill_and_wait(pid, timeout=2.0)
            self._reaper.stop()
            if self._ovs is not None:
                self._ovs.stop()
            self.record.pids = []
            from quicbed.backends.namespaces import remove_leftovers

            remove_leftovers(self.record)
            if self.work_dir is not None and self.log_dir is None:
                shutil.rmtree(self.work_dir, ignore_errors=True)
            self._lock.release()

    def _remove_names(self) -> None:
        """Drop the alternative names and mesh bridges before Mininet-WiFi tears down.

        When a node's namespace goes, the kernel moves its radios back to the root namespace;
        an alternative name there that is taken (the microVM's own wlan0) makes that move fail,
        leaves the radio in a dying namespace, and the later rmmod of mac80211_hwsim oopses.
        """
        for (node, name), device in self._names.items():
            handle = self._nodes[node]
            if device == name and self._is_mesh_bridge(node, name):
                handle.run(["ip", "link", "del", name], check=False)
            elif device != name:
                handle.run(["ip", "link", "property", "del", "dev", device, "altname", name], check=False)

    def _is_mesh_bridge(self, node: str, name: str) -> bool:
        return (
            isinstance(self.topology.nodes[node], MeshPoint)
            and len(self.plan.mesh_radios_of(node)) > 1
            and name.startswith("mesh")
        )

    def _stop_mininet(self) -> None:
        """net.stop() under a watchdog: a hang leaves the kill of recorded processes to us."""
        failure: list[BaseException] = []

        def stop() -> None:
            try:
                with _working_directory(self.work_dir), _quiet_mininet():
                    self.net.stop()
            except BaseException as error:  # noqa: BLE001 - reported below
                failure.append(error)

        worker = threading.Thread(target=stop, name="mininet-wifi-stop", daemon=True)
        worker.start()
        worker.join(self.options.stop_timeout_s)
        if worker.is_alive():
            self.warnings.append(
                f"Mininet-WiFi's stop() did not return within {self.options.stop_timeout_s:g} s; "
                "its processes were killed"
            )
        elif failure:
            self.warnings.append(f"Mininet-WiFi's stop() failed: {failure[0]}")


def _without_none(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v not in (None, "")}


def _daemon_pids(folder: Path | None, node_pids: list[int]) -> list[int]:
    """Processes this network started: working folder ``folder``, a Mininet-WiFi config file of
    this process in their command line (hostapd -B mnPID_ap1-wlan1.apconf chdirs to /), or
    living in a node's own namespace (wpa_supplicant in a station's)."""

    def namespace(pid: int | str) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            return None

    ours = namespace("self")
    node_namespaces = {ns for ns in map(namespace, node_pids) if ns and ns != ours}
    marker = f"mn{os.getpid()}_".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (
                (folder is not None and os.readlink(entry / "cwd") == str(folder))
                or marker in (entry / "cmdline").read_bytes()
                or namespace(entry.name) in node_namespaces
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _patch_wmediumd_connect(connector: Any) -> None:
    """Make Mininet-WiFi wait for wmediumd's socket instead of trusting a fixed sleep."""
    server = connector.w_server
    if getattr(server.connect, "_quicbed_waits", False):
        return
    original = server.connect.__func__

    def connect(cls: Any, uds_address: str = WMEDIUMD_SOCKET) -> Any:
        wait_for_wmediumd_socket(path=uds_address)
        return original(cls, uds_address)

    # the mark a second call looks for (mypy knows no attributes set on a function; setattr trips ruff's B010)
    connect._quicbed_waits = True  # type: ignore[attr-defined]
    server.connect = classmethod(connect).__get__(None, server)


class _working_directory:
    """Mininet-WiFi writes its config files into (and deletes *.apconf from) the current folder."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.previous = os.getcwd()

    def __enter__(self) -> None:
        self.previous = os.getcwd()
        if self.folder is not None:
            os.chdir(self.folder)

    def __exit__(self, *exc: object) -> None:
        os.chdir(self.previous)


class _quiet_mininet:
    """Mininet logs to stdout; keep quicbed's output clean unless QUICBED_MININET_LOG is set."""

    def __enter__(self) -> None:
        from mininet.log import setLogLevel

        setLogLevel(os.environ.get("QUICBED_MININET_LOG", "error"))

    def __exit__(self, *exc: object) -> None:
        pass
