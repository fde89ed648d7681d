/* Unary elementwise ops and cast (tvk.h). Transcendentals come from the IR's
 * EXP2, LOG2, SIN, SQRT and RECIP; the rest is composed elementwise so that it
 * fuses. docs/frontend.md lists each composite and its accuracy. */
#include <stdio.h>

#include "frontend/ops_common.h"

#define LOG2_E 1.4426950408889634 /* log2(e) */
#define LN_2 0.6931471805599453   /* ln(2) */

typedef UOp *(*UnFn)(const Ew *e, UOp *x);

typedef enum {
  UK_KEEP,  /* keeps the dtype; the builder handles each kind of dtype */
  UK_FLOAT, /* integer and bool inputs are cast to float32 first */
  UK_ROUND, /* floats round; integers and bool come back unchanged */
  UK_BOOL,  /* any dtype in, bool out */
} UKind;

typedef struct {
  const char *name;
  UKind kind;
  bool no_bool; /* bool input is a dtype error */
  /* float16/bfloat16 compute in float32 and round once at the end: composites
   * would otherwise round every intermediate to 11 or 8 bits (rounding ops are
   * exact either way; in float32 their code is much shorter) */
  bool wide;
  UnFn fn;
} UnOp;

static bool is_float(UOp *x) { return dt_is_float(x->dtype); }
static bool is_unsigned(UOp *x) { return dt_is_bool(x->dtype) || dt_is_unsigned(x->dtype); }
static UOp *neg(UOp *x) { return ew_alu1(OP_NEG, x); }

/* ---------------------------------------------------------------- sign and friends */

static UOp *u_neg(const Ew *e, UOp *x) {
  (void)e;
  return neg(x);
}

/* Floats are written so that tvk_grad (which differentiates the primitives
 * below) gives 0 at +-0, the subgradient torch, JAX and tinygrad use: the
 * zero and NaN cases take a branch whose own derivative there is 0.
 *
 * floats: x < 0 ? -x : (0 < x ? x : x * x), so +-0 gives +0 (d(x*x) = 2x =
 * 0) and NaN gives NaN; signed ints wrap at the minimum as C does; unsigned
 * and bool: x. */
static UOp *u_abs(const Ew *e, UOp *x) {
  if (is_unsigned(x)) return x;
  UOp *zero = ew_like(e, x, 0);
  if (!is_float(x)) return ew_where(ew_lt(x, zero), neg(x), x);
  return ew_where(ew_lt(x, zero), neg(x), ew_where(ew_lt(zero, x), x, ew_alu2(OP_MUL, x, x)));
}

/* 0 < x ? 1 : (x < 0 ? -1 : x * 0): a zero keeps its sign and a NaN stays
 * NaN, with a derivative of 0 there as everywhere. */
static UOp *u_sign(const Ew *e, UOp *x) {
  if (dt_is_bool(x->dtype)) return x;
  UOp *zero = ew_like(e, x, 0), *one = ew_like(e, x, 1);
  UOp *rest =
      is_unsigned(x) ? x : ew_where(ew_lt(x, zero), ew_like(e, x, -1), ew_alu2(OP_MUL, x, zero));
  return ew_where(ew_lt(zero, x), one, rest);
}

/* x < 0 ? 0 : (0 < x ? x : x * 0): NaN stays NaN (tinygrad's (x > 0).where(x,
 * 0) would give 0), a zero keeps its sign, and the derivative at +-0 is 0.
 * Integers: x < 0 ? 0 : x. */
static UOp *u_relu(const Ew *e, UOp *x) {
  if (is_unsigned(x)) return x;
  UOp *zero = ew_like(e, x, 0);
  if (!is_float(x)) return ew_where(ew_lt(x, zero), zero, x);
  return ew_where(ew_lt(x, zero), zero, ew_where(ew_lt(zero, x), x, ew_alu2(OP_MUL, x, zero)));
}

/* ---------------------------------------------------------------- transcendentals */

static UOp *u_exp(const Ew *e, UOp *x) { return ew_alu1(OP_EXP2, ew_mulc(e, x, LOG2_E)); }
static UOp *u_exp2(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_EXP2, x);
}
static UOp *u_log(const Ew *e, UOp *x) { return ew_mulc(e, ew_alu1(OP_LOG2, x), LN_2); }
static UOp *u_log2(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_LOG2, x);
}
static UOp *u_sqrt(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_SQRT, x);
}
static UOp *u_rsqrt(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_RECIP, ew_alu1(OP_SQRT, x));
}
static UOp *u_recip(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_RECIP, x);
}
static UOp *u_sin(const Ew *e, UOp *x) {
  (void)e;
  return ew_alu1(OP_SIN, x);
}

