// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// The C API (include/refdec/refdec.h) over the header-only library: handles own the C++ objects,
// every entry point turns exceptions into a status and a per-thread message.

#include "refdec/refdec.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refdec/core/branches.hpp"
#include "refdec/core/config.hpp"
#include "refdec/core/draft_step.hpp"
#include "refdec/core/draft_tree.hpp"
#include "refdec/core/drafter.hpp"
#include "refdec/core/step_cost.hpp"
#include "refdec/core/step_driver.hpp"
#include "refdec/core/walk.hpp"
#include "refdec/datastore/reader.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/rest.hpp"

struct refdec_drafter {
  refdec::AnyDrafter drafter;
  std::string name;
  refdec::DraftScratch scratch;  // refdec_drafter_draft()'s
  refdec::AuxBlock aux;          // a window's rows (lookahead), which drafting by hand does not run
  refdec::LinearTree tree;       // its last tree, which the refdec_tree it returned points into
  bool in_driver = false;        // borrowed by a driver's sequence (a mixture may not take it)
  // Drafting by hand: a sequence begun (refdec_drafter_begin) and its tokens as told, whose last
  // a draft's root must be. A driver refuses a drafter with a sequence begun by hand.
  bool begun = false;
  std::vector<refdec::Token> sequence;
};

struct refdec_step_cost {
  refdec::StepCost cost;
};
struct refdec_step_cost_tracker {
  refdec::StepCostTracker tracker;
};
struct refdec_datastore {
  std::shared_ptr<const refdec::Datastore> datastore;
};

struct refdec_llma_index {
  std::shared_ptr<const refdec::LlmaIndex> index;
};

struct refdec_reference_index {
  std::shared_ptr<refdec::ReferenceIndex> index;
};

struct refdec_driver {
  explicit refdec_driver(refdec::StepDriverOptions options) : driver(options) {}
  refdec::StepDriver driver;
  std::vector<refdec_drafter*> borrowed;  // the drafters of active sequences, by id
  std::vector<refdec::RequestId> borrowed_ids;
  std::vector<std::int64_t> ids;             // [batch] the prepared plan's sequence ids
  std::vector<std::int64_t> lengths_before;  // [batch] the completed plan's lengths
};

namespace {

thread_local std::string last_error;

// Sets this thread's message: `parts` joined. Never throws: without memory for the message, the
// status alone says what happened.
refdec_status fail(refdec_status status, std::initializer_list<const char*> parts) noexcept {
  try {
    last_error.clear();
    for (const char* p : parts) last_error += p;
  } catch (...) {
    last_error.clear();
  }
  return status;
}

// Runs `body`, turning what it throws into a status and this thread's message: nothing leaves.
template <class F>
refdec_status guarded(const char* who, F&& body) noexcept {
  try {
    body();
    return REFDEC_OK;
  } catch (const refdec::IoError& e) {
    return fail(REFDEC_ERROR_IO, {e.what()});
  } catch (const refdec::ArgumentError& e) {
    return fail(REFDEC_ERROR_ARGUMENT, {e.what()});
  } catch (const std::bad_alloc&) {
    return fail(REFDEC_ERROR_MEMORY, {"refdec: ", who, ": out of memory"});
  } catch (const std::exception& e) {
    return fail(REFDEC_ERROR_INTERNAL, {"refdec: ", who, ": ", e.what()});
  } catch (...) {
    return fail(REFDEC_ERROR_INTERNAL, {"refdec: ", who, ": unknown exception"});
  }
}

// A null pointer argument, refused with its name.
[[noreturn]] void null_argument(const char* who, const char* what) {
  throw refdec::ArgumentError(std::string("refdec: ") + who + ": " + what + " is NULL");
}
template <class T>
T& deref(T* p, const char* who, const char* what) {
  if (p == nullptr) null_argument(who, what);
  return *p;
}
// `ids` when every one is >= 0 (a negative id is no token: refdec's drafters end documents with one).
std::span<const refdec::Token> non_negative(std::span<const refdec::Token> ids, const char* who) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    REFDEC_CHECK(ids[i] >= 0, who << ": token " << i << " has the negative id " << ids[i]);
  return ids;
}

// `size` tokens at `data` (NULL allowed only when size is 0).
std::span<const refdec::Token> tokens_of(const refdec_token* data, std::size_t size, const char* who, const char* what) {
  if (data == nullptr && size > 0) null_argument(who, what);
  return {data, size};
}
// Views of the caller's references (no copy of their tokens).
std::vector<std::span<const refdec::Token>> references_of(const refdec_token_span* refs, std::size_t count, const char* who) {
  if (refs == nullptr && count > 0) null_argument(who, "references");
  std::vector<std::span<const refdec::Token>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.push_back(tokens_of(refs[i].data, refs[i].size, who, "a reference's data"));
  return out;
}

