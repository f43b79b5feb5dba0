"""TCP sender state from ``ss -tin`` samples and from tcp_probe / tcp_cong_state_set trace
text, on the committed fixtures and on hand-written text.

Expected values are read off the fixture text itself (quoted below) or counted with grep:
``grep -c "cwnd:" tcp/ss.txt`` (12), ``tcp_long/ss.txt`` (91); ``zcat
tcp/tcp_probe.txt.gz | grep -c tcp_probe:`` (93), ``tcp_long`` (648).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from quicbed.analysis import tcpstate
from quicbed.analysis.packets import read_pcap
from quicbed.apps.transports.tcp_state import ss_sampler_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analysis"
META = json.loads((FIXTURES / "meta.json").read_text())


def test_first_ss_sample_of_the_tcp_run() -> None:
    # tcp/ss.txt, first block with a socket:
    # # 1795257025.934888
    # State Recv-Q Send-Q Local Address:Port Peer Address:Port Process
    # ESTAB 0      41992       10.0.0.2:8080     10.0.0.1:59360
    # <TAB> cubic wscale:10,10 rto:204 rtt:1.437/2.118 ato:40 mss:1448 ... cwnd:16
    #   bytes_sent:32060 bytes_acked:8892 ... pacing_rate 257914760bps delivery_rate
    #   196338976bps delivered:8 app_limited busy:4ms unacked:16 ... minrtt:0.031 ...
    samples = tcpstate.read_ss(FIXTURES / "tcp/ss.txt")
    assert len(samples) == 12
    first = samples.iloc[0]
    assert first["time"] == pytest.approx(1795257025.934888, abs=1e-6)
    assert (first["local"], first["peer"], first["cc"]) == ("10.0.0.2:8080", "10.0.0.1:59360", "cubic")
    assert (first["cwnd"], first["mss"], first["cwnd_bytes"]) == (16, 1448, 16 * 1448)
    assert math.isnan(first["ssthresh"])  # not set yet: slow start
    assert (first["rtt"], first["rttvar"], first["min_rtt"]) == pytest.approx((0.001437, 0.002118, 0.000031))
    assert (first["bytes_sent"], first["bytes_acked"], first["unacked"]) == (32060, 8892, 16)
    assert first["pacing_rate"] == 257914760 and first["delivery_rate"] == 196338976
    assert bool(first["app_limited"]) and first["send_q"] == 41992
    second = samples.iloc[1]  # "cwnd:21 ssthresh:21": slow start ended
    assert (second["cwnd"], second["ssthresh"]) == (21, 21)
    assert tcpstate.ss_phases(samples).tolist()[:3] == ["slow_start", "congestion_avoidance", "congestion_avoidance"]


def test_ss_samples_of_the_long_run_show_the_losses() -> None:
    samples = tcpstate.connection(tcpstate.read_ss(FIXTURES / "tcp_long/ss.txt"))
    assert len(samples) == 91
    # grep: 6 samples print "lost:", among them "retrans:1/1 ... lost:1 cwnd:18 ssthresh:18"
    assert int((samples["lost"] > 0).sum()) == 6
    phases = tcpstate.ss_phases(samples)
    assert set(phases) == {"slow_start", "congestion_avoidance", "recovery"}
    assert (phases[samples["lost"] > 0] == "recovery").all()
    summary = tcpstate.summarize_ss(samples)
    assert summary.cwnd_max == 27 and 18 <= summary.cwnd_mean <= 27
    assert sum(summary.phases.values()) == pytest.approx(1.0)


def test_tcp_probe_of_the_tcp_run() -> None:
    # first event: "... 4123.581124: tcp_probe: family=AF_INET src=10.0.0.2:8080
    #   dest=10.0.0.1:59360 mark=0x0 data_len=91 snd_nxt=0x21874fab snd_una=0x21874fab
    #   snd_cwnd=10 ssthresh=2147483647 snd_wnd=64512 srtt=31 rcv_wnd=65160 sock_cookie=3f"
    offset = tcpstate.trace_clock_offset(META["tcp"])
    probe, states = tcpstate.read_trace(FIXTURES / "tcp/tcp_probe.txt.gz", offset)
    assert len(probe) == 93
    first = probe.iloc[0]
    assert first["time"] == pytest.approx(4123.581124 + offset, abs=1e-6)
    assert (first["src"], first["dst"], first["data_len"]) == ("10.0.0.2:8080", "10.0.0.1:59360", 91)
    assert first["snd_nxt"] == first["snd_una"] == 0x21874FAB
    assert first["cwnd"] == 10 and math.isnan(first["ssthresh"])
    assert first["srtt"] == pytest.approx(31e-6)  # the kernel prints microseconds
    assert (first["snd_wnd"], first["rcv_wnd"], first["cookie"]) == (64512, 65160, "3f")
    # three tcp_cong_state_set lines: Open at 4123.581044, Recovery at .749631, Open .750863
    assert states["state"].tolist() == ["open", "recovery", "open"]
    assert states["time"].tolist() == pytest.approx(
        [4123.581044 + offset, 4123.749631 + offset, 4123.750863 + offset], abs=1e-6
    )
    # the first probe (the 91-byte request arriving) is on the capture clock: tcpdump
    # shows that request at 1795257025.923251 at the server
    request = next(p for p in read_pcap(FIXTURES / "tcp/server.pcap") if p.payload_len == 91)
    assert request.ts == pytest.approx(1795257025.923251, abs=1e-6)
    assert 0 <= first["time"] - request.ts < 0.001


def test_probe_recovery_time_matches_the_cong_state_events() -> None:
    offset = tcpstate.trace_clock_offset(META["tcp_long"])
    probe, states = tcpstate.read_trace(FIXTURES / "tcp_long/tcp_probe.txt.gz", offset)
    sender = tcpstate.sender_probes(probe)
    assert len(sender) == len(probe) == 648 and set(sender["src"]) == {"10.0.0.2:8080"}
    # zcat tcp_long/tcp_probe.txt.gz | grep tcp_cong_state_set: cong_state 3 (Recovery) at
    # 4125.204220, .713668, 4126.177546, each ended by cong_state 0 at 4125.250252,
    # .743943, 4126.207827: 0.046032 + 0.030275 + 0.030281 = 0.106588 s in recovery
    assert states["ca_state"].tolist() == [0, 3, 0, 3, 0, 1, 3, 0]
    summary = tcpstate.summarize_probe(sender, states)
    recovery_time = summary.phases["recovery"] * (summary.end - summary.start)
    # phases are sampled at probe events (one per ACK, ~1.2 ms apart): six edges
    assert recovery_time == pytest.approx(0.106588, abs=6 * 0.0013)
    assert summary.cwnd_max == 27
    # ss saw the same connection (samples every ~14 ms): its recovery share is close
    ss_summary = tcpstate.summarize_ss(tcpstate.read_ss(FIXTURES / "tcp_long/ss.txt"))
    assert ss_summary.phases["recovery"] == pytest.approx(summary.phases["recovery"], abs=0.04)
    assert ss_summary.cwnd_mean == pytest.approx(summary.cwnd_mean, abs=1.5)


def test_parse_ss_with_state_column_flags_and_units() -> None:
    text = """ts=100.5
