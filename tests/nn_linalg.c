/* nn group "linalg": matmul, linear, conv2d, conv_transpose2d, resize, max/avg pool and scaled
 * dot-product attention against plain loops in double.
 *
 * Float32 inputs are drawn and then rounded to float32 (f32_vals), so the
 * tensors hold exactly the reference's values and the only error left is the
 * device's arithmetic: a float32 sum of K products is within K * 6e-8 of the
 * sum of |products| (each addition rounds once, relative 2^-24 ~ 6e-8 of the
 * partial sums, each at most that sum). The tolerances below are that bound. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_util.h"

#define EPS32 6e-8 /* 2^-24, a little rounded up */

/* n values uniform in [lo, hi), rounded to float32. */
static double *f32_vals(int64_t n, double lo, double hi) {
  double *v = nn_rand_vals(n, lo, hi);
  for (int64_t i = 0; i < n; i++) v[i] = (float)v[i];
  return v;
}

/* n multiples of 1/8 in [-4, 4): exact in float16 and bfloat16, and their
 * products and short sums exact in float32. */
static double *eighths(int64_t n) {
  double *v = nn_rand_ints(n, -32, 32);
  for (int64_t i = 0; i < n; i++) v[i] /= 8;
  return v;
}

/* ---------------------------------------------------------------- matmul */

/* c[m][n] = sum_k a[m][k] b[k][n] for row-major a (M, K), b (K, N); *bound gets
 * the largest sum of |products| (for the tolerance). */
static double *mm_ref(const double *a, const double *b, int64_t M, int64_t K, int64_t N,
                      double *bound) {
  double *c = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof *c);
  *bound = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0, sa = 0;
      for (int64_t k = 0; k < K; k++) {
        s += a[m * K + k] * b[k * N + n];
        sa += fabs(a[m * K + k] * b[k * N + n]);
      }
      c[m * N + n] = s;
      if (sa > *bound) *bound = sa;
    }
  return c;
}

/* a (as) @ b (bs) for 1-D/2-D operands, checked against mm_ref. */
static void check_mm_2d(const char *what, int and_, const int64_t *as, int bnd, const int64_t *bs,
                        int ond, const int64_t *os) {
  int64_t M = and_ == 2 ? as[0] : 1, K = as[and_ - 1], N = bnd == 2 ? bs[1] : 1;
  double *a = f32_vals(M * K, -1, 1), *b = f32_vals(K * N, -1, 1), bound;
  double *ref = mm_ref(a, b, M, K, N, &bound);
  tvk_tensor *ta = nn_tensor(TVK_FLOAT32, and_, as, a), *tb = nn_tensor(TVK_FLOAT32, bnd, bs, b);
  tvk_tensor *c = tvk_matmul(ta, tb);
  nn_check(what, c, TVK_FLOAT32, ond, os, ref, 0, (double)K * EPS32 * bound);
  free(a), free(b), free(ref);
}

static void test_matmul_vectors(void **state) {
  (void)state;
  check_mm_2d("vec @ vec", 1, (int64_t[]){7}, 1, (int64_t[]){7}, 0, NULL);
  check_mm_2d("vec @ mat", 1, (int64_t[]){3}, 2, (int64_t[]){3, 5}, 1, (int64_t[]){5});
  check_mm_2d("mat @ vec", 2, (int64_t[]){4, 3}, 1, (int64_t[]){3}, 1, (int64_t[]){4});
  check_mm_2d("1x1", 2, (int64_t[]){1, 1}, 2, (int64_t[]){1, 1}, 2, (int64_t[]){1, 1});
  nn_finish();
}

/* The description of the context's device into *in; false if not found. */
static bool context_device(tvk_device_info *in) {
  const char *dev = tvk_ctx_device(nn.ctx);
  for (int i = 0; i < tvk_device_count(); i++)
    if (tvk_device_get_info(i, in) == TVK_OK && in->description[0] && strstr(dev, in->description))
      return true;
  return false;
}

/* Whether the context's device is a Vulkan device that runs on the CPU
 * (lavapipe) and keeps its own rules (not TVK_GPU_RULES): it packs a
 * matmul's left operand too (ops_matmul.c). */
static bool on_software_vk(void) {
  const char *rules = getenv("TVK_GPU_RULES");
  if (rules && atoi(rules) > 0) return false;
  tvk_device_info in;
  return context_device(&in) && in.kind == TVK_DEVICE_KIND_SOFTWARE;
}

/* Whether the context's device is the CPU with kernels of 64-byte vectors
 * (16 float32 lanes: AVX-512): it packs a matmul's left operand whose rows
 * lie at most 2 KiB apart, and a convolution's weight whose output channels
 * lie under 4 KiB apart (ops_matmul.c, ops_conv.c). */
static bool on_wide_cpu(void) {
  tvk_device_info in;
  return context_device(&in) && in.kind == TVK_DEVICE_KIND_CPU && in.subgroup_size >= 16;
}

/* (M, K) @ (K, N) of random floats against double loops, in `kernels`
 * kernels. */
static void check_mm_kernels(int64_t M, int64_t K, int64_t N, int kernels) {
  char what[64];
  snprintf(what, sizeof what, "(%lld, %lld) @ (%lld, %lld)", (long long)M, (long long)K,
           (long long)K, (long long)N);
  double bound, *a = f32_vals(M * K, -1, 1), *b = f32_vals(K * N, -1, 1);
  double *ref = mm_ref(a, b, M, K, N, &bound);
  tvk_tensor *c = tvk_matmul(nn_tensor(TVK_FLOAT32, 2, (int64_t[]){M, K}, a),
                             nn_tensor(TVK_FLOAT32, 2, (int64_t[]){K, N}, b));
  nn_expect_kernels(what, c, kernels);
  nn_check(what, c, TVK_FLOAT32, 2, (int64_t[]){M, N}, ref, 0, K * EPS32 * bound);
  free(a), free(b), free(ref);
}

static void test_matmul_2d(void **state) {
  (void)state;
  check_mm_2d("(5, 7) @ (7, 3)", 2, (int64_t[]){5, 7}, 2, (int64_t[]){7, 3}, 2, (int64_t[]){5, 3});
  check_mm_2d("(9, 13) @ (13, 11)", 2, (int64_t[]){9, 13}, 2, (int64_t[]){13, 11}, 2,
              (int64_t[]){9, 11});
  check_mm_2d("(1, 17) @ (17, 2)", 2, (int64_t[]){1, 17}, 2, (int64_t[]){17, 2}, 2,
              (int64_t[]){1, 2});
  /* K = 0: sums of nothing */
  check_mm_2d("(3, 0) @ (0, 2)", 2, (int64_t[]){3, 0}, 2, (int64_t[]){0, 2}, 2, (int64_t[]){3, 2});
  /* a transposed view as an operand */
  double *a = f32_vals(4 * 6, -1, 1), *b = f32_vals(4 * 5, -1, 1);
  double at[24], bound; /* a^T: (6, 4) */
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 4; k++) at[i * 4 + k] = a[k * 6 + i];
  double *ref = mm_ref(at, b, 6, 4, 5, &bound);
  tvk_tensor *ta = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){4, 6}, a);
  tvk_tensor *tb = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){4, 5}, b);
  tvk_tensor *c = tvk_matmul(tvk_transpose(ta, 0, 1), tb);
  nn_expect_kernels("matmul (6, 4) @ (4, 5)", c, 1);
  nn_check("a^T @ b", c, TVK_FLOAT32, 2, (int64_t[]){6, 5}, ref, 0, 4 * EPS32 * bound);
  free(a), free(b), free(ref);
  /* (512, 512) @ (512, 48): on a software Vulkan device A is first copied into
   * panels of 16 rows (a second kernel), and the register tile reads its rows
   * at each k as neighbours; B (48 columns) stays as it is */
  check_mm_kernels(512, 512, 48, on_software_vk() ? 2 : 1);
  /* (512, 128) @ (128, 256): A's rows lie 512 bytes apart, so an AVX-512
   * CPU copies it into panels of 16 rows first (a second kernel) */
  check_mm_kernels(512, 128, 256, on_wide_cpu() ? 2 : 1);
  nn_finish();
}

