// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The README's minimal program: speculative greedy decoding with an LLMA drafter.
#include <refdec/drafters/llma.hpp>
#include <refdec/torch/generate.hpp>
#include <refdec/torch/llama2c_loader.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) try {
  using namespace refdec;
  const char* data = std::getenv("REFDEC_DATA_DIR");  // the shared data directory, else ../shared
  const std::string path = argc > 1 ? argv[1] : std::string(data && *data ? data : "../shared") + "/models/stories260K/stories260K.bin";
  const LlamaModel model = load_llama2c(path);
  Request request;
  request.prompt = {1};  // BOS
  // Token ids of a retrieved document, an earlier answer, ...: here a made-up snippet.
  request.references = {{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}};
  GenerateOptions options;
  options.limits.max_new_tokens = 64;
  options.limits.budget = 16;  // draft tokens verified per step (0: plain decoding)
  options.limits.stop_tokens = {1, 2};
  const GenerateResult result = generate(model, request, LlmaDrafter({.min_match = 1, .continuation = 16}), options);
  std::cout << result.tokens[0].size() << " tokens, " << result.stats.tokens_per_step() << " tokens/step\n";
} catch (const refdec::Error& e) {  // a missing or unreadable model, a bad request: say so
  std::cerr << e.what() << "\n";
  return 1;
}
