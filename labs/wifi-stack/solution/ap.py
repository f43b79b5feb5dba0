"""Lab wifi-stack, part 1, reference solution."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("wifi_stack_ap", description="one AP, two stations, a server")
    ap = topo.add_access_point("ap1", standard="802.11n", band="2.4GHz", channel=6, width=20)
    server = topo.add_host("server")
    topo.add_link(ap, server)
    for name in ("sta1", "sta2"):
        topo.add_wireless_link(topo.add_station(name), ap)
    return topo
