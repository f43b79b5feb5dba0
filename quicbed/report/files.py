"""Atomic file writing: a crash or Ctrl-C never leaves a half-written report file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path`` and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


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
