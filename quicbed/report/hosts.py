"""The machines a results folder's runs ran on, one line each with what they could carry.

A folder from one ``quicbed run`` has one host; a folder ``quicbed merge`` joined has one
per shard (metadata ``shards``). Each line gives the host's size, kernel and code, and its
calibration: the QUIC endpoints' ceilings from bench/endpoints.py and the rate up to which
its link emulation stayed accurate in bench/links.py, so that heterogeneous hosts show.
"""

from __future__ import annotations

from typing import Any

from quicbed.report.tables import DASH, Table

HEADER = [
    "host",
    "shard",
    "runs",
    "CPUs",
    "kernel",
    "code",
    "QUIC ceilings (bench/endpoints.py)",
    "link rates accurate up to (bench/links.py)",
]


def _endpoints(calibration: dict[str, Any]) -> str:
    measured = calibration.get("endpoints") or {}
    parts = [
        f"{name} {float(entry['mbit_per_s']):.0f} Mbit/s ({entry.get('measured', '?')})"
        for name, entry in sorted(measured.items())
        if isinstance(entry, dict) and "mbit_per_s" in entry
    ]
    return ", ".join(parts) or "not measured"


def _links(calibration: dict[str, Any]) -> str:
    links = calibration.get("links") or {}
    if not links:
        return "not measured"
    limit = links.get("accurate_up_to_mbit")
    tolerance = float(links.get("tolerance", 0.02)) * 100
    text = f"{limit:g} Mbit/s (±{tolerance:g} %)" if limit is not None else f"none within ±{tolerance:g} %"
    return f"{text} ({links.get('measured', '?')})"


def _line(entry: dict[str, Any], runs: Any) -> list[str]:
    host = entry.get("host") or {}
    shard = entry.get("shard")
    git = entry.get("git") or {}
    code = str(git.get("commit") or "")[:12] or (entry.get("versions") or {}).get("quicbed") or DASH
    calibration = entry.get("calibration") or {}
    return [
        str(host.get("hostname") or DASH),
        f"{shard['index']}/{shard['count']}" if shard else "all",
        str(runs),
        str(host.get("cpus") or DASH),
        str(host.get("kernel") or DASH),
        code + (" (uncommitted changes)" if git.get("dirty") else ""),
        _endpoints(calibration),
        _links(calibration),
    ]


def hosts_table(metadata: dict[str, Any], recorded_runs: int) -> Table | None:
    """One line per host (per shard of a merged folder); None when the metadata says nothing."""
    shards = metadata.get("shards")
    if isinstance(shards, list) and shards:
        return Table(HEADER, [_line(entry, entry.get("runs", DASH)) for entry in shards])
    if not metadata.get("host"):
        return None
    return Table(HEADER, [_line(metadata, recorded_runs)])
