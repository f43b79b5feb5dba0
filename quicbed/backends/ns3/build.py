"""Build the ns-3 channel program (C++) against the distribution's ns-3, once per source version.

    python -m quicbed.backends.ns3.build          # build if needed, print the binary's path
    python -m quicbed.backends.ns3.build --force  # rebuild

The binary goes to ``$QUICBED_NS3_CACHE`` (default /var/lib/quicbed/ns3-channel) under a
folder named after a hash of the sources, the Makefile and the installed ns-3 libraries, so
an edited source or an upgraded libns3-dev triggers a rebuild and nothing stale is used.
Debian/Ubuntu's ns-3 pkg-config files are broken: the Makefile names the libraries itself.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from quicbed.errors import BackendError, MissingDependency

SOURCE_DIR = Path(__file__).resolve().parent / "channel"
BINARY_NAME = "quicbed-ns3-channel"
NS3_INCLUDE = Path(os.environ.get("QUICBED_NS3_INCLUDE", "/usr/include"))
LIBRARY_DIRS = (
    Path("/usr/lib/x86_64-linux-gnu"),
    Path("/usr/lib/aarch64-linux-gnu"),
    Path("/usr/lib"),
    Path("/usr/local/lib"),
)
REQUIRED_HEADERS = ("ns3/wifi-module.h", "ns3/fd-net-device-module.h", "ns3/core-module.h")
REQUIRED_LIBRARIES = ("wifi", "fd-net-device", "mobility", "propagation", "network", "core")
#: the channel is linked with jemalloc: ns-3 allocates and frees a few objects per frame
#: and receiver, and glibc's malloc cost it a quarter of its capacity (bench/README.md)
ALLOCATOR_LIBRARY = "libjemalloc.so"
INSTALL_HINT = "apt-get install libns3-dev libjemalloc-dev g++ make"


def cache_root() -> Path:
    return Path(os.environ.get("QUICBED_NS3_CACHE", "/var/lib/quicbed/ns3-channel"))


def _library(file_name: str) -> Path | None:
    for directory in LIBRARY_DIRS:
        path = directory / file_name
        if path.exists():
            return path
    return None


#: the oldest ns-3 whose API the channel program is written for (Debian 12's; Ubuntu 22.04 has 3.35)
MINIMUM_VERSION = (3, 37)


def installed_version(include: Path | None = None) -> tuple[int, int] | None:
    """ns-3's (major, minor) from the first version-defines.h of its headers (Debian's under
    /usr/include/ns3, Ubuntu 22.04's under /usr/include/ns3.35/ns3), or None."""
    root = include or NS3_INCLUDE
    for header in [
        root / "ns3" / "version-defines.h",
        *map(Path, sorted(glob.glob(f"{root}/ns3*/ns3/version-defines.h"))),
    ]:
        try:
            text = header.read_text()
        except OSError:
            continue
        major = re.search(r"#define NS3_VERSION_MAJOR\s+(\d+)", text)
        minor = re.search(r"#define NS3_VERSION_MINOR\s+(\d+)", text)
        if major and minor:
            return int(major.group(1)), int(minor.group(1))
    return None


def missing() -> str | None:
    """Why the channel program cannot be built here, or None when it can."""
    version = installed_version()
    if version is not None and version < MINIMUM_VERSION:
        return (
            f"ns-3 {version[0]}.{version[1]} is installed; the channel program needs ns-3 "
            f"{MINIMUM_VERSION[0]}.{MINIMUM_VERSION[1]} or later (Debian 12's libns3-dev; the ns3 backend is not "
            "available on this distribution, docs/provisioning.md)"
        )
    headers = [h for h in REQUIRED_HEADERS if not (NS3_INCLUDE / h).exists()]
    libraries = [f"libns3-{lib}.so" for lib in REQUIRED_LIBRARIES if _library(f"libns3-{lib}.so") is None]
    if headers or libraries:
        what = ", ".join([*(str(NS3_INCLUDE / h) for h in headers), *libraries])
        return f"ns-3 headers/libraries not found ({what}) (fix: {INSTALL_HINT})"
    if _library(ALLOCATOR_LIBRARY) is None:
        return f"jemalloc, which the ns-3 channel program is linked with, not found ({ALLOCATOR_LIBRARY}) (fix: {INSTALL_HINT})"
    for tool in ("make", os.environ.get("CXX", "g++")):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed, needed to build the ns-3 channel program (fix: {INSTALL_HINT})"
    return None


def sources() -> list[Path]:
    return sorted(
        p for p in SOURCE_DIR.iterdir() if p.is_file() and (p.suffix in (".cc", ".h") or p.name == "Makefile")
    )


def source_hash() -> str:
    """Hash of the sources and of the libraries they link against (ns-3's, jemalloc)."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in [*(f"libns3-{lib}.so" for lib in REQUIRED_LIBRARIES), ALLOCATOR_LIBRARY]:
        library = _library(name)
        if library is not None:
            real = library.resolve()
            digest.update(f"{real}:{real.stat().st_size}:{int(real.stat().st_mtime)}\0".encode())
    return digest.hexdigest()[:16]


def binary_path() -> Path:
    return cache_root() / source_hash() / BINARY_NAME


def ensure_built(force: bool = False, quiet: bool = True) -> Path:
    """Path of an up-to-date channel program, building it first when needed."""
    reason = missing()
    if reason:
        raise MissingDependency(reason)
    target = binary_path()
    if target.exists() and os.access(target, os.X_OK) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = cache_root() / ".build.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; others wait and reuse it
        if target.exists() and os.access(target, os.X_OK) and not force:
            return target
        # one compiler per CPU; the objects go beside the binary (the sources may be read-only)
        command = [
            "make",
            "-B" if force else "-s",
            f"-j{os.cpu_count() or 1}",
            "-C",
            str(SOURCE_DIR),
            f"OUT={target}",
            f"NS3_INCLUDE={NS3_INCLUDE}",
        ]
        if not quiet:
            print(f"building {target} (about 10 s)", file=sys.stderr)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not target.exists():
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-25:])
            raise BackendError(f"building the ns-3 channel program failed ({' '.join(command)}):\n{tail}")
        prune(keep=KEEP_BUILDS)
    return target


KEEP_BUILDS = 3


def prune(keep: int = KEEP_BUILDS) -> list[Path]:
    """Remove all but the ``keep`` most recent builds (other checkouts rebuild if they need one)."""
    builds = sorted(
        (p for p in cache_root().iterdir() if p.is_dir() and (p / BINARY_NAME).exists()),
        key=lambda p: (p / BINARY_NAME).stat().st_mtime,
        reverse=True,
    )
    removed = []
    for old in builds[keep:]:
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    return removed


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m quicbed.backends.ns3.build", description="Build the quicbed ns-3 channel program if needed."
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--check", action="store_true", help="only say whether it can be built")
    args = parser.parse_args(argv)
    if args.check:
        reason = missing()
        print(reason or "ok")
        return 1 if reason else 0
    try:
        print(ensure_built(force=args.force, quiet=False))
    except (MissingDependency, BackendError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
