"""TCP sender state over time: from periodic ``ss -tin`` samples and from the kernel's
``tcp:tcp_probe`` / ``tcp:tcp_cong_state_set`` tracepoints.

``ss`` samples are text files of blocks, each block a time stamp line followed by the
output of one ``ss -tin`` call::

    # 1795256435.413467
    Recv-Q Send-Q Local Address:Port Peer Address:Port Process
    0      31856       10.0.0.2:8080     10.0.0.1:51848
        cubic wscale:10,10 rto:208 rtt:4.166/4.585 ... cwnd:20 ssthresh:17 ... app_limited

(the info line starts with a tab). The stamp line is ``# <epoch seconds>`` (also
accepted: a bare number, ``ts=<number>``, ``time: <number>``). ``ss`` output with or
without the ``State`` column (``ss -tin`` vs ``ss -tin state established``) is
understood. :func:`quicbed.apps.transports.tcp_state.ss_sampler_command` makes such a file.

Tracepoint text is what ``/sys/kernel/tracing/trace`` or ``trace_pipe`` print::

    curl-1958 [000] ..s2.  3506.200729: tcp_probe: family=AF_INET src=10.0.0.2:8080
        dest=10.0.0.1:43762 mark=0x0 data_len=0 snd_nxt=0x28ebeaf8 snd_una=0x28ebeaf8
        snd_cwnd=10 ssthresh=2147483647 snd_wnd=64512 srtt=33 rcv_wnd=65160 ...

(one line). Its time stamps are on the trace clock (``trace_clock``: "local" by default,
"mono" is CLOCK_MONOTONIC); pass ``clock_offset`` (epoch minus trace clock) to put them on
the epoch clock of the captures.

Phases (``slow_start``, ``congestion_avoidance``, ``recovery``) are derived per sample:
see :func:`ss_phases` and :func:`probe_phases`. Linux calls ``ssthresh`` "infinite" (not
set) before the first reduction; ss then omits it and tcp_probe prints 2147483647.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis.stats import state_shares, time_weighted_mean_var

TCP_INFINITE_SSTHRESH = 0x7FFFFFFF
#: Linux tcp_ca_state values (include/net/tcp.h)
CA_STATES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}
STATES = ("slow_start", "congestion_avoidance", "recovery")

_STAMP = re.compile(r"^\s*(?:#\s*)?(?:ts\s*[=:]\s*|time\s*[=:]\s*)?(\d+(?:\.\d+)?)\s*$")
_SOCKET = re.compile(
    r"^(?:(?P<state>[A-Z][A-Z0-9-]*)\s+)?(?P<recvq>\d+)\s+(?P<sendq>\d+)\s+"
    r"(?P<local>\S+)\s+(?P<peer>\S+)"
)
_TRACE = re.compile(
    r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>\S{4,5})\s+)?(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s+"
    r"(?P<fields>.*)$"
)
_RATE_UNITS = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9}


def read_text(path: str | os.PathLike[str]) -> str:
    """A text file, gunzipped if it is gzip-compressed."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- ss


def _rate(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)([KMG]?bps)", text)
    return float(match.group(1)) * _RATE_UNITS[match.group(2)] if match else math.nan


