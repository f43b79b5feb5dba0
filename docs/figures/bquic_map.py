"""Draw docs/figures/bquic-map.svg: BQUIC's goodput gain over QUIC paced 2 packets at a time,
with its 95 % interval, in every cell of the e1-bquic-map study's results folders.

    python docs/figures/bquic_map.py FOLDER... [--out docs/figures/bquic-map.svg]

Each folder is a `quicbed run experiments/e1-bquic-map.yaml ...` results folder (its
gains.csv against quic-fine-native); a cell is labelled by the settings that differ from
the E1 cell (MCS 7, server 3 ms behind the AP, one station, a FIFO AP). The figure's caption
in docs/studies.md names the folders, their commands and dates.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

BASELINE_CELL = {"params.mcs": "7", "params.wired_delay": "3ms", "params.queue": "fifo", "stress.cpu_quota": "none"}
SETTING_WORDS = {
    "params.mcs": "MCS {}",
    "params.wired_delay": "server {} away",
    "params.queue": "{} AP",
    "competitor.transport": "beside a {} download",
    "stress.cpu_quota": "client CPU quota {}",
}
TARGET = "bquic-native"
GAIN_LINE = 0.10  # the study's question: where does BQUIC gain more than 10 %?


def cells(folder: Path) -> list[tuple[str, float, float, float]]:
    """(label, gain, low, high) of TARGET against the baseline in each cell of a folder; the
    label ends with the cell's runs per transport."""
    metadata = json.loads((folder / "metadata.json").read_text())
    params = (metadata.get("experiment") or {}).get("topology", {}).get("params", {})
    stations = int(params.get("stations", 1))
    found = []
    with open(folder / "gains.csv") as handle:
        for row in csv.DictReader(handle):
            if row["metric"] != "goodput" or row["transport"] != TARGET or not row["gain"]:
                continue
            words = [
                SETTING_WORDS[key].format(value)
                for key, value in row.items()
                if key in SETTING_WORDS and value and BASELINE_CELL.get(key) != value
            ]
            if stations > 1:
                words.append(f"{stations} stations")
            label = f"{', '.join(words) or 'E1 cell'} ({row['n_transport']} runs)"
            found.append((label, float(row["gain"]), float(row["ci_low"]), float(row["ci_high"])))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("bquic-map.svg"))
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = [(folder, cells(folder)) for folder in args.folders]
    labels = [row[0] for _, rows in found for row in rows]
    # a cell measured in two folders is told apart by its folder
    rows = [
        (f"{row[0]}, {folder.name}" if labels.count(row[0]) > 1 else row[0], *row[1:])
        for folder, folder_rows in found
        for row in folder_rows
    ]
    rows.sort(key=lambda row: row[1])
    figure, axes = plt.subplots(figsize=(9, 0.38 * len(rows) + 1.2))
    for y, (_label, gain, low, high) in enumerate(rows):
        colour = "#cc79a7" if low > GAIN_LINE else ("#e69f00" if gain > GAIN_LINE else "#0072b2")
        axes.errorbar(
            100 * gain, y, xerr=[[100 * (gain - low)], [100 * (high - gain)]], fmt="o", color=colour, capsize=3
        )
    axes.set_yticks(range(len(rows)), [row[0] for row in rows])
    axes.axvline(0, color="black", linewidth=0.8)
    axes.axvline(100 * GAIN_LINE, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xlabel("BQUIC's goodput gain over QUIC paced 2 packets at a time\n(%, 95 % interval; dashed: +10 %)")
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(args.out, metadata={"Date": None})
    print(f"{args.out}: {len(rows)} cells from {len(args.folders)} folders")


if __name__ == "__main__":
    main()
