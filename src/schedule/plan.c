/* The memory planner: intermediate buffers of one schedule share memory when
 * their lifetimes do not overlap (the seed's LRU buffer reuse).
 *
 * Walking the items in run order, a buffer is live from the item that writes
 * it to the last item that reads it. When it dies, its memory goes to a free
 * list; a later output of the same dtype, element count and device takes it over
 * instead of allocating. Only buffers no tensor will refer to after the run
 * give memory (keep[] says which ones a tensor will see), and assign targets
 * (their memory is the user's) never take part. A buffer read by an item is
 * freed only after that item's outputs are placed, so a kernel does not read
 * and write the same memory through two buffers, with one exception:
 *
 * In place (on the devices that allow it, schedule.h). An output of item
 * i, kept or not, takes over the memory of an
 * intermediate that i reads for the last time when i reads it only through
 * the view it stores the output through: every element is then read by the
 * store of that same element alone, before it (the value depends on it),
 * and by no other. Softmax on the CPU divides exp(x - max), materialised,
 * by its row sums into the same memory (ops_softmax.c): its output is
 * written where the rows already are in cache. */
#include <stdlib.h>
#include <string.h>

#include "ir/uop.h"
#include "ir/view.h"
#include "schedule/schedule.h"

/* Item it stores buffer slot o through one view and loads slot k only
 * through that same view (at least once). */
static bool reads_in_place(const ScheduleItem *it, int o, int k) {
  size_t n = 0;
  UOp **order = uop_toposort(it->ast, &n);
  const ShapeTracker *out = NULL;
  bool ok = order != NULL, loaded = false;
  for (size_t i = 0; ok && i < n; i++) { /* the store's view */
    UOp *u = order[i];
    if (u->op == OP_STORE && u->src[0]->arg.i == o) ok = !out, out = u->src[1]->arg.st;
  }
  for (size_t i = 0; ok && out && i < n; i++) {
    UOp *u = order[i];
    if (u->op != OP_LOAD || u->src[0]->arg.i != k) continue;
    ok = st_eq(u->src[1]->arg.st, out), loaded = true;
  }
  free(order);
  return ok && out && loaded;
}

/* b is a new output (not an input, not an assign target) of known size. */
static bool new_output(const Schedule *s, int b) {
  const SchedBuf *sb = &s->bufs[b];
  return sb->node && !sb->buffer && sb->numel != 0; /* a symbolic count is < 0 */
}

static bool planned(const Schedule *s, const bool *keep, int b) {
  return new_output(s, b) && !keep[b];
}

static bool same_kind(const SchedBuf *a, const SchedBuf *b) {
  return a->dtype == b->dtype && a->numel == b->numel && a->device == b->device;
}

/* The slot of a buffer item i reads for the last time whose memory output
 * slot o may take over in place (above), or -1. Only for a kernel of one
 * output: another output's store could come after o's and read the same
 * element again. */
static int in_place_source(const Schedule *s, const bool *keep, const int *last, int i, int o,
                           uint32_t in_place) {
  const ScheduleItem *it = &s->items[i];
  if (it->copy || it->nout != 1 || it->device < 0 || it->device >= 32 ||
      !(in_place >> it->device & 1))
    return -1; /* one store: every load feeds it */
  for (int k = it->nout; k < it->nbufs; k++) {
    int b = it->bufs[k];
    if (last[b] == i && planned(s, keep, b) && same_kind(&s->bufs[b], &s->bufs[it->bufs[o]]) &&
        reads_in_place(it, o, k))
      return k;
  }
  return -1;
}

int schedule_plan(Schedule *s, const bool *keep, uint32_t in_place) {
  int n = s->nbufs;
  int *last = malloc((size_t)(n ? n : 1) * sizeof *last);
  int *freelist = malloc((size_t)(n ? n : 1) * sizeof *freelist); /* buffers whose memory is free */
  int nfree = 0, shared = 0;
  if (!last || !freelist) { /* no plan: every buffer gets its own memory */
    free(last), free(freelist);
    return 0;
  }
  for (int b = 0; b < n; b++) last[b] = -1, s->bufs[b].reuse = 0;
  for (int i = 0; i < s->nitems; i++)
    for (int k = 0; k < s->items[i].nbufs; k++) last[s->items[i].bufs[k]] = i;
  for (int i = 0; i < s->nitems; i++) {
    const ScheduleItem *it = &s->items[i];
    for (int o = 0; o < it->nout; o++) {
      int b = it->bufs[o], k;
      if (!new_output(s, b)) continue;
      if ((k = in_place_source(s, keep, last, i, o, in_place)) >= 0) {
        s->bufs[b].reuse = it->bufs[k] + 1;
        last[it->bufs[k]] = -2; /* its memory is b's now: never on the free list */
        shared++;
        continue;
      }
      if (keep[b]) continue;
      /* the most recently freed match: its memory is the likeliest in cache */
      for (int f = nfree - 1; f >= 0; f--) {
        if (!same_kind(&s->bufs[freelist[f]], &s->bufs[b])) continue;
        s->bufs[b].reuse = freelist[f] + 1;
        memmove(freelist + f, freelist + f + 1, (size_t)(--nfree - f) * sizeof *freelist);
        shared++;
        break;
      }
    }
    for (int k = 0; k < it->nbufs; k++) {
      int b = it->bufs[k];
      if (last[b] == i && planned(s, keep, b)) {
        last[b] = -2; /* listed once even when an item names it twice */
        freelist[nfree++] = b;
      }
    }
  }
  free(last), free(freelist);
  return shared;
}
