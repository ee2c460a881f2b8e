// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Which vector instruction sets this CPU runs, read once at run time (CPUID and the operating
// system's saved register state), so that one build picks its kernels on every x86-64 machine.
// REFDEC_CPU_ISA caps what refdec uses below what the CPU has ("avx512f": as if it had neither
// AVX512_BF16 nor AVX512_FP16; "avx2": no AVX-512 at all; "baseline": neither AVX2 nor AVX-512), so that a
// machine can run the tests of a lower path.
// Plain C++20, no libtorch; on other architectures every flag is false.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "refdec/core/config.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__)
#include <cpuid.h>
#define REFDEC_X86 1
#else
#define REFDEC_X86 0
#endif

// Functions compiled for an instruction set by attribute, so that the headers build without
// -mavx2 and each runs only where cpu_isa() says the CPU runs its set.
#if REFDEC_X86
#define REFDEC_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define REFDEC_AVX512_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define REFDEC_AVX512_BF16_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))
// AVX512_FP16's intrinsics came with GCC 12, in functions compiled for it by attribute; Clang
// 14 declares them only where the whole file is (-mavx512fp16). Elsewhere the tiles that use them
// are not built (StreamLinear::unavailable() says so).
#if (defined(__clang__) && defined(__AVX512FP16__)) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12)
#define REFDEC_HAVE_AVX512_FP16 1
#define REFDEC_AVX512_FP16_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512fp16")))
#else
#define REFDEC_HAVE_AVX512_FP16 0
#endif
#else
#define REFDEC_HAVE_AVX512_FP16 0
#define REFDEC_AVX2_TARGET
#define REFDEC_AVX512_TARGET
#define REFDEC_AVX512_BF16_TARGET
#endif

// On the functions whose plain loops rely on the compiler's vectoriser (RMSNorm's copies, the
// streaming kernel's epilogues). GCC 12 at -O2, what CMake's RelWithDebInfo and many engines
// build with, vectorises only under its "very cheap" cost model, which these loops over 16-bit
// values fail: at -O2 RMSNorm's AVX-512 copy compiled to 1 zmm instruction, with this attribute
// to 55 (tests/cpu/vectorise_check.sh counts them). The attribute asks for the dynamic cost model,
// as -O3 does, whatever the consumer's level; Clang vectorises these loops at -O2 and has no such
// attribute.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define REFDEC_VECTORISE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define REFDEC_VECTORISE
#endif

REFDEC_NAMESPACE_BEGIN

/// The instruction sets refdec's CPU kernels choose between.
struct CpuIsa {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  std::string cap;  ///< the REFDEC_CPU_ISA value applied ("" when none)

  /// Whether refdec's AVX2 kernels (stream_linear.hpp, avx2_attention.hpp) run: AVX2, FMA and F16C.
  bool runs_avx2() const { return avx2 && fma && f16c; }
  /// Whether refdec's AVX-512 tiles (stream_linear.hpp) run: AVX-512 F, BW and VL with the above.
  bool runs_avx512() const { return runs_avx2() && avx512f && avx512bw && avx512vl; }
  /// Whether the CPU runs AVX-512 with BF16 instructions (what oneDNN's fast bf16 matmul needs).
  bool runs_avx512_bf16() const { return avx512f && avx512bw && avx512vl && avx512_bf16; }

  /// The flags that are set, space-separated ("avx2 fma f16c"), then the cap if there is one.
  std::string describe() const {
    std::string s;
    for (const auto& [on, name] : {std::pair{avx2, "avx2"},
                                   {fma, "fma"},
                                   {f16c, "f16c"},
                                   {avx512f, "avx512f"},
                                   {avx512bw, "avx512bw"},
                                   {avx512vl, "avx512vl"},
                                   {avx512_bf16, "avx512_bf16"},
                                   {avx512_fp16, "avx512_fp16"}})
      if (on) {
        if (!s.empty()) s += ' ';
        s += name;
      }
    if (s.empty()) s = "no AVX2 or AVX-512";
    if (!cap.empty()) s += " (capped by REFDEC_CPU_ISA=" + cap + ")";
    return s;
  }

  /// This ISA without what `level` excludes: "avx512" (nothing), "avx512f" (AVX512_BF16 and FP16),
  /// "avx2" (every AVX-512 flag), "baseline" (AVX2, FMA and F16C too). Throws ArgumentError for
  /// any other value.
  CpuIsa capped(std::string_view level) const {
    REFDEC_CHECK(level == "avx512" || level == "avx512f" || level == "avx2" || level == "baseline",
                 "REFDEC_CPU_ISA must be avx512, avx512f, avx2 or baseline, got '" << level << "'");
    CpuIsa c = *this;
    c.cap = level;
    c.avx512_bf16 = c.avx512_bf16 && level == "avx512";
    c.avx512_fp16 = c.avx512_fp16 && level == "avx512";
    if (level == "avx2" || level == "baseline") c.avx512f = c.avx512bw = c.avx512vl = false;
    if (level == "baseline") c.avx2 = c.fma = c.f16c = false;
    return c;
  }
};

/// What the CPU and the operating system support, without any cap.
inline CpuIsa detect_cpu_isa() {
  CpuIsa isa;
#if REFDEC_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return isa;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return isa;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6u) == 0x6u, zmm_state = (xcr0_lo & 0xE6u) == 0xE6u;
  if (!ymm_state) return isa;  // the OS does not save AVX registers
  isa.fma = (c >> 12) & 1;
  isa.f16c = (c >> 29) & 1;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    isa.avx2 = (b >> 5) & 1;
    if (zmm_state) {
      isa.avx512f = (b >> 16) & 1;
      isa.avx512bw = (b >> 30) & 1;
      isa.avx512vl = (b >> 31) & 1;
      isa.avx512_fp16 = (d >> 23) & 1;
      if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) isa.avx512_bf16 = (a >> 5) & 1;
    }
  }
#endif
  return isa;
}

/// What refdec uses: detect_cpu_isa() capped by the environment variable REFDEC_CPU_ISA, read once
/// per process (a bad value throws ArgumentError at every call).
inline const CpuIsa& cpu_isa() {
  static const CpuIsa isa = [] {
    const char* cap = std::getenv("REFDEC_CPU_ISA");
    return cap && *cap ? detect_cpu_isa().capped(cap) : detect_cpu_isa();
  }();
  return isa;
}

REFDEC_NAMESPACE_END
