"""Skimming receivers (quicbed/backends/ns3/channel/skim.cc; docs/ns3-backend.md): a radio
judges the MPDUs of a PSDU addressed to another radio at the end of the PPDU instead of one
event per MPDU. The claim is that nothing simulated changes, so it is checked exactly: the
same simulated cell (channel_models/skim_cell.cc: no real time, fixed seeds, traffic both
ways, far stations that fail to decode, with or without a frame error model on every
station) with skimming off and on must give the same digest of every PHY state change of
every radio (so of every reception, CCA, backoff, AIFS or EIFS, transmission) and of every
frame delivered up. Without the error model a skimming radio judges another radio's MPDUs
only until one is received (the rest only draw their random number): the same digest shows
that the MAC's view and every random stream are unchanged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from channel_driver import compile_driver
from quicbed.backends.ns3 import build

NS3_MISSING = build.missing()
pytestmark = pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}")


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver(
        tmp_path_factory.mktemp("skim-cell") / "skim_cell",
        "skim_cell.cc",
        ["skim.cc", "loss.cc"],
        ["wifi", "mobility", "propagation", "spectrum", "antenna", "energy", "network", "core"],
    )


def simulate(binary: Path, skim: bool, standard: str, manager: str, stations: int, frame_errors: bool) -> dict:
    result = subprocess.run(
        [str(binary), "1" if skim else "0", standard, manager, str(stations), "3", "1" if frame_errors else "0"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "standard, manager, stations, frame_errors",
    [
        ("802.11ac", "constant", 8, True),
        ("802.11ac", "minstrel", 8, True),
        ("802.11n", "constant", 12, True),
        ("802.11n", "minstrel", 12, True),
        ("802.11ac", "minstrel", 8, False),
        ("802.11n", "constant", 12, False),
    ],
)
def test_skimming_changes_nothing_simulated(
    cell: Path, standard: str, manager: str, stations: int, frame_errors: bool
) -> None:
    stock, skimming = (simulate(cell, skim, standard, manager, stations, frame_errors) for skim in (False, True))
    assert stock["psdus_skimmed"] == stock["psdus_received"] == 0  # ns-3's own PHY entities
    # most PSDUs a radio hears are for another radio: those were skimmed
    assert skimming["psdus_skimmed"] > 3 * skimming["psdus_received"] > 0, skimming
    assert stock["delivered"] > 1000 and stock["state_changes"] > 100_000, stock
    if frame_errors:  # every MPDU judged: the error model draws for those the error rate let through
        assert skimming["mpdus_drawn_only"] == 0 < skimming["mpdus_judged"], skimming
    else:  # most MPDUs after the first received one only draw
        assert skimming["mpdus_drawn_only"] > skimming["mpdus_judged"] > 0, skimming
    assert (skimming["digest"], skimming["state_changes"], skimming["delivered"]) == (
        stock["digest"],
        stock["state_changes"],
        stock["delivered"],
    )
