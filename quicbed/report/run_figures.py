"""The report's figures of single runs (docs/metrics.md, "Plots"), drawn with
quicbed.analysis.plots from the run folders' artifacts: inter-packet times, throughput bins,
sequence diagrams, the sender's state over time, bandwidth share and moving stations. A run
whose artifact is missing is passed over for another run of its transport; when no run has
it, the figure is skipped with a note.

Single-run figures look at one "focus" group of cells: the first value of the non-transport
axes (matrix order), so that all transports are compared under the same conditions. The
representative run of a transport there is the counted run whose goodput (else download
time) is closest to the median of its cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis import metrics, mobility, plots, stats
from quicbed.apps.transports import transport_kinds
from quicbed.errors import SpecError
from quicbed.report.figure_context import FigureContext, slug
from quicbed.report.load import LoadedResults

BIN_WIDTH = 0.05  # s: the throughput and bandwidth-share bins of the issue


# --------------------------------------------------------------------------- choosing runs


def focus_runs(context: FigureContext) -> tuple[pd.DataFrame, str]:
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


def candidate_runs(context: FigureContext, runs: pd.DataFrame) -> dict[str, list[str]]:
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
        chosen[transport] = list(
            part.assign(distance=distance).sort_values(["distance", "run_id"], kind="stable")["folder"]
        )
    return chosen


def _label(transport: str) -> str:
    return transport or "runs"


def _own_flow(context: FigureContext, transport: str, packets: list) -> metrics.FlowKey:
    """The data flow of the run's own transport: with a competitor on the same link (the
    shared-medium experiment) the largest flow may be the competitor's."""
    kinds = context.results.runs.loc[context.results.runs["transport"] == transport, "transport_kind"]
    kind = next((kind for kind in kinds if kind), None)
    proto = transport_kinds()[kind].wire_protocol if kind in transport_kinds() else None
    flows = metrics.data_flows(packets)
    own = [flow for flow in flows if flow[4] == proto]
    if len(flows) > 1 and own:
        return own[0]
    return metrics.main_flow(packets)


# --------------------------------------------------------------------------- single runs


def _per_transport(
    candidates: dict[str, list[str]], extract: Callable[[str, str], tuple[pd.DataFrame, str] | None], limit: int = 1
) -> tuple[list[pd.DataFrame], list[str]]:
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


def _own_data(context: FigureContext, transport: str, folder: str, capture: str) -> list | None:
    """The data packets of the run's own flow in one of its captures (None without the capture)."""
    packets = context.files.packets(folder, capture)
    return metrics.data_packets(packets, _own_flow(context, transport, packets)) if packets else None


def ipt_figure(context: FigureContext, candidates: dict[str, list[str]], where: str) -> None:
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
    context.draw(
        "ipt-server",
        title,
        f"Gaps between consecutive data packets leaving the server (server.pcap), histogram "
        f"(share of gaps, log bins) and ECDF; dotted: 100 µs. Runs {', '.join(used)}"
        f"{f' ({where})' if where else ''}.",
        lambda stem: plots.ipt_plot(gaps, stem, group="transport"),
    )


def throughput_bins_figure(context: FigureContext, candidates: dict[str, list[str]], where: str) -> None:
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
    context.draw(
        "throughput-bins",
        title,
        f"Payload received per 50 ms bin at the client (client.pcap) from the first data packet, "
        f"one representative run per transport: {', '.join(used)}{f' ({where})' if where else ''}.",
        lambda stem: plots.throughput_bins_plot(binned, stem, group="transport", bin_width=BIN_WIDTH),
    )


def sequence_figures(context: FigureContext, candidates: dict[str, list[str]], where: str) -> None:
    for transport, folders in candidates.items():
        title = f"Sequence/ACK diagram ({_label(transport)})"
        for folder in folders:
            if not (context.files.path(folder, "server.pcap") and context.files.path(folder, "client.pcap")):
                continue
            server = context.files.packets(folder, "server.pcap") or []
            client = context.files.packets(folder, "client.pcap") or []
            flow = _own_flow(context, transport, client)
            rows = metrics.sequence_frame(server, client, flow)
            offsets = (
                "TCP sequence/ACK numbers relative to the first data byte"
                if flow[4] == "tcp"
                else "payload bytes sent before each packet (QUIC encrypts its offsets)"
            )
            context.draw(
                f"sequence-{slug(transport or 'run')}",
                title,
                f"Run {Path(folder).name}{f' ({where})' if where else ''}: data packets sent at the "
                f"server, received at the client, lost, and the client's ACKs; offsets are {offsets}.",
                partial(plots.sequence_plot, rows),
            )
            break
        else:
            context.skip(title, "no run has both server.pcap and client.pcap")


