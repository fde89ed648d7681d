/* nn group "norm": softmax, log_softmax, logsumexp, cross_entropy, var, std,
 * layernorm, batchnorm, cumsum, argmax and argmin against plain loops in
 * double. Inputs are read back from the tensors (nn_fetch) so the references
 * start from the values the device sees (float32 / float16 rounded). */
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

#define F32_EPS 6e-8   /* float32 unit roundoff (2^-24) */
#define F16_EPS 4.9e-4 /* float16 unit roundoff (2^-11) */

/* ---------------------------------------------------------------- helpers */

/* Flat index of element k along axis ax in lane `lane`; lanes are numbered in
 * row-major order of the shape without ax (the order of a reduction's output). */
static int64_t at(int nd, const int64_t *sh, int ax, int64_t lane, int64_t k) {
  int64_t st[16], idx = 0, rem = lane;
  st[nd - 1] = 1;
  for (int d = nd - 2; d >= 0; d--) st[d] = st[d + 1] * sh[d + 1];
  for (int d = nd - 1; d >= 0; d--) {
    if (d == ax) continue;
    idx += (rem % sh[d]) * st[d];
    rem /= sh[d];
  }
  return idx + k * st[ax];
}

/* The shape of a reduction over ax (keepdim or not); returns its ndim. */
static int reduced(int nd, const int64_t *sh, int ax, bool keepdim, int64_t *out) {
  int k = 0;
  for (int d = 0; d < nd; d++)
    if (d != ax || keepdim) out[k++] = d == ax ? 1 : sh[d];
  return k;
}

static int norm_axis(int axis, int nd) { return axis < 0 ? axis + nd : axis; }

/* A tensor of dt from vals, and its values as stored (*stored, malloc'd). */
static tvk_tensor *input(tvk_dtype dt, int nd, const int64_t *sh, const double *vals,
                         double **stored) {
  tvk_tensor *t = nn_tensor(dt, nd, sh, vals);
  *stored = nn_fetch(t);
  return t;
}

/* ---------------------------------------------------------------- softmax refs */

static double lane_max(const double *x, int nd, const int64_t *sh, int ax, int64_t lane) {
  double m = -INFINITY;
  for (int64_t k = 0; k < sh[ax]; k++) {
    double v = x[at(nd, sh, ax, lane, k)];
    if (isnan(v)) return NAN;
    if (v > m) m = v;
  }
  return m;
}

/* softmax (log_ false) or log_softmax along ax, torch's definition: x - max. */
static void ref_softmax(const double *x, int nd, const int64_t *sh, int ax, bool log_,
                        double *out) {
  int64_t lanes = nn_numel(nd, sh) / sh[ax];
  for (int64_t l = 0; l < lanes; l++) {
    double m = lane_max(x, nd, sh, ax, l), s = 0;
    for (int64_t k = 0; k < sh[ax]; k++) s += exp(x[at(nd, sh, ax, l, k)] - m);
    for (int64_t k = 0; k < sh[ax]; k++) {
      int64_t i = at(nd, sh, ax, l, k);
      out[i] = log_ ? (x[i] - m) - log(s) : exp(x[i] - m) / s;
    }
  }
}

/* logsumexp along ax: the max is subtracted only where it is finite. */
static void ref_lse(const double *x, int nd, const int64_t *sh, int ax, double *out) {
  int64_t lanes = nn_numel(nd, sh) / sh[ax];
  for (int64_t l = 0; l < lanes; l++) {
    double m = lane_max(x, nd, sh, ax, l), s = 0;
    if (isinf(m)) m = 0;
    for (int64_t k = 0; k < sh[ax]; k++) s += exp(x[at(nd, sh, ax, l, k)] - m);
    out[l] = log(s) + m;
  }
}

/* ---------------------------------------------------------------- softmax tests */

static void test_softmax_axes(void **state) {
  (void)state;
  const int64_t sh[3] = {3, 4, 5};
  double *vals = nn_rand_vals(60, -3, 3), *x;
  tvk_tensor *t = input(TVK_FLOAT32, 3, sh, vals, &x);
  double ref[60];
  const int axes[] = {0, 1, 2, -1, -2, -3};
  for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) {
    int ax = norm_axis(axes[i], 3);
    char what[64];
    /* exp of |x - max| <= 6 (relative error ~6 eps), a sum of <= 5 terms, a division */
    ref_softmax(x, 3, sh, ax, false, ref);
    snprintf(what, sizeof what, "softmax axis %d", axes[i]);
    nn_check(what, tvk_softmax(t, axes[i]), TVK_FLOAT32, 3, sh, ref, 16 * F32_EPS, 0);
    /* (x - max) - log(s): absolute error a few ulps of values below ~8 */
    ref_softmax(x, 3, sh, ax, true, ref);
    snprintf(what, sizeof what, "log_softmax axis %d", axes[i]);
    nn_check(what, tvk_log_softmax(t, axes[i]), TVK_FLOAT32, 3, sh, ref, 4 * F32_EPS,
             8 * 8 * F32_EPS);
    ref_lse(x, 3, sh, ax, ref);
    for (int keep = 0; keep < 2; keep++) {
      int64_t out[3];
      int ond = reduced(3, sh, ax, keep, out);
      snprintf(what, sizeof what, "logsumexp axis %d keepdim %d", axes[i], keep);
      /* log(s) + max cancels near 0: absolute error a few ulps of |max| + |log s| <= ~5 */
      nn_check(what, tvk_logsumexp(t, axes[i], keep), TVK_FLOAT32, ond, out, ref, 16 * F32_EPS,
               8 * 5 * F32_EPS);
    }
  }
  free(vals), free(x);
  nn_finish();
}

/* Rows of large values (exp would overflow without the max), -inf entries,
 * rows of all -inf, +inf and NaN. */
