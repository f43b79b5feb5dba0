"""Stations that move and roam: trajectories in the topology model, their checks, the ns3
description of roaming stations, and the handover figures drawn from a channel timeline."""

from __future__ import annotations

import json
import math
import struct
import time
from pathlib import Path

import pytest

from quicbed.analysis import plots
from quicbed.analysis.mobility import aps_used, handovers, timeline_frame
from quicbed.backends.ns3.description import describe
from quicbed.errors import BackendError, SpecError
from quicbed.spec.loader import load_topology
from quicbed.spec.mobility import Trajectory, random_walk
from quicbed.spec.resolve import SpecErrors
from quicbed.spec.topology import Topology

ROOT = Path(__file__).resolve().parents[2]


def roaming(**params):
    return load_topology(str(ROOT / "topologies" / "roaming.py"), params)


def two_aps(ssid2: str = "campus", bridged: bool = True, channel2: int = 36) -> Topology:
    topo = Topology("two")
    server, switch = topo.add_host("server"), topo.add_switch("sw")
    ap1 = topo.add_access_point("ap1", ssid="campus", position=(0, 0), channel=36)
    ap2 = topo.add_access_point("ap2", ssid=ssid2, position=(60, 0), channel=channel2)
    topo.add_link(server, switch)
    topo.add_link(ap1, switch)
    if bridged:
        topo.add_link(ap2, switch)
    else:
        topo.add_link(ap2, topo.add_host("other"))
    station = topo.add_station("sta", waypoints=[(0, 5, 0), (20, 55, 0)])
    topo.add_wireless_link(station, ap1)
    topo.add_wireless_link(station, ap2)
    return topo


# -- the topology model ------------------------------------------------------------------------


def test_waypoints_place_the_station_and_interpolate_between_them():
    topo = Topology()
    station = topo.add_station("sta", waypoints=[(2, 0, 0), (12, 10, 20, 3)])
    assert station.position == (0.0, 0.0, 0.0)
    trajectory = station.trajectory
    assert trajectory.position_at(0) == (0.0, 0.0, 0.0)  # before the first waypoint: at it
    assert trajectory.position_at(7) == pytest.approx((5.0, 10.0, 1.5))
    assert trajectory.position_at(100) == (10.0, 20.0, 3.0)
    assert trajectory.top_speed() == pytest.approx(math.dist((0, 0, 0), (10, 20, 3)) / 10)
    recorded = topo.to_dict()["nodes"][0]["trajectory"]
    assert recorded == {"model": "waypoints", "waypoints": [[2.0, 0.0, 0.0, 0.0], [12.0, 10.0, 20.0, 3.0]]}


@pytest.mark.parametrize(
    "waypoints, field, words",
    [
        ([(0, 0, 0), (0, 5, 0)], "waypoints[1]", "must increase"),
        ([(5, 0, 0), (2, 5, 0)], "waypoints[1]", "must increase"),
        ([(-1, 0, 0)], "waypoints[0]", "negative"),
        ([(0, 0)], "waypoints[0]", "(t, x, y)"),
        ([(0, 0, float("nan"))], "waypoints[0]", "finite"),
        ([], "waypoints", "list"),
        ("far away", "waypoints", "list"),
    ],
)
def test_bad_waypoints_are_refused_naming_the_field(waypoints, field, words):
    topo = Topology()
    with pytest.raises(SpecError) as error:
        topo.add_station("sta", waypoints=waypoints)
    assert error.value.field == f"nodes[sta].{field}"
    assert words in str(error.value)
    assert "sta" not in topo.nodes  # nothing half-created


def test_a_station_has_one_way_of_moving():
    topo = Topology()
    with pytest.raises(SpecError, match="not both"):
        topo.add_station("sta", waypoints=[(0, 0, 0)], mobility={"model": "random_walk", "bounds": (0, 0, 9, 9)})
    with pytest.raises(SpecError, match="first one") as error:
        topo.add_station("sta", position=(1, 1), waypoints=[(0, 0, 0)])
    assert error.value.field == "nodes[sta].position"
    assert not topo.nodes


