/* A small map from UOp pointers to int64 values (open addressing), used by the
 * codegen passes to number the nodes of a graph. Keys are not retained: the
 * caller keeps the graph alive while the map is in use. */
#ifndef TVK_CODEGEN_UMAP_H
#define TVK_CODEGEN_UMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ir/uop.h"

typedef struct {
  const UOp **keys;
  int64_t *vals;
  size_t cap, n;
} UMap;

static inline size_t umap_slot(const UMap *m, const UOp *u) {
  size_t i = (size_t)((uintptr_t)u >> 4) * 0x9e3779b97f4a7c15ull & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != u) i = (i + 1) & (m->cap - 1);
  return i;
}

static inline bool umap_init(UMap *m, size_t hint) {
  m->cap = 64;
  while (m->cap < hint * 2) m->cap *= 2;
  m->n = 0;
  m->keys = calloc(m->cap, sizeof *m->keys);
  m->vals = calloc(m->cap, sizeof *m->vals);
  return m->keys && m->vals;
}

static inline void umap_free(UMap *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL, m->vals = NULL, m->cap = m->n = 0;
}

/* Pointer to u's value, or NULL when u is not in the map. */
static inline int64_t *umap_get(const UMap *m, const UOp *u) {
  size_t i = umap_slot(m, u);
  return m->keys[i] ? &m->vals[i] : NULL;
}

/* Sets u's value; false on out of memory. */
static inline bool umap_put(UMap *m, const UOp *u, int64_t v) {
  if ((m->n + 1) * 2 > m->cap) {
    UMap big = {calloc(m->cap * 2, sizeof(UOp *)), calloc(m->cap * 2, sizeof(int64_t)), m->cap * 2,
                0};
    if (!big.keys || !big.vals) {
      umap_free(&big);
      return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = umap_slot(&big, m->keys[i]);
      big.keys[j] = m->keys[i], big.vals[j] = m->vals[i], big.n++;
    }
    umap_free(m);
    *m = big;
  }
  size_t i = umap_slot(m, u);
  if (!m->keys[i]) m->keys[i] = u, m->n++;
  m->vals[i] = v;
  return true;
}

#endif
