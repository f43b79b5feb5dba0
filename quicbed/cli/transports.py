"""quicbed transports: the transport names an experiment's matrix can use."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from quicbed.apps.quic.profiles import load_profiles
from quicbed.cli.console import output_console
from quicbed.spec.experiment import BUILTIN_TRANSPORTS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transports", help="list the transports an experiment can name",
        description="The built-in transports a matrix's transport axis can name: what each is (QUIC over "
                    "HTTP/3 on aioquic or quinn with a transport profile, or TCP with an HTTP version and "
                    "a congestion control) and, for QUIC, its profile. 'quic' and 'bquic' are both a "
                    "transport (on aioquic) and a profile; their quinn twins are quic-native and "
                    "bquic-native. An experiment's own 'transports:' adds more (docs/transport-profiles.md).")
    parser.add_argument("--json", action="store_true", help="machine-readable")
    parser.set_defaults(handler=handle)


def rows() -> list[dict[str, object]]:
    profiles = load_profiles()
    listed = []
    for name, spec in BUILTIN_TRANSPORTS.items():
        if spec["kind"] == "quic":
            what = f"QUIC, HTTP/3, {spec.get('impl', 'aioquic')}, profile {spec['profile']}"
            if spec.get("knobs"):
                what += ", except " + ", ".join(f"{k}={v}" for k, v in spec["knobs"].items())
            about = profiles[spec["profile"]].description
        else:
            what, about = f"TCP, HTTP/{spec['http']}, {spec['cc']}", "nginx and quicbed's TCP client"
        listed.append({"name": name, "transport": what, "about": about, "spec": spec})
    return listed


def handle(args: argparse.Namespace) -> int:
    listed = rows()
    if args.json:
        print(json.dumps({row["name"]: row["spec"] for row in listed}, indent=1))
        return 0
    table = Table()
    for column in ("name", "transport", "about"):
        table.add_column(column, overflow="fold")
    for row in listed:
        table.add_row(str(row["name"]), str(row["transport"]), str(row["about"]))
    output_console().print(table)
    return 0
