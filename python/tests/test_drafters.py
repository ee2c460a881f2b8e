# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Every drafter from Python: begin / propose / draft / accept, statistics, replay on a known output."""

import array
import random

import numpy as np
import pytest

import refdec

VOCAB = 1000


def text(n, seed, vocab=200):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        if len(out) > 40 and rng.random() < 0.4:  # repeats, as documents have
            start = rng.randrange(len(out) - 20)
            out += out[start:start + rng.randrange(5, 20)]
        else:
            out.append(rng.randrange(vocab))
    return out[:n]


def replay(drafter, prompt, truth, references=(), budget=64):
    """Greedy decoding is fixed by its output: draft, walk along the true tokens, accept. Returns τ."""
    drafter.begin(prompt, list(references))
    done, steps = 0, 0
    plan = refdec.StepPlan()
    while done < len(truth):
        root = truth[done - 1] if done else prompt[-1]
        tree = drafter.draft(root, min(budget, len(truth) - done - 1), VOCAB)
        refdec.plan_step([tree], [len(prompt) + done - 1], VOCAB, out=plan)
        # Row i's target is the true token after the node's path: the token at its depth.
        depth = (plan.positions - (len(prompt) + done - 1)).tolist()
        targets = [truth[done + d] if done + d < len(truth) else -1 for d in depth]
        acc = refdec.accept_with(plan, 0, lambda node, _: targets[node])
        tokens = acc.tokens[: len(truth) - done]
        assert tokens == truth[done:done + len(tokens)]
        drafter.accept(tokens)
        done += len(tokens)
        steps += 1
    return len(truth) / steps


def all_drafters(store=None):
    drafters = [refdec.LlmaDrafter(min_match=1, continuation=16, spans=2, self_reference=True), refdec.PromptLookupDrafter(),
                refdec.NgramTrieDrafter(ngram=8, max_match=3, max_nodes=32), refdec.LookaheadDrafter(window=0, ngram=4, guesses=8)]
    if store is not None:
        drafters.append(refdec.RestDrafter(store, max_match=8, continuation=8, max_nodes=32))
    return drafters


@pytest.mark.parametrize("index", range(4))
def test_each_drafter_replays_above_one_token_per_step(index):
    drafter = all_drafters()[index]
    prompt = text(400, 1)
    truth = prompt[100:300]  # the output repeats the prompt: every drafter finds it
    tau = replay(drafter, prompt, truth)
    assert tau > 1.5, (drafter.name, tau)
    s = drafter.stats
    assert s.steps > 0 and s.proposed_tokens > 0 and 0 < s.accepted_tokens <= s.proposed_tokens
    assert len(s.accepted_at_depth) >= 1 and 0 < s.acceptance_at(0) <= 1
    assert s.propose_seconds >= 0 and s.accept_seconds >= 0
    drafter.reset_stats()
    assert drafter.stats.steps == 0


def test_llma_copies_from_references_and_propose_is_not_recorded():
    d = refdec.LlmaDrafter(min_match=2, continuation=5)
    assert (d.min_match, d.continuation, d.spans, d.self_reference, d.name) == (2, 5, 1, True, "llma")
    d.begin([7, 8, 1, 2], [[9, 1, 2, 3, 4, 5, 6, 7, 8]])
    tree = d.propose(16)
    assert len(tree) == 5 and tree.node(1).token == 3
    out = refdec.DraftTree()
    out.insert([99])  # propose() clears it first
    assert d.propose(16, out) is out and len(out) == 5
    assert d.stats.steps == 0
    lt = d.draft(2, 3, VOCAB)
    assert lt.tokens == [2, 3, 4, 5] and d.stats.steps == 1
    assert "llma" in repr(d)


