"""CPU accounting of real processes with each backend (quicbed.host.cpu_accounting).

The cgroup backends need root and a writable cgroup hierarchy (skipped with the reason
otherwise); the proc backend runs anywhere. Each test takes a few seconds at most and kills
its children (whole process groups) at the end. Ground truth is the children's own rusage:
other work on the machine (e.g. a SCHED_FIFO ns-3 channel of a concurrent run) may keep a
busy loop off its core, so the bounds relative to wall time are only asserted when the loop
actually got most of a core.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from quicbed.host import cpu_accounting
from quicbed.host.cpu_accounting import CpuAccounting, cleanup_leftovers
from quicbed.host.cpu_report import saturation_reasons
from quicbed.host.procfs import parse_pid_stat

ROOT = "quicbed-test"
BUSY = [sys.executable, "-c", "while True: pass"]
FORKER = """
import os, sys, time
pid = os.fork()
if pid == 0:
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    os._exit(0)
os.waitpid(pid, 0)
times = os.times()
print(times.children_user + times.children_system, flush=True)
time.sleep(30)
"""


class Children:
    """Children started in their own session, so that killing the group gets grandchildren too."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def spawn(self, argv: list[str], preexec: Callable[[], None] | None = None, **kwargs) -> subprocess.Popen:
        def setup() -> None:
            os.setsid()
            if preexec is not None:
                preexec()

        proc = subprocess.Popen(argv, preexec_fn=setup, **kwargs)
        self.procs.append(proc)
        return proc

    def cpu_of(self, proc: subprocess.Popen) -> float:
        """Kill and reap proc; the CPU seconds it used (ground truth, from wait4)."""
        os.killpg(proc.pid, signal.SIGKILL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = -signal.SIGKILL
        return usage.ru_utime + usage.ru_stime

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
            if proc.stdout:
                proc.stdout.close()


@pytest.fixture
def children() -> Iterator[Children]:
    kids = Children()
    try:
        yield kids
    finally:
        kids.kill_all()


@pytest.fixture(params=["cgroup-v1", "cgroup-v2", "proc"])
def backend(request, monkeypatch) -> str:
    if request.param != "proc" and os.geteuid() != 0:
        pytest.skip("cgroup accounting needs root: run pytest as root (e.g. sudo)")
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, request.param)
    return request.param


@pytest.fixture
def accounting(backend) -> Iterator[Callable[..., CpuAccounting]]:
    made: list[CpuAccounting] = []

    def make(roles: tuple[str, ...], **kwargs) -> CpuAccounting:
        acct = CpuAccounting(f"t{os.getpid()}-{len(made)}", roles=roles, root=ROOT, **kwargs)
        made.append(acct.start())
        if acct.backend != backend:
            acct.stop()
            pytest.skip(f"no writable {backend} hierarchy here (fell back to {acct.backend}): {acct.warnings}")
        return acct

    try:
        yield make
    finally:
        for acct in made:
            acct.stop()


def _run_dirs(acct: CpuAccounting) -> list[str]:
    return [os.path.join(h.mount, acct.root, acct.run_id) for h in acct.hierarchies.values()]


def _readline(proc: subprocess.Popen, timeout: float = 5.0) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output from the child within {timeout} s"
    return proc.stdout.readline().strip()


def _ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        return parse_pid_stat(handle.read())[2] / os.sysconf("SC_CLK_TCK")


def test_busy_server_idle_client(accounting, backend, children):
    acct = accounting(("server", "client"))
    t0 = time.monotonic()
    server = children.spawn(BUSY, acct.preexec("server"))
    children.spawn(["sleep", "30"], acct.preexec("client"))
    time.sleep(1.0)
    middle = acct.window(t0 + 0.3, t0 + 0.9)
    report = acct.stop()
    wall = time.monotonic() - t0
    truth = children.cpu_of(server)

    counted = report.roles["server"]
    slack = 0.05 if backend != "proc" else 0.15  # proc: 10 ms ticks, the last interval is lost
    assert truth - slack <= counted.cpu_seconds <= truth + 0.02
    # the loop had most of a core until it was reaped (a busy machine shares it: then only the
    # count is checked); a margin above the 0.6 asserted, so that a loop that ran near that
    # share cannot fail on the count's own slack
    if truth >= 0.8 * (time.monotonic() - t0):
        assert 0.6 * wall <= counted.cpu_seconds <= 1.2 * wall
        assert counted.peak_share > 0.8
        assert middle.roles["server"].mean_share > 0.5
    assert middle.window_s == pytest.approx(0.6, abs=0.05)
    assert report.roles["client"].cpu_seconds < 0.05 and report.roles["client"].peak_share < 0.3
    assert report.machine.cores >= 1 and 0 < report.machine.busy_share <= 1
    assert not any("could not remove" in w for w in report.warnings), report.warnings
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []
    assert not cpu_accounting._owner_file(acct.root, acct.run_id).exists()


