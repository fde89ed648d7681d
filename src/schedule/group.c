/* Multi-output kernels: which materialised nodes are stored by one kernel
 * (SchedNode.group). Three ways in: kernels that would both fuse one reduce
 * (decide.c's rule_reduces asks sched_try_group instead of materialising the
 * reduce); siblings -- materialised nodes of one level, kernel shape and
 * reduce -- grouped after the passes (sched_group_siblings); and assigns that
 * read another assign's result at their own element (sched_group_chains). A
 * group is named by its lowest index; kernelize.c builds one AST with a store
 * per member. docs/schedule.md has the rules. */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule_internal.h"

int64_t sched_group(SchedGraph *g, int64_t i) {
  while (g->info[i].group != i) i = g->info[i].group = g->info[g->info[i].group].group;
  return i;
}

/* SchedNode.level for every node, sources first. Two materialised nodes of one
 * level cannot depend on each other, which spares most depends_on walks. */
void sched_levels(SchedGraph *g) {
  for (size_t i = 0; i < g->n; i++) {
    UOp *u = g->topo[i];
    int32_t m = 0;
    for (uint32_t k = 0; !graph_is_leaf(u) && k < u->nsrc; k++) {
      int32_t l = g->info[sched_index(g, u->src[k])].level;
      if (l > m) m = l;
    }
    g->info[i].level = m + sched_realized(g, (int64_t)i);
  }
}

/* Is node `below` in the graph under `above` (any path, materialised or not)? */
static bool depends_on(SchedGraph *g, int64_t above, int64_t below) {
  if (below >= above) return false; /* sources come first in topo */
  SStack st = {0};
  bool ok = sstack_push(&st, above, 0), found = false;
  sched_new_walk(g);
  int64_t i;
  int unused;
  while (ok && !found && sstack_pop(&st, &i, &unused)) {
    if (i < below || !sched_visit(g, i, 1)) continue;
    found = i == below;
    UOp *u = g->topo[i];
    for (uint32_t k = 0; ok && !graph_is_leaf(u) && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
  }
  sstack_free(&st);
  return found || !ok; /* out of memory: say yes, which only keeps kernels apart */
}

static bool same_shape(UOp *a, UOp *b) {
  int64_t sa[TVK_MAX_DIMS], sb[TVK_MAX_DIMS];
  int na = graph_shape(a, sa), nb = graph_shape(b, sb);
  return na == nb && memcmp(sa, sb, (size_t)na * sizeof *sa) == 0;
}

/* How member i's kernel region (its value, down to other kernels' results
 * and leaves) reads buffer b -- or, with b NULL, reaches materialised node
 * `node`: READ_DIRECT where only through elementwise ops and views of all of
 * it in row-major order (so at the kernel's own index, as the store writes),
 * READ_OTHER for any other path. An ASSIGN's target is not a read. The other
 * materialised nodes the region stops at go to *bound when it is given. */
enum { READ_DIRECT = 1, READ_OTHER = 2 };
static int reads_of(SchedGraph *g, int64_t i, const UOp *b, int64_t node, SStack *bound) {
  SStack st = {0};
  UOp *root = g->topo[i];
  int64_t start = root->op == OP_ASSIGN ? sched_index(g, root->src[root->nsrc - 1]) : i;
  int how = 0, direct;
  int64_t x;
  bool ok = sstack_push(&st, start, 1);
  sched_new_walk(g);
  while (ok && sstack_pop(&st, &x, &direct)) {
    if (!sched_visit(g, x, direct)) continue;
    UOp *u = g->topo[x];
    if (!b && x == node) {
      how |= direct ? READ_DIRECT : READ_OTHER;
      continue;
    }
    if (x != start && sched_realized(g, x)) { /* another kernel's result */
      if (bound) ok = sstack_push(bound, x, 0);
      continue;
    }
    bool whole = u->op == OP_VIEW && st_contiguous(u->arg.st) &&
                 st_numel(u->arg.st) == graph_numel(u->src[0]);
    if (b && u->op == OP_VIEW && u->src[0] == b) {
      how |= direct && whole ? READ_DIRECT : READ_OTHER;
      continue;
    }
    if (graph_is_leaf(u)) continue;
    int d = direct && (op_in((Op)u->op, G_ELEMENTWISE) || whole);
    for (uint32_t k = 0; ok && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), d);
  }
  sstack_free(&st);
  return ok ? how : READ_OTHER; /* out of memory: say the worst, which keeps kernels apart */
}

/* A kernel storing the members mem[0..n) may overwrite an assign's target
 * while it reads it only where no invocation can see an element before its
 * write: every member reads the target directly (its own element; an
 * invocation's one load then serves them all), and the assign itself does,
 * so that its store comes after that load. A target that only its own
 * assign reads needs nothing more (kernelize.c's check_assign). */
