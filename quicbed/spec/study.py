"""The ``study`` section of an experiment file: the comparison its report shows first, and
the metrics its tables show.

    study:
      metrics: [download_time, goodput, loss]   # the report's tables (default: the catalogue's headline)
      headline:
        metric: download_time                 # a metric of the catalogue
        x: workload.page                      # the matrix axis (or axes) along the x axis
        hue: transport                        # the axis (or axes, joined by " vs ") the bars' colours show
        compare: [quic-native, bquic-native]  # relative change of the second against the first, per x
        title: Page load time per page shape
      series: true                            # the sender's state over time for every combination of the
                                              # other axes (default: the first only)

``x`` defaults to every matrix axis that is not a ``hue`` axis; axes in neither get a figure
per value. Read by the experiment loader (errors name the field) and by the report.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quicbed.errors import SpecError

HUE_JOINER = " vs "


def axis_text(value: Any) -> str:
    """An axis value as figures and ``compare`` name it (a missing one, e.g. no quota, is "none")."""
    return "none" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


@dataclass(frozen=True)
class Headline:
    metric: str
    x: tuple[str, ...]
    hue: tuple[str, ...]
    compare: tuple[str, str] | None
    title: str


def _axes(value: Any, field: str, matrix: Mapping[str, Sequence[Any]]) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise SpecError(
            f"expected a matrix axis or a list of them, got {value!r}",
            field=field,
            fix=f"axes of this matrix: {', '.join(matrix) or 'none'}",
        )
    for name in names:
        if name not in matrix:
            raise SpecError(
                f"{name!r} is not an axis of the matrix",
                field=field,
                fix=f"axes of this matrix: {', '.join(matrix) or 'none'}",
            )
    return tuple(names)


@dataclass(frozen=True)
class Study:
    headline: Headline | None
    metrics: tuple[str, ...]  # empty: the catalogue's headline metrics
    series: bool = False  # sender time series for every combination of the other axes


def parse_study(
    value: Any, matrix: Mapping[str, Sequence[Any]], known: Mapping[str, Sequence[Any]] | None = None
) -> Study | None:
    """The study section, checked against the matrix; None without one. ``known``: the
    values each hue axis may take (e.g. every defined transport), which ``compare`` must
    name; None does not check them (a report of a narrowed matrix just lacks the change)."""
    from quicbed.analysis.catalogue import METRICS

    if value is None:
        return None
    if not isinstance(value, dict) or not value or set(value) - {"headline", "metrics", "series"}:
        raise SpecError(
            "a study holds a 'headline' mapping, a 'metrics' list and 'series' (true or false)",
            field="study",
            fix="write study: {headline: {metric: goodput, x: AXIS}, metrics: [goodput, loss]}",
        )
    if not isinstance(value.get("series", False), bool):
        raise SpecError(f"expected true or false, got {value['series']!r}", field="study.series")
    metrics = value.get("metrics", [])
    if not isinstance(metrics, list) or not all(name in METRICS for name in metrics):
        wrong = (
            next((name for name in metrics if name not in METRICS), metrics) if isinstance(metrics, list) else metrics
        )
        raise SpecError(
            f"unknown metric {wrong!r}",
            field="study.metrics",
            fix="metrics are listed in docs/results.md (e.g. goodput, download_time, jain_index)",
        )
    headline = _headline(value["headline"], matrix, known) if "headline" in value else None
    return Study(headline, tuple(metrics), value.get("series", False))


def _headline(
    headline: Any, matrix: Mapping[str, Sequence[Any]], known: Mapping[str, Sequence[Any]] | None
) -> Headline:
    from quicbed.analysis.catalogue import METRICS

    if not isinstance(headline, dict):
        raise SpecError(
            "expected a mapping",
            field="study.headline",
            fix="write headline: {metric: goodput, x: AXIS, hue: transport}",
        )
    unknown = set(headline) - {"metric", "x", "hue", "compare", "title"}
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(
            f"unknown headline option {key!r}",
            field=f"study.headline.{key}",
            fix="a headline takes metric, x, hue, compare and title",
        )
    metric = headline.get("metric")
    if metric not in METRICS:
        raise SpecError(
            f"unknown metric {metric!r}",
            field="study.headline.metric",
            fix="metrics are listed in docs/results.md (e.g. goodput, download_time, jain_index)",
        )
    hue = _axes(headline.get("hue", "transport"), "study.headline.hue", matrix)
    x = (
        _axes(headline["x"], "study.headline.x", matrix)
        if "x" in headline
        else tuple(axis for axis in matrix if axis not in hue)
    )
    if set(x) & set(hue):
        raise SpecError(
            "an axis cannot be both x and hue", field="study.headline.x", fix="name each axis in one of them"
        )
    compare = headline.get("compare")
    if compare is not None:
        labels = (
            None
            if known is None
            else [
                HUE_JOINER.join(axis_text(v) for v in values)
                for values in itertools.product(*(known.get(a, matrix[a]) for a in hue))
            ]
        )
        if not (isinstance(compare, list) and len(compare) == 2) or (
            labels is not None and not all(str(c) in labels for c in compare)
        ):
            raise SpecError(
                f"compare needs two values of the hue, got {compare!r}",
                field="study.headline.compare",
                fix=f"choose two of: {', '.join(labels)}" if labels else "write compare: [A, B]",
            )
        compare = (str(compare[0]), str(compare[1]))
    title = headline.get("title") or f"{METRICS[metric].label} by {', '.join(x) or 'cell'}"
    return Headline(metric, x, hue, compare, str(title))
