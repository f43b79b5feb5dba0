"""The virtual-time kernel, booted for real: its clock, what runs inside it, how it stops, and
an experiment in virtual time end to end (records, report, repeatability, the host's load).

Needs the kernel that scripts/install.sh builds ('quicbed uml setup'); without it every test
here skips and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from quicbed.errors import VmTimeout
from quicbed.host.uml import boot
from quicbed.host.uml.build import cached_uml_kernel

ROOT = Path(__file__).resolve().parents[2]
KERNEL = cached_uml_kernel()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(
        KERNEL is None,
        reason="the virtual-time kernel is not built (fix: 'quicbed uml setup' as root, or scripts/install.sh)",
    ),
]

CLOCKS = """
import json, time
def took(work):
    start = time.monotonic(); work(); return time.monotonic() - start
print(json.dumps({
    "sleep_60": took(lambda: time.sleep(60)),
    "sleeps_1ms": took(lambda: [time.sleep(0.001) for _ in range(200)]),
    "busy": took(lambda: sum(i * i for i in range(3_000_000))),
    "cmdline": open("/proc/cmdline").read(),
}))
"""


def _guest_json(output: str) -> dict[str, Any]:
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def test_the_clock_waits_for_computing_and_keeps_sleeps_exact() -> None:
    started = time.monotonic()
    result = boot.run_in_uml([sys.executable, "-c", CLOCKS], cwd=ROOT, timeout=600)
    host_seconds = time.monotonic() - started
    assert result.returncode == 0, result.output
    guest = _guest_json(result.output)
    assert "time-travel=inf-cpu" in guest["cmdline"]
    assert guest["sleep_60"] == pytest.approx(60.0, abs=0.001)
    assert guest["sleeps_1ms"] == pytest.approx(0.2, abs=0.02)  # high-resolution timers, not 10 ms ticks
    assert guest["busy"] < 0.001  # computing takes none of its time
    assert host_seconds < 60  # the minute of sleep was skipped, not waited for


def test_exit_status_output_and_the_features_the_host_lacks() -> None:
    script = (
        "tc qdisc add dev lo root netem delay 5ms loss 1% && tc qdisc show dev lo && "
        "modprobe mac80211_hwsim radios=0 && echo hwsim radios: $(ls /sys/class/ieee80211 | wc -l) && "
        "cat /proc/sys/net/ipv4/tcp_congestion_control && "
        "test -c /dev/net/tun && uname -r && exit 3"
    )
    result = boot.run_in_uml(["sh", "-c", script], cwd="/", timeout=600)
    assert result.returncode == 3, result.output
    assert "netem" in result.output and "delay 5ms loss 1%" in result.output
    # mac80211_hwsim is built in, with no radio of its own (Mininet-WiFi makes them), and modprobe finds it
    assert "hwsim radios: 0" in result.output
    assert "bbr" in result.output  # the host's default congestion control
    assert result.output.strip().splitlines()[-1].endswith("-quicbed")


def test_a_timeout_stops_the_kernel_and_every_host_process_it_made() -> None:
    # a busy loop never lets virtual time pass: only the host's timeout ends it
    others = _kernel_sessions()
    with pytest.raises(VmTimeout, match="did not finish within 8 s"):
        boot.run_in_uml([sys.executable, "-c", "while True: pass"], cwd="/", timeout=8)
    time.sleep(0.5)
    assert _kernel_sessions() - others == set()


def _kernel_sessions() -> set[int]:
    """Sessions of the kernel's host processes. Each boot runs in a session of its own, and another
    run's kernel beside the tests makes and ends processes all the time: its session was there before."""
    sessions = set()
    for pid in _pids_of(str(KERNEL.binary)):  # type: ignore[union-attr]
        try:
            sessions.add(os.getsid(pid))
        except ProcessLookupError:
            continue
    return sessions


