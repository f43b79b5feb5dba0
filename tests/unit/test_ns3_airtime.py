"""The analytical 802.11n/ac MAC model (quicbed/backends/ns3/airtime.py)."""

from __future__ import annotations

import pytest

from quicbed.backends.ns3 import airtime
from quicbed.backends.ns3.airtime import Phy


@pytest.mark.parametrize(
    "phy, rate",
    [
        *((Phy(mcs=m), r) for m, r in enumerate((6.5, 13, 19.5, 26, 39, 52, 58.5, 65))),
        (Phy(mcs=7, guard_interval="short"), 72.2),
        (Phy(mcs=7, width=40), 135),
        (Phy(mcs=7, width=40, guard_interval="short"), 150),
        (Phy(mcs=15), 130),
        (Phy(mcs=31, width=40), 540),
        (Phy(mcs=9, standard="802.11ac", width=80), 390),
        (Phy(mcs=9, standard="802.11ac", width=80, guard_interval="short"), 433.3),
        (Phy(mcs=8, standard="802.11ac", width=20), 78),
        (Phy(mcs=9, standard="802.11ac", width=160), 780),
    ],
)
def test_phy_rates_match_the_standards_tables(phy, rate):
    assert airtime.data_rate(phy) / 1e6 == pytest.approx(rate, abs=0.05)


def test_vht_mcs9_is_not_valid_at_20_mhz_with_one_stream():
    with pytest.raises(ValueError, match="not valid"):
        airtime.data_rate(Phy(mcs=9, standard="802.11ac", width=20))


def test_fixed_costs():
    assert airtime.SIFS["5GHz"] == 16 and airtime.SLOT == 9
    assert airtime.aifs() == 43 and airtime.difs() == 34 and airtime.difs("2.4GHz") == 28
    assert airtime.mean_backoff() == 67.5
    assert airtime.preamble(Phy()) == 36  # L-STF, L-LTF, L-SIG, HT-SIG, HT-STF, one HT-LTF
    assert airtime.preamble(Phy(mcs=15)) == 40
    assert airtime.preamble(Phy(standard="802.11ac")) == 40
    assert airtime.block_ack_duration(Phy()) == 32  # 32 bytes at 24 Mbit/s
    assert airtime.ack_duration(Phy()) == 28  # 14 bytes at 24 Mbit/s
    assert airtime.block_ack_duration(Phy(band="2.4GHz")) == 38  # + 6 us signal extension
    assert airtime.ack_duration(Phy(mcs=0)) == 44  # 6 Mbit/s answers MCS 0


@pytest.mark.parametrize("mcs, rate", [(0, 6e6), (1, 12e6), (2, 12e6), (3, 24e6), (7, 24e6)])
def test_control_responses_use_the_highest_basic_rate_not_above_the_data_rate(mcs, rate):
    assert airtime.control_rate(Phy(mcs=mcs)) == rate


def test_frame_sizes_and_ppdu_durations():
    mpdu = airtime.mpdu_bytes(1500)
    assert mpdu == 1538  # QoS header 26 + LLC/SNAP 8 + IP packet + FCS 4
    assert airtime.ampdu_bytes(1, mpdu) == 1542
    assert airtime.ampdu_bytes(2, mpdu) == 1544 + 1542  # padded to 4 bytes except the last
    assert airtime.ppdu_duration(mpdu, Phy()) == 36 + 48 * 4
    short = airtime.ppdu_duration(mpdu, Phy(guard_interval="short"))
    assert (short - 36) % 4 == 0 and short < airtime.ppdu_duration(mpdu, Phy())
    assert airtime.ppdu_duration(mpdu, Phy(band="2.4GHz")) == 36 + 48 * 4 + 6
    assert airtime.legacy_duration(14, 24e6) == 28


