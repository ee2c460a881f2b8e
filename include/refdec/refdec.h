/* Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0 */
/* refdec's C API: drafters, the step protocol of a batch (StepDriver) and the exports other engines
 * verify, for engines that cannot include C++20 headers (C, C++17, other languages through a C
 * FFI). Link the shim library refdec::c (librefdec_c; pkg-config refdec_c, or refdec_c_static for
 * the static library); this header is C99 and includable from C++17. docs/engine.md, "The C API",
 * walks through a decoding loop.
 *
 * Conventions:
 * - Names: refdec_<object>_<verb>. A handle is made by refdec_<object>_create (a drafter by
 *   refdec_drafter_create_<kind>, a datastore by refdec_datastore_open) and freed by its one
 *   refdec_<object>_destroy (NULL is ignored).
 * - Every function that can fail returns a refdec_status; REFDEC_OK is 0. On failure
 *   refdec_last_error() holds the message (per thread, until the thread's next failing call) and
 *   the out-parameters are unchanged.
 * - Options and limits are structs whose first field, struct_size, says which fields the caller
 *   knows: fill one with its refdec_<options>_init() (the library's defaults, written below next
 *   to each field), then change fields. A struct whose struct_size was never set is refused.
 *   Passing NULL for options takes the defaults.
 * - A handle is used by one thread at a time (a refdec_reference_index, refdec_llma_index and
 *   refdec_datastore by any number at once); different handles may be used from different threads.
 * - Ownership: what a call reads (tokens, references, options) is read during the call only and
 *   stays the caller's; what the library keeps it copies or indexes. Arrays a call returns (plans,
 *   keep plans, updates, trees, names, messages) point into the handle and stay valid until the
 *   handle's next call that changes it (said per function); copy what must outlive that.
 * - Token ids are refdec_token (int32_t, >= 0); counts are size_t or int64_t as named.
 *
 * Versions: REFDEC_C_API_VERSION is the API's major version and librefdec_c's SOVERSION
 * (librefdec_c.so.2). Within a major version the library only gains: new functions, and new
 * option fields at the end of an option struct (an older caller's smaller struct_size keeps their
 * defaults). Removing or changing a function, or any field of a struct the library writes (plans,
 * updates, trees), makes a new major version and a new SOVERSION. */
#ifndef REFDEC_REFDEC_H_
#define REFDEC_REFDEC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(REFDEC_C_BUILDING)
#define REFDEC_C_EXPORT __declspec(dllexport)
#elif defined(_WIN32)
#define REFDEC_C_EXPORT __declspec(dllimport)
#elif defined(__GNUC__)
#define REFDEC_C_EXPORT __attribute__((visibility("default")))
#else
#define REFDEC_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The major version of this API; refdec_c_api_version() says which one the library implements. */
#define REFDEC_C_API_VERSION 2

/** A token id. */
typedef int32_t refdec_token;

/** What a call did. */
typedef enum refdec_status {
  REFDEC_OK = 0,             /**< success */
  REFDEC_ERROR_ARGUMENT = 1, /**< an argument refdec rejects (null pointer, out of range, inconsistent sizes, wrong order of calls) */
  REFDEC_ERROR_IO = 2,       /**< a file refdec cannot use */
  REFDEC_ERROR_MEMORY = 3,   /**< out of memory */
  REFDEC_ERROR_INTERNAL = 4  /**< anything else (a bug: please report it with the message) */
} refdec_status;

/** The API version the library implements (REFDEC_C_API_VERSION of the header it was built with). */
REFDEC_C_EXPORT int refdec_c_api_version(void);
/** The message of this thread's last failed call ("" if none failed). Valid until the thread's next failing call. */
REFDEC_C_EXPORT const char* refdec_last_error(void);

/** A read-only run of tokens in the caller's memory. */
typedef struct refdec_token_span {
  const refdec_token* data;
  size_t size;
} refdec_token_span;

/* ---------------------------------------------------------------------------------------------
 * Step costs: what a verification step of a number of rows costs, for the budget choices (a
 * mixture's adaptive budget, the driver's batch budget). Immutable once made.
 * ------------------------------------------------------------------------------------------- */

typedef struct refdec_step_cost refdec_step_cost;
/** From measured steps: `rows[i]` rows (>= 1) took `seconds[i]` (> 0); averaged per row count,
 *  made non-decreasing, interpolated between (refdec::StepCost::calibrated). */
