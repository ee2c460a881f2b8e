// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// bench/memory_read.hpp, the reads the CPU benchmarks measure the roofline by: every path (AVX-512
// with and without its prefetch, AVX2, plain loads) sums exactly what is there, so that a read
// that skipped memory could not pass for a fast one. Paths the CPU cannot run skip with the reason.

#include "memory_read.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "refdec/cpu/huge_pages.hpp"

namespace {

// 37 units of small integers with a known, exactly representable sum, 64-byte aligned.
struct Floats {
  static constexpr std::int64_t kCount = 37 * refdec_bench::kReadFloats;
  refdec::HugePageBuffer memory{kCount * sizeof(float)};
  float expected = 0.0f;
  Floats() {
    auto* p = static_cast<float*>(memory.data());
    for (std::int64_t i = 0; i < kCount; ++i) expected += p[i] = static_cast<float>(i % 7 - 2);
  }
  const float* data() const { return static_cast<const float*>(memory.data()); }
};

TEST(MemoryRead, PlainLoadsSumEveryFloat) {
  const Floats f;
  EXPECT_EQ(refdec_bench::detail::read_plain(f.data(), Floats::kCount), f.expected);
  EXPECT_EQ(refdec_bench::detail::read_plain(f.data(), 0), 0.0f);
}

#if REFDEC_X86
TEST(MemoryRead, Avx2LoadsSumEveryFloat) {
  if (!refdec::detect_cpu_isa().runs_avx2()) GTEST_SKIP() << "this CPU runs no AVX2: " << refdec::detect_cpu_isa().describe();
  const Floats f;
  EXPECT_EQ(refdec_bench::detail::read_avx2(f.data(), Floats::kCount), f.expected);
  EXPECT_EQ(refdec_bench::detail::read_avx2(f.data(), 0), 0.0f);
}

TEST(MemoryRead, Avx512LoadsSumEveryFloat) {
  if (!refdec::detect_cpu_isa().runs_avx512()) GTEST_SKIP() << "this CPU runs no AVX-512: " << refdec::detect_cpu_isa().describe();
  const Floats f;
  EXPECT_EQ(refdec_bench::detail::read_avx512<true>(f.data(), Floats::kCount), f.expected);
  EXPECT_EQ(refdec_bench::detail::read_avx512<true>(f.data(), 0), 0.0f);
  EXPECT_EQ(refdec_bench::detail::read_avx512<false>(f.data(), Floats::kCount), f.expected);
  EXPECT_EQ(refdec_bench::detail::read_avx512<false>(f.data(), 0), 0.0f);
}
#endif

// read_paths(): every path the CPU runs, each summing every float, a slice too.
TEST(MemoryRead, EveryPathHereSumsEveryFloat) {
  const Floats f;
  const auto paths = refdec_bench::read_paths();
  std::size_t expected = 1;
#if REFDEC_X86
  const refdec::CpuIsa isa = refdec::detect_cpu_isa();
  expected += (isa.runs_avx2() ? 1 : 0) + (isa.runs_avx512() ? 2 : 0);
#endif
  EXPECT_EQ(paths.size(), expected);
  EXPECT_STREQ(paths.front().name, "plain loads");
  float slice = 0.0f;
  for (std::int64_t i = refdec_bench::kReadFloats; i < 3 * refdec_bench::kReadFloats; ++i) slice += f.data()[i];
  for (const auto& path : paths) {
    EXPECT_EQ(path.read(f.data(), Floats::kCount), f.expected) << path.name;
    EXPECT_EQ(path.read(f.data() + refdec_bench::kReadFloats, 2 * refdec_bench::kReadFloats), slice) << path.name;
  }
}

// The threads' slices cover every unit once, whatever the number of threads (more threads than
// units included: some slices are then empty).
TEST(MemoryRead, ThreadSlicesSumToTheWhole) {
  const Floats f;
  for (const std::int64_t threads : {1, 2, 3, 5, 37, 50}) {
    float total = 0.0f;
    for (std::int64_t t = 0; t < threads; ++t)
      total += refdec_bench::read_slice(f.data(), Floats::kCount, t, threads, refdec_bench::detail::read_plain);
    EXPECT_EQ(total, f.expected) << threads << " threads";
  }
  // Each slice by the path given: a read that counts its floats instead of summing them.
  const auto count = [](const float*, std::int64_t n) { return static_cast<float>(n); };
  EXPECT_EQ(refdec_bench::read_slice(f.data(), Floats::kCount, 0, 2, count), 18 * refdec_bench::kReadFloats);
  EXPECT_EQ(refdec_bench::read_slice(f.data(), Floats::kCount, 1, 2, count), 19 * refdec_bench::kReadFloats);
}

}  // namespace
