/* PtrMap: see ptrmap.h. */
#include "ir/ptrmap.h"

#include <stdlib.h>
#include <string.h>

/* The pointer's bits mixed so that aligned addresses spread over the table. */
static size_t slot_of(const PtrMap *m, const void *key) {
  uint64_t h = (uint64_t)(uintptr_t)key;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  size_t i = (size_t)h & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  return i;
}

bool ptrmap_init(PtrMap *m, size_t hint) {
  size_t cap = 16;
  while (cap < hint * 2) cap *= 2;
  const void **keys = calloc(cap, sizeof *keys);
  int64_t *vals = malloc(cap * sizeof *vals);
  if (!keys || !vals) {
    free(keys), free(vals);
    return false;
  }
  *m = (PtrMap){keys, vals, cap, 0};
  return true;
}

void ptrmap_free(PtrMap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

void ptrmap_clear(PtrMap *m) {
  if (m->n) memset(m->keys, 0, m->cap * sizeof *m->keys);
  m->n = 0;
}

int64_t *ptrmap_ref(const PtrMap *m, const void *key) {
  if (!m->cap) return NULL;
  size_t i = slot_of(m, key);
  return m->keys[i] ? &m->vals[i] : NULL;
}

int64_t ptrmap_get(const PtrMap *m, const void *key) {
  const int64_t *v = ptrmap_ref(m, key);
  return v ? *v : -1;
}

static bool grow(PtrMap *m) {
  PtrMap big;
  if (!ptrmap_init(&big, m->cap ? m->cap : 8)) return false;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(&big, m->keys[i]);
    big.keys[j] = m->keys[i], big.vals[j] = m->vals[i], big.n++;
  }
  ptrmap_free(m);
  *m = big;
  return true;
}

int64_t *ptrmap_insert(PtrMap *m, const void *key, int64_t init, bool *added) {
  if ((m->n + 1) * 2 > m->cap && !grow(m)) return NULL;
  size_t i = slot_of(m, key);
  bool fresh = !m->keys[i];
  if (fresh) m->keys[i] = key, m->vals[i] = init, m->n++;
  if (added) *added = fresh;
  return &m->vals[i];
}

bool ptrmap_put(PtrMap *m, const void *key, int64_t val) {
  int64_t *v = ptrmap_insert(m, key, val, NULL);
  if (v) *v = val;
  return v != NULL;
}
