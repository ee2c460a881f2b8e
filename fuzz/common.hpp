// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Shared by the fuzz targets: the loaders under test read files, so each input is written to a
// scratch file of this process first.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace refdec_fuzz {

/// This process's scratch file (named `name`) holding `data`, for one input: removed when the
/// input is done, so that a fuzz run leaves nothing in the temp directory.
class ScratchFile {
 public:
  ScratchFile(const std::uint8_t* data, std::size_t size, const char* name)
      : path_(std::filesystem::temp_directory_path() / ("refdec_fuzz_" + std::to_string(getpid()) + "_" + name)) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Reads bytes off the front of a fuzz input; zeros once it is used up.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  bool empty() const { return pos_ >= size_; }
  const std::uint8_t* rest() const { return data_ + pos_; }
  std::size_t rest_size() const { return pos_ < size_ ? size_ - pos_ : 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace refdec_fuzz
