"""A full disk and a read-only results folder: the experiment stops with an error that names the
path and the fix, what was written stays readable (results.jsonl ends with a whole line), and
--resume finishes the experiment once the space is back.

The runs are the runner's own (results folder, metadata, run folders, results lines) on a small
tmpfs; only what a run measures is stood in for: each run writes a 300 kB capture and reports
a finished download, without any network.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quicbed.errors import QuicbedError
from quicbed.runner import engine
from quicbed.runner.engine import ExperimentRunner, RunnerOptions
from quicbed.runner.folder import ResultsFolder, StorageError, append_line, read_results
from quicbed.spec.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[2]
CAPTURE_BYTES = 300_000


class StandInNetwork:
    def __init__(self, topology: Any) -> None:
        self.topology = topology

    def __enter__(self) -> StandInNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {}


class StandInExecution:
    """A run that writes its capture into the run's folder and reports a finished download."""

    def __init__(self, network: Any, experiment: Any, run: Any, assets: Any, folder: Path) -> None:
        self.folder = folder
        self.details: dict[str, Any] = {}

    def perform(self) -> dict[str, Any]:
        (self.folder / "server.pcap").write_bytes(b"\0" * CAPTURE_BYTES)
        return {"ok": True}


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "create", lambda backend, topology: StandInNetwork(topology))
    monkeypatch.setattr(engine, "RunExecution", StandInExecution)
    monkeypatch.setattr(engine, "prepare_assets", lambda work, experiment: object())
    for name in ("qdisc_state", "interface_state", "host_info", "tool_versions", "git_commit"):
        monkeypatch.setattr(engine.meta, name, lambda *arguments: {})
    monkeypatch.setattr(engine.bench_results, "calibration", lambda: {})
    monkeypatch.setattr(engine, "run_metrics_of", lambda *arguments: {"goodput": 1e7})
    monkeypatch.setattr(engine, "cpu_metrics", lambda *arguments: {})
    monkeypatch.setattr(engine, "stress_metrics", lambda *arguments: {})


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (unmounted afterwards, whatever happens)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


def _experiment(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: storage\ntopology: {{script: {ROOT / 'topologies' / 'dumbbell.py'}}}\nbackend: netns\n"
        "matrix:\n  transport: [quic, tcp]\nrepetitions: 5\n"
    )
    return path


def _run(experiment_file: Path, out: Path, resume: bool) -> Any:
    runner = ExperimentRunner(load_experiment(experiment_file), RunnerOptions(out=out, resume=resume))
    return runner.run()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _assert_readable(out: Path) -> list[dict[str, Any]]:
    """Every line of results.jsonl is a whole record whose run folder is complete; metadata.json is JSON."""
    text = (out / "results.jsonl").read_text()
    assert text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert json.loads((out / line["folder"] / "run.json").read_text())["run_id"] == line["run_id"]
        assert (out / line["folder"] / "server.pcap").stat().st_size == CAPTURE_BYTES
    json.loads((out / "metadata.json").read_text())
    assert not [path.name for path in out.rglob(".*.tmp*")]
    return lines


@pytest.mark.needs_root
def test_a_full_disk_stops_the_experiment_and_resume_finishes_it(
    stand_ins: None, small_disk: Path, tmp_path: Path
) -> None:
    experiment_file, out = _experiment(tmp_path), small_disk / "results"
    with pytest.raises(StorageError, match="no space left on the device") as stopped:
        _run(experiment_file, out, resume=False)
    assert str(out) in str(stopped.value) and "--resume" in str(stopped.value)
    written = _assert_readable(out)
    assert 0 < len(written) < 10
    before = (out / "results.jsonl").read_bytes()

    _remount(small_disk, "size=16m")  # space is back
    summary = _run(experiment_file, out, resume=True)
    assert (summary.total, summary.skipped, summary.ok) == (10, len(written), 10 - len(written))
    lines = _assert_readable(out)
    assert (out / "results.jsonl").read_bytes().startswith(before)  # nothing already written changed
    assert sorted(line["run_id"] for line in lines) == sorted({line["run_id"] for line in lines})
    assert len(lines) == 10 and json.loads((out / "metadata.json").read_text())["status"] == "complete"


@pytest.mark.needs_root
def test_a_read_only_folder_is_refused_and_left_as_it_was(stand_ins: None, small_disk: Path, tmp_path: Path) -> None:
    experiment_file, out = _experiment(tmp_path), small_disk / "results"
    _remount(small_disk, "size=16m")
    with pytest.raises(StorageError, match="no space left"):  # half of it first: then the folder goes read-only
        _remount(small_disk, "size=1600k")
        _run(experiment_file, out, resume=False)
    _remount(small_disk, "size=16m,ro")
    before = _tree(out)
    with pytest.raises(StorageError, match="the file system is read-only") as refused:
        _run(experiment_file, out, resume=True)
    assert str(out) in str(refused.value) and "remount it read-write" in str(refused.value)
    assert _tree(out) == before
    _remount(small_disk, "rw")
    assert _run(experiment_file, out, resume=True).ok > 0
    assert len(_assert_readable(out)) == 10


@pytest.mark.needs_root
def test_a_new_folder_that_cannot_be_set_up_is_not_left_half_made(
    stand_ins: None, small_disk: Path, tmp_path: Path
) -> None:
    experiment_file, out = _experiment(tmp_path), small_disk / "results"
    (small_disk / "filler").write_bytes(b"\0" * (2 * 2**20 - 4096))
    with pytest.raises(StorageError, match=f"cannot write {small_disk}"):
        _run(experiment_file, out, resume=False)
    assert not out.exists()
    (small_disk / "filler").unlink()
    _remount(small_disk, "size=16m")
    assert _run(experiment_file, out, resume=False).ok == 10  # the same --out, afresh


def test_a_line_the_disk_cannot_take_whole_is_cut_off_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results.jsonl"
    append_line(results, '{"run_id": "c000-r001"}')
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    with pytest.raises(StorageError, match="no space left"):
        append_line(results, '{"run_id": "c001-r001", "status": "ok"}')
    monkeypatch.setattr(os, "write", real_write)
    append_line(results, '{"run_id": "c001-r001"}')
    assert [line.run_id for line in read_results(results)] == ["c000-r001", "c001-r001"]


@pytest.mark.parametrize(
    "number, words", [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only"), (errno.EACCES, "permission denied")]
)
def test_a_results_folder_that_cannot_be_written_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: int, words: str
) -> None:
    experiment_file = _experiment(tmp_path)
    with ResultsFolder(tmp_path / "out", experiment_file, resume=False) as folder:

        def refuse(*arguments: object, **keywords: object) -> None:
            raise OSError(number, os.strerror(number), str(tmp_path / "out" / "metadata.json"))

        monkeypatch.setattr(Path, "write_text", refuse)
        with pytest.raises(QuicbedError, match=words) as refused:
            folder.write_metadata({"name": "x"})
    assert "metadata.json" in str(refused.value) and "--resume" in str(refused.value)
    assert not list((tmp_path / "out").glob(".*.tmp"))
    with contextlib.suppress(FileNotFoundError):
        assert json.loads((tmp_path / "out" / "metadata.json").read_text())
