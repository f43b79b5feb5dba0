#!/usr/bin/env python3
"""Endpoint limits: the most each server/client pair moves between two namespaces.

    sudo python3 bench/endpoints.py            # 3 rounds (a few minutes)
    sudo python3 bench/endpoints.py --quick    # 1 round, smaller objects
    sudo python3 bench/endpoints.py --json out.json

client namespace --- one veth pair, no qdisc, no rate limit --- server namespace

The pairs: aioquic with the quic and bquic profiles (quicbed.apps.quic server and client),
nginx with quicbed's TCP client over HTTP/1.1 and HTTP/2, and nginx with curl over HTTP/2
(the reference client: is quicbed's client the limit?). One bulk download per run; the
pairs run round-robin so that drifting background load hits them alike, and the median
is reported. quicbed's namespaces turn segmentation and receive offloads off (tso, gso,
gro, lro, tx-checksumming), as emulated links need, so every 1500-byte packet costs a
trip through the stack: the figures are per-packet limits, well below what the same
software does on a real NIC.

Per pair: goodput (body bytes / download time, connection set-up excluded), the CPU each
side used during the transfer as a share of one core (the client's process CPU from
wait4 minus what a 1 kB download costs it - start-up, imports, handshake - divided by
the download time; the server's from /proc/PID/stat of the process and its children,
same subtraction), and UDP receive-buffer drops in the two namespaces (/proc/net/snmp).
Then aioquic's qlog overhead: the quic profile with qlog off, filtered and full on both
sides. Last, the clients through a token bucket at an emulated rate (--rate, default
100 Mbit/s): the share of a core each needs there, i.e. whether it could be the
bottleneck of an experiment. Every run is bounded (timeout per download, --max-minutes
overall).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed import Topology
from quicbed.apps import objects
from quicbed.apps.quic.implementations import CEILINGS_FILE, IMPLEMENTATIONS, native_binary, save_ceilings
from quicbed.spec.experiment import BUILTIN_TRANSPORTS
from quicbed.apps.tcp import nginx
from quicbed.apps.launch import module_argv
from quicbed.backends.base import NodeHandle, Process
from quicbed.backends.namespaces import OFFLOADS
from quicbed.backends.netns import NamespaceNetwork

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
QUIC_PORT = 4433
TCP_PORT = 8443
TINY = 1000


# --------------------------------------------------------------------------- measuring


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live children."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICK
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, IndexError, ValueError):
            continue
        pending += [int(child) for child in children]
    return total


def udp_counters(node: NodeHandle) -> dict[str, int]:
    """The Udp: line of /proc/net/snmp in the node's namespace."""
    lines = [
        line.split() for line in node.run(["cat", "/proc/net/snmp"]).stdout.splitlines() if line.startswith("Udp:")
    ]
    return dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=False)) if len(lines) >= 2 else {}


