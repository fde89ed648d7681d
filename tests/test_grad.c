/* The gradient suite (tvk_grad, tvk_grad_with), an outside user's test: tvk.h
 * only, one run per device (`test_grad CPU`, `test_grad VK`; exit 77: no such
 * device). Every case builds a float64 scalar loss from small random inputs
 * and compares tvk's gradient with central finite differences of the same
 * loss evaluated by tvk (h = 1e-6: errors near 1e-9, far inside the 1e-6
 * tolerance), or with a closed form where one exists (softmax + cross
 * entropy, an upstream gradient, a variable used twice). */
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

enum { MAXIN = 4, MAXEL = 64 };

/* One case's inputs: host values and shapes; the loss is built by fn. */
typedef struct {
  int n;
  int ndim[MAXIN];
  int64_t shape[MAXIN][4];
  double v[MAXIN][MAXEL];
} Inputs;

typedef tvk_tensor *(*LossFn)(tvk_ctx *ctx, tvk_tensor **in);

static uint64_t rng = 0x853c49e6748fea9bULL;
static double urand(double lo, double hi) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53;
}

static int64_t numel_of(const Inputs *in, int i) {
  int64_t n = 1;
  for (int d = 0; d < in->ndim[i]; d++) n *= in->shape[i][d];
  return n;
}

/* Adds input i of the given shape, values uniform in [lo, hi). */
static void add_input(Inputs *in, int nd, const int64_t *shape, double lo, double hi) {
  int i = in->n++;
  in->ndim[i] = nd;
  memcpy(in->shape[i], shape, (size_t)nd * sizeof *shape);
  assert_true(numel_of(in, i) <= MAXEL);
  for (int64_t k = 0; k < numel_of(in, i); k++) in->v[i][k] = urand(lo, hi);
}

static double loss_of(Suite *s, LossFn fn, const Inputs *in) {
  tvk_tensor *t[MAXIN];
  size_t scope = tvk_scope_begin(s->ctx);
  for (int i = 0; i < in->n; i++)
    t[i] = tvk_from_data(s->ctx, TVK_FLOAT64, in->ndim[i], in->shape[i], in->v[i]);
  double l = NAN;
  tvk_tensor *loss = fn(s->ctx, t);
  if (tvk_to_host(loss, &l, sizeof l) != TVK_OK) fail_msg("loss: %s", tvk_ctx_error(s->ctx));
  tvk_scope_end(s->ctx, scope, 0, NULL);
  return l;
}

/* tvk's gradient of every input against central differences. */
static void check_fd(Suite *s, const char *what, LossFn fn, Inputs in) {
  tvk_tensor *t[MAXIN], *g[MAXIN];
  size_t scope = tvk_scope_begin(s->ctx);
  for (int i = 0; i < in.n; i++)
    t[i] = tvk_from_data(s->ctx, TVK_FLOAT64, in.ndim[i], in.shape[i], in.v[i]);
  tvk_tensor *loss = fn(s->ctx, t);
  if (tvk_grad(loss, in.n, t, g) != TVK_OK) fail_msg("%s: grad: %s", what, tvk_ctx_error(s->ctx));
  double got[MAXIN][MAXEL];
  for (int i = 0; i < in.n; i++)
    if (tvk_to_host(g[i], got[i], sizeof got[i]) != TVK_OK)
      fail_msg("%s: %s", what, tvk_ctx_error(s->ctx));
  tvk_scope_end(s->ctx, scope, 0, NULL);
  for (int i = 0; i < in.n; i++)
    for (int64_t k = 0; k < numel_of(&in, i); k++) {
      double x = in.v[i][k], h = 1e-6 * fmax(1, fabs(x));
      in.v[i][k] = x + h;
      double up = loss_of(s, fn, &in);
      in.v[i][k] = x - h;
      double down = loss_of(s, fn, &in);
      in.v[i][k] = x;
      double want = (up - down) / (2 * h);
      if (!(fabs(got[i][k] - want) <= 1e-6 * (1 + fabs(want))))
        fail_msg("%s: d/d in%d[%lld] = %.12g, finite differences %.12g", what, i, (long long)k,
                 got[i][k], want);
    }
}

static int setup(void **state) {
  Suite *s = *state;
  return tvk_ctx_create(s->device, &s->ctx) == TVK_OK ? 0 : -1;
}

/* A Vulkan validation message (TVK_VALIDATE=1; each is printed) fails the test. */
static int teardown(void **state) {
  Suite *s = *state;
  return api_ctx_close_checked(&s->ctx, s->device);
}

/* ---------------------------------------------------------------- primitive ops */

static tvk_tensor *f_arith(tvk_ctx *c, tvk_tensor **x) { /* broadcasting b (4,) over a (3, 4) */
  (void)c;
  tvk_tensor *t = tvk_sub(tvk_add(tvk_mul(x[0], x[1]), tvk_div(x[0], x[1])), tvk_neg(x[1]));
  return tvk_sum(t, 0, NULL, false);
}
static void test_arith(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 4}, -2, 2);
  add_input(&in, 1, (int64_t[]){4}, 0.5, 2);
  check_fd(*state, "a*b + a/b + b", f_arith, in);
}

static tvk_tensor *f_unary(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *a = x[0], *b = x[1];
  tvk_tensor *t = tvk_add(tvk_add(tvk_exp(a), tvk_log(b)), tvk_add(tvk_sqrt(b), tvk_sin(a)));
  t = tvk_add(t, tvk_add(tvk_recip(b), tvk_exp2(tvk_log2(tvk_mul(b, b)))));
  t = tvk_add(t, tvk_erf(a));
  return tvk_sum(t, 0, NULL, false);
}
static void test_unary(void **state) {
  Inputs in = {0};
  add_input(&in, 1, (int64_t[]){6}, -1.5, 1.5);
  add_input(&in, 1, (int64_t[]){6}, 0.3, 3);
  check_fd(*state, "exp, log, sqrt, sin, 1/x, exp2(log2), erf", f_unary, in);
}

static tvk_tensor *f_pow(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  return tvk_sum(tvk_pow(x[0], x[1]), 0, NULL, false);
}
static void test_pow(void **state) {
  Inputs in = {0};
  add_input(&in, 1, (int64_t[]){5}, 0.5, 2);
  add_input(&in, 1, (int64_t[]){5}, -2, 2);
  check_fd(*state, "pow", f_pow, in);
}

static tvk_tensor *f_select(tvk_ctx *c, tvk_tensor **x) {
  tvk_tensor *a = x[0], *b = x[1];
  tvk_tensor *t = tvk_add(tvk_maximum(a, b), tvk_minimum(a, tvk_mul(b, b)));
  t = tvk_add(t, tvk_where(tvk_gt(a, tvk_scalar(c, TVK_FLOAT64, 0)), tvk_mul(a, a), b));
  return tvk_sum(t, 0, NULL, false);
}
static void test_select(void **state) {
  Inputs in = {0}; /* distinct values: no ties, and no input sits at a kink */
  add_input(&in, 1, (int64_t[]){8}, -2, 2);
  add_input(&in, 1, (int64_t[]){8}, -2, 2);
  check_fd(*state, "maximum, minimum, where", f_select, in);
}

