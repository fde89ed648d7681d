/* Linearizing: the lowered graph -> a flat program of blocks (codegen.h).
 *
 * Each UOp gets the set of RANGEs it depends on (a bitmask over the kernel's
 * ranges): the union of its sources' sets, plus a source RANGE itself, where an
 * ASSIGN shows its users the loops that enclose its accumulator's loops (the
 * value is read after those loops close, so in the block around them: that is
 * inside the parallel loop even when the value depends on no output range, and
 * inside what any accumulator sharing the loops depends on). Loops nest as a
 * tree: output ranges in axis order, an accumulator's ranges inside whatever
 * its ASSIGN depends on and inside the outermost output range (the parallel
 * one: work outside it would be repeated by every core or invocation). Closing
 * a set under "enclosed by" gives a chain of loops, and the UOp goes in the
 * innermost one. Each block (the root, or a loop) then orders its items (UOps
 * and child loops) by a depth-first toposort; an item depends on another when
 * some UOp inside the first uses one inside the second.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ptrmap.h"
#include "ir/strbuf.h"
#include "ir/vec.h"

#define LIN_MAX_RANGES 64
#define HEADER SIZE_MAX /* item_under: the opener of the block itself */

typedef struct {
  size_t from, to, key; /* item `from` needs item `to` first; key: to's sort key */
} Edge;

typedef struct {
  UOp **topo;
  size_t n;                          /* nodes, SINK last */
  PtrMap index;                      /* UOp -> toposort index */
  int nr;                            /* ranges */
  size_t range_at[LIN_MAX_RANGES];   /* toposort index of range k */
  int *rnum;                         /* per node: range number or -1 */
  uint64_t *raw;                     /* per node: ranges it depends on directly */
  uint64_t *accr;                    /* per DEFINE_ACC node: its ranges */
  uint64_t *shown;                   /* per ASSIGN node: the ranges its users see */
  uint64_t owned;                    /* ranges of some accumulator */
  int outermost;                     /* the outermost output range (the parallel one), or -1 */
  size_t *assign_of;                 /* per DEFINE_ACC node: its ASSIGN, or SIZE_MAX */
  uint64_t anc[LIN_MAX_RANGES];      /* ranges enclosing range k */
  uint8_t anc_state[LIN_MAX_RANGES]; /* 0 todo, 1 computing, 2 done */
  int *block;                        /* per node: 0 root, k+1 the body of range k */
  Edge *edges;
  size_t nedges, capedges;
  size_t *first;  /* CSR: deps of item t are edges[first[t] .. first[t+1]) */
  uint8_t *state; /* DFS per item: 0 new, 1 open, 2 emitted */
  LinearProgram *out;
  size_t cap;
  Error *err;
} Lin;

static size_t idx_of(const Lin *l, const UOp *u) { return (size_t)*ptrmap_ref(&l->index, u); }
static int popcount64(uint64_t m) {
  int c = 0;
  for (; m; m &= m - 1) c++;
  return c;
}

/* ---------------------------------------------------------------- range sets */

static bool is_acc_range(const Lin *l, size_t i, int k) {
  return l->topo[i]->op == OP_DEFINE_ACC && (l->accr[i] >> k & 1);
}

static uint64_t closure(Lin *l, uint64_t m);

/* Ranges enclosing range k (see the file comment). Output ranges: those of
 * smaller axis. An accumulator's range: its earlier ranges, and the closure of
 * what its ASSIGN depends on besides its own ranges. */