REFDEC_C_EXPORT refdec_status refdec_step_cost_create_samples(const size_t* rows, const double* seconds, size_t count,
                                                              refdec_step_cost** out);
/** a + b * rows seconds (a > 0, b >= 0). */
REFDEC_C_EXPORT refdec_status refdec_step_cost_create_affine(double a, double b, refdec_step_cost** out);
/** Seconds of a step of `rows` rows (>= 1); 0 for a NULL cost. */
REFDEC_C_EXPORT double refdec_step_cost_seconds(const refdec_step_cost* cost, size_t rows);
REFDEC_C_EXPORT void refdec_step_cost_destroy(refdec_step_cost* cost);

/** Learns the step cost from every step the engine times (refdec::StepCostTracker). */
typedef struct refdec_step_cost_tracker refdec_step_cost_tracker;
/** Learns around `prior` (copied; not NULL). */
REFDEC_C_EXPORT refdec_status refdec_step_cost_tracker_create(const refdec_step_cost* prior, refdec_step_cost_tracker** out);
/** One timed step of `batch` sequences (>= 1) that ran `rows` rows in all (>= batch) in `seconds` (> 0). */
REFDEC_C_EXPORT refdec_status refdec_step_cost_tracker_observe(refdec_step_cost_tracker* tracker, size_t rows, double seconds,
                                                               size_t batch);
/** The learned cost of a step of `batch` sequences by its total rows, as a new step cost (destroy it). */
REFDEC_C_EXPORT refdec_status refdec_step_cost_tracker_current(const refdec_step_cost_tracker* tracker, size_t batch,
                                                               refdec_step_cost** out);
REFDEC_C_EXPORT void refdec_step_cost_tracker_destroy(refdec_step_cost_tracker* tracker);

/* ---------------------------------------------------------------------------------------------
 * What drafters read, shared: LLMA's index of a document set, the online reference index, a REST
 * datastore. Each is kept alive by the drafters over it: destroying the caller's handle early is safe.
 * ------------------------------------------------------------------------------------------- */

/** LLMA's index of a document set (refdec::LlmaIndex), built once, immutable. */
typedef struct refdec_llma_index refdec_llma_index;
/** Indexes `num_documents` documents (token ids >= 0). */
REFDEC_C_EXPORT refdec_status refdec_llma_index_create(const refdec_token_span* documents, size_t num_documents, refdec_llma_index** out);
/** Tokens indexed, over all documents (0 for NULL). */
REFDEC_C_EXPORT size_t refdec_llma_index_tokens(const refdec_llma_index* index);
REFDEC_C_EXPORT void refdec_llma_index_destroy(refdec_llma_index* index);

/** The shared index of documents and earlier outputs (refdec::ReferenceIndex): one per server;
 *  any number of threads may add to it and draft from it at once. */
typedef struct refdec_reference_index refdec_reference_index;
typedef struct refdec_reference_index_options {
  size_t struct_size;    /**< sizeof(refdec_reference_index_options), set by the init function */
  size_t max_tokens;     /**< default 2^26: tokens kept at most; past it the oldest documents are dropped */
  size_t depth;          /**< default 64: suffixes are ordered by this many tokens (2 to 255): the longest match and its continuations */
  bool background_merge; /**< default false: merge on a thread of the index's own instead of in add() (which then waits while that thread is
                            64 segments behind) */
  size_t max_bytes;      /**< default 0 (no bound): bytes kept at most; past it the oldest documents are dropped */
} refdec_reference_index_options;
REFDEC_C_EXPORT void refdec_reference_index_options_init(refdec_reference_index_options* options);
REFDEC_C_EXPORT refdec_status refdec_reference_index_create(const refdec_reference_index_options* options, refdec_reference_index** out);
/** Adds a document (a corpus text, a cached answer); index drafters add their sequences' outputs at refdec_drafter_finish. */
REFDEC_C_EXPORT refdec_status refdec_reference_index_add(refdec_reference_index* index, const refdec_token* tokens, size_t num_tokens);
/** Tokens indexed now (0 for NULL). */
REFDEC_C_EXPORT size_t refdec_reference_index_tokens(const refdec_reference_index* index);
REFDEC_C_EXPORT void refdec_reference_index_destroy(refdec_reference_index* index);

