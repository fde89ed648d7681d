/* A map from pointers to int64 values (open addressing, linear probing), the
 * one hash map of the passes: graph node -> index, visited sets, memo tables
 * (the value an index into the pass's own array). Keys are not retained: the
 * caller keeps them alive while they are in the map. A zeroed PtrMap is an
 * empty map. To visit every entry, walk keys[0..cap) and skip the NULLs.
 */
#ifndef TVK_IR_PTRMAP_H
#define TVK_IR_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const void **keys; /* cap slots; NULL: empty */
  int64_t *vals;
  size_t cap, n; /* cap: a power of two, or 0 before the first put */
} PtrMap;

/* An empty map with room for about hint keys; false on out of memory. */
bool ptrmap_init(PtrMap *m, size_t hint);
void ptrmap_free(PtrMap *m); /* empties it; the map can be used again */
/* Removes every key but keeps the room (a map emptied and refilled per batch). */
void ptrmap_clear(PtrMap *m);
/* key's value, or -1 when absent (for maps whose values are never negative). */
int64_t ptrmap_get(const PtrMap *m, const void *key);
/* Where key's value lives, or NULL when absent; valid until the next insert. */
int64_t *ptrmap_ref(const PtrMap *m, const void *key);
/* Sets key's value; false on out of memory. */
bool ptrmap_put(PtrMap *m, const void *key, int64_t val);
/* key's value slot, inserted with `init` when absent (*added tells; may be
 * NULL); NULL on out of memory. Valid until the next insert. */
int64_t *ptrmap_insert(PtrMap *m, const void *key, int64_t init, bool *added);

#endif