/* cos x with relative accuracy also near its zeros, where 1 - 2 sin^2(x/2)
 * cancels (cos(1.5704) was 1e-4 off) and sin(pi/2 - x) loses the rounding of
 * pi/2 - x. The quadrant k = round(x 2/pi) and r = x - k pi/2, with pi/2 in
 * four parts (Cody-Waite): the first three have few enough bits that k times
 * them is exact for |k| < 2^12 (float32) or 2^20 (float64), so r keeps its
 * relative accuracy down to the smallest |cos| of those x (4.2e-9 at x =
 * 252.898209 in float32). Then cos x = cos(r + k pi/2) is, by k mod 4,
 * cos r, -sin r, -cos r, sin r: sin r is SIN(r) and cos r = 1 - 2 sin^2(r/2),
 * which does not cancel for |r| <= pi/4 (cos r >= 0.7), both from one SIN of
 * r or r/2 (both exact). Past the limit (|x| >= 6433 float32, 1.6e6 float64),
 * and for inf and NaN, k = 0 and the branch is 1 - 2 sin^2(x/2): absolute
 * accuracy there, as the reduction would need more bits of pi/2. k comes from
 * an int cast of x 2/pi + 1/2 + a bias that keeps the truncation a floor; a k
 * off by one near a half only moves r slightly past pi/4. */
typedef struct {
  double limit, bias, c[4]; /* pi/2 = c[0] + c[1] + c[2] + c[3] (+ 2e-21, 7e-49) */
} CosReduce;
static const CosReduce cos_f32 = {
    6433,
    8192,
    {1.57080078125, -4.4535845518112183e-06, -8.7061380327213556e-10, 6.2233719696699885e-14}};
static const CosReduce cos_f64 = {
    1.6e6,
    2097152,
    {1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21, 8.4784276603688996e-32}};

static UOp *u_cos(const Ew *e, UOp *x) {
  const CosReduce *c = x->dtype.scalar == DT_FLOAT64 ? &cos_f64 : &cos_f32;
  ScalarType s = (ScalarType)x->dtype.scalar;
  UOp *ax = ew_where(ew_lt(x, ew_like(e, x, 0)), neg(x), x);
  UOp *near = ew_lt(ax, ew_like(e, x, c->limit)); /* false for inf and NaN */
  UOp *y = ew_addc(e, ew_mulc(e, x, 0.63661977236758138), c->bias + 0.5); /* 2/pi */
  UOp *i = ew_cast(ew_where(near, y, ew_like(e, x, c->bias)), DT_INT32);
  i = ew_addc(e, i, -c->bias);
  UOp *k = ew_cast(i, s), *r = x;
  for (int j = 0; j < 4; j++) r = ew_alu2(OP_SUB, r, ew_mulc(e, k, c->c[j]));
  UOp *izero = ew_const(e, DT_INT32, 0);
  UOp *odd = ew_ne(ew_alu2(OP_AND, i, ew_const(e, DT_INT32, 1)), izero);
  UOp *sn = ew_alu1(OP_SIN, ew_where(odd, r, ew_mulc(e, r, 0.5)));
  UOp *v = ew_where(odd, sn, ew_alu2(OP_SUB, ew_like(e, x, 1), ew_mulc(e, ew_mul(sn, sn), 2)));
  UOp *negate = ew_ne(ew_alu2(OP_AND, ew_addc(e, i, 1), ew_const(e, DT_INT32, 2)), izero);
  return ew_where(negate, neg(v), v);
}

/* 1 / (1 + 2^(-x log2 e)): 0 at -inf (1/inf), 1 at +inf. */
static UOp *sigmoid(const Ew *e, UOp *x) {
  UOp *t = ew_alu1(OP_EXP2, ew_mulc(e, x, -LOG2_E));
  return ew_alu1(OP_RECIP, ew_addc(e, t, 1));
}
static UOp *u_sigmoid(const Ew *e, UOp *x) { return sigmoid(e, x); }
static UOp *u_silu(const Ew *e, UOp *x) { return ew_mul(x, sigmoid(e, x)); }

