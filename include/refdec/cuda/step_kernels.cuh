// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// CUDA kernels of a batched verification step over raw device pointers and a stream: layout and
// packed ancestor mask from the parent array, the target's argmax per node, the greedy walk per
// sequence, and KV compaction of the accepted paths for every layer in one launch. The per-thread
// logic lives in refdec/core/step_layout.hpp, shared with the host reference. Launches are
// asynchronous; launch errors throw refdec::Error, device code never throws.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/core/step_layout.hpp"
#include "refdec/cuda/check.cuh"

REFDEC_NAMESPACE_BEGIN

namespace detail {

// Kernels are templates (on their block size) so that a header included by several translation
// units defines them once.

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    step_layout_kernel(const std::int32_t* parents, const std::int64_t* lengths, std::int32_t batch,
                       std::int32_t padded, std::int32_t* num_nodes, std::int32_t* depth, std::int64_t* positions,
                       std::uint64_t* mask, std::int32_t* first_child, std::int32_t* next_sibling) {
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // b * T + i
  if (k >= static_cast<std::int64_t>(batch) * padded) return;
  const auto b = static_cast<std::int32_t>(k / padded);
  const auto i = static_cast<std::int32_t>(k % padded);
  const std::int32_t* row = parents + static_cast<std::int64_t>(b) * padded;
  // Every thread of the row scans it for the tree's end: O(T) reads of one cached row, cheaper
  // than a second launch.
  const std::int32_t n = tree_size(row, padded);
  if (i == 0) num_nodes[b] = n;
  layout_node(row, padded, n, i, depth[k], mask + k * mask_words_for(padded), first_child[k], next_sibling[k]);
  positions[k] = (lengths != nullptr ? lengths[b] : 0) + depth[k];
}

inline __device__ float logit_to_float(float x) { return x; }
inline __device__ float logit_to_float(__half x) { return __half2float(x); }
inline __device__ float logit_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <int kThreads, typename Logit>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const Logit* logits, std::int32_t vocab, std::int32_t* out) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most one per lane of the last warp");
  const Logit* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  float best = 0.0f;
  std::int32_t best_index = -1;  // -1: this thread has seen nothing yet
  for (std::int32_t v = static_cast<std::int32_t>(threadIdx.x); v < vocab; v += kThreads) {
    const float x = logit_to_float(row[v]);
    if (best_index < 0 || argmax_prefers(x, v, best, best_index)) {
      best = x;
      best_index = v;
    }
  }
  // argmax_prefers is a total order, so combining in any tree shape gives the host's answer.
  const auto combine = [&](float other, std::int32_t other_index) {
    if (other_index >= 0 && (best_index < 0 || argmax_prefers(other, other_index, best, best_index))) {
      best = other;
      best_index = other_index;
    }
  };
  for (int offset = 16; offset > 0; offset /= 2)
    combine(__shfl_down_sync(0xffffffffu, best, offset), __shfl_down_sync(0xffffffffu, best_index, offset));
  __shared__ float warp_best[kThreads / 32];
  __shared__ std::int32_t warp_index[kThreads / 32];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_index[warp] = best_index;
  }
  __syncthreads();
  if (warp != 0) return;
  best = lane < kThreads / 32 ? warp_best[lane] : 0.0f;
  best_index = lane < kThreads / 32 ? warp_index[lane] : -1;
  for (int offset = 16; offset > 0; offset /= 2)
    combine(__shfl_down_sync(0xffffffffu, best, offset), __shfl_down_sync(0xffffffffu, best_index, offset));
  if (lane == 0) out[blockIdx.x] = best_index < 0 ? 0 : best_index;
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    greedy_verify_kernel(const Token* tokens, const std::int32_t* first_child, const std::int32_t* next_sibling,
                         const std::int32_t* num_nodes, const Token* target, std::int32_t batch, std::int32_t padded,
                         std::int32_t* kept, std::int32_t* num_accepted, Token* bonus) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x) * kThreads + static_cast<std::int32_t>(threadIdx.x);
  if (b >= batch) return;
  const std::int64_t row = static_cast<std::int64_t>(b) * padded;
  greedy_verify_sequence(tokens + row, first_child + row, next_sibling + row, target + row, num_nodes[b], padded,
                         kept + row, num_accepted[b], bonus[b]);
}

