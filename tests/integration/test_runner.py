"""The experiment runner on real namespaces (rate-limited links: no netem needed).

A failing run is recorded and the experiment goes on; Ctrl-C and kill -9 leave only
complete runs; --resume finishes the experiment without redoing them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from quicbed.host import ownership
from quicbed.runner.folder import read_results

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.needs_root]


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The results lines as written (quicbed.runner.folder.read_results, strictly)."""
    return [record.to_dict() for record in read_results(path)]


def _experiment(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: runner-test\ntopology:\n  script: {ROOT / 'topologies' / 'dumbbell.py'}\n"
        f"  params: {{rate: 20mbit, delay: 0ms, queue_limit: 100}}\nbackend: netns\n{body}"
    )
    return path


def _quicbed(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "quicbed", *args],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        **kwargs,
    )


def _run_to_completion(exp: Path, out: Path, *options: str, status: int = 0) -> str:
    process = _quicbed("run", str(exp), "--out", str(out), "--no-report", *options)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == status, output
    return output


def _wait_for_lines(results: Path, count: int, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(read_lines(results)) < count:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "no run finished in time"
        time.sleep(0.1)


def _assert_only_complete_runs(out: Path) -> list[dict]:
    lines = read_lines(out / "results.jsonl")
    ids = [line["run_id"] for line in lines]
    assert len(ids) == len(set(ids)), "a run was recorded twice"
    folders = sorted(p.name for p in (out / "runs").iterdir() if not p.name.startswith("."))
    assert folders == sorted(ids), "every run folder has its results line and the other way round"
    for run_id in ids:
        assert json.loads((out / "runs" / run_id / "run.json").read_text())["run_id"] == run_id
    return lines


def test_runs_record_metrics_and_a_failing_run_does_not_stop_the_experiment(tmp_path: Path) -> None:
    # the 30 MB object cannot arrive within the 3 s timeout at 20 Mbit/s: that run fails
    exp = _experiment(
        tmp_path, "matrix:\n  transport: [quic, tcp]\n  workload.object: [2MB, 30MB]\ntimeout: 3s\nqlog: true\n"
    )
    out = tmp_path / "out"
    output = _run_to_completion(exp, out)
    lines = {line["run_id"]: line for line in _assert_only_complete_runs(out)}
    assert len(lines) == 4
    small = [line for line in lines.values() if line["cell"]["workload.object"] == "2MB"]
    large = [line for line in lines.values() if line["cell"]["workload.object"] == "30MB"]
    for line in small:
        assert line["status"] == "ok", line["error"]
        metrics = line["metrics"]
        assert 0 < metrics["goodput"] <= 20.5e6  # the link bounds it
        assert metrics["loss"] == 0 and 0 < metrics["ack_ratio"] < 1.5
        assert metrics["cwnd_mean"] > 0  # qlog (QUIC) or tcp_probe / ss samples (TCP)
        folder = out / "runs" / line["run_id"]
        assert (folder / "server.pcap").exists() and (folder / "client.pcap").exists()
        state = ["server.qlog"] if line["transport"]["kind"] == "quic" else ["tcp_probe.txt.gz", "ss.txt"]
        assert any((folder / name).exists() for name in state)
    for line in large:
        assert line["status"] == "failed" and "download failed" in line["error"]
    assert "FAILED" in output and "2 ok, 0 invalid, 2 failed" in output
    # made again on request: the first attempts are kept aside, the new lines supersede the old
    output = _run_to_completion(exp, out, "--resume", "--retry-failed", status=1)  # every run made failed
    assert "0 ok, 0 invalid, 2 failed, 2 done before" in output
    assert sorted(p.name for p in (out / "attempts").iterdir()) == sorted(f"{line['run_id']}-1" for line in large)
    assert len(read_lines(out / "results.jsonl")) == 6
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and metadata["versions"]["aioquic"]
    # what Flent records too: the CPU, the TCP and qdisc sysctls, readable times
    host = metadata["host"]
    assert host["cpu_model"] and host["sysctls"]["net.ipv4.tcp_congestion_control"] in ("cubic", "bbr", "reno")
    assert metadata["started_utc"].endswith("+00:00") and metadata["finished_utc"] >= metadata["started_utc"]
    (network,) = metadata["sessions"][0]["networks"]
    assert any("tbf" in q for q in network["interfaces"]["s1"]["qdiscs"])  # the bottleneck's qdisc
    assert network["interfaces"]["server"]["offloads"]["eth0"]["tcp-segmentation-offload"] == "off"


def test_runs_without_captures_complete_for_every_transport(tmp_path: Path) -> None:
    """With captures off no capture process creates a run's logs/ folder: the run still has one."""
    exp = _experiment(
        tmp_path, "matrix:\n  transport: [quic, tcp]\nworkload: {object: 300kB}\ncaptures: false\ntimeout: 40s\n"
    )
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    lines = _assert_only_complete_runs(out)
    assert [line["status"] for line in lines] == ["ok", "ok"], [line["error"] for line in lines]
    for line in lines:
        folder = out / "runs" / line["run_id"]
        assert (folder / "logs").is_dir() and not (folder / "server.pcap").exists()
        if line["transport"]["kind"] == "tcp":
            # nginx's idle and send timers give a link-stalled transfer the experiment's time
            config = (folder / "nginx" / "nginx.conf").read_text()
            assert "keepalive_timeout 40s;" in config and "send_timeout 40s;" in config


def test_background_traffic_runs_through_the_transfer_and_its_delivery_is_recorded(tmp_path: Path) -> None:
    """UDP background traffic from the server to the client, 1 s ahead of a TCP download: it
    takes its rate from the 20 Mbit/s link, and the run records what it delivered (a run whose
    background delivered nothing is invalid: tests/unit/test_runner_analyse.py)."""
    exp = _experiment(
        tmp_path,
        "matrix:\n  transport: [tcp]\nworkload: {object: 4MB}\ncaptures: false\ntimeout: 40s\n"
        "background: {kind: udp, from: server, to: client, rate: 8mbit}\n",
    )
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    [line] = _assert_only_complete_runs(out)
    assert line["status"] == "ok" and not line.get("invalid_reasons"), line
    folder = out / "runs" / line["run_id"]
    background = json.loads((folder / "run.json").read_text())["details"]["background"]
    assert json.loads((folder / "background.json").read_text())["bytes_received"] == background["bytes_received"]
    assert background["rate"] == 8e6 and background["seconds"] > 1.0, background
    # iperf3 paces at the rate; the datagrams TCP's standing queue turns away are lost
    assert 0.5 * 8e6 < background["received_bps"] <= 1.01 * 8e6 and background["bytes_received"] > 0, background
    # the download shared the link with it: well under the link's 20 Mbit/s
    assert line["metrics"]["goodput"] < 0.8 * 20e6, line["metrics"]


@pytest.mark.parametrize("how", ["ctrl-c", "kill -9"])
def test_an_interrupted_experiment_resumes_without_redoing_finished_runs(tmp_path: Path, how: str) -> None:
    exp = _experiment(tmp_path, "workload: {object: 300kB}\nmatrix:\n  transport: [quic, tcp]\nrepetitions: 3\n")
    out = tmp_path / "out"
    before = set(ownership.quicbed_namespaces())
    process = _quicbed("run", str(exp), "--out", str(out), "--no-report")
    _wait_for_lines(out / "results.jsonl", 2, process)
    os.killpg(process.pid, signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
    output, _ = process.communicate(timeout=60)
    if how == "ctrl-c":
        assert process.returncode == 130, output
        assert "--resume" in output
        assert not list((out / "runs").glob(".*.partial")), "an interrupted run left its folder"
        assert json.loads((out / "metadata.json").read_text())["status"] == "interrupted"
    else:
        cleaned = subprocess.run(
            [sys.executable, "-m", "quicbed", "clean"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        assert cleaned.returncode == 0, cleaned.stderr
    first = _assert_only_complete_runs(out)
    assert 2 <= len(first) < 6
    output = _run_to_completion(exp, out, "--resume")
    assert f"{len(first)} done before" in output
    lines = _assert_only_complete_runs(out)
    assert len(lines) == 6 and all(line["status"] == "ok" for line in lines)
    assert lines[: len(first)] == first  # finished runs untouched
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and len(metadata["sessions"]) == 2
    assert set(ownership.quicbed_namespaces()) == before, "namespaces of the runs are left"


def test_a_link_axis_reshapes_the_live_network_between_runs(tmp_path: Path) -> None:
    exp = _experiment(
        tmp_path,
        "workload: {object: 1MB}\nmatrix:\n  link.bottleneck.rate: [5mbit, 40mbit]\n"
        "  transport: [tcp]\nrepetitions: 2\n",
    )
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    lines = _assert_only_complete_runs(out)
    assert [line["cell"]["link.bottleneck.rate"] for line in lines] == ["5mbit", "40mbit"] * 2
    for line in lines:
        rate = 5e6 if line["cell"]["link.bottleneck.rate"] == "5mbit" else 40e6
        assert line["status"] == "ok" and line["metrics"]["goodput"] <= rate * 1.02
        qdiscs = json.loads((out / line["folder"] / "run.json").read_text())["details"]["qdiscs"]
        assert any(f"rate {rate / 1e6:g}Mbit" in q for q in qdiscs["s1"]), qdiscs["s1"]
    # the traffic followed the reshaped link (how close to the rate is bench/links.py's business)
    goodput = {
        rate: [line["metrics"]["goodput"] for line in lines if line["cell"]["link.bottleneck.rate"] == rate]
        for rate in ("5mbit", "40mbit")
    }
    assert min(goodput["40mbit"]) > max(goodput["5mbit"]), goodput
    metadata = json.loads((out / "metadata.json").read_text())
    assert len(metadata["sessions"][0]["networks"]) == 1  # built once, reshaped in place


def test_resuming_with_other_settings_is_refused(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "workload: {object: 200kB}\nmatrix:\n  transport: [tcp]\n")
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    output = _run_to_completion(exp, out, "--resume", "--set", "workload.object=300kB", status=1)
    assert "other settings (workload differ" in output
    output = _run_to_completion(exp, out, "--resume", "--repetitions", "2")  # more repetitions are fine
    assert "1 ok, 0 invalid, 0 failed, 1 done before" in output


def test_a_shard_runs_its_runs_and_resumes_only_as_that_shard(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "workload: {object: 200kB}\nmatrix:\n  transport: [quic, tcp]\nrepetitions: 2\n")
    out = tmp_path / "out"
    output = _run_to_completion(exp, out, "--shard", "2/2")
    assert "running runner-test: 2 runs (shard 2/2 (by cell) of 4)" in output
    assert sorted(line["run_id"] for line in _assert_only_complete_runs(out)) == ["c001-r001", "c001-r002"]
    shard = json.loads((out / "metadata.json").read_text())["shard"]
    assert shard == {"index": 2, "count": 2, "by": "cell", "runs": 2, "of": 4}
    output = _run_to_completion(exp, out, "--resume", "--shard", "1/2", status=1)
    assert "holds shard 2/2 by cell, not 1/2 by cell" in output
    output = _run_to_completion(exp, out, "--resume", status=1)
    assert "not none (all runs)" in output
    assert "0 ok, 0 invalid, 0 failed, 2 done before" in _run_to_completion(exp, out, "--resume", "--shard", "2/2")


def _competitor_run(tmp_path: Path, transport: str, competitor: str) -> tuple[dict, Path]:
    """The results line and folder of one 2 MB run of ``transport`` against ``competitor``."""
    exp = _experiment(
        tmp_path,
        f"workload: {{object: 2MB}}\ncompetitor: {{transport: {competitor}}}\nmatrix:\n  transport: [{transport}]\n",
    )
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    (line,) = _assert_only_complete_runs(out)
    assert line["status"] == "ok", line["error"]
    return line, out / line["folder"]


def test_a_competitor_downloads_at_the_same_time_over_the_same_link(tmp_path: Path) -> None:
    line, folder = _competitor_run(tmp_path, "quic", "tcp")
    assert line["competitor"]["kind"] == "tcp"
    main, rival = (json.loads((folder / name).read_text()) for name in ("client.json", "competitor.json"))
    assert main["ok"] and rival["ok"]
    assert abs(main["started_at"] - rival["started_at"]) < 0.25  # released together after start-up
    metrics = line["metrics"]
    # two flows on one 20 Mbit/s link: together no faster than the link, each well below it
    assert metrics["goodput"] < 20e6 and metrics["competitor_goodput"] < 20e6
    assert 0.5 <= metrics["jain_index"] <= 1
    assert metrics["throughput"] < 19e6  # the capture metrics follow the QUIC flow, not both


def test_a_tcp_competitor_runs_its_own_congestion_control(tmp_path: Path) -> None:
    line, folder = _competitor_run(tmp_path, "tcp", "tcp-bbr")
    assert line["metrics"]["goodput"] > 0 and line["metrics"]["competitor_goodput"] > 0
    servers = json.loads((folder / "run.json").read_text())["details"]["servers"]
    assert servers["main"]["congestion_control"] == "cubic"
    rule = servers["competitor"]["port_congestion_control"]
    assert rule["port"] == 8444 and rule["congestion_control"] == "bbr"  # test_port_cc.py: the kernel applies it


def test_several_competitors_download_at_once_each_with_its_own_server(tmp_path: Path) -> None:
    """competitor.transport: tcp-bbr+tcp-reno+quic: three competitors start with the measured
    download; each has its server on its own port (a TCP one with its own congestion control),
    its own record, and the fairness metrics count all four downloads."""
    line, folder = _competitor_run(tmp_path, "tcp", "tcp-bbr+tcp-reno+quic")
    assert line["competitor"]["name"] == "tcp-bbr+tcp-reno+quic"
    assert [t["name"] for t in line["competitor"]["transports"]] == ["tcp-bbr", "tcp-reno", "quic"]
    records = [
        json.loads((folder / name).read_text())
        for name in ("client.json", "competitor.json", "competitor-2.json", "competitor-3.json")
    ]
    assert all(record["ok"] for record in records)
    assert [record["server"]["port"] for record in records] == [8443, 8444, 8445, 4436]
    assert max(r["started_at"] for r in records) - min(r["started_at"] for r in records) < 0.25
    servers = json.loads((folder / "run.json").read_text())["details"]["servers"]
    assert servers["competitor"]["port_congestion_control"]["congestion_control"] == "bbr"
    assert servers["competitor-2"]["port_congestion_control"]["congestion_control"] == "reno"
    metrics = line["metrics"]
    goodputs = [8 * r["bytes"] / r["completion_time"] for r in records]
    assert metrics["competitor_goodput"] == pytest.approx(sum(goodputs[1:]), rel=1e-6)
    assert metrics["goodput_share"] == pytest.approx(goodputs[0] / sum(goodputs), rel=1e-6)
    assert metrics["jain_index"] == pytest.approx(sum(goodputs) ** 2 / (4 * sum(g * g for g in goodputs)), rel=1e-6)
    # one 20 Mbit/s link: every byte over the longest download (they start together). Not the sum of
    # the goodputs, each over its own download: a flow that ends early leaves the link to the others
    assert 8 * sum(r["bytes"] for r in records) / max(r["completion_time"] for r in records) < 20.5e6
    # the captures hold every download: the four data flows, from the four servers' ports
    from quicbed.analysis.metrics import data_flows
    from quicbed.analysis.packets import read_pcap

    assert sorted(flow[1] for flow in data_flows(read_pcap(folder / "client.pcap"))) == [4436, 8443, 8444, 8445]


@pytest.fixture(scope="module")
def full_captures(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, Path]]:
    """One run per transport (aioquic, TCP, and quinn when built) with captures: full and qlog:
    each run's record and folder."""
    from quicbed.apps.quic.implementations import native_binary

    tmp_path = tmp_path_factory.mktemp("full-captures")
    transports = ["quic", "tcp"] + (["quic-native"] if native_binary() is not None else [])
    exp = _experiment(
        tmp_path,
        f"workload: {{object: 300kB}}\nmatrix: {{transport: [{', '.join(transports)}]}}\ncaptures: full\nqlog: true\n",
    )
    out = tmp_path / "out"
    _run_to_completion(exp, out)
    return [(line, out / "runs" / line["run_id"]) for line in read_lines(out / "results.jsonl")]


def test_full_captures_keep_whole_packets_and_the_secrets_that_decrypt_them(
    full_captures: list[tuple[dict, Path]], tmp_path: Path
) -> None:
    """captures: full: the client's capture keeps whole packets and every client appends its
    TLS secrets (NSS key log) beside it, whatever its stack: aioquic, quinn, Python's ssl."""
    for line, folder in full_captures:
        assert line["status"] == "ok", line
        labels = {row.split()[0] for row in (folder / "tls-keys.log").read_text().splitlines()}
        # TLS 1.3 traffic secrets: what Wireshark needs for QUIC's 1-RTT packets and TLS records
        assert {"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"} <= labels, (line["run_id"], labels)
        captures = json.loads((folder / "run.json").read_text())["details"]["captures"]
        assert captures["client"]["snaplen"] == 262144 and captures["server"]["snaplen"] == 128
    plain = _experiment(tmp_path, "workload: {object: 100kB}\nmatrix: {transport: [quic]}\n")
    _run_to_completion(plain, tmp_path / "plain")
    (run,) = (tmp_path / "plain" / "runs").iterdir()
    assert not (run / "tls-keys.log").exists()  # headers-only captures: nothing to decrypt, no secrets kept


def test_the_server_qlogs_load_in_qvis(full_captures: list[tuple[dict, Path]]) -> None:
    """Both QUIC implementations' server qlogs pass qvis' loading rules (quicbed.analysis.qlog_check),
    quinn's with its RTTs in milliseconds (no caveat)."""
    from quicbed.analysis.qlog_check import check_qlog

    quic = [(line, folder) for line, folder in full_captures if line["transport"]["kind"] == "quic"]
    assert quic
    for line, folder in quic:
        check = check_qlog(folder / "server.qlog")
        assert check.problems == [] and check.events > 100, (line["run_id"], check)
        assert check.caveats == [], (line["run_id"], check.caveats)


def _tshark(capture: Path, keys: Path | None, display_filter: str, *fields: str) -> list[list[str]]:
    command = ["tshark", "-r", str(capture), "-Y", display_filter, "-T", "fields"]
    command += [option for field in fields for option in ("-e", field)]
    if keys is not None:
        command += ["-o", f"tls.keylog_file:{keys}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return [row.split("\t") for row in result.stdout.splitlines()]


@pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark missing (scripts/install.sh installs it with the test packages: apt install tshark)",
)
def test_wireshark_decrypts_the_full_captures_with_the_key_log(full_captures: list[tuple[dict, Path]]) -> None:
    """What docs/results.md promises (wireshark -o tls.keylog_file:tls-keys.log client.pcap): tshark reads the requests.
    HTTP/2: the request's path in its decoded headers. HTTP/3: the client's and the server's
    HEADERS frames and the response's stream (tshark 4.0 does not decode QPACK); without the key
    log, none of it."""
    for line, folder in full_captures:
        capture, keys = folder / "client.pcap", folder / "tls-keys.log"
        if line["transport"]["kind"] == "tcp":
            headers = _tshark(capture, keys, "http2.header", "http2.header.value")
            assert any("/bulk/300kB.bin" in row[0].split(",") for row in headers), (line["run_id"], headers[:3])
            assert not _tshark(capture, None, "http2.header", "http2.header.value")
            continue
        frames = _tshark(capture, keys, "http3.frame_type", "udp.dstport", "http3.frame_type")
        server_port = str(json.loads((folder / "client.json").read_text())["server"]["port"])
        headers_to = {port for port, types in frames if "1" in types.split(",")}
        assert server_port in headers_to and headers_to - {server_port}, (line["run_id"], frames[:5])
        # the response's stream in (at least) one packet per 1500 bytes of the object
        response = _tshark(
            capture, keys, f"quic.stream.stream_id == 0 and udp.srcport == {server_port}", "frame.number"
        )
        assert len(response) >= 300_000 / 1500, (line["run_id"], len(response))
        assert not _tshark(capture, None, "http3", "http3.frame_type"), line["run_id"]


@pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark missing (scripts/install.sh installs it with the test packages: apt install tshark)",
)
def test_resumed_runs_prime_before_their_captures_and_resume_on_the_wire(tmp_path: Path) -> None:
    """resumption: ticket (TCP) and 0rtt (QUIC, both implementations): each client makes its
    priming connection before the run's captures start, so the capture holds the measured
    connection alone, and tshark, with the key log, sees it resume: no certificate, and 0-RTT
    packets from a 0rtt client. The record's times are the measured connection's."""
    from quicbed.apps.quic.implementations import native_binary

    transports = {"tcp-ticket": "{kind: tcp, resumption: ticket}", "aioquic-0rtt": "{kind: quic, resumption: 0rtt}"}
    if native_binary() is not None:
        transports["quinn-0rtt"] = "{kind: quic, impl: quinn, resumption: 0rtt}"
    exp = _experiment(
        tmp_path,
        "workload: {object: 100kB}\ncaptures: full\ntransports:\n"
        + "".join(f"  {name}: {spec}\n" for name, spec in transports.items())
        + f"matrix: {{transport: [{', '.join(transports)}]}}\n",
    )
    _run_to_completion(exp, tmp_path / "out")
    lines = read_lines(tmp_path / "out" / "results.jsonl")
    assert sorted(line["transport"]["name"] for line in lines) == sorted(transports)
    for line in lines:
        name, folder = line["transport"]["name"], tmp_path / "out" / "runs" / line["run_id"]
        assert line["status"] == "ok", line
        record = json.loads((folder / "client.json").read_text())
        resumption = record["resumption"]
        assert resumption["priming"]["status"] == 404 and resumption["ticket_offered"] is True, (name, resumption)
        capture, keys = folder / "client.pcap", folder / "tls-keys.log"
        if name == "tcp-ticket":
            assert resumption["resumed_connections"] == 1
            assert len(_tshark(capture, None, "tcp.flags.syn == 1 and tcp.flags.ack == 0", "frame.number")) == 1
        else:
            assert resumption["early_data_accepted"] is True, (name, resumption)
            if name == "quinn-0rtt":  # the priming connection's NEW_TOKEN: validated from the first packet
                assert resumption["address_token_offered"] is True, resumption
            client_ids = _tshark(capture, keys, "quic.long.packet_type == 0 and udp.dstport == 4433", "quic.scid")
            assert len({row[0].split(",")[0] for row in client_ids}) == 1, (name, client_ids)
            assert _tshark(capture, keys, "quic.long.packet_type == 1", "frame.number"), name  # 0-RTT packets
        # decrypted: the handshake is there (Finished), the certificate is not
        assert _tshark(capture, keys, "tls.handshake.type == 20", "frame.number"), name
        assert not _tshark(capture, keys, "tls.handshake.type == 11", "frame.number"), name
        metrics = line["metrics"]
        assert 0 < metrics["connect_time"] < metrics["total_time"], (name, metrics)
