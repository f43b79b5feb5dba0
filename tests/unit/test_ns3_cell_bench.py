"""bench/ns3_cell.cc, the simulated-time cell bench/ns3_versions.py builds against each ns-3
release, built here against the distribution's ns-3 (as the bench does) and checked against
the analytical model (quicbed/backends/ns3/airtime.py): a saturated UDP download to one
802.11n MCS 7 station carries what the model says, and ten stations share the same air. Its
figures are deterministic (simulated time, a fixed run number)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from quicbed.backends.ns3 import airtime, build

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
pytestmark = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")


def _bench():
    spec = importlib.util.spec_from_file_location("ns3_versions", ROOT / "bench" / "ns3_versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bench().build("distribution", tmp_path_factory.mktemp("ns3-cell"), None, "3")


def _simulate(binary: Path, stations: int) -> dict:
    done = subprocess.run(
        [str(binary), f"--stations={stations}", "--phy=n20", "--run=1", "--seconds=1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_bench_cell_carries_what_the_analytical_model_says(cell: Path) -> None:
    model = airtime.saturated_throughput(1472, airtime.Phy(mcs=7, standard="802.11n", width=20)).goodput / 1e6
    one, ten = _simulate(cell, 1), _simulate(cell, 10)
    # one sender, mean backoff, no collisions: the model's assumptions hold for one station
    assert one["goodput_mbps"] == pytest.approx(model, rel=0.01), (one, model)
    # ten downloads from one AP: still one sender on the air, the same goodput in all
    assert ten["goodput_mbps"] == pytest.approx(one["goodput_mbps"], rel=0.01), ten
    # every radio hears every PPDU: the simulator's work grows with the stations, the air's does not
    assert ten["ppdus"] == pytest.approx(one["ppdus"], rel=0.05) and ten["events"] > 3 * one["events"], (one, ten)
    # A-MPDUs (about 27 MPDUs each) and their block ACKs: MPDUs far outnumber PPDUs
    assert one["mpdus"] > 10 * one["ppdus"] > 0, one
