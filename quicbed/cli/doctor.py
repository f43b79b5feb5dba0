"""quicbed doctor: what this host can emulate and what each missing piece disables."""

from __future__ import annotations

import argparse
import json
import platform

from rich.table import Table

from quicbed.apps.quic import checks as quic_checks
from quicbed.backends import host_checks
from quicbed.cli.console import output_console
from quicbed.host.capabilities import capabilities
from quicbed.runner.backend_choice import NO_NETEM


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="list what this host can do",
        description="Try every kernel feature and tool quicbed uses and say what each missing "
        "one disables and how to get it. Run it as root: namespaces can only be "
        "tested by root.",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Exit 0 when every check ran (missing pieces are reported, not errors); 1 when a check
    itself failed, which means a broken installation."""
    found = capabilities([*quic_checks.CHECKS, *host_checks()])
    status = 1 if any(c.error for c in found) else 0
    if args.json:
        print(json.dumps({c.name: c.to_dict() for c in found}, indent=1))
        return status
    console = output_console()
    console.print(f"[bold]quicbed doctor[/] on {platform.node()}, kernel {platform.release()}")
    table = Table(show_lines=False)
    for column in ("capability", "", "detail", "if missing: what you lose / how to get it"):
        table.add_column(column, overflow="fold")  # a cut fix cannot be copied
    for c in found:
        mark = "[red]error[/]" if c.error else "[green]yes[/]" if c.available else "[red]no[/]"
        table.add_row(c.name, mark, c.detail, "" if c.available else f"{c.disables}\n[dim]fix: {c.fix}[/]")
    console.print(table)

    def have(name: str) -> bool:
        return any(c.name == name and c.available for c in found)

    if not have("netem") and have("vm_kernel"):
        console.print(f"netem is missing here. {NO_NETEM}")
    if have("mininet_wifi"):
        console.print(
            "Mininet-WiFi: run one Mininet-WiFi experiment at a time per machine (its cleanup kills "
            "hostapd and wpa_supplicant machine-wide and unloads mac80211_hwsim)."
        )
        if not (have("mac80211_hwsim") and have("openvswitch")) and have("vm_kernel"):
            console.print(
                "mac80211_hwsim or openvswitch is missing here: the mininet-wifi backend runs in the "
                "microVM (quicbed run --vm)."
            )
    if status:
        console.print(
            "[red]Some checks failed with an error[/] (lines marked 'error'): the installation is "
            "broken; their fix column says how to repair it."
        )
    return status
