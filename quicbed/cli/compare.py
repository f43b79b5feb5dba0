"""quicbed compare: two results folders, cell by cell."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from quicbed.cli.console import output_console
from quicbed.report.compare import compare_folders, shown

DEFAULT_METRICS = ("goodput", "download_time")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare two results folders cell by cell (before/after, two machines, two emulators)",
        description="Match the cells of two results folders (the same matrix axes) and show, per cell and "
                    "metric, each folder's mean with its run count and the second against the first: the "
                    "relative change with its 95 % interval (delta method on the log of the ratio), or the "
                    "difference of the means with Welch's interval when the first is too uncertain to divide "
                    "by. Failed, invalid and warm-up runs do not count. Unlike 'merge', the folders may come "
                    "from different machines, code or backends: metadata.json of each says which.")
    parser.add_argument("first", type=Path, help="the reference folder")
    parser.add_argument("second", type=Path, help="the folder compared with it")
    parser.add_argument("--metrics", metavar="A,B", default=",".join(DEFAULT_METRICS),
                        help=f"metrics to compare (default {','.join(DEFAULT_METRICS)})")
    parser.add_argument("--include-invalid", action="store_true", help="count runs marked invalid too")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the comparison as CSV (base units)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()]
    comparison = compare_folders(args.first, args.second, metrics, args.include_invalid)
    axes = [column for column in comparison.table.columns if column not in
            ("metric", "n_first", "n_second", "mean_first", "mean_second", "gain", "gain_low", "gain_high",
             "difference", "difference_low", "difference_high", "note")]
    table = Table(title=f"{args.second} against {args.first}")
    for column in (*axes, "metric", "first", "second", "second vs first (95 % CI)"):
        table.add_column(column, overflow="fold")
    for _, row in comparison.table.iterrows():
        table.add_row(*(str(row[axis]) for axis in axes), str(row["metric"]), *shown(row))
    console = output_console()
    console.print(table)
    for folder, cells in comparison.unmatched.items():
        if cells:
            console.print(f"only in {folder}: {len(cells)} cell(s), e.g. {cells[0]}", markup=False)
    if args.csv:
        comparison.table.to_csv(args.csv, index=False)
        console.print(f"written: {args.csv}", markup=False)
    return 0
