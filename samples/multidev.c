/* multidev: one context over two devices (docs/devices.md). Measures what a
 * copy between them costs against memcpy, runs work split over both against
 * each alone, and trains a small MLP data-parallel (the batch split over the
 * two with tvk_shard, gradients all-reduced) against the same training on
 * one.
 *
 *   build/samples/multidev [DEV0 [DEV1]] [--quick]     (default: CPU VK)
 *
 * Times are medians of several realizes after a warm-up (compiles excluded).
 * TVK_TRACE=file.json shows where the time goes, one track per device. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tvk.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static tvk_ctx *ctx;
static int reps = 9;

static void die(const char *what) {
  fprintf(stderr, "multidev: %s: %s\n", what, tvk_ctx_error(ctx));
  exit(1);
}

static float *rand_floats(size_t n, unsigned seed) {
  float *v = malloc(n * sizeof *v);
  if (!v) {
    fprintf(stderr, "multidev: out of memory\n");
    exit(1);
  }
  uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
  }
  return v;
}

/* The median time of realizing what build() makes from the inputs (new
 * tensors each time: the realize reruns, its schedule and kernels reused). */
typedef void (*BuildFn)(tvk_tensor *const *in, tvk_tensor **out, int *nout);
static double time_realize(BuildFn build, tvk_tensor *const *in) {
  double t[32];
  for (int r = -1; r < reps; r++) {
    tvk_tensor *out[4];
    int n = 0;
    build(in, out, &n);
    double t0 = now_ms();
    if (tvk_realize(n, out) != TVK_OK || tvk_sync(ctx) != TVK_OK) die("realize");
    if (r >= 0) t[r] = now_ms() - t0;
    for (int i = 0; i < n; i++) tvk_release(out[i]);
    /* timed with the CPU's optimised kernels, not its first quick builds */
    if (r < 0 && tvk_ctx_wait_compiles(ctx) != TVK_OK) die("wait_compiles");
  }
  return median(t, reps);
}

/* ---------------------------------------------------------------- copies */

static int copy_to;
static void build_copy(tvk_tensor *const *in, tvk_tensor **out, int *n) {
  out[0] = tvk_to_device(in[0], copy_to);
  *n = 1;
}

static void copies(size_t n) {
  float *v = rand_floats(n, 1), *dst = malloc(n * sizeof *dst);
  double t[32];
  for (int r = -1; r < reps; r++) {
    double t0 = now_ms();
    memcpy(dst, v, n * sizeof *v);
    if (r >= 0) t[r] = now_ms() - t0;
  }
  double mb = (double)n * sizeof *v / 1e6, ref = median(t, reps);
  printf("copy %.0f MB\n  memcpy                 %8.2f ms  %6.1f GB/s\n", mb, ref, mb / ref);
  tvk_tensor *x0 = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){(int64_t)n}, v);
  tvk_tensor *x1 = tvk_to_device(x0, 1);
  if (tvk_realize(1, &x1) != TVK_OK) die("copy");
  for (int dir = 0; dir < 2; dir++) {
    copy_to = dir ? 0 : 1;
    double ms = time_realize(build_copy, dir ? &x1 : &x0);
    printf("  device %d -> device %d     %8.2f ms  %6.1f GB/s  (%.2fx memcpy's time)\n",
           1 - copy_to, copy_to, ms, mb / ms, ms / ref);
  }
  float *back = malloc(n * sizeof *back);
  if (tvk_to_host(x1, back, n * sizeof *back) != TVK_OK) die("to_host");
  if (memcmp(back, v, n * sizeof *v)) {
    fprintf(stderr, "multidev: the copy changed the data\n");
    exit(1);
  }
  tvk_release(x0), tvk_release(x1);
  free(v), free(dst), free(back);
}

/* ---------------------------------------------------------------- split work */

/* sum(exp(x / 4) * x): elementwise and a reduce */
static tvk_tensor *ew_reduce(tvk_tensor *x) {
  tvk_tensor *q = tvk_full(ctx, TVK_FLOAT32, 0, NULL, 0.25);
  return tvk_sum(tvk_mul(tvk_exp(tvk_mul(x, q)), x), 0, NULL, false);
}

static void build_ew_one(tvk_tensor *const *in, tvk_tensor **out, int *n) {
  out[0] = ew_reduce(in[0]);
  *n = 1;
}

static const int both[2] = {0, 1};

static void build_mm_one(tvk_tensor *const *in, tvk_tensor **out, int *n) {
  out[0] = tvk_matmul(in[0], in[1]);
  *n = 1;
}

