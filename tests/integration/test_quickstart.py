"""The README's main job: experiments/quickstart.yaml runs end to end (one repetition here)
and writes results and a report with plots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quicbed.backends.ns3 import build

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = [pytest.mark.needs_root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
              pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")]


def test_quickstart_runs_end_to_end_with_its_report(tmp_path: Path) -> None:
    out = tmp_path / "quickstart"
    result = subprocess.run([sys.executable, "-m", "quicbed", "run", "experiments/quickstart.yaml",
                             "--repetitions", "1", "--warmup", "0", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"results: {out}" in result.stdout
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(line["cell"]["transport"] for line in lines) == ["bquic", "quic", "tcp"]
    for line in lines:
        assert line["status"] == "ok", line
        # 20 Mbit/s bottleneck, 10 ms each way: the data cannot arrive faster, nor sooner
        assert 1e6 < line["metrics"]["goodput"] <= 20.5e6
        assert line["metrics"]["owd_mean"] >= 0.010
        assert line["metrics"]["cwnd_mean"] > 0
        assert line["metrics"]["lag_max"] < 0.05  # ns-3 kept (about) real time
    by_transport = {line["cell"]["transport"]: line["metrics"] for line in lines}
    # BQUIC acknowledges fewer packets than QUIC (ACK decimation), the point of the comparison
    assert by_transport["bquic"]["ack_ratio"] < by_transport["quic"]["ack_ratio"]
    for name in ("summary.csv", "summary.md", "index.html"):
        assert (out / name).stat().st_size > 0, name
    assert list((out / "report").glob("*.png")) and list((out / "report").glob("*.svg"))
