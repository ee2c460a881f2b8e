// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Input files: regular files only, opened without blocking. Output files: atomic, never an input,
// never a device or FIFO, with unique temporaries.

#include "refdec/io/file_io.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/expect_error.hpp"
#include "refdec/io/mapped_file.hpp"
#include "test_data.hpp"

namespace {

using namespace refdec;
using refdec_test::expect_error;
using refdec_test::TempDir;
namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The files in `dir` other than `keep`.
std::vector<std::string> others(const fs::path& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) names.push_back(name);
  }
  return names;
}

// remove_tree removes nested directories and files, removes a symbolic link without following it,
// and takes a missing path as already removed.
TEST(RemoveTree, RemovesNestedDirectoriesAndLinksNotTheirTargets) {
  TempDir outside;
  write_text(outside / "kept.txt", "kept");
  TempDir dir;
  const auto root = dir / "root";
  fs::create_directories(root / "a" / "b");
  write_text(root / "top.txt", "1");
  write_text(root / "a" / "b" / "deep.txt", "2");
  fs::create_directory_symlink(outside.path(), root / "a" / "link");
  EXPECT_TRUE(remove_tree(root));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_EQ(read_text(outside / "kept.txt"), "kept");
  EXPECT_TRUE(remove_tree(root));  // already gone
  write_text(dir / "file", "3");
  EXPECT_TRUE(remove_tree(dir / "file"));
  EXPECT_FALSE(fs::exists(dir / "file"));
}

TEST(ListDirectory, NamesEveryEntryButDotAndDotDot) {
  TempDir dir;
  std::ofstream(dir / "a.ds") << "x";
  std::filesystem::create_directory(dir / "sub");
  std::filesystem::create_symlink(dir / "a.ds", dir / "link");
  auto names = refdec::list_directory(dir.path());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.ds", "link", "sub"}));
  EXPECT_TRUE(refdec::list_directory(dir / "sub").empty());
  refdec_test::expect_error([&] { (void)refdec::list_directory(dir / "missing"); }, "cannot read directory");
}

TEST(InputFile, ReadsARegularFile) {
  TempDir dir;
  write_text(dir / "a.txt", "hello");
  EXPECT_EQ(read_file_bytes(dir / "a.txt"), "hello");
  write_text(dir / "empty", "");
  EXPECT_EQ(read_file_bytes(dir / "empty"), "");
  const InputFile f = open_input_file(dir / "a.txt");
  EXPECT_EQ(f.size, 5u);
}

// A FIFO with no writer blocks a plain open() for reading forever; this runs the open in the
// test's own thread, so a regression hangs the test (and CTest's timeout reports it).
TEST(InputFile, FifoWithoutWriterIsRejectedWithoutBlocking) {
  TempDir dir;
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { open_input_file(fifo, "datastore"); }, "is not a regular file");
  expect_error([&] { read_file_bytes(fifo, "dataset"); }, "dataset");
  expect_error([&] { MappedFile{fifo, false, "checkpoint"}; }, "is not a regular file");
  EXPECT_THROW(read_file_bytes(fifo), IoError);
}

TEST(InputFile, DirectoryIsRejected) {
  TempDir dir;
  expect_error([&] { read_file_bytes(dir.path(), "config"); }, "(it is a directory)");
  EXPECT_THROW(MappedFile{dir.path()}, IoError);
}

TEST(InputFile, DeviceIsRejected) {
  expect_error([&] { read_file_bytes("/dev/null", "tokenizer"); }, "not a regular file");
}

TEST(InputFile, MissingFileNamesPath) {
  TempDir dir;
  expect_error([&] { read_file_bytes(dir / "nope.bin", "checkpoint"); }, "nope.bin");
  EXPECT_THROW(read_file_bytes(dir / "nope.bin"), IoError);
}

// out.txt in `dir`, holding "old": the file an OutputFile is to replace.
fs::path old_target(const TempDir& dir) {
  const auto out = dir / "out.txt";
  write_text(out, "old");
  return out;
}

TEST(OutputFile, WritesAtomicallyAndLeavesNoTemporary) {
  TempDir dir;
  const auto out = old_target(dir);
  {
    OutputFile f(out);
    f.write("new ");
    f.write("text");
    EXPECT_EQ(read_text(out), "old");  // untouched until commit
    f.pwrite("N", 1, 0);
    f.commit();
  }
  EXPECT_EQ(read_text(out), "New text");
  EXPECT_TRUE(others(dir.path(), {"out.txt"}).empty());
}

TEST(OutputFile, WithoutCommitTheTargetIsUntouched) {
  TempDir dir;
  const auto out = old_target(dir);
  {
    OutputFile f(out);
    f.write("partial");
  }
  EXPECT_EQ(read_text(out), "old");
  EXPECT_TRUE(others(dir.path(), {"out.txt"}).empty());
}

TEST(OutputFile, RefusesToOverwriteAnInput) {
  TempDir dir;
  const auto in = dir / "in.txt";
  write_text(in, "precious");
  const std::vector<fs::path> inputs = {dir / "other", in};
  expect_error([&] { OutputFile{in, "datastore", inputs}; }, "same file as the input");
  // The same file under another name: a hard link, a symbolic link, a relative spelling.
  fs::create_hard_link(in, dir / "hard");
  fs::create_symlink(in, dir / "soft");
  expect_error([&] { OutputFile{dir / "hard", "datastore", inputs}; }, "same file as the input");
  expect_error([&] { OutputFile{dir / "soft", "datastore", inputs}; }, "same file as the input");
  expect_error([&] { OutputFile{dir.path() / "." / "in.txt", "datastore", inputs}; }, "same file as the input");
  EXPECT_EQ(read_text(in), "precious");
  EXPECT_TRUE(same_file(in, dir / "hard"));
  EXPECT_FALSE(same_file(in, dir / "missing"));
}

TEST(OutputFile, RefusesToReplaceANonRegularFile) {
  TempDir dir;
  expect_error([&] { OutputFile{"/dev/null", "trajectories"}; }, "is not a regular file");
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { OutputFile{fifo}; }, "refusing to replace it");
  fs::create_directory(dir / "sub");
  expect_error([&] { OutputFile{dir / "sub"}; }, "(it is a directory)");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(OutputFile, ConcurrentWritersUseDistinctTemporaries) {
  TempDir dir;
  const auto out = dir / "out.ds";
  OutputFile a(out), b(out);
  EXPECT_NE(a.temp_path(), b.temp_path());
  EXPECT_EQ(a.temp_path().parent_path(), out.parent_path());
  a.write("aaaa");
  b.write("bb");
  a.commit();
  EXPECT_EQ(read_text(out), "aaaa");
  b.commit();  // the last rename wins; either file is whole, never a mix
  EXPECT_EQ(read_text(out), "bb");
}

TEST(OutputFile, LeftoversOfAKilledRunDoNotBreakLaterRuns) {
  TempDir dir;
  const auto out = dir / "out.ds";
  // What a killed run of the old code or of this one leaves behind.
  write_text(dir / "out.ds.tmp", "stale");
  write_text(dir / ".out.ds.abcdefghijkl.tmp", "stale");
  OutputFile f(out);
  f.write("fresh");
  f.commit();
  EXPECT_EQ(read_text(out), "fresh");
}

TEST(OutputFile, UnwritableDirectoryIsAnIoError) {
  TempDir dir;
  expect_error([&] { OutputFile{dir / "no" / "such" / "dir" / "out.txt", "trajectories"}; }, "cannot write trajectories");
}

}  // namespace
