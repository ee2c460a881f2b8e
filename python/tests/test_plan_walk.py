# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The step plan (numpy views), the walk (greedy, sampled, a Python chooser) and the keep plan."""

import random

import numpy as np
import pytest

import refdec


def random_tree(rng, root, nodes, vocab=50):
    t = refdec.DraftTree()
    for _ in range(nodes):
        t.insert([rng.randrange(vocab) for _ in range(rng.randrange(1, 6))], rng.random())
    return t.linearize(root, nodes)


def reference_walk(tree_tokens, first_child, next_sibling, choose):
    """The walk as docs/engine.md states it, in Python."""
    nodes, node, depth = [], 0, 0
    while True:
        y = choose(node, depth)
        c = first_child[node]
        while c >= 0 and tree_tokens[c] != y:
            c = next_sibling[c]
        if c < 0:
            return nodes, [tree_tokens[n] for n in nodes] + [y]
        nodes.append(c)
        node, depth = c, depth + 1


def test_plan_fields_and_mask():
    rng = random.Random(1)
    trees = [random_tree(rng, 3, 64), random_tree(rng, 4, 5)]
    aux = [refdec.AuxBlock(), refdec.AuxBlock()]
    aux[1].add(20, 1, [0])
    aux[1].add(21, 2, [0, 1])
    plan = refdec.plan_step(trees, [10, 0], 100, aux=aux)
    assert plan.batch == 2
    assert plan.indptr.tolist() == [0, trees[0].size, trees[0].size + trees[1].size + 2]
    assert plan.num_nodes.tolist() == [trees[0].size, trees[1].size]
    assert plan.num_rows == plan.indptr[-1] and plan.rows(1) == trees[1].size + 2 and plan.aux_rows(1) == 2
    assert plan.tokens.dtype == np.int32 and plan.positions.dtype == np.int64 and plan.mask.dtype == np.int64
    assert plan.tokens[: trees[0].size].tolist() == trees[0].tokens
    assert plan.positions[: trees[0].size].tolist() == [10 + d for d in trees[0].depth]
    assert plan.positions[-2:].tolist() == [1, 2] and plan.tokens[-2:].tolist() == [20, 21]
    assert plan.lengths.tolist() == [10, 0] and plan.mask_words(0) == 2
    start = plan.mask_indptr.tolist()
    for b, tree in enumerate(trees):
        n, words = plan.rows(b), plan.mask_words(b)
        packed = plan.mask[start[b]:start[b] + n * words].reshape(n, words)
        for i in range(n):
            for j in range(n):
                bit = (int(packed[i, j // 64]) >> (j % 64)) & 1
                assert bit == plan.sees(b, i, j)
                if i < tree.size and j < tree.size:
                    assert plan.sees(b, i, j) == tree.attends(i, j)
    assert plan.sees(1, trees[1].size + 1, 0) and plan.sees(1, trees[1].size + 1, trees[1].size)


def test_plan_arrays_are_views_kept_alive():
    plan = refdec.plan_step([refdec.LinearTree.chain([1, 2, 3])], [5])
    tokens = plan.tokens
    assert tokens.ctypes.data == plan.tokens.ctypes.data  # the plan's own memory, no copy
    del plan
    assert tokens.tolist() == [1, 2, 3]  # the view keeps its plan alive
    assert refdec.StepPlan().tokens.tolist() == [] and refdec.StepPlan().indptr.tolist() == [0]
    out = refdec.StepPlan()
    assert refdec.plan_step([refdec.LinearTree.chain([1])], [0], out=out) is out
    assert out.batch == 1 and repr(out).startswith("<refdec.StepPlan")


def test_greedy_walk_matches_the_reference_walk_and_keep_plan():
    rng = random.Random(7)
    for batch in (1, 7):
        trees = [random_tree(rng, rng.randrange(50), rng.choice([1, 8, 64, 100])) for _ in range(batch)]
        lengths = [rng.randrange(100) for _ in trees]
        plan = refdec.plan_step(trees, lengths, 50)
        targets = np.array([rng.choice(plan.tokens.tolist()) for _ in range(plan.num_rows)], dtype=np.int64)
        accepted = refdec.accept_greedy(plan, targets)
        keep = refdec.keep_accepted(plan, accepted)
        for b, tree in enumerate(trees):
            first = int(plan.indptr[b])
            nodes, tokens = reference_walk(tree.tokens, tree.first_child, tree.next_sibling,
                                           lambda n, d: int(targets[first + n]))
            assert accepted[b].nodes == nodes and accepted[b].tokens == tokens
            assert accepted[b].num_accepted == len(nodes)
            assert keep.kept(b) == [0] + nodes and keep.lengths[b] == lengths[b] + 1 + len(nodes)
            # The same walk with the engine's own chooser, asked once per node, root to leaf.
            asked = []

            def choose(node, depth):
                asked.append((node, depth))
                return int(targets[first + node])

            assert refdec.accept_with(plan, b, choose).tokens == tokens
            assert [d for _, d in asked] == list(range(len(asked))) and len(asked) == len(nodes) + 1
            assert refdec.greedy_accept(tree, targets[first:first + tree.size].tolist()).nodes == nodes
        assert keep.batch == batch and keep.rows.tolist() == sum((keep.kept(b) for b in range(batch)), [])


def test_accept_all_and_prefill():
    plan = refdec.plan_step([refdec.LinearTree.chain([1, 2, 3, 4])], [0])
    acc = refdec.accept_all(plan, 0)
    assert acc.nodes == [1, 2, 3] and acc.tokens == []
    assert refdec.keep_accepted(plan, [acc]).lengths.tolist() == [4]


def test_sampled_walk_equals_sample_then_match_in_python():
    rng = random.Random(11)
    vocab = 40
    counts = refdec.TokenCounts(vocab)
    counts.add_prompt([1, 2, 3])
    opts = refdec.SamplingOptions(temperature=0.8, top_p=0.95, seed=5)
    for trial in range(20):
        tree = random_tree(rng, 3, 30, vocab)
        plan = refdec.plan_step([tree], [3], vocab)
        logits = np.random.default_rng(trial).standard_normal((plan.num_rows, vocab), dtype=np.float32) * 3
        acc = refdec.accept_sampled(plan, 0, logits.copy(), refdec.LogitsProcessor(opts), counts, trial)
        processor = refdec.LogitsProcessor(opts)

        def choose(node, depth):
            prefix, j = [], node  # the node's own drafts, root excluded
            while j > 0:
                prefix.insert(0, tree.tokens[j])
                j = tree.parent[j]
            row = logits[node].copy()
            processor.process(row, counts, prefix)
            return refdec.sample_from_probs(row, refdec.uniform(opts.seed, trial + depth))

        nodes, tokens = reference_walk(tree.tokens, tree.first_child, tree.next_sibling, choose)
        assert acc.tokens == tokens and acc.nodes == nodes
    # A root-only tree is plain sampling, for the same seed and position.
    plan = refdec.plan_step([refdec.LinearTree.chain([3])], [3], vocab)
    row = np.random.default_rng(17).standard_normal((1, vocab), dtype=np.float32)
    acc = refdec.accept_sampled(plan, 0, row.copy(), refdec.LogitsProcessor(opts), counts, 17)
    assert acc.tokens == [refdec.LogitsProcessor(opts).sample(row[0].copy(), counts, 17)]


def test_walk_argument_errors():
    plan = refdec.plan_step([refdec.LinearTree.chain([1, 2])], [0])
    with pytest.raises(ValueError, match="expected 2 token ids"):
        refdec.accept_greedy(plan, np.array([1]))
    with pytest.raises(ValueError, match="expected a 1-D integer CPU tensor or array, got float64 array"):
        refdec.accept_greedy(plan, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="out of range"):
        refdec.accept_all(plan, 1)
    with pytest.raises(ValueError, match="float32"):
        refdec.accept_sampled(plan, 0, np.zeros((2, 4)), refdec.LogitsProcessor(refdec.SamplingOptions()), refdec.TokenCounts(4), 0)
    with pytest.raises(ValueError, match="writable contiguous 2-D float32"):
        refdec.accept_sampled(plan, 0, np.zeros((4, 2), dtype=np.float32).T, refdec.LogitsProcessor(refdec.SamplingOptions()),
                              refdec.TokenCounts(4), 0)

    def broken(node, depth):
        raise KeyError("from the chooser")

    with pytest.raises(KeyError, match="from the chooser"):
        refdec.accept_with(plan, 0, broken)
    with pytest.raises(ValueError, match="3 trees for 1 lengths"):
        refdec.plan_step([refdec.LinearTree.chain([1])] * 3, [0])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        refdec.plan_step([refdec.LinearTree.chain([1, 7])], [0], 5)
    star = refdec.LinearTree()
    for token, parent in ((1, -1), (2, 0), (3, 0)):
        star.add_node(token, parent)
    star.finish()
    chain = refdec.plan_step([refdec.LinearTree.chain([1, 2, 3])], [0])
    with pytest.raises(ValueError, match="not a child"):
        refdec.keep_accepted(refdec.plan_step([star], [0]), [refdec.accept_all(chain, 0)])


def test_torch_tensors_in_and_out(torch):
    plan = refdec.plan_step([refdec.LinearTree.chain([1, 2, 3])], [5], 8)
    tokens = torch.from_numpy(plan.tokens)  # the plan's memory, shared
    assert tokens.data_ptr() == plan.tokens.ctypes.data and tokens.dtype == torch.int32
    assert torch.from_numpy(plan.mask).dtype == torch.int64 and torch.from_numpy(plan.positions).tolist() == [5, 6, 7]
    assert refdec.accept_greedy(plan, torch.tensor([2, 3, 4]))[0].tokens == [2, 3, 4]  # an int64 tensor of targets
    with pytest.raises(ValueError, match="expected a 1-D integer CPU tensor or array, got float32 array"):
        refdec.accept_greedy(plan, torch.zeros(3))
    # A float32 CPU tensor of logits is processed in place, as a numpy array is.
    logits = torch.zeros(3, 8)
    logits[0, 2] = 5.0
    greedy = refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.0))
    assert refdec.accept_sampled(plan, 0, logits, greedy, refdec.TokenCounts(8), 0).tokens == [2, 0]
    assert logits[:2].tolist() == [[0, 0, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]  # the visited rows: probabilities
