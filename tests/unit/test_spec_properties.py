"""Properties of the spec layer: whatever a user writes, the unit parsers, the topology API and
the experiment loader end in a value or a SpecError, never another exception.

Hypothesis draws the inputs; the examples are bounded and derived from the test's name
(derandomize), so a run takes seconds and CI never sees an input this run did not.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quicbed.errors import SpecError
from quicbed.spec.experiment import TOP_LEVEL, Experiment, load_experiment
from quicbed.spec.link import RADIO_FIELDS, SHAPE_FIELDS
from quicbed.spec.loader import load_topology
from quicbed.spec.topology import Topology
from quicbed.spec.units import parse_percent, parse_rate, parse_size, parse_time

ROOT = Path(__file__).resolve().parents[2]
DUMBBELL = ROOT / "topologies" / "dumbbell.py"

BOUNDED = settings(
    max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# --------------------------------------------------------------------------- values users write

UNIT_WORDS = [
    "",
    "bit",
    "kbit",
    "mbit",
    "gbit",
    "mbps",
    "kbps",
    "b/s",
    "s",
    "ms",
    "us",
    "µs",
    "ns",
    "min",
    "sec",
    "b",
    "kb",
    "mb",
    "gb",
    "kib",
    "mib",
    "gib",
    "k",
    "m",
    "g",
    "%",
    "MB",
    "Mbit/s",
    "x",
]
numbers = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True, allow_infinity=True))
number_texts = st.one_of(
    st.builds(
        lambda n, space, unit: f"{n}{space}{unit}",
        numbers,
        st.sampled_from(["", " ", "  "]),
        st.sampled_from(UNIT_WORDS),
    ),
    st.from_regex(r"[-+]?[0-9]{0,4}\.?[0-9]{0,3}([eE][-+]?[0-9]{1,4})?\s?[a-zA-Zµ/%]{0,6}", fullmatch=True),
    st.text(max_size=20),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, number_texts)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def value_or_spec_error(parse: Any, *arguments: Any) -> Any:
    try:
        return parse(*arguments)
    except SpecError:
        return None


@BOUNDED
@given(values)
@example(float("nan")).via("not a number")
@example(float("inf")).via("infinite")
@example(10**400).via("beyond a float")
@example("1e400mbit").via("overflows to infinity")
@example("1e400s").via("overflows to infinity")
@example("1e400").via("overflows to infinity")
@pytest.mark.parametrize("parse", [parse_rate, parse_time, parse_size, parse_percent])
def test_a_unit_parser_returns_a_finite_value_or_refuses(parse: Any, value: Any) -> None:
    result = value_or_spec_error(parse, value)
    if result is not None:
        assert isinstance(result, (int, float)) and not isinstance(result, bool) and math.isfinite(result)
        assert result >= 0


# --------------------------------------------------------------------------- the topology API

link_parameters = st.dictionaries(st.one_of(st.sampled_from(SHAPE_FIELDS), st.text(max_size=6)), values, max_size=4)
radio_parameters = st.dictionaries(st.one_of(st.sampled_from(RADIO_FIELDS), st.text(max_size=6)), values, max_size=3)
names = st.one_of(st.sampled_from(["client", "server", "s1", "ap", "sta1"]), st.text(max_size=18), st.integers())


def _build(
    node_names: list[Any],
    wired: dict[str, Any],
    radio: dict[str, Any],
    position: Any,
    route: tuple[Any, Any],
    pool: Any,
) -> Topology:
    topo = Topology("t", subnet_pool=pool)
    for name in node_names:
        topo.add_host(name)
    client, server = topo.add_host("client"), topo.add_host("server")
    topo.add_link(client, server, name="bottleneck", **wired)
    ap = topo.add_access_point("ap", **radio)
    station = topo.add_station("sta1", position=position)
    topo.add_wireless_link(station, ap, **radio)
    topo.add_link(ap, server)
    topo.add_route(client, *route)
    topo.resolve()
    return topo


@BOUNDED
@given(
    st.lists(names, max_size=3),
    link_parameters,
    radio_parameters,
    values,
    st.tuples(values, values),
    st.one_of(st.just("10.0.0.0/16"), values),
)
def test_any_topology_resolves_or_is_refused(
    node_names: list[Any],
    wired: dict[str, Any],
    radio: dict[str, Any],
    position: Any,
    route: tuple[Any, Any],
    pool: Any,
) -> None:
    topology = value_or_spec_error(_build, node_names, wired, radio, position, route, pool)
    assert topology is None or isinstance(topology, Topology)


SCRIPT = """from quicbed import Topology