def test_a_random_walk_is_drawn_from_its_seed_inside_its_bounds_at_its_speed():
    topo = Topology()
    settings = {"model": "random_walk", "speed": 2.0, "bounds": (0, 0, 10, 10), "seed": 7, "duration": 120}
    walker = topo.add_station("a", position=(5, 5), mobility=settings)
    again = topo.add_station("b", position=(5, 5), mobility=settings)
    other = topo.add_station("c", position=(5, 5), mobility={**settings, "seed": 8})
    points = walker.trajectory.points
    assert points == again.trajectory.points and points != other.trajectory.points
    assert points[0] == (0.0, 5.0, 5.0, 0.0) and points[-1][0] == pytest.approx(120)
    assert all(0 <= x <= 10 and 0 <= y <= 10 for _, x, y, _ in points)
    speeds = [math.dist(a[1:], b[1:]) / (b[0] - a[0]) for a, b in zip(points, points[1:])]
    assert speeds == pytest.approx([2.0] * len(speeds), rel=1e-4)
    # in 120 s at 2 m/s in a 10 m box the walk reflects off the walls: waypoints between turns
    assert len(points) > 120 / 2 + 1
    recorded = topo.to_dict()["nodes"][0]["trajectory"]
    assert recorded["model"] == "random_walk" and recorded["settings"]["seed"] == 7
    assert len(recorded["waypoints"]) == len(points)


def test_a_random_walk_without_a_position_starts_in_the_middle_of_its_bounds():
    points = random_walk((5.0, 2.0, 0.0), 1.0, (0, 0, 10, 4), seed=1, turn_every=2.0, duration=10.0)
    assert points[0][1:3] == (5.0, 2.0)
    station = Topology().add_station("s", mobility={"model": "random_walk", "bounds": (0, 0, 10, 4)})
    assert station.trajectory.start == (5.0, 2.0, 0.0)
    assert station.trajectory.settings["speed"] == 1.4  # walking pace by default


@pytest.mark.parametrize(
    "mobility, field, words",
    [
        ({"model": "random_walk", "bounds": (0, 0, 10, 10), "speed": 0}, "mobility.speed", "positive"),
        ({"model": "random_walk", "bounds": (0, 0, 10, 10), "speed": "fast"}, "mobility.speed", "positive"),
        ({"model": "random_walk", "bounds": (10, 0, 0, 10)}, "mobility.bounds", "min < max"),
        ({"model": "random_walk"}, "mobility.bounds", "x_min"),
        ({"model": "random_walk", "bounds": (0, 0, 10, 10), "seed": 1.5}, "mobility.seed", "integer"),
        ({"model": "random_walk", "bounds": (0, 0, 10, 10), "sped": 2}, "mobility", "sped"),
        ({"model": "levy_flight"}, "mobility", "random_walk"),
        ({"model": "random_walk", "bounds": (20, 20, 30, 30)}, "mobility.bounds", "outside its bounds"),
    ],
)
def test_bad_mobility_settings_are_refused_naming_the_field(mobility, field, words):
    topo = Topology()
    with pytest.raises(SpecError) as error:
        topo.add_station("sta", position=(5, 5), mobility=mobility)
    assert error.value.field == f"nodes[sta].{field}"
    assert words in str(error.value)
    assert not topo.nodes


def test_a_station_linked_to_two_aps_of_one_bridged_ssid_roams_with_one_address():
    topo = two_aps()
    assert topo.roaming_stations() == {"sta": ["ap1", "ap2"]}
    interfaces = [i for i in topo.resolve().interfaces if i.node == "sta"]
    assert len(interfaces) == 1 and interfaces[0].address


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: two_aps(ssid2="other"), "different SSIDs"),
        (lambda: two_aps(bridged=False), "not bridged into one subnet"),
    ],
)
def test_roaming_needs_one_ssid_and_one_subnet(build, words):
    with pytest.raises(SpecErrors, match=words) as error:
        build().resolve()
    assert error.value.errors[0].field == "nodes[sta]"


def test_a_moving_station_has_no_fixed_distance_to_its_ap():
    topo = Topology()
    ap = topo.add_access_point("ap1")
    topo.add_link(ap, topo.add_host("server"))
    station = topo.add_station("sta", waypoints=[(0, 5, 0), (9, 9, 0)])
    topo.add_wireless_link(station, ap, distance=5)
    with pytest.raises(SpecErrors, match="moves") as error:
        topo.resolve()
    assert error.value.errors[0].field == "links[sta-ap1].distance"


# -- the ns3 description ---------------------------------------------------------------------------


def _describe(topo: Topology) -> dict:
    resolved = topo.resolve()
    return describe(resolved, {n: f"qb-{n}" for n, node in topo.nodes.items() if node.routed})


