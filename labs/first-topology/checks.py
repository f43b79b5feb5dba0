"""Checks of the lab first-topology: the described network, then the built one, then the answers."""

from __future__ import annotations

import statistics

from quicbed.labs import Verdict, check
from quicbed.spec.link import WiredLink

RATE = 10e6  # bit/s, as the handout asks
DELAY = 0.010  # s, one way
#: a measurement on a shared machine is noisy: the median RTT may exceed 2 x DELAY by this much
RTT_SLACK = 0.010
#: answers within this share of what the checker measured count as right
ANSWER_TOLERANCE = 0.25


@check("topology.py loads", hint="run 'quicbed topo show topology.py': it names the line and the fix")
def topology_loads(session):
    topo = session.topology()
    return Verdict(True, f"{len(topo.nodes)} nodes, {len(topo.links)} links")


@check(
    "hosts h1 and h2 and a switch s1",
    expected="hosts h1, h2 and switch s1",
    needs=["topology_loads"],
    hint="topo.add_host('h2') and topo.add_switch('s1')",
)
def nodes(session):
    topo = session.topology()
    kinds = {name: node.kind for name, node in topo.nodes.items()}
    passed = kinds.get("h1") == "host" and kinds.get("h2") == "host" and kinds.get("s1") == "switch"
    return Verdict(passed, ", ".join(f"{name} ({kind})" for name, kind in kinds.items()))


def _shaped(topo):
    return next((link for link in topo.links if link.name == "shaped"), None)


@check(
    "the link 'shaped' joins s1 and h2 at 10 Mbit/s and 10 ms one way",
    expected="s1 - h2, rate 10 Mbit/s, delay 10 ms, both ways",
    needs=["nodes"],
    hint="topo.add_link(s1, h2, name='shaped', rate='10mbit', delay='10ms')",
)
def shaped_link(session):
    link = _shaped(session.topology())
    if link is None or not isinstance(link, WiredLink):
        return Verdict(False, "no wired link named 'shaped'")
    seen = [f"{link.node1} - {link.node2}"]
    passed = set(link.ends()) == {"s1", "h2"}
    for label, shape in (("forward", link.forward), ("backward", link.backward)):
        rate = f"{shape.rate / 1e6:g} Mbit/s" if shape.rate else "no rate"
        seen.append(f"{label}: {rate}, {shape.delay * 1e3:g} ms")
        passed = passed and shape.rate == RATE and abs(shape.delay - DELAY) < 1e-9
    return Verdict(passed, "; ".join(seen))


@check(
    "ping h1 -> h2: the round trip is the two link delays",
    needs=["shaped_link"],
    expected=f"minimum >= {2 * DELAY * 1e3:g} ms, median <= {(2 * DELAY + RTT_SLACK) * 1e3:g} ms, no loss",
    hint="the delay applies in each direction: is it on the link h1's packets cross?",
)
def ping_rtt(session):
    result = session.ping(session.network(), "h1", "h2", count=20)
    rtts = result.rtts
    if not rtts:
        return Verdict(False, f"no replies ({result.error or 'all probes lost'})")
    session.measured["rtt"] = statistics.median(rtts)
    low, median = min(rtts), statistics.median(rtts)
    passed = low >= 2 * DELAY - 0.0002 and median <= 2 * DELAY + RTT_SLACK and result.loss == 0
    return Verdict(
        passed,
        f"minimum {low * 1e3:.2f} ms, median {median * 1e3:.2f} ms, "
        f"loss {result.loss * 100:.0f} % of {len(rtts)} replies",
    )


@check(
    "iperf3 h1 -> h2: TCP gets close to the link's rate, never above it",
    needs=["shaped_link"],
    expected=f"{RATE * 0.7 / 1e6:g}-{RATE * 1.02 / 1e6:g} Mbit/s",
    hint="the rate limit is on the link 'shaped'; is it 10mbit, not 10kbit or 100mbit?",
)
def iperf_rate(session):
    result = session.iperf(session.network(), "h1", "h2", seconds=4)
    if not result.ok or not result.throughput:
        return Verdict(False, f"iperf3 failed: {result.error}")
    session.measured["throughput"] = result.throughput
    return Verdict(RATE * 0.7 <= result.throughput <= RATE * 1.02, f"{result.throughput / 1e6:.2f} Mbit/s")


def _close(answer: float, measured: float) -> bool:
    return abs(answer - measured) <= ANSWER_TOLERANCE * measured


@check(
    "answers.yaml: Q1 and Q2 match the measurements",
    needs=["ping_rtt", "iperf_rate"],
    expected=f"within {ANSWER_TOLERANCE:.0%} of what the checker measured",
    hint="measure with ping and iperf3 in 'quicbed topo up' (handout, step 3); RTT in ms, rate in Mbit/s",
)
def answers(session):
    measured = session.measured
    rtt, throughput = session.answer("rtt_ms"), session.answer("throughput_mbit")
    passed = _close(rtt, measured["rtt"] * 1e3) and _close(throughput, measured["throughput"] / 1e6)
    return Verdict(
        passed,
        f"you: rtt_ms {rtt:g}, throughput_mbit {throughput:g}; checker: "
        f"{measured['rtt'] * 1e3:.1f} ms, {measured['throughput'] / 1e6:.2f} Mbit/s",
    )
