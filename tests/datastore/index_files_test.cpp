// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// A ReferenceIndex written as datastore segment files and read back after its process is gone:
// the same drafts; a corrupt or truncated segment refused by name, the others served.

#include "refdec/drafters/index_drafter.hpp"
#include "refdec/index/index_files.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "common/random_text.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
using Tokens = std::vector<Token>;


// Every proposal of a fresh IndexDrafter over `index` for each context, as text.
std::string drafts(const std::shared_ptr<ReferenceIndex>& index, const std::vector<Tokens>& contexts) {
  std::ostringstream out;
  IndexDrafter d(index);
  for (const Tokens& c : contexts) {
    DraftTree tree;
    d.begin(c, {});
    d.propose(24, tree);
    for (std::int32_t i = 1; i <= static_cast<std::int32_t>(tree.size()); ++i) {
      const auto& n = tree.node(i);
      out << '[' << n.token << ' ' << n.score << ' ' << n.depth << ' ' << n.first_child << ' ' << n.next_sibling << ']';
    }
    out << "\n";
  }
  return out.str();
}

TEST(ReferenceIndexFiles, ReopenedIndexDraftsWhatTheOriginalDrafted) {
  refdec_test::TempDir dir;
  std::mt19937 rng(5);
  std::vector<Tokens> contexts;
  for (int i = 0; i < 20; ++i) contexts.push_back(refdec_test::random_text(rng, 30, 40));
  std::string before;
  std::size_t tokens = 0;
  {
    auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = 6000});
    for (int d = 0; d < 60; ++d) index->add(refdec_test::random_text(rng, 50 + rng() % 100, 40));  // some evicted
    const auto files = save_reference_index(*index, dir.path(), 40);
    EXPECT_EQ(files.size(), index->snapshot()->segments.size());
    before = drafts(index, contexts);
    tokens = index->tokens();
  }
  const auto reopened = open_reference_index(dir.path(), {.max_tokens = 6000});
  EXPECT_TRUE(reopened.refused.empty());
  for (const auto& s : reopened.index->snapshot()->segments) EXPECT_TRUE(s->in_place()) << "read from the mapped file, not sorted again";
  EXPECT_EQ(reopened.index->tokens(), tokens);
  EXPECT_EQ(drafts(reopened.index, contexts), before);
  EXPECT_NE(before.find('['), std::string::npos) << "the contexts found something to draft";
  // A second save with fewer segments leaves no stale file behind.
  ReferenceIndex small;
  small.add(Tokens{1, 2, 3});
  EXPECT_EQ(save_reference_index(small, dir.path(), 40).size(), 1u);
  EXPECT_EQ(open_reference_index(dir.path()).index->tokens(), 3u);
}

TEST(ReferenceIndexFiles, ACorruptOrTruncatedSegmentIsRefusedTheOthersServed) {
  refdec_test::TempDir dir;
  std::mt19937 rng(9);
  ReferenceIndex index({.max_tokens = 1 << 20});
  for (const std::size_t n : {400, 150, 60}) index.add(refdec_test::random_text(rng, n, 40));  // each more than halves: three segments
  const auto files = save_reference_index(index, dir.path(), 40);
  ASSERT_EQ(files.size(), 3u);
  const auto sizes = [&] {
    std::vector<std::size_t> n;
    for (const auto& s : index.snapshot()->segments) n.push_back(s->tokens());
    return n;
  }();
  {  // flip a byte in the middle of the first segment's tokens
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(std::filesystem::file_size(files[0]) / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(files[0]) / 2));
    f.write(&c, 1);
  }
  std::filesystem::resize_file(files[1], std::filesystem::file_size(files[1]) - 7);  // truncated
  const auto reopened = open_reference_index(dir.path());
  ASSERT_EQ(reopened.refused.size(), 2u);
  EXPECT_NE(reopened.refused[0].find(files[0].filename().string()), std::string::npos) << reopened.refused[0];
  EXPECT_NE(reopened.refused[1].find(files[1].filename().string()), std::string::npos) << reopened.refused[1];
  std::size_t rest = 0;
  for (std::size_t i = 2; i < sizes.size(); ++i) rest += sizes[i];
  EXPECT_EQ(reopened.index->tokens(), rest);
  EXPECT_EQ(reopened.served.size(), files.size() - 2);
  refdec_test::expect_error([&] { (void)open_reference_index(dir.path() / "missing"); }, "is not a directory");
  refdec_test::expect_error([&] { (void)save_reference_index(index, dir.path(), 10); }, "outside the vocabulary [0, 10)");
}

