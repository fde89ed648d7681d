/* overhead: what a warm forward costs beyond its kernels.
 *
 *   build/samples/overhead [DEVICE ...] [--forwards N] [--model mlp|block|chain]
 *
 * For each device (default: CPU and VK) and model (samples/models.h, with
 * the block at 128 tokens; and chain, below, of many small kernels), builds
 * the forward's graph and reads its result N times (default 200) after 20
 * untimed forwards, with every launch timed on the device
 * (tvk_ctx_options.profile). Per forward it prints the medians of:
 *  - build: the tvk calls that make the graph (nothing runs);
 *  - realize: tvk_to_host of the result: scheduling, kernel lookup, launches,
 *    the waits and the copy back;
 *  - kernels: the device time of the forward's launches (what the profile's
 *    total grew by);
 *  - overhead: build + realize - kernels of each forward, the time that is
 *    not kernel execution (on Vulkan this includes the gaps between
 *    dispatches inside a batch, which timestamps do not cover);
 *  - host cpu: the CPU time the calling thread spent in build + realize
 *    (CLOCK_THREAD_CPUTIME_ID): tvk's own work and the driver calls it
 *    makes, without the waits (lavapipe runs kernels on threads of its own);
 * and the launches per forward. Each model runs twice: as is, and captured
 * with tvk_jit (the input x is the jit's input, the weights its captured
 * buffers: from the third call on a forward replays the recorded launches,
 * "build" is 0 and "realize" is tvk_jit_run). The first and the 21st result
 * of each are checked against the plain loops, so a fast wrong answer shows.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "models.h"
#include "tvk.h"

static double clock_ms(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
static double cpu_ms(void) { return clock_ms(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { WARM = 20 };

/* chain: many small kernels in a row, what the per-launch cost shows in: a
 * batch of 8 through CL layers of width 64, h = tanh(h W^T + b), cycling four
 * weight pairs. Each layer is one kernel (a reduce with its elementwise
 * tail), and each reads the one before. */
enum { CB = 8, CW = 64, CL = 48 };

static void chain_weights(Weights *w) {
  upload(w, CB, CW, 1.0); /* 0: x */
  for (int i = 0; i < 4; i++) upload(w, CW, CW, 1.5 / sqrt(CW)), upload(w, CW, 0, 0.1);
}

static tvk_tensor *chain_forward(tvk_tensor **w) {
  tvk_tensor *h = w[0];
  for (int l = 0; l < CL; l++) h = tvk_tanh(tvk_linear(h, w[1 + 2 * (l % 4)], w[2 + 2 * (l % 4)]));
  return h;
}

static double *chain_ref(float **hw) {
  double *h = to_double(hw[0], (size_t)CB * CW), *y = malloc(sizeof(double) * CB * CW);
  for (int l = 0; l < CL; l++) {
    ref_linear(h, hw[1 + 2 * (l % 4)], hw[2 + 2 * (l % 4)], CB, CW, CW, y);
    for (int i = 0; i < CB * CW; i++) h[i] = tanh(y[i]);
  }
  free(y);
  return h;
}

static const Model chain = {"chain", chain_weights, chain_forward, chain_ref};

/* The jit's function: the model with x (w[0]) replaced by its input. */
typedef struct {
  const Model *m;
  tvk_tensor **w;
} JitUser;

static tvk_status jit_forward(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                              tvk_tensor **out) {
  JitUser *u = user;
  (void)ctx, (void)nin, (void)nout;
  tvk_tensor *w[16];
  memcpy(w, u->w, sizeof w);
  w[0] = in[0];
  out[0] = u->m->forward(w);
  return TVK_OK;
}

