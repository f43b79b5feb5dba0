"""The ns3 backend's description of a topology for the channel program (pure, no root)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from quicbed import Topology
from quicbed.backends.ns3.description import Ns3Options, describe, radio_owner
from quicbed.backends.ns3.radios import ns3_channel, radio_settings, reference_loss_db
from quicbed.errors import BackendError, SpecError
from quicbed.spec.link import Radio
from quicbed.spec.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]


def build(topo: Topology, **options) -> dict:
    resolved = topo.resolve()
    namespaces = {name: f"qbtest-{name}" for name, node in topo.nodes.items() if node.routed}
    description = describe(
        resolved,
        namespaces,
        Ns3Options(**options),
        {"stats_file": "/tmp/s.json", "snapshot_file": "/tmp/n.json", "live_file": "/tmp/l.json"},
    )
    json.dumps(description)  # must be JSON-ready
    return description


def nodes_by_name(description: dict) -> dict[str, dict]:
    return {node["name"]: node for node in description["nodes"]}


def ports(node: dict, kind: str) -> list[dict]:
    return [port for port in node["ports"] if port["kind"] == kind]


def test_one_ap_cell_with_a_wired_server():
    description = build(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {}))
    nodes = nodes_by_name(description)
    assert set(nodes) == {"ap1", "sta1:wlan0", "server:eth0"}
    ap, station, server = nodes["ap1"], nodes["sta1:wlan0"], nodes["server:eth0"]
    assert ap["kind"] == "switch" and station["kind"] == "station" and server["kind"] == "switch"
    (ap_radio,) = ports(ap, "wifi")
    assert ap_radio["role"] == "ap" and ap_radio["peers"] == ["sta1:wlan0"]
    assert ap_radio["ssid"] == "quicbed-ap1" and ap_radio["mcs"] == 7 and ap_radio["ampdu_max_bytes"] == 65535
    assert ports(ap, "wire") == [{"kind": "wire", "wire": "wired", "end": 0}]
    (tap,) = ports(station, "tap")
    assert tap == {"kind": "tap", "id": "sta1:wlan0", "namespace": "qbtest-sta1", "ifname": "wlan0"}
    assert "mac" not in tap  # the program gives the TAP the station radio's MAC
    (sta_radio,) = ports(station, "wifi")
    assert sta_radio["role"] == "sta" and sta_radio["peers"] == ["ap1:wifi"] and sta_radio["ssid"] == "quicbed-ap1"
    assert math.dist(station["position"], ap["position"]) == pytest.approx(5.0)
    (server_tap,) = ports(server, "tap")
    assert server_tap["namespace"] == "qbtest-server" and server_tap["ifname"] == "eth0"
    assert server_tap["mac"].startswith("02:51:42:")
    assert ports(server, "wire") == [{"kind": "wire", "wire": "wired", "end": 1}]
    (wire,) = description["wires"]
    assert wire["forward"] == {"queue_packets": 1000, "rate_bps": 1e9, "delay_s": 0.003}
    assert wire["backward"] == wire["forward"]
    assert description["propagation"]["model"] == "log_distance"
    assert radio_owner(description) == {"ap1:wifi": "ap1", "sta1:wlan0": "sta1"}


@pytest.mark.parametrize(
    "band, channel, width, expected",
    [
        ("5GHz", 36, 20, (36, 0)),
        ("5GHz", 36, 40, (38, 0)),
        ("5GHz", 40, 40, (38, 1)),
        ("5GHz", 149, 40, (151, 0)),
        ("5GHz", 44, 80, (42, 2)),
        ("5GHz", 100, 160, (114, 0)),
        ("5GHz", 64, 160, (50, 7)),
        ("2.4GHz", 1, 40, (3, 0)),
        ("2.4GHz", 11, 40, (9, 1)),
        ("2.4GHz", 6, 20, (6, 0)),
        # 6 GHz: wide channels tile the band from channel 1 (40 MHz: 3, 11, ...; 80: 7, 23, 39, ...;
        # 160: 15, 47, ...)
        ("6GHz", 1, 20, (1, 0)),
        ("6GHz", 5, 40, (3, 1)),
        ("6GHz", 229, 40, (227, 1)),
        ("6GHz", 37, 80, (39, 1)),
        ("6GHz", 33, 160, (47, 0)),
        ("6GHz", 61, 160, (47, 7)),
    ],
)
def test_channel_numbers_follow_ns3s_table(band, channel, width, expected):
    assert ns3_channel(band, channel, width) == expected


def test_enterprise_ap_picks_its_channels_by_band():
    def channels(**params) -> list[int]:
        topo = load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"aps": 2, "stations": 2, **params})
        return [_wifi(build(topo), name)["channel"] for name in ("ap1", "ap2")]

    assert channels() == [36, 149]
    assert channels(standard="802.11ax", band="6GHz", width=160) == [37, 101]
    assert channels(standard="802.11n", band="2.4GHz", same_channel=True) == [1, 1]


def test_a_channel_outside_any_wide_channel_is_refused():
    with pytest.raises(BackendError, match="144 is not part of a 160 MHz channel"):
        ns3_channel("5GHz", 144, 160)
    with pytest.raises(BackendError, match="20 or 40 MHz"):
        ns3_channel("2.4GHz", 6, 80)
    with pytest.raises(BackendError, match="6 GHz channel 233 is not part of a 40 MHz channel"):
        ns3_channel("6GHz", 233, 40)


def test_radio_settings():
    settings = radio_settings(
        Radio(standard="802.11ac", band="5GHz", channel=36, width=80, mcs=9, guard_interval="short", amsdu=True)
    )
    assert settings["ns3_channel"] == 42 and settings["primary20"] == 0
    assert settings["ampdu_max_bytes"] == 1048575 and settings["amsdu_max_bytes"] == 11398
    assert settings["guard_interval_ns"] == 400 and settings["mcs"] == 9
    assert radio_settings(Radio(ampdu=False))["ampdu_max_bytes"] == 0
    assert radio_settings(Radio(ampdu_max_size=8000))["ampdu_max_bytes"] == 8000
    legacy = radio_settings(Radio(standard="802.11a", mcs=None))
    assert legacy["ampdu_max_bytes"] == 0 and "mcs" not in legacy
    assert reference_loss_db("5GHz") == pytest.approx(46.7, abs=0.1)
    assert reference_loss_db("2.4GHz") == pytest.approx(40.1, abs=0.1)


def test_mesh_chain_radios_routes_and_positions():
    description = build(load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 3}))
    nodes = nodes_by_name(description)
    assert {"gw:mesh0", "mp1:mesh0", "mp2:mesh0", "client:mesh0", "gw:eth0", "server:eth0"} == set(nodes)
    mp1 = nodes["mp1:mesh0"]
    assert mp1["kind"] == "mesh"
    radios = {port["id"]: port for port in ports(mp1, "wifi")}
    assert set(radios) == {"mp1:mesh0:ch36", "mp1:mesh0:ch149"}  # one radio per hop channel
    assert radios["mp1:mesh0:ch36"]["peers"] == ["gw:mesh0:ch36"]
    assert radios["mp1:mesh0:ch149"]["peers"] == ["mp2:mesh0:ch149"]
    assert all(port["role"] == "adhoc" for port in radios.values())
    client = nodes["client:mesh0"]
    assert client["routes"]["gw:mesh0"] == {"radio": "client:mesh0:ch44", "next_hop": "mp2:mesh0:ch44"}
    assert client["routes"]["mp1:mesh0"] == {"radio": "client:mesh0:ch44", "next_hop": "mp2:mesh0:ch44"}
    assert nodes["gw:mesh0"]["routes"]["client:mesh0"] == {"radio": "gw:mesh0:ch36", "next_hop": "mp1:mesh0:ch36"}
    assert mp1["routes"]["client:mesh0"]["radio"] == "mp1:mesh0:ch149"
    assert [nodes[n]["position"][0] for n in ("gw:mesh0", "mp1:mesh0", "mp2:mesh0", "client:mesh0")] == [0, 10, 20, 30]
    # the gateway's cable is a separate interface bridged onto the wire
    assert [p["kind"] for p in nodes["gw:eth0"]["ports"]] == ["tap", "wire"]
    macs = [p["mac"] for n in description["nodes"] for p in ports(n, "tap") if "mac" in p]
    assert len(macs) == len(set(macs)) == 6


def test_shared_channel_mesh_uses_one_radio_per_node():
    description = build(
        load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 3, "distinct_channels": False})
    )
    mp1 = nodes_by_name(description)["mp1:mesh0"]
    (radio,) = ports(mp1, "wifi")
    assert radio["id"] == "mp1:mesh0:ch36" and sorted(radio["peers"]) == ["gw:mesh0:ch36", "mp2:mesh0:ch36"]


def test_aggregation_can_be_turned_off_on_one_hop():
    description = build(load_topology(str(ROOT / "topologies" / "mesh_chain.py"), {"hops": 3, "ampdu_hop": 2}))
    radios = {p["id"]: p for n in description["nodes"] for p in ports(n, "wifi")}
    assert radios["mp1:mesh0:ch149"]["ampdu_max_bytes"] == 0 and radios["mp2:mesh0:ch149"]["ampdu_max_bytes"] == 0
    assert radios["mp1:mesh0:ch36"]["ampdu_max_bytes"] == 65535


def test_frame_error_rate_applies_at_both_ends():
    topo = Topology("lossy")
    ap = topo.add_access_point("ap1", mcs=5)
    station = topo.add_station("sta1")
    host = topo.add_host("server")
    topo.add_link(ap, host)
    topo.add_wireless_link(station, ap, loss=2)
    nodes = nodes_by_name(build(topo))
    assert ports(nodes["ap1"], "wifi")[0]["frame_error"] == {"sta1:wlan0": 0.02}
    assert ports(nodes["sta1:wlan0"], "wifi")[0]["frame_error"] == {"ap1:wifi": 0.02}


def test_stations_of_one_ap_must_share_per_radio_settings():
    topo = Topology("mixed")
    ap = topo.add_access_point("ap1")
    for name, mcs in (("sta1", 7), ("sta2", 3)):
        topo.add_wireless_link(topo.add_station(name), ap, mcs=mcs)
    topo.add_link(ap, topo.add_host("server"))
    with pytest.raises(BackendError, match="different mcs"):
        build(topo)
    minstrel = Topology("minstrel")
    ap = minstrel.add_access_point("ap1", rate_control="minstrel", mcs=None)
    for name in ("sta1", "sta2"):
        minstrel.add_wireless_link(minstrel.add_station(name), ap, guard_interval="short" if name == "sta1" else "long")
    minstrel.add_link(ap, minstrel.add_host("server"))
    nodes = nodes_by_name(build(minstrel))
    # the AP supports the short guard interval if any station uses it; each station keeps its own
    assert ports(nodes["ap1"], "wifi")[0]["guard_interval_ns"] == 400
    assert ports(nodes["sta2:wlan0"], "wifi")[0]["guard_interval_ns"] == 800


def test_enterprise_ap_places_many_stations_on_a_ring():
    description = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 40}))
    nodes = nodes_by_name(description)
    stations = [n for n in description["nodes"] if n["kind"] == "station"]
    assert len(stations) == 40
    assert len(ports(nodes["ap1"], "wifi")[0]["peers"]) == 40
    positions = {tuple(s["position"]) for s in stations}
    assert len(positions) == 40
    assert all(math.dist(p, (0, 0, 0)) == pytest.approx(5.0) for p in positions)
    assert ports(nodes["ap1"], "wifi")[0]["standard"] == "802.11ac"


def test_two_aps_behind_a_switch():
    description = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 4, "aps": 2}))
    nodes = nodes_by_name(description)
    assert ports(nodes["ap1"], "wifi")[0]["channel"] == 36 and ports(nodes["ap2"], "wifi")[0]["channel"] == 149
    assert ports(nodes["ap1"], "wifi")[0]["peers"] == ["sta1:wlan0", "sta3:wlan0"]
    assert nodes["sw"]["kind"] == "switch" and len(ports(nodes["sw"], "wire")) == 3
    assert {w["name"] for w in description["wires"]} == {"wired", "ap1-uplink", "ap2-uplink"}


def test_wired_shapes_and_unsupported_impairments():
    topo = Topology("wired")
    a, b = topo.add_host("a"), topo.add_host("b")
    topo.add_link(
        a,
        b,
        name="l",
        rate="10mbit",
        delay="5ms",
        jitter="1ms",
        jitter_distribution="normal",
        loss={"ge_mean": 5},
        corrupt=1,
        queue_limit=50,
        backward={"loss": 2},
    )
    (wire,) = build(topo)["wires"]
    assert wire["forward"]["loss"]["model"] == "gilbert_elliott"
    assert wire["forward"]["loss"]["p"] == pytest.approx(0.00125)
    assert wire["forward"]["jitter_distribution"] == "normal" and wire["forward"]["corrupt"] == 0.01
    assert wire["forward"]["queue_packets"] == 50 and wire["forward"]["rate_bps"] == 10e6
    assert wire["backward"]["loss"] == {"model": "bernoulli", "probability": 0.02}
    topo.set_link_shape("l", reorder=5)
    with pytest.raises(BackendError, match="does not model reorder"):
        build(topo)


def test_options_reach_the_description():
    description = build(
        load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {}),
        mac_queue_packets=100,
        propagation="fixed_rss",
        rss_dbm=-60,
        lag_interval_us=500,
        seed=7,
    )
    radio = ports(nodes_by_name(description)["ap1"], "wifi")[0]
    assert radio["queue_packets"] == 100
    assert description["propagation"]["model"] == "fixed_rss" and description["propagation"]["rss_dbm"] == -60
    assert description["lag_interval_us"] == 500 and description["seed"] == 7


def test_every_network_draws_its_own_random_streams_unless_told():
    """Rebuilt networks (each cell of a link axis, a run made again) must not repeat the same
    losses, backoffs and frame errors: each gets its own ns-3 run number, recorded."""
    from quicbed.backends.ns3.network import Ns3Network

    topo = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"loss": 2})
    networks = [Ns3Network(topo) for _ in range(3)]
    runs = {network.description["run"] for network in networks}
    assert len(runs) == 3 and all(run >= 1 for run in runs)
    assert {network.describe()["channel"]["rng"]["run"] for network in networks} == runs
    assert Ns3Network(topo, run=5).description["run"] == 5  # a run can be repeated


def test_ack_acceleration_is_an_option_of_the_access_point():
    description = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 2, "fastack": True}))
    assert nodes_by_name(description)["ap1"]["fastack"] is True
    plain = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 2}))
    assert "fastack" not in nodes_by_name(plain)["ap1"]  # off means the channel never builds it
    lonely = Topology("lonely")
    lonely.add_link(lonely.add_host("server"), lonely.add_access_point("ap1", fastack=True))
    with pytest.raises(BackendError, match=r"nodes\[ap1\].fastack: access point ap1 has no stations"):
        build(lonely)
    with pytest.raises(SpecError, match=r"nodes\[ap2\].fastack: fastack must be true or false"):
        lonely.add_access_point("ap2", fastack="yes")


def test_mininet_wifi_refuses_ack_acceleration():
    from quicbed.backends.mininet_wifi.host import unrealisable

    topo = load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 2, "fastack": True})
    assert unrealisable(topo) == [
        (
            "nodes[ap1].fastack: ACK acceleration is a model of the ns3 backend's access "
            "point; hostapd has none (fix: backend: ns3)"
        )
    ]


def test_spatial_streams_reach_the_radio_and_are_checked():
    assert radio_settings(Radio(standard="802.11ac", width=80, mcs=9, spatial_streams=3))["spatial_streams"] == 3
    assert radio_settings(Radio(standard="802.11ac", width=80, mcs=9))["spatial_streams"] == 1
    assert radio_settings(Radio(mcs=15))["spatial_streams"] == 2  # 802.11n: the MCS index says it
    assert radio_settings(Radio(mcs=15, spatial_streams=2))["spatial_streams"] == 2
    assert radio_settings(Radio(rate_control="minstrel", mcs=None, spatial_streams=3))["spatial_streams"] == 3
    refused = [
        (Radio(standard="802.11ac", width=20, mcs=9, spatial_streams=2), "no MCS 9 with 2 spatial stream(s) at 20"),
        (Radio(standard="802.11ac", width=80, mcs=6, spatial_streams=3), "no MCS 6 with 3 spatial stream(s) at 80"),
        (Radio(standard="802.11ac", width=160, mcs=9, spatial_streams=3), "at 160 MHz"),
        (Radio(mcs=7, spatial_streams=2), "802.11n MCS 7 has 1 spatial stream(s), not 2"),
        (Radio(standard="802.11ac", spatial_streams=5), "outside 1..4"),
        (Radio(standard="802.11a", mcs=None, spatial_streams=2), "one spatial stream"),
        (Radio(spatial_streams="3"), "spatial_streams must be a number of streams"),  # type: ignore[arg-type]
    ]
    for radio, message in refused:
        with pytest.raises(SpecError, match=re.escape(message)) as caught:
            radio.check("nodes[ap1]")
        assert caught.value.fix or "must be" in message, message
    Radio(standard="802.11ac", width=20, mcs=9, spatial_streams=3).check("nodes[ap1]")


def test_he_radios_reach_the_channel() -> None:
    """802.11ax: HE MCS 0-11, its three guard intervals, A-MPDUs of up to 6,500,631 bytes,
    OFDMA on the AP's radio and the band's radios on ns-3's spectrum channel."""
    settings = radio_settings(Radio(standard="802.11ax", width=80, mcs=11, guard_interval="3.2us", spatial_streams=2))
    assert (
        settings["standard"],
        settings["mcs"],
        settings["guard_interval_ns"],
        settings["spatial_streams"],
        settings["ampdu_max_bytes"],
        settings["ns3_channel"],
    ) == ("802.11ax", 11, 3200, 2, 6500631, 42)
    with pytest.raises(BackendError, match=re.escape("guard_interval='0.8us' or '3.2us'")):
        radio_settings(Radio(standard="802.11ax", guard_interval="1.6us"))  # ns-3 3.37 would send 3.2 us
    assert "ofdma" not in settings
    assert radio_settings(Radio(standard="802.11ax"))["guard_interval_ns"] == 800  # 'long': HE's 0.8 us
    topo = _cell(standard="802.11ax", ofdma=True)
    description = build(topo)
    assert _wifi(description, "ap1")["ofdma"] and _wifi(description, "sta1:wlan0")["ofdma"]
    assert "ofdma_uplink" not in _wifi(description, "ap1")
    both = build(_cell(standard="802.11ax", ofdma="both"))
    assert _wifi(both, "ap1")["ofdma"] and _wifi(both, "ap1")["ofdma_uplink"] and both["spectrum_bands"] == ["5GHz"]
    assert description["spectrum_bands"] == ["5GHz"]
    assert build(_cell(standard="802.11ax"))["spectrum_bands"] == []