def test_aggregate_size_limits():
    mpdu = airtime.mpdu_bytes(1500)
    assert airtime.max_mpdus_per_ampdu(mpdu, Phy()) == 28  # the 5.484 ms PPDU limit binds
    assert airtime.ppdu_duration(airtime.ampdu_bytes(28, mpdu), Phy()) <= airtime.PPDU_MAX_TIME
    assert airtime.ppdu_duration(airtime.ampdu_bytes(29, mpdu), Phy()) > airtime.PPDU_MAX_TIME
    assert airtime.max_mpdus_per_ampdu(mpdu, Phy(width=40)) == 42  # 65,535 bytes bind
    assert airtime.max_mpdus_per_ampdu(mpdu, Phy(), max_bytes=8000) == 5
    assert airtime.max_mpdus_per_ampdu(mpdu, Phy(mcs=0)) == 2
    assert airtime.max_mpdus_per_ampdu(mpdu, Phy(mcs=9, standard="802.11ac", width=80)) == 64  # BA window


def test_saturated_throughput():
    phy = Phy(mcs=7)
    with_ampdu = airtime.saturated_throughput(1472, phy)
    without = airtime.saturated_throughput(1472, phy, ampdu=False)
    assert with_ampdu.mpdus == 28
    assert with_ampdu.duration == pytest.approx(43 + 67.5 + with_ampdu.ppdu + 16 + 32)
    assert with_ampdu.goodput / 1e6 == pytest.approx(59.7, abs=0.05)
    assert without.goodput / 1e6 == pytest.approx(30.8, abs=0.05)
    # aggregation matters more the faster the PHY: fixed costs dominate short PPDUs
    gains = [
        airtime.saturated_throughput(1472, Phy(mcs=m)).goodput
        / airtime.saturated_throughput(1472, Phy(mcs=m), ampdu=False).goodput
        for m in range(8)
    ]
    assert gains == sorted(gains) and gains[0] < 1.1 and gains[-1] > 1.9
    goodputs = [airtime.saturated_throughput(1472, Phy(mcs=m)).goodput for m in range(8)]
    assert goodputs == sorted(goodputs)
    assert all(g < airtime.data_rate(Phy(mcs=m)) for m, g in enumerate(goodputs))
    tcp = airtime.saturated_throughput(1448, phy, headers=airtime.IP_TCP_HEADERS)
    assert tcp.goodput < with_ampdu.goodput
    assert airtime.saturated_throughput(1472, phy, mpdus=10).goodput < with_ampdu.goodput


def test_paced_traffic_occupies_more_airtime_than_bursty_traffic():
    phy = Phy(mcs=7)
    packets = 20e6 / 8 / 1472  # one second at 20 Mbit/s
    paced = airtime.airtime_of(packets, 1472, phy, 1.0)
    bursty = airtime.airtime_of(packets, 1472, phy, 16.0)
    assert paced == pytest.approx(0.435, abs=0.005)
    assert bursty == pytest.approx(0.33, abs=0.01)
    assert airtime.airtime_of(packets, 1472, phy, 16.0, include_access=True) > bursty


@pytest.mark.parametrize(
    "phy, rate",
    [
        (Phy(mcs=9, standard="802.11ac", width=80, spatial_streams=3), 1170),
        (Phy(mcs=9, standard="802.11ac", width=80, spatial_streams=3, guard_interval="short"), 1300),
        (Phy(mcs=9, standard="802.11ac", width=20, spatial_streams=3), 260),
        (Phy(mcs=7, standard="802.11ac", width=20, spatial_streams=2), 130),
    ],
)
def test_vht_rates_with_several_streams(phy, rate):
    assert airtime.data_rate(phy) / 1e6 == pytest.approx(rate, abs=0.05)
    assert airtime.preamble(phy) == 36 + 4 * {1: 1, 2: 2, 3: 4, 4: 4}[phy.spatial_streams]


