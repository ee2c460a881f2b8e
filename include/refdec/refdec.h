/* Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0 */
/* refdec's C API: drafters, the step protocol of a batch (StepDriver) and the exports other engines
 * verify, for engines that cannot include C++20 headers (C, C++17, other languages through a C
 * FFI). Link the shim library refdec::c (librefdec_c); this header is C99 and includable from
 * C++17. docs/engine.md, "The C API", walks through a decoding loop.
 *
 * Conventions:
 * - Every function that can fail returns a refdec_status; REFDEC_OK is 0. On failure
 *   refdec_last_error() holds the message (per thread, until the thread's next failing call) and
 *   the out-parameters are unchanged.
 * - Handles are opaque and created by *_create functions; each has one *_destroy (NULL is ignored).
 *   A handle is used by one thread at a time (a refdec_reference_index by any number at once);
 *   different handles may be used from different threads.
 * - Arrays a function returns (plan, keep plan, updates, trees) point into the handle's memory and
 *   stay valid until the next call that changes that handle; copy what must outlive it.
 * - Token ids are refdec_token (int32_t); counts are size_t or int64_t as named. */
#ifndef REFDEC_REFDEC_H_
#define REFDEC_REFDEC_H_

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

/** The version of this API; refdec_c_api_version() says which one the library implements. */
#define REFDEC_C_API_VERSION 1

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
 * Drafters. One per sequence at a time; reusable for the next sequence after it has left (its
 * learned state, e.g. a mixture's tables, carries over).
 * ------------------------------------------------------------------------------------------- */

typedef struct refdec_drafter refdec_drafter;

/** LLMA span copy from the references (and the sequence itself with self_reference). */
typedef struct refdec_llma_options {
  size_t n;           /**< shortest suffix match that may trigger a copy */
  size_t k;           /**< tokens copied per span */
  size_t m;           /**< spans proposed as a tree */
  int self_reference; /**< nonzero: also search the sequence itself */
} refdec_llma_options;
/** Prompt lookup: the sequence's last n-gram found earlier in it. References are ignored. */
typedef struct refdec_prompt_lookup_options {
  size_t max_ngram;   /**< longest suffix looked up */
  size_t min_ngram;   /**< shortest one */
  size_t k;           /**< tokens copied after the match */
  int full_span_only; /**< nonzero: skip a match whose k tokens would run past the sequence's end */
} refdec_prompt_lookup_options;
/** The n-gram trie over the references and the sequence. */
typedef struct refdec_ngram_trie_options {
  size_t n;          /**< window length in tokens (the trie's depth) */
  size_t prefix_len; /**< longest suffix matched */
  size_t num_draft;  /**< most draft nodes per proposal */
  int grow;          /**< nonzero: also index every accepted token */
} refdec_ngram_trie_options;

/** Fill `options` with the library's defaults. */
REFDEC_C_EXPORT void refdec_llma_options_init(refdec_llma_options* options);
REFDEC_C_EXPORT void refdec_prompt_lookup_options_init(refdec_prompt_lookup_options* options);
REFDEC_C_EXPORT void refdec_ngram_trie_options_init(refdec_ngram_trie_options* options);

/** Create a drafter; `options` NULL takes the defaults. */
REFDEC_C_EXPORT refdec_status refdec_llma_create(const refdec_llma_options* options, refdec_drafter** out);
REFDEC_C_EXPORT refdec_status refdec_prompt_lookup_create(const refdec_prompt_lookup_options* options, refdec_drafter** out);
REFDEC_C_EXPORT refdec_status refdec_ngram_trie_create(const refdec_ngram_trie_options* options, refdec_drafter** out);
/* LLMA's index of a document set (refdec::LlmaIndex), built once and shared by the LLMA drafters of
 * every sequence that draws from those documents: immutable, any number of threads may draft from
 * it at once. */
typedef struct refdec_llma_index refdec_llma_index;
/** Indexes `num_documents` documents (read during the call only; token ids >= 0). */
REFDEC_C_EXPORT refdec_status refdec_llma_index_create(const refdec_token_span* documents, size_t num_documents, refdec_llma_index** out);
/** Tokens indexed, over all documents. */
REFDEC_C_EXPORT size_t refdec_llma_index_tokens(const refdec_llma_index* index);
/** Releases the caller's handle; the index lives on while drafters use it. */
REFDEC_C_EXPORT void refdec_llma_index_destroy(refdec_llma_index* index);
/** An LLMA drafter over a shared index (`options` NULL: the defaults): the references given to
 *  refdec_drafter_begin or refdec_driver_add are not read, the index holds the drafter's references. */
REFDEC_C_EXPORT refdec_status refdec_llma_create_shared(const refdec_llma_index* index, const refdec_llma_options* options,
                                                        refdec_drafter** out);

/* The shared index of documents and earlier outputs (refdec::ReferenceIndex): one per server,
 * thread-safe (any number of threads may add to it and draft from it at once). */
typedef struct refdec_reference_index refdec_reference_index;
typedef struct refdec_reference_index_options {
  size_t max_tokens;    /**< tokens kept at most; past it the oldest documents are dropped */
  size_t depth;         /**< suffixes are ordered by this many tokens (2 to 255): the longest match and its continuations */
  int background_merge; /**< nonzero: merge on a thread of the index's own instead of in add(), which waits while that thread is 64 segments
                           behind */
} refdec_reference_index_options;
REFDEC_C_EXPORT void refdec_reference_index_options_init(refdec_reference_index_options* options);
REFDEC_C_EXPORT refdec_status refdec_reference_index_create(const refdec_reference_index_options* options, refdec_reference_index** out);
/** Adds a document (e.g. a corpus text, a cached answer); index drafters add their sequences' outputs themselves. */
REFDEC_C_EXPORT refdec_status refdec_reference_index_add(refdec_reference_index* index, const refdec_token* tokens, size_t num_tokens);
/** Tokens indexed now. */
REFDEC_C_EXPORT size_t refdec_reference_index_tokens(const refdec_reference_index* index);
/** Releases the caller's handle; the index lives on while index drafters use it. */
REFDEC_C_EXPORT void refdec_reference_index_destroy(refdec_reference_index* index);

/** A drafter over a shared index: the sequence's longest suffix found there (and, with request, in
 *  its own references and context), then its continuations best first by how many occurrences they
 *  continue. Adds its sequence's output to the index when the sequence ends. */
typedef struct refdec_index_drafter_options {
  size_t max_match;    /**< longest suffix of the sequence searched */
  size_t continuation; /**< deepest draft node, in tokens after the match */
  int request;         /**< nonzero: also search the sequence's references and its own context */
  int add_output;      /**< nonzero: the sequence's output joins the index when it ends */
  int shared;          /**< nonzero: search the index; 0: the sequence's own text only (with request), nothing added:
                            beside one with request 0 in a mixture, each is a source with estimates of its own */
} refdec_index_drafter_options;
REFDEC_C_EXPORT void refdec_index_drafter_options_init(refdec_index_drafter_options* options);
REFDEC_C_EXPORT refdec_status refdec_index_drafter_create(refdec_reference_index* index, const refdec_index_drafter_options* options,
                                                          refdec_drafter** out);

/** A mixture of `count` drafters with learned per-source scores and an adaptive budget. It takes
 *  the sources over: on success each sources[i] is destroyed into the mixture and set to NULL; a
 *  call refused by its checks leaves them as they were (out of memory may leave them empty:
 *  destroy them then). A source may not be in use by a driver. */
REFDEC_C_EXPORT refdec_status refdec_mixture_create(refdec_drafter** sources, size_t count, refdec_drafter** out);
REFDEC_C_EXPORT void refdec_drafter_destroy(refdec_drafter* drafter);
/** The drafter's name (e.g. "llma"), valid while the drafter lives. */
REFDEC_C_EXPORT const char* refdec_drafter_name(const refdec_drafter* drafter);

/* Drafting one sequence by hand (an engine that runs its own protocol). A refdec_driver does all
 * of this for a batch. */

/** Starts a sequence: its tokens so far and the references it may copy from (read during the call
 *  only: the engine's buffers, not copies; what the drafter keeps it copies or indexes). */
REFDEC_C_EXPORT refdec_status refdec_drafter_begin(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens,
                                                   const refdec_token_span* references, size_t num_references);
/** Tells the drafter the tokens appended to the sequence since the last call (accepted drafts and the bonus token).
 *  REFDEC_ERROR_ARGUMENT before refdec_drafter_begin or for a negative id (as begin refuses one). */
REFDEC_C_EXPORT refdec_status refdec_drafter_accept(refdec_drafter* drafter, const refdec_token* tokens, size_t num_tokens);

/** A draft tree, root first, parents before children. Node 0 is the root (the sequence's last
 *  token, not a draft). Children are linked from first_child through next_sibling, -1 ending a list;
 *  siblings come best first. score is the drafter's weight of the path to a node (root: 0). */
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
 *  ones; token ids checked against [0, vocab_size). The tree stays valid until the drafter's next call.
 *  REFDEC_ERROR_ARGUMENT before refdec_drafter_begin, or for a root other than the last token that
 *  begin and accept gave (a sequence begun empty takes any root). */
REFDEC_C_EXPORT refdec_status refdec_drafter_draft(refdec_drafter* drafter, refdec_token root, size_t budget, int64_t vocab_size,
                                                   refdec_tree* out);

/** The best chain of `tree` (from the root, the best child each time; the root excluded), for an
 *  engine that verifies chains only (llama.cpp's speculative decoding). Writes at most `capacity`
 *  tokens to `out` and their count to `*count`. */
REFDEC_C_EXPORT refdec_status refdec_tree_best_chain(const refdec_tree* tree, refdec_token* out, size_t capacity, size_t* count);
/** `tree` in SGLang's fixed-size layout of `num_draft` slots (its draft_tokens, retrive_next_token
 *  and retrive_next_sibling rows of one request): slot 0 the root, slots 1.. the draft nodes in
 *  tree order, then padding slots that no link reaches (token `pad_token`, links -1). Fails when the
 *  tree has more than num_draft nodes. */
REFDEC_C_EXPORT refdec_status refdec_tree_to_sglang(const refdec_tree* tree, int32_t num_draft, refdec_token pad_token,
                                                    refdec_token* draft_tokens, int64_t* next_token, int64_t* next_sibling);

/** The target's token at `node` of a tree after `depth` accepted drafts (-1 where the C API asks
 *  for an auxiliary row's greedy choice); `user` is the caller's. A negative return never matches
 *  a draft. Each node is asked at most once, root to leaf, so a chooser may sample lazily. */
typedef refdec_token (*refdec_tree_chooser)(void* user, int32_t node, int32_t depth);
/** Walks `tree` with `choose`: writes the accepted draft nodes (room for num_nodes - 1) to `path`,
 *  their count to `*num_accepted`, and the target's token after them (the bonus token) to `*bonus`. */
REFDEC_C_EXPORT refdec_status refdec_tree_walk(const refdec_tree* tree, refdec_tree_chooser choose, void* user, int32_t* path,
                                               int32_t* num_accepted, refdec_token* bonus);

/* ---------------------------------------------------------------------------------------------
 * The step driver: the protocol of speculative decoding for a batch whose sequences join and
 * leave between steps. The engine keeps one cache per active sequence in slot order. A loop:
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
  int64_t vocab_size;       /**< token ids lie in [0, vocab_size); > 0 */
  int64_t max_context;      /**< prompt + output per sequence at most; > 0 */
  int64_t prefill_chunk;    /**< prompt tokens a step prefills per sequence at most; 0: the whole prompt at once */
  int64_t drafting_threads; /**< threads that draft a step's sequences (the caller's among them); >= 1 */
} refdec_driver_options;
REFDEC_C_EXPORT void refdec_driver_options_init(refdec_driver_options* options);
REFDEC_C_EXPORT refdec_status refdec_driver_create(const refdec_driver_options* options, refdec_driver** out);
REFDEC_C_EXPORT void refdec_driver_destroy(refdec_driver* driver);

