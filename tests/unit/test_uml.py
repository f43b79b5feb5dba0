"""The virtual-time kernel without booting it: the build recipe (fragment, patch, digest), the
guest's PID 1 and command line, the clock a process reads, and what --clock virtual refuses."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from quicbed.cli import main
from quicbed.host import capabilities, clock
from quicbed.host.uml import boot, build
from quicbed.spec.experiment import load_experiment

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_fragment_parses_and_names_what_virtual_time_needs():
    settings = build.fragment_settings(build.CONFIG_FRAGMENT.read_text())
    for symbol in (
        "CONFIG_UML_TIME_TRAVEL_SUPPORT",
        "CONFIG_HOSTFS",
        "CONFIG_NET_SCH_NETEM",
        "CONFIG_MAC80211_HWSIM",
        "CONFIG_OPENVSWITCH",
        "CONFIG_TUN",
        "CONFIG_VETH",
        "CONFIG_NET_NS",
        "CONFIG_IKCONFIG_PROC",
    ):
        assert settings[symbol] == "y", symbol


def test_a_fragment_line_that_is_not_a_setting_is_an_error_naming_it():
    with pytest.raises(build.UmlBuildError, match=r"line 2 is not CONFIG_NAME=value: 'NET_NS=y'"):
        build.fragment_settings("# comment\nNET_NS=y\n")


def test_settings_the_resolved_config_dropped_are_named():
    config = build.config_values("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_HZ=100\n")
    assert config == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_HZ": "100"}
    unmet = build.unmet_settings({"CONFIG_A": "y", "CONFIG_B": "y", "CONFIG_C": "y", "CONFIG_HZ": "100"}, config)
    assert unmet == ["CONFIG_B=y (got n)", "CONFIG_C=y (got nothing: unknown or its dependencies are off)"]


def test_the_digest_names_the_recipe():
    base = build.recipe_digest("CONFIG_A=y\n", ("patch",), "6.12.1")
    assert len(base) == 8
    assert build.recipe_digest("CONFIG_A=y\n", ("patch",), "6.12.1") == base
    assert build.recipe_digest("CONFIG_A=n\n", ("patch",), "6.12.1") != base
    assert build.recipe_digest("CONFIG_A=y\n", ("patch 2",), "6.12.1") != base
    assert build.recipe_digest("CONFIG_A=y\n", ("patch",), "6.12.2") != base


def test_the_patch_is_a_unified_diff_of_the_two_files_it_fixes():
    text = build.PATCHES[0].read_text()
    touched = [line.split()[1] for line in text.splitlines() if line.startswith("+++ ")]
    assert touched == ["b/arch/x86/um/os-Linux/registers.c", "b/arch/x86/um/user-offsets.c"]
    assert "DEFINE_LONGS(HOST_FP_SIZE, 12288)" in text and "host_fp_size = iov.iov_len" in text


@pytest.mark.skipif(
    not build.SOURCE_TARBALL.is_file(),
    reason=f"{build.SOURCE_TARBALL} is not installed (apt-get install {build.SOURCE_PACKAGE})",
)
def test_the_patch_applies_to_the_source_package(tmp_path):
    members = ["arch/x86/um/os-Linux/registers.c", "arch/x86/um/user-offsets.c"]
    subprocess.run(
        [
            "tar",
            "-C",
            str(tmp_path),
            "-xf",
            str(build.SOURCE_TARBALL),
            *(f"{build.SOURCE_PACKAGE}/{member}" for member in members),
        ],
        check=True,
    )
    applied = subprocess.run(
        ["patch", "-p1", "--forward", "--batch", "--dry-run", "-i", str(build.PATCHES[0])],
        cwd=tmp_path / build.SOURCE_PACKAGE,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr


def test_a_kernel_is_found_only_when_complete(tmp_path):
    assert build.cached_uml_kernel(tmp_path) is None
    root = tmp_path / "6.12.1-quicbed-00000000"
    root.mkdir()
    (tmp_path / build.CURRENT_LINK).symlink_to(root.name)
    assert build.cached_uml_kernel(tmp_path) is None  # no binary yet
    (root / "linux").write_text("")
    (root / "linux").chmod(0o755)
    (root / build.BUILD_INFO).write_text(
        '{"release": "6.12.1-quicbed", "source_package": "linux-source-6.12", "source_version": "6.12.1-1"}'
    )
    kernel = build.cached_uml_kernel(tmp_path)
    assert kernel is not None and kernel.release == "6.12.1-quicbed"
    assert kernel.describe() == "User-Mode Linux 6.12.1-quicbed (from linux-source-6.12 6.12.1-1)"


def test_without_root_a_missing_build_tool_is_an_error_with_the_command(monkeypatch):
    monkeypatch.setattr(build, "missing_build_tools", lambda: ["bison", "linux-source-6.12"])
    monkeypatch.setattr(build.os, "geteuid", lambda: 1000)
    with pytest.raises(
        build.MissingDependency,
        match=r"needs bison, linux-source-6.12 \(fix: apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "
        r"bison linux-source-6.12, as root\)",
    ):
        build.install_build_tools(None)


def test_pid_1_mounts_the_kernel_s_own_file_systems_runs_the_job_and_powers_off():
    script = boot.render_init_script("/var/lib/quicbed/vm/job", ["/tmp/checkout"], python="/venv/bin/python")
    lines = script.splitlines()
    for mount in (
        "mount -t proc proc /proc",
        "mount -t sysfs sysfs /sys",
        "mount -t devtmpfs devtmpfs /dev",
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup",
        "[ -d /tmp ] && mount -t tmpfs -o mode=1777 tmpfs /tmp",
        "[ -d /run ] && mount -t tmpfs -o mode=0755 tmpfs /run",
        "mkdir -p /tmp/checkout && mount -t hostfs -o /tmp/checkout hostfs /tmp/checkout",
    ):
        assert mount in lines
    # the host folder is mounted again only after the tmpfs that hides it
    assert lines.index("[ -d /tmp ] && mount -t tmpfs -o mode=1777 tmpfs /tmp") < lines.index(
        "mkdir -p /tmp/checkout && mount -t hostfs -o /tmp/checkout hostfs /tmp/checkout"
    )
    assert "/bin/sh /var/lib/quicbed/vm/job/job.sh" in lines
    assert lines[-1].startswith("exec /venv/bin/python -I -S -c") and "reboot(0x4321fedc)" in lines[-1]


def test_the_command_line_boots_hostfs_and_asks_for_time_travel_only_in_virtual_time(tmp_path):
    kernel = build.UmlKernel(tmp_path)
    argv = boot.boot_command(kernel, tmp_path / "init.sh", tmp_path, "abc123", memory="2G", time_travel=True)
    assert argv[0] == str(tmp_path / "linux")
    for option in (
        "mem=2G",
        "rootfstype=hostfs",
        "rootflags=/",
        f"init={tmp_path / 'init.sh'}",
        "umid=quicbed-abc123",
        f"uml_dir={tmp_path}",
        "time-travel=inf-cpu",
    ):
        assert option in argv
    real = boot.boot_command(kernel, tmp_path / "init.sh", tmp_path, "abc123", memory="2G", time_travel=False)
    assert not any(option.startswith("time-travel") for option in real)


def test_modprobe_of_a_built_in_module_succeeds_in_the_guest_and_of_others_fails(tmp_path):
    """Mininet-WiFi runs 'modprobe mac80211_hwsim radios=0' to choose hwsim_mgmt: in the guest
    that must succeed for what is built in, and nothing else may look present."""
    if shutil.which("modprobe") is None or shutil.which("depmod") is None:
        pytest.skip("kmod (modprobe, depmod) is not installed")
    (tmp_path / "config").write_text("CONFIG_MAC80211_HWSIM=y\n# CONFIG_OPENVSWITCH is not set\nCONFIG_IFB=y\n")
    (tmp_path / build.BUILD_INFO).write_text(json.dumps({"release": "6.12.0-quicbed"}))
    folder = boot.write_builtin_modules(build.UmlKernel(tmp_path), tmp_path / "modules")
    assert folder is not None

    def modprobe(*args: str) -> int:
        return subprocess.run(
            ["modprobe", "-d", str(folder), "-S", "6.12.0-quicbed", *args], capture_output=True, check=False
        ).returncode

    assert modprobe("mac80211_hwsim", "radios=0") == 0 and modprobe("ifb", "numifbs=2") == 0
    assert modprobe("openvswitch") != 0 and modprobe("sch_netem") != 0
    script = boot.render_init_script("/job", [], python="/venv/bin/python", modules=folder)
    assert f"export MODPROBE_OPTIONS='-d {folder}'" in script.splitlines()
    # lsmod (Mininet-WiFi's clean-up runs it; run_in_uml puts it first on the PATH) says that
    # nothing is loaded instead of kmod's errors about a /proc/modules the kernel has not
    listed = subprocess.run([str(folder / "bin" / "lsmod")], capture_output=True, text=True, check=True)
    assert listed.stdout.split() == ["Module", "Size", "Used", "by"] and not listed.stderr
    argv = boot.boot_command(
        build.UmlKernel(tmp_path), tmp_path / "init.sh", tmp_path, "abc", memory="2G", time_travel=True
    )
    assert "mac80211_hwsim.radios=0" in argv  # Mininet-WiFi's radios only; a wlan0 of its own takes their name


def test_the_clock_is_read_from_the_kernel_command_line():
    assert clock.current_clock("mem=2G rootfstype=hostfs time-travel=inf-cpu init=/x") == clock.VIRTUAL
    assert clock.current_clock("BOOT_IMAGE=/vmlinuz root=/dev/vda1 quiet") == clock.REAL
    assert clock.current_clock("") == clock.REAL


def test_a_built_in_module_is_found_in_proc_config(tmp_path):
    config = tmp_path / "config.gz"
    config.write_bytes(
        gzip.compress(b"CONFIG_NET_SCH_NETEM=y\n# CONFIG_MAC80211_HWSIM is not set\nCONFIG_OPENVSWITCH=m\n")
    )
    assert capabilities.built_in("sch_netem", config)
    assert not capabilities.built_in("mac80211_hwsim", config)
    assert not capabilities.built_in("openvswitch", config)  # a module is not built in
    assert not capabilities.built_in("sch_netem", tmp_path / "absent.gz")


def test_an_experiment_about_the_client_s_cpu_names_the_field():
    assert load_experiment(REPO / "experiments" / "e2-cpu-stress.yaml").cpu_subject() in (
        "stress.cpu_quota",
        "stress.load",
    )
    assert load_experiment(REPO / "experiments" / "quickstart.yaml").cpu_subject() is None


def test_virtual_time_refuses_an_experiment_about_cpu(capsys):
    status = main(["run", str(REPO / "experiments" / "e2-cpu-stress.yaml"), "--clock", "virtual", "--dry-run"])
    assert status != 0
    error = capsys.readouterr().err
    assert "e2-cpu-stress.yaml: stress." in error and "computing takes no time" in error
    assert "fix: run it with --clock real" in error


def test_a_dry_run_in_virtual_time_says_where_the_runs_happen(capsys):
    status = main(["run", str(REPO / "experiments" / "quickstart.yaml"), "--clock", "virtual", "--dry-run"])
    assert status == 0
    assert "in virtual time (quicbed's User-Mode Linux kernel" in capsys.readouterr().out


def test_uml_exec_without_a_command_says_how_to_give_one(capsys):
    assert main(["uml", "exec"]) != 0
    assert "usage: quicbed uml exec [options] -- CMD" in capsys.readouterr().err


def test_a_virtual_run_moves_into_the_kernel_with_the_backend_chosen_here(monkeypatch, tmp_path):
    """The host chooses the backend (ns3 here, where netem is missing) and the guest keeps it:
    inside, netem is built in and would make netns the default. The results folder is shared
    with the guest wherever it is."""
    from quicbed.host.vm import VmResult

    calls = []

    def fake_run_in_uml(argv, **options):
        calls.append((argv, options))
        return VmResult(0, "", tmp_path / "console.log", tmp_path)

    monkeypatch.setattr(boot, "run_in_uml", fake_run_in_uml)
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: build.UmlKernel(tmp_path))
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(REPO / "experiments" / "quickstart.yaml"),
                "--clock",
                "virtual",
                "--no-report",
                "--out",
                str(out),
                "--repetitions",
                "1",
            ]
        )
        == 0
    )
    ((argv, options),) = calls
    assert argv[1:4] == ["-m", "quicbed", "run"] and "--no-vm" in argv
    assert argv[argv.index("--clock") + 1] == "virtual" and argv[argv.index("--repetitions") + 1] == "1"
    assert argv[argv.index("--backend") + 1] == "ns3"
    assert options["share"] == [out.resolve()]


def test_the_report_says_what_the_clock_means_and_warns_of_mixed_clocks():
    import pandas as pd

    from quicbed.report.tables import clock_headline

    def runs(clocks):
        return pd.DataFrame(
            {
                "warmup": [False] * len(clocks),
                "clock": clocks,
                "kernel": ["6.12.117-quicbed" if c == "virtual" else "6.18" for c in clocks],
            }
        )

    assert clock_headline(runs(["real", "real"])) is None
    virtual = clock_headline(runs(["virtual", "virtual"]))
    assert virtual is not None and virtual.startswith(
        "Virtual time: every run ran in quicbed's User-Mode Linux kernel (6.12.117-quicbed)"
    )
    assert "No run can be CPU-bound" in virtual
    mixed = clock_headline(runs(["virtual", "real", "real"]))
    assert mixed is not None and mixed.startswith("Mixed clocks: 1 run(s) in virtual time, 2 in real time")


def test_an_experiment_s_runs_draw_their_own_repeatable_random_streams():
    from quicbed.backends import seeded_options
    from quicbed.runner.engine import random_stream

    first = random_stream(1, "c000-r001")
    assert first == random_stream(1, "c000-r001", 1) and 1 <= first < 2**31
    others = {
        random_stream(1, "c000-r002"),
        random_stream(1, "c001-r001"),
        random_stream(1, "c000-r001", 2),
        random_stream(2, "c000-r001"),
    }
    assert first not in others and len(others) == 4  # repetitions, cells, attempts and seeds differ
    assert seeded_options("ns3", {"skim_receivers": True}, first) == {"skim_receivers": True, "run": first}
    assert seeded_options("ns3", {"run": 7}, first) == {"run": 7}  # the experiment's own stream wins
    assert seeded_options("netns", {}, first) == {}  # no random numbers of its own


def test_guest_memory_sizes_and_the_map_count_they_need(tmp_path):
    assert boot.memory_bytes("4G") == 4 * 2**30 and boot.memory_bytes("512m") == 512 * 2**20
    for bad in ("", "0G", "2T", "lots"):
        with pytest.raises(boot.VmError, match="is not a size such as 2G"):
            boot.memory_bytes(bad)
    limit = tmp_path / "max_map_count"
    limit.write_text("65530\n")
    assert boot.ensure_map_count("4G", limit) == (
        "raised vm.max_map_count from 65530 to 1048576 (a guest of 4G may map each page apart)"
    )
    assert limit.read_text() == "1048576\n"
    assert boot.ensure_map_count("2G", limit) is None and limit.read_text() == "1048576\n"  # never lowered


def test_a_guest_command_killed_for_host_memory_is_explained(tmp_path):
    from quicbed.host.vm import VmResult

    log = tmp_path / "console.log"
    log.write_text(
        "UML ran out of memory on the host side! This can happen due to a memory limitation or "
        "vm.max_map_count has been reached.\nquicbed-vm: command exited with code 139\n"
    )
    assert "could not map memory on the host" in boot.why_the_command_died(VmResult(139, "", log, tmp_path))
    log.write_text("reboot: Power down\n")
    assert boot.why_the_command_died(VmResult(137, "", log, tmp_path)) == "no explanation in the console"


@pytest.mark.parametrize("experiment, kernel", [("e1-wifi-bquic", "virtual-time"), ("e2-cpu-stress", "microVM")])
def test_mininet_wifi_without_hwsim_goes_to_the_virtual_time_kernel_unless_the_cpu_is_the_subject(
    monkeypatch, tmp_path, capsys, experiment, kernel
):
    monkeypatch.setattr(capabilities, "has_hwsim", lambda: False)
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: build.UmlKernel(tmp_path))
    assert (
        main(["run", str(REPO / "experiments" / f"{experiment}.yaml"), "--backend", "mininet-wifi", "--dry-run"]) == 0
    )
    out = capsys.readouterr().out
    if kernel == "virtual-time":
        assert "note: this kernel has no mac80211_hwsim: the runs go to quicbed's virtual-time kernel" in out
        assert "backend: mininet-wifi, in virtual time" in out
    else:  # in virtual time the stress would cost nothing
        assert (
            "virtual" not in out
            and "backend: mininet-wifi, in the microVM because this kernel has no mac80211_hwsim" in out
        )


def test_a_file_whose_defaults_need_virtual_time_says_so_and_runs_there(monkeypatch, tmp_path, capsys):
    """e5-clients' 10-40 stations are beyond real time here: the file asks for virtual time,
    --clock real takes it back (and is warned), and without the kernel the error names the field."""
    e5 = str(REPO / "experiments" / "e5-clients.yaml")
    assert load_experiment(REPO / "experiments" / "e5-clients.yaml").clock == "virtual"
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: build.UmlKernel(tmp_path))
    assert main(["run", e5, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "backend: ns3, in virtual time" in out and "warning:" not in out
    assert main(["run", e5, "--dry-run", "--clock", "real"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("warning: ")
        and "cells of 10, 20, 30, 40 stations are beyond what the ns-3 channel keeps in real time" in out
        and "fix: --clock virtual" in out
    )
    assert "backend: ns3, on this host" in out
    monkeypatch.setattr(build, "cached_uml_kernel", lambda directory=None: None)
    assert main(["run", e5, "--out", str(tmp_path / "out")]) != 0
    error = capsys.readouterr().err
    assert f"{e5}: clock: virtual needs quicbed's User-Mode Linux kernel, which is not built" in error
    assert "'quicbed uml setup'" in error and not (tmp_path / "out").exists()


def test_a_clock_field_that_is_neither_clock_is_refused(tmp_path):
    from quicbed.errors import SpecError

    path = tmp_path / "bad.yaml"
    path.write_text((REPO / "experiments" / "quickstart.yaml").read_text() + "clock: virtaul\n")
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    assert "clock" in str(caught.value) and "did you mean 'virtual'?" in str(caught.value)


def test_every_shipped_file_keeps_real_time_or_asks_for_virtual_time():
    """The dry run's capacity warning, held against every shipped file's defaults: none may
    plan cells beyond real time on the real clock (they would all be invalid)."""
    from quicbed.runner.capacity import beyond_real_time

    for path in sorted((REPO / "experiments").glob("*.yaml")):
        experiment = load_experiment(path)
        if experiment.clock == "real":
            assert beyond_real_time(experiment, experiment.backend, {}) is None, path.name
