"""Labs without networks: the shipped labs are complete, lab files are validated, checks
run in order with their needs, and ``quicbed lab`` lists, shows, hands out and grades."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest
import yaml

from quicbed.cli import main
from quicbed.errors import SpecError
from quicbed.labs.catalogue import all_labs, find_lab, load_lab
from quicbed.labs.checking import (
    EXIT_FAILED,
    EXIT_PASSED,
    EXIT_UNCHECKED,
    ScoreSheet,
    run_checks,
)
from quicbed.spec.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[2]

#: a lab whose checks read files only: the check machinery without a network
TOY_CHECKS = dedent("""\
    from quicbed.errors import MissingDependency, SpecError
    from quicbed.labs import CannotCheck, Verdict, check

    @check("the answer is there", hint="write answer: 42")
    def present(session):
        return Verdict(True, "answer: %s" % session.answers().get("answer"))

    @check("the answer is 42", expected="42", needs=["present"], hint="think again", points=2)
    def right(session):
        value = session.answer("answer")
        return Verdict(value == 42, f"{value:g}")

    @check("the radio works", needs=["present"])
    def radio(session):
        raise CannotCheck("no mac80211_hwsim here")

    @check("after the radio", needs=["radio"])
    def after_radio(session):
        return Verdict(True, "unreachable")

    @check("after the answer", needs=["right"], hint="own hint")
    def after_right(session):
        return Verdict(True, "fine")
