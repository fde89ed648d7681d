/* Elementwise ONNX ops: arithmetic, comparisons and logic, the math
 * functions, the activations, Cast, Where and Clip. Small integer values
 * (shape arithmetic) are computed on the host so that they fold. */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

/* ---- host arithmetic on small values ---- */

typedef double (*host_fn2)(double, double);

static double h_add(double a, double b) { return a + b; }
static double h_sub(double a, double b) { return a - b; }
static double h_mul(double a, double b) { return a * b; }
static double h_div(double a, double b) { return a / b; }
static double h_idiv(double a, double b) { return b == 0 ? 0 : trunc(a / b); }
static double h_eq(double a, double b) { return a == b; }
static double h_lt(double a, double b) { return a < b; }
static double h_gt(double a, double b) { return a > b; }
static double h_le(double a, double b) { return a <= b; }
static double h_ge(double a, double b) { return a >= b; }
static double h_max(double a, double b) { return a > b ? a : b; }
static double h_min(double a, double b) { return a < b ? a : b; }
static double h_and(double a, double b) { return a != 0 && b != 0; }
static double h_or(double a, double b) { return a != 0 || b != 0; }

/* Folds a binary op whose inputs are both small host values of integer dtype
 * (shape arithmetic). Returns false when it does not apply. Results are exact
 * for |values| < 2^53, which shapes are. */
static bool host_binary(onnx_run_ctx *c, host_fn2 f, bool to_bool, tvk_status *st) {
  if (!onnx_all_host(c) || c->node->nin != 2) return false;
  const onnx_host *a = onnx_in_host(c, 0), *b = onnx_in_host(c, 1);
  if (!a || !b || onnx_is_float(a->dt) || onnx_is_float(b->dt) || a->dt != b->dt) return false;
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  int64_t shape[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t x = d - (nd - a->ndim) >= 0 ? a->shape[d - (nd - a->ndim)] : 1;
    int64_t y = d - (nd - b->ndim) >= 0 ? b->shape[d - (nd - b->ndim)] : 1;
    if (x != y && x != 1 && y != 1) return false; /* the device op reports it */
    shape[d] = x == 1 ? y : x;
  }
  onnx_host r;
  if (onnx_host_alloc(&r, to_bool ? TVK_BOOL : a->dt, nd, shape) != TVK_OK) return false;
  for (int64_t i = 0; i < r.numel; i++) {
    int64_t ia = 0, ib = 0, sa = 1, sb = 1, rem = i;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t idx = rem % shape[d];
      rem /= shape[d];
      int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
      if (da >= 0) {
        if (a->shape[da] != 1) ia += idx * sa;
        sa *= a->shape[da];
      }
      if (db >= 0) {
        if (b->shape[db] != 1) ib += idx * sb;
        sb *= b->shape[db];
      }
    }
    onnx_host_set(&r, i, f(onnx_host_get(a, ia), onnx_host_get(b, ib)));
  }
  *st = onnx_set_out_host(c, 0, &r);
  return true;
}

/* ---- binary ops ---- */

/* Input 1 of a binary op. Before opset 7, broadcast=1 aligned B's dims with
 * A's starting at axis (default: at the end), not numpy's way. */
static tvk_tensor *in_b(onnx_run_ctx *c) {
  tvk_tensor *b = IN(1);
  if (c->node->opset >= 7 || !onnx_attr_int(c, "broadcast", 0)) return b;
  int na = onnx_in_ndim(c, 0), nb = tvk_ndim(b);
  int64_t axis = onnx_attr_int(c, "axis", na - nb);
  if (axis < 0) axis += na;
  if (axis < 0 || axis + nb > na) return b; /* the op reports the shapes */
  int64_t shape[TVK_MAX_DIMS];
  for (int i = 0; i < na - (int)axis; i++) shape[i] = i < nb ? tvk_shape(b)[i] : 1;
  return tvk_reshape(b, na - (int)axis, shape);
}

