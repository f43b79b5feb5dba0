"""Two hosts through one impaired link: the E4 "controlled netem testbed".

client ===bottleneck=== s1 --- server

The bottleneck sits between the switch and the client, so the server's own interface is
unshaped: a capture there shows departures as the server made them, and the packets the
bottleneck drops are missing only from the client's capture (docs/metrics.md).
"""

from quicbed import Topology


def topology(
    rate: str = "20mbit", delay: str = "10ms", loss: float = 0.0, queue_limit: int = 1000, burst: int | None = None
) -> Topology:
    """``burst``: the rate limit's token bucket in bytes (default ~1 ms of the rate)."""
    topo = Topology("dumbbell", description=f"client - switch - server, bottleneck {rate}, {delay} one way")
    client = topo.add_host("client")
    server = topo.add_host("server")
    switch = topo.add_switch("s1")
    topo.add_link(
        client, switch, name="bottleneck", rate=rate, delay=delay, loss=loss, queue_limit=queue_limit, burst=burst
    )
    topo.add_link(switch, server)
    return topo
