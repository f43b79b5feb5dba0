"""What the microVM's guest runs and how it reports back: the job script (modules,
environment, ulimit, cd, command under a child subreaper) and the exit-status file, which
is the only trustworthy status (vng's own is 255 whatever the command did)."""

from __future__ import annotations

import os
import platform
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from quicbed.errors import VmError

IN_VM_VARIABLE = "QUICBED_IN_VM"
BASE_MODULES = ("sch_netem",)
#: modules a caller may ask for by feature name
FEATURE_MODULES = {
    "netem": "sch_netem",
    "mac80211_hwsim": "mac80211_hwsim",
    "hwsim": "mac80211_hwsim",
    "openvswitch": "openvswitch",
    "ovs": "openvswitch",
}
EXIT_MODULE_FAILED = 125


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"[A-Za-z0-9_\-]+")


def parse_module_spec(spec: str) -> tuple[str, list[str]]:
    """``"mac80211_hwsim radios=0"`` -> (``"mac80211_hwsim"``, ``["radios=0"]``); feature names map to modules."""
    parts = spec.split()
    if not parts or not _MODULE.fullmatch(parts[0]):
        raise VmError(
            f"not a kernel module name: {spec!r} (expected e.g. 'mac80211_hwsim' or 'mac80211_hwsim radios=0')"
        )
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


def source_root() -> str | None:
    """The directory holding the ``quicbed`` package, if it is a source tree (not site-packages)."""
    root = Path(__file__).resolve().parents[2]
    if "site-packages" in root.parts or "dist-packages" in root.parts:
        return None
    return str(root)


#: the machine a guest runs on, as results record it (quicbed.runner.metadata.machine_name)
MACHINE_VARIABLE = "QUICBED_MACHINE"


def guest_environment(
    env: Mapping[str, str] | None = None,
    *,
    host_env: Mapping[str, str] | None = None,
    python: str | None = None,
    emulated_cpu: bool = True,
) -> dict[str, str]:
    """The environment the command gets in the guest (the guest starts with almost none).

    PATH starts with the directory of this Python (pyenv shims are not usable there),
    PYTHONPATH keeps the host's and adds this quicbed source tree, QUICBED_* variables
    are passed on, QUICBED_IN_VM=1 is set, and QUICBED_TBF_BURST_MS=10 where the CPU is
    ``emulated_cpu`` (QEMU without KVM); ``env`` overrides all of these.
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
    }
    if emulated_cpu:
        # software-emulated timers fire milliseconds late: deeper token buckets keep rate limits
        # accurate (see quicbed.backends.tc.tbf_burst)
        result["QUICBED_TBF_BURST_MS"] = "10"
    pythonpath = [p for p in [source_root(), *host_env.get("PYTHONPATH", "").split(":")] if p]
    if pythonpath:
        result["PYTHONPATH"] = ":".join(dict.fromkeys(pythonpath))
    for key, value in host_env.items():
        if key.startswith("QUICBED_") and key not in ("QUICBED_STATE_DIR",):
            result[key] = value
    # the guest's own hostname names the guest: results name the machine it runs on
    result.setdefault(MACHINE_VARIABLE, platform.node())
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


def render_job_script(
    job_dir: Path | str,
    argv: Sequence[str],
    cwd: Path | str,
    env: Mapping[str, str],
    modules: Sequence[str] = BASE_MODULES,
    *,
    nofile: int = 65536,
    python: str | None = None,
) -> str:
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
        ': > "$JOB/output"',
        "status=0",
    ]
    for spec in modules:
        name, params = parse_module_spec(spec)
        command = " ".join(q(part) for part in ["modprobe", name, *params])
        lines += [
            f'if [ $status -eq 0 ] && ! {command} >> "$JOB/output" 2>&1; then',
            f'  echo {q(name)} > "$JOB/module-failed"',
            f'  echo "quicbed-vm: could not load the kernel module {name}" >> "$JOB/output"',
            f"  status={EXIT_MODULE_FAILED}",
            "fi",
        ]
    # -I -S: the reaper needs no site-packages; skipping them saves seconds in the guest.
    command = " ".join(q(part) for part in [python, "-I", "-S", f"{job}/reaper.py", *argv])
    lines += [
        "if [ $status -eq 0 ]; then",
        f"  if cd {q(str(cwd))}; then",
        f'    {command} >> "$JOB/output" 2>&1 < /dev/null',
        "    status=$?",
        "  else",
        f'    echo "quicbed-vm: cannot change to the directory {cwd}" >> "$JOB/output"',
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
