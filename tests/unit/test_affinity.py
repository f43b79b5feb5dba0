"""Placing processes on cores: what a run starts keeps to the endpoint cores, and a running
process (the ns-3 channel) is moved with all its threads (isolate_channel)."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from quicbed.backends.base import _preexec_for
from quicbed.host.cpu import set_process_affinity

CORES = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to move processes between them")
PRINT_AFFINITY = "import os; print(sorted(os.sched_getaffinity(0)))"


def test_started_processes_keep_to_the_endpoint_cores():
    network = types.SimpleNamespace(accounting=None, cpu_role=None, endpoint_cores={CORES[0]})
    output = subprocess.run([sys.executable, "-c", PRINT_AFFINITY], capture_output=True, text=True, check=True,
                            preexec_fn=_preexec_for(network)).stdout  # type: ignore[arg-type]
    assert output.strip() == str([CORES[0]])
    network.endpoint_cores = None
    output = subprocess.run([sys.executable, "-c", PRINT_AFFINITY], capture_output=True, text=True, check=True,
                            preexec_fn=_preexec_for(network)).stdout  # type: ignore[arg-type]
    assert output.strip() == str(CORES)


def test_a_running_process_moves_with_every_thread():
    script = ("import threading, time, sys\n"
              "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
              "print('ready', flush=True); time.sleep(30)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        set_process_affinity(process.pid, {CORES[-1]})
        threads = os.listdir(f"/proc/{process.pid}/task")
        assert len(threads) == 2
        assert all(os.sched_getaffinity(int(tid)) == {CORES[-1]} for tid in threads)
    finally:
        process.kill()
        process.wait()
