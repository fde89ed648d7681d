/* Reductions (tvk.h): sum prod max min mean over a set of axes, as
 * REDUCE_AXIS(x) with arg_reduce(ADD | MUL | MAX, axes); reduced axes keep size
 * 1 in the graph and keepdim=false is a reshape on top. Elementwise work before
 * and after the REDUCE_AXIS fuses with it. See docs/frontend.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h" /* cg_reduce_trips */
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

/* A long reduce is split in two (the seed's split_reduceop): reduced axis i
 * of size n = q * (n / q) becomes the dims (n / q, ..., q), the reduce runs
 * over the original axes into q partial results per output, and a second
 * reduce combines the q of them (split again if q is itself long). The
 * scheduler gives the inner reduce a kernel of its own (a reduce inside
 * another reduce's input), which has q times as many outputs to spread over
 * cores and work groups.
 *
 * No kernel reduces more than SPLIT_CHUNK elements per output: one GPU
 * invocation may only loop so long (lavapipe ends an invocation after 65535
 * loop iterations in all; codegen.h, CG_GRID_LOOP_BUDGET, is the same 16384).
 * q is the largest divisor of a reduced axis in 8..256 that gets there, else
 * the smallest larger one, with at most 2^22 partials. An axis with no such
 * divisor (a prime length) is padded with the reduce's identity to a length
 * that has one: exact for sums, products, max and min alike. Unlike the
 * seed, an axis a view broadcasts is split too: it reads no memory, but its
 * work still needs spreading. */
enum { SPLIT_CHUNK = 16384, SPLIT_MAX = 256, SPLIT_MIN = 8, SPLIT_MAX_PARTIALS = 1 << 22 };

typedef struct {
  int axis;       /* the reduced axis split */
  int64_t q;      /* into q partials per output */
  int64_t length; /* of that axis, after padding (>= its size) */
} Split;

/* a * b, saturating at INT64_MAX */
static int64_t mul_sat(int64_t a, int64_t b) { return b && a > INT64_MAX / b ? INT64_MAX : a * b; }

/* The loop iterations of one output of the reduce over ax when the reduced
 * axis `axis` has length `len` (-1: every axis as it is), as lowering loops
 * them (cg_reduce_trips: a float sum's digits may cover a little more). */
static int64_t trips(const int64_t *shape, const BcAxes *ax, int axis, int64_t len) {
  int64_t t = 1;
  for (int k = 0; k < ax->n; k++)
    t = mul_sat(t, cg_reduce_trips(ax->axes[k] == axis ? len : shape[ax->axes[k]]));
  return t;
}

/* A reduced axis that c splits into c parts of more than one element, each
 * part's reduce within SPLIT_CHUNK iterations. */
static bool split_by(const int64_t *shape, const BcAxes *ax, int64_t c, Split *sp) {
  for (int k = 0; k < ax->n; k++) {
    int64_t n = shape[ax->axes[k]];
    if (n % c == 0 && n / c > 1 && trips(shape, ax, (int)ax->axes[k], n / c) <= SPLIT_CHUNK)
      return *sp = (Split){(int)ax->axes[k], c, n}, true;
  }
  return false;
}

/* How a reduce of ax->count elements into `outs` outputs splits; false when
 * it need not (or cannot: no dim left for the partials, too many outputs). */
static bool choose_split(int nd, const int64_t *shape, const BcAxes *ax, int64_t outs, Split *sp) {
  if (trips(shape, ax, -1, 0) <= SPLIT_CHUNK || nd >= TVK_MAX_DIMS || outs <= 0) return false;
  int64_t need = (ax->count + SPLIT_CHUNK - 1) / SPLIT_CHUNK, limit = SPLIT_MAX_PARTIALS / outs;
  int64_t lo = need > SPLIT_MIN ? need : SPLIT_MIN, most = limit < SPLIT_MAX ? limit : SPLIT_MAX;
  for (int64_t c = most; c >= lo; c--) /* the most partials up to 256: spread wide */
    if (split_by(shape, ax, c, sp)) return true;
  int64_t widest = 0;
  for (int k = 0; k < ax->n; k++)
    widest = shape[ax->axes[k]] > widest ? shape[ax->axes[k]] : widest;
  int64_t last = limit < 16 * lo + SPLIT_MAX ? limit : 16 * lo + SPLIT_MAX; /* then pad */
  for (int64_t c = lo > most ? lo : most + 1; c <= last && c < widest; c++) /* the fewest */
    if (split_by(shape, ax, c, sp)) return true;
  /* pad the widest axis: per partial ceil(n / q) of it times the other axes,
   * q raised until that part's loops fit */
  for (int k = 0; k < ax->n; k++) {
    int i = (int)ax->axes[k];
    int64_t n = shape[i], rest = trips(shape, ax, i, 1);
    if (n != widest || rest > SPLIT_CHUNK / 2) continue;
    int64_t per = SPLIT_CHUNK / rest, q = (n + per - 1) / per;
    q = q > SPLIT_MIN ? q : SPLIT_MIN;
    per = (n + q - 1) / q;
    while (per >= 2 && q <= limit && trips(shape, ax, i, per) > SPLIT_CHUNK)
      q++, per = (n + q - 1) / q;
    if (q > limit || per < 2) continue;
    return *sp = (Split){i, q, q * per}, true;
  }
  return false;
}

