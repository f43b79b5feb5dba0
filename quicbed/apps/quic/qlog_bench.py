"""Measure what qlog costs: one bulk download over loopback per qlog mode, repeated.

    python -m quicbed.apps.quic.qlog_bench --size 20MB --repeat 3 [--profile quic]

For each mode (off, filtered, full; both endpoints use the same) and repetition it starts
a server and a client process, downloads one object and reports the client's completion
time, the throughput, the peak RSS of both processes and the qlog bytes written. Modes run
round-robin so background load drifts affect them alike. CPU seconds (user + system,
including process start and the qlog write at the end) are the figure least disturbed by
other load on the machine. Prints a JSON summary.

    python -m quicbed.apps.quic.qlog_bench --virtual --size 20MB --repeat 3

measures the same in one process on a virtual link (no sockets, no event loop: only the
QUIC work of both endpoints and their loggers), adding aioquic's own ``QuicFileLogger`` as
mode ``aioquic``. Its CPU times hardly depend on other load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from quicbed.apps import objects
from quicbed.apps.quic import certs
from quicbed.apps.quic.qlog import QLOG_MODES
from quicbed.spec.units import parse_size


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def _wait(process: subprocess.Popen[bytes], timeout: float) -> tuple[int, float]:
    """Reap a child; return its peak RSS in kB (Linux ru_maxrss) and CPU seconds used."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, _, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = 0
            return int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime
        time.sleep(0.05)
    process.kill()
    _, _, usage = os.wait4(process.pid, 0)
    return int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def run_once(work: Path, mode: str, size: int, profile: str, index: int) -> dict[str, Any]:
    run_dir = work / f"{mode}-{index}"
    run_dir.mkdir()
    qlog_dir = run_dir / "qlog"
    qlog = ["--qlog-dir", str(qlog_dir), "--qlog-mode", mode] if mode != "off" else []
    ready = run_dir / "ready.json"
    env = _environment()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicbed.apps.quic.server",
            "--root",
            str(work / "www"),
            "--cert",
            str(work / "tls/cert.pem"),
            "--key",
            str(work / "tls/key.pem"),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--profile",
            profile,
            "--ready-file",
            str(ready),
            *qlog,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    port = json.loads(ready.read_text())["port"]
    output = run_dir / "client.json"
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "quicbed.apps.quic.client",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--insecure",
            "--profile",
            profile,
            "--path",
            f"/bulk/{objects.bulk_name(size)}.bin",
            "--timeout",
            "300",
            "--output",
            str(output),
            *qlog,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client_rss, client_cpu = _wait(client, 330)
    time.sleep(0.3)  # the server's closing period ends, its trace is written
    server.send_signal(signal.SIGTERM)
    server_rss, server_cpu = _wait(server, 30)
    record = json.loads(output.read_text())
    qlog_bytes = (
        {side: sum(p.stat().st_size for p in qlog_dir.glob(f"*_{side}.qlog")) for side in ("client", "server")}
        if qlog_dir.exists()
        else {}
    )
    completion = record["completion_time"]
    return {
        "mode": mode,
        "ok": record["ok"],
        "completion_time": completion,
        "mbit_per_s": size * 8 / completion / 1e6 if completion else None,
        "client_max_rss_kb": client_rss,
        "server_max_rss_kb": server_rss,
        "client_cpu_s": client_cpu,
        "server_cpu_s": server_cpu,
        "qlog_bytes": qlog_bytes,
    }


VIRTUAL_MODES = ("off", "filtered", "full", "aioquic")


