"""Which backend runs an experiment file that names none, on a kernel without netem."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicbed.cli import main
from quicbed.runner import backend_choice

ROOT = Path(__file__).resolve().parents[2]
E4 = ROOT / "experiments" / "e4-random-loss.yaml"


def _experiment(tmp_path: Path, body: str, name: str = "choice.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        f"name: choice\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        f"  params: {{rate: 20mbit, delay: 10ms}}\nrepetitions: 1\n{body}"
    )
    return path


@pytest.fixture
def no_netem(monkeypatch):
    from quicbed.host.uml import build

    monkeypatch.setattr(backend_choice, "has_netem", lambda: False)
    monkeypatch.setattr(backend_choice, "unavailable", lambda name: None)
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: None)  # (the microVM, unless a test says)


def test_without_netem_ns3_is_chosen_and_said(no_netem, capsys):
    assert main(["run", str(E4), "--dry-run", "--repetitions", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("note: this kernel has no netem, which the links bottleneck (delay, loss) of ")
    assert "running them on the ns3 backend" in out and "--backend netns" in out and "microVM" in out
    assert "= 18 runs, order round-robin, backend ns3," in out


@pytest.mark.parametrize("how", ["option", "file"])
def test_a_named_backend_is_kept(no_netem, capsys, tmp_path, how):
    if how == "option":
        argv = [str(E4), "--backend", "netns"]
    else:
        argv = [str(_experiment(tmp_path, "backend: netns\nmatrix:\n  transport: [tcp]\n"))]
    assert main(["run", *argv, "--dry-run", "--repetitions", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out and "backend netns," in out


def test_with_netem_nothing_changes(monkeypatch, capsys):
    from quicbed.host import capabilities

    monkeypatch.setattr(backend_choice, "has_netem", lambda: True)
    monkeypatch.setattr(capabilities, "has_netem", lambda: True)
    assert main(["run", str(E4), "--dry-run", "--repetitions", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out and "backend netns," in out


@pytest.mark.parametrize("virtual_time_kernel", [False, True], ids=["microVM", "virtual-time kernel"])
def test_links_ns3_cannot_realise_go_to_a_guest_kernel_and_say_why(
    no_netem, capsys, tmp_path, monkeypatch, virtual_time_kernel
):
    """Without netem here they run on netns in the virtual-time kernel where it is built (netem
    built in, no CPU cost), else in the microVM; --clock real asks for the microVM."""
    from quicbed.cli import run
    from quicbed.host.uml import build

    monkeypatch.setattr(run, "_needs_vm_reason", lambda *_: "this kernel has no netem")
    monkeypatch.setattr(
        build, "cached_uml_kernel", lambda directory=None: build.UmlKernel(tmp_path) if virtual_time_kernel else None
    )
    exp = _experiment(tmp_path, "matrix:\n  transport: [tcp]\n  link.bottleneck.duplicate: [1]\n")
    assert main(["run", str(exp), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "the ns3 backend cannot run them (links[bottleneck].forward: the ns3 backend does not model duplicate" in out
    assert "they run on netns in a guest kernel with netem" in out and "backend netns," in out
    if virtual_time_kernel:
        assert (
            "note: this kernel has no netem: the runs go to quicbed's virtual-time kernel, which has it built in "
            "(their records say clock: virtual"
        ) in out
        assert "backend: netns, in virtual time (quicbed's User-Mode Linux kernel" in out
    else:
        assert "virtual" not in out and "backend: netns, in the microVM because this kernel has no netem" in out
    assert main(["run", str(exp), "--dry-run", "--clock", "real"]) == 0
    assert "backend: netns, in the microVM because this kernel has no netem" in capsys.readouterr().out


def test_ns3_refuses_what_it_cannot_realise_before_anything_runs(capsys, tmp_path):
    exp = _experiment(tmp_path, "matrix:\n  transport: [tcp]\n  link.bottleneck.duplicate: [1]\n")
    out = tmp_path / "results"
    assert main(["run", str(exp), "--backend", "ns3", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{exp}: the ns3 backend cannot realise this experiment's links: links[bottleneck].forward" in err
    assert "does not model duplicate on wired links (fix: remove them, or use the netns backend" in err
    assert not out.exists()


def test_bit_errors_are_realised_on_ns3(no_netem, capsys):
    """netem's corruption has a meaning ns3 keeps: the corrupted packet fails its checksum and
    the receiver drops it (docs/ns3-backend.md)."""
    assert (
        main(
            [
                "run",
                str(ROOT / "experiments" / "e4-bit-errors.yaml"),
                "--dry-run",
                "--repetitions",
                "1",
                "--warmup",
                "0",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "links bottleneck (delay, corrupt)" in out and "backend ns3," in out


def test_the_registry_answers_for_every_backend_by_name():
    from quicbed import Topology
    from quicbed.backends import BACKENDS, unavailable, unrealisable

    topo = Topology("t")
    topo.add_link(topo.add_host("a"), topo.add_host("b"), name="ab", rate="10mbit", delay="10ms", reorder=5)
    assert unavailable("netns") is None
    for name in BACKENDS:
        assert isinstance(unrealisable(name, topo), list)
    assert any("reorder" in problem for problem in unrealisable("ns3", topo))  # ns3 cannot reorder
    assert unrealisable("netns", topo) == []  # netem can


def _roaming(tmp_path: Path, options: str = "") -> Path:
    path = tmp_path / "roam.yaml"
    path.write_text(
        f"name: roam\ntopology:\n  script: {ROOT / 'topologies' / 'roaming.py'}\n"
        "  params: {standard: 802.11a}\nbackend: mininet-wifi\nclient: sta1\nserver: server\n"
        f"repetitions: 1\n{options}"
    )
    return path


def test_a_roaming_station_on_mininet_wifi_is_refused_before_anything_runs_without_wmediumd(capsys, tmp_path):
    out = tmp_path / "results"
    assert main(["run", str(_roaming(tmp_path)), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "the mininet-wifi backend cannot realise" in err and "station sta1 roams between ap1, ap2" in err
    assert "fix: wmediumd=True" in err and "(backend_options.mininet-wifi: none)" in err
    assert not out.exists()


def test_backend_options_reach_the_backend_and_are_checked_by_it(capsys, tmp_path):
    options = "backend_options:\n  mininet-wifi: {wmediumd: true, propagation_model: logDistance}\n  ns3: {}\n"
    assert main(["run", str(_roaming(tmp_path, options)), "--dry-run"]) == 0
    assert "backend mininet-wifi," in capsys.readouterr().out
    wrong = "backend_options:\n  mininet-wifi: {wmediumd: true, wmedium: true}\n"
    assert main(["run", str(_roaming(tmp_path, wrong)), "--out", str(tmp_path / "results")]) == 1
    err = capsys.readouterr().err
    assert "unknown mininet-wifi backend option(s) ['wmedium']" in err and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("backend_options:\n  mininet_wifi: {wmediumd: true}\n", "'mininet_wifi' is not allowed"),
        ("backend_options:\n  mininet-wifi: true\n", "expected a mapping, got bool"),
    ],
)
def test_backend_options_are_named_by_backend(capsys, tmp_path, options, message):
    assert main(["run", str(_roaming(tmp_path, options)), "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert message in err and "backend_options" in err
