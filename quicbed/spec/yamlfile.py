"""YAML loading that remembers where each value was written, for errors with line numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from quicbed.errors import SpecError


class LocatedData:
    """Plain data from a YAML file plus a map from dotted field paths to line numbers."""

    def __init__(self, path: Path, data: Any, lines: dict[str, int]) -> None:
        self.path = path
        self.data = data
        self.lines = lines

    def where(self, field: str) -> str:
        """'file:line' of ``field`` (or of its closest written parent)."""
        probe = field
        while probe:
            if probe in self.lines:
                return f"{self.path}:{self.lines[probe]}"
            probe = probe.rpartition(".")[0]
        return str(self.path)

    def error(self, message: str, field: str, fix: str = "") -> SpecError:
        return SpecError(message, field=field, fix=fix, source=self.where(field))


def _walk(node: yaml.Node, prefix: str, lines: dict[str, int]) -> None:
    lines.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{prefix}.{key.value}" if prefix else str(key.value)
            lines[name] = key.start_mark.line + 1
            _walk(value, name, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, f"{prefix}[{index}]", lines)


def load_yaml(path: Path) -> LocatedData:
    if path.is_dir():
        raise SpecError("is a folder, not a YAML file", source=str(path), fix="give the path of the file in it")
    if not path.is_file():
        raise SpecError("file not found", source=str(path), fix="check the path")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(
            f"not UTF-8 text (byte {error.start}: {error.object[error.start : error.start + 1]!r})",
            source=str(path),
            fix="save the file as UTF-8",
        ) from None
    except OSError as error:
        raise SpecError(f"cannot read the file: {error.strerror}", source=str(path)) from None
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError(f"not valid YAML: {error.problem}", source=where) from None
    except yaml.YAMLError as error:  # e.g. a character YAML does not allow: no line to name
        raise SpecError(f"not valid YAML: {error}", source=str(path)) from None
    lines: dict[str, int] = {}
    if node is not None:
        _walk(node, "", lines)
    return LocatedData(path, data, lines)
