/* Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0 */
/* The C API from C: the drafting calls and the exports on a hand-made reference, the error codes,
 * then stories260K decoded through refdec_driver (LLMA; a mixture walked by a chooser; LLMA with a
 * shared index of earlier outputs, twice, the second round drafting the first's answers) by a
 * plain C Llama forward pass, the outputs compared token for token with plain greedy decoding by
 * the same forward pass without refdec. The forward pass reads, for every row, the cached entries
 * then its ancestors in the step in entry order, as plain decoding reads its context, so both
 * compute bit-identical logits in fp32.
 *
 *   refdec_c_api_test [MODEL]      (default: $REFDEC_DATA_DIR/models/stories260K/stories260K.bin,
 *                                   exit 77 "skipped" when it is missing) */
#include "refdec/refdec.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef REFDEC_DEFAULT_DATA_DIR
#define REFDEC_DEFAULT_DATA_DIR "../shared"
#endif

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)
#define CHECK_OK(call)                                                                                         \
  do {                                                                                                         \
    refdec_status s_ = (call);                                                                                 \
    if (s_ != REFDEC_OK) {                                                                                     \
      fprintf(stderr, "%s:%d: %s failed (%d): %s\n", __FILE__, __LINE__, #call, (int)s_, refdec_last_error()); \
      exit(1);                                                                                                 \
    }                                                                                                          \
  } while (0)

/* ---- the API without a model ---- */

static refdec_token chooser_from_array(void* user, int32_t node, int32_t depth) {
  (void)depth;
  return ((const refdec_token*)user)[node];
}

static void test_drafting_and_exports(void) {
  /* LLMA copies the reference's continuation of the sequence's last token. */
  const refdec_token reference[] = {5, 6, 7, 8, 9, 10, 11};
  const refdec_token_span refs[] = {{reference, 7}};
  const refdec_token prompt[] = {1, 3, 5};
  refdec_llma_options o;
  refdec_drafter* d = NULL;
  refdec_tree tree;
  refdec_token chain[16];
  size_t n = 0;
  refdec_token tokens[8];
  int64_t next_token[8], next_sibling[8];
  int32_t path[16], accepted = -1;
  refdec_token bonus = -1;
  refdec_token target[16];
  int32_t i;

  refdec_llma_options_init(&o);
  CHECK(o.continuation == 16 && o.min_match == 1);
  o.continuation = 4;
  CHECK_OK(refdec_drafter_create_llma(&o, &d));
  CHECK(strcmp(refdec_drafter_name(d), "llma") == 0);
  CHECK_OK(refdec_drafter_begin(d, prompt, 3, refs, 1));
  CHECK_OK(refdec_drafter_draft(d, 5, 6, 32, &tree));
  CHECK(tree.num_nodes == 5 && tree.tokens[0] == 5 && tree.parent[0] == -1);
  CHECK_OK(refdec_tree_best_chain(&tree, chain, 16, &n));
  CHECK(n == 4 && chain[0] == 6 && chain[1] == 7 && chain[2] == 8 && chain[3] == 9);
  CHECK_OK(refdec_tree_best_chain(&tree, chain, 2, &n));
  CHECK(n == 2);

  /* SGLang's layout: the chain as links, padding unreachable. */
  CHECK_OK(refdec_tree_to_sglang(&tree, 8, 0, tokens, next_token, next_sibling));
  CHECK(tokens[0] == 5 && tokens[1] == 6 && tokens[4] == 9 && tokens[5] == 0 && tokens[7] == 0);
  CHECK(next_token[0] == 1 && next_token[3] == 4 && next_token[4] == -1 && next_token[6] == -1);
  for (i = 0; i < 8; ++i) CHECK(next_sibling[i] == -1);
  CHECK(refdec_tree_to_sglang(&tree, 4, 0, tokens, next_token, next_sibling) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "does not fit 4 slots") != NULL);

  /* The walk: the target agrees on two drafts, then says 42 (the bonus token). */
  for (i = 0; i < tree.num_nodes; ++i) target[i] = i + 1 < tree.num_nodes ? tree.tokens[i + 1] : 0;
  target[2] = 42;
  CHECK_OK(refdec_tree_walk(&tree, chooser_from_array, target, path, &accepted, &bonus));
  CHECK(accepted == 2 && path[0] == 1 && path[1] == 2 && bonus == 42);
  {
    const refdec_token appended[] = {6, 7, 42};
    CHECK_OK(refdec_drafter_accept(d, appended, 3));
  }

  /* A mixture takes its sources over. */
  {
    refdec_drafter* sources[2] = {NULL, NULL};
    refdec_drafter* mixture = NULL;
    CHECK_OK(refdec_drafter_create_prompt_lookup(NULL, &sources[0]));
    CHECK_OK(refdec_drafter_create_ngram_trie(NULL, &sources[1]));
    CHECK(refdec_drafter_create_mixture(sources, 0, NULL, &mixture) == REFDEC_ERROR_ARGUMENT && mixture == NULL);
    CHECK(sources[0] != NULL && sources[1] != NULL); /* refused: still the caller's */
    CHECK_OK(refdec_drafter_create_mixture(sources, 2, NULL, &mixture));
    CHECK(sources[0] == NULL && sources[1] == NULL && mixture != NULL);
    CHECK_OK(refdec_drafter_begin(mixture, reference, 7, NULL, 0));
    CHECK_OK(refdec_drafter_draft(mixture, 11, 8, 32, &tree));
    CHECK(strstr(refdec_drafter_name(mixture), "mixture") != NULL && tree.tokens[0] == 11);
    refdec_drafter_destroy(mixture);
  }
  /* The shared index drafts a document's continuation; its drafters keep it alive. */
  {
    const refdec_token document[] = {20, 21, 22, 23, 24, 25};
    const refdec_token start[] = {1, 20, 21};
    refdec_reference_index* index = NULL;
    refdec_drafter* drafter = NULL;
    refdec_index_drafter_options io;
    CHECK_OK(refdec_reference_index_create(NULL, &index));
    CHECK_OK(refdec_reference_index_add(index, document, 6));
    CHECK(refdec_reference_index_tokens(index) == 6);
    CHECK(refdec_drafter_create_index(NULL, NULL, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    CHECK(strstr(refdec_last_error(), "index is NULL") != NULL);
    refdec_index_drafter_options_init(&io);
    CHECK(io.max_match == 16 && io.continuation == 64 && io.request == 1 && io.add_output == 1 && io.shared == 1);
    io.max_match = 0;
    CHECK(refdec_drafter_create_index(index, &io, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    refdec_index_drafter_options_init(&io);
    io.shared = 0, io.request = 0;
    CHECK(refdec_drafter_create_index(index, &io, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    CHECK(strstr(refdec_last_error(), "nothing to draft from") != NULL);
    io.request = 1; /* the sequence's own text only: not the index's document */
    CHECK_OK(refdec_drafter_create_index(index, &io, &drafter));
    CHECK(strcmp(refdec_drafter_name(drafter), "index-request") == 0);
    CHECK_OK(refdec_drafter_begin(drafter, start, 3, NULL, 0));
    CHECK_OK(refdec_drafter_draft(drafter, 21, 8, 32, &tree));
    CHECK_OK(refdec_tree_best_chain(&tree, chain, 16, &n));
    CHECK(n == 0);
    refdec_drafter_destroy(drafter);
    CHECK(refdec_reference_index_tokens(index) == 6);
    CHECK_OK(refdec_drafter_create_index(index, NULL, &drafter));
    refdec_reference_index_destroy(index);
    CHECK_OK(refdec_drafter_begin(drafter, start, 3, NULL, 0));
    CHECK_OK(refdec_drafter_draft(drafter, 21, 8, 32, &tree));
    CHECK_OK(refdec_tree_best_chain(&tree, chain, 16, &n));
    CHECK(n == 4 && chain[0] == 22 && chain[3] == 25);
    refdec_drafter_destroy(drafter);
  }
  refdec_drafter_destroy(d);
  refdec_drafter_destroy(NULL);
}

static void test_errors(void) {
  refdec_driver_options o;
  refdec_driver* driver = NULL;
  refdec_sequence_limits limits;
  int64_t id = -1;
  const refdec_token prompt[] = {1, 2};
  const refdec_token bad[] = {1, 99};
  refdec_token choices[4] = {0, 0, 0, 0};
  int has_step = 0;

  CHECK(refdec_c_api_version() == REFDEC_C_API_VERSION);
  CHECK(refdec_drafter_create_llma(NULL, NULL) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "refdec_drafter_create_llma: out is NULL") != NULL);
  { /* Drafting by hand checks the protocol: a sequence begun, non-negative ids, the root its last token. */
    refdec_drafter* d = NULL;
    const refdec_token negative[] = {1, -3};
    const refdec_token seq[] = {1, 3, 5};
    refdec_tree tree;
    CHECK_OK(refdec_drafter_create_prompt_lookup(NULL, &d));
    CHECK(refdec_drafter_draft(d, 5, 4, 32, &tree) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "refdec_drafter_draft: no sequence begun (refdec_drafter_begin first)") != NULL);
    CHECK(refdec_drafter_accept(d, seq, 1) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "refdec_drafter_accept: no sequence begun") != NULL);
    CHECK(refdec_drafter_begin(d, negative, 2, NULL, 0) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "token 1 has the negative id -3") != NULL);
    CHECK_OK(refdec_drafter_begin(d, seq, 3, NULL, 0));
    CHECK(refdec_drafter_draft(d, 4, 4, 32, &tree) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "the root token 4 is not the sequence's last token 5") != NULL);
    CHECK(refdec_drafter_accept(d, negative + 1, 1) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "negative id -3") != NULL);
    CHECK_OK(refdec_drafter_accept(d, seq + 1, 1));
    CHECK_OK(refdec_drafter_draft(d, 3, 4, 32, &tree)); /* the root is now the token accepted last */
    refdec_drafter_destroy(d);
  }
  {
    refdec_drafter* d = NULL;
    refdec_llma_index* li = NULL;
    const refdec_token negative[2] = {1, -3};
    const refdec_token_span doc = {negative, 2};
    CHECK(refdec_drafter_create_llma_shared(NULL, NULL, &d) == REFDEC_ERROR_ARGUMENT && d == NULL);
    CHECK(strstr(refdec_last_error(), "refdec_drafter_create_llma_shared: index is NULL") != NULL);
    CHECK(refdec_llma_index_create(&doc, 1, &li) == REFDEC_ERROR_ARGUMENT && li == NULL);
    CHECK(strstr(refdec_last_error(), "non-negative") != NULL);
    CHECK(refdec_llma_index_create(NULL, 1, &li) == REFDEC_ERROR_ARGUMENT && li == NULL);
  }
  refdec_driver_options_init(&o);
  CHECK(o.prefill_chunk == 512 && o.drafting_threads == 1);
  CHECK(refdec_driver_create(&o, &driver) == REFDEC_ERROR_ARGUMENT && driver == NULL);
  CHECK(strstr(refdec_last_error(), "vocab_size must be positive") != NULL);
  o.vocab_size = 16;
  o.max_context = 32;
  CHECK_OK(refdec_driver_create(&o, &driver));
  refdec_sequence_limits_init(&limits);
  CHECK(limits.max_new_tokens == 256 && limits.budget == 16);
  CHECK(refdec_driver_add(driver, bad, 2, NULL, 0, &limits, NULL, &id) == REFDEC_ERROR_ARGUMENT && id == -1);
  CHECK(strstr(refdec_last_error(), "99") != NULL);
  CHECK_OK(refdec_driver_add(driver, prompt, 2, NULL, 0, &limits, NULL, &id));
  CHECK(id == 0 && refdec_driver_active(driver) == 1 && !refdec_driver_idle(driver));
  CHECK_OK(refdec_driver_prepare(driver, &has_step));
  CHECK(has_step == 1);
  CHECK(refdec_driver_complete_greedy(driver, choices, 4) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "4 choices for a plan of 1 rows") != NULL); /* the prompt but its last token */
  CHECK(refdec_driver_complete_walk(driver, NULL, NULL) == REFDEC_ERROR_ARGUMENT);
  refdec_driver_destroy(driver);
}

