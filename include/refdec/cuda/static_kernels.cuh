// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// CUDA kernels of the static-shape step's fused operations (refdec/core/static_step_device.hpp:
// the rotary scatter, SwiGLU and the few-row linear product), over raw pointers and a stream, and cuda_static_kernels(), their
// launchers as StaticLlama::set_kernels() takes them. A translation unit compiled by nvcc includes
// this header and hands the launchers to code compiled without it. Launches are asynchronous (a
// CUDA graph captures them); bad sizes throw refdec::Error before any CUDA call.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "refdec/core/config.hpp"
#include "refdec/core/static_step_device.hpp"
#include "refdec/cuda/check.cuh"
#include "refdec/cuda/elements.cuh"

REFDEC_NAMESPACE_BEGIN

namespace detail {

template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads) rotary_scatter_kernel(RotaryScatterArgs a) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= a.pairs()) return;
  const RotaryPair p = rotary_pair(a, index);
  const T* qkv = static_cast<const T*>(a.qkv);
  const float x0 = element_to_float(qkv[p.source]), x1 = element_to_float(qkv[p.source + 1]);
  float y0 = x0, y1 = x1;
  if (p.part != 2) turn_pair(x0, x1, a.turns[p.turn], a.turns[p.turn + 1], p.part == 0 ? a.scale : 1.0f, y0, y1);
  T* out = static_cast<T*>(p.part == 0 ? a.q : p.part == 1 ? a.keys : a.values);
  out[p.target] = element_from_float<T>(y0);
  out[p.target + 1] = element_from_float<T>(y1);
}

template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluArgs a) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= a.rows * a.hidden) return;
  const std::int64_t r = index / a.hidden, j = index % a.hidden;
  const T* gu = static_cast<const T*>(a.gate_up);
  const float g = element_to_float(gu[r * 2 * a.hidden + j]), u = element_to_float(gu[r * 2 * a.hidden + a.hidden + j]);
  static_cast<T*>(a.out)[index] = element_from_float<T>(g / (1.0f + __expf(-g)) * u);
}

// The elements of one 16-byte load as floats.
template <typename T>
__device__ inline void unpack16(const uint4& v, float* f) {
  if constexpr (sizeof(T) == 4) {
    f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y), f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
  } else {
    const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = element_to_float(h[i]);
  }
}

// The few-row linear product (LinearArgs): one warp per output feature. Each lane streams 16-byte
// loads of the feature's weight row, kAhead of them issued before any is used (the weights are
// read once, past the caches: memory-level parallelism is what bounds the product), and dots
// each with every input row (read through the caches: every warp reads the same rows). The
// lanes' partial sums meet by shuffles; lane 0 writes the feature's value for every row.
template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads) linear_kernel(LinearArgs a) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T)), kAhead = 4, kStride = 32 * kPer;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t feature = static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (feature >= a.out_features) return;
  const T* w = static_cast<const T*>(a.weight) + feature * a.in;
  const T* x = static_cast<const T*>(a.x);
  float sum[kLinearKernelRows] = {};
  for (std::int64_t k0 = static_cast<std::int64_t>(lane) * kPer; k0 < a.in; k0 += kAhead * kStride) {
    uint4 wv[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const std::int64_t k = k0 + u * kStride;
      wv[u] = k < a.in ? __ldcs(reinterpret_cast<const uint4*>(w + k)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const std::int64_t k = k0 + u * kStride;
      if (k >= a.in) continue;  // (not break: a loop with a break may stay rolled, its sums in memory)
      float wf[kPer];
      unpack16<T>(wv[u], wf);
#pragma unroll
      for (int r = 0; r < kLinearKernelRows; ++r) {
        if (r >= a.rows) continue;
        float xf[kPer];
        unpack16<T>(__ldg(reinterpret_cast<const uint4*>(x + r * a.in + k)), xf);
#pragma unroll
        for (int i = 0; i < kPer; ++i) sum[r] = fmaf(wf[i], xf[i], sum[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kLinearKernelRows; ++r)
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum[r] += __shfl_xor_sync(0xFFFFFFFFu, sum[r], offset);
  if (lane != 0) return;
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int r = 0; r < kLinearKernelRows; ++r) {
    if (r >= a.rows) continue;
    T& o = out[r * a.out_features + feature];
    o = element_from_float<T>(a.accumulate ? element_to_float(o) + sum[r] : sum[r]);
  }
}

constexpr int kStaticThreads = 256;

inline unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kStaticThreads - 1) / kStaticThreads); }

}  // namespace detail