static tvk_status op_add(onnx_run_ctx *c) {
  tvk_status s;
  if (host_binary(c, h_add, false, &s)) return s;
  return onnx_set_out(c, 0, tvk_add(IN(0), in_b(c)));
}

static tvk_status op_sub(onnx_run_ctx *c) {
  tvk_status s;
  if (host_binary(c, h_sub, false, &s)) return s;
  return onnx_set_out(c, 0, tvk_sub(IN(0), in_b(c)));
}

static tvk_status op_mul(onnx_run_ctx *c) {
  tvk_status s;
  if (host_binary(c, h_mul, false, &s)) return s;
  return onnx_set_out(c, 0, tvk_mul(IN(0), in_b(c)));
}

static tvk_status op_div(onnx_run_ctx *c) {
  tvk_status s;
  bool fl = onnx_is_float(onnx_in_dtype(c, 0));
  if (host_binary(c, fl ? h_div : h_idiv, false, &s)) return s;
  /* integer Div truncates (the reference divides and casts back) */
  return onnx_set_out(c, 0, fl ? tvk_div(IN(0), in_b(c)) : tvk_idiv(IN(0), in_b(c)));
}

static tvk_status op_mod(onnx_run_ctx *c) {
  tvk_tensor *a = IN(0), *b = IN(1);
  if (onnx_attr_int(c, "fmod", 0)) {
    if (!onnx_is_float(tvk_dtype_of(a))) return onnx_set_out(c, 0, tvk_mod(a, b));
    /* C's fmod: a - trunc(a / b) * b, the sign of a */
    return onnx_set_out(c, 0, tvk_sub(a, tvk_mul(tvk_trunc(tvk_div(a, b)), b)));
  }
  if (onnx_is_float(tvk_dtype_of(a)))
    return onnx_node_fail(c, TVK_ERR_DTYPE, "fmod=0 takes integers; floats need fmod=1");
  /* Python's %: the sign of b. r = a mod b (C) moves by b where r and b differ in sign. */
  tvk_tensor *r = tvk_mod(a, b), *zero = onnx_scalar(c, tvk_dtype_of(r), 0);
  tvk_tensor *fix = tvk_logical_and(tvk_ne(r, zero), tvk_ne(tvk_lt(r, zero), tvk_lt(b, zero)));
  return onnx_set_out(c, 0, tvk_where(fix, tvk_add(r, b), r));
}

static tvk_status op_pow(onnx_run_ctx *c) {
  tvk_tensor *a = IN(0);
  /* the result has the base's dtype */
  return onnx_set_out(c, 0, tvk_cast(tvk_pow(a, in_b(c)), tvk_dtype_of(a)));
}

static tvk_status cmp(onnx_run_ctx *c, host_fn2 hf, tvk_tensor *(*f)(tvk_tensor *, tvk_tensor *)) {
  tvk_status s;
  if (host_binary(c, hf, true, &s)) return s;
  return onnx_set_out(c, 0, f(IN(0), in_b(c)));
}
static tvk_status op_equal(onnx_run_ctx *c) { return cmp(c, h_eq, tvk_eq); }
static tvk_status op_less(onnx_run_ctx *c) { return cmp(c, h_lt, tvk_lt); }
static tvk_status op_greater(onnx_run_ctx *c) { return cmp(c, h_gt, tvk_gt); }
static tvk_status op_less_eq(onnx_run_ctx *c) { return cmp(c, h_le, tvk_le); }
static tvk_status op_greater_eq(onnx_run_ctx *c) { return cmp(c, h_ge, tvk_ge); }
static tvk_status op_and(onnx_run_ctx *c) { return cmp(c, h_and, tvk_logical_and); }
static tvk_status op_or(onnx_run_ctx *c) { return cmp(c, h_or, tvk_logical_or); }
static tvk_status op_xor(onnx_run_ctx *c) { return onnx_set_out(c, 0, tvk_ne(IN(0), in_b(c))); }
static tvk_status op_not(onnx_run_ctx *c) { return onnx_set_out(c, 0, tvk_logical_not(IN(0))); }

