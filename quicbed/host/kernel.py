"""The distribution kernel the microVM boots, fetched once into a cache.

The host kernel may lack sch_netem or mac80211_hwsim and may forbid loading modules;
the microVM (see :mod:`quicbed.host.vm`) boots the distribution's own kernel instead,
with all of its modules. This module finds that kernel's package with apt, downloads
it (``apt-get download``, no installation: the host's /boot and /lib/modules stay as
they are), unpacks it with ``dpkg-deb -x`` and runs ``depmod`` on the result::

    $QUICBED_KERNEL_DIR/            default /var/lib/quicbed/kernel
        current -> 6.1.0-56-amd64    the kernel the VM boots
        6.1.0-56-amd64/
            boot/vmlinuz-6.1.0-56-amd64
            lib/modules/6.1.0-56-amd64/...   (with modules.dep)
            kernel.json              what was fetched, from which packages, when
            kvm.json                 whether KVM could boot it (written by quicbed.host.vm)

Not /var/cache: inside the VM /var/cache is a fresh tmpfs, while /var/lib is the
host's. A kernel directory appears only complete (it is unpacked next to the cache and
renamed into place), so fetching again after an interruption starts from scratch.

Debian (``linux-image-<arch>``) and Ubuntu (``linux-image-generic``; the modules,
including mac80211_hwsim, are in ``linux-modules-<ver>`` and ``linux-modules-extra-<ver>``)
are supported. Elsewhere, or offline, put a kernel in the layout above by hand or give
``.deb`` files to :func:`ensure_kernel` (``quicbed vm setup --deb FILE ...``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from quicbed.errors import MissingDependency, QuicbedError

DEFAULT_KERNEL_DIR = "/var/lib/quicbed/kernel"
KERNEL_INFO = "kernel.json"
CURRENT_LINK = "current"

Progress = Callable[[str], None]


class KernelError(QuicbedError):
    """The microVM kernel could not be found, fetched or unpacked."""


@dataclass(frozen=True)
class KernelImage:
    """A kernel the microVM can boot: ``root`` holds boot/ and lib/modules/."""

    version: str
    vmlinuz: Path
    root: Path

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.version

    def has_module(self, name: str) -> bool:
        """Whether ``name`` (e.g. ``sch_netem``) is in this kernel, built in or as a module."""
        wanted = name.replace("-", "_")
        for index in ("modules.dep", "modules.builtin"):
            try:
                text = (self.modules / index).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                path = line.split(":", 1)[0]
                base = path.rsplit("/", 1)[-1].split(".ko", 1)[0].replace("-", "_")
                if base == wanted:
                    return True
        return False


def kernel_dir() -> Path:
    """The kernel cache (``QUICBED_KERNEL_DIR``, default /var/lib/quicbed/kernel)."""
    return Path(os.environ.get("QUICBED_KERNEL_DIR") or DEFAULT_KERNEL_DIR)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def stderr_progress(message: str) -> None:
    print(f"quicbed: {message}", file=sys.stderr, flush=True)


# --- the cache -------------------------------------------------------------------------


def _version_key(version: str) -> list[tuple[int, object]]:
    """Sort key for kernel versions: numbers compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"[.\-+~]", version)]


def kernel_in(directory: Path) -> KernelImage | None:
    """The kernel unpacked in ``directory`` (ROOT with boot/vmlinuz-VER and lib/modules/VER)."""
    for vmlinuz in sorted((directory / "boot").glob("vmlinuz-*")):
        version = vmlinuz.name[len("vmlinuz-") :]
        if (directory / "lib" / "modules" / version).is_dir():
            return KernelImage(version, vmlinuz, directory)
    return None


def cached_kernels(cache: Path | None = None) -> list[KernelImage]:
    """All complete kernels in the cache, newest version last."""
    cache = cache or kernel_dir()
    if not cache.is_dir():
        return []
    found = []
    for entry in cache.iterdir():
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        image = kernel_in(entry)
        if image is not None:
            found.append(image)
    return sorted(found, key=lambda image: _version_key(image.version))


