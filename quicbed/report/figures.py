"""The report's figures (docs/metrics.md, "Plots"), drawn with quicbed.analysis.plots.

Figures over runs (bars, CCDF) use the summary; figures of single runs (IPT, cwnd,
throughput bins, sequence diagram, bandwidth share) read the run folders' artifacts. A run
whose artifact is missing is passed over for another run of its transport; when no run has
it, the figure is skipped with a note. Nothing here raises for a missing or broken file.

Single-run figures look at one "focus" group of cells: the first value of the non-transport
axes (matrix order), so that all transports are compared under the same conditions. The
representative run of a transport there is the counted run whose goodput (else download
time) is closest to the median of its cell.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis import metrics, mobility, plots, stats
from quicbed.analysis.catalogue import Metric
from quicbed.errors import SpecError
from quicbed.report.artifacts import Progress, RunFiles
from quicbed.report.files import move_into, remove_tree
from quicbed.report.load import LoadedResults
from quicbed.report.summary import Summary, catalogue_entry, counted
from quicbed.report.tables import CPU_MARK_LABEL, cpu_marked, difference, marks_caption
from quicbed.spec.study import HUE_JOINER, axis_text

FIGURES_FOLDER = "report"
BIN_WIDTH = 0.05  # s: the throughput and bandwidth-share bins of the issue
MAX_CCDF_PANELS = 4  # per-value CCDFs up to this many values of the other axes, else one pooled


@dataclass
class FigureFile:
    """One figure: ``stem`` in the report folder with a PNG and an SVG."""

    stem: str
    title: str
    caption: str
    files: list[Path]  # relative to the results folder

    @property
    def png(self) -> Path:
        return next(path for path in self.files if path.suffix == ".png")

    @property
    def svg(self) -> Path | None:
        return next((path for path in self.files if path.suffix == ".svg"), None)

    @property
    def csv(self) -> Path | None:
        """The figure's data, when it is written beside it."""
        return next((path for path in self.files if path.suffix == ".csv"), None)


