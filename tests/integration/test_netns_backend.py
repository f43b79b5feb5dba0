"""The netns backend on this host: connectivity, settings, process ownership and cleanup.

Needs root (namespaces); uses rate limits only, which the host kernel has without netem.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quicbed.backends.namespaces import clean
from quicbed.backends.netns import NamespaceNetwork
from quicbed.host import ownership
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
#: durations no other process on the machine uses, so pgrep finds only this session's sleeps
SLEEPS = [f"{300 + n}.{os.getpid()}" for n in range(3)]
pytestmark = pytest.mark.needs_root


def quicbed_cli(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "quicbed", *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def host_state() -> dict[str, object]:
    """What a run could leave behind on the host."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {
        "namespaces": sorted(ownership.quicbed_namespaces()),
        "links": sorted(line.split(":")[1].strip() for line in links.splitlines()),
        "qdiscs": subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=True).stdout,
        "records": sorted(p.name for p in ownership.STATE_DIR.glob("*.json")) if ownership.STATE_DIR.exists() else [],
        "allowed_cc": Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text(),
    }


def wait_for_line(process: subprocess.Popen, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen += line
        if text in line:
            return seen
        if process.poll() is not None:
            break
    raise AssertionError(f"{text!r} not printed; output so far: {seen} {process.stderr.read()}")


def test_chain_routes_connect_every_pair_and_settings_are_applied(tmp_path):
    topo = load_topology(str(ROOT / "topologies" / "chain.py"), {"hops": 2, "delay": "0ms"})
    before = host_state()
    with NamespaceNetwork(topo) as network:
        client, server = network.node("client"), network.node("server")
        result = client.run(["ping", "-c", "2", "-i", "0.2", "-W", "2", server.address])
        assert "2 received" in result.stdout
        result = server.run(["ping", "-c", "1", "-W", "2", network.node("r1").address])
        assert "1 received" in result.stdout
        offloads = client.run(["ethtool", "-k", "eth0"]).stdout
        assert "tcp-segmentation-offload: off" in offloads
        assert "generic-receive-offload: off" in offloads
        client.sysctl("net.ipv4.tcp_congestion_control", "cubic")
        assert client.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).stdout.strip() == "cubic"
        assert "tbf" in network.node("r2").qdisc_show()
        assert client.run(["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip() == "1"
        process = server.start(["sh", "-c", "echo hello; echo oops >&2; sleep 60"], name="talker", log_dir=tmp_path)
        time.sleep(0.3)
        assert process.running
    assert not process.running
    assert (tmp_path / "talker.out").read_text() == "hello\n"
    assert (tmp_path / "talker.err").read_text() == "oops\n"
    assert host_state() == before


def test_rate_limit_is_enforced_by_tbf():
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"delay": "0ms", "rate": "8mbit"})
    with NamespaceNetwork(topo) as network:
        server = network.node("server")
        server.start(["iperf3", "-s", "-1"], name="iperf3-server")
        time.sleep(0.5)
        result = network.node("client").run(["iperf3", "-c", server.address, "-t", "2", "-R", "-J"], timeout=30)
    import json

    received = json.loads(result.stdout)["end"]["sum_received"]["bits_per_second"]
    assert 6.5e6 < received < 8.2e6


def test_ctrl_c_tears_everything_down():
    before = host_state()
    process = quicbed_cli(
        "topo", "up", "topologies/chain.py", "-p", "hops=2", "-p", "delay=0ms", "--exec", f"server:sleep {SLEEPS[0]}"
    )
    wait_for_line(process, "press Ctrl-C")
    assert len(ownership.quicbed_namespaces()) == len(before["namespaces"]) + 4
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 130  # the conventional status after Ctrl-C
    assert host_state() == before
    assert subprocess.run(["pgrep", "-f", f"sleep {SLEEPS[0]}"], capture_output=True).returncode == 1