/* A tie of maximum gives each side half: d max(x, x) / dx = 1, split. */
/* tvk_detach: sum(x * detach(x) + detach(y)) has gradient x (not 2x) for x
 * and zeros for y, while its value uses both; log_softmax, whose max is
 * detached inside, still matches finite differences (test_softmax). */
static void test_detach(void **state) {
  Suite *s = *state;
  double v[3] = {1, -2, 3}, w[3] = {0.5, 4, -1}, gx[3], gy[3], l = 0;
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, v);
  tvk_tensor *y = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, w), *g[2];
  tvk_tensor *d = tvk_detach(x);
  assert_non_null(d);
  assert_int_equal(tvk_dtype_of(d), TVK_FLOAT64);
  tvk_tensor *loss = tvk_sum(tvk_add(tvk_mul(x, d), tvk_detach(y)), 0, NULL, false);
  assert_int_equal(tvk_grad(loss, 2, (tvk_tensor *[]){x, y}, g), TVK_OK);
  assert_int_equal(tvk_to_host(loss, &l, sizeof l), TVK_OK);
  assert_int_equal(tvk_to_host(g[0], gx, sizeof gx), TVK_OK);
  assert_int_equal(tvk_to_host(g[1], gy, sizeof gy), TVK_OK);
  assert_true(l == 1 + 4 + 9 + 0.5 + 4 - 1);
  for (int i = 0; i < 3; i++) assert_true(gx[i] == v[i] && gy[i] == 0);
  assert_null(tvk_detach(NULL));
  tvk_release(x), tvk_release(y), tvk_release(d), tvk_release(loss);
  tvk_release(g[0]), tvk_release(g[1]);
}

static void test_max_tie(void **state) {
  Suite *s = *state;
  double v[3] = {1, -2, 3}, got[3];
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, v), *g;
  tvk_tensor *l =
      tvk_sum(tvk_max(tvk_reshape(tvk_cat(2, (tvk_tensor *[]){x, x}, 0), 2, (int64_t[]){2, 3}), 1,
                      (int[]){0}, false),
              0, NULL, false);
  assert_int_equal(tvk_grad(l, 1, &x, &g), TVK_OK);
  assert_int_equal(tvk_to_host(g, got, sizeof got), TVK_OK);
  for (int i = 0; i < 3; i++) assert_true(got[i] == 1.0); /* 0.5 + 0.5 */
  tvk_release(x), tvk_release(l), tvk_release(g);
}

/* relu, abs and sign at their kinks: the gradient at +-0 is 0 (torch's, JAX's
 * and tinygrad's subgradient), elsewhere the slope; and the values keep
 * their edges (abs(-0) = +0, NaN stays NaN). float32 and float64. */
static void test_kinks(void **state) {
  Suite *s = *state;
  const double v[5] = {0.0, -0.0, 1.5, -2.0, NAN};
  const double want[3][4] = {{0, 0, 1, 0}, {0, 0, 1, -1}, {0, 0, 0, 0}}; /* relu abs sign */
  const char *names[3] = {"relu", "abs", "sign"};
  tvk_tensor *(*fns[3])(tvk_tensor *) = {tvk_relu, tvk_abs, tvk_sign};
  const tvk_dtype dts[2] = {TVK_FLOAT32, TVK_FLOAT64};
  for (int d = 0; d < 2; d++)
    for (int f = 0; f < 3; f++) {
      size_t scope = tvk_scope_begin(s->ctx);
      tvk_tensor *x = tvk_cast(tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){4}, v), dts[d]);
      x = tvk_contiguous(x);
      assert_int_equal(tvk_realize(1, &x), TVK_OK);
      tvk_tensor *g = NULL, *l = tvk_sum(fns[f](x), 0, NULL, false);
      if (tvk_grad(l, 1, &x, &g) != TVK_OK) fail_msg("%s: %s", names[f], tvk_ctx_error(s->ctx));
      double got[4];
      assert_int_equal(tvk_to_host(tvk_cast(g, TVK_FLOAT64), got, sizeof got), TVK_OK);
      for (int i = 0; i < 4; i++)
        if (got[i] != want[f][i] || signbit(got[i]) != signbit(want[f][i]))
          fail_msg("%s %s'(%g) = %g, expected %g", dts[d] == TVK_FLOAT32 ? "float32" : "float64",
                   names[f], v[i], got[i], want[f][i]);
      /* the values at the edges: relu(-0) = sign(-0) = -0, abs(-0) = +0,
       * NaN in NaN out */
      tvk_tensor *xn = tvk_cast(tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){5}, v), dts[d]);
      double y[5];
      assert_int_equal(tvk_to_host(tvk_cast(fns[f](xn), TVK_FLOAT64), y, sizeof y), TVK_OK);
      const double zero_out[3][2] = {{0.0, -0.0}, {0.0, 0.0}, {0.0, -0.0}};
      for (int i = 0; i < 2; i++)
        if (y[i] != 0 || signbit(y[i]) != signbit(zero_out[f][i]))
          fail_msg("%s(%g) = %g", names[f], v[i], y[i]);
      if (!isnan(y[4])) fail_msg("%s(NaN) = %g", names[f], y[4]);
      tvk_scope_end(s->ctx, scope, 0, NULL);
    }
}

static tvk_tensor *f_reduce(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *a = x[0]; /* (2, 3, 4) */
  tvk_tensor *t = tvk_sum(tvk_mul(tvk_sum(a, 2, (int[]){0, 2}, true), a), 0, NULL, false);
  t = tvk_add(t, tvk_sum(tvk_max(a, 1, (int[]){1}, false), 0, NULL, false));
  t = tvk_add(t, tvk_sum(tvk_prod(a, 1, (int[]){2}, false), 0, NULL, false));
  return tvk_add(t, tvk_mean(tvk_mul(a, a), 0, NULL, false));
}
static void test_reduce(void **state) {
  Inputs in = {0};
  add_input(&in, 3, (int64_t[]){2, 3, 4}, 0.5, 1.5);
  check_fd(*state, "sum over axes, max, prod, mean", f_reduce, in);
}

static tvk_tensor *f_movement(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *a = x[0], *w = x[1]; /* a (3, 4), w (5, 4, 2) */
  tvk_tensor *t = tvk_flip(a, 1, (int[]){1});
  t = tvk_shrink(t, (const int64_t[][2]){{1, 3}, {0, 4}});   /* (2, 4) */
  t = tvk_pad(t, (const int64_t[][2]){{2, 1}, {0, 0}}, 0.5); /* (5, 4) */
  t = tvk_expand(tvk_reshape(t, 3, (int64_t[]){5, 4, 1}), 3, (int64_t[]){5, 4, 2});
  t = tvk_mul(t, w);
  t = tvk_permute(t, (int[]){2, 0, 1}); /* (2, 5, 4) */
  t = tvk_reshape(t, 2, (int64_t[]){10, 4});
  return tvk_sum(tvk_mul(t, tvk_transpose(tvk_reshape(t, 2, (int64_t[]){4, 10}), 0, 1)), 0, NULL,
                 false);
}
static void test_movement(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 4}, -1, 1);
  add_input(&in, 3, (int64_t[]){5, 4, 2}, -1, 1);
  check_fd(*state, "flip, shrink, pad, reshape, expand, permute, transpose", f_movement, in);
}