@dataclass
class Figures:
    figures: list[FigureFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # figures skipped, and why
    #: the study's headline figures (quicbed.spec.study), shown before the tables
    headline: list[FigureFile] = field(default_factory=list)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-").lower() or "all"


@dataclass
class _Context:
    results: LoadedResults
    summary: Summary
    files: RunFiles
    staging: Path
    max_runs: int
    out: Figures

    @property
    def runs(self) -> pd.DataFrame:
        return self.results.runs[counted(self.results.runs, self.summary.include_invalid)]

    def draw(self, stem: str, title: str, caption: str, plot: Callable[[Path], list[Path]]) -> None:
        """Call ``plot(staging/stem)``; a failure becomes a note, not a crash."""
        try:
            written = plot(self.staging / stem)
        except Exception as error:  # noqa: BLE001 (a broken artifact must not stop the report)
            self.out.notes.append(f"{title}: skipped ({type(error).__name__}: {error})")
            return
        self.out.figures.append(FigureFile(stem, title, caption,
                                           [Path(FIGURES_FOLDER) / path.name for path in written]))

    def skip(self, title: str, reason: str) -> None:
        self.out.notes.append(f"{title}: skipped ({reason})")


# --------------------------------------------------------------------------- grouping


def _combination(results: LoadedResults, row: pd.Series) -> str:
    return " / ".join(str(row[axis]) for axis in results.other_axes)


def _combination_axis_label(results: LoadedResults) -> str:
    return " / ".join(results.other_axes)


def _focus_runs(context: _Context) -> tuple[pd.DataFrame, str]:
    """The counted runs of the first value of the other axes, and that value as text."""
    runs = context.runs
    others = context.results.other_axes
    if not others or runs.empty:
        return runs, ""
    first = runs.iloc[0]
    mask = np.ones(len(runs), dtype=bool)
    for axis in others:
        mask &= (runs[axis] == first[axis]).to_numpy()
    return runs[mask], ", ".join(f"{axis}={first[axis]}" for axis in others)


def _ranking_metric(results: LoadedResults, runs: pd.DataFrame) -> str | None:
    for name in ("goodput", "download_time", "throughput", *results.metric_names):
        if name in runs and runs[name].notna().any():
            return name
    return None


def _candidates(context: _Context, runs: pd.DataFrame) -> dict[str, list[str]]:
    """Per transport, its runs' folders ordered from the most representative one: closest
    to the median of the ranking metric in their cell."""
    ranking = _ranking_metric(context.results, runs)
    chosen: dict[str, list[str]] = {}
    for transport in context.results.transports:
        part = runs[runs["transport"] == transport]
        if part.empty:
            continue
        if ranking is None:
            chosen[transport] = list(part["folder"])
            continue
        medians = part.groupby("cell_index")[ranking].transform("median")
        distance = (part[ranking] - medians).abs().fillna(math.inf)
        chosen[transport] = list(part.assign(distance=distance)
                                 .sort_values(["distance", "run_id"], kind="stable")["folder"])
    return chosen


def _label(transport: str) -> str:
    return transport or "runs"


def _own_flow(context: _Context, transport: str, packets: list) -> metrics.FlowKey:
    """The data flow of the run's own transport: with a competitor on the same link (the
    shared-medium experiment) the largest flow may be the competitor's."""
    kinds = context.results.runs.loc[context.results.runs["transport"] == transport, "transport_kind"]
    proto = {"quic": "udp", "tcp": "tcp"}.get(next((kind for kind in kinds if kind), ""))
    flows = metrics.data_flows(packets)
    own = [flow for flow in flows if flow[4] == proto]
    if len(flows) > 1 and own:
        return own[0]
    return metrics.main_flow(packets)


# --------------------------------------------------------------------------- over runs


def bar_figures(context: _Context, metric_names: Sequence[str]) -> None:
    results, table = context.results, context.summary.table
    hue = "transport" if results.has_transport_axis else None
    for column in metric_names:
        entry = catalogue_entry(column)
        rows = table[table["metric"] == column].sort_values("cell_index")
        title = f"{entry.label}: mean per cell with 95 % CI"
        if rows.empty:
            context.skip(title, "no counted run has this metric")
            continue
        frame = pd.DataFrame({
            "x": [_combination(results, row) for _, row in rows.iterrows()] if results.other_axes
            else (["all"] * len(rows) if hue else list(rows["cell"])),
            "mean": rows["mean_shown"].to_numpy(),
            # one run has no interval: draw no error bar rather than none at all
            "ci_low": rows["ci_low_shown"].fillna(rows["mean_shown"]).to_numpy(),
            "ci_high": rows["ci_high_shown"].fillna(rows["mean_shown"]).to_numpy()})
        if hue:
            frame["transport"] = rows["transport"].astype(str).to_numpy()
        frame["marked"] = cpu_marked(context.summary, rows)
        xlabel = _combination_axis_label(results) if results.other_axes else ("" if hue else "cell")
        n_text = f"n = {rows['n'].min()}" + (f"-{rows['n'].max()}" if rows["n"].max() != rows["n"].min() else "")
        context.draw(f"bars-{slug(column)}", title,
                     f"{entry.label} ({entry.unit or 'no unit'}): mean per cell, error bars the 95 % "
                     f"Student-t confidence interval; {n_text} runs per cell.{marks_caption(context.summary, rows)}",
                     partial(plots.bar_ci, frame, x="x", hue=hue, ylabel=entry.axis_label, xlabel=xlabel,
                             marked_label=CPU_MARK_LABEL))


#: the CPU roles that are run metrics (quicbed/runner/analyse.py), in stacking order
CPU_ROLE_METRICS = {"server": "cpu_server", "client": "cpu_client", "competitor": "cpu_competitor",
                    "channel": "cpu_channel"}


def cpu_figure(context: _Context) -> None:
    """Mean CPU seconds per role over the transfer, stacked, one bar per cell: who used the
    machine while the network was measured."""
    title = "CPU by role"
    table = context.summary.table
    present = {role: name for role, name in CPU_ROLE_METRICS.items() if (table["metric"] == name).any()}
    if not present:
        context.skip(title, "no run recorded CPU accounting")
        return
    means = table[table["metric"].isin(present.values())].pivot_table(
        index="cell_index", columns="metric", values="mean_shown", aggfunc="first")
    labels = {row["cell_index"]: (_combination(context.results, row) if context.results.other_axes else row["cell"])
              for _, row in table.drop_duplicates("cell_index").iterrows()}
    shares = means.rename(index=labels, columns={name: role for role, name in present.items()})[list(present)]
    context.draw("cpu-by-role", title,
                 "Mean CPU seconds per role over the transfer (request to last byte), per cell: the HTTP "
                 "server, the client, a competing download's client and server, and the ns-3 channel. A role "
                 "CPU-bound for part of the transfer is "
                 "named in the report's headline; run.json (details.cpu) has every role, the busiest "
                 "100 ms and the machine's busy and steal shares.",
                 partial(plots.stacked_bars, shares, ylabel="CPU (s)"))


def ccdf_figures(context: _Context) -> None:
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
        context.draw(stem, f"CCDF of {entry.label}" + (f" ({where})" if key else ""),
                     f"P({entry.label} > x) over runs per transport, {scope}; shaded: 95 % DKW band "
                     f"({len(part)} runs).",
                     partial(plots.ccdf_plot, part, value=column, group=group, scale=entry.scale,
                             xlabel=entry.axis_label))


#: the delay a run's point is placed at, first that the runs have (one-way delay from the
#: captures, else the sender's smoothed RTT)
DELAY_METRICS = ("owd_p95", "owd_mean", "srtt_mean")


def delay_throughput_figure(context: _Context) -> None:
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
    context.draw("goodput-vs-delay", title,
                 f"One point per counted run ({len(runs)}, {scope}): {y.label} against {x.label}, the delay "
                 "axis reversed so that better is up and to the right; crosses mark each transport's mean; "
                 "ellipses (1 sigma of the runs' covariance, as in Pantheon) each cell of 3 runs or more.",
                 partial(plots.delay_throughput_plot, runs, delay=delay, throughput="goodput",
                         xlabel=x.axis_label, ylabel=y.axis_label, group=group, cell="cell", delay_scale=x.scale,
                         throughput_scale=y.scale))


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


def headline_figures(context: _Context) -> None:
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
        frame = pd.DataFrame({"x": x_of, "hue": hue_of, "mean": part["mean_shown"].to_numpy(),
                              "ci_low": part["ci_low_shown"].fillna(part["mean_shown"]).to_numpy(),
                              "ci_high": part["ci_high_shown"].fillna(part["mean_shown"]).to_numpy(),
                              "marked": cpu_marked(context.summary, part)})
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
                change = _relative_change(scope.loc[(x_runs == label) & (hue_runs == first), headline.metric],
                                          scope.loc[(x_runs == label) & (hue_runs == second), headline.metric],
                                          entry, first)
                if change:
                    changes[label] = change
        compared = (f" Above each group: the relative change of {headline.compare[1]} against "
                    f"{headline.compare[0]}, (B - A) / A, with its 95 % CI (delta method on the log of the ratio), "
                    f"or the difference B - A where {headline.compare[0]}'s mean is too uncertain to divide by: "
                    + "; ".join(f"{label}: {change}" for label, change in changes.items()) + ".") if changes else ""
        stem = f"headline-{slug(headline.metric)}" + (f"-{slug(where)}" if where else "")
        context.draw(stem, headline.title + (f" ({where})" if where else ""),
                     f"{entry.label} ({entry.unit or 'no unit'}): mean per cell with its 95 % Student-t confidence "
                     f"interval, by {' / '.join(headline.x) or 'cell'} and {' / '.join(headline.hue)}.{compared}"
                     f"{marks_caption(context.summary, part)}",
                     partial(plots.bar_ci, frame, x="x", hue="hue", ylabel=entry.axis_label,
                             xlabel=" / ".join(headline.x), marked_label=CPU_MARK_LABEL,
                             notes={label: change.split(" [")[0] for label, change in changes.items()}))
    context.out.headline += context.out.figures[drawn:]
    del context.out.figures[drawn:]


# --------------------------------------------------------------------------- single runs


def _per_transport(candidates: dict[str, list[str]], extract: Callable[[str, str], tuple[pd.DataFrame, str] | None],
                   limit: int = 1) -> tuple[list[pd.DataFrame], list[str]]:
    """Frames from the first ``limit`` runs per transport that ``extract`` finds usable, with
    their labels; ``extract(transport, folder)`` gives None for a run that lacks the artifact."""
    frames, used = [], []
    for transport, folders in candidates.items():
        taken = 0
        for folder in folders:
            if taken >= limit:
                break
            found = extract(transport, folder)
            if found is None:
                continue
            frames.append(found[0].assign(transport=_label(transport)))
            used.append(found[1])
            taken += 1
    return frames, used


def _own_data(context: _Context, transport: str, folder: str, capture: str) -> list | None:
    """The data packets of the run's own flow in one of its captures (None without the capture)."""
    packets = context.files.packets(folder, capture)
    return metrics.data_packets(packets, _own_flow(context, transport, packets)) if packets else None


def ipt_figure(context: _Context, candidates: dict[str, list[str]], where: str) -> None:
    title = "Inter-packet times at the server"

    def gaps_of(transport: str, folder: str) -> tuple[pd.DataFrame, str] | None:
        data = _own_data(context, transport, folder, "server.pcap")
        if data is None:
            return None
        return pd.DataFrame({"gap": metrics.inter_packet_times(data)}), Path(folder).name

    frames, used = _per_transport(candidates, gaps_of, limit=context.max_runs)
    if not frames:
        context.skip(title, "no run has server.pcap")
        return
    gaps = pd.concat(frames, ignore_index=True)
    context.draw("ipt-server", title,
                 f"Gaps between consecutive data packets leaving the server (server.pcap), histogram "
                 f"(share of gaps, log bins) and ECDF; dotted: 100 µs. Runs {', '.join(used)}"
                 f"{f' ({where})' if where else ''}.",
                 lambda stem: plots.ipt_plot(gaps, stem, group="transport"))


def throughput_bins_figure(context: _Context, candidates: dict[str, list[str]], where: str) -> None:
    title = "Throughput in 50 ms bins"

    def bins_of(transport: str, folder: str) -> tuple[pd.DataFrame, str] | None:
        data = _own_data(context, transport, folder, "client.pcap")
        if data is None:
            return None
        return metrics.binned_throughput(data, BIN_WIDTH), Path(folder).name

    frames, used = _per_transport(candidates, bins_of)
    if not frames:
        context.skip(title, "no run has client.pcap")
        return
    binned = pd.concat(frames, ignore_index=True)
    context.draw("throughput-bins", title,
                 f"Payload received per 50 ms bin at the client (client.pcap) from the first data packet, "
                 f"one representative run per transport: {', '.join(used)}{f' ({where})' if where else ''}.",
                 lambda stem: plots.throughput_bins_plot(binned, stem, group="transport", bin_width=BIN_WIDTH))


def sequence_figures(context: _Context, candidates: dict[str, list[str]], where: str) -> None:
    for transport, folders in candidates.items():
        title = f"Sequence/ACK diagram ({_label(transport)})"
        for folder in folders:
            if not (context.files.path(folder, "server.pcap") and context.files.path(folder, "client.pcap")):
                continue
            server = context.files.packets(folder, "server.pcap") or []
            client = context.files.packets(folder, "client.pcap") or []
            flow = _own_flow(context, transport, client)
            rows = metrics.sequence_frame(server, client, flow)
            offsets = ("TCP sequence/ACK numbers relative to the first data byte" if flow[4] == "tcp"
                       else "payload bytes sent before each packet (QUIC encrypts its offsets)")
            context.draw(f"sequence-{slug(transport or 'run')}", title,
                         f"Run {Path(folder).name}{f' ({where})' if where else ''}: data packets sent at the "
                         f"server, received at the client, lost, and the client's ACKs; offsets are {offsets}.",
                         partial(plots.sequence_plot, rows))
            break
        else:
            context.skip(title, "no run has both server.pcap and client.pcap")


def _flow_labels(flows: list[metrics.FlowKey]) -> dict[metrics.FlowKey, str]:
    protocols = ["quic" if flow[4] == "udp" else "tcp" for flow in flows]
    distinct = len(set(protocols)) == len(protocols)
    return {flow: (f"{protocol} (port {flow[1]})" if distinct else f"flow {number + 1} ({flow[4]} {flow[1]})")
            for number, (flow, protocol) in enumerate(zip(flows, protocols, strict=True))}


def _download_labels(context: _Context, run: pd.Series, flows: list[metrics.FlowKey]) -> dict[metrics.FlowKey, str]:
    """Flows named by the download they carry (the server port in client.json and
    competitor.json, competitor-2.json, ...): the run's transport and its competitors'; others
    as _flow_labels."""
    labels = _flow_labels(flows)
    record = next((r for r in context.results.records if r.get("run_id") == run["run_id"]), {})
    competitor = record.get("competitor") or {}
    rivals = [t.get("name") for t in competitor.get("transports", [competitor])]
    files = [("client.json", str(run["transport"]))] + [
        ("competitor.json" if number == 1 else f"competitor-{number}.json", f"{rival or 'competitor'} (competitor)")
        for number, rival in enumerate(rivals, start=1)]
    for name, label in files:
        path = context.files.path(run["folder"], name)
        try:
            port = json.loads(path.read_text())["server"]["port"] if path else None
        except (OSError, ValueError, KeyError, TypeError):
            port = None
        labels.update({flow: label for flow in flows if flow[1] == port})
    return labels


def flow_events(client: list, flows: list[metrics.FlowKey], labels: dict[metrics.FlowKey, str] | None = None
                ) -> pd.DataFrame:
    """Per-packet rows (time, flow, bytes) of the data packets of ``flows``."""
    labels = labels or _flow_labels(flows)
    rows = [(packet.ts, labels[flow], packet.payload_len)
            for flow in flows for packet in metrics.data_packets(client, flow)]
    return pd.DataFrame(rows, columns=["time", "flow", "bytes"]).sort_values("time", kind="stable")


#: sender time-series figures for at most this many combinations of the other axes
MAX_SENDER_GROUPS = 8
SENDER_STEP = 0.05  # s: the grid of the per-cell median and band
MAX_BAND_RUNS = 20  # runs per cell in the band (each run's log is read: a 30 MB QUIC transfer's takes ~2 s)
CAPACITY_BIN_MS = 100


def _aligned_series(context: _Context, folder: str) -> pd.DataFrame | None:
    """The run's sender series, time in s from the start of its link's trace (the run's start)
    when it replays one, else from its first sample."""
    frame = context.files.sender_series(folder)
    if frame is None:
        return None
    starts = [trace["started"] for trace in context.files.run_details(folder).get("traces") or []]
    zero = min(starts) if starts else float(frame["time"].iloc[0])
    return frame.assign(time=frame["time"] - zero)


def _trace_capacity(context: _Context, folder: str, until: float) -> pd.DataFrame | None:
    """The capacity (100 ms bins, repeated over ``until`` s) of the trace the download crosses."""
    from quicbed.traces.format import capacity, read_opportunities

    traces = [trace for trace in context.files.run_details(folder).get("traces") or [] if trace.get("towards_client")]
    if not traces or not Path(traces[0]["path"]).is_file():
        return None
    times = read_opportunities(Path(traces[0]["path"]))
    rates = capacity(times, CAPACITY_BIN_MS)
    repeats = max(1, math.ceil(until / (times[-1] / 1000)))
    rates = rates * repeats
    return pd.DataFrame({"time": np.arange(len(rates)) * CAPACITY_BIN_MS / 1000, "rate": rates})


def _long(frame: pd.DataFrame, group: str) -> pd.DataFrame:
    from quicbed.analysis.series import SERIES

    return frame.melt(id_vars=["time"], value_vars=list(SERIES), var_name="series").assign(group=group)


def sender_figures(context: _Context) -> None:
    """The representative run of each transport, and the median with its interquartile band
    over the runs of each cell (CSV beside each): for the first combination of the other axes,
    as the other single-run figures, or for each (up to MAX_SENDER_GROUPS) with study.series."""
    from quicbed.analysis.series import SERIES, median_band

    try:
        study = context.results.parsed_study()
    except SpecError:
        study = None  # the headline step notes it
    runs, others = context.runs, context.results.other_axes
    groups = list(runs.groupby(others, sort=False)) if others else [((), runs)]
    read: dict[str, pd.DataFrame | None] = {}

    def series_of(folder: str) -> pd.DataFrame | None:
        if folder not in read:
            read[folder] = _aligned_series(context, folder)
        return read[folder]

    for key, part in groups[:MAX_SENDER_GROUPS if study is not None and study.series else 1]:
        values = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{axis}={value}" for axis, value in zip(others, values))
        suffix = slug(" ".join(map(str, values))) if others else "all"
        chosen, every, folders = [], [], []
        for transport, candidates in _candidates(context, part).items():
            representative = next((folder for folder in candidates if series_of(folder) is not None), None)
            if representative is None:
                continue
            folders.append(representative)
            chosen.append(_long(series_of(representative), _label(transport)).assign(run=Path(representative).name))
            # the band: the cell's runs in run order (not the most typical ones), at most MAX_BAND_RUNS
            banded = [frame for folder in sorted(candidates)[:MAX_BAND_RUNS] if (frame := series_of(folder)) is not None]
            for column in SERIES:
                band = median_band(banded, column, SENDER_STEP)
                if not band.empty:
                    every.append(band.rename(columns={"median": "value"}).assign(series=column,
                                                                                 group=_label(transport)))
        title = f"Sender state over time{f' ({where})' if where else ''}"
        if not chosen:
            context.skip(title, "no run has server.qlog, tcp_probe.txt.gz or ss.txt (set qlog: true)")
            continue
        single, bands = pd.concat(chosen, ignore_index=True), pd.concat(every, ignore_index=True)
        capacity = _trace_capacity(context, folders[0], float(single["time"].max()))
        traced = " Grey: the capacity of the trace the download crosses, in 100 ms bins." if capacity is not None else ""
        sources = "QUIC: server qlog; TCP: tcp_probe events or ss samples (docs/metrics.md)"
        context.draw(f"sender-runs-{suffix}", f"{title}, one run per transport",
                     f"cwnd, bytes in flight, smoothed (solid) and min (dotted) RTT and pacing rate of the run closest "
                     f"to its cell's median, per transport; {sources}; time from the run's start.{traced}",
                     partial(_sender_files, single, capacity))
        context.draw(f"sender-cells-{suffix}", f"{title}, median of each cell",
                     f"The same quantities, median over the runs of each cell (the first {MAX_BAND_RUNS} at most; "
                     f"shaded: 25th-75th percentile) on a "
                     f"{SENDER_STEP * 1000:.0f} ms grid, each run held at its last sample until its next and ending "
                     f"with its transfer; {sources}.{traced}",
                     partial(_sender_files, bands, capacity))


def _sender_files(lines: pd.DataFrame, capacity: pd.DataFrame | None, stem: Path) -> list[Path]:
    written = plots.sender_plot(lines, stem, capacity=capacity)
    data = stem.with_name(f"{stem.name}.csv")
    lines.to_csv(data, index=False)
    return [*written, data]


#: distributions over clients for at most this many cells (more lines are unreadable)
MAX_CLIENT_CELLS = 8


def _client_rows(context: _Context, runs: pd.DataFrame, label: pd.Series) -> pd.DataFrame:
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
                    receivers.update({name: link["mean_mpdus_per_ampdu"]
                                      for name, link in (radio.get("per_receiver") or {}).items() if link.get("psdus")})
        for client in clients:
            rows.append({"cell": cell, "run": Path(run["folder"]).name, "client": client["node"],
                         "goodput": client.get("goodput", math.nan), "ampdu": receivers.get(client["node"], math.nan)})
    return pd.DataFrame(rows, columns=["cell", "run", "client", "goodput", "ampdu"])


def clients_figures(context: _Context) -> None:
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
    for column, title, entry_label, scale in (("goodput", "Goodput per client", "goodput (Mbit/s)", 1e-6),
                                              ("ampdu", "MPDUs per A-MPDU per client", "MPDUs per A-MPDU", 1.0)):
        part = rows.dropna(subset=[column])
        if part.empty:
            context.skip(title, f"no many-client run recorded its clients' {column}")
            continue
        context.draw(f"clients-{column}", title,
                     f"P(X > x) over the clients of each cell ({who}), every counted run pooled "
                     f"({part['run'].nunique()} runs, {len(part)} clients); shaded: 95 % DKW band.",
                     partial(_client_files, part, column, entry_label, scale))


def _client_files(rows: pd.DataFrame, column: str, xlabel: str, scale: float, stem: Path) -> list[Path]:
    written = plots.ccdf_plot(rows, stem, value=column, group="cell", scale=scale, xlabel=xlabel)
    data = stem.with_name(f"{stem.name}.csv")
    rows.to_csv(data, index=False)
    return [*written, data]


def share_figures(context: _Context) -> None:
    """Bandwidth share over time of the runs whose client capture holds parallel data flows
    (one run per cell is looked at; up to ``max_runs`` figures)."""
    runs = context.runs
    made = 0
    for _, part in runs.groupby("cell_index", sort=True):
        if made >= context.max_runs:
            break
        for _, run in part.iterrows():
            client = context.files.packets(run["folder"], "client.pcap")
            if not client:
                continue
            flows = metrics.data_flows(client)
            if len(flows) > 1:
                labels = _download_labels(context, run, flows)
                events = flow_events(client, flows, labels)
                binned = stats.binned_bytes(events, BIN_WIDTH)
                shares = stats.bandwidth_share(binned)
                per_flow = [8 * float(group["bytes"].sum()) / max(float(np.ptp(group["time"])), 1e-9)
                            for _, group in events.groupby("flow", sort=False)]
                jain = stats.jain_index(per_flow)
                over_time = stats.jain_over_time(binned)
                context.draw(f"share-{slug(run['run_id'])}", f"Bandwidth share ({run['cell']})",
                             f"Share of the bytes per 50 ms bin of the {len(flows)} parallel data flows of run "
                             f"{run['run_id']} ({run['cell']}), client capture. Jain's index of the flows' "
                             f"throughputs: {jain:.3f}; mean per bin where all flows sent: "
                             f"{over_time['jain'].mean():.3f}.",
                             partial(plots.share_plot, shares))
                server = context.files.packets(run["folder"], "server.pcap")
                if server:
                    gaps = pd.concat([pd.DataFrame({"gap": metrics.inter_packet_times(metrics.data_packets(server, flow)),
                                                    "flow": labels[flow]}) for flow in flows], ignore_index=True)
                    context.draw(f"ipt-flows-{slug(run['run_id'])}", f"Inter-packet times per flow ({run['cell']})",
                                 f"Gaps between consecutive data packets of each of the {len(flows)} parallel flows "
                                 f"leaving the server (server.pcap) in run {run['run_id']} ({run['cell']}): histogram "
                                 "(share of gaps, log bins) and ECDF; dotted: 100 µs.",
                                 partial(plots.ipt_plot, gaps, group="flow"))
                made += 1
            break  # one run per cell: cells are either parallel-flow cells or not


#: moving stations drawn per run, the download's client first (a random walk of many would
#: bury it)
MAX_MOVING_STATIONS = 4


def mobility_figures(context: _Context) -> None:
    """Moving or roaming stations over time (rate, signal per AP, MCS, position, handovers):
    the first counted run of each transport in each cell, up to ``max_runs`` per transport,
    and in each up to MAX_MOVING_STATIONS stations, the download's client first."""
    made: dict[str, int] = {}
    for _, run in context.runs.sort_values(["cell_index", "run_id"], kind="stable").iterrows():
        transport = run["transport"]
        if made.get(transport, 0) >= context.max_runs:
            continue
        path = context.files.path(run["folder"], "mac-stats.json")
        motion = json.loads(path.read_text()).get("motion") if path is not None else None
        if not motion:
            continue
        client = context.files.run_record(run["folder"]).get("client")
        stations = sorted((name for name, timeline in motion["stations"].items() if timeline["samples"]),
                          key=lambda name: (name != client, name))[:MAX_MOVING_STATIONS]
        for station in stations:
            timeline = motion["stations"][station]
            frame = mobility.timeline_frame(timeline, motion["interval_s"])
            changes = [e for e in timeline["events"] if e["event"] == "associated"]
            stem = f"mobility-{slug(run['run_id'])}" + (f"-{slug(station)}" if len(stations) > 1 else "")
            role = "the download's client" if station == client else "another station"
            context.draw(stem, f"{station} moving ({run['cell']})",
                         f"Station {station} ({role}) in run {run['run_id']} ({run['cell']}): bytes delivered "
                         f"to it, the signal it heard from each access point and the MCS it received at, per "
                         f"{motion['interval_s'] * 1e3:.0f} ms sample, and its position. Dashed: it lost its AP; "
                         f"solid: it associated ({len(changes)} association(s): "
                         f"{_associations(changes)}). Data in the CSV.",
                         partial(_mobility_files, frame, timeline["events"]))
        if stations:
            made[transport] = made.get(transport, 0) + 1


def _associations(events: list[dict[str, Any]]) -> str:
    return ", ".join(f"{event['ap']} at {event['t']:.2f} s" for event in events) or "none"


def _mobility_files(frame: pd.DataFrame, events: list[dict[str, Any]], stem: Path) -> list[Path]:
    written = plots.mobility_plot(frame, events, stem)
    data = stem.with_name(f"{stem.name}.csv")
    frame.to_csv(data, index=False)
    return [*written, data]


# --------------------------------------------------------------------------- all


def make_figures(results: LoadedResults, summary: Summary, metric_names: Sequence[str],
                 max_runs: int = 3, progress: Progress | None = None) -> Figures:
    """Draw every figure into RESULTS/report/ (PNG and SVG); each file appears only when
    complete (drawn in a staging folder, then renamed)."""
    out = Figures()
    folder = results.path / FIGURES_FOLDER
    staging = folder / f".staging-{os.getpid()}"
    remove_tree(staging)
    staging.mkdir(parents=True)
    say = progress or (lambda _: None)
    context = _Context(results, summary, RunFiles(results.path, say), staging, max(1, max_runs), out)
    try:
        _guarded(context, "headline", lambda: headline_figures(context))
        say("drawing bar charts")
        _guarded(context, "bar charts", lambda: bar_figures(context, metric_names))
        _guarded(context, "CCDF", lambda: ccdf_figures(context))
        _guarded(context, "CPU by role", lambda: cpu_figure(context))
        _guarded(context, "goodput against delay", lambda: delay_throughput_figure(context))
        focus, where = _focus_runs(context)
        candidates = _candidates(context, focus)
        if not candidates:
            context.skip("single-run figures", "no counted run")
        else:
            say("drawing single-run figures")
            for title, step in (("inter-packet times", ipt_figure),
                                ("throughput bins", throughput_bins_figure), ("sequence diagrams", sequence_figures)):
                _guarded(context, title, partial(step, context, candidates, where))
        _guarded(context, "bandwidth share", lambda: share_figures(context))
        _guarded(context, "client distributions", lambda: clients_figures(context))
        _guarded(context, "mobility", lambda: mobility_figures(context))
        say("drawing the sender's state over time")
        _guarded(context, "sender state", lambda: sender_figures(context))
        move_into(sorted(staging.iterdir()), folder)
    finally:
        remove_tree(staging)
    out.notes.extend(context.files.problems)
    return out


def _guarded(context: _Context, title: str, step: Callable[[], None]) -> None:
    """Run one figure step; an unexpected failure becomes a note (the report goes on)."""
    try:
        step()
    except Exception as error:  # noqa: BLE001 (artifacts come from experiments that may have gone wrong)
        context.skip(title, f"{type(error).__name__}: {error}")
