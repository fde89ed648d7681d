/* Kernel AST checks and shape inference: see kernel.h for the contract and
 * codegen.h for kernel_verify. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ptrmap.h"
#include "ir/sint_expr.h"

/* Per node of the AST (by toposort index): its shape, the axes its REDUCE
 * reduces after normalisation, and the axes reduced anywhere below it. */
typedef struct {
  int64_t shape[TVK_MAX_DIMS];
  uint32_t own;   /* REDUCE_AXIS: normalised axes */
  uint32_t below; /* axes of the REDUCE_AXIS nodes strictly inside */
} NodeInfo;

typedef struct {
  UOp **topo;
  size_t n;
  PtrMap index; /* UOp -> toposort index */
  NodeInfo *info;
  KernelDesc *ks;
  Error *err;
} Verify;

/* Indices are int32 unless a view or the output needs more (then int64:
 * KernelDesc.index64), and splitting an axis across cores adds up to
 * CG_MAX_CORES to them. */
#define INT32_LIMIT ((int64_t)INT32_MAX - 2 * CG_MAX_CORES)
#define INT64_LIMIT (INT64_MAX - 2 * CG_MAX_CORES)

static bool is_value_op(Op op) { return op_in(op, G_AST_VALUE); }

static NodeInfo *info_of(Verify *v, const UOp *u) {
  int64_t *i = ptrmap_ref(&v->index, u);
  return &v->info[*i];
}

static tvk_status bad(Verify *v, const UOp *u, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tvk_status bad(Verify *v, const UOp *u, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return err_first(v->err, TVK_ERR_INVALID_ARG, "kernel AST: %s %s", op_name((Op)u->op), what);
}

/* Shapes hold sints (symbolic sizes as their expressions). */
static void shape_fmt(int ndim, const int64_t *s, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < ndim && at < n; d++) {
    at += (size_t)snprintf(buf + at, n - at, "%s", d ? ", " : "");
    if (at < n) at += (size_t)sint_str(s[d], buf + at, n - at);
  }
  if (at < n) snprintf(buf + at, n - at, ")");
}

/* ---------------------------------------------------------------- leaves */

/* The index math of a view takes, per view of the stack, values up to
 * |offset| + sum((shape[d] - 1) * |stride[d]|): the flat index into the view
 * below (or memory, for views[0]). Those must fit the index type (below
 * `limit`) — not the view's element count: a matmul's (M, N, K) expand has
 * stride 0 dims and is never flattened. Loop counters are bounded by each dim. */
/* The largest magnitude a sint takes (its bounds, for a symbolic one). */
static int64_t sint_mag(sint s) {
  int64_t lo = sint_vmin(s), hi = sint_vmax(s);
  if (lo == INT64_MIN) return INT64_MAX;
  lo = lo < 0 ? -lo : lo, hi = hi < 0 ? -hi : hi;
  return lo > hi ? lo : hi;
}

static bool view_index_fits(const ShapeTracker *st, int64_t limit) {
  for (int i = 0; i < st->nviews; i++) {
    const View *vw = &st->views[i];
    int64_t reach = sint_mag(vw->offset), term;
    for (int d = 0; d < vw->ndim; d++) {
      int64_t stride = sint_mag(vw->strides[d]), size = sint_vmax(vw->shape[d]);
      if (size > limit) return false;
      if (size == 0) continue;
      if (__builtin_mul_overflow(size - 1, stride, &term) ||
          __builtin_add_overflow(reach, term, &reach))
        return false;
    }
    if (reach > limit) return false;
  }
  return true;
}

static tvk_status add_var(Verify *v, UOp *u);

/* The variables of a symbolic view are the kernel's too (launch values):
 * each an int32 DEFINE_VAR, as sint_uop makes them in the index math. */
