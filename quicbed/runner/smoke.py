"""A path check between two nodes: RTT with ping, TCP goodput with iperf3 both ways.

Writes RESULTS/run.json and the tools' raw output; the folder appears only when complete.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from quicbed import __version__
from quicbed.backends.netns import NamespaceNetwork
from quicbed.errors import BackendError
from quicbed.spec.topology import Topology


def _ping_summary(text: str) -> dict[str, float]:
    for line in text.splitlines():
        if line.startswith(("rtt ", "round-trip")):
            low, avg, high, mdev = (float(v) for v in line.split("=")[1].split()[0].split("/"))
            return {"rtt_min_ms": low, "rtt_avg_ms": avg, "rtt_max_ms": high, "rtt_mdev_ms": mdev}
    raise BackendError(f"ping printed no RTT summary: {text[-300:]}")


def run_path_check(topo: Topology, client: str, server: str, out: Path, seconds: float = 5.0,
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure the client-server path of ``topo``; results go to the folder ``out``."""
    if out.exists():
        raise BackendError(f"{out} exists already; results are never overwritten (fix: choose another --out)")
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    started = time.time()
    record: dict[str, Any] = {
        "quicbed": __version__, "host": platform.node(), "kernel": platform.release(),
        "in_microvm": os.environ.get("QUICBED_IN_VM") == "1", "topology": topo.to_dict(),
        **(metadata or {}), "started": started,
    }
    try:
        with NamespaceNetwork(topo) as network:
            record["network"] = network.describe()
            client_node, server_node = network.node(client), network.node(server)
            record["qdiscs"] = {name: network.node(name).qdisc_show() for name in topo.nodes}
            ping = client_node.run(["ping", "-c", "10", "-i", "0.2", "-W", "2", server_node.address], timeout=60)
            (partial / "ping.txt").write_text(ping.stdout)
            record["ping"] = _ping_summary(ping.stdout)
            server_node.start(["iperf3", "-s"], name="iperf3-server", log_dir=partial)
            time.sleep(0.5)
            for direction, flag in (("upload", []), ("download", ["-R"])):
                result = client_node.run(["iperf3", "-c", server_node.address, "-t", str(seconds), "-J", *flag],
                                         timeout=seconds + 60)
                (partial / f"iperf3-{direction}.json").write_text(result.stdout)
                summary = json.loads(result.stdout)["end"]["sum_received"]
                record[f"tcp_{direction}_mbit_s"] = summary["bits_per_second"] / 1e6
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    record["finished"] = time.time()
    (partial / "run.json").write_text(json.dumps(record, indent=1))
    partial.rename(out)
    return record
