"""Experiment files: what to run (topology, transports, workload), how often, in which order.

An experiment is data (YAML), validated on load with errors that name file, line, field
and fix. ``RunSequence`` gives its runs in order, one at a time (``expand`` lists them);
nothing here starts anything.

    name: e4-random-loss
    topology: {script: topologies/dumbbell.py, params: {rate: 100mbit, delay: 10ms}}
    workload: {object: 8.9MB}
    matrix:
      transport: [quic, bquic, tcp]
      link.bottleneck.loss: [2, 5, 10]
    repetitions: 10
"""

from __future__ import annotations

import array
import itertools
import math
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quicbed.backend_registry import BACKEND_NAMES
from quicbed.clocks import CLOCKS, REAL
from quicbed.errors import SpecError
from quicbed.paths import SHIPPED_ROOT, shipped
from quicbed.spec.contention import (
    OTHERS,
    Background,
    Competitor,
    Stress,
    check_competitors,
    parse_background,
    parse_clients,
    parse_competitor,
    parse_client_device,
    parse_cpu_quota,
    parse_stress,
)
from quicbed.spec.link import SHAPE_FIELDS, parse_shape
from quicbed.spec.overrides import apply_overrides, default_client, params_dropped_with_the_script
from quicbed.spec.study import Study, parse_study
from quicbed.spec.transport import TRANSPORT_OPTIONS, Transport, TransportEntry
from quicbed.spec.units import parse_rate, parse_size, parse_time
from quicbed.spec.values import among as _among, choice as _choice, count as _count, expect_mapping as _expect_mapping
from quicbed.spec.values import suggest as _suggest
from quicbed.spec.walltime import WallTime, parse_wall_time
from quicbed.spec.yamlfile import LocatedData, load_yaml

if TYPE_CHECKING:
    from quicbed.spec.topology import Topology

#: an experiment name's longest: results/NAME-YYYYMMDD-HHMMSS-shardK of N stays far below a
#: file name's 255 bytes
MAX_NAME = 100
TOP_LEVEL = (
    "name",
    "description",
    "topology",
    "backend",
    "backend_options",
    "client",
    "clients",
    "server",
    "transports",
    "workload",
    "matrix",
    "repetitions",
    "warmup",
    "order",
    "seed",
    "timeout",
    "reuse",
    "captures",
    "qlog",
    "background",
    "competitor",
    "stress",
    "validity",
    "isolate_channel",
    "study",
    "wall_time",
    "clock",
)
ORDERS = ("round-robin", "random")
REUSE = ("cell", "run")
#: matrix axes whose values change the network a run is made on
TOPOLOGY_AXES = ("params.", "link.")

#: transports every experiment knows; an experiment's own ``transports`` add to or replace them
#: (``Transport``, in quicbed.spec.transport; each kind reads its own: quicbed.apps.transports)
BUILTIN_TRANSPORTS: dict[str, dict[str, Any]] = {
    "quic": {"kind": "quic", "profile": "quic"},
    "bquic": {"kind": "quic", "profile": "bquic"},
    "aioquic": {"kind": "quic", "profile": "aioquic"},
    # the native stack; BQUIC there asks for one ACK frequency from the first packet, with the
    # delay capped at 25 ms (quinn cannot switch after N packets, nor cap at a fraction of the RTT)
    "quic-native": {"kind": "quic", "impl": "quinn", "profile": "quic"},
    "bquic-native": {
        "kind": "quic",
        "impl": "quinn",
        "profile": "bquic",
        "knobs": {"ack_decimation_after": 0, "ack_delay_rtt_fraction": None},
    },
    "quic-fine-native": {"kind": "quic", "impl": "quinn", "profile": "quic-fine-pacing"},
    "tcp": {"kind": "tcp", "http": "2", "cc": "cubic"},
    "tcp-h1": {"kind": "tcp", "http": "1.1", "cc": "cubic"},
    "tcp-bbr": {"kind": "tcp", "http": "2", "cc": "bbr"},
    "tcp-reno": {"kind": "tcp", "http": "2", "cc": "reno"},
}


CPU_BOUND_POLICIES = ("flag", "exclude")