typedef struct refdec_sequence_limits {
  int64_t max_new_tokens;          /**< tokens to generate at most (0: the sequence leaves at once) */
  const refdec_token* stop_tokens; /**< generation stops before any of these (not emitted) */
  size_t num_stop_tokens;
  int64_t budget; /**< draft nodes verified per step; 0 is plain decoding */
} refdec_sequence_limits;
REFDEC_C_EXPORT void refdec_sequence_limits_init(refdec_sequence_limits* limits);

/** Adds a sequence (not while a step is prepared). `drafter` (NULL: plain decoding) stays the
 *  caller's and must outlive the sequence; it follows one sequence at a time and is free again as
 *  soon as the sequence has left (finished, cancelled). Prompt and references are read during the
 *  call only (the prompt is copied, the references go to the drafter's begin). Writes
 *  the sequence's id to `*id`. */
REFDEC_C_EXPORT refdec_status refdec_driver_add(refdec_driver* driver, const refdec_token* prompt, size_t prompt_size,
                                                const refdec_token_span* references, size_t num_references,
                                                const refdec_sequence_limits* limits, refdec_drafter* drafter, int64_t* id);
/** Ends sequence `id` now (not while a step is prepared); writes the slot the engine drops to
 *  `*slot`, or -1 for a sequence that has left. */