def run_virtual(mode: str, size: int, profile: str, work: Path) -> dict[str, Any]:
    """One download on a virtual link (5 ms one way, 100 Mbit/s), both sides logging."""
    from aioquic.quic.logger import QuicFileLogger, QuicLogger

    from quicbed.apps.quic.profiles import get_profile
    from quicbed.apps.quic.qlog import QlogWriter
    from quicbed.apps.quic.virtual_link import VirtualLink

    directories = [Path(tempfile.mkdtemp(dir=work)) for _ in range(2)]

    def logger(directory: Path) -> QuicLogger | None:
        if mode == "off":
            return None
        if mode == "aioquic":
            return QuicFileLogger(str(directory))
        return QlogWriter(directory, filtered=(mode == "filtered"))

    link = VirtualLink(
        get_profile(profile),
        delay=0.005,
        rate=100e6,
        client_logger=logger(directories[0]),
        server_logger=logger(directories[1]),
    )
    link.handshake()
    link.request(size)
    started = time.process_time()
    link.run_until(lambda: link.response_complete, timeout=600)
    link.close()
    cpu = time.process_time() - started
    written = sum(p.stat().st_size for d in directories for p in d.iterdir())
    return {"mode": mode, "ok": link.response_bytes == size, "cpu_s": cpu, "qlog_bytes": written}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quicbed.apps.quic.qlog_bench")
    parser.add_argument("--size", default="20MB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="quic")
    parser.add_argument(
        "--modes",
        default=None,
        help=f"comma-separated (default {','.join(QLOG_MODES)}; with --virtual {','.join(VIRTUAL_MODES)})",
    )
    parser.add_argument("--virtual", action="store_true", help="in-process virtual link, CPU time only")
    args = parser.parse_args(argv)
    size = parse_size(args.size, "--size")
    default_modes = VIRTUAL_MODES if args.virtual else QLOG_MODES
    modes = [m for m in (args.modes or ",".join(default_modes)).split(",") if m]
    runs: list[dict[str, Any]] = []
    if args.virtual:
        with tempfile.TemporaryDirectory(prefix="quicbed-qlog-bench-") as directory:
            for _ in range(args.repeat):
                for mode in modes:
                    runs.append(run_virtual(mode, size, args.profile, Path(directory)))
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        baseline = min(r["cpu_s"] for r in runs if r["mode"] == modes[0])
        summary = {
            mode: {
                "min_cpu_s": min(r["cpu_s"] for r in runs if r["mode"] == mode),
                "cpu_vs_" + modes[0]: min(r["cpu_s"] for r in runs if r["mode"] == mode) / baseline,
                "qlog_bytes": max(r["qlog_bytes"] for r in runs if r["mode"] == mode),
            }
            for mode in modes
        }
        print(
            json.dumps(
                {"size": size, "profile": args.profile, "virtual": True, "summary": summary, "runs": runs}, indent=1
            )
        )
        return 0
    with tempfile.TemporaryDirectory(prefix="quicbed-qlog-bench-") as directory:
        work = Path(directory)
        objects.generate(work / "www", bulk=[size])
        certs.write(work / "tls")
        for index in range(args.repeat):
            for mode in modes:
                runs.append(run_once(work, mode, size, args.profile, index))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    summary = {}
    for mode in modes:
        done = [r for r in runs if r["mode"] == mode and r["ok"]]
        if not done:
            continue
        summary[mode] = {
            "runs": len(done),
            "median_completion_time": statistics.median(r["completion_time"] for r in done),
            "median_mbit_per_s": statistics.median(r["mbit_per_s"] for r in done),
            "median_client_cpu_s": statistics.median(r["client_cpu_s"] for r in done),
            "median_server_cpu_s": statistics.median(r["server_cpu_s"] for r in done),
            "median_client_max_rss_kb": statistics.median(r["client_max_rss_kb"] for r in done),
            "median_server_max_rss_kb": statistics.median(r["server_max_rss_kb"] for r in done),
            "qlog_bytes_client": statistics.median(r["qlog_bytes"].get("client", 0) for r in done),
            "qlog_bytes_server": statistics.median(r["qlog_bytes"].get("server", 0) for r in done),
        }
    print(json.dumps({"size": size, "profile": args.profile, "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
