"""The machine side of the Mininet-WiFi backend: installation checks, Open vSwitch,
the one-network-at-a-time lock, reaping the daemons Mininet-WiFi orphans, wmediumd."""

from __future__ import annotations

import fcntl
import importlib
import importlib.metadata
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from quicbed.backends.namespaces import require_root_and_tools, run_checked
from quicbed.backends.tc import unrealisable as kernel_unrealisable
from quicbed.backends.mininet_wifi.plan import (
    MininetWifiOptions,
)
from quicbed.errors import BackendError, MissingDependency
from quicbed.host.clock import VIRTUAL, current_clock
from quicbed.host.prctl import become_subreaper
from quicbed.spec.node import AccessPoint
from quicbed.spec.topology import Topology

LOCK_PATH = Path(os.environ.get("QUICBED_MININET_WIFI_LOCK", "/run/quicbed/mininet-wifi.lock"))
WMEDIUMD_SOCKET = "/var/run/wmediumd.sock"
#: how Mininet-WiFi gets installed (the Ansible roles mininet_wifi and wmediumd, run for you)
INSTALL_FIX = "sudo scripts/install.sh --mininet-wifi, see docs/mininet-wifi.md"
#: daemons Mininet-WiFi starts with -B (they are orphaned and must be reaped)
DAEMONS = ("hostapd", "wpa_supplicant", "wmediumd")


def import_problem() -> str | None:
    """Why Mininet-WiFi cannot be used from this Python ('WHAT (fix: HOW)'), or None."""
    try:
        import mininet.util as mininet_util
    except ImportError:
        return f"Mininet-WiFi (mn_wifi) is not importable: Mininet (mininet) is missing (fix: {INSTALL_FIX})"
    if not hasattr(mininet_util, "fmtBps"):
        version = getattr(importlib.import_module("mininet.net"), "VERSION", "?")
        return (
            f"Mininet {version} is too old for Mininet-WiFi: it needs mininet.util.fmtBps, added in 2.3.1b2; "
            f"Debian and PyPI ship 2.3.0 (fix: {INSTALL_FIX})"
        )
    try:
        importlib.import_module("FlightRadar24")
    except ImportError:
        return (
            "FlightRadarAPI is missing or too new for Mininet-WiFi: 1.6 removed the FlightRadar24 module "
            "mn_wifi imports (fix: pip install 'FlightRadarAPI<1.6')"
        )
    try:
        importlib.import_module("mn_wifi.net")
    except ImportError as error:
        return f"Mininet-WiFi (mn_wifi) is not importable: {error} (fix: {INSTALL_FIX})"
    return None


def kernel_problem(topology: Topology | None) -> str | None:
    """What this kernel lacks for Mininet-WiFi's radios, whatever the topology."""
    from quicbed.host.capabilities import has_hwsim

    return None if has_hwsim() else "this kernel has no mac80211_hwsim"


def versions() -> dict[str, Any]:
    """Mininet and Mininet-WiFi versions (and the commits the Ansible role recorded)."""
    info: dict[str, Any] = {}
    for label, module, distribution in (
        ("mininet", "mininet.net", "mininet"),
        ("mn_wifi", "mn_wifi.net", "mininet-wifi"),
    ):
        try:
            info[label] = {"version": getattr(importlib.import_module(module), "VERSION", None)}
        except ImportError:
            info[label] = {"version": None}
            continue
        try:
            info[label]["distribution"] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            pass
        info[label]["commit"] = installed_commit(label)
    return info


def installed_commit(label: str) -> str | None:
    """The commit the Ansible role (or a manual install) recorded next to the Python environment."""
    import sys

    marker = {"mininet": ".quicbed-installed-mininet", "mn_wifi": ".quicbed-installed-mininet-wifi"}[label]
    for folder in (Path(sys.prefix), Path("/opt/quicbed/src")):
        path = folder / marker
        if path.is_file():
            return path.read_text().strip() or None
    return None


def ovs_running() -> bool:
    if shutil.which("ovs-vsctl") is None:
        return False
    return subprocess.run(["ovs-vsctl", "--timeout=3", "show"], capture_output=True, check=False).returncode == 0


def networkmanager_problem() -> str | None:
    """NetworkManager managing hwsim radios would fight hostapd/wpa_supplicant."""
    if shutil.which("nmcli") is None:
        return None
    if subprocess.run(["nmcli", "-t", "general", "status"], capture_output=True, check=False).returncode != 0:
        return None  # not running
    if networkmanager_leaves_hwsim_alone():
        return None
    return (
        "NetworkManager is running and would manage mac80211_hwsim radios (fix: list them in "
        "unmanaged-devices, e.g. 'unmanaged-devices=driver:mac80211_hwsim' in "
        "/etc/NetworkManager/conf.d/90-quicbed-unmanaged.conf, then 'nmcli general reload'; "
        "the Ansible role roles/common writes that file)"
    )


