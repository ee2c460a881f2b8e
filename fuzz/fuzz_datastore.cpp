// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The datastore reader on arbitrary files (the seed is a small valid datastore), then REST
// retrieval with a context from the input. Bad files must give refdec::Error, nothing else;
// a file that opens must answer queries without faults.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/datastore/retrieval.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const refdec_fuzz::ScratchFile scratch(data, size, "datastore.bin");
  const auto& path = scratch.path();
  try {
    const auto store = refdec::Datastore::open(path);
    std::vector<refdec::Token> context;
    for (std::size_t i = 0; i < 8 && i < size; ++i) context.push_back(static_cast<refdec::Token>(data[size - 1 - i] % 64));
    refdec::DraftTree out;
    (void)refdec::retrieve(store, context, refdec::RetrievalOptions{}, 64, out);
  } catch (const refdec::Error&) {
  }
  return 0;
}
