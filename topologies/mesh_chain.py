"""A k-hop 802.11s mesh chain with a wired path from the gateway to a server (E2).

client(mp0) ))) mp1 ))) ... ))) gw --- internet --- server
With distinct_channels=True every hop gets its own 5 GHz channel (cycling through six), so
no two hops interfere; with False all hops share channel 36 and contend with each other.
``hops=0`` puts the client on the gateway's cable (no wireless hop). ``ampdu_hop`` (1-based,
counted from the gateway) turns frame aggregation off on that one hop (E2's aggregation
study). ``spacing`` is the distance between neighbours in metres: with the ns3 backend's
default propagation (log-distance, exponent 3, 16 dBm) 10 m gives ~33 dB SNR, enough for
MCS 7; at 30 m (~19 dB) MCS 7 loses frames.
"""

from quicbed import Topology

CHANNELS_5GHZ = (36, 149, 44, 157, 52, 161)


def topology(
    hops: int = 3,
    mcs: int = 7,
    distinct_channels: bool = True,
    spacing: float = 10.0,
    internet_rate: str = "100mbit",
    internet_delay: str = "15ms",
    ampdu_hop: int = 0,
    rate_control: str = "constant",
) -> Topology:
    topo = Topology("mesh_chain", description=f"{hops}-hop mesh chain to a gateway, server behind it")
    gateway = topo.add_mesh_point("gw", position=(0, 0, 0))
    server = topo.add_host("server")
    topo.add_link(gateway, server, name="internet", rate=internet_rate, delay=internet_delay)
    if hops == 0:
        client = topo.add_host("client")
        topo.add_link(client, gateway, name="lan")
        return topo
    previous = gateway
    for index in range(1, hops + 1):
        name = "client" if index == hops else f"mp{index}"
        node = topo.add_mesh_point(name, position=(index * spacing, 0, 0))
        channel = CHANNELS_5GHZ[(index - 1) % len(CHANNELS_5GHZ)] if distinct_channels else CHANNELS_5GHZ[0]
        radio = {"mcs": mcs} if rate_control == "constant" else {"rate_control": rate_control, "mcs": None}
        topo.add_wireless_link(
            previous,
            node,
            name=f"hop{index}",
            standard="802.11n",
            band="5GHz",
            channel=channel,
            ampdu=index != ampdu_hop,
            **radio,
        )
        previous = node
    return topo
