# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Drafting from a Python thread pool: the GIL is released in C++, results equal sequential drafting."""

import random
from concurrent.futures import ThreadPoolExecutor

import refdec

VOCAB = 500


def workload(seed):
    rng = random.Random(seed)
    prompt = [rng.randrange(VOCAB) for _ in range(300)]
    prompt += prompt[50:250]
    return prompt


def drive(drafter, prompt, steps=40):
    """Begin, then per step draft 64 nodes and accept the first two tokens of the deepest path."""
    drafter.begin(prompt[:200], [prompt])
    trees = []
    pos = 200
    for _ in range(steps):
        tree = drafter.draft(prompt[pos - 1], 64, VOCAB)
        trees.append(tree.tokens)
        drafter.accept(prompt[pos:pos + 2])
        pos += 2
    return trees


def make(kind):
    return {"llma": lambda: refdec.LlmaDrafter(continuation=16, spans=4, self_reference=True),
            "trie": lambda: refdec.NgramTrieDrafter(ngram=8, max_nodes=64),
            "mixture": lambda: refdec.MixtureDrafter([refdec.LlmaDrafter(continuation=16), refdec.NgramTrieDrafter()])}[kind]()


def test_thread_pool_drafting_equals_sequential():
    jobs = [(kind, seed) for kind in ("llma", "trie", "mixture") for seed in range(6)]
    sequential = [drive(make(kind), workload(seed)) for kind, seed in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda job: drive(make(job[0]), workload(job[1])), jobs))
    assert parallel == sequential


def test_one_drafter_shared_by_threads_serialises_its_calls():
    d = refdec.LlmaDrafter(continuation=16, self_reference=True)
    prompt = workload(1)
    d.begin(prompt)
    with ThreadPoolExecutor(max_workers=4) as pool:
        trees = list(pool.map(lambda _: d.draft(prompt[-1], 32, VOCAB).tokens, range(64)))
    assert all(t == trees[0] for t in trees)
    assert d.stats.steps == 64
