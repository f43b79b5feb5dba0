"""The experiment runner: every run of an experiment, in order, into one results folder.

    runner = ExperimentRunner(experiment, RunnerOptions(out=Path("results/x")))
    summary = runner.run()          # Ctrl-C: what finished stays; --resume continues

A run either completes (its folder and its results line appear together) or leaves
nothing; a run that fails is recorded with its error and the experiment goes on. The
network is kept up across runs while their topology is the same (``reuse: cell``, unless its
stations move or roam; link axes change a live netns network's qdiscs in place) or rebuilt
per run (``reuse: run``).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from quicbed.analysis.catalogue import metric
from quicbed.apps.record import ClientRecord
from quicbed.backends import create, seeded_options
from quicbed.backends.base import Network, ReshapableLinks
from quicbed.host.signals import deferred_signals, raise_if_interrupted
from quicbed.errors import QuicbedError
from quicbed.host import bench_results
from quicbed.host.clock import REAL, VIRTUAL, current_clock, kernel_release
from quicbed.host.steal import QUIET_STEAL, wait_for_quiet_machine
from quicbed.results import FORMAT_VERSION, NO_CPU_RECORD, RunRecord, check_version
from quicbed.runner import fingerprint
from quicbed.runner import metadata as meta
from quicbed.runner.analyse import cpu_metrics, run_metrics_of, stress_metrics
from quicbed.runner.folder import ResultsFolder, StorageError, storage_error, writing
from quicbed.runner.plan import Plan
from quicbed.runner.transfer import Assets, RunExecution, prepare_assets, workload_of
from quicbed.spec.experiment import Experiment, Run, Transport, Validity, topology_for
from quicbed.spec.link import WiredLink, WirelessLink
from quicbed.spec.shard import Shard
from quicbed.spec.topology import Topology

#: shown after each run, when the run has them
RESULT_LINE_METRICS = ("download_time", "goodput", "loss", "ampdu_mean")


@dataclass
class RunnerOptions:
    out: Path
    resume: bool = False
    retry_failed: bool = False  # with resume: make failed runs again
    backend: str | None = None  # default: the experiment's
    params: dict[str, Any] = field(default_factory=dict)  # topology parameter overrides
    command: list[str] = field(default_factory=list)  # what the user typed, for the metadata
    shard: Shard | None = None  # only this shard's runs (--shard K/N)
    backend_note: str | None = None  # why this backend, when quicbed chose it
    force: bool = False  # with resume: continue even with other code, tools, traces or kernel


@dataclass
class RunnerSummary:
    total: int
    skipped: int  # finished before (resume)
    ok: int = 0
    failed: int = 0
    invalid: int = 0


def competitors_described(transports: list[Transport]) -> dict[str, Any] | None:
    """A run record's ``competitor``: the one transport's description, or for several at once
    their names joined by "+" and each one's description, in the order of their files
    (competitor.json, competitor-2.json, ...)."""
    if len(transports) <= 1:
        return transports[0].describe() if transports else None
    return {"name": "+".join(t.name for t in transports), "transports": [t.describe() for t in transports]}


def wireless_hops(topo: Topology, server: str, client: str) -> list[tuple[str, str]]:
    """(sender, receiver) of each wireless hop the download crosses, from the server's side
    (the fewest links; the last hop's sender is the client's AP or mesh peer)."""
    paths = topo.shortest_paths(server)
    hops: list[tuple[str, str]] = []
    node = client
    while node in paths and node != server:
        previous, link, _ = paths[node]
        hops += [(previous, node)] if isinstance(link, WirelessLink) else []
        node = previous
    return hops[::-1]


class NetworkKeeper:
    """The live network of the current run, rebuilt only when the topology changes."""

    def __init__(self, experiment: Experiment, backend: str, overrides: dict[str, Any], on_build: Any = None) -> None:
        self.experiment = experiment
        self.backend = backend
        self.overrides = overrides
        self.on_build = on_build
        self.network: Network | None = None
        self.description: dict[str, Any] | None = None

    def network_for(self, run: Run, attempt: int = 1) -> Network:
        topo = topology_for(self.experiment, run.cell, self.overrides)
        description = topo.to_dict()
        # a station that moved or roamed during a run would start the next one elsewhere:
        # every run of such a topology gets a network of its own
        still = not topo.moving_stations() and not topo.roaming_stations()
        if self.network is not None and self.experiment.reuse == "cell" and still:
            if description == self.description:
                return self.network
            if self._reshape(topo):
                self.description = description
                return self.network
        self.close()
        options = seeded_options(
            self.backend,
            self.experiment.backend_options.get(self.backend, {}),
            random_stream(self.experiment.seed, run.run_id, attempt),
        )
        network = create(self.backend, topo, **options)
        network.__enter__()
        self.network, self.description = network, description
        if self.on_build:
            self.on_build(network)
        return network

    def _reshape(self, topo: Topology) -> bool:
        """Apply changed wired-link impairments to the live network when only they differ."""
        network = self.network
        if not isinstance(network, ReshapableLinks):
            return False
        if _without_shapes(topo.to_dict()) != _without_shapes(network.topology.to_dict()):
            return False
        for link, live in zip(topo.links, network.topology.links):
            if (
                isinstance(link, WiredLink)
                and isinstance(live, WiredLink)
                and (link.forward, link.backward) != (live.forward, live.backward)
            ):
                network.replace_link_shapes(link)
        return True

    def close(self) -> None:
        if self.network is not None:
            network, self.network, self.description = self.network, None, None
            network.__exit__(None, None, None)


def _without_shapes(description: dict[str, Any]) -> dict[str, Any]:
    links = [{k: v for k, v in link.items() if k not in ("forward", "backward")} for link in description["links"]]
    return {**description, "links": links}


class Progress:
    """One line per finished run; with a terminal, a live bar with cell, count and ETA."""

    def __init__(self, total: int, done: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = done
        self.stream = stream or sys.stdout  # the one of the moment (not of import time)
        self.started = time.monotonic()
        self.measured = 0  # runs performed in this session (for the ETA)
        self.bar: Any = None
        self.task: Any = None
        if self.stream.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("starting", total=total, completed=done)

    def starting(self, run: Run) -> None:
        label = f"{run.run_id} {run.label or ''}".strip()
        if self.bar is not None:
            self.bar.update(self.task, description=label)

    def eta(self) -> str:
        if not self.measured:
            return "?"
        left = (time.monotonic() - self.started) / self.measured * (self.total - self.done)
        text = f"{left / 60:.0f} min" if left >= 90 else f"{left:.0f} s"
        # the guest cannot see the wall clock, whose share per simulated second varies by cell
        return f"{text} of virtual time" if current_clock() == VIRTUAL else text

    def finished(self, run: Run, record: RunRecord) -> None:
        self.done += 1
        self.measured += 1
        line = f"[{self.done:>{len(str(self.total))}}/{self.total}] {run.run_id} {run.label}: {result_text(record)}"
        if self.bar is not None:
            self.bar.console.print(line, highlight=False)
            self.bar.update(self.task, completed=self.done)
        else:
            print(f"{line} (ETA {self.eta()})", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """A line between the run lines (a network's warnings)."""
        if self.bar is not None:
            self.bar.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def result_text(record: RunRecord) -> str:
    if record.status == "failed":
        return f"FAILED: {record.error}"
    shown = []
    for name in RESULT_LINE_METRICS:
        if name in record.metrics:
            entry = metric(name)
            shown.append(
                f"{entry.label} {entry.show(record.metrics[name]):.3g}{' ' + entry.unit if entry.unit else ''}"
            )
    text = ", ".join(shown) or "ok"
    if record.status == "invalid":
        text = f"INVALID ({'; '.join(record.invalid_reasons)}): {text}"
    unknown = record.cpu_unknown_reasons
    text += f" [CPU state unknown: {unknown[0]}]" if unknown else ""
    return text + (" [warm-up]" if record.warmup else "")


class ExperimentRunner:
    def __init__(self, experiment: Experiment, options: RunnerOptions) -> None:
        self.experiment = experiment
        self.options = options
        self.backend = options.backend or experiment.backend
        self.folder: ResultsFolder | None = None
        self.metadata: dict[str, Any] = {}
        self.assets: Assets | None = None
        self.progress: Progress | None = None
        #: before an invalid run is made again: (seconds waited, the last steal share)
        self.wait_for_quiet_machine: Callable[[], tuple[float, float]] = wait_for_quiet_machine

    # -- metadata ----------------------------------------------------------------------------
    def _resolved(self) -> dict[str, Any]:
        exp = self.experiment
        return {
            **exp.raw,
            "transports": {n: t.describe() for n, t in exp.transports.items()},
            "backend": self.backend,
            "topology_overrides": self.options.params,
            "cells": exp.cells(),
        }

    def _check_resumable(self, previous: dict[str, Any]) -> None:
        """A resumed experiment must be the same one (more repetitions or warm-up runs are fine),
        in a format this quicbed writes."""
        check_version(previous.get("format", 1), f"{self.options.out}/metadata.json")
        ignored = ("repetitions", "warmup", "runs")
        before = {k: v for k, v in (previous.get("experiment") or {}).items() if k not in ignored}
        now = {k: v for k, v in json.loads(json.dumps(self._resolved(), default=str)).items() if k not in ignored}
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if before and changed:
            raise QuicbedError(
                f"{self.options.out} was written with other settings ({', '.join(changed)} differ: "
                "--set, -p or --backend); resuming would mix two experiments (fix: resume with the "
                "options of the first session, see metadata.json)"
            )

    def _shard_record(self, runs: Sized, total: int) -> dict[str, Any] | None:
        shard = self.options.shard
        return None if shard is None else {**shard.describe(), "runs": len(runs), "of": total}

    def _start_metadata(self, folder: ResultsFolder, runs: Sized, total: int) -> None:
        exp = self.experiment
        previous = folder.read_metadata()
        shard = self._shard_record(runs, total)
        if self.options.resume:
            self._check_resumable(previous)
            if _shard_identity(previous.get("shard")) != _shard_identity(shard):
                raise QuicbedError(
                    f"{self.options.out} holds shard {_shard_text(previous.get('shard'))}, not "
                    f"{_shard_text(shard)} (fix: resume with the --shard and --shard-by it was "
                    "started with, see metadata.json)"
                )
        fingerprint_now = fingerprint.fingerprint(exp, self.options.params)
        mixed = list(previous.get("mixed_fingerprints") or [])
        if self.options.resume and previous.get("fingerprint"):
            changed = fingerprint.differences(previous["fingerprint"], fingerprint_now)
            if changed and not self.options.force:
                raise QuicbedError(
                    f"{self.options.out} was started with other code, tools, traces or kernel: "
                    f"{'; '.join(changed)}; resuming would mix runs of both in one result (fix: "
                    "resume where and with what it was started, or add --force to mix them, "
                    "which metadata.json then records)"
                )
            mixed += [f"session {len(previous.get('sessions', [])) + 1}: {change}" for change in changed]
        now = time.time()
        session = {
            "started": now,
            "started_utc": meta.utc(now),
            "finished": None,
            "status": "running",
            "command": self.options.command,
            "host": meta.host_info(),
            "versions": meta.tool_versions(),
            "git": meta.git_commit(),
            "fingerprint": fingerprint_now,
            "calibration": bench_results.calibration(),
            "backend": self.backend,
            "networks": [],
        }
        self.metadata = {
            "format": FORMAT_VERSION,
            "name": exp.name,
            "description": exp.description,
            "experiment_file": str(exp.source),
            "experiment": {**self._resolved(), "runs": total},
            "shard": shard,
            "started": previous.get("started", now),
            "started_utc": meta.utc(previous.get("started", now)),
            "finished": None,
            "status": "running",
            "backend": self.backend,
            "backend_note": self.options.backend_note,
            "host": session["host"],
            "versions": session["versions"],
            "git": session["git"],
            "calibration": session["calibration"],
            "fingerprint": previous.get("fingerprint") or fingerprint_now,
            **({"mixed_fingerprints": mixed} if mixed else {}),
            "sessions": [*previous.get("sessions", []), session],
        }
        folder.write_metadata(self.metadata)

    def _record_network(self, network: Network) -> None:
        session = self.metadata["sessions"][-1]
        topology = network.topology.to_dict()
        if any(entry["topology"] == topology for entry in session["networks"]):
            return
        description = network.describe()
        session["networks"].append(
            {
                "topology": topology,
                "network": description,
                "interfaces": meta.interface_state(network),
                "built": time.time(),
            }
        )
        assert self.folder is not None
        self.folder.write_metadata(self.metadata)
        if self.progress is not None:
            for warning in description.get("warnings") or []:
                self.progress.note(f"warning ({self.backend} network {topology['name']}): {warning}")

    def _finish_metadata(self, status: str) -> None:
        if self.folder is None or not self.metadata:
            return
        now = time.time()
        self.metadata["sessions"][-1].update(finished=now, finished_utc=meta.utc(now), status=status)
        self.metadata.update(finished=now, finished_utc=meta.utc(now), status=status)
        try:
            self.folder.write_metadata(self.metadata)
        except StorageError:
            if status == "complete":
                raise
            # the error that stopped the experiment says it all; metadata.json stays as last written

    # -- running -----------------------------------------------------------------------------
    def run(self) -> RunnerSummary:
        plan = Plan.of(self.experiment, self.backend, self.options.shard)
        runs = plan.runs
        with ResultsFolder(self.options.out, self.experiment.source, resume=self.options.resume) as folder:
            self.folder = folder
            finished = folder.finished()
            if self.options.retry_failed:
                finished = {run_id: line for run_id, line in finished.items() if line.status != "failed"}
            # a run stopped between an attempt that did not count and the next one is not done
            continuing = {
                run_id: earlier
                for run_id, line in finished.items()
                if (earlier := attempts_to_continue(line, self.experiment.validity)) is not None
            }
            finished = {run_id: line for run_id, line in finished.items() if run_id not in continuing}
            done = sum(1 for run in runs if run.run_id in finished) if finished else 0
            todo = (run for run in runs if run.run_id not in finished)  # made as the runs go
            summary = RunnerSummary(total=len(runs), skipped=done)
            try:
                self._start_metadata(folder, runs, len(plan.every_run))
            except StorageError:
                if not self.options.resume:
                    folder.discard()
                raise
            work = self.options.out / ".work"
            keeper = NetworkKeeper(self.experiment, self.backend, self.options.params, self._record_network)
            progress = self.progress = Progress(len(runs), summary.skipped)
            status = "interrupted"
            try:
                if summary.total > summary.skipped:
                    with writing(work):
                        self.assets = prepare_assets(work, self.experiment)
                for run in todo:
                    raise_if_interrupted()
                    progress.starting(run)
                    earlier = continuing.get(run.run_id, [])
                    if earlier:
                        progress.note(
                            f"{run.run_id}: attempt {len(earlier)} was {earlier[-1]['status']} and the "
                            f"last session stopped before the next: making it again "
                            f"(attempt {len(earlier) + 1})"
                        )
                    record = self._one_run(run, keeper, folder, earlier)
                    record = self._make_again(run, record, keeper, folder, earlier)
                    setattr(summary, record.status, getattr(summary, record.status) + 1)
                    progress.finished(run, record)
                status = "complete"
            except BaseException as error:
                status = "interrupted" if isinstance(error, (KeyboardInterrupt, SystemExit)) else "failed"
                raise
            finally:
                progress.close()
                with deferred_signals():
                    keeper.close()
                    shutil.rmtree(work, ignore_errors=True)
                    self._finish_metadata(status)
        return summary

    def _make_again(
        self,
        run: Run,
        record: RunRecord,
        keeper: NetworkKeeper,
        folder: ResultsFolder,
        earlier: list[dict[str, Any]] | None = None,
    ) -> RunRecord:
        """Make a run that does not count again: an invalid one up to ``validity.reruns`` times, so
        that its cell ends with the repetitions asked for, a failed one up to
        ``validity.retry_failed`` times (a fault, such as a process it depends on dying, closed
        its network: the next attempt gets a new one). Earlier attempts (``earlier``: those of
        an earlier session too) stay in attempts/ and are named in the record; a warm-up run is
        never made again."""
        earlier = list(earlier or [])
        while not run.warmup and has_attempts_left(record.status, earlier, self.experiment.validity):
            earlier.append(_attempt_summary(len(earlier) + 1, record.status, record.error, record.invalid_reasons))
            if self.progress is not None:
                why = record.error if record.status == "failed" else "; ".join(record.invalid_reasons)
                self.progress.note(
                    f"{run.run_id} {record.status} ({why}): making it again (attempt {len(earlier) + 1})"
                )
            if record.status == "invalid":  # not inside the hypervisor's spell that may have made it so
                waited, steal = self.wait_for_quiet_machine()
                earlier[-1]["waited_for_quiet_machine_s"] = round(waited, 1)
                if waited >= 1 and self.progress is not None:
                    self.progress.note(
                        f"{run.run_id}: waited {waited:.0f} s for the hypervisor to take less than "
                        f"{QUIET_STEAL:.0%} of the CPU time (last {steal:.1%})"
                    )
            raise_if_interrupted()
            record = self._one_run(run, keeper, folder, earlier)
        return record

    def _one_run(
        self,
        run: Run,
        keeper: NetworkKeeper,
        folder: ResultsFolder,
        earlier_attempts: list[dict[str, Any]] | None = None,
    ) -> RunRecord:
        exp = self.experiment
        transport = exp.transport_of(run.cell)
        record = RunRecord(
            run_id=run.run_id,
            index=run.index,
            cell_index=run.cell_index,
            cell=run.cell,
            repetition=run.repetition,
            warmup=run.warmup,
            transport=transport.describe(),
            workload=workload_of(exp, run.cell),
            competitor=competitors_described(exp.competitors_of(run.cell)),
            client=run.cell.get("client", exp.client),
            server=exp.server,
            backend=self.backend,
            clock=current_clock(),
            kernel=kernel_release(),
            host=meta.machine_name(),
            started=time.time(),
            attempt=1 + len(earlier_attempts or []),
            earlier_attempts=list(earlier_attempts or []),
            folder=f"runs/{run.run_id}",
        )
        details: dict[str, Any] = {}  # run.json's, beside the record: what the run measured and set
        partial = folder.begin_run(run.run_id)
        try:
            network = keeper.network_for(run, record.attempt)
            qdiscs = meta.qdisc_state(network)  # link axes change them between runs
            assert self.assets is not None
            execution = RunExecution(network, exp, run, self.assets, partial)
            try:
                client_record = execution.perform()
                raise_if_interrupted()  # its processes got the Ctrl-C too: not a result
            finally:
                details = {"qdiscs": qdiscs, **execution.details}
            failed = [client for client in execution.details.get("clients", [])[1:] if not client["ok"]]
            client = ClientRecord.from_dict(client_record)
            if not client.ok:
                record.status, record.error = "failed", f"download failed: {client.error}"
            elif failed:
                record.status, record.error = (
                    "failed",
                    (f"{len(failed)} of the other clients failed, e.g. {failed[0]['node']}: {failed[0]['error']}"),
                )
            hops = wireless_hops(network.topology, exp.server, str(record.client))
            record.metrics = {
                **run_metrics_of(
                    partial,
                    client_record,
                    hops,
                    execution.details.get("competitors", ()),
                    execution.details.get("clients"),
                ),
                # in virtual time computing takes no time: CPU figures say nothing of the run
                **(cpu_metrics(execution.details.get("cpu")) if record.clock == REAL else {}),
                **stress_metrics(execution.details.get("stress")),
            }
            record.cpu_bound_reasons = execution.details.get("cpu_bound_reasons", [])
            record.cpu_unknown_reasons = execution.details.get("cpu_unknown_reasons", [NO_CPU_RECORD])
            record.invalid_reasons = invalid_reasons(details, exp.validity.cpu_bound)
            if record.status == "ok" and record.invalid_reasons:
                record.status = "invalid"
        except (KeyboardInterrupt, SystemExit):
            folder.abandon_run(partial)
            raise
        except Exception as error:  # noqa: BLE001 - any failure of one run is that run's result
            full = storage_error(error, partial)
            if full is not None:  # not the run's fault: every next run would fail alike, so stop
                folder.abandon_run(partial)
                raise full from None
            record.status = "failed"
            record.error = str(error) if isinstance(error, QuicbedError) else f"{type(error).__name__}: {error}"
            with writing(partial / "logs"):
                (partial / "logs").mkdir(exist_ok=True)
                (partial / "logs" / "error.txt").write_text(traceback.format_exc())
            keeper.close()  # the network may be in any state: the next run builds a fresh one
        record.finished = time.time()
        with deferred_signals():  # a Ctrl-C now must not separate the folder from its line
            folder.commit_run(run.run_id, partial, record, details)
        return record


def _attempt_summary(number: int, status: str, error: str | None, invalid_reasons: list[str]) -> dict[str, Any]:
    """What a run's later attempts keep of an earlier one: how it went and why it did not count."""
    why = {"error": error} if status == "failed" else {"invalid_reasons": invalid_reasons}
    return {"attempt": number, "status": status, **why}


def has_attempts_left(status: str, earlier: list[dict[str, Any]], validity: Validity) -> bool:
    """Whether a run whose last attempt ended ``status`` is made again: an invalid one while
    fewer than ``validity.reruns`` earlier attempts were invalid, a failed one likewise with
    ``validity.retry_failed``."""
    budget = {"invalid": validity.reruns, "failed": validity.retry_failed}
    return status in budget and sum(1 for attempt in earlier if attempt["status"] == status) < budget[status]


def attempts_to_continue(line: RunRecord, validity: Validity) -> list[dict[str, Any]] | None:
    """For a results line whose run the runner would have made again had its session not
    stopped first: the attempts so far (its earlier ones, then its own), from which the next
    continues; None for a run that is done."""
    earlier = list(line.earlier_attempts or [])
    if line.warmup or not has_attempts_left(line.status, earlier, validity):
        return None
    return [
        *earlier,
        _attempt_summary(int(line.attempt or len(earlier) + 1), line.status, line.error, line.invalid_reasons or []),
    ]


def _shard_identity(shard: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """Which shard a folder holds (its run count may grow with --repetitions on resume)."""
    return None if not shard else (shard.get("index"), shard.get("count"), shard.get("by"), shard.get("split"))


def _shard_text(shard: dict[str, Any] | None) -> str:
    if not shard:
        return "none (all runs)"
    text = f"{shard['index']}/{shard['count']} by {shard['by']}"
    if shard["by"] == "run" and not shard.get("split"):
        text += " (dealt out by position, as quicbed did before runs kept their shard across resumes)"
    return text


def random_stream(seed: int, run_id: str, attempt: int = 1) -> int:
    """The random stream (1 .. 2**31 - 1) of the network built for attempt ``attempt`` of run
    ``run_id``: the same experiment file draws the same numbers again (in virtual time, the same
    figures), while its repetitions, cells and remade attempts draw independent ones, and
    ``seed`` changes them all."""
    return zlib.crc32(f"{seed}/{run_id}/{attempt}".encode()) % (2**31 - 1) + 1


def invalid_reasons(details: dict[str, Any], cpu_bound: str = "flag") -> list[str]:
    """Why a completed run must not count: the simulator fell behind or the TAP path lost or
    held frames, a capture lost packets, the measurements themselves are flawed (a capture
    that did not write what it accepted, a trace overrun, super-packets), an endpoint or the
    channel was CPU-bound (with ``cpu_bound: exclude``), a competing download failed or the
    background traffic delivered nothing (the download then ran without the load it was to
    share the network with, yet would count as a competing run)."""
    reasons = list((details.get("mac_stats") or {}).get("invalid_reasons") or [])
    for number, competitor in enumerate(details.get("competitors") or [], start=1):
        if not competitor.get("ok"):
            reasons.append(
                f"competitor {number} failed ({competitor.get('error') or 'no error given'}): the "
                "download did not compete with it to the end"
            )
    background = details.get("background")
    if background is not None and not background.get("bytes_received"):
        reasons.append(
            f"the background traffic ({background.get('kind')}, {background.get('from')} -> "
            f"{background.get('to')}) delivered nothing: the download ran without it"
        )
    reasons += (details.get("measurement") or {}).get("invalid_reasons") or []
    if cpu_bound == "exclude":
        reasons += details.get("cpu_bound_reasons") or []
    for name, stats in (details.get("capture_stats") or {}).items():
        lost = (stats.get("dropped_by_kernel") or 0) + (stats.get("dropped_by_interface") or 0)
        if lost:
            reasons.append(f"the {name} capture dropped {lost} packets (tcpdump's buffer was full)")
        elif not stats.get("complete", True):
            reasons.append(f"the {name} capture did not stop cleanly")
    return reasons
