/* Several devices in one context (tvk.h, "several devices"), an outside
 * user's test: tvk.h only. One run per pair of devices, the context's first
 * and a second one it adds (`test_devices CPU VK`, `VK CPU`, `CPU CPU`,
 * `VK VK`: the same name twice is two devices of their own; exit 77: no such
 * device). Copies of every dtype and of views, computations that cross
 * devices both ways, constants taking the device of their use, gradients
 * through a copy, and the errors of a bad call, against plain loops. */
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
  const char *first, *second;
  tvk_ctx *ctx;
  int dev; /* the second device's index */
} Suite;

static int setup(void **state) {
  Suite *s = *state;
  if (tvk_ctx_create(s->first, &s->ctx) != TVK_OK) return -1;
  if (tvk_ctx_add_device(s->ctx, s->second, &s->dev) != TVK_OK) {
    fprintf(stderr, "add_device: %s\n", tvk_ctx_error(s->ctx));
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  Suite *s = *state;
  return api_ctx_close_checked(&s->ctx, s->second);
}

static void expect_error(tvk_ctx *ctx, const char *part) {
  const char *e = tvk_ctx_error(ctx);
  if (!strstr(e, part)) fail_msg("error \"%s\" does not contain \"%s\"", e, part);
}

static void read_f32(tvk_tensor *t, float *out, size_t n) {
  if (tvk_to_host(t, out, n * sizeof *out) != TVK_OK)
    fail_msg("to_host: %s", tvk_ctx_error(tvk_ctx_of(t)));
}

static void expect_close(const float *got, const double *want, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > 1e-5 * (1 + fabs(want[i])))
      fail_msg("%s: element %zu is %.9g, want %.9g", what, i, got[i], want[i]);
}

/* ---------------------------------------------------------------- the API */

static void test_devices_listed(void **state) {
  Suite *s = *state;
  assert_int_equal(s->dev, 1);
  assert_int_equal(tvk_ctx_device_count(s->ctx), 2);
  assert_string_equal(tvk_ctx_device_name(s->ctx, 0), tvk_ctx_device(s->ctx));
  assert_true(strlen(tvk_ctx_device_name(s->ctx, 1)) > 0);
  assert_string_equal(tvk_ctx_device_name(s->ctx, 2), "");
  float v[3] = {1, 2, 3};
  tvk_tensor *a = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){3}, v);
  assert_int_equal(tvk_device_of(a), 0);
  tvk_tensor *b = tvk_to_device(a, 1);
  assert_int_equal(tvk_device_of(b), 1);
  assert_int_equal(tvk_device_of(tvk_neg(b)), 1);
  assert_int_equal(tvk_device_of(tvk_full(s->ctx, TVK_FLOAT32, 1, (int64_t[]){3}, 2)), -1);
  /* a constant takes the device it is combined with */
  assert_int_equal(tvk_device_of(tvk_add(b, tvk_full(s->ctx, TVK_FLOAT32, 1, (int64_t[]){3}, 2))),
                   1);
  /* already there: the same values, no copy */
  tvk_tensor *same = tvk_to_device(a, 0);
  assert_int_equal(tvk_device_of(same), 0);
  tvk_stats st;
  float out[3];
  read_f32(same, out, 3);
  tvk_stats_get(s->ctx, &st);
  assert_int_equal(st.copies_run, 0);
  assert_memory_equal(out, v, sizeof v);
}

static void test_errors(void **state) {
  Suite *s = *state;
  float v[4] = {1, 2, 3, 4};
  tvk_tensor *a = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){4}, v);
  tvk_tensor *b = tvk_to_device(a, 1);
  /* an op on two devices names both */
  tvk_tensor *bad = tvk_add(a, b);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "add: tensor argument 1 is on device 0");
  expect_error(s->ctx, "argument 2 on device 1");
  expect_error(s->ctx, "tvk_to_device");
  /* and an op built of several (matmul's reshapes and reduce) too */
  tvk_tensor *m =
      tvk_matmul(tvk_reshape(a, 2, (int64_t[]){2, 2}), tvk_reshape(b, 2, (int64_t[]){2, 2}));
  assert_int_equal(tvk_status_of(m), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "device 1");
  assert_int_equal(tvk_status_of(tvk_to_device(a, 2)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "to_device: device 2 is not one of the context's 2 (0 to 1");
  assert_int_equal(tvk_status_of(tvk_to_device(a, -1)), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_device_of(bad), -1);
  assert_int_equal(tvk_status_of(tvk_to_device(NULL, 0)), TVK_ERR_INVALID_ARG);
  int idx = 7;
  assert_int_equal(tvk_ctx_add_device(s->ctx, "NOPE", &idx), TVK_ERR_DEVICE);
  assert_int_equal(idx, -1);
  expect_error(s->ctx, "ctx_add_device(\"NOPE\")");
  assert_int_equal(tvk_ctx_device_count(s->ctx), 2);
  assert_int_equal(tvk_ctx_add_device(s->ctx, "CPU", NULL), TVK_ERR_INVALID_ARG);
  /* up to 8 devices; the ninth is refused */
  for (int i = 2; i < 8; i++) {
    assert_int_equal(tvk_ctx_add_device(s->ctx, "CPU", &idx), TVK_OK);
    assert_int_equal(idx, i);
  }
  assert_int_equal(tvk_ctx_add_device(s->ctx, "CPU", &idx), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "has 8 devices already");
}