// Grid: x over words of an entry, y over sequences, z over (layer, keys or values). Each thread
// moves one word of every kept entry of its sequence in increasing entry order (see
// compact_element() for why that is exact in place).
template <int kThreads, typename Word>
__global__ void __launch_bounds__(kThreads)
    compact_kv_kernel(Word* keys, Word* values, std::int32_t batch, std::int64_t capacity, std::int64_t entry_words,
                      const std::int64_t* lengths, const std::int32_t* kept, const std::int32_t* num_accepted,
                      std::int32_t padded) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= entry_words) return;
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.y);
  const std::int64_t layer = blockIdx.z / 2;
  Word* cache = blockIdx.z % 2 == 0 ? keys : values;
  const std::int32_t* row = kept + static_cast<std::int64_t>(b) * padded;
  const std::int32_t wanted = num_accepted[b] + 1;
  const std::int32_t n = valid_kept(row, wanted < padded ? wanted : padded, lengths[b], capacity);
  compact_element(cache + (layer * batch + b) * capacity * entry_words, entry_words, lengths[b], row, n, e);
}

template <typename Word>
void launch_compact_kv(void* keys, void* values, std::int32_t layers, std::int32_t batch, std::int64_t capacity,
                       std::int64_t entry_bytes, const std::int64_t* lengths, const std::int32_t* kept,
                       const std::int32_t* num_accepted, std::int32_t padded, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const std::int64_t words = entry_bytes / static_cast<std::int64_t>(sizeof(Word));
  const dim3 grid(static_cast<unsigned>((words + kThreads - 1) / kThreads), static_cast<unsigned>(batch),
                  static_cast<unsigned>(2 * layers));
  compact_kv_kernel<kThreads, Word><<<grid, kThreads, 0, stream>>>(static_cast<Word*>(keys), static_cast<Word*>(values),
                                                                   batch, capacity, words, lengths, kept, num_accepted,
                                                                   padded);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

/// Lays out a padded batch of trees on the device (build_step_layout() on the host): from
/// `parents` ([batch, padded] int32, see step_layout.hpp) and the cached lengths (`lengths`, [batch]
/// int64, or null for 0) writes each sequence's node count, each node's depth, position, packed
/// mask row, first child and next sibling.
inline void launch_step_layout(const std::int32_t* parents,  // [B, T] int32
                               const std::int64_t* lengths,  // [B] int64 or null
                               std::int32_t batch, std::int32_t padded,
                               std::int32_t* num_nodes,      // [B] int32
                               std::int32_t* depth,          // [B, T] int32
                               std::int64_t* positions,      // [B, T] int64
                               std::uint64_t* mask,          // [B, T, mask_words_for(T)] uint64
                               std::int32_t* first_child,    // [B, T] int32
                               std::int32_t* next_sibling,   // [B, T] int32
                               cudaStream_t stream) {
  REFDEC_CHECK(batch >= 1 && padded >= 1, "launch_step_layout: batch " << batch << " and padded node count " << padded
                                                                       << " must be positive");
  constexpr int kThreads = 128;
  const std::int64_t threads = static_cast<std::int64_t>(batch) * padded;
  detail::step_layout_kernel<kThreads><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      parents, lengths, batch, padded, num_nodes, depth, positions, mask, first_child, next_sibling);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// Writes the index of the largest logit (argmax_prefers(): ties to the first, NaN wins) of each of
/// `rows` rows of `vocab` logits. `Logit` is float, __half or __nv_bfloat16.
template <typename Logit>
void launch_argmax(const Logit* logits,  // [rows, vocab] e.g. [B * T, V]
                   std::int64_t rows, std::int32_t vocab,
                   std::int32_t* out,    // [rows] int32
                   cudaStream_t stream) {
  REFDEC_CHECK(rows >= 1 && rows <= 0x7fffffff && vocab >= 1,
               "launch_argmax: " << rows << " rows of " << vocab << " logits");
  constexpr int kThreads = 256;
  detail::argmax_kernel<kThreads, Logit><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// Greedy verification of every sequence on the device (greedy_verify_sequence(), one thread per
/// sequence): writes the kept step rows (0, the accepted draft nodes, then -1), the number of
/// accepted draft nodes and the bonus token.
inline void launch_greedy_verify(const Token* tokens,               // [B, T] int32 node tokens
                                 const std::int32_t* first_child,   // [B, T] int32 (launch_step_layout)
                                 const std::int32_t* next_sibling,  // [B, T] int32 (launch_step_layout)
                                 const std::int32_t* num_nodes,     // [B] int32 (launch_step_layout)
                                 const Token* target,               // [B, T] int32 (launch_argmax)
                                 std::int32_t batch, std::int32_t padded,
                                 std::int32_t* kept,                // [B, T] int32
                                 std::int32_t* num_accepted,        // [B] int32
                                 Token* bonus,                      // [B] int32
                                 cudaStream_t stream) {
  REFDEC_CHECK(batch >= 1 && padded >= 1, "launch_greedy_verify: batch " << batch << " and padded node count "
                                                                         << padded << " must be positive");
  constexpr int kThreads = 64;
  detail::greedy_verify_kernel<kThreads><<<static_cast<unsigned>((batch + kThreads - 1) / kThreads), kThreads, 0,
                                           stream>>>(tokens, first_child, next_sibling, num_nodes, target, batch,
                                                     padded, kept, num_accepted, bonus);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// KV compaction of every layer, keys and values, in one launch (KvCache::commit on the device):
/// for each sequence b, the entries at slots lengths[b] + kept[b][k], k <= num_accepted[b], move to
/// slots lengths[b] + k. `keys` and `values` are [layers, batch, capacity, entry_bytes] of any
/// element type (entry_bytes = kv_heads * head_dim * element size). A plan that is not an
/// increasing path inside the cache is cut at its first bad entry (valid_kept()). Lengths are not
/// advanced here: the caller adds num_accepted + 1 after the launch.
inline void launch_compact_kv(void* keys, void* values,  // [layers, B, capacity, entry_bytes] bytes
                              std::int32_t layers, std::int32_t batch, std::int64_t capacity,
                              std::int64_t entry_bytes,
                              const std::int64_t* lengths,       // [B] int64 cached entries before the step
                              const std::int32_t* kept,          // [B, T] int32 (launch_greedy_verify)
                              const std::int32_t* num_accepted,  // [B] int32 (launch_greedy_verify)
                              std::int32_t padded, cudaStream_t stream) {
  REFDEC_CHECK(layers >= 1 && layers <= 32767 && batch >= 1 && batch <= 65535 && capacity >= 1 && entry_bytes >= 1 &&
                   padded >= 1,
               "launch_compact_kv: layers " << layers << ", batch " << batch << ", capacity " << capacity
                                            << ", entry of " << entry_bytes << " bytes, " << padded
                                            << " nodes: sizes must be positive, layers <= 32767, batch <= 65535");
  // The widest word that divides the entry and both base addresses: entries then start on word
  // boundaries everywhere, and each thread moves 16 bytes where it can.
  const auto aligned = [&](std::int64_t bytes) {
    return entry_bytes % bytes == 0 && reinterpret_cast<std::uintptr_t>(keys) % bytes == 0 &&
           reinterpret_cast<std::uintptr_t>(values) % bytes == 0;
  };
  if (aligned(16))
    detail::launch_compact_kv<uint4>(keys, values, layers, batch, capacity, entry_bytes, lengths, kept, num_accepted,
                                     padded, stream);
  else if (aligned(8))
    detail::launch_compact_kv<std::uint64_t>(keys, values, layers, batch, capacity, entry_bytes, lengths, kept,
                                             num_accepted, padded, stream);
  else if (aligned(4))
    detail::launch_compact_kv<std::uint32_t>(keys, values, layers, batch, capacity, entry_bytes, lengths, kept,
                                             num_accepted, padded, stream);
  else if (aligned(2))
    detail::launch_compact_kv<std::uint16_t>(keys, values, layers, batch, capacity, entry_bytes, lengths, kept,
                                             num_accepted, padded, stream);
  else
    detail::launch_compact_kv<std::uint8_t>(keys, values, layers, batch, capacity, entry_bytes, lengths, kept,
                                            num_accepted, padded, stream);
}

REFDEC_NAMESPACE_END