/* A reduce over a symbolic axis is one loop (reduce_op does not split what
 * it cannot measure): its largest trip count must stay within SPLIT_CHUNK,
 * what a GPU invocation may loop. NULL or the error tensor. */
tvk_tensor *front_check_sym_reduce(const char *op, const tvk_tensor *a, const BcAxes *ax) {
  if (!sint_is_sym(ax->count)) return NULL;
  int64_t most[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) most[d] = sint_vmax(a->shape[d]);
  if (trips(most, ax, -1, 0) <= SPLIT_CHUNK) return NULL;
  char c[64];
  sint_str(ax->count, c, sizeof c);
  return tensor_error(a->ctx, TVK_ERR_SHAPE,
                      "%s: reducing %s elements (up to %lld) per output over a symbolic axis: at "
                      "most %d for now (a smaller range for the variable, or numbers)",
                      op, c, (long long)sint_vmax(ax->count), SPLIT_CHUNK);
}

static UOp *identity_of(const Ew *e, Op op, ScalarType s) {
  return identity(e, op == OP_ADD ? RK_SUM : op == OP_MUL ? RK_PROD : RK_MAX, s);
}

/* x's axis sp->axis (of size shape[axis]) extended to sp->length with the
 * identity of op: zeros by the pad itself, else where(inside, x, identity). */
static UOp *pad_identity(tvk_ctx *ctx, UOp *x, Op op, int nd, const int64_t *shape,
                         const Split *sp) {
  int64_t pads[TVK_MAX_DIMS][2] = {{0}}, padded[TVK_MAX_DIMS];
  pads[sp->axis][1] = sp->length - shape[sp->axis];
  memcpy(padded, shape, (size_t)nd * sizeof *padded);
  padded[sp->axis] = sp->length;
  const int64_t(*pp)[2] = (const int64_t(*)[2])pads;
  UOp *y = bc_pad(x, nd, shape, pp);
  if (!y || op == OP_ADD) return y;
  Ew in = ew_frame(ctx, nd, shape), out = ew_frame(ctx, nd, padded);
  UOp *inside = bc_pad(ew_const(&in, DT_BOOL, 1), nd, shape, pp);
  return ew_where(inside, y, identity_of(&out, op, (ScalarType)x->dtype.scalar));
}

static UOp *reduce_op(tvk_ctx *ctx, UOp *x, Op op, const BcAxes *ax) {
  if (!x) return NULL;
  if (ax->n == 0) return x; /* nothing to reduce: a 0-d tensor or no axes */
  int64_t shape[TVK_MAX_DIMS + 1];
  int nd = graph_shape(x, shape);
  Split sp;
  bool sym = false; /* a symbolic reduced axis is one loop: its length is not known here */
  for (int k = 0; k < ax->n; k++) sym = sym || sint_is_sym(shape[ax->axes[k]]);
  if (sym || !choose_split(nd, shape, ax, bc_numel(nd, ax->keep), &sp))
    return uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &x, arg_reduce(op, ax->n, ax->axes));
  int split = sp.axis;
  if (sp.length != shape[split]) {
    x = pad_identity(ctx, x, op, nd, shape, &sp);
    shape[split] = sp.length;
  }
  /* (..., n, ...) -> (..., q, n / q, ...) -> (..., n / q, ..., q): the axes
   * keep their numbers and the partials are the last dim */
  int64_t split_shape[TVK_MAX_DIMS + 1];
  int order[TVK_MAX_DIMS + 1];
  for (int d = 0, o = 0; d <= nd; d++) {
    split_shape[d] = d < split        ? shape[d]
                     : d == split     ? sp.q
                     : d == split + 1 ? shape[split] / sp.q
                                      : shape[d - 1];
    if (d != split) order[o++] = d;
  }
  order[nd] = split;
  UOp *y = bc_permute(bc_reshape(x, nd, shape, nd + 1, split_shape), nd + 1, split_shape, order);
  UOp *part =
      y ? uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &y, arg_reduce(op, ax->n, ax->axes)) : NULL;
  /* the partials: one axis of q, reduced (and split again when long) */
  const int64_t last = nd;
  int64_t kept[TVK_MAX_DIMS + 1];
  memcpy(kept, ax->keep, (size_t)nd * sizeof *kept);
  kept[nd] = 1;
  return bc_reshape(front_reduce(ctx, part, op, 1, &last), nd + 1, kept, nd, ax->keep);
}