/* ---------------------------------------------------------------- copies */

/* Every dtype, both ways: the bytes arrive as they left. */
static void test_copy_dtypes(void **state) {
  Suite *s = *state;
  enum { N = 37 };
  uint8_t src[N * 8], back[N * 8], there[N * 8];
  for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 37 + 11);
  for (int dt = TVK_BOOL; dt <= TVK_FLOAT64; dt++) {
    size_t es = tvk_dtype_size((tvk_dtype)dt), nb = N * es;
    uint8_t data[N * 8];
    memcpy(data, src, nb);
    if (dt == TVK_BOOL)
      for (int i = 0; i < N; i++) data[i] &= 1;
    tvk_tensor *a = tvk_from_data(s->ctx, (tvk_dtype)dt, 1, (int64_t[]){N}, data);
    tvk_tensor *b = tvk_to_device(a, 1);
    tvk_tensor *c = tvk_to_device(b, 0);
    memset(there, 0, sizeof there), memset(back, 0, sizeof back);
    if (tvk_to_host(b, there, nb) != TVK_OK || tvk_to_host(c, back, nb) != TVK_OK)
      fail_msg("%s: %s", tvk_dtype_name((tvk_dtype)dt), tvk_ctx_error(s->ctx));
    if (memcmp(there, data, nb) || memcmp(back, data, nb))
      fail_msg("%s: the bytes changed on the way", tvk_dtype_name((tvk_dtype)dt));
    assert_int_equal(tvk_device_of(c), 0);
    tvk_release(a), tvk_release(b), tvk_release(c);
  }
  tvk_stats st;
  tvk_stats_get(s->ctx, &st);
  assert_true(st.copies_run >= 2 * (TVK_FLOAT64 + 1));
}

/* Views that are not plain memory (permuted, shrunk, padded, expanded) are
 * made contiguous on their own device, then copied. */
static void test_copy_views(void **state) {
  Suite *s = *state;
  enum { R = 5, C = 7 };
  float v[R * C];
  for (int i = 0; i < R * C; i++) v[i] = (float)(i * 3 - 20) / 4;
  tvk_tensor *a = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  for (int way = 0; way < 2; way++) {
    tvk_tensor *x = way ? tvk_to_device(a, 1) : a; /* a view on either device */
    int to = way ? 0 : 1;
    /* permuted */
    float got[(R + 3) * (C + 2)];
    double want[(R + 3) * (C + 2)];
    tvk_tensor *p = tvk_to_device(tvk_permute(x, (const int[]){1, 0}), to);
    assert_int_equal(tvk_device_of(p), to);
    read_f32(p, got, R * C);
    for (int i = 0; i < C; i++)
      for (int j = 0; j < R; j++) want[i * R + j] = v[j * C + i];
    expect_close(got, want, R * C, "permuted");
    /* shrunk: rows 1..3, columns 2..6 */
    tvk_tensor *sh = tvk_to_device(tvk_shrink(x, (const int64_t[][2]){{1, 4}, {2, 7}}), to);
    read_f32(sh, got, 3 * 5);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) want[i * 5 + j] = v[(i + 1) * C + j + 2];
    expect_close(got, want, 15, "shrunk");
    /* padded with -1: 1 row before, 2 after, 1 column after */
    tvk_tensor *pd = tvk_to_device(tvk_pad(x, (const int64_t[][2]){{1, 2}, {0, 1}}, -1), to);
    read_f32(pd, got, (R + 3) * (C + 1));
    for (int i = 0; i < R + 3; i++)
      for (int j = 0; j < C + 1; j++)
        want[i * (C + 1) + j] = i >= 1 && i <= R && j < C ? v[(i - 1) * C + j] : -1;
    expect_close(got, want, (R + 3) * (C + 1), "padded");
    /* a reshape of the whole (plain already: no kernel before the copy) */
    tvk_tensor *rs = tvk_to_device(tvk_reshape(x, 2, (int64_t[]){C, R}), to);
    read_f32(rs, got, R * C);
    for (int i = 0; i < R * C; i++) want[i] = v[i];
    expect_close(got, want, R * C, "reshaped");
    if (way) tvk_release(x);
    tvk_release(p), tvk_release(sh), tvk_release(pd), tvk_release(rs);
  }
}

/* ---------------------------------------------------------------- computing across */

/* x on the first device; y = exp(x / 8) * 2 + 1 computed on the second, its
 * row sums there, then back on the first added to x's column 0: kernels on
 * both devices and copies both ways in one realize. */
