/* Shared helpers of the tensor ops: see ops_common.h. */
#include "frontend/ops_common.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- inputs */

tvk_tensor *bc_check_sym(const char *op, int n, tvk_tensor *const *ts, bool *bad) {
  *bad = false;
  for (int i = 0; i < n; i++)
    *bad = *bad || !ts[i] || ts[i]->status != TVK_OK || !ts[0] || ts[i]->ctx != ts[0]->ctx;
  if (*bad) return tensor_check_inputs(op, n, ts);
  tvk_tensor *err = front_check_devices(op, n, ts);
  *bad = err != NULL;
  return err;
}

tvk_tensor *bc_check(const char *op, int n, tvk_tensor *const *ts, bool *bad) {
  tvk_tensor *err = bc_check_sym(op, n, ts, bad);
  if (*bad) return err;
  err = front_refuse_symbolic(op, n, ts);
  *bad = err != NULL;
  return err;
}

const char *bc_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = '\0';
  at += (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < ndim && at < n; d++) {
    at += (size_t)snprintf(buf + at, n - at, "%s", d ? ", " : "");
    if (at < n && sint_is_sym(shape[d]))
      at += (size_t)sint_str(shape[d], buf + at, n - at);
    else if (at < n)
      at += (size_t)snprintf(buf + at, n - at, "%" PRId64, shape[d]);
  }
  if (at < n) snprintf(buf + at, n - at, ndim == 1 ? ",)" : ")");
  return buf;
}

int64_t bc_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) return 0;
  for (int d = 0; d < ndim; d++) {
    int64_t s = sint_is_sym(shape[d]) ? sint_vmax(shape[d]) : shape[d];
    if (s < 0 || (s > 0 && n > INT64_MAX / s)) return -1;
    n *= s;
  }
  return n;
}

tvk_tensor *bc_result(tvk_ctx *ctx, const char *op, UOp *u, ScalarType s, int ndim,
                      const int64_t *shape) {
  if (!u) return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  return tensor_new(ctx, u, dt_to_tvk(s), ndim, shape);
}

tvk_tensor *bc_same(const tvk_tensor *a) {
  return tensor_new(a->ctx, a->uop, a->dtype, a->ndim, a->shape);
}

/* ---------------------------------------------------------------- broadcasting */

bool bc_broadcast_shape(int n, tvk_tensor *const *ts, int *ndim, int64_t *shape) {
  int nd = 0;
  for (int i = 0; i < n; i++)
    if (ts[i]->ndim > nd) nd = ts[i]->ndim;
  for (int d = 0; d < nd; d++) shape[d] = 1;
  for (int i = 0; i < n; i++) {
    int off = nd - ts[i]->ndim; /* aligned at the end */
    for (int d = 0; d < ts[i]->ndim; d++) {
      int64_t s = ts[i]->shape[d], *r = &shape[off + d];
      if (s == *r || s == 1) continue;
      if (*r != 1) return false;
      *r = s; /* may be 0: a size-1 dim stretches to 0 */
    }
  }
  *ndim = nd;
  return true;
}

ScalarType bc_promote(int n, tvk_tensor *const *ts) {
  ScalarType s = dt_from_tvk(ts[0]->dtype);
  for (int i = 1; i < n; i++) s = dt_promote(s, dt_from_tvk(ts[i]->dtype));
  return s;
}

UOp *bc_to_shape(UOp *x, int xnd, const int64_t *xs, int nd, const int64_t *shape) {
  assert(xnd <= nd);
  int64_t padded[TVK_MAX_DIMS];
  bool same = xnd == nd;
  for (int d = 0; d < nd; d++) {
    padded[d] = d < nd - xnd ? 1 : xs[d - (nd - xnd)];
    same = same && padded[d] == shape[d];
  }
  if (same) return x;
  if (xnd != nd) x = bc_reshape(x, xnd, xs, nd, padded);
  if (memcmp(padded, shape, (size_t)nd * sizeof *shape) != 0) x = bc_expand(x, nd, padded, shape);
  return x;
}

int bc_axis(int axis, int ndim) {
  int a = axis < 0 ? axis + ndim : axis;
  return a < 0 || a >= ndim ? -1 : a;
}

