"""mp1 also linked to mp3: the path no longer needs mp2 (a chain is asked for)."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("wifi_stack_mesh")
    mp1, mp2, mp3 = (topo.add_mesh_point(name) for name in ("mp1", "mp2", "mp3"))
    for a, b in ((mp1, mp2), (mp2, mp3), (mp1, mp3)):
        topo.add_wireless_link(a, b, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    return topo
