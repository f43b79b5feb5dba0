#!/usr/bin/env python3
"""Client CPU per packet: what a received datagram and a sent ACK cost each QUIC client on
this host, and the CPU quota that makes a client as slow as a named class of device.

    sudo python3 bench/client_cpu.py              # 3 rounds, about 2 minutes
    sudo python3 bench/client_cpu.py --rounds 1   # about 1 minute
    sudo python3 bench/client_cpu.py --json out.json

client namespace --- one veth pair shaped to --rate (default 20 Mbit/s) --- server namespace

Each client (aioquic and quinn, profile quic) downloads --size with an ACK every 2 and every
10 packets (the knob ack_every). Per download: the client's CPU seconds (wait4, less what a
1 kB download costs it: start-up, imports, handshake) and the datagrams its namespace
received and sent (/proc/net/snmp, less the 1 kB download's). A least-squares fit of
``cpu = a * received + b * sent`` over the downloads gives a, the cost of a received packet,
and b, of a sent one (the ACKs). The link is shaped so that packets arrive spaced as over a
WiFi hop, one or two per wake-up, and no client is CPU-bound.

Then this host's score on sysbench's CPU test (one thread, 10 s) against the published
scores of Raspberry Pi 3B+, 4 and 5 (quicbed/host/device_cpu.py: SOURCE) gives each device's
speed relative to one core here, the stress.cpu_quota that models it, and the packet rate
one such core could receive with each client (docs/metrics.md, "A weak client CPU"). Every
download is bounded (--timeout), and the whole bench by --max-minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.endpoints import TINY, Bench, Pair, machine, quic_pair, udp_counters  # noqa: E402
from quicbed import Topology  # noqa: E402
from quicbed.apps import objects  # noqa: E402
from quicbed.apps.quic.implementations import native_binary  # noqa: E402
from quicbed.apps.tcp import nginx  # noqa: E402
from quicbed.backends.netns import NamespaceNetwork  # noqa: E402
from quicbed.devices import DEVICE_CLASSES, SOURCE  # noqa: E402
from quicbed.host.device_cpu import (  # noqa: E402
    HOST_COMMAND,
    PacketCosts,
    fit_packet_costs,
    quota_for,
    relative_speed,
    sysbench_score,
)
from quicbed.spec.units import parse_size  # noqa: E402

ACK_EVERY = (2, 10)


def datagrams(bench: Bench, pair: Pair, path: str) -> tuple[bool, float, int, int]:
    """One download: (ok, client CPU seconds, datagrams received, datagrams sent) in the
    client's namespace."""
    before = udp_counters(bench.client)
    record, cpu, _, _ = bench.download(pair, path)
    after = udp_counters(bench.client)
    return (
        bool(record.get("ok")),
        cpu,
        after["InDatagrams"] - before["InDatagrams"],
        after["OutDatagrams"] - before["OutDatagrams"],
    )


