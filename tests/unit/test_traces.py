"""Delivery traces: the capacity models give known opportunity times, a fitted Markov model
recovers the one that made a trace, bad trace files are refused naming the line, the
``quicbed trace`` command writes and describes traces, and the shipped traces are what
traces/README.md says."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from quicbed.cli import main
from quicbed.errors import SpecError
from quicbed.traces.format import (
    SHIPPED_TRACES,
    capacity,
    load_trace,
    read_opportunities,
)
from quicbed.traces.models import (
    MarkovModel,
    constant,
    fit_markov,
    from_capacity,
    markov,
    on_off,
    random_walk,
    read_markov,
    steps,
)


def _one_opportunity(ms: int) -> float:
    """One opportunity's worth of rate over a bin of ``ms``: about the most a bin can differ
    from its piece's rate (credit carried across a boundary, the line closing the period)."""
    return 12000 / (ms / 1000)


# --- models -------------------------------------------------------------------------------------


def test_constant_12mbit_is_one_opportunity_per_millisecond():
    assert constant("12mbit", "1s") == list(range(1, 1001))


def test_constant_24mbit_is_two_opportunities_per_millisecond():
    times = constant(24e6, 1.0)
    assert len(times) == 2000
    assert set(Counter(times).values()) == {2} and times[-1] == 1000


def test_steps_give_each_piece_its_opportunities():
    times = steps([("1s", "24mbit"), ("500ms", "3mbit"), ("1s", "12mbit")])
    assert sum(1 <= t <= 1000 for t in times) == 2000  # 2 per ms
    assert sum(1000 < t <= 1500 for t in times) == 125  # 3 Mbit/s x 0.5 s / 12000 bit
    assert sum(1500 < t <= 2500 for t in times) == 1000
    assert times[-1] == 2500


def test_on_off_is_silent_while_off_except_for_the_line_closing_the_period():
    times = on_off("20mbit", "2s", "500ms", "20s")
    assert times[-1] == 20000  # the trace ends inside an off period: one line closes it
    inside_off = [t for t in times[:-1] if (t - 1) % 2500 >= 2000]
    assert inside_off == []
    assert sum(1 <= t <= 2000 for t in times) == 3333  # 20 Mbit/s x 2 s / 12000 bit


@pytest.mark.parametrize(
    "times, period_ms",
    [
        (constant("12mbit", "3s"), 3000),
        (constant("1mbit", "1s"), 1000),  # 1/12 opportunity per ms: the last would fall at 996
        (steps([("2s", "10mbit"), ("250ms", 0)]), 2250),
        (on_off("20mbit", "1s", "300ms", "2s"), 2000),
        (random_walk("5mbit", "1mbit", "10mbit", "1mbit", "100ms", "1.05s", seed=4), 1050),
        (markov(MarkovModel.sticky([1e6, 3e6], 0.5, 0.2), "3s", seed=1), 3000),
    ],
)
def test_the_period_is_the_duration(times, period_ms):
    assert times[-1] == period_ms
    assert times == sorted(times)


def test_the_period_closing_line_adds_at_most_one_opportunity():
    times = constant("1mbit", "1s")
    assert times[-2:] == [996, 1000] and len(times) == 84  # 83 earned, 1 added


@pytest.mark.parametrize(
    "segments, wrong",
    [
        ([], "no duration"),
        ([(1.0, -5.0)], "not 0 or more"),
        ([(0.0004, 1e6)], "shorter than 1 ms"),
    ],
)
def test_from_capacity_refuses_bad_pieces(segments, wrong):
    with pytest.raises(SpecError, match=wrong):
        from_capacity(segments)


def test_random_walk_stays_within_its_bounds_and_depends_only_on_its_seed():
    arguments = {
        "start": "10mbit",
        "low": "4mbit",
        "high": "16mbit",
        "step": "3mbit",
        "interval": "500ms",
        "duration": "60s",
    }
    times = random_walk(**arguments, seed=7)
    slack = 2 * _one_opportunity(500)
    rates = capacity(times, 500)
    assert all(4e6 - slack <= rate <= 16e6 + slack for rate in rates)
    assert min(rates) < 6e6 and max(rates) > 14e6  # it does wander (3 Mbit/s steps over 120 intervals)
    assert random_walk(**arguments, seed=7) == times
    assert random_walk(**arguments, seed=8) != times