// A drafter handle around what `make` returns, made inside the guard: a constructor that refuses
// its options throws there.
template <class Make>
refdec_status create(refdec_drafter** out, const char* who, Make&& make) {
  return guarded(who, [&] {
    deref(out, who, "out");
    auto h = std::make_unique<refdec_drafter>(refdec_drafter{refdec::AnyDrafter(make()), {}, {}, {}, {}, false, false, {}});
    h->name = h->drafter.name();
    *out = h.release();
  });
}

refdec::TreeView view_of(const refdec_tree& t) { return {t.tokens, t.first_child, t.next_sibling, t.num_nodes}; }

// A read-only view of `driver` written to `out` by `view`.
template <class Out, class View>
refdec_status query(const refdec_driver* driver, Out* out, const char* who, View&& view) {
  return guarded(who, [&] {
    const refdec_driver& d = deref(driver, who, "driver");
    deref(out, who, "out") = view(d);
  });
}

void check_tree(const refdec_tree* tree, const char* who) {
  const refdec_tree& t = deref(tree, who, "tree");
  REFDEC_CHECK(t.num_nodes > 0 && t.tokens != nullptr && t.first_child != nullptr && t.next_sibling != nullptr,
               who << ": a tree needs its root and its tokens, first_child and next_sibling arrays");
}

// The caller's options over the library's defaults (`init`): the fields its struct_size covers,
// so that a caller built with an older header keeps the defaults of the fields added since.
template <class C>
C options_of(const C* given, void (*init)(C*), const char* who, const char* what) {
  C o;
  init(&o);
  if (given == nullptr) return o;
  REFDEC_CHECK(given->struct_size >= sizeof(std::size_t),
               who << ": " << what << ".struct_size is " << given->struct_size << " (fill it with its _init function first)");
  REFDEC_CHECK(given->struct_size <= sizeof(C), who << ": " << what << ".struct_size is " << given->struct_size << ", larger than the "
                                                    << sizeof(C) << " this library knows (a header newer than the library)");
  std::memcpy(static_cast<void*>(&o), static_cast<const void*>(given), given->struct_size);
  o.struct_size = sizeof(C);
  return o;
}

refdec::LlmaOptions llma_options_of(const refdec_llma_options* options, const char* who) {
  const auto o = options_of(options, refdec_llma_options_init, who, "options");
  return {.min_match = o.min_match, .continuation = o.continuation, .spans = o.spans, .self_reference = o.self_reference};
}

// The drafter a by-hand call may use: not borrowed by a driver, and (`begun`) with a sequence.
refdec_drafter& by_hand(refdec_drafter* drafter, const char* who, bool begun = true) {
  refdec_drafter& d = deref(drafter, who, "drafter");
  REFDEC_CHECK(!d.in_driver, who << ": the drafter is in use by a driver's sequence");
  REFDEC_CHECK(!begun || d.begun, who << ": no sequence begun (refdec_drafter_begin first)");
  return d;
}

}  // namespace

