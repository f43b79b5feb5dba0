"""iperf3 JSON parsing and command lines (outputs recorded from iperf 3.12)."""

from __future__ import annotations

import json

import pytest

from quicbed.apps import iperf
from quicbed.errors import QuicbedError

TCP_REVERSE = {
    "start": {
        "test_start": {
            "protocol": "TCP",
            "num_streams": 1,
            "blksize": 131072,
            "omit": 0,
            "duration": 2,
            "reverse": 1,
            "target_bitrate": 0,
        }
    },
    "end": {
        "streams": [
            {
                "sender": {
                    "socket": 5,
                    "seconds": 2.002191,
                    "bytes": 5629824,
                    "bits_per_second": 22494653.1,
                    "retransmits": 3,
                    "max_snd_cwnd": 0,
                    "max_rtt": 0,
                    "min_rtt": 0,
                    "mean_rtt": 0,
                },
                "receiver": {"socket": 5, "seconds": 2.000093, "bytes": 4747992, "bits_per_second": 18991084.9},
            }
        ],
        "sum_sent": {
            "seconds": 2.002191,
            "bytes": 5629824,
            "bits_per_second": 22494653.1,
            "retransmits": 3,
            "sender": False,
        },
        "sum_received": {"seconds": 2.000093, "bytes": 4747992, "bits_per_second": 18991084.9},
        "cpu_utilization_percent": {"host_total": 3.9, "remote_total": 0.16},
        "sender_tcp_congestion": "bbr",
        "receiver_tcp_congestion": "bbr",
    },
}
TCP_FORWARD_SENDER = {
    "start": {"test_start": {"protocol": "TCP", "reverse": 0, "target_bitrate": 0}},
    "end": {
        "streams": [
            {"sender": {"bytes": 1, "max_snd_cwnd": 86880, "max_rtt": 9000, "min_rtt": 1000, "mean_rtt": 4000}}
        ],
        "sum_sent": {"seconds": 2, "bytes": 5000000, "bits_per_second": 2e7, "retransmits": 0},
        "sum_received": {"seconds": 2, "bytes": 4990000, "bits_per_second": 1.996e7},
        "sender_tcp_congestion": "cubic",
    },
}
UDP = {
    "start": {
        "test_start": {
            "protocol": "UDP",
            "num_streams": 1,
            "blksize": 1448,
            "duration": 2,
            "reverse": 0,
            "target_bitrate": 5000000,
        }
    },
    "end": {
        "streams": [
            {
                "udp": {
                    "bytes": 1249624,
                    "jitter_ms": 0.017,
                    "lost_packets": 2,
                    "packets": 863,
                    "lost_percent": 0.23,
                    "out_of_order": 1,
                }
            }
        ],
        "sum": {
            "seconds": 2.000263,
            "bytes": 1249624,
            "bits_per_second": 4998223.6,
            "jitter_ms": 0.017,
            "lost_packets": 2,
            "packets": 863,
            "lost_percent": 0.23,
        },
        "sum_sent": {
            "seconds": 2.000109,
            "bytes": 1249624,
            "bits_per_second": 4998223.6,
            "jitter_ms": 0,
            "lost_packets": 0,
            "packets": 863,
            "lost_percent": 0,
        },
        "sum_received": {
            "seconds": 2.000263,
            "bytes": 1246728,
            "bits_per_second": 4986000.0,
            "jitter_ms": 0.017,
            "lost_packets": 2,
            "packets": 863,
            "lost_percent": 0.23,
        },
        "cpu_utilization_percent": {"host_total": 4.4, "remote_total": 1.0},
    },
}
ERROR = {
    "start": {"connected": [], "version": "iperf 3.12"},
    "intervals": [],
    "end": {},
    "error": "unable to connect to server: Connection refused",
}


def test_tcp_result() -> None:
    result = iperf.parse_result(json.dumps(TCP_REVERSE))
    assert result.protocol == "tcp" and result.reverse and result.ok
    assert result.throughput == pytest.approx(18991084.9) and result.sent_bps == pytest.approx(22494653.1)
    assert result.retransmits == 3 and result.congestion_control == "bbr"
    assert result.bytes_received == 4747992 and result.duration == pytest.approx(2.000093)
    assert result.max_snd_cwnd is None and result.rtt_min is None  # the remote end sent
    assert result.lost_packets is None and result.jitter is None
    assert result.cpu["host_total"] == 3.9
    assert "raw" not in result.to_dict() and result.to_dict()["throughput"] == result.throughput


def test_tcp_sender_statistics() -> None:
    result = iperf.parse_result(TCP_FORWARD_SENDER)
    assert result.max_snd_cwnd == 86880
    assert result.rtt_min == pytest.approx(0.001) and result.rtt_max == pytest.approx(0.009)
    assert result.rtt_mean == pytest.approx(0.004)


def test_udp_result() -> None:
    result = iperf.parse_result(UDP)
    assert result.protocol == "udp" and result.target_bps == 5e6
    assert result.throughput == pytest.approx(4986000.0)
    assert result.lost_packets == 2 and result.lost_percent == pytest.approx(0.23)
    assert result.packets == 863 and result.out_of_order == 1
    assert result.jitter == pytest.approx(17e-6) and result.retransmits is None


def test_errors_and_garbage() -> None:
    result = iperf.parse_result(ERROR)
    assert not result.ok and "Connection refused" in result.error and result.throughput is None
    assert "not JSON" in iperf.parse_result("iperf3: error").error
    assert iperf.parse_result("").error == "iperf3 gave no result"


def test_client_command_lines() -> None:
    argv = iperf.client_argv(
        "10.0.0.2", port=5202, protocol="udp", rate="10mbit", duration=3, reverse=True, length=1200
    )
    assert argv[:7] == ["iperf3", "-c", "10.0.0.2", "-p", "5202", "-J", "-t"]
    assert argv[argv.index("-b") + 1] == "10000000" and "-u" in argv and "-R" in argv
    assert argv[argv.index("-l") + 1] == "1200"
    tcp = iperf.client_argv("10.0.0.2", congestion="reno", streams=2, omit=0.5, rate=5e6)
    assert tcp[tcp.index("-C") + 1] == "reno" and tcp[tcp.index("-P") + 1] == "2"
    assert tcp[tcp.index("-O") + 1] == "0.5" and tcp[tcp.index("-b") + 1] == "5000000"
    assert "-u" not in tcp and "-R" not in tcp
    with pytest.raises(QuicbedError, match="needs a rate"):
        iperf.client_argv("10.0.0.2", protocol="udp")
    with pytest.raises(QuicbedError):
        iperf.client_argv("10.0.0.2", protocol="sctp")
    with pytest.raises(QuicbedError):
        iperf.client_argv("10.0.0.2", duration=0)


def test_bursts_and_pacing_timer_reach_the_command_line():
    argv = iperf.client_argv("10.0.0.2", protocol="udp", rate=20e6, burst=64, pacing_timer_us=100)
    assert argv[argv.index("-b") + 1] == "20000000/64"
    assert argv[argv.index("--pacing-timer") + 1] == "100"
