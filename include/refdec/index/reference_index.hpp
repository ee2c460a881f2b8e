// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
#pragma once
// One reference index shared by every sequence an engine serves, grown online: finished outputs
// (and documents added at run time) go in as they come, and every sequence's IndexDrafter drafts
// from all of it without a copy of its own. begin() takes a snapshot (a pointer), nothing that
// grows with the index.
//
// The index is a short list of immutable segments, each a run of documents with a suffix array
// over them and the common prefix of each suffix with the one before it, oldest first. A document
// added becomes a segment of its own; the newest segments are merged while the older of the two
// is at most twice the newer (a merge of two suffix arrays by their common prefixes, since no
// suffix crosses a document's end), so the list stays logarithmic in the index's size; no merge
// makes a segment of more than half the bound. Past the bound the oldest documents go: the oldest
// segment loses them in one pass over its suffixes (down to an eighth below the bound, so such
// passes are rare), and once the index holds half its bound that segment is no longer merged, so
// a cut never follows a rewrite of it. The merges run in add(), or on a thread of the index's own
// (background_merge; add() then waits while that thread is far behind). Readers take the current
// list (a shared pointer copied under a lock held for nothing else); a writer builds the next list
// aside and swaps it in. Continuation counts come from the suffix array
// ranges: how often each next token followed the matched context. A segment may also be a
// datastore file read in place (a saved index reopened, or a static corpus such as REST's:
// refdec/index/index_files.hpp); static segments stay first, never merged or dropped.

#include <algorithm>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "refdec/core/config.hpp"
#include "refdec/index/segment.hpp"

REFDEC_NAMESPACE_BEGIN

/// Settings of a ReferenceIndex.
struct ReferenceIndexOptions {
  /// Tokens kept at most in the grown segments (static ones not counted): past it the oldest
  /// documents are dropped, down to an eighth below it. No merge makes a segment of more than half
  /// of it.
  std::size_t max_tokens = std::size_t{1} << 26;
  /// Suffixes are ordered by this many tokens (2 to 255): a match and its continuations are at most this long.
  std::size_t depth = 64;
  /// Merge segments on a thread of the index's own instead of in add(): add() then only sorts its
  /// document's suffixes (and waits while that thread is ReferenceIndex::kMaxSegments segments
  /// behind), and readers meanwhile search a few more (small) segments.
  bool background_merge = false;
  /// Bytes kept at most in the grown segments (their bytes(); 0: no bound but max_tokens): past it
  /// the oldest documents are dropped, down to an eighth below it (a single document larger than
  /// it stays until the next one comes).
  std::size_t max_bytes = 0;
};

/// The shared, growing index (see the top of this file). Thread-safe: any number of readers
/// (snapshot()) and writers (add(); one at a time, the others wait for it, readers never do).
class ReferenceIndex {
 public:
  /// The segments at one moment: the static ones (add_static()) first, then the grown ones,
  /// oldest first.
  struct Snapshot {
    std::vector<std::shared_ptr<const IndexSegment>> segments;
    std::size_t statics = 0;  ///< how many of the first segments are static
    std::size_t tokens = 0;   ///< in every segment
    std::size_t bytes = 0;    ///< of every segment (mapped ones included)
  };

  /// With background_merge, add() waits while the grown segments would be more than this many
  /// (the merging thread is behind): readers never face more.
  static constexpr std::size_t kMaxSegments = 64;