def test_he_radios_are_checked() -> None:
    refused = [
        (Radio(standard="802.11ax", mcs=12), "MCS 12 is outside 0..11"),
        (Radio(standard="802.11ax", guard_interval="short"), "802.11ax has no 400 ns guard interval"),
        (Radio(standard="802.11ax", guard_interval="2us"), "802.11ax has no 2000 ns guard interval"),
        (Radio(standard="802.11ax", guard_interval="wide"), "cannot read guard interval 'wide'"),
        (Radio(guard_interval="1.6us"), "802.11n has no 1600 ns guard interval"),
        (Radio(standard="802.11ax", band="2.4GHz", channel=6, width=80), "2.4 GHz band has no 80 MHz"),
        (Radio(standard="802.11ax", rate_control="minstrel", mcs=None), "Minstrel has no HE"),
        (Radio(ofdma=True), "OFDMA is part of 802.11ax, not 802.11n"),
        (Radio(standard="802.11ax", ofdma="sideways"), "unknown OFDMA direction 'sideways'"),
        (Radio(ofdma="both"), "OFDMA is part of 802.11ax, not 802.11n"),
        (Radio(standard="802.11ax", ampdu_max_size=6500632), "outside 1..6500631"),
        (Radio(standard="802.11ax", spatial_streams=5), "outside 1..4"),
        (Radio(standard="802.11ac", band="6GHz", channel=37), "802.11ac does not use the 6GHz band"),
        (Radio(standard="802.11ax", band="6GHz", channel=36), "channel 36 is not a 6GHz channel"),
    ]
    for radio, message in refused:
        with pytest.raises(SpecError, match=re.escape(message)):
            radio.check("nodes[ap1]")
    for radio in (
        Radio(standard="802.11ax", mcs=11, guard_interval="3.2us"),
        Radio(standard="802.11ax", band="2.4GHz", channel=6, width=40, ofdma=True),
        Radio(standard="802.11ax", width=20, mcs=9, spatial_streams=4),  # no VHT-style exclusions
        Radio(standard="802.11ax", band="6GHz", channel=233, width=20),
        Radio(standard="802.11ax", band="6GHz", channel=37, width=160),
    ):
        radio.check("nodes[ap1]")


