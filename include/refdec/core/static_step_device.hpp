// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Fused operations of the static-shape step (torch/static_llama.hpp), as plain data and
// per-element logic shared by the CUDA kernels (refdec/cuda/static_kernels.cuh) and the host tests:
//
// - rotary scatter: one pass over a step's fused q/k/v rows rotates q (scaled by 1 / sqrt(head
//   dimension)) into its own buffer, rotates k and writes it, and writes v, into the cache, where
//   the step's torch operations take four launches (a cast, the complex product, a cast back and a
//   scatter);
// - SwiGLU: silu(gate) * up in one pass instead of two;
// - the linear layers' products at a few rows (plain decoding, small batches): a kernel that
//   streams each weight once for all rows, where cuBLAS's general product reached 78% of the
//   weights' read at one row on an H200 (docs/gpu.md);
// - attention of every step row over its sequence's cache (scores, the step's additive mask,
//   softmax and the weighted values in one launch, entries the mask removes never read), where
//   the torch path launches two products, an addition, a softmax and permutations per layer.
//
// An engine or a benchmark compiled with nvcc hands StaticKernels (the launchers) to
// StaticLlama::set_kernels(); without them the step runs torch operations only.

#include <cstdint>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// Element type of the fused operations' tensors.
enum class ElementType : std::int32_t {
  kFloat32 = 0,
  kBFloat16 = 1,
  kFloat16 = 2,
};

/// A rotary scatter over `rows` padded rows (see the file comment). Rows hold heads of head_dim
/// elements whose pairs (2j, 2j + 1) rotate by the row's position (turns: cos, sin). Keys and
/// values of row r go to element `written[r]` of sequence `sequence[r]` (a contiguous cache; a
/// paged pool has one "sequence", stride 0, and pool slots as elements).
struct RotaryScatterArgs {
  const void* qkv = nullptr;                // [rows, (heads + 2 kv_heads) * head_dim]
  const float* turns = nullptr;             // [positions, head_dim / 2, 2] cos, sin
  const std::int64_t* positions = nullptr;  // [rows]
  const std::int64_t* sequence = nullptr;   // [rows]
  const std::int64_t* written = nullptr;    // [rows] element (entry or slot) the row's keys and values go to
  void* q = nullptr;                        // [rows, heads, head_dim]: rotated, scaled
  void* keys = nullptr;                     // the layer's keys: sequence * stride_sequence + head * stride_head + written * stride_element
  void* values = nullptr;                   // the layer's values, same strides
  std::int64_t rows = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t stride_sequence = 0, stride_head = 0, stride_element = 0;  // in elements
  float scale = 1.0f;                                                     // q's factor
  ElementType type = ElementType::kFloat32;

  /// Pairs processed: rows x (heads + 2 kv_heads) x head_dim / 2 (one thread each).
  REFDEC_HOST_DEVICE std::int64_t pairs() const { return rows * (heads + 2 * kv_heads) * (head_dim / 2); }
};

/// Where pair `index` of a rotary scatter is read and written, and how it is turned.
struct RotaryPair {
  std::int32_t part = 0;    // 0: q (rotated, scaled), 1: keys (rotated), 2: values (copied)
  std::int64_t source = 0;  // element of qkv: the pair's first
  std::int64_t target = 0;  // element of q, keys or values: the pair's first
  std::int64_t turn = 0;    // element of turns: the pair's cos (its sin follows)
};

/// The RotaryPair of pair `index` (< a.pairs()).
REFDEC_HOST_DEVICE RotaryPair rotary_pair(const RotaryScatterArgs& a, std::int64_t index) {
  const std::int64_t half = a.head_dim / 2, heads_all = a.heads + 2 * a.kv_heads;
  const std::int64_t j = index % half;
  const std::int64_t h = (index / half) % heads_all;
  const std::int64_t r = index / (half * heads_all);
  RotaryPair p;
  p.source = (r * heads_all + h) * a.head_dim + 2 * j;
  p.turn = (a.positions[r] * half + j) * 2;
  if (h < a.heads) {
    p.part = 0;
    p.target = (r * a.heads + h) * a.head_dim + 2 * j;
  } else {
    p.part = h < a.heads + a.kv_heads ? 1 : 2;
    const std::int64_t kv = p.part == 1 ? h - a.heads : h - a.heads - a.kv_heads;
    p.target = a.sequence[r] * a.stride_sequence + kv * a.stride_head + a.written[r] * a.stride_element + 2 * j;
  }
  return p;
}

/// The pair (x0, x1) turned by (c, s) and scaled: (x0 c - x1 s, x0 s + x1 c) x scale, with the
/// scale folded into c and s first (as the torch path's complex factors are).
REFDEC_HOST_DEVICE void turn_pair(float x0, float x1, float c, float s, float scale, float& y0, float& y1) {
  const float cs = c * scale, ss = s * scale;
  y0 = x0 * cs - x1 * ss;
  y1 = x0 * ss + x1 * cs;
}

/// SwiGLU over `rows` rows of [gate, up] (each `hidden` wide): out = silu(gate) * up.
struct SwigluArgs {
  const void* gate_up = nullptr;  // [rows, 2 hidden]
  void* out = nullptr;            // [rows, hidden]
  std::int64_t rows = 0, hidden = 0;
  ElementType type = ElementType::kFloat32;
};

