"""The backend registry (quicbed/backend_registry.py) against the code it names, and what each
backend offers beyond a Network, as the runner asks it (quicbed.backends.base)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from quicbed import backends
from quicbed.backend_registry import BACKEND_NAMES, BACKENDS
from quicbed.backends.base import MacStatistics, Network, ReshapableLinks, WalkedStations
from quicbed.errors import SpecError
from quicbed.labs.catalogue import LAB_BACKENDS
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = (MacStatistics, WalkedStations, ReshapableLinks)
#: modules of quicbed/backends that several backends share (no backend of their own)
SHARED = {"__init__", "base", "namespaces", "tc"}
#: a topology each backend can build (built, not started: nothing is created on the host)
TOPOLOGIES = {
    "netns": ("dumbbell.py", {"rate": "20mbit", "delay": "0ms"}),
    "ns3": ("roaming.py", {}),
    "mininet-wifi": ("roaming.py", {}),
}
#: options a backend needs to be built here without its daemons (Mininet-WiFi's wmediumd check)
OPTIONS = {"mininet-wifi": {"wmediumd": True}}


def _offers(network: object) -> list[str]:
    return [capability.__name__ for capability in CAPABILITIES if isinstance(network, capability)]


def test_every_backend_package_has_one_registry_entry() -> None:
    found = {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "quicbed" / "backends").iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists())
    } - SHARED
    assert sorted(entry.package for entry in BACKENDS.values()) == sorted(found)
    assert BACKEND_NAMES == tuple(BACKENDS) and all(name == entry.name for name, entry in BACKENDS.items())


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_each_descriptor_names_code_that_exists_with_the_signature_used(name: str) -> None:
    entry = BACKENDS[name]
    network_class = backends.resolve(entry.network)
    assert issubclass(network_class, Network)
    for reference, parameters in ((entry.unrealisable, 1), (entry.unavailable, 0), (entry.kernel_problem, 1)):
        if reference is not None:
            function = backends.resolve(reference)
            assert len(inspect.signature(function).parameters) == parameters, reference
    if entry.checks is not None:
        assert backends.host_checks() and all(len(check) == 3 for check in backends.host_checks())
    # its own code lives in its package (the shared modules aside)
    own = [entry.network, *(r for r in (entry.unavailable, entry.kernel_problem, entry.checks) if r)]
    assert all(reference.startswith(f"quicbed.backends.{entry.package}") for reference in own), own


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_each_backend_offers_exactly_the_capabilities_its_descriptor_lists(name: str) -> None:
    script, params = TOPOLOGIES[name]
    network = backends.create(name, load_topology(str(ROOT / "topologies" / script), params), **OPTIONS.get(name, {}))
    assert _offers(network) == list(BACKENDS[name].capabilities)


def test_the_names_the_loaders_and_the_cli_accept_are_the_registry_s(tmp_path: Path) -> None:
    from quicbed.spec.experiment import load_experiment

    assert LAB_BACKENDS == ("auto", *BACKEND_NAMES)
    path = tmp_path / "e.yaml"
    path.write_text(f"name: e\ntopology: {{script: {ROOT / 'topologies' / 'dumbbell.py'}}}\nbackend: nope\n")
    with pytest.raises(SpecError) as refused:
        load_experiment(path)
    assert all(name in str(refused.value) for name in BACKEND_NAMES)
    with pytest.raises(SpecError, match="unknown backend 'nope'"):
        backends.create("nope", load_topology(str(ROOT / "topologies" / "dumbbell.py"), {}))


def test_options_for_the_microvm_and_the_random_stream_come_from_the_descriptor() -> None:
    assert backends.vm_options("mininet-wifi")["association_timeout_s"] == 240.0
    assert backends.vm_options("netns") == {}
    assert backends.seeded_options("ns3", {}, 7) == {"run": 7}
    assert backends.seeded_options("netns", {}, 7) == {}