static tvk_status op_bitwise(onnx_run_ctx *c) {
  const char *t = c->node->op->name;
  if (!strcmp(t, "BitwiseNot")) {
    tvk_tensor *a = IN(0);
    return onnx_set_out(c, 0, tvk_bitwise_xor(a, onnx_scalar(c, tvk_dtype_of(a), -1)));
  }
  tvk_tensor *(*f)(tvk_tensor *, tvk_tensor *) = !strcmp(t, "BitwiseAnd")  ? tvk_bitwise_and
                                                 : !strcmp(t, "BitwiseOr") ? tvk_bitwise_or
                                                                           : tvk_bitwise_xor;
  return onnx_set_out(c, 0, f(IN(0), IN(1)));
}

static tvk_status op_bitshift(onnx_run_ctx *c) {
  char buf[16];
  const char *dir = onnx_attr_string(c, "direction", "", buf, sizeof buf);
  if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "direction '%s' (LEFT or RIGHT)", dir);
  return onnx_set_out(c, 0, (dir[0] == 'L' ? tvk_shl : tvk_shr)(IN(0), IN(1)));
}

/* Sum, Mean, Max, Min: any number of inputs, broadcast together. */
static tvk_status variadic(onnx_run_ctx *c, tvk_tensor *(*f)(tvk_tensor *, tvk_tensor *),
                           bool mean) {
  tvk_status s;
  if (c->node->nin == 2 && !mean &&
      host_binary(c,
                  f == tvk_add       ? h_add
                  : f == tvk_maximum ? h_max
                                     : h_min,
                  false, &s))
    return s;
  tvk_tensor *r = IN(0);
  for (int i = 1; i < c->node->nin; i++) r = f(r, IN(i));
  if (mean) r = tvk_div(r, onnx_fconst(c, r, c->node->nin));
  return onnx_set_out(c, 0, r);
}
static tvk_status op_sum(onnx_run_ctx *c) { return variadic(c, tvk_add, false); }
static tvk_status op_mean(onnx_run_ctx *c) { return variadic(c, tvk_add, true); }
static tvk_status op_max(onnx_run_ctx *c) { return variadic(c, tvk_maximum, false); }
static tvk_status op_min(onnx_run_ctx *c) { return variadic(c, tvk_minimum, false); }

/* ---- unary ops ---- */

#define UNARY(NAME, F)                                                                             \
  static tvk_status NAME(onnx_run_ctx *c) { return onnx_set_out(c, 0, F(IN(0))); }
UNARY(op_abs, tvk_abs)
UNARY(op_exp, tvk_exp)
UNARY(op_log, tvk_log)
UNARY(op_sqrt, tvk_sqrt)
UNARY(op_reciprocal, tvk_recip)
UNARY(op_sin, tvk_sin)
UNARY(op_cos, tvk_cos)
UNARY(op_floor, tvk_floor)
UNARY(op_ceil, tvk_ceil)
UNARY(op_round, tvk_round)
UNARY(op_sign, tvk_sign)
UNARY(op_sigmoid, tvk_sigmoid)
UNARY(op_tanh, tvk_tanh)
UNARY(op_relu, tvk_relu)
UNARY(op_erf, tvk_erf)
UNARY(op_atan, tvk_atan)
UNARY(op_asin, tvk_asin)
UNARY(op_acos, tvk_acos)

static tvk_status op_neg(onnx_run_ctx *c) {
  if (onnx_all_host(c) && !onnx_is_float(onnx_in_dtype(c, 0))) {
    const onnx_host *a = onnx_in_host(c, 0);
    onnx_host r;
    if (a && onnx_host_alloc(&r, a->dt, a->ndim, a->shape) == TVK_OK) {
      for (int64_t i = 0; i < r.numel; i++) onnx_host_set(&r, i, -onnx_host_get(a, i));
      return onnx_set_out_host(c, 0, &r);
    }
  }
  return onnx_set_out(c, 0, tvk_neg(IN(0)));
}

