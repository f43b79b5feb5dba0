"""Every lab's reference solution passes its checker, and every wrong solution in tests/labs
fails with the message it is meant to, through ``quicbed lab check --json`` on this
machine's backends. The Mininet-WiFi labs run in the microVM when this kernel has no
mac80211_hwsim (with the other kernel-feature tests, in one boot). A check this machine
cannot run (no Mininet-WiFi, no ns-3) makes the test skip with the checker's own reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from quicbed.labs.catalogue import all_labs

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "labs"
LABS = sorted(lab.name for lab in all_labs() if lab.folder.parent == ROOT / "labs")
#: labs whose reference solution takes minutes to check (each of its runs builds its network
#: again, and the channel's invalid runs are made again): run with --run-slow
SLOW_SOLUTIONS = {"handover"}
#: labs built on the real 802.11 stack (Mininet-WiFi)
STACK_LABS = {lab.name for lab in all_labs() if lab.backend == "mininet-wifi"}
pytestmark = [pytest.mark.needs_root]


def _marks(lab: str) -> list[pytest.MarkDecorator]:
    marks = [pytest.mark.slow] if lab in SLOW_SOLUTIONS else []
    if lab in STACK_LABS:
        marks.append(pytest.mark.needs_kernel("mac80211_hwsim", "openvswitch", virtual_time=True))
    return marks


def _check(lab: str, folder: Path) -> tuple[int, dict]:
    result = subprocess.run(
        [sys.executable, "-m", "quicbed", "lab", "check", lab, str(folder), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout)


def _skip_if_unchecked(sheet: dict) -> None:
    """Skip, with the checker's reason, when no check failed but some could not run here."""
    skipped = [check for check in sheet["checks"] if check["status"] == "skip"]
    if skipped and not sheet["fail"]:
        pytest.skip(f"{sheet['lab']}: {skipped[0]['seen']}")


def _start(lab: str, folder: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "quicbed", "lab", "start", lab, str(folder), "--solution"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("lab", [pytest.param(lab, marks=_marks(lab)) for lab in LABS])
def test_the_reference_solution_passes(lab: str, tmp_path: Path) -> None:
    folder = tmp_path / lab
    _start(lab, folder)
    status, sheet = _check(lab, folder)
    _skip_if_unchecked(sheet)
    failed = {check["name"]: check["seen"] for check in sheet["checks"] if check["status"] != "pass"}
    assert status == 0 and not failed, failed
    assert sheet["score"] == sheet["total"] > 0
    assert json.loads((folder / "check-results" / "score.json").read_text())["score"] == sheet["score"]


WRONG = sorted((case.parent.name, case.name) for case in CASES.glob("*/*") if (case / "expect.yaml").is_file())


def test_every_lab_has_a_wrong_solution() -> None:
    assert sorted({lab for lab, _ in WRONG}) == LABS


@pytest.mark.parametrize(
    "lab, case", [pytest.param(lab, case, marks=_marks(lab), id=f"{lab}/{case}") for lab, case in WRONG]
)
def test_a_wrong_solution_fails_with_the_intended_message(lab: str, case: str, tmp_path: Path) -> None:
    folder = tmp_path / lab
    _start(lab, folder)
    source = CASES / lab / case
    for path in source.iterdir():
        if path.name != "expect.yaml":
            shutil.copy2(path, folder / path.name)
    expect = yaml.safe_load((source / "expect.yaml").read_text())
    status, sheet = _check(lab, folder)
    by_name = {check["name"]: check for check in sheet["checks"]}
    unchecked = [by_name[name]["seen"] for name in expect["fail"] if by_name[name]["status"] == "skip"]
    if unchecked:
        pytest.skip(f"{lab}: {unchecked[0]}")
    assert status == 1
    for name, fragment in expect["fail"].items():
        assert by_name[name]["status"] == "fail", (name, by_name[name])
        assert fragment in by_name[name]["seen"], (name, by_name[name]["seen"])
        assert by_name[name]["hint"], name  # a failed check always says what to try
    for name in expect.get("pass", []):
        assert by_name[name]["status"] == "pass", (name, by_name[name])
