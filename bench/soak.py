#!/usr/bin/env python3
"""Does quicbed leave anything behind over hundreds of runs? Makes N runs in this one process
(default 500: the ns3 and netns backends, TCP and QUIC, small objects, each run on a network of
its own unless --reuse cell) and prints, every 50 runs, what a leak would grow: network
namespaces, quicbed's processes (other than this one), this process's open fds and memory,
TAP devices, CPU-accounting cgroups, quicbed's scratch folders, and the share of runs invalid
or failed.

    sudo .venv/bin/python bench/soak.py                  # 500 runs
    sudo .venv/bin/python bench/soak.py --runs 100 --every 20
    sudo .venv/bin/python bench/soak.py --backends ns3   # one backend only

The runs are bounded in count (--runs) and time (--max-minutes: the soak stops after the chunk
that passes it). Results go to a temporary folder, removed at the end (--keep keeps it). The
netns half needs no netem: its link is a rate limit only. Exit status 1 if a count grew over
the soak (after the first chunk, which sets caches and pools up).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.host.signals import install_termination_handlers  # noqa: E402
from quicbed.host import ownership  # noqa: E402
from quicbed.runner.engine import ExperimentRunner, RunnerOptions  # noqa: E402
from quicbed.spec.experiment import load_experiment  # noqa: E402

#: per backend: a small topology every host here can realise, and its client
TOPOLOGIES = {
    "ns3": ({"script": str(ROOT / "topologies" / "wifi_ap.py"), "params": {"wired_delay": "2ms"}}, "sta1"),
    "netns": (
        {"script": str(ROOT / "topologies" / "dumbbell.py"), "params": {"rate": "50mbit", "delay": "0ms"}},
        "client",
    ),
}
TRANSPORTS = ("tcp", "quic")
#: counts that must stay flat (the runner's memory is shown, judged by eye: Python's allocator keeps pools)
FLAT = ("namespaces", "processes", "fds", "taps", "cgroups", "scratch")


@dataclass
class Sample:
    runs: int
    seconds: float
    namespaces: int
    processes: int
    fds: int
    taps: int
    cgroups: int
    scratch: int
    rss_mb: float
    peak_mb: float
    invalid: int
    failed: int
    chunk: int

    def row(self) -> str:
        share = f"{(self.invalid + self.failed) / self.chunk:6.1%}" if self.chunk else "     -"
        return (
            f"{self.runs:5d} {self.seconds / 60:7.1f} {self.namespaces:5d} {self.processes:6d} {self.fds:5d} "
            f"{self.taps:5d} {self.cgroups:5d} {self.scratch:6d} {self.rss_mb:7.1f} {self.peak_mb:7.1f} "
            f"{self.invalid:5d} {self.failed:5d} {share}"
        )


HEADER = " runs     min   nsm  procs   fds  taps  cgrps scratch  rss MB peak MB  inv  fail  share"


def taps() -> int:
    """TUN/TAP devices in this namespace and in quicbed's (ns-3's TAPs live in the nodes')."""
    count = sum(1 for device in Path("/sys/class/net").iterdir() if (device / "tun_flags").exists())
    for namespace in ownership.quicbed_namespaces():
        listed = subprocess.run(
            ["ip", "-n", namespace, "-o", "link", "show", "type", "tun"], capture_output=True, text=True, check=False
        )
        count += len(listed.stdout.splitlines())
    return count


def processes(folder: Path) -> int:
    """Processes other than this one that belong to quicbed on this root: their command line
    names quicbed or the soak's folder (another root's, e.g. a container's, are not counted)."""
    own_root, count = os.readlink("/proc/self/root"), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/root") != own_root:
                continue
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        count += "quicbed" in command or str(folder) in command
    return count


def cgroups() -> int:
    found = 0
    for root in (Path("/sys/fs/cgroup/quicbed"), *Path("/sys/fs/cgroup").glob("*/quicbed")):
        if root.is_dir():
            found += sum(1 for path in root.rglob("*") if path.is_dir())
    return found


def scratch() -> int:
    """quicbed's folders in the temporary directory (each run makes and removes its own)."""
    return sum(1 for path in Path(tempfile.gettempdir()).glob("quicbed-*"))


def memory_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def sample(folder: Path, runs: int, started: float, invalid: int, failed: int, chunk: int) -> Sample:
    return Sample(
        runs=runs,
        seconds=time.monotonic() - started,
        namespaces=len(ownership.quicbed_namespaces()),
        processes=processes(folder),
        fds=len(os.listdir("/proc/self/fd")),
        taps=taps(),
        cgroups=cgroups(),
        scratch=scratch(),
        rss_mb=memory_mb(),
        peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        invalid=invalid,
        failed=failed,
        chunk=chunk,
    )