def _pids_of(binary: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "exe") == binary:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _run_virtual(out: Path, *options: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "quicbed",
            "run",
            "experiments/quickstart.yaml",
            "--clock",
            "virtual",
            "--repetitions",
            "1",
            "--warmup",
            "0",
            "--out",
            str(out),
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_the_quickstart_in_virtual_time_is_valid_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "virtual"
    lines = _run_virtual(out, "--set", "workload.object=500KB")
    assert sorted(line["cell"]["transport"] for line in lines) == ["bquic-native", "quic-native", "tcp"]
    for line in lines:
        assert line["status"] == "ok" and line["attempt"] == 1, line  # valid at the first attempt
        assert line["clock"] == "virtual" and line["kernel"].endswith("-quicbed")
        # the channel never fell behind its clock: what is left is the microseconds the kernel's
        # own timer handling adds (up to 94 us seen), far below the rules' 1 ms and 4 ms
        assert line["metrics"]["lag_max"] < 1e-4 and line["metrics"]["lag_behind_share"] == 0.0
        assert line["cpu_bound_reasons"] == [] and line["cpu_unknown_reasons"] == []
        assert not any(name.startswith("cpu_") for name in line["metrics"])  # no figures that mean nothing
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["host"]["clock"] == "virtual"
    # the records hold the guest's clock; the wall time the guest took is the host's to write
    guest = json.loads((out / "guest-wall-time.jsonl").read_text())
    assert guest["runs"] == len(lines) and guest["wall_seconds"] > max(
        line["finished"] - line["started"] for line in lines
    )
    summary = (out / "summary.md").read_text()
    assert "Virtual time: every run ran in quicbed's User-Mode Linux kernel" in summary


def test_same_seeds_give_the_same_figures_whatever_else_the_host_runs(tmp_path: Path) -> None:
    """The TCP cell twice: once on a quiet host, once beside a busy loop on every core. In real
    time the busy loops would hold the channel back; in virtual time nothing they do is seen."""
    options = ("--set", "matrix.transport=[tcp]", "--set", "workload.object=500KB", "--no-report")
    quiet = _run_virtual(tmp_path / "quiet", *options)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        busy = _run_virtual(tmp_path / "busy", *options)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert [line["status"] for line in quiet + busy] == ["ok", "ok"]
    for name in ("download_time", "goodput", "owd_mean"):
        assert busy[0]["metrics"][name] == pytest.approx(quiet[0]["metrics"][name], rel=1e-3), name


def _pytest_with_the_plugin(folder: Path, conftest_extra: str, tests: str) -> tuple[int, str]:
    """Run pytest on ``tests`` in ``folder`` with the kernel-feature plugin loaded and a 30 s
    hung-test limit (the boot before the first test counts too); its exit status and output."""
    (folder / "conftest.py").write_text(
        f"import os, sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\npytest_plugins = ['vm_plugin']\n"
        + conftest_extra
    )
    (folder / "test_sample.py").write_text(tests)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(folder), "-rfE"]
        + ["--vm-test-timeout", "30", "test_sample.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return result.returncode, result.stdout + result.stderr


def test_a_test_that_hangs_in_virtual_time_fails_as_hung_and_its_fellows_still_run(tmp_path: Path) -> None:
    """In virtual time a busy loop never ends, so only host time can tell a test that hangs. The
    plugin fails that test as hung after --vm-test-timeout host seconds and runs the others again
    in a new boot of the kernel."""
    others = _kernel_sessions()
    started = time.monotonic()
    returncode, output = _pytest_with_the_plugin(
        tmp_path,
        "",
        "import pytest\n"
        "in_guest = pytest.mark.needs_kernel('netem', virtual_time=True)\n"
        "@in_guest\n"
        "def test_before():\n    pass\n"
        "@in_guest\n"
        "def test_spins():\n    while True:\n        pass\n"
        "@in_guest\n"
        "def test_after():\n    pass\n",
    )
    assert returncode == 1, output
    assert "1 failed, 2 passed" in output, output
    assert "test_sample.py::test_spins had not finished after 30 s of host time" in output, output
    assert "its 2 fellow test(s) run again in a new boot" in output, output
    assert time.monotonic() - started < 300  # bounded by the watchdog, not by the session's timeout
    time.sleep(0.5)
    assert _kernel_sessions() - others == set()  # the hung test's kernel is gone


def test_a_guest_that_does_not_end_after_its_results_keeps_them(tmp_path: Path) -> None:
    """The virtual-time kernel can livelock after the tests (a busy kernel loop that waits for
    another task, which never runs while no time passes): the results in junit.xml stand, the
    guest is stopped and the summary says so."""
    others = _kernel_sessions()
    returncode, output = _pytest_with_the_plugin(
        tmp_path,
        "def pytest_unconfigure(config):\n"
        "    while os.environ.get('QUICBED_PYTEST_IN_VM') == '1':  # after junit.xml is written\n"
        "        pass\n",
        "import pytest\n@pytest.mark.needs_kernel('netem', virtual_time=True)\ndef test_in_guest():\n    pass\n",
    )
    assert returncode == 0 and "1 passed" in output, output
    assert "WARNING: the virtual-time kernel was stopped after its tests" in output, output
    assert "did not end within 30 s of host time after its pytest wrote its results" in output, output
    time.sleep(0.5)
    assert _kernel_sessions() - others == set()
