"""pytest plugin: kernel-feature tests run for real, in a guest kernel when the host kernel lacks the feature.

Markers
  needs_kernel("netem", ...)   the test needs these kernel features (netem, mac80211_hwsim,
                               openvswitch) and root. If the host kernel has them, the test runs
                               here; otherwise every such test of the session runs in ONE microVM
                               (quicbed.host.vm) and is reported here with its in-VM outcome.
  needs_kernel(..., virtual_time=True)
                               the test may run in the virtual-time kernel instead (User-Mode
                               Linux, quicbed.host.uml: the features built in, sleeps cost no host
                               time). Where that kernel is built, all such tests run in ONE boot of
                               it; the Mininet-WiFi tests take 4 min there against 14 in the
                               software-emulated microVM. Without it they join the microVM.
  needs_root                   skipped unless pytest runs as root.
  slow                         deselected unless --run-slow or a -m expression naming "slow".

--require-feature FEATURE (repeatable; the test command gives it for mac80211_hwsim, because it
installs Mininet-WiFi): a test needing FEATURE that skips, here or in the microVM, fails
instead, with its skip reason, so that a run cannot pass while the tests of a backend never ran.

How a guest session works (the microVM's; the virtual-time kernel's is the same with
quicbed.host.uml.boot.run_in_uml): the first time a test that needs the VM is due, the plugin
boots the VM once with ``python -m pytest -p no:cacheprovider --junitxml=JOB/junit.xml
<all such node ids>`` (cwd = rootdir, environment QUICBED_PYTEST_IN_VM=1 so that the
in-VM pytest runs them directly, modules for the features loaded first). Each host-side
test is then reported from junit.xml: passed, failed (with the in-VM failure text) or
skipped (with the in-VM reason). Fixtures of these tests run only inside the VM.

A test that runs longer than --vm-test-timeout seconds of host time in a guest is failed as
hung (the in-guest pytest writes "start NODEID" and "end NODEID" to JOB/progress, which the
host follows), and the other tests run again in a new boot: in virtual time a loop that polls
without sleeping never lets the clock move, so a test's own timeouts cannot end it.

If the VM is not available (no vng, QEMU or cached kernel, or not root) the tests are
skipped with the reason and the fix ('quicbed vm setup'). --no-vm skips instead of
booting; --vm-verbose shows the VM console and the in-VM pytest output.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _pytest.reports import TestReport
from _pytest.runner import CallInfo

IN_VM_PYTEST = "QUICBED_PYTEST_IN_VM"
#: feature name -> kernel module the VM must load for it
FEATURES = {"netem": "sch_netem", "mac80211_hwsim": "mac80211_hwsim", "openvswitch": "openvswitch"}
#: how the microVM loads them: hwsim without radios of its own, as Mininet-WiFi loads it (a
#: root-namespace wlan0 would take the name a station radio needs to return there)
VM_MODULES = {**FEATURES, "mac80211_hwsim": "mac80211_hwsim radios=0"}

#: the guest kernels, by what the plugin calls them
MICROVM, UML = "microVM", "virtual-time kernel"
#: host seconds a test in a guest may take before it counts as hung. In virtual time a busy
#: loop never ends, so a test can hang where a real-time one would time out by itself. The
#: slowest took 89-111 s here (a lab's reference solution, the clean-after-SIGKILL test, in the
#: virtual-time kernel; the microVM's slowest, 27 s); the limit leaves five times that.
TEST_TIMEOUT = 600.0
#: host seconds a guest may take to end once its pytest wrote its results (it takes a second
#: or two). The virtual-time kernel can livelock there: perf showed it spinning in
#: shrink_dcache_parent() -> d_walk(), whose cond_resched() waits for another task that never
#: runs, because with time-travel=inf-cpu no time passes while the kernel is busy.
AFTER_RESULTS_TIMEOUT = 60.0
#: boots of one guest's session at most: the first, then one more after each hung test
MAX_BOOTS = 3
#: the file in the job folder where the guest's pytest writes "start NODEID" and "end NODEID"
PROGRESS_FILE = "progress"
#: the guest an item runs in
_VM_ITEM = pytest.StashKey[str]()
_SESSION = pytest.StashKey[dict[str, "VmSession"]]()


# --- options and markers ---------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("quicbed", "quicbed kernel features and microVM")
    group.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
    group.addoption(
        "--no-vm",
        action="store_true",
        default=False,
        help="skip needs_kernel tests this kernel cannot run instead of running them in a guest kernel",
    )
    group.addoption(
        "--vm-verbose",
        action="store_true",
        default=False,
        help="show the guest kernel's console and the output of the pytest run inside it",
    )
    group.addoption(
        "--vm-timeout",
        type=float,
        default=None,
        metavar="S",
        help="kill a guest's test session after S seconds (default 600 + 120 per test)",
    )
    group.addoption(
        "--vm-test-timeout",
        type=float,
        default=TEST_TIMEOUT,
        metavar="S",
        help=f"a test in a guest that has not finished after S seconds of host time is failed as hung, "
        f"and the guest's other tests run in a new boot (default {TEST_TIMEOUT:.0f})",
    )
    group.addoption("--vm-memory", default="2G", help="microVM memory (default 2G)")
    group.addoption(
        "--require-feature",
        action="append",
        default=[],
        metavar="FEATURE",
        help="a needs_kernel(FEATURE) test that skips fails instead (repeatable)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs_kernel(*features): needs root and these kernel features (netem, mac80211_hwsim, "
        "openvswitch); runs in the quicbed microVM if this kernel lacks them (with virtual_time=True "
        "in the virtual-time kernel where it is built)",
    )
    config.addinivalue_line("markers", "needs_root: skipped unless run as root")
    config.addinivalue_line("markers", "slow: takes long; deselected unless --run-slow or -m slow")
    unknown = [f for f in config.getoption("require_feature") if f not in FEATURES]
    if unknown:
        raise pytest.UsageError(
            f"--require-feature: unknown feature {', '.join(unknown)} (known: {', '.join(FEATURES)})"
        )
    config.stash[_SESSION] = {guest: VmSession(config, guest=guest) for guest in (MICROVM, UML)}


# --- probing the running kernel --------------------------------------------------------


def running_in_vm_session() -> bool:
    """True in the pytest that the plugin started inside a guest kernel."""
    return os.environ.get(IN_VM_PYTEST) == "1"


def _netem_probe() -> bool:
    name = f"qbprobe{os.getpid()}"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False
    try:
        if subprocess.run(["ip", "netns", "add", name], capture_output=True, check=False).returncode:
            return False
        return (
            subprocess.run(
                ["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                capture_output=True,
                check=False,
            ).returncode
            == 0
        )
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _module_probe(module: str) -> bool:
    """Loaded, or loadable right now (loaded then unloaded again, so tests start clean)."""
    if Path(f"/sys/module/{module}").exists():
        return True
    if shutil.which("modprobe") is None and not os.access("/sbin/modprobe", os.X_OK):
        return False
    modprobe = shutil.which("modprobe") or "/sbin/modprobe"
    loaded = subprocess.run([modprobe, module], capture_output=True, check=False).returncode == 0
    if loaded:
        subprocess.run([modprobe, "-r", module], capture_output=True, check=False)
    return loaded


@functools.cache
def kernel_has(feature: str) -> bool:
    """Whether the running kernel offers ``feature`` (found by trying; needs root)."""
    if os.geteuid() != 0:
        return False
    if feature == "netem":
        try:
            from quicbed.host.capabilities import has_netem
        except ImportError:
            return _netem_probe()
        return bool(has_netem())
    return _module_probe(FEATURES[feature])


def required_skip(item: pytest.Item) -> str:
    """Why a skip of ``item`` is a failure: it needs a feature --require-feature names (else '')."""
    required = [f for f in item_features(item) if f in item.config.getoption("require_feature")]
    if not required:
        return ""
    return (
        f"this test needs {', '.join(required)}, which this test run requires (--require-feature), but it was skipped: "
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: CallInfo[None]) -> Any:
    outcome = yield
    report: TestReport = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        failure = required_skip(item)
        if failure:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = failure + reason


def item_guest(item: pytest.Item) -> str:
    """The guest kernel for an item this kernel cannot run: the virtual-time kernel where the
    test allows it and that kernel is built with its features, the microVM otherwise."""
    allowed = all(marker.kwargs.get("virtual_time", False) for marker in item.iter_markers("needs_kernel"))
    return UML if allowed and uml_kernel_has(tuple(item_features(item))) else MICROVM


@functools.cache
def uml_kernel_has(features: tuple[str, ...]) -> bool:
    try:
        from quicbed.host.capabilities import MODULE_SYMBOLS, config_has
        from quicbed.host.uml.build import cached_uml_kernel
    except ImportError:
        return False
    kernel = cached_uml_kernel()
    if kernel is None or not kernel.binary.exists():
        return False
    try:
        config = (kernel.root / "config").read_text()
    except OSError:
        return False
    return all(config_has(MODULE_SYMBOLS[FEATURES[feature]], config) for feature in features)


def item_features(item: pytest.Item) -> list[str]:
    features: list[str] = []
    for marker in item.iter_markers("needs_kernel"):
        for feature in marker.args:
            if feature not in FEATURES:
                raise pytest.UsageError(
                    f"{item.nodeid}: unknown needs_kernel feature {feature!r} (known: {', '.join(FEATURES)})"
                )
            if feature not in features:
                features.append(feature)
    return features


# --- collection ------------------------------------------------------------------------


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("run_slow") and "slow" not in (config.getoption("markexpr") or ""):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]

    root = os.geteuid() == 0
    vm_items: list[pytest.Item] = []
    for item in items:
        needs_kernel = item.get_closest_marker("needs_kernel") is not None
        if (needs_kernel or item.get_closest_marker("needs_root")) and not root:
            item.add_marker(pytest.mark.skip(reason="needs root: run pytest as root (e.g. sudo)"))
            continue
        if not needs_kernel:
            continue
        features = item_features(item)
        if running_in_vm_session():
            continue  # the host sent it here because the guest has what it needs
        missing = [feature for feature in features if not kernel_has(feature)]
        if not missing:
            continue
        if config.getoption("no_vm"):
            item.add_marker(pytest.mark.skip(reason=f"this kernel lacks {', '.join(missing)} and --no-vm was given"))
            continue
        item.stash[_VM_ITEM] = item_guest(item)
        vm_items.append(item)

    for guest, vm_session in config.stash[_SESSION].items():
        guest_items = [item for item in vm_items if item.stash[_VM_ITEM] == guest]
        if not guest_items:
            continue
        usable, reason = vm_session.available()
        if not usable:
            for item in guest_items:
                del item.stash[_VM_ITEM]
                missing = [f for f in item_features(item) if not kernel_has(f)]
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"this kernel lacks {', '.join(missing)} and the {guest} that would provide it is "
                        f"not available: {reason}"
                    )
                )
        else:
            vm_session.items = guest_items


# --- in the guest: which test runs, for the host's watchdog ---------------------------------


def _note_progress(event: str, nodeid: str) -> None:
    job = os.environ.get("QUICBED_VM_JOB_DIR")
    if not (running_in_vm_session() and job):
        return
    # opened per line, so that the host reads each line as soon as it is written
    with open(Path(job) / PROGRESS_FILE, "a", encoding="utf-8") as file:
        file.write(f"{event} {nodeid}\n")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _note_progress("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _note_progress("end", nodeid)


@dataclass
class HungTestWatchdog:
    """Follows a guest's progress file from the host. A test running for more than ``limit``
    seconds of host time is hung; so is a guest with no test running that wrote nothing for as
    long (its boot and collection before the first test, or after the last), and a guest that
    has not ended AFTER_RESULTS_TIMEOUT seconds after its pytest wrote ``results``. Calling it
    returns why, else ''."""

    progress: Path
    limit: float
    #: the guest pytest's results file: once it exists, the guest must end within AFTER_RESULTS_TIMEOUT
    results: Path | None = None
    running: str = ""
    #: when the host saw the last line (or made the watchdog, before the first)
    since: float = field(default_factory=time.monotonic)
    last_ended: str = ""
    #: host seconds each finished test took (to within the 0.2 s between two looks)
    took: dict[str, float] = field(default_factory=dict)
    _offset: int = 0

    def __call__(self) -> str:
        try:
            with open(self.progress, "rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            data = b""
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode("utf-8", "replace").splitlines():
            event, _, nodeid = line.partition(" ")
            if event == "start":
                self.running, self.since = nodeid, time.monotonic()
            elif event == "end" and nodeid == self.running:
                self.took[nodeid] = time.monotonic() - self.since
                self.running, self.last_ended, self.since = "", nodeid, time.monotonic()
        if self.results_written():
            if time.monotonic() - self.since <= min(self.limit, AFTER_RESULTS_TIMEOUT):
                return ""
            return (
                f"the guest did not end within {min(self.limit, AFTER_RESULTS_TIMEOUT):.0f} s of host time after "
                "its pytest wrote its results"
            )
        if time.monotonic() - self.since <= self.limit:
            return ""
        if self.running:
            return (
                f"the test {self.running} had not finished after {self.limit:.0f} s of host time, so it counts "
                "as hung (--vm-test-timeout sets the limit)"
            )
        when = f"after the test {self.last_ended} ended" if self.last_ended else "before its first test began"
        return f"the guest's pytest wrote no progress for {self.limit:.0f} s of host time {when}"

    def results_written(self) -> bool:
        """The guest's pytest has finished its tests and written their results."""
        return not self.running and bool(self.last_ended) and self.results is not None and self.results.exists()


