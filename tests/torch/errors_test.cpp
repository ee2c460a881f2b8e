// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// libtorch's errors as refdec prints them.

#include "torch/model_helpers.hpp"

namespace {

using namespace refdec;
using namespace refdec_test::model;

// Programs print libtorch's own errors as one sentence, without its C++ stack trace.
TEST(Errors, DescribeDropsLibtorchStackTraces) {
  try {
    TORCH_CHECK(false, "a libtorch check failed");  // what libtorch's inline checks throw
  } catch (const c10::Error& e) {
    const std::string message = describe(e);
    EXPECT_EQ(message.find("a libtorch check failed"), 0u) << message;
    EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
  }
  EXPECT_EQ(describe(std::runtime_error("plain")), "plain");
}

}  // namespace
