/* Random tensors (tvk.h "more creation" and tvk_dropout): a counter-based
 * generator, Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", with Random123's rotation constants and key
 * schedule), written as uint32 tensor ops on tvk_arange. Every element is one
 * block of the cipher applied to its own counter, so the whole generator is
 * elementwise work on an arange and constants: it fuses into the kernel that
 * consumes it, needs no state, and gives the same bits on every device.
 *
 * Layout (docs/ops_index.md):
 *   key      (k0, k1) = (seed mod 2^32, seed >> 32)
 *   counter  (c0, c1) = (i, 2^31 * s), i the row-major element index (below
 *            2^31: tensors have at most 2^31 - 1 elements here), s the
 *            stream: 0, and 1 for float64 randn's second uniform (c1's low 31
 *            bits are left free for indices past 2^32)
 *   output   (x0, x1), two uint32 words per element and stream. */
#include <math.h>
#include <stdio.h>

#include "frontend/ops_common.h"

/* ---------------------------------------------------------------- threefry */

static tvk_tensor *u32(tvk_ctx *ctx, uint32_t v) { return front_const(ctx, TVK_UINT32, v); }

/* x rotated left by r bits (0 < r < 32). */
static tvk_tensor *rotl(tvk_ctx *ctx, tvk_tensor *x, int r) {
  return tvk_bitwise_or(tvk_shl(x, u32(ctx, (uint32_t)r)), tvk_shr(x, u32(ctx, 32u - (uint32_t)r)));
}

/* Threefry-2x32-20 of the counter (c0, c1) under the key (k0, k1), in place:
 * 20 rounds of x0 += x1; x1 = rotl(x1, R) ^ x0, with the key schedule (k0, k1,
 * k0 ^ k1 ^ 0x1BD11BDA) injected before the first round and after every fourth
 * (injection s adds ks[s % 3], ks[(s + 1) % 3] + s). Call inside a scope. */
static void threefry(tvk_ctx *ctx, uint64_t seed, tvk_tensor **x0, tvk_tensor **x1) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {(uint32_t)seed, (uint32_t)(seed >> 32), 0};
  ks[2] = 0x1BD11BDAu ^ ks[0] ^ ks[1];
  tvk_tensor *a = tvk_add(*x0, u32(ctx, ks[0])), *b = tvk_add(*x1, u32(ctx, ks[1]));
  for (int r = 0; r < 20; r++) {
    a = tvk_add(a, b);
    b = tvk_bitwise_xor(rotl(ctx, b, rot[r % 8]), a);
    if (r % 4 == 3) {
      uint32_t s = (uint32_t)(r / 4 + 1);
      a = tvk_add(a, u32(ctx, ks[s % 3]));
      b = tvk_add(b, u32(ctx, ks[(s + 1) % 3] + s));
    }
  }
  *x0 = a;
  *x1 = b;
}

/* The two words of stream s for every element of a 1-D tensor of n elements
 * (n <= INT32_MAX: tvk_arange's limit). Call inside a scope. */
static void bits(tvk_ctx *ctx, int64_t n, uint64_t seed, uint32_t s, tvk_tensor **x0,
                 tvk_tensor **x1) {
  *x0 = tvk_arange(ctx, TVK_UINT32, 0, (double)n, 1);
  *x1 = tvk_full(ctx, TVK_UINT32, 1, &n, (double)(s << 31));
  threefry(ctx, seed, x0, x1);
}

/* k * 2^-m as dt, with k = x >> (32 - m): the top m bits of x (m <= 24 for a
 * float32 result, which holds them exactly). */
static tvk_tensor *top_bits(tvk_ctx *ctx, tvk_tensor *x, int m, tvk_dtype dt) {
  tvk_tensor *k = tvk_cast(tvk_shr(x, u32(ctx, (uint32_t)(32 - m))), dt);
  return tvk_mul(k, front_const(ctx, dt, ldexp(1, -m)));
}

