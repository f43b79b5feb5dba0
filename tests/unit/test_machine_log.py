"""The machine's record that failed tests quote (tests/machine_log.py)."""

from __future__ import annotations

import time

from machine_log import MachineLog, describe
from quicbed.host.procfs import MachineTicks


def test_the_worst_second_of_steal_stands_out_of_the_average() -> None:
    # 2 CPUs at 100 ticks/s, sampled every second for 10 s: idle but for one second in which
    # the hypervisor took 60 of the 200 ticks
    samples, busy, idle, steal = [], 0, 0, 0
    for second in range(11):
        samples.append((100.0 + second, MachineTicks(busy, idle, steal)))
        grabbed = 120 if second == 6 else 0
        busy, idle, steal = busy + 20, idle + 180 - grabbed, steal + grabbed
    text = describe(samples, cores=2)
    assert text is not None
    assert "over 10 s" in text and "busy 10%" in text and "stolen by the hypervisor 6.0%" in text, text
    assert "at worst 60% for 1.0 s, 6 s in" in text, text


def test_nothing_to_say_without_two_samples_or_time() -> None:
    assert describe([], cores=2) is None
    assert describe([(1.0, MachineTicks(5, 5, 0))], cores=2) is None
    assert describe([(1.0, MachineTicks(5, 5, 0)), (2.0, MachineTicks(5, 5, 0))], cores=2) is None


def test_the_log_samples_this_machine_in_the_background() -> None:
    log = MachineLog(interval=0.05).start()
    start = time.monotonic()
    try:
        time.sleep(0.3)
        text = log.summary(start)
    finally:
        log.stop()
    assert text is not None and "CPUs over" in text, text
    assert len(log.samples) >= 4


def test_without_steal_no_worst_moment_is_named() -> None:
    text = describe([(1.0, MachineTicks(0, 0, 0)), (2.0, MachineTicks(50, 150, 0))], cores=2)
    assert text is not None and text.endswith("stolen by the hypervisor 0.0% (0.0 CPU-seconds)"), text