static tvk_status view_vars(Verify *v, UOp *u) {
  sint vars[CG_MAX_VARS];
  int n = st_vars(u->arg.st, vars, 0, CG_MAX_VARS);
  if (n < 0) return bad(v, u, "has more than %d variables or a failed size", CG_MAX_VARS);
  for (int i = 0; i < n; i++) {
    UOp *var = sint_uop(u->ctx, DT(INT32), vars[i]);
    if (!var) return err_first(v->err, TVK_ERR_OUT_OF_MEMORY, "kernel AST: out of memory");
    if (add_var(v, var) != TVK_OK) return v->err->status;
  }
  return TVK_OK;
}

static tvk_status check_view(Verify *v, UOp *u) {
  if (u->nsrc != 0 || u->arg.kind != ARG_ST) return bad(v, u, "needs arg_st and no sources");
  const ShapeTracker *st = u->arg.st;
  if (st_ndim(st) != v->ks->ndim)
    return bad(v, u, "has %d dims, the kernel %d", st_ndim(st), v->ks->ndim);
  if (!view_index_fits(st, INT64_LIMIT))
    return bad(v, u, "needs index values of 2^63 - %d or more", 2 * CG_MAX_CORES);
  if (!view_index_fits(st, INT32_LIMIT)) v->ks->index64 = true;
  int64_t *full = v->ks->full;
  for (int d = 0; d < v->ks->ndim; d++) {
    int64_t s = st_shape(st)[d];
    if (s == 1) continue;
    if (full[d] != 1 && full[d] != s)
      return bad(v, u, "has size %" PRId64 " at dim %d where another view has %" PRId64, s, d,
                 full[d]);
    full[d] = s;
  }
  memcpy(info_of(v, u)->shape, st_shape(st), (size_t)v->ks->ndim * sizeof(int64_t));
  return view_vars(v, u);
}

static tvk_status check_global(Verify *v, UOp *u) {
  if (u->nsrc != 0 || u->arg.kind != ARG_INT || u->dtype.addr != ADDR_GLOBAL ||
      u->dtype.count != 1 || u->dtype.scalar == DT_VOID)
    return bad(v, u, "needs a global pointer dtype, arg_int(index) and no sources");
  if (u->arg.i < 0 || u->arg.i >= CG_MAX_BUFS)
    return bad(v, u, "index %" PRId64 " is outside 0..%d", u->arg.i, CG_MAX_BUFS - 1);
  int i = (int)u->arg.i;
  KernelBuf *b = &v->ks->bufs[i];
  if (b->dtype != DT_VOID && b->dtype != u->dtype.scalar)
    return bad(v, u, "buffer %d is used with two dtypes (%s and %s)", i,
               dt_scalar_name((ScalarType)b->dtype), dt_scalar_name((ScalarType)u->dtype.scalar));
  b->dtype = u->dtype.scalar;
  if (i + 1 > v->ks->nbufs) v->ks->nbufs = i + 1;
  return TVK_OK;
}

static bool is_scalar_value(DType d) {
  return d.count == 1 && d.addr == ADDR_NONE && d.scalar != DT_VOID;
}

/* LOAD(DEFINE_GLOBAL, VIEW) and STORE(DEFINE_GLOBAL, VIEW, value). */
static tvk_status check_access(Verify *v, UOp *u) {
  int want = u->op == OP_LOAD ? 2 : 3;
  if ((int)u->nsrc != want || u->src[0]->op != OP_DEFINE_GLOBAL || u->src[1]->op != OP_VIEW)
    return bad(v, u, "needs sources (DEFINE_GLOBAL, VIEW%s)", u->op == OP_LOAD ? "" : ", value");
  UOp *val = u->op == OP_LOAD ? u : u->src[2];
  if (u->op == OP_STORE && !is_value_op((Op)val->op))
    return bad(v, u, "stores a %s, not a value", op_name((Op)val->op));
  if (!is_scalar_value(val->dtype) || val->dtype.scalar != u->src[0]->dtype.scalar)
    return bad(v, u, "of %s through a %s buffer", dt_scalar_name((ScalarType)val->dtype.scalar),
               dt_scalar_name((ScalarType)u->src[0]->dtype.scalar));
  memcpy(info_of(v, u)->shape, info_of(v, u->src[1])->shape, sizeof(int64_t) * TVK_MAX_DIMS);
  KernelBuf *b = &v->ks->bufs[u->src[0]->arg.i];
  if (u->op == OP_LOAD)
    b->read = true;
  else
    b->written = true;
  return TVK_OK;
}