def networkmanager_leaves_hwsim_alone(root: Path = Path("/etc/NetworkManager")) -> bool:
    """Whether NetworkManager's configuration marks hwsim radios (driver or wlan names) unmanaged."""
    files = [root / "NetworkManager.conf", *sorted((root / "conf.d").glob("*.conf"))]
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "unmanaged-devices" and ("mac80211_hwsim" in value or "wlan" in value):
                return True
    return False


def unrealisable(topology: Topology) -> list[str]:
    """What Mininet-WiFi cannot build: delivery traces (no qdisc replays one) and ACK acceleration
    at an AP (hostapd has none)."""
    return kernel_unrealisable(topology.links) + [
        f"nodes[{node.name}].fastack: ACK acceleration is a model of the ns3 backend's access point; hostapd has "
        "none (fix: backend: ns3)"
        for node in topology.nodes.values()
        if isinstance(node, AccessPoint) and node.fastack
    ]


def check_requirements(topology: Topology, options: MininetWifiOptions) -> None:
    problems = unrealisable(topology)
    if problems:
        raise BackendError("the mininet-wifi backend cannot build these links: " + "; ".join(problems))
    require_root_and_tools("the mininet-wifi backend needs root", ())
    problem = import_problem()
    if problem:
        raise MissingDependency(problem)
    require_root_and_tools(
        "the mininet-wifi backend needs root",
        (
            ("mnexec", f"Mininet's mnexec ({INSTALL_FIX})"),
            ("ifconfig", "apt-get install net-tools (Mininet calls it)"),
            ("hostapd", "apt-get install hostapd"),
            ("wpa_supplicant", "apt-get install wpasupplicant"),
            ("iw", "apt-get install iw"),
            ("tc", "apt-get install iproute2"),
            ("nsenter", "apt-get install util-linux"),
            ("ethtool", "apt-get install ethtool"),
        ),
    )
    if (
        topology.has_wireless()
        and subprocess.run(["modprobe", "mac80211_hwsim", "radios=0"], capture_output=True, check=False).returncode != 0
        and not Path("/sys/module/mac80211_hwsim").exists()
    ):
        raise MissingDependency(
            "this kernel has no mac80211_hwsim (fix: run with --vm, or install "
            "linux-modules-extra-$(uname -r) on Ubuntu)"
        )
    if Path("/sys/module/mac80211_hwsim").exists() and shutil.which("hwsim_mgmt") is None:
        raise MissingDependency(
            f"'hwsim_mgmt' is not installed; Mininet-WiFi creates radios with it (fix: {INSTALL_FIX})"
        )
    if options.wmediumd and shutil.which("wmediumd") is None:
        raise MissingDependency("wmediumd is not installed (fix: build ramonfontes/wmediumd, or run without wmediumd)")
    problem = networkmanager_problem()
    if problem:
        raise MissingDependency(problem)


# -- host-wide helpers -------------------------------------------------------------------------


class PrivateOpenVSwitch:
    """An ovsdb-server + ovs-vswitchd of our own, for hosts (the guest kernels) where none runs.

    The database lives in a temporary folder; the sockets in /run/openvswitch, where
    ovs-vsctl (and so Mininet) looks for them. Stopped (and its database removed) on exit.
    """

    RUN_DIR = Path("/run/openvswitch")
    #: In the virtual-time kernel, ovs-vswitchd (3.1) counts no CPU for its first 10 s: a bridge
    #: made then gets no upcall handler thread ("Overriding n-handler-threads to 0" in its log)
    #: and the datapath loses every packet that misses its flow table, so a station's ARP never
    #: reaches the server. Bridges made after 10 s get one handler. Measured there; the wait
    #: costs no host time under time travel.
    VIRTUAL_TIME_SETTLE_S = 11.0

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.started = False

    def __enter__(self) -> "PrivateOpenVSwitch":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if ovs_running():
            return
        for binary in ("ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovs-vsctl"):
            if shutil.which(binary) is None:
                raise MissingDependency(f"'{binary}' is not installed (fix: apt-get install openvswitch-switch)")
        subprocess.run(["modprobe", "openvswitch"], capture_output=True, check=False)
        schema = Path("/usr/share/openvswitch/vswitch.ovsschema")
        self.folder = Path(tempfile.mkdtemp(prefix="quicbed-ovs-"))
        self.RUN_DIR.mkdir(parents=True, exist_ok=True)
        database = self.folder / "conf.db"
        run_checked(["ovsdb-tool", "create", str(database), str(schema)], "creating an Open vSwitch database")
        self.started = True
        run_checked(
            [
                "ovsdb-server",
                str(database),
                f"--remote=punix:{self.RUN_DIR}/db.sock",
                f"--pidfile={self.folder}/ovsdb-server.pid",
                "--detach",
                f"--log-file={self.folder}/ovsdb-server.log",
            ],
            "starting ovsdb-server",
        )
        run_checked(["ovs-vsctl", "--no-wait", "init"], "initialising Open vSwitch")
        run_checked(
            [
                "ovs-vswitchd",
                f"unix:{self.RUN_DIR}/db.sock",
                f"--pidfile={self.folder}/ovs-vswitchd.pid",
                "--detach",
                f"--log-file={self.folder}/ovs-vswitchd.log",
            ],
            "starting ovs-vswitchd",
        )
        if not ovs_running():
            raise BackendError(f"the private Open vSwitch did not come up (logs in {self.folder})")
        if current_clock() == VIRTUAL:
            time.sleep(self.VIRTUAL_TIME_SETTLE_S)

    def undo_commands(self) -> list[list[str]]:
        """What stops the daemons if this process dies without stop() (for ``quicbed clean``)."""
        if not self.started or self.folder is None:
            return []
        return [
            *(["pkill", "-F", str(self.folder / f"{daemon}.pid")] for daemon in ("ovs-vswitchd", "ovsdb-server")),
            ["rm", "-rf", str(self.folder)],
        ]

    def stop(self) -> None:
        if not self.started or self.folder is None:
            return
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = self.folder / f"{daemon}.pid"
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            kill_and_wait(pid)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.started = False


