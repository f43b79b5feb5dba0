"""Measure what an emulated wired link really does, next to what it was configured to do.

A two-host network is built; for each configuration the a -> b direction of its link is
reshaped and probed. Loss and delay are probed with quicbed's UDP probe (per-packet
one-way delays on one clock); rate with iperf3, whose C sender saturates the link even in a
slow microVM. On the netns backend the live link's qdiscs are replaced between cases; on
ns3, whose cables are fixed when the channel program starts, the network is built again
for each case. The hosts' neighbour entries are pinned first, so that no ARP exchange crosses
the shaped link during a probe. Used by bench/links.py, bench/backends.py and the
link-accuracy tests.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicbed import Topology
from quicbed.analysis.linkstats import HEADERS_BYTES, LinkStats, ProbeLog, link_stats
from quicbed.backends import create
from quicbed.backends.base import MacStatistics, Network, Process, ReshapableLinks
from quicbed.errors import BackendError, MachineBusy
from quicbed.host.steal import QUIET_STEAL, Steal, wait_for_quiet_machine
from quicbed.spec.link import Shape, WiredLink

PROBE_PORT = 5999
IPERF_PORT = 5201
RATE_PAYLOAD = 1400
#: seconds the sender runs before the rate window opens (the link's queue fills)
RATE_SETTLE = 1.0
#: the sender's time beyond the window, stopped once the window closes (a microVM reads counters slowly)
RATE_SENDER_SPARE = 60.0
#: probes made for one measurement when the machine itself drops datagrams
PROBE_ATTEMPTS = 3
#: pings (1 s each) a host sends the other to learn its link-layer address over a lossy link
NEIGHBOUR_TRIES = 30


@dataclass(frozen=True)
class ProbePlan:
    """How many datagrams of which size at which rate (per second)."""

    count: int = 2000
    rate: float = 500.0
    size: int = 200


class LinkCalibrator:
    """A two-host network whose a->b direction is reshaped and measured, case after case."""

    def __init__(self, work_dir: Path | None = None, backend: str = "netns") -> None:
        self.backend = backend
        self.network: Network = create(backend, self._topology())
        self._scratch = tempfile.TemporaryDirectory(prefix="quicbed-calibration-")
        self.work_dir = work_dir or Path(self._scratch.name)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._cases = 0
        self._last_rejected = 0

    def __enter__(self) -> "LinkCalibrator":
        self.network.__enter__()
        self._pin_neighbours()
        return self

    def __exit__(self, *exc: object) -> None:
        self.network.__exit__(*exc)
        self._scratch.cleanup()

    @staticmethod
    def _topology() -> Topology:
        topo = Topology("calibration", description="a -> b shaped, b -> a ideal")
        topo.add_link(topo.add_host("a"), topo.add_host("b"), name="probed")
        return topo

    def configure(self, shape: dict[str, Any]) -> Shape:
        topo = self._topology()
        topo.set_link_shape("probed", direction="forward", reset=True, **shape)
        probed = topo.link("probed")
        assert isinstance(probed, WiredLink)  # _topology() makes it with add_link
        if isinstance(self.network, ReshapableLinks):  # (netns) on the live link
            self.network.replace_link_shapes(probed)
        else:  # (ns3) a new network
            self.network.__exit__(None, None, None)
            self.network = create(self.backend, topo)
            self.network.__enter__()
            self._pin_neighbours()
        live = self.network.topology.link("probed")
        assert isinstance(live, WiredLink)
        return live.forward

    def _pin_neighbours(self) -> None:
        """a and b learn each other's link-layer address once and keep it (a permanent entry).
        Otherwise an ARP request lost on the shaped link holds back, then discards, up to a second
        of a probe's datagrams (measured: 858 of 3000 at 30 % loss), and that loss would be
        blamed on the link; a stale entry probed again mid-probe can do the same."""
        a, b = self.network.node("a"), self.network.node("b")
        for node, peer in ((a, b), (b, a)):
            device = node.interfaces[0]
            for _ in range(NEIGHBOUR_TRIES):
                node.run(["ping", "-c", "1", "-W", "1", peer.address], check=False, timeout=10)
                entry = node.run(["ip", "neigh", "show", "to", peer.address, "dev", device]).stdout.split()
                if "lladdr" in entry:
                    break
            else:
                raise BackendError(
                    f"{node.name} did not learn {peer.name}'s link-layer address ({peer.address} on {device}) in "
                    f"{NEIGHBOUR_TRIES} pings over the probed link"
                )
            mac = entry[entry.index("lladdr") + 1]
            node.run(["ip", "neigh", "replace", peer.address, "lladdr", mac, "dev", device, "nud", "permanent"])

    def probe(self, shape: dict[str, Any], plan: ProbePlan) -> tuple[Shape, LinkStats]:
        """Loss, loss runs and one-way delay of ``plan`` datagrams over a link with ``shape``.

        A probe in which the machine itself dropped datagrams (socket buffers of a or b, or the
        kernel's receive backlog), or (ns3) the channel did not keep real time, is made again, up
        to ``PROBE_ATTEMPTS`` times in all, after waiting for a quiet machine: its loss or delays
        would blame the link for the machine's load. MachineBusy when the hypervisor took CPU
        time during every attempt.
        """
        configured = self.configure(shape)
        failures, stolen = [], []
        for attempt in range(PROBE_ATTEMPTS):
            if attempt:  # not inside the hypervisor's spell that may have spoilt the last one
                wait_for_quiet_machine()
            with Steal() as steal:
                drops, late = self._probe_once(configured, plan)
            if not drops and not late:
                return configured, link_stats(self._last_log, plan.count)
            stolen.append(steal.share)
            failures.append(
                f"the machine dropped {drops} datagrams (socket buffers or the receive backlog overflowed)"
                if drops
                else "; ".join(late)
            )
        message = f"none of {PROBE_ATTEMPTS} probes measured the link alone: {' | '.join(failures)}"
        if min(stolen) > QUIET_STEAL:
            raise MachineBusy(
                f"{message}; the hypervisor took {min(stolen):.1%}-{max(stolen):.1%} of the CPU time during each"
            )
        raise BackendError(f"{message}; the machine was too busy (lower the probe rate or the machine's load)")

    def _probe_once(self, configured: Shape, plan: ProbePlan) -> tuple[int, list[str]]:
        """One probe; returns how many datagrams the machine itself dropped meanwhile, and
        (ns3) why the channel did not keep real time during it."""
        self._cases += 1
        folder = self.work_dir / f"case{self._cases}"
        folder.mkdir(parents=True, exist_ok=True)
        log_path, ready = folder / "probe.csv", folder / "receiver.ready"
        a, b = self.network.node("a"), self.network.node("b")
        python = sys.executable
        receiver = b.start(
            [
                python,
                "-m",
                "quicbed.apps.udpprobe",
                "recv",
                "--port",
                str(PROBE_PORT),
                "--out",
                str(log_path),
                "--idle-timeout",
                str(max(3.0, 4 * configured.delay + 2.0)),
                "--ready-file",
                str(ready),
            ],
            name="probe-recv",
            log_dir=folder,
        )
        deadline = time.monotonic() + 120
        while not ready.exists():
            if not receiver.running or time.monotonic() > deadline:
                raise BackendError(f"probe receiver did not start: {receiver.errors()}")
            time.sleep(0.05)
        before = self._kernel_counters()
        if isinstance(self.network, MacStatistics):
            self.network.reset_stats()
        started = time.monotonic()
        a.run(
            [
                python,
                "-m",
                "quicbed.apps.udpprobe",
                "send",
                "--dest",
                b.address,
                "--port",
                str(PROBE_PORT),
                "--count",
                str(plan.count),
                "--rate",
                str(plan.rate),
                "--size",
                str(plan.size),
            ],
            timeout=plan.count / plan.rate * 5 + 120,
        )
        receiver.wait(timeout=180)
        late = (
            self.network.mac_stats(window=(started, time.monotonic()))["invalid_reasons"]
            if isinstance(self.network, MacStatistics)
            else []
        )
        after = self._kernel_counters()
        delta = {key: after[key] - before[key] for key in after}
        self._last_log = ProbeLog.read(log_path)
        self._last_rejected = delta["b:Ip:InHdrErrors"] + delta["b:Udp:InErrors"]
        return sum(delta[f"{node}:Udp:{name}"] for node in "ab" for name in ("RcvbufErrors", "SndbufErrors")) + delta[
            "backlog"
        ], late

    def _kernel_counters(self) -> dict[str, int]:
        """a's and b's IP and UDP counters ("b:Udp:RcvbufErrors") and the receive backlog's drops."""
        counters = {}
        for name in ("a", "b"):
            lines = [
                line.split()
                for line in self.network.node(name).run(["cat", "/proc/net/snmp"]).stdout.splitlines()
                if line.startswith(("Ip:", "Udp:"))
            ]
            for header, values in zip(lines[::2], lines[1::2]):
                counters.update({f"{name}:{header[0]}{key}": int(value) for key, value in zip(header[1:], values[1:])})
        # the per-CPU backlog is the machine's, not a namespace's: column 2 counts its drops
        with open("/proc/net/softnet_stat") as softnet:
            counters["backlog"] = sum(int(line.split()[1], 16) for line in softnet)
        return counters

    def last_rejected(self) -> int:
        """Datagrams b's kernel rejected in the latest probe: bad IP header (checksum included) or
        UDP errors (checksum, length; buffer overflows are excluded by :meth:`probe`)."""
        return self._last_rejected

    def last_log(self) -> ProbeLog:
        """The receiver's log of the latest probe (for measures beyond LinkStats)."""
        return self._last_log

    def rate(self, shape: dict[str, Any], seconds: float = 3.0) -> tuple[Shape, float]:
        """Wire rate (bit/s of Ethernet frames, as tbf counts them) that crossed the link under a 30 % overload.

        Read from b's interface counter over a window that starts once the link's queue is full
        and ends before the sender stops: iperf3's own figure also counts its start-up and tail
        and varied by several percent from run to run.
        """
        configured = self.configure(shape)
        if configured.rate is None:
            raise ValueError("rate() needs a shape with a rate")
        a, b = self.network.node("a"), self.network.node("b")
        server = b.start(["iperf3", "-s", "-p", str(IPERF_PORT)], name="iperf3-server")
        client = None
        try:
            offered = configured.rate * 1.3 * RATE_PAYLOAD / (RATE_PAYLOAD + HEADERS_BYTES)
            deadline = time.monotonic() + 120
            while f":{IPERF_PORT} " not in b.run(["ss", "-ltnH"]).stdout:
                if not server.running or time.monotonic() > deadline:
                    raise BackendError(f"iperf3 server did not start listening: {server.errors()}")
                time.sleep(0.1)
            client = a.start(
                [
                    "iperf3",
                    "-c",
                    b.address,
                    "-p",
                    str(IPERF_PORT),
                    "-u",
                    "-b",
                    str(int(offered)),
                    "-l",
                    str(RATE_PAYLOAD),
                    "-t",
                    str(seconds + RATE_SENDER_SPARE),
                ],
                name="iperf3-client",
                log_dir=self.work_dir,
            )
            time.sleep(RATE_SETTLE)
            first = self._received_bytes(server, b.interfaces[0])
            time.sleep(seconds)
            last = self._received_bytes(server, b.interfaces[0])
            if not client.running:
                raise BackendError(
                    f"iperf3 client ended before the measurement window closed: "
                    f"{client.errors() or client.output()[-300:]}"
                )
        finally:
            if client is not None:
                client.stop()
            server.stop()
        return configured, (last[1] - first[1]) * 8 / (last[0] - first[0])

    @staticmethod
    def _received_bytes(process: Process, interface: str) -> tuple[float, int]:
        """(monotonic time, bytes received on ``interface``) in the namespace of a running process.

        Read through /proc/PID/net/dev: no process to start, so the time is exact even in a slow microVM.
        """
        for line in Path(f"/proc/{process.pid}/net/dev").read_text().splitlines():
            name, _, counters = line.partition(":")
            if name.strip() == interface:
                return time.monotonic(), int(counters.split()[0])
        raise BackendError(f"interface {interface} not found in the namespace of {process.name}")
