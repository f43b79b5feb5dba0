"""Placing processes on cores: what a run starts keeps to the endpoint cores, and a running
process (the ns-3 channel) is moved with all its threads, or all but its simulator thread
(isolate_channel)."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from quicbed.backends.base import _preexec_for
from quicbed.host.affinity import set_process_affinity

CORES = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to move processes between them")
PRINT_AFFINITY = "import os; print(sorted(os.sched_getaffinity(0)))"


def test_started_processes_keep_to_the_endpoint_cores():
    network = types.SimpleNamespace(accounting=None, cpu_role=None, endpoint_cores={CORES[0]})
    output = subprocess.run(
        [sys.executable, "-c", PRINT_AFFINITY],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=_preexec_for(network),
    ).stdout  # type: ignore[arg-type]
    assert output.strip() == str([CORES[0]])
    network.endpoint_cores = None
    output = subprocess.run(
        [sys.executable, "-c", PRINT_AFFINITY],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=_preexec_for(network),
    ).stdout  # type: ignore[arg-type]
    assert output.strip() == str(CORES)


def test_a_running_process_moves_with_every_thread():
    script = (
        "import threading, time, sys\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print('ready', flush=True); time.sleep(30)\n"
    )
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


def test_the_simulator_thread_alone_keeps_its_core():
    """isolate_channel: simulator: the main thread (ns-3's simulator) on the last core, every
    other thread (the TAP readers and writer) on the endpoints' cores."""
    from quicbed.runner.transfer import isolated_channel

    script = (
        "import threading, time, sys\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print('ready', flush=True); time.sleep(30)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    network = types.SimpleNamespace(endpoint_cores=None, service_processes=lambda: {"channel": process.pid})
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        with isolated_channel(network, "simulator") as isolation:  # type: ignore[arg-type]
            others = [int(tid) for tid in os.listdir(f"/proc/{process.pid}/task") if int(tid) != process.pid]
            assert isolation == {
                "applied": True,
                "threads": "simulator",
                "channel_cores": CORES[-1:],
                "endpoint_cores": CORES[:-1],
            }
            assert os.sched_getaffinity(process.pid) == {CORES[-1]}
            assert others and all(os.sched_getaffinity(tid) == set(CORES[:-1]) for tid in others)
            assert network.endpoint_cores == set(CORES[:-1])
        assert all(os.sched_getaffinity(int(tid)) == set(CORES) for tid in os.listdir(f"/proc/{process.pid}/task"))
        assert network.endpoint_cores is None
    finally:
        process.kill()
        process.wait()
