"""Lab wifi-stack, part 2: three 802.11s mesh points in a chain on one channel.

    mp1 ))) mp2 ))) mp3        (802.11g, 2.4 GHz, channel 1)

Only the links you declare may peer, so mp1 reaches mp3 through mp2.
    sudo quicbed topo up mesh.py --backend mininet-wifi
"""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("wifi_stack_mesh", description="three mesh points in a chain")
    mp1, mp2 = topo.add_mesh_point("mp1"), topo.add_mesh_point("mp2")
    topo.add_wireless_link(mp1, mp2, standard="802.11g", band="2.4GHz", channel=1, mcs=None)
    # TODO: a third mesh point, mp3, linked to mp2 on the same channel
    return topo
