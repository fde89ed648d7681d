/* Lowering: kernel AST -> UOps with explicit loops (codegen.h). One graph_rewrite
 * pass turns loads, stores, shaped constants and reduces into index math over
 * the kernel's RANGEs, the way the seed's lowerer does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/pattern.h"

typedef struct {
  UCtx *ctx;
  const KernelDesc *ks;
  UOp *axis[TVK_MAX_DIMS];      /* the index of each axis: a RANGE, split start + RANGE, or 0 */
  UOp *outer[TVK_MAX_DIMS + 1]; /* the output (non-reduce) RANGEs, outermost first */
  UOp *red[TVK_MAX_DIMS];       /* the RANGE of each reduced axis (of o when unrolled) */
  /* Grid mode: the unrolled reduce axis (grid_reduce_axis), by `unroll` (1: none) */
  int64_t unroll;
  int unroll_axis;
  UOp *unroll_q, *unroll_base; /* the placeholder of the element in the body, o * unroll */
  int nouter;
  UOp *zero; /* int32 0, the index of size-1 dims */
  int nacc;  /* accumulators made so far */
  Error *err;
} LowerCtx;

/* Builders that pass NULL (out of memory) through. */
static UOp *b2(Op op, UOp *a, UOp *b) { return a && b ? uop_alu2(op, a, b) : NULL; }
static UOp *b_min(UOp *a, UOp *b) {
  UOp *lt = b2(OP_CMPLT, a, b);
  return lt ? uop_where(lt, a, b) : NULL;
}
static UOp *b_c(LowerCtx *lc, int64_t v) { return uop_const_int(lc->ctx, DT(INT32), v); }

/* ---------------------------------------------------------------- axes */

/* The axis of size n split across cores: core c of nc runs the chunk
 * [lo, lo + count) with chunk = ceil(n / nc), lo = min(c * chunk, n) and
 * count = min(n - lo, chunk); no intermediate exceeds n + nc. */
static UOp *split_axis(LowerCtx *lc, int64_t n, int64_t axis_id) {
  UCtx *c = lc->ctx;
  UOp *cid = uop_new(c, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("core_id", 0, CG_MAX_CORES - 1));
  UOp *nc = uop_new(c, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("n_cores", 1, CG_MAX_CORES));
  UOp *num = b_c(lc, n);
  UOp *chunk = b2(OP_ADD, b2(OP_IDIV, b_c(lc, n - 1), nc), b_c(lc, 1));
  UOp *lo = b_min(b2(OP_MUL, cid, chunk), num);
  UOp *rest = lo && num ? uop_sub(num, lo) : NULL;
  UOp *count = b_min(rest, chunk);
  UOp *r = count ? uop_range(c, count, axis_id) : NULL;
  lc->outer[lc->nouter++] = r;
  return b2(OP_ADD, lo, r);
}

/* Sets lc->axis: the first output axis of size other than 1 is split across
 * cores, the other output axes and the reduced axes get a RANGE each (axis id =
 * the dim), size-1 axes the constant 0. With no output axis to split, a
 * one-iteration range (axis id ndim) keeps every core but the first idle. */
static bool make_axes(LowerCtx *lc) {
  const KernelDesc *ks = lc->ks;
  bool split = false;
  for (int d = 0; d < ks->ndim; d++) {
    bool red = ks->reduce_axes >> d & 1;
    if (ks->full[d] == 1)
      lc->axis[d] = lc->zero;
    else if (!red && !split)
      lc->axis[d] = split_axis(lc, ks->full[d], d), split = true;
    else {
      lc->axis[d] = uop_range_n(lc->ctx, ks->full[d], d);
      if (!red) lc->outer[lc->nouter++] = lc->axis[d];
      if (red) lc->red[d] = lc->axis[d];
    }
    if (!lc->axis[d]) return false;
  }
  if (!split) {
    split_axis(lc, 1, ks->ndim);
    /* The split is the outermost loop: keep it first in the list. */
    UOp *s = lc->outer[lc->nouter - 1];
    memmove(lc->outer + 1, lc->outer, (size_t)(lc->nouter - 1) * sizeof *lc->outer);
    lc->outer[0] = s;
  }
  for (int i = 0; i < lc->nouter; i++)
    if (!lc->outer[i]) return false;
  return true;
}

/* Grid mode: the reduce loops of one invocation may run CG_GRID_LOOP_BUDGET
 * iterations in all (their sizes multiplied). Past that one reduce axis is
 * unrolled by U, a power of two up to CG_GRID_MAX_UNROLL: a loop o over
 * ceil(n / U) whose body takes the elements o U + j, j < U, in order
 * (lower_reduce). The innermost reduce axis is chosen when that is enough, as
 * the sums then add in the order of plain loops; else the longest. */
