/* Realize decisions: which nodes of the tensor graph are materialised into
 * buffers. Everything not materialised is fused into the kernel of a node
 * that is. The decisions are rules, each run to a fixed point in order (the
 * table at the end); a rule only adds materialised nodes, so each pass ends.
 *
 * The invariant the passes establish, and kernelize.c relies on: starting from
 * a materialised node and going down through nodes that are not, one meets
 * only elementwise ops (ALU, CAST), VIEWs and leaves, except for REDUCE_AXIS
 * nodes that
 *   - no VIEW sits above within the kernel (views can be pushed through
 *     elementwise ops to the loads, never through a reduce),
 *   - are not inside another reduce's input, are fused into one kernel only,
 *     and reduce the same axes of the same shape as the kernel's other reduces;
 * and a VIEW with a mask (a pad) sits only above ops that keep f(0, ..) = 0, so
 * that pushing it to the loads (which read 0 where the mask is off) is exact.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/vec.h"
#include "schedule/schedule_internal.h"

static bool st_masked(const ShapeTracker *st) {
  for (int i = 0; i < st->nviews; i++)
    if (st->views[i].has_mask) return true;
  return false;
}

bool sched_view_is_identity(const UOp *v) {
  int64_t shape[TVK_MAX_DIMS];
  int nd = graph_shape((UOp *)v->src[0], shape);
  const ShapeTracker *st = v->arg.st;
  return st_contiguous(st) && st_ndim(st) == nd &&
         memcmp(st_shape(st), shape, (size_t)nd * sizeof *shape) == 0;
}

/* A padded view can be pushed below an op with f(0, ..., 0) = 0: at a padded
 * position every input reads 0 (G_KEEPS_ZERO in ops.def). The seed lists the
 * complement (UnsafePad: RECIP LOG2 EXP2 IDIV POW); the facts are an
 * allow-list, which also keeps FDIV (0/0 = NaN), MOD, MULACC and ops added
 * later out until someone checks them. */
static bool keeps_zero(Op op) { return op_in(op, G_KEEPS_ZERO); }

static bool is_elementwise(Op op) { return op_in(op, G_ELEMENTWISE); }

/* VIEW(R, st) with R a reduce and st a reshape of R's result (row-major, all of
 * it): a kernel whose root reaches it through elementwise ops only can run in
 * R's shape instead (rule_reduces), so e.g. the keepdim=false reshape of a
 * matmul's reduce does not stop the bias and relu from fusing with it. */
static bool is_reduce_reshape(UOp *v) {
  return v->op == OP_VIEW && v->src[0]->op == OP_REDUCE_AXIS && st_contiguous(v->arg.st) &&
         st_numel(v->arg.st) == graph_numel(v->src[0]);
}

bool sched_view_inverse(UOp *v, int64_t *out_strides) {
  const ShapeTracker *st = v->arg.st;
  int64_t xs[TVK_MAX_DIMS], xstr[TVK_MAX_DIMS], ostr[TVK_MAX_DIMS];
  int nd = graph_shape(v->src[0], xs);
  const View *w = &st->views[0];
  if (st->nviews != 1 || w->has_mask || w->offset != 0 || st_numel(st) != graph_numel(v->src[0]))
    return false;
  strides_for_shape(nd, xs, xstr);
  strides_for_shape(w->ndim, w->shape, ostr);
  bool used[TVK_MAX_DIMS] = {false};
  for (int d = 0; d < nd; d++) out_strides[d] = 0;
  for (int k = 0; k < w->ndim; k++) {
    if (w->shape[k] == 1) continue;
    int d = 0;
    while (d < nd && (used[d] || xs[d] != w->shape[k] || xstr[d] != w->strides[k])) d++;
    if (d == nd) return false; /* not one of x's dims: a reshape that merges or splits */
    used[d] = true;
    out_strides[d] = ostr[k];
  }
  return true;
}

