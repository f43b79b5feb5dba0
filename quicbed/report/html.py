"""RESULTS/index.html: one static page (HTML and CSS, no JavaScript, nothing fetched) with
the experiment, its environment, the summary tables, the gains, the figures and every run
with links to its artifacts. All links are relative, so the folder can be moved or zipped."""

from __future__ import annotations

import datetime as dt
import json
import math
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from quicbed.report.figure_context import FigureFile, Figures
from quicbed.report.hosts import hosts_table
from quicbed.report.load import (
    EXPERIMENT_FILE,
    METADATA_FILE,
    RESULTS_FILE,
    LoadedResults,
)
from quicbed.report.markdown import cpu_bound_runs, cpu_unknown_runs, excluded_runs
from quicbed.report.summary import Summary
from quicbed.report.tables import (
    Table,
    counts_table,
    gains_explanation,
    gains_table,
    headlines,
    metric_heading,
    metric_table,
    overview_table,
)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
td:not(.text) { white-space: nowrap; }
tr.failed td { background: #fde8e8; } tr.invalid td { background: #fff4da; } tr.warmup td { color: #777; }
figure { display: inline-block; margin: 0.8em 1.5em 1.2em 0; max-width: 46em; vertical-align: top; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; }
.files a { margin-right: 0.6em; white-space: nowrap; }
.note { color: #8a5a00; } pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
@media print { figure { page-break-inside: avoid; } details { display: none; } }
"""

#: (label, candidate keys) of metadata.json fields shown in the environment table
ENVIRONMENT_FIELDS = (
    ("host", ("host", "hostname", "node")),
    ("kernel", ("kernel", "kernel_release", "release")),
    ("CPU", ("cpu_model",)),
    ("host sysctls", ("sysctls",)),
    ("quicbed", ("quicbed", "quicbed_version", "version")),
    ("tool versions", ("versions", "tools", "tool_versions")),
    ("git commit", ("git", "git_commit", "commit")),
    ("backend", ("backend",)),
    ("in microVM", ("in_microvm", "microvm", "vm")),
    ("started", ("started", "start", "started_at")),
    ("finished", ("finished", "end", "finished_at", "ended")),
)
NESTED = ("environment", "host", "experiment", "run")


def href(path: str | Path) -> str:
    return quote(Path(path).as_posix(), safe="/")


def link(path: str | Path, text: str | None = None) -> str:
    return f'<a href="{href(path)}">{escape(text or Path(path).as_posix())}</a>'


def _find(metadata: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in metadata and metadata[key] not in (None, "", {}):
            return metadata[key]
    for nested in NESTED:
        inner = metadata.get(nested)
        if isinstance(inner, dict):
            for key in keys:
                if key in inner and inner[key] not in (None, "", {}):
                    return inner[key]
    return None


def _show(value: Any, label: str) -> str:
    if label in ("started", "finished") and isinstance(value, (int, float)) and not isinstance(value, bool):
        utc = dt.timezone.utc  # noqa: UP017 (dt.UTC needs Python 3.11; quicbed supports 3.10)
        return dt.datetime.fromtimestamp(float(value), utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        if label == "host":  # quicbed.runner.metadata.host_info(); kernel and microVM have rows of their own
            name = value.get("hostname") or value.get("name") or value.get("node") or ""
            extra = [str(value[key]) for key in ("os", "machine") if value.get(key)]
            if value.get("cpus"):
                extra.append(f"{value['cpus']} CPUs")
            if isinstance(value.get("memory_bytes"), (int, float)):
                extra.append(f"{value['memory_bytes'] / 2**30:.1f} GiB")
            return f"{name}{' (' + ', '.join(extra) + ')' if extra else ''}"
        if label == "git commit":
            commit = str(value.get("commit") or value.get("sha") or json.dumps(value))
            return commit + (" (uncommitted changes)" if value.get("dirty") else "")
        return ", ".join(f"{k} {v}" for k, v in value.items() if not isinstance(v, (dict, list)))
    return str(value)


def environment_rows(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for label, keys in ENVIRONMENT_FIELDS:
        value = _find(metadata, keys)
        if value is not None:
            rows.append((label, _show(value, label)))
    return rows


def html_table(table: Table, text_columns: int = 1) -> str:
    head = "".join(
        f'<th class="{"text" if i < text_columns else ""}">{escape(h)}</th>' for i, h in enumerate(table.header)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"text" if i < text_columns else ""}">{escape(c)}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _duration(run: Any) -> str:
    started, finished = run["started"], run["finished"]
    if (
        isinstance(started, (int, float))
        and isinstance(finished, (int, float))
        and not (math.isnan(started) or math.isnan(finished))
    ):
        return f"{finished - started:.1f} s"
    return "–"


def run_files(results: LoadedResults, folder: str) -> str:
    """Links to the artifacts of one run folder (what is there: nothing is assumed)."""
    path = results.path / folder
    if not path.is_dir():
        return '<span class="note">run folder missing</span>'
    entries = sorted(path.iterdir(), key=lambda entry: (entry.is_dir(), entry.name))
    links = [
        link(Path(folder) / entry.name, entry.name + ("/" if entry.is_dir() else ""))
        for entry in entries
        if not entry.name.startswith(".")
    ]
    return f'<span class="files">{" ".join(links)}</span>'


def runs_table(results: LoadedResults) -> str:
    axes_header = "".join(f'<th class="text">{escape(axis)}</th>' for axis in results.axes) or (
        '<th class="text">cell</th>'
    )
    rows = []
    for _, run in results.runs.iterrows():
        kind = "warmup" if run["warmup"] and run["status"] == "ok" else str(run["status"])
        reason = run["error"] if run["status"] != "invalid" else run["invalid_reasons"]
        cells = "".join(f'<td class="text">{escape(str(run[axis]))}</td>' for axis in results.axes) or (
            f'<td class="text">{escape(str(run["cell"]))}</td>'
        )
        rows.append(
            f'<tr class="{escape(kind)}"><td class="text">{escape(run["run_id"])}</td>{cells}'
            f"<td>{escape(str(run['repetition']))}{' (warm-up)' if run['warmup'] else ''}</td>"
            f'<td class="text">{escape(str(run["status"]))}</td><td>{_duration(run)}</td>'
            f'<td class="text">{escape(str(reason or ""))}</td>'
            f'<td class="text">{run_files(results, str(run["folder"]))}</td></tr>'
        )
    return (
        f'<table><thead><tr><th class="text">run</th>{axes_header}<th>repetition</th>'
        '<th class="text">status</th><th>duration</th><th class="text">error / invalid because</th>'
        f'<th class="text">artifacts</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _figure(figure: FigureFile) -> str:
    svg = f" {link(figure.svg, 'SVG')}" if figure.svg else ""
    data = f" {link(figure.csv, 'CSV')}" if figure.csv else ""
    return (
        f'<figure><a href="{href(figure.png)}"><img src="{href(figure.png)}" alt="{escape(figure.title)}"></a>'
        f"<figcaption><b>{escape(figure.title)}.</b> {escape(figure.caption)}{svg}{data}</figcaption></figure>"
    )


def render_html(
    results: LoadedResults, summary: Summary, metrics: list[str], figures: Figures, outputs: list[str]
) -> str:
    """The page; ``outputs`` are the report's own files (relative), linked at the top."""
    text_columns = max(1, len(summary.cell_columns) - 2)
    parts = [f"<h1>{escape(results.name)}</h1>"]
    if results.description:
        parts.append(f"<p>{escape(results.description)}</p>")
    sources = [name for name in (EXPERIMENT_FILE, METADATA_FILE, RESULTS_FILE) if (results.path / name).exists()]
    parts.append("<p>Files: " + " · ".join(link(name) for name in [*outputs, *sources]) + "</p>")
    environment = environment_rows(results.metadata)
    if environment:
        parts.append(
            "<h2>Environment</h2><table><tbody>"
            + "".join(
                f'<tr><th class="text">{escape(label)}</th><td class="text">{escape(value)}</td></tr>'
                for label, value in environment
            )
            + "</tbody></table>"
        )
    hosts = hosts_table(results.metadata, len(results.runs))
    if hosts is not None:
        parts += ["<h2>Hosts</h2>", html_table(hosts, text_columns=len(hosts.header))]
    if results.metadata:
        dump = json.dumps(results.metadata, indent=1, default=str)
        dump = dump if len(dump) < 200_000 else dump[:200_000] + "\n… (truncated; see metadata.json)"
        parts.append(f"<details><summary>metadata.json</summary><pre>{escape(dump)}</pre></details>")
    counted = "ok and invalid" if summary.include_invalid else "ok"
    for headline in headlines(results.runs, summary):
        parts.append(f'<p class="warning"><strong>{escape(headline)}</strong></p>')
    for figure in figures.headline:
        parts += [f"<h2>{escape(figure.title)}</h2>", _figure(figure)]
    parts += [
        "<h2>Overview</h2>",
        (
            f"<p>{len(results.runs)} run(s) recorded. Statistics use {counted} runs that are not warm-up runs: "
            "mean ± half-width of the 95 % Student-t confidence interval.</p>"
        ),
        html_table(overview_table(summary, metrics), text_columns),
        "<h2>Runs per cell</h2>",
        html_table(counts_table(summary), text_columns),
    ]
    excluded = excluded_runs(results, summary.include_invalid)
    if excluded:
        parts.append(
            "<p>Failed and invalid runs:</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in excluded) + "</ul>"
        )
    flagged = cpu_bound_runs(results)
    if flagged:
        parts.append(
            "<p>CPU-bound runs (counted; <code>validity: {cpu_bound: exclude}</code> leaves them out):</p>"
            "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in flagged) + "</ul>"
        )
    unknown = cpu_unknown_runs(results)
    if unknown:
        parts.append(
            "<p>Runs whose CPU state is unknown (counted; whether they were CPU-bound cannot be told):</p>"
            "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in unknown) + "</ul>"
        )
    for column in metrics:
        parts += [f"<h2>{escape(metric_heading(column))}</h2>", html_table(metric_table(summary, column), text_columns)]
    if summary.baseline and not summary.gains.empty:
        others = max(0, len(summary.cell_columns) - 2 - (1 if "transport" in summary.cell_columns else 0))
        parts += [
            f"<h2>Relative gain over {escape(summary.baseline)}</h2>",
            f"<p>{escape(gains_explanation(summary.baseline))}</p>",
            html_table(gains_table(summary, metrics), others + 2),
        ]
    if figures.figures:
        parts.append("<h2>Figures</h2>")
        parts += [_figure(figure) for figure in figures.figures]
    parts += ["<h2>Runs</h2>", runs_table(results)]
    notes = [*results.warnings, *figures.notes]
    if notes:
        parts.append(
            "<h2>Notes</h2><ul>" + "".join(f'<li class="note">{escape(note)}</li>' for note in notes) + "</ul>"
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(results.name)}'
        f"</title><style>{CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
