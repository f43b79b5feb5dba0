"""Build quicbed's User-Mode Linux kernel once, from Debian's kernel source package.

What goes in is fixed by this folder: Debian's ``linux-source-6.12`` (its tarball in
/usr/src), ``kernel.config`` (added to ``allnoconfig``: a small kernel builds in minutes)
and ``xsave-size.patch``. Their digest names the build, so a changed fragment or patch
builds a new kernel beside the old one::

    $QUICBED_UML_DIR/                      default /var/lib/quicbed/uml
        current -> 6.12.57-quicbed-1a2b3c4d
        6.12.57-quicbed-1a2b3c4d/
            linux                          the kernel, an ordinary host program
            config                         its full .config
            build.json                     source package and version, digest, build time
            boot.json                      the last test boot: time travel measured

The build runs in a scratch folder next to the cache and is renamed into place complete,
so an interrupted build leaves nothing that looks usable. Debian 12 offers 6.1 and 6.12;
6.12 is the newer. UML's cheaper seccomp mode (``seccomp=on``) needs 6.15 or later, which
Debian 12 does not package, so system calls go through ptrace here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicbed.errors import MissingDependency, QuicbedError
from quicbed.host.kernel import CURRENT_LINK, cache_lock, set_current

DEFAULT_UML_DIR = "/var/lib/quicbed/uml"
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_TARBALL = Path("/usr/src") / f"{SOURCE_PACKAGE}.tar.xz"
HERE = Path(__file__).resolve().parent
CONFIG_FRAGMENT = HERE / "kernel.config"
PATCHES = (HERE / "xsave-size.patch",)
LOCALVERSION = "-quicbed"
BUILD_INFO = "build.json"
BUILD_TIMEOUT = 3600.0

Progress = Callable[[str], None]


class UmlBuildError(QuicbedError):
    """The virtual-time kernel could not be built."""


@dataclass(frozen=True)
class UmlKernel:
    """A built kernel: ``root`` holds ``linux`` and its records."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "linux"

    @property
    def info(self) -> dict[str, Any]:  # build.json as _build wrote it (its values are JSON)
        try:
            value = json.loads((self.root / BUILD_INFO).read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def release(self) -> str:
        """The kernel release (``uname -r`` inside it)."""
        return str(self.info.get("release") or self.root.name)

    def describe(self) -> str:
        info = self.info
        source = f"{info.get('source_package')} {info.get('source_version')}" if info else "unknown source"
        return f"User-Mode Linux {self.release} (from {source})"


def uml_dir() -> Path:
    """Where kernels are built (``QUICBED_UML_DIR``, default /var/lib/quicbed/uml)."""
    return Path(os.environ.get("QUICBED_UML_DIR") or DEFAULT_UML_DIR)


def recipe_digest(fragment: str | None = None, patches: tuple[str, ...] | None = None, source_version: str = "") -> str:
    """Eight hex digits naming a build: the source's version, the fragment and the patches."""
    fragment = CONFIG_FRAGMENT.read_text() if fragment is None else fragment
    patches = tuple(path.read_text() for path in PATCHES) if patches is None else patches
    digest = hashlib.sha256()
    for part in (source_version, fragment, *patches):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:8]


def cached_uml_kernel(directory: Path | None = None) -> UmlKernel | None:
    """The kernel ``current`` points at, if it was built completely."""
    link = (directory or uml_dir()) / CURRENT_LINK
    try:
        root = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    kernel = UmlKernel(root)
    return kernel if kernel.binary.is_file() and os.access(kernel.binary, os.X_OK) else None


# --- the recipe ---------------------------------------------------------------------------


def fragment_settings(text: str) -> dict[str, str]:
    """``CONFIG_X=value`` lines of a fragment (comments and blank lines skipped)."""
    settings: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"(CONFIG_[A-Za-z0-9_]+)=(\S+)", line)
        if not match:
            raise UmlBuildError(f"{CONFIG_FRAGMENT}: line {number} is not CONFIG_NAME=value: {line!r}")
        settings[match.group(1)] = match.group(2)
    return settings


def config_values(text: str) -> dict[str, str]:
    """A full .config as a dict; ``# CONFIG_X is not set`` reads as ``n``."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if match := re.fullmatch(r"(CONFIG_[A-Za-z0-9_]+)=(.*)", line.strip()):
            values[match.group(1)] = match.group(2)
        elif match := re.fullmatch(r"# (CONFIG_[A-Za-z0-9_]+) is not set", line.strip()):
            values[match.group(1)] = "n"
    return values


def unmet_settings(wanted: dict[str, str], config: dict[str, str]) -> list[str]:
    """The fragment's lines the resolved .config did not keep (a dependency missing, a typo)."""
    return [
        f"{name}={value} (got {config.get(name, 'nothing: unknown or its dependencies are off')})"
        for name, value in wanted.items()
        if config.get(name, "n") != value
    ]


# --- building -----------------------------------------------------------------------------


def source_version() -> str | None:
    """The installed version of the source package, or None."""
    try:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", SOURCE_PACKAGE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def missing_build_tools() -> list[str]:
    """Debian packages the build still needs (the source package included)."""
    missing = [] if SOURCE_TARBALL.is_file() else [SOURCE_PACKAGE]
    tools = {
        "make": "make",
        "gcc": "gcc",
        "bc": "bc",
        "flex": "flex",
        "bison": "bison",
        "xz": "xz-utils",
        "patch": "patch",
    }
    missing += [package for tool, package in tools.items() if shutil.which(tool) is None]
    for header, package in (("stdio.h", "libc6-dev"), ("openssl/bio.h", "libssl-dev")):
        # libssl-dev: cfg80211 checks the regulatory database's signature; the build makes its certificate tool
        if not (Path("/usr/include") / header).exists():
            missing.append(package)
    return sorted(set(missing))


