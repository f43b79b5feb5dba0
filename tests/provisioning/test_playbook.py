"""CI check of the provisioning code (site.yml, roles/, Vagrantfile).

WARNING: THESE TESTS PROVISION THE MACHINE THEY RUN ON. As root they run site.yml against
localhost, which installs distribution packages (qemu, ns-3, nginx, Open vSwitch, hostapd,
...), raises sysctls (socket buffers, allowed TCP congestion controls), loads kernel
modules where it can, writes /etc/sysctl.d, /etc/modules-load.d and /etc/quicbed, creates
the virtualenv /opt/quicbed/venv (or $QUICBED_TEST_VENV) with quicbed installed editable
from this checkout, and links /usr/local/bin/quicbed to it. Run them on CI or a disposable
machine, not on a workstation you care about. Deselect them with -m "not provisioning" or
QUICBED_SKIP_PROVISIONING=1.

What they check:
  * ansible-lint (production profile, offline) reports no violation;
  * ansible-playbook --syntax-check passes for site.yml, mininet-wifi.yml and run-experiment.yml;
  * the playbook converges on this machine with quicbed_online=false and a second run
    changes nothing (PLAY RECAP changed=0 failed=0);
  * `quicbed doctor --json` from the provisioned virtualenv finds what the roles installed;
  * every role's Python requirements (offline too: they come from PyPI) pass `pip check`, and
    `quicbed doctor` and `quicbed report` (on a fixture results folder) run from that virtualenv;
  * `vagrant validate` accepts the Vagrantfile.

They skip (with the reason) when not root or when ansible-core, ansible-lint or vagrant is
not installed. The durations of the two playbook runs are printed (pytest -s) and written
to the file named by $QUICBED_PROVISIONING_TIMINGS, if set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("QUICBED_TEST_VENV", "/opt/quicbed/venv"))
# Capabilities `quicbed doctor` must report once the roles ran (offline mode included).
PROVISIONED = ("tcpdump", "iperf3", "nginx", "aioquic", "quinn", "ns3", "qemu")
# What ansible-lint sees: the Ansible content only, copied so that its cache directory
# (.ansible/, created in the project it lints) does not land in the checkout.
ANSIBLE_CONTENT = (
    "site.yml",
    "mininet-wifi.yml",
    "run-experiment.yml",
    "ansible.cfg",
    ".ansible-lint",
    "roles",
    "group_vars",
    "inventory",
)
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)

pytestmark = [
    pytest.mark.provisioning,
    pytest.mark.skipif(bool(os.environ.get("QUICBED_SKIP_PROVISIONING")), reason="QUICBED_SKIP_PROVISIONING is set"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="provisioning tests run the playbook against this machine and need root"
    ),
]


def _require(tool: str, package: str) -> str:
    path = shutil.which(tool, path=_env()["PATH"])
    if path is None:
        pytest.skip(f"{tool} is not installed (install {package})")
    return path


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # ansible-core and ansible-lint may be installed into the (not activated) virtualenv
    # whose Python runs pytest: look there first.
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for directory in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if directory not in path.split(os.pathsep):
            path += os.pathsep + directory
    env.update(
        PATH=path,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def _run(argv: list[str], *, timeout: float, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=timeout, check=False)


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _recap(output: str) -> dict[str, int]:
    matches = list(RECAP.finditer(output))
    assert matches, f"no PLAY RECAP in the playbook output:\n{_tail(output)}"
    totals = {key: 0 for key in ("ok", "changed", "unreachable", "failed")}
    for match in matches:
        for key in totals:
            totals[key] += int(match.group(key))
    return totals


def test_ansible_lint_is_clean(tmp_path: Path) -> None:
    lint = _require("ansible-lint", "pip ansible-lint")
    _require("ansible-playbook", "pip ansible-core")
    for name in ANSIBLE_CONTENT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name)
        else:
            shutil.copy2(source, tmp_path / name)
    result = _run(
        [lint, "--nocolor", "--offline"], cwd=tmp_path, timeout=600, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg")
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"ansible-lint found violations:\n{_tail(output, 120)}"
    assert "Profile 'production' was required, and it passed" in output, _tail(output)


@pytest.mark.parametrize(
    "playbook_file, extra",
    [
        ("site.yml", []),
        ("mininet-wifi.yml", []),
        ("run-experiment.yml", ["-e", "experiment=experiments/quickstart.yaml"]),
    ],
)
def test_syntax_check(playbook_file: str, extra: list[str]) -> None:
    playbook = _require("ansible-playbook", "pip ansible-core")
    result = _run([playbook, "-i", "inventory/local.ini", "--syntax-check", playbook_file, *extra], timeout=300)
    assert result.returncode == 0, _tail(result.stdout + result.stderr)


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Run site.yml twice against this machine; return both outputs and durations."""
    playbook = _require("ansible-playbook", "pip ansible-core")
    logs = tmp_path_factory.mktemp("playbook")
    argv = [
        playbook,
        "-i",
        "inventory/local.ini",
        "-c",
        "local",
        "-e",
        "quicbed_online=false",
        "-e",
        f"quicbed_src={REPO}",
        "-e",
        f"quicbed_venv={VENV}",
        "site.yml",
    ]
    runs = []
    for number, timeout in ((1, 3600), (2, 1200)):
        started = time.monotonic()
        result = _run(argv, timeout=timeout)
        seconds = time.monotonic() - started
        output = result.stdout + result.stderr
        (logs / f"run{number}.log").write_text(output)
        runs.append({"rc": result.returncode, "output": output, "seconds": seconds})
        print(f"\nplaybook run {number}: {seconds:.1f} s, exit {result.returncode}, log {logs}/run{number}.log")
        if result.returncode != 0:
            break
    timings = os.environ.get("QUICBED_PROVISIONING_TIMINGS")
    if timings:
        Path(timings).write_text(
            json.dumps({f"run{i + 1}_seconds": round(r["seconds"], 1) for i, r in enumerate(runs)}, indent=1) + "\n"
        )
    return {"runs": runs, "logs": logs}


