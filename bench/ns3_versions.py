#!/usr/bin/env python3
"""Is a newer ns-3 faster at simulating a WiFi cell than the one the channel links? (prints figures)

    .venv/bin/python bench/ns3_versions.py                         # the grid below, ~4 minutes
    .venv/bin/python bench/ns3_versions.py --stations 40 --phys ac20 --runs 3
    .venv/bin/python bench/ns3_versions.py --wheel ~/ns3-3.44.post0-cp311-...whl

The channel's speed is ns-3's speed: its simulator thread spends most of its time in ns-3's
PHY, MAC and scheduler (bench/channel.py). Porting the channel to another release is worth it
only if that release simulates the same cell faster. This bench answers that without the
port: bench/ns3_cell.cc, written against ns-3's public API only, is built against the
distribution's ns-3 (libns3-dev, the release the channel uses) and against the release on
PyPI (its wheel ships headers and libraries; downloaded once into ~/.cache/quicbed), and each
build simulates the same cells in simulated time: one AP, N stations at 5 m, a saturated UDP
download to each (120 % of the PHY rate shared out), constant rate, A-MPDU on. For each
cell it prints the CPU time and the wall time per simulated second (below 1 is faster than
real time; the channel needs headroom on top of it for its TAP devices, real-time pacing and
the TCP ACKs of real endpoints; CPU time is the figure to compare: it leaves out what the
hypervisor took, which moves wall time by tens of percent on this VM), simulator
events, PPDUs and MPDUs (every radio's, control frames
too) per simulated second, and the goodput (the two releases should agree: the
same cell). Each build runs pinned to the last core, the releases alternating run by run,
with the same run numbers, and both with the allocator the channel links (jemalloc) when it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "bench" / "ns3_cell.cc"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "quicbed" / "ns3-wheels"
DEFAULT_WHEEL = "ns3==3.44.post0"
LIBRARIES = (
    "applications",
    "internet",
    "wifi",
    "mobility",
    "network",
    "core",
    "propagation",
    "spectrum",
    "antenna",
    "energy",
    "traffic-control",
    "bridge",
    "stats",
)
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")


def fail(message: str) -> None:
    raise SystemExit(f"bench/ns3_versions.py: {message}")


def wheel_prefix(requirement: str, wheel: Path | None) -> Path:
    """The unpacked ns3 folder of a PyPI wheel (include/, lib64/), downloading it if needed."""
    if wheel is None:
        CACHE.mkdir(parents=True, exist_ok=True)
        found = sorted(CACHE.glob("ns3-*.whl"))
        if not found:
            print(f"downloading {requirement} from PyPI into {CACHE} (about 70 MB)", file=sys.stderr)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "-d",
                    str(CACHE),
                    requirement,
                ],
                check=True,
            )
            found = sorted(CACHE.glob("ns3-*.whl"))
        if not found:
            fail(f"pip found no wheel for {requirement}: give one with --wheel")
        wheel = found[-1]
    unpacked = CACHE / wheel.stem
    if not (unpacked / "ns3" / "lib64").is_dir():
        with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
            zipfile.ZipFile(wheel).extractall(scratch)
            shutil.rmtree(unpacked, ignore_errors=True)
            os.replace(scratch, unpacked)
            os.mkdir(scratch)  # for TemporaryDirectory's clean-up
    return unpacked / "ns3"


def distribution_release() -> str:
    """The release of the distribution's ns-3 ("3.37"), from its core library's soname."""
    found = sorted(Path("/usr/lib").glob("*/libns3-core.so.*")) + sorted(Path("/usr/lib").glob("libns3-core.so.*"))
    return f"3.{found[0].name.rsplit('.', 1)[-1]}" if found else "distribution"


def build(label: str, folder: Path, prefix: Path | None, version_tag: str) -> Path:
    """bench/ns3_cell.cc built against the distribution's ns-3 (prefix None) or a wheel's."""
    binary = folder / f"cell-{label}"
    libs = [f"-lns{version_tag}-{lib}" for lib in LIBRARIES]
    flags = ["-O2", "-std=c++17"]  # 3.37's headers are not C++20; 3.44's need it
    if prefix is not None:
        flags = [
            "-O2",
            "-std=c++20",
            f"-I{prefix / 'include'}",
            f"-L{prefix / 'lib64'}",
            f"-Wl,-rpath,{prefix / 'lib64'}",
        ]
    done = subprocess.run(["g++", *flags, str(SOURCE), "-o", str(binary), *libs], capture_output=True, text=True)
    if done.returncode:
        fail(f"building {SOURCE.name} against ns-3 {label} failed:\n{done.stderr[-3000:]}")
    return binary


def simulate(binary: Path, stations: int, phy: str, run: int, seconds: float) -> dict:
    core = str(os.cpu_count() - 1)
    env = dict(os.environ)
    if JEMALLOC.exists():
        env["LD_PRELOAD"] = str(JEMALLOC)
    done = subprocess.run(
        [
            "taskset",
            "-c",
            core,
            str(binary),
            f"--stations={stations}",
            f"--phy={phy}",
            f"--run={run}",
            f"--seconds={seconds:g}",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode:
        fail(f"{binary.name} --stations={stations} --phy={phy} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{min(values):>4.2f}-{max(values):<4.2f}"


def mean(runs: list[dict], key: str) -> float:
    """Per simulated second."""
    return statistics.mean(r[key] / r["simulated_s"] for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", default="1,10,20,40", help="comma-separated (default 1,10,20,40)")
    parser.add_argument("--phys", default="n20,ac20,ac80", help="n20, ac20, ac80, comma-separated (default all)")
    parser.add_argument("--runs", type=int, default=3, help="run numbers 1..N per cell and release (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="simulated seconds per run (default 3)")
    parser.add_argument("--requirement", default=DEFAULT_WHEEL, help=f"the PyPI release (default {DEFAULT_WHEEL})")
    parser.add_argument("--wheel", type=Path, help="a downloaded ns3 wheel instead")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    if shutil.which("g++") is None or not Path("/usr/include/ns3/wifi-module.h").exists():
        fail("needs g++ and the distribution's ns-3 headers: apt-get install g++ libns3-dev")
    if args.wheel is not None and not args.wheel.is_file():
        fail(f"--wheel {args.wheel}: no such file")
    newer = wheel_prefix(args.requirement, args.wheel)
    newer_label = next(newer.glob("lib64/libns3.*-core.so")).name.split("-")[0].removeprefix("libns")
    with tempfile.TemporaryDirectory(prefix="quicbed-bench-ns3-") as scratch:
        builds = {
            distribution_release(): build("distribution", Path(scratch), None, "3"),
            newer_label: build(newer_label, Path(scratch), newer, f"{newer_label}"),
        }
        rows = []
        print(
            f"{'stations':>8} {'phy':<5} {'release':<8} {'cpu/sim':>9} {'wall/sim':>9} {'events/s':>9} "
            f"{'PPDU/s':>7} {'MPDU/s':>7} {'goodput':>8}",
            flush=True,
        )
        for phy in args.phys.split(","):
            for stations in (int(n) for n in args.stations.split(",")):
                # the releases alternate run by run: a slower spell of the machine falls on both
                runs: dict[str, list[dict]] = {label: [] for label in builds}
                for run in range(1, args.runs + 1):
                    for label, binary in builds.items():
                        runs[label].append({**simulate(binary, stations, phy, run, args.seconds), "release": label})
                for label, done in runs.items():
                    rows += done
                    print(
                        f"{stations:>8} {phy:<5} {label:<8} {spread([r['cpu_s'] / r['simulated_s'] for r in done])}"
                        f" {spread([r['wall_s'] / r['simulated_s'] for r in done])}"
                        f"{mean(done, 'events'):>9.0f} {mean(done, 'ppdus'):>7.0f} {mean(done, 'mpdus'):>7.0f}"
                        f" {statistics.mean(r['goodput_mbps'] for r in done):>7.1f}M",
                        flush=True,
                    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
