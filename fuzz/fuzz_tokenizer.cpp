// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The llama2.c tokenizer loader on arbitrary files (the seed is stories260K's tok512.bin), then
// encoding and decoding text taken from the input. Bad files must give refdec::Error, nothing else.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common.hpp"
#include "refdec/text/llama2c_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const refdec_fuzz::ScratchFile scratch(data, size, "tokenizer.bin");
  const auto& path = scratch.path();
  try {
    const auto tokenizer = refdec::Llama2cTokenizer::load(path, 512);
    // Text to encode: the file's last bytes (at most 256), so that mutations reach both parts.
    const std::size_t n = size < 256 ? size : 256;
    const std::string_view text(reinterpret_cast<const char*>(data + size - n), n);
    const auto ids = tokenizer.encode(text, true, false);
    (void)tokenizer.decode(ids);
  } catch (const refdec::Error&) {
  }
  return 0;
}
