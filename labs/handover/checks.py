"""Checks of the lab handover: the two APs and the walk, then the runs' handovers, then the
answers.

With ns-3's station a handover takes ten missed beacons (1.02 s), a 120 ms scan and the
association, so the outage (last frame through ap1 to first through ap2) cannot be shorter
than about a second; the transports differ in when their next packet reaches the station
after it re-associated. Measured with the reference solution: see the comment of
experiments/roaming.yaml, which is the same walk."""

from __future__ import annotations

import math
import statistics

from quicbed.labs import Verdict, check

#: the walk must start near ap1 and end near ap2 (metres)
NEAR = 15.0
#: the APs far enough apart that ap1 is lost on the way (it is, about 55 m out), close enough
#: that the station reaches ap2's range before it loses ap1's
SPACING = (70.0, 100.0)
#: the outage's bounds: at least the beacons ns-3 waits for, at most a few retransmission timeouts
OUTAGE = (0.8, 6.0)
ANSWER_TOLERANCE = 0.35
TRANSPORTS = {"tcp": "outage_tcp", "quic-native": "outage_quic"}


@check("topology.py loads", hint="run 'quicbed topo show topology.py': it names the line and the fix")
def topology_loads(session):
    topo = session.topology()
    return Verdict(True, f"{len(topo.nodes)} nodes, {len(topo.links)} links")


@check(
    "sta1 roams between ap1 and ap2",
    needs=["topology_loads"],
    expected="sta1 linked to ap1 and ap2, one ssid, both APs bridged to the server's switch",
    hint="topo.add_wireless_link(sta1, ap2), ap2 with ssid='campus' and topo.add_link(ap2, switch)",
)
def roams(session):
    # (one SSID and one subnet are checked when topology.py loads)
    aps = session.topology().roaming_stations().get("sta1", [])
    return Verdict(sorted(aps) == ["ap1", "ap2"], f"sta1 may associate with: {', '.join(aps) or 'one AP only'}")


@check(
    "sta1 walks from ap1 to ap2",
    needs=["roams"],
    expected=f"ap1 and ap2 {SPACING[0]:g}-{SPACING[1]:g} m apart; the walk starts within {NEAR:g} m of ap1 "
    f"and ends within {NEAR:g} m of ap2",
    hint="add_station('sta1', waypoints=[(0, 10, 1), (2, 10, 1), (14, 70, 1)]): (t, x, y), t in seconds",
)
def walks(session):
    topo = session.topology()
    trajectory = topo.nodes["sta1"].trajectory
    ap1, ap2 = (topo.nodes[name].position or (0.0, 0.0, 0.0) for name in ("ap1", "ap2"))
    spacing = math.dist(ap1, ap2)
    if trajectory is None:
        return Verdict(False, f"APs {spacing:g} m apart; sta1 stands still at {topo.nodes['sta1'].position}")
    start, end = trajectory.start, trajectory.points[-1][1:]
    passed = SPACING[0] <= spacing <= SPACING[1] and math.dist(start, ap1) <= NEAR and math.dist(end, ap2) <= NEAR
    return Verdict(
        passed,
        f"APs {spacing:g} m apart; sta1 from {math.dist(start, ap1):.0f} m of ap1 to "
        f"{math.dist(end, ap2):.0f} m of ap2 in {trajectory.duration:g} s",
    )


@check(
    "experiment.yaml is valid",
    needs=["walks"],
    hint="'quicbed run experiment.yaml --dry-run' names the line and the fix",
)
def experiment_loads(session):
    experiment = session.experiment_file()
    transports = experiment.matrix.get("transport", [])
    passed = (
        set(TRANSPORTS) <= set(transports)
        and experiment.client == "sta1"
        and experiment.topology_script.name == "topology.py"
    )
    return Verdict(
        passed, f"topology {experiment.topology_script.name}, client {experiment.client}, transports {transports}"
    )


@check(
    "every run completed",
    needs=["experiment_loads"],
    expected="every run ok",
    hint="read the runs' errors in check-results/experiment/results.jsonl",
)
def runs_complete(session):
    return session.experiment().every_run_ok()


@check(
    "sta1 changed AP in every run",
    needs=["runs_complete"],
    expected="handovers >= 1 in every completed run",
    hint="the download must last past the moment sta1 loses ap1 (about 55 m out): a longer object or a faster walk",
)
def handed_over(session):
    counts = session.experiment().values("handovers")
    return Verdict(bool(counts) and min(counts) >= 1, f"handovers per run: {[int(c) for c in counts]}")


@check(
    "each transport's outage is measured",
    needs=["handed_over"],
    expected=f"median handover_outage of tcp and quic-native within {OUTAGE[0]:g}-{OUTAGE[1]:g} s",
    hint="summary.md has handover_outage per transport",
)
def outage(session):
    seen, passed = [], True
    for transport, key in TRANSPORTS.items():
        values = session.experiment().values("handover_outage", transport=transport)
        median = statistics.median(values) if values else math.nan
        session.measured[key] = median
        passed = passed and OUTAGE[0] <= median <= OUTAGE[1]
        seen.append(f"{transport} {median:.2f} s over {len(values)} run(s)")
    return Verdict(passed, ", ".join(seen))


@check(
    "answers.yaml: Q1",
    needs=["outage"],
    expected=f"within {ANSWER_TOLERANCE:.0%} of the checker's medians",
    hint="the handover_outage column of summary.md, in seconds",
)
def answers(session):
    seen, passed = [], True
    for key in TRANSPORTS.values():
        answer, measured = session.answer(key), session.measured[key]
        passed = passed and abs(answer - measured) <= ANSWER_TOLERANCE * measured
        seen.append(f"{key} {answer:g} (checker {measured:.3g})")
    return Verdict(passed, ", ".join(seen))
