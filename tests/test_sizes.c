/* Symbolic sizes (tvk.h, "symbolic sizes"), an outside user's test: tvk.h
 * only, one run per device (`test_sizes CPU`, `test_sizes VK`; exit 77: no
 * such device). Variables and binding, the errors a bad call gets, and ops
 * over a symbolic dim run for several bound values against double-precision
 * loops, with the compile counts showing one program per kernel. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_suite.h"
#include "tvk.h"

typedef struct {
  const char *device;
  tvk_ctx *ctx;
} Suite;

static int setup(void **state) {
  Suite *s = *state;
  return tvk_ctx_create(s->device, &s->ctx) == TVK_OK ? 0 : -1;
}

/* A Vulkan validation message (TVK_VALIDATE=1; each is printed) fails the test. */
static int teardown(void **state) {
  Suite *s = *state;
  return api_ctx_close_checked(&s->ctx, s->device);
}

/* The context's last error contains `part`. */
static void expect_error(tvk_ctx *ctx, const char *part) {
  const char *e = tvk_ctx_error(ctx);
  if (!strstr(e, part)) fail_msg("error \"%s\" does not contain \"%s\"", e, part);
}

/* ---------------------------------------------------------------- variables */

static void test_variables(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  int64_t n = tvk_size_var(ctx, "seq", 1, 256);
  assert_true(tvk_size_is_symbolic(n));
  assert_true(n < 0);                                    /* never a valid plain size */
  assert_int_equal(tvk_size_var(ctx, "seq", 1, 256), n); /* the same variable again */
  assert_false(tvk_size_is_symbolic(12));
  char buf[64];
  tvk_size_str(n, buf, sizeof buf);
  assert_string_equal(buf, "seq");

  /* unbound: no value yet */
  assert_int_equal(tvk_size_value(ctx, n), -1);
  assert_int_equal(tvk_size_value(ctx, 7), 7);
  assert_int_equal(tvk_bind(ctx, n, 17), TVK_OK);
  assert_int_equal(tvk_size_value(ctx, n), 17);

  /* expressions, evaluated with the bound value */
  int64_t n1 = tvk_size_add(n, 1), n4 = tvk_size_mul(n, 4), nm1 = tvk_size_add(n, -1);
  assert_true(tvk_size_is_symbolic(n1) && tvk_size_is_symbolic(n4) && tvk_size_is_symbolic(nm1));
  assert_int_equal(tvk_size_value(ctx, n1), 18);
  assert_int_equal(tvk_size_value(ctx, n4), 68);
  assert_int_equal(tvk_size_value(ctx, nm1), 16);
  assert_int_equal(tvk_size_add(n, 1), n1); /* interned: the same expression, the same size */
  assert_int_equal(tvk_size_add(3, 4), 7);
  assert_int_equal(tvk_size_mul(3, 4), 12);
  tvk_size_str(n4, buf, sizeof buf);
  assert_non_null(strstr(buf, "seq"));
  assert_non_null(strstr(buf, "4"));
  /* a size that may go negative, or a negative factor, is no size */
  assert_int_equal(tvk_size_add(n, -2), -1);
  assert_int_equal(tvk_size_mul(n, -1), -1);
  assert_int_equal(tvk_size_add(INT64_MAX, 1), -1);
  assert_int_equal(tvk_size_add(-1, 5), -1); /* a failed size stays failed */
  assert_int_equal(tvk_size_add(5, -1), 4);

  /* rebinding changes the value */
  assert_int_equal(tvk_bind(ctx, n, 256), TVK_OK);
  assert_int_equal(tvk_size_value(ctx, n1), 257);
}

static void test_variable_errors(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  assert_int_equal(tvk_size_var(ctx, "seq", 0, 8), -1);
  expect_error(ctx, "[0, 8]");
  assert_int_equal(tvk_size_var(ctx, "seq", 9, 8), -1);
  expect_error(ctx, "[9, 8]");
  assert_int_equal(tvk_size_var(ctx, "seq", 1, (int64_t)1 << 31), -1);
  assert_int_equal(tvk_size_var(ctx, "", 1, 8), -1);
  expect_error(ctx, "name");
  assert_int_equal(tvk_size_var(ctx, "a b", 1, 8), -1);
  assert_int_equal(tvk_size_var(ctx, "9x", 1, 8), -1);
  assert_int_equal(tvk_size_var(ctx, "s12", 1, 8), -1); /* tvk's own launch values */
  expect_error(ctx, "s<digits>");
  assert_int_equal(tvk_size_var(ctx, NULL, 1, 8), -1);
  assert_true(tvk_size_is_symbolic(tvk_size_var(ctx, "s", 1, 8)));   /* just s is fine */
  assert_true(tvk_size_is_symbolic(tvk_size_var(ctx, "s1x", 1, 8))); /* and s1x */
  assert_int_equal(tvk_size_var(ctx, "a_very_long_variable_name_of_32b", 1, 8), -1);

  /* one range per name in a context */
  int64_t n = tvk_size_var(ctx, "len", 1, 64);
  assert_true(tvk_size_is_symbolic(n));
  assert_int_equal(tvk_size_var(ctx, "len", 1, 65), -1);
  expect_error(ctx, "already a variable of range [1, 64]");

  /* binds: in range, a variable of this context */
  assert_int_equal(tvk_bind(ctx, n, 65), TVK_ERR_SHAPE);
  expect_error(ctx, "65 for 'len' is outside its range [1, 64]");
  assert_int_equal(tvk_bind(ctx, n, 0), TVK_ERR_SHAPE);
  assert_int_equal(tvk_bind(ctx, 5, 3), TVK_ERR_INVALID_ARG);
  expect_error(ctx, "not a size variable");
  assert_int_equal(tvk_bind(ctx, tvk_size_add(n, 1), 3), TVK_ERR_INVALID_ARG);
  tvk_ctx *other = NULL;
  assert_int_equal(tvk_ctx_create("CPU", &other), TVK_OK);
  assert_int_equal(tvk_bind(other, n, 3), TVK_ERR_INVALID_ARG); /* made in ctx, not other */
  /* the same name and range in another context is that context's own variable */
  int64_t n2 = tvk_size_var(other, "len", 1, 64);
  assert_int_equal(n2, n);
  assert_int_equal(tvk_bind(other, n2, 3), TVK_OK);
  assert_int_equal(tvk_size_value(other, n), 3);
  assert_int_equal(tvk_size_value(ctx, n), -1); /* bound in other only */
  tvk_ctx_destroy(other);
  assert_int_equal(tvk_bind(NULL, n, 3), TVK_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- ops over a symbolic dim */

enum { ROWS = 64, COLS = 5 };

static float host[ROWS * COLS];

static void fill_host(void) {
  uint64_t r = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < ROWS * COLS; i++) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    host[i] = (float)((double)(r >> 11) * 0x1p-53 * 4.0 - 2.0);
  }
}