/* Options: the defaults the header documents, struct_size refused unset or from a newer header. */
static void test_options(void) {
  refdec_llma_options lo;
  refdec_mixture_options mo;
  refdec_lookahead_options la;
  refdec_reference_index_options ro;
  refdec_sequence_limits limits;
  refdec_drafter* d = NULL;
  refdec_tree tree;
  const refdec_token seq[] = {1, 7, 8, 9, 3, 7};
  refdec_token chain[8];
  size_t n = 0;
  refdec_llma_options_init(&lo);
  CHECK(lo.struct_size == sizeof lo && lo.min_match == 1 && lo.continuation == 16 && lo.spans == 1 && lo.self_reference);
  refdec_mixture_options_init(&mo);
  CHECK(mo.struct_size == sizeof mo && mo.combine == REFDEC_MIXTURE_MAX && mo.source_budget == 64 && mo.match_context);
  refdec_lookahead_options_init(&la);
  CHECK(la.window == 15 && la.ngram == 5 && la.guesses == 15 && la.pool_from_output);
  la.window = (size_t)1 << 40; /* beyond the drafter's bound, however wide size_t is */
  CHECK(refdec_drafter_create_lookahead(&la, &d) == REFDEC_ERROR_ARGUMENT && d == NULL);
  CHECK(strstr(refdec_last_error(), "window (W) must be 0 to 256") != NULL);
  refdec_reference_index_options_init(&ro);
  CHECK(ro.depth == 64 && ro.max_bytes == 0 && !ro.background_merge);
  refdec_sequence_limits_init(&limits);
  CHECK(limits.struct_size == sizeof limits && limits.max_new_tokens == 256 && limits.budget == 16 && limits.num_stop_tokens == 0);
  /* The defaults draft with no references: the sequence itself. */
  CHECK_OK(refdec_drafter_create_llma(NULL, &d));
  CHECK_OK(refdec_drafter_begin(d, seq, 6, NULL, 0));
  CHECK_OK(refdec_drafter_draft(d, 7, 8, 16, &tree));
  CHECK_OK(refdec_tree_best_chain(&tree, chain, 8, &n));
  CHECK(n == 4 && chain[0] == 8 && chain[1] == 9 && chain[2] == 3 && chain[3] == 7); /* copied from where 7 came before */
  refdec_drafter_destroy(d);
  d = NULL;
  memset(&lo, 0, sizeof lo); /* never initialised */
  CHECK(refdec_drafter_create_llma(&lo, &d) == REFDEC_ERROR_ARGUMENT && d == NULL);
  CHECK(strstr(refdec_last_error(), "options.struct_size is 0 (fill it with its _init function first)") != NULL);
  refdec_llma_options_init(&lo);
  lo.struct_size = sizeof lo + 8;
  CHECK(refdec_drafter_create_llma(&lo, &d) == REFDEC_ERROR_ARGUMENT && d == NULL);
  CHECK(strstr(refdec_last_error(), "a header newer than the library") != NULL);
  /* A caller built with an older header, which knew the fields before self_reference: the rest keep their defaults. */
  refdec_llma_options_init(&lo);
  lo.continuation = 2, lo.self_reference = false;
  lo.struct_size = offsetof(refdec_llma_options, self_reference);
  CHECK_OK(refdec_drafter_create_llma(&lo, &d));
  CHECK_OK(refdec_drafter_begin(d, seq, 6, NULL, 0));
  CHECK_OK(refdec_drafter_draft(d, 7, 8, 16, &tree));
  CHECK(tree.num_nodes == 3); /* k = 2 read, self_reference left at its default */
  refdec_drafter_destroy(d);
  refdec_mixture_options_init(&mo);
  mo.combine = (refdec_mixture_combine)7;
  {
    refdec_drafter* sources[1] = {NULL};
    CHECK_OK(refdec_drafter_create_prompt_lookup(NULL, &sources[0]));
    CHECK(refdec_drafter_create_mixture(sources, 1, &mo, &d) == REFDEC_ERROR_ARGUMENT && sources[0] != NULL);
    CHECK(strstr(refdec_last_error(), "combine is 7") != NULL);
    refdec_drafter_destroy(sources[0]);
  }
}

