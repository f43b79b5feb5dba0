"""CPU reports of a run and the judgement whether it was CPU-bound.

Why: a throughput or latency figure from an emulated network means little if an endpoint or
the ns-3 channel was starved of CPU. Each run therefore records how much CPU every role used,
how often it was pegged at a full core and how busy the whole machine was, so that every
published figure can say whether it had headroom (saturation_reasons()).

compute_report() turns the samples between two monotonic times (e.g. first to last data
packet) into a CpuReport, which also says what it could not see (``CpuReport.unknown``): a
run without CPU figures is of unknown state, never "not CPU-bound". Nothing here touches the
host: the samples come from :mod:`quicbed.host.cpu_accounting`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from quicbed.host.procfs import MachineTicks

#: a role using at least this fraction of one core during a sample interval is CPU-bound then
SATURATION = 0.9
# Defaults for saturation_reasons(), to be set from measurement (bench/) rather than trusted:
SATURATED_FRACTION = 0.2  # share of the transfer a role may spend CPU-bound before a figure is flagged
MACHINE_IDLE_MIN = 0.05  # machine idle share below which the whole host counts as saturated
STEAL_MAX = (
    0.2  # hypervisor steal share from which the host had too little CPU to keep timing (a few % is common on cloud VMs)
)
#: the roles whose CPU decides whether a figure measured the network: both ends of every
#: download (the measured one, every client of a many-client run, which share the ``client``
#: role, and the competitor's) and the ns-3 channel. Captures, background traffic and stress
#: load are not: stress is CPU-bound by design, and a capture's losses are checked by tcpdump.
JUDGED_ROLES = ("server", "client", "competitor", "channel")


@dataclass(frozen=True)
class Sample:
    """One sampler tick: monotonic time, cumulative CPU seconds per role, machine jiffies, and
    two CPU demands per role over the interval that ended here (running + waiting for a core,
    /proc/TID/schedstat; absent when the kernel has no schedstat): ``demand``, the largest of
    one of its threads (1.0: it wanted a core all the time), and ``combined``, all its threads'
    together over the number of cores they may use (1.0: every core the role may use was busy
    with it or had it waiting), which tells when threads that each want part of a core fill
    the cores they share."""

    t: float
    roles: dict[str, float]
    machine: MachineTicks
    demand: dict[str, float] = field(default_factory=dict)
    combined: dict[str, float] = field(default_factory=dict)


@dataclass
class RoleCpu:
    cpu_seconds: float
    mean_share: float  # cores used on average (1.0 = one full core)
    peak_share: float  # the busiest sample interval, in cores
    #: share of the window in which one of the role's threads wanted a core (ran or waited in
    #: the run queue) for >= SATURATION of the interval, or (endpoints) its threads together
    #: wanted >= SATURATION of every core they may use: it was never waiting for the network.
    #: Without schedstat: share of the window at >= SATURATION of one core of CPU time.
    saturated_share: float


@dataclass
class MachineCpu:
    cores: int
    busy_share: float  # shares of all cores' time
    idle_share: float
    steal_share: float


@dataclass
class CpuReport:
    backend: str
    interval: float
    window_s: float
    roles: dict[str, RoleCpu]
    machine: MachineCpu
    warnings: list[str] = field(default_factory=list)
    #: why the CPU state over the window is not known, in whole or in part (no samples, samples
    #: over part of it, a role that could not be read): such a run is not judged "not CPU-bound"
    unknown: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def compute_report(
    samples: Sequence[Sample],
    start: float,
    end: float,
    *,
    backend: str = "",
    interval: float = 0.0,
    cores: int = 0,
    roles: Iterable[str] | None = None,
    warnings: Iterable[str] = (),
    gaps: Iterable[str] = (),
) -> CpuReport:
    """CPU use over [start, end], the counters interpolated linearly at the window's edges.
    Peak and saturation come from the sample intervals overlapping the window; an interval
    shorter than half the nominal one (the final sample of stop()) is merged into the next.
    ``gaps``: what the sampler could not read; with the window's own holes they make the
    report's ``unknown``."""
    names = list(roles) if roles is not None else sorted({r for s in samples for r in s.roles})
    warn, unknown = list(warnings), list(dict.fromkeys(gaps))
    lo, hi = (max(start, samples[0].t), min(end, samples[-1].t)) if samples else (0.0, 0.0)
    if len(samples) < 2 or hi <= lo:
        unknown.append(f"no CPU samples cover the window ({len(samples)} samples)")
        return CpuReport(
            backend,
            interval,
            0.0,
            {r: RoleCpu(0.0, 0.0, 0.0, 0.0) for r in names},
            MachineCpu(cores, 0.0, 0.0, 0.0),
            warn + unknown[-1:],
            unknown,
        )
    if (math.isfinite(start) and start < lo - interval) or (math.isfinite(end) and end > hi + interval):
        unknown.append(f"samples cover only {hi - lo:.3f} s of the {end - start:.3f} s window")
        warn.append(unknown[-1])
    times = [s.t for s in samples]

    def delta(value: Callable[[Sample], float]) -> float:
        def at(x: float) -> float:
            i = min(max(bisect.bisect_right(times, x), 1), len(samples) - 1)
            a, b = samples[i - 1], samples[i]
            return value(b) if b.t <= a.t else value(a) + (value(b) - value(a)) * (x - a.t) / (b.t - a.t)

        return at(hi) - at(lo)

    grid = [samples[0]]
    for s in samples[1:]:
        if s.t - grid[-1].t >= interval / 2 or len(grid) == 1:
            grid.append(s)
        else:
            grid[-1] = s  # a short interval: the previous one extends to s
    pairs = [
        (overlap, a, b) for a, b in zip(grid, grid[1:]) if b.t > a.t and (overlap := min(b.t, hi) - max(a.t, lo)) > 0
    ]
    covered = sum(p[0] for p in pairs) or 1.0
    result = {}
    for role in names:

        def get(s: Sample, role: str = role) -> float:
            return s.roles.get(role, 0.0)

        shares = [(overlap, (get(b) - get(a)) / (b.t - a.t)) for overlap, a, b in pairs]
        # demand (run + run-queue wait) tells a starved endpoint from an idle one
        bound = [(overlap, _wanted(b, role, share)) for (overlap, a, b), (_, share) in zip(pairs, shares)]
        seconds = delta(get)
        result[role] = RoleCpu(
            seconds,
            seconds / (hi - lo),
            max((s for _, s in shares), default=0.0),
            sum(o for o, s in bound if s >= SATURATION) / covered,
        )
    ticks = [
        delta(lambda s: float(s.machine.busy)),
        delta(lambda s: float(s.machine.idle)),
        delta(lambda s: float(s.machine.steal)),
    ]
    if sum(ticks) <= 0:
        unknown.append("the window is shorter than one /proc/stat tick: no machine figures")
        warn.append(unknown[-1])
    busy, idle, steal = (t / sum(ticks) if sum(ticks) > 0 else 0.0 for t in ticks)
    return CpuReport(backend, interval, hi - lo, result, MachineCpu(cores, busy, idle, steal), warn, unknown)


