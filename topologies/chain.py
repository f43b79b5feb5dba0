"""A wired chain of routers: client - r1 - ... - rN - server, each hop with its own delay.

Useful to study multi-hop RTTs and where the bottleneck sits.
"""

from quicbed import Topology


def topology(hops: int = 3, rate: str = "50mbit", delay: str = "5ms", bottleneck_rate: str = "10mbit") -> Topology:
    topo = Topology("chain", description=f"{hops} wired router hops, {delay} each, bottleneck {bottleneck_rate}")
    previous = topo.add_host("client")
    for index in range(1, hops + 1):
        router = topo.add_host(f"r{index}")
        topo.add_link(previous, router, rate=rate, delay=delay)
        previous = router
    server = topo.add_host("server")
    topo.add_link(previous, server, name="bottleneck", rate=bottleneck_rate, delay=delay)
    return topo