  explicit ReferenceIndex(ReferenceIndexOptions options = {}) : opt_(options), current_(std::make_shared<const Snapshot>()) {
    REFDEC_CHECK(opt_.max_tokens >= 1 && opt_.max_tokens <= (std::size_t{1} << 31),
                 "reference index: max_tokens must be in [1, 2^31], got " << opt_.max_tokens);
    REFDEC_CHECK(opt_.depth >= 2 && opt_.depth <= IndexSegment::kMaxDepth,
                 "reference index: depth must be in [2, " << IndexSegment::kMaxDepth << "], got " << opt_.depth);
    if (opt_.background_merge) merger_ = std::thread([this] { merge_loop(); });
  }
  ReferenceIndex(const ReferenceIndex&) = delete;
  ReferenceIndex& operator=(const ReferenceIndex&) = delete;
  ~ReferenceIndex() {
    if (!merger_.joinable()) return;
    {
      const std::lock_guard writer(writer_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    merger_.join();
  }

  const ReferenceIndexOptions& options() const { return opt_; }

  /// Adds one document (a finished output, or text an engine wants drafted from; token ids >= 0).
  /// An empty one is ignored; one longer than max_tokens keeps its last max_tokens tokens. It is
  /// drafted from as soon as this returns.
  void add(std::span<const Token> document) {
    if (document.empty()) return;
    if (document.size() > opt_.max_tokens) document = document.last(opt_.max_tokens);
    insert({std::make_shared<const IndexSegment>(document, opt_.depth)}, false);  // validates, outside every lock
  }

  /// Adds a sealed segment (a datastore file read in place, refdec/index/index_files.hpp) as
  /// the newest: merged and dropped like the others. Throws refdec::ArgumentError for a null
  /// segment, another depth than the index's, or more tokens than max_tokens.
  void add_segment(std::shared_ptr<const IndexSegment> segment) { add_segments({std::move(segment)}); }

  /// Adds sealed segments, oldest first, as add_segment() adds each, but merged only once all are
  /// in: a saved index reopened keeps the layout it was saved with (its segments were settled by
  /// the same rules) and is read in place. Throws as add_segment() does, adding none.
  void add_segments(std::vector<std::shared_ptr<const IndexSegment>> segments) {
    for (const auto& segment : segments) check_joinable(segment.get());
    insert(std::move(segments), false);
  }

  /// Throws refdec::ArgumentError when `segment` cannot be added by add_segment(): null, ordered
  /// by another depth than the index's, or more tokens than max_tokens.
  void check_joinable(const IndexSegment* segment) const {
    check_segment(segment);
    REFDEC_CHECK(segment->tokens() <= opt_.max_tokens,
                 "reference index: a segment of " << segment->tokens() << " tokens exceeds max_tokens " << opt_.max_tokens);
  }

  /// Adds a segment that stays (a static corpus, such as a REST datastore, drafted from together
  /// with the grown outputs): never merged, never dropped, not counted against max_tokens; after
  /// the static segments added before it. Throws refdec::ArgumentError as add_segment() does.
  void add_static(std::shared_ptr<const IndexSegment> segment) {
    check_segment(segment.get());
    insert({std::move(segment)}, true);
  }

  /// Returns once no merge is due (at once without background_merge): for tests and benchmarks
  /// that want the settled shape.
  void wait_for_merges() {
    std::unique_lock writer(writer_mutex_);
    merged_.wait(writer, [&] { return !opt_.background_merge || settled(*snapshot()); });
  }

  /// The index as it is now; stays valid (and unchanged) while held.
  std::shared_ptr<const Snapshot> snapshot() const {
    const std::lock_guard lock(snapshot_mutex_);
    return current_;
  }

  std::size_t tokens() const { return snapshot()->tokens; }
  std::size_t bytes() const { return snapshot()->bytes; }

 private:
  void check_segment(const IndexSegment* segment) const {
    REFDEC_CHECK(segment != nullptr, "reference index: a segment must not be null");
    REFDEC_CHECK(segment->depth() == opt_.depth,
                 "reference index: a segment ordered by " << segment->depth() << " tokens cannot join an index of depth " << opt_.depth);
  }

  // Puts `segments` (oldest first) into the next list, each making room for itself, then merges
  // the newest pair while the rule holds (with background_merge the merging thread does, and this
  // waits first while it is kMaxSegments behind), and publishes it.
  void insert(std::vector<std::shared_ptr<const IndexSegment>> segments, bool is_static) {
    {
      std::unique_lock writer(writer_mutex_);
      if (opt_.background_merge && !is_static) {
        // Merging here as well would race the merging thread for the same pairs (its merges of a
        // pair merged here meanwhile are thrown away): wait for it instead.
        merged_.wait(writer, [&] {
          const auto snap = snapshot();
          return snap->segments.size() - snap->statics + segments.size() <= kMaxSegments || settled(*snap);
        });
      }
      const auto now = snapshot();
      auto next = std::make_shared<Snapshot>();
      next->segments = now->segments;
      next->statics = now->statics;
      auto& segs = next->segments;
      if (is_static) {
        for (auto& segment : segments) segs.insert(segs.begin() + static_cast<std::ptrdiff_t>(next->statics++), std::move(segment));
      } else {
        for (auto& segment : segments) {
          make_room(*next, *segment);
          segs.push_back(std::move(segment));
        }
        if (!opt_.background_merge) {
          // The newest pair while the rule holds: the candidates a merge leaves are at the end.
          for (std::size_t i; (i = candidate(*next)) == segs.size() - 1 && i > 0;) {
            auto merged = IndexSegment::merge(*segs[i - 1], *segs[i]);
            segs.pop_back();
            segs.back() = std::move(merged);
          }
        }
      }
      publish(std::move(next));
    }
    if (opt_.background_merge) wake_.notify_all();
  }

  // Whether `tokens` and `bytes` of grown segments are past the bound scaled by `share`.
  bool past(std::size_t tokens, std::size_t bytes, double share) const {
    return static_cast<double>(tokens) > share * static_cast<double>(opt_.max_tokens) ||
           (opt_.max_bytes > 0 && static_cast<double>(bytes) > share * static_cast<double>(opt_.max_bytes));
  }

  // Drops the oldest documents of `next`'s grown segments when `newest` would take them past the
  // bound: whole segments, then the oldest documents of the oldest one (without_oldest()), down to
  // an eighth below the bound so that the next such pass is far off. The newest is kept whole.
  void make_room(Snapshot& next, const IndexSegment& newest) const {
    auto& segs = next.segments;
    std::size_t grown = newest.tokens(), grown_bytes = newest.bytes();
    for (std::size_t i = next.statics; i < segs.size(); ++i) grown += segs[i]->tokens(), grown_bytes += segs[i]->bytes();
    if (!past(grown, grown_bytes, 1.0)) return;
    constexpr double kLow = 7.0 / 8;
    while (segs.size() > next.statics && past(grown, grown_bytes, kLow)) {
      auto& oldest = segs[next.statics];
      // Tokens to remove: past the bound on tokens, or on bytes at the oldest's bytes a token.
      const double over = std::max(static_cast<double>(grown) - kLow * static_cast<double>(opt_.max_tokens),
                                   opt_.max_bytes == 0 ? 0.0
                                                       : (static_cast<double>(grown_bytes) - kLow * static_cast<double>(opt_.max_bytes)) *
                                                             static_cast<double>(oldest->tokens()) / static_cast<double>(oldest->bytes()));
      grown -= oldest->tokens(), grown_bytes -= oldest->bytes();
      auto rest = oldest->without_oldest(static_cast<std::size_t>(std::ceil(over)));
      if (rest == nullptr) {
        segs.erase(segs.begin() + static_cast<std::ptrdiff_t>(next.statics));
        continue;
      }
      grown += rest->tokens(), grown_bytes += rest->bytes();
      oldest = std::move(rest);
    }
  }

  // The newest i such that grown segments i - 1 and i are due for a merge (the older at most twice
  // the newer, together at most half the bound: no merge rewrites more), or 0 for none. Once the
  // grown segments hold half the bound the oldest is left out: it is the one make_room() cuts.
  std::size_t candidate(const Snapshot& snap) const {
    const auto& segs = snap.segments;
    std::size_t grown = 0, grown_bytes = 0;
    for (std::size_t i = snap.statics; i < segs.size(); ++i) grown += segs[i]->tokens(), grown_bytes += segs[i]->bytes();
    const std::size_t first = snap.statics + (past(grown, grown_bytes, 0.5) ? 2 : 1);
    for (std::size_t i = segs.size(); i-- > first;)
      if (segs[i - 1]->tokens() <= 2 * segs[i]->tokens() && segs[i - 1]->tokens() + segs[i]->tokens() <= opt_.max_tokens / 2) return i;
    return 0;
  }

  // Swaps in `next` (its byte total computed here). Called with writer_mutex_ held.
  void publish(std::shared_ptr<Snapshot> next) {
    next->tokens = next->bytes = 0;
    for (const auto& s : next->segments) next->tokens += s->tokens(), next->bytes += s->bytes();
    std::shared_ptr<const Snapshot> published = std::move(next);
    const std::lock_guard swap(snapshot_mutex_);
    current_.swap(published);
  }

  // The merging thread: merges the newest pair due, outside every lock, then puts the result in
  // place of the pair if both are still there (an eviction may have dropped them meanwhile).
  void merge_loop() {
    std::unique_lock writer(writer_mutex_);
    while (!stop_) {
      const auto snap = snapshot();
      const std::size_t i = candidate(*snap);
      if (i == 0) {
        merging_ = false;
        merged_.notify_all();
        wake_.wait(writer);
        continue;
      }
      merging_ = true;
      const auto older = snap->segments[i - 1], newer = snap->segments[i];
      writer.unlock();
      auto merged = IndexSegment::merge(*older, *newer);
      writer.lock();
      const auto now = snapshot();
      for (std::size_t j = 1; j < now->segments.size(); ++j) {
        if (now->segments[j - 1] != older || now->segments[j] != newer) continue;
        auto next = std::make_shared<Snapshot>(*now);
        next->segments[j - 1] = std::move(merged);
        next->segments.erase(next->segments.begin() + static_cast<std::ptrdiff_t>(j));
        publish(std::move(next));
        break;
      }
      merged_.notify_all();
    }
  }

  // With background_merge: whether the merging thread has nothing to do. Called with
  // writer_mutex_ held.
  bool settled(const Snapshot& snap) const { return !merging_ && candidate(snap) == 0; }

  ReferenceIndexOptions opt_;
  std::mutex writer_mutex_;            // one change of the segment list at a time
  mutable std::mutex snapshot_mutex_;  // held only to copy or swap current_
  std::shared_ptr<const Snapshot> current_;
  // background_merge only.
  std::thread merger_;
  std::condition_variable wake_;    // the list changed, or stop_
  std::condition_variable merged_;  // a merge was put in place, or none is due
  bool merging_ = false;
  bool stop_ = false;
};

REFDEC_NAMESPACE_END
