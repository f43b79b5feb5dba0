"""What the ns-3 channel keeps in real time, as measured, and the warning a plan beyond it gets
before it runs (the runs would be made, found invalid and made again, to no use)."""

from __future__ import annotations

from typing import Any

from quicbed.spec.experiment import Experiment, topology_for
from quicbed.spec.topology import Topology

#: stations one ns-3 channel keeps in real time on the 2-core Debian 12 VM it was measured on
#: (docs/studies.md, E5 "Scale"): 5 keep pace, 8 are the edge, 10 or more fall behind
REAL_TIME_STATIONS = 8
#: with downlink OFDMA (the spectrum PHY it needs) 4 stations fell behind in every run there, one
#: kept pace (experiments/e1-wifi6.yaml; 2 and 3 were not measured)
REAL_TIME_OFDMA_STATIONS = 3


def _stations(topology: Topology) -> tuple[int, bool]:
    """The topology's stations, and whether any of its radios sends OFDMA."""
    ofdma = any(getattr(getattr(link, "radio", None), "ofdma", False) for link in topology.links)
    return sum(node.kind == "station" for node in topology.nodes.values()), ofdma


def beyond_real_time(experiment: Experiment, backend: str, params: dict[str, Any]) -> str | None:
    """Why cells of this experiment will not keep real time on the ns3 backend, or None."""
    if backend != "ns3":
        return None
    cells = {_stations(topology_for(experiment, cell, params)) for cell in experiment.topology_cells()}
    over = sorted(
        {count for count, ofdma in cells if count > (REAL_TIME_OFDMA_STATIONS if ofdma else REAL_TIME_STATIONS)}
    )
    if not over:
        return None
    with_ofdma = any(ofdma and count in over for count, ofdma in cells)
    return (
        f"{experiment.source}: cells of {', '.join(map(str, over))} stations{' with OFDMA' if with_ofdma else ''} "
        "are beyond what the ns-3 channel keeps in real time where it was measured (a 2-core Debian 12 VM: 5 "
        f"stations keep pace, {REAL_TIME_STATIONS} are the edge, and with OFDMA 4 fell behind in every run; "
        "docs/studies.md, E5), so expect their runs to be invalid (fix: --clock virtual runs them at any scale, "
        "docs/clocks.md; or fewer stations with --set 'matrix.params.stations=[...]')"
    )