static void choose_unroll(LowerCtx *lc) {
  const KernelDesc *ks = lc->ks;
  int64_t total = 1;
  int inner = -1, longest = -1;
  for (int d = 0; d < ks->ndim; d++) {
    if (!(ks->reduce_axes >> d & 1) || ks->full[d] <= 1) continue;
    total = total > INT64_MAX / ks->full[d] ? INT64_MAX : total * ks->full[d];
    inner = d;
    if (longest < 0 || ks->full[d] > ks->full[longest]) longest = d;
  }
  lc->unroll = 1;
  if (total <= CG_GRID_LOOP_BUDGET) return;
  for (int pass = 0; pass < 2; pass++) {
    int d = pass == 0 ? inner : longest;
    int64_t n = ks->full[d], rest = total / n, u = 2;
    while (rest * ((n + u - 1) / u) > CG_GRID_LOOP_BUDGET && u < CG_GRID_MAX_UNROLL && u < n)
      u *= 2;
    if (pass == 1 || rest * ((n + u - 1) / u) <= CG_GRID_LOOP_BUDGET) {
      lc->unroll = u, lc->unroll_axis = d;
      return;
    }
  }
}

/* The index of reduce axis d in grid mode: a RANGE, or for the unrolled axis
 * min(o U + q, n - 1), q a placeholder SPECIAL that lower_reduce substitutes. */
static UOp *grid_reduce_axis(LowerCtx *lc, int d) {
  int64_t n = lc->ks->full[d], u = lc->unroll;
  if (u == 1 || d != lc->unroll_axis) return lc->red[d] = uop_range_n(lc->ctx, n, d);
  UOp *o = uop_range_n(lc->ctx, (n + u - 1) / u, d);
  lc->unroll_q = uop_new(lc->ctx, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("unroll", 0, u - 1));
  lc->unroll_base = b2(OP_MUL, o, b_c(lc, u));
  lc->red[d] = o;
  return b_min(b2(OP_ADD, lc->unroll_base, lc->unroll_q), b_c(lc, n - 1));
}

/* Grid mode (codegen.h, lower_kernel_grid): the output elements numbered
 * row-major, one per invocation gid = group_id * local + local_id; the output
 * axes are the digits of min(gid, total - 1); when the last group runs past the
 * end, a RANGE of (gid < total ? 1 : 0) iterations is the bounds check that
 * holds the stores and the reduces. */
static bool make_axes_grid(LowerCtx *lc, int local_size, CgLaunch *launch) {
  const KernelDesc *ks = lc->ks;
  UCtx *c = lc->ctx;
  int64_t total = 1;
  for (int d = 0; d < ks->ndim; d++)
    if (!(ks->reduce_axes >> d & 1)) total *= ks->full[d];
  int64_t local = total < local_size ? (total > 1 ? total : 1) : local_size;
  int64_t groups = (total + local - 1) / local; /* 0 for an empty output: nothing runs */
  *launch = (CgLaunch){{groups, 1, 1}, {local, 1, 1}};
  UOp *grp = uop_new(c, OP_SPECIAL, DT(INT32), 0, NULL,
                     arg_var("group_id", 0, groups > 1 ? groups - 1 : 0));
  UOp *lane = uop_new(c, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("local_id", 0, local - 1));
  UOp *gid = b2(OP_ADD, b2(OP_MUL, grp, b_c(lc, local)), lane), *flat = gid;
  if (groups * local != total) { /* the last group runs past the end */
    flat = b_min(gid, b_c(lc, total > 1 ? total - 1 : 0));
    UOp *in = b2(OP_CMPLT, gid, b_c(lc, total)), *one = b_c(lc, 1);
    UOp *r = in && one ? uop_range(c, uop_where(in, one, lc->zero), ks->ndim) : NULL;
    if (!r) return false;
    lc->outer[lc->nouter++] = r;
  }
  if (!flat) return false;
  choose_unroll(lc);
  int64_t stride = 1; /* of axis d in the numbering: the output axes after it */
  for (int d = ks->ndim - 1; d >= 0; d--) {
    bool red = ks->reduce_axes >> d & 1;
    if (ks->full[d] == 1)
      lc->axis[d] = lc->zero;
    else if (red)
      lc->axis[d] = grid_reduce_axis(lc, d);
    else {
      lc->axis[d] = b2(OP_MOD, b2(OP_IDIV, flat, b_c(lc, stride)), b_c(lc, ks->full[d]));
      stride *= ks->full[d];
    }
    if (!lc->axis[d]) return false;
  }
  return true;
}