def test_llma_index_is_built_once_and_shared():
    docs = [np.array([7, 5, 6, 9, 10, 11], dtype=np.int32), [3, 5, 6, 12]]
    index = refdec.LlmaIndex(docs)
    assert (index.tokens, index.documents) == (10, 2) and index.bytes > 0
    a, b = refdec.LlmaDrafter(continuation=4, index=index), refdec.LlmaDrafter(continuation=4, index=index)
    assert a.index.tokens == 10 and refdec.LlmaDrafter().index is None
    a.begin([1, 5, 6])
    b.begin([2, 5, 6], [[5, 6, 99]])  # not read: the index holds b's references
    own = refdec.LlmaDrafter(continuation=4)
    own.begin([1, 5, 6], docs)
    want = own.propose(8).linearize(6, 8).tokens
    assert want == [6, 9, 10, 11]  # the earliest "5 6", up to its document's end
    assert a.propose(8).linearize(6, 8).tokens == want and b.propose(8).linearize(6, 8).tokens == want
    mixture = refdec.MixtureDrafter([refdec.LlmaDrafter(continuation=4, index=index)])  # its copy shares the index
    mixture.begin([1, 5, 6])
    assert 9 in mixture.draft(6, 8, VOCAB).tokens
    with pytest.raises(ValueError, match="non-negative"):
        refdec.LlmaIndex([[1, -2]])


def test_prompt_lookup_and_ngram_trie_settings():
    p = refdec.PromptLookupDrafter(max_match=4, min_match=2, continuation=7, full_span_only=True)
    assert (p.max_match, p.min_match, p.continuation, p.full_span_only, p.name) == (4, 2, 7, True, "prompt-lookup")
    t = refdec.NgramTrieDrafter(ngram=6, max_match=2, max_nodes=9, grow=False)
    assert (t.ngram, t.max_match, t.max_nodes, t.grow, t.name) == (6, 2, 9, False, "ngram-trie")
    t.begin(text(200, 2))
    assert len(t.propose(64)) <= 9


def test_lookahead_window_runs_auxiliary_tokens():
    d = refdec.LookaheadDrafter(window=4, ngram=3, guesses=5, seed=1)
    assert (d.window, d.ngram, d.guesses, d.name) == (4, 3, 5, "lookahead") and d.max_auxiliary > 0
    d.begin(text(50, 3))
    aux = refdec.AuxBlock()
    tree = d.draft(5, 8, VOCAB, aux=aux, root_position=49, position_limit=1000)
    assert tree.tokens[0] == 5 and 0 < len(aux) <= d.max_auxiliary
    d.observe([1] * len(aux))
    d.accept([6])
    again = refdec.AuxBlock()
    d.auxiliary(again)
    assert len(again) > 0
    # An auxiliary block that would pass the context sits the step out.
    d.draft(5, 8, VOCAB, aux=again, root_position=998, position_limit=1000)
    assert len(again) == 0


def test_mixture_over_every_drafter_learns_and_leaves_its_sources_alone():
    sources = all_drafters()
    mix = refdec.MixtureDrafter(sources, cost=refdec.StepCost.affine(1.0, 0.01), combine=refdec.MixtureCombine.noisy_or)
    assert mix.name.startswith("mixture(llma+prompt-lookup+ngram-trie+ngram-pool")
    prompt = text(400, 4)
    tau = replay(mix, prompt, prompt[50:250])
    assert tau > 1.5
    stats = mix.statistics
    assert stats.steps > 0 and len(stats.sources) == 4 and stats.sources[0].name == "llma"
    assert 0 < stats.acceptance(0, 0) < 1 and stats.mean_budget > 0
    assert sum(s.accepted_tokens for s in stats.sources) > 0 and stats.sources[0].right_at(0) >= 0
    # The sources were copied by their settings: the originals were never begun by the mixture.
    for s in sources:
        assert s.stats.steps == 0
    assert replay(sources[0], prompt, prompt[50:250]) > 1.5
    nested = refdec.MixtureDrafter([mix, refdec.NoDrafter()])
    assert replay(nested, prompt, prompt[50:100]) > 1.0


