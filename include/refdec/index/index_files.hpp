// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// A ReferenceIndex kept across restarts: each segment written as a datastore file (the checksummed
// format REST's datastores use, refdec/datastore/format.hpp), and a directory of them opened as
// the segments of a new index, read in place from the mapped files (nothing sorted again), a
// corrupt or truncated file refused with its reason while the others are served. Any datastore
// (REST's too) can be a segment of an index: index_segment(). Link against refdec::datastore.
//
// A save is atomic: its segment files get names of their own generation, written beside the
// earlier save's, and a MANIFEST naming the generation and its files is renamed into place last.
// A save that fails or is killed at any point leaves the earlier MANIFEST, and the files it
// names, as they were; the next open serves exactly what one MANIFEST names. Files are never
// rewritten in place, which is what a server reading them mapped needs (docs/reliability.md).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/datastore/builder.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/index/reference_index.hpp"
#include "refdec/io/file_io.hpp"

REFDEC_NAMESPACE_BEGIN

namespace index_files_detail {
inline constexpr const char* kManifest = "MANIFEST";
inline constexpr std::string_view kManifestMagic = "refdec-reference-index 1";

// Every entry of `dir` named segment-*.ds, whatever it is (a file, a directory, a FIFO, a link),
// in name order: oldest first within a generation.
inline std::vector<std::filesystem::path> segment_names(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const std::string& name : list_directory(dir))
    if (name.rfind("segment-", 0) == 0 && name.size() > 11 && name.ends_with(".ds")) files.push_back(dir / name);
  std::sort(files.begin(), files.end());
  return files;
}

// What a MANIFEST says: the generation of the save and its segment files, oldest first.
struct Manifest {
  std::uint64_t generation = 0;
  std::vector<std::string> files;
};

// `dir`'s MANIFEST, or nothing where there is none (a directory saved before manifests, or made
// by hand: every segment file in it is then served). Throws refdec::IoError for one that does not
// parse, or that names anything but a segment file of its directory.
inline std::optional<Manifest> read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifest;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  std::istringstream in(read_file_bytes(path, "reference index manifest"));
  std::string line;
  Manifest m;
  REFDEC_CHECK_IO(std::getline(in, line) && line == kManifestMagic,
                  "reference index: " << path << " is not a manifest (first line '" << line << "')");
  REFDEC_CHECK_IO(std::getline(in, line) && line.rfind("generation ", 0) == 0, "reference index: " << path << " names no generation");
  try {
    m.generation = std::stoull(line.substr(11));
  } catch (const std::exception&) {
    REFDEC_CHECK_IO(false, "reference index: " << path << ": bad generation '" << line << "'");
  }
  while (std::getline(in, line)) {
    REFDEC_CHECK_IO(line.rfind("segment-", 0) == 0 && line.ends_with(".ds") && line.find('/') == std::string::npos,
                    "reference index: " << path << " names '" << line << "', not a segment file of its directory");
    m.files.push_back(line);
  }
  return m;
}

// The generation of a segment file name segment-gNNNNNN-NNNNNN.ds, or 0 (an older save's name).
inline std::uint64_t generation_of(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  if (name.rfind("segment-g", 0) != 0) return 0;
  std::uint64_t g = 0;
  for (std::size_t i = 9; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) g = g * 10 + static_cast<std::uint64_t>(name[i] - '0');
  return g;
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
  SuffixArrayView::Arrays arrays = store->view().arrays();
  arrays.skip = static_cast<std::size_t>(store->num_documents());  // the separators' suffixes sort first
  arrays.num_suffixes = static_cast<std::size_t>(store->num_corpus_tokens());
  return std::make_shared<const IndexSegment>(SuffixArrayView(arrays, store->view().label()), std::shared_ptr<const void>(store), depth);
}

