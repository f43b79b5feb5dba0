"""A typical slip: 100mbit where the handout asks for 10mbit."""

from quicbed import Topology


def topology() -> Topology:
    topo = Topology("first")
    h1, h2, s1 = topo.add_host("h1"), topo.add_host("h2"), topo.add_switch("s1")
    topo.add_link(h1, s1)
    topo.add_link(s1, h2, name="shaped", rate="100mbit", delay="10ms")
    return topo
