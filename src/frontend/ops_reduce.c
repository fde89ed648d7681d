/* Reductions (tvk.h): sum prod max min mean over a set of axes, as
 * REDUCE_AXIS(x) with arg_reduce(ADD | MUL | MAX, axes); reduced axes keep size
 * 1 in the graph and keepdim=false is a reshape on top. Elementwise work before
 * and after the REDUCE_AXIS fuses with it. See docs/frontend.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/ops_common.h"

typedef enum { RK_SUM, RK_PROD, RK_MAX, RK_MIN, RK_MEAN } RKind;

static ScalarType result_dtype(RKind k, ScalarType s) {
  if (k == RK_SUM || k == RK_PROD) return dt_sum_result(s);
  if (k == RK_MEAN) return dt_float_result(s);
  return s;
}

/* Sums accumulate in dt_acc; max and min are exact in any dtype. */
static ScalarType compute_dtype(RKind k, ScalarType res) {
  return k != RK_MAX && k != RK_MIN ? dt_acc(res) : res;
}

/* The result of reducing zero elements. */
static UOp *identity(const Ew *e, RKind k, ScalarType s) {
  bool f = DT_BITS_FLOAT & DT_BIT(s);
  switch (k) {
  case RK_SUM: return ew_const(e, s, 0);
  case RK_PROD: return ew_const(e, s, 1);
  case RK_MEAN: return ew_const(e, s, NAN);
  case RK_MAX:
    return f ? ew_const(e, s, -INFINITY) : ew_const_val(e, s, (CVal){.i = dt_min_i(dt_make(s))});
  case RK_MIN: break;
  }
  if (f) return ew_const(e, s, INFINITY);
  /* the largest value: all ones for unsigned types (uint64's does not fit an int64) */
  bool u = s == DT_BOOL || dt_is_unsigned(dt_make(s));
  return ew_const_val(e, s, (CVal){.i = u ? -1 : dt_max_i(dt_make(s))});
}

/* A long reduce with few outputs is split in two (the seed's split_reduceop):
 * reduced axis i of size n = q * (n / q) becomes the dims (n / q, ..., q), the
 * reduce runs over the original axes into q partial results per output, and
 * a second reduce combines the q of them. The scheduler gives the inner
 * reduce a kernel of its own (a reduce inside another reduce's input), which
 * has q times as many outputs to spread over cores and work groups, and each
 * partial reduces q times fewer elements. q is the largest divisor of some
 * reduced axis in 8..256 with at most 2^22 partials. Unlike the seed, an axis
 * a view broadcasts is split too: it reads no memory, but its work still
 * needs spreading (a GPU invocation may only loop so long). */
enum { SPLIT_THRESHOLD = 32768, SPLIT_MAX = 256, SPLIT_MIN = 8, SPLIT_MAX_PARTIALS = 1 << 22 };

static UOp *reduce_op(UOp *x, Op op, const BcAxes *ax) {
  if (!x) return NULL;
  if (ax->n == 0) return x; /* nothing to reduce: a 0-d tensor or no axes */
  int64_t shape[TVK_MAX_DIMS + 1];
  int nd = graph_shape(x, shape);
  int64_t outs = bc_numel(nd, ax->keep);
  int split = -1;
  int64_t q = 0;
  if (ax->count >= SPLIT_THRESHOLD && nd < TVK_MAX_DIMS && outs > 0) {
    int64_t most = SPLIT_MAX_PARTIALS / outs < SPLIT_MAX ? SPLIT_MAX_PARTIALS / outs : SPLIT_MAX;
    for (int k = 0; k < ax->n && split < 0; k++) {
      int i = (int)ax->axes[k];
      for (int64_t c = most; c >= SPLIT_MIN && split < 0; c--)
        if (shape[i] % c == 0 && shape[i] / c > 1) split = i, q = c;
    }
  }
  if (split < 0)
    return uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &x, arg_reduce(op, ax->n, ax->axes));
  /* (..., n, ...) -> (..., q, n / q, ...) -> (..., n / q, ..., q): the axes
   * keep their numbers and the partials are the last dim */
  int64_t split_shape[TVK_MAX_DIMS + 1];
  int order[TVK_MAX_DIMS + 1];
  for (int d = 0, o = 0; d <= nd; d++) {
    split_shape[d] = d < split        ? shape[d]
                     : d == split     ? q
                     : d == split + 1 ? shape[split] / q
                                      : shape[d - 1];
    if (d != split) order[o++] = d;
  }
  order[nd] = split;
  UOp *y = bc_permute(bc_reshape(x, nd, shape, nd + 1, split_shape), nd + 1, split_shape, order);
  UOp *part =
      y ? uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &y, arg_reduce(op, ax->n, ax->axes)) : NULL;
  const int64_t last = nd;
  UOp *all =
      part ? uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &part, arg_reduce(op, 1, &last)) : NULL;
  int64_t kept[TVK_MAX_DIMS + 1];
  memcpy(kept, ax->keep, (size_t)nd * sizeof *kept);
  kept[nd] = 1;
  return bc_reshape(all, nd + 1, kept, nd, ax->keep);
}

