"""Backends realise a Topology as a running Network. Pick one by name with ``create``; ask
what they need from the host with ``host_checks`` (``quicbed doctor``), whether one can run
here with ``unavailable``, what of a topology it cannot build with ``unrealisable`` and what
this kernel lacks for it with ``kernel_problem``. The backends are listed, one descriptor
each, in quicbed/backend_registry.py; nothing outside this package imports a concrete
backend's modules."""

from __future__ import annotations

import importlib
from typing import Any

from quicbed.backend_registry import BACKENDS, BackendDescriptor
from quicbed.backends.base import Network
from quicbed.errors import SpecError
from quicbed.host.capabilities import Capability, Check
from quicbed.spec.topology import Topology


def descriptor(name: str) -> BackendDescriptor:
    """The registry's entry for backend ``name``, or a SpecError listing the known ones."""
    if name not in BACKENDS:
        raise SpecError(f"unknown backend {name!r}", field="backend", fix=f"use one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def resolve(reference: str) -> Any:
    """The object a descriptor's "module:attribute" names (importing its module)."""
    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def create(name: str, topology: Topology, **options: Any) -> Network:
    """A not yet started Network of backend ``name`` for ``topology`` (``options``: the
    backend's own, e.g. Mininet-WiFi's timeouts)."""
    module_name = descriptor(name).network.partition(":")[0]
    try:
        network_class = resolve(descriptor(name).network)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise SpecError(f"backend {name!r} is not part of this installation", field="backend") from None
        raise
    return network_class(topology, **options)


def seeded_options(name: str, options: dict[str, Any], stream: int) -> dict[str, Any]:
    """``options`` with the random stream a run of an experiment gets, for a backend that
    draws random numbers of its own (ns-3's backoffs, frame errors and losses), unless the
    experiment fixed one (docs/clocks.md, "Repeatability")."""
    option = descriptor(name).random_stream_option
    if option is not None and options.get(option) is None:
        return {**options, option: stream}
    return options


def vm_options(name: str) -> dict[str, Any]:
    """The options a network of backend ``name`` gets inside the microVM (its CPU is slower)."""
    return dict(descriptor(name).vm_options)


def host_checks() -> list[Check]:
    """Every backend's doctor checks. A checks module that fails to import (a broken
    installation) becomes one check that raises, so doctor reports it as an error line."""
    checks: list[Check] = []
    for name, entry in BACKENDS.items():
        if entry.checks is None:
            continue
        try:
            checks += importlib.import_module(entry.checks).CHECKS
        except Exception as problem:  # noqa: BLE001 - doctor must report, not crash

            def broken(problem: Exception = problem) -> Capability:
                raise problem

            checks.append((name.replace("-", "_"), f"the {name} backend", broken))
    return checks


def unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run on this machine ('WHAT (fix: HOW)'), or None."""
    reference = descriptor(name).unavailable
    return resolve(reference)() if reference else None


def unrealisable(name: str, topology: Topology) -> list[str]:
    """What of ``topology`` backend ``name`` cannot build (empty when it can build all of it)."""
    return list(resolve(descriptor(name).unrealisable)(topology))


def kernel_problem(name: str, topology: Topology | None) -> str | None:
    """What this kernel lacks for backend ``name`` to run ``topology`` (None: nothing, or
    nothing that can be told without the topology), e.g. 'this kernel has no netem'."""
    reference = descriptor(name).kernel_problem
    return resolve(reference)(topology) if reference else None
