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
  CHECK(o.k == 16 && o.n == 1);
  o.k = 4;
  CHECK_OK(refdec_llma_create(&o, &d));
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
    CHECK_OK(refdec_prompt_lookup_create(NULL, &sources[0]));
    CHECK_OK(refdec_ngram_trie_create(NULL, &sources[1]));
    CHECK(refdec_mixture_create(sources, 0, &mixture) == REFDEC_ERROR_ARGUMENT && mixture == NULL);
    CHECK(sources[0] != NULL && sources[1] != NULL); /* refused: still the caller's */
    CHECK_OK(refdec_mixture_create(sources, 2, &mixture));
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
    CHECK(refdec_index_drafter_create(NULL, NULL, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    CHECK(strstr(refdec_last_error(), "index is NULL") != NULL);
    refdec_index_drafter_options_init(&io);
    CHECK(io.max_match == 16 && io.continuation == 64 && io.request == 1 && io.add_output == 1 && io.shared == 1);
    io.max_match = 0;
    CHECK(refdec_index_drafter_create(index, &io, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    refdec_index_drafter_options_init(&io);
    io.shared = 0, io.request = 0;
    CHECK(refdec_index_drafter_create(index, &io, &drafter) == REFDEC_ERROR_ARGUMENT && drafter == NULL);
    CHECK(strstr(refdec_last_error(), "nothing to draft from") != NULL);
    io.request = 1; /* the sequence's own text only: not the index's document */
    CHECK_OK(refdec_index_drafter_create(index, &io, &drafter));
    CHECK(strcmp(refdec_drafter_name(drafter), "index-request") == 0);
    CHECK_OK(refdec_drafter_begin(drafter, start, 3, NULL, 0));
    CHECK_OK(refdec_drafter_draft(drafter, 21, 8, 32, &tree));
    CHECK_OK(refdec_tree_best_chain(&tree, chain, 16, &n));
    CHECK(n == 0);
    refdec_drafter_destroy(drafter);
    CHECK(refdec_reference_index_tokens(index) == 6);
    CHECK_OK(refdec_index_drafter_create(index, NULL, &drafter));
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
  CHECK(refdec_llma_create(NULL, NULL) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "refdec_llma_create: out is NULL") != NULL);
  { /* Drafting by hand checks the protocol: a sequence begun, non-negative ids, the root its last token. */
    refdec_drafter* d = NULL;
    const refdec_token negative[] = {1, -3};
    const refdec_token seq[] = {1, 3, 5};
    refdec_tree tree;
    CHECK_OK(refdec_prompt_lookup_create(NULL, &d));
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
    CHECK(refdec_llma_create_shared(NULL, NULL, &d) == REFDEC_ERROR_ARGUMENT && d == NULL);
    CHECK(strstr(refdec_last_error(), "refdec_llma_create_shared: index is NULL") != NULL);
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
  CHECK_OK(refdec_llma_create(NULL, &llma));
  CHECK_OK(refdec_llma_create(NULL, &other));
  CHECK(refdec_driver_plan(driver, &plan) == REFDEC_ERROR_ARGUMENT);
  CHECK(strstr(refdec_last_error(), "no prepared step") != NULL);
  CHECK_OK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, llma, &id));
  /* In use: refused by another sequence, by a mixture and by drafting by hand. */
  CHECK(refdec_driver_add(driver, prompt, 4, NULL, 0, &limits, llma, &second) == REFDEC_ERROR_ARGUMENT && second == -1);
  sources[0] = llma;
  CHECK(refdec_mixture_create(sources, 1, &mixture) == REFDEC_ERROR_ARGUMENT && sources[0] == llma && mixture == NULL);
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

/* ---- a llama2.c model in plain C ---- */

typedef struct Model {
  int dim, hidden, layers, heads, kv_heads, vocab, seq_len;
  float* data; /* the whole file after the header */
  const float *embedding, *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w1, *w2, *w3, *final_norm, *classifier;
} Model;

static int load_model(const char* path, Model* m) {
  FILE* f = fopen(path, "rb");
  int32_t h[7];
  long size;
  size_t floats, kv_dim, head_dim;
  const float* p;
  if (f == NULL) return 0;
  if (fread(h, sizeof h, 1, f) != 1) return fclose(f), 0;
  m->dim = h[0], m->hidden = h[1], m->layers = h[2], m->heads = h[3], m->kv_heads = h[4];
  m->vocab = abs(h[5]), m->seq_len = h[6];
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, (long)sizeof h, SEEK_SET);
  floats = (size_t)(size - (long)sizeof h) / sizeof(float);
  m->data = (float*)malloc(floats * sizeof(float));
  if (m->data == NULL || fread(m->data, sizeof(float), floats, f) != floats) return fclose(f), 0;
  fclose(f);
  head_dim = (size_t)(m->dim / m->heads);
  kv_dim = head_dim * (size_t)m->kv_heads;
  p = m->data;
  m->embedding = p, p += (size_t)m->vocab * m->dim;
  m->attn_norm = p, p += (size_t)m->layers * m->dim;
  m->wq = p, p += (size_t)m->layers * m->dim * m->dim;
  m->wk = p, p += (size_t)m->layers * kv_dim * m->dim;
  m->wv = p, p += (size_t)m->layers * kv_dim * m->dim;
  m->wo = p, p += (size_t)m->layers * m->dim * m->dim;
  m->ffn_norm = p, p += (size_t)m->layers * m->dim;
  m->w1 = p, p += (size_t)m->layers * m->hidden * m->dim;
  m->w2 = p, p += (size_t)m->layers * m->dim * m->hidden;
  m->w3 = p, p += (size_t)m->layers * m->hidden * m->dim;
  m->final_norm = p, p += m->dim;
  p += (size_t)m->seq_len * head_dim; /* the RoPE tables (cos, sin), recomputed */
  m->classifier = h[5] > 0 ? m->embedding : p;
  return 1;
}

/* One sequence's cache: [layers, capacity, kv_dim] keys and values. */
typedef struct Cache {
  float *key, *value;
  int64_t capacity, length;
} Cache;

static size_t kv_dim_of(const Model* m) { return (size_t)(m->dim / m->heads * m->kv_heads); }
static float* cache_key(const Model* m, Cache* c, int layer, int64_t entry) {
  return c->key + ((size_t)layer * (size_t)c->capacity + (size_t)entry) * kv_dim_of(m);
}
static float* cache_value(const Model* m, Cache* c, int layer, int64_t entry) {
  return c->value + ((size_t)layer * (size_t)c->capacity + (size_t)entry) * kv_dim_of(m);
}
static void cache_init(const Model* m, Cache* c, int64_t capacity) {
  const size_t n = (size_t)m->layers * (size_t)capacity * kv_dim_of(m);
  c->key = (float*)calloc(n, sizeof(float));
  c->value = (float*)calloc(n, sizeof(float));
  c->capacity = capacity;
  c->length = 0;
}
static void cache_free(Cache* c) {
  free(c->key);
  free(c->value);
}

static void rmsnorm(float* out, const float* x, const float* w, int n) {
  float ss = 0.0f;
  int j;
  for (j = 0; j < n; ++j) ss += x[j] * x[j];
  ss = 1.0f / sqrtf(ss / (float)n + 1e-5f);
  for (j = 0; j < n; ++j) out[j] = w[j] * (ss * x[j]);
}
static void matmul(float* out, const float* x, const float* w, int n, int d) {
  int i, j;
  for (i = 0; i < d; ++i) {
    float v = 0.0f;
    for (j = 0; j < n; ++j) v += w[(size_t)i * n + j] * x[j];
    out[i] = v;
  }
}
static void rope(float* v, int n, int head_dim, int64_t pos) {
  int i;
  for (i = 0; i < n; i += 2) {
    const float freq = 1.0f / powf(10000.0f, (float)(i % head_dim) / (float)head_dim);
    const float a = (float)pos * freq, c = cosf(a), s = sinf(a), v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * c - v1 * s;
    v[i + 1] = v0 * s + v1 * c;
  }
}
static int sees(const refdec_step_plan* p, int32_t b, int32_t i, int32_t j) {
  const int32_t rows = p->indptr[b + 1] - p->indptr[b], words = (rows + 63) / 64;
  return (int)((p->mask[p->mask_indptr[b] + (int64_t)i * words + j / 64] >> (j % 64)) & 1u);
}

/* Logits [rows, vocab] of every plan row; each row's keys and values land at entry length + i. */
static void forward(const Model* m, Cache* caches, const refdec_step_plan* p, float* logits) {
  const int dim = m->dim, hd = m->dim / m->heads, kv = (int)kv_dim_of(m), group = m->heads / m->kv_heads;
  const float scale = 1.0f / sqrtf((float)hd);
  float* x = (float*)malloc(sizeof(float) * (size_t)p->rows * dim);
  float* xb = (float*)malloc(sizeof(float) * (size_t)p->rows * dim);
  float* q = (float*)malloc(sizeof(float) * (size_t)p->rows * dim);
  float* out = (float*)malloc(sizeof(float) * (size_t)dim);
  float* hb = (float*)malloc(sizeof(float) * (size_t)m->hidden);
  float* hb2 = (float*)malloc(sizeof(float) * (size_t)m->hidden);
  float* att = (float*)malloc(sizeof(float) * (size_t)(m->seq_len + p->rows));
  int64_t* visible = (int64_t*)malloc(sizeof(int64_t) * (size_t)(m->seq_len + p->rows));
  int32_t r, b, i, j, layer, head, e;
  for (r = 0; r < p->rows; ++r) memcpy(&x[(size_t)r * dim], &m->embedding[(size_t)p->tokens[r] * dim], sizeof(float) * (size_t)dim);
  for (layer = 0; layer < m->layers; ++layer) {
    const size_t l = (size_t)layer;
    for (b = 0; b < p->batch; ++b)
      for (r = p->indptr[b]; r < p->indptr[b + 1]; ++r) {
        const int64_t entry = caches[b].length + (r - p->indptr[b]);
        float* k = cache_key(m, &caches[b], layer, entry);
        rmsnorm(&xb[(size_t)r * dim], &x[(size_t)r * dim], &m->attn_norm[l * dim], dim);
        matmul(&q[(size_t)r * dim], &xb[(size_t)r * dim], &m->wq[l * dim * dim], dim, dim);
        matmul(k, &xb[(size_t)r * dim], &m->wk[l * kv * dim], dim, kv);
        matmul(cache_value(m, &caches[b], layer, entry), &xb[(size_t)r * dim], &m->wv[l * kv * dim], dim, kv);
        rope(&q[(size_t)r * dim], dim, hd, p->positions[r]);
        rope(k, kv, hd, p->positions[r]);
      }
    for (b = 0; b < p->batch; ++b) {
      const int32_t rows = p->indptr[b + 1] - p->indptr[b];
      for (i = 0; i < rows; ++i) {
        int64_t n = 0, t;
        r = p->indptr[b] + i;
        for (t = 0; t < caches[b].length; ++t) visible[n++] = t;
        for (j = 0; j < rows; ++j)
          if (sees(p, b, i, j)) visible[n++] = caches[b].length + j;
        for (head = 0; head < m->heads; ++head) {
          const float* qh = &q[(size_t)r * dim + (size_t)head * hd];
          const int offset = (head / group) * hd;
          float max = -INFINITY, sum = 0.0f;
          float* o = &xb[(size_t)r * dim + (size_t)head * hd];
          for (t = 0; t < n; ++t) {
            const float* k = cache_key(m, &caches[b], layer, visible[t]) + offset;
            float s = 0.0f;
            for (e = 0; e < hd; ++e) s += qh[e] * k[e];
            att[t] = s * scale;
            if (att[t] > max) max = att[t];
          }
          for (t = 0; t < n; ++t) sum += (att[t] = expf(att[t] - max));
          for (e = 0; e < hd; ++e) o[e] = 0.0f;
          for (t = 0; t < n; ++t) {
            const float* v = cache_value(m, &caches[b], layer, visible[t]) + offset;
            for (e = 0; e < hd; ++e) o[e] += att[t] / sum * v[e];
          }
        }
      }
    }
    for (r = 0; r < p->rows; ++r) {
      float* xr = &x[(size_t)r * dim];
      matmul(out, &xb[(size_t)r * dim], &m->wo[l * dim * dim], dim, dim);
      for (e = 0; e < dim; ++e) xr[e] += out[e];
      rmsnorm(&xb[(size_t)r * dim], xr, &m->ffn_norm[l * dim], dim);
      matmul(hb, &xb[(size_t)r * dim], &m->w1[l * m->hidden * dim], dim, m->hidden);
      matmul(hb2, &xb[(size_t)r * dim], &m->w3[l * m->hidden * dim], dim, m->hidden);
      for (e = 0; e < m->hidden; ++e) hb[e] = hb[e] * (1.0f / (1.0f + expf(-hb[e]))) * hb2[e];
      matmul(out, hb, &m->w2[l * dim * m->hidden], m->hidden, dim);
      for (e = 0; e < dim; ++e) xr[e] += out[e];
    }
  }
  for (r = 0; r < p->rows; ++r) {
    rmsnorm(&xb[(size_t)r * dim], &x[(size_t)r * dim], m->final_norm, dim);
    matmul(&logits[(size_t)r * m->vocab], &xb[(size_t)r * dim], m->classifier, dim, m->vocab);
  }
  free(x), free(xb), free(q), free(out), free(hb), free(hb2), free(att), free(visible);
}

static refdec_token argmax(const float* logits, int vocab) {
  refdec_token best = 0, t;
  for (t = 1; t < vocab; ++t)
    if (logits[t] > logits[best]) best = t;
  return best;
}

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

/* The three prompts decoded at once through a driver: with `index` a mixture of LLMA and an index
 * drafter over it, else with `mixture` a mixture of LLMA and the n-gram trie walked by a chooser,
 * else LLMA (over `llma_index` when given). */
static void driver_decode(const Model* m, int mixture, refdec_reference_index* index, const refdec_llma_index* llma_index,
                          refdec_token out[kSequences][kMaxNew], size_t counts[kSequences], int64_t* steps) {
  refdec_driver_options o;
  refdec_driver* driver = NULL;
  refdec_sequence_limits limits;
  const refdec_token stops[2] = {kBos, kEos};
  refdec_drafter* drafters[kSequences];
  Cache caches[kSequences];
  size_t active = 0, s, u;
  float* logits = NULL;
  refdec_token* choices = NULL;
  WalkState walk = {NULL, 0, 0, NULL};
  refdec_driver_options_init(&o);
  o.vocab_size = m->vocab, o.max_context = m->seq_len, o.prefill_chunk = 0;
  CHECK_OK(refdec_driver_create(&o, &driver));
  refdec_sequence_limits_init(&limits);
  limits.max_new_tokens = kMaxNew, limits.stop_tokens = stops, limits.num_stop_tokens = 2, limits.budget = 12;
  for (s = 0; s < kSequences; ++s) {
    int64_t id = -1;
    if (mixture || index != NULL) {
      refdec_drafter* sources[3];
      size_t num_sources = 2;
      refdec_llma_options lo;
      refdec_llma_options_init(&lo);
      lo.self_reference = 1;
      CHECK_OK(refdec_llma_create(&lo, &sources[0]));
      if (index != NULL) { /* the index and the sequence's own text, a source each */
        refdec_index_drafter_options io;
        refdec_index_drafter_options_init(&io);
        io.request = 0;
        CHECK_OK(refdec_index_drafter_create(index, &io, &sources[1]));
        io.request = 1, io.shared = 0;
        CHECK_OK(refdec_index_drafter_create(index, &io, &sources[2]));
        num_sources = 3;
      } else {
        CHECK_OK(refdec_ngram_trie_create(NULL, &sources[1]));
      }
      CHECK_OK(refdec_mixture_create(sources, num_sources, &drafters[s]));
    } else {
      refdec_llma_options lo;
      refdec_llma_options_init(&lo);
      lo.self_reference = 1;
      if (llma_index != NULL)
        CHECK_OK(refdec_llma_create_shared(llma_index, &lo, &drafters[s]));
      else
        CHECK_OK(refdec_llma_create(&lo, &drafters[s]));
    }
    CHECK_OK(refdec_driver_add(driver, kPrompts[s], kPromptSizes[s], NULL, 0, &limits, drafters[s], &id));
    CHECK(id == (int64_t)s);
    cache_init(m, &caches[active++], m->seq_len + limits.budget + 1); /* a step writes its rows after the cached entries */
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
      int32_t b, r;
      CHECK_OK(refdec_driver_plan(driver, &plan));
      CHECK((size_t)plan.batch == active);
      for (b = 0; b < plan.batch; ++b) CHECK(plan.lengths[b] == caches[b].length);
      logits = (float*)realloc(logits, sizeof(float) * (size_t)plan.rows * m->vocab);
      forward(m, caches, &plan, logits);
      if (mixture) {
        walk.logits = logits, walk.vocab = m->vocab;
        walk.asked_rows = (int*)realloc(walk.asked_rows, sizeof(int) * (size_t)plan.rows);
        memset(walk.asked_rows, 0, sizeof(int) * (size_t)plan.rows);
        CHECK_OK(refdec_driver_complete_walk(driver, choose_row, &walk));
      } else {
        choices = (refdec_token*)realloc(choices, sizeof(refdec_token) * (size_t)plan.rows);
        for (r = 0; r < plan.rows; ++r) choices[r] = argmax(&logits[(size_t)r * m->vocab], m->vocab);
        CHECK_OK(refdec_driver_complete_greedy(driver, choices, (size_t)plan.rows));
      }
      /* The keep plan: the k-th kept step row moves to entry length + k, in increasing k. */
      CHECK_OK(refdec_driver_keep(driver, &keep));
      for (b = 0; b < keep.batch; ++b) {
        int layer;
        /* The length before the step, as the header says to compute it from the keep plan alone. */
        CHECK(keep.lengths[b] - (keep.indptr[b + 1] - keep.indptr[b]) == caches[b].length);
        for (k = 0; k < (size_t)(keep.indptr[b + 1] - keep.indptr[b]); ++k) {
          const int64_t from = caches[b].length + keep.rows[keep.indptr[b] + (int32_t)k], to = caches[b].length + (int64_t)k;
          if (from == to) continue;
          for (layer = 0; layer < m->layers; ++layer) {
            memcpy(cache_key(m, &caches[b], layer, to), cache_key(m, &caches[b], layer, from), sizeof(float) * kv_dim_of(m));
            memcpy(cache_value(m, &caches[b], layer, to), cache_value(m, &caches[b], layer, from), sizeof(float) * kv_dim_of(m));
          }
        }
        caches[b].length = keep.lengths[b];
      }
      CHECK_OK(refdec_driver_left(driver, &left, &num_left));
      for (k = 0; k < num_left; ++k) {
        cache_free(&caches[left[k]]);
        memmove(&caches[left[k]], &caches[left[k] + 1], sizeof(Cache) * (active - left[k] - 1));
        --active;
      }
      CHECK(active == refdec_driver_active(driver));
    }
    for (u = 0; u < refdec_driver_num_updates(driver); ++u) {
      refdec_update up;
      CHECK_OK(refdec_driver_update(driver, u, &up));
      CHECK(refdec_driver_update_error(driver, u) == NULL); /* no drafter threw */
      CHECK(up.finished != REFDEC_FINISH_DRAFTER_ERROR);
      CHECK(up.id >= 0 && up.id < kSequences);
      if (up.id < 0 || up.id >= kSequences) continue;
      CHECK(counts[up.id] + up.num_tokens <= kMaxNew);
      if (counts[up.id] + up.num_tokens > kMaxNew) continue;
      memcpy(&out[up.id][counts[up.id]], up.tokens, sizeof(refdec_token) * up.num_tokens);
      counts[up.id] += up.num_tokens;
      ++*steps;
    }
  }
  if (mixture) CHECK(walk.asked > 0);
  for (s = 0; s < kSequences; ++s) refdec_drafter_destroy(drafters[s]);
  refdec_driver_destroy(driver);
  free(logits);
  free(choices);
  free(walk.asked_rows);
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
  for (round = 0; round < 5; ++round) {
    static const char* const names[5] = {"llma, greedy", "mixture, walked", "llma + index, first round", "llma + index, second round",
                                          "llma over a shared index of the answers"};
    int64_t steps = 0;
    driver_decode(&model, round == 1, round == 2 || round == 3 ? index : NULL, round == 4 ? llma_index : NULL, spec, spec_counts, &steps);
    for (s = 0; s < kSequences; ++s) {
      CHECK(spec_counts[s] == plain_counts[s]);
      CHECK(memcmp(spec[s], plain[s], sizeof(refdec_token) * (spec_counts[s] < plain_counts[s] ? spec_counts[s] : plain_counts[s])) == 0);
    }
    if (round == 2) {
      first_round_steps = steps;
      CHECK(refdec_reference_index_tokens(index) >= total); /* the first round's outputs, added as each sequence ended */
    }
    if (round == 3 || round == 4) CHECK(steps < first_round_steps / 2); /* the answers are in the index: drafted whole */
    printf("%s: %zu tokens in %lld verification steps, equal to plain greedy decoding: %s\n", names[round], total, (long long)steps,
           failures == 0 ? "yes" : "NO");
  }
  refdec_reference_index_destroy(index);
  refdec_llma_index_destroy(llma_index);
  free(model.data);
  if (failures > 0) fprintf(stderr, "%d checks failed\n", failures);
  return failures > 0 ? 1 : 0;
}
