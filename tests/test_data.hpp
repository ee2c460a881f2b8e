// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Where tests find ../shared: $REFDEC_DATA_DIR, else the directory configured at build time.

#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

#include "eval/data_dir.hpp"
#include "refdec/io/file_io.hpp"

namespace refdec_test {

inline std::filesystem::path data_dir() { return refdec::data_dir_or(REFDEC_DEFAULT_DATA_DIR); }

/// Path of a file under the data directory, or an empty path when it is missing.
inline std::filesystem::path data_file(const std::filesystem::path& relative) {
  const auto p = data_dir() / relative;
  return std::filesystem::exists(p) ? p : std::filesystem::path{};
}

/// A fresh directory under the system temp directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = std::filesystem::temp_directory_path() / ("refdec_test_" + std::to_string(rd()) + std::to_string(rd()));
      if (std::filesystem::create_directory(path_)) return;
    }
    throw std::runtime_error("cannot create a temporary directory");
  }
  ~TempDir() { refdec::remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace refdec_test
