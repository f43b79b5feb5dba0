"""The results folder: refuses to overwrite, locks, commits runs atomically, survives torn lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quicbed.errors import QuicbedError
from quicbed.results import RunRecord
from quicbed.runner.folder import ResultsFolder, latest_records, read_results

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def experiment_file(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\n")
    return path


def _record(run_id: str) -> RunRecord:
    return RunRecord(run_id, 0, 0, {}, 1, False, metrics={"goodput": 1e6})


def _attempt(
    status: str, error: str | None = None, invalid_reasons: list[str] | None = None, attempt: int = 1
) -> RunRecord:
    return RunRecord(
        "c000-r001",
        0,
        0,
        {},
        1,
        False,
        status=status,
        error=error,
        invalid_reasons=invalid_reasons or [],
        attempt=attempt,
    )


def test_a_run_appears_with_its_folder_and_line_together(tmp_path: Path, experiment_file: Path) -> None:
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        partial = folder.begin_run("c000-r001")
        (partial / "client.json").write_text("{}")
        assert partial.name.startswith(".") and not (out / "runs" / "c000-r001").exists()
        assert read_results(out / "results.jsonl") == []
        folder.commit_run(
            "c000-r001", partial, _record("c000-r001"), {"big": "x" * 100, "path": f"{partial}/client.json"}
        )
        assert not partial.exists()
    final = out / "runs" / "c000-r001"
    run = json.loads((final / "run.json").read_text())
    assert run["folder"] == "runs/c000-r001" and run["details"]["big"]
    assert run["details"]["path"] == "client.json"  # paths into the run folder are relative to it
    (line,) = read_results(out / "results.jsonl")
    assert line.run_id == "c000-r001" and "details" not in line.extra
    assert (out / "experiment.yaml").read_text() == "name: x\n"


def test_results_are_never_overwritten(tmp_path: Path, experiment_file: Path) -> None:
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False):
        pass
    with pytest.raises(QuicbedError, match="exists and is not empty.*--resume"):
        ResultsFolder(out, experiment_file, resume=False)


def test_resume_needs_a_folder_of_the_same_experiment(tmp_path: Path, experiment_file: Path) -> None:
    with pytest.raises(QuicbedError, match="no interrupted experiment to resume"):
        ResultsFolder(tmp_path / "nothing", experiment_file, resume=True)
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        folder.write_metadata({"name": "x"})
    other = tmp_path / "other.yaml"
    other.write_text("name: y\n")
    with pytest.raises(QuicbedError, match="differs from the experiment"):
        ResultsFolder(out, other, resume=True)


def test_a_second_writer_is_refused_while_the_first_holds_the_folder(tmp_path: Path, experiment_file: Path) -> None:
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        folder.write_metadata({"name": "x"})
        with pytest.raises(QuicbedError, match="another experiment is writing"):
            ResultsFolder(out, experiment_file, resume=True)
    with ResultsFolder(out, experiment_file, resume=True):  # free again once the first is done
        pass


def test_resume_drops_partial_runs_and_lists_finished_ones(tmp_path: Path, experiment_file: Path) -> None:
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        folder.write_metadata({"name": "x"})
        folder.commit_run("c000-r001", folder.begin_run("c000-r001"), _record("c000-r001"), {})
        leftover = folder.begin_run("c001-r001")  # a run killed half-way
    assert leftover.exists()
    with ResultsFolder(out, experiment_file, resume=True) as folder:
        assert not leftover.exists()
        assert list(folder.finished()) == ["c000-r001"]


def test_a_torn_last_line_is_ignored_but_damage_elsewhere_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"run_id": "a"}\n{"run_id": "b"}\n{"run_id": "c", "sta')
    assert [r.run_id for r in read_results(path)] == ["a", "b"]
    assert "line 3 is truncated" in capsys.readouterr().err
    path.write_text('{"run_id": "a"}\nnot json\n{"run_id": "c"}\n')
    with pytest.raises(QuicbedError, match="results.jsonl: line 2 is not JSON"):
        read_results(path)


def test_resume_after_a_torn_last_line_keeps_the_run_made_next(
    tmp_path: Path, experiment_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A power loss left results.jsonl without its final newline. Without repair, the next
    run's line was glued onto the torn one and dropped with it: the run was lost."""
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        partial = folder.begin_run("c000-r001")
        folder.commit_run("c000-r001", partial, _record("c000-r001"), {})
    results = out / "results.jsonl"
    whole = results.read_bytes()
    results.write_bytes(whole + b'{"run_id":"c000-r002","sta')  # r002's line, cut by the power loss
    with ResultsFolder(out, experiment_file, resume=True) as folder:
        assert "torn line" in capsys.readouterr().err
        assert results.read_bytes() == whole
        assert (out / "results.jsonl.torn-1").read_bytes() == b'{"run_id":"c000-r002","sta'
        assert list(folder.finished()) == ["c000-r001"]  # so r002 is made again
        partial = folder.begin_run("c000-r002")
        folder.commit_run("c000-r002", partial, _record("c000-r002"), {})
    assert [r.run_id for r in read_results(results)] == ["c000-r001", "c000-r002"]
    assert "truncated" not in capsys.readouterr().err
    with ResultsFolder(out, experiment_file, resume=True):  # a whole file is left alone
        assert not (out / "results.jsonl.torn-2").exists()


