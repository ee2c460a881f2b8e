// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// A translation unit built as a program without oneDNN would build the torch layer (whatever this
// build found), for abi_test.cpp: both configurations in one program must name distinct types.
#undef REFDEC_HAVE_ONEDNN
#define REFDEC_HAVE_ONEDNN 0

#include <string>
#include <typeinfo>

#include "refdec/torch/llama.hpp"
#include "refdec/torch/packed_linear.hpp"

namespace refdec_test {
std::string packed_linear_type_without_onednn() { return typeid(refdec::PackedLinear).name(); }
std::string llama_model_type_without_onednn() { return typeid(refdec::LlamaModel).name(); }
}  // namespace refdec_test
