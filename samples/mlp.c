/* Trains a two-layer perceptron on a toy problem (points in the plane, three
 * classes in interleaved spirals) with plain gradient descent, and reports the
 * loss and the accuracy. tvk_grad gives the gradients of the loss and a
 * tvk_optim (SGD) updates the weights in place, so each step (forward,
 * backward, update) is one realize of fused kernels over the same buffers.
 *
 *   build/samples/mlp [DEVICE] [STEPS]
 *
 * Exits 0 when the final accuracy is above 90% (a check that training works;
 * ctest runs it as sample_mlp_cpu and sample_mlp_vk), 2 below that, 3 on a
 * Vulkan validation message, 77 when the device does not exist. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tvk.h"

enum { N = 300, C = 3, D = 2, H = 64 };

static uint64_t rng = 0x853c49e6748fea9bULL;
static double uniform(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng >> 11) * 0x1p-53;
}

/* N points, N / C per class on a spiral arm, with some noise. */
static void make_spirals(float *x, int32_t *y) {
  for (int c = 0; c < C; c++)
    for (int i = 0; i < N / C; i++) {
      int n = c * (N / C) + i;
      double r = (double)i / (N / C), t = c * 4.0 + 4.0 * r + 0.2 * (uniform() - 0.5);
      x[n * D] = (float)(r * sin(t)), x[n * D + 1] = (float)(r * cos(t));
      y[n] = c;
    }
}

static tvk_tensor *randn_scaled(tvk_ctx *ctx, int64_t rows, int64_t cols, double scale,
                                uint64_t seed) {
  int64_t shape[2] = {rows, cols};
  tvk_tensor *r = tvk_randn(ctx, TVK_FLOAT32, 2, shape, seed);
  tvk_tensor *s = tvk_mul(r, tvk_scalar(ctx, TVK_FLOAT32, scale));
  tvk_realize(1, &s);
  return s;
}

int main(int argc, char **argv) {
  const char *device = argc > 1 ? argv[1] : NULL;
  int steps = argc > 2 ? atoi(argv[2]) : 300;
  tvk_ctx *ctx;
  tvk_ctx_options opt = {.device = device, .progress = 1}; /* say how long compiles go */
  tvk_status cs = tvk_ctx_create_opts(&opt, &ctx);
  if (cs != TVK_OK) {
    fprintf(stderr, "mlp: %s\n", tvk_last_create_error());
    return cs == TVK_ERR_DEVICE ? 77 : 1;
  }
  printf("device: %s\n", tvk_ctx_device(ctx));
  static float xs[N * D];
  static int32_t ys[N];
  make_spirals(xs, ys);
  int64_t sx[2] = {N, D}, sy[1] = {N};
  tvk_tensor *x = tvk_from_data(ctx, TVK_FLOAT32, 2, sx, xs);
  tvk_tensor *y = tvk_from_data(ctx, TVK_INT32, 1, sy, ys);
  tvk_tensor *w1 = randn_scaled(ctx, D, H, 1.0, 1), *w2 = randn_scaled(ctx, H, C, 0.1, 2);
  int64_t sh[1] = {H}, sc_[1] = {C};
  /* biases with memory of their own (a constant is not a parameter) */
  tvk_tensor *b1 = tvk_contiguous(tvk_full(ctx, TVK_FLOAT32, 1, sh, 0)),
             *b2 = tvk_contiguous(tvk_full(ctx, TVK_FLOAT32, 1, sc_, 0));
  tvk_tensor *init[2] = {b1, b2};
  tvk_realize(2, init);
  tvk_tensor *params[4] = {w1, b1, w2, b2};
  tvk_optim_options so = {.kind = TVK_OPTIM_SGD, .lr = 1.0};
  tvk_optim *sgd = tvk_optim_create(ctx, 4, params, &so);
  float loss = NAN;
  tvk_status st = TVK_OK;
  for (int step = 0; step < steps && st == TVK_OK; step++) {
    size_t scope = tvk_scope_begin(ctx);
    /* forward */
    tvk_tensor *h = tvk_relu(tvk_add(tvk_matmul(x, w1), b1));
    tvk_tensor *logits = tvk_add(tvk_matmul(h, w2), b2);
    tvk_tensor *l = tvk_cross_entropy(logits, y);
    /* backward */
    tvk_tensor *g[4];
    st = sgd ? tvk_grad(l, 4, params, g) : TVK_ERR_INVALID_ARG;
    /* the update: the gradients read the old weights, so they run first */
    if (st == TVK_OK) st = tvk_optim_step(sgd, g);
    tvk_tensor *all[5] = {w1, b1, w2, b2, l};
    if (st == TVK_OK) st = tvk_realize(5, all);
    if (st == TVK_OK && (step % 50 == 0 || step == steps - 1)) {
      st = tvk_to_host(l, &loss, sizeof loss);
      tvk_stats q;
      tvk_stats_get(ctx, &q);
      printf("step %4d  loss %.4f  now %llu peak %llu\n", step, loss,
             (unsigned long long)q.bytes_now, (unsigned long long)q.bytes_peak);
    }
    tvk_scope_end(ctx, scope, 0, NULL);
  }
  /* accuracy */
  int correct = 0;
  if (st == TVK_OK) {
    size_t scope = tvk_scope_begin(ctx);
    tvk_tensor *logits = tvk_add(tvk_matmul(tvk_relu(tvk_add(tvk_matmul(x, w1), b1)), w2), b2);
    static int32_t pred[N];
    st = tvk_to_host(tvk_argmax(logits, 1, false), pred, sizeof pred);
    for (int n = 0; n < N; n++) correct += pred[n] == ys[n];
    tvk_scope_end(ctx, scope, 0, NULL);
  }
  if (st != TVK_OK) {
    fprintf(stderr, "mlp: %s: %s\n", tvk_status_name(st), tvk_ctx_error(ctx));
    tvk_ctx_destroy(ctx);
    return 1;
  }
  tvk_stats s;
  tvk_stats_get(ctx, &s);
  printf("accuracy %.1f%% after %d steps; %llu kernels run, %llu compiled, peak %.1f KiB\n",
         100.0 * correct / N, steps, (unsigned long long)s.kernels_run,
         (unsigned long long)s.kernels_compiled, s.bytes_peak / 1024.0);
  tvk_ctx_destroy(ctx);
  if (s.validation_messages)
    fprintf(stderr, "mlp: %llu Vulkan validation messages\n",
            (unsigned long long)s.validation_messages);
  return s.validation_messages ? 3 : correct * 10 > N * 9 ? 0 : 2;
}
