"""HTTP/3 through an emulated 802.11n cell, QUIC vs BQUIC, seen from captures and the endpoints' JSON.

sta1 ))) ap1 --- server      (ns-3 real-time channel: A-MPDU, CSMA/CA; wired 1 Gbit/s, 3 ms)

The E1 setting: one station, the server behind the AP, idle RTT about 6.6 ms. A 4 MB
download per profile, captures at the server (departures as the server made them: its
interface is not shaped) and at the station.

Why through the ns-3 cell and not a plain namespace link: BQUIC delays an ACK at most
min(25 ms, min_rtt/4). On a link without base delay aioquic's min RTT is its 1 ms floor,
so the ACK timer fires after 0.25 ms - before ten packets can arrive - and decimation
only shows when the client happens to fall behind (on a busy machine it did, on an idle
one it did not). With a realistic RTT, and with A-MPDUs delivering packets in bursts,
decimation works as designed. This host's kernel has no netem; ns-3 provides the delay.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from quicbed.apps import objects
from quicbed.apps.capture import CaptureSet, CaptureStats
from quicbed.apps.quic import certs
from quicbed.apps.launch import module_argv
from quicbed.backends.ns3 import build
from quicbed.backends.ns3.network import Ns3Network
from quicbed.spec.loader import load_topology
from realtime import in_real_time

NS3_MISSING = build.missing()
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.skipif(NS3_MISSING is not None, reason=f"ns-3 missing: {NS3_MISSING}"),
]
ROOT = Path(__file__).resolve().parents[2]

SIZE = 4_000_000
PORT = 4433
CELL_CAPACITY_BPS = 62e6  # 802.11n, 20 MHz, MCS 7, A-MPDU: analytical MAC throughput + 4 %
SHORT_GAP = 100e-6
DATA_PAYLOAD = 1000  # UDP payloads above this are full-size data packets (aioquic: 1200 B)


@dataclass
class LiveRun:
    profile: str
    record: dict[str, Any]
    server_stats: list[dict[str, Any]]
    capture_stats: dict[str, CaptureStats]
    server_packets: list[Any]
    client_packets: list[Any]
    server_address: str
    client_address: str
    mac: dict[str, Any]  # the channel's statistics of the download (Ns3Network.mac_stats)
    attempts: list[list[str]]  # why earlier downloads of this profile were not kept


def _wait_for(path: Path, process: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if not process.running or time.monotonic() > deadline:
            raise AssertionError(f"server not ready: {process.errors()}")
        time.sleep(0.05)


def _download(net: Ns3Network, base: Path, root: Path, cert: Path, key: Path, profile: str, attempt: int) -> LiveRun:
    from quicbed.analysis.packets import read_pcap

    client, server = net.node("sta1"), net.node("server")
    run = base / f"{profile}-{attempt}"
    run.mkdir()
    process = server.start(
        module_argv(
            "quicbed.apps.quic.server",
            [
                "--root",
                str(root),
                "--cert",
                str(cert),
                "--key",
                str(key),
                "--port",
                str(PORT),
                "--profile",
                profile,
                "--ready-file",
                str(run / "ready.json"),
                "--stats-file",
                str(run / "stats.jsonl"),
            ],
        ),
        name="quic-server",
        log_dir=run,
    )
    _wait_for(run / "ready.json", process)
    captures = CaptureSet(run)
    captures.add(server, "eth0")
    captures.add(client, "wlan0")
    captures.start()
    net.reset_stats()
    try:
        client.run(
            module_argv(
                "quicbed.apps.quic.client",
                [
                    "--host",
                    server.address,
                    "--port",
                    str(PORT),
                    "--ca-cert",
                    str(cert),
                    "--profile",
                    profile,
                    "--path",
                    f"/bulk/{objects.bulk_name(SIZE)}.bin",
                    "--timeout",
                    "30",
                    "--output",
                    str(run / "client.json"),
                ],
            ),
            timeout=45,
            check=False,
        )
    finally:
        stats = captures.stop()
        process.stop()  # SIGTERM: the server closes its connections and writes its stats line
    mac = net.mac_stats()
    record = json.loads((run / "client.json").read_text())
    lines = (run / "stats.jsonl").read_text().splitlines() if (run / "stats.jsonl").exists() else []
    return LiveRun(
        profile=profile,
        record=record,
        server_stats=[json.loads(x) for x in lines],
        capture_stats=stats,
        server_packets=[p for p in read_pcap(captures.path("server-eth0")) if p.proto == "udp"],
        client_packets=[p for p in read_pcap(captures.path("sta1-wlan0")) if p.proto == "udp"],
        server_address=server.address,
        client_address=client.address,
        mac=mac,
        attempts=[],
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LiveRun]]:
    base = tmp_path_factory.mktemp("quic-live")
    root = base / "www"
    objects.generate(root, bulk=[SIZE], seed=3)
    results: dict[str, LiveRun] = {}
    with Ns3Network(load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {})) as net:
        cert, key = certs.write(base / "tls", [net.node("server").address, "localhost"])
        for profile in ("quic", "bquic"):

            def attempt(number: int, profile: str = profile) -> tuple[LiveRun, list[str]]:
                made = _download(net, base, root, cert, key, profile, number)
                return made, made.mac["invalid_reasons"]

            run, earlier = in_real_time(attempt, f"{profile} download")
            run.attempts = earlier
            results[profile] = run
    yield results


def _channel_drops(mac: dict[str, Any]) -> dict[str, int]:
    """Frames the channel dropped, by where: each radio's MAC (retry limit, lifetime) and queue,
    each cable's queue, the TAP path."""
    drops = {
        f"{radio} {kind}": entry[kind]
        for radio, entry in mac["radios"].items()
        for kind in ("mac_drops", "queue_drops")
        if entry[kind]
    }
    drops |= {
        f"{wire} {direction} queue": counters.get("queue_drops", 0)
        for wire, sides in mac["wires"].items()
        for direction, counters in sides.items()
        if counters.get("queue_drops")
    }
    drops |= {f"TAP {kind}": mac["tap"][kind] for kind in ("rx_drops", "tx_drops") if mac.get("tap", {}).get(kind)}
    return drops