def parse_ss_info(line: str) -> dict[str, Any]:
    """The fields of one ``ss -i`` info line (the indented line under a socket).

    Returns numbers in SI units: ``rtt``, ``rttvar``, ``min_rtt``, ``rto`` in seconds;
    rates in bit/s; ``cwnd``/``ssthresh`` in segments; ``mss`` and byte counters in bytes;
    ``retrans`` (segments retransmitted and not yet acknowledged) and ``retrans_total``;
    flags (``app_limited``, ``ts``, ``sack``, ``ecn``...) as True; ``cc`` the algorithm.
    """
    info: dict[str, Any] = {}
    tokens = line.split()
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token in ("send", "pacing_rate", "delivery_rate") and index < len(tokens):
            info[token] = _rate(tokens[index])
            index += 1
            continue
        key, sep, value = token.partition(":")
        if not sep:
            if token in (
                "cubic",
                "reno",
                "bbr",
                "bbr2",
                "bbr3",
                "dctcp",
                "vegas",
                "westwood",
                "htcp",
                "bic",
                "illinois",
                "hybla",
                "scalable",
                "highspeed",
                "lp",
                "veno",
                "yeah",
                "nv",
                "cdg",
            ):
                info["cc"] = token
            else:
                info[token] = True
            continue
        if key == "rtt":
            mean, _, var = value.partition("/")
            info["rtt"], info["rttvar"] = float(mean) / 1000, float(var or "nan") / 1000
        elif key == "minrtt":
            info["min_rtt"] = float(value) / 1000
        elif key in ("rto", "ato"):
            info[key] = float(value) / 1000
        elif key == "retrans":
            current, _, total = value.partition("/")
            info["retrans"], info["retrans_total"] = int(current), int(total or current)
        elif key == "bbr" or key.startswith("("):
            info[key] = value
        elif re.fullmatch(r"-?\d+", value):
            info[key] = int(value)
        elif re.fullmatch(r"-?\d+\.\d+", value):
            info[key] = float(value)
        else:
            info[key] = value
    return info


def parse_ss(text: str) -> pd.DataFrame:
    """All socket samples of an ``ss -tin`` sample file (module docstring), one row per
    socket and sample.

    Columns: ``time`` (epoch s of the block), ``local``, ``peer`` (``addr:port``), ``cc``,
    ``cwnd``, ``ssthresh`` (segments; NaN while infinite), ``mss``, ``cwnd_bytes``
    (cwnd * mss), ``rtt``, ``rttvar``, ``min_rtt`` (s), ``unacked``, ``retrans``,
    ``retrans_total``, ``lost``, ``bytes_sent``, ``bytes_acked``, ``bytes_retrans``,
    ``delivery_rate``, ``pacing_rate`` (bit/s), ``app_limited`` (bool), ``send_q``.
    """
    rows: list[dict[str, Any]] = []
    stamp = math.nan
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        found = _STAMP.match(line)
        if found:
            stamp = float(found.group(1))
            continue
        if line.startswith(("Recv-Q", "State", "Netid")):
            continue
        if line[0] in " \t" and current is not None:
            current.update(parse_ss_info(line))
            continue
        socket_line = _SOCKET.match(line)
        if socket_line:
            current = {
                "time": stamp,
                "local": socket_line.group("local"),
                "peer": socket_line.group("peer"),
                "send_q": int(socket_line.group("sendq")),
            }
            rows.append(current)
    columns = [
        "time",
        "local",
        "peer",
        "cc",
        "cwnd",
        "ssthresh",
        "mss",
        "cwnd_bytes",
        "rtt",
        "rttvar",
        "min_rtt",
        "unacked",
        "retrans",
        "retrans_total",
        "lost",
        "bytes_sent",
        "bytes_acked",
        "bytes_retrans",
        "delivery_rate",
        "pacing_rate",
        "app_limited",
        "send_q",
    ]
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame:
            frame[column] = False if column == "app_limited" else math.nan
    frame["app_limited"] = frame["app_limited"].fillna(False).astype(bool)
    for column in ("retrans", "retrans_total", "lost", "unacked", "bytes_retrans"):
        frame[column] = frame[column].fillna(0)
    frame["cwnd_bytes"] = frame["cwnd"] * frame["mss"]
    return frame[columns].reset_index(drop=True)


def read_ss(path: str | os.PathLike[str]) -> pd.DataFrame:
    """:func:`parse_ss` of a (possibly gzip-compressed) file."""
    return parse_ss(read_text(path))


def connection(
    frame: pd.DataFrame, local: str | None = None, peer: str | None = None, peers: set[str] | None = None
) -> pd.DataFrame:
    """The samples of one connection; by default the one with the most samples (the
    bulk transfer) when ``local``/``peer`` are not given; with ``peers``, among the
    connections to those ``addr:port``."""
    if peers:
        frame = frame[frame["peer"].isin(peers)]
    if frame.empty:
        return frame
    if local is None and peer is None:
        local, peer = frame.groupby(["local", "peer"]).size().idxmax()
    mask = np.ones(len(frame), dtype=bool)
    if local is not None:
        mask &= frame["local"].to_numpy() == local
    if peer is not None:
        mask &= frame["peer"].to_numpy() == peer
    return frame[mask].reset_index(drop=True)


