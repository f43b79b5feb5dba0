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