def test_history_drafter_drafts_from_earlier_outputs():
    history = refdec.OutputHistory(max_tokens=1000)
    assert len(history) == 0 and history.max_tokens == 1000
    d = refdec.HistoryDrafter(refdec.NgramTrieDrafter(ngram=8, max_match=2, max_nodes=16), history)
    assert d.name == "history(ngram-trie)" and d.history is history
    answer = text(200, 7, vocab=150)
    first = replay(d, [1, 2, 3], answer)  # nothing to copy from but the answer itself
    d.begin([4, 5, 6])  # the first sequence ends: its output joins the history
    assert history.outputs == [answer] and history.tokens == 200
    second = replay(d, [4, 5, 6], answer)  # the same answer again: drafted from the history
    assert second > first + 1.0
    history.add([9, 9])
    assert len(history) == 2 and history.outputs[-1] == [9, 9]  # the second sequence is still running


def test_index_drafter_drafts_earlier_outputs_from_a_shared_index():
    index = refdec.ReferenceIndex(max_tokens=1 << 16)
    d = refdec.IndexDrafter(index)
    assert d.index is index and d.max_match == 16 and d.continuation == 64
    answer = text(200, 7, vocab=150)
    first = replay(d, [1, 2, 3], answer)
    d.begin([4, 5, 6])  # the first sequence ends: its output joins the index
    assert index.tokens == 200 and index.segments == 1 and index.bytes > 0
    second = replay(d, [4, 5, 6], answer)
    assert second > first + 1.0
    index.add([9, 9, 9])
    assert index.tokens == 203
    quiet = refdec.IndexDrafter(index, add_output=False)
    assert quiet.add_output is False
    replay(quiet, [4, 5, 6], answer)
    quiet.begin([1])
    assert index.tokens == 203  # its output stayed out
    with pytest.raises(refdec.ArgumentError):
        index.add([1, -1])
    with pytest.raises(refdec.ArgumentError):
        refdec.ReferenceIndex(max_tokens=0)
    small = refdec.ReferenceIndex(max_bytes=9 * 1000)
    for seed in range(20):
        small.add(text(200, seed, vocab=150))
    assert 0 < small.bytes <= 9 * 1000


def test_index_drafter_refuses_negative_ids():
    # -1 used to become the index's end-of-document code, and the next draft read past the last document.
    index = refdec.ReferenceIndex()
    index.add([5, 6])
    d = refdec.IndexDrafter(index, request=False)
    d.begin([5])
    with pytest.raises(ValueError, match="accept token 1 has the negative id -1"):
        d.accept([6, -1])
    assert d.draft(0, 16, 2**31 - 1) is not None


def test_index_sources_split_the_index_from_the_requests_own_text():
    index = refdec.ReferenceIndex()
    shared, own = refdec.index_sources(index, max_match=8)
    assert shared.name == "index" and shared.shared and not shared.request
    assert own.name == "index-request" and not own.shared and own.request and own.max_match == 8
    assert len(refdec.index_sources(index, request=False)) == 1
    with pytest.raises(refdec.ArgumentError, match="nothing to draft from"):
        refdec.IndexDrafter(index, request=False, shared=False)
    answer = text(200, 9, vocab=150)
    mixture = refdec.MixtureDrafter([shared, own])
    replay(mixture, [1, 2, 3], answer)
    mixture.begin([4, 5, 6])
    assert index.tokens == 200  # one copy of the output, added by the index's source
    assert replay(mixture, [4, 5, 6], answer) > 2.0  # the same answer again: drafted from the index


def test_suffix_decoding_baseline_drafts_from_its_global_tree():
    cache = refdec.SuffixDecodingCache()
    d = refdec.SuffixDecodingDrafter(cache)
    assert d.cache is cache and d.name == "suffix-decoding"
    answer = text(200, 8, vocab=150)
    first = replay(d, [1, 2, 3], answer)
    assert cache.tokens == 200  # the response joined the global tree as it grew
    second = replay(d, [4, 5, 6], answer)
    assert second > first + 1.0