REFDEC_C_EXPORT refdec_status refdec_driver_cancel(refdec_driver* driver, int64_t id, int64_t* slot);
/** Prepares the next step (prefill or drafting per sequence); `*has_step` 0 when no sequence is active. */
REFDEC_C_EXPORT refdec_status refdec_driver_prepare(refdec_driver* driver, int* has_step);

/** A step plan, packed and ragged: sequence b owns rows indptr[b] .. indptr[b + 1] - 1, its tree
 *  rows first (num_nodes[b], root first), then its auxiliary rows. Row i of sequence b attends to
 *  the sequence's lengths[b] cached entries and to its step rows j with bit (j % 64) of
 *  mask[mask_indptr[b] + i * ceil(rows(b) / 64) + j / 64] set. */
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
  const uint8_t* prefill; /**< [batch] nonzero: the sequence prefills its prompt this step (its outputs are not read) */
} refdec_step_plan;
/** The prepared step's plan: between a prepare that set has_step and the step's completion. */
REFDEC_C_EXPORT refdec_status refdec_driver_plan(const refdec_driver* driver, refdec_step_plan* out);

/** Completes the step by greedy acceptance: `choices[r]` is the target's greedy token at plan row r. */
REFDEC_C_EXPORT refdec_status refdec_driver_complete_greedy(refdec_driver* driver, const refdec_token* choices, size_t num_rows);
/** The target's token at plan row `row` of slot `slot` after `depth` accepted drafts; depth -1 asks
 *  for an auxiliary row's greedy choice. Each row is asked at most once; prefilling slots never. */
