"""Every plot function writes a PNG and an SVG with labelled axes, from tidy data built
from the committed fixtures (or small frames)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import image

from quicbed.analysis import metrics, plots, qlog, series, stats, tcpstate
from quicbed.analysis.packets import read_pcap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"


def _check(paths: list[Path], *texts: str) -> str:
    assert [p.suffix for p in paths] == [".png", ".svg"]
    png, svg = paths
    pixels = image.imread(png)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300  # 200 dpi, a column wide
    assert pixels.std() > 0.01  # not blank
    text = svg.read_text()
    assert "<svg" in text and "Date" not in text
    for wanted in texts:  # labels stay text in the SVG (svg.fonttype none)
        assert wanted in text, wanted
    return text


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "cell": np.repeat(["0 hops", "1 hop", "2 hops"], 10).tolist() * 2,
            "proto": ["quic"] * 30 + ["bquic"] * 30,
            "throughput": np.r_[rng.normal(8, 1, 30), rng.normal(9, 1, 30)] * 1e6,
        }
    )


def test_bars_with_confidence_intervals(tmp_path: Path, runs: pd.DataFrame) -> None:
    table = stats.summarize(runs.assign(mbps=runs["throughput"] / 1e6), ["cell", "proto"], "mbps")
    svg = _check(
        plots.bar_ci(
            table, tmp_path / "bars", x="cell", hue="proto", ylabel="throughput (Mbit/s)", xlabel="client position"
        ),
        "throughput (Mbit/s)",
        "client position",
        "1 hop",
        "bquic",
    )
    # fixed protocol colours, whatever the group order
    assert plots.PROTOCOL_COLOURS["quic"].lower() in svg.lower()
    assert plots.PROTOCOL_COLOURS["bquic"].lower() in svg.lower()


def test_ccdf_with_band(tmp_path: Path, runs: pd.DataFrame) -> None:
    _check(
        plots.ccdf_plot(
            runs, tmp_path / "ccdf", value="throughput", group="proto", scale=1e-6, xlabel="throughput (Mbit/s)"
        ),
        "throughput (Mbit/s)",
        "P(X &gt; x)",
    )


def test_ipt_histogram_and_ecdf_of_the_captures(tmp_path: Path) -> None:
    frames = []
    for name in ("quic", "bquic"):
        for side in ("server", "client"):
            packets = read_pcap(FIXTURES / name / f"{side}.pcap")
            gaps = metrics.inter_packet_times(metrics.data_packets(packets, metrics.main_flow(packets)))
            frames.append(pd.DataFrame({"gap": gaps, "group": f"{name} {side}"}))
    _check(
        plots.ipt_plot(pd.concat(frames), tmp_path / "ipt", group="group"),
        "inter-packet time (µs)",
        "share of gaps",
        "bquic server",
    )


def test_sender_state_over_time_from_qlog_and_ss(tmp_path: Path) -> None:
    frames = []
    for name in ("quic", "bquic"):
        frames.append(series.from_qlog(qlog.load_trace(FIXTURES / name / "server.qlog.gz")).assign(group=name))
    samples = tcpstate.read_ss(FIXTURES / "tcp_long/ss.txt")
    connection = samples[samples["local"] == samples["local"].iloc[0]]
    frames.append(series.from_ss(connection).assign(group="tcp"))
    lines = pd.concat([frame.assign(time=frame["time"] - frame["time"].min()) for frame in frames])
    lines = lines.melt(id_vars=["group", "time"], value_vars=list(series.SERIES), var_name="series")
    capacity = pd.DataFrame({"time": [0.0, 1.0], "rate": [20e6, 10e6]})
    _check(
        plots.sender_plot(lines, tmp_path / "sender", capacity=capacity),
        "cwnd (kB)",
        "in flight (kB)",
        "RTT (ms)",
        "pacing rate (Mbit/s)",
        "bquic",
        "tcp",
        "link capacity (trace)",
    )


def test_throughput_bins_sequence_and_shares(tmp_path: Path) -> None:
    bins = []
    for name in ("quic", "tcp"):
        packets = read_pcap(FIXTURES / name / "client.pcap")
        table = metrics.binned_throughput(metrics.data_packets(packets, metrics.main_flow(packets)), 0.05)
        bins.append(table.assign(group=name))
    _check(
        plots.throughput_bins_plot(pd.concat(bins), tmp_path / "bins", group="group", bin_width=0.05),
        "throughput per 50 ms (Mbit/s)",
    )
    server = read_pcap(FIXTURES / "bquic/server.pcap")
    client = read_pcap(FIXTURES / "bquic/client.pcap")
    rows = metrics.sequence_frame(server, client, metrics.main_flow(client))
    _check(plots.sequence_plot(rows, tmp_path / "sequence"), "data offset (kB)", "lost", "ACK (client)")
    packets = read_pcap(FIXTURES / "parallel/client.pcap")
    flows = metrics.data_flows(packets)
    names = {flow: "QUIC" if flow[4] == "udp" else "TCP" for flow in flows}
    events = pd.DataFrame(
        [(p.ts, names[p.flow], p.payload_len) for p in packets if p.flow in flows and metrics.is_data(p)],
        columns=["time", "flow", "bytes"],
    )
    shares = stats.bandwidth_share(stats.binned_bytes(events, 0.05))
    _check(plots.share_plot(shares, tmp_path / "shares"), "share of bytes per bin", "TCP")


def test_svg_output_is_reproducible(tmp_path: Path, runs: pd.DataFrame) -> None:
    first = plots.ccdf_plot(runs, tmp_path / "a", value="throughput", xlabel="x (bit/s)", formats=("svg",))
    second = plots.ccdf_plot(runs, tmp_path / "b", value="throughput", xlabel="x (bit/s)", formats=("svg",))
    strip = lambda text: re.sub(r"<dc:date>.*?</dc:date>", "", text)  # noqa: E731
    assert strip(first[0].read_text()) == strip(second[0].read_text())
    assert plots.colour(0, "TCP client") == plots.PROTOCOL_COLOURS["tcp"]
    assert plots.colour(9) == plots.PALETTE[1]


def test_a_transport_keeps_its_protocol_colour_whatever_its_suffix() -> None:
    from quicbed.analysis.plots import PALETTE, PROTOCOL_COLOURS, colour

    assert colour(2, "bquic-native") == PROTOCOL_COLOURS["bquic"] != colour(0, "tcp") == PROTOCOL_COLOURS["tcp"]
    assert colour(1, "quic-native") == colour(0, "quic (competitor)") == PROTOCOL_COLOURS["quic"]
    # a pair names two protocols: the palette tells the pairs apart
    assert colour(3, "tcp vs quic-native") == PALETTE[3] and colour(4, "tcp vs tcp") == PALETTE[4]


def test_groups_of_one_protocol_get_colours_of_their_own() -> None:
    """tcp and tcp-ticket (or the five QUIC variants of e3-setup) must not share a colour in a
    figure; groups that name distinct protocols keep the protocols' own colours."""
    from quicbed.analysis.plots import PROTOCOL_COLOURS, _coloured_groups

    variants = pd.DataFrame({"transport": ["tcp", "tcp-ticket", "quic-native", "quic-0rtt"], "value": [1, 2, 3, 4]})
    shades = [shade for _, _, shade in _coloured_groups(variants, "transport")]
    assert len(set(shades)) == 4
    pair = pd.DataFrame({"transport": ["tcp", "quic"], "value": [1, 2]})
    assert [shade for _, _, shade in _coloured_groups(pair, "transport")] == [
        PROTOCOL_COLOURS["tcp"],
        PROTOCOL_COLOURS["quic"],
    ]
