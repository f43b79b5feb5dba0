"""Signals and how processes end: Ctrl-C, SIGTERM and SIGHUP turned into exceptions that
``with`` blocks clean up after, held while a network is built or torn down, and a process's
end in words."""

from __future__ import annotations

import os
import signal
import time


def how_it_ended(returncode: int | None) -> str:
    """A process's end in words: "exited on signal 9 (SIGKILL)", "exited with status 1"."""
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            return f"exited on signal {-returncode}"
        return f"exited on signal {-returncode} ({name})"
    return f"exited with status {returncode}"


class deferred_signals:
    """Hold SIGINT/SIGTERM while the network is built or torn down, then deliver them.

    A Ctrl-C in the middle of creating namespaces would otherwise leave half of them.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> "deferred_signals":
        self.pending: list[int] = []
        self.previous = {}
        try:
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, lambda s, _f: self.pending.append(s))
        except ValueError:  # not the main thread: nothing to defer
            self.previous = {}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for signum in self.pending:
            os.kill(os.getpid(), signum)
            time.sleep(0)


#: termination signals received since install_termination_handlers (see raise_if_interrupted)
_received: list[int] = []


def install_termination_handlers() -> None:
    """Turn SIGTERM and SIGHUP into SystemExit so that ``with`` blocks clean up as for Ctrl-C,
    and note every signal, Ctrl-C included, for :func:`raise_if_interrupted`."""
    _received.clear()

    def _exit(signum: int, _frame: object) -> None:
        _received.append(signum)
        raise SystemExit(128 + signum)

    def _interrupt(signum: int, _frame: object) -> None:
        _received.append(signum)
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)
    signal.signal(signal.SIGINT, _interrupt)


def raise_if_interrupted() -> None:
    """Raise again a signal whose exception was lost. Python only prints an exception raised
    in an at-fork hook, ``__del__`` or a weakref callback, and a Ctrl-C that arrives while a
    process is being started lands in logging's at-fork hook: without this check the
    experiment would go on as if nothing had happened."""
    if _received:
        signum = _received[0]
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)