def test_playbook_converges(provisioned: dict[str, object]) -> None:
    first = provisioned["runs"][0]
    assert first["rc"] == 0, f"first run failed:\n{_tail(first['output'], 120)}"
    recap = _recap(first["output"])
    assert recap["failed"] == 0 and recap["unreachable"] == 0, recap
    # Offline mode says what it skipped instead of reaching GitHub.
    assert "quicbed_online is false: skipped the git clones" in first["output"]
    assert "quicbed_online is false: skipped the git clone and build of wmediumd" in first["output"]


def test_second_run_changes_nothing(provisioned: dict[str, object]) -> None:
    runs = provisioned["runs"]
    assert len(runs) == 2, f"first run failed:\n{_tail(runs[0]['output'], 120)}"
    second = runs[1]
    assert second["rc"] == 0, f"second run failed:\n{_tail(second['output'], 120)}"
    recap = _recap(second["output"])
    changed_tasks = [
        block.split("]", 1)[0]
        for block in second["output"].split("\nTASK [")[1:]
        if re.search(r"^changed:", block, re.MULTILINE)
    ]
    assert recap["changed"] == 0, f"second run not idempotent ({recap}); tasks: {changed_tasks}"
    assert recap["failed"] == 0, recap


def test_quicbed_command_is_on_path(provisioned: dict[str, object]) -> None:
    link = Path("/usr/local/bin/quicbed")
    assert link.is_symlink(), f"{link} is not a symlink"
    assert link.resolve() == (VENV / "bin" / "quicbed").resolve()


def test_doctor_finds_the_provisioned_pieces(provisioned: dict[str, object]) -> None:
    assert provisioned["runs"][0]["rc"] == 0, "the playbook failed; see test_playbook_converges"
    quicbed = VENV / "bin" / "quicbed"
    assert quicbed.exists(), f"{quicbed} was not installed"
    result = _run([str(quicbed), "doctor", "--json"], timeout=300)
    assert result.returncode == 0, _tail(result.stdout + result.stderr)
    report = json.loads(result.stdout)
    missing = {
        name: report.get(name)
        for name in PROVISIONED
        if not (isinstance(report.get(name), dict) and report[name].get("available") is True)
    }
    assert not missing, f"quicbed doctor does not find what the roles installed: {missing}"


