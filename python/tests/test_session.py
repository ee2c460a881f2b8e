# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The Session from Python: continuous batching, drafters, sampling, both KV stores, errors."""

import numpy as np
import pytest

import refdec

torch = pytest.importorskip("torch")
pytest.importorskip("refdec._torch", reason="refdec was built without refdec._torch")


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
    m = refdec.LlamaModel.load_llama2c(tiny_checkpoint, torch.float64)  # float64: exact greedy comparisons
    assert m.vocab_size == 97 and m.max_seq_len == 128 and m.dtype == torch.float64 and m.config.head_dim == 8
    return m


def test_random_model():
    c = refdec.LlamaConfig()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len = 32, 64, 2, 4, 2, 61, 96
    c.validate()
    m = refdec.LlamaModel.random(c, 5)
    assert m.dtype == torch.float32 and m.config.rope_style == refdec.RopeStyle.interleaved and m.config.n_kv_heads == 2
    assert len(alone(m, [1, 2], 5)) == 5
    c.n_kv_heads = 3
    with pytest.raises(ValueError, match="not a multiple of n_kv_heads"):
        c.validate()


def run(session, ids):
    outputs, finished = {i: [] for i in ids}, {}
    while not session.idle:
        for u in session.step():
            outputs[u.id] += u.tokens
            if u.finished is not None:
                finished[u.id] = u.finished
    return outputs, finished


def alone(model, prompt, max_new_tokens, **request):
    session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=max_new_tokens, budget=0))
    i = session.add(prompt, **request)
    return run(session, [i])[0][i]


PROMPTS = [[1, 5, 9, 5, 9, 5], [1], [1, 20, 21, 22, 20, 21, 22, 20, 21], [1, 33] * 6]


@pytest.mark.parametrize("kv_store", ["contiguous", "paged"])
def test_continuous_batching_equals_each_request_alone(model, kv_store):
    options = refdec.GenerateOptions(max_new_tokens=24, budget=8, prefill_chunk=4)
    assert refdec.GenerateOptions(drafting_threads=2).drafting_threads == 2
    session = refdec.Session(model, options, kv_store=kv_store)
    drafters = [refdec.LlmaDrafter(min_match=1, continuation=8, self_reference=True), refdec.NgramTrieDrafter(ngram=6),
                refdec.LookaheadDrafter(window=3, ngram=3, guesses=4), None]
    ids, outputs, finished = [], {}, {}
    # Requests join at different steps; one leaves early (cancelled).
    for step in range(200):
        if step < len(PROMPTS):
            ids.append(session.add(PROMPTS[step], drafter=drafters[step]))
            outputs[ids[-1]] = []
        if step == 6:
            assert session.cancel(ids[1]) and not session.cancel(12345)
        for u in session.step():
            outputs[u.id] += u.tokens
            if u.finished is not None:
                finished[u.id] = u.finished
        if session.idle:
            break
    assert session.idle and session.active == 0
    assert finished[ids[1]] == refdec.FinishReason.cancelled
    for i, prompt in zip(ids, PROMPTS):
        if i == ids[1]:
            assert outputs[i] == alone(model, prompt, 24)[:len(outputs[i])]
            continue
        assert finished[i] == refdec.FinishReason.max_new_tokens
        assert outputs[i] == alone(model, prompt, 24), i
    stats = session.stats
    assert stats.tokens == sum(map(len, outputs.values())) and stats.steps > 0 and stats.forward_passes > 0
    assert stats.prefill_tokens > 0 and stats.auxiliary_tokens > 0 and stats.tokens_per_step >= 1.0
    assert stats.verify.model > 0 and stats.total_seconds > 0 and stats.drafting.steps > 0
    assert drafters[0].stats.steps > 0  # a borrowed drafter's statistics stay with it
    assert session.last_plan.batch >= 1 and session.model.vocab_size == 97
    assert isinstance(session.last_plan.tokens, np.ndarray) and len(session.last_plan.tokens) == session.last_plan.num_rows


def test_sampled_requests_are_plain_sampling_for_their_seed(model):
    session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=20, budget=6))
    opts = [refdec.SamplingOptions(temperature=1.0, seed=s) for s in (1, 2)]
    ids = [session.add(PROMPTS[0], drafter=refdec.LlmaDrafter(self_reference=True), sampling=o) for o in opts]
    outputs, _ = run(session, ids)
    for i, o in zip(ids, opts):
        assert outputs[i] == alone(model, PROMPTS[0], 20, sampling=o)
    assert outputs[ids[0]] != outputs[ids[1]]


def test_request_limits_stop_tokens_and_output(model):
    session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=30, budget=4))
    reference = alone(model, PROMPTS[2], 30)
    stop = reference[5]
    i = session.add(PROMPTS[2], stop_tokens=[stop], budget=2)
    j = session.add(PROMPTS[2], max_new_tokens=3)
    k = session.add(PROMPTS[2], max_new_tokens=0)
    first = session.step()  # prefill: only k, which asked for no tokens, reports (it has left)
    assert [(u.id, u.tokens, u.finished) for u in first] == [(k, [], refdec.FinishReason.max_new_tokens)]
    second = session.step()
    assert len(session.output(i)) >= 1 and session.output(i) == second[0].tokens
    outputs, finished = run(session, [i, j])
    for u in second:
        outputs[u.id][:0] = u.tokens
        if u.finished is not None:
            finished[u.id] = u.finished
    assert finished[i] == refdec.FinishReason.stop_token and stop not in outputs[i]
    assert outputs[i] == reference[:reference.index(stop)]
    assert finished[j] == refdec.FinishReason.max_new_tokens and outputs[j] == reference[:3]