/** A REST datastore file (built by `refdec-datastore build`), memory-mapped, read-only. */
typedef struct refdec_datastore refdec_datastore;
/** Opens and verifies the file at `path` (REFDEC_ERROR_IO for a file refdec cannot use). */
REFDEC_C_EXPORT refdec_status refdec_datastore_open(const char* path, refdec_datastore** out);
/** Tokens in the datastore (0 for NULL). */
REFDEC_C_EXPORT uint64_t refdec_datastore_tokens(const refdec_datastore* datastore);
REFDEC_C_EXPORT void refdec_datastore_destroy(refdec_datastore* datastore);

/* ---------------------------------------------------------------------------------------------
 * Drafters. One sequence at a time; reusable for the next sequence (what it learned, e.g. a
 * mixture's estimates, carries over).
 * ------------------------------------------------------------------------------------------- */

typedef struct refdec_drafter refdec_drafter;

/** LLMA span copy from the references and the sequence itself. */
typedef struct refdec_llma_options {
  size_t struct_size;  /**< sizeof(refdec_llma_options), set by the init function */
  size_t min_match;    /**< default 1: LLMA's n, the shortest suffix match that may trigger a copy */
  size_t continuation; /**< default 16: LLMA's k, tokens copied per span */
  size_t spans;        /**< default 1: spans proposed as a tree */
  bool self_reference; /**< default true: also copy from the sequence itself (without references, prompt-lookup decoding) */
} refdec_llma_options;
/** Prompt lookup: the sequence's last n-gram found earlier in it. References are not read. */
typedef struct refdec_prompt_lookup_options {
  size_t struct_size;  /**< sizeof(refdec_prompt_lookup_options), set by the init function */
  size_t max_match;    /**< default 3: longest suffix looked up */
  size_t min_match;    /**< default 1: shortest one */
  size_t continuation; /**< default 10: tokens copied after the match */
  bool full_span_only; /**< default false: skip a match whose continuation would run past the sequence's end */
} refdec_prompt_lookup_options;
/** The n-gram trie over the references and the sequence. */
typedef struct refdec_ngram_trie_options {
  size_t struct_size; /**< sizeof(refdec_ngram_trie_options), set by the init function */
  size_t ngram;       /**< default 13: the paper's N, window length in tokens (the trie's depth) */
  size_t max_match;   /**< default 3: the paper's L_p, the longest suffix matched */
  size_t max_nodes;   /**< default 32: draft nodes per proposal at most */
  bool grow;          /**< default true: also index every accepted token */
} refdec_ngram_trie_options;
/** A drafter over a shared refdec_reference_index: the sequence's longest suffix found there (and,
 *  with request, in its own references and context), then its continuations best first. */
typedef struct refdec_index_drafter_options {
  size_t struct_size;  /**< sizeof(refdec_index_drafter_options), set by the init function */
  size_t max_match;    /**< default 16: longest suffix of the sequence searched */
  size_t continuation; /**< default 64: deepest draft node, in tokens after the match */
  bool request;        /**< default true: also search the sequence's references and its own context */
  bool add_output;     /**< default true: refdec_drafter_finish adds the sequence's output to the index */
  bool shared;         /**< default true: search the index; false: the sequence's own text only (with request), nothing added:
                            beside one with request false in a mixture, each is a source with estimates of its own */
} refdec_index_drafter_options;
/** REST: the sequence's longest suffix in a datastore, the continuations of its occurrences. References are not read. */
typedef struct refdec_rest_options {
  size_t struct_size;     /**< sizeof(refdec_rest_options), set by the init function */
  size_t max_match;       /**< default 16: REST's n_max, the longest sequence suffix searched, 1 to 1024 */
  size_t continuation;    /**< default 10: REST's m, tokens read after each occurrence, 1 to 1024 */
  size_t max_nodes;       /**< default 64: REST's c, draft nodes kept (the most frequent prefixes), 1 to 65536 */
  size_t max_occurrences; /**< default 256: occurrences read, sampled evenly when there are more, 1 to 2^31 */
} refdec_rest_options;
/** Lookahead decoding: n-grams pooled from the references, the sequence and (through a driver)
 *  the Jacobi window, whose rows the driver's plan carries as auxiliary rows. Drafting by hand
 *  runs no window: the pool alone. */
