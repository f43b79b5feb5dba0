"""Packet-loss models for wired links: Bernoulli and Gilbert-Elliott (netem's ``gemodel``).

Gilbert-Elliott is a two-state Markov chain (Good, Bad) with transition probabilities
p (Good->Bad) and r (Bad->Good) and a loss probability per state: 1-k in Good, 1-h in Bad.
``GilbertElliott.from_mean_loss`` derives the four parameters from a target mean loss the
way the controlled-testbed studies did (E4, docs/studies.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from quicbed.errors import SpecError

# Chain used by the E4 studies: self-transition probabilities of Good and Bad, and h.
E4_GAMMA = 0.99875
E4_BETA = 0.875
E4_H = 0.5


def _check_probability(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"expected a probability (0..1), got {value!r}", field=field)
    if not 0.0 <= value <= 1.0:
        raise SpecError(
            f"probability must be within 0..1, got {value!r}", field=field, fix="give a fraction, e.g. 0.02 for 2 %"
        )
    return float(value)


@dataclass(frozen=True)
class Bernoulli:
    """Independent loss of each packet with probability ``probability`` (a fraction)."""

    probability: float

    def __post_init__(self) -> None:
        _check_probability(self.probability, "loss")

    @property
    def mean_loss(self) -> float:
        return self.probability

    @property
    def mean_burst_length(self) -> float:
        """Mean length of a run of consecutive losses: 1 / (1 - p)."""
        return 1.0 / (1.0 - self.probability) if self.probability < 1 else float("inf")

    def describe(self) -> str:
        return f"Bernoulli {self.probability * 100:g} %"


@dataclass(frozen=True)
class GilbertElliott:
    """netem ``loss gemodel p r 1-h 1-k``; all four are fractions (0..1)."""

    p: float
    r: float
    loss_bad: float = 1.0  # 1-h
    loss_good: float = 0.0  # 1-k

    def __post_init__(self) -> None:
        for name in ("p", "r", "loss_bad", "loss_good"):
            _check_probability(getattr(self, name), f"loss.{name}")
        if self.p + self.r == 0:
            raise SpecError(
                "p and r cannot both be 0 (the chain never moves)",
                field="loss",
                fix="give a positive p (Good->Bad) and r (Bad->Good)",
            )

    @classmethod
    def from_mean_loss(
        cls, mean_loss: float, gamma: float = E4_GAMMA, beta: float = E4_BETA, h: float = E4_H
    ) -> "GilbertElliott":
        """Solve 1-k from ``mean_loss = (1-k) piG + (1-h) piB`` with p = 1-gamma, r = 1-beta."""
        _check_probability(mean_loss, "loss.mean")
        p, r = 1.0 - gamma, 1.0 - beta
        pi_bad = p / (p + r)
        pi_good = r / (p + r)
        loss_bad = 1.0 - h
        loss_good = (mean_loss - loss_bad * pi_bad) / pi_good
        if not 0.0 <= loss_good <= 1.0:
            lowest = loss_bad * pi_bad
            highest = loss_bad * pi_bad + pi_good
            raise SpecError(
                f"a mean loss of {mean_loss * 100:g} % cannot be reached with gamma={gamma}, beta={beta}, h={h}",
                field="loss.mean",
                fix=f"choose a mean loss between {lowest * 100:.3g} % and {highest * 100:.3g} %, "
                "or give p, r, 1-h, 1-k directly",
            )
        return cls(p=p, r=r, loss_bad=loss_bad, loss_good=loss_good)

    @property
    def pi_bad(self) -> float:
        return self.p / (self.p + self.r)

    @property
    def pi_good(self) -> float:
        return self.r / (self.p + self.r)

    @property
    def mean_loss(self) -> float:
        return self.loss_good * self.pi_good + self.loss_bad * self.pi_bad

    @property
    def mean_burst_length(self) -> float:
        """Mean number of consecutive losses in a loss run (stationary chain).

        A run starts where a delivered packet is followed by a lost one:
        P(start) = sum over s, s' of pi_s (1 - l_s) T(s, s') l_s'; mean run = P(loss) / P(start).
        """
        pi = {"G": self.pi_good, "B": self.pi_bad}
        loss = {"G": self.loss_good, "B": self.loss_bad}
        move = {("G", "G"): 1 - self.p, ("G", "B"): self.p, ("B", "B"): 1 - self.r, ("B", "G"): self.r}
        starts = sum(pi[s] * (1 - loss[s]) * move[s, t] * loss[t] for s in pi for t in pi)
        return self.mean_loss / starts if starts > 0 else float("inf")

    def describe(self) -> str:
        return (
            f"Gilbert-Elliott p={self.p:.5g} r={self.r:.5g} 1-h={self.loss_bad:.5g} "
            f"1-k={self.loss_good:.5g} (mean {self.mean_loss * 100:.3g} %)"
        )


LossModel = Bernoulli | GilbertElliott


def parse_loss(value: object, field: str = "loss") -> LossModel | None:
    """Read a loss model from Python or YAML values.

    Accepted: 2 or '2%' (Bernoulli percent); a Bernoulli/GilbertElliott object;
    {'gemodel': {'p': .., 'r': .., 'loss_bad': .., 'loss_good': ..}} with percentages;
    {'ge_mean': 5} (GE from a mean loss in percent, E4 chain), optionally with gamma/beta/h.
    """
    from quicbed.spec.units import parse_percent  # local: units imports nothing from here

    if value is None:
        return None
    if isinstance(value, (Bernoulli, GilbertElliott)):
        return value
    if isinstance(value, dict):
        try:
            if set(value) == {"gemodel"} and isinstance(value["gemodel"], dict):
                params = value["gemodel"]
                unknown = set(params) - {"p", "r", "loss_bad", "loss_good"}
                if unknown:
                    raise SpecError(
                        f"unknown gemodel parameter(s) {sorted(unknown)}",
                        field=field,
                        fix="use p, r, loss_bad (1-h), loss_good (1-k), in percent",
                    )
                missing = [name for name in ("p", "r") if name not in params]
                if missing:
                    raise SpecError(
                        f"gemodel needs {' and '.join(missing)}",
                        field=f"{field}.gemodel",
                        fix="give p and r (and optionally loss_bad, loss_good), in percent, e.g. "
                        "{gemodel: {p: 1, r: 30}}",
                    )
                return GilbertElliott(**{k: parse_percent(v, f"{field}.gemodel.{k}") for k, v in params.items()})
            if "ge_mean" in value:
                unknown = set(value) - {"ge_mean", "gamma", "beta", "h"}
                if unknown:
                    raise SpecError(
                        f"unknown ge_mean option(s) {sorted(unknown)}",
                        field=field,
                        fix="use ge_mean (percent) with optional gamma, beta, h",
                    )
                extra = {k: _check_probability(value[k], f"{field}.{k}") for k in ("gamma", "beta", "h") if k in value}
                return GilbertElliott.from_mean_loss(parse_percent(value["ge_mean"], f"{field}.ge_mean"), **extra)
        except SpecError as error:
            # errors of the model itself are named relative to "loss": place them under this field
            inner = error.field[len("loss") :] if error.field.startswith("loss") else ""
            raise SpecError(
                error.message, field=field + inner if inner or not error.field else error.field, fix=error.fix
            ) from None
        raise SpecError(
            f"cannot read loss model {value!r}",
            field=field,
            fix="write a percentage (2 or '2%'), {gemodel: {p, r, loss_bad, loss_good}} or {ge_mean: 5}",
        )
    probability = parse_percent(value, field)
    return Bernoulli(probability) if probability > 0 else None
