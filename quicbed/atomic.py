"""Files replaced whole: a reader, a crash or a Ctrl-C never meets half of one. Every writer
of a file others read (results, reports, traces, ready files, records of ownership) goes
through here, with one temporary name and with the data on disk before the rename."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; leaving the block without an error syncs it
    and renames it over ``path`` (then syncs the folder), leaving with one removes it."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
        sync_folder(path.parent)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def write_text_atomic(path: Path, text: str) -> Path:
    """Replace ``path`` by ``text`` whole (its folder made if needed), or leave it as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return path


def sync_tree(root: Path) -> None:
    """Every file and folder under ``root``, and ``root`` itself, on disk: call it before a
    folder is renamed into place, then :func:`sync_folder` on its new parent."""
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        sync_folder(Path(folder))


def sync_folder(folder: Path) -> None:
    """A rename (or new entries) in ``folder`` on disk too (some file systems refuse to sync a
    folder: then it is left)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