typedef struct refdec_lookahead_options {
  size_t struct_size;    /**< sizeof(refdec_lookahead_options), set by the init function */
  size_t window;         /**< default 15: W, the Jacobi window's width (0 to 256; 0: the pool alone) */
  size_t ngram;          /**< default 5: N, the n-gram size (2 to 32) */
  size_t guesses;        /**< default 15: G, n-grams kept per first token and verified per step (1 to 1024) */
  bool pool_from_output; /**< default true: also pool the accepted output's n-grams */
  uint64_t seed;         /**< default 0: the window's first level drawn from the prompt */
} refdec_lookahead_options;
/** How a mixture combines the estimates of sources that proposed the same node. */
typedef enum refdec_mixture_combine {
  REFDEC_MIXTURE_MAX = 0,     /**< the best estimate */
  REFDEC_MIXTURE_NOISY_OR = 1 /**< 1 - prod(1 - p) */
} refdec_mixture_combine;
/** A mixture: every source's tree merged, each node scored by its acceptance learned online, the
 *  budget chosen against the step cost (refdec_drafter_set_step_cost; without one, every node
 *  rated above zero up to the budget). refdec::MixtureOptions documents each field at length. */
typedef struct refdec_mixture_options {
  size_t struct_size;             /**< sizeof(refdec_mixture_options), set by the init function */
  double prior_mean;              /**< default 0.3: prior probability of a node's acceptance given its parent's */
  double prior_strength;          /**< default 2: the prior's weight, in observations */
  double half_life;               /**< default 2000: steps after which an observation weighs half (0: never forget) */
  size_t max_depth;               /**< default 16: depths with statistics of their own */
  refdec_mixture_combine combine; /**< default REFDEC_MIXTURE_MAX */
  size_t source_budget;           /**< default 64: draft nodes each source is asked for at least (0: the budget) */
  bool match_context;             /**< default true: estimates conditioned on each source's match length */
  double recent_rate;             /**< default 0.3: weight of the newest step in each source's recent reach (0: off), 0 to 1 */
  double scorer_rate;             /**< default 0.1: learning rate of the learned scorer (0: off), 0 to 1 */
  double calibration_half_life;   /**< default 12: steps after which a step weighs half in the per-sequence calibration (0: off) */
  double calibration_prior;       /**< default 1: the calibration's prior weight, in expected tokens (> 0) */
} refdec_mixture_options;

/** Fill `options` with the library's defaults (and struct_size). */
REFDEC_C_EXPORT void refdec_llma_options_init(refdec_llma_options* options);
REFDEC_C_EXPORT void refdec_prompt_lookup_options_init(refdec_prompt_lookup_options* options);
REFDEC_C_EXPORT void refdec_ngram_trie_options_init(refdec_ngram_trie_options* options);
REFDEC_C_EXPORT void refdec_index_drafter_options_init(refdec_index_drafter_options* options);
REFDEC_C_EXPORT void refdec_rest_options_init(refdec_rest_options* options);
REFDEC_C_EXPORT void refdec_lookahead_options_init(refdec_lookahead_options* options);
REFDEC_C_EXPORT void refdec_mixture_options_init(refdec_mixture_options* options);

/** Create a drafter; `options` NULL takes the defaults. */
REFDEC_C_EXPORT refdec_status refdec_drafter_create_llma(const refdec_llma_options* options, refdec_drafter** out);
/** LLMA over a shared index (not NULL): the references given to begin or refdec_driver_add are not read. */
REFDEC_C_EXPORT refdec_status refdec_drafter_create_llma_shared(const refdec_llma_index* index, const refdec_llma_options* options,
                                                                refdec_drafter** out);
REFDEC_C_EXPORT refdec_status refdec_drafter_create_prompt_lookup(const refdec_prompt_lookup_options* options, refdec_drafter** out);
REFDEC_C_EXPORT refdec_status refdec_drafter_create_ngram_trie(const refdec_ngram_trie_options* options, refdec_drafter** out);
/** A drafter over `index` (not NULL). */
REFDEC_C_EXPORT refdec_status refdec_drafter_create_index(refdec_reference_index* index, const refdec_index_drafter_options* options,
                                                          refdec_drafter** out);
/** REST over `datastore` (not NULL). */
REFDEC_C_EXPORT refdec_status refdec_drafter_create_rest(const refdec_datastore* datastore, const refdec_rest_options* options,
                                                         refdec_drafter** out);