/// Writes the segments of `index` as it is now (one snapshot) into directory `dir` (created if
/// missing) as one new generation: segment-gGGGGGG-000000.ds, ... oldest first (each written
/// atomically by build_datastore), then a MANIFEST naming them, renamed over the earlier one;
/// only then are the earlier generation's files removed. A save that throws or is killed midway
/// leaves the earlier save whole (see the file comment). Token ids must be below `vocab_size`.
/// Returns the files written. Throws refdec::Error when a file cannot be written.
inline std::vector<std::filesystem::path> save_reference_index(const ReferenceIndex& index, const std::filesystem::path& dir,
                                                               std::int32_t vocab_size) {
  using namespace index_files_detail;
  std::filesystem::create_directories(dir);
  // A generation above the MANIFEST's and above any file's (an interrupted save's included).
  std::uint64_t generation = 0;
  try {
    if (const auto m = read_manifest(dir)) generation = m->generation;
  } catch (const IoError&) {  // an unreadable manifest is replaced
  }
  for (const auto& f : segment_names(dir)) generation = std::max(generation, generation_of(f));
  ++generation;
  const auto snap = index.snapshot();
  std::vector<std::filesystem::path> written;
  Manifest manifest{generation, {}};
  for (std::size_t i = 0; i < snap->segments.size(); ++i) {
    const IndexSegment& segment = *snap->segments[i];
    char name[48];
    std::snprintf(name, sizeof name, "segment-g%06llu-%06zu.ds", static_cast<unsigned long long>(generation), i);
    build_datastore(split_documents(segment.text_size(), [&](std::uint64_t k) { return segment.token(k); }), vocab_size,
                    dir / name);  // written to a temporary and renamed, or not at all
    written.push_back(dir / name);
    manifest.files.push_back(name);
  }
  {
    OutputFile out(dir / kManifest, "reference index manifest");
    std::string text = std::string(kManifestMagic) + "\ngeneration " + std::to_string(generation) + "\n";
    for (const auto& f : manifest.files) text += f + "\n";
    out.write(text);
    out.commit();  // the save happens here
  }
  for (const auto& old : segment_names(dir))
    if (std::find(written.begin(), written.end(), old) == written.end()) {
      std::error_code ec;
      std::filesystem::remove(old, ec);  // an earlier generation's file: unlinking leaves a mapping of it valid
    }
  return written;
}

/// What open_reference_index() read.
struct ReferenceIndexFiles {
  std::shared_ptr<ReferenceIndex> index;  ///< the documents of every file served
  std::vector<std::filesystem::path> served;
  std::vector<std::string> refused;            ///< one line per file refused: its path and why
  std::vector<std::filesystem::path> ignored;  ///< segment files its MANIFEST does not name (an interrupted save's)
};

/// A new index (with `options`) whose segments are the segment files its MANIFEST names (without
/// one, every entry named segment-*.ds), oldest first, each mapped and read in place
/// (index_segment()). A file that is missing or not a regular file, does not open as a datastore
/// (corrupt, truncated, wrong version: the datastore's own checks, checksum included) or holds
/// more than options.max_tokens tokens is refused, named with the reason in `refused`, and the
/// others are served (the oldest documents cut while they hold more than max_tokens together, as
/// in the index), added together (ReferenceIndex::add_segments()) so that the saved layout stays.
/// Segment files the MANIFEST does not name (an interrupted save's) are listed in `ignored`.
/// Throws refdec::IoError when `dir` is not a readable directory or its MANIFEST does not parse.
inline ReferenceIndexFiles open_reference_index(const std::filesystem::path& dir, ReferenceIndexOptions options = {}) {
  using namespace index_files_detail;
  REFDEC_CHECK_IO(std::filesystem::is_directory(dir), "reference index: '" << dir.string() << "' is not a directory");
  ReferenceIndexFiles out;
  out.index = std::make_shared<ReferenceIndex>(options);
  std::vector<std::filesystem::path> paths;
  if (const auto manifest = read_manifest(dir)) {
    for (const auto& f : manifest->files) paths.push_back(dir / f);
    for (const auto& f : segment_names(dir))
      if (std::find(paths.begin(), paths.end(), f) == paths.end()) out.ignored.push_back(f);
  } else {
    paths = segment_names(dir);
  }
  std::vector<std::shared_ptr<const IndexSegment>> segments;
  for (const auto& path : paths) {
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
