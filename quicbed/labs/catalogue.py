"""The labs quicbed knows: folders with a ``lab.yaml``, found in quicbed's ``labs/`` and in
the folders of ``QUICBED_LABS`` (a teacher's own, separated by ``:``).

    labs/NAME/
      lab.yaml     title, summary, order, backend, minutes, files, run (below)
      handout.md   the task, and the questions answered from the results
      starter/     what ``quicbed lab start`` copies beside the handout
      solution/    the reference solution (never copied; tests check that it passes)
      checks.py    the checks (quicbed.labs.check)

    title: Random and bursty loss
    summary: Bernoulli and Gilbert-Elliott loss of the same mean, TCP and QUIC
    order: 2             # where it comes in a course (lists sort by it, then by name)
    backend: auto        # auto (netns, or ns3 when the kernel has no netem), netns, ns3, mininet-wifi
    minutes: 45          # a student's time, for the teacher's plan
    files: [experiment.yaml, answers.yaml]  # what the student hands in (all in starter/ and solution/)
    run: {repetitions: 2, warmup: 0, set: {workload.object: 1MB}}  # how checks run experiment files
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicbed.backend_registry import BACKEND_NAMES
from quicbed.errors import SpecError
from quicbed.labs.checking import CHECK_MARK, Check
from quicbed.paths import SHIPPED_ROOT
from quicbed.spec.pyfile import module_from_file
from quicbed.spec.yamlfile import load_yaml

LAB_FILE = "lab.yaml"
FIELDS = ("title", "summary", "order", "backend", "minutes", "files", "run")
#: "auto": netns, or ns3 where the links need netem and this kernel has none
LAB_BACKENDS = ("auto", *BACKEND_NAMES)
RUN_FIELDS = ("repetitions", "warmup", "set")


@dataclass(frozen=True)
class RunSizes:
    """How checks run a student's experiment file: few, small runs, so checking takes minutes."""

    repetitions: int = 1
    warmup: int = 0
    settings: dict[str, Any] = field(default_factory=dict)  # FIELD: VALUE, as ``quicbed run --set``

    def arguments(self) -> list[str]:
        import yaml

        argv = ["--repetitions", str(self.repetitions), "--warmup", str(self.warmup)]
        for name, value in self.settings.items():
            text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip()
            argv += ["--set", f"{name}={text}"]
        return argv


@dataclass(frozen=True)
class Lab:
    name: str
    folder: Path
    title: str
    summary: str
    backend: str
    minutes: int
    files: tuple[str, ...]
    run: RunSizes
    order: int = 100

    @property
    def handout(self) -> Path:
        return self.folder / "handout.md"

    @property
    def starter(self) -> Path:
        return self.folder / "starter"

    @property
    def solution(self) -> Path:
        return self.folder / "solution"

    def checks(self) -> list[Check]:
        """The checks of checks.py, in the order they are defined."""
        path = self.folder / "checks.py"
        module_name = f"quicbed_lab_checks_{re.sub(r'[^A-Za-z0-9_]', '_', self.name)}"
        try:
            module = module_from_file(path, module_name, register=True)
        except Exception as error:  # noqa: BLE001 - any fault in a teacher's file, reported as such
            raise SpecError(
                f"the checks do not load: {type(error).__name__}: {error}",
                source=str(path),
                fix="fix checks.py (python3 -m py_compile shows syntax errors)",
            ) from None
        if module is None:
            raise SpecError("cannot load the checks", source=str(path))
        found = [getattr(value, CHECK_MARK) for value in vars(module).values() if hasattr(value, CHECK_MARK)]
        if not found:
            raise SpecError("no checks", source=str(path), fix="decorate check functions with @check(...)")
        earlier: list[str] = []  # checks run in order: a check can need only those before it
        for item in found:
            for need in item.needs:
                if need not in earlier:
                    raise SpecError(
                        f"check {item.name} needs {need!r}, which is not a check defined before it",
                        source=str(path),
                        fix=f"use one of {', '.join(earlier) or '(none yet)'}, or move the check it needs above it",
                    )
            earlier.append(item.name)
        return found


def lab_folders() -> list[Path]:
    """Where labs are looked for: quicbed's own, then QUICBED_LABS's folders."""
    extra = [Path(part) for part in os.environ.get("QUICBED_LABS", "").split(os.pathsep) if part]
    return [SHIPPED_ROOT / "labs", *extra]


