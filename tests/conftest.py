"""Test configuration shared by all tests: loads the quicbed pytest plugin (tests/vm_plugin.py).

The plugin registers the markers ``needs_kernel(*features)``, ``needs_root`` and ``slow``
and runs kernel-feature tests in the microVM when this kernel lacks the feature; see
tests/vm_plugin.py and docs/microvm.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
_ROOT = _TESTS.parent
# 'pytest' (unlike 'python -m pytest') does not put the checkout on sys.path; quicbed
# need not be installed to be tested.
for _path in (str(_TESTS), str(_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

pytest_plugins = ["vm_plugin"]


def pytest_configure(config):
    """Import test modules by path unless told otherwise (--import-mode).

    tests/unit/test_vm.py and tests/integration/test_vm.py share a basename; pytest's
    default "prepend" mode cannot import both from folders without __init__.py.
    """
    import os

    given = [*config.invocation_params.args, *config.getini("addopts"),
             *os.environ.get("PYTEST_ADDOPTS", "").split()]
    if not any(str(arg).startswith("--import-mode") for arg in given):
        config.option.importmode = "importlib"
