/* FNV-1a over bytes: the hash of the in-memory tables keyed by text or by
 * serialised structure (the program cache by source, the schedule cache by
 * a graph's canonical form). Not for content seals on disk (runtime/cache.c
 * keeps a wider one). */
#ifndef TVK_IR_HASH_H
#define TVK_IR_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_fnv1a(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
  return h;
}

#endif
