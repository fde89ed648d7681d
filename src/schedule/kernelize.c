/* Kernel ASTs: the kernel of one materialised node, with views pushed down to
 * the loads. decide.c guarantees what is below a materialised node (see
 * there); this file turns it into the AST of codegen/kernel.h by a bottom-up
 * rewrite whose rules move each VIEW down until it reaches memory:
 *
 *   STORE(out, row-major view, value)   value = the node (CONTIGUOUS: its source)
 *   VIEW over an elementwise op         -> the op over VIEWs of its sources
 *   VIEW over a VIEW                    -> one VIEW, the trackers composed
 *   VIEW over a buffer or a node another kernel materialises -> LOAD through the view
 *   VIEW over a CONST                   -> CONST(VIEW): the value where the view is valid, 0
 *   VIEW over a VALUE, or a VALUE       -> a float32 DEFINE_VAR "s<k>" whose value is the
 *                                          item's vals[k] (masked views: where valid)
 * outside a materialised node with no VIEW    -> LOAD through its row-major view a no-op CONTIGUOUS
 * (decide.c)       -> its source, a VIEW of memory
 *
 * Buffers get DEFINE_GLOBAL indices in the order the rewrite meets them, after
 * the output (index 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/pattern.h"
#include "ir/ptrmap.h"
#include "ir/vec.h"
#include "schedule/schedule_internal.h"

typedef struct {
  SchedGraph *g;
  Schedule *s;
  int64_t group; /* the kernel's group (sched_group): its outputs are computed here, not loaded */
  int *bufs;     /* Schedule.bufs indices by DEFINE_GLOBAL index */
  int nbufs;
  size_t cap;
  PtrMap value_of; /* VALUE -> its index in vals */
  uint32_t vals[SCHED_MAX_VALUES];
  UOp *val_nodes[SCHED_MAX_VALUES];
  int nvals;
  bool folded; /* a VALUE past SCHED_MAX_VALUES became a constant */
  tvk_status err;
} Kern;

static UOp *kern_oom(Kern *k) {
  k->err = TVK_ERR_OUT_OF_MEMORY;
  return NULL;
}

/* The DEFINE_GLOBAL index of schedule buffer b in this kernel, -1 on out of memory. */
static int kern_buf(Kern *k, int b) {
  for (int i = 0; i < k->nbufs; i++)
    if (k->bufs[i] == b) return i;
  if (!VEC_RESERVE(k->bufs, k->cap, (size_t)k->nbufs + 1)) return -1;
  k->bufs[k->nbufs] = b;
  return k->nbufs++;
}

/* The schedule buffer of an existing BUFFER UOp, added on first use. */
static int input_buf(Kern *k, UOp *buffer) {
  int64_t b = ptrmap_get(&k->g->inputs, buffer);
  if (b >= 0) return (int)b;
  SchedBuf sb = {.buffer = uop_retain(buffer),
                 .dtype = (ScalarType)buffer->dtype.scalar,
                 .numel = graph_buffer_numel(buffer),
                 .culprit = OP_NONE,
                 .device = buffer->device};
  int i = sched_add_buf(k->s, &sb);
  if (i < 0 || !ptrmap_put(&k->g->inputs, buffer, i)) {
    if (i < 0) uop_release(sb.buffer);
    return -1;
  }
  return i;
}

static UOp *kview(Kern *k, const ShapeTracker *st) {
  return uop_new(k->g->sc->u, OP_VIEW, dt_make(DT_VOID), 0, NULL, arg_st(st));
}

/* LOAD(buffer b, st); a buffer with no elements is never read (the view is
 * empty or fully masked), so it becomes the constant 0 and needs no pointer. */