static double read_scalar(tvk_tensor *t) {
  float v;
  if (tvk_to_host(t, &v, sizeof v) != TVK_OK) die("to_host");
  return v;
}

static void split_work(int64_t n, int64_t mm) {
  float *v = rand_floats((size_t)n, 2);
  tvk_tensor *x[3];
  x[0] = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){n}, v);
  x[1] = tvk_to_device(x[0], 1);
  x[2] = tvk_shard(x[0], 2, both, 0); /* half on each */
  tvk_realize(3, x);
  double want = 0;
  for (int64_t i = 0; i < n; i++) want += exp(v[i] / 4.0) * v[i];
  printf("elementwise + reduce, %lld floats: sum(exp(x / 4) * x)\n", (long long)n);
  for (int d = 0; d < 2; d++)
    printf("  device %d alone          %8.2f ms\n", d, time_realize(build_ew_one, &x[d]));
  printf("  sharded over both       %8.2f ms  (partial sums all-reduced)\n",
         time_realize(build_ew_one, &x[2]));
  tvk_tensor *chk = ew_reduce(x[2]);
  double got = read_scalar(chk);
  printf("  sharded result %.6g, double loop %.6g (rel. error %.1e)\n", got, want,
         fabs(got - want) / fabs(want));
  tvk_release(chk);
  for (int d = 0; d < 3; d++) tvk_release(x[d]);
  free(v);

  float *a = rand_floats((size_t)(mm * mm), 3), *b = rand_floats((size_t)(mm * mm), 4);
  tvk_tensor *A = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){mm, mm}, a);
  tvk_tensor *B = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){mm, mm}, b);
  tvk_tensor *on1[2] = {tvk_to_device(A, 1), tvk_to_device(B, 1)};
  /* rows of A cut over both, B replicated: each device its rows */
  tvk_tensor *sh[2] = {tvk_shard(A, 2, both, 0), tvk_shard(B, 2, both, -1)};
  tvk_realize(2, on1), tvk_realize(2, sh);
  double gflop = 2.0 * (double)mm * mm * mm / 1e6;
  printf("matmul %lld x %lld x %lld\n", (long long)mm, (long long)mm, (long long)mm);
  tvk_tensor *one0[2] = {A, B};
  double t0 = time_realize(build_mm_one, one0), t1 = time_realize(build_mm_one, on1),
         ts = time_realize(build_mm_one, sh);
  printf("  device 0 alone          %8.2f ms  %6.1f GFLOP/s\n", t0, gflop / t0);
  printf("  device 1 alone          %8.2f ms  %6.1f GFLOP/s\n", t1, gflop / t1);
  printf("  rows sharded over both  %8.2f ms  %6.1f GFLOP/s (the result left in parts)\n", ts,
         gflop / ts);
  for (int i = 0; i < 2; i++) tvk_release(on1[i]), tvk_release(sh[i]);
  tvk_release(A), tvk_release(B);
  free(a), free(b);
}

/* ---------------------------------------------------------------- data-parallel training */

enum { IN = 32, HID = 64, OUT = 8 };

typedef struct {
  tvk_tensor *w1, *w2; /* (IN, HID), (HID, OUT) */
} Mlp;

static tvk_tensor *mse(const Mlp *m, tvk_tensor *x, tvk_tensor *y) {
  tvk_tensor *d = tvk_sub(tvk_matmul(tvk_relu(tvk_matmul(x, m->w1)), m->w2), y);
  return tvk_mean(tvk_mul(d, d), 0, NULL, false);
}

/* w - lr * g, realized */
static tvk_tensor *sgd(tvk_tensor *w, tvk_tensor *g, double lr) {
  return tvk_sub(w, tvk_mul(g, tvk_full(ctx, TVK_FLOAT32, 0, NULL, lr)));
}

static void replace(tvk_tensor **slot, tvk_tensor *t) {
  tvk_release(*slot);
  *slot = t;
}

/* One SGD step of m on (x, y), realized; its loss. The same code whether x,
 * y and m live on one device or x and y are sharded and m replicated: then
 * the gradients come all-reduced and each device updates its copy. */
static double sgd_step(Mlp *m, tvk_tensor *x, tvk_tensor *y, double lr) {
  tvk_tensor *loss = mse(m, x, y), *g[2];
  if (tvk_grad(loss, 2, (tvk_tensor *[]){m->w1, m->w2}, g) != TVK_OK) die("grad");
  replace(&m->w1, sgd(m->w1, g[0], lr)), replace(&m->w2, sgd(m->w2, g[1], lr));
  if (tvk_realize(3, (tvk_tensor *[]){loss, m->w1, m->w2}) != TVK_OK) die("step");
  double l = read_scalar(loss);
  tvk_release(loss), tvk_release(g[0]), tvk_release(g[1]);
  return l;
}