static uint64_t ancestors(Lin *l, int k) {
  if (l->anc_state[k] == 2) return l->anc[k];
  if (l->anc_state[k] == 1) {
    err_first(l->err, TVK_ERR_INTERNAL, "linearize: ranges enclose each other");
    return 0;
  }
  l->anc_state[k] = 1;
  uint64_t a = 0;
  bool owned = false;
  for (size_t i = 0; i < l->n; i++) {
    if (!is_acc_range(l, i, k)) continue;
    owned = true;
    UOp *acc = l->topo[i];
    for (uint32_t s = 1; s < acc->nsrc && l->rnum[idx_of(l, acc->src[s])] != k; s++)
      a |= 1ull << l->rnum[idx_of(l, acc->src[s])];
    if (l->assign_of[i] != SIZE_MAX) a |= closure(l, l->raw[l->assign_of[i]] & ~l->accr[i]);
  }
  if (owned && l->outermost >= 0) a |= 1ull << l->outermost; /* no work outside the parallel loop */
  if (!owned) {
    UOp *r = l->topo[l->range_at[k]];
    for (int j = 0; j < l->nr; j++) {
      UOp *q = l->topo[l->range_at[j]];
      /* a peeled copy's ranges sit in their own nest (codegen.h) */
      int64_t vq = q->arg.i / CG_RANGE_VERSION, vr = r->arg.i / CG_RANGE_VERSION;
      int64_t iq = q->arg.i % CG_RANGE_VERSION, ir = r->arg.i % CG_RANGE_VERSION;
      if (!(l->owned >> j & 1) && (vq == 0 || vq == vr) && (iq < ir || (iq == ir && j < k)))
        a |= 1ull << j;
    }
  }
  l->anc[k] = a;
  l->anc_state[k] = 2;
  return a;
}

static uint64_t closure(Lin *l, uint64_t m) {
  uint64_t c = m;
  for (int k = 0; k < l->nr; k++)
    if (m >> k & 1) c |= ancestors(l, k);
  return c;
}

/* The innermost range of a closed set (most ancestors), or -1 for none. */
static int deepest(Lin *l, uint64_t m) {
  int best = -1, bd = -1;
  for (int k = 0; k < l->nr; k++) {
    if (!(m >> k & 1)) continue;
    int d = popcount64(ancestors(l, k));
    if (d > bd) best = k, bd = d;
  }
  return best;
}

/* One pass in toposort order: raw[i], the ranges node i depends on, from its
 * sources'; an ASSIGN's users see shown[] of it (at least its set minus its
 * accumulator's ranges). A DEFINE_ACC's ranges are its own sources. */
static void raw_pass(Lin *l) {
  l->owned = 0;
  for (size_t i = 0; i < l->n; i++) {
    UOp *u = l->topo[i];
    uint64_t m = 0;
    for (uint32_t s = 0; s < u->nsrc; s++) {
      size_t j = idx_of(l, u->src[s]);
      UOp *src = l->topo[j];
      if (src->op == OP_RANGE)
        m |= 1ull << l->rnum[j];
      else
        m |= src->op == OP_ASSIGN ? l->shown[j] : l->raw[j];
    }
    if (u->op == OP_RANGE) m &= ~(1ull << l->rnum[i]);
    l->raw[i] = m;
    if (u->op == OP_DEFINE_ACC) l->accr[i] = m, l->owned |= m;
    if (u->op == OP_ASSIGN) l->shown[i] |= m & ~l->accr[idx_of(l, u->src[0])];
  }
}

static void find_outermost(Lin *l) {
  l->outermost = -1;
  for (int k = 0; k < l->nr; k++) {
    if (l->owned >> k & 1) continue;
    if (l->outermost < 0 ||
        l->topo[l->range_at[k]]->arg.i < l->topo[l->range_at[l->outermost]]->arg.i)
      l->outermost = k;
  }
}

/* raw[] and the ancestors of every range. An ASSIGN's value is read where its
 * accumulator's loops are closed: in the loops enclosing them, which are more
 * than its own set minus those ranges (the parallel loop they are put in; what
 * another accumulator sharing them depends on). Users must see all of these,
 * or they would be placed outside a loop that contains the ASSIGN while a UOp
 * in that loop needs them (a cycle). The enclosing loops depend on raw[] in
 * turn, so iterate: the sets only grow, and a fixed point comes within a few
 * rounds (one more per level of reduces feeding reduces). */
static void compute_raw(Lin *l) {
  for (bool grew = true; grew && l->err->status == TVK_OK;) {
    raw_pass(l);
    find_outermost(l);
    memset(l->anc_state, 0, sizeof l->anc_state); /* ancestors() of this round's raw[] */
    grew = false;
    for (size_t i = 0; i < l->n; i++) {
      if (l->topo[i]->op != OP_ASSIGN) continue;
      uint64_t enclosing = closure(l, l->raw[i]) & ~l->accr[idx_of(l, l->topo[i]->src[0])];
      grew |= (enclosing & ~l->shown[i]) != 0;
      l->shown[i] |= enclosing;
    }
  }
}

