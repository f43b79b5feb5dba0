"""Draw docs/figures/bquic-map.svg: BQUIC's goodput gain over a finely paced QUIC, with its
95 % interval, in every cell of the E1 map's results folders.

    python docs/figures/bquic_map.py FOLDER... [--out docs/figures/bquic-map.svg]
    python docs/figures/bquic_map.py FOLDER... --out docs/figures/bquic-weak-client.svg

Each folder is a `quicbed run experiments/e1-bquic-map.yaml ...` (against quic-fine-native,
2 packets per release) or `e1-weak-client.yaml ...` (against quic-pace1, 1 packet) results
folder, read from its gains.csv; a cell is labelled by the settings that differ from the E1
cell (MCS 7, server 3 ms behind the AP, one station, a FIFO AP, A-MPDU on, a client as fast as
this host), and by the QUIC it is measured against when the folders differ in that. The
figure's caption in docs/studies.md names the folders, their commands and dates.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

BASELINE_CELL = {
    "params.mcs": "7",
    "params.wired_delay": "3ms",
    "params.queue": "fifo",
    "params.ampdu": "True",
    "stress.cpu_quota": "none",
    "stress.client_device": "none",
}
SETTING_WORDS = {
    "params.mcs": "MCS {}",
    "params.wired_delay": "server {} away",
    "params.queue": "{} AP",
    "params.ampdu": "A-MPDU {}",
    "competitor.transport": "beside a {} download",
    "stress.cpu_quota": "client CPU quota {}",
    "stress.client_device": "client {}",
}
#: the QUIC BQUIC is measured against: in a row's label, and in the axis's when it is the only one
PACERS = {
    "quic-fine-native": ("the 2-packet pacer", "QUIC paced 2 packets at a time"),
    "quic-pace1": ("the 1-packet pacer", "QUIC paced 1 packet at a time"),
    "quic": ("aioquic's own pacer", "aioquic's QUIC"),
}
TARGETS = ("bquic-native", "bquic")
GAIN_LINE = 0.10  # the study's question: where does BQUIC gain more than 10 %?


def cells(folder: Path) -> list[tuple[str, str, float, float, float]]:
    """(label, baseline, gain, low, high) of BQUIC against the baseline in each cell of a
    folder; the label ends with the cell's runs per transport."""
    metadata = json.loads((folder / "metadata.json").read_text())
    params = (metadata.get("experiment") or {}).get("topology", {}).get("params", {})
    stations = int(params.get("stations", 1))
    found = []
    with open(folder / "gains.csv") as handle:
        for row in csv.DictReader(handle):
            if row["metric"] != "goodput" or row["transport"] not in TARGETS or not row["gain"]:
                continue
            words = [
                SETTING_WORDS[key].format("off" if value == "False" else value)
                for key, value in row.items()
                if key in SETTING_WORDS and value and BASELINE_CELL.get(key) != value
            ]
            if row["transport"] == "bquic":  # (aioquic's; the others are quinn's)
                words.append("aioquic")
            if stations > 1:
                words.append(f"{stations} stations")
            label = f"{', '.join(words) or 'E1 cell'} ({row['n_transport']} runs)"
            gain = (float(row["gain"]), float(row["ci_low"]), float(row["ci_high"]))
            found.append((label, row["baseline"], *gain))
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
    baselines = sorted({row[1] for _, rows in found for row in rows})
    # a cell measured in two folders is told apart by its folder, and against which QUIC
    rows = [
        (
            (f"{row[0]}, {folder.name}" if labels.count(row[0]) > 1 else row[0])
            + (f", against {PACERS.get(row[1], (row[1],))[0]}" if len(baselines) > 1 else ""),
            *row[2:],
        )
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
    against = f" over {PACERS.get(baselines[0], ('', baselines[0]))[1]}" if len(baselines) == 1 else ""
    axes.set_xlabel(f"BQUIC's goodput gain{against}\n(%, 95 % interval; dashed: +10 %)")
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(args.out, metadata={"Date": None})
    print(f"{args.out}: {len(rows)} cells from {len(args.folders)} folders")


if __name__ == "__main__":
    main()
