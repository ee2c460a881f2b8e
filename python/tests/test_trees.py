# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""DraftTree, LinearTree and AuxBlock from Python."""

import random

import pytest

import refdec


def test_draft_tree_merges_paths_and_accumulates_scores():
    t = refdec.DraftTree()
    assert t.empty and len(t) == 0
    t.insert([5, 6, 7], 2.0)
    t.insert([5, 8], 1.0)
    assert len(t) == 4 and t.size == 4
    a = t.find_child(0, 5)
    assert t.node(a).token == 5 and t.node(a).score == 3.0 and t.node(a).depth == 1
    assert t.find_child(a, 6) > 0 and t.find_child(a, 9) == -1
    c = t.add_child(a, 9)
    t.set_score(c, 0.5)
    assert t.node(c).score == 0.5 and t.node(0).token == -1
    t.clear()
    assert t.empty


def test_linearize_is_breadth_first_and_cut_to_the_budget():
    t = refdec.DraftTree()
    t.insert([1, 2, 3], 1.0)
    t.insert([1, 4], 3.0)
    t.insert([9], 0.5)
    lt = t.linearize(100, 3)
    assert lt.size == 4 and lt.num_drafts == 3 and len(lt) == 4
    assert lt.tokens[0] == 100 and lt.parent[0] == -1
    assert lt.tokens[1] == 1 and lt.tokens[2] == 4  # children of 1 by descending score: 4 (3.0) before 2 (1.0)
    for i in range(1, lt.size):
        assert lt.parent[i] < i and lt.depth[i] == lt.depth[lt.parent[i]] + 1
    out = refdec.LinearTree()
    assert t.linearize(100, 64, out) is out and out.size == 6 and out.max_depth == 3
    assert "[0] 100" in str(out)
    t.prune(2)
    assert len(t) == 2


def test_linear_tree_by_hand_and_its_ancestor_mask():
    rng = random.Random(3)
    lt = refdec.LinearTree()
    lt.add_node(7, -1)
    for i in range(1, 70):  # more than 64 nodes: two mask words
        lt.add_node(rng.randrange(100), rng.randrange(i), 1.0)
    lt.finish()
    for i in range(lt.size):
        ancestors = set()
        j = i
        while j >= 0:
            ancestors.add(j)
            j = lt.parent[j]
        for j in range(lt.size):
            assert lt.attends(i, j) == (j in ancestors)
    children = {i: [c for c in range(lt.size) if lt.parent[c] == i] for i in range(lt.size)}
    for i in range(lt.size):
        linked, c = [], lt.first_child[i]
        while c >= 0:
            linked.append(c)
            c = lt.next_sibling[c]
        assert linked == children[i]


def test_chain_and_reset():
    c = refdec.LinearTree.chain([4, 5, 6])
    assert c.tokens == [4, 5, 6] and c.parent == [-1, 0, 1] and c.depth == [0, 1, 2]
    c.reset(9)
    assert c.tokens == [9] and c.first_child == [-1]


def test_aux_block():
    a = refdec.AuxBlock()
    assert a.add(10, 1, [0]) == 0
    assert a.add(11, 2, [1, 0, 1]) == 1
    assert len(a) == 2 and a.tokens == [10, 11] and a.offset == [1, 2]
    assert a.row(1) == [0, 1] and a.attends(1, 2) and a.attends(1, 1) and not a.attends(0, 2)
    a.validate(100)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        a.validate(11)
    b = refdec.AuxBlock()
    b.add(12, 1, [0])
    a.append(b)
    assert a.tokens == [10, 11, 12] and a.row(2) == [0]
    with pytest.raises(ValueError, match="may see the root"):
        a.add(13, 1, [9])
    a.clear()
    assert len(a) == 0
