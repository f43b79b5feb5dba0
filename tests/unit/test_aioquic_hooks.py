"""The aioquic internals quicbed's hooks rely on are still there.

If this file fails after an aioquic upgrade, the hooks in
quicbed/apps/quic/aioquic_hooks.py must be revisited before any QUIC/BQUIC result can be
trusted: a knob might silently stop acting.
"""

from __future__ import annotations

import inspect

import pytest
from aioquic.quic import recovery
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

from quicbed.apps.quic import aioquic_hooks
from quicbed.apps.quic.profiles import get_profile


def test_installed_aioquic_is_a_supported_version() -> None:
    assert aioquic_hooks.is_supported_version(), (
        f"aioquic {aioquic_hooks.aioquic_version()} is outside the range the hooks were "
        f"checked against (aioquic{aioquic_hooks.SUPPORTED_AIOQUIC}); run this test file, "
        "check aioquic_hooks.py against the new release, then widen the range"
    )


def test_aioquic_internals_used_by_the_hooks_exist() -> None:
    problems = aioquic_hooks.check_internals()
    assert not problems, (
        f"aioquic {aioquic_hooks.aioquic_version()} changed internals that "
        "quicbed/apps/quic/aioquic_hooks.py relies on:\n  - " + "\n  - ".join(problems)
    )


def test_check_internals_notices_a_missing_internal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(QuicConnection, "_write_ack_frame")
    monkeypatch.setattr(recovery.QuicPacketRecovery, "_detect_loss", lambda self, *, now, space: None)
    problems = aioquic_hooks.check_internals()
    assert "QuicConnection._write_ack_frame is missing" in problems
    assert any(
        "_detect_loss no longer refers to ['K_PACKET_THRESHOLD', 'K_TIME_THRESHOLD']" in problem for problem in problems
    )


def test_require_compatible_message_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aioquic_hooks, "_compatibility_problems", lambda: ("X is missing",))
    with pytest.raises(aioquic_hooks.AioquicIncompatible) as error:
        aioquic_hooks.require_compatible()
    text = str(error.value)
    assert "X is missing" in text and aioquic_hooks.SUPPORTED_AIOQUIC in text


def test_version_range() -> None:
    assert aioquic_hooks.is_supported_version("1.2.0")
    assert aioquic_hooks.is_supported_version("1.7.2")
    assert not aioquic_hooks.is_supported_version("1.1.0")
    assert not aioquic_hooks.is_supported_version("1.8.0")
    assert not aioquic_hooks.is_supported_version("2.0.0")


def test_loss_thresholds_are_per_connection_not_global() -> None:
    detect = aioquic_hooks.detect_loss_function(1.5, 7)
    assert detect.__code__ is recovery.QuicPacketRecovery._detect_loss.__code__
    assert detect.__globals__["K_TIME_THRESHOLD"] == 1.5
    assert detect.__globals__["K_PACKET_THRESHOLD"] == 7
    assert recovery.K_TIME_THRESHOLD == 9 / 8 and recovery.K_PACKET_THRESHOLD == 3
    assert list(inspect.signature(detect).parameters) == ["self", "now", "space"]


def test_install_applies_the_profile_to_one_connection_only() -> None:
    profile = get_profile("bquic")
    hooked = QuicConnection(configuration=aioquic_hooks.configure(QuicConfiguration(is_client=True), profile))
    plain = QuicConnection(configuration=QuicConfiguration(is_client=True))
    hooks = aioquic_hooks.install(hooked, profile)
    assert isinstance(hooked._loss._pacer, aioquic_hooks.NoPacer)
    assert not isinstance(plain._loss._pacer, aioquic_hooks.NoPacer)
    assert "receive_datagram" in vars(hooked) and "receive_datagram" not in vars(plain)
    assert hooks.advertised_max_ack_delay_ms() == 25
    assert hooks.stats()["rtt_min"] is None and hooks.stats()["pacer"] == "NoPacer"


def test_install_requires_a_configured_congestion_control() -> None:
    connection = QuicConnection(configuration=QuicConfiguration(is_client=True))
    with pytest.raises(ValueError, match="configure"):
        aioquic_hooks.install(connection, get_profile("bquic"))


def test_aioquic_profile_leaves_aioquic_untouched() -> None:
    profile = get_profile("aioquic")
    connection = QuicConnection(configuration=aioquic_hooks.configure(QuicConfiguration(is_client=True), profile))
    hooks = aioquic_hooks.install(connection, profile)
    assert connection._configuration.congestion_control_algorithm == "reno"
    assert type(connection._loss._pacer) is recovery.QuicPacketPacer
    assert "_detect_loss" not in vars(connection._loss)  # aioquic's own, with its globals
    assert "_serialize_transport_parameters" not in vars(connection)
    assert hooks.scheduler is None


def test_the_initial_window_knob_sets_the_first_congestion_window() -> None:
    """initial_window: the window aioquic's controller starts from (12000 bytes by default:
    10 datagrams of 1200), kept with the profile's slow-start exit rule; aioquic refuses
    mtu_discovery, which it does not have."""
    from quicbed.apps.quic.implementations import quic_implementation

    for knobs, window in (({}, 12000), ({"initial_window": 14480}, 14480)):
        profile = get_profile("quic", (), knobs)
        connection = QuicConnection(configuration=aioquic_hooks.configure(QuicConfiguration(is_client=True), profile))
        aioquic_hooks.install(connection, profile)
        controller = connection._loss._cc
        assert controller.congestion_window == window, knobs
        assert isinstance(controller._rtt_monitor, aioquic_hooks.DelayIncreaseMonitor)
    aioquic = quic_implementation("aioquic")
    assert aioquic.refusals(get_profile("quic", (), {"mtu_discovery": True}))
    assert not aioquic.refusals(get_profile("quic", (), {"mtu_discovery": False}))
    assert quic_implementation("quinn").refusals(
        get_profile(
            "quic", (), {"congestion_control": "bbr", "slow_start_exit_rtt_increase": None, "initial_window": 14480}
        )
    )
