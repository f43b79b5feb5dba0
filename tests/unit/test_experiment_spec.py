"""Experiment files: validation errors name file, line, field and fix; matrix expansion."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from quicbed.errors import SpecError
from quicbed.spec.experiment import expand, load_experiment

ROOT = Path(__file__).resolve().parents[2]
DUMBBELL = ROOT / "topologies" / "dumbbell.py"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text.replace("DUMBBELL", str(DUMBBELL)))
    return path


GOOD = dedent("""\
    name: demo
    topology:
      script: DUMBBELL
      params: {rate: 10mbit}
    workload: {object: 2MB}
    matrix:
      transport: [quic, bquic, tcp]
      link.bottleneck.loss: [0, 2]
    repetitions: 3
    warmup: 1
""")


def test_every_shipped_experiment_file_loads():
    files = sorted((ROOT / "experiments").glob("*.yaml"))
    assert files
    for path in files:
        assert load_experiment(path).name == path.stem


def test_a_relative_topology_script_is_found_beside_the_file_or_among_quicbeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # neither topologies/ nor topology.py is in the working folder
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "topology.py").write_text(DUMBBELL.read_text())
    shipped = load_experiment(write(folder, GOOD.replace("DUMBBELL", "topologies/dumbbell.py")))
    assert shipped.topology_script == ROOT / "topologies" / "dumbbell.py"
    own = load_experiment(write(folder, GOOD.replace("DUMBBELL", "topology.py")))
    assert own.topology_script == folder / "topology.py"
    with pytest.raises(SpecError, match="topology.script"):
        load_experiment(write(folder, GOOD.replace("DUMBBELL", "nowhere.py")))


def test_expansion_is_round_robin_over_cells_after_warmups(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD))
    runs = expand(exp)
    assert len(runs) == 6 * 1 + 6 * 3
    assert [r.run_id for r in runs[:7]] == [
        "c000-w001",
        "c001-w001",
        "c002-w001",
        "c003-w001",
        "c004-w001",
        "c005-w001",
        "c000-r001",
    ]
    assert runs[6].cell == {"transport": "quic", "link.bottleneck.loss": 0}
    assert runs[7].cell == {"transport": "quic", "link.bottleneck.loss": 2}
    assert runs[8].cell == {"transport": "bquic", "link.bottleneck.loss": 0}
    assert [r.repetition for r in runs[6:]] == [1] * 6 + [2] * 6 + [3] * 6
    assert len({r.run_id for r in runs}) == len(runs)


def test_random_order_is_reproducible_from_the_seed(tmp_path):
    path = write(tmp_path, GOOD + "order: random\nseed: 7\n")
    first = [r.run_id for r in expand(load_experiment(path))]
    assert first == [r.run_id for r in expand(load_experiment(path))]
    assert first[6:] != sorted(first[6:], key=lambda i: (i[-3:], i))  # really shuffled
    other = [r.run_id for r in expand(load_experiment(path, {"seed": 8}))]
    assert other != first


def test_command_line_override_of_repetitions(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD), {"repetitions": 1, "warmup": 0})
    assert len(expand(exp)) == 6


def test_a_swapped_script_keeps_its_own_defaults_unless_params_are_given(tmp_path):
    """A file's topology.params are for its own script: --set topology.script=OTHER drops them
    (with a note), the same script or params given on the command line keep them."""
    quickstart = ROOT / "experiments" / "quickstart.yaml"
    dumbbell = str(ROOT / "topologies" / "dumbbell.py")
    kept = load_experiment(quickstart)
    assert kept.topology_params == {"rate": "20mbit", "delay": "10ms", "queue_limit": 100} and not kept.notes
    swapped = load_experiment(quickstart, {"topology.script": str(ROOT / "topologies" / "cellular.py")})
    assert swapped.topology_params == {} and "not applied to" in swapped.notes[0]
    for same in ("topologies/dumbbell.py", dumbbell):  # the same script, however written
        assert load_experiment(quickstart, {"topology.script": same}).topology_params == kept.topology_params
    given = load_experiment(quickstart, {"topology.script": dumbbell, "topology.params.rate": "5mbit"})
    assert given.topology_params == {"rate": "5mbit", "delay": "10ms", "queue_limit": 100} and not given.notes


@pytest.mark.parametrize(
    "change, fragments",
    [
        (
            "repetitions: 3",
            ["exp.yaml:9", "repetitions", "whole number >= 1"],
        ),
        (
            "transport: [quic, bquic, tcp]",
            ["exp.yaml:7", "matrix.transport[1]", "unknown transport 'bqiuc'", "did you mean 'bquic'"],
        ),
        ("link.bottleneck.loss: [0, 2]", ["exp.yaml:8", "matrix.link.bottleneck.los", "did you mean 'loss'"]),
        ("link.bottleneck.loss: [0, 2]", ["exp.yaml:8", "matrix.link.bottleneck.loss[1]", "within 0..100"]),
        ("workload: {object: 2MB}", ["exp.yaml:5", "workload.object", "cannot read size"]),
        ("name: demo", ["exp.yaml:1", "name must be lower-case"]),
        ("    params: {rate: 10mbit}", ["exp.yaml:4", "rate", "ambiguous"]),
        ("warmup: 1", ["exp.yaml:10", "unknown field 'warmpu'", "did you mean 'warmup'"]),
    ],
)
def test_errors_name_line_field_and_fix(tmp_path, change, fragments):
    if "within 0..100" in fragments:  # a value, not a key, is wrong
        change, replacement = change, "link.bottleneck.loss: [0, 200]"
    else:
        replacement = None
    broken = (
        {
            "repetitions: 3": "repetitions: 0",
            "transport: [quic, bquic, tcp]": "transport: [quic, bqiuc, tcp]",
            "link.bottleneck.loss: [0, 2]": "link.bottleneck.los: [0, 2]",
            "workload: {object: 2MB}": "workload: {object: two megabytes}",
            "name: demo": "name: Demo Run",
            "    params: {rate: 10mbit}": "    params: {rate: 10mbps}",
            "warmup: 1": "warmpu: 1",
        }[change]
        if replacement is None
        else replacement
    )
    text = GOOD.replace(change.strip(), broken.strip())
    path = tmp_path / "exp.yaml"
    path.write_text(text.replace("DUMBBELL", str(DUMBBELL)))
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_unknown_node_and_unknown_topology_parameter(tmp_path):
    with pytest.raises(SpecError, match="client node 'laptop'.*choose among client, server"):
        load_experiment(write(tmp_path, GOOD + "client: laptop\n"))
    with pytest.raises(SpecError, match="no parameter 'dealy'.*did you mean 'delay'"):
        load_experiment(write(tmp_path, GOOD.replace("repetitions", "  params.dealy: [1ms]\nrepetitions")))


def test_custom_transport_and_page_workload(tmp_path):
    text = GOOD.replace("workload: {object: 2MB}", "workload: {page: p86-839k, parallel: 4}") + dedent("""\
        transports:
          tcp-h1-reno: {kind: tcp, http: "1.1", cc: reno}
        """)
    text = text.replace("[quic, bquic, tcp]", "[quic, tcp-h1-reno]")
    exp = load_experiment(write(tmp_path, text))
    assert exp.transports["tcp-h1-reno"].http == "1.1" and exp.transports["tcp-h1-reno"].cc == "reno"
    assert exp.workload == {"page": "p86-839k", "parallel": 4}
    with pytest.raises(SpecError, match="unknown page 'p1-1k'"):
        load_experiment(write(tmp_path, text.replace("p86-839k", "p1-1k")))


def test_competitor_shares_the_medium(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD + "competitor: {transport: tcp}\n"))
    assert exp.competitor is not None
    assert exp.competitor.transport == "tcp" and exp.competitor.client == "client"
    with pytest.raises(SpecError, match=r"exp.yaml:11.*competitor.transport.*did you mean 'tcp'"):
        load_experiment(write(tmp_path, GOOD + "competitor: {transport: tpc}\n"))
    with pytest.raises(SpecError, match=r"competitor.speed.*transport and client"):
        load_experiment(write(tmp_path, GOOD + "competitor: {transport: tcp, speed: 1}\n"))
    with pytest.raises(SpecError, match=r"competitor client 's1'"):
        load_experiment(write(tmp_path, GOOD + "competitor: {transport: tcp, client: s1}\n"))


def test_fields_are_overridden_by_dotted_path(tmp_path):
    exp = load_experiment(
        write(tmp_path, GOOD),
        {
            "workload.object": "1MB",
            "topology.params.rate": "5mbit",
            "matrix.link.bottleneck.loss": [1],
            "repetitions": 1,
        },
    )
    assert exp.workload["object"] == 1_000_000 and exp.topology_params == {"rate": "5mbit"}
    assert exp.matrix["link.bottleneck.loss"] == [1] and exp.matrix["transport"] == ["quic", "bquic", "tcp"]
    assert len(expand(exp)) == 3 + 3
    with pytest.raises(SpecError, match="workload.object.*cannot read size"):
        load_experiment(write(tmp_path, GOOD), {"workload.object": "lots"})


def test_a_tcp_competitor_may_use_its_own_congestion_control(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD + "competitor: {transport: tcp-bbr}\n"))
    assert exp.competitor is not None and exp.transports[exp.competitor.transport].cc == "bbr"
    assert exp.transports["tcp"].cc == "cubic"
    exp = load_experiment(
        write(tmp_path, GOOD.replace("[quic, bquic, tcp]", "[quic, bquic]") + "competitor: {transport: tcp-bbr}\n")
    )
    assert exp.competitor is not None and exp.competitor.transport == "tcp-bbr"


def test_a_quic_transport_names_its_implementation_and_runs_only_knobs_it_has(tmp_path):
    text = GOOD.replace("[quic, bquic, tcp]", "[quic-native, bquic-native, mine]") + dedent("""\
        transports:
          mine: {kind: quic, impl: quinn, profile: quic, cc: bbr, knobs: {slow_start_exit_rtt_increase: null}}
        """)
    exp = load_experiment(write(tmp_path, text))
    assert exp.transports["quic"].implementation == "aioquic"
    assert exp.transports["quic-native"].implementation == "quinn"
    assert exp.transports["bquic-native"].knobs["ack_decimation_after"] == 0
    assert exp.transports["mine"].describe()["impl"] == "quinn" and exp.transports["mine"].cc == "bbr"
    # BQUIC as defined switches to decimation after 100 packets, which quinn cannot: refused at
    # load, naming the knobs
    refused = text.replace("cc: bbr, knobs: {slow_start_exit_rtt_increase: null}", "knobs: {}").replace(
        "profile: quic,", "profile: bquic,"
    )
    with pytest.raises(SpecError) as caught:
        load_experiment(write(tmp_path, refused))
    message = str(caught.value)
    for fragment in (
        "transports.mine.knobs",
        "quinn cannot run profile 'bquic'",
        "ack_decimation_after=100",
        "ack_delay_rtt_fraction=0.25",
        "impl: aioquic",
    ):
        assert fragment in message, message
    with pytest.raises(SpecError, match="transports.mine.impl.*msquic"):
        load_experiment(write(tmp_path, text.replace("impl: quinn", "impl: msquic")))
    with pytest.raises(SpecError, match="aioquic cannot run profile 'quic' as given: congestion_control=bbr"):
        load_experiment(write(tmp_path, text.replace("impl: quinn, ", "")))
    with pytest.raises(SpecError, match="transports.mine.knobs.pacing"):
        load_experiment(write(tmp_path, text.replace("slow_start_exit_rtt_increase: null", "pacing: maybe")))


def test_the_competitor_transport_as_a_matrix_axis(tmp_path):
    text = GOOD.replace("  link.bottleneck.loss: [0, 2]", "  competitor.transport: [tcp, bquic]") + "competitor: {}\n"
    exp = load_experiment(write(tmp_path, text))
    pairs = {(exp.transport_of(cell).name, exp.competitors_of(cell)[0].name) for cell in exp.cells()}
    assert pairs == {(a, b) for a in ("quic", "bquic", "tcp") for b in ("tcp", "bquic")}
    with pytest.raises(SpecError, match=r"matrix.competitor.transport\[1\].*did you mean 'bquic'"):
        load_experiment(write(tmp_path, text.replace("[tcp, bquic]", "[tcp, bqiuc]")))
    with pytest.raises(SpecError, match=r"needs a 'competitor' section.*competitor: \{client: client\}"):
        load_experiment(write(tmp_path, text.replace("competitor: {}\n", "")))
    with pytest.raises(SpecError, match=r"matrix.competitor.transport\[0\].*did you mean 'tcp'"):
        load_experiment(write(tmp_path, text.replace("[tcp, bquic]", "[tpc, bquic]")))
    with pytest.raises(SpecError, match=r"a competitor needs a transport.*competitor.transport matrix axis"):
        load_experiment(write(tmp_path, GOOD + "competitor: {}\n"))


def test_cpu_stress_defaults_and_axes(tmp_path):
    text = GOOD.replace("  link.bottleneck.loss: [0, 2]", "  stress.cpu_quota: [null, 0.5]\n  stress.load: [0, 1]")
    exp = load_experiment(write(tmp_path, text + "stress: {load: 2}\n"))
    assert exp.stress.load == 2 and exp.stress.cpu_quota is None
    applied = {(exp.stress_of(cell).cpu_quota, exp.stress_of(cell).load) for cell in exp.cells()}
    assert applied == {(None, 0), (None, 1), (0.5, 0), (0.5, 1)}
    with pytest.raises(SpecError, match=r"exp.yaml:8.*matrix.stress.cpu_quota\[1\].*number of cores from 0.01"):
        load_experiment(write(tmp_path, text.replace("[null, 0.5]", "[null, 0]")))
    with pytest.raises(SpecError, match=r"stress.loud.*cpu_quota .*, load .* and client_device"):
        load_experiment(write(tmp_path, text + "stress: {loud: 1}\n"))
    with pytest.raises(SpecError, match=r"stress.load.*whole number >= 0"):
        load_experiment(write(tmp_path, text + "stress: {load: -1}\n"))


def test_a_client_device_is_a_stress_and_an_axis_for_quic_clients_only(tmp_path):
    quic_only = GOOD.replace("[quic, bquic, tcp]", "[quic, bquic]")
    text = quic_only.replace("  link.bottleneck.loss: [0, 2]", "  stress.client_device: [null, cortex-a53-1.2ghz]")
    exp = load_experiment(write(tmp_path, text))
    assert {exp.stress_of(cell).client_device for cell in exp.cells()} == {None, "cortex-a53-1.2ghz"}
    assert exp.cpu_subject() is None  # a device's time is charged in virtual time too
    fixed = load_experiment(write(tmp_path, quic_only + "stress: {client_device: raspberry-pi-4}\n"))
    assert {fixed.stress_of(cell).client_device for cell in fixed.cells()} == {"raspberry-pi-4"}
    with pytest.raises(
        SpecError,
        match=r"exp.yaml:8.*matrix.stress.client_device\[1\].*unknown client device 'pi'.*"
        r"cortex-a53-1.2ghz, raspberry-pi-3b\+",
    ):
        load_experiment(write(tmp_path, text.replace("cortex-a53-1.2ghz]", "pi]")))
    # TCP's ACKs are the kernel's: the client process cannot take the device's time for them
    with pytest.raises(SpecError, match=r"matrix.stress.client_device.*transport 'tcp'.*kernel's.*fix: take"):
        load_experiment(write(tmp_path, text.replace("[quic, bquic]", "[quic, tcp]")))
    with pytest.raises(SpecError, match=r"stress.client_device.*transport 'tcp'"):
        load_experiment(write(tmp_path, GOOD + "stress: {client_device: raspberry-pi-4}\n"))
    # without a device, TCP is fine beside it
    assert load_experiment(write(tmp_path, GOOD + "stress: {client_device: null}\n")).stress.client_device is None


def test_the_study_headline_is_checked_against_the_matrix(tmp_path):
    study = "study:\n  headline: {metric: goodput, x: link.bottleneck.loss, compare: [quic, bquic]}\n"
    exp = load_experiment(write(tmp_path, GOOD + study))
    assert exp.study is not None and exp.study.headline is not None and exp.study.metrics == ()
    assert exp.study.headline.hue == ("transport",) and exp.study.headline.compare == ("quic", "bquic")
    for wrong, fragments in (
        ("metric: goodput", "study.headline.metric.*unknown metric 'speed'"),
        ("x: link.bottleneck.loss", "study.headline.x.*'link.bottleneck.delay' is not an axis"),
        ("compare: [quic, bquic]", "study.headline.compare.*choose two of: quic, bquic, aioquic"),
    ):
        replacement = {
            "metric: goodput": "metric: speed",
            "x: link.bottleneck.loss": "x: link.bottleneck.delay",
            "compare: [quic, bquic]": "compare: [quic, tcp-bbbr]",
        }[wrong]
        with pytest.raises(SpecError, match=r"exp.yaml:1[12].*" + fragments):
            load_experiment(write(tmp_path, GOOD + study.replace(wrong, replacement)))
    with pytest.raises(SpecError, match=r"study.metrics.*unknown metric 'speed'"):
        load_experiment(write(tmp_path, GOOD + "study: {metrics: [goodput, speed]}\n"))
    assert load_experiment(write(tmp_path, GOOD + "study: {metrics: [goodput, loss]}\n")).study.metrics == (
        "goodput",
        "loss",
    )
    # a matrix narrowed on the command line may leave the compared transports out
    narrowed = load_experiment(write(tmp_path, GOOD + study), {"matrix.transport": ["tcp"]})
    assert narrowed.study.headline.compare == ("quic", "bquic")


ENTERPRISE = ROOT / "topologies" / "enterprise_ap.py"


def _clients_file(tmp_path: Path, clients: str, client: str = "sta1", extra: str = "") -> Path:
    path = tmp_path / "clients.yaml"
    path.write_text(
        f"name: many\ntopology:\n  script: {ENTERPRISE}\n  params: {{stations: 3}}\nbackend: ns3\n"
        f"client: {client}\nclients: {clients}\n{extra}matrix:\n  params.stations: [3, 5]\n"
    )
    return path


def test_many_clients_are_every_station_of_each_runs_topology(tmp_path):
    from quicbed.spec.loader import load_topology

    exp = load_experiment(_clients_file(tmp_path, "stations", client="sta2"))
    assert exp.clients == "stations"
    five = load_topology(str(ENTERPRISE), {"stations": 5})
    assert exp.clients_of(five) == ["sta2", "sta1", "sta3", "sta4", "sta5"]  # the measured client first
    listed = load_experiment(_clients_file(tmp_path, "[sta1, sta3]"))
    assert listed.clients_of(five) == ["sta1", "sta3"]
    assert load_experiment(write(tmp_path, GOOD)).clients_of(five) == ["client"]  # no clients: the client alone


@pytest.mark.parametrize(
    "clients, client, extra, fragments",
    [
        ("[sta1, sta9]", "sta1", "", ["clients[1]", "'sta9' is not a host, station or mesh point"]),
        ("[sta2, sta3]", "sta1", "", ["the measured client 'sta1' is not among the clients", "add sta1 to the list"]),
        ("stations", "server", "", ["client 'server' is not a station of the topology"]),
        ("everyone", "sta1", "", ["expected 'stations' or a list of nodes", "clients: stations"]),
        (
            "stations",
            "sta1",
            "competitor: {transport: tcp, client: sta2}\n",
            ["clients and competitor cannot be combined"],
        ),
    ],
)
def test_clients_errors_name_the_field_and_the_fix(tmp_path, clients, client, extra, fragments):
    with pytest.raises(SpecError) as error:
        load_experiment(_clients_file(tmp_path, clients, client, extra))
    for fragment in fragments:
        assert fragment in str(error.value)


def test_a_whole_workload_as_a_matrix_axis(tmp_path):
    path = write(
        tmp_path,
        GOOD.replace(
            "  link.bottleneck.loss: [0, 2]\n", "  workload: [{object: 100kB}, {page: p8-262k, parallel: 2}]\n"
        ),
    )
    exp = load_experiment(path)
    assert exp.matrix["workload"] == [{"object": "100kB"}, {"page": "p8-262k", "parallel": 2}]
    from quicbed.runner.transfer import workload_of

    assert workload_of(exp, {"workload": {"object": "100kB"}}) == {"object": 100_000, "parallel": 6}
    assert workload_of(exp, {"workload": {"page": "p8-262k", "parallel": 2}}) == {"page": "p8-262k", "parallel": 2}
    with pytest.raises(SpecError, match=r"matrix.workload\[1\].page: unknown page 'p9'"):
        load_experiment(
            write(
                tmp_path, GOOD.replace("  link.bottleneck.loss: [0, 2]\n", "  workload: [{object: 1MB}, {page: p9}]\n")
            )
        )


def test_captures_are_on_off_or_full(tmp_path):
    assert (load_experiment(write(tmp_path, GOOD)).captures, load_experiment(write(tmp_path, GOOD)).full_captures) == (
        True,
        False,
    )
    full = load_experiment(write(tmp_path, GOOD + "captures: full\n"))
    assert full.captures and full.full_captures
    off = load_experiment(write(tmp_path, GOOD + "captures: false\n"))
    assert not off.captures and not off.full_captures
    with pytest.raises(SpecError, match=r"captures must be true, false or full, got 'all'"):
        load_experiment(write(tmp_path, GOOD + "captures: all\n"))


@pytest.mark.parametrize(
    "written, placement",
    [("", "process"), ("true", "process"), ("false", "off"), ("process", "process"), ("simulator", "simulator")],
)
def test_isolate_channel_places_every_channel_thread_by_default(tmp_path, written, placement):
    exp = load_experiment(write(tmp_path, GOOD + (f"isolate_channel: {written}\n" if written else "")))
    assert exp.isolate_channel == placement


def test_an_unknown_isolation_names_the_choices(tmp_path):
    with pytest.raises(
        SpecError,
        match=r"isolate_channel must be true, false, process, simulator or off, "
        r"got 'threads'",
    ) as error:
        load_experiment(write(tmp_path, GOOD + "isolate_channel: threads\n"))
    assert "simulator (its simulator thread alone there)" in str(error.value)


TIME_METRICS = ("download_time", "total_time", "connect_time", "ttfb")


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_experiment_names_its_headline_time(path):
    """Which time a study compares is explicit: a headline metric in every shipped file, and a
    word on why that time (download_time leaves the connection set-up out, total_time has it)."""
    experiment = load_experiment(path)
    assert experiment.study is not None and experiment.study.headline is not None, path.name
    metric = experiment.study.headline.metric
    text = path.read_text()
    if metric in TIME_METRICS:
        assert "set-up" in text, f"{path.name}: say why {metric} (with or without the connection set-up)"


def test_a_transport_resumes_where_its_client_can(tmp_path):
    text = GOOD.replace("[quic, bquic, tcp]", "[h3-0rtt, h2-ticket]") + dedent("""\
        transports:
          h3-0rtt: {kind: quic, impl: quinn, resumption: 0rtt}
          h2-ticket: {kind: tcp, resumption: ticket}
        """)
    exp = load_experiment(write(tmp_path, text))
    assert exp.transports["h3-0rtt"].resumption == "0rtt" and exp.transports["h2-ticket"].resumption == "ticket"
    assert (
        exp.transports["quic"].resumption == "none" and exp.transports["h2-ticket"].describe()["resumption"] == "ticket"
    )
    with pytest.raises(SpecError, match=r"transports.h2-ticket.resumption.*cannot send 0-RTT.*use resumption: ticket"):
        load_experiment(write(tmp_path, text.replace("resumption: ticket", "resumption: 0rtt")))
    with pytest.raises(SpecError, match=r"transports.h3-0rtt.resumption.*'early' is not allowed.*none, ticket, 0rtt"):
        load_experiment(write(tmp_path, text.replace("resumption: 0rtt", "resumption: early")))


def test_several_competitors_download_at_once(tmp_path):
    """competitor.transport: one transport, several joined by '+', or 'others': every other
    transport of the transport axis (the cellular study's three or four controllers at once)."""
    text = GOOD.replace("[quic, bquic, tcp]", "[quic, tcp, tcp-bbr]") + "competitor: {client: client}\n"
    text = text.replace("  link.bottleneck.loss: [0, 2]", "  competitor.transport: [tcp-reno, tcp-reno+quic, others]")
    exp = load_experiment(write(tmp_path, text))
    names = lambda cell: [t.name for t in exp.competitors_of(cell)]  # noqa: E731
    assert names({"transport": "quic", "competitor.transport": "tcp-reno"}) == ["tcp-reno"]
    assert names({"transport": "quic", "competitor.transport": "tcp-reno+quic"}) == ["tcp-reno", "quic"]
    assert names({"transport": "tcp", "competitor.transport": "others"}) == ["quic", "tcp-bbr"]
    assert [t.name for t in exp.transports_used()] == ["quic", "tcp", "tcp-bbr", "tcp-reno"]
    with pytest.raises(SpecError, match=r"competitor.transport\[1\].*unknown transport 'tcp-renno'.*joined by '\+'"):
        load_experiment(write(tmp_path, text.replace("tcp-reno+quic", "tcp-renno+quic")))
    alone = text.replace("[quic, tcp, tcp-bbr]", "[quic]")
    with pytest.raises(SpecError, match=r"'others' means every other transport of the transport axis"):
        load_experiment(write(tmp_path, alone))


def test_every_field_of_an_experiment_file_has_a_row_in_its_docs_table():
    from quicbed.spec.experiment import TOP_LEVEL

    table = (Path(__file__).resolve().parents[2] / "docs" / "experiment-files.md").read_text()
    rows = {
        cell.strip("` ")
        for line in table.splitlines()
        if line.startswith("| `")
        for cell in line.split("|")[1].split(",")
    }
    assert set(TOP_LEVEL) <= rows, sorted(set(TOP_LEVEL) - rows)
