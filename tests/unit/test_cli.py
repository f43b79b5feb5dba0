"""Every subcommand explains itself with --help, and usage errors are reported plainly."""

import json
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


def test_debug_shows_the_traceback_wherever_it_is_given(tmp_path, capsys):
    missing = str(tmp_path / "missing.py")
    for argv in (
        ["--debug", "topo", "show", missing],
        ["topo", "show", missing, "--debug"],
        ["topo", "--debug", "show", missing],
    ):
        with pytest.raises(Exception, match="topology file not found"):
            main(argv)
    assert main(["topo", "show", missing]) == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_help_text_has_no_unformatted_percent_signs(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "%%" not in capsys.readouterr().out


def test_topo_show_prints_the_values_it_applied(capsys):
    dumbbell = str(ROOT / "topologies" / "dumbbell.py")
    assert main(["topo", "show", dumbbell, "-p", "rate=5mbit", "-p", "loss=2%"]) == 0
    shown = capsys.readouterr().out
    assert "parameters: rate='5mbit' (given), delay='10ms', loss=2.0 (given), queue_limit=1000" in shown
    assert main(["topo", "show", dumbbell, "-p", "rate=5mbit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"]["rate"] == "5mbit"


def test_a_structured_parameter_is_read_as_the_file_would_hold_it(capsys):
    """-p goes through the experiment file's parsers: a Gilbert-Elliott mapping in YAML reaches
    the link as that model; broken YAML and a wrong model field are named."""
    dumbbell = str(ROOT / "topologies" / "dumbbell.py")
    assert main(["topo", "show", dumbbell, "-p", "loss={gemodel: {p: 1, r: 30}}", "--json"]) == 0
    (link,) = [link for link in json.loads(capsys.readouterr().out)["links"] if link["name"] == "bottleneck"]
    assert link["forward"]["loss"]["model"] == "GilbertElliott" and link["forward"]["loss"]["p"] == 0.01
    assert main(["topo", "show", dumbbell, "-p", "loss={gemodel: {p: 1, r: 30}"]) == 1
    assert "params.loss: '{gemodel: {p: 1, r: 30}' is not a YAML mapping or list" in capsys.readouterr().err
    assert main(["topo", "show", dumbbell, "-p", "loss={gemodel: {p: 1, x: 30}}"]) == 1
    assert "unknown gemodel parameter(s) ['x']" in capsys.readouterr().err


def test_output_to_a_pipe_is_neither_cut_nor_wrapped_mid_line(capsys):
    """Not a terminal (capsys): no ellipsis in doctor's table, one line per parameter list."""
    main(["doctor"])
    assert "\u2026" not in capsys.readouterr().out
    params = ["-p", "stations=3", "-p", "wired_delay=30ms"]
    assert main(["topo", "show", str(ROOT / "topologies" / "wifi_ap.py"), *params]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("parameters:")]
    assert line.rstrip().endswith("ofdma_uplink=False")  # the last parameter: the whole list is on the line


def test_a_name_the_system_refuses_is_one_line_and_leaves_nothing(tmp_path, capsys):
    """A 300-character name (a file name is at most 255 bytes): one line naming the path and
    the fix, no traceback, and lab start removes the folders it had made."""
    long = "x" * 300
    assert main(["lab", "start", "first-topology", str(tmp_path / "course" / long)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quicbed: error: ") and "File name too long (fix: use a shorter name" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # not even "course"
    assert (
        main(["trace", "constant", "--rate", "10mbit", "--duration", "1s", "-o", str(tmp_path / f"{long}.down")]) == 1
    )
    assert "File name too long" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    with pytest.raises(OSError):
        main(["--debug", "lab", "start", "first-topology", str(tmp_path / long)])


def test_an_experiment_name_has_a_length_limit(tmp_path, capsys):
    experiment = tmp_path / "long.yaml"
    experiment.write_text(
        (ROOT / "experiments" / "quickstart.yaml").read_text().replace("name: quickstart", "name: " + "q" * 101)
    )
    assert main(["run", str(experiment), "--dry-run"]) == 1
    assert "name is 101 characters long, more than 100" in capsys.readouterr().err


def _words(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def test_one_statement_of_what_happens_without_netem(capsys, monkeypatch):
    """README, 'run --help' and doctor say the same thing about a kernel without netem."""
    from quicbed.cli import doctor
    from quicbed.host.capabilities import Capability
    from quicbed.runner.backend_choice import NO_NETEM

    assert _words(NO_NETEM) in _words((ROOT / "README.md").read_text())
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert _words(NO_NETEM) in _words(capsys.readouterr().out)
    absent = [
        Capability("netem", False, "no sch_netem in this kernel", "delay and loss", "the microVM"),
        Capability("vm_kernel", True, "6.1", "", ""),
    ]
    monkeypatch.setattr(doctor, "capabilities", lambda checks: absent)
    doctor.handle(doctor.argparse.Namespace(json=False))
    assert _words(NO_NETEM) in _words(capsys.readouterr().out)


def test_a_dry_run_checks_what_the_run_checks_and_says_where_it_runs(capsys, tmp_path):
    quickstart = str(ROOT / "experiments" / "quickstart.yaml")
    assert main(["run", quickstart, "--dry-run", "--resume"]) == 1
    assert "--resume needs --out" in capsys.readouterr().err
    assert main(["run", quickstart, "--dry-run", "--out", str(tmp_path / "q")]) == 0
    out = capsys.readouterr().out
    assert "backend: ns3, on this host" in out and f"results folder: {tmp_path / 'q'}" in out
    assert "topology: dumbbell.py with rate='20mbit', delay='10ms'" in out and "workload: object=2000000" in out
    assert not (tmp_path / "q").exists()


def test_transports_lists_every_name_a_matrix_can_take(capsys):
    import json

    import yaml

    from quicbed.spec.experiment import BUILTIN_TRANSPORTS

    assert main(["transports", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert list(listed["transports"]) == list(BUILTIN_TRANSPORTS) and listed["profiles"] == {}
    assert all(spec["source"] == "built-in" for spec in listed["transports"].values())
    assert listed["transports"]["bquic-native"]["impl"] == "quinn"
    assert listed["transports"]["bquic-native"]["knobs"] == BUILTIN_TRANSPORTS["bquic-native"]["knobs"]
    assert main(["transports"]) == 0
    listed = capsys.readouterr().out
    assert all(f"\u2502 {name} " in listed for name in BUILTIN_TRANSPORTS)
    # README's example is the shipped file's matrix
    shipped = yaml.safe_load((ROOT / "experiments" / "e4-random-loss.yaml").read_text())["matrix"]["transport"]
    assert f"transport: [{', '.join(shipped)}]" in (ROOT / "README.md").read_text()


def test_transports_of_an_experiment_and_profiles_of_a_file(capsys, tmp_path):
    """An experiment's own transports are listed with the file they come from; a profiles file's
    profiles with the knobs they set."""
    import json

    experiment = ROOT / "experiments" / "e3-cc-parallel.yaml"
    assert main(["transports", str(experiment), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["transports"]
    assert (
        listed["quic-bbr"]["source"] == str(experiment) and listed["quic-bbr"]["knobs"]["congestion_control"] == "bbr"
    )
    assert listed["tcp"]["source"] == "built-in"
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "version: 1\nprofiles:\n  bquic-paced:\n    extends: bquic\n    description: BQUIC with pacing\n"
        "    pacing: true\n"
    )
    assert main(["transports", "--profiles-file", str(mine), "--json"]) == 0
    (profile,) = json.loads(capsys.readouterr().out)["profiles"].values()
    assert profile["name"] == "bquic-paced" and profile["source"] == str(mine)
    # the knobs apart from aioquic's defaults: bquic's, inherited, without its "no pacing"
    assert profile["knobs"]["ack_every"] == 10 and "pacing" not in profile["knobs"]
    assert main(["transports", "--profiles-file", str(mine)]) == 0
    assert "bquic-paced" in capsys.readouterr().out


def test_dry_run_lists_the_runs(capsys):
    assert (
        main(
            [
                "run",
                str(ROOT / "experiments" / "e4-random-loss.yaml"),
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
    assert "18 cell(s) x 1 repetition(s) = 18 runs" in out
    assert "c017-r001" in out


def test_doctor_reports_every_capability_with_what_its_absence_disables(capsys):
    import json

    assert main(["doctor", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    for name in (
        "netns",
        "netem",
        "mac80211_hwsim",
        "openvswitch",
        "kvm",
        "ns3",
        "nginx",
        "iperf3",
        "tcpdump",
        "aioquic",
        "mininet_wifi",
        "vm_kernel",
        "qemu",
        "vng",
    ):
        assert isinstance(found[name]["available"], bool), name
        assert found[name]["disables"], name
    assert found["aioquic"]["available"]  # a dependency of quicbed itself


def test_doctor_turns_a_failing_check_into_a_line_of_its_own(capsys, monkeypatch, tmp_path):
    """A broken package (here one that raises on import, as a requirement conflict does) gives an
    'error' line with a fix; every other check still prints, and the exit status says so."""
    import json
    import sys

    from quicbed.host import capabilities

    (tmp_path / "broken_dependency.py").write_text("raise ImportError('C extension: None not built')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_dependency", raising=False)

    def imports_a_broken_package():
        import broken_dependency  # noqa: F401

    monkeypatch.setattr(
        capabilities,
        "CHECKS",
        (
            *capabilities.CHECKS[:1],
            ("broken", "something users need", imports_a_broken_package),
            *capabilities.CHECKS[1:],
        ),
    )
    assert main(["doctor", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["broken"]["error"] is True and found["broken"]["available"] is False
    assert "C extension: None not built" in found["broken"]["detail"]
    assert "pip check" in found["broken"]["fix"]
    assert found["aioquic"]["available"] and not found["aioquic"]["error"]  # the rest still ran

    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out and "broken" in out and "error" in out


def test_readme_tells_one_story_in_a_newcomers_order():
    """The words it uses first, then install and first run, doctor, reading the results, own topology and
    experiment, labs, Vagrant and several machines, the two clocks, then reference; two commands under
    "Two commands"; every word the README leans on is in its glossary."""
    import re

    readme = (ROOT / "README.md").read_text()
    sections = re.findall(r"(?m)^## (.+)$", readme)
    assert sections == [
        "Glossary",
        "Two commands (fresh Debian 12, as root)",
        "Reading `quicbed doctor`",
        "Reading the results",
        "A topology is a Python function",
        "An experiment is a YAML file",
        "Teaching labs",
        "Vagrant and several machines",
        "Real time or virtual time",
        "The microVM",
        "Cleaning up",
        "Tests",
        "Where the rest is",
    ]
    first_screen = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    two, own = first_screen.split("**Then your own network**")
    assert re.findall(r"(?m)^    (\S.*)$", two) == ["./scripts/quickstart.sh", "./scripts/test.sh"]
    # and on the same screen, the way to one's own topology (each command is run by a test)
    assert [line.split()[:3] for line in re.findall(r"(?m)^    (\S.*)$", own)] == [
        ["cp", "topologies/dumbbell.py", "mine.py"],
        ["quicbed", "topo", "show"],
        ["quicbed", "run", "experiments/quickstart.yaml"],
    ]
    glossary = readme.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"(?m)^- \*\*(.+?)\*\*", glossary) == [
        "run",
        "cell",
        "transport",
        "BQUIC",
        "backend",
        "E1-E5",
        "warm-up run",
        "valid run",
        "goodput",
        "ACK ratio",
        "MPDU",
        "MCS",
        "real",
    ]


def readme_own_network_steps() -> list[list[str]]:
    """README's "Then your own network" commands, as a user types them."""
    import re
    import shlex

    readme = (ROOT / "README.md").read_text()
    own = readme.split("**Then your own network**", 1)[1].split("\n\n", 2)[1]
    return [shlex.split(line.split("#")[0]) for line in re.findall(r"(?m)^    (\S.*)$", own)]


@pytest.mark.parametrize(
    "copied, edit, shown, parameter",
    [
        ("topologies/dumbbell.py", ('rate: str = "20mbit"', 'rate: str = "5mbit"'), "rate='5mbit'", "delay=25ms"),
        ("topologies/wifi_ap.py", ("mcs: int = 7", "mcs: int = 3"), "mcs=3", "wired_delay=25ms"),
    ],
)
def test_the_readmes_own_network_steps_work_as_typed(tmp_path, monkeypatch, capsys, copied, edit, shown, parameter):
    """README's three steps with a wired and a WiFi copy: the edit in the copy holds in the run
    (the file's topology.params are for its own script), the -p of step 2 is given again in step
    3, and a WiFi copy's station is the client. Before, the file's params overrode the edit, and
    a copy of wifi_ap.py failed on them and on the client 'client'."""
    copy, show, run = readme_own_network_steps()
    assert copy == ["cp", "topologies/dumbbell.py", "mine.py"] and show[0] == run[0] == "quicbed"
    monkeypatch.chdir(tmp_path)
    source = (ROOT / copied).read_text()
    assert edit[0] in source
    (tmp_path / "mine.py").write_text(source.replace(*edit))  # step 1: the copy, and an edit
    name, value = parameter.split("=")
    typed = {"delay=25ms": parameter}  # the WiFi copy's delay parameter has another name
    assert main([typed.get(word, word) for word in show[1:]]) == 0
    assert f"{name}='{value}' (given)" in capsys.readouterr().out
    assert main([*(typed.get(word, word) for word in run[1:]), "--dry-run"]) == 0
    out = capsys.readouterr().out
    topology = next(line for line in out.splitlines() if line.startswith("topology: mine.py with"))
    assert shown in topology and f"{name}='{value}'" in topology, topology
    assert "are for topologies/dumbbell.py, not applied to mine.py" in out
    assert ("note: client: sta1 (the topology has no node 'client'" in out) == ("wifi" in copied)


def test_transports_say_what_sets_them_apart():
    """quic and quic-native share a profile: the CPU ceiling of their implementations decides
    between them, so it is in the text; bquic-native's text names what it does not do of its
    profile rather than only describing the profile."""
    from quicbed.cli.transports import rows

    about = {row["name"]: row["about"] for row in rows()}
    assert about["quic"] != about["quic-native"]
    assert "CPU-bound at about 64-78 Mbit/s" in about["quic"] and "2.5 Gbit/s" in about["quic-native"]
    assert "Unlike the profile: ack_decimation_after=0 (the profile's 100)" in about["bquic-native"]
