"""Wired links that replay a delivery trace: the link parameter, what the ns3 channel is told,
the refusal on the kernel's qdiscs, and the backend an experiment file without one gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quicbed import Topology
from quicbed.backends import netns
from quicbed.backends.ns3.description import Ns3Options, describe
from quicbed.backends.tc import qdisc_commands
from quicbed.cli import main
from quicbed.errors import BackendError, SpecError
from quicbed.runner import backend_choice

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "twelve.down"
    path.write_text("".join(f"{ms}\n" for ms in range(1, 1001)))  # 12 Mbit/s for 1 s
    return path


def _traced(trace: Path, **shape) -> Topology:
    topo = Topology("traced")
    topo.add_link(
        topo.add_host("a"),
        topo.add_host("b"),
        name="cell",
        delay="20ms",
        queue_limit=50,
        backward={"trace": str(trace), **shape},
    )
    return topo


def test_a_link_reads_its_trace_per_direction(trace):
    link = _traced(trace).link("cell")
    assert link.forward.trace is None
    assert link.backward.trace.opportunities == 1000 and link.backward.trace.period_ms == 1000
    assert link.backward.trace.mean_rate == pytest.approx(12e6)
    assert "twelve.down (mean 12 Mbit/s, repeats every 1 s)" in link.backward.trace.describe()


@pytest.mark.parametrize("shape", [{"rate": "10mbit"}, {"burst": "15kB"}])
def test_a_trace_with_a_rate_is_refused(trace, shape):
    with pytest.raises(SpecError) as error:
        _traced(trace, **shape)
    assert (
        "links[cell].backward.trace: a delivery trace sets the link's capacity; it cannot have a rate (or burst) "
        "too (fix: drop rate"
    ) in str(error.value)


def test_a_missing_or_malformed_trace_names_the_field_and_the_line(tmp_path, trace):
    with pytest.raises(
        SpecError,
        match=r"links\[cell\].backward.trace: no trace file 'nowhere.down' .*shipped trace: "
        r"constant-12mbit.down, constant-12mbit.up",
    ):
        _traced(Path("nowhere.down"))
    bad = tmp_path / "bad.down"
    bad.write_text("1\n5\n3\n")
    with pytest.raises(SpecError) as error:
        _traced(bad)
    assert "line 3: 3 ms comes after 5 ms" in str(error.value) and "links[cell].backward.trace" in str(error.value)


def test_the_ns3_channel_gets_the_trace_file_and_the_queue(trace):
    resolved = _traced(trace).resolve()
    namespaces = {name: f"qbtest-{name}" for name in ("a", "b")}
    description = describe(
        resolved,
        namespaces,
        Ns3Options(),
        {"stats_file": "/tmp/s.json", "snapshot_file": "/tmp/n.json", "live_file": "/tmp/l.json"},
    )
    (wire,) = description["wires"]
    assert wire["backward"] == {"queue_packets": 50, "delay_s": 0.02, "trace_file": str(trace.resolve())}
    assert "trace_file" not in wire["forward"]
    json.dumps(description)


def test_the_kernels_qdiscs_refuse_a_trace(trace):
    topo = _traced(trace)
    with pytest.raises(
        BackendError,
        match=r"netns backend cannot build these links: links\[cell\].backward: a "
        r"delivery trace \(twelve.down\) needs the ns3 backend",
    ):
        netns.check_requirements(topo)
    with pytest.raises(BackendError, match="needs the ns3 backend"):
        qdisc_commands("cell-b", topo.link("cell").backward)


def _experiment(tmp_path: Path, trace: Path, backend: str = "") -> Path:
    script = tmp_path / "traced.py"
    script.write_text(
        "from quicbed import Topology\n\ndef topology():\n    topo = Topology('traced')\n"
        "    topo.add_link(topo.add_host('client'), topo.add_host('server'), name='cell', delay='10ms',\n"
        f"                  backward={{'trace': {str(trace)!r}}})\n    return topo\n"
    )
    path = tmp_path / "traced.yaml"
    path.write_text(
        f"name: traced\ntopology: {{script: {script}}}\n{backend}matrix:\n  transport: [tcp]\n"
        "repetitions: 1\nwarmup: 0\n"
    )
    return path


@pytest.mark.parametrize("netem", [True, False])
def test_an_experiment_without_a_backend_replays_its_traces_on_ns3(monkeypatch, capsys, tmp_path, trace, netem):
    monkeypatch.setattr(backend_choice, "has_netem", lambda: netem)
    monkeypatch.setattr(backend_choice, "unavailable", lambda name: None)
    assert main(["run", str(_experiment(tmp_path, trace)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "note: the links cell of " in out and "replay delivery traces, which only the ns3 backend can" in out
    assert "backend ns3," in out


def test_a_named_kernel_backend_is_refused_before_anything_runs(capsys, tmp_path, trace):
    exp, out = _experiment(tmp_path, trace, "backend: netns\n"), tmp_path / "results"
    assert main(["run", str(exp), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{exp}: the netns backend cannot realise this experiment's links: links[cell].backward: a delivery "
        "trace (twelve.down) needs the ns3 backend"
        in err
        and "(fix: backend: ns3, or --backend ns3)" in err
    )
    assert not out.exists()
