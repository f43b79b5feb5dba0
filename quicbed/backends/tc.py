"""tc command lines for one direction of a wired link (pure functions, unit-tested).

Layout on the egress interface:
- only rate/queue limit:  root tbf (host kernels without netem can do this);
- any netem feature:      root netem (delay line, loss, corruption, ...), and when a rate
  is set, a tbf child that is the bottleneck queue. netem's own limit then only has to hold
  packets in flight on the delay line, so it is large: the queue limit applies to tbf.
"""

from __future__ import annotations

import os
from typing import Any

from quicbed.errors import BackendError
from quicbed.spec.link import Shape, WiredLink
from quicbed.spec.loss import Bernoulli, GilbertElliott
from quicbed.spec.units import format_rate, format_time

MTU_FRAME = 1514
DEFAULT_QUEUE_PACKETS = 1000  # the kernel's default txqueuelen
NETEM_DELAY_LINE_LIMIT = 100_000


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.6g}%"


def tbf_burst(rate: float) -> int:
    """Default bucket depth in bytes: QUICBED_TBF_BURST_MS of traffic (1 ms), at least two frames.

    A shallow bucket keeps the emulated link from sending line-rate bursts, but it needs
    punctual timers: when a timer fires later than the bucket lasts, capacity is lost. Under
    software emulation (the microVM) timers are late by milliseconds and a 2-frame bucket
    delivered 59 % of a 10 Mbit/s rate, so the microVM job raises the depth to 10 ms. On a
    busy host 1 ms can cost a few percent of a 20-40 Mbit/s rate (bench/README.md).
    """
    milliseconds = float(os.environ.get("QUICBED_TBF_BURST_MS", "1"))
    return max(2 * MTU_FRAME, int(rate / 8 * milliseconds * 1e-3))


def netem_args(shape: Shape) -> list[str]:
    args = ["limit", str(NETEM_DELAY_LINE_LIMIT)]
    if shape.delay or shape.jitter:
        args += ["delay", format_time(shape.delay)]
        if shape.jitter:
            args += [format_time(shape.jitter)]
            if shape.jitter_distribution != "uniform":
                args += ["distribution", shape.jitter_distribution]
    if isinstance(shape.loss, Bernoulli):
        args += ["loss", "random", _pct(shape.loss.probability)]
    elif isinstance(shape.loss, GilbertElliott):
        ge = shape.loss
        args += ["loss", "gemodel", _pct(ge.p), _pct(ge.r), _pct(ge.loss_bad), _pct(ge.loss_good)]
    if shape.corrupt:
        args += ["corrupt", _pct(shape.corrupt)]
    if shape.duplicate:
        args += ["duplicate", _pct(shape.duplicate)]
    if shape.reorder:
        args += ["reorder", _pct(shape.reorder)]
        if shape.reorder_gap:
            args += ["gap", str(shape.reorder_gap)]
    if shape.slot:
        args += ["slot", format_time(shape.slot.min_delay), format_time(shape.slot.max_delay)]
        if shape.slot.packets:
            args += ["packets", str(shape.slot.packets)]
        if shape.slot.bytes:
            args += ["bytes", str(shape.slot.bytes)]
    return args


def tbf_args(shape: Shape) -> list[str]:
    assert shape.rate is not None
    packets = shape.queue_limit or DEFAULT_QUEUE_PACKETS
    return [
        "rate",
        format_rate(shape.rate),
        "burst",
        str(shape.burst or tbf_burst(shape.rate)),
        "limit",
        str(packets * MTU_FRAME),
    ]


def topology_unrealisable(topology: Any) -> list[str]:
    """:func:`unrealisable` for a topology's links (the netns backend's answer)."""
    return unrealisable(topology.links)


def unrealisable(links: list) -> list[str]:
    """Why the kernel's qdiscs (the netns and Mininet-WiFi backends) cannot build these wired
    links: a delivery trace. No qdisc replays one, and a tbf rate changed from user space
    every millisecond would follow it only as well as that process's timers (and tbf's bucket)
    allow, so quicbed does not pretend to."""
    return [
        f"links[{link.name}].{direction}: a delivery trace ({shape.trace.name}) needs the ns3 backend; the "
        "kernel's qdiscs cannot replay a trace (fix: backend: ns3, or --backend ns3)"
        for link in links
        if isinstance(link, WiredLink)
        for direction, shape in (("forward", link.forward), ("backward", link.backward))
        if shape.trace
    ]


def qdisc_commands(device: str, shape: Shape) -> list[list[str]]:
    """``tc`` argument lists (without the leading 'tc') that give ``device`` this shape."""
    if shape.trace:
        raise BackendError(f"{device}: a delivery trace needs the ns3 backend (fix: backend: ns3)")
    if shape.is_ideal():
        return []
    commands: list[list[str]] = []
    if shape.needs_netem():
        commands.append(["qdisc", "add", "dev", device, "root", "handle", "1:", "netem", *netem_args(shape)])
        if shape.rate:
            commands.append(["qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:", "tbf", *tbf_args(shape)])
    elif shape.rate:
        commands.append(["qdisc", "add", "dev", device, "root", "handle", "1:", "tbf", *tbf_args(shape)])
    elif shape.queue_limit:
        commands.append(
            ["qdisc", "add", "dev", device, "root", "handle", "1:", "pfifo", "limit", str(shape.queue_limit)]
        )
    return commands


def parse_qdiscs(output: str) -> list[dict[str, Any]]:
    """The qdiscs of ``tc qdisc show dev X``: kind, handle, parent and options, one dict each
    ("qdisc fq_codel 0: parent :1 limit 10240p ... ecn" -> {"kind": "fq_codel", "handle":
    "0:", "parent": ":1", "limit": "10240p", ..., "ecn": True}); an option followed by several
    values (pfifo_fast's priomap) keeps them joined by spaces."""
    qdiscs = []
    for line in output.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "qdisc":
            continue
        qdisc: dict[str, Any] = {"kind": words[1], "handle": words[2]}
        name = None
        for word in words[3:]:
            if word == "root":
                qdisc["parent"], name = "root", None
            elif name is not None and (word[0].isdigit() or word[0] == ":"):
                qdisc[name] = f"{qdisc[name]} {word}" if isinstance(qdisc[name], str) else word
            else:
                qdisc[word], name = True, word
        qdiscs.append(qdisc)
    return qdiscs
