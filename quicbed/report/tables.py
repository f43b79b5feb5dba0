"""Numbers as the report shows them: display units, a few significant digits, and the
tables shared by the terminal, Markdown and HTML outputs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from quicbed.analysis.stats import MAX_BASELINE_RSE
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
    """``mean ± half-width``: the half-width to two significant digits and the mean to the
    same decimal place (0.92 ± 0.00123 reads 0.9200 ± 0.0012, 48.27 ± 12.6 reads 48 ± 13;
    below a millionth, significant digits)."""
    if math.isnan(half_width) or math.isnan(mean):
        return number(mean)
    half_width = spread(half_width, mean)
    if half_width == 0 or not math.isfinite(half_width):
        return f"{number(mean)} ± {number(half_width)}"
    decimals = max(0, 1 - math.floor(math.log10(abs(half_width))))
    if decimals > 6:
        return f"{mean:.3g} ± {half_width:.2g}"
    return f"{mean:.{decimals}f} ± {half_width:.{decimals}f}"


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

        lines = [
            "| " + " | ".join(escape(cell) for cell in self.header) + " |",
            "|" + "|".join(" --- " for _ in self.header) + "|",
        ]
        lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in self.rows]
        return "\n".join(lines)


def _cell_values(summary: Summary, row: pd.Series) -> list[str]:
    axes = summary.cell_columns[2:]
    return [str(row[axis]) for axis in axes] if axes else [str(row["cell"])]


def _cell_header(summary: Summary) -> list[str]:
    return summary.cell_columns[2:] or ["cell"]


def cpu_mark(counts: pd.Series) -> str:
    """What a cell's counted runs were limited by, when not only the network: "CPU-bound 3/10",
    "CPU unknown 2/10" (both when both), or "" (the tables' "CPU" column)."""
    marks = []
    if counts["cpu_bound"]:
        marks.append(f"CPU-bound {counts['cpu_bound']}/{counts['used']}")
    if counts["cpu_unknown"]:
        marks.append(f"CPU unknown {counts['cpu_unknown']}/{counts['used']}")
    return ", ".join(marks)


#: the legend of hatched bars: cells whose counted runs include CPU-bound or CPU-unknown ones
CPU_MARK_LABEL = "CPU-bound or CPU unknown runs"


def cpu_marked(summary: Summary, rows: pd.DataFrame) -> np.ndarray:
    """Per summary row: whether its cell's counted runs include CPU-bound or CPU-unknown ones."""
    counts = summary.counts.set_index("cell_index")
    flagged = (counts["cpu_bound"] + counts["cpu_unknown"]) > 0
    return rows["cell_index"].map(flagged).fillna(False).to_numpy(dtype=bool)


def marks_caption(summary: Summary, rows: pd.DataFrame) -> str:
    """The caption's words on hatched bars and on failed runs the means leave out."""
    counts = summary.counts.set_index("cell_index").loc[rows["cell_index"].unique()]
    words = ""
    if ((counts["cpu_bound"] + counts["cpu_unknown"]) > 0).any():
        words += (
            " Hatched bars: cells whose counted runs include CPU-bound runs or runs of unknown CPU state "
            "(the tables' CPU column); their figures may measure the CPU rather than the network."
        )
    if counts["failed"].any():
        words += (
            f" {int(counts['failed'].sum())} failed run(s) ({int(counts['timed_out'].sum())} timed out) are "
            "not in the means (the tables' failed column and median with timeouts last)."
        )
    return words


def failed_text(failed: int, timed_out: int) -> str:
    """Failed runs, with how many timed out: ``3 (2 timed out)``, ``0``."""
    return (
        f"{failed} ({timed_out} timed out)"
        if timed_out and timed_out != failed
        else (f"{failed} timed out" if timed_out else str(failed))
    )


def censored_median(value: float, scale: float) -> str:
    """A median with timeouts ranked last: "timed out" when at least half the runs did."""
    return "timed out" if math.isinf(value) else number(value * scale)


def metric_table(summary: Summary, column: str) -> Table:
    """Per cell: n (completed runs counted), failed runs, mean, 95 % CI, median, the median with
    timed-out runs ranked last, std of one metric, in display units, and the cell's CPU state.
    The "±" column is the half-width, or ``−a +b`` (the ends' distances from the mean) of an
    interval cut at the metric's range."""
    rows = summary.table[summary.table["metric"] == column].sort_values("cell_index")
    counts = summary.counts.set_index("cell_index")
    body = []
    for _, row in rows.iterrows():
        cell = counts.loc[row["cell_index"]]
        interval = (
            f"[{number(row['ci_low_shown'])}, {number(row['ci_high_shown'])}]"
            if not math.isnan(row["ci_low_shown"])
            else DASH
        )
        pm = (
            minus_plus(row["mean_shown"], row["ci_low_shown"], row["ci_high_shown"])
            if _method(row) == "t-truncated"
            else number(spread(row["ci_half_width_shown"], row["mean_shown"]))
        )
        body.append(
            [
                *_cell_values(summary, row),
                str(row["n"]),
                failed_text(int(cell["failed"]), int(cell["timed_out"])),
                number(row["mean_shown"]),
                pm,
                interval,
                number(row["median_shown"]),
                censored_median(row["median_with_timeouts"], row["scale"]),
                number(spread(row["std_shown"], row["mean_shown"])),
                cpu_mark(cell) or DASH,
            ]
        )
    return Table(
        [
            *_cell_header(summary),
            "n",
            "failed",
            "mean",
            "± 95 % CI",
            "95 % CI",
            "median",
            "median, timeouts last",
            "std",
            "CPU",
        ],
        body,
    )


def overview_table(summary: Summary, metrics: list[str]) -> Table:
    """Cells as rows, the chosen metrics as columns: ``mean ± CI half-width``, or
    ``mean [CI low, CI high]`` for an interval cut at the metric's range (:func:`mean_interval`);
    beside n the failed runs, and the cell's CPU state."""
    table = summary.table
    body = []
    for _, cell in summary.counts.sort_values("cell_index").iterrows():
        values = table[table["cell_index"] == cell["cell_index"]].set_index("metric")
        shown = [
            mean_interval(
                values.loc[m, "mean_shown"],
                values.loc[m, "ci_low_shown"],
                values.loc[m, "ci_high_shown"],
                values.loc[m, "ci_half_width_shown"],
                _method(values.loc[m]),
            )
            if m in values.index and values.loc[m, "n"]
            else DASH
            for m in metrics
        ]
        body.append(
            [
                *_cell_values(summary, cell),
                str(cell["used"]),
                failed_text(int(cell["failed"]), int(cell["timed_out"])),
                *shown,
                cpu_mark(cell) or DASH,
            ]
        )
    return Table([*_cell_header(summary), "n", "failed", *(metric_heading(m) for m in metrics), "CPU"], body)


def difference(value: float, unit: str, scale: float) -> str:
    """A difference of two means in display units, signed; percentages of a share become
    percentage points ("% pts") so that they are not read as a relative change."""
    if math.isnan(value):
        return DASH
    shown = f"{'+' if value > 0 else ''}{number(value * scale)}"
    return f"{shown} {'% pts' if unit == '%' else unit}".rstrip()


def gains_table(summary: Summary, metrics: list[str]) -> Table:
    """Per other-axes value, metric and transport: the relative gain over the baseline with its
    95 % CI, or, where the baseline's mean is too uncertain to divide by (``comparison``
    "absolute"), the difference of the means in the metric's unit, with the reason."""
    gains = summary.gains[summary.gains["metric"].isin(metrics)]
    others = [column for column in summary.cell_columns[2:] if column != "transport"]
    body = []
    for _, row in gains.iterrows():
        if row.get("comparison") == "absolute":
            entry = catalogue_entry(row["metric"])
            shown = difference(row["difference"], entry.unit, entry.scale)
            interval = (
                f"[{difference(row['difference_ci_low'], entry.unit, entry.scale)}, "
                f"{difference(row['difference_ci_high'], entry.unit, entry.scale)}]"
            )
            verdict = f"{row['verdict']} ({row['note']})" if row["verdict"] else row["note"]
        else:
            shown = percent(row["gain"])
            interval = (
                f"[{percent(row['ci_low'])}, {percent(row['ci_high'])}]" if not math.isnan(row["ci_low"]) else DASH
            )
            verdict = row["verdict"] or row["note"]
        failures = (
            f"{failed_text(row['failed_transport'], row['timed_out_transport'])} vs "
            f"{failed_text(row['failed_baseline'], row['timed_out_baseline'])}"
        )
        body.append(
            [
                *(str(row[axis]) for axis in others),
                metric_heading(row["metric"]),
                str(row["transport"]),
                f"{row['n_transport']} vs {row['n_baseline']}",
                failures,
                shown,
                interval,
                verdict or DASH,
                _gain_cpu(summary, row, others),
            ]
        )
    return Table(
        [
            *others,
            "metric",
            f"transport vs {summary.baseline}",
            "n",
            "failed",
            "gain (or difference)",
            "95 % CI",
            "verdict",
            "CPU",
        ],
        body,
    )


def _gain_cpu(summary: Summary, row: pd.Series, others: list[str]) -> str:
    """The CPU state of the two cells a gain compares ("quic: CPU-bound 3/10"), or a dash."""
    counts = summary.counts
    marks = []
    for transport in (row["transport"], row["baseline"]):
        match = counts["transport"] == transport
        for axis in others:
            match &= counts[axis].astype(str) == str(row[axis])
        mark = ", ".join(filter(None, (cpu_mark(cell) for _, cell in counts[match].iterrows())))
        if mark:
            marks.append(f"{transport}: {mark}")
    return "; ".join(marks) or DASH


def gains_explanation(baseline: str) -> str:
    """How the gains table was computed, naming the baseline (the words under its heading)."""
    return (
        f"mean(transport) / mean({baseline}) − 1, with its 95 % CI from the log of the ratio (delta method, "
        f"Welch-Satterthwaite t): it never goes below −100 %. Where {baseline}'s mean is too uncertain to "
        f"divide by (its 95 % CI includes 0, or its relative standard error exceeds "
        f"{round(100 * MAX_BASELINE_RSE)} %), the row shows the difference mean(transport) − mean({baseline}) "
        "in the metric's unit with Welch's 95 % CI instead. Verdict from the CI and whether higher or lower "
        "is better."
    )


def attempts_text(invalid: int, attempts: int) -> str:
    """Invalid attempts of all completed ones: ``1 of 4 (25 %)``."""
    return f"{invalid} of {attempts}" + (f" ({round(100 * invalid / attempts)} %)" if invalid and attempts else "")


def counts_table(summary: Summary) -> Table:
    body = [
        [
            *_cell_values(summary, row),
            str(row["runs"]),
            str(row["used"]),
            str(row["cpu_bound"]),
            str(row["cpu_unknown"]),
            str(row["failed"]),
            str(row["invalid"]),
            str(row["remade"]),
            attempts_text(int(row["invalid_attempts"]), int(row["attempts"])),
            str(row["warmup"]),
        ]
        for _, row in summary.counts.sort_values("cell_index").iterrows()
    ]
    invalid = "invalid (counted)" if summary.include_invalid else "invalid (excluded)"
    return Table(
        [
            *_cell_header(summary),
            "runs",
            "counted",
            "of which CPU-bound",
            "of which CPU unknown",
            "failed",
            invalid,
            "made again",
            "invalid attempts",
            "warm-up",
        ],
        body,
    )


def clock_headline(runs: pd.DataFrame) -> str | None:
    """What the runs' clock means for their figures, when any run kept virtual time."""
    measured = runs[~runs["warmup"]]
    virtual = measured[measured["clock"] == "virtual"]
    if virtual.empty:
        return None
    if len(virtual) < len(measured):
        return (
            f"Mixed clocks: {len(virtual)} run(s) in virtual time, {len(measured) - len(virtual)} in real time. "
            "Compare them only where bench/clocks.py shows the two clocks agree (docs/clocks.md)."
        )
    kernels = ", ".join(sorted(set(virtual["kernel"]) - {""})) or "unknown"
    return (
        f"Virtual time: every run ran in quicbed's User-Mode Linux kernel ({kernels}), whose clock waits while "
        "its processes compute. No run can be CPU-bound, CPU figures are left out, and the figures are the "
        "emulated network's alone; what computing costs on a real device is not in them (docs/clocks.md)."
    )


def cpu_bound_headline(summary: Summary) -> str | None:
    """The cells whose counted runs were CPU-bound, and those with runs whose CPU state is
    unknown (one sentence each), or None when every counted run is known not to be."""
    counts = summary.counts.sort_values("cell_index")
    sentences = []
    bound = counts[counts["cpu_bound"] > 0]
    if not bound.empty:
        cells = ", ".join(
            f"{' '.join(_cell_values(summary, row))}: {row['cpu_bound']} of {row['used']}"
            for _, row in bound.iterrows()
        )
        sentences.append(
            f"CPU-bound runs (an endpoint or the ns-3 channel wanted a whole core for at least 20 % of the "
            f"transfer, or the machine was saturated): {cells}. Their figures measure the endpoints' or the "
            "machine's CPU as much as the network (docs/metrics.md, 'CPU accounting')."
        )
    unknown = counts[counts["cpu_unknown"] > 0]
    if not unknown.empty:
        cells = ", ".join(
            f"{' '.join(_cell_values(summary, row))}: {row['cpu_unknown']} of {row['used']}"
            for _, row in unknown.iterrows()
        )
        sentences.append(f"CPU state unknown (no CPU figures, or only some: it may have been CPU-bound): {cells}.")
    return " ".join(sentences) or None


def failures_headline(summary: Summary) -> str | None:
    """The cells with failed runs, which means and gains leave out, and the compared transports
    whose failures differ (one sentence each), or None when no measured run failed."""
    counts = summary.counts.sort_values("cell_index")
    with_failures = counts[counts["failed"] > 0]
    if with_failures.empty:
        return None
    cells = ", ".join(
        f"{' '.join(_cell_values(summary, row))}: {failed_text(int(row['failed']), int(row['timed_out']))}"
        f" of {row['runs'] - row['warmup']}"
        for _, row in with_failures.iterrows()
    )
    sentences = [
        f"Failed runs, left out of every mean and gain: {cells}. A timed-out download is a result (it "
        "would have taken longer than the limit): the tables' 'median, timeouts last' counts it "
        "(docs/metrics.md, 'Statistics over runs')."
    ]
    gains = summary.gains
    if not gains.empty:
        others = [column for column in summary.cell_columns[2:] if column != "transport"]
        differing = gains[gains["failed_transport"] != gains["failed_baseline"]].drop_duplicates(
            subset=[*others, "transport"]
        )
        pairs = [
            " ".join(
                [
                    *(str(row[axis]) for axis in others),
                    f"{row['transport']} {row['failed_transport']} vs {row['baseline']} {row['failed_baseline']}",
                ]
            )
            for _, row in differing.iterrows()
        ]
        if pairs:
            sentences.append(
                "The compared transports failed unequally (" + "; ".join(pairs) + "): their means "
                "compare survivors, so read the medians with timeouts last."
            )
    return " ".join(sentences)


def hosts_headline(summary: Summary) -> str | None:
    """The comparisons whose runs ran on different machines (sharding by cell can do that)."""
    gains = summary.gains
    if gains.empty or not (gains["hosts"] != "").any():
        return None
    others = [column for column in summary.cell_columns[2:] if column != "transport"]
    apart = gains[gains["hosts"] != ""].drop_duplicates(subset=[*others, "transport"])
    pairs = "; ".join(
        " ".join([*(str(row[axis]) for axis in others), f"{row['transport']} vs {row['baseline']}: {row['hosts']}"])
        for _, row in apart.iterrows()
    )
    return (
        f"Comparisons across machines: {pairs}. A difference between the hosts enters these gains (shard by "
        "an axis the comparison does not vary, or check the Hosts table; docs/multi-host.md)."
    )


def headlines(runs: pd.DataFrame, summary: Summary) -> list[str]:
    """The warnings a report puts first, in order: the clock, CPU-bound runs, failed runs,
    comparisons across machines, invalid attempts that differ from the valid runs."""
    found = (
        clock_headline(runs),
        cpu_bound_headline(summary),
        failures_headline(summary),
        hosts_headline(summary),
        rerun_bias_headline(summary),
    )
    return [headline for headline in found if headline]


def rerun_bias_warnings(summary: Summary) -> list[str]:
    """One sentence per cell whose invalid attempts' mean of the bias metric lies outside the
    95 % CI of its valid runs: the runs kept may lean (summary.rerun_bias)."""
    if summary.bias.empty or summary.bias_metric is None:
        return []
    entry = catalogue_entry(summary.bias_metric)
    unit = f" {entry.unit}" if entry.unit else ""
    lines = []
    for _, row in summary.bias[summary.bias["outside"]].sort_values("cell_index").iterrows():
        lines.append(
            f"{' '.join(_cell_values(summary, row))}: {row['n_invalid']} invalid attempt(s) averaged "
            f"{number(entry.show(row['mean_invalid']))}{unit}, the {row['n_valid']} valid runs "
            f"{number(entry.show(row['mean_valid']))} [{number(entry.show(row['ci_low']))}, "
            f"{number(entry.show(row['ci_high']))}]{unit}"
        )
    return lines


def rerun_bias_headline(summary: Summary) -> str | None:
    """The warning the report puts first when invalid attempts differ from the valid runs."""
    cells = rerun_bias_warnings(summary)
    if not cells:
        return None
    label = catalogue_entry(summary.bias_metric or "").label
    return (
        f"Invalid attempts differ from the valid runs in {label} (their mean outside the valid runs' 95 % CI): "
        + "; ".join(cells)
        + ". Only valid runs count and invalid ones are made again, so these cells may lean "
        "towards the runs that stayed valid (docs/metrics.md, 'Statistics over runs')."
    )