static tvk_tensor *f_twice(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  return tvk_sum(tvk_add(tvk_mul(x[0], x[0]), x[0]), 0, NULL, false);
}
/* x used twice: the gradients add up to 2x + 1 exactly. */
static void test_accumulate(void **state) {
  Suite *s = *state;
  double v[4] = {0.5, -1.25, 2, 3.5}, got[4];
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){4}, v), *g;
  tvk_tensor *l = f_twice(s->ctx, &x);
  assert_int_equal(tvk_grad(l, 1, &x, &g), TVK_OK);
  assert_int_equal(tvk_to_host(g, got, sizeof got), TVK_OK);
  for (int i = 0; i < 4; i++) assert_true(got[i] == 2 * v[i] + 1);
  tvk_release(x), tvk_release(l), tvk_release(g);
}

/* ---------------------------------------------------------------- NN ops */

static tvk_tensor *f_matmul(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  return tvk_sum(tvk_mul(tvk_matmul(x[0], x[1]), x[2]), 0, NULL, false);
}
static void test_matmul(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 5}, -1, 1);
  add_input(&in, 2, (int64_t[]){5, 4}, -1, 1);
  add_input(&in, 2, (int64_t[]){3, 4}, -1, 1);
  check_fd(*state, "matmul", f_matmul, in);
}

static tvk_tensor *f_layernorm(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *y = tvk_layernorm(x[0], 1, x[1], x[2], 1e-5);
  return tvk_sum(tvk_mul(y, y), 0, NULL, false);
}
static void test_layernorm(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 6}, -2, 2);
  add_input(&in, 1, (int64_t[]){6}, 0.5, 1.5);
  add_input(&in, 1, (int64_t[]){6}, -0.5, 0.5);
  check_fd(*state, "layernorm", f_layernorm, in);
}

static tvk_tensor *f_softmax(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *p = tvk_softmax(x[0], 1);
  return tvk_sum(tvk_add(tvk_mul(p, x[1]), tvk_log_softmax(x[0], 0)), 0, NULL, false);
}
static void test_softmax(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 5}, -2, 2);
  add_input(&in, 2, (int64_t[]){3, 5}, -1, 1);
  check_fd(*state, "softmax, log_softmax", f_softmax, in);
}

/* cross entropy's gradient is (softmax(logits) - onehot) / N, in closed form. */
static void test_cross_entropy(void **state) {
  Suite *s = *state;
  enum { N = 4, C = 5 };
  double lg[N * C], got[N * C];
  int32_t lab[N] = {0, 3, 4, 1};
  for (int i = 0; i < N * C; i++) lg[i] = urand(-3, 3);
  tvk_tensor *L = tvk_from_data(s->ctx, TVK_FLOAT64, 2, (int64_t[]){N, C}, lg), *g;
  tvk_tensor *y = tvk_from_data(s->ctx, TVK_INT32, 1, (int64_t[]){N}, lab);
  tvk_tensor *loss = tvk_cross_entropy(L, y);
  assert_int_equal(tvk_grad(loss, 1, &L, &g), TVK_OK);
  assert_int_equal(tvk_to_host(g, got, sizeof got), TVK_OK);
  for (int r = 0; r < N; r++) {
    double m = -INFINITY, z = 0;
    for (int k = 0; k < C; k++) m = fmax(m, lg[r * C + k]);
    for (int k = 0; k < C; k++) z += exp(lg[r * C + k] - m);
    for (int k = 0; k < C; k++) {
      double want = (exp(lg[r * C + k] - m) / z - (k == lab[r])) / N;
      assert_true(fabs(got[r * C + k] - want) <= 1e-12);
    }
  }
  tvk_release(L), tvk_release(y), tvk_release(loss), tvk_release(g);
}

static tvk_tensor *f_conv(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *y =
      tvk_conv2d(x[0], x[1], x[2], (const int64_t[]){2, 1}, (const int64_t[]){1, 0, 1, 1}, NULL, 1);
  return tvk_sum(tvk_mul(y, y), 0, NULL, false);
}
static void test_conv2d(void **state) {
  Inputs in = {0};
  add_input(&in, 4, (int64_t[]){1, 2, 5, 4}, -1, 1); /* x (N, Cin, H, W) */
  add_input(&in, 4, (int64_t[]){3, 2, 3, 2}, -1, 1); /* w (Cout, Cin, kh, kw) */
  add_input(&in, 1, (int64_t[]){3}, -1, 1);
  check_fd(*state, "conv2d (strided, padded)", f_conv, in);
}

static tvk_tensor *f_pools(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *m = tvk_max_pool2d(x[0], (const int64_t[]){2, 2}, NULL, NULL);
  tvk_tensor *a = tvk_avg_pool2d(x[0], (const int64_t[]){3, 2}, (const int64_t[]){1, 2}, NULL);
  return tvk_add(tvk_sum(tvk_mul(m, m), 0, NULL, false), tvk_sum(tvk_mul(a, a), 0, NULL, false));
}
static void test_pools(void **state) {
  Inputs in = {0};
  add_input(&in, 3, (int64_t[]){2, 4, 4}, -1, 1);
  check_fd(*state, "max_pool2d, avg_pool2d", f_pools, in);
}

/* Dropout in training: the mask is fixed by the seed, so the loss is a smooth
 * function of x and finite differences see the same mask. */
static tvk_tensor *f_dropout(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *y = tvk_dropout(x[0], 0.4, true, 1234);
  return tvk_sum(tvk_mul(tvk_mul(y, y), x[1]), 0, NULL, false);
}
static void test_dropout(void **state) {
  Suite *s = *state;
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){4, 6}, -2, 2);
  add_input(&in, 2, (int64_t[]){4, 6}, 0.5, 1.5);
  check_fd(s, "dropout (training)", f_dropout, in);
  /* d sum(dropout(x)) / dx is the mask times 1 / (1 - p): dropout of ones */
  enum { N = 24 };
  const double p = 0.4;
  double v[N], got[N], mask[N];
  for (int i = 0; i < N; i++) v[i] = urand(-2, 2);
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT64, 2, (int64_t[]){4, 6}, v), *g;
  tvk_tensor *l = tvk_sum(tvk_dropout(x, p, true, 1234), 0, NULL, false);
  tvk_tensor *m =
      tvk_dropout(tvk_full(s->ctx, TVK_FLOAT64, 2, (int64_t[]){4, 6}, 1), p, true, 1234);
  assert_int_equal(tvk_grad(l, 1, &x, &g), TVK_OK);
  assert_int_equal(tvk_to_host(g, got, sizeof got), TVK_OK);
  assert_int_equal(tvk_to_host(m, mask, sizeof mask), TVK_OK);
  int kept = 0;
  for (int i = 0; i < N; i++) {
    assert_true(got[i] == mask[i]);
    assert_true(got[i] == 0 || got[i] == 1 / (1 - p));
    kept += got[i] != 0;
  }
  assert_true(kept > 0 && kept < N); /* both kinds occur: the mask is not trivial */
  tvk_release(x), tvk_release(l), tvk_release(m), tvk_release(g);
}