// Any datastore (REST's format, 2-byte codes here) joins an index as a segment read in place; a
// static one stays first, never merged or dropped, while the grown ones come and go past the bound.
TEST(ReferenceIndexFiles, ADatastoreIsAStaticSegmentReadInPlace) {
  refdec_test::TempDir dir;
  std::mt19937 rng(3);
  std::vector<Tokens> corpus;
  for (int d = 0; d < 8; ++d) corpus.push_back(refdec_test::random_text(rng, 20 + rng() % 30, 30));
  corpus.push_back({});                                 // an empty document: a separator only
  corpus.push_back({39, 38, 37, 36, 1, 2, 3});          // found only here
  build_datastore(corpus, 40, dir.path() / "corpus.ds");
  const auto store = Datastore::open_shared(dir.path() / "corpus.ds");
  ASSERT_EQ(store->header().token_width, 2u);
  auto index = std::make_shared<ReferenceIndex>(ReferenceIndexOptions{.max_tokens = 300});
  const auto segment = index_segment(store, index->options().depth);
  EXPECT_TRUE(segment->in_place());
  ASSERT_EQ(segment->text_size(), store->size());
  for (std::size_t k = 0; k < store->size(); ++k) ASSERT_EQ(segment->token(k), store->token(k)) << k;
  std::size_t corpus_tokens = 0;
  for (const Tokens& d : corpus) corpus_tokens += d.size();
  EXPECT_EQ(segment->tokens(), corpus_tokens);
  index->add_static(segment);
  for (int d = 0; d < 40; ++d) index->add(refdec_test::random_text(rng, 20 + rng() % 30, 30));
  const auto snap = index->snapshot();
  ASSERT_EQ(snap->statics, 1u);
  EXPECT_EQ(snap->segments[0], segment) << "never merged or dropped";
  EXPECT_LE(snap->tokens - corpus_tokens, 300u) << "the bound counts the grown segments only";
  EXPECT_GT(snap->segments.size(), 2u);
  // Patterns are counted in the static segment as in the grown ones.
  for (Token a = 0; a < 30; a += 7) {
    std::size_t in_corpus = 0;
    for (const Tokens& d : corpus) in_corpus += static_cast<std::size_t>(std::count(d.begin(), d.end(), a));
    const auto [lo, hi] = segment->find(Tokens{a});
    EXPECT_EQ(hi - lo, in_corpus) << a;
  }
  IndexDrafter drafter(index, {.request = false});
  DraftTree tree;
  drafter.begin(Tokens{5, 39, 38, 37, 36}, {});
  drafter.propose(3, tree);
  EXPECT_EQ(drafter.last_match(), 4u);
  ASSERT_EQ(tree.size(), 3u);
  EXPECT_EQ(tree.node(1).token, 1);
  EXPECT_EQ(tree.node(3).token, 3);
  EXPECT_FLOAT_EQ(tree.node(3).score, 1.0f);
  // Refused: no segment, another depth, more tokens than the bound, widths a datastore never has.
  refdec_test::expect_error([&] { index->add_segment(nullptr); }, "must not be null");
  refdec_test::expect_error([&] { index->add_segment(index_segment(store, 8)); }, "cannot join an index of depth 64");
  ReferenceIndex tiny({.max_tokens = 10});
  refdec_test::expect_error([&] { tiny.add_segment(index_segment(store, 64)); }, "exceeds max_tokens 10");
  SuffixArrayView::Arrays odd = store->view().arrays();
  odd.code_width = 3;
  refdec_test::expect_error([&] { IndexSegment(SuffixArrayView(odd, "odd"), store, 64); }, "odd: codes must be 2 or 4 bytes, got 3");
}

