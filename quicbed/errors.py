"""Errors quicbed reports to users: each names where the problem is and how to fix it."""

from __future__ import annotations

from pathlib import Path


class QuicbedError(Exception):
    """An error with a message meant for the user (printed without a traceback)."""


class SpecError(QuicbedError):
    """A topology or experiment description is invalid.

    ``source`` is the file (or object) it came from, ``field`` the dotted path of the
    offending value, ``fix`` what to do about it.
    """

    def __init__(self, message: str, *, field: str = "", fix: str = "", source: str = "") -> None:
        self.message = message
        self.field = field
        self.fix = fix
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(part for part in (self.source, self.field) if part)
        text = f"{where}: {self.message}" if where else self.message
        if self.fix:
            text += f" (fix: {self.fix})"
        return text

    def located(self, source: str) -> "SpecError":
        """Return the same error attributed to ``source`` (a file path) if it has none yet."""
        if self.source:
            return self
        return SpecError(self.message, field=self.field, fix=self.fix, source=source)


class MissingDependency(QuicbedError):
    """A binary, module or kernel feature a run needs is not available on this host."""


class BackendError(QuicbedError):
    """Realising a topology or running a process in it failed."""


class CommandTimeout(BackendError):
    """A command run to completion in a node outran its time limit (and was killed)."""


class MachineBusy(BackendError):
    """No attempt at a real-time measurement had the machine to itself: the hypervisor took
    CPU time during every one (quicbed.host.steal)."""


class VmError(QuicbedError):
    """The microVM could not run the command (the command's own failure is not an error)."""

    def __init__(self, message: str, *, log: Path | None = None, console_tail: str = "") -> None:
        super().__init__(message)
        self.log = log
        self.console_tail = console_tail


class VmTimeout(VmError):
    """The microVM did not finish within the timeout and was killed."""


class VmStalled(VmTimeout):
    """A watchdog found the guest's command stuck (e.g. one test that never ends) and killed the guest."""
