"""Loss models: the E4 Gilbert-Elliott derivation and the analytical values the link bench uses."""

import random

import pytest

from quicbed.errors import SpecError
from quicbed.spec.loss import Bernoulli, GilbertElliott, parse_loss


@pytest.mark.parametrize("mean", [0.02, 0.05, 0.10, 0.15, 0.20, 0.25])
def test_ge_from_mean_loss_follows_the_e4_method(mean):
    ge = GilbertElliott.from_mean_loss(mean)
    # gamma = 0.99875, beta = 0.875, h = 0.5  =>  p = 0.00125, r = 0.125, 1-h = 0.5
    assert ge.p == pytest.approx(0.00125)
    assert ge.r == pytest.approx(0.125)
    assert ge.loss_bad == pytest.approx(0.5)
    pi_bad = 0.00125 / 0.12625
    assert ge.loss_good == pytest.approx((mean - 0.5 * pi_bad) / (1 - pi_bad))
    assert ge.mean_loss == pytest.approx(mean)


def test_ge_mean_below_the_bad_state_floor_is_rejected_with_the_reachable_range():
    with pytest.raises(SpecError, match=r"between 0.495 % and 99.5 %"):
        GilbertElliott.from_mean_loss(0.001)


def _simulate(ge: GilbertElliott, packets: int, seed: int = 7) -> tuple[float, float]:
    rng = random.Random(seed)
    bad = rng.random() < ge.pi_bad
    lost = runs = 0
    previous_lost = False
    for _ in range(packets):
        is_lost = rng.random() < (ge.loss_bad if bad else ge.loss_good)
        lost += is_lost
        runs += is_lost and not previous_lost
        previous_lost = is_lost
        bad = (rng.random() >= ge.r) if bad else (rng.random() < ge.p)
    return lost / packets, lost / runs


@pytest.mark.parametrize(
    "ge",
    [GilbertElliott(0.01, 0.3, 1.0, 0.0), GilbertElliott(0.05, 0.2, 0.8, 0.01), GilbertElliott.from_mean_loss(0.05)],
)
def test_analytical_mean_and_burst_length_match_a_simulated_chain(ge):
    loss, burst = _simulate(ge, 400_000)
    assert loss == pytest.approx(ge.mean_loss, rel=0.06)
    assert burst == pytest.approx(ge.mean_burst_length, rel=0.06)


def test_simple_gilbert_burst_length_is_one_over_r():
    assert GilbertElliott(0.01, 0.25, 1.0, 0.0).mean_burst_length == pytest.approx(4.0)
    assert Bernoulli(0.2).mean_burst_length == pytest.approx(1.25)


def test_parse_loss_forms():
    assert parse_loss(2) == Bernoulli(0.02)
    assert parse_loss("0") is None
    assert parse_loss({"ge_mean": 5}) == GilbertElliott.from_mean_loss(0.05)
    ge = parse_loss({"gemodel": {"p": 1, "r": 30, "loss_bad": 100, "loss_good": 0}})
    assert ge == GilbertElliott(0.01, 0.3, 1.0, 0.0)
    with pytest.raises(SpecError, match="unknown gemodel parameter"):
        parse_loss({"gemodel": {"p": 1, "q": 2}}, "links[x].loss")
    with pytest.raises(SpecError, match="cannot read loss model"):
        parse_loss({"weird": 1})
