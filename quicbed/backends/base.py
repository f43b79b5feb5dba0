"""What every backend offers: a realised network whose nodes run processes.

A backend turns a Topology into a running ``Network``; ``network.node(name)`` gives a
``NodeHandle`` that starts processes inside that node (a network namespace). Everything a
network starts is stopped when the network stops, on any exit path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from quicbed.errors import BackendError, CommandTimeout
from quicbed.host.prctl import die_with_parent
from quicbed.host.signals import deferred_signals
from quicbed.spec.resolve import ResolvedTopology
from quicbed.spec.topology import Topology

if TYPE_CHECKING:
    from quicbed.spec.link import WiredLink


class CpuAccountant(Protocol):
    """What a network needs of a CPU accounting (quicbed.host.cpu_accounting.CpuAccounting)."""

    def preexec(self, role: str) -> Callable[[], None]: ...


def _preexec_for(network: "Network") -> Callable[[], object]:
    """The child's set-up before exec: die with quicbed, join the CPU role's cgroup if one is
    set, and keep to the cores the network allows (``endpoint_cores``)."""
    joining = (
        network.accounting.preexec(network.cpu_role)
        if network.accounting is not None and network.cpu_role is not None
        else None
    )
    cores = network.endpoint_cores
    if joining is None and cores is None:
        return die_with_parent

    def prepare() -> None:
        die_with_parent()
        if joining is not None:
            joining()
        if cores is not None:
            os.sched_setaffinity(0, cores)

    return prepare


class Process:
    """A process started in a node; its output goes to files when a log folder is given."""

    def __init__(
        self,
        node: str,
        name: str,
        argv: Sequence[str],
        popen: subprocess.Popen,
        stdout_path: Path | None,
        stderr_path: Path | None,
    ) -> None:
        self.node = node
        self.name = name
        self.argv = list(argv)
        self.popen = popen
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BackendError(
                f"{self.name} on {self.node} did not finish within {timeout:g} s ({' '.join(self.argv)})"
            ) from None

    def stop(self, grace: float = 3.0) -> int:
        """SIGTERM the process group, then SIGKILL after ``grace`` seconds."""
        if self.popen.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.popen.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        return self.popen.wait()

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path else ""

    def errors(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""

    def __repr__(self) -> str:
        return f"<Process {self.name} on {self.node} pid={self.pid} running={self.running}>"


class NodeHandle(ABC):
    """A node of a running network: runs processes in the node's network namespace."""

    def __init__(self, network: "Network", name: str) -> None:
        self.network = network
        self.name = name

    @abstractmethod
    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped so that it executes inside this node."""

    @property
    def address(self) -> str:
        """The node's first IP address."""
        return self.network.resolved.address(self.name)

    @property
    def interfaces(self) -> list[str]:
        return [i.name for i in self.network.resolved.interfaces_of(self.name)]

    def start(
        self,
        argv: Sequence[str],
        name: str | None = None,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: int | IO[Any] | None = subprocess.DEVNULL,
    ) -> Process:
        """Start ``argv`` in the node. Output goes to LOG_DIR/NAME.out/.err (or is discarded)."""
        name = name or Path(argv[0]).name
        stdout_path = stderr_path = None
        stdout: Any = subprocess.DEVNULL
        stderr: Any = subprocess.DEVNULL
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            stdout_path, stderr_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
            stdout, stderr = stdout_path.open("wb"), stderr_path.open("wb")
        try:
            popen = subprocess.Popen(
                self.command(argv),
                stdout=stdout,
                stderr=stderr,
                stdin=stdin,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_preexec_for(self.network),
            )
        except FileNotFoundError as error:
            raise BackendError(f"cannot start {argv[0]!r} on {self.name}: {error}") from None
        finally:
            for stream in (stdout, stderr):
                if hasattr(stream, "close"):
                    stream.close()
        process = Process(self.name, name, argv, popen, stdout_path, stderr_path)
        self.network.processes.append(process)
        return process

    def run(
        self, argv: Sequence[str], timeout: float = 60.0, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion in the node and return its output."""
        try:
            result = subprocess.run(
                self.command(argv),
                capture_output=True,
                text=True,
                timeout=timeout,
                input=input,
                preexec_fn=_preexec_for(self.network),
            )
        except subprocess.TimeoutExpired:
            raise CommandTimeout(f"{' '.join(argv)} on {self.name} did not finish within {timeout:g} s") from None
        if check and result.returncode != 0:
            raise BackendError(
                f"{' '.join(argv)} on {self.name} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        return result

    def sysctl(self, key: str, value: str) -> None:
        """Set a sysctl of the node's network namespace (e.g. net.ipv4.tcp_congestion_control)."""
        self.run(["sysctl", "-q", "-w", f"{key}={value}"])


class Network(ABC):
    """A realised topology. Use as a context manager: leaving it stops everything."""

    backend_name = "base"

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.resolved: ResolvedTopology = topology.resolve()
        self.processes: list[Process] = []
        self.started = False
        #: when set, processes started in nodes are counted in the CPU role ``cpu_role``
        self.accounting: CpuAccountant | None = None
        self.cpu_role: str | None = None
        #: when set, processes started in nodes run on these cores only (the channel has another)
        self.endpoint_cores: set[int] | None = None

    @abstractmethod
    def start(self) -> None:
        """Build the network. On failure, leaves nothing behind."""

    @abstractmethod
    def _teardown(self) -> None:
        """Remove everything ``start`` created."""

    @abstractmethod
    def node(self, name: str) -> NodeHandle: ...

    @contextlib.contextmanager
    def counted_as(self, role: str) -> Iterator[None]:
        """Processes started in nodes inside this block count as CPU role ``role``."""
        previous, self.cpu_role = self.cpu_role, role
        try:
            yield
        finally:
            self.cpu_role = previous

    def service_processes(self) -> dict[str, int]:
        """Long-lived processes of the network itself, by CPU role (e.g. the ns-3 channel)."""
        return {}

    def service_failure(self) -> str | None:
        """Why the network can no longer carry traffic because one of its own processes ended
        (e.g. "the ns-3 channel exited on signal 9 (SIGKILL)"), or None while it can."""
        return None

    def describe(self) -> dict[str, Any]:
        """What the run metadata records about the realised network."""
        return {"backend": self.backend_name}

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        self._teardown()
        self.started = False

    def __enter__(self) -> "Network":
        try:
            with deferred_signals():
                self.start()
        except BaseException:
            # a failed start, or a Ctrl-C that arrived during it and is delivered now
            with deferred_signals():
                self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with deferred_signals():
            self.stop()


# -- what some backends offer beyond Network (the runner asks with isinstance) ---------------


@runtime_checkable
class MacStatistics(Protocol):
    """A simulated medium that counts what it carried (ns3): statistics since the last reset,
    and whether it kept real time while it mattered."""

    def reset_stats(self, timeout: float = 5.0) -> None: ...

    def mac_stats(self, timeout: float = 5.0, window: tuple[float, float] | None = None) -> dict[str, Any]: ...


@runtime_checkable
class WalkedStations(Protocol):
    """Stations whose trajectories the backend walks itself, from a moment the run chooses,
    and whose (dis)associations it can tell afterwards (mininet-wifi)."""

    motion_errors: list[str]

    def start_trajectories(self) -> None: ...

    def association_events(self, since: float | None = None) -> list[dict[str, Any]]: ...


@runtime_checkable
class ReshapableLinks(Protocol):
    """Wired links whose rate, delay and loss change on the live network (netns)."""

    def replace_link_shapes(self, link: "WiredLink") -> None: ...
