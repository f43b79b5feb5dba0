"""Segments, automatic addresses, overrides and shortest-path routes."""

import pytest

from quicbed import Topology
from quicbed.backends.netns import NamespaceNetwork
from quicbed.errors import BackendError, SpecError


def test_switch_joins_its_links_into_one_subnet():
    topo = Topology()
    a, b, s = topo.add_host("a"), topo.add_host("b"), topo.add_switch("s1")
    topo.add_link(a, s)
    topo.add_link(s, b)
    resolved = topo.resolve()
    assert resolved.segments == {0: "10.0.0.0/24"}
    assert resolved.address("a") == "10.0.0.1" and resolved.address("b") == "10.0.0.2"
    assert resolved.routes == []


def test_routes_follow_the_shortest_path_and_overrides_win():
    topo = Topology()
    a, r1, r2, b = (topo.add_host(n) for n in ("a", "r1", "r2", "b"))
    topo.add_link(a, r1)
    topo.add_link(r1, r2)
    topo.add_link(r2, b)
    topo.add_link(a, r2, name="shortcut")
    resolved = topo.resolve()
    route = {(r.node, r.destination): r for r in resolved.routes}
    # b's subnet (r2-b) is two hops from a through the shortcut, three through r1
    assert route[("a", "10.0.2.0/24")].via == "10.0.3.2"
    assert route[("a", "10.0.2.0/24")].device == "eth1"
    topo.add_route(a, "10.0.2.0/24", via="10.0.0.2")
    resolved = topo.resolve()
    route = {(r.node, r.destination): r for r in resolved.routes}
    assert route[("a", "10.0.2.0/24")].via == "10.0.0.2"
    assert route[("a", "10.0.2.0/24")].device == "eth0"


def test_address_overrides_set_the_subnet_and_auto_addresses_avoid_them():
    topo = Topology()
    a, b, c, s = topo.add_host("a"), topo.add_host("b"), topo.add_host("c"), topo.add_switch("s")
    topo.add_link(a, s, addr1="192.168.7.1/24")
    topo.add_link(b, s)
    topo.add_link(c, s, addr1="192.168.7.2/24")
    resolved = topo.resolve()
    assert resolved.segments[0] == "192.168.7.0/24"
    assert resolved.address("b") == "192.168.7.3"


def test_address_outside_the_segment_subnet_is_rejected():
    topo = Topology()
    a, b, s = topo.add_host("a"), topo.add_host("b"), topo.add_switch("s")
    topo.add_link(a, s, addr1="10.1.0.1/24")
    topo.add_link(b, s, addr1="10.2.0.1/24")
    with pytest.raises(SpecError, match="not in 10.1.0.0/24"):
        topo.resolve()


def test_wireless_segments_and_mesh_addresses():
    topo = Topology()
    ap = topo.add_access_point("ap", band="2.4GHz", channel=6)
    server = topo.add_host("server")
    topo.add_link(ap, server)
    for name in ("sta1", "sta2"):
        topo.add_wireless_link(topo.add_station(name), ap)
    resolved = topo.resolve()
    assert {i.node: i.name for i in resolved.interfaces if i.address} == {
        "server": "eth0",
        "sta1": "wlan0",
        "sta2": "wlan0",
    }
    assert len(resolved.segments) == 1
    assert topo.links[1].radio.channel == 6  # inherited from the AP


def test_netns_backend_rejects_wireless_links_naming_the_backends_that_take_them():
    topo = Topology()
    ap, sta = topo.add_access_point("ap"), topo.add_station("sta")
    topo.add_wireless_link(sta, ap)
    with pytest.raises(BackendError) as caught:
        NamespaceNetwork(topo)
    assert "sta-ap" in str(caught.value)
    assert "--backend ns3" in str(caught.value) and "--backend mininet-wifi" in str(caught.value)


def test_to_dict_records_loss_models_with_their_mean():
    topo = Topology()
    a, b = topo.add_host("a"), topo.add_host("b")
    topo.add_link(a, b, delay="5ms", loss={"ge_mean": 5}, forward={"rate": "10mbit"})
    link = topo.to_dict()["links"][0]
    assert link["forward"]["rate"] == 10e6 and "rate" not in link["backward"]
    assert link["forward"]["loss"]["model"] == "GilbertElliott"
    assert link["forward"]["loss"]["mean"] == pytest.approx(0.05)