/* CONTIGUOUS(VIEW(R, st)) where st reorders R's dims (a permute, with size-1
 * dims added or dropped) and R, a reduce, and the view have no other consumer
 * in the graph: the CONTIGUOUS's kernel computes R and stores it through the
 * inverse view (SchedNode.kperm), as the seed realizes the contiguous child of
 * a reduce instead of the reduce and a copy. */
static bool is_reduce_permute(SchedGraph *g, UOp *v) {
  int64_t strides[TVK_MAX_DIMS];
  if (v->op != OP_VIEW || v->src[0]->op != OP_REDUCE_AXIS || is_reduce_reshape(v) ||
      !sched_view_inverse(v, strides))
    return false;
  int64_t vi = sched_index(g, v), r = sched_index(g, v->src[0]);
  return g->info[vi].nparents == 1 && g->info[r].nparents == 1 &&
         g->topo[g->info[vi].parent]->op == OP_CONTIGUOUS;
}

/* A view that makes copies of x's elements (an expand), rather than only
 * reordering, shrinking or padding them (the seed: a padded view is "simple"
 * when its valid region is no larger than x). */
static bool view_expands(UOp *v) {
  const ShapeTracker *st = v->arg.st;
  sint base = graph_numel(v->src[0]);
  /* undecided for symbolic sizes: copies, to be safe (x is computed once) */
  if (sint_proven_le(st_numel(st), base)) return false;
  if (st->nviews != 1 || !st->views[0].has_mask) return true;
  sint valid = 1;
  for (int d = 0; d < st->views[0].ndim; d++)
    valid = sint_mul(valid, sint_sub(st->views[0].mask[d][1], st->views[0].mask[d][0]));
  return !sint_proven_le(valid, base);
}

/* SchedNode.mem for every node, sources first: does computing it read memory
 * (a buffer, a reduce, a materialised copy), or only constants and aranges? */
static void mark_mem(SchedGraph *g) {
  for (size_t i = 0; i < g->n; i++) {
    UOp *u = g->topo[i];
    bool m =
        u->op == OP_BUFFER || u->op == OP_REDUCE_AXIS || u->op == OP_CONTIGUOUS || u->op == OP_COPY;
    for (uint32_t k = 0; !m && !graph_is_leaf(u) && k < u->nsrc; k++)
      m = g->info[sched_index(g, u->src[k])].mem;
    g->info[i].mem = m;
  }
}

/* ---------------------------------------------------------------- rule: outputs, contiguous */

UOp *sched_copy_source(const UOp *copy) {
  UOp *x = copy->src[0];
  if (x->device == UOP_DEVICE_NONE) return NULL;
  if (sched_contiguous_noop(x)) x = x->src[0];
  if (x->op == OP_VIEW && st_contiguous(x->arg.st)) x = x->src[0];
  return x;
}

bool sched_contiguous_noop(const UOp *u) {
  if (u->op != OP_CONTIGUOUS || u->src[0]->op != OP_VIEW) return false;
  const UOp *v = u->src[0], *y = v->src[0];
  if (graph_is_leaf(y) && y->op != OP_BUFFER) return false; /* a constant has no memory to view */
  if (!st_contiguous(v->arg.st)) return false;
  if (y->op == OP_BUFFER) return true; /* a row-major prefix of memory: plain already */
  return st_numel(v->arg.st) ==
         graph_numel((UOp *)y); /* all of y: computing y is computing the CONTIGUOUS */
}

/* Every assign is materialised (into its target). Every explicit CONTIGUOUS is
 * materialised, or for a no-op one the base below it -- except a CONTIGUOUS of
 * a buffer an assign here overwrites: a copy of the old value (realize.c makes
 * these for tensors that still read it), a real kernel even where the view is
 * plain. A requested tensor's base is materialised (the tensor then views its
 * buffer) unless it is data already. */