def test_session_errors_leave_the_session_unchanged(model):
    session = refdec.Session(model)
    with pytest.raises(ValueError, match="the prompt is empty"):
        session.add([])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        session.add([1, 97])
    with pytest.raises(ValueError, match="reference 0 token 1"):
        session.add([1], references=[[1, -2]])
    with pytest.raises(refdec.ArgumentError, match="does not fit a 32-bit token id"):  # raised in refdec._torch
        session.add(np.array([1, 2**40]))
    with pytest.raises(ValueError, match="budget must be 0 to 4096"):
        session.add([1], budget=-1)
    with pytest.raises(ValueError, match="top_p"):
        session.add([1], sampling=refdec.SamplingOptions(top_p=2.0))
    assert session.idle and session.active == 0
    with pytest.raises(ValueError, match="kv_store must be"):
        refdec.Session(model, kv_store="other")
    with pytest.raises(ValueError, match="no active request 7"):
        session.output(7)
    # A borrowed drafter serves its request only, until the request leaves.
    d = refdec.LlmaDrafter(self_reference=True)
    i = session.add([1, 2, 3], drafter=d, max_new_tokens=4)
    with pytest.raises(ValueError, match="in use by a Session or StepDriver request"):
        d.propose(4)
    with pytest.raises(ValueError, match="in use by a Session or StepDriver request"):
        session.add([1], drafter=d)
    run(session, [i])
    d.begin([1, 2])  # free again
    j = session.add([1, 2, 3], drafter=d)
    del session  # a session dropped with active requests gives the drafter back
    d.begin([1])
    assert j >= 0


def test_stories260k_speculative_equals_plain(stories_path):
    model = refdec.LlamaModel.load_llama2c(stories_path, torch.float64)
    plain = alone(model, [1], 96)
    session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=96, budget=16, stop_tokens=[]))
    i = session.add([1], references=[plain[:40]], drafter=refdec.LlmaDrafter(continuation=16, self_reference=True))
    outputs, _ = run(session, [i])
    assert outputs[i] == plain and session.stats.tokens_per_step > 1.2


def test_session_learns_the_step_cost_from_its_own_steps(model):
    prompt = PROMPTS[2]
    want = alone(model, prompt, 20)
    prior = refdec.StepCost.affine(1e-3, 1e-4)
    options = refdec.GenerateOptions(max_new_tokens=20, budget=8, step_cost=prior, step_cost_half_life=8.0)
    assert options.step_cost.seconds(4) == prior.seconds(4)
    session = refdec.Session(model, options)
    mix = refdec.MixtureDrafter([refdec.LlmaDrafter(min_match=1, continuation=8, self_reference=True), refdec.NgramTrieDrafter(ngram=6)],
                                cost=prior)
    i = session.add(prompt, drafter=mix)
    tracker = session.step_cost_tracker
    assert tracker.observations == 0 and tracker.current().seconds(4) == prior.seconds(4)
    assert run(session, [i])[0][i] == want  # lossless whatever cost the mixture was given
    tracker = session.step_cost_tracker  # a copy, taken now
    assert tracker.observations == session.stats.steps > 0
    assert tracker.prior.seconds(1) == prior.seconds(1)
    assert tracker.current().seconds(1) == pytest.approx(prior.seconds(1) * tracker.correction(1))
    assert refdec.Session(model, refdec.GenerateOptions()).step_cost_tracker is None


def test_batch_budget_chooses_across_requests_losslessly(model):
    assert refdec.GenerateOptions().batch_budget
    assert not refdec.GenerateOptions(batch_budget=False).batch_budget
    prior = refdec.StepCost.affine(1e-3, 1e-4)
    for batch_budget in (True, False):
        session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=16, budget=8, step_cost=prior,
                                                               batch_budget=batch_budget))
        ids = [session.add(p, drafter=refdec.MixtureDrafter([refdec.LlmaDrafter(min_match=1, continuation=8, self_reference=True)]))
               for p in PROMPTS[:3]]
        outputs, _ = run(session, ids)
        for i, p in zip(ids, PROMPTS[:3]):
            assert outputs[i] == alone(model, p, 16)
        if batch_budget:  # every step that prefills nothing is timed, three requests at once included
            assert session.step_cost_tracker.observations > 0


def test_step_cost_tracker():
    prior = refdec.StepCost.calibrated([(1, 0.044), (8, 0.055), (32, 0.12)])
    tracker = refdec.StepCostTracker(prior, half_life=16.0)
    for _ in range(50):
        tracker.observe(1, 0.6 * prior.seconds(1))
        tracker.observe(8, 1.85 * 0.6 * prior.seconds(1))
    learned = tracker.current()
    assert tracker.observations == 100
    assert abs(learned.seconds(8) / learned.seconds(1) - 1.85) < 0.1
    # Steps of 16 sequences: 2 ms per sequence beyond one sequence's step of the same tokens.
    batched = refdec.StepCostTracker(prior)
    assert batched.overhead(16) == 0.0
    for _ in range(20):
        batched.observe(640, prior.seconds(640) + 15 * 0.002, batch=16)
    assert abs(batched.overhead(16) - 15 * 0.002) < 1e-9
    assert abs(batched.current(16).seconds(640) - batched.current().seconds(640) - 15 * 0.002) < 1e-9
    assert batched.current(1).seconds(8) == batched.current().seconds(8) == prior.seconds(8)
    with pytest.raises(ValueError, match="not flat"):
        refdec.StepCostTracker(refdec.StepCost.flat())
    with pytest.raises(ValueError, match="at least one token"):
        tracker.observe(0, 1.0)