/* By-hand sequences end and rewind: finish publishes (once), truncate rewinds, reset publishes nothing. */
static void test_end_and_rewind(void) {
  const refdec_token prompt[] = {1, 5, 6, 7};
  const refdec_token more[] = {8, 9, 5};
  refdec_reference_index* index = NULL;
  refdec_drafter* d = NULL;
  refdec_tree tree;
  CHECK_OK(refdec_reference_index_create(NULL, &index));
  CHECK_OK(refdec_drafter_create_index(index, NULL, &d));
  CHECK(refdec_drafter_finish(d) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "refdec_drafter_finish: no sequence begun") != NULL);
  CHECK(refdec_drafter_truncate(d, 0) == REFDEC_ERROR_ARGUMENT);
  CHECK_OK(refdec_drafter_begin(d, prompt, 4, NULL, 0));
  CHECK_OK(refdec_drafter_accept(d, more, 3));
  CHECK(refdec_drafter_length(d) == 7);
  CHECK(refdec_drafter_truncate(d, 8) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "cannot truncate a sequence of 7 tokens to 8") != NULL);
  CHECK_OK(refdec_drafter_truncate(d, 5)); /* 1 5 6 7 8 */
  CHECK(refdec_drafter_draft(d, 5, 4, 16, &tree) == REFDEC_ERROR_ARGUMENT); /* the root is now 8 */
  CHECK_OK(refdec_drafter_draft(d, 8, 4, 16, &tree));
  CHECK(refdec_reference_index_tokens(index) == 0); /* nothing published before finish */
  CHECK_OK(refdec_drafter_finish(d));
  CHECK(refdec_reference_index_tokens(index) == 1); /* the output as kept: 8 */
  CHECK(refdec_drafter_accept(d, more, 1) == REFDEC_ERROR_ARGUMENT); /* finished: begin again */
  CHECK_OK(refdec_drafter_begin(d, prompt, 4, NULL, 0));
  CHECK_OK(refdec_drafter_accept(d, more, 3));
  CHECK_OK(refdec_drafter_reset(d));
  CHECK(refdec_reference_index_tokens(index) == 1);
  CHECK_OK(refdec_drafter_begin(d, prompt, 4, NULL, 0));
  CHECK_OK(refdec_drafter_accept(d, more, 2));
  refdec_drafter_destroy(d); /* destroyed unfinished: nothing published */
  CHECK(refdec_reference_index_tokens(index) == 1);
  refdec_reference_index_destroy(index);
}

