"""Lab handover: two access points of one network and a station that walks from one to the
other. Fill in the TODOs; 'quicbed topo show topology.py' shows what you described."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("handover-lab")
    radio = {"standard": "802.11n", "band": "5GHz", "channel": 36, "rate_control": "minstrel"}
    server, switch = topo.add_host("server"), topo.add_switch("sw1")
    ap1 = topo.add_access_point("ap1", ssid="campus", position=(0, 0), **radio)
    # TODO: ap2, 80 m from ap1 along x, in the same network (the same ssid) and on the same channel
    topo.add_link(server, switch, delay="3ms")
    topo.add_link(ap1, switch)
    # TODO: connect ap2 to the switch too, so that the station keeps its address when it moves
    # TODO: a station that stands 10 m from ap1 for 2 s, then walks at 5 m/s to 10 m from ap2:
    #       waypoints=[(t, x, y), ...], times in seconds from the start of the download
    sta1 = topo.add_station("sta1", position=(10, 1))
    topo.add_wireless_link(sta1, ap1)
    # TODO: link sta1 to ap2 as well: a station linked to several APs of one ssid roams among them
    return topo
