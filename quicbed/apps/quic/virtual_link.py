"""A client and a server ``QuicConnection`` joined in memory, on a virtual clock.

No sockets, no real time: datagrams cross a per-direction delay line (fixed one-way delay,
optional serialisation rate, optional per-datagram impairment), timers fire exactly when
due, and every run is deterministic. Used by the unit tests that prove each transport knob
acts, and handy for exploring a knob without an emulated network::

    link = VirtualLink(get_profile("bquic"), delay=0.010, rate=50e6)
    link.handshake()
    link.request(1_000_000)
    link.run_until(lambda: link.response_complete)
    print(link.client_hooks.stats())

The application protocol is minimal: the client sends ``GET <n>`` on a bidirectional
stream, the server answers with ``n`` bytes and FIN.
"""

from __future__ import annotations

import heapq
import itertools
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.logger import QuicLogger

from quicbed.apps.quic import aioquic_hooks, certs
from quicbed.apps.quic.profiles import TransportProfile

CLIENT_ADDR = ("10.0.0.1", 40000)
SERVER_ADDR = ("10.0.0.2", 4433)
ALPN = "quicbed-virtual"
START_TIME = 10.0
UP, DOWN = "up", "down"  # client -> server, server -> client


@dataclass(frozen=True)
class Datagram:
    """One datagram on the virtual link (``index`` counts per direction from 0)."""

    direction: str
    index: int
    size: int
    sent_at: float


# Returns the extra delay of a datagram (seconds, >= 0) or None to drop it.
Impairment = Callable[[Datagram], "float | None"]


def no_impairment(datagram: Datagram) -> float | None:
    return 0.0


@dataclass
class Release:
    """One ``datagrams_to_send`` call that produced datagrams."""

    time: float
    count: int


@dataclass
class Side:
    connection: QuicConnection
    hooks: aioquic_hooks.ConnectionHooks
    releases: list[Release] = field(default_factory=list)
    terminated: bool = False


_identity: certs.SelfSigned | None = None


def _shared_identity() -> certs.SelfSigned:
    global _identity
    if _identity is None:
        _identity = certs.generate(("localhost",), key_type="ed25519")
    return _identity


