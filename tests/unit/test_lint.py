"""The tree passes ruff's checks, is as ruff's formatter writes it, and passes mypy's checks,
all with their settings in pyproject.toml (ruff: pyflakes, import and statement errors,
bugbear's likely bugs; mypy: the package's types, unused `type: ignore` comments reported).
The test extra installs both. To format a file: ruff format FILE."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: pip install {name} (the test extra: scripts/install.sh --test)")
    return found


def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted() -> None:
    result = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, "run ruff format on these:\n" + result.stdout + result.stderr


def test_mypy_finds_nothing(tmp_path: Path) -> None:
    # its cache in a folder of the test's own: a cache left by another mypy version is not read
    result = subprocess.run(
        [_tool("mypy"), "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
