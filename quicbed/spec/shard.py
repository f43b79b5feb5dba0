"""Shards: a deterministic split of an experiment's runs over N machines (``--shard K/N``).

By cell (the default) every run of a cell, warm-up runs included, goes to one shard, so a
cell's repetitions share one machine and its warm-up: cell ``c`` belongs to shard
``c mod N + 1``, which spreads the matrix's axes over the shards. By a matrix axis
(``--shard-by link.bottleneck.loss``) the cells that share that axis's value go to one
shard (the i-th value to shard ``i mod N + 1``), so the cells compared along the other
axes (e.g. the transports at one loss rate) share a machine. By run (``--shard-by run``)
the runs are dealt out in turn by their identity, cell C and repetition R of M cells:
measured run ``cC-rR`` has number ``n = (R - 1) M + C`` (its place in round-robin order)
and belongs to shard ``n mod N + 1``; warm-up ``cC-wR`` is dealt the same way from the
last shard down, so that the shards' sizes differ by at most one run. A run keeps its
shard when a resume changes ``--repetitions``, ``--warmup`` or ``order: random``, which a
split by position in execution order would not; a shard may measure a cell it did not
warm up.
Within a shard the runs keep the experiment's order. Every run lands in exactly one shard.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from quicbed.errors import QuicbedError
from quicbed.spec.experiment import Experiment, Run

#: besides these, --shard-by takes the name of a matrix axis
SHARD_BY = ("cell", "run")
#: how --shard-by run deals runs out, as recorded in metadata.json (folders without it were
#: dealt out by position in execution order, and cannot be resumed or merged with these)
RUN_SPLIT = "cell+repetition"
_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    index: int  # K, from 1
    count: int  # N
    by: str = "cell"

    @classmethod
    def parse(cls, text: str, by: str = "cell") -> Shard:
        match = _SHARD.fullmatch(text)
        if not match:
            raise QuicbedError(f"--shard {text!r}: expected K/N, e.g. --shard 2/4 (the second of four shards)")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise QuicbedError(f"--shard {text}: K must be between 1 and N, and N at least 1 (e.g. 1/{max(count, 2)})")
        return cls(index, count, by)

    def check(self, axes: list[str]) -> None:
        """Refuse a --shard-by that is neither cell, run nor one of the experiment's matrix axes."""
        if self.by not in SHARD_BY and self.by not in axes:
            raise QuicbedError(
                f"--shard-by {self.by!r}: use cell, run or a matrix axis of this experiment "
                f"({', '.join(axes) or 'it has none'})"
            )

    def select(self, runs: list[Run]) -> list[Run]:
        if self.by == "run":  # runs: all of an experiment's, so the last cell is among them
            cells = 1 + max((run.cell_index for run in runs), default=0)
            return [run for run in runs if self._owns_run(run, cells)]
        if self.by == "cell":
            return [run for run in runs if run.cell_index % self.count == self.index - 1]
        # by axis: the axis's values in cell order, each value (and all its cells) to one shard
        values: list[object] = []
        for run in sorted(runs, key=lambda r: r.cell_index):
            if run.cell[self.by] not in values:
                values.append(run.cell[self.by])
        return [run for run in runs if values.index(run.cell[self.by]) % self.count == self.index - 1]

    def owner(self, experiment: Experiment) -> Callable[[Run], bool]:
        """Whether a run of ``experiment`` is this shard's, from its numbers alone (the same
        split as :meth:`select`, without the list of every run)."""
        if self.by == "run":
            cells = experiment.cell_count()
            return lambda run: self._owns_run(run, cells)
        owns_cell = self._cell_owner(experiment)
        return lambda run: owns_cell(run.cell_index)

    def size(self, experiment: Experiment) -> int:
        """How many of the experiment's runs are this shard's: counted, not listed."""
        per_cell = experiment.repetitions + experiment.warmup
        cells = experiment.cell_count()
        if self.by == "run":
            measured = len(range(self.index - 1, experiment.repetitions * cells, self.count))
            return measured + len(range(self.count - self.index, experiment.warmup * cells, self.count))
        if self.by == "cell":
            return len(range(self.index - 1, cells, self.count)) * per_cell
        values = experiment.matrix[self.by]
        mine = sum(1 for group in _value_groups(values) if group % self.count == self.index - 1)
        return mine * (cells // len(values)) * per_cell

    def _owns_run(self, run: Run, cells: int) -> bool:
        number = (run.repetition - 1) * cells + run.cell_index
        shard = self.count - 1 - number % self.count if run.warmup else number % self.count
        return shard == self.index - 1

    def _cell_owner(self, experiment: Experiment) -> Callable[[int], bool]:
        if self.by == "cell":
            return lambda cell_index: cell_index % self.count == self.index - 1
        values = experiment.matrix[self.by]
        axes = list(experiment.matrix)
        stride = math.prod(len(experiment.matrix[axis]) for axis in axes[axes.index(self.by) + 1 :])
        groups = _value_groups(values)
        return lambda cell_index: groups[cell_index // stride % len(values)] % self.count == self.index - 1

    def describe(self) -> dict[str, object]:
        return {
            "index": self.index,
            "count": self.count,
            "by": self.by,
            **({"split": RUN_SPLIT} if self.by == "run" else {}),
        }

    def __str__(self) -> str:
        return f"{self.index}/{self.count} (by {self.by})"


def _value_groups(values: list[object]) -> list[int]:
    """For each entry of an axis, the rank of its value among the axis's distinct values in
    order (equal entries share a rank): the cells of one value go to one shard."""
    distinct: list[object] = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return [distinct.index(value) for value in values]