def test_a_file_in_the_way_is_reported(tmp_path: Path, experiment_file: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    with pytest.raises(QuicbedError, match="is a file, not a results folder"):
        ResultsFolder(blocker, experiment_file, resume=False)


def test_an_invalid_run_is_made_again_within_the_budget(tmp_path):
    """validity.reruns: an invalid run is made again until it is valid or the budget is spent;
    each new attempt names the earlier ones and why they did not count."""
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions
    from quicbed.spec.experiment import Experiment, Run, Validity

    statuses = iter(["invalid", "invalid", "ok", "invalid", "invalid", "invalid"])
    made: list[list] = []

    def one_run(run, keeper, folder, earlier=None):
        made.append(list(earlier or []))
        status = next(statuses)
        return _attempt(
            status, invalid_reasons=["ns-3 behind"] if status == "invalid" else [], attempt=1 + len(earlier or [])
        )

    experiment = Experiment("e", tmp_path / "e.yaml", tmp_path / "topo.py", {}, validity=Validity(reruns=2))
    runner = ExperimentRunner(experiment, RunnerOptions(out=tmp_path))
    runner._one_run = one_run  # type: ignore[method-assign]
    waits = iter([(0.0, 0.001), (14.0, 0.004)] + [(0.0, 0.0)] * 10)  # the second waited out a spell of steal
    runner.wait_for_quiet_machine = lambda: next(waits)  # type: ignore[method-assign]
    run = Run(0, 0, {}, 1, False)
    record = runner._make_again(run, one_run(run, None, None), None, None)  # type: ignore[arg-type]
    assert record.status == "ok" and record.attempt == 3
    assert [len(earlier) for earlier in made] == [0, 1, 2]
    assert made[2] == [
        {"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"], "waited_for_quiet_machine_s": 0.0},
        {"attempt": 2, "status": "invalid", "invalid_reasons": ["ns-3 behind"], "waited_for_quiet_machine_s": 14.0},
    ]
    # the budget ends the attempts; a warm-up run is never made again
    made.clear()
    record = runner._make_again(run, one_run(run, None, None), None, None)  # type: ignore[arg-type]
    assert record.status == "invalid" and len(made) == 3
    warmup = Run(0, 0, {}, 1, True)
    assert runner._make_again(warmup, _attempt("invalid"), None, None).status == "invalid"


