"""The capture, qlog, tcp_probe and ``ss`` files of the runs, each read at most once per report."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quicbed.analysis import metrics, qlog, tcpstate
from quicbed.analysis.packets import Packet, read_pcap
from quicbed.runner.analyse import sender_mss

QLOG_NAMES = ("server.qlog", "server.qlog.gz", "server.sqlog")
CLIENT_RECORDS = ("client.json", "curl.json")
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class RunFiles:
    """Reads the artifacts of run folders lazily and keeps what it read."""

    root: Path
    progress: Progress = _quiet
    problems: list[str] = field(default_factory=list)  # artifacts that could not be read, and why
    _packets: dict[Path, list[Packet] | None] = field(default_factory=dict)

    def path(self, folder: str, *names: str) -> Path | None:
        """The first of ``names`` that exists in the run folder ``folder`` (relative to root)."""
        for name in names:
            candidate = self.root / folder / name
            if candidate.is_file() and candidate.stat().st_size > 0:
                return candidate
        return None

    def packets(self, folder: str, name: str) -> list[Packet] | None:
        path = self.path(folder, name)
        if path is None:
            return None
        if path not in self._packets:
            self.progress(f"reading {path.relative_to(self.root)}")
            try:
                self._packets[path] = read_pcap(path)
            except (OSError, ValueError) as error:  # PcapError is a ValueError
                self._unreadable(path, error)
                self._packets[path] = None
        return self._packets[path]

    def _unreadable(self, path: Path, error: Exception) -> None:
        self.problems.append(f"{path.relative_to(self.root)} cannot be read ({error}); passed over")

    def record(self, folder: str) -> dict[str, Any] | None:
        path = self.path(folder, *CLIENT_RECORDS)
        if path is None:
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def cwnd_series(self, folder: str) -> pd.DataFrame | None:
        """cwnd (bytes) over time (s from the first sample) of the sender, until the end of the
        transfer: QUIC from the server qlog, TCP from the kernel's tcp_probe events (cwnd x the
        MSS the client saw) or the ``ss`` samples; None without any (or when they cannot be read)."""
        try:
            return self._cwnd_series(folder)
        except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            self.problems.append(f"{folder}: congestion-window log cannot be read ({error}); passed over")
            return None

    def _cwnd_series(self, folder: str) -> pd.DataFrame | None:
        path = self.path(folder, *QLOG_NAMES)
        if path is not None:
            self.progress(f"reading {path.relative_to(self.root)}")
            try:
                trace = qlog.load_trace(path, "server")
            except ValueError:
                trace = qlog.load_trace(path)
            frame = qlog.metrics_frame(trace)
            if frame.empty:
                return None
            _, end = qlog.transfer_window(frame)
            frame = frame[frame["time"] <= end]
            return pd.DataFrame({"time": frame["time"] - frame["time"].iloc[0], "cwnd": frame["cwnd"],
                                 "source": "qlog"})
        probe = self._probe_series(folder)
        if probe is not None:
            return probe
        path = self.path(folder, "ss.txt", "ss.txt.gz")
        if path is None:
            return None
        self.progress(f"reading {path.relative_to(self.root)}")
        samples = tcpstate.connection(tcpstate.read_ss(path))
        if samples.empty:
            return None
        acked = samples["bytes_acked"].to_numpy(dtype=float)
        grew = np.flatnonzero(np.diff(acked) > 0)
        last = grew[-1] + 1 if grew.size else len(samples) - 1  # the sample after the last ACKed growth
        samples = samples.iloc[: last + 1]
        return pd.DataFrame({"time": samples["time"] - samples["time"].iloc[0],
                             "cwnd": samples["cwnd_bytes"], "source": "ss"})

    def _probe_series(self, folder: str) -> pd.DataFrame | None:
        path = self.path(folder, "tcp_probe.txt.gz")
        record = self.record(folder)
        mss = sender_mss(record) if record else None
        if path is None or not mss:
            return None
        self.progress(f"reading {path.relative_to(self.root)}")
        probe, _ = tcpstate.read_trace(path)
        probe = tcpstate.sender_probes(probe)
        if probe.empty:
            return None
        advanced = np.flatnonzero(np.diff(probe["snd_una"].to_numpy(dtype=float)) > 0)
        probe = probe.iloc[: (advanced[-1] + 2 if advanced.size else len(probe))]
        return pd.DataFrame({"time": probe["time"] - probe["time"].iloc[0], "cwnd": probe["cwnd"] * mss,
                             "source": "tcp_probe"})

    def data_flow_count(self, folder: str) -> int:
        client = self.packets(folder, "client.pcap")
        return len(metrics.data_flows(client)) if client else 0