static void test_softmax_stability(void **state) {
  (void)state;
  const double inf = INFINITY;
  const int64_t sh[2] = {7, 4};
  const double vals[28] = {
      1000,  1001,  999.5,  1000.25, /* large: exp(1000) overflows */
      -1000, -1001, -999.5, -1002,   /* large negative: exp underflows to 0 */
      -inf,  1,     2,      -inf,    /* some -inf: probability 0 */
      -inf,  -inf,  -inf,   -inf,    /* all -inf: softmax NaN, logsumexp -inf */
      inf,   1,     2,      3,       /* +inf: softmax NaN, logsumexp +inf */
      NAN,   1,     2,      3,       /* NaN: NaN everywhere */
      88,    89,    -88,    0,       /* near float32's exp limit */
  };
  double *x, ref[28], lse[7];
  tvk_tensor *t = input(TVK_FLOAT32, 2, sh, vals, &x);
  ref_softmax(x, 2, sh, 1, false, ref);
  /* exp(-177) underflows float32: absolute error up to its smallest normal */
  nn_check("softmax stable", tvk_softmax(t, -1), TVK_FLOAT32, 2, sh, ref, 16 * F32_EPS, 0x1p-126);
  ref_softmax(x, 2, sh, 1, true, ref);
  nn_check("log_softmax stable", tvk_log_softmax(t, 1), TVK_FLOAT32, 2, sh, ref, 4 * F32_EPS,
           8 * 8 * F32_EPS);
  ref_lse(x, 2, sh, 1, lse);
  nn_check("logsumexp stable", tvk_logsumexp(t, 1, false), TVK_FLOAT32, 1, sh, lse, 4 * F32_EPS, 0);
  free(x);
  nn_finish();
}

static void test_softmax_dtypes(void **state) {
  (void)state;
  const int64_t sh[2] = {4, 7};
  double *vals = nn_rand_vals(28, -4, 4), *x, ref[28];
  /* float16 in, float16 out, computed in float32: one rounding at the end (and
   * results below float16's normal range are rounded to 2^-24 steps) */
  tvk_tensor *h = input(TVK_FLOAT16, 2, sh, vals, &x);
  ref_softmax(x, 2, sh, 1, false, ref);
  nn_check("softmax float16", tvk_softmax(h, 1), TVK_FLOAT16, 2, sh, ref, F16_EPS + 16 * F32_EPS,
           0x1p-25);
  ref_softmax(x, 2, sh, 0, true, ref);
  nn_check("log_softmax float16", tvk_log_softmax(h, 0), TVK_FLOAT16, 2, sh, ref, F16_EPS + 1e-6,
           0);
  double l[7];
  ref_lse(x, 2, sh, 1, l);
  nn_check("logsumexp float16", tvk_logsumexp(h, 1, false), TVK_FLOAT16, 1, sh, l, F16_EPS + 1e-6,
           0);
  free(x);
  /* int32 in: float32 out */
  double *iv = nn_rand_ints(28, -5, 6);
  tvk_tensor *it = input(TVK_INT32, 2, sh, iv, &x);
  ref_softmax(x, 2, sh, 1, false, ref);
  nn_check("softmax int32", tvk_softmax(it, 1), TVK_FLOAT32, 2, sh, ref, 32 * F32_EPS, 0);
  ref_lse(x, 2, sh, 0, l);
  nn_check("logsumexp int32", tvk_logsumexp(it, 0, true), TVK_FLOAT32, 2, (const int64_t[]){1, 7},
           l, 8 * F32_EPS, 0);
  free(x);
  /* float64 keeps float64 */
  tvk_tensor *d = input(TVK_FLOAT64, 2, sh, vals, &x);
  ref_softmax(x, 2, sh, 1, false, ref);
  nn_check("softmax float64", tvk_softmax(d, 1), TVK_FLOAT64, 2, sh, ref, 1e-14, 0);
  free(x);
  /* a 0-d tensor is one element along axis 0 */
  tvk_tensor *s = tvk_scalar(nn.ctx, TVK_FLOAT32, 3.5);
  nn_check("softmax 0-d", tvk_softmax(s, 0), TVK_FLOAT32, 0, NULL, (const double[]){1}, 0, 0);
  nn_check("log_softmax 0-d", tvk_log_softmax(s, -1), TVK_FLOAT32, 0, NULL, (const double[]){0}, 0,
           0);
  nn_check("logsumexp 0-d", tvk_logsumexp(s, 0, false), TVK_FLOAT32, 0, NULL, (const double[]){3.5},
           0, 0);
  /* errors */
  nn_check_error("softmax axis 2 of 2 dims", tvk_softmax(h, 2), TVK_ERR_INVALID_ARG);
  nn_check_error("log_softmax axis -3", tvk_log_softmax(h, -3), TVK_ERR_INVALID_ARG);
  nn_check_error("logsumexp axis 1 of 0-d", tvk_logsumexp(s, 1, false), TVK_ERR_INVALID_ARG);
  nn_check_error("softmax of an error", tvk_softmax(tvk_softmax(h, 5), 0), TVK_ERR_INVALID_ARG);
  nn_expect(tvk_softmax(NULL, 0) == NULL, "softmax(NULL) is NULL");
  free(vals), free(iv);
  nn_finish();
}

/* ---------------------------------------------------------------- cross entropy */

static double ref_ce(const double *x, int64_t n, int64_t c, const double *lab) {
  double total = 0;
  for (int64_t i = 0; i < n; i++) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) m = fmax(m, x[i * c + j]);
    for (int64_t j = 0; j < c; j++) s += exp(x[i * c + j] - m);
    int64_t l = (int64_t)lab[i];
    total += (l >= 0 && l < c) ? -((x[i * c + l] - m) - log(s)) : NAN;
  }
  return total / (double)n;
}