/// Launches the rotary scatter `a` on `stream` (RotaryScatterArgs).
inline void launch_rotary_scatter(const RotaryScatterArgs& a, cudaStream_t stream) {
  REFDEC_CHECK(
      a.rows > 0 && a.heads > 0 && a.kv_heads > 0 && a.head_dim > 0 && a.head_dim % 2 == 0 && a.pairs() < (std::int64_t{1} << 40),
      "launch_rotary_scatter: rows " << a.rows << ", heads " << a.heads << ", kv_heads " << a.kv_heads << ", head_dim " << a.head_dim);
  REFDEC_CHECK(a.qkv != nullptr && a.turns != nullptr && a.positions != nullptr && a.sequence != nullptr && a.written != nullptr &&
                   a.q != nullptr && a.keys != nullptr && a.values != nullptr,
               "launch_rotary_scatter: null pointer");
  using namespace detail;
  switch (a.type) {
    case ElementType::kFloat32:
      rotary_scatter_kernel<kStaticThreads, float><<<blocks_for(a.pairs()), kStaticThreads, 0, stream>>>(a);
      break;
    case ElementType::kBFloat16:
      rotary_scatter_kernel<kStaticThreads, __nv_bfloat16><<<blocks_for(a.pairs()), kStaticThreads, 0, stream>>>(a);
      break;
    case ElementType::kFloat16:
      rotary_scatter_kernel<kStaticThreads, __half><<<blocks_for(a.pairs()), kStaticThreads, 0, stream>>>(a);
      break;
  }
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// Launches SwiGLU `a` on `stream` (SwigluArgs).
inline void launch_swiglu(const SwigluArgs& a, cudaStream_t stream) {
  REFDEC_CHECK(a.rows > 0 && a.hidden > 0 && a.gate_up != nullptr && a.out != nullptr,
               "launch_swiglu: rows " << a.rows << ", hidden " << a.hidden << " (or a null pointer)");
  using namespace detail;
  const std::int64_t n = a.rows * a.hidden;
  switch (a.type) {
    case ElementType::kFloat32: swiglu_kernel<kStaticThreads, float><<<blocks_for(n), kStaticThreads, 0, stream>>>(a); break;
    case ElementType::kBFloat16: swiglu_kernel<kStaticThreads, __nv_bfloat16><<<blocks_for(n), kStaticThreads, 0, stream>>>(a); break;
    case ElementType::kFloat16: swiglu_kernel<kStaticThreads, __half><<<blocks_for(n), kStaticThreads, 0, stream>>>(a); break;
  }
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// Launches the linear product `a` on `stream` (LinearArgs; linear_kernel_takes() must hold, and
/// x and weight be 16-byte aligned).
inline void launch_linear(const LinearArgs& a, cudaStream_t stream) {
  REFDEC_CHECK(linear_kernel_takes(a.rows, a.in, a.type) && a.out_features > 0 && a.out_features < (std::int64_t{1} << 40),
               "launch_linear: rows " << a.rows << " (1 to " << kLinearKernelRows << "), in " << a.in
                                      << " (a whole number of 16 bytes), out " << a.out_features);
  const auto aligned = [](const void* p) { return p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  REFDEC_CHECK(aligned(a.x) && aligned(a.weight) && a.out != nullptr, "launch_linear: x and weight must be 16-byte aligned, out not null");
  using namespace detail;
  constexpr int kWarps = kStaticThreads / 32;
  const auto blocks = static_cast<unsigned>((a.out_features + kWarps - 1) / kWarps);
  switch (a.type) {
    case ElementType::kFloat32: linear_kernel<kStaticThreads, float><<<blocks, kStaticThreads, 0, stream>>>(a); break;
    case ElementType::kBFloat16: linear_kernel<kStaticThreads, __nv_bfloat16><<<blocks, kStaticThreads, 0, stream>>>(a); break;
    case ElementType::kFloat16: linear_kernel<kStaticThreads, __half><<<blocks, kStaticThreads, 0, stream>>>(a); break;
  }
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// The launchers as StaticLlama::set_kernels() takes them.
inline const StaticKernels& cuda_static_kernels() {
  static const StaticKernels kernels{
      [](const RotaryScatterArgs& a, void* stream) { launch_rotary_scatter(a, static_cast<cudaStream_t>(stream)); },
      [](const SwigluArgs& a, void* stream) { launch_swiglu(a, static_cast<cudaStream_t>(stream)); },
      [](const LinearArgs& a, void* stream) { launch_linear(a, static_cast<cudaStream_t>(stream)); },
  };
  return kernels;
}

REFDEC_NAMESPACE_END
