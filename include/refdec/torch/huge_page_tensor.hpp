// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Zeroed tensors whose CPU memory is in transparent huge pages (cpu/huge_pages.hpp), for what a
// decoding step streams besides the weights: the KV cache, which at long contexts is read whole
// by every step (2 GB for the 7B shape at 4096 entries). The cost: memory becomes resident in
// 2 MiB steps, so a contiguous store's sequence that uses a small part of a large capacity holds
// up to 2 MiB per layer's keys and values (the 7B shape: 128 MiB) where 4 KiB pages held its
// entries only.

#include <ATen/ATen.h>

#include <memory>

#include "refdec/cpu/huge_pages.hpp"
#include "refdec/torch/abi.hpp"

REFDEC_TORCH_NAMESPACE_BEGIN

/// at::zeros(sizes, options), on the CPU in a HugePageBuffer that the tensor's storage owns (its
/// storage cannot grow: resize_ beyond it throws); elsewhere at::zeros itself.
inline at::Tensor huge_page_zeros(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (!options.device().is_cpu()) return at::zeros(sizes, options);
  std::int64_t elements = 1;
  for (const std::int64_t s : sizes) elements *= s;
  auto memory = std::make_unique<HugePageBuffer>(static_cast<std::size_t>(elements) * options.dtype().itemsize());
  HugePageBuffer* const owned = memory.get();
  at::Tensor t = at::from_blob(
      owned->data(), sizes, [owned](void*) { delete owned; }, options);
  memory.release();  // the tensor's storage owns it now
  return t;
}

REFDEC_TORCH_NAMESPACE_END
