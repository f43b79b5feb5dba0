"""The report's figures over runs (docs/metrics.md, "Plots"), drawn with quicbed.analysis.plots:
the study's headline, a bar chart per metric, CCDFs, CPU by role and goodput against delay
from the summary and the runs' metrics, and the distributions over the clients of
many-client runs. A figure without data is skipped with a note."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis import plots, stats
from quicbed.analysis.catalogue import Metric
from quicbed.errors import SpecError
from quicbed.report.figure_context import FigureContext, slug
from quicbed.report.load import LoadedResults
from quicbed.report.summary import catalogue_entry
from quicbed.report.tables import CPU_MARK_LABEL, cpu_marked, difference, marks_caption
from quicbed.spec.study import HUE_JOINER, axis_text

MAX_CCDF_PANELS = 4  # per-value CCDFs up to this many values of the other axes, else one pooled


# --------------------------------------------------------------------------- per cell


def _combination(results: LoadedResults, row: pd.Series) -> str:
    return " / ".join(str(row[axis]) for axis in results.other_axes)


def _combination_axis_label(results: LoadedResults) -> str:
    return " / ".join(results.other_axes)


def bar_figures(context: FigureContext, metric_names: Sequence[str]) -> None:
    results, table = context.results, context.summary.table
    hue = "transport" if results.has_transport_axis else None
    for column in metric_names:
        entry = catalogue_entry(column)
        rows = table[table["metric"] == column].sort_values("cell_index")
        title = f"{entry.label}: mean per cell with 95 % CI"
        if rows.empty:
            context.skip(title, "no counted run has this metric")
            continue
        frame = pd.DataFrame(
            {
                "x": [_combination(results, row) for _, row in rows.iterrows()]
                if results.other_axes
                else (["all"] * len(rows) if hue else list(rows["cell"])),
                "mean": rows["mean_shown"].to_numpy(),
                # one run has no interval: draw no error bar rather than none at all
                "ci_low": rows["ci_low_shown"].fillna(rows["mean_shown"]).to_numpy(),
                "ci_high": rows["ci_high_shown"].fillna(rows["mean_shown"]).to_numpy(),
            }
        )
        if hue:
            frame["transport"] = rows["transport"].astype(str).to_numpy()
        frame["marked"] = cpu_marked(context.summary, rows)
        xlabel = _combination_axis_label(results) if results.other_axes else ("" if hue else "cell")
        n_text = f"n = {rows['n'].min()}" + (f"-{rows['n'].max()}" if rows["n"].max() != rows["n"].min() else "")
        context.draw(
            f"bars-{slug(column)}",
            title,
            f"{entry.label} ({entry.unit or 'no unit'}): mean per cell, error bars the 95 % "
            f"Student-t confidence interval; {n_text} runs per cell.{marks_caption(context.summary, rows)}",
            partial(
                plots.bar_ci, frame, x="x", hue=hue, ylabel=entry.axis_label, xlabel=xlabel, marked_label=CPU_MARK_LABEL
            ),
        )


#: the CPU roles that are run metrics (quicbed/runner/analyse.py), in stacking order
CPU_ROLE_METRICS = {
    "server": "cpu_server",
    "client": "cpu_client",
    "competitor": "cpu_competitor",
    "channel": "cpu_channel",
}


def cpu_figure(context: FigureContext) -> None:
    """Mean CPU seconds per role over the transfer, stacked, one bar per cell: who used the
    machine while the network was measured."""
    title = "CPU by role"
    table = context.summary.table
    present = {role: name for role, name in CPU_ROLE_METRICS.items() if (table["metric"] == name).any()}
    if not present:
        context.skip(title, "no run recorded CPU accounting")
        return
    means = table[table["metric"].isin(present.values())].pivot_table(
        index="cell_index", columns="metric", values="mean_shown", aggfunc="first"
    )
    labels = {
        row["cell_index"]: (_combination(context.results, row) if context.results.other_axes else row["cell"])
        for _, row in table.drop_duplicates("cell_index").iterrows()
    }
    shares = means.rename(index=labels, columns={name: role for role, name in present.items()})[list(present)]
    context.draw(
        "cpu-by-role",
        title,
        "Mean CPU seconds per role over the transfer (request to last byte), per cell: the HTTP "
        "server, the client, a competing download's client and server, and the ns-3 channel. A role "
        "CPU-bound for part of the transfer is "
        "named in the report's headline; run.json (details.cpu) has every role, the busiest "
        "100 ms and the machine's busy and steal shares.",
        partial(plots.stacked_bars, shares, ylabel="CPU (s)"),
    )


def ccdf_figures(context: FigureContext) -> None:
    results, runs = context.results, context.runs
    column = next((name for name in ("goodput", "throughput") if name in runs and runs[name].notna().any()), None)
    if column is None:
        context.skip("CCDF of goodput", "no counted run has goodput or throughput")
        return
    entry = catalogue_entry(column)
    group = "transport" if results.has_transport_axis else None
    combinations: list[tuple[tuple[Any, ...], pd.DataFrame]] = [((), runs)]
    if results.other_axes:
        grouped = list(runs.groupby(results.other_axes, sort=False))
        if len(grouped) <= MAX_CCDF_PANELS:
            combinations = [(key if isinstance(key, tuple) else (key,), part) for key, part in grouped]
    for key, part in combinations:
        where = ", ".join(f"{axis}={value}" for axis, value in zip(results.other_axes, key, strict=False))
        scope = where if key else ("all cells pooled" if results.other_axes else "all runs")
        stem = f"ccdf-{slug(column)}" + (f"-{slug(where)}" if key and len(combinations) > 1 else "")
        context.draw(
            stem,
            f"CCDF of {entry.label}" + (f" ({where})" if key else ""),
            f"P({entry.label} > x) over runs per transport, {scope}; shaded: 95 % DKW band ({len(part)} runs).",
            partial(plots.ccdf_plot, part, value=column, group=group, scale=entry.scale, xlabel=entry.axis_label),
        )


#: the delay a run's point is placed at, first that the runs have (one-way delay from the
#: captures, else the sender's smoothed RTT)
DELAY_METRICS = ("owd_p95", "owd_mean", "srtt_mean")


def delay_throughput_figure(context: FigureContext) -> None:
    """Pantheon's view: each run's goodput against its delay, per transport, all cells."""
    title = "Goodput against delay, per run"
    runs = context.runs
    delay = next((name for name in DELAY_METRICS if name in runs and runs[name].notna().any()), None)
    if delay is None or "goodput" not in runs or not runs["goodput"].notna().any():
        context.skip(title, "no counted run has both goodput and a delay (one-way delay or smoothed RTT)")
        return
    x, y = catalogue_entry(delay), catalogue_entry("goodput")
    group = "transport" if context.results.has_transport_axis else None
    scope = "all cells pooled" if context.results.other_axes else "all runs"
    context.draw(
        "goodput-vs-delay",
        title,
        f"One point per counted run ({len(runs)}, {scope}): {y.label} against {x.label}, the delay "
        "axis reversed so that better is up and to the right; crosses mark each transport's mean; "
        "ellipses (1 sigma of the runs' covariance, as in Pantheon) each cell of 3 runs or more.",
        partial(
            plots.delay_throughput_plot,
            runs,
            delay=delay,
            throughput="goodput",
            xlabel=x.axis_label,
            ylabel=y.axis_label,
            group=group,
            cell="cell",
            delay_scale=x.scale,
            throughput_scale=y.scale,
        ),
    )


# --------------------------------------------------------------------------- the study's headline


def _labels(frame: pd.DataFrame, axes: Sequence[str], joiner: str) -> pd.Series:
    """Per row, its values of ``axes`` as text, joined."""
    return frame[list(axes)].apply(lambda row: joiner.join(axis_text(value) for value in row), axis=1)


def _relative_change(a: pd.Series, b: pd.Series, entry: Metric, baseline: str) -> str:
    """(B - A) / A of two sets of runs as text, with its 95 % CI when both have two runs; where
    A's mean is too uncertain to divide by (stats.compare_means), the difference B - A in the
    metric's unit, saying so: a ratio over a mean near 0 would read as thousands of percent."""
    a, b = a.dropna(), b.dropna()
    if a.empty or b.empty or a.mean() <= 0:
        return ""
    if len(a) < 2 or len(b) < 2:
        return f"{b.mean() / a.mean() - 1:+.0%}"
    comparison = stats.compare_means(a, b)
    if comparison.gain is not None:
        gain = comparison.gain
        return f"{gain.gain:+.0%} [{gain.low:+.0%}, {gain.high:+.0%}]"
    change = comparison.difference
    shown = [difference(value, entry.unit, entry.scale) for value in (change.difference, change.low, change.high)]
    return f"{shown[0]} [{shown[1]}, {shown[2]}] (a difference: {baseline}'s mean is too uncertain to divide by)"