static tvk_status rule_outputs(SchedGraph *g, int n, UOp *const *roots) {
  PtrMap assigned = {0}; /* BUFFER UOps assigned in this graph */
  for (size_t i = 0; i < g->n; i++) {
    UOp *u = g->topo[i];
    if (u->op != OP_ASSIGN) continue;
    sched_mark(g, (int64_t)i, WHY_ASSIGN, OP_NONE);
    if (!ptrmap_put(&assigned, u->src[0]->src[0], 1)) {
      ptrmap_free(&assigned);
      return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    }
  }
  for (size_t i = 0; i < g->n; i++) {
    UOp *u = g->topo[i];
    if (u->op != OP_CONTIGUOUS) continue;
    bool copy = u->src[0]->op == OP_VIEW && ptrmap_get(&assigned, u->src[0]->src[0]) >= 0;
    if (!sched_contiguous_noop(u) || copy) {
      sched_mark(g, (int64_t)i, WHY_CONTIGUOUS, OP_NONE);
      continue;
    }
    g->info[i].alias = true;
    UOp *y = u->src[0]->src[0];
    if (!graph_is_leaf(y)) sched_mark(g, sched_index(g, y), WHY_CONTIGUOUS, OP_NONE);
  }
  /* A COPY is materialised on its device; what it reads, on the source's. */
  tvk_status st = TVK_OK;
  for (size_t i = 0; i < g->n && st == TVK_OK; i++) {
    UOp *u = g->topo[i];
    if (u->op != OP_COPY) continue;
    sched_mark(g, (int64_t)i, WHY_COPY, OP_NONE);
    UOp *x = sched_copy_source(u);
    if (!x || x->op == OP_BUFFER) continue;
    if (graph_is_leaf(x) || x->op == OP_VIEW) /* the frontend copies a contiguous one */
      st = err_set(g->sc->err, TVK_ERR_INTERNAL,
                   "schedule: a copy reads a %s that is not in memory row-major",
                   op_name((Op)x->op));
    else
      sched_mark(g, sched_index(g, x), WHY_COPY_SOURCE, OP_NONE);
  }
  for (int r = 0; r < n && st == TVK_OK; r++) {
    UOp *base = roots[r]->op == OP_VIEW ? roots[r]->src[0] : roots[r];
    /* An arange is computed, not stored: the requested view of it is the kernel. */
    if (base->op == OP_ARANGE) base = roots[r];
    int64_t b = sched_index(g, base);
    if (!graph_is_leaf(base) && !sched_alias(g, b)) sched_mark(g, b, WHY_OUTPUT, OP_NONE);
  }
  ptrmap_free(&assigned);
  return st;
}

/* ---------------------------------------------------------------- rule: views go to the loads */

typedef struct {
  Op unsafe;      /* an op below a mask that does not keep 0; OP_NONE if none */
  SStack blocked; /* nodes a view cannot pass (reduces): state bit unused */
} ViewWalk;

/* Walks what a view over node `start` would be pushed through, down to the
 * materialised nodes and leaves. */
static bool walk_view(SchedGraph *g, int64_t start, bool masked, ViewWalk *w) {
  SStack st = {0};
  bool ok = sstack_push(&st, start, masked);
  sched_new_walk(g);
  int64_t i;
  int m;
  while (ok && sstack_pop(&st, &i, &m)) {
    if (!sched_visit(g, i, m)) continue;
    UOp *u = g->topo[i];
    if (graph_is_leaf(u) || sched_realized(g, i)) continue;
    if (u->op == OP_VIEW) {
      ok = sstack_push(&st, sched_index(g, u->src[0]), m || st_masked(u->arg.st));
    } else if (sched_alias(g, i)) {
      ok = sstack_push(&st, sched_index(g, u->src[0]), m); /* a view of memory, like a VIEW */
    } else if (is_elementwise((Op)u->op)) {
      if (m && !keeps_zero((Op)u->op) && w->unsafe == OP_NONE) w->unsafe = (Op)u->op;
      for (uint32_t k = 0; ok && k < u->nsrc; k++)
        ok = sstack_push(&st, sched_index(g, u->src[k]), m);
    } else {
      ok = sstack_push(&w->blocked, i, 0); /* REDUCE_AXIS, or an op views do not know */
    }
  }
  sstack_free(&st);
  return ok;
}