/* What compiling the context has done: code generated, read from the disk
 * cache, or compiled. After the first value of a variable, later values must
 * add nothing. */
static uint64_t builds(tvk_ctx *ctx) {
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  return st.kernels_generated + st.kernels_stored + st.kernels_compiled;
}

/* The first value (v 0) builds the kernels; every later one (value nv)
 * must build none. */
static void once_per_kernel(tvk_ctx *ctx, size_t v, int64_t nv, uint64_t *after_first) {
  if (v == 0) *after_first = builds(ctx);
  if (v > 0 && builds(ctx) != *after_first)
    fail_msg("value %lld built %llu new kernels", (long long)nv,
             (unsigned long long)(builds(ctx) - *after_first));
}

static void expect_close(const float *got, const double *want, int64_t n, double tol,
                         const char *what, int64_t bound) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("%s, n = %lld: element %lld is %.9g, want %.9g", what, (long long)bound,
               (long long)i, got[i], want[i]);
}

static const int64_t values[] = {1, 7, 33, 64, 2};

/* y = x * 2 + 1 and exp(x) - x over the first n rows of a (64, 5) buffer. */
static void test_elementwise(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  tvk_tensor *cache = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){ROWS, COLS}, host);
  int64_t n = tvk_size_var(ctx, "n", 1, ROWS);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
    int64_t nv = values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = tvk_shrink(cache, (const int64_t[][2]){{0, n}, {0, COLS}});
    assert_int_equal(tvk_status_of(x), TVK_OK);
    assert_int_equal(tvk_shape(x)[0], n);
    assert_int_equal(tvk_numel(x), nv * COLS);
    tvk_tensor *two = tvk_full(ctx, TVK_FLOAT32, 0, NULL, 2.0);
    tvk_tensor *y = tvk_add(tvk_mul(x, two), tvk_full(ctx, TVK_FLOAT32, 2, (int64_t[]){n, 1}, 1));
    tvk_tensor *z = tvk_sub(tvk_exp(x), x);
    assert_int_equal(tvk_status_of(y), TVK_OK);
    assert_int_equal(tvk_status_of(z), TVK_OK);
    assert_int_equal(tvk_shape(y)[0], n);
    float gy[ROWS * COLS], gz[ROWS * COLS];
    double wy[ROWS * COLS], wz[ROWS * COLS];
    for (int64_t i = 0; i < nv * COLS; i++) {
      wy[i] = (double)host[i] * 2 + 1;
      wz[i] = exp((double)host[i]) - host[i];
    }
    assert_int_equal(tvk_to_host(y, gy, sizeof gy), TVK_OK);
    assert_int_equal(tvk_to_host(z, gz, sizeof gz), TVK_OK);
    expect_close(gy, wy, nv * COLS, 1e-6, "x*2+1", nv);
    expect_close(gz, wz, nv * COLS, 1e-5, "exp(x)-x", nv);
    /* the same graph for every value: its schedule is made once */
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.schedules_reused, 2 * v);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(x), tvk_release(two), tvk_release(y), tvk_release(z);
  }
  tvk_release(cache);
}

/* Data of a symbolic shape, as long as the bound value says. */
static void test_from_data(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  int64_t n = tvk_size_var(ctx, "batch", 1, ROWS);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
    int64_t nv = values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){n, COLS}, host);
    tvk_tensor *b = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){COLS}, host + 3);
    tvk_tensor *y = tvk_mul(tvk_add(x, b), x); /* b broadcast over the n rows */
    float got[ROWS * COLS];
    double want[ROWS * COLS];
    for (int64_t i = 0; i < nv * COLS; i++)
      want[i] = ((double)host[i] + host[3 + i % COLS]) * host[i];
    assert_int_equal(tvk_to_host(y, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * COLS, 1e-6, "(x+b)*x", nv);
    /* data of another length is a buffer of another size: the same schedule */
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.schedules_reused, v);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(x), tvk_release(b), tvk_release(y);
  }
}

