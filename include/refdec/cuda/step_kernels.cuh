// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// CUDA kernels of a batched verification step over raw device pointers and a stream, fed by the
// step plan (refdec/core/step_plan.hpp) copied to the device as it is: the target's argmax per plan
// row, the greedy walk per sequence (keep rows in the plan's row layout), and KV compaction of
// every sequence's keep rows for all layers, keys and values, in one launch. Trees are laid out
// once, on the host, by plan_step(); nothing here recomputes tokens, positions, links or masks.
// The per-thread logic lives in refdec/core/step_device.hpp, shared with the host tests; its
// references are the core functions (accept(), keep_accepted(), KvStore::commit()). Launches are
// asynchronous; bad sizes throw refdec::Error before any CUDA call, device code never throws.
//
// One greedy step for B sequences and R = plan.rows() plan rows:
//
//   copy plan.indptr [B + 1], plan.num_nodes [B], plan.tokens / first_child / next_sibling [R]
//   the engine's forward over the plan -> logits [R, V]
//   launch_argmax(logits, R, V, target)                       target [R]
//   launch_greedy_verify(..., target, B, R, kept, num_kept, bonus)
//   launch_compact_kv(sequences, ..., lengths, indptr, R, kept, num_kept)
//   new cached length of sequence b: lengths[b] + num_kept[b]; emitted tokens: the kept rows'
//   tokens after the root, then bonus[b]
//
// A keep plan computed on the host (any walk, keep_accepted()) reaches launch_compact_kv() through
// lay_out_keep(): rows of sequence b go to kept + indptr[b], their count to num_kept[b].

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/core/step_device.hpp"
#include "refdec/cuda/check.cuh"
#include "refdec/cuda/elements.cuh"

REFDEC_NAMESPACE_BEGIN