def test_a_roaming_station_is_one_ns3_station_whose_radio_may_join_either_ap():
    description = _describe(roaming())
    stations = [n for n in description["nodes"] if n["kind"] == "station"]
    assert len(stations) == 1
    radio = stations[0]["ports"][1]
    assert radio["peers"] == ["ap1:wifi", "ap2:wifi"] and radio["ssid"] == "campus"
    assert stations[0]["position"] == [10.0, 1.0, 0.0]
    assert stations[0]["trajectory"][0] == [0.0, 10.0, 1.0, 0.0]
    aps = {n["name"]: n for n in description["nodes"] if n["name"] in ("ap1", "ap2")}
    for ap in aps.values():
        assert ap["announce_associations"] is True  # (hostapd's Layer 2 Update frame)
        assert ap["ports"][0]["peers"] == ["sta1:wlan0"]
    # a cell whose stations stay put is described as before
    fixed = _describe(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {}))
    assert not any("announce_associations" in n or "trajectory" in n for n in fixed["nodes"])


def test_the_ns3_backend_refuses_roaming_across_channels_and_fastack_on_roaming_aps():
    with pytest.raises(BackendError, match="scans only the channel it is on"):
        _describe(two_aps(channel2=40))
    topo = two_aps()
    topo.nodes["ap1"].fastack = True
    with pytest.raises(BackendError, match=r"nodes\[ap1\].fastack"):
        _describe(topo)


# -- handover figures -----------------------------------------------------------------------------


def _timeline() -> dict:
    """Synthetic: 1 MB per 0.25 s sample, nothing from 4.0 to 5.5 s, half rate until 6.0 s."""
    samples = []
    for index in range(1, 41):
        t = index * 0.25
        delivered = 0 if 4.0 < t <= 5.5 else 400_000 if 5.5 < t <= 6.0 else 1_000_000
        samples.append(
            {
                "t": t,
                "x": t,
                "y": 0.0,
                "ap": "ap1" if t <= 4.5 else "ap2",
                "signal_dbm": {"ap1": -60 - t} if t <= 4.5 else {"ap2": -80 + t},
                "mcs": 7 if delivered else None,
                "rx_bytes": delivered,
            }
        )
    events = [
        {"t": 4.5, "event": "lost", "ap": "ap1", "last_delivery": 3.9},
        {"t": 4.7, "event": "associated", "ap": "ap2"},
        {"t": 5.4, "event": "first_delivery", "ap": "ap2"},
    ]
    return {"samples": samples, "events": events}


def test_handover_figures_come_from_the_timeline():
    values = handovers(_timeline(), 0.25)
    assert values["handovers"] == 1
    assert values["handover_outage"] == pytest.approx(5.4 - 3.9)
    # the first sample wholly after the association that reached half the median (500 kB):
    # the one ending at 6.25 s (those before 6.0 delivered 400 kB)
    assert values["handover_recovery"] == pytest.approx(6.25 - 4.7)
    assert handovers({"samples": [], "events": []}, 0.25) == {"handovers": 0.0}


def test_the_aps_a_station_was_with_in_the_order_it_was():
    assert aps_used(_timeline()) == ["ap1", "ap2"]
    assert aps_used(None) == [] and aps_used({"samples": [{"t": 1, "ap": None}], "events": []}) == []


def test_the_timeline_becomes_a_frame_and_a_figure(tmp_path):
    frame = timeline_frame(_timeline(), 0.25)
    assert list(frame.columns) == ["t", "x", "y", "ap", "rate", "mcs", "signal:ap1", "signal:ap2"]
    assert frame["rate"].iloc[0] == pytest.approx(1_000_000 * 8 / 0.25)
    assert math.isnan(frame["mcs"].iloc[18]) and math.isnan(frame["signal:ap2"].iloc[0])
    written = plots.mobility_plot(frame, _timeline()["events"], tmp_path / "mobility")
    assert sorted(p.suffix for p in written) == [".png", ".svg"]
    assert all(p.stat().st_size > 1000 for p in written)


# -- the mininet-wifi backend ---------------------------------------------------------------------