extern "C" {

int refdec_c_api_version(void) { return REFDEC_C_API_VERSION; }
const char* refdec_last_error(void) { return last_error.c_str(); }

void refdec_llma_options_init(refdec_llma_options* options) {
  if (options == nullptr) return;
  const refdec::LlmaOptions d;
  *options = {sizeof(*options), d.min_match, d.continuation, d.spans, d.self_reference};
}
void refdec_prompt_lookup_options_init(refdec_prompt_lookup_options* options) {
  if (options == nullptr) return;
  const refdec::PromptLookupOptions d;
  *options = {sizeof(*options), d.max_match, d.min_match, d.continuation, d.full_span_only};
}
void refdec_ngram_trie_options_init(refdec_ngram_trie_options* options) {
  if (options == nullptr) return;
  const refdec::NgramTrieOptions d;
  *options = {sizeof(*options), d.ngram, d.max_match, d.max_nodes, d.grow};
}
void refdec_index_drafter_options_init(refdec_index_drafter_options* options) {
  if (options == nullptr) return;
  const refdec::IndexDrafterOptions d;
  *options = {sizeof(*options), d.max_match, d.continuation, d.request, d.add_output, d.shared};
}
void refdec_rest_options_init(refdec_rest_options* options) {
  if (options == nullptr) return;
  const refdec::RestOptions d;
  *options = {sizeof(*options), d.max_match, d.continuation, d.max_nodes, d.max_occurrences};
}
void refdec_lookahead_options_init(refdec_lookahead_options* options) {
  if (options == nullptr) return;
  const refdec::LookaheadOptions d;
  *options = {sizeof(*options), d.window, d.ngram, d.guesses,
              d.pool_from_output, d.seed};
}
void refdec_mixture_options_init(refdec_mixture_options* options) {
  if (options == nullptr) return;
  const refdec::MixtureOptions d;
  *options = {sizeof(*options),
              d.prior_mean,
              d.prior_strength,
              d.half_life,
              d.max_depth,
              d.combine == refdec::MixtureCombine::noisy_or ? REFDEC_MIXTURE_NOISY_OR : REFDEC_MIXTURE_MAX,
              d.source_budget,
              d.match_context,
              d.recent_rate,
              d.scorer_rate,
              d.calibration_half_life,
              d.calibration_prior};
}

refdec_status refdec_drafter_create_llma(const refdec_llma_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_llma";
  return create(out, who, [&] { return refdec::LlmaDrafter(llma_options_of(options, who)); });
}
refdec_status refdec_drafter_create_prompt_lookup(const refdec_prompt_lookup_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_prompt_lookup";
  return create(out, who, [&] {
    const auto o = options_of(options, refdec_prompt_lookup_options_init, who, "options");
    return refdec::PromptLookupDrafter({.max_match = o.max_match, .min_match = o.min_match, .continuation = o.continuation, .full_span_only = o.full_span_only});
  });
}
refdec_status refdec_drafter_create_ngram_trie(const refdec_ngram_trie_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_ngram_trie";
  return create(out, who, [&] {
    const auto o = options_of(options, refdec_ngram_trie_options_init, who, "options");
    return refdec::NgramTrieDrafter({.ngram = o.ngram, .max_match = o.max_match, .max_nodes = o.max_nodes, .grow = o.grow});
  });
}
refdec_status refdec_drafter_create_rest(const refdec_datastore* datastore, const refdec_rest_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_rest";
  return create(out, who, [&] {
    const auto o = options_of(options, refdec_rest_options_init, who, "options");
    return refdec::RestDrafter(deref(datastore, who, "datastore").datastore,
                               {.max_match = o.max_match, .continuation = o.continuation, .max_nodes = o.max_nodes, .max_occurrences = o.max_occurrences});
  });
}
refdec_status refdec_drafter_create_lookahead(const refdec_lookahead_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_lookahead";
  return create(out, who, [&] {
    const auto o = options_of(options, refdec_lookahead_options_init, who, "options");
    return refdec::LookaheadDrafter({.window = o.window,
                                     .ngram = o.ngram,
                                     .guesses = o.guesses,
                                     .pool_from_output = o.pool_from_output,
                                     .seed = o.seed});
  });
}

refdec_status refdec_llma_index_create(const refdec_token_span* documents, size_t num_documents, refdec_llma_index** out) {
  constexpr const char* who = "refdec_llma_index_create";
  return guarded(who, [&] {
    deref(out, who, "out");
    *out = new refdec_llma_index{std::make_shared<const refdec::LlmaIndex>(references_of(documents, num_documents, who))};
  });
}
size_t refdec_llma_index_tokens(const refdec_llma_index* index) { return index == nullptr ? 0 : index->index->tokens(); }
void refdec_llma_index_destroy(refdec_llma_index* index) { delete index; }

refdec_status refdec_drafter_create_llma_shared(const refdec_llma_index* index, const refdec_llma_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_llma_shared";
  return create(out, who, [&] { return refdec::LlmaDrafter(deref(index, who, "index").index, llma_options_of(options, who)); });
}

void refdec_reference_index_options_init(refdec_reference_index_options* options) {
  if (options == nullptr) return;
  const refdec::ReferenceIndexOptions d;
  *options = {sizeof(*options), d.max_tokens, d.depth, d.background_merge, d.max_bytes};
}

refdec_status refdec_reference_index_create(const refdec_reference_index_options* options, refdec_reference_index** out) {
  constexpr const char* who = "refdec_reference_index_create";
  return guarded(who, [&] {
    deref(out, who, "out");
    const auto o = options_of(options, refdec_reference_index_options_init, who, "options");
    *out = new refdec_reference_index{std::make_shared<refdec::ReferenceIndex>(refdec::ReferenceIndexOptions{
        .max_tokens = o.max_tokens, .depth = o.depth, .background_merge = o.background_merge, .max_bytes = o.max_bytes})};
  });
}

refdec_status refdec_reference_index_add(refdec_reference_index* index, const refdec_token* tokens, size_t num_tokens) {
  constexpr const char* who = "refdec_reference_index_add";
  return guarded(who, [&] { deref(index, who, "index").index->add(tokens_of(tokens, num_tokens, who, "tokens")); });
}

size_t refdec_reference_index_tokens(const refdec_reference_index* index) {
  try {
    return index != nullptr ? index->index->tokens() : 0;
  } catch (...) {  // the snapshot's lock could not be taken
    return 0;
  }
}
void refdec_reference_index_destroy(refdec_reference_index* index) { delete index; }

refdec_status refdec_datastore_open(const char* path, refdec_datastore** out) {
  constexpr const char* who = "refdec_datastore_open";
  return guarded(who, [&] {
    deref(out, who, "out");
    if (path == nullptr) null_argument(who, "path");
    *out = new refdec_datastore{refdec::Datastore::open_shared(path)};
  });
}
uint64_t refdec_datastore_tokens(const refdec_datastore* datastore) { return datastore != nullptr ? datastore->datastore->size() : 0; }
void refdec_datastore_destroy(refdec_datastore* datastore) { delete datastore; }

refdec_status refdec_drafter_create_index(refdec_reference_index* index, const refdec_index_drafter_options* options, refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_index";
  return create(out, who, [&] {
    const auto o = options_of(options, refdec_index_drafter_options_init, who, "options");
    return refdec::IndexDrafter(
        deref(index, who, "index").index,
        {.max_match = o.max_match, .continuation = o.continuation, .request = o.request, .add_output = o.add_output, .shared = o.shared});
  });
}

refdec_status refdec_drafter_create_mixture(refdec_drafter** sources, size_t count, const refdec_mixture_options* options,
                                           refdec_drafter** out) {
  constexpr const char* who = "refdec_drafter_create_mixture";
  return guarded(who, [&] {
    deref(out, who, "out");
    const auto o = options_of(options, refdec_mixture_options_init, who, "options");
    // Read as the int a C enum is: a value outside the enumerators is the caller's to make, not ours to load as one.
    static_assert(sizeof(o.combine) == sizeof(int));
    int combine = 0;
    std::memcpy(&combine, &o.combine, sizeof combine);
    REFDEC_CHECK(combine == REFDEC_MIXTURE_MAX || combine == REFDEC_MIXTURE_NOISY_OR,
                 who << ": combine is " << combine << ", not a refdec_mixture_combine");
    const refdec::MixtureOptions mo{.prior_mean = o.prior_mean,
                                    .prior_strength = o.prior_strength,
                                    .half_life = o.half_life,
                                    .max_depth = o.max_depth,
                                    .combine = combine == REFDEC_MIXTURE_NOISY_OR ? refdec::MixtureCombine::noisy_or
                                                                                  : refdec::MixtureCombine::max,
                                    .source_budget = o.source_budget,
                                    .match_context = o.match_context,
                                    .recent_rate = o.recent_rate,
                                    .scorer_rate = o.scorer_rate,
                                    .calibration_half_life = o.calibration_half_life,
                                    .calibration_prior = o.calibration_prior};
    REFDEC_CHECK(count > 0, who << ": a mixture needs at least one source");
    deref(sources, who, "sources");
    for (std::size_t i = 0; i < count; ++i) {
      REFDEC_CHECK(sources[i] != nullptr, who << ": source " << i << " is NULL");
      REFDEC_CHECK(!sources[i]->in_driver, who << ": source " << i << " is in use by a driver's sequence");
      for (std::size_t j = 0; j < i; ++j) REFDEC_CHECK(sources[j] != sources[i], who << ": source " << i << " is also source " << j);
    }
    // What can fail for lack of memory before the sources are taken, is done first.
    auto h = std::make_unique<refdec_drafter>();
    std::vector<refdec::AnyDrafter> all;
    all.reserve(count);
    for (std::size_t i = 0; i < count; ++i) all.push_back(std::move(sources[i]->drafter));
    h->drafter = refdec::AnyDrafter(refdec::MixtureDrafter(std::move(all), mo));
    h->name = h->drafter.name();
    for (std::size_t i = 0; i < count; ++i) {
      delete sources[i];
      sources[i] = nullptr;
    }
    *out = h.release();
  });
}

void refdec_drafter_destroy(refdec_drafter* drafter) { delete drafter; }
const char* refdec_drafter_name(const refdec_drafter* drafter) { return drafter != nullptr ? drafter->name.c_str() : ""; }

refdec_status refdec_drafter_set_step_cost(refdec_drafter* drafter, const refdec_step_cost* cost) {
  constexpr const char* who = "refdec_drafter_set_step_cost";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who, false);
    d.drafter.set_step_cost(cost != nullptr ? cost->cost : refdec::StepCost::flat());
  });
}