static void test_compute_across(void **state) {
  Suite *s = *state;
  enum { R = 33, C = 20 };
  float v[R * C];
  for (int i = 0; i < R * C; i++) v[i] = (float)((i * 7) % 23 - 11) / 3;
  tvk_ctx *ctx = s->ctx;
  tvk_tensor *x = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  tvk_tensor *x1 = tvk_to_device(x, 1);
  tvk_tensor *two = tvk_full(ctx, TVK_FLOAT32, 0, NULL, 2);
  tvk_tensor *y =
      tvk_add(tvk_mul(tvk_exp(tvk_div(x1, tvk_full(ctx, TVK_FLOAT32, 0, NULL, 8))), two),
              tvk_full(ctx, TVK_FLOAT32, 0, NULL, 1));
  tvk_tensor *rows = tvk_sum(y, 1, (const int[]){1}, false);
  assert_int_equal(tvk_device_of(rows), 1);
  tvk_tensor *col0 =
      tvk_reshape(tvk_shrink(x, (const int64_t[][2]){{0, R}, {0, 1}}), 1, (int64_t[]){R});
  tvk_tensor *z = tvk_add(tvk_to_device(rows, 0), col0);
  assert_int_equal(tvk_device_of(z), 0);
  tvk_stats before, after;
  tvk_stats_get(ctx, &before);
  float got[R];
  read_f32(z, got, R);
  tvk_stats_get(ctx, &after);
  double want[R];
  for (int i = 0; i < R; i++) {
    double acc = 0;
    for (int j = 0; j < C; j++) acc += exp((double)v[i * C + j] / 8) * 2 + 1;
    want[i] = acc + v[i * C];
  }
  expect_close(got, want, R, "across");
  assert_int_equal(after.copies_run - before.copies_run, 2);
  assert_true(after.kernels_run - before.kernels_run >= 2);
  /* the intermediate stays on the second device, readable there */
  float r1[R];
  read_f32(rows, r1, R);
  for (int i = 0; i < R; i++) want[i] -= v[i * C];
  expect_close(r1, want, R, "rows on the second device");
}

/* A chain that goes there and back several times, with intermediates the
 * memory planner may share on each device. */
static void test_round_trips(void **state) {
  Suite *s = *state;
  enum { N = 1000 };
  float v[N];
  double want[N];
  for (int i = 0; i < N; i++) v[i] = (float)(i % 17) / 5 - 1, want[i] = v[i];
  tvk_tensor *t = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){N}, v);
  tvk_tensor *c = tvk_full(s->ctx, TVK_FLOAT32, 0, NULL, 0.5);
  for (int k = 0; k < 6; k++) {
    t = tvk_to_device(tvk_add(tvk_mul(t, t), c), (k + 1) % 2);
    for (int i = 0; i < N; i++) want[i] = want[i] * want[i] + 0.5;
    t = tvk_tanh(t);
    for (int i = 0; i < N; i++) want[i] = tanh(want[i]);
  }
  assert_int_equal(tvk_device_of(t), 0);
  float got[N];
  read_f32(t, got, N);
  expect_close(got, want, N, "round trips");
}

/* A constant (and an arange) copied to a device is computed there. */
static void test_constants(void **state) {
  Suite *s = *state;
  tvk_tensor *f = tvk_to_device(tvk_full(s->ctx, TVK_FLOAT32, 2, (int64_t[]){3, 4}, 2.5), 1);
  assert_int_equal(tvk_device_of(f), 1);
  float got[12];
  double want[12];
  tvk_stats before, after;
  tvk_stats_get(s->ctx, &before);
  read_f32(f, got, 12);
  tvk_stats_get(s->ctx, &after);
  assert_int_equal(after.copies_run, before.copies_run); /* a kernel, not a copy */
  for (int i = 0; i < 12; i++) want[i] = 2.5;
  expect_close(got, want, 12, "full");
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i / 2;
  tvk_tensor *x = tvk_to_device(tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){12}, v), 1);
  tvk_tensor *a = tvk_arange(s->ctx, TVK_FLOAT32, 0, 12, 1);
  tvk_tensor *y = tvk_mul(x, a);
  assert_int_equal(tvk_device_of(y), 1);
  read_f32(y, got, 12);
  for (int i = 0; i < 12; i++) want[i] = (double)v[i] * i;
  expect_close(got, want, 12, "arange times data");
}

/* d/dx sum((x on device 1)^2 * w) = 2 x w, arriving on x's device. */
static void test_grad(void **state) {
  Suite *s = *state;
  enum { N = 9 };
  float xv[N], wv[N];
  for (int i = 0; i < N; i++) xv[i] = (float)i / 3 - 1, wv[i] = (float)(N - i) / 4;
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){N}, xv);
  tvk_tensor *w = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){N}, wv);
  tvk_tensor *x1 = tvk_to_device(x, 1), *w1 = tvk_to_device(w, 1);
  tvk_tensor *loss = tvk_sum(tvk_mul(tvk_mul(x1, x1), w1), 0, NULL, false);
  tvk_tensor *g = NULL;
  assert_int_equal(tvk_grad(loss, 1, &x, &g), TVK_OK);
  assert_int_equal(tvk_device_of(g), 0);
  float got[N];
  double want[N];
  read_f32(g, got, N);
  for (int i = 0; i < N; i++) want[i] = 2.0 * xv[i] * wv[i];
  expect_close(got, want, N, "gradient");
}

static const int both[2] = {0, 1};

/* A jit over two devices: the captured launches replay each on its device,
 * with the copies between them, on new inputs. One function crosses with
 * tvk_to_device, one shards its input and all-reduces. */