def test_mixture_takes_the_small_budget_settings():
    mix = refdec.MixtureDrafter([refdec.LlmaDrafter(), refdec.NgramTrieDrafter()], source_budget=0, match_context=False,
                                recent_rate=0.0, scorer_rate=0.0)
    prompt = text(400, 4)
    assert replay(mix, prompt, prompt[50:250], budget=8) > 1.5
    with pytest.raises(ValueError, match="mixture: scorer_rate"):
        refdec.MixtureDrafter([refdec.NoDrafter()], scorer_rate=2.0)
    with pytest.raises(ValueError, match="mixture: recent_rate"):
        refdec.MixtureDrafter([refdec.NoDrafter()], recent_rate=-1.0)


def test_drafter_argument_errors():
    with pytest.raises(ValueError, match="LLMA: continuation"):
        refdec.LlmaDrafter(continuation=0)
    with pytest.raises(ValueError, match="prompt lookup: max_match"):
        refdec.PromptLookupDrafter(max_match=1, min_match=2)
    with pytest.raises(ValueError, match="n-gram trie: max_match"):
        refdec.NgramTrieDrafter(ngram=4, max_match=4)
    with pytest.raises(ValueError, match="lookahead: n-gram size"):
        refdec.LookaheadDrafter(ngram=1)
    with pytest.raises(ValueError, match="mixture: needs at least one source"):
        refdec.MixtureDrafter([])
    with pytest.raises(ValueError, match="mixture: prior_mean"):
        refdec.MixtureDrafter([refdec.NoDrafter()], prior_mean=2.0)
    with pytest.raises(ValueError, match="mixture: calibration_half_life"):
        refdec.MixtureDrafter([refdec.NoDrafter()], calibration_half_life=-1.0)
    with pytest.raises(ValueError, match="mixture: calibration_prior"):
        refdec.MixtureDrafter([refdec.NoDrafter()], calibration_prior=0.0)
    with pytest.raises(ValueError, match="output history: max_tokens"):
        refdec.OutputHistory(max_tokens=0)
    with pytest.raises(ValueError, match="output history: token ids must be non-negative"):
        refdec.OutputHistory().add([1, -2])
    d = refdec.LlmaDrafter(self_reference=True)
    d.begin([1, 2, 3, 1, 2])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        d.draft(2, 8, 3)
    with pytest.raises(TypeError):
        d.begin("not tokens")


def propose_from(make):
    """LLMA's proposal after `make` turned the prompt and the reference into token ids."""
    d = refdec.LlmaDrafter(continuation=4)
    d.begin(make([1, 5, 6]), [make([7, 5, 6, 9, 10, 11])])
    return d.propose(8).linearize(6, 8).tokens


def test_token_ids_come_as_lists_or_arrays_alike():
    want = propose_from(list)
    assert want[:4] == [6, 9, 10, 11]
    for make in (tuple, lambda x: np.array(x, dtype=np.int64), lambda x: np.array(x, dtype=np.int32),
                 lambda x: np.array(x, dtype=np.uint8), lambda x: np.array(x, dtype=np.int16),
                 lambda x: array.array("i", x), lambda x: memoryview(array.array("q", x)),
                 lambda x: np.array([v for v in x for _ in (0, 1)], dtype=np.int64)[::2]):  # a strided view
        assert propose_from(make) == want
    d = refdec.LlmaDrafter(continuation=4)
    for bad in (np.array([1.0, 2.0]), np.array([[1, 2]]), np.array([True, False]), np.array([1, 2], dtype=">i4")):
        with pytest.raises(ValueError, match="expected a 1-D integer CPU tensor or array"):
            d.begin(bad, [])
    for big in (np.array([1, 2**40]), np.array([1, -2**31 - 1]), np.array([2**32 - 1], dtype=np.uint32)):
        with pytest.raises(ValueError, match="does not fit a 32-bit token id"):
            d.begin(big, [])
    for extreme in (-2**31, 2**31 - 1):  # fits, and arrives unchanged (as the bonus token)
        assert refdec.greedy_accept(refdec.LinearTree.chain([1]), np.array([extreme])).tokens == [extreme]


