"""quicbed vm: the microVM for hosts whose kernel lacks netem or mac80211_hwsim."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from quicbed.errors import MissingDependency, QuicbedError
from quicbed.host import kernel as kernel_mod
from quicbed.host import vm

SLOWDOWN = (
    "software emulation: the guest CPU is ~13x slower than the host. Use the VM for "
    "function (netem, mac80211_hwsim, the 802.11 stack), not for CPU-bound speed figures"
)

DESCRIPTION = """\
Some hosts (containers, cloud VMs, custom kernels) have no sch_netem or mac80211_hwsim
and cannot load modules. quicbed then boots the distribution's own kernel in a small
QEMU VM with virtme-ng: the guest shares the host's filesystem (same Python, same
quicbed, same working directory) and runs as root with every module available.

Costs: the kernel cache takes ~400 MB (/var/lib/quicbed/kernel, QUICBED_KERNEL_DIR);
a boot takes 10-30 s (more on a busy host). Without working KVM (the usual case
inside cloud VMs) the CPU is emulated in software, ~13x slower than the host: use the
VM to test function, not to measure speed. See docs/microvm.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "vm",
        help="microVM with the distribution kernel (netem, mac80211_hwsim)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="vm_command", metavar="VM_COMMAND")
    parser.set_defaults(handler=lambda args: _usage(parser))

    setup = commands.add_parser(
        "setup",
        help="fetch the kernel, check vng and QEMU, test KVM once, boot once",
        description="Prepare the microVM; safe to run again (what is there is kept). Fetches the "
        "distribution kernel with 'apt-get download' (no installation; ~100 MB download, "
        "~400 MB unpacked in QUICBED_KERNEL_DIR, default /var/lib/quicbed/kernel), checks "
        "that virtme-ng (vng) and QEMU are installed, tries one short boot with KVM (its "
        "result is remembered; without KVM the VM's CPU is ~13x slower) and boots the VM "
        "once to check that netem works inside. Needs root.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    setup.add_argument(
        "--update",
        action="store_true",
        help="fetch the distribution's current kernel if it is newer than the cached one",
    )
    setup.add_argument(
        "--deb",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="install the kernel from these .deb files instead of downloading (offline "
        "hosts; on Ubuntu give linux-image, linux-modules and linux-modules-extra)",
    )
    setup.add_argument("--retest-kvm", action="store_true", help="test KVM again even if it was tested")
    setup.add_argument("--no-boot-test", action="store_true", help="skip the final test boot (saves 10-60 s)")
    setup.set_defaults(handler=handle_setup)

    status = commands.add_parser(
        "status",
        help="show what the microVM would use and which VMs are running",
        description="Show vng and QEMU, the cached kernel and its modules, the KVM test result and "
        "running quicbed microVMs. Exit status 0 if the microVM is usable.",
    )
    status.set_defaults(handler=handle_status)

    execute = commands.add_parser(
        "exec",
        help="run a command inside the microVM (in the current directory)",
        usage="quicbed vm exec [options] -- CMD [ARGS...]",
        description="Boot the microVM, run CMD as root in the current directory (the guest sees the "
        "host's files) with sch_netem loaded, print its output and exit with its exit "
        "status. The guest's /tmp, /run, /var/tmp, /var/log and /var/cache are empty and "
        "private, so keep inputs and outputs elsewhere (e.g. in your project). "
        f"Without KVM this is {SLOWDOWN}.\n\n"
        "examples:\n"
        "  quicbed vm exec -- tc qdisc add dev lo root netem delay 10ms\n"
        "  quicbed vm exec --module mac80211_hwsim -- iw dev\n"
        "  quicbed vm exec --timeout 3600 -- quicbed run experiments/quickstart.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    execute.add_argument("--memory", default=vm.DEFAULT_MEMORY, help="guest memory (default %(default)s)")
    execute.add_argument(
        "--cpus", type=int, default=min(vm.DEFAULT_CPUS, os.cpu_count() or 1), help="guest CPUs (default %(default)s)"
    )
    execute.add_argument(
        "--timeout",
        type=float,
        default=vm.DEFAULT_TIMEOUT,
        metavar="S",
        help="kill the VM after S seconds, boot included (default %(default).0f)",
    )
    execute.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="NAME",
        help="also load this kernel module, e.g. mac80211_hwsim or 'mac80211_hwsim "
        "radios=0' (repeatable; sch_netem is always loaded)",
    )
    execute.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable for CMD (repeatable; the guest inherits no environment "
        "except PATH, PYTHONPATH, HOME and QUICBED_*)",
    )
    execute.add_argument(
        "--verbose", "-v", action="store_true", help="also show the VM console (kernel and init messages) on stderr"
    )
    execute.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    execute.add_argument(
        "--log", type=Path, metavar="FILE", help="write the VM console log here (default: in the job directory)"
    )
    execute.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    execute.set_defaults(handler=handle_exec)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _say(message: str) -> None:
    print(message, flush=True)


