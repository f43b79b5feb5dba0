"""A k-hop 802.11s mesh chain with a wired path from the gateway to a server (E2).

client(mp0) ))) mp1 ))) ... ))) gw --- internet --- server
Alternating channels per hop (distinct_channels=True) keep hops from interfering.
"""

from quicbed import Topology

CHANNELS_5GHZ = (36, 149)


def topology(hops: int = 3, mcs: int = 7, distinct_channels: bool = True, spacing: float = 30.0,
             internet_rate: str = "100mbit", internet_delay: str = "15ms") -> Topology:
    topo = Topology("mesh_chain", description=f"{hops}-hop mesh chain to a gateway, server behind it")
    gateway = topo.add_mesh_point("gw", position=(0, 0, 0))
    previous = gateway
    for index in range(1, hops + 1):
        name = "client" if index == hops else f"mp{index}"
        node = topo.add_mesh_point(name, position=(index * spacing, 0, 0))
        channel = CHANNELS_5GHZ[index % 2] if distinct_channels else CHANNELS_5GHZ[0]
        topo.add_wireless_link(previous, node, standard="802.11n", band="5GHz", channel=channel, mcs=mcs)
        previous = node
    server = topo.add_host("server")
    topo.add_link(gateway, server, name="internet", rate=internet_rate, delay=internet_delay)
    return topo
