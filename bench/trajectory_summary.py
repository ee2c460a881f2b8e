#!/usr/bin/env python3
# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Per category of refdec-replay --trajectories files: draft nodes kept per step, tau, and the
speedup over plain decoding that a step cost predicts (tokens x cost(1) / sum of cost(1 + nodes)).

usage: trajectory_summary.py COST.json TRAJECTORIES.json...
COST.json is a refdec-speed-bench --json file; its "step_cost" (tokens, seconds) pairs are read as
StepCost::calibrated reads them: repeats averaged, made non-decreasing, linear in between, held
below the first, extended with the last segment's slope above the last."""

import bisect
import json
import sys
from collections import defaultdict


def step_cost(path):
    by_tokens = defaultdict(list)
    for tokens, seconds in json.load(open(path))["step_cost"]:
        by_tokens[tokens].append(seconds)
    table = []
    for tokens in sorted(by_tokens):
        mean = sum(by_tokens[tokens]) / len(by_tokens[tokens])
        table.append((tokens, mean if not table else max(mean, table[-1][1])))
    xs = [t for t, _ in table]

    def cost(x):
        if x <= xs[0] or len(table) == 1:
            return table[0][1]
        i = min(max(bisect.bisect_left(xs, x), 1), len(table) - 1)
        (x0, y0), (x1, y1) = table[i - 1], table[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)

    return cost


def summary(path, cost):
    sums = defaultdict(lambda: [0, 0, 0, 0.0])  # nodes, steps, tokens, seconds
    for trace in json.load(open(path))["traces"]:
        s = sums[trace["category"]]
        for nodes, accepted in trace["steps"]:
            s[0] += nodes
            s[1] += 1
            s[3] += cost(1 + nodes)
        # The output's length, as the replay counts tau (its last step may emit fewer tokens than
        # it accepted, at the end of the output); the steps' own sum without it.
        s[2] += trace.get("output_tokens", sum(accepted + 1 for _, accepted in trace["steps"]))
    sums["overall"] = [sum(s[i] for s in list(sums.values())) for i in range(4)]
    return {c: (s[0] / s[1], s[2] / s[1], s[2] * cost(1) / s[3]) for c, s in sums.items() if s[1] > 0}


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    for path in argv[1:]:
        try:
            open(path).close()
        except OSError as e:
            sys.exit(f"trajectory_summary: {path} not found ({e.strerror})")
    cost = step_cost(argv[1])
    tables = [summary(p, cost) for p in argv[2:]]
    print("| category | " + " | ".join(p.rsplit("/", 1)[-1] + ": nodes / τ / speedup" for p in argv[2:]) + " |")
    print("|---|" + "---|" * len(tables))
    for category in tables[0]:
        cells = [f"{t[category][0]:.2f} / {t[category][1]:.3f} / {t[category][2]:.2f}x" if category in t else "" for t in tables]
        print(f"| {category} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv)