static void test_matmul_batched(void **state) {
  (void)state;
  /* (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6) */
  double *a = f32_vals(2 * 3 * 4, -1, 1), *b = f32_vals(5 * 4 * 6, -1, 1);
  double ref[2 * 5 * 3 * 6], bound = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++)
      for (int m = 0; m < 3; m++)
        for (int n = 0; n < 6; n++) {
          double s = 0, sa = 0;
          for (int k = 0; k < 4; k++) {
            double p = a[(i * 3 + m) * 4 + k] * b[(j * 4 + k) * 6 + n];
            s += p, sa += fabs(p);
          }
          ref[((i * 5 + j) * 3 + m) * 6 + n] = s;
          bound = fmax(bound, sa);
        }
  tvk_tensor *ta = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){2, 1, 3, 4}, a);
  tvk_tensor *tb = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){5, 4, 6}, b);
  tvk_tensor *c = tvk_matmul(ta, tb);
  nn_expect_kernels("batched matmul (2, 1, 3, 4) @ (5, 4, 6)", c, 1);
  nn_check("(2, 1, 3, 4) @ (5, 4, 6)", c, TVK_FLOAT32, 4, (int64_t[]){2, 5, 3, 6}, ref, 0,
           4 * EPS32 * bound);

  /* a vector against a stack: (4,) @ (5, 4, 6) -> (5, 6); (5, 4, 6) @ (6,) -> (5, 4) */
  double *v4 = f32_vals(4, -1, 1), *v6 = f32_vals(6, -1, 1);
  double r1[5 * 6], r2[5 * 4], b1 = 0, b2 = 0;
  for (int j = 0; j < 5; j++) {
    for (int n = 0; n < 6; n++) {
      double s = 0, sa = 0;
      for (int k = 0; k < 4; k++)
        s += v4[k] * b[(j * 4 + k) * 6 + n], sa += fabs(v4[k] * b[(j * 4 + k) * 6 + n]);
      r1[j * 6 + n] = s, b1 = fmax(b1, sa);
    }
    for (int m = 0; m < 4; m++) {
      double s = 0, sa = 0;
      for (int k = 0; k < 6; k++)
        s += b[(j * 4 + m) * 6 + k] * v6[k], sa += fabs(b[(j * 4 + m) * 6 + k] * v6[k]);
      r2[j * 4 + m] = s, b2 = fmax(b2, sa);
    }
  }
  tvk_tensor *t4 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){4}, v4);
  tvk_tensor *t6 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){6}, v6);
  nn_check("(4,) @ (5, 4, 6)", tvk_matmul(t4, tb), TVK_FLOAT32, 2, (int64_t[]){5, 6}, r1, 0,
           4 * EPS32 * b1);
  nn_check("(5, 4, 6) @ (6,)", tvk_matmul(tb, t6), TVK_FLOAT32, 2, (int64_t[]){5, 4}, r2, 0,
           6 * EPS32 * b2);
  free(a), free(b), free(v4), free(v6);
  /* (3, 256, 256) @ (3, 256, 256): an AVX-512 CPU copies each A into
   * panels of 16 rows first (rows 1 KiB apart; a second kernel) */
  enum { NB = 3, S = 256 };
  double *pa = f32_vals(NB * S * S, -1, 1), *pb = f32_vals(NB * S * S, -1, 1);
  double *pref = malloc(NB * S * S * sizeof *pref), pbound = 0;
  for (int m = 0; m < NB; m++) {
    double bm, *r = mm_ref(pa + m * S * S, pb + m * S * S, S, S, S, &bm);
    memcpy(pref + m * S * S, r, S * S * sizeof *r);
    pbound = fmax(pbound, bm);
    free(r);
  }
  const int64_t bsh[3] = {NB, S, S};
  tvk_tensor *pc =
      tvk_matmul(nn_tensor(TVK_FLOAT32, 3, bsh, pa), nn_tensor(TVK_FLOAT32, 3, bsh, pb));
  nn_expect_kernels("matmul (3, 256, 256) @ (3, 256, 256)", pc, on_wide_cpu() ? 2 : 1);
  nn_check("(3, 256, 256) @ (3, 256, 256)", pc, TVK_FLOAT32, 3, bsh, pref, 0, S * EPS32 * pbound);
  free(pa), free(pb), free(pref);
  nn_finish();
}

static void test_matmul_dtypes(void **state) {
  (void)state;
  /* float16 / bfloat16: inputs exact in the dtype, products and sums exact
   * in float32, so the only error is the final rounding (half an ulp: 2^-11
   * relative for float16, 2^-8 for bfloat16). */
  const int64_t M = 3, K = 9, N = 5;
  double *a = eighths(M * K), *b = eighths(K * N), bound;
  double *ref = mm_ref(a, b, M, K, N, &bound);
  tvk_dtype hs[2] = {TVK_FLOAT16, TVK_BFLOAT16};
  double rt[2] = {0x1p-11, 0x1p-8};
  for (int h = 0; h < 2; h++) {
    tvk_tensor *ta = nn_tensor(hs[h], 2, (int64_t[]){M, K}, a);
    tvk_tensor *tb = nn_tensor(hs[h], 2, (int64_t[]){K, N}, b);
    nn_check(tvk_dtype_name(hs[h]), tvk_matmul(ta, tb), hs[h], 2, (int64_t[]){M, N}, ref, rt[h], 0);
  }
  /* float16 @ float32 promotes to float32; exact here */
  tvk_tensor *ta = nn_tensor(TVK_FLOAT16, 2, (int64_t[]){M, K}, a);
  tvk_tensor *tb = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){K, N}, b);
  nn_check("float16 @ float32", tvk_matmul(ta, tb), TVK_FLOAT32, 2, (int64_t[]){M, N}, ref, 0, 0);
  /* float16 sums of many terms keep their low bits (accumulated in float32):
   * 64 terms of 1 + 2^-10 ... exact in float32, rounded once to float16 */
  double *ones = malloc(64 * sizeof *ones), s64 = 64 * (1 + 0x1p-10);
  for (int i = 0; i < 64; i++) ones[i] = 1 + 0x1p-10;
  double *one = malloc(64 * sizeof *one);
  for (int i = 0; i < 64; i++) one[i] = 1;
  tvk_tensor *u = nn_tensor(TVK_FLOAT16, 1, (int64_t[]){64}, ones);
  tvk_tensor *w = nn_tensor(TVK_FLOAT16, 1, (int64_t[]){64}, one);
  nn_check("float16 dot of 64", tvk_matmul(u, w), TVK_FLOAT16, 0, NULL, &s64, 0x1p-11, 0);
  free(ones), free(one);
  free(a), free(b), free(ref);

  /* int32: exact, wraps like the dtype (not reached here) */
  double *ia = nn_rand_ints(4 * 6, -50, 50), *ib = nn_rand_ints(6 * 3, -50, 50), ib_bound;
  double *iref = mm_ref(ia, ib, 4, 6, 3, &ib_bound);
  tvk_tensor *xa = nn_tensor(TVK_INT32, 2, (int64_t[]){4, 6}, ia);
  tvk_tensor *xb = nn_tensor(TVK_INT32, 2, (int64_t[]){6, 3}, ib);
  nn_check("int32", tvk_matmul(xa, xb), TVK_INT32, 2, (int64_t[]){4, 3}, iref, 0, 0);
  /* int8 keeps int8 (numpy): small values, no wrap */
  double *sa = nn_rand_ints(2 * 3, -3, 4), *sb = nn_rand_ints(3 * 2, -3, 4), sbound;
  double *sref = mm_ref(sa, sb, 2, 3, 2, &sbound);
  tvk_tensor *ya = nn_tensor(TVK_INT8, 2, (int64_t[]){2, 3}, sa);
  tvk_tensor *yb = nn_tensor(TVK_INT8, 2, (int64_t[]){3, 2}, sb);
  nn_check("int8", tvk_matmul(ya, yb), TVK_INT8, 2, (int64_t[]){2, 2}, sref, 0, 0);
  free(ia), free(ib), free(iref), free(sa), free(sb), free(sref);
  nn_finish();
}

static void test_matmul_errors(void **state) {
  (void)state;
  double z[64] = {0};
  tvk_tensor *a = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){3, 4}, z);
  tvk_tensor *b = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){5, 6}, z);
  tvk_tensor *c = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){2, 3, 4}, z);
  tvk_tensor *d = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){3, 4, 5}, z);
  tvk_tensor *s = tvk_scalar(nn.ctx, TVK_FLOAT32, 1);
  tvk_tensor *v5 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){5}, z);
  nn_check_error("inner dims", tvk_matmul(a, b), TVK_ERR_SHAPE);
  nn_check_error("vector inner dims", tvk_matmul(a, v5), TVK_ERR_SHAPE);
  nn_check_error("vector @ matrix inner dims", tvk_matmul(v5, a), TVK_ERR_SHAPE);
  nn_check_error("batch dims", tvk_matmul(c, d), TVK_ERR_SHAPE);
  nn_check_error("0-d", tvk_matmul(s, a), TVK_ERR_SHAPE);
  nn_check_error("NULL", tvk_matmul(a, NULL), TVK_ERR_INVALID_ARG);
  nn_expect(tvk_matmul(NULL, NULL) == NULL, "matmul(NULL, NULL) is NULL");
  tvk_tensor *e = tvk_matmul(a, b);
  nn_check_error("error input", tvk_matmul(e, a), TVK_ERR_SHAPE);
  nn_check_error("linear: w 1-D", tvk_linear(a, v5, NULL), TVK_ERR_SHAPE);
  nn_check_error("linear: in differs", tvk_linear(a, b, NULL), TVK_ERR_SHAPE);
  nn_check_error("linear: bias shape", tvk_linear(a, a, v5), TVK_ERR_SHAPE);
  nn_check_error("linear: NULL w", tvk_linear(a, NULL, NULL), TVK_ERR_INVALID_ARG);
  nn_check_error("linear: error bias", tvk_linear(a, a, e), TVK_ERR_SHAPE);
  nn_finish();
}

