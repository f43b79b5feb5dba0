"""Analytical 802.11n/ac/ax MAC throughput of one saturated sender (pure functions).

Each channel access costs AIFS + backoff + PPDU + SIFS + (block) ACK; with A-MPDU up to 64
MPDUs (256 for HE; at most 65,535 bytes for HT, and a PPDU of at most aPPDUMaxTime =
5.484 ms) share that cost. All times in microseconds, sizes in bytes, rates in bit/s.

    >>> phy = Phy(mcs=7)                         # 802.11n, 5 GHz, 20 MHz, long GI, 1 stream
    >>> round(saturated_throughput(1472, phy).goodput / 1e6, 1)
    59.7
    >>> round(saturated_throughput(1472, phy, ampdu=False).goodput / 1e6, 1)
    30.8

The parameters follow IEEE 802.11-2016 and the way ns-3 (3.37) applies them: EDCA best
effort (AIFSN 3, CWmin 15), the HT-mixed / VHT / HE SU preambles, control responses at the highest
basic rate (6, 12, 24 Mbit/s) not above the data rate, a compressed block ACK (32 bytes),
A-MPDU subframes of delimiter + MPDU padded to 4 bytes, the 6 us signal extension at 2.4 GHz.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from quicbed.spec.link import VHT_EXCLUDED, guard_interval_ns

SLOT = 9.0
SIFS = {"5GHz": 16.0, "6GHz": 16.0, "2.4GHz": 10.0}
SIGNAL_EXTENSION = {"5GHz": 0.0, "6GHz": 0.0, "2.4GHz": 6.0}
AIFSN_BE = 3
CW_MIN = 15
PPDU_MAX_TIME = 5484.0  # aPPDUMaxTime for HT-mixed, VHT and HE PPDUs
MAX_AMPDU_BYTES = {"802.11n": 65535, "802.11ac": 1048575, "802.11ax": 6500631}
BA_WINDOW = 64  # MPDUs per block-ack agreement (HT/VHT)
HE_BA_WINDOW = 256  # HE (the ns3 backend's HE radios take 256)
LEGACY_PREAMBLE = 20.0  # L-STF 8 + L-LTF 8 + L-SIG 4
SYMBOL = 4.0
SYMBOL_SGI = 3.6
BASIC_RATES = (6e6, 12e6, 24e6)  # mandatory OFDM rates an AP advertises as basic
LEGACY_NDBPS = {6e6: 24, 9e6: 36, 12e6: 48, 18e6: 72, 24e6: 96, 36e6: 144, 48e6: 192, 54e6: 216}

QOS_DATA_HEADER = 26  # 24 + QoS control
FCS = 4
LLC_SNAP = 8
DELIMITER = 4
ACK_BYTES = 14
BLOCK_ACK_BYTES = 32  # compressed block ACK, 64-bit bitmap
HE_BLOCK_ACK_BYTES = 56  # compressed block ACK, 256-bit bitmap (a 256-MPDU agreement)
IP_UDP_HEADERS = 28
IP_TCP_HEADERS = 52  # with the timestamp option

#: data subcarriers per width (HT/VHT, and HE's 4x denser symbols); (bits per subcarrier, code
#: rate) per MCS: 0-9 for all, 10-11 (1024-QAM) for HE
DATA_SUBCARRIERS = {20: 52, 40: 108, 80: 234, 160: 468}
HE_DATA_SUBCARRIERS = {20: 234, 40: 468, 80: 980, 160: 1960}
MCS_TABLE = (
    (1, 1 / 2),
    (2, 1 / 2),
    (2, 3 / 4),
    (4, 1 / 2),
    (4, 3 / 4),
    (6, 2 / 3),
    (6, 3 / 4),
    (6, 5 / 6),
    (8, 3 / 4),
    (8, 5 / 6),
    (10, 3 / 4),
    (10, 5 / 6),
)
HE_SYMBOL = 12.8  # without its guard interval
HE_LTF = 8.0  # one HE-LTF symbol as ns-3 3.37 times it, whatever the guard interval (2x LTF + 1.6 us)


@dataclass(frozen=True)
class Phy:
    """What sets the duration of a PPDU. For 802.11n, mcs 8-31 mean 2-4 streams; for 802.11ac
    ``spatial_streams`` says them."""

    mcs: int = 7
    standard: str = "802.11n"
    band: str = "5GHz"
    width: int = 20
    guard_interval: str = "long"  # HE: "long" is 0.8 us, or "1.6us", "3.2us"
    spatial_streams: int = 1  # 802.11ac/ax

    @property
    def streams(self) -> int:
        return self.mcs // 8 + 1 if self.standard == "802.11n" else self.spatial_streams

    @property
    def base_mcs(self) -> int:
        return self.mcs % 8 if self.standard == "802.11n" else self.mcs

    @property
    def he(self) -> bool:
        return self.standard == "802.11ax"

    @property
    def symbol(self) -> float:
        if self.he:
            return HE_SYMBOL + guard_interval_ns(self.guard_interval) / 1e3
        return SYMBOL_SGI if self.guard_interval == "short" else SYMBOL


def ndbps(phy: Phy) -> float:
    """Data bits per OFDM symbol (all streams). HE's are not always whole (80 MHz MCS 11:
    8166.7); ns-3 keeps the fraction, and so does this model."""
    bits, rate = MCS_TABLE[phy.base_mcs]
    if phy.he:
        return HE_DATA_SUBCARRIERS[phy.width] * bits * rate * phy.streams
    if phy.base_mcs > 9:
        raise ValueError(f"MCS {phy.mcs} is HE (802.11ax) only")
    value = DATA_SUBCARRIERS[phy.width] * bits * rate * phy.streams
    excluded = phy.standard == "802.11ac" and (phy.width, phy.streams, phy.mcs) in VHT_EXCLUDED
    if excluded or abs(value - round(value)) > 1e-9:
        raise ValueError(f"MCS {phy.mcs} is not valid at {phy.width} MHz")
    return round(value)


def data_rate(phy: Phy) -> float:
    """PHY data rate in bit/s (e.g. 65e6 for HT MCS 7, 20 MHz, long GI)."""
    return ndbps(phy) / phy.symbol * 1e6


def preamble(phy: Phy) -> float:
    """Preamble and signal fields before the data symbols."""
    ltfs = {1: 1, 2: 2, 3: 4, 4: 4}[phy.streams]
    if phy.he:
        return LEGACY_PREAMBLE + 4 + 8 + 4 + HE_LTF * ltfs  # RL-SIG, HE-SIG-A, HE-STF, HE-LTFs
    if phy.standard == "802.11ac":
        return LEGACY_PREAMBLE + 8 + 4 + 4 * ltfs + 4  # VHT-SIG-A, VHT-STF, VHT-LTFs, VHT-SIG-B
    return LEGACY_PREAMBLE + 8 + 4 + 4 * ltfs  # HT-SIG, HT-STF, HT-LTFs


def ppdu_duration(psdu_bytes: int, phy: Phy) -> float:
    """Duration of an HT/VHT/HE SU PPDU carrying ``psdu_bytes`` (SERVICE 16 bits + 6 tail bits;
    HE with no packet extension, as ns-3 sends an SU PPDU)."""
    symbols = math.ceil((16 + 8 * psdu_bytes + 6) / ndbps(phy))
    data = symbols * phy.symbol
    if phy.guard_interval == "short" and not phy.he:
        data = SYMBOL * math.ceil(data / SYMBOL)  # TXTIME rounds to whole 4 us legacy symbols
    return preamble(phy) + data + SIGNAL_EXTENSION[phy.band]


def legacy_duration(frame_bytes: int, rate: float, band: str = "5GHz") -> float:
    """Duration of a non-HT OFDM frame (ACK, block ACK) at ``rate``."""
    symbols = math.ceil((16 + 8 * frame_bytes + 6) / LEGACY_NDBPS[rate])
    return LEGACY_PREAMBLE + symbols * SYMBOL + SIGNAL_EXTENSION[band]


def control_rate(phy: Phy) -> float:
    """Rate of the ACK/block ACK answering a data PPDU: highest basic rate <= data rate."""
    rate = data_rate(phy)
    return max((r for r in BASIC_RATES if r <= rate), default=BASIC_RATES[0])


def aifs(band: str = "5GHz", aifsn: int = AIFSN_BE) -> float:
    """AIFS[AC]; with aifsn=2 this is DIFS."""
    return SIFS[band] + aifsn * SLOT


def difs(band: str = "5GHz") -> float:
    return aifs(band, 2)


def mean_backoff(cw_min: int = CW_MIN) -> float:
    """Mean backoff of a lone sender (no collisions): CWmin / 2 slots."""
    return cw_min / 2 * SLOT


def ack_duration(phy: Phy) -> float:
    return legacy_duration(ACK_BYTES, control_rate(phy), phy.band)


def block_ack_duration(phy: Phy) -> float:
    return legacy_duration(HE_BLOCK_ACK_BYTES if phy.he else BLOCK_ACK_BYTES, control_rate(phy), phy.band)


def mpdu_bytes(ip_packet_bytes: int) -> int:
    """MPDU carrying one IP packet: QoS data header + LLC/SNAP + packet + FCS."""
    return QOS_DATA_HEADER + LLC_SNAP + ip_packet_bytes + FCS


def ampdu_bytes(mpdus: int, mpdu: int) -> int:
    """A-MPDU of ``mpdus`` equal MPDUs: each subframe delimiter + MPDU, padded to 4 bytes
    except the last."""
    subframe = DELIMITER + mpdu
    padded = subframe + (-subframe) % 4
    return (mpdus - 1) * padded + subframe


def max_mpdus_per_ampdu(
    mpdu: int,
    phy: Phy,
    max_bytes: int | None = None,
    max_mpdus: int | None = None,
    max_ppdu_time: float = PPDU_MAX_TIME,
) -> int:
    """Largest A-MPDU the sender may build: byte, block-ack window and PPDU time limits."""
    limit = min(max_bytes or MAX_AMPDU_BYTES[phy.standard], MAX_AMPDU_BYTES[phy.standard])
    max_mpdus = max_mpdus or (HE_BA_WINDOW if phy.he else BA_WINDOW)
    count = 1
    while (
        count < max_mpdus
        and ampdu_bytes(count + 1, mpdu) <= limit
        and ppdu_duration(ampdu_bytes(count + 1, mpdu), phy) <= max_ppdu_time
    ):
        count += 1
    return count


@dataclass(frozen=True)
class Exchange:
    """One channel access of a saturated sender and what it delivers."""

    mpdus: int
    payload_bytes: int  # application bytes per MPDU
    aifs: float
    backoff: float
    ppdu: float
    sifs: float
    ack: float

    @property
    def duration(self) -> float:
        return self.aifs + self.backoff + self.ppdu + self.sifs + self.ack

    @property
    def goodput(self) -> float:
        """Application bits per second."""
        return self.mpdus * self.payload_bytes * 8 / (self.duration * 1e-6)


def saturated_throughput(
    payload_bytes: int,
    phy: Phy,
    ampdu: bool = True,
    headers: int = IP_UDP_HEADERS,
    max_ampdu_bytes: int | None = None,
    mpdus: int | None = None,
) -> Exchange:
    """A saturated sender's exchange: ``payload_bytes`` of application data per packet
    (1472 for full-size UDP, 1448 for TCP with headers=IP_TCP_HEADERS). ``mpdus`` forces an
    A-MPDU size (e.g. a measured mean) instead of the largest one allowed."""
    mpdu = mpdu_bytes(payload_bytes + headers)
    if ampdu:
        count = mpdus or max_mpdus_per_ampdu(mpdu, phy, max_ampdu_bytes)
        ppdu = ppdu_duration(ampdu_bytes(count, mpdu), phy)
        answer = block_ack_duration(phy)
    else:
        count = 1
        ppdu = ppdu_duration(mpdu, phy)
        answer = ack_duration(phy)
    return Exchange(count, payload_bytes, aifs(phy.band), mean_backoff(), ppdu, SIFS[phy.band], answer)


def airtime_of(
    packets: int,
    payload_bytes: int,
    phy: Phy,
    mpdus_per_ampdu: float,
    headers: int = IP_UDP_HEADERS,
    include_access: bool = False,
) -> float:
    """Seconds of channel time ``packets`` occupy when sent in A-MPDUs of ``mpdus_per_ampdu``
    (mean) MPDUs: the data PPDUs and their (block) ACKs, which is what the ns3 backend's
    ``airtime_s`` counts; ``include_access`` adds AIFS, mean backoff and SIFS (a lower bound
    on the time a saturated sender needs). Shows how paced traffic (small aggregates) and
    bursty traffic (large ones) differ at the same rate."""
    per_ampdu = max(1, round(mpdus_per_ampdu))
    # a lone MPDU goes out as a normal frame with a normal ACK (HT); VHT would use an S-MPDU
    exchange = saturated_throughput(payload_bytes, phy, ampdu=per_ampdu > 1, headers=headers, mpdus=per_ampdu)
    busy = exchange.duration if include_access else exchange.ppdu + exchange.ack
    return packets / per_ampdu * busy * 1e-6
