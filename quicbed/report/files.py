"""Atomic file writing: a crash or Ctrl-C never leaves a half-written report file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from quicbed.atomic import write_text_atomic

__all__ = ["move_into", "remove_tree", "write_text_atomic"]


def move_into(files: list[Path], folder: Path) -> list[Path]:
    """Rename each of ``files`` (written elsewhere on the same file system) into ``folder``;
    each rename replaces its target atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    moved = []
    for source in files:
        target = folder / source.name
        os.replace(source, target)
        moved.append(target)
    return moved


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
