"""experiments/wifi-bquic.yaml (E1) through the runner on the ns-3 cell, one small repetition:
aggregation and ACK ratio per profile land in results.jsonl and the report."""

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


def test_wifi_bquic_reports_aggregation_and_ack_ratio_per_profile(tmp_path: Path) -> None:
    out = tmp_path / "wifi-bquic"
    result = subprocess.run([sys.executable, "-m", "quicbed", "run", "experiments/wifi-bquic.yaml",
                             "--repetitions", "1", "--warmup", "0", "--set", "workload.object=3MB",
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = {json.loads(line)["cell"]["transport"]: json.loads(line)
             for line in (out / "results.jsonl").read_text().splitlines()}
    assert set(lines) == {"quic", "bquic", "tcp"}
    for line in lines.values():
        assert line["status"] in ("ok", "invalid"), line["error"]
        assert line["client"] == "sta1" and line["metrics"]["ampdu_mean"] >= 1
        assert (out / line["folder"] / "mac-stats.json").exists()
    metrics = {name: line["metrics"] for name, line in lines.items()}
    # the E1 effect: bursts fill A-MPDUs, paced QUIC's packets go out nearly one by one
    assert metrics["tcp"]["ampdu_mean"] > metrics["bquic"]["ampdu_mean"] > metrics["quic"]["ampdu_mean"]
    assert metrics["bquic"]["ack_ratio"] < metrics["quic"]["ack_ratio"]
    summary = (out / "summary.md").read_text()
    assert "MPDUs per A-MPDU" in summary and "ACK ratio" in summary and "goodput" in summary
