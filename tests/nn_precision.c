/* Precision of long reductions (issue: float32 sums must not behave like one
 * sequential accumulator): sums, means, variances and matmul inner dimensions
 * of 10^5 to 2^25 elements, of constants, uniform, normal and offset data,
 * along every axis, against the exact sum of the same float32 inputs in
 * double. Same-sign data must keep a few 1e-7 relative error at any length;
 * a sequential float32 sum loses 1e-3 at 10^6 elements and stops at 2^24. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nn_util.h"

/* What "a few 1e-7" is here: the blocked sum's error on same-sign data (the
 * worst, constants, measured at about 4e-7 for 10^7 terms) with margin. */
#define SAME_SIGN_RTOL 6e-7

typedef enum { D_ONES, D_POINT3, D_UNIFORM, D_NORMAL, D_OFFSET } Data;

static const char *data_name(Data d) {
  static const char *const names[] = {"ones", "0.3", "uniform [0, 1)", "N(3, 1)", "1000 + [0, 1)"};
  return names[d];
}

/* n float32 values of the kind (as floats: the reference sums exactly these). */
static float *make_data(Data d, int64_t n) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    double x = 0;
    switch (d) {
    case D_ONES: x = 1; break;
    case D_POINT3: x = 0.3; break;
    case D_UNIFORM: x = nn_uniform(0, 1); break;
    case D_NORMAL: { /* Box-Muller in double */
      double u = nn_uniform(1e-12, 1), w = nn_uniform(0, 1);
      x = 3 + sqrt(-2 * log(u)) * cos(6.283185307179586 * w);
      break;
    }
    case D_OFFSET: x = 1000 + nn_uniform(0, 1); break;
    }
    v[i] = (float)x;
  }
  return v;
}

static tvk_tensor *from_floats(int nd, const int64_t *sh, const float *v) {
  return tvk_from_data(nn.ctx, TVK_FLOAT32, nd, sh, v);
}

/* One float32 result (a 0-d or 1-element tensor). */
static double scalar_of(tvk_tensor *t) {
  float out = NAN;
  tvk_status st = tvk_to_host(t, &out, sizeof out);
  nn_expect(st == TVK_OK, "to_host: %s", tvk_ctx_error(nn.ctx));
  return out;
}

static void expect_rel(const char *what, double got, double want, double rtol) {
  double rel = fabs(got - want) / fabs(want);
  nn_expect(rel <= rtol, "%s: got %.9g, exact %.9g: relative error %.3g > %.3g", what, got, want,
            rel, rtol);
}

/* Sums and means of 10^6 and 10^7 elements of every kind of data. */
static void test_long_sums(void **state) {
  (void)state;
  const int64_t sizes[] = {1000000, 10000000};
  for (size_t k = 0; k < 2; k++)
    for (Data d = D_ONES; d <= D_OFFSET; d++) {
      int64_t n = sizes[k];
      float *v = make_data(d, n);
      double exact = 0;
      for (int64_t i = 0; i < n; i++) exact += v[i];
      tvk_tensor *x = from_floats(1, &n, v);
      char what[96];
      snprintf(what, sizeof what, "sum of %lld x %s", (long long)n, data_name(d));
      expect_rel(what, scalar_of(tvk_sum(x, 0, NULL, false)), exact, SAME_SIGN_RTOL);
      snprintf(what, sizeof what, "mean of %lld x %s", (long long)n, data_name(d));
      expect_rel(what, scalar_of(tvk_mean(x, 0, NULL, false)), exact / (double)n, SAME_SIGN_RTOL);
      tvk_release(x);
      free(v);
    }
  nn_finish();
}

/* 2^25 ones: a float32 accumulator stops at 2^24; here every partial is an
 * integer below 2^24, so the sum is exact, as a sum over axis 1 of (1, 2^25)
 * and as the inner dimension of (1, 2^25) @ (2^25, 1). */
static void test_ones_past_2_24(void **state) {
  (void)state;
  const int64_t n = (int64_t)1 << 25;
  const int64_t row[2] = {1, n}, col[2] = {n, 1};
  tvk_tensor *a = tvk_full(nn.ctx, TVK_FLOAT32, 2, row, 1);
  tvk_tensor *b = tvk_full(nn.ctx, TVK_FLOAT32, 2, col, 1);
  const int ax1[1] = {1};
  double got = scalar_of(tvk_sum(a, 1, ax1, false));
  nn_expect(got == (double)n, "sum over axis 1 of (1, 2^25) ones: %.1f", got);
  got = scalar_of(tvk_sum(a, 0, NULL, false));
  nn_expect(got == (double)n, "sum of 2^25 ones: %.1f", got);
  got = scalar_of(tvk_matmul(a, b));
  nn_expect(got == (double)n, "(1, 2^25) @ (2^25, 1) of ones: %.1f", got);
  nn_finish();
}

