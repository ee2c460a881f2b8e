// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Where tools, examples and tests find the shared data (../shared): $REFDEC_DATA_DIR, else a
// fallback (the source tree's ../shared, fixed at build time).

#include <cstdlib>
#include <filesystem>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// The data directory: $REFDEC_DATA_DIR when set, else `fallback` (the build's ../shared).
inline std::filesystem::path data_dir_or(const std::filesystem::path& fallback) {
  if (const char* env = std::getenv("REFDEC_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return fallback;
}

REFDEC_NAMESPACE_END
