"""Where quicbed's own files are: the source tree this package was imported from."""

from __future__ import annotations

from pathlib import Path

#: the checkout (or installed tree) holding quicbed/, topologies/, experiments/ and labs/
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