refdec_status refdec_drafter_begin(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens,
                                   const refdec_token_span* references, size_t num_references) {
  constexpr const char* who = "refdec_drafter_begin";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who, false);
    const auto refs = references_of(references, num_references, who);
    const auto ids = non_negative(tokens_of(tokens, num_tokens, who, "tokens"), who);
    for (const auto& r : refs) (void)non_negative(r, who);
    std::vector<refdec::Token> sequence(ids.begin(), ids.end());
    d.drafter.begin(ids, refs);
    d.begun = true;
    d.sequence = std::move(sequence);
  });
}

refdec_status refdec_drafter_accept(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens) {
  constexpr const char* who = "refdec_drafter_accept";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who);
    const auto ids = non_negative(tokens_of(tokens, num_tokens, who, "tokens"), who);
    d.sequence.reserve(d.sequence.size() + ids.size());
    d.drafter.accept(ids);
    d.sequence.insert(d.sequence.end(), ids.begin(), ids.end());
  });
}

refdec_status refdec_drafter_finish(refdec_drafter* drafter) {
  constexpr const char* who = "refdec_drafter_finish";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who);
    d.begun = false;  // ended even when publishing fails: the error is reported once
    d.sequence.clear();
    d.drafter.finish();
  });
}

refdec_status refdec_drafter_truncate(refdec_drafter* drafter, size_t length) {
  constexpr const char* who = "refdec_drafter_truncate";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who);
    refdec::check_truncation(length, d.sequence.size(), who);
    d.drafter.truncate(length);
    d.sequence.resize(length);
  });
}