/* Sums and maxima along the symbolic axis and across it. */
static void test_reduce(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  tvk_tensor *cache = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){ROWS, COLS}, host);
  int64_t n = tvk_size_var(ctx, "n", 1, ROWS);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
    int64_t nv = values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = tvk_shrink(cache, (const int64_t[][2]){{0, n}, {0, COLS}});
    tvk_tensor *s0 = tvk_sum(x, 1, (int[]){0}, false);             /* (5,): over the n rows */
    tvk_tensor *m0 = tvk_max(x, 1, (int[]){0}, true);              /* (1, 5) */
    tvk_tensor *s1 = tvk_sum(x, 1, (int[]){1}, false);             /* (n,): each row */
    tvk_tensor *m1 = tvk_max(tvk_mul(x, x), 1, (int[]){-1}, true); /* (n, 1) */
    tvk_tensor *all = tvk_sum(x, 0, NULL, false);
    tvk_tensor *mean0 = tvk_mean(x, 1, (int[]){0}, false); /* over n: 1/n counted */
    tvk_tensor *var0 = tvk_var(x, 1, (int[]){0}, false, 1);
    assert_int_equal(tvk_ndim(s0), 1);
    assert_int_equal(tvk_shape(s0)[0], COLS);
    assert_int_equal(tvk_shape(s1)[0], n);
    assert_int_equal(tvk_shape(m1)[0], n);
    double ws0[COLS] = {0}, wm0[COLS], ws1[ROWS] = {0}, wm1[ROWS], wall = 0;
    for (int c = 0; c < COLS; c++) wm0[c] = -INFINITY;
    for (int64_t r = 0; r < nv; r++) {
      wm1[r] = -INFINITY;
      for (int c = 0; c < COLS; c++) {
        double e = host[r * COLS + c];
        ws0[c] += e, ws1[r] += e, wall += e;
        wm0[c] = fmax(wm0[c], e);
        wm1[r] = fmax(wm1[r], (double)(float)(e * e));
      }
    }
    float g[ROWS];
    assert_int_equal(tvk_to_host(s0, g, sizeof g), TVK_OK);
    expect_close(g, ws0, COLS, 1e-5, "sum over n", nv);
    assert_int_equal(tvk_to_host(m0, g, sizeof g), TVK_OK);
    expect_close(g, wm0, COLS, 0, "max over n", nv);
    assert_int_equal(tvk_to_host(s1, g, sizeof g), TVK_OK);
    expect_close(g, ws1, nv, 1e-5, "sum of each row", nv);
    assert_int_equal(tvk_to_host(m1, g, sizeof g), TVK_OK);
    expect_close(g, wm1, nv, 0, "max of each row", nv);
    assert_int_equal(tvk_to_host(all, g, sizeof g), TVK_OK);
    expect_close(g, &wall, 1, 1e-5, "sum of all", nv);
    double wmean[COLS], wvar[COLS];
    for (int c = 0; c < COLS; c++) {
      wmean[c] = ws0[c] / (double)nv;
      double ss = 0;
      for (int64_t r = 0; r < nv; r++)
        ss += (host[r * COLS + c] - wmean[c]) * (host[r * COLS + c] - wmean[c]);
      wvar[c] = nv > 1 ? ss / (double)(nv - 1) : NAN; /* correction 1: 0/0 for one row */
    }
    assert_int_equal(tvk_to_host(mean0, g, sizeof g), TVK_OK);
    expect_close(g, wmean, COLS, 1e-5, "mean over n", nv);
    assert_int_equal(tvk_to_host(var0, g, sizeof g), TVK_OK);
    if (nv > 1) expect_close(g, wvar, COLS, 1e-4, "var over n", nv);
    for (int c = 0; nv == 1 && c < COLS; c++) assert_true(isnan(g[c]));
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(x), tvk_release(s0), tvk_release(m0), tvk_release(s1), tvk_release(m1);
    tvk_release(all), tvk_release(mean0), tvk_release(var0);
  }
  tvk_release(cache);
}

/* Movement over a symbolic dim: reshape (split and merge around it),
 * permute, expand, pad, flip, contiguous. */
static void test_movement(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  tvk_tensor *cache = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){ROWS / 4, 4 * COLS}, host);
  int64_t n = tvk_size_var(ctx, "n", 1, ROWS / 4);
  for (int64_t nv = 1; nv <= ROWS / 4; nv += 5) {
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = tvk_shrink(cache, (const int64_t[][2]){{0, n}, {0, 4 * COLS}}); /* (n, 20) */
    tvk_tensor *r = tvk_reshape(x, 3, (int64_t[]){n, 4, COLS});                     /* (n, 4, 5) */
    tvk_tensor *p = tvk_permute(r, (int[]){2, 0, 1});                               /* (5, n, 4) */
    tvk_tensor *m = tvk_reshape(p, 2, (int64_t[]){COLS, -1});                       /* (5, n*4) */
    tvk_tensor *f = tvk_flip(m, 1, (int[]){1});
    tvk_tensor *pd = tvk_pad(f, (const int64_t[][2]){{1, 0}, {0, 2}}, 7.0); /* (6, n*4+2) */
    tvk_tensor *e = tvk_expand(tvk_reshape(pd, 3, (int64_t[]){1, COLS + 1, -1}), 3,
                               (int64_t[]){2, COLS + 1, -1});
    tvk_tensor *c = tvk_contiguous(e);
    assert_int_equal(tvk_status_of(c), TVK_OK);
    int64_t w = nv * 4 + 2;
    assert_int_equal(tvk_size_value(ctx, tvk_shape(c)[2]), w);
    float got[2 * (COLS + 1) * (ROWS + 2)];
    double want[2 * (COLS + 1) * (ROWS + 2)];
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < COLS + 1; i++)
        for (int64_t j = 0; j < w; j++) {
          double v = 7.0;
          if (i >= 1 && j < nv * 4) {
            int64_t jj = nv * 4 - 1 - j; /* flipped: index into (n*4) = (row, q) */
            int64_t row = jj / 4, q = jj % 4, col = i - 1;
            v = host[row * 4 * COLS + q * COLS + col];
          }
          want[(k * (COLS + 1) + i) * w + j] = v;
        }
    assert_int_equal(tvk_to_host(c, got, sizeof got), TVK_OK);
    expect_close(got, want, 2 * (COLS + 1) * w, 0, "moved", nv);
    tvk_release(x), tvk_release(r), tvk_release(p), tvk_release(m), tvk_release(f);
    tvk_release(pd), tvk_release(e), tvk_release(c);
  }
  tvk_release(cache);
}