UOp *front_reduce(tvk_ctx *ctx, UOp *x, Op op, int naxes, const int64_t *axes) {
  if (!x) return NULL;
  BcAxes ax = {.n = naxes};
  int nd = graph_shape(x, ax.keep);
  ax.count = 1;
  for (int k = 0; k < naxes; k++) {
    ax.axes[k] = axes[k];
    ax.count = sint_mul(ax.count, ax.keep[axes[k]]);
    ax.keep[axes[k]] = 1;
  }
  ax.out_nd = nd;
  memcpy(ax.out, ax.keep, sizeof ax.out);
  return reduce_op(ctx, x, op, &ax);
}

/* Any NaN is the result, as numpy's max. A float32 MAX reduce accumulates
 * in keys where a NaN without its sign bit beats every number (codegen's
 * lower.c, keyed_reduce), so NaNs only need their sign cleared: one reduce,
 * which C compilers vectorise. Other floats' MAX lets a NaN through only
 * when it comes first, so a second reduce over x != x (bool, MAX = any)
 * makes it the result. */
static UOp *max_of(const Ew *ei, const Ew *eo, UOp *x, const BcAxes *ax) {
  if (!x || !dt_is_float(x->dtype) || ax->n == 0) return reduce_op(eo->ctx, x, OP_MAX, ax);
  if (x->dtype.scalar == DT_FLOAT32)
    return reduce_op(eo->ctx, ew_where(ew_isnan(x), ew_like(ei, x, NAN), x), OP_MAX, ax);
  UOp *m = reduce_op(eo->ctx, x, OP_MAX, ax);
  UOp *any_nan = reduce_op(eo->ctx, ew_isnan(x), OP_MAX, ax);
  return ew_where(any_nan, ew_like(eo, m, NAN), m);
}

/* min = -max(-x) for floats (negation is exact); for integers and bool
 * ~max(~x) (x ^ all-ones reverses the order without overflow, unlike -x). */
static UOp *min_of(const Ew *ei, const Ew *eo, UOp *x, const BcAxes *ax) {
  if (x && dt_is_float(x->dtype)) return ew_alu1(OP_NEG, max_of(ei, eo, ew_alu1(OP_NEG, x), ax));
  ScalarType s = x ? (ScalarType)x->dtype.scalar : DT_INT32;
  UOp *flipped = ew_alu2(OP_XOR, x, ew_const_val(ei, s, (CVal){.i = -1}));
  return ew_alu2(OP_XOR, reduce_op(eo->ctx, flipped, OP_MAX, ax),
                 ew_const_val(eo, s, (CVal){.i = -1}));
}

static UOp *build(const Ew *ei, const Ew *eo, RKind k, UOp *x, const BcAxes *ax) {
  switch (k) {
  case RK_SUM: return reduce_op(ei->ctx, x, OP_ADD, ax);
  case RK_PROD: return reduce_op(ei->ctx, x, OP_MUL, ax);
  case RK_MAX: return max_of(ei, eo, x, ax);
  case RK_MIN: return min_of(ei, eo, x, ax);
  case RK_MEAN: break;
  }
  UOp *sum = reduce_op(ei->ctx, x, OP_ADD, ax);
  if (!sint_is_sym(ax->count)) return ew_alu2(OP_FDIV, sum, ew_like(eo, sum, (double)ax->count));
  /* A symbolic count is counted: a sum of ones over the same axes, the same
   * loop as the sum's (one kernel), exact in float up to 2^24. */
  UOp *count = reduce_op(ei->ctx, x ? ew_like(ei, x, 1.0) : NULL, OP_ADD, ax);
  return ew_alu2(OP_FDIV, sum, count);
}

static tvk_tensor *reduce(const char *op, RKind k, tvk_tensor *a, int naxes, const int *axes,
                          bool keepdim) {
  bool bad;
  tvk_tensor *err = bc_check_sym(op, 1, &a, &bad);
  if (bad) return err;
  BcAxes ax;
  if ((err = bc_reduce_axes(op, a, naxes, axes, keepdim, &ax))) return err;
  if ((err = front_check_sym_reduce(op, a, &ax))) return err;
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