static tvk_status cross_fn(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                           tvk_tensor **out) {
  (void)nin, (void)nout, (void)user;
  tvk_tensor *two = tvk_full(ctx, TVK_FLOAT32, 0, NULL, 2);
  out[0] = tvk_mul(tvk_to_device(tvk_exp(tvk_to_device(in[0], 1)), 0), two);
  return TVK_OK;
}

static tvk_status sharded_fn(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                             tvk_tensor **out) {
  (void)ctx, (void)nin, (void)nout, (void)user;
  tvk_tensor *xs = tvk_shard(in[0], 2, both, 0);
  out[0] = tvk_sum(tvk_mul(xs, xs), 1, (const int[]){0}, false); /* all-reduced */
  out[1] = tvk_neg(xs);                                          /* in parts */
  return TVK_OK;
}

static void test_jit_across(void **state) {
  Suite *s = *state;
  enum { R = 6, C = 3 };
  tvk_jit *j = tvk_jit_create(s->ctx, cross_fn, NULL),
          *js = tvk_jit_create(s->ctx, sharded_fn, NULL);
  assert_non_null(j);
  assert_non_null(js);
  tvk_stats before, after;
  for (int call = 0; call < 5; call++) {
    float v[R * C], got[R * C];
    double want[R * C];
    for (int i = 0; i < R * C; i++) v[i] = (float)((i * 5 + call * 3) % 11) / 4 - 1;
    tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
    tvk_stats_get(s->ctx, &before);
    tvk_tensor *out = NULL, *outs[2] = {NULL, NULL};
    assert_int_equal(tvk_jit_run(j, 1, &x, 1, &out), TVK_OK);
    assert_int_equal(tvk_jit_run(js, 1, &x, 2, outs), TVK_OK);
    tvk_stats_get(s->ctx, &after);
    read_f32(out, got, R * C);
    for (int i = 0; i < R * C; i++) want[i] = 2 * exp((double)v[i]);
    expect_close(got, want, R * C, "jit across devices");
    read_f32(outs[0], got, C);
    for (int c = 0; c < C; c++) {
      want[c] = 0;
      for (int r = 0; r < R; r++) want[c] += (double)v[r * C + c] * v[r * C + c];
    }
    expect_close(got, want, C, "jit of a sharded sum");
    int ax = 9;
    assert_int_equal(tvk_shard_info(outs[1], &ax), 2);
    assert_int_equal(ax, 0);
    read_f32(outs[1], got, R * C);
    for (int i = 0; i < R * C; i++) want[i] = -v[i];
    expect_close(got, want, R * C, "jit's output in parts");
    if (call >= 2) { /* replays: copies and kernels run, nothing scheduled */
      assert_int_equal(after.jit_replays - before.jit_replays, 2);
      assert_int_equal(after.schedules, before.schedules);
      assert_true(after.copies_run - before.copies_run >= 2 + 2);
    }
    tvk_release(x), tvk_release(out), tvk_release(outs[0]), tvk_release(outs[1]);
  }
  /* a sharded input is refused with a message */
  float v[4] = {1, 2, 3, 4};
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){2, 2}, v), *o = NULL;
  tvk_tensor *xs = tvk_shard(x, 2, both, 0);
  tvk_jit *j2 = tvk_jit_create(s->ctx, cross_fn, NULL);
  assert_int_equal(tvk_jit_run(j2, 1, &xs, 1, &o), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "jit_run: input 0 is sharded");
  tvk_jit_destroy(j), tvk_jit_destroy(js), tvk_jit_destroy(j2);
  tvk_release(x), tvk_release(xs);
}

/* ---------------------------------------------------------------- sharded tensors */

static float *ramp(int n, float scale, float shift) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = (float)((i * 7) % 13) * scale + shift;
  return v;
}

