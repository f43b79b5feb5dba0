"""Command-line replacements of an experiment file's fields (``--set``), and what they imply:
a file's ``topology.params`` belong to its own script, so a script swapped in keeps its own
defaults (README's "your own network": ``--set topology.script=mine.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from quicbed.errors import SpecError
from quicbed.spec.node import Host, Station
from quicbed.spec.topology import Topology


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``data`` with fields replaced: top-level names or dotted paths (``workload.object``,
    ``topology.params.rate``, ``matrix.link.bottleneck.loss``: a matrix axis is one key)."""
    result = dict(data)
    for dotted, value in overrides.items():
        top, _, rest = dotted.partition(".")
        if not rest:
            result[top] = value
            continue
        parts = [rest] if top == "matrix" else rest.split(".")
        node = result[top] = _inner_mapping(result, top, dotted)
        for depth, part in enumerate(parts[:-1], 2):
            node[part] = _inner_mapping(node, part, dotted, ".".join(dotted.split(".")[:depth]))
            node = node[part]
        node[parts[-1]] = value
    return result


def _inner_mapping(parent: dict[str, Any], key: str, dotted: str, path: str = "") -> dict[str, Any]:
    """A copy of the mapping at ``parent[key]`` (empty if unset), to set ``dotted`` inside it."""
    inner = parent.get(key)
    if inner is not None and not isinstance(inner, dict):
        raise SpecError(
            f"cannot set {dotted!r}: {path or key} holds {inner!r}, not a mapping",
            field=dotted,
            fix=f"set {path or key} itself, e.g. --set {path or key}=VALUE",
        )
    return dict(inner or {})


def params_dropped_with_the_script(
    data: dict[str, Any], original: Any, overrides: dict[str, Any], resolve: Callable[[str], Path]
) -> str | None:
    """When ``overrides`` replaced the file's topology script (``resolve`` finds a script's
    file) but gave no params, the file's ``topology.params`` (written for its own script) are
    dropped from ``data``: an edited copy keeps its own defaults. Returns the note that says
    so, or None."""
    given = original.get("topology") if isinstance(original, dict) else None
    if not isinstance(given, dict) or not given.get("params"):
        return None
    script = data.get("topology", {}).get("script") if isinstance(data.get("topology"), dict) else None
    if script is None or any(key == "topology" or key.startswith("topology.params") for key in overrides):
        return None
    if resolve(str(script)).resolve() == resolve(str(given.get("script"))).resolve():
        return None
    dropped = ", ".join(f"{name}={value}" for name, value in given["params"].items())
    data["topology"] = {**data["topology"], "params": {}}
    return (
        f"topology.params of the file ({dropped}) are for {given.get('script')}, not applied to {script}: "
        "its own defaults hold (give values with -p NAME=VALUE)"
    )


def default_client(topo: Topology) -> str | None:
    """The measured client of a topology without a node named 'client': its first station,
    else its first host other than 'server'."""
    for kind in (Station, Host):
        for name, node in topo.nodes.items():
            if type(node) is kind and name != "server":
                return name
    return None
