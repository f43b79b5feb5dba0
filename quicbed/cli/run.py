"""quicbed run: run an experiment file; in a guest kernel (the virtual-time kernel, or the
microVM) when this kernel lacks what it needs."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from quicbed.backend_registry import BACKEND_NAMES, BACKENDS
from quicbed.host.clock import CLOCKS, REAL, VIRTUAL, current_clock
from quicbed.host.signals import install_termination_handlers
from quicbed.cli.topo import parse_params
from quicbed.errors import QuicbedError, SpecError
from quicbed.runner.backend_choice import NO_NETEM, choose_backend, require_realisable
from quicbed.runner.capacity import beyond_real_time
from quicbed.runner.plan import (
    LARGE_PLAN,
    Plan,
    estimate,
    finished_runs,
    header,
    record_guest_wall_time,
    run_lines,
    summary_lines,
)
from quicbed.spec.experiment import Experiment, load_experiment
from quicbed.spec.shard import Shard


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run an experiment file",
        description="Run an experiment file (YAML) and write a results folder (see docs/results.md), then "
        f"its report. {NO_NETEM} Mininet-WiFi without mac80211_hwsim goes there too. The "
        "results land here all the same; the microVM emulates its CPU in software (~13x slower) "
        "unless KVM works. --dry-run says where the runs will happen.",
    )
    parser.add_argument("experiment", help="experiment file, e.g. experiments/quickstart.yaml")
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a topology parameter (repeatable)",
    )
    parser.add_argument("--out", type=Path, help="results folder (default results/NAME-DATE-TIME)")
    parser.add_argument(
        "--resume", action="store_true", help="continue the interrupted experiment in --out, skipping its finished runs"
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: make the runs that failed again (their first attempt moves to attempts/)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --resume: continue although the code, tools, topology script, traces or "
        "kernel differ from the folder's first session (metadata.json records the difference)",
    )
    parser.add_argument("--backend", choices=sorted(BACKEND_NAMES), help="override the file's backend")
    parser.add_argument("--repetitions", type=int, metavar="N", help="override the file's repetitions")
    parser.add_argument("--warmup", type=int, metavar="N", help="override the file's warm-up runs per cell")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        dest="fields",
        help="override any field of the file (repeatable; YAML values), e.g. --set "
        "workload.object=1MB --set 'matrix.transport=[quic, bquic]'",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"print the runs in order and exit (above {LARGE_PLAN} runs: a summary with the "
        "estimated time, unless --all)",
    )
    parser.add_argument("--all", action="store_true", help="with --dry-run: list every run, however many")
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="run only shard K of N (a deterministic split; whole cells per shard), e.g. on "
        "host K of N; 'quicbed merge' joins the shards' folders (docs/multi-host.md)",
    )
    parser.add_argument(
        "--shard-by",
        default="cell",
        metavar="cell|run|AXIS",
        help="cell (default: a cell's runs share one machine), a matrix axis (the cells with one "
        "value of it share a machine, e.g. --shard-by link.bottleneck.loss keeps the "
        "transports compared at one loss rate together) or run (balances shards when there "
        "are fewer cells than machines)",
    )
    parser.add_argument(
        "--yes", action="store_true", help=f"run an experiment (or shard) of more than {LARGE_PLAN} runs without asking"
    )
    parser.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    parser.add_argument(
        "--clock",
        choices=CLOCKS,
        default=None,
        help="real (default): the host's clock, which a WiFi cell must keep pace with; virtual: "
        "inside quicbed's User-Mode Linux kernel, whose clock waits for the computing, so "
        "no cell falls behind and no endpoint is CPU-bound (docs/clocks.md; 'quicbed uml "
        "setup' builds the kernel once). Runs this kernel cannot make (no netem, no "
        "mac80211_hwsim) go to that kernel when it is built, else to the microVM: "
        "--clock real keeps them in the microVM",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--vm", action="store_true", help="run in the microVM even if this kernel could")
    where.add_argument(
        "--no-vm",
        action="store_true",
        help="never move the runs into a guest kernel by itself (fail if this kernel lacks a feature; "
        "--clock virtual still runs them in the virtual-time kernel)",
    )
    parser.set_defaults(handler=handle)


def field_overrides(assignments: list[str]) -> dict[str, object]:
    """--set FIELD=VALUE options as overrides; values are read as YAML (numbers, lists, booleans)."""
    import yaml

    overrides: dict[str, object] = {}
    for assignment in assignments:
        field, equals, text = assignment.partition("=")
        if not equals or not field.strip():
            raise QuicbedError(f"--set {assignment!r}: expected FIELD=VALUE, e.g. --set workload.object=1MB")
        try:
            overrides[field.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise QuicbedError(f"--set {assignment!r}: the value is not valid YAML ({error})") from None
    return overrides


def _what_lines(plan: Plan, params: dict[str, str]) -> list[str]:
    """What a dry run adds about the runs themselves: the topology's parameters and the workload
    they run with (the axes the matrix varies named)."""
    from quicbed.runner.transfer import workload_of
    from quicbed.spec.loader import applied_parameters

    experiment = plan.experiment
    varied = [axis for axis in experiment.matrix if axis.startswith(("params.", "link.", "workload"))]
    first = {axis: values[0] for axis, values in experiment.matrix.items() if values}  # (no run is made)
    given = {
        **experiment.topology_params,
        **params,
        **{axis.partition(".")[2]: value for axis, value in first.items() if axis.startswith("params.")},
    }
    applied = applied_parameters(str(experiment.topology_script), given)
    workload = {key: value for key, value in workload_of(experiment, first).items() if value is not None}
    return [
        f"topology: {experiment.topology_script.name} with " + ", ".join(f"{k}={v!r}" for k, v in applied.items()),
        "workload: " + ", ".join(f"{k}={v}" for k, v in workload.items()),
        *([f"the matrix sets per cell: {', '.join(varied)} (above: with each axis's first value)"] if varied else []),
    ]


def _where_lines(backend: str, in_vm: bool, why: str, out: Path, args: argparse.Namespace) -> list[str]:
    """What a dry run adds to the plan: where the runs would happen, and their folder."""
    from quicbed.host import vm
    from quicbed.runner.folder import RESULTS, latest_records, read_results

    where = "on this host"
    if in_vm:
        usable, _ = vm.kvm_status()  # (the recorded test; never boots)
        speed = "KVM" if usable else "software emulation, ~13x slower CPU: for function, not speed"
        where = f"in the microVM {why} ({speed})"
    lines = [
        f"backend: {backend}, {where}",
        f"results folder: {out}" + ("" if args.out else " (the date and time of the start)"),
    ]
    if args.resume:
        finished = {r.run_id: r for r in latest_records(read_results(out / RESULTS))}
        redo = {"failed"} if args.retry_failed else set()
        kept = sum(1 for record in finished.values() if record.status not in redo)
        lines.append(f"--resume: {kept} finished run(s) in {out} would be skipped")
    return lines


def _needs_vm_reason(experiment: Experiment, backend: str, params: dict[str, str]) -> str | None:
    """Why this experiment cannot run on this kernel (None if it can)."""
    from quicbed.backends import kernel_problem
    from quicbed.spec.experiment import topology_for

    for cell in experiment.topology_cells():
        problem = kernel_problem(backend, topology_for(experiment, cell, params))
        if problem:
            return problem
    return None


def handle(args: argparse.Namespace) -> int:
    from quicbed.host import vm

    experiment_file = Path(args.experiment)
    overrides = {
        **field_overrides(args.fields),
        **{key: value for key in ("repetitions", "warmup") if (value := getattr(args, key)) is not None},
    }
    experiment = load_experiment(experiment_file, overrides)
    params = parse_params(args.param)
    if args.shard_by != "cell" and not args.shard:
        raise QuicbedError("--shard-by goes with --shard K/N (fix: add e.g. --shard 1/2)")
    shard = Shard.parse(args.shard, args.shard_by) if args.shard else None
    if shard is not None:
        shard.check(list(experiment.matrix))
    # the runs are counted before any topology is built: a plan too large is refused at once
    plan = Plan.of(experiment, args.backend or experiment.backend, shard)
    if plan.large_here and not args.yes and not args.dry_run:
        raise QuicbedError(
            f"{experiment_file}: {len(plan.runs)} runs, {estimate(plan)} (fix: add --yes to run "
            "them, or split them over machines with --shard K/N, see docs/multi-host.md)"
        )
    try:
        choice = choose_backend(experiment, args.backend, params, vm_requested=args.vm)
        require_realisable(experiment, choice.backend, params)
    except SpecError as error:
        raise error.located(f"{experiment_file} (topology.script {experiment.topology_script})") from None
    plan.backend = backend = choice.backend
    for note in [*experiment.notes, *([choice.note] if choice.note else [])]:
        print(f"note: {note}", flush=True)
    if args.resume and args.out is None:
        raise QuicbedError("--resume needs --out: the folder of the experiment to continue")
    for flag in ("retry_failed", "force"):
        if getattr(args, flag) and not args.resume:
            raise QuicbedError(f"--{flag.replace('_', '-')} goes with --resume (fix: add --resume --out FOLDER)")
    try:
        needs_vm = _needs_vm_reason(experiment, backend, params)
    except SpecError as error:
        raise error.located(f"{experiment_file} (topology.script {experiment.topology_script})") from None
    in_uml = _virtual_clock_wanted(args, experiment, experiment_file)  # netem and hwsim are built in there
    if needs_vm and not in_uml and _virtual_kernel_instead(args, experiment):
        print(
            f"note: {needs_vm}: the runs go to quicbed's virtual-time kernel, which has it built in (their "
            "records say clock: virtual, docs/clocks.md; --clock real runs them in the microVM instead, whose "
            "CPU is ~13x slower)",
            flush=True,
        )
        in_uml = True
    if needs_vm and args.no_vm and not vm.inside_vm() and not in_uml:
        raise QuicbedError(
            f"{experiment_file}: the {backend} backend cannot run here: {needs_vm}, and --no-vm "
            "forbids the microVM (fix: drop --no-vm" + (", or use --backend ns3)" if backend == "netns" else ")")
        )
    in_vm = (args.vm or bool(needs_vm)) and not vm.inside_vm() and not in_uml
    beyond = None if in_uml or current_clock() == VIRTUAL else beyond_real_time(experiment, backend, params)
    if beyond:
        print(f"warning: {beyond}", flush=True)
    out = args.out or Path("results") / f"{experiment.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.dry_run:
        print_plan(plan, every_run=args.all, clock=VIRTUAL if in_uml else REAL)
        where = _where_lines(backend, in_vm, "as asked" if args.vm else f"because {needs_vm}", out, args)
        if in_uml:
            where[0] = f"backend: {backend}, in virtual time (quicbed's User-Mode Linux kernel, docs/clocks.md)"
        for line in [*_what_lines(plan, params), *where]:
            print(line)
        return 0
    try:
        if in_uml:  # the backend chosen here: inside, netem would make netns the default
            status = _run_in_guest(args, experiment_file, out, virtual=True, backend=backend)
        elif in_vm:
            status = _run_in_guest(
                args,
                experiment_file,
                out,
                reason="as asked" if args.vm else f"because {needs_vm}",
                modules=list(BACKENDS[backend].vm_modules),
            )
        else:
            status = _run_here(args, plan, params, out, choice.note)
    except KeyboardInterrupt:
        print(
            f"\ninterrupted; finished runs are kept. Continue with: quicbed run {args.experiment} --resume --out {out}",
            file=sys.stderr,
        )
        return 130
    if status == 0 and not args.no_report and not vm.inside_vm():
        from quicbed.cli import main

        print(f"writing the report: quicbed report {out}", flush=True)
        if main(["report", str(out)]) != 0:
            print(f"the report failed; the results are complete (retry: quicbed report {out})", file=sys.stderr)
    return status


def _virtual_clock_wanted(args: argparse.Namespace, experiment: Experiment, experiment_file: Path) -> bool:
    """Whether this run must move into the virtual-time kernel (it refuses what virtual time
    cannot show, and what it cannot start)."""
    if (args.clock or experiment.clock) != VIRTUAL or current_clock() == VIRTUAL:
        return False
    asked = "--clock virtual" if args.clock else f"{experiment_file}: clock: virtual"
    subject = experiment.cpu_subject()
    if subject:
        raise QuicbedError(
            f"{experiment_file}: {subject} makes the client's CPU the subject of this experiment, and "
            "in virtual time computing takes no time, so every cell would look alike (fix: run it "
            "with --clock real)"
        )
    if args.vm:
        raise QuicbedError(
            f"{asked} runs in quicbed's User-Mode Linux kernel, which has netem and "
            "mac80211_hwsim built in: --vm has nothing to add (fix: drop --vm, or give --clock real)"
        )
    from quicbed.host import vm
    from quicbed.host.uml.build import cached_uml_kernel

    if vm.inside_vm():
        raise QuicbedError(f"{asked} cannot start inside the microVM (fix: run it on the host, or give --clock real)")
    if cached_uml_kernel() is None and not args.dry_run:
        raise QuicbedError(
            f"{asked} needs quicbed's User-Mode Linux kernel, which is not built (fix: "
            "'quicbed uml setup' as root, once: a few minutes; or --clock real"
            + (", where fewer stations keep pace)" if not args.clock else ")")
        )
    return True


def _virtual_kernel_instead(args: argparse.Namespace, experiment: Experiment) -> bool:
    """Whether runs this kernel cannot make go to the virtual-time kernel rather than the
    microVM: it has netem and mac80211_hwsim built in and its CPU costs no time, where the
    software-emulated microVM makes a WiFi cell's endpoints CPU-bound (measured in
    docs/clocks.md). Not when a clock or the microVM was asked for, nor for an experiment about
    the CPU."""
    from quicbed.host import vm
    from quicbed.host.uml.build import cached_uml_kernel

    if args.clock is not None or args.vm or args.no_vm or vm.inside_vm() or current_clock() == VIRTUAL:
        return False
    return experiment.cpu_subject() is None and cached_uml_kernel() is not None


def _run_in_guest(
    args: argparse.Namespace,
    experiment_file: Path,
    out: Path,
    *,
    virtual: bool = False,
    reason: str = "",
    modules: list[str] | None = None,
    backend: str | None = None,
) -> int:
    """The same command inside a guest kernel: the virtual-time kernel, or the microVM."""
    from quicbed.host import vm

    guest = "the virtual-time kernel" if virtual else "the microVM"
    hidden = vm.in_guest_tmpfs(out.resolve())
    if hidden and not virtual and not out.resolve().is_relative_to(Path.cwd().resolve()):  # the cwd is shared
        raise QuicbedError(
            f"results folder {out} is under {hidden}, which {guest} does not share with "
            "this host (fix: choose --out elsewhere, e.g. under results/)"
        )
    if virtual:
        print(
            "running in virtual time (quicbed's User-Mode Linux kernel; the host's clock is not the run's)",
            file=sys.stderr,
        )
    else:
        print(f"running in the microVM {reason} (without KVM its CPU is ~13x slower)", file=sys.stderr)
    argv = [
        sys.executable,
        "-m",
        "quicbed",
        "run",
        str(experiment_file),
        "--no-vm",
        "--no-report",
        "--out",
        str(out),
        *(f"-p{p}" for p in args.param),
        *(f"--set={f}" for f in args.fields),
    ]
    for flag in ("resume", "retry_failed", "force", "yes"):
        if getattr(args, flag):
            argv.append(f"--{flag.replace('_', '-')}")
    for option in ("repetitions", "warmup", "shard"):
        if getattr(args, option) is not None:
            argv += [f"--{option}", str(getattr(args, option))]
    if backend or args.backend:
        argv += ["--backend", str(backend or args.backend)]
    if args.shard:
        argv += ["--shard-by", args.shard_by]
    if virtual:
        from quicbed.host.uml.boot import run_in_uml, why_the_command_died

        argv += ["--clock", VIRTUAL]
        before, started = finished_runs(out), time.monotonic()
        result = run_in_uml(argv, cwd=Path.cwd(), stream=sys.stdout, timeout=None, share=[out.resolve()])
        # the guest's records hold its own clock: the wall time per run is known only here
        record_guest_wall_time(out, finished_runs(out) - before, time.monotonic() - started)
        if result.returncode > 128:  # killed inside: its own last words never came out
            print(
                f"quicbed: the run inside the virtual-time kernel was killed by signal {result.returncode - 128}: "
                f"{why_the_command_died(result)} (console log: {result.log}); finished runs are kept: continue "
                f"with --resume --out {out}",
                file=sys.stderr,
            )
        return result.returncode
    return vm.run_in_vm(argv, cwd=Path.cwd(), stream=sys.stdout, modules=modules or [], timeout=None).returncode


def _run_here(
    args: argparse.Namespace, plan: Plan, params: dict[str, str], out: Path, backend_note: str | None = None
) -> int:
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions

    experiment = plan.experiment
    _require_endpoints(experiment)
    install_termination_handlers()
    shard = f" (shard {plan.shard} of {len(plan.every_run)})" if plan.shard else ""
    print(
        f"running {experiment.name}: {len(plan.runs)} runs{shard}, backend {plan.backend}, results in {out}", flush=True
    )
    runner = ExperimentRunner(
        experiment,
        RunnerOptions(
            out=out,
            resume=args.resume,
            retry_failed=args.retry_failed,
            backend=plan.backend,
            params=params,
            command=sys.argv,
            shard=plan.shard,
            backend_note=backend_note,
            force=args.force,
        ),
    )
    summary = runner.run()
    skipped = f", {summary.skipped} done before" if summary.skipped else ""
    print(f"{summary.ok} ok, {summary.invalid} invalid, {summary.failed} failed{skipped}")
    print(f"results: {out.resolve()}")
    return 0 if summary.ok or summary.invalid or not (summary.total - summary.skipped) else 1


def _require_endpoints(experiment: Experiment) -> None:
    """Refuse before the results folder exists when a transport's endpoint is not installed
    (what its kind says this machine lacks for it)."""
    from quicbed.apps.transports import transport_kind

    lacking: dict[tuple[str, str], list[str]] = {}
    for transport in experiment.transports_used():
        missing = transport_kind(transport.kind).missing(transport)
        if missing is not None:
            lacking.setdefault((missing[0], missing[1]), []).append(transport.name)
    for (what, fix), names in lacking.items():
        raise QuicbedError(
            f"{experiment.source}: transport(s) {', '.join(sorted(names))} run {what} (fix: {fix}; "
            "or leave them out, e.g. --set 'matrix.transport=[quic, bquic, tcp]')"
        )


def print_plan(plan: Plan, every_run: bool = False, clock: str = REAL) -> None:
    if plan.large and not every_run:
        print("\n".join(summary_lines(plan, clock=clock)))
        return
    print(header(plan))
    print(f"time: {estimate(plan, clock=clock)}")
    if plan.shard is not None and not plan.runs:
        print(
            f"shard {plan.shard} has no runs: the experiment has {plan.experiment.cell_count()} cell(s) for "
            f"{plan.shard.count} shards (fix: fewer shards, or --shard-by run)"
        )
    for line in run_lines(plan):
        print(line)