/* ---------------------------------------------------------------- linear */

static void test_linear(void **state) {
  (void)state;
  /* x (2, 3, 6), w (5, 6), bias (5,) -> (2, 3, 5) */
  const int64_t B = 6, I = 6, O = 5;
  double *x = f32_vals(B * I, -1, 1), *w = f32_vals(O * I, -1, 1), *bias = f32_vals(O, -1, 1);
  double ref[6 * 5], refb[6 * 5], bound = 0;
  for (int r = 0; r < B; r++)
    for (int o = 0; o < O; o++) {
      double s = 0, sa = 0;
      for (int i = 0; i < I; i++)
        s += x[r * I + i] * w[o * I + i], sa += fabs(x[r * I + i] * w[o * I + i]);
      ref[r * O + o] = s, refb[r * O + o] = s + bias[o];
      bound = fmax(bound, sa + fabs(bias[o]));
    }
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){2, 3, I}, x);
  tvk_tensor *tw = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){O, I}, w);
  tvk_tensor *tb = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){O}, bias);
  double tol = (I + 1) * EPS32 * bound;
  nn_check("linear 3-D, bias", tvk_linear(tx, tw, tb), TVK_FLOAT32, 3, (int64_t[]){2, 3, O}, refb,
           0, tol);
  nn_check("linear 3-D, no bias", tvk_linear(tx, tw, NULL), TVK_FLOAT32, 3, (int64_t[]){2, 3, O},
           ref, 0, tol);
  tvk_tensor *x2 = tvk_reshape(tx, 2, (int64_t[]){B, I});
  tvk_tensor *l2 = tvk_linear(x2, tw, tb);
  nn_expect_kernels("linear (6, 6) x (5, 6) + bias", l2, 1);
  nn_check("linear 2-D, bias", l2, TVK_FLOAT32, 2, (int64_t[]){B, O}, refb, 0, tol);
  tvk_tensor *x1 = tvk_shrink(x2, (const int64_t[][2]){{0, 1}, {0, I}});
  x1 = tvk_reshape(x1, 1, (int64_t[]){I});
  nn_check("linear 1-D", tvk_linear(x1, tw, tb), TVK_FLOAT32, 1, (int64_t[]){O}, refb, 0, tol);
  free(x), free(w), free(bias);

  /* 70 rows by a (32, 48) weight: on the CPU the transposed weight is
   * copied into column panels first (ops_matmul.c, packed), a second kernel;
   * 70 is no multiple of a tile's rows */
  const int64_t M = 70, K = 48, N = 32;
  double *xp = f32_vals(M * K, -1, 1), *wp = f32_vals(N * K, -1, 1), *bp = f32_vals(N, -1, 1);
  double *rp = malloc((size_t)(M * N) * sizeof *rp), bp_bound = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t o = 0; o < N; o++) {
      double s = bp[o], sa = fabs(bp[o]);
      for (int64_t i = 0; i < K; i++)
        s += xp[r * K + i] * wp[o * K + i], sa += fabs(xp[r * K + i] * wp[o * K + i]);
      rp[r * N + o] = s, bp_bound = fmax(bp_bound, sa);
    }
  tvk_tensor *px = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){M, K}, xp);
  tvk_tensor *pw = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){N, K}, wp);
  tvk_tensor *pb = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){N}, bp);
  tvk_tensor *pl = tvk_linear(px, pw, pb);
  if (!strcmp(nn.device, "CPU")) nn_expect_kernels("linear (70, 48) x (32, 48) + bias", pl, 2);
  nn_check("linear (70, 48) x (32, 48) + bias", pl, TVK_FLOAT32, 2, (int64_t[]){M, N}, rp, 0,
           (K + 1) * EPS32 * bp_bound);
  free(xp), free(wp), free(bp), free(rp);
  nn_finish();
}

/* relu(x @ w + b) with x (8, 16), w (16, 32), b (32,) */
static void test_matmul_bias_relu(void **state) {
  (void)state;
  const int M = 8, K = 16, N = 32;
  double *x = f32_vals(M * K, -1, 1), *w = f32_vals(K * N, -1, 1), *b = f32_vals(N, -1, 1), bound;
  double *ref = mm_ref(x, w, M, K, N, &bound);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) ref[m * N + n] = fmax(ref[m * N + n] + b[n], 0);
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){M, K}, x);
  tvk_tensor *tw = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){K, N}, w);
  tvk_tensor *tb = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){N}, b);
  tvk_tensor *y = tvk_relu(tvk_add(tvk_matmul(tx, tw), tb));
  nn_expect_kernels("relu(x @ w + b) (8, 16) @ (16, 32)", y, 1);
  nn_check("relu(x @ w + b)", y, TVK_FLOAT32, 2, (int64_t[]){M, N}, ref, 0,
           (K + 1) * EPS32 * (bound + 1));
  free(x), free(w), free(b), free(ref);
  nn_finish();
}

/* Selects after a matmul, in its kernel (on the CPU a register tile, where
 * float selects are spelled as masks, render_c.c's tvk_sel_f32): relu,
 * maximum and where over products that are NaN, +-inf, 0, negative and
 * positive keep every value the plain selects give. Row m's product is
 * v[m] * w[0][n] (the second column of x is 0); w[0][10] = 0 makes the
 * infinite rows NaN there. */
static void test_matmul_epilogue_selects(void **state) {
  (void)state;
  enum { M = 16, K = 2, N = 48 };
  const double v[M] = {1,  -2, 0.5, NAN, -0.25, INFINITY, 3, -INFINITY,
                       -1, 0,  2,   -3,  0.75,  -0.5,     4, -4};
  double x[M * K], w[K * N], p[M * N], ref[3][M * N];
  for (int m = 0; m < M; m++) x[m * K] = v[m], x[m * K + 1] = 0;
  for (int n = 0; n < N; n++) w[n] = n == 10 ? 0 : nn_uniform(-1, 1), w[N + n] = nn_uniform(-1, 1);
  for (int i = 0; i < M * N; i++) {
    int m = i / N, n = i % N;
    p[i] = x[m * K] * w[n] + x[m * K + 1] * w[N + n];
    ref[0][i] = isnan(p[i]) ? p[i] : p[i] < 0 ? 0 : p[i];       /* relu */
    ref[1][i] = isnan(p[i]) ? p[i] : p[i] > 0.25 ? p[i] : 0.25; /* maximum(p, 0.25) */
    ref[2][i] = p[i] > 0.5 ? p[i] : -p[i];                      /* where(p > 0.5, p, -p) */
  }
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){M, K}, x);
  tvk_tensor *tw = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){K, N}, w);
  tvk_tensor *q = tvk_scalar(nn.ctx, TVK_FLOAT32, 0.25), *h = tvk_scalar(nn.ctx, TVK_FLOAT32, 0.5);
  tvk_tensor *mm = tvk_matmul(tx, tw), *gt = tvk_gt(mm, h), *neg = tvk_neg(mm);
  tvk_tensor *y[3] = {tvk_relu(mm), tvk_maximum(mm, q), tvk_where(gt, mm, neg)};
  const char *names[3] = {"relu(x @ w)", "maximum(x @ w, 0.25)",
                          "where(x @ w > 0.5, x @ w, -(x @ w))"};
  for (int k = 0; k < 3; k++) {
    nn_expect_kernels(names[k], y[k], 1);
    nn_check(names[k], y[k], TVK_FLOAT32, 2, (int64_t[]){M, N}, ref[k], 1e-6, 1e-6);
    tvk_release(y[k]);
  }
  tvk_release(gt), tvk_release(neg), tvk_release(mm), tvk_release(q), tvk_release(h);
  nn_finish();
}

/* Whether the CPU device's kernels should fuse a matmul's multiply-adds: the
 * machine has FMA (x86's "fma" flag, every AArch64), which the C compiler's
 * -march=native then enables (backend_cpu/cpu_compile.c). */
static bool cpu_has_fma(void) {
#if defined(__aarch64__)
  return true;
#elif defined(__x86_64__) || defined(__i386__)
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[4096];
  bool fma = false;
  while (f && !fma && fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5)) fma = strstr(line, " fma ") || strstr(line, " fma\n");
  if (f) fclose(f);
  return fma;
#else
  return false;
#endif
}

/* A matmul accumulates acc + a * b as one fused multiply-add where the device
 * has one, else with two roundings; never anything else. With x = 1 + 2^-12,
 * (1, x) @ (-1, x)^T is -1 + x * x = 2^-11 + 2^-24 exactly: a fused add keeps
 * the 2^-24, rounding x * x to float32 first loses it (a tie, to even). */