def headline_figures(context: FigureContext) -> None:
    """The comparison the study is about (the experiment's ``study.headline``): the metric's
    mean per x value and hue with 95 % CIs, and the relative change of ``compare``; one figure
    per value of the axes in neither x nor hue."""
    results = context.results
    runs = context.runs
    try:
        study = results.parsed_study()
    except SpecError as error:
        context.skip("headline", f"the experiment's study section: {error}")
        return
    headline = study.headline if study else None
    if headline is None:
        return
    entry = catalogue_entry(headline.metric)
    table = context.summary.table
    rows = table[table["metric"] == headline.metric].sort_values("cell_index")
    if rows.empty:
        context.skip(headline.title, f"no counted run has {headline.metric}")
        return
    rest = [axis for axis in results.axes if axis not in headline.x and axis not in headline.hue]
    groups = rows.groupby(rest, sort=False, dropna=False) if rest else [((), rows)]
    drawn = len(context.out.figures)
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{axis}={axis_text(value)}" for axis, value in zip(rest, key, strict=True))
        x_of = list(_labels(part, headline.x, " / ")) if headline.x else ["all"] * len(part)
        hue_of = list(_labels(part, headline.hue, HUE_JOINER))
        frame = pd.DataFrame(
            {
                "x": x_of,
                "hue": hue_of,
                "mean": part["mean_shown"].to_numpy(),
                "ci_low": part["ci_low_shown"].fillna(part["mean_shown"]).to_numpy(),
                "ci_high": part["ci_high_shown"].fillna(part["mean_shown"]).to_numpy(),
                "marked": cpu_marked(context.summary, part),
            }
        )
        changes: dict[str, str] = {}  # x label -> "+12% [+3%, +21%]"
        if headline.compare:
            mask = np.ones(len(runs), dtype=bool)
            for axis, value in zip(rest, key, strict=True):
                mask &= (runs[axis].map(axis_text) == axis_text(value)).to_numpy()
            scope = runs[mask]
            x_runs = _labels(scope, headline.x, " / ") if headline.x else pd.Series("all", index=scope.index)
            hue_runs = _labels(scope, headline.hue, HUE_JOINER)
            first, second = headline.compare
            for label in dict.fromkeys(x_of):
                change = _relative_change(
                    scope.loc[(x_runs == label) & (hue_runs == first), headline.metric],
                    scope.loc[(x_runs == label) & (hue_runs == second), headline.metric],
                    entry,
                    first,
                )
                if change:
                    changes[label] = change
        compared = (
            (
                f" Above each group: the relative change of {headline.compare[1]} against "
                f"{headline.compare[0]}, (B - A) / A, with its 95 % CI (delta method on the log of the ratio), "
                f"or the difference B - A where {headline.compare[0]}'s mean is too uncertain to divide by: "
                + "; ".join(f"{label}: {change}" for label, change in changes.items())
                + "."
            )
            if changes and headline.compare
            else ""
        )  # changes: only with a compare
        stem = f"headline-{slug(headline.metric)}" + (f"-{slug(where)}" if where else "")
        context.draw(
            stem,
            headline.title + (f" ({where})" if where else ""),
            f"{entry.label} ({entry.unit or 'no unit'}): mean per cell with its 95 % Student-t confidence "
            f"interval, by {' / '.join(headline.x) or 'cell'} and {' / '.join(headline.hue)}.{compared}"
            f"{marks_caption(context.summary, part)}",
            partial(
                plots.bar_ci,
                frame,
                x="x",
                hue="hue",
                ylabel=entry.axis_label,
                xlabel=" / ".join(headline.x),
                marked_label=CPU_MARK_LABEL,
                notes={label: change.split(" [")[0] for label, change in changes.items()},
            ),
        )
    context.out.headline += context.out.figures[drawn:]
    del context.out.figures[drawn:]


