"""``kind: quic``: HTTP/3 over QUIC on one of the QUIC implementations (aioquic, quinn), with
a transport profile and knobs (docs/transport-profiles.md). With ``qlog: true`` its server
writes a qlog, kept as the run's ``server.qlog``."""

from __future__ import annotations

import json
import shutil
from contextlib import AbstractContextManager
from dataclasses import replace

from quicbed.apps.launch import Started, module_argv
from quicbed.apps.ports import wait_for_file
from quicbed.apps.quic.implementations import (
    DEFAULT_IMPLEMENTATION,
    IMPLEMENTATIONS,
    QuicImplementation,
    quic_implementation,
)
from quicbed.apps.quic.profiles import TransportProfile, get_profile, load_profiles
from quicbed.apps.record import RESUMPTION_MODES
from quicbed.apps.transports.base import Download, RunContext, TransportKind, register_transport_kind
from quicbed.errors import SpecError
from quicbed.host.device_cpu import CLIENT_PACKET_COSTS
from quicbed.spec.transport import Transport, TransportEntry
from quicbed.spec.values import among, suggest


class QuicKind(TransportKind):
    name = "quic"
    port = 4433
    wire_protocol = "udp"

    # -- an experiment file ------------------------------------------------------------------
    def parse(self, entry: TransportEntry) -> Transport:
        http = entry.http("3", ("3",))
        cc = entry.cc()
        profile = entry.get("profile") or "quic"
        known = load_profiles()
        if not among(profile, known):
            raise entry.error(
                f"unknown transport profile {profile!r}",
                "profile",
                fix=f"{suggest(profile, list(known))}profiles are {', '.join(known)}",
            )
        knobs = entry.knobs()
        implementation = entry.choice("impl", entry.get("impl", DEFAULT_IMPLEMENTATION), tuple(IMPLEMENTATIONS))
        transport = Transport(entry.name, self.name, profile, http, cc, knobs, implementation)
        try:
            refused = self.refusals(transport)
        except SpecError as error:  # a knob's value
            raise entry.error(
                error.message, f"knobs.{error.field}" if error.field else "knobs", fix=error.fix
            ) from None
        if refused:
            raise entry.error(
                f"{implementation} cannot run profile {profile!r} as given: {'; '.join(refused)}",
                "knobs",
                fix="set these knobs under knobs: (values the implementation has), or use impl: aioquic",
            )
        return replace(transport, resumption=entry.resumption(RESUMPTION_MODES))

    def refusals(self, transport: Transport) -> list[str]:
        return self.implementation(transport).refusals(self.profile(transport))

    def missing(self, transport: Transport) -> tuple[str, str] | None:
        return self.implementation(transport).missing()

    def client_device_refusal(self, transport: Transport) -> str | None:
        name = self.implementation(transport).name
        return None if name in CLIENT_PACKET_COSTS else f"the {name} client's cost per datagram is not measured"

    def summary(self, transport: Transport) -> str:
        what = f"QUIC, HTTP/3, {self.implementation(transport).name}, profile {transport.profile}"
        if transport.knobs:
            what += ", except " + ", ".join(f"{k}={v}" for k, v in transport.knobs.items())
        return what

    def about(self, transport: Transport) -> str:
        profile = load_profiles().get(transport.profile or "")
        parts = [profile.description] if profile is not None else []
        if transport.knobs and profile is not None:
            # the description says what the profile does; a knob set apart from it undoes part of that
            shown = profile.knobs()
            parts.append(
                "Unlike the profile: "
                + "; ".join(
                    f"{knob}={value} (the profile's {shown.get(knob)!r})" for knob, value in transport.knobs.items()
                )
                + "."
            )
        parts.append(self.implementation(transport).ceiling)
        return " ".join(part for part in parts if part)

    @staticmethod
    def implementation(transport: Transport) -> QuicImplementation:
        return quic_implementation(transport.implementation or DEFAULT_IMPLEMENTATION)

    @staticmethod
    def profile(transport: Transport) -> TransportProfile:
        """The transport's profile with its knobs and congestion control applied."""
        overrides = {**transport.knobs, **({"congestion_control": transport.cc} if transport.cc else {})}
        return get_profile(transport.profile or "quic", (), overrides)

    # -- a run ---------------------------------------------------------------------------------
    def start_server(self, run: RunContext, download: Download) -> AbstractContextManager[object]:
        prefix = "" if download.role == "main" else f"{download.role}-"
        ready = run.folder / f"{prefix}server-ready.json"
        argv = [
            "--root",
            str(run.assets.www),
            "--cert",
            str(run.assets.cert),
            "--key",
            str(run.assets.key),
            "--host",
            run.server.address,
            "--port",
            str(download.port),
            "--ready-file",
            str(ready),
            "--stats-file",
            str(run.folder / f"{prefix}server-stats.jsonl"),
            *_profile_arguments(download.transport),
        ]
        if run.qlog and download.role == "main":
            argv += ["--qlog-dir", str(run.folder / "qlog")]
        module, *leading = self.implementation(download.transport).server
        process = run.server.start(
            module_argv(module, [*leading, *argv]), name=f"{prefix}quic-server", log_dir=run.logs
        )
        try:
            wait_for_file(ready, process, "the HTTP/3 server", run.ready_timeout)
        except BaseException:
            process.stop()
            raise
        run.watch(download.server_name, process)
        # SIGTERM: the server closes its connections and writes their qlogs and stats
        return Started(lambda: process.stop(grace=15.0), lambda: ready.unlink(missing_ok=True))

    def client_argv(self, transport: Transport, arguments: list[str]) -> list[str]:
        module, *leading = self.implementation(transport).client
        return module_argv(module, [*leading, *arguments, *_profile_arguments(transport)])

    # -- the analysis ------------------------------------------------------------------------
    def collect(self, run: RunContext, download: Download, shared: bool) -> None:
        """The server's qlog of the download as ``server.qlog``."""
        qlog_dir = run.folder / "qlog"
        # aioquic: ODCID_server.qlog; quinn: server-N-ADDRESS.sqlog (both JSON-SEQ or JSON)
        qlogs = (
            sorted(
                [*qlog_dir.glob("*_server.qlog"), *qlog_dir.glob("server-*.sqlog")],
                key=lambda path: path.stat().st_mtime,
            )
            if qlog_dir.is_dir()
            else []
        )
        if shared:  # many clients: the measured one's, which only quinn's names tell (its address)
            qlogs = [path for path in qlogs if f"-{download.client.address}_" in path.name]
        if qlogs:
            qlogs[-1].rename(run.folder / "server.qlog")  # one connection per run
            shutil.rmtree(run.folder / "qlog", ignore_errors=True)


def _profile_arguments(transport: Transport) -> list[str]:
    argv = ["--profile", transport.profile or "quic"]
    if transport.cc:
        argv += ["--cc", transport.cc]
    for knob, value in transport.knobs.items():
        argv += ["--knob", f"{knob}={json.dumps(value) if isinstance(value, bool) else value}"]
    return argv


register_transport_kind(QuicKind())