static bool assigns_safe(SchedGraph *g, const int64_t *mem, size_t n) {
  for (size_t a = 0; a < n; a++) {
    UOp *u = g->topo[mem[a]];
    if (u->op != OP_ASSIGN) continue;
    const UOp *target = u->src[0]->src[0];
    bool others = false;
    for (size_t j = 0; j < n; j++) {
      if (j == a) continue;
      int how = reads_of(g, mem[j], target, -1, NULL);
      if (how & READ_OTHER) return false;
      others |= how != 0;
    }
    if (others && reads_of(g, mem[a], target, -1, NULL) != READ_DIRECT) return false;
  }
  return true;
}

/* Kernels of i and j run in one shape: the nodes' shapes agree, and both run
 * in them, or both in the shape of reduces that agree (SchedNode.kred). */
static bool same_kernel_shape(SchedGraph *g, int64_t i, int64_t j) {
  int32_t ki = g->info[i].kred, kj = g->info[j].kred;
  if (!same_shape(g->topo[i], g->topo[j]) || (ki < 0) != (kj < 0)) return false;
  return ki < 0 || sched_same_reduce(g->topo[ki], g->topo[kj]);
}

/* Kernels of i and j run on one device, and neither is a copy. */
static bool same_device(SchedGraph *g, int64_t i, int64_t j) {
  return g->info[i].device == g->info[j].device && !sched_is_copy(g->topo[i]) &&
         !sched_is_copy(g->topo[j]);
}

static bool same_reduce_of(SchedGraph *g, int64_t i, int64_t j) {
  int32_t ri = g->info[i].red, rj = g->info[j].red;
  return (ri < 0) == (rj < 0) && (ri < 0 || sched_same_reduce(g->topo[ri], g->topo[rj]));
}

/* How many buffers one kernel storing the groups ga and gb would bind: their
 * outputs, and the buffers and other kernels' results their graphs read
 * (counted once). INT64_MAX on out of memory. */
static int64_t group_buffers(SchedGraph *g, int64_t ga, int64_t gb) {
  PtrMap in = {0};
  SStack st = {0};
  int64_t outs = 0, i;
  int unused;
  bool ok = true;
  sched_new_walk(g);
  for (size_t r = 0; ok && r < g->n; r++) {
    int64_t gr = sched_realized(g, (int64_t)r) ? sched_group(g, (int64_t)r) : -1;
    if (gr != ga && gr != gb) continue;
    outs++;
    ok = sstack_push(&st, (int64_t)r, 0);
    while (ok && sstack_pop(&st, &i, &unused)) {
      if (!sched_visit(g, i, 0)) continue;
      UOp *u = g->topo[i];
      int64_t gi = sched_realized(g, i) ? sched_group(g, i) : -1;
      if (u->op == OP_BUFFER || (gi >= 0 && gi != ga && gi != gb)) {
        ok = ptrmap_put(&in, u, 1);
        continue;
      }
      if (graph_is_leaf(u)) continue;
      for (uint32_t k = 0; ok && k < u->nsrc; k++)
        ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
    }
  }
  int64_t n = ok ? outs + (int64_t)in.n : INT64_MAX;
  sstack_free(&st);
  ptrmap_free(&in);
  return n;
}

/* The members of groups ga and gb: ga's in *a (na), gb's in *b (nb), from one
 * allocation at *a. false on out of memory. */
static bool members(SchedGraph *g, int64_t ga, int64_t gb, int64_t **a, size_t *na, int64_t **b,
                    size_t *nb) {
  size_t n = 0, m = 0;
  for (size_t i = 0; i < g->n; i++) {
    int64_t gi = sched_realized(g, (int64_t)i) ? sched_group(g, (int64_t)i) : -1;
    n += gi == ga, m += gi == gb;
  }
  int64_t *v = malloc((n + m ? n + m : 1) * sizeof *v);
  if (!v) return false;
  *a = v, *b = v + n, *na = 0, *nb = 0;
  for (size_t i = 0; i < g->n; i++) {
    int64_t gi = sched_realized(g, (int64_t)i) ? sched_group(g, (int64_t)i) : -1;
    if (gi == ga) (*a)[(*na)++] = (int64_t)i;
    if (gi == gb) (*b)[(*nb)++] = (int64_t)i;
  }
  return true;
}

/* ga and gb become one group when the device can bind all its buffers. */
static bool join(SchedGraph *g, int64_t ga, int64_t gb) {
  if (group_buffers(g, ga, gb) > sched_buffer_limit(g)) return false;
  int64_t lo = ga < gb ? ga : gb;
  g->info[ga].group = g->info[gb].group = (int32_t)lo;
  return true;
}

/* The groups of a and b become one multi-output kernel (the seed's output
 * groups) when all their kernels run in one shape, none depends on another,
 * the assigns among them read their targets safely (assigns_safe), and the
 * device can bind all their buffers. */