def topology(rate="20mbit", hops=2, loss=0.0, lossy=False):
    topo = Topology("params")
    previous = topo.add_host("client")
    for number in range(min(hops, 4)):
        node = topo.add_switch(f"s{number}")
        topo.add_link(previous, node, rate=rate, loss=loss if lossy else 0)
        previous = node
    topo.add_link(previous, topo.add_host("server"))
    return topo
"""


@BOUNDED
@given(
    st.dictionaries(
        st.sampled_from(["rate", "hops", "loss", "lossy", "other"]), st.one_of(values, number_texts), max_size=4
    )
)
def test_any_parameters_build_a_topology_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, params: dict[str, Any]
) -> None:
    script = tmp_path_factory.getbasetemp() / "params_topology.py"
    if not script.exists():
        script.write_text(SCRIPT)
    topology = value_or_spec_error(load_topology, str(script), params)
    assert topology is None or isinstance(topology, Topology)


# --------------------------------------------------------------------------- experiment files

GOOD = {
    "name": "demo",
    "topology": {"script": str(DUMBBELL), "params": {"rate": "10mbit"}},
    "workload": {"object": "1MB"},
    "matrix": {"transport": ["quic", "tcp"]},
    "repetitions": 2,
}
FIELDS = [
    *TOP_LEVEL,
    "topology.params.rate",
    "topology.params.delay",
    "workload.object",
    "workload.page",
    "workload.parallel",
    "matrix.link.bottleneck.loss",
    "matrix.params.delay",
    "matrix.workload.object",
    "matrix.stress.load",
    "transports.mine",
    "transports.mine.kind",
    "transports.mine.knobs",
    "validity.reruns",
    "competitor.transport",
    "background.rate",
    "stress.cpu_quota",
    "clients",
]


def _with(document: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    top, _, rest = dotted.partition(".")
    if not rest:
        return {**document, top: value}
    inner = document.get(top)
    inner = dict(inner) if isinstance(inner, dict) else {}
    if top == "matrix":
        return {**document, top: {**inner, rest: value}}
    return {**document, top: _with(inner, rest, value)}


documents = st.builds(
    lambda changes: _changed(changes),
    st.lists(st.tuples(st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)), values), min_size=1, max_size=3),
)


def _changed(changes: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = dict(GOOD)
    for dotted, value in changes:
        document = _with(document, dotted, value)
    return document


def _load(folder: Path, text: str | bytes) -> Experiment:
    path = folder / "experiment.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return load_experiment(path)


@BOUNDED
@given(documents)
def test_any_experiment_document_loads_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, document: dict[str, Any]
) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    experiment = value_or_spec_error(_load, tmp_path_factory.getbasetemp(), text)
    assert experiment is None or isinstance(experiment, Experiment)


@BOUNDED
@given(
    st.one_of(
        st.text(max_size=80),
        st.binary(max_size=80),
        st.builds(
            lambda head, tail: head + tail,
            st.sampled_from(["name: demo\n", "matrix:\n  ", "- ", "{", "topology: {script: "]),
            st.text(max_size=40),
        ),
    )
)
def test_any_file_contents_load_or_are_refused(tmp_path_factory: pytest.TempPathFactory, text: str | bytes) -> None:
    experiment = value_or_spec_error(_load, tmp_path_factory.getbasetemp(), text)
    assert experiment is None or isinstance(experiment, Experiment)
