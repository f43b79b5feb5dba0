"""constraints.txt pins every Python requirement setup.py declares, within setup.py's ranges,
and every install path of a checkout installs with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _setup_requirements() -> list[Requirement]:
    """install_requires and every extras_require list of setup.py, read without running it."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    found: list[Requirement] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            found += [Requirement(item.value) for item in node.value.elts]  # type: ignore[attr-defined]
        elif isinstance(node, ast.keyword) and node.arg == "extras_require":
            for values in node.value.values:  # type: ignore[attr-defined]
                found += [Requirement(item.value) for item in values.elts]
    return found


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_requirement_of_setup_py_is_pinned_within_its_range():
    pins = _pins()
    requirements = _setup_requirements()
    assert len(requirements) > 10
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not pinned (fix: scripts/refresh-constraints.sh)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside setup.py's {requirement} (fix: refresh it)"
        )
    for tool in ("pip", "setuptools", "wheel"):  # what builds the environment is pinned too
        assert tool in pins


def test_every_install_path_of_a_checkout_uses_the_constraints():
    install = (ROOT / "scripts" / "install.sh").read_text()
    assert re.search(r'pinned=\(--constraint "\$constraints"\)', install)
    assert install.count('"${pinned[@]}"') == 2  # pip, setuptools and wheel; then quicbed with its extras
    for role_file in ("roles/quicbed/tasks/main.yml", "roles/mininet_wifi/tasks/main.yml"):
        assert "--constraint" in (ROOT / role_file).read_text(), role_file