def test_token_ids_come_as_torch_tensors(torch):
    want = propose_from(list)
    assert propose_from(torch.tensor) == want and propose_from(lambda x: torch.tensor(x, dtype=torch.int32)) == want
    assert propose_from(lambda x: torch.tensor(x).repeat_interleave(2)[::2]) == want  # a strided view
    d = refdec.LlmaDrafter(continuation=4)
    with pytest.raises(ValueError, match="expected a 1-D integer CPU tensor or array"):
        d.begin(torch.tensor([1.0, 2.0]), [])
    with pytest.raises(ValueError, match="expected a 1-D integer CPU tensor or array"):
        d.begin(torch.tensor([[1, 2]]), [])
    with pytest.raises(ValueError, match="does not fit a 32-bit token id"):
        d.begin(torch.tensor([1, 2**40]), [])


def test_reference_index_saved_reopened_and_holding_a_datastore(tmp_path):
    index = refdec.ReferenceIndex(max_tokens=1 << 16)
    for seed in range(5):
        index.add(text(100, seed, vocab=150))
    files = index.save(tmp_path / "index", 150)
    assert len(files) == index.segments
    reopened, served, refused = refdec.ReferenceIndex.open(tmp_path / "index")
    assert reopened.tokens == index.tokens and served == files and refused == []
    refdec.build_datastore([[7, 8, 9, 10]], 150, tmp_path / "corpus.ds")
    reopened.add_datastore(tmp_path / "corpus.ds")  # static: drafted from, never dropped
    assert reopened.tokens == index.tokens + 4
    d = refdec.IndexDrafter(reopened, request=False)
    d.begin([1, 7, 8])
    tree = refdec.DraftTree()
    d.propose(4, tree)
    assert [tree.node(i).token for i in range(1, len(tree) + 1)] == [9, 10]
    with pytest.raises(refdec.IoError):
        reopened.add_datastore(tmp_path / "missing.ds")


def test_sequences_finish_truncate_and_reset():
    index = refdec.ReferenceIndex()
    d = refdec.IndexDrafter(index)
    d.begin([1, 2])
    d.accept([3, 4, 5])
    assert d.can_truncate
    d.truncate(3)  # 1 2 3
    d.accept([6])
    assert index.tokens == 0  # nothing published before finish
    d.finish()
    assert index.tokens == 2  # the output as kept: 3 6
    d.begin([1, 2])
    d.accept([7, 8])
    d.reset()
    d.finish()
    assert index.tokens == 2  # reset: nothing to publish
    with pytest.raises(refdec.ArgumentError, match="cannot truncate a sequence of 0 tokens to 1"):
        d.truncate(1)
    # LLMA's defaults draft from the sequence itself, and drafting after a rewind follows the tokens kept.
    llma = refdec.LlmaDrafter()
    assert llma.self_reference is True
    llma.begin([1, 7, 8, 9, 3, 7])
    assert [t for t in llma.draft(7, 8, 16).tokens][1:] == [8, 9, 3, 7]
    llma.accept([8, 9])
    llma.truncate(3)  # 1 7 8
    tree = llma.draft(8, 8, 16)
    assert list(tree.tokens)[1:] == []  # 8 occurs nowhere before: the tokens dropped are gone


def test_branches_lay_out_a_tree_for_engines_without_masks():
    tree = refdec.LinearTree()
    for token, parent in [(10, -1), (11, 0), (12, 0), (13, 1), (14, 1)]:
        tree.add_node(token, parent, 0.0)
    tree.finish()
    b = refdec.Branches(tree, 100)
    assert b.count == 3
    assert list(b.positions) == [100, 101, 101, 102, 102]
    assert list(b.begin) == [0, 0, 2, 0, 1] and list(b.end) == [3, 2, 3, 1, 2]
    assert b.winner([1, 4]) == 1 and b.winner([]) == 0
    with pytest.raises(refdec.ArgumentError):
        b.winner([9])