/* tanh x = 2 sigmoid(2x) - 1, which cancels near 0 (tanh(1e-5) would keep two
 * digits), so small |x| use the Taylor series to x^9; the first dropped term
 * is below the dtype's rounding at the threshold (0.25 for float32, 1/32 for
 * float64). */
static UOp *u_tanh(const Ew *e, UOp *x) {
  bool f64 = x && x->dtype.scalar == DT_FLOAT64;
  UOp *x2 = ew_mul(x, x);
  UOp *p = ew_like(e, x, 62.0 / 2835.0);
  p = ew_addc(e, ew_mul(p, x2), -17.0 / 315.0);
  p = ew_addc(e, ew_mul(p, x2), 2.0 / 15.0);
  p = ew_addc(e, ew_mul(p, x2), -1.0 / 3.0);
  p = ew_mul(x, ew_addc(e, ew_mul(p, x2), 1));
  UOp *big = ew_addc(e, ew_mulc(e, sigmoid(e, ew_mulc(e, x, 2)), 2), -1);
  UOp *small = ew_lt(x2, ew_like(e, x, f64 ? 1.0 / 1024 : 1.0 / 16));
  return ew_where(small, p, big);
}

/* The tanh approximation 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3),
 * written as x sigmoid(2z) (the same function), which does not cancel for
 * negative x. */
static UOp *u_gelu(const Ew *e, UOp *x) {
  const double k = 1.5957691216057308; /* 2 sqrt(2/pi) */
  UOp *z = ew_mul(x, ew_addc(e, ew_mulc(e, ew_mul(x, x), k * 0.044715), k));
  return ew_mul(x, sigmoid(e, z));
}

/* erf, odd in x. |x| < 0.5: the Maclaurin series to x^13 (the first term
 * left out is below 5e-10 relative there), which keeps relative accuracy near
 * 0, where 1 - erfc cancels. Beyond: 1 - erfc(|x|) with erfc(z) = t exp(-z^2
 * + P(t)), t = 1 / (1 + z/2), P the Chebyshev fit of Numerical Recipes
 * (W. H. Press et al., 6.2), whose fractional error is below 1.2e-7 for every
 * z >= 0; inf gives 1, NaN NaN. The fit limits float64 to that accuracy too. */
static UOp *u_erf(const Ew *e, UOp *x) {
  static const double cheb[10] = {0.17087277,  -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                                  -0.18628806, 0.09678418,  0.37409196, 1.00002368,  -1.26551223};
  static const double series[7] = {1.0 / 9360, -1.0 / 1320, 1.0 / 216, -1.0 / 42,
                                   1.0 / 10,   -1.0 / 3,    1.0};
  UOp *neg_x = ew_lt(x, ew_like(e, x, 0)), *z = ew_where(neg_x, neg(x), x);
  UOp *t = ew_alu1(OP_RECIP, ew_addc(e, ew_mulc(e, z, 0.5), 1));
  UOp *p = ew_like(e, x, cheb[0]);
  for (int i = 1; i < 10; i++) p = ew_addc(e, ew_mul(p, t), cheb[i]);
  UOp *erfc = ew_mul(t, ew_alu1(OP_EXP2, ew_mulc(e, ew_alu2(OP_SUB, p, ew_mul(z, z)), LOG2_E)));
  UOp *big = ew_alu2(OP_SUB, ew_like(e, x, 1), erfc);
  UOp *x2 = ew_mul(x, x), *q = ew_like(e, x, series[0]);
  for (int i = 1; i < 7; i++) q = ew_addc(e, ew_mul(q, x2), series[i]);
  UOp *small = ew_mul(ew_mulc(e, x, 1.1283791670955126 /* 2 / sqrt(pi) */), q);
  return ew_where(ew_lt(z, ew_like(e, x, 0.5)), small, ew_where(neg_x, neg(big), big));
}

/* atan: odd; |x| > 1 -> pi/2 - atan(1/|x|) (inf gives pi/2); above tan(pi/12)
 * -> pi/6 + atan((t sqrt3 - 1) / (t + sqrt3)), which lands in [-tan(pi/12),
 * tan(pi/12)] = +-0.268, where the Maclaurin series to z^15 leaves a relative
 * error below 1e-10. */
