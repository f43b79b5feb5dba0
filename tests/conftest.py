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
import time
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

from machine_log import MachineLog  # noqa: E402 (needs the path above)


def pytest_configure(config):
    """Import test modules by path unless told otherwise (--import-mode).

    tests/unit/test_vm.py and tests/integration/test_vm.py share a basename; pytest's
    default "prepend" mode cannot import both from folders without __init__.py.
    """
    given = [*config.invocation_params.args, *config.getini("addopts"), *os.environ.get("PYTEST_ADDOPTS", "").split()]
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
    session.config.stash[_MACHINE_LOG] = MachineLog().start()
    session.config.stash[_MODULE_START] = {}
    # A shell starts background jobs (`cmd &`, CI runners) with SIGINT ignored, and Python
    # keeps it ignored: the Ctrl-C tests would send SIGINT into the void. Tests get Python's
    # own Ctrl-C, as a user at a terminal has.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionfinish(session, exitstatus):
    """Fail a session whose tests (or the code they ran) left quicbed-* folders in the temp dir;
    tmp_path folders of passing tests go too (pytest.ini: tmp_path_retention_policy)."""
    if (log := session.config.stash.get(_MACHINE_LOG, None)) is not None:
        log.stop()
    left = sorted(quicbed_temp_entries() - session.config.stash.get(_BEFORE, set()))
    if left:
        print(
            f"\nERROR: the tests left {len(left)} folder(s) in {tempfile.gettempdir()}: {', '.join(left)} "
            "(every temporary folder a test or quicbed makes must be removed)"
        )
        if session.exitstatus == 0:
            session.exitstatus = 1


# --- what the machine did during a failed test -------------------------------------------------

_MACHINE_LOG = pytest.StashKey[MachineLog]()
_TEST_START = pytest.StashKey[float]()
_MODULE_START = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    now = time.monotonic()
    item.stash[_TEST_START] = now
    item.config.stash[_MODULE_START].setdefault(item.nodeid.split("::")[0], now)
    yield


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A real-time measurement none of whose attempts had the machine to itself (the hypervisor
    took CPU time during each: quicbed.errors.MachineBusy) judged the machine, not quicbed:
    the test skips with the measurement's own account."""
    from quicbed.errors import MachineBusy

    try:
        return (yield)
    except MachineBusy as busy:
        pytest.skip(f"this machine was too busy to measure: {busy}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report says what the machine did while it and its module ran (real-time
    tests of the ns-3 channel fail when a VM loses its CPU; the report should say so)."""
    outcome = yield
    report = outcome.get_result()
    log = item.config.stash.get(_MACHINE_LOG, None)
    if not report.failed or log is None:
        return
    module_start = item.config.stash[_MODULE_START].get(item.nodeid.split("::")[0])
    lines = [
        f"{what}: {text}"
        for what, since in (
            ("this test", item.stash.get(_TEST_START, None)),
            ("its module so far, fixtures included", module_start),
        )
        if since is not None and (text := log.summary(since))
    ]
    if lines:
        report.sections.append(
            (
                "machine during this test",
                "\n".join([*lines, "real-time tests of the ns-3 channel fail when the machine cannot give it a core"]),
            )
        )