static tvk_status op_tan(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  return onnx_set_out(c, 0, tvk_div(tvk_sin(x), tvk_cos(x)));
}

static tvk_status op_sinh(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *half = onnx_fconst(c, x, 0.5);
  return onnx_set_out(c, 0, tvk_mul(tvk_sub(tvk_exp(x), tvk_exp(tvk_neg(x))), half));
}

static tvk_status op_cosh(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *half = onnx_fconst(c, x, 0.5);
  return onnx_set_out(c, 0, tvk_mul(tvk_add(tvk_exp(x), tvk_exp(tvk_neg(x))), half));
}

static tvk_status op_asinh(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *one = onnx_fconst(c, x, 1);
  return onnx_set_out(c, 0, tvk_log(tvk_add(x, tvk_sqrt(tvk_add(tvk_mul(x, x), one)))));
}

static tvk_status op_acosh(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *one = onnx_fconst(c, x, 1);
  return onnx_set_out(c, 0, tvk_log(tvk_add(x, tvk_sqrt(tvk_sub(tvk_mul(x, x), one)))));
}

static tvk_status op_atanh(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *one = onnx_fconst(c, x, 1), *half = onnx_fconst(c, x, 0.5);
  return onnx_set_out(c, 0, tvk_mul(tvk_log(tvk_div(tvk_add(one, x), tvk_sub(one, x))), half));
}

static tvk_status op_isnan(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  return onnx_set_out(c, 0, tvk_ne(x, x));
}

static tvk_status op_isinf(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *inf = onnx_fconst(c, x, INFINITY), *ninf = onnx_fconst(c, x, -INFINITY);
  bool pos = onnx_attr_int(c, "detect_positive", 1), neg = onnx_attr_int(c, "detect_negative", 1);
  tvk_tensor *r = pos && neg ? tvk_eq(tvk_abs(x), inf)
                  : pos      ? tvk_eq(x, inf)
                  : neg      ? tvk_eq(x, ninf)
                             : tvk_full(c->m->ctx, TVK_BOOL, tvk_ndim(x), tvk_shape(x), 0);
  return onnx_set_out(c, 0, r);
}

/* ---- activations ---- */

static tvk_status op_leaky_relu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *alpha = onnx_fconst(c, x, onnx_attr_float(c, "alpha", 0.01));
  return onnx_set_out(c, 0, tvk_where(tvk_ge(x, onnx_fconst(c, x, 0)), x, tvk_mul(x, alpha)));
}

static tvk_status op_prelu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *slope = IN(1);
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  /* Before opset 7 a (C,) slope is per channel (axis 1), as PyTorch exports
   * it, not numpy-broadcast against the last dim. */
  if (c->node->opset < 7 && onnx_in_ndim(c, 1) == 1 && nd > 2 && onnx_in_shape(c, 1)[0] == sh[1] &&
      sh[nd - 1] != sh[1]) {
    int64_t cs[TVK_MAX_DIMS];
    cs[0] = sh[1];
    for (int i = 1; i < nd - 1; i++) cs[i] = 1;
    slope = tvk_reshape(slope, nd - 1, cs);
  }
  return onnx_set_out(c, 0, tvk_where(tvk_ge(x, onnx_fconst(c, x, 0)), x, tvk_mul(x, slope)));
}

static tvk_status op_elu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *alpha = onnx_fconst(c, x, onnx_attr_float(c, "alpha", 1.0));
  tvk_tensor *neg = tvk_mul(alpha, tvk_sub(tvk_exp(x), onnx_fconst(c, x, 1)));
  return onnx_set_out(c, 0, tvk_where(tvk_ge(x, onnx_fconst(c, x, 0)), x, neg));
}