/* A tree as branches: positions by depth, each node's run of branch ids, the winner after a walk. */
static void test_branches(void) {
  /* 0 -> 1 -> 3, 0 -> 1 -> 4, 0 -> 2: leaves 3, 4, 2 in depth-first order. */
  const refdec_token tokens[5] = {10, 11, 12, 13, 14};
  const int32_t first_child[5] = {1, 3, -1, -1, -1}, next_sibling[5] = {-1, 2, -1, 4, -1};
  const refdec_tree tree = {5, tokens, NULL, NULL, first_child, next_sibling, NULL};
  int64_t positions[5];
  int32_t begin[5], end[5], branches = 0, winner = -1;
  const int32_t path[2] = {1, 4};
  CHECK_OK(refdec_tree_branches(&tree, 100, positions, begin, end, &branches));
  CHECK(branches == 3);
  CHECK(positions[0] == 100 && positions[1] == 101 && positions[2] == 101 && positions[3] == 102 && positions[4] == 102);
  CHECK(begin[0] == 0 && end[0] == 3 && begin[1] == 0 && end[1] == 2 && begin[3] == 0 && end[3] == 1);
  CHECK(begin[4] == 1 && end[4] == 2 && begin[2] == 2 && end[2] == 3);
  CHECK_OK(refdec_tree_winning_branch(&tree, begin, path, 2, &winner));
  CHECK(winner == 1);
  CHECK_OK(refdec_tree_winning_branch(&tree, begin, NULL, 0, &winner));
  CHECK(winner == 0);
  CHECK(refdec_tree_winning_branch(&tree, begin, path, 5, &winner) == REFDEC_ERROR_ARGUMENT);
  {
    const int32_t cycle[5] = {1, 0, -1, -1, -1};
    const refdec_tree bad = {5, tokens, NULL, NULL, cycle, next_sibling, NULL};
    CHECK(refdec_tree_branches(&bad, 0, positions, begin, end, &branches) == REFDEC_ERROR_ARGUMENT);
    CHECK(strstr(refdec_last_error(), "reached before") != NULL);
  }
}

/* Step costs and their tracker; a mixture sized by one. */
static void test_step_costs(void) {
  const size_t rows[3] = {1, 8, 32};
  const double seconds[3] = {0.010, 0.012, 0.030};
  refdec_step_cost* cost = NULL;
  refdec_step_cost* learned = NULL;
  refdec_step_cost_tracker* tracker = NULL;
  refdec_drafter* sources[1] = {NULL};
  refdec_drafter* mixture = NULL;
  CHECK_OK(refdec_step_cost_create_samples(rows, seconds, 3, &cost));
  CHECK(fabs(refdec_step_cost_seconds(cost, 8) - 0.012) < 1e-12 && fabs(refdec_step_cost_seconds(cost, 20) - 0.021) < 1e-12);
  CHECK(refdec_step_cost_create_samples(rows, seconds, 0, &learned) == REFDEC_ERROR_ARGUMENT && learned == NULL);
  CHECK(refdec_step_cost_create_affine(0.0, 1.0, &learned) == REFDEC_ERROR_ARGUMENT);
  CHECK_OK(refdec_step_cost_tracker_create(cost, &tracker));
  CHECK_OK(refdec_step_cost_tracker_observe(tracker, 8, 0.024, 1));
  CHECK(refdec_step_cost_tracker_observe(tracker, 8, -1.0, 1) == REFDEC_ERROR_ARGUMENT);
  CHECK_OK(refdec_step_cost_tracker_current(tracker, 1, &learned));
  CHECK(refdec_step_cost_seconds(learned, 8) > 0.012); /* slower than the prior said: learned */
  CHECK_OK(refdec_drafter_create_llma(NULL, &sources[0]));
  CHECK_OK(refdec_drafter_create_mixture(sources, 1, NULL, &mixture));
  CHECK_OK(refdec_drafter_set_step_cost(mixture, learned));
  CHECK_OK(refdec_drafter_set_step_cost(mixture, NULL));
  refdec_drafter_destroy(mixture);
  refdec_step_cost_destroy(learned);
  refdec_step_cost_tracker_destroy(tracker);
  refdec_step_cost_destroy(cost);
}

/* REST over a datastore built by CTest's fixture (REFDEC_C_TEST_DATASTORE: "5 6 7 8 9" and "5 6 4"). */
static void test_rest(void) {
  const char* path = getenv("REFDEC_C_TEST_DATASTORE");
  refdec_datastore* ds = NULL;
  refdec_drafter* d = NULL;
  refdec_rest_options ro;
  refdec_tree tree;
  refdec_token chain[8];
  size_t n = 0;
  const refdec_token seq[] = {1, 5, 6};
  CHECK(refdec_datastore_open("/nonexistent/refdec.ds", &ds) == REFDEC_ERROR_IO && ds == NULL);
  CHECK(refdec_drafter_create_rest(NULL, NULL, &d) == REFDEC_ERROR_ARGUMENT);
  if (path == NULL || *path == '\0') {
    printf("REST part skipped: no datastore (REFDEC_C_TEST_DATASTORE unset: built without refdec-datastore)\n");
    return;
  }
  CHECK_OK(refdec_datastore_open(path, &ds));
  CHECK(refdec_datastore_tokens(ds) > 0);
  refdec_rest_options_init(&ro);
  CHECK(ro.max_match == 16 && ro.continuation == 10 && ro.max_nodes == 64);
  CHECK_OK(refdec_drafter_create_rest(ds, &ro, &d));
  refdec_datastore_destroy(ds); /* the drafter keeps it open */
  CHECK_OK(refdec_drafter_begin(d, seq, 3, NULL, 0));
  CHECK_OK(refdec_drafter_draft(d, 6, 8, 16, &tree));
  CHECK_OK(refdec_tree_best_chain(&tree, chain, 8, &n));
  CHECK(n >= 1 && (chain[0] == 7 || chain[0] == 4));
  CHECK(tree.num_nodes == 5); /* 7 8 9 and 4 */
  refdec_drafter_destroy(d);
}

