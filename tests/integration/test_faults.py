"""Faults during a run: detected at once, named, cleaned up, and the experiment goes on.

Each test runs a small ns3 experiment through ``quicbed run`` (a 10 Mbit/s dumbbell, 3 MB
downloads of about 2.5 s, three runs) and SIGKILLs one process the second run depends on
while its data flows: the ns-3 channel, the server, the client or a capture. The run must
be recorded as failed within seconds, with an error that names the process and the signal;
the next run must succeed, the first run's results stay as they were, and nothing of the
runs is left: namespaces (and the TAP devices and qdiscs inside them), processes, CPU
cgroups, scratch folders, ownership records.

Needs root (namespaces, TAP devices) and ns-3 (the channel program is built on first use).
The microVM case (``quicbed run --vm`` with QEMU killed) boots a software-emulated VM and
takes minutes: it is marked ``slow`` (run it with ``--run-slow``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quicbed.backends.ns3 import build
from quicbed.host import ownership, vm
from quicbed.runner.folder import read_results

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [pytest.mark.needs_root]
needs_ns3 = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The results lines as written (quicbed.runner.folder.read_results, strictly)."""
    return [record.to_dict() for record in read_results(path)]


VICTIM_RUN = "c000-r002"
#: the acceptance bound from a kill to the failed run's results line (measured: about 1 s)
DETECTION_BOUND = 5.0
#: bytes of the client's capture that mean the download is well under way (about 0.7 MB of 3 MB)
FLOWING = 80_000


