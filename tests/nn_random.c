/* nn group "random": tvk_rand, tvk_randn and tvk_dropout.
 *
 * The generator is checked bit for bit against a Threefry-2x32-20 written
 * here in plain C (itself checked against Random123's known-answer vectors):
 * the bits are read back through the public API, since rand's float64 values
 * are k * 2^-53 with k = (x0 >> 5) << 26 | x1 >> 6 (53 of the 64 bits) and its
 * float32 values k * 2^-24 with k = x0 >> 8. Statistics are checked within 5
 * standard errors on 100,000 draws. */
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

/* ---------------------------------------------------------------- reference */

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Threefry-2x32 with 20 rounds, as Random123's threefry2x32_R(20, ctr, key). */
static void ref_threefry(const uint32_t ctr[2], const uint32_t key[2], uint32_t out[2]) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  uint32_t x0 = ctr[0] + ks[0], x1 = ctr[1] + ks[1];
  for (int r = 0; r < 20; r++) {
    x0 += x1;
    x1 = rotl32(x1, rot[r % 8]) ^ x0;
    if (r % 4 == 3) {
      uint32_t s = (uint32_t)(r / 4 + 1);
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + s;
    }
  }
  out[0] = x0, out[1] = x1;
}

/* The words tvk uses for element i, stream s (docs/ops_index.md). */
static void ref_bits(uint64_t seed, int64_t i, uint32_t s, uint32_t out[2]) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t ctr[2] = {(uint32_t)i, s << 31};
  ref_threefry(ctr, key, out);
}

static double ref_u53(const uint32_t w[2]) {
  return ldexp((double)(w[0] >> 5) * 0x1p26 + (double)(w[1] >> 6), -53);
}

/* Box-Muller as tvk computes it, in double. */
static double ref_normal(uint64_t seed, int64_t i, bool f64) {
  uint32_t w[2], v[2];
  ref_bits(seed, i, 0, w);
  double u1, u2;
  if (f64) {
    ref_bits(seed, i, 1, v);
    u1 = ref_u53(w), u2 = ref_u53(v);
  } else {
    u1 = ldexp(w[0] >> 8, -24), u2 = ldexp(w[1] >> 8, -24);
  }
  /* float32 rounds the angle: 2 pi as a float, times u2, rounded */
  double angle = f64 ? 6.283185307179586 * u2 : (double)((float)6.283185307179586 * (float)u2);
  return sqrt(-2 * log(1 - u1)) * cos(angle);
}

static const uint64_t seeds[] = {0, 1, 0x123456789abcdef0ULL, UINT64_MAX};
#define NSEEDS (sizeof seeds / sizeof seeds[0])

/* Random123's known answers for threefry2x32_20 (kat_vectors): counter, key, result. */
static void test_threefry_kat(void **state) {
  (void)state;
  static const uint32_t kat[3][6] = {
      {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x6b200159, 0x99ba4efe},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xc4923a9c, 0x483df7a0},
  };
  for (int k = 0; k < 3; k++) {
    uint32_t out[2];
    ref_threefry(kat[k], kat[k] + 2, out);
    nn_expect(out[0] == kat[k][4] && out[1] == kat[k][5],
              "reference threefry vector %d: got %08x %08x, expected %08x %08x", k, out[0], out[1],
              kat[k][4], kat[k][5]);
  }
  nn_finish();
}

/* ---------------------------------------------------------------- bits */

/* Fetches rand(dt) of shape (3, 37) and compares k = u * 2^m with the reference
 * bits: float64 both words' top bits, float32/16/bf16 the top m bits of x0. */