@pytest.mark.parametrize("moment", ["while up", "while building"])
def test_clean_after_sigkill_removes_exactly_what_the_run_left(moment):
    before = host_state()
    # A network of another, live quicbed and a foreign namespace must both survive the clean.
    survivor = quicbed_cli("topo", "up", "topologies/dumbbell.py", "-p", "delay=0ms")
    wait_for_line(survivor, "press Ctrl-C")
    subprocess.run(["ip", "netns", "add", "qbforeign"], check=True)
    try:
        survivor_namespaces = set(ownership.quicbed_namespaces())
        victim = quicbed_cli(
            "topo",
            "up",
            "topologies/chain.py",
            "-p",
            "hops=6",
            "-p",
            "delay=0ms",
            "-p",
            "rate=30mbit",
            "--exec",
            f"server:sleep {SLEEPS[1]} & sleep {SLEEPS[2]} & wait",
        )
        if moment == "while up":
            wait_for_line(victim, "press Ctrl-C")
            time.sleep(0.5)
            # the backgrounded sleeps escape the process tree: only namespace ownership finds them
            assert subprocess.run(["pgrep", "-f", f"sleep {SLEEPS[1]}"], capture_output=True).returncode == 0
        else:
            deadline = time.monotonic() + 20
            while len(set(ownership.quicbed_namespaces()) - survivor_namespaces) < 3:
                assert time.monotonic() < deadline, "the victim never started building"
                time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        left = set(ownership.quicbed_namespaces()) - survivor_namespaces
        assert left, "SIGKILL should leave namespaces for clean to remove"
        cleaner = quicbed_cli("clean")
        out, err = cleaner.communicate(timeout=60)
        assert cleaner.returncode == 0, err
        assert all(f"namespace {ns}" in out for ns in left)
        assert set(ownership.quicbed_namespaces()) == survivor_namespaces
        for sleep in SLEEPS[1:]:
            assert subprocess.run(["pgrep", "-f", f"sleep {sleep}"], capture_output=True).returncode == 1
        assert "qbforeign" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", "qbforeign"], check=False)
        survivor.send_signal(signal.SIGINT)
        survivor.wait(30)
    assert host_state() == before


def test_first_packets_are_not_held_by_bridge_ports_coming_up():
    # Bridge ports forward only once linkwatch has reported the veth carrier (up to ~1 s);
    # start() waits for that, so the first ping of a run is not held for a second.
    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"delay": "0ms"})
    with NamespaceNetwork(topo) as network:
        result = network.node("client").run(["ping", "-c", "1", "-W", "2", network.node("server").address])
    rtt_ms = float(result.stdout.split("time=")[1].split()[0])
    assert rtt_ms < 500


def test_ctrl_c_during_construction_leaves_nothing():
    # SIGINT arrives while namespaces are being created: it is held until the network is
    # complete, then delivered, and the network is torn down before the interrupt propagates.
    import threading

    before = host_state()
    topo = load_topology(str(ROOT / "topologies" / "chain.py"), {"hops": 4, "delay": "0ms"})
    network = NamespaceNetwork(topo)
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        with network:
            time.sleep(5)  # not reached if the interrupt came during construction
    timer.join()
    assert host_state() == before


def test_clean_runs_the_undo_commands_of_a_dead_network():
    """A backend that creates things outside namespaces (bridges, radios) records how to undo them."""
    device = f"qbundo{os.getpid() % 10000}"
    subprocess.run(["ip", "link", "add", device, "type", "bridge"], check=True)
    record = ownership.Ownership(
        ownership.new_run_id(), owner_pid=2**22 + 1, owner_start="1", undo_commands=[["ip", "link", "del", device]]
    )
    try:
        record.save()
        assert not record.owner_alive()
        removed = clean()
        assert f"with: ip link del {device}" in removed
        assert not Path(f"/sys/class/net/{device}").exists()
        assert not record.path.exists()
    finally:
        subprocess.run(["ip", "link", "del", device], capture_output=True, check=False)
        record.remove()
