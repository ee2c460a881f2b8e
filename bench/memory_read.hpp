// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The plain read the CPU benchmarks measure memory bandwidth by, the roofline of a decoding step
// (which only reads its weights): a sum of floats in the widest loads the CPU runs, four
// independent chains. Torch-free; each benchmark splits the buffer over its own threads.
//
// On a 2-core Intel Xeon (model 207) AVX2 loads read about a fifth slower than AVX-512 ones
// (1 GiB in huge pages on both cores, best of 10: `refdec-stream-linear --reads`), and ATen's sum
// about as fast as AVX2 loads. A roofline below what a plain read reaches flatters every share of
// it: the widest loads set it. The CPU's own ISA decides, not REFDEC_CPU_ISA, as the
// memory's speed does not depend on which kernels a run is asked to take.

#include <cstdint>

#include "refdec/cpu/cpu_isa.hpp"

#if REFDEC_X86
#include <immintrin.h>
#endif

namespace refdec_bench {

/// Floats read_floats() takes at a time: its `n` is a multiple.
inline constexpr std::int64_t kReadFloats = 64;

namespace detail {

#if REFDEC_X86
REFDEC_AVX512_TARGET inline float read_avx512(const float* p, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < n; i += kReadFloats) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i) + 4096, _MM_HINT_T0);
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: GCC bug 105593)
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float total = 0.0f;
  for (const float l : lanes) total += l;
  return total;
}

REFDEC_AVX2_TARGET inline float read_avx2(const float* p, std::int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float total = 0.0f;
  for (const float l : lanes) total += l;
  return total;
}
#endif

inline float read_plain(const float* p, std::int64_t n) {
  float a[8] = {};
  for (std::int64_t i = 0; i < n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  float total = 0.0f;
  for (const float v : a) total += v;
  return total;
}

}  // namespace detail

/// The sum of the `n` floats at `p` (`n` a multiple of kReadFloats, `p` 64-byte aligned), read
/// on the calling thread in AVX-512 loads (prefetched 4 KB ahead) where the CPU runs them, else
/// AVX2 loads, else plain ones.
inline float read_floats(const float* p, std::int64_t n) {
#if REFDEC_X86
  static const refdec::CpuIsa isa = refdec::detect_cpu_isa();
  if (isa.runs_avx512()) return detail::read_avx512(p, n);
  if (isa.runs_avx2()) return detail::read_avx2(p, n);
#endif
  return detail::read_plain(p, n);
}

/// Thread t's share of a read of the `n` floats at `p` that `threads` threads split (`n` a
/// multiple of kReadFloats): the sum of its contiguous slice of whole kReadFloats units, by
/// `read` (read_floats or one of detail's paths).
template <typename Read = float (*)(const float*, std::int64_t)>
inline float read_slice(const float* p, std::int64_t n, std::int64_t t, std::int64_t threads, Read read = read_floats) {
  const std::int64_t units = n / kReadFloats, begin = units * t / threads, end = units * (t + 1) / threads;
  return read(p + begin * kReadFloats, (end - begin) * kReadFloats);
}

}  // namespace refdec_bench
