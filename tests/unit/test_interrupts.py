"""A Ctrl-C whose KeyboardInterrupt Python swallowed is raised again at the next check."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# SIGINT while a child is forked: the handler runs inside an at-fork hook (logging has one),
# where Python prints the exception and goes on
SWALLOWED = """
import os, signal, sys, time
from quicbed.host.signals import install_termination_handlers, raise_if_interrupted
install_termination_handlers()
raise_if_interrupted()  # nothing received yet

def hook():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)

os.register_at_fork(after_in_parent=hook)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("went on", flush=True)
try:
    raise_if_interrupted()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_a_ctrl_c_lost_in_an_at_fork_hook_is_raised_again() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SWALLOWED], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert "Exception ignored" in done.stderr and "KeyboardInterrupt" in done.stderr  # the loss itself
    assert done.stdout.split() == ["went", "on", "interrupted"] and done.returncode == 130


def test_sigterm_is_raised_again_as_its_exit_status() -> None:
    script = (
        SWALLOWED.replace("signal.SIGINT", "signal.SIGTERM")
        .replace("except KeyboardInterrupt:", "except SystemExit as exit:")
        .replace("sys.exit(130)", "sys.exit(exit.code)")
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert done.returncode == 128 + signal.SIGTERM and done.stdout.split()[-1] == "interrupted"
