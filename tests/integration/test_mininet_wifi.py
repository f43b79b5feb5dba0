"""The mininet-wifi backend against a real Mininet-WiFi (mac80211_hwsim, hostapd, wpa_supplicant,
802.11s in the kernel, Open vSwitch).

On a host whose kernel lacks mac80211_hwsim or openvswitch these tests run in the shared
microVM boot (tests/vm_plugin.py); there no Open vSwitch runs (its /run is private), so the
backend starts a private one. Without Mininet-WiFi they skip, naming what is missing
(install it with sudo scripts/install.sh --mininet-wifi; docs/mininet-wifi.md).

The VM emulates its CPU (~13x slower): building a network takes minutes, so each topology
is built once per module and the traffic is small.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from quicbed import Topology
from quicbed.apps import objects
from quicbed.apps.capture import CaptureSet
from quicbed.apps.quic import certs
from quicbed.apps.launch import module_argv
from quicbed.backends.mininet_wifi import MininetWifiNetwork, import_problem
from quicbed.backends.mininet_wifi.motion import aps_in_order
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.needs_kernel("mac80211_hwsim", "openvswitch", virtual_time=True)]

GE_LOSS = {"gemodel": {"p": 1, "r": 30, "loss_bad": 100, "loss_good": 0}}
DOWNLOAD_SIZE = 100_000
PORT = 4433
#: the VM is slow: association, mesh peering and stop take minutes there
TIMEOUTS = {"association_timeout_s": 240.0, "mesh_timeout_s": 240.0, "stop_timeout_s": 240.0}


@pytest.fixture(scope="module")
def mininet_wifi() -> None:
    problem = import_problem()
    if problem:
        pytest.skip(problem)


def ap_topology() -> Topology:
    """ap1 (802.11n, 2.4 GHz, HT) with two stations; a server and a GE-lossy host on cables."""
    topo = Topology("mnwifi_ap")
    ap = topo.add_access_point("ap1", standard="802.11n", band="2.4GHz", channel=6, width=20, mcs=7)
    server = topo.add_host("server")
    lossy = topo.add_host("lossy")
    topo.add_link(ap, server, name="wired", rate="20mbit", delay="2ms")
    topo.add_link(ap, lossy, name="ge", loss=GE_LOSS)
    for name in ("sta1", "sta2"):
        topo.add_wireless_link(topo.add_station(name), ap)
    return topo


def chain_topology() -> Topology:
    """Three mesh points on one channel; only neighbours may peer, so a -> c takes two hops."""
    topo = Topology("mnwifi_chain")
    a, b, c = (topo.add_mesh_point(name) for name in ("mpa", "mpb", "mpc"))
    topo.add_wireless_link(a, b, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    topo.add_wireless_link(b, c, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    return topo


#: the network built last; building the next one stops it (one Mininet-WiFi network at a time)
_LIVE: list[MininetWifiNetwork] = []


@contextmanager
def only_network(topology: Topology, **options: Any) -> Iterator[MininetWifiNetwork]:
    for previous in _LIVE:
        previous.stop()
    _LIVE.clear()
    with MininetWifiNetwork(topology, **TIMEOUTS, **options) as network:
        _LIVE.append(network)
        yield network


@pytest.fixture(scope="module")
def ap_network(mininet_wifi: None) -> Iterator[MininetWifiNetwork]:
    with only_network(ap_topology()) as network:
        yield network


@pytest.fixture(scope="module")
def chain_network(mininet_wifi: None) -> Iterator[MininetWifiNetwork]:
    with only_network(chain_topology()) as network:
        yield network


@pytest.fixture(scope="module")
def shipped_mesh_network(mininet_wifi: None) -> Iterator[MininetWifiNetwork]:
    with only_network(load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": "2"})) as network:
        yield network


def wmediumd_topology() -> Topology:
    """An 802.11g cell under wmediumd (interference mode: positions and propagation matter)."""
    topo = Topology("mnwifi_wmediumd")
    ap = topo.add_access_point("ap1", standard="802.11g", band="2.4GHz", channel=1, mcs=None, position=(0, 0, 0))
    topo.add_wireless_link(topo.add_station("sta1", position=(5, 0, 0)), ap)
    topo.add_link(ap, topo.add_host("server"))
    return topo


@pytest.fixture(scope="module")
def wmediumd_network(mininet_wifi: None) -> Iterator[MininetWifiNetwork]:
    if shutil.which("wmediumd") is None:
        pytest.skip("wmediumd is not installed (optional; roles/wmediumd builds it)")
    with only_network(
        wmediumd_topology(),
        wmediumd=True,
        wmediumd_mode="interference",
        propagation_model="logDistance",
        propagation_exp=3.0,
    ) as network:
        yield network


#: topologies/roaming.py as a user would run it here: 802.11a (wmediumd mistakes HT MCS indexes
#: for legacy rates), APs 60 m apart, a walk from 5 to 55 m at 5 m/s after 2 s
ROAMING_PARAMS = {"standard": "802.11a", "ap_spacing": "60", "start": "5", "end": "55", "speed": "5", "pause": "2"}
#: log-distance with exponent 3: from 5 to 55 m, ap1 fades from -44 to -75 dBm and ap2 rises to
#: -44 dBm; both stay above wmediumd's -91 dBm noise floor all the way
ROAMING_MEDIUM = {
    "wmediumd": True,
    "wmediumd_mode": "interference",
    "propagation_model": "logDistance",
    "propagation_exp": 3.0,
}


@pytest.fixture(scope="module")
def roaming_network(mininet_wifi: None) -> Iterator[MininetWifiNetwork]:
    if shutil.which("wmediumd") is None:
        pytest.skip("wmediumd is not installed (roaming on mininet-wifi needs it; roles/wmediumd builds it)")
    topology = load_topology(str(ROOT / "topologies" / "roaming.py"), ROAMING_PARAMS)
    with only_network(topology, **ROAMING_MEDIUM) as network:
        yield network


def ping(network: MininetWifiNetwork, source: str, target: str, count: int = 3) -> str:
    result = network.node(source).run(
        ["ping", "-c", str(count), "-W", "5", network.node(target).address], timeout=120, check=False
    )
    assert result.returncode == 0, f"{source} -> {target}: {result.stdout}{result.stderr}"
    return result.stdout


def test_stations_reach_the_server_and_each_other(ap_network: MininetWifiNetwork) -> None:
    ping(ap_network, "sta1", "server")
    ping(ap_network, "sta2", "sta1")


def test_addresses_and_interface_names_match_resolve(ap_network: MininetWifiNetwork) -> None:
    for iface in ap_network.resolved.interfaces:
        if not iface.address:
            continue
        shown = ap_network.node(iface.node).run(["ip", "-o", "-4", "addr", "show", "dev", iface.name]).stdout
        assert iface.address in shown, f"{iface.node}:{iface.name}: {shown}"


def test_stations_associate_on_the_ap_channel(ap_network: MininetWifiNetwork) -> None:
    link = ap_network.node("sta1").run(["iw", "dev", ap_network.device("sta1", "wlan0"), "link"]).stdout
    assert "Connected to" in link and "quicbed-ap1" in link
    assert "2437" in link  # channel 6


def test_wired_gilbert_elliott_link_is_applied(ap_network: MininetWifiNetwork) -> None:
    # quicbed's own tc commands, as on the netns backend: netem's four GE parameters
    for node in ("lossy",):
        shown = ap_network.node(node).qdisc_show()
        assert "netem" in shown and "loss gemodel p 1% r 30% 1-h 100% 1-k 0%" in shown, shown
    shaped = ap_network.node("server").qdisc_show()
    assert "netem" in shaped and "delay 2ms" in shaped and "tbf" in shaped and "rate 20Mbit" in shaped, shaped


def test_http3_download_from_a_station(ap_network: MininetWifiNetwork, tmp_path: Path) -> None:
    root = tmp_path / "www"
    objects.generate(root, bulk=[DOWNLOAD_SIZE], seed=3)
    server, client = ap_network.node("server"), ap_network.node("sta1")
    cert, key = certs.write(tmp_path / "tls", [server.address, "localhost"])
    process = server.start(
        module_argv(
            "quicbed.apps.quic.server",
            [
                "--root",
                str(root),
                "--cert",
                str(cert),
                "--key",
                str(key),
                "--port",
                str(PORT),
                "--profile",
                "quic",
                "--ready-file",
                str(tmp_path / "ready.json"),
            ],
        ),
        name="quic-server",
        log_dir=tmp_path,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready.json").exists():
        assert process.running and time.monotonic() < deadline, f"server not ready: {process.errors()}"
        time.sleep(0.2)
    captures = CaptureSet(tmp_path)
    captures.add(client, "wlan0")  # the resolved name, as on every backend
    captures.start()
    try:
        client.run(
            module_argv(
                "quicbed.apps.quic.client",
                [
                    "--host",
                    server.address,
                    "--port",
                    str(PORT),
                    "--ca-cert",
                    str(cert),
                    "--profile",
                    "quic",
                    "--path",
                    f"/bulk/{objects.bulk_name(DOWNLOAD_SIZE)}.bin",
                    "--timeout",
                    "120",
                    "--output",
                    str(tmp_path / "client.json"),
                ],
            ),
            timeout=180,
            check=False,
        )
    finally:
        stats = captures.stop()
        process.stop()
    record = json.loads((tmp_path / "client.json").read_text())
    assert record["ok"] is True, record.get("error")
    assert record["bytes"] == DOWNLOAD_SIZE
    assert stats["sta1-wlan0"].captured and stats["sta1-wlan0"].captured > DOWNLOAD_SIZE // 1500


# No test name may contain "hostapd": in the microVM the selected tests are pytest's arguments,
# and Mininet-WiFi's stop runs pkill -9 -f hostapd, which would kill pytest itself.
def test_the_access_points_log_and_station_dump_show_each_association(ap_network: MininetWifiNetwork) -> None:
    macs = [ap_network.mn_node(name).wintfs[0].mac for name in ("sta1", "sta2")]
    log = ap_network.hostapd_log("ap1").read_text()
    dump = ap_network.ap_run("ap1", ["iw", "dev", "ap1-wlan1", "station", "dump"]).stdout
    for mac in macs:
        assert f"AP-STA-CONNECTED {mac}" in log, log[-2000:]
        assert f"Station {mac}" in dump, dump
    assert ap_network.describe()["hostapd_logs"]["ap1"] == str(ap_network.hostapd_log("ap1"))


def test_describe_records_the_emulator(ap_network: MininetWifiNetwork) -> None:
    description = ap_network.describe()
    assert description["backend"] == "mininet-wifi"
    assert description["emulator"]["mininet"]["version"]
    assert description["emulator"]["mn_wifi"]["version"]
    assert description["wmediumd"] == {"enabled": False, "mode": None}


def test_mesh_chain_forwards_over_two_hops(chain_network: MininetWifiNetwork) -> None:
    ping(chain_network, "mpa", "mpc", count=5)
    macs = chain_network.mesh_macs
    mpath = chain_network.node("mpa").run(["iw", "dev", chain_network.device("mpa", "mesh0"), "mpath", "dump"]).stdout
    to_c = [line.split() for line in mpath.splitlines() if line.startswith(macs[("mpc", 0)])]
    assert to_c, mpath
    assert to_c[0][1] == macs[("mpb", 0)], f"mpa reaches mpc via {to_c[0][1]}, not via mpb:\n{mpath}"


def test_shipped_mesh_chain_reaches_the_server(shipped_mesh_network: MininetWifiNetwork) -> None:
    """topologies/mesh_chain.py unchanged: hops on channels 36 and 149, the relay bridges them."""
    ping(shipped_mesh_network, "client", "server")
    bridge = shipped_mesh_network.node("mp1").run(["ip", "-o", "link", "show", "master", "mesh0"]).stdout
    assert bridge.count("-mp") == 2, bridge


def test_wmediumd_cell_carries_traffic(wmediumd_network: MininetWifiNetwork) -> None:
    ping(wmediumd_network, "sta1", "server")
    description = wmediumd_network.describe()
    assert description["wmediumd"] == {"enabled": True, "mode": "interference"}
    assert description["warnings"] == []  # 802.11g: no HT-under-wmediumd warning


def test_a_walking_station_roams_to_the_second_ap_by_its_own_scans(roaming_network: MininetWifiNetwork) -> None:
    """The station walks from ap1 to ap2; its wpa_supplicant (bgscan) moves it, and both APs'
    logs show it; the server's first packet after the roam reaches it through ap2."""
    network = roaming_network
    station_mac = network.mn_node("sta1").wintfs[0].mac
    ap2_mac = network.mn_node("ap2").wintfs[0].mac
    ping(network, "sta1", "server")
    # the server keeps addressing the station to the MAC it knows (as during a download, whose
    # ACKs keep that entry confirmed), without an ARP request that the station would answer
    server_device = network.device("server", "eth0")
    network.node("server").run(
        [
            "ip",
            "neigh",
            "replace",
            network.node("sta1").address,
            "lladdr",
            station_mac,
            "dev",
            server_device,
            "nud",
            "permanent",
        ]
    )
    before = network.association_events()
    assert [e["ap"] for e in before if e["event"] == "associated"] == ["ap1"], before
    network.start_trajectories()
    walk = network.topology.nodes["sta1"].trajectory.points[-1][0]  # type: ignore[attr-defined]
    deadline = time.monotonic() + walk + 240  # the VM's scans and WPA handshakes are slow
    events = before
    while time.monotonic() < deadline:
        events = network.association_events()
        if "ap2" in aps_in_order(events, "sta1"):
            break
        time.sleep(2)
    assert aps_in_order(events, "sta1")[-1:] == ["ap2"], (events, network.motion_errors)
    link = network.node("sta1").run(["iw", "dev", "sta1-wlan0", "link"]).stdout
    assert ap2_mac in link.lower(), link
    ap2_log = network.hostapd_log("ap2").read_text()
    assert f"AP-STA-CONNECTED {station_mac}" in ap2_log, ap2_log[-2000:]
    # the server's very first packet reaches the station through ap2: the switches learnt the move
    first = network.node("server").run(
        ["ping", "-c", "1", "-W", "5", network.node("sta1").address], timeout=60, check=False
    )
    assert first.returncode == 0, first.stdout + first.stderr
    ping(network, "sta1", "server")
    assert network.motion_errors == []
    assert network.describe()["roaming"] == {
        "sta1": {"aps": ["ap1", "ap2"], "bgscan": "simple:2:-65:10", "security": "WPA2-PSK"}
    }


