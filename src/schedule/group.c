/* Multi-output kernels: which materialised nodes are stored by one kernel
 * (SchedNode.group). Two ways in: kernels that would both fuse one reduce
 * (decide.c's rule_reduces asks sched_try_group instead of materialising the
 * reduce), and siblings -- materialised nodes of one level, kernel shape and
 * reduce -- grouped after the passes (sched_group_siblings). A group is named
 * by its lowest index; kernelize.c builds one AST with a store per member.
 * docs/schedule.md has the rules. */
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

static bool groupable(SchedGraph *g, int64_t i) { return g->topo[i]->op != OP_ASSIGN; }

/* Kernels of i and j run in one shape: the nodes' shapes agree, and both run
 * in them, or both in the shape of reduces that agree (SchedNode.kred). */
static bool same_kernel_shape(SchedGraph *g, int64_t i, int64_t j) {
  int32_t ki = g->info[i].kred, kj = g->info[j].kred;
  if (!same_shape(g->topo[i], g->topo[j]) || (ki < 0) != (kj < 0)) return false;
  return ki < 0 || sched_same_reduce(g->topo[ki], g->topo[kj]);
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

/* The groups of a and b become one multi-output kernel (the seed's output
 * groups) when all their kernels run in one shape, none is an assign, none
 * depends on another, and the device can bind all their buffers. */
bool sched_try_group(SchedGraph *g, int64_t a, int64_t b) {
  int64_t ga = sched_group(g, a), gb = sched_group(g, b);
  if (ga == gb) return true;
  /* shape and reduce agree within a group: one member of each speaks for it */
  if (!same_kernel_shape(g, ga, gb) || !same_reduce_of(g, ga, gb)) return false;
  /* the members: ga's from the front of mem, gb's from the back */
  size_t cap = g->n ? g->n : 1, na = 0, nb = 0;
  int64_t *mem = malloc(cap * sizeof *mem);
  bool ok = mem != NULL;
  for (size_t i = 0; ok && i < g->n; i++) {
    int64_t gi = sched_realized(g, (int64_t)i) ? sched_group(g, (int64_t)i) : -1;
    if (gi == ga || gi == gb) ok = groupable(g, (int64_t)i);
    if (gi == ga) mem[na++] = (int64_t)i;
    if (gi == gb) mem[cap - ++nb] = (int64_t)i;
  }
  for (size_t i = 0; ok && i < na; i++)
    for (size_t j = cap - nb; ok && j < cap; j++)
      ok = g->info[mem[i]].level == g->info[mem[j]].level ||
           (!depends_on(g, mem[i], mem[j]) && !depends_on(g, mem[j], mem[i]));
  free(mem);
  if (!ok || group_buffers(g, ga, gb) > sched_buffer_limit(g))
    return false; /* the kernel could not bind it */
  int64_t lo = ga < gb ? ga : gb;
  g->info[ga].group = g->info[gb].group = (int32_t)lo;
  return true;
}

/* Candidates are nodes of one level (independent by construction), taken in
 * order: each joins the first open group of its kind that takes it, else opens
 * one. Linear in the materialised nodes for the usual few kinds per level. */
static bool candidate(SchedGraph *g, size_t i) {
  return sched_realized(g, (int64_t)i) && groupable(g, (int64_t)i);
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
    while (o < nopen && !(same_kernel_shape(g, open[o], j) && same_reduce_of(g, open[o], j))) o++;
    if (o == nopen)
      open[nopen++] = j;
    else if (!sched_try_group(g, open[o], j))
      open[o] = j; /* full (the buffer limit): j opens the next group of its kind */
  }
  free(node), free(open);
}
