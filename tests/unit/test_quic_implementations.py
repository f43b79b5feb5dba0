"""Which knob values each QUIC implementation honours, and how the native endpoints refuse
what they cannot run before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quicbed.apps.quic import implementations, native
from quicbed.apps.quic.implementations import measured_ceiling, quic_implementation, save_ceilings
from quicbed.apps.quic.profiles import get_profile
from quicbed.errors import QuicbedError

ROOT = Path(__file__).resolve().parents[2]
QUINN, AIOQUIC = quic_implementation("quinn"), quic_implementation("aioquic")


def test_quinn_runs_quic_and_unpaced_profiles_but_not_bquics_ack_switch() -> None:
    assert QUINN.refusals(get_profile("quic")) == []
    assert QUINN.refusals(get_profile("aioquic")) == []
    unpaced = get_profile("quic").with_knobs({"pacing": False, "ack_every": 10})
    assert QUINN.refusals(unpaced) == []
    refused = " ".join(QUINN.refusals(get_profile("bquic")))
    assert "ack_decimation_after=100" in refused and "ack_delay_rtt_fraction=0.25" in refused
    assert "pacing" not in refused
    bquic_native = get_profile("bquic").with_knobs({"ack_decimation_after": 0, "ack_delay_rtt_fraction": None})
    assert QUINN.refusals(bquic_native) == []


def test_a_fine_pacer_only_on_quinn() -> None:
    """pacing_burst needs timers finer than asyncio's millisecond steps."""
    fine = get_profile("quic-fine-pacing")
    assert QUINN.refusals(fine) == []
    assert AIOQUIC.refusals(fine) == [
        "pacing_burst=2: aioquic's pacer runs on asyncio's timers, which wake "
        "at millisecond steps; fine pacing needs quinn"
    ]


def test_bbr_only_where_the_stack_has_it() -> None:
    bbr = get_profile("quic").with_knobs({"congestion_control": "bbr", "slow_start_exit_rtt_increase": None})
    assert QUINN.refusals(bbr) == []
    assert AIOQUIC.refusals(bbr) == ["congestion_control=bbr: aioquic has NewReno and CUBIC only"]
    with_exit = get_profile("quic").with_knobs({"congestion_control": "bbr"})
    assert "BBR leaves startup by its own bandwidth rule" in QUINN.refusals(with_exit)[0]


def test_refusal_names_the_knobs_and_the_way_out() -> None:
    with pytest.raises(QuicbedError) as caught:
        QUINN.require_supported(get_profile("bquic"))
    message = str(caught.value)
    assert "quinn cannot run profile 'bquic'" in message and "--knob NAME=VALUE" in message
    with pytest.raises(QuicbedError, match="unknown QUIC implementation 'msquic'.*use one of aioquic, quinn"):
        quic_implementation("msquic")


def _server_options(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "server",
        "--root",
        str(tmp_path),
        "--cert",
        str(tmp_path / "c.pem"),
        "--key",
        str(tmp_path / "k.pem"),
        *extra,
    ]


def test_native_endpoint_refuses_before_starting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert native.main(_server_options(tmp_path, "--profile", "bquic")) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: quinn cannot run profile 'bquic'") and "ack_decimation_after" in error
    assert native.main(["serve"]) == 2
    assert "usage: python -m quicbed.apps.quic.native server|client" in capsys.readouterr().err


def test_missing_native_binary_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(implementations, "native_binary", lambda: None)
    assert native.main(_server_options(tmp_path, "--profile", "quic")) == 2
    error = capsys.readouterr().err
    assert "quicbed-quinn) is not built" in error and "./scripts/install.sh" in error


def test_server_command_carries_the_resolved_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(implementations, "native_binary", lambda: Path("/opt/quicbed-quinn"))
    command = native.server_argv(
        _server_options(
            tmp_path, "--profile", "quic", "--knob", "pacing=false", "--ready-file", str(tmp_path / "ready.json")
        )[1:]
    )
    assert command[:2] == ["/opt/quicbed-quinn", "server"]
    record = json.loads(command[command.index("--profile-record") + 1])
    assert record["profile"] == "quic" and record["knobs"]["pacing"] is False
    assert command[command.index("--ready-file") + 1] == str(tmp_path / "ready.json")


def test_ceilings_are_kept_for_doctor(tmp_path: Path) -> None:
    path = tmp_path / "bench" / "endpoints.json"
    assert measured_ceiling("quinn", path) is None
    save_ceilings({"quinn": {"profile": "quic", "mbit_per_s": 1234.4, "measured": "2026-11-25"}}, path)
    assert measured_ceiling("quinn", path) == (
        "ceiling 1234 Mbit/s on one connection (quic profile, unshaped veth, bench/endpoints.py 2026-11-25)"
    )
    assert measured_ceiling("aioquic", path) is None
    assert not list(path.parent.glob("*.tmp*"))


def test_a_run_needing_the_missing_native_endpoint_stops_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from quicbed.cli.run import _require_endpoints
    from quicbed.spec.experiment import load_experiment

    experiment = load_experiment(str(ROOT / "experiments" / "e1-wifi-bquic.yaml"))
    monkeypatch.setattr(implementations, "native_binary", lambda: None)
    with pytest.raises(QuicbedError) as caught:
        _require_endpoints(experiment)
    message = str(caught.value)
    assert "e1-wifi-bquic.yaml: transport(s) bquic-native, quic-native run the native QUIC endpoint" in message
    assert "./scripts/install.sh" in message
    aioquic_only = load_experiment(
        str(ROOT / "experiments" / "quickstart.yaml"), {"matrix": {"transport": ["quic", "bquic", "tcp"]}}
    )
    _require_endpoints(aioquic_only)  # fine without the native endpoint