/* Every axis of a (200, 300, 400) tensor of 0.3 and of uniform data; each
 * output is checked against its exact sum. */
static void test_sums_every_axis(void **state) {
  (void)state;
  const int64_t sh[3] = {200, 300, 400}, n = 200 * 300 * 400;
  for (Data d = D_POINT3; d <= D_UNIFORM; d++) {
    float *v = make_data(d, n);
    tvk_tensor *x = from_floats(3, sh, v);
    for (int ax = 0; ax < 3; ax++) {
      int64_t out_n = n / sh[ax];
      double *exact = calloc((size_t)out_n, sizeof *exact);
      int64_t st[3] = {sh[1] * sh[2], sh[2], 1};
      for (int64_t i = 0; i < sh[0]; i++)
        for (int64_t j = 0; j < sh[1]; j++)
          for (int64_t k = 0; k < sh[2]; k++) {
            int64_t idx[3] = {i, j, k}, o = 0, m = 1;
            for (int q = 2; q >= 0; q--)
              if (q != ax) o += idx[q] * m, m *= sh[q];
            exact[o] += v[i * st[0] + j * st[1] + k];
          }
      const int axis[1] = {ax};
      double *got = nn_fetch(tvk_sum(x, 1, axis, false));
      double worst = 0;
      for (int64_t o = 0; got && o < out_n; o++)
        worst = fmax(worst, fabs(got[o] - exact[o]) / fabs(exact[o]));
      nn_expect(got && worst <= SAME_SIGN_RTOL,
                "sum over axis %d of (200, 300, 400) x %s: worst relative error %.3g", ax,
                data_name(d), worst);
      free(got), free(exact);
    }
    tvk_release(x);
    free(v);
  }
  nn_finish();
}

/* Column sums of a (1000, 1024) matrix (a bias's gradient): on the CPU the
 * columns are upcast by 8 vectors of lanes (opt.c, rows_plan), each row's
 * run read at once; every output against its exact sum. */
static void test_column_sums(void **state) {
  (void)state;
  enum { R = 1000, C = 1024 };
  const int64_t sh[2] = {R, C};
  for (Data d = D_POINT3; d <= D_UNIFORM; d++) {
    float *v = make_data(d, (int64_t)R * C);
    double *exact = calloc(C, sizeof *exact);
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) exact[j] += v[i * C + j];
    tvk_tensor *x = from_floats(2, sh, v);
    double *got = nn_fetch(tvk_sum(x, 1, (const int[]){0}, false));
    double worst = 0;
    for (int64_t j = 0; got && j < C; j++)
      worst = fmax(worst, fabs(got[j] - exact[j]) / fabs(exact[j]));
    nn_expect(got && worst <= SAME_SIGN_RTOL,
              "column sums of (1000, 1024) x %s: worst relative error %.3g", data_name(d), worst);
    free(got), free(exact);
    tvk_release(x);
    free(v);
  }
  nn_finish();
}

/* A matmul's inner dimension: (3, 10^5) @ (10^5, 4) of positive values. */
static void test_matmul_inner(void **state) {
  (void)state;
  enum { M = 3, K = 100000, N = 4 };
  float *a = make_data(D_UNIFORM, (int64_t)M * K), *b = make_data(D_OFFSET, (int64_t)K * N);
  tvk_tensor *ta = from_floats(2, (const int64_t[]){M, K}, a);
  tvk_tensor *tb = from_floats(2, (const int64_t[]){K, N}, b);
  double *got = nn_fetch(tvk_matmul(ta, tb)), worst = 0;
  for (int i = 0; got && i < M; i++)
    for (int j = 0; j < N; j++) {
      double exact = 0;
      for (int k = 0; k < K; k++) exact += (double)a[(int64_t)i * K + k] * b[(int64_t)k * N + j];
      worst = fmax(worst, fabs(got[i * N + j] - exact) / exact);
    }
  nn_expect(got && worst <= SAME_SIGN_RTOL, "(3, 1e5) @ (1e5, 4): worst relative error %.3g",
            worst);
  free(got), free(a), free(b);
  nn_finish();
}