def test_exited_grandchild(accounting, backend, children):
    """A cgroup keeps the CPU of a grandchild that exited; the proc backend loses the part
    used after the last sample before it exited (all of it for one shorter than an interval)."""
    acct = accounting(("server",))
    forker = children.spawn([sys.executable, "-c", FORKER], acct.preexec("server"), stdout=subprocess.PIPE, text=True)
    grandchild = float(_readline(forker))  # the grandchild has exited and been reaped
    time.sleep(0.2)
    report = acct.stop()
    family = children.cpu_of(forker)  # wait4: the forker and the grandchild it reaped
    counted = report.roles["server"].cpu_seconds
    assert grandchild > 0.05
    if backend == "proc":
        assert 0 <= counted <= family + 0.05
    else:
        assert grandchild - 0.02 <= counted <= family + 0.02
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []


def test_add_pid_moved_and_not_moved(accounting, backend, children):
    acct = accounting(("channel", "other"))
    moved, kept = children.spawn(BUSY), children.spawn(BUSY)
    time.sleep(0.2)
    with open(f"/proc/{moved.pid}/cgroup") as handle:
        before = handle.read()
    already = {moved.pid: _ticks(moved.pid), kept.pid: _ticks(kept.pid)}
    acct.add_pid("channel", moved.pid)
    acct.add_pid("other", kept.pid, move=False)
    if backend != "proc":
        with open(f"/proc/{moved.pid}/cgroup") as handle:
            assert f"/{ROOT}/{acct.run_id}/channel" in handle.read()
    time.sleep(0.8)
    report = acct.stop()
    with open(f"/proc/{moved.pid}/cgroup") as handle:
        assert handle.read() == before  # moved back where it came from
    for role, proc in (("channel", moved), ("other", kept)):
        since = children.cpu_of(proc) - already[proc.pid]
        assert since - 0.15 <= report.roles[role].cpu_seconds <= since + 0.02, role
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []


@pytest.mark.skipif(shutil.which("chrt") is None, reason="needs chrt (util-linux)")
def test_sched_fifo_child_can_start_in_its_role(accounting, children):
    """What the v1 cpu hierarchy would break: chrt -f inside the role's cgroup."""
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root")
    acct = accounting(("channel",))
    proc = children.spawn(["chrt", "-f", "1", "sleep", "5"], acct.preexec("channel"), stderr=subprocess.PIPE)
    time.sleep(0.3)
    assert proc.poll() is None, proc.stderr.read()
    assert os.sched_getscheduler(proc.pid) == os.SCHED_FIFO
    acct.stop()


def test_pin(accounting, children):
    acct = accounting(("server", "client"))
    early = children.spawn(["sleep", "30"], acct.preexec("client"))
    time.sleep(0.25)  # the proc backend learns of it at its next sample
    result = acct.pin("client", "0")
    if not result:
        pytest.skip(f"no cpuset here: {result.reason}")
    late = children.spawn(["sleep", "30"], acct.preexec("client"))
    free = children.spawn(["sleep", "30"], acct.preexec("server"))
    added, unmovable = children.spawn(["sleep", "30"]), children.spawn(["sleep", "30"])
    acct.add_pid("client", added.pid)
    acct.add_pid("client", unmovable.pid, move=False)  # e.g. a channel shared by several runs
    time.sleep(0.2)

    def allowed(pid: int) -> str:
        with open(f"/proc/{pid}/status") as handle:
            return handle.read().split("Cpus_allowed_list:")[1].split()[0]

    assert allowed(early.pid) == allowed(late.pid) == allowed(added.pid) == "0"
    if os.cpu_count() != 1:
        assert allowed(free.pid) != "0" and allowed(unmovable.pid) != "0"
    acct.stop()
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []


def test_context_manager(backend, children):
    with CpuAccounting(f"t{os.getpid()}-cm", roles=("server",), root=ROOT) as acct:
        if acct.backend != backend:
            pytest.skip(f"no writable {backend} hierarchy here")
        proc = children.spawn(["sleep", "30"], acct.preexec("server"))
        time.sleep(0.3)
    assert acct.report is not None and acct.report.window_s > 0.25
    assert proc.poll() is None  # still running: moved out, not killed
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []


