// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// HugePageBuffer: zeroed, writable memory of the size asked, aligned to a huge page from one huge
// page up (64 bytes below), moved without copies, and (on Linux, where transparent huge pages are
// not switched off) in a mapping the kernel may back with huge pages.

#include "refdec/cpu/huge_pages.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace {

using refdec::HugePageBuffer;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Whether every byte of `b` is 0.
bool zeroed(const HugePageBuffer& b) {
  const auto* bytes = static_cast<const unsigned char*>(b.data());
  for (std::size_t i = 0; i < b.size(); ++i)
    if (bytes[i] != 0) return false;
  return true;
}

TEST(HugePageBuffer, EmptyHoldsNoMemory) {
  const HugePageBuffer none(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_FALSE(none.advised());
}

TEST(HugePageBuffer, SmallBuffersAreZeroedAndCacheLineAligned) {
  HugePageBuffer b(1000);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(address(b.data()) % 64, 0u);
  EXPECT_TRUE(zeroed(b));
  EXPECT_FALSE(b.advised());
  static_cast<unsigned char*>(b.data())[999] = 7;  // the last byte is ours
}

TEST(HugePageBuffer, LargeBuffersAreZeroedWritableAndHugePageAligned) {
  const std::size_t size = 3 * HugePageBuffer::kHugePageBytes + 5;
  HugePageBuffer b(size);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), size);
  EXPECT_TRUE(zeroed(b));
  auto* bytes = static_cast<unsigned char*>(b.data());
  bytes[0] = 1, bytes[size - 1] = 2;
#if defined(__linux__)
  EXPECT_EQ(address(b.data()) % HugePageBuffer::kHugePageBytes, 0u);
  EXPECT_TRUE(b.advised());
#endif
  // A move hands the memory over untouched and leaves the source empty.
  HugePageBuffer moved(std::move(b));
  EXPECT_EQ(moved.data(), bytes);
  EXPECT_EQ(moved.size(), size);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.size(), 0u);
  HugePageBuffer assigned(100);
  assigned = std::move(moved);
  EXPECT_EQ(static_cast<unsigned char*>(assigned.data())[size - 1], 2);
}

// The kernel's own account of the mapping: /proc/self/smaps's THPeligible for the range holding
// the buffer (1: the kernel may back it with huge pages).
TEST(HugePageBuffer, LargeBuffersMayHaveTransparentHugePages) {
#if !defined(__linux__)
  GTEST_SKIP() << "transparent huge pages are Linux's";
#else
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(setting, modes)) GTEST_SKIP() << "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)";
  if (modes.find("[never]") != std::string::npos) GTEST_SKIP() << "transparent huge pages are switched off here: " << modes;
  const HugePageBuffer b(4 * HugePageBuffer::kHugePageBytes);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false, found = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {  // a mapping's first line
      inside = lo <= address(b.data()) && address(b.data()) < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      std::istringstream(line.substr(12)) >> found;
      break;
    }
  }
  EXPECT_TRUE(found) << "no THPeligible: 1 for the buffer's mapping in /proc/self/smaps (THP setting: " << modes << ")";
#endif
}

}  // namespace