/* 0 on success, 77 when the device is missing, 1 on a failure. */
static int measure(const Model *m, const char *device, int n, bool jit) {
  tvk_ctx_options o = {.device = device, .profile = 1};
  tvk_ctx *ctx;
  if (tvk_ctx_create_opts(&o, &ctx) != TVK_OK) {
    fprintf(stderr, "overhead: %s\n", tvk_last_create_error());
    return 77;
  }
  rng_state = 0x853c49e6748fea9bULL;
  Weights w = {ctx, 0, {0}, {0}};
  m->weights(&w);
  JitUser ju = {m, w.w};
  tvk_jit *j = jit ? tvk_jit_create(ctx, jit_forward, &ju) : NULL;
  double *build = malloc(sizeof(double) * (size_t)n), *run = malloc(sizeof(double) * (size_t)n),
         *kern = malloc(sizeof(double) * (size_t)n), *over = malloc(sizeof(double) * (size_t)n),
         *cpu = malloc(sizeof(double) * (size_t)n);
  float *res = NULL;
  size_t numel = 0;
  tvk_status st = TVK_OK;
  double err = 0;
  uint64_t launches = 0;
  double seen = 0; /* the profile's total so far */
  for (int i = 0; i < WARM + n && st == TVK_OK; i++) {
    if (i == WARM) {                   /* the timed forwards: their launches only */
      st = tvk_ctx_wait_compiles(ctx); /* the CPU's optimised builds in place */
      tvk_profile_reset(ctx);
      tvk_stats s;
      tvk_stats_get(ctx, &s);
      launches = s.kernels_run;
    }
    /* the forward's tensors end with it, as in an app's loop: a realize
     * updates every live tensor of the context */
    size_t scope = tvk_scope_begin(ctx);
    double c0 = cpu_ms(), t0 = now_ms();
    tvk_tensor *out = NULL;
    if (!j) out = m->forward(w.w);
    double t1 = now_ms();
    if (j) st = tvk_jit_run(j, 1, &w.w[0], 1, &out);
    if (!res) {
      numel = (size_t)tvk_numel(out);
      res = malloc(numel * sizeof *res);
    }
    if (st == TVK_OK) st = tvk_to_host(out, res, numel * sizeof *res);
    double t2 = now_ms(), c2 = cpu_ms();
    tvk_scope_end(ctx, scope, 0, NULL);
    if (i >= WARM && st == TVK_OK) {
      /* this forward's device time: the profile's total grew by it */
      const tvk_profile_entry *rows;
      int nrows = tvk_profile_entries(ctx, &rows);
      double total = 0;
      for (int r = 0; r < nrows; r++) total += rows[r].total_ms;
      int k = i - WARM;
      build[k] = t1 - t0, run[k] = t2 - t1, kern[k] = total - seen;
      over[k] = build[k] + run[k] - kern[k];
      cpu[k] = c2 - c0;
      seen = total;
    }
    if ((i == 0 || i == WARM) && st == TVK_OK) { /* the first result, and a replayed one */
      double *ref = m->ref(w.host);
      for (size_t k = 0; k < numel; k++)
        err = fmax(err, fabs(res[k] - ref[k]) / (1 + fabs(ref[k])));
      free(ref);
      if (!(err < 1e-3)) {
        fprintf(stderr, "overhead: %s on %s: wrong result (error %g)\n", m->name, device, err);
        st = TVK_ERR_INTERNAL;
      }
    }
  }
  if (st != TVK_OK && err < 1e-3) fprintf(stderr, "overhead: %s\n", tvk_ctx_error(ctx));
  tvk_stats s;
  tvk_stats_get(ctx, &s);
  if (st == TVK_OK) {
    char name[16];
    snprintf(name, sizeof name, "%s%s", m->name, jit ? " jit" : "");
    printf("%-9s %-41.41s %9.3f %9.3f %9.3f %9.3f %9.3f %8.1f\n", name, tvk_ctx_device(ctx),
           median(build, n), median(run, n), median(kern, n), median(over, n), median(cpu, n),
           (double)(s.kernels_run - launches) / n);
  }
  free(build), free(run), free(kern), free(over), free(cpu), free(res);
  for (int i = 0; i < w.nw; i++) free(w.host[i]);
  tvk_jit_destroy(j);
  tvk_ctx_destroy(ctx);
  return st == TVK_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *devices[8];
  int ndev = 0, n = 200;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--forwards") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--model") && i + 1 < argc)
      only = argv[++i];
    else if (argv[i][0] != '-' && ndev < 8)
      devices[ndev++] = argv[i];
    else
      return fprintf(stderr, "usage: %s [DEVICE ...] [--forwards N] [--model mlp|block|chain]\n",
                     argv[0]),
             2;
  }
  if (n < 1) return fprintf(stderr, "overhead: --forwards must be at least 1\n"), 2;
  if (ndev == 0) devices[ndev++] = "CPU", devices[ndev++] = "VK";
  BT = 128;
  printf("per forward, ms (medians of %d; kernels: their device time)\n", n);
  printf("%-9s %-41s %9s %9s %9s %9s %9s %8s\n", "model", "device", "build", "realize", "kernels",
         "overhead", "host cpu", "launches");
  int rc = 0;
  for (int d = 0; d < ndev; d++)
    for (size_t k = 0; k <= sizeof models / sizeof models[0]; k++) {
      const Model *m = k < sizeof models / sizeof models[0] ? &models[k] : &chain;
      if (only && strcmp(only, m->name)) continue;
      int r = measure(m, devices[d], n, false);
      if (r == 77) break; /* the device is missing: its other models too */
      if (r || measure(m, devices[d], n, true)) rc = 1;
    }
  return rc;
}
