"""scripts/install.sh and the Ansible roles install the same packages and make the same host settings.

install.sh reads the roles' defaults (roles/*/defaults/main.yml) with a small shell reader;
`install.sh --plan` prints what it read. These tests compare that with what YAML itself reads
from the same files, so a list that one path changes and the other does not, or a file the
shell reader misreads, fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install.sh"


def defaults(role: str) -> dict[str, object]:
    return yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())


def plan(*options: str) -> dict[str, list[str]]:
    out = subprocess.run(
        ["bash", str(INSTALL), "--plan", *options], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        kind, _, value = line.partition(" ")
        found.setdefault(kind, []).append(value)
    return found


def pairs(mapping: object) -> list[str]:
    assert isinstance(mapping, dict)
    return [f"{key}: {value}" for key, value in mapping.items()]


def role_packages(*, tests: bool) -> list[str]:
    common = defaults("common")
    lists = [
        common["common_packages"],
        defaults("ns3")["ns3_packages"],
        defaults("nginx")["nginx_packages"],
        common["common_microvm_packages"],
        defaults("uml_kernel")["uml_kernel_packages"],
    ]
    if tests:
        lists.append(common["common_test_packages"])
    return [package for listed in lists for package in listed]  # type: ignore[union-attr]


@pytest.mark.parametrize("tests", [False, True], ids=["main job", "--test"])
def test_install_sh_installs_the_roles_packages(tests: bool) -> None:
    planned = plan(*(["--test"] if tests else []))["package"]
    assert planned == role_packages(tests=tests)


def test_optional_parts_leave_their_packages_out() -> None:
    planned = set(plan("--no-vm", "--no-uml")["package"])
    common = defaults("common")
    assert not planned & set(common["common_microvm_packages"])  # type: ignore[arg-type]
    assert "linux-source-6.12" not in planned
    assert set(common["common_packages"]) <= planned  # type: ignore[arg-type]


def test_install_sh_makes_the_roles_host_settings() -> None:
    common = defaults("common")
    planned = plan()
    assert planned["sysctl"] == pairs(common["common_sysctls"])
    assert planned["congestion-control"] == common["common_tcp_congestion_controls"]
    assert planned["module"] == common["common_kernel_modules"]
    assert planned["module-param"] == pairs(common["common_kernel_module_params"])
    assert planned["module-at-boot"] == common["common_modules_load_at_boot"]
    assert planned["nm-unmanaged"] == common["common_nm_unmanaged_devices"]
    assert planned["file"][:2] == [common["common_sysctl_file"], common["common_nm_conf_file"]]


def test_the_common_role_installs_every_list() -> None:
    """The role's apt task names each shared list, so a new list cannot stay install.sh's alone."""
    task = (REPO / "roles" / "common" / "tasks" / "packages.yml").read_text()
    for name in ("common_packages", "common_microvm_packages", "common_test_packages", "common_extra_packages"):
        assert name in task
    assert "nginx_packages" in (REPO / "roles" / "nginx" / "tasks" / "main.yml").read_text()


# Packages install.sh may name itself, each with the reason the roles need no list of it.
OWN_PACKAGES = {
    "virtiofsd": "the microVM's faster file sharing, optional; Debian 12 has no such package",
    "libseccomp-dev": "building virtiofsd from crates.io where no package exists",
    "libcap-ng-dev": "building virtiofsd from crates.io",
    "pkg-config": "building virtiofsd from crates.io",
    "patch": "native/quinn/prepare.sh; the quic role installs it beside Rust",
}


def test_install_sh_names_no_other_package_itself() -> None:
    literal = set()
    for call in re.findall(r"apt_install ([^|&;\n]*)", INSTALL.read_text()):
        literal |= {word for word in call.split() if not word.startswith(("$", '"$', "-", "||", "{", "\\"))}
    assert literal <= set(OWN_PACKAGES), literal - set(OWN_PACKAGES)


@pytest.mark.skipif(os.geteuid() != 0, reason="install.sh --host-settings writes sysctls and /etc: needs root")
def test_host_settings_write_what_the_role_writes(tmp_path: Path) -> None:
    """Run install.sh --host-settings with /etc/sysctl.d and /etc/modules-load.d on scratch folders
    (a private mount namespace), and read back what it wrote."""
    common = defaults("common")
    sysctl_dir = Path(str(common["common_sysctl_file"])).parent
    script = f"""set -e
mkdir -p {sysctl_dir} /etc/modules-load.d
mount --bind {tmp_path / "sysctl"} {sysctl_dir}
mount --bind {tmp_path / "modules"} /etc/modules-load.d
bash {INSTALL} --host-settings
"""
    (tmp_path / "sysctl").mkdir()
    (tmp_path / "modules").mkdir()
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    written = {}
    for line in (tmp_path / "sysctl" / Path(str(common["common_sysctl_file"])).name).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(" = ")
            written[key] = value
    wanted = dict(common["common_sysctls"])  # type: ignore[call-overload]
    assert set(written) == set(wanted) | {"net.ipv4.tcp_allowed_congestion_control"}
    for key, minimum in wanted.items():
        live = Path("/proc/sys", *key.split(".")).read_text().strip()
        assert int(written[key]) >= minimum and written[key] == live, (key, written[key], live)
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    assert sorted(written["net.ipv4.tcp_allowed_congestion_control"].split()) == sorted(allowed)
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    for name in common["common_tcp_congestion_controls"]:  # type: ignore[union-attr]
        assert name in allowed or name not in available, name
    at_boot = [
        line
        for line in (tmp_path / "modules" / "quicbed.conf").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert at_boot == common["common_modules_load_at_boot"]


@pytest.mark.parametrize(
    "release, refused", [('ID=ubuntu\nVERSION_ID="22.04"\n', True), ('ID=debian\nVERSION_ID="12"\n', False)]
)
def test_install_sh_refuses_a_distribution_that_cannot_run_quicbed(tmp_path, release, refused) -> None:
    """Ubuntu 22.04 (ns-3 3.35, Python 3.10, cargo 1.75) is refused before apt is touched;
    Debian 12 goes on past the check (and stops at apt here: a PATH whose apt-get fails)."""
    if os.geteuid() != 0:
        pytest.skip("install.sh runs only as root")
    os_release = tmp_path / "os-release"
    os_release.write_text(release)
    bin_dir = tmp_path / "bin"  # dpkg-query and apt-get fail at once: nothing can be installed
    bin_dir.mkdir()
    for tool in ("dpkg-query", "apt-get"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    result = subprocess.run(
        ["bash", str(INSTALL)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QUICBED_OS_RELEASE": str(os_release), "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    assert result.returncode != 0
    if refused:
        assert "install.sh: ubuntu 22.04 is not supported: its ns-3 (3.35)" in result.stderr
        assert "Use Debian 12" in result.stderr and "installing distribution packages" not in result.stdout
    else:
        assert "not supported" not in result.stderr and "installing distribution packages" in result.stdout
