"""iperf3 between nodes: capacity probes (TCP) and background/cross traffic (UDP at a set
rate, or TCP), bounded in time, results parsed from iperf3's JSON.

    from quicbed.apps import iperf
    server = iperf.start_server(net.node("server"), port=5201)
    probe = iperf.run(net.node("client"), server.address, port=5201, duration=3, reverse=True)
    probe.throughput            # bit/s received; probe.retransmits
    cross = iperf.start(net.node("client"), server.address, port=5201, protocol="udp",
                        rate="10mbit", duration=20, reverse=True)   # runs in the background
    ...                                                                # the download under test
    cross.result().lost_packets, cross.result().jitter
    server.stop()

``reverse=True`` makes the server send (``iperf3 -R``): the download direction. One
iperf3 server serves one test at a time: give parallel tests their own ports. Every run
has a bound (``duration`` + a margin); iperf3 errors (it exits 0 with an ``error`` field in
JSON mode) become :class:`IperfError` for :func:`run` and ``result.error`` otherwise.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicbed.apps.ports import wait_for_listener
from quicbed.errors import BackendError, CommandTimeout, MissingDependency, QuicbedError
from quicbed.spec.units import parse_rate

if TYPE_CHECKING:
    from quicbed.backends.base import Network, NodeHandle, Process

IPERF3 = "iperf3"
DEFAULT_PORT = 5201
UDP_PAYLOAD = 1472  # a 1500-byte IP packet
MARGIN = 15.0  # seconds allowed beyond the test duration (connect, exchange of results)
#: iperf3 sets a UDP stream up with one datagram each way and never sends either again
#: (esnet/iperf issues 351 and 862): one lost on a lossy path and the test fails before it
#: starts ("unable to read from stream socket" if the reply is lost, a 30 s wait and then the
#: same error if the client's datagram is). :func:`run` tries a UDP test this many times.
UDP_SETUP_ATTEMPTS = 3


class IperfError(QuicbedError):
    """iperf3 reported an error (or produced no result)."""


@dataclass
class IperfResult:
    """What one iperf3 test measured. Rates in bit/s, times in seconds."""

    protocol: str  # "tcp" or "udp"
    reverse: bool  # the server sent
    duration: float | None  # receiver-side seconds
    bytes_sent: int | None
    bytes_received: int | None
    sent_bps: float | None
    received_bps: float | None
    retransmits: int | None = None  # TCP sender
    packets: int | None = None  # UDP datagrams sent
    lost_packets: int | None = None  # UDP
    lost_percent: float | None = None
    out_of_order: int | None = None
    jitter: float | None = None  # UDP, RFC 3550 estimate at the receiver
    congestion_control: str | None = None  # TCP sender's
    max_snd_cwnd: int | None = None  # bytes, when the local end sent
    rtt_min: float | None = None
    rtt_mean: float | None = None
    rtt_max: float | None = None
    target_bps: float | None = None
    cpu: dict[str, float] | None = None  # iperf3's CPU use in percent (host = client side)
    error: str | None = None
    #: tests started to get this result: more than 1 when a UDP stream's set-up was lost
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def throughput(self) -> float | None:
        """Received bit/s (the goodput the network delivered)."""
        return self.received_bps

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "raw"} | {"throughput": self.throughput}


def _number(value: Any, kind: type = float) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def parse_result(data: dict[str, Any] | str) -> IperfResult:
    """An :class:`IperfResult` from iperf3's ``-J`` output (text or parsed)."""
    if isinstance(data, str):
        try:
            data = json.loads(data) if data.strip() else {}
        except json.JSONDecodeError as error:
            return IperfResult(
                "unknown", False, None, None, None, None, None, error=f"iperf3 output is not JSON: {error.msg}"
            )
    assert isinstance(data, dict)
    start = data.get("start", {})
    test = start.get("test_start", {})
    end = data.get("end", {})
    protocol = str(test.get("protocol", "tcp")).lower()
    reverse = bool(test.get("reverse", 0))
    sent = end.get("sum_sent") or end.get("sum") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    result = IperfResult(
        protocol=protocol,
        reverse=reverse,
        duration=_number(received.get("seconds")),
        bytes_sent=_number(sent.get("bytes"), int),
        bytes_received=_number(received.get("bytes"), int),
        sent_bps=_number(sent.get("bits_per_second")),
        received_bps=_number(received.get("bits_per_second")),
        target_bps=_number(test.get("target_bitrate")) or None,
        cpu=end.get("cpu_utilization_percent"),
        error=data.get("error"),
        raw=data,
    )
    if protocol == "udp":
        udp = end.get("sum_received") or end.get("sum") or {}
        result.packets = _number((end.get("sum_sent") or udp).get("packets"), int)
        result.lost_packets = _number(udp.get("lost_packets"), int)
        result.lost_percent = _number(udp.get("lost_percent"))
        jitter = _number(udp.get("jitter_ms"))
        result.jitter = None if jitter is None else jitter / 1000.0
        streams = [s.get("udp", {}) for s in end.get("streams", [])]
        disorder = [s.get("out_of_order") for s in streams if s.get("out_of_order") is not None]
        result.out_of_order = sum(disorder) if disorder else None
    else:
        result.retransmits = _number(sent.get("retransmits"), int)
        result.congestion_control = end.get("sender_tcp_congestion")
        senders = [s.get("sender", {}) for s in end.get("streams", [])]
        cwnds = [s["max_snd_cwnd"] for s in senders if s.get("max_snd_cwnd")]
        result.max_snd_cwnd = max(cwnds) if cwnds else None
        for name, key, pick in (
            ("rtt_min", "min_rtt", min),
            ("rtt_mean", "mean_rtt", None),
            ("rtt_max", "max_rtt", max),
        ):
            values = [s[key] / 1e6 for s in senders if s.get(key)]
            if values:
                setattr(result, name, pick(values) if pick else sum(values) / len(values))
    if not result.error and result.bytes_received is None:
        result.error = "iperf3 gave no result"
    return result