# --- running: one VM for all, reports from its junit.xml --------------------------------


@dataclass
class Outcome:
    outcome: str  # passed | failed | skipped | xfailed | error
    message: str = ""
    text: str = ""
    when: str = "call"
    seconds: float = 0.0
    teardown_error: str = ""


@dataclass
class VmSession:
    config: pytest.Config
    guest: str = MICROVM
    items: list[pytest.Item] = field(default_factory=list)
    outcomes: dict[str, Outcome] | None = None
    failure: str = ""
    job_dir: Path | None = None
    seconds: float = 0.0
    reported_failure: bool = False
    #: the in-VM pytest's exit status and its session-level ERROR lines (e.g. leftover folders)
    returncode: int | None = None
    session_errors: list[str] = field(default_factory=list)
    #: one per boot: which tests ran and how long each took in host time
    watchdogs: list[HungTestWatchdog] = field(default_factory=list)
    #: what went wrong in a guest after its tests' results were complete (told, not failed)
    warnings: list[str] = field(default_factory=list)

    def available(self) -> tuple[bool, str]:
        if self.guest == UML:
            return True, ""  # item_guest chose it because it is built
        try:
            from quicbed.host import vm
        except ImportError as error:
            return False, f"quicbed.host.vm cannot be imported ({error})"
        return vm.vm_available(allow_fetch=False)

    def _write(self, message: str) -> None:
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        capture = self.config.pluginmanager.getplugin("capturemanager")
        context = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
        with context:
            if reporter is not None:
                reporter.write_line(message)
            else:
                print(message, file=sys.stderr)

    def outcome(self, item: pytest.Item) -> Outcome:
        if self.outcomes is None:
            self.outcomes = {}
            self._run_all()
        if item.nodeid in self.outcomes:
            return self.outcomes[item.nodeid]
        if self.failure:
            if self.reported_failure:
                return Outcome(
                    "failed",
                    f"{self.guest} session failed",
                    f"the {self.guest} test session failed; see the first test that ran in it for the details",
                )
            self.reported_failure = True
            return Outcome("failed", f"{self.guest} session failed", self.failure)
        return Outcome(
            "failed",
            f"no result from the {self.guest}",
            f"the pytest run inside the {self.guest} reported nothing for {item.nodeid}; see {self.job_dir}/output",
        )

    def _run_all(self) -> None:
        """Run the session's tests in one boot; a test that hangs is failed as such, and the
        others run again in a new boot (at most MAX_BOOTS in all)."""
        assert self.outcomes is not None
        pending = [item.nodeid for item in self.items]
        for boot in range(1, MAX_BOOTS + 1):
            hung = self._run(pending)
            if not hung:
                return
            limit = self.config.getoption("vm_test_timeout")
            self.outcomes[hung] = Outcome(
                "failed", f"hung: not finished after {limit:.0f} s of host time", self.failure
            )
            self.failure = ""
            pending = [nodeid for nodeid in pending if nodeid != hung]
            if not pending:
                return
            if boot < MAX_BOOTS:
                self._write(f"quicbed: {hung} hung; its {len(pending)} fellow test(s) run again in a new boot")
        self.failure = (
            f"not run: {MAX_BOOTS} tests hung in the {self.guest} (each failed as such), so the session's other "
            "tests were given up"
        )

    def _run(self, nodeids: list[str]) -> str:
        """Boot the guest once to run ``nodeids``; their outcomes go to ``outcomes``, a failure of
        the whole session to ``failure``. Returns the node id of a test that hung ('' if none)."""
        from quicbed.host import vm

        config = self.config
        items = [item for item in self.items if item.nodeid in nodeids]
        features = sorted({f for item in items for f in item_features(item)})
        timeout = config.getoption("vm_timeout") or 600.0 + 120.0 * len(nodeids)
        verbose = config.getoption("vm_verbose")
        try:
            self.job_dir = vm.new_job_dir()
        except vm.VmError as error:
            self.failure = str(error)
            return ""
        junit = self.job_dir / "junit.xml"
        watchdog = HungTestWatchdog(self.job_dir / PROGRESS_FILE, config.getoption("vm_test_timeout"), junit)
        self.watchdogs.append(watchdog)
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--run-slow",
            "--rootdir",
            str(config.rootpath),
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit2",
            "-q",
            "-rfEs",
        ]
        if config.inipath is not None:
            argv += ["-c", str(config.inipath)]
        argv += nodeids
        run, described = self._runner(features)
        self._write(
            f"\nquicbed: this kernel lacks {', '.join(f for f in features if not kernel_has(f))}: "
            f"running {len(nodeids)} test(s) in one {described}; job {self.job_dir})"
        )
        started = time.monotonic()
        capture = config.pluginmanager.getplugin("capturemanager")
        context = capture.global_and_fixture_disabled() if (capture and verbose) else contextlib.nullcontext()
        try:
            with context:
                result = run(
                    argv,
                    cwd=config.rootpath,
                    # unbuffered: a guest killed as hung still shows what its tests last wrote
                    env={IN_VM_PYTEST: "1", "PYTHONUNBUFFERED": "1"},
                    timeout=timeout,
                    verbose=verbose,
                    stream=sys.stdout if verbose else None,
                    progress=self._write if verbose else None,
                    job_dir=self.job_dir,
                    watchdog=watchdog,
                )
        except vm.VmError as error:
            self.seconds += time.monotonic() - started
            if isinstance(error, vm.VmStalled) and watchdog.results_written():
                # every test ran and its outcome is in junit.xml: the guest's end is not theirs
                self.warnings.append(f"the {self.guest} was stopped after its tests: {str(error).splitlines()[0]}")
                return self._read_junit(junit, nodeids, started, "stopped after writing its results")
            self.failure = f"the {self.guest} test session failed after {time.monotonic() - started:.0f} s: {error}"
            return watchdog.running if isinstance(error, vm.VmStalled) else ""
        self.seconds += time.monotonic() - started
        self.returncode = result.returncode
        self.session_errors = [line for line in result.output.splitlines() if line.startswith("ERROR: ")]
        if not junit.exists():
            self.failure = (
                f"the pytest run inside the {self.guest} wrote no {junit} (exit code {result.returncode}); "
                f"its output ends with:\n" + "\n".join(result.output.splitlines()[-30:])
            )
            return ""
        return self._read_junit(junit, nodeids, started, f"in-guest pytest exit code {result.returncode}")

    def _read_junit(self, junit: Path, nodeids: list[str], started: float, how: str) -> str:
        try:
            assert self.outcomes is not None
            self.outcomes.update(parse_junit(junit.read_text(), nodeids))
        except ET.ParseError as error:
            self.failure = f"{junit} is not valid XML ({error})"
            return ""
        self._write(
            f"quicbed: {self.guest} test session done in {time.monotonic() - started:.0f} s "
            f"({how}; output in {self.job_dir}/output)"
        )
        return ""

    def _runner(self, features: list[str]) -> tuple[Any, str]:
        """The function that runs a command in this session's guest, and how to describe it."""
        from quicbed.host import vm

        if self.guest == UML:
            from quicbed.host.uml import boot
            from quicbed.host.uml.build import cached_uml_kernel

            kernel = cached_uml_kernel()
            return boot.run_in_uml, (
                f"boot of the virtual-time kernel ({kernel.describe() if kernel else '?'}, "
                "its features built in, sleeps cost no host time"
            )
        from quicbed.host.kernel import cached_kernel

        image = cached_kernel()
        kvm, _ = vm.kvm_status(image)
        run = functools.partial(
            vm.run_in_vm,
            memory=self.config.getoption("vm_memory"),
            cpus=min(2, os.cpu_count() or 1),
            modules=[VM_MODULES[f] for f in features],
        )
        return run, (
            f"microVM (kernel {image.version if image else '?'}, "
            f"{'KVM' if kvm else 'software emulation ~13x slower'}; boot 15-90 s"
        )