refdec_status refdec_drafter_reset(refdec_drafter* drafter) {
  constexpr const char* who = "refdec_drafter_reset";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who, false);
    d.drafter.reset();
    d.begun = false;
    d.sequence.clear();
  });
}

size_t refdec_drafter_length(const refdec_drafter* drafter) { return drafter != nullptr ? drafter->sequence.size() : 0; }

refdec_status refdec_drafter_draft(refdec_drafter* drafter, refdec_token root, size_t budget, int64_t vocab_size, refdec_tree* out) {
  constexpr const char* who = "refdec_drafter_draft";
  return guarded(who, [&] {
    refdec_drafter& d = by_hand(drafter, who);
    deref(out, who, "out");
    REFDEC_CHECK(vocab_size > 0 && root >= 0 && root < vocab_size,
                 who << ": the root token " << root << " must lie in [0, vocab_size) with vocab_size " << vocab_size << " > 0");
    REFDEC_CHECK(d.sequence.empty() || root == d.sequence.back(),
                 who << ": the root token " << root << " is not the sequence's last token " << d.sequence.back()
                     << " (refdec_drafter_begin, _accept and _truncate tell the drafter the sequence)");
    refdec::draft_step(d.drafter, root, budget, vocab_size, 0, std::numeric_limits<std::int64_t>::max(), d.scratch, d.tree, d.aux);
    // A drafter with a window (lookahead) runs none by hand: it is told so every step, as after a
    // step whose window sat out.
    if (d.drafter.max_auxiliary() > 0) d.drafter.observe({});
    const refdec::LinearTree& t = d.tree;
    *out = {t.size(), t.tokens.data(), t.parent.data(), t.depth.data(), t.first_child.data(), t.next_sibling.data(), t.score.data()};
  });
}

refdec_status refdec_tree_best_chain(const refdec_tree* tree, refdec_token* out, size_t capacity, size_t* count) {
  constexpr const char* who = "refdec_tree_best_chain";
  return guarded(who, [&] {
    check_tree(tree, who);
    deref(count, who, "count");
    if (capacity > 0) deref(out, who, "out");
    REFDEC_CHECK(tree->score != nullptr, who << ": the tree has no scores");
    std::size_t n = 0;
    // Bounded by the node count, so that a malformed tree (a cycle of links) cannot loop.
    for (std::int32_t node = 0, steps = 0; n < capacity && steps < tree->num_nodes; ++steps) {
      std::int32_t best = -1;
      for (std::int32_t c = tree->first_child[node], seen = 0; c >= 0 && c < tree->num_nodes && seen < tree->num_nodes;
           c = tree->next_sibling[c], ++seen)
        if (best < 0 || tree->score[c] > tree->score[best]) best = c;
      if (best < 0) break;
      out[n++] = tree->tokens[best];
      node = best;
    }
    *count = n;
  });
}

refdec_status refdec_tree_to_sglang(const refdec_tree* tree, int32_t num_draft, refdec_token pad_token, refdec_token* draft_tokens,
                                    int64_t* next_token, int64_t* next_sibling) {
  constexpr const char* who = "refdec_tree_to_sglang";
  return guarded(who, [&] {
    check_tree(tree, who);
    deref(draft_tokens, who, "draft_tokens");
    deref(next_token, who, "next_token");
    deref(next_sibling, who, "next_sibling");
    REFDEC_CHECK(tree->num_nodes <= num_draft, who << ": a tree of " << tree->num_nodes << " nodes does not fit " << num_draft
                                                   << " slots (draft with budget <= num_draft - 1)");
    for (std::int32_t i = 0; i < num_draft; ++i) {
      const bool node = i < tree->num_nodes;
      draft_tokens[i] = node ? tree->tokens[i] : pad_token;
      next_token[i] = node ? tree->first_child[i] : -1;
      next_sibling[i] = node ? tree->next_sibling[i] : -1;
    }
  });
}

refdec_status refdec_tree_branches(const refdec_tree* tree, int64_t first_position, int64_t* positions, int32_t* branch_begin,
                                   int32_t* branch_end, int32_t* num_branches) {
  constexpr const char* who = "refdec_tree_branches";
  return guarded(who, [&] {
    check_tree(tree, who);
    deref(positions, who, "positions");
    deref(branch_begin, who, "branch_begin");
    deref(branch_end, who, "branch_end");
    deref(num_branches, who, "num_branches");
    const auto n = static_cast<std::size_t>(tree->num_nodes);
    *num_branches = refdec::tree_branches(view_of(*tree), first_position, {positions, n}, {branch_begin, n}, {branch_end, n});
  });
}