static UOp *make_load(Kern *k, int b, const ShapeTracker *st) {
  const SchedBuf *sb = &k->s->bufs[b];
  DType dt = dt_make(sb->dtype);
  UOp *v = kview(k, st);
  if (!v) return kern_oom(k);
  if (sb->numel == 0) {
    UOp *c = uop_new(k->g->sc->u, OP_CONST, dt, 1, &v, dt_is_float(dt) ? arg_float(0) : arg_int(0));
    return c ? c : kern_oom(k);
  }
  int i = kern_buf(k, b);
  UOp *glob =
      i < 0 ? NULL
            : uop_new(k->g->sc->u, OP_DEFINE_GLOBAL, dt_ptr(dt, ADDR_GLOBAL), 0, NULL, arg_int(i));
  UOp *ld = glob ? uop_new(k->g->sc->u, OP_LOAD, dt, 2, (UOp *[]){glob, v}, arg_none()) : NULL;
  return ld ? ld : kern_oom(k);
}

/* The schedule buffer holding x, when another kernel materialises it or it is
 * a BUFFER; -1 otherwise (or -2 on out of memory). */
static int buffer_of(Kern *k, UOp *x) {
  if (x->op == OP_BUFFER) {
    int b = input_buf(k, x);
    return b < 0 ? -2 : b;
  }
  int64_t i = sched_index(k->g, x);
  if (i < 0 || !sched_realized(k->g, i) || sched_group(k->g, i) == k->group) return -1;
  return k->g->info[i].buf;
}

/* ---------------------------------------------------------------- rules */

enum { X = 1, V, Y };

/* x, materialised by another kernel -> LOAD(x's buffer, row-major view of x's shape) */
static UOp *load_node(void *ctx, UOp **c) {
  Kern *k = ctx;
  if (c[X]->op == OP_BUFFER)
    return NULL; /* only under a VIEW (view_load); else the leftover check reports it */
  int b = buffer_of(k, c[X]);
  if (b < 0) return NULL;
  const SchedBuf *sb = &k->s->bufs[b];
  ShapeTracker *st = st_from_shape(sb->ndim, sb->shape);
  UOp *r = st ? make_load(k, b, st) : kern_oom(k);
  st_free(st);
  return r;
}

/* VIEW(x, st), x a BUFFER or materialised by another kernel -> LOAD(x's buffer, st) */
static UOp *view_load(void *ctx, UOp **c) {
  Kern *k = ctx;
  int b = buffer_of(k, c[X]);
  if (b == -2) return kern_oom(k);
  return b < 0 ? NULL : make_load(k, b, c[V]->arg.st);
}

/* VIEW(CONST c, st) -> CONST(VIEW(st)) = valid ? c : 0 */
static UOp *view_const(void *ctx, UOp **c) {
  Kern *k = ctx;
  UOp *v = kview(k, c[V]->arg.st);
  UOp *r = v ? uop_new(k->g->sc->u, OP_CONST, c[X]->dtype, 1, &v, c[X]->arg) : NULL;
  return r ? r : kern_oom(k);
}

/* A VALUE's DEFINE_VAR, numbered in the order the rewrite meets the values
 * (so the same computation gets the same AST whatever their values); past
 * SCHED_MAX_VALUES the value itself, as a constant. */
static UOp *value_var(Kern *k, UOp *value) {
  bool added = false;
  int64_t *slot = ptrmap_insert(&k->value_of, value, k->nvals, &added);
  if (!slot) return kern_oom(k);
  uint32_t bits = graph_value_bits(value);
  if (added && k->nvals < SCHED_MAX_VALUES)
    k->val_nodes[k->nvals] = value, k->vals[k->nvals++] = bits;
  UOp *r;
  if (*slot >= SCHED_MAX_VALUES) {
    k->folded = true;
    float f;
    memcpy(&f, &bits, sizeof f);
    r = uop_const_float(k->g->sc->u, dt_make(DT_FLOAT32), f);
  } else {
    char name[16];
    snprintf(name, sizeof name, "s%d", (int)*slot);
    r = uop_new(k->g->sc->u, OP_DEFINE_VAR, dt_make(DT_FLOAT32), 0, NULL, arg_var(name, 0, 0));
  }
  return r ? r : kern_oom(k);
}