def junit_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) that pytest's junitxml writes for ``nodeid`` (no junit_prefix)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def parse_junit(text: str, nodeids: list[str]) -> dict[str, Outcome]:
    """Outcomes per node id from a junit.xml written by pytest (xunit2)."""
    wanted = {junit_key(nodeid): nodeid for nodeid in nodeids}
    outcomes: dict[str, Outcome] = {}
    for case in ET.fromstring(text).iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        nodeid = wanted.get(key)
        if nodeid is None:
            continue
        seconds = float(case.get("time") or 0)
        outcome = Outcome("passed", seconds=seconds)
        for child in case:
            message, body = child.get("message", ""), (child.text or "")
            if child.tag == "skipped" and child.get("type") == "pytest.xfail":
                outcome = Outcome("xfailed", message, body, "call", seconds)
            elif child.tag == "skipped":
                outcome = Outcome("skipped", message, body, "setup", seconds)
            elif child.tag == "failure":
                outcome = Outcome("failed", message, body, "call", seconds, outcome.teardown_error)
            elif child.tag == "error":
                if "teardown" in message:
                    outcome.teardown_error = body or message
                else:
                    outcome = Outcome("error", message, body, "setup", seconds)
        outcomes[nodeid] = outcome
    return outcomes


@dataclass
class _CrashLine:
    path: str
    lineno: int
    message: str


