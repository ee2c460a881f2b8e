// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// The plain reads the CPU benchmarks measure memory bandwidth by, the roofline of a decoding step
// (which only reads its weights): sums of floats, four independent chains, in each kind of load
// the CPU runs. Torch-free; each benchmark splits the buffer over its own threads.
//
// Which read is fastest depends on the CPU (1 GiB in huge pages on both cores, best of 10:
// `refdec-stream-linear --reads`): on a 2-core Intel Xeon (model 207) AVX2 loads read about a
// fifth slower than AVX-512 loads prefetched 4 KB ahead, and ATen's sum about as fast as AVX2
// loads; on a 2-core Zen 4 EPYC the prefetched AVX-512 loads read 31.2 GB/s where plain, AVX2
// and unprefetched AVX-512 loads read 36.4-37.7. A roofline below what a plain read reaches
// flatters every share of it: the benchmarks take the fastest of the paths (read_paths()). The
// CPU's own ISA decides which run, not REFDEC_CPU_ISA, as the memory's speed does not depend on
// which kernels a run is asked to take.

#include <cstdint>
#include <vector>

#include "refdec/cpu/cpu_isa.hpp"

#if REFDEC_X86
#include <immintrin.h>
#endif

namespace refdec_bench {

/// Floats read_floats() takes at a time: its `n` is a multiple.
inline constexpr std::int64_t kReadFloats = 64;

namespace detail {

#if REFDEC_X86
// kPrefetch: each 64 floats also asked for 4 KB ahead into L1.
template <bool kPrefetch = true>
REFDEC_AVX512_TARGET inline float read_avx512(const float* p, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < n; i += kReadFloats) {
    if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + i) + 4096, _MM_HINT_T0);
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

/// A sum of the `n` floats at `p` (`n` a multiple of kReadFloats, `p` 64-byte aligned) on the
/// calling thread.
using Read = float (*)(const float* p, std::int64_t n);

/// One way to read memory: its name in reports and its sum.
struct ReadPath {
  const char* name;
  Read read;
};

/// Every read path this CPU runs: plain loads, AVX2 loads, AVX-512 loads prefetched 4 KB ahead,
/// AVX-512 loads alone. A roofline is the fastest of them.
inline std::vector<ReadPath> read_paths() {
  std::vector<ReadPath> paths = {{"plain loads", detail::read_plain}};
#if REFDEC_X86
  const refdec::CpuIsa isa = refdec::detect_cpu_isa();
  if (isa.runs_avx2()) paths.push_back({"AVX2 loads", detail::read_avx2});
  if (isa.runs_avx512()) {
    paths.push_back({"AVX-512 loads, prefetched 4 KB ahead", detail::read_avx512<true>});
    paths.push_back({"AVX-512 loads", detail::read_avx512<false>});
  }
#endif
  return paths;
}

/// Thread t's share of a read of the `n` floats at `p` that `threads` threads split (`n` a
/// multiple of kReadFloats): the sum of its contiguous slice of whole kReadFloats units, by
/// `read` (a ReadPath's, or any callable of Read's signature).
template <typename ReadFn>
inline float read_slice(const float* p, std::int64_t n, std::int64_t t, std::int64_t threads, ReadFn read) {
  const std::int64_t units = n / kReadFloats, begin = units * t / threads, end = units * (t + 1) / threads;
  return read(p + begin * kReadFloats, (end - begin) * kReadFloats);
}

}  // namespace refdec_bench
