"""A TCP congestion control for one server port, next to the namespace's default.

The default congestion control is one sysctl per namespace, and nginx cannot choose one per
listener. A route can (``congctl``), and the kernel applies it to connections it accepts: the
child socket takes the congestion control of the route back to the client. A policy rule that
matches the server's port (``ip rule add sport PORT``) sends those connections to a table of
their own, whose one route to the client carries ``congctl``. So two TCP servers in one
namespace, even serving the same client, run different congestion controls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quicbed.errors import BackendError

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle

RULE_PRIORITY = 100  # before the main table's rule (32766)
TABLE_BASE = 10_000  # the port's table: TABLE_BASE + port (clear of local/main/default)


@dataclass(frozen=True)
class PortCongestionControl:
    """``algorithm`` for TCP connections that server ``port`` accepts from ``client``."""

    port: int
    client: str
    algorithm: str

    @property
    def family(self) -> str:
        return "-6" if ":" in self.client else "-4"

    @property
    def table(self) -> str:
        return str(TABLE_BASE + self.port)

    def apply_commands(self, route: dict[str, Any]) -> list[list[str]]:
        """Commands from ``route`` (``ip -j route get CLIENT``: the way back to the client)."""
        if "dev" not in route:
            raise BackendError(f"no route from the server to {self.client} ({route})")
        prefix = "/128" if self.family == "-6" else "/32"
        via = ["via", route["gateway"]] if route.get("gateway") else []
        source = ["src", route["prefsrc"]] if route.get("prefsrc") else []
        return [
            [
                "ip",
                self.family,
                "route",
                "replace",
                self.client + prefix,
                *via,
                "dev",
                route["dev"],
                *source,
                "table",
                self.table,
                "congctl",
                self.algorithm,
            ],
            [
                "ip",
                self.family,
                "rule",
                "add",
                "priority",
                str(RULE_PRIORITY),
                "sport",
                str(self.port),
                "table",
                self.table,
            ],
        ]

    def undo_commands(self) -> list[list[str]]:
        return [
            [
                "ip",
                self.family,
                "rule",
                "del",
                "priority",
                str(RULE_PRIORITY),
                "sport",
                str(self.port),
                "table",
                self.table,
            ],
            ["ip", self.family, "route", "flush", "table", self.table],
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "client": self.client,
            "congestion_control": self.algorithm,
            "how": f"ip rule sport {self.port} -> table {self.table}, route congctl {self.algorithm}",
        }


def apply(node: NodeHandle, setting: PortCongestionControl) -> Callable[[], None]:
    """Set ``setting`` up in ``node`` (the server's namespace); return what takes it down."""
    routes = json.loads(node.run(["ip", setting.family, "-j", "route", "get", setting.client]).stdout or "[]")
    if not routes:
        raise BackendError(f"no route from {node.name} to {setting.client}")

    def undo() -> None:
        for argv in setting.undo_commands():
            node.run(argv, check=False)

    try:
        for argv in setting.apply_commands(routes[0]):
            node.run(argv)
    except BaseException:
        undo()
        raise
    return undo
