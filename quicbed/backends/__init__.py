"""Backends realise a Topology as a running Network. Pick one by name with ``create``."""

from __future__ import annotations

import importlib

from quicbed.backends.base import Network
from quicbed.errors import SpecError
from quicbed.spec.topology import Topology

#: backend name -> "module:class"; modules are imported only when used
BACKENDS = {
    "netns": "quicbed.backends.netns:NamespaceNetwork",
    "ns3": "quicbed.backends.ns3.network:Ns3Network",
    "mininet-wifi": "quicbed.backends.mininet_wifi:MininetWifiNetwork",
}


def create(name: str, topology: Topology) -> Network:
    """A not yet started Network of backend ``name`` for ``topology``."""
    if name not in BACKENDS:
        raise SpecError(f"unknown backend {name!r}", field="backend", fix=f"use one of {', '.join(BACKENDS)}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise SpecError(f"backend {name!r} is not part of this installation", field="backend") from None
        raise
    return getattr(module, class_name)(topology)
