"""TCP_INFO of the TCP sockets of the current network namespace, over netlink (sock_diag).

This is what ``ss -tin`` shows (``ss`` asks the kernel the same way), read without starting
a process, so it can be sampled every few milliseconds at negligible cost. Run it in a
node's namespace::

    python -m quicbed.apps.tcp.tcpinfo --port 8443 --interval 0.01 --duration 30 --output cwnd.jsonl

writes one JSON line per sample and connection (cwnd, RTT, retransmits, bytes, ...): the
"periodic ``ss -ti``" congestion-window trace of a TCP sender. In Python,
:func:`snapshot` returns :class:`TcpInfo` records for the sockets matching a filter and
:class:`Sampler` keeps the last value of every connection it saw (the TCP client uses it
for its record's ``transport``).

Only fields up to ``tcpi_snd_wnd`` are decoded (Linux >= 5.4); older kernels return a
shorter struct and the missing fields are None.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2
INET_DIAG_CONG = 4
ALL_STATES = 0xFFFFFFFF
TCP_STATES = {
    1: "ESTABLISHED",
    2: "SYN_SENT",
    3: "SYN_RECV",
    4: "FIN_WAIT1",
    5: "FIN_WAIT2",
    6: "TIME_WAIT",
    7: "CLOSE",
    8: "CLOSE_WAIT",
    9: "LAST_ACK",
    10: "LISTEN",
    11: "CLOSING",
}
CA_STATES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}

_NLMSGHDR = struct.Struct("=IHHII")
_REQUEST = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_SOCKID = struct.Struct("!HH16s16s")  # ports and addresses are network order
_SOCKID_TAIL = struct.Struct("=I8s")  # interface, cookie
_DIAG_MSG = struct.Struct("=BBBB")  # family, state, timer, retrans
_DIAG_MSG_TAIL = struct.Struct("=IIIII")  # expires, rqueue, wqueue, uid, inode
_RTATTR = struct.Struct("=HH")

# struct tcp_info (include/uapi/linux/tcp.h): (name, format) in order, after 8 bytes of u8s.
_TCP_INFO_FIELDS: tuple[tuple[str, str], ...] = (
    ("rto", "I"),
    ("ato", "I"),
    ("snd_mss", "I"),
    ("rcv_mss", "I"),
    ("unacked", "I"),
    ("sacked", "I"),
    ("lost", "I"),
    ("retrans", "I"),
    ("fackets", "I"),
    ("last_data_sent", "I"),
    ("last_ack_sent", "I"),
    ("last_data_recv", "I"),
    ("last_ack_recv", "I"),
    ("pmtu", "I"),
    ("rcv_ssthresh", "I"),
    ("rtt", "I"),
    ("rttvar", "I"),
    ("snd_ssthresh", "I"),
    ("snd_cwnd", "I"),
    ("advmss", "I"),
    ("reordering", "I"),
    ("rcv_rtt", "I"),
    ("rcv_space", "I"),
    ("total_retrans", "I"),
    ("pacing_rate", "Q"),
    ("max_pacing_rate", "Q"),
    ("bytes_acked", "Q"),
    ("bytes_received", "Q"),
    ("segs_out", "I"),
    ("segs_in", "I"),
    ("notsent_bytes", "I"),
    ("min_rtt", "I"),
    ("data_segs_in", "I"),
    ("data_segs_out", "I"),
    ("delivery_rate", "Q"),
    ("busy_time", "Q"),
    ("rwnd_limited", "Q"),
    ("sndbuf_limited", "Q"),
    ("delivered", "I"),
    ("delivered_ce", "I"),
    ("bytes_sent", "Q"),
    ("bytes_retrans", "Q"),
    ("dsack_dups", "I"),
    ("reord_seen", "I"),
    ("rcv_ooopack", "I"),
    ("snd_wnd", "I"),
)
_TCP_INFO_HEAD = struct.Struct("=BBBBBBBB")


def _layout() -> list[tuple[str, struct.Struct, int]]:
    offset, fields = _TCP_INFO_HEAD.size, []
    for name, kind in _TCP_INFO_FIELDS:
        packer = struct.Struct("=" + kind)
        # u64 fields are naturally aligned in the kernel struct
        if packer.size == 8 and offset % 8:
            offset += 8 - offset % 8
        fields.append((name, packer, offset))
        offset += packer.size
    return fields


_LAYOUT = _layout()


@dataclass
class TcpInfo:
    """One socket's TCP_INFO. Times in seconds (the kernel's microseconds / 1e6), the
    congestion window in segments (``cwnd_bytes`` = cwnd * mss), rates in bytes/s."""

    local: str
    local_port: int
    remote: str
    remote_port: int
    state: str
    congestion_control: str | None
    ca_state: str | None
    retransmits: int | None  # tcpi_retransmits: consecutive RTO retransmissions now
    rto: float | None
    rtt: float | None  # smoothed RTT
    rttvar: float | None
    min_rtt: float | None
    rcv_rtt: float | None
    snd_mss: int | None
    rcv_mss: int | None
    snd_cwnd: int | None
    snd_ssthresh: int | None
    unacked: int | None
    sacked: int | None
    lost: int | None
    retrans: int | None
    total_retrans: int | None
    reordering: int | None
    pacing_rate: int | None
    delivery_rate: int | None
    bytes_acked: int | None
    bytes_received: int | None
    bytes_sent: int | None
    bytes_retrans: int | None
    segs_out: int | None
    segs_in: int | None
    data_segs_out: int | None
    data_segs_in: int | None
    notsent_bytes: int | None
    rcv_space: int | None
    snd_wnd: int | None
    busy_time: float | None
    rwnd_limited: float | None
    sndbuf_limited: float | None
    delivered: int | None
    dsack_dups: int | None
    reord_seen: int | None
    rcv_ooopack: int | None
    rqueue: int = 0
    wqueue: int = 0
    inode: int = 0

    @property
    def key(self) -> tuple[str, int, str, int]:
        return (self.local, self.local_port, self.remote, self.remote_port)

    @property
    def cwnd_bytes(self) -> int | None:
        if self.snd_cwnd is None or self.snd_mss is None:
            return None
        return self.snd_cwnd * self.snd_mss

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cwnd_bytes": self.cwnd_bytes}


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(raw[:4]))
    return str(ipaddress.IPv6Address(raw[:16]))


def decode_tcp_info(data: bytes) -> dict[str, Any]:
    """The fields of a ``struct tcp_info`` (as many as ``data`` holds), raw kernel units."""
    values: dict[str, Any] = {}
    if len(data) >= _TCP_INFO_HEAD.size:
        state, ca_state, retransmits, _probes, _backoff, _options, _wscale, _flags = _TCP_INFO_HEAD.unpack_from(data)
        values.update(state=state, ca_state=ca_state, retransmits=retransmits)
    for name, packer, offset in _LAYOUT:
        if offset + packer.size > len(data):
            values[name] = None
        else:
            values[name] = packer.unpack_from(data, offset)[0]
    return values


def _micro(value: int | None) -> float | None:
    return None if value is None else value / 1e6


def build(
    info: dict[str, Any],
    *,
    local: str,
    local_port: int,
    remote: str,
    remote_port: int,
    state: str | None = None,
    congestion_control: str | None = None,
    rqueue: int = 0,
    wqueue: int = 0,
    inode: int = 0,
) -> TcpInfo:
    """A :class:`TcpInfo` from decoded ``struct tcp_info`` fields (:func:`decode_tcp_info`)."""
    get = info.get
    code, ca_code = get("state"), get("ca_state")  # None: not in ``info`` (data too short)
    if state is None:
        state = str(code) if code is None else TCP_STATES.get(code, str(code))
    return TcpInfo(
        local=local,
        local_port=local_port,
        remote=remote,
        remote_port=remote_port,
        state=state,
        congestion_control=congestion_control,
        ca_state=None if ca_code is None else CA_STATES.get(ca_code),
        retransmits=get("retransmits"),
        rto=_micro(get("rto")),
        rtt=_micro(get("rtt")),
        rttvar=_micro(get("rttvar")),
        min_rtt=_micro(get("min_rtt")),
        rcv_rtt=_micro(get("rcv_rtt")),
        snd_mss=get("snd_mss"),
        rcv_mss=get("rcv_mss"),
        snd_cwnd=get("snd_cwnd"),
        snd_ssthresh=get("snd_ssthresh"),
        unacked=get("unacked"),
        sacked=get("sacked"),
        lost=get("lost"),
        retrans=get("retrans"),
        total_retrans=get("total_retrans"),
        reordering=get("reordering"),
        pacing_rate=get("pacing_rate"),
        delivery_rate=get("delivery_rate"),
        bytes_acked=get("bytes_acked"),
        bytes_received=get("bytes_received"),
        bytes_sent=get("bytes_sent"),
        bytes_retrans=get("bytes_retrans"),
        segs_out=get("segs_out"),
        segs_in=get("segs_in"),
        data_segs_out=get("data_segs_out"),
        data_segs_in=get("data_segs_in"),
        notsent_bytes=get("notsent_bytes"),
        rcv_space=get("rcv_space"),
        snd_wnd=get("snd_wnd"),
        busy_time=_micro(get("busy_time")),
        rwnd_limited=_micro(get("rwnd_limited")),
        sndbuf_limited=_micro(get("sndbuf_limited")),
        delivered=get("delivered"),
        dsack_dups=get("dsack_dups"),
        reord_seen=get("reord_seen"),
        rcv_ooopack=get("rcv_ooopack"),
        rqueue=rqueue,
        wqueue=wqueue,
        inode=inode,
    )


def from_raw(
    raw: bytes, *, local: tuple[Any, ...], remote: tuple[Any, ...], congestion_control: str | None = None
) -> TcpInfo:
    """A :class:`TcpInfo` from ``getsockopt(IPPROTO_TCP, TCP_INFO)`` on one's own socket."""
    return build(
        decode_tcp_info(raw),
        local=str(local[0]),
        local_port=int(local[1]),
        remote=str(remote[0]),
        remote_port=int(remote[1]),
        congestion_control=congestion_control,
    )


