"""Marks on what quicbed creates on a host, so that ``quicbed clean`` can remove exactly that.

Each running network writes /run/quicbed/networks/RUNID.json before creating anything:
its owner process (pid and start time, so a reused pid is not mistaken for it), the
namespaces it will create (all named ``qb<RUNID>-<node>``) and host settings to restore.
A network whose owner is gone is a leftover.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from quicbed.atomic import write_text_atomic

STATE_DIR = Path(os.environ.get("QUICBED_STATE_DIR", "/run/quicbed/networks"))
NAMESPACE_PATTERN = re.compile(r"qb([0-9a-f]{6})-[a-z0-9_]+")


def new_run_id() -> str:
    return secrets.token_hex(3)


def namespace_name(run_id: str, node: str) -> str:
    return f"qb{run_id}-{node}"


def process_start_time(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass
class Ownership:
    run_id: str
    owner_pid: int
    owner_start: str | None
    namespaces: list[str] = field(default_factory=list)
    #: sysctl path -> value to put back when no quicbed network is left
    restore_sysctls: dict[str, str] = field(default_factory=dict)
    #: other processes outside namespaces (e.g. a microVM) to kill
    pids: list[int] = field(default_factory=list)
    #: scratch folders the network made for itself (e.g. the ns-3 channel's), to delete
    scratch_dirs: list[str] = field(default_factory=list)
    #: commands that remove what the network made outside namespaces (bridges, radios), run in order
    undo_commands: list[list[str]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"

    @classmethod
    def create(cls, run_id: str) -> "Ownership":
        pid = os.getpid()
        return cls(run_id, pid, process_start_time(pid))

    def save(self) -> None:
        write_text_atomic(self.path, json.dumps(asdict(self), indent=1))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def owner_alive(self) -> bool:
        return self.owner_start is not None and process_start_time(self.owner_pid) == self.owner_start


def load_all() -> list[Ownership]:
    records = []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
        try:
            records.append(Ownership(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return records


def quicbed_namespaces() -> list[str]:
    """Namespaces on this host that carry quicbed's name mark."""
    result = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    names = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    return [name for name in names if NAMESPACE_PATTERN.fullmatch(name)]