/* ---------------------------------------------------------------- values */

/* Broadcast the shapes of u's sources into u's: equal sizes or 1. */
static tvk_status broadcast(Verify *v, UOp *u) {
  NodeInfo *ni = info_of(v, u);
  for (int d = 0; d < v->ks->ndim; d++) ni->shape[d] = 1;
  for (uint32_t i = 0; i < u->nsrc; i++) {
    UOp *s = u->src[i];
    if (!is_value_op((Op)s->op))
      return bad(v, u, "has a %s source, not a value", op_name((Op)s->op));
    NodeInfo *si = info_of(v, s);
    ni->below |= si->below | si->own;
    for (int d = 0; d < v->ks->ndim; d++) {
      if (si->shape[d] == 1) continue;
      if (ni->shape[d] != 1 && ni->shape[d] != si->shape[d])
        return bad(v, u, "combines sizes %" PRId64 " and %" PRId64 " at dim %d", ni->shape[d],
                   si->shape[d], d);
      ni->shape[d] = si->shape[d];
    }
  }
  return TVK_OK;
}

static tvk_status check_reduce(Verify *v, UOp *u) {
  if (u->nsrc != 1 || u->arg.kind != ARG_REDUCE)
    return bad(v, u, "needs arg_reduce and one source");
  Op rop = (Op)u->arg.red.op;
  if (!op_in(rop, G_REDUCE_OP))
    return bad(v, u, "reduces with %s; only ADD, MUL and MAX are reduce ops", op_name(rop));
  if (!dt_eq(u->dtype, u->src[0]->dtype)) return bad(v, u, "has a dtype other than its source's");
  tvk_status s = broadcast(v, u);
  if (s != TVK_OK) return s;
  NodeInfo *ni = info_of(v, u);
  uint32_t axes = 0;
  for (int i = 0; i < u->arg.red.n; i++) {
    int64_t a = u->arg.red.axes[i];
    if (a < 0 || a >= v->ks->ndim)
      return bad(v, u, "axis %" PRId64 " is out of range for %d dims", a, v->ks->ndim);
    if (axes >> a & 1) return bad(v, u, "lists axis %" PRId64 " twice", a);
    axes |= 1u << a;
    if (ni->shape[a] != 1) ni->own |= 1u << a; /* a size-1 axis needs no loop */
    ni->shape[a] = 1;
  }
  if (ni->own & ni->below)
    return bad(v, u, "reduces an axis that a reduce in its input also reduces (needs two kernels)");
  return TVK_OK;
}

/* Keeps the vars sorted by name; one name is one var. */
static tvk_status add_var(Verify *v, UOp *u) {
  KernelDesc *ks = v->ks;
  int at = 0;
  while (at < ks->nvars && strcmp(ks->vars[at]->arg.var.name, u->arg.var.name) < 0) at++;
  if (at < ks->nvars && ks->vars[at] == u) return TVK_OK; /* met before (a view's variable) */
  if (at < ks->nvars && strcmp(ks->vars[at]->arg.var.name, u->arg.var.name) == 0)
    return bad(v, u, "'%s' has two definitions (bounds differ)", u->arg.var.name);
  if (ks->nvars == CG_MAX_VARS) return bad(v, u, "is one of more than %d vars", CG_MAX_VARS);
  memmove(ks->vars + at + 1, ks->vars + at, (size_t)(ks->nvars - at) * sizeof *ks->vars);
  ks->vars[at] = u;
  ks->nvars++;
  return TVK_OK;
}