/* The order of calls and the drafters a driver borrows: a step completes once, nothing is added
 * or cancelled while one is prepared, a drafter is refused elsewhere while its sequence runs and
 * free again the moment it leaves (cancelled, or given no tokens). */
static void test_driver_lifecycle(void) {
  refdec_driver_options o;
  refdec_driver* driver = NULL;
  refdec_sequence_limits limits;
  refdec_drafter* llma = NULL;
  refdec_drafter* other = NULL;
  refdec_drafter* sources[1];
  refdec_drafter* mixture = NULL;
  refdec_step_plan plan;
  const refdec_token prompt[] = {1, 3, 4, 3};
  refdec_token choices[64];
  int64_t id = -1, second = -1, slot = -2;
  int has_step = 0, i;
  for (i = 0; i < 64; ++i) choices[i] = 3;
  refdec_driver_options_init(&o);
  o.vocab_size = 16, o.max_context = 64;
  CHECK_OK(refdec_driver_create(&o, &driver));
  refdec_sequence_limits_init(&limits);
  CHECK_OK(refdec_drafter_create_llma(NULL, &llma));
  CHECK_OK(refdec_drafter_create_llma(NULL, &other));
  CHECK(refdec_driver_plan(driver, &plan) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "no prepared step") != NULL);
  CHECK_OK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, llma, &id));
  /* In use: refused by another sequence, by a mixture and by drafting by hand. */
  CHECK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, llma, &second) == REFDEC_ERROR_ARGUMENT && second == -1);
  sources[0] = llma;
  CHECK(refdec_drafter_create_mixture(sources, 1, NULL, &mixture) == REFDEC_ERROR_ARGUMENT && sources[0] == llma && mixture == NULL);
  CHECK(refdec_drafter_begin(llma, prompt, 4, NULL, 0) == REFDEC_ERROR_ARGUMENT);
  /* A step completes once; nothing joins or leaves meanwhile. */
  CHECK_OK(refdec_driver_prepare(driver, &has_step));
  CHECK(has_step == 1);
  CHECK_OK(refdec_driver_plan(driver, &plan));
  CHECK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, other, &second) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "a step is prepared") != NULL);
  CHECK(refdec_driver_cancel(driver, id, &slot) == REFDEC_ERROR_ARGUMENT && slot == -2);
  CHECK_OK(refdec_driver_complete_greedy(driver, choices, (size_t)plan.rows));
  CHECK(refdec_driver_complete_greedy(driver, choices, (size_t)plan.rows) == REFDEC_ERROR_ARGUMENT);
  CHECK(refdec_driver_plan(driver, &plan) == REFDEC_ERROR_ARGUMENT);
  /* Cancelled: its slot, and the drafter is free at once. */
  CHECK_OK(refdec_driver_cancel(driver, id, &slot));
  CHECK(slot == 0 && refdec_driver_active(driver) == 0);
  CHECK_OK(refdec_drafter_begin(llma, prompt, 4, NULL, 0));
  CHECK_OK(refdec_driver_cancel(driver, id, &slot));
  CHECK(slot == -1);
  /* Given no tokens to generate: it leaves at once, and so does its hold on the drafter. */
  limits.max_new_tokens = 0;
  CHECK_OK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, other, &second));
  CHECK_OK(refdec_drafter_begin(other, prompt, 4, NULL, 0));
  CHECK_OK(refdec_driver_prepare(driver, &has_step));
  CHECK(has_step == 0 && refdec_driver_num_updates(driver) == 2); /* the cancelled one and the empty one */
  CHECK(refdec_driver_update_error(driver, 2) == NULL && refdec_driver_update_error(NULL, 0) == NULL); /* no such update */
  refdec_driver_destroy(driver);
  refdec_drafter_destroy(llma);
  refdec_drafter_destroy(other);
}

#include "llama2c.h"

enum { kBos = 1, kEos = 2, kMaxNew = 120, kSequences = 3 };
static const refdec_token kPrompts[kSequences][8] = {
    {kBos}, {kBos, 274, 287, 381, 261, 370, 400, 428}, {kBos, 291, 262, 379, 286, 270, 309}};
static const size_t kPromptSizes[kSequences] = {1, 8, 7};

/* Plain greedy decoding, one token per forward pass, no refdec: its own one-row plans. */
static size_t plain_decode(const Model* m, const refdec_token* prompt, size_t prompt_size, refdec_token* out) {
  Cache cache;
  float* logits = (float*)malloc(sizeof(float) * (size_t)m->vocab);
  const int32_t indptr[2] = {0, 1};
  const int64_t mask_indptr[2] = {0, 1};
  const uint64_t mask[1] = {1};
  refdec_token token = prompt[0];
  size_t n = 0, fed = 0;
  cache_init(m, &cache, m->seq_len);
  for (;;) {
    int64_t position = cache.length;
    refdec_step_plan p;
    memset(&p, 0, sizeof p);
    p.batch = 1, p.rows = 1, p.indptr = indptr, p.tokens = &token, p.positions = &position, p.mask_indptr = mask_indptr, p.mask = mask;
    forward(m, &cache, &p, logits);
    ++cache.length, ++fed;
    if (fed < prompt_size) {
      token = prompt[fed];
      continue;
    }
    token = argmax(logits, m->vocab);
    if (token == kBos || token == kEos) break;
    out[n++] = token;
    if (n >= kMaxNew || (int64_t)(prompt_size + n) >= m->seq_len) break;
  }
  cache_free(&cache);
  free(logits);
  return n;
}

/* The chooser of refdec_driver_complete_walk: the argmax of the row's logits, computed when asked. */
typedef struct WalkState {
  const float* logits;
  int vocab;
  int64_t asked;
  int* asked_rows; /* [plan rows] asks per row this step: at most one each */
} WalkState;
static refdec_token choose_row(void* user, int32_t slot, int32_t row, int32_t depth) {
  WalkState* s = (WalkState*)user;
  (void)slot, (void)depth;
  ++s->asked;
  CHECK(++s->asked_rows[row] == 1);
  return argmax(&s->logits[(size_t)row * s->vocab], s->vocab);
}