def _binary() -> str:
    if shutil.which(IPERF3) is None:
        raise MissingDependency("'iperf3' is not installed (fix: apt-get install iperf3)")
    return IPERF3


# --------------------------------------------------------------------------- server


class IperfServer:
    """A running ``iperf3 -s`` in a node (serves one test at a time, any number in a row)."""

    def __init__(self, node: NodeHandle, port: int, process: Process) -> None:
        self.node = node
        self.port = port
        self.process = process

    @property
    def address(self) -> str:
        return self.node.address

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> IperfServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    node: NodeHandle, port: int = DEFAULT_PORT, log_dir: Path | None = None, timeout: float = 10.0
) -> IperfServer:
    """Start ``iperf3 -s`` on ``port`` and wait (bounded) until it listens."""
    process = node.start([_binary(), "-s", "-p", str(port)], name=f"iperf3-server-{port}", log_dir=log_dir)
    try:
        wait_for_listener(node, port, timeout=timeout, process=process, what="iperf3 server")
    except BaseException:
        process.stop()
        raise
    return IperfServer(node, port, process)


# --------------------------------------------------------------------------- client


def client_argv(
    server_address: str,
    *,
    port: int = DEFAULT_PORT,
    protocol: str = "tcp",
    duration: float = 5.0,
    rate: str | float | None = None,
    reverse: bool = False,
    streams: int = 1,
    length: int | None = None,
    congestion: str | None = None,
    omit: float = 0.0,
    interval: float | None = None,
    burst: int | None = None,
    pacing_timer_us: int | None = None,
) -> list[str]:
    """The iperf3 client command line (JSON output). ``burst``: datagrams sent back to back
    per burst (``-b RATE/BURST``); ``pacing_timer_us``: iperf3's pacing tick (smaller is
    smoother)."""
    if protocol not in ("tcp", "udp"):
        raise QuicbedError(f"protocol must be tcp or udp, got {protocol!r}")
    if duration <= 0:
        raise QuicbedError("duration must be positive")
    argv = [IPERF3, "-c", server_address, "-p", str(port), "-J", "-t", f"{duration:g}", "--connect-timeout", "5000"]
    if protocol == "udp":
        argv.append("-u")
        # iperf3's UDP default is 1 Mbit/s: a UDP test without a rate is almost surely a mistake
        if rate is None:
            raise QuicbedError("a UDP test needs a rate (e.g. rate='10mbit')")
    if rate is not None:
        bits = parse_rate(rate, "rate") if isinstance(rate, str) else float(rate)
        argv += ["-b", str(int(bits)) + (f"/{burst}" if burst else "")]
    if pacing_timer_us:
        argv += ["--pacing-timer", str(pacing_timer_us)]
    if reverse:
        argv.append("-R")
    if streams != 1:
        argv += ["-P", str(streams)]
    if length is not None:
        argv += ["-l", str(length)]
    if congestion is not None:
        argv += ["-C", congestion]
    if omit:
        argv += ["-O", f"{omit:g}"]
    if interval is not None:
        argv += ["-i", f"{interval:g}"]
    return argv


def run(
    node: NodeHandle, server_address: str, *, timeout: float | None = None, check: bool = True, **options: Any
) -> IperfResult:
    """Run one iperf3 test from ``node`` to completion (see :func:`client_argv` for options).
    A UDP test whose stream set-up was lost is started again, up to UDP_SETUP_ATTEMPTS times
    in all (``result.attempts``)."""
    _binary()
    argv = client_argv(server_address, **options)
    limit = timeout if timeout is not None else float(options.get("duration", 5.0)) + MARGIN
    attempts = UDP_SETUP_ATTEMPTS if options.get("protocol") == "udp" else 1
    for attempt in range(1, attempts + 1):
        try:
            completed = node.run(argv, timeout=limit, check=False)
        except CommandTimeout:
            # (a lost client datagram: iperf3 waits 30 s for the reply, beyond the limit)
            if attempt == attempts:
                raise
            continue
        result = parse_result(completed.stdout)
        if result.error is None and completed.returncode != 0:
            result.error = f"iperf3 exited {completed.returncode}: {completed.stderr.strip()}"
        result.attempts = attempt
        if not _setup_lost(result):
            break
    if check and result.error:
        raise IperfError(
            f"iperf3 {' '.join(argv[1:])} on {node.name}: {result.error}"
            + (f" ({result.attempts} attempts)" if result.attempts > 1 else "")
        )
    return result


