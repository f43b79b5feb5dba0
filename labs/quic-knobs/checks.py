"""Checks of the lab quic-knobs: the variants, then what each did to the traffic, then the answers.

Measured with the reference solution (quinn, 20 Mbit/s, 10 ms): ACK ratio 0.50 (quic-native)
and 0.11 (quic-acks); short gaps at the server 53 %, 89 % (quic-acks) and 53 % (quic-unpaced):
on this link the ACK clock, not the pacer, spaces the departures."""

from __future__ import annotations

import statistics

from quicbed.apps.quic.profiles import get_profile
from quicbed.labs import Verdict, check

REFERENCE = "quic-native"
#: the variant's name, the knob it must change and the value the handout asks for
VARIANTS = {"quic-acks": ("ack_every", 10), "quic-unpaced": ("pacing", False)}
#: quic-acks must send at most this share of quic's ACKs (the knobs promise 1/5)
ACK_SHARE = 0.5
#: quic-acks's short-gap share must exceed the reference's by this many points (measured: 36)
SHORT_GAP_MARGIN = 0.20
ACK_TOLERANCE = 0.30
GAP_TOLERANCE = 15.0  # percentage points


def _knobs(transport) -> dict:
    return get_profile(transport.profile).with_knobs(transport.knobs).knobs()


@check("experiment.yaml is valid", hint="'quicbed run experiment.yaml --dry-run' names the line and the fix")
def experiment_loads(session):
    experiment = session.experiment_file()
    return Verdict(True, "transports: " + ", ".join(experiment.matrix.get("transport", [])))


@check(
    "each variant is quic-native with one knob changed",
    needs=["experiment_loads"],
    expected="quic-acks: ack_every 10; quic-unpaced: pacing false; nothing else changed (quinn, profile quic); "
    "all three in the matrix",
    hint="quic-acks: {kind: quic, impl: quinn, profile: quic, knobs: {ack_every: 10}}",
)
def one_knob_each(session):
    experiment = session.experiment_file()
    in_matrix = experiment.matrix.get("transport", [])
    if REFERENCE not in in_matrix:
        return Verdict(False, f"the matrix lacks the reference {REFERENCE!r}: {in_matrix}")
    reference = _knobs(experiment.transports[REFERENCE])
    seen, passed = [], True
    for name, (knob, value) in VARIANTS.items():
        if name not in in_matrix:
            seen.append(f"{name}: not in the matrix")
            passed = False
            continue
        transport = experiment.transports[name]
        changed = {key: value for key, value in _knobs(transport).items() if reference.get(key) != value}
        if transport.kind != "quic" or transport.implementation != "quinn":
            changed["implementation"] = transport.implementation or "aioquic"
        seen.append(f"{name}: " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "nothing changed"))
        passed = passed and changed == {knob: value}
    return Verdict(passed, "; ".join(seen))


@check(
    "every run completed",
    needs=["one_knob_each"],
    expected="every run ok",
    hint="read the runs' errors in check-results/experiment/results.jsonl",
)
def runs_complete(session):
    return session.experiment().every_run_ok()


def _median(session, metric: str, transport: str) -> float:
    values = session.experiment().values(metric, transport=transport)
    return statistics.median(values) if values else float("nan")


@check(
    "quic-acks sends far fewer ACKs than quic-native",
    needs=["runs_complete"],
    expected=f"ACK ratio of quic-acks at most {ACK_SHARE:g} x {REFERENCE}'s",
    hint="ack_every is a receiver knob: the client applies it (both ends get the transport's profile)",
)
def fewer_acks(session):
    reference, variant = _median(session, "ack_ratio", REFERENCE), _median(session, "ack_ratio", "quic-acks")
    session.measured.update(ack_ratio_quic=reference, ack_ratio_acks=variant)
    return Verdict(variant <= ACK_SHARE * reference, f"{REFERENCE} {reference:.3f}, quic-acks {variant:.3f}")


@check(
    "quic-acks leaves the server in bursts",
    needs=["runs_complete"],
    expected=f"short gaps at server of quic-acks at least {SHORT_GAP_MARGIN * 100:g} points above {REFERENCE}'s",
    hint="each ACK lets the sender send as many packets as it acknowledges: is ack_every on quic-acks?",
)
def burstier(session):
    shares = {name: _median(session, "ipt_server_short_share", name) for name in (REFERENCE, *VARIANTS)}
    session.measured.update(
        short_gaps_quic=shares[REFERENCE] * 100,
        short_gaps_acks=shares["quic-acks"] * 100,
        short_gaps_unpaced=shares["quic-unpaced"] * 100,
    )
    return Verdict(
        shares["quic-acks"] >= shares[REFERENCE] + SHORT_GAP_MARGIN,
        ", ".join(f"{name} {share * 100:.1f} %" for name, share in shares.items()),
    )


@check(
    "answers.yaml: Q1 and Q2",
    needs=["fewer_acks", "burstier"],
    expected=f"ACK ratios within {ACK_TOLERANCE:.0%}, short-gap shares within {GAP_TOLERANCE:g} points "
    "of the checker's",
    hint="the 'ACK ratio' and 'short gaps at server' columns of your results' summary.md (gaps in %)",
)
def answers(session):
    measured, seen, passed = session.measured, [], True
    for key in ("ack_ratio_quic", "ack_ratio_acks", "short_gaps_quic", "short_gaps_acks", "short_gaps_unpaced"):
        answer = session.answer(key)
        tolerance = ACK_TOLERANCE * measured[key] if key.startswith("ack") else GAP_TOLERANCE
        passed = passed and abs(answer - measured[key]) <= tolerance
        seen.append(f"{key} {answer:g} (checker {measured[key]:.3g})")
    return Verdict(passed, ", ".join(seen))