static void check_bits(uint64_t seed, tvk_dtype dt, int m) {
  int64_t shape[2] = {3, 37}, n = 3 * 37;
  tvk_tensor *t = tvk_rand(nn.ctx, dt, 2, shape, seed);
  double *got = nn_fetch(t);
  if (!nn_expect(got != NULL, "rand %s seed %llx: fetch", tvk_dtype_name(dt),
                 (unsigned long long)seed))
    return;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t w[2];
    ref_bits(seed, i, 0, w);
    double want = m == 53 ? ref_u53(w) : ldexp(w[0] >> (32 - m), -m);
    if (got[i] != want && bad++ == 0)
      nn_expect(false,
                "rand %s seed %llx element %lld: got %.17g (k %.0f), expected %.17g (k %.0f)",
                tvk_dtype_name(dt), (unsigned long long)seed, (long long)i, got[i],
                ldexp(got[i], m), want, ldexp(want, m));
  }
  nn_expect(bad == 0, "rand %s seed %llx: %lld of %lld differ from the reference bits",
            tvk_dtype_name(dt), (unsigned long long)seed, (long long)bad, (long long)n);
  free(got);
  tvk_release(t);
}

static void test_rand_bits(void **state) {
  (void)state;
  for (size_t s = 0; s < NSEEDS; s++) {
    check_bits(seeds[s], TVK_FLOAT64, 53);
    check_bits(seeds[s], TVK_FLOAT32, 24);
  }
  check_bits(seeds[2], TVK_FLOAT16, 11);
  check_bits(seeds[2], TVK_BFLOAT16, 8);
  nn_finish();
}

/* ---------------------------------------------------------------- statistics */

#define NDRAW 100000

/* Mean and variance of n doubles. */
static void moments(const double *v, int64_t n, double *mean, double *var) {
  double s = 0, q = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
  *var = q / (double)(n - 1);
}

static void test_rand_uniform(void **state) {
  (void)state;
  int64_t shape[2] = {100, NDRAW / 100};
  tvk_dtype dts[] = {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT16, TVK_BFLOAT16};
  for (int k = 0; k < 4; k++) {
    tvk_tensor *t = tvk_rand(nn.ctx, dts[k], 2, shape, 42 + (uint64_t)k);
    double *v = nn_fetch(t);
    if (!nn_expect(v != NULL, "rand %s: fetch", tvk_dtype_name(dts[k]))) continue;
    double lo = 1, hi = 0, mean, var;
    for (int64_t i = 0; i < NDRAW; i++) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    moments(v, NDRAW, &mean, &var);
    nn_expect(lo >= 0 && hi < 1, "rand %s: values in [%g, %g], expected [0, 1)",
              tvk_dtype_name(dts[k]), lo, hi);
    /* U[0, 1): sd of the mean sqrt(1/12 / N); of the variance sqrt((1/80 - 1/144) / N).
     * The grid (2^-8 for bfloat16) shifts the mean by half a step: allowed. */
    double step = dts[k] == TVK_BFLOAT16 ? 0x1p-8 : dts[k] == TVK_FLOAT16 ? 0x1p-11 : 0;
    double se_m = sqrt(1.0 / 12 / NDRAW), se_v = sqrt((1.0 / 80 - 1.0 / 144) / NDRAW);
    nn_expect(fabs(mean - 0.5 + step / 2) < 5 * se_m, "rand %s: mean %.6f, expected 0.5 +- %.6f",
              tvk_dtype_name(dts[k]), mean, 5 * se_m);
    nn_expect(fabs(var - 1.0 / 12) < 5 * se_v + step * step / 12,
              "rand %s: variance %.6f, expected %.6f +- %.6f", tvk_dtype_name(dts[k]), var,
              1.0 / 12, 5 * se_v);
    free(v);
    tvk_release(t);
  }
  nn_finish();
}

static void test_randn_normal(void **state) {
  (void)state;
  int64_t shape[1] = {NDRAW};
  tvk_tensor *t = tvk_randn(nn.ctx, TVK_FLOAT32, 1, shape, 7);
  double *v = nn_fetch(t);
  if (nn_expect(v != NULL, "randn: fetch")) {
    double mean, var, se_m = sqrt(1.0 / NDRAW), se_v = sqrt(2.0 / NDRAW);
    moments(v, NDRAW, &mean, &var);
    nn_expect(fabs(mean) < 5 * se_m, "randn: mean %.5f, expected 0 +- %.5f", mean, 5 * se_m);
    nn_expect(fabs(var - 1) < 5 * se_v, "randn: variance %.5f, expected 1 +- %.5f", var, 5 * se_v);
    bool finite = true;
    for (int64_t i = 0; i < NDRAW; i++) finite = finite && isfinite(v[i]);
    nn_expect(finite, "randn: a value is not finite");
  }
  free(v);
  nn_finish();
}

