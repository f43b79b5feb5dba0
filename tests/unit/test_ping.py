"""Parsing iputils ping output."""

from __future__ import annotations

import pytest

from quicbed.apps import ping
from quicbed.errors import QuicbedError

OUTPUT = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
[1795256690.100001] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.421 ms
[1795256690.300002] no answer yet for icmp_seq=2
[1795256690.300502] 64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=0.051 ms
[1795256690.300602] 64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=0.061 ms (DUP!)
[1795256690.500003] 64 bytes from 10.0.0.2: icmp_seq=4 ttl=63 time=12.5 ms

--- 10.0.0.2 ping statistics ---
4 packets transmitted, 3 received, +1 duplicates, 25% packet loss, time 610ms
rtt min/avg/max/mdev = 0.051/4.324/12.500/5.781 ms
"""
PLAIN = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.045 ms

--- 10.0.0.2 ping statistics ---
1 packets transmitted, 1 received, 0% packet loss, time 0ms
rtt min/avg/max/mdev = 0.045/0.045/0.045/0.000 ms
"""
NOTHING = """PING 10.0.0.99 (10.0.0.99) 56(84) bytes of data.

--- 10.0.0.99 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 406ms
"""


def test_replies_summary_and_missing() -> None:
    result = ping.parse_output(OUTPUT, "10.0.0.2")
    assert result.transmitted == 4 and result.received == 3 and result.duplicates == 1
    assert result.loss == pytest.approx(0.25)
    assert result.rtts == pytest.approx([0.000421, 0.000051, 0.0125])
    assert [r.seq for r in result.replies] == [1, 3, 3, 4] and result.replies[2].duplicate
    assert result.replies[0].time == pytest.approx(1795256690.100001)
    assert result.replies[3].ttl == 63 and result.replies[0].size == 64
    assert result.missing == [2]
    assert result.min == pytest.approx(51e-6) and result.max == pytest.approx(0.0125)
    assert result.avg == pytest.approx(0.004324) and result.mdev == pytest.approx(0.005781)
    assert result.error is None and result.to_dict()["loss"] == pytest.approx(0.25)


def test_without_timestamps_and_all_lost() -> None:
    plain = ping.parse_output(PLAIN)
    assert plain.rtts == [pytest.approx(45e-6)] and plain.replies[0].time is None
    lost = ping.parse_output(NOTHING)
    assert lost.transmitted == 3 and lost.received == 0 and lost.errors == 3
    assert lost.loss == 1.0 and lost.avg is None and lost.rtts == []
    assert ping.parse_output("").error == "no ping output"


def test_command_line() -> None:
    argv = ping.ping_argv("10.0.0.2", count=5, interval=0.05, size=1000, reply_timeout=0.5)
    assert argv == ["ping", "-n", "-D", "-O", "-c", "5", "-i", "0.05", "-W", "0.5", "-s", "1000", "10.0.0.2"]
    with pytest.raises(QuicbedError):
        ping.ping_argv("10.0.0.2", count=0)
    with pytest.raises(QuicbedError):
        ping.ping_argv("10.0.0.2", interval=0.001)