/* x * 2 + x^2 - 1 over x cut along each axis, and replicated */
static void test_shard_elementwise(void **state) {
  Suite *s = *state;
  enum { R = 7, C = 5 };
  float *v = ramp(R * C, 0.25f, -1);
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  double want[R * C];
  for (int i = 0; i < R * C; i++) want[i] = v[i] * 2.0 + (double)v[i] * v[i] - 1;
  for (int axis = -1; axis < 2; axis++) {
    tvk_tensor *xs = tvk_shard(x, 2, both, axis);
    int ax = 9;
    assert_int_equal(tvk_shard_info(xs, &ax), 2);
    assert_int_equal(ax, axis);
    assert_int_equal(tvk_device_of(xs), -1);
    tvk_tensor *y =
        tvk_sub(tvk_add(tvk_mul(xs, tvk_full(s->ctx, TVK_FLOAT32, 0, NULL, 2)), tvk_mul(xs, xs)),
                tvk_full(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, 1));
    assert_int_equal(tvk_shard_info(y, &ax), 2);
    assert_int_equal(ax, axis);
    assert_int_equal(tvk_realize(1, &y), TVK_OK);
    assert_int_equal(tvk_shard_info(y, &ax), 2); /* realized: still in parts */
    float got[R * C];
    read_f32(y, got, R * C);
    expect_close(got, want, R * C, axis < 0 ? "replicated" : axis ? "cut along 1" : "cut along 0");
    /* its parts: 7 rows cut as 4 + 3 */
    tvk_tensor *p1 = tvk_shard_part(y, 1);
    assert_int_equal(tvk_device_of(p1), 1);
    int64_t rows1 = axis == 0 ? 3 : R, cols1 = axis == 1 ? 2 : C;
    assert_int_equal(tvk_shape(p1)[0], rows1);
    assert_int_equal(tvk_shape(p1)[1], cols1);
    float pg[R * C];
    double pw[R * C];
    read_f32(p1, pg, (size_t)(rows1 * cols1));
    for (int i = 0; i < rows1; i++)
      for (int c = 0; c < cols1; c++)
        pw[i * cols1 + c] = want[(i + (axis == 0 ? 4 : 0)) * C + c + (axis == 1 ? 3 : 0)];
    expect_close(pg, pw, (size_t)(rows1 * cols1), "part 1");
    assert_int_equal(tvk_status_of(tvk_shard_part(y, 2)), TVK_ERR_INVALID_ARG);
    expect_error(s->ctx, "part 2 of a tensor of 2 parts");
    tvk_release(p1);
    tvk_release(xs), tvk_release(y);
  }
  assert_int_equal(tvk_status_of(tvk_shard_part(x, 0)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "not sharded");
  tvk_release(x);
  free(v);
}

/* sums and maxes on and off the cut axis, over 2 and 3 devices (4 rows over
 * 3: 2, 2 and an empty part) */
static void test_shard_reduce(void **state) {
  Suite *s = *state;
  int third;
  assert_int_equal(tvk_ctx_add_device(s->ctx, "CPU", &third), TVK_OK);
  enum { R = 4, C = 6 };
  float *v = ramp(R * C, 0.5f, -2);
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  const int three[3] = {0, 1, third};
  for (int nd = 2; nd <= 3; nd++) {
    tvk_tensor *xs = tvk_shard(x, nd, three, 0);
    /* off the axis: per part, still cut */
    tvk_tensor *rows = tvk_sum(xs, 1, (const int[]){1}, false);
    int ax = 9;
    assert_int_equal(tvk_shard_info(rows, &ax), nd);
    assert_int_equal(ax, 0);
    float got[C];
    double want[C];
    read_f32(rows, got, R);
    for (int i = 0; i < R; i++) {
      want[i] = 0;
      for (int j = 0; j < C; j++) want[i] += v[i * C + j];
    }
    expect_close(got, want, R, "row sums");
    /* over the axis: partial sums all-reduced, the result on every device */
    tvk_tensor *cols = tvk_sum(xs, 1, (const int[]){0}, false);
    assert_int_equal(tvk_shard_info(cols, &ax), nd);
    assert_int_equal(ax, -1);
    read_f32(cols, got, C);
    for (int j = 0; j < C; j++) {
      want[j] = 0;
      for (int i = 0; i < R; i++) want[j] += v[i * C + j];
    }
    expect_close(got, want, C, "column sums");
    tvk_tensor *mx = tvk_max(xs, 0, NULL, false);
    read_f32(mx, got, 1);
    double m = v[0];
    for (int i = 1; i < R * C; i++) m = fmax(m, v[i]);
    expect_close(got, &m, 1, "max");
    tvk_release(xs), tvk_release(rows), tvk_release(cols), tvk_release(mx);
  }
  tvk_release(x);
  free(v);
}

static void matmul_ref(const float *a, const float *b, int M, int K, int N, double *out) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)a[i * K + k] * b[k * N + j];
      out[i * N + j] = acc;
    }
}

/* data-parallel (rows of A cut, B replicated) and K cut (A's columns and
 * B's rows cut alike: partial products all-reduced) */
static void test_shard_matmul(void **state) {
  Suite *s = *state;
  enum { M = 9, K = 10, N = 4 };
  float *a = ramp(M * K, 0.125f, -0.75f), *b = ramp(K * N, -0.25f, 1);
  tvk_tensor *A = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){M, K}, a);
  tvk_tensor *B = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){K, N}, b);
  double want[M * N];
  float got[M * N];
  matmul_ref(a, b, M, K, N, want);
  tvk_stats st0, st1;
  tvk_stats_get(s->ctx, &st0);
  tvk_tensor *dp = tvk_matmul(tvk_shard(A, 2, both, 0), tvk_shard(B, 2, both, -1));
  int ax = 9;
  assert_int_equal(tvk_shard_info(dp, &ax), 2);
  assert_int_equal(ax, 0); /* each device its rows: no gather */
  read_f32(dp, got, M * N);
  expect_close(got, want, M * N, "data-parallel matmul");
  tvk_tensor *kc = tvk_matmul(tvk_shard(A, 2, both, 1), tvk_shard(B, 2, both, 0));
  assert_int_equal(tvk_shard_info(kc, &ax), 2);
  assert_int_equal(ax, -1); /* all-reduced */
  read_f32(kc, got, M * N);
  expect_close(got, want, M * N, "K-sharded matmul");
  tvk_stats_get(s->ctx, &st1);
  assert_true(st1.copies_run > st0.copies_run);
  tvk_release(dp), tvk_release(kc), tvk_release(A), tvk_release(B);
  free(a), free(b);
}

