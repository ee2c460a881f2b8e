#!/usr/bin/env python3
# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The Python binding's own overhead per step: the engine loop of bench/python_overhead_bench.cpp
(per sequence LLMA drafts a 64-node tree; plan; greedy walk against a stand-in target; keep plan;
accept) driven from Python, against the same loop in C++, at batch 1 and 16. The stand-in target
(the true next token at each row's position, a numpy gather) is the "model" and is timed apart.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/overhead.py build/bench/refdec_python_overhead_bench

Prints a markdown table (docs/python.md). --steps N --repeats N shorten it (CI smoke test).
"""

import argparse
import json
import math
import statistics
import subprocess
import sys
import time

import numpy as np

import refdec

VOCAB, PROMPT, TEXT, BUDGET = 2000, 4096, 4096 + 4096, 64


def lcg_text(length: int, seed: int) -> list[int]:
    """bench/python_overhead_bench.cpp's lcg_text(), token for token."""
    state = seed
    mask = (1 << 64) - 1

    def nxt() -> int:
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        return state >> 33

    out: list[int] = []
    while len(out) < length:
        if nxt() % 3 == 0 and len(out) > 64:
            n = 8 + nxt() % 57
            start = nxt() % (len(out) - n)
            out += out[start:start + n]
        else:
            for _ in range(1 + nxt() % 16):
                u = (nxt() % 1000000) / 1e6
                out.append(math.floor(math.pow(VOCAB, u)) - 1)
    return out[:length]


def python_loop(batch: int, steps: int) -> tuple[float, float, float]:
    """Microseconds per step of the binding path (stand-in excluded), rows and tokens per step."""
    truth = [lcg_text(TEXT, 100 + b) for b in range(batch)]
    truth_a = np.array(truth, dtype=np.int64)  # [B, TEXT]
    drafters = [refdec.LlmaDrafter(min_match=1, continuation=32, spans=8, self_reference=True) for _ in range(batch)]
    trees = [refdec.LinearTree() for _ in range(batch)]
    plan, keep = refdec.StepPlan(), refdec.KeepPlan()

    def restart() -> list[int]:
        for b in range(batch):
            drafters[b].begin(truth[b][:PROMPT])
        return [PROMPT - 1] * batch

    lengths = restart()
    spent, rows, tokens = 0, 0, 0
    clock = time.perf_counter_ns
    for _ in range(steps):
        if max(lengths) + BUDGET + 2 >= TEXT:
            lengths = restart()
        t0 = clock()
        for b in range(batch):
            drafters[b].draft(truth[b][lengths[b]], BUDGET, VOCAB, tree=trees[b], root_position=lengths[b])
        refdec.plan_step(trees, lengths, VOCAB, out=plan)
        t1 = clock()
        # The stand-in model: the true token after each row's position.
        seq = np.repeat(np.arange(batch), np.diff(plan.indptr))
        targets = truth_a[seq, plan.positions + 1]
        t2 = clock()
        accepted = refdec.accept_greedy(plan, targets)
        refdec.keep_accepted(plan, accepted, out=keep)
        for b in range(batch):
            drafters[b].accept(accepted[b].tokens)
        lengths = keep.lengths.tolist()
        t3 = clock()
        spent += (t1 - t0) + (t3 - t2)
        rows += plan.num_rows
        tokens += sum(len(a.tokens) for a in accepted)
    return spent / steps / 1e3, rows / steps, tokens / steps / batch


def cxx_loop(binary: str, min_time: float) -> dict[int, tuple[float, float, float]]:
    out = subprocess.run([binary, "--benchmark_format=json", f"--benchmark_min_time={min_time}"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for bench in json.loads(out)["benchmarks"]:
        batch = int(bench["name"].split("/")[1])
        result[batch] = (bench["real_time"], bench["rows_per_step"], bench["tokens_per_step"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cxx_bench", help="path of refdec_python_overhead_bench")
    parser.add_argument("--steps", type=int, default=3000, help="steps per repeat at batch 1 (batch 16: a tenth)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats; the median is reported")
    args = parser.parse_args()
    cxx = cxx_loop(args.cxx_bench, 0.5 if args.steps >= 1000 else 0.001)
    print("| batch | rows per step | tokens per step per sequence | C++ µs per step | Python µs per step | added by Python, µs per step |")
    print("|---|---|---|---|---|---|")
    for batch in (1, 16):
        steps = max(1, args.steps // (1 if batch == 1 else 10))
        runs = [python_loop(batch, steps) for _ in range(args.repeats)]
        py_us = statistics.median(r[0] for r in runs)
        c_us, c_rows, c_tokens = cxx[batch]
        _, rows, tokens = runs[0]
        print(f"| {batch} | {rows:.1f} | {tokens:.2f} | {c_us:.1f} | {py_us:.1f} | {py_us - c_us:.1f} |")
        if args.steps >= 1000 and abs(rows - c_rows) > 0.05 * c_rows:
            print(f"warning: Python planned {rows:.1f} rows per step, C++ {c_rows:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
