"""Per-run CPU accounting by role (server, client, channel, ...): cgroups made, processes
moved into them, and a sampler thread; :mod:`quicbed.host.cpu_report` turns the samples into
a report.

How: every role gets a cgroup ``<root>/<run_id>/<role>`` in a hierarchy that only *counts*:
v1 ``cpuacct`` (cpuacct.usage, ns) or cgroup v2 (cpu.stat usage_usec, present even without
the cpu controller). Never the v1 ``cpu`` hierarchy (nor a cpuacct co-mounted with it): a
SCHED_FIFO process (the ns-3 channel runs under ``chrt -f``) cannot join a child cpu cgroup
whose cpu.rt_runtime_us is 0, and cpu cgroups would change CFS fairness between roles. A
cgroup counts a process from its first instruction (preexec()) and keeps the CPU of children
that have exited. Without a writable cgroup, the "proc" backend sums /proc/PID/stat
utime+stime of the registered processes and their descendants: a child that exits takes the
CPU it used since the last sample with it (all of it, if it lived less than one interval).
A daemon thread samples every role and /proc/stat every ``interval`` seconds; window() turns
the samples between two monotonic times into a CpuReport (compute_report()).
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from quicbed.host.cpu_report import JUDGED_ROLES, CpuReport, Sample, compute_report
from quicbed.host.procfs import Hierarchy, parse_mountinfo, parse_pid_stat, parse_proc_stat

ENV_BACKEND = "QUICBED_CPU_ACCOUNTING"  # auto (default), cgroup-v1, cgroup-v2 or proc
#: the CFS bandwidth period of a CPU limit (limit()): the kernel's default
LIMIT_PERIOD_US = 100_000
#: owner records, so that cleanup_leftovers() tells a live run's (empty) cgroups from a dead one's
STATE_DIR = Path(os.environ.get("QUICBED_CPU_STATE_DIR", "/run/quicbed/cpu"))
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class PinResult:
    """Whether pin() worked; false, with the reason, where cpusets are unavailable."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass
class _Tracked:
    role: str
    baseline: int  # ticks it had used before this run could have caused them
    last: int
    movable: bool = True  # False: add_pid(move=False), and its descendants


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as handle:
        return handle.read()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _procs(cgroup: str) -> list[int]:
    try:
        return [int(x) for x in _read(os.path.join(cgroup, "cgroup.procs")).split()]
    except OSError:
        return []


def _processes() -> dict[int, tuple[int, int, int]]:
    found = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            found[int(name)] = parse_pid_stat(_read(f"/proc/{name}/stat"))
        except (OSError, IndexError, ValueError):
            pass  # exited meanwhile
    return found


def _cgroup_of(pid: int, key: str, hierarchy: Hierarchy) -> str:
    """The cgroup directory pid is in on that hierarchy (the mount point if unknown)."""
    try:
        for number, controllers, path in (line.split(":", 2) for line in _read(f"/proc/{pid}/cgroup").splitlines()):
            if (key == "v2" and number == "0") or (key != "v2" and key in controllers.split(",")):
                candidate = os.path.join(hierarchy.mount, path.lstrip("/"))
                return candidate if os.path.isdir(candidate) else hierarchy.mount
    except (OSError, ValueError):
        pass
    return hierarchy.mount


def _owner_file(root: str, run_id: str) -> Path:
    return STATE_DIR / f"{root}-{run_id}.owner"


def _owner_alive(root: str, run_id: str) -> bool:
    try:
        pid, start = map(int, _owner_file(root, run_id).read_text().split())
        return parse_pid_stat(_read(f"/proc/{pid}/stat"))[1] == start
    except (OSError, ValueError, IndexError):
        return False


