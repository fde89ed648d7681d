/* SMap: see smap.h. */
#include "schedule/smap.h"

#include <stdlib.h>
#include <string.h>

static size_t smap_slot(const SMap *m, const UOp *u) {
  size_t i = (size_t)((uintptr_t)u >> 4) * 0x9e3779b97f4a7c15ull & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != u) i = (i + 1) & (m->cap - 1);
  return i;
}

bool smap_init(SMap *m, size_t hint) {
  m->cap = 16;
  while (m->cap < hint * 2) m->cap *= 2;
  m->n = 0;
  m->keys = calloc(m->cap, sizeof *m->keys);
  m->vals = calloc(m->cap, sizeof *m->vals);
  if (m->keys && m->vals) return true;
  smap_free(m);
  return false;
}

void smap_free(SMap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

int64_t smap_get(const SMap *m, const UOp *u) {
  if (!m->cap) return -1;
  size_t i = smap_slot(m, u);
  return m->keys[i] ? m->vals[i] : -1;
}

static bool smap_grow(SMap *m) {
  SMap big;
  if (!smap_init(&big, m->cap)) return false;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = smap_slot(&big, m->keys[i]);
    big.keys[j] = m->keys[i], big.vals[j] = m->vals[i], big.n++;
  }
  smap_free(m);
  *m = big;
  return true;
}

bool smap_put(SMap *m, const UOp *u, int64_t v) {
  if ((!m->cap && !smap_init(m, 8)) || ((m->n + 1) * 2 > m->cap && !smap_grow(m))) return false;
  size_t i = smap_slot(m, u);
  if (!m->keys[i]) m->keys[i] = u, m->n++;
  m->vals[i] = v;
  return true;
}