def experiment_file(folder: Path, backend: str, runs: int, reuse: str, object_size: str) -> Path:
    """An experiment of ``runs`` runs (rounded up to the transports) on ``backend``."""
    repetitions = max(1, -(-runs // len(TRANSPORTS)))
    path = folder / f"soak-{backend}.json"  # JSON is YAML
    path.write_text(
        json.dumps(
            {
                "name": f"soak-{backend}",
                "backend": backend,
                "topology": TOPOLOGIES[backend][0],
                "client": TOPOLOGIES[backend][1],
                "server": "server",
                "workload": {"object": object_size},
                "matrix": {"transport": list(TRANSPORTS)},
                "repetitions": repetitions,
                "warmup": 0,
                "timeout": "60s",
                "reuse": reuse,
            }
        )
    )
    return path


def split(chunk: int, backends: list[str]) -> dict[str, int]:
    """A chunk's runs over the backends, as evenly as the transports allow."""
    share, left = {}, chunk
    for index, backend in enumerate(backends):
        runs = -(-left // (len(backends) - index))
        runs += runs % len(TRANSPORTS)  # whole repetitions
        share[backend] = min(runs, left) if index == len(backends) - 1 else runs
        left -= share[backend]
    return share


def run_chunk(
    folder: Path, number: int, backends: list[str], chunk: int, reuse: str, object_size: str
) -> tuple[int, int, int]:
    """(runs made, invalid, failed)."""
    made = invalid = failed = 0
    for backend, runs in split(chunk, backends).items():
        if runs <= 0:
            continue
        experiment = load_experiment(experiment_file(folder, backend, runs, reuse, object_size), {})
        out = folder / f"chunk-{number:03d}-{backend}"
        summary = ExperimentRunner(experiment, RunnerOptions(out=out, backend=backend, command=["bench/soak.py"])).run()
        made += summary.ok + summary.invalid + summary.failed
        invalid += summary.invalid
        failed += summary.failed
        shutil.rmtree(out / "runs", ignore_errors=True)  # the records are not the point; the disk is
    return made, invalid, failed


def grew(samples: list[Sample]) -> list[str]:
    """The counts that ended above where they were after the first chunk."""
    if len(samples) < 3:
        return []
    settled, last = samples[1], samples[-1]
    return [
        f"{name} {getattr(settled, name)} -> {getattr(last, name)}"
        for name in FLAT
        if getattr(last, name) > getattr(settled, name)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="runs in all (default 500)")
    parser.add_argument("--every", type=int, default=50, help="runs between two lines (default 50)")
    parser.add_argument("--backends", default="ns3,netns", help="comma-separated (default ns3,netns)")
    parser.add_argument(
        "--reuse",
        choices=("run", "cell"),
        default="run",
        help="run: a network of its own for every run (default); cell: shared within a cell",
    )
    parser.add_argument("--object", default="100KB", help="the object each run downloads (default 100KB)")
    parser.add_argument("--max-minutes", type=float, default=180.0, help="stop after the chunk past this")
    parser.add_argument("--keep", action="store_true", help="keep the results folder (path printed)")
    args = parser.parse_args()
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = [name for name in backends if name not in TOPOLOGIES]
    if unknown or not backends:
        parser.error(f"--backends: {', '.join(unknown) or '(none)'} (choose from {', '.join(TOPOLOGIES)})")
    if os.geteuid() != 0:
        parser.error("run as root: runs build network namespaces")
    if args.runs < 1 or args.every < 1:
        parser.error("--runs and --every must be at least 1")
    install_termination_handlers()  # Ctrl-C, SIGTERM, SIGHUP: the run in progress is cleaned up

    folder = Path(tempfile.mkdtemp(prefix="soak-", dir=ROOT / "results" if (ROOT / "results").is_dir() else None))
    started = time.monotonic()
    print(
        f"quicbed soak, {time.strftime('%Y-%m-%d')}: {args.runs} runs on {', '.join(backends)} "
        f"({', '.join(TRANSPORTS)}, {args.object}, reuse {args.reuse}), a line every {args.every}"
    )
    print(HEADER)
    samples = [sample(folder, 0, started, 0, 0, 0)]
    print(samples[0].row(), flush=True)
    done, number = 0, 0
    try:
        while done < args.runs and (time.monotonic() - started) / 60 < args.max_minutes:
            number += 1
            made, invalid, failed = run_chunk(
                folder, number, backends, min(args.every, args.runs - done), args.reuse, args.object
            )
            done += made
            samples.append(sample(folder, done, started, invalid, failed, made))
            print(samples[-1].row(), flush=True)
    finally:
        if args.keep:
            print(f"results kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    growth = grew(samples)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"{done} runs in {(time.monotonic() - started) / 60:.1f} min; CPU: this process "
        f"{cpu.ru_utime + cpu.ru_stime:.0f} s, its children {children.ru_utime + children.ru_stime:.0f} s"
    )
    print("flat: " + ("no, " + "; ".join(growth) if growth else f"yes ({', '.join(FLAT)} after the first chunk)"))
    return 1 if growth else 0


if __name__ == "__main__":
    sys.exit(main())
