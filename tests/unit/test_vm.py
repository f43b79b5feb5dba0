"""The microVM runner without a VM: kernel package resolution, job scripts, exit codes, the runner
driven by a fake ``vng``, and the pytest plugin's junit mapping."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from quicbed.host import kernel, ownership, vm, vm_job

DEBIAN_DEPENDS = """\
linux-image-amd64
  Depends: linux-image-6.1.0-56-amd64
"""

UBUNTU_GENERIC_DEPENDS = """\
linux-image-generic
  Depends: linux-image-6.8.0-45-generic
  Depends: linux-modules-extra-6.8.0-45-generic
  Depends: linux-firmware
  Depends: intel-microcode
  Depends: amd64-microcode
  Recommends: thermald
"""

UBUNTU_ALTERNATIVES_DEPENDS = """\
linux-image-virtual
 |Depends: linux-image-unsigned-6.8.0-45-generic
  Depends: <linux-image-6.8.0-45-generic>
  Depends: linux-firmware
"""


# --- kernel package names ---------------------------------------------------------------


def test_parse_apt_depends_lists_dependencies_only():
    assert kernel.parse_apt_depends(UBUNTU_GENERIC_DEPENDS) == [
        "linux-image-6.8.0-45-generic",
        "linux-modules-extra-6.8.0-45-generic",
        "linux-firmware",
        "intel-microcode",
        "amd64-microcode",
    ]
    assert kernel.parse_apt_depends(UBUNTU_ALTERNATIVES_DEPENDS)[:2] == [
        "linux-image-unsigned-6.8.0-45-generic",
        "linux-image-6.8.0-45-generic",
    ]


def test_debian_kernel_package():
    version, packages = kernel.resolve_kernel_packages(DEBIAN_DEPENDS, "debian")
    assert version == "6.1.0-56-amd64"
    assert packages == ["linux-image-6.1.0-56-amd64"]


def test_ubuntu_kernel_packages_include_modules_and_extra():
    version, packages = kernel.resolve_kernel_packages(UBUNTU_GENERIC_DEPENDS, "ubuntu")
    assert version == "6.8.0-45-generic"
    assert packages == [
        "linux-image-6.8.0-45-generic",
        "linux-modules-6.8.0-45-generic",
        "linux-modules-extra-6.8.0-45-generic",
    ]


def test_ubuntu_unsigned_alternative_and_virtual_packages_are_skipped():
    version, packages = kernel.resolve_kernel_packages(UBUNTU_ALTERNATIVES_DEPENDS, "ubuntu")
    assert version == "6.8.0-45-generic"
    assert packages[0] == "linux-image-6.8.0-45-generic"


def test_no_kernel_package_is_a_clear_error():
    with pytest.raises(kernel.KernelError, match="no linux-image-<version>"):
        kernel.resolve_kernel_packages("linux-image-amd64\n  Depends: linux-firmware\n", "debian")


@pytest.mark.parametrize(
    "release, family",
    [
        ({"ID": "debian"}, "debian"),
        ({"ID": "ubuntu", "ID_LIKE": "debian"}, "ubuntu"),
        ({"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}, "ubuntu"),
        ({"ID": "raspbian", "ID_LIKE": "debian"}, "debian"),
        ({"ID": "fedora"}, ""),
    ],
)
def test_distribution_family(release, family):
    assert kernel.distribution_family(release) == family


def test_meta_packages():
    assert kernel.meta_packages("debian", "amd64") == ["linux-image-amd64"]
    assert kernel.meta_packages("ubuntu")[0] == "linux-image-generic"
    assert kernel.meta_packages("") == []


def test_read_os_release(tmp_path):
    path = tmp_path / "os-release"
    path.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n# comment\nVERSION_ID="12"\n')
    assert kernel.read_os_release(path) == {
        "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)",
        "ID": "debian",
        "VERSION_ID": "12",
    }


# --- kernel cache -------------------------------------------------------------------------


def _fake_kernel(cache: Path, version: str, modules: str = "kernel/net/sched/sch_netem.ko:\n") -> Path:
    root = cache / version
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"vmlinuz-{version}").write_bytes(b"kernel")
    (root / "lib" / "modules" / version).mkdir(parents=True)
    (root / "lib" / "modules" / version / "modules.dep").write_text(modules)
    return root


def test_cache_lookup_prefers_current_then_newest(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBED_KERNEL_DIR", str(tmp_path))
    assert kernel.cached_kernel() is None
    _fake_kernel(tmp_path, "6.1.0-9-amd64")
    _fake_kernel(tmp_path, "6.1.0-10-amd64")
    (tmp_path / ".unpack-abc").mkdir()  # an interrupted fetch is ignored
    assert kernel.cached_kernel().version == "6.1.0-10-amd64"
    (tmp_path / "current").symlink_to("6.1.0-9-amd64")
    image = kernel.cached_kernel()
    assert image.version == "6.1.0-9-amd64"
    assert image.vmlinuz == tmp_path / "6.1.0-9-amd64" / "boot" / "vmlinuz-6.1.0-9-amd64"


def test_cached_kernel_needs_both_image_and_modules(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBED_KERNEL_DIR", str(tmp_path))
    (tmp_path / "6.1.0-1-amd64" / "boot").mkdir(parents=True)
    (tmp_path / "6.1.0-1-amd64" / "boot" / "vmlinuz-6.1.0-1-amd64").write_bytes(b"")
    assert kernel.cached_kernel() is None


def test_ensure_kernel_with_a_cached_kernel_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICBED_KERNEL_DIR", str(tmp_path))
    _fake_kernel(tmp_path, "6.1.0-9-amd64")
    monkeypatch.setattr(kernel, "latest_available", lambda *a: pytest.fail("must not ask apt"))
    messages = []
    assert kernel.ensure_kernel(messages.append).version == "6.1.0-9-amd64"
    assert messages == []


def test_has_module(tmp_path):
    root = _fake_kernel(
        tmp_path,
        "6.1.0-9-amd64",
        "kernel/net/sched/sch_netem.ko:\n"
        "kernel/drivers/net/wireless/virtual/mac80211_hwsim.ko.xz: kernel/net/mac80211/mac80211.ko\n",
    )
    image = kernel.kernel_in(root)
    assert image.has_module("sch_netem") and image.has_module("mac80211_hwsim")
    assert not image.has_module("openvswitch")


def test_unwritable_cache_says_how_to_fix(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("QUICBED_KERNEL_DIR", str(blocker / "kernel"))
    monkeypatch.setattr(kernel, "latest_available", lambda *a: ("x", ["y"]))
    with pytest.raises(kernel.KernelError, match="QUICBED_KERNEL_DIR"):
        kernel.ensure_kernel(None)


# --- job script -----------------------------------------------------------------------------


def test_module_specs():
    assert vm_job.parse_module_spec("netem") == ("sch_netem", [])
    assert vm_job.parse_module_spec("mac80211_hwsim radios=0") == ("mac80211_hwsim", ["radios=0"])
    assert vm.module_list(["hwsim", "sch_netem", "mac80211_hwsim radios=3"]) == ["sch_netem", "mac80211_hwsim"]
    assert vm.module_list(["openvswitch"], base=False) == ["openvswitch"]
    for bad in ("", "x; rm -rf /", "mac80211_hwsim radios=$(reboot)"):
        with pytest.raises(vm.VmError):
            vm_job.parse_module_spec(bad)


def test_guest_environment():
    host = {
        "PATH": "/root/.pyenv/shims:/usr/local/bin:relative",
        "PYTHONPATH": "/opt/lib",
        "QUICBED_RESULTS": "/data",
        "HOME": "/home/x",
        "SECRET": "no",
    }
    env = vm.guest_environment({"EXTRA": "1"}, host_env=host, python="/opt/py/bin/python3")
    path = env["PATH"].split(":")
    assert path[0] == "/opt/py/bin"
    assert "/root/.pyenv/shims" not in path and "relative" not in path and "/usr/sbin" in path
    assert env["PYTHONPATH"].endswith("/opt/lib")
    assert env["QUICBED_IN_VM"] == "1" and env["QUICBED_RESULTS"] == "/data" and env["EXTRA"] == "1"
    assert "SECRET" not in env
    with pytest.raises(vm.VmError):
        vm.guest_environment({"BAD NAME": "x"}, host_env=host)
    # runs made in the guest name the machine that booted it, not the guest
    import platform

    assert env["QUICBED_MACHINE"] == platform.node()
    nested = vm.guest_environment(host_env={**host, "QUICBED_MACHINE": "outer"})
    assert nested["QUICBED_MACHINE"] == "outer"


def test_runs_name_the_machine_not_the_guest(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    from quicbed.runner.metadata import host_info, machine_name

    monkeypatch.delenv("QUICBED_MACHINE", raising=False)
    assert machine_name() == platform.node()
    monkeypatch.setenv("QUICBED_MACHINE", "bench-host-3")
    assert machine_name() == "bench-host-3" and host_info()["hostname"] == "bench-host-3"


def test_job_script_content():
    script = vm.render_job_script(
        "/var/lib/quicbed/vm/job 1",
        ["python3", "-c", "print('a b')"],
        "/work/my dir",
        {"PATH": "/usr/bin:/bin", "X": "it's"},
        ["sch_netem", "mac80211_hwsim radios=2"],
    )
    assert script.startswith("#!/bin/sh\n")
    assert "JOB='/var/lib/quicbed/vm/job 1'" in script
    assert "export X='it'\"'\"'s'" in script
    assert "ulimit -n 65536" in script
    assert "modprobe sch_netem" in script and "modprobe mac80211_hwsim radios=2" in script
    assert "cd '/work/my dir'" in script
    assert "'print('\"'\"'a b'\"'\"')'" in script
    assert 'mv -f "$JOB/exit-code.tmp" "$JOB/exit-code"' in script
    with pytest.raises(vm.VmError):
        vm.render_job_script("/j", [], "/", {})


def _run_script(tmp_path: Path, argv: list[str], modules=(), fake_modprobe_fails: str = "") -> int:
    """Render a job script and run it with /bin/sh here (no VM), modprobe faked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    modprobe = bin_dir / "modprobe"
    modprobe.write_text(
        f"#!/bin/sh\n[ \"$1\" = '{fake_modprobe_fails}' ] && {{ echo no such module >&2; exit 1; }}\n"
        f"echo \"loaded $*\" >> '{tmp_path}/loaded'\n"
    )
    modprobe.chmod(0o755)
    (tmp_path / "reaper.py").write_text(vm.REAPER)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GREETING": "hello there"}
    script = vm.render_job_script(tmp_path, argv, tmp_path, env, modules)
    (tmp_path / "job.sh").write_text(script)
    subprocess.run(["/bin/sh", str(tmp_path / "job.sh")], check=True, capture_output=True, timeout=60)
    return vm.read_exit_code(tmp_path)