/* randn against Box-Muller of the reference bits. float32: |z| <= 5.8 and the
 * reference rounds the angle 2 pi u2 as float32 does, so what is left is
 * float32 log, sqrt and cos, a few ulps each: 1e-5 absolute. float64: the same at 1e-13.
 * float16/bfloat16 round the float32 value once: half an ulp, 2^-11 (2^-8) relative. */
static void test_randn_values(void **state) {
  (void)state;
  int64_t shape[3] = {2, 3, 41}, n = 2 * 3 * 41;
  struct {
    tvk_dtype dt;
    double rtol, atol;
  } cases[] = {{TVK_FLOAT32, 0, 1e-5},
               {TVK_FLOAT64, 0, 1e-13},
               {TVK_FLOAT16, 0x1p-11, 1e-5},
               {TVK_BFLOAT16, 0x1p-8, 1e-5}};
  double *ref = malloc((size_t)n * sizeof *ref);
  for (int c = 0; c < 4; c++) {
    for (size_t s = 0; s < NSEEDS; s += 2) {
      for (int64_t i = 0; i < n; i++) ref[i] = ref_normal(seeds[s], i, cases[c].dt == TVK_FLOAT64);
      tvk_tensor *t = tvk_randn(nn.ctx, cases[c].dt, 3, shape, seeds[s]);
      nn_check("randn", t, cases[c].dt, 3, shape, ref, cases[c].rtol, cases[c].atol);
      tvk_release(t);
    }
  }
  free(ref);
  nn_finish();
}

/* ---------------------------------------------------------------- devices, seeds */

/* The same seed gives the same bits on the other device, when there is one
 * (tvk.h): rand, randn and dropout's masks (dropout of ones: the kept
 * elements are 1 / (1 - p), the others 0), every float dtype, a small shape
 * and 10^6 + 3 elements. randn computes with + - * and sqrt only, which both
 * devices round correctly (before, its log and cos were each device's own,
 * and 37% of 10^6 float32 values differed). */
static void test_rand_cross_device(void **state) {
  (void)state;
  const char *other = strcmp(nn.device, "CPU") ? "CPU" : "VK";
  tvk_ctx *oc = NULL;
  if (tvk_ctx_create(other, &oc) != TVK_OK) {
    const char *req = getenv("TVK_REQUIRE_VK"); /* set in CI, which has a Vulkan device */
    if (req && *req && strcmp(req, "0")) fail_msg("TVK_REQUIRE_VK, but no %s device", other);
    printf("  no %s device: nothing to compare with\n", other);
    skip(); /* reported as skipped, not passed */
  }
  static const char *const gen_name[3] = {"rand", "randn", "dropout"};
  int64_t shapes[2][2] = {{5, 203}, {1, 1000003}};
  tvk_dtype dts[] = {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT16, TVK_BFLOAT16};
  for (int k = 0; k < 4; k++) {
    for (int g = 0; g < 3; g++) {
      for (int sh = 0; sh < 2; sh++) {
        const int64_t *shape = shapes[sh];
        int64_t n = shape[0] * shape[1];
        tvk_tensor *a, *b;
        if (g == 2) {
          a = tvk_dropout(tvk_full(nn.ctx, dts[k], 2, shape, 1), 0.3, true, 99);
          b = tvk_dropout(tvk_full(oc, dts[k], 2, shape, 1), 0.3, true, 99);
        } else {
          tvk_tensor *(*fn)(tvk_ctx *, tvk_dtype, int, const int64_t *, uint64_t) =
              g ? tvk_randn : tvk_rand;
          a = fn(nn.ctx, dts[k], 2, shape, 99), b = fn(oc, dts[k], 2, shape, 99);
        }
        size_t es = tvk_dtype_size(dts[k]), nb = (size_t)n * es;
        unsigned char *ha = malloc(nb), *hb = malloc(nb);
        tvk_status sa = tvk_to_host(a, ha, nb), sb = tvk_to_host(b, hb, nb);
        if (nn_expect(sa == TVK_OK && sb == TVK_OK, "cross-device fetch: %s / %s",
                      tvk_status_name(sa), tvk_status_name(sb))) {
          int64_t bad = 0, first = -1;
          for (int64_t i = 0; i < n; i++)
            if (memcmp(ha + (size_t)i * es, hb + (size_t)i * es, es) != 0 && bad++ == 0) first = i;
          nn_expect(bad == 0,
                    "%s %s (%lld elements): %lld differ in their bits between %s and %s "
                    "(first at %lld)",
                    gen_name[g], tvk_dtype_name(dts[k]), (long long)n, (long long)bad, nn.device,
                    other, (long long)first);
        }
        free(ha), free(hb);
        tvk_release(a), tvk_release(b);
      }
    }
  }
  tvk_ctx_destroy(oc);
  nn_finish();
}

