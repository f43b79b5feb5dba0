"""quicbed run: run an experiment file; in the microVM when this kernel lacks what it needs."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from quicbed.backends.base import install_termination_handlers
from quicbed.cli.topo import parse_params
from quicbed.errors import QuicbedError, SpecError
from quicbed.spec.experiment import expand, load_experiment
from quicbed.spec.loader import load_topology


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run an experiment file",
        description="Run an experiment file (YAML) and write a results folder. When the topology "
                    "needs a kernel feature this host lacks (netem for delay and loss), the run "
                    "happens in a microVM with a distribution kernel and its results land here all "
                    "the same; that VM emulates its CPU in software (~13x slower) unless KVM works.")
    parser.add_argument("experiment", help="experiment file, e.g. experiments/quickstart.yaml")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a topology parameter (repeatable)")
    parser.add_argument("--out", type=Path, help="results folder (default results/NAME-DATE-TIME)")
    parser.add_argument("--repetitions", type=int, metavar="N", help="override the file's repetitions")
    parser.add_argument("--warmup", type=int, metavar="N", help="override the file's warm-up runs per cell")
    parser.add_argument("--dry-run", action="store_true", help="print the runs in order and exit")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--vm", action="store_true", help="run in the microVM even if this kernel could")
    where.add_argument("--no-vm", action="store_true", help="never use the microVM (fail if the kernel lacks a feature)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from quicbed.host import vm
    from quicbed.host.capabilities import has_netem

    experiment_file = Path(args.experiment)
    overrides = {key: value for key in ("repetitions", "warmup") if (value := getattr(args, key)) is not None}
    experiment = load_experiment(experiment_file, overrides)
    if args.dry_run:
        print_runs(experiment)
        return 0
    if "matrix" in experiment.raw or "workload" in experiment.raw:
        raise QuicbedError(f"{experiment_file}: transfer experiments (workload, matrix) need the experiment "
                           "runner, which this version does not include yet; 'quicbed run --dry-run' shows "
                           "the runs it would make")
    params = {**experiment.topology_params, **parse_params(args.param)}
    try:
        topo = load_topology(str(experiment.topology_script), params)
    except SpecError as error:
        raise error.located(f"{experiment_file} (topology.script {experiment.topology_script})") from None
    out = args.out or Path("results") / f"{experiment.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    needs_vm = args.vm or (topo.needs_netem() and not has_netem() and not args.no_vm)
    if needs_vm and not vm.inside_vm():
        hidden = vm.in_guest_tmpfs(out.resolve())
        if hidden and not out.resolve().is_relative_to(Path.cwd().resolve()):  # the cwd is shared
            raise QuicbedError(f"results folder {out} is under {hidden}, which the microVM does not share with "
                               "this host (fix: choose --out elsewhere, e.g. under results/)")
        reason = "as asked" if args.vm else "because this kernel has no netem"
        print(f"running in the microVM {reason} (without KVM its CPU is ~13x slower)", file=sys.stderr)
        argv = [sys.executable, "-m", "quicbed", "run", str(experiment_file), "--no-vm", "--out", str(out),
                *(f"-p{p}" for p in args.param)]
        result = vm.run_in_vm(argv, cwd=Path.cwd(), stream=sys.stdout)
        return result.returncode
    from quicbed.runner.smoke import run_path_check

    install_termination_handlers()
    print(f"running {experiment.name}: {topo.description or topo.name}", flush=True)
    record = run_path_check(topo, experiment.client, experiment.server, out,
                            metadata={"experiment": {"file": str(experiment_file), **experiment.raw}})
    print(f"RTT {record['ping']['rtt_avg_ms']:.2f} ms, TCP upload {record['tcp_upload_mbit_s']:.2f} Mbit/s, "
          f"download {record['tcp_download_mbit_s']:.2f} Mbit/s")
    print(f"results: {out.resolve()}")
    return 0


def print_runs(experiment) -> None:
    runs = expand(experiment)
    cells = experiment.cells()
    print(f"{experiment.name}: {len(cells)} cell(s) x {experiment.repetitions} repetition(s)"
          f"{f' + {experiment.warmup} warm-up run(s) per cell' if experiment.warmup else ''} = {len(runs)} runs, "
          f"order {experiment.order}{f' (seed {experiment.seed})' if experiment.order == 'random' else ''}, "
          f"backend {experiment.backend}, timeout {experiment.timeout:g} s per run")
    for run in runs:
        print(f"{run.index + 1:>5}  {run.run_id}  {'warm-up  ' if run.warmup else ''}{run.label or '(single cell)'}")