/* Uniform [0, 1) from one block: float64 from 53 bits (27 of x0 above 26 of
 * x1), float32 from the top 24 bits of x0. float16 and bfloat16 take only
 * their significand's width (11 and 8 bits), so the float32 value k * 2^-m is
 * exact in them and the cast can not round up to 1.0: the largest value is
 * 1 - 2^-m. */
static tvk_tensor *uniform(tvk_ctx *ctx, tvk_tensor *x0, tvk_tensor *x1, tvk_dtype dt) {
  switch (dt) {
  case TVK_FLOAT64: {
    tvk_tensor *h = tvk_mul(tvk_cast(tvk_shr(x0, u32(ctx, 5)), dt), front_const(ctx, dt, 0x1p26));
    tvk_tensor *l = tvk_cast(tvk_shr(x1, u32(ctx, 6)), dt);
    return tvk_mul(tvk_add(h, l), front_const(ctx, dt, 0x1p-53));
  }
  case TVK_FLOAT16: return tvk_cast(top_bits(ctx, x0, 11, TVK_FLOAT32), dt);
  case TVK_BFLOAT16: return tvk_cast(top_bits(ctx, x0, 8, TVK_FLOAT32), dt);
  default: return top_bits(ctx, x0, 24, TVK_FLOAT32);
  }
}

/* ---------------------------------------------------------------- rand, randn */

/* Checks a random op's arguments; NULL or an error tensor. *numel is set. */
static tvk_tensor *check_args(const char *op, tvk_ctx *ctx, tvk_dtype dt, int ndim,
                              const int64_t *shape, int64_t *numel) {
  if (dt != TVK_FLOAT16 && dt != TVK_BFLOAT16 && dt != TVK_FLOAT32 && dt != TVK_FLOAT64)
    return tensor_error(ctx, TVK_ERR_DTYPE, "%s: dtype %s is not a float dtype", op,
                        tvk_dtype_name(dt));
  tvk_tensor *err = ctx_check_shape(ctx, op, ndim, shape, numel);
  if (err) return err;
  char s[BC_SHAPE_STR_MAX];
  if (*numel > INT32_MAX) /* the counter is an int32 arange */
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: shape %s has more than 2^31 - 1 elements", op,
                        bc_shape_str(ndim, shape, s, sizeof s));
  return NULL;
}

