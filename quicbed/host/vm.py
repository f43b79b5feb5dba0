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
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from quicbed.errors import MissingDependency, QuicbedError
from quicbed.host import kernel as kernel_mod
from quicbed.host.kernel import KernelImage

IN_VM_VARIABLE = "QUICBED_IN_VM"
DEFAULT_VM_DIR = "/var/lib/quicbed/vm"
DEFAULT_MEMORY = "2G"
DEFAULT_CPUS = 2
DEFAULT_TIMEOUT = 1800.0
KVM_PROBE_TIMEOUT = 60.0
KVM_RESULT = "kvm.json"
BASE_MODULES = ("sch_netem",)
#: modules a caller may ask for by feature name
FEATURE_MODULES = {"netem": "sch_netem", "mac80211_hwsim": "mac80211_hwsim", "hwsim": "mac80211_hwsim",
                   "openvswitch": "openvswitch", "ovs": "openvswitch"}
#: paths that are a fresh, empty tmpfs inside the guest (not shared with the host)
GUEST_TMPFS = ("/tmp", "/run", "/var/tmp", "/var/log", "/var/cache", "/var/lib/apt",
               "/var/lib/private", "/usr/lib/modules")
KEEP_JOBS = 20
EXIT_MODULE_FAILED = 125

Progress = Callable[[str], None]


class VmError(QuicbedError):
    """The microVM could not run the command (the command's own failure is not an error)."""

    def __init__(self, message: str, *, log: Path | None = None, console_tail: str = "") -> None:
        super().__init__(message)
        self.log = log
        self.console_tail = console_tail


class VmTimeout(VmError):
    """The microVM did not finish within the timeout and was killed."""


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
            order = "little" if header[5] == 1 else "big"
            phoff = int.from_bytes(header[32:40], order)
            phentsize = int.from_bytes(header[54:56], order)
            phnum = int.from_bytes(header[56:58], order)
            binary.seek(phoff)
            table = binary.read(phentsize * phnum)
    except (OSError, IndexError):
        return False
    pt_interp = 3
    return not any(int.from_bytes(table[i:i + 4], order) == pt_interp for i in range(0, len(table), phentsize))


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
            raise VmError(f"{path} is an empty tmpfs inside the microVM and cannot be shared whole: "
                          "run from a folder inside it or elsewhere (e.g. your project or /var/lib)")
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
        return False, "missing " + "; ".join(missing) + ". Fix: run 'quicbed vm setup' as root (it fetches the " \
                      "kernel and checks the rest)"
    kvm, kvm_detail = kvm_status(image)
    what = f"kernel {image.version}" if image else kernel_note
    return True, f"{what}; {'KVM' if kvm else 'software emulation (~13x slower CPU)'}: {kvm_detail}"


# --- the job script --------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z0-9_\-]+")


def parse_module_spec(spec: str) -> tuple[str, list[str]]:
    """``"mac80211_hwsim radios=0"`` -> (``"mac80211_hwsim"``, ``["radios=0"]``); feature names map to modules."""
    parts = spec.split()
    if not parts or not _MODULE.fullmatch(parts[0]):
        raise VmError(f"not a kernel module name: {spec!r} (expected e.g. 'mac80211_hwsim' or "
                      f"'mac80211_hwsim radios=0')")
    for parameter in parts[1:]:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+(=[A-Za-z0-9_.,:\-]*)?", parameter):
            raise VmError(f"module parameter {parameter!r} of {parts[0]} is not of the form name=value")
    return FEATURE_MODULES.get(parts[0], parts[0]), parts[1:]


def module_list(extra: Iterable[str] = (), *, base: bool = True) -> list[str]:
    """Module specs to load: sch_netem (unless not ``base``) plus ``extra``, each module once."""
    specs: list[str] = []
    seen = set()
    for spec in [*(BASE_MODULES if base else ()), *extra]:
        name, params = parse_module_spec(spec)
        if name not in seen:
            seen.add(name)
            specs.append(" ".join([name, *params]))
    return specs


def _source_root() -> str | None:
    """The directory holding the ``quicbed`` package, if it is a source tree (not site-packages)."""
    root = Path(__file__).resolve().parents[2]
    if "site-packages" in root.parts or "dist-packages" in root.parts:
        return None
    return str(root)


