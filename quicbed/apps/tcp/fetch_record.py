"""The TCP client's record of one fetch (its JSON output): the layout before a run (the HTTP/3
client's keys and a few TCP ones), the transport summary over the connections' TCP_INFO,
object times turned into the record's offsets, and the verdict (``ok`` or the first
``error``). Both engines fill it in the same way (:mod:`quicbed.apps.tcp.python_engine`,
:mod:`quicbed.apps.tcp.curl`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from quicbed.apps.record import base_record
from quicbed.apps.tcp import tcpinfo
from quicbed.apps.tcp.settings import ClientSettings


def new_record(settings: ClientSettings) -> dict[str, Any]:
    """The result record, before the run fills it in: the HTTP/3 client's keys, plus
    ``engine``, ``curl_version``, ``connections``, ``cpu`` and ``timing``."""
    record = base_record("quicbed-tcp-client", settings)
    record.update(
        {
            "aioquic_version": None,
            "engine": settings.engine,
            "curl_version": None,
            "profile": settings.protocol,
            "knobs": {"http_version": settings.http, "parallel": settings.parallel, "client_congestion_control": None},
            "protocol": settings.protocol,
            "connections": 0,  # TCP connections opened
            "cpu": None,  # CPU seconds of the client process (or of curl)
            "timing": "exact",  # "approximate": curl engine, several objects
        }
    )
    return record


def _read_sysctl(name: str) -> str | None:
    try:
        return " ".join(Path("/proc/sys", name.replace(".", "/")).read_text().split())
    except OSError:
        return None


def socket_settings(buffer: int | None = None) -> dict[str, Any]:
    return {
        "tcp_rmem": _read_sysctl("net.ipv4.tcp_rmem"),
        "tcp_wmem": _read_sysctl("net.ipv4.tcp_wmem"),
        "congestion_control": _read_sysctl("net.ipv4.tcp_congestion_control"),
        "rcvbuf": buffer,
        "autotuning": buffer is None,
    }


def transport_summary(
    connections: Sequence[tcpinfo.TcpInfo], complete: bool, samples: int | None = None, interval: float | None = None
) -> dict[str, Any]:
    """Sums and extremes over this side's connections (the HTTP/3 record's names where they
    mean the same)."""

    def total(name: str) -> int | None:
        values = [getattr(c, name) for c in connections if getattr(c, name) is not None]
        return sum(values) if values else None

    sent, received = total("segs_out"), total("segs_in")
    data_sent, data_received = total("data_segs_out"), total("data_segs_in")
    ack_only = sent - data_sent if sent is not None and data_sent is not None else None
    main = max(connections, key=lambda c: c.bytes_received or 0, default=None)
    min_rtts = [c.min_rtt for c in connections if c.min_rtt]
    return {
        "packets_sent": sent,
        "packets_received": received,
        "data_packets_sent": data_sent,
        "data_packets_received": data_received,
        "ack_only_packets_sent": ack_only,
        "ack_only_per_data_packet_received": (
            ack_only / data_received if ack_only is not None and data_received else None
        ),
        "bytes_sent": total("bytes_sent"),
        "bytes_received": total("bytes_received"),
        "retransmits": total("total_retrans"),
        "packets_lost": None,  # a TCP receiver does not see the sender's losses
        "rtt_min": min(min_rtts) if min_rtts else None,
        "rtt_smoothed": main.rtt if main else None,
        "rcv_rtt": main.rcv_rtt if main else None,
        "cwnd": main.snd_cwnd if main else None,
        "congestion_control": main.congestion_control if main else None,
        "complete": complete,  # read when each connection ended (not an earlier sample)
        "samples": samples,
        "sample_interval": interval,
        "connections": [c.to_dict() for c in connections],
    }


def fill_times(record: dict[str, Any], objects: list[dict[str, Any]], origin: float, expected: int) -> None:
    """Objects (absolute monotonic times) -> the record's offsets and summary times."""
    requests = [o["start"] for o in objects if o["start"] is not None]
    first_bytes = [o["first_byte"] for o in objects if o["first_byte"] is not None]
    done = [o for o in objects if o["status"] == 200 and o["end"] is not None and "error" not in o]
    for item in objects:
        for key in ("start", "first_byte", "end"):
            if item[key] is not None:
                item[key] -= origin
    record["objects"] = objects
    record["objects_completed"] = len(done)
    record["bytes"] = sum(o["size"] for o in objects)
    if requests and first_bytes:
        record["ttfb"] = min(first_bytes) - min(requests)
    if requests and done and len(done) == expected:
        last = max(o["end"] for o in done) + origin
        record["completion_time"] = last - min(requests)
        record["total_time"] = last - origin


def judge(record: dict[str, Any], expected: int, wanted_version: str) -> None:
    """Set ``ok``/``error`` from the objects (unless an error is already set)."""
    if record["error"]:
        return
    failed = [o for o in record["objects"] if o["status"] != 200 or "error" in o]
    wrong = [o for o in record["objects"] if o.get("http_version") not in (None, wanted_version)]
    if failed:
        first = failed[0]
        record["error"] = first.get("error") or f"HTTP status {first['status']} for {first['path']}"
    elif record["objects_completed"] != expected:
        record["error"] = "not every object completed"
    elif wrong:
        record["error"] = f"asked for HTTP/{wanted_version}, got HTTP/{wrong[0]['http_version']} for {wrong[0]['path']}"
    else:
        record["ok"] = True
