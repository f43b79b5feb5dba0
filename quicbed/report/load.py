"""Reading a results folder (docs/results.md): ``results.jsonl``, ``metadata.json`` and the
run folders, into one pandas frame with a row per run.

The folder may be incomplete (an experiment still running, interrupted, or resumed): a
truncated last line, a malformed line or a missing file gives a warning, not a crash.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from quicbed.analysis.catalogue import METRICS
from quicbed.errors import QuicbedError
from quicbed.results import RESULTS_FILE, read_records
from quicbed.spec.study import Study, parse_study

METADATA_FILE = "metadata.json"
EXPERIMENT_FILE = "experiment.yaml"

#: the columns every runs frame has, before the cell axes and the metrics
RUN_COLUMNS = (
    "run_id",
    "cell_index",
    "cell",
    "repetition",
    "warmup",
    "status",
    "error",
    "invalid_reasons",
    "cpu_bound_reasons",
    "cpu_unknown_reasons",
    "attempt",
    "earlier_invalid",
    "transport",
    "transport_kind",
    "folder",
    "started",
    "finished",
    "clock",
    "kernel",
    "host",
)
#: why a record without ``cpu_unknown_reasons`` (written before runs said) and without CPU
#: figures has an unknown CPU state
NO_CPU_FIGURES = "no CPU figures in the record"


class ReportError(QuicbedError):
    """A results folder cannot be reported on (the message names the folder and the fix)."""


@dataclass
class LoadedResults:
    """Everything the report needs from one results folder, read (the runner's
    runner.folder.ResultsFolder is the folder being written, and locked)."""

    path: Path
    name: str
    description: str
    metadata: dict[str, Any]
    records: list[dict[str, Any]]
    runs: pd.DataFrame  # one row per run: RUN_COLUMNS, then the axes, then the metrics
    axes: list[str]  # the matrix axes, in file order (column names in ``runs``)
    metric_names: list[str]  # metric columns in ``runs``: catalogue order, then the rest
    transports: list[str]  # transport names in matrix order ("" when runs name none)
    warnings: list[str] = field(default_factory=list)
    study: Any = None  # the experiment's ``study`` section, as written (quicbed.spec.study)
    #: the attempts a later line of the same run superseded (an invalid run made again, a failed
    #: one retried), as rows like ``runs``'s: what only the last attempt would hide
    superseded: pd.DataFrame | None = None

    @property
    def has_transport_axis(self) -> bool:
        return "transport" in self.axes

    @property
    def other_axes(self) -> list[str]:
        """The axes besides ``transport``."""
        return [axis for axis in self.axes if axis != "transport"]

    def parsed_study(self) -> Study | None:
        """The experiment's study section, checked against the axes of the recorded runs
        (SpecError when it cannot be read)."""
        return parse_study(self.study, {axis: list(dict.fromkeys(self.runs[axis])) for axis in self.axes})

    def run_folder(self, run_id: str) -> Path:
        row = self.runs.loc[self.runs["run_id"] == run_id]
        folder = str(row["folder"].iloc[0]) if not row.empty else f"runs/{run_id}"
        return self.path / folder


# --------------------------------------------------------------------------- results.jsonl


def read_results_lines(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The run records of ``results.jsonl`` and warnings about lines that were skipped.

    A last line without its newline that does not parse is a run being written (or an
    interrupted write): skipped with a warning. Other malformed lines are skipped too.
    A run id seen twice (a resumed experiment that ran it again) keeps its last record.
    """
    records, _, warnings = read_attempts(path)
    return records, warnings


