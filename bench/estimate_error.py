#!/usr/bin/env python3
"""The error over time of the progress estimate (the --hist column estimated_total).

Runs each tree once with --hist and prints, at 10%, 25%, 50%, 75% and 90% of the run's wall
time, the estimated total against the true one: its error, or "unknown" when bts said it could
not support a figure, and whether the true total lay within the shown ±2 standard errors. The
error of an estimate does not depend on the machine's speed, only on the probes taken, so a
noisy machine is fine.

    cargo build --release && python3 bench/estimate_error.py [--mode budget|polling] [--workers N] [--long]
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile

TREES = [
    ("uts --preset T1L", ["uts", "--preset", "T1L"]),
    ("uts --preset T3L", ["uts", "--preset", "T3L"]),
    ("gw --delta 10 --seed 119440", ["gw", "--delta", "10", "--seed", "119440"]),
    ("queens --n 15", ["queens", "--n", "15"]),
]
# Longer runs: more time for probes.
LONG = [
    ("uts --preset T1XL", ["uts", "--preset", "T1XL"]),
    ("queens --n 16", ["queens", "--n", "16"]),
]
POINTS = [0.10, 0.25, 0.50, 0.75, 0.90]


def run(binary, tree, mode, workers, hist):
    cmd = [binary, "run", "--progress", "never", "--count-only", "--mode", mode,
           "--workers", str(workers), "--hist", hist] + tree
    done = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr}")
    with open(hist) as f:
        return list(csv.DictReader(f))


def cell(row, exact):
    if not row["estimated_total"]:
        return "unknown"
    total, se = float(row["estimated_total"]), float(row["estimated_std_error"])
    inside = "" if abs(total - exact) <= 2 * se else " (outside ±2σ)"
    return f"{100 * (total / exact - 1):+.1f}% ±{100 * 2 * se / total:.0f}%{inside}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--long", action="store_true", help="T1XL and queens 16 instead")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "bts"))
    args = parser.parse_args()
    header = "| tree | run (s) | " + " | ".join(f"at {int(100 * p)}% of the time" for p in POINTS)
    header += " | shown a figure | figures within ±2σ |"
    print(f"mode {args.mode}, {args.workers} workers: estimated total vs the exact count (±: twice the standard error)\n")
    print(header)
    print("|" + " --- |" * (len(POINTS) + 4))
    with tempfile.TemporaryDirectory() as tmp:
        for name, tree in LONG if args.long else TREES:
            rows = run(args.bin, tree, args.mode, args.workers, os.path.join(tmp, "h.csv"))
            exact = float(rows[-1]["nodes"])
            end = float(rows[-1]["elapsed_s"])
            cells = []
            for p in POINTS:
                row = next(r for r in rows if float(r["elapsed_s"]) >= p * end)
                cells.append(cell(row, exact))
            # The last row, after the end, always holds the exact total: leave it out.
            figures = [r for r in rows[:-1] if r["estimated_total"]]
            shown = len(figures) / max(1, len(rows) - 1)
            inside = [r for r in figures
                      if abs(float(r["estimated_total"]) - exact) <= 2 * float(r["estimated_std_error"])]
            honest = f"{100 * len(inside) / len(figures):.0f}%" if figures else "-"
            print(f"| `{name}` | {end:.1f} | " + " | ".join(cells) + f" | {100 * shown:.0f}% of the time | {honest} |")


if __name__ == "__main__":
    main()
