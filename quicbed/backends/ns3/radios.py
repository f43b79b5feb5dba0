"""The PHY/MAC settings of an ns-3 radio port in the channel program's description (pure).

A quicbed ``Radio`` becomes ns-3's channel number and primary 20 MHz index, aggregation
limits, guard interval, queue discipline and MAC queue length; ``common_radio`` refuses
links one ns-3 radio would have to serve with different settings.
"""

from __future__ import annotations

import math
from typing import Any

from quicbed.errors import BackendError
from quicbed.spec.link import HT_STANDARDS, Radio, WirelessLink

#: Largest A-MSDU per standard (ns-3 caps: 7935 for HT, 11398 for VHT and HE PPDUs)
MAX_AMSDU = {"802.11n": 7935, "802.11ac": 11398, "802.11ax": 11398}
#: Default largest A-MPDU per standard when the link does not set ampdu_max_size
DEFAULT_AMPDU = {"802.11n": 65535, "802.11ac": 1048575, "802.11ax": 6500631}
#: Centre channel numbers of the 40/80/160 MHz 5 GHz channels (ns-3's channel table)
WIDE_5GHZ = {
    40: (38, 46, 54, 62, 102, 110, 118, 126, 134, 142, 151, 159, 167, 175),
    80: (42, 58, 106, 122, 138, 155, 171),
    160: (50, 114, 163),
}
SPEED_OF_LIGHT = 299_792_458.0


def channel_frequency_mhz(band: str, channel: int) -> float:
    """Centre frequency of a 20 MHz channel."""
    if band == "2.4GHz":
        return 2484.0 if channel == 14 else 2407.0 + 5 * channel
    if band == "6GHz":
        return 5950.0 + 5 * channel
    return 5000.0 + 5 * channel


