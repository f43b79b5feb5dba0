"""Small results folders built from the committed real captures (tests/fixtures/analysis),
as a runner would write them: used by the report tests and by the provisioning test that
runs ``quicbed report`` from a provisioned virtualenv."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from quicbed.analysis import metrics as run_metrics_module
from quicbed.analysis.packets import read_pcap

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "analysis"
TRANSPORTS = ("quic", "bquic", "tcp")
LOSSES = (0, 2)
#: goodput (bit/s) of repetitions 1-3 per transport at loss 0; loss 2 halves it
GOODPUT = {"quic": (8e6, 9e6, 10.5e6), "bquic": (6e6, 7e6, 7.5e6), "tcp": (9e6, 9.5e6, 10.5e6)}
OBJECT_BYTES = 200_000
ARTIFACTS = {
    "quic": ("client.pcap", "server.pcap", "server.qlog.gz", "client.json"),
    "bquic": ("client.pcap", "server.pcap", "server.qlog.gz", "client.json"),
    "tcp": ("client.pcap", "server.pcap", "ss.txt", "curl.json"),
}


def _copy_artifacts(source: Path, names: tuple[str, ...], run_folder: Path) -> None:
    run_folder.mkdir(parents=True)
    (run_folder / "logs").mkdir()
    (run_folder / "logs" / "server.log").write_text("started\n")
    for name in names:
        if name.endswith(".qlog.gz"):  # runners write server.qlog uncompressed
            (run_folder / "server.qlog").write_bytes(gzip.decompress((source / name).read_bytes()))
        elif name == "curl.json":  # the client record of a TCP run
            shutil.copy(source / name, run_folder / "client.json")
        else:
            shutil.copy(source / name, run_folder / name)


def _capture_metrics(transport: str) -> dict[str, float]:
    """Metrics of the fixture's captures, as a runner would record them."""
    source = FIXTURES / transport
    client_record = json.loads((source / ("curl.json" if transport == "tcp" else "client.json")).read_text())
    result = run_metrics_module.run_metrics(
        read_pcap(source / "server.pcap"), read_pcap(source / "client.pcap"), client_record
    )
    return {
        "loss": result.loss,
        "ack_ratio": result.ack_ratio,
        "ipt_server_short_share": result.ipt_server_short_share,
        "throughput": result.throughput,
    }


def record(
    run_id: str,
    index: int,
    cell_index: int,
    cell: dict[str, Any],
    repetition: int,
    *,
    warmup: bool = False,
    status: str = "ok",
    error: str | None = None,
    invalid_reasons: list[str] | None = None,
    metrics: dict[str, float] | None = None,
) -> dict[str, Any]:
    transport = cell.get("transport", "quic")
    return {
        "run_id": run_id,
        "index": index,
        "cell_index": cell_index,
        "cell": cell,
        "repetition": repetition,
        "warmup": warmup,
        "status": status,
        "error": error,
        "invalid_reasons": invalid_reasons or [],
        "transport": {"name": transport, "kind": "tcp" if transport == "tcp" else "quic"},
        "workload": {"object": OBJECT_BYTES},
        "started": 1795260000.0 + index,
        "finished": 1795260002.5 + index,
        "folder": f"runs/{run_id}",
        "metrics": metrics or {},
    }


def make_matrix_folder(folder: Path, study: dict[str, Any] | None = None) -> Path:
    """transport [quic, bquic, tcp] x link.bottleneck.loss [0, 2], 3 repetitions and one
    warm-up run per cell; in cell 0 one more run failed and one is invalid."""
    folder.mkdir(parents=True)
    experiment = {
        "name": "report-test",
        "description": "three transports, two loss rates",
        "backend": "netns",
        "matrix": {"transport": list(TRANSPORTS), "link.bottleneck.loss": list(LOSSES)},
        "repetitions": 3,
        "warmup": 1,
        **({"study": study} if study else {}),
    }
    (folder / "experiment.yaml").write_text(json.dumps(experiment))
    (folder / "metadata.json").write_text(
        json.dumps(
            {
                "experiment": experiment,
                "name": "report-test",
                "backend": "netns",
                "host": {
                    "hostname": "testhost",
                    "kernel": "6.18.44",
                    "os": "Debian 12",
                    "cpus": 2,
                    "in_microvm": False,
                },
                "versions": {"quicbed": "0.1.0", "aioquic": "1.2.0"},
                "git": {"commit": "abc1234", "dirty": False},
                "started": 1795260000.0,
                "finished": 1795260100.0,
            }
        )
    )
    captured = {transport: _capture_metrics(transport) for transport in TRANSPORTS}
    records, index = [], 0
    cells = [{"transport": t, "link.bottleneck.loss": loss} for t in TRANSPORTS for loss in LOSSES]
    for cell_index, cell in enumerate(cells):
        transport, factor = cell["transport"], 1.0 if cell["link.bottleneck.loss"] == 0 else 0.5
        runs = [(f"c{cell_index:03d}-w001", 1, True, "ok", 1e6)]
        runs += [
            (f"c{cell_index:03d}-r{rep:03d}", rep, False, "ok", GOODPUT[transport][rep - 1] * factor)
            for rep in (1, 2, 3)
        ]
        if cell_index == 0:
            runs += [("c000-r004", 4, False, "failed", 99e6), ("c000-r005", 5, False, "invalid", 20e6)]
        for run_id, repetition, warmup, status, goodput in runs:
            _copy_artifacts(FIXTURES / transport, ARTIFACTS[transport], folder / "runs" / run_id)
            values = {
                **captured[transport],
                "goodput": goodput,
                "download_time": 8 * OBJECT_BYTES / goodput,
                "cwnd_mean": 30000.0 + 1000 * repetition,
            }
            records.append(
                record(
                    run_id,
                    index,
                    cell_index,
                    cell,
                    repetition,
                    warmup=warmup,
                    status=status,
                    error="client timed out after 300 s" if status == "failed" else None,
                    invalid_reasons=["ns-3 fell 40 ms behind real time"] if status == "invalid" else None,
                    metrics={} if status == "failed" else values,
                )
            )
            index += 1
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in records))
    return folder


def make_parallel_folder(folder: Path) -> Path:
    """The shared-medium experiment: QUIC and TCP at once, no transport axis."""
    folder.mkdir(parents=True)
    records = []
    for repetition in (1, 2):
        run_id = f"c000-r{repetition:03d}"
        _copy_artifacts(FIXTURES / "parallel", ("client.pcap", "quic.json"), folder / "runs" / run_id)
        run = record(
            run_id,
            repetition - 1,
            0,
            {},
            repetition,
            metrics={"goodput": 4e6 + repetition * 1e5, "download_time": 0.4 + repetition / 100},
        )
        run["transport"] = {"name": "quic+tcp", "kind": "mixed"}
        records.append(run)
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in records))
    return folder


def read_summary(folder: Path) -> pd.DataFrame:
    """The report's summary.csv of a results folder."""
    return pd.read_csv(folder / "summary.csv")


def summary_row(summary: pd.DataFrame, transport: str, loss: int, metric: str) -> pd.Series:
    """The one row of ``summary`` for a transport, a bottleneck loss and a metric."""
    rows = summary[
        (summary["transport"] == transport) & (summary["link.bottleneck.loss"] == loss) & (summary["metric"] == metric)
    ]
    assert len(rows) == 1, f"{len(rows)} rows for {transport}, loss {loss}, {metric}"
    return rows.iloc[0]