REFDEC_C_EXPORT refdec_status refdec_drafter_create_lookahead(const refdec_lookahead_options* options, refdec_drafter** out);
/** A mixture of `count` drafters. It takes the sources over: on success each sources[i] is
 *  destroyed into the mixture and set to NULL; a call refused by its checks leaves them as they
 *  were (out of memory may leave them empty: destroy them then). A source may not be in use by a driver. */
REFDEC_C_EXPORT refdec_status refdec_drafter_create_mixture(refdec_drafter** sources, size_t count, const refdec_mixture_options* options,
                                                            refdec_drafter** out);
REFDEC_C_EXPORT void refdec_drafter_destroy(refdec_drafter* drafter);
/** The drafter's name (e.g. "llma"), valid while the drafter lives ("" for NULL). */
REFDEC_C_EXPORT const char* refdec_drafter_name(const refdec_drafter* drafter);
/** The step cost a cost-aware drafter (a mixture) sizes its drafts by, from its next draft on
 *  (copied; NULL: none, the flat cost). Other drafters ignore it. */
REFDEC_C_EXPORT refdec_status refdec_drafter_set_step_cost(refdec_drafter* drafter, const refdec_step_cost* cost);

/* Drafting one sequence by hand (an engine that runs its own protocol). A refdec_driver does all
 * of this for a batch. The order: begin, then per step draft, the engine's verification, accept;
 * then finish (or reset). Each call checks it: REFDEC_ERROR_ARGUMENT with the reason otherwise.
 * Drafting by hand teaches a mixture as a driver does: each accept learns from the last draft. */

/** Starts a sequence: its tokens so far (ids >= 0) and the references it may copy from. A
 *  sequence begun before and not finished is finished first (its output published). */
REFDEC_C_EXPORT refdec_status refdec_drafter_begin(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens,
                                                   const refdec_token_span* references, size_t num_references);
/** Tells the drafter the tokens appended to the sequence since the last call (accepted drafts and
 *  the bonus token). Refused before begin and for a negative id. */
REFDEC_C_EXPORT refdec_status refdec_drafter_accept(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens);
/** Ends the sequence: an index drafter (add_output) adds its output to the shared index, now;
 *  an error (out of memory) is returned. The drafter must begin again before drafting. Only this
 *  call (and a begin over an unfinished sequence) publishes: a drafter destroyed or reset first adds nothing. */
REFDEC_C_EXPORT refdec_status refdec_drafter_finish(refdec_drafter* drafter);
/** Rewinds the sequence to its first `length` tokens (<= its length): a context shift, a prompt
 *  cache reused. The next draft's root is token length - 1; what finish publishes is the output
 *  kept. What the drafter learned from the tokens dropped (a trie's n-grams) may stay. */
REFDEC_C_EXPORT refdec_status refdec_drafter_truncate(refdec_drafter* drafter, size_t length);
/** Ends the sequence without publishing anything (an aborted request). The drafter must begin again. */
REFDEC_C_EXPORT refdec_status refdec_drafter_reset(refdec_drafter* drafter);
/** The sequence's length as the drafter was told it (0 before begin). */
REFDEC_C_EXPORT size_t refdec_drafter_length(const refdec_drafter* drafter);

/** A draft tree, root first, parents before children. Node 0 is the root (the sequence's last
 *  token, not a draft). Children are linked from first_child through next_sibling, -1 ending a list;
 *  siblings come best first. score is the drafter's weight of the path to a node (root: 0).
 *  Functions that take a tree read only tokens, first_child and next_sibling unless they say so:
 *  a sequence's rows of a step plan make one (plan.tokens + indptr[b], ..., num_nodes[b]). */
typedef struct refdec_tree {
  int32_t num_nodes;
  const refdec_token* tokens;  /**< [num_nodes] */
  const int32_t* parent;       /**< [num_nodes] -1 for the root */
  const int32_t* depth;        /**< [num_nodes] 0 for the root */
  const int32_t* first_child;  /**< [num_nodes] */
  const int32_t* next_sibling; /**< [num_nodes] */
  const float* score;          /**< [num_nodes] */
} refdec_tree;

/** Proposes at most `budget` draft nodes after `root`, the sequence's last token, cut to the best
 *  ones; token ids checked against [0, vocab_size). The tree stays valid until the drafter's next
 *  call. Refused before begin, and for a root other than the sequence's last token (a sequence
 *  begun empty takes any root). */
