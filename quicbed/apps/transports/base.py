"""What a transport kind is, what a run hands it, and the registry of kinds by name.

A kind (``kind: quic``, ``kind: tcp`` in an experiment's transports) owns everything that
differs between kinds: reading its fields of a transport entry, what its endpoints refuse
or this machine lacks, the words ``quicbed transports`` prints, starting its server in a
run, its client's command line, and what it records for the analysis. Everything else
asks the kind by name (``transport_kind(transport.kind)``) and never compares the name.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from quicbed.errors import SpecError
from quicbed.spec.values import suggest

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle, Process
    from quicbed.spec.transport import Transport, TransportEntry


@dataclass(frozen=True)
class Assets:
    """Files every run of an experiment serves: the objects, the TLS certificate and nginx's
    session ticket key (the same in every run, as a server's that stays up)."""

    www: Path
    cert: Path
    key: Path
    ticket_key: Path


@dataclass(frozen=True)
class Download:
    """One download of a run: the measured one, or a competitor sharing the medium."""

    role: str  # "main", "competitor", "competitor-2", ...: names its files
    transport: Transport
    client: NodeHandle
    port: int

    @property
    def record_name(self) -> str:
        return "client.json" if self.role == "main" else f"{self.role}.json"

    @property
    def server_name(self) -> str:
        """Its server in an error message."""
        return "the server" if self.role == "main" else f"the {self.role}'s server"

    @property
    def kind(self) -> TransportKind:
        """Its transport's kind, which serves and fetches it."""
        return transport_kind(self.transport.kind)


@dataclass(frozen=True)
class RunContext:
    """What a kind's run hooks get of the run they serve."""

    server: NodeHandle  # the node the servers run in
    assets: Assets
    folder: Path  # the run's (partial) folder: artifacts go here
    logs: Path
    timeout: float  # the experiment's
    ready_timeout: float  # for a server's start-up
    qlog: bool  # the experiment asks for the sender's state over time
    #: the run's details (run.json): a hook adds what it did
    details: dict[str, Any]
    #: the run fails at once, naming ``what``, if this process ends before the run stops it
    watch: Callable[[str, Process | None], None]


class TransportKind(ABC):
    """A kind of transport: one instance, registered by its ``name``."""

    #: the ``kind:`` of a transport entry
    name: ClassVar[str]
    #: the measured download's server port; a competitor's adds its number to it
    port: ClassVar[int]
    #: the IP protocol its packets travel in ("udp", "tcp"), to find its flow in a capture
    wire_protocol: ClassVar[str]

    # -- an experiment file ------------------------------------------------------------------
    @abstractmethod
    def parse(self, entry: TransportEntry) -> Transport:
        """The transport an entry describes: this kind's options checked and defaulted
        (errors name the option and the fix)."""

    @abstractmethod
    def refusals(self, transport: Transport) -> list[str]:
        """Each setting of ``transport`` its endpoints cannot honour, with the reason."""

    def missing(self, transport: Transport) -> tuple[str, str] | None:
        """What this machine lacks to run ``transport`` and how to get it (None: nothing)."""
        return None

    def client_device_refusal(self, transport: Transport) -> str | None:
        """Why ``transport``'s client cannot take a device's time per datagram
        (``stress.client_device``; quicbed.apps.client_device), or None when it can."""
        return "its client's cost per datagram is not measured (bench/client_cpu.py measures the QUIC clients)"

    @abstractmethod
    def summary(self, transport: Transport) -> str:
        """What the transport is, in a few words ("TCP, HTTP/2, cubic")."""

    @abstractmethod
    def about(self, transport: Transport) -> str:
        """What sets it apart: its behaviour and its endpoints."""

    # -- a run ---------------------------------------------------------------------------------
    @abstractmethod
    def start_server(self, run: RunContext, download: Download) -> AbstractContextManager[object]:
        """Start the server ``download`` fetches from and wait until it is ready; leaving the
        context stops it and keeps what it wrote."""

    @abstractmethod
    def client_argv(self, transport: Transport, arguments: list[str]) -> list[str]:
        """The client's command line: ``arguments`` (what every client takes: server, what to
        fetch, limits, output, TLS) and this kind's own."""

    # -- the analysis ------------------------------------------------------------------------
    def record_sender(self, run: RunContext, download: Download) -> AbstractContextManager[object]:
        """With ``qlog: true``, what records the sender's state during the transfer (beyond
        what ``start_server`` asked of the server)."""
        return contextlib.nullcontext()

    # (not abstract: a kind may keep nothing)
    def collect(self, run: RunContext, download: Download, shared: bool) -> None:  # noqa: B027
        """After the run: put the server's records of ``download`` under the names the
        analysis reads (``shared``: other clients downloaded from the same server)."""


_KINDS: dict[str, TransportKind] = {}


def register_transport_kind(kind: TransportKind) -> None:
    """Make ``kind`` available to experiments as ``kind: NAME``."""
    _KINDS[kind.name] = kind


def transport_kind(name: object) -> TransportKind:
    """The registered kind called ``name``; a SpecError on the ``kind`` field otherwise."""
    if not isinstance(name, str) or name not in _KINDS:
        close = suggest(str(name), list(_KINDS)) if name is not None else ""
        raise SpecError(
            "a transport needs a kind" if name is None else f"unknown transport kind {name!r}",
            field="kind",
            fix=f"{close}write kind: {' or kind: '.join(_KINDS)}; a new kind registers with "
            "register_transport_kind (docs/architecture.md)",
        )
    return _KINDS[name]


def transport_kinds() -> dict[str, TransportKind]:
    """Every registered kind by name."""
    return dict(_KINDS)