/* VIEW(x, st) over a node x that is not materialised: the view is pushed
 * through x to the loads below. Where it cannot go, something is materialised:
 * a padded view over an op that turns 0 into something else materialises x
 * (the seed's rule for unsafe pads), and a view meeting a reduce materialises
 * the reduce (never recomputed per element of an expand). */
static tvk_status rule_views(SchedGraph *g, bool *changed) {
  for (size_t v = 0; v < g->n; v++) {
    UOp *u = g->topo[v];
    if (u->op != OP_VIEW) continue;
    int64_t x = sched_index(g, u->src[0]);
    if (graph_is_leaf(u->src[0]) || sched_realized(g, x) || sched_view_is_identity(u)) continue;
    if (is_reduce_reshape(u) || is_reduce_permute(g, u)) continue; /* rule_reduces decides */
    /* An expand of a computation that reads memory: computed once into a buffer
     * rather than once per copy (the seed realizes every expanded base). Ops on
     * constants and aranges only are cheaper to recompute than to load. */
    if (is_elementwise((Op)u->src[0]->op) && g->info[x].mem && view_expands(u)) {
      *changed |= sched_mark(g, x, WHY_EXPAND, (Op)u->src[0]->op);
      continue;
    }
    ViewWalk w = {.unsafe = OP_NONE};
    if (!walk_view(g, x, st_masked(u->arg.st), &w)) {
      sstack_free(&w.blocked);
      return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    }
    if (w.unsafe != OP_NONE) {
      *changed |= sched_mark(g, x, WHY_UNSAFE_PAD, w.unsafe);
    } else {
      for (size_t k = 0; k < w.blocked.n; k++) {
        int64_t b = w.blocked.v[k] >> 1;
        *changed |= sched_mark(g, b, WHY_VIEW_BLOCKED, (Op)g->topo[b]->op);
      }
    }
    sstack_free(&w.blocked);
  }
  return TVK_OK;
}

/* ---------------------------------------------------------------- rule: reduces */

/* Two reduces can share a kernel when they reduce the same axes of the same
 * shape (codegen/kernel.h: reduces of one kernel reduce the same axes). */
bool sched_same_reduce(UOp *a, UOp *b) {
  int64_t sa[TVK_MAX_DIMS], sb[TVK_MAX_DIMS];
  int na = graph_shape(a->src[0], sa), nb = graph_shape(b->src[0], sb);
  if (na != nb || memcmp(sa, sb, (size_t)na * sizeof *sa) != 0) return false;
  uint32_t ma = 0, mb = 0;
  for (int i = 0; i < a->arg.red.n; i++)
    if (sa[a->arg.red.axes[i]] != 1) ma |= 1u << a->arg.red.axes[i];
  for (int i = 0; i < b->arg.red.n; i++)
    if (sb[b->arg.red.axes[i]] != 1) mb |= 1u << b->arg.red.axes[i];
  return ma == mb;
}

/* Reduces met by a second kernel, decided after the walks of a round: the two
 * kernels become one (sched_try_group), or the reduce is materialised. */
typedef struct {
  struct SharedReduce {
    int64_t owner, root, reduce; /* the kernel owning it, the other kernel, the reduce */
  } * v;
  size_t n, cap;
} Shared;

static bool shared_add(Shared *s, int64_t owner, int64_t root, int64_t reduce) {
  return VEC_PUSH(s->v, s->n, s->cap, ((struct SharedReduce){owner, root, reduce}));
}