def test_spatial_reuse_settings_are_checked_and_reach_the_channel() -> None:
    """802.11ax BSS colour (1-63) and OBSS-PD level (-82 to -62 dBm, with a colour) reach both
    ends of the AP's links; elsewhere they are refused, naming the field."""
    refused = [
        (Radio(bss_color=3), "bss_color is part of 802.11ax, not 802.11n"),
        (Radio(standard="802.11ax", bss_color=0), "BSS colour 0 is outside 1..63"),
        (Radio(standard="802.11ax", bss_color=64), "BSS colour 64 is outside 1..63"),
        (Radio(standard="802.11ax", bss_color=1, obss_pd=-90), "OBSS-PD level -90 dBm is outside -82..-62"),
        (Radio(standard="802.11ax", obss_pd=-72), "this BSS has none"),
        (Radio(standard="802.11ax", bss_color="red"), "bss_color must be a colour"),  # type: ignore[arg-type]
    ]
    for radio, message in refused:
        with pytest.raises(SpecError, match=re.escape(message)) as caught:
            radio.check("nodes[ap1]")
        assert caught.value.field.startswith("nodes[ap1].")
    description = build(_cell(standard="802.11ax", bss_color=5, obss_pd=-72))
    for radio in ("ap1", "sta1:wlan0"):
        assert (_wifi(description, radio)["bss_color"], _wifi(description, radio)["obss_pd_dbm"]) == (5, -72.0)
    assert "bss_color" not in _wifi(build(_cell(standard="802.11ax")), "ap1")


