"""quicbed.host.prctl on this kernel: a subreaper adopts its orphans; a child asked to die
with its parent does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_subreaper_adopts_the_orphans_of_its_children() -> None:
    script = textwrap.dedent("""
        import os, sys, time
        from quicbed.host.prctl import become_subreaper
        assert become_subreaper()
        if os.fork() == 0:           # the child forks a grandchild and leaves it an orphan
            if os.fork() == 0:
                time.sleep(0.5)
                print(os.getppid(), flush=True)
                os._exit(0)
            os._exit(0)
        os.wait()
        time.sleep(1)
        print(os.getpid(), flush=True)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    ).stdout.split()
    grandchild_parent, subreaper = out
    assert grandchild_parent == subreaper


def test_a_child_dies_with_its_parent() -> None:
    script = textwrap.dedent("""
        import subprocess, sys, time
        from quicbed.host.prctl import die_with_parent
        child = subprocess.Popen(["sleep", "60"], preexec_fn=die_with_parent)
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT}
    )
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its parent"
    finally:
        parent.kill()
