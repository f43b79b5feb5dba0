"""Run a user's Python file (a topology script, a lab's checks) as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def module_from_file(path: Path, module_name: str, *, register: bool = False) -> ModuleType | None:
    """The module ``path`` defines, or None if Python cannot load it as source. The file's own
    exceptions propagate. No bytecode cache is written beside it: reading a user's file leaves
    their folder as it was. ``register`` puts the module in sys.modules first (dataclasses and
    pickling look modules up there)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[module_name] = module
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module
