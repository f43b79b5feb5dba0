"""One 802.11n access point with a wired server behind it (E1, "lab testbed").

sta1 ))) ap1 --- server      (WiFi hop, then Gigabit Ethernet with a small delay)
"""

from quicbed import Topology


def topology(stations: int = 1, band: str = "5GHz", channel: int = 36, width: int = 20, mcs: int = 7,
             ampdu: bool = True, wired_rate: str = "1gbit", wired_delay: str = "2ms",
             distance: float = 5.0) -> Topology:
    topo = Topology("wifi_ap", description=f"{stations} station(s) on one 802.11n AP, server on Ethernet")
    ap = topo.add_access_point("ap1", standard="802.11n", band=band, channel=channel, width=width,
                               mcs=mcs, ampdu=ampdu, position=(0, 0, 0))
    server = topo.add_host("server")
    topo.add_link(ap, server, name="wired", rate=wired_rate, delay=wired_delay)
    for index in range(1, stations + 1):
        station = topo.add_station(f"sta{index}", position=(distance, index - 1, 0))
        topo.add_wireless_link(station, ap)
    return topo