static UOp *atan_pos(const Ew *e, UOp *ax) {
  const double sqrt3 = 1.7320508075688772, pi = 3.141592653589793;
  UOp *inv = ew_lt(ew_like(e, ax, 1), ax);
  UOp *t = ew_where(inv, ew_alu1(OP_RECIP, ax), ax);
  UOp *red = ew_lt(ew_like(e, ax, 0.2679491924311227), t);
  UOp *zr = ew_mul(ew_addc(e, ew_mulc(e, t, sqrt3), -1), ew_alu1(OP_RECIP, ew_addc(e, t, sqrt3)));
  UOp *z = ew_where(red, zr, t), *z2 = ew_mul(z, z), *p = ew_like(e, ax, -1.0 / 15);
  for (int k = 13; k >= 1; k -= 2) p = ew_addc(e, ew_mul(p, z2), (k % 4 == 1 ? 1.0 : -1.0) / k);
  UOp *r = ew_mul(z, p);
  r = ew_where(red, ew_addc(e, r, pi / 6), r);
  return ew_where(inv, ew_alu2(OP_SUB, ew_like(e, ax, pi / 2), r), r);
}

static UOp *u_atan(const Ew *e, UOp *x) {
  UOp *neg_x = ew_lt(x, ew_like(e, x, 0)), *r = atan_pos(e, ew_where(neg_x, neg(x), x));
  return ew_where(neg_x, neg(r), r);
}

/* asin x = atan(x / sqrt((1 - x)(1 + x))): the product form keeps its digits
 * near +-1 (1 - x is exact there), where 1 - x^2 cancels; +-1 give x / 0 =
 * +-inf and so +-pi/2, |x| > 1 NaN. */
static UOp *u_asin(const Ew *e, UOp *x) {
  UOp *one = ew_like(e, x, 1);
  UOp *d = ew_alu1(OP_SQRT, ew_mul(ew_alu2(OP_SUB, one, x), ew_add(one, x)));
  return u_atan(e, ew_mul(x, ew_alu1(OP_RECIP, d)));
}

/* acos x = 2 atan(sqrt((1 - x) / (1 + x))): relative accuracy near x = 1,
 * where pi/2 - asin x would cancel; -1 gives 2 atan(inf) = pi. */
static UOp *u_acos(const Ew *e, UOp *x) {
  UOp *one = ew_like(e, x, 1);
  UOp *q = ew_alu1(OP_SQRT, ew_mul(ew_alu2(OP_SUB, one, x), ew_alu1(OP_RECIP, ew_add(one, x))));
  return ew_mulc(e, atan_pos(e, q), 2);
}

/* ---------------------------------------------------------------- rounding */

typedef enum { RD_TRUNC, RD_FLOOR, RD_CEIL, RD_ROUND } RoundMode;

/* From 2^mantissa bits on every float is an integer. */
static double int_limit(ScalarType s) {
  switch (s) {
  case DT_FLOAT16: return 1024.0;
  case DT_BFLOAT16: return 128.0;
  case DT_FLOAT32: return 8388608.0;
  default: return 4503599627370496.0; /* float64: 2^52 */
  }
}

/* Rounds through an integer: i = int(x) truncates, t = float(i). Values with
 * |x| >= 2^mantissa are integers already, and they, inf and NaN pass through
 * unchanged (the comparison is false for NaN); a zero result takes x's sign
 * (x * 0), as C's functions do (floor(-0.0), ceil(-0.5) = -0.0). */
static UOp *round_float(const Ew *e, UOp *x, RoundMode mode) {
  ScalarType s = (ScalarType)x->dtype.scalar;
  UOp *zero = ew_like(e, x, 0), *neg_x = ew_lt(x, zero);
  UOp *small = ew_lt(ew_where(neg_x, neg(x), x), ew_like(e, x, int_limit(s)));
  UOp *i = ew_cast(x, s == DT_FLOAT64 ? DT_INT64 : DT_INT32);
  UOp *t = ew_cast(i, s), *r = t;
  if (mode == RD_FLOOR) r = ew_where(ew_lt(x, t), ew_addc(e, t, -1), t);
  if (mode == RD_CEIL) r = ew_where(ew_lt(t, x), ew_addc(e, t, 1), t);
  if (mode == RD_ROUND) {
    /* the fraction x - t is exact; go away from zero past one half, and at one
     * half when t is odd (halves to even) */
    UOp *d = ew_alu2(OP_SUB, x, t), *ad = ew_where(neg_x, neg(d), d), *half = ew_like(e, x, 0.5);
    UOp *odd = ew_ne(ew_alu2(OP_AND, i, ew_like(e, i, 1)), ew_like(e, i, 0));
    UOp *tie = ew_alu2(OP_AND, ew_not(e, ew_ne(ad, half)), odd);
    UOp *bump = ew_alu2(OP_OR, ew_lt(half, ad), tie);
    r = ew_where(bump, ew_add(t, ew_where(neg_x, ew_like(e, x, -1), ew_like(e, x, 1))), t);
  }
  r = ew_where(ew_ne(r, zero), r, ew_mul(x, zero));
  return ew_where(small, r, x);
}

