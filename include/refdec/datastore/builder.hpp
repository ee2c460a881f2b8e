// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// Builds a datastore file (format in refdec/datastore/format.hpp) from tokenised documents with
// libdivsufsort. Link against refdec::datastore.
//
// Each array code (token + 1, separator 0) is written as fixed-width big-endian bytes, the byte
// string is suffix-sorted, and only the suffixes that start at multiples of the width are kept:
// big-endian bytes compare like the codes, so their order is the order of the token suffixes.
// Memory: the byte string plus 4 bytes per byte for the sort (8 beyond 2^31 - 1 bytes), i.e.
// about 10 bytes per token with 2-byte codes.

#include <divsufsort.h>
#include <divsufsort64.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/references.hpp"
#include "refdec/datastore/format.hpp"
#include "refdec/io/file_io.hpp"
#include "refdec/io/mapped_file.hpp"

REFDEC_NAMESPACE_BEGIN

/// Options of build_datastore.
struct DatastoreBuildOptions {
  /// Called now and then with a stage name ("encode", "sort", "write", "checksum"), the tokens
  /// done and the total (array positions, separators included); may be empty.
  std::function<void(std::string_view stage, std::uint64_t done, std::uint64_t total)> progress;
  /// The files the corpus was read from: the output must be none of them (same device and inode).
  std::vector<std::filesystem::path> inputs;
};

/// What build_datastore did.
struct DatastoreBuildStats {
  std::uint64_t num_tokens = 0;  ///< corpus tokens (separators excluded)
  std::uint64_t num_documents = 0;
  std::uint64_t file_bytes = 0;
  double seconds = 0;       ///< wall time of the whole build
  double sort_seconds = 0;  ///< of which suffix sorting
  /// Build throughput in corpus tokens per second.
  double tokens_per_second() const { return seconds > 0 ? static_cast<double>(num_tokens) / seconds : 0.0; }
};

