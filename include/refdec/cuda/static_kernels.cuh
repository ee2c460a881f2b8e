// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// CUDA kernels of the static-shape step's fused operations (refdec/core/static_step_device.hpp:
// the rotary scatter, SwiGLU, the few-row linear product and attention), over raw pointers and a
// stream, and cuda_static_kernels(), their launchers as StaticLlama::set_kernels() takes them. A translation unit compiled by nvcc includes
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

// max (kMax) or sum of `v` over a block's threads, every thread getting it; `scratch` holds one
// float per warp.
template <int kThreads, bool kMax>
__device__ inline float block_reduce(float v, float* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) v = kMax ? fmaxf(v, scratch[w]) : v + scratch[w];
  __syncthreads();  // scratch is free again
  return v;
}

// Attention of one step row and query head (AttentionArgs) per block. The scores: a thread per
// entry, reading its key in 16-byte loads (entries the mask removes are never read). The
// softmax over them in shared memory. The values: groups of threads, each group's threads
// covering a head in 16-byte loads, the groups taking entries in turn; their partial sums meet
// in shared memory. Everything in float32, rounded once.
template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  extern __shared__ float shared[];  // [entries] scores, then weights; then [groups, head_dim] partial sums
  __shared__ float q_row[kAttentionKernelHeadDim];
  __shared__ float scratch[kThreads / 32];
  const std::int64_t p = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const std::int64_t b = p / a.step_rows, t = p % a.step_rows, kv = h / (a.heads / a.kv_heads);
  const int D = static_cast<int>(a.head_dim);
  const T* q = static_cast<const T*>(a.q) + (p * a.heads + h) * D;
  for (int d = static_cast<int>(threadIdx.x); d < D; d += kThreads) q_row[d] = element_to_float(q[d]);
  __syncthreads();
  const T* bias = static_cast<const T*>(a.bias) + (b * a.step_rows + t) * a.entries;
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  float* scores = shared;
  for (std::int64_t e = threadIdx.x; e < a.entries; e += kThreads) {
    const float mask = element_to_float(bias[e]);
    float score = -INFINITY;
    if (mask != -INFINITY) {
      const T* k = keys + attention_entry(a, b, kv, e);
      float dot = 0.0f;
      for (int j = 0; j < D; j += kPer) {
        float f[kPer];
        unpack16<T>(__ldg(reinterpret_cast<const uint4*>(k + j)), f);
#pragma unroll
        for (int i = 0; i < kPer; ++i) dot = fmaf(q_row[j + i], f[i], dot);
      }
      score = dot + mask;
    }
    scores[e] = score;
  }
  __syncthreads();
  float top = -INFINITY;
  for (std::int64_t e = threadIdx.x; e < a.entries; e += kThreads) top = fmaxf(top, scores[e]);
  top = block_reduce<kThreads, true>(top, scratch);
  float sum = 0.0f;
  for (std::int64_t e = threadIdx.x; e < a.entries; e += kThreads) {
    const float w = scores[e] == -INFINITY ? 0.0f : __expf(scores[e] - top);
    scores[e] = w;
    sum += w;
  }
  sum = block_reduce<kThreads, false>(sum, scratch);  // (its barrier publishes the weights)
  const int lanes = D / kPer, groups = kThreads / lanes;
  const int group = static_cast<int>(threadIdx.x) / lanes, c = static_cast<int>(threadIdx.x) % lanes;
  float* partial = shared + a.entries;  // [groups, D]
  if (group < groups) {
    float acc[kPer] = {};
    for (std::int64_t e = group; e < a.entries; e += groups) {
      const float w = scores[e];
      if (w == 0.0f) continue;
      float f[kPer];
      unpack16<T>(__ldg(reinterpret_cast<const uint4*>(values + attention_entry(a, b, kv, e) + c * kPer)), f);
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[i] = fmaf(w, f[i], acc[i]);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) partial[group * D + c * kPer + i] = acc[i];
  }
  __syncthreads();
  T* out = static_cast<T*>(a.out) + (p * a.heads + h) * D;
  for (int d = static_cast<int>(threadIdx.x); d < D; d += kThreads) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += partial[g * D + d];
    out[d] = element_from_float<T>(total / sum);
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
  REFDEC_CHECK(aligned_for_loads(a.x) && aligned_for_loads(a.weight) && a.out != nullptr,
               "launch_linear: x and weight must be 16-byte aligned, out not null");
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

/// Launches attention `a` on `stream` (AttentionArgs; attention_kernel_takes() must hold, and q,
/// keys and values be 16-byte aligned).
inline void launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  REFDEC_CHECK(a.batch > 0 && a.step_rows > 0 && a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0 &&
                   attention_kernel_takes(a.head_dim, a.entries, a.type) && a.batch * a.step_rows * a.heads < (std::int64_t{1} << 31),
               "launch_attention: batch " << a.batch << ", step rows " << a.step_rows << ", heads " << a.heads << ", kv_heads "
                                          << a.kv_heads << ", head_dim " << a.head_dim << " (a whole number of 16 bytes, at most "
                                          << kAttentionKernelHeadDim << "), entries " << a.entries << " (at most "
                                          << kAttentionKernelEntries << ")");
  const auto whole = [&](std::int64_t stride) { return (stride * element_bytes(a.type)) % 16 == 0; };
  REFDEC_CHECK(
      aligned_for_loads(a.q) && aligned_for_loads(a.keys) && aligned_for_loads(a.values) && a.bias != nullptr && a.out != nullptr &&
          whole(a.stride_sequence) && whole(a.stride_head) && whole(a.stride_element),
      "launch_attention: q, keys and values must be 16-byte aligned, the cache's strides whole 16-byte loads, bias and out not null");
  using namespace detail;
  const std::int64_t lanes = a.head_dim * element_bytes(a.type) / 16, groups = kStaticThreads / lanes;
  const auto shared = static_cast<std::size_t>((a.entries + groups * a.head_dim) * 4);
  const auto blocks = static_cast<unsigned>(a.batch * a.step_rows * a.heads);
  switch (a.type) {
    case ElementType::kFloat32: attention_kernel<kStaticThreads, float><<<blocks, kStaticThreads, shared, stream>>>(a); break;
    case ElementType::kBFloat16: attention_kernel<kStaticThreads, __nv_bfloat16><<<blocks, kStaticThreads, shared, stream>>>(a); break;
    case ElementType::kFloat16: attention_kernel<kStaticThreads, __half><<<blocks, kStaticThreads, shared, stream>>>(a); break;
  }
  REFDEC_CUDA_CHECK(cudaGetLastError());
}

/// The launchers as StaticLlama::set_kernels() takes them.
inline const StaticKernels& cuda_static_kernels() {
  static const StaticKernels kernels{
      [](const RotaryScatterArgs& a, void* stream) { launch_rotary_scatter(a, static_cast<cudaStream_t>(stream)); },
      [](const SwigluArgs& a, void* stream) { launch_swiglu(a, static_cast<cudaStream_t>(stream)); },
      [](const LinearArgs& a, void* stream) { launch_linear(a, static_cast<cudaStream_t>(stream)); },
      [](const AttentionArgs& a, void* stream) { launch_attention(a, static_cast<cudaStream_t>(stream)); },
  };
  return kernels;
}

REFDEC_NAMESPACE_END
