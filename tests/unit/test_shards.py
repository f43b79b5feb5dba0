"""Shards (quicbed run --shard K/N), large plans, and merging shard folders (quicbed merge)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from quicbed.cli import main
from quicbed.errors import QuicbedError, SpecError
from quicbed.runner.merge import expected_run_ids, merge
from quicbed.host.clock import VIRTUAL
from quicbed.runner.plan import LARGE_PLAN, Plan, estimate, finished_runs, measured_run_seconds, record_guest_wall_time
from quicbed.spec.experiment import expand, load_experiment
from quicbed.spec.shard import Shard
from report_fixtures import make_matrix_folder

ROOT = Path(__file__).resolve().parents[2]
E4 = ROOT / "experiments" / "e4-random-loss.yaml"


@pytest.mark.parametrize("repetitions, warmup, order", [(1, 0, "round-robin"), (3, 1, "round-robin"), (2, 2, "random")])
@pytest.mark.parametrize("by", ["cell", "run", "link.bottleneck.loss"])
def test_every_run_lands_in_exactly_one_shard_for_n_1_to_5(repetitions, warmup, order, by):
    experiment = load_experiment(E4, {"repetitions": repetitions, "warmup": warmup, "order": order})
    runs = expand(experiment)
    for count in range(1, 6):
        shards = [Shard(k, count, by).select(runs) for k in range(1, count + 1)]
        ids = [run.run_id for shard in shards for run in shard]
        assert sorted(ids) == sorted(run.run_id for run in runs) and len(set(ids)) == len(runs), count
        for shard in shards:  # each shard keeps the experiment's order
            assert [run.index for run in shard] == sorted(run.index for run in shard)
        if by != "run":  # a cell's runs (or an axis value's cells), warm-up included, share one shard
            owner: dict[object, int] = {}
            for k, shard in enumerate(shards):
                for run in shard:
                    assert owner.setdefault(run.cell_index if by == "cell" else run.cell[by], k) == k
        sizes = [len(shard) for shard in shards]  # balanced: by whole cells, or by single runs
        if by != "link.bottleneck.loss":
            assert max(sizes) - min(sizes) <= (1 if by == "run" else repetitions + warmup)


@pytest.mark.parametrize("count", [2, 3, 4])
def test_by_run_a_run_keeps_its_shard_when_a_resume_changes_the_plan(count):
    """Ownership is a function of the run's identity (cell, repetition), not of its position:
    more repetitions, warm-ups or a random order on resume move no run to another shard."""
    before = expand(load_experiment(E4, {"repetitions": 2}))
    after_experiment = load_experiment(E4, {"repetitions": 4, "warmup": 1, "order": "random"})
    after = expand(after_experiment)
    for k in range(1, count + 1):
        shard = Shard(k, count, "run")
        owned_before = {run.run_id for run in shard.select(before)}
        owned_after = {run.run_id for run in shard.select(after)}
        assert owned_before <= owned_after
        assert owned_after == {run.run_id for run in after if shard.owner(after_experiment)(run)}
        assert len(owned_after) == shard.size(after_experiment)


def test_the_split_is_deterministic():
    experiment = load_experiment(E4, {"repetitions": 2})
    first = [run.run_id for run in Shard(2, 3).select(expand(experiment))]
    again = [run.run_id for run in Shard.parse("2/3").select(expand(load_experiment(E4, {"repetitions": 2})))]
    assert first == again and first


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("0/3", "between 1 and N"),
        ("4/3", "between 1 and N"),
        ("2", "expected K/N"),
        ("a/b", "expected K/N"),
        ("1/0", "between"),
    ],
)
def test_a_malformed_shard_is_refused_with_the_fix(text, fragment):
    with pytest.raises(QuicbedError, match=fragment):
        Shard.parse(text)


def test_dry_run_of_a_shard_lists_only_its_runs(capsys):
    assert main(["run", str(E4), "--dry-run", "--repetitions", "1", "--warmup", "0", "--shard", "2/4"]) == 0
    out = capsys.readouterr().out
    assert "shard 2/4 (by cell): 5 of the 18 runs" in out
    listed = [line.split()[1] for line in out.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert listed == ["c001-r001", "c005-r001", "c009-r001", "c013-r001", "c017-r001"]


def test_an_empty_shard_says_why(capsys):
    assert main(["run", str(ROOT / "experiments" / "quickstart.yaml"), "--dry-run", "--shard", "4/4"]) == 0
    assert "has no runs: the experiment has 3 cell(s) for 4 shards" in capsys.readouterr().out


def test_shard_by_an_axis_keeps_the_compared_cells_together(capsys):
    assert (
        main(
            [
                "run",
                str(E4),
                "--dry-run",
                "--repetitions",
                "1",
                "--warmup",
                "0",
                "--shard",
                "2/4",
                "--shard-by",
                "link.bottleneck.loss",
            ]
        )
        == 0
    )
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    transports = {line.split("transport=")[1].split(",")[0] for line in lines}
    losses = {line.split("link.bottleneck.loss=")[1] for line in lines}
    assert transports == {"quic-native", "bquic-native", "tcp"} and len(lines) == 3 * len(losses)
    assert main(["run", str(E4), "--dry-run", "--shard", "1/2", "--shard-by", "transprot"]) == 1
    assert (
        "use cell, run or a matrix axis of this experiment (transport, link.bottleneck.loss)" in capsys.readouterr().err
    )


def test_shard_by_needs_a_shard(capsys):
    assert main(["run", str(E4), "--dry-run", "--shard-by", "run"]) == 1
    assert "--shard-by goes with --shard" in capsys.readouterr().err


def test_a_large_dry_run_prints_a_summary_with_the_estimate(capsys):
    repetitions = LARGE_PLAN // 18 + 10
    assert main(["run", str(E4), "--dry-run", "--repetitions", str(repetitions), "--shard", "1/3"]) == 0
    out = capsys.readouterr().out
    assert "not listed one by one; --all lists them" in out and "c000-r001" not in out
    assert "runs per shard (1..3): " in out and "(every run at its 300 s timeout)" in out
    sizes = [int(n) for n in out.split("runs per shard (1..3): ")[1].splitlines()[0].split(", ")]
    assert sum(sizes) == 18 * (repetitions + 1)  # the file has one warm-up run per cell
    assert main(["run", str(E4), "--dry-run", "--repetitions", str(repetitions), "--all"]) == 0
    assert "c017-r%03d" % repetitions in capsys.readouterr().out


def test_a_large_run_needs_yes_and_creates_nothing_without_it(capsys, tmp_path):
    out = tmp_path / "big"
    assert main(["run", str(E4), "--repetitions", str(LARGE_PLAN), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "add --yes" in err and "--shard K/N" in err and str(E4) in err
    assert not out.exists()


def test_the_estimate_uses_earlier_runs_of_the_same_experiment(tmp_path):
    results = tmp_path / "results"
    for folder, durations in (
        ("e4-random-loss-20261120-100000", [10.0, 12.0, 14.0]),
        ("other-20261120-100000", [99.0]),
    ):
        (results / folder).mkdir(parents=True)
        (results / folder / "results.jsonl").write_text(
            "".join(
                json.dumps({"run_id": f"c000-r{i:03d}", "started": 100.0, "finished": 100.0 + d}) + "\n"
                for i, d in enumerate(durations)
            )
        )
    assert measured_run_seconds("e4-random-loss", results) == (12.0, 3)
    plan = Plan.of(load_experiment(E4, {"repetitions": 10, "warmup": 0}), "netns")
    text = estimate(plan, results)
    assert text.startswith("about 36 min at the 12.0 s median of 3 earlier runs here")  # 180 runs x 12 s
    assert "at most" in text


def test_without_earlier_runs_the_estimate_is_the_files_wall_time(tmp_path, capsys):
    """A shipped file states how long its runs took where they were measured (wall_time): the
    dry run scales it to the plan and says where the figure comes from; a file without one says
    that no estimate exists and how to get one."""
    plan = Plan.of(load_experiment(E4, {"repetitions": 10, "warmup": 0}), "ns3")
    text = estimate(plan, tmp_path / "none")
    # 180 runs x (5340 s / 54 runs) = 4.9 h
    assert text.startswith("about 4.9 h from the file's wall_time (54 run(s) in 89 min on a 2-core Debian 12 host")
    assert text.endswith("(every run at its 300 s timeout)")
    assert main(["run", str(E4), "--dry-run"]) == 0
    assert "\ntime: about " in capsys.readouterr().out  # every dry run prints its time
    bare = tmp_path / "bare.yaml"
    bare.write_text(
        E4.read_text()
        .replace("wall_time:", "# wall_time:")
        .replace("script: topologies/", f"script: {E4.parents[1]}/topologies/")
    )
    text = estimate(Plan.of(load_experiment(bare, {}), "ns3"), tmp_path / "none")
    # without: 8.9 MB over its 100 Mbit/s link plus the set-up, 0.7 + 1.9 s a run, 198 runs
    assert (
        text.startswith(
            "roughly 8.6 min, a rough figure: each run's objects over its narrowest wired link plus "
            "1.9 s of set-up (2.6 s a run;"
        )
        and "--repetitions 1" in text
    )
    wifi = tmp_path / "wifi.yaml"  # a WiFi cell's rate is the simulation's to find: no rough figure
    wifi.write_text(
        (ROOT / "experiments" / "e1-wifi-bquic.yaml")
        .read_text()
        .replace("wall_time:", "# wall_time:")
        .replace("script: topologies/", f"script: {ROOT}/topologies/")
    )
    text = estimate(Plan.of(load_experiment(wifi, {}), "ns3"), tmp_path / "none")
    assert "no estimate" in text and "--repetitions 1" in text


def test_a_virtual_time_estimate_reads_the_guests_wall_time_not_the_records(tmp_path, capsys, monkeypatch):
    """In virtual time a record's start and end are the guest's clock (a run of 12 s there took
    minutes of wall time), so the estimate reads what the host measured around each guest,
    never real-time runs or the file's wall_time, and no timeout bounds it."""
    folder = tmp_path / "results" / "e4-random-loss-20261129-100000"
    folder.mkdir(parents=True)
    records = [{"run_id": f"c000-r{i:03d}", "started": 100.0, "finished": 112.0, "clock": VIRTUAL} for i in range(4)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:3]) + '{"run_id": "c0')
    assert finished_runs(folder) == 3  # the torn last line is not a run
    record_guest_wall_time(folder, 3, 540.0)  # three runs in 9 min of wall time
    with open(folder / "guest-wall-time.jsonl", "a") as file:
        file.write('{"runs": 2, "wall_s')  # a guest's line torn by a crash is skipped
    plan = Plan.of(load_experiment(E4, {"repetitions": 10, "warmup": 0}), "ns3")
    assert measured_run_seconds("e4-random-loss", tmp_path / "results", VIRTUAL) == (180.0, 3)
    assert measured_run_seconds("e4-random-loss", tmp_path / "results") is None  # no real-time run there
    text = estimate(plan, tmp_path / "results", VIRTUAL)
    assert text.startswith("about 9.0 h at the 180.0 s median of 3 earlier runs here in virtual time")  # 180 x 180 s
    assert "bounds no wall time" in text
    text = estimate(plan, tmp_path / "none", VIRTUAL)  # the file's wall_time was measured in real time
    assert text.startswith("no estimate: no earlier virtual-time run") and "wall_time with clock: virtual" in text
    # a file measured in virtual time serves that clock only
    seed_scale = Plan.of(load_experiment(ROOT / "experiments" / "e5-seed-scale.yaml", {"repetitions": 1}), "ns3")
    assert seed_scale.experiment.wall_time.clock == VIRTUAL
    assert estimate(seed_scale, tmp_path / "none", VIRTUAL).startswith(
        "about 24 min from the file's wall_time (1 run(s) in 3.0 min on a quiet 2-core Debian 12 host, one AP in "
        "virtual time: 180.0 s a run)"
    )  # 8 cells x 180 s
    assert "no estimate" in estimate(seed_scale, tmp_path / "none")
    monkeypatch.chdir(tmp_path / "results")  # no results/ folder below it
    assert main(["run", str(E4), "--dry-run", "--clock", "virtual"]) == 0
    assert "\ntime: no estimate: no earlier virtual-time run" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wall_time, message",
    [
        ("{runs: 0, time: 10min}", "wall_time.runs: expected a whole number >= 1"),
        ("{runs: 5}", "wall_time needs runs and time"),
        ("{runs: 5, time: soon}", "wall_time.time"),
        ("{runs: 5, time: 10min, when: today}", "not ['when']"),
        ("{runs: 5, time: 10min, clock: wall}", "wall_time.clock: expected one of real, virtual, got 'wall'"),
    ],
)
def test_a_bad_wall_time_is_refused_with_the_field(tmp_path, wall_time, message):
    bad = tmp_path / "bad.yaml"
    text = re.sub(r"(?m)^wall_time: .*$", f"wall_time: {wall_time}", E4.read_text())
    bad.write_text(text.replace("script: topologies/", f"script: {E4.parents[1]}/topologies/"))
    with pytest.raises(SpecError, match=re.escape(message)):
        load_experiment(bad, {})