static void test_cross_entropy(void **state) {
  (void)state;
  const int64_t n = 6, c = 5, sh[2] = {6, 5};
  double *vals = nn_rand_vals(30, -3, 3), *x, *lab = nn_rand_ints(6, 0, 5);
  tvk_tensor *lg = input(TVK_FLOAT32, 2, sh, vals, &x);
  double want = ref_ce(x, n, c, lab);
  /* per row a few ulps of values up to ~8; the mean of 6 */
  const tvk_dtype ldts[] = {TVK_INT32, TVK_INT64, TVK_UINT8, TVK_INT8, TVK_UINT64, TVK_INT16};
  for (size_t i = 0; i < sizeof ldts / sizeof ldts[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "cross_entropy labels %s", tvk_dtype_name(ldts[i]));
    tvk_tensor *lt = nn_tensor(ldts[i], 1, &n, lab);
    nn_check(what, tvk_cross_entropy(lg, lt), TVK_FLOAT32, 0, NULL, &want, 0, 8 * 8 * F32_EPS);
  }
  /* large logits: stable */
  for (int i = 0; i < 30; i++) vals[i] = 1000 + vals[i];
  free(x);
  lg = input(TVK_FLOAT32, 2, sh, vals, &x);
  want = ref_ce(x, n, c, lab);
  tvk_tensor *l32 = nn_tensor(TVK_INT32, 1, &n, lab);
  nn_check("cross_entropy large logits", tvk_cross_entropy(lg, l32), TVK_FLOAT32, 0, NULL, &want, 0,
           8 * 8 * F32_EPS);
  /* float16 logits give a float16 loss */
  tvk_tensor *hl = nn_tensor(TVK_FLOAT16, 2, sh, (double[30]){0});
  want = log(5.0); /* equal logits */
  nn_check("cross_entropy float16", tvk_cross_entropy(hl, l32), TVK_FLOAT16, 0, NULL, &want,
           F16_EPS, 0);
  /* labels out of range give NaN */
  double bad[6] = {0, 1, 5, 2, 3, 4};
  nn_check("cross_entropy label 5 of 5 classes",
           tvk_cross_entropy(lg, nn_tensor(TVK_INT64, 1, &n, bad)), TVK_FLOAT32, 0, NULL,
           (const double[]){NAN}, 0, 0);
  nn_check("cross_entropy uint8 label 5 of 5 classes",
           tvk_cross_entropy(lg, nn_tensor(TVK_UINT8, 1, &n, bad)), TVK_FLOAT32, 0, NULL,
           (const double[]){NAN}, 0, 0);
  bad[2] = -1;
  nn_check("cross_entropy label -1", tvk_cross_entropy(lg, nn_tensor(TVK_INT32, 1, &n, bad)),
           TVK_FLOAT32, 0, NULL, (const double[]){NAN}, 0, 0);
  /* errors */
  nn_check_error("cross_entropy float labels",
                 tvk_cross_entropy(lg, nn_tensor(TVK_FLOAT32, 1, &n, lab)), TVK_ERR_DTYPE);
  nn_check_error("cross_entropy bool labels",
                 tvk_cross_entropy(lg, nn_tensor(TVK_BOOL, 1, &n, lab)), TVK_ERR_DTYPE);
  nn_check_error("cross_entropy 5 labels for 6 rows",
                 tvk_cross_entropy(lg, nn_tensor(TVK_INT32, 1, (const int64_t[]){5}, lab)),
                 TVK_ERR_SHAPE);
  nn_check_error("cross_entropy 2-D labels",
                 tvk_cross_entropy(lg, nn_tensor(TVK_INT32, 2, (const int64_t[]){6, 1}, lab)),
                 TVK_ERR_SHAPE);
  nn_check_error("cross_entropy 3-D logits",
                 tvk_cross_entropy(tvk_reshape(lg, 3, (const int64_t[]){6, 5, 1}), l32),
                 TVK_ERR_SHAPE);
  nn_check_error("cross_entropy NULL labels", tvk_cross_entropy(lg, NULL), TVK_ERR_INVALID_ARG);
  free(vals), free(x), free(lab);
  nn_finish();
}

/* ---------------------------------------------------------------- var, std */

/* Two-pass variance of the elements where `in` is true, over lanes: out[l]. */
static void ref_var(const double *x, int nd, const int64_t *sh, const bool *on, double corr,
                    bool sd, double *out, int64_t *count) {
  /* the output index of element i: its coordinates with reduced dims dropped */
  int64_t n = nn_numel(nd, sh), outn = 1, cnt = 1;
  for (int d = 0; d < nd; d++) {
    if (on[d])
      cnt *= sh[d];
    else
      outn *= sh[d];
  }
  double *sum = calloc((size_t)outn, sizeof *sum), *ss = calloc((size_t)outn, sizeof *ss);
  int64_t *oi = malloc((size_t)n * sizeof *oi);
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, o = 0, ost = 1;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t c = rem % sh[d];
      rem /= sh[d];
      if (!on[d]) o += c * ost, ost *= sh[d];
    }
    oi[i] = o;
    sum[o] += x[i];
  }
  for (int64_t i = 0; i < n; i++) {
    double dv = x[i] - sum[oi[i]] / (double)cnt;
    ss[oi[i]] += dv * dv;
  }
  for (int64_t o = 0; o < outn; o++) {
    double v = ss[o] / fmax(0, (double)cnt - corr);
    out[o] = sd ? sqrt(v) : v;
  }
  *count = cnt;
  free(sum), free(ss), free(oi);
}

static void check_var(tvk_tensor *t, const double *x, int nd, const int64_t *sh, int naxes,
                      const int *axes, bool keepdim, double corr, tvk_dtype want_dt, double rtol0) {
  bool on[8] = {false};
  if (naxes == 0)
    for (int d = 0; d < nd; d++) on[d] = true;
  for (int i = 0; i < naxes; i++) on[norm_axis(axes[i], nd)] = true;
  int64_t out[8], cnt;
  int ond = 0;
  for (int d = 0; d < nd; d++)
    if (!on[d] || keepdim) out[ond++] = on[d] ? 1 : sh[d];
  double ref[64];
  for (int sd = 0; sd < 2; sd++) {
    ref_var(x, nd, sh, on, corr, sd, ref, &cnt);
    char what[96];
    snprintf(what, sizeof what, "%s naxes %d (first %d) keepdim %d correction %g",
             sd ? "std" : "var", naxes, naxes ? axes[0] : 0, keepdim, corr);
    /* sums of cnt positive terms in float32: ~cnt eps relative, plus the mean's */
    double rtol = rtol0 + 4 * (double)cnt * F32_EPS;
    tvk_tensor *r =
        sd ? tvk_std(t, naxes, axes, keepdim, corr) : tvk_var(t, naxes, axes, keepdim, corr);
    nn_check(what, r, want_dt, ond, out, ref, rtol, 0);
  }
}