tvk_tensor *tvk_rand(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape, uint64_t seed) {
  if (!ctx) return NULL;
  int64_t n;
  tvk_tensor *err = check_args("rand", ctx, dt, ndim, shape, &n);
  if (err) return err;
  if (n == 0) return tvk_full(ctx, dt, ndim, shape, 0);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x0, *x1;
  bits(ctx, n, seed, 0, &x0, &x1);
  tvk_tensor *r = tvk_reshape(uniform(ctx, x0, x1, dt), ndim, shape);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* Box-Muller, z = sqrt(-2 ln v) cos(2 pi u2) with v = 1 - u1, computed from
 * + - * and sqrt alone, in one fixed order, so that every device gives the
 * same bits: those are correctly rounded on the CPU (C, -ffp-contract=off)
 * and on Vulkan kernels (precise: no fma, no reassociation; lavapipe's sqrt
 * is IEEE), where the devices' log2 and sin differ in the last bits.
 *
 * ln v: v = 1 - u1 (exact) is in [2^-24, 1] (float64: [2^-53, 1]). Halvings
 * of the exponent range by comparisons (w < 2^-s: w *= 2^s, e -= s, for s =
 * 32 .. 1, all exact) and one doubling below sqrt(1/2) give v = w 2^e with w
 * in [sqrt(1/2), sqrt(2)); w near 1 is never scaled, so f = w - 1 is exact
 * and ln v keeps its relative accuracy for u1 near 0. float64 then takes
 * w into [2^-1/8, 2^1/8) by multiplying by 2^(+-1/2) and 2^(+-1/4) (the
 * rounded constants M, whose -ln M is added: the rounding of w M costs
 * 2^-53). ln(1 + f) = f H(f), H the polynomial through ln(1 + f) / f at the
 * Chebyshev nodes of that interval (mpmath; relative error 4.7e-9 for
 * float32 at degree 9, 7e-18 for float64 at degree 11), and ln v = e ln2_hi
 * + (e ln2_lo + ...) with ln2_hi short enough that e ln2_hi is exact.
 *
 * cos(2 pi u2): u2 = k 2^-m is fixed point, so the octant comes from its top
 * bits: q = (top 3 bits + 1) >> 1 in 0..4 and t = 8 u2 - 2q in [-1, 1) are
 * exact, and 2 pi u2 = q pi/2 + t pi/4. cos and sin of t pi/4 are Taylor
 * polynomials in t (float32 to t^10 and t^9, float64 to t^18 and t^17: the
 * first terms left out are below 2e-9 and 5e-20), and q mod 4 picks cos, -sin,
 * -cos or sin. float32 and narrower draw u1 and u2 from the two words of one
 * block and compute in float32, rounding once to float16/bfloat16; float64
 * draws them from streams 0 and 1. |z| is at most 5.8 (8.6). */

/* Horner: c[n-1] t^(n-1) + ... + c[0]. Call inside a scope. */
static tvk_tensor *poly(tvk_ctx *ctx, tvk_tensor *t, const double *c, int n, tvk_dtype dt) {
  tvk_tensor *p = front_const(ctx, dt, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) p = tvk_add(tvk_mul(p, t), front_const(ctx, dt, c[i]));
  return p;
}

/* ln(1 - u1) as described above. Call inside a scope. */
static tvk_tensor *box_muller_log(tvk_ctx *ctx, tvk_tensor *u1, tvk_dtype dt) {
  static const double h32[10] = {0.99999999938325501,  -0.49999988496142866, 0.33333345349807464,
                                 -0.2500157909915946,  0.20000939440373094,  -0.16608369414088409,
                                 0.14199650097916022,  -0.1326603136091708,  0.12806610435006952,
                                 -0.074511862267575085};
  static const double h64[12] = {1,
                                 -0.50000000000000044,
                                 0.33333333333338938,
                                 -0.24999999999862388,
                                 0.19999999991141634,
                                 -0.1666666678066395,
                                 0.14285719442154779,
                                 -0.1249996265596437,
                                 0.11109745528933665,
                                 -0.10005023318854862,
                                 0.092584075996957241,
                                 -0.081498289626931675};
  /* (threshold, multiplier M, -ln M) of the float64 steps, above and below 1 */
  static const double steps[2][2][3] = {
      {{1.189207115002721, 0.70710678118654757, 0.34657359027997259},
       {0.8408964152537145, 1.4142135623730951, -0.3465735902799727}},
      {{1.0905077326652577, 0.8408964152537145, 0.17328679513998638},
       {0.91700404320467122, 1.189207115002721, -0.17328679513998629}}};
  bool f64 = dt == TVK_FLOAT64;
  tvk_tensor *w = tvk_sub(front_const(ctx, dt, 1), u1), *e = front_const(ctx, dt, 0), *c;
  for (int sh = f64 ? 32 : 16; sh >= 1; sh /= 2) {
    c = tvk_lt(w, front_const(ctx, dt, ldexp(1, -sh)));
    w = tvk_where(c, tvk_mul(w, front_const(ctx, dt, ldexp(1, sh))), w);
    e = tvk_where(c, tvk_add(e, front_const(ctx, dt, -sh)), e);
  }
  c = tvk_lt(w, front_const(ctx, dt, 0.70710678118654757)); /* sqrt(1/2) */
  w = tvk_where(c, tvk_mul(w, front_const(ctx, dt, 2)), w);
  e = tvk_where(c, tvk_add(e, front_const(ctx, dt, -1)), e);
  tvk_tensor *acc = front_const(ctx, dt, 0);
  for (int k = 0; f64 && k < 2; k++) {
    tvk_tensor *hi = tvk_ge(w, front_const(ctx, dt, steps[k][0][0]));
    tvk_tensor *lo = tvk_lt(w, front_const(ctx, dt, steps[k][1][0]));
    w = tvk_where(hi, tvk_mul(w, front_const(ctx, dt, steps[k][0][1])),
                  tvk_where(lo, tvk_mul(w, front_const(ctx, dt, steps[k][1][1])), w));
    acc = tvk_where(hi, tvk_add(acc, front_const(ctx, dt, steps[k][0][2])),
                    tvk_where(lo, tvk_add(acc, front_const(ctx, dt, steps[k][1][2])), acc));
  }
  tvk_tensor *f = tvk_sub(w, front_const(ctx, dt, 1));
  tvk_tensor *ln1p = tvk_mul(f, f64 ? poly(ctx, f, h64, 12, dt) : poly(ctx, f, h32, 10, dt));
  /* ln 2 = hi + lo, hi with 16 (44) bits: e hi is exact for |e| <= 24 (53) */
  double hi = f64 ? 0.69314718055994717 : 0.693145751953125;
  double lo = f64 ? -1.8641886737243033e-15 : 1.4286068203094173e-06;
  tvk_tensor *rest = tvk_add(tvk_mul(e, front_const(ctx, dt, lo)), tvk_add(acc, ln1p));
  return tvk_add(tvk_mul(e, front_const(ctx, dt, hi)), rest);
}

/* cos(2 pi u2) for u2 = k 2^-m, oct its top three bits (uint32). Call inside a
 * scope. */
static tvk_tensor *box_muller_cos(tvk_ctx *ctx, tvk_tensor *u2, tvk_tensor *oct, tvk_dtype dt) {
  /* (pi/4)^n / n! */
  static const double q[19] = {1,
                               0.78539816339744828,
                               0.30842513753404244,
                               0.080745512188280785,
                               0.015854344243815502,
                               0.0024903945701927202,
                               0.00032599188692739001,
                               3.6576204182177253e-05,
                               3.5908604485915101e-06,
                               3.1336168903781217e-07,
                               2.4611369504941999e-08,
                               1.757247673443401e-09,
                               1.1501159127974052e-10,
                               6.9484532738866292e-12,
                               3.8980731712596753e-13,
                               2.0410263396641442e-14,
                               1.0018864616362721e-15,
                               4.6287046288346829e-17,
                               2.0196533968866819e-18};
  bool f64 = dt == TVK_FLOAT64;
  int nc = f64 ? 10 : 6, ns = f64 ? 9 : 5; /* terms of cos (t^0 .. t^18) and sin (t^1 ..) */
  double cc[10], sc[9];
  for (int i = 0; i < nc; i++) cc[i] = i % 2 ? -q[2 * i] : q[2 * i];
  for (int i = 0; i < ns; i++) sc[i] = i % 2 ? -q[2 * i + 1] : q[2 * i + 1];
  tvk_tensor *qi = tvk_shr(tvk_add(oct, u32(ctx, 1)), u32(ctx, 1)); /* 0 .. 4 */
  tvk_tensor *t = tvk_sub(tvk_mul(u2, front_const(ctx, dt, 8)),
                          tvk_mul(tvk_cast(qi, dt), front_const(ctx, dt, 2)));
  tvk_tensor *t2 = tvk_mul(t, t);
  tvk_tensor *cs = poly(ctx, t2, cc, nc, dt), *sn = tvk_mul(t, poly(ctx, t2, sc, ns, dt));
  tvk_tensor *odd = tvk_ne(tvk_bitwise_and(qi, u32(ctx, 1)), u32(ctx, 0));
  tvk_tensor *v = tvk_where(odd, sn, cs);
  tvk_tensor *negate = tvk_ne(tvk_bitwise_and(tvk_add(qi, u32(ctx, 1)), u32(ctx, 2)), u32(ctx, 0));
  return tvk_where(negate, tvk_neg(v), v);
}

tvk_tensor *tvk_randn(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape, uint64_t seed) {
  if (!ctx) return NULL;
  int64_t n;
  tvk_tensor *err = check_args("randn", ctx, dt, ndim, shape, &n);
  if (err) return err;
  if (n == 0) return tvk_full(ctx, dt, ndim, shape, 0);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x0, *x1, *u1, *u2, *oct;
  tvk_dtype cdt = dt == TVK_FLOAT64 ? dt : TVK_FLOAT32;
  bits(ctx, n, seed, 0, &x0, &x1);
  if (dt == TVK_FLOAT64) {
    u1 = uniform(ctx, x0, x1, dt);
    bits(ctx, n, seed, 1, &x0, &x1);
    u2 = uniform(ctx, x0, x1, dt);
    oct = tvk_shr(x0, u32(ctx, 29)); /* u2's top bits are x0's */
  } else {
    u1 = top_bits(ctx, x0, 24, cdt);
    u2 = top_bits(ctx, x1, 24, cdt);
    oct = tvk_shr(x1, u32(ctx, 29));
  }
  tvk_tensor *rad = tvk_sqrt(tvk_mul(box_muller_log(ctx, u1, cdt), front_const(ctx, cdt, -2)));
  tvk_tensor *z = tvk_mul(rad, box_muller_cos(ctx, u2, oct, cdt));
  tvk_tensor *r = tvk_reshape(tvk_cast(z, dt), ndim, shape);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- dropout */

/* Keeps x where tvk_rand(float32, x's shape, seed) >= p, computed exactly on
 * the 24 bits behind it: k * 2^-24 >= p  <=>  k >= ceil(p * 2^24). Kept
 * elements are multiplied by 1 / (1 - p) rounded to x's dtype; dropped ones are
 * 0 (also where x is NaN or inf). */
tvk_tensor *tvk_dropout(tvk_tensor *x, double p, bool training, uint64_t seed) {
  bool bad;
  tvk_tensor *err = bc_check("dropout", 1, &x, &bad);
  if (bad) return err;
  if (!(p >= 0 && p <= 1))
    return tensor_error(x->ctx, TVK_ERR_INVALID_ARG, "dropout: p %g is outside [0, 1]", p);
  if (!training) return bc_same(x);
  tvk_dtype dt = x->dtype;
  if (dt != TVK_FLOAT16 && dt != TVK_BFLOAT16 && dt != TVK_FLOAT32 && dt != TVK_FLOAT64)
    return tensor_error(x->ctx, TVK_ERR_DTYPE,
                        "dropout: x has dtype %s: training needs a float dtype",
                        tvk_dtype_name(dt));
  int64_t n = bc_numel(x->ndim, x->shape);
  if (p == 0 || n == 0) return bc_same(x);
  if (n > INT32_MAX)
    return tensor_error(x->ctx, TVK_ERR_SHAPE,
                        "dropout: x has %lld elements: training takes at most 2^31 - 1",
                        (long long)n);
  tvk_ctx *ctx = x->ctx;
  if (p == 1) return tvk_full(ctx, dt, x->ndim, x->shape, 0);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x0, *x1;
  bits(ctx, n, seed, 0, &x0, &x1);
  double thr = ceil(ldexp(p, 24)); /* <= 2^24 */
  tvk_tensor *keep = tvk_ge(tvk_shr(x0, u32(ctx, 8)), u32(ctx, (uint32_t)thr));
  keep = tvk_reshape(keep, x->ndim, x->shape);
  tvk_tensor *scaled = tvk_mul(x, front_const(ctx, dt, 1 / (1 - p)));
  tvk_tensor *r = tvk_where(keep, scaled, front_const(ctx, dt, 0));
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
