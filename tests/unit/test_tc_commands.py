"""The tc command lines generated for link shapes."""

from quicbed.backends.tc import qdisc_commands
from quicbed.spec.link import Shape, parse_shape
from quicbed.spec.loss import GilbertElliott


def test_ideal_link_gets_no_qdisc():
    assert qdisc_commands("eth0", Shape()) == []


def test_rate_only_uses_tbf_which_needs_no_netem():
    commands = qdisc_commands("eth0", parse_shape({"rate": "20mbit", "queue_limit": 50}, "l"))
    assert commands == [["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "tbf",
                         "rate", "20mbit", "burst", "3028", "limit", str(50 * 1514)]]


def test_netem_root_with_tbf_child_as_the_bottleneck_queue():
    shape = parse_shape({"rate": "100mbit", "delay": "10ms", "jitter": "2ms", "jitter_distribution": "normal",
                         "loss": 2, "corrupt": 1, "duplicate": 0.5, "reorder": 3}, "l")
    netem, tbf = qdisc_commands("veth1", shape)
    assert netem[:8] == ["qdisc", "add", "dev", "veth1", "root", "handle", "1:", "netem"]
    text = " ".join(netem)
    for part in ("delay 10ms 2ms distribution normal", "loss random 2%", "corrupt 1%", "duplicate 0.5%",
                 "reorder 3%"):
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
        ["qdisc", "add", "dev", "eth0", "root", "handle", "1:", "pfifo", "limit", "20"]]
