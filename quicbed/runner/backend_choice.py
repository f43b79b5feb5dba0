"""Which backend runs an experiment whose file does not name one, on a kernel without netem.

Experiment files without ``backend:`` mean netns (namespaces, veth, tc). When their links
need netem (delay, jitter, loss, corruption) and this kernel has none, there are two ways
to run them: the ns3 backend, which simulates the same wired links on this host at its
full speed, or netns in a guest kernel with netem (quicbed's virtual-time kernel, or the
microVM, whose CPU is emulated ~13x slower: quicbed.cli.run chooses). ns3 is taken when it
can realise every link parameter the experiment uses and is installed; otherwise netns in
the guest. Links that replay a delivery trace take ns3 whatever
the kernel, as only ns3 can replay one. A backend named in the file or with ``--backend``
(and ``--vm``) is always kept. Before anything runs, links the backend cannot realise are
refused: on ns3 reordering, duplication, slotting, other jitter distributions; on the kernel's
qdiscs (netns, mininet-wifi) delivery traces; on mininet-wifi ACK acceleration at an AP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quicbed.backend_registry import BACKENDS
from quicbed.backends import create, unavailable, unrealisable
from quicbed.errors import QuicbedError
from quicbed.host.capabilities import has_netem
from quicbed.spec.experiment import Experiment, topology_for
from quicbed.spec.link import WiredLink
from quicbed.spec.topology import Topology

#: what happens on a kernel without netem, said in the same words by README, 'run --help' and
#: doctor (tests/unit/test_cli.py holds them to it); a dry run shows the outcome for one file
NO_NETEM = (
    "On a kernel without netem, an experiment file that names no backend runs on the ns3 backend, on "
    "this host, when ns3 can make every link it uses; otherwise, and whenever a netns or mininet-wifi "
    "backend is named, 'quicbed run' moves the runs by itself into quicbed's virtual-time kernel where "
    "it is built (the runs' clock is then virtual), else into the microVM ('--clock real' or '--vm' "
    "always the microVM, '--no-vm' never a guest)."
)

#: the netem features a link may use, as shown to users
NETEM_FIELDS = ("delay", "jitter", "loss", "corrupt", "reorder", "duplicate", "slot")


@dataclass
class BackendChoice:
    backend: str
    #: what was decided and why, shown before the runs and kept in metadata.json (None: nothing to say)
    note: str | None = None


def _topologies(experiment: Experiment, params: dict[str, Any]) -> list[Topology]:
    """Every network the matrix builds, once each (cells that differ in other axes share one)."""
    return [topology_for(experiment, cell, params) for cell in experiment.topology_cells()]


def _netem_uses(topologies: list[Topology]) -> list[str]:
    """'bottleneck (delay, loss)' for every wired link that needs netem somewhere in the matrix."""
    uses: dict[str, set[str]] = {}
    for topo in topologies:
        for link in topo.links:
            if isinstance(link, WiredLink) and link.needs_netem():
                for shape in (link.forward, link.backward):
                    uses.setdefault(link.name, set()).update(f for f in NETEM_FIELDS if getattr(shape, f))
    return [f"{name} ({', '.join(f for f in NETEM_FIELDS if f in fields)})" for name, fields in uses.items()]


def ns3_problems(topologies: list[Topology]) -> list[str]:
    """Why ns3 cannot run these topologies (each problem once)."""
    missing = unavailable("ns3")
    problems = [missing] if missing else []
    for topo in topologies:
        problems += [p for p in unrealisable("ns3", topo) if p not in problems]
    return problems


def _trace_uses(topologies: list[Topology]) -> list[str]:
    return list(
        dict.fromkeys(
            link.name
            for topo in topologies
            for link in topo.links
            if isinstance(link, WiredLink) and (link.forward.trace or link.backward.trace)
        )
    )


def choose_backend(
    experiment: Experiment, requested: str | None, params: dict[str, Any], vm_requested: bool = False
) -> BackendChoice:
    backend = requested or experiment.backend
    if requested or "backend" in experiment.raw or vm_requested or backend != "netns":
        return BackendChoice(backend)
    topologies = _topologies(experiment, params)
    traced = _trace_uses(topologies)
    if traced:  # no kernel replays a trace: ns3 or nothing (require_realisable says why)
        if ns3_problems(topologies):
            return BackendChoice(backend)
        return BackendChoice(
            "ns3",
            f"the links {', '.join(traced)} of {experiment.source} replay delivery traces, "
            "which only the ns3 backend can: running on ns3",
        )
    if has_netem():
        return BackendChoice(backend)
    uses = _netem_uses(topologies)
    if not uses:
        return BackendChoice(backend)
    problems = ns3_problems(topologies)
    needing = f"this kernel has no netem, which the links {', '.join(uses)} of {experiment.source} need"
    if problems:
        return BackendChoice(
            "netns",
            f"{needing}, and the ns3 backend cannot run them ({'; '.join(problems)}): "
            "they run on netns in a guest kernel with netem (below)",
        )
    return BackendChoice(
        "ns3",
        f"{needing}: running them on the ns3 backend, which simulates the same wired links "
        "on this host at its full speed (the other choice, --backend netns, runs netem in a guest "
        "kernel: quicbed's virtual-time kernel, or the microVM with a ~13x slower CPU; name a "
        "backend in the file or with --backend to choose)",
    )


def require_realisable(experiment: Experiment, backend: str, params: dict[str, Any]) -> None:
    """Refuse, before any run, link parameters the backend cannot realise."""
    topologies = _topologies(experiment, params)
    problems = [p for topo in topologies for p in unrealisable(backend, topo)]
    options = experiment.backend_options.get(backend, {})
    if options or BACKENDS[backend].checks_options_on_create:
        for topo in topologies:
            try:
                create(backend, topo, **options)  # (built only when started)
            except QuicbedError as error:
                problems.append(f"{error} (backend_options.{backend}: {options or 'none'})")
    if problems:
        raise QuicbedError(
            f"{experiment.source}: the {backend} backend cannot realise this experiment's links: "
            f"{'; '.join(dict.fromkeys(problems))}"
        )