def connections(frame: pd.DataFrame, peers: set[str] | None = None) -> list[pd.DataFrame]:
    """The samples of every connection (``local``, ``peer``), in the order they first
    appear; with ``peers``, only the connections to those ``addr:port`` (one client's
    several HTTP/1.1 connections)."""
    if peers:
        frame = frame[frame["peer"].isin(peers)]
    if frame.empty:
        return []
    groups = frame.groupby(["local", "peer"], sort=False)
    return [group.reset_index(drop=True) for _, group in groups]


def ss_phases(samples: pd.DataFrame) -> pd.Series:
    """Congestion phase per ``ss`` sample of one connection.

    ``recovery`` when retransmitted segments are outstanding (``retrans`` > 0) or
    segments are marked lost (``lost`` > 0), or cwnd fell since the previous sample;
    else ``slow_start`` when ssthresh is infinite or cwnd < ssthresh; else
    ``congestion_avoidance``. (ss does not print Linux's ca_state; fast recovery that
    starts and ends between two samples is missed.)
    """
    cwnd = samples["cwnd"].to_numpy(dtype=float)
    ssthresh = samples["ssthresh"].to_numpy(dtype=float)
    fell = np.zeros(len(samples), dtype=bool)
    fell[1:] = cwnd[1:] < cwnd[:-1]
    recovering = (samples["retrans"].to_numpy(dtype=float) > 0) | (samples["lost"].to_numpy(dtype=float) > 0) | fell
    slow = np.isnan(ssthresh) | (cwnd < ssthresh)
    states = np.where(recovering, "recovery", np.where(slow, "slow_start", "congestion_avoidance"))
    return pd.Series(states, index=samples.index, name="state")


# --------------------------------------------------------------------------- tracepoints


def _fields(text: str) -> dict[str, str]:
    return dict(token.split("=", 1) for token in text.split() if "=" in token)


def _endpoint(text: str) -> str:
    return text.replace("[", "").replace("]", "")