static void test_rand_seeds(void **state) {
  (void)state;
  int64_t shape[1] = {1000};
  tvk_tensor *a = tvk_rand(nn.ctx, TVK_FLOAT32, 1, shape, 5);
  tvk_tensor *b = tvk_rand(nn.ctx, TVK_FLOAT32, 1, shape, 5);
  tvk_tensor *c = tvk_rand(nn.ctx, TVK_FLOAT32, 1, shape, 6);
  tvk_tensor *d = tvk_rand(nn.ctx, TVK_FLOAT32, 1, shape, 5ULL | 1ULL << 32); /* high word */
  double *va = nn_fetch(a), *vb = nn_fetch(b), *vc = nn_fetch(c), *vd = nn_fetch(d);
  if (va && vb && vc && vd) {
    int same_b = 0, same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++)
      same_b += va[i] == vb[i], same_c += va[i] == vc[i], same_d += va[i] == vd[i];
    nn_expect(same_b == 1000, "same seed: %d of 1000 equal", same_b);
    /* equal 24-bit values by chance: ~1000 * 2^-24 */
    nn_expect(same_c <= 1 && same_d <= 1, "different seeds: %d and %d of 1000 equal", same_c,
              same_d);
  }
  /* a shape is the row-major order of one sequence: (10, 100) is (1000,) reshaped */
  int64_t shape2[2] = {10, 100};
  tvk_tensor *e = tvk_rand(nn.ctx, TVK_FLOAT32, 2, shape2, 5);
  nn_check("rand (10, 100) vs (1000,)", e, TVK_FLOAT32, 2, shape2, va, 0, 0);
  /* 0-d and empty */
  uint32_t w[2];
  ref_bits(3, 0, 0, w);
  double want = ldexp(w[0] >> 8, -24);
  nn_check("rand 0-d", tvk_rand(nn.ctx, TVK_FLOAT32, 0, NULL, 3), TVK_FLOAT32, 0, NULL, &want, 0,
           0);
  int64_t empty[2] = {3, 0};
  nn_check("rand empty", tvk_rand(nn.ctx, TVK_FLOAT32, 2, empty, 3), TVK_FLOAT32, 2, empty, NULL, 0,
           0);
  nn_check("randn empty", tvk_randn(nn.ctx, TVK_FLOAT64, 2, empty, 3), TVK_FLOAT64, 2, empty, NULL,
           0, 0);
  free(va), free(vb), free(vc), free(vd);
  nn_finish();
}