static tvk_status op_celu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  double a = onnx_attr_float(c, "alpha", 1.0);
  /* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
  tvk_tensor *e = tvk_mul(onnx_fconst(c, x, a),
                          tvk_sub(tvk_exp(tvk_div(x, onnx_fconst(c, x, a))), onnx_fconst(c, x, 1)));
  return onnx_set_out(c, 0, tvk_add(tvk_relu(x), tvk_minimum(e, onnx_fconst(c, x, 0))));
}

static tvk_status op_selu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  double alpha = onnx_attr_float(c, "alpha", 1.67326319217681884765625);
  double gamma = onnx_attr_float(c, "gamma", 1.05070102214813232421875);
  tvk_tensor *neg = tvk_mul(onnx_fconst(c, x, alpha), tvk_sub(tvk_exp(x), onnx_fconst(c, x, 1)));
  tvk_tensor *r = tvk_where(tvk_gt(x, onnx_fconst(c, x, 0)), x, neg);
  return onnx_set_out(c, 0, tvk_mul(r, onnx_fconst(c, x, gamma)));
}

static tvk_status op_thresholded_relu(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *alpha = onnx_fconst(c, x, onnx_attr_float(c, "alpha", 1.0));
  return onnx_set_out(c, 0, tvk_where(tvk_gt(x, alpha), x, onnx_fconst(c, x, 0)));
}

static tvk_tensor *hard_sigmoid(onnx_run_ctx *c, tvk_tensor *x, double alpha, double beta) {
  tvk_tensor *y = tvk_add(tvk_mul(x, onnx_fconst(c, x, alpha)), onnx_fconst(c, x, beta));
  return tvk_minimum(tvk_maximum(y, onnx_fconst(c, x, 0)), onnx_fconst(c, x, 1));
}

static tvk_status op_hard_sigmoid(onnx_run_ctx *c) {
  return onnx_set_out(
      c, 0,
      hard_sigmoid(c, IN(0), onnx_attr_float(c, "alpha", 0.2), onnx_attr_float(c, "beta", 0.5)));
}

static tvk_status op_hard_swish(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  return onnx_set_out(c, 0, tvk_mul(x, hard_sigmoid(c, x, 1.0 / 6.0, 0.5)));
}

/* log(1 + exp(x)), written so that large x does not overflow: max(x, 0) +
 * log(1 + exp(-|x|)). */
static tvk_tensor *softplus(onnx_run_ctx *c, tvk_tensor *x) {
  tvk_tensor *t = tvk_log(tvk_add(onnx_fconst(c, x, 1), tvk_exp(tvk_neg(tvk_abs(x)))));
  return tvk_add(tvk_relu(x), t);
}

static tvk_status op_softplus(onnx_run_ctx *c) { return onnx_set_out(c, 0, softplus(c, IN(0))); }

static tvk_status op_softsign(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  return onnx_set_out(c, 0, tvk_div(x, tvk_add(onnx_fconst(c, x, 1), tvk_abs(x))));
}

static tvk_status op_mish(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  return onnx_set_out(c, 0, tvk_mul(x, tvk_tanh(softplus(c, x))));
}

static tvk_status op_shrink(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  tvk_dtype dt = tvk_dtype_of(x);
  double lambd = onnx_attr_float(c, "lambd", 0.5), bias = onnx_attr_float(c, "bias", 0);
  tvk_tensor *lo = tvk_add(x, onnx_scalar(c, dt, bias)), *hi = tvk_sub(x, onnx_scalar(c, dt, bias));
  tvk_tensor *r = tvk_where(tvk_gt(x, onnx_scalar(c, dt, lambd)), hi, onnx_scalar(c, dt, 0));
  return onnx_set_out(c, 0, tvk_cast(tvk_where(tvk_lt(x, onnx_scalar(c, dt, -lambd)), lo, r), dt));
}

/* ---- Cast, Where, Clip ---- */

