"""A client behind a cellular-like link whose capacity follows delivery traces (E3).

client ===cell=== s1 --- server

The cell link replays a downlink trace towards the client and an uplink trace from it
(Mahimahi's format, docs/traces.md), each behind a drop-tail queue, plus a base one-way
delay. ``trace`` names a pair: "step-drop" means traces/step-drop.down and step-drop.up;
``downlink``/``uplink`` name the two files separately instead. Only the ns3 backend
replays traces.
"""

from quicbed import Topology


def topology(
    trace: str = "step-drop",
    delay: str = "20ms",
    queue_limit: int = 200,
    downlink: str | None = None,
    uplink: str | None = None,
) -> Topology:
    """``queue_limit``: packets waiting for the trace, per direction (200: about 2.5 BDPs at
    24 Mbit/s and the default 40 ms of base RTT)."""
    down, up = downlink or f"{trace}.down", uplink or f"{trace}.up"
    topo = Topology("cellular", description=f"client - cell ({down} / {up}, {delay} one way) - switch - server")
    client = topo.add_host("client")
    server = topo.add_host("server")
    switch = topo.add_switch("s1")
    topo.add_link(
        client,
        switch,
        name="cell",
        delay=delay,
        queue_limit=queue_limit,
        forward={"trace": up},
        backward={"trace": down},
    )
    topo.add_link(switch, server)
    return topo
