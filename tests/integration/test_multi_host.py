"""run-experiment.yml end to end: two inventory hosts that are this machine (local
connection, separate shard folders) each run their shard of a small ns-3 experiment at the
same time; the playbook fetches and merges them here. The merged folder must hold exactly
the runs an unsharded run of the same experiment makes, and its report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quicbed.backends.ns3 import build

ROOT = Path(__file__).resolve().parents[2]
NS3_MISSING = build.missing()
QUICBED = Path(sys.executable).parent / "quicbed"
PLAYBOOK = shutil.which("ansible-playbook", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
    pytest.mark.skipif(
        PLAYBOOK is None,
        reason="ansible-playbook is not installed (pip ansible-core; scripts/install.sh --test installs it)",
    ),
    pytest.mark.skipif(not QUICBED.exists(), reason=f"no quicbed command beside {sys.executable}"),
]

#: 2 transports x 2 repetitions: shard 1 gets the QUIC cell, shard 2 the TCP cell
EXPERIMENT = """\
name: multihost-check
description: a small experiment for the sharded playbook
topology:
  script: topologies/dumbbell.py
  params: {rate: 20mbit, delay: 5ms, queue_limit: 100}
backend: ns3
workload: {object: 300kB}
matrix:
  transport: [quic, tcp]
repetitions: 2
warmup: 0
timeout: 60s
captures: false
validity: {reruns: 0}
"""


def _run_ids(folder: Path) -> list[str]:
    return [json.loads(line)["run_id"] for line in (folder / "results.jsonl").read_text().splitlines()]


def _playbook(tmp_path: Path, inventory: Path, experiment: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANSIBLE_ASYNC_DIR": str(tmp_path / "ansible-async"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [
            str(PLAYBOOK),
            "-i",
            str(inventory),
            "run-experiment.yml",
            "-e",
            f"experiment={experiment}",
            "-e",
            "group=pair",
            "-e",
            f"out={out}",
            "-e",
            "poll_interval=2",
            "-e",
            f"local_quicbed={QUICBED}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )


def test_the_playbook_shards_over_two_hosts_and_merges_what_one_run_makes(tmp_path):
    experiment = tmp_path / "multihost-check.yaml"
    experiment.write_text(EXPERIMENT)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "[pair]\n"
        f"alpha ansible_connection=local quicbed_shard_dir={tmp_path / 'alpha'}\n"
        f"beta ansible_connection=local quicbed_shard_dir={tmp_path / 'beta'}\n"
        "[pair:vars]\n"
        f"ansible_python_interpreter={sys.executable}\nquicbed_src={ROOT}\nquicbed_command={QUICBED}\n"
        "shard_become=false\n"
    )
    out = tmp_path / "merged"

    played = _playbook(tmp_path, inventory, experiment, out)
    assert played.returncode == 0, played.stdout[-4000:] + played.stderr[-2000:]
    assert "merged results: " in played.stdout

    whole = tmp_path / "whole"
    unsharded = subprocess.run(
        [str(QUICBED), "run", str(experiment), "--out", str(whole), "--no-report"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert unsharded.returncode == 0, unsharded.stdout[-3000:] + unsharded.stderr[-2000:]

    merged_ids = _run_ids(out)
    assert len(merged_ids) == len(set(merged_ids))  # no duplicate
    assert sorted(merged_ids) == sorted(_run_ids(whole))  # none missing, none extra
    for k, host in ((1, "alpha"), (2, "beta")):  # each host ran its own shard in its own folder
        shard = tmp_path / host / "multihost-check" / f"shard-{k}-of-2"
        assert json.loads((shard / "metadata.json").read_text())["shard"]["index"] == k
        assert {
            json.loads(line)["cell"]["transport"] for line in (shard / "results.jsonl").read_text().splitlines()
        } == {"quic" if k == 1 else "tcp"}
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and [s["shard"]["index"] for s in metadata["shards"]] == [1, 2]
    assert (out / "index.html").exists() and "## Hosts" in (out / "summary.md").read_text()

    # A host that stopped early (here: shard 2 lost its last run) resumes: played again, only
    # the missing run is made, the rest of every shard is kept, and the new merge is complete.
    shard2 = tmp_path / "beta" / "multihost-check" / "shard-2-of-2"
    lines = (shard2 / "results.jsonl").read_text().splitlines()
    lost = json.loads(lines[-1])["run_id"]
    (shard2 / "results.jsonl").write_text("".join(line + "\n" for line in lines[:-1]))
    shutil.rmtree(shard2 / "runs" / lost)
    kept = {line: None for line in lines[:-1]}
    shutil.rmtree(out)
    again = _playbook(tmp_path, inventory, experiment, out)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
    now = (shard2 / "results.jsonl").read_text().splitlines()
    assert now[:-1] == list(kept) and json.loads(now[-1])["run_id"] == lost
    assert sorted(_run_ids(out)) == sorted(merged_ids)

    # Played once more: nothing to run, and the merged folder is left alone.
    third = _playbook(tmp_path, inventory, experiment, out)
    assert third.returncode == 0 and "already merged" in third.stdout, third.stdout[-4000:]
    assert not subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()


def test_a_host_whose_shard_fails_stops_the_merge_and_says_which(tmp_path):
    experiment = tmp_path / "multihost-check.yaml"
    experiment.write_text(EXPERIMENT)
    inventory = tmp_path / "hosts.ini"
    common = f"ansible_connection=local quicbed_src={ROOT}"
    inventory.write_text(
        "[pair]\n"
        f"alpha {common} quicbed_command={QUICBED} quicbed_shard_dir={tmp_path / 'alpha'}\n"
        f"beta {common} quicbed_command=/bin/false quicbed_shard_dir={tmp_path / 'beta'}\n"
        "[pair:vars]\n"
        f"ansible_python_interpreter={sys.executable}\nshard_become=false\n"
    )
    out = tmp_path / "merged"
    played = _playbook(tmp_path, inventory, experiment, out)
    assert played.returncode != 0
    assert "the shards of beta did not finish" in played.stdout, played.stdout[-4000:]
    assert not out.exists()
    # alpha's shard is complete and kept for the next attempt
    assert len(_run_ids(tmp_path / "alpha" / "multihost-check" / "shard-1-of-2")) == 2
