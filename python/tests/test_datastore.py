# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""build_datastore, Datastore and the REST drafter from Python."""

import pytest

import refdec


@pytest.fixture
def store(tmp_path):
    docs = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 9], [7, 1, 2, 3, 4, 8], []]
    calls = []
    stats = refdec.build_datastore(docs, 16, tmp_path / "ds.bin", progress=lambda *a: calls.append(a))
    assert stats.num_tokens == 17 and stats.num_documents == 4 and stats.file_bytes > 0
    assert stats.seconds >= stats.sort_seconds >= 0 and stats.tokens_per_second >= 0
    assert calls and all(isinstance(stage, str) and done <= total for stage, done, total in calls)
    return refdec.Datastore.open(tmp_path / "ds.bin")


def test_datastore_queries(store):
    assert store.num_documents == 4 and store.num_corpus_tokens == 17 and store.size == 21 and store.vocab_size == 16
    assert store.count([1, 2, 3]) == 3 and store.count([1, 2, 3, 4]) == 2 and store.count([5, 5]) == 0
    begin, end = store.find([1, 2, 3])
    assert end - begin == 3
    positions = sorted(store.suffix(r) for r in range(begin, end))
    assert [store.token(p) for p in positions] == [1, 1, 1]
    assert store.path.name == "ds.bin"


def test_rest_drafter_proposes_frequent_continuations(store):
    d = refdec.RestDrafter(store, max_match=4, continuation=3, max_nodes=8)
    assert (d.max_match, d.continuation, d.max_nodes, d.max_occurrences, d.name) == (4, 3, 8, 256, "rest")
    assert d.datastore.num_documents == 4
    d.begin([0, 1, 2])
    tree = d.draft(2, 8, 16)
    assert tree.tokens[0] == 2 and tree.tokens[1] == 3  # every occurrence of "1 2" continues with 3
    d.accept([3, 4])
    assert d.draft(4, 8, 16).num_drafts >= 1


def test_datastore_errors(tmp_path):
    with pytest.raises(OSError, match="cannot open datastore"):
        refdec.Datastore.open(tmp_path / "missing.bin")
    (tmp_path / "junk.bin").write_bytes(b"not a datastore" * 10)
    with pytest.raises(refdec.IoError):
        refdec.Datastore.open(tmp_path / "junk.bin")
    with pytest.raises(ValueError, match="outside"):
        refdec.build_datastore([[1, 20]], 16, tmp_path / "x.bin")
    with pytest.raises(ValueError, match="empty"):
        refdec.build_datastore([], 16, tmp_path / "x.bin")

    def stop(stage, done, total):
        raise InterruptedError("stop the build")

    with pytest.raises(InterruptedError, match="stop the build"):
        refdec.build_datastore([[1, 2]], 16, tmp_path / "y.bin", progress=stop)
    assert not (tmp_path / "y.bin").exists()