def guest_environment(env: Mapping[str, str] | None = None, *, host_env: Mapping[str, str] | None = None,
                      python: str | None = None) -> dict[str, str]:
    """The environment the command gets in the guest (the guest starts with almost none).

    PATH starts with the directory of this Python (pyenv shims are not usable there),
    PYTHONPATH keeps the host's and adds this quicbed source tree, QUICBED_* variables
    are passed on, QUICBED_IN_VM=1 and QUICBED_TBF_BURST_MS=10 are set; ``env`` overrides all of these.
    """
    host_env = os.environ if host_env is None else host_env
    python = python or sys.executable
    path = [str(Path(python).parent)]
    for entry in host_env.get("PATH", "").split(":"):
        if entry and os.path.isabs(entry) and not entry.rstrip("/").endswith("/shims"):
            path.append(entry)
    path += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    result = {
        "PATH": ":".join(dict.fromkeys(path)),
        "HOME": "/root" if os.geteuid() == 0 else host_env.get("HOME", "/root"),
        "LANG": host_env.get("LANG") or "C.UTF-8",
        "TERM": "dumb",
        # software-emulated timers fire milliseconds late: deeper token buckets keep rate limits
        # accurate (see quicbed.backends.tc.tbf_burst)
        "QUICBED_TBF_BURST_MS": "10",
    }
    pythonpath = [p for p in [_source_root(), *host_env.get("PYTHONPATH", "").split(":")] if p]
    if pythonpath:
        result["PYTHONPATH"] = ":".join(dict.fromkeys(pythonpath))
    for key, value in host_env.items():
        if key.startswith("QUICBED_") and key not in ("QUICBED_STATE_DIR",):
            result[key] = value
    result[IN_VM_VARIABLE] = "1"
    for key, value in (env or {}).items():
        if not _NAME.fullmatch(key):
            raise VmError(f"not an environment variable name: {key!r}")
        result[key] = str(value)
    return result


REAPER = '''\
"""Run argv as a child subreaper and exit with its status (orphans get reaped, not left as zombies)."""
import ctypes, os, sys
PR_SET_CHILD_SUBREAPER = 36
try:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
except (OSError, AttributeError):
    pass
argv = sys.argv[1:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        print(f"quicbed-vm: cannot run {argv[0]}: {error.strerror}", file=sys.stderr, flush=True)
        os._exit(127 if isinstance(error, FileNotFoundError) else 126)
while True:
    try:
        done, status = os.wait()
    except ChildProcessError:
        sys.exit(1)
    except InterruptedError:
        continue
    if done == pid:
        code = os.waitstatus_to_exitcode(status)
        sys.exit(128 - code if code < 0 else code)
'''


def render_job_script(job_dir: Path | str, argv: Sequence[str], cwd: Path | str, env: Mapping[str, str],
                      modules: Sequence[str] = BASE_MODULES, *, nofile: int = 65536,
                      python: str | None = None) -> str:
    """The POSIX sh script the guest runs (pure: no files touched)."""
    if not argv:
        raise VmError("no command given to run in the microVM")
    q = shlex.quote
    job = str(job_dir)
    python = python or sys.executable
    lines = [
        "#!/bin/sh",
        "# quicbed microVM job (generated by quicbed.host.vm); the guest runs it as root.",
        f"JOB={q(job)}",
        'echo "quicbed-vm: job script started"',
    ]
    for key, value in env.items():
        if not _NAME.fullmatch(key):
            raise VmError(f"not an environment variable name: {key!r}")
        lines.append(f"export {key}={q(value)}")
    lines += [
        f"ulimit -n {int(nofile)} 2>/dev/null || ulimit -n 4096 2>/dev/null || true",
        ": > \"$JOB/output\"",
        "status=0",
    ]
    for spec in modules:
        name, params = parse_module_spec(spec)
        command = " ".join(q(part) for part in ["modprobe", name, *params])
        lines += [
            f"if [ $status -eq 0 ] && ! {command} >> \"$JOB/output\" 2>&1; then",
            f"  echo {q(name)} > \"$JOB/module-failed\"",
            f"  echo \"quicbed-vm: could not load the kernel module {name}\" >> \"$JOB/output\"",
            f"  status={EXIT_MODULE_FAILED}",
            "fi",
        ]
    # -I -S: the reaper needs no site-packages; skipping them saves seconds in the guest.
    command = " ".join(q(part) for part in [python, "-I", "-S", f"{job}/reaper.py", *argv])
    lines += [
        "if [ $status -eq 0 ]; then",
        f"  if cd {q(str(cwd))}; then",
        f"    {command} >> \"$JOB/output\" 2>&1 < /dev/null",
        "    status=$?",
        "  else",
        f"    echo \"quicbed-vm: cannot change to the directory {cwd}\" >> \"$JOB/output\"",
        "    status=126",
        "  fi",
        "fi",
        'echo "$status" > "$JOB/exit-code.tmp" && mv -f "$JOB/exit-code.tmp" "$JOB/exit-code"',
        "sync",
        'echo "quicbed-vm: command exited with code $status"',
        "",
    ]
    return "\n".join(lines)


