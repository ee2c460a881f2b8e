// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// What refdec's oneDNN primitives share (PackedLinear's products, attention's two products over
// the cache): the CPU engine they and their memory run on, and whether oneDNN creates bf16
// products on this CPU at all. oneDNN is optional: REFDEC_HAVE_ONEDNN is 1 when CMake found
// Debian's libdnnl-dev (the same library Debian's libtorch links).

#include "refdec/core/config.hpp"
#include "refdec/cpu/cpu_isa.hpp"
#include "refdec/torch/abi.hpp"

#if REFDEC_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

REFDEC_TORCH_NAMESPACE_BEGIN

namespace torch_detail {
#if REFDEC_HAVE_ONEDNN
// The one CPU engine of refdec's oneDNN primitives and the memory they run on (oneDNN refuses a
// primitive and memory of different engines).
inline const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}
#endif

// Whether oneDNN creates a bf16 matmul here, probed once by creating one: the library decides by
// the CPU (and by ONEDNN_MAX_CPU_ISA), and refdec's own cap (REFDEC_CPU_ISA=avx2 or baseline)
// keeps it off as it keeps off every AVX-512 path.
inline bool onednn_bf16_matmul_runs() {
#if REFDEC_HAVE_ONEDNN
  static const bool runs = [] {
    if (!cpu_isa().cap.empty() && cpu_isa().cap != "avx512") return false;
    try {
      using dt = dnnl::memory::data_type;
      using tag = dnnl::memory::format_tag;
      const dnnl::matmul::desc desc({{1, 32}, dt::bf16, tag::ab}, {{32, 32}, dt::bf16, tag::any}, {{1, 32}, dt::bf16, tag::ab});
      (void)dnnl::matmul::primitive_desc(desc, onednn_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return runs;
#else
  return false;
#endif
}
}  // namespace torch_detail

REFDEC_TORCH_NAMESPACE_END
