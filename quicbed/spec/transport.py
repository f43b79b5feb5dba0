"""A transport an experiment downloads with, and one ``transports:`` entry while it is read.

What the fields of a kind of transport mean (defaults, choices, what its endpoints refuse)
is the kind's own (quicbed/apps/transports/, found by the entry's ``kind``); this module
holds what every kind shares, and imports nothing above the spec layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quicbed.errors import SpecError
from quicbed.spec.values import choice, expect_mapping
from quicbed.spec.yamlfile import LocatedData

#: the options a transports: entry may have (each kind says which of them it takes)
TRANSPORT_OPTIONS = ("kind", "profile", "http", "cc", "knobs", "impl", "resumption")
CONGESTION_CONTROLS = ("cubic", "reno", "bbr")


@dataclass(frozen=True)
class Transport:
    name: str
    kind: str  # a registered kind (quicbed.apps.transports): "quic" (HTTP/3 endpoints), "tcp" (nginx + client)
    profile: str | None = None  # QUIC transport profile
    http: str = "3"
    cc: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    implementation: str | None = None  # QUIC: "aioquic" or "quinn" (quicbed.apps.quic.implementations)
    #: "none": a new connection; "ticket": TLS session resumption; "0rtt" (QUIC): resumption with
    #: the requests as 0-RTT data. Resumed runs first make a priming connection, outside the
    #: run's captures and metrics (docs/endpoints.md, "Session resumption and 0-RTT")
    resumption: str = "none"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "profile": self.profile,
            "http": self.http,
            "cc": self.cc,
            "knobs": dict(self.knobs),
            "impl": self.implementation,
            "resumption": self.resumption,
        }


@dataclass(frozen=True)
class TransportEntry:
    """One entry of an experiment's ``transports:`` (or a built-in one) as its kind reads it:
    its options, and errors naming the file, line and field (``transports.NAME.OPTION``)."""

    doc: LocatedData
    name: str
    field: str  # "transports.NAME"
    options: dict[str, Any]

    def get(self, option: str, default: Any = None) -> Any:
        return self.options.get(option, default)

    def error(self, message: str, option: str = "", fix: str = "") -> SpecError:
        return self.doc.error(message, f"{self.field}.{option}" if option else self.field, fix=fix)

    def choice(self, option: str, value: Any, choices: tuple[str, ...]) -> str:
        return choice(self.doc, value, f"{self.field}.{option}", choices)

    def http(self, default: str, versions: tuple[str, ...]) -> str:
        """The HTTP version, one of the kind's ``versions``."""
        return self.choice("http", str(self.get("http", default)), versions)

    def cc(self) -> str | None:
        """The congestion control, or None: the endpoints' own."""
        cc = self.get("cc")
        if cc is not None:
            self.choice("cc", cc, CONGESTION_CONTROLS)
        return cc

    def knobs(self) -> dict[str, Any]:
        return dict(expect_mapping(self.doc, self.get("knobs"), f"{self.field}.knobs"))

    def resumption(self, modes: tuple[str, ...]) -> str:
        """How the client connects, one of the kind's ``modes``."""
        return self.choice("resumption", self.get("resumption", "none"), modes)
