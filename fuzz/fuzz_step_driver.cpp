// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The step driver under arbitrary call sequences: each input byte picks a call (add with any
// drafter, prepare, complete_greedy, complete with an arbitrary acceptance, complete_walk, cancel)
// and the bytes after it its arguments, ids and tokens out of range included. A call may throw
// refdec::Error; after every call the driver must agree with a mirror of the engine's caches kept
// as docs/engine.md says (apply keep(), drop left()): its active count, its plan's batch and
// cached lengths, its keep plan's, and the slots that left.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/ngram_trie.hpp"

namespace {

constexpr std::int64_t kVocab = 12;

// Aborts (a finding) unless `ok`.
void require(bool ok) {
  if (!ok) std::abort();
}

refdec::Token token(refdec_fuzz::Bytes& in) { return static_cast<refdec::Token>(in.byte() % (kVocab + 2)) - 1; }  // -1 .. 12

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  refdec_fuzz::Bytes in(data, size);
  refdec::StepDriver driver({.vocab_size = kVocab, .max_context = 40, .prefill_chunk = 3, .drafting_threads = 1 + in.byte() % 2});
  std::vector<std::int64_t> caches;  // the engine's cached length per slot
  std::vector<refdec::RequestId> ids;
  for (int call = 0; call < 64 && !in.empty(); ++call) {
    const std::uint8_t op = in.byte() % 6;
    try {
      if (op == 0) {  // add
        std::vector<refdec::Token> prompt(1 + in.byte() % 6);
        for (auto& t : prompt) t = token(in);
        const refdec::SequenceLimits limits{.max_new_tokens = in.byte() % 12, .stop_tokens = {token(in)}, .budget = in.byte() % 9};
        refdec::AnyDrafter drafter;
        switch (in.byte() % 4) {
          case 1: drafter = refdec::AnyDrafter(refdec::LlmaDrafter({.min_match = 1, .continuation = 4, .self_reference = true})); break;
          case 2: drafter = refdec::AnyDrafter(refdec::NgramTrieDrafter()); break;
          case 3: drafter = refdec::AnyDrafter(refdec::LookaheadDrafter({.window = 2, .ngram = 3, .guesses = 2})); break;
          default: break;
        }
        const std::size_t before = driver.active();
        const refdec::RequestId id = driver.add(prompt, {}, limits, std::move(drafter));
        if (driver.active() > before) caches.push_back(0), ids.push_back(id);
      } else if (op == 1) {  // prepare
        driver.prepare();
      } else if (op == 2) {  // complete_greedy, targets from the input
        std::vector<refdec::Token> choices(static_cast<std::size_t>(driver.plan().rows()));
        for (auto& t : choices) t = token(in);
        driver.complete_greedy(choices);
      } else if (op == 3) {  // complete with acceptances from the input
        std::vector<refdec::Acceptance> accepted(driver.active() + in.byte() % 2);
        for (auto& a : accepted) {
          for (int k = in.byte() % 3; k > 0; --k) a.nodes.push_back(static_cast<std::int32_t>(in.byte() % 6));
          for (int k = in.byte() % 4; k > 0; --k) a.tokens.push_back(token(in));
        }
        driver.complete(accepted, {});
      } else if (op == 4) {  // complete_walk, a chooser from the input
        driver.complete_walk([&](std::int32_t, std::int32_t, std::int32_t) { return token(in); });
      } else {  // cancel, an id that may be unknown
        const refdec::RequestId id = static_cast<refdec::RequestId>(in.byte() % 10) - 1;
        if (const auto slot = driver.cancel(id)) {
          require(*slot < caches.size() && ids[*slot] == id);
          caches.erase(caches.begin() + static_cast<std::ptrdiff_t>(*slot));
          ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(*slot));
        }
      }
      if (op >= 2 && op <= 4) {  // a completed step: the engine applies keep(), then drops left()
        const refdec::KeepPlan& keep = driver.keep();
        require(static_cast<std::size_t>(keep.batch()) == caches.size());
        for (std::size_t b = 0; b < caches.size(); ++b) {
          require(keep.lengths[b] >= caches[b]);
          caches[b] = keep.lengths[b];
        }
        std::size_t last = caches.size();
        for (const std::size_t slot : driver.left()) {
          require(slot < last);  // decreasing, in range
          last = slot;
          caches.erase(caches.begin() + static_cast<std::ptrdiff_t>(slot));
          ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(slot));
        }
      }
    } catch (const refdec::Error&) {
    }
    require(driver.active() == caches.size());
    for (std::size_t s = 0; s < ids.size(); ++s) require(driver.id(s) == ids[s]);
    if (driver.step_prepared()) {
      const refdec::StepPlan& plan = driver.plan();
      require(static_cast<std::size_t>(plan.batch()) == caches.size());
      for (std::size_t b = 0; b < caches.size(); ++b) require(plan.lengths[b] == caches[b]);
    }
  }
  return 0;
}