class VirtualLink:
    def __init__(
        self,
        profile: TransportProfile,
        server_profile: TransportProfile | None = None,
        *,
        delay: float = 0.010,
        rate: float | None = None,
        impair: Impairment = no_impairment,
        lose_on_arrival: Callable[[Datagram], bool] | None = None,
        identity: certs.SelfSigned | None = None,
        client_logger: QuicLogger | None = None,
        server_logger: QuicLogger | None = None,
    ) -> None:
        """``delay``: one-way delay (s); ``rate``: bottleneck rate (bit/s) both ways.

        ``impair`` decides each datagram's fate when it is sent (extra delay or None to
        drop); ``lose_on_arrival`` may drop it when it would arrive, looking at the
        endpoints' state at that moment.
        """
        self.now = START_TIME
        self.delay = {UP: delay, DOWN: delay}
        self.rate = rate
        self.impair = impair
        self.lose_on_arrival = lose_on_arrival
        self._busy_until = {UP: 0.0, DOWN: 0.0}
        self._queue: list[tuple[float, int, Datagram, bytes]] = []
        self._sequence = itertools.count()
        self.sent: dict[str, list[Datagram]] = {UP: [], DOWN: []}
        self.delivered: dict[str, int] = {UP: 0, DOWN: 0}
        self.dropped: dict[str, list[int]] = {UP: [], DOWN: []}
        self.response_bytes = 0
        self.response_complete = False
        self.handshake_done = False
        self._response_size: dict[int, int] = {}

        identity = identity or _shared_identity()
        client_configuration = aioquic_hooks.configure(
            QuicConfiguration(
                is_client=True,
                alpn_protocols=[ALPN],
                verify_mode=ssl.CERT_NONE,
                server_name="localhost",
                quic_logger=client_logger,
            ),
            profile,
        )
        server_profile = server_profile or profile
        server_configuration = aioquic_hooks.configure(
            QuicConfiguration(is_client=False, alpn_protocols=[ALPN], quic_logger=server_logger), server_profile
        )
        server_configuration.certificate = identity.certificate
        server_configuration.private_key = identity.private_key

        client = QuicConnection(configuration=client_configuration)
        server = QuicConnection(
            configuration=server_configuration,
            original_destination_connection_id=client.original_destination_connection_id,
        )
        self.client = Side(client, aioquic_hooks.install(client, profile))
        self.server = Side(server, aioquic_hooks.install(server, server_profile))

    # -- shortcuts

    @property
    def client_hooks(self) -> aioquic_hooks.ConnectionHooks:
        return self.client.hooks

    @property
    def server_hooks(self) -> aioquic_hooks.ConnectionHooks:
        return self.server.hooks

    # -- driving

    def handshake(self, timeout: float = 5.0) -> None:
        self.client.connection.connect(SERVER_ADDR, now=self.now)
        self._flush(self.client, UP)
        self.run_until(lambda: self.handshake_done, timeout=timeout)

    def request(self, size: int) -> int:
        """Ask the server for ``size`` bytes; returns the stream id."""
        connection = self.client.connection
        stream_id = connection.get_next_available_stream_id()
        connection.send_stream_data(stream_id, f"GET {size}".encode(), end_stream=True)
        self.response_bytes = 0
        self.response_complete = False
        self._flush(self.client, UP)
        return stream_id

    def run_until(self, condition: Callable[[], bool], timeout: float = 30.0, max_steps: int = 2_000_000) -> None:
        """Step until ``condition()`` holds; raise TimeoutError after ``timeout`` virtual s."""
        deadline = self.now + timeout
        for _ in range(max_steps):
            if condition():
                return
            if not self.step(until=deadline):
                break
        if not condition():
            raise TimeoutError(f"condition not met by virtual time {self.now - START_TIME:.3f}s")

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection from the client and run until both sides ended."""
        self.client.connection.close()
        self._flush(self.client, UP)
        self.run_until(lambda: self.client.terminated and self.server.terminated, timeout=timeout)

    def run_for(self, duration: float) -> None:
        """Step until ``duration`` virtual seconds have passed."""
        deadline = self.now + duration
        while self.step(until=deadline):
            pass
        self.now = max(self.now, deadline)

    def step(self, until: float | None = None) -> bool:
        """Process the next arrival or timer; False when nothing is due before ``until``."""
        candidates: list[tuple[float, int, str]] = []
        if self._queue:
            candidates.append((self._queue[0][0], 0, "arrival"))
        for order, side in ((1, self.client), (2, self.server)):
            if side.terminated:
                continue
            timer = side.connection.get_timer()
            if timer is not None:
                candidates.append((timer, order, "timer"))
        if not candidates:
            return False
        when, order, kind = min(candidates)
        if until is not None and when > until:
            return False
        self.now = max(self.now, when)
        if kind == "arrival":
            _, _, datagram, data = heapq.heappop(self._queue)
            direction = datagram.direction
            side = self.server if direction == UP else self.client
            if side.terminated or (self.lose_on_arrival is not None and self.lose_on_arrival(datagram)):
                self.dropped[direction].append(datagram.index)
                return True
            self.delivered[direction] += 1
            side.connection.receive_datagram(data, CLIENT_ADDR if direction == UP else SERVER_ADDR, now=self.now)
        else:
            side = self.client if order == 1 else self.server
            side.connection.handle_timer(now=self.now)
        self._process_events(side)
        self._flush(side, DOWN if side is self.server else UP)
        return True

    # -- internals

    def _process_events(self, side: Side) -> None:
        connection = side.connection
        while (event := connection.next_event()) is not None:
            if isinstance(event, events.ConnectionTerminated):
                side.terminated = True
            elif isinstance(event, events.HandshakeCompleted) and side is self.client:
                self.handshake_done = True
            elif isinstance(event, events.StreamDataReceived):
                if side is self.server and event.end_stream:
                    size = int(event.data.decode().split()[1])
                    connection.send_stream_data(event.stream_id, bytes(size), end_stream=True)
                elif side is self.client:
                    self.response_bytes += len(event.data)
                    if event.end_stream:
                        self.response_complete = True

    def _flush(self, side: Side, direction: str) -> None:
        datagrams = side.connection.datagrams_to_send(now=self.now)
        if datagrams:
            side.releases.append(Release(self.now, len(datagrams)))
        for data, _ in datagrams:
            self._transmit(direction, data)

    def _transmit(self, direction: str, data: bytes) -> None:
        datagram = Datagram(direction, len(self.sent[direction]), len(data), self.now)
        self.sent[direction].append(datagram)
        departure = self.now
        if self.rate is not None:
            departure = max(self.now, self._busy_until[direction]) + len(data) * 8 / self.rate
            self._busy_until[direction] = departure
        extra = self.impair(datagram)
        if extra is None:
            self.dropped[direction].append(datagram.index)
            return
        arrival = departure + self.delay[direction] + extra
        heapq.heappush(self._queue, (arrival, next(self._sequence), datagram, data))


__all__ = ["DOWN", "Datagram", "Release", "START_TIME", "UP", "VirtualLink", "no_impairment"]