/* Rows 0 and 3 are picked twice (their gradients add), row 2 never (zeros),
 * and index 7 is out of [0, 5): a zero row that reads no weight. */
static tvk_tensor *f_embedding(tvk_ctx *c, tvk_tensor **x) {
  int32_t idx[6] = {0, 3, 3, 4, 7, 0};
  tvk_tensor *i = tvk_from_data(c, TVK_INT32, 2, (int64_t[]){2, 3}, idx);
  tvk_tensor *e = tvk_embedding(x[0], i); /* (2, 3, 3) */
  return tvk_add(tvk_sum(tvk_mul(e, x[1]), 0, NULL, false),
                 tvk_sum(tvk_mul(tvk_mul(e, e), e), 0, NULL, false));
}
static void test_embedding(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){5, 3}, -1, 1);    /* weight (V, D) */
  add_input(&in, 3, (int64_t[]){2, 3, 3}, -1, 1); /* the result's coefficients */
  check_fd(*state, "embedding (repeated rows)", f_embedding, in);
}

/* Along both axes, with repeated indices, an index shorter than t in a dim
 * other than the axis, and an index out of range (it selects nothing). */
static tvk_tensor *f_gather(tvk_ctx *c, tvk_tensor **x) {
  int32_t i0[6] = {0, 2, 2, 2, 0, 1}, i1[6] = {3, 3, 0, 1, 2, -1};
  tvk_tensor *a = tvk_gather(x[0], 0, tvk_from_data(c, TVK_INT32, 2, (int64_t[]){2, 3}, i0));
  tvk_tensor *b = tvk_gather(x[0], 1, tvk_from_data(c, TVK_INT32, 2, (int64_t[]){3, 2}, i1));
  return tvk_add(tvk_sum(tvk_mul(tvk_mul(a, a), x[1]), 0, NULL, false),
                 tvk_sum(tvk_mul(b, x[2]), 0, NULL, false));
}
static void test_gather(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){3, 4}, -1, 1); /* t */
  add_input(&in, 2, (int64_t[]){2, 3}, -1, 1);
  add_input(&in, 2, (int64_t[]){3, 2}, -1, 1);
  check_fd(*state, "gather (axes 0 and 1)", f_gather, in);
}

static tvk_tensor *f_cat_stack(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *a = x[0], *b = x[1], *d = x[2];               /* (2, 3), (1, 3), (2, 3) */
  tvk_tensor *c0 = tvk_cat(2, (tvk_tensor *[]){a, b}, 0);   /* (3, 3) */
  tvk_tensor *c1 = tvk_cat(2, (tvk_tensor *[]){d, a}, 1);   /* (2, 6) */
  tvk_tensor *st = tvk_stack(2, (tvk_tensor *[]){a, d}, 1); /* (2, 2, 3) */
  tvk_tensor *t = tvk_add(tvk_sum(tvk_mul(c0, x[3]), 0, NULL, false),
                          tvk_sum(tvk_mul(tvk_mul(c1, c1), c1), 0, NULL, false));
  return tvk_add(t, tvk_sum(tvk_sin(tvk_mul(st, tvk_flip(st, 1, (int[]){1}))), 0, NULL, false));
}
static void test_cat_stack(void **state) {
  Inputs in = {0};
  add_input(&in, 2, (int64_t[]){2, 3}, -1, 1);
  add_input(&in, 2, (int64_t[]){1, 3}, -1, 1);
  add_input(&in, 2, (int64_t[]){2, 3}, -1, 1);
  add_input(&in, 2, (int64_t[]){3, 3}, -1, 1);
  check_fd(*state, "cat, stack", f_cat_stack, in);
}

static tvk_tensor *f_attention(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  tvk_tensor *o = tvk_scaled_dot_product_attention(x[0], x[1], x[2], NULL, true);
  return tvk_sum(tvk_mul(o, x[3]), 0, NULL, false);
}
static void test_attention(void **state) {
  Inputs in = {0};
  add_input(&in, 3, (int64_t[]){2, 4, 3}, -1.5, 1.5); /* q (B, L, E) */
  add_input(&in, 3, (int64_t[]){2, 4, 3}, -1.5, 1.5); /* k (B, S, E) */
  add_input(&in, 3, (int64_t[]){2, 4, 2}, -1, 1);     /* v (B, S, Ev) */
  add_input(&in, 3, (int64_t[]){2, 4, 2}, -1, 1);     /* the output's coefficients */
  check_fd(*state, "scaled_dot_product_attention (causal)", f_attention, in);
}

/* Inference form: gradients for x, weight, mean and var (bias, a fifth
 * input, is data). */
static tvk_tensor *f_batchnorm(tvk_ctx *c, tvk_tensor **x) {
  double bv[3] = {0.25, -0.5, 1};
  tvk_tensor *b = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){3}, bv);
  tvk_tensor *y = tvk_batchnorm(x[0], x[1], b, x[2], x[3], 1e-5);
  return tvk_sum(tvk_mul(y, y), 0, NULL, false);
}
static void test_batchnorm(void **state) {
  Inputs in = {0};
  add_input(&in, 4, (int64_t[]){2, 3, 2, 2}, -2, 2); /* x (N, C, H, W) */
  add_input(&in, 1, (int64_t[]){3}, 0.5, 1.5);       /* weight */
  add_input(&in, 1, (int64_t[]){3}, -0.5, 0.5);      /* mean */
  add_input(&in, 1, (int64_t[]){3}, 0.5, 2);         /* var */
  check_fd(*state, "batchnorm (inference)", f_batchnorm, in);
}

/* Training form: the loss reads x through the batch statistics too. */
static tvk_tensor *bn_train_loss(tvk_tensor *y, tvk_tensor *coef) {
  return tvk_add(tvk_sum(tvk_mul(y, coef), 0, NULL, false),
                 tvk_sum(tvk_mul(tvk_mul(y, y), y), 0, NULL, false));
}
static tvk_tensor *f_bn_train(tvk_ctx *c, tvk_tensor **x) {
  (void)c;
  return bn_train_loss(tvk_batchnorm_train(x[0], x[1], x[2], NULL, NULL, 0.1, 1e-5), x[3]);
}
/* The same with running statistics: their updates are pending assigns, which
 * stay out of the loss's graph (tvk_grad refuses an assign in it). */