REFDEC_C_EXPORT refdec_status refdec_drafter_draft(refdec_drafter* drafter, refdec_token root, size_t budget, int64_t vocab_size,
                                                   refdec_tree* out);

/** The best chain of `tree` (from the root, the best child each time; the root excluded), for an
 *  engine that verifies chains only (llama.cpp's speculative decoding). Reads the scores. Writes
 *  at most `capacity` tokens to `out` and their count to `*count`. */
REFDEC_C_EXPORT refdec_status refdec_tree_best_chain(const refdec_tree* tree, refdec_token* out, size_t capacity, size_t* count);
/** `tree` in SGLang's fixed-size layout of `num_draft` slots (its draft_tokens, retrive_next_token
 *  and retrive_next_sibling rows of one request): slot 0 the root, slots 1.. the draft nodes in
 *  tree order, then padding slots that no link reaches (token `pad_token`, links -1). Fails when the
 *  tree has more than num_draft nodes. */
REFDEC_C_EXPORT refdec_status refdec_tree_to_sglang(const refdec_tree* tree, int32_t num_draft, refdec_token pad_token,
                                                    refdec_token* draft_tokens, int64_t* next_token, int64_t* next_sibling);
/** `tree` as branches, for an engine without custom attention masks (llama.cpp's sequence ids):
 *  each root-to-leaf path is a branch, numbered 0 .. *num_branches - 1 in depth-first order, so
 *  that the branches through node i are the run branch_begin[i] .. branch_end[i] - 1 (the root's:
 *  all of them). Node i goes at position first_position + its depth (positions[i]); give it the
 *  sequence ids of its branches. A node attends to the sequence's cached cells and to the step's
 *  cells of any one of its branches at positions <= its own: exactly its ancestors. Every array
 *  has room for num_nodes entries. After the walk: refdec_tree_winning_branch. */
REFDEC_C_EXPORT refdec_status refdec_tree_branches(const refdec_tree* tree, int64_t first_position, int64_t* positions,
                                                   int32_t* branch_begin, int32_t* branch_end, int32_t* num_branches);
/** The branch whose cells stay after a walk that accepted `path[0 .. num_accepted - 1]`: keep
 *  its cells at positions < first_position + 1 + num_accepted (the root and the accepted drafts)
 *  and drop every other cell the step wrote (llama.cpp: seq_keep(winner), then seq_rm(winner,
 *  first_position + 1 + num_accepted, -1)). No cell moves. */
REFDEC_C_EXPORT refdec_status refdec_tree_winning_branch(const refdec_tree* tree, const int32_t* branch_begin, const int32_t* path,
                                                         int32_t num_accepted, int32_t* winner);

/** The target's token at `node` of a tree after `depth` accepted drafts; `user` is the caller's.
 *  A negative return never matches a draft. Each node is asked at most once, root to leaf, so a
 *  chooser may sample lazily. */
typedef refdec_token (*refdec_tree_chooser)(void* user, int32_t node, int32_t depth);
/** Walks `tree` with `choose`: writes the accepted draft nodes (room for num_nodes - 1) to `path`,
 *  their count to `*num_accepted`, and the target's token after them (the bonus token) to `*bonus`. */
REFDEC_C_EXPORT refdec_status refdec_tree_walk(const refdec_tree* tree, refdec_tree_chooser choose, void* user, int32_t* path,
                                               int32_t* num_accepted, refdec_token* bonus);

/* ---------------------------------------------------------------------------------------------
 * The step driver: the protocol of speculative decoding for a batch whose sequences join and
 * leave between steps. The engine keeps one cache per active sequence in slot order (the plan's
 * ids say which sequence each slot is). A loop:
 *
 *   while (!refdec_driver_idle(d)) {
 *     refdec_driver_prepare(d, &has_step);
 *     if (has_step) {
 *       refdec_driver_plan(d, &plan);                     forward pass over plan's rows
 *       refdec_driver_complete_greedy(d, argmax, rows);   or refdec_driver_complete_walk
 *       refdec_driver_keep(d, &keep);                     move each cache's kept rows
 *       refdec_driver_left(d, &slots, &count);            drop those caches, in that order
 *     }
 *     for i < refdec_driver_num_updates(d): refdec_driver_update(d, i, &update)
 *   }
 * ------------------------------------------------------------------------------------------- */

typedef struct refdec_driver refdec_driver;

