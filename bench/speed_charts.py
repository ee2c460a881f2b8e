#!/usr/bin/env python3
# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The charts of docs/speed.md, from refdec-speed-bench --json files (Python's standard library and
gnuplot, Debian's gnuplot-nox):

  speedup_vs_budget.png  forced-trajectory speedup over plain decoding against the draft budget, per
                         drafter (overall) and, for the mixture, per category
  step_cost.png          step cost against tokens per step, with the roofline's one-token step
  batch_sweep.png        plain and speculative tokens/s per batch size
  live_batch_sweep.png   the live batch sweep (--live-batches): tokens/s per batch size of plain
                         decoding, fixed budgets, the per-request adaptive budget and the batch budget,
                         one panel per dataset

Usage: speed_charts.py OUT_DIR RUN.json [RUN.json ...]   (the CMake target speed-charts runs it)
"""
import json
import os
import subprocess
import sys
import tempfile

BUDGETS = [4, 8, 16, 32, 64]


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    return runs


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(str(x) for x in r) + "\n")


def forced_rows(runs):
    """The forced-trajectory rows, each (dataset, drafter) from the first run that has it."""
    rows, owner = [], {}
    for k, run in enumerate(runs):
        for r in run.get("forced", []):
            key = (r["dataset"], r["trajectories"].split(" @")[0])
            if owner.setdefault(key, k) == k:
                rows.append(r)
    return rows


def speedup_data(rows, tmp):
    """One data file per (dataset, drafter) curve of (budget, overall speedup); plot clauses."""
    clauses = []
    for dataset in sorted({r["dataset"] for r in rows}):
        mine = [r for r in rows if r["dataset"] == dataset]
        cats = {r["category"] for r in mine}
        column = "overall" if "overall" in cats else sorted(cats)[0]  # one category: no "overall"
        for d in sorted({r["trajectories"].split(" @")[0] for r in mine}):
            pts = [(b, r["speedup"]) for b in BUDGETS for r in mine
                   if r["trajectories"] == f"{d} @{b}" and r["category"] == column]
            if pts:
                f = os.path.join(tmp, f"{dataset}-{len(clauses)}.dat")
                write(f, pts)
                clauses.append(f"'{f}' using 1:2 with linespoints title '{dataset} {d.split('(')[0]}'")
    return clauses


def category_data(rows, tmp, drafter="mixture"):
    """The mixture's (budget, speedup) per category of the datasets that have several."""
    clauses = []
    for dataset in sorted({r["dataset"] for r in rows}):
        mine = [r for r in rows if r["dataset"] == dataset and r["trajectories"].startswith(drafter)]
        for cat in sorted({r["category"] for r in mine} - {"overall"}):
            pts = [(b, r["speedup"]) for b in BUDGETS for r in mine
                   if r["trajectories"].endswith(f" @{b}") and r["category"] == cat]
            if len(pts) > 1:
                f = os.path.join(tmp, f"cat-{len(clauses)}.dat")
                write(f, pts)
                clauses.append(f"'{f}' using 1:2 with linespoints title '{dataset} {cat}'")
    return clauses


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], load(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    head = "set terminal pngcairo noenhanced size 1000,620 font 'sans,10'\nset grid\nset key outside right\n"
    with tempfile.TemporaryDirectory() as tmp:
        rows = forced_rows(runs)
        drafters = speedup_data(rows, tmp)
        cats = category_data(rows, tmp)
        if drafters:
            gnuplot(head + f"set output '{out}/speedup_vs_budget.png'\nset multiplot layout 2,1\n"
                    "set logscale x 2\nset xlabel 'draft budget (nodes per step)'\nset ylabel 'speedup over plain'\n"
                    "set title 'forced trajectories, batch 1: per drafter (overall)'\n"
                    f"plot 1 with lines dt 2 lc 'black' title 'plain', {', '.join(drafters)}\n"
                    "set title 'mixture, per category'\nset key outside right font ',8'\n"
                    f"plot 1 with lines dt 2 lc 'black' title 'plain', {', '.join(cats) if cats else 'NaN notitle'}\n"
                    "unset multiplot\n")
        cost = next((r for r in runs if r.get("step_cost")), None)
        if cost:
            f = os.path.join(tmp, "cost.dat")
            write(f, [(n, 1e3 * s) for n, s in cost["step_cost"]])
            roof = 1e3 / cost["roofline_tokens_per_s"]
            gnuplot(head + f"set output '{out}/step_cost.png'\nset xlabel 'tokens per step'\n"
                    "set ylabel 'ms per step'\nset yrange [0:*]\n"
                    f"set title '{cost['shape']} {cost['dtype']} on {cost['device']}: step cost against the roofline'\n"
                    f"plot '{f}' using 1:2 with linespoints title 'measured step', "
                    f"{roof} with lines dt 2 title 'roofline: one-token step (bytes / read bandwidth)'\n")
        sweep = max(runs, key=lambda r: len(r.get("batch_sweep", [])))
        if len(sweep.get("batch_sweep", [])) > 1:
            f = os.path.join(tmp, "sweep.dat")
            write(f, [(r["batch"], r["plain_tokens_per_s"], r["speculative_tokens_per_s"]) for r in sweep["batch_sweep"]])
            gnuplot(head + f"set output '{out}/batch_sweep.png'\nset logscale x 2\nset xlabel 'batch'\n"
                    "set ylabel 'tokens/s (this machine; compare the two lines only)'\nset yrange [0:*]\n"
                    "set title 'batch sweep: budget chosen per batch size by a measured trial'\n"
                    f"plot '{f}' using 1:2 with linespoints title 'plain', '' using 1:3 with linespoints title 'speculative'\n")
        live = max(runs, key=lambda r: sum(len(v) for v in r.get("live_batch_sweep", {}).values()))
        if live.get("live_batch_sweep"):
            panels = []
            for k, (dataset, entries) in enumerate(sorted(live["live_batch_sweep"].items())):
                names = list(dict.fromkeys(e["row"] for e in entries))  # in the run's order
                plots = []
                for j, name in enumerate(names):
                    f = os.path.join(tmp, f"live_{k}_{j}.dat")
                    write(f, [(e["batch"], e["tokens_per_s"]) for e in entries if e["row"] == name])
                    plots.append(f"'{f}' using 1:2 with linespoints title '{name}'")
                panels.append(f"set title 'live batch sweep, {dataset}'\nplot {', '.join(plots)}\n")
            gnuplot(head + f"set output '{out}/live_batch_sweep.png'\nset multiplot layout {len(panels)},1\n"
                    "set logscale x 2\nset xlabel 'batch'\nset ylabel 'tokens/s (this machine)'\nset yrange [0:*]\n"
                    + "".join(panels) + "unset multiplot\n")


if __name__ == "__main__":
    main()