def test_a_failed_run_is_made_again_within_its_own_budget(tmp_path):
    """validity.retry_failed: a failed run (a process it depends on died, the download failed) is
    made again up to that many times, apart from the invalid runs' budget; every attempt is named
    with its error. Without it (the default, 0) a failed run stays failed."""
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions
    from quicbed.spec.experiment import Experiment, Run, Validity

    outcomes = iter(
        [
            ("failed", "the ns-3 channel exited on signal 9 (SIGKILL) during the transfer"),
            ("invalid", None),
            ("failed", "the server (quic-server on server) exited with status 1"),
            ("ok", None),
        ]
    )
    made: list[list] = []

    def one_run(run, keeper, folder, earlier=None):
        made.append(list(earlier or []))
        status, error = next(outcomes)
        return _attempt(status, error, ["ns-3 behind"] if status == "invalid" else [], 1 + len(earlier or []))

    def runner_with(validity: Validity) -> ExperimentRunner:
        runner = ExperimentRunner(
            Experiment("e", tmp_path / "e.yaml", tmp_path / "topo.py", {}, validity=validity),
            RunnerOptions(out=tmp_path),
        )
        runner._one_run = one_run  # type: ignore[method-assign]
        runner.wait_for_quiet_machine = lambda: (0.0, 0.0)  # type: ignore[method-assign]
        return runner

    run = Run(0, 0, {}, 1, False)
    runner = runner_with(Validity(reruns=1, retry_failed=2))
    record = runner._make_again(run, one_run(run, None, None), None, None)  # type: ignore[arg-type]
    assert record.status == "ok" and record.attempt == 4
    assert made[-1] == [
        {
            "attempt": 1,
            "status": "failed",
            "error": "the ns-3 channel exited on signal 9 (SIGKILL) during the transfer",
        },
        {"attempt": 2, "status": "invalid", "invalid_reasons": ["ns-3 behind"], "waited_for_quiet_machine_s": 0.0},
        {"attempt": 3, "status": "failed", "error": "the server (quic-server on server) exited with status 1"},
    ]
    # the budget of failures is its own: spent, the run stays failed (the default makes no retry)
    made.clear()
    outcomes = iter([("failed", "a"), ("failed", "b")])
    record = runner_with(Validity(retry_failed=1))._make_again(run, one_run(run, None, None), None, None)  # type: ignore[arg-type]
    assert record.status == "failed" and len(made) == 2
    outcomes = iter([("failed", "a")])
    assert runner_with(Validity())._make_again(run, one_run(run, None, None), None, None).status == "failed"  # type: ignore[arg-type]
    warmup = Run(0, 0, {}, 1, True)
    assert (
        runner_with(Validity(retry_failed=3))._make_again(warmup, _attempt("failed", "x"), None, None).status
        == "failed"
    )  # type: ignore[arg-type]


def test_a_run_made_again_is_finished_by_its_last_line(tmp_path: Path) -> None:
    lines = [{"run_id": "a", "status": "invalid"}, {"run_id": "b", "status": "ok"}, {"run_id": "a", "status": "ok"}]
    latest = latest_records([RunRecord.from_dict(line) for line in lines])
    assert [r.to_dict() for r in latest] == [{"run_id": "a", "status": "ok"}, {"run_id": "b", "status": "ok"}]


def test_retrying_failed_runs_is_a_validity_setting(tmp_path: Path) -> None:
    from quicbed.errors import SpecError
    from quicbed.spec.experiment import load_experiment

    dumbbell = Path(__file__).resolve().parents[2] / "topologies" / "dumbbell.py"
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: e\ntopology: {{script: {dumbbell}}}\nvalidity: {{retry_failed: 2}}\n")
    validity = load_experiment(path).validity
    assert (validity.retry_failed, validity.reruns) == (2, 2)
    path.write_text(f"name: e\ntopology: {{script: {dumbbell}}}\n")
    assert load_experiment(path).validity.retry_failed == 0  # a failed run stays failed unless asked
    path.write_text(f"name: e\ntopology: {{script: {dumbbell}}}\nvalidity: {{retry_failed: -1}}\n")
    with pytest.raises(SpecError, match="validity.retry_failed"):
        load_experiment(path)


def test_host_metadata_names_the_cpu_and_the_transport_sysctls(tmp_path) -> None:
    from quicbed.runner import metadata

    host = metadata.host_info()
    assert set(host["sysctls"]) == set(metadata.SYSCTLS)
    assert host["sysctls"]["net.ipv4.tcp_sack"] in ("0", "1")
    assert metadata.sysctls(("net.ipv4.no_such_setting",)) == {"net.ipv4.no_such_setting": None}
    assert metadata.utc(0) == "1970-01-01T00:00:00+00:00"


