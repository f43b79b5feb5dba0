"""Where quicbed's own files are.

From a checkout, the shipped topologies, experiments, labs and traces are the checkout's
top-level folders; an installed package (``pip install .``, a wheel) carries copies of them
in ``quicbed/shipped/`` (setup.py puts them there).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: the folder holding quicbed/: the checkout, or site-packages (what subprocesses need on PYTHONPATH)
PACKAGE_ROOT = PACKAGE_DIR.parent
#: the folders quicbed ships besides its code
SHIPPED_FOLDERS = ("topologies", "experiments", "labs", "traces")
#: where they are: the checkout's top level when it has them, else the installed copies
SHIPPED_ROOT = (
    PACKAGE_ROOT if all((PACKAGE_ROOT / name).is_dir() for name in SHIPPED_FOLDERS) else PACKAGE_DIR / "shipped"
)


def shipped(relative: Path | str) -> Path | None:
    """``relative`` (``experiments/e1.yaml``, ``topologies/wifi_ap.py``) among quicbed's own
    files, or None when it is not one."""
    candidate = SHIPPED_ROOT / relative
    return candidate if candidate.exists() else None
