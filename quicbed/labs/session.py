"""What a lab's checks work with: the student's files, a network built from their topology,
probes through it, and the results of their experiment files.

A session keeps at most one network up (building another tears the first down) and
remembers each experiment it ran, so several checks can look at one set of results.
``close`` stops everything it started; the CLI calls it on success, failure and Ctrl-C.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicbed.apps import iperf, ping
from quicbed.backends import create, vm_options
from quicbed.backends.base import Network
from quicbed.errors import QuicbedError, SpecError
from quicbed.host.vm import inside_vm
from quicbed.labs.catalogue import Lab
from quicbed.labs.checking import CannotCheck, Verdict
from quicbed.results import RESULTS_FILE
from quicbed.runner.folder import latest_records, read_results
from quicbed.spec.experiment import Experiment, load_experiment
from quicbed.spec.loader import load_topology
from quicbed.spec.topology import Topology
from quicbed.spec.yamlfile import load_yaml

#: where checks put the results of the student's experiment files, inside the student's folder
CHECK_RESULTS = "check-results"
#: the lines of ``quicbed run`` a check shows as it goes (all of them are kept in a log file)
SHOWN_RUN_LINES = re.compile(r"\[\s*\d+/\d+\]|note:|running |warning|quicbed: error|interrupted|results: |\d+ ok, ")


class StudentError(SpecError):
    """Something the student hands in is missing or unreadable (a failed check, with a fix)."""


@dataclass
class ExperimentOutcome:
    """The results folder of one checked experiment file."""

    file: Path
    folder: Path
    status: int  # quicbed run's exit status
    rows: list[dict[str, Any]]  # one per run: the last attempt of a run made again
    metadata: dict[str, Any]

    @classmethod
    def read(cls, file: Path, folder: Path, status: int) -> ExperimentOutcome:
        metadata_file = folder / "metadata.json"
        metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
        # rows as the lines were written: lab checks read them as dicts
        rows = [record.to_dict() for record in latest_records(read_results(folder / RESULTS_FILE))]
        return cls(file, folder, status, rows, metadata)

    def runs(self, **cell: Any) -> list[dict[str, Any]]:
        """Measured (non-warm-up) runs whose cell has these values, e.g. ``transport="tcp"``;
        matrix axes with dots are passed as a dict: ``runs(**{"link.bottleneck.loss": 5})``."""
        return [
            row
            for row in self.rows
            if not row.get("warmup") and all(row.get("cell", {}).get(axis) == value for axis, value in cell.items())
        ]

    def values(self, metric: str, **cell: Any) -> list[float]:
        """``metric`` of the matching runs that completed and measured it."""
        found = []
        for row in self.runs(**cell):
            value = (row.get("metrics") or {}).get(metric)
            if row.get("status") == "ok" and isinstance(value, (int, float)) and not math.isnan(value):
                found.append(float(value))
        return found

    def every_run_ok(self) -> Verdict:
        """Passed when every measured run completed and every cell has a valid one; seen: which
        did not, and why. A run still invalid after the runner made it again (the channel fell
        behind real time) is the machine's, not the solution's: its cell's other runs stand
        for it, and a cell with none fails, saying so."""
        runs = self.runs()
        failed = [f"{row['run_id']} {row.get('error')}" for row in runs if row.get("status") not in ("ok", "invalid")]
        late = [f"{row['run_id']} {row.get('invalid_reasons')}" for row in runs if row.get("status") == "invalid"]
        cells = {json.dumps(row.get("cell", {}), sort_keys=True) for row in runs}
        valid = {json.dumps(row.get("cell", {}), sort_keys=True) for row in runs if row.get("status") == "ok"}
        unjudged = sorted(cells - valid)
        seen = f"{len(runs) - len(failed) - len(late)} of {len(runs)} ok"
        if failed:
            seen += f" (not ok: {'; '.join(failed)})"
        if late:
            seen += (
                f"; invalid, the channel behind real time (this machine was busy; the cell's valid runs "
                f"count): {'; '.join(late)}"
            )
        if unjudged:
            seen += (
                f"; no valid run in {', '.join(unjudged)}: run the check again on a machine with a "
                "core free for the channel"
            )
        return Verdict(bool(runs) and not failed and not unjudged, seen)


class CheckSession:
    def __init__(self, lab: Lab, folder: Path, log: Callable[[str], None] = lambda line: None) -> None:
        self.lab = lab
        self.folder = Path(folder).resolve()
        self.log = log
        self._network: tuple[tuple[Any, ...], Network] | None = None
        self._experiments: dict[str, ExperimentOutcome] = {}
        self.backends_used: list[str] = []
        #: what one check measured for a later one (e.g. the RTT the answers are compared with)
        self.measured: dict[str, Any] = {}

    # -- the student's files -----------------------------------------------------------------
    def file(self, name: str) -> Path:
        path = self.folder / name
        if not path.is_file():
            raise StudentError(
                f"{name} is missing",
                source=str(self.folder),
                fix=f"write it, or start again from the lab's: quicbed lab start {self.lab.name} DIR",
            )
        return path

    def topology(self, name: str = "topology.py", **params: Any) -> Topology:
        return load_topology(str(self.file(name)), {key: str(value) for key, value in params.items()})

    def answers(self, name: str = "answers.yaml") -> dict[str, Any]:
        """The student's answers: a YAML mapping of question names to values."""
        doc = load_yaml(self.file(name))
        if not isinstance(doc.data, dict):
            raise StudentError(
                "answers are a mapping of question: answer",
                source=str(doc.path),
                fix="keep the layout of the lab's answers.yaml",
            )
        return doc.data

    def answer(self, key: str, name: str = "answers.yaml") -> float:
        """One numeric answer; a missing or non-numeric one is the student's error."""
        value = self.answers(name).get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StudentError(
                f"{key} has no number (found {value!r})",
                source=str(self.folder / name),
                field=key,
                fix="write the value you measured, e.g. 12.5",
            )
        return float(value)

    # -- networks ----------------------------------------------------------------------------
    def backend(self, topology: Topology) -> str:
        """The backend that builds ``topology`` for this lab on this machine: the lab's, or for
        ``auto`` netns, and ns3 when the links need netem and this kernel has none."""
        from quicbed.backends import kernel_problem, unavailable, unrealisable

        wanted = self.lab.backend
        if wanted == "auto":
            wanted = "ns3" if kernel_problem("netns", topology) else "netns"
        lacking = kernel_problem(wanted, topology)
        if lacking:
            raise CannotCheck(
                f"{lacking}, which the {wanted} backend needs for this topology (check in a guest kernel: add --vm)"
            )
        missing = unavailable(wanted)
        if missing:
            raise CannotCheck(f"the {wanted} backend is not available here: {missing}")
        problems = unrealisable(wanted, topology)
        if problems:
            raise QuicbedError(f"the {wanted} backend cannot build this topology: {'; '.join(problems)}")
        return wanted

    def network(self, name: str = "topology.py", **params: Any) -> Network:
        """The network of the student's topology, built once and kept for the next checks."""
        key = (name, tuple(sorted((k, str(v)) for k, v in params.items())))
        if self._network is not None and self._network[0] == key:
            return self._network[1]
        self.close_network()
        topology = self.topology(name, **params)
        backend = self.backend(topology)
        self.log(f"building {name} on {backend}")
        network = create(backend, topology, **(vm_options(backend) if inside_vm() else {}))
        network.__enter__()  # as the runner starts one: a failed start leaves nothing behind
        self._network = (key, network)
        if backend not in self.backends_used:
            self.backends_used.append(backend)
        return network

    def ping(
        self, network: Network, source: str, destination: str, count: int = 20, interval: float = 0.05
    ) -> ping.PingResult:
        self.log(f"ping {source} -> {destination}, {count} probes")
        return ping.ping(network.node(source), network.node(destination).address, count=count, interval=interval)

    def iperf(self, network: Network, client: str, server: str, seconds: float = 3.0) -> iperf.IperfResult:
        """TCP from ``client`` to ``server`` for ``seconds`` (client sends)."""
        self.log(f"iperf3 {client} -> {server}, {seconds:g} s")
        return iperf.between(network, client, server, duration=seconds, reverse=False)

    def close_network(self) -> None:
        if self._network is not None:
            _, network = self._network
            self._network = None
            network.stop()

    # -- experiments -------------------------------------------------------------------------
    def experiment_file(self, name: str = "experiment.yaml") -> Experiment:
        """The student's experiment file, read and checked (not run)."""
        return load_experiment(self.file(name))

    def experiment(self, name: str = "experiment.yaml") -> ExperimentOutcome:
        """Run the student's experiment file at the lab's small sizes (once per session) into
        check-results/STEM in their folder; the previous check's folder becomes STEM.previous."""
        if name in self._experiments:
            return self._experiments[name]
        path = self.file(name)
        self.experiment_file(name)  # a broken file fails here, with file, line and fix
        self.close_network()  # the experiment builds its own
        out = self.folder / CHECK_RESULTS / path.stem
        if out.exists():
            previous = out.with_name(out.name + ".previous")
            shutil.rmtree(previous, ignore_errors=True)
            out.rename(previous)
        out.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "quicbed",
            "run",
            str(path),
            "--out",
            str(out),
            "--yes",
            *self.lab.run.arguments(),
        ]
        self.log(f"running {name}: quicbed run {name} {' '.join(self.lab.run.arguments())}")
        with subprocess.Popen(
            argv, cwd=self.folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process:
            assert process.stdout is not None
            with (out.parent / f"{path.stem}.log").open("w") as saved:
                for line in process.stdout:
                    saved.write(line)
                    if SHOWN_RUN_LINES.match(line):  # progress and problems; the report's tables stay in the log
                        self.log("  " + line.rstrip())
        if not (out / RESULTS_FILE).exists():
            raise QuicbedError(
                f"quicbed run {name} stopped (exit {process.returncode}) before any run: "
                f"see {out.parent / (path.stem + '.log')}"
            )
        outcome = ExperimentOutcome.read(path, out, process.returncode)
        backend = outcome.metadata.get("backend") or (outcome.rows[0].get("backend") if outcome.rows else None)
        if backend and backend not in self.backends_used:
            self.backends_used.append(backend)
        self._experiments[name] = outcome
        return outcome

    def close(self) -> None:
        self.close_network()