static UOp *u_trunc(const Ew *e, UOp *x) { return round_float(e, x, RD_TRUNC); }
static UOp *u_floor(const Ew *e, UOp *x) { return round_float(e, x, RD_FLOOR); }
static UOp *u_ceil(const Ew *e, UOp *x) { return round_float(e, x, RD_CEIL); }
static UOp *u_round(const Ew *e, UOp *x) { return round_float(e, x, RD_ROUND); }

static UOp *u_logical_not(const Ew *e, UOp *x) { return ew_not(e, ew_truth(e, x)); }

/* ---------------------------------------------------------------- the table */

static const UnOp op_neg = {"neg", UK_KEEP, true, false, u_neg};
static const UnOp op_abs = {"abs", UK_KEEP, false, false, u_abs};
static const UnOp op_sign = {"sign", UK_KEEP, false, false, u_sign};
static const UnOp op_relu = {"relu", UK_KEEP, false, false, u_relu};
static const UnOp op_exp = {"exp", UK_FLOAT, false, true, u_exp};
static const UnOp op_exp2 = {"exp2", UK_FLOAT, false, false, u_exp2};
static const UnOp op_log = {"log", UK_FLOAT, false, true, u_log};
static const UnOp op_log2 = {"log2", UK_FLOAT, false, false, u_log2};
static const UnOp op_sqrt = {"sqrt", UK_FLOAT, false, false, u_sqrt};
static const UnOp op_rsqrt = {"rsqrt", UK_FLOAT, false, true, u_rsqrt};
static const UnOp op_recip = {"recip", UK_FLOAT, false, false, u_recip};
static const UnOp op_sin = {"sin", UK_FLOAT, false, false, u_sin};
static const UnOp op_cos = {"cos", UK_FLOAT, false, true, u_cos};
static const UnOp op_sigmoid = {"sigmoid", UK_FLOAT, false, true, u_sigmoid};
static const UnOp op_tanh = {"tanh", UK_FLOAT, false, true, u_tanh};
static const UnOp op_gelu = {"gelu", UK_FLOAT, false, true, u_gelu};
static const UnOp op_silu = {"silu", UK_FLOAT, false, true, u_silu};
static const UnOp op_erf = {"erf", UK_FLOAT, false, true, u_erf};
static const UnOp op_atan = {"atan", UK_FLOAT, false, true, u_atan};
static const UnOp op_asin = {"asin", UK_FLOAT, false, true, u_asin};
static const UnOp op_acos = {"acos", UK_FLOAT, false, true, u_acos};
static const UnOp op_floor = {"floor", UK_ROUND, false, true, u_floor};
static const UnOp op_ceil = {"ceil", UK_ROUND, false, true, u_ceil};
static const UnOp op_round = {"round", UK_ROUND, false, true, u_round};
static const UnOp op_trunc = {"trunc", UK_ROUND, false, true, u_trunc};
static const UnOp op_logical_not = {"logical_not", UK_BOOL, false, false, u_logical_not};

/* ---------------------------------------------------------------- driver */

static tvk_tensor *unary(const UnOp *op, tvk_tensor *a) {
  bool bad;
  tvk_tensor *err = bc_check_sym(op->name, 1, &a, &bad);
  if (bad) return err;
  ScalarType s = dt_from_tvk(a->dtype);
  if (op->no_bool && s == DT_BOOL)
    return tensor_error(a->ctx, TVK_ERR_DTYPE, "%s: dtype bool is not supported (use logical_not)",
                        op->name);
  if (op->kind == UK_ROUND && !(DT_BITS_FLOAT & DT_BIT(s))) return bc_same(a);

  tvk_ctx *ctx = a->ctx;
  size_t m = FRONT_BEGIN(ctx);
  Ew e = ew_frame(ctx, a->ndim, a->shape);
  UOp *x = a->uop;
  if (op->kind == UK_FLOAT) s = dt_float_result(s);
  x = ew_cast(x, op->wide ? dt_acc(s) : s);
  UOp *r = ew_cast(op->fn(&e, x), op->kind == UK_BOOL ? DT_BOOL : s);
  return FRONT_END(
      ctx, m, bc_result(ctx, op->name, r, op->kind == UK_BOOL ? DT_BOOL : s, a->ndim, a->shape));
}

