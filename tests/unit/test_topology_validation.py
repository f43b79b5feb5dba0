"""`quicbed topo validate` accepts every shipped topology and rejects broken ones precisely."""

from __future__ import annotations

from pathlib import Path

import pytest

from quicbed.cli import main
from quicbed.errors import SpecError
from quicbed.spec.loader import convert, load_topology

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "fixtures" / "broken_topologies"

# file -> fragments the message must contain: place (file:line or field), problem, fix
EXPECTED = {
    "unknown_node.py": ["unknown_node.py:7", "unknown node 'sever'", "known: client"],
    "excessive_loss.py": ["excessive_loss.py:7", "links[a-b].loss", "within 0..100"],
    "negative_delay.py": ["negative_delay.py:7", "links[a-b].delay", "must not be negative"],
    "unknown_unit.py": ["unknown_unit.py:7", "links[a-b].rate", "kbit, mbit, gbit"],
    "ambiguous_rate.py": ["links[a-b].rate", "ambiguous", "'20mbit'"],
    "duplicate_address.py": ["duplicate_address.py", "10.9.0.1 is used by a and b", "its own address"],
    "duplicate_node.py": ["duplicate_node.py:7", "node 'a' is defined twice"],
    # the line that added the link (checks after the script name it too), and a way out that is not a circle
    "station_on_cable.py": [
        "station_on_cable.py:7: links[sta1-server]",
        "stations connect through an access point",
        "link sta1 to an access point with add_wireless_link() (there is none yet: add one with add_access_point())",
    ],
    "station_to_host_by_air.py": [
        "station_to_host_by_air.py:8: links[sta1-server]",
        "not a station and a host",
        "link sta1 to an access point (known: ap1)",
    ],
    "mininet_gigabit.py": ["mininet_gigabit.py:7", "a rate of 1000 is 1000 bit/s", "'1000mbit'"],
    "disconnected.py": ["disconnected.py:7", "nodes[lonely]", "cannot reach a", "link every node"],
    "bad_channel.py": ["bad_channel.py:6", "nodes[ap1].channel", "channel 36 is not a 2.4GHz channel"],
    "no_return.py": ["no_return.py", "returned NoneType, not a Topology", "return topo"],
    "impossible_ge_mean.py": ["links[a-b].loss.mean", "cannot be reached", "between 0.495 %"],
    "unknown_parameter.py": ["unknown_parameter.py:7", "unknown link parameter 'bandwidth'", "rate, delay"],
}


def test_every_broken_fixture_has_an_expectation():
    assert sorted(p.name for p in BROKEN.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_topology_is_rejected_with_place_problem_and_fix(name):
    with pytest.raises(SpecError) as caught:
        load_topology(str(BROKEN / name))
    message = str(caught.value)
    for fragment in EXPECTED[name]:
        assert fragment in message, f"{fragment!r} missing from: {message}"


def test_cli_validate_accepts_every_shipped_topology(capsys):
    files = sorted(str(p) for p in (ROOT / "topologies").glob("*.py"))
    assert len(files) >= 4
    assert main(["topo", "validate", *files]) == 0
    out = capsys.readouterr().out
    assert out.count("ok") == len(files)


def test_cli_validate_reports_each_broken_file_and_fails(capsys):
    files = [str(BROKEN / name) for name in sorted(EXPECTED)]
    assert main(["topo", "validate", *files]) == 1
    out = capsys.readouterr().out
    assert out.count("invalid") == len(files)
    assert "unknown node 'sever'" in out


def test_missing_file_and_unknown_script_parameter_are_explained():
    with pytest.raises(SpecError, match="topology file not found"):
        load_topology("topologies/nope.py")
    with pytest.raises(SpecError) as caught:
        load_topology(str(ROOT / "topologies" / "chain.py"), {"hopz": "3"})
    assert "unknown parameter 'hopz'" in str(caught.value)
    assert "hops=3" in str(caught.value)


def test_parameters_are_converted_to_the_type_of_their_default():
    topo = load_topology(str(ROOT / "topologies" / "chain.py"), {"hops": "2"})
    assert [n for n in topo.nodes] == ["client", "r1", "r2", "server"]
    with pytest.raises(SpecError, match=r"params.hops: expected a number, got 'many'"):
        load_topology(str(ROOT / "topologies" / "chain.py"), {"hops": "many"})
    # a percentage as README writes it: numeric loss parameters are in percent
    dumbbell = load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"loss": "2%"})
    assert dumbbell.links[0].forward.loss.probability == pytest.approx(0.02)
    assert convert(" 0.5 % ", 0.0) == 0.5 and convert("3", 0.0) == 3.0 and convert("1.5", 1) == 1.5
    with pytest.raises(ValueError, match="expected a number, got '2%'"):
        convert("2%", 1000)  # a percent sign only where the default is a float


def test_a_bad_parameter_value_is_named_as_the_parameter_it_came_from():
    """-p rate=50 fails at the script's line that uses it; the message says the value was a
    parameter given to the script, not something the script wrote."""
    with pytest.raises(
        SpecError,
        match=r"dumbbell.py:\d+: links\[bottleneck\].rate: the parameter rate='50' given to "
        r"the script: cannot read rate '50'",
    ):
        load_topology(str(ROOT / "topologies" / "dumbbell.py"), {"rate": "50"})


def test_a_band_is_read_whatever_its_case():
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"band": "5ghz", "channel": 36})
    assert {link.radio.band for link in topo.links if hasattr(link, "radio")} == {"5GHz"}
    topo = load_topology(str(ROOT / "topologies" / "wifi_ap.py"), {"band": "2.4 ghz", "channel": 6})
    assert {link.radio.band for link in topo.links if hasattr(link, "radio")} == {"2.4GHz"}
