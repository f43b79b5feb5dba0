"""A UDP probe: numbered, timestamped datagrams at a set rate, and a receiver that logs them.

Used to measure what a link really does (loss, loss bursts, one-way delay, jitter, rate).
Sender and receiver run in namespaces of one host and share its clock, so the one-way
delay of each datagram is exact: receive time (kernel timestamp, SO_TIMESTAMPNS) minus
send time (read just before sendto).

    python -m quicbed.apps.udpprobe recv --port 5999 --out probe.csv --idle-timeout 3
    python -m quicbed.apps.udpprobe send --dest 10.0.0.2 --port 5999 --count 5000 --rate 2000
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
from pathlib import Path

HEADER = struct.Struct("!Iq")  # sequence number, send time (ns, CLOCK_REALTIME)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
BUFFER_BYTES = 8 * 1024 * 1024


def _big_buffers(sock: socket.socket) -> None:
    for option, force in ((socket.SO_RCVBUF, 33), (socket.SO_SNDBUF, 32)):  # SO_*BUFFORCE as root
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, BUFFER_BYTES)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, option, BUFFER_BYTES)


def send(dest: str, port: int, count: int, rate: float, size: int) -> int:
    """Send ``count`` datagrams of ``size`` bytes at ``rate`` per second (paced in 1 ms batches)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _big_buffers(sock)
    padding = bytes(max(0, size - HEADER.size))
    start = time.monotonic()
    for sequence in range(count):
        due = start + sequence / rate
        delay = due - time.monotonic()
        if delay > 0.001:
            time.sleep(delay)
        while True:
            try:
                sock.sendto(HEADER.pack(sequence, time.time_ns()) + padding, (dest, port))
                break
            except BlockingIOError:  # pragma: no cover - only when the local queue is full
                time.sleep(0.0005)
    return count


def receive(port: int, out: Path, idle_timeout: float, ready_file: Path | None = None) -> int:
    """Log 'sequence,sent_ns,received_ns,bytes' per datagram until ``idle_timeout`` s of silence
    after the first one (the receiver may be started long before the sender)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _big_buffers(sock)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    if ready_file:
        ready_file.write_text("ready\n")
    received = 0
    with out.open("w") as log:
        log.write("sequence,sent_ns,received_ns,bytes\n")
        while True:
            try:
                data, ancillary, _flags, _address = sock.recvmsg(65535, 64)
            except TimeoutError:
                return received
            arrival = time.time_ns()
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = struct.unpack("qq", value[:16])
                    arrival = seconds * 1_000_000_000 + nanoseconds
            sequence, sent = HEADER.unpack_from(data)
            log.write(f"{sequence},{sent},{arrival},{len(data)}\n")
            received += 1
            sock.settimeout(idle_timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="udpprobe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    sender = sub.add_parser("send")
    sender.add_argument("--dest", required=True)
    sender.add_argument("--port", type=int, default=5999)
    sender.add_argument("--count", type=int, default=1000)
    sender.add_argument("--rate", type=float, default=1000.0, help="datagrams per second")
    sender.add_argument("--size", type=int, default=200, help="UDP payload bytes")
    receiver = sub.add_parser("recv")
    receiver.add_argument("--port", type=int, default=5999)
    receiver.add_argument("--out", type=Path, required=True)
    receiver.add_argument("--idle-timeout", type=float, default=3.0)
    receiver.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    if args.mode == "send":
        send(args.dest, args.port, args.count, args.rate, args.size)
    else:
        receive(args.port, args.out, args.idle_timeout, args.ready_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
