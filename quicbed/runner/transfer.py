"""One run of an experiment on a live network: server, captures, background traffic, download.

Everything the run starts is stopped before ``perform`` returns, on every exit path; the
artifacts land in the run's (partial) folder under the names docs/results.md lists.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from quicbed.apps import iperf, objects
from quicbed.apps.capture import CaptureSet
from quicbed.apps.quic import certs
from quicbed.apps.launch import Started
from quicbed.apps.transports import Assets, Download, RunContext, transport_kind
from quicbed.apps.record import ClientRecord
from quicbed.backends.base import MacStatistics, Network, NodeHandle, Process, WalkedStations
from quicbed.host.clock import VIRTUAL, VIRTUAL_CPU, current_clock
from quicbed.host.signals import how_it_ended
from quicbed.errors import BackendError
from quicbed.host.affinity import set_process_affinity
from quicbed.host.cpu_accounting import CpuAccounting
from quicbed.host.cpu_report import CpuReport, saturation_reasons
from quicbed.runner.analyse import record_metrics, review_measurement
from quicbed.spec.contention import Stress
from quicbed.spec.experiment import Experiment, Run
from quicbed.spec.link import WiredLink
from quicbed.spec.topology import Topology
from quicbed.spec.units import parse_rate, parse_size

BACKGROUND_PORT = 5201
SERVER_NAME = "localhost"  # the certificate's name; clients connect by address
READY_TIMEOUT = 120.0  # Python start-up in the software-emulated microVM, on a busy host, took > 30 s
BACKGROUND_LEAD = 1.0  # seconds of background traffic before the download (the queue fills)
CLOSING_GRACE = 0.3  # seconds for the last packets (CONNECTION_CLOSE, FIN) to reach the captures
#: seconds between two looks at the processes a run depends on while it waits (a fault fails it at once)
WATCH_INTERVAL = 0.05
#: seconds a network's own failure may take to show after a process of the run ended: a killed
#: ns-3 channel closes its TAP devices (ending the captures on them) before it can be reaped
CAUSE_GRACE = 0.3
#: CPU roles of a run: every process it starts counts in one (quicbed/host/cpu_accounting.py)
#: the clients' TLS secrets, beside the captures they decrypt (NSS key log format)
TLS_KEYLOG = "tls-keys.log"
#: bytes kept of each packet by a full capture (tcpdump's own maximum)
FULL_SNAPLEN = 262144
CPU_ROLES = ("server", "client", "competitor", "background", "capture", "channel", "stress")
#: what a CPU load process runs: a busy loop, until stopped
BUSY_LOOP = "while True:\n    pass"


@contextlib.contextmanager
def isolated_channel(network: Network, threads: str = "process") -> Iterator[dict[str, Any] | None]:
    """Every thread of the ns-3 channel (``threads="process"``) or its simulator thread alone
    (``"simulator"``) on the last core, and what starts on the network meanwhile on the
    others, so that the simulator and the endpoints take no CPU from each other
    (``isolate_channel``; the trade-off between the two: docs/metrics.md, "A core for the
    channel"). Yields what was done (None: no channel); needs two cores."""
    channel = network.service_processes().get("channel")
    cores = sorted(os.sched_getaffinity(0))
    if channel is None:
        yield None
        return
    if len(cores) < 2:
        yield {"applied": False, "why": f"only {len(cores)} core"}
        return
    own, others = {cores[-1]}, set(cores[:-1])
    set_process_affinity(channel, own)
    if threads == "simulator":  # the TAP readers and writer join the endpoints
        set_process_affinity(channel, others, but=channel)
    network.endpoint_cores = others
    try:
        yield {"applied": True, "threads": threads, "channel_cores": sorted(own), "endpoint_cores": sorted(others)}
    finally:
        network.endpoint_cores = None
        with contextlib.suppress(OSError):
            set_process_affinity(channel, set(cores))


def prepare_assets(directory: Path, experiment: Experiment) -> Assets:
    """Write every object and page the experiment's runs fetch, and a certificate."""
    whole = experiment.matrix.get("workload", [])
    sizes = {experiment.workload["object"]} if "object" in experiment.workload else set()
    sizes |= {parse_size(value, "workload.object") for value in experiment.matrix.get("workload.object", [])}
    sizes |= {parse_size(value["object"], "workload.object") for value in whole if "object" in value}
    page_names = {experiment.workload["page"]} if "page" in experiment.workload else set()
    page_names |= set(experiment.matrix.get("workload.page", [])) | {
        value["page"] for value in whole if "page" in value
    }
    shapes = [shape for shape in objects.PAGE_SHAPES if shape.name in page_names]
    objects.generate(directory / "www", bulk=sorted(sizes), pages=shapes, seed=experiment.seed)
    cert, key = certs.write(directory / "tls", [SERVER_NAME])
    ticket_key = directory / "tls" / "ticket.key"
    ticket_key.touch(mode=0o600)
    ticket_key.write_bytes(os.urandom(80))  # nginx: 80 bytes, AES-256 tickets
    return Assets(directory / "www", cert, key, ticket_key)


def workload_of(experiment: Experiment, cell: dict[str, Any]) -> dict[str, Any]:
    """The run's workload: the experiment's, with the cell's workload axis applied."""
    workload = dict(experiment.workload)
    if "workload" in cell:  # a whole workload: an object or a page (and parallel)
        chosen = cell["workload"]
        workload = {"parallel": workload["parallel"], **chosen}
        if "object" in chosen:
            workload["object"] = parse_size(chosen["object"], "workload.object")
    if "workload.object" in cell:
        workload.pop("page", None)
        workload["object"] = parse_size(cell["workload.object"], "workload.object")
    if "workload.page" in cell:
        workload.pop("object", None)
        workload["page"] = cell["workload.page"]
    return workload


def request_arguments(workload: dict[str, Any], assets: Assets) -> list[str]:
    if "object" in workload:
        return ["--path", f"/bulk/{objects.bulk_name(workload['object'])}.bin"]
    return ["--manifest", str(assets.www), "--page", workload["page"], "--parallel", str(workload["parallel"])]


def background_rate(experiment: Experiment, cell: dict[str, Any]) -> float | None:
    if experiment.background is None:
        return None
    value = cell.get("background.rate", experiment.background.rate)
    if value in (None, 0, "0"):
        return None
    return value if isinstance(value, float) else parse_rate(value, "background.rate")


def record_summary(record: dict[str, Any]) -> dict[str, Any]:
    """What a many-client run keeps of each client's record in its details: how it went, its
    bytes, download time and goodput, and when its download ended (wall clock, s), which
    places the downloads of clients that did not start together."""
    client = ClientRecord.from_dict(record)
    summary = {"ok": bool(client.ok), "error": client.error, "bytes": client.bytes, **record_metrics(record)}
    if client.ended_at is not None:
        summary["download_end"] = client.ended_at
    return summary


def run_client(experiment: Experiment, run: Run) -> str:
    return run.cell.get("client", experiment.client)


def transfer_window(records: list[dict[str, Any]]) -> tuple[float, float] | None:
    """From the first connection's start to the last byte of the clients' records, in
    CLOCK_MONOTONIC seconds (the records' times are wall-clock); None if no record says."""
    spans = [span for record in records if (span := ClientRecord.from_dict(record).transfer) is not None]
    if not spans:
        return None
    offset = time.time() - time.monotonic()
    return min(a for a, _ in spans) - offset, max(b for _, b in spans) - offset


def replayed_traces(topology: Topology, client: str) -> list[dict[str, Any]]:
    """The delivery traces the links replay: link, direction, file, and whether the direction
    leads towards ``client`` (a download's data crosses those)."""
    hops = {node: count for node, (_, _, count) in topology.shortest_paths(client).items()}
    far = len(hops) + 1
    found = []
    for link in topology.links:
        if not isinstance(link, WiredLink):
            continue
        for direction, shape, source, target in (
            ("forward", link.forward, link.node1, link.node2),
            ("backward", link.backward, link.node2, link.node1),
        ):
            if shape.trace is not None:
                found.append(
                    {
                        "link": link.name,
                        "direction": direction,
                        "path": shape.trace.path,
                        "digest": shape.trace.digest,
                        "towards_client": hops.get(target, far) < hops.get(source, far),
                    }
                )
    return found


class ProcessEnded(BackendError):
    """A process the run depends on ended before the run stopped it."""


class CriticalProcesses:
    """What a run depends on: the network's own processes (the ns-3 channel) and those the run
    starts for its whole length (servers, captures, samplers, background traffic, CPU load).
    The run looks at them whenever it waits; one that has ended fails the run at once, with
    an error naming it and how it ended ("the ns-3 channel exited on signal 9 (SIGKILL) during
    the transfer"), instead of a client timeout and a misleading error much later."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self.watched: list[tuple[str, Process]] = []

    def watch(self, what: str, process: Process | None) -> None:
        if process is not None:
            self.watched.append((f"{what} ({process.name} on {process.node})", process))

    def failure(self) -> str | None:
        """The first ended process in words, or None. The network comes first: when the channel
        dies, the captures on its TAP devices end too, and the channel is the cause."""
        ended = self.network.service_failure()
        if ended is not None:
            return ended
        for what, process in self.watched:
            if not process.running:
                return self._network_failure_within(CAUSE_GRACE) or f"{what} {how_it_ended(process.returncode)}"
        return None

    def _network_failure_within(self, seconds: float) -> str | None:
        deadline = time.monotonic() + seconds
        while (ended := self.network.service_failure()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return ended

    def check(self, moment: str) -> None:
        failure = self.failure()
        if failure is not None:
            raise ProcessEnded(f"{failure} {moment}")

    def sleep(self, seconds: float, moment: str) -> None:
        """``time.sleep(seconds)``, looking at the processes all the while."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.check(moment)
            time.sleep(min(WATCH_INTERVAL, left))
        self.check(moment)


class RunExecution:
    """Performs one run: call :meth:`perform`, read the collected pieces afterwards."""

    def __init__(self, network: Network, experiment: Experiment, run: Run, assets: Assets, folder: Path) -> None:
        self.network = network
        self.experiment = experiment
        self.run = run
        self.assets = assets
        self.folder = folder
        self.logs = folder / "logs"
        self.logs.mkdir(exist_ok=True)  # not every run starts a process that would create it (TCP without captures)
        self.workload = workload_of(experiment, run.cell)
        self.server: NodeHandle = network.node(experiment.server)
        transport = experiment.transport_of(run.cell)
        self.main = Download(
            "main", transport, network.node(run_client(experiment, run)), transport_kind(transport.kind).port
        )
        # each competitor on its own port, also when it uses the measured download's kind of transport
        self.competitors: list[Download] = []
        if experiment.competitor is not None:
            node = network.node(experiment.competitor.client)
            self.competitors = [
                Download(
                    "competitor" if number == 1 else f"competitor-{number}",
                    rival,
                    node,
                    transport_kind(rival.kind).port + number,
                )
                for number, rival in enumerate(experiment.competitors_of(run.cell), start=1)
            ]
        # the other clients of a many-client run: the same transport, workload and server
        self.others = [
            Download(f"client-{name}", transport, network.node(name), self.main.port)
            for name in experiment.clients_of(network.topology)[1:]
        ]
        self.details: dict[str, Any] = {}
        self.critical = CriticalProcesses(network)
        #: what the transport kinds' hooks get of this run (quicbed.apps.transports)
        self.context = RunContext(
            self.server,
            assets,
            folder,
            self.logs,
            experiment.timeout,
            READY_TIMEOUT,
            experiment.qlog,
            self.details,
            self.critical.watch,
        )

    @property
    def downloads(self) -> list[Download]:
        return [self.main, *self.competitors]

    def perform(self) -> dict[str, Any]:
        """Run the download(s); return the measured client's record (``ok``/``error`` tell how it went)."""
        counted = self.network.counted_as
        self.critical.check("before the run")  # e.g. a channel that died since the last run
        with ExitStack() as stack:
            accounting = stack.enter_context(self._cpu_accounting())
            stack.enter_context(self._isolated_channel())
            for download in self.downloads:
                with counted("server" if download.role == "main" else "competitor"):
                    stack.enter_context(download.kind.start_server(self.context, download))
            self.critical.check("while the run started")
            downloads = [self.main, *self.others] if self.others else self.downloads
            # the clients start up (and make their priming connections, where they resume) before
            # the run's statistics, traces and captures: every transfer then begins at the same
            # moment of a replayed trace, whatever its client's start-up took
            release = stack.enter_context(self._clients_ready(downloads))
            if isinstance(self.network, MacStatistics):
                self.network.reset_stats()  # MAC statistics of this run only; traces start again
                traces = replayed_traces(self.network.topology, run_client(self.experiment, self.run))
                if traces:
                    self.details["traces"] = [{**trace, "started": time.time()} for trace in traces]
            moving = self.network.topology.moving_stations()
            if moving:  # (their paths start with the transfer: now, within the reset)
                self.details["trajectories"] = {s.name: s.trajectory.to_dict() for s in moving if s.trajectory}
            with counted("capture"):
                if self.experiment.captures:
                    stack.enter_context(self._captures())
                if self.experiment.qlog:  # the sender's state over time, as its kind records it
                    stack.enter_context(self.main.kind.record_sender(self.context, self.main))
            stress = self.experiment.stress_of(self.run.cell)
            if stress.cpu_quota is not None or stress.load or stress.client_device is not None:
                stack.enter_context(self._stress(stress, accounting))
            rate = background_rate(self.experiment, self.run.cell)
            if rate:
                with counted("background"):
                    stack.enter_context(self._background(rate))
            self.critical.check("before the transfer")
            if moving and isinstance(self.network, WalkedStations):
                self.network.start_trajectories()  # (mininet-wifi: quicbed walks them, from the transfer's start)
            motion_start = time.time()
            records = release()
            record = records[0]
            if self.experiment.clients is not None:  # (a cell with one station still reports as many-client)
                self.details["clients"] = [
                    {"node": d.client.name, "record": d.record_name, **record_summary(r)}
                    for d, r in zip(downloads, records)
                ]
            elif self.competitors:
                self.details["competitors"] = records[1:]
            self.critical.sleep(CLOSING_GRACE, "at the end of the transfer")
        self._record_cpu(accounting, record)
        self.main.kind.collect(self.context, self.main, shared=bool(self.others))
        topology = self.network.topology
        if isinstance(self.network, WalkedStations) and (topology.moving_stations() or topology.roaming_stations()):
            # (mininet-wifi: who associated where and when, from the APs' hostapd logs)
            events = self.network.association_events(since=motion_start)
            (self.folder / "associations.json").write_text(
                json.dumps(
                    {
                        "source": "hostapd logs",
                        "since": motion_start,
                        "events": events,
                        "motion_errors": self.network.motion_errors,
                    },
                    indent=1,
                )
                + "\n"
            )
        # capture figures per connection, analysis warnings, why the measurement is invalid
        self.details["measurement"] = review_measurement(self.folder, record, self.details)
        if isinstance(self.network, MacStatistics):
            stats = self.network.mac_stats(window=transfer_window(records))
            (self.folder / "mac-stats.json").write_text(json.dumps(stats, indent=1) + "\n")
            self.details["mac_stats"] = {
                key: stats[key]
                for key in (
                    "valid",
                    "invalid_reasons",
                    "lag",
                    "judged_over",
                    "behind_share",
                    "slow_share",
                    "tap",
                    "frames",
                )
            }
        return record

    # -- CPU ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _cpu_accounting(self) -> Iterator[CpuAccounting | None]:
        """Count every process of the run by role, and the network's own (the ns-3 channel)."""
        accounting = CpuAccounting(f"{os.getpid()}-{self.run.run_id}", roles=CPU_ROLES)
        try:
            accounting.start()
        except OSError as error:  # accounting is evidence, not a precondition of the run
            self.details["cpu"] = {"error": f"CPU accounting unavailable: {error}"}
            yield None
            return
        try:
            for role, pid in self.network.service_processes().items():
                accounting.add_pid(role, pid, move=False)  # a SCHED_FIFO channel stays where it is
            self.network.accounting = accounting
            yield accounting
        finally:
            self.network.accounting = None
            accounting.stop()

    @contextlib.contextmanager
    def _isolated_channel(self) -> Iterator[None]:
        if self.experiment.isolate_channel == "off":
            yield
            return
        with isolated_channel(self.network, self.experiment.isolate_channel) as isolation:
            if isolation is not None:
                self.details["isolation"] = isolation
            yield

    def _record_cpu(self, accounting: CpuAccounting | None, record: dict[str, Any]) -> None:
        """CPU over the transfer (request to last byte), or over the whole run if the client
        record does not say when the transfer was; whether a role was CPU-bound then, and what
        could not be seen (``cpu_unknown_reasons``): without accounting the run's CPU state is
        unknown, which must not read as "not CPU-bound"."""
        if current_clock() == VIRTUAL:  # known without figures: nothing can be CPU-bound (record.clock says why)
            self.details["cpu"] = {"note": VIRTUAL_CPU}
            self.details["cpu_bound_reasons"] = []
            self.details["cpu_unknown_reasons"] = []
            return
        if accounting is None:  # it could not start: details["cpu"] says why
            self.details["cpu_bound_reasons"] = []
            self.details["cpu_unknown_reasons"] = [self.details.get("cpu", {}).get("error") or "no CPU accounting"]
            return
        transfer = ClientRecord.from_dict(record).transfer
        report: CpuReport
        if transfer is not None:
            offset = time.time() - time.monotonic()  # the record's times are wall-clock
            report, window = accounting.window(transfer[0] - offset, transfer[1] - offset), "transfer"
        else:
            report, window = accounting.stop(), "run"
        self.details["cpu"] = {"window": window, **report.to_dict()}
        self.details["cpu_bound_reasons"] = saturation_reasons(report)
        self.details["cpu_unknown_reasons"] = list(report.unknown)

    # -- measurement -------------------------------------------------------------------------
    def _captures(self) -> _Captures:
        ports = sorted({download.port for download in self.downloads})  # the competitors' too
        captures = CaptureSet(self.folder, bpf_filter=" or ".join(f"port {p}" for p in ports), log_dir=self.logs)
        captures.add(self.server, self.server.interfaces[0], name="server")
        captures.add(
            self.main.client,
            self.main.client.interfaces[0],
            name="client",
            **({"snaplen": FULL_SNAPLEN} if self.experiment.full_captures else {}),
        )
        captures.start()
        for name, capture in captures.captures.items():
            self.critical.watch(f"the {name} capture", capture.process)
        self.details["captures"] = captures.info()
        return _Captures(captures, self.details)

    def _background(self, rate: float) -> Started:
        background = self.experiment.background
        assert background is not None
        source, sink = self.network.node(background.source), self.network.node(background.destination)
        server = iperf.start_server(source, port=BACKGROUND_PORT, log_dir=self.logs)
        # the sink asks, the source sends (-R): the download's direction
        client = iperf.start(
            sink,
            source.address,
            port=BACKGROUND_PORT,
            protocol=background.kind,
            rate=rate,
            duration=self.experiment.timeout + BACKGROUND_LEAD,
            reverse=True,
            log_dir=self.logs,
            name="background",
        )
        self.critical.watch("the background traffic's server", server.process)
        self.critical.watch("the background traffic's sender", client.process)
        self.critical.sleep(BACKGROUND_LEAD, "before the transfer")
        start = time.time()

        def stop() -> None:
            client.stop()
            server.stop()
            # what it delivered (iperf3 reports on being stopped): none if its stream set-up was lost
            delivered = client.result(timeout=0)
            (self.folder / "background.json").write_text(json.dumps(delivered.to_dict(), indent=1) + "\n")
            self.details["background"] = {
                "kind": background.kind,
                "rate": rate,
                "from": background.source,
                "to": background.destination,
                "seconds": time.time() - start,
                "received_bps": delivered.received_bps,
                "bytes_received": delivered.bytes_received,
                "lost_percent": delivered.lost_percent,
            }

        return Started(stop)

    # -- CPU stress --------------------------------------------------------------------------
    def _stress(self, stress: Stress, accounting: CpuAccounting | None) -> Started:
        """The measured client under CPU stress: a cgroup CPU quota on its role, and/or
        busy-loop processes in its node on the cores it runs on. What was applied (and how
        often the quota throttled the client) goes to details.stress."""
        applied: dict[str, Any] = {
            "cpu_quota": stress.cpu_quota,
            "load": stress.load,
            "client_device": stress.client_device,  # (the client applies it: its record's device)
            "node": self.main.client.name,
        }
        if stress.cpu_quota is not None:
            result = accounting.limit("client", stress.cpu_quota) if accounting is not None else None
            if not result:
                why = result.reason if result is not None else self.details.get("cpu", {}).get("error", "")
                raise BackendError(
                    f"stress.cpu_quota={stress.cpu_quota:g} cannot be applied: {why} (fix: run as "
                    "root on a host with the cgroup cpu controller, or leave the quota out)"
                )
            applied["quota_mechanism"] = result.reason
        loads = []
        with self.network.counted_as("stress"):
            for number in range(stress.load):
                loads.append(
                    self.main.client.start(
                        [sys.executable, "-c", BUSY_LOOP], name=f"stress-{number}", log_dir=self.logs
                    )
                )
                self.critical.watch("a CPU load", loads[-1])

        def stop() -> None:
            for process in loads:
                process.stop(grace=0.5)
            if stress.cpu_quota is not None and accounting is not None:
                applied["throttling"] = accounting.throttling("client")
            self.details["stress"] = applied

        return Started(stop)

    # -- clients -----------------------------------------------------------------------------
    def _client_argv(self, download: Download, *extra: str) -> list[str]:
        common = [
            "--host",
            self.server.address,
            "--port",
            str(download.port),
            "--ca-cert",
            str(self.assets.cert),
            "--server-name",
            SERVER_NAME,
            "--timeout",
            f"{self.experiment.timeout:g}",
            "--output",
            str(self.folder / download.record_name),
            "--label",
            f"{self.run.run_id} {download.role}",
            *request_arguments(self.workload, self.assets),
            *extra,
        ]
        if self.experiment.full_captures:  # the secrets that decrypt them (docs/results.md)
            common += ["--keylog", str(self.folder / TLS_KEYLOG)]
        if download.transport.resumption != "none":
            common += ["--resumption", download.transport.resumption]
        device = self.experiment.stress_of(self.run.cell).client_device
        if device is not None and download.role == "main":  # (a stress is the measured client's)
            common += ["--client-device", device]
        return download.kind.client_argv(download.transport, common)

    def _record(self, download: Download, process: Process) -> dict[str, Any]:
        output = self.folder / download.record_name
        if not output.exists():
            errors = process.errors().strip()[-500:]
            raise BackendError(
                f"{_client_name(download)} {how_it_ended(process.returncode)} before writing its "
                f"record{': ' + errors if errors else ''}"
            )
        return json.loads(output.read_text())

    def _wait_for_clients(self, processes: list[Process]) -> None:
        """Until every client has exited, looking at the processes the run depends on meanwhile
        (the caller stops the clients, also when one of those ended)."""
        timeout = self.experiment.timeout + READY_TIMEOUT
        deadline = time.monotonic() + timeout
        while running := [process for process in processes if process.running]:
            self.critical.check("during the transfer")
            if time.monotonic() > deadline:
                raise BackendError(f"{running[0].name} on {running[0].node} did not finish within {timeout:g} s")
            time.sleep(WATCH_INTERVAL)
        self.critical.check("during the transfer")  # a client that failed because a server died: name the server

    @contextlib.contextmanager
    def _clients_ready(self, downloads: list[Download]) -> Iterator[Callable[[], list[dict[str, Any]]]]:
        """Start every client and wait until each has started up (and made its priming
        connection, if it resumes); yields what lets them connect at once and returns their
        records. The clients are stopped on the way out, whatever happened."""
        go = self.folder / "start"
        ready = {d.role: self.folder / f"{d.role}.ready" for d in downloads}
        processes: list[Process] = []
        try:
            for d in downloads:
                with self.network.counted_as("client" if d in [self.main, *self.others] else "competitor"):
                    processes.append(
                        d.client.start(
                            self._client_argv(d, "--ready-file", str(ready[d.role]), "--start-file", str(go)),
                            name="client" if d.role == "main" else f"{d.role}-client",
                            log_dir=self.logs,
                        )
                    )
            deadline = time.monotonic() + READY_TIMEOUT
            while not all(path.exists() for path in ready.values()):
                self.critical.check("while the clients started")
                exited = [(d, p) for d, p in zip(downloads, processes) if not p.running]
                if exited:
                    download, process = exited[0]
                    raise BackendError(
                        f"{_client_name(download)} {how_it_ended(process.returncode)} before it was "
                        f"ready: {process.errors().strip()[-300:]}"
                    )
                if time.monotonic() > deadline:
                    raise BackendError(f"the clients were not ready after {READY_TIMEOUT:g} s")
                time.sleep(0.01)

            def release() -> list[dict[str, Any]]:
                go.touch()
                self._wait_for_clients(processes)
                return [self._record(d, p) for d, p in zip(downloads, processes)]

            yield release
        finally:
            for process in processes:
                process.stop()
            for path in (go, *ready.values()):
                path.unlink(missing_ok=True)


def _client_name(download: Download) -> str:
    who = "the" if not download.role.startswith("competitor") else f"the {download.role}'s"
    return f"{who} client on {download.client.name}"


class _Captures:
    def __init__(self, captures: CaptureSet, details: dict[str, Any]) -> None:
        self.captures = captures
        self.details = details

    def __enter__(self) -> _Captures:
        return self

    def __exit__(self, *exc: object) -> None:
        stats = self.captures.stop()
        self.details["capture_stats"] = {name: s.to_dict() for name, s in stats.items()}
        self.details["captures"] = self.captures.info()  # now with what a tapped interface's qdisc did
