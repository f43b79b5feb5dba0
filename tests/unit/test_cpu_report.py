"""quicbed.host.cpu_report: window arithmetic over samples, saturation reasons and what is
unknown. Deterministic, no root, nothing read from the host."""

from __future__ import annotations

import json

import pytest

from quicbed.host import cpu_report
from quicbed.host.cpu_report import CpuReport, MachineCpu, RoleCpu, Sample, compute_report, saturation_reasons
from quicbed.host.procfs import MachineTicks, parse_proc_stat

PROC_STAT_0 = """\
cpu  100 10 50 800 40 5 5 0 7 0
cpu0 50 5 25 400 20 3 2 0 7 0
cpu1 50 5 25 400 20 2 3 0 0 0
intr 12345 0 0
ctxt 999
"""
PROC_STAT_1 = """\
cpu  160 10 70 820 40 5 15 20 7 0
cpu0 90 5 35 405 20 3 7 10 7 0
cpu1 70 5 35 415 20 2 8 10 0 0
"""


def test_proc_stat_parse_and_delta():
    t0, cores = parse_proc_stat(PROC_STAT_0)
    t1, _ = parse_proc_stat(PROC_STAT_1)
    assert cores == 2
    assert t0 == MachineTicks(busy=100 + 10 + 50 + 5 + 5, idle=840, steal=0)
    assert (t1.busy - t0.busy, t1.idle - t0.idle, t1.steal - t0.steal) == (90, 20, 20)
    report = compute_report([Sample(0.0, {}, t0), Sample(1.0, {}, t1)], 0.0, 1.0, cores=cores)
    assert report.machine == MachineCpu(2, pytest.approx(90 / 130), pytest.approx(20 / 130), pytest.approx(20 / 130))


def _samples(server_rates, step=0.1, client_rate=0.0):
    """Synthetic samples every `step` s: server uses server_rates[i] cores in interval i."""
    samples, cumulative, machine = [], 0.0, 0
    for i in range(len(server_rates) + 1):
        samples.append(
            Sample(
                round(i * step, 9),
                {"server": cumulative, "client": client_rate * i * step},
                MachineTicks(busy=machine, idle=10 * i - machine, steal=0),
            )
        )
        if i < len(server_rates):
            cumulative += server_rates[i] * step
            machine += 5
    return samples


def test_window_figures_from_synthetic_samples():
    rates = [1.0] * 6 + [0.5] * 4  # 0.6 s at a full core, then 0.4 s at half a core
    samples = _samples(rates, client_rate=0.1)
    whole = compute_report(samples, float("-inf"), float("inf"), backend="test", interval=0.1, cores=2)
    server = whole.roles["server"]
    assert whole.window_s == pytest.approx(1.0)
    assert server.cpu_seconds == pytest.approx(0.8)
    assert server.mean_share == pytest.approx(0.8)
    assert server.peak_share == pytest.approx(1.0)
    assert server.saturated_share == pytest.approx(0.6)
    assert whole.roles["client"].cpu_seconds == pytest.approx(0.1)
    assert whole.machine.busy_share == pytest.approx(0.5) and whole.warnings == []
    # a window inside the samples: linear interpolation at its edges (0.55 .. 0.75 s)
    part = compute_report(samples, 0.55, 0.75, interval=0.1)
    assert part.window_s == pytest.approx(0.2)
    assert part.roles["server"].cpu_seconds == pytest.approx(0.05 * 1.0 + 0.15 * 0.5)
    assert part.roles["server"].saturated_share == pytest.approx(0.25)  # 0.05 of 0.2 s at a full core
    json.dumps(part.to_dict())


def test_window_edges_and_short_final_interval():
    samples = _samples([1.0] * 5)
    empty = compute_report(samples, 10.0, 11.0, interval=0.1)
    assert empty.window_s == 0 and "no CPU samples" in empty.warnings[0]
    partial = compute_report(samples, 0.0, 2.0, interval=0.1)
    assert any("cover only" in w for w in partial.warnings)
    # stop() takes a last sample right after the sampler's: its 2 ms interval, with coarse
    # counters, must not make a peak of its own but is merged into the one before it
    last = samples[-1]
    noisy = [*samples, Sample(last.t + 0.002, {"server": last.roles["server"] + 0.01}, last.machine)]
    assert compute_report(noisy, 0.0, 1.0, interval=0.1).roles["server"].peak_share < 1.2