def read_exit_code(job_dir: Path | str) -> int | None:
    """The exit status the guest wrote, or None if it wrote none (VM died, timed out...)."""
    try:
        text = (Path(job_dir) / "exit-code").read_text().strip()
    except OSError:
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else None


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


def vng_command(vng: str, image: KernelImage, script: Path, *, memory: str, cpus: int, kvm: bool,
                shared: Iterable[str] = ()) -> list[str]:
    argv = [vng, "--run", str(image.vmlinuz), "--memory", str(memory), "--cpus", str(cpus),
            "--rw", "--verbose", *(f"--rwdir={path}" for path in shared),
            "--exec", f"/bin/sh {shlex.quote(str(script))}"]
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


def detect_kvm(image: KernelImage, *, force: bool = False, progress: Progress | None = None,
               timeout: float = KVM_PROBE_TIMEOUT) -> tuple[bool, str]:
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
            result = run_in_vm(["true"], cwd="/", memory="512M", cpus=1, timeout=timeout, kvm=True,
                               modules=(), progress=None, image=image, base_modules=False)
            usable = result.returncode == 0
            detail = (f"a test boot took {time.monotonic() - started:.0f} s" if usable
                      else f"test boot failed (exit {result.returncode})")
        except VmTimeout:
            usable, detail = False, f"a test boot with KVM hung (no result within {timeout:.0f} s)"
        except VmError as error:
            usable, detail = False, f"a test boot with KVM failed: {_probable_cause(error)}"
    with contextlib.suppress(OSError):
        (image.root / KVM_RESULT).write_text(json.dumps(
            {"usable": usable, "detail": detail, "tested": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
    return usable, detail


def _probable_cause(error: VmError) -> str:
    """The console line that best explains a failed boot (QEMU's own error, if any)."""
    lines = [line.strip() for line in error.console_tail.splitlines() if line.strip()]
    for pattern in ("qemu-system", "error", "Error", "failed"):
        for line in lines:
            if pattern in line:
                return line[line.index("qemu-system"):][:200] if "qemu-system" in line else line[:200]
    return lines[-1][:200] if lines else str(error).splitlines()[0]


# --- processes -------------------------------------------------------------------------

def session_members(session: int) -> list[int]:
    """Pids whose session id is ``session`` (vng runs in a session of its own)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(session):
            members.append(int(entry.name))
    return sorted(members)


def _kill_session(process: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    members = set(session_members(process.pid)) | {process.pid}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        for pid in members:  # members that left the process group (qemu daemonising, ...)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        try:
            process.wait(timeout=grace)
            if not session_members(process.pid):
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the VM runs, SIGTERM (if nobody handles it) stops the VM like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _ConsoleReader(threading.Thread):
    """Copies vng's output (the console) to the log, optionally to the user; keeps a tail."""

    def __init__(self, source: BinaryIO, log: BinaryIO, echo: TextIO | None) -> None:
        super().__init__(daemon=True, name="quicbed-vm-console")
        self.source, self.log, self.echo = source, log, echo
        self.tail: collections.deque[str] = collections.deque(maxlen=60)

    def run(self) -> None:
        for raw in iter(self.source.readline, b""):
            self.log.write(raw)
            self.log.flush()
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.tail.append(line)
            if self.echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.echo.write(f"[vm] {line}\n")
                    self.echo.flush()


class _OutputFollower:
    """Copies what the guest appends to the output file to a stream, as it appears."""

    def __init__(self, path: Path, stream: TextIO | BinaryIO | None) -> None:
        self.path, self.stream, self.offset = path, stream, 0

    def poll(self) -> None:
        if self.stream is None:
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        if not data:
            return
        self.offset += len(data)
        target = getattr(self.stream, "buffer", None)
        with contextlib.suppress(OSError, ValueError):
            if target is not None:  # a text stream with a byte buffer (sys.stdout)
                self.stream.flush()
                target.write(data)
                target.flush()
            elif hasattr(self.stream, "encoding"):  # a text stream without one (StringIO)
                self.stream.write(data.decode("utf-8", "replace"))  # type: ignore[arg-type]
            else:
                self.stream.write(data)  # type: ignore[arg-type]
                self.stream.flush()


def _prune_jobs(directory: Path, keep: int = KEEP_JOBS) -> None:
    """Keep the newest ``keep`` finished job directories (they help when something failed)."""
    with contextlib.suppress(OSError):
        jobs = sorted((p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")),
                      key=lambda p: p.name)
        for old in jobs[:-keep] if keep else jobs:
            if (old / "exit-code").exists() or (old / "finished").exists():
                shutil.rmtree(old, ignore_errors=True)


def _ownership_record(run_id: str):  # -> ownership.Ownership | None
    try:
        from quicbed.host import ownership
    except ImportError:
        return None
    return ownership.Ownership.create(run_id)


def _new_run_id() -> str:
    try:
        from quicbed.host.ownership import new_run_id
        return new_run_id()
    except ImportError:
        return os.urandom(3).hex()


def new_job_dir() -> Path:
    """A new, empty job directory under :func:`vm_dir` (old finished ones are pruned)."""
    jobs = vm_dir()
    if in_guest_tmpfs(jobs):
        raise VmError(f"QUICBED_VM_DIR={jobs} is a tmpfs inside the microVM; choose a directory under /var/lib "
                      "or your project")
    try:
        jobs.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise VmError(f"cannot create {jobs} ({error.strerror}): run as root or set QUICBED_VM_DIR") from None
    _prune_jobs(jobs)
    job_dir = jobs / f"{time.strftime('%Y%m%d-%H%M%S')}-{_new_run_id()}"
    job_dir.mkdir()
    return job_dir


def run_in_vm(argv: Sequence[str], cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
              memory: str = DEFAULT_MEMORY, cpus: int = DEFAULT_CPUS, timeout: float | None = DEFAULT_TIMEOUT,
              log_path: Path | str | None = None, *, modules: Iterable[str] = (), verbose: bool = False,
              stream: TextIO | BinaryIO | None = None, kvm: bool | None = None,
              progress: Progress | None = kernel_mod.stderr_progress, image: KernelImage | None = None,
              base_modules: bool = True, job_dir: Path | str | None = None) -> VmResult:
    """Boot the microVM, run ``argv`` in ``cwd`` as root, return its exit status and output.

    ``modules``: extra kernel modules to load first (``"mac80211_hwsim"``, or with
    parameters ``"mac80211_hwsim radios=0"``); sch_netem is always loaded. ``env``: extra
    variables. ``verbose``: echo the VM console to stderr. ``stream``: copy the
    command's output there while it runs. ``kvm``: None = the result of the KVM test
    boot (software emulation if untested). ``timeout``: seconds for the whole VM (boot
    included); on expiry the VM is killed and :class:`VmTimeout` raised. ``job_dir``: a
    directory from :func:`new_job_dir` (so that ``argv`` can name files in it), else a
    new one; the guest also finds it in ``$QUICBED_VM_JOB_DIR``.
    """
    argv = [str(part) for part in argv]
    cwd = Path(cwd or os.getcwd()).resolve()
    if not argv:
        raise VmError("no command given to run in the microVM")
    if inside_vm():
        raise VmError("already inside the microVM: run the command directly (nested microVMs are not supported)")
    shared = guest_private_dirs([cwd, Path(sys.prefix), Path(_source_root() or cwd)])
    vng = find_vng()
    if vng is None:
        raise MissingDependency(f"virtme-ng (command 'vng') is not installed: {sys.executable} -m pip install "
                                "virtme-ng, then run 'quicbed vm setup'")
    if find_qemu() is None:
        raise MissingDependency(f"{qemu_binary_name()} is not installed: apt-get install {qemu_package()}")
    if find_static_busybox() is None:
        raise MissingDependency("the microVM needs a statically linked busybox for its initramfs: "
                                "apt-get install busybox-static")
    image = image or kernel_mod.ensure_kernel(progress)
    if kvm is None:
        kvm, _ = kvm_status(image)
    module_specs = module_list(modules, base=base_modules)

    job_dir = Path(job_dir) if job_dir is not None else new_job_dir()
    job_dir.mkdir(parents=True, exist_ok=True)
    run_id = job_dir.name.rsplit("-", 1)[-1]
    if not re.fullmatch(r"[0-9a-f]{6}", run_id):
        run_id = _new_run_id()
    script = job_dir / "job.sh"
    (job_dir / "reaper.py").write_text(REAPER)
    guest_env = guest_environment(env)
    guest_env["QUICBED_VM_JOB_DIR"] = str(job_dir)
    script.write_text(render_job_script(job_dir, argv, cwd, guest_env, module_specs))
    script.chmod(0o755)
    (job_dir / "command").write_text(shlex.join(argv) + "\n")
    log = Path(log_path) if log_path else job_dir / "console.log"
    log.parent.mkdir(parents=True, exist_ok=True)

    command = vng_command(vng, image, script, memory=memory, cpus=cpus, kvm=kvm, shared=shared)
    if progress:
        progress(f"booting the microVM (kernel {image.version}, {'KVM' if kvm else 'software emulation'}, "
                 f"{cpus} CPU, {memory}); console log: {log}")
    record = _ownership_record(run_id)
    started = time.monotonic()
    follower = _OutputFollower(job_dir / "output", stream)
    timed_out = False
    with open(log, "wb") as log_file, _sigterm_as_interrupt():
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=vng_environment(vng))
        reader = _ConsoleReader(process.stdout, log_file, sys.stderr if verbose else None)  # type: ignore[arg-type]
        reader.start()
        known: set[int] = set()
        try:
            next_scan = 0.0
            while process.poll() is None:
                now = time.monotonic()
                if record is not None and now >= next_scan:
                    members = set(session_members(process.pid)) | {process.pid}
                    if members - known:
                        known |= members
                        record.pids = sorted(known)
                        with contextlib.suppress(OSError):
                            record.save()
                    next_scan = now + (0.5 if now - started < 30 else 5.0)
                follower.poll()
                if timeout is not None and now - started > timeout:
                    timed_out = True
                    _kill_session(process)
                    break
                time.sleep(0.2)
        except BaseException:
            _kill_session(process)
            raise
        finally:
            if process.poll() is None:
                _kill_session(process)
            # qemu may outlive vng for a moment; make sure nothing of the VM is left.
            leftovers = session_members(process.pid)
            if leftovers:
                _kill_session(process)
            reader.join(timeout=5)
            if record is not None:
                record.remove()
            follower.poll()
            (job_dir / "finished").write_text(f"{time.monotonic() - started:.1f}\n")
    seconds = time.monotonic() - started
    output = _read_text(job_dir / "output")
    tail = "\n".join(list(reader.tail)[-25:])
    if timed_out:
        raise VmTimeout(f"the microVM did not finish within {timeout:.0f} s and was stopped "
                        f"({'KVM' if kvm else 'software emulation, ~13x slower CPU'}); give a longer "
                        f"timeout. Command output (tail):\n{_last_lines(output, 15)}\n"
                        f"Console (tail, full log {log}):\n{tail}", log=log, console_tail=tail)
    failed_module = _read_text(job_dir / "module-failed").strip()
    if failed_module:
        raise VmError(f"the microVM kernel {image.version} could not load the module {failed_module}: "
                      f"{_last_lines(output, 5)} (see {log})", log=log, console_tail=tail)
    code = read_exit_code(job_dir)
    if code is None:
        raise VmError(f"the microVM stopped without reporting the command's exit status (no {job_dir}/exit-code) "
                      f"after {seconds:.0f} s. Console (tail, full log {log}):\n{tail}", log=log, console_tail=tail)
    if progress:
        progress(f"microVM finished in {seconds:.0f} s (exit code {code})")
    return VmResult(code, output, log, job_dir, kvm, seconds)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_lines(text: str, count: int) -> str:
    lines = text.rstrip().splitlines()[-count:]
    return "\n".join(lines) if lines else "(none)"