static tvk_status op_cast(onnx_run_ctx *c) {
  int64_t to = onnx_attr_int(c, "to", -1);
  tvk_dtype dt;
  if (!onnx_dtype_to_tvk((int32_t)to, &dt))
    return onnx_node_fail(c, TVK_ERR_DTYPE, "casting to %s is not supported",
                          onnx_dtype_name((int32_t)to));
  if (onnx_all_host(c) && !onnx_is_float(dt)) {
    const onnx_host *a = onnx_in_host(c, 0);
    onnx_host r;
    if (a && onnx_host_alloc(&r, dt, a->ndim, a->shape) == TVK_OK) {
      for (int64_t i = 0; i < r.numel; i++) onnx_host_set(&r, i, onnx_host_get(a, i));
      return onnx_set_out_host(c, 0, &r);
    }
  }
  return onnx_set_out(c, 0, tvk_cast(IN(0), dt));
}

static tvk_status op_cast_like(onnx_run_ctx *c) {
  return onnx_set_out(c, 0, tvk_cast(IN(0), onnx_in_dtype(c, 1)));
}

static tvk_status op_where(onnx_run_ctx *c) {
  tvk_tensor *a = IN(1);
  /* a and b have one dtype in ONNX; tvk would promote a constant's */
  return onnx_set_out(c, 0, tvk_cast(tvk_where(IN(0), a, IN(2)), tvk_dtype_of(a)));
}

static tvk_status op_clip(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0), *lo = NULL, *hi = NULL;
  tvk_dtype dt = tvk_dtype_of(x);
  if (c->node->opset < 11) { /* bounds as attributes */
    if (onnx_attr(c, "min")) lo = onnx_scalar(c, dt, onnx_attr_float(c, "min", 0));
    if (onnx_attr(c, "max")) hi = onnx_scalar(c, dt, onnx_attr_float(c, "max", 0));
  } else {
    lo = onnx_has_in(c, 1) ? IN(1) : NULL;
    hi = onnx_has_in(c, 2) ? IN(2) : NULL;
  }
  return onnx_set_out(c, 0, tvk_clip(x, lo, hi));
}

static tvk_status op_identity(onnx_run_ctx *c) {
  if (onnx_all_host(c)) {
    const onnx_host *a = onnx_in_host(c, 0);
    onnx_host r;
    if (a && onnx_host_alloc(&r, a->dt, a->ndim, a->shape) == TVK_OK) {
      if (r.numel) memcpy(r.data, a->data, (size_t)r.numel * tvk_dtype_size(r.dt));
      return onnx_set_out_host(c, 0, &r);
    }
  }
  return onnx_set_out(c, 0, IN(0));
}