def _setup_lost(result: IperfResult) -> bool:
    """The test failed while its UDP stream was being set up: no data was measured."""
    return bool(result.error and "unable to read from stream socket" in result.error and not result.bytes_received)


class IperfClient:
    """A background iperf3 test (cross traffic); ``result()`` waits for it."""

    def __init__(
        self, node: NodeHandle, process: Process, output: Path, limit: float, scratch: Path | None = None
    ) -> None:
        self.node = node
        self.process = process
        self.output = output
        self.limit = limit
        self.started = time.monotonic()
        #: a folder made for the output alone: removed once the output has been read
        self.scratch = scratch
        self._text: str | None = None

    def _read_output(self) -> str:
        if self._text is None:
            self._text = self.output.read_text() if self.output.exists() else ""
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        return self._text

    @property
    def running(self) -> bool:
        return self.process.running

    def result(self, timeout: float | None = None) -> IperfResult:
        remaining = self.limit - (time.monotonic() - self.started) if timeout is None else timeout
        try:
            self.process.wait(max(0.1, remaining))
        except BackendError:
            self.stop()  # its output read, so its scratch folder goes too
            return IperfResult(
                "unknown", False, None, None, None, None, None, error=f"iperf3 did not finish within {self.limit:g} s"
            )
        result = parse_result(self._read_output())
        if result.error is None and self.process.returncode:
            result.error = f"iperf3 exited {self.process.returncode}: {self.process.errors().strip()}"
        return result

    def stop(self) -> None:
        self.process.stop()
        self._read_output()


def start(
    node: NodeHandle, server_address: str, *, log_dir: Path | None = None, name: str | None = None, **options: Any
) -> IperfClient:
    """Start an iperf3 test in the background (e.g. cross traffic during a download)."""
    _binary()
    argv = client_argv(server_address, **options)
    scratch = None if log_dir is not None else Path(tempfile.mkdtemp(prefix="quicbed-iperf-"))
    label = name or f"iperf3-{options.get('protocol', 'tcp')}-{options.get('port', DEFAULT_PORT)}"
    try:
        process = node.start(argv, name=label, log_dir=Path(log_dir) if log_dir is not None else scratch)
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    assert process.stdout_path is not None
    return IperfClient(node, process, process.stdout_path, float(options.get("duration", 5.0)) + MARGIN, scratch)


def capacity_probe(
    client: NodeHandle,
    server: NodeHandle,
    *,
    duration: float = 3.0,
    reverse: bool = True,
    port: int = DEFAULT_PORT,
    omit: float = 0.0,
    congestion: str | None = None,
    log_dir: Path | None = None,
) -> IperfResult:
    """The TCP goodput between two nodes (``reverse``: server -> client, the download way):
    starts a server, runs one test, stops the server."""
    with start_server(server, port=port, log_dir=log_dir):
        return run(
            client,
            server.address,
            port=port,
            protocol="tcp",
            duration=duration,
            reverse=reverse,
            omit=omit,
            congestion=congestion,
        )


def between(
    network: Network,
    client: str,
    server: str,
    *,
    duration: float = 5.0,
    reverse: bool = True,
    rate: float | None = None,
    port: int = DEFAULT_PORT,
    **options: Any,
) -> IperfResult:
    """One bounded test between two nodes of a running network, server started and stopped
    here: TCP, or UDP at ``rate`` bit/s (full-size datagrams unless ``length`` is given)."""
    server_node = network.node(server)
    if rate is not None:
        options = {"protocol": "udp", "length": UDP_PAYLOAD, **options}
    with start_server(server_node, port=port):
        return run(
            network.node(client),
            server_node.address,
            port=port,
            duration=duration,
            reverse=reverse,
            rate=rate,
            **options,
        )


def cross_traffic(
    client: NodeHandle,
    server_address: str,
    *,
    rate: str | float,
    duration: float,
    protocol: str = "udp",
    reverse: bool = True,
    port: int = DEFAULT_PORT,
    log_dir: Path | None = None,
    length: int | None = None,
) -> IperfClient:
    """Background traffic at ``rate`` (UDP by default, the E4 background load) for
    ``duration`` seconds; an iperf3 server must listen on ``port``."""
    return start(
        client,
        server_address,
        port=port,
        protocol=protocol,
        rate=rate,
        duration=duration,
        reverse=reverse,
        log_dir=log_dir,
        length=length,
    )
