"""quicbed trace: generate delivery traces from capacity models, fit a model to a measured trace,
describe traces (docs/traces.md)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

from quicbed.atomic import write_text_atomic
from quicbed.errors import QuicbedError, SpecError
from quicbed.spec.units import format_rate, format_time, parse_time
from quicbed.traces import models
from quicbed.traces.format import (
    BYTES_PER_OPPORTUNITY,
    capacity,
    load_trace,
    read_opportunities,
    write_trace,
)

#: a second below this capacity counts as an outage in 'info'
LOW_CAPACITY = 1e6


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trace",
        help="generate, fit and describe delivery traces for trace-driven links",
        description="Delivery traces (Mahimahi's format: one line per 1500-byte opportunity, in ms) drive a wired "
        "link's capacity over time. The model subcommands write a trace file; 'fit' turns a measured "
        "trace into a Markov model; 'info' describes traces. Rates like '20mbit' (0 is an outage), "
        "durations like '500ms'. Files are never overwritten without --force. See docs/traces.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  quicbed trace constant --rate 12mbit --duration 20s -o my.down\n"
        "  quicbed trace steps --step 10s:24mbit --step 5s:3mbit -o drop.down\n"
        "  quicbed trace markov --levels 2mbit,20mbit --stay 0.9 --interval 200ms --duration 60s -o m.down\n"
        "  quicbed trace fit recorded.down --levels 4 --interval 500ms -o model.yaml\n"
        "  quicbed trace info step-drop.down my.down",
    )
    sub = parser.add_subparsers(dest="trace_command", metavar="MODEL", required=True)

    constant = _writer(sub, "constant", "the same rate throughout", _constant)
    constant.add_argument("--rate", required=True, help="e.g. 12mbit")
    constant.add_argument("--duration", required=True, help="the trace's period, e.g. 20s")

    steps = _writer(sub, "steps", "rates one after the other", _steps)
    steps.add_argument(
        "--step",
        action="append",
        required=True,
        metavar="D:R",
        help="a duration and its rate, e.g. 10s:24mbit; repeat in order",
    )

    on_off = _writer(sub, "on-off", "a rate, then nothing, repeated", _on_off)
    on_off.add_argument("--rate", required=True, help="the rate while on, e.g. 20mbit")
    on_off.add_argument("--on", required=True, help="how long it is on, e.g. 2s")
    on_off.add_argument("--off", required=True, help="how long it is off, e.g. 500ms")
    on_off.add_argument("--duration", required=True, help="the trace's period, e.g. 20s (the last cycle is cut)")

    walk = _writer(sub, "random-walk", "a rate that moves by a random normal step every interval", _random_walk)
    walk.add_argument("--start", required=True, help="the first rate, e.g. 10mbit")
    walk.add_argument("--low", required=True, help="the lowest rate, e.g. 1mbit")
    walk.add_argument("--high", required=True, help="the highest rate, e.g. 30mbit")
    walk.add_argument("--step", required=True, help="the standard deviation of a step, e.g. 2mbit")
    walk.add_argument("--interval", required=True, help="time between steps, e.g. 500ms")
    walk.add_argument("--duration", required=True, help="the trace's period, e.g. 60s")
    walk.add_argument("--seed", type=int, default=1, help="random seed (default 1): same seed, same trace")

    chain = _writer(sub, "markov", "a rate that jumps between levels (a Markov chain)", _markov)
    chain.add_argument("--model", type=Path, help="a model file (YAML, e.g. from 'quicbed trace fit')")
    chain.add_argument("--levels", help="instead of --model: the rates of the states, e.g. 2mbit,8mbit,20mbit")
    chain.add_argument(
        "--stay",
        type=float,
        help="with --levels: probability of staying in a state per interval "
        "(the rest is spread evenly over the other states)",
    )
    chain.add_argument("--interval", help="with --levels: time per step, e.g. 200ms")
    chain.add_argument("--duration", required=True, help="the trace's period, e.g. 60s")
    chain.add_argument("--seed", type=int, default=1, help="random seed (default 1): same seed, same trace")

    fit = sub.add_parser(
        "fit",
        help="fit a Markov model to a measured trace",
        description="Bin a trace's capacity per --interval, split the bins into --levels states, "
        "count the state changes between consecutive bins. Prints the model as YAML, "
        "or writes it with -o; 'quicbed trace markov --model' generates from it.",
    )
    fit.add_argument("trace", help="a trace file, or a shipped trace's name")
    fit.add_argument("--levels", type=int, required=True, help="number of states, e.g. 4")
    fit.add_argument("--interval", required=True, help="time per state, e.g. 500ms")
    fit.add_argument("-o", "--output", type=Path, help="the model file to write (default: print it)")
    fit.add_argument("--force", action="store_true", help="overwrite the model file if it exists")
    fit.set_defaults(handler=_fit)

    info = sub.add_parser(
        "info",
        help="describe traces: rate, period, per-second capacity",
        description="For each trace: opportunities, period, mean rate, min/median/max of the "
        "capacity per second, and the share of seconds below 1 Mbit/s.",
    )
    info.add_argument("traces", nargs="+", help="trace files, or shipped traces' names")
    info.set_defaults(handler=_info)


def _writer(
    sub: argparse._SubParsersAction, name: str, summary: str, generate: Callable[[argparse.Namespace], list[int]]
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=summary, description=f"Write a trace: {summary}.")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the trace file to write, e.g. my.down")
    parser.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    parser.set_defaults(handler=lambda args: _write(args, generate))
    return parser


def _write(args: argparse.Namespace, generate: Callable[[argparse.Namespace], list[int]]) -> int:
    _check_writable(args.output, args.force)
    try:
        times = generate(args)
    except SpecError as error:
        raise _as_option(error) from None
    count = write_trace(args.output, times)
    print(
        f"wrote {args.output}: {count} opportunities, period {times[-1] / 1000:g} s, "
        f"mean {_mbit(count * BYTES_PER_OPPORTUNITY * 8 / (times[-1] / 1000))}"
    )
    return 0


def _check_writable(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise QuicbedError(f"{path} exists; not overwriting it (fix: give another -o, or --force to replace it)")
    if not path.parent.is_dir():
        raise QuicbedError(f"-o {path}: folder {path.parent} does not exist (fix: create it first)")


def _as_option(error: SpecError) -> SpecError:
    """A model's parameter named as the option that set it (rate -> --rate)."""
    if error.source or not error.field or error.field.startswith("-") or "[" in error.field or " " in error.field:
        return error
    return SpecError(error.message, field=f"--{error.field.replace('_', '-')}", fix=error.fix)