/* views: a permute moves the cut axis; a shrink across it gathers; a
 * gathered copy on the second device */
static void test_shard_views(void **state) {
  Suite *s = *state;
  enum { R = 6, C = 4 };
  float *v = ramp(R * C, 1, 0);
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  tvk_tensor *xs = tvk_shard(x, 2, both, 0);
  tvk_tensor *t = tvk_permute(xs, (const int[]){1, 0});
  int ax = 9;
  assert_int_equal(tvk_shard_info(t, &ax), 2);
  assert_int_equal(ax, 1);
  float got[R * C];
  double want[R * C];
  read_f32(t, got, R * C);
  for (int i = 0; i < C; i++)
    for (int j = 0; j < R; j++) want[i * R + j] = v[j * C + i];
  expect_close(got, want, R * C, "permuted");
  tvk_tensor *sh = tvk_shrink(xs, (const int64_t[][2]){{1, 5}, {0, C}});
  assert_int_equal(tvk_shard_info(sh, NULL), 0); /* gathered */
  read_f32(sh, got, 4 * C);
  for (int i = 0; i < 4 * C; i++) want[i] = v[C + i];
  expect_close(got, want, 4 * C, "shrunk across the cut");
  tvk_tensor *on1 = tvk_to_device(tvk_add(xs, xs), 1);
  assert_int_equal(tvk_device_of(on1), 1);
  read_f32(on1, got, R * C);
  for (int i = 0; i < R * C; i++) want[i] = 2.0 * v[i];
  expect_close(got, want, R * C, "gathered on device 1");
  /* a reshape that splits the cut axis: per part where the parts' rows
   * divide (12 = 6 + 6 as (6, 2): 3 + 3 rows), gathered where not (as (3, 4)) */
  float lin[12];
  for (int i = 0; i < 12; i++) lin[i] = (float)(i * i % 11) - 5;
  tvk_tensor *ls =
      tvk_shard(tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){12}, lin), 2, both, 0);
  for (int way = 0; way < 2; way++) {
    int64_t rs[2] = {way ? 3 : 6, way ? 4 : 2};
    tvk_tensor *r2 = tvk_mul(tvk_reshape(ls, 2, rs), tvk_full(s->ctx, TVK_FLOAT32, 0, NULL, 3));
    assert_int_equal(tvk_shard_info(r2, &ax), way ? 0 : 2);
    if (!way) assert_int_equal(ax, 0);
    tvk_tensor *rsum = tvk_sum(r2, 1, (const int[]){1}, false);
    read_f32(rsum, got, (size_t)rs[0]);
    for (int i = 0; i < rs[0]; i++) {
      want[i] = 0;
      for (int c = 0; c < rs[1]; c++) want[i] += 3.0 * lin[i * rs[1] + c];
    }
    expect_close(got, want, (size_t)rs[0], way ? "reshaped across parts" : "reshaped within parts");
    tvk_release(r2), tvk_release(rsum);
  }
  tvk_release(ls);
  /* int and bool parts gather too */
  int32_t iv[R * C], ig[R * C];
  for (int i = 0; i < R * C; i++) iv[i] = i * 3 - 7;
  tvk_tensor *xi =
      tvk_shard(tvk_from_data(s->ctx, TVK_INT32, 2, (int64_t[]){R, C}, iv), 2, both, 0);
  tvk_tensor *pos = tvk_gt(xi, tvk_full(s->ctx, TVK_INT32, 0, NULL, 0));
  bool bg[R * C];
  assert_int_equal(tvk_to_host(xi, ig, sizeof ig), TVK_OK);
  assert_memory_equal(ig, iv, sizeof iv);
  assert_int_equal(tvk_to_host(pos, bg, sizeof bg), TVK_OK);
  for (int i = 0; i < R * C; i++) assert_int_equal(bg[i], iv[i] > 0);
  tvk_release(xs), tvk_release(t), tvk_release(sh), tvk_release(on1), tvk_release(xi);
  tvk_release(pos), tvk_release(x);
  free(v);
}

