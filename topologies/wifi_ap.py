"""One 802.11n access point with a wired server behind it (E1, "lab testbed").

sta1 ))) ap1 --- server      (WiFi hop, then Gigabit Ethernet with a small delay)

With the ns3 backend the idle RTT client-server is about 2 x wired_delay + 0.5 ms (6.5 ms
with the defaults; E1 measured 6-10 ms). ``mcs`` is used with rate_control="constant";
rate_control="minstrel" picks rates itself (not for 802.11ax). ``spatial_streams`` (802.11n/ac/ax, 1-4; 0: one, or
for 802.11n what the MCS index says) sets both radios' antennas and streams. ``queue`` is
the radios' transmit queue (ns3): "fifo" (the MAC queue alone), "codel" or "fq_codel" (that
discipline in front of a driver-sized MAC queue) or "mac80211" (per-station FQ-CoDel with
airtime fairness; docs/ns3-backend.md, "Queue models"). ``ofdma`` (802.11ax): the AP sends to
several stations at once in downlink OFDMA PPDUs; ``ofdma_uplink`` also: it triggers their uplink
OFDMA PPDUs.
"""

from quicbed import Topology


def topology(
    stations: int = 1,
    band: str = "5GHz",
    channel: int = 36,
    width: int = 20,
    mcs: int = 7,
    ampdu: bool = True,
    ampdu_max_size: int = 0,
    amsdu: bool = False,
    guard_interval: str = "long",
    rate_control: str = "constant",
    standard: str = "802.11n",
    wired_rate: str = "1gbit",
    wired_delay: str = "3ms",
    distance: float = 5.0,
    spatial_streams: int = 0,
    queue: str | dict = "fifo",
    ofdma: bool = False,
    ofdma_uplink: bool = False,
) -> Topology:
    topo = Topology("wifi_ap", description=f"{stations} station(s) on one {standard} AP, server on Ethernet")
    radio = {
        "standard": standard,
        "band": band,
        "channel": channel,
        "width": width,
        "guard_interval": guard_interval,
        "rate_control": rate_control,
        "mcs": mcs if rate_control == "constant" else None,
        "ampdu": ampdu,
        "ampdu_max_size": ampdu_max_size or None,
        "amsdu": amsdu,
        "spatial_streams": spatial_streams or None,
        "queue": None if queue == "fifo" else queue,
        "ofdma": "both" if ofdma_uplink else ofdma,
    }
    ap = topo.add_access_point("ap1", position=(0, 0, 0), **radio)
    server = topo.add_host("server")
    topo.add_link(ap, server, name="wired", rate=wired_rate, delay=wired_delay)
    for index in range(1, stations + 1):
        station = topo.add_station(f"sta{index}", position=(distance, index - 1, 0))
        topo.add_wireless_link(station, ap, distance=distance)
    return topo
