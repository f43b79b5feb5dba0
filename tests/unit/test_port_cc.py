"""The commands that give one TCP server port its own congestion control (policy routing)."""

from __future__ import annotations

import pytest

from quicbed.apps.tcp.port_cc import PortCongestionControl
from quicbed.errors import BackendError


def test_a_rule_for_the_port_and_a_route_with_congctl_in_its_own_table() -> None:
    setting = PortCongestionControl(port=8444, client="10.0.0.1", algorithm="bbr")
    route = {"dst": "10.0.0.1", "gateway": "10.0.1.254", "dev": "eth0", "prefsrc": "10.0.1.2", "flags": []}
    assert setting.apply_commands(route) == [
        [
            "ip",
            "-4",
            "route",
            "replace",
            "10.0.0.1/32",
            "via",
            "10.0.1.254",
            "dev",
            "eth0",
            "src",
            "10.0.1.2",
            "table",
            "18444",
            "congctl",
            "bbr",
        ],
        ["ip", "-4", "rule", "add", "priority", "100", "sport", "8444", "table", "18444"],
    ]
    assert setting.undo_commands() == [
        ["ip", "-4", "rule", "del", "priority", "100", "sport", "8444", "table", "18444"],
        ["ip", "-4", "route", "flush", "table", "18444"],
    ]
    assert setting.describe()["congestion_control"] == "bbr"


def test_a_directly_connected_ipv6_client() -> None:
    setting = PortCongestionControl(port=8444, client="fd00::1", algorithm="reno")
    (route, rule) = setting.apply_commands({"dst": "fd00::1", "dev": "eth0"})
    assert route == ["ip", "-6", "route", "replace", "fd00::1/128", "dev", "eth0", "table", "18444", "congctl", "reno"]
    assert rule[:2] == ["ip", "-6"]
    with pytest.raises(BackendError, match="no route"):
        setting.apply_commands({"dst": "fd00::1", "type": "unreachable"})