typedef struct refdec_driver_options {
  size_t struct_size;       /**< sizeof(refdec_driver_options), set by the init function */
  int64_t vocab_size;       /**< no default (0, refused): token ids lie in [0, vocab_size) */
  int64_t max_context;      /**< no default (0, refused): prompt + output per sequence at most */
  int64_t prefill_chunk;    /**< default 512: prompt tokens a step prefills per sequence at most; 0: the whole prompt at once */
  int64_t drafting_threads; /**< default 1: threads that draft a step's sequences (the caller's among them), 1 to 256 */
} refdec_driver_options;
REFDEC_C_EXPORT void refdec_driver_options_init(refdec_driver_options* options);
/** `options` is required (vocab_size has no default). */
REFDEC_C_EXPORT refdec_status refdec_driver_create(const refdec_driver_options* options, refdec_driver** out);
/** Frees the driver; the drafters its sequences borrowed are the caller's again. */
REFDEC_C_EXPORT void refdec_driver_destroy(refdec_driver* driver);
/** Prices each step as a whole (the batch budget): the step's draft nodes are chosen across the
 *  batch to maximise tokens per second under `cost` (copied), each sequence's budget a cap. NULL:
 *  each sequence drafts up to its own budget (the default). */
REFDEC_C_EXPORT refdec_status refdec_driver_set_batch_cost(refdec_driver* driver, const refdec_step_cost* cost);

typedef struct refdec_sequence_limits {
  size_t struct_size;              /**< sizeof(refdec_sequence_limits), set by the init function */
  int64_t max_new_tokens;          /**< default 256: tokens to generate at most (0: the sequence leaves at once) */
  const refdec_token* stop_tokens; /**< default none: generation stops before any of these (not emitted) */
  size_t num_stop_tokens;
  int64_t budget; /**< default 16: draft nodes verified per step; 0 is plain decoding */
} refdec_sequence_limits;
REFDEC_C_EXPORT void refdec_sequence_limits_init(refdec_sequence_limits* limits);

/** Adds a sequence (not while a step is prepared). `drafter` (NULL: plain decoding) stays the
 *  caller's and must outlive the sequence; it follows one sequence at a time, refuses other calls
 *  meanwhile, and is free again as soon as the sequence has left (the driver finished it); one
 *  following a sequence by hand is refused (finish or reset it first).
 *  `limits` NULL takes the defaults. Writes the sequence's id to `*id`. */
REFDEC_C_EXPORT refdec_status refdec_driver_add(refdec_driver* driver, const refdec_token* prompt, size_t prompt_size,
                                                const refdec_token_span* references, size_t num_references,
                                                const refdec_sequence_limits* limits, refdec_drafter* drafter, int64_t* id);
/** Ends sequence `id` now (not while a step is prepared); writes the slot the engine drops to
 *  `*slot`, or -1 for a sequence that has left. */
REFDEC_C_EXPORT refdec_status refdec_driver_cancel(refdec_driver* driver, int64_t id, int64_t* slot);
/** Prepares the next step (prefill or drafting per sequence); `*has_step` 0 when no sequence is active. */
REFDEC_C_EXPORT refdec_status refdec_driver_prepare(refdec_driver* driver, int* has_step);

/** A step plan, packed and ragged: sequence b (slot b; ids[b] its id) owns rows indptr[b] ..
 *  indptr[b + 1] - 1, its tree rows first (num_nodes[b], root first), then its auxiliary rows.
 *  Row i of sequence b attends to the sequence's lengths[b] cached entries and to its step rows j
 *  with bit (j % 64) of mask[mask_indptr[b] + i * ceil(rows(b) / 64) + j / 64] set. */
typedef struct refdec_step_plan {
  int32_t batch;
  int32_t rows;
  const int32_t* indptr;       /**< [batch + 1] */
  const int32_t* num_nodes;    /**< [batch] */
  const int64_t* lengths;      /**< [batch] cached entries before the step */
  const refdec_token* tokens;  /**< [rows] */
  const int64_t* positions;    /**< [rows] rotary positions */
  const int32_t* first_child;  /**< [rows] local index, -1 none */
  const int32_t* next_sibling; /**< [rows] local index, -1 none */
  const int64_t* mask_indptr;  /**< [batch + 1] first mask word of each sequence */
  const uint64_t* mask;
  const uint8_t* prefill; /**< [batch] nonzero: the sequence prefills its prompt this step (its rows' outputs are not read) */
  const int64_t* ids;     /**< [batch] the id refdec_driver_add gave each slot's sequence */
} refdec_step_plan;
/** The prepared step's plan: between a prepare that set has_step and the step's completion. */
REFDEC_C_EXPORT refdec_status refdec_driver_plan(const refdec_driver* driver, refdec_step_plan* out);

