/* Training loops as an app runs them (tvk.h only; `test_train CPU`,
 * `test_train VK`; exit 77: no such device): a two-layer MLP's step --
 * forward, tvk_grad, tvk_optim_step, one tvk_realize -- is a fixed, small
 * number of kernels that compile once, and thousands of steps run in flat
 * memory: the device bytes in use and the process's resident memory stop
 * growing after the first steps. */
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

static bool on_vk(const Suite *s) { return !strcmp(s->device, "VK"); }

enum { B = 32, I = 16, H = 32, O = 4 };

static uint64_t rng = 0x853c49e6748fea9bULL;
static float urand(double lo, double hi) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)(lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53);
}

/* The model: x (B, I) -> relu(x @ w1 + b1) (B, H) -> @ w2 + b2 (B, O), labels
 * y; the data is fixed, so the loss must fall. */
typedef struct {
  tvk_tensor *x, *y, *p[4];
  tvk_optim *opt;
} Mlp;

static void mlp_init(Mlp *m, tvk_ctx *ctx, tvk_optim_kind kind, double lr) {
  static float x[B * I], w1[I * H], b1[H], w2[H * O], b2[O];
  static int32_t y[B];
  for (int i = 0; i < B * I; i++) x[i] = urand(-1, 1);
  for (int i = 0; i < I * H; i++) w1[i] = urand(-0.25, 0.25);
  for (int i = 0; i < H * O; i++) w2[i] = urand(-0.18, 0.18);
  for (int i = 0; i < H; i++) b1[i] = urand(-0.1, 0.1);
  for (int i = 0; i < O; i++) b2[i] = urand(-0.1, 0.1);
  for (int i = 0; i < B; i++) y[i] = (int32_t)(i * 7 % O);
  m->x = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){B, I}, x);
  m->y = tvk_from_data(ctx, TVK_INT32, 1, (int64_t[]){B}, y);
  m->p[0] = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){I, H}, w1);
  m->p[1] = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){H}, b1);
  m->p[2] = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){H, O}, w2);
  m->p[3] = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){O}, b2);
  tvk_optim_options oo = {.kind = kind, .lr = lr, .momentum = kind == TVK_OPTIM_SGD ? 0.9 : 0};
  m->opt = tvk_optim_create(ctx, 4, m->p, &oo);
  assert_non_null(m->opt);
}

static void mlp_free(Mlp *m) {
  tvk_optim_destroy(m->opt);
  tvk_release(m->x), tvk_release(m->y);
  for (int i = 0; i < 4; i++) tvk_release(m->p[i]);
}