def _flow_labels(flows: list[metrics.FlowKey]) -> dict[metrics.FlowKey, str]:
    protocols = ["quic" if flow[4] == "udp" else "tcp" for flow in flows]
    distinct = len(set(protocols)) == len(protocols)
    return {
        flow: (f"{protocol} (port {flow[1]})" if distinct else f"flow {number + 1} ({flow[4]} {flow[1]})")
        for number, (flow, protocol) in enumerate(zip(flows, protocols, strict=True))
    }


def _download_labels(
    context: FigureContext, run: pd.Series, flows: list[metrics.FlowKey]
) -> dict[metrics.FlowKey, str]:
    """Flows named by the download they carry (the server port in client.json and
    competitor.json, competitor-2.json, ...): the run's transport and its competitors'; others
    as _flow_labels."""
    labels = _flow_labels(flows)
    record = next((r for r in context.results.records if r.get("run_id") == run["run_id"]), {})
    competitor = record.get("competitor") or {}
    rivals = [t.get("name") for t in competitor.get("transports", [competitor])]
    files = [("client.json", str(run["transport"]))] + [
        ("competitor.json" if number == 1 else f"competitor-{number}.json", f"{rival or 'competitor'} (competitor)")
        for number, rival in enumerate(rivals, start=1)
    ]
    for name, label in files:
        path = context.files.path(run["folder"], name)
        try:
            port = json.loads(path.read_text())["server"]["port"] if path else None
        except (OSError, ValueError, KeyError, TypeError):
            port = None
        labels.update({flow: label for flow in flows if flow[1] == port})
    return labels


def flow_events(
    client: list, flows: list[metrics.FlowKey], labels: dict[metrics.FlowKey, str] | None = None
) -> pd.DataFrame:
    """Per-packet rows (time, flow, bytes) of the data packets of ``flows``."""
    labels = labels or _flow_labels(flows)
    rows = [
        (packet.ts, labels[flow], packet.payload_len) for flow in flows for packet in metrics.data_packets(client, flow)
    ]
    return pd.DataFrame(rows, columns=["time", "flow", "bytes"]).sort_values("time", kind="stable")


#: sender time-series figures for at most this many combinations of the other axes
MAX_SENDER_GROUPS = 8
SENDER_STEP = 0.05  # s: the grid of the per-cell median and band
MAX_BAND_RUNS = 20  # runs per cell in the band (each run's log is read: a 30 MB QUIC transfer's takes ~2 s)
CAPACITY_BIN_MS = 100


def _aligned_series(context: FigureContext, folder: str) -> pd.DataFrame | None:
    """The run's sender series, time in s from the start of its link's trace (the run's start)
    when it replays one, else from its first sample."""
    frame = context.files.sender_series(folder)
    if frame is None:
        return None
    starts = [trace["started"] for trace in context.files.run_details(folder).get("traces") or []]
    zero = min(starts) if starts else float(frame["time"].iloc[0])
    return frame.assign(time=frame["time"] - zero)


def _trace_capacity(context: FigureContext, folder: str, until: float) -> pd.DataFrame | None:
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


def sender_figures(context: FigureContext) -> None:
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

    for key, part in groups[: MAX_SENDER_GROUPS if study is not None and study.series else 1]:
        values = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{axis}={value}" for axis, value in zip(others, values))
        suffix = slug(" ".join(map(str, values))) if others else "all"
        chosen, every, folders = [], [], []
        for transport, candidates in candidate_runs(context, part).items():
            representative = next((folder for folder in candidates if series_of(folder) is not None), None)
            if representative is None:
                continue
            folders.append(representative)
            chosen.append(_long(series_of(representative), _label(transport)).assign(run=Path(representative).name))
            # the band: the cell's runs in run order (not the most typical ones), at most MAX_BAND_RUNS
            banded = [
                frame for folder in sorted(candidates)[:MAX_BAND_RUNS] if (frame := series_of(folder)) is not None
            ]
            for column in SERIES:
                band = median_band(banded, column, SENDER_STEP)
                if not band.empty:
                    every.append(
                        band.rename(columns={"median": "value"}).assign(series=column, group=_label(transport))
                    )
        title = f"Sender state over time{f' ({where})' if where else ''}"
        if not chosen:
            context.skip(title, "no run has server.qlog, tcp_probe.txt.gz or ss.txt (set qlog: true)")
            continue
        single, bands = pd.concat(chosen, ignore_index=True), pd.concat(every, ignore_index=True)
        capacity = _trace_capacity(context, folders[0], float(single["time"].max()))
        traced = (
            " Grey: the capacity of the trace the download crosses, in 100 ms bins." if capacity is not None else ""
        )
        sources = "QUIC: server qlog; TCP: tcp_probe events or ss samples (docs/metrics.md)"
        context.draw(
            f"sender-runs-{suffix}",
            f"{title}, one run per transport",
            f"cwnd, bytes in flight, smoothed (solid) and min (dotted) RTT and pacing rate of the run closest "
            f"to its cell's median, per transport; {sources}; time from the run's start.{traced}",
            partial(_sender_files, single, capacity),
        )
        context.draw(
            f"sender-cells-{suffix}",
            f"{title}, median of each cell",
            f"The same quantities, median over the runs of each cell (the first {MAX_BAND_RUNS} at most; "
            f"shaded: 25th-75th percentile) on a "
            f"{SENDER_STEP * 1000:.0f} ms grid, each run held at its last sample until its next and ending "
            f"with its transfer; {sources}.{traced}",
            partial(_sender_files, bands, capacity),
        )