/** Completes the step by greedy acceptance: `choices[r]` is the target's greedy token at plan row
 *  r (num_rows == plan.rows). The rows of prefilling sequences are never read: an engine that
 *  computes no logits there may leave anything (-1) in them. */
REFDEC_C_EXPORT refdec_status refdec_driver_complete_greedy(refdec_driver* driver, const refdec_token* choices, size_t num_rows);
/** The target's token at plan row `row` of slot `slot` after `depth` accepted drafts; depth -1 asks
 *  for an auxiliary row's greedy choice. Each row is asked at most once; prefilling slots never. */
typedef refdec_token (*refdec_row_chooser)(void* user, int32_t slot, int32_t row, int32_t depth);
/** Completes the step by walking each tree with `choose` (sampled acceptance: draw at the row asked). */
REFDEC_C_EXPORT refdec_status refdec_driver_complete_walk(refdec_driver* driver, refdec_row_chooser choose, void* user);

/** What each cache keeps from the completed step: slot b moves its step rows rows[indptr[b]] ..
 *  rows[indptr[b + 1] - 1] (local, increasing) to its entries lengths_before[b],
 *  lengths_before[b] + 1, ...; lengths[b] entries are cached afterwards. Other step rows are
 *  dropped. Valid until the next prepare. */
typedef struct refdec_keep_plan {
  int32_t batch;
  const int32_t* indptr;         /**< [batch + 1] */
  const int32_t* rows;           /**< kept local rows */
  const int64_t* lengths;        /**< [batch] cached entries after the step */
  const int64_t* lengths_before; /**< [batch] cached entries before it (the plan's lengths) */
} refdec_keep_plan;
REFDEC_C_EXPORT refdec_status refdec_driver_keep(const refdec_driver* driver, refdec_keep_plan* out);
/** The slots that left in the last step, highest first: after applying the keep plan, drop them
 *  in this order (each drop moves the later slots down by one). Valid until the next prepare. */
REFDEC_C_EXPORT refdec_status refdec_driver_left(const refdec_driver* driver, const size_t** slots, size_t* count);

typedef enum refdec_finish_reason {
  REFDEC_RUNNING = 0,        /**< the sequence goes on */
  REFDEC_FINISH_STOP = 1,    /**< it produced a stop token (not emitted) */
  REFDEC_FINISH_LENGTH = 2,  /**< it reached max_new_tokens */
  REFDEC_FINISH_CONTEXT = 3, /**< prompt + output filled max_context */
  REFDEC_FINISH_CANCELLED = 4,
  REFDEC_FINISH_DRAFTER_ERROR = 5 /**< its drafter failed after the step (refdec_driver_update_error() says how); it left */
} refdec_finish_reason;
typedef struct refdec_update {
  int64_t id;
  const refdec_token* tokens; /**< appended by this step */
  size_t num_tokens;
  refdec_finish_reason finished;
} refdec_update;
/** Updates of the last prepare() and complete: sequences that left between steps, then one per
 *  verified sequence. A step that only prefills a sequence appends nothing and reports nothing
 *  for it. Valid until the next prepare. */
REFDEC_C_EXPORT size_t refdec_driver_num_updates(const refdec_driver* driver);
REFDEC_C_EXPORT refdec_status refdec_driver_update(const refdec_driver* driver, size_t index, refdec_update* out);
/** What update `index`'s drafter threw (its sequence left all the same, the others unaffected):
 *  a message valid until the next prepare, or NULL when it threw nothing or the index is bad. */
REFDEC_C_EXPORT const char* refdec_driver_update_error(const refdec_driver* driver, size_t index);
/** Nonzero when no sequence is active or waiting to be reported (1 for NULL). */
REFDEC_C_EXPORT int refdec_driver_idle(const refdec_driver* driver);
/** Active sequences (the engine's caches). */
REFDEC_C_EXPORT size_t refdec_driver_active(const refdec_driver* driver);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* REFDEC_REFDEC_H_ */