int sched_value_index(const char *name) {
  if (name[0] != 's' || !name[1]) return -1;
  int64_t k = 0;
  for (const char *p = name + 1; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    k = k < INT32_MAX ? k * 10 + (*p - '0') : k; /* saturates: no value has it */
  }
  return k > INT32_MAX ? INT32_MAX : (int)k;
}

static bool st_masked(const ShapeTracker *st) {
  for (int i = 0; i < st->nviews; i++)
    if (st->views[i].has_mask) return true;
  return false;
}

/* VALUE -> its DEFINE_VAR, which broadcasts anywhere */
static UOp *bare_value(void *ctx, UOp **c) { return value_var(ctx, c[X]); }

/* VIEW(VALUE, st) -> the DEFINE_VAR; where st masks, valid ? var : 0 (a bool
 * CONST(VIEW) is the validity) */
static UOp *view_value(void *ctx, UOp **c) {
  Kern *k = ctx;
  UOp *var = value_var(k, c[X]);
  if (!var || !st_masked(c[V]->arg.st)) return var;
  UCtx *u = k->g->sc->u;
  UOp *v = kview(k, c[V]->arg.st);
  UOp *valid = v ? uop_new(u, OP_CONST, dt_make(DT_BOOL), 1, &v, arg_int(1)) : NULL;
  UOp *zero = uop_const_float(u, dt_make(DT_FLOAT32), 0);
  UOp *r = valid && zero ? uop_where(valid, var, zero) : NULL;
  return r ? r : kern_oom(k);
}

/* VIEW(ARANGE, st) -> ARANGE(VIEW(st)) = valid ? index : 0 */
static UOp *view_arange(void *ctx, UOp **c) {
  Kern *k = ctx;
  UOp *v = kview(k, c[V]->arg.st);
  UOp *r = v ? uop_new(k->g->sc->u, OP_ARANGE, c[X]->dtype, 1, &v, arg_none()) : NULL;
  return r ? r : kern_oom(k);
}

/* VIEW(VIEW(y, a), b) -> VIEW(y, a + b) */
static UOp *view_view(void *ctx, UOp **c) {
  Kern *k = ctx;
  ShapeTracker *st = st_compose(c[X]->arg.st, c[V]->arg.st);
  UOp *r = st ? uop_new(k->g->sc->u, OP_VIEW, c[Y]->dtype, 1, &c[Y], arg_st(st)) : NULL;
  st_free(st);
  return r ? r : kern_oom(k);
}

/* VIEW(f(a, b, ..), st) -> f(VIEW(a, st), VIEW(b, st), ..) for elementwise f not
 * materialised (decide.c made sure a mask only passes ops with f(0..) = 0) */
static UOp *view_push(void *ctx, UOp **c) {
  Kern *k = ctx;
  UOp *f = c[X];
  int64_t i = sched_index(k->g, f);
  if (i < 0 || (sched_realized(k->g, i) && sched_group(k->g, i) != k->group))
    return NULL; /* view_load's */
  UOp *src[3];
  if (f->nsrc > 3) return NULL;
  for (uint32_t s = 0; s < f->nsrc; s++) {
    src[s] = uop_new(k->g->sc->u, OP_VIEW, f->src[s]->dtype, 1, &f->src[s], c[V]->arg);
    if (!src[s]) return kern_oom(k);
  }
  UOp *r = uop_replace_src(f, (int)f->nsrc, src);
  return r ? r : kern_oom(k);
}

/* VIEW(x, st) where st is x's own row-major shape -> x */
static UOp *view_identity(void *ctx, UOp **c) {
  (void)ctx;
  return !graph_is_leaf(c[X]) && sched_view_is_identity(c[V]) ? c[X] : NULL;
}

/* CONTIGUOUS(x), a no-op (decide.c) -> x */
static UOp *contiguous_alias(void *ctx, UOp **c) {
  Kern *k = ctx;
  int64_t i = sched_index(k->g, c[X]);
  return i >= 0 && sched_alias(k->g, i) ? c[X]->src[0] : NULL;
}