/* A cache grown by a row: cat of its first n rows and a new one, (n + 1, 5)
 * with the new row at n; a row on each side, (n + 2, 5), the second at
 * n + 1; the columns of the n rows swapped by a cat along the fixed axis; a
 * stack of x and -x, (n, 2, 5); and the new row padded to its place by a
 * size, (n + 1, 5), the pad's value -1 above it. Each for several n,
 * against the rows themselves, built once. */
static void test_cat(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  tvk_tensor *cache = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){ROWS, COLS}, host);
  const float *nrow = host + (ROWS - 1) * COLS; /* the new row: the cache's last */
  tvk_tensor *row = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){1, COLS}, nrow);
  int64_t n = tvk_size_var(ctx, "n", 1, ROWS - 2);
  static const int64_t ns[] = {1, 7, 33, ROWS - 2, 2};
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof ns / sizeof *ns; v++) {
    int64_t nv = ns[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = tvk_shrink(cache, (const int64_t[][2]){{0, n}, {0, COLS}});
    tvk_tensor *grown = tvk_cat(2, (tvk_tensor *[]){x, row}, 0);
    tvk_tensor *both = tvk_cat(3, (tvk_tensor *[]){row, x, row}, -2);
    tvk_tensor *lo = tvk_shrink(x, (const int64_t[][2]){{0, n}, {0, 2}});
    tvk_tensor *hi = tvk_shrink(x, (const int64_t[][2]){{0, n}, {2, COLS}});
    tvk_tensor *swapped = tvk_cat(2, (tvk_tensor *[]){hi, lo}, 1);
    tvk_tensor *stacked = tvk_stack(2, (tvk_tensor *[]){x, tvk_neg(x)}, 1);
    tvk_tensor *placed = tvk_pad(row, (const int64_t[][2]){{n, 0}, {0, 0}}, -1.0);
    tvk_tensor *outs[5] = {grown, both, swapped, stacked, placed};
    for (int i = 0; i < 5; i++)
      if (tvk_status_of(outs[i]) != TVK_OK) fail_msg("output %d: %s", i, tvk_error_of(outs[i]));
    assert_int_equal(tvk_size_value(ctx, tvk_shape(grown)[0]), nv + 1);
    assert_int_equal(tvk_size_value(ctx, tvk_shape(both)[0]), nv + 2);
    assert_int_equal(tvk_ndim(stacked), 3);
    assert_int_equal(tvk_size_value(ctx, tvk_shape(placed)[0]), nv + 1);
    float got[(ROWS + 2) * COLS * 2];
    double want[(ROWS + 2) * COLS * 2];
    for (int64_t i = 0; i <= nv; i++) /* grown */
      for (int c = 0; c < COLS; c++) want[i * COLS + c] = i < nv ? host[i * COLS + c] : nrow[c];
    assert_int_equal(tvk_to_host(grown, got, sizeof got), TVK_OK);
    expect_close(got, want, (nv + 1) * COLS, 0, "cat(x, row)", nv);
    for (int64_t i = 0; i < nv + 2; i++) /* both */
      for (int c = 0; c < COLS; c++)
        want[i * COLS + c] = i == 0 || i == nv + 1 ? nrow[c] : host[(i - 1) * COLS + c];
    assert_int_equal(tvk_to_host(both, got, sizeof got), TVK_OK);
    expect_close(got, want, (nv + 2) * COLS, 0, "cat(row, x, row)", nv);
    for (int64_t i = 0; i < nv; i++) /* swapped: columns 2..4, then 0..1 */
      for (int c = 0; c < COLS; c++)
        want[i * COLS + c] = host[i * COLS + (c < COLS - 2 ? c + 2 : c - (COLS - 2))];
    assert_int_equal(tvk_to_host(swapped, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * COLS, 0, "cat(x[:, 2:], x[:, :2], 1)", nv);
    for (int64_t i = 0; i < nv; i++) /* stacked */
      for (int k = 0; k < 2; k++)
        for (int c = 0; c < COLS; c++)
          want[(i * 2 + k) * COLS + c] = k ? -(double)host[i * COLS + c] : host[i * COLS + c];
    assert_int_equal(tvk_to_host(stacked, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * 2 * COLS, 0, "stack(x, -x, 1)", nv);
    for (int64_t i = 0; i <= nv; i++) /* placed */
      for (int c = 0; c < COLS; c++) want[i * COLS + c] = i < nv ? -1.0 : nrow[c];
    assert_int_equal(tvk_to_host(placed, got, sizeof got), TVK_OK);
    expect_close(got, want, (nv + 1) * COLS, 0, "pad(row, (n, 0))", nv);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(x), tvk_release(lo), tvk_release(hi);
    for (int i = 0; i < 5; i++) tvk_release(outs[i]);
  }
  /* a pad by another context's size; a negative number */
  tvk_ctx *other = NULL;
  assert_int_equal(tvk_ctx_create("CPU", &other), TVK_OK);
  int64_t q = tvk_size_var(other, "q", 1, 8);
  tvk_tensor *bad = tvk_pad(row, (const int64_t[][2]){{0, 0}, {q, 0}}, 0);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_INVALID_ARG);
  if (!strstr(tvk_error_of(bad), "pad: pads[1] uses 'q', which is not a size variable"))
    fail_msg("the message: %s", tvk_error_of(bad));
  tvk_release(bad);
  tvk_ctx_destroy(other);
  bad = tvk_pad(row, (const int64_t[][2]){{n, -1}, {0, 0}}, 0);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_INVALID_ARG);
  if (!strstr(tvk_error_of(bad), "pad: pads[0] = (n, -1) is negative"))
    fail_msg("the message: %s", tvk_error_of(bad));
  tvk_release(bad), tvk_release(row), tvk_release(cache);
}