def install_build_tools(progress: Progress | None) -> None:
    """apt-get install what the build lacks (root only); an error names the command otherwise."""
    missing = missing_build_tools()
    if not missing:
        return
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=600", *missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise MissingDependency(
            f"building the virtual-time kernel needs {', '.join(missing)} (fix: {' '.join(command)}, as root)"
        )
    _say(progress, f"installing {', '.join(missing)} with apt-get")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-q"], command):
        result = subprocess.run(argv, capture_output=True, text=True, env=environment, check=False)
        if result.returncode != 0 and argv[1] == "install":
            raise MissingDependency(f"'{' '.join(argv)}' failed: {_tail(result.stdout + result.stderr)}")


def ensure_uml_kernel(progress: Progress | None = None, *, jobs: int | None = None, rebuild: bool = False) -> UmlKernel:
    """The kernel for this recipe, built first if it is not there yet (minutes, once)."""
    install_build_tools(progress)
    version = source_version() or "unknown"
    digest = recipe_digest(source_version=version)
    directory = uml_dir()
    _prepare(directory)
    with cache_lock(directory):
        for candidate in sorted(directory.glob(f"*-{digest}")):
            kernel = UmlKernel(candidate)
            if kernel.binary.is_file() and not rebuild:
                set_current(directory, candidate.name)
                return kernel
        kernel = _build(directory, digest, version, jobs or os.cpu_count() or 1, progress)
        set_current(directory, kernel.root.name)
        for old in directory.iterdir():  # earlier recipes' kernels (a run in progress keeps its open binary)
            if old.is_dir() and not old.name.startswith(".") and old != kernel.root:
                shutil.rmtree(old, ignore_errors=True)
        return kernel


def _build(directory: Path, digest: str, version: str, jobs: int, progress: Progress | None) -> UmlKernel:
    wanted = fragment_settings(CONFIG_FRAGMENT.read_text())
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=".build-", dir=directory) as scratch:
        work = Path(scratch)
        _say(progress, f"unpacking {SOURCE_TARBALL} ({SOURCE_PACKAGE} {version})")
        _run(["tar", "-C", str(work), "-xf", str(SOURCE_TARBALL)], "unpacking the kernel source")
        source = work / SOURCE_PACKAGE
        if not source.is_dir():
            raise UmlBuildError(f"{SOURCE_TARBALL} did not unpack into {SOURCE_PACKAGE}/")
        for patch in PATCHES:
            _say(progress, f"applying {patch.name}")
            _run(["patch", "-p1", "--forward", "--batch", "-i", str(patch)], f"applying {patch}", cwd=source)
        make = ["make", "-s", "ARCH=um", f"O={work / 'out'}", f"LOCALVERSION={LOCALVERSION}"]
        _run([*make, f"KCONFIG_ALLCONFIG={CONFIG_FRAGMENT}", "allnoconfig"], "configuring the kernel", cwd=source)
        config = (work / "out" / ".config").read_text()
        unmet = unmet_settings(wanted, config_values(config))
        if unmet:
            raise UmlBuildError(
                f"{CONFIG_FRAGMENT}: {len(unmet)} setting(s) did not take effect in "
                f"{SOURCE_PACKAGE} {version}: {'; '.join(unmet)} (fix: enable what they depend "
                "on, or drop them)"
            )
        _say(progress, f"building the kernel with {jobs} job(s) (a few minutes, once)")
        _run(
            ["nice", "-n", "10", *make, f"-j{jobs}", "linux"], "building the kernel", cwd=source, timeout=BUILD_TIMEOUT
        )
        release = _run([*make, "kernelrelease"], "reading the kernel release", cwd=source).stdout.strip()
        seconds = time.monotonic() - started
        final = directory / f"{release}-{digest}"
        staged = work / "result"
        staged.mkdir()
        shutil.copy2(work / "out" / "linux", staged / "linux")
        (staged / "config").write_text(config)
        (staged / BUILD_INFO).write_text(
            json.dumps(
                {
                    "release": release,
                    "source_package": SOURCE_PACKAGE,
                    "source_version": version,
                    "digest": digest,
                    "patches": [patch.name for patch in PATCHES],
                    "jobs": jobs,
                    "build_seconds": round(seconds, 1),
                    "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                },
                indent=2,
            )
            + "\n"
        )
        if final.exists():
            shutil.rmtree(final)
        staged.rename(final)
    _say(progress, f"built {release} in {seconds / 60:.1f} min: {final / 'linux'}")
    return UmlKernel(final)


def _run(
    argv: list[str], what: str, *, cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise MissingDependency(f"{what}: '{argv[0]}' is not installed") from None
    except subprocess.TimeoutExpired:
        raise UmlBuildError(f"{what} did not finish within {timeout:.0f} s") from None
    if result.returncode != 0:
        raise UmlBuildError(f"{what} failed ({' '.join(argv[:6])} ...):\n{_tail(result.stdout + result.stderr, 15)}")
    return result


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _prepare(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UmlBuildError(
            f"cannot create {directory} ({error.strerror or error}): run as root or set "
            "QUICBED_UML_DIR to a writable folder"
        ) from None