/* VIEW(CONTIGUOUS(x), st), a no-op CONTIGUOUS -> VIEW(x, st) */
static UOp *view_alias(void *ctx, UOp **c) {
  Kern *k = ctx;
  int64_t i = sched_index(k->g, c[X]);
  if (i < 0 || !sched_alias(k->g, i)) return NULL;
  UOp *r = uop_new(k->g->sc->u, OP_VIEW, c[Y]->dtype, 1, &c[Y], c[V]->arg);
  return r ? r : kern_oom(k);
}

/* An assign of this kernel's own group read by another of its outputs (an
 * optimiser's parameter reading its new moments; group.c) -> its value, which
 * the kernel computes anyway. */
static bool own_assign(Kern *k, UOp *x) {
  int64_t i = x->op == OP_ASSIGN ? sched_index(k->g, x) : -1;
  return i >= 0 && sched_realized(k->g, i) && sched_group(k->g, i) == k->group;
}
static UOp *assign_inline(void *ctx, UOp **c) {
  return own_assign(ctx, c[X]) ? c[X]->src[c[X]->nsrc - 1] : NULL;
}
static UOp *view_assign_inline(void *ctx, UOp **c) {
  Kern *k = ctx;
  if (!own_assign(k, c[X])) return NULL;
  UOp *v = c[X]->src[c[X]->nsrc - 1];
  UOp *r = uop_new(k->g->sc->u, OP_VIEW, v->dtype, 1, &v, c[V]->arg);
  return r ? r : kern_oom(k);
}

#define VIEW_OF(p) PAT_OP(OP_VIEW, V, p)
static const Rule kernel_rules[] = {
    /* x (materialised elsewhere) -> LOAD(buf(x), row-major) */
    {PAT_ANY(X), load_node},
    /* VIEW(x, st), x in memory -> LOAD(buf(x), st) */
    {VIEW_OF(PAT_ANY(X)), view_load},
    /* VIEW(CONST c, st) -> CONST(VIEW(st)) */
    {VIEW_OF(PAT_OP0(OP_CONST, X)), view_const},
    /* VIEW(ARANGE, st) -> ARANGE(VIEW(st)) */
    {VIEW_OF(PAT_OP0(OP_ARANGE, X)), view_arange},
    /* VIEW(VALUE, st) -> DEFINE_VAR "s<k>" (masked: where valid) */
    {VIEW_OF(PAT_OP0(OP_VALUE, X)), view_value},
    /* VALUE -> DEFINE_VAR "s<k>" */
    {PAT_OP0(OP_VALUE, X), bare_value},
    /* VIEW(VIEW(y, a), b) -> VIEW(y, a + b) */
    {VIEW_OF(PAT_OP(OP_VIEW, X, PAT_ANY(Y))), view_view},
    /* VIEW(CONTIGUOUS(y), st) -> VIEW(y, st)   for a no-op CONTIGUOUS */
    {VIEW_OF(PAT_OP(OP_CONTIGUOUS, X, PAT_ANY(Y))), view_alias},
    /* CONTIGUOUS(y) -> y   for a no-op CONTIGUOUS */
    {PAT_OP0(OP_CONTIGUOUS, X), contiguous_alias},
    /* ASSIGN(t, v) -> v   and   VIEW(ASSIGN(t, v), st) -> VIEW(v, st)   of an own assign */
    {PAT_OP0(OP_ASSIGN, X), assign_inline},
    {VIEW_OF(PAT_OP0(OP_ASSIGN, X)), view_assign_inline},
    /* VIEW(f(a, ..), st) -> f(VIEW(a, st), ..) */
    {VIEW_OF(UPAT(.groups = G_ELEMENTWISE, .slot = X)), view_push},
    /* VIEW(x, identity) -> x */
    {VIEW_OF(PAT_ANY(X)), view_identity},
};

/* ---------------------------------------------------------------- the kernel */

/* Every node left must be an AST op of codegen/kernel.h; a tensor-graph node
 * left over means a view could not be pushed down (a bug in decide.c). */