def test_the_vht_rates_the_standard_leaves_out_are_refused():
    """The spec's list (quicbed.spec.link.VHT_EXCLUDED, which the topology check uses) is what
    the model refuses; the 20 MHz MCS 9 ones also fail its own rule (whole data bits per symbol)."""
    from quicbed.spec.link import MAX_STREAMS, VHT_EXCLUDED

    refused, uneven = set(), set()
    for width in (20, 40, 80, 160):
        for streams in range(1, MAX_STREAMS + 1):
            for mcs in range(10):
                phy = Phy(mcs=mcs, standard="802.11ac", width=width, spatial_streams=streams)
                try:
                    airtime.data_rate(phy)
                except ValueError:
                    refused.add((width, streams, mcs))
                bits, rate = airtime.MCS_TABLE[mcs]
                if (airtime.DATA_SUBCARRIERS[width] * bits * rate * streams) % 1:
                    uneven.add((width, streams, mcs))
    assert refused == VHT_EXCLUDED
    assert uneven == {(20, 1, 9), (20, 2, 9), (20, 4, 9)}


# -- 802.11ax (HE) ---------------------------------------------------------------------------
# durations and rates as ns-3 3.37 computes them (WifiPhy::CalculateTxDuration and
# WifiMode::GetDataRate for HE SU PPDUs), which follow IEEE 802.11ax-2021 27.4.3 with one
# 8 us HE-LTF per stream (1, 2, 4, 4 for 1-4 streams) and no packet extension


def _he(mcs: int = 7, **settings) -> Phy:
    return Phy(mcs=mcs, standard="802.11ax", **settings)


@pytest.mark.parametrize(
    "phy, rate",
    [
        (_he(0), 8.6),
        (_he(7), 86.0),
        (_he(11), 143.4),
        (_he(11, width=80), 600.5),
        (_he(11, width=160), 1201.0),
        (_he(7, guard_interval="1.6us", spatial_streams=2), 162.5),
        (_he(0, guard_interval="3.2us"), 7.3),
        (_he(11, width=80, spatial_streams=4), 2402.0),
    ],
)
def test_he_rates_match_the_standards_tables(phy, rate):
    assert airtime.data_rate(phy) / 1e6 == pytest.approx(rate, abs=0.05)


@pytest.mark.parametrize(
    "phy, psdu_bytes, microseconds",
    [
        (_he(7), 1538, 193.6),
        (_he(11), 100_000, 5633.6),
        (_he(11, width=80), 1538, 71.2),
        (_he(0, guard_interval="3.2us"), 100, 172.0),
        (_he(7, guard_interval="1.6us", spatial_streams=2), 5000, 311.2),
    ],
)
def test_he_ppdu_durations_are_ns3s(phy, psdu_bytes, microseconds):
    assert airtime.ppdu_duration(psdu_bytes, phy) == pytest.approx(microseconds, abs=1e-6)


def test_he_aggregates_reach_past_64_mpdus_where_the_rate_allows():
    mpdu = airtime.mpdu_bytes(1500)
    assert airtime.preamble(_he()) == 44  # L-STF, L-LTF, L-SIG, RL-SIG, HE-SIG-A, HE-STF, one HE-LTF
    assert airtime.max_mpdus_per_ampdu(mpdu, _he(7)) == 37  # the 5.484 ms PPDU limit binds
    assert airtime.max_mpdus_per_ampdu(mpdu, _he(11, width=40)) == 125
    assert airtime.max_mpdus_per_ampdu(mpdu, _he(11, width=80)) == 256  # the block-ack window binds
    assert airtime.block_ack_duration(_he()) == 40  # 56 bytes (256-bit bitmap) at 24 Mbit/s
    assert airtime.saturated_throughput(1472, _he(11, width=40)).goodput / 1e6 == pytest.approx(263.0, abs=0.1)


def test_mcs_10_and_11_are_he_only():
    with pytest.raises(ValueError, match="HE"):
        airtime.data_rate(Phy(mcs=10, standard="802.11ac", width=80))
