/* The memory planner: intermediate buffers of one schedule share memory when
 * their lifetimes do not overlap (the seed's LRU buffer reuse).
 *
 * Walking the items in run order, a buffer is live from the item that writes
 * it to the last item that reads it. When it dies, its memory goes to a free
 * list; a later output of the same dtype, element count and device takes it over
 * instead of allocating. Only buffers no tensor will refer to after the run
 * take part (keep[] says which ones a tensor will see), and assign targets
 * (their memory is the user's) never do. A buffer read by an item is freed
 * only after that item's outputs are placed, so a kernel never reads and
 * writes the same memory through two buffers. */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

static bool planned(const Schedule *s, const bool *keep, int b) {
  const SchedBuf *sb = &s->bufs[b];
  return sb->node && !sb->buffer && !keep[b] && sb->numel != 0; /* a symbolic count is < 0 */
}

int schedule_plan(Schedule *s, const bool *keep) {
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
      int b = it->bufs[o];
      if (!planned(s, keep, b)) continue;
      /* the most recently freed match: its memory is the likeliest in cache */
      for (int f = nfree - 1; f >= 0; f--) {
        const SchedBuf *fb = &s->bufs[freelist[f]];
        if (fb->dtype != s->bufs[b].dtype || fb->numel != s->bufs[b].numel ||
            fb->device != s->bufs[b].device)
          continue;
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