/* var and std of 10^6 draws of N(3, 1): the deviations are computed from a
 * mean that is right to a few 1e-7, and their squares summed the same way. */
static void test_var_std_precision(void **state) {
  (void)state;
  const int64_t n = 1000000;
  float *v = make_data(D_NORMAL, n);
  double mean = 0, ss = 0;
  for (int64_t i = 0; i < n; i++) mean += v[i];
  mean /= (double)n;
  for (int64_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
  double var = ss / (double)(n - 1);
  tvk_tensor *x = from_floats(1, &n, v);
  expect_rel("var of 10^6 draws of N(3, 1)", scalar_of(tvk_var(x, 0, NULL, false, 1)), var, 2e-6);
  expect_rel("std of 10^6 draws of N(3, 1)", scalar_of(tvk_std(x, 0, NULL, false, 1)), sqrt(var),
             1e-6);
  free(v);
  nn_finish();
}

/* Reduces longer than one kernel may run per output are split, and a length
 * with no divisor to split by (a prime) is padded with the reduce's
 * identity: sum, mean, max, min and prod over prime and awkward lengths, of
 * all-negative data (a max padded with zeros would give 0), all-positive data
 * (so would a min) and data near 1 (a product padded with zeros would be 0),
 * along an axis with rows, and 2^27 broadcast ones (more than one binding
 * holds), each against a loop in double. */
static void test_awkward_lengths(void **state) {
  (void)state;
  const int64_t lens[] = {16411, 65537, 100003, 2 * 50021};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    int64_t n = lens[k], sh[2] = {3, n};
    float *v = malloc((size_t)(3 * n) * sizeof *v);
    for (int64_t i = 0; i < 3 * n; i++) {
      double u = nn_uniform(0, 1);
      v[i] = (float)(i < n ? -1 - u : i < 2 * n ? 1 + u : 1 + (u - 0.5) * 1e-3);
    }
    v[n - 1] = -0.5f, v[n] = 0.75f; /* the extremes at the ends of rows */
    tvk_tensor *x = from_floats(2, sh, v);
    float got[3];
    const int ax[1] = {1};
    tvk_tensor *r[5] = {tvk_sum(x, 1, ax, false), tvk_mean(x, 1, ax, false),
                        tvk_max(x, 1, ax, false), tvk_min(x, 1, ax, false),
                        tvk_prod(x, 1, ax, false)};
    const char *names[5] = {"sum", "mean", "max", "min", "prod"};
    for (int op = 0; op < 5; op++) {
      nn_expect(tvk_to_host(r[op], got, sizeof got) == TVK_OK, "%s: %s", names[op],
                tvk_ctx_error(nn.ctx));
      for (int row = op == 4 ? 2 : 0; row < 3; row++) { /* products of rows 0, 1 overflow */
        const float *p = v + row * n;
        double want = op == 4 ? 1 : op >= 2 ? p[0] : 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
          double e = p[i];
          want = op < 2 ? want + e : op == 2 ? fmax(want, e) : op == 3 ? fmin(want, e) : want * e;
          mag += fabs(e);
        }
        if (op == 1) want /= (double)n, mag /= (double)n;
        double err = fabs(got[row] - want);
        bool ok = op == 2 || op == 3 ? got[row] == (float)want
                  : op == 4          ? err <= 1e-4 * fabs(want)
                                     : err <= SAME_SIGN_RTOL * mag;
        nn_expect(ok, "%s of row %d of length %lld: got %.9g, want %.9g", names[op], row,
                  (long long)n, got[row], want);
      }
      tvk_release(r[op]);
    }
    tvk_release(x);
    free(v);
  }
  const int64_t big = (int64_t)1 << 27;
  tvk_tensor *ones = tvk_full(nn.ctx, TVK_FLOAT32, 1, &big, 1);
  double got = scalar_of(tvk_sum(ones, 0, NULL, false));
  nn_expect(got == (double)big, "sum of 2^27 ones: %.1f", got);
  tvk_release(ones);
  nn_finish();
}

const struct CMUnitTest nn_precision_tests[] = {
    NN_TEST(test_long_sums),       NN_TEST(test_ones_past_2_24), NN_TEST(test_sums_every_axis),
    NN_TEST(test_column_sums),     NN_TEST(test_matmul_inner),   NN_TEST(test_var_std_precision),
    NN_TEST(test_awkward_lengths),
};
const size_t nn_precision_count = sizeof nn_precision_tests / sizeof nn_precision_tests[0];