static void test_var_std(void **state) {
  (void)state;
  const int64_t sh[3] = {3, 4, 5};
  double *vals = nn_rand_vals(60, -2, 2), *x;
  tvk_tensor *t = input(TVK_FLOAT32, 3, sh, vals, &x);
  const int a0[] = {0}, a1[] = {1}, a2[] = {2}, am1[] = {-1}, a02[] = {0, 2}, am31[] = {-3, -1};
  struct {
    int n;
    const int *axes;
  } cases[] = {{1, a0}, {1, a1}, {1, a2}, {1, am1}, {2, a02}, {2, am31}, {0, NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int keep = 0; keep < 2; keep++)
      for (int corr = 0; corr < 2; corr++)
        check_var(t, x, 3, sh, cases[i].n, cases[i].axes, keep, corr, TVK_FLOAT32, 0);
  free(x);
  /* rows near 1000: two-pass keeps full accuracy (E[x^2] - E[x]^2 would lose
   * everything: ulp(1e6) = 0.06 against a variance of ~0.3) */
  for (int i = 0; i < 60; i++) vals[i] += 1000;
  t = input(TVK_FLOAT32, 3, sh, vals, &x);
  /* the mean is off by ~ulp(1000) / 2 = 3e-5 per element... its effect on the
   * sum of squares is second order; the deviations are exact */
  check_var(t, x, 3, sh, 1, a2, false, 1, TVK_FLOAT32, 0);
  free(x);
  /* n - correction <= 0: x / 0 */
  const int64_t s2[2] = {3, 2};
  const double v2[6] = {1, 2, 5, 5, -1, 4};
  t = input(TVK_FLOAT32, 2, s2, v2, &x);
  check_var(t, x, 2, s2, 1, a1, false, 2, TVK_FLOAT32, 0); /* inf, NaN (equal values), inf */
  check_var(t, x, 2, s2, 1, a1, true, 5, TVK_FLOAT32, 0);  /* max(0, 2 - 5) = 0 */
  check_var(t, x, 2, s2, 1, a0, false, 1.5, TVK_FLOAT32, 0);
  free(x);
  /* one element and correction 1: 0 / 0 = NaN (as torch), which a compiler
   * that folds x - x or x * 0 to 0 loses; an inf among the elements: NaN */
  const int64_t s3[2] = {3, 1}, s4[1] = {1};
  const double v3[3] = {1.5, -2, 7}, v4[3] = {1, INFINITY, 2};
  t = input(TVK_FLOAT32, 2, s3, v3, &x);
  check_var(t, x, 2, s3, 1, a1, false, 1, TVK_FLOAT32, 0);
  check_var(t, x, 2, s3, 1, a1, true, 1, TVK_FLOAT32, 0);
  free(x);
  t = input(TVK_FLOAT32, 1, s4, v3, &x);
  check_var(t, x, 1, s4, 0, NULL, false, 1, TVK_FLOAT32, 0);
  free(x);
  t = input(TVK_FLOAT32, 2, s3, v4, &x);
  check_var(t, x, 2, s3, 1, a0, false, 1, TVK_FLOAT32, 0);
  free(x);
  /* float16 in and out (float32 inside); int32 gives float32 */
  double *hv = nn_rand_vals(60, -2, 2);
  t = input(TVK_FLOAT16, 3, sh, hv, &x);
  check_var(t, x, 3, sh, 1, a1, false, 1, TVK_FLOAT16, F16_EPS);
  free(x);
  double *iv = nn_rand_ints(60, -10, 10);
  t = input(TVK_INT32, 3, sh, iv, &x);
  check_var(t, x, 3, sh, 2, a02, true, 0, TVK_FLOAT32, 0);
  free(x);
  /* errors */
  nn_check_error("var axis 3", tvk_var(t, 1, (const int[]){3}, false, 1), TVK_ERR_INVALID_ARG);
  nn_check_error("std axis -4", tvk_std(t, 1, (const int[]){-4}, false, 1), TVK_ERR_INVALID_ARG);
  nn_check_error("var axes 1, -2", tvk_var(t, 2, (const int[]){1, -2}, false, 1),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("var correction NaN", tvk_var(t, 0, NULL, false, NAN), TVK_ERR_INVALID_ARG);
  nn_check_error("std naxes -1", tvk_std(t, -1, a0, false, 1), TVK_ERR_INVALID_ARG);
  free(vals), free(hv), free(iv);
  nn_finish();
}

/* ---------------------------------------------------------------- layernorm */

static void ref_layernorm(const double *x, int64_t rows, int64_t k, const double *w,
                          const double *b, double eps, double *out) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * k;
    double m = 0, v = 0;
    for (int64_t i = 0; i < k; i++) m += xr[i];
    m /= (double)k;
    for (int64_t i = 0; i < k; i++) v += (xr[i] - m) * (xr[i] - m);
    v /= (double)k;
    for (int64_t i = 0; i < k; i++)
      out[r * k + i] = (xr[i] - m) / sqrt(v + eps) * (w ? w[i] : 1) + (b ? b[i] : 0);
  }
}