static void test_rand_errors(void **state) {
  (void)state;
  int64_t shape[2] = {2, 3}, neg[2] = {2, -1};
  nn_check_error("rand int32", tvk_rand(nn.ctx, TVK_INT32, 2, shape, 0), TVK_ERR_DTYPE);
  nn_check_error("randn bool", tvk_randn(nn.ctx, TVK_BOOL, 2, shape, 0), TVK_ERR_DTYPE);
  nn_check_error("rand bad dtype", tvk_rand(nn.ctx, (tvk_dtype)99, 2, shape, 0), TVK_ERR_DTYPE);
  nn_check_error("rand negative dim", tvk_rand(nn.ctx, TVK_FLOAT32, 2, neg, 0), TVK_ERR_SHAPE);
  nn_check_error("randn NULL shape", tvk_randn(nn.ctx, TVK_FLOAT32, 2, NULL, 0),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("rand ndim 17", tvk_rand(nn.ctx, TVK_FLOAT32, 17, shape, 0), TVK_ERR_INVALID_ARG);
  nn_check_error("rand ndim -1", tvk_rand(nn.ctx, TVK_FLOAT32, -1, shape, 0), TVK_ERR_INVALID_ARG);
  int64_t huge[2] = {65536, 32768}; /* 2^31 elements */
  nn_check_error("rand 2^31 elements", tvk_rand(nn.ctx, TVK_FLOAT32, 2, huge, 0), TVK_ERR_SHAPE);
  nn_expect(tvk_rand(NULL, TVK_FLOAT32, 2, shape, 0) == NULL, "rand NULL ctx: not NULL");
  nn_expect(tvk_randn(NULL, TVK_FLOAT32, 2, shape, 0) == NULL, "randn NULL ctx: not NULL");
  nn_finish();
}

/* ---------------------------------------------------------------- dropout */

/* Training: the zero fraction is p within 5 standard errors, the kept elements
 * are exactly x * float(1 / (1 - p)) (one rounding: the device's multiply is
 * IEEE), and the mask is tvk_rand(float32, seed) >= p. */
static void test_dropout_train(void **state) {
  (void)state;
  int64_t shape[2] = {250, 400}, n = 250 * 400;
  double *xv = nn_rand_vals(n, 0.5, 2); /* no zeros in x */
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 2, shape, xv);
  const double ps[] = {0.1, 0.3, 0.5};
  for (int k = 0; k < 3; k++) {
    double p = ps[k];
    tvk_tensor *y = tvk_dropout(x, p, true, 11 + (uint64_t)k);
    tvk_tensor *u = tvk_rand(nn.ctx, TVK_FLOAT32, 2, shape, 11 + (uint64_t)k);
    double *yv = nn_fetch(y), *uv = nn_fetch(u);
    if (yv && uv) {
      int64_t zeros = 0, bad = 0;
      float scale = (float)(1 / (1 - p));
      for (int64_t i = 0; i < n; i++) {
        double want = uv[i] >= p ? (double)((float)xv[i] * scale) : 0;
        zeros += yv[i] == 0;
        if (yv[i] != want && bad++ == 0)
          nn_expect(false, "dropout p %g element %lld: got %.9g expected %.9g (rand %.9g)", p,
                    (long long)i, yv[i], want, uv[i]);
      }
      double frac = (double)zeros / (double)n, se = sqrt(p * (1 - p) / (double)n);
      nn_expect(fabs(frac - p) < 5 * se, "dropout p %g: zero fraction %.5f (+- %.5f)", p, frac,
                5 * se);
      nn_expect(bad == 0, "dropout p %g: %lld wrong elements", p, (long long)bad);
    }
    free(yv), free(uv);
    tvk_release(y), tvk_release(u);
  }
  free(xv);
  nn_finish();
}

