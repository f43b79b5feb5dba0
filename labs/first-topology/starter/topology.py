"""Lab first-topology: two hosts, one switch, one shaped link.

    h1 ---- s1 ====shaped==== h2
               10 Mbit/s, 10 ms one way

Fill in the TODOs, then look at what you built:
    quicbed topo show topology.py
    quicbed topo up topology.py      (prints a shell command for each node; Ctrl-C ends)
"""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("first", description="two hosts, a switch and a shaped link")
    h1 = topo.add_host("h1")
    # TODO: a second host, h2, and a switch, s1 (topo.add_host, topo.add_switch)
    # TODO: a link from h1 to s1, without shaping (topo.add_link(h1, s1))
    # TODO: a link from s1 to h2 named "shaped", 10 Mbit/s and 10 ms one way
    #       (topo.add_link(..., name="shaped", rate="10mbit", delay="10ms"))
    return topo