static void test_layernorm(void **state) {
  (void)state;
  const int64_t sh[3] = {2, 3, 4};
  double *vals = nn_rand_vals(24, -2, 2), *wv = nn_rand_vals(12, 0.5, 1.5),
         *bv = nn_rand_vals(12, -1, 1);
  double *x, *w1, *b1, *w2, *b2, ref[24];
  tvk_tensor *t = input(TVK_FLOAT32, 3, sh, vals, &x);
  tvk_tensor *wt1 = input(TVK_FLOAT32, 1, sh + 2, wv, &w1),
             *bt1 = input(TVK_FLOAT32, 1, sh + 2, bv, &b1);
  tvk_tensor *wt2 = input(TVK_FLOAT32, 2, sh + 1, wv, &w2),
             *bt2 = input(TVK_FLOAT32, 2, sh + 1, bv, &b2);
  /* normalised values up to ~3: the mean's error (k eps |x|) over the std, a
   * few roundings of the result */
  const double eps = 1e-5, tol = 64 * F32_EPS;
  for (int nlast = 1; nlast <= 2; nlast++) {
    int64_t k = nlast == 1 ? 4 : 12, rows = 24 / k;
    tvk_tensor *wt = nlast == 1 ? wt1 : wt2, *bt = nlast == 1 ? bt1 : bt2;
    double *w = nlast == 1 ? w1 : w2, *b = nlast == 1 ? b1 : b2;
    for (int mode = 0; mode < 4; mode++) {
      bool hw = mode & 1, hb = mode & 2;
      ref_layernorm(x, rows, k, hw ? w : NULL, hb ? b : NULL, eps, ref);
      char what[64];
      snprintf(what, sizeof what, "layernorm nlast %d weight %d bias %d", nlast, hw, hb);
      nn_check(what, tvk_layernorm(t, nlast, hw ? wt : NULL, hb ? bt : NULL, eps), TVK_FLOAT32, 3,
               sh, ref, tol, tol);
    }
  }
  /* nlast = ndim; values near 1000. Two-pass: the float32 mean of 24 values
   * near 1000 is off by up to 24 eps 1000 = 1.4e-3, which shifts every output
   * by that over the std (~1.1). One pass (E[x^2] - E[x]^2, with E[x^2] ~ 1e6
   * off by up to 24 eps 1e6 = 1.4) would be wrong by O(1). */
  for (int i = 0; i < 24; i++) vals[i] += 1000;
  free(x);
  t = input(TVK_FLOAT32, 3, sh, vals, &x);
  ref_layernorm(x, 1, 24, NULL, NULL, eps, ref);
  nn_check("layernorm nlast 3 near 1000", tvk_layernorm(t, 3, NULL, NULL, eps), TVK_FLOAT32, 3, sh,
           ref, tol, 24 * F32_EPS * 1000);
  free(x);
  /* float16 */
  double *hv = nn_rand_vals(24, -2, 2);
  t = input(TVK_FLOAT16, 3, sh, hv, &x);
  free(hv);
  ref_layernorm(x, 6, 4, NULL, b1, eps, ref);
  nn_check("layernorm float16", tvk_layernorm(t, 1, NULL, bt1, eps), TVK_FLOAT32, 3, sh, ref, tol,
           tol);
  tvk_tensor *hb = nn_tensor(TVK_FLOAT16, 1, sh + 2, b1);
  nn_check("layernorm float16 bias float16", tvk_layernorm(t, 1, NULL, hb, eps), TVK_FLOAT16, 3, sh,
           ref, F16_EPS, 4 * F16_EPS);
  /* errors */
  nn_check_error("layernorm nlast 0", tvk_layernorm(t, 0, NULL, NULL, eps), TVK_ERR_INVALID_ARG);
  nn_check_error("layernorm nlast 4 of 3 dims", tvk_layernorm(t, 4, NULL, NULL, eps),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("layernorm weight (3, 4) for nlast 1", tvk_layernorm(t, 1, wt2, NULL, eps),
                 TVK_ERR_SHAPE);
  nn_check_error("layernorm bias (4,) for nlast 2", tvk_layernorm(t, 2, NULL, bt1, eps),
                 TVK_ERR_SHAPE);
  nn_check_error("layernorm eps NaN", tvk_layernorm(t, 1, NULL, NULL, NAN), TVK_ERR_INVALID_ARG);
  nn_check_error("layernorm x NULL", tvk_layernorm(NULL, 1, wt1, NULL, eps), TVK_ERR_INVALID_ARG);
  nn_expect(tvk_layernorm(NULL, 1, NULL, NULL, eps) == NULL, "layernorm of all NULL is NULL");
  free(vals), free(wv), free(bv), free(x), free(w1), free(b1), free(w2), free(b2);
  nn_finish();
}

/* ---------------------------------------------------------------- batchnorm */

/* Group norm against its definition in double: per sample and group, the
 * mean and population variance over the group's channels and positions. */
static void test_group_norm(void **state) {
  (void)state;
  const int64_t sh[4] = {2, 6, 3, 2}; /* N C H W */
  double *vals = nn_rand_vals(72, -2, 2), *wv = nn_rand_vals(6, 0.5, 1.5),
         *bv = nn_rand_vals(6, -1, 1), *x, *w, *b, ref[72];
  tvk_tensor *t = input(TVK_FLOAT32, 4, sh, vals, &x);
  tvk_tensor *wt = input(TVK_FLOAT32, 1, sh + 1, wv, &w),
             *bt = input(TVK_FLOAT32, 1, sh + 1, bv, &b);
  const double eps = 1e-5, tol = 64 * F32_EPS;
  int64_t groups[3] = {1, 3, 6};
  for (int gi = 0; gi < 3; gi++) {
    int64_t G = groups[gi], per = 6 / G * 6;
    for (int64_t n = 0; n < 2; n++)
      for (int64_t g = 0; g < G; g++) {
        const double *p = x + n * 36 + g * per; /* the group's values are contiguous */
        double mean = 0, var = 0;
        for (int64_t i = 0; i < per; i++) mean += p[i];
        mean /= (double)per;
        for (int64_t i = 0; i < per; i++) var += (p[i] - mean) * (p[i] - mean);
        var /= (double)per;
        for (int64_t i = 0; i < per; i++) {
          int64_t ch = g * (6 / G) + i / 6;
          ref[n * 36 + g * per + i] = (p[i] - mean) / sqrt(var + eps) * w[ch] + b[ch];
        }
      }
    char what[64];
    snprintf(what, sizeof what, "group_norm groups %lld", (long long)G);
    tvk_tensor *y = G == 6 ? tvk_instance_norm(t, wt, bt, eps) : tvk_group_norm(t, G, wt, bt, eps);
    nn_check(what, y, TVK_FLOAT32, 4, sh, ref, tol, tol);
  }
  nn_check_error("group_norm groups 4 of 6 channels", tvk_group_norm(t, 4, NULL, NULL, eps),
                 TVK_ERR_INVALID_ARG);
  nn_check_error("group_norm weight (2, 3)",
                 tvk_group_norm(t, 3, tvk_reshape(wt, 2, (int64_t[]){2, 3}), NULL, eps),
                 TVK_ERR_SHAPE);
  free(vals), free(wv), free(bv), free(x), free(w), free(b);
  nn_finish();
}

/* clip: the bounds in a's dtype, broadcast, either one absent; NaN stays. */
static void test_clip(void **state) {
  (void)state;
  double a[6] = {-3, 0.5, 7, NAN, 2, -1}, lo[3] = {-1, 0, 1}, hi = 2.5;
  tvk_tensor *ta = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){2, 3}, a);
  tvk_tensor *tl = nn_tensor(TVK_FLOAT32, 1, (int64_t[]){3}, lo);
  tvk_tensor *th = nn_tensor(TVK_FLOAT64, 0, NULL, &hi);
  int64_t sh[2] = {2, 3};
  nn_check("clip both", tvk_clip(ta, tl, th), TVK_FLOAT32, 2, sh,
           (double[]){-1, 0.5, 2.5, NAN, 2, 1}, 0, 0);
  nn_check("clip lo only", tvk_clip(ta, tl, NULL), TVK_FLOAT32, 2, sh,
           (double[]){-1, 0.5, 7, NAN, 2, 1}, 0, 0);
  nn_check("clip hi only", tvk_clip(ta, NULL, th), TVK_FLOAT32, 2, sh,
           (double[]){-3, 0.5, 2.5, NAN, 2, -1}, 0, 0);
  tvk_tensor *ti = nn_tensor(TVK_UINT8, 1, (int64_t[]){4}, (double[]){0, 3, 9, 200});
  tvk_tensor *l8 = nn_tensor(TVK_INT32, 0, NULL, (double[]){4}),
             *h8 = nn_tensor(TVK_INT32, 0, NULL, (double[]){100});
  nn_check("clip uint8 keeps its dtype", tvk_clip(ti, l8, h8), TVK_UINT8, 1, (int64_t[]){4},
           (double[]){4, 4, 9, 100}, 0, 0);
  tvk_tensor *big = nn_tensor(TVK_FLOAT32, 2, (int64_t[]){4, 3}, (double[12]){0});
  nn_check_error("clip bound larger than a", tvk_clip(ta, big, NULL), TVK_ERR_SHAPE);
  nn_finish();
}