def test_job_script_runs_the_command_and_records_its_exit_code(tmp_path):
    code = _run_script(
        tmp_path,
        [sys.executable, "-c", "import os, sys; print(os.environ['GREETING'], os.getcwd()); sys.exit(3)"],
        modules=["sch_netem", "mac80211_hwsim radios=2"],
    )
    assert code == 3
    assert (tmp_path / "output").read_text().strip() == f"hello there {tmp_path}"
    assert (tmp_path / "loaded").read_text() == "loaded sch_netem\nloaded mac80211_hwsim radios=2\n"


def test_job_script_missing_command_is_127(tmp_path):
    assert _run_script(tmp_path, ["no-such-command-quicbed"]) == 127
    assert "cannot run no-such-command-quicbed" in (tmp_path / "output").read_text()


def test_job_script_stops_when_a_module_cannot_be_loaded(tmp_path):
    code = _run_script(
        tmp_path,
        ["touch", str(tmp_path / "ran")],
        modules=["sch_netem", "mac80211_hwsim"],
        fake_modprobe_fails="mac80211_hwsim",
    )
    assert code == vm_job.EXIT_MODULE_FAILED
    assert (tmp_path / "module-failed").read_text().strip() == "mac80211_hwsim"
    assert not (tmp_path / "ran").exists()