static tvk_status check_ast(SchedGraph *g, UOp *ast) {
  size_t n = 0;
  UOp **topo = uop_toposort(ast, &n);
  if (!topo) return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  tvk_status s = TVK_OK;
  for (size_t i = 0; i < n && s == TVK_OK; i++) {
    UOp *u = topo[i];
    Op op = (Op)u->op;
    bool ok = op_in(op, G_AST) && (op != OP_VIEW || u->nsrc == 0);
    if (!ok)
      s = err_set(
          g->sc->err, TVK_ERR_INTERNAL,
          "schedule: a %s%s%s is left in a kernel AST (a view could not be pushed to the loads)",
          op_name(op), u->nsrc ? " over a " : "", u->nsrc ? op_name((Op)u->src[0]->op) : "");
  }
  free(topo);
  return s;
}

/* An assign's kernel may read its own target only at the element it writes
 * (through the same view as the store); anything else reads elements that
 * other invocations of the kernel may already have overwritten. Output r's
 * store is ast->src[r]. */
static tvk_status check_assign(Kern *k, UOp *ast, int r) {
  const SchedBuf *out = &k->s->bufs[k->bufs[r]];
  const UOp *store = ast->src[r];
  size_t n = 0;
  UOp **topo = uop_toposort(ast, &n);
  if (!topo) return err_set(k->g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  bool bad = false;
  for (size_t i = 0; i < n && !bad; i++) {
    UOp *u = topo[i];
    if (u->op != OP_LOAD || u->src[0]->arg.i == 0) continue;
    bad = k->s->bufs[k->bufs[u->src[0]->arg.i]].buffer == out->buffer &&
          !st_eq(u->src[1]->arg.st, store->src[1]->arg.st);
  }
  free(topo);
  return bad ? err_set(k->g->sc->err, TVK_ERR_INVALID_ARG,
                       "assign: the value reads the target's buffer through another view "
                       "than the target's own in the kernel that overwrites it (e.g. a reduce "
                       "over a transpose of the target); realize that operand first")
             : TVK_OK;
}

static PatternMatcher *kernel_matcher(void) {
  /* Built per call: a few microseconds, and no global state. */
  return pm_new(kernel_rules, RULES_N(kernel_rules));
}

/* STORE(DEFINE_GLOBAL gi, view, value) of materialised node `root`: the view is
 * row-major in the node's shape, or in a reduce's (below). */
static UOp *make_store(Kern *k, int64_t root, int gi) {
  SchedGraph *g = k->g;
  UCtx *u = g->sc->u;
  UOp *node = g->topo[root];
  const SchedBuf *ob = &k->s->bufs[g->info[root].buf];
  /* a COPY that is a kernel computes its source (of no device) on its own */
  UOp *value = node->op == OP_CONTIGUOUS || node->op == OP_ASSIGN || node->op == OP_COPY
                   ? node->src[node->nsrc - 1]
                   : node;
  /* A kernel in the shape of a reduce behind a reshape or, for a contiguous
   * child, a permutation (decide.c): `st` views the output buffer in the
   * reduce's shape. The value is viewed through it too, which the rewrite
   * pushes down to the loads and which cancels the view over the reduce; the
   * store writes through it, so a permuted child lands permuted. */
  ShapeTracker *st = st_from_shape(ob->ndim, ob->shape);
  if (st && g->info[root].kred >= 0) {
    int64_t kshape[TVK_MAX_DIMS];
    int knd = graph_shape(g->topo[g->info[root].kred], kshape);
    int64_t strides[TVK_MAX_DIMS];
    ShapeTracker *ks = NULL;
    if (g->info[root].kperm) { /* the buffer seen in the reduce's shape: the inverse view */
      if (sched_view_inverse(node->src[0], strides)) { /* decide.c checked it */
        View w = view_make(knd, kshape, strides, 0, NULL);
        ks = st_from_view(&w);
      }
    } else {
      ks = st_reshape(st, knd, kshape);
    }
    value = ks ? uop_new(u, OP_VIEW, value->dtype, 1, &value, arg_st(ks)) : NULL;
    st_free(st);
    st = ks;
  }
  UOp *glob =
      uop_new(u, OP_DEFINE_GLOBAL, dt_ptr(dt_make(ob->dtype), ADDR_GLOBAL), 0, NULL, arg_int(gi));
  UOp *view = st ? kview(k, st) : NULL;
  st_free(st);
  UOp *store = glob && view && value ? uop_new(u, OP_STORE, dt_make(DT_VOID), 3,
                                               (UOp *[]){glob, view, value}, arg_none())
                                     : NULL;
  return store ? store : kern_oom(k);
}

tvk_status sched_kernelize(SchedGraph *g, Schedule *s, const int64_t *roots, int nroots,
                           ScheduleItem *item) {
  memset(item, 0, sizeof *item);
  Kern k = {.g = g, .s = s, .group = sched_group(g, roots[0])};
  PatternMatcher *pm = kernel_matcher();
  UOp **stores = malloc((size_t)nroots * sizeof *stores);
  if (!stores) k.err = TVK_ERR_OUT_OF_MEMORY;
  for (int r = 0; r < nroots && k.err == TVK_OK; r++) /* outputs: DEFINE_GLOBAL 0 .. nroots-1 */
    if (kern_buf(&k, g->info[roots[r]].buf) != r) k.err = TVK_ERR_OUT_OF_MEMORY;
  for (int r = 0; r < nroots && k.err == TVK_OK; r++) stores[r] = make_store(&k, roots[r], r);
  UOp *sink = k.err == TVK_OK ? uop_sink(g->sc->u, nroots, stores) : NULL;
  free(stores);
  if (!pm || !sink) k.err = TVK_ERR_OUT_OF_MEMORY;
  UOp *ast = k.err == TVK_OK ? graph_rewrite(sink, pm, &k, true) : NULL;
  pm_free(pm);
  if (!ast && k.err == TVK_OK) k.err = TVK_ERR_OUT_OF_MEMORY;
  tvk_status r = k.err != TVK_OK
                     ? err_set(g->sc->err, k.err, "schedule: out of memory building a kernel")
                     : check_ast(g, ast);
  for (int o = 0; o < nroots && r == TVK_OK; o++)
    if (g->topo[roots[o]]->op == OP_ASSIGN) r = check_assign(&k, ast, o);
  ptrmap_free(&k.value_of);
  if (r == TVK_OK && k.nvals > 0 &&
      (!(item->vals = malloc((size_t)k.nvals * sizeof *item->vals)) ||
       !(item->val_nodes = malloc((size_t)k.nvals * sizeof *item->val_nodes))))
    r = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory building a kernel");
  if (r != TVK_OK) {
    free(item->vals), free(item->val_nodes);
    item->vals = NULL, item->val_nodes = NULL;
    free(k.bufs);
    return r;
  }
  item->ast = uop_retain(ast);
  item->bufs = k.bufs;
  item->nbufs = k.nbufs;
  item->nout = nroots;
  if (k.nvals > 0) memcpy(item->vals, k.vals, (size_t)k.nvals * sizeof *item->vals);
  for (int v = 0; v < k.nvals; v++) item->val_nodes[v] = uop_retain(k.val_nodes[v]);
  item->nvals = k.nvals;
  item->values_folded = k.folded;
  item->device = g->info[roots[0]].device;
  return TVK_OK;
}

tvk_status sched_copy_item(SchedGraph *g, Schedule *s, int64_t copy, ScheduleItem *item) {
  memset(item, 0, sizeof *item);
  Kern k = {.g = g, .s = s, .group = sched_group(g, copy)};
  int out = kern_buf(&k, g->info[copy].buf);
  int src = out == 0 ? buffer_of(&k, sched_copy_source(g->topo[copy])) : -2;
  if (src >= 0 && kern_buf(&k, src) == 1) {
    *item = (ScheduleItem){
        .bufs = k.bufs, .nbufs = 2, .nout = 1, .device = g->info[copy].device, .copy = true};
    return TVK_OK;
  }
  free(k.bufs);
  return src == -1 ? err_set(g->sc->err, TVK_ERR_INTERNAL,
                             "schedule: the source of a copy is not in memory")
                   : err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
}
