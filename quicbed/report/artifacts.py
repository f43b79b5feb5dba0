"""The capture, qlog, tcp_probe and ``ss`` files of the runs, each read at most once per report."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from quicbed.analysis import metrics, qlog, series, tcpstate
from quicbed.analysis.packets import Packet, read_pcap
from quicbed.runner.analyse import client_sockets, sender_mss

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
    _records: dict[str, dict[str, Any]] = field(default_factory=dict)

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

    def run_record(self, folder: str) -> dict[str, Any]:
        """The run's run.json ({} when missing or unreadable), read once."""
        if folder not in self._records:
            path = self.path(folder, "run.json")
            try:
                value = json.loads(path.read_text(encoding="utf-8")) if path else {}
            except (OSError, json.JSONDecodeError):
                value = {}
            self._records[folder] = value if isinstance(value, dict) else {}
        return self._records[folder]

    def run_details(self, folder: str) -> dict[str, Any]:
        """The ``details`` of the run's run.json ({} when missing or unreadable)."""
        return self.run_record(folder).get("details") or {}

    def sender_series(self, folder: str) -> pd.DataFrame | None:
        """The sender's cwnd, bytes in flight, RTTs and pacing rate over time (epoch s), until
        the end of the transfer (quicbed.analysis.series): QUIC from the server qlog, TCP from
        the kernel's tcp_probe events or the ``ss`` samples; None without any (or when they
        cannot be read). Column ``source`` names the log."""
        try:
            frame, source = self._sender_series(folder)
        except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            self.problems.append(f"{folder}: the sender's state log cannot be read ({error}); passed over")
            return None
        if frame is None or frame.empty:
            return None
        return frame.assign(source=source)

    def _sender_series(self, folder: str) -> tuple[pd.DataFrame | None, str]:
        path = self.path(folder, *QLOG_NAMES)
        if path is not None:
            self.progress(f"reading {path.relative_to(self.root)}")
            try:
                trace = qlog.load_trace(path, "server")
            except ValueError:
                trace = qlog.load_trace(path)
            knobs = (self.record(folder) or {}).get("knobs") or {}
            return series.from_qlog(trace, pacing=knobs.get("pacing") is not False), "qlog"
        path = self.path(folder, "tcp_probe.txt.gz")
        record = self.record(folder)
        mss = sender_mss(record) if record else None
        if path is not None and record and mss:
            self.progress(f"reading {path.relative_to(self.root)}")
            offset = tcpstate.trace_clock_offset(self.run_details(folder).get("tcp_state"))
            probe, _ = tcpstate.read_trace(path, offset)
            return series.from_tcp_probe(tcpstate.sender_probes(probe, peers=client_sockets(record)), mss), "tcp_probe"
        path = self.path(folder, "ss.txt", "ss.txt.gz")
        if path is None:
            return None, ""
        self.progress(f"reading {path.relative_to(self.root)}")
        return series.from_ss(tcpstate.connection(tcpstate.read_ss(path), peers=client_sockets(record or {}))), "ss"

    def data_flow_count(self, folder: str) -> int:
        client = self.packets(folder, "client.pcap")
        return len(metrics.data_flows(client)) if client else 0
