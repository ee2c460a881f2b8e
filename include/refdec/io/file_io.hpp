// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Safe file access (POSIX) for every file refdec reads or writes.
//
// Inputs: regular files only, opened without blocking, so a FIFO, a device or a directory given
// as a checkpoint, datastore or dataset is rejected at once instead of hanging in open().
// Outputs: written to a unique temporary in the target's directory and renamed over the target,
// never onto one of the run's inputs (same device and inode) nor over an existing path that is
// not a regular file (/dev/null, a FIFO, a directory). A killed run leaves at most a hidden
// `.<name>.<random>.tmp` beside the target, which no later run uses.

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"

REFDEC_NAMESPACE_BEGIN

/// An owned POSIX file descriptor, closed on destruction. Movable, not copyable.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~FileDescriptor() { reset(); }

  int get() const { return fd_; }
  /// Closes the descriptor now; returns close()'s result (0 when none was open).
  int reset() noexcept {
    const int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_ = -1;
};

/// A regular file opened for reading, with its size.
struct InputFile {
  FileDescriptor fd;
  std::uint64_t size = 0;  ///< bytes, at the time of opening
  dev_t device = 0;
  ino_t inode = 0;
};

/// Opens `path` for reading. Only regular files are accepted, and opening never blocks: the file is
/// opened with O_NONBLOCK (a FIFO without a writer or a device is then rejected at once) and
/// O_NONBLOCK is cleared once fstat has shown a regular file. Throws refdec::IoError naming `kind`
/// ("datastore", "checkpoint", ...) and `path` when it is missing, unreadable or not a regular file.
inline InputFile open_input_file(const std::filesystem::path& path, std::string_view kind = "file") {
  InputFile f;
  f.fd = FileDescriptor(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  REFDEC_CHECK_IO(f.fd.get() >= 0, "cannot open " << kind << " " << path << ": " << std::strerror(errno));
  struct stat st {};
  REFDEC_CHECK_IO(::fstat(f.fd.get(), &st) == 0, "cannot stat " << kind << " " << path << ": " << std::strerror(errno));
  REFDEC_CHECK_IO(S_ISREG(st.st_mode),
                  kind << " " << path << " is not a regular file" << (S_ISDIR(st.st_mode) ? " (it is a directory)" : ""));
  const int flags = ::fcntl(f.fd.get(), F_GETFL);
  REFDEC_CHECK_IO(flags >= 0 && ::fcntl(f.fd.get(), F_SETFL, flags & ~O_NONBLOCK) == 0,
                  "cannot configure " << kind << " " << path << ": " << std::strerror(errno));
  f.size = static_cast<std::uint64_t>(st.st_size);
  f.device = st.st_dev;
  f.inode = st.st_ino;
  return f;
}

/// Reads up to `n` bytes from `fd` into `data`, retrying short reads and EINTR; returns the bytes
/// read (fewer than `n` only at the end of the file). Throws refdec::IoError naming `path`.
inline std::size_t read_fully(int fd, void* data, std::size_t n, const std::filesystem::path& path, std::string_view kind = "file") {
  std::size_t done = 0;
  auto* out = static_cast<char*>(data);
  while (done < n) {
    const std::size_t want = std::min<std::size_t>(n - done, std::size_t{1} << 30);
    const ssize_t got = ::read(fd, out + done, want);
    if (got < 0 && errno == EINTR) continue;
    REFDEC_CHECK_IO(got >= 0, "error reading " << kind << " " << path << ": " << std::strerror(errno));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

/// The whole content of the regular file `path` (see open_input_file).
inline std::string read_file_bytes(const std::filesystem::path& path, std::string_view kind = "file") {
  InputFile f = open_input_file(path, kind);
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(f.size));
  std::size_t got = read_fully(f.fd.get(), bytes.data(), bytes.size(), path, kind);
  bytes.resize(got);
  char more[4096];  // a file that grew since fstat
  while (true) {
    const std::size_t n = read_fully(f.fd.get(), more, sizeof(more), path, kind);
    bytes.append(more, n);
    if (n < sizeof(more)) break;
  }
  return bytes;
}

/// Removes `path` and, where it is a directory, everything under it; symbolic links are removed,
/// never followed. Returns false when something could not be removed (a missing path is no error).
/// POSIX nftw() rather than std::filesystem::remove_all: PyTorch's pip wheels (libtorch 2.x) export
/// the libstdc++ directory iterators they link statically (pytorch/pytorch#133437), a program
/// linking them calls those, built for another libstdc++'s layout, and remove_all crashes.
inline bool remove_tree(const std::filesystem::path& path) noexcept {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  constexpr auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : -1; };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

/// The names of the entries of directory `dir` ("." and ".." excluded), in no particular order.
/// Throws refdec::IoError naming `dir` when it cannot be read. POSIX readdir() rather than
/// std::filesystem::directory_iterator, for the reason remove_tree() gives.
inline std::vector<std::string> list_directory(const std::filesystem::path& dir) {
  DIR* d = ::opendir(dir.c_str());
  REFDEC_CHECK_IO(d != nullptr, "cannot read directory " << dir << ": " << std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

/// True when `a` and `b` both exist and are the same file (same device and inode; hard links and
/// symbolic links included).
inline bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/// Checks that `path` may be written as an output: it does not exist or is a regular file, and it
/// is none of `inputs` (same device and inode, so hard and symbolic links count). Throws
/// refdec::IoError naming `kind` and `path` otherwise. OutputFile checks this itself; a tool calls
/// it first to fail before a long computation.
inline void check_output_path(const std::filesystem::path& path, std::string_view kind,
                              std::span<const std::filesystem::path> inputs = {}) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    REFDEC_CHECK_IO(errno == ENOENT, "cannot use " << kind << " " << path << ": " << std::strerror(errno));
    return;  // a new file
  }
  REFDEC_CHECK_IO(S_ISREG(st.st_mode), kind << " " << path << " exists and is not a regular file"
                                            << (S_ISDIR(st.st_mode) ? " (it is a directory)" : "") << "; refusing to replace it");
  for (const auto& in : inputs) {
    struct stat si {};
    REFDEC_CHECK_IO(::stat(in.c_str(), &si) != 0 || si.st_dev != st.st_dev || si.st_ino != st.st_ino,
                    kind << " " << path << " is the same file as the input " << in << "; refusing to overwrite it");
  }
}

/// A file written atomically: the bytes go to a unique temporary beside `path` (created with
/// O_EXCL, so concurrent writers never share one), and commit() renames it over `path`. Without
/// commit() (an error, an exception) the temporary is removed. Not for sharing across threads.
class OutputFile {
 public:
  /// Checks `path` and creates the temporary. Throws refdec::IoError naming `kind` and `path` when
  /// `path` is one of `inputs` (same device and inode), exists but is not a regular file (a device
  /// such as /dev/null, a FIFO, a directory), or its directory is not writable.
  explicit OutputFile(const std::filesystem::path& path, std::string_view kind = "output",
                      std::span<const std::filesystem::path> inputs = {})
      : path_(path), kind_(kind), inputs_(inputs.begin(), inputs.end()) {
    REFDEC_CHECK_IO(!path.empty(), "the " << kind << " path is empty");
    REFDEC_CHECK_IO(path.has_filename(), kind << " " << path << " names a directory, not a file");
    check_output_path(path_, kind_, inputs_);
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::random_device rd;
    std::mt19937_64 rng((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid()));
    static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name(1, '.');  // appends only: GCC 12 warns (-Wrestrict) on string operator+ chains
      name.append(path.filename().string());
      name.push_back('.');
      for (int i = 0; i < 12; ++i) name.push_back(kDigits[rng() % 36]);
      name.append(".tmp");
      const std::filesystem::path tmp = dir / name;
      // 0666 before the umask, like any newly created file.
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
      if (fd >= 0) {
        fd_ = FileDescriptor(fd);
        temp_ = tmp;
        return;
      }
      REFDEC_CHECK_IO(errno == EEXIST,
                      "cannot write " << kind << " " << path << ": cannot create a temporary in " << dir << ": " << std::strerror(errno));
    }
    REFDEC_CHECK_IO(false, "cannot create a temporary for " << kind << " " << path);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() { discard(); }

  /// The temporary being written (for a reader that checks it before commit()).
  const std::filesystem::path& temp_path() const { return temp_; }
  const std::filesystem::path& path() const { return path_; }

  /// Appends `n` bytes.
  void write(const void* data, std::size_t n) { write_at(data, n, -1); }
  void write(std::string_view s) { write(s.data(), s.size()); }
  /// Writes `n` bytes at `offset`, leaving the append position alone.
  void pwrite(const void* data, std::size_t n, std::uint64_t offset) { write_at(data, n, static_cast<std::int64_t>(offset)); }

  /// Closes the temporary and renames it over the target (checked again just before, against the
  /// same inputs).
  void commit() {
    REFDEC_CHECK_IO(fd_.get() >= 0, kind_ << " " << path_ << " was already committed or discarded");
    if (fd_.reset() != 0) {
      const int err = errno;
      discard();
      REFDEC_CHECK_IO(false, "cannot write " << kind_ << " " << path_ << ": " << std::strerror(err));
    }
    try {
      check_output_path(path_, kind_, inputs_);
    } catch (...) {
      discard();
      throw;
    }
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      discard();
      REFDEC_CHECK_IO(false, "cannot rename " << temp_ << " to " << kind_ << " " << path_ << ": " << std::strerror(err));
    }
    temp_.clear();
  }

  /// Drops the temporary; the target is left as it was.
  void discard() noexcept {
    fd_.reset();
    if (!temp_.empty()) ::unlink(temp_.c_str());
    temp_.clear();
  }

 private:
  void write_at(const void* data, std::size_t n, std::int64_t offset) {
    REFDEC_CHECK_IO(fd_.get() >= 0, kind_ << " " << path_ << " was already committed or discarded");
    const auto* p = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < n) {
      const std::size_t want = std::min<std::size_t>(n - done, std::size_t{1} << 30);
      const ssize_t put = offset < 0 ? ::write(fd_.get(), p + done, want)
                                     : ::pwrite(fd_.get(), p + done, want, static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
      if (put < 0 && errno == EINTR) continue;
      REFDEC_CHECK_IO(put > 0,
                      "cannot write " << kind_ << " " << path_ << " (temporary " << temp_ << "): " << std::strerror(put < 0 ? errno : EIO));
      done += static_cast<std::size_t>(put);
    }
  }

  std::filesystem::path path_;
  std::string kind_;
  std::vector<std::filesystem::path> inputs_;
  std::filesystem::path temp_;
  FileDescriptor fd_;
};

REFDEC_NAMESPACE_END