static void test_batchnorm(void **state) {
  (void)state;
  const int64_t s4[4] = {2, 3, 4, 5}, s2[2] = {4, 3}, c = 3;
  double *xv = nn_rand_vals(120, -2, 2), *mv = nn_rand_vals(3, -1, 1),
         *vv = nn_rand_vals(3, 0.2, 2);
  double *wv = nn_rand_vals(3, 0.5, 1.5), *bv = nn_rand_vals(3, -1, 1);
  double *x, *m, *v, *w, *b, ref[120];
  tvk_tensor *mt = input(TVK_FLOAT32, 1, &c, mv, &m), *vt = input(TVK_FLOAT32, 1, &c, vv, &v);
  tvk_tensor *wt = input(TVK_FLOAT32, 1, &c, wv, &w), *bt = input(TVK_FLOAT32, 1, &c, bv, &b);
  const double eps = 1e-5, tol = 16 * F32_EPS;
  for (int shape = 0; shape < 2; shape++) {
    const int64_t *sh = shape ? s2 : s4;
    int nd = shape ? 2 : 4;
    int64_t n = nn_numel(nd, sh), inner = n / (sh[0] * c);
    tvk_tensor *xt = input(TVK_FLOAT32, nd, sh, xv, &x);
    for (int mode = 0; mode < 4; mode++) {
      bool hw = mode & 1, hb = mode & 2;
      for (int64_t i = 0; i < n; i++) {
        int64_t ch = (i / inner) % c;
        ref[i] = (x[i] - m[ch]) / sqrt(v[ch] + eps) * (hw ? w[ch] : 1) + (hb ? b[ch] : 0);
      }
      char what[64];
      snprintf(what, sizeof what, "batchnorm %dd weight %d bias %d", nd, hw, hb);
      tvk_tensor *r = tvk_batchnorm(xt, hw ? wt : NULL, hb ? bt : NULL, mt, vt, eps);
      nn_check(what, r, TVK_FLOAT32, nd, sh, ref, tol, tol);
      if (mode == 3 && nd == 4)
        nn_expect(nn_kernels(tvk_batchnorm(xt, wt, bt, mt, vt, eps)) == 1,
                  "batchnorm is one kernel");
    }
    free(x);
    if (shape == 1) {
      /* errors */
      nn_check_error("batchnorm mean (4,)",
                     tvk_batchnorm(xt, NULL, NULL, nn_tensor(TVK_FLOAT32, 1, s2, xv), vt, eps),
                     TVK_ERR_SHAPE);
      nn_check_error("batchnorm var (3, 1)",
                     tvk_batchnorm(xt, NULL, NULL, mt,
                                   nn_tensor(TVK_FLOAT32, 2, (const int64_t[]){3, 1}, vv), eps),
                     TVK_ERR_SHAPE);
      nn_check_error("batchnorm weight (4,)",
                     tvk_batchnorm(xt, nn_tensor(TVK_FLOAT32, 1, s2, xv), NULL, mt, vt, eps),
                     TVK_ERR_SHAPE);
      nn_check_error(
          "batchnorm bias (1,)",
          tvk_batchnorm(xt, NULL, nn_tensor(TVK_FLOAT32, 1, (const int64_t[]){1}, xv), mt, vt, eps),
          TVK_ERR_SHAPE);
      nn_check_error("batchnorm var NULL", tvk_batchnorm(xt, wt, bt, mt, NULL, eps),
                     TVK_ERR_INVALID_ARG);
      nn_check_error("batchnorm mean NULL", tvk_batchnorm(xt, NULL, NULL, NULL, vt, eps),
                     TVK_ERR_INVALID_ARG);
      nn_check_error("batchnorm x 1-D", tvk_batchnorm(mt, NULL, NULL, mt, vt, eps), TVK_ERR_SHAPE);
      nn_check_error("batchnorm eps -1", tvk_batchnorm(xt, NULL, NULL, mt, vt, -1),
                     TVK_ERR_INVALID_ARG);
    }
  }
  /* float16 x with float32 statistics: float32 result */
  tvk_tensor *hx = input(TVK_FLOAT16, 2, s2, xv, &x);
  for (int64_t i = 0; i < 12; i++) ref[i] = (x[i] - m[i % 3]) / sqrt(v[i % 3] + eps);
  nn_check("batchnorm float16 x", tvk_batchnorm(hx, NULL, NULL, mt, vt, eps), TVK_FLOAT32, 2, s2,
           ref, tol, tol);
  free(x);
  free(xv), free(mv), free(vv), free(wv), free(bv), free(m), free(v), free(w), free(b);
  nn_finish();
}

/* ---------------------------------------------------------------- cumsum */

/* Running sums along ax; *scale: the largest prefix sum of |x| (for tolerances). */
static void ref_cumsum(const double *x, int nd, const int64_t *sh, int ax, double *out,
                       double *scale) {
  int64_t lanes = nn_numel(nd, sh) / sh[ax];
  *scale = 0;
  for (int64_t l = 0; l < lanes; l++) {
    double s = 0, sa = 0;
    for (int64_t k = 0; k < sh[ax]; k++) {
      int64_t i = at(nd, sh, ax, l, k);
      s += x[i], sa += fabs(x[i]);
      out[i] = s;
    }
    if (sa > *scale) *scale = sa;
  }
}

