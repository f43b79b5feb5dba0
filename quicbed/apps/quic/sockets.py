"""UDP sockets with large buffers for the QUIC endpoints.

A Python QUIC endpoint reads datagrams slower than a fast link delivers them in bursts; with
Linux's default 208 kB receive buffer the kernel drops datagrams that quicbed would then
count as network loss. Buffers are raised to 4 MiB by default: with SO_RCVBUFFORCE /
SO_SNDBUFFORCE when the process may (CAP_NET_ADMIN, e.g. root), else with SO_RCVBUF /
SO_SNDBUF, which the kernel silently caps at net.core.rmem_max / wmem_max. What was
granted is reported so that result records show it.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_BUFFER = 4 * 1024 * 1024
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)


@dataclass(frozen=True)
class BufferReport:
    """Socket buffer sizes asked for and granted (bytes usable, i.e. the kernel's value / 2)."""

    requested: int
    rcvbuf: int
    sndbuf: int
    forced: bool
    rmem_max: int | None
    wmem_max: int | None

    @property
    def capped(self) -> bool:
        return self.rcvbuf < self.requested or self.sndbuf < self.requested

    def warning(self) -> str | None:
        if not self.capped:
            return None
        return (
            f"socket buffers capped at rcvbuf={self.rcvbuf} sndbuf={self.sndbuf} bytes "
            f"(asked {self.requested}; net.core.rmem_max={self.rmem_max}, "
            f"wmem_max={self.wmem_max}); run as root or raise "
            f"sysctl net.core.rmem_max/wmem_max to avoid receive drops"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "capped": self.capped}


def _read_sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/net/core", name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def set_buffers(sock: socket.socket, size: int = DEFAULT_BUFFER) -> BufferReport:
    """Raise a socket's receive and send buffers to ``size`` bytes (as far as allowed)."""
    forced = True
    for force_option, option in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force_option, size)
        except OSError:
            forced = False
            sock.setsockopt(socket.SOL_SOCKET, option, size)
    # Linux doubles the value for bookkeeping and reports the doubled value.
    return BufferReport(
        requested=size,
        rcvbuf=sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2,
        sndbuf=sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2,
        forced=forced,
        rmem_max=_read_sysctl("rmem_max"),
        wmem_max=_read_sysctl("wmem_max"),
    )


def resolve(host: str, port: int, passive: bool = False) -> tuple[int, tuple[Any, ...]]:
    """(address family, socket address) of ``host``:``port`` for UDP, IPv4 first when a
    name has both (emulated networks are IPv4; "localhost" often lists ::1 first)."""
    flags = socket.AI_PASSIVE if passive else 0
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_DGRAM, flags=flags)
    if not infos:
        raise OSError(f"cannot resolve {host!r}")
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _, _, _, address = infos[0]
    return family, address


def bound_udp_socket(
    host: str, port: int, buffer_size: int = DEFAULT_BUFFER, family: int | None = None
) -> tuple[socket.socket, BufferReport]:
    """A non-blocking UDP socket bound to ``host``:``port`` with large buffers.

    ``host`` "" binds the wildcard of ``family`` (IPv4 unless given); "::" accepts IPv4 too.
    """
    if host == "" and family is not None:
        host = "::" if family == socket.AF_INET6 else "0.0.0.0"
    bind_family, address = resolve(host or "0.0.0.0", port, passive=True)
    sock = socket.socket(bind_family, socket.SOCK_DGRAM)
    try:
        if bind_family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        report = set_buffers(sock, buffer_size)
        sock.bind(address)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock, report


__all__ = ["BufferReport", "DEFAULT_BUFFER", "bound_udp_socket", "resolve", "set_buffers"]