refdec_status refdec_tree_winning_branch(const refdec_tree* tree, const int32_t* branch_begin, const int32_t* path, int32_t num_accepted,
                                         int32_t* winner) {
  constexpr const char* who = "refdec_tree_winning_branch";
  return guarded(who, [&] {
    check_tree(tree, who);
    deref(branch_begin, who, "branch_begin");
    deref(winner, who, "winner");
    REFDEC_CHECK(num_accepted >= 0 && num_accepted < tree->num_nodes,
                 who << ": " << num_accepted << " accepted drafts in a tree of " << tree->num_nodes << " nodes");
    if (num_accepted > 0) deref(path, who, "path");
    *winner = refdec::winning_branch({branch_begin, static_cast<std::size_t>(tree->num_nodes)},
                                     {path, static_cast<std::size_t>(num_accepted)});
  });
}

refdec_status refdec_tree_walk(const refdec_tree* tree, refdec_tree_chooser choose, void* user, int32_t* path, int32_t* num_accepted,
                               refdec_token* bonus) {
  constexpr const char* who = "refdec_tree_walk";
  return guarded(who, [&] {
    check_tree(tree, who);
    REFDEC_CHECK(choose != nullptr, who << ": choose is NULL");
    deref(num_accepted, who, "num_accepted");
    deref(bonus, who, "bonus");
    if (tree->num_nodes > 1) deref(path, who, "path");
    refdec::Token b = -1;
    const std::int32_t n = refdec::walk(
        view_of(*tree), [&](std::int32_t node, std::int32_t depth) { return choose(user, node, depth); }, path, b);
    *num_accepted = n;
    *bonus = b;
  });
}

refdec_status refdec_step_cost_create_samples(const size_t* rows, const double* seconds, size_t count, refdec_step_cost** out) {
  constexpr const char* who = "refdec_step_cost_create_samples";
  return guarded(who, [&] {
    deref(out, who, "out");
    if (count > 0) deref(rows, who, "rows"), deref(seconds, who, "seconds");
    std::vector<std::pair<std::size_t, double>> samples;
    samples.reserve(count);
    for (std::size_t i = 0; i < count; ++i) samples.emplace_back(rows[i], seconds[i]);
    *out = new refdec_step_cost{refdec::StepCost::calibrated(samples)};
  });
}
refdec_status refdec_step_cost_create_affine(double a, double b, refdec_step_cost** out) {
  constexpr const char* who = "refdec_step_cost_create_affine";
  return guarded(who, [&] {
    deref(out, who, "out");
    *out = new refdec_step_cost{refdec::StepCost::affine(a, b)};
  });
}
double refdec_step_cost_seconds(const refdec_step_cost* cost, size_t rows) {
  return cost != nullptr ? cost->cost.seconds(std::max<std::size_t>(rows, 1)) : 0.0;
}
void refdec_step_cost_destroy(refdec_step_cost* cost) { delete cost; }

refdec_status refdec_step_cost_tracker_create(const refdec_step_cost* prior, refdec_step_cost_tracker** out) {
  constexpr const char* who = "refdec_step_cost_tracker_create";
  return guarded(who, [&] {
    deref(out, who, "out");
    *out = new refdec_step_cost_tracker{refdec::StepCostTracker(deref(prior, who, "prior").cost)};
  });
}
refdec_status refdec_step_cost_tracker_observe(refdec_step_cost_tracker* tracker, size_t rows, double seconds, size_t batch) {
  constexpr const char* who = "refdec_step_cost_tracker_observe";
  return guarded(who, [&] { deref(tracker, who, "tracker").tracker.observe(rows, seconds, batch); });
}
refdec_status refdec_step_cost_tracker_current(const refdec_step_cost_tracker* tracker, size_t batch, refdec_step_cost** out) {
  constexpr const char* who = "refdec_step_cost_tracker_current";
  return guarded(who, [&] {
    const refdec_step_cost_tracker& t = deref(tracker, who, "tracker");
    deref(out, who, "out");
    REFDEC_CHECK(batch >= 1, who << ": batch must be at least 1");
    *out = new refdec_step_cost{t.tracker.current(batch)};
  });
}
void refdec_step_cost_tracker_destroy(refdec_step_cost_tracker* tracker) { delete tracker; }

void refdec_driver_options_init(refdec_driver_options* options) {
  if (options == nullptr) return;
  const refdec::StepDriverOptions d;
  *options = {sizeof(*options), d.vocab_size, d.max_context, d.prefill_chunk, d.drafting_threads};
}

refdec_status refdec_driver_create(const refdec_driver_options* options, refdec_driver** out) {
  constexpr const char* who = "refdec_driver_create";
  return guarded(who, [&] {
    deref(options, who, "options");
    const auto o = options_of(options, refdec_driver_options_init, who, "options");
    deref(out, who, "out");
    *out = new refdec_driver({.vocab_size = o.vocab_size,
                              .max_context = o.max_context,
                              .prefill_chunk = o.prefill_chunk,
                              .drafting_threads = o.drafting_threads});
  });
}

void refdec_driver_destroy(refdec_driver* driver) {
  if (driver == nullptr) return;
  for (refdec_drafter* d : driver->borrowed) d->in_driver = false;
  delete driver;
}