def test_an_he_aps_stations_share_its_guard_interval() -> None:
    topo = Topology("gi")
    ap = topo.add_access_point("ap1", standard="802.11ax")
    topo.add_wireless_link(topo.add_station("sta1"), ap, guard_interval="0.8us")
    topo.add_wireless_link(topo.add_station("sta2"), ap)  # 'long', the same 800 ns
    topo.add_link(ap, topo.add_host("server"))
    build(topo)
    topo.add_wireless_link(topo.add_station("sta3"), ap, guard_interval="3.2us")
    with pytest.raises(BackendError, match=r"different guard_interval \(800, 3200\)"):
        build(topo)


def test_an_aps_stations_share_its_stream_count():
    topo = Topology("streams")
    ap = topo.add_access_point("ap1", standard="802.11ac", width=80, mcs=9)
    topo.add_wireless_link(topo.add_station("sta1"), ap)
    topo.add_wireless_link(topo.add_station("sta2"), ap, spatial_streams=2)
    with pytest.raises(BackendError, match="different spatial_streams"):
        build(topo)


# -- queue models ---------------------------------------------------------------------------


def _cell(**radio) -> Topology:
    topo = Topology("cell")
    ap = topo.add_access_point("ap1", **radio)
    topo.add_wireless_link(topo.add_station("sta1"), ap)
    topo.add_link(ap, topo.add_host("server"))
    return topo


