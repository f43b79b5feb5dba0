"""The JSON record every download client writes (HTTP/3 and TCP alike), and how it is emitted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from quicbed import __version__


def base_record(tool: str, *, label: str | None, host: str, port: int, page: str | None, paths: list[str],
                parallel: int, timeout: float) -> dict[str, Any]:
    """The keys shared by all clients' records, before a run fills them in."""
    return {
        "tool": tool,
        "quicbed_version": __version__,
        "label": label,
        "server": {"host": host, "port": port, "address": None},
        "request": {"page": page, "paths": list(paths), "parallel": parallel, "timeout": timeout},
        "started_at": None,  # wall clock, seconds since the epoch
        "handshake_time": None,  # connect -> (TLS/QUIC) handshake complete
        "ttfb": None,  # first request sent -> first response byte
        "completion_time": None,  # first request sent -> last byte (download time / PLT)
        "total_time": None,  # connect -> last byte
        "bytes": 0,  # response body bytes
        "objects_completed": 0,
        "objects": [],  # per object: start, first_byte, end (offsets from started_at), size
        "transport": None,  # the client's transport counters
        "socket": None,
        "qlog": None,
        "ok": False,
        "error": None,
    }


def emit(record: dict[str, Any], output: Path | None) -> int:
    """Write the record to ``output`` (or print it); the client's exit status: 0 if ok, else 1."""
    text = json.dumps(record, indent=1)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    if record["error"]:
        print(f"error: {record['error']}", file=sys.stderr)
    return 0 if record["ok"] else 1