static tvk_tensor *check_axis(const char *op, tvk_tensor *a, int axis, int *ax, bool *bad,
                              bool sym) {
  tvk_tensor *err = sym ? bc_check_sym(op, 1, &a, bad) : bc_check(op, 1, &a, bad);
  if (*bad) return err;
  *ax = bc_axis(axis, a->ndim > 0 ? a->ndim : 1);
  if (*ax < 0) {
    *bad = true;
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: axis %d out of range for %d dims", op,
                        axis, a->ndim);
  }
  return NULL;
}

tvk_tensor *bc_check_axis(const char *op, tvk_tensor *a, int axis, int *ax, bool *bad) {
  return check_axis(op, a, axis, ax, bad, false);
}

tvk_tensor *bc_check_axis_sym(const char *op, tvk_tensor *a, int axis, int *ax, bool *bad) {
  return check_axis(op, a, axis, ax, bad, true);
}

tvk_tensor *bc_reduce_axes(const char *op, const tvk_tensor *a, int naxes, const int *axes,
                           bool keepdim, BcAxes *r) {
  int nd = a->ndim;
  bool on[TVK_MAX_DIMS] = {false};
  int from[TVK_MAX_DIMS];
  if (naxes < 0)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: naxes %d is negative", op, naxes);
  if (naxes == 0 || !axes) {
    for (int d = 0; d < nd; d++) on[d] = true;
  } else {
    for (int i = 0; i < naxes; i++) {
      int d = bc_axis(axes[i], nd);
      if (d < 0)
        return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: axis %d out of range for %d dims", op,
                            axes[i], nd);
      if (on[d] && from[d] == axes[i])
        return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: axis %d listed twice", op, axes[i]);
      if (on[d])
        return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: axes %d and %d both name dim %d", op,
                            from[d], axes[i], d);
      on[d] = true;
      from[d] = axes[i];
    }
  }
  r->n = r->out_nd = 0;
  r->count = 1;
  for (int d = 0; d < nd; d++) {
    r->keep[d] = on[d] ? 1 : a->shape[d];
    if (on[d]) {
      r->axes[r->n++] = d;
      r->count = sint_mul(r->count, a->shape[d]); /* <= numel: no overflow */
    }
    if (!on[d] || keepdim) r->out[r->out_nd++] = r->keep[d];
  }
  return NULL;
}

/* ---------------------------------------------------------------- movement */

/* One movement op on a tracker: what the bc_ functions below apply. */
typedef struct {
  enum { MV_RESHAPE, MV_PERMUTE, MV_EXPAND, MV_PAD, MV_SHRINK, MV_FLIP } kind;
  int nd;               /* MV_RESHAPE: the new dims */
  const int64_t *shape; /* MV_RESHAPE, MV_EXPAND: the new shape */
  const int *order;
  const int64_t (*ranges)[2]; /* MV_PAD: pads; MV_SHRINK: ranges */
  const bool *flip;
} Move;

static ShapeTracker *apply(const ShapeTracker *st, const Move *m) {
  switch (m->kind) {
  case MV_RESHAPE: return st_reshape(st, m->nd, m->shape);
  case MV_PERMUTE: return st_permute(st, m->order);
  case MV_EXPAND: return st_expand(st, m->shape);
  case MV_PAD: return st_pad(st, m->ranges);
  case MV_SHRINK: return st_shrink(st, m->ranges);
  case MV_FLIP: return st_flip(st, m->flip);
  }
  return NULL;
}

/* x (of shape (nd, shape)) seen through m: graph_view(x, m on a tracker of
 * x's shape), which composes with x's own view. Where x is a VIEW over a
 * symbolic tracker, m is applied to that tracker instead: the same
 * mapping, but composing two symbolic views keeps both (view.c merges
 * general views with integer digits only), and each extra view costs the
 * kernel divisions by the variable in every index. */