# --------------------------------------------------------------------------- merge


def _split(folder: Path, into: Path, count: int) -> list[Path]:
    """The matrix fixture as ``count`` shard folders (by cell), as run --shard would leave them."""
    metadata = json.loads((folder / "metadata.json").read_text())
    experiment = metadata["experiment"]
    experiment["cells"] = [
        {"transport": t, "link.bottleneck.loss": loss}
        for t in experiment["matrix"]["transport"]
        for loss in experiment["matrix"]["link.bottleneck.loss"]
    ]
    records = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    shards = []
    for k in range(1, count + 1):
        shard = into / f"shard-{k}-of-{count}"
        (shard / "runs").mkdir(parents=True)
        shutil.copy(folder / "experiment.yaml", shard / "experiment.yaml")
        mine = [r for r in records if r["cell_index"] % count == k - 1]
        for record in mine:
            shutil.copytree(folder / "runs" / record["run_id"], shard / "runs" / record["run_id"])
        (shard / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mine))
        (shard / "metadata.json").write_text(
            json.dumps(
                {
                    **metadata,
                    "status": "complete",
                    "host": {**metadata["host"], "hostname": f"bench{k}", "cpus": 2 * k},
                    "shard": {"index": k, "count": count, "by": "cell", "runs": len(mine), "of": len(records)},
                    "calibration": {
                        "endpoints": {"quinn": {"profile": "quic", "mbit_per_s": 900.0 * k, "measured": "2026-11-25"}},
                        "links": {"accurate_up_to_mbit": 50.0 * k, "tolerance": 0.02, "measured": "2026-11-25"},
                    },
                    "sessions": [{"host": {"hostname": f"bench{k}"}, "status": "complete"}],
                }
            )
        )
        shards.append(shard)
    return shards


