"""tcpdump command lines and counters (no capture is started)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from quicbed.apps import capture

STDERR = """tcpdump: listening on eth0, link-type EN10MB (Ethernet), snapshot length 128 bytes
8022 packets captured
8030 packets received by filter
8 packets dropped by kernel
"""


def test_counters() -> None:
    stats = capture.parse_stats(STDERR)
    assert stats.captured == 8022 and stats.received_by_filter == 8030
    assert stats.dropped_by_kernel == 8 and stats.dropped_by_interface is None
    assert stats.complete and stats.dropped == 8 and stats.unwritten == 0
    stats = capture.parse_stats(STDERR + "3 packets dropped by interface\n")
    assert stats.dropped_by_interface == 3 and stats.dropped == 11
    cut = capture.parse_stats("0 packets captured\n300 packets received by filter\n0 packets dropped by kernel\n")
    assert cut.unwritten == 300
    assert not capture.parse_stats("tcpdump: listening on eth0").complete
    assert capture.parse_stats("1 packet captured\n").captured == 1


class FakeNode:
    name = "server"

    def run(self, argv: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            argv,
            0,
            "Time stamp types for eth0 (use option -j "
            "to set):\n  host (Host)\n  adapter_unsynced "
            "(Adapter, not synced with system time)\n",
            "",
        )


@pytest.mark.skipif(not capture.shutil.which("tcpdump"), reason="tcpdump not installed")
def test_command_line(tmp_path: Path) -> None:
    node = FakeNode()
    assert capture.timestamp_types(node, "eth0") == ["host", "adapter_unsynced"]  # type: ignore[arg-type]
    item = capture.Capture(
        node,
        "eth0",
        tmp_path / "s.pcap",
        bpf_filter="udp port 4433",  # type: ignore[arg-type]
        direction="out",
    )
    item.timestamp_type = "adapter_unsynced"
    argv = item.argv()
    assert argv[:9] == ["tcpdump", "-i", "eth0", "-s", "128", "-w", str(tmp_path / "s.pcap"), "-n", "-Z"]
    assert argv[argv.index("-j") + 1] == "adapter_unsynced"
    assert argv[argv.index("-Q") + 1] == "out" and argv[-1] == "udp port 4433"
    features = capture.tcpdump_features()
    assert ("--time-stamp-precision=nano" in argv) == features["nano"]
    assert ("--immediate-mode" in argv) == features["immediate"]
    assert item.name == "server-eth0"
    with pytest.raises(ValueError):
        capture.Capture(node, "eth0", tmp_path / "x.pcap", direction="sideways")  # type: ignore[arg-type]
