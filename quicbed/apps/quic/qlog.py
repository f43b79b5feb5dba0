"""qlog output for quicbed's endpoints: a filtered logger that keeps what analysis needs.

aioquic's ``QuicFileLogger`` keeps every event of a connection in memory (frames of every
packet, HTTP/3 frames...) and halves throughput on bulk transfers. The filtered logger keeps:

* ``recovery:metrics_updated`` (cwnd, bytes in flight, ssthresh, RTTs),
* ``recovery:packet_lost``,
* ``recovery:congestion_state_updated``, derived here from the metrics because aioquic does
  not log it: ``slow_start`` while there is no ssthresh (or cwnd < ssthresh),
  ``recovery`` from a cwnd decrease until cwnd grows again, else ``congestion_avoidance``,
* ``transport:packet_sent``/``packet_received`` of packets that carry an ACK frame, reduced
  to packet number/type, the ACK ranges and delay, and ``ack_only`` (no frame but ACK and
  PADDING),
* ``transport:parameters_set`` (twice per connection).

Everything else is dropped as it is logged; frames that are never kept are encoded as
shared constants so aioquic spends little time describing them. The output is qlog 0.3
JSON like aioquic's, one file per connection and vantage point,
``<ODCID>_<client|server>.qlog``, written when the connection ends (or at
:meth:`QlogWriter.close`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from time import time as _wall_clock
from typing import Any

from aioquic.quic.logger import QLOG_VERSION, QuicLogger, QuicLoggerTrace

QLOG_MODES = ("off", "filtered", "full")

_FRAME_STREAM = {"frame_type": "stream"}
_FRAME_CRYPTO = {"frame_type": "crypto"}
_FRAME_PADDING = {"frame_type": "padding"}
_FRAME_PING = {"frame_type": "ping"}
_FRAME_LIMIT = {"frame_type": "connection_limit"}
_FRAME_MAX_STREAM_DATA = {"frame_type": "max_stream_data"}
_FRAME_DATAGRAM = {"frame_type": "datagram"}
_H3_FRAME = {"frame": {"frame_type": "dropped"}}
_ACK_ONLY_FRAMES = frozenset({"ack", "padding"})


class FilteredQuicLoggerTrace(QuicLoggerTrace):
    """A trace that keeps only the events listed in the module docstring."""

    def __init__(self, *, is_client: bool, odcid: bytes) -> None:
        super().__init__(is_client=is_client, odcid=odcid)
        self._pending_received: tuple[float, dict[str, Any]] | None = None
        self._congestion_state: str | None = None
        self._last_cwnd: int | None = None
        self._last_ssthresh: int | None = None

    def encode_time(self, seconds: float) -> float:
        """Milliseconds to the microsecond: shorter files, no lost precision (and much
        cheaper than round())."""
        return int(seconds * 1_000_000) / 1000

    # Frames that are never kept: cheap constants instead of dicts built per packet.
    def encode_stream_frame(self, frame: Any, stream_id: int) -> dict:
        return _FRAME_STREAM

    def encode_crypto_frame(self, frame: Any) -> dict:
        return _FRAME_CRYPTO

    def encode_padding_frame(self) -> dict:
        return _FRAME_PADDING

    def encode_ping_frame(self) -> dict:
        return _FRAME_PING

    def encode_connection_limit_frame(self, frame_type: int, maximum: int) -> dict:
        return _FRAME_LIMIT

    def encode_max_stream_data_frame(self, maximum: int, stream_id: int) -> dict:
        return _FRAME_MAX_STREAM_DATA

    def encode_datagram_frame(self, length: int) -> dict:
        return _FRAME_DATAGRAM

    def encode_http3_data_frame(self, length: int, stream_id: int) -> dict:
        return _H3_FRAME

    def encode_http3_headers_frame(self, length: int, headers: Any, stream_id: int) -> dict:
        return _H3_FRAME

    def log_event(self, *, category: str, event: str, data: dict) -> None:
        # Called for every packet sent and received: keep the common paths short.
        if event == "metrics_updated":
            now = int(_wall_clock() * 1_000_000) / 1000
            self._events.append({"data": data, "name": "recovery:metrics_updated", "time": now})
            if (
                data.get("cwnd") != self._last_cwnd
                or data.get("ssthresh") != self._last_ssthresh
                or self._congestion_state == "recovery"
            ):
                self._track_congestion_state(data, now)
        elif event == "packet_received":
            # aioquic fills this event's frame list after logging it: reduce it later.
            if self._pending_received is not None:
                self._flush_received()
            self._pending_received = (_wall_clock(), data)
        elif event == "packet_sent":
            if self._pending_received is not None:
                self._flush_received()
            self._append_ack_event("transport:packet_sent", _wall_clock(), data)
        elif event in ("packet_lost", "parameters_set") and category in ("recovery", "transport"):
            self._append(category, event, data)

    def to_dict(self) -> dict[str, Any]:
        self._flush_received()
        return super().to_dict()

    # -- helpers

    def _append(self, category: str, event: str, data: dict) -> None:
        self._events.append({"data": data, "name": f"{category}:{event}", "time": self.encode_time(_wall_clock())})

    def _flush_received(self) -> None:
        if self._pending_received is not None:
            when, data = self._pending_received
            self._pending_received = None
            self._append_ack_event("transport:packet_received", when, data)

    def _append_ack_event(self, name: str, wall_clock: float, data: dict) -> None:
        frames = data.get("frames") or ()
        acks = [frame for frame in frames if frame["frame_type"] == "ack"]
        if not acks:
            return
        when = int(wall_clock * 1_000_000) / 1000
        header = data.get("header", {})
        self._events.append(
            {
                "data": {
                    "header": {"packet_number": header.get("packet_number"), "packet_type": header.get("packet_type")},
                    "frames": [
                        {
                            "frame_type": "ack",
                            "acked_ranges": ack.get("acked_ranges"),
                            "ack_delay": ack.get("ack_delay"),
                        }
                        for ack in acks
                    ],
                    "ack_only": all(frame.get("frame_type") in _ACK_ONLY_FRAMES for frame in frames),
                },
                "name": name,
                "time": when,
            }
        )

    def _track_congestion_state(self, data: dict, when: float) -> None:
        cwnd = data.get("cwnd")
        if cwnd is None:
            return
        ssthresh = data.get("ssthresh")
        last = self._last_cwnd
        if ssthresh is None:
            state = "slow_start"
        elif last is not None and cwnd < last:
            state = "recovery"
        elif self._congestion_state == "recovery" and last is not None and cwnd == last:
            state = "recovery"
        elif cwnd < ssthresh:
            state = "slow_start"
        else:
            state = "congestion_avoidance"
        self._last_cwnd = cwnd
        self._last_ssthresh = ssthresh
        if state != self._congestion_state:
            event = {"new": state, "trigger": "quicbed_derived"}
            if self._congestion_state is not None:
                event["old"] = self._congestion_state
            self._events.append({"data": event, "name": "recovery:congestion_state_updated", "time": when})
            self._congestion_state = state


class QlogWriter(QuicLogger):
    """Writes one qlog file per trace, ``<ODCID>_<client|server>.qlog``, in ``directory``.

    ``filtered=True`` uses :class:`FilteredQuicLoggerTrace`; ``False`` keeps every event
    like aioquic's ``QuicFileLogger`` (for debugging and for overhead comparisons).
    """

    def __init__(self, directory: str | os.PathLike[str], *, filtered: bool = True) -> None:
        super().__init__()
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise ValueError(f"qlog directory {self.directory} does not exist")
        self.filtered = filtered
        self.written: list[Path] = []

    def start_trace(self, is_client: bool, odcid: bytes) -> QuicLoggerTrace:
        trace_class = FilteredQuicLoggerTrace if self.filtered else QuicLoggerTrace
        trace = trace_class(is_client=is_client, odcid=odcid)
        self._traces.append(trace)
        return trace

    def end_trace(self, trace: QuicLoggerTrace) -> None:
        if trace not in self._traces:
            raise ValueError("QuicLoggerTrace does not belong to this QlogWriter")
        trace_dict = trace.to_dict()
        vantage = trace_dict.get("vantage_point", {}).get("type", "unknown")
        path = self.directory / f"{trace_dict['common_fields']['ODCID']}_{vantage}.qlog"
        document = {"qlog_format": "JSON", "qlog_version": QLOG_VERSION, "traces": [trace_dict]}
        # json.dumps runs the C encoder; json.dump would encode in pure Python, ~5x slower.
        text = json.dumps(document, separators=(",", ":"))
        with open(path, "w", encoding="utf-8") as output:
            output.write(text)
        self._traces.remove(trace)
        self.written.append(path)

    def close(self) -> list[Path]:
        """Write the traces of connections that have not ended yet (shutdown)."""
        for trace in list(self._traces):
            self.end_trace(trace)
        return self.written


def make_qlog_writer(directory: str | os.PathLike[str] | None, mode: str = "filtered") -> QlogWriter | None:
    """The logger for ``--qlog-dir``/``--qlog-mode`` (None when off)."""
    if mode not in QLOG_MODES:
        raise ValueError(f"qlog mode must be one of {', '.join(QLOG_MODES)}")
    if directory is None or mode == "off":
        return None
    Path(directory).mkdir(parents=True, exist_ok=True)
    return QlogWriter(directory, filtered=(mode == "filtered"))


def read_events(path: str | os.PathLike[str], names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The events of a (single-trace) qlog file, optionally only those named."""
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    wanted = set(names) if names is not None else None
    events: list[dict[str, Any]] = []
    for trace in document.get("traces", []):
        for event in trace.get("events", []):
            if wanted is None or event.get("name") in wanted:
                events.append(event)
    return events


__all__ = ["FilteredQuicLoggerTrace", "QLOG_MODES", "QlogWriter", "make_qlog_writer", "read_events"]