@pytest.fixture
def shards(tmp_path):
    return _split(make_matrix_folder(tmp_path / "whole"), tmp_path / "shards", 2)


def test_merged_shards_hold_every_run_once_and_say_where_each_ran(shards, tmp_path):
    out = tmp_path / "merged"
    result = merge(shards, out)
    whole = [json.loads(line) for line in (tmp_path / "whole" / "results.jsonl").read_text().splitlines()]
    merged = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["run_id"] for r in merged) == sorted(r["run_id"] for r in whole)
    assert [r["index"] for r in merged] == sorted(r["index"] for r in merged)
    assert not result.missing and set(expected_run_ids(json.loads((shards[0] / "metadata.json").read_text()))) <= {
        r["run_id"] for r in merged
    }
    assert all((out / r["folder"] / "client.json").exists() for r in merged)
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and "shard" not in metadata
    assert [s["host"]["hostname"] for s in metadata["shards"]] == ["bench1", "bench2"]
    assert [s["shard"]["index"] for s in metadata["shards"]] == [1, 2]
    assert metadata["host"]["hosts"] == 2 and metadata["merged"]["missing"] == []
    assert (out / "experiment.yaml").read_bytes() == (shards[0] / "experiment.yaml").read_bytes()
    # the shards are untouched, and nothing is left beside the merged folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged", "shards", "whole"]


