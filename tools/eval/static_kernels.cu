// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#include "eval/static_kernels.hpp"

#include "refdec/cuda/static_kernels.cuh"

namespace refdec_eval {

const refdec::StaticKernels& static_kernels() { return refdec::cuda_static_kernels(); }

}  // namespace refdec_eval