static tvk_tensor *f_bn_train_running(tvk_ctx *c, tvk_tensor **x) {
  double rm[2] = {0.5, -1}, rv[2] = {2, 0.25};
  tvk_tensor *m = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){2}, rm);
  tvk_tensor *v = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){2}, rv);
  return bn_train_loss(tvk_batchnorm_train(x[0], x[1], x[2], m, v, 0.1, 1e-5), x[3]);
}
static void test_batchnorm_train(void **state) {
  Inputs in = {0};
  add_input(&in, 4, (int64_t[]){3, 2, 2, 2}, -1, 3); /* x (N, C, H, W): 12 per channel */
  add_input(&in, 1, (int64_t[]){2}, 0.5, 1.5);       /* weight */
  add_input(&in, 1, (int64_t[]){2}, -0.5, 0.5);      /* bias */
  add_input(&in, 4, (int64_t[]){3, 2, 2, 2}, -1, 1); /* the output's coefficients */
  check_fd(*state, "batchnorm_train", f_bn_train, in);
  check_fd(*state, "batchnorm_train with running statistics", f_bn_train_running, in);
}

/* The reference: batch statistics of x (N, C, S) in double, the output, and
 * PyTorch's running-statistics update. */
static void bn_train_ref(const double *x, int N, int C, int S, const double *w, const double *b,
                         double eps, double momentum, double *y, double *rm, double *rv,
                         double *mean, double *var) {
  double n = (double)N * S;
  for (int c = 0; c < C; c++) {
    double sum = 0, ss = 0;
    for (int i = 0; i < N; i++)
      for (int k = 0; k < S; k++) sum += x[(i * C + c) * S + k];
    mean[c] = sum / n;
    for (int i = 0; i < N; i++)
      for (int k = 0; k < S; k++) {
        double d = x[(i * C + c) * S + k] - mean[c];
        ss += d * d;
      }
    var[c] = ss / n;
    for (int i = 0; i < N; i++)
      for (int k = 0; k < S; k++) {
        int j = (i * C + c) * S + k;
        y[j] = (x[j] - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c];
      }
    rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
    rv[c] = (1 - momentum) * rv[c] + momentum * ss / (n - 1);
  }
}

static void expect_close(const char *what, const double *got, const double *want, int n) {
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-12 * (1 + fabs(want[i]))))
      fail_msg("%s[%d] = %.17g, want %.17g", what, i, got[i], want[i]);
}

/* Two calls on one pair of running statistics (momentum 0.1): the second
 * reads the first's update, still pending when it is made. Outputs, the
 * running statistics and the gradients of a loss of the second output
 * (taken with the updates pending, realized in one tvk_realize with them)
 * against double loops; the gradient is batch norm's closed form. */
static void test_batchnorm_train_running(void **state) {
  Suite *s = *state;
  enum { N = 3, C = 2, S = 5, X = N * C * S };
  const double mom = 0.1, eps = 1e-5;
  double x1[X], x2[X], up[X], w[C], b[C], rm[C], rv[C];
  for (int i = 0; i < X; i++) x1[i] = urand(1, 3), x2[i] = urand(-2, 0), up[i] = urand(-1, 1);
  for (int c = 0; c < C; c++)
    w[c] = urand(0.5, 1.5), b[c] = urand(-0.5, 0.5), rm[c] = urand(-1, 1), rv[c] = urand(0.5, 2);
  const int64_t xs[3] = {N, C, S};
  tvk_tensor *X1 = tvk_from_data(s->ctx, TVK_FLOAT64, 3, xs, x1);
  tvk_tensor *X2 = tvk_from_data(s->ctx, TVK_FLOAT64, 3, xs, x2);
  tvk_tensor *U = tvk_from_data(s->ctx, TVK_FLOAT64, 3, xs, up);
  tvk_tensor *W = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){C}, w);
  tvk_tensor *B = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){C}, b);
  tvk_tensor *RM = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){C}, rm);
  tvk_tensor *RV = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){C}, rv);
  tvk_tensor *y1 = tvk_batchnorm_train(X1, W, B, RM, RV, mom, eps);
  tvk_tensor *y2 = tvk_batchnorm_train(X2, W, B, RM, RV, mom, eps);
  if (tvk_status_of(y2) != TVK_OK) fail_msg("batchnorm_train: %s", tvk_error_of(y2));
  tvk_tensor *loss = tvk_sum(tvk_mul(y2, U), 0, NULL, false), *g[3];
  if (tvk_grad(loss, 3, (tvk_tensor *[]){X2, W, B}, g) != TVK_OK)
    fail_msg("grad: %s", tvk_ctx_error(s->ctx));
  tvk_tensor *all[8] = {y1, y2, loss, g[0], g[1], g[2], RM, RV};
  if (tvk_realize(8, all) != TVK_OK) fail_msg("realize: %s", tvk_ctx_error(s->ctx));
  double got1[X], got2[X], grm[C], grv[C], gx[X], gw[C], gb[C];
  assert_int_equal(tvk_to_host(y1, got1, sizeof got1), TVK_OK);
  assert_int_equal(tvk_to_host(y2, got2, sizeof got2), TVK_OK);
  assert_int_equal(tvk_to_host(RM, grm, sizeof grm), TVK_OK);
  assert_int_equal(tvk_to_host(RV, grv, sizeof grv), TVK_OK);
  assert_int_equal(tvk_to_host(g[0], gx, sizeof gx), TVK_OK);
  assert_int_equal(tvk_to_host(g[1], gw, sizeof gw), TVK_OK);
  assert_int_equal(tvk_to_host(g[2], gb, sizeof gb), TVK_OK);
  double ref1[X], ref2[X], mean[C], var[C], wx[X], ww[C], wb[C];
  bn_train_ref(x1, N, C, S, w, b, eps, mom, ref1, rm, rv, mean, var);
  bn_train_ref(x2, N, C, S, w, b, eps, mom, ref2, rm, rv, mean, var);
  expect_close("y1", got1, ref1, X);
  expect_close("y2", got2, ref2, X);
  expect_close("running_mean", grm, rm, C);
  expect_close("running_var", grv, rv, C);
  /* dx = w rstd (u - mean(u) - xhat mean(u xhat)), dw = sum(u xhat), db = sum(u) */
  for (int c = 0; c < C; c++) {
    double rstd = 1 / sqrt(var[c] + eps), su = 0, sux = 0, n = N * S;
    for (int i = 0; i < N; i++)
      for (int k = 0; k < S; k++) {
        int j = (i * C + c) * S + k;
        su += up[j], sux += up[j] * (x2[j] - mean[c]) * rstd;
      }
    ww[c] = sux, wb[c] = su;
    for (int i = 0; i < N; i++)
      for (int k = 0; k < S; k++) {
        int j = (i * C + c) * S + k;
        double xhat = (x2[j] - mean[c]) * rstd;
        wx[j] = w[c] * rstd * (up[j] - su / n - xhat * sux / n);
      }
  }
  expect_close("d/dx", gx, wx, X);
  expect_close("d/dweight", gw, ww, C);
  expect_close("d/dbias", gb, wb, C);
  tvk_release(X1), tvk_release(X2), tvk_release(U), tvk_release(W), tvk_release(B);
  tvk_release(RM), tvk_release(RV), tvk_release(y1), tvk_release(y2), tvk_release(loss);
  for (int i = 0; i < 3; i++) tvk_release(g[i]);
}