static void test_cumsum_axes(void **state) {
  (void)state;
  const int64_t sh[3] = {3, 4, 5};
  double *vals = nn_rand_vals(60, -2, 2), *x, ref[60], scale;
  tvk_tensor *t = input(TVK_FLOAT32, 3, sh, vals, &x);
  const int axes[] = {0, 1, 2, -1, -2, -3};
  for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) {
    ref_cumsum(x, 3, sh, norm_axis(axes[i], 3), ref, &scale);
    char what[64];
    snprintf(what, sizeof what, "cumsum axis %d", axes[i]);
    /* a sum of k <= 5 terms: k eps times the sum of their magnitudes */
    nn_check(what, tvk_cumsum(t, axes[i]), TVK_FLOAT32, 3, sh, ref, 0, 5 * F32_EPS * scale);
  }
  free(x);
  /* ints keep tvk_sum's dtype rules */
  double *iv = nn_rand_ints(60, -100, 100);
  const struct {
    tvk_dtype in, out;
  } dts[] = {
      {TVK_INT32, TVK_INT32}, {TVK_INT8, TVK_INT32}, {TVK_INT64, TVK_INT64}, {TVK_BOOL, TVK_INT32}};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    t = input(dts[i].in, 3, sh, iv, &x);
    ref_cumsum(x, 3, sh, 1, ref, &scale);
    char what[64];
    snprintf(what, sizeof what, "cumsum %s", tvk_dtype_name(dts[i].in));
    nn_check(what, tvk_cumsum(t, 1), dts[i].out, 3, sh, ref, 0, 0);
    free(x);
  }
  for (int i = 0; i < 60; i++) iv[i] = fabs(iv[i]);
  t = input(TVK_UINT8, 3, sh, iv, &x);
  ref_cumsum(x, 3, sh, 0, ref, &scale);
  nn_check("cumsum uint8", tvk_cumsum(t, 0), TVK_UINT32, 3, sh, ref, 0, 0);
  free(x);
  /* float16: summed in float32, rounded once (positive values: no cancellation) */
  double *pv = nn_rand_vals(60, 0, 1);
  t = input(TVK_FLOAT16, 3, sh, pv, &x);
  ref_cumsum(x, 3, sh, 2, ref, &scale);
  nn_check("cumsum float16", tvk_cumsum(t, -1), TVK_FLOAT16, 3, sh, ref, F16_EPS + 5 * F32_EPS, 0);
  free(x);
  /* 0-d and empty */
  nn_check("cumsum 0-d", tvk_cumsum(tvk_scalar(nn.ctx, TVK_INT16, 7), 0), TVK_INT32, 0, NULL,
           (const double[]){7}, 0, 0);
  const int64_t e[2] = {0, 3};
  nn_check("cumsum (0, 3)", tvk_cumsum(tvk_full(nn.ctx, TVK_FLOAT32, 2, e, 1), 1), TVK_FLOAT32, 2,
           e, ref, 0, 0);
  /* errors */
  nn_check_error("cumsum axis 3", tvk_cumsum(t, 3), TVK_ERR_INVALID_ARG);
  nn_check_error("cumsum axis -4", tvk_cumsum(t, -4), TVK_ERR_INVALID_ARG);
  nn_expect(tvk_cumsum(NULL, 0) == NULL, "cumsum(NULL) is NULL");
  free(vals), free(iv), free(pv);
  nn_finish();
}

/* Lengths 1, 7, 256 (the longest direct one), 257, 300 and 1000 (blocks),
 * along the last axis and along axis 0. Integer-valued floats sum exactly in
 * float32, so the block path's indexing is checked with no tolerance; random
 * floats with one. */
static void test_cumsum_lengths(void **state) {
  (void)state;
  const int64_t lens[] = {1, 7, 256, 257, 300, 1000};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t len = lens[li], n = 2 * len, sh[2] = {2, len}, sht[2] = {len, 2};
    double *iv = nn_rand_ints(n, -50, 50), *fv = nn_rand_vals(n, -1, 1), *x, scale;
    double *ref = malloc((size_t)n * sizeof *ref);
    char what[64];
    tvk_tensor *t = input(TVK_FLOAT32, 2, sh, iv, &x);
    ref_cumsum(x, 2, sh, 1, ref, &scale);
    snprintf(what, sizeof what, "cumsum exact (2, %lld) axis 1", (long long)len);
    nn_check(what, tvk_cumsum(t, 1), TVK_FLOAT32, 2, sh, ref, 0, 0);
    free(x);
    t = input(TVK_INT32, 2, sht, iv, &x);
    ref_cumsum(x, 2, sht, 0, ref, &scale);
    snprintf(what, sizeof what, "cumsum int32 (%lld, 2) axis 0", (long long)len);
    nn_check(what, tvk_cumsum(t, 0), TVK_INT32, 2, sht, ref, 0, 0);
    free(x);
    t = input(TVK_FLOAT32, 2, sht, fv, &x);
    ref_cumsum(x, 2, sht, 0, ref, &scale);
    snprintf(what, sizeof what, "cumsum float32 (%lld, 2) axis -2", (long long)len);
    /* in blocks or not, each output is a sum of at most len rounded terms */
    nn_check(what, tvk_cumsum(t, -2), TVK_FLOAT32, 2, sht, ref, 0, (double)len * F32_EPS * scale);
    free(x), free(iv), free(fv), free(ref);
  }
  nn_finish();
}

/* ---------------------------------------------------------------- argmax, argmin */

/* First index of the max (min) along ax; a NaN counts as the extreme. */
static void ref_arg(const double *x, int nd, const int64_t *sh, int ax, bool is_max, double *out) {
  int64_t lanes = nn_numel(nd, sh) / sh[ax];
  for (int64_t l = 0; l < lanes; l++) {
    int64_t best = 0;
    double bv = x[at(nd, sh, ax, l, 0)];
    for (int64_t k = 1; k < sh[ax] && !isnan(bv); k++) {
      double v = x[at(nd, sh, ax, l, k)];
      if (isnan(v) || (is_max ? v > bv : v < bv)) best = k, bv = v;
    }
    out[l] = (double)best;
  }
}