def _parse_message(payload: bytes) -> TcpInfo | None:
    family, state, _timer, _retrans = _DIAG_MSG.unpack_from(payload, 0)
    offset = _DIAG_MSG.size
    sport, dport, src, dst = _SOCKID.unpack_from(payload, offset)
    offset += _SOCKID.size + _SOCKID_TAIL.size
    _expires, rqueue, wqueue, _uid, inode = _DIAG_MSG_TAIL.unpack_from(payload, offset)
    offset += _DIAG_MSG_TAIL.size
    info: dict[str, Any] = {}
    congestion = None
    while offset + _RTATTR.size <= len(payload):
        length, kind = _RTATTR.unpack_from(payload, offset)
        if length < _RTATTR.size:
            break
        body = payload[offset + _RTATTR.size : offset + length]
        if kind == INET_DIAG_INFO:
            info = decode_tcp_info(body)
        elif kind == INET_DIAG_CONG:
            congestion = body.split(b"\0", 1)[0].decode(errors="replace")
        offset += (length + 3) & ~3
    return build(
        info,
        local=_address(family, src),
        local_port=sport,
        remote=_address(family, dst),
        remote_port=dport,
        state=TCP_STATES.get(state, str(state)),
        congestion_control=congestion,
        rqueue=rqueue,
        wqueue=wqueue,
        inode=inode,
    )


