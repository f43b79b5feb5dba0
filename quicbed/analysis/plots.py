"""Figures for results folders: matplotlib (Agg), PNG and SVG, made to be read in print.

Every function takes tidy data (a pandas DataFrame with the columns it names, as produced
by :mod:`quicbed.analysis.stats` and :mod:`quicbed.analysis.metrics`) and an output path
*stem* (``results/x/throughput`` -> ``throughput.png`` and ``throughput.svg``) and returns
the paths it wrote. Axes carry units, groups get the Okabe-Ito colour-blind-safe palette
(and, where lines overlap, distinct line styles so that grey-scale prints stay readable),
no top/right spines, no titles inside the figure (captions belong to the document).
SVG text stays text (searchable, editable) and the files are reproducible (no date, fixed
hash salt). Figures are built with :class:`matplotlib.figure.Figure` directly, not pyplot:
PNGs are rendered by Agg, nothing needs a display, and no global backend is switched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse

from quicbed.analysis.stats import ccdf, ecdf

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType  # only in recent matplotlib (setup.py allows 3.7)

#: Okabe & Ito (2008), colour-blind safe; black last
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
FORMATS = ("png", "svg")
WIDTH = 3.5  # inches: one column of a two-column paper
HEIGHT = 2.4

_STYLE: dict[RcKeyType, Any] = {
    "font.size": 9,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.5,
    "axes.axisbelow": True,
    "lines.linewidth": 1.4,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "svg.fonttype": "none",
    "svg.hashsalt": "quicbed",
    "axes.prop_cycle": cycler(color=PALETTE),
}

PathLike = str | os.PathLike[str]


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(_STYLE):
        yield


#: fixed colours for the protocols compared, so that every figure of a study agrees
PROTOCOL_COLOURS = {"quic": PALETTE[0], "bquic": PALETTE[1], "tcp": PALETTE[2]}


def colour(index: int, name: str | None = None) -> str:
    """The colour of group ``name`` (:data:`PROTOCOL_COLOURS` when it names one protocol,
    e.g. "quic", "bquic-native" or "tcp client"), else the ``index``-th palette colour
    (cycling): also for a pair such as "tcp vs quic", which names two."""
    if name and " vs " not in str(name):
        words = re.split(r"[\s()\-]+", str(name).lower())
        for word in words:
            if word in PROTOCOL_COLOURS:
                return PROTOCOL_COLOURS[word]
    return PALETTE[index % len(PALETTE)]


def group_colours(names: Sequence[str]) -> list[str]:
    """A colour per group: the protocols' own (:func:`colour`) when that tells every group
    apart, else the palette in order (e.g. six congestion controllers, three per protocol)."""
    protocol = [colour(number, name) for number, name in enumerate(names)]
    if len(set(protocol)) == len(protocol):
        return protocol
    return [PALETTE[number % len(PALETTE)] for number in range(len(names))]


def save(figure: Figure, stem: PathLike, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``figure`` as ``stem.<format>`` for each format, close it, return the paths."""
    base = Path(stem)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = base.with_name(f"{base.name}.{fmt}")
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        figure.savefig(path, format=fmt, metadata=metadata)
        written.append(path)
    return written


def _groups(frame: pd.DataFrame, column: str | None) -> list[tuple[str, pd.DataFrame]]:
    if column is None or column not in frame:
        return [("", frame)]
    return [(str(name), part) for name, part in frame.groupby(column, sort=False)]


def _coloured_groups(frame: pd.DataFrame, column: str | None) -> list[tuple[str, pd.DataFrame, str]]:
    """:func:`_groups` with a colour each (:func:`group_colours`: the protocols' own when that
    tells the groups apart; tcp and tcp-ticket, say, do not share one)."""
    groups = _groups(frame, column)
    return [(name, part, shade) for (name, part), shade in zip(groups, group_colours([n for n, _ in groups]))]


