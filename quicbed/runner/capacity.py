"""What the ns-3 channel keeps in real time, as measured, and the warning a plan beyond it gets
before it runs (the runs would be made, found invalid and made again, to no use)."""

from __future__ import annotations

from typing import Any

from quicbed.spec.experiment import Experiment, topology_for

#: stations one ns-3 channel keeps in real time on the 2-core Debian 12 VM it was measured on
#: (docs/studies.md, E5 "Scale"): 5 keep pace, 8 are the edge, 10 or more fall behind
REAL_TIME_STATIONS = 8


def beyond_real_time(experiment: Experiment, backend: str, params: dict[str, Any]) -> str | None:
    """Why cells of this experiment will not keep real time on the ns3 backend, or None."""
    if backend != "ns3":
        return None
    counts = sorted({sum(node.kind == "station" for node in topology_for(experiment, cell, params).nodes.values())
                     for cell in experiment.topology_cells()})
    over = [count for count in counts if count > REAL_TIME_STATIONS]
    if not over:
        return None
    return (f"{experiment.source}: cells of {', '.join(map(str, over))} stations are beyond what the ns-3 channel "
            f"keeps in real time where it was measured (a 2-core Debian 12 VM: 5 stations keep pace, "
            f"{REAL_TIME_STATIONS} are the edge; docs/studies.md, E5), so expect their runs to be invalid (fix: "
            "--clock virtual runs them at any scale, docs/clocks.md; or fewer stations, e.g. "
            "--set 'matrix.params.stations=[5]')")