bool sched_try_group(SchedGraph *g, int64_t a, int64_t b) {
  int64_t ga = sched_group(g, a), gb = sched_group(g, b);
  if (ga == gb) return true;
  /* shape, reduce and device agree within a group: one member of each speaks for it */
  if (!same_kernel_shape(g, ga, gb) || !same_reduce_of(g, ga, gb) || !same_device(g, ga, gb))
    return false;
  int64_t *A, *B;
  size_t na, nb;
  if (!members(g, ga, gb, &A, &na, &B, &nb)) return false;
  bool ok = true;
  for (size_t i = 0; ok && i < na; i++)
    for (size_t j = 0; ok && j < nb; j++)
      ok = g->info[A[i]].level == g->info[B[j]].level ||
           (!depends_on(g, A[i], B[j]) && !depends_on(g, B[j], A[i]));
  ok = ok && assigns_safe(g, A, na + nb); /* B follows A in one allocation */
  free(A);
  return ok && join(g, ga, gb);
}

/* Candidates are nodes of one level (independent by construction), taken in
 * order: each joins the first open group of its kind that takes it, else opens
 * one. Linear in the materialised nodes for the usual few kinds per level. */
static bool candidate(SchedGraph *g, size_t i) {
  return sched_realized(g, (int64_t)i) && !sched_is_copy(g->topo[i]);
}

void sched_group_siblings(SchedGraph *g) {
  sched_levels(g);
  size_t cap = g->n ? g->n : 1, m = 0;
  int64_t *node = malloc(cap * sizeof *node), *open = malloc(cap * sizeof *open);
  size_t *start = calloc(cap + 2, sizeof *start); /* counting sort by level (<= n) */
  if (!node || !open || !start) { /* out of memory: no grouping, which is always right */
    free(node), free(open), free(start);
    return;
  }
  for (size_t i = 0; i < g->n; i++)
    if (candidate(g, i)) start[g->info[i].level + 1]++;
  for (size_t l = 0; l <= cap; l++) start[l + 1] += start[l];
  for (size_t i = 0; i < g->n; i++)
    if (candidate(g, i)) node[start[g->info[i].level]++] = (int64_t)i, m++;
  free(start);
  for (size_t k = 0, nopen = 0; k < m; k++) {
    int64_t j = node[k];
    if (k == 0 || g->info[node[k - 1]].level != g->info[j].level) nopen = 0; /* a new level */
    size_t o = 0; /* the open group of j's kind */
    while (o < nopen && !(same_kernel_shape(g, open[o], j) && same_reduce_of(g, open[o], j) &&
                          same_device(g, open[o], j)))
      o++;
    if (o == nopen)
      open[nopen++] = j;
    else if (!sched_try_group(g, open[o], j))
      open[o] = j; /* full (the buffer limit): j opens the next group of its kind */
  }
  free(node), free(open);
}

/* gb's assigns read ga's results (an optimiser's parameter update reads its
 * new moments): one kernel can store them all, computing ga's values once
 * and using them in gb's (kernelize.c inlines an assign of its own group),
 * when every read of a ga member by a gb member is direct (reads_of: the
 * element the kernel computes), nothing another kernel computes lies between
 * them, nothing of ga reads gb, the assigns stay safe and the buffers fit. */
static bool try_chain(SchedGraph *g, int64_t i, int64_t j) {
  int64_t ga = sched_group(g, i), gb = sched_group(g, j);
  if (ga == gb) return true;
  if (!same_kernel_shape(g, ga, gb) || !same_reduce_of(g, ga, gb) || !same_device(g, ga, gb))
    return false;
  int64_t *A, *B;
  size_t na, nb;
  if (!members(g, ga, gb, &A, &na, &B, &nb)) return false;
  SStack bound = {0};
  bool ok = true;
  for (size_t x = 0; ok && x < na; x++)
    for (size_t y = 0; ok && y < nb; y++) {
      ok = !depends_on(g, A[x], B[y]) && !(reads_of(g, B[y], NULL, A[x], &bound) & READ_OTHER);
    }
  int64_t y;
  int unused;
  while (ok && sstack_pop(&bound, &y, &unused)) {
    int64_t gy = sched_group(g, y);
    for (size_t x = 0; ok && gy != ga && gy != gb && x < na; x++) ok = !depends_on(g, y, A[x]);
  }
  sstack_free(&bound);
  ok = ok && assigns_safe(g, A, na + nb); /* B follows A in one allocation */
  free(A);
  return ok && join(g, ga, gb);
}

void sched_group_chains(SchedGraph *g) {
  SStack reached = {0}; /* try_chain's walks leave it alone */
  for (size_t j = 0; j < g->n; j++) {
    if (!sched_realized(g, (int64_t)j) || g->topo[j]->op != OP_ASSIGN) continue;
    (void)reads_of(g, (int64_t)j, NULL, -1, &reached); /* the kernels j reads */
    int64_t i;
    int unused;
    while (sstack_pop(&reached, &i, &unused))
      if (g->topo[i]->op == OP_ASSIGN) (void)try_chain(g, i, (int64_t)j);
  }
  sstack_free(&reached);
}