def _sender_files(lines: pd.DataFrame, capacity: pd.DataFrame | None, stem: Path) -> list[Path]:
    written = plots.sender_plot(lines, stem, capacity=capacity)
    data = stem.with_name(f"{stem.name}.csv")
    lines.to_csv(data, index=False)
    return [*written, data]


def share_figures(context: FigureContext) -> None:
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
                per_flow = [
                    8 * float(group["bytes"].sum()) / max(float(np.ptp(group["time"])), 1e-9)
                    for _, group in events.groupby("flow", sort=False)
                ]
                jain = stats.jain_index(per_flow)
                over_time = stats.jain_over_time(binned)
                context.draw(
                    f"share-{slug(run['run_id'])}",
                    f"Bandwidth share ({run['cell']})",
                    f"Share of the bytes per 50 ms bin of the {len(flows)} parallel data flows of run "
                    f"{run['run_id']} ({run['cell']}), client capture. Jain's index of the flows' "
                    f"throughputs: {jain:.3f}; mean per bin where all flows sent: "
                    f"{over_time['jain'].mean():.3f}.",
                    partial(plots.share_plot, shares),
                )
                server = context.files.packets(run["folder"], "server.pcap")
                if server:
                    gaps = pd.concat(
                        [
                            pd.DataFrame(
                                {
                                    "gap": metrics.inter_packet_times(metrics.data_packets(server, flow)),
                                    "flow": labels[flow],
                                }
                            )
                            for flow in flows
                        ],
                        ignore_index=True,
                    )
                    context.draw(
                        f"ipt-flows-{slug(run['run_id'])}",
                        f"Inter-packet times per flow ({run['cell']})",
                        f"Gaps between consecutive data packets of each of the {len(flows)} parallel flows "
                        f"leaving the server (server.pcap) in run {run['run_id']} ({run['cell']}): histogram "
                        "(share of gaps, log bins) and ECDF; dotted: 100 µs.",
                        partial(plots.ipt_plot, gaps, group="flow"),
                    )
                made += 1
            break  # one run per cell: cells are either parallel-flow cells or not


#: moving stations drawn per run, the download's client first (a random walk of many would
#: bury it)
MAX_MOVING_STATIONS = 4


def mobility_figures(context: FigureContext) -> None:
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
        stations = sorted(
            (name for name, timeline in motion["stations"].items() if timeline["samples"]),
            key=lambda name: (name != client, name),
        )[:MAX_MOVING_STATIONS]
        for station in stations:
            timeline = motion["stations"][station]
            frame = mobility.timeline_frame(timeline, motion["interval_s"])
            changes = [e for e in timeline["events"] if e["event"] == "associated"]
            stem = f"mobility-{slug(run['run_id'])}" + (f"-{slug(station)}" if len(stations) > 1 else "")
            role = "the download's client" if station == client else "another station"
            context.draw(
                stem,
                f"{station} moving ({run['cell']})",
                f"Station {station} ({role}) in run {run['run_id']} ({run['cell']}): bytes delivered "
                f"to it, the signal it heard from each access point and the MCS it received at, per "
                f"{motion['interval_s'] * 1e3:.0f} ms sample, and its position. Dashed: it lost its AP; "
                f"solid: it associated ({len(changes)} association(s): "
                f"{_associations(changes)}). Data in the CSV.",
                partial(_mobility_files, frame, timeline["events"]),
            )
        if stations:
            made[transport] = made.get(transport, 0) + 1


def _associations(events: list[dict[str, Any]]) -> str:
    return ", ".join(f"{event['ap']} at {event['t']:.2f} s" for event in events) or "none"


def _mobility_files(frame: pd.DataFrame, events: list[dict[str, Any]], stem: Path) -> list[Path]:
    written = plots.mobility_plot(frame, events, stem)
    data = stem.with_name(f"{stem.name}.csv")
    frame.to_csv(data, index=False)
    return [*written, data]
