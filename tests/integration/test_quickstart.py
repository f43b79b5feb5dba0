"""The README's main job: experiments/quickstart.yaml runs end to end and its results land here,
in the microVM when this kernel lacks netem (the quickstart link has a delay)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from quicbed.host.capabilities import has_netem

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.needs_root


def test_quickstart_runs_and_results_land_on_this_host():
    from quicbed.host import vm

    if not has_netem():
        available, reason = vm.vm_available(allow_fetch=False)
        if not available:
            pytest.skip(f"this kernel has no netem and the microVM is unavailable: {reason}")
    out = ROOT / "results" / f".test-quickstart-{uuid.uuid4().hex[:8]}"  # the microVM shares results/
    try:
        result = subprocess.run([sys.executable, "-m", "quicbed", "run", "experiments/quickstart.yaml", "--out", str(out)],
                                cwd=ROOT, capture_output=True, text=True, timeout=1200,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert f"results: {out}" in result.stdout
        record = json.loads((out / "run.json").read_text())
        assert record["in_microvm"] is (not has_netem())
        # 10 ms each way on the bottleneck: the RTT cannot be below 20 ms
        assert record["ping"]["rtt_min_ms"] >= 20.0
        assert 5 < record["tcp_download_mbit_s"] <= 20.5
        assert (out / "iperf3-download.json").exists() and (out / "ping.txt").exists()
        assert "netem" in json.dumps(record["qdiscs"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