def test_cleanup_leftovers(children, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    monkeypatch.delenv(cpu_accounting.ENV_BACKEND, raising=False)
    root = "quicbed-test-left"
    live = CpuAccounting(f"t{os.getpid()}-live", roles=("server",), root=root).start()
    sleeper = children.spawn(["sleep", "30"])
    try:
        if live.backend == "proc":
            pytest.skip(f"no writable cgroup hierarchy: {live.warnings}")
        base = os.path.join(live.hierarchies[live._key].mount, root)
        dead, busy = os.path.join(base, "deadrun", "server"), os.path.join(base, "busyrun", "server")
        os.makedirs(dead)
        os.makedirs(busy)
        with open(os.path.join(busy, "cgroup.procs"), "w") as handle:
            handle.write(str(sleeper.pid))
        removed = cleanup_leftovers(root)
        assert dead in removed and not os.path.exists(os.path.dirname(dead))
        assert os.path.isdir(busy)  # a process lives there
        assert os.path.isdir(os.path.join(base, live.run_id, "server"))  # the live run's, though empty
    finally:
        live.stop()
        children.cpu_of(sleeper)
    assert busy in cleanup_leftovers(root)
    assert not os.path.exists(base)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_a_starved_endpoint_counts_as_cpu_bound(accounting, backend, children):
    """A role that shares its core with a busier process gets about half a core of CPU, but
    wants all of it: it runs or waits in the run queue the whole time, so it is CPU-bound
    (schedstat), while an idle role is not."""
    if not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
        pytest.skip("this kernel has no /proc/PID/schedstat (CONFIG_SCHED_INFO)")
    acct = accounting(("client", "server"))
    t0 = time.monotonic()
    children.spawn(["taskset", "-c", "0", *BUSY])  # the competitor, outside any role
    children.spawn(["taskset", "-c", "0", *BUSY], acct.preexec("client"))
    children.spawn(["sleep", "30"], acct.preexec("server"))
    time.sleep(1.5)
    report = acct.window(t0 + 0.4, t0 + 1.4)
    acct.stop()
    client = report.roles["client"]
    assert client.mean_share < 0.8, client  # it did not get a whole core...
    assert client.saturated_share > 0.8, client  # ...but wanted one all the time
    assert report.roles["server"].saturated_share == 0.0
    assert "client was CPU-bound" in " ".join(saturation_reasons(report))


def test_a_quota_caps_a_role_and_says_how_often_it_held_it_back(accounting, backend, children):
    """limit(): a busy loop in a role capped at 0.2 cores gets about 0.2 cores (CFS bandwidth
    control), and the cgroup's counters say the quota held it back in most periods."""
    if backend == "proc":
        pytest.skip("a CPU quota needs a cgroup (the proc backend only counts)")
    acct = accounting(("client",))
    result = acct.limit("client", 0.2)
    if not result:
        pytest.skip(f"no CPU controller here: {result.reason}")
    t0 = time.monotonic()
    loop = children.spawn(BUSY, acct.preexec("client"))
    time.sleep(2.0)
    throttling = acct.throttling("client")
    report = acct.window(t0 + 0.5, t0 + 1.9)
    used = children.cpu_of(loop)
    acct.stop()
    assert report.roles["client"].mean_share == pytest.approx(0.2, abs=0.05), report.roles["client"]
    assert used < 0.2 * 2.0 + 0.1
    assert throttling is not None and throttling["throttled_periods"] >= 0.8 * throttling["periods"] > 10, throttling
    assert throttling["throttled_seconds"] > 1.0, throttling
    assert [d for d in _run_dirs(acct) if os.path.exists(d)] == []


def test_a_quota_slows_a_cpu_bound_endpoint(accounting, backend, children, tmp_path):
    """The E2 CPU-stress mechanism on a real endpoint: a quota of 0.2 cores on the client's role
    holds aioquic's client to 0.2 cores over its transfer (the share E2 reports as cpu_client),
    so the 2 MB download runs at the quota's pace, whatever else the machine runs.

    How much slower than without the quota depends on the CPU the machine gives the free client,
    not on the quota. Over 175 free/capped pairs on 2 cores the download times were 3.6-7.5x
    apart when the free client had a core of its own (CPU share >= 0.8, 12 pairs), but 0.3-4.7x
    beside busy loops and ns-3 runs, where the free client got 0.14-0.8 cores and its download
    was at times the slower one: a "3x slower" assertion failed in 156 of the 175. The capped
    share never exceeded 0.208: the kernel enforces it. So the ratio is asserted only when the
    free client had a core."""
    if backend == "proc":
        pytest.skip("a CPU quota needs a cgroup (the proc backend only counts)")
    from quicbed.apps import objects
    from quicbed.apps.quic import certs
    from quicbed.runner.transfer import transfer_window

    objects.generate(tmp_path / "www", bulk=[2_000_000], seed=1)
    cert, key = certs.write(tmp_path / "tls")
    ready = tmp_path / "ready.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    children.spawn(
        [
            sys.executable,
            "-m",
            "quicbed.apps.quic.server",
            "--root",
            str(tmp_path / "www"),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--ready-file",
            str(ready),
        ],
        env=env,
    )
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < deadline, "the server did not get ready"
        time.sleep(0.05)
    port = json.loads(ready.read_text())["port"]

    def download(limit: float | None) -> tuple[float, float, dict | None]:
        """Download time, the client's CPU share over its transfer, how the quota throttled it."""
        acct = accounting(("client",))
        if limit is not None:
            result = acct.limit("client", limit)
            if not result:
                pytest.skip(f"no CPU controller here: {result.reason}")
        output = tmp_path / f"client-{limit}.json"
        client = children.spawn(
            [
                sys.executable,
                "-m",
                "quicbed.apps.quic.client",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--ca-cert",
                str(cert),
                "--server-name",
                "localhost",
                "--path",
                "/bulk/2MB.bin",
                "--timeout",
                "60",
                "--output",
                str(output),
            ],
            acct.preexec("client"),
            env=env,
        )
        client.wait(timeout=90)
        throttling = acct.throttling("client")
        record = json.loads(output.read_text())
        assert record["ok"], record
        window = transfer_window([record])
        assert window is not None, record
        share = acct.window(*window).roles["client"].mean_share
        acct.stop()
        return record["completion_time"], share, throttling

    free, free_share, _ = download(None)
    capped, capped_share, throttling = download(0.2)
    figures = {"free_s": free, "capped_s": capped, "free_share": free_share, "capped_share": capped_share}
    # at most 0.208 in 175 transfers, idle or loaded (less only when the machine had not even 0.2
    # cores for it); a normal fit to the 80 measured as here puts 0.25 6.5 sd above their mean
    assert capped_share <= 0.25, figures
    assert throttling is not None and throttling["throttled_periods"] > 0, throttling
    if free_share >= 0.8:  # the free client had a core: 3.6-7.5x in the 12 of 175 pairs where it did
        assert capped > 2 * free, figures