/* ---------------------------------------------------------------- model ops */

enum { SEQ = 48, DIM = 16, OUTF = 8 };

static float big[SEQ * SEQ];

static void fill_big(void) {
  uint64_t r = 0x2545f4914f6cdd1dULL;
  for (int i = 0; i < SEQ * SEQ; i++) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    big[i] = (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
  }
}

/* The first n rows of the (SEQ, cols) buffer t, as (n, cols). */
static tvk_tensor *rows(tvk_tensor *t, int64_t n, int64_t cols) {
  return tvk_shrink(t, (const int64_t[][2]){{0, n}, {0, cols}});
}

/* Around the CPU's lanes of 8 and 16 (a tile's full blocks run unmasked,
 * its last one masked: lower.c's peeling): shorter than a block, one past
 * it, one short of two, whole blocks only. */
static const int64_t seq_values[] = {1, 5, 17, 31, 48, 3, 16};

/* x (n, 16) @ w (16, 8); x^T (16, n) @ x (n, 16): symbolic rows, and a
 * reduce over the symbolic dim. */
static void test_matmul(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_big();
  tvk_tensor *xs = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, DIM}, big);
  tvk_tensor *w = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){DIM, OUTF}, big + 1000);
  int64_t n = tvk_size_var(ctx, "seq", 1, SEQ);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof seq_values / sizeof *seq_values; v++) {
    int64_t nv = seq_values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = rows(xs, n, DIM);
    tvk_tensor *y = tvk_matmul(x, w);
    tvk_tensor *g = tvk_matmul(tvk_transpose(x, 0, 1), x);
    assert_int_equal(tvk_status_of(y), TVK_OK);
    assert_int_equal(tvk_status_of(g), TVK_OK);
    assert_int_equal(tvk_shape(y)[0], n);
    assert_int_equal(tvk_shape(g)[0], DIM);
    float gy[SEQ * OUTF], gg[DIM * DIM];
    double wy[SEQ * OUTF] = {0}, wg[DIM * DIM] = {0};
    for (int64_t r = 0; r < nv; r++)
      for (int c = 0; c < OUTF; c++)
        for (int k = 0; k < DIM; k++)
          wy[r * OUTF + c] += (double)big[r * DIM + k] * big[1000 + k * OUTF + c];
    for (int a = 0; a < DIM; a++)
      for (int b = 0; b < DIM; b++)
        for (int64_t r = 0; r < nv; r++)
          wg[a * DIM + b] += (double)big[r * DIM + a] * big[r * DIM + b];
    assert_int_equal(tvk_to_host(y, gy, sizeof gy), TVK_OK);
    assert_int_equal(tvk_to_host(g, gg, sizeof gg), TVK_OK);
    expect_close(gy, wy, nv * OUTF, 1e-5, "x @ w", nv);
    expect_close(gg, wg, DIM * DIM, 1e-5, "x^T @ x", nv);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(x), tvk_release(y), tvk_release(g);
  }
  tvk_release(xs), tvk_release(w);
}

/* softmax over a symbolic last axis, layernorm over a fixed one of a tensor
 * with symbolic rows. */
static void test_softmax_layernorm(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_big();
  tvk_tensor *scores = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, SEQ}, big);
  tvk_tensor *gain = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){DIM}, big + 7);
  int64_t n = tvk_size_var(ctx, "seq", 1, SEQ);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof seq_values / sizeof *seq_values; v++) {
    int64_t nv = seq_values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *s = tvk_shrink(scores, (const int64_t[][2]){{0, n}, {0, n}}); /* (n, n) */
    tvk_tensor *sm = tvk_softmax(tvk_mul(s, tvk_full(ctx, TVK_FLOAT32, 0, NULL, 3.0)), -1);
    tvk_tensor *x = tvk_reshape(tvk_shrink(scores, (const int64_t[][2]){{0, n}, {0, DIM}}), 2,
                                (int64_t[]){n, DIM});
    tvk_tensor *ln = tvk_layernorm(x, 1, gain, NULL, 1e-5);
    assert_int_equal(tvk_status_of(sm), TVK_OK);
    assert_int_equal(tvk_status_of(ln), TVK_OK);
    float gs[SEQ * SEQ], gl[SEQ * DIM];
    double ws[SEQ * SEQ], wl[SEQ * DIM];
    for (int64_t r = 0; r < nv; r++) {
      double m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < nv; c++) m = fmax(m, 3.0 * big[r * SEQ + c]);
      for (int64_t c = 0; c < nv; c++) sum += exp(3.0 * big[r * SEQ + c] - m);
      for (int64_t c = 0; c < nv; c++) ws[r * nv + c] = exp(3.0 * big[r * SEQ + c] - m) / sum;
      double mean = 0, var = 0;
      for (int c = 0; c < DIM; c++) mean += big[r * SEQ + c] / (double)DIM;
      for (int c = 0; c < DIM; c++)
        var += (big[r * SEQ + c] - mean) * (big[r * SEQ + c] - mean) / DIM;
      for (int c = 0; c < DIM; c++)
        wl[r * DIM + c] = (big[r * SEQ + c] - mean) / sqrt(var + 1e-5) * big[7 + c];
    }
    assert_int_equal(tvk_to_host(sm, gs, sizeof gs), TVK_OK);
    assert_int_equal(tvk_to_host(ln, gl, sizeof gl), TVK_OK);
    expect_close(gs, ws, nv * nv, 1e-5, "softmax", nv);
    expect_close(gl, wl, nv * DIM, 1e-4, "layernorm", nv);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(s), tvk_release(sm), tvk_release(x), tvk_release(ln);
  }
  tvk_release(scores), tvk_release(gain);
}