static void expect_error(tvk_tensor *t, tvk_status st, const char *words) {
  if (tvk_status_of(t) != st || !strstr(tvk_error_of(t), words))
    fail_msg("expected %s with \"%s\", got %s: %s", tvk_status_name(st), words,
             tvk_status_name(tvk_status_of(t)), tvk_error_of(t));
  tvk_release(t);
}

/* Bad calls name what is wrong and assign nothing; running statistics made
 * with tvk_full (PyTorch's zeros and ones) are given memory by the call. */
static void test_batchnorm_train_api(void **state) {
  Suite *s = *state;
  tvk_ctx *c = s->ctx;
  double xv[12], zero[2] = {0, 0}, one[2] = {1, 1}, got[2];
  for (int i = 0; i < 12; i++) xv[i] = urand(-1, 1);
  tvk_tensor *x = tvk_from_data(c, TVK_FLOAT64, 3, (int64_t[]){3, 2, 2}, xv);
  tvk_tensor *x1 = tvk_from_data(c, TVK_FLOAT64, 2, (int64_t[]){1, 2}, xv);
  tvk_tensor *rm = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){2}, zero);
  tvk_tensor *rv = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){2}, one);
  tvk_tensor *c3 = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){3}, xv);
  tvk_tensor *pair = tvk_from_data(c, TVK_FLOAT64, 1, (int64_t[]){4}, xv);
  tvk_tensor *half = tvk_shrink(pair, (const int64_t[][2]){{0, 2}});
  int32_t iv[2] = {0, 1};
  tvk_tensor *irm = tvk_from_data(c, TVK_INT32, 1, (int64_t[]){2}, iv);
  assert_null(tvk_batchnorm_train(NULL, NULL, NULL, NULL, NULL, 0.1, 1e-5));
  expect_error(tvk_batchnorm_train(NULL, NULL, NULL, rm, rv, 0.1, 1e-5), TVK_ERR_INVALID_ARG,
               "x is NULL");
  expect_error(tvk_batchnorm_train(rm, NULL, NULL, NULL, NULL, 0.1, 1e-5), TVK_ERR_SHAPE,
               "(N, C, ...)");
  expect_error(tvk_batchnorm_train(x, c3, NULL, rm, rv, 0.1, 1e-5), TVK_ERR_SHAPE, "weight");
  expect_error(tvk_batchnorm_train(x, NULL, c3, rm, rv, 0.1, 1e-5), TVK_ERR_SHAPE, "bias");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, c3, rv, 0.1, 1e-5), TVK_ERR_SHAPE,
               "running_mean");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, c3, 0.1, 1e-5), TVK_ERR_SHAPE, "running_var");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rv, -0.1, 1e-5), TVK_ERR_INVALID_ARG,
               "momentum");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rv, 1.5, 1e-5), TVK_ERR_INVALID_ARG,
               "momentum");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rv, NAN, 1e-5), TVK_ERR_INVALID_ARG,
               "momentum");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rv, 0.1, -1), TVK_ERR_INVALID_ARG, "eps");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rv, 0.1, INFINITY), TVK_ERR_INVALID_ARG,
               "eps");
  expect_error(tvk_batchnorm_train(x1, NULL, NULL, rm, rv, 0.1, 1e-5), TVK_ERR_SHAPE,
               "1 value(s) per channel");
  tvk_tensor *x0 = tvk_from_data(c, TVK_FLOAT64, 3, (int64_t[]){0, 2, 2}, NULL);
  expect_error(tvk_batchnorm_train(x0, NULL, NULL, rm, NULL, 0.1, 1e-5), TVK_ERR_SHAPE,
               "no values per channel");
  tvk_release(x0);
  expect_error(tvk_batchnorm_train(x, NULL, NULL, irm, rv, 0.1, 1e-5), TVK_ERR_DTYPE, "int32");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, half, 0.1, 1e-5), TVK_ERR_INVALID_ARG,
               "running_var");
  expect_error(tvk_batchnorm_train(x, NULL, NULL, rm, rm, 0.1, 1e-5), TVK_ERR_INVALID_ARG,
               "one buffer");
  /* one value per channel is enough without running_var (a constant batch) */
  tvk_tensor *ok = tvk_batchnorm_train(x1, NULL, NULL, rm, NULL, 0.1, 1e-5);
  assert_int_equal(tvk_status_of(ok), TVK_OK);
  tvk_release(ok);
  /* no bad call assigned anything: rv is still ones, rm had the last call's update only */
  assert_int_equal(tvk_to_host(rv, got, sizeof got), TVK_OK);
  assert_true(got[0] == 1 && got[1] == 1);
  assert_int_equal(tvk_to_host(rm, got, sizeof got), TVK_OK);
  double m0 = 0.1 * xv[0], m1 = 0.1 * xv[1]; /* x1 = xv[0..1]: the batch mean is x1 */
  assert_true(fabs(got[0] - m0) <= 1e-15 && fabs(got[1] - m1) <= 1e-15);
  /* tvk_full statistics: realized into memory of their own, then updated */
  tvk_tensor *fm = tvk_full(c, TVK_FLOAT64, 1, (int64_t[]){2}, 0);
  tvk_tensor *fv = tvk_full(c, TVK_FLOAT64, 1, (int64_t[]){2}, 1);
  tvk_tensor *y = tvk_batchnorm_train(x, NULL, NULL, fm, fv, 0.5, 1e-5);
  assert_int_equal(tvk_status_of(y), TVK_OK);
  double m[2], v[2], gm[2], gv[2];
  for (int ch = 0; ch < 2; ch++) {
    double sum = 0, ss = 0;
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 2; k++) sum += xv[(i * 2 + ch) * 2 + k];
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 2; k++) ss += pow(xv[(i * 2 + ch) * 2 + k] - sum / 6, 2);
    m[ch] = 0.5 * (sum / 6), v[ch] = 0.5 + 0.5 * (ss / 5);
  }
  assert_int_equal(tvk_to_host(fm, gm, sizeof gm), TVK_OK);
  assert_int_equal(tvk_to_host(fv, gv, sizeof gv), TVK_OK);
  expect_close("running_mean from tvk_full", gm, m, 2);
  expect_close("running_var from tvk_full", gv, v, 2);
  tvk_release(y), tvk_release(fm), tvk_release(fv);
  tvk_release(x), tvk_release(x1), tvk_release(rm), tvk_release(rv), tvk_release(c3);
  tvk_release(pair), tvk_release(half), tvk_release(irm);
}