def test_virtualenv_requirements_fit_together(provisioned: dict[str, object]) -> None:
    """Every role's Python requirements (Mininet-WiFi's too, installed offline from PyPI) and
    quicbed's resolve to one consistent set."""
    assert provisioned["runs"][0]["rc"] == 0, "the playbook failed; see test_playbook_converges"
    result = _run([str(VENV / "bin" / "python"), "-m", "pip", "check"], timeout=300)
    assert result.returncode == 0, f"pip check in {VENV}:\n{result.stdout}{result.stderr}"
    for module in ("FlightRadar24", "skyfield", "bitstring", "numpy", "pandas"):
        imported = _run([str(VENV / "bin" / "python"), "-c", f"import {module}"], timeout=120)
        assert imported.returncode == 0, f"{module} does not import in {VENV}: {imported.stderr[-2000:]}"


def test_doctor_and_report_run_from_the_provisioned_virtualenv(provisioned: dict[str, object], tmp_path: Path) -> None:
    """The commands a user runs after `vagrant up`: doctor prints without an error line, and report
    builds tables and figures from a results folder (pandas, numpy, matplotlib as provisioned)."""
    from report_fixtures import make_matrix_folder

    assert provisioned["runs"][0]["rc"] == 0, "the playbook failed; see test_playbook_converges"
    quicbed = str(VENV / "bin" / "quicbed")
    doctor = _run([quicbed, "doctor"], timeout=300)
    assert doctor.returncode == 0, _tail(doctor.stdout + doctor.stderr)
    assert "Traceback" not in doctor.stdout + doctor.stderr
    folder = make_matrix_folder(tmp_path / "results")
    report = _run([quicbed, "report", str(folder)], timeout=600)
    assert report.returncode == 0, _tail(report.stdout + report.stderr)
    assert (folder / "summary.csv").stat().st_size > 0 and (folder / "index.html").exists()
    assert list((folder / "report").glob("*.png")), "the report drew no figure"


def test_host_settings(provisioned: dict[str, object]) -> None:
    """Sysctls are raised unless the kernel refused them; the system nginx is not left running."""
    assert provisioned["runs"][0]["rc"] == 0, "the playbook failed; see test_playbook_converges"
    report = json.loads(Path("/etc/quicbed/provision-common.json").read_text())
    for key in ("net.core.rmem_max", "net.core.wmem_max"):
        value = int(Path("/proc/sys", *key.split(".")).read_text())
        assert value >= 8388608 or key in report["sysctls_refused"], (key, value, report)
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    assert (
        set(report["tcp_congestion_controls_allowed"]) <= set(allowed)
        or "net.ipv4.tcp_allowed_congestion_control" in report["sysctls_refused"]
    ), (allowed, report)
    pid_file = Path("/run/nginx.pid")
    if pid_file.exists() and pid_file.read_text().strip():
        assert not Path("/proc", pid_file.read_text().strip()).exists(), (
            "the distribution's nginx service is running (nginx_service_enabled is false)"
        )


def test_vagrant_validate(tmp_path: Path) -> None:
    vagrant = _require("vagrant", "apt vagrant (and vagrant-libvirt to validate the libvirt block)")
    env = {
        "VAGRANT_CWD": str(REPO),
        "VAGRANT_DOTFILE_PATH": str(tmp_path / ".vagrant"),
        "VAGRANT_CHECKPOINT_DISABLE": "1",
    }
    plugins = _run([vagrant, "plugin", "list"], timeout=120, **env)
    # Without a usable provider (no VirtualBox, no vagrant-libvirt) Vagrant cannot pick one to
    # validate against; then validate everything except the provider blocks.
    argv = [vagrant, "validate"]
    if "vagrant-libvirt" not in plugins.stdout and shutil.which("VBoxManage") is None:
        argv.append("--ignore-provider")
    for settings in (
        {},
        {
            "QUICBED_BOX": "generic/ubuntu2404",
            "QUICBED_CPUS": "2",
            "QUICBED_MEMORY": "2048",
            "QUICBED_ONLINE": "false",
            "QUICBED_NESTED": "false",
            "QUICBED_SYNC_TYPE": "rsync",
        },
    ):
        result = _run(argv, timeout=300, **env, **settings)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and "validated successfully" in output, (settings, output)
