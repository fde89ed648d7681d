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

static tvk_tensor *u32(tvk_ctx *ctx, uint32_t v) { return tvk_scalar(ctx, TVK_UINT32, v); }

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
  return tvk_mul(k, tvk_scalar(ctx, dt, ldexp(1, -m)));
}

/* Uniform [0, 1) from one block: float64 from 53 bits (27 of x0 above 26 of
 * x1), float32 from the top 24 bits of x0. float16 and bfloat16 take only
 * their significand's width (11 and 8 bits), so the float32 value k * 2^-m is
 * exact in them and the cast can not round up to 1.0: the largest value is
 * 1 - 2^-m. */
static tvk_tensor *uniform(tvk_ctx *ctx, tvk_tensor *x0, tvk_tensor *x1, tvk_dtype dt) {
  switch (dt) {
  case TVK_FLOAT64: {
    tvk_tensor *h = tvk_mul(tvk_cast(tvk_shr(x0, u32(ctx, 5)), dt), tvk_scalar(ctx, dt, 0x1p26));
    tvk_tensor *l = tvk_cast(tvk_shr(x1, u32(ctx, 6)), dt);
    return tvk_mul(tvk_add(h, l), tvk_scalar(ctx, dt, 0x1p-53));
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

/* Box-Muller: sqrt(-2 ln(1 - u1)) cos(2 pi u2). u1 < 1 on its grid, so 1 - u1
 * (exact) is at least 2^-24 (2^-53 in float64): the log is finite and |z| is
 * at most 5.8 (8.6). float32 and narrower draw u1 and u2 from the two words of
 * one block and compute in float32, rounding once to float16/bfloat16; float64
 * draws them from streams 0 and 1. */
tvk_tensor *tvk_randn(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape, uint64_t seed) {
  if (!ctx) return NULL;
  int64_t n;
  tvk_tensor *err = check_args("randn", ctx, dt, ndim, shape, &n);
  if (err) return err;
  if (n == 0) return tvk_full(ctx, dt, ndim, shape, 0);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x0, *x1, *u1, *u2;
  tvk_dtype cdt = dt == TVK_FLOAT64 ? dt : TVK_FLOAT32;
  bits(ctx, n, seed, 0, &x0, &x1);
  if (dt == TVK_FLOAT64) {
    u1 = uniform(ctx, x0, x1, dt);
    bits(ctx, n, seed, 1, &x0, &x1);
    u2 = uniform(ctx, x0, x1, dt);
  } else {
    u1 = top_bits(ctx, x0, 24, cdt);
    u2 = top_bits(ctx, x1, 24, cdt);
  }
  tvk_tensor *lg = tvk_log(tvk_sub(tvk_scalar(ctx, cdt, 1), u1));
  tvk_tensor *rad = tvk_sqrt(tvk_mul(lg, tvk_scalar(ctx, cdt, -2)));
  tvk_tensor *z = tvk_mul(rad, tvk_cos(tvk_mul(u2, tvk_scalar(ctx, cdt, 6.283185307179586))));
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
  tvk_tensor *scaled = tvk_mul(x, tvk_scalar(ctx, dt, 1 / (1 - p)));
  tvk_tensor *r = tvk_where(keep, scaled, tvk_scalar(ctx, dt, 0));
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