#: roles judged by their busiest thread only. The ns-3 channel's simulator and TAP threads
#: share one core at one real-time priority by design (isolate_channel) and wait for each
#: other there, so their summed run + wait reaches 90 % of a core that is half idle (measured:
#: 90 % of the transfer "bound" at 0.58-0.86 cores); what the channel's CPU does to a run is
#: judged by its lag instead (quicbed/backends/ns3/stats.py).
BUSIEST_THREAD_ROLES = ("channel",)


def _wanted(sample: Sample, role: str, share: float) -> float:
    """How much of a core the role wanted in the interval ending at ``sample``: the larger of
    its busiest thread's demand and its threads' combined demand per core they may use; its
    CPU share (cores used) where schedstat gave neither."""
    if role not in sample.demand and role not in sample.combined:
        return share
    combined = 0.0 if role in BUSIEST_THREAD_ROLES else sample.combined.get(role, 0.0)
    return max(sample.demand.get(role, 0.0), combined)


def _pct(x: float) -> str:
    return f"{round(100 * x)} %"


def saturation_reasons(
    report: CpuReport, roles: Sequence[str] = JUDGED_ROLES, threshold_share: float = SATURATED_FRACTION
) -> list[str]:
    """Human reasons why a figure may be CPU-limited rather than network-limited; [] if none,
    which says nothing where ``report.unknown`` names what could not be seen."""
    reasons = [
        f"{role} was CPU-bound (>= {_pct(SATURATION)} of a core) for {_pct(cpu.saturated_share)} of the transfer"
        for role in roles
        if (cpu := report.roles.get(role)) is not None and cpu.saturated_share >= threshold_share
    ]
    machine = report.machine
    if report.window_s > 0 and machine.idle_share < MACHINE_IDLE_MIN:
        reasons.append(f"the machine was {_pct(machine.busy_share)} busy (idle below {_pct(MACHINE_IDLE_MIN)})")
    if report.window_s > 0 and machine.steal_share >= STEAL_MAX:
        reasons.append(f"the hypervisor took {_pct(machine.steal_share)} of the CPU time (steal)")
    return reasons
