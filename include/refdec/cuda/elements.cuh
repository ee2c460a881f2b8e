// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Element conversions of refdec's CUDA kernels: float32, bf16 and fp16 values read and written as
// float.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN
namespace detail {

inline __device__ float element_to_float(float x) { return x; }
inline __device__ float element_to_float(__half x) { return __half2float(x); }
inline __device__ float element_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ T element_from_float(float x);
template <>
inline __device__ float element_from_float<float>(float x) {
  return x;
}
template <>
inline __device__ __nv_bfloat16 element_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
inline __device__ __half element_from_float<__half>(float x) {
  return __float2half(x);
}

}  // namespace detail
REFDEC_NAMESPACE_END