# --------------------------------------------------------------------------- many clients


#: distributions over clients for at most this many cells (more lines are unreadable)
MAX_CLIENT_CELLS = 8


def _client_rows(context: FigureContext, runs: pd.DataFrame, label: pd.Series) -> pd.DataFrame:
    """One row per client of each many-client run: its cell's label, goodput and the mean
    A-MPDU size its AP sent it."""
    rows = []
    for (_, run), cell in zip(runs.iterrows(), label):
        clients = context.files.run_details(run["folder"]).get("clients") or []
        mac = context.files.path(run["folder"], "mac-stats.json")
        receivers: dict[str, float] = {}
        if mac is not None:
            for radio in json.loads(mac.read_text()).get("radios", {}).values():
                if radio.get("role") == "ap":
                    receivers.update(
                        {
                            name: link["mean_mpdus_per_ampdu"]
                            for name, link in (radio.get("per_receiver") or {}).items()
                            if link.get("psdus")
                        }
                    )
        for client in clients:
            rows.append(
                {
                    "cell": cell,
                    "run": Path(run["folder"]).name,
                    "client": client["node"],
                    "goodput": client.get("goodput", math.nan),
                    "ampdu": receivers.get(client["node"], math.nan),
                }
            )
    return pd.DataFrame(rows, columns=["cell", "run", "client", "goodput", "ampdu"])