/* block[i] for every node; checks that each node's loops form a chain. */
static bool place(Lin *l) {
  for (size_t i = 0; i < l->n && l->err->status == TVK_OK; i++) {
    UOp *u = l->topo[i];
    if (u->op == OP_SINK) { /* the root, over sibling nests too (a peeled kernel's) */
      l->block[i] = 0;
      continue;
    }
    uint64_t full = closure(l, l->raw[i]);
    if (u->op == OP_RANGE) { /* its enclosing loops must nest too (lca relies on it) */
      l->block[i] = l->rnum[i] + 1;
      full = ancestors(l, l->rnum[i]);
    }
    if (u->op == OP_DEFINE_ACC) { /* just outside its outermost loop */
      int first = u->nsrc > 1 ? l->rnum[idx_of(l, u->src[1])] : -1;
      full = first < 0 ? full : ancestors(l, first);
    }
    int d = deepest(l, full);
    if (d >= 0 && full != (ancestors(l, d) | 1ull << d)) {
      err_first(l->err, TVK_ERR_INTERNAL, "linearize: %s depends on loops that do not nest",
                op_name((Op)u->op));
      return false;
    }
    if (u->op != OP_RANGE) l->block[i] = d + 1;
  }
  return l->err->status == TVK_OK;
}

/* ---------------------------------------------------------------- blocks and items */

static int parent_block(Lin *l, int b) { return b == 0 ? -1 : deepest(l, ancestors(l, b - 1)) + 1; }
static int block_depth(Lin *l, int b) { return b == 0 ? 0 : popcount64(ancestors(l, b - 1)) + 1; }

static int lca(Lin *l, int a, int b) {
  while (block_depth(l, a) > block_depth(l, b)) a = parent_block(l, a);
  while (block_depth(l, b) > block_depth(l, a)) b = parent_block(l, b);
  while (a != b) a = parent_block(l, a), b = parent_block(l, b);
  return a;
}

/* The item of block L that contains node i: i itself, the child loop of L that
 * i is inside, or HEADER when i opens L. Items n + k are the loops. */
static size_t item_under(Lin *l, size_t i, int L) {
  int b = l->block[i];
  if (b == L) return l->topo[i]->op == OP_RANGE ? HEADER : i;
  while (parent_block(l, b) != L) b = parent_block(l, b);
  return l->n + (size_t)(b - 1);
}

/* Sort key: definitions first, stores last, the rest by toposort index
 * (loops by their RANGE's). Stores last: the copies of an upcast body then
 * load all their elements before storing any, so a C compiler can pack the
 * loads and the stores into vectors without proving that an output does not
 * alias an input (no store moves past a load it may hit: none follows). */
static size_t item_key(const Lin *l, size_t t) {
  size_t i = t < l->n ? t : l->range_at[t - l->n];
  Op op = (Op)l->topo[i]->op;
  bool def = t < l->n && op_in(op, G_DEFINE), store = t < l->n && op == OP_STORE;
  return (def ? 0 : store ? 2 * l->n : l->n) + i;
}

static bool add_edge(Lin *l, size_t from, size_t to) {
  return VEC_PUSH(l->edges, l->nedges, l->capedges, ((Edge){from, to, item_key(l, to)}));
}

static int edge_order(const void *pa, const void *pb) {
  const Edge *a = pa, *b = pb;
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  return a->key < b->key ? -1 : a->key > b->key;
}

/* Item dependencies, as CSR sorted by the key of the needed item. */
static bool build_edges(Lin *l) {
  for (size_t i = 0; i + 1 < l->n; i++) { /* the SINK is not placed */
    UOp *u = l->topo[i];
    for (uint32_t s = 0; s < u->nsrc; s++) {
      size_t j = idx_of(l, u->src[s]);
      if (u->op == OP_DEFINE_ACC && s > 0) continue; /* its ranges: declared before the loops */
      int L = lca(l, l->block[i], l->block[j]);
      size_t a = item_under(l, i, L), b = item_under(l, j, L);
      if (a != HEADER && b != HEADER && a != b && !add_edge(l, a, b)) return false;
    }
  }
  size_t items = l->n + (size_t)l->nr;
  l->first = calloc(items + 1, sizeof *l->first);
  if (!l->first) return false;
  if (l->nedges) qsort(l->edges, l->nedges, sizeof *l->edges, edge_order);
  for (size_t e = 0; e < l->nedges; e++) l->first[l->edges[e].from + 1]++;
  for (size_t t = 0; t < items; t++) l->first[t + 1] += l->first[t];
  return true;
}

