"""quicbed uml: the User-Mode Linux kernel that runs experiments in virtual time."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from quicbed.cli.vm import command_after_dashes, parse_env
from quicbed.errors import MissingDependency, QuicbedError
from quicbed.host import kernel as kernel_mod
from quicbed.host import vm
from quicbed.host.uml import boot, build

DESCRIPTION = """\
quicbed's User-Mode Linux (UML) kernel runs an experiment in virtual time: with
time-travel=inf-cpu its clock advances only while every process in it waits, so computing
takes no time. A WiFi cell of any size keeps pace with its own clock, the machine's other
work changes nothing, and endpoints are never CPU-bound. It is built once from Debian's
linux-source-6.12 (a few minutes; ~40 MB in QUICBED_UML_DIR, default /var/lib/quicbed/uml)
with netem, mac80211_hwsim and openvswitch built in, and sees the host's files.

  quicbed uml setup                       build it (once) and test one boot
  quicbed run FILE --clock virtual        an experiment inside it (docs/clocks.md)
  quicbed uml exec -- CMD                 any command inside it
"""
#: the test boot: 5 s of the guest's sleep, 100 sleeps of 1 ms (timers finer than the 10 ms
#: tick), and netem, read back with the guest's clock
BOOT_TEST = (
    "import json, subprocess, time; t = time.monotonic(); time.sleep(5); "
    "slept = time.monotonic() - t; t = time.monotonic(); [time.sleep(0.001) for _ in range(100)]; "
    "timer = (time.monotonic() - t) * 10; "
    "netem = subprocess.run(['tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '1ms']).returncode; "
    "print(json.dumps({'guest_seconds': round(slept, 3), 'timer_ms': round(timer, 3), 'netem': netem == 0, "
    "'cmdline': open('/proc/cmdline').read().strip()}))"
)
BOOT_RECORD = "boot.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "uml",
        help="the User-Mode Linux kernel for virtual time (--clock virtual)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="uml_command", metavar="UML_COMMAND")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])

    setup = commands.add_parser(
        "setup",
        help="build the kernel (once) and boot it once",
        description="Build the virtual-time kernel if this recipe has not been built (installs "
        f"{build.SOURCE_PACKAGE} and the compilers with apt-get when missing; a few minutes), then "
        "boot it once: 5 s of sleep inside must take 5 s of its clock and far less of the host's, "
        "and netem must work. Needs root. Safe to run again.",
    )
    setup.add_argument("--rebuild", action="store_true", help="build again even if this recipe was built")
    setup.add_argument("--jobs", type=int, default=None, metavar="N", help="parallel compile jobs (default: all cores)")
    setup.add_argument("--no-boot-test", action="store_true", help="skip the test boot")
    setup.set_defaults(handler=handle_setup)

    status = commands.add_parser(
        "status",
        help="show the kernel and its last test boot",
        description="Exit status 0 if the virtual-time kernel is built.",
    )
    status.set_defaults(handler=handle_status)

    execute = commands.add_parser(
        "exec",
        help="run a command inside the kernel (in the current directory)",
        usage="quicbed uml exec [options] -- CMD [ARGS...]",
        description="Boot the kernel, run CMD as root in the current directory, print its output and exit "
        "with its exit status. Virtual time unless --real-time. The guest's /tmp, /run, /var/tmp "
        "and /var/log are empty and private.\n\nexamples:\n"
        "  quicbed uml exec -- python3 -c 'import time; time.sleep(60)'   (a minute of its clock)\n"
        "  quicbed uml exec -- quicbed doctor",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    execute.add_argument("--memory", default=boot.DEFAULT_MEMORY, help="guest memory (default %(default)s)")
    execute.add_argument(
        "--timeout",
        type=float,
        default=boot.DEFAULT_TIMEOUT,
        metavar="S",
        help="stop the kernel after S seconds of the host's clock (default %(default).0f)",
    )
    execute.add_argument("--real-time", action="store_true", help="keep the host's clock (no time travel)")
    execute.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="set a variable for CMD (repeatable)"
    )
    execute.add_argument("--verbose", "-v", action="store_true", help="also show the kernel's console on stderr")
    execute.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    execute.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    execute.set_defaults(handler=handle_exec)


def _say(message: str) -> None:
    print(message, flush=True)


def boot_test(kernel: build.UmlKernel) -> dict[str, object]:
    """Boot once: the guest sleeps 5 s of its clock; record both clocks (ROOT/boot.json)."""
    started = time.monotonic()
    result = boot.run_in_uml([sys.executable, "-I", "-c", BOOT_TEST], cwd="/", timeout=600, kernel=kernel)
    wall = time.monotonic() - started
    lines = [line for line in result.output.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise QuicbedError(
            f"the test boot of {kernel.binary} failed (exit {result.returncode}): "
            f"{result.output.strip()[-500:]} (console log: {result.log})"
        )
    record = {**json.loads(lines[-1]), "host_seconds": round(wall, 1), "tested": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (kernel.root / BOOT_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    if not record["netem"]:
        raise QuicbedError(f"netem failed inside {kernel.binary} (console log: {result.log})")
    if boot.TIME_TRAVEL not in str(record["cmdline"]) or not 4.99 <= float(record["guest_seconds"]) <= 5.01:
        raise QuicbedError(
            f"time travel did not work in {kernel.binary}: 5 s of sleep took "
            f"{record['guest_seconds']} s of its clock (console log: {result.log})"
        )
    if float(record["timer_ms"]) > 1.5:
        raise QuicbedError(
            f"a 1 ms sleep took {record['timer_ms']} ms of the clock of {kernel.binary}: its timers "
            "are coarse (CONFIG_HIGH_RES_TIMERS off?), and every simulated wake-up would be late"
        )
    return record


def handle_setup(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise MissingDependency("quicbed uml setup needs root (fix: sudo quicbed uml setup)")
    if vm.inside_vm():
        raise QuicbedError("this is already a guest kernel; run 'quicbed uml setup' on the host")
    kernel = build.ensure_uml_kernel(kernel_mod.stderr_progress, jobs=args.jobs, rebuild=args.rebuild)
    _say(f"kernel   {kernel.describe()}: {kernel.binary}")
    if not args.no_boot_test:
        _say("test boot: 5 s of sleep and a netem qdisc inside (--no-boot-test skips it)")
        record = boot_test(kernel)
        _say(f"test boot: ok; 5 s of its clock took {record['host_seconds']} s of the host's, boot included")
    _say("ready: 'quicbed run FILE --clock virtual' runs an experiment in virtual time")
    return 0


def handle_status(args: argparse.Namespace) -> int:
    kernel = build.cached_uml_kernel()
    if kernel is None:
        _say(f"missing  the virtual-time kernel in {build.uml_dir()} (fix: quicbed uml setup, as root)")
        return 1
    _say(f"kernel   {kernel.describe()}: {kernel.binary}")
    info = kernel.info
    if info:
        _say(
            f"built    {info.get('built')} in {float(info.get('build_seconds', 0)) / 60:.1f} min "
            f"(recipe {info.get('digest')})"
        )
    try:
        record = json.loads((kernel.root / BOOT_RECORD).read_text())
        _say(f"boot     {record['tested']}: 5 s of its clock in {record['host_seconds']} s of the host's")
    except (OSError, ValueError, KeyError):
        _say("boot     not tested (quicbed uml setup tests it)")
    return 0


def handle_exec(args: argparse.Namespace) -> int:
    command = command_after_dashes(args.command, "quicbed uml exec [options] -- CMD [ARGS...]")
    if os.geteuid() != 0:
        raise MissingDependency("quicbed uml exec needs root (fix: sudo quicbed uml exec -- ...)")
    progress = None if args.quiet else kernel_mod.stderr_progress
    result = boot.run_in_uml(
        command,
        cwd=os.getcwd(),
        env=parse_env(args.env),
        memory=args.memory,
        timeout=args.timeout,
        time_travel=not args.real_time,
        verbose=args.verbose,
        stream=sys.stdout,
        progress=progress,
    )
    return result.returncode