/* How driver_decode drafts and completes. */
typedef struct Round {
  const char* name;
  enum { kLlma, kMixtureWalked, kIndexMixture, kLlmaShared, kLookahead } drafter;
  refdec_reference_index* index;       /* kIndexMixture */
  const refdec_llma_index* llma_index; /* kLlmaShared */
  int batch_cost;                      /* the driver prices whole steps (refdec_driver_set_batch_cost) */
} Round;

static refdec_drafter* make_drafter(const Round* r) {
  refdec_drafter* d = NULL;
  refdec_drafter* sources[3];
  size_t num_sources = 2;
  switch (r->drafter) {
    case kLlma: CHECK_OK(refdec_drafter_create_llma(NULL, &d)); return d; /* the defaults draft from the sequence itself */
    case kLlmaShared: CHECK_OK(refdec_drafter_create_llma_shared(r->llma_index, NULL, &d)); return d;
    case kLookahead: {
      refdec_lookahead_options lo;
      refdec_lookahead_options_init(&lo);
      lo.window = 4, lo.ngram = 3;
      CHECK_OK(refdec_drafter_create_lookahead(&lo, &d));
      return d;
    }
    case kMixtureWalked:
      CHECK_OK(refdec_drafter_create_llma(NULL, &sources[0]));
      CHECK_OK(refdec_drafter_create_ngram_trie(NULL, &sources[1]));
      break;
    case kIndexMixture: { /* the index and the sequence's own text, a source each */
      refdec_index_drafter_options io;
      refdec_index_drafter_options_init(&io);
      CHECK_OK(refdec_drafter_create_llma(NULL, &sources[0]));
      io.request = false;
      CHECK_OK(refdec_drafter_create_index(r->index, &io, &sources[1]));
      io.request = true, io.shared = false;
      CHECK_OK(refdec_drafter_create_index(r->index, &io, &sources[2]));
      num_sources = 3;
      break;
    }
  }
  {
    refdec_mixture_options mo;
    refdec_mixture_options_init(&mo);
    mo.combine = REFDEC_MIXTURE_NOISY_OR;
    CHECK_OK(refdec_drafter_create_mixture(sources, num_sources, &mo, &d));
  }
  return d;
}

/* The three prompts decoded at once through a driver as `r` says: greedy, or with a mixture
 * walked by a chooser. The engine mirrors the driver's slots by the plan's ids. */
static void driver_decode(const Model* m, const Round* r, refdec_token out[kSequences][kMaxNew], size_t counts[kSequences],
                          int64_t* steps) {
  refdec_driver_options o;
  refdec_driver* driver = NULL;
  refdec_sequence_limits limits;
  const refdec_token stops[2] = {kBos, kEos};
  refdec_drafter* drafters[kSequences];
  Cache caches[kSequences];
  int64_t slot_ids[kSequences];
  size_t active = 0, s, u;
  float* logits = NULL;
  refdec_token* choices = NULL;
  WalkState walk = {NULL, 0, 0, NULL};
  const int walked = r->drafter == kMixtureWalked;
  refdec_driver_options_init(&o);
  o.vocab_size = m->vocab, o.max_context = m->seq_len, o.prefill_chunk = 4; /* the longer prompts take two steps to prefill */
  CHECK_OK(refdec_driver_create(&o, &driver));
  if (r->batch_cost) {
    const size_t rows[3] = {1, 16, 64};
    const double seconds[3] = {1.0, 1.2, 2.5};
    refdec_step_cost* cost = NULL;
    CHECK_OK(refdec_step_cost_create_samples(rows, seconds, 3, &cost));
    CHECK_OK(refdec_driver_set_batch_cost(driver, cost));
    refdec_step_cost_destroy(cost); /* the driver keeps a copy */
  }
  refdec_sequence_limits_init(&limits);
  limits.max_new_tokens = kMaxNew, limits.stop_tokens = stops, limits.num_stop_tokens = 2, limits.budget = 12;
  for (s = 0; s < kSequences; ++s) {
    int64_t id = -1;
    drafters[s] = make_drafter(r);
    CHECK_OK(refdec_driver_add(driver, kPrompts[s], kPromptSizes[s], NULL, 0, &limits, drafters[s], &id));
    CHECK(id == (int64_t)s);
    slot_ids[active] = id;
    cache_init(m, &caches[active++], m->seq_len + 64); /* a step writes its rows after the cached entries */
    counts[s] = 0;
  }
  /* A drafter follows one sequence at a time. */
  {
    int64_t id = -1;
    CHECK(refdec_driver_add(driver, kPrompts[0], 1, NULL, 0, &limits, drafters[0], &id) == REFDEC_ERROR_ARGUMENT);
  }
  *steps = 0;
  while (!refdec_driver_idle(driver)) {
    int has_step = 0;
    CHECK_OK(refdec_driver_prepare(driver, &has_step));
    if (has_step) {
      refdec_step_plan plan;
      refdec_keep_plan keep;
      const size_t* left = NULL;
      size_t num_left = 0, k;
      int32_t b, row;
      CHECK_OK(refdec_driver_plan(driver, &plan));
      CHECK((size_t)plan.batch == active);
      for (b = 0; b < plan.batch; ++b) CHECK(plan.ids[b] == slot_ids[b] && plan.lengths[b] == caches[b].length);
      logits = (float*)realloc(logits, sizeof(float) * (size_t)plan.rows * m->vocab);
      forward(m, caches, &plan, logits);
      if (walked) {
        walk.logits = logits, walk.vocab = m->vocab;
        walk.asked_rows = (int*)realloc(walk.asked_rows, sizeof(int) * (size_t)plan.rows);
        memset(walk.asked_rows, 0, sizeof(int) * (size_t)plan.rows);
        CHECK_OK(refdec_driver_complete_walk(driver, choose_row, &walk));
      } else {
        choices = (refdec_token*)realloc(choices, sizeof(refdec_token) * (size_t)plan.rows);
        for (b = 0; b < plan.batch; ++b)
          for (row = plan.indptr[b]; row < plan.indptr[b + 1]; ++row) /* prefill rows are not read: -1 there */
            choices[row] = plan.prefill[b] ? -1 : argmax(&logits[(size_t)row * m->vocab], m->vocab);
        CHECK_OK(refdec_driver_complete_greedy(driver, choices, (size_t)plan.rows));
      }
      CHECK_OK(refdec_driver_keep(driver, &keep));
      for (b = 0; b < keep.batch; ++b) {
        CHECK(keep.lengths_before[b] == caches[b].length);
        cache_keep(m, &caches[b], &keep, b);
      }
      CHECK_OK(refdec_driver_left(driver, &left, &num_left));
      for (k = 0; k < num_left; ++k) {
        cache_free(&caches[left[k]]);
        memmove(&caches[left[k]], &caches[left[k] + 1], sizeof(Cache) * (active - left[k] - 1));
        memmove(&slot_ids[left[k]], &slot_ids[left[k] + 1], sizeof(int64_t) * (active - left[k] - 1));
        --active;
      }
      CHECK(active == refdec_driver_active(driver));
    }
    for (u = 0; u < refdec_driver_num_updates(driver); ++u) {
      refdec_update up;
      CHECK_OK(refdec_driver_update(driver, u, &up));
      CHECK(refdec_driver_update_error(driver, u) == NULL); /* no drafter threw */
      CHECK(up.finished != REFDEC_FINISH_DRAFTER_ERROR);
      CHECK(up.id >= 0 && up.id < kSequences && up.num_tokens > 0); /* prefill alone reports nothing */
      if (up.id < 0 || up.id >= kSequences) continue;
      CHECK(counts[up.id] + up.num_tokens <= kMaxNew);
      if (counts[up.id] + up.num_tokens > kMaxNew) continue;
      memcpy(&out[up.id][counts[up.id]], up.tokens, sizeof(refdec_token) * up.num_tokens);
      counts[up.id] += up.num_tokens;
      ++*steps;
    }
  }
  if (walked) CHECK(walk.asked > 0);
  for (s = 0; s < kSequences; ++s) refdec_drafter_destroy(drafters[s]);
  refdec_driver_destroy(driver);
  free(logits);
  free(choices);
  free(walk.asked_rows);
}

