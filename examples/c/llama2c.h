/* Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0 */
/* A llama2.c checkpoint's forward pass in plain C99 over a refdec step plan: the engine side of
 * the C examples and tests. One contiguous cache per sequence; a plan row's keys and values land
 * at entry length + its row index, and each row reads the cached entries, then its ancestors in
 * the step in entry order, as plain decoding reads its context: both compute bit-identical
 * logits in fp32. Header-only (static functions); link with -lm. */
#ifndef REFDEC_EXAMPLES_LLAMA2C_H_
#define REFDEC_EXAMPLES_LLAMA2C_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refdec/refdec.h"

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

/* Applies slot b's part of a keep plan to its cache: the k-th kept step row moves to entry
 * lengths_before[b] + k (rows only move down), then the cache holds lengths[b] entries. */
static void cache_keep(const Model* m, Cache* c, const refdec_keep_plan* keep, int32_t b) {
  const int64_t base = keep->lengths_before[b];
  int32_t k;
  int layer;
  for (k = 0; k < keep->indptr[b + 1] - keep->indptr[b]; ++k) {
    const int64_t from = base + keep->rows[keep->indptr[b] + k], to = base + k;
    if (from == to) continue;
    for (layer = 0; layer < m->layers; ++layer) {
      memcpy(cache_key(m, c, layer, to), cache_key(m, c, layer, from), sizeof(float) * kv_dim_of(m));
      memcpy(cache_value(m, c, layer, to), cache_value(m, c, layer, from), sizeof(float) * kv_dim_of(m));
    }
  }
  c->length = keep->lengths[b];
}

static refdec_token argmax(const float* logits, int vocab) {
  refdec_token best = 0, t;
  for (t = 1; t < vocab; ++t)
    if (logits[t] > logits[best]) best = t;
  return best;
}


#endif /* REFDEC_EXAMPLES_LLAMA2C_H_ */