static void test_shard_errors(void **state) {
  Suite *s = *state;
  float v[6] = {1, 2, 3, 4, 5, 6};
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){2, 3}, v);
  tvk_tensor *xs = tvk_shard(x, 2, both, 0);
  assert_int_equal(tvk_status_of(tvk_add(xs, x)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "add: tensor argument 1 is sharded");
  expect_error(s->ctx, "argument 2 is on device 0");
  assert_int_equal(tvk_status_of(tvk_shard(x, 2, both, 2)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "shard: axis 2");
  assert_int_equal(tvk_status_of(tvk_shard(x, 2, (const int[]){1, 1}, 0)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "device 1 is named twice");
  assert_int_equal(tvk_status_of(tvk_shard(x, 3, both, 0)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "n is 3");
  assert_int_equal(tvk_status_of(tvk_shard(x, 2, (const int[]){0, 5}, 0)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "devices[1] is 5");
  assert_int_equal(tvk_status_of(tvk_shard(xs, 2, both, 1)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "sharded already");
  /* an op of views that cut the axis (cumsum's windows) runs gathered */
  tvk_tensor *c = tvk_cumsum(tvk_shard(x, 2, both, 1), 1);
  float got[6];
  assert_int_equal(tvk_to_host(c, got, sizeof got), TVK_OK);
  double want[6] = {1, 3, 6, 4, 9, 15};
  expect_close(got, want, 6, "cumsum");
  /* a value on one device into a sharded target, and the other way round */
  assert_int_equal(tvk_assign(xs, x), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "assign: tensor argument 1 is sharded (tvk_shard) and argument 2 is on");
  tvk_tensor *own = tvk_contiguous(x);
  assert_int_equal(tvk_assign(own, xs), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "assign: tensor argument 2 is sharded (tvk_shard) and argument 1 is on");
  assert_int_equal(tvk_assign(xs, tvk_shard(x, 2, both, 1)), TVK_ERR_INVALID_ARG);
  expect_error(s->ctx, "sharded otherwise than the target");
  tvk_release(c), tvk_release(xs), tvk_release(x), tvk_release(own);
}

/* mean((X W - Y)^2) with X and Y's rows cut and W replicated: the gradient
 * of the replicated W (all-reduced: on every device), of the W it was made
 * from and of X, against one device's */
static void test_shard_grad(void **state) {
  Suite *s = *state;
  enum { M = 10, K = 6, N = 3 };
  float *xv = ramp(M * K, 0.25f, -1), *wv = ramp(K * N, -0.125f, 0.5f), *yv = ramp(M * N, 0.5f, -2);
  tvk_tensor *X = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){M, K}, xv);
  tvk_tensor *W = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){K, N}, wv);
  tvk_tensor *Y = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){M, N}, yv);
  tvk_tensor *d = tvk_sub(tvk_matmul(X, W), Y);
  tvk_tensor *loss = tvk_mean(tvk_mul(d, d), 0, NULL, false), *ref[2];
  assert_int_equal(tvk_grad(loss, 2, (tvk_tensor *[]){W, X}, ref), TVK_OK);
  tvk_tensor *Ws = tvk_shard(W, 2, both, -1), *Xs = tvk_shard(X, 2, both, 0);
  tvk_tensor *ds = tvk_sub(tvk_matmul(Xs, Ws), tvk_shard(Y, 2, both, 0));
  tvk_tensor *ls = tvk_mean(tvk_mul(ds, ds), 0, NULL, false), *g[3];
  assert_int_equal(tvk_grad(ls, 3, (tvk_tensor *[]){Ws, W, X}, g), TVK_OK);
  int ax = 9;
  assert_int_equal(tvk_shard_info(g[0], &ax), 2);
  assert_int_equal(ax, -1);
  float a[M * K], b[M * K], lv[2];
  double want[M * K];
  read_f32(loss, lv, 1), read_f32(ls, lv + 1, 1);
  double l0 = lv[0];
  expect_close(lv + 1, &l0, 1, "loss");
  for (int i = 0; i < 2; i++) {
    read_f32(ref[0], a, K * N), read_f32(g[i], b, K * N);
    for (int j = 0; j < K * N; j++) want[j] = a[j];
    expect_close(b, want, K * N, i ? "gradient of W" : "gradient of the replicated W");
  }
  assert_int_equal(tvk_device_of(g[1]), 0);
  read_f32(ref[1], a, M * K), read_f32(g[2], b, M * K);
  for (int j = 0; j < M * K; j++) want[j] = a[j];
  expect_close(b, want, M * K, "gradient of X");
  tvk_release(X), tvk_release(W), tvk_release(Y);
  free(xv), free(wv), free(yv);
}

/* Assigns into parts: each part takes its part of the value (cut alike, a
 * constant, a replicated tensor); the tensor the parts were cut from keeps
 * its value. Then SGD with momentum and Adam over a replicated weight and a
 * sharded batch, step by step against the same optimiser on one device. */
