"""Transport profiles: built-in values, user files, validation messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aioquic.quic import recovery
from aioquic.quic.configuration import QuicConfiguration

from quicbed.apps.quic import profiles
from quicbed.apps.quic.profiles import (
    KNOB_NAMES,
    TransportProfile,
    get_profile,
    load_profiles,
    parse_knob_assignments,
)
from quicbed.errors import SpecError


def test_builtin_profiles() -> None:
    loaded = load_profiles()
    assert list(loaded) == ["aioquic", "quic", "bquic", "quic-fine-pacing"]
    assert get_profile("quic").knobs() == {
        "congestion_control": "cubic",
        "ack_every": 2,
        "ack_decimation_after": 0,
        "max_ack_delay": 0.025,
        "ack_delay_rtt_fraction": None,
        "immediate_ack_on_gap": True,
        "pacing": True,
        "slow_start_exit_rtt_increase": 0.125,
        "loss_time_threshold": 1.125,
        "loss_packet_threshold": 3,
        "initial_window": None,
        "mtu_discovery": None,
        "pacing_burst": None,
    }
    assert get_profile("bquic").knobs() == {
        "congestion_control": "cubic",
        "ack_every": 10,
        "ack_decimation_after": 100,
        "max_ack_delay": 0.025,
        "ack_delay_rtt_fraction": 0.25,
        "immediate_ack_on_gap": True,
        "pacing": False,
        "slow_start_exit_rtt_increase": 0.5,
        "loss_time_threshold": 1.25,
        "loss_packet_threshold": 3,
        "initial_window": None,
        "mtu_discovery": None,
        "pacing_burst": None,
    }
    # the reference QUIC with a fine pacer: only the burst differs
    assert get_profile("quic-fine-pacing").knobs() == {**get_profile("quic").knobs(), "pacing_burst": 2}


def test_aioquic_profile_is_aioquic_as_shipped() -> None:
    knobs = get_profile("aioquic").knobs()
    assert knobs["congestion_control"] == QuicConfiguration().congestion_control_algorithm
    assert knobs["loss_time_threshold"] == recovery.K_TIME_THRESHOLD
    assert knobs["loss_packet_threshold"] == recovery.K_PACKET_THRESHOLD
    assert knobs["ack_every"] is None and knobs["max_ack_delay"] is None
    assert knobs["pacing"] is True and knobs["slow_start_exit_rtt_increase"] is None
    assert get_profile("aioquic").native_acks


def test_record_is_flat_and_json_serialisable() -> None:
    record = get_profile("bquic").record()
    assert record["profile"] == "bquic"
    assert list(record["knobs"]) == list(KNOB_NAMES)
    assert json.loads(json.dumps(record)) == record


def test_each_knob_switches_alone() -> None:
    base = get_profile("bquic")
    for key, value in [
        ("pacing", True),
        ("ack_every", 2),
        ("ack_decimation_after", 0),
        ("ack_delay_rtt_fraction", None),
        ("immediate_ack_on_gap", False),
        ("slow_start_exit_rtt_increase", "1/8"),
        ("loss_time_threshold", "9/8"),
        ("loss_packet_threshold", 5),
        ("congestion_control", "reno"),
        ("max_ack_delay", "40ms"),
    ]:
        changed = base.with_knobs({key: value})
        differing = {k for k in KNOB_NAMES if changed.knobs()[k] != base.knobs()[k]}
        assert differing == {key}, key


def test_user_file_extends_builtin(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "version: 1\nprofiles:\n"
        "  bquic-paced:\n    extends: bquic\n    description: paced\n    pacing: on\n"
        "  bquic-paced-reno:\n    extends: bquic-paced\n    congestion_control: reno\n"
    )
    loaded = load_profiles([path])
    assert loaded["bquic-paced"].pacing is True
    assert loaded["bquic-paced"].ack_every == 10
    assert loaded["bquic-paced"].source == str(path)
    assert loaded["bquic-paced-reno"].knobs() == {**loaded["bquic-paced"].knobs(), "congestion_control": "reno"}
    assert get_profile("bquic-paced", [path]).description == "paced"


def test_switching_the_ack_scheduler_off_drops_its_knobs(tmp_path: Path) -> None:
    assert get_profile("bquic", overrides={"ack_every": None}).knobs()["max_ack_delay"] is None
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nprofiles:\n  nat:\n    extends: bquic\n    ack_every: null\n")
    knobs = load_profiles([path])["nat"].knobs()
    assert knobs["ack_decimation_after"] == 0 and knobs["ack_delay_rtt_fraction"] is None
    assert knobs["pacing"] is False  # other knobs are inherited


@pytest.mark.parametrize(
    "body, field, words",
    [
        ("  x:\n    pacing: maybe\n", "profiles.x.pacing", "true or false"),
        ("  x:\n    pacin: false\n", "profiles.x.pacin", "unknown knob"),
        ("  x:\n    ack_every: 0\n", "profiles.x.ack_every", ">= 1"),
        ("  x:\n    loss_time_threshold: 7/8\n", "profiles.x.loss_time_threshold", ">= 1"),
        ("  x:\n    max_ack_delay: 25\n", "profiles.x.max_ack_delay", "no unit"),
        ("  x:\n    max_ack_delay: 20s\n", "profiles.x.max_ack_delay", "too large"),
        ("  x:\n    congestion_control: vegas\n", "profiles.x.congestion_control", "reno, cubic, bbr"),
        ("  x:\n    ack_delay_rtt_fraction: 1/4\n", "profiles.x.ack_delay_rtt_fraction", "ACK scheduler"),
        ("  x:\n    extends: nope\n", "profiles.x.extends", "unknown profile"),
        ("  x:\n    extends: y\n  y:\n    extends: x\n", "profiles.", "cycle"),
        ("  quic:\n    pacing: false\n", "profiles.quic", "already defined"),
        ("  'bad name':\n    pacing: false\n", "profiles.bad name", "invalid profile name"),
        ("  x: [1]\n", "profiles.x", "mapping"),
    ],
)
def test_validation_names_file_and_field(tmp_path: Path, body: str, field: str, words: str) -> None:
    path = tmp_path / "user.yaml"
    path.write_text("version: 1\nprofiles:\n" + body)
    with pytest.raises(SpecError) as error:
        load_profiles([path])
    assert error.value.source == str(path)
    assert error.value.field.startswith(field)
    assert words in str(error.value)


def test_file_level_errors(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("version: 1\nprofiles:\n  x: {pacing: [\n")
    with pytest.raises(SpecError, match=r"broken.yaml:\d+: not valid YAML"):
        load_profiles([path])
    path.write_text("profiles:\n  x: {}\n")
    with pytest.raises(SpecError, match="unsupported version"):
        load_profiles([path])
    with pytest.raises(SpecError, match="cannot read profiles file"):
        load_profiles([tmp_path / "missing.yaml"])
    with pytest.raises(SpecError, match="unknown transport profile 'nope'") as error:
        get_profile("nope")
    assert "aioquic, quic, bquic" in str(error.value)


def test_knob_assignments() -> None:
    overrides = parse_knob_assignments(
        [
            "pacing=false",
            "ack_every=4",
            "max_ack_delay=10ms",
            "slow_start_exit_rtt_increase=1/4",
            "ack_delay_rtt_fraction=null",
        ]
    )
    assert overrides == {
        "pacing": False,
        "ack_every": 4,
        "max_ack_delay": "10ms",
        "slow_start_exit_rtt_increase": "1/4",
        "ack_delay_rtt_fraction": None,
    }
    profile = get_profile("bquic", overrides=overrides)
    assert (profile.pacing, profile.ack_every, profile.max_ack_delay) == (False, 4, 0.010)
    assert profile.slow_start_exit_rtt_increase == 0.25
    with pytest.raises(SpecError, match="KNOB=VALUE"):
        parse_knob_assignments(["pacing"])
    with pytest.raises(SpecError) as error:
        get_profile("quic", overrides={"ack_every": "ten"})
    assert error.value.source == "--knob" and error.value.field == "ack_every"


def test_ack_delay_rule() -> None:
    bquic = get_profile("bquic")
    assert bquic.ack_delay(0.020) == pytest.approx(0.005)
    assert bquic.ack_delay(0.400) == pytest.approx(0.025)
    assert bquic.ack_delay(None) == pytest.approx(0.025)
    assert bquic.ack_delay(float("inf")) == pytest.approx(0.025)
    assert get_profile("quic").ack_delay(0.020) == pytest.approx(0.025)


def test_describe_knobs_lists_every_knob() -> None:
    text = profiles.describe_knobs()
    for name in KNOB_NAMES:
        assert name in text
    assert TransportProfile(name="x").knobs()["loss_time_threshold"] == 9 / 8


def test_cli_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles.main(["--show", "bquic", "--knob", "pacing=true"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["profile"] == "bquic" and shown["knobs"]["pacing"] is True
    assert profiles.main(["--show", "nope"]) == 2
