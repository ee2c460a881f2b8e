// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Read-only memory-mapped files (POSIX), for checkpoints and datastores.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "refdec/core/config.hpp"
#include "refdec/io/file_io.hpp"

REFDEC_NAMESPACE_BEGIN

/// A whole file mapped read-only into memory; unmapped on destruction. Movable, not copyable;
/// its bytes may be read from any number of threads.
class MappedFile {
 public:
  MappedFile() = default;
  /// Maps `path`; with `populate`, reads it all in now (MAP_POPULATE) instead of on first touch.
  /// Only regular files are accepted, and opening never blocks (see open_input_file).
  /// Throws refdec::IoError when it cannot be opened or mapped; `kind` names what the file was
  /// meant to be in that message ("datastore", ...).
  explicit MappedFile(const std::filesystem::path& path, bool populate = false, std::string_view kind = "file") {
    InputFile file = open_input_file(path, kind);  // regular files only, never blocks
    const int fd = file.fd.get();
    size_ = static_cast<std::size_t>(file.size);
    if (size_ > 0) {           // mmap rejects empty lengths; an empty file maps to nothing
      int flags = MAP_SHARED;  // read-only: shared pages serve every process mapping the file
#ifdef MAP_POPULATE
      if (populate) flags |= MAP_POPULATE;
#else
      (void)populate;
#endif
      void* addr = ::mmap(nullptr, size_, PROT_READ, flags, fd, 0);
      const int err = errno;
      file.fd.reset();  // the mapping keeps the file alive
      REFDEC_CHECK_IO(addr != MAP_FAILED, "cannot memory-map " << kind << " " << path << ": " << std::strerror(err));
      data_ = static_cast<const std::uint8_t*>(addr);
    }
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~MappedFile() { unmap(); }

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

REFDEC_NAMESPACE_END
