// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The torch layer's classes differ with oneDNN support; translation units built with and without
// it must name distinct types (torch/abi.hpp), or one program would hold one type with two layouts.
#include <gtest/gtest.h>

#include <string>
#include <typeinfo>

#include "refdec/torch/llama.hpp"
#include "refdec/torch/packed_linear.hpp"

namespace refdec_test {
std::string packed_linear_type_without_onednn();
std::string llama_model_type_without_onednn();
}  // namespace refdec_test

TEST(TorchAbi, BuildsWithAndWithoutOneDnnNameDistinctTypes) {
  if (!REFDEC_HAVE_ONEDNN) GTEST_SKIP() << "this build has no oneDNN: every translation unit has the same configuration";
  EXPECT_NE(std::string(typeid(refdec::PackedLinear).name()), refdec_test::packed_linear_type_without_onednn());
  EXPECT_NE(std::string(typeid(refdec::LlamaModel).name()), refdec_test::llama_model_type_without_onednn());
}
