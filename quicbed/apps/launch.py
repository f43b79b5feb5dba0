"""Running quicbed's own Python apps inside a node (``python -m quicbed.apps...``).

``ip netns exec`` keeps the caller's environment, but quicbed need not be installed: the
command puts the checkout that this module was imported from on PYTHONPATH and uses the
same interpreter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from quicbed.paths import PACKAGE_ROOT



def module_argv(module: str, arguments: Sequence[str] = (), python: str | None = None) -> list[str]:
    """argv that runs ``python -m module arguments...`` with this quicbed importable."""
    path = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    return ["env", f"PYTHONPATH={path}", python or sys.executable, "-m", module, *arguments]