def _version(argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", result.stdout + result.stderr)
    return match.group(1) if match else "version unknown"


def _tools() -> tuple[list[str], list[str]]:
    """(lines describing vng and QEMU, what is missing with how to get it)."""
    found, missing = [], []
    vng = vm.find_vng()
    if vng:
        found.append(f"virtme-ng {_version([vng, '--version'])} ({vng})")
    else:
        missing.append(f"virtme-ng: {sys.executable} -m pip install virtme-ng")
    qemu = vm.find_qemu()
    if qemu:
        found.append(f"QEMU {_version([qemu, '--version'])} ({qemu})")
    else:
        missing.append(f"{vm.qemu_binary_name()}: apt-get install {vm.qemu_package()}")
    busybox = vm.find_static_busybox()
    if busybox:
        found.append(f"static busybox ({busybox})")
    else:
        missing.append("a statically linked busybox: apt-get install busybox-static")
    return found, missing


def _modules_line(image: kernel_mod.KernelImage) -> str:
    parts = [
        f"{name} {'yes' if image.has_module(name) else 'NO'}" for name in ("sch_netem", "mac80211_hwsim", "openvswitch")
    ]
    return "modules: " + ", ".join(parts)


def _cpu_line(kvm: bool, detail: str) -> str:
    if kvm:
        return f"CPU: KVM ({detail}); near-native speed"
    return f"CPU: {SLOWDOWN} (KVM: {detail})"


def handle_setup(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise MissingDependency("quicbed vm setup needs root (fix: sudo quicbed vm setup)")
    if vm.inside_vm():
        raise QuicbedError("this is already the microVM; run 'quicbed vm setup' on the host")
    found, missing = _tools()
    for line in found:
        _say(f"found {line}")
    started = time.monotonic()
    image = kernel_mod.ensure_kernel(kernel_mod.stderr_progress, update=args.update, debs=args.deb)
    _say(f"kernel {image.version} in {image.root} ({time.monotonic() - started:.0f} s)")
    _say(_modules_line(image))
    if not image.has_module("sch_netem"):
        raise QuicbedError(f"the kernel {image.version} has no sch_netem; it cannot replace the host kernel")
    if missing:
        raise MissingDependency(
            "the microVM also needs: " + "; ".join(missing) + ". Install them and run "
            "'quicbed vm setup' again (the kernel is kept)"
        )
    kvm, detail = vm.detect_kvm(image, force=args.retest_kvm, progress=_say)
    _say(_cpu_line(kvm, detail))
    if not args.no_boot_test:
        _say("test boot: loading sch_netem and adding a netem qdisc inside the VM (10-60 s; --no-boot-test skips it)")
        result = vm.run_in_vm(
            ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            cwd="/",
            timeout=600,
            progress=None,
            image=image,
        )
        if result.returncode != 0:
            raise QuicbedError(
                f"the test boot ran, but netem failed inside it (exit {result.returncode}): "
                f"{result.output.strip()[-500:]} (console log: {result.log})"
            )
        _say(f"test boot: ok in {result.seconds:.0f} s")
    _say(
        "the microVM is ready: 'quicbed vm exec -- CMD' runs CMD in it; tests marked needs_kernel use it automatically"
    )
    return 0


def _running_vms() -> list[str]:
    """Command lines of running vng processes that run a quicbed job."""
    marker = str(vm.vm_dir())
    running = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(part.decode("utf-8", "replace") for part in argv if part)
        if "vng" in text and "--exec" in text and marker in text and "qemu" not in argv[0].decode("utf-8", "replace"):
            job = re.search(re.escape(marker) + r"/([^/ ]+)/job\.sh", text)
            running.append(f"pid {entry.name}: job {job.group(1) if job else '?'}")
    return running


def handle_status(args: argparse.Namespace) -> int:
    found, missing = _tools()
    for line in found:
        _say(f"found    {line}")
    for line in missing:
        _say(f"missing  {line}")
    image = kernel_mod.cached_kernel()
    if image:
        _say(f"kernel   {image.version} in {image.root}")
        _say(f"         {_modules_line(image)}")
        kvm, detail = vm.kvm_status(image)
        _say(f"         {_cpu_line(kvm, detail)}")
    else:
        _, why = kernel_mod.fetchable()
        _say(f"missing  kernel in {kernel_mod.kernel_dir()}: run 'quicbed vm setup' ({why})")
    _say(f"jobs     {vm.vm_dir()} (each run keeps job.sh, output, exit-code, console.log)")
    running = _running_vms()
    _say(f"running  {len(running)} microVM(s)" + "".join(f"\n         {line}" for line in running))
    usable, reason = vm.vm_available(allow_fetch=False)
    _say(("usable   " if usable else "NOT usable: ") + reason)
    return 0 if usable else 1


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise QuicbedError(f"--env {pair!r}: expected NAME=VALUE")
        env[name] = value
    return env


def command_after_dashes(remainder: list[str], usage: str) -> list[str]:
    """The command an ``exec`` subcommand runs: what follows ``--`` (an error naming the usage if none)."""
    command = remainder[1:] if remainder[:1] == ["--"] else list(remainder)
    if not command:
        raise QuicbedError(f"no command given (usage: {usage})")
    return command


def handle_exec(args: argparse.Namespace) -> int:
    command = command_after_dashes(args.command, "quicbed vm exec [options] -- CMD [ARGS...]")
    if args.cpus < 1:
        raise QuicbedError("--cpus must be at least 1")
    if vm.inside_vm():
        raise QuicbedError("already inside the microVM: run the command directly")
    if os.geteuid() != 0:
        raise MissingDependency("quicbed vm exec needs root (fix: sudo quicbed vm exec -- ...)")
    if shutil.which(command[0]) is None and "/" not in command[0]:
        # The guest's PATH is this one plus the Python's directory; warn early on typos.
        print(
            f"quicbed: warning: {command[0]} is not on this host's PATH; the guest may not find it either",
            file=sys.stderr,
        )
    progress = None if args.quiet else kernel_mod.stderr_progress
    result = vm.run_in_vm(
        command,
        cwd=os.getcwd(),
        env=parse_env(args.env),
        memory=args.memory,
        cpus=args.cpus,
        timeout=args.timeout,
        log_path=args.log,
        modules=args.module,
        verbose=args.verbose,
        stream=sys.stdout,
        progress=progress,
    )
    return result.returncode
