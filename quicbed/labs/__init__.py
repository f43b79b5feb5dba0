"""Teaching labs: a task, starter files, automatic checks and a reference solution
(``quicbed lab``, docs/labs.md). A lab's checks.py uses what this package exports."""

from quicbed.labs.checking import CannotCheck, Verdict, check

__all__ = ["CannotCheck", "Verdict", "check"]