/* (index, valid) of a view: size-1 dims of the view are indexed by 0. */
static bool view_index(LowerCtx *lc, UOp *view, UOp **idx, UOp **valid) {
  const ShapeTracker *st = view->arg.st;
  UOp *idxs[TVK_MAX_DIMS];
  for (int d = 0; d < st_ndim(st); d++) idxs[d] = st_shape(st)[d] == 1 ? lc->zero : lc->axis[d];
  return st_to_indexed_uops(st, lc->ctx, idxs, idx, valid);
}

static bool is_true(const UOp *u) { return u->op == OP_CONST && u->arg.i != 0; }
static bool is_false(const UOp *u) { return u->op == OP_CONST && u->arg.i == 0; }

static UOp *oom(LowerCtx *lc) {
  err_first(lc->err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  return NULL;
}

/* ---------------------------------------------------------------- rules */

enum { X = 1, B, V, Y };

/* LOAD(buf, VIEW) -> LOAD(INDEX(buf, idx))  or  LOAD(INDEX(buf, idx), 0, valid) */
static UOp *lower_load(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid;
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *zero = uop_const_int(lc->ctx, c[X]->dtype, 0);
  if (is_false(valid)) return zero;
  UOp *index = uop_new(lc->ctx, OP_INDEX, c[B]->dtype, 2, (UOp *[]){c[B], idx}, arg_none());
  if (!index || !zero) return oom(lc);
  if (is_true(valid)) return uop_new(lc->ctx, OP_LOAD, c[X]->dtype, 1, &index, arg_none());
  return uop_new(lc->ctx, OP_LOAD, c[X]->dtype, 3, (UOp *[]){index, zero, valid}, arg_none());
}

/* STORE(buf, VIEW, x) -> STORE(INDEX(buf, idx), x, [valid,] output RANGEs...): the
 * ranges say the store runs once per output element even where its index does
 * not depend on them (the one-iteration core range). */
static UOp *lower_store(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid, *src[3 + TVK_MAX_DIMS + 1];
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *index = uop_new(lc->ctx, OP_INDEX, c[B]->dtype, 2, (UOp *[]){c[B], idx}, arg_none());
  if (!index) return oom(lc);
  int n = 0;
  src[n++] = index;
  src[n++] = c[Y];
  if (!is_true(valid)) src[n++] = valid;
  for (int i = 0; i < lc->nouter; i++) src[n++] = lc->outer[i];
  return uop_new(lc->ctx, OP_STORE, dt_make(DT_VOID), n, src, arg_none());
}

/* CONST(VIEW) -> c  or  valid ? c : 0 */
static UOp *lower_const(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid;
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *k = uop_new(lc->ctx, OP_CONST, c[X]->dtype, 0, NULL, c[X]->arg);
  UOp *zero = uop_const_int(lc->ctx, c[X]->dtype, 0);
  if (!k || !zero) return oom(lc);
  if (is_true(valid)) return k;
  if (is_false(valid)) return zero;
  return uop_where(valid, k, zero);
}

/* ARANGE(VIEW) -> idx  or  valid ? idx : 0 (the view's index into its base) */
static UOp *lower_arange(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid;
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *zero = uop_const_int(lc->ctx, c[X]->dtype, 0);
  if (!zero) return oom(lc);
  if (is_true(valid)) return idx;
  if (is_false(valid)) return zero;
  return uop_where(valid, idx, zero);
}

/* The identity of a reduce op: 0 for ADD, 1 for MUL, the dtype's minimum for MAX. */
static UOp *identity(LowerCtx *lc, Op op, DType dt) {
  if (op == OP_ADD) return uop_const_int(lc->ctx, dt, 0);
  if (op == OP_MUL) return uop_const_int(lc->ctx, dt, 1);
  if (dt_is_float(dt)) return uop_const_float(lc->ctx, dt, -INFINITY);
  return uop_const_int(lc->ctx, dt, dt_min_i(dt));
}

/* Whether the graph under x holds an accumulator (a nested reduce); true when
 * out of memory, which the caller then treats the safe way. */
static bool has_acc(UOp *x) {
  size_t n = 0;
  UOp **t = uop_toposort(x, &n);
  bool found = !t;
  for (size_t i = 0; t && i < n && !found; i++) found = t[i]->op == OP_DEFINE_ACC;
  free(t);
  return found;
}

/* x for element o U + k of the unrolled axis (k a CONST or a RANGE), or the
 * identity past the axis's end, where the loads were clamped to n - 1. */
static UOp *unrolled_elem(LowerCtx *lc, UOp *x, UOp *k, UOp *ident) {
  UOp *xk = k ? uop_substitute(x, 1, &lc->unroll_q, &k) : NULL;
  UOp *in = b2(OP_CMPLT, b2(OP_ADD, lc->unroll_base, k), b_c(lc, lc->ks->full[lc->unroll_axis]));
  return xk && in ? uop_where(in, xk, ident) : NULL;
}

/* REDUCE_AXIS(x) -> ASSIGN(acc, acc op x), acc = DEFINE_ACC(identity, RANGEs of the axes).
 * Over the unrolled axis (grid_reduce_axis): acc op x_0 op ... op x_{U-1}, in
 * the order of a plain loop; a body holding a nested reduce cannot be copied,
 * so it runs in an inner RANGE(U) instead (axis id ndim + 1 + d). */
static UOp *lower_reduce(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *r = c[X], *x = r->src[0], *src[2 + TVK_MAX_DIMS], *inner = NULL;
  Op op = (Op)r->arg.red.op;
  bool unrolled = false;
  int n = 0;
  src[n++] = identity(lc, op, r->dtype);
  for (int i = 0; i < r->arg.red.n; i++) {
    int d = (int)r->arg.red.axes[i];
    src[n++] = lc->red[d];
    unrolled |= lc->unroll > 1 && d == lc->unroll_axis;
  }
  if (!src[0]) return oom(lc);
  if (unrolled && has_acc(x)) {
    inner = uop_range_n(lc->ctx, lc->unroll, lc->ks->ndim + 1 + lc->unroll_axis);
    if (!inner || !(x = unrolled_elem(lc, x, inner, src[0]))) return oom(lc);
    src[n++] = inner, unrolled = false;
  }
  UOp *acc = uop_new(lc->ctx, OP_DEFINE_ACC, r->dtype, n, src, arg_int(lc->nacc++));
  UOp *upd = acc;
  for (int64_t k = 0; upd && k < (unrolled ? lc->unroll : 1); k++) {
    UOp *xk = unrolled ? unrolled_elem(lc, x, b_c(lc, k), src[0]) : x;
    upd = xk ? uop_alu2(op, upd, xk) : NULL;
  }
  if (!upd) return oom(lc);
  return uop_new(lc->ctx, OP_ASSIGN, r->dtype, 2, (UOp *[]){acc, upd}, arg_none());
}

#define P_GLOBAL PAT_OP0(OP_DEFINE_GLOBAL, B)
#define P_VIEW PAT_OP0(OP_VIEW, V)

static const Rule lower_rules[] = {
    /* LOAD(buf, VIEW) -> LOAD(INDEX(buf, idx) [, 0, valid]) */
    {PAT_OP(OP_LOAD, X, P_GLOBAL, P_VIEW), lower_load},
    /* STORE(buf, VIEW, x) -> STORE(INDEX(buf, idx), x [, valid], ranges) */
    {PAT_OP(OP_STORE, X, P_GLOBAL, P_VIEW, PAT_ANY(Y)), lower_store},
    /* CONST(VIEW) -> valid ? c : 0 */
    {PAT_OP(OP_CONST, X, P_VIEW), lower_const},
    /* ARANGE(VIEW) -> valid ? idx : 0 */
    {PAT_OP(OP_ARANGE, X, P_VIEW), lower_arange},
    /* REDUCE_AXIS(x) -> ASSIGN(acc, acc op x) */
    {PAT_OP0(OP_REDUCE_AXIS, X), lower_reduce},
};

/* The rewrite, once the axes are made. */
static tvk_status lower_rewrite(UOp *ast, LowerCtx *lc, UOp **out, Error *err) {
  PatternMatcher *pm = pm_new(lower_rules, RULES_N(lower_rules));
  if (!pm) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  UOp *res = graph_rewrite(ast, pm, lc, false);
  pm_free(pm);
  if (err->status != TVK_OK) return err->status;
  if (!res) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  *out = res;
  return TVK_OK;
}

tvk_status lower_kernel(UOp *ast, const KernelDesc *ks, UOp **out, Error *err) {
  *out = NULL;
  LowerCtx lc = {.ctx = ast->ctx, .ks = ks, .err = err};
  lc.zero = b_c(&lc, 0);
  if (!lc.zero || !make_axes(&lc))
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  return lower_rewrite(ast, &lc, out, err);
}

tvk_status lower_kernel_grid(UOp *ast, const KernelDesc *ks, int local_size, UOp **out,
                             CgLaunch *launch, Error *err) {
  *out = NULL;
  if (local_size < 1)
    return err_first(err, TVK_ERR_INVALID_ARG, "lowering: work-group size %d", local_size);
  LowerCtx lc = {.ctx = ast->ctx, .ks = ks, .err = err};
  lc.zero = b_c(&lc, 0);
  if (!lc.zero || !make_axes_grid(&lc, local_size, launch))
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  return lower_rewrite(ast, &lc, out, err);
}
