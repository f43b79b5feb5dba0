"""Parsers of the /proc files CPU accounting reads: /proc/stat (the machine's jiffies and
cores), /proc/PID/stat (a process's parent, start time and CPU time) and /proc/self/mountinfo
(where the cgroup hierarchies are mounted). Text in, figures out: nothing here reads a file."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy: version 1 (with its mount options/controllers) or 2."""

    version: int
    mount: str
    controllers: frozenset[str] = frozenset()


def parse_mountinfo(text: str) -> dict[str, Hierarchy]:
    """First mount of each cgroup hierarchy, keyed by v1 controller ("cpuacct", "cpuset", ...)
    and "v2". Read, not assumed: mount points differ between distributions and containers."""
    found: dict[str, Hierarchy] = {}
    for fields in (line.split() for line in text.splitlines()):
        if "-" not in fields[6:] or len(fields) < fields.index("-", 6) + 4:
            continue
        fstype, options = fields[fields.index("-", 6) + 1], fields[fields.index("-", 6) + 3]
        mount = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if fstype == "cgroup2":
            found.setdefault("v2", Hierarchy(2, mount))
        elif fstype == "cgroup":
            for option in options.split(","):
                found.setdefault(option, Hierarchy(1, mount, frozenset(options.split(","))))
    return found


@dataclass(frozen=True)
class MachineTicks:
    """Cumulative /proc/stat jiffies of all CPUs (guest time is already inside user/nice)."""

    busy: int
    idle: int
    steal: int


def parse_proc_stat(text: str) -> tuple[MachineTicks, int]:
    """The machine's busy/idle(+iowait)/steal jiffies and its number of CPUs, from /proc/stat."""
    ticks, cores = MachineTicks(0, 0, 0), 0
    for name, *values in (line.split() for line in text.splitlines() if line.startswith("cpu")):
        if name == "cpu":
            user, nice, system, idle, iowait, irq, softirq, steal = ([*map(int, values)] + [0] * 8)[:8]
            ticks = MachineTicks(user + nice + system + irq + softirq, idle + iowait, steal)
        else:
            cores += 1
    return ticks, cores


def parse_pid_stat(text: str) -> tuple[int, int, int]:
    """(ppid, start time, utime+stime of all its threads) in clock ticks, from /proc/PID/stat."""
    rest = text.rsplit(")", 1)[1].split()
    return int(rest[1]), int(rest[19]), int(rest[11]) + int(rest[12])
