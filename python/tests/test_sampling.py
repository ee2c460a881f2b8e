# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Sampling options, the logits processor, token counts, the counter-based uniform, step costs."""

import numpy as np
import pytest

import refdec


def test_sampling_options():
    o = refdec.SamplingOptions()
    assert (o.temperature, o.top_k, o.top_p, o.min_p, o.seed) == (1.0, 0, 1.0, 0.0, 0)
    assert not o.is_greedy and not o.has_penalties
    o = refdec.SamplingOptions(temperature=0.0, repetition_penalty=1.2, seed=9)
    assert o.is_greedy and o.has_penalties and o.seed == 9
    o.top_k = 3
    assert o.top_k == 3
    with pytest.raises(ValueError, match="top_p must be in \\(0, 1\\], got 0"):
        refdec.SamplingOptions(top_p=0.0).validate()
    with pytest.raises(ValueError, match="temperature"):
        refdec.LogitsProcessor(refdec.SamplingOptions(temperature=-1.0))


def test_uniform_is_a_pure_function():
    a = [refdec.uniform(3, k) for k in range(100)]
    assert a == [refdec.uniform(3, k) for k in range(100)] and all(0 <= u < 1 for u in a)
    assert a != [refdec.uniform(4, k) for k in range(100)]
    assert 0.4 < sum(a) / len(a) < 0.6


def test_processor_and_counts():
    counts = refdec.TokenCounts(8)
    counts.add_prompt([1, 2])
    counts.add_output([3, 3])
    assert counts.vocab_size == 8 and counts.in_prompt(1) and not counts.in_prompt(3)
    assert counts.output_count(3) == 2 and counts.present == [1, 2, 3]
    greedy = refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.0))
    row = np.array([0.0, 5.0, 1.0, 5.0, 0, 0, 0, 0], dtype=np.float32)
    greedy.process(row, counts)
    assert row.tolist() == [0, 1, 0, 0, 0, 0, 0, 0]  # the first maximum, in place
    p = refdec.LogitsProcessor(refdec.SamplingOptions(top_k=2, seed=1))
    assert p.options.top_k == 2
    logits = np.array([0.0, 3.0, 2.0, -1.0, 0, 0, 0, 0], dtype=np.float32)
    draws = {p.sample(logits.copy(), counts, k) for k in range(50)}
    assert draws == {1, 2}
    row = logits.copy()
    p.process(row, counts, [5])
    assert abs(float(row.sum()) - 1.0) < 1e-6 and float(row[1]) > float(row[2]) > 0
    assert refdec.sample_from_probs(np.array([0.0, 0.0, 1.0], dtype=np.float32), 0.3) == 2
    assert refdec.sample_from_probs(np.zeros(3, dtype=np.float32), 0.3) == -1
    with pytest.raises(ValueError, match="outside the vocabulary"):
        counts.add_output([8])
    with pytest.raises(ValueError, match="float32"):
        p.process(np.zeros(8), counts)
    frozen = np.zeros(8, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="expected a writable contiguous 1-D float32"):
        p.process(frozen, counts)


def test_torch_rows_are_processed_in_place(torch):
    counts = refdec.TokenCounts(4)
    row = torch.tensor([0.0, 2.0, 7.0, 1.0])
    refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.0)).process(row, counts)
    assert row.tolist() == [0, 0, 1, 0]
    assert refdec.sample_from_probs(torch.tensor([0.0, 1.0, 0.0]), 0.5) == 1
    with pytest.raises(ValueError, match="float32"):
        refdec.sample_from_probs(torch.ones(3, dtype=torch.float64), 0.5)


def test_step_cost_and_budget():
    assert refdec.StepCost().is_flat and refdec.StepCost.flat().seconds(100) == 1.0
    assert refdec.StepCost.affine(1.0, 0.5).seconds(3) == pytest.approx(2.5)
    c = refdec.StepCost.calibrated([(1, 1.0), (10, 2.0)])
    assert c.seconds(5) == pytest.approx(1.0 + 4 / 9) and not c.is_flat
    assert [refdec.step_budget(room, 16) for room in (0, 1, 5, 100)] == [0, 0, 4, 16]
    with pytest.raises(ValueError, match="fixed cost"):
        refdec.StepCost.affine(0.0, 1.0)
