"""The parts of quicbed.host.cpu_accounting that need no root: the /proc and mountinfo parsers
it relies on (quicbed.host.procfs), backend choice, name checks and the fallback to /proc.
Deterministic, nothing left on the host."""

from __future__ import annotations

import pytest

from quicbed.host import cpu_accounting
from quicbed.host.cpu_accounting import CpuAccounting
from quicbed.host.procfs import Hierarchy, parse_mountinfo, parse_pid_stat

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
46 45 0:28 / /var/tmp/chroot/sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
48 46 0:30 / /var/tmp/chroot/sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
"""
PURE_V2 = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""
COMOUNTED = """\
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/cpu\\040set rw,nosuid shared:11 - cgroup cgroup rw,cpuset
32 25 0:28 / /sys/fs/cgroup/unified rw,nosuid shared:12 - cgroup2 cgroup2 rw,nsdelegate
"""


def test_mountinfo_hybrid_v1_first_mount_wins():
    found = parse_mountinfo(HYBRID)
    assert found["cpuacct"].mount == "/sys/fs/cgroup/cpuacct" and found["cpuacct"].version == 1
    assert found["cpuset"].mount == "/sys/fs/cgroup/cpuset"
    assert "cpu" not in found["cpuacct"].controllers
    assert found["v2"] == Hierarchy(2, "/sys/fs/cgroup/unified")


def test_mountinfo_pure_v2_and_comounted_v1():
    found = parse_mountinfo(PURE_V2)
    assert set(found) == {"v2"} and found["v2"].mount == "/sys/fs/cgroup"
    comounted = parse_mountinfo(COMOUNTED)
    assert comounted["cpuacct"] == comounted["cpu"] and "cpu" in comounted["cpuacct"].controllers
    assert comounted["cpuset"].mount == "/sys/fs/cgroup/cpu set"  # octal escapes decoded


def test_backend_choice(monkeypatch):
    monkeypatch.delenv(cpu_accounting.ENV_BACKEND, raising=False)
    assert CpuAccounting("r1", mountinfo=HYBRID).backend == "cgroup-v1"
    assert CpuAccounting("r1", mountinfo=PURE_V2).backend == "cgroup-v2"
    # cpuacct co-mounted with cpu would put the channel into cpu cgroups: v2 instead
    assert CpuAccounting("r1", mountinfo=COMOUNTED).backend == "cgroup-v2"
    assert CpuAccounting("r1", mountinfo="").backend == "proc"
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, "proc")
    assert CpuAccounting("r1", mountinfo=HYBRID).backend == "proc"
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, "cgroup-v2")
    acct = CpuAccounting("r1", mountinfo=HYBRID)
    assert acct.backend == "cgroup-v2" and acct._candidates[-1][0] == "proc"
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, "bogus")
    with pytest.raises(ValueError, match="QUICBED_CPU_ACCOUNTING"):
        CpuAccounting("r1", mountinfo=HYBRID)


def test_names_checked_and_nothing_before_start(monkeypatch):
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, "proc")
    with pytest.raises(ValueError):
        CpuAccounting("../etc")
    with pytest.raises(ValueError):
        CpuAccounting("r1", roles=("a/b",))
    acct = CpuAccounting("r1", roles=("server",), mountinfo=HYBRID)
    with pytest.raises(RuntimeError, match="start"):
        acct.preexec("server")
    report = acct.stop()  # never started: an empty report, not an error
    assert report.window_s == 0 and report.warnings


def test_unusable_cgroup_falls_back_to_proc(monkeypatch, tmp_path):
    """A hierarchy that cannot be written (here: a mount point that does not exist) is
    reported in the warnings and the proc backend is used; nothing is left behind."""
    monkeypatch.setattr(cpu_accounting, "STATE_DIR", tmp_path / "state")
    monkeypatch.setenv(cpu_accounting.ENV_BACKEND, "cgroup-v1")
    missing = tmp_path / "no-such-mount"
    mountinfo = f"33 31 0:30 / {missing} rw,relatime - cgroup cgroup rw,cpuacct\n"
    acct = CpuAccounting("r1", roles=("server",), interval=0.01, mountinfo=mountinfo).start()
    try:
        assert acct.backend == "proc" and "cgroup-v1 accounting unusable" in acct.warnings[0]
        assert (tmp_path / "state" / "quicbed-r1.owner").exists()
    finally:
        report = acct.stop()
    assert report.backend == "proc" and set(report.roles) == {"server"}
    assert not missing.exists() and list((tmp_path / "state").iterdir()) == []


def test_pid_stat_with_awkward_command_name():
    text = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 1 0 0 0 31 7 0 0 20 0 3 0 123456 1 2 3\n"
    assert parse_pid_stat(text) == (17, 123456, 38)
