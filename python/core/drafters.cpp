// Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
// refdec._core's drafters (drafters/): each a PyDrafter subclass that keeps its settings, and the
// mixture over them.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "../bindings_common.hpp"
#include "bind.hpp"
#include "refdec/drafters/history.hpp"
#include "refdec/drafters/index_drafter.hpp"
#include "refdec/drafters/llma.hpp"
#include "refdec/drafters/lookahead.hpp"
#include "refdec/drafters/mixture.hpp"
#include "refdec/drafters/ngram_trie.hpp"
#include "refdec/drafters/prompt_lookup.hpp"
#include "refdec/drafters/rest.hpp"
#include "refdec/drafters/suffix_decoding.hpp"

using namespace refdec;

namespace refdec_python {
namespace {

// Fresh copies share the index, when there is one.
struct PyLlmaDrafter : PyDrafter {
  PyLlmaDrafter(LlmaOptions o, std::shared_ptr<const LlmaIndex> i)
      : PyDrafter([o, i] { return i ? AnyDrafter(LlmaDrafter(i, o)) : AnyDrafter(LlmaDrafter(o)); }), options(o), index(std::move(i)) {}
  LlmaOptions options;
  std::shared_ptr<const LlmaIndex> index;
};
struct PyPromptLookupDrafter : PyDrafter {
  explicit PyPromptLookupDrafter(PromptLookupOptions o)
      : PyDrafter([o] { return AnyDrafter(PromptLookupDrafter(o)); }), options(o) {}
  PromptLookupOptions options;
};
struct PyNgramTrieDrafter : PyDrafter {
  explicit PyNgramTrieDrafter(NgramTrieOptions o) : PyDrafter([o] { return AnyDrafter(NgramTrieDrafter(o)); }), options(o) {}
  NgramTrieOptions options;
};
struct PyRestDrafter : PyDrafter {
  PyRestDrafter(std::shared_ptr<const Datastore> store, RestOptions o)
      : PyDrafter([store, o] { return AnyDrafter(RestDrafter(store, o)); }), datastore(std::move(store)), options(o) {}
  std::shared_ptr<const Datastore> datastore;
  RestOptions options;
};
struct PyLookaheadDrafter : PyDrafter {
  explicit PyLookaheadDrafter(LookaheadOptions o) : PyDrafter([o] { return AnyDrafter(LookaheadDrafter(o)); }), options(o) {}
  LookaheadOptions options;
};

// Fresh copies share the history: every sequence any of them serves adds its output to it.
struct PyHistoryDrafter : PyDrafter {
  PyHistoryDrafter(std::function<AnyDrafter()> inner, std::shared_ptr<OutputHistory> h)
      : PyDrafter([inner, h] { return AnyDrafter(HistoryDrafter(inner(), h)); }), history(std::move(h)) {}
  std::shared_ptr<OutputHistory> history;
};

// Fresh copies share the index: every sequence any of them serves adds its output to it.
struct PyIndexDrafter : PyDrafter {
  PyIndexDrafter(std::shared_ptr<ReferenceIndex> i, IndexDrafterOptions o)
      : PyDrafter([i, o] { return AnyDrafter(IndexDrafter(i, o)); }), index(std::move(i)), options(o) {}
  std::shared_ptr<ReferenceIndex> index;
  IndexDrafterOptions options;
};
// Fresh copies share the global tree.
struct PySuffixDecodingDrafter : PyDrafter {
  explicit PySuffixDecodingDrafter(std::shared_ptr<SuffixDecodingCache> c)
      : PyDrafter([c] { return AnyDrafter(SuffixDecodingDrafter(c)); }), cache(std::move(c)) {}
  std::shared_ptr<SuffixDecodingCache> cache;
};

// The mixture keeps a handle on the statistics of the instance it holds (the handle follows the
// drafter into AnyDrafter); copies made by `make` have their own.
struct PyMixtureDrafter : PyDrafter {
  PyMixtureDrafter(std::vector<std::function<AnyDrafter()>> sources, MixtureOptions o)
      : PyDrafter(factory(sources, o, nullptr)), options(std::move(o)) {
    drafter = factory(std::move(sources), options, &statistics)();
  }
  static std::function<AnyDrafter()> factory(std::vector<std::function<AnyDrafter()>> sources, MixtureOptions o,
                                             std::shared_ptr<const MixtureStatistics>* stats) {
    return [sources = std::move(sources), o = std::move(o), stats] {
      std::vector<AnyDrafter> made;
      for (const auto& s : sources) made.push_back(s());
      MixtureDrafter m(std::move(made), o);
      if (stats) *stats = m.statistics();
      return AnyDrafter(std::move(m));
    };
  }
  MixtureOptions options;
  std::shared_ptr<const MixtureStatistics> statistics;
};

void bind_llma(py::module_& m) {
  py::class_<LlmaIndex, std::shared_ptr<LlmaIndex>>(m, "LlmaIndex",
                                                   "LLMA's index of a document set, built once and shared by the LlmaDrafters "
                                                   "of every sequence over those documents (LlmaDrafter(index=...)): "
                                                   "immutable, safe from any thread.")
      .def(py::init([](const py::iterable& documents) {
             const PyReferences docs(documents);
             py::gil_scoped_release release;
             return std::make_shared<LlmaIndex>(docs.view());
           }),
           py::arg("documents"), "Indexes `documents` (lists or 1-D integer arrays of token ids >= 0; the GIL is released).")
      .def_property_readonly("tokens", &LlmaIndex::tokens, "Tokens indexed, over all documents.")
      .def_property_readonly("documents", &LlmaIndex::documents, "Documents indexed.")
      .def_property_readonly("bytes", &LlmaIndex::bytes, "Bytes the index holds.");

  py::class_<PyLlmaDrafter, PyDrafter>(m, "LlmaDrafter",
                                       "LLMA span copy: the longest suffix match of the sequence in the references (and, with "
                                       "self_reference, the sequence itself), copying the `continuation` tokens that follow; `spans` spans as a "
                                       "tree.")
      .def(py::init([](std::size_t min_match, std::size_t continuation, std::size_t spans, bool self_reference,
                       std::optional<std::shared_ptr<LlmaIndex>> index) {
             return std::make_unique<PyLlmaDrafter>(LlmaOptions{min_match, continuation, spans, self_reference}, index.value_or(nullptr));
           }),
           py::arg("min_match") = LlmaOptions{}.min_match, py::arg("continuation") = LlmaOptions{}.continuation,
           py::arg("spans") = LlmaOptions{}.spans,
           py::arg("self_reference") = LlmaOptions{}.self_reference, py::arg("index") = py::none(),
           "With `index` (an LlmaIndex), drafts from that shared index of its references: begin() then indexes nothing "
           "(its references are not read).")
      .def_property_readonly("index", [](const PyLlmaDrafter& d) { return std::const_pointer_cast<LlmaIndex>(d.index); },
                             "The shared LlmaIndex, or None.")
      .def_property_readonly("min_match", [](const PyLlmaDrafter& d) { return d.options.min_match; },
                             "LLMA's n: the shortest suffix match that triggers a copy.")
      .def_property_readonly("continuation", [](const PyLlmaDrafter& d) { return d.options.continuation; },
                             "LLMA's k: tokens copied per span.")
      .def_property_readonly("spans", [](const PyLlmaDrafter& d) { return d.options.spans; }, "Spans proposed as a tree.")
      .def_property_readonly("self_reference", [](const PyLlmaDrafter& d) { return d.options.self_reference; },
                             "Also search the sequence itself.");
}

void bind_prompt_lookup(py::module_& m) {
  py::class_<PyPromptLookupDrafter, PyDrafter>(m, "PromptLookupDrafter",
                                               "Prompt-lookup decoding as Spec-Bench runs it: the earliest match of the sequence's "
                                               "last max_match..min_match tokens in the sequence, copying `continuation` tokens.")
      .def(py::init([](std::size_t max_match, std::size_t min_match, std::size_t continuation, bool full_span_only) {
             return std::make_unique<PyPromptLookupDrafter>(PromptLookupOptions{max_match, min_match, continuation, full_span_only});
           }),
           py::arg("max_match") = PromptLookupOptions{}.max_match, py::arg("min_match") = PromptLookupOptions{}.min_match,
           py::arg("continuation") = PromptLookupOptions{}.continuation, py::arg("full_span_only") = PromptLookupOptions{}.full_span_only)
      .def_property_readonly("max_match", [](const PyPromptLookupDrafter& d) { return d.options.max_match; }, "Longest suffix looked up.")
      .def_property_readonly("min_match", [](const PyPromptLookupDrafter& d) { return d.options.min_match; }, "Shortest suffix looked up.")
      .def_property_readonly("continuation", [](const PyPromptLookupDrafter& d) { return d.options.continuation; },
                             "Tokens copied after the match.")
      .def_property_readonly("full_span_only", [](const PyPromptLookupDrafter& d) { return d.options.full_span_only; },
                             "Skip matches whose continuation runs past the sequence.");
}

void bind_ngram_trie(py::module_& m) {
  py::class_<PyNgramTrieDrafter, PyDrafter>(m, "NgramTrieDrafter",
                                            "The N-gram trie of Chen et al. 2025: a frequency trie of the context's n-token "
                                            "windows; the most frequent subtree below the matched suffix is the draft tree.")
      .def(py::init([](std::size_t ngram, std::size_t max_match, std::size_t max_nodes, bool grow) {
             return std::make_unique<PyNgramTrieDrafter>(NgramTrieOptions{ngram, max_match, max_nodes, grow});
           }),
           py::arg("ngram") = NgramTrieOptions{}.ngram, py::arg("max_match") = NgramTrieOptions{}.max_match,
           py::arg("max_nodes") = NgramTrieOptions{}.max_nodes, py::arg("grow") = NgramTrieOptions{}.grow)
      .def_property_readonly("ngram", [](const PyNgramTrieDrafter& d) { return d.options.ngram; }, "The paper's N: window length (trie depth).")
      .def_property_readonly("max_match", [](const PyNgramTrieDrafter& d) { return d.options.max_match; },
                             "The paper's L_p: the longest suffix matched.")
      .def_property_readonly("max_nodes", [](const PyNgramTrieDrafter& d) { return d.options.max_nodes; }, "Draft nodes per proposal at most.")
      .def_property_readonly("grow", [](const PyNgramTrieDrafter& d) { return d.options.grow; }, "Also index accepted tokens.");
}

void bind_history(py::module_& m) {
  py::class_<OutputHistory, std::shared_ptr<OutputHistory>>(m, "OutputHistory",
                                                            "The outputs of finished sequences, newest last, at most max_tokens "
                                                            "tokens in all (the oldest go first); shared by HistoryDrafters.")
      .def(py::init<std::size_t>(), py::arg("max_tokens") = OutputHistory::kDefaultMaxTokens)
      .def("add", [](OutputHistory& h, const Tokens& output) { h.add(output); }, py::arg("output"),
           "Adds one finished output (an empty one is ignored).")
      .def_property_readonly("outputs", [](const OutputHistory& h) {
             std::vector<std::vector<Token>> out;
             h.append_to(out);
             return out;
           }, "The outputs held, oldest first.")
      .def_property_readonly("tokens", &OutputHistory::tokens, "Tokens held.")
      .def_property_readonly("max_tokens", &OutputHistory::max_tokens, "The bound on tokens.")
      .def("__len__", &OutputHistory::size, "Outputs held.");

  py::class_<PyHistoryDrafter, PyDrafter>(m, "HistoryDrafter",
                                          "Deprecated (IndexDrafter over a shared ReferenceIndex supersedes it). Drafts with "
                                          "`inner` (a fresh copy of it) from the model's earlier outputs: at each begin the inner "
                                          "drafter gets the references followed by the history's outputs, and the tokens accepted "
                                          "in a sequence join the history when it finishes (finish()).")
      .def(py::init([](PyDrafter* inner, std::shared_ptr<OutputHistory> history) {
             REFDEC_CHECK(inner != nullptr, "history drafter: inner is None");
             REFDEC_CHECK(history != nullptr, "history drafter: history is None");
             return std::make_unique<PyHistoryDrafter>(inner->make, std::move(history));
           }),
           py::arg("inner"), py::arg("history"))
      .def_property_readonly("history", [](const PyHistoryDrafter& d) { return d.history; }, "The shared OutputHistory.");
}

void bind_index_drafter(py::module_& m) {
  py::class_<PyIndexDrafter, PyDrafter>(m, "IndexDrafter",
                                        "Drafts from a shared ReferenceIndex: the longest suffix of the sequence found in it (and, "
                                        "with request, in its own references and context), then its continuations best first by "
                                        "how many occurrences they continue; the tokens accepted in a sequence join the index when "
                                        "it ends.")
      .def(py::init([](std::shared_ptr<ReferenceIndex> index, std::size_t max_match, std::size_t continuation, bool request,
                       bool add_output, bool shared) {
             REFDEC_CHECK(index != nullptr, "index drafter: index is None");
             const IndexDrafterOptions o{max_match, continuation, request, add_output, shared};
             IndexDrafter(index, o);  // the options checked here, not at the first begin()
             return std::make_unique<PyIndexDrafter>(std::move(index), o);
           }),
           py::arg("index"), py::arg("max_match") = IndexDrafterOptions{}.max_match,
           py::arg("continuation") = IndexDrafterOptions{}.continuation, py::arg("request") = IndexDrafterOptions{}.request,
           py::arg("add_output") = IndexDrafterOptions{}.add_output, py::arg("shared") = IndexDrafterOptions{}.shared)
      .def_property_readonly("index", [](const PyIndexDrafter& d) { return d.index; }, "The shared ReferenceIndex.")
      .def_property_readonly("max_match", [](const PyIndexDrafter& d) { return d.options.max_match; }, "Longest suffix searched.")
      .def_property_readonly("continuation", [](const PyIndexDrafter& d) { return d.options.continuation; }, "Deepest draft.")
      .def_property_readonly("request", [](const PyIndexDrafter& d) { return d.options.request; },
                             "Whether the sequence's references and context are searched too.")
      .def_property_readonly("add_output", [](const PyIndexDrafter& d) { return d.options.add_output; },
                             "Whether a sequence's output joins the index when it ends.")
      .def_property_readonly("shared", [](const PyIndexDrafter& d) { return d.options.shared; },
                             "Whether the shared index is searched (off: the request's own text only, and nothing is added).");
  m.def(
      "index_sources",
      [](std::shared_ptr<ReferenceIndex> index, std::size_t max_match, std::size_t continuation, bool request, bool add_output) {
        REFDEC_CHECK(index != nullptr, "index drafter: index is None");
        std::vector<std::unique_ptr<PyIndexDrafter>> out;
        for (const IndexDrafter& d : index_sources(index, {max_match, continuation, request, add_output}))
          out.push_back(std::make_unique<PyIndexDrafter>(index, d.options()));
        return out;
      },
      py::arg("index"), py::arg("max_match") = IndexDrafterOptions{}.max_match, py::arg("continuation") = IndexDrafterOptions{}.continuation,
      py::arg("request") = IndexDrafterOptions{}.request, py::arg("add_output") = IndexDrafterOptions{}.add_output,
      "The shared index as a MixtureDrafter's sources: an IndexDrafter of the index alone (which adds the outputs) and, with "
      "request, one of the request's own text alone (shared=False), so that the mixture learns how far to trust each.");
}

void bind_suffix_decoding(py::module_& m) {
  py::class_<SuffixDecodingCache, std::shared_ptr<SuffixDecodingCache>>(m, "SuffixDecodingCache",
                                                                        "SuffixDecoding's global tree over earlier responses (the "
                                                                        "baseline's; ArcticInference's defaults).")
      .def(py::init([](std::size_t max_depth, double max_spec_factor, double max_spec_offset, float min_token_prob,
                       std::size_t max_cached_requests, bool tree) {
             return std::make_shared<SuffixDecodingCache>(
                 SuffixDecodingOptions{max_depth, max_spec_factor, max_spec_offset, min_token_prob, max_cached_requests, tree});
           }),
           py::arg("max_depth") = SuffixDecodingOptions{}.max_depth, py::arg("max_spec_factor") = SuffixDecodingOptions{}.max_spec_factor,
           py::arg("max_spec_offset") = SuffixDecodingOptions{}.max_spec_offset,
           py::arg("min_token_prob") = SuffixDecodingOptions{}.min_token_prob,
           py::arg("max_cached_requests") = SuffixDecodingOptions{}.max_cached_requests, py::arg("tree") = SuffixDecodingOptions{}.tree)
      .def_property_readonly("tokens", &SuffixDecodingCache::tokens, "Tokens of the cached responses.");

  py::class_<PySuffixDecodingDrafter, PyDrafter>(m, "SuffixDecodingDrafter",
                                                 "The SuffixDecoding baseline: a path (or a tree, with the cache's tree option) per step from the request's own suffix tree "
                                                 "or the shared global one, whichever scores higher.")
      .def(py::init([](std::shared_ptr<SuffixDecodingCache> cache) {
             REFDEC_CHECK(cache != nullptr, "suffix decoding: cache is None");
             return std::make_unique<PySuffixDecodingDrafter>(std::move(cache));
           }),
           py::arg("cache"))
      .def_property_readonly("cache", [](const PySuffixDecodingDrafter& d) { return d.cache; }, "The shared global tree.");
}

void bind_rest(py::module_& m) {
  py::class_<PyRestDrafter, PyDrafter>(m, "RestDrafter",
                                       "REST retrieval from a shared Datastore: the longest suffix of the sequence (max_match down "
                                       "to 1 tokens) found in the datastore, the max_nodes most frequent prefixes of its "
                                       "continuations.")
      .def(py::init([](std::shared_ptr<Datastore> store, std::size_t max_match, std::size_t continuation, std::size_t max_nodes,
                       std::size_t max_occurrences) {
             return std::make_unique<PyRestDrafter>(std::move(store), RestOptions{max_match, continuation, max_nodes, max_occurrences});
           }),
           py::arg("datastore"), py::arg("max_match") = RestOptions{}.max_match, py::arg("continuation") = RestOptions{}.continuation,
           py::arg("max_nodes") = RestOptions{}.max_nodes, py::arg("max_occurrences") = RestOptions{}.max_occurrences)
      .def_property_readonly("datastore", [](const PyRestDrafter& d) { return std::const_pointer_cast<Datastore>(d.datastore); },
                             "The datastore it reads.")
      .def_property_readonly("max_match", [](const PyRestDrafter& d) { return d.options.max_match; }, "REST's n_max: the longest suffix searched.")
      .def_property_readonly("continuation", [](const PyRestDrafter& d) { return d.options.continuation; },
                             "REST's m: tokens read after each occurrence.")
      .def_property_readonly("max_nodes", [](const PyRestDrafter& d) { return d.options.max_nodes; }, "REST's c: draft nodes kept.")
      .def_property_readonly("max_occurrences", [](const PyRestDrafter& d) { return d.options.max_occurrences; }, "Occurrences read.");
}

void bind_lookahead(py::module_& m) {
  py::class_<PyLookaheadDrafter, PyDrafter>(m, "LookaheadDrafter",
                                            "Lookahead Decoding: a W x (N-1) Jacobi window run as auxiliary tokens, and a pool of "
                                            "the n-grams it harvests; window=0 is a pure n-gram pool drafter.")
      .def(py::init([](std::size_t window, std::size_t ngram, std::size_t guesses, bool pool_from_output, std::uint64_t seed) {
             return std::make_unique<PyLookaheadDrafter>(LookaheadOptions{window, ngram, guesses, pool_from_output, seed});
           }),
           py::arg("window") = LookaheadOptions{}.window, py::arg("ngram") = LookaheadOptions{}.ngram,
           py::arg("guesses") = LookaheadOptions{}.guesses, py::arg("pool_from_output") = LookaheadOptions{}.pool_from_output,
           py::arg("seed") = LookaheadOptions{}.seed)
      .def_property_readonly("window", [](const PyLookaheadDrafter& d) { return d.options.window; }, "W: Jacobi window width.")
      .def_property_readonly("ngram", [](const PyLookaheadDrafter& d) { return d.options.ngram; }, "N: n-gram size.")
      .def_property_readonly("guesses", [](const PyLookaheadDrafter& d) { return d.options.guesses; }, "G: candidates per step.");
}

void bind_mixture(py::module_& m) {
  py::class_<MixtureStatistics::Source>(m, "MixtureSourceStatistics", "Raw counts of one mixture source.")
      .def_readonly("name", &MixtureStatistics::Source::name, "The source's name.")
      .def_readonly("evaluated", &MixtureStatistics::Source::evaluated, "[max_depth] nodes at depth d+1 whose parent was right.")
      .def_readonly("correct", &MixtureStatistics::Source::correct, "[max_depth] of those, the right ones.")
      .def_readonly("accepted_tokens", &MixtureStatistics::Source::accepted_tokens, "Accepted draft tokens it had proposed.")
      .def("right_at", &MixtureStatistics::Source::right_at, py::arg("d"), "How often its nodes at depth d+1 were right.");
  py::class_<MixtureStatistics, std::shared_ptr<MixtureStatistics>>(m, "MixtureStatistics", "What a mixture learned, per source (live).")
      .def_property_readonly("sources", &MixtureStatistics::sources, "Per source, in the order given.")
      .def_property_readonly("steps", &MixtureStatistics::steps, "Steps proposed so far.")
      .def_property_readonly("mean_budget", &MixtureStatistics::mean_budget, "Mean draft nodes kept per step.")
      .def("acceptance", &MixtureStatistics::acceptance, py::arg("source"), py::arg("depth"),
           "Learned probability that a node of `source` at depth depth+1 is accepted given its parent was.");

  py::enum_<MixtureCombine>(m, "MixtureCombine", "How a mixture combines the estimates of sources that proposed the same node.")
      .value("max", MixtureCombine::max, "The best single estimate.")
      .value("noisy_or", MixtureCombine::noisy_or, "1 - prod(1 - p).");

  py::class_<PyMixtureDrafter, PyDrafter>(m, "MixtureDrafter",
                                          "One merged trie from several drafters, nodes scored by acceptance learned online, the "
                                          "budget chosen under a step cost. The mixture owns fresh copies of `sources` made from "
                                          "their settings: the given drafters stay independent and usable.")
      .def(py::init([](const std::vector<PyDrafter*>& sources, const StepCost& cost, double prior_mean, double prior_strength,
                       double half_life, std::size_t max_depth, MixtureCombine combine, double calibration_half_life,
                       double calibration_prior, std::size_t source_budget, bool match_context, double recent_rate,
                       double scorer_rate) {
             std::vector<std::function<AnyDrafter()>> makes;
             for (std::size_t s = 0; s < sources.size(); ++s) {
               REFDEC_CHECK(sources[s] != nullptr, "mixture: source " << s << " is None");
               makes.push_back(sources[s]->make);
             }
             MixtureOptions o{.cost = cost, .prior_mean = prior_mean, .prior_strength = prior_strength, .half_life = half_life,
                              .max_depth = max_depth, .combine = combine};
             o.calibration_half_life = calibration_half_life;
             o.calibration_prior = calibration_prior;
             o.source_budget = source_budget;
             o.match_context = match_context;
             o.recent_rate = recent_rate;
             o.scorer_rate = scorer_rate;
             return std::make_unique<PyMixtureDrafter>(std::move(makes), o);
           }),
           py::arg("sources"), py::arg("cost") = MixtureOptions{}.cost, py::arg("prior_mean") = MixtureOptions{}.prior_mean,
           py::arg("prior_strength") = MixtureOptions{}.prior_strength, py::arg("half_life") = MixtureOptions{}.half_life,
           py::arg("max_depth") = MixtureOptions{}.max_depth, py::arg("combine") = MixtureOptions{}.combine,
           py::arg("calibration_half_life") = MixtureOptions{}.calibration_half_life,
           py::arg("calibration_prior") = MixtureOptions{}.calibration_prior,
           py::arg("source_budget") = MixtureOptions{}.source_budget, py::arg("match_context") = MixtureOptions{}.match_context,
           py::arg("recent_rate") = MixtureOptions{}.recent_rate, py::arg("scorer_rate") = MixtureOptions{}.scorer_rate,
           "calibration_half_life: steps after which a step weighs half in the per-sequence calibration of "
           "the budget choice under a step cost (0: off); calibration_prior: its prior weight, in tokens. "
           "source_budget: draft nodes each source is asked for at least (0: the budget); match_context: "
           "condition the estimates on each source's match length; recent_rate: weight of the newest step in "
           "each source's recent reach (0: off); scorer_rate: learning rate of the learned scorer (0: off).")
      .def_property_readonly("statistics", [](const PyMixtureDrafter& d) { return std::const_pointer_cast<MixtureStatistics>(d.statistics); },
                             "What it learned (MixtureStatistics, follows the drafter).");
}

}  // namespace

void bind_drafters(py::module_& m) {
  bind_llma(m);
  bind_prompt_lookup(m);
  bind_ngram_trie(m);
  bind_history(m);
  bind_index_drafter(m);
  bind_suffix_decoding(m);
  bind_rest(m);
  bind_lookahead(m);
  bind_mixture(m);
}

}  // namespace refdec_python