def _data_departures(run: LiveRun) -> list[Any]:
    return [
        p
        for p in run.server_packets
        if p.src == run.server_address and p.sport == PORT and p.payload_len > DATA_PAYLOAD
    ]


def short_gap_share(packets: list[Any]) -> float:
    gaps = [b.ts - a.ts for a, b in itertools.pairwise(packets)]
    return sum(gap < SHORT_GAP for gap in gaps) / len(gaps)


def ack_ratio(run: LiveRun) -> float:
    """Client -> server packets per server -> client data packet, at the client."""
    acks = [p for p in run.client_packets if p.dst == run.server_address and p.dport == PORT]
    data = [
        p
        for p in run.client_packets
        if p.src == run.server_address and p.sport == PORT and p.payload_len > DATA_PAYLOAD
    ]
    return len(acks) / len(data)


def test_downloads_complete_with_profile_records(runs: dict[str, LiveRun]) -> None:
    for profile, run in runs.items():
        record = run.record
        assert record["ok"] is True, record["error"]
        assert record["bytes"] == SIZE and record["profile"] == profile
        assert 0 < record["handshake_time"] < record["total_time"]
        assert 0 < record["ttfb"] <= record["completion_time"]
        # the cell's capacity bounds the goodput (saturated UDP: 59.5 Mbit/s, bench/README.md)
        assert SIZE * 8 / record["completion_time"] < CELL_CAPACITY_BPS
        assert run.server_stats and run.server_stats[-1]["profile"] == profile
        assert run.server_stats[-1]["body_bytes"] == SIZE


def test_captures_are_complete(runs: dict[str, LiveRun]) -> None:
    for run in runs.values():
        for stats in run.capture_stats.values():
            assert stats.complete and stats.dropped_by_kernel == 0
        sent = _data_departures(run)
        from_server = [p for p in run.server_packets if p.src == run.server_address]
        assert sum(p.payload_len for p in from_server) > SIZE
        # the client's capture has every data packet but those the channel says it dropped (MAC
        # retries and large queues make that rare: none in most downloads)
        received = [p for p in run.client_packets if p.src == run.server_address and p.payload_len > DATA_PAYLOAD]
        dropped = _channel_drops(run.mac)
        assert 0 <= len(sent) - len(received) <= sum(dropped.values()), (len(sent), len(received), dropped)
        # the server's packet counter matches what left its interface
        transport = run.server_stats[-1]["transport"]
        assert abs(transport["datagrams_sent"] - len(from_server)) <= 3


def _context(runs: dict[str, LiveRun]) -> dict[str, Any]:
    """Goodputs and loss counts, for assertion messages (a CPU-starved run shows here)."""
    return {
        name: {
            "mbit_per_s": round(run.record["bytes"] * 8 / run.record["completion_time"] / 1e6, 1)
            if run.record.get("completion_time")
            else None,
            "lost": run.server_stats[-1]["transport"]["packets_lost"] if run.server_stats else None,
        }
        for name, run in runs.items()
    }


def test_bquic_departures_are_burstier(runs: dict[str, LiveRun]) -> None:
    """No pacing: more back-to-back departures (< 100 us apart) at the server."""
    shares = {name: short_gap_share(_data_departures(run)) for name, run in runs.items()}
    assert shares["bquic"] > shares["quic"] + 0.1, (shares, _context(runs))


def test_bquic_client_acks_less(runs: dict[str, LiveRun]) -> None:
    ratios = {name: ack_ratio(run) for name, run in runs.items()}
    assert ratios["bquic"] < 0.7 * ratios["quic"], (ratios, _context(runs))
    # the client's own counters say the same
    counters = {name: run.record["transport"]["ack_only_per_ack_eliciting_received"] for name, run in runs.items()}
    assert counters["quic"] == pytest.approx(0.5, abs=0.1), (counters, _context(runs))
    assert counters["bquic"] < 0.7 * counters["quic"], (counters, _context(runs))
    # and the server received what the client sent
    for run in runs.values():
        received = run.server_stats[-1]["transport"]["datagrams_received"]
        sent = run.record["transport"]["datagrams_sent"]
        assert abs(received - sent) <= 3