def test_clean_after_sigkill_removes_bridges_radios_and_daemons(mininet_wifi: None) -> None:
    """A `topo up` killed with SIGKILL leaves its OVS bridge, hwsim radios and hostapd/wpa_supplicant;
    `quicbed clean` removes exactly those (not with Mininet-WiFi's machine-wide `mn -c`)."""
    for previous in _LIVE:
        previous.stop()
    _LIVE.clear()
    daemons_before = _live_daemons()
    folders_before = set(Path(tempfile.gettempdir()).glob("quicbed-mnwifi-*"))
    victim = subprocess.Popen(
        [sys.executable, "-m", "quicbed", "topo", "up", "topologies/wifi_ap.py", "--backend", "mininet-wifi"],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        seen = ""
        deadline = time.monotonic() + 900
        while "press Ctrl-C" not in seen:
            line = victim.stdout.readline()  # type: ignore[union-attr]
            seen += line
            assert line or victim.poll() is None, f"topo up ended: {seen}"
            assert time.monotonic() < deadline, f"topo up did not come up: {seen}"
        assert "  ap1 hostapd log: " in seen, seen  # where a user finds the AP's log
        radios = [name for name in os.listdir("/sys/kernel/debug/ieee80211") if name.startswith(f"mn{victim.pid:05d}p")]
        assert radios and Path("/sys/class/net/ap1").exists()
        daemons = _live_daemons() - daemons_before
        assert any(name == "hostapd" for _, name in daemons), daemons  # open cells need no wpa_supplicant
        victim.kill()
        victim.wait(30)
    finally:
        if victim.poll() is None:
            victim.kill()
    cleaner = subprocess.run(
        [sys.executable, "-m", "quicbed", "clean"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert cleaner.returncode == 0, cleaner.stderr
    assert "ovs-vsctl --if-exists del-br ap1" in cleaner.stdout, cleaner.stdout
    assert not Path("/sys/class/net/ap1").exists()
    left = [name for name in os.listdir("/sys/kernel/debug/ieee80211") if name in radios]
    assert not left, (
        cleaner.stdout,
        subprocess.run(["iw", "dev"], capture_output=True, text=True).stdout,
        _processes_outside_the_root_namespace(),
    )
    assert not daemons & _live_daemons()
    # the network's working folder (hostapd's configuration and log) goes too
    assert set(Path(tempfile.gettempdir()).glob("quicbed-mnwifi-*")) <= folders_before


def _live_daemons() -> set[tuple[int, str]]:
    """(pid, name) of running (not zombie) hostapd and wpa_supplicant processes."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            name, state = (
                (entry / "comm").read_text().strip(),
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[0],
            )
        except (OSError, IndexError):
            continue
        if name in ("hostapd", "wpa_supplicant") and state != "Z":
            found.add((int(entry.name), name))
    return found


def _processes_outside_the_root_namespace() -> list[str]:
    root = os.readlink("/proc/1/ns/net")
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns/net") != root:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name} {command[:100]}")
        except OSError:
            continue
    return found