def clients_figures(context: FigureContext) -> None:
    """Many-client runs: the distribution over clients (all runs of a cell pooled) of their
    goodput and of the A-MPDU size their AP sent them, one line per cell (CSV beside each)."""
    runs = context.runs
    if "clients" not in runs or not (runs["clients"] > 1).any():
        return
    axes = [axis for axis in context.results.axes if runs[axis].nunique() > 1] or ["transport"]
    label = _labels(runs, axes, " / ")
    cells = list(dict.fromkeys(label))
    if len(cells) > MAX_CLIENT_CELLS:
        context.out.notes.append(f"Client distributions: the first {MAX_CLIENT_CELLS} of {len(cells)} cells drawn")
        keep = label.isin(cells[:MAX_CLIENT_CELLS])
        runs, label = runs[keep], label[keep]
    rows = _client_rows(context, runs, label)
    who = " / ".join(axes)
    for column, title, entry_label, scale in (
        ("goodput", "Goodput per client", "goodput (Mbit/s)", 1e-6),
        ("ampdu", "MPDUs per A-MPDU per client", "MPDUs per A-MPDU", 1.0),
    ):
        part = rows.dropna(subset=[column])
        if part.empty:
            context.skip(title, f"no many-client run recorded its clients' {column}")
            continue
        context.draw(
            f"clients-{column}",
            title,
            f"P(X > x) over the clients of each cell ({who}), every counted run pooled "
            f"({part['run'].nunique()} runs, {len(part)} clients); shaded: 95 % DKW band.",
            partial(_client_files, part, column, entry_label, scale),
        )


def _client_files(rows: pd.DataFrame, column: str, xlabel: str, scale: float, stem: Path) -> list[Path]:
    written = plots.ccdf_plot(rows, stem, value=column, group="cell", scale=scale, xlabel=xlabel)
    data = stem.with_name(f"{stem.name}.csv")
    rows.to_csv(data, index=False)
    return [*written, data]