""")


def _toy_lab(base: Path, name: str = "toy", checks: str = TOY_CHECKS, **fields: object) -> Path:
    folder = base / name
    for part in ("starter", "solution"):
        (folder / part).mkdir(parents=True)
    (folder / "starter" / "answers.yaml").write_text("answer:\n")
    (folder / "solution" / "answers.yaml").write_text("answer: 42\n")
    (folder / "handout.md").write_text("# Toy\nWhat is the answer?\n")
    (folder / "checks.py").write_text(checks)
    data = {"title": "Toy lab", "summary": "the answer", "backend": "auto", "files": ["answers.yaml"], **fields}
    (folder / "lab.yaml").write_text(yaml.safe_dump(data))
    return folder


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    labs = tmp_path / "labs"
    _toy_lab(labs)
    monkeypatch.setenv("QUICBED_LABS", str(labs))
    return labs / "toy"


def test_every_shipped_lab_is_complete() -> None:
    labs = [lab for lab in all_labs() if lab.folder.parent == ROOT / "labs"]
    assert {"first-topology", "random-vs-bursty-loss"} <= {lab.name for lab in labs}
    for lab in labs:
        assert lab.solution.is_dir(), lab.name  # (only a students' copy may leave it out)
        checks = lab.checks()
        assert checks and all(item.title and item.points >= 0 for item in checks), lab.name
        handout = lab.handout.read_text()
        assert "## Questions" in handout and f"quicbed lab check {lab.name}" in handout, lab.name
        # every answer the student writes is asked for in the handout, by its key
        answers = lab.starter / "answers.yaml"
        if answers.exists():
            for key in yaml.safe_load(answers.read_text()) or {}:
                assert f"`{key}`" in handout, (lab.name, key)
            assert set(yaml.safe_load((lab.solution / "answers.yaml").read_text())) == set(
                yaml.safe_load(answers.read_text())
            )


def test_a_students_copy_without_solutions_still_hands_out_and_says_why_not_the_solution(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    shutil.rmtree(toy / "solution")
    assert main(["lab", "start", "toy", str(tmp_path / "mine"), "--solution"]) == 1
    assert "lab toy has no reference solution in this installation" in capsys.readouterr().err
    assert not (tmp_path / "mine").exists()
    assert main(["lab", "start", "toy", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "answers.yaml").read_text() == "answer:\n"


@pytest.mark.parametrize(
    "change, fragments",
    [
        ({"titel": "x"}, ["lab.yaml", "titel", "did you mean 'title'"]),
        ({"backend": "mininet"}, ["backend", "unknown backend 'mininet'", "mininet-wifi"]),
        ({"files": ["answers.yaml", "topology.py"]}, ["topology.py missing from starter/", "files"]),
        ({"run": {"repetitions": 0}}, ["run.repetitions", ">= 1"]),
        ({"minutes": "soon"}, ["minutes"]),
    ],
)
def test_a_malformed_lab_file_names_file_field_and_fix(tmp_path: Path, change: dict, fragments: list[str]) -> None:
    folder = _toy_lab(tmp_path, **change)
    with pytest.raises(SpecError) as raised:
        load_lab(folder)
    for fragment in fragments:
        assert fragment in raised.value.render(), raised.value.render()


def test_checks_that_need_an_unknown_check_are_refused(tmp_path: Path) -> None:
    folder = _toy_lab(
        tmp_path,
        checks="from quicbed.labs import Verdict, check\n\n"
        "@check('x', needs=['nothing'])\ndef x(session):\n    return Verdict(True, '')\n",
    )
    with pytest.raises(SpecError, match="needs 'nothing', which is not a check defined before it"):
        load_lab(folder).checks()
    backwards = (
        "from quicbed.labs import Verdict, check\n\n@check('a', needs=['b'])\ndef a(session):\n"
        "    return Verdict(True, '')\n\n@check('b')\ndef b(session):\n    return Verdict(True, '')\n"
    )
    (folder / "checks.py").write_text(backwards)
    with pytest.raises(SpecError, match="needs 'b', which is not a check defined before it"):
        load_lab(folder).checks()


def test_an_unknown_lab_name_suggests_the_closest(toy: Path) -> None:
    with pytest.raises(SpecError, match="did you mean 'toy'"):
        find_lab("tyo")


class _Answers:
    """The part of a CheckSession the toy checks use."""

    def __init__(self, answers: dict) -> None:
        self._answers = answers

    def answers(self) -> dict:
        return self._answers

    def answer(self, key: str) -> float:
        value = self._answers.get(key)
        if not isinstance(value, (int, float)):
            raise SpecError(f"{key} has no number (found {value!r})", source="answers.yaml", field=key)
        return float(value)


def _sheet(toy: Path, answers: dict) -> ScoreSheet:
    lab = find_lab("toy")
    return run_checks(lab.checks(), _Answers(answers), ScoreSheet(lab.name, lab.title, str(toy), "auto"))


def test_checks_run_in_order_and_needs_block_or_skip_what_follows(toy: Path) -> None:
    sheet = _sheet(toy, {"answer": 41})
    status = {result.name: result for result in sheet.results}
    assert [result.name for result in sheet.results] == ["present", "right", "radio", "after_radio", "after_right"]
    assert status["present"].status == "pass" and status["present"].hint == ""
    assert (status["right"].status, status["right"].seen, status["right"].expected, status["right"].hint) == (
        "fail",
        "41",
        "42",
        "think again",
    )
    # a check this machine cannot run is skipped with its reason, and so is what needs it
    assert status["radio"].status == "skip" and "no mac80211_hwsim here" in status["radio"].seen
    assert status["after_radio"].status == "skip"
    # what needs a failed check fails without running, saying which and what to fix first
    assert status["after_right"].status == "fail"
    assert status["after_right"].seen == "not checked: it needs right to pass first"
    assert status["after_right"].hint == "make right pass first"
    assert (sheet.score, sheet.total, sheet.exit_status) == (1, 6, EXIT_FAILED)


def test_a_student_error_fails_the_check_with_file_and_field(toy: Path) -> None:
    sheet = _sheet(toy, {"answer": "forty-two"})
    right = next(result for result in sheet.results if result.name == "right")
    assert right.status == "fail" and "answers.yaml: answer: answer has no number" in right.seen


def test_exit_status_says_passed_failed_or_unchecked(toy: Path) -> None:
    sheet = _sheet(toy, {"answer": 42})
    assert sheet.count("fail") == 0 and sheet.count("skip") == 2
    assert sheet.exit_status == EXIT_UNCHECKED  # nothing failed, but not everything could be checked
    sheet.results = [result for result in sheet.results if result.status == "pass"]
    assert sheet.exit_status == EXIT_PASSED


def test_a_fault_in_the_checks_is_reported_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toy_lab(
        tmp_path,
        checks="from quicbed.labs import check\n\n@check('divides')\ndef divides(session):\n"
        "    return 1 / 0\n\n@check('returns nothing')\ndef nothing(session):\n    pass\n",
    )
    monkeypatch.setenv("QUICBED_LABS", str(tmp_path))
    lab = find_lab("toy")
    sheet = run_checks(lab.checks(), None, ScoreSheet("toy", "Toy", str(tmp_path), "auto"))
    assert [result.status for result in sheet.results] == ["fail", "fail"]
    assert "the check itself failed (ZeroDivisionError" in sheet.results[0].seen
    assert "tell your teacher" in sheet.results[0].seen
    assert "instead of a Verdict" in sheet.results[1].seen


def test_lab_list_and_show(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "list"]) == 0
    out = capsys.readouterr().out
    assert "first-topology" in out and "toy" in out and "Toy lab" in out
    assert main(["lab", "show", "toy"]) == 0
    out = capsys.readouterr().out
    assert "What is the answer?" in out and "handed in: answers.yaml" in out and "checks: 5" in out


def test_start_copies_the_handout_and_starter_and_never_overwrites(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    student = tmp_path / "student"
    assert main(["lab", "start", "toy", str(student)]) == 0
    assert sorted(p.name for p in student.iterdir()) == ["answers.yaml", "handout.md"]
    assert (student / "answers.yaml").read_text() == "answer:\n"
    (student / "answers.yaml").write_text("answer: 7\n")  # the student's work
    assert main(["lab", "start", "toy", str(student), "--solution"]) == 1
    assert "already has" in capsys.readouterr().err
    assert (student / "answers.yaml").read_text() == "answer: 7\n"
    assert main(["lab", "start", "toy", str(tmp_path / "teacher"), "--solution"]) == 0
    assert (tmp_path / "teacher" / "answers.yaml").read_text() == "answer: 42\n"


def test_check_prints_each_result_and_writes_the_score_sheet(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    student = tmp_path / "student"
    main(["lab", "start", "toy", str(student)])
    capsys.readouterr()
    assert main(["lab", "check", "toy", str(student)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "[1/5] pass  the answer is there" in out
    assert "[2/5] FAIL  the answer is 42" in out and "hint:     think again" in out
    assert "[3/5] skip  the radio works" in out and "not checked here: no mac80211_hwsim here" in out
    assert "score 1/6 (1 passed, 2 failed, 2 not checked on this machine)" in out
    (student / "answers.yaml").write_text("answer: 42\n")
    assert main(["lab", "check", "toy", str(student), "--json"]) == EXIT_UNCHECKED
    captured = capsys.readouterr()
    sheet = json.loads(captured.out)  # only the sheet on stdout; progress went to stderr
    assert "[2/5] pass" in captured.err
    assert (sheet["lab"], sheet["score"], sheet["total"], sheet["pass"], sheet["skip"], sheet["exit_status"]) == (
        "toy",
        4,
        6,
        3,
        2,
        EXIT_UNCHECKED,
    )
    assert [check["name"] for check in sheet["checks"]][:2] == ["present", "right"]
    assert json.loads((student / "check-results" / "score.json").read_text())["score"] == 4


def test_check_refuses_a_folder_without_the_labs_files(
    toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "check", "toy", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "has none of this lab's files (answers.yaml)" in err and "quicbed lab start toy" in err
    assert not (tmp_path / "check-results").exists()


def test_a_lab_the_machine_cannot_run_is_skipped_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Mininet-WiFi lab on a kernel without mac80211_hwsim goes to a guest kernel (here the
    microVM: the virtual-time kernel is not built); when that cannot start either, every check
    is skipped with both reasons, and nothing fails."""
    from quicbed.errors import MissingDependency
    from quicbed.host import capabilities, vm
    from quicbed.host.uml import build

    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: None)
    labs = tmp_path / "labs"
    _toy_lab(labs, backend="mininet-wifi")
    monkeypatch.setenv("QUICBED_LABS", str(labs))
    monkeypatch.setattr(capabilities, "has_hwsim", lambda: False)
    monkeypatch.setattr(vm, "inside_vm", lambda: False)

    def no_vm(*args: object, **kwargs: object) -> None:
        raise MissingDependency("virtme-ng (vng) is not installed")

    monkeypatch.setattr(vm, "run_in_vm", no_vm)
    student = tmp_path / "student"
    main(["lab", "start", "toy", str(student), "--solution"])
    capsys.readouterr()
    assert main(["lab", "check", "toy", str(student), "--json"]) == EXIT_UNCHECKED
    sheet = json.loads(capsys.readouterr().out)
    assert sheet["skip"] == 5 and sheet["fail"] == 0
    assert all(
        "this kernel has no mac80211_hwsim, and no guest kernel can run (virtme-ng (vng) is not installed)"
        in check["seen"]
        for check in sheet["checks"]
    )