static UOp *moved_view(UOp *x, int nd, const int64_t *shape, const Move *m) {
  if (!x) return NULL;
  if (x->op == OP_VIEW && st_is_symbolic(x->arg.st)) {
    ShapeTracker *st = apply(x->arg.st, m);
    UOp *r = st ? uop_new(x->ctx, OP_VIEW, x->dtype, 1, &x->src[0], arg_st(st)) : NULL;
    st_free(st);
    return r;
  }
  ShapeTracker *b = st_from_shape(nd, shape), *st = b ? apply(b, m) : NULL;
  UOp *r = st ? graph_view(x, st) : NULL;
  st_free(b);
  st_free(st);
  return r;
}

UOp *bc_reshape(UOp *x, int nd, const int64_t *shape, int new_nd, const int64_t *new_shape) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_RESHAPE, .nd = new_nd, .shape = new_shape});
}

UOp *bc_permute(UOp *x, int nd, const int64_t *shape, const int *order) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_PERMUTE, .order = order});
}

UOp *bc_expand(UOp *x, int nd, const int64_t *shape, const int64_t *new_shape) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_EXPAND, .shape = new_shape});
}

UOp *bc_pad(UOp *x, int nd, const int64_t *shape, const int64_t (*pads)[2]) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_PAD, .ranges = pads});
}

UOp *bc_shrink(UOp *x, int nd, const int64_t *shape, const int64_t (*ranges)[2]) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_SHRINK, .ranges = ranges});
}

UOp *bc_flip(UOp *x, int nd, const int64_t *shape, const bool *flip) {
  return moved_view(x, nd, shape, &(Move){.kind = MV_FLIP, .flip = flip});
}

/* ---------------------------------------------------------------- elementwise */

Ew ew_frame(tvk_ctx *ctx, int ndim, const int64_t *shape) {
  Ew e = {.ctx = ctx, .ndim = ndim};
  memcpy(e.shape, shape, (size_t)ndim * sizeof *shape);
  return e;
}

UOp *ew_const(const Ew *e, ScalarType s, double v) {
  return graph_const(e->ctx, s, v, e->ndim, e->shape);
}

/* graph_const makes VIEW(CONST); the exact value replaces its CONST, keeping
 * the view, so values a double cannot hold (int64 max) stay exact. */
UOp *ew_const_val(const Ew *e, ScalarType s, CVal c) {
  UOp *k = uop_const(e->ctx->u, dt_make(s), c);
  UOp *v = ew_const(e, s, 0);
  if (!k || !v) return NULL;
  if (v->op == OP_CONST) return k;
  assert(v->op == OP_VIEW && v->nsrc == 1 && v->src[0]->op == OP_CONST);
  return uop_replace_src(v, 1, &k);
}

UOp *ew_like(const Ew *e, UOp *x, double v) {
  return x ? ew_const(e, (ScalarType)x->dtype.scalar, v) : NULL;
}

UOp *ew_alu1(Op op, UOp *a) { return a ? uop_alu1(op, a) : NULL; }

UOp *ew_alu2(Op op, UOp *a, UOp *b) {
  if (!a || !b) return NULL;
  assert(dt_eq(a->dtype, b->dtype));
  return uop_alu2(op, a, b);
}

UOp *ew_alu3(Op op, UOp *a, UOp *b, UOp *c) {
  if (!a || !b || !c) return NULL;
  assert(op != OP_WHERE || (dt_is_bool(a->dtype) && dt_eq(b->dtype, c->dtype)));
  return uop_alu3(op, a, b, c);
}

UOp *ew_cast(UOp *x, ScalarType s) { return x ? uop_cast(x, dt_make(s)) : NULL; }

UOp *ew_mulc(const Ew *e, UOp *x, double c) { return ew_mul(x, ew_like(e, x, c)); }
UOp *ew_addc(const Ew *e, UOp *x, double c) { return ew_add(x, ew_like(e, x, c)); }

UOp *ew_not(const Ew *e, UOp *x) { return ew_ne(x, ew_const(e, DT_BOOL, 1)); }

UOp *ew_truth(const Ew *e, UOp *x) {
  if (!x || dt_is_bool(x->dtype)) return x;
  return ew_ne(x, ew_like(e, x, 0));
}

UOp *ew_isnan(UOp *x) { return ew_ne(x, x); }
