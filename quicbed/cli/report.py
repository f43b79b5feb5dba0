"""quicbed report: summarise a results folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from quicbed.errors import QuicbedError

#: run.json fields shown for a path check, with their labels
PATH_CHECK_FIELDS = (("ping.rtt_avg_ms", "RTT avg (ms)"), ("ping.rtt_mdev_ms", "RTT mdev (ms)"),
                     ("tcp_upload_mbit_s", "TCP up (Mbit/s)"), ("tcp_download_mbit_s", "TCP down (Mbit/s)"))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="summarise a results folder",
        description="Print the summary of a results folder written by 'quicbed run'.")
    parser.add_argument("results", type=Path, help="results folder, e.g. results/quickstart-20260101-120000")
    parser.set_defaults(handler=handle)


def _get(record: dict, dotted: str) -> object:
    value: object = record
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def handle(args: argparse.Namespace) -> int:
    folder: Path = args.results
    records = sorted(folder.glob("run.json")) + sorted(folder.glob("runs/*/run.json"))
    if not records:
        raise QuicbedError(f"no run.json in {folder} (fix: give a folder written by 'quicbed run')")
    table = Table("run", *(label for _, label in PATH_CHECK_FIELDS), title=str(folder))
    for path in records:
        record = json.loads(path.read_text())
        cells = []
        for dotted, _ in PATH_CHECK_FIELDS:
            value = _get(record, dotted)
            cells.append(f"{value:.2f}" if isinstance(value, (int, float)) else "-")
        table.add_row(path.parent.name, *cells)
    Console().print(table)
    return 0
