"""Kernel features for real: on this host if its kernel has them, else in the microVM (tests/vm_plugin.py)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
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
    shown = subprocess.run(
        ["tc", "-n", a, "qdisc", "show", "dev", "veth-a"], capture_output=True, text=True, check=True
    ).stdout
    assert "netem" in shown and "delay 20" in shown
    result = subprocess.run(
        ["ip", "netns", "exec", a, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)", result.stdout)
    assert rtt, result.stdout
    minimum = float(rtt.group(1))
    assert minimum >= 40.0, f"min RTT {minimum} ms with 2 x 20 ms netem delay:\n{result.stdout}"


@contextlib.contextmanager
def _hwsim_radios(count: int) -> Iterator[list[str]]:
    """mac80211_hwsim loaded with count radios, their phy names; as it was afterwards (the
    microVM loads it with radios=0, as Mininet-WiFi does)."""
    loaded_before = Path("/sys/module/mac80211_hwsim").exists()
    subprocess.run(["modprobe", "-r", "mac80211_hwsim"], capture_output=True, check=False)
    _run("modprobe", "mac80211_hwsim", f"radios={count}")
    try:
        phys = (
            sorted(
                p.name
                for p in Path("/sys/class/ieee80211").iterdir()
                if (p / "device" / "driver").resolve().name == "mac80211_hwsim"
            )
            if Path("/sys/class/ieee80211").is_dir()
            else []
        )
        yield phys
    finally:
        subprocess.run(["modprobe", "-r", "mac80211_hwsim"], capture_output=True, check=False)
        if loaded_before:
            subprocess.run(["modprobe", "mac80211_hwsim", "radios=0"], capture_output=True, check=False)


@pytest.mark.needs_kernel("mac80211_hwsim")
def test_mac80211_hwsim_creates_radios():
    """mac80211_hwsim loads and registers simulated 802.11 radios (phys)."""
    with _hwsim_radios(2) as phys:
        assert len(phys) == 2, f"mac80211_hwsim radios=2 registered {len(phys)} radio(s)"


def _wait_for(log: Path, text: str, seconds: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        assert process.poll() is None, (
            f"{process.args[0]} ended ({process.returncode}) before {text}:\n{log.read_text()}"
        )
        assert time.monotonic() < deadline, f"no {text} in {seconds:g} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


@pytest.mark.needs_kernel("mac80211_hwsim")
def test_hwsim_stations_associate_as_he_with_an_802_11ax_ap(tmp_path: Path) -> None:
    """(Its name keeps out the AP daemon's: Mininet-WiFi's stop kills every process whose
    command line has it, the in-VM pytest naming this test too.)
    What the mininet-wifi backend's 802.11ax modes rely on (docs/mininet-wifi.md):
    mac80211_hwsim advertises HE, so a station of a hostapd AP with ieee80211ax=1 (5 GHz,
    channel 36, as mode ax5) associates as HE, hostapd's [HE] flag, and traffic flows."""
    missing = [tool for tool in ("hostapd", "hostapd_cli", "wpa_supplicant", "iw") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install hostapd wpasupplicant iw wireless-regdb)")
    namespace, control = f"qbhe{os.getpid()}", tmp_path / "hostapd-control"
    with _hwsim_radios(2) as phys, contextlib.ExitStack() as stack:
        assert len(phys) == 2, phys
        ap_phy, station_phy = phys
        ap_device = next((Path("/sys/class/ieee80211") / ap_phy / "device" / "net").iterdir()).name
        _run("iw", "reg", "set", "US")  # 5 GHz channels are no-IR in the world domain
        _run("ip", "netns", "add", namespace)
        stack.callback(subprocess.run, ["ip", "netns", "del", namespace], capture_output=True, check=False)
        _run("iw", "phy", station_phy, "set", "netns", "name", namespace)
        station_device = subprocess.run(  # (ip netns exec mounts the namespace's own /sys)
            ["ip", "netns", "exec", namespace, "ls", f"/sys/class/ieee80211/{station_phy}/device/net"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[0]
        (tmp_path / "hostapd.conf").write_text(
            f"interface={ap_device}\ndriver=nl80211\nctrl_interface={control}\nssid=quicbed-he\ncountry_code=US\n"
            "hw_mode=a\nchannel=36\nwmm_enabled=1\nieee80211n=1\nieee80211ac=1\nieee80211ax=1\n"
        )
        (tmp_path / "station.conf").write_text('network={\n ssid="quicbed-he"\n key_mgmt=NONE\n}\n')
        logs = {name: tmp_path / f"{name}.log" for name in ("hostapd", "station")}
        processes = {
            "hostapd": ["hostapd", str(tmp_path / "hostapd.conf")],
            "station": [
                "ip",
                "netns",
                "exec",
                namespace,
                "wpa_supplicant",
                "-D",
                "nl80211",
                "-i",
                station_device,
                "-c",
                str(tmp_path / "station.conf"),
            ],
        }
        started = {}
        for name, argv in processes.items():
            started[name] = subprocess.Popen(argv, stdout=logs[name].open("w"), stderr=subprocess.STDOUT)
            stack.callback(started[name].wait, 10)
            stack.callback(started[name].terminate)
            _wait_for(logs[name], "AP-ENABLED" if name == "hostapd" else "CTRL-EVENT-CONNECTED", 120, started[name])
        _run("ip", "addr", "add", "10.78.0.1/24", "dev", ap_device)
        _run("ip", "-n", namespace, "addr", "add", "10.78.0.2/24", "dev", station_device)
        ping = subprocess.run(
            ["ip", "netns", "exec", namespace, "ping", "-c", "3", "-W", "5", "10.78.0.1"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr
        stations = subprocess.run(
            ["hostapd_cli", "-p", str(control), "-i", ap_device, "all_sta"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        flags = re.search(r"^flags=(.*)$", stations, re.MULTILINE)
        assert flags and "[HE]" in flags.group(1) and "[ASSOC]" in flags.group(1), stations


@pytest.mark.needs_root
def test_vm_exec_returns_the_command_exit_code():
    """'quicbed vm exec -- CMD' boots the microVM, runs CMD there and exits with CMD's status."""
    usable, reason = vm.vm_available(allow_fetch=False)
    if not usable:
        pytest.skip(f"microVM not available: {reason}")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "quicbed",
            "vm",
            "exec",
            "--timeout",
            "600",
            "--",
            "python3",
            "-c",
            "import os, sys; print('in vm', os.environ.get('QUICBED_IN_VM')); sys.exit(3)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=700,
        check=False,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "in vm 1" in result.stdout