def host_score() -> float:
    if shutil.which(HOST_COMMAND[0]) is None:
        raise SystemExit(
            "bench/client_cpu.py: sysbench is missing (fix: apt-get install sysbench, or scripts/install.sh)"
        )
    output = subprocess.run(HOST_COMMAND, capture_output=True, text=True, check=True, timeout=60).stdout
    return sysbench_score(output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="10MB", help="object per download")
    parser.add_argument("--rate", default="20mbit", help="the link's rate")
    parser.add_argument("--timeout", type=float, default=90.0, help="per download, seconds")
    parser.add_argument("--max-minutes", type=float, default=10.0, help="stop starting downloads after")
    parser.add_argument("--json", type=Path, help="also write everything as JSON here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/client_cpu.py needs root (network namespaces)", file=sys.stderr)
        return 2
    size = parse_size(args.size)
    implementations = ["aioquic"] + (["quinn"] if native_binary() else [])
    if "quinn" not in implementations:
        print("quinn: not built, left out (./scripts/install.sh builds it)", file=sys.stderr)
    started = time.monotonic()
    host = host_score()
    samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="quicbed-bench-client-cpu-") as directory:
        work = Path(directory)
        root = work / "www"
        objects.generate(root, bulk=[TINY, size])
        topo = Topology("client-cpu", description=f"one veth pair shaped to {args.rate}")
        topo.add_link(topo.add_host("client"), topo.add_host("server"), rate=args.rate, queue_limit=1000)
        with NamespaceNetwork(topo) as net:
            bench = Bench(net, work / "runs", args.timeout, args.rate)
            bench.work.mkdir()
            cert, key = nginx.ensure_certificate(work / "tls", [bench.server.address, "localhost"])
            pairs: list[tuple[str, int, Pair]] = []
            port = 4433
            for implementation in implementations:
                for every in ACK_EVERY:
                    pairs.append(
                        (
                            implementation,
                            every,
                            quic_pair(
                                bench,
                                f"{implementation} ack_every {every}",
                                "quic",
                                size,
                                "off",
                                cert,
                                key,
                                root,
                                port,
                                implementation,
                                {"ack_every": every},
                            ),
                        )
                    )
                    port += 1
            fixed = {}
            for _implementation, _every, pair in pairs:
                tiny = [datagrams(bench, pair, f"/bulk/{objects.bulk_name(TINY)}.bin") for _ in range(2)]
                fixed[pair.name] = min(tiny, key=lambda sample: sample[1])
            for index in range(args.rounds):
                for implementation, every, pair in pairs:
                    if time.monotonic() - started > args.max_minutes * 60:
                        print(f"stopping: --max-minutes {args.max_minutes:g} reached", file=sys.stderr)
                        break
                    ok, cpu, received, sent = datagrams(bench, pair, f"/bulk/{objects.bulk_name(size)}.bin")
                    _, cpu0, received0, sent0 = fixed[pair.name]
                    print(
                        f"round {index + 1}/{args.rounds} {pair.name}: ok={ok} cpu {cpu - cpu0:.3f} s, "
                        f"{received - received0} received, {sent - sent0} sent",
                        file=sys.stderr,
                        flush=True,
                    )
                    if ok:
                        samples.setdefault((implementation, every), []).append(
                            (cpu - cpu0, received - received0, sent - sent0)
                        )
    fits = {}
    for implementation in implementations:
        points = [point for (name, _), runs in samples.items() if name == implementation for point in runs]
        if len({every for (name, every) in samples if name == implementation}) == len(ACK_EVERY):
            fits[implementation] = fit_packet_costs(points)
    report(host, fits, samples, size, args)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "host_sysbench_events_per_s": host,
                    "source": SOURCE,
                    "rate": args.rate,
                    "size": size,
                    "samples": {f"{name} ack_every {every}": runs for (name, every), runs in samples.items()},
                    "fits": {
                        name: {"per_received_s": c.per_received, "per_sent_s": c.per_sent} for name, c in fits.items()
                    },
                    "devices": [
                        {
                            "name": d.name,
                            "cpu": d.cpu,
                            "events_per_s": d.events_per_second,
                            "relative_speed": relative_speed(d, host),
                            "cpu_quota": quota_for(d, host),
                        }
                        for d in DEVICE_CLASSES
                    ],
                },
                indent=2,
            )
        )
    return 0


def report(
    host: float,
    fits: dict[str, PacketCosts],
    samples: dict[tuple[str, int], list[tuple[float, float, float]]],
    size: int,
    args: argparse.Namespace,
) -> None:
    info = machine()
    print(
        f"quicbed bench/client_cpu.py  {time.strftime('%Y-%m-%d %H:%M')}  kernel {info['kernel']}, "
        f"{info['cpus']} CPUs ({info['cpu']}), link {args.rate}, {args.size} per download"
    )
    print(f"this host: sysbench cpu, one thread: {host:.0f} events/s")
    print(
        "\nper client and ACK policy (medians over downloads): datagrams received and sent, CPU seconds,"
        " and CPU per received datagram with its share of the ACKs"
    )
    per_datagram: dict[tuple[str, int], float] = {}
    for (name, every), runs in samples.items():
        cpu, received, sent = (statistics.median(run[k] for run in runs) for k in range(3))
        per_datagram[(name, every)] = cpu / received
        print(
            f"  {name:8s} ack_every {every:<3d} {len(runs)} downloads: {received:6.0f} received, {sent:5.0f} sent, "
            f"{cpu:6.3f} s: {cpu / received * 1e6:6.1f} us per received datagram"
        )
    for name, fit in fits.items():
        verdict = "" if fit.per_sent > 0 else ": sending fewer ACKs saved no CPU here, the per-ACK cost does not show"
        print(
            f"  {name:8s} fit cpu = a x received + b x sent: a = {fit.per_received * 1e6:.1f} us, "
            f"b = {fit.per_sent * 1e6:.1f} us{verdict}"
        )
    print(f"\ndevices (scores: {SOURCE}); the rate one device core could receive at, from the CPU per datagram")
    columns = sorted(per_datagram)
    print(
        "  device            core        speed  cpu_quota"
        + "".join(f"  {name} ack {every:<2d}" for name, every in columns)
        + "  (Mbit/s)"
    )
    for device in DEVICE_CLASSES:
        speed = relative_speed(device, host)
        quota = quota_for(device, host)
        line = f"  {device.name:17s} {device.cpu:11s} {speed:5.2f}  {quota if quota is not None else 'none':>9}"
        for key in columns:
            received = statistics.median(run[1] for run in samples[key])
            line += f"  {speed / per_datagram[key] * size / received * 8 / 1e6:>14.0f}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