/* ---------------------------------------------------------------- emission */

static bool emit(Lin *l, UOp *u) {
  LinearProgram *o = l->out;
  if (!u) return false;
  return VEC_PUSH(o->uops, o->n, l->cap, uop_retain(u)); /* retained only when stored */
}

static bool emit_block(Lin *l, int b);

static bool emit_item(Lin *l, size_t t) {
  return t < l->n ? emit(l, l->topo[t]) : emit_block(l, (int)(t - l->n) + 1);
}

/* Emits item `root` after everything it needs (iterative depth-first search). */
static bool visit(Lin *l, size_t root) {
  if (l->state[root]) return true;
  typedef struct {
    size_t t, next;
  } Frame;
  size_t cap = 0, depth = 0;
  Frame *stack = NULL;
  bool ok = VEC_PUSH(stack, depth, cap, ((Frame){root, l->first[root]}));
  l->state[root] = 1;
  while (ok && depth) {
    Frame *f = &stack[depth - 1];
    if (f->next < l->first[f->t + 1]) {
      size_t dep = l->edges[f->next++].to;
      if (l->state[dep] == 1) {
        err_first(l->err, TVK_ERR_INTERNAL, "linearize: a cycle between the items of a block");
        ok = false;
      } else if (l->state[dep] == 0) {
        ok = VEC_PUSH(stack, depth, cap, ((Frame){dep, l->first[dep]}));
        l->state[dep] = 1;
      }
      continue;
    }
    size_t t = f->t;
    depth--;
    l->state[t] = 2;
    ok = emit_item(l, t);
  }
  free(stack);
  return ok;
}