class CpuAccounting:
    """Per-role CPU of one run (module docstring). Creates nothing until start(); stop()
    removes every cgroup it created and returns the CpuReport of the whole run. ``backend`` is
    the first of cgroup-v1, cgroup-v2, proc this host offers (QUICBED_CPU_ACCOUNTING narrows
    the choice); start() falls back to the next one, with a warning, if it cannot be written."""

    def __init__(
        self,
        run_id: str,
        roles: Sequence[str] = (),
        interval: float = 0.1,
        root: str = "quicbed",
        mountinfo: str | None = None,
    ) -> None:
        for name in (run_id, root, *roles):
            if not _NAME.fullmatch(name):
                raise ValueError(f"invalid cgroup name {name!r} (letters, digits, _ . -)")
        forced = os.environ.get(ENV_BACKEND, "auto")
        if forced not in ("auto", "cgroup-v1", "cgroup-v2", "proc"):
            raise ValueError(f"{ENV_BACKEND}={forced!r}: expected auto, cgroup-v1, cgroup-v2 or proc")
        self.run_id, self.root, self.interval = run_id, root, interval
        self.roles: list[str] = list(dict.fromkeys(roles))
        self.hierarchies = parse_mountinfo(_read("/proc/self/mountinfo") if mountinfo is None else mountinfo)
        acct = self.hierarchies.get("cpuacct")
        self._candidates = [
            (b, k)
            for b, k, usable in (
                ("cgroup-v1", "cpuacct", acct is not None and "cpu" not in acct.controllers),
                ("cgroup-v2", "v2", "v2" in self.hierarchies),
                ("proc", "", True),
            )
            if usable and (forced in ("auto", b) or b == "proc")
        ]  # proc: always the last resort
        self.backend, self._key = self._candidates[0]
        self.cores = 0
        self.warnings: list[str] = []
        #: what the sampler could not read of the judged roles: the report's ``unknown``
        self.gaps: list[str] = []
        self.report: CpuReport | None = None
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        self._created: list[tuple[str, str]] = []  # (hierarchy key, cgroup dir), in creation order
        self._shared: set[str] = set()  # <mount>/<root>: other runs may be using it
        self._homes: dict[str, str] = {}  # hierarchy key -> this process's cgroup there
        self._origins: dict[tuple[int, str], str] = {}  # (pid, key) -> cgroup add_pid() took it from
        self._procs_paths: dict[str, list[bytes]] = {}  # role -> cgroup.procs files preexec writes
        self._cpusets: dict[str, str] = {}  # role -> its v1 cpuset cgroup, once pinned
        self._limits: dict[str, str] = {}  # role -> the cgroup holding its CPU limit, once limited
        self._tracked: dict[tuple[int, int], _Tracked] = {}  # (pid, start time) -> counted from /proc
        self._schedstat: dict[int, tuple[int, float]] = {}  # tid -> (run + wait ns, when read)
        self._pipe: tuple[int, int] | None = None  # proc backend: children report their pid here
        self._start_ticks = 0
        self._state = "new"
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CpuAccounting:
        if self._state != "new":
            raise RuntimeError("CpuAccounting.start() called twice")
        self._state = "running"
        self._start_ticks = int(float(_read("/proc/uptime").split()[0]) * _TICK)
        for backend, key in self._candidates:
            try:
                if backend == "proc":
                    self._pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
                else:
                    self._run_dir(key)
            except OSError as error:
                self.warnings.append(f"{backend} accounting unusable ({error}); trying the next backend")
                continue
            self.backend, self._key = backend, key
            break
        if self._key == "v2" and "cpu" in _read(f"{self.hierarchies['v2'].mount}/cgroup.subtree_control").split():
            self.warnings.append(
                f"cgroup v2 has the cpu controller at its root: '{self.root}' is a CPU-weight "
                f"group of its own (like a systemd slice)"
            )
        try:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            start = parse_pid_stat(_read(f"/proc/{os.getpid()}/stat"))[1]
            _owner_file(self.root, self.run_id).write_text(f"{os.getpid()} {start}\n")
        except OSError as error:
            self.warnings.append(f"no owner record ({error}): 'quicbed clean' may remove this run's empty cgroups")
        for role in self.roles:
            self._ensure_role(role)
        self.cores = parse_proc_stat(_read("/proc/stat"))[1]
        self._sample()
        self._thread = threading.Thread(target=self._loop, name=f"cpu-accounting-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> CpuReport:
        """Stop sampling, remove the run's cgroups, return the report of the whole run."""
        if self._state == "running":
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join()
            self._sample()
            self._cleanup()
        if self.report is None:
            self._state = "stopped"
            self.report = self.window(-math.inf, math.inf)
        return self.report

    def __enter__(self) -> CpuAccounting:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def window(self, start_mono: float, end_mono: float) -> CpuReport:
        """The report over [start_mono, end_mono] (time.monotonic() seconds), e.g. the transfer."""
        with self._lock:
            samples, warnings = list(self._samples), list(self.warnings)
            gaps = list(self.gaps)
        return compute_report(
            samples,
            start_mono,
            end_mono,
            backend=self.backend,
            interval=self.interval,
            cores=self.cores,
            roles=self.roles,
            warnings=warnings,
            gaps=gaps,
        )

    def preexec(self, role: str) -> Callable[[], None]:
        """A subprocess preexec_fn that puts the child into the role before exec, so that it and
        its future children count from their first instruction. Between fork and exec it only
        calls os.getpid/open/write/close on paths prepared here, and never fails the child."""
        self._require_running()
        self._ensure_role(role)
        paths = self._procs_paths[role]  # pin() may extend it; the child sees it as at fork
        pipe, tag = (self._pipe[1] if self._pipe else -1), role.encode() + b" "

        def join_role() -> None:
            pid = b"%d" % os.getpid()
            for path in paths:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                    os.write(fd, pid)
                    os.close(fd)
                except OSError:
                    pass
            if pipe >= 0:
                try:
                    os.write(pipe, tag + pid + b"\n")  # atomic (< PIPE_BUF)
                except OSError:
                    pass

        return join_role

    def add_pid(self, role: str, pid: int, move: bool = True) -> None:
        """Count a process started elsewhere, and its descendants from now on. move=False (for a
        process that must stay where it is), the proc backend, or a move the kernel refuses:
        count it and its descendants by /proc/PID/stat deltas from now on instead."""
        self._require_running()
        self._ensure_role(role)
        if not (move and self.backend != "proc" and self._move(pid, self._key, role)):
            with self._lock:
                self._track(role, pid, from_now=True, movable=move)
        if move and role in self._cpusets:
            self._move(pid, "cpuset", role)

    def pin(self, role: str, cpus: str) -> PinResult:
        """Restrict a role, its processes now and later, to CPUs such as "1" or "0-1": the v2
        cpuset controller when the accounting cgroup is v2 and has it, else v1 cpuset."""
        self._require_running()
        self._ensure_role(role)
        try:
            run_dir = self._v2_run_dir_with("cpuset")
            if run_dir is not None:
                _write(f"{run_dir}/{role}/cpuset.cpus", cpus)
                _write(f"{run_dir}/{role}/cpuset.mems", _read(f"{run_dir}/cpuset.mems.effective").strip())
                return PinResult(True, f"{role} on CPUs {cpus} (cgroup v2 cpuset)")
            if "cpuset" not in self.hierarchies:
                return PinResult(False, "no cpuset: neither a v1 cpuset hierarchy nor the v2 cpuset controller")
            role_dir = self._v1_role_dir("cpuset", role)
            _write(f"{role_dir}/cpuset.cpus", cpus)
            _write(f"{role_dir}/cpuset.mems", _read(f"{os.path.dirname(role_dir)}/cpuset.mems").strip())
        except OSError as error:
            return PinResult(False, f"could not pin {role} to CPUs {cpus}: {error}")
        with self._lock:
            self._cpusets[role] = role_dir
        self._follow("cpuset", role, role_dir)
        return PinResult(True, f"{role} on CPUs {cpus} (cgroup v1 cpuset)")

    def limit(self, role: str, cores: float) -> PinResult:
        """Cap a role, its processes now and later, at ``cores`` CPUs' worth of time (a CFS
        bandwidth quota per 100 ms period): the v2 cpu controller when the accounting cgroup is
        v2 and has it, else the v1 cpu hierarchy (the accounting itself never uses it)."""
        self._require_running()
        self._ensure_role(role)
        quota = max(1000, round(cores * LIMIT_PERIOD_US))  # the kernel's smallest quota is 1 ms
        try:
            run_dir = self._v2_run_dir_with("cpu")
            if run_dir is not None:
                _write(f"{run_dir}/{role}/cpu.max", f"{quota} {LIMIT_PERIOD_US}")
                with self._lock:
                    self._limits[role] = f"{run_dir}/{role}"
                return PinResult(
                    True, f"{role} limited to {cores:g} cores (cgroup v2 cpu.max {quota} {LIMIT_PERIOD_US})"
                )
            if "cpu" not in self.hierarchies:
                return PinResult(False, "no CPU controller: neither a v1 cpu hierarchy nor the v2 cpu controller")
            role_dir = self._v1_role_dir("cpu", role)
            _write(f"{role_dir}/cpu.cfs_period_us", str(LIMIT_PERIOD_US))
            _write(f"{role_dir}/cpu.cfs_quota_us", str(quota))
        except OSError as error:
            return PinResult(False, f"could not limit {role} to {cores:g} cores: {error}")
        with self._lock:
            self._limits[role] = role_dir
        self._follow("cpu", role, role_dir)
        return PinResult(
            True, f"{role} limited to {cores:g} cores (cgroup v1 cpu.cfs_quota_us {quota} per {LIMIT_PERIOD_US})"
        )

    def throttling(self, role: str) -> dict[str, float] | None:
        """How the role's CPU limit acted so far: CFS periods, periods throttled and seconds
        throttled (None without a limit). Read it before stop() removes the cgroups."""
        directory = self._limits.get(role)
        if directory is None:
            return None
        try:
            stat = {
                key: int(value) for key, value in (line.split() for line in _read(f"{directory}/cpu.stat").splitlines())
            }
        except (OSError, ValueError):
            return None
        seconds = stat["throttled_usec"] / 1e6 if "throttled_usec" in stat else stat.get("throttled_time", 0) / 1e9
        return {
            "periods": stat.get("nr_periods", 0),
            "throttled_periods": stat.get("nr_throttled", 0),
            "throttled_seconds": seconds,
        }

    def _v2_run_dir_with(self, controller: str) -> str | None:
        """The run's v2 cgroup with ``controller`` enabled from the root down to it, or None
        when the accounting is not on v2 or v2 lacks the controller (then v1 is tried)."""
        v2 = self.hierarchies.get("v2")
        if self._key != "v2" or not v2 or controller not in _read(f"{v2.mount}/cgroup.controllers").split():
            return None
        run_dir = self._run_dir("v2")
        for parent in (v2.mount, os.path.dirname(run_dir), run_dir):
            if controller not in _read(f"{parent}/cgroup.subtree_control").split():
                _write(f"{parent}/cgroup.subtree_control", f"+{controller}")
        return run_dir

    def _v1_role_dir(self, key: str, role: str) -> str:
        """The role's cgroup on a v1 hierarchy besides the accounting's (cpuset, cpu), made once."""
        role_dir = os.path.join(self._run_dir(key), role)
        if not os.path.isdir(role_dir):
            os.mkdir(role_dir)
            self._created.append((key, role_dir))
        return role_dir

    def _follow(self, key: str, role: str, role_dir: str) -> None:
        """The role's processes, those running and those started later, also join ``role_dir``."""
        procs = os.path.join(role_dir, "cgroup.procs").encode()
        with self._lock:
            self._procs_paths[role] += [] if procs in self._procs_paths[role] else [procs]
            pids = [pid for (pid, _), entry in self._tracked.items() if entry.role == role and entry.movable]
        if self.backend != "proc":
            pids += _procs(os.path.join(self._run_dir(self._key), role))
        for pid in pids:
            self._move(pid, key, role)

    def _require_running(self) -> None:
        if self._state != "running":
            raise RuntimeError(f"CpuAccounting is {self._state}: call start() first")

    def _run_dir(self, key: str) -> str:
        """<mount>/<root>/<run_id> on a hierarchy, created (for v1 cpuset: initialised) once."""
        hierarchy = self.hierarchies[key]
        root_dir = os.path.join(hierarchy.mount, self.root)
        run_dir = os.path.join(root_dir, self.run_id)
        if key in self._homes:
            return run_dir
        self._shared.add(root_dir)
        for path in (root_dir, run_dir):
            try:
                os.mkdir(path)
                self._created += [(key, path)] if path == run_dir else []
            except FileExistsError:
                pass
            for name in ("cpuset.cpus", "cpuset.mems") if key == "cpuset" else ():
                if not _read(f"{path}/{name}").strip():  # v1: no process may join before both are set
                    _write(f"{path}/{name}", _read(f"{os.path.dirname(path)}/{name}").strip())
        self._homes[key] = _cgroup_of(os.getpid(), key, hierarchy)
        return run_dir

    def _ensure_role(self, role: str) -> None:
        if not _NAME.fullmatch(role):
            raise ValueError(f"invalid role name {role!r}")
        with self._lock:
            if role in self._procs_paths:
                return
            self.roles += [] if role in self.roles else [role]
            self._procs_paths[role] = []
            if self.backend != "proc":
                role_dir = os.path.join(self._run_dir(self._key), role)
                if not os.path.isdir(role_dir):
                    os.mkdir(role_dir)
                    self._created.append((self._key, role_dir))
                self._procs_paths[role].append(os.path.join(role_dir, "cgroup.procs").encode())

    def _move(self, pid: int, key: str, role: str) -> bool:
        """Move pid into the role's cgroup on a hierarchy, remembering where it was for stop()."""
        directory = self._cpusets[role] if key == "cpuset" else os.path.join(self._run_dir(key), role)
        origin = _cgroup_of(pid, key, self.hierarchies[key])
        try:
            _write(os.path.join(directory, "cgroup.procs"), str(pid))
        except ProcessLookupError:
            return False  # it has exited
        except OSError as error:
            self.warnings.append(
                f"could not move pid {pid} into the {role} cgroup on {key} ({error})"
                + ("" if key == "cpuset" else f"; counting it from /proc/{pid}/stat")
            )
            return False
        self._origins.setdefault((pid, key), origin)
        return True

    def _track(self, role: str, pid: int, from_now: bool, movable: bool = True) -> None:
        """Count pid (and later its descendants) from /proc. The caller holds the lock."""
        try:
            _, start, ticks = parse_pid_stat(_read(f"/proc/{pid}/stat"))
        except (OSError, IndexError, ValueError):
            return  # already gone: its CPU is lost (a limit of the proc backend)
        baseline = ticks if from_now or start < self._start_ticks else 0
        self._tracked.setdefault((pid, start), _Tracked(role, baseline, ticks, movable))

    def _proc_cpu(self) -> dict[str, float]:
        """Cumulative seconds per role of the /proc-tracked processes and their descendants
        (found by PPid); exited ones keep their last value. The caller holds the lock."""
        if self._pipe is not None:
            try:
                reported = os.read(self._pipe[0], 1 << 16).decode()  # the pipe holds at most 64 KiB
            except BlockingIOError:
                reported = ""
            for role, number in (line.split() for line in reported.splitlines()):
                self._track(role, int(number), from_now=False)
        if not self._tracked:
            return {}
        processes = _processes()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in processes.items():
            children.setdefault(ppid, []).append(pid)
        queue = [(pid, e) for (pid, start), e in self._tracked.items() if processes.get(pid, (0, -1))[1] == start]
        seen: set[int] = set()
        while queue:
            pid, parent = queue.pop()
            if pid not in seen:
                seen.add(pid)
                _, start, ticks = processes[pid]
                entry = self._tracked.setdefault(
                    (pid, start),
                    _Tracked(parent.role, 0 if start >= self._start_ticks else ticks, ticks, parent.movable),
                )
                entry.last = max(entry.last, ticks)
                queue += [(child, entry) for child in children.get(pid, ())]
        totals: dict[str, float] = {}
        for entry in self._tracked.values():
            totals[entry.role] = totals.get(entry.role, 0.0) + (entry.last - entry.baseline) / _TICK
        return totals

    def _sample(self) -> None:
        with self._lock:
            now = time.monotonic()
            previous = self._samples[-1].roles if self._samples else {}
            roles = {role: 0.0 for role in self.roles}
            for role in self.roles if self.backend != "proc" else ():
                directory = os.path.join(self._run_dir(self._key), role)
                try:
                    if self._key == "v2":
                        stat = dict(line.split() for line in _read(f"{directory}/cpu.stat").splitlines())
                        roles[role] = int(stat["usage_usec"]) / 1e6
                    else:
                        roles[role] = int(_read(f"{directory}/cpuacct.usage")) / 1e9
                except (OSError, KeyError, ValueError) as error:
                    roles[role] = previous.get(role, 0.0)
                    message = f"cannot read the CPU usage of {role}: {error}"
                    self.warnings += [] if message in self.warnings else [message]
                    self.gaps += [] if message in self.gaps or role not in JUDGED_ROLES else [message]
            for role, seconds in self._proc_cpu().items():
                roles[role] = roles.get(role, 0.0) + seconds
            demand, combined = self._thread_demand()
            self._samples.append(Sample(now, roles, parse_proc_stat(_read("/proc/stat"))[0], demand, combined))

    def _role_threads(self) -> dict[str, set[int]]:
        """Thread ids of every role: its cgroup's tasks, and the threads of /proc-tracked processes."""
        threads: dict[str, set[int]] = {role: set() for role in self.roles}
        if self.backend != "proc":
            listing = "cgroup.threads" if self._key == "v2" else "tasks"
            for role in self.roles:
                try:
                    text = _read(os.path.join(self._run_dir(self._key), role, listing))
                except OSError:
                    continue
                threads[role].update(int(tid) for tid in text.split())
        for (pid, _), entry in self._tracked.items():
            try:
                threads.setdefault(entry.role, set()).update(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass  # exited
        return threads

    def _thread_demand(self) -> tuple[dict[str, float], dict[str, float]]:
        """Per role since the last sample: the largest (run + wait) / interval of one thread,
        and the sum over its threads divided by the number of cores they may use (their
        affinity, which a cpuset or ``taskset`` narrows). A thread seen for the first time only
        sets its baseline. The caller holds the lock."""
        demand: dict[str, float] = {}
        total: dict[str, float] = {}
        cores: dict[str, set[int]] = {}
        seen: dict[int, tuple[int, float]] = {}
        for role, tids in self._role_threads().items():
            for tid in tids:
                try:
                    run_ns, wait_ns = (int(x) for x in _read(f"/proc/{tid}/schedstat").split()[:2])
                    read_at = time.monotonic()  # per thread: on a busy machine the reads lag the tick
                    allowed = os.sched_getaffinity(tid)
                except (OSError, ValueError):
                    continue  # exited meanwhile
                seen[tid] = (run_ns + wait_ns, read_at)
                before = self._schedstat.get(tid)
                if before is not None and read_at > before[1]:
                    share = (run_ns + wait_ns - before[0]) / 1e9 / (read_at - before[1])
                    demand[role] = max(demand.get(role, 0.0), share)
                    total[role] = total.get(role, 0.0) + share
                    cores.setdefault(role, set()).update(allowed)
        self._schedstat = seen
        return demand, {role: wanted / max(1, len(cores[role])) for role, wanted in total.items()}

    def _loop(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self._sample()
            except Exception as error:  # noqa: BLE001 - a gap in the samples, not a dead sampler
                message = f"sampling failed: {error!r}"
                self.warnings += [] if message in self.warnings else [message]
                self.gaps += [] if message in self.gaps else [message]

    def _cleanup(self) -> None:
        """Move what still runs back where add_pid() took it from, or to this process's own
        cgroup (where it would have been without accounting), then remove the cgroups."""
        for key, directory in reversed(self._created):
            for _ in range(5):  # processes may fork meanwhile
                for pid in _procs(directory):
                    homes = (self._origins.get((pid, key)), self._homes[key], self.hierarchies[key].mount)
                    for home in filter(None, homes):
                        try:
                            _write(os.path.join(home, "cgroup.procs"), str(pid))
                            break
                        except OSError:
                            continue
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass
            except OSError as error:
                self.warnings.append(f"could not remove cgroup {directory}: {error}")
        for directory in self._shared:
            try:
                os.rmdir(directory)
            except OSError:
                pass  # another run is using it
        for fd in self._pipe or ():
            os.close(fd)
        self._pipe = None
        _owner_file(self.root, self.run_id).unlink(missing_ok=True)


def cleanup_leftovers(root: str = "quicbed", mountinfo: str | None = None) -> list[str]:
    """Remove the empty cgroups of runs whose owner process is gone (``quicbed clean``); a
    cgroup with processes in it is never touched, nor any cgroup of a live run."""
    hierarchies = parse_mountinfo(_read("/proc/self/mountinfo") if mountinfo is None else mountinfo)
    removed = []
    for base in {
        os.path.join(hierarchies[k].mount, root) for k in ("cpuacct", "cpuset", "cpu", "v2") if k in hierarchies
    }:
        for run_id in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if not os.path.isdir(os.path.join(base, run_id)) or _owner_alive(root, run_id):
                continue
            for directory, _, _ in os.walk(os.path.join(base, run_id), topdown=False):
                try:
                    if not _procs(directory):
                        os.rmdir(directory)
                        removed.append(directory)
                except OSError:
                    pass
            if not os.path.isdir(os.path.join(base, run_id)):
                _owner_file(root, run_id).unlink(missing_ok=True)
        try:
            os.rmdir(base)
            removed.append(base)
        except OSError:
            pass
    return removed
