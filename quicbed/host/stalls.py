"""Stops of a process on a schedule (SIGSTOP, a sleep, SIGCONT), made by a helper process.

Tests and benches stall the ns-3 channel this way to see what a simulator short of CPU does.
The stops come from a small process of their own, because in a thread of a large Python process
(pytest late in a suite) a stop also lasts while that thread waits for the interpreter lock,
which a garbage collection or another thread may hold: pytest's full collections lasted up to
0.29 s over the unit tests here, and a "3 ms" stop that long judges another fault than the
one meant. The helper reports each stop's length, so the caller can see whether the fault was
the one it meant.

This file runs as a script (``python stalls.py PID STOP_S PERIOD_S LIMIT_S``): it imports only
the standard library, so the helper starts in a few ms.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

#: the longest a helper runs, whatever its caller does (s)
LIMIT_S = 60.0


@dataclass
class StallRecord:
    #: each stop's length, from just before SIGSTOP to just after SIGCONT (s)
    lengths_s: list[float] = field(default_factory=list)

    @property
    def stops(self) -> int:
        return len(self.lengths_s)

    @property
    def longest_s(self) -> float:
        return max(self.lengths_s, default=0.0)

    def beyond(self, threshold_s: float) -> float:
        """How long (s) the stops held the target past ``threshold_s``, summed: a channel
        stopped 7 ms was more than 4 ms behind for 3 ms of it, whatever it did."""
        return sum(max(0.0, length - threshold_s) for length in self.lengths_s)


class Stalls:
    """Stop process ``pid`` for ``stop_s`` every ``period_s`` (s) while the block runs; at its
    end, ``record`` holds what the helper did. The target is always continued: the helper ends
    its stop first, on leaving the block, on its parent's death and after ``limit_s``."""

    def __init__(self, pid: int, stop_s: float, period_s: float, limit_s: float = LIMIT_S) -> None:
        if not 0 < stop_s < period_s:
            raise ValueError(
                f"a stall of {stop_s} s every {period_s} s: the stop must be positive and shorter than the period"
            )
        self.argv = [sys.executable, "-I", __file__, str(pid), repr(stop_s), repr(period_s), repr(limit_s)]
        self.record = StallRecord()
        self._helper: subprocess.Popen | None = None

    def __enter__(self) -> Stalls:
        from quicbed.host.prctl import die_with_parent  # (not at the top: the helper runs this file alone)

        # SIGTERM, not SIGKILL, when this process dies: the helper then ends its stop before it exits
        self._helper = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: die_with_parent(signal.SIGTERM)
        )
        assert self._helper.stdout is not None
        try:
            started = self._helper.stdout.readline().strip() == "started"  # the first stop is under way
        except BaseException:  # (Ctrl-C: no block will end the helper)
            self._end()
            raise
        if not started:
            self._helper.wait()
            raise RuntimeError(f"the stall helper ended at once (exit {self._helper.returncode}): {self.argv}")
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        returncode, out = self._end()
        if kind is None:  # (else the block's own error is the news)
            if returncode != 0 or not out.strip():
                raise RuntimeError(f"the stall helper failed (exit {returncode}): {self.argv}")
            self.record = StallRecord(**json.loads(out))

    def _end(self) -> tuple[int, str]:
        """SIGTERM to the helper, which continues the target and prints its record."""
        assert self._helper is not None
        self._helper.send_signal(signal.SIGTERM)
        out, _ = self._helper.communicate(timeout=10)
        return self._helper.returncode, out


def run(pid: int, stop_s: float, period_s: float, limit_s: float) -> StallRecord:
    """Stop ``pid`` on the schedule until SIGTERM or ``limit_s``. SIGTERM stays blocked: one
    that comes during a stop waits for its end (SIGCONT), and the wait between stops ends on it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    record = StallRecord()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        began = time.monotonic()
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            break
        try:
            if record.stops == 0:
                print("started", flush=True)
            time.sleep(stop_s)
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        record.lengths_s.append(time.monotonic() - began)
        if signal.sigtimedwait({signal.SIGTERM}, period_s - stop_s) is not None:
            break
    if record.stops == 0:
        print("started", flush=True)  # (the target was gone: nothing to wait for)
    return record


def stop_once(pid: int, stop_s: float) -> float:
    """Stop ``pid`` once for ``stop_s``; how long the stop lasted (s)."""
    with Stalls(pid, stop_s, period_s=LIMIT_S) as stalls:
        pass
    return stalls.record.longest_s


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (Ctrl-C reaches the caller, which ends the helper)
    pid, stop_s, period_s, limit_s = int(sys.argv[1]), *map(float, sys.argv[2:5])
    done = run(pid, stop_s, period_s, limit_s)
    print(json.dumps({"lengths_s": done.lengths_s}), flush=True)
