"""What the bench scripts measured on this machine, kept for doctor and for results folders.

``bench/endpoints.py`` leaves each QUIC implementation's ceiling in ``endpoints.json`` and
``bench/links.py`` the rate-limit accuracy of this kernel in ``links.json``, both under
``$QUICBED_STATE_DIR/bench`` (default /var/lib/quicbed/bench). Every results folder's
metadata carries them (``calibration``), so a report over runs from several machines shows
what each machine could carry.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from quicbed.atomic import write_text_atomic


def bench_dir() -> Path:
    return Path(os.environ.get("QUICBED_STATE_DIR", "/var/lib/quicbed")) / "bench"


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write a JSON object whole and atomically (a reader never sees half of it)."""
    return write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save(name: str, data: dict[str, Any]) -> Path:
    return write_json(bench_dir() / f"{name}.json", data)


def load(name: str) -> dict[str, Any] | None:
    return read_json(bench_dir() / f"{name}.json")


def calibration() -> dict[str, Any]:
    """This machine's measured ceilings: ``{"endpoints": ..., "links": ...}`` (None where the
    bench script has not run here)."""
    return {"endpoints": load("endpoints"), "links": load("links")}