refdec_status refdec_driver_set_batch_cost(refdec_driver* driver, const refdec_step_cost* cost) {
  constexpr const char* who = "refdec_driver_set_batch_cost";
  return guarded(who, [&] {
    deref(driver, who, "driver").driver.set_batch_cost(cost != nullptr ? std::optional(cost->cost) : std::nullopt);
  });
}

void refdec_sequence_limits_init(refdec_sequence_limits* limits) {
  if (limits == nullptr) return;
  const refdec::SequenceLimits d;
  *limits = {sizeof(*limits), d.max_new_tokens, nullptr, 0, d.budget};
}

namespace {
// Gives back the drafters of the sequences that are no longer active (finished, cancelled, or
// given no tokens to generate): the driver no longer touches them. Allocates nothing, so it also
// runs while an error unwinds (SyncOnExit).
void sync_borrowed(refdec_driver& d) noexcept {
  for (std::size_t i = d.borrowed.size(); i-- > 0;) {
    bool active = false;
    for (std::size_t slot = 0; slot < d.driver.active() && !active; ++slot) active = d.driver.id(slot) == d.borrowed_ids[i];
    if (active) continue;
    d.borrowed[i]->in_driver = false;
    d.borrowed.erase(d.borrowed.begin() + static_cast<std::ptrdiff_t>(i));
    d.borrowed_ids.erase(d.borrowed_ids.begin() + static_cast<std::ptrdiff_t>(i));
  }
}
struct SyncOnExit {
  refdec_driver& d;
  ~SyncOnExit() { sync_borrowed(d); }
};
void check_no_open_step(const refdec_driver& d, const char* who) {
  REFDEC_CHECK(!d.driver.step_prepared(), who << ": a step is prepared; complete it first");
}
// The plan's cached lengths, which the keep plan reports after the plan itself is gone.
void keep_lengths_before(refdec_driver& d) {
  const auto& lengths = d.driver.plan().lengths;
  d.lengths_before.assign(lengths.begin(), lengths.end());
}
void check_open_step(const refdec_driver& d, const char* who) {
  REFDEC_CHECK(d.driver.step_prepared(), who << ": no prepared step (refdec_driver_prepare first; each step completes once)");
}
}  // namespace

refdec_status refdec_driver_add(refdec_driver* driver, const refdec_token* prompt, size_t prompt_size, const refdec_token_span* references,
                                size_t num_references, const refdec_sequence_limits* limits, refdec_drafter* drafter, int64_t* id) {
  constexpr const char* who = "refdec_driver_add";
  return guarded(who, [&] {
    refdec_driver& d = deref(driver, who, "driver");
    const auto l = options_of(limits, refdec_sequence_limits_init, who, "limits");
    deref(id, who, "id");
    check_no_open_step(d, who);
    const SyncOnExit sync{d};  // a sequence given no tokens leaves at once
    const auto p = tokens_of(prompt, prompt_size, who, "prompt");
    const auto stops = tokens_of(l.stop_tokens, l.num_stop_tokens, who, "stop_tokens");
    const auto refs = references_of(references, num_references, who);
    const refdec::SequenceLimits limits_cpp{
        .max_new_tokens = l.max_new_tokens, .stop_tokens = {stops.begin(), stops.end()}, .budget = l.budget};
    std::vector<refdec::Token> prompt_cpp(p.begin(), p.end());
    if (drafter == nullptr) {
      *id = d.driver.add(std::move(prompt_cpp), refs, limits_cpp);
      return;
    }
    REFDEC_CHECK(!drafter->in_driver, who << ": the drafter is in use by another sequence (a drafter follows one sequence at a time)");
    REFDEC_CHECK(!drafter->begun, who << ": the drafter follows a sequence by hand (refdec_drafter_finish or _reset it first)");
    d.borrowed.reserve(d.borrowed.size() + 1);
    d.borrowed_ids.reserve(d.borrowed_ids.size() + 1);
    *id = d.driver.add(std::move(prompt_cpp), refs, limits_cpp, &drafter->drafter);
    drafter->in_driver = true;
    d.borrowed.push_back(drafter);
    d.borrowed_ids.push_back(*id);
  });
}

refdec_status refdec_driver_cancel(refdec_driver* driver, int64_t id, int64_t* slot) {
  constexpr const char* who = "refdec_driver_cancel";
  return guarded(who, [&] {
    refdec_driver& d = deref(driver, who, "driver");
    deref(slot, who, "slot");
    check_no_open_step(d, who);
    const SyncOnExit sync{d};  // its drafter is free again at once
    const std::optional<std::size_t> s = d.driver.cancel(id);
    *slot = s ? static_cast<int64_t>(*s) : -1;
  });
}

refdec_status refdec_driver_prepare(refdec_driver* driver, int* has_step) {
  constexpr const char* who = "refdec_driver_prepare";
  return guarded(who, [&] {
    refdec_driver& d = deref(driver, who, "driver");
    deref(has_step, who, "has_step");
    const SyncOnExit sync{d};
    d.ids.clear();
    d.lengths_before.clear();
    *has_step = d.driver.prepare() ? 1 : 0;
    if (*has_step == 0) return;
    d.ids.reserve(static_cast<std::size_t>(d.driver.plan().batch()));
    for (std::size_t slot = 0; slot < static_cast<std::size_t>(d.driver.plan().batch()); ++slot) d.ids.push_back(d.driver.id(slot));
  });
}