static tvk_status check_value(Verify *v, UOp *u) {
  Op op = (Op)u->op;
  if (!is_scalar_value(u->dtype)) return bad(v, u, "has a non-scalar dtype");
  if (op == OP_CONST) {
    if (u->nsrc == 1 && u->src[0]->op == OP_VIEW) {
      memcpy(info_of(v, u)->shape, info_of(v, u->src[0])->shape, sizeof(int64_t) * TVK_MAX_DIMS);
      return TVK_OK;
    }
    if (u->nsrc != 0) return bad(v, u, "takes one VIEW source or none");
    return broadcast(v, u);
  }
  if (op == OP_ARANGE) {
    if (u->nsrc != 1 || u->src[0]->op != OP_VIEW || u->dtype.scalar != DT_INT32)
      return bad(v, u, "takes one VIEW source and is int32");
    memcpy(info_of(v, u)->shape, info_of(v, u->src[0])->shape, sizeof(int64_t) * TVK_MAX_DIMS);
    return TVK_OK;
  }
  if (op == OP_DEFINE_VAR) {
    /* float32: a scalar passed at launch as its bits (the scheduler's VALUEs);
     * its bounds mean nothing and are 0 */
    bool f32 = u->dtype.scalar == DT_FLOAT32 && u->dtype.count == 1;
    if (u->nsrc != 0 || u->arg.kind != ARG_VAR || (u->dtype.scalar != DT_INT32 && !f32) ||
        u->arg.var.lo > u->arg.var.hi || u->arg.var.lo < INT32_MIN || u->arg.var.hi > INT32_MAX ||
        (f32 && (u->arg.var.lo != 0 || u->arg.var.hi != 0)))
      return bad(v, u,
                 "needs int32, arg_var(name, lo, hi) with lo <= hi in int32 range, or float32 "
                 "with lo = hi = 0");
    return add_var(v, u) != TVK_OK ? v->err->status : broadcast(v, u);
  }
  if (op == OP_LOAD) return check_access(v, u);
  if (op == OP_REDUCE_AXIS) return check_reduce(v, u);
  if (op == OP_CAST && u->nsrc != 1) return bad(v, u, "takes one source");
  if (op != OP_CAST && (int)u->nsrc != op_arity(op))
    return bad(v, u, "has %u sources, not %d", u->nsrc, op_arity(op));
  return broadcast(v, u);
}

/* ---------------------------------------------------------------- stores and the sink */

static tvk_status check_store(Verify *v, UOp *u) {
  tvk_status s = check_access(v, u);
  if (s != TVK_OK) return s;
  NodeInfo *si = info_of(v, u), *vi = info_of(v, u->src[2]);
  int64_t *out = v->ks->out;
  char a[160], b[160];
  for (int d = 0; d < v->ks->ndim; d++) {
    if (vi->shape[d] != 1 && vi->shape[d] != si->shape[d]) {
      shape_fmt(v->ks->ndim, vi->shape, a, sizeof a);
      shape_fmt(v->ks->ndim, si->shape, b, sizeof b);
      return bad(v, u, "of a value of shape %s through a view of shape %s", a, b);
    }
  }
  int64_t numel = 1;
  bool over = false;
  for (int d = 0; d < v->ks->ndim && !over; d++)
    over = __builtin_mul_overflow(numel, sint_vmax(si->shape[d]), &numel) || numel > INT64_LIMIT;
  if (over) return bad(v, u, "writes 2^63 - %d elements or more", 2 * CG_MAX_CORES);
  if (numel > INT32_LIMIT) v->ks->index64 = true; /* the elements are numbered in int64 */
  if (out[0] < 0)
    memcpy(out, si->shape, sizeof(int64_t) * TVK_MAX_DIMS);
  else if (memcmp(out, si->shape, (size_t)v->ks->ndim * sizeof(int64_t)) != 0) {
    shape_fmt(v->ks->ndim, out, a, sizeof a);
    shape_fmt(v->ks->ndim, si->shape, b, sizeof b);
    return bad(v, u, "views of shapes %s and %s in one kernel", a, b);
  }
  return TVK_OK;
}

