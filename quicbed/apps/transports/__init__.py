"""Transport kinds by name (as aioquic finds congestion controllers with
``register_congestion_control``): ``transport_kind(transport.kind)`` is the object that
reads, starts, runs and records a transport of that kind.

* :mod:`.base` - :class:`TransportKind`, what a run hands it, the registry;
* :mod:`.quic` - ``kind: quic`` (HTTP/3 on aioquic or quinn);
* :mod:`.tcp` - ``kind: tcp`` (nginx and quicbed's TCP client), :mod:`.tcp_state` its
  sender's state.

A new kind: a module here with a :class:`TransportKind` subclass that ends with
``register_transport_kind(MyKind())``, imported below.
"""

from quicbed.apps.transports.base import (
    Assets,
    Download,
    RunContext,
    TransportKind,
    register_transport_kind,
    transport_kind,
    transport_kinds,
)
from quicbed.apps.transports import quic, tcp  # noqa: E402,F401  (the built-in kinds register themselves)

__all__ = [
    "Assets",
    "Download",
    "RunContext",
    "TransportKind",
    "register_transport_kind",
    "transport_kind",
    "transport_kinds",
]