/* Attention over a growing sequence: q, k, v the first n rows of fixed
 * buffers, the causal mask the (n, n) corner of a fixed lower triangle. */
static void test_attention(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_big();
  static uint8_t tri[SEQ * SEQ];
  for (int r = 0; r < SEQ; r++)
    for (int c = 0; c < SEQ; c++) tri[r * SEQ + c] = c <= r;
  tvk_tensor *qs = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, DIM}, big);
  tvk_tensor *ks = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, DIM}, big + 768);
  tvk_tensor *vs = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, DIM}, big + 1536);
  tvk_tensor *mask = tvk_from_data(ctx, TVK_BOOL, 2, (int64_t[]){SEQ, SEQ}, tri);
  int64_t n = tvk_size_var(ctx, "seq", 1, SEQ);
  uint64_t after_first = 0;
  for (size_t v = 0; v < sizeof seq_values / sizeof *seq_values; v++) {
    int64_t nv = seq_values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *q = rows(qs, n, DIM), *k = rows(ks, n, DIM), *vv = rows(vs, n, DIM);
    tvk_tensor *mk = tvk_shrink(mask, (const int64_t[][2]){{0, n}, {0, n}});
    tvk_tensor *o = tvk_scaled_dot_product_attention(q, k, vv, mk, false);
    tvk_tensor *oc = tvk_scaled_dot_product_attention(q, k, vv, NULL, true); /* the same */
    assert_int_equal(tvk_status_of(o), TVK_OK);
    assert_int_equal(tvk_status_of(oc), TVK_OK);
    assert_int_equal(tvk_shape(o)[0], n);
    float got[SEQ * DIM];
    double want[SEQ * DIM];
    for (int64_t i = 0; i < nv; i++) {
      double sc[SEQ], m = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= i; j++) {
        sc[j] = 0;
        for (int e = 0; e < DIM; e++) sc[j] += (double)big[i * DIM + e] * big[768 + j * DIM + e];
        sc[j] /= sqrt((double)DIM);
        m = fmax(m, sc[j]);
      }
      for (int64_t j = 0; j <= i; j++) sum += exp(sc[j] - m);
      for (int e = 0; e < DIM; e++) {
        double acc = 0;
        for (int64_t j = 0; j <= i; j++) acc += exp(sc[j] - m) / sum * big[1536 + j * DIM + e];
        want[i * DIM + e] = acc;
      }
    }
    assert_int_equal(tvk_to_host(o, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * DIM, 1e-5, "attention", nv);
    assert_int_equal(tvk_to_host(oc, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * DIM, 1e-5, "attention, is_causal", nv);
    once_per_kernel(ctx, v, nv, &after_first);
    tvk_release(q), tvk_release(k), tvk_release(vv), tvk_release(mk), tvk_release(o);
    tvk_release(oc);
  }
  /* the scale 1/sqrt(E) needs a number */
  int64_t e = tvk_size_var(ctx, "e", 1, DIM);
  tvk_tensor *q = tvk_shrink(qs, (const int64_t[][2]){{0, SEQ}, {0, e}});
  tvk_tensor *bad = tvk_scaled_dot_product_attention(q, q, q, NULL, true);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "embedding dim of q is symbolic"));
  tvk_release(bad), tvk_release(q);
  tvk_release(qs), tvk_release(ks), tvk_release(vs), tvk_release(mask);
}

/* A plan search (TVK_BEAM) times kernels on scratch buffers of their sizes
 * with no launch values: a kernel over a symbolic size is planned by the
 * heuristic instead, and still right for every value. */
static void test_beam(void **state) {
  Suite *su = *state;
  tvk_ctx *ctx = NULL;
  tvk_ctx_options o = {.device = su->device, .beam = 2, .no_disk_cache = 1};
  assert_int_equal(tvk_ctx_create_opts(&o, &ctx), TVK_OK);
  fill_big();
  tvk_tensor *xs = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){SEQ, DIM}, big);
  tvk_tensor *w = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){DIM, OUTF}, big + 1000);
  int64_t n = tvk_size_var(ctx, "seq", 1, SEQ);
  for (size_t v = 0; v < 3; v++) {
    int64_t nv = seq_values[v];
    assert_int_equal(tvk_bind(ctx, n, nv), TVK_OK);
    tvk_tensor *x = rows(xs, n, DIM);
    tvk_tensor *y = tvk_relu(tvk_matmul(x, w));
    float got[SEQ * OUTF];
    double want[SEQ * OUTF] = {0};
    for (int64_t r = 0; r < nv; r++)
      for (int c = 0; c < OUTF; c++) {
        for (int k = 0; k < DIM; k++)
          want[r * OUTF + c] += (double)big[r * DIM + k] * big[1000 + k * OUTF + c];
        want[r * OUTF + c] = fmax(want[r * OUTF + c], 0);
      }
    assert_int_equal(tvk_to_host(y, got, sizeof got), TVK_OK);
    expect_close(got, want, nv * OUTF, 1e-5, "relu(x @ w) searched", nv);
    tvk_release(x), tvk_release(y);
  }
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.plans_searched, 0); /* the one kernel is symbolic: not timed */
  tvk_release(xs), tvk_release(w);
  assert_int_equal(api_ctx_close_checked(&ctx, su->device), 0);
}