def _report(saturated=0.0, idle=0.5, steal=0.0, window=2.0):
    roles = {"server": RoleCpu(1.5, 0.75, 1.0, saturated), "client": RoleCpu(0.1, 0.05, 0.2, 0.0)}
    return CpuReport("cgroup-v1", 0.1, window, roles, MachineCpu(2, 1 - idle - steal, idle, steal))


def test_saturation_reasons():
    assert saturation_reasons(_report()) == []
    assert saturation_reasons(_report(saturated=0.64)) == [
        "server was CPU-bound (>= 90 % of a core) for 64 % of the transfer"
    ]
    assert saturation_reasons(_report(saturated=0.1)) == []
    assert saturation_reasons(_report(saturated=0.1), threshold_share=0.05)[0].startswith("server")
    assert saturation_reasons(_report(saturated=0.64), roles=("client",)) == []
    assert saturation_reasons(_report(idle=0.03)) == ["the machine was 97 % busy (idle below 5 %)"]
    assert saturation_reasons(_report(idle=0.5, steal=0.08)) == []  # a few % of steal is common on cloud VMs
    assert saturation_reasons(_report(idle=0.5, steal=0.25)) == ["the hypervisor took 25 % of the CPU time (steal)"]
    assert saturation_reasons(_report(idle=0.0, window=0.0)) == []  # no data is not a reason


def test_demand_decides_saturation_where_schedstat_gives_it():
    """An interval where a thread ran 50 % and waited 45 % of the time is CPU-bound; one where
    it ran 95 % of a core but no demand was read falls back to the CPU share."""
    machine = MachineTicks(0, 0, 0)
    samples = [
        Sample(0.0, {"client": 0.0}, machine),
        Sample(1.0, {"client": 0.5}, machine, {"client": 0.95}),
        Sample(2.0, {"client": 1.0}, machine, {"client": 0.5}),
        Sample(3.0, {"client": 1.95}, machine),
    ]
    report = compute_report(samples, 0.0, 3.0, interval=1.0, roles=["client"])
    assert report.roles["client"].saturated_share == pytest.approx(2 / 3)
    assert report.roles["client"].peak_share == pytest.approx(0.95)


def _roles(**bound: float) -> dict[str, RoleCpu]:
    """Every role of a run, idle, except those given with their CPU-bound share."""
    names = ("server", "client", "competitor", "background", "capture", "channel", "stress")
    return {name: RoleCpu(0.1, 0.05, 0.2, bound.get(name, 0.0)) for name in names}


def test_a_cpu_bound_competitor_or_channel_flags_the_run_but_load_that_is_no_endpoint_does_not():
    """The second download of a competitor run is as much a part of the measurement as the
    first: its client or server starved of CPU changes the shares both get."""
    machine = MachineCpu(2, 0.5, 0.5, 0.0)
    competitor = CpuReport("cgroup-v1", 0.1, 2.0, _roles(competitor=0.5), machine)
    assert saturation_reasons(competitor) == ["competitor was CPU-bound (>= 90 % of a core) for 50 % of the transfer"]
    assert saturation_reasons(CpuReport("cgroup-v1", 0.1, 2.0, _roles(channel=0.3), machine))[0].startswith("channel")
    # stress load is CPU-bound by design, captures and background traffic are no endpoint
    idle = CpuReport("cgroup-v1", 0.1, 2.0, _roles(stress=1.0, background=1.0, capture=1.0), machine)
    assert saturation_reasons(idle) == []
    assert set(cpu_report.JUDGED_ROLES) == {"server", "client", "competitor", "channel"}


