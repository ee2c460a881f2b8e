#!/usr/bin/env python3
# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""A decoding engine written in PyTorch, with refdec drafting and walking.

The model is stories260K (a llama2.c checkpoint) implemented here in plain PyTorch: its own
weights loader, its own attention over the step plan's packed mask and its own KV tensors. refdec
does the rest of each step, the path an engine in Python takes (docs/python.md):

    StepDriver.prepare (prefill or drafts, the plan) -> (this file's forward) -> accept_greedy /
    accept_sampled -> StepDriver.complete (drafters told, stops, limits) -> (this file's KV
    compaction by StepDriver.keep)

The plan's arrays are numpy views of refdec's memory; torch.from_numpy shares them without a copy,
and refdec takes torch CPU tensors (targets, logits) as they are.

Greedy output equals plain greedy decoding token for token (budget 0 here, and refdec's own C++
Session); sampled output equals plain sampling for the same seed (the C++ Session's tokens).

Run: PYTHONPATH=build/python /usr/bin/python3 examples/python/pytorch_engine.py
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

import refdec


def data_dir() -> Path:
    """The shared data directory: $REFDEC_DATA_DIR, else $REFDEC_DEFAULT_DATA_DIR, else ../shared."""
    for var in ("REFDEC_DATA_DIR", "REFDEC_DEFAULT_DATA_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path(__file__).resolve().parents[2].parent / "shared"


def stories260k_path() -> Path:
    """Where stories260K.bin lives under the data directory."""
    return data_dir() / "models" / "stories260K" / "stories260K.bin"


class Llama2c:
    """A llama2.c v0 checkpoint as a PyTorch model: rotary on consecutive pairs, RMSNorm, SwiGLU."""

    def __init__(self, path: Path | str, dtype: torch.dtype = torch.float64):
        data = Path(path).read_bytes()
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("7i", data[:28])
        self.tied = vocab > 0
        self.vocab, self.dim, self.layers, self.heads, self.kv_heads = abs(vocab), dim, layers, heads, kv_heads
        self.head_dim = dim // heads
        self.max_seq_len = seq_len
        flat = torch.frombuffer(bytearray(data[28:]), dtype=torch.float32)
        offset = 0

        def take(*shape: int) -> torch.Tensor:
            nonlocal offset
            n = 1
            for s in shape:
                n *= s
            t = flat[offset:offset + n].view(*shape).to(dtype)
            offset += n
            return t

        kv_dim = kv_heads * self.head_dim
        self.embedding = take(self.vocab, dim)           # [vocab, dim]
        self.attn_norm = take(layers, dim)
        self.wq = take(layers, dim, dim)                 # [layers, out, in] as F.linear takes them
        self.wk = take(layers, kv_dim, dim)
        self.wv = take(layers, kv_dim, dim)
        self.wo = take(layers, dim, dim)
        self.ffn_norm = take(layers, dim)
        self.w1 = take(layers, hidden, dim)
        self.w2 = take(layers, dim, hidden)
        self.w3 = take(layers, hidden, dim)
        self.final_norm = take(dim)
        offset += seq_len * self.head_dim  # freq_cis_real and _imag: recomputed below
        self.output = self.embedding if self.tied else take(self.vocab, dim)
        self.dtype = dtype
        self.inv_freq = 10000.0 ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)

    def new_cache(self, capacity: int) -> "KvCache":
        """An empty KV cache of `capacity` entries for one sequence."""
        shape = (self.layers, capacity, self.kv_heads, self.head_dim)
        return KvCache(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype))

    def _rms_norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        pairs = x.reshape(x.shape[0], x.shape[1], -1, 2)  # [R, heads, D/2, 2]: llama2.c pairs (2i, 2i+1)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)

    def forward(self, plan: refdec.StepPlan, caches: list["KvCache"]) -> torch.Tensor:
        """Runs the step `plan` over `caches` (one per plan sequence, in order): writes every row's
        keys and values after the sequence's cached entries and lets row i attend to the cached
        prefix and to the step rows its packed mask row lists. Returns logits [plan.num_rows, vocab]."""
        rows, heads, kv_heads, hd = plan.num_rows, self.heads, self.kv_heads, self.head_dim
        group = heads // kv_heads
        indptr, lengths = plan.indptr.tolist(), plan.lengths.tolist()
        angles = torch.from_numpy(plan.positions).to(torch.float64).unsqueeze(-1) * self.inv_freq  # [R, D/2]
        cos, sin = angles.cos().to(self.dtype).unsqueeze(1), angles.sin().to(self.dtype).unsqueeze(1)
        # Per sequence an additive [n, cached + n] bias: 0 over the prefix and the visible step rows.
        bias = []
        for b in range(plan.batch):
            n, length = plan.rows(b), lengths[b]
            visible = step_mask(plan, b)
            full = torch.zeros(n, length + n, dtype=self.dtype)
            full[:, length:].masked_fill_(~visible, float("-inf"))
            bias.append(full)
        x = self.embedding[torch.from_numpy(plan.tokens).long()]  # [R, dim]
        scale = hd ** -0.5
        for layer in range(self.layers):
            h = self._rms_norm(x, self.attn_norm[layer])
            q = self._rope(torch.nn.functional.linear(h, self.wq[layer]).view(rows, heads, hd), cos, sin)
            k = self._rope(torch.nn.functional.linear(h, self.wk[layer]).view(rows, kv_heads, hd), cos, sin)
            v = torch.nn.functional.linear(h, self.wv[layer]).view(rows, kv_heads, hd)
            out = []
            for b, cache in enumerate(caches):
                first, n, length = indptr[b], indptr[b + 1] - indptr[b], lengths[b]
                # All of a sequence's step rows are written before any attends (a row sees its ancestors).
                cache.keys[layer, length:length + n] = k[first:first + n]
                cache.values[layer, length:length + n] = v[first:first + n]
                keys = cache.keys[layer, :length + n].repeat_interleave(group, dim=1)    # [S, heads, D]
                values = cache.values[layer, :length + n].repeat_interleave(group, dim=1)
                scores = torch.einsum("nhd,shd->hns", q[first:first + n], keys) * scale + bias[b]
                out.append(torch.einsum("hns,shd->nhd", scores.softmax(-1), values).reshape(n, heads * hd))
            x = x + torch.nn.functional.linear(torch.cat(out), self.wo[layer])
            h = self._rms_norm(x, self.ffn_norm[layer])
            gate = torch.nn.functional.silu(torch.nn.functional.linear(h, self.w1[layer]))
            x = x + torch.nn.functional.linear(gate * torch.nn.functional.linear(h, self.w3[layer]), self.w2[layer])
        return torch.nn.functional.linear(self._rms_norm(x, self.final_norm), self.output)


def step_mask(plan: refdec.StepPlan, b: int) -> torch.Tensor:
    """Sequence b's packed mask as a bool [rows(b), rows(b)] tensor: [i, j] when row i sees row j."""
    n, words = plan.rows(b), plan.mask_words(b)
    start = int(plan.mask_indptr[b])
    packed = torch.from_numpy(plan.mask[start:start + n * words]).view(n, words)  # int64 words holding uint64 bits
    bits = (packed.unsqueeze(-1) >> torch.arange(64)) & 1       # bit 63 via the sign: (-1 & 1) == 1
    return bits.view(n, words * 64)[:, :n].bool()


@dataclass
class KvCache:
    """One sequence's keys and values, [layers, capacity, kv_heads, head_dim] each, and its length."""
    keys: torch.Tensor
    values: torch.Tensor
    length: int = 0

    def apply(self, keep: refdec.KeepPlan, b: int) -> None:
        """Keeps the step rows keep.kept(b) after the cached entries, in order (the keep plan)."""
        kept = keep.kept(b)
        source = self.length + torch.tensor(kept)
        # Advanced indexing gathers a copy first, so moving rows down in place is safe.
        self.keys[:, self.length:self.length + len(kept)] = self.keys[:, source]
        self.values[:, self.length:self.length + len(kept)] = self.values[:, source]
        self.length = int(keep.lengths[b])


def decode(model: Llama2c, prompts: list[list[int]], drafters: list[refdec.Drafter], budget: int,
           max_new_tokens: int, references: list[list[list[int]]] | None = None,
           sampling: list[refdec.SamplingOptions | None] | None = None,
           stop_tokens: tuple[int, ...] = ()) -> list[list[int]]:
    """Decodes `prompts` as one batch, each with its drafter, verifying up to `budget` draft nodes
    per step (0: plain decoding). refdec's StepDriver runs the protocol (prefill, drafting, the
    plan, stop tokens and limits); this engine runs the forward pass, the walk (greedy, or
    sample-then-match with the C++ sampler's seeds) and its caches. Returns the outputs."""
    vocab, context = model.vocab, model.max_seq_len
    driver = refdec.StepDriver(vocab, context, prefill_chunk=0)
    caches: list[KvCache] = []  # one per active sequence, in the driver's slot order
    samplers = {}               # id -> (LogitsProcessor, TokenCounts) of a sampled sequence
    for b, prompt in enumerate(prompts):
        i = driver.add(prompt, references[b] if references else [], drafters[b],
                       max_new_tokens=max_new_tokens, stop_tokens=list(stop_tokens), budget=budget)
        if driver.active > len(caches):
            caches.append(model.new_cache(context + 64))
        if sampling and sampling[b] is not None and not sampling[b].is_greedy:
            samplers[i] = (refdec.LogitsProcessor(sampling[b]), refdec.TokenCounts(vocab))
            samplers[i][1].add_prompt(prompt)
    outputs: dict[int, list[int]] = {}
    while not driver.idle:
        if driver.prepare():
            plan = driver.plan
            logits = model.forward(plan, caches)  # [rows, vocab]
            targets = logits.argmax(-1)           # greedy choice at every row
            accepted = refdec.accept_greedy(plan, targets)
            indptr, num_nodes, prefill = plan.indptr.tolist(), plan.num_nodes.tolist(), driver.prefill
            for slot, i in enumerate(driver.ids):
                if i in samplers and not prefill[slot]:
                    processor, counts = samplers[i]
                    rows = logits[indptr[slot]:indptr[slot] + num_nodes[slot]].float().contiguous()
                    accepted[slot] = refdec.accept_sampled(plan, slot, rows, processor, counts, len(driver.output(i)))
            aux = [targets[indptr[b] + num_nodes[b]:indptr[b + 1]].tolist() for b in range(plan.batch)]
            driver.complete(accepted, aux)  # drafters told, stops and limits applied
            for slot, cache in enumerate(caches):
                cache.apply(driver.keep, slot)
            for slot in driver.left:
                del caches[slot]
        for u in driver.updates:
            outputs.setdefault(u.id, []).extend(u.tokens)
            if u.id in samplers and u.tokens:
                samplers[u.id][1].add_output(u.tokens)
    return [outputs.get(i, []) for i in range(len(prompts))]


def session_decode(path: Path, prompts: list[list[int]], max_new_tokens: int,
                   sampling: list[refdec.SamplingOptions | None] | None = None,
                   stop_tokens: tuple[int, ...] = ()) -> list[list[int]]:
    """refdec's own C++ plain decoding (Session, budget 0) of the same checkpoint, in float64."""
    model = refdec.LlamaModel.load_llama2c(path, torch.float64)
    session = refdec.Session(model, refdec.GenerateOptions(max_new_tokens=max_new_tokens, budget=0,
                                                           stop_tokens=list(stop_tokens)))
    ids = [session.add(p, sampling=sampling[b] if sampling else None) for b, p in enumerate(prompts)]
    outputs = {i: [] for i in ids}
    while not session.idle:
        for u in session.step():
            outputs[u.id] += u.tokens
    return [outputs[i] for i in ids]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="llama2.c checkpoint (default: stories260K)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--budget", type=int, default=16, help="draft nodes per step (0: plain decoding)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the sampled run")
    args = parser.parse_args()
    path = args.model or stories260k_path()
    if not path.exists():
        print(f"skipped: {path} not found (set REFDEC_DATA_DIR)")
        return 77
    torch.set_num_threads(1)
    model = Llama2c(path)
    # BOS alone (drafting from its own output), and two prompts cut from a first plain run that
    # also get that run as a reference document (a cached answer to copy from).
    first = decode(model, [[1]], [refdec.NoDrafter()], 0, args.max_new_tokens)[0]
    prompts = [[1], [1] + first[:5], [1] + first[10:14]]
    references = [[], [first], [first]]
    drafters = [refdec.LlmaDrafter(min_match=1, continuation=16, self_reference=True) for _ in prompts]

    plain = decode(model, prompts, [refdec.NoDrafter() for _ in prompts], 0, args.max_new_tokens)
    spec = decode(model, prompts, drafters, args.budget, args.max_new_tokens, references=references)
    cxx = session_decode(path, prompts, args.max_new_tokens)
    steps = sum(d.stats.steps for d in drafters)
    print(f"greedy: {sum(map(len, spec))} tokens in {steps} steps, "
          f"{sum(map(len, spec)) / steps:.2f} tokens/step")
    print(f"identical to plain greedy decoding: {spec == plain == cxx}")

    sampling = [refdec.SamplingOptions(temperature=1.0, top_p=0.9, seed=args.seed + b) for b in range(len(prompts))]
    sampled = decode(model, prompts, [refdec.LlmaDrafter(min_match=1, continuation=16, self_reference=True) for _ in prompts],
                     args.budget, args.max_new_tokens, references=references, sampling=sampling)
    cxx_sampled = session_decode(path, prompts, args.max_new_tokens, sampling=sampling)
    print(f"sampled (seeds {args.seed}..): same tokens as refdec's C++ plain sampling: {sampled == cxx_sampled}")
    return 0 if spec == plain == cxx and sampled == cxx_sampled else 1


if __name__ == "__main__":
    sys.exit(main())
