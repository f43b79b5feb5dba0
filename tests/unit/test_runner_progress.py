"""The runner's progress lines without a terminal: one per finished run, notes between them."""

from __future__ import annotations

import io

from quicbed.results import RunRecord
from quicbed.runner.engine import Progress
from quicbed.spec.experiment import Run


def test_lines_for_runs_and_notes_without_a_terminal() -> None:
    stream = io.StringIO()
    progress = Progress(total=2, done=0, stream=stream)
    run = Run(index=0, cell_index=0, cell={"transport": "quic"}, repetition=0, warmup=False)
    progress.starting(run)
    progress.note("warning (ns3 network wifi_ap): SCHED_FIFO is not permitted")
    progress.finished(
        run, RunRecord(run.run_id, 0, 0, run.cell, 0, False, status="failed", error="server did not start")
    )
    progress.close()
    note, line = stream.getvalue().splitlines()
    assert note == "warning (ns3 network wifi_ap): SCHED_FIFO is not permitted"
    assert line.startswith(f"[1/2] {run.run_id} ") and "FAILED: server did not start" in line
    assert line.endswith("s)")  # the ETA from the runs measured so far
