"""The native QUIC endpoint's own unit tests (native/quinn, `cargo test`): its congestion
controllers on a simulated clock (quicbed's BBR on the E3 step-drop link, NewReno and CUBIC's
reductions, the slow-start exit rule), the knobs and the resumption modes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

NATIVE = Path(__file__).resolve().parents[2] / "native" / "quinn"
CARGO = shutil.which("cargo")


@pytest.mark.skipif(CARGO is None, reason="needs cargo (./scripts/install.sh installs it to build native/quinn)")
def test_the_native_endpoints_unit_tests_pass() -> None:
    prepared = subprocess.run(["./prepare.sh"], cwd=NATIVE, capture_output=True, text=True, timeout=600)
    assert prepared.returncode == 0, prepared.stderr
    completed = subprocess.run(
        [str(CARGO), "test", "--release", "--locked", "--quiet"],
        cwd=NATIVE,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "test result: ok" in completed.stdout and " 0 passed" not in completed.stdout, completed.stdout
