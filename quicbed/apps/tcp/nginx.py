"""nginx as quicbed's TCP server (HTTP/1.1 and HTTP/2 over TLS; HTTP/3 where nginx has it).

Each server instance gets its own run folder with its config, pid file, logs and temp
folders; the system's nginx config and service are never used or touched::

    from quicbed.apps.tcp.nginx import NginxServer, NginxSettings
    settings = NginxSettings(root=content, certificate=cert, private_key=key, port=8443,
                             congestion_control="cubic")
    with NginxServer(net.node("server"), settings, run_dir) as server:
        ...                                    # https://10.0.0.2:8443/bulk/10MB.bin
    server.access_log()                        # one dict per request (with TCP_INFO)

The config runs nginx in the foreground (``daemon off; master_process on;
worker_processes 1``) so that quicbed's process handling owns it and stops it with the
network. One ``listen ... ssl`` socket serves HTTP/1.1 and HTTP/2 (the client picks with
ALPN); HTTP/3 is added (``listen ... quic``) when asked for and the nginx binary has it
(>= 1.25 built with ``--with-http_v3_module``, read from ``nginx -V``), otherwise the reason
is in :attr:`NginxServer.http3_skipped`.

TCP congestion control (cubic, reno, bbr) is a per-namespace sysctl: it is set in the
server's namespace before nginx starts, so every accepted connection uses it (a second
server on another port can run another one: :mod:`quicbed.apps.tcp.port_cc`). Socket
buffers: ``sndbuf``/``rcvbuf`` on the ``listen`` socket (inherited by accepted sockets; this
turns the kernel's buffer autotuning off for them) when :attr:`NginxSettings.socket_buffer`
is set (default 4 MiB, like the QUIC endpoints; capped by ``net.core.wmem_max``/``rmem_max``,
which :meth:`NginxServer.info` reports); ``socket_buffer=None`` keeps autotuning.

The access log is JSON, one line per request, with nginx's own TCP_INFO of the connection
when the response was handed to the kernel (``$tcpinfo_rtt``, ``$tcpinfo_snd_cwnd``, ...).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicbed.apps.objects import CONTENT_TYPES
from quicbed.apps.quic import certs
from quicbed.apps.quic.sockets import DEFAULT_BUFFER
from quicbed.apps.ports import wait_for_listener
from quicbed.errors import BackendError, MissingDependency, QuicbedError

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle, Process

NGINX = "nginx"
CONGESTION_CONTROLS = ("cubic", "reno", "bbr")
DEFAULT_PORT = 8443
READY_TIMEOUT = 10.0
HTTP3_MIN_VERSION = (1, 25, 0)
HTTP2_DIRECTIVE_VERSION = (1, 25, 1)  # "http2 on;" replaces "listen ... http2"
ACCESS_LOG_NAME = "access.jsonl"

# JSON per request; every value quoted (empty TCP_INFO on QUIC connections), typed on reading.
_LOG_FIELDS = (
    ("time", "$msec"),
    ("connection", "$connection"),
    ("requests", "$connection_requests"),
    ("remote_addr", "$remote_addr"),
    ("remote_port", "$remote_port"),
    ("protocol", "$server_protocol"),
    ("method", "$request_method"),
    ("path", "$request_uri"),
    ("status", "$status"),
    ("bytes_sent", "$bytes_sent"),
    ("body_bytes", "$body_bytes_sent"),
    ("request_time", "$request_time"),
    ("tls", "$ssl_protocol"),
    ("tcpinfo_rtt_us", "$tcpinfo_rtt"),
    ("tcpinfo_rttvar_us", "$tcpinfo_rttvar"),
    ("tcpinfo_snd_cwnd", "$tcpinfo_snd_cwnd"),
    ("tcpinfo_rcv_space", "$tcpinfo_rcv_space"),
)
_LOG_NUMBERS = {
    "time": float,
    "connection": int,
    "requests": int,
    "remote_port": int,
    "status": int,
    "bytes_sent": int,
    "body_bytes": int,
    "request_time": float,
    "tcpinfo_rtt_us": int,
    "tcpinfo_rttvar_us": int,
    "tcpinfo_snd_cwnd": int,
    "tcpinfo_rcv_space": int,
}


# --------------------------------------------------------------------------- the binary


@dataclass(frozen=True)
class NginxBuild:
    """What ``nginx -V`` says about a binary."""

    version: tuple[int, ...]
    version_text: str
    configure_arguments: tuple[str, ...]
    ssl: bool
    http_v2: bool
    http_v3_module: bool

    @property
    def http3_unavailable(self) -> str | None:
        """Why this nginx cannot serve HTTP/3, or None when it can."""
        if self.version < HTTP3_MIN_VERSION:
            return (
                f"nginx {self.version_text} has no HTTP/3 (needs >= 1.25 built with "
                "--with-http_v3_module, e.g. from nginx.org's packages)"
            )
        if not self.http_v3_module:
            return f"nginx {self.version_text} was built without --with-http_v3_module"
        if not self.ssl:
            return f"nginx {self.version_text} was built without the SSL module"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version_text,
            "ssl": self.ssl,
            "http2": self.http_v2,
            "http3": self.http3_unavailable is None,
            "http3_unavailable": self.http3_unavailable,
        }


def parse_build(text: str) -> NginxBuild:
    """Parse the (stderr) output of ``nginx -V``."""
    match = re.search(r"nginx version: [\w.-]*?/(\d+(?:\.\d+)*)", text)
    if match is None:
        raise MissingDependency(f"cannot read the nginx version from: {text.strip()[:200]!r}")
    version_text = match.group(1)
    configure = re.search(r"configure arguments:(.*)", text)
    arguments = tuple(configure.group(1).split()) if configure else ()
    modules = {a.split("=")[0] for a in arguments}
    return NginxBuild(
        version=tuple(int(part) for part in version_text.split(".")),
        version_text=version_text,
        configure_arguments=arguments,
        ssl="--with-http_ssl_module" in modules,
        http_v2="--with-http_v2_module" in modules,
        http_v3_module="--with-http_v3_module" in modules,
    )


def detect(binary: str = NGINX) -> NginxBuild:
    """Run ``nginx -V`` and parse it."""
    path = shutil.which(binary)
    if path is None:
        raise MissingDependency(f"'{binary}' is not installed (fix: apt-get install nginx-light or nginx)")
    result = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10, check=False)
    return parse_build(result.stderr + result.stdout)


# --------------------------------------------------------------------------- the config


@dataclass
class NginxSettings:
    root: Path  # the content tree (quicbed.apps.objects), served as /
    certificate: Path
    private_key: Path
    port: int = DEFAULT_PORT
    host: str = "0.0.0.0"
    http2: bool = True
    http3: bool = False  # served only where the binary has it (see NginxServer.http3_skipped)
    congestion_control: str | None = "cubic"  # None: leave the namespace's default
    socket_buffer: int | None = DEFAULT_BUFFER  # listen sndbuf/rcvbuf; None: autotuning
    sendfile: bool = True
    worker_connections: int = 1024
    keepalive_requests: int = 100_000
    # Both also bound a transfer that the link has stalled: HTTP/2's idle timer
    # (keepalive_timeout) runs while the kernel still holds unsent data, and send_timeout
    # between two writes. A lossy link's RTO backoff can exceed nginx's 65 s and 60 s
    # defaults, so runs set both to the experiment's timeout.
    keepalive_timeout: float = 65.0
    send_timeout: float = 60.0
    http2_max_concurrent_streams: int = 128
    backlog: int = 1024
    user: str | None = None  # workers' user when started as root (default: the caller's)
    #: the key TLS session tickets are sealed with (80 random bytes): the same file across
    #: restarts keeps earlier tickets valid; None: a new key at every start
    session_ticket_key: Path | None = None
    extra_server: list[str] = field(default_factory=list)  # raw lines for the server block

    def check(self) -> None:
        if self.congestion_control is not None and self.congestion_control not in CONGESTION_CONTROLS:
            raise QuicbedError(
                f"unknown TCP congestion control {self.congestion_control!r} "
                f"(fix: use one of {', '.join(CONGESTION_CONTROLS)})"
            )
        if not 0 < self.port < 65536:
            raise QuicbedError(f"port {self.port} is out of range")
        for name in ("keepalive_timeout", "send_timeout"):
            if not getattr(self, name) > 0:
                raise QuicbedError(f"{name} {getattr(self, name)!r} must be a positive number of seconds")
        if self.socket_buffer is not None and self.socket_buffer < 4096:
            raise QuicbedError(f"socket_buffer {self.socket_buffer} is too small (>= 4096 bytes)")


def _quote(value: str | Path) -> str:
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_./:+=-]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _run_user() -> tuple[str, str]:
    user = pwd.getpwuid(os.geteuid()).pw_name
    try:
        group = grp.getgrgid(os.getegid()).gr_name
    except KeyError:
        group = user
    return user, group


def log_format() -> str:
    body = ",".join(f'"{name}":"{variable}"' for name, variable in _LOG_FIELDS)
    return "{" + body + "}"


def render_config(settings: NginxSettings, run_dir: Path, build: NginxBuild, as_root: bool | None = None) -> str:
    """The nginx.conf text for one instance whose files live under ``run_dir``."""
    settings.check()
    run_dir = Path(run_dir).resolve()
    root = Path(settings.root).resolve()
    as_root = os.geteuid() == 0 if as_root is None else as_root
    http3 = settings.http3 and build.http3_unavailable is None
    http2_in_listen = settings.http2 and build.version < HTTP2_DIRECTIVE_VERSION
    if settings.http2 and not build.http_v2:
        raise MissingDependency(f"nginx {build.version_text} was built without HTTP/2")
    lines = [
        "# Written by quicbed.apps.tcp.nginx; one instance, everything under its run folder.",
        "daemon off;",
        "master_process on;",
        "worker_processes 1;",
        f"pid {_quote(run_dir / 'nginx.pid')};",
        f"error_log {_quote(run_dir / 'logs' / 'error.log')} notice;",
    ]
    if as_root:
        user, group = (settings.user, settings.user) if settings.user else _run_user()
        lines.append(f"user {_quote(user)} {_quote(group)};")
    lines += [
        "",
        "events {",
        f"    worker_connections {settings.worker_connections};",
        "    multi_accept on;",
        "}",
        "",
        "http {",
    ]
    inner = [
        f"log_format quicbed escape=json '{log_format()}';",
        f"access_log {_quote(run_dir / 'logs' / ACCESS_LOG_NAME)} quicbed;",
    ]
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        inner.append(f"{kind}_temp_path {_quote(run_dir / 'tmp' / kind)};")
    inner.append("types {")
    for extension, kind in sorted(CONTENT_TYPES.items()):
        inner.append(f"    {kind} {extension};")
    inner += [
        "}",
        "default_type application/octet-stream;",
        f"sendfile {'on' if settings.sendfile else 'off'};",
        "tcp_nopush on;",
        "tcp_nodelay on;",
        "gzip off;",
        "server_tokens off;",
        "etag off;",
        f"keepalive_requests {settings.keepalive_requests};",
        f"keepalive_timeout {settings.keepalive_timeout:g}s;",
        f"send_timeout {settings.send_timeout:g}s;",
    ]
    if settings.http2:
        inner.append(f"http2_max_concurrent_streams {settings.http2_max_concurrent_streams};")
    address = f"[{settings.host}]" if ":" in settings.host else settings.host
    listen = [f"{address}:{settings.port}", "ssl"]
    if http2_in_listen:
        listen.append("http2")
    listen.append(f"backlog={settings.backlog}")
    if settings.socket_buffer is not None:
        listen += [f"sndbuf={settings.socket_buffer}", f"rcvbuf={settings.socket_buffer}"]
    server = [f"listen {' '.join(listen)};"]
    if http3:
        server.append(f"listen {address}:{settings.port} quic reuseport;")
        server.append("http3 on;")
        server.append(f"add_header Alt-Svc 'h3=\":{settings.port}\"; ma=86400' always;")
    if settings.http2 and not http2_in_listen:
        server.append("http2 on;")
    server += [
        "server_name _;",
        f"ssl_certificate {_quote(Path(settings.certificate).resolve())};",
        f"ssl_certificate_key {_quote(Path(settings.private_key).resolve())};",
        "ssl_protocols TLSv1.2 TLSv1.3;",
        "ssl_session_cache off;",
        *(
            [f"ssl_session_ticket_key {_quote(Path(settings.session_ticket_key).resolve())};"]
            if settings.session_ticket_key
            else []
        ),
        f"root {_quote(root)};",
        "location / {",
        "    try_files $uri =404;",
        "}",
        *settings.extra_server,
    ]
    inner += ["server {", *(f"    {line}" for line in server), "}"]
    lines += [f"    {line}" for line in inner]
    lines += ["}", ""]
    return "\n".join(lines)


def parse_access_log(text: str) -> list[dict[str, Any]]:
    """The JSON access log as dicts; numbers typed (missing ones None), TCP_INFO in SI units
    added (``tcpinfo_rtt``/``tcpinfo_rttvar`` in seconds)."""
    import json

    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        entry: dict[str, Any] = json.loads(line)
        for name, kind in _LOG_NUMBERS.items():
            value = entry.get(name)
            if value in (None, "", "-"):
                entry[name] = None
                continue
            try:
                entry[name] = kind(value)
            except ValueError:
                entry[name] = None
        for name in ("tcpinfo_rtt", "tcpinfo_rttvar"):
            micro = entry.get(f"{name}_us")
            entry[name] = micro / 1e6 if micro else None
        entries.append(entry)
    return entries


# --------------------------------------------------------------------------- an instance


def ensure_certificate(directory: Path, names: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` in ``directory`` (reused if already there):
    one per testbed, shared by nginx and the HTTP/3 server."""
    cert, key = Path(directory) / "cert.pem", Path(directory) / "key.pem"
    if cert.exists() and key.exists():
        return cert, key
    return certs.write(directory, names)


