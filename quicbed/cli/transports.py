"""quicbed transports: the transport names an experiment's matrix can use, and the profiles."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from quicbed.apps.quic.profiles import TransportProfile, load_profiles
from quicbed.apps.transports import transport_kind
from quicbed.cli.console import output_console
from quicbed.spec.experiment import Transport, builtin_transports, load_experiment


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transports",
        help="list the transports an experiment can name",
        description="The transports a matrix's transport axis can name: what each is (QUIC over "
        "HTTP/3 on aioquic or quinn with a transport profile, or TCP with an HTTP version and "
        "a congestion control) and, for QUIC, its profile and the knobs it changes. 'quic' and "
        "'bquic' are both a transport (on aioquic) and a profile; their quinn twins are quic-native "
        "and bquic-native. With an experiment file, its own 'transports:' too; with "
        "--profiles-file, the profiles a file adds (docs/transport-profiles.md).",
    )
    parser.add_argument(
        "experiment", nargs="?", type=Path, help="also list the transports this experiment file defines"
    )
    parser.add_argument(
        "--profiles-file",
        action="append",
        default=[],
        metavar="FILE",
        help="also list the profiles this file defines (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable")
    parser.set_defaults(handler=handle)


RESUMED = {"ticket": "resumes a TLS session", "0rtt": "resumes with 0-RTT data"}


def _what(transport: Transport) -> str:
    what = transport_kind(transport.kind).summary(transport)
    return what + (f", {RESUMED[transport.resumption]}" if transport.resumption in RESUMED else "")


def rows(experiment: Path | None = None) -> list[dict[str, Any]]:
    """Every transport: the built-in ones, then those the experiment defines or redefines."""
    builtin = builtin_transports()
    transports = load_experiment(experiment).transports if experiment is not None else builtin
    listed = []
    for name, transport in transports.items():
        source = "built-in" if builtin.get(name) == transport else str(experiment)
        # (for QUIC: the profile's behaviour, what this transport changes of it, its implementation's ceiling)
        about = transport_kind(transport.kind).about(transport)
        listed.append(
            {
                "name": name,
                "transport": _what(transport),
                "about": about,
                "source": source,
                "spec": transport.describe(),
            }
        )
    return listed


def profile_rows(files: list[str]) -> list[dict[str, Any]]:
    """The profiles the files add, each with its knobs that differ from aioquic's defaults."""
    builtin = load_profiles()
    defaults = TransportProfile("defaults").knobs()
    return [
        {
            "name": name,
            "source": profile.source,
            "about": profile.description,
            "knobs": {k: v for k, v in profile.knobs().items() if v != defaults[k]},
        }
        for name, profile in load_profiles(files).items()
        if name not in builtin
    ]


def handle(args: argparse.Namespace) -> int:
    listed = rows(args.experiment)
    added = profile_rows(args.profiles_file)
    if args.json:
        print(
            json.dumps(
                {
                    "transports": {row["name"]: {**row["spec"], "source": row["source"]} for row in listed},
                    "profiles": {row["name"]: row for row in added},
                },
                indent=1,
            )
        )
        return 0
    console = output_console()
    table = Table()
    for column in ("name", "transport", "about") + (("from",) if args.experiment else ()):
        table.add_column(column, overflow="fold")
    for row in listed:
        table.add_row(
            str(row["name"]),
            str(row["transport"]),
            str(row["about"]),
            *((str(row["source"]),) if args.experiment else ()),
        )
    console.print(table)
    if added:
        profiles = Table(
            title="profiles added by --profiles-file: for the QUIC server and client's --profiles-file; "
            "in an experiment, a transport's profile and knobs give the same"
        )
        for column in ("profile", "knobs apart from aioquic's defaults", "about", "file"):
            profiles.add_column(column, overflow="fold")
        for row in added:
            profiles.add_row(
                row["name"],
                ", ".join(f"{k}={v}" for k, v in row["knobs"].items()) or "(none)",
                row["about"],
                row["source"],
            )
        console.print(profiles)
    return 0