static void test_matmul_fused(void **state) {
  (void)state;
  const double x = 1 + ldexp(1, -12), fused = ldexp(1, -11) + ldexp(1, -24), twice = ldexp(1, -11);
  tvk_tensor *a = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){1, 2}, (double[]){1, x});
  tvk_tensor *b = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){2, 1}, (double[]){-1, x});
  double *got = nn_fetch(tvk_matmul(a, b));
  if (got) {
    nn_expect(got[0] == fused || got[0] == twice,
              "(1, x) @ (-1, x): %.17g, expected %.17g (fused) or %.17g (two roundings)", got[0],
              fused, twice);
    if (!strcmp(nn.device, "CPU") && cpu_has_fma())
      nn_expect(got[0] == fused,
                "(1, x) @ (-1, x) on a CPU with FMA: %.17g, expected the fused %.17g (is the C "
                "compiler building for this CPU?)",
                got[0], fused);
    if (getenv("TVK_NN_VERBOSE"))
      printf("%s: a matmul's multiply-add is %s\n", nn.device,
             got[0] == fused ? "fused" : "rounded twice");
  }
  free(got);
  nn_finish();
}

/* ---------------------------------------------------------------- conv2d */

typedef struct {
  int64_t N, Cin, H, W, Cout, kh, kw;
  int64_t stride[2], pad[4], dil[2], groups;
  bool bias;
} ConvCase;

/* Runs one convolution case against the definition:
 * out[n][o][p][q] = bias[o] + sum_{c, a, b} x[n][g*Cg + c][p*sh + a*dh - top][q*sw + b*dw - left]
 *                                           * w[o][c][a][b],  g = o / (Cout / groups),
 * where x outside the image is 0. */
static void check_conv(const char *what, ConvCase cc) {
  int64_t Cg = cc.Cin / cc.groups, Og = cc.Cout / cc.groups;
  int64_t Ho = (cc.H + cc.pad[0] + cc.pad[1] - cc.dil[0] * (cc.kh - 1) - 1) / cc.stride[0] + 1;
  int64_t Wo = (cc.W + cc.pad[2] + cc.pad[3] - cc.dil[1] * (cc.kw - 1) - 1) / cc.stride[1] + 1;
  int64_t xs[4] = {cc.N, cc.Cin, cc.H, cc.W}, ws[4] = {cc.Cout, Cg, cc.kh, cc.kw};
  double *x = f32_vals(nn_numel(4, xs), -1, 1), *w = f32_vals(nn_numel(4, ws), -1, 1);
  double *bias = f32_vals(cc.Cout, -1, 1);
  int64_t os[4] = {cc.N, cc.Cout, Ho, Wo};
  double *ref = malloc((size_t)nn_numel(4, os) * sizeof *ref), bound = 0;
  for (int64_t n = 0; n < cc.N; n++)
    for (int64_t o = 0; o < cc.Cout; o++)
      for (int64_t p = 0; p < Ho; p++)
        for (int64_t q = 0; q < Wo; q++) {
          double s = cc.bias ? bias[o] : 0, sa = fabs(s);
          int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t a = 0; a < cc.kh; a++)
              for (int64_t b = 0; b < cc.kw; b++) {
                int64_t i = p * cc.stride[0] + a * cc.dil[0] - cc.pad[0];
                int64_t j = q * cc.stride[1] + b * cc.dil[1] - cc.pad[2];
                if (i < 0 || i >= cc.H || j < 0 || j >= cc.W) continue;
                double t = x[((n * cc.Cin + g * Cg + c) * cc.H + i) * cc.W + j] *
                           w[((o * Cg + c) * cc.kh + a) * cc.kw + b];
                s += t, sa += fabs(t);
              }
          ref[((n * cc.Cout + o) * Ho + p) * Wo + q] = s;
          bound = fmax(bound, sa);
        }
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 4, xs, x), *tw = nn_tensor(TVK_FLOAT32, 4, ws, w);
  tvk_tensor *tb = cc.bias ? nn_tensor(TVK_FLOAT32, 1, &cc.Cout, bias) : NULL;
  tvk_tensor *y = tvk_conv2d(tx, tw, tb, cc.stride, cc.pad, cc.dil, cc.groups);
  double terms = (double)(Cg * cc.kh * cc.kw + 1);
  if (!strcmp(what, "plain")) nn_expect_kernels("conv2d (2, 3, 7, 6) * (4, 3, 3, 2) + bias", y, 1);
  if (!strcmp(what, "groups 2")) nn_expect_kernels("conv2d groups 2, padded", y, 1);
  if (!strncmp(what, "packed weight", 13)) nn_expect_kernels(what, y, on_wide_cpu() ? 2 : 1);
  nn_check(what, y, TVK_FLOAT32, 4, os, ref, 0, terms * EPS32 * bound);
  free(x), free(w), free(bias), free(ref);
}

#define ONE2                                                                                       \
  { 1, 1 }
#define ZERO4                                                                                      \
  { 0, 0, 0, 0 }

static void test_conv2d_basic(void **state) {
  (void)state;
  check_conv("plain", (ConvCase){2, 3, 7, 6, 4, 3, 2, ONE2, ZERO4, ONE2, 1, true});
  check_conv("no bias", (ConvCase){1, 2, 5, 5, 3, 3, 3, ONE2, ZERO4, ONE2, 1, false});
  check_conv("1x1 kernel", (ConvCase){2, 5, 3, 4, 3, 1, 1, ONE2, ZERO4, ONE2, 1, true});
  check_conv("kernel = input", (ConvCase){2, 3, 4, 5, 2, 4, 5, ONE2, ZERO4, ONE2, 1, true});
  check_conv("1x1 input", (ConvCase){1, 2, 1, 1, 3, 1, 1, ONE2, ZERO4, ONE2, 1, true});
  nn_finish();
}

static void test_conv2d_stride_pad_dilation(void **state) {
  (void)state;
  check_conv("stride (2, 3)", (ConvCase){2, 2, 9, 8, 3, 3, 3, {2, 3}, ZERO4, ONE2, 1, true});
  check_conv("stride > kernel", (ConvCase){1, 2, 11, 10, 2, 2, 3, {4, 5}, ZERO4, ONE2, 1, true});
  check_conv("padding (1, 0, 2, 1)",
             (ConvCase){1, 3, 5, 6, 2, 3, 3, ONE2, {1, 0, 2, 1}, ONE2, 1, true});
  check_conv("padding > kernel",
             (ConvCase){1, 1, 3, 2, 2, 2, 2, ONE2, {3, 1, 0, 4}, ONE2, 1, false});
  check_conv("dilation (2, 3)", (ConvCase){1, 2, 9, 10, 3, 3, 3, ONE2, ZERO4, {2, 3}, 1, true});
  check_conv("stride, pad, dilation",
             (ConvCase){2, 2, 8, 7, 3, 3, 2, {2, 3}, {2, 1, 1, 2}, {2, 2}, 1, true});
  /* stride larger than dilation * kernel + 1: the tiled windows need longer rows */
  check_conv("stride 7 dilation 2",
             (ConvCase){1, 1, 15, 16, 1, 2, 1, {7, 6}, ZERO4, {2, 3}, 1, false});
  nn_finish();
}

static void test_conv2d_groups(void **state) {
  (void)state;
  check_conv("groups 2", (ConvCase){2, 4, 6, 5, 6, 3, 2, ONE2, {1, 1, 0, 1}, ONE2, 2, true});
  check_conv("depthwise", (ConvCase){1, 3, 6, 7, 3, 3, 3, {2, 1}, {1, 1, 1, 1}, ONE2, 3, true});
  check_conv("depthwise x2", (ConvCase){2, 3, 5, 5, 6, 2, 2, ONE2, ZERO4, {2, 1}, 3, false});
  /* 16 output channels per group over 512 / 256 positions: an AVX-512 CPU
   * first copies the weight into panels of 16 output channels (ops_conv.c) */
  check_conv("packed weight",
             (ConvCase){2, 8, 16, 16, 16, 3, 3, ONE2, {1, 1, 1, 1}, ONE2, 1, true});
  check_conv("packed weight, groups 2",
             (ConvCase){1, 8, 16, 16, 32, 3, 3, ONE2, {1, 1, 1, 1}, ONE2, 2, false});
  nn_finish();
}

/* The windows for many (kernel, stride, dilation, padding) per dim on odd
 * sizes: both window constructions (non-overlapping and tiled), rows, columns. */
static void test_conv2d_window_sweep(void **state) {
  (void)state;
  static const int64_t p[][4] = {
      /* k  s  d  pad */
      {1, 1, 1, 0}, {2, 2, 1, 0}, {2, 3, 1, 1}, {3, 1, 1, 2}, {3, 2, 2, 0}, {2, 5, 3, 1},
      {1, 4, 2, 0}, {4, 3, 1, 3}, {3, 3, 1, 0}, {2, 1, 4, 0}, {3, 4, 2, 2}, {1, 2, 1, 1},
  };
  int n = (int)(sizeof p / sizeof p[0]);
  for (int i = 0; i < n; i++) {
    const int64_t *a = p[i], *b = p[(i * 5 + 3) % n];
    ConvCase cc = {1,
                   2,
                   9 + i % 3,
                   11 - i % 4,
                   2,
                   a[0],
                   b[0],
                   {a[1], b[1]},
                   {a[3], a[3] / 2, b[3] / 2, b[3]},
                   {a[2], b[2]},
                   1,
                   false};
    char what[96];
    snprintf(what, sizeof what,
             "sweep %d: H %lld k %lld s %lld d %lld, W %lld k %lld s %lld d %lld", i,
             (long long)cc.H, (long long)a[0], (long long)a[1], (long long)a[2], (long long)cc.W,
             (long long)b[0], (long long)b[1], (long long)b[2]);
    check_conv(what, cc);
  }
  nn_finish();
}

