// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Compiled at -O2 by vectorise_check.sh, never run: instantiates the functions marked
// REFDEC_VECTORISE (cpu_isa.hpp) so that their instructions can be counted.

#include "refdec/cpu/bf16_kernels.hpp"
#include "refdec/cpu/stream_linear.hpp"

void probe_rms_norm(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* out, std::size_t n) {
  refdec::half::rms_norm<refdec::HalfFormat::kBf16>(x, w, out, n, 1e-5f);
}

void probe_epilogue(const refdec::StreamLinear& layer, const void* prepared, std::uint16_t* out) {
  layer.run_blocks(refdec::StreamTiles::kAvx512Bf16, prepared, 16, out, false, refdec::Epilogue::kMultiply, out, 0, 1);
}