/* One sequence decoded by hand (begin, draft, the engine's own verification of the tree, accept)
 * with `d`: after `rewind_at` tokens of output the engine drops the last `rewind_by` of them (a
 * context shift) from its cache and the drafter (refdec_drafter_truncate) and decodes on; then
 * refdec_drafter_finish. Writes the output and returns its length; *steps counts verifications. */
static size_t by_hand_decode(const Model* m, refdec_drafter* d, const refdec_token* prompt, size_t prompt_size, size_t rewind_at,
                             size_t rewind_by, refdec_token* out, int64_t* steps) {
  Cache cache;
  refdec_token seq[512];
  size_t len = prompt_size, n = 0;
  int rewound = 0;
  float* logits = (float*)malloc(sizeof(float) * 64 * (size_t)m->vocab);
  cache_init(m, &cache, m->seq_len + 64);
  memcpy(seq, prompt, sizeof(refdec_token) * prompt_size);
  CHECK_OK(refdec_drafter_begin(d, prompt, prompt_size, NULL, 0));
  /* The prompt but its last token into the cache, as one step of a chain. */
  while (cache.length + 1 < (int64_t)len) {
    const int32_t indptr[2] = {0, 1};
    const int64_t mask_indptr[2] = {0, 1}, position = cache.length;
    const uint64_t mask[1] = {1};
    refdec_step_plan p;
    memset(&p, 0, sizeof p);
    p.batch = 1, p.rows = 1, p.indptr = indptr, p.tokens = &seq[cache.length], p.positions = &position, p.mask_indptr = mask_indptr,
    p.mask = mask;
    forward(m, &cache, &p, logits);
    ++cache.length;
  }
  *steps = 0;
  for (;;) {
    refdec_tree tree;
    int32_t indptr[2], path[64], accepted = 0, i, j;
    int64_t mask_indptr[2] = {0, 1}, positions[64];
    uint64_t mask[64];
    refdec_token bonus = -1, target[64];
    refdec_step_plan p;
    CHECK_OK(refdec_drafter_draft(d, seq[len - 1], 12, m->vocab, &tree));
    /* The tree as a one-sequence plan: each node sees its ancestors and itself. */
    memset(&p, 0, sizeof p);
    indptr[0] = 0, indptr[1] = tree.num_nodes;
    for (i = 0; i < tree.num_nodes; ++i) {
      positions[i] = (int64_t)len - 1 + tree.depth[i];
      mask[i] = 0;
      for (j = i; j >= 0; j = tree.parent[j]) mask[i] |= (uint64_t)1 << j;
    }
    p.batch = 1, p.rows = tree.num_nodes, p.indptr = indptr, p.tokens = tree.tokens, p.positions = positions, p.mask_indptr = mask_indptr,
    p.mask = mask;
    forward(m, &cache, &p, logits);
    for (i = 0; i < tree.num_nodes; ++i) target[i] = argmax(&logits[(size_t)i * m->vocab], m->vocab);
    CHECK_OK(refdec_tree_walk(&tree, chooser_from_array, target, path, &accepted, &bonus));
    ++*steps;
    { /* The cache keeps the root and the accepted path, moved down in place. */
      refdec_token appended[64];
      int32_t kept[65], k = 0;
      const int32_t rows_indptr[2] = {0, accepted + 1};
      const int64_t before = cache.length, after = cache.length + accepted + 1;
      refdec_keep_plan keep = {1, rows_indptr, kept, &after, &before};
      kept[k++] = 0;
      for (i = 0; i < accepted; ++i) kept[k++] = path[i], appended[i] = tree.tokens[path[i]];
      appended[accepted] = bonus;
      int stop = 0;
      cache_keep(m, &cache, &keep, 0);
      for (i = 0; i <= accepted && !stop; ++i) { /* up to a stop token or a limit, as plain decoding */
        stop = appended[i] == kBos || appended[i] == kEos;
        if (stop) break;
        out[n++] = appended[i];
        seq[len++] = appended[i];
        stop = n >= kMaxNew || (int64_t)len >= m->seq_len;
      }
      if (i > 0) CHECK_OK(refdec_drafter_accept(d, appended, (size_t)i));
      if (stop) break;
    }
    if (!rewound && n >= rewind_at) { /* drop the last rewind_by output tokens everywhere */
      rewound = 1;
      n -= rewind_by, len -= rewind_by;
      cache.length = (int64_t)len - 1; /* the last token kept is the next root, not cached */
      CHECK_OK(refdec_drafter_truncate(d, len));
      CHECK(refdec_drafter_length(d) == len);
    }
  }
  CHECK_OK(refdec_drafter_finish(d));
  cache_free(&cache);
  free(logits);
  return n;
}