def parse_trace(text: str, clock_offset: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``tcp_probe`` and ``tcp_cong_state_set`` events of a trace text.

    Returns ``(probe, states)``. ``probe`` columns: ``time`` (trace clock +
    ``clock_offset``), ``src``, ``dst`` (``addr:port``), ``data_len``, ``snd_nxt``,
    ``snd_una`` (ints), ``cwnd``, ``ssthresh`` (segments; NaN when infinite), ``snd_wnd``,
    ``rcv_wnd`` (bytes), ``srtt`` (s; the kernel prints microseconds), ``cookie``.
    ``states`` columns: ``time``, ``src``, ``dst``, ``ca_state`` (int), ``state`` (name
    from :data:`CA_STATES`). Other lines are ignored.
    """
    probes: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    for line in text.splitlines():
        found = _TRACE.match(line)
        if not found:
            continue
        when = float(found.group("ts")) + clock_offset
        fields = _fields(found.group("fields"))
        event = found.group("event")
        if event == "tcp_probe":
            ssthresh = int(fields["ssthresh"])
            probes.append(
                {
                    "time": when,
                    "src": _endpoint(fields["src"]),
                    "dst": _endpoint(fields["dest"]),
                    "data_len": int(fields.get("data_len", "0")),
                    "snd_nxt": int(fields["snd_nxt"], 0),
                    "snd_una": int(fields["snd_una"], 0),
                    "cwnd": float(fields["snd_cwnd"]),
                    "ssthresh": math.nan if ssthresh >= TCP_INFINITE_SSTHRESH else float(ssthresh),
                    "snd_wnd": int(fields.get("snd_wnd", "0")),
                    "rcv_wnd": int(fields.get("rcv_wnd", "0")),
                    "srtt": int(fields["srtt"]) / 1e6,
                    "cookie": fields.get("sock_cookie"),
                }
            )
        elif event == "tcp_cong_state_set":
            family6 = fields.get("family") == "AF_INET6"
            src = fields["saddrv6"] if family6 else fields["saddr"]
            dst = fields["daddrv6"] if family6 else fields["daddr"]
            code = int(fields["cong_state"])
            states.append(
                {
                    "time": when,
                    "src": f"{src}:{fields['sport']}",
                    "dst": f"{dst}:{fields['dport']}",
                    "ca_state": code,
                    "state": CA_STATES.get(code, str(code)),
                }
            )
    probe_columns = [
        "time",
        "src",
        "dst",
        "data_len",
        "snd_nxt",
        "snd_una",
        "cwnd",
        "ssthresh",
        "snd_wnd",
        "rcv_wnd",
        "srtt",
        "cookie",
    ]
    return (
        pd.DataFrame(probes, columns=probe_columns),
        pd.DataFrame(states, columns=["time", "src", "dst", "ca_state", "state"]),
    )


def read_trace(path: str | os.PathLike[str], clock_offset: float = 0.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`parse_trace` of a (possibly gzip-compressed) file."""
    return parse_trace(read_text(path), clock_offset)


def probe_phases(probe: pd.DataFrame, ca_states: pd.DataFrame | None = None) -> pd.Series:
    """Congestion phase at each ``tcp_probe`` event of one socket.

    ``recovery`` while Linux's ca_state (last ``tcp_cong_state_set`` at or before the
    event, same socket) is CWR, Recovery or Loss; else ``slow_start`` when ssthresh is
    infinite or cwnd < ssthresh; else ``congestion_avoidance``. Without ``ca_states``
    (older kernels lack the tracepoint) only slow start / congestion avoidance are told
    apart, plus ``recovery`` when cwnd fell below the previous event's.
    """
    cwnd = probe["cwnd"].to_numpy(dtype=float)
    ssthresh = probe["ssthresh"].to_numpy(dtype=float)
    slow = np.isnan(ssthresh) | (cwnd < ssthresh)
    if ca_states is not None and not ca_states.empty:
        mine = ca_states[
            (ca_states["src"].isin(probe["src"].unique())) & (ca_states["dst"].isin(probe["dst"].unique()))
        ].sort_values("time")
        codes = mine["ca_state"].to_numpy()
        position = np.searchsorted(mine["time"].to_numpy(), probe["time"].to_numpy(), side="right") - 1
        current = np.where(position >= 0, codes[np.clip(position, 0, None)] if codes.size else 0, 0)
        recovering = np.isin(current, (2, 3, 4))
    else:
        recovering = np.zeros(len(probe), dtype=bool)
        recovering[1:] = cwnd[1:] < cwnd[:-1]
    states = np.where(recovering, "recovery", np.where(slow, "slow_start", "congestion_avoidance"))
    return pd.Series(states, index=probe.index, name="state")


def sender_probes(probe: pd.DataFrame, sender: str | None = None, peers: set[str] | None = None) -> pd.DataFrame:
    """The ``tcp_probe`` events of one sending socket: the connection from ``sender`` (default
    the connection whose ``snd_nxt`` advanced most: the one that sent the most data); with
    ``peers`` (``addr:port`` of the receiving sockets, e.g. one client's among many on the
    same server port) only the connections towards them. Connections are told apart by both
    ends: a server's sockets share its address and port."""
    sockets = probes_by_socket(probe, peers)
    if sender is not None:
        sockets = [events for events in sockets if events["src"].iloc[0] == sender]
    if not sockets:
        return probe.iloc[0:0].reset_index(drop=True)
    return max(sockets, key=_sent_bytes)


def _sent_bytes(events: pd.DataFrame) -> int:
    """How far ``snd_nxt`` advanced over a socket's events (32-bit wrap-around handled)."""
    values = events["snd_nxt"].to_numpy(dtype=np.int64)
    return int(np.sum(np.diff(values) % (1 << 32))) if values.size > 1 else 0


def probes_by_socket(probe: pd.DataFrame, peers: set[str] | None = None) -> list[pd.DataFrame]:
    """The ``tcp_probe`` events of every connection (``src``, ``dst``) that sent data, in the
    order they first appear: one series per socket, never mixed (the window, RTT and phase
    of one connection say nothing about another's); with ``peers``, only the connections
    towards those ``addr:port``."""
    if peers:
        probe = probe[probe["dst"].isin(peers)]
    if probe.empty:
        return []
    groups = [group.reset_index(drop=True) for _, group in probe.groupby(["src", "dst"], sort=False)]
    return [events for events in groups if _sent_bytes(events) > 0]


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class TcpSummary:
    """A TCP sender's congestion control over one connection (segments, bytes, seconds)."""

    source: str  # "ss" or "tcp_probe"
    samples: int
    start: float
    end: float
    cwnd_mean: float  # segments, time-weighted (sample and hold)
    cwnd_var: float
    cwnd_max: float
    cwnd_bytes_mean: float  # cwnd * mss (ss only; NaN from tcp_probe)
    srtt_mean: float
    phases: dict[str, float]
    app_limited: float  # share of samples flagged app_limited (ss only)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _active(frame: pd.DataFrame, column: str) -> tuple[float, float]:
    """First and last sample at which the counter ``column`` still changes."""
    values = frame[column].to_numpy(dtype=float)
    times = frame["time"].to_numpy(dtype=float)
    if values.size == 0:
        return math.nan, math.nan
    changed = np.flatnonzero(np.diff(values) != 0)
    end = times[changed[-1] + 1] if changed.size else times[-1]
    return float(times[0]), float(end)


def summarize_ss(samples: pd.DataFrame) -> TcpSummary:
    """cwnd statistics and phase shares of one connection's ``ss`` samples, over the
    samples from the first to the last one at which ``bytes_acked`` still grew."""
    start, end = _active(samples, "bytes_acked")
    phases = ss_phases(samples)
    cwnd_mean, cwnd_var = time_weighted_mean_var(samples["time"], samples["cwnd"], start, end)
    bytes_mean, _ = time_weighted_mean_var(samples["time"], samples["cwnd_bytes"], start, end)
    srtt_mean, _ = time_weighted_mean_var(samples["time"], samples["rtt"], start, end)
    app = state_shares(samples["time"], np.where(samples["app_limited"], "app", "cwnd"), start, end)
    return TcpSummary(
        "ss",
        len(samples),
        start,
        end,
        cwnd_mean,
        cwnd_var,
        float(samples["cwnd"].max()),
        bytes_mean,
        srtt_mean,
        {**{s: 0.0 for s in STATES}, **state_shares(samples["time"], phases.to_numpy(), start, end)},
        app.get("app", 0.0) if app else math.nan,
    )


def summarize_probe(probe: pd.DataFrame, ca_states: pd.DataFrame | None = None) -> TcpSummary:
    """The same from one socket's ``tcp_probe`` events, over the events from the first to
    the last one at which ``snd_una`` still advanced."""
    start, end = _active(probe, "snd_una")
    phases = probe_phases(probe, ca_states)
    cwnd_mean, cwnd_var = time_weighted_mean_var(probe["time"], probe["cwnd"], start, end)
    srtt_mean, _ = time_weighted_mean_var(probe["time"], probe["srtt"], start, end)
    return TcpSummary(
        "tcp_probe",
        len(probe),
        start,
        end,
        cwnd_mean,
        cwnd_var,
        float(probe["cwnd"].max()),
        math.nan,
        srtt_mean,
        {**{s: 0.0 for s in STATES}, **state_shares(probe["time"], phases.to_numpy(), start, end)},
        math.nan,
    )


def trace_clock_offset(meta: dict[str, Any] | None) -> float:
    """Epoch minus trace clock from a fixture/run ``meta`` dict (``mono_to_epoch``)."""
    return float((meta or {}).get("mono_to_epoch", 0.0))


__all__ = [
    "CA_STATES",
    "STATES",
    "TcpSummary",
    "connection",
    "connections",
    "parse_ss",
    "parse_ss_info",
    "parse_trace",
    "probe_phases",
    "probes_by_socket",
    "read_ss",
    "read_text",
    "read_trace",
    "sender_probes",
    "ss_phases",
    "summarize_probe",
    "summarize_ss",
    "trace_clock_offset",
]
