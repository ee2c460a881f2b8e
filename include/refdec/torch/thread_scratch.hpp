// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Scratch tensors a thread keeps from one call to the next, for the temporaries of the CPU
// forward pass that only live within one call. At tens of rows a layer's attention scores and
// probabilities reach megabytes, and glibc returns blocks that large to the kernel when they are
// freed, so that a layer could fault their pages in again: at 32 rows of the 1.1B shape one
// layer's attention took 1.7 ms alone (bench/attention_bench.cpp), 0.36 ms with glibc's mmap and
// trim thresholds raised. In the model's steps, where other blocks keep the heap in use, the
// scratch saved 1-2% of a step of 1-32 tokens (bench/step_ab.sh).

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

namespace torch_detail {

/// What each of a thread's scratch tensors holds; one use of a slot ends before the next begins.
enum class ScratchSlot : std::size_t {
  kAttentionScores,  ///< attention's scores, float32
  kAttentionProbs,   ///< the softmax in the model's dtype
  kPreparedInput,    ///< a packed product's input, as its kernel reads it
  kCount,
};

/// The most bytes a slot keeps: a larger request (a long prefill's attention) gets a tensor of its
/// own, whose page faults its many rows amortise, so that a thread holds at most a few tens of MB.
inline constexpr std::int64_t kMaxScratchBytes = std::int64_t{16} << 20;

// This thread's kept bytes for `slot`, grown to at least `bytes`; one that grew past
// kMaxScratchBytes is let go at the first smaller request.
inline at::Tensor& kept_scratch(ScratchSlot slot, std::int64_t bytes) {
  thread_local std::array<at::Tensor, static_cast<std::size_t>(ScratchSlot::kCount)> kept;
  at::Tensor& t = kept[static_cast<std::size_t>(slot)];
  if (!t.defined() || t.numel() < bytes || (t.numel() > kMaxScratchBytes && bytes <= kMaxScratchBytes))
    t = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  return t;
}

/// A contiguous tensor of `sizes` and `type` on the CPU over this thread's scratch for `slot`,
/// which grows to the largest size asked up to kMaxScratchBytes and is kept for the thread's life.
/// Its contents are undefined, and it is overwritten by the next call for the same slot on this
/// thread.
inline at::Tensor thread_scratch(ScratchSlot slot, at::IntArrayRef sizes, at::ScalarType type) {
  std::int64_t bytes = static_cast<std::int64_t>(at::elementSize(type));
  for (const std::int64_t s : sizes) bytes *= s;
  if (bytes > kMaxScratchBytes) return at::empty(sizes, at::TensorOptions().dtype(type));
  return kept_scratch(slot, bytes).narrow(0, 0, bytes).view(type).view(sizes);
}

/// The same scratch as raw memory: at least `bytes` bytes (libtorch's CPU alignment, 64 bytes),
/// contents undefined, valid until the next call for `slot` on this thread (a larger request is
/// kept too, until a smaller one). For a packed product's input, taken once per product: the
/// tensor's narrow and views cost about 6 µs on a 2-core Zen 5 EPYC, 111 times in each step of
/// the 1.1B shape.
inline void* thread_scratch_bytes(ScratchSlot slot, std::int64_t bytes) { return kept_scratch(slot, bytes).data_ptr(); }

}  // namespace torch_detail

REFDEC_TORCH_NAMESPACE_END