static tvk_status check_node(Verify *v, UOp *u, bool is_root) {
  Op op = (Op)u->op;
  if (op == OP_SINK) {
    if (!is_root) return bad(v, u, "is not the root");
    if (u->nsrc == 0) return bad(v, u, "has no stores");
    for (uint32_t i = 0; i < u->nsrc; i++)
      if (u->src[i]->op != OP_STORE)
        return bad(v, u, "has a %s source, not a STORE", op_name((Op)u->src[i]->op));
    return TVK_OK;
  }
  if (is_root) return bad(v, u, "is the root; a kernel AST is a SINK of STOREs");
  if (op == OP_VIEW) return check_view(v, u);
  if (op == OP_DEFINE_GLOBAL) return check_global(v, u);
  if (op == OP_STORE) return check_store(v, u);
  if (is_value_op(op)) return check_value(v, u);
  return bad(v, u, "is not an op of kernel ASTs");
}

/* The output axes are the full shape's except at reduced axes (which are 1). */
static tvk_status check_shapes(Verify *v, UOp *sink) {
  KernelDesc *ks = v->ks;
  for (int d = 0; d < ks->ndim; d++) {
    bool red = ks->reduce_axes >> d & 1;
    if (red ? ks->out[d] == 1 : ks->out[d] == ks->full[d]) continue;
    char a[160], b[160];
    shape_fmt(ks->ndim, ks->out, a, sizeof a);
    shape_fmt(ks->ndim, ks->full, b, sizeof b);
    return bad(v, sink,
               "stores shape %s, which is not the full shape %s with 1 at the reduced axes", a, b);
  }
  for (int i = 0; i < ks->nbufs; i++)
    if (ks->bufs[i].dtype == DT_VOID)
      return bad(v, sink, "uses buffers up to %d but not buffer %d", ks->nbufs - 1, i);
  return TVK_OK;
}

/* ---------------------------------------------------------------- normalisation */

/* Rebuilds the AST with each REDUCE_AXIS reducing its `own` axes only. */
static UOp *normalize(Verify *v) {
  UOp **neu = calloc(v->n, sizeof *neu);
  if (!neu) return NULL;
  UOp *srcs[3], *res = NULL;
  bool ok = true;
  for (size_t i = 0; ok && i < v->n; i++) {
    UOp *u = v->topo[i];
    UOp **src = u->nsrc <= 3 ? srcs : malloc(u->nsrc * sizeof *src);
    if (!src) break;
    bool changed = false;
    for (uint32_t k = 0; k < u->nsrc; k++) {
      src[k] = neu[*ptrmap_ref(&v->index, u->src[k])];
      changed |= src[k] != u->src[k];
    }
    if (u->op == OP_REDUCE_AXIS) {
      uint32_t own = v->info[i].own;
      int64_t axes[TVK_MAX_DIMS];
      int n = 0;
      for (int d = 0; d < v->ks->ndim; d++)
        if (own >> d & 1) axes[n++] = d;
      neu[i] = n == 0 ? src[0]
                      : uop_new(u->ctx, OP_REDUCE_AXIS, u->dtype, 1, src,
                                arg_reduce((Op)u->arg.red.op, n, axes));
    } else {
      neu[i] = changed ? uop_replace_src(u, (int)u->nsrc, src) : u;
    }
    ok = neu[i] != NULL;
    if (src != srcs) free(src);
  }
  if (ok) res = neu[v->n - 1];
  free(neu);
  return res;
}