@dataclass(frozen=True)
class Filter:
    """Which sockets to report: any field left None matches everything."""

    port: int | None = None  # local or remote port
    local_port: int | None = None
    remote_port: int | None = None
    remote: str | None = None
    states: tuple[str, ...] | None = (
        "ESTABLISHED",
        "FIN_WAIT1",
        "FIN_WAIT2",
        "CLOSE_WAIT",
        "LAST_ACK",
        "CLOSING",
        "SYN_SENT",
        "SYN_RECV",
    )

    def matches(self, info: TcpInfo) -> bool:
        if self.port is not None and self.port not in (info.local_port, info.remote_port):
            return False
        if self.local_port is not None and info.local_port != self.local_port:
            return False
        if self.remote_port is not None and info.remote_port != self.remote_port:
            return False
        if self.remote is not None and info.remote != self.remote:
            return False
        return self.states is None or info.state in self.states


class DiagSocket:
    """A netlink sock_diag socket of the namespace it was opened in (reusable)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        self.sock.bind((0, 0))
        self.sequence = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> DiagSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dump(self, family: int = socket.AF_INET) -> list[TcpInfo]:
        """Every TCP socket of ``family`` with its TCP_INFO and congestion control name."""
        self.sequence += 1
        extensions = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1))
        body = (
            _REQUEST.pack(family, socket.IPPROTO_TCP, extensions, 0, ALL_STATES)
            + _SOCKID.pack(0, 0, bytes(16), bytes(16))
            + _SOCKID_TAIL.pack(0, bytes(8))
        )
        header = _NLMSGHDR.pack(
            _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, self.sequence, 0
        )
        self.sock.send(header + body)
        found: list[TcpInfo] = []
        while True:
            data = self.sock.recv(1 << 20)
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, kind, _flags, sequence, _pid = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size:
                    return found
                payload = data[offset + _NLMSGHDR.size : offset + length]
                offset += (length + 3) & ~3
                if sequence != self.sequence:
                    continue
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    error = struct.unpack_from("=i", payload)[0]
                    if error:
                        raise OSError(-error, os.strerror(-error))
                    return found
                if kind == SOCK_DIAG_BY_FAMILY:
                    parsed = _parse_message(payload)
                    if parsed is not None:
                        found.append(parsed)
            if not data:
                return found


def snapshot(match: Filter | None = None, families: Sequence[int] = (socket.AF_INET,)) -> list[TcpInfo]:
    """TCP_INFO of the sockets of this namespace that match ``match``."""
    match = match or Filter()
    with DiagSocket() as diag:
        return [info for family in families for info in diag.dump(family) if match.matches(info)]


class Sampler:
    """Samples matching sockets every ``interval`` seconds in a thread; keeps the last sample
    of every connection (``last``) and, optionally, writes every sample as a JSON line."""

    def __init__(
        self, match: Filter, interval: float = 0.02, output: Path | None = None, origin: float | None = None
    ) -> None:
        self.match = match
        self.interval = interval
        self.output = output
        self.origin = time.monotonic() if origin is None else origin
        self.last: dict[tuple[str, int, str, int], TcpInfo] = {}
        self.first_seen: dict[tuple[str, int, str, int], float] = {}
        self._taken: dict[tuple[str, int, str, int], float] = {}
        self._lock = threading.Lock()
        self.samples = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tcpinfo-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def sample_once(self, diag: DiagSocket, log: Any = None) -> set[tuple[str, int, str, int]]:
        """One dump (may run in several threads with their own DiagSocket: a sample never
        replaces a newer one); returns the connections it found."""
        taken = time.monotonic()
        now = taken - self.origin
        wall = time.time()
        found = [info for info in diag.dump() if self.match.matches(info)]
        with self._lock:
            for info in found:
                if taken >= self._taken.get(info.key, float("-inf")):
                    self.last[info.key] = info
                    self._taken[info.key] = taken
                self.first_seen.setdefault(info.key, now)
                if log is not None:
                    log.write(json.dumps({"t": now, "time": wall, **info.to_dict()}) + "\n")
            self.samples += 1
        return {info.key for info in found}

    def _loop(self) -> None:
        log = open(self.output, "a", encoding="utf-8") if self.output else None  # noqa: SIM115
        try:
            with DiagSocket() as diag:
                while not self._stop.is_set():
                    self.sample_once(diag, log)
                    self._stop.wait(self.interval)
                self.sample_once(diag, log)
        except OSError as error:
            self.error = str(error)
        finally:
            if log is not None:
                log.close()

    def stop(self) -> dict[tuple[str, int, str, int], TcpInfo]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.last

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.tcp.tcpinfo", description="TCP_INFO of this namespace's TCP sockets."
    )
    parser.add_argument("--port", type=int, help="local or remote port")
    parser.add_argument("--remote", help="remote address")
    parser.add_argument("--interval", type=float, default=None, help="sample every this many seconds (default: once)")
    parser.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help="with --interval: stop after this many seconds (SIGINT/SIGTERM stop earlier)",
    )
    parser.add_argument("--output", type=Path, help="JSON lines file (default stdout)")
    parser.add_argument("--all-states", action="store_true", help="include LISTEN, TIME_WAIT")
    args = parser.parse_args(argv)
    match = Filter(port=args.port, remote=args.remote, states=None if args.all_states else Filter.states)
    if args.interval is None:
        text = "".join(json.dumps(i.to_dict()) + "\n" for i in snapshot(match))
        if args.output:
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    import signal

    sampler = Sampler(match, args.interval, args.output or Path("/dev/stdout"))
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    sampler.start()
    done.wait(args.duration)
    sampler.stop()
    if sampler.error:
        print(f"error: {sampler.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
