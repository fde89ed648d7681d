/* A map from UOp pointers to ints (open addressing), for the scheduler and the
 * runtime. Keys are not retained: the caller keeps them alive while in use. */
#ifndef TVK_SCHEDULE_SMAP_H
#define TVK_SCHEDULE_SMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/uop.h"

typedef struct {
  const UOp **keys;
  int64_t *vals;
  size_t cap, n;
} SMap;

/* An empty map sized for about hint keys; false on out of memory. A zeroed
 * SMap is also a valid empty map. */
bool smap_init(SMap *m, size_t hint);
void smap_free(SMap *m);
/* u's value, or -1 when absent. */
int64_t smap_get(const SMap *m, const UOp *u);
/* Sets u's value; false on out of memory. */
bool smap_put(SMap *m, const UOp *u, int64_t v);

#endif