def test_random_walk_refuses_a_start_outside_its_bounds():
    with pytest.raises(SpecError, match="outside") as raised:
        random_walk("20mbit", "1mbit", "10mbit", "1mbit", "1s", "10s", seed=1)
    assert raised.value.field == "start"


def test_a_markov_model_that_always_stays_never_leaves_its_start_level():
    model = MarkovModel.sticky([2e6, 8e6, 20e6], stay=1.0, interval=0.5, start=1)
    rates = capacity(markov(model, "30s", seed=3), 500)
    assert all(abs(rate - 8e6) <= _one_opportunity(500) for rate in rates)


def test_markov_is_deterministic_for_a_seed():
    model = MarkovModel.sticky([2e6, 20e6], stay=0.7, interval=0.2)
    assert markov(model, "10s", seed=5) == markov(model, "10s", seed=5)
    assert markov(model, "10s", seed=5) != markov(model, "10s", seed=6)


def test_fit_markov_recovers_the_model_that_made_the_trace():
    truth = MarkovModel(levels=(2e6, 20e6), transitions=((0.9, 0.1), (0.2, 0.8)), interval=1.0)
    fitted = fit_markov(markov(truth, "600s", seed=11), levels=2, interval=1.0)
    assert fitted.interval == 1.0 and fitted.start == 0
    for got, expected in zip(fitted.levels, truth.levels):
        assert abs(got - expected) <= 0.05 * expected
    for state in range(2):
        assert abs(fitted.transitions[state][state] - truth.transitions[state][state]) <= 0.1


def test_fit_markov_refuses_more_levels_than_the_trace_has():
    with pytest.raises(SpecError, match="distinct") as raised:
        fit_markov(constant("12mbit", "10s"), levels=2, interval=1.0)
    assert raised.value.field == "levels"


@pytest.mark.parametrize(
    "levels, rows, field",
    [
        ((), (), "levels"),
        ((1e6, 2e6), ((0.5, 0.5),), "transitions"),
        ((1e6, 2e6), ((0.5, 0.4), (0.5, 0.5)), "transitions[0]"),
        ((1e6, 2e6), ((1.5, -0.5), (0.5, 0.5)), "transitions[0]"),
        ((1e6, -2e6), ((0.5, 0.5), (0.5, 0.5)), "levels[1]"),
    ],
)
def test_markov_models_are_checked(levels, rows, field):
    with pytest.raises(SpecError) as raised:
        MarkovModel(levels, rows, 0.5)
    assert raised.value.field == field


def test_a_markov_model_goes_to_yaml_and_back():
    model = MarkovModel.sticky([2e6, 6e6, 14e6], stay=0.8, interval=0.2, start=2)
    data = yaml.safe_load(yaml.safe_dump(model.to_dict()))
    assert data["levels"] == ["2mbit", "6mbit", "14mbit"] and data["interval"] == "200ms"
    assert MarkovModel.from_dict(data) == model
    with pytest.raises(SpecError, match="unknown key"):
        MarkovModel.from_dict({**data, "rate": 1})


def test_the_shipped_model_file_reads():
    model = read_markov(SHIPPED_TRACES / "markov-drive.yaml")
    assert model.levels == (2e6, 6e6, 14e6, 28e6) and model.interval == 0.5
    assert all(row[state] == 0.8 for state, row in enumerate(model.transitions))


# --- the file format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, wrong",
    [
        ("1\n3\n2\n", "line 3"),
        ("1\n2\nfast\n", "line 3"),
        ("1\n-4\n", "line 2"),
        ("", "no delivery opportunity after time 0"),
        ("0\n0\n", "no delivery opportunity after time 0"),
    ],
)
def test_bad_trace_files_are_refused_naming_the_line(tmp_path, text, wrong):
    path = tmp_path / "bad.down"
    path.write_text(text)
    with pytest.raises(SpecError, match=wrong) as raised:
        read_opportunities(path)
    assert raised.value.source == str(path)


