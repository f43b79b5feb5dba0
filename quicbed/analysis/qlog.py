"""Congestion-control state of a QUIC sender over time, from its qlog.

Reads quicbed's filtered qlog (``quicbed.apps.quic.qlog``) and aioquic's full qlog: both
are qlog 0.3 JSON (``{"qlog_version": "0.3", "traces": [{"events": [...]}]}``); also
JSON-SEQ (``.sqlog``, RS-separated records, as quinn writes) and gzip-compressed files
(``.gz``). Event times become float seconds on the epoch clock, the clock of the captures:
aioquic writes absolute milliseconds; relative and delta times are resolved against
``common_fields.reference_time``.

From ``recovery:metrics_updated`` (values in bytes and qlog milliseconds; here bytes and
seconds): cwnd, bytes in flight, ssthresh, smoothed/min/latest RTT. aioquic logs only the
fields that changed with the event (RTTs only on a new sample, ssthresh only once set), so
the frame is forward-filled: each row is the sender's state after that event.

Congestion phases: ``recovery:congestion_state_updated`` events when the file has them
(quicbed's filtered logger derives them), otherwise derived from the metrics with the same
rules (:func:`derive_congestion_states`).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis.stats import state_shares, time_weighted_mean_var

METRIC_FIELDS = (
    "cwnd",
    "bytes_in_flight",
    "ssthresh",
    "smoothed_rtt",
    "min_rtt",
    "latest_rtt",
    "rtt_variance",
    "pacing_rate",
)
_RTT_FIELDS = ("smoothed_rtt", "min_rtt", "latest_rtt", "rtt_variance")
STATES = ("slow_start", "congestion_avoidance", "recovery")
#: how quicbed's native endpoint describes its qlog files (native/quinn/src/common.rs): quinn
#: logs only the fields that changed; files written before its RTTs were put in milliseconds
#: (as qlog says) say SECONDS_NOTE
QUINN_DESCRIPTION = "quicbed-quinn"
SECONDS_NOTE = "RTTs in seconds"
#: and the epoch of the connection's start, to which its event times are relative
_QUINN_START = re.compile(r"; start (\d+(?:\.\d+)?) s since the epoch")
#: qlog 0.3's name for the congestion window; aioquic's (and this module's) is ``cwnd``
_CWND_ALIASES = ("congestion_window",)
#: aioquic's datagram size: a window with this much room is not what limits the sender
MAX_DATAGRAM = 1200


@dataclass(frozen=True)
class QlogTrace:
    """One trace of a qlog file: vantage point and events (times in epoch seconds)."""

    vantage: str
    odcid: str | None
    events: list[dict[str, Any]] = field(repr=False)
    #: who wrote it: "quinn" (quicbed's native endpoint) or "unknown" (aioquic and others)
    producer: str = "unknown"
    #: RTT fields in seconds (quinn's files from before its RTTs were put in milliseconds)
    rtt_in_seconds: bool = False

    @property
    def rtt_unit(self) -> float:
        """Seconds per unit of the RTT fields (qlog: milliseconds; quinn: seconds)."""
        return 1.0 if self.rtt_in_seconds else 1e-3

    @property
    def logs_ssthresh(self) -> bool:
        """aioquic logs ssthresh once set; quinn only with quicbed's own controllers (CUBIC,
        NewReno), and only once slow start has ended."""
        return self.producer != "quinn" or any(
            event["data"].get("ssthresh") is not None for event in self.named("recovery:metrics_updated")
        )

    def named(self, *names: str) -> list[dict[str, Any]]:
        wanted = set(names)
        return [event for event in self.events if event["name"] in wanted]


def qlog_text(path: str | os.PathLike[str]) -> str:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def load_qlog(path: str | os.PathLike[str]) -> list[QlogTrace]:
    """Every trace of a qlog file (JSON or JSON-SEQ, optionally gzip-compressed)."""
    text = qlog_text(path)
    if text.lstrip(" \t\r\n").startswith("\x1e"):  # str.lstrip() would eat RS too
        return [_sequential_trace(text)]
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # newline-delimited records without RS characters
            return [_sequential_trace(text)]
        raise
    if "traces" not in document and "trace" in document:
        return [_trace(document["trace"])]
    return [_trace(trace) for trace in document.get("traces", [])]


def load_trace(path: str | os.PathLike[str], vantage: str | None = None) -> QlogTrace:
    """The single trace of a file (the one of ``vantage`` if several)."""
    traces = load_qlog(path)
    if vantage is not None:
        traces = [trace for trace in traces if trace.vantage == vantage]
    if len(traces) != 1:
        raise ValueError(f"{path}: expected one trace{f' of {vantage}' if vantage else ''}, found {len(traces)}")
    return traces[0]


def _trace(trace: Mapping[str, Any]) -> QlogTrace:
    common = trace.get("common_fields", {}) or {}
    raw_events = trace.get("events", [])
    fields = trace.get("event_fields")
    if fields:  # qlog draft-01: events are arrays in event_fields order
        raw_events = [_from_fields(fields, row) for row in raw_events]
    return QlogTrace(
        vantage=str((trace.get("vantage_point") or {}).get("type", "unknown")),
        odcid=common.get("ODCID") or common.get("group_id"),
        events=_normalise(raw_events, common),
    )


def _from_fields(fields: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    event = dict(zip(fields, row, strict=False))
    if "category" in event and "event" in event:
        event["name"] = f"{event.pop('category')}:{event.pop('event')}"
    if "relative_time" in event:
        event["time"] = event.pop("relative_time")
    return event


def _sequential_trace(text: str) -> QlogTrace:
    records = [json.loads(chunk) for line in text.split("\n") for chunk in line.split("\x1e") if chunk.strip()]
    header, events = records[0], records[1:]
    trace = header.get("trace", {})
    common = dict(trace.get("common_fields", {}) or {})
    start = _QUINN_START.search(str(header.get("description") or ""))
    if start and "reference_time" not in common:  # quinn's times are relative to the start it names
        common.update(reference_time=float(start.group(1)) * 1000, time_format="relative")
    producer = _producer(header)
    return QlogTrace(
        vantage=str((trace.get("vantage_point") or {}).get("type", "unknown")),
        odcid=common.get("ODCID") or common.get("group_id"),
        events=_normalise(events, common),
        producer=producer,
        rtt_in_seconds=producer == "quinn" and any(SECONDS_NOTE in text for text in _descriptions(header)),
    )


def _descriptions(header: Mapping[str, Any]) -> list[str]:
    return [str(text or "") for text in (header.get("description"), (header.get("trace") or {}).get("description"))]


def _producer(header: Mapping[str, Any]) -> str:
    return "quinn" if any(text.startswith(QUINN_DESCRIPTION) for text in _descriptions(header)) else "unknown"


def _normalise(events: Iterable[Mapping[str, Any]], common: Mapping[str, Any]) -> list[dict[str, Any]]:
    reference = float(common.get("reference_time", 0.0) or 0.0)
    time_format = common.get("time_format", "relative" if reference else "absolute")
    result: list[dict[str, Any]] = []
    clock = reference
    for event in events:
        value = float(event.get("time", 0.0))
        if time_format == "delta":
            clock += value
            when = clock
        elif time_format == "relative":
            when = reference + value
        else:
            when = value
        data = dict(event.get("data", {}) or {})
        for alias in _CWND_ALIASES:
            if alias in data and "cwnd" not in data:
                data["cwnd"] = data.pop(alias)
        result.append({"name": event.get("name", ""), "time": when / 1000.0, "data": data})
    result.sort(key=lambda event: event["time"])  # stable: ties keep the logged order
    return result


# --------------------------------------------------------------------------- metrics


def metrics_frame(trace: QlogTrace) -> pd.DataFrame:
    """The sender state after each ``recovery:metrics_updated`` event, forward-filled.

    Columns: ``time`` (epoch s), ``cwnd``, ``bytes_in_flight``, ``ssthresh`` (bytes; NaN
    until set), ``smoothed_rtt``, ``min_rtt``, ``latest_rtt``, ``rtt_variance`` (s; NaN
    until the first sample), ``pacing_rate`` (bit/s; NaN unless the stack logs it: quinn's
    BBR does, aioquic and quicbed's CUBIC/NewReno do not).
    """
    rows = []
    for event in trace.named("recovery:metrics_updated"):
        data = event["data"]
        row: dict[str, float] = {"time": event["time"]}
        for name in METRIC_FIELDS:
            if name in data and data[name] is not None:
                value = float(data[name])
                row[name] = value * trace.rtt_unit if name in _RTT_FIELDS else value
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["time", *METRIC_FIELDS])
    frame[list(METRIC_FIELDS)] = frame[list(METRIC_FIELDS)].astype(float).ffill()
    return frame


def transfer_window(metrics: pd.DataFrame) -> tuple[float, float]:
    """(start, end) of the sender's activity: the first metrics event and the last one at
    which bytes were in flight.

    Phase shares and cwnd statistics use this window so that the idle wait for the
    connection close does not count as time in the last state. (A few hundred bytes of a
    last small packet may stay in flight until the close; the event that logs them is the
    ACK of the last data.)
    """
    if metrics.empty:
        return math.nan, math.nan
    times = metrics["time"].to_numpy()
    busy = np.flatnonzero(metrics["bytes_in_flight"].fillna(0).to_numpy() > 0)
    if busy.size == 0:
        return float(times[0]), float(times[-1])
    return float(times[0]), float(times[busy[-1]])


def derive_congestion_states(metrics_events: Iterable[Mapping[str, Any]]) -> list[tuple[float, str]]:
    """(time, state) changes derived from ``recovery:metrics_updated`` events.

    The rules of quicbed's filtered logger: ``slow_start`` while there is no ssthresh or
    cwnd < ssthresh; ``recovery`` from a cwnd decrease until cwnd grows again; otherwise
    ``congestion_avoidance``. Evaluated when cwnd or ssthresh change (and in recovery).
    Fields an event leaves out keep their last value (quinn logs only what changed).
    """
    changes: list[tuple[float, str]] = []
    state: str | None = None
    last_cwnd: float | None = None
    last_ssthresh: float | None = None
    for event in metrics_events:
        data = event["data"]
        cwnd, ssthresh = data.get("cwnd", last_cwnd), data.get("ssthresh", last_ssthresh)
        if cwnd is None:
            continue
        if cwnd == last_cwnd and ssthresh == last_ssthresh and state != "recovery":
            continue
        if ssthresh is None:
            new = "slow_start"
        elif last_cwnd is not None and (cwnd < last_cwnd or (state == "recovery" and cwnd == last_cwnd)):
            new = "recovery"
        elif cwnd < ssthresh:
            new = "slow_start"
        else:
            new = "congestion_avoidance"
        last_cwnd, last_ssthresh = cwnd, ssthresh
        if new != state:
            changes.append((float(event["time"]), new))
            state = new
    return changes


def congestion_states(trace: QlogTrace) -> pd.DataFrame:
    """State changes (columns ``time``, ``state``): logged if the trace has
    ``recovery:congestion_state_updated`` events, else :func:`derive_congestion_states`.
    Column ``source`` says which ("logged" or "derived")."""
    logged = trace.named("recovery:congestion_state_updated")
    if not logged and not trace.logs_ssthresh:  # no way to tell slow start from the rest
        return pd.DataFrame([], columns=["time", "state", "source"])
    if logged:
        rows = [(event["time"], str(event["data"].get("new")), "logged") for event in logged]
    else:
        rows = [
            (when, state, "derived")
            for when, state in derive_congestion_states(trace.named("recovery:metrics_updated"))
        ]
    return pd.DataFrame(rows, columns=["time", "state", "source"])


def phase_shares(states: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    """Share of ``[start, end]`` spent in slow start, congestion avoidance and recovery
    (each state holds until the next change); states never entered get 0."""
    shares = state_shares(states["time"], states["state"].to_numpy(), start, end)
    return {**{name: 0.0 for name in STATES}, **shares}


def window_limited(metrics: pd.DataFrame, room: float = MAX_DATAGRAM) -> np.ndarray:
    """Per metrics row: True when the congestion window left less than ``room`` bytes
    (``cwnd - bytes_in_flight < room``), i.e. the window is what holds the sender back."""
    gap = metrics["cwnd"].to_numpy(dtype=float) - metrics["bytes_in_flight"].to_numpy(dtype=float)
    return gap < room


def app_limited_share(metrics: pd.DataFrame, start: float, end: float, room: float = MAX_DATAGRAM) -> float:
    """Share of ``[start, end]`` in which the sender was *not* window-limited (derived).

    Sample-and-hold over the metrics rows of :func:`window_limited`. qlog has no
    application-limited event, so this share includes pacer-limited periods (with pacing
    on, the pacer, not the window, often decides when the next packet leaves): for a
    paced sender it is an upper bound of the application-limited time, for an unpaced one
    (BQUIC) it is the application- (or flow-control-) limited time.
    """
    limited = window_limited(metrics, room)
    shares = state_shares(metrics["time"], np.where(limited, "cwnd", "app"), start, end)
    return shares.get("app", 0.0) if shares else math.nan


# --------------------------------------------------------------------------- slow start and losses

#: why a sender left slow start: a loss (its window shrank), a delay increase (ssthresh set
#: with the window kept), still in slow start at the end, or no way to tell from the log
EXIT_REASONS = ("loss", "delay", "none", "unknown")


@dataclass(frozen=True)
class SlowStartExit:
    time: float  # s from the sender's first metrics event to the exit; NaN unless it left
    reason: str  # one of EXIT_REASONS


def slow_start_exit(trace: QlogTrace) -> SlowStartExit:
    """When and why the sender first left slow start (:func:`congestion_states`): into
    recovery is a loss; into congestion avoidance is the delay-increase rule (quicbed's
    endpoints set ssthresh to the window when the RTT rises, without shrinking it)."""
    states = congestion_states(trace)
    metrics = trace.named("recovery:metrics_updated")
    if states.empty or not metrics:
        return SlowStartExit(math.nan, "unknown")
    start = float(metrics[0]["time"])
    in_slow_start = False
    for when, state in zip(states["time"], states["state"], strict=True):
        if state == "slow_start":
            in_slow_start = True
        elif in_slow_start:
            return SlowStartExit(float(when) - start, "loss" if state == "recovery" else "delay")
    return SlowStartExit(math.nan, "none" if in_slow_start else "unknown")


def _packet_number(data: Mapping[str, Any]) -> int | None:
    header = data.get("header") or {}
    number = header.get("packet_number", data.get("packet_number"))
    return int(number) if number is not None else None


def _one_rtt(data: Mapping[str, Any]) -> bool:
    kind = str((data.get("header") or {}).get("packet_type", data.get("type", ""))).lower()
    return kind in ("1rtt", "1-rtt", "onertt")


@dataclass(frozen=True)
class DeclaredLosses:
    declared: int  # 1-RTT packets the sender declared lost
    spurious: int  # of them, acknowledged by the peer afterwards


def declared_losses(trace: QlogTrace) -> DeclaredLosses | None:
    """Losses the sender declared (``recovery:packet_lost``) and how many of those packets
    the peer acknowledged later (ACK ranges of ``transport:packet_received``). None when the
    log holds no ACK ranges: spurious losses cannot be told then.

    The definition TCP's (:func:`quicbed.analysis.matching.tcp_retransmissions`) shares: a
    declared loss is a packet whose data the sender sent again, spurious when that packet had
    reached the receiver. aioquic logs ``packet_lost`` for ACK-based detection and for the
    packet whose data it resends at a probe timeout, as TCP's tail loss probes and timeouts
    are retransmissions too."""
    lost: dict[int, float] = {}
    for event in trace.named("recovery:packet_lost"):
        number = _packet_number(event["data"])
        if number is not None and _one_rtt(event["data"]):
            lost.setdefault(number, float(event["time"]))
    ranges: list[tuple[float, int, int]] = []
    for event in trace.named("transport:packet_received"):
        if not _one_rtt(event["data"]):
            continue
        for frame in event["data"].get("frames") or []:
            if frame.get("frame_type") == "ack":
                ranges.extend(
                    (float(event["time"]), int(low), int(high)) for low, high in frame.get("acked_ranges") or []
                )
    if not ranges:
        return None
    if not lost:
        return DeclaredLosses(0, 0)
    # the last time each packet number (up to the largest lost one) was acknowledged
    last_acked = np.full(max(lost) + 1, -math.inf)
    for at, low, high in sorted(ranges):
        if low <= high and low < last_acked.size:
            last_acked[low : high + 1] = at
    spurious = sum(1 for number, when in lost.items() if last_acked[number] >= when)
    return DeclaredLosses(len(lost), spurious)


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class QlogSummary:
    """A QUIC sender's congestion control over one connection (bytes, seconds, shares)."""

    vantage: str
    start: float
    end: float
    cwnd_mean: float  # time-weighted over [start, end]
    cwnd_var: float
    cwnd_max: float
    bytes_in_flight_mean: float
    smoothed_rtt_mean: float  # time-weighted
    min_rtt: float  # the last min_rtt logged (the connection's minimum)
    packets_lost: int
    phases: dict[str, float]  # slow_start, congestion_avoidance, recovery: sum to 1
    app_limited: float  # overlaps the phases; see app_limited_share
    states_source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_trace(trace: QlogTrace) -> QlogSummary:
    """cwnd mean/variance, RTTs, losses and phase shares of a trace over its transfer
    window (:func:`transfer_window`)."""
    metrics = metrics_frame(trace)
    start, end = transfer_window(metrics)
    states = congestion_states(trace)
    cwnd_mean, cwnd_var = time_weighted_mean_var(metrics["time"], metrics["cwnd"], start, end)
    flight_mean, _ = time_weighted_mean_var(metrics["time"], metrics["bytes_in_flight"], start, end)
    srtt_mean, _ = time_weighted_mean_var(metrics["time"], metrics["smoothed_rtt"], start, end)
    min_rtt = metrics["min_rtt"].dropna()
    return QlogSummary(
        vantage=trace.vantage,
        start=start,
        end=end,
        cwnd_mean=cwnd_mean,
        cwnd_var=cwnd_var,
        cwnd_max=float(metrics["cwnd"].max()) if not metrics.empty else math.nan,
        bytes_in_flight_mean=flight_mean,
        smoothed_rtt_mean=srtt_mean,
        min_rtt=float(min_rtt.iloc[-1]) if not min_rtt.empty else math.nan,
        packets_lost=len(trace.named("recovery:packet_lost")),
        phases=phase_shares(states, start, end) if not states.empty else {},
        app_limited=app_limited_share(metrics, start, end),
        states_source=str(states["source"].iloc[0]) if not states.empty else "none",
    )


def summarize_qlog(path: str | os.PathLike[str], vantage: str | None = "server") -> QlogSummary:
    """:func:`summarize_trace` of the (server) trace of a qlog file."""
    return summarize_trace(load_trace(path, vantage))


__all__ = [
    "EXIT_REASONS",
    "METRIC_FIELDS",
    "STATES",
    "DeclaredLosses",
    "QlogSummary",
    "QlogTrace",
    "SlowStartExit",
    "app_limited_share",
    "congestion_states",
    "declared_losses",
    "derive_congestion_states",
    "load_qlog",
    "load_trace",
    "metrics_frame",
    "phase_shares",
    "slow_start_exit",
    "summarize_qlog",
    "summarize_trace",
    "transfer_window",
    "window_limited",
]