def test_job_script_reports_death_by_signal(tmp_path):
    assert (
        _run_script(tmp_path, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
        == 128 + 9
    )


@pytest.mark.parametrize("content, expected", [("0\n", 0), ("3", 3), ("137\n", 137), ("", None), ("x", None)])
def test_read_exit_code(tmp_path, content, expected):
    (tmp_path / "exit-code").write_text(content)
    assert vm.read_exit_code(tmp_path) == expected


def test_read_exit_code_without_file(tmp_path):
    assert vm.read_exit_code(tmp_path) is None


def test_vng_command():
    image = kernel.KernelImage("6.1.0-9-amd64", Path("/k/boot/vmlinuz-6.1.0-9-amd64"), Path("/k"))
    argv = vm.vng_command("vng", image, Path("/j/job.sh"), memory="2G", cpus=2, kvm=False)
    assert argv[:3] == ["vng", "--run", "/k/boot/vmlinuz-6.1.0-9-amd64"]
    assert "--disable-kvm" in argv and "--verbose" in argv and "--rw" in argv
    assert argv[argv.index("--exec") + 1] == "/bin/sh /j/job.sh"
    assert "--disable-kvm" not in vm.vng_command("vng", image, Path("/j/job.sh"), memory="2G", cpus=2, kvm=True)


def test_guest_tmpfs_paths():
    assert vm.in_guest_tmpfs("/tmp/x") == "/tmp"
    assert vm.in_guest_tmpfs("/var/cache") == "/var/cache"
    assert vm.in_guest_tmpfs("/var/lib/quicbed/vm") is None
    assert vm.in_guest_tmpfs("/tmpfoo") is None


def test_inside_vm_from_environment(monkeypatch):
    monkeypatch.setenv("QUICBED_IN_VM", "1")
    assert vm.inside_vm()
    with pytest.raises(vm.VmError, match="already inside"):
        vm.run_in_vm(["true"], cwd="/")


def test_kvm_status_override(monkeypatch):
    monkeypatch.setenv("QUICBED_VM_KVM", "0")
    assert vm.kvm_status() == (False, "disabled by QUICBED_VM_KVM")


# --- run_in_vm driven by a fake vng (runs the job script on this host) -----------------------

FAKE_VNG = """\
import os, subprocess, sys, time
argv = sys.argv[1:]
mode = os.environ.get("FAKE_VNG_MODE", "run")
print("[    0.000000] Linux version fake", flush=True)
if mode == "panic":
    print("Kernel panic - not syncing: VFS: Unable to mount root fs", flush=True)
    sys.exit(255)
script = argv[argv.index("--exec") + 1]
subprocess.run(["/bin/sh", "-c", script])
print("virtme-ng-init: script exited", flush=True)
sys.exit(255)
"""


@pytest.fixture
def fake_vm(tmp_path, monkeypatch):
    """run_in_vm with a fake vng; job dirs and ownership records in tmp_path."""
    fake = tmp_path / "vng"
    fake.write_text(f"#!{sys.executable}\n{FAKE_VNG}")
    fake.chmod(0o755)
    monkeypatch.setattr(vm, "find_vng", lambda: str(fake))
    monkeypatch.setattr(vm, "find_qemu", lambda: "/usr/bin/true")
    monkeypatch.setattr(vm, "find_static_busybox", lambda: "/bin/busybox")
    monkeypatch.setattr(vm, "GUEST_TMPFS", ())
    monkeypatch.setenv("QUICBED_VM_DIR", str(tmp_path / "jobs"))
    monkeypatch.delenv("QUICBED_IN_VM", raising=False)
    monkeypatch.setattr(vm, "inside_vm", lambda: False)
    monkeypatch.setattr(ownership, "STATE_DIR", tmp_path / "state")
    image = kernel.KernelImage("6.1.0-9-amd64", tmp_path / "vmlinuz", tmp_path)

    def run(argv, **kwargs):
        kwargs.setdefault("cwd", tmp_path)
        return vm.run_in_vm(argv, image=image, kvm=False, base_modules=False, progress=None, **kwargs)

    return run


def test_run_in_vm_returns_exit_code_and_output(fake_vm, tmp_path):
    stream = io.StringIO()
    check = (
        "import glob, json, os, sys; records = [json.load(open(p)) for p in glob.glob(sys.argv[1] + '/*.json')];"
        "print('pids', sum(len(r['pids']) for r in records), os.environ['QUICBED_IN_VM']); sys.exit(3)"
    )
    result = fake_vm([sys.executable, "-c", check, str(tmp_path / "state")], stream=stream)
    assert result.returncode == 3
    assert result.output.startswith("pids ") and result.output.split()[1] != "0"
    assert stream.getvalue() == result.output
    assert "Linux version fake" in result.log.read_text()
    assert result.log == result.job_dir / "console.log"
    assert list((tmp_path / "state").glob("*.json")) == []  # the ownership record is gone


def test_run_in_vm_without_exit_code_quotes_the_console(fake_vm, monkeypatch):
    monkeypatch.setenv("FAKE_VNG_MODE", "panic")
    with pytest.raises(vm.VmError, match="(?s)without reporting.*Kernel panic"):
        fake_vm(["true"])


def test_run_in_vm_timeout_kills_the_vm(fake_vm, tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    started = time.monotonic()
    with pytest.raises(vm.VmTimeout, match="did not finish within 2 s"):
        fake_vm(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"], timeout=2)
    assert time.monotonic() - started < 20
    pid = int(pid_file.read_text())
    time.sleep(0.2)
    state = Path(f"/proc/{pid}/stat")
    assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert list((tmp_path / "state").glob("*.json")) == []


def test_run_in_vm_rejects_guest_private_cwd(monkeypatch):
    monkeypatch.delenv("QUICBED_IN_VM", raising=False)
    monkeypatch.setattr(vm, "inside_vm", lambda: False)
    with pytest.raises(vm.VmError, match="empty tmpfs inside the microVM"):
        vm.run_in_vm(["true"], cwd="/tmp")


def test_folders_under_guest_tmpfs_are_shared_explicitly(tmp_path):
    assert vm.guest_private_dirs([Path("/tmp/ci/repo"), Path("/tmp/ci/repo/.venv"), Path("/work/x")]) == [
        "/tmp/ci/repo"
    ]
    image = vm.KernelImage("6.1.0-1-amd64", tmp_path / "vmlinuz", tmp_path)
    argv = vm.vng_command(
        "vng", image, Path("/var/lib/quicbed/vm/j/job.sh"), memory="2G", cpus=2, kvm=False, shared=["/tmp/ci/repo"]
    )
    assert "--rwdir=/tmp/ci/repo" in argv


# --- the pytest plugin's junit mapping --------------------------------------------------------


def test_junit_key():
    import vm_plugin

    assert vm_plugin.junit_key("tests/integration/test_vm.py::test_x") == ("tests.integration.test_vm", "test_x")
    assert vm_plugin.junit_key("tests/a.py::TestC::test_y[1-a/b]") == ("tests.a.TestC", "test_y[1-a/b]")


def test_parse_junit_from_a_real_pytest_run(tmp_path):
    import vm_plugin

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_sample.py").write_text(
        textwrap.dedent("""
        import pytest

        def test_pass():
            pass

        def test_fail():
            assert 1 == 2, "numbers differ"

        def test_skip():
            pytest.skip("no hwsim here")

        @pytest.mark.xfail(reason="known bug")
        def test_xfail():
            assert False

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")

        def test_error(broken):
            pass

        class TestGroup:
            @pytest.mark.parametrize("n", [1, "a/b"])
            def test_param(self, n):
                pass
    """)
    )
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-o",
            "junit_family=xunit2",
            f"--junitxml={junit}",
            "-q",
            "sub",
        ],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    base = "sub/test_sample.py::"
    nodeids = [
        base + name
        for name in (
            "test_pass",
            "test_fail",
            "test_skip",
            "test_xfail",
            "test_error",
            "TestGroup::test_param[1]",
            "TestGroup::test_param[a/b]",
        )
    ]
    outcomes = vm_plugin.parse_junit(junit.read_text(), nodeids)
    assert {n: o.outcome for n, o in outcomes.items()} == {
        base + "test_pass": "passed",
        base + "test_fail": "failed",
        base + "test_skip": "skipped",
        base + "test_xfail": "xfailed",
        base + "test_error": "error",
        base + "TestGroup::test_param[1]": "passed",
        base + "TestGroup::test_param[a/b]": "passed",
    }
    assert "numbers differ" in outcomes[base + "test_fail"].text
    assert outcomes[base + "test_skip"].message == "no hwsim here"
    assert "fixture broke" in outcomes[base + "test_error"].text


@pytest.mark.parametrize("required", [False, True])
def test_a_skipped_test_of_a_required_feature_fails(tmp_path, required):
    """The test command requires the Mininet-WiFi tests: a skip of a test needing a required
    feature (on this kernel, or --no-vm) is a failure that keeps the skip's reason."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(Path(vm_plugin_dir()))!r})\npytest_plugins = ['vm_plugin']\n"
    )
    (tmp_path / "test_sample.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.mark.needs_kernel("netem")
        def test_needs_netem():
            pytest.skip("deliberately skipped")

        def test_plain():
            pytest.skip("not a kernel test")
    """)
    )
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        "-rfEs",
        "--no-vm",
        "test_sample.py",
    ] + (["--require-feature", "netem"] if required else [])
    result = subprocess.run(
        argv,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    summary = result.stdout.strip().splitlines()[-1]
    if not required:
        assert "2 skipped" in summary and result.returncode == 0, result.stdout
        return
    # here the skip comes in setup (this kernel lacks netem, --no-vm) or in the call (it has netem):
    # an error or a failure, with the reason
    assert "1 skipped" in summary and ("1 error" in summary or "1 failed" in summary), result.stdout
    assert "which this test run requires (--require-feature), but it was skipped" in result.stdout
    assert result.returncode == 1


def test_a_failed_in_vm_session_whose_tests_passed_still_fails():
    """The in-VM pytest can fail after its tests (leftover temporary folders): junit.xml does not
    say so, its exit status and ERROR lines do."""
    import vm_plugin

    session = vm_plugin.VmSession(config=None)  # type: ignore[arg-type]
    session.outcomes = {"t.py::a": vm_plugin.Outcome("passed"), "t.py::b": vm_plugin.Outcome("skipped")}
    session.returncode, session.session_errors = 1, ["ERROR: the tests left 1 folder(s) in /tmp: quicbed-x"]
    assert "exit code 1" in vm_plugin.unexplained_vm_failure(session)
    assert "quicbed-x" in vm_plugin.unexplained_vm_failure(session)
    session.returncode = 0
    assert vm_plugin.unexplained_vm_failure(session) == ""
    session.returncode = 1  # a failed test explains it (and is reported as such)
    session.outcomes["t.py::c"] = vm_plugin.Outcome("failed")
    assert vm_plugin.unexplained_vm_failure(session) == ""


def vm_plugin_dir() -> Path:
    return Path(__file__).resolve().parents[1]


def test_ownership_record_shape_is_what_clean_expects(tmp_path, monkeypatch):
    """quicbed clean kills record.pids of dead owners; the VM runner relies on that field."""
    monkeypatch.setattr(ownership, "STATE_DIR", tmp_path)
    record = ownership.Ownership.create("abcdef")
    record.pids = [12345]
    record.save()
    assert json.loads((tmp_path / "abcdef.json").read_text())["pids"] == [12345]
    assert ownership.load_all()[0].pids == [12345]


def _elf(program_header_types: list[int]) -> bytes:
    """A minimal 64-bit little-endian ELF header followed by its program header table."""
    phoff, phentsize = 64, 56
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    header[32:40] = phoff.to_bytes(8, "little")
    header[54:56] = phentsize.to_bytes(2, "little")
    header[56:58] = len(program_header_types).to_bytes(2, "little")
    table = b"".join(kind.to_bytes(4, "little") + bytes(phentsize - 4) for kind in program_header_types)
    return bytes(header) + table


def test_static_elf_is_told_from_a_dynamic_one(tmp_path):
    static, dynamic, script = tmp_path / "static", tmp_path / "dynamic", tmp_path / "script"
    static.write_bytes(_elf([1, 1, 4]))  # PT_LOAD, PT_LOAD, PT_NOTE: no interpreter
    dynamic.write_bytes(_elf([6, 3, 1]))  # PT_PHDR, PT_INTERP, PT_LOAD
    script.write_text("#!/bin/sh\n")
    assert vm.is_static_elf(static)
    assert not vm.is_static_elf(dynamic)
    assert not vm.is_static_elf(script)
    assert not vm.is_static_elf(tmp_path / "absent")
    assert not vm.is_static_elf(os.path.realpath(sys.executable))  # a real, dynamically linked program


def test_a_dynamic_busybox_is_not_enough(tmp_path, monkeypatch):
    """virtme-ng refuses a dynamically linked busybox (Debian's 'busybox'): so does the check."""
    monkeypatch.setattr(vm, "BUSYBOX_DIRS", ())
    (tmp_path / "busybox").write_bytes(_elf([3]))
    (tmp_path / "busybox").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert vm.find_static_busybox() is None
    (tmp_path / "busybox-static").write_bytes(_elf([1]))
    (tmp_path / "busybox-static").chmod(0o755)
    assert vm.find_static_busybox() == str(tmp_path / "busybox-static")


def test_vng_finds_its_helpers_through_path(tmp_path, monkeypatch):
    """vng runs virtme-run through PATH: the directory vng lives in (a virtualenv's bin/) comes first."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(vm, "VIRTIOFSD_DIR", tmp_path / "virtiofsd")
    env = vm.vng_environment(str(tmp_path / "venv" / "bin" / "vng"))
    assert env["PATH"].split(":") == [str(tmp_path / "venv" / "bin"), "/usr/bin", "/bin"]
    (tmp_path / "virtiofsd" / "bin").mkdir(parents=True)
    (tmp_path / "virtiofsd" / "bin" / "virtiofsd").touch()
    env = vm.vng_environment("/usr/bin/vng")
    assert env["PATH"].split(":") == ["/usr/bin", str(tmp_path / "virtiofsd" / "bin"), "/bin"]


def test_the_hung_test_watchdog_follows_the_guests_progress_file(tmp_path):
    import vm_plugin

    progress = tmp_path / "progress"
    watchdog = vm_plugin.HungTestWatchdog(progress, limit=0.05)
    assert watchdog() == ""  # the guest has not started yet
    progress.write_text("start t.py::a\nend t.py::a\nstart t.py::b\nend t.p")  # the last line is half written
    assert watchdog() == "" and watchdog.running == "t.py::b"
    time.sleep(0.1)
    assert "the test t.py::b had not finished after 0 s of host time" in watchdog()
    with progress.open("a") as file:
        file.write("y::b\nstart t.py::c\n")
    assert watchdog() == "" and watchdog.running == "t.py::c"  # b ended; c has just started
    assert watchdog.took["t.py::a"] < 0.05 <= watchdog.took["t.py::b"]  # host seconds, as the host saw them
    with progress.open("a") as file:
        file.write("end t.py::c\n")
    assert watchdog() == ""
    time.sleep(0.1)  # the guest's pytest never ends, or the guest never powers off
    assert watchdog() == "the guest's pytest wrote no progress for 0 s of host time after the test t.py::c ended"
    assert watchdog.running == ""
    assert "before its first test began" in vm_plugin.HungTestWatchdog(tmp_path / "none", limit=0)()
    # once the guest's pytest has written its results, the guest only has to end
    results = tmp_path / "junit.xml"
    watchdog.results = results
    assert not watchdog.results_written()
    results.write_text("<testsuites/>")
    assert watchdog.results_written()
    assert "did not end within 0 s of host time after its pytest wrote its results" in watchdog()
