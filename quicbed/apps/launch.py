"""Running quicbed's own Python apps inside a node (``python -m quicbed.apps...``).

``ip netns exec`` keeps the caller's environment, but quicbed need not be installed: the
command puts the checkout that this module was imported from on PYTHONPATH and uses the
same interpreter. :class:`Started` is what a run holds of each piece it started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from quicbed.paths import PACKAGE_ROOT


def module_argv(module: str, arguments: Sequence[str] = (), python: str | None = None) -> list[str]:
    """argv that runs ``python -m module arguments...`` with this quicbed importable."""
    path = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    return ["env", f"PYTHONPATH={path}", python or sys.executable, "-m", module, *arguments]


class Started:
    """A started piece of a run as a context manager: stop it, then keep what it wrote."""

    def __init__(self, stop: Callable[[], object], after: Callable[[], object] = lambda: None) -> None:
        self.stop = stop
        self.after = after

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.after()
