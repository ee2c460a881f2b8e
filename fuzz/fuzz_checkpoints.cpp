// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The checkpoint parsers of the torch layer on arbitrary files: llama2.c checkpoints (a seed from
// stories260K.bin), safetensors files and Hugging Face config.json. The first input byte picks the
// parser. Bad files must give refdec::Error, nothing else.

// First: with clang in C++20 mode, libtorch 1.13's headers need IValue complete before the
// containers that hold it are instantiated.
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>

#include "common.hpp"
#include "refdec/torch/hf_loader.hpp"
#include "refdec/torch/llama2c_loader.hpp"
#include "refdec/torch/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t kind = data[0] % 3;
  const refdec_fuzz::ScratchFile scratch(data + 1, size - 1, kind == 0 ? "model.bin" : kind == 1 ? "model.safetensors" : "config.json");
  const auto& path = scratch.path();
  try {
    if (kind == 0) {
      (void)refdec::load_llama2c(path);
    } else if (kind == 1) {
      refdec::SafetensorsFile file(path);
      for (const auto& info : file.tensors()) (void)file.get(info.name);
    } else {
      (void)refdec::torch_detail::read_hf_llama_config(path);  // the config.json parser load_hf_llama uses
    }
  } catch (const refdec::Error&) {
  }
  return 0;
}
