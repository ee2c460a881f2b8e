// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Where tests find ../shared: $REFDEC_DATA_DIR, else the directory configured at build time.

#include <cstdlib>
#include <filesystem>

namespace refdec_test {

inline std::filesystem::path data_dir() {
  if (const char* env = std::getenv("REFDEC_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return REFDEC_DEFAULT_DATA_DIR;
}

/// Path of a file under the data directory, or an empty path when it is missing.
inline std::filesystem::path data_file(const std::filesystem::path& relative) {
  const auto p = data_dir() / relative;
  return std::filesystem::exists(p) ? p : std::filesystem::path{};
}

}  // namespace refdec_test
