"""What every backend does on the host around its network namespaces.

The netns, ns3 and mininet-wifi backends all put nodes in namespaces named after their run
(``quicbed.host.ownership``), turn offloads off so captures show real packets, widen the
host's allowed TCP congestion controls, check for root and tools, and remove what a run
left behind; this module is that shared part, so no backend imports another.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

from quicbed.backends.base import NodeHandle
from quicbed.errors import BackendError, MissingDependency
from quicbed.host import ownership

ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
OFFLOADS = ("tso", "gso", "gro", "lro", "tx-checksumming")
#: seconds a failing undo command of a dead network is retried (see remove_leftovers)
UNDO_RETRY_S = 20.0


def run_checked(argv: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BackendError(f"{what} failed: {' '.join(argv)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class NamespaceNode(NodeHandle):
    network: Any  # the backend Network that created it (its run_id names the namespace)

    @property
    def namespace(self) -> str:
        return ownership.namespace_name(self.network.run_id, self.name)

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]

    def qdisc_show(self) -> str:
        return run_checked(["tc", "-n", self.namespace, "qdisc", "show"], "tc qdisc show").stdout

    def offloads_off(self, interface: str) -> None:
        """Turn OFFLOADS off on one of its interfaces: packets keep their wire size."""
        run_checked(
            [
                "ip",
                "netns",
                "exec",
                self.namespace,
                "ethtool",
                "-K",
                interface,
                *(word for offload in OFFLOADS for word in (offload, "off")),
            ],
            f"turning offloads off on {self.name}:{interface}",
        )


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


def require_root_and_tools(needs_root: str, tools: Sequence[tuple[str, str]]) -> None:
    """Raise MissingDependency unless running as root and every (binary, fix) is installed."""
    if os.geteuid() != 0:
        raise MissingDependency(f"{needs_root} (fix: run quicbed with sudo)")
    for binary, fix in tools:
        if shutil.which(binary) is None:
            raise MissingDependency(f"'{binary}' is not installed (fix: {fix})")


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
