// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A ReferenceIndex kept across restarts: each segment written as a datastore file (the checksummed
// format REST's datastores use, refdec/datastore/format.hpp), and a directory of them opened as
// the segments of a new index, read in place from the mapped files (nothing sorted again), a
// corrupt or truncated file refused with its reason while the others are served. Any datastore
// (REST's too) can be a segment of an index: index_segment(). Link against refdec::datastore.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/core/file_io.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/drafters/reference_index.hpp"

REFDEC_NAMESPACE_BEGIN

namespace index_files_detail {
// The segment files in `dir`, oldest (lowest number) first.
inline std::vector<std::filesystem::path> segment_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const std::string& name : list_directory(dir)) {
    const std::filesystem::path p = dir / name;
    if (name.rfind("segment-", 0) == 0 && p.extension() == ".ds" && std::filesystem::is_regular_file(p)) files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  return files;
}
// The documents of `n` tokens read by `token(i)`, each ended by a negative id (IndexSegment::kEnd,
// a datastore's separator).
template <class TokenAt>
std::vector<std::vector<Token>> split_documents(std::uint64_t n, TokenAt token) {
  std::vector<std::vector<Token>> documents(1);
  for (std::uint64_t i = 0; i < n; ++i) {
    const Token t = token(i);
    if (t < 0)
      documents.emplace_back();
    else
      documents.back().push_back(t);
  }
  documents.pop_back();  // the empty one after the last end
  return documents;
}
}  // namespace index_files_detail

/// A segment over `store`'s arrays, read in place (the mapping stays open while the segment
/// lives), ordered for an index of `depth`: a datastore's suffix array is in full order.
inline std::shared_ptr<const IndexSegment> index_segment(std::shared_ptr<const Datastore> store, std::size_t depth) {
  REFDEC_CHECK(store != nullptr, "reference index: the datastore must not be null");
  const DatastoreHeader& h = store->header();
  const IndexSegment::Arrays arrays{.codes = store->codes(),
                                    .code_width = h.token_width,
                                    .num_codes = static_cast<std::size_t>(h.num_tokens),
                                    .suffixes = store->suffix_array(),
                                    .suffix_width = h.index_width,
                                    .skip = static_cast<std::size_t>(h.num_documents),  // separators sort first
                                    .num_suffixes = static_cast<std::size_t>(h.num_tokens - h.num_documents)};
  return std::make_shared<const IndexSegment>(arrays, std::shared_ptr<const void>(store), depth);
}

/// Writes the segments of `index` as it is now (one snapshot) into directory `dir` (created if
/// missing), oldest first as segment-000000.ds, segment-000001.ds, ... (each written atomically
/// by build_datastore), and segment files of an earlier save beyond the new ones are removed. Token ids must be below `vocab_size`. Returns
/// the files written. Throws refdec::Error (nothing half-written under a segment's name) when a file cannot be written.
inline std::vector<std::filesystem::path> save_reference_index(const ReferenceIndex& index, const std::filesystem::path& dir,
                                                               std::int32_t vocab_size) {
  std::filesystem::create_directories(dir);
  const auto snap = index.snapshot();
  std::vector<std::filesystem::path> written;
  for (std::size_t i = 0; i < snap->segments.size(); ++i) {
    const IndexSegment& segment = *snap->segments[i];
    char name[32];
    std::snprintf(name, sizeof name, "segment-%06zu.ds", i);
    build_datastore(index_files_detail::split_documents(segment.text_size(), [&](std::uint64_t k) { return segment.token(k); }), vocab_size,
                    dir / name);  // written to a temporary and renamed, or not at all
    written.push_back(dir / name);
  }
  for (const auto& old : index_files_detail::segment_files(dir))
    if (std::find(written.begin(), written.end(), old) == written.end()) std::filesystem::remove(old);
  return written;
}

/// What open_reference_index() read.
struct ReferenceIndexFiles {
  std::shared_ptr<ReferenceIndex> index;  ///< the documents of every file served
  std::vector<std::filesystem::path> served;
  std::vector<std::string> refused;  ///< one line per file refused: its path and why
};

/// A new index (with `options`) whose segments are the segment files in `dir`, oldest first, each
/// mapped and read in place (index_segment()). A file that does not open as a datastore (corrupt,
/// truncated, wrong version: the datastore's own checks, checksum included) or holds more than
/// options.max_tokens tokens is refused, named with the reason in `refused`, and the others are
/// served (the oldest documents cut while they hold more than max_tokens together, as in the
/// index), added together (ReferenceIndex::add_segments()) so that the saved layout stays.
/// Throws refdec::IoError when `dir` is not a readable directory.
inline ReferenceIndexFiles open_reference_index(const std::filesystem::path& dir, ReferenceIndexOptions options = {}) {
  REFDEC_CHECK_IO(std::filesystem::is_directory(dir), "reference index: '" << dir.string() << "' is not a directory");
  ReferenceIndexFiles out;
  out.index = std::make_shared<ReferenceIndex>(options);
  std::vector<std::shared_ptr<const IndexSegment>> segments;
  for (const auto& path : index_files_detail::segment_files(dir)) {
    try {
      auto segment = index_segment(Datastore::open_shared(path), options.depth);
      out.index->check_joinable(segment.get());
      segments.push_back(std::move(segment));
    } catch (const Error& e) {
      out.refused.push_back(path.string() + ": " + e.what());
      continue;
    }
    out.served.push_back(path);
  }
  out.index->add_segments(std::move(segments));  // merged once all are in: the saved layout stays
  return out;
}

REFDEC_NAMESPACE_END