/* ---------------------------------------------------------------- conv_transpose2d */

typedef struct {
  int64_t N, Cin, H, W, Og, kh, kw;
  int64_t stride[2], pad[4], outpad[2], dil[2], groups;
  bool bias;
} ConvTCase;

/* Against the definition as a scatter (the adjoint of conv2d), written
 * independently of the gather the library builds: each input element x[n][c][i][j]
 * adds x * w[c][o'][a][b] to out[n][g*Og + o'][i*sh + a*dh - top][j*sw + b*dw - left]
 * when that lies inside the output. */
static void check_conv_t(const char *what, ConvTCase cc) {
  int64_t Cg = cc.Cin / cc.groups, Cout = cc.Og * cc.groups;
  int64_t Ho = (cc.H - 1) * cc.stride[0] - cc.pad[0] - cc.pad[1] + cc.dil[0] * (cc.kh - 1) +
               cc.outpad[0] + 1;
  int64_t Wo = (cc.W - 1) * cc.stride[1] - cc.pad[2] - cc.pad[3] + cc.dil[1] * (cc.kw - 1) +
               cc.outpad[1] + 1;
  int64_t xs[4] = {cc.N, cc.Cin, cc.H, cc.W}, ws[4] = {cc.Cin, cc.Og, cc.kh, cc.kw};
  double *x = f32_vals(nn_numel(4, xs), -1, 1), *w = f32_vals(nn_numel(4, ws), -1, 1);
  double *bias = f32_vals(Cout, -1, 1);
  int64_t os[4] = {cc.N, Cout, Ho, Wo}, no = nn_numel(4, os);
  double *ref = calloc((size_t)no, sizeof *ref), *mag = calloc((size_t)no, sizeof *mag);
  for (int64_t n = 0; n < cc.N; n++)
    for (int64_t c = 0; c < cc.Cin; c++)
      for (int64_t i = 0; i < cc.H; i++)
        for (int64_t j = 0; j < cc.W; j++)
          for (int64_t o = 0; o < cc.Og; o++)
            for (int64_t a = 0; a < cc.kh; a++)
              for (int64_t b = 0; b < cc.kw; b++) {
                int64_t p = i * cc.stride[0] + a * cc.dil[0] - cc.pad[0];
                int64_t q = j * cc.stride[1] + b * cc.dil[1] - cc.pad[2];
                if (p < 0 || p >= Ho || q < 0 || q >= Wo) continue;
                int64_t oc = c / Cg * cc.Og + o, at = ((n * Cout + oc) * Ho + p) * Wo + q;
                double t = x[((n * cc.Cin + c) * cc.H + i) * cc.W + j] *
                           w[((c * cc.Og + o) * cc.kh + a) * cc.kw + b];
                ref[at] += t, mag[at] += fabs(t);
              }
  double bound = 0;
  for (int64_t e = 0; e < no; e++) {
    if (cc.bias) ref[e] += bias[(e / (Ho * Wo)) % Cout], mag[e] += 1;
    bound = fmax(bound, mag[e]);
  }
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 4, xs, x), *tw = nn_tensor(TVK_FLOAT32, 4, ws, w);
  tvk_tensor *tb = cc.bias ? nn_tensor(TVK_FLOAT32, 1, &Cout, bias) : NULL;
  tvk_tensor *y = tvk_conv_transpose2d(tx, tw, tb, cc.stride, cc.pad, cc.outpad, cc.dil, cc.groups);
  double terms = (double)(Cg * cc.kh * cc.kw + 1);
  if (!strcmp(what, "plain")) nn_expect_kernels("conv_transpose2d + bias", y, 1);
  nn_check(what, y, TVK_FLOAT32, 4, os, ref, 0, terms * EPS32 * bound);
  free(x), free(w), free(bias), free(ref), free(mag);
}

static void test_conv_transpose2d(void **state) {
  (void)state;
  check_conv_t("plain", (ConvTCase){2, 3, 4, 5, 2, 3, 2, ONE2, ZERO4, {0, 0}, ONE2, 1, true});
  check_conv_t("stride 2", (ConvTCase){1, 2, 3, 4, 3, 3, 3, {2, 2}, ZERO4, {0, 0}, ONE2, 1, false});
  check_conv_t("stride (3, 2), padding, output_padding",
               (ConvTCase){2, 2, 4, 3, 2, 3, 4, {3, 2}, {1, 2, 0, 1}, {2, 1}, ONE2, 1, true});
  check_conv_t("padding past the kernel",
               (ConvTCase){1, 1, 6, 5, 1, 2, 2, {1, 2}, {2, 1, 1, 3}, {0, 0}, ONE2, 1, false});
  check_conv_t("dilation",
               (ConvTCase){1, 2, 4, 4, 2, 2, 3, {2, 1}, ZERO4, {1, 0}, {2, 3}, 1, true});
  check_conv_t("groups 2",
               (ConvTCase){2, 4, 3, 3, 3, 2, 2, {2, 2}, {0, 1, 1, 0}, {1, 1}, ONE2, 2, true});
  check_conv_t("depthwise",
               (ConvTCase){1, 3, 5, 4, 1, 3, 3, ONE2, {1, 1, 1, 1}, {0, 0}, ONE2, 3, false});
  nn_finish();
}

static void test_conv_transpose2d_errors(void **state) {
  (void)state;
  double z[512] = {0};
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){1, 4, 5, 5}, z);
  tvk_tensor *w = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){4, 2, 3, 3}, z);
  tvk_tensor *w3 = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, 2, 3, 3}, z);
  tvk_tensor *b5 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){5}, z);
  nn_check_error("Cin mismatch", tvk_conv_transpose2d(x, w3, NULL, NULL, NULL, NULL, NULL, 1),
                 TVK_ERR_SHAPE);
  nn_check_error("groups 3", tvk_conv_transpose2d(x, w, NULL, NULL, NULL, NULL, NULL, 3),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("bias of 5 for Cout 2", tvk_conv_transpose2d(x, w, b5, NULL, NULL, NULL, NULL, 1),
                 TVK_ERR_SHAPE);
  nn_check_error(
      "output_padding = stride",
      tvk_conv_transpose2d(x, w, NULL, (int64_t[]){2, 2}, NULL, (int64_t[]){2, 0}, NULL, 1),
      TVK_ERR_INVALID_ARG);
  nn_check_error("padding eating the output",
                 tvk_conv_transpose2d(x, w, NULL, NULL, (int64_t[]){4, 4, 0, 0}, NULL, NULL, 1),
                 TVK_ERR_SHAPE);
  tvk_release(x), tvk_release(w), tvk_release(w3), tvk_release(b5);
  nn_finish();
}

/* ---------------------------------------------------------------- resize */

/* Closed forms, not a second implementation: linear interpolation keeps a
 * linear function, Keys' cubic with a = -0.5 keeps a quadratic (away from
 * the edges), nearest upsampling by k repeats each element k times. */
