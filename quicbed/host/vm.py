"""Run a command inside a microVM that boots the distribution kernel (virtme-ng + QEMU).

Hosts whose kernel lacks sch_netem or mac80211_hwsim (or cannot load modules) can still
run quicbed: :func:`run_in_vm` boots the kernel from :mod:`quicbed.host.kernel` with
``vng``; the guest sees the host's filesystem (read-write, 9p), so the same Python, the
same quicbed and the same working directory are there. Only /tmp, /run, /var/tmp,
/var/log, /var/cache, /var/lib/apt, /var/lib/private and /usr/lib/modules are fresh
tmpfs in the guest, so job directories live in /var/lib/quicbed/vm/<job-id>/::

    job.sh        the script the guest runs (modules, environment, ulimit, cd, command)
    reaper.py     runs the command as a child subreaper (orphans are reaped)
    output        the command's stdout and stderr
    exit-code     the command's exit status, written by the guest when it is done
    console.log   the VM console (kernel messages, init), unless log_path says otherwise

vng's own exit status is meaningless (255 whatever the command did), hence the file.
Without KVM (the default; KVM is used only once a test boot with it has succeeded, see
:func:`detect_kvm`) QEMU emulates the CPU in software: ~13x slower. Use the VM for
function (netem, hwsim, 802.11 stack), not for CPU-bound speed measurements.

While the VM runs, its processes (vng, qemu, virtiofsd) are listed in an ownership
record (:mod:`quicbed.host.ownership`), so ``quicbed clean`` kills them if quicbed
itself was killed; Ctrl-C and timeouts kill the VM and remove the record.

This module finds what the VM needs, builds vng's command line, tests KVM and runs the
job; :mod:`quicbed.host.vm_job` writes what the guest runs and reads its exit status,
:mod:`quicbed.host.vm_processes` owns the VM's processes and copies its console.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, TextIO

from quicbed.errors import MissingDependency, VmError, VmStalled, VmTimeout
from quicbed.host import kernel as kernel_mod
from quicbed.host import ownership
from quicbed.host.kernel import KernelImage
from quicbed.host.vm_job import (
    IN_VM_VARIABLE,
    REAPER,
    guest_environment,
    module_list,
    read_exit_code,
    render_job_script,
    source_root,
)
from quicbed.host.vm_processes import Supervised, supervise

DEFAULT_VM_DIR = "/var/lib/quicbed/vm"
DEFAULT_MEMORY = "2G"
DEFAULT_CPUS = 2
DEFAULT_TIMEOUT = 1800.0
KVM_PROBE_TIMEOUT = 60.0
KVM_RESULT = "kvm.json"
#: paths that are a fresh, empty tmpfs inside the guest (not shared with the host)
GUEST_TMPFS = (
    "/tmp",
    "/run",
    "/var/tmp",
    "/var/log",
    "/var/cache",
    "/var/lib/apt",
    "/var/lib/private",
    "/usr/lib/modules",
)
KEEP_JOBS = 20

Progress = Callable[[str], None]


@dataclass
class VmResult:
    returncode: int
    #: the command's stdout and stderr (interleaved)
    output: str
    #: the VM console log
    log: Path
    job_dir: Path
    kvm: bool = False
    seconds: float = 0.0


# --- locating things -------------------------------------------------------------------


def vm_dir() -> Path:
    """Where job directories go (``QUICBED_VM_DIR``, default /var/lib/quicbed/vm)."""
    return Path(os.environ.get("QUICBED_VM_DIR") or DEFAULT_VM_DIR)


def find_vng() -> str | None:
    """The ``vng`` command: next to this Python first (pip installs it there), then PATH."""
    beside = Path(sys.executable).parent / "vng"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("vng")


#: the names virtme-ng looks for, in its order; it needs a static one for its initramfs
BUSYBOX_NAMES = ("busybox-static", "busybox.static", "busybox")
BUSYBOX_DIRS = ("/usr/local/bin", "/usr/local/sbin", "/usr/bin", "/usr/sbin", "/bin", "/sbin")


def is_static_elf(path: Path | str) -> bool:
    """Whether ``path`` is an ELF executable without a program interpreter (statically linked)."""
    try:
        with open(path, "rb") as binary:
            header = binary.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only
                return False
            order: Literal["little", "big"] = "little" if header[5] == 1 else "big"
            phoff = int.from_bytes(header[32:40], order)
            phentsize = int.from_bytes(header[54:56], order)
            phnum = int.from_bytes(header[56:58], order)
            binary.seek(phoff)
            table = binary.read(phentsize * phnum)
    except (OSError, IndexError):
        return False
    pt_interp = 3
    return not any(int.from_bytes(table[i : i + 4], order) == pt_interp for i in range(0, len(table), phentsize))


def find_static_busybox() -> str | None:
    """The statically linked busybox virtme-ng puts in its initramfs (Debian: busybox-static)."""
    for name in BUSYBOX_NAMES:
        candidates = [shutil.which(name)] + [os.path.join(d, name) for d in BUSYBOX_DIRS]
        for candidate in candidates:
            if candidate and os.path.isfile(candidate) and is_static_elf(candidate):
                return candidate
    return None


def qemu_binary_name() -> str:
    machine = os.uname().machine
    return {"x86_64": "qemu-system-x86_64", "aarch64": "qemu-system-aarch64"}.get(machine, f"qemu-system-{machine}")


def find_qemu() -> str | None:
    return shutil.which(qemu_binary_name())


def qemu_package() -> str:
    return "qemu-system-x86" if os.uname().machine == "x86_64" else "qemu-system-arm"


def in_guest_tmpfs(path: Path | str) -> str | None:
    """The guest-private tmpfs ``path`` lies in (its content is not shared), or None."""
    text = os.path.abspath(str(path))
    for prefix in GUEST_TMPFS:
        if text == prefix or text.startswith(prefix + "/"):
            return prefix
    return None


def guest_private_dirs(paths: Iterable[Path]) -> list[str]:
    """Those of ``paths`` that lie inside a guest-private tmpfs, to share with --rwdir.

    A checkout or virtualenv under /tmp is hidden by the guest's own /tmp unless shared
    explicitly. The tmpfs roots themselves (e.g. all of /tmp) are not shared.
    """
    result: list[str] = []
    for path in sorted({os.path.abspath(str(p)) for p in paths}):
        hidden = in_guest_tmpfs(path)
        if hidden is None:
            continue
        if path == hidden:
            raise VmError(
                f"{path} is an empty tmpfs inside the microVM and cannot be shared whole: "
                "run from a folder inside it or elsewhere (e.g. your project or /var/lib)"
            )
        if not any(path.startswith(parent + "/") for parent in result):
            result.append(path)
    return result


def inside_vm() -> bool:
    """Whether this process runs inside a quicbed (or any virtme-ng) microVM."""
    if os.environ.get(IN_VM_VARIABLE) == "1":
        return True
    try:
        cmdline = Path("/proc/cmdline").read_text()
    except OSError:
        return False
    return "virtme-ng-init" in cmdline or "virtme_hostname=" in cmdline


def vm_available(allow_fetch: bool = True) -> tuple[bool, str]:
    """Whether :func:`run_in_vm` can work here, and if not, what is missing and how to get it.

    ``allow_fetch``: a kernel that is not cached yet but could be fetched with apt counts
    as available (``run_in_vm`` fetches it on first use).
    """
    if inside_vm():
        return False, "already inside the microVM (nested microVMs are not supported)"
    if os.geteuid() != 0:
        return False, "the microVM must be started as root (network emulation inside it needs root)"
    missing = []
    if find_vng() is None:
        missing.append(f"virtme-ng ({sys.executable} -m pip install virtme-ng)")
    if find_qemu() is None:
        missing.append(f"{qemu_binary_name()} (apt-get install {qemu_package()})")
    if find_static_busybox() is None:
        missing.append("a statically linked busybox for the VM's initramfs (apt-get install busybox-static)")
    if shutil.which("file") is None:
        missing.append("the 'file' command virtme-ng uses to check busybox (apt-get install file)")
    image = kernel_mod.cached_kernel()
    kernel_note = ""
    if image is None:
        can_fetch, why = kernel_mod.fetchable()
        if allow_fetch and can_fetch:
            kernel_note = "kernel not fetched yet (fetched on first use)"
        else:
            missing.append(f"the microVM kernel in {kernel_mod.kernel_dir()}" + ("" if can_fetch else f" ({why})"))
    elif not os.access(image.vmlinuz, os.R_OK):
        missing.append(f"read access to {image.vmlinuz}")
    if missing:
        return False, "missing " + "; ".join(
            missing
        ) + ". Fix: run 'quicbed vm setup' as root (it fetches the kernel and checks the rest)"
    kvm, kvm_detail = kvm_status(image)
    what = f"kernel {image.version}" if image else kernel_note
    return True, f"{what}; {'KVM' if kvm else 'software emulation (~13x slower CPU)'}: {kvm_detail}"


#: where scripts/install.sh builds virtiofsd when the distribution has no package for it
VIRTIOFSD_DIR = Path(os.environ.get("QUICBED_VIRTIOFSD_DIR", "/var/lib/quicbed/virtiofsd"))


def vng_environment(vng: str) -> dict[str, str]:
    """Environment for vng: PATH starts with vng's own directory, because vng runs its
    helpers (``virtme-run``) through PATH and a virtualenv's ``bin/`` is rarely on it; then
    a virtiofsd quicbed built, which makes the guest's root filesystem virtiofs instead of
    9p (Python starts two to three times faster in the VM)."""
    env = dict(os.environ)
    path = [str(Path(vng).parent)]
    built = VIRTIOFSD_DIR / "bin"
    if (built / "virtiofsd").exists():
        path.append(str(built))
    path.extend(env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":"))
    env["PATH"] = ":".join(dict.fromkeys(entry for entry in path if entry))
    return env


def vng_command(
    vng: str, image: KernelImage, script: Path, *, memory: str, cpus: int, kvm: bool, shared: Iterable[str] = ()
) -> list[str]:
    argv = [
        vng,
        "--run",
        str(image.vmlinuz),
        "--memory",
        str(memory),
        "--cpus",
        str(cpus),
        "--rw",
        "--verbose",
        *(f"--rwdir={path}" for path in shared),
        "--exec",
        f"/bin/sh {shlex.quote(str(script))}",
    ]
    if not kvm:
        argv.append("--disable-kvm")
    return argv


# --- KVM -------------------------------------------------------------------------------


def kvm_status(image: KernelImage | None = None) -> tuple[bool, str]:
    """The recorded result of the KVM test boot (never boots; see :func:`detect_kvm`)."""
    forced = os.environ.get("QUICBED_VM_KVM", "").lower()
    if forced in ("0", "no", "off", "false"):
        return False, "disabled by QUICBED_VM_KVM"
    if forced in ("1", "yes", "on", "true"):
        return True, "forced by QUICBED_VM_KVM"
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    image = image or kernel_mod.cached_kernel()
    if image is None:
        return False, "untested (no kernel yet; 'quicbed vm setup' tests it)"
    try:
        record = json.loads((image.root / KVM_RESULT).read_text())
        return bool(record["usable"]), str(record["detail"])
    except (OSError, ValueError, KeyError, TypeError):
        return False, "untested ('quicbed vm setup' tests it)"


def detect_kvm(
    image: KernelImage, *, force: bool = False, progress: Progress | None = None, timeout: float = KVM_PROBE_TIMEOUT
) -> tuple[bool, str]:
    """Whether QEMU can boot ``image`` with KVM here, found by trying once (result cached).

    /dev/kvm existing proves nothing (nested setups where the guest hangs exist), so a
    short boot with KVM runs ``true``; if it does not finish within ``timeout`` seconds,
    software emulation is used from then on. The result lands in ROOT/kvm.json.
    """
    if not force:
        usable, detail = kvm_status(image)
        if not detail.startswith("untested"):
            return usable, detail
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        usable, detail = False, "no usable /dev/kvm" if os.path.exists("/dev/kvm") else "no /dev/kvm"
    else:
        if progress:
            progress(f"testing KVM with a short boot (at most {timeout:.0f} s)")
        started = time.monotonic()
        try:
            result = run_in_vm(
                ["true"],
                cwd="/",
                memory="512M",
                cpus=1,
                timeout=timeout,
                kvm=True,
                modules=(),
                progress=None,
                image=image,
                base_modules=False,
            )
            usable = result.returncode == 0
            detail = (
                f"a test boot took {time.monotonic() - started:.0f} s"
                if usable
                else f"test boot failed (exit {result.returncode})"
            )
        except VmTimeout:
            usable, detail = False, f"a test boot with KVM hung (no result within {timeout:.0f} s)"
        except VmError as error:
            usable, detail = False, f"a test boot with KVM failed: {_probable_cause(error)}"
    with contextlib.suppress(OSError):
        (image.root / KVM_RESULT).write_text(
            json.dumps({"usable": usable, "detail": detail, "tested": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n"
        )
    return usable, detail


def _probable_cause(error: VmError) -> str:
    """The console line that best explains a failed boot (QEMU's own error, if any)."""
    lines = [line.strip() for line in error.console_tail.splitlines() if line.strip()]
    for pattern in ("qemu-system", "error", "Error", "failed"):
        for line in lines:
            if pattern in line:
                return line[line.index("qemu-system") :][:200] if "qemu-system" in line else line[:200]
    return lines[-1][:200] if lines else str(error).splitlines()[0]


def _prune_jobs(directory: Path, keep: int = KEEP_JOBS) -> None:
    """Keep the newest ``keep`` finished job directories (they help when something failed)."""
    with contextlib.suppress(OSError):
        jobs = sorted(
            (p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name
        )
        for old in jobs[:-keep] if keep else jobs:
            if (old / "exit-code").exists() or (old / "finished").exists():
                shutil.rmtree(old, ignore_errors=True)


def new_job_dir() -> Path:
    """A new, empty job directory under :func:`vm_dir` (old finished ones are pruned)."""
    jobs = vm_dir()
    if in_guest_tmpfs(jobs):
        raise VmError(
            f"QUICBED_VM_DIR={jobs} is a tmpfs inside the microVM; choose a directory under /var/lib or your project"
        )
    try:
        jobs.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise VmError(f"cannot create {jobs} ({error.strerror}): run as root or set QUICBED_VM_DIR") from None
    _prune_jobs(jobs)
    job_dir = jobs / f"{time.strftime('%Y%m%d-%H%M%S')}-{ownership.new_run_id()}"
    job_dir.mkdir()
    return job_dir


def run_in_vm(
    argv: Sequence[str],
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    memory: str = DEFAULT_MEMORY,
    cpus: int = DEFAULT_CPUS,
    timeout: float | None = DEFAULT_TIMEOUT,
    log_path: Path | str | None = None,
    *,
    modules: Iterable[str] = (),
    verbose: bool = False,
    stream: TextIO | BinaryIO | None = None,
    kvm: bool | None = None,
    progress: Progress | None = kernel_mod.stderr_progress,
    image: KernelImage | None = None,
    base_modules: bool = True,
    job_dir: Path | str | None = None,
    watchdog: Callable[[], str] | None = None,
) -> VmResult:
    """Boot the microVM, run ``argv`` in ``cwd`` as root, return its exit status and output.

    ``modules``: extra kernel modules to load first (``"mac80211_hwsim"``, or with
    parameters ``"mac80211_hwsim radios=0"``); sch_netem is always loaded. ``env``: extra
    variables. ``verbose``: echo the VM console to stderr. ``stream``: copy the
    command's output there while it runs. ``kvm``: None = the result of the KVM test
    boot (software emulation if untested). ``timeout``: seconds for the whole VM (boot
    included); on expiry the VM is killed and :class:`VmTimeout` raised. ``job_dir``: a
    directory from :func:`new_job_dir` (so that ``argv`` can name files in it), else a
    new one; the guest also finds it in ``$QUICBED_VM_JOB_DIR``. ``watchdog``: asked every
    0.2 s while the VM runs; a non-empty answer (why the command is stuck) kills the VM and
    raises :class:`VmStalled` with it.
    """
    argv, cwd = guest_command(argv, cwd, "the microVM")
    shared = guest_private_dirs([cwd, Path(sys.prefix), Path(source_root() or cwd)])
    vng = find_vng()
    if vng is None:
        raise MissingDependency(
            f"virtme-ng (command 'vng') is not installed: {sys.executable} -m pip install "
            "virtme-ng, then run 'quicbed vm setup'"
        )
    if find_qemu() is None:
        raise MissingDependency(f"{qemu_binary_name()} is not installed: apt-get install {qemu_package()}")
    if find_static_busybox() is None:
        raise MissingDependency(
            "the microVM needs a statically linked busybox for its initramfs: apt-get install busybox-static"
        )
    image = image or kernel_mod.ensure_kernel(progress)
    if kvm is None:
        kvm, _ = kvm_status(image)
    module_specs = module_list(modules, base=base_modules)

    job = prepare_job(argv, cwd, env, module_specs, job_dir=job_dir, log_path=log_path)
    command = vng_command(vng, image, job.script, memory=memory, cpus=cpus, kvm=kvm, shared=shared)
    if progress:
        progress(
            f"booting the microVM (kernel {image.version}, {'KVM' if kvm else 'software emulation'}, "
            f"{cpus} CPU, {memory}); console log: {job.log}"
        )
    ended = supervise(
        command,
        cwd=cwd,
        env=vng_environment(vng),
        run_id=job.run_id,
        job_dir=job.dir,
        log=job.log,
        stream=stream,
        verbose=verbose,
        timeout=timeout,
        watchdog=watchdog,
    )
    result = job_result(
        job,
        ended,
        guest=f"the microVM (kernel {image.version})",
        timeout=timeout,
        speed="KVM" if kvm else "software emulation, ~13x slower CPU",
        ended_how=how_the_vm_ended,
    )
    result.kvm = kvm
    if progress:
        progress(f"microVM finished in {result.seconds:.0f} s (exit code {result.returncode})")
    return result


@dataclass
class Job:
    """A job folder made ready for a guest kernel: it runs ``script``; ``log`` gets its console."""

    dir: Path
    run_id: str
    script: Path
    log: Path


def guest_command(argv: Sequence[str], cwd: Path | str | None, guest: str) -> tuple[list[str], Path]:
    """The command as strings and its resolved working directory, for ``guest`` (the microVM or
    the virtual-time kernel); an empty command, or one asked for inside a guest, is refused."""
    words = [str(part) for part in argv]
    if not words:
        raise VmError(f"no command given to run in {guest}")
    if inside_vm():
        raise VmError("already inside a quicbed guest kernel: run the command directly (guests do not nest)")
    return words, Path(cwd or os.getcwd()).resolve()


def prepare_job(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    modules: Sequence[str],
    *,
    job_dir: Path | str | None = None,
    log_path: Path | str | None = None,
    emulated_cpu: bool = True,
) -> Job:
    """Write what a guest runs into a job folder (a new one unless ``job_dir`` is given): the
    job script, the reaper and the command line."""
    job_dir = Path(job_dir) if job_dir is not None else new_job_dir()
    job_dir.mkdir(parents=True, exist_ok=True)
    run_id = job_dir.name.rsplit("-", 1)[-1]
    if not re.fullmatch(r"[0-9a-f]{6}", run_id):
        run_id = ownership.new_run_id()
    script = job_dir / "job.sh"
    (job_dir / "reaper.py").write_text(REAPER)
    guest_env = guest_environment(env, emulated_cpu=emulated_cpu)
    guest_env["QUICBED_VM_JOB_DIR"] = str(job_dir)
    script.write_text(render_job_script(job_dir, argv, cwd, guest_env, modules))
    script.chmod(0o755)
    (job_dir / "command").write_text(shlex.join(argv) + "\n")
    log = Path(log_path) if log_path else job_dir / "console.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return Job(job_dir, run_id, script, log)


def job_result(
    job: Job,
    ended: Supervised,
    *,
    guest: str,
    timeout: float | None,
    speed: str,
    ended_how: Callable[[Sequence[str], int | None], str],
) -> VmResult:
    """The command's exit status and output from the job folder, or the error that explains
    why the guest wrote none (timed out, a module that did not load, the guest died)."""
    output = _read_text(job.dir / "output")
    tail = "\n".join(ended.console[-25:])
    if ended.stalled:
        raise VmStalled(
            f"{guest} was stopped after {ended.seconds:.0f} s ({speed}): {ended.stalled}. Command output "
            f"(tail):\n{_last_lines(output, 15)}\nConsole (tail, full log {job.log}):\n{tail}",
            log=job.log,
            console_tail=tail,
        )
    if ended.timed_out:
        raise VmTimeout(
            f"{guest} did not finish within {timeout:.0f} s and was stopped ({speed}); give a longer "
            f"timeout. Command output (tail):\n{_last_lines(output, 15)}\n"
            f"Console (tail, full log {job.log}):\n{tail}",
            log=job.log,
            console_tail=tail,
        )
    failed_module = _read_text(job.dir / "module-failed").strip()
    if failed_module:
        raise VmError(
            f"{guest} could not load the module {failed_module}: {_last_lines(output, 5)} (see {job.log})",
            log=job.log,
            console_tail=tail,
        )
    code = read_exit_code(job.dir)
    if code is None:
        raise VmError(
            f"{guest} stopped without reporting the command's exit status (no {job.dir}/exit-code) "
            f"after {ended.seconds:.0f} s: {ended_how(ended.console, ended.returncode)}. Console "
            f"(tail, full log {job.log}):\n{tail}",
            log=job.log,
            console_tail=tail,
        )
    return VmResult(code, output, job.log, job.dir, False, ended.seconds)


_QEMU_SIGNALLED = re.compile(r"qemu-system-\S+: terminating on signal (\d+)(?: from pid (\d+))?")


def how_the_vm_ended(console: Sequence[str], vng_status: int | None) -> str:
    """Why a VM ended before its command did, from its console's last words: QEMU says which
    signal ended it (except SIGKILL, which it cannot see), a guest kernel says it panicked."""
    for line in reversed(console):
        signalled = _QEMU_SIGNALLED.search(line)
        if signalled:
            number, sender = int(signalled.group(1)), signalled.group(2)
            name = signal.Signals(number).name if number in signal.valid_signals() else "?"
            return f"QEMU exited on signal {number} ({name})" + (f" sent by pid {sender}" if sender else "")
    if any("Kernel panic" in line for line in console):
        return "the guest kernel panicked"
    return (
        f"QEMU exited without a word, as it does when killed with SIGKILL (or by the out-of-memory killer); vng "
        f"exited with status {vng_status}"
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_lines(text: str, count: int) -> str:
    lines = text.rstrip().splitlines()[-count:]
    return "\n".join(lines) if lines else "(none)"
