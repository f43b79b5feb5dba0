"""``kind: tcp``: HTTPS over TCP, nginx serving quicbed's TCP client, with an HTTP version and
the kernel's congestion control. With ``qlog: true`` the sender's state is recorded from the
kernel (quicbed.apps.transports.tcp_state)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from quicbed.apps.launch import Started, module_argv
from quicbed.apps.record import RESUMPTION_MODES
from quicbed.apps.transports.base import Download, RunContext, TransportKind, register_transport_kind
from quicbed.apps.transports.tcp_state import record_tcp_state
from quicbed.spec.transport import Transport, TransportEntry

HTTP_VERSIONS = ("1.1", "2", "3")


def _nothing_to_undo() -> None:
    """What ending a server without a port's own congestion control undoes."""


class TcpKind(TransportKind):
    name = "tcp"
    port = 8443
    wire_protocol = "tcp"

    # -- an experiment file ------------------------------------------------------------------
    def parse(self, entry: TransportEntry) -> Transport:
        http = entry.http("2", HTTP_VERSIONS)
        cc = entry.cc()
        if entry.get("profile") is not None:
            raise entry.error("TCP transports have no QUIC profile", "profile", fix="remove 'profile'")
        knobs = entry.knobs()
        if "impl" in entry.options:
            raise entry.error("TCP transports have no QUIC implementation", "impl", fix="remove 'impl'")
        if entry.get("resumption") == "0rtt":
            raise entry.error(
                "TCP transports cannot send 0-RTT data (quicbed's TCP client, Python's ssl, has no TLS early data)",
                "resumption",
                fix="use resumption: ticket, or a QUIC transport",
            )
        resumption = entry.resumption(RESUMPTION_MODES[:2])
        return Transport(entry.name, self.name, None, http, cc, knobs, None, resumption)

    def refusals(self, transport: Transport) -> list[str]:
        return []  # nginx and the client honour whatever parse lets through

    def client_device_refusal(self, transport: Transport) -> str | None:
        return (
            "a TCP client's ACKs and reassembly are the kernel's, outside the client process "
            "that would take the device's time (the QUIC clients do them themselves)"
        )

    def summary(self, transport: Transport) -> str:
        return f"TCP, HTTP/{transport.http}, {transport.cc}"

    def about(self, transport: Transport) -> str:
        return "nginx and quicbed's TCP client"

    # -- a run ---------------------------------------------------------------------------------
    def start_server(self, run: RunContext, download: Download) -> AbstractContextManager[object]:
        from quicbed.apps.tcp import port_cc
        from quicbed.apps.tcp.nginx import NginxServer, NginxSettings

        main = download.role == "main"
        # the namespace's default is the main server's; a competitor's own port gets its own
        settings = NginxSettings(
            root=run.assets.www,
            certificate=run.assets.cert,
            private_key=run.assets.key,
            port=download.port,
            host=run.server.address,
            congestion_control=download.transport.cc if main else None,
            keepalive_timeout=run.timeout,
            send_timeout=run.timeout,
            session_ticket_key=run.assets.ticket_key,
        )
        nginx = NginxServer(run.server, settings, run.folder / ("nginx" if main else f"nginx-{download.role}"))
        undo_port_cc: Callable[[], None] = _nothing_to_undo
        info: dict[str, Any] = {}
        if not main and download.transport.cc:
            setting = port_cc.PortCongestionControl(download.port, download.client.address, download.transport.cc)
            undo_port_cc = port_cc.apply(run.server, setting)
            info["port_congestion_control"] = setting.describe()
        try:
            nginx.start()
        except BaseException:
            undo_port_cc()
            raise
        run.watch(download.server_name, nginx.process)

        def stop() -> None:
            try:
                nginx.stop()
            finally:
                undo_port_cc()

        return Started(
            stop, lambda: run.details.setdefault("servers", {}).update({download.role: {**nginx.info(), **info}})
        )

    def client_argv(self, transport: Transport, arguments: list[str]) -> list[str]:
        return module_argv("quicbed.apps.tcp.client", [*arguments, "--http", transport.http])

    # -- the analysis ------------------------------------------------------------------------
    def record_sender(self, run: RunContext, download: Download) -> AbstractContextManager[object]:
        return record_tcp_state(run, download)


register_transport_kind(TcpKind())
