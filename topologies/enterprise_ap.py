"""An enterprise WLAN (E5): one or two 802.11ac/n access points, many stations, a wired server.

sta1..staN ))) ap1 --+
                     sw --- server      (aps=2: stations alternate between ap1 and ap2)
sta... ))) ap2 ------+

One downlink TCP flow per station is the usual workload; the ns3 backend reports the A-MPDU
size per station (``mac_stats()["radios"]["ap1:wifi"]["per_receiver"]``). Stations sit on
a ring around their AP at ``distance`` metres (``spread`` > 0 varies the distance from
``distance`` to ``distance + spread`` across stations, which with minstrel varies their rates).
The APs' channels follow ``band``: 36 and 149 at 5 GHz, 37 and 101 at 6 GHz (802.11ax), 1 and
11 at 2.4 GHz; ``same_channel`` puts both on the first.
Mind the host: the ns-3 process handles roughly 60 Mbit/s of aggregated traffic per CPU core.
"""

from quicbed import Topology

#: the APs' primary channels by band (aps=2 alternates; 6 GHz: two 160 MHz channels apart)
CHANNELS = {"5GHz": (36, 149), "6GHz": (37, 101), "2.4GHz": (1, 11)}


def topology(
    stations: int = 10,
    aps: int = 1,
    standard: str = "802.11ac",
    band: str = "5GHz",
    width: int = 20,
    mcs: int = 7,
    rate_control: str = "constant",
    guard_interval: str = "long",
    ampdu: bool = True,
    same_channel: bool = False,
    distance: float = 5.0,
    spread: float = 0.0,
    wired_rate: str = "1gbit",
    wired_delay: str = "1ms",
    ap_spacing: float = 30.0,
    fastack: bool = False,
    spatial_streams: int = 0,
    ofdma: bool = False,
    ofdma_uplink: bool = False,
    obss_pd: float | None = None,
    queue: str | dict = "fifo",
) -> Topology:
    """``fastack``: the APs acknowledge TCP data to the server on their stations' behalf once
    their MAC has it, as Meraki's FastACK does (ns3; docs/ns3-backend.md). ``spatial_streams``:
    antennas and streams of every radio (0: one, or for 802.11n what the MCS index says).
    ``ofdma`` (802.11ax): the APs send to several stations at once in downlink OFDMA PPDUs;
    ``ofdma_uplink`` also: they trigger their stations' uplink OFDMA PPDUs.
    ``obss_pd`` (802.11ax, dBm): each AP gets its own BSS colour, and frames of another colour
    heard below this level are ignored (spatial reuse; docs/ns3-backend.md). ``queue``: the
    radios' transmit queue, as in wifi_ap.py ("fifo": the MAC queue alone, 500 frames shared by
    every station; ``{"kind": "fifo", "packets": 4000}`` a deeper one; "mac80211": an FQ-CoDel
    per station)."""
    topo = Topology("enterprise_ap", description=f"{stations} stations on {aps} {standard} AP(s), wired server")
    server = topo.add_host("server")
    radio = {
        "standard": standard,
        "band": band,
        "width": width,
        "guard_interval": guard_interval,
        "rate_control": rate_control,
        "mcs": mcs if rate_control == "constant" else None,
        "ampdu": ampdu,
        "spatial_streams": spatial_streams or None,
        "ofdma": "both" if ofdma_uplink else ofdma,
        "queue": None if queue == "fifo" else queue,
    }
    access_points = []
    for index in range(1, aps + 1):
        plan = CHANNELS.get(band, CHANNELS["5GHz"])
        channel = plan[0] if same_channel else plan[(index - 1) % len(plan)]
        reuse = {"bss_color": index, "obss_pd": obss_pd} if obss_pd is not None else {}
        access_points.append(
            topo.add_access_point(
                f"ap{index}",
                channel=channel,
                fastack=fastack,
                position=((index - 1) * ap_spacing, 0, 0),
                **radio,
                **reuse,
            )
        )
    if aps == 1:
        topo.add_link(access_points[0], server, name="wired", rate=wired_rate, delay=wired_delay)
    else:
        switch = topo.add_switch("sw")
        topo.add_link(switch, server, name="wired", rate=wired_rate, delay=wired_delay)
        for ap in access_points:
            topo.add_link(ap, switch, name=f"{ap.name}-uplink", rate=wired_rate)
    for index in range(1, stations + 1):
        ap = access_points[(index - 1) % aps]
        station = topo.add_station(f"sta{index}")
        share = (index - 1) / max(1, stations - 1)
        topo.add_wireless_link(station, ap, distance=distance + spread * share)
    return topo