def _constant(args: argparse.Namespace) -> list[int]:
    return models.constant(args.rate, args.duration)


def _steps(args: argparse.Namespace) -> list[int]:
    pieces = []
    for text in args.step:
        duration, colon, rate = text.partition(":")
        if not colon or not duration.strip() or not rate.strip():
            raise SpecError(f"cannot read {text!r}", field="--step", fix="write DURATION:RATE, e.g. 10s:24mbit")
        pieces.append(
            (
                models.seconds_value(duration.strip(), f"--step {text}"),
                models.rate_value(rate.strip(), f"--step {text}"),
            )
        )
    return models.steps(pieces)


def _on_off(args: argparse.Namespace) -> list[int]:
    return models.on_off(args.rate, args.on, args.off, args.duration)


def _random_walk(args: argparse.Namespace) -> list[int]:
    return models.random_walk(args.start, args.low, args.high, args.step, args.interval, args.duration, args.seed)


def _markov(args: argparse.Namespace) -> list[int]:
    inline = {"--levels": args.levels, "--stay": args.stay, "--interval": args.interval}
    if args.model is not None:
        given = [option for option, value in inline.items() if value is not None]
        if given:
            raise SpecError(
                f"{', '.join(given)} given with --model",
                field=given[0],
                fix="give either --model FILE or --levels, --stay and --interval",
            )
        model = models.read_markov(args.model)
    else:
        missing = [option for option, value in inline.items() if value is None]
        if missing:
            raise SpecError(
                f"missing {', '.join(missing)}",
                field=missing[0],
                fix="give --model FILE, or --levels 2mbit,20mbit --stay 0.9 --interval 200ms",
            )
        levels = [models.rate_value(text.strip(), "--levels") for text in args.levels.split(",") if text.strip()]
        if not levels:
            raise SpecError("no levels", field="--levels", fix="e.g. --levels 2mbit,8mbit,20mbit")
        model = models.MarkovModel.sticky(levels, args.stay, parse_time(args.interval, "--interval", allow_zero=False))
    return models.markov(model, args.duration, args.seed)


def _fit(args: argparse.Namespace) -> int:
    import yaml

    if args.output is not None:
        _check_writable(args.output, args.force)
    trace = load_trace(args.trace, "trace")
    try:
        model = models.fit_markov(
            read_opportunities(Path(trace.path)), args.levels, parse_time(args.interval, "interval", allow_zero=False)
        )
    except SpecError as error:
        raise _as_option(error) from None
    text = (
        f"# fitted by: quicbed trace fit {trace.name} --levels {args.levels} --interval {args.interval}\n"
        + yaml.safe_dump(model.to_dict(), sort_keys=False, default_flow_style=None)
    )
    if args.output is None:
        print(text, end="")
        return 0
    write_text_atomic(args.output, text)
    levels = ", ".join(format_rate(level) if level > 0 else "0" for level in model.levels)
    print(f"wrote {args.output}: {len(model.levels)} levels ({levels}), interval {format_time(model.interval)}")
    return 0


def _info(args: argparse.Namespace) -> int:
    for number, name in enumerate(args.traces):
        trace = load_trace(name, f"trace {name}")
        times = read_opportunities(Path(trace.path))
        seconds = capacity(times, 1000)
        low = sum(rate < LOW_CAPACITY for rate in seconds) / len(seconds)
        if number:
            print()
        print(f"{trace.name} ({trace.path})")
        print(
            f"  {trace.opportunities} opportunities, period {trace.period_ms / 1000:g} s, mean {_mbit(trace.mean_rate)}"
        )
        print(
            f"  per second: min {_mbit(min(seconds))}, median {_mbit(statistics.median(seconds))}, "
            f"max {_mbit(max(seconds))}; {low:.0%} of seconds below {LOW_CAPACITY / 1e6:g} Mbit/s"
        )
    return 0


def _mbit(rate: float) -> str:
    return f"{rate / 1e6:.3g} Mbit/s"
