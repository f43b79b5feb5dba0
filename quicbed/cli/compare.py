"""quicbed compare: results folders, cell by cell, against the first."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from quicbed.cli.console import output_console
from quicbed.errors import QuicbedError
from quicbed.report.compare import COLUMNS, compare_folders, figures, shown

DEFAULT_METRICS = ("goodput", "download_time")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="compare results folders cell by cell (before/after, two machines, two emulators)",
        description="Match the cells of results folders on the axes they share and show, per cell and metric, "
        "each folder's mean with its run count and every folder after the first against the first: "
        "the relative change with its 95 % interval (delta method on the log of the ratio), or the "
        "difference of the means with Welch's interval when the first is too uncertain to divide by. "
        "Failed, invalid and warm-up runs do not count. Unlike 'merge', the folders may come from "
        "different machines, code, backends or experiment files: an axis only some folders vary is "
        "held at one value with --where. metadata.json of each says where it was measured.",
    )
    parser.add_argument("first", type=Path, help="the reference folder")
    parser.add_argument("others", type=Path, nargs="+", metavar="other", help="folders compared with it")
    parser.add_argument(
        "--metrics",
        metavar="A,B",
        default=",".join(DEFAULT_METRICS),
        help=f"metrics to compare (default {','.join(DEFAULT_METRICS)})",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="AXIS=VALUE",
        help="only runs with this value of an axis, in the folders that vary it (repeatable)",
    )
    parser.add_argument("--include-invalid", action="store_true", help="count runs marked invalid too")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the comparison as CSV (base units)")
    parser.add_argument(
        "--figures",
        type=Path,
        metavar="DIR",
        help="also draw, per metric, each cell's mean and interval per folder (PNG, SVG, CSV)",
    )
    parser.set_defaults(handler=handle)


def _where(pairs: list[str]) -> dict[str, str]:
    held = {}
    for pair in pairs:
        axis, sep, value = pair.partition("=")
        if not sep or not axis.strip():
            raise QuicbedError(f"--where {pair!r}: write AXIS=VALUE, e.g. --where link.bottleneck.loss=2")
        held[axis.strip()] = value.strip()
    return held


def handle(args: argparse.Namespace) -> int:
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()]
    comparison = compare_folders([args.first, *args.others], metrics, args.include_invalid, where=_where(args.where))
    console = output_console()
    for other in comparison.folders[1:]:
        rows = comparison.table[comparison.table["folder"] == str(other.path)]
        if rows.empty:
            console.print(f"{other.path} shares no cell with {args.first}", markup=False)
            continue
        table = Table(title=f"{other.path} against {args.first}")
        for column in (*comparison.axes, "metric", "first", "other", "other vs first (95 % CI)"):
            table.add_column(column, overflow="fold")
        for _, row in rows.iterrows():
            table.add_row(*(str(row[axis]) for axis in comparison.axes), str(row["metric"]), *shown(row))
        console.print(table)
    for folder, cells in comparison.unmatched.items():
        if cells:
            console.print(f"only in {folder}: {len(cells)} cell(s), e.g. {cells[0]}", markup=False)
    if args.csv:
        comparison.table[[*comparison.axes, *COLUMNS]].to_csv(args.csv, index=False)
        console.print(f"written: {args.csv}", markup=False)
    if args.figures:
        drawn = figures(comparison, metrics, args.figures)
        console.print(f"figures: {len([p for p in drawn if p.suffix == '.png'])} in {args.figures}", markup=False)
    return 0