typedef refdec_token (*refdec_row_chooser)(void* user, int32_t slot, int32_t row, int32_t depth);
/** Completes the step by walking each tree with `choose` (sampled acceptance: draw at the row asked). */
REFDEC_C_EXPORT refdec_status refdec_driver_complete_walk(refdec_driver* driver, refdec_row_chooser choose, void* user);

/** What each cache keeps: slot b moves its step rows rows[indptr[b]] .. rows[indptr[b + 1] - 1]
 *  (local, increasing) to its entries L, L + 1, ..., where L = lengths[b] - (indptr[b + 1] -
 *  indptr[b]) is the length it had cached before the step (the plan's lengths[b]: the plan's
 *  arrays are not valid after the complete call, so compute L from this plan, or copy the plan's
 *  lengths first); lengths[b] entries are cached afterwards. Other step rows are dropped. */
typedef struct refdec_keep_plan {
  int32_t batch;
  const int32_t* indptr;  /**< [batch + 1] */
  const int32_t* rows;    /**< kept local rows */
  const int64_t* lengths; /**< [batch] cached entries after the step */
} refdec_keep_plan;
REFDEC_C_EXPORT refdec_status refdec_driver_keep(const refdec_driver* driver, refdec_keep_plan* out);
/** The slots that left in the last step, highest first: after applying the keep plan, drop them
 *  in this order (each drop moves the later slots down by one). */
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
/** Updates of the last prepare() and complete: sequences that left between steps, then one per verified sequence. */
REFDEC_C_EXPORT size_t refdec_driver_num_updates(const refdec_driver* driver);
REFDEC_C_EXPORT refdec_status refdec_driver_update(const refdec_driver* driver, size_t index, refdec_update* out);
/** What update `index`'s drafter threw (its sequence left all the same, the others unaffected):
 *  a message valid until the next prepare, or NULL when it threw nothing or the index is bad. */
REFDEC_C_EXPORT const char* refdec_driver_update_error(const refdec_driver* driver, size_t index);
/** Nonzero when no sequence is active or waiting to be reported. */
REFDEC_C_EXPORT int refdec_driver_idle(const refdec_driver* driver);
/** Active sequences (the engine's caches). */
REFDEC_C_EXPORT size_t refdec_driver_active(const refdec_driver* driver);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* REFDEC_REFDEC_H_ */
