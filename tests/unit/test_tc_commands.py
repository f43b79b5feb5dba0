"""The tc command lines generated for link shapes."""

from quicbed.backends.tc import parse_qdiscs, qdisc_commands
from quicbed.spec.link import Shape, parse_shape
from quicbed.spec.loss import GilbertElliott


def test_ideal_link_gets_no_qdisc():
    assert qdisc_commands("eth0", Shape()) == []


def test_rate_only_uses_tbf_which_needs_no_netem():
    commands = qdisc_commands("eth0", parse_shape({"rate": "20mbit", "queue_limit": 50}, "l"))
    assert commands == [
        [
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "handle",
            "1:",
            "tbf",
            "rate",
            "20mbit",
            "burst",
            "3028",
            "limit",
            str(50 * 1514),
        ]
    ]


def test_netem_root_with_tbf_child_as_the_bottleneck_queue():
    shape = parse_shape(
        {
            "rate": "100mbit",
            "delay": "10ms",
            "jitter": "2ms",
            "jitter_distribution": "normal",
            "loss": 2,
            "corrupt": 1,
            "duplicate": 0.5,
            "reorder": 3,
        },
        "l",
    )
    netem, tbf = qdisc_commands("veth1", shape)
    assert netem[:8] == ["qdisc", "add", "dev", "veth1", "root", "handle", "1:", "netem"]
    text = " ".join(netem)
    for part in ("delay 10ms 2ms distribution normal", "loss random 2%", "corrupt 1%", "duplicate 0.5%", "reorder 3%"):
        assert part in text
    assert tbf[:7] == ["qdisc", "add", "dev", "veth1", "parent", "1:1", "handle"]
    assert "rate 100mbit burst 12500" in " ".join(tbf)


def test_gemodel_parameters_are_passed_as_percentages():
    shape = Shape(delay=0.005, loss=GilbertElliott(0.00125, 0.125, 0.5, 0.0152))
    (netem,) = qdisc_commands("eth0", shape)
    assert "loss gemodel 0.125% 12.5% 50% 1.52%" in " ".join(netem)


def test_slot_and_queue_limit_alone():
    shape = parse_shape({"slot": {"min_delay": "1ms", "max_delay": "4ms", "packets": 32}}, "l")
    assert "slot 1ms 4ms packets 32" in " ".join(qdisc_commands("eth0", shape)[0])
    assert qdisc_commands("eth0", Shape(queue_limit=20)) == [
        ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "pfifo", "limit", "20"]
    ]


def test_qdiscs_read_from_tc_show():
    """The output of 'tc qdisc show dev wlan0' on mac80211_hwsim (Debian's 6.1 kernel, in the
    microVM): mq with an fq_codel per access category, as a Mininet-WiFi run records it."""
    output = "qdisc mq 0: root \n" + "".join(
        f"qdisc fq_codel 0: parent :{n} limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms "
        "memory_limit 32Mb ecn drop_batch 64 \n"
        for n in (4, 3, 2, 1)
    )
    qdiscs = parse_qdiscs(output)
    assert qdiscs[0] == {"kind": "mq", "handle": "0:", "parent": "root"}
    assert [q["parent"] for q in qdiscs[1:]] == [":4", ":3", ":2", ":1"]
    assert qdiscs[1] == {
        "kind": "fq_codel",
        "handle": "0:",
        "parent": ":4",
        "limit": "10240p",
        "flows": "1024",
        "quantum": "1514",
        "target": "5ms",
        "interval": "100ms",
        "memory_limit": "32Mb",
        "ecn": True,
        "drop_batch": "64",
    }
    fast = parse_qdiscs("qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n")
    assert fast == [
        {
            "kind": "pfifo_fast",
            "handle": "0:",
            "parent": "root",
            "refcnt": "2",
            "bands": "3",
            "priomap": "1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
        }
    ]
    assert parse_qdiscs("") == [] and parse_qdiscs("RTNETLINK answers: No such device\n") == []