static void train(int steps, int batch) {
  float *xv = rand_floats((size_t)batch * IN, 5), *yv = rand_floats((size_t)batch * OUT, 6);
  float *w1 = rand_floats(IN * HID, 7), *w2 = rand_floats(HID * OUT, 8);
  for (int i = 0; i < IN * HID; i++) w1[i] *= 0.3f;
  for (int i = 0; i < HID * OUT; i++) w2[i] *= 0.3f;
  tvk_tensor *X = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){batch, IN}, xv);
  tvk_tensor *Y = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){batch, OUT}, yv);
  /* the batch's rows cut over the two devices */
  tvk_tensor *xs = tvk_shard(X, 2, both, 0), *ys = tvk_shard(Y, 2, both, 0);
  tvk_realize(2, (tvk_tensor *[]){xs, ys});
  Mlp one = {tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){IN, HID}, w1),
             tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){HID, OUT}, w2)};
  /* the weights replicated: a copy on each device */
  Mlp rep = {tvk_shard(one.w1, 2, both, -1), tvk_shard(one.w2, 2, both, -1)};
  tvk_realize(2, (tvk_tensor *[]){rep.w1, rep.w2});
  const double lr = 0.05;
  double worst = 0, t_one = 0, t_dp = 0, first = 0, last = 0;
  bool same = true;
  for (int s = 0; s < steps; s++) {
    double t0 = now_ms();
    double l_one = sgd_step(&one, X, Y, lr); /* one device, the whole batch */
    double t1 = now_ms();
    double l_dp = sgd_step(&rep, xs, ys, lr); /* data-parallel over both */
    double t2 = now_ms();
    if (s == 0 && tvk_ctx_wait_compiles(ctx) != TVK_OK) die("wait_compiles");
    if (s > 0) t_one += t1 - t0, t_dp += t2 - t1; /* the first step compiles */
    double rel = fabs(l_dp - l_one) / fabs(l_one);
    if (rel > worst) worst = rel;
    if (s == 0) first = l_one;
    last = l_one;
    /* the replicas hold the same weights */
    float a[HID * OUT], b[HID * OUT];
    tvk_tensor *p0 = tvk_shard_part(rep.w2, 0), *p1 = tvk_shard_part(rep.w2, 1);
    if (tvk_to_host(p0, a, sizeof a) != TVK_OK || tvk_to_host(p1, b, sizeof b) != TVK_OK)
      die("to_host");
    same = same && !memcmp(a, b, sizeof a) && tvk_device_of(p0) == 0 && tvk_device_of(p1) == 1;
    tvk_release(p0), tvk_release(p1);
  }
  printf("MLP %d-%d-%d, batch %d, %d SGD steps\n", IN, HID, OUT, batch, steps);
  printf("  one device, whole batch   %8.2f ms/step  loss %.5f -> %.5f\n", t_one / (steps - 1),
         first, last);
  printf("  data-parallel over both   %8.2f ms/step  loss curve within %.1e (relative) of it\n",
         t_dp / (steps - 1), worst);
  printf("  replicas' weights after each step: %s\n", same ? "bit-identical" : "DIFFER");
  tvk_release(X), tvk_release(Y), tvk_release(xs), tvk_release(ys);
  tvk_release(rep.w1), tvk_release(rep.w2), tvk_release(one.w1), tvk_release(one.w2);
  free(xv), free(yv), free(w1), free(w2);
  if (worst > 1e-3 || !same) exit(1);
}

int main(int argc, char **argv) {
  const char *dev[2] = {"CPU", "VK"};
  int nd = 0;
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = true;
    else if (nd < 2)
      dev[nd++] = argv[i];
  }
  if (quick) reps = 3;
  if (tvk_ctx_create(dev[0], &ctx) != TVK_OK) {
    fprintf(stderr, "multidev: %s: %s\n", dev[0], tvk_last_create_error());
    return 1;
  }
  int idx;
  if (tvk_ctx_add_device(ctx, dev[1], &idx) != TVK_OK) die(dev[1]);
  printf("device 0: %s\ndevice 1: %s\n", tvk_ctx_device_name(ctx, 0), tvk_ctx_device_name(ctx, 1));
  copies(quick ? (size_t)1 << 20 : (size_t)1 << 24);
  split_work(quick ? (int64_t)1 << 20 : (int64_t)1 << 24, quick ? 256 : 1024);
  train(quick ? 10 : 100, 256);
  tvk_ctx_destroy(ctx);
  return 0;
}