static void test_dropout_edges(void **state) {
  (void)state;
  int64_t shape[2] = {3, 5}, n = 15;
  double *xv = nn_rand_vals(n, -2, 2), zero[15] = {0};
  for (int i = 0; i < 15; i++) xv[i] = (float)xv[i]; /* as x holds them */
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 2, shape, xv);
  nn_kernels(x);
  /* inference: x itself, no kernel; p is still checked */
  tvk_tensor *y = tvk_dropout(x, 0.5, false, 1);
  nn_expect(nn_kernels(y) == 0, "dropout inference ran a kernel");
  nn_check("dropout inference", y, TVK_FLOAT32, 2, shape, xv, 0, 0);
  tvk_tensor *z = tvk_dropout(x, 0, true, 1);
  nn_expect(nn_kernels(z) == 0, "dropout p 0 ran a kernel");
  nn_check("dropout p 0", z, TVK_FLOAT32, 2, shape, xv, 0, 0);
  nn_check("dropout p 1", tvk_dropout(x, 1, true, 1), TVK_FLOAT32, 2, shape, zero, 0, 0);
  /* float16: the kept elements are x * 2 exactly */
  tvk_tensor *h = nn_tensor(TVK_FLOAT16, 2, shape, xv);
  double *hv = nn_fetch(h), ref[15];
  tvk_tensor *u = tvk_rand(nn.ctx, TVK_FLOAT32, 2, shape, 4);
  double *uv = nn_fetch(u);
  for (int i = 0; hv && uv && i < 15; i++) ref[i] = uv[i] >= 0.5 ? 2 * hv[i] : 0;
  if (hv && uv)
    nn_check("dropout float16", tvk_dropout(h, 0.5, true, 4), TVK_FLOAT16, 2, shape, ref, 0, 0);
  /* an integer x: inference passes it through, training refuses it */
  tvk_tensor *xi = nn_tensor(TVK_INT32, 2, shape, zero);
  nn_check("dropout int inference", tvk_dropout(xi, 0.5, false, 1), TVK_INT32, 2, shape, zero, 0,
           0);
  nn_check_error("dropout int training", tvk_dropout(xi, 0.5, true, 1), TVK_ERR_DTYPE);
  nn_check_error("dropout p -0.1", tvk_dropout(x, -0.1, true, 1), TVK_ERR_INVALID_ARG);
  nn_check_error("dropout p 1.5", tvk_dropout(x, 1.5, false, 1), TVK_ERR_INVALID_ARG);
  nn_check_error("dropout p NaN", tvk_dropout(x, NAN, true, 1), TVK_ERR_INVALID_ARG);
  nn_expect(tvk_dropout(NULL, 0.5, true, 1) == NULL, "dropout NULL: not NULL (no context)");
  free(xv), free(hv), free(uv);
  nn_finish();
}

/* The whole generator and its use fuse: rand is one kernel, dropout of a
 * realized x is one kernel. */
static void test_random_kernels(void **state) {
  (void)state;
  int64_t shape[2] = {4, 33};
  double *xv = nn_rand_vals(4 * 33, -1, 1);
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 2, shape, xv);
  nn_kernels(x);
  int kr = nn_kernels(tvk_rand(nn.ctx, TVK_FLOAT32, 2, shape, 1));
  int kn = nn_kernels(tvk_randn(nn.ctx, TVK_FLOAT64, 2, shape, 1));
  int kd = nn_kernels(tvk_dropout(x, 0.2, true, 1));
  nn_expect(kr == 1 && kn == 1 && kd == 1,
            "kernels: rand %d, randn %d, dropout %d (expected 1 each)", kr, kn, kd);
  free(xv);
  nn_finish();
}

const struct CMUnitTest nn_random_tests[] = {
    NN_TEST(test_threefry_kat),  NN_TEST(test_rand_bits),      NN_TEST(test_rand_uniform),
    NN_TEST(test_randn_normal),  NN_TEST(test_randn_values),   NN_TEST(test_rand_cross_device),
    NN_TEST(test_rand_seeds),    NN_TEST(test_rand_errors),    NN_TEST(test_dropout_train),
    NN_TEST(test_dropout_edges), NN_TEST(test_random_kernels),
};
const size_t nn_random_count = sizeof nn_random_tests / sizeof nn_random_tests[0];