def test_merge_holds_every_shard_locked_and_puts_the_merged_folder_on_disk(shards, tmp_path, monkeypatch):
    """A resume of a shard while the merge copies it would add runs the merged folder lacks:
    the merge holds each shard's lock until it is done. The merged folder's files (copies and
    results.jsonl, once a plain write) are on disk before it appears under its name."""
    from quicbed import atomic
    from quicbed.runner import merge as merging
    from quicbed.runner.folder import ResultsFolder

    for shard in shards:
        (shard / ".lock").touch()
    refused: list[str] = []
    synced: list[Path] = []
    real_merge, real_sync = merging._merge_locked, atomic.sync_tree

    def merge_while_a_resume_tries(found, out, force):
        with pytest.raises(QuicbedError) as error:
            ResultsFolder(shards[0], shards[0] / "experiment.yaml", resume=True)
        refused.append(str(error.value))
        return real_merge(found, out, force)

    def sync_tree(root):
        synced.append(root)
        assert (root / "results.jsonl").exists() and not (tmp_path / "merged").exists()
        real_sync(root)

    monkeypatch.setattr(merging, "_merge_locked", merge_while_a_resume_tries)
    monkeypatch.setattr(atomic, "sync_tree", sync_tree)
    merge(shards, tmp_path / "merged")
    assert refused and "another experiment is writing into" in refused[0]
    assert len(synced) == 1
    with ResultsFolder(shards[0], shards[0] / "experiment.yaml", resume=True):  # free again after the merge
        pass