/* A jit over a size variable: captured once, then replayed for every value
 * bound (the launches' values and grids follow it, its buffers grow with
 * it), with nothing compiled or scheduled after the first calls. Two
 * functions: the first n rows of a fixed buffer, summed by row; and an input
 * made from data of n rows, scaled (an output of n rows). */
typedef struct {
  int64_t n;
  tvk_tensor *cache;
} JitCase;

static tvk_status jit_rows(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                           tvk_tensor **out) {
  (void)ctx, (void)nin, (void)in, (void)nout;
  JitCase *c = user;
  tvk_tensor *x = tvk_shrink(c->cache, (const int64_t[][2]){{0, c->n}, {0, COLS}});
  out[0] = tvk_sum(tvk_mul(x, x), 1, (int[]){1}, false);
  tvk_release(x);
  return tvk_status_of(out[0]);
}

static tvk_status jit_scale(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                            tvk_tensor **out) {
  (void)user, (void)nin, (void)nout;
  out[0] = tvk_add(tvk_mul(in[0], tvk_full(ctx, TVK_FLOAT32, 0, NULL, 2)),
                   tvk_full(ctx, TVK_FLOAT32, 0, NULL, 1));
  out[1] = tvk_max(in[0], 1, (int[]){0}, false); /* over the n rows */
  return tvk_status_of(out[0]) != TVK_OK ? tvk_status_of(out[0]) : tvk_status_of(out[1]);
}