def _wifi(description: dict, node: str) -> dict:
    return ports(nodes_by_name(description)[node], "wifi")[0]


def test_a_radio_queue_model_reaches_both_radios():
    """A discipline goes to the channel with its limit and times; the MAC queue under it is the
    driver's (mac_packets), a FIFO's length is the MAC queue's own."""
    codel = build(_cell(queue="codel"))
    for node in ("ap1", "sta1:wlan0"):
        port = _wifi(codel, node)
        assert port["queue"] == {"kind": "codel", "packets": 1000, "target_ms": 5.0, "interval_ms": 100.0}
        assert port["queue_packets"] == 64
    fq = _wifi(
        build(
            _cell(
                queue={
                    "kind": "fq_codel",
                    "target": "10ms",
                    "interval": "200ms",
                    "mac_packets": 32,
                    "flows": 64,
                    "quantum": 300,
                }
            )
        ),
        "ap1",
    )
    assert fq["queue"] == {
        "kind": "fq_codel",
        "packets": 10240,
        "target_ms": 10.0,
        "interval_ms": 200.0,
        "flows": 64,
        "quantum": 300,
    }
    assert fq["queue_packets"] == 32
    fair = _wifi(build(_cell(queue="mac80211")), "ap1")
    assert fair["queue"] == {
        "kind": "mac80211",
        "packets": 8192,
        "target_ms": 20.0,
        "interval_ms": 100.0,
        "flows": 1024,
        "quantum": 300,
        "mac_packets": 64,
        "weight_us": 256.0,
    }
    tuned = _wifi(build(_cell(queue={"kind": "mac80211", "target": "5ms", "weight": "1ms", "mac_packets": 32})), "ap1")
    assert tuned["queue"]["target_ms"] == 5.0 and tuned["queue"]["weight_us"] == 1000.0
    assert tuned["queue"]["mac_packets"] == 32
    fifo = _wifi(build(_cell(queue={"kind": "fifo", "packets": 200})), "ap1")
    assert "queue" not in fifo and fifo["queue_packets"] == 200
    plain = _wifi(build(_cell()), "ap1")
    assert "queue" not in plain and plain["queue_packets"] == 500
    assert _wifi(build(_cell(queue="fifo")), "ap1")["queue_packets"] == 500