static void test_resize(void **state) {
  (void)state;
  /* bilinear, align_corners: f(i, j) = 3i - 2j + 1 on a 4 x 5 grid to 7 x 9 */
  int64_t xs[4] = {2, 1, 4, 5}, os[4] = {2, 1, 7, 9};
  double x[40], ref[126];
  for (int n = 0; n < 2; n++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 5; j++) x[(n * 4 + i) * 5 + j] = 3 * i - 2 * j + 1 + n;
  for (int n = 0; n < 2; n++)
    for (int p = 0; p < 7; p++)
      for (int q = 0; q < 9; q++)
        ref[(n * 7 + p) * 9 + q] = 3 * (p * 3.0 / 6) - 2 * (q * 4.0 / 8) + 1 + n;
  tvk_tensor *tx = nn_tensor(TVK_FLOAT32, 4, xs, x);
  tvk_resize_options lin = {.mode = TVK_RESIZE_LINEAR, .coord = TVK_RESIZE_ALIGN_CORNERS};
  tvk_tensor *y = tvk_resize(tx, 2, (int[]){2, 3}, (int64_t[]){7, 9}, &lin);
  nn_check("bilinear align_corners keeps a plane", y, TVK_FLOAT32, 4, os, ref, 0, 2e-6 * 16);
  tvk_release(y);
  /* half_pixel linear 2x of [a, b]: a, a + (b-a)/4, a + 3(b-a)/4, b (edges clamp) */
  double ab[2] = {1, 5}, want[4] = {1, 2, 4, 5};
  tvk_tensor *t2 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){2}, ab);
  lin.coord = TVK_RESIZE_HALF_PIXEL;
  y = tvk_resize(t2, 1, (int[]){0}, (int64_t[]){4}, &lin);
  nn_check("linear half_pixel 2x", y, TVK_FLOAT32, 1, (int64_t[]){4}, want, 0, 1e-6);
  tvk_release(y), tvk_release(t2);
  /* cubic a = -0.5, asymmetric 3x on g(i) = i^2 - 2i: exact where all four taps
   * are inside (output o with 1 <= floor(o / 3) <= n - 3) */
  double g[10], gr[30];
  for (int i = 0; i < 10; i++) g[i] = i * i - 2 * i;
  tvk_tensor *tg = nn_tensor(TVK_FLOAT64, 1, (int64_t[]){10}, g);
  tvk_resize_options cub = {
      .mode = TVK_RESIZE_CUBIC, .coord = TVK_RESIZE_ASYMMETRIC, .cubic_a = -0.5};
  y = tvk_resize(tg, 1, (int[]){0}, (int64_t[]){30}, &cub);
  double *got = nn_fetch(y);
  for (int o = 0; got && o < 30; o++) {
    double u = o / 3.0;
    gr[o] = u * u - 2 * u;
    if (floor(u) >= 1 && floor(u) <= 7)
      nn_expect(fabs(got[o] - gr[o]) < 1e-9, "cubic keeps a quadratic at %d: %g, want %g", o,
                got[o], gr[o]);
  }
  free(got);
  tvk_release(y), tvk_release(tg);
  /* nearest upsampling of int64 repeats, and is a view: realizing it runs nothing */
  double v[6] = {7, -3, 12, 0, 5, 9};
  tvk_tensor *tv = nn_tensor(TVK_INT64, 2, (int64_t[]){2, 3}, v);
  tvk_resize_options nn_opts = {
      .mode = TVK_RESIZE_NEAREST, .coord = TVK_RESIZE_ASYMMETRIC, .nearest = TVK_RESIZE_FLOOR};
  y = tvk_resize(tv, 2, (int[]){0, 1}, (int64_t[]){6, 3 * 2}, &nn_opts);
  nn_expect_kernels("nearest upsampling is a view of the input", y, 0);
  nn_check("nearest 3x2 upsampling int64", y, TVK_INT64, 2, (int64_t[]){6, 6},
           (double[]){7, 7, -3, -3, 12, 12, 7, 7, -3, -3, 12, 12, 7, 7, -3, -3, 12, 12,
                      0, 0, 5,  5,  9,  9,  0, 0, 5,  5,  9,  9,  0, 0, 5,  5,  9,  9},
           0, 0);
  tvk_release(y);
  /* nearest 3 -> 2 (not a multiple): gathered, exact on int64 */
  y = tvk_resize(tv, 1, (int[]){1}, (int64_t[]){2}, NULL);
  /* half_pixel, round_prefer_floor: o = 0 -> 0.25 -> 0, o = 1 -> 1.75 -> 2 */
  nn_check("nearest 3 -> 2 int64", y, TVK_INT64, 2, (int64_t[]){2, 2}, (double[]){7, 12, 0, 9}, 0,
           0);
  tvk_release(y);
  nn_check_error("linear on int64", tvk_resize(tv, 1, (int[]){1}, (int64_t[]){4}, &lin),
                 TVK_ERR_DTYPE);
  nn_check_error("axis twice", tvk_resize(tv, 2, (int[]){1, -1}, (int64_t[]){4, 4}, NULL),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("size 0", tvk_resize(tv, 1, (int[]){0}, (int64_t[]){0}, NULL), TVK_ERR_SHAPE);
  tvk_release(tv), tvk_release(tx);
  nn_finish();
}

static void test_conv2d_errors(void **state) {
  (void)state;
  double z[512] = {0};
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){1, 4, 5, 5}, z);
  tvk_tensor *w = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){6, 4, 3, 3}, z);
  tvk_tensor *w3 = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){6, 3, 3, 3}, z);
  tvk_tensor *w2 = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){6, 2, 3, 3}, z);
  tvk_tensor *big = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){2, 4, 6, 3}, z);
  tvk_tensor *x3 = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){4, 5, 5}, z);
  tvk_tensor *b5 = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){5}, z);
  nn_check_error("channel mismatch", tvk_conv2d(x, w3, NULL, NULL, NULL, NULL, 1), TVK_ERR_SHAPE);
  nn_check_error("groups 2 with w's Cin 4", tvk_conv2d(x, w, NULL, NULL, NULL, NULL, 2),
                 TVK_ERR_SHAPE);
  nn_check_error("groups not dividing", tvk_conv2d(x, w2, NULL, NULL, NULL, NULL, 3),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("groups 0", tvk_conv2d(x, w, NULL, NULL, NULL, NULL, 0), TVK_ERR_INVALID_ARG);
  nn_check_error("kernel > input", tvk_conv2d(x, big, NULL, NULL, NULL, NULL, 1), TVK_ERR_SHAPE);
  nn_check_error("dilated kernel > input", tvk_conv2d(x, w, NULL, NULL, NULL, (int64_t[]){3, 1}, 1),
                 TVK_ERR_SHAPE);
  nn_check_error("x 3-D", tvk_conv2d(x3, w, NULL, NULL, NULL, NULL, 1), TVK_ERR_SHAPE);
  nn_check_error("bias shape", tvk_conv2d(x, w, b5, NULL, NULL, NULL, 1), TVK_ERR_SHAPE);
  nn_check_error("stride 0", tvk_conv2d(x, w, NULL, (int64_t[]){0, 1}, NULL, NULL, 1),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("negative pad", tvk_conv2d(x, w, NULL, NULL, (int64_t[]){0, -1, 0, 0}, NULL, 1),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("NULL w", tvk_conv2d(x, NULL, NULL, NULL, NULL, NULL, 1), TVK_ERR_INVALID_ARG);
  /* padding makes a kernel fit that would not fit without it */
  tvk_tensor *y = tvk_conv2d(x, big, NULL, NULL, (int64_t[]){1, 0, 0, 0}, NULL, 1);
  nn_expect(tvk_status_of(y) == TVK_OK && tvk_shape(y)[2] == 1 && tvk_shape(y)[3] == 3,
            "padded kernel that fits: %s", tvk_error_of(y));
  nn_finish();
}

/* ---------------------------------------------------------------- pools */

/* max (avg = false) or average pool of x (B, H, W) by the definition; padding
 * is -inf / the dtype's lowest for max, 0 (counted) for avg. */
static double *pool_ref(const double *x, int64_t B, int64_t H, int64_t W, const int64_t k[2],
                        const int64_t s[2], const int64_t p[4], bool avg, int64_t *Ho, int64_t *Wo,
                        double lowest) {
  *Ho = (H + p[0] + p[1] - k[0]) / s[0] + 1, *Wo = (W + p[2] + p[3] - k[1]) / s[1] + 1;
  double *r = malloc((size_t)(B * *Ho * *Wo) * sizeof *r);
  for (int64_t c = 0; c < B; c++)
    for (int64_t i = 0; i < *Ho; i++)
      for (int64_t j = 0; j < *Wo; j++) {
        double acc = avg ? 0 : lowest;
        for (int64_t a = 0; a < k[0]; a++)
          for (int64_t b = 0; b < k[1]; b++) {
            int64_t y = i * s[0] + a - p[0], z = j * s[1] + b - p[2];
            double v =
                (y < 0 || y >= H || z < 0 || z >= W) ? (avg ? 0 : lowest) : x[(c * H + y) * W + z];
            acc = avg ? acc + v : fmax(acc, v);
          }
        r[(c * *Ho + i) * *Wo + j] = avg ? acc / (double)(k[0] * k[1]) : acc;
      }
  return r;
}

static void check_pool(const char *what, tvk_dtype dt, int nd, const int64_t *xs,
                       const int64_t k[2], const int64_t *s, const int64_t *p) {
  static const int64_t zero[4] = {0, 0, 0, 0};
  const int64_t *ss = s ? s : k, *pp = p ? p : zero;
  int64_t H = xs[nd - 2], W = xs[nd - 1], B = nn_numel(nd - 2, xs), Ho, Wo;
  double *x = dt == TVK_FLOAT32 ? f32_vals(B * H * W, -2, 2) : nn_rand_ints(B * H * W, -100, 100);
  double lowest = dt == TVK_FLOAT32 ? -INFINITY : -2147483648.0;
  tvk_tensor *tx = nn_tensor(dt, nd, xs, x);
  int64_t os[TVK_MAX_DIMS];
  memcpy(os, xs, (size_t)nd * sizeof *os);
  char name[128];
  double *rmax = pool_ref(x, B, H, W, k, ss, pp, false, &Ho, &Wo, lowest);
  os[nd - 2] = Ho, os[nd - 1] = Wo;
  tvk_tensor *m = tvk_max_pool2d(tx, k, s, p), *a = tvk_avg_pool2d(tx, k, s, p);
  if (!strcmp(what, "(2, 3, 7, 9) k (3, 2) s (2, 3) pad")) {
    nn_expect_kernels("max_pool2d (2, 3, 7, 9) k (3, 2) s (2, 3) pad (1, 1, 0, 1)", m, 1);
    nn_expect_kernels("avg_pool2d (2, 3, 7, 9) k (3, 2) s (2, 3) pad (1, 1, 0, 1)", a, 1);
  }
  snprintf(name, sizeof name, "max_pool2d %s", what);
  nn_check(name, m, dt, nd, os, rmax, 0, 0); /* exact */
  double *ravg = pool_ref(x, B, H, W, k, ss, pp, true, &Ho, &Wo, lowest);
  snprintf(name, sizeof name, "avg_pool2d %s", what);
  /* a float32 sum of kh*kw values up to 2 in size, then one division */
  nn_check(name, a, TVK_FLOAT32, nd, os, ravg, EPS32, (double)(k[0] * k[1]) * EPS32 * 2);
  free(x), free(rmax), free(ravg);
}

static void test_pools(void **state) {
  (void)state;
  int64_t s4[4] = {2, 3, 7, 9}, s2[2] = {5, 8}, s3[3] = {1, 6, 6};
  check_pool("(2, 3, 7, 9) k (2, 2)", TVK_FLOAT32, 4, s4, (int64_t[]){2, 2}, NULL, NULL);
  check_pool("(2, 3, 7, 9) k (3, 2) s (2, 3) pad", TVK_FLOAT32, 4, s4, (int64_t[]){3, 2},
             (int64_t[]){2, 3}, (int64_t[]){1, 1, 0, 1});
  check_pool("(2, 3, 7, 9) k (3, 3) s (1, 2)", TVK_FLOAT32, 4, s4, (int64_t[]){3, 3},
             (int64_t[]){1, 2}, NULL);
  check_pool("(5, 8) k (2, 3) s (3, 4) pad", TVK_FLOAT32, 2, s2, (int64_t[]){2, 3},
             (int64_t[]){3, 4}, (int64_t[]){0, 2, 1, 0});
  check_pool("(1, 6, 6) k (1, 1)", TVK_FLOAT32, 3, s3, (int64_t[]){1, 1}, NULL, NULL);
  check_pool("(1, 6, 6) k = input", TVK_FLOAT32, 3, s3, (int64_t[]){6, 6}, NULL, NULL);
  check_pool("int32 (1, 6, 6) k (3, 3) s (2, 2) pad", TVK_INT32, 3, s3, (int64_t[]){3, 3},
             (int64_t[]){2, 2}, (int64_t[]){1, 1, 1, 1});
  nn_finish();
}

/* max_pool2d_dilated against its loop: taps dilation apart, padding the
 * lowest value (ints too). */
static void check_dilated(const char *what, tvk_dtype dt, int64_t H, int64_t W, const int64_t k[2],
                          const int64_t s[2], const int64_t p[4], const int64_t d[2]) {
  int64_t B = 2, Ho = (H + p[0] + p[1] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
  int64_t Wo = (W + p[2] + p[3] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  double *x = dt == TVK_FLOAT32 ? f32_vals(B * H * W, -2, 2) : nn_rand_ints(B * H * W, -100, 100);
  double *ref = malloc(sizeof(double) * (size_t)(B * Ho * Wo));
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < Ho; i++)
      for (int64_t j = 0; j < Wo; j++) {
        double m = -INFINITY;
        for (int64_t a = 0; a < k[0]; a++)
          for (int64_t c = 0; c < k[1]; c++) {
            int64_t y = i * s[0] + a * d[0] - p[0], z = j * s[1] + c * d[1] - p[2];
            if (y >= 0 && y < H && z >= 0 && z < W) m = fmax(m, x[(b * H + y) * W + z]);
          }
        ref[(b * Ho + i) * Wo + j] = m;
      }
  int64_t xs[3] = {B, H, W}, os[3] = {B, Ho, Wo};
  tvk_tensor *tx = nn_tensor(dt, 3, xs, x);
  nn_check(what, tvk_max_pool2d_dilated(tx, k, s, p, d), dt, 3, os, ref, 0, 0);
  free(x), free(ref);
}

static void test_pool_dilated(void **state) {
  (void)state;
  check_dilated("dilated max (2, 3)", TVK_FLOAT32, 9, 11, (int64_t[]){3, 2}, (int64_t[]){1, 2},
                (int64_t[]){0, 0, 0, 0}, (int64_t[]){2, 3});
  check_dilated("dilated max, padded int32", TVK_INT32, 8, 7, (int64_t[]){2, 3}, (int64_t[]){2, 1},
                (int64_t[]){1, 2, 2, 1}, (int64_t[]){3, 2});
  nn_finish();
}

static void test_pool_errors(void **state) {
  (void)state;
  double z[64] = {0};
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){2, 4, 5}, z);
  tvk_tensor *v = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){5}, z);
  nn_check_error("max 1-D", tvk_max_pool2d(v, (int64_t[]){2, 2}, NULL, NULL), TVK_ERR_SHAPE);
  nn_check_error("avg kernel > input", tvk_avg_pool2d(x, (int64_t[]){5, 2}, NULL, NULL),
                 TVK_ERR_SHAPE);
  nn_check_error("max kernel 0", tvk_max_pool2d(x, (int64_t[]){0, 2}, NULL, NULL),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("max NULL kernel", tvk_max_pool2d(x, NULL, NULL, NULL), TVK_ERR_INVALID_ARG);
  nn_check_error("avg stride -1", tvk_avg_pool2d(x, (int64_t[]){2, 2}, (int64_t[]){-1, 1}, NULL),
                 TVK_ERR_INVALID_ARG);
  nn_expect(tvk_avg_pool2d(NULL, (int64_t[]){2, 2}, NULL, NULL) == NULL,
            "avg_pool2d(NULL) is NULL");
  nn_finish();
}