def test_a_missing_trace_names_the_shipped_ones():
    with pytest.raises(SpecError) as raised:
        load_trace("no-such-trace.down", "links[0].forward.trace")
    assert raised.value.field == "links[0].forward.trace"
    assert "step-drop.down" in raised.value.fix and "markov-drive.up" in raised.value.fix


# --- the command --------------------------------------------------------------------------------


def test_the_command_writes_a_trace_and_refuses_to_overwrite_it(tmp_path, capsys):
    out = tmp_path / "flat.down"
    assert main(["trace", "constant", "--rate", "12mbit", "--duration", "2s", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert str(out) in said and "period 2 s" in said and "12 Mbit/s" in said
    assert read_opportunities(out) == list(range(1, 2001))

    assert main(["trace", "constant", "--rate", "24mbit", "--duration", "2s", "-o", str(out)]) == 1
    assert "--force" in capsys.readouterr().err
    assert len(read_opportunities(out)) == 2000  # untouched
    assert main(["trace", "constant", "--rate", "24mbit", "--duration", "2s", "-o", str(out), "--force"]) == 0
    assert len(read_opportunities(out)) == 4000


def test_the_command_names_the_option_that_is_wrong(tmp_path, capsys):
    out = tmp_path / "x.down"
    assert main(["trace", "steps", "--step", "10s:24mbit", "--step", "5s", "-o", str(out)]) == 1
    assert "--step" in capsys.readouterr().err
    assert (
        main(["trace", "on-off", "--rate", "20mbps", "--on", "1s", "--off", "1s", "--duration", "4s", "-o", str(out)])
        == 1
    )
    assert "--rate" in capsys.readouterr().err
    assert main(["trace", "markov", "--levels", "1mbit,2mbit", "--duration", "4s", "-o", str(out)]) == 1
    assert "--stay" in capsys.readouterr().err
    assert not out.exists()


def test_the_command_generates_from_an_inline_markov_model_and_fits_it_back(tmp_path, capsys):
    out, model = tmp_path / "m.down", tmp_path / "m.yaml"
    assert (
        main(
            [
                "trace",
                "markov",
                "--levels",
                "2mbit,20mbit",
                "--stay",
                "0.9",
                "--interval",
                "1s",
                "--duration",
                "300s",
                "--seed",
                "3",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert "wrote" in capsys.readouterr().out
    assert main(["trace", "fit", str(out), "--levels", "2", "--interval", "1s"]) == 0
    printed = MarkovModel.from_dict(yaml.safe_load(capsys.readouterr().out))
    assert main(["trace", "fit", str(out), "--levels", "2", "--interval", "1s", "-o", str(model)]) == 0
    assert read_markov(model) == printed
    assert all(abs(got - expected) <= 0.05 * expected for got, expected in zip(printed.levels, (2e6, 20e6)))


def test_info_prints_the_mean_rate(capsys):
    assert main(["trace", "info", "step-drop.down", "on-off.down"]) == 0
    out = capsys.readouterr().out
    assert "step-drop.down" in out and "mean 19.8 Mbit/s" in out and "min 3 Mbit/s" in out
    assert "on-off.down" in out and "mean 16 Mbit/s" in out


# --- the shipped traces -------------------------------------------------------------------------

#: each shipped trace's mean rate as traces/README.md states it
SHIPPED_MEANS = {
    "constant-12mbit.down": 12e6,
    "constant-12mbit.up": 12e6,
    "step-drop.down": 19.8e6,
    "step-drop.up": 6e6,
    "on-off.down": 16e6,
    "on-off.up": 6e6,
    "markov-drive.down": 7.3e6,
    "markov-drive.up": 2.84e6,
}


def test_every_shipped_trace_is_listed_here():
    shipped = {path.name for path in SHIPPED_TRACES.iterdir() if path.suffix in (".down", ".up")}
    assert shipped == set(SHIPPED_MEANS)


@pytest.mark.parametrize("name, mean", sorted(SHIPPED_MEANS.items()))
def test_each_shipped_trace_loads_with_the_mean_its_readme_states(name, mean):
    trace = load_trace(name, "trace")
    assert trace.period_ms == 20000
    assert abs(trace.mean_rate - mean) <= 0.02 * mean
    assert f"`{name}`" in (SHIPPED_TRACES / "README.md").read_text()