tvk_status kernel_verify(UOp *ast, UOp **norm, KernelDesc *ks, Error *err) {
  *norm = NULL;
  memset(ks, 0, sizeof *ks);
  if (!ast) return err_first(err, TVK_ERR_INVALID_ARG, "kernel AST: NULL");
  if (ast->op != OP_SINK || ast->nsrc == 0 || ast->src[0]->op != OP_STORE ||
      ast->src[0]->nsrc != 3 || ast->src[0]->src[1]->op != OP_VIEW ||
      ast->src[0]->src[1]->arg.kind != ARG_ST)
    return err_first(
        err, TVK_ERR_INVALID_ARG,
        "kernel AST: the root must be SINK(STORE(DEFINE_GLOBAL, VIEW, value), ...), not %s",
        op_name((Op)ast->op));
  Verify v = {.ks = ks, .err = err};
  ks->ndim = st_ndim(ast->src[0]->src[1]->arg.st);
  for (int d = 0; d < TVK_MAX_DIMS; d++) ks->full[d] = 1;
  ks->out[0] = -1; /* unset until the first store */
  v.topo = uop_toposort(ast, &v.n);
  bool ok = v.topo && ptrmap_init(&v.index, v.n) && (v.info = calloc(v.n, sizeof *v.info));
  for (size_t i = 0; ok && i < v.n; i++) ok = ptrmap_put(&v.index, v.topo[i], (int64_t)i);
  if (!ok) err_first(err, TVK_ERR_OUT_OF_MEMORY, "kernel AST: out of memory");
  for (size_t i = 0; ok && i < v.n; i++) {
    UOp *u = v.topo[i];
    for (int d = 0; d < TVK_MAX_DIMS; d++) v.info[i].shape[d] = 1;
    ok = check_node(&v, u, i == v.n - 1) == TVK_OK;
    if (ok && u->op == OP_REDUCE_AXIS) ks->reduce_axes |= v.info[i].own;
  }
  /* Reduces of one kernel reduce the same axes or disjoint ones. */
  for (size_t i = 0; ok && i < v.n; i++) {
    uint32_t a = v.info[i].own;
    for (size_t j = i + 1; ok && a && j < v.n; j++) {
      uint32_t b = v.info[j].own;
      if (b && a != b && (a & b))
        ok = bad(&v, v.topo[j], "reduces axes 0x%x, overlapping another reduce's 0x%x", b, a) ==
             TVK_OK;
    }
  }
  if (ok) ok = check_shapes(&v, ast) == TVK_OK;
  /* Symbolic sizes: their expressions in sym, their largest values in full
   * and out, which every size-based decision may then use as bounds. */
  for (int d = 0; ok && d < ks->ndim; d++) {
    if (!sint_is_sym(ks->full[d])) continue;
    ks->sym[d] = ks->full[d];
    ks->sym_axes |= 1u << d;
    ks->full[d] = sint_vmax(ks->full[d]);
    if (sint_is_sym(ks->out[d])) ks->out[d] = ks->full[d];
  }
  if (ok && !(*norm = normalize(&v)))
    err_first(err, TVK_ERR_OUT_OF_MEMORY, "kernel AST: out of memory");
  free(v.topo);
  free(v.info);
  ptrmap_free(&v.index);
  return err->status;
}

size_t kernel_sym_name(sint size, char *buf, size_t n) {
  char txt[64];
  sint_str(size, txt, sizeof txt);
  size_t at = 0;
  for (char *c = txt; *c && at + 1 < n; c++)
    if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))
      buf[at++] = *c;
    else if (at > 0 && buf[at - 1] != '_')
      buf[at++] = '_';
  while (at > 0 && buf[at - 1] == '_') at--;
  if (n) buf[at < n ? at : n - 1] = '\0';
  return at;
}

void kernel_default_name(const KernelDesc *ks, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "%s", ks->reduce_axes ? "r" : "E");
  for (int d = 0; d < ks->ndim && at < n; d++) {
    at += (size_t)snprintf(buf + at, n - at, "_");
    if (at >= n) break;
    if (ks->sym_axes >> d & 1)
      at += kernel_sym_name(ks->sym[d], buf + at, n - at);
    else
      at += (size_t)snprintf(buf + at, n - at, "%" PRId64, ks->full[d]);
  }
  if (ks->ndim == 0 && at < n) snprintf(buf + at, n - at, "_1");
}

int64_t kernel_iterations(const KernelDesc *ks, uint32_t axes) {
  int64_t n = 1;
  for (int d = 0; d < ks->ndim; d++) {
    if (!(axes >> d & 1)) continue;
    if (ks->full[d] <= 0) return 0;
    n = n > INT64_MAX / ks->full[d] ? INT64_MAX : n * ks->full[d];
  }
  return n;
}