def test_merge_writes_a_report_with_a_calibration_line_per_host(shards, tmp_path, capsys):
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(out)]) == 0
    assert (
        "merged 2 folder(s) from 2 host(s) (bench1, bench2): 26 runs, none of the experiment's 24 missing"
        in capsys.readouterr().out
    )
    summary = (out / "summary.md").read_text()
    hosts = summary.split("## Hosts")[1].split("##")[0]
    assert "| bench1 | 1/2 |" in hosts and "| bench2 | 2/2 |" in hosts
    assert "quinn 1800 Mbit/s (2026-11-25)" in hosts and "100 Mbit/s (±2 %)" in hosts
    assert "<h2>Hosts</h2>" in (out / "index.html").read_text()


def test_a_missing_shard_is_named_and_the_exit_status_says_so(shards, tmp_path, capsys):
    out = tmp_path / "merged"
    assert main(["merge", str(shards[0]), "--out", str(out), "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "incomplete: 12 run(s) missing (c001-w001" in err
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "incomplete" and len(metadata["merged"]["missing"]) == 12


def _edit_metadata(folder: Path, **changes: object) -> None:
    metadata = json.loads((folder / "metadata.json").read_text())
    for key, value in changes.items():
        target = metadata
        *parents, last = key.split("__")
        for parent in parents:
            target = target[parent]
        target[last] = value
    (folder / "metadata.json").write_text(json.dumps(metadata))


@pytest.mark.parametrize(
    "change, message",
    [
        ("experiment_file", "ran another experiment file"),
        ("settings", "ran the experiment with other settings"),
        ("code", "ran other code"),
        ("fingerprint", "ran with other code, tools, traces or kernel than .*aioquic 1.2.0 -> 1.3.0"),
        ("split", "come from different splits"),
        ("mixed", "mixes fingerprints already \\(resumed with --force: session 2: kernel 6.1 -> 6.12\\)"),
    ],
)
def test_merge_refuses_shards_of_different_experiments_unless_forced(shards, tmp_path, change, message):
    other = shards[1]
    if change == "experiment_file":
        (other / "experiment.yaml").write_text((other / "experiment.yaml").read_text() + "\n# edited\n")
    elif change == "settings":
        _edit_metadata(other, experiment__backend="ns3")
    elif change == "code":
        _edit_metadata(other, git={"commit": "0123456789", "dirty": False})
    elif change == "fingerprint":  # the same commit, another aioquic
        _edit_metadata(shards[0], fingerprint={"code": "abc", "aioquic": "1.2.0", "kernel": "6.1.0"})
        _edit_metadata(other, fingerprint={"code": "abc", "aioquic": "1.3.0", "kernel": "6.1.0"})
    elif change == "mixed":
        _edit_metadata(other, mixed_fingerprints=["session 2: kernel 6.1 -> 6.12"])
    else:
        _edit_metadata(other, shard={"index": 2, "count": 3, "by": "cell"})
    out = tmp_path / "merged"
    with pytest.raises(QuicbedError, match=message) as refused:
        merge(shards, out)
    assert "--force" in str(refused.value)
    assert not out.exists() and not list(tmp_path.glob(".merged*"))
    result = merge(shards, out, force=True)
    assert any(re.search(message, warning) for warning in result.warnings)
    assert json.loads((out / "metadata.json").read_text())["merged"]["force"] is True


def test_merge_refuses_a_run_found_twice_even_when_forced(shards, tmp_path):
    shutil.copytree(shards[0] / "runs" / "c000-r001", shards[1] / "runs" / "c000-r001")
    line = next(line for line in (shards[0] / "results.jsonl").read_text().splitlines() if '"c000-r001"' in line)
    with (shards[1] / "results.jsonl").open("a") as handle:
        handle.write(line + "\n")
    for force in (False, True):
        with pytest.raises(QuicbedError, match="c000-r001 in"):
            merge(shards, tmp_path / "merged", force=force)


def test_merge_never_overwrites_and_refuses_what_is_not_a_shard(shards, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(QuicbedError, match="never overwritten"):
        merge(shards, tmp_path / "taken")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"
    with pytest.raises(QuicbedError, match="not a results folder"):
        merge([tmp_path / "taken"], tmp_path / "merged")
    with pytest.raises(QuicbedError, match="is one of the shard folders"):
        merge(shards, shards[0])


@pytest.mark.parametrize(
    "shard, expected",
    [(["--shard", "1/2", "--shard-by", "transport"], ["--shard", "1/2", "--shard-by", "transport"]), ([], [])],
)
def test_the_microvm_run_gets_the_same_shard(monkeypatch, shard, expected):
    from quicbed.host import vm

    seen: list[list[str]] = []

    class Result:
        returncode = 0

    monkeypatch.setattr(vm, "inside_vm", lambda: False)
    monkeypatch.setattr(vm, "run_in_vm", lambda argv, **kwargs: seen.append(list(argv)) or Result())
    out = Path("results") / "unit-microvm-argv"
    assert main(["run", str(E4), "--vm", "--no-report", "--out", str(out), "--repetitions", "1", *shard]) == 0
    argv = seen[0]
    assert argv[argv.index("--repetitions") :][:2] == ["--repetitions", "1"]
    tail = [word for word in argv if word in ("--shard", "--shard-by") or word in expected[1::2]]
    assert tail == expected and not out.exists()


def test_a_folder_dealt_out_by_run_position_is_not_resumed_as_one_dealt_by_identity():
    """Folders of an older quicbed split by run position: resuming one with this split would
    redo another shard's runs, so the shards differ and the message says why."""
    from quicbed.runner.engine import _shard_identity, _shard_text

    old = {"index": 1, "count": 2, "by": "run", "runs": 3, "of": 6}
    new = {**Shard(1, 2, "run").describe(), "runs": 3, "of": 6}
    assert _shard_identity(old) != _shard_identity(new)
    assert "dealt out by position" in _shard_text(old) and "position" not in _shard_text(new)
