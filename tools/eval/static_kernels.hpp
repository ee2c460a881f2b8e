// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The static step's fused CUDA kernels as code compiled without nvcc reaches them: defined in
// static_kernels.cu (the refdec_eval_static_kernels target, built where a CUDA compiler and a CUDA
// build of libtorch exist, which then defines REFDEC_EVAL_STATIC_KERNELS).

#include "refdec/core/static_step_device.hpp"

namespace refdec_eval {

/// refdec::cuda_static_kernels(), for StaticLlama::set_kernels().
const refdec::StaticKernels& static_kernels();

}  // namespace refdec_eval
