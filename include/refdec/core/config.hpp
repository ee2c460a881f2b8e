// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Common definitions for every refdec header: the namespace, the token type, the error family
// and its check macros, and the host/device qualifier. Plain C++20, also compiled by nvcc.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

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

/// The base of every exception refdec throws: catch it to handle them all. Thrown as itself only
/// for failures that are neither of the kinds below (a failing CUDA runtime call).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument or input value that refdec rejects (REFDEC_CHECK): out of range, inconsistent
/// sizes, bad settings.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

/// A file refdec cannot use (REFDEC_CHECK_IO): missing, unreadable, unwritable, truncated or not
/// in the expected format.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Throws `E` with `msg` and the throwing site, so that a message points at the check that failed.
template <class E>
[[noreturn]] void fail(const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "refdec: " << msg << " (" << file << ":" << line << ")";
  throw E(os.str());
}

// The message of a refdec error without its "refdec: " prefix, for nesting it in another message.
inline std::string message_of(const Error& e) {
  std::string msg = e.what();
  constexpr std::string_view prefix = "refdec: ";
  if (msg.starts_with(prefix)) msg.erase(0, prefix.size());
  return msg;
}

// Throws an error of the same kind as `e` (IoError stays IoError) whose message says where it
// happened first: "refdec: <context>: <e's message>", e's throwing site kept at its end.
[[noreturn]] inline void rethrow_in_context(const Error& e, const std::string& context) {
  const std::string msg = "refdec: " + context + ": " + message_of(e);
  if (dynamic_cast<const IoError*>(&e) != nullptr) throw IoError(msg);
  if (dynamic_cast<const ArgumentError*>(&e) != nullptr) throw ArgumentError(msg);
  throw Error(msg);
}
}  // namespace detail

REFDEC_NAMESPACE_END

// Throws `error_type` carrying `msg` when `cond` is false; the macros below name the kind.
#define REFDEC_DETAIL_CHECK(error_type, cond, msg)                                    \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream refdec_check_os_;                                            \
      refdec_check_os_ << msg;                                                        \
      ::refdec::detail::fail<error_type>(__FILE__, __LINE__, refdec_check_os_.str()); \
    }                                                                                 \
  } while (0)

/// Rejects an invalid argument or input value: throws refdec::ArgumentError carrying `msg`
/// (anything streamable) when `cond` is false.
#define REFDEC_CHECK(cond, msg) REFDEC_DETAIL_CHECK(::refdec::ArgumentError, cond, msg)

/// Rejects a file that cannot be used (missing, unreadable, truncated, bad format): throws
/// refdec::IoError carrying `msg` when `cond` is false.
#define REFDEC_CHECK_IO(cond, msg) REFDEC_DETAIL_CHECK(::refdec::IoError, cond, msg)
