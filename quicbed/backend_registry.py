"""The backends quicbed can realise a topology on: one descriptor each, the single table that
the experiment loader, the labs, the CLI, the runner and the guard tests read.

Pure data: a descriptor names its backend's code by "module:attribute" strings, imported only
when used (quicbed.backends resolves them), so that the layers under the backends (spec, host)
may read the names without importing an emulator. Adding a backend is one package under
quicbed/backends/ and one entry in BACKENDS (docs/architecture.md, "Where new work goes")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendDescriptor:
    #: as experiment files, labs and --backend write it
    name: str
    #: the backend's own package (or module) under quicbed.backends; no other backend imports it
    package: str
    #: "module:Class" of its Network, called as Class(topology, **options)
    network: str
    #: "module:function(topology) -> list[str]": what of a topology it cannot build
    unrealisable: str
    #: "module:function() -> str | None": why it cannot run on this machine ('WHAT (fix: HOW)')
    unavailable: str | None = None
    #: module whose CHECKS list what it needs of the host (quicbed doctor)
    checks: str | None = None
    #: "module:function(topology | None) -> str | None": what this kernel lacks to run the topology
    #: (e.g. netem, mac80211_hwsim); a guest kernel that has it runs it instead (docs/clocks.md)
    kernel_problem: str | None = None
    #: kernel modules, with parameters, the microVM loads for it (sch_netem it always loads)
    vm_modules: tuple[str, ...] = ()
    #: options for a network started inside the microVM, whose emulated CPU (~13x slower) makes
    #: e.g. association, mesh peering and teardown take minutes
    vm_options: tuple[tuple[str, float], ...] = ()
    #: its option that seeds the random numbers it draws itself (None: it draws none); a run
    #: passes its own stream there unless the experiment fixed one (docs/clocks.md, "Repeatability")
    random_stream_option: str | None = None
    #: its constructor checks its backend_options against the topology with no side effect,
    #: so creating one (not starting it) is how a plan is refused before any run
    checks_options_on_create: bool = False
    #: the protocols of quicbed.backends.base beyond Network its Network implements (the runner
    #: asks with isinstance; the guard test holds the class to this list)
    capabilities: tuple[str, ...] = ()


BACKENDS: dict[str, BackendDescriptor] = {
    descriptor.name: descriptor
    for descriptor in (
        BackendDescriptor(
            name="netns",
            package="netns",
            network="quicbed.backends.netns:NamespaceNetwork",
            unrealisable="quicbed.backends.tc:topology_unrealisable",
            kernel_problem="quicbed.backends.netns:kernel_problem",
            capabilities=("ReshapableLinks",),
        ),
        BackendDescriptor(
            name="ns3",
            package="ns3",
            network="quicbed.backends.ns3.network:Ns3Network",
            unrealisable="quicbed.backends.ns3.description:unrealisable",
            unavailable="quicbed.backends.ns3.build:missing",
            checks="quicbed.backends.ns3.checks",
            random_stream_option="run",
            capabilities=("MacStatistics",),
        ),
        BackendDescriptor(
            name="mininet-wifi",
            package="mininet_wifi",
            network="quicbed.backends.mininet_wifi:MininetWifiNetwork",
            unrealisable="quicbed.backends.mininet_wifi.host:unrealisable",
            unavailable="quicbed.backends.mininet_wifi.host:import_problem",
            checks="quicbed.backends.mininet_wifi.checks",
            kernel_problem="quicbed.backends.mininet_wifi.host:kernel_problem",
            vm_modules=("mac80211_hwsim radios=0", "openvswitch"),
            vm_options=(("association_timeout_s", 240.0), ("mesh_timeout_s", 240.0), ("stop_timeout_s", 240.0)),
            checks_options_on_create=True,
            capabilities=("WalkedStations",),
        ),
    )
}
#: the names, in the table's order
BACKEND_NAMES = tuple(BACKENDS)
