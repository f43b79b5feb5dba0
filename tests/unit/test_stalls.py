"""quicbed.host.stalls on real processes: the helper stops its target on schedule, reports each
stop, and always leaves the target running (block left, parent killed, target gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from quicbed.host.stalls import StallRecord, Stalls, stop_once

ROOT = str(Path(__file__).resolve().parents[2])


def _state(pid: int) -> str:
    """The process's state letter (T: stopped), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _becomes(pid: int, state: str, within: float) -> bool:
    """Whether the process is in ``state`` within ``within`` seconds (a stop takes effect when
    the target next runs, after kill(2) has returned)."""
    deadline = time.monotonic() + within
    while _state(pid) != state:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


@pytest.fixture
def target():
    process = subprocess.Popen(["sleep", "30"])
    yield process
    process.kill()
    process.wait()


def test_the_target_is_stopped_on_schedule_and_running_after_the_block(target) -> None:
    seen = set()
    began = time.monotonic()
    with Stalls(target.pid, stop_s=0.05, period_s=0.1) as stalls:
        for _ in range(50):
            seen.add(_state(target.pid))
            time.sleep(0.01)
    elapsed = time.monotonic() - began
    assert {"T", "S"} <= seen
    assert _becomes(target.pid, "S", within=1)
    # at most one per period begun (fewer when the helper waits for a CPU)
    assert 2 <= stalls.record.stops <= elapsed / 0.1 + 1
    assert min(stalls.record.lengths_s) >= 0.05


def test_one_stop_leaves_the_target_running_and_the_helper_ends_without_waiting_a_period(target) -> None:
    began = time.monotonic()
    stopped = stop_once(target.pid, 0.05)  # (its period is the helper's 60 s limit)
    assert 0.05 <= stopped < time.monotonic() - began < 30
    assert _becomes(target.pid, "S", within=1)


def test_a_record_measures_the_time_stops_held_the_target_past_a_threshold() -> None:
    record = StallRecord([0.003, 0.0045, 0.007])
    assert record.stops == 3 and record.longest_s == 0.007
    assert record.beyond(0.004) == pytest.approx(0.0035)
    assert StallRecord().longest_s == 0.0 and StallRecord().beyond(0.004) == 0.0


def test_the_helper_continues_the_target_when_its_parent_is_killed(target) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import os, sys, time
        from quicbed.host.stalls import Stalls
        with Stalls({target.pid}, stop_s=0.4, period_s=0.5) as stalls:
            print(stalls._helper.pid, flush=True)
            time.sleep(30)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert parent.stdout is not None
    helper = int(parent.stdout.readline())
    assert _becomes(target.pid, "T", within=0.3)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while (_state(helper) not in ("", "Z") or _state(target.pid) != "S") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(helper) in ("", "Z")  # (a zombie until init reaps it)
    assert _state(target.pid) == "S"


def test_a_target_that_ends_ends_the_helper_with_its_stops_counted() -> None:
    short = subprocess.Popen(["sleep", "0.3"])
    with Stalls(short.pid, stop_s=0.01, period_s=0.05) as stalls:
        short.wait(timeout=5)
        time.sleep(0.1)  # the helper finds it gone
    assert stalls.record.stops >= 2


@pytest.mark.parametrize("stop_s, period_s", [(0.0, 0.01), (0.01, 0.01), (-1.0, 1.0)])
def test_a_stop_must_be_positive_and_shorter_than_its_period(stop_s: float, period_s: float) -> None:
    with pytest.raises(ValueError, match="the stop must be positive and shorter than the period"):
        Stalls(os.getpid(), stop_s, period_s)


def test_an_error_in_the_block_ends_the_helper_and_stays_the_error(target) -> None:
    with pytest.raises(KeyboardInterrupt):
        with Stalls(target.pid, stop_s=0.05, period_s=0.1):
            raise KeyboardInterrupt
    assert _becomes(target.pid, "S", within=1)
