# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the data directory (../shared), stories260K, a tiny random llama2.c checkpoint,
torch where refdec has its torch part. Imports no torch itself: test_no_torch.py runs without it."""

import importlib.util
import os
import struct
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "python"))  # the pure-PyTorch engine example


def data_dir() -> Path:
    """$REFDEC_DATA_DIR, else the build's default (CTest sets REFDEC_DEFAULT_DATA_DIR), else ../shared."""
    for var in ("REFDEC_DATA_DIR", "REFDEC_DEFAULT_DATA_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return REPO.parent / "shared"


if os.environ.get("REFDEC_BLOCK_TORCH"):  # `import torch` fails, as without python3-torch (tests/sanitize_python.cmake)
    sys.modules["torch"] = None


@pytest.fixture(scope="session")
def torch():
    """torch, where this interpreter imports it and refdec was built with refdec._torch; else a visible skip."""
    torch = pytest.importorskip("torch")
    if importlib.util.find_spec("refdec._torch") is None:
        pytest.skip("refdec was built without refdec._torch (libtorch, python3-torch)")
    return torch


@pytest.fixture(scope="session")
def stories_path() -> Path:
    """stories260K.bin, or a visible skip when the shared data directory lacks it."""
    path = data_dir() / "models" / "stories260K" / "stories260K.bin"
    if not path.exists():
        pytest.skip(f"{path} not found: the shared data directory is missing (set REFDEC_DATA_DIR)")
    return path


def write_llama2c(path: Path, dim=32, hidden=64, layers=2, heads=4, kv_heads=2, vocab=97, seq_len=128, seed=2) -> Path:
    """A llama2.c v0 checkpoint with seeded random weights (tied embeddings); seed 2 gives varied greedy output."""
    import torch
    head_dim = dim // heads
    kv_dim = kv_heads * head_dim
    sizes = [vocab * dim, layers * dim, layers * dim * dim, layers * dim * kv_dim, layers * dim * kv_dim,
             layers * dim * dim, layers * dim, layers * dim * hidden, layers * hidden * dim, layers * dim * hidden,
             dim, seq_len * head_dim // 2, seq_len * head_dim // 2]
    gen = torch.Generator().manual_seed(seed)
    parts = []
    for i, n in enumerate(sizes):
        if i in (1, 6, 10):  # norms near 1
            parts.append(1.0 + 0.1 * torch.randn(n, generator=gen))
        else:  # scaled so that logits are peaked (few greedy near-ties)
            parts.append(torch.randn(n, generator=gen) * (1.0 if i == 0 else 0.3))
    weights = torch.cat(parts).to(torch.float32)
    path.write_bytes(struct.pack("7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len) + weights.numpy().tobytes())
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, torch) -> Path:
    """A tiny random llama2.c checkpoint (vocabulary 97, context 128): no shared data needed; its
    tests need the torch part (the `torch` fixture skips them without it)."""
    return write_llama2c(tmp_path_factory.mktemp("model") / "tiny.bin")