def test_queue_models_are_checked_and_shared_by_an_aps_stations():
    with pytest.raises(SpecError, match=r"nodes\[ap1\].queue.kind: unknown queue kind 'red'"):
        _cell(queue="red")
    with pytest.raises(
        SpecError,
        match=r"queue.flows: flows does not apply to a codel queue \(fix: leave flows "
        r"out, or use kind fq_codel or mac80211\)",
    ):
        _cell(queue={"kind": "codel", "flows": 8})
    with pytest.raises(SpecError, match=r"queue.weight: weight does not apply to a fq_codel queue"):
        _cell(queue={"kind": "fq_codel", "weight": "256us"})
    with pytest.raises(SpecError, match=r"queue.weight: .*"):
        _cell(queue={"kind": "mac80211", "weight": "0ms"})
    with pytest.raises(SpecError, match=r"queue.target: target 100 ms is not shorter than interval"):
        _cell(queue={"kind": "codel", "target": "100ms"})
    linked = Topology("t")
    linked.add_access_point("ap1")
    linked.add_station("sta1")
    with pytest.raises(SpecError, match=r"links\[sta1-ap1\].queue.packets: packets must be a positive whole number"):
        linked.add_wireless_link("sta1", "ap1", queue={"kind": "codel", "packets": 0})
    mixed = Topology("mixed")
    ap = mixed.add_access_point("ap1")
    mixed.add_wireless_link(mixed.add_station("sta1"), ap, queue="codel")
    mixed.add_wireless_link(mixed.add_station("sta2"), ap)
    mixed.add_link(ap, mixed.add_host("server"))
    with pytest.raises(BackendError, match="different queue"):
        build(mixed)


