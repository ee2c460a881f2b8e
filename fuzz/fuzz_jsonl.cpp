// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The JSONL dataset readers (generic traces of token ids, LLMA RAG rows) on arbitrary files. Bad
// rows must give refdec::Error naming the file and row, nothing else.

#include <cstddef>
#include <cstdint>

#include "common.hpp"
#include "eval/datasets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const refdec_fuzz::ScratchFile scratch(data, size, "dataset.jsonl");
  const auto& path = scratch.path();
  try {
    (void)refdec::load_generic_traces(path, nullptr);
  } catch (const refdec::Error&) {
  }
  return 0;
}