/// The most rows the linear kernel takes; more go to torch's products (cuBLAS), which keep a
/// step of many rows near a step of one. Every warp reads the rows' inputs again, through L1:
/// past about four rows that traffic rivals the weights' stream.
inline constexpr std::int64_t kLinearKernelRows = 4;

/// Bytes of one element of `type`.
REFDEC_HOST_DEVICE constexpr std::int64_t element_bytes(ElementType type) { return type == ElementType::kFloat32 ? 4 : 2; }

/// A product of `rows` input rows with a linear layer's weight: out = x W^T, or out += x W^T
/// (`accumulate`: a residual connection), summed in float32 and rounded once to `type`.
struct LinearArgs {
  const void* x = nullptr;       // [rows, in], row-major
  const void* weight = nullptr;  // [out_features, in], row-major (as torch.nn.Linear holds it)
  void* out = nullptr;           // [rows, out_features], row-major
  std::int64_t rows = 0, in = 0, out_features = 0;
  bool accumulate = false;
  ElementType type = ElementType::kFloat32;
};

/// Whether `p` is a non-null address the fused kernels' 16-byte loads may start at.
REFDEC_HOST_DEVICE bool aligned_for_loads(const void* p) { return p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Whether the linear kernel takes a product of `rows` rows of `in` elements of `type`: 1 to
/// kLinearKernelRows rows, and rows a whole number of 16-byte loads long (with x, weight and out
/// 16-byte aligned, which the launcher checks).
REFDEC_HOST_DEVICE constexpr bool linear_kernel_takes(std::int64_t rows, std::int64_t in, ElementType type) {
  return rows >= 1 && rows <= kLinearKernelRows && in > 0 && (in * element_bytes(type)) % 16 == 0;
}

/// Attention of every step row (batch x step_rows of them) over its sequence's `entries` cache
/// entries: out = softmax(q k^T + bias) v per query head, query head h reading kv head
/// h / (heads / kv_heads). q is rotated and scaled already (the rotary scatter's output); bias
/// is 0 where the row sees the entry and -inf elsewhere. Entry e of sequence b lies at element
/// slots[b entries + e] of the cache with stride 0 per sequence (a paged pool), or without
/// `slots` at element e of sequence b (a contiguous cache): strides as RotaryScatterArgs'.
struct AttentionArgs {
  const void* q = nullptr;              // [batch * step_rows, heads, head_dim]
  const void* keys = nullptr;           // the layer's keys
  const void* values = nullptr;         // the layer's values, same strides
  const void* bias = nullptr;           // [batch, step_rows, entries], element type
  const std::int64_t* slots = nullptr;  // [batch, entries], or null
  void* out = nullptr;                  // [batch * step_rows, heads * head_dim]
  std::int64_t batch = 0, step_rows = 0, heads = 0, kv_heads = 0, head_dim = 0, entries = 0;
  std::int64_t stride_sequence = 0, stride_head = 0, stride_element = 0;  // in elements
  ElementType type = ElementType::kFloat32;
};

/// The most entries and the largest head the attention kernel takes: one row's scores for one
/// head (4 bytes an entry), its threads' partial sums of the values (at most 8 KB) and the row's
/// query fit a block's 48 KB of shared memory.
inline constexpr std::int64_t kAttentionKernelEntries = 9 * 1024, kAttentionKernelHeadDim = 256;

/// Where entry `e` of sequence `b`'s kv head `kv` starts in the cache (element index).
REFDEC_HOST_DEVICE std::int64_t attention_entry(const AttentionArgs& a, std::int64_t b, std::int64_t kv, std::int64_t e) {
  const std::int64_t element = a.slots != nullptr ? a.slots[b * a.entries + e] : e;
  return b * a.stride_sequence + kv * a.stride_head + element * a.stride_element;
}

/// Whether the attention kernel takes heads of `head_dim` elements of `type` over `entries`
/// entries: heads a whole number of 16-byte loads long (the cache's entries then start 16-byte
/// aligned where its base is), at most kAttentionKernelHeadDim, and at most
/// kAttentionKernelEntries entries.
REFDEC_HOST_DEVICE constexpr bool attention_kernel_takes(std::int64_t head_dim, std::int64_t entries, ElementType type) {
  return head_dim >= 1 && head_dim <= kAttentionKernelHeadDim && (head_dim * element_bytes(type)) % 16 == 0 && entries >= 1 &&
         entries <= kAttentionKernelEntries;
}

/// The fused operations' launchers (refdec/cuda/static_kernels.cuh: cuda_static_kernels()), each
/// asynchronous on `stream` (a cudaStream_t).
struct StaticKernels {
  void (*rotary_scatter)(const RotaryScatterArgs& args, void* stream) = nullptr;
  void (*swiglu)(const SwigluArgs& args, void* stream) = nullptr;
  /// Optional: without it the products stay torch's.
  void (*linear)(const LinearArgs& args, void* stream) = nullptr;
  /// Optional: without it attention stays torch's.
  void (*attention)(const AttentionArgs& args, void* stream) = nullptr;
};

REFDEC_NAMESPACE_END
