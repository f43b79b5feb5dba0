"""Kernel features for real: on this host if its kernel has them, else in the microVM (tests/vm_plugin.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quicbed.host import vm

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)


@pytest.fixture
def namespace_pair():
    """Two namespaces joined by a veth pair: 10.77.0.1 (a) <-> 10.77.0.2 (b)."""
    a, b = f"qbtest{os.getpid()}a", f"qbtest{os.getpid()}b"
    try:
        _run("ip", "netns", "add", a)
        _run("ip", "netns", "add", b)
        _run("ip", "link", "add", "veth-a", "netns", a, "type", "veth", "peer", "name", "veth-b", "netns", b)
        for ns, dev, address in ((a, "veth-a", "10.77.0.1/24"), (b, "veth-b", "10.77.0.2/24")):
            _run("ip", "-n", ns, "addr", "add", address, "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@pytest.mark.needs_kernel("netem")
def test_netem_delay_on_veth(namespace_pair):
    """20 ms of netem delay on each end of a veth pair gives a round trip of at least 40 ms."""
    if shutil.which("ping") is None:
        pytest.skip("ping is not installed (apt-get install iputils-ping)")
    a, b = namespace_pair
    _run("tc", "-n", a, "qdisc", "add", "dev", "veth-a", "root", "netem", "delay", "20ms")
    _run("tc", "-n", b, "qdisc", "add", "dev", "veth-b", "root", "netem", "delay", "20ms")
    shown = subprocess.run(["tc", "-n", a, "qdisc", "show", "dev", "veth-a"], capture_output=True, text=True,
                           check=True).stdout
    assert "netem" in shown and "delay 20" in shown
    result = subprocess.run(["ip", "netns", "exec", a, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.2"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", result.stdout)
    assert rtt, result.stdout
    minimum = float(rtt.group(1))
    assert minimum >= 40.0, f"min RTT {minimum} ms with 2 x 20 ms netem delay:\n{result.stdout}"


@pytest.mark.needs_kernel("mac80211_hwsim")
def test_mac80211_hwsim_creates_radios():
    """mac80211_hwsim loads and registers simulated 802.11 radios (phys).

    The microVM loads it with radios=0 (as Mininet-WiFi does): load it here with two radios,
    then put it back as it was."""
    loaded_before = Path("/sys/module/mac80211_hwsim").exists()
    subprocess.run(["modprobe", "-r", "mac80211_hwsim"], capture_output=True, check=False)
    _run("modprobe", "mac80211_hwsim", "radios=2")
    try:
        phys = [p for p in Path("/sys/class/ieee80211").iterdir()
                if (p / "device" / "driver").resolve().name == "mac80211_hwsim"] \
            if Path("/sys/class/ieee80211").is_dir() else []
        assert len(phys) == 2, f"mac80211_hwsim radios=2 registered {len(phys)} radio(s)"
    finally:
        subprocess.run(["modprobe", "-r", "mac80211_hwsim"], capture_output=True, check=False)
        if loaded_before:
            subprocess.run(["modprobe", "mac80211_hwsim", "radios=0"], capture_output=True, check=False)


@pytest.mark.needs_root
def test_vm_exec_returns_the_command_exit_code():
    """'quicbed vm exec -- CMD' boots the microVM, runs CMD there and exits with CMD's status."""
    usable, reason = vm.vm_available(allow_fetch=False)
    if not usable:
        pytest.skip(f"microVM not available: {reason}")
    result = subprocess.run(
        [sys.executable, "-m", "quicbed", "vm", "exec", "--timeout", "600", "--",
         "python3", "-c", "import os, sys; print('in vm', os.environ.get('QUICBED_IN_VM')); sys.exit(3)"],
        cwd=ROOT, capture_output=True, text=True, timeout=700, check=False)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "in vm 1" in result.stdout