tvk_tensor *tvk_neg(tvk_tensor *a) { return unary(&op_neg, a); }
tvk_tensor *tvk_exp(tvk_tensor *a) { return unary(&op_exp, a); }
tvk_tensor *tvk_exp2(tvk_tensor *a) { return unary(&op_exp2, a); }
tvk_tensor *tvk_log(tvk_tensor *a) { return unary(&op_log, a); }
tvk_tensor *tvk_log2(tvk_tensor *a) { return unary(&op_log2, a); }
tvk_tensor *tvk_sqrt(tvk_tensor *a) { return unary(&op_sqrt, a); }
tvk_tensor *tvk_rsqrt(tvk_tensor *a) { return unary(&op_rsqrt, a); }
tvk_tensor *tvk_recip(tvk_tensor *a) { return unary(&op_recip, a); }
tvk_tensor *tvk_sin(tvk_tensor *a) { return unary(&op_sin, a); }
tvk_tensor *tvk_cos(tvk_tensor *a) { return unary(&op_cos, a); }
tvk_tensor *tvk_abs(tvk_tensor *a) { return unary(&op_abs, a); }
tvk_tensor *tvk_sign(tvk_tensor *a) { return unary(&op_sign, a); }
tvk_tensor *tvk_relu(tvk_tensor *a) { return unary(&op_relu, a); }
tvk_tensor *tvk_sigmoid(tvk_tensor *a) { return unary(&op_sigmoid, a); }
tvk_tensor *tvk_tanh(tvk_tensor *a) { return unary(&op_tanh, a); }
tvk_tensor *tvk_gelu(tvk_tensor *a) { return unary(&op_gelu, a); }
tvk_tensor *tvk_silu(tvk_tensor *a) { return unary(&op_silu, a); }
tvk_tensor *tvk_erf(tvk_tensor *a) { return unary(&op_erf, a); }
tvk_tensor *tvk_atan(tvk_tensor *a) { return unary(&op_atan, a); }
tvk_tensor *tvk_asin(tvk_tensor *a) { return unary(&op_asin, a); }
tvk_tensor *tvk_acos(tvk_tensor *a) { return unary(&op_acos, a); }
tvk_tensor *tvk_floor(tvk_tensor *a) { return unary(&op_floor, a); }
tvk_tensor *tvk_ceil(tvk_tensor *a) { return unary(&op_ceil, a); }
tvk_tensor *tvk_round(tvk_tensor *a) { return unary(&op_round, a); }
tvk_tensor *tvk_trunc(tvk_tensor *a) { return unary(&op_trunc, a); }
tvk_tensor *tvk_logical_not(tvk_tensor *a) { return unary(&op_logical_not, a); }

/* float -> int truncates (the IR's CAST), any -> bool is x != 0, integers wrap. */
tvk_tensor *tvk_cast(tvk_tensor *a, tvk_dtype dt) {
  bool bad;
  tvk_tensor *err = bc_check_sym("cast", 1, &a, &bad);
  if (bad) return err;
  if (!tvk_dtype_valid(dt))
    return tensor_error(a->ctx, TVK_ERR_DTYPE, "cast: dtype %d is not a tvk_dtype", (int)dt);
  if (dt == a->dtype) return bc_same(a);
  tvk_ctx *ctx = a->ctx;
  size_t m = FRONT_BEGIN(ctx);
  ScalarType s = dt_from_tvk(dt);
  return FRONT_END(ctx, m, bc_result(ctx, "cast", ew_cast(a->uop, s), s, a->ndim, a->shape));
}

/* An identity CAST, which nothing else makes (uop_cast folds them, and so do
 * the kernel rules): tvk_grad stops at it (grad.c). */
tvk_tensor *tvk_detach(tvk_tensor *a) {
  bool bad;
  tvk_tensor *err = bc_check_sym("detach", 1, &a, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  size_t m = FRONT_BEGIN(ctx);
  UOp *u = uop_new(ctx->u, OP_CAST, a->uop->dtype, 1, &a->uop, arg_none());
  return FRONT_END(
      ctx, m, bc_result(ctx, "detach", u, (ScalarType)a->uop->dtype.scalar, a->ndim, a->shape));
}
