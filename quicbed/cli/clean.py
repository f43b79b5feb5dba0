"""quicbed clean: remove what a killed quicbed run left behind."""

from __future__ import annotations

import argparse
import os

from quicbed.backends.namespaces import clean
from quicbed.errors import MissingDependency
from quicbed.host.cpu_accounting import cleanup_leftovers


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "clean",
        help="remove namespaces and processes left by killed runs",
        description="Normal runs clean up after themselves, also on Ctrl-C. After a crash or "
        "'kill -9', this removes the namespaces (and with them their links and tc "
        "state), processes and microVMs that quicbed created - recognised by the "
        "'qb<run id>-' name mark and the records in /run/quicbed - the empty CPU "
        "accounting cgroups of dead runs, and restores the host settings they changed. Runs that are still alive are left alone.",
    )
    parser.add_argument(
        "--include-live", action="store_true", help="also tear down networks whose quicbed process is still running"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise MissingDependency("quicbed clean needs root (fix: sudo quicbed clean)")
    removed = clean(include_live=args.include_live)
    # processes of a killed run are gone now, so its CPU accounting cgroups are empty
    removed += [f"CPU accounting cgroup {path}" for path in cleanup_leftovers()]
    for item in removed:
        print(f"removed {item}")
    print("nothing to clean" if not removed else f"cleaned {len(removed)} item(s)")
    return 0