@pytest.mark.parametrize("option", [[], ["--vm"]], ids=["virtual-time kernel", "microVM asked for"])
def test_a_lab_this_kernel_cannot_run_is_checked_in_the_virtual_time_kernel_where_it_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    from quicbed.host import capabilities, vm
    from quicbed.host.uml import boot, build

    labs = tmp_path / "labs"
    _toy_lab(labs, backend="mininet-wifi")
    monkeypatch.setenv("QUICBED_LABS", str(labs))
    monkeypatch.setattr(capabilities, "has_hwsim", lambda: False)
    monkeypatch.setattr(vm, "inside_vm", lambda: False)
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: build.UmlKernel(tmp_path))
    guests = []

    def guest(name: str):
        def run(argv, cwd, **options):  # the check inside: it writes the score sheet in the shared folder
            guests.append((name, options.get("share")))
            main(argv[3:])  # (its toy radio check skips here, which is not the point)
            return vm.VmResult(0, "", tmp_path / "console.log", tmp_path)

        return run

    monkeypatch.setattr(boot, "run_in_uml", guest("uml"))
    monkeypatch.setattr(vm, "run_in_vm", guest("microVM"))
    student = tmp_path / "student"
    main(["lab", "start", "toy", str(student), "--solution"])
    monkeypatch.setattr(capabilities, "has_hwsim", lambda: True)  # inside the guest it is there
    monkeypatch.setattr(
        "quicbed.cli.lab._needs_vm", lambda lab: None if guests else "this kernel has no mac80211_hwsim"
    )
    capsys.readouterr()
    assert main(["lab", "check", "toy", str(student), *option]) in (0, EXIT_UNCHECKED)
    out = capsys.readouterr().out
    assert "score sheet:" in out and "passed" in out
    if option:
        assert guests == [("microVM", None)] and "checking in the microVM as asked" in out
    else:
        assert guests == [("uml", [student.resolve()])]
        assert "checking in quicbed's virtual-time kernel because this kernel has no mac80211_hwsim" in out