static void check_arg(tvk_tensor *t, const double *x, int nd, const int64_t *sh, const char *tag) {
  double ref[64];
  for (int ai = -nd; ai < nd; ai++) {
    int ax = norm_axis(ai, nd);
    for (int mx = 0; mx < 2; mx++) {
      ref_arg(x, nd, sh, ax, mx, ref);
      for (int keep = 0; keep < 2; keep++) {
        int64_t out[8];
        int ond = reduced(nd, sh, ax, keep, out);
        char what[80];
        snprintf(what, sizeof what, "%s %s axis %d keepdim %d", mx ? "argmax" : "argmin", tag, ai,
                 keep);
        nn_check(what, mx ? tvk_argmax(t, ai, keep) : tvk_argmin(t, ai, keep), TVK_INT32, ond, out,
                 ref, 0, 0);
      }
    }
  }
}

static void test_argmax(void **state) {
  (void)state;
  const int64_t sh[3] = {3, 4, 5};
  double *vals = nn_rand_vals(60, -2, 2), *x;
  tvk_tensor *t = input(TVK_FLOAT32, 3, sh, vals, &x);
  check_arg(t, x, 3, sh, "float32");
  free(x);
  /* ties everywhere: the first occurrence */
  double *iv = nn_rand_ints(60, 0, 3);
  t = input(TVK_INT32, 3, sh, iv, &x);
  check_arg(t, x, 3, sh, "int32 ties");
  free(x);
  t = input(TVK_UINT8, 3, sh, iv, &x);
  check_arg(t, x, 3, sh, "uint8 ties");
  free(x);
  t = input(TVK_BOOL, 3, sh, iv, &x);
  check_arg(t, x, 3, sh, "bool");
  free(x);
  t = input(TVK_FLOAT16, 3, sh, vals, &x);
  check_arg(t, x, 3, sh, "float16");
  free(x);
  /* -inf, +inf, NaN (torch: the first NaN), a row of all -inf, all equal */
  const double inf = INFINITY;
  const int64_t s2[2] = {6, 4};
  const double sv[24] = {-inf, -inf, -inf, -inf, 1, NAN,  3, NAN,  -inf, 2, inf, inf,
                         5,    5,    5,    5,    0, -inf, 7, -inf, NAN,  1, 2,   3};
  t = input(TVK_FLOAT32, 2, s2, sv, &x);
  check_arg(t, x, 2, s2, "specials");
  free(x);
  /* 0-d */
  nn_check("argmax 0-d", tvk_argmax(tvk_scalar(nn.ctx, TVK_FLOAT32, 2), 0, false), TVK_INT32, 0,
           NULL, (const double[]){0}, 0, 0);
  /* errors */
  nn_check_error("argmax axis 3", tvk_argmax(t, 3, false), TVK_ERR_INVALID_ARG);
  nn_check_error("argmin axis -3", tvk_argmin(t, -3, true), TVK_ERR_INVALID_ARG);
  nn_check_error("argmax of an empty axis",
                 tvk_argmax(tvk_full(nn.ctx, TVK_FLOAT32, 2, (const int64_t[]){2, 0}, 1), 1, false),
                 TVK_ERR_SHAPE);
  nn_expect(tvk_argmin(NULL, 0, false) == NULL, "argmin(NULL) is NULL");
  free(vals), free(iv);
  nn_finish();
}

/* ---------------------------------------------------------------- kernel counts */

/* The kernel counts docs/ops_norm.md gives, on realized inputs. */
static void test_norm_kernels(void **state) {
  (void)state;
  const int64_t sh[2] = {6, 5}, n6 = 6, c5 = 5, n1000[2] = {2, 1000};
  double *xv = nn_rand_vals(2000, -2, 2), lab[6] = {0, 4, 2, 1, 3, 0};
  tvk_tensor *x = nn_tensor(TVK_FLOAT32, 2, sh, xv), *labels = nn_tensor(TVK_INT32, 1, &n6, lab);
  tvk_tensor *w = nn_tensor(TVK_FLOAT32, 1, &c5, xv), *b = nn_tensor(TVK_FLOAT32, 1, &c5, xv + 5);
  tvk_tensor *xl = nn_tensor(TVK_FLOAT32, 2, n1000, xv);
  tvk_tensor *ins[5] = {x, labels, w, b, xl};
  tvk_status st = tvk_realize(5, ins);
  nn_expect(st == TVK_OK, "realize the inputs: %s", tvk_status_name(st));
  const int ax1[1] = {1};
  nn_expect_kernels("softmax", tvk_softmax(x, -1), 3);
  nn_expect_kernels("log_softmax", tvk_log_softmax(x, 1), 3);
  nn_expect_kernels("logsumexp", tvk_logsumexp(x, 1, false), 2);
  nn_expect_kernels("cross_entropy", tvk_cross_entropy(x, labels), 3);
  nn_expect_kernels("var", tvk_var(x, 1, ax1, false, 1), 2);
  nn_expect_kernels("std", tvk_std(x, 1, ax1, true, 1), 2);
  nn_expect_kernels("layernorm", tvk_layernorm(x, 1, w, b, 1e-5), 3);
  nn_expect_kernels("cumsum of 5", tvk_cumsum(x, 1), 1);
  nn_expect_kernels("cumsum of 1000 (blocks)", tvk_cumsum(xl, 1), 3);
  nn_expect_kernels("argmax", tvk_argmax(x, 1, false), 2);
  nn_expect_kernels("argmin", tvk_argmin(x, 0, true), 2);
  free(xv);
  nn_finish();
}

const struct CMUnitTest nn_norm_tests[] = {
    NN_TEST(test_softmax_axes),  NN_TEST(test_softmax_stability), NN_TEST(test_softmax_dtypes),
    NN_TEST(test_cross_entropy), NN_TEST(test_var_std),           NN_TEST(test_layernorm),
    NN_TEST(test_batchnorm),     NN_TEST(test_cumsum_axes),       NN_TEST(test_cumsum_lengths),
    NN_TEST(test_argmax),        NN_TEST(test_norm_kernels),      NN_TEST(test_group_norm),
    NN_TEST(test_clip),
};
const size_t nn_norm_count = sizeof nn_norm_tests / sizeof nn_norm_tests[0];