def read_attempts(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Like :func:`read_results_lines`, and also the records a later line of the same run
    superseded, in file order (each line is one attempt of its run). Lines the reader cannot
    use are skipped with a warning (quicbed.results.read_records, not strict). Each record
    is its line as written (``RunRecord.to_dict``): the report reads every key warily, and
    tells a key a line lacks (an older quicbed's) from its default."""
    lines, warnings = read_records(path, strict=False)
    by_id: dict[str, dict[str, Any]] = {}
    superseded: list[dict[str, Any]] = []
    for record in (line.to_dict() for line in lines):
        run_id = str(record["run_id"])
        if run_id in by_id:
            # an invalid or failed attempt made again is the normal case; a good run made again
            # (folders merged twice, a run edited by hand) is worth a word
            if by_id[run_id].get("status") == "ok":
                warnings.append(f"{path}: run {run_id} completed twice; the later record counts")
            superseded.append(by_id[run_id])
        by_id[run_id] = record
    return list(by_id.values()), superseded, warnings


def read_json_object(path: Path, warnings: list[str]) -> dict[str, Any]:
    """A JSON object from ``path``; {} with a warning when it is missing or broken."""
    if not path.exists():
        warnings.append(f"{path} is missing; the report shows no run environment")
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        warnings.append(f"{path} cannot be read ({error}); ignored")
        return {}
    return value if isinstance(value, dict) else {}


# --------------------------------------------------------------------------- flattening


def axis_value(value: Any) -> Any:
    """A cell value usable as a table key: scalars as they are, anything else as compact JSON."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return "none" if value is None else value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def cell_label(cell: dict[str, Any]) -> str:
    return ", ".join(f"{key}={axis_value(value)}" for key, value in cell.items()) or "(single cell)"


def flatten_metrics(metrics: Any, prefix: str = "") -> dict[str, float]:
    """Numeric metric values by name; nested mappings become ``outer_inner`` names."""
    flat: dict[str, float] = {}
    if not isinstance(metrics, dict):
        return flat
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_metrics(value, f"{name}_"))
        elif isinstance(value, (bool, int, float)):
            flat[name] = float(value)
        elif value is None:
            flat[name] = math.nan
    return flat


def cpu_unknown_text(record: dict[str, Any], metrics: dict[str, float]) -> str:
    """Why the run's CPU state is unknown, "" if it is known. A record that does not say
    (written before runs did) is unknown when it has no CPU figures: "not CPU-bound" must rest
    on figures, never on their absence."""
    reasons = record.get("cpu_unknown_reasons")
    if isinstance(reasons, list):
        return "; ".join(str(reason) for reason in reasons)
    return "" if "cpu_machine_busy" in metrics else NO_CPU_FIGURES


def _transport_name(record: dict[str, Any]) -> str:
    cell = record.get("cell") or {}
    if "transport" in cell:
        return str(axis_value(cell["transport"]))
    transport = record.get("transport")
    if isinstance(transport, dict) and transport.get("name"):
        return str(transport["name"])
    return str(transport) if isinstance(transport, str) else ""


def _transport_kind(record: dict[str, Any]) -> str:
    transport = record.get("transport")
    return str(transport.get("kind") or "") if isinstance(transport, dict) else ""


def _ordered_metrics(names: set[str]) -> list[str]:
    known = [name for name in METRICS if name in names]
    return known + sorted(names - set(known))


def runs_frame(records: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[str], list[str]]:
    """One row per record (columns :data:`RUN_COLUMNS`, the axes, the metrics), sorted by
    cell then run id; also the axis names and metric names."""
    axes: list[str] = []
    metric_names: set[str] = set()
    cell_numbers: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for record in records:
        cell: dict[str, Any] = record["cell"] if isinstance(record.get("cell"), dict) else {}
        for axis in cell:
            if axis not in axes:
                axes.append(axis)
        key = json.dumps(cell, sort_keys=True, default=str)
        index = record.get("cell_index")
        if not isinstance(index, int):
            index = cell_numbers.setdefault(key, len(cell_numbers))
        metrics = flatten_metrics(record.get("metrics"))
        metric_names.update(metrics)
        reasons = record.get("invalid_reasons") or []
        earlier = record.get("earlier_attempts")
        rows.append(
            {
                "run_id": str(record["run_id"]),
                "cell_index": index,
                "cell": cell_label(cell),
                "repetition": record.get("repetition"),
                "warmup": bool(record.get("warmup", False)),
                "status": str(record.get("status") or "unknown"),
                "error": record.get("error") or "",
                "invalid_reasons": "; ".join(str(reason) for reason in reasons)
                if isinstance(reasons, list)
                else str(reasons),
                "cpu_bound_reasons": "; ".join(str(reason) for reason in record.get("cpu_bound_reasons") or []),
                "cpu_unknown_reasons": cpu_unknown_text(record, metrics),
                "attempt": int(record.get("attempt") or 1),
                "earlier_invalid": sum(
                    1 for attempt in earlier if isinstance(attempt, dict) and attempt.get("status") == "invalid"
                )
                if isinstance(earlier, list)
                else 0,
                "transport": _transport_name(record),
                "transport_kind": _transport_kind(record),
                "folder": str(record.get("folder") or f"runs/{record['run_id']}"),
                "started": record.get("started"),
                "finished": record.get("finished"),
                "clock": str(record.get("clock") or "real"),
                "kernel": str(record.get("kernel") or ""),
                "host": str(record.get("host") or ""),
                "__cell": {axis: axis_value(value) for axis, value in cell.items()},
                "__metrics": metrics,
            }
        )
    # the transport axis is the run's "transport" column; other clashes with run fields get a prefix
    columns = {axis: (axis if axis == "transport" or axis not in RUN_COLUMNS else f"cell.{axis}") for axis in axes}
    ordered = _ordered_metrics(metric_names)
    metric_columns = {
        name: (name if name not in RUN_COLUMNS and name not in columns.values() else f"metric.{name}")
        for name in ordered
    }
    table = []
    for row in rows:
        values, measured = row.pop("__cell"), row.pop("__metrics")
        row.update({columns[axis]: values.get(axis) for axis in axes if axis != "transport"})
        row.update({metric_columns[name]: measured.get(name, math.nan) for name in ordered})
        table.append(row)
    axis_columns = [column for column in columns.values() if column not in RUN_COLUMNS]
    frame = pd.DataFrame(table, columns=[*RUN_COLUMNS, *axis_columns, *metric_columns.values()])
    frame = frame.sort_values(
        ["cell_index", "warmup", "run_id"], ascending=[True, False, True], kind="stable"
    ).reset_index(drop=True)
    return frame, list(columns.values()), list(metric_columns.values())


# --------------------------------------------------------------------------- folder


def _experiment_info(folder: Path, metadata: dict[str, Any]) -> dict[str, Any]:
    """The experiment as metadata.json resolved it, else as experiment.yaml says."""
    experiment = metadata.get("experiment")
    if isinstance(experiment, dict) and experiment:
        return experiment
    source = folder / EXPERIMENT_FILE
    if source.exists():
        try:
            loaded = yaml.safe_load(source.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            return {}
        return loaded if isinstance(loaded, dict) else {}
    return {}


def _transport_order(frame: pd.DataFrame, experiment: dict[str, Any]) -> list[str]:
    present = list(dict.fromkeys(frame["transport"]))
    matrix = experiment.get("matrix")
    declared = matrix.get("transport") if isinstance(matrix, dict) else None
    order = [str(name) for name in declared if str(name) in present] if isinstance(declared, list) else []
    return order + [name for name in present if name not in order]


def load_results(folder: Path) -> LoadedResults:
    """Read a results folder; :class:`ReportError` when there is nothing to report on."""
    if folder.exists() and not folder.is_dir():
        raise ReportError(
            f"{folder} is a file, not a results folder (fix: give the folder 'quicbed run' printed, "
            "e.g. results/NAME-YYYYMMDD-HHMMSS)"
        )
    if not folder.is_dir():
        raise ReportError(
            f"results folder {folder} not found (fix: give the folder 'quicbed run' printed, "
            "e.g. results/NAME-YYYYMMDD-HHMMSS)"
        )
    results = folder / RESULTS_FILE
    if results.is_dir():
        raise ReportError(
            f"{results} is a folder, not the file of run records (fix: give a folder written by 'quicbed run')"
        )
    if not results.exists():
        raise ReportError(
            f"{folder} has no {RESULTS_FILE} (fix: give a folder written by 'quicbed run'; "
            "if its experiment has just started, wait until the first run has finished)"
        )
    records, superseded, warnings = read_attempts(results)
    if not records:
        raise ReportError(
            f"{results} holds no complete run record (fix: wait until the first run has "
            f"finished, or continue the experiment with 'quicbed run --resume --out {folder} "
            "EXPERIMENT')"
        )
    metadata = read_json_object(folder / METADATA_FILE, warnings)
    experiment = _experiment_info(folder, metadata)
    frame, axes, metric_names = runs_frame(records)
    earlier = runs_frame(superseded)[0]
    return LoadedResults(
        path=folder,
        name=str(experiment.get("name") or metadata.get("name") or folder.name),
        description=str(experiment.get("description") or metadata.get("description") or "").strip(),
        metadata=metadata,
        records=records,
        runs=frame,
        axes=axes,
        metric_names=metric_names,
        transports=_transport_order(frame, experiment),
        warnings=warnings,
        study=experiment.get("study"),
        superseded=earlier,
    )