def ns3_channel(band: str, channel: int, width: int) -> tuple[int, int]:
    """(ns-3 channel number, primary20 index) for a primary 20 MHz channel and a width.

    ns-3 names wide channels by their centre (36 at 40 MHz is channel 38, primary index 0).
    """
    if width == 20:
        return channel, 0
    if band == "2.4GHz":
        if width != 40:
            raise BackendError(f"2.4 GHz channels are 20 or 40 MHz wide, not {width}")
        # HT40+ (secondary above) where possible, otherwise HT40-
        if channel + 4 <= 13:
            return channel + 2, 0
        return channel - 2, 1
    if band == "6GHz":
        # wide channels tile the band from channel 1: width/20 channels each, named by their centre
        size = width // 20
        start = channel - (channel - 1) % (4 * size)
        members = [start + 4 * k for k in range(size)]
        if members[-1] > 233:
            raise BackendError(
                f"6 GHz channel {channel} is not part of a {width} MHz channel "
                "(fix: a lower primary channel, e.g. 1, 5, 9, 13)"
            )
        return start + 2 * (size - 1), members.index(channel)
    for centre in WIDE_5GHZ.get(width, ()):
        lowest = centre - width // 10 + 2
        members = [lowest + 4 * k for k in range(width // 20)]
        if channel in members:
            return centre, members.index(channel)
    raise BackendError(
        f"5 GHz channel {channel} is not part of a {width} MHz channel "
        "(fix: pick a primary channel inside a wide channel, e.g. 36, 40, 44, 48)"
    )


def reference_loss_db(band: str) -> float:
    """Free-space loss at 1 m at the band's lowest common channel (ns-3 log-distance reference)."""
    frequency = {"2.4GHz": 2412e6, "6GHz": 5955e6}.get(band, 5180e6)
    return 20 * math.log10(4 * math.pi * frequency / SPEED_OF_LIGHT)


def radio_settings(radio: Radio) -> dict[str, Any]:
    """The PHY/MAC part of a radio port."""
    number, primary = ns3_channel(radio.band, radio.channel, radio.width)
    if radio.standard == "802.11ax" and radio.guard_interval_ns == 1600:
        # a station's HE capabilities say only whether it takes 0.8 us: ns-3 3.37 then sends
        # with 3.2 us to a station set to 1.6 us (measured: 73.1 Mbit/s at MCS 7, not 81.3)
        raise BackendError(
            "the ns3 backend cannot send HE PPDUs with a 1.6 us guard interval: ns-3 3.37 "
            "sends 3.2 us instead (fix: guard_interval='0.8us' or '3.2us')"
        )
    ht = radio.standard in HT_STANDARDS
    settings: dict[str, Any] = {
        "standard": radio.standard,
        "band": radio.band,
        "channel": radio.channel,
        "ns3_channel": number,
        "primary20": primary,
        "width": radio.width,
        "guard_interval_ns": radio.guard_interval_ns,
        "rate_control": radio.rate_control,
        "ampdu_max_bytes": (radio.ampdu_max_size or DEFAULT_AMPDU[radio.standard]) if ht and radio.ampdu else 0,
        "amsdu_max_bytes": MAX_AMSDU[radio.standard] if ht and radio.amsdu else 0,
        "spatial_streams": radio.streams,
    }
    if radio.mcs is not None:
        settings["mcs"] = radio.mcs
    if radio.ofdma:
        settings["ofdma"] = True
    if radio.ofdma == "both":
        settings["ofdma_uplink"] = True
    if radio.bss_color is not None:
        settings["bss_color"] = radio.bss_color
    if radio.obss_pd is not None:
        settings["obss_pd_dbm"] = float(radio.obss_pd)
    queue = radio.queue
    if queue is not None and queue.kind != "fifo":
        settings["queue"] = {
            "kind": queue.kind,
            "packets": queue.packets or DISCIPLINE_PACKETS[queue.kind],
            "target_ms": queue.target * 1e3,
            "interval_ms": queue.interval * 1e3,
        }
        if queue.kind == "fq_codel":
            settings["queue"].update(flows=queue.flows, quantum=queue.quantum or 0)
        if queue.kind == "mac80211":
            settings["queue"].update(
                flows=queue.flows,
                quantum=queue.quantum or MAC80211_QUANTUM,
                mac_packets=queue.mac_packets,
                weight_us=queue.weight * 1e6,
            )
    return settings


#: a queue discipline's limit when the radio's queue gives none (Linux's codel and fq_codel;
#: mac80211's per station)
DISCIPLINE_PACKETS = {"codel": 1000, "fq_codel": 10240, "mac80211": 8192}
#: bytes a flow of a mac80211 station queue sends per round (mac80211's fq quantum)
MAC80211_QUANTUM = 300


def mac_queue_packets(radio: Radio, default: int) -> int:
    """The MAC queue's length: a FIFO's own, the driver's under a discipline, else ``default``."""
    queue = radio.queue
    if queue is None:
        return default
    if queue.kind == "fifo":
        return default if queue.packets is None else queue.packets
    return queue.mac_packets


#: radio fields one radio must use for all its peers (the radio has one setting for them)
PER_RADIO_FIELDS = (
    "mcs",
    "rate_control",
    "ampdu",
    "ampdu_max_size",
    "amsdu",
    "spatial_streams",
    "queue",
    "ofdma",
    "bss_color",
    "obss_pd",
)


def _number_first(value: Any) -> tuple[int, Any]:
    """A sort key for a setting's values: numbers in order, then anything else by its text."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return (0, value) if number else (1, str(value))


def common_radio(name: str, links: list[WirelessLink]) -> Radio:
    """The settings a radio serving ``links`` transmits with; refuses conflicting ones."""
    first = links[0].radio
    # (an HE radio has one guard interval; HT/VHT radios support a short one per peer)
    for fld in PER_RADIO_FIELDS + (("guard_interval_ns",) if first.standard == "802.11ax" else ()):
        values = {link.radio.streams if fld == "spatial_streams" else getattr(link.radio, fld) for link in links}
        if len(values) > 1:
            raise BackendError(
                f"{name} serves links {', '.join(each.name for each in links)} with different "
                f"{fld.removesuffix('_ns')} "
                f"({', '.join(map(str, sorted(values, key=_number_first)))}); one ns-3 radio transmits with one "
                f"setting (fix: give these links the same {fld.removesuffix('_ns')}, or use rate_control='minstrel' "
                "instead of per-link MCS)"
            )
    return first