def test_a_run_made_again_counts_by_its_last_attempt(tmp_path: Path) -> None:
    from quicbed.labs.session import ExperimentOutcome

    lines = [
        {
            "run_id": "c000-r001",
            "cell": {"transport": "tcp"},
            "status": "invalid",
            "invalid_reasons": ["ns-3 ran more than 4 ms behind the wall clock for 1.5% of the run"],
        },
        {"run_id": "c000-r002", "cell": {"transport": "tcp"}, "status": "ok", "metrics": {"goodput": 2e7}},
        {
            "run_id": "c000-r001",
            "cell": {"transport": "tcp"},
            "status": "ok",
            "metrics": {"goodput": 3e7},
            "attempt": 2,
        },
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    outcome = ExperimentOutcome.read(tmp_path / "experiment.yaml", tmp_path, 0)
    verdict = outcome.every_run_ok()
    assert verdict.passed and verdict.seen == "2 of 2 ok"
    assert sorted(outcome.values("goodput", transport="tcp")) == [2e7, 3e7]


def test_a_run_still_behind_real_time_counts_only_when_its_cell_has_a_valid_one(tmp_path: Path) -> None:
    """A run invalid after its attempts (the channel behind real time: the machine was busy)
    does not fail a solution whose cell has another, valid run; a cell with none does, and a
    run that failed always does."""
    from quicbed.labs.session import ExperimentOutcome

    late = {"status": "invalid", "invalid_reasons": ["ns-3 ran more than 1 ms behind the wall clock for 6.0%"]}
    ok = {"status": "ok", "metrics": {"goodput": 4e7}}

    def verdict(rows: list[dict]) -> object:
        (tmp_path / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        return ExperimentOutcome.read(tmp_path / "experiment.yaml", tmp_path, 0).every_run_ok()

    one = {"cell": {"params.hops": 1}}
    three = {"cell": {"params.hops": 3}}
    busy = verdict(
        [
            {"run_id": "c000-r001", **one, **ok},
            {"run_id": "c000-r002", **one, **late},
            {"run_id": "c001-r001", **three, **ok},
        ]
    )
    assert busy.passed and busy.seen.startswith("2 of 3 ok; invalid, the channel behind real time"), busy.seen
    assert "c000-r002" in busy.seen
    none = verdict([{"run_id": "c000-r001", **one, **ok}, {"run_id": "c001-r001", **three, **late}])
    assert not none.passed and 'no valid run in {"params.hops": 3}' in none.seen, none.seen
    failed = verdict(
        [
            {"run_id": "c000-r001", **one, **ok},
            {"run_id": "c000-r002", **one, "status": "failed", "error": "server exited with status 1"},
            {"run_id": "c001-r001", **three, **ok},
        ]
    )
    assert not failed.passed and "not ok: c000-r002 server exited with status 1" in failed.seen


def _bursty_loss_outcome(tmp_path: Path, tcp_ge_errors: list[str], quic_ge_ok: bool = True) -> object:
    """The lab random-vs-bursty-loss's own runs_complete check, on a results file whose TCP runs
    over the GE channel all ended with ``tcp_ge_errors``."""
    import importlib.util
    from types import SimpleNamespace

    from quicbed.labs.session import ExperimentOutcome

    lab = ROOT / "labs" / "random-vs-bursty-loss"
    spec = importlib.util.spec_from_file_location("bursty_checks", lab / "checks.py")
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    ge = {"gemodel": {"p": 1, "r": 24, "loss_bad": 100, "loss_good": 0}}
    ok = {"status": "ok", "metrics": {"loss": 0.04}}
    lines = [
        {"run_id": "c000-r001", "cell": {"transport": "tcp", checks.LOSS_AXIS: 4}, **ok},
        {"run_id": "c002-r001", "cell": {"transport": "quic-native", checks.LOSS_AXIS: 4}, **ok},
        {
            "run_id": "c003-r001",
            "cell": {"transport": "quic-native", checks.LOSS_AXIS: ge},
            **(ok if quic_ge_ok else {"status": "failed", "error": "download failed: timeout after 60s"}),
        },
    ]
    lines += [
        {
            "run_id": f"c001-r00{n + 1}",
            "cell": {"transport": "tcp", checks.LOSS_AXIS: ge},
            "status": "failed",
            "error": error,
        }
        for n, error in enumerate(tcp_ge_errors)
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    outcome = ExperimentOutcome.read(tmp_path / "experiment.yaml", tmp_path, 0)
    session = SimpleNamespace(
        experiment=lambda: outcome, experiment_file=lambda: load_experiment(lab / "solution" / "experiment.yaml")
    )
    return checks.runs_complete(session)


def test_bursty_loss_lab_counts_a_cell_of_timed_out_tcp_downloads_as_a_result(tmp_path: Path) -> None:
    # TCP over GE times out in about 1 run in 3 (the chain stays Bad while TCP backs off): a cell
    # where all of them did is what the handout's Q3 asks about, not a broken solution
    verdict = _bursty_loss_outcome(tmp_path, ["download failed: timeout after 60s"] * 2)
    assert verdict.passed, verdict.seen
    assert "c001-r002 download failed: timeout after 60s" in verdict.seen


def test_bursty_loss_lab_fails_a_cell_that_failed_otherwise_or_a_channel_without_results(tmp_path: Path) -> None:
    crashed = _bursty_loss_outcome(tmp_path, ["download failed: timeout after 60s", "server exited with status 1"])
    assert not crashed.passed and "no completed run in {'transport': 'tcp'" in crashed.seen
    silent = _bursty_loss_outcome(tmp_path, ["download failed: timeout after 60s"], quic_ge_ok=False)
    assert not silent.passed and "no completed run on the channel {'gemodel'" in silent.seen


def test_a_network_that_fails_to_start_is_torn_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lab check whose network fails half-built (Mininet exits when a tool is missing) must
    leave nothing behind: its folders and daemons went unremoved when start() was called bare."""
    from quicbed.backends.base import Network
    from quicbed.labs import session as sessions
    from quicbed.spec.topology import Topology

    torn_down: list[bool] = []

    class HalfBuilt(Network):
        def start(self) -> None:
            raise SystemExit(1)  # what Mininet's pathCheck does

        def _teardown(self) -> None:
            torn_down.append(True)

        def node(self, name):  # type: ignore[no-untyped-def]
            raise AssertionError("never reached")

    topology = Topology("half")
    topology.add_host("a")
    check = sessions.CheckSession(find_lab("first-topology"), tmp_path)
    monkeypatch.setattr(check, "topology", lambda name, **params: topology)
    monkeypatch.setattr(check, "backend", lambda topo: "netns")
    monkeypatch.setattr(sessions, "create", lambda backend, topo, **options: HalfBuilt(topo))
    with pytest.raises(SystemExit):
        check.network("topology.py")
    assert torn_down == [True]
