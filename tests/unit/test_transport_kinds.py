"""Transport kinds and QUIC implementations are objects found by name (quicbed/apps/transports/,
quicbed/apps/quic/implementations.py): nothing else branches on their names, every registered
one is complete, and an unknown name is refused with the field and the fix."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest

from quicbed.apps.quic.implementations import IMPLEMENTATIONS, QuicImplementation, quic_implementation
from quicbed.apps.quic.profiles import get_profile
from quicbed.apps.transports import TransportKind, transport_kind, transport_kinds
from quicbed.apps.transports import base as registry
from quicbed.errors import SpecError
from quicbed.spec.experiment import BUILTIN_TRANSPORTS, builtin_transports, load_experiment
from quicbed.spec.transport import Transport, TransportEntry
from quicbed.spec.yamlfile import LocatedData

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "quicbed"
#: where the names may be compared: the objects themselves
OWNERS = (PACKAGE / "apps" / "transports", PACKAGE / "apps" / "quic" / "implementations.py")
#: attribute -> the registered names a comparison with it would branch on
NAMED = {"kind": set(transport_kinds()), "implementation": set(IMPLEMENTATIONS)}


def _names_in(node: ast.expr) -> set[str]:
    """The string constants of a comparison's side ("quic", or ("quic", "tcp"))."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {
        element.value for element in elements if isinstance(element, ast.Constant) and isinstance(element.value, str)
    }


def _named(node: ast.expr) -> str | None:
    """``kind`` or ``implementation`` if ``node`` is a variable or attribute of that name."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name if name in NAMED else None


def name_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each comparison of a variable or attribute named ``kind`` or
    ``implementation`` with a registered kind or implementation name (==, !=, in, not in,
    match/case)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for side in sides:
                named = _named(side)
                if named and any(_names_in(other) & NAMED[named] for other in sides if other is not side):
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif isinstance(node, ast.Match) and (named := _named(node.subject)):
            names = {
                value.value.value
                for case in node.cases
                for value in ast.walk(case.pattern)
                if isinstance(value, ast.MatchValue) and isinstance(value.value, ast.Constant)
            }
            if names & NAMED[named]:
                found.append((node.lineno, f"match {ast.unparse(node.subject)}"))
    return sorted(found)


def test_the_scan_finds_a_branch_on_a_kind_or_an_implementation():
    code = (
        "if download.transport.kind == 'quic': pass\n"
        "x = 1 if 'tcp' != self.main.transport.kind else 2\n"
        "y = rival.kind in ('quic', 'tcp')\n"
        "z = transport.implementation == 'quinn'\n"
        "match t.kind:\n    case 'tcp': pass\n"
        "w = kind == 'quic'\n"
        "ok = node.kind == 'station' or background.kind == 'udp' or profile == 'quic'\n"
    )
    assert [line for line, _ in name_branches(ast.parse(code))] == [1, 2, 3, 4, 5, 7]


def test_no_branch_on_a_transport_kind_or_implementation_outside_their_objects():
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path == owner or owner in path.parents for owner in OWNERS):
            continue
        for line, text in name_branches(ast.parse(path.read_text(), str(path))):
            offending.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not offending, (
        "ask the object instead (transport_kind(t.kind), quic_implementation(name); "
        "docs/architecture.md, 'Where new work goes'):\n" + "\n".join(offending)
    )


@pytest.mark.parametrize("name", sorted(transport_kinds()))
def test_every_registered_kind_is_complete(name):
    kind = transport_kind(name)
    assert isinstance(kind, TransportKind) and not inspect.isabstract(type(kind)) and kind.name == name
    ports = [other.port for other in transport_kinds().values()]
    assert isinstance(kind.port, int) and ports.count(kind.port) == 1
    assert kind.wire_protocol in ("udp", "tcp")
    # an entry with nothing but its kind reads with the kind's defaults
    entry = TransportEntry(LocatedData(Path("(test)"), {}, {}), "plain", "transports.plain", {"kind": name})
    transport = kind.parse(entry)
    assert isinstance(transport, Transport) and transport.kind == name and transport.name == "plain"
    assert kind.refusals(transport) == [] and kind.summary(transport) and kind.about(transport)
    argv = kind.client_argv(transport, ["--host", "10.0.0.2"])
    module = argv[argv.index("-m") + 1]
    assert importlib.util.find_spec(module) is not None, f"{name}'s client module {module} does not exist"
    assert "--host" in argv


def test_every_built_in_transport_has_a_registered_kind():
    assert {spec["kind"] for spec in BUILTIN_TRANSPORTS.values()} <= set(transport_kinds())
    assert [transport.name for transport in builtin_transports().values()] == list(BUILTIN_TRANSPORTS)


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_every_quic_implementation_is_complete(name):
    implementation = quic_implementation(name)
    assert isinstance(implementation, QuicImplementation) and implementation.name == name
    assert not inspect.isabstract(type(implementation))
    assert implementation.description and implementation.ceiling
    for module in (implementation.server[0], implementation.client[0]):
        assert importlib.util.find_spec(module) is not None, f"{name}: no module {module}"
    refused = implementation.refusals(get_profile("quic"))
    assert isinstance(refused, list) and all(isinstance(reason, str) for reason in refused)


def test_an_unknown_kind_or_implementation_names_the_field_and_the_fix():
    quickstart = ROOT / "experiments" / "quickstart.yaml"
    with pytest.raises(
        SpecError,
        match=r"transports\.mine\.kind: unknown transport kind 'qiuc' "
        r"\(fix: did you mean 'quic'\? write kind: quic or kind: tcp; "
        r"a new kind registers with register_transport_kind",
    ):
        load_experiment(quickstart, {"transports": {"mine": {"kind": "qiuc"}}})
    with pytest.raises(SpecError, match=r"transports\.mine\.kind: a transport needs a kind"):
        load_experiment(quickstart, {"transports": {"mine": {"profile": "bquic"}}})
    with pytest.raises(SpecError, match=r"impl: unknown QUIC implementation 'msquic' .*register_quic_implementation"):
        quic_implementation("msquic")


def test_a_registered_kind_is_found_by_name(monkeypatch):
    """A new kind needs no change outside its module: registered, an experiment can name it."""

    class Plain(TransportKind):
        name = "plain-http"
        port = 8080

        def parse(self, entry):
            return Transport(entry.name, self.name, http=entry.http("1.1", ("1.1",)))

        def refusals(self, transport):
            return []

        def summary(self, transport):
            return "HTTP/1.1 in the clear"

        def about(self, transport):
            return "a test kind"

        def start_server(self, run, download):
            raise NotImplementedError

        def client_argv(self, transport, arguments):
            return ["plain-client", *arguments]

    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    registry.register_transport_kind(Plain())
    experiment = load_experiment(
        ROOT / "experiments" / "quickstart.yaml",
        {"transports": {"mine": {"kind": "plain-http"}}, "matrix": {"transport": ["mine"]}},
    )
    assert experiment.transports["mine"] == Transport("mine", "plain-http", http="1.1")
    assert transport_kind("plain-http").summary(experiment.transports["mine"]) == "HTTP/1.1 in the clear"