class VmFailureRepr:
    """A failure that happened in a guest: its text, plus the one line summaries show."""

    def __init__(self, item: pytest.Item, result: Outcome, where: str, guest: str = MICROVM) -> None:
        self.text = f"{result.text or result.message}\n{where}"
        first = (result.message or result.text or "failed").strip().splitlines()
        self.reprcrash = _CrashLine(
            str(item.path), (item.location[1] or 0) + 1, f"{first[0] if first else 'failed'} (in the {guest})"
        )

    def toterminal(self, out: Any) -> None:
        for line in self.text.splitlines():
            out.line(line)

    def __str__(self) -> str:
        return self.text


def _report(item: pytest.Item, when: str, outcome: str, longrepr: Any = None, seconds: float = 0.0) -> TestReport:
    now = time.time()
    return TestReport(
        item.nodeid,
        item.location,
        {name: 1 for name in item.keywords},
        outcome,
        longrepr,
        when,
        sections=(),
        duration=seconds,
        start=now - seconds,
        stop=now,
        user_properties=list(item.user_properties),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    guest = item.stash.get(_VM_ITEM, "")
    if not guest:
        return None
    session: VmSession = item.config.stash[_SESSION][guest]
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    result = session.outcome(item)
    where = f"(in the {guest}; job {session.job_dir})"
    required = required_skip(item)
    if result.outcome == "skipped" and required:
        ihook.pytest_runtest_logreport(
            report=_report(item, "setup", "failed", f"{required}{result.message or 'skipped'} {where}")
        )
    elif result.outcome == "skipped":
        line = item.location[1]
        reason = result.message or "skipped"
        ihook.pytest_runtest_logreport(
            report=_report(item, "setup", "skipped", (str(item.path), (line or 0) + 1, f"Skipped: {reason} {where}"))
        )
    elif result.outcome == "error":
        ihook.pytest_runtest_logreport(
            report=_report(item, "setup", "failed", VmFailureRepr(item, result, where, guest))
        )
    else:
        ihook.pytest_runtest_logreport(report=_report(item, "setup", "passed"))
        if result.outcome == "xfailed":
            call = _report(item, "call", "skipped", None, result.seconds)
            call.wasxfail = f"{result.message} {where}".strip()  # type: ignore[attr-defined]
        elif result.outcome == "passed":
            call = _report(item, "call", "passed", seconds=result.seconds)
        else:
            call = _report(item, "call", "failed", VmFailureRepr(item, result, where, guest), result.seconds)
        ihook.pytest_runtest_logreport(report=call)
    # Host-side teardown: finishes fixtures of earlier tests that the next one does not share
    # (this test set none up here; the teardown hooks of other plugins expect a setup, so
    # only the setup state is wound down).
    if item.session.shouldfail or item.session.shouldstop:
        nextitem = None
    call = CallInfo.from_call(
        lambda: item.session._setupstate.teardown_exact(nextitem),
        when="teardown",
        reraise=(pytest.exit.Exception, KeyboardInterrupt),
    )
    teardown = TestReport.from_item_and_call(item, call)
    if result.teardown_error and teardown.passed:
        teardown = _report(item, "teardown", "failed", f"{result.teardown_error}\n{where}")
    ihook.pytest_runtest_logreport(report=teardown)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def unexplained_vm_failure(session: VmSession) -> str:
    """Why the in-VM pytest failed although none of its tests did (a check at the end of its
    session, such as the one for leftover temporary folders), or ''."""
    if session.outcomes is None or session.returncode in (None, 0):
        return ""
    if any(outcome.outcome in ("failed", "error") or outcome.teardown_error for outcome in session.outcomes.values()):
        return ""
    detail = "; ".join(session.session_errors) or f"see {session.job_dir}/output"
    return (
        f"the pytest run inside the {session.guest} ended with exit code {session.returncode}, its tests "
        f"passed: {detail}"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    sessions = session.config.stash.get(_SESSION, {})
    if any(unexplained_vm_failure(vm_session) for vm_session in sessions.values()) and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for guest, session in config.stash.get(_SESSION, {}).items():
        if session.outcomes is None:
            continue
        counts: dict[str, int] = {}
        for outcome in session.outcomes.values():
            counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
        summary = ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "no results"
        terminalreporter.write_sep("-", f"quicbed {guest}")
        terminalreporter.write_line(
            f"{len(session.items)} test(s) ran in the {guest} in {session.seconds:.0f} s: "
            f"{summary}; job directory {session.job_dir}"
        )
        took = {nodeid: seconds for watchdog in session.watchdogs for nodeid, seconds in watchdog.took.items()}
        if took:
            slowest = max(took, key=took.__getitem__)
            terminalreporter.write_line(
                f"slowest: {slowest} in {took[slowest]:.0f} s of host time (a test is failed as hung after "
                f"{config.getoption('vm_test_timeout'):.0f} s)"
            )
        for warning in session.warnings:
            terminalreporter.write_line(f"WARNING: {warning}")
        if session.failure:
            terminalreporter.write_line(session.failure.splitlines()[0])
        if unexplained_vm_failure(session):
            terminalreporter.write_line(f"ERROR: {unexplained_vm_failure(session)}")
