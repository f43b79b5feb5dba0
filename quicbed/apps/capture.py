"""Packet captures (tcpdump) at chosen node interfaces, headers only, complete when stopped.

    from quicbed.apps.capture import Capture, CaptureSet
    with CaptureSet(folder) as captures:
        captures.add(net.node("server"), "eth0")        # -> folder/server-eth0.pcap
        captures.add(net.node("client"), "eth0")
        captures.start()                                 # returns once every tcpdump listens
        ...                                              # the traffic
    captures.stats["server-eth0"].dropped_by_kernel      # tcpdump's own counters

Each capture runs ``tcpdump -i IFACE -s 128 -w FILE`` in the node's namespace: 128 bytes of
each packet (Ethernet + IP + UDP/TCP headers + options and the first bytes of the QUIC
header), nanosecond time stamps where tcpdump supports them (``--time-stamp-precision
nano``), the adapter's clock (``-j adapter_unsynced``) only where the interface offers it
(veth does not: the kernel's clock is then used, the same for every namespace of the host,
so one-way delays between two captures are exact). ``--immediate-mode`` hands every
packet to tcpdump at once, so that a capture stopped right after the traffic holds all of
it. Without it (``immediate=False``: fewer wake-ups at high packet rates) the kernel hands
packets over in blocks, retired only every second, and what sits in the last block when
tcpdump is interrupted is lost (measured: all 300 packets of a short burst), so stopping
then waits 1.2 s first; :attr:`CaptureStats.unwritten` counts such packets.

**Before the qdisc.** tcpdump sees an interface's outgoing packets after its qdisc. When the
node's own interface is shaped (a netem or tbf root qdisc: a link direction leaving an endpoint
on the netns and Mininet-WiFi backends), a capture there would show departures already spaced
by the shaping and never the packets its queue dropped. Such a capture (``before_qdisc=None``,
the default, decides from the interface's root qdisc; True or False forces it) taps the
interface at its clsact hooks instead: a u32 filter on egress (which runs before the root
qdisc) and on ingress mirrors every packet to an ifb device in the same namespace, and tcpdump
listens there. The ifb discards what it is given, so nothing is sent twice; the device and the
filters are removed when the capture stops (and with the namespace). TCP's packets reach
the egress hook as GSO super-packets even where the interface's offloads are off (the kernel
cuts them only on their way to the driver), so the ifb's segmentation offloads are turned
off: it cuts them into the link's packets, each with the super-packet's time stamp, before
tcpdump sees them.

Started: :meth:`Capture.start` returns when tcpdump printed "listening on" (bounded).
Stopped: SIGINT, so tcpdump flushes and closes the pcap file, then prints its counters,
which :class:`CaptureStats` holds (``packets dropped by kernel``: the ring buffer was full;
raise ``buffer_kib``). Files are written as root (``-Z root``) so run folders need no
special permissions.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicbed.errors import BackendError, MissingDependency

if TYPE_CHECKING:
    from quicbed.backends.base import NodeHandle, Process

TCPDUMP = "tcpdump"
DEFAULT_SNAPLEN = 128
DEFAULT_BUFFER_KIB = 8192
READY_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
BLOCK_TIMEOUT = 1.2  # > libpcap's 1 s block timeout (TPACKET_V3) when not in immediate mode
# Root qdiscs that hold no packet on an emulated link's device (it is never busy): a capture
# at the interface then sees departures as sent. Any other root qdisc is tapped before.
UNSHAPED_ROOT_QDISCS = frozenset({"noqueue", "pfifo_fast", "fq_codel", "mq", "fq", "noop"})
_COUNTER = re.compile(
    r"^(\d+) packets? (captured|received by filter|dropped by kernel|"
    r"dropped by interface)",
    re.MULTILINE,
)


@dataclass
class CaptureStats:
    """tcpdump's own counters, printed when it stops."""

    captured: int | None = None  # written to the file
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None  # ring buffer full
    dropped_by_interface: int | None = None  # not every libpcap/driver reports it
    complete: bool = False  # tcpdump stopped on SIGINT and printed its counters

    @property
    def dropped(self) -> int:
        return (self.dropped_by_kernel or 0) + (self.dropped_by_interface or 0)

    @property
    def unwritten(self) -> int:
        """Packets the filter accepted that never reached the file (0 for a complete capture;
        without immediate mode, those of the last, not yet handed over, block)."""
        if self.received_by_filter is None or self.captured is None:
            return 0
        return max(0, self.received_by_filter - (self.dropped_by_kernel or 0) - self.captured)

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "dropped": self.dropped, "unwritten": self.unwritten}


