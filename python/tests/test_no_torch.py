# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""refdec without torch: in an interpreter where `import torch` fails, refdec imports, drafts, plans
and walks with numpy arrays in and out, never imports torch, and its torch part says what it needs;
refdec._core's shared object needs no libtorch, libc10 or libtorch_python.

The checks need an interpreter that has not imported torch: this file blocks torch when it is
imported first (CTest runs it alone); in a pytest run that imported torch before (the whole
directory), test_in_an_interpreter_without_torch runs this file again in a fresh interpreter."""

import importlib.abc
import struct
import subprocess
import sys

import numpy as np
import pytest

TORCH_LOADED = "torch" in sys.modules


class NoTorch(importlib.abc.MetaPathFinder):
    """`import torch` (and torch.*) fails, as where python3-torch is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named '{name}' (blocked by {__file__})", name=name)
        return None


if not TORCH_LOADED:
    sys.meta_path.insert(0, NoTorch())

import refdec  # noqa: E402  (after the blocker)

without_torch = pytest.mark.skipif(TORCH_LOADED, reason="torch was imported before: test_in_an_interpreter_without_torch runs these")


@pytest.mark.skipif(not TORCH_LOADED, reason="torch is blocked in this interpreter: the checks ran here")
def test_in_an_interpreter_without_torch():
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__], capture_output=True, text=True)
    assert run.returncode == 0 and " passed" in run.stdout, run.stdout + run.stderr


@without_torch
def test_torch_is_blocked():
    with pytest.raises(ImportError):
        import torch  # noqa: F401


@without_torch
def test_drafters_draft_with_numpy_arrays():
    # LLMA copies what follows the match of the last token (6) in the reference: 9 10 11 12.
    llma = refdec.LlmaDrafter(min_match=1, continuation=4)
    llma.begin(np.array([1, 5, 6], dtype=np.int64), [np.array([7, 5, 6, 9, 10, 11, 12], dtype=np.int32)])
    assert llma.draft(6, 8, 20).tokens == [6, 9, 10, 11, 12]
    # The trie of the prompt's 4-token windows continues "4 5" with 6 (twice) before 7 (once), each then with 3.
    trie = refdec.NgramTrieDrafter(ngram=4, max_match=2, max_nodes=8)
    trie.begin(np.array([3, 4, 5, 6, 3, 4, 5, 6, 3, 4, 5, 7, 3, 4, 5]), [])
    tree = trie.draft(5, 8, 20)
    assert tree.tokens == [5, 6, 7, 3, 3] and tree.parent == [-1, 0, 0, 1, 2]
    # A mixture of both drafts the reference's continuation after 6.
    mixture = refdec.MixtureDrafter([refdec.LlmaDrafter(continuation=4), refdec.NgramTrieDrafter(ngram=4)])
    mixture.begin(np.array([1, 5, 6]), [np.array([7, 5, 6, 9, 10, 11, 12])])
    assert mixture.draft(6, 8, 20).tokens == [6, 9, 10, 11, 12]


@without_torch
def test_plan_and_greedy_walk_with_numpy_arrays():
    # Root 1 with two branches: 2 -> 3 and 4. The target continues 1 2 3 then 8.
    tree = refdec.LinearTree()
    for token, parent in ((1, -1), (2, 0), (4, 0), (3, 1)):
        tree.add_node(token, parent)
    tree.finish()
    plan = refdec.plan_step([tree, refdec.LinearTree.chain([9])], [10, 3], 20)
    assert isinstance(plan.tokens, np.ndarray) and plan.tokens.dtype == np.int32
    assert plan.tokens.tolist() == [1, 2, 4, 3, 9] and plan.positions.tolist() == [10, 11, 11, 12, 3]
    assert plan.indptr.tolist() == [0, 4, 5] and plan.mask.dtype == np.int64
    # The target's token at each row: after 1 comes 2, after 2 comes 3, after 3 comes 8; 4 is never reached.
    targets = np.array([2, 3, 0, 8, 5], dtype=np.int64)
    accepted = refdec.accept_greedy(plan, targets)
    assert accepted[0].nodes == [1, 3] and accepted[0].tokens == [2, 3, 8]
    assert accepted[1].nodes == [] and accepted[1].tokens == [5]
    keep = refdec.keep_accepted(plan, accepted)
    assert isinstance(keep.rows, np.ndarray) and keep.rows.tolist() == [0, 1, 3, 0]
    assert keep.lengths.tolist() == [13, 4]
    # The StepDriver's loop, with a target that always says 7.
    driver = refdec.StepDriver(20, 64)
    driver.add(np.array([1, 2]), drafter=refdec.LlmaDrafter(self_reference=True), max_new_tokens=3)
    output = []
    while not driver.idle:
        if driver.prepare():
            driver.complete_greedy(np.full(driver.plan.num_rows, 7))
        output += [t for u in driver.updates for t in u.tokens]
    assert output == [7, 7, 7]


@without_torch
def test_sampling_with_numpy_rows():
    row = np.array([0.0, 1.0, 4.0, 1.0], dtype=np.float32)
    refdec.LogitsProcessor(refdec.SamplingOptions(temperature=0.0)).process(row, refdec.TokenCounts(4))
    assert row.tolist() == [0, 0, 1, 0]
    assert refdec.sample_from_probs(row, 0.5) == 2


@without_torch
def test_the_torch_part_says_what_it_needs():
    with pytest.raises(ImportError, match="refdec.Session is not available: "):
        refdec.Session
    with pytest.raises(AttributeError):
        refdec.NoSuchName
    assert "torch" not in sys.modules


def needed_libraries(path):
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared object."""
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not a 64-bit little-endian ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC; its sh_link names the string table
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 1:  # DT_NEEDED
                needed.append(data[strings + value:data.index(b"\0", strings + value)].decode())
    return needed


def test_the_core_module_links_no_torch_library():
    needed = needed_libraries(refdec._core.__file__)
    assert any(name.startswith("libstdc++") for name in needed), needed  # the parser reads the table
    assert [name for name in needed if name.startswith(("libtorch", "libc10"))] == [], needed
