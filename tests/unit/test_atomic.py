"""quicbed.atomic: a file is replaced whole or not at all, with nothing left beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicbed.atomic import replacing, write_text_atomic


def test_a_file_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "result.json"
    assert write_text_atomic(target, "first\n") == target and target.read_text() == "first\n"
    write_text_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "trace.down"
    target.write_text("old\n")
    with pytest.raises(ValueError, match="checked and refused"):
        with replacing(target) as temporary:
            temporary.write_text("half")
            raise ValueError("checked and refused")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["trace.down"]


def test_a_refused_rename_leaves_no_temporary(tmp_path: Path) -> None:
    folder = tmp_path / "is-a-folder"
    folder.mkdir()
    (folder / "inside").write_text("x")
    with pytest.raises(OSError):
        write_text_atomic(folder, "text")  # a non-empty folder cannot be replaced by a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["is-a-folder"]
