# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The StepDriver from Python: the step protocol around an engine's own forward pass."""

import numpy as np
import pytest

import refdec

VOCAB = 23


def target(token, position):
    """A stand-in model: the next token after `token` at `position` (short cycles, so drafts pay)."""
    return (token * 7 + position * 3) % 11 + 3


def plain(prompt, n):
    seq = list(prompt)
    for _ in range(n):
        seq.append(target(seq[-1], len(seq) - 1))
    return seq[len(prompt):]


def drive(driver, forward=None):
    """Runs the driver to the end with greedy acceptance; returns outputs and finish reasons by id."""
    outputs, finished = {}, {}
    while not driver.idle:
        if driver.prepare():
            plan = driver.plan
            targets = np.array([target(t, p) for t, p in zip(plan.tokens.tolist(), plan.positions.tolist())])
            assert len(driver.prefill) == plan.batch == driver.active == len(driver.ids)
            driver.complete_greedy(targets)
            assert driver.keep.batch == plan.batch
            assert driver.left == sorted(driver.left, reverse=True)
        for u in driver.updates:
            outputs.setdefault(u.id, []).extend(u.tokens)
            if u.finished is not None:
                finished[u.id] = u.finished
    return outputs, finished


def test_step_driver_decodes_like_plain_decoding():
    driver = refdec.StepDriver(VOCAB, 64, prefill_chunk=2)
    drafter = refdec.LlmaDrafter(min_match=1, continuation=8, self_reference=True)
    a = driver.add([1, 4, 5, 6, 7], drafter=drafter, max_new_tokens=30, budget=8)
    b = driver.add([1], max_new_tokens=15)
    c = driver.add([1], max_new_tokens=0)  # takes no slot, reported by the next prepare()
    assert (a, b, c) == (0, 1, 2) and driver.active == 2 and driver.ids == [0, 1]
    with pytest.raises(ValueError, match="in use by a Session or StepDriver request"):
        drafter.begin([1], [])
    outputs, finished = drive(driver)
    assert outputs[a] == plain([1, 4, 5, 6, 7], 30)
    assert outputs[b] == plain([1], 15)
    assert finished == {a: refdec.FinishReason.max_new_tokens, b: refdec.FinishReason.max_new_tokens,
                        c: refdec.FinishReason.max_new_tokens}
    stats = driver.stats
    assert stats.tokens == 45 and stats.prefill_tokens == 4
    assert stats.tokens_per_step > 1.0 and stats.drafting.accepted_tokens > 0
    assert drafter.stats.accepted_tokens == stats.drafting.accepted_tokens  # the caller's, never reset
    drafter.begin([1], [])  # given back when its sequence left


def test_step_driver_drafts_on_threads_as_on_one():
    prompts = [[1, 3 + i % 7, 3 + (i * 5) % 7] for i in range(12)]
    results = []
    for threads in (1, 3):
        driver = refdec.StepDriver(VOCAB, 64, prefill_chunk=2, drafting_threads=threads)
        drafters = [refdec.LlmaDrafter(min_match=1, continuation=8, self_reference=True) for _ in prompts]
        ids = [driver.add(p, drafter=d, max_new_tokens=12, budget=8) for p, d in zip(prompts, drafters)]
        outputs, _ = drive(driver)
        assert [outputs[i] for i in ids] == [plain(p, 12) for p in prompts]
        results.append((driver.stats.tokens, driver.stats.steps))
    assert results[0] == results[1]  # the same drafts, hence the same steps, on 3 threads
    with pytest.raises(ValueError, match="drafting_threads must be 1 to 256, got 0"):
        refdec.StepDriver(VOCAB, 64, drafting_threads=0)


def test_step_driver_stops_cancels_and_rejects_bad_input():
    driver = refdec.StepDriver(VOCAB, 64, prefill_chunk=0)
    first = plain([1], 3)
    a = driver.add([1], max_new_tokens=50, stop_tokens=[first[2]])
    b = driver.add([1], drafter=refdec.NgramTrieDrafter(), max_new_tokens=50)
    assert driver.cancel(b) == 1 and driver.cancel(b) is None
    outputs, finished = drive(driver)
    assert finished[a] == refdec.FinishReason.stop_token and first[2] not in outputs[a]
    assert finished[b] == refdec.FinishReason.cancelled
    with pytest.raises(ValueError, match="prompt token 1 has id 23 outside the vocabulary"):
        driver.add([1, 23])
    with pytest.raises(ValueError, match="the prompt is empty"):
        driver.add([])
    driver.add([1])
    assert driver.prepare()
    with pytest.raises(ValueError, match="expected 1 token ids, got 2"):
        driver.complete_greedy(np.array([3, 4]))
    # A target outside the vocabulary never becomes output; the step still completes afterwards.
    with pytest.raises(ValueError, match="accepted token 0 has id -1 outside the vocabulary"):
        driver.complete_greedy(np.array([-1]))
    with pytest.raises(ValueError, match="has id 1000000 outside the vocabulary"):
        driver.complete_greedy(np.array([1000000]))


def test_step_driver_holds_under_misuse():
    """The prepared step is one state (completed once; add and cancel refused while open), and what
    the driver validated is handed out as copies."""
    driver = refdec.StepDriver(VOCAB, 64)
    a = driver.add([1], max_new_tokens=8)
    assert not driver.step_prepared and driver.prepare() and driver.step_prepared
    with pytest.raises(ValueError, match="cancel: a step is prepared; complete it first"):
        driver.cancel(a)
    with pytest.raises(ValueError, match="add: a step is prepared; complete it first"):
        driver.add([1])
    with pytest.raises(ValueError, match="accepts 0 nodes with 0 tokens"):
        driver.complete([refdec.Acceptance()])
    # Writing into the copies leaves the driver's step as it is.
    plan = driver.plan
    plan.tokens[0] = 5
    refdec.plan_step([refdec.LinearTree.chain([9])], [3], VOCAB, out=plan)
    assert driver.plan.tokens.tolist() == [1] and driver.plan.lengths.tolist() == [0]
    targets = np.array([target(1, 0)])
    driver.complete_greedy(targets)
    with pytest.raises(ValueError, match="no prepared step"):
        driver.complete_greedy(targets)  # each step completes once: its tokens are not appended twice
    assert [u.tokens for u in driver.updates] == [[target(1, 0)]]
    keep = driver.keep
    keep.lengths[0] = 99
    assert driver.keep.lengths.tolist() == [1]


def test_plan_and_block_accessors_check_their_indices():
    plan = refdec.plan_step([refdec.LinearTree.chain([4])], [2], VOCAB)
    for call in (lambda: plan.rows(1), lambda: plan.aux_rows(-1), lambda: plan.mask_words(5)):
        with pytest.raises(ValueError, match="outside \\[0, 1\\)"):
            call()
    with pytest.raises(ValueError, match="StepPlan.sees: rows 0, 7 outside sequence 0's \\[0, 1\\)"):
        plan.sees(0, 0, 7)
    block = refdec.AuxBlock()
    block.add(5, 1)
    block.add(6, 2, [1])
    with pytest.raises(ValueError, match="AuxBlock.attends: token 2 out of range"):
        block.attends(2, 0)
    block.append(block)  # a copy of itself, not a read of what it writes
    assert block.tokens == [5, 6, 5, 6] and block.attends(3, 3)
    options = refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.5)).options
    options.temperature = -1.0  # a copy: the processor keeps what it validated
    processor = refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.5))
    processor.options.temperature = -1.0
    assert processor.options.temperature == 0.5