def _experiment(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "faults.yaml"
    path.write_text(
        f"name: faults\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        "  params: {rate: 10mbit, delay: 2ms, queue_limit: 100}\nbackend: ns3\n"
        "workload: {object: 3MB}\nmatrix:\n  transport: [quic]\nrepetitions: 3\ntimeout: 30s\n"
        f"validity: {{reruns: 0{extra}}}\n"
    )
    return path


class QuicbedRun:
    """``quicbed run`` in the background, and the networks it builds (their ownership records,
    collected while it runs: namespaces, channel pid, scratch folder)."""

    def __init__(self, exp: Path, out: Path, *options: str) -> None:
        self.out = out
        self.command = [sys.executable, "-m", "quicbed", "run", str(exp), "--out", str(out), "--no-report", *options]
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.networks: dict[str, ownership.Ownership] = {}

    def look(self) -> None:
        for record in ownership.load_all():
            if record.owner_pid == self.process.pid:
                self.networks[record.run_id] = record

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            self.look()
            assert self.process.poll() is None, f"quicbed ended before {what}: {self.process.stdout.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"not {what} within {timeout:g} s"
            time.sleep(0.02)
        return value

    def finish(self, timeout: float = 180.0) -> str:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            self.look()
            assert time.monotonic() < deadline, f"quicbed did not finish within {timeout:g} s"
            time.sleep(0.05)
        output = self.process.stdout.read()  # type: ignore[union-attr]
        assert self.process.returncode == 0, output
        return output

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process.stdout.close()  # type: ignore[union-attr]


def _command_lines() -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return found


def _process_with(*parts: str) -> int | None:
    """The pid of a process (not the ``ip netns exec`` wrapper) whose command line has all ``parts``."""
    for pid, line in _command_lines().items():
        if all(part in line for part in parts) and not line.startswith("ip "):
            return pid
    return None


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is missing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _channel_pid(out: Path) -> int | None:
    try:
        networks = json.loads((out / "metadata.json").read_text())["sessions"][-1]["networks"]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return networks[-1]["network"]["channel"]["pid"] if networks else None


#: how to find each victim while the run's data flows (out: the results folder)
VICTIMS: dict[str, tuple[Callable[[Path], int | None], str]] = {
    "channel": (_channel_pid, "the ns-3 channel exited on signal 9 (SIGKILL) during the transfer"),
    "server": (
        lambda out: _process_with("quicbed.apps.quic.server", f"{out}/runs/.{VICTIM_RUN}.partial"),
        "the server (quic-server on server) exited on signal 9 (SIGKILL) during the transfer",
    ),
    "client": (
        lambda out: _process_with("quicbed.apps.quic.client", f"{out}/runs/.{VICTIM_RUN}.partial"),
        "the client on client exited on signal 9 (SIGKILL) before writing its record",
    ),
    "capture": (
        lambda out: _process_with("tcpdump", f"{out}/runs/.{VICTIM_RUN}.partial/server.pcap"),
        "the server capture (server.tcpdump on server) exited on signal 9 (SIGKILL) during the transfer",
    ),
}


def _line_of(out: Path, run_id: str) -> dict[str, Any] | None:
    lines = [line for line in read_lines(out / "results.jsonl") if line["run_id"] == run_id]
    return lines[0] if lines else None


def _folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _kill_mid_transfer(run: QuicbedRun, victim: str) -> tuple[float, dict[str, str]]:
    """SIGKILL the victim while the second run's data flows; the seconds from the kill to the
    second run's results line, and the first run's folder digest from before the kill."""
    out = run.out
    run.wait(lambda: _line_of(out, "c000-r001"), "the first run finished")
    before = _folder_digest(out / "runs" / "c000-r001")
    capture = out / "runs" / f".{VICTIM_RUN}.partial" / "client.pcap"
    run.wait(lambda: capture.exists() and capture.stat().st_size > FLOWING, "the second run's data flowed")
    find, _ = VICTIMS[victim]
    pid = run.wait(lambda: find(out), f"the {victim} was found")
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    run.wait(lambda: _line_of(out, VICTIM_RUN), "the second run was recorded", timeout=60)
    return time.monotonic() - killed, before


def _quicbed_cgroups(pid: int) -> list[str]:
    """The CPU accounting cgroups of the runs of quicbed process ``pid`` (named PID-RUNID)."""
    return [
        str(path)
        for pattern in (f"/sys/fs/cgroup/quicbed/{pid}-*", f"/sys/fs/cgroup/*/quicbed/{pid}-*")
        for path in Path("/").glob(pattern.lstrip("/"))
    ]


def _assert_nothing_left(run: QuicbedRun) -> None:
    assert len(run.networks) >= 2, "the run after the fault had a new network"
    live = set(ownership.quicbed_namespaces())
    for record in run.networks.values():
        assert not set(record.namespaces) & live, "namespaces (with their TAPs and qdiscs) are left"
        for pid in record.pids:  # the channel
            assert not (_alive(pid) and "quicbed-ns3-channel" in _command_lines().get(pid, "")), "a channel is left"
        assert not record.path.exists(), "an ownership record is left"
        assert not [folder for folder in record.scratch_dirs if Path(folder).exists()], "a scratch folder is left"
    leftovers = [
        line
        for line in _command_lines().values()
        if str(run.out) in line or any(f"quicbed-ns3-{run_id}" in line for run_id in run.networks)
    ]
    assert not leftovers, leftovers
    assert not _quicbed_cgroups(run.process.pid), "CPU accounting cgroups are left"
    assert not (run.out / ".work").exists() and not list((run.out / "runs").glob(".*.partial"))


def _counted(line: dict[str, Any]) -> bool:
    """ok, or invalid only because this busy machine held ns-3 back."""
    return line["status"] == "ok" or (
        line["status"] == "invalid" and "behind the wall clock" in " ".join(line["invalid_reasons"])
    )


@needs_ns3
@pytest.mark.parametrize("victim", list(VICTIMS))
def test_a_killed_process_fails_its_run_at_once_and_the_next_run_succeeds(tmp_path: Path, victim: str) -> None:
    run = QuicbedRun(_experiment(tmp_path), tmp_path / "out")
    try:
        seconds, first = _kill_mid_transfer(run, victim)
        output = run.finish()
    finally:
        run.kill()
    out = run.out
    lines = {line["run_id"]: line for line in read_lines(out / "results.jsonl")}
    failed = lines[VICTIM_RUN]
    _, error = VICTIMS[victim]
    print(f"{victim}: {seconds:.2f} s from the kill to the failed run; error: {failed['error']}")
    assert failed["status"] == "failed" and error in failed["error"], failed["error"]
    assert seconds < DETECTION_BOUND, f"the run failed {seconds:.1f} s after the {victim} was killed"
    assert f"FAILED: {error}" in output
    assert (out / "runs" / VICTIM_RUN / "logs" / "error.txt").exists()
    assert _counted(lines["c000-r001"]) and _counted(lines["c000-r003"]), lines
    assert _folder_digest(out / "runs" / "c000-r001") == first, "the first run's results changed"
    _assert_nothing_left(run)


@needs_ns3
def test_a_failed_run_is_made_again_when_asked_and_every_attempt_is_kept(tmp_path: Path) -> None:
    """validity.retry_failed: the run whose channel was killed is made again on a new network."""
    run = QuicbedRun(_experiment(tmp_path, ", retry_failed: 1"), tmp_path / "out")
    try:
        seconds, _ = _kill_mid_transfer(run, "channel")
        run.finish()
    finally:
        run.kill()
    out = run.out
    attempts = [line for line in read_lines(out / "results.jsonl") if line["run_id"] == VICTIM_RUN]
    assert [line["status"] for line in attempts][:1] == ["failed"] and len(attempts) == 2, attempts
    again = attempts[1]
    assert _counted(again) and again["attempt"] == 2, again
    (earlier,) = again["earlier_attempts"]
    assert earlier["status"] == "failed" and "the ns-3 channel exited on signal 9" in earlier["error"]
    kept = out / "attempts" / f"{VICTIM_RUN}-1"
    assert json.loads((kept / "run.json").read_text())["status"] == "failed" and (kept / "logs" / "error.txt").exists()
    assert seconds < DETECTION_BOUND
    _assert_nothing_left(run)


@pytest.fixture
def shared_scratch() -> Iterator[Path]:
    """A folder the microVM shares with this host (its /tmp is the guest's own), removed after."""
    (ROOT / "results").mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=ROOT / "results", prefix=".test-faults-vm-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_killed_microvm_fails_the_experiment_at_once_and_a_resume_finishes_it(shared_scratch: Path) -> None:
    """``quicbed run --vm`` whose QEMU is SIGKILLed during the second run: the command fails at once,
    naming the microVM and how QEMU ended; nothing of the VM is left; the first run is intact and
    ``--resume`` makes the second. 3.5-5 minutes under software emulation (two boots):
    ``python -m pytest tests/integration/test_faults.py --run-slow -k microvm``."""
    usable, reason = vm.vm_available(allow_fetch=False)
    if not usable:
        pytest.skip(f"microVM not available: {reason}")
    exp, out = shared_scratch / "vm.yaml", shared_scratch / "out"
    exp.write_text(
        f"name: vm-faults\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        "  params: {rate: 10mbit, delay: 2ms, queue_limit: 100}\nbackend: netns\n"
        "workload: {object: 200kB}\nmatrix:\n  transport: [tcp]\nrepetitions: 2\ntimeout: 60s\n"
    )
    run = QuicbedRun(exp, out, "--vm")
    try:
        run.wait(lambda: _line_of(out, "c000-r001"), "the first run finished in the microVM", timeout=600)
        first = _folder_digest(out / "runs" / "c000-r001")
        run.wait(lambda: (out / "runs" / f".{VICTIM_RUN}.partial").exists(), "the second run started", timeout=300)
        time.sleep(3.0)  # into the run (a software-emulated run takes tens of seconds)
        run.look()
        (machine,) = run.networks.values()  # the VM's ownership record: vng, QEMU, virtiofsd
        qemu = next(pid for pid in machine.pids if "qemu-system" in _command_lines().get(pid, ""))
        os.kill(qemu, signal.SIGKILL)
        killed = time.monotonic()
        output, _ = run.process.communicate(timeout=60)
        seconds = time.monotonic() - killed
    finally:
        run.kill()
    print(f"microVM: {seconds:.2f} s from the kill to the failed command")
    assert run.process.returncode == 1, output
    assert "the microVM stopped without reporting" in output and "QEMU exited without a word" in output, output
    assert seconds < DETECTION_BOUND
    assert not machine.path.exists(), "the microVM's ownership record is left"
    deadline = time.monotonic() + 3.0  # SIGKILLed, a process may take a moment to exit
    while (alive := [pid for pid in machine.pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"processes of the microVM are left: {alive}"
    assert [line["run_id"] for line in read_lines(out / "results.jsonl")] == ["c000-r001"]
    assert _folder_digest(out / "runs" / "c000-r001") == first
    resumed = subprocess.run(
        [*run.command, "--resume"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    lines = read_lines(out / "results.jsonl")
    assert [(line["run_id"], line["status"]) for line in lines] == [("c000-r001", "ok"), (VICTIM_RUN, "ok")], lines
    assert not (out / ".work").exists() and not list((out / "runs").glob(".*.partial"))
