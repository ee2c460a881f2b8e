# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The pure-PyTorch engine example: greedy output equals plain greedy decoding (its own budget 0 and
refdec's C++ Session), sampled output the C++ Session's plain sampling for the same seed."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("refdec._torch", reason="refdec was built without refdec._torch")

import pytorch_engine as engine  # noqa: E402
import refdec  # noqa: E402


def check(path, max_new_tokens, drafters, references=None, prompts=None):
    model = engine.Llama2c(path)
    prompts = prompts or [[1], [1, 5, 7, 5, 7], [1, 9, 9, 9]]
    cxx = engine.session_decode(path, prompts, max_new_tokens)
    plain = engine.decode(model, prompts, [refdec.NoDrafter() for _ in prompts], 0, max_new_tokens)
    assert plain == cxx
    refs = references or [[] for _ in prompts]
    spec = engine.decode(model, prompts, drafters(), 16, max_new_tokens, references=refs)
    assert spec == plain
    sampling = [refdec.SamplingOptions(temperature=1.0, top_k=40, seed=3 + b) for b in range(len(prompts))]
    sampled = engine.decode(model, prompts, drafters(), 16, max_new_tokens, references=refs, sampling=sampling)
    assert sampled == engine.session_decode(path, prompts, max_new_tokens, sampling=sampling)
    return plain


def every_drafter():
    return [refdec.LlmaDrafter(continuation=8, spans=2, self_reference=True), refdec.LookaheadDrafter(window=4, ngram=3, guesses=4),
            refdec.MixtureDrafter([refdec.LlmaDrafter(self_reference=True), refdec.NgramTrieDrafter(ngram=6)])]


def test_random_checkpoint_is_lossless(tiny_checkpoint):
    plain = check(tiny_checkpoint, 40, every_drafter)
    assert all(len(p) == 40 for p in plain)


def test_step_mask_unpacks_the_packed_bits():
    t = refdec.DraftTree()
    for i in range(70):
        t.insert([i % 7, i], 1.0)
    tree = t.linearize(1, 100)
    plan = refdec.plan_step([refdec.LinearTree.chain([1, 2]), tree], [0, 3])
    mask = engine.step_mask(plan, 1)
    assert mask.shape == (tree.size, tree.size)
    assert all(bool(mask[i, j]) == tree.attends(i, j) for i in range(tree.size) for j in range(tree.size))


def test_stories260k_is_lossless(stories_path):
    model = engine.Llama2c(stories_path)
    first = engine.decode(model, [[1]], [refdec.NoDrafter()], 0, 128)[0]
    plain = check(stories_path, 128, every_drafter, references=[[first], [first], []],
                  prompts=[[1], [1] + first[:5], [1] + first[20:23]])
    assert plain[0] == first
    drafters = [refdec.LlmaDrafter(continuation=16, self_reference=True)]
    assert engine.decode(model, [[1]], drafters, 16, 128, references=[[first]])[0] == first
    assert drafters[0].stats.steps < 40  # a cached answer: most of it accepted per step