#: half a core: 3 ms of the thread's own CPU time, then 3 ms asleep, until killed
HALF_CORE = """
import time
while True:
    end = time.thread_time() + 0.003
    while time.thread_time() < end:
        pass
    time.sleep(0.003)
"""


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_threads_that_together_fill_their_core_are_cpu_bound(accounting, backend, children):
    """Two processes of one role, each wanting half a core, pinned to the same core: one by one
    they want about two thirds of it, running or waiting while the other runs (less than the
    90 % the busiest thread must reach), together they keep the only core they may use busy.
    The role is CPU-bound by its combined demand (the busiest-thread rule alone: never)."""
    if not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
        pytest.skip("this kernel has no /proc/PID/schedstat (CONFIG_SCHED_INFO)")
    acct = accounting(("client", "server"))
    t0 = time.monotonic()
    for _ in range(2):
        children.spawn(["taskset", "-c", "0", sys.executable, "-c", HALF_CORE], acct.preexec("client"))
    children.spawn(["sleep", "30"], acct.preexec("server"))
    time.sleep(2.0)
    report = acct.window(t0 + 0.5, t0 + 1.9)
    acct.stop()
    middle = [s for s in acct._samples if t0 + 0.5 < s.t <= t0 + 1.9]
    busiest = sorted(s.demand.get("client", 0.0) for s in middle)
    combined = sorted(s.combined.get("client", 0.0) for s in middle)
    if busiest[len(busiest) // 2] >= 0.9:  # other work on core 0 kept each of them waiting
        pytest.skip(f"a single thread was CPU-bound already (busiest demand per interval: {busiest})")
    assert combined[len(combined) // 2] >= 0.95, combined  # together they fill the core
    assert report.roles["client"].saturated_share > 0.8, report.roles["client"]
    assert report.roles["server"].saturated_share == 0.0
    assert "client was CPU-bound" in " ".join(saturation_reasons(report))
