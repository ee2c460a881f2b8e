// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Error checking for CUDA runtime calls made from host code.

#include <cuda_runtime.h>

#include <sstream>

#include "refdec/core/config.hpp"

/// Throws refdec::Error (the base: neither a bad argument nor a file) with the CUDA error string
/// when a runtime call fails.
#define REFDEC_CUDA_CHECK(call)                                                                                                   \
  do {                                                                                                                            \
    const cudaError_t refdec_cuda_err_ = (call);                                                                                  \
    REFDEC_DETAIL_CHECK(::refdec::Error, refdec_cuda_err_ == cudaSuccess, #call << ": " << cudaGetErrorString(refdec_cuda_err_)); \
  } while (0)
