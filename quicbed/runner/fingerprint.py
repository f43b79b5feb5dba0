"""What decides a result besides the experiment file: the code and its tree state, the tools,
the native QUIC binary, the topology script, the delivery traces it replays and the kernel. Recorded per session in metadata.json (``fingerprint``); a resume or a merge that
would mix two of them is refused unless forced, naming what differs."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from pathlib import Path
from typing import Any

from quicbed.apps.quic.implementations import native_binary
from quicbed.paths import PACKAGE_ROOT
from quicbed.runner.metadata import git_commit, tool_versions
from quicbed.spec.experiment import Experiment, topology_for


def file_digest(path: Path | None) -> str | None:
    """The first 16 hex digits of the file's SHA-256 (None for no file)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def code_state() -> str:
    """The commit, with a digest of the uncommitted changes to tracked files when there are any
    (two different dirty trees on one commit differ); quicbed's version without git."""
    git = git_commit()
    if not git or not git.get("commit"):
        return f"quicbed {tool_versions()['quicbed']} (no git)"
    if not git.get("dirty"):
        return str(git["commit"])
    diff = subprocess.run(["git", "-C", str(PACKAGE_ROOT), "diff", "HEAD"], capture_output=True, check=False).stdout
    return f"{git['commit']}+changes:{hashlib.sha256(diff).hexdigest()[:16]}"


def trace_digests(experiment: Experiment, overrides: dict[str, Any]) -> dict[str, str]:
    """The delivery traces the experiment's topologies replay (every distinct combination of
    its topology axes), by file name: the digest of each file."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    for cell in experiment.cells():
        relevant = {axis: value for axis, value in cell.items() if axis.startswith(("params.", "link."))}
        key = repr(sorted(relevant.items()))
        if key in seen:
            continue
        seen.add(key)
        for link in topology_for(experiment, relevant, overrides).links:
            for direction in ("forward", "backward"):
                trace = getattr(getattr(link, direction, None), "trace", None)
                if trace is not None:
                    found[trace.name] = trace.digest
    return found


def fingerprint(experiment: Experiment, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "code": code_state(),
        **tool_versions(),
        "quinn": file_digest(native_binary()),
        "topology": file_digest(experiment.topology_script),
        "traces": trace_digests(experiment, overrides or {}),
        "kernel": platform.release(),
    }


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed from ``before`` to ``now``, one phrase per component."""
    changed = []
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            changed.append(f"{key} {before.get(key)} -> {now.get(key)}")
    return changed