/* Visits one reduce met in root's kernel; true to walk into its input. */
static bool visit_reduce(SchedGraph *g, int64_t root, int64_t i, int inside, UOp **first,
                         Shared *shared, bool *changed) {
  UOp *u = g->topo[i];
  SchedWhy why = WHY_NONE;
  int64_t owner = g->info[i].owner;
  if (!inside && owner >= 0 && owner != root) {
    if (*first && !sched_same_reduce(*first, u)) {
      *changed |= sched_mark(g, i, WHY_REDUCE_MISMATCH, OP_REDUCE_AXIS);
    } else {
      if (!*first) *first = u;
      if (!shared_add(shared, owner, root, i)) /* out of memory: materialise, always right */
        *changed |= sched_mark(g, i, WHY_REDUCE_SHARED, OP_REDUCE_AXIS);
    }
    return false;
  }
  if (inside)
    why = WHY_REDUCE_NESTED;
  else if (*first && !sched_same_reduce(*first, u))
    why = WHY_REDUCE_MISMATCH;
  if (why != WHY_NONE) {
    *changed |= sched_mark(g, i, why, OP_REDUCE_AXIS);
    return false;
  }
  g->info[i].owner = root;
  if (!*first) *first = u;
  return true;
}

/* Stamps SchedNode.direct on the nodes reached from root through elementwise
 * ops only (no view, reduce or materialised node between). */
static bool mark_direct(SchedGraph *g, int64_t root) {
  SStack st = {0};
  bool ok = sstack_push(&st, root, 0);
  uint32_t stamp = sched_new_walk(g);
  int64_t i;
  int unused;
  while (ok && sstack_pop(&st, &i, &unused)) {
    if (!sched_visit(g, i, 0)) continue;
    g->info[i].direct = stamp;
    UOp *u = g->topo[i];
    if (i != root && (sched_realized(g, i) || !is_elementwise((Op)u->op))) continue;
    for (uint32_t k = 0; ok && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
  }
  sstack_free(&st);
  return ok;
}

/* A reduce behind a reshape view in root's kernel, or behind a reordering view
 * that is root's whole value (root the CONTIGUOUS child): fused when the view
 * is reached from root through elementwise ops only (the kernel then runs in
 * the reduce's shape: SchedNode.kred, kperm), else the reduce is materialised.
 * True to walk on into the reduce. */
static bool visit_reduce_reshape(SchedGraph *g, int64_t root, int64_t v, uint32_t direct,
                                 int inside, bool *changed) {
  UOp *view = g->topo[v];
  int64_t r = sched_index(g, view->src[0]);
  if (sched_realized(g, r)) return false;
  /* a permutation: only as the whole value of the CONTIGUOUS being computed */
  bool perm = !is_reduce_reshape(view);
  bool ok = !inside && g->info[v].direct == direct &&
            (!perm || (g->topo[root]->op == OP_CONTIGUOUS && g->topo[root]->src[0] == view)) &&
            (g->info[root].kred < 0 || sched_same_reduce(g->topo[g->info[root].kred], g->topo[r]));
  if (!ok) {
    *changed |= sched_mark(g, r, WHY_VIEW_BLOCKED, OP_VIEW);
    return false;
  }
  g->info[root].kred = (int32_t)r;
  g->info[root].kperm = perm;
  return true;
}

/* Walks the kernel of one materialised node: what it fuses. */
static bool walk_kernel(SchedGraph *g, int64_t root, Shared *shared, bool *changed) {
  SStack st = {0};
  UOp *first = NULL;
  g->info[root].kred = -1;
  g->info[root].kperm = false;
  if (!mark_direct(g, root)) return false;
  uint32_t direct = g->stamp;
  bool ok = sstack_push(&st, root, 0);
  sched_new_walk(g);
  int64_t i;
  int inside;
  while (ok && sstack_pop(&st, &i, &inside)) {
    if (!sched_visit(g, i, inside)) continue;
    UOp *u = g->topo[i];
    if (graph_is_leaf(u) || (i != root && sched_realized(g, i))) continue;
    if ((is_reduce_reshape(u) && !sched_view_is_identity(u)) || is_reduce_permute(g, u)) {
      if (visit_reduce_reshape(g, root, i, direct, inside, changed))
        ok = sstack_push(&st, sched_index(g, u->src[0]), inside);
      continue;
    }
    if (u->op == OP_REDUCE_AXIS) {
      if (visit_reduce(g, root, i, inside, &first, shared, changed))
        ok = sstack_push(&st, sched_index(g, u->src[0]), 1);
      continue;
    }
    for (uint32_t k = 0; ok && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), inside);
  }
  sstack_free(&st);
  g->info[root].red = first ? (int32_t)sched_index(g, first) : -1;
  return ok;
}