def hwsim_radios_of(pid: int) -> list[str]:
    """The mac80211_hwsim radios Mininet-WiFi created for process ``pid`` (it puts the pid in their names)."""
    debugfs = Path("/sys/kernel/debug/ieee80211")
    prefix = "mn%05dp" % pid
    return (
        sorted(entry.name for entry in debugfs.iterdir() if entry.name.startswith(prefix)) if debugfs.is_dir() else []
    )


def kill_and_wait(pid: int, timeout: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            _reap(pid)
            time.sleep(0.05)
        if not _alive(pid):
            return


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class ExclusiveLock:
    """One Mininet-WiFi network per machine: its cleanup kills hostapd/wpa_supplicant everywhere."""

    def __init__(self, path: Path = LOCK_PATH) -> None:
        self.path = path
        self.handle: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "another process"
            self.handle.close()
            self.handle = None
            raise BackendError(
                f"another Mininet-WiFi network is running on this machine ({holder}); Mininet-WiFi's "
                "cleanup kills hostapd and wpa_supplicant machine-wide, so run one Mininet-WiFi "
                "experiment at a time (fix: wait for it, or 'quicbed clean' if it crashed)"
            ) from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()}\n")
        self.handle.flush()

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


class DaemonReaper:
    """Make this process the subreaper of the daemons Mininet-WiFi starts, and reap them.

    hostapd and wpa_supplicant are started with -B: they fork and the parent shell forgets
    them. Where the adoptive parent does not reap (virtme-ng's init), Mininet-WiFi's stop
    waits for them forever. Only zombies named like these daemons are reaped here, so the
    exit status of quicbed's own children is never taken from their Popen objects.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not become_subreaper():
            return
        self._thread = threading.Thread(target=self._loop, name="mininet-wifi-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(2.0)
        self.reap_once()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self.reap_once()

    @staticmethod
    def reap_once() -> None:
        me = os.getpid()
        for pid in _child_pids(me):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            name = stat[stat.find("(") + 1 : stat.rfind(")")]
            state = stat.rsplit(")", 1)[1].split()[0]
            if state == "Z" and name in DAEMONS:
                _reap(pid)


def _child_pids(parent: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{parent}/task").glob("*/children"):
        try:
            children += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return children


def ensure_debugfs() -> None:
    """Mininet-WiFi finds its radios under /sys/kernel/debug/ieee80211."""
    if Path("/sys/kernel/debug/ieee80211").exists() or os.path.ismount("/sys/kernel/debug"):
        return
    subprocess.run(["mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug"], capture_output=True, check=False)


def wait_for_wmediumd_socket(timeout: float = 30.0, path: str = WMEDIUMD_SOCKET) -> None:
    """Mininet-WiFi connects to wmediumd after a fixed 1 s sleep; on a slow machine the socket
    is not there yet. Wait until it accepts a connection (called through the patched connector)."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                pass
        time.sleep(0.2)
    raise BackendError(
        f"wmediumd's control socket {path} did not accept connections within {timeout:g} s "
        "(fix: check that wmediumd starts: run it by hand with the config Mininet-WiFi wrote)"
    )


# -- nodes ---------------------------------------------------------------------------------
