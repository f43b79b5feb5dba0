#!/usr/bin/env python3
"""Do results folders survive anything? A small study (netns dumbbell, TCP and QUIC, 100 kB,
8 repetitions) runs as two shards split by run; each shard's `quicbed run` is killed with
SIGKILL at random moments, its results.jsonl is torn as a power loss would leave it (the last
line cut), and it is resumed, the last time with a warm-up run per cell and 10 repetitions, until
it completes. Then the shards are merged, and the merged folder must hold every planned run
exactly once, with each run's folder.

    sudo .venv/bin/python bench/chaos.py                     # seed 1, 3 kills per shard
    sudo .venv/bin/python bench/chaos.py --seed 7 --kills 5 --keep

Bounded: at most --kills + 3 sessions per shard, each stopped after --session-timeout seconds.
`quicbed clean` runs after every kill (the killed runner's namespaces and processes). Exit
status 1 if a planned run is missing, doubled or without its folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.errors import QuicbedError  # noqa: E402
from quicbed.runner.folder import latest_records, read_results  # noqa: E402
from quicbed.runner.merge import expected_run_ids  # noqa: E402

EXPERIMENT = f"""name: chaos
topology:
  script: {ROOT / "topologies" / "dumbbell.py"}
  params: {{rate: 50mbit, delay: 0ms}}
backend: netns
workload: {{object: 100kB}}
matrix:
  transport: [tcp, quic]
repetitions: 8
warmup: 0
"""


def quicbed(*args: str) -> list[str]:
    return [sys.executable, "-m", "quicbed", *args]


def session(experiment: Path, out: Path, shard: str, extra: list[str], kill_after: float | None, timeout: float) -> str:
    """One `quicbed run` of the shard: killed with SIGKILL after ``kill_after`` s (None: to the end)."""
    resume = ["--resume"] if out.exists() else []
    process = subprocess.Popen(
        quicbed(
            "run",
            str(experiment),
            "--out",
            str(out),
            "--shard",
            shard,
            "--shard-by",
            "run",
            "--no-report",
            *resume,
            *extra,
        ),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        process.wait(timeout=kill_after if kill_after is not None else timeout)
        return f"ended ({process.returncode})"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        subprocess.run(quicbed("clean"), cwd=ROOT, capture_output=True, check=False)
        return f"killed after {kill_after:.1f} s" if kill_after is not None else "timed out"


def tear(results: Path, rng: random.Random) -> str:
    """Cut the last line as a power loss would (some of its bytes, no newline)."""
    data = results.read_bytes() if results.exists() else b""
    lines = data.splitlines(keepends=True)
    if not lines:
        return "nothing to tear"
    keep = rng.randint(1, max(1, len(lines[-1]) - 2))
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][:keep])
    return f"tore the last line after {keep} of {len(lines[-1])} bytes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per shard (default 3)")
    parser.add_argument("--session-timeout", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the folders (path printed)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("chaos.py: run as root (it builds network namespaces)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="quicbed-chaos-", dir="/var/tmp"))
    experiment = work / "chaos.yaml"
    experiment.write_text(EXPERIMENT)
    started = time.monotonic()
    print(
        f"quicbed chaos, {time.strftime('%Y-%m-%d')}, seed {args.seed}: 2 shards by run, "
        f"{args.kills} kills each, a torn line after each kill"
    )
    shards = []
    try:
        for k in (1, 2):
            out = work / f"shard-{k}"
            shards.append(out)
            for kill in range(args.kills):
                what = session(experiment, out, f"{k}/2", [], rng.uniform(2.0, 8.0), args.session_timeout)
                torn = tear(out / "results.jsonl", rng) if "killed" in what else ""
                print(f"  shard {k}, session {kill + 1}: {what}; {torn}")
            # the plan changes on resume: a warm-up run per cell and two more repetitions
            what = session(
                experiment, out, f"{k}/2", ["--warmup", "1", "--repetitions", "10"], None, args.session_timeout
            )
            done = len(latest_records(read_results(out / "results.jsonl")))
            print(f"  shard {k}, last session (--warmup 1 --repetitions 10): {what}, {done} runs in its folder")
        merged = work / "merged"
        result = subprocess.run(
            quicbed("merge", *map(str, shards), "--out", str(merged), "--no-report"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"  merge: exit {result.returncode}: {(result.stdout + result.stderr).strip().splitlines()[-1:]}")
        return verdict(merged, time.monotonic() - started)
    except QuicbedError as error:  # a damaged folder that no resume could repair
        print(f"FAIL: {error}")
        return 1
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def verdict(merged: Path, seconds: float) -> int:
    if not (merged / "metadata.json").exists():
        print("FAIL: no merged folder")
        return 1
    planned = expected_run_ids(json.loads((merged / "metadata.json").read_text()))
    lines = read_results(merged / "results.jsonl")
    latest = latest_records(lines)
    ids = [line["run_id"] for line in latest]
    missing = sorted(set(planned) - set(ids))
    doubled = sorted({run_id for run_id in ids if ids.count(run_id) > 1})
    folderless = sorted(line["run_id"] for line in latest if not (merged / line["folder"]).is_dir())
    statuses = {status: sum(1 for line in latest if line["status"] == status) for status in ("ok", "invalid", "failed")}
    print(
        f"planned {len(planned)} runs; merged {len(latest)} ({len(lines)} lines, {statuses}); missing "
        f"{missing or 'none'}; doubled {doubled or 'none'}; without a folder {folderless or 'none'}; "
        f"{seconds / 60:.1f} min"
    )
    ok = not missing and not doubled and not folderless and set(ids) <= set(planned)
    print("every planned run present exactly once: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
