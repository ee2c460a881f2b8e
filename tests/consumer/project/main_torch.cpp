// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// Runs a Session over a paged KV store on a random model from an installed refdec: two requests,
// one speculative, each equal to its plain greedy decoding.
#include <refdec/drafters/llma.hpp>
#include <refdec/torch/generate.hpp>
#include <refdec/torch/llama.hpp>
#include <refdec/torch/paged_kv_store.hpp>
#include <refdec/torch/session.hpp>

#include <iostream>
#include <map>
#include <vector>

int main() {
  using namespace refdec;
  LlamaConfig config;
  config.dim = 32;
  config.hidden_dim = 48;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.vocab_size = 97;
  config.max_seq_len = 64;
  const LlamaModel model = LlamaModel::random(config, 3);
  GenerateOptions options;
  options.limits.max_new_tokens = 24;
  const std::vector<Request> requests = {{{1, 5, 6}, {}}, {{1}, {{7, 8, 9, 7, 8, 9}}}};
  std::map<RequestId, std::vector<Token>> outputs;
  Session session(model, PagedKvStore(model.kv_layout(), 32, 8), options);
  const RequestId a = session.add(requests[0]);
  const RequestId b = session.add(requests[1], AnyDrafter(LlmaDrafter({.min_match = 1, .continuation = 8, .self_reference = true})));
  while (!session.idle())
    for (const RequestUpdate& u : session.step()) outputs[u.id].insert(outputs[u.id].end(), u.tokens.begin(), u.tokens.end());
  const bool same = outputs[a] == generate(model, requests[0], AnyDrafter{}, options).tokens[0] &&
                    outputs[b] == generate(model, requests[1], AnyDrafter{}, options).tokens[0];
  std::cout << "session: " << outputs[a].size() << " + " << outputs[b].size() << " tokens, "
            << (same ? "equal to plain decoding" : "DIFFERENT from plain decoding") << '\n';
  return same && outputs[a].size() == 24 ? 0 : 1;
}
