// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec.h compiles as C++17 (an engine such as llama.cpp builds as C++17) and links against the
// shim: built as part of the tests, run as one.
#include "refdec/refdec.h"

#include <cstdio>
#include <string_view>

int main() {
  refdec_drafter* d = nullptr;
  if (refdec_drafter_create_prompt_lookup(nullptr, &d) != REFDEC_OK) return 1;
  const bool named = std::string_view(refdec_drafter_name(d)) == "prompt-lookup";
  refdec_drafter_destroy(d);
  std::printf("refdec.h from C++17: version %d, drafter named %s\n", refdec_c_api_version(), named ? "prompt-lookup" : "?");
  return named && refdec_c_api_version() == REFDEC_C_API_VERSION ? 0 : 1;
}
