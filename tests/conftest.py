"""Test configuration shared by all tests: loads the quicbed pytest plugin (tests/vm_plugin.py).

The plugin registers the markers ``needs_kernel(*features)``, ``needs_root`` and ``slow``
and runs kernel-feature tests in the microVM when this kernel lacks the feature; see
tests/vm_plugin.py and docs/microvm.md.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
_ROOT = _TESTS.parent
# 'pytest' (unlike 'python -m pytest') does not put the checkout on sys.path; quicbed
# need not be installed to be tested.
for _path in (str(_TESTS), str(_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

pytest_plugins = ["vm_plugin"]


def pytest_configure(config):
    """Import test modules by path unless told otherwise (--import-mode).

    tests/unit/test_vm.py and tests/integration/test_vm.py share a basename; pytest's
    default "prepend" mode cannot import both from folders without __init__.py.
    """
    given = [*config.invocation_params.args, *config.getini("addopts"),
             *os.environ.get("PYTEST_ADDOPTS", "").split()]
    if not any(str(arg).startswith("--import-mode") for arg in given):
        config.option.importmode = "importlib"



# --- no temporary folder left behind -----------------------------------------------------------

LEFTOVER_PREFIX = "quicbed-"
_BEFORE = pytest.StashKey[set]()


def quicbed_temp_entries(directory: str | None = None) -> set[str]:
    """Names in the temporary directory that quicbed code makes (``quicbed-*``)."""
    folder = directory or tempfile.gettempdir()
    try:
        return {name for name in os.listdir(folder) if name.startswith(LEFTOVER_PREFIX)}
    except OSError:
        return set()


def pytest_sessionstart(session):
    session.config.stash[_BEFORE] = quicbed_temp_entries()
    # A shell starts background jobs (`cmd &`, CI runners) with SIGINT ignored, and Python
    # keeps it ignored: the Ctrl-C tests would send SIGINT into the void. Tests get Python's
    # own Ctrl-C, as a user at a terminal has.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionfinish(session, exitstatus):
    """Fail a session whose tests (or the code they ran) left quicbed-* folders in the temp dir;
    tmp_path folders of passing tests go too (pytest.ini: tmp_path_retention_policy)."""
    left = sorted(quicbed_temp_entries() - session.config.stash.get(_BEFORE, set()))
    if left:
        print(f"\nERROR: the tests left {len(left)} folder(s) in {tempfile.gettempdir()}: {', '.join(left)} "
              "(every temporary folder a test or quicbed makes must be removed)")
        if session.exitstatus == 0:
            session.exitstatus = 1


# --- what the machine did during a failed test -------------------------------------------------

_MACHINE_AT_START = pytest.StashKey[tuple]()


def _machine_ticks() -> tuple | None:
    from quicbed.host.cpu import parse_proc_stat
    try:
        return parse_proc_stat(Path("/proc/stat").read_text())
    except OSError:
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_MACHINE_AT_START] = _machine_ticks()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report says how busy the machine was and how much CPU the hypervisor
    took (steal) while it ran: tests of the real-time channel fail when a VM loses its CPU,
    and the report should say so rather than leave it to guessing."""
    outcome = yield
    report = outcome.get_result()
    start = item.stash.get(_MACHINE_AT_START, None)
    end = _machine_ticks()
    if not report.failed or start is None or end is None:
        return
    (before, cores), (after, _) = start, end
    busy, idle, steal = (after.busy - before.busy, after.idle - before.idle, after.steal - before.steal)
    total = busy + idle + steal
    if total > 0:
        tick = os.sysconf("SC_CLK_TCK")
        report.sections.append(("machine during this test", (
            f"{cores} CPUs: busy {busy / total:.0%}, idle {idle / total:.0%}, stolen by the hypervisor "
            f"{steal / total:.1%} ({steal / tick:.1f} CPU-seconds); real-time tests of the ns-3 channel "
            "fail when the machine cannot give it a core")))