/* A reduce is fused into the kernel of the materialised node above it (an
 * elementwise chain over a reduce is stored by the reduce's kernel), unless it
 * sits in another reduce's input, two kernels would both compute it, or the
 * kernel already reduces other axes: then it is materialised. */
static tvk_status rule_reduces(SchedGraph *g, bool *changed) {
  for (size_t i = 0; i < g->n; i++) g->info[i].owner = -1, g->info[i].group = (int32_t)i;
  Shared shared = {0};
  for (size_t i = 0; i < g->n; i++) {
    if (!sched_realized(g, (int64_t)i)) continue;
    if (!walk_kernel(g, (int64_t)i, &shared, changed)) {
      free(shared.v);
      return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    }
  }
  if (shared.n) sched_levels(g);
  for (size_t k = 0; k < shared.n; k++) {
    int64_t a = shared.v[k].owner, b = shared.v[k].root, r = shared.v[k].reduce;
    if (!sched_realized(g, r) && !sched_try_group(g, a, b))
      *changed |= sched_mark(g, r, WHY_REDUCE_SHARED, OP_REDUCE_AXIS);
  }
  free(shared.v);
  return TVK_OK;
}

/* ---------------------------------------------------------------- rule: buffer limit */

/* The buffers the kernel part under node x reads (through nodes that are not
 * materialised); -1 on out of memory. With cand, the elementwise nodes that
 * read memory met on the way are appended to it (room: g->n). */