def _run_sizes(doc: Any, value: Any) -> RunSizes:
    if value is None:
        return RunSizes()
    if not isinstance(value, dict):
        raise doc.error("run must be a mapping", "run", fix="write run: {repetitions: 2, warmup: 0}")
    unknown = [key for key in value if key not in RUN_FIELDS]
    if unknown:
        raise doc.error(f"unknown field {unknown[0]!r}", f"run.{unknown[0]}", fix=f"use {', '.join(RUN_FIELDS)}")
    for key, low in (("repetitions", 1), ("warmup", 0)):
        if key in value and (not isinstance(value[key], int) or value[key] < low):
            raise doc.error(f"{key} must be a whole number >= {low}", f"run.{key}")
    settings = value.get("set") or {}
    if not isinstance(settings, dict):
        raise doc.error("set must map fields to values", "run.set", fix="write set: {workload.object: 1MB}")
    return RunSizes(value.get("repetitions", 1), value.get("warmup", 0), dict(settings))


def load_lab(folder: Path) -> Lab:
    """The lab in ``folder``, checked: fields, and every handed-in file in starter/ and solution/."""
    doc = load_yaml(folder / LAB_FILE)
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("a lab file is a mapping", "", fix=f"write the fields {', '.join(FIELDS)}")
    for key in data:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            raise doc.error(
                f"unknown field {key!r}",
                str(key),
                fix=f"did you mean {close[0]!r}?" if close else f"use {', '.join(FIELDS)}",
            )
    for key in ("title", "summary"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise doc.error(f"{key} is missing", key, fix=f"write {key}: <text>")
    backend = data.get("backend", "auto")
    if backend not in LAB_BACKENDS:
        raise doc.error(f"unknown backend {backend!r}", "backend", fix=f"use one of {', '.join(LAB_BACKENDS)}")
    for key, default in (("minutes", 30), ("order", 100)):
        if not isinstance(data.get(key, default), int) or data.get(key, default) < 1:
            raise doc.error(f"{key} must be a whole number >= 1", key)
    files = data.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise doc.error("files must list what the student hands in", "files", fix="write files: [topology.py]")
    lab = Lab(
        folder.name,
        folder,
        data["title"].strip(),
        " ".join(data["summary"].split()),
        backend,
        data.get("minutes", 30),
        tuple(files),
        _run_sizes(doc, data.get("run")),
        data.get("order", 100),
    )
    if not lab.handout.is_file():
        raise SpecError("the lab has no handout.md", source=str(folder), fix="write the task in handout.md")
    # a copy for students may leave solution/ out (docs/labs.md); one that is there is complete
    for part in (lab.starter, *([lab.solution] if lab.solution.exists() else [])):
        missing = [name for name in lab.files if not (part / name).is_file()]
        if missing:
            raise doc.error(
                f"{', '.join(missing)} missing from {part.name}/",
                "files",
                fix=f"add them to {part} or remove them from files",
            )
    if not (folder / "checks.py").is_file():
        raise SpecError("the lab has no checks.py", source=str(folder), fix="write its checks in checks.py")
    return lab


def all_labs() -> list[Lab]:
    """Every lab, by order then name; a lab name is taken by the first folder that has it."""
    found: dict[str, Lab] = {}
    for base in lab_folders():
        if not base.is_dir():
            continue
        for folder in sorted(base.iterdir()):
            if (folder / LAB_FILE).is_file() and folder.name not in found:
                found[folder.name] = load_lab(folder)
    return sorted(found.values(), key=lambda lab: (lab.order, lab.name))


def find_lab(name: str) -> Lab:
    for base in lab_folders():
        if (base / name / LAB_FILE).is_file():
            return load_lab(base / name)
    names = [
        folder.name
        for base in lab_folders()
        if base.is_dir()
        for folder in sorted(base.iterdir())
        if (folder / LAB_FILE).is_file()
    ]
    close = difflib.get_close_matches(name, names, n=1)
    raise SpecError(
        f"no lab named {name!r}", field="NAME", fix=f"did you mean {close[0]!r}?" if close else "see 'quicbed lab list'"
    )
