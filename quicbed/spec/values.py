"""Values written in a spec file, checked: one of a set of names (with the closest as a
suggestion), a mapping, or a count. Errors name the file, line and field (``LocatedData.error``)."""

from __future__ import annotations

import difflib
from typing import Any

from quicbed.spec.yamlfile import LocatedData


def among(value: Any, names: Any) -> bool:
    """Whether ``value`` is one of the names (a list or mapping written in a file is none)."""
    return isinstance(value, (str, int, float)) and value in names


def suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(str(word), [str(choice) for choice in choices], n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def expect_mapping(doc: LocatedData, value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(f"expected a mapping, got {type(value).__name__}", field)
    return value


def choice(doc: LocatedData, value: Any, field: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise doc.error(
            f"{value!r} is not allowed", field, fix=f"{suggest(str(value), choices)}use one of {', '.join(choices)}"
        )
    return value


def count(doc: LocatedData, value: Any, field: str, minimum: int) -> int:
    """A whole number of at least ``minimum`` (true and false are none)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise doc.error(f"expected a whole number >= {minimum}, got {value!r}", field)
    return value
