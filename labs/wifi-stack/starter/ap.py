"""Lab wifi-stack, part 1: one access point, two stations, a server behind the AP.

    sta1 )))             ap1 --- server
    sta2 )))   (802.11n, 2.4 GHz, channel 6)

Try it (Mininet-WiFi; on a kernel without mac80211_hwsim use the testbed VM):
    sudo quicbed topo up ap.py --backend mininet-wifi
"""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("wifi_stack_ap", description="one AP, two stations, a server")
    ap = topo.add_access_point("ap1", standard="802.11n", band="2.4GHz", channel=6, width=20)
    server = topo.add_host("server")
    topo.add_link(ap, server)
    # TODO: two stations, sta1 and sta2, each with a wireless link to ap1
    #       (topo.add_station("sta1"), topo.add_wireless_link(station, ap))
    return topo