/// Builds the datastore file `path` from `documents` (token ids in [0, vocab_size)); every document
/// ends with a separator, so no match or continuation crosses from one into the next. Empty
/// documents are kept (they add only a separator). Throws refdec::ArgumentError for an empty corpus
/// (no tokens at all), an invalid vocab_size or a token out of range (naming the token, its
/// document and position), and refdec::IoError for a write failure or an unusable `path`: one of
/// `options.inputs`, or an existing path that is not a regular file (a device, a FIFO, a
/// directory). The file is written to a unique temporary beside `path` and renamed over it, so
/// concurrent builds of the same path never mix and a killed build leaves `path` untouched.
inline DatastoreBuildStats build_datastore(References documents, std::int32_t vocab_size, const std::filesystem::path& path,
                                           const DatastoreBuildOptions& options = {}) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  REFDEC_CHECK(vocab_size >= 1, "datastore vocab_size must be at least 1, got " << vocab_size);
  check_output_path(path, "datastore", options.inputs);  // before the sort, which may take minutes
  DatastoreBuildStats stats;
  stats.num_documents = documents.size();
  for (std::size_t d = 0; d < documents.size(); ++d) {
    const auto& doc = documents[d];
    for (std::size_t i = 0; i < doc.size(); ++i)
      REFDEC_CHECK(doc[i] >= 0 && doc[i] < vocab_size, "datastore build: token " << doc[i] << " of document " << d << " at position " << i
                                                                                 << " is outside the vocabulary [0, " << vocab_size << ")");
    stats.num_tokens += doc.size();
  }
  REFDEC_CHECK(stats.num_tokens > 0, "cannot build a datastore from an empty corpus (" << documents.size() << " documents, no tokens)");
  auto progress = [&](std::string_view stage, std::uint64_t done, std::uint64_t total) {
    if (options.progress) options.progress(stage, done, total);
  };

  DatastoreHeader h;
  h.num_tokens = stats.num_tokens + stats.num_documents;
  h.num_documents = stats.num_documents;
  h.vocab_size = static_cast<std::uint32_t>(vocab_size);
  h.token_width = datastore_token_width(h.vocab_size);
  h.index_width = datastore_index_width(h.num_tokens);
  h.tokens_offset = datastore_align(kDatastoreHeaderBytes);
  h.tokens_bytes = h.num_tokens * h.token_width;
  h.suffix_offset = datastore_align(h.tokens_offset + h.tokens_bytes);
  h.suffix_bytes = h.num_tokens * h.index_width;
  h.file_bytes = h.suffix_offset + h.suffix_bytes;
  const std::uint64_t n = h.num_tokens;
  const std::uint32_t w = h.token_width;
  const std::uint64_t nbytes = n * w;
  const std::uint64_t chunk = std::uint64_t{1} << 24;

  // Big-endian codes: the byte string to sort.
  std::vector<std::uint8_t> text(nbytes);  // [n * w]
  {
    std::uint64_t p = 0;
    auto put = [&](std::uint32_t c) {
      for (std::uint32_t b = 0; b < w; ++b) text[p * w + b] = static_cast<std::uint8_t>(c >> (8 * (w - 1 - b)));
      ++p;
      if (p % chunk == 0) progress("encode", p, n);
    };
    for (const auto& doc : documents) {
      for (const Token t : doc) put(static_cast<std::uint32_t>(t) + 1);
      put(0);
    }
    progress("encode", n, n);
  }

  // Suffix-sort the bytes, then keep positions that are multiples of w, as token positions, packed
  // in place at the front of the sort's buffer as index_width-byte entries. Reading entry i before
  // writing entry j <= i never overwrites an unread entry (index_width <= the sort's width).
  std::vector<std::uint8_t> sa;  // [nbytes * sort width] then [n * index_width] at the front
  const auto ts = Clock::now();
  progress("sort", 0, n);
  const bool wide = nbytes > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max());
  const std::size_t sort_width = wide ? 8 : 4;
  sa.resize(nbytes * sort_width);
  if (wide) {
    REFDEC_CHECK(divsufsort64(text.data(), reinterpret_cast<saidx64_t*>(sa.data()), static_cast<saidx64_t>(nbytes)) == 0,
                 "divsufsort64 failed on " << nbytes << " bytes");
  } else {
    REFDEC_CHECK(divsufsort(text.data(), reinterpret_cast<saidx_t*>(sa.data()), static_cast<saidx_t>(nbytes)) == 0,
                 "divsufsort failed on " << nbytes << " bytes");
  }
  stats.sort_seconds = std::chrono::duration<double>(Clock::now() - ts).count();
  progress("sort", n, n);
  std::vector<std::uint8_t>().swap(text);  // free before writing (`= {}` would keep the capacity)
  {
    std::uint64_t j = 0;
    for (std::uint64_t i = 0; i < nbytes; ++i) {
      std::uint64_t pos;
      if (wide) {
        std::int64_t v;
        std::memcpy(&v, sa.data() + i * 8, 8);
        pos = static_cast<std::uint64_t>(v);
      } else {
        std::int32_t v;
        std::memcpy(&v, sa.data() + i * 4, 4);
        pos = static_cast<std::uint64_t>(v);
      }
      if (pos % w != 0) continue;
      pos /= w;
      if (h.index_width == 4) {
        const auto v = static_cast<std::uint32_t>(pos);
        std::memcpy(sa.data() + j * 4, &v, 4);
      } else {
        std::memcpy(sa.data() + j * 8, &pos, 8);
      }
      ++j;
    }
    REFDEC_CHECK(j == n, "internal error: " << j << " token suffixes for " << n << " tokens");
  }

  // Write a unique temporary: header placeholder, codes (little-endian), suffix array.
  OutputFile out(path, "datastore", options.inputs);  // removed unless committed
  const std::vector<std::uint8_t> zeros(kDatastoreAlignment + kDatastoreHeaderBytes, 0);
  out.write(zeros.data(), h.tokens_offset);
  {
    std::vector<std::uint8_t> buf;
    buf.reserve(chunk * w);
    std::uint64_t written = 0;
    auto flush = [&] {
      out.write(buf.data(), buf.size());
      written += buf.size() / w;
      buf.clear();
      progress("write", written, n);
    };
    auto put = [&](std::uint32_t c) {
      for (std::uint32_t b = 0; b < w; ++b) buf.push_back(static_cast<std::uint8_t>(c >> (8 * b)));
      if (buf.size() >= chunk * w) flush();
    };
    for (const auto& doc : documents) {
      for (const Token t : doc) put(static_cast<std::uint32_t>(t) + 1);
      put(0);
    }
    flush();
  }
  out.write(zeros.data(), h.suffix_offset - (h.tokens_offset + h.tokens_bytes));
  out.write(sa.data(), h.suffix_bytes);
  std::vector<std::uint8_t>().swap(sa);

  // Checksums: hash the data as written, then fill in the header.
  progress("checksum", 0, n);
  {
    MappedFile map(out.temp_path(), false, "datastore");
    REFDEC_CHECK_IO(map.size() == h.file_bytes,
                    "datastore " << out.temp_path() << " has " << map.size() << " bytes, expected " << h.file_bytes);
    h.data_checksum = datastore_hash(std::span<const std::uint8_t>(map.data() + h.tokens_offset, h.file_bytes - h.tokens_offset));
  }
  h.header_checksum = datastore_hash(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(&h), offsetof(DatastoreHeader, header_checksum)));
  out.pwrite(&h, sizeof(h), 0);
  progress("checksum", n, n);
  out.commit();
  stats.file_bytes = h.file_bytes;
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return stats;
}

REFDEC_NAMESPACE_END
