// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Common definitions for every refdec header: the namespace, the token type, the error macro and
// the host/device qualifier. Plain C++20, also compiled by nvcc.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

/// The inline ABI namespace: bump it when a public struct changes layout.
#define REFDEC_ABI v1
#define REFDEC_NAMESPACE_BEGIN \
  namespace refdec {           \
  inline namespace REFDEC_ABI {
#define REFDEC_NAMESPACE_END \
  }                          \
  }

#if defined(__CUDACC__)
/// Marks functions shared by host code and CUDA kernels.
#define REFDEC_HOST_DEVICE __host__ __device__ inline
#else
#define REFDEC_HOST_DEVICE inline
#endif

REFDEC_NAMESPACE_BEGIN

/// A token id. Negative values never occur in model input; drafters may use them as separators.
using Token = std::int32_t;

/// Thrown for every invalid argument or input that refdec rejects.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {
[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "refdec: " << msg << " (" << file << ":" << line << ")";
  throw Error(os.str());
}
}  // namespace detail

REFDEC_NAMESPACE_END

/// Rejects invalid user input: throws refdec::Error carrying `msg` (anything streamable) when
/// `cond` is false.
#define REFDEC_CHECK(cond, msg)                                   \
  do {                                                            \
    if (!(cond)) {                                                \
      std::ostringstream refdec_check_os_;                        \
      refdec_check_os_ << msg;                                    \
      ::refdec::detail::fail(__FILE__, __LINE__, refdec_check_os_.str()); \
    }                                                             \
  } while (0)
