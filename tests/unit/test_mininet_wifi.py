"""The mininet-wifi backend's pure parts: Topology -> Mininet-WiFi parameters, warnings, checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicbed import Topology
from quicbed.backends import create
from quicbed.backends.mininet_wifi import (
    ExclusiveLock,
    MininetWifiNetwork,
    MininetWifiOptions,
    ht_capab,
    ignored_settings_warnings,
    import_problem,
    mesh_ht_cap,
    mode_of,
    plan,
    wmediumd_warnings,
)
from quicbed.errors import BackendError
from quicbed.spec.link import Radio
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("radio", "mode"),
    [
        (Radio("802.11n", "2.4GHz", 6), "n2"),
        (Radio("802.11n", "5GHz", 36), "n"),
        (Radio("802.11g", "2.4GHz", 1, mcs=None), "g"),
        (Radio("802.11a", "5GHz", 36, mcs=None), "a"),
        (Radio("802.11ac", "5GHz", 36, mcs=7), "ac"),
        (Radio("802.11ax", "5GHz", 36, mcs=7), "ax5"),
        (Radio("802.11ax", "2.4GHz", 6, mcs=7), "ax2"),
    ],
)
def test_modes(radio: Radio, mode: str) -> None:
    assert mode_of(radio) == mode


def test_ht_capabilities() -> None:
    assert ht_capab(Radio("802.11n", "5GHz", 36, width=20)) == ""
    assert ht_capab(Radio("802.11n", "5GHz", 36, width=40)) == "[HT40+]"
    assert ht_capab(Radio("802.11n", "5GHz", 40, width=40)) == "[HT40-]"
    assert ht_capab(Radio("802.11n", "2.4GHz", 1, width=40, guard_interval="short")) == "[HT40+][SHORT-GI-40]"
    assert ht_capab(Radio("802.11n", "2.4GHz", 11, width=40)) == "[HT40-]"
    assert ht_capab(Radio("802.11n", "2.4GHz", 6, guard_interval="short")) == "[SHORT-GI-20]"
    assert ht_capab(Radio("802.11g", "2.4GHz", 6, mcs=None)) == ""
    assert mesh_ht_cap(Radio("802.11n", "5GHz", 36)) == "HT20"
    assert mesh_ht_cap(Radio("802.11n", "5GHz", 44, width=40)) == "HT40+"
    assert mesh_ht_cap(Radio("802.11a", "5GHz", 36, mcs=None)) == ""
    assert ht_capab(Radio("802.11ax", "5GHz", 36, width=40)) == "[HT40+]"


def test_wmediumd_warns_about_ht_only_with_wmediumd() -> None:
    ht, legacy = Radio("802.11n", "5GHz", 36), Radio("802.11g", "2.4GHz", 1, mcs=None)
    assert wmediumd_warnings([ht], wmediumd=False) == []
    assert wmediumd_warnings([legacy], wmediumd=True) == []
    [warning] = wmediumd_warnings([ht, legacy], wmediumd=True)
    assert "legacy rates" in warning and "802.11g" in warning


def test_settings_it_cannot_apply_are_named() -> None:
    topo = Topology("t")
    ap = topo.add_access_point("ap1", mcs=3, ampdu=False)
    for index in range(1, 6):
        topo.add_wireless_link(topo.add_station(f"sta{index}"), ap, distance=10)
    topo.add_wireless_link(topo.add_station("sta6", position=(1, 0, 0)), ap, loss=2)
    warnings = ignored_settings_warnings(topo)
    assert len(warnings) == 4
    mcs, ampdu, distance, loss = warnings
    assert mcs.startswith("not applied by Mininet-WiFi: mcs 3 on sta1-ap1, sta2-ap1, sta3-ap1 and 3 more")
    assert "minstrel_ht" in mcs and "ampdu False" in ampdu
    # sta6 has a position but its AP has none: its distance would not be used either
    assert "distance 10 m on sta1-ap1" in distance and "and 2 more" in distance
    assert "position=" in distance
    assert loss.startswith("not applied by Mininet-WiFi: loss 2 % on sta6-ap1:")
    assert plan(topo.resolve()).warnings[:4] == warnings
    # the defaults, legacy rates and a rate control ask for nothing it ignores
    plain = Topology("p")
    legacy = plain.add_access_point("ap1", standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    plain.add_wireless_link(plain.add_station("sta1"), legacy)
    minstrel = plain.add_access_point("ap2", mcs=2, rate_control="minstrel")
    plain.add_wireless_link(plain.add_station("sta2"), minstrel)
    assert ignored_settings_warnings(plain) == []
    assert ignored_settings_warnings(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {})) == []
    streams = Topology("s")
    vht = streams.add_access_point("ap1", standard="802.11ac", width=80, mcs=9, spatial_streams=3)
    streams.add_wireless_link(streams.add_station("sta1"), vht)
    [warning] = [w for w in ignored_settings_warnings(streams) if "spatial_streams" in w]
    assert warning.startswith("not applied by Mininet-WiFi: spatial_streams 3 on sta1-ap1") and "one antenna" in warning
    queued = Topology("q")
    queued.add_wireless_link(queued.add_station("sta1"), queued.add_access_point("ap1", queue="fq_codel"))
    [warning] = ignored_settings_warnings(queued)
    assert warning.startswith("not applied by Mininet-WiFi: queue fq_codel on sta1-ap1") and "radio_queues" in warning
    wifi6 = Topology("ax")
    he = wifi6.add_access_point("ap1", standard="802.11ax", guard_interval="3.2us", ofdma=True)
    wifi6.add_wireless_link(wifi6.add_station("sta1"), he)
    ofdma, guard = ignored_settings_warnings(wifi6)
    assert ofdma.startswith("not applied by Mininet-WiFi: ofdma True on sta1-ap1") and "OFDMA" in ofdma
    assert guard.startswith("not applied by Mininet-WiFi: guard_interval 3.2us on sta1-ap1")
    plain_he = Topology("ax")
    plain_he.add_wireless_link(plain_he.add_station("sta1"), plain_he.add_access_point("ap1", standard="802.11ax"))
    assert ignored_settings_warnings(plain_he) == []


def test_wifi_ap_translates_to_a_standalone_ap() -> None:
    topo = load_topology(
        str(ROOT / "topologies" / "wifi_ap.py"), {"stations": "2", "band": "2.4GHz", "channel": "6", "width": "40"}
    )
    result = plan(topo.resolve())
    assert result.access_points == {
        "ap1": {
            "ssid": "quicbed-ap1",
            "mode": "n2",
            "channel": 6,
            "ht_capab": "[HT40+]",
            "failMode": "standalone",
            "position": "0,0,0",
        }
    }
    assert result.stations == {"sta1": {"position": "5,0,0", "wlans": 1}, "sta2": {"position": "5,1,0", "wlans": 1}}
    assert result.hosts == ["server"]
    assert result.associations == [("sta1", "ap1"), ("sta2", "ap1")]
    assert result.wired == {"wired": ("ap1-eth0", "eth0")}  # the AP port lives in the root namespace
    assert result.mesh_radios == [] and result.warnings == []


def test_mesh_chain_on_one_channel_blocks_non_neighbours() -> None:
    topo = load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": "2", "distinct_channels": "False"})
    radios = {r.node: r for r in plan(topo.resolve()).mesh_radios}
    assert set(radios) == {"gw", "mp1", "client"}
    assert radios["gw"].neighbours == ("mp1",) and radios["gw"].blocked == ("client",)
    assert radios["mp1"].neighbours == ("client", "gw") and radios["mp1"].blocked == ()
    assert radios["client"].blocked == ("gw",)
    assert {r.radio.channel for r in radios.values()} == {36}


def test_mesh_chain_on_distinct_channels_gives_relays_two_radios() -> None:
    topo = load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": "2"})
    result = plan(topo.resolve())
    relay = result.mesh_radios_of("mp1")
    assert [(r.index, r.radio.channel) for r in relay] == [(0, 36), (1, 149)]
    assert result.stations["mp1"]["wlans"] == 2 and result.stations["gw"]["wlans"] == 1
    assert all(not r.blocked for r in result.mesh_radios)  # two members per MBSS: nothing to block
    assert result.wired == {"internet": ("eth0", "eth0")}


def test_options_are_checked() -> None:
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {})
    with pytest.raises(BackendError, match="unknown mininet-wifi backend option"):
        MininetWifiNetwork(topo, no_such_option=1)
    with pytest.raises(BackendError, match="wmediumd mode"):
        plan(topo.resolve(), MininetWifiOptions(wmediumd=True, wmediumd_mode="nonsense"))
    network = MininetWifiNetwork(topo, wmediumd=True)
    assert any("legacy rates" in w for w in network.warnings)


def test_registry_creates_the_backend_without_building() -> None:
    network = create("mininet-wifi", load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {}))
    assert isinstance(network, MininetWifiNetwork) and network.net is None
    assert network.describe()["backend"] == "mininet-wifi"


def test_nodes_without_processes_are_refused() -> None:
    network = MininetWifiNetwork(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {}))
    with pytest.raises(BackendError, match="runs no processes"):
        network.node("ap1")


def test_import_problem_names_the_fix_or_nothing() -> None:
    problem = import_problem()
    assert problem is None or "scripts/install.sh --mininet-wifi" in problem


def test_one_network_at_a_time(tmp_path: Path) -> None:
    first, second = ExclusiveLock(tmp_path / "lock"), ExclusiveLock(tmp_path / "lock")
    first.acquire()
    try:
        with pytest.raises(BackendError, match="one Mininet-WiFi experiment at a time"):
            second.acquire()
    finally:
        first.release()
    second.acquire()
    second.release()


def test_single_station_topology_without_positions() -> None:
    topo = Topology("t")
    ap = topo.add_access_point("ap1", standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    topo.add_wireless_link(topo.add_station("sta1"), ap)
    result = plan(topo.resolve())
    assert result.access_points["ap1"]["mode"] == "g" and result.access_points["ap1"]["position"] is None
    assert result.stations["sta1"] == {"position": None, "wlans": 1}


def test_networkmanager_configuration_is_recognised(tmp_path: Path) -> None:
    from quicbed.backends.mininet_wifi import networkmanager_leaves_hwsim_alone

    (tmp_path / "conf.d").mkdir()
    assert not networkmanager_leaves_hwsim_alone(tmp_path)
    (tmp_path / "conf.d" / "90-quicbed-unmanaged.conf").write_text(
        "[keyfile]\nunmanaged-devices=interface-name:hwsim*;interface-name:*-wlan*\n"
    )
    assert networkmanager_leaves_hwsim_alone(tmp_path)


def test_waiting_for_the_wmediumd_socket(tmp_path: Path) -> None:
    import socket
    import threading
    import time

    from quicbed.backends.mininet_wifi import wait_for_wmediumd_socket

    path = str(tmp_path / "wmediumd.sock")
    with pytest.raises(BackendError, match="did not accept connections"):
        wait_for_wmediumd_socket(timeout=0.3, path=path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def listen_later() -> None:
        time.sleep(0.5)
        server.bind(path)
        server.listen(4)

    threading.Thread(target=listen_later).start()
    try:
        wait_for_wmediumd_socket(timeout=10, path=path)
    finally:
        server.close()


def test_channel_frequencies_and_the_reconnect_commands() -> None:
    from quicbed.backends.mininet_wifi.plan import frequency_mhz, reconnect_commands

    assert [frequency_mhz("2.4GHz", c) for c in (1, 6, 13, 14)] == [2412, 2437, 2472, 2484]
    assert [frequency_mhz("5GHz", c) for c in (36, 149)] == [5180, 5745]
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"band": "2.4GHz", "channel": "6"})
    assert plan(topo.resolve()).ap_frequencies == {"ap1": 2437}
    assert reconnect_commands("sta1-wlan0", "quicbed-ap1", 2412, "02:00:00:00:01:00") == [
        ["iw", "dev", "sta1-wlan0", "disconnect"],
        ["iw", "dev", "sta1-wlan0", "scan", "freq", "2412", "ssid", "quicbed-ap1"],
        ["iw", "dev", "sta1-wlan0", "connect", "quicbed-ap1", "2412", "02:00:00:00:01:00"],
    ]


def test_a_stuck_connect_is_reissued_until_the_station_associates(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"stations": "2"})
    network = MininetWifiNetwork(topo, association_timeout_s=5.0, association_retry_s=0.2)
    reissued: list[str] = []
    monkeypatch.setattr(network, "_associated", lambda sta: sta == "sta1" or reissued.count(sta) >= 2)
    monkeypatch.setattr(network, "_reconnect", lambda sta, ap: reissued.append(sta))
    network._wait_associated()
    assert reissued == ["sta2", "sta2"]  # sta1 associated at once: left alone

    never = MininetWifiNetwork(topo, association_timeout_s=0.6, association_retry_s=0)
    monkeypatch.setattr(never, "_associated", lambda sta: False)
    monkeypatch.setattr(never, "_reconnect", lambda sta, ap: pytest.fail("association_retry_s=0 never re-issues"))
    with pytest.raises(BackendError, match="did not associate within 0.6 s"):
        never._wait_associated()


def test_6ghz_radios_are_refused_naming_the_link_and_the_fix() -> None:
    from quicbed.backends.mininet_wifi import plan

    topo = Topology()
    ap = topo.add_access_point("ap1", standard="802.11ax", band="6GHz", channel=37)
    topo.add_link(ap, topo.add_host("server"))
    topo.add_wireless_link(topo.add_station("sta1"), ap)
    with pytest.raises(BackendError, match=r"links\[.*\]\.band: .* 6 GHz .*fix: use the ns3 backend, or band='5GHz'"):
        plan(topo.resolve())