/* ---------------------------------------------------------------- the API */

/* tvk_grad_with: out = a * b elementwise, upstream u: grads u*b and u*a. */
static void test_upstream(void **state) {
  Suite *s = *state;
  double a[3] = {1, 2, 3}, b[3] = {-1, 0.5, 4}, u[3] = {2, -3, 0.25}, ga[3], gb[3];
  tvk_tensor *A = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, a);
  tvk_tensor *B = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, b);
  tvk_tensor *U = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, u), *g[2];
  tvk_tensor *out = tvk_mul(A, B);
  assert_int_equal(tvk_grad_with(out, U, 2, (tvk_tensor *[]){A, B}, g), TVK_OK);
  assert_int_equal(tvk_to_host(g[0], ga, sizeof ga), TVK_OK);
  assert_int_equal(tvk_to_host(g[1], gb, sizeof gb), TVK_OK);
  for (int i = 0; i < 3; i++) assert_true(ga[i] == u[i] * b[i] && gb[i] == u[i] * a[i]);
  tvk_release(A), tvk_release(B), tvk_release(U), tvk_release(out);
  tvk_release(g[0]), tvk_release(g[1]);
}

static void test_errors(void **state) {
  Suite *s = *state;
  double v[3] = {1, 2, 3}, z[3];
  int32_t iv[3] = {1, 2, 3};
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, v), *g = x;
  tvk_tensor *other = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, v);
  tvk_tensor *ix = tvk_from_data(s->ctx, TVK_INT32, 1, (int64_t[]){3}, iv);
  tvk_tensor *vec = tvk_mul(x, x), *loss = tvk_sum(vec, 0, NULL, false);
  /* a non-scalar without an upstream gradient */
  assert_int_equal(tvk_grad(vec, 1, &x, &g), TVK_ERR_SHAPE);
  assert_null(g);
  assert_non_null(strstr(tvk_ctx_error(s->ctx), "tvk_grad_with"));
  /* integer parameter, integer loss */
  assert_int_equal(tvk_grad(loss, 1, &ix, &g), TVK_ERR_DTYPE);
  assert_int_equal(tvk_grad(tvk_sum(ix, 0, NULL, false), 1, &x, &g), TVK_ERR_DTYPE);
  /* a parameter the loss does not read: zeros */
  assert_int_equal(tvk_grad(loss, 1, &other, &g), TVK_OK);
  assert_int_equal(tvk_to_host(g, z, sizeof z), TVK_OK);
  assert_true(z[0] == 0 && z[1] == 0 && z[2] == 0);
  tvk_release(g);
  /* a slice of another tensor as a parameter */
  tvk_tensor *part = tvk_shrink(x, (const int64_t[][2]){{0, 2}});
  assert_int_equal(tvk_grad(loss, 1, &part, &g), TVK_ERR_INVALID_ARG);
  /* a constant parameter (equal constants are one node) */
  tvk_tensor *k = tvk_full(s->ctx, TVK_FLOAT64, 1, (int64_t[]){3}, 2);
  tvk_tensor *kl = tvk_sum(tvk_mul(k, x), 0, NULL, false);
  assert_int_equal(tvk_grad(kl, 1, &k, &g), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_ctx_error(s->ctx), "constant"));
  tvk_release(k), tvk_release(kl);
  /* a realized loss has no graph left */
  double l;
  assert_int_equal(tvk_to_host(loss, &l, sizeof l), TVK_OK);
  assert_int_equal(tvk_grad(loss, 1, &x, &g), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_ctx_error(s->ctx), "realiz"));
  assert_int_equal(tvk_grad(NULL, 1, &x, &g), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_grad_with(vec, NULL, 1, &x, &g), TVK_ERR_INVALID_ARG);
  tvk_release(x), tvk_release(other), tvk_release(ix), tvk_release(vec), tvk_release(loss);
  tvk_release(part);
}

/* ---------------------------------------------------------------- optimisers */

/* loss = sum(c * p) + sum(p * p) / 2, so g = c + p: three steps of each
 * optimiser against PyTorch's formulas in double, with the step's numbers
 * rounded to float32 as tvk passes them (launch values). */
typedef struct {
  tvk_optim_options o;
  const char *name;
} OptCase;

static double f32(double x) { return (double)(float)x; }

static void optim_reference(const tvk_optim_options *o, int t, double *p, const double *c,
                            double *m, double *v, int n) {
  double b1 = o->beta1 ? o->beta1 : 0.9, b2 = o->beta2 ? o->beta2 : 0.999;
  double eps = o->eps ? o->eps : 1e-8;
  for (int i = 0; i < n; i++) {
    double g = c[i] + p[i];
    if (o->weight_decay > 0 && o->kind != TVK_OPTIM_ADAMW) g += p[i] * f32(o->weight_decay);
    double step;
    if (o->kind == TVK_OPTIM_SGD) {
      step = g;
      if (o->momentum > 0) {
        m[i] = m[i] * f32(o->momentum) + g;
        step = o->nesterov ? g + m[i] * f32(o->momentum) : m[i];
      }
    } else {
      m[i] = m[i] * f32(b1) + g * f32(1 - b1);
      v[i] = v[i] * f32(b2) + g * g * f32(1 - b2);
      double c1 = f32(1 / (1 - pow(b1, t))), c2 = f32(1 / (1 - pow(b2, t)));
      step = m[i] * c1 / (sqrt(v[i] * c2) + f32(eps));
      if (o->kind == TVK_OPTIM_ADAMW && o->weight_decay > 0) step += p[i] * f32(o->weight_decay);
    }
    p[i] -= step * f32(o->lr);
  }
}

/* tvk_optim_create with the options by value (a macro argument cannot hold
 * a compound literal's commas). */
static tvk_optim *optim_new(tvk_ctx *ctx, int n, tvk_tensor *const *params, tvk_optim_options o) {
  return tvk_optim_create(ctx, n, params, &o);
}