State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
ESTAB  0      1000   [::1]:443  [::1]:5000
\t cubic wscale:7,7 rto:204 rtt:0.5/0.25 mss:1000 cwnd:8 ssthresh:6 retrans:1/3 lost:1 \
send 1.5Mbps pacing_rate 2Gbps delivery_rate 12Kbps app_limited unacked:4
101.0
Recv-Q Send-Q Local Address:Port Peer Address:Port Process
0      0      10.0.0.2:80  10.0.0.1:4000
\t bbr rtt:10/5 mss:1448 cwnd:20 bbr:(bw:1Mbps,mrtt:1) minrtt:2.5
"""
    frame = tcpstate.parse_ss(text)
    assert frame["time"].tolist() == [100.5, 101.0]
    one, two = frame.iloc[0], frame.iloc[1]
    assert (one["local"], one["peer"], one["cc"]) == ("[::1]:443", "[::1]:5000", "cubic")
    assert (one["cwnd"], one["ssthresh"], one["retrans"], one["retrans_total"], one["lost"]) == (8, 6, 1, 3, 1)
    assert one["rtt"] == pytest.approx(0.0005) and one["rttvar"] == pytest.approx(0.00025)
    assert one["pacing_rate"] == 2e9 and one["delivery_rate"] == 12e3
    assert bool(one["app_limited"]) and not bool(two["app_limited"])
    assert (two["cc"], two["cwnd"], two["min_rtt"]) == ("bbr", 20, pytest.approx(0.0025))
    assert two["retrans"] == 0 and math.isnan(two["ssthresh"])
    info = tcpstate.parse_ss_info("\t cubic rto:204 ato:40 send 100bps busy:4ms")
    assert info["rto"] == pytest.approx(0.204) and info["send"] == 100 and info["busy"] == "4ms"


def test_ss_phases_and_shares_on_hand_made_samples() -> None:
    text = "".join(
        f"# {t}\nESTAB 0 0 1.1.1.1:1 2.2.2.2:2\n\t cwnd:{c}{s} bytes_acked:{a}{x}\n"
        for t, c, s, a, x in [
            (0.0, 10, "", 1, ""),
            (1.0, 20, "", 2, ""),
            (2.0, 10, " ssthresh:10", 3, " lost:2"),
            (3.0, 12, " ssthresh:10", 4, ""),
            (4.0, 12, " ssthresh:10", 4, ""),
        ]
    )
    samples = tcpstate.parse_ss(text)
    assert tcpstate.ss_phases(samples).tolist() == [
        "slow_start",
        "slow_start",
        "recovery",
        "congestion_avoidance",
        "congestion_avoidance",
    ]
    summary = tcpstate.summarize_ss(samples)
    # active until the last bytes_acked change (t = 3): 2 s slow start, 1 s recovery
    assert (summary.start, summary.end) == (0.0, 3.0)
    assert summary.phases == pytest.approx({"slow_start": 2 / 3, "recovery": 1 / 3, "congestion_avoidance": 0.0})
    assert summary.cwnd_mean == pytest.approx((10 + 20 + 10) / 3)


def test_trace_lines_of_other_formats() -> None:
    text = "\n".join(
        [
            "# tracer: nop",
            "   <idle>-0     [003] d.s.. 10.000100: tcp_probe: family=AF_INET6 "
            "src=[2001:db8::2]:443 dest=[2001:db8::1]:5000 mark=0x0 data_len=0 snd_nxt=0x10 "
            "snd_una=0x8 snd_cwnd=30 ssthresh=20 snd_wnd=1000 srtt=2500 rcv_wnd=2000 "
            "sock_cookie=1 skbaddr=0 skaddr=0",
            "  kworker/u8:2-77 [000] 10.000050: tcp_cong_state_set: family=AF_INET6 sport=443 "
            "dport=5000 saddr=0.0.0.0 daddr=0.0.0.0 saddrv6=2001:db8::2 daddrv6=2001:db8::1 "
            "cong_state=4",
            "garbage line",
        ]
    )
    probe, states = tcpstate.parse_trace(text, clock_offset=100.0)
    assert probe["src"].tolist() == ["2001:db8::2:443"] and probe["srtt"].tolist() == [0.0025]
    assert probe["time"].tolist() == pytest.approx([110.0001])
    assert (probe["snd_nxt"].iloc[0], probe["ssthresh"].iloc[0]) == (16, 20)
    assert states["src"].tolist() == ["2001:db8::2:443"] and states["state"].tolist() == ["loss"]
    assert tcpstate.probe_phases(probe, states).tolist() == ["recovery"]
    assert tcpstate.probe_phases(probe).tolist() == ["congestion_avoidance"]


def test_sampler_command_is_runnable_python() -> None:
    argv = ss_sampler_command(8080, 0.02)
    assert argv[1] == "-c" and argv[3:] == ["0.02", "8080"]
    compile(argv[2], "<sampler>", "exec")
    assert np.isfinite(tcpstate.trace_clock_offset({"mono_to_epoch": 5.0}))
