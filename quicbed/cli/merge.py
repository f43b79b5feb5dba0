"""quicbed merge: one results folder from the folders of an experiment's shards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quicbed.runner.merge import merge


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "merge",
        help="join the results folders of an experiment's shards",
        description="Join the folders that 'quicbed run --shard K/N' wrote (on one or several machines) into one "
        "results folder, then write its report. Refuses folders that ran different experiment "
        "files, settings or code (unless --force) and run ids found twice; says which runs are "
        "missing. The shard folders are not changed. See docs/multi-host.md.",
    )
    parser.add_argument("folders", nargs="+", type=Path, help="the shards' results folders")
    parser.add_argument("--out", type=Path, required=True, help="the merged folder (must not exist yet)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="merge even when the shards ran other experiment files, settings or code (the "
        "differences are recorded in metadata.json)",
    )
    parser.add_argument("--no-report", action="store_true", help="do not write the report")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    result = merge(args.folders, args.out, force=args.force)
    hosts = sorted({str((s.metadata.get("host") or {}).get("hostname")) for s in result.shards})
    missing = f"{len(result.missing)}" if result.missing else "none"
    print(
        f"merged {len(result.shards)} folder(s) from {len(hosts)} host(s) ({', '.join(hosts)}): "
        f"{len(result.present)} runs, {missing} of the experiment's {len(result.expected)} missing, into {args.out}"
    )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if result.missing:
        shown = ", ".join(result.missing[:10]) + (" ..." if len(result.missing) > 10 else "")
        print(
            f"incomplete: {len(result.missing)} run(s) missing ({shown}); re-run their shards with --resume, then "
            "merge again into a new folder",
            file=sys.stderr,
        )
    if not args.no_report and result.present:
        from quicbed.cli import main

        print(f"writing the report: quicbed report {args.out}", flush=True)
        if main(["report", str(args.out)]) != 0:
            print(
                f"the report failed; the merged results are complete (retry: quicbed report {args.out})",
                file=sys.stderr,
            )
    return 1 if result.missing else 0