/* One training step, as the samples write it; the loss when read. */
static float mlp_step(tvk_ctx *ctx, Mlp *m, bool read) {
  size_t scope = tvk_scope_begin(ctx);
  tvk_tensor *h = tvk_relu(tvk_add(tvk_matmul(m->x, m->p[0]), m->p[1]));
  tvk_tensor *loss = tvk_cross_entropy(tvk_add(tvk_matmul(h, m->p[2]), m->p[3]), m->y), *g[4];
  if (tvk_grad(loss, 4, m->p, g) != TVK_OK || tvk_optim_step(m->opt, g) != TVK_OK)
    fail_msg("step: %s", tvk_ctx_error(ctx));
  tvk_tensor *all[5] = {m->p[0], m->p[1], m->p[2], m->p[3], loss};
  if (tvk_realize(5, all) != TVK_OK) fail_msg("realize: %s", tvk_ctx_error(ctx));
  float l = 0;
  if (read && tvk_to_host(loss, &l, sizeof l) != TVK_OK) fail_msg("%s", tvk_ctx_error(ctx));
  tvk_scope_end(ctx, scope, 0, NULL);
  return l;
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

/* A step's kernels: the same launches every step (forward, backward and the
 * update fused into at most `most` kernels), its schedule reused from the
 * second step on, and no kernel generated after the first step. */
static void check_step_kernels(Suite *s, tvk_optim_kind kind, double lr, uint64_t most) {
  Mlp m;
  mlp_init(&m, s->ctx, kind, lr);
  tvk_stats a, b;
  uint64_t per_step = 0, generated = 0, reused = 0;
  float first = mlp_step(s->ctx, &m, true), last = first;
  for (int step = 1; step <= 30; step++) {
    tvk_stats_get(s->ctx, &a);
    last = mlp_step(s->ctx, &m, step == 30);
    tvk_stats_get(s->ctx, &b);
    uint64_t run = b.kernels_run - a.kernels_run;
    if (step == 1) {
      per_step = run, generated = b.kernels_generated + b.kernels_stored;
      reused = b.schedules_reused;
      printf("  %s step: %llu kernels\n", kind == TVK_OPTIM_SGD ? "SGD" : "Adam",
             (unsigned long long)run);
    }
    if (run != per_step)
      fail_msg("step %d ran %llu kernels, step 1 ran %llu", step, (unsigned long long)run,
               (unsigned long long)per_step);
    assert_int_equal(b.kernels_generated + b.kernels_stored, generated);
    assert_int_equal(b.schedules_reused, reused + (uint64_t)(step - 1));
  }
  if (per_step > most)
    fail_msg("a step runs %llu kernels, more than %llu", (unsigned long long)per_step,
             (unsigned long long)most);
  if (!(last < 0.5f * first)) fail_msg("the loss went from %g to %g only", first, last);
  mlp_free(&m);
}

/* Today's count is 22 for both, from:
 *  - four copies of the old weights, which tensors still alive in the step's
 *    scope read (tvk_assign's promise; realize.c's copy_old_values);
 *  - the forward's matmuls and cross entropy's reductions (its max is
 *    detached: no gradient path) and the backward's matmuls;
 *  - one update kernel per parameter, storing the parameter and its state
 *    (group.c's assign chains).
 * The bounds are those counts: a fusion that breaks fails the test. */
static void test_step_kernels_sgd(void **state) {
  check_step_kernels(*state, TVK_OPTIM_SGD, 0.2, 22);
}
static void test_step_kernels_adam(void **state) {
  check_step_kernels(*state, TVK_OPTIM_ADAM, 0.02, 22);
}

/* Resident memory in bytes (Linux), or 0. */
static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%llu %llu", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return (uint64_t)rss * 4096;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TVK_SANITIZED 1 /* a sanitizer keeps freed memory aside: RSS grows by design */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TVK_SANITIZED 1
#endif
#endif

/* 10,000 Adam steps on the CPU (2,000 on Vulkan, whose software device is
 * slower; 1,000 under a sanitizer): after the first 200 the device bytes in
 * use do not change, and the resident memory grows by less than 2 MiB (not
 * checked under a sanitizer). A leak of one small block per step would be
 * hundreds of KiB by the end; a buffer kept per step, megabytes. */
static void test_flat_memory(void **state) {
  Suite *s = *state;
  int steps = on_vk(s) ? 2000 : 10000;
#ifdef TVK_SANITIZED
  steps = 1000;
#endif
  Mlp m;
  mlp_init(&m, s->ctx, TVK_OPTIM_ADAM, 0.01);
  tvk_stats st;
  uint64_t bytes = 0, rss = 0;
  float first = mlp_step(s->ctx, &m, true), last = first;
  for (int step = 1; step < steps; step++) {
    last = mlp_step(s->ctx, &m, step == steps - 1);
    if (step == 200) {
      tvk_stats_get(s->ctx, &st);
      bytes = st.bytes_now, rss = rss_bytes();
    }
  }
  tvk_stats_get(s->ctx, &st);
  uint64_t rss_end = rss_bytes();
  printf("  %d steps: device bytes %llu at step 200, %llu at the end; RSS %.2f -> %.2f MiB\n",
         steps, (unsigned long long)bytes, (unsigned long long)st.bytes_now, rss / 1048576.0,
         rss_end / 1048576.0);
  assert_int_equal(st.bytes_now, bytes);
#ifndef TVK_SANITIZED
  if (rss && rss_end > rss + (2u << 20))
    fail_msg("resident memory grew from %.2f to %.2f MiB over %d steps", rss / 1048576.0,
             rss_end / 1048576.0, steps - 200);
#endif
  if (!(last < 0.2f * first)) fail_msg("the loss went from %g to %g only", first, last);
  mlp_free(&m);
}

int main(int argc, char **argv) {
  static Suite suite;
  suite.device = argc > 1 ? argv[1] : "CPU";
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  if (api_device_missing("test_train", suite.device)) return 77;
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &suite)
  const struct CMUnitTest tests[] = {
      T(test_step_kernels_sgd),
      T(test_step_kernels_adam),
      T(test_flat_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