def test_ack_acceleration_refuses_a_queue_discipline_at_its_ap():
    topo = Topology("fast")
    ap = topo.add_access_point("ap1", fastack=True, queue="fq_codel")
    topo.add_wireless_link(topo.add_station("sta1"), ap)
    topo.add_link(ap, topo.add_host("server"))
    with pytest.raises(BackendError, match=r"nodes\[ap1\].fastack: ACK acceleration needs the AP's MAC queue alone"):
        build(topo)
    fifo = Topology("fast")
    ap = fifo.add_access_point("ap1", fastack=True, queue="fifo")
    fifo.add_wireless_link(fifo.add_station("sta1"), ap)
    fifo.add_link(ap, fifo.add_host("server"))
    assert nodes_by_name(build(fifo))["ap1"]["fastack"] is True


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "topologies").glob("*.py")))
def test_every_shipped_topology_is_described_whole(script):
    """Each section (wires, APs and stations, mesh, switches) adds its part once: every routed
    interface has one TAP in its namespace, TAP MACs are distinct, every wire has both ends
    and every radio's peers exist."""
    topo = load_topology(str(ROOT / "topologies" / script), {})
    description = build(topo)
    taps = [port for node in description["nodes"] for port in ports(node, "tap")]
    routed = {f"{i.node}:{i.name}" for i in topo.resolve().interfaces if topo.nodes[i.node].routed and i.address}
    assert sorted(tap["id"] for tap in taps) == sorted(routed)
    assert all(tap["namespace"] == f"qbtest-{tap['id'].partition(':')[0]}" for tap in taps)
    macs = [tap["mac"] for tap in taps if "mac" in tap]
    assert len(macs) == len(set(macs))
    ends = sorted((port["wire"], port["end"]) for node in description["nodes"] for port in ports(node, "wire"))
    assert ends == sorted((wire["name"], end) for wire in description["wires"] for end in (0, 1))
    radios = {port["id"] for node in description["nodes"] for port in ports(node, "wifi")}
    assert all(set(port["peers"]) <= radios for node in description["nodes"] for port in ports(node, "wifi"))


