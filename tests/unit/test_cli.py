"""Every subcommand explains itself with --help, and usage errors are reported plainly."""

from pathlib import Path

import pytest

from quicbed.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_each_subcommand(command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert f"quicbed {command}" in text
    assert len(text.splitlines()) >= 5


def test_errors_are_one_line_without_traceback(capsys, tmp_path):
    assert main(["topo", "show", str(tmp_path / "missing.py")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quicbed: error: ") and "Traceback" not in err
    assert "topology file not found" in err


def test_dry_run_lists_the_runs(capsys):
    assert main(["run", str(ROOT / "experiments" / "e4-random-loss.yaml"), "--dry-run", "--repetitions", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "18 cell(s) x 1 repetition(s) = 18 runs" in out
    assert "c017-r001" in out


def test_doctor_reports_every_capability_with_what_its_absence_disables(capsys):
    import json

    assert main(["doctor", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    for name in ("netns", "netem", "mac80211_hwsim", "openvswitch", "kvm", "ns3", "nginx", "iperf3", "tcpdump",
                 "aioquic", "mininet_wifi", "vm_kernel", "qemu", "vng"):
        assert isinstance(found[name]["available"], bool), name
        assert found[name]["disables"], name
    assert found["aioquic"]["available"]  # a dependency of quicbed itself


def test_doctor_turns_a_failing_check_into_a_line_of_its_own(capsys, monkeypatch, tmp_path):
    """A broken package (here one that raises on import, as a requirement conflict does) gives an
    'error' line with a fix; every other check still prints, and the exit status says so."""
    import json
    import sys

    from quicbed.host import capabilities

    (tmp_path / "broken_dependency.py").write_text(
        "raise ImportError('C extension: None not built')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_dependency", raising=False)

    def imports_a_broken_package():
        import broken_dependency  # noqa: F401

    monkeypatch.setattr(capabilities, "CHECKS", (
        *capabilities.CHECKS[:1], ("broken", "something users need", imports_a_broken_package),
        *capabilities.CHECKS[1:]))
    assert main(["doctor", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["broken"]["error"] is True and found["broken"]["available"] is False
    assert "C extension: None not built" in found["broken"]["detail"]
    assert "pip check" in found["broken"]["fix"]
    assert found["aioquic"]["available"] and not found["aioquic"]["error"]  # the rest still ran

    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out and "broken" in out and "error" in out
