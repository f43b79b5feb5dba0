"""Lab handover, a wrong solution: sta1 is linked to ap1 only, so it has nowhere to roam to."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("handover-lab")
    radio = {"standard": "802.11n", "band": "5GHz", "channel": 36, "rate_control": "minstrel"}
    server, switch = topo.add_host("server"), topo.add_switch("sw1")
    ap1 = topo.add_access_point("ap1", ssid="campus", position=(0, 0), **radio)
    ap2 = topo.add_access_point("ap2", ssid="campus", position=(80, 0), **radio)
    topo.add_link(server, switch, delay="3ms")
    topo.add_link(ap1, switch)
    topo.add_link(ap2, switch)
    sta1 = topo.add_station("sta1", waypoints=[(0, 10, 1), (2, 10, 1), (14, 70, 1)])
    topo.add_wireless_link(sta1, ap1)
    return topo
