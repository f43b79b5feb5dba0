import pytest

from quicbed.errors import SpecError
from quicbed.spec.units import format_rate, format_time, parse_percent, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(
    "text, bits",
    [("20mbit", 20e6), ("1.5 Mbit/s", 1.5e6), ("500kbit", 5e5), ("1gbit", 1e9), (64000, 64000.0), ("100bit", 100.0)],
)
def test_rates(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize(
    "text, fragment",
    [("20mbps", "ambiguous"), ("fast", "cannot read rate"), ("0mbit", "must be positive"), (True, "rate must be")],
)
def test_bad_rates(text, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_rate(text, "links[x].rate")


@pytest.mark.parametrize("text, seconds", [("10ms", 0.01), ("1.5s", 1.5), ("200us", 2e-4), (0, 0.0), ("0ms", 0.0)])
def test_times(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)


def test_time_without_unit_suggests_one():
    with pytest.raises(SpecError, match="'10ms'"):
        parse_time(10, "delay")
    with pytest.raises(SpecError, match="must not be negative"):
        parse_time("-1ms", "delay")


@pytest.mark.parametrize("text, size", [("10MB", 10_000_000), ("64KiB", 65536), (1500, 1500), ("1.5kb", 1500)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, fraction", [(2, 0.02), ("2%", 0.02), ("0.5 %", 0.005), (100, 1.0)])
def test_percentages(text, fraction):
    assert parse_percent(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text", [120, "-1%", "two"])
def test_bad_percentages(text):
    with pytest.raises(SpecError):
        parse_percent(text, "loss")


def test_formatting_round_trips_through_the_parsers():
    for rate in (1e3, 2.5e6, 20e6, 1e9):
        assert parse_rate(format_rate(rate)) == pytest.approx(rate)
    for seconds in (1e-4, 0.01, 0.0125, 2.0):
        assert parse_time(format_time(seconds)) == pytest.approx(seconds)


def test_a_bare_rate_too_small_to_mean_bits_asks_for_its_unit():
    """rate=10 is most likely Mininet's bw=10 (Mbit/s): refused with the unit to write."""
    with pytest.raises(SpecError, match=r"a rate of 10 is 10 bit/s: a bare number is bits per second.*'10mbit'"):
        parse_rate(10)
    # Mininet's 1 Gbit/s is bw=1000: refused too, not taken for 1 kbit/s
    with pytest.raises(SpecError, match=r"a rate of 1000 is 1000 bit/s.*'1000mbit' \(Mininet's bw=1000 is Mbit/s\)"):
        parse_rate(1000)
    assert parse_rate(10_000) == 10_000.0 and parse_rate(20e6) == 20e6 and parse_rate("10bit") == 10.0


def test_mininet_link_names_get_a_hint():
    from quicbed import Topology

    topo = Topology("t")
    a, b = topo.add_host("a"), topo.add_host("b")
    with pytest.raises(SpecError, match=r"links\[a-b\].bw: unknown link parameter 'bw' \(fix: quicbed calls it rate"):
        topo.add_link(a, b, bw=10)
    with pytest.raises(SpecError, match="quicbed calls it queue_limit"):
        topo.add_link(a, b, max_queue_size=100)