class NginxServer:
    """One nginx instance in a node. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        node: NodeHandle,
        settings: NginxSettings,
        run_dir: Path,
        build: NginxBuild | None = None,
        binary: str = NGINX,
    ) -> None:
        self.node = node
        self.settings = settings
        self.run_dir = Path(run_dir).resolve()
        self.binary = binary
        self.build = build or detect(binary)
        self.process: Process | None = None
        self.config_path = self.run_dir / "nginx.conf"
        self.ready_after: float | None = None

    @property
    def http3(self) -> bool:
        return self.settings.http3 and self.build.http3_unavailable is None

    @property
    def http3_skipped(self) -> str | None:
        """Why HTTP/3 was asked for but is not served (None if served or not asked)."""
        return self.build.http3_unavailable if self.settings.http3 else None

    @property
    def protocols(self) -> list[str]:
        return ["http/1.1"] + (["h2"] if self.settings.http2 else []) + (["h3"] if self.http3 else [])

    @property
    def url(self) -> str:
        return f"https://{self.node.address}:{self.settings.port}"

    def write_config(self) -> Path:
        for sub in ("logs", "tmp"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_config(self.settings, self.run_dir, self.build))
        return self.config_path

    def _argv(self, *extra: str) -> list[str]:
        return [self.binary, "-p", str(self.run_dir), "-c", str(self.config_path), "-e", "stderr", *extra]

    def start(self, timeout: float = READY_TIMEOUT) -> NginxServer:
        """Write the config, test it, set the congestion control, start and wait for the port."""
        self.write_config()
        test = self.node.run(self._argv("-t", "-q"), timeout=30, check=False)
        if test.returncode != 0:
            raise BackendError(f"nginx rejected {self.config_path}: {test.stderr.strip()}")
        if self.settings.congestion_control is not None:
            self.node.sysctl("net.ipv4.tcp_congestion_control", self.settings.congestion_control)
        self.process = self.node.start(self._argv(), name=f"nginx-{self.settings.port}", log_dir=self.run_dir / "logs")
        try:
            self.ready_after = wait_for_listener(
                self.node, self.settings.port, timeout=timeout, process=self.process, what="nginx"
            )
            if self.http3:
                wait_for_listener(
                    self.node,
                    self.settings.port,
                    protocol="udp",
                    timeout=timeout,
                    process=self.process,
                    what="nginx (HTTP/3)",
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> int | None:
        if self.process is None:
            return None
        return self.process.stop()

    def congestion_control(self) -> str:
        """The namespace's default TCP congestion control (what new connections get)."""
        return self.node.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).stdout.strip()

    def info(self) -> dict[str, Any]:
        """What result records keep about this server."""
        buffers = None
        if self.settings.socket_buffer is not None:
            limits: dict[str, int | None] = {}
            for name in ("wmem_max", "rmem_max"):
                try:
                    limits[name] = int(Path("/proc/sys/net/core", name).read_text().split()[0])
                except (OSError, ValueError):
                    limits[name] = None
            granted = {
                kind: min(self.settings.socket_buffer, limit) if limit else None
                for kind, limit in (("sndbuf", limits["wmem_max"]), ("rcvbuf", limits["rmem_max"]))
            }
            buffers = {
                "requested": self.settings.socket_buffer,
                **granted,
                **limits,
                "capped": any(v is not None and v < self.settings.socket_buffer for v in granted.values()),
            }
        return {
            "server": "nginx",
            "nginx": self.build.to_dict(),
            "node": self.node.name,
            "address": self.node.address,
            "port": self.settings.port,
            "protocols": self.protocols,
            "http3_skipped": self.http3_skipped,
            "congestion_control": self.settings.congestion_control,
            "socket": buffers,
            "config": str(self.config_path),
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.settings).items()},
        }

    def access_log(self) -> list[dict[str, Any]]:
        path = self.run_dir / "logs" / ACCESS_LOG_NAME
        return parse_access_log(path.read_text()) if path.exists() else []

    def __enter__(self) -> NginxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