def udp_drops(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(after.get(k, 0) - before.get(k, 0) for k in ("RcvbufErrors", "InErrors"))


def wait_with_usage(process: Process, timeout: float) -> tuple[int, float]:
    """Reap a client; return (exit status, CPU seconds it used)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.02)
    process.popen.returncode = os.waitstatus_to_exitcode(status)
    return process.popen.returncode, usage.ru_utime + usage.ru_stime


@dataclass
class Run:
    section: str
    pair: str
    ok: bool
    size: int
    completion_time: float | None
    client_cpu: float
    server_cpu: float
    udp_drops: int
    error: str | None = None

    @property
    def mbit_per_s(self) -> float | None:
        return self.size * 8 / self.completion_time / 1e6 if self.ok and self.completion_time else None


@dataclass
class Pair:
    """One server (started once) and the client command for a path."""

    name: str
    server_pid: Callable[[], int]
    client_argv: Callable[[str, Path], list[str]]
    size: int
    kind: str = "tcp"
    runs: list[Run] = field(default_factory=list)
    fixed_client_cpu: float = 0.0
    fixed_server_cpu: float = 0.0


class Bench:
    def __init__(self, net: NamespaceNetwork, work: Path, timeout: float, section: str) -> None:
        self.section = section
        self.net = net
        self.work = work
        self.timeout = timeout
        self.client = net.node("client")
        self.server = net.node("server")
        self.count = 0

    def download(self, pair: Pair, path: str) -> tuple[dict[str, Any], float, float, int]:
        self.count += 1
        output = self.work / f"run-{self.count}.json"
        counters = [udp_counters(self.client), udp_counters(self.server)]
        server_before = process_tree_cpu(pair.server_pid())
        process = self.client.start(
            pair.client_argv(path, output), name=f"client-{self.count}", log_dir=self.work / "logs"
        )
        status, client_cpu = wait_with_usage(process, self.timeout)
        server_cpu = process_tree_cpu(pair.server_pid()) - server_before
        drops = udp_drops(counters[0], udp_counters(self.client)) + udp_drops(counters[1], udp_counters(self.server))
        try:
            record = json.loads(output.read_text())
        except (OSError, json.JSONDecodeError):
            record = {"ok": False, "error": f"client exit {status}: {process.errors()[-300:]}"}
        return record, client_cpu, server_cpu, drops

    def calibrate(self, pair: Pair) -> None:
        """CPU a tiny download costs each side (process start-up, imports, handshake)."""
        costs = [self.download(pair, f"/bulk/{objects.bulk_name(TINY)}.bin") for _ in range(2)]
        pair.fixed_client_cpu = min(c[1] for c in costs)
        pair.fixed_server_cpu = min(c[2] for c in costs)

    def measure(self, pair: Pair) -> Run:
        record, client_cpu, server_cpu, drops = self.download(pair, f"/bulk/{objects.bulk_name(pair.size)}.bin")
        run = Run(
            section=self.section,
            pair=pair.name,
            ok=bool(record.get("ok")),
            size=pair.size,
            completion_time=record.get("completion_time"),
            client_cpu=max(0.0, client_cpu - pair.fixed_client_cpu),
            server_cpu=max(0.0, server_cpu - pair.fixed_server_cpu),
            udp_drops=drops,
            error=record.get("error"),
        )
        pair.runs.append(run)
        return run


def quic_pair(
    bench: Bench,
    name: str,
    profile: str,
    size: int,
    qlog: str,
    cert: Path,
    key: Path,
    root: Path,
    port: int,
    implementation: str = "aioquic",
    knobs: dict[str, Any] | None = None,
) -> Pair:
    qlog_args = [] if qlog == "off" else ["--qlog-mode", qlog]
    profile_args = [
        "--profile",
        profile,
        *[item for knob, value in (knobs or {}).items() for item in ("--knob", f"{knob}={json.dumps(value)}")],
    ]
    server_module, *server_leading = IMPLEMENTATIONS[implementation].server
    client_module, *client_leading = IMPLEMENTATIONS[implementation].client
    run_dir = bench.work / f"quic-{name.replace(' ', '_')}"
    run_dir.mkdir()
    server_args = [
        *server_leading,
        "--root",
        str(root),
        "--cert",
        str(cert),
        "--key",
        str(key),
        "--port",
        str(port),
        *profile_args,
        "--ready-file",
        str(run_dir / "ready.json"),
    ]
    if qlog != "off":
        server_args += ["--qlog-dir", str(run_dir / "qlog-server"), *qlog_args]
    process = bench.server.start(module_argv(server_module, server_args), name=f"quic-server-{port}", log_dir=run_dir)
    deadline = time.monotonic() + 30
    while not (run_dir / "ready.json").exists():
        if not process.running or time.monotonic() > deadline:
            raise RuntimeError(f"QUIC server {name} did not start: {process.errors()}")
        time.sleep(0.05)

    def client_argv(path: str, output: Path) -> list[str]:
        extra = [] if qlog == "off" else ["--qlog-dir", str(run_dir / "qlog-client"), *qlog_args]
        return module_argv(
            client_module,
            [
                *client_leading,
                "--host",
                bench.server.address,
                "--port",
                str(port),
                "--insecure",
                *profile_args,
                "--path",
                path,
                "--timeout",
                str(bench.timeout - 5),
                "--output",
                str(output),
                *extra,
            ],
        )

    return Pair(name=name, server_pid=lambda: process.pid, client_argv=client_argv, size=size, kind="quic")


def tcp_pair(bench: Bench, name: str, server: nginx.NginxServer, http: str, size: int, engine: str = "python") -> Pair:
    def client_argv(path: str, output: Path) -> list[str]:
        return module_argv(
            "quicbed.apps.tcp.client",
            [
                "--host",
                bench.server.address,
                "--port",
                str(server.settings.port),
                "--insecure",
                "--http",
                http,
                "--engine",
                engine,
                "--path",
                path,
                "--timeout",
                str(bench.timeout - 5),
                "--output",
                str(output),
            ],
        )

    assert server.process is not None
    process = server.process
    return Pair(name=name, server_pid=lambda: process.pid, client_argv=client_argv, size=size)


def native_pairs(bench: Bench, size: int, cert: Path, key: Path, root: Path, port: int) -> list[Pair]:
    """quinn with the quic profile and as the built-in bquic-native transport, if it is built."""
    if native_binary() is None:
        print("quinn: not built, its pairs are left out (./scripts/install.sh builds it)", file=sys.stderr)
        return []
    return [
        quic_pair(bench, "quinn quic", "quic", size, "off", cert, key, root, port, "quinn"),
        quic_pair(
            bench,
            "quinn bquic-native",
            "bquic",
            size,
            "off",
            cert,
            key,
            root,
            port + 1,
            "quinn",
            BUILTIN_TRANSPORTS["bquic-native"]["knobs"],
        ),
    ]


# --------------------------------------------------------------------------- the 802.11n cell

WIFI_TRANSPORTS = ("quic", "bquic", "quic-native", "bquic-native", "tcp")
WIFI_OBJECT = "10MB"


def wifi_cell(work: Path, rounds: int, timeout: float) -> list[dict[str, Any]]:
    """experiments/e1-wifi-bquic.yaml (ns-3 802.11n cell, MCS 7) with both QUIC implementations,
    through 'quicbed run': goodput, MPDUs per A-MPDU, ACK ratio and CPU per transport."""
    from quicbed.backends.ns3 import build

    missing = build.missing()
    if missing is not None:
        print(f"802.11n cell left out: ns-3 missing ({missing})", file=sys.stderr)
        return []
    transports = [t for t in WIFI_TRANSPORTS if BUILTIN_TRANSPORTS[t].get("impl") != "quinn" or native_binary()]
    command = [
        sys.executable,
        "-m",
        "quicbed",
        "run",
        str(ROOT / "experiments" / "e1-wifi-bquic.yaml"),
        "--repetitions",
        str(rounds),
        "--warmup",
        "0",
        "--out",
        str(work),
        "--no-report",
        "--set",
        f"workload.object={WIFI_OBJECT}",
        "--set",
        f"matrix.transport=[{', '.join(transports)}]",
    ]
    print("802.11n cell: " + " ".join(command[3:]), file=sys.stderr, flush=True)
    subprocess.run(command, cwd=ROOT, timeout=len(transports) * rounds * (timeout + 60), check=False)
    results = work / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    rows = []
    for transport in transports:
        done = [line for line in lines if line["cell"]["transport"] == transport and line["status"] == "ok"]
        if not done:
            rows.append({"transport": transport, "runs": 0})
            continue

        def median(metric: str, done: list[dict[str, Any]] = done) -> float:
            values = [line["metrics"].get(metric) for line in done]
            return (
                statistics.median(v for v in values if v is not None)
                if any(v is not None for v in values)
                else float("nan")
            )

        rows.append(
            {
                "transport": transport,
                "runs": len(done),
                "goodput_mbit": median("goodput") / 1e6,
                "ampdu_mean": median("ampdu_mean"),
                "ack_ratio": median("ack_ratio"),
                "cpu_server_peak": median("cpu_server_peak"),
                "cpu_client_peak": median("cpu_client_peak"),
                "cpu_channel_peak": median("cpu_channel_peak"),
                "cpu_bound_runs": sum(bool(line.get("cpu_bound_reasons")) for line in done),
            }
        )
    return rows


def print_wifi(rows: list[dict[str, Any]]) -> None:
    print(
        f"\nThe 802.11n cell of topologies/wifi_ap.py (ns-3, MCS 7, 20 MHz), {WIFI_OBJECT} downloads "
        "through quicbed run (median; CPU = busiest 100 ms, in cores)"
    )
    print(
        f"{'transport':<14} {'runs':>4} {'Mbit/s':>7} {'MPDUs/A-MPDU':>13} {'ACK ratio':>10} "
        f"{'server CPU':>11} {'client CPU':>11} {'ns-3 CPU':>9} {'CPU-bound':>10}"
    )
    for row in rows:
        if not row["runs"]:
            print(f"{row['transport']:<14}    0 (no valid run)")
            continue
        print(
            f"{row['transport']:<14} {row['runs']:>4} {row['goodput_mbit']:>7.1f} {row['ampdu_mean']:>13.1f} "
            f"{row['ack_ratio']:>10.3f} {row['cpu_server_peak']:>11.2f} {row['cpu_client_peak']:>11.2f} "
            f"{row['cpu_channel_peak']:>9.2f} {row['cpu_bound_runs']:>6}/{row['runs']}"
        )


def _row(rows: list[dict[str, Any]], pair: str) -> dict[str, Any] | None:
    return next((row for row in rows if row.get("pair") == pair and "mbit_per_s" in row), None)


def print_targets(rows: list[dict[str, Any]], limited_rows: list[dict[str, Any]], rate: str) -> None:
    """The native stack's targets: 500 Mbit/s on one connection, under 0.1 core per endpoint at 50 Mbit/s."""
    unshaped, limited = _row(rows, "quinn quic"), _row(limited_rows, "quinn quic")
    if unshaped is None:
        return
    print(
        f"\ntarget: quinn quic >= 500 Mbit/s unshaped: {unshaped['mbit_per_s']:.0f} Mbit/s "
        f"({'met' if unshaped['mbit_per_s'] >= 500 else 'NOT met'})"
    )
    if limited is not None:
        worst = max(limited["client_cpu_share"], limited["server_cpu_share"])
        print(
            f"target: quinn quic < 0.1 core per endpoint at {rate}: client {limited['client_cpu_share']:.3f}, "
            f"server {limited['server_cpu_share']:.3f} core ({'met' if worst < 0.1 else 'NOT met'}"
            f"{'' if rate == '50mbit' else '; the target is stated at 50mbit'})"
        )


# --------------------------------------------------------------------------- report


def summary(pair: Pair) -> dict[str, Any]:
    done = [r for r in pair.runs if r.ok and r.completion_time]
    row: dict[str, Any] = {
        "pair": pair.name,
        "size": pair.size,
        "runs": len(pair.runs),
        "ok": len(done),
        "errors": sorted({r.error for r in pair.runs if r.error}),
    }
    if done:
        rates = [r.mbit_per_s for r in done]
        row.update(
            mbit_per_s=statistics.median(rates),
            mbit_min=min(rates),
            mbit_max=max(rates),  # type: ignore[type-var]
            client_cpu_s=statistics.median(r.client_cpu for r in done),
            server_cpu_s=statistics.median(r.server_cpu for r in done),
            client_cpu_per_gb=statistics.median(r.client_cpu for r in done) / pair.size * 1e9,
            server_cpu_per_gb=statistics.median(r.server_cpu for r in done) / pair.size * 1e9,
            client_cpu_share=statistics.median(r.client_cpu / r.completion_time for r in done),  # type: ignore[operator]
            server_cpu_share=statistics.median(r.server_cpu / r.completion_time for r in done),  # type: ignore[operator]
            udp_drops=sum(r.udp_drops for r in done) if pair.kind == "quic" else None,
        )
    return row


def print_table(rows: list[dict[str, Any]], title: str) -> None:
    print(f"\n{title}")
    print(
        f"{'pair':<34} {'object':>7} {'runs':>5} {'Mbit/s':>7} {'(min-max)':>11} "
        f"{'client CPU s/GB':>20} {'server CPU s/GB':>20} {'UDP drops':>10}"
    )
    for row in rows:
        if "mbit_per_s" not in row:
            print(
                f"{row['pair']:<34} {objects.bulk_name(row['size']):>7} {row['ok']}/{row['runs']:<3} "
                f"failed: {'; '.join(row['errors'])[:80]}"
            )
            continue
        drops = "-" if row["udp_drops"] is None else str(row["udp_drops"])
        print(
            f"{row['pair']:<34} {objects.bulk_name(row['size']):>7} {row['ok']:>2}/{row['runs']:<2} "
            f"{row['mbit_per_s']:>7.0f} {row['mbit_min']:>5.0f}-{row['mbit_max']:<5.0f} "
            f"{row['client_cpu_per_gb']:>10.1f} s/GB {row['client_cpu_share'] * 100:>3.0f}% "
            f"{row['server_cpu_per_gb']:>10.1f} s/GB {row['server_cpu_share'] * 100:>3.0f}% {drops:>10}"
        )


def machine() -> dict[str, Any]:
    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, smaller objects")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 1)")
    parser.add_argument("--quic-size", default=None, help="QUIC object (default 20MB, quick 10MB)")
    parser.add_argument("--tcp-size", default=None, help="TCP object (default 200MB, quick 50MB)")
    parser.add_argument("--qlog-size", default="10MB", help="object for the qlog comparison")
    parser.add_argument("--rate", default="50mbit", help="the rate-limited section's link rate")
    parser.add_argument("--no-wifi", action="store_true", help="skip the 802.11n cell (ns-3) section")
    parser.add_argument("--limited-size", default="20MB", help="object for the rate-limited section")
    parser.add_argument("--timeout", type=float, default=90.0, help="per download, seconds")
    parser.add_argument("--max-minutes", type=float, default=15.0, help="stop starting runs after")
    parser.add_argument("--json", type=Path, help="also write everything as JSON here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/endpoints.py needs root (network namespaces)", file=sys.stderr)
        return 2
    from quicbed.spec.units import parse_size

    rounds = args.rounds or (1 if args.quick else 3)
    quic_size = parse_size(args.quic_size or ("10MB" if args.quick else "20MB"))
    tcp_size = parse_size(args.tcp_size or ("50MB" if args.quick else "200MB"))
    qlog_size = parse_size(args.qlog_size)
    limited_size = parse_size(args.limited_size)
    started = time.monotonic()
    load_before = os.getloadavg()

    def out_of_time() -> bool:
        if time.monotonic() - started > args.max_minutes * 60:
            print(f"stopping: --max-minutes {args.max_minutes:g} reached", file=sys.stderr)
            return True
        return False

    def run_rounds(pairs: list[Pair], bench: Bench) -> None:
        for pair in pairs:
            bench.calibrate(pair)
        for index in range(rounds):
            for pair in pairs:
                if out_of_time():
                    return
                run = bench.measure(pair)
                print(
                    f"round {index + 1}/{rounds} {pair.name}: {run.mbit_per_s or 0:.0f} Mbit/s {run.error or ''}",
                    file=sys.stderr,
                    flush=True,
                )

    with tempfile.TemporaryDirectory(prefix="quicbed-bench-endpoints-") as directory:
        work = Path(directory)
        root = work / "www"
        objects.generate(root, bulk=sorted({TINY, quic_size, tcp_size, qlog_size, limited_size}))
        topo = Topology("endpoints", description="client and server on one unshaped veth pair")
        topo.add_link(topo.add_host("client"), topo.add_host("server"))
        with NamespaceNetwork(topo) as net:
            bench = Bench(net, work / "unlimited", args.timeout, "unlimited")
            bench.work.mkdir()
            cert, key = nginx.ensure_certificate(work / "tls", [bench.server.address, "localhost"])
            server = nginx.NginxServer(
                bench.server,
                nginx.NginxSettings(
                    root=root, certificate=cert, private_key=key, port=TCP_PORT, congestion_control="cubic"
                ),
                work / "nginx",
            ).start()
            main_pairs = [
                quic_pair(bench, "aioquic quic", "quic", quic_size, "off", cert, key, root, 4433),
                quic_pair(bench, "aioquic bquic", "bquic", quic_size, "off", cert, key, root, 4434),
                *native_pairs(bench, tcp_size, cert, key, root, 4435),
                tcp_pair(bench, "nginx + quicbed client HTTP/1.1", server, "1.1", tcp_size),
                tcp_pair(bench, "nginx + quicbed client HTTP/2", server, "2", tcp_size),
                tcp_pair(bench, "nginx + curl HTTP/2 (reference)", server, "2", tcp_size, "curl"),
            ]
            qlog_pairs = [
                quic_pair(bench, f"aioquic quic, qlog {mode}", "quic", qlog_size, mode, cert, key, root, 4440 + index)
                for index, mode in enumerate(("off", "filtered", "full"))
            ]
            run_rounds(main_pairs + qlog_pairs, bench)
            server.stop()
        # the TCP clients at an emulated rate: what share of a core do they need there?
        topo = Topology("endpoints-limited", description=f"one veth pair shaped to {args.rate}")
        topo.add_link(topo.add_host("client"), topo.add_host("server"), rate=args.rate, queue_limit=1000)
        limited_pairs: list[Pair] = []
        if not out_of_time():
            with NamespaceNetwork(topo) as net:
                bench = Bench(net, work / "limited", args.timeout, args.rate)
                bench.work.mkdir()
                server = nginx.NginxServer(
                    bench.server,
                    nginx.NginxSettings(
                        root=root,
                        certificate=work / "tls/cert.pem",
                        private_key=work / "tls/key.pem",
                        port=TCP_PORT,
                        congestion_control="cubic",
                    ),
                    work / "nginx-limited",
                ).start()
                limited_pairs = [
                    quic_pair(
                        bench,
                        "aioquic quic",
                        "quic",
                        limited_size,
                        "off",
                        work / "tls/cert.pem",
                        work / "tls/key.pem",
                        root,
                        4433,
                    ),
                    quic_pair(
                        bench,
                        "aioquic bquic",
                        "bquic",
                        limited_size,
                        "off",
                        work / "tls/cert.pem",
                        work / "tls/key.pem",
                        root,
                        4434,
                    ),
                    *native_pairs(bench, limited_size, work / "tls/cert.pem", work / "tls/key.pem", root, 4435),
                    tcp_pair(bench, "nginx + quicbed client HTTP/1.1", server, "1.1", limited_size),
                    tcp_pair(bench, "nginx + quicbed client HTTP/2", server, "2", limited_size),
                    tcp_pair(bench, "nginx + curl HTTP/2 (reference)", server, "2", limited_size, "curl"),
                ]
                run_rounds(limited_pairs, bench)
                server.stop()
        wifi_rows = [] if args.no_wifi or out_of_time() else wifi_cell(work / "wifi", rounds, args.timeout)
    rows = [summary(pair) for pair in main_pairs]
    qlog_rows = [summary(pair) for pair in qlog_pairs]
    limited_rows = [summary(pair) for pair in limited_pairs]
    info = machine()
    print(
        f"quicbed bench/endpoints.py  {time.strftime('%Y-%m-%d %H:%M')}  kernel {info['kernel']}, "
        f"{info['cpus']} CPUs ({info['cpu']}), Python {info['python']}"
    )
    print(
        f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; "
        f"{rounds} round(s), median shown; one veth pair, no rate limit, offloads off "
        f"({', '.join(OFFLOADS)})"
    )
    print_table(
        rows,
        "Endpoint pairs: bulk download goodput; CPU = seconds used for the transfer and share of one core during it",
    )
    print_table(qlog_rows, "aioquic qlog overhead (quic profile, qlog mode on both sides)")
    base = next((r for r in qlog_rows if r.get("pair", "").endswith("off") and "mbit_per_s" in r), None)
    if base:
        for row in qlog_rows[1:]:
            if "mbit_per_s" in row:
                print(
                    f"  {row['pair']}: CPU seconds x"
                    f"{row['client_cpu_s'] / max(base['client_cpu_s'], 1e-9):.2f} (client), x"
                    f"{row['server_cpu_s'] / max(base['server_cpu_s'], 1e-9):.2f} (server), "
                    f"goodput x{row['mbit_per_s'] / base['mbit_per_s']:.2f} of qlog off"
                )
    if limited_rows:
        print_table(
            limited_rows,
            f"The same clients through a {args.rate} token bucket (is the client the bottleneck at emulated rates?)",
        )
    if wifi_rows:
        print_wifi(wifi_rows)
    print_targets(rows, limited_rows, args.rate)
    save_ceilings(
        {
            name: {"profile": "quic", "mbit_per_s": row["mbit_per_s"], "measured": time.strftime("%Y-%m-%d")}
            for name, row in (("aioquic", _row(rows, "aioquic quic")), ("quinn", _row(rows, "quinn quic")))
            if row is not None
        }
    )
    print(f"\n(took {time.monotonic() - started:.0f} s; ceilings kept in {CEILINGS_FILE} for quicbed doctor)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": info,
                    "load_before": load_before,
                    "rounds": rounds,
                    "pairs": rows,
                    "qlog": qlog_rows,
                    "rate_limited": {"rate": args.rate, "pairs": limited_rows},
                    "wifi": wifi_rows,
                    "runs": [vars(r) for p in main_pairs + qlog_pairs + limited_pairs for r in p.runs],
                },
                indent=1,
            )
            + "\n"
        )
    return 0 if all("mbit_per_s" in r for r in rows + qlog_rows + limited_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
