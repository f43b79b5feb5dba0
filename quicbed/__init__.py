"""quicbed: a network-emulation testbed for QUIC, BQUIC and TCP over WiFi, mesh and lossy links."""

from quicbed.spec import (
    AccessPoint,
    Bernoulli,
    GilbertElliott,
    Host,
    MeshPoint,
    Station,
    Switch,
    Topology,
)

__version__ = "0.1.0"

__all__ = [
    "AccessPoint",
    "Bernoulli",
    "GilbertElliott",
    "Host",
    "MeshPoint",
    "Station",
    "Switch",
    "Topology",
    "__version__",
]
