"""quicbed lab: teaching labs with automatic checks (docs/labs.md)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TextIO

from quicbed.errors import QuicbedError
from quicbed.labs.catalogue import Lab, all_labs, find_lab
from quicbed.labs.checking import CheckResult, ScoreSheet, run_checks
from quicbed.labs.session import CHECK_RESULTS

#: the score sheet each check writes into the student's folder
SCORE_FILE = "score.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="teaching labs: hand out, then check a student's work",
        description="A lab is a task with starter files and automatic checks. 'start' copies the handout and "
        "starter files into a folder; the student edits them; 'check' builds their network, runs "
        "their experiment at small sizes and prints each check as pass or fail, with what was "
        "expected, what was seen and a hint. Exit status: 0 every check passed, 1 one failed, "
        "3 none failed but some could not run on this machine.",
    )
    sub = parser.add_subparsers(dest="lab_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="the labs, with backend and time")
    listing.set_defaults(handler=handle_list)
    show = sub.add_parser("show", help="print a lab's handout and files")
    show.add_argument("name")
    show.set_defaults(handler=handle_show)
    start = sub.add_parser("start", help="copy a lab's handout and starter files into a folder")
    start.add_argument("name")
    start.add_argument("folder", type=Path, help="the student's folder (made if missing; existing files are kept)")
    start.add_argument(
        "--solution",
        action="store_true",
        help="copy the reference solution instead of the starter files (for teachers)",
    )
    start.set_defaults(handler=handle_start)
    check = sub.add_parser("check", help="check a student's folder")
    check.add_argument("name")
    check.add_argument("folder", type=Path, nargs="?", default=Path("."), help="the student's folder (default: .)")
    check.add_argument("--json", action="store_true", help="print the score sheet as JSON (progress goes to stderr)")
    where = check.add_mutually_exclusive_group()
    where.add_argument("--vm", action="store_true", help="check in the microVM even if this kernel could")
    where.add_argument("--no-vm", action="store_true", help="never use the microVM")
    check.set_defaults(handler=handle_check)


def handle_list(args: argparse.Namespace) -> int:
    labs = all_labs()
    width = max((len(lab.name) for lab in labs), default=4)
    print(f"{'lab':<{width}}  {'backend':<12}  {'time':>6}  title")
    for lab in labs:
        print(f"{lab.name:<{width}}  {lab.backend:<12}  {lab.minutes:>3} min  {lab.title}")
    print("\nquicbed lab show NAME: the task; quicbed lab start NAME DIR: a student's copy")
    return 0


def handle_show(args: argparse.Namespace) -> int:
    lab = find_lab(args.name)
    print(f"{lab.title} ({lab.name}, backend {lab.backend}, about {lab.minutes} min)")
    print(f"{lab.summary}\nhanded in: {', '.join(lab.files)}   checks: {len(lab.checks())}\n")
    print(lab.handout.read_text())
    return 0


def handle_start(args: argparse.Namespace) -> int:
    lab = find_lab(args.name)
    source = lab.solution if args.solution else lab.starter
    if not source.is_dir():
        raise QuicbedError(
            f"lab {lab.name} has no reference solution in this installation ({source} is absent: "
            "teachers leave it out of students' copies, docs/labs.md)"
        )
    copies = [(lab.handout, args.folder / "handout.md")]
    copies += [
        (path, args.folder / path.relative_to(source))
        for path in sorted(source.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]
    existing = [str(target) for _, target in copies if target.exists()]
    if existing:
        raise QuicbedError(
            f"{args.folder} already has {', '.join(existing)}; nothing was copied "
            "(fix: choose a new folder, or move those files away)"
        )
    made: list[Path] = []  # what this command created, removed again if a copy fails
    try:
        for path, target in copies:
            missing = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
            for folder in reversed(missing):
                folder.mkdir()
                made.append(folder)
            made.append(target)  # (before the copy: a copy cut short leaves part of a file)
            shutil.copy2(path, target)
    except OSError:
        for created in reversed(made):
            if created.is_dir():
                created.rmdir()
            else:
                created.unlink(missing_ok=True)
        raise  # quicbed's main says it in one line, with the path and a fix
    what = "reference solution" if args.solution else "starter files"
    print(f"{lab.title}: handout and {what} in {args.folder}/ ({', '.join(t.name for _, t in copies)})")
    print(
        f"next: read {args.folder / 'handout.md'}, edit {', '.join(lab.files)}, then "
        f"quicbed lab check {lab.name} {args.folder}"
    )
    return 0


def _needs_vm(lab: Lab) -> str | None:
    """What this kernel lacks for the lab's backend whatever its topology (the topology's own
    needs are told by the check that builds it)."""
    from quicbed.backends import kernel_problem

    return None if lab.backend == "auto" else kernel_problem(lab.backend, None)


def _print_result(number: int, total: int, result: CheckResult, out: TextIO) -> None:
    label = {"pass": "pass", "fail": "FAIL", "skip": "skip"}[result.status]
    print(f"[{number}/{total}] {label}  {result.title}", file=out, flush=True)
    if result.status != "pass":
        if result.expected:
            print(f"        expected: {result.expected}", file=out)
        print(f"        seen:     {result.seen}", file=out)
        if result.hint:
            print(f"        hint:     {result.hint}", file=out)


def _summary(sheet: ScoreSheet) -> str:
    parts = [f"{sheet.count('pass')} passed", f"{sheet.count('fail')} failed"]
    if sheet.count("skip"):
        parts.append(f"{sheet.count('skip')} not checked on this machine")
    return f"{sheet.title}: score {sheet.score}/{sheet.total} ({', '.join(parts)}) in {sheet.seconds:.0f} s"


def _write_sheet(sheet: ScoreSheet, folder: Path) -> Path:
    from quicbed.runner.folder import write_json_atomic

    target = folder / CHECK_RESULTS / SCORE_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target, sheet.to_dict())
    return target


def _check_here(lab: Lab, folder: Path, out: TextIO) -> ScoreSheet:
    from quicbed.host.signals import install_termination_handlers
    from quicbed.labs.session import CheckSession

    install_termination_handlers()
    checks = lab.checks()
    session = CheckSession(lab, folder, log=lambda line: print(f"        {line}", file=out, flush=True))
    sheet = ScoreSheet(lab.name, lab.title, str(folder.resolve()), lab.backend)

    def progress(number: int, total: int, result: CheckResult | None, item: object) -> None:
        if result is not None:  # a long check shows its steps through the session's log meanwhile
            _print_result(number, total, result, out)

    try:
        run_checks(checks, session, sheet, progress)
    finally:
        session.close()
    sheet.backend = ", ".join(session.backends_used) or lab.backend
    return sheet


def _check_in_guest(lab: Lab, folder: Path, reason: str, out: TextIO, microvm: bool) -> ScoreSheet:
    """The same check in a guest kernel, in the student's folder (the guest shares it, wherever
    it is); the score sheet comes back through that folder. The virtual-time kernel where it is
    built (mac80211_hwsim built in, minutes faster), else or with --vm the microVM."""
    from quicbed.backend_registry import BACKENDS
    from quicbed.host import vm
    from quicbed.host.uml.boot import run_in_uml
    from quicbed.host.uml.build import cached_uml_kernel

    argv = [sys.executable, "-m", "quicbed", "lab", "check", lab.name, str(folder.resolve()), "--no-vm"]
    if not microvm and cached_uml_kernel() is not None:
        guest = "quicbed's virtual-time kernel"
        print(f"checking in {guest} {reason}", file=out, flush=True)
        result = run_in_uml(argv, cwd=folder.resolve(), stream=out, timeout=None, share=[folder.resolve()])
    else:
        guest = "the microVM"
        print(f"checking in {guest} {reason} (without KVM its CPU is ~13x slower)", file=out, flush=True)
        modules = list(BACKENDS[lab.backend].vm_modules) if lab.backend in BACKENDS else []
        result = vm.run_in_vm(argv, cwd=folder.resolve(), stream=out, modules=modules, timeout=None)
    target = folder / CHECK_RESULTS / SCORE_FILE
    if not target.exists():
        raise QuicbedError(f"the check in {guest} ended (exit {result.returncode}) without a score sheet")
    data = json.loads(target.read_text())
    sheet = ScoreSheet(
        data["lab"],
        data["title"],
        data["folder"],
        data["backend"],
        started_at=data["started_at"],
        seconds=data["seconds"],
    )
    sheet.results = [CheckResult(**{k: v for k, v in item.items() if k != "score"}) for item in data["checks"]]
    return sheet


def _unchecked(lab: Lab, folder: Path, why: str) -> ScoreSheet:
    """Every check skipped, saying why (the machine, not the student, is missing something)."""
    sheet = ScoreSheet(lab.name, lab.title, str(folder.resolve()), lab.backend)
    sheet.results = [
        CheckResult(item.name, item.title, "skip", f"not checked here: {why}", item.expected, "", item.points, 0.0)
        for item in lab.checks()
    ]
    return sheet


def handle_check(args: argparse.Namespace) -> int:
    from quicbed.errors import MissingDependency, VmError
    from quicbed.host import vm

    lab = find_lab(args.name)
    folder: Path = args.folder
    if not folder.is_dir():
        raise QuicbedError(f"{folder} is not a folder (fix: quicbed lab start {lab.name} {folder})")
    missing = [name for name in lab.files if not (folder / name).is_file()]
    if len(missing) == len(lab.files):
        raise QuicbedError(
            f"{folder} has none of this lab's files ({', '.join(lab.files)}) (fix: check the "
            f"folder you started with 'quicbed lab start {lab.name} DIR', or start one)"
        )
    out = sys.stderr if args.json else sys.stdout
    print(f"checking {folder} against lab {lab.name} ({lab.title})", file=out, flush=True)
    reason = "as asked" if args.vm else _needs_vm(lab)
    in_vm = bool(reason) and not args.no_vm and not vm.inside_vm()
    try:
        if in_vm:
            try:
                sheet = _check_in_guest(
                    lab, folder, f"because {reason}" if reason != "as asked" else reason, out, microvm=args.vm
                )
            except (MissingDependency, VmError) as error:
                in_vm = False
                sheet = _unchecked(lab, folder, f"{reason}, and no guest kernel can run ({error})")
                for number, result in enumerate(sheet.results, 1):
                    _print_result(number, len(sheet.results), result, out)
        else:
            sheet = _check_here(lab, folder, out)
    except KeyboardInterrupt:
        print("interrupted: everything the check started has been stopped", file=sys.stderr)
        return 130
    target = _write_sheet(sheet, folder)
    if not in_vm:  # the microVM's check printed its results and summary already
        print(_summary(sheet), file=out)
    print(f"score sheet: {target}", file=out)
    if args.json:
        print(json.dumps(sheet.to_dict(), indent=1))
    return sheet.exit_status
