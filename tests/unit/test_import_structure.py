"""The package's layers (docs/architecture.md) as checks on its source: no import circles, the
host, spec and analysis layers never reach into a backend, and no source file grows past
~800 lines without saying why at its top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from quicbed.backend_registry import BACKENDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "quicbed"
#: every source file of the project (the native endpoint's patched crates are fetched, not ours)
SOURCES = (
    ("quicbed", ("*.py", "*.cc", "*.h")),
    ("native/quinn/src", ("*.rs",)),
    ("bench", ("*.py",)),
    ("scripts", ("*.sh",)),
    ("tests", ("*.py",)),
    ("topologies", ("*.py",)),
    ("labs", ("*.py",)),
)
#: layers that must not know which emulator runs (they are used by every backend, or by none)
BACKEND_FREE = ("quicbed.host", "quicbed.spec", "quicbed.analysis")
MAX_LINES = 800
#: a file over MAX_LINES says why within its first lines with this phrase
LONG_FILE_MARK = "long on purpose:"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run, at any depth (a function's lazy import too), except those
    under ``if TYPE_CHECKING:``, which only type checkers read."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _imported(module: str, package: bool, node: ast.Import | ast.ImportFrom, modules: dict) -> set[str]:
    """quicbed modules an import statement executes: the module named, and each package on
    the way to it that the importing module is not itself inside (their __init__ runs)."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        targets = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names]
    executed = set()
    own_packages = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
    for target in targets:
        if target.split(".")[0] != "quicbed":
            continue
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        parts = target.split(".")
        executed |= {
            name
            for name in (".".join(parts[:i]) for i in range(1, len(parts) + 1))
            if name in modules and name not in own_packages
        }
    executed.discard(module)
    return executed


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {
            target
            for node in _runtime_imports(ast.parse(path.read_text(), str(path)))
            for target in _imported(name, package, node, modules)
        }
        for name, (path, package) in modules.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walk_sees_the_package_and_its_lazy_imports():
    graph = import_graph()
    assert len(graph) > 50 and "quicbed.runner.engine" in graph
    # a function-level import counts (it runs when the function is called) ...
    assert "quicbed.spec.resolve" in graph["quicbed.spec.topology"]
    # ... and importing a submodule runs the __init__ of each package on the way
    assert "quicbed.backends" in graph["quicbed.runner.engine"]


def test_circle_detection_finds_a_circle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, (
        "import circles (break each by moving what both sides need to a module of its own):\n"
        + "\n".join(" <-> ".join(component) for component in found)
    )


@pytest.mark.parametrize("layer", BACKEND_FREE)
def test_layer_does_not_import_a_backend(layer):
    graph = import_graph()
    members = [name for name in graph if name == layer or name.startswith(layer + ".")]
    assert members
    offending = sorted(
        f"{name} imports {target}"
        for name in members
        for target in graph[name]
        if target == "quicbed.backends" or target.startswith("quicbed.backends.")
    )
    assert not offending, f"{layer} must not know which emulator runs:\n" + "\n".join(offending)


#: docs/architecture.md's table of layers, top to bottom: imports go down it
LAYERS = ("cli", "labs", "report", "runner", "analysis", "backends", "apps", "host", "spec", "traces")
#: the imports up the table it names, by module (everything else going up is a break)
UPWARD_EXCEPTIONS = {
    # an experiment file is checked against the apps' catalogues: page shapes, and the registry of
    # transport kinds (quicbed/apps/transports/), whose kind reads the rest of a transport entry (a
    # lazy import: the registry and its kinds import their servers and clients only when started)
    "quicbed.spec.experiment": {"quicbed.apps", "quicbed.apps.objects", "quicbed.apps.transports"},
}
#: leaves any layer may import: units (spec/units.py) and the metric catalogue, both pure data,
#: and the arithmetic of MAC statistics' histograms (analysis/mac.py), which imports nothing of quicbed
LEAVES = {
    "quicbed.spec",
    "quicbed.spec.units",
    "quicbed.analysis",
    "quicbed.analysis.catalogue",
    "quicbed.analysis.mac",
}
#: the concrete backends' packages, which only quicbed/backends/__init__.py resolves (from the
#: registry, quicbed/backend_registry.py; tests/unit/test_backend_registry.py holds it complete)
CONCRETE_BACKENDS = tuple(entry.package for entry in BACKENDS.values())


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_imports_go_down_the_table_of_layers():
    graph = import_graph()
    upward = sorted(
        f"{name} ({_layer(name)}) imports {target} ({_layer(target)})"
        for name, targets in graph.items()
        for target in targets
        if _layer(name)
        and _layer(target)
        and LAYERS.index(_layer(target)) < LAYERS.index(_layer(name))
        and target not in UPWARD_EXCEPTIONS.get(name, ())
        and target not in LEAVES
    )
    assert not upward, "imports up the table of docs/architecture.md:\n" + "\n".join(upward)


def test_no_backend_imports_another_and_only_the_registry_names_them():
    graph = import_graph()

    def concrete(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "backends" and parts[2] in CONCRETE_BACKENDS else None

    crossing = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        for target in targets
        if concrete(target) and concrete(name) != concrete(target) and name != "quicbed.backends"
    )
    assert not crossing, "use the registry (quicbed.backends: create, unavailable, unrealisable):\n" + "\n".join(
        crossing
    )


def test_the_host_layer_imports_no_other_layer():
    """Everything else may ask the host what it can do; the host asks nobody (backends and apps
    hand their own doctor checks to the CLI) but the modules under every layer."""
    graph = import_graph()
    offending = sorted(
        f"{name} imports {target}"
        for name in graph
        if name.startswith("quicbed.host")
        for target in graph[name]
        if not target.startswith("quicbed.host")
        and target not in ("quicbed", "quicbed.errors", "quicbed.atomic", "quicbed.clocks", "quicbed.devices")
    )
    assert not offending, "\n".join(offending)


def test_no_source_file_is_long_without_a_reason_at_its_top():
    sources = [p for folder, patterns in SOURCES for pattern in patterns for p in (ROOT / folder).rglob(pattern)]
    assert len(sources) > 50 and any(p.suffix == ".rs" for p in sources)
    long_without_reason = []
    for path in sources:
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not any(LONG_FILE_MARK in line for line in lines[:20]):
            long_without_reason.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not long_without_reason, (
        f"split these by concern, or say why they stay whole with '{LONG_FILE_MARK}' in their first "
        "20 lines:\n" + "\n".join(long_without_reason)
    )