namespace detail {

// Kernels are templates (on their block size) so that a header included by several translation
// units defines them once.

template <int kThreads, typename Logit>
__global__ void __launch_bounds__(kThreads) argmax_kernel(const Logit* logits,  // [gridDim.x, vocab]
                                                          std::int32_t vocab,
                                                          std::int32_t* out) {  // [gridDim.x]
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most one per lane of the last warp");
  const Logit* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  float best = 0.0f;
  std::int32_t best_index = -1;  // -1: this thread has seen nothing yet
  for (std::int32_t v = static_cast<std::int32_t>(threadIdx.x); v < vocab; v += kThreads) {
    const float x = element_to_float(row[v]);
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
__global__ void __launch_bounds__(kThreads) greedy_verify_kernel(const std::int32_t* indptr,        // [B + 1]
                                                                 const std::int32_t* num_nodes,     // [B]
                                                                 const Token* tokens,               // [R]
                                                                 const std::int32_t* first_child,   // [R]
                                                                 const std::int32_t* next_sibling,  // [R]
                                                                 const Token* target,               // [R]
                                                                 std::int32_t batch, std::int32_t rows,
                                                                 std::int32_t* kept,      // [R]
                                                                 std::int32_t* num_kept,  // [B]
                                                                 Token* bonus) {          // [B]
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x) * kThreads + static_cast<std::int32_t>(threadIdx.x);
  if (b >= batch) return;
  greedy_verify_sequence(indptr, num_nodes, tokens, first_child, next_sibling, target, rows, b, kept, num_kept, bonus);
}

// Grid: x over (part, word of an entry), part = 0 .. 2 * layers - 1 (keys of every layer, then
// values); y over sequences. Each thread moves one word of every kept entry of its sequence in
// increasing entry order (see compact_element() for why that is exact in place).
template <int kThreads, typename Word>
__global__ void __launch_bounds__(kThreads) compact_kv_kernel(void* const* sequences,  // [B] each [parts, capacity, entry_words] Word
                                                              std::int64_t parts, std::int64_t capacity, std::int64_t entry_words,
                                                              const std::int64_t* lengths,  // [B]
                                                              const std::int32_t* indptr,   // [B + 1]
                                                              std::int32_t rows,
                                                              const std::int32_t* kept,        // [R]
                                                              const std::int32_t* num_kept) {  // [B]
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;       // part * entry_words + e
  if (t >= parts * entry_words) return;
  const auto b = static_cast<std::int32_t>(blockIdx.y);
  const std::int64_t part = t / entry_words;
  const std::int64_t e = t % entry_words;
  const std::int64_t length = lengths[b];
  const KeptRows keep = compaction_rows(indptr, rows, kept, num_kept, b, length, capacity);
  Word* sequence = static_cast<Word*>(sequences[b]) + part * capacity * entry_words;
  compact_element(sequence, entry_words, length, keep.rows, keep.count, e);
}

template <typename Word>
void launch_compact_kv(void* const* sequences,  // [B] each [2 * layers, capacity, entry_bytes] bytes
                       std::int32_t layers, std::int32_t batch, std::int64_t capacity, std::int64_t entry_bytes,
                       const std::int64_t* lengths,  // [B]
                       const std::int32_t* indptr,   // [B + 1]
                       std::int32_t rows,
                       const std::int32_t* kept,      // [R]
                       const std::int32_t* num_kept,  // [B]
                       cudaStream_t stream) {
  constexpr int kThreads = 128;
  const std::int64_t words = entry_bytes / static_cast<std::int64_t>(sizeof(Word));
  const std::int64_t parts = 2 * static_cast<std::int64_t>(layers);
  const dim3 grid(static_cast<unsigned>((parts * words + kThreads - 1) / kThreads), static_cast<unsigned>(batch));
  compact_kv_kernel<kThreads, Word>
      <<<grid, kThreads, 0, stream>>>(sequences, parts, capacity, words, lengths, indptr, rows, kept, num_kept);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// The widest word (16, 8, 4, 2 or 1 bytes) that divides `entry_bytes` and, with `host_sequences`
/// ([batch] host pointers, or null), every sequence's address.
inline std::int64_t compact_word_bytes(const void* const* host_sequences,  // [batch] host pointers, or null
                                       std::int32_t batch, std::int64_t entry_bytes) {
  std::int64_t word = 16;
  while (word > 1 && entry_bytes % word != 0) word /= 2;
  if (host_sequences != nullptr)
    for (std::int32_t b = 0; b < batch; ++b)
      while (word > 1 && reinterpret_cast<std::uintptr_t>(host_sequences[b]) % static_cast<std::uintptr_t>(word) != 0) word /= 2;
  return word;
}

}  // namespace detail

/// Writes the index of the largest logit (argmax_prefers(): ties to the first, NaN wins) of each of
/// `rows` rows of `vocab` logits. `Logit` is float, __half or __nv_bfloat16.
template <typename Logit>
void launch_argmax(const Logit* logits,  // [rows, vocab] e.g. [R, V], one row per plan row
                   std::int64_t rows, std::int32_t vocab,
                   std::int32_t* out,  // [rows] int32
                   cudaStream_t stream) {
  REFDEC_CHECK(rows >= 1 && rows <= 0x7fffffff && vocab >= 1, "launch_argmax: " << rows << " rows of " << vocab << " logits");
  constexpr int kThreads = 256;
  detail::argmax_kernel<kThreads, Logit><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// Greedy verification of every sequence of a plan on the device (greedy_verify_sequence(), one
/// thread per sequence; on the host: accept() with ChoiceArray, then keep_accepted()). Writes each
/// sequence's keep rows in the plan's row layout (kept[indptr[b]] = 0, then the accepted draft
/// nodes; later rows of the sequence are left as they were), num_kept[b] = accepted + 1 and the
/// bonus token. The plan arrays are StepPlan's, copied as they are.
inline void launch_greedy_verify(const std::int32_t* indptr,             // [B + 1] int32 plan.indptr
                                 const std::int32_t* num_nodes,          // [B] int32 plan.num_nodes
                                 const Token* tokens,                    // [R] int32 plan.tokens
                                 const std::int32_t* first_child,        // [R] int32 plan.first_child (local indices)
                                 const std::int32_t* next_sibling,       // [R] int32 plan.next_sibling (local indices)
                                 const Token* target,                    // [R] int32 target's token per row (launch_argmax)
                                 std::int32_t batch, std::int32_t rows,  // B, R = plan.rows()
                                 std::int32_t* kept,                     // [R] int32 keep rows, the plan's row layout
                                 std::int32_t* num_kept,                 // [B] int32 keep rows per sequence
                                 Token* bonus,                           // [B] int32 bonus token per sequence
                                 cudaStream_t stream) {
  REFDEC_CHECK(batch >= 1 && rows >= batch, "launch_greedy_verify: batch " << batch << " with " << rows
                                                                           << " plan rows: a plan needs a sequence and"
                                                                              " at least one row (its root) per sequence");
  REFDEC_CHECK(indptr != nullptr && num_nodes != nullptr && tokens != nullptr && first_child != nullptr && next_sibling != nullptr &&
                   target != nullptr && kept != nullptr && num_kept != nullptr && bonus != nullptr,
               "launch_greedy_verify: a null array");
  constexpr int kThreads = 64;
  detail::greedy_verify_kernel<kThreads><<<static_cast<unsigned>((batch + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      indptr, num_nodes, tokens, first_child, next_sibling, target, batch, rows, kept, num_kept, bonus);
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// KV compaction of every sequence's keep rows, all layers, keys and values, in one launch
/// (KvStore::commit() on the device): for sequence b, the entries at slots lengths[b] + kept[k]
/// move to slots lengths[b] + k, k = 0 .. num_kept[b] - 1, with kept = kept + indptr[b] (as
/// launch_greedy_verify() writes it, or a host KeepPlan laid out by lay_out_keep()).
///
/// Each sequence has its own buffer, as ContiguousKvStore holds it: sequences[b] points to
/// [2 * layers, capacity, entry_bytes] bytes, the keys of every layer then the values (the store's
/// [2, layers, capacity, kv_heads, head_dim]; entry_bytes = kv_heads * head_dim * element size).
/// Any element type works: entries are moved as words of the widest size (16, 8, 4, 2 or 1
/// bytes) that divides entry_bytes and every sequence's address. The addresses are checked on the
/// host copy `host_sequences` of the pointer array ([B], the same addresses as `sequences`); with
/// null instead, the caller guarantees that every buffer starts on a 16-byte boundary (cudaMalloc
/// and tensors at storage offset 0 do) and the word is chosen by entry_bytes alone.
///
/// A keep list that is not increasing, not within the sequence's step rows or not inside the
/// capacity is cut at its first bad entry (valid_kept()). Lengths are not advanced here: the
/// caller's new cached length of sequence b is lengths[b] + num_kept[b].
inline void launch_compact_kv(void* const* sequences,             // [B] device array of device pointers, each
                                                                  //     [2 * layers, capacity, entry_bytes] bytes
                              const void* const* host_sequences,  // [B] host copy of `sequences`, or null (see above)
                              std::int32_t layers, std::int32_t batch, std::int64_t capacity, std::int64_t entry_bytes,
                              const std::int64_t* lengths,   // [B] int64 cached entries before the step
                              const std::int32_t* indptr,    // [B + 1] int32 plan.indptr
                              std::int32_t rows,             // R = plan.rows()
                              const std::int32_t* kept,      // [R] int32 keep rows, the plan's row layout
                              const std::int32_t* num_kept,  // [B] int32 keep rows per sequence
                              cudaStream_t stream) {
  REFDEC_CHECK(layers >= 1 && batch >= 1 && batch <= 65535 && capacity >= 1 && entry_bytes >= 1 && rows >= batch,
               "launch_compact_kv: layers " << layers << ", batch " << batch << ", capacity " << capacity << ", entry of " << entry_bytes
                                            << " bytes, " << rows
                                            << " plan rows: sizes must be positive, batch <= 65535, a row per sequence");
  // One thread per word of an entry of each part: the grid's x must stay below 2^31 blocks even
  // with single-byte words.
  REFDEC_CHECK(2 * static_cast<std::int64_t>(layers) * entry_bytes <= (std::int64_t{1} << 37),
               "launch_compact_kv: " << layers << " layers of " << entry_bytes << "-byte entries is too large");
  REFDEC_CHECK(sequences != nullptr && lengths != nullptr && indptr != nullptr && kept != nullptr && num_kept != nullptr,
               "launch_compact_kv: a null array (sequences, lengths, indptr, kept or num_kept)");
  if (host_sequences != nullptr)
    for (std::int32_t b = 0; b < batch; ++b)
      REFDEC_CHECK(host_sequences[b] != nullptr, "launch_compact_kv: sequence " << b << " has no buffer");
  switch (detail::compact_word_bytes(host_sequences, batch, entry_bytes)) {
    case 16:
      detail::launch_compact_kv<uint4>(sequences, layers, batch, capacity, entry_bytes, lengths, indptr, rows, kept, num_kept, stream);
      break;
    case 8:
      detail::launch_compact_kv<std::uint64_t>(sequences, layers, batch, capacity, entry_bytes, lengths, indptr, rows, kept, num_kept,
                                               stream);
      break;
    case 4:
      detail::launch_compact_kv<std::uint32_t>(sequences, layers, batch, capacity, entry_bytes, lengths, indptr, rows, kept, num_kept,
                                               stream);
      break;
    case 2:
      detail::launch_compact_kv<std::uint16_t>(sequences, layers, batch, capacity, entry_bytes, lengths, indptr, rows, kept, num_kept,
                                               stream);
      break;
    default:
      detail::launch_compact_kv<std::uint8_t>(sequences, layers, batch, capacity, entry_bytes, lengths, indptr, rows, kept, num_kept,
                                              stream);
  }
}

REFDEC_NAMESPACE_END
