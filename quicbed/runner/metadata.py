"""What metadata.json records about the machine, the tools and the realised network."""

from __future__ import annotations

import datetime

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from quicbed import __version__
from quicbed.backends.base import Network, NodeHandle
from quicbed.errors import BackendError
from quicbed.host.clock import current_clock
from quicbed.paths import PACKAGE_ROOT

#: offload features that change what captures see and how packets are batched
OFFLOADS = (
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "large-receive-offload",
    "tx-checksumming",
    "rx-checksumming",
)


def _output(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (result.stdout + result.stderr).strip() or None


def _first_match(pattern: str, text: str | None) -> str | None:
    match = re.search(pattern, text or "")
    return match.group(1) if match else None


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _debian_version(package: str) -> str | None:
    return _output(["dpkg-query", "-W", "-f=${Version}", package])


def git_commit() -> dict[str, Any] | None:
    if not (PACKAGE_ROOT / ".git").exists():
        return None
    commit = _output(["git", "-C", str(PACKAGE_ROOT), "rev-parse", "HEAD"])
    status = _output(["git", "-C", str(PACKAGE_ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(status)}


@lru_cache(maxsize=1)
def tool_versions() -> dict[str, Any]:
    return {
        "quicbed": __version__,
        "python": sys.version.split()[0],
        "aioquic": _package_version("aioquic"),
        "numpy": _package_version("numpy"),
        "nginx": _first_match(r"nginx/(\S+)", _output(["nginx", "-v"])),
        "iperf3": _first_match(r"iperf (\S+)", _output(["iperf3", "--version"])),
        "tcpdump": _first_match(r"tcpdump version (\S+)", _output(["tcpdump", "--version"])),
        "ns3": _debian_version("libns3-dev"),
        "iproute2": _first_match(r"iproute2-([\w.]+)", _output(["ip", "-V"])),
    }


#: host settings that change how transports behave, recorded as Flent records them
SYSCTLS = (
    "net.core.default_qdisc",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_no_metrics_save",
    "kernel.sched_rt_runtime_us",
)


def sysctls(names: tuple[str, ...] = SYSCTLS) -> dict[str, str | None]:
    """The values of ``names`` in this namespace (None where this kernel has no such setting)."""
    values: dict[str, str | None] = {}
    for name in names:
        try:
            values[name] = " ".join(Path("/proc/sys", *name.split(".")).read_text().split())
        except OSError:
            values[name] = None
    return values


def cpu_model() -> str | None:
    try:
        return _first_match(r"(?m)^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text()) or None
    except OSError:
        return None


def utc(epoch: float) -> str:
    """An epoch time as ISO 8601 UTC, for readers of metadata.json (the epoch stays beside it)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")


def machine_name() -> str:
    """The machine's hostname; inside the microVM or the virtual-time kernel, the hostname of the
    machine that booted it (QUICBED_MACHINE), so that runs made there name the real host."""
    return os.environ.get("QUICBED_MACHINE") or platform.node()


def host_info() -> dict[str, Any]:
    memory = None
    try:
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {
        "hostname": machine_name(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "os": _first_match(
            r'PRETTY_NAME="([^"]+)"', Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
        ),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_bytes": memory,
        "sysctls": sysctls(),
        "in_microvm": os.environ.get("QUICBED_IN_VM") == "1",
        "clock": current_clock(),
        "tbf_burst_ms": os.environ.get("QUICBED_TBF_BURST_MS"),
    }


def _handles(network: Network) -> Iterator[tuple[str, NodeHandle]]:
    """The nodes that are namespaces (nodes a backend simulates, e.g. ns-3's access points, are not)."""
    for name in network.topology.nodes:
        try:
            yield name, network.node(name)
        except BackendError:
            continue


def qdisc_state(network: Network) -> dict[str, list[str]]:
    """``tc qdisc show`` of every namespace: what shaped the packets of a run."""
    return {
        name: handle.run(["tc", "qdisc", "show"], check=False).stdout.strip().splitlines()
        for name, handle in _handles(network)
    }


def interface_state(network: Network) -> dict[str, Any]:
    """Qdiscs and offloads of every interface of the namespaces."""
    state: dict[str, Any] = {}
    qdiscs = qdisc_state(network)
    for name, handle in _handles(network):
        offloads: dict[str, dict[str, str]] = {}
        for interface in handle.interfaces:
            text = handle.run(["ethtool", "-k", interface], check=False).stdout
            offloads[interface] = {
                feature: value
                for feature, value in re.findall(r"^([a-z-]+): (on|off)", text, re.MULTILINE)
                if feature in OFFLOADS
            }
        state[name] = {"qdiscs": qdiscs[name], "offloads": offloads}
    return state
