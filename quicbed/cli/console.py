"""The Rich console every subcommand prints with."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

#: table columns when the output goes to a file or a pipe: wide enough that a fix meant to
#: be copied (a package name, a path) is not cut
PIPE_WIDTH = 200


def output_console(**options: Any) -> Console:
    """The terminal's width on a terminal; otherwise PIPE_WIDTH for tables and lines left
    whole (a pipe's reader wraps them, not us)."""
    if sys.stdout.isatty():
        return Console(**options)
    return Console(width=PIPE_WIDTH, soft_wrap=True, **options)
