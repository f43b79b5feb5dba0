"""What the HTTP/1.1 and HTTP/2 client is asked to fetch, and how: shared by its two
engines (:mod:`quicbed.apps.tcp.client`'s own, and :mod:`quicbed.apps.tcp.curl`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quicbed import __version__
from quicbed.apps.record import RequestSettings
from quicbed.errors import QuicbedError

USER_AGENT = f"quicbed/{__version__}"
PROTOCOLS = {"1.1": "http/1.1", "2": "h2", "3": "h3"}
ENGINES = ("python", "curl")
DEFAULT_TCPINFO_INTERVAL = 0.05


@dataclass(kw_only=True)
class ClientSettings(RequestSettings):
    http: str = "2"  # "1.1", "2" or "3" (3: curl engine with an HTTP3 curl only)
    port: int = 8443
    engine: str = "python"
    curl: str = "curl"
    socket_buffer: int | None = None  # SO_RCVBUF; None keeps the kernel's autotuning
    tcpinfo_interval: float = DEFAULT_TCPINFO_INTERVAL
    tcpinfo_log: Path | None = None  # every TCP_INFO sample as JSON lines (netlink sampler)
    user_agent: str = USER_AGENT

    @property
    def protocol(self) -> str:
        return PROTOCOLS[self.http]

    def check(self, resumptions: tuple[str, ...] | None = None) -> None:
        """As :meth:`RequestSettings.check`; ``resumptions`` by default those the engine can make."""
        if self.http not in PROTOCOLS:
            raise QuicbedError(f"--http must be one of {', '.join(PROTOCOLS)}, got {self.http!r}")
        if self.engine not in ENGINES:
            raise QuicbedError(f"--engine must be one of {', '.join(ENGINES)}")
        if self.http == "3" and self.engine != "curl":
            raise QuicbedError(
                "HTTP/3 over this client needs --engine curl (and a curl built "
                "with HTTP3); quicbed's HTTP/3 client is quicbed.apps.quic.client"
            )
        # Python's ssl resumes a TLS 1.3 session but cannot send early data; curl runs one
        # invocation per fetch, so a ticket would not outlive the priming connection
        if resumptions is None:
            resumptions = ("none", "ticket") if self.engine == "python" else ("none",)
        super().check(resumptions)
