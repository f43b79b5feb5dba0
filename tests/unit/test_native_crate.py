"""The native endpoint's own Rust tests (congestion controllers, knob parsing): cargo test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CRATE = Path(__file__).resolve().parents[2] / "native" / "quinn"


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is missing (./scripts/install.sh installs it)")
@pytest.mark.skipif(
    not (CRATE / "patched" / "quinn-proto").is_dir(),
    reason="native/quinn/prepare.sh has not run (./scripts/install.sh runs it)",
)
def test_cargo_test_passes() -> None:
    result = subprocess.run(
        ["cargo", "test", "--release", "--locked", "--quiet"], cwd=CRATE, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "test result: ok" in result.stdout and " 0 passed" not in result.stdout, result.stdout[-2000:]
