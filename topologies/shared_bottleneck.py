"""N client/server pairs sharing one bottleneck (fairness of parallel flows, E2/E3/E4).

client1 --\\                    /-- server1
client2 ---- left ==bottleneck== right ---- server2
 ...                            \\-- ...
"""

from quicbed import Topology


def topology(
    pairs: int = 2, rate: str = "20mbit", delay: str = "10ms", loss: float = 0.0, queue_limit: int = 100
) -> Topology:
    topo = Topology("shared_bottleneck", description=f"{pairs} pairs over one {rate} bottleneck")
    left, right = topo.add_switch("left"), topo.add_switch("right")
    topo.add_link(left, right, name="bottleneck", rate=rate, delay=delay, loss=loss, queue_limit=queue_limit)
    for index in range(1, pairs + 1):
        topo.add_link(topo.add_host(f"client{index}"), left)
        topo.add_link(right, topo.add_host(f"server{index}"))
    return topo