def cached_kernel(cache: Path | None = None) -> KernelImage | None:
    """The kernel the microVM boots (``current``, else the newest cached), or None."""
    cache = cache or kernel_dir()
    current = cache / CURRENT_LINK
    if current.is_symlink() or current.is_dir():
        image = kernel_in(current.resolve())
        if image is not None:
            return image
    kernels = cached_kernels(cache)
    return kernels[-1] if kernels else None


def set_current(cache: Path, version: str) -> None:
    """Point ``cache``/current at ``version`` (replaced in one step: readers never see it missing)."""
    link = cache / CURRENT_LINK
    temporary = cache / f".{CURRENT_LINK}.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(version)
    temporary.replace(link)


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """One fetch or build at a time (e.g. two pytest sessions starting together)."""
    with open(cache / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prepare_cache(cache: Path) -> None:
    try:
        cache.mkdir(parents=True, exist_ok=True)
        probe = cache / f".write-test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise KernelError(
            f"cannot write the kernel cache {cache} ({error.strerror or error}): run as root "
            f"(e.g. 'sudo quicbed vm setup') or set QUICBED_KERNEL_DIR to a writable directory "
            f"outside /tmp, /run and /var/cache (those are empty inside the VM)"
        ) from None


# --- which package ---------------------------------------------------------------------


def read_os_release(path: Path = Path("/etc/os-release")) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return values
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def distribution_family(os_release: dict[str, str]) -> str:
    """``"ubuntu"``, ``"debian"`` or ``""`` (unsupported) from /etc/os-release values."""
    ids = [os_release.get("ID", "").lower(), *os_release.get("ID_LIKE", "").lower().split()]
    if "ubuntu" in ids:
        return "ubuntu"
    if "debian" in ids:
        return "debian"
    return ""


def meta_packages(family: str, arch: str = "amd64") -> list[str]:
    """The meta packages that depend on the current distribution kernel, best first."""
    if family == "debian":
        return [f"linux-image-{arch}"]
    if family == "ubuntu":
        # -generic pulls linux-modules-extra (mac80211_hwsim); -virtual is a fallback.
        return ["linux-image-generic", "linux-image-virtual"]
    return []


def parse_apt_depends(output: str) -> list[str]:
    """Package names on the ``Depends:`` lines of ``apt-cache depends`` output.

    Alternatives (``|Depends:``) count; virtual packages (``<name>``) are unwrapped.
    """
    names = []
    for line in output.splitlines():
        match = re.match(r"\s*\|?(?:Pre)?Depends:\s*<?([A-Za-z0-9.+\-]+)>?", line)
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


_IMAGE_PACKAGE = re.compile(r"linux-image-(?!unsigned-|uc-)(\d[\w.+~-]*)")


def resolve_kernel_packages(depends_output: str, family: str) -> tuple[str, list[str]]:
    """From a meta package's ``apt-cache depends`` output: (kernel version, packages to fetch).

    Debian: ``linux-image-6.1.0-56-amd64`` holds vmlinuz and every module. Ubuntu:
    ``linux-image-<ver>`` holds only vmlinuz; modules are in ``linux-modules-<ver>`` and
    ``linux-modules-extra-<ver>`` (mac80211_hwsim is in the latter).
    """
    for name in parse_apt_depends(depends_output):
        match = _IMAGE_PACKAGE.fullmatch(name)
        if match and not name.endswith("-unsigned") and not name.endswith("-dbg"):
            version = match.group(1)
            packages = [name]
            if family == "ubuntu":
                packages += [f"linux-modules-{version}", f"linux-modules-extra-{version}"]
            return version, packages
    raise KernelError(
        "apt names no linux-image-<version> package among these dependencies:\n"
        + (depends_output.strip() or "(nothing)")
    )


