"""A station walking from one access point to another of the same network (one SSID).

    server --- switch --- ap1 ))) . . . sta1 walks . . . ((( ap2 --- switch

ap1 stands at x = 0, ap2 at x = ``ap_spacing``; both serve the SSID "campus" on one channel and
are bridged by one switch, so the station keeps its address when it moves on. The station
stands at ``start`` metres for ``pause`` seconds of the transfer, then walks along x at
``speed`` m/s to ``end``. Rates follow the signal (Minstrel), so the station slows down as
it leaves ap1; it changes AP when it has missed ap1's beacons long enough (ns3: 10 beacons,
about a second; docs/ns3-backend.md, "Mobility and roaming"), and the outage lasts until its
new association and its first frame through ap2.
"""

from quicbed import Topology


def topology(
    ap_spacing: float = 80.0,
    start: float = 10.0,
    end: float = 70.0,
    speed: float = 4.0,
    pause: float = 3.0,
    standard: str = "802.11n",
    band: str = "5GHz",
    channel: int = 36,
    width: int = 20,
    rate_control: str = "minstrel",
    mcs: int = 7,
    wired_rate: str = "1gbit",
    wired_delay: str = "3ms",
) -> Topology:
    topo = Topology(
        "roaming", description=f"a station walking at {speed:g} m/s from ap1 to ap2 ({ap_spacing:g} m apart, one SSID)"
    )
    radio = {
        "standard": standard,
        "band": band,
        "channel": channel,
        "width": width,
        "rate_control": rate_control,
        "mcs": mcs if rate_control == "constant" else None,
    }
    server, switch = topo.add_host("server"), topo.add_switch("sw1")
    ap1 = topo.add_access_point("ap1", ssid="campus", position=(0, 0, 0), **radio)
    ap2 = topo.add_access_point("ap2", ssid="campus", position=(ap_spacing, 0, 0), **radio)
    topo.add_link(server, switch, name="wired", rate=wired_rate, delay=wired_delay)
    topo.add_link(ap1, switch, name="uplink1", rate=wired_rate)
    topo.add_link(ap2, switch, name="uplink2", rate=wired_rate)
    walk = abs(end - start) / speed
    station = topo.add_station("sta1", waypoints=[(0, start, 1), (pause, start, 1), (pause + walk, end, 1)])
    topo.add_wireless_link(station, ap1)
    topo.add_wireless_link(station, ap2)
    return topo