static void test_jit(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  JitCase c = {tvk_size_var(ctx, "n", 1, ROWS),
               tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){ROWS, COLS}, host)};
  tvk_jit *rows_jit = tvk_jit_create(ctx, jit_rows, &c),
          *scale_jit = tvk_jit_create(ctx, jit_scale, NULL);
  uint64_t after = 0;
  static const int64_t jit_values[] = {3, 5, 1, 7, 33, 64, 2, 17, 17, 64};
  for (size_t v = 0; v < sizeof jit_values / sizeof *jit_values; v++) {
    int64_t nv = jit_values[v];
    assert_int_equal(tvk_bind(ctx, c.n, nv), TVK_OK);
    tvk_tensor *out = NULL, *x = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){c.n, COLS}, host);
    tvk_tensor *so[2] = {NULL, NULL};
    assert_int_equal(tvk_jit_run(rows_jit, 0, NULL, 1, &out), TVK_OK);
    assert_int_equal(tvk_jit_run(scale_jit, 1, &x, 2, so), TVK_OK);
    float got[ROWS * COLS];
    double want[ROWS * COLS] = {0}, wmax[COLS];
    for (int64_t r = 0; r < nv; r++)
      for (int k = 0; k < COLS; k++)
        want[r] += (double)(float)((double)host[r * COLS + k] * host[r * COLS + k]);
    assert_int_equal(tvk_to_host(out, got, sizeof got), TVK_OK);
    expect_close(got, want, nv, 1e-5, "jit sum of squares", nv);
    for (int64_t i = 0; i < nv * COLS; i++) want[i] = (double)host[i] * 2 + 1;
    for (int k = 0; k < COLS; k++) {
      wmax[k] = -INFINITY;
      for (int64_t r = 0; r < nv; r++) wmax[k] = fmax(wmax[k], host[r * COLS + k]);
    }
    assert_int_equal(tvk_ndim(so[0]), 2);
    assert_int_equal(tvk_shape(so[0])[0], c.n);
    assert_int_equal(tvk_to_host(so[0], got, sizeof got), TVK_OK);
    expect_close(got, want, nv * COLS, 1e-6, "jit x*2+1", nv);
    assert_int_equal(tvk_to_host(so[1], got, sizeof got), TVK_OK);
    expect_close(got, wmax, COLS, 0, "jit max over n", nv);
    if (v == 1) after = builds(ctx); /* the first call compiles, the second captures */
    if (v > 1 && builds(ctx) != after) fail_msg("n = %lld built kernels", (long long)nv);
    tvk_release(out), tvk_release(x), tvk_release(so[0]), tvk_release(so[1]);
  }
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.jit_captures, 2);
  assert_int_equal(st.jit_replays, 2 * (sizeof jit_values / sizeof *jit_values - 2));
  /* an input made for another value than the one bound is refused */
  assert_int_equal(tvk_bind(ctx, c.n, 4), TVK_OK);
  tvk_tensor *x = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){c.n, COLS}, host), *so[2];
  assert_int_equal(tvk_bind(ctx, c.n, 9), TVK_OK);
  assert_int_equal(tvk_jit_run(scale_jit, 1, &x, 2, so), TVK_ERR_SHAPE);
  expect_error(ctx, "made for n = 4, and n is bound to 9");
  tvk_release(x);
  tvk_jit_destroy(rows_jit), tvk_jit_destroy(scale_jit);
  tvk_release(c.cache);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void **state) {
  tvk_ctx *ctx = ((Suite *)*state)->ctx;
  fill_host();
  int64_t n = tvk_size_var(ctx, "n", 1, 8), m = tvk_size_var(ctx, "m", 1, 8);
  tvk_tensor *cache = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){8, 4}, host);
  tvk_tensor *x = tvk_shrink(cache, (const int64_t[][2]){{0, n}, {0, 4}});
  float out[64];

  /* realize with a variable unbound */
  tvk_tensor *y = tvk_add(x, x);
  assert_int_equal(tvk_numel(y), -1);
  assert_int_equal(tvk_to_host(y, out, sizeof out), TVK_ERR_INVALID_ARG);
  expect_error(ctx, "size variable 'n' has no value");
  assert_int_equal(tvk_realize(1, &y), TVK_ERR_INVALID_ARG);
  expect_error(ctx, "'n' has no value");

  /* data made for one value read under another */
  assert_int_equal(tvk_bind(ctx, n, 3), TVK_OK);
  tvk_tensor *d = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){n, 4}, host);
  tvk_tensor *dd = tvk_add(d, d);
  assert_int_equal(tvk_realize(1, &dd), TVK_OK);
  assert_int_equal(tvk_bind(ctx, n, 5), TVK_OK);
  tvk_tensor *d3 = tvk_mul(d, d);
  assert_int_equal(tvk_to_host(d3, out, sizeof out), TVK_ERR_SHAPE);
  expect_error(ctx, "made for n = 3, and n is bound to 5");
  assert_int_equal(tvk_to_host(dd, out, sizeof out), TVK_ERR_SHAPE); /* computed for 3 */
  expect_error(ctx, "made for n = 3");
  assert_int_equal(tvk_bind(ctx, n, 3), TVK_OK); /* back to 3: both readable */
  assert_int_equal(tvk_to_host(d3, out, sizeof out), TVK_OK);
  for (int i = 0; i < 12; i++) assert_true(out[i] == host[i] * host[i]);
  assert_int_equal(tvk_to_host(dd, out, sizeof out), TVK_OK);
  for (int i = 0; i < 12; i++) assert_true(out[i] == host[i] + host[i]);

  /* shapes that do not agree */
  tvk_tensor *xm = tvk_shrink(cache, (const int64_t[][2]){{0, m}, {0, 4}});
  tvk_tensor *bad = tvk_add(x, xm);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "(n, 4)"));
  assert_non_null(strstr(tvk_error_of(bad), "(m, 4)"));
  tvk_release(bad);
  bad = tvk_shrink(cache, (const int64_t[][2]){{0, tvk_size_add(n, 1)}, {0, 4}}); /* n+1 > 8 */
  assert_int_equal(tvk_status_of(bad), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(bad), "for every value"));
  tvk_release(bad);
  bad = tvk_reshape(cache, 2, (int64_t[]){n, 32 / 8}); /* 32 elements into n*4 */
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "cannot reshape (8, 4) into (n, 4)"));
  tvk_release(bad);
  bad = tvk_expand(x, 2, (int64_t[]){m, 4});
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "dim 0 has size n"));
  tvk_release(bad);
  /* a reduce over a symbolic axis is one loop: its length is bounded */
  int64_t huge = tvk_size_var(ctx, "huge", 1, 100000);
  tvk_tensor *ones = tvk_full(ctx, TVK_FLOAT32, 1, (int64_t[]){100000}, 1);
  tvk_tensor *long_ = tvk_shrink(ones, (const int64_t[][2]){{0, huge}});
  bad = tvk_sum(long_, 0, NULL, false);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "reducing huge elements (up to 100000)"));
  tvk_release(bad);
  bad = tvk_var(long_, 0, NULL, false, 1);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  tvk_release(bad), tvk_release(long_), tvk_release(ones);

  /* an op that takes no symbolic sizes yet says so, naming the size */
  tvk_tensor *w = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){4, 2}, host);
  bad = tvk_cumsum(x, 0);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "symbolic size n"));
  tvk_release(bad);
  bad = tvk_rand(ctx, TVK_FLOAT32, 1, &n, 1);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_error_of(bad), "symbolic size n"));
  tvk_release(bad);
  /* gradients: not through symbolic sizes yet */
  tvk_tensor *pw = tvk_contiguous(tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){4}, host));
  assert_int_equal(tvk_realize(1, &pw), TVK_OK);
  tvk_tensor *loss = tvk_sum(tvk_mul(x, pw), 0, NULL, false), *gw = NULL;
  assert_int_equal(tvk_status_of(loss), TVK_OK);
  assert_int_equal(tvk_grad(loss, 1, &pw, &gw), TVK_ERR_SHAPE);
  expect_error(ctx, "gradients through them are not built yet");
  tvk_release(loss), tvk_release(pw);
  /* a size of another context */
  tvk_ctx *other = NULL;
  assert_int_equal(tvk_ctx_create("CPU", &other), TVK_OK);
  int64_t q = tvk_size_var(other, "q", 1, 8);
  bad = tvk_shrink(cache, (const int64_t[][2]){{0, q}, {0, 4}});
  assert_int_equal(tvk_status_of(bad), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(bad), "'q', which is not a size variable of this context"));
  tvk_release(bad);
  tvk_ctx_destroy(other);

  tvk_release(w), tvk_release(xm), tvk_release(d), tvk_release(dd), tvk_release(d3);
  tvk_release(y), tvk_release(x), tvk_release(cache);
}

int main(int argc, char **argv) {
  Suite suite = {.device = argc > 1 ? argv[1] : "CPU"};
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  if (api_device_missing("test_sizes", suite.device)) return 77;
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &suite)
  const struct CMUnitTest tests[] = {
      T(test_variables),
      T(test_variable_errors),
      T(test_elementwise),
      T(test_from_data),
      T(test_reduce),
      T(test_movement),
      T(test_cat),
      T(test_matmul),
      T(test_softmax_layernorm),
      T(test_attention),
      T(test_beam),
      T(test_jit),
      T(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