const onnx_op onnx_ops_math[] = {
    {"Abs", "", 1, 1, 1, 1, op_abs},
    {"Acos", "", 1, 1, 1, 1, op_acos},
    {"Acosh", "", 1, 1, 1, 1, op_acosh},
    {"Add", "axis,broadcast", 2, 2, 1, 1, op_add},
    {"And", "axis,broadcast", 2, 2, 1, 1, op_and},
    {"Asin", "", 1, 1, 1, 1, op_asin},
    {"Asinh", "", 1, 1, 1, 1, op_asinh},
    {"Atan", "", 1, 1, 1, 1, op_atan},
    {"Atanh", "", 1, 1, 1, 1, op_atanh},
    {"BitShift", "direction", 2, 2, 1, 1, op_bitshift},
    {"BitwiseAnd", "", 2, 2, 1, 1, op_bitwise},
    {"BitwiseNot", "", 1, 1, 1, 1, op_bitwise},
    {"BitwiseOr", "", 2, 2, 1, 1, op_bitwise},
    {"BitwiseXor", "", 2, 2, 1, 1, op_bitwise},
    {"Cast", "to", 1, 1, 1, 1, op_cast},
    {"CastLike", "", 2, 2, 1, 1, op_cast_like},
    {"Ceil", "", 1, 1, 1, 1, op_ceil},
    {"Celu", "alpha", 1, 1, 1, 1, op_celu},
    {"Clip", "min,max", 1, 3, 1, 1, op_clip},
    {"Cos", "", 1, 1, 1, 1, op_cos},
    {"Cosh", "", 1, 1, 1, 1, op_cosh},
    {"Div", "axis,broadcast", 2, 2, 1, 1, op_div},
    {"Elu", "alpha", 1, 1, 1, 1, op_elu},
    {"Equal", "axis,broadcast", 2, 2, 1, 1, op_equal},
    {"Erf", "", 1, 1, 1, 1, op_erf},
    {"Exp", "", 1, 1, 1, 1, op_exp},
    {"Floor", "", 1, 1, 1, 1, op_floor},
    {"Greater", "axis,broadcast", 2, 2, 1, 1, op_greater},
    {"GreaterOrEqual", "", 2, 2, 1, 1, op_greater_eq},
    {"HardSigmoid", "alpha,beta", 1, 1, 1, 1, op_hard_sigmoid},
    {"HardSwish", "", 1, 1, 1, 1, op_hard_swish},
    {"Identity", "", 1, 1, 1, 1, op_identity},
    {"IsInf", "detect_positive,detect_negative", 1, 1, 1, 1, op_isinf},
    {"IsNaN", "", 1, 1, 1, 1, op_isnan},
    {"LeakyRelu", "alpha", 1, 1, 1, 1, op_leaky_relu},
    {"Less", "axis,broadcast", 2, 2, 1, 1, op_less},
    {"LessOrEqual", "", 2, 2, 1, 1, op_less_eq},
    {"Log", "", 1, 1, 1, 1, op_log},
    {"Max", "", 1, 1024, 1, 1, op_max},
    {"Mean", "", 1, 1024, 1, 1, op_mean},
    {"Min", "", 1, 1024, 1, 1, op_min},
    {"Mish", "", 1, 1, 1, 1, op_mish},
    {"Mod", "fmod", 2, 2, 1, 1, op_mod},
    {"Mul", "axis,broadcast", 2, 2, 1, 1, op_mul},
    {"Neg", "", 1, 1, 1, 1, op_neg},
    {"Not", "", 1, 1, 1, 1, op_not},
    {"Or", "axis,broadcast", 2, 2, 1, 1, op_or},
    {"PRelu", "", 2, 2, 1, 1, op_prelu},
    {"Pow", "axis,broadcast", 2, 2, 1, 1, op_pow},
    {"Reciprocal", "", 1, 1, 1, 1, op_reciprocal},
    {"Relu", "", 1, 1, 1, 1, op_relu},
    {"Round", "", 1, 1, 1, 1, op_round},
    {"Selu", "alpha,gamma", 1, 1, 1, 1, op_selu},
    {"Sigmoid", "", 1, 1, 1, 1, op_sigmoid},
    {"Shrink", "bias,lambd", 1, 1, 1, 1, op_shrink},
    {"Sign", "", 1, 1, 1, 1, op_sign},
    {"Sin", "", 1, 1, 1, 1, op_sin},
    {"Sinh", "", 1, 1, 1, 1, op_sinh},
    {"Softplus", "", 1, 1, 1, 1, op_softplus},
    {"Softsign", "", 1, 1, 1, 1, op_softsign},
    {"Sqrt", "", 1, 1, 1, 1, op_sqrt},
    {"Sub", "axis,broadcast", 2, 2, 1, 1, op_sub},
    {"Sum", "", 1, 1024, 1, 1, op_sum},
    {"Tan", "", 1, 1, 1, 1, op_tan},
    {"Tanh", "", 1, 1, 1, 1, op_tanh},
    {"ThresholdedRelu", "alpha", 1, 1, 1, 1, op_thresholded_relu},
    {"Where", "", 3, 3, 1, 1, op_where},
    {"Xor", "axis,broadcast", 2, 2, 1, 1, op_xor},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
