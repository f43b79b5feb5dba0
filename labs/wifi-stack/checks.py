"""Checks of the lab wifi-stack: the access point's cell, then the mesh chain, then the answers.
Both topologies are built on Mininet-WiFi (the microVM where this kernel has no mac80211_hwsim)."""

from __future__ import annotations

from quicbed.labs import Verdict, check
from quicbed.spec.link import WirelessLink
from quicbed.spec.node import AccessPoint, MeshPoint, Station

STATIONS = ("sta1", "sta2")
MESH = ("mp1", "mp2", "mp3")


def _wireless(topo):
    return [link for link in topo.links if isinstance(link, WirelessLink)]


@check(
    "ap.py: ap1 with sta1 and sta2, and a server",
    hint="topo.add_wireless_link(topo.add_station('sta1'), ap)",
    expected="access point ap1; stations sta1, sta2 linked to it; host server",
)
def ap_topology(session):
    topo = session.topology("ap.py")
    linked = {end for link in _wireless(topo) if "ap1" in link.ends() for end in link.ends()} - {"ap1"}
    passed = (
        isinstance(topo.nodes.get("ap1"), AccessPoint)
        and "server" in topo.nodes
        and all(isinstance(topo.nodes.get(name), Station) and name in linked for name in STATIONS)
    )
    return Verdict(
        passed,
        ", ".join(f"{name} ({node.kind})" for name, node in topo.nodes.items())
        + f"; on ap1: {', '.join(sorted(linked)) or 'nothing'}",
    )


@check(
    "both stations are associated with ap1",
    needs=["ap_topology"],
    expected="'iw dev STA-wlan0 link': Connected to ap1's address, on 2437 MHz (channel 6)",
    hint="a station needs a wireless link to the AP; is ap1 on channel 6?",
)
def associated(session):
    network = session.network("ap.py")
    bssid = network.mn_node("ap1").wintfs[0].mac
    seen, passed = [], True
    for name in STATIONS:
        link = network.node(name).run(["iw", "dev", network.device(name, "wlan0"), "link"], check=False).stdout
        passed = passed and f"Connected to {bssid}" in link and "2437" in link
        seen.append(f"{name}: {(link.strip().splitlines() or ['no link'])[0]}")
    return Verdict(passed, "; ".join(seen))


@check(
    "hostapd logged each association",
    needs=["associated"],
    expected="AP-STA-CONNECTED with sta1's and sta2's addresses in hostapd's log",
    hint="hostapd-ap1.log: look for the station's MAC address",
)
def hostapd_log(session):
    network = session.network("ap.py")
    log = network.hostapd_log("ap1").read_text()
    macs = {name: network.mn_node(name).wintfs[0].mac for name in STATIONS}
    found = [name for name, mac in macs.items() if f"AP-STA-CONNECTED {mac}" in log]
    return Verdict(
        len(found) == len(STATIONS),
        f"AP-STA-CONNECTED for {', '.join(found) or 'no station'} "
        f"({log.count('AP-STA-CONNECTED')} in {len(log.splitlines())} lines)",
    )


@check(
    "ap1's station dump lists both stations",
    needs=["associated"],
    expected="'iw dev ap1-wlan1 station dump': a 'Station' entry per station",
    hint="the AP's radio is in the root namespace: iw dev ap1-wlan1 station dump",
)
def station_dump(session):
    network = session.network("ap.py")
    dump = network.ap_run("ap1", ["iw", "dev", network.mn_node("ap1").wintfs[0].name, "station", "dump"]).stdout
    listed = [name for name in STATIONS if f"Station {network.mn_node(name).wintfs[0].mac}" in dump]
    session.measured["stations_in_dump"] = dump.count("Station ")
    return Verdict(len(listed) == len(STATIONS), f"{dump.count('Station ')} stations: {', '.join(listed)}")


@check(
    "sta1 reaches the server and sta2",
    needs=["associated"],
    expected="ping answered, no loss",
    hint="the server must be on a cable to ap1",
)
def stations_reach(session):
    network = session.network("ap.py")
    results = {target: session.ping(network, "sta1", target, count=5, interval=0.2) for target in ("server", "sta2")}
    return Verdict(
        all(r.rtts and r.loss == 0 for r in results.values()),
        "; ".join(f"{target}: {len(r.rtts)}/5 replies" for target, r in results.items()),
    )


@check(
    "mesh.py: mp1, mp2, mp3 in a chain on one channel",
    expected="mesh points mp1, mp2, mp3; links mp1-mp2 and mp2-mp3 only; one channel",
    hint="topo.add_wireless_link(mp2, mp3, standard='802.11g', band='2.4GHz', channel=1, mcs=None)",
)
def mesh_topology(session):
    topo = session.topology("mesh.py")
    links = {frozenset(link.ends()) for link in _wireless(topo)}
    channels = {link.radio.channel for link in _wireless(topo)}
    passed = (
        all(isinstance(topo.nodes.get(name), MeshPoint) for name in MESH)
        and links == {frozenset(("mp1", "mp2")), frozenset(("mp2", "mp3"))}
        and len(channels) == 1
    )
    return Verdict(passed, f"links {sorted('-'.join(sorted(link)) for link in links)}, channels {sorted(channels)}")


@check(
    "mp1 reaches mp3 through mp2",
    needs=["mesh_topology"],
    expected="ping mp1 -> mp3 answered; mp1's mesh path to mp3 has next hop mp2",
    hint="only declared links peer: mp1-mp3 has none, so HWMP must find the path via mp2",
)
def mesh_forwards(session):
    network = session.network("mesh.py")
    reply = session.ping(network, "mp1", "mp3", count=5, interval=0.2)
    macs = {name: network.mesh_macs[(name, 0)] for name in MESH}
    mpath = network.node("mp1").run(["iw", "dev", network.device("mp1", "mesh0"), "mpath", "dump"], check=False).stdout
    route = next((line.split() for line in mpath.splitlines() if line.startswith(macs["mp3"])), None)
    next_hop = next((name for name, mac in macs.items() if route and route[1] == mac), None)
    session.measured["mp1_next_hop_to_mp3"] = next_hop
    return Verdict(
        bool(reply.rtts) and next_hop == "mp2", f"{len(reply.rtts)}/5 replies; next hop to mp3: {next_hop or 'no path'}"
    )


@check(
    "answers.yaml: Q2 and Q3",
    needs=["station_dump", "mesh_forwards"],
    expected="what the checker saw in the station dump and the mesh path",
    hint="Q2: count the 'Station' lines of ap1's station dump; Q3: the next hop column of mp1's mpath dump",
)
def answers(session):
    stations = session.answer("stations_in_dump")
    next_hop = str(session.answers().get("mp1_next_hop_to_mp3") or "").strip()
    measured = session.measured
    return Verdict(
        stations == measured["stations_in_dump"] and next_hop == measured["mp1_next_hop_to_mp3"],
        f"you: {stations:g} stations, next hop {next_hop or '?'}; checker: "
        f"{measured['stations_in_dump']}, {measured['mp1_next_hop_to_mp3']}",
    )