def _legend(axes: Axes, **kwargs: object) -> None:
    _, labels = axes.get_legend_handles_labels()
    if any(labels):
        axes.legend(**kwargs)


# --------------------------------------------------------------------------- bars


def bar_ci(
    summary: pd.DataFrame,
    stem: PathLike,
    *,
    x: str,
    ylabel: str,
    hue: str | None = None,
    xlabel: str | None = None,
    notes: Mapping[str, str] | None = None,
    marked_label: str = "marked",
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """Grouped bars of ``mean`` with error bars ``[ci_low, ci_high]`` per cell.

    ``summary``: one row per cell, columns ``x``, optionally ``hue``, ``mean``,
    ``ci_low``, ``ci_high`` (e.g. :func:`quicbed.analysis.stats.summarize`), optionally
    ``marked`` (bool: the bar is hatched and the legend names ``marked_label``). ``notes``: a
    short text per x category, written above its bars (e.g. a relative change).
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        categories = list(dict.fromkeys(summary[x].astype(str)))
        groups = _coloured_groups(summary, hue)
        width = 0.8 / len(groups)
        positions = np.arange(len(categories))
        for number, (name, part, shade) in enumerate(groups):
            values = part.set_index(part[x].astype(str)).reindex(categories)
            offset = (number - (len(groups) - 1) / 2) * width
            low = (values["mean"] - values["ci_low"]).to_numpy(dtype=float, copy=True)
            high = (values["ci_high"] - values["mean"]).to_numpy(dtype=float, copy=True)
            # no interval (a single run) draws no error bar rather than a flat cap on the bar
            empty = (low == 0) & (high == 0)
            low[empty], high[empty] = np.nan, np.nan
            bars = axes.bar(
                positions + offset,
                values["mean"],
                width * 0.92,
                color=shade,
                label=name or None,
                yerr=np.vstack([low, high]),
                capsize=2,
                error_kw={"elinewidth": 0.8, "ecolor": "#333333"},
            )
            if "marked" in values:
                for bar, marked in zip(bars, values["marked"].fillna(False), strict=True):
                    if marked:
                        bar.set_hatch("///")
                        bar.set_edgecolor("#333333")
        if "marked" in summary and summary["marked"].any():
            from matplotlib.patches import Patch

            axes.add_artist(
                axes.legend(
                    handles=[Patch(facecolor="white", edgecolor="#333333", hatch="///", label=marked_label)],
                    loc="upper right",
                    fontsize="small",
                )
            )
        axes.set_xticks(positions, categories)
        if notes:
            axes.margins(y=0.15)  # room for the notes above the highest bar
            for position, category in zip(positions, categories, strict=True):
                if category in notes:
                    axes.annotate(
                        notes[category],
                        (position, 0.98),
                        xycoords=("data", "axes fraction"),
                        ha="center",
                        va="top",
                        fontsize="small",
                    )
        axes.set_xlabel(xlabel if xlabel is not None else x)
        axes.set_ylabel(ylabel)
        axes.grid(axis="x", visible=False)
        _legend(axes, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(groups))
        return save(figure, stem, formats)


def stacked_bars(
    shares: pd.DataFrame, stem: PathLike, *, ylabel: str, xlabel: str = "", formats: Sequence[str] = FORMATS
) -> list[Path]:
    """One bar per row of ``shares`` (index: categories), its columns stacked (e.g. CPU by role)."""
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        positions = np.arange(len(shares.index))
        bottom = np.zeros(len(shares.index))
        for number, column in enumerate(shares.columns):
            values = shares[column].to_numpy(dtype=float)
            axes.bar(
                positions, values, 0.6, bottom=bottom, color=PALETTE[(number + 3) % len(PALETTE)], label=str(column)
            )
            bottom += np.nan_to_num(values)
        axes.set_xticks(positions, [str(label) for label in shares.index])
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.grid(axis="x", visible=False)
        _legend(axes, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(shares.columns))
        return save(figure, stem, formats)


# --------------------------------------------------------------------------- distributions


def ccdf_plot(
    samples: pd.DataFrame,
    stem: PathLike,
    *,
    value: str,
    xlabel: str,
    group: str | None = None,
    scale: float = 1.0,
    confidence: float = 0.95,
    logy: bool = False,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """CCDF ``P(X > x)`` per group with its DKW ``confidence`` band (shaded).

    ``samples``: one row per observation (e.g. per run), column ``value`` (multiplied by
    ``scale`` for display, e.g. 1e-6 for bit/s -> Mbit/s) and optionally ``group``.
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        for number, (name, part, shade) in enumerate(_coloured_groups(samples, group)):
            table = ccdf(part[value].to_numpy(dtype=float) * scale, confidence)
            if table.empty:
                continue
            # start the step at P = 1 just left of the smallest value
            xs = np.concatenate([[table["x"].iloc[0]], table["x"]])
            ps = np.concatenate([[1.0], table["P"]])
            lows = np.concatenate([[table["low"].iloc[0]], table["low"]])
            highs = np.concatenate([[1.0], table["high"]])
            axes.fill_between(xs, lows, highs, step="post", color=shade, alpha=0.2, linewidth=0)
            axes.step(
                xs, ps, where="post", color=shade, linestyle=LINESTYLES[number % len(LINESTYLES)], label=name or None
            )
        axes.set_xlabel(xlabel)
        axes.set_ylabel("P(X > x)")
        if logy:
            axes.set_yscale("log")
        else:
            axes.set_ylim(0, 1.02)
        _legend(axes)
        return save(figure, stem, formats)


def delay_throughput_plot(
    runs: pd.DataFrame,
    stem: PathLike,
    *,
    delay: str,
    throughput: str,
    xlabel: str,
    ylabel: str,
    group: str | None = None,
    cell: str | None = None,
    delay_scale: float = 1.0,
    throughput_scale: float = 1.0,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """One point per run, delay (x, growing to the left as in Pantheon's plots: better is up
    and right) against throughput (y), per group; each group's mean marked with a cross and,
    as Pantheon draws them, a 1-sigma ellipse (the points' covariance) per group, or per
    ``cell`` of each group when given, over at least 3 runs."""
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        for name, part, shade in _coloured_groups(runs, group):
            xs = part[delay].to_numpy(dtype=float) * delay_scale
            ys = part[throughput].to_numpy(dtype=float) * throughput_scale
            keep = np.isfinite(xs) & np.isfinite(ys)
            if not keep.any():
                continue
            axes.scatter(xs[keep], ys[keep], s=18, alpha=0.6, color=shade, label=name or None)
            axes.scatter([xs[keep].mean()], [ys[keep].mean()], s=90, marker="x", color=shade)
            cells = part[cell].to_numpy() if cell is not None else np.zeros(len(part))
            for value in dict.fromkeys(cells[keep]):
                chosen = keep & (cells == value)
                ellipse = sigma_ellipse(xs[chosen], ys[chosen])
                if ellipse is not None:
                    centre, width, height, angle = ellipse
                    axes.add_patch(Ellipse(centre, width, height, angle=angle, fill=False, color=shade, linewidth=0.8))
        axes.invert_xaxis()
        axes.set_xlabel(xlabel + " (lower is right)")
        axes.set_ylabel(ylabel)
        _legend(axes)
        return save(figure, stem, formats)


def sigma_ellipse(xs: np.ndarray, ys: np.ndarray) -> tuple[tuple[float, float], float, float, float] | None:
    """The 1-sigma ellipse of points: centre, width, height (2 sigma along each principal axis)
    and angle in degrees (flat for points on a line); None under 3 points or when they coincide."""
    if len(xs) < 3:
        return None
    values, vectors = np.linalg.eigh(np.cov(xs, ys))
    if not np.all(np.isfinite(values)) or values.max() <= 0:
        return None
    values = np.clip(values, 0, None)  # points on a line: the smaller one is 0 up to rounding
    angle = float(np.degrees(np.arctan2(vectors[1, 1], vectors[0, 1])))
    return (float(xs.mean()), float(ys.mean())), 2 * float(np.sqrt(values[1])), 2 * float(np.sqrt(values[0])), angle


def ipt_plot(
    gaps: pd.DataFrame,
    stem: PathLike,
    *,
    value: str = "gap",
    group: str | None = None,
    threshold: float = 100e-6,
    bins: int = 40,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """Inter-packet times: histogram (left, log-spaced bins) and ECDF (right), in us.

    ``gaps``: one row per gap, column ``value`` in seconds, optionally ``group``. A dotted
    line marks ``threshold`` (100 us by default: back-to-back packets).
    """
    with _style():
        figure = Figure(figsize=(2 * WIDTH, HEIGHT))
        left, right = figure.subplots(1, 2)
        micro = gaps[value].to_numpy(dtype=float) * 1e6
        positive = micro[micro > 0]
        low = max(positive.min(), 0.1) if positive.size else 0.1
        high = max(positive.max(), low * 10) if positive.size else 1e6
        edges = np.logspace(np.log10(low), np.log10(high), bins + 1)
        for number, (name, part, shade) in enumerate(_coloured_groups(gaps, group)):
            data = part[value].to_numpy(dtype=float) * 1e6
            share = np.ones_like(data) / max(len(data), 1)
            left.hist(
                np.clip(data, low, high),
                bins=edges,
                weights=share,
                histtype="step",
                color=shade,
                linestyle=LINESTYLES[number % len(LINESTYLES)],
                linewidth=1.2,
                label=name or None,
            )
            table = ecdf(data)
            if not table.empty:
                right.step(
                    table["x"].clip(lower=low),
                    table["F"],
                    where="post",
                    color=shade,
                    linestyle=LINESTYLES[number % len(LINESTYLES)],
                    label=name or None,
                )
        for axes in (left, right):
            axes.set_xscale("log")
            axes.set_xlabel("inter-packet time (µs)")
            axes.axvline(threshold * 1e6, color="#555555", linestyle=":", linewidth=0.8)
        left.set_ylabel("share of gaps")
        right.set_ylabel("P(gap ≤ x)")
        right.set_ylim(0, 1.02)
        _legend(right)
        return save(figure, stem, formats)


# --------------------------------------------------------------------------- time series

SENDER_PANELS = (
    ("cwnd (kB)", (("cwnd", "-"),), 1e-3),
    ("in flight (kB)", (("bytes_in_flight", "-"),), 1e-3),
    ("RTT (ms)", (("smoothed_rtt", "-"), ("min_rtt", ":")), 1e3),
    ("pacing rate (Mbit/s)", (("pacing_rate", "-"),), 1e-6),
)


def sender_plot(
    lines: pd.DataFrame, stem: PathLike, *, capacity: pd.DataFrame | None = None, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """The sender's state over time in four panels on one time axis: cwnd, bytes in flight,
    smoothed (solid) and min (dotted) RTT, pacing rate, one colour per group; with
    ``capacity`` (columns ``time``, ``rate`` in bit/s: a link's trace) drawn grey under the
    pacing rates.

    ``lines``: long form, columns ``group``, ``series`` (a column of
    quicbed.analysis.series), ``time`` (s), ``value``, and optionally ``low``/``high``: a
    band, shaded.
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT * 2.4))
        panels = figure.subplots(len(SENDER_PANELS), 1, sharex=True)
        groups = list(dict.fromkeys(lines["group"]))
        colours = group_colours(groups)
        for axes, (label, members, scale) in zip(panels, SENDER_PANELS):
            if label.startswith("pacing") and capacity is not None and not capacity.empty:
                axes.step(
                    capacity["time"],
                    capacity["rate"] * scale,
                    where="post",
                    color="#999999",
                    linewidth=0.8,
                    label="link capacity (trace)",
                )
            for number, name in enumerate(groups):
                for column, style in members:
                    part = lines[(lines["group"] == name) & (lines["series"] == column)]
                    if part.empty or part["value"].isna().all():
                        continue
                    axes.step(
                        part["time"],
                        part["value"] * scale,
                        where="post",
                        color=colours[number],
                        linestyle=style,
                        linewidth=1.0,
                        label=name if axes is panels[0] else None,
                    )
                    if "low" in part and part["low"].notna().any():
                        axes.fill_between(
                            part["time"],
                            part["low"] * scale,
                            part["high"] * scale,
                            step="post",
                            color=colours[number],
                            alpha=0.2,
                            linewidth=0,
                        )
            axes.set_ylabel(label)
            axes.set_ylim(bottom=0)
        panels[-1].set_xlabel("time (s)")
        handles, labels = panels[0].get_legend_handles_labels()
        if labels:  # under the panels: with several groups a legend inside hides the lines
            figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(3, len(labels)))
        _legend(panels[-1])
        return save(figure, stem, formats)


def throughput_bins_plot(
    binned: pd.DataFrame,
    stem: PathLike,
    *,
    group: str | None = None,
    bin_width: float | None = None,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """Throughput per time bin (default 50 ms), Mbit/s, one step line per group.

    ``binned``: columns ``time`` (bin start, s) and ``throughput`` (bit/s), optionally
    ``group`` (e.g. :func:`quicbed.analysis.metrics.binned_throughput` output).
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        for number, (name, part, shade) in enumerate(_coloured_groups(binned, group)):
            width = bin_width or (float(np.diff(part["time"]).min()) if len(part) > 1 else 0.05)
            xs = np.append(part["time"].to_numpy(dtype=float), part["time"].iloc[-1] + width)
            ys = np.append(part["throughput"].to_numpy(dtype=float), part["throughput"].iloc[-1])
            axes.step(
                xs,
                ys / 1e6,
                where="post",
                color=shade,
                linestyle=LINESTYLES[number % len(LINESTYLES)],
                label=name or None,
            )
        axes.set_xlabel("time (s)")
        label = f"throughput per {bin_width * 1000:g} ms (Mbit/s)" if bin_width else ("throughput (Mbit/s)")
        axes.set_ylabel(label)
        axes.set_ylim(bottom=0)
        _legend(axes)
        return save(figure, stem, formats)


def sequence_plot(rows: pd.DataFrame, stem: PathLike, *, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Time-sequence diagram of one run (:func:`quicbed.analysis.metrics.sequence_frame`):
    data packets sent at the server, received at the client, lost, and the ACKs."""
    marks = {
        "sent": ("o", colour(0), "sent (server)", 6),
        "received": ("+", colour(2), "received (client)", 12),
        "lost": ("x", colour(3), "lost", 14),
        "ack": ("_", colour(1), "ACK (client)", 8),
    }
    with _style():
        figure = Figure(figsize=(WIDTH * 1.4, HEIGHT * 1.2))
        axes = figure.subplots()
        for kind, (marker, tint, label, size) in marks.items():
            part = rows[rows["kind"] == kind]
            if part.empty:
                continue
            face = "none" if marker == "o" else tint
            axes.scatter(
                part["time"] * 1000,
                part["offset"] / 1000,
                s=size,
                marker=marker,
                facecolors=face,
                edgecolors=tint if marker == "o" else None,
                linewidths=0.6 if marker == "o" else 0.9,
                label=label,
            )
        axes.set_xlabel("time since first data packet (ms)")
        axes.set_ylabel("data offset (kB)")
        _legend(axes)
        return save(figure, stem, formats)


def share_plot(shares: pd.DataFrame, stem: PathLike, *, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Bandwidth share over time of parallel flows: stacked areas of ``share`` per bin.

    ``shares``: columns ``time`` (bin start, s), ``flow``, ``share``
    (:func:`quicbed.analysis.stats.bandwidth_share`). Bins where nothing was sent are
    left blank. A dotted line marks the fair share of two flows when there are two.
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT))
        axes = figure.subplots()
        table = shares.pivot_table(index="time", columns="flow", values="share", sort=False)
        flows = list(dict.fromkeys(shares["flow"]))
        table = table[flows].sort_index()
        times = table.index.to_numpy(dtype=float)
        step = float(np.diff(times).min()) if times.size > 1 else 1.0
        xs = np.append(times, times[-1] + step)
        bottom = np.zeros(len(times))
        sent = ~np.all(np.isnan(table.to_numpy(dtype=float)), axis=1)  # bins with traffic
        where = np.append(sent, sent[-1])
        for flow, shade in zip(flows, group_colours([str(flow) for flow in flows])):
            values = np.nan_to_num(table[flow].to_numpy(dtype=float))
            top = bottom + values
            axes.fill_between(
                xs,
                np.append(bottom, bottom[-1]),
                np.append(top, top[-1]),
                where=where,
                step="post",
                color=shade,
                alpha=0.85,
                linewidth=0,
                label=str(flow),
            )
            bottom = top
        if len(flows) == 2:
            axes.axhline(0.5, color="#333333", linestyle=":", linewidth=0.8)
        axes.set_xlabel("time (s)")
        axes.set_ylabel("share of bytes per bin")
        axes.set_ylim(0, 1)
        axes.grid(visible=False)
        _legend(axes, loc="upper right")
        return save(figure, stem, formats)


def mobility_plot(
    samples: pd.DataFrame, events: Sequence[Mapping[str, Any]], stem: PathLike, *, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """A moving station over a run: delivered rate, signal heard from each AP, MCS received
    and position, against time; a dashed line where it lost its AP, a solid one where it
    associated with the next.

    ``samples``: :func:`quicbed.analysis.mobility.timeline_frame`; ``events``: the timeline's.
    """
    with _style():
        figure = Figure(figsize=(WIDTH, HEIGHT * 2.2))
        rate, signal, mcs, where = figure.subplots(4, 1, sharex=True)
        times = samples["t"].to_numpy(dtype=float)
        rate.step(times, samples["rate"].to_numpy(dtype=float) / 1e6, where="pre", color=PALETTE[0])
        rate.set_ylabel("delivered\n(Mbit/s)")
        signals = [c for c in samples.columns if c.startswith("signal:")]
        for index, column in enumerate(signals):
            signal.plot(
                times,
                samples[column].to_numpy(dtype=float),
                color=colour(index + 1),
                linestyle=LINESTYLES[index % len(LINESTYLES)],
                label=column.partition(":")[2],
            )
        signal.set_ylabel("signal\n(dBm)")
        if signals:
            _legend(signal, loc="lower center", ncols=len(signals))
        mcs.plot(times, samples["mcs"].to_numpy(dtype=float), marker=".", linestyle="none", color=PALETTE[3])
        mcs.set_ylabel("MCS")
        where.plot(times, samples["x"].to_numpy(dtype=float), color=PALETTE[7], label="x")
        where.plot(times, samples["y"].to_numpy(dtype=float), color=PALETTE[7], linestyle="--", label="y")
        where.set_ylabel("position (m)")
        where.set_xlabel("time since the transfer started (s)")
        _legend(where, loc="best")
        for event in events:
            if event["event"] in ("lost", "associated"):
                for axes in (rate, signal, mcs, where):
                    axes.axvline(
                        event["t"], color="#333333", linewidth=0.8, linestyle="--" if event["event"] == "lost" else "-"
                    )
        return save(figure, stem, formats)


__all__ = [
    "FORMATS",
    "PALETTE",
    "bar_ci",
    "ccdf_plot",
    "colour",
    "delay_throughput_plot",
    "ipt_plot",
    "mobility_plot",
    "save",
    "sender_plot",
    "sigma_ellipse",
    "sequence_plot",
    "share_plot",
    "throughput_bins_plot",
]