// A save killed at any moment (SIGKILL in a child process, after 0 to 50 ms) leaves the directory
// opening as one whole save, the earlier or the new one, never a mix of both, with nothing
// refused; what the killed save left behind is ignored, named, and gone after the next save.
TEST(ReferenceIndexFiles, ASaveKilledMidwayLeavesTheEarlierSaveWhole) {
  refdec_test::TempDir dir;
  std::mt19937 rng(17);
  std::vector<ReferenceIndex> versions(2);
  for (int v = 0; v < 2; ++v)
    for (int d = 0; d < 6 + 30 * v; ++d) versions[static_cast<std::size_t>(v)].add(refdec_test::random_text(rng, 20000 + rng() % 20000, 40));
  const std::size_t sizes[2] = {versions[0].tokens(), versions[1].tokens()};
  ASSERT_NE(sizes[0], sizes[1]);
  save_reference_index(versions[0], dir.path(), 40);
  int killed = 0;
  for (const int micros : {0, 100, 300, 1000, 3000, 10000, 30000, 50000, 0, 2000, 20000}) {
    const std::size_t before = open_reference_index(dir.path()).index->tokens();
    const std::size_t next = before == sizes[0] ? 1 : 0;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        save_reference_index(versions[next], dir.path(), 40);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    const bool was_killed = WIFSIGNALED(status);
    if (!was_killed) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "the save failed by itself";
    }
    killed += was_killed ? 1 : 0;
    const auto opened = open_reference_index(dir.path());
    EXPECT_TRUE(opened.refused.empty()) << "killed after " << micros << " us: " << opened.refused.front();
    const std::size_t now = opened.index->tokens();
    EXPECT_TRUE(now == sizes[0] || now == sizes[1]) << "killed after " << micros << " us: " << now << " tokens, a mix of the saves";
    if (!was_killed) {
      EXPECT_EQ(now, sizes[next]);
    }
  }
  EXPECT_GT(killed, 0) << "no save was killed midway: the test did not test";
  // A finished save clears what killed ones left.
  save_reference_index(versions[0], dir.path(), 40);
  const auto opened = open_reference_index(dir.path());
  EXPECT_TRUE(opened.ignored.empty());
  EXPECT_EQ(opened.index->tokens(), sizes[0]);
  std::size_t files = 0;
  for (const auto& name : list_directory(dir.path())) files += name.rfind("segment-", 0) == 0 ? 1 : 0;
  EXPECT_EQ(files, opened.served.size());
}

// What the MANIFEST names is what is served: a named file that is gone or is no regular file is
// refused with its reason; an entry named like a segment that the MANIFEST does not name (or, in
// a directory without one, that is no regular file) is listed, never silently passed over; a
// MANIFEST that does not parse is an error naming it.
TEST(ReferenceIndexFiles, ServesWhatTheManifestNamesAndNamesEverythingElse) {
  refdec_test::TempDir dir;
  ReferenceIndex index;
  index.add(Tokens{1, 2, 3});
  index.add(Tokens{4, 5});
  const auto files = save_reference_index(index, dir.path(), 40);
  ASSERT_FALSE(files.empty());
  std::filesystem::create_directory(dir.path() / "segment-zzz.ds");  // a directory named like a segment
  auto opened = open_reference_index(dir.path());
  EXPECT_TRUE(opened.refused.empty());
  ASSERT_EQ(opened.ignored.size(), 1u);
  EXPECT_EQ(opened.ignored[0].filename(), "segment-zzz.ds");
  std::filesystem::remove(files.back());
  opened = open_reference_index(dir.path());
  ASSERT_EQ(opened.refused.size(), 1u);
  EXPECT_NE(opened.refused[0].find(files.back().filename().string()), std::string::npos) << opened.refused[0];
  // Without a MANIFEST (a directory made by hand, or saved before manifests) every entry named
  // like a segment is tried, and one that is no regular file is refused by name.
  std::filesystem::remove(dir.path() / "MANIFEST");
  opened = open_reference_index(dir.path());
  ASSERT_FALSE(opened.refused.empty());
  EXPECT_NE(opened.refused.back().find("segment-zzz.ds"), std::string::npos) << opened.refused.back();
  {
    std::ofstream bad(dir.path() / "MANIFEST");
    bad << "something else\n";
  }
  refdec_test::expect_error([&] { (void)open_reference_index(dir.path()); }, "is not a manifest");
  {
    std::ofstream bad(dir.path() / "MANIFEST");
    bad << "refdec-reference-index 1\ngeneration 3\n../elsewhere.ds\n";
  }
  refdec_test::expect_error([&] { (void)open_reference_index(dir.path()); }, "not a segment file of its directory");
  EXPECT_FALSE(save_reference_index(index, dir.path(), 40).empty()) << "a bad MANIFEST is replaced by the next save";
  EXPECT_EQ(open_reference_index(dir.path()).index->tokens(), 5u);
}

}  // namespace