/* MAX of floats lets a NaN through only when it comes first, so a second
 * reduce over x != x (bool, MAX = any) makes any NaN the result, as numpy's max. */
static UOp *max_of(const Ew *eo, UOp *x, const BcAxes *ax) {
  UOp *m = reduce_op(x, OP_MAX, ax);
  if (!x || !dt_is_float(x->dtype) || ax->n == 0) return m;
  UOp *any_nan = reduce_op(ew_isnan(x), OP_MAX, ax);
  return ew_where(any_nan, ew_like(eo, m, NAN), m);
}

/* min = -max(-x) for floats (negation is exact); for integers and bool
 * ~max(~x) (x ^ all-ones reverses the order without overflow, unlike -x). */
static UOp *min_of(const Ew *ei, const Ew *eo, UOp *x, const BcAxes *ax) {
  if (x && dt_is_float(x->dtype)) return ew_alu1(OP_NEG, max_of(eo, ew_alu1(OP_NEG, x), ax));
  ScalarType s = x ? (ScalarType)x->dtype.scalar : DT_INT32;
  UOp *flipped = ew_alu2(OP_XOR, x, ew_const_val(ei, s, (CVal){.i = -1}));
  return ew_alu2(OP_XOR, reduce_op(flipped, OP_MAX, ax), ew_const_val(eo, s, (CVal){.i = -1}));
}

static UOp *build(const Ew *ei, const Ew *eo, RKind k, UOp *x, const BcAxes *ax) {
  switch (k) {
  case RK_SUM: return reduce_op(x, OP_ADD, ax);
  case RK_PROD: return reduce_op(x, OP_MUL, ax);
  case RK_MAX: return max_of(eo, x, ax);
  case RK_MIN: return min_of(ei, eo, x, ax);
  case RK_MEAN: break;
  }
  UOp *sum = reduce_op(x, OP_ADD, ax);
  return ew_alu2(OP_FDIV, sum, ew_like(eo, sum, (double)ax->count));
}

static tvk_tensor *reduce(const char *op, RKind k, tvk_tensor *a, int naxes, const int *axes,
                          bool keepdim) {
  bool bad;
  tvk_tensor *err = bc_check(op, 1, &a, &bad);
  if (bad) return err;
  BcAxes ax;
  if ((err = bc_reduce_axes(op, a, naxes, axes, keepdim, &ax))) return err;
  ScalarType in = dt_from_tvk(a->dtype), res = result_dtype(k, in), cdt = compute_dtype(k, res);

  tvk_ctx *ctx = a->ctx;
  size_t m = FRONT_BEGIN(ctx);
  Ew ei = ew_frame(ctx, a->ndim, a->shape), eo = ew_frame(ctx, a->ndim, ax.keep);
  UOp *r;
  if (bc_numel(a->ndim, a->shape) == 0)
    r = identity(&eo, k, res); /* no loop to run: the identity directly */
  else
    r = ew_cast(build(&ei, &eo, k, ew_cast(a->uop, cdt), &ax), res);
  if (ax.out_nd != a->ndim) r = bc_reshape(r, a->ndim, ax.keep, ax.out_nd, ax.out);
  return FRONT_END(ctx, m, bc_result(ctx, op, r, res, ax.out_nd, ax.out));
}

tvk_tensor *tvk_sum(tvk_tensor *a, int naxes, const int *axes, bool keepdim) {
  return reduce("sum", RK_SUM, a, naxes, axes, keepdim);
}
tvk_tensor *tvk_prod(tvk_tensor *a, int naxes, const int *axes, bool keepdim) {
  return reduce("prod", RK_PROD, a, naxes, axes, keepdim);
}
tvk_tensor *tvk_max(tvk_tensor *a, int naxes, const int *axes, bool keepdim) {
  return reduce("max", RK_MAX, a, naxes, axes, keepdim);
}
tvk_tensor *tvk_min(tvk_tensor *a, int naxes, const int *axes, bool keepdim) {
  return reduce("min", RK_MIN, a, naxes, axes, keepdim);
}
tvk_tensor *tvk_mean(tvk_tensor *a, int naxes, const int *axes, bool keepdim) {
  return reduce("mean", RK_MEAN, a, naxes, axes, keepdim);
}