static int64_t inputs_under(SchedGraph *g, int64_t x, int64_t *cand, size_t *ncand) {
  PtrMap in = {0};
  SStack st = {0};
  bool ok = sstack_push(&st, x, 0);
  sched_new_walk(g);
  int64_t i;
  int unused;
  while (ok && sstack_pop(&st, &i, &unused)) {
    if (!sched_visit(g, i, 0)) continue;
    UOp *u = g->topo[i];
    if (u->op == OP_BUFFER || (i != x && sched_realized(g, i))) {
      ok = ptrmap_put(&in, u, 1);
      continue;
    }
    if (graph_is_leaf(u)) continue;
    if (cand && i != x && is_elementwise((Op)u->op) && g->info[i].mem) cand[(*ncand)++] = i;
    for (uint32_t k = 0; ok && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
  }
  int64_t n = ok ? (int64_t)in.n : -1;
  sstack_free(&st);
  ptrmap_free(&in);
  return n;
}

static int cmp_index(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* inputs_under for every node of the kernel part under root r at once,
 * counted exactly up to cap (more: cap + 1): each node's set of buffers is
 * the union of its sources' (a buffer, a materialised node, or the set of an
 * inner node), made sources first, so one pass costs O(nodes x cap^2) where
 * asking inputs_under of each candidate cost O(nodes^2). n[i] for topo index
 * i of the part (others untouched). False on out of memory. */
static bool capped_inputs(SchedGraph *g, int64_t r, int cap, int64_t *n) {
  int32_t *slot = malloc(g->n * sizeof *slot);
  int64_t *order = malloc(g->n * sizeof *order);
  size_t norder = 0;
  SStack st = {0};
  bool ok = slot && order && sstack_push(&st, r, 0);
  sched_new_walk(g);
  int64_t i;
  int unused;
  while (ok && sstack_pop(&st, &i, &unused)) { /* the inner nodes under r */
    if (!sched_visit(g, i, 0)) continue;
    UOp *u = g->topo[i];
    if (u->op == OP_BUFFER || (i != r && sched_realized(g, i)) || graph_is_leaf(u)) continue;
    order[norder++] = i;
    for (uint32_t k = 0; ok && k < u->nsrc; k++)
      ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
  }
  sstack_free(&st);
  int32_t *sets = ok ? malloc((norder ? norder : 1) * (size_t)(cap + 1) * sizeof *sets) : NULL;
  ok = ok && sets;
  if (ok) qsort(order, norder, sizeof *order, cmp_index); /* ascending: sources first */
  for (size_t j = 0; ok && j < norder; j++) slot[order[j]] = (int32_t)j;
  for (size_t j = 0; ok && j < norder; j++) {
    UOp *u = g->topo[order[j]];
    int32_t *set = sets + j * (size_t)(cap + 1), count = 0;
    for (uint32_t k = 0; k < u->nsrc && count <= cap; k++) {
      int64_t s = sched_index(g, u->src[k]);
      UOp *su = g->topo[s];
      int32_t one = (int32_t)s, *from = &one, nfrom = 1;
      if (su->op != OP_BUFFER && !sched_realized(g, s)) {
        if (graph_is_leaf(su)) continue;
        from = sets + (size_t)slot[s] * (size_t)(cap + 1), nfrom = (int32_t)n[s];
        if (nfrom > cap) count = cap + 1;
      }
      for (int32_t e = 0; e < nfrom && count <= cap; e++) {
        bool have = false;
        for (int32_t q = 0; q < count && !have; q++) have = set[q] == from[e];
        if (!have) set[count++] = from[e];
      }
    }
    n[order[j]] = count;
  }
  free(sets);
  free(slot);
  free(order);
  return ok;
}

/* Of the candidates (with n their input counts), the elementwise node to
 * materialise under a kernel reading `total` buffers: the one reading the
 * most buffers that one kernel can still bind, else the smallest that
 * helps; -1 when none does. n may be capped above lim (capped_inputs): a
 * fitting choice is exact then, and *exact tells whether the result is. */
static int64_t pick_split(const int64_t *cand, size_t nc, const int64_t *n, int64_t total, int lim,
                          bool *exact) {
  int64_t best = -1, best_n = 0;
  for (size_t k = 0; k < nc; k++) {
    int64_t c = n[cand[k]];
    bool fits = c + 1 <= lim, best_fits = best >= 0 && best_n + 1 <= lim;
    if (c < 2 || c >= total) continue;
    if (best < 0 || (fits && (!best_fits || c > best_n)) || (!fits && !best_fits && c < best_n))
      best = cand[k], best_n = c;
  }
  *exact = best < 0 || best_n + 1 <= lim;
  return best;
}

/* A kernel reading more buffers than the device binds (a cat of forty
 * tensors, a sum of 3,000 tensors) has a part of it materialised first, as
 * the seed does past MAX_BUFS: the elementwise node below it reading the
 * most buffers that one kernel can still bind (else the smallest that
 * helps), so the split costs few kernels. The counts come from one pass
 * (capped_inputs), each candidate walked on its own only when none fits. */
static tvk_status rule_buffer_limit(SchedGraph *g, bool *changed) {
  int lim = sched_buffer_limit(g);
  int64_t *cand = malloc((g->n ? g->n : 1) * sizeof *cand);
  int64_t *n = malloc((g->n ? g->n : 1) * sizeof *n);
  if (!cand || !n) {
    free(cand), free(n);
    return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  }
  tvk_status s = TVK_OK;
  for (size_t r = 0; s == TVK_OK && r < g->n; r++) {
    if (!sched_realized(g, (int64_t)r)) continue;
    size_t nc = 0;
    int64_t total = inputs_under(g, (int64_t)r, cand, &nc), best = -1;
    if (total < 0) s = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    if (total < 0 || total + 1 <= lim) continue;
    bool exact = false;
    if (!capped_inputs(g, (int64_t)r, lim, n)) {
      s = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
      continue;
    }
    best = pick_split(cand, nc, n, total, lim, &exact);
    if (!exact) { /* nothing fits: the smallest that helps, counted exactly */
      for (size_t k = 0; k < nc && s == TVK_OK; k++)
        if ((n[cand[k]] = inputs_under(g, cand[k], NULL, NULL)) < 0)
          s = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
      best = s == TVK_OK ? pick_split(cand, nc, n, total, lim, &exact) : -1;
    }
    if (best >= 0) *changed |= sched_mark(g, best, WHY_BUFFER_LIMIT, (Op)g->topo[best]->op);
  }
  free(cand);
  free(n);
  return s;
}

/* ---------------------------------------------------------------- rule: kernel size */

/* A kernel fusing more than SCHED_MAX_KERNEL_OPS nodes (a chain of 100,000
 * elementwise ops) is split: compilers take superlinear time on huge
 * functions (gcc ran 463 s on one, then crashed). The elementwise node met
 * halfway through the walk of the kernel is materialised, so each part is
 * about half; the rule runs to its fixed point. */
static tvk_status rule_kernel_size(SchedGraph *g, bool *changed) {
  SStack st = {0};
  bool ok = true;
  for (size_t r = 0; ok && r < g->n; r++) {
    if (!sched_realized(g, (int64_t)r)) continue;
    ok = sstack_push(&st, (int64_t)r, 0);
    sched_new_walk(g);
    int64_t i, count = 0, half = -1;
    int unused;
    while (ok && sstack_pop(&st, &i, &unused)) {
      if (!sched_visit(g, i, 0)) continue;
      UOp *u = g->topo[i];
      if (graph_is_leaf(u) || ((size_t)i != r && sched_realized(g, i))) continue;
      if (++count >= SCHED_MAX_KERNEL_OPS / 2 && half < 0 && (size_t)i != r &&
          is_elementwise((Op)u->op))
        half = i;
      for (uint32_t k = 0; ok && k < u->nsrc; k++)
        ok = sstack_push(&st, sched_index(g, u->src[k]), 0);
    }
    st.n = 0;
    if (count > SCHED_MAX_KERNEL_OPS && half >= 0)
      *changed |= sched_mark(g, half, WHY_KERNEL_SIZE, (Op)g->topo[half]->op);
  }
  sstack_free(&st);
  return ok ? TVK_OK : err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
}

/* ---------------------------------------------------------------- the passes */

typedef struct {
  tvk_status (*run)(SchedGraph *g, bool *changed);
  bool splits; /* it cuts kernels apart: the passes before it must look again */
} DecidePass;

/* In order; each to its fixed point. Views come first: materialising for a
 * view can only shorten the kernels the reduce rule then looks at. */
static const DecidePass passes[] = {
    {rule_views, false},
    {rule_reduces, false},
    {rule_buffer_limit, true},
    {rule_kernel_size, true},
};

/* The passes, then the grouping of siblings into multi-output kernels
 * (group.c), which materialises nothing. */
tvk_status sched_decide(SchedGraph *g, int n, UOp *const *roots) {
  mark_mem(g);
  tvk_status s = rule_outputs(g, n, roots);
  /* The passes in order, each to its fixed point; all of them again when a
   * splitting pass (the buffer limit, the kernel size) cut a kernel, since that
   * changes which kernel fuses which reduce. Every change marks a node, so
   * this ends. */
  bool again = true;
  for (size_t outer = 0; s == TVK_OK && again && outer <= g->n; outer++) {
    again = false;
    for (size_t p = 0; s == TVK_OK && p < sizeof passes / sizeof *passes; p++) {
      bool changed = true;
      for (size_t round = 0; s == TVK_OK && changed && round <= g->n; round++) {
        changed = false;
        s = passes[p].run(g, &changed);
        again |= changed && passes[p].splits;
      }
    }
  }
  for (size_t i = 0; s == TVK_OK && i < g->n; i++)
    if (sched_realized(g, (int64_t)i) && g->info[i].device_clash)
      s = err_set(g->sc->err, TVK_ERR_INVALID_ARG,
                  "schedule: a %s computed from constants alone is stored once and read by "
                  "kernels on two devices; realize it on one of them (tvk_to_device) first",
                  op_name((Op)g->topo[i]->op));
  if (s == TVK_OK) sched_group_siblings(g);
  if (s == TVK_OK) sched_group_chains(g);
  return s;
}
