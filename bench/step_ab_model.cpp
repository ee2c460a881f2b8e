// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// One side of refdec-step-ab (bench/step_ab.sh): a random-weight model of a benchmark shape and its
// verification step, compiled twice into one program, once against another revision's headers
// with the namespace renamed (-Drefdec=refdec_base), so that both versions run in one process.
// STEP_AB_SIDE names the side: its two functions are <side>_init and <side>_step.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "refdec/torch/contiguous_kv_store.hpp"
#include "refdec/torch/llama.hpp"
#include "refdec/torch/verifier.hpp"
#include "shapes.hpp"

#define STEP_AB_CAT2(a, b) a##_##b
#define STEP_AB_CAT(a, b) STEP_AB_CAT2(a, b)
#define STEP_AB_FN(name) STEP_AB_CAT(STEP_AB_SIDE, name)
#define STEP_AB_STR2(a) #a
#define STEP_AB_STR(a) STEP_AB_STR2(a)
#define STEP_AB_NAME STEP_AB_STR(STEP_AB_SIDE)

namespace {

struct Side {
  refdec::LlamaModel model;
  refdec::ContiguousKvStore store;
  refdec::StepPlan plan;
  refdec::Verification verification;
  refdec::StepTimes times;
};
std::unique_ptr<Side> side;

refdec::Token token(std::size_t i, std::int64_t vocab) { return static_cast<refdec::Token>((i * 7919 + 3) % static_cast<std::size_t>(vocab)); }

}  // namespace

// Makes the model (seed 1, bf16 on the CPU, the linear kernel STEP_AB_LINEAR names, auto where it
// is unset), prints which kernel its linear layers take and why (each side measures its own
// choice at load, so a ratio compares the two choices too, unless STEP_AB_CHOICE gives both the
// same: a LinearChoice as --linear-choice takes it), and prefills `context` tokens.
extern "C" void STEP_AB_FN(init)(const char* shape, int context, int largest_step) {
  const char* linear = std::getenv("STEP_AB_LINEAR");
  const char* choice = std::getenv("STEP_AB_CHOICE");
  auto model = refdec::LlamaModel::random(
      refdec_bench::shape(shape), 1, at::kBFloat16, at::kCPU, refdec::parse_linear_kernel(linear != nullptr ? linear : "auto"),
      choice != nullptr ? std::optional<refdec::LinearChoice>(refdec::LinearChoice::parse(choice)) : std::nullopt);
  std::printf("%s linear layers: %s\n", STEP_AB_NAME, model.linear_path().c_str());
  const auto layout = model.kv_layout();
  side.reset(new Side{std::move(model), refdec::ContiguousKvStore(layout, context + largest_step + 1)});
  side->store.add();
  std::vector<refdec::Token> prefix(static_cast<std::size_t>(context));
  for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = token(i, side->model.vocab_size());
  refdec::plan_step(std::vector<refdec::LinearTree>{refdec::LinearTree::chain(prefix)}, {}, side->store.lengths(),
                    side->model.vocab_size(), side->plan);
  refdec::verify(side->model, side->store, side->plan, side->verification, side->times,
                 refdec::StepExtras{.prefill = std::vector<std::uint8_t>{1}});
  side->store.commit(side->verification.keep);
}

// Seconds of one verification step of a `tokens`-token chain after the context, never committed.
extern "C" double STEP_AB_FN(step)(int tokens) {
  std::vector<refdec::Token> chain(static_cast<std::size_t>(tokens));
  for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = token(i + 1000, side->model.vocab_size());
  const std::vector<refdec::LinearTree> trees{refdec::LinearTree::chain(chain)};
  const auto t0 = std::chrono::steady_clock::now();
  refdec::plan_step(trees, {}, side->store.lengths(), side->model.vocab_size(), side->plan);
  refdec::verify(side->model, side->store, side->plan, side->verification, side->times);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