@dataclass(frozen=True)
class Validity:
    """What makes a run count (docs/metrics.md, "Validity")."""

    #: a run whose endpoint or channel was CPU-bound: "flag" (counted, marked, named in the
    #: report's headline) or "exclude" (the run is invalid)
    cpu_bound: str = "flag"
    #: how many more times an invalid run is made, so that each cell ends with its repetitions
    reruns: int = 2
    #: how many more times a failed run is made (a fault: a process it depends on died, a
    #: download failed); every attempt is kept, as for invalid runs
    retry_failed: int = 0


@dataclass(frozen=True)
class Run:
    """One download to perform. ``cell`` holds the matrix values that define its group."""

    index: int
    cell_index: int
    cell: dict[str, Any]
    repetition: int
    warmup: bool

    @property
    def run_id(self) -> str:
        kind = "w" if self.warmup else "r"
        return f"c{self.cell_index:03d}-{kind}{self.repetition:03d}"

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.cell.items())


@dataclass
class Experiment:
    name: str
    source: Path
    topology_script: Path
    topology_params: dict[str, Any]
    description: str = ""
    backend: str = "netns"
    #: backend name -> that backend's own options (e.g. mininet-wifi: wmediumd), used when the
    #: experiment runs on it; checked by the backend before any run
    backend_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    client: str = "client"
    server: str = "server"
    transports: dict[str, Transport] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=lambda: {"object": 1_000_000})
    matrix: dict[str, list[Any]] = field(default_factory=dict)
    repetitions: int = 1
    warmup: int = 0
    order: str = "round-robin"
    seed: int = 0
    timeout: float = 120.0
    reuse: str = "cell"
    captures: bool = True
    #: captures: full: the client's capture keeps whole packets, and the clients log their TLS
    #: secrets beside it, so that Wireshark decrypts QUIC and TLS (headers only otherwise)
    full_captures: bool = False
    qlog: bool = False
    background: Background | None = None
    competitor: Competitor | None = None
    #: every node that downloads at the same time as ``client`` (its transport and workload):
    #: names, or "stations" for every station of the run's topology; None: ``client`` alone
    clients: tuple[str, ...] | str | None = None
    stress: Stress = field(default_factory=Stress)
    validity: Validity = field(default_factory=Validity)
    #: the comparison the report shows first, the metrics it tabulates (quicbed.spec.study)
    study: Study | None = None
    wall_time: WallTime | None = None  # the file's own measured wall time (quicbed.spec.walltime)
    #: the clock the file's defaults need (virtual: beyond real time here); --clock overrides it
    clock: str = REAL
    #: what the loader decided for the user (a swapped script's params, a default client): said before a run
    notes: list[str] = field(default_factory=list)
    #: the ns-3 channel with all its threads ("process") or its simulator thread alone
    #: ("simulator") on a core of its own, the endpoints on the others; "off": no pinning
    #: (docs/metrics.md, "A core for the channel")
    isolate_channel: str = "process"
    raw: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[dict[str, Any]]:
        """Every combination of the matrix axes, in file order (the first axis varies slowest)."""
        return list(self.iter_cells())

    def iter_cells(self, axes: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """The cells one at a time (or the combinations of ``axes`` only, in the same order)."""
        chosen = set(self.matrix if axes is None else axes)
        keys = [axis for axis in self.matrix if axis in chosen]
        for values in itertools.product(*(self.matrix[key] for key in keys)):
            yield dict(zip(keys, values))

    def cell_count(self) -> int:
        """How many cells the matrix has: counted, never listed."""
        return math.prod(len(values) for values in self.matrix.values())

    def cell_at(self, index: int) -> dict[str, Any]:
        """Cell ``index`` of :meth:`cells`: its axis positions are the digits of ``index`` in
        the mixed radix of the axis lengths (the last axis varies fastest)."""
        positions: dict[str, int] = {}
        for axis in reversed(self.matrix):
            index, positions[axis] = divmod(index, len(self.matrix[axis]))
        return {axis: self.matrix[axis][positions[axis]] for axis in self.matrix}

    def topology_cells(self) -> Iterator[dict[str, Any]]:
        """The combinations of the axes that change the network (``params.*`` and ``link.*``):
        every topology the matrix builds, each once, however many cells share it."""
        return self.iter_cells(axis for axis in self.matrix if axis.startswith(TOPOLOGY_AXES))

    def transports_used(self) -> list[Transport]:
        """The transports the runs download with and compete against (from the axes' values)."""
        names = list(self.matrix.get("transport", [next(iter(self.transports))]))
        if self.competitor is not None:
            for value in self.matrix.get("competitor.transport", [self.competitor.transport]):
                names += [] if value == OTHERS else str(value).split("+")
        return [self.transports[name] for name in dict.fromkeys(names)]

    def transport_of(self, cell: dict[str, Any]) -> Transport:
        return self.transports[cell.get("transport", next(iter(self.transports)))]

    def competitors_of(self, cell: dict[str, Any]) -> list[Transport]:
        """The transports that compete with the run's own, each its own download."""
        if self.competitor is None:
            return []
        value = str(cell.get("competitor.transport", self.competitor.transport))
        if value == OTHERS:
            own = self.transport_of(cell).name
            return [self.transports[name] for name in self.matrix.get("transport", []) if name != own]
        return [self.transports[name] for name in value.split("+")]

    def clients_of(self, topology: Any) -> list[str]:
        """The nodes that download in a run on ``topology``, the measured ``client`` first."""
        if self.clients is None:
            return [self.client]
        names = (
            [n for n, node in topology.nodes.items() if node.kind == "station"]
            if self.clients == "stations"
            else list(self.clients)
        )
        return [self.client, *(name for name in names if name != self.client)]

    def stress_of(self, cell: dict[str, Any]) -> Stress:
        return Stress(
            cell.get("stress.cpu_quota", self.stress.cpu_quota),
            cell.get("stress.load", self.stress.load),
            cell.get("stress.client_device", self.stress.client_device),
        )

    def cpu_subject(self) -> str | None:
        """The field that makes the client's CPU this experiment's subject (a quota or busy
        processes in some cell), or None: virtual time cannot show such a cost."""
        for axis, default in (("stress.cpu_quota", self.stress.cpu_quota), ("stress.load", self.stress.load)):
            values = self.matrix.get(axis, [default])
            if any(value not in (None, 0) for value in values):
                return axis
        return None


def topology_for(experiment: Experiment, cell: dict[str, Any], overrides: dict[str, Any]) -> Topology:
    """The run's topology: the script with the experiment's parameters, the command line's
    overrides and the cell's params/link axes applied."""
    from quicbed.spec.loader import load_topology

    params = {
        **experiment.topology_params,
        **overrides,
        **{axis.partition(".")[2]: value for axis, value in cell.items() if axis.startswith("params.")},
    }
    topo = load_topology(str(experiment.topology_script), params)
    for axis, value in cell.items():
        if axis.startswith("link."):
            _, link, parameter = axis.split(".")
            topo.set_link_shape(link, **{parameter: value})
    return topo


def _script_path(experiment_file: Path, text: str) -> Path:
    """A relative topology script is looked for from the working folder, then beside the
    experiment file, then among quicbed's own (``topologies/dumbbell.py`` from anywhere)."""
    script = Path(text)
    if script.is_absolute() or script.exists():
        return script
    for base in (experiment_file.parent, SHIPPED_ROOT):
        if (base / script).exists():
            return base / script
    return script


def _boolean(doc: LocatedData, value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise doc.error(f"expected true or false, got {value!r}", field)
    return value


#: isolate_channel's values (true is the first)
ISOLATIONS = ("process", "simulator", "off")


def _isolation(doc: LocatedData, value: Any) -> str:
    if value is True or value is False:
        return ISOLATIONS[0] if value else "off"
    if value not in ISOLATIONS:
        raise doc.error(
            f"isolate_channel must be true, false, process, simulator or off, got {value!r}",
            "isolate_channel",
            fix="true (the same as process: every channel thread on a core of its "
            "own), simulator (its simulator thread alone there) or false",
        )
    return value


def _check_client_device(doc: LocatedData, exp: Experiment) -> None:
    """A client device (``stress.client_device``) only with transports whose client can take it."""
    from quicbed.apps.transports import transport_kind

    axis = "stress.client_device" in exp.matrix
    if not any(exp.matrix.get("stress.client_device", [exp.stress.client_device])):
        return
    for name in exp.matrix.get("transport", [next(iter(exp.transports))]):  # the measured client's
        transport = exp.transports[name]
        why = transport_kind(transport.kind).client_device_refusal(transport)
        if why:
            raise doc.error(
                f"stress.client_device cannot apply to transport {transport.name!r}: {why}",
                "matrix.stress.client_device" if axis else "stress.client_device",
                fix="take that transport out of the transport axis, or give it an experiment of its own "
                "without the device (a CPU quota, stress.cpu_quota, applies to every client)",
            )


def _transport(doc: LocatedData, name: str, spec: Any, field: str) -> Transport:
    """A ``transports:`` entry: the options every kind shares are checked here, the rest by
    its kind, found by name (quicbed.apps.transports)."""
    from quicbed.apps.transports import transport_kind

    spec = _expect_mapping(doc, spec, field)
    unknown = set(spec) - set(TRANSPORT_OPTIONS)
    if unknown:
        key = sorted(unknown)[0]
        raise doc.error(
            f"unknown transport option {key!r}", f"{field}.{key}", fix=f"transports take {', '.join(TRANSPORT_OPTIONS)}"
        )
    try:
        kind = transport_kind(spec.get("kind"))
    except SpecError as error:
        raise doc.error(error.message, f"{field}.{error.field}", fix=error.fix) from None
    return kind.parse(TransportEntry(doc, name, field, spec))


def builtin_transports() -> dict[str, Transport]:
    """BUILTIN_TRANSPORTS as the experiment loader reads them (every experiment starts from these)."""
    doc = LocatedData(Path("(built-in transports)"), BUILTIN_TRANSPORTS, {})
    return {name: _transport(doc, name, spec, f"transports.{name}") for name, spec in BUILTIN_TRANSPORTS.items()}


def _check_page(doc: LocatedData, value: Any, field: str) -> None:
    from quicbed.apps.objects import PAGE_SHAPES

    names = [shape.name for shape in PAGE_SHAPES]
    if value not in names:
        raise doc.error(
            f"unknown page {value!r}", field, fix=f"{_suggest(str(value), names)}pages are {', '.join(names)}"
        )


def _workload(doc: LocatedData, value: Any, field: str) -> dict[str, Any]:
    """A workload mapping, checked: an object (its size in bytes) or a page, and parallel."""
    workload = dict(_expect_mapping(doc, value, field))
    unknown = set(workload) - {"object", "page", "parallel"}
    if unknown:
        key = sorted(unknown)[0]
        raise doc.error(
            f"unknown workload option {key!r}",
            f"{field}.{key}",
            fix="a workload is an object (a size) or a page (a name), with parallel streams",
        )
    if ("object" in workload) == ("page" in workload):
        raise doc.error("give either an object size or a page", field, fix="e.g. {object: 10MB} or {page: p8-262k}")
    if "object" in workload:
        workload["object"] = parse_size(workload["object"], f"{field}.object")
    else:
        _check_page(doc, workload["page"], f"{field}.page")
    if "parallel" in workload:
        workload["parallel"] = _count(doc, workload["parallel"], f"{field}.parallel", 1)
    return workload


def _check_axis(
    doc: LocatedData, axis: str, values: Any, exp: Experiment, topology_params: dict[str, Any], link_names: list[str]
) -> list[Any]:
    field = f"matrix.{axis}"
    if not isinstance(axis, str):
        raise doc.error(
            f"unknown matrix axis {axis!r}", field, fix="axes are names, e.g. transport or link.bottleneck.loss"
        )
    if not isinstance(values, list) or not values:
        raise doc.error("a matrix axis needs a non-empty list of values", field, fix=f"write {axis}: [a, b]")
    if axis == "transport":
        for index, value in enumerate(values):
            if not _among(value, exp.transports):
                raise doc.error(
                    f"unknown transport {value!r}",
                    f"{field}[{index}]",
                    fix=f"{_suggest(str(value), list(exp.transports))}define it under 'transports' "
                    f"or use one of {', '.join(exp.transports)} ('quicbed transports' says "
                    "what each is)",
                )
    elif axis == "workload":
        for index, value in enumerate(values):
            _workload(doc, value, f"{field}[{index}]")
    elif axis in ("workload.object",):
        for index, value in enumerate(values):
            parse_size(value, f"{field}[{index}]")
    elif axis == "workload.page":
        for index, value in enumerate(values):
            _check_page(doc, value, f"{field}[{index}]")
    elif axis.startswith("params."):
        name = axis.partition(".")[2]
        if name not in topology_params:
            raise doc.error(
                f"the topology has no parameter {name!r}",
                field,
                fix=f"{_suggest(name, list(topology_params))}parameters are {', '.join(topology_params) or 'none'}",
            )
    elif axis.startswith("link."):
        parts = axis.split(".")
        if len(parts) != 3 or parts[1] not in link_names:
            raise doc.error(
                f"cannot read link axis {axis!r}",
                field,
                fix=f"write link.LINK.PARAMETER with LINK among {', '.join(link_names)}",
            )
        if parts[2] not in SHAPE_FIELDS:
            raise doc.error(
                f"unknown link parameter {parts[2]!r}",
                field,
                fix=f"{_suggest(parts[2], SHAPE_FIELDS)}wired links take {', '.join(SHAPE_FIELDS)}",
            )
        for index, value in enumerate(values):
            parse_shape({parts[2]: value}, f"{field}[{index}]")
    elif axis == "background.rate":
        if exp.background is None:
            raise doc.error("a background.rate axis needs a 'background' section", field)
        for index, value in enumerate(values):
            if value not in (0, "0", None):
                parse_rate(value, f"{field}[{index}]")
    elif axis == "client":
        pass  # node names are checked against the topology below
    elif axis == "competitor.transport":
        if exp.competitor is None:
            raise doc.error(
                "a competitor.transport axis needs a 'competitor' section",
                field,
                fix="add competitor: {client: client}",
            )
        for index, value in enumerate(values):
            check_competitors(doc, value, f"{field}[{index}]", exp.transports)
    elif axis == "stress.cpu_quota":
        for index, value in enumerate(values):
            parse_cpu_quota(doc, value, f"{field}[{index}]")
    elif axis == "stress.load":
        for index, value in enumerate(values):
            _count(doc, value, f"{field}[{index}]", 0)
    elif axis == "stress.client_device":
        for index, value in enumerate(values):
            parse_client_device(doc, value, f"{field}[{index}]")
    else:
        raise doc.error(
            f"unknown matrix axis {axis!r}",
            field,
            fix="axes are transport, workload, workload.object, workload.page, params.NAME, "
            "link.LINK.PARAMETER, background.rate, client, competitor.transport, "
            "stress.cpu_quota, stress.load, stress.client_device",
        )
    return values


def load_experiment(path: Path | str, overrides: dict[str, Any] | None = None) -> Experiment:
    """Read and validate an experiment file. ``overrides`` replace fields, by top-level name
    or dotted path (e.g. {"repetitions": 2, "workload.object": "1MB"} from the command line)."""
    path = Path(path)
    if not path.exists() and not path.is_absolute():
        path = shipped(path) or path  # experiments/quickstart.yaml from any folder
    doc = load_yaml(path)
    try:
        return _build(doc, overrides or {})
    except SpecError as error:
        if error.source:
            raise
        # errors from the value parsers know their field but not the file: add file and line
        raise SpecError(error.message, field=error.field, fix=error.fix, source=doc.where(error.field)) from None


def _build(doc: LocatedData, overrides: dict[str, Any]) -> Experiment:
    from quicbed.spec.loader import load_topology, parameters

    path = doc.path
    data = doc.data
    if not isinstance(data, dict):
        raise SpecError("expected a mapping at the top level", source=str(path), fix="see experiments/quickstart.yaml")
    data = apply_overrides(data, overrides)
    swapped = params_dropped_with_the_script(data, doc.data, overrides, lambda text: _script_path(doc.path, text))
    for key in data:
        if key not in TOP_LEVEL:
            raise doc.error(
                f"unknown field {key!r}", str(key), fix=f"{_suggest(key, TOP_LEVEL)}fields are {', '.join(TOP_LEVEL)}"
            )
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name):
        raise doc.error(f"name must be lower-case letters, digits, '-', '_' or '.', got {name!r}", "name")
    if len(name) > MAX_NAME:
        raise doc.error(
            f"name is {len(name)} characters long, more than {MAX_NAME}",
            "name",
            fix="shorten it: it names the results folder (NAME-DATE-TIME) and its shards",
        )
    topology = _expect_mapping(doc, data.get("topology"), "topology")
    if "script" not in topology:
        raise doc.error(
            "missing topology script", "topology", fix="write topology: {script: topologies/dumbbell.py, params: {...}}"
        )
    script = _script_path(doc.path, str(topology["script"]))
    params = _expect_mapping(doc, topology.get("params"), "topology.params")
    try:
        defaults = parameters(str(script))
        topo = load_topology(str(script), params)
    except SpecError as error:
        raise SpecError(
            error.message,
            field=error.field or "topology.script",
            fix=error.fix,
            source=f"{doc.where('topology.params' if params else 'topology.script')} -> {error.source or script}",
        ) from None

    exp = Experiment(
        name=name,
        source=doc.path,
        topology_script=script,
        topology_params=dict(params),
        description=str(data.get("description") or "").strip(),
        raw=data,
    )
    exp.backend = _choice(doc, data.get("backend", "netns"), "backend", BACKEND_NAMES)
    for backend, options in _expect_mapping(doc, data.get("backend_options"), "backend_options").items():
        _choice(doc, backend, "backend_options", BACKEND_NAMES)
        exp.backend_options[backend] = dict(_expect_mapping(doc, options, f"backend_options.{backend}"))
    exp.notes = [swapped] if swapped else []
    for role in ("client", "server"):
        node = data.get(role, role)
        fallback = default_client(topo) if role == "client" and role not in data and node not in topo.nodes else None
        if fallback:  # a topology of its own, e.g. a copy of wifi_ap.py
            node = fallback
            exp.notes.append(f"client: {node} (the topology has no node 'client'; set client: to choose)")
        if not _among(node, topo.nodes) or not topo.nodes[node].routed:
            raise doc.error(
                f"{role} node {node!r} is not a host, station or mesh point of the topology",
                role,
                fix=f"choose among {', '.join(n for n, v in topo.nodes.items() if v.routed)}",
            )
        setattr(exp, role, node)
    transports = builtin_transports()
    for name, spec in _expect_mapping(doc, data.get("transports"), "transports").items():
        transports[name] = _transport(doc, name, spec, f"transports.{name}")
    exp.transports = transports

    workload = _workload(doc, _expect_mapping(doc, data.get("workload"), "workload") or {"object": "1MB"}, "workload")
    workload.setdefault("parallel", 6)
    exp.workload = workload

    exp.background = parse_background(doc, data.get("background"), exp.server, exp.client, topo)
    exp.competitor = parse_competitor(doc, data.get("competitor"), data.get("matrix"), exp.transports, exp.client, topo)
    exp.clients = parse_clients(doc, data.get("clients"), exp.client, exp.competitor, topo)
    exp.stress = parse_stress(doc, data.get("stress"))

    matrix = _expect_mapping(doc, data.get("matrix"), "matrix")
    exp.matrix = {
        axis: _check_axis(doc, axis, values, exp, defaults, [each.name for each in topo.links])
        for axis, values in matrix.items()
    }
    for index, node in enumerate(exp.matrix.get("client", [])):
        if not _among(node, topo.nodes):
            raise doc.error(
                f"unknown node {node!r}", f"matrix.client[{index}]", fix=f"nodes are {', '.join(topo.nodes)}"
            )
    _check_client_device(doc, exp)
    exp.repetitions = _count(doc, data.get("repetitions", 1), "repetitions", 1)
    exp.warmup = _count(doc, data.get("warmup", 0), "warmup", 0)
    exp.order = _choice(doc, data.get("order", "round-robin"), "order", ORDERS)
    exp.clock = _choice(doc, data.get("clock", REAL), "clock", CLOCKS)
    exp.seed = _count(doc, data.get("seed", 1), "seed", 0)
    exp.timeout = parse_time(data.get("timeout", "120s"), "timeout", allow_zero=False)
    exp.reuse = _choice(doc, data.get("reuse", "cell"), "reuse", REUSE)
    captures = data.get("captures", True)
    if captures == "full":
        exp.captures = exp.full_captures = True
    elif isinstance(captures, bool):
        exp.captures = captures
    else:
        raise doc.error(
            f"captures must be true, false or full, got {captures!r}",
            "captures",
            fix="full keeps whole packets at the client and the TLS secrets to decrypt them",
        )
    exp.qlog = _boolean(doc, data.get("qlog", False), "qlog")
    exp.isolate_channel = _isolation(doc, data.get("isolate_channel", True))
    validity = _expect_mapping(doc, data.get("validity"), "validity")
    unknown = set(validity) - {"cpu_bound", "reruns", "retry_failed"}
    if unknown:
        key = sorted(unknown)[0]
        raise doc.error(
            f"unknown validity option {key!r}",
            f"validity.{key}",
            fix="validity takes cpu_bound (flag or exclude), reruns and retry_failed (counts)",
        )
    if (
        exp.competitor is not None
        and len(exp.matrix.get("transport", [])) < 2
        and OTHERS in exp.matrix.get("competitor.transport", [exp.competitor.transport])
    ):
        raise doc.error(
            f"competitor.transport {OTHERS!r} means every other transport of the transport axis, and there is none",
            "competitor.transport",
            fix="add a transport axis of two or more transports",
        )
    names = list(exp.transports)  # a --set may narrow the matrix: compare any defined transport
    rivals = names + [value for value in exp.matrix.get("competitor.transport", []) if value not in names]
    exp.study = parse_study(data.get("study"), exp.matrix, {"transport": names, "competitor.transport": rivals})
    try:
        exp.wall_time = parse_wall_time(data.get("wall_time"))
    except SpecError as error:
        raise doc.error(error.message, error.field, fix=error.fix) from None
    exp.validity = Validity(
        _choice(doc, validity.get("cpu_bound", "flag"), "validity.cpu_bound", CPU_BOUND_POLICIES),
        _count(doc, validity.get("reruns", 2), "validity.reruns", 0),
        _count(doc, validity.get("retry_failed", 0), "validity.retry_failed", 0),
    )
    return exp


def expand(exp: Experiment) -> list[Run]:
    """The runs in execution order, as a list (:class:`RunSequence` computes them one at a time)."""
    return list(RunSequence(exp))


class RunSequence:
    """The runs in execution order: warm-up runs of each cell first, then the measured runs,
    round-robin over the cells per repetition or shuffled with the experiment's seed.

    Nothing is listed: the size is arithmetic and run ``i`` is computed from ``i``. Only the
    random order needs a table, the seeded permutation of the measured runs, made the first
    time a run is looked up (never to count them).
    """

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.cells = experiment.cell_count()
        self.warmups = experiment.warmup * self.cells
        self.measured = experiment.repetitions * self.cells
        self._shuffled: array.array | None = None

    def __len__(self) -> int:
        return self.warmups + self.measured

    def __iter__(self) -> Iterator[Run]:
        return (self[index] for index in range(len(self)))

    def __getitem__(self, index: int) -> Run:
        if not 0 <= index < len(self):
            raise IndexError(f"run {index} of {len(self)}")
        warmup = index < self.warmups
        position = index if warmup else self._measured_position(index - self.warmups)
        repetition, cell_index = divmod(position, self.cells)
        return Run(index, cell_index, self.experiment.cell_at(cell_index), repetition + 1, warmup)

    def _measured_position(self, rank: int) -> int:
        """Where the ``rank``-th measured run stands in round-robin order (repetition-major)."""
        if self.experiment.order != "random":
            return rank
        if self._shuffled is None:
            # random.shuffle's swaps depend only on the length and the seed: shuffling the
            # positions gives the order that shuffling the runs themselves gave
            self._shuffled = array.array("q", range(self.measured))
            random.Random(self.experiment.seed).shuffle(self._shuffled)
        return self._shuffled[rank]
