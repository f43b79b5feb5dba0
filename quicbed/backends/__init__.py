"""Backends realise a Topology as a running Network. Pick one by name with ``create``; ask
what they need from the host with ``host_checks`` (``quicbed doctor``), whether one can run
here with ``unavailable`` and what of a topology it cannot build with ``unrealisable``.
Nothing outside this package names a concrete backend's modules."""

from __future__ import annotations

import importlib
from typing import Any

from quicbed.backends.base import Network
from quicbed.errors import SpecError
from quicbed.host.capabilities import Capability, Check
from quicbed.spec.topology import Topology

#: backend name -> "module:class"; modules are imported only when used
BACKENDS = {
    "netns": "quicbed.backends.netns:NamespaceNetwork",
    "ns3": "quicbed.backends.ns3.network:Ns3Network",
    "mininet-wifi": "quicbed.backends.mininet_wifi:MininetWifiNetwork",
}
#: backend name -> "module:function" saying why the backend cannot run here (None: it can)
AVAILABILITY = {
    "ns3": "quicbed.backends.ns3.build:missing",
    "mininet-wifi": "quicbed.backends.mininet_wifi.host:import_problem",
}
#: backend name -> "module:function" listing what of a topology it cannot build
REALISABILITY = {
    "netns": "quicbed.backends.tc:topology_unrealisable",
    "ns3": "quicbed.backends.ns3.description:unrealisable",
    "mininet-wifi": "quicbed.backends.mininet_wifi.host:unrealisable",
}
#: backend name -> module whose CHECKS say what the backend needs beyond the host's own checks
CHECK_MODULES = {
    "ns3": "quicbed.backends.ns3.checks",
    "mininet-wifi": "quicbed.backends.mininet_wifi.checks",
}


def create(name: str, topology: Topology, **options: Any) -> Network:
    """A not yet started Network of backend ``name`` for ``topology`` (``options``: the
    backend's own, e.g. Mininet-WiFi's timeouts)."""
    if name not in BACKENDS:
        raise SpecError(f"unknown backend {name!r}", field="backend", fix=f"use one of {', '.join(BACKENDS)}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise SpecError(f"backend {name!r} is not part of this installation", field="backend") from None
        raise
    return getattr(module, class_name)(topology, **options)


def seeded_options(name: str, options: dict[str, Any], stream: int) -> dict[str, Any]:
    """``options`` with the random stream a run of an experiment gets, for a backend that
    draws random numbers of its own (ns-3's backoffs, frame errors and losses), unless the
    experiment fixed one (docs/clocks.md, "Repeatability")."""
    if name == "ns3" and options.get("run") is None:
        return {**options, "run": stream}
    return options


def host_checks() -> list[Check]:
    """Every backend's doctor checks. A checks module that fails to import (a broken
    installation) becomes one check that raises, so doctor reports it as an error line."""
    checks: list[Check] = []
    for name, module_name in CHECK_MODULES.items():
        try:
            checks += importlib.import_module(module_name).CHECKS
        except Exception as problem:  # noqa: BLE001 - doctor must report, not crash
            def broken(problem: Exception = problem) -> Capability:
                raise problem

            checks.append((name.replace("-", "_"), f"the {name} backend", broken))
    return checks


def _function(reference: str) -> Any:
    module_name, _, name = reference.partition(":")
    return getattr(importlib.import_module(module_name), name)


def unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run on this machine ('WHAT (fix: HOW)'), or None."""
    reference = AVAILABILITY.get(name)
    return _function(reference)() if reference else None


def unrealisable(name: str, topology: Topology) -> list[str]:
    """What of ``topology`` backend ``name`` cannot build (empty when it can build all of it)."""
    return list(_function(REALISABILITY[name])(topology))