/* Window arguments near 2^62: every size is checked without overflow (the
 * sanitizer build aborts on a signed overflow), the error names the op the
 * user called and the argument, and a huge stride is a valid call. */
static bool names(tvk_tensor *t, const char *op, const char *arg) {
  const char *m = tvk_error_of(t);
  return strncmp(m, op, strlen(op)) == 0 && m[strlen(op)] == ':' && strstr(m, arg) != NULL;
}

static void test_window_huge_args(void **state) {
  (void)state;
  const int64_t big = (int64_t)1 << 62;
  double z[512] = {0};
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){1, 2, 5, 6}, z);
  tvk_tensor *w = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, 2, 3, 2}, z);
  struct {
    const char *what, *op, *arg;
    tvk_tensor *t;
  } cases[] = {
      {"conv2d padding 2^62 + 2^62", "conv2d", "padding",
       tvk_conv2d(x, w, NULL, NULL, (int64_t[]){big, big, 0, 0}, NULL, 1)},
      {"conv2d dilation 2^62", "conv2d", "dilation",
       tvk_conv2d(x, w, NULL, NULL, NULL, (int64_t[]){big, 1}, 1)},
      {"conv2d padding 2^62 on W", "conv2d", "padding",
       tvk_conv2d(x, w, NULL, NULL, (int64_t[]){0, 0, big, 3}, NULL, 1)},
      {"max_pool2d padding 2^62", "max_pool2d", "padding",
       tvk_max_pool2d(x, (int64_t[]){2, 2}, NULL, (int64_t[]){big, big, 0, 0})},
      {"avg_pool2d kernel 2^62", "avg_pool2d", "kernel",
       tvk_avg_pool2d(x, (int64_t[]){big, 2}, NULL, NULL)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nn_expect(tvk_status_of(cases[i].t) == TVK_ERR_SHAPE, "%s: status %s (%s)", cases[i].what,
              tvk_status_name(tvk_status_of(cases[i].t)), tvk_error_of(cases[i].t));
    nn_expect(names(cases[i].t, cases[i].op, cases[i].arg), "%s: message '%s' should name %s's %s",
              cases[i].what, tvk_error_of(cases[i].t), cases[i].op, cases[i].arg);
  }
  /* the context still works: a stride of 2^62 gives one window per dim */
  check_conv("stride 2^62", (ConvCase){1, 2, 5, 6, 3, 3, 2, {big, big}, ZERO4, ONE2, 1, true});
  check_conv("stride 2^62, dilation 2",
             (ConvCase){1, 2, 7, 6, 2, 3, 2, {big, big}, {1, 0, 0, 1}, {2, 3}, 1, false});
  int64_t s3[3] = {2, 5, 6};
  check_pool("max (2, 5, 6) k (2, 3) s 2^62", TVK_FLOAT32, 3, s3, (int64_t[]){2, 3},
             (int64_t[]){big, big}, NULL);
  nn_finish();
}

/* ---------------------------------------------------------------- attention */

/* softmax(q k^T / sqrt(E) + mask) v for q (B, L, E), k (B, S, E), v (B, S, Ev);
 * mask (B, L, S) as allowed (bool) or added (float), either may be NULL;
 * causal keeps j <= i. */