static void test_shard_assign_optim(void **state) {
  Suite *s = *state;
  enum { R = 5, C = 3 };
  float v[R * C], got[R * C];
  double want[R * C];
  for (int i = 0; i < R * C; i++) v[i] = (float)i - 4;
  tvk_tensor *x = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){R, C}, v);
  tvk_tensor *xs = tvk_shard(x, 2, both, 0);
  assert_int_equal(tvk_assign(xs, tvk_mul(xs, xs)), TVK_OK); /* cut alike */
  read_f32(xs, got, R * C);
  for (int i = 0; i < R * C; i++) want[i] = (double)v[i] * v[i];
  expect_close(got, want, R * C, "assigned x * x");
  assert_int_equal(tvk_assign(xs, tvk_full(s->ctx, TVK_FLOAT32, 0, NULL, 2.5)), TVK_OK);
  read_f32(xs, got, R * C);
  for (int i = 0; i < R * C; i++) want[i] = 2.5;
  expect_close(got, want, R * C, "assigned a constant");
  tvk_tensor *rep = tvk_shard(tvk_neg(x), 2, both, -1);
  assert_int_equal(tvk_assign(xs, tvk_add(xs, rep)), TVK_OK); /* a replicated value, cut */
  read_f32(xs, got, R * C);
  for (int i = 0; i < R * C; i++) want[i] = 2.5 - v[i];
  expect_close(got, want, R * C, "assigned with a replicated value");
  read_f32(x, got, R * C); /* what the parts were cut from is unchanged */
  for (int i = 0; i < R * C; i++) want[i] = v[i];
  expect_close(got, want, R * C, "the source");
  tvk_release(xs), tvk_release(rep), tvk_release(x);

  enum { M = 8, K = 5, N = 2 };
  float *xv = ramp(M * K, 0.25f, -1), *wv = ramp(K * N, 0.125f, -0.5f), *yv = ramp(M * N, 0.5f, -1);
  tvk_tensor *X = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){M, K}, xv);
  tvk_tensor *Y = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){M, N}, yv);
  tvk_tensor *Xs = tvk_shard(X, 2, both, 0), *Ys = tvk_shard(Y, 2, both, 0);
  for (int kind = TVK_OPTIM_SGD; kind <= TVK_OPTIM_ADAM; kind++) {
    tvk_tensor *W = tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){K, N}, wv);
    tvk_tensor *Ws = tvk_shard(W, 2, both, -1);
    tvk_optim_options o = {.kind = (tvk_optim_kind)kind, .lr = 0.1, .momentum = 0.5};
    if (kind == TVK_OPTIM_ADAM) o.momentum = 0;
    tvk_optim *one = tvk_optim_create(s->ctx, 1, &W, &o),
              *dp = tvk_optim_create(s->ctx, 1, &Ws, &o);
    assert_non_null(one);
    assert_non_null(dp);
    for (int step = 0; step < 3; step++) {
      tvk_tensor *d1 = tvk_sub(tvk_matmul(X, W), Y), *d2 = tvk_sub(tvk_matmul(Xs, Ws), Ys);
      tvk_tensor *l1 = tvk_mean(tvk_mul(d1, d1), 0, NULL, false);
      tvk_tensor *l2 = tvk_mean(tvk_mul(d2, d2), 0, NULL, false);
      tvk_tensor *g1, *g2;
      assert_int_equal(tvk_grad(l1, 1, &W, &g1), TVK_OK);
      assert_int_equal(tvk_grad(l2, 1, &Ws, &g2), TVK_OK);
      assert_int_equal(tvk_optim_step(one, &g1), TVK_OK);
      assert_int_equal(tvk_optim_step(dp, &g2), TVK_OK);
      float a[K * N], b[K * N];
      double wa[K * N];
      read_f32(W, a, K * N);
      tvk_tensor *p1 = tvk_shard_part(Ws, 1);
      assert_int_equal(tvk_device_of(p1), 1);
      read_f32(p1, b, K * N);
      for (int i = 0; i < K * N; i++) wa[i] = a[i];
      expect_close(b, wa, K * N, kind == TVK_OPTIM_SGD ? "SGD step" : "Adam step");
      tvk_release(d1), tvk_release(d2), tvk_release(l1), tvk_release(l2);
      tvk_release(g1), tvk_release(g2), tvk_release(p1);
    }
    tvk_optim_destroy(one), tvk_optim_destroy(dp);
    tvk_release(W), tvk_release(Ws);
  }
  /* a parameter on the second device alone: the state is made there too */
  tvk_tensor *W1 = tvk_to_device(tvk_from_data(s->ctx, TVK_FLOAT32, 2, (int64_t[]){K, N}, wv), 1);
  tvk_tensor *X1 = tvk_to_device(X, 1), *Y1 = tvk_to_device(Y, 1);
  tvk_optim_options o = {.kind = TVK_OPTIM_ADAM, .lr = 0.1};
  tvk_optim *opt = tvk_optim_create(s->ctx, 1, &W1, &o);
  assert_non_null(opt);
  tvk_tensor *d = tvk_sub(tvk_matmul(X1, W1), Y1), *g;
  assert_int_equal(tvk_grad(tvk_mean(tvk_mul(d, d), 0, NULL, false), 1, &W1, &g), TVK_OK);
  assert_int_equal(tvk_optim_step(opt, &g), TVK_OK);
  assert_int_equal(tvk_realize(1, &W1), TVK_OK);
  assert_int_equal(tvk_device_of(W1), 1);
  tvk_optim_destroy(opt);
  tvk_release(X), tvk_release(Y), tvk_release(Xs), tvk_release(Ys);
  free(xv), free(wv), free(yv);
}

int main(int argc, char **argv) {
  Suite suite = {.first = argc > 1 ? argv[1] : "CPU", .second = argc > 2 ? argv[2] : "CPU"};
  if (argc > 3) cmocka_set_test_filter(argv[3]);
  if (api_device_missing("test_devices", suite.first) ||
      api_device_missing("test_devices", suite.second))
    return 77;
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &suite)
  const struct CMUnitTest tests[] = {
      T(test_devices_listed), T(test_errors),         T(test_copy_dtypes),
      T(test_copy_views),     T(test_compute_across), T(test_round_trips),
      T(test_constants),      T(test_grad),           T(test_shard_elementwise),
      T(test_shard_reduce),   T(test_shard_matmul),   T(test_shard_views),
      T(test_shard_errors),   T(test_shard_grad),     T(test_shard_assign_optim),
      T(test_jit_across),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