def test_missing_cpu_data_is_unknown_not_fine():
    """No samples over the transfer, or samples over only part of it, or a role that could not
    be read: the run is not CPU-bound as far as anyone knows, but nor is it known to be fine."""
    samples = _samples([1.0] * 5)
    nothing = compute_report(samples, 10.0, 11.0, interval=0.1)
    assert saturation_reasons(nothing) == []  # no data is no reason to call it CPU-bound...
    assert nothing.unknown == ["no CPU samples cover the window (6 samples)"]  # ...nor to call it fine
    part = compute_report(samples, 0.0, 2.0, interval=0.1)
    assert part.unknown == ["samples cover only 0.500 s of the 2.000 s window"]
    assert compute_report(samples, 0.0, 0.5, interval=0.1).unknown == []
    gap = compute_report(samples, 0.0, 0.5, interval=0.1, gaps=["cannot read the CPU usage of client: gone"])
    assert gap.unknown == ["cannot read the CPU usage of client: gone"]
    still = [Sample(0.0, {}, MachineTicks(5, 5, 0)), Sample(0.005, {}, MachineTicks(5, 5, 0))]
    assert compute_report(still, 0.0, 0.005).unknown == [
        "the window is shorter than one /proc/stat tick: no machine figures"
    ]


def test_a_run_without_cpu_accounting_records_why_its_cpu_state_is_unknown():
    """Accounting that could not start (no cgroup, no /proc) leaves the run unflagged and says
    so in its details and on its result line, instead of passing it as not CPU-bound."""
    from types import SimpleNamespace

    from quicbed.runner.engine import result_text
    from quicbed.runner.transfer import RunExecution

    execution = SimpleNamespace(details={"cpu": {"error": "CPU accounting unavailable: no /proc/stat"}})
    RunExecution._record_cpu(execution, None, {})  # type: ignore[arg-type]
    assert execution.details["cpu_bound_reasons"] == []
    assert execution.details["cpu_unknown_reasons"] == ["CPU accounting unavailable: no /proc/stat"]
    from quicbed.results import RunRecord

    record = RunRecord("c000-r001", 0, 0, {}, 1, False, cpu_unknown_reasons=execution.details["cpu_unknown_reasons"])
    assert result_text(record).endswith("[CPU state unknown: CPU accounting unavailable: no /proc/stat]")


def test_a_role_is_judged_by_its_threads_together_too():
    """Two threads that each want half of the one core they may use are never CPU-bound one by
    one, yet together they keep that core busy: the role's run + wait time over the cores it may
    use (``combined``) makes those intervals CPU-bound."""
    machine = MachineTicks(0, 0, 0)
    samples = [
        Sample(0.0, {"client": 0.0}, machine),
        Sample(1.0, {"client": 1.0}, machine, {"client": 0.55}, combined={"client": 1.1}),
        Sample(2.0, {"client": 1.4}, machine, {"client": 0.2}, combined={"client": 0.4}),
        Sample(3.0, {"client": 2.4}, machine, {"client": 0.6}, combined={"client": 0.95}),
    ]
    report = compute_report(samples, 0.0, 3.0, interval=1.0, roles=["client"])
    assert report.roles["client"].saturated_share == pytest.approx(2 / 3)
    assert "client was CPU-bound" in saturation_reasons(report)[0]


def test_the_channel_is_judged_by_its_busiest_thread_only():
    """The channel's simulator and TAP threads share one core by design and wait for each other:
    their summed demand (1.2 here) says nothing about a core used at 0.6; its busiest thread and
    its lag do."""
    machine = MachineTicks(0, 0, 0)
    samples = [
        Sample(0.0, {"channel": 0.0}, machine),
        Sample(1.0, {"channel": 0.6}, machine, {"channel": 0.6}, combined={"channel": 1.2}),
        Sample(2.0, {"channel": 1.55}, machine, {"channel": 0.95}, combined={"channel": 1.3}),
    ]
    report = compute_report(samples, 0.0, 2.0, interval=1.0, roles=["channel"])
    assert report.roles["channel"].saturated_share == pytest.approx(1 / 2)  # the second interval only