static double *attn_ref(const double *q, const double *k, const double *v, const double *bmask,
                        const double *fmask, bool causal, int64_t B, int64_t L, int64_t S,
                        int64_t E, int64_t Ev) {
  double *out = malloc((size_t)(B * L * Ev) * sizeof *out), *sc = malloc((size_t)S * sizeof *sc);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < L; i++) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < S; j++) {
        double s = 0;
        for (int64_t e = 0; e < E; e++) s += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
        s /= sqrt((double)E);
        if (fmask) s += fmask[(b * L + i) * S + j];
        if (bmask && !bmask[(b * L + i) * S + j]) s = -INFINITY;
        if (causal && j > i) s = -INFINITY;
        sc[j] = s, mx = fmax(mx, s);
      }
      for (int64_t j = 0; j < S; j++) sum += sc[j] = exp(sc[j] - mx);
      for (int64_t e = 0; e < Ev; e++) {
        double o = 0;
        for (int64_t j = 0; j < S; j++) o += sc[j] / sum * v[(b * S + j) * Ev + e];
        out[(b * L + i) * Ev + e] = o;
      }
    }
  free(sc);
  return out;
}

/* Error bound: the scores carry ~(E + 4) roundings relative to |q||k| <= E
 * (values in [-1, 1]), exp adds 6e-8 * |x| and the softmax a few roundings,
 * the final sum S more; all relative to max |v| <= 1. */
static double attn_tol(int64_t E, int64_t S) { return (double)(2 * E + S + 12) * EPS32; }

static void test_attention(void **state) {
  (void)state;
  const int64_t H = 2, B = 3 * H, L = 4, S = 6, E = 5, Ev = 3;
  double *q = f32_vals(B * L * E, -1, 1), *k = f32_vals(B * S * E, -1, 1),
         *v = f32_vals(B * S * Ev, -1, 1);
  tvk_tensor *tq = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, H, L, E}, q);
  tvk_tensor *tk = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, H, S, E}, k);
  tvk_tensor *tv = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, H, S, Ev}, v);
  const int64_t os[4] = {3, H, L, Ev};
  double tol = attn_tol(E, S);

  double *ref = attn_ref(q, k, v, NULL, NULL, false, B, L, S, E, Ev);
  tvk_tensor *y = tvk_scaled_dot_product_attention(tq, tk, tv, NULL, false);
  nn_expect_kernels("attention (3, 2, 4, 5) x (3, 2, 6, 5)", y, 5);
  nn_check("no mask", y, TVK_FLOAT32, 4, os, ref, 0, tol);
  free(ref);

  /* bool mask (L, S) broadcast over the batch; every row keeps one position */
  double bm[4 * 6], *bfull = malloc((size_t)(B * L * S) * sizeof *bfull);
  for (int i = 0; i < L * S; i++) bm[i] = nn_uniform(0, 1) < 0.6 || i % S == i / S;
  for (int64_t b = 0; b < B; b++) memcpy(bfull + b * L * S, bm, sizeof bm);
  ref = attn_ref(q, k, v, bfull, NULL, false, B, L, S, E, Ev);
  tvk_tensor *tm = nn_tensor(TVK_BOOL, 2, (int64_t[]){L, S}, bm);
  nn_check("bool mask", tvk_scaled_dot_product_attention(tq, tk, tv, tm, false), TVK_FLOAT32, 4, os,
           ref, 0, tol);
  free(ref);

  /* float mask (3, 1, L, S): per batch, broadcast over heads */
  double *fm = f32_vals(3 * L * S, -2, 2), *ffull = malloc((size_t)(B * L * S) * sizeof *ffull);
  for (int64_t b = 0; b < B; b++)
    memcpy(ffull + b * L * S, fm + (b / H) * L * S, (size_t)(L * S) * sizeof *fm);
  ref = attn_ref(q, k, v, NULL, ffull, false, B, L, S, E, Ev);
  tvk_tensor *tf = nn_tensor(TVK_FLOAT32, 4, (int64_t[]){3, 1, L, S}, fm);
  nn_check("float mask", tvk_scaled_dot_product_attention(tq, tk, tv, tf, false), TVK_FLOAT32, 4,
           os, ref, 0, tol + 4 * EPS32);
  free(ref);

  /* causal, L < S, and with the bool mask too */
  ref = attn_ref(q, k, v, NULL, NULL, true, B, L, S, E, Ev);
  tvk_tensor *yc = tvk_scaled_dot_product_attention(tq, tk, tv, NULL, true);
  nn_expect_kernels("causal attention (3, 2, 4, 5) x (3, 2, 6, 5)", yc, 5);
  nn_check("causal L < S", yc, TVK_FLOAT32, 4, os, ref, 0, tol);
  free(ref);
  ref = attn_ref(q, k, v, bfull, NULL, true, B, L, S, E, Ev);
  nn_check("causal and bool mask", tvk_scaled_dot_product_attention(tq, tk, tv, tm, true),
           TVK_FLOAT32, 4, os, ref, 0, tol);
  free(ref);

  /* causal, L > S: q from k's data (L' = 6), k and v the first 4 rows of q's */
  ref = attn_ref(k, q, q, NULL, NULL, true, B, S, L, E, E);
  tvk_tensor *yl = tvk_scaled_dot_product_attention(tk, tq, tq, NULL, true);
  nn_check("causal L > S", yl, TVK_FLOAT32, 4, (int64_t[]){3, H, S, E}, ref, 0, attn_tol(E, L));
  free(ref);
  free(q), free(k), free(v), free(bfull), free(fm), free(ffull);
  nn_finish();
}

/* q (H, L, E) against k, v shared by every head (1, S, E): batch dims broadcast */
static void test_attention_broadcast(void **state) {
  (void)state;
  const int64_t H = 3, L = 5, S = 3, E = 4, Ev = 2;
  double *q = f32_vals(H * L * E, -1, 1), *k = f32_vals(S * E, -1, 1), *v = f32_vals(S * Ev, -1, 1);
  double *kf = malloc((size_t)(H * S * E) * sizeof *kf),
         *vf = malloc((size_t)(H * S * Ev) * sizeof *vf);
  for (int64_t h = 0; h < H; h++) {
    memcpy(kf + h * S * E, k, (size_t)(S * E) * sizeof *k);
    memcpy(vf + h * S * Ev, v, (size_t)(S * Ev) * sizeof *v);
  }
  double *ref = attn_ref(q, kf, vf, NULL, NULL, false, H, L, S, E, Ev);
  tvk_tensor *tq = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){H, L, E}, q);
  tvk_tensor *tk = nn_tensor(TVK_FLOAT32, 3, (int64_t[]){1, S, E}, k);
  tvk_tensor *tv = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){S, Ev}, v);
  nn_check("broadcast k, v", tvk_scaled_dot_product_attention(tq, tk, tv, NULL, false), TVK_FLOAT32,
           3, (int64_t[]){H, L, Ev}, ref, 0, attn_tol(E, S));
  /* errors */
  tvk_tensor *k5 = tvk_reshape(tq, 3, (int64_t[]){H, E, L});
  nn_check_error("E differs", tvk_scaled_dot_product_attention(tq, k5, tv, NULL, false),
                 TVK_ERR_SHAPE);
  nn_check_error("S differs", tvk_scaled_dot_product_attention(tq, tk, tq, NULL, false),
                 TVK_ERR_SHAPE);
  tvk_tensor *bad_mask = nn_tensor(TVK_BOOL, 2, (int64_t[]){L, 2}, q);
  nn_check_error("mask shape", tvk_scaled_dot_product_attention(tq, tk, tv, bad_mask, false),
                 TVK_ERR_SHAPE);
  nn_check_error("1-D q",
                 tvk_scaled_dot_product_attention(tvk_reshape(tq, 1, (int64_t[]){H * L * E}), tk,
                                                  tv, NULL, false),
                 TVK_ERR_SHAPE);
  nn_check_error("NULL v", tvk_scaled_dot_product_attention(tq, tk, NULL, NULL, false),
                 TVK_ERR_INVALID_ARG);
  free(q), free(k), free(v), free(kf), free(vf), free(ref);
  nn_finish();
}

const struct CMUnitTest nn_linalg_tests[] = {
    NN_TEST(test_matmul_vectors),
    NN_TEST(test_matmul_2d),
    NN_TEST(test_matmul_batched),
    NN_TEST(test_matmul_dtypes),
    NN_TEST(test_matmul_errors),
    NN_TEST(test_linear),
    NN_TEST(test_matmul_bias_relu),
    NN_TEST(test_matmul_epilogue_selects),
    NN_TEST(test_matmul_fused),
    NN_TEST(test_conv2d_basic),
    NN_TEST(test_conv2d_stride_pad_dilation),
    NN_TEST(test_conv2d_groups),
    NN_TEST(test_conv2d_window_sweep),
    NN_TEST(test_conv2d_errors),
    NN_TEST(test_conv_transpose2d),
    NN_TEST(test_conv_transpose2d_errors),
    NN_TEST(test_resize),
    NN_TEST(test_pools),
    NN_TEST(test_pool_dilated),
    NN_TEST(test_pool_errors),
    NN_TEST(test_window_huge_args),
    NN_TEST(test_attention),
    NN_TEST(test_attention_broadcast),
};
const size_t nn_linalg_count = sizeof nn_linalg_tests / sizeof nn_linalg_tests[0];
