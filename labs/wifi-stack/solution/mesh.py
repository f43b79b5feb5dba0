"""Lab wifi-stack, part 2, reference solution."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("wifi_stack_mesh", description="three mesh points in a chain")
    mp1, mp2, mp3 = (topo.add_mesh_point(name) for name in ("mp1", "mp2", "mp3"))
    topo.add_wireless_link(mp1, mp2, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    topo.add_wireless_link(mp2, mp3, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    return topo