def test_the_mininet_wifi_plan_lets_a_station_roam_only_where_the_signal_follows_positions():
    from quicbed.backends.mininet_wifi import MininetWifiOptions, plan

    with pytest.raises(BackendError, match=r"nodes\[sta1\].*roams between ap1, ap2.*fix: wmediumd=True"):
        plan(roaming().resolve())
    with pytest.raises(BackendError, match=r"roams between.*wmediumd_mode='interference'"):
        plan(roaming().resolve(), MininetWifiOptions(wmediumd=True, wmediumd_mode="snr"))
    made = plan(roaming().resolve(), MininetWifiOptions(wmediumd=True))
    # one WPA2 network: wpa_supplicant roams within a network block it manages, by its bgscan
    for ap in ("ap1", "ap2"):
        assert made.access_points[ap]["encrypt"] == "wpa2" and made.access_points[ap]["passwd"]
    assert made.stations["sta1"] == {
        "position": "10,1,0",
        "wlans": 1,
        "bgscan_module": "simple",
        "s_inverval": 2,
        "bgscan_threshold": -65,
        "l_interval": 10,
    }
    assert made.associations == [("sta1", "ap1")] and made.roaming == {"sta1": ["ap1", "ap2"]}


def test_a_moving_station_without_wmediumd_is_warned_about():
    from quicbed.backends.mininet_wifi import MininetWifiOptions, plan

    topo = Topology()
    ap = topo.add_access_point("ap1", standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    topo.add_link(ap, topo.add_host("server"))
    topo.add_wireless_link(topo.add_station("sta1", waypoints=[(0, 5, 0), (9, 30, 0)]), ap)
    made = plan(topo.resolve())
    assert made.stations["sta1"]["position"] == "5,0,0"  # where it stands until its walk starts
    assert any("sta1 move, but without wmediumd" in warning for warning in made.warnings), made.warnings
    assert plan(topo.resolve(), MininetWifiOptions(wmediumd=True)).warnings == []


@pytest.mark.parametrize(
    "text",
    [
        "learn:2:-65:10",
        "simple:2:-65",
        "simple:0:-65:10",
        "simple:10:-65:2",
        "simple:2:-120:10",
        "simple:2:65:10",
        "simple:a:b:c",
    ],
)
def test_a_bgscan_setting_is_checked(text):
    from quicbed.backends.mininet_wifi import MininetWifiOptions, plan

    with pytest.raises(BackendError, match=r"bgscan .*simple:SHORT_S:THRESHOLD_DBM:LONG_S.*fix: e.g."):
        plan(roaming().resolve(), MininetWifiOptions(wmediumd=True, bgscan=text))


#: lines of hostapd -t logs from the microVM (ap1's then ap2's), the station 02:00:00:00:00:00
HOSTAPD_AP1 = """1764292000.100000: ap1-wlan1: STA 02:00:00:00:00:00 IEEE 802.11: associated (aid 1)
1764292000.200000: ap1-wlan1: AP-STA-CONNECTED 02:00:00:00:00:00
1764292000.210000: ap1-wlan1: STA 02:00:00:00:00:00 WPA: pairwise key handshake completed (RSN)
1764292012.500000: ap1-wlan1: AP-STA-DISCONNECTED 02:00:00:00:00:00
1764292012.600000: ap1-wlan1: AP-STA-CONNECTED 02:00:00:00:09:00
"""
HOSTAPD_AP2 = "1764292012.400000: ap2-wlan1: AP-STA-CONNECTED 02:00:00:00:00:00\n"


def test_associations_are_read_from_the_access_points_logs():
    from quicbed.backends.mininet_wifi.motion import aps_in_order, association_events

    logs = {"ap1": HOSTAPD_AP1, "ap2": HOSTAPD_AP2}
    events = association_events(logs, {"02:00:00:00:00:00": "sta1"})
    assert [(e["ap"], e["event"]) for e in events] == [
        ("ap1", "associated"),
        ("ap2", "associated"),
        ("ap1", "disassociated"),
    ]
    assert aps_in_order(events, "sta1") == ["ap1", "ap2"]
    since = association_events(logs, {"02:00:00:00:00:00": "sta1"}, since=1764292010.0)
    assert since == [
        {"t": pytest.approx(2.4), "ap": "ap2", "station": "sta1", "event": "associated"},
        {"t": pytest.approx(2.5), "ap": "ap1", "station": "sta1", "event": "disassociated"},
    ]


def test_the_mover_walks_each_trajectory_from_its_start_to_its_end():
    from quicbed.backends.mininet_wifi.motion import Mover

    trajectory = Trajectory(((0.0, 0.0, 0.0, 0.0), (0.3, 3.0, 0.0, 0.0)))
    placed: list[tuple[float, tuple[float, float, float]]] = []
    mover = Mover(
        {"sta1": trajectory}, lambda station, position: placed.append((time.monotonic(), position)), step_s=0.05
    )
    mover.start()
    deadline = time.monotonic() + 10
    while mover.moving and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not mover.moving and mover.errors == [] and mover.started is not None
    xs = [position[0] for _, position in placed]
    assert xs[0] < 0.6 and xs[-1] == 3.0 and xs == sorted(xs)  # along the walk, ending at its last waypoint
    assert len(placed) >= 4  # (every 50 ms over 300 ms; a late thread places fewer, never none)


def test_a_failing_position_is_recorded_and_the_walk_goes_on():
    from quicbed.backends.mininet_wifi.motion import Mover

    def refuse(station, position):
        raise OSError("wmediumd went away")

    mover = Mover({"sta1": Trajectory(((0.0, 0.0, 0.0, 0.0), (0.1, 1.0, 0.0, 0.0)))}, refuse, step_s=0.02)
    mover.start()
    deadline = time.monotonic() + 10
    while mover.moving and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mover.errors and "sta1 at 0.0 s: wmediumd went away" in mover.errors[0]


def _udp_pcap(datagrams: list[tuple[float, int]], payload: int) -> bytes:
    """A classic pcap of IPv4/UDP datagrams (QUIC short headers), each (time, source port),
    from 10.0.0.1 to 10.0.1.2:5000 (Ethernet)."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for t, port in sorted(datagrams):
        udp = struct.pack("!HHHH", port, 5000, 8 + payload, 0) + b"x" * payload
        ip = (
            struct.pack(
                "!BBHHHBBH4s4s",
                0x45,
                0,
                20 + len(udp),
                1,
                0x4000,
                64,
                17,
                0,
                bytes([10, 0, 0, 1]),
                bytes([10, 0, 1, 2]),
            )
            + udp
        )
        frame = b"\x02" * 12 + b"\x08\x00" + ip
        out += struct.pack("<IIII", int(t), round((t % 1) * 1e6), len(frame), len(frame)) + frame
    return out


def test_the_capture_gap_across_a_reassociation_is_its_outage():
    from quicbed.analysis.mobility import capture_outages

    arrivals = [1.0, 1.1, 1.2, 2.0, 2.1]
    assert capture_outages(arrivals, [1.5]) == [pytest.approx(0.8)]
    assert capture_outages(arrivals, [0.5, 3.0]) == []  # nothing received on one side: no figure


def test_handovers_on_mininet_wifi_come_from_the_associations_file_and_the_capture(tmp_path):
    from quicbed.runner.analyse import association_metrics

    record = {"ok": True, "tool": "quicbed-quic-client", "server": {"address": "10.0.0.1", "port": 4433}}
    assert association_metrics(tmp_path, record, "sta1") == {}
    since = 1_700_000_000.0
    events = [
        {"t": 9.8, "ap": "ap2", "station": "sta1", "event": "associated"},
        {"t": 9.9, "ap": "ap1", "station": "sta1", "event": "disassociated"},
        {"t": 3.0, "ap": "ap1", "station": "sta2", "event": "associated"},
    ]
    (tmp_path / "associations.json").write_text(
        json.dumps({"source": "hostapd logs", "since": since, "events": events})
    )
    assert association_metrics(tmp_path, record, "sta1") == {"handovers": 1.0}  # (no capture: no outage)
    # the server's data reached the client every 10 ms, except from 9.5 s to 10.25 s, and
    # background traffic from another port (more datagrams, no gap) is not the download
    download = [since + t / 100 for t in range(900, 1100) if not 950 < t < 1025]
    background = [since + 9.0 + t / 1000 for t in range(2000)]
    (tmp_path / "client.pcap").write_bytes(
        _udp_pcap([(t, 4433) for t in download] + [(t, 5201) for t in background], payload=1200)
    )
    values = association_metrics(tmp_path, record, "sta1")
    assert values["handovers"] == 1.0 and values["handover_outage"] == pytest.approx(0.75, abs=1e-3)


def test_topo_show_lists_the_stations_that_move_or_roam(capsys):
    from quicbed.cli import main

    assert main(["topo", "show", str(ROOT / "topologies" / "roaming.py"), "-p", "speed=5", "-p", "pause=2"]) == 0
    shown = capsys.readouterr().out
    assert "stations that move or roam" in shown
    assert "(10, 1, 0) at 0 s to (70, 1, 0) at 14 s, at most 5 m/s" in shown and "ap1, ap2" in shown
    assert main(["topo", "show", str(ROOT / "topologies" / "roaming.py"), "--json"]) == 0
    station = next(n for n in json.loads(capsys.readouterr().out)["nodes"] if n["name"] == "sta1")
    assert station["trajectory"]["waypoints"][-1] == [18.0, 70.0, 1.0, 0.0]