int main(int argc, char** argv) {
  char path[4096];
  const char* dir = getenv("REFDEC_DATA_DIR");
  Model model;
  refdec_token plain[kSequences][kMaxNew], spec[kSequences][kMaxNew];
  size_t plain_counts[kSequences], spec_counts[kSequences], s, total = 0;
  int round;
  int64_t first_round_steps = 0;
  refdec_reference_index* index = NULL;
  refdec_llma_index* llma_index = NULL;
  refdec_token_span answers[kSequences];

  test_drafting_and_exports();
  test_errors();
  test_options();
  test_end_and_rewind();
  test_branches();
  test_step_costs();
  test_rest();
  test_driver_lifecycle();
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }

  if (argc > 1)
    snprintf(path, sizeof path, "%s", argv[1]);
  else
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.bin", dir != NULL && *dir != '\0' ? dir : REFDEC_DEFAULT_DATA_DIR);
  if (!load_model(path, &model)) {
    printf("skipped: no llama2.c checkpoint at %s (set REFDEC_DATA_DIR); the API checks without a model passed\n", path);
    return 77;
  }
  for (s = 0; s < kSequences; ++s) {
    plain_counts[s] = plain_decode(&model, kPrompts[s], kPromptSizes[s], plain[s]);
    total += plain_counts[s];
  }
  CHECK_OK(refdec_reference_index_create(NULL, &index));
  /* One LLMA index over the plain answers, shared by the three sequences' drafters. */
  for (s = 0; s < kSequences; ++s) answers[s].data = plain[s], answers[s].size = plain_counts[s];
  CHECK_OK(refdec_llma_index_create(answers, kSequences, &llma_index));
  CHECK(refdec_llma_index_tokens(llma_index) == total);
  {
    const Round rounds[] = {{"llma, greedy", kLlma, NULL, NULL, 0},
                            {"mixture, walked", kMixtureWalked, NULL, NULL, 0},
                            {"llma + index, first round", kIndexMixture, index, NULL, 0},
                            {"llma + index, second round", kIndexMixture, index, NULL, 0},
                            {"llma over a shared index of the answers", kLlmaShared, NULL, llma_index, 0},
                            {"lookahead (its window in the plan)", kLookahead, NULL, NULL, 0},
                            {"mixture under a batch step cost", kIndexMixture, index, NULL, 1}};
    for (round = 0; round < (int)(sizeof rounds / sizeof rounds[0]); ++round) {
      int64_t steps = 0;
      driver_decode(&model, &rounds[round], spec, spec_counts, &steps);
      for (s = 0; s < kSequences; ++s) {
        CHECK(spec_counts[s] == plain_counts[s]);
        CHECK(memcmp(spec[s], plain[s], sizeof(refdec_token) * (spec_counts[s] < plain_counts[s] ? spec_counts[s] : plain_counts[s])) == 0);
      }
      if (round == 0) CHECK(steps < (int64_t)total); /* the defaults draft */
      if (round == 2) {
        first_round_steps = steps;
        CHECK(refdec_reference_index_tokens(index) >= total); /* the first round's outputs, added as each sequence ended */
      }
      if (round == 3 || round == 4) CHECK(steps < first_round_steps / 2); /* the answers are in the index: drafted whole */
      printf("%s: %zu tokens in %lld verification steps, equal to plain greedy decoding: %s\n", rounds[round].name, total,
             (long long)steps, failures == 0 ? "yes" : "NO");
    }
  }
  { /* By hand: a sequence truncated mid-way and continued, then finished into a fresh index; the
       same prompt again drafts the finished output from it; a reset sequence adds nothing. */
    refdec_reference_index* outputs = NULL;
    refdec_drafter* sources[2];
    refdec_drafter* d = NULL;
    refdec_token got[kMaxNew];
    int64_t steps[2] = {0, 0};
    size_t n, before;
    int pass;
    CHECK_OK(refdec_reference_index_create(NULL, &outputs));
    CHECK_OK(refdec_drafter_create_llma(NULL, &sources[0]));
    CHECK_OK(refdec_drafter_create_index(outputs, NULL, &sources[1]));
    CHECK_OK(refdec_drafter_create_mixture(sources, 2, NULL, &d));
    for (pass = 0; pass < 2; ++pass) {
      before = refdec_reference_index_tokens(outputs);
      n = by_hand_decode(&model, d, kPrompts[1], kPromptSizes[1], pass == 0 ? 40 : 1000, 25, got, &steps[pass]);
      CHECK(n == plain_counts[1] && memcmp(got, plain[1], sizeof(refdec_token) * (n < plain_counts[1] ? n : plain_counts[1])) == 0);
      CHECK(refdec_reference_index_tokens(outputs) == before + n); /* finished: the output as kept, once */
      printf("by hand, %s: %zu tokens in %lld verification steps, equal to plain greedy decoding: %s\n",
             pass == 0 ? "truncated by 25 tokens after 40 and continued" : "again, drafting the finished output", n,
             (long long)steps[pass], failures == 0 ? "yes" : "NO");
    }
    CHECK(steps[1] < steps[0] / 2);
    before = refdec_reference_index_tokens(outputs);
    CHECK_OK(refdec_drafter_begin(d, kPrompts[2], kPromptSizes[2], NULL, 0));
    CHECK_OK(refdec_drafter_accept(d, plain[2], 5));
    CHECK_OK(refdec_drafter_reset(d));
    CHECK(refdec_drafter_finish(d) == REFDEC_ERROR_ARGUMENT); /* reset ended it */
    CHECK(refdec_reference_index_tokens(outputs) == before);
    refdec_drafter_destroy(d);
    refdec_reference_index_destroy(outputs);
  }
  refdec_reference_index_destroy(index);
  refdec_llma_index_destroy(llma_index);
  free(model.data);
  if (failures > 0) fprintf(stderr, "%d checks failed\n", failures);
  return failures > 0 ? 1 : 0;
}
