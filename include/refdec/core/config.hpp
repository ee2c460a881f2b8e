// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Common definitions for every refdec header: the namespace, the token type, the error family
// and its check macros, and the host/device qualifier. Plain C++20, also compiled by nvcc.

#include <charconv>
#include <concepts>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

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
// An error message built with <<, as an ostream would write it, but with numbers written by
// std::to_chars: no locale, so no numeric facet is looked up. A Python module loaded after
// PyTorch's wheels (which carry standard-library code of their own) crashed formatting a number
// through an ostream (docs/gpu.md); strings and numbers, what nearly every message holds, never
// touch iostreams here. Anything else (a path, an enum with its own operator<<) goes through one.
// Numbers Message writes itself: integers wider than a character, and floating-point values.
template <class T>
concept MessageNumber = (std::integral<T> && sizeof(T) > 1 && !std::same_as<T, wchar_t>) || std::floating_point<T>;

class Message {
 public:
  Message& operator<<(std::string_view text) {
    text_ += text;
    return *this;
  }
  Message& operator<<(const char* text) { return *this << std::string_view(text); }
  Message& operator<<(const std::string& text) { return *this << std::string_view(text); }
  Message& operator<<(char c) {
    text_ += c;
    return *this;
  }
  Message& operator<<(bool b) { return *this << (b ? '1' : '0'); }  // as an ostream writes it
  template <MessageNumber T>
  Message& operator<<(T value) {
    char buf[64];
    std::to_chars_result r;
    if constexpr (std::floating_point<T>)
      r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general, 6);  // an ostream's default, %g
    else
      r = std::to_chars(buf, buf + sizeof buf, value);
    return *this << std::string_view(buf, static_cast<std::size_t>(r.ptr - buf));
  }
  template <class T>
  requires(!MessageNumber<T> && !std::same_as<T, bool> && !std::same_as<T, char> &&
           !std::is_convertible_v<const T&, std::string_view>) Message&
  operator<<(const T& value) {
    std::ostringstream os;
    os << value;
    return *this << os.str();
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Throws `E` with `msg` and the throwing site, so that a message points at the check that failed.
template <class E>
[[noreturn]] void fail(const char* file, int line, const std::string& msg) {
  throw E("refdec: " + msg + " (" + file + ":" + std::to_string(line) + ")");
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
#define REFDEC_DETAIL_CHECK(error_type, cond, msg)                                     \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      ::refdec::detail::Message refdec_check_msg_;                                     \
      refdec_check_msg_ << msg;                                                        \
      ::refdec::detail::fail<error_type>(__FILE__, __LINE__, refdec_check_msg_.str()); \
    }                                                                                  \
  } while (0)

/// Rejects an invalid argument or input value: throws refdec::ArgumentError carrying `msg`
/// (anything streamable) when `cond` is false.
#define REFDEC_CHECK(cond, msg) REFDEC_DETAIL_CHECK(::refdec::ArgumentError, cond, msg)

/// Rejects a file that cannot be used (missing, unreadable, truncated, bad format): throws
/// refdec::IoError carrying `msg` when `cond` is false.
#define REFDEC_CHECK_IO(cond, msg) REFDEC_DETAIL_CHECK(::refdec::IoError, cond, msg)