refdec_status refdec_driver_plan(const refdec_driver* driver, refdec_step_plan* out) {
  return query(driver, out, "refdec_driver_plan", [](const refdec_driver& h) -> refdec_step_plan {
    check_open_step(h, "refdec_driver_plan");
    const refdec::StepDriver& d = h.driver;
    const refdec::StepPlan& p = d.plan();
    return {p.batch(),       p.rows(),           p.indptr.data(),      p.num_nodes.data(),    p.lengths.data(),
            p.tokens.data(), p.positions.data(), p.first_child.data(), p.next_sibling.data(), p.mask_indptr.data(),
            p.mask.data(),   d.prefill().data(),     h.ids.data()};
  });
}

refdec_status refdec_driver_complete_greedy(refdec_driver* driver, const refdec_token* choices, size_t num_rows) {
  constexpr const char* who = "refdec_driver_complete_greedy";
  return guarded(who, [&] {
    refdec_driver& d = deref(driver, who, "driver");
    check_open_step(d, who);
    const SyncOnExit sync{d};
    keep_lengths_before(d);
    d.driver.complete_greedy(tokens_of(choices, num_rows, who, "choices"));
  });
}

refdec_status refdec_driver_complete_walk(refdec_driver* driver, refdec_row_chooser choose, void* user) {
  constexpr const char* who = "refdec_driver_complete_walk";
  return guarded(who, [&] {
    refdec_driver& d = deref(driver, who, "driver");
    REFDEC_CHECK(choose != nullptr, who << ": choose is NULL");
    check_open_step(d, who);
    const SyncOnExit sync{d};
    keep_lengths_before(d);
    d.driver.complete_walk([&](std::int32_t slot, std::int32_t row, std::int32_t depth) { return choose(user, slot, row, depth); });
  });
}

refdec_status refdec_driver_keep(const refdec_driver* driver, refdec_keep_plan* out) {
  return query(driver, out, "refdec_driver_keep", [](const refdec_driver& h) -> refdec_keep_plan {
    const refdec::KeepPlan& k = h.driver.keep();
    REFDEC_CHECK(h.lengths_before.size() == static_cast<std::size_t>(k.batch()), "refdec_driver_keep: no completed step");
    return {k.batch(), k.indptr.data(), k.rows.data(), k.lengths.data(), h.lengths_before.data()};
  });
}

refdec_status refdec_driver_left(const refdec_driver* driver, const size_t** slots, size_t* count) {
  constexpr const char* who = "refdec_driver_left";
  return guarded(who, [&] {
    const refdec_driver& d = deref(driver, who, "driver");
    deref(slots, who, "slots");
    deref(count, who, "count");
    const auto left = d.driver.left();
    *slots = left.data();
    *count = left.size();
  });
}

size_t refdec_driver_num_updates(const refdec_driver* driver) { return driver != nullptr ? driver->driver.updates().size() : 0; }

refdec_status refdec_driver_update(const refdec_driver* driver, size_t index, refdec_update* out) {
  constexpr const char* who = "refdec_driver_update";
  return guarded(who, [&] {
    const refdec_driver& d = deref(driver, who, "driver");
    deref(out, who, "out");
    const auto& updates = d.driver.updates();
    REFDEC_CHECK(index < updates.size(), who << ": update " << index << " of " << updates.size());
    const refdec::RequestUpdate& u = updates[index];
    refdec_finish_reason reason = REFDEC_RUNNING;
    if (u.finished) switch (*u.finished) {
        case refdec::FinishReason::kStopToken: reason = REFDEC_FINISH_STOP; break;
        case refdec::FinishReason::kMaxNewTokens: reason = REFDEC_FINISH_LENGTH; break;
        case refdec::FinishReason::kMaxContext: reason = REFDEC_FINISH_CONTEXT; break;
        case refdec::FinishReason::kCancelled: reason = REFDEC_FINISH_CANCELLED; break;
        case refdec::FinishReason::kDrafterError: reason = REFDEC_FINISH_DRAFTER_ERROR; break;
      }
    *out = {u.id, u.tokens.data(), u.tokens.size(), reason};
  });
}

const char* refdec_driver_update_error(const refdec_driver* driver, size_t index) {
  if (driver == nullptr || index >= driver->driver.updates().size()) return nullptr;
  const std::string& error = driver->driver.updates()[index].error;
  return error.empty() ? nullptr : error.c_str();
}

int refdec_driver_idle(const refdec_driver* driver) { return driver == nullptr || driver->driver.idle() ? 1 : 0; }
size_t refdec_driver_active(const refdec_driver* driver) { return driver != nullptr ? driver->driver.active() : 0; }

}  // extern "C"
