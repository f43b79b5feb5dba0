"""How the channel's relays receive what a radio forwards up (quicbed/backends/ns3/channel/
forward_up.cc; docs/ns3-backend.md, "Frames a station acknowledged and dropped"). ns-3's
promiscuous receive callback also makes the MAC promiscuous, and then a frame overheard for
another station can make a station drop its own retransmission as a duplicate after
acknowledging it. The simulated cell of channel_models/forward_up_cell.cc (no real time, fixed
seeds) loses one first copy at sta1 just after the AP sent sta2 a frame with the same sequence
number: every acknowledged frame must be delivered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from channel_driver import compile_driver
from quicbed.backends.ns3 import build

NS3_MISSING = build.missing()
pytestmark = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")
FRAMES = 20


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver(
        tmp_path_factory.mktemp("forward-up") / "forward_up_cell",
        "forward_up_cell.cc",
        ["forward_up.cc"],
        ["wifi", "mobility", "propagation", "spectrum", "antenna", "energy", "network", "core"],
    )


def simulate(binary: Path, how: str) -> dict:
    result = subprocess.run([str(binary), how, str(FRAMES)], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(result.stdout)


def test_every_frame_a_station_acknowledged_is_delivered(cell: Path) -> None:
    counts = simulate(cell, "forward-up")
    assert counts["spoiled"] == 1  # the first copy was lost, so the AP sent it again with the Retry bit
    for station in ("sta1", "sta2"):
        assert counts[station] == {"acked": FRAMES, "delivered": FRAMES}, counts


def test_with_ns3s_promiscuous_callback_alone_the_retransmission_is_dropped(cell: Path) -> None:
    # what the relays did before: the case above then loses a frame its station acknowledged
    counts = simulate(cell, "promiscuous")
    assert counts["spoiled"] == 1
    assert counts["sta1"] == {"acked": FRAMES, "delivered": FRAMES - 1}, counts
    assert counts["sta2"] == {"acked": FRAMES, "delivered": FRAMES}, counts