def _run(argv: list[str], *, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise MissingDependency(f"'{argv[0]}' is not installed") from None
    except subprocess.TimeoutExpired:
        raise KernelError(f"'{' '.join(argv)}' did not finish within {timeout:.0f} s") from None


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _need(binary: str, package: str) -> str:
    search = ":".join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
    path = shutil.which(binary, path=search)
    if not path:
        raise MissingDependency(
            f"'{binary}' is needed to prepare the microVM kernel: "
            f"install the '{package}' package (apt-get install {package})"
        )
    return path


def dpkg_architecture() -> str:
    if shutil.which("dpkg"):
        result = _run(["dpkg", "--print-architecture"], timeout=30)
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def latest_available(progress: Progress | None = None) -> tuple[str, list[str]]:
    """Ask apt (no network) which kernel version and packages the distribution offers now."""
    family = distribution_family(read_os_release())
    if not family:
        raise KernelError(
            "fetching the microVM kernel is automated on Debian and Ubuntu only: put a kernel in "
            f"{kernel_dir()}/<version>/boot/vmlinuz-<version> with its modules in "
            f"{kernel_dir()}/<version>/lib/modules/<version> (run 'depmod -b DIR <version>')"
        )
    if not shutil.which("apt-cache"):
        raise MissingDependency(
            "apt-cache is missing; cannot look up the distribution kernel "
            "(install apt, or give .deb files: quicbed vm setup --deb FILE ...)"
        )
    arch = dpkg_architecture()
    candidates = meta_packages(family, arch)
    problems = []
    for meta in candidates:
        _say(progress, f"looking up the kernel package behind {meta} (apt-cache depends)")
        result = _run(["apt-cache", "depends", meta], timeout=120)
        if result.returncode != 0:
            problems.append(f"{meta}: {_tail(result.stderr, 2) or 'unknown to apt'}")
            continue
        try:
            version, packages = resolve_kernel_packages(result.stdout, family)
        except KernelError as error:
            problems.append(f"{meta}: {error}")
            continue
        # Ubuntu's modules packages: not every release or flavour has both; keep those apt knows.
        return version, [packages[0]] + [name for name in packages[1:] if _apt_knows(name)]
    raise KernelError(
        "apt does not know a kernel package (" + "; ".join(problems) + "). "
        "Refresh the package lists with 'apt-get update' (as root) and retry, "
        "or give .deb files: quicbed vm setup --deb FILE ..."
    )


def _apt_knows(package: str) -> bool:
    result = _run(["apt-cache", "show", "-q", package], timeout=120)
    return result.returncode == 0 and bool(result.stdout.strip())


def _download(packages: list[str], into: Path, progress: Progress | None) -> list[Path]:
    apt_get = _need("apt-get", "apt")
    _say(progress, f"downloading {', '.join(packages)} (apt-get download; ~70-120 MB)")
    started = time.monotonic()
    # As root, apt drops to the _apt user, who cannot write here: download as root instead.
    argv = [apt_get, "download", "-q", *packages]
    if os.geteuid() == 0:
        argv[2:2] = ["-o", "APT::Sandbox::User=root"]
    result = _run(argv, cwd=into, timeout=1800)
    if result.returncode != 0:
        raise KernelError(
            f"apt-get download {' '.join(packages)} failed:\n{_tail(result.stderr or result.stdout)}\n"
            "This needs access to the distribution mirror: check that 'apt-get update' works "
            "(proxy settings in /etc/apt/apt.conf.d), or download these packages on another "
            "machine and run 'quicbed vm setup --deb FILE ...'"
        )
    debs = sorted(into.glob("*.deb"))
    _say(progress, f"downloaded {len(debs)} package(s) in {time.monotonic() - started:.0f} s")
    return debs


def _unpack(debs: Iterable[Path], root: Path, progress: Progress | None) -> None:
    dpkg_deb = _need("dpkg-deb", "dpkg")
    for deb in debs:
        _say(progress, f"unpacking {deb.name}")
        result = _run([dpkg_deb, "-x", str(deb), str(root)], timeout=900)
        if result.returncode != 0:
            raise KernelError(f"dpkg-deb -x {deb} failed: {_tail(result.stderr)}")
    # Newer packages ship /usr/lib/modules only; keep one layout (ROOT/lib/modules).
    usr_modules = root / "usr" / "lib" / "modules"
    if usr_modules.is_dir():
        target = root / "lib" / "modules"
        target.mkdir(parents=True, exist_ok=True)
        for entry in usr_modules.iterdir():
            destination = target / entry.name
            if destination.exists():
                shutil.copytree(entry, destination, dirs_exist_ok=True, symlinks=True)
                shutil.rmtree(entry)
            else:
                entry.rename(destination)
    usr_boot = root / "usr" / "boot"
    if not (root / "boot").is_dir() and usr_boot.is_dir():
        usr_boot.rename(root / "boot")


def _depmod(image: KernelImage, progress: Progress | None) -> None:
    depmod = _need("depmod", "kmod")
    _say(progress, f"indexing modules (depmod {image.version})")
    result = _run([depmod, "-a", "-b", str(image.root), image.version], timeout=600)
    if result.returncode != 0 or not (image.modules / "modules.dep").exists():
        raise KernelError(f"depmod -b {image.root} {image.version} failed: {_tail(result.stderr)}")


def install_debs(
    debs: list[Path], cache: Path | None = None, progress: Progress | None = None, packages: list[str] | None = None
) -> KernelImage:
    """Unpack kernel .deb files into the cache and make the result the current kernel."""
    cache = cache or kernel_dir()
    _prepare_cache(cache)
    missing = [str(deb) for deb in debs if not Path(deb).is_file()]
    if missing:
        raise KernelError(f"no such file: {', '.join(missing)}")
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache))
    try:
        _unpack(debs, staging, progress)
        image = kernel_in(staging)
        if image is None:
            names = ", ".join(Path(deb).name for deb in debs)
            raise KernelError(
                f"{names}: no boot/vmlinuz-<version> with lib/modules/<version> inside; "
                "give the linux-image package (and on Ubuntu linux-modules and "
                "linux-modules-extra of the same version)"
            )
        # Ubuntu keeps vmlinuz readable by root only; the VM runner reads it as the caller.
        with contextlib.suppress(OSError):
            image.vmlinuz.chmod(0o644)
        _depmod(image, progress)
        info = {
            "version": image.version,
            "packages": packages or [Path(deb).name for deb in debs],
            "fetched": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (staging / KERNEL_INFO).write_text(json.dumps(info, indent=1) + "\n")
        staging.chmod(0o755)
        final = cache / image.version
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        set_current(cache, image.version)
        return kernel_in(final) or image
    except OSError as error:
        raise KernelError(
            f"preparing the kernel in {cache} failed: {error} (is the disk full? about 500 MB are needed)"
        ) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def ensure_kernel(
    progress: Progress | None = stderr_progress, *, update: bool = False, debs: list[Path] | None = None
) -> KernelImage:
    """The microVM kernel, fetched and unpacked into the cache if it is not there yet.

    Idempotent: with a cached kernel and ``update=False`` nothing is run. ``update=True``
    asks apt for the current kernel version and fetches it if it is not the cached one.
    ``debs`` installs the given .deb files instead of downloading (offline hosts).
    """
    cache = kernel_dir()
    if debs:
        _prepare_cache(cache)
        with cache_lock(cache):
            return install_debs([Path(deb) for deb in debs], cache, progress)
    if not update:
        image = cached_kernel(cache)
        if image is not None:
            return image
    _prepare_cache(cache)
    with cache_lock(cache):
        if not update:
            image = cached_kernel(cache)  # another process may have fetched it meanwhile
            if image is not None:
                return image
        version, packages = latest_available(progress)
        existing = kernel_in(cache / version)
        if existing is not None:
            _say(progress, f"kernel {version} is already in {cache}")
            set_current(cache, version)
            return existing
        _need("dpkg-deb", "dpkg")
        _need("depmod", "kmod")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as download:
            debs_found = _download(packages, Path(download), progress)
            image = install_debs(debs_found, cache, progress, packages=packages)
        _say(progress, f"kernel {image.version} ready in {image.root} ({time.monotonic() - started:.0f} s)")
        return image


def fetchable() -> tuple[bool, str]:
    """Whether :func:`ensure_kernel` could fetch a kernel here (tools present; no network test)."""
    if not distribution_family(read_os_release()):
        return False, "not Debian or Ubuntu: put a kernel into the cache by hand (see docs/microvm.md)"
    for binary, package in (("apt-get", "apt"), ("apt-cache", "apt"), ("dpkg-deb", "dpkg"), ("depmod", "kmod")):
        try:
            _need(binary, package)
        except MissingDependency as error:
            return False, str(error)
    return True, "can be fetched with 'quicbed vm setup'"
