"""What this host can do, found by trying rather than by guessing (``quicbed doctor``)."""

from __future__ import annotations

import functools
import gzip
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
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
    #: the check itself failed (an exception), as opposed to finding the piece missing
    error: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


#: a doctor check: (name of its line if it fails, what a failure disables, the check)
Check = tuple[str, str, Callable[[], Capability | list[Capability]]]


def tool_version(argv: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(pattern, result.stdout + result.stderr)
    return match.group(1) if match else ""


def binary_capability(
    name: str, version_argv: list[str], disables: str, fix: str, pattern: str | None = None
) -> Capability:
    path = shutil.which(version_argv[0])
    if not path:
        return Capability(name, False, "not installed", disables, fix)
    version = tool_version(version_argv, pattern) if pattern else tool_version(version_argv)
    return Capability(name, True, f"{version or 'version unknown'} ({path})", disables, fix)


def python_package_capability(name: str, distribution: str, disables: str, fix: str) -> Capability:
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
        return all(
            subprocess.run(
                ["ip", "-n", name, *c] if c[0] == "link" else ["tc", "-n", name, *c], capture_output=True, check=False
            ).returncode
            == 0
            for c in commands
        )
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@functools.lru_cache(maxsize=None)
def has_netns() -> bool:
    return _in_probe_namespace([["link", "set", "lo", "up"]])


@functools.lru_cache(maxsize=None)
def has_netem() -> bool:
    """Whether the running kernel offers sch_netem (built in, loaded or loadable)."""
    return _in_probe_namespace([["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]])


def has_hwsim() -> bool:
    """Whether mac80211_hwsim (Mininet-WiFi's radios) is loaded or loadable here."""
    if Path("/sys/module/mac80211_hwsim").exists():
        return True
    probe = (
        subprocess.run(["modprobe", "-n", "-q", "mac80211_hwsim"], capture_output=True, check=False)
        if shutil.which("modprobe")
        else None
    )
    return probe is not None and probe.returncode == 0


#: the kernel configuration symbol of each module quicbed asks for
MODULE_SYMBOLS = {
    "sch_netem": "CONFIG_NET_SCH_NETEM",
    "mac80211_hwsim": "CONFIG_MAC80211_HWSIM",
    "openvswitch": "CONFIG_OPENVSWITCH",
}


def config_has(symbol: str, config_text: str) -> bool:
    """Whether a kernel configuration (the text of a .config) builds ``symbol`` in."""
    return f"\n{symbol}=y\n" in f"\n{config_text}"


def built_in(name: str, config: Path = Path("/proc/config.gz")) -> bool:
    """Whether the running kernel has module ``name`` built in, by its /proc/config.gz (a
    built-in module without parameters has no /sys/module entry, and modinfo cannot see it)."""
    symbol = MODULE_SYMBOLS.get(name)
    try:
        text = gzip.decompress(config.read_bytes()).decode("utf-8", "replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    return symbol is not None and config_has(symbol, text)


def _kernel_module(name: str) -> tuple[bool, str]:
    if Path(f"/sys/module/{name}").exists():
        return True, "loaded"
    if built_in(name):
        return True, "built in"
    result = (
        subprocess.run(["modinfo", "-F", "filename", name], capture_output=True, text=True, check=False)
        if shutil.which("modinfo")
        else None
    )
    if result is not None and result.returncode == 0 and os.access("/proc/sys/kernel/modprobe", os.R_OK):
        modules_disabled = Path("/proc/sys/kernel/modules_disabled")
        if modules_disabled.exists() and modules_disabled.read_text().strip() == "1":
            return False, "module present but module loading is disabled"
        return True, "loadable"
    return False, "not in this kernel"


def _kvm() -> Capability:
    try:
        from quicbed.host import vm

        usable, detail = vm.kvm_status()
    except (ImportError, AttributeError):
        usable, detail = False, "untested"
    if not Path("/dev/kvm").exists():
        usable, detail = False, "no /dev/kvm"
    return Capability(
        "kvm",
        usable,
        detail,
        "fast microVMs (without it they run ~13x slower, in software)",
        "run 'quicbed vm setup' to test it; enable nested virtualisation on the host",
    )


def _vm_kernel() -> Capability:
    try:
        from quicbed.host import kernel

        cached = kernel.cached_kernel()
    except (ImportError, AttributeError):
        cached = None
    return Capability(
        "vm_kernel",
        cached is not None,
        f"{cached.version} in {cached.root}" if cached else "not fetched",
        "the microVM (netem and mac80211_hwsim on hosts whose kernel lacks them)",
        "quicbed vm setup",
    )


def _uml_kernel() -> Capability:
    from quicbed.host.clock import VIRTUAL, current_clock
    from quicbed.host.uml.build import cached_uml_kernel, uml_dir

    if current_clock() == VIRTUAL:
        return Capability(
            "uml_kernel",
            True,
            f"running in it now ({platform.release()}, virtual time)",
            "virtual time (quicbed run --clock virtual)",
            "",
        )
    built = cached_uml_kernel()
    return Capability(
        "uml_kernel",
        built is not None,
        f"{built.describe()} in {built.root}" if built else f"not built in {uml_dir()}",
        "virtual time (quicbed run --clock virtual): cells of any size, runs the host's load cannot change",
        "quicbed uml setup",
    )


def _kernel_capabilities() -> list[Capability]:
    netem = has_netem()
    hwsim, hwsim_detail = _kernel_module("mac80211_hwsim")
    ovs, ovs_detail = _kernel_module("openvswitch")
    root = os.geteuid() == 0
    return [
        Capability(
            "root",
            root,
            "yes" if root else f"uid {os.geteuid()}",
            "every emulation (namespaces need root)",
            "run with sudo",
        ),
        Capability(
            "netns",
            has_netns(),
            "network namespaces, veth" if root else "needs root to test",
            "the netns backend and every endpoint",
            "a kernel with CONFIG_NET_NS and root",
        ),
        Capability(
            "netem",
            netem,
            "sch_netem works" if netem else "no sch_netem in this kernel",
            "delay, jitter, loss, corruption, reordering on wired links (rate limits still work)",
            "use the microVM: quicbed run --vm",
        ),
        Capability(
            "mac80211_hwsim",
            hwsim,
            hwsim_detail,
            "the mininet-wifi backend on this kernel",
            "linux-modules-extra-$(uname -r) on Ubuntu, or use the microVM",
        ),
        Capability(
            "openvswitch",
            ovs and bool(shutil.which("ovs-vsctl")),
            ovs_detail + ("" if shutil.which("ovs-vsctl") else ", no ovs-vsctl"),
            "Mininet-WiFi access points",
            "apt-get install openvswitch-switch",
        ),
    ]


def _vng() -> Capability:
    from quicbed.host import vm

    found = vm.find_vng()
    if found is None:
        return Capability("vng", False, "not installed", "the microVM", "pip install virtme-ng")
    return Capability(
        "vng",
        True,
        f"{tool_version([found, '--version']) or 'version unknown'} ({found})",
        "the microVM",
        "pip install virtme-ng",
    )


def _busybox() -> Capability:
    from quicbed.host import vm

    found = vm.find_static_busybox()
    return Capability(
        "busybox_static",
        found is not None,
        found or "no statically linked busybox",
        "the microVM (virtme-ng builds its initramfs with it)",
        "apt-get install busybox-static",
    )


def _cpu_accounting() -> Capability:
    """Which CPU accounting runs get: cgroups count exited children; schedstat tells a starved
    endpoint (waiting for a core) from an idle one."""
    from quicbed.host.cpu_accounting import CpuAccounting

    backend = CpuAccounting("doctor").backend
    schedstat = Path(f"/proc/{os.getpid()}/schedstat").exists()
    ok = backend != "proc" and schedstat
    detail = f"{backend}, " + ("run-queue wait from schedstat" if schedstat else "no schedstat (CONFIG_SCHED_INFO)")
    return Capability(
        "cpu_accounting",
        ok,
        detail,
        "exact per-role CPU of runs (the /proc fallback misses exited children; without schedstat "
        "a starved endpoint is only seen through its CPU share)",
        "run as root on a kernel with cgroups (v1 cpuacct or v2) and CONFIG_SCHED_INFO",
    )


def _tools() -> list[Capability]:
    return [
        binary_capability("nginx", ["nginx", "-v"], "the TCP (HTTP/1.1, HTTP/2) baseline", "apt-get install nginx"),
        binary_capability(
            "iperf3", ["iperf3", "--version"], "capacity probes and background traffic", "apt-get install iperf3"
        ),
        binary_capability(
            "tcpdump", ["tcpdump", "--version"], "packet captures (loss, OWD, IPT metrics)", "apt-get install tcpdump"
        ),
        binary_capability(
            "ethtool",
            ["ethtool", "--version"],
            "turning offloads off (captures show real packets)",
            "apt-get install ethtool",
        ),
    ]


#: every host check, in the order doctor prints them; the QUIC endpoints and each backend add
#: their own (``quicbed.apps.quic.checks``, ``quicbed.backends.host_checks``)
CHECKS: tuple[Check, ...] = (
    ("kernel", "network emulation on this kernel", _kernel_capabilities),
    ("kvm", "fast microVMs", _kvm),
    (
        "qemu",
        "the microVM",
        lambda: binary_capability(
            "qemu", ["qemu-system-x86_64", "--version"], "the microVM", "apt-get install qemu-system-x86"
        ),
    ),
    ("vng", "the microVM", _vng),
    ("busybox_static", "the microVM", _busybox),
    ("vm_kernel", "the microVM", _vm_kernel),
    ("uml_kernel", "virtual time", _uml_kernel),
    ("tools", "endpoints and captures", _tools),
    ("cpu_accounting", "CPU accounting of runs", _cpu_accounting),
)


def run_check(name: str, disables: str, check: Callable[[], Capability | list[Capability]]) -> list[Capability]:
    """One check's lines; a check that raises becomes a line of its own (``error``), never a traceback.

    A broken installation (a package whose requirement conflicts, a half-built extension)
    typically raises at import time, inside the check that imports it.
    """
    try:
        found = check()
    except Exception as problem:  # noqa: BLE001 - the report must go on whatever one check hits
        text = " ".join(f"{type(problem).__name__}: {problem}".split())
        return [
            Capability(
                name,
                False,
                f"error: {text[:400]}",
                disables,
                f"'{sys.executable} -m pip check' names broken Python requirements; reinstall with "
                "scripts/install.sh (or the Ansible roles), then run quicbed doctor again",
                error=True,
            )
        ]
    return found if isinstance(found, list) else [found]


def capabilities(more: Sequence[Check] = ()) -> list[Capability]:
    """The lines of this module's checks, then of ``more`` (the backends' checks)."""
    return [line for name, disables, check in (*CHECKS, *more) for line in run_check(name, disables, check)]
