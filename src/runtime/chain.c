/* Chains (chain.h): consecutive CPU kernels over the same rows run part by
 * part (DeviceOps.launch_parts), so that the rows one kernel reads are still
 * in the core's cache when the next reads them.
 *
 * Layernorm over 4096 x 4096 floats is three kernels (the row mean, the
 * variance, the normalised write), each reading x, 64 MiB, from memory. Run
 * part by part, 32 rows at a time, x is read from memory once and twice
 * more from the core's L2.
 *
 * A chain is correct when no kernel touches, in one part, what another
 * kernel writes in another part. Codegen gives each kernel split by rows
 * alone its rows and, per buffer, a band (KernelSource.rows, KernelBuf.band):
 * row r touches only elements [r R, r R + R). Kernels with the same rows,
 * cut into the same parts, each touch rows [p S / P, (p + 1) S / P) in part
 * p; so wherever two kernels of the chain touch overlapping memory and one
 * of them writes it, both must touch it from the same first byte in bands
 * of the same bytes. Memory is compared by address (DeviceOps.host_ptr),
 * which also covers buffers the memory planner gave the same memory. */
#include "runtime/chain.h"

#include <stdint.h>
#include <stdlib.h>

#include "codegen/codegen.h"
#include "ir/dtype.h"

_Static_assert(DEV_MAX_PARTS == CG_MAX_CORES, "a part is a core of the kernel's split");

/* The most kernels in one chain (the CPU device's CPU_MAX_CHAIN). */
enum { CHAIN_MAX = 16 };

/* One buffer argument of a kernel of the chain, as memory. */
typedef struct {
  uintptr_t lo, hi; /* [lo, hi): its bytes */
  int kernel;       /* which kernel of the chain */
  bool written;
  int64_t band; /* bytes one row touches (KernelBuf.band in bytes); 0: not banded */
} Access;

typedef struct {
  Access a[CHAIN_MAX * 32];
  int n;
} Accesses;

/* Adds item's buffers as kernel k of the chain; false when some buffer has
 * no host address or no known size (then there is no chain). */
static bool add_accesses(Accesses *acc, Device *dev, const Schedule *s, const ScheduleItem *it,
                         const KernelSource *ks, DevBuffer *const *bufs, int k) {
  if (it->nbufs != ks->nbufs || acc->n + it->nbufs > (int)(sizeof acc->a / sizeof *acc->a))
    return false;
  for (int b = 0; b < it->nbufs; b++) {
    const SchedBuf *sb = &s->bufs[it->bufs[b]];
    DevBuffer *db = bufs[it->bufs[b]];
    void *p = db ? dev->ops->host_ptr(dev, db) : NULL;
    if (!p || !sint_is_int(sb->numel)) return false;
    size_t size = dt_scalar_size((ScalarType)ks->bufs[b].dtype);
    uintptr_t lo = (uintptr_t)p;
    acc->a[acc->n++] = (Access){lo, lo + (uintptr_t)sb->numel * size, k, ks->bufs[b].written,
                                ks->bufs[b].band * (int64_t)size};
  }
  return true;
}

/* No kernel touches what another writes in another part. *shared: the
 * bytes of memory two kernels or more touch (counted once per first byte);
 * *largest: of the largest buffer touched. */
static bool no_conflicts(const Accesses *acc, double *shared, double *largest) {
  *shared = 0, *largest = 0;
  for (int i = 0; i < acc->n; i++) {
    const Access *x = &acc->a[i];
    bool other = false, seen_before = false;
    for (int j = 0; j < acc->n; j++) {
      const Access *y = &acc->a[j];
      if (y->hi <= x->lo || x->hi <= y->lo) continue;
      if (x->lo == y->lo && j < i) seen_before = true;
      if (y->kernel == x->kernel) continue;
      if ((x->written || y->written) && (x->lo != y->lo || !x->band || x->band != y->band))
        return false;
      other = true;
    }
    if ((double)(x->hi - x->lo) > *largest) *largest = (double)(x->hi - x->lo);
    if (!seen_before && other) *shared += (double)(x->hi - x->lo);
  }
  return true;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* The parts for a chain whose kernels' blocks have gcd g, which share
 * `shared` bytes and whose largest buffer has `largest`: 0 (no chain) when
 * what they share fits a core's cache anyway, else the fewest parts that
 * divide g, give every core one, and keep a part of every buffer within
 * half of a core's cache. Measured on 4096 x 4096 floats (Zen 5, 1 MiB L2,
 * 2 threads; layernorm, x - max(x) and softmax, kernels one by one against
 * chained, alternating): 16 to 128 parts (a part 4 MiB to 512 KiB of x and
 * as much output) ran 5-25% faster; 256 parts lost on x - max(x), whose
 * second kernel writes as much as it reads, and 1024 lost on all three. */
static int parts_for(const Device *dev, int64_t g, double shared, double largest) {
  double cache = (double)dev->limits.cache_bytes;
  int cores = dev->limits.cores > 0 ? dev->limits.cores : 1;
  if (cache <= 0 || shared <= cache) return 0;
  for (int64_t n = cores; n <= g && n <= DEV_MAX_PARTS; n++)
    if (g % n == 0 && largest / (double)n <= cache / 2) return (int)n;
  return 0;
}

/* Item j is a kernel over item i's rows on item i's device. */
static bool same_rows(const Schedule *s, const KernelSource *const *ks, int i, int j) {
  return j < s->nitems && !s->items[j].copy && s->items[j].device == s->items[i].device && ks[j] &&
         ks[j]->rows == ks[i]->rows;
}

int chain_length(Device *dev, const Schedule *s, const KernelSource *const *ks,
                 DevBuffer *const *bufs, int i, int *parts) {
  *parts = 0;
  const ScheduleItem *first = &s->items[i];
  if (!dev->ops->launch_parts || !dev->ops->host_ptr || first->copy || !ks[i] || ks[i]->rows <= 0 ||
      !same_rows(s, ks, i, i + 1))
    return 1; /* the usual case, decided before any work */
  Accesses *acc = malloc(sizeof *acc);
  if (!acc) return 1; /* out of memory: the kernels run one by one */
  acc->n = 0;
  int len = 1;
  int64_t g = ks[i]->global[0];
  bool ok = add_accesses(acc, dev, s, first, ks[i], bufs, 0);
  for (int j = i + 1; ok && len < CHAIN_MAX && same_rows(s, ks, i, j); j++) {
    const ScheduleItem *it = &s->items[j];
    int saved = acc->n;
    double shared, largest;
    int64_t gj = gcd64(g, ks[j]->global[0]);
    int n = add_accesses(acc, dev, s, it, ks[j], bufs, len) && no_conflicts(acc, &shared, &largest)
                ? parts_for(dev, gj, shared, largest)
                : 0;
    if (!n) {
      acc->n = saved;
      break;
    }
    len++, g = gj, *parts = n;
  }
  free(acc);
  return len;
}
