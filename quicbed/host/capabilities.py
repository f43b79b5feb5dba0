"""What this host can do, found by trying rather than by guessing (``quicbed doctor``)."""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Capability:
    name: str
    available: bool
    detail: str
    #: what the user loses without it
    disables: str
    #: how to get it
    fix: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _version(argv: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(pattern, result.stdout + result.stderr)
    return match.group(1) if match else ""


def _binary(name: str, version_argv: list[str], disables: str, fix: str, pattern: str | None = None) -> Capability:
    path = shutil.which(version_argv[0])
    if not path:
        return Capability(name, False, "not installed", disables, fix)
    version = _version(version_argv, pattern) if pattern else _version(version_argv)
    return Capability(name, True, f"{version or 'version unknown'} ({path})", disables, fix)


def _python_package(name: str, distribution: str, disables: str, fix: str) -> Capability:
    try:
        return Capability(name, True, importlib.metadata.version(distribution), disables, fix)
    except importlib.metadata.PackageNotFoundError:
        return Capability(name, False, "not installed in this Python", disables, fix)


def _in_probe_namespace(commands: list[list[str]]) -> bool:
    """Run commands in a throw-away namespace; True if all succeed."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"qbprobe{os.getpid()}"
    try:
        if subprocess.run(["ip", "netns", "add", name], capture_output=True, check=False).returncode:
            return False
        return all(subprocess.run(["ip", "-n", name, *c] if c[0] == "link" else ["tc", "-n", name, *c],
                                  capture_output=True, check=False).returncode == 0 for c in commands)
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@functools.lru_cache(maxsize=None)
def has_netns() -> bool:
    return _in_probe_namespace([["link", "set", "lo", "up"]])


@functools.lru_cache(maxsize=None)
def has_netem() -> bool:
    """Whether the running kernel offers sch_netem (built in, loaded or loadable)."""
    return _in_probe_namespace([["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]])


def _kernel_module(name: str) -> tuple[bool, str]:
    if Path(f"/sys/module/{name}").exists():
        return True, "loaded"
    result = subprocess.run(["modinfo", "-F", "filename", name], capture_output=True, text=True, check=False) \
        if shutil.which("modinfo") else None
    if result is not None and result.returncode == 0 and os.access("/proc/sys/kernel/modprobe", os.R_OK):
        modules_disabled = Path("/proc/sys/kernel/modules_disabled")
        if modules_disabled.exists() and modules_disabled.read_text().strip() == "1":
            return False, "module present but module loading is disabled"
        return True, "loadable"
    return False, "not in this kernel"


def _ns3() -> Capability:
    libraries = glob.glob("/usr/lib/*/libns3*-wifi*.so*") + glob.glob("/usr/lib/libns3*-wifi*.so*")
    headers = Path("/usr/include/ns3/wifi-module.h").exists() or bool(glob.glob("/usr/include/ns3*/ns3/wifi-module.h"))
    version = _version(["dpkg-query", "-W", "-f", "${Version}", "libns3-dev"], r"([\d.]+\S*)")
    ok = bool(libraries) and headers
    detail = f"libns3-dev {version}" if ok else ("libraries without headers" if libraries else "not installed")
    return Capability("ns3", ok, detail, "the ns3 WiFi backend (airtime, A-MPDU, CSMA/CA)",
                      "apt-get install libns3-dev")


def _mininet_wifi() -> Capability:
    try:
        import mn_wifi  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return Capability("mininet_wifi", False, "mn_wifi not importable", "the mininet-wifi backend",
                          "install Mininet-WiFi from upstream (roles/mininet_wifi does it)")
    try:
        version = importlib.metadata.version("mininet-wifi")
    except importlib.metadata.PackageNotFoundError:
        version = "installed"
    return Capability("mininet_wifi", True, version, "the mininet-wifi backend")


def _kvm() -> Capability:
    try:
        from quicbed.host import vm

        usable, detail = vm.kvm_status()
    except (ImportError, AttributeError):
        usable, detail = False, "untested"
    if not Path("/dev/kvm").exists():
        usable, detail = False, "no /dev/kvm"
    return Capability("kvm", usable, detail, "fast microVMs (without it they run ~13x slower, in software)",
                      "run 'quicbed vm setup' to test it; enable nested virtualisation on the host")


def _vm_kernel() -> Capability:
    try:
        from quicbed.host import kernel

        cached = kernel.cached_kernel()
    except (ImportError, AttributeError):
        cached = None
    return Capability("vm_kernel", cached is not None,
                      f"{cached.version} in {cached.root}" if cached else "not fetched",
                      "the microVM (netem and mac80211_hwsim on hosts whose kernel lacks them)",
                      "quicbed vm setup")


def capabilities() -> list[Capability]:
    netem = has_netem()
    hwsim, hwsim_detail = _kernel_module("mac80211_hwsim")
    ovs, ovs_detail = _kernel_module("openvswitch")
    root = os.geteuid() == 0
    return [
        Capability("root", root, "yes" if root else f"uid {os.geteuid()}",
                   "every emulation (namespaces need root)", "run with sudo"),
        Capability("netns", has_netns(), "network namespaces, veth" if root else "needs root to test",
                   "the netns backend and every endpoint", "a kernel with CONFIG_NET_NS and root"),
        Capability("netem", netem, "sch_netem works" if netem else "no sch_netem in this kernel",
                   "delay, jitter, loss, corruption, reordering on wired links (rate limits still work)",
                   "use the microVM: quicbed run --vm"),
        Capability("mac80211_hwsim", hwsim, hwsim_detail, "the mininet-wifi backend on this kernel",
                   "linux-modules-extra-$(uname -r) on Ubuntu, or use the microVM"),
        Capability("openvswitch", ovs and bool(shutil.which("ovs-vsctl")),
                   ovs_detail + ("" if shutil.which("ovs-vsctl") else ", no ovs-vsctl"),
                   "Mininet-WiFi access points", "apt-get install openvswitch-switch"),
        _kvm(),
        _binary("qemu", ["qemu-system-x86_64", "--version"], "the microVM", "apt-get install qemu-system-x86"),
        _binary("vng", ["vng", "--version"], "the microVM", "pip install virtme-ng"),
        _vm_kernel(),
        _ns3(),
        _binary("nginx", ["nginx", "-v"], "the TCP (HTTP/1.1, HTTP/2) baseline", "apt-get install nginx"),
        _binary("iperf3", ["iperf3", "--version"], "capacity probes and background traffic",
                "apt-get install iperf3"),
        _binary("tcpdump", ["tcpdump", "--version"], "packet captures (loss, OWD, IPT metrics)",
                "apt-get install tcpdump"),
        _binary("ethtool", ["ethtool", "--version"], "turning offloads off (captures show real packets)",
                "apt-get install ethtool"),
        _python_package("aioquic", "aioquic", "QUIC and BQUIC endpoints", "pip install aioquic"),
        _mininet_wifi(),
    ]