static int key_cmp(const void *pa, const void *pb) {
  const size_t *a = pa, *b = pb; /* pairs (key, item) */
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Block b: its RANGE, its items in order, ENDRANGE. */
static bool emit_block(Lin *l, int b) {
  UOp *range = b ? l->topo[l->range_at[b - 1]] : NULL;
  if (range && !emit(l, range)) return false;
  size_t items = l->n + (size_t)l->nr, cnt = 0;
  size_t *list = malloc(items * 2 * sizeof *list);
  if (!list) return false;
  for (size_t i = 0; i + 1 < l->n; i++)
    if (l->block[i] == b && l->topo[i]->op != OP_RANGE)
      list[2 * cnt] = item_key(l, i), list[2 * cnt++ + 1] = i;
  for (int k = 0; k < l->nr; k++)
    if (parent_block(l, k + 1) == b)
      list[2 * cnt] = item_key(l, l->n + (size_t)k), list[2 * cnt++ + 1] = l->n + (size_t)k;
  qsort(list, cnt, 2 * sizeof *list, key_cmp);
  bool ok = true;
  for (size_t c = 0; ok && c < cnt; c++) ok = visit(l, list[2 * c + 1]);
  free(list);
  if (ok && range)
    ok = emit(l, uop_new(range->ctx, OP_ENDRANGE, dt_make(DT_VOID), 1, &range, arg_none()));
  return ok;
}

/* ---------------------------------------------------------------- entry points */

static bool lin_init(Lin *l, UOp *sink) {
  l->topo = uop_toposort(sink, &l->n);
  if (!l->topo || !ptrmap_init(&l->index, l->n)) return false;
  l->rnum = malloc(l->n * sizeof *l->rnum);
  l->raw = calloc(l->n, sizeof *l->raw);
  l->accr = calloc(l->n, sizeof *l->accr);
  l->shown = calloc(l->n, sizeof *l->shown);
  l->assign_of = malloc(l->n * sizeof *l->assign_of);
  l->block = calloc(l->n, sizeof *l->block);
  l->state = calloc(l->n + LIN_MAX_RANGES, 1);
  if (!l->rnum || !l->raw || !l->accr || !l->shown || !l->assign_of || !l->block || !l->state)
    return false;
  for (size_t i = 0; i < l->n; i++) {
    if (!ptrmap_put(&l->index, l->topo[i], (int64_t)i)) return false;
    l->rnum[i] = -1;
    l->assign_of[i] = SIZE_MAX;
  }
  return true;
}

static void lin_free(Lin *l) {
  free(l->topo);
  ptrmap_free(&l->index);
  free(l->rnum), free(l->raw), free(l->accr), free(l->shown), free(l->assign_of);
  free(l->block), free(l->state);
  free(l->edges), free(l->first);
}

/* Numbers the ranges and links each accumulator to its ASSIGN. */
static bool scan(Lin *l) {
  for (size_t i = 0; i < l->n; i++) {
    UOp *u = l->topo[i];
    if (u->op == OP_RANGE) {
      if (l->nr == LIN_MAX_RANGES) {
        err_first(l->err, TVK_ERR_INVALID_ARG, "linearize: more than %d loops", LIN_MAX_RANGES);
        return false;
      }
      l->range_at[l->nr] = i;
      l->rnum[i] = l->nr++;
    } else if (u->op == OP_ASSIGN) {
      if (u->nsrc != 2 || u->src[0]->op != OP_DEFINE_ACC) {
        err_first(l->err, TVK_ERR_INTERNAL, "linearize: ASSIGN to a %s",
                  op_name((Op)u->src[0]->op));
        return false;
      }
      l->assign_of[idx_of(l, u->src[0])] = i;
    } else if (u->op == OP_DEFINE_ACC) {
      for (uint32_t s = 1; s < u->nsrc; s++) {
        if (u->src[s]->op == OP_RANGE) continue;
        err_first(l->err, TVK_ERR_INTERNAL, "linearize: DEFINE_ACC over a %s",
                  op_name((Op)u->src[s]->op));
        return false;
      }
    }
  }
  return true;
}

tvk_status linearize(UOp *sink, LinearProgram *out, Error *err) {
  memset(out, 0, sizeof *out);
  Lin l = {.out = out, .err = err};
  bool ok = lin_init(&l, sink);
  if (ok && err->status == TVK_OK) ok = scan(&l);
  if (ok && err->status == TVK_OK) {
    compute_raw(&l);
    ok = place(&l) && build_edges(&l) && emit_block(&l, 0);
  }
  if (!ok && err->status == TVK_OK)
    err_first(err, TVK_ERR_OUT_OF_MEMORY, "linearize: out of memory");
  lin_free(&l);
  if (err->status != TVK_OK) linear_free(out);
  return err->status;
}

void linear_free(LinearProgram *lp) {
  if (!lp) return;
  for (size_t i = 0; i < lp->n; i++) uop_release(lp->uops[i]);
  free(lp->uops);
  lp->uops = NULL, lp->n = 0;
}

char *linear_dump(const LinearProgram *lp) {
  Str out = {0};
  PtrMap pos = {0};
  if (!ptrmap_init(&pos, lp->n)) return NULL;
  for (size_t i = 0; i < lp->n && !out.oom; i++) {
    UOp *u = lp->uops[i];
    if (!ptrmap_put(&pos, u, (int64_t)i)) out.oom = true;
    char dt[48];
    str_printf(&out, "%4zu %-14s %-18s [", i, op_name((Op)u->op), dt_str(u->dtype, dt));
    for (uint32_t s = 0; s < u->nsrc; s++) {
      int64_t *p = ptrmap_ref(&pos, u->src[s]);
      if (p)
        str_printf(&out, "%s%" PRId64, s ? ", " : "", *p);
      else
        str_add(&out, s ? ", --" : "--");
    }
    str_add(&out, "] ");
    char probe[1];
    int need = arg_str_render(&u->arg, probe, sizeof probe); /* snprintf-style: the length */
    if (need > 0 && str_reserve(&out, (size_t)need)) {
      arg_str_render(&u->arg, out.p + out.len, (size_t)need + 1);
      out.len += (size_t)need;
    }
    str_add(&out, "\n");
  }
  ptrmap_free(&pos);
  return str_take(&out);
}