def parse_stats(text: str) -> CaptureStats:
    """The counters from tcpdump's stderr."""
    stats = CaptureStats()
    names = {
        "captured": "captured",
        "received by filter": "received_by_filter",
        "dropped by kernel": "dropped_by_kernel",
        "dropped by interface": "dropped_by_interface",
    }
    for count, what in _COUNTER.findall(text):
        setattr(stats, names[what], int(count))
    stats.complete = stats.captured is not None
    return stats


@lru_cache(maxsize=1)
def tcpdump_features() -> dict[str, bool]:
    """Which options this tcpdump has (from its --help)."""
    path = shutil.which(TCPDUMP)
    if path is None:
        raise MissingDependency("'tcpdump' is not installed (fix: apt-get install tcpdump)")
    text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10, check=False)
    usage = text.stdout + text.stderr
    return {
        "nano": "--time-stamp-precision" in usage,
        "immediate": "--immediate-mode" in usage,
        "tstamp_type": "-j tstamptype" in usage or "[ -j " in usage,
    }


def timestamp_types(node: NodeHandle, interface: str) -> list[str]:
    """Time stamp types the interface offers (``tcpdump -J``)."""
    result = node.run([TCPDUMP, "-J", "-i", interface], timeout=10, check=False)
    return re.findall(r"^\s+(\S+) \(", result.stdout, re.MULTILINE)


