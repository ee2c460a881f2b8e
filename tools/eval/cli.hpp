// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Range-checked numbers on the command line, for the tools, examples and benchmarks (CLI11
// validators). CLI11 itself converts integers with strtoull/strtoll in base 0: "-1" becomes
// SIZE_MAX for an unsigned option, "010" is octal and an overflow saturates silently. These
// validators accept only a decimal integer (or a finite number) within documented bounds, reject
// anything else with a message naming the value, and hand CLI11 the canonical decimal form.

#include <CLI/CLI.hpp>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN
namespace cli {

/// The documented upper bounds of command-line numbers.
inline constexpr std::int64_t kMaxBudget = 4096;        ///< draft nodes verified per step
inline constexpr std::int64_t kMaxSpan = 1024;          ///< k, m, n, n-gram and continuation lengths
inline constexpr std::int64_t kMaxTokens = 1 << 20;     ///< context, token and step limits
inline constexpr std::int64_t kMaxCount = 1 << 20;      ///< counts: traces, occurrences, batches
inline constexpr std::int64_t kMaxBatch = 4096;         ///< sequences decoded at once (each holds a drafter)

/// Parses all of `text` as a decimal integer (an optional sign, then digits) into `value`.
/// Returns false for anything else, an overflow of int64_t included.
inline bool parse_integer(const std::string& text, std::int64_t& value) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;
  if (b == e || *b == '+') return false;
  const auto [p, ec] = std::from_chars(b, e, value);
  return ec == std::errc{} && p == e;
}

/// A validator for an integer option: a decimal integer in [lo, hi]. Use it for unsigned options
/// too (CLI11 would wrap "-1" otherwise): it rejects the value before CLI11 converts it. Add it with
/// `->transform()`, not `->check()` (which CLI11 makes non-modifying): the canonical form it
/// writes back keeps CLI11 from reading "010" as octal.
inline CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        std::int64_t v = 0;
        if (!parse_integer(input, v)) {
          // A well-formed integer too large for int64_t is out of range, not malformed.
          const char* b = input.c_str();
          char* end = nullptr;
          errno = 0;
          (void)std::strtoll(b, &end, 10);
          if (errno == ERANGE && end == b + input.size())
            return "value " + input + " is out of range " + range;
          return "value '" + input + "' is not a whole number (expected an integer in " + range + ")";
        }
        if (v < lo || v > hi) return "value " + input + " is out of range " + range;
        input = std::to_string(v);
        return std::string{};
      },
      "INT in " + range);
}

/// A validator for a floating-point option: a finite number in [lo, hi] (NaN and infinities are
/// rejected).
inline CLI::Validator finite_in(double lo, double hi) {
  std::ostringstream os;
  os << '[' << lo << ", " << hi << ']';
  const std::string range = os.str();
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        const char* b = input.c_str();
        char* end = nullptr;
        const double v = std::strtod(b, &end);
        if (input.empty() || end != b + input.size())
          return "value '" + input + "' is not a number (expected one in " + range + ")";
        if (!std::isfinite(v) || v < lo || v > hi) return "value " + input + " is out of range " + range;
        return std::string{};
      },
      "NUMBER in " + range);
}

}  // namespace cli
REFDEC_NAMESPACE_END
