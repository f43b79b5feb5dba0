"""Numbers as the report shows them: display units, a few significant digits, and the
tables shared by the terminal, Markdown and HTML outputs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from quicbed.report.summary import Summary, catalogue_entry

DASH = "–"


def number(value: object) -> str:
    """A value shown with 3 significant digits (whole numbers from 1000 on); a dash for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    magnitude = abs(float(value))
    if magnitude >= 1000 or float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.3g}"


def mean_pm(mean: float, half_width: float) -> str:
    if math.isnan(half_width):
        return number(mean)
    half_width = spread(half_width, mean)
    return f"{number(mean)} ± {number(half_width)}"


def mean_interval(mean: float, low: float, high: float, half_width: float, method: str = "t") -> str:
    """A mean with its interval: ``mean ± half-width``, or ``mean [low, high]`` when the interval
    was cut at the metric's range (``t-truncated``) and so is not symmetric about the mean."""
    if method != "t-truncated" or math.isnan(low) or math.isnan(high):
        return mean_pm(mean, half_width)
    return f"{number(mean)} [{number(low)}, {number(high)}]"


def minus_plus(mean: float, low: float, high: float) -> str:
    """The distances of an asymmetric interval's ends from the mean: ``−a +b``."""
    if math.isnan(low) or math.isnan(high):
        return DASH
    below, above = spread(mean - low, mean), spread(high - mean, mean)
    if below == 0 and above == 0:
        return "0"
    return f"−{number(below)} +{number(above)}"


def _method(row: pd.Series) -> str:
    return str(row["ci_method"]) if "ci_method" in row.index else "t"


def spread(value: float, mean: float) -> float:
    """A standard deviation or half-width; rounding noise of identical values becomes 0."""
    return 0.0 if not math.isnan(value) and abs(value) <= 1e-9 * abs(mean) else value


def percent(share: float) -> str:
    return DASH if math.isnan(share) else f"{share * 100:+.1f} %"


def metric_heading(column: str) -> str:
    entry = catalogue_entry(column)
    return f"{entry.label} ({entry.unit})" if entry.unit else entry.label


@dataclass
class Table:
    """A plain table: header and rows of strings."""

    header: list[str]
    rows: list[list[str]]

    def markdown(self) -> str:
        def escape(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        lines = ["| " + " | ".join(escape(cell) for cell in self.header) + " |",
                 "|" + "|".join(" --- " for _ in self.header) + "|"]
        lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in self.rows]
        return "\n".join(lines)


def _cell_values(summary: Summary, row: pd.Series) -> list[str]:
    axes = summary.cell_columns[2:]
    return [str(row[axis]) for axis in axes] if axes else [str(row["cell"])]


def _cell_header(summary: Summary) -> list[str]:
    return summary.cell_columns[2:] or ["cell"]


def metric_table(summary: Summary, column: str) -> Table:
    """Per cell: n, mean, 95 % CI, median, std of one metric, in display units. The "±" column
    is the half-width, or ``−a +b`` (the ends' distances from the mean) of an interval cut at
    the metric's range."""
    rows = summary.table[summary.table["metric"] == column].sort_values("cell_index")
    body = []
    for _, row in rows.iterrows():
        interval = (f"[{number(row['ci_low_shown'])}, {number(row['ci_high_shown'])}]"
                    if not math.isnan(row["ci_low_shown"]) else DASH)
        pm = (minus_plus(row["mean_shown"], row["ci_low_shown"], row["ci_high_shown"])
              if _method(row) == "t-truncated" else number(spread(row["ci_half_width_shown"], row["mean_shown"])))
        body.append([*_cell_values(summary, row), str(row["n"]), number(row["mean_shown"]),
                     pm, interval, number(row["median_shown"]),
                     number(spread(row["std_shown"], row["mean_shown"]))])
    return Table([*_cell_header(summary), "n", "mean", "± 95 % CI", "95 % CI", "median", "std"], body)


def overview_table(summary: Summary, metrics: list[str]) -> Table:
    """Cells as rows, the chosen metrics as columns: ``mean ± CI half-width``, or
    ``mean [CI low, CI high]`` for an interval cut at the metric's range (:func:`mean_interval`)."""
    table = summary.table
    body = []
    for _, cell in summary.counts.sort_values("cell_index").iterrows():
        values = table[table["cell_index"] == cell["cell_index"]].set_index("metric")
        shown = [mean_interval(values.loc[m, "mean_shown"], values.loc[m, "ci_low_shown"],
                               values.loc[m, "ci_high_shown"], values.loc[m, "ci_half_width_shown"],
                               _method(values.loc[m]))
                 if m in values.index else DASH for m in metrics]
        body.append([*_cell_values(summary, cell), str(cell["used"]), *shown])
    return Table([*_cell_header(summary), "n", *(metric_heading(m) for m in metrics)], body)


def gains_table(summary: Summary, metrics: list[str]) -> Table:
    gains = summary.gains[summary.gains["metric"].isin(metrics)]
    others = [column for column in summary.cell_columns[2:] if column != "transport"]
    body = []
    for _, row in gains.iterrows():
        interval = (f"[{percent(row['ci_low'])}, {percent(row['ci_high'])}]"
                    if not math.isnan(row["ci_low"]) else DASH)
        body.append([*(str(row[axis]) for axis in others), metric_heading(row["metric"]), str(row["transport"]),
                     f"{row['n_transport']} vs {row['n_baseline']}", percent(row["gain"]), interval,
                     row["verdict"] or row["note"] or DASH])
    return Table([*others, "metric", f"transport vs {summary.baseline}", "n", "gain", "95 % CI", "verdict"],
                 body)


def counts_table(summary: Summary) -> Table:
    body = [[*_cell_values(summary, row), str(row["runs"]), str(row["used"]), str(row["cpu_bound"]),
             str(row["failed"]), str(row["invalid"]), str(row["remade"]), str(row["warmup"])]
            for _, row in summary.counts.sort_values("cell_index").iterrows()]
    invalid = "invalid (counted)" if summary.include_invalid else "invalid (excluded)"
    return Table([*_cell_header(summary), "runs", "counted", "of which CPU-bound", "failed", invalid,
                  "made again", "warm-up"], body)


def cpu_bound_headline(summary: Summary) -> str | None:
    """One sentence naming the cells whose counted runs were CPU-bound, or None."""
    counts = summary.counts.sort_values("cell_index")
    bound = counts[counts["cpu_bound"] > 0]
    if bound.empty:
        return None
    cells = ", ".join(f"{' '.join(_cell_values(summary, row))}: {row['cpu_bound']} of {row['used']}"
                      for _, row in bound.iterrows())
    return (f"CPU-bound runs (an endpoint or the ns-3 channel wanted a whole core for at least 20 % of the "
            f"transfer, or the machine was saturated): {cells}. Their figures measure the endpoints' or the "
            "machine's CPU as much as the network (docs/metrics.md, 'CPU accounting').")