class Capture:
    """One tcpdump at one interface of a node."""

    def __init__(
        self,
        node: NodeHandle,
        interface: str,
        path: Path,
        *,
        snaplen: int = DEFAULT_SNAPLEN,
        bpf_filter: str | None = None,
        buffer_kib: int = DEFAULT_BUFFER_KIB,
        immediate: bool = True,
        direction: str | None = None,
        adapter_clock: bool = True,
        before_qdisc: bool | None = None,
        log_dir: Path | None = None,
    ) -> None:
        if direction not in (None, "in", "out", "inout"):
            raise ValueError("direction must be in, out or inout")
        self.node = node
        self.interface = interface
        self.path = Path(path)
        self.snaplen = snaplen
        self.bpf_filter = bpf_filter
        self.buffer_kib = buffer_kib
        self.immediate = immediate
        self.direction = direction
        self.adapter_clock = adapter_clock
        self.before_qdisc = before_qdisc
        self.tap: QdiscBypass | None = None
        self.log_dir = Path(log_dir) if log_dir is not None else None  # tcpdump's own output
        self.process: Process | None = None
        self.stats: CaptureStats | None = None
        self.timestamp_type: str = "host"
        self.nanoseconds = False

    @property
    def name(self) -> str:
        return f"{self.node.name}-{self.interface}"

    @property
    def listen_on(self) -> str:
        """The device tcpdump reads: the interface, or the tap that sees it before its qdisc."""
        return self.tap.device if self.tap else self.interface

    def argv(self) -> list[str]:
        features = tcpdump_features()
        argv = [
            TCPDUMP,
            "-i",
            self.listen_on,
            "-s",
            str(self.snaplen),
            "-w",
            str(self.path),
            "-n",
            "-Z",
            "root",
            "-B",
            str(self.buffer_kib),
        ]
        if self.timestamp_type != "host":
            argv += ["-j", self.timestamp_type]
        if features["nano"]:
            argv.append("--time-stamp-precision=nano")
            self.nanoseconds = True
        if self.immediate and features["immediate"]:
            argv.append("--immediate-mode")
        if self.direction:
            argv += ["-Q", self.direction]
        if self.bpf_filter:
            argv.append(self.bpf_filter)
        return argv

    def launch(self) -> None:
        """Start tcpdump (without waiting for it: see :meth:`wait_listening`)."""
        if self.process is not None:
            raise BackendError(f"capture {self.name} already started")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        root = root_qdisc(self.node, self.interface)
        shaped = root is not None and root not in UNSHAPED_ROOT_QDISCS
        if self.before_qdisc or (self.before_qdisc is None and shaped):
            self.tap = QdiscBypass(self.node, self.interface, root)
            self.tap.install()
        elif self.adapter_clock and "adapter_unsynced" in timestamp_types(self.node, self.interface):
            self.timestamp_type = "adapter_unsynced"
        try:
            self.process = self.node.start(
                self.argv(), name=f"{self.path.stem}.tcpdump", log_dir=self.log_dir or self.path.parent
            )
        except BaseException:
            self._remove_tap()
            raise

    def _remove_tap(self) -> None:
        if self.tap is not None:
            self.tap.remove()

    def wait_listening(self, timeout: float = READY_TIMEOUT) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while "listening on" not in self.process.errors():
            if not self.process.running:
                raise BackendError(
                    f"tcpdump on {self.name} exited ({self.process.returncode}): {self.process.errors().strip()}"
                )
            if time.monotonic() > deadline:
                self.process.stop()
                raise BackendError(
                    f"tcpdump on {self.name} not listening after {timeout:g} s: {self.process.errors().strip()}"
                )
            time.sleep(0.02)

    def start(self, timeout: float = READY_TIMEOUT) -> Capture:
        self.launch()
        self.wait_listening(timeout)
        return self

    def signal_stop(self) -> None:
        if self.process is not None and self.process.running:
            if not self.immediate:  # let the kernel hand over its last block first
                time.sleep(BLOCK_TIMEOUT)
            try:
                os.kill(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def wait_stopped(self, timeout: float = STOP_TIMEOUT) -> CaptureStats:
        assert self.process is not None
        try:
            self.process.wait(timeout)
        except BackendError:
            self.process.stop()
        finally:
            self._remove_tap()
        self.stats = parse_stats(self.process.errors())
        return self.stats

    def stop(self, timeout: float = STOP_TIMEOUT) -> CaptureStats:
        """SIGINT (tcpdump flushes and closes the file), wait, read its counters."""
        if self.process is None:
            return CaptureStats()
        if self.stats is not None:
            return self.stats
        self.signal_stop()
        return self.wait_stopped(timeout)

    def info(self) -> dict[str, Any]:
        return {
            "node": self.node.name,
            "interface": self.interface,
            "path": str(self.path),
            "snaplen": self.snaplen,
            "filter": self.bpf_filter,
            "timestamp_type": self.timestamp_type,
            "nanoseconds": self.nanoseconds,
            "immediate": self.immediate,
            "tapped": self.tap.describe() if self.tap else "at the interface",
            **({"own_qdisc": self.tap.counters()} if self.tap else {}),
            "stats": self.stats.to_dict() if self.stats else None,
        }

    def __enter__(self) -> Capture:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_ROOT_QDISC = re.compile(r"^qdisc (\S+) \S+ root\b", re.MULTILINE)
_QDISC_COUNTERS = re.compile(r"dropped (\d+), overlimits (\d+)")


def root_qdisc(node: NodeHandle, interface: str) -> str | None:
    """The kind of the interface's root qdisc (None when tc cannot tell)."""
    result = node.run(["tc", "qdisc", "show", "dev", interface, "root"], timeout=10, check=False)
    match = _ROOT_QDISC.search(result.stdout)
    return match.group(1) if match else None


class QdiscBypass:
    """Mirrors an interface's packets, outgoing before its root qdisc and incoming on arrival,
    to an ifb device for a capture (see the module's docstring)."""

    def __init__(self, node: NodeHandle, interface: str, qdisc: str | None) -> None:
        self.node = node
        self.interface = interface
        self.qdisc = qdisc
        self.device = f"qbtap-{interface}"[:15]  # IFNAMSIZ
        self.installed = False
        # the root qdisc's counters when the tap was removed (tc -s): packets it dropped, and how
        # often it held one back (a token bucket out of tokens: the host's own link was the limit)
        self.dropped: int | None = None
        self.overlimits: int | None = None

    def commands(self) -> list[list[str]]:
        mirror = [
            "protocol",
            "all",
            "u32",
            "match",
            "u32",
            "0",
            "0",
            "action",
            "mirred",
            "egress",
            "mirror",
            "dev",
            self.device,
        ]
        return [
            ["ip", "link", "add", self.device, "type", "ifb"],
            ["ip", "link", "set", "dev", self.device, "up"],
            # no queue of its own: a burst must not overflow the ifb's 32-packet default
            ["tc", "qdisc", "replace", "dev", self.device, "root", "noqueue"],
            # TCP hands the qdisc GSO super-packets whatever the interface's offloads (the
            # kernel segments them only on their way to the driver): with segmentation off,
            # the ifb cuts them into the packets the link carries before tcpdump sees them
            ["ethtool", "-K", self.device, "tso", "off", "gso", "off"],
            ["tc", "qdisc", "replace", "dev", self.interface, "clsact"],
            ["tc", "filter", "add", "dev", self.interface, "egress", *mirror],
            ["tc", "filter", "add", "dev", self.interface, "ingress", *mirror],
        ]

    def install(self) -> None:
        self.remove()  # a leftover of an interrupted run
        self.installed = True
        for argv in self.commands():
            result = self.node.run(argv, timeout=10, check=False)
            if result.returncode != 0:
                self.remove()
                raise BackendError(
                    f"capturing {self.node.name}:{self.interface} before its qdisc ({self.qdisc}) failed: "
                    f"'{' '.join(argv)}': {result.stderr.strip()} (the kernel needs ifb, clsact, u32 and "
                    "mirred: CONFIG_IFB, CONFIG_NET_SCH_INGRESS, CONFIG_NET_CLS_U32, CONFIG_NET_ACT_MIRRED; and ethtool)"
                )

    def remove(self) -> None:
        if self.installed:  # what the qdisc did while tapped: did it hold the sender back?
            shown = self.node.run(
                ["tc", "-s", "qdisc", "show", "dev", self.interface, "root"], timeout=10, check=False
            ).stdout
            counters = _QDISC_COUNTERS.search(shown)
            if counters:
                self.dropped, self.overlimits = int(counters.group(1)), int(counters.group(2))
        self.node.run(["tc", "qdisc", "del", "dev", self.interface, "clsact"], timeout=10, check=False)
        self.node.run(["ip", "link", "del", self.device], timeout=10, check=False)
        self.installed = False

    def describe(self) -> str:
        return f"before the {self.qdisc} qdisc, mirrored to {self.device}"

    def counters(self) -> dict[str, str | int | None]:
        return {"kind": self.qdisc, "dropped": self.dropped, "overlimits": self.overlimits}


class CaptureSet:
    """Several captures started together (all listening before start() returns) and stopped
    together (all SIGINTed at once, then waited for)."""

    def __init__(self, directory: Path, **defaults: Any) -> None:
        self.directory = Path(directory)
        self.defaults = defaults
        self.captures: dict[str, Capture] = {}
        self.stats: dict[str, CaptureStats] = {}

    def add(self, node: NodeHandle, interface: str, name: str | None = None, **options: Any) -> Capture:
        capture_name = name or f"{node.name}-{interface}"
        capture = Capture(node, interface, self.directory / f"{capture_name}.pcap", **{**self.defaults, **options})
        self.captures[capture_name] = capture
        return capture

    def path(self, name: str) -> Path:
        return self.captures[name].path

    def start(self, timeout: float = READY_TIMEOUT) -> CaptureSet:
        try:
            for capture in self.captures.values():
                capture.launch()
            for capture in self.captures.values():
                capture.wait_listening(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> dict[str, CaptureStats]:
        for capture in self.captures.values():
            if capture.stats is None:
                capture.signal_stop()
        for name, capture in self.captures.items():
            if capture.process is not None:
                self.stats[name] = capture.stop(timeout)
        return self.stats

    def info(self) -> dict[str, Any]:
        return {name: capture.info() for name, capture in self.captures.items()}

    def __enter__(self) -> CaptureSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
