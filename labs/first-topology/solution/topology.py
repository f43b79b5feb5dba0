"""Lab first-topology, reference solution.

h1 ---- s1 ====shaped==== h2
           10 Mbit/s, 10 ms one way
"""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("first", description="two hosts, a switch and a shaped link")
    h1 = topo.add_host("h1")
    h2 = topo.add_host("h2")
    s1 = topo.add_switch("s1")
    topo.add_link(h1, s1)
    topo.add_link(s1, h2, name="shaped", rate="10mbit", delay="10ms")
    return topo