def test_a_run_stopped_between_an_invalid_attempt_and_the_next_is_continued_on_resume(tmp_path):
    """A kill after an invalid attempt's line and before its rerun: the line alone said the run
    was done, so the resumed cell stayed a repetition short. Resume continues the attempts,
    within the same budget, naming the earlier ones."""
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions, attempts_to_continue
    from quicbed.spec.experiment import Experiment, Run, Validity

    validity = Validity(reruns=2, retry_failed=1)
    line = {**_attempt("invalid", invalid_reasons=["ns-3 behind"]).to_dict(), "earlier_attempts": []}

    def continued(line: dict, validity: Validity = validity) -> list | None:
        return attempts_to_continue(RunRecord.from_dict(line), validity)

    earlier = continued(line)
    assert earlier == [{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]
    spent = {
        **line,
        "attempt": 3,
        "earlier_attempts": [{"attempt": n, "status": "invalid", "invalid_reasons": []} for n in (1, 2)],
    }
    assert continued(spent) is None  # the budget is spent: the run is done
    assert continued({**line, "status": "ok", "invalid_reasons": []}) is None
    assert continued({**line, "warmup": True}) is None
    failed = {**_attempt("failed", error="server exited").to_dict(), "earlier_attempts": []}
    assert continued(failed) == [{"attempt": 1, "status": "failed", "error": "server exited"}]
    assert continued(failed, Validity(reruns=2, retry_failed=0)) is None

    made: list[list] = []
    statuses = iter(["invalid", "ok"])

    def one_run(run, keeper, folder, earlier=None):
        made.append(list(earlier or []))
        status = next(statuses)
        return _attempt(
            status, invalid_reasons=["ns-3 behind"] if status == "invalid" else [], attempt=1 + len(earlier or [])
        )

    runner = ExperimentRunner(
        Experiment("e", tmp_path / "e.yaml", tmp_path / "topo.py", {}, validity=validity), RunnerOptions(out=tmp_path)
    )
    runner._one_run = one_run  # type: ignore[method-assign]
    runner.wait_for_quiet_machine = lambda: (0.0, 0.0)  # type: ignore[method-assign]
    run = Run(0, 0, {}, 1, False)
    record = runner._make_again(run, one_run(run, None, None, earlier), None, None, earlier)  # type: ignore[arg-type]
    assert record.status == "ok" and record.attempt == 3  # attempt 1 in the last session, 2 and 3 now
    assert [len(attempts) for attempts in made] == [1, 2]


def test_resume_brings_a_cell_to_its_valid_repetitions_after_a_kill_between_attempts(tmp_path, capsys):
    """The whole runner on resume (its runs faked): r001's invalid line was the last thing the
    killed session wrote; the resumed session makes it again as attempt 2, and r002 too."""
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions
    from quicbed.spec.experiment import load_experiment

    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(
        f"name: resume-test\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        "backend: netns\nworkload: {object: 10kB}\nmatrix:\n  transport: [tcp]\nrepetitions: 2\n"
        "validity: {reruns: 2}\n"
    )
    out = tmp_path / "out"
    with ResultsFolder(out, exp_file, resume=False) as folder:
        partial = folder.begin_run("c000-r001")
        folder.commit_run("c000-r001", partial, _attempt("invalid", invalid_reasons=["ns-3 behind"]), {})
    made: list[tuple[str, int]] = []

    def one_run(run, keeper, folder, earlier=None):
        record = _attempt("ok", attempt=1 + len(earlier or []))
        record.run_id, record.repetition = run.run_id, run.repetition
        record.earlier_attempts = list(earlier or [])
        made.append((run.run_id, record.attempt))
        folder.commit_run(run.run_id, folder.begin_run(run.run_id), record, {})
        return record

    runner = ExperimentRunner(load_experiment(exp_file), RunnerOptions(out=out, resume=True))
    runner._one_run = one_run  # type: ignore[method-assign]
    summary = runner.run()
    assert made == [("c000-r001", 2), ("c000-r002", 1)]
    assert (summary.ok, summary.skipped) == (2, 0)
    assert "attempt 1 was invalid and the last session stopped before the next" in capsys.readouterr().out
    lines = latest_records(read_results(out / "results.jsonl"))
    assert [(line.run_id, line.status) for line in lines] == [("c000-r001", "ok"), ("c000-r002", "ok")]
    assert lines[0].earlier_attempts == [{"attempt": 1, "status": "invalid", "invalid_reasons": ["ns-3 behind"]}]


def test_a_run_folder_is_on_disk_before_its_results_line(tmp_path: Path, experiment_file: Path, monkeypatch) -> None:
    """After a power loss a results line must not name a folder whose files were still in the
    page cache: the folder is synced before its rename, the rename before the line."""
    from quicbed import atomic

    events: list[tuple[str, str]] = []
    real_tree, real_folder = atomic.sync_tree, atomic.sync_folder
    monkeypatch.setattr(atomic, "sync_tree", lambda root: (events.append(("tree", root.name)), real_tree(root)))
    monkeypatch.setattr(
        atomic, "sync_folder", lambda folder: (events.append(("folder", folder.name)), real_folder(folder))
    )
    out = tmp_path / "results"
    with ResultsFolder(out, experiment_file, resume=False) as folder:
        partial = folder.begin_run("c000-r001")
        (partial / "client.json").write_text("{}")
        events.clear()
        folder.commit_run("c000-r001", partial, _record("c000-r001"), {})
    assert events[0] == ("tree", ".c000-r001.partial") and ("folder", "runs") in events[1:]


def test_resume_with_other_code_tools_or_kernel_is_refused_unless_forced(tmp_path, monkeypatch):
    """A resume on another host or after an upgrade would mix two stacks in one result: refused
    with the difference named; --force continues and metadata.json records what was mixed."""
    from quicbed.runner import fingerprint
    from quicbed.runner.engine import ExperimentRunner, RunnerOptions
    from quicbed.spec.experiment import load_experiment

    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(
        f"name: fp-test\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        "backend: netns\nworkload: {object: 10kB}\nmatrix:\n  transport: [tcp]\n"
    )
    out = tmp_path / "out"

    def one_run(run, keeper, folder, earlier=None):
        record = _attempt("ok")
        record.run_id, record.repetition = run.run_id, run.repetition
        folder.commit_run(run.run_id, folder.begin_run(run.run_id), record, {})
        return record

    def session(repetitions: int, **options):
        runner = ExperimentRunner(
            load_experiment(exp_file, {"repetitions": repetitions}), RunnerOptions(out=out, **options)
        )
        runner._one_run = one_run  # type: ignore[method-assign]
        return runner.run()

    session(1)
    first = json.loads((out / "metadata.json").read_text())["fingerprint"]
    assert first["code"] and first["kernel"] and first["topology"] and "aioquic" in first
    real = fingerprint.fingerprint
    monkeypatch.setattr(fingerprint, "fingerprint", lambda *args: {**real(*args), "aioquic": "9.9"})
    with pytest.raises(QuicbedError, match=r"other code, tools, traces or kernel: aioquic .* -> 9.9.*--force"):
        session(2, resume=True)
    assert session(2, resume=True, force=True).ok == 1
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["fingerprint"] == first  # the folder's is its first session's
    assert metadata["mixed_fingerprints"] == [f"session 2: aioquic {first['aioquic']} -> 9.9"]
    assert metadata["sessions"][-1]["fingerprint"]["aioquic"] == "9.9"


def test_the_fingerprint_names_the_traces_a_topology_replays(tmp_path):
    """Each trace file by its digest: the same name may hold another trace later."""
    from quicbed.runner.fingerprint import fingerprint
    from quicbed.spec.experiment import load_experiment

    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(
        f"name: fp-traces\ntopology:\n  script: {ROOT / 'topologies' / 'cellular.py'}\n"
        "backend: ns3\nworkload: {object: 10kB}\nmatrix:\n  params.trace: [step-drop, on-off]\n"
    )
    traces = fingerprint(load_experiment(exp_file))["traces"]
    assert sorted(traces) == ["on-off.down", "on-off.up", "step-drop.down", "step-drop.up"]
    assert all(len(digest) == 16 for digest in traces.values())
