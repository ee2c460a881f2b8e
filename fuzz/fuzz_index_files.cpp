// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// A saved reference index's directory from the input: its first byte picks what the rest is (a
// segment file named by a valid MANIFEST; a MANIFEST beside a segment file cut from the input;
// a segment without a MANIFEST), then open_reference_index() and drafts over what it serves. Bad
// files must give refdec::Error or be refused by name, nothing else; what opens must draft
// without faults. Seeds: valid datastores (the fuzz_datastore corpus).

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "common.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/index/index_files.hpp"

namespace {

void write(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("refdec_fuzz_" + std::to_string(getpid()) + "_index");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  const std::uint8_t mode = data[0] % 3;
  const std::uint8_t* rest = data + 1;
  const std::size_t n = size - 1;
  const std::string segment = "segment-g000001-000000.ds";
  if (mode == 0) {  // a valid MANIFEST naming the input as its one segment
    write(dir / segment, rest, n);
    std::ofstream(dir / "MANIFEST") << "refdec-reference-index 1\ngeneration 1\n" << segment << "\n";
  } else if (mode == 1) {  // the first part is a MANIFEST, the rest a segment
    const std::size_t cut = n / 2;
    write(dir / "MANIFEST", rest, cut);
    write(dir / segment, rest + cut, n - cut);
  } else {  // no MANIFEST: every segment file is tried
    write(dir / "segment-000000.ds", rest, n);
  }
  try {
    const auto files = refdec::open_reference_index(dir, {.max_tokens = 1 << 16});
    refdec::IndexDrafter drafter(files.index);
    std::vector<refdec::Token> context;
    for (std::size_t i = 0; i < 6 && i < n; ++i) context.push_back(static_cast<refdec::Token>(rest[n - 1 - i] % 64));
    if (context.empty()) context.push_back(1);
    drafter.begin(context, {});
    refdec::DraftTree tree;
    drafter.propose(32, tree);
  } catch (const refdec::Error&) {
  }
  std::filesystem::remove_all(dir, ec);
  return 0;
}
