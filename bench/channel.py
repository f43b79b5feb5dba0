#!/usr/bin/env python3
"""How much cell can the ns-3 channel simulate in real time on this machine? (prints figures)

    sudo .venv/bin/python bench/channel.py                        # the grid below, ~8 minutes
    sudo .venv/bin/python bench/channel.py --stations 1,40 --phys ac20 --seconds 12
    sudo .venv/bin/python bench/channel.py --no-profile --json out.json
    sudo .venv/bin/python bench/channel.py --skim both --stations 20 --phys ac20   # A/B
    sudo .venv/bin/python bench/channel.py --realtime both --stations 1 --phys ac80  # A/B
    sudo .venv/bin/python bench/channel.py --ledger both --stations 1 --phys ac80    # its cost

For each cell of the grid (stations x PHY) one AP (topologies/enterprise_ap.py) carries one
saturated TCP download (iperf3) per station. After a warm-up the channel's statistics are
reset and read again before the flows end; that window gives: the goodput carried, the
share of it the channel spent more than 1 ms and 4 ms behind real time (quicbed's validity
rules: at most 2 % and 1 %), the channel process's use of its core and the whole machine's,
simulator events, data MPDUs and PPDUs (A-MPDUs) per second, MPDUs per A-MPDU, and where
the channel's core time goes: a `perf` sample of the process (499 Hz, --no-profile to skip)
summed by component (see COMPONENTS). A cell "keeps real time" when the run would be valid.
As the runner does (isolate_channel), the channel has the last core to itself and iperf3 the
others; --isolate simulator leaves only its simulator thread there (its TAP threads join
iperf3), --isolate off pins nothing, --isolate all measures each.

PHYs: n20 (802.11n 20 MHz MCS 7), ac20 (802.11ac 20 MHz MCS 7), ac80 (80 MHz MCS 9) and
ac80x2 / ac80x3 (2 or 3 spatial streams; any PHY name takes an xN suffix). --skim both runs
each cell with skimming receivers off and on (docs/ns3-backend.md), with the same ns-3 seeds;
--realtime both with ns-3's real-time simulator and the channel's own paced one; --ledger both
without and with the frame ledger (what following every frame costs). "spin" is
the share of the window the paced simulator spun on the clock (realtime_spin_us; part of
the channel's core use that is waiting, not work).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.apps import iperf  # noqa: E402
from quicbed.host.signals import install_termination_handlers  # noqa: E402
from quicbed.backends.ns3 import build  # noqa: E402
from quicbed.backends.ns3.network import Ns3Network  # noqa: E402
from quicbed.runner.transfer import isolated_channel  # noqa: E402
from quicbed.spec.loader import load_topology  # noqa: E402

PHYS = {
    "n20": {"standard": "802.11n", "width": 20, "mcs": 7},
    "ac20": {"standard": "802.11ac", "width": 20, "mcs": 7},
    "ac80": {"standard": "802.11ac", "width": 80, "mcs": 9},
}
WARMUP_S = 3.0  # slow start and association settle before the window opens
TAIL_S = 1.0  # the window closes this long before the flows end
FIRST_PORT = 5301

#: perf symbols (dso or symbol, by regular expression, first match wins) by component
COMPONENTS: list[tuple[str, str]] = [
    ("frame ledger", r"FrameLedger|Identify|IpOffset"),  # (its packets' CopyData: packet copies)
    (
        "scheduling, real-time sync",
        r"Scheduler|SimulatorImpl|Simulator::|EventImpl|EventId|Synchronizer|"
        r"clock_gettime|clock_nanosleep|nanosleep|hrtimer|vdso|futex|schedule|"
        r"pick_next|__switch_to|finish_task_switch|Timer|Time::",
    ),
    (
        "PHY (every receiver)",
        r"Interference|PhyEntity|WifiPhy|YansWifi|HtPhy|VhtPhy|OfdmPhy|DsssPhy|ErrorRate|"
        r"WifiTxVector|WifiMode|WifiPpdu|Propagation|SignalNoise|Ppdu|PhyHeader|"
        r"CcaIndication|Spectrum|ns3::Nist|Table|erfc|exp|log|pow|WifiSpectrum",
    ),
    (
        "MAC",
        r"Mac|FrameExchange|Txop|ChannelAccess|WifiPsdu|WifiMpdu|Mpdu|Msdu|BlockAck|Originator|Recipient|"
        r"RemoteStation|Ampdu|Amsdu|WifiAck|WifiProtection|WifiTxParameters|WifiTxTimer|Aggregator",
    ),
    (
        "TAP reads and writes",
        r"FdNetDevice|QbTap|TapWriter|tun_|ksys_read|ksys_write|vfs_read|vfs_write|"
        r"__x64_sys_read|__x64_sys_write|sock_|tcp_|ip_|__netif|netif_|napi|skb|"
        r"net_rx|__dev_queue|dev_hard|veth|br_|nf_|ipt_|inet",
    ),
    (
        "packet copies",
        r"memcpy|memmove|Packet::|Buffer::|PacketMetadata|ByteTag|PacketTag|Header|Trailer|"
        r"CopyData|AddAtEnd|AddAtStart|Fragment",
    ),
    ("memory allocation", r"malloc|free|_int_|operator new|operator delete|cfree|realloc|tcache|arena"),
    (
        "statistics, FastACK, lag, logging",
        r"qbchannel::|FastAck|LagMeter|TxCounters|TracedCallback|"
        r"LogComponent|Trace|Callback",
    ),
]


@dataclass
class Cell:
    stations: int
    phy: str
    skim: bool = True
    realtime: str = "paced"
    spin_us: int = 0
    isolate: str = "process"  # isolate_channel: process, simulator or off
    ledger: bool = True  # the frame ledger (frame_ledger)

    def radio(self) -> dict:
        name, _, streams = self.phy.partition("x")
        if name not in PHYS or (streams and not streams.isdigit()):
            raise SystemExit(
                f"bench/channel.py: unknown PHY {self.phy!r} (choose from {', '.join(PHYS)}, "
                "with an optional xN for N spatial streams)"
            )
        return {**PHYS[name], "spatial_streams": int(streams or 0)}


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def profile(pid: int, seconds: float, folder: Path) -> subprocess.Popen | None:
    if shutil.which("perf") is None:
        return None
    return subprocess.Popen(
        ["perf", "record", "-F", "499", "-p", str(pid), "-o", str(folder / "perf.data"), "--", "sleep", f"{seconds:g}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def components(folder: Path) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Share of the samples by component, and the top symbols."""
    report = subprocess.run(
        [
            "perf",
            "report",
            "-i",
            str(folder / "perf.data"),
            "--stdio",
            "--no-children",
            "--sort",
            "dso,sym",
            "--percent-limit",
            "0",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    shares: dict[str, float] = {name: 0.0 for name, _ in COMPONENTS}
    shares["other"] = 0.0
    top: list[tuple[float, str]] = []
    for line in report.splitlines():
        found = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
        if not found:
            continue
        share, dso, symbol = float(found.group(1)), found.group(2), found.group(3).strip()
        name = next((name for name, pattern in COMPONENTS if re.search(pattern, symbol)), None)
        if name is None and dso == "[kernel.kallsyms]":
            name = "scheduling, real-time sync" if re.search(r"sched|idle|irq", symbol) else "TAP reads and writes"
        shares[name or "other"] += share
        top.append((share, f"{dso.split('/')[-1]} {symbol[:70]}"))
    return shares, sorted(top, reverse=True)[:8]


def measure(cell: Cell, seconds: float, profiled: bool) -> dict:
    topo = load_topology(
        str(ROOT / "topologies" / "enterprise_ap.py"), {"stations": cell.stations, **cell.radio(), "wired_delay": "1ms"}
    )
    window = seconds - WARMUP_S - TAIL_S
    scratch = Path(tempfile.mkdtemp(prefix="quicbed-bench-channel-"))
    try:
        with (
            Ns3Network(
                topo,
                skim_receivers=cell.skim,
                realtime=cell.realtime,
                realtime_spin_us=cell.spin_us,
                frame_ledger=cell.ledger,
                run=1,
            ) as network,
            contextlib.ExitStack() as isolation,
        ):
            if cell.isolate != "off":  # as the runner does (isolate_channel): iperf3 off the channel's core
                isolation.enter_context(isolated_channel(network, cell.isolate))
            server = network.node("server")
            servers = [iperf.start_server(server, port=FIRST_PORT + i) for i in range(cell.stations)]
            try:
                flows = [
                    iperf.start(
                        network.node(f"sta{i + 1}"),
                        server.address,
                        port=FIRST_PORT + i,
                        duration=seconds,
                        reverse=True,
                        name=f"download-{i + 1}",
                    )
                    for i in range(cell.stations)
                ]
                time.sleep(WARMUP_S)
                network.reset_stats()
                busy0 = machine_busy()
                perf = profile(network.channel.pid, window - 0.5, scratch) if profiled else None
                time.sleep(window)
                stats = network.mac_stats()
                busy1 = machine_busy()
                results = [flow.result() for flow in flows]
                if perf is not None:
                    perf.wait(timeout=30)
            finally:
                for listener in servers:
                    listener.stop()
        shares, top = components(scratch) if profiled and (scratch / "perf.data").exists() else ({}, [])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ap = stats["radios"]["ap1:wifi"]
    sim = stats["interval"]["sim_s"] or 1.0
    failed = [r.error for r in results if r.error]
    return {
        "stations": cell.stations,
        "phy": cell.phy,
        "radio": cell.radio(),
        "skim": cell.skim,
        "realtime": cell.realtime,
        "spin_us": cell.spin_us,
        "isolate": cell.isolate,
        "ledger": cell.ledger,
        "goodput_bps": sum(r.throughput or 0 for r in results),
        "flows_failed": failed,
        "valid": stats["valid"],
        "invalid_reasons": stats["invalid_reasons"],
        "behind_1ms_share": stats.get("slow_share"),
        "behind_4ms_share": stats.get("behind_share"),
        "channel_core": stats["cpu_share"],
        "spinning": spinning(stats["interval"]),
        "machine": (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]),
        "events_per_s": stats["interval"].get("events", 0) / sim,
        "mpdus_per_s": ap["data_mpdus"] / sim,
        "ppdus_per_s": ap["data_psdus"] / sim,
        "mpdus_per_ampdu": ap["mpdus_per_ampdu"]["mean"],
        "phy_rate_bps": ap["data_phy_rate_max_bps"],
        "profile": shares,
        "top_symbols": top,
    }


def spinning(interval: dict) -> float:
    """Share of the window the paced simulator spun on the clock waiting for an event (part
    of the channel's core use that is waiting, not work)."""
    waits = interval.get("waits") or {}
    return waits.get("spin_s", 0.0) / interval["wall_s"] if interval.get("wall_s") else 0.0


def share(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.2%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", default="1,10,20,40", help="comma-separated (default 1,10,20,40)")
    parser.add_argument("--phys", default="n20,ac20,ac80,ac80x3", help="comma-separated (default n20,ac20,ac80,ac80x3)")
    parser.add_argument("--seconds", type=float, default=12.0, help="each cell's downloads (default 12)")
    parser.add_argument("--skim", choices=("on", "off", "both"), default="on", help="skimming receivers (default on)")
    parser.add_argument(
        "--realtime",
        choices=("paced", "ns3", "both"),
        default="paced",
        help="the real-time simulator: quicbed's paced one (default) or ns-3's",
    )
    parser.add_argument(
        "--spin-us",
        type=int,
        default=0,
        help="the paced simulator spins on the clock before an event this close (default 0)",
    )
    parser.add_argument(
        "--isolate",
        choices=("process", "simulator", "off", "all"),
        default="process",
        help="where the channel's threads run, as isolate_channel: all of them on the last core "
        "(default), its simulator thread alone there, or anywhere; all: each in turn",
    )
    parser.add_argument(
        "--ledger",
        choices=("on", "off", "both"),
        default="on",
        help="the channel's frame ledger (default on); both: its cost, off then on",
    )
    parser.add_argument("--no-profile", action="store_true", help="no perf sample")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("run as root: the cells are network namespaces and TAP devices")
    if args.seconds < WARMUP_S + TAIL_S + 3:
        parser.error(f"--seconds must be at least {WARMUP_S + TAIL_S + 3:g}")
    reason = build.missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    build.ensure_built(quiet=False)
    install_termination_handlers()  # Ctrl-C, SIGTERM, SIGHUP: the cell in progress is cleaned up
    skims = {"on": [True], "off": [False], "both": [False, True]}[args.skim]
    realtimes = {"paced": ["paced"], "ns3": ["ns3"], "both": ["ns3", "paced"]}[args.realtime]
    isolations = ["process", "simulator", "off"] if args.isolate == "all" else [args.isolate]
    ledgers = {"on": [True], "off": [False], "both": [False, True]}[args.ledger]
    cells = [
        Cell(int(n), phy, skim, realtime, args.spin_us, isolate, ledger)
        for phy in args.phys.split(",")
        for n in args.stations.split(",")
        for skim in skims
        for realtime in realtimes
        for isolate in isolations
        for ledger in ledgers
    ]
    for cell in cells:
        cell.radio()  # an unknown PHY is refused before anything runs
    profiled = not args.no_profile and shutil.which("perf") is not None
    print(
        f"quicbed channel capacity, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"kernel {os.uname().release}; {args.seconds:g} s per cell, window {args.seconds - WARMUP_S - TAIL_S:g} s"
        f"{', perf at 499 Hz' if profiled else ', no profile'}"
    )
    print(
        "stations phy      skim realtime isolate   ledger goodput  >1ms    >4ms    valid  channel (spin) machine  events/s  MPDU/s  PPDU/s  MPDU/PPDU"
    )
    figures, started = [], time.monotonic()
    for cell in cells:
        row = measure(cell, args.seconds, profiled)
        figures.append(row)
        print(
            f"{cell.stations:8d} {cell.phy:<8} {'on ' if cell.skim else 'off'}  {cell.realtime:<8} {cell.isolate:<9} "
            f"{'on ' if cell.ledger else 'off'}  {row['goodput_bps'] / 1e6:6.1f}M {share(row['behind_1ms_share'])} "
            f"{share(row['behind_4ms_share'])}  {'yes' if row['valid'] else 'no ':5}  {row['channel_core']:5.0%}  "
            f"{row['spinning']:4.0%}    {row['machine']:5.0%}  {row['events_per_s']:8.0f}  {row['mpdus_per_s']:6.0f}  {row['ppdus_per_s']:6.0f}"
            f"  {row['mpdus_per_ampdu']:6.1f}"
            + (f"  (flows failed: {row['flows_failed'][0]})" if row["flows_failed"] else ""),
            flush=True,
        )
        if row["profile"]:
            parts = ", ".join(
                f"{name} {value:.0f}%"
                for name, value in sorted(row["profile"].items(), key=lambda item: -item[1])
                if value >= 1
            )
            print(f"         profile: {parts}")
    if profiled:
        print("\ntop symbols of the last cell:")
        for value, symbol in figures[-1]["top_symbols"]:
            print(f"  {value:5.1f}%  {symbol}")
    print(
        f"\n{len(cells)} cells in {(time.monotonic() - started) / 60:.1f} min; 'channel' is the ns-3 process's use "
        "of its core, 'machine' the busy share of all cores (endpoints, iperf3, the kernel's TCP)"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