def test_the_real_time_simulator_is_chosen_and_checked():
    from quicbed.backends.ns3.network import Ns3Network

    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"))
    assert (build(topo)["realtime"], build(topo)["realtime_spin_us"]) == ("paced", 0)
    assert build(topo, realtime="ns3", realtime_spin_us=20)["realtime"] == "ns3"
    with pytest.raises(BackendError, match="realtime='fast': choose paced or ns3"):
        Ns3Network(topo, realtime="fast")
    with pytest.raises(BackendError, match="realtime_spin_us=-1: must be 0 or more"):
        Ns3Network(topo, realtime_spin_us=-1)


def test_the_frame_ledger_is_on_by_default_and_its_settle_time_checked():
    from quicbed.backends.ns3.network import Ns3Network

    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"))
    described = build(topo)
    assert (described["frame_ledger"], described["frame_ledger_settle_ms"]) == (True, 2000)
    described = build(topo, frame_ledger=False, frame_ledger_settle_s=0.5)
    assert (described["frame_ledger"], described["frame_ledger_settle_ms"]) == (False, 500)
    with pytest.raises(BackendError, match="frame_ledger_settle_s=0: must be more than 0"):
        Ns3Network(topo, frame_ledger_settle_s=0)


def test_an_accelerating_ap_keeps_frames_past_ns3s_queue_lifetime():
    """ns-3's MAC queue drops a frame older than 500 ms; an accelerating AP must keep what it
    acknowledged until the air delivers or fails it (an hour: longer than any run)."""
    fast = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 2, "fastack": True}))
    plain = build(load_topology(str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": 2}))
    assert ports(nodes_by_name(fast)["ap1"], "wifi")[0]["queue_max_delay_ms"] == 3_600_000
    assert "queue_max_delay_ms" not in ports(nodes_by_name(plain)["ap1"], "wifi")[0]


def test_fastack_is_refused_for_stations_that_move():
    """A station that leaves its AP's range still acknowledges frames at the MAC and drops them:
    the AP's acknowledgements for it would be lies, so FastACK and a trajectory do not mix."""
    from quicbed import Topology

    topo = Topology("walker")
    server, ap = topo.add_host("server"), topo.add_access_point("ap1", fastack=True)
    topo.add_link(ap, server, rate="1gbit")
    still = topo.add_station("sta1", position=(5, 0, 0))
    walker = topo.add_station("sta2", waypoints=[(0, 5, 0, 0), (10, 300, 0, 0)])
    topo.add_wireless_link(still, ap)
    topo.add_wireless_link(walker, ap)
    with pytest.raises(
        BackendError, match=r"nodes\[ap1\]\.fastack: sta2 move\(s\).*fix: drop fastack, or the trajectory"
    ):
        build(topo)