static void test_optimisers(void **state) {
  Suite *s = *state;
  const OptCase cases[] = {
      {{.kind = TVK_OPTIM_SGD, .lr = 0.1}, "SGD"},
      {{.kind = TVK_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}, "SGD momentum"},
      {{.kind = TVK_OPTIM_SGD, .lr = 0.05, .momentum = 0.8, .nesterov = true}, "SGD Nesterov"},
      {{.kind = TVK_OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.01}, "Adam"},
      {{.kind = TVK_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1, .beta1 = 0.8}, "AdamW"},
  };
  enum { N = 5 };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double p0[N], c[N], ref[N], m[N] = {0}, v[N] = {0}, got[N];
    for (int i = 0; i < N; i++) p0[i] = ref[i] = urand(-1, 1), c[i] = urand(-1, 1);
    tvk_tensor *P = tvk_contiguous(tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){N}, p0));
    tvk_tensor *C = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){N}, c);
    assert_int_equal(tvk_realize(1, &P), TVK_OK);
    tvk_optim *opt = tvk_optim_create(s->ctx, 1, &P, &cases[k].o);
    if (!opt) fail_msg("%s: %s", cases[k].name, tvk_ctx_error(s->ctx));
    for (int t = 1; t <= 3; t++) {
      size_t scope = tvk_scope_begin(s->ctx);
      tvk_tensor *loss = tvk_add(tvk_sum(tvk_mul(C, P), 0, NULL, false),
                                 tvk_mul(tvk_sum(tvk_mul(P, P), 0, NULL, false),
                                         tvk_full(s->ctx, TVK_FLOAT64, 0, NULL, 0.5)));
      tvk_tensor *g;
      assert_int_equal(tvk_grad(loss, 1, &P, &g), TVK_OK);
      assert_int_equal(tvk_optim_step(opt, &g), TVK_OK);
      if (tvk_realize(1, &P) != TVK_OK) fail_msg("%s: %s", cases[k].name, tvk_ctx_error(s->ctx));
      tvk_scope_end(s->ctx, scope, 0, NULL);
      optim_reference(&cases[k].o, t, ref, c, m, v, N);
      assert_int_equal(tvk_to_host(P, got, sizeof got), TVK_OK);
      for (int i = 0; i < N; i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-12 * (1 + fabs(ref[i]))))
          fail_msg("%s: step %d, p[%d] = %.15g, want %.15g", cases[k].name, t, i, got[i], ref[i]);
    }
    tvk_optim_destroy(opt);
    tvk_release(P), tvk_release(C);
  }
}

/* 20 Adam steps of a small MLP, with a learning-rate schedule: after the
 * first step nothing is generated or compiled (the step's numbers are launch
 * values), and the loss falls. */
static void test_optim_compiles_once(void **state) {
  Suite *s = *state;
  enum { B = 16, I = 8, H = 12, O = 3 };
  float x[B * I], w1[I * H], w2[H * O];
  int32_t lab[B];
  for (int i = 0; i < B * I; i++) x[i] = (float)urand(-1, 1);
  for (int i = 0; i < I * H; i++) w1[i] = (float)urand(-0.5, 0.5);
  for (int i = 0; i < H * O; i++) w2[i] = (float)urand(-0.5, 0.5);
  for (int i = 0; i < B; i++) lab[i] = i % O;
  tvk_tensor *X = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){B, I}, x);
  tvk_tensor *Y = tvk_from_data(s->ctx, TVK_INT32, 1, (int64_t[]){B}, lab);
  tvk_tensor *W[2] = {tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){I, H}, w1),
                      tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){H, O}, w2)};
  tvk_optim *opt = optim_new(s->ctx, 2, W, (tvk_optim_options){.kind = TVK_OPTIM_ADAM, .lr = 0.05});
  assert_non_null(opt);
  tvk_stats st;
  uint64_t generated = 0;
  float first = 0, last = 0;
  for (int step = 0; step < 20; step++) {
    size_t scope = tvk_scope_begin(s->ctx);
    tvk_tensor *loss = tvk_cross_entropy(tvk_matmul(tvk_relu(tvk_matmul(X, W[0])), W[1]), Y);
    tvk_tensor *g[2];
    assert_int_equal(tvk_grad(loss, 2, W, g), TVK_OK);
    assert_int_equal(tvk_optim_set_lr(opt, 0.05 / (1 + 0.1 * step)), TVK_OK);
    assert_int_equal(tvk_optim_step(opt, g), TVK_OK);
    tvk_tensor *all[3] = {W[0], W[1], loss};
    assert_int_equal(tvk_realize(3, all), TVK_OK);
    assert_int_equal(tvk_to_host(loss, step ? &last : &first, sizeof first), TVK_OK);
    tvk_scope_end(s->ctx, scope, 0, NULL);
    tvk_stats_get(s->ctx, &st);
    if (step == 0) generated = st.kernels_generated + st.kernels_stored;
    assert_int_equal(st.kernels_generated + st.kernels_stored, generated);
  }
  assert_true(last < 0.7f * first);
  tvk_optim_destroy(opt);
  tvk_release(X), tvk_release(Y), tvk_release(W[0]), tvk_release(W[1]);
}

static void test_optim_errors(void **state) {
  Suite *s = *state;
  double v[2] = {1, 2};
  int32_t iv[2] = {1, 2};
  tvk_tensor *p = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){2}, v);
  tvk_tensor *ip = tvk_from_data(s->ctx, TVK_INT32, 1, (int64_t[]){2}, iv);
  assert_null(optim_new(s->ctx, 1, &p, (tvk_optim_options){.kind = TVK_OPTIM_SGD, .lr = -1}));
  assert_non_null(strstr(tvk_ctx_error(s->ctx), "lr"));
  assert_null(
      optim_new(s->ctx, 1, &p, (tvk_optim_options){.kind = TVK_OPTIM_SGD, .nesterov = true}));
  assert_non_null(strstr(tvk_ctx_error(s->ctx), "nesterov"));
  assert_null(optim_new(s->ctx, 1, &p, (tvk_optim_options){.kind = 0}));
  assert_null(optim_new(s->ctx, 1, &ip, (tvk_optim_options){.kind = TVK_OPTIM_ADAM}));
  assert_null(tvk_optim_create(s->ctx, 1, &p, NULL));
  tvk_optim *o = optim_new(s->ctx, 1, &p, (tvk_optim_options){.kind = TVK_OPTIM_ADAM});
  assert_non_null(o);
  tvk_tensor *wrong = tvk_from_data(s->ctx, TVK_FLOAT64, 1, (int64_t[]){1}, v);
  assert_int_equal(tvk_optim_step(o, &wrong), TVK_ERR_SHAPE);
  assert_int_equal(tvk_optim_step(o, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_optim_set_lr(o, -0.5), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_optim_step(NULL, &wrong), TVK_ERR_INVALID_ARG);
  tvk_release(wrong);
  /* o is left alive: the context frees it */
  tvk_release(p), tvk_release(ip);
}

int main(int argc, char **argv) {
  Suite suite = {.device = argc > 1 ? argv[1] : "CPU"};
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  if (api_device_missing("test_grad", suite.device)) return 77;
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &suite)
  const struct CMUnitTest tests[] = {
      T(test_arith),
      T(test_unary),
      T(test_pow),
      T(test_select),
      T(test_detach),
      T(test_max_tie),
      T(test_kinks),
      T(test_reduce),
      T(test_movement),
      T(test_accumulate),
      T(test_matmul),
      T(test_layernorm),
      T(test_softmax),
      T(test_cross_entropy),
      T(test_conv2d),
      T(test_pools),
      T(test_dropout),
      T(test_embedding),
      T(test_gather),
      T(test_cat_stack),
      T(test_attention),
      T(test_batchnorm),
      T(test_batchnorm_train),
      T(test_batchnorm_train_running),
      T(test_batchnorm_train_api),
      T(test_upstream),
      T(test_errors),
      T(test_optimisers),
      T(test_optim_compiles_once),
      T(test_optim_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
