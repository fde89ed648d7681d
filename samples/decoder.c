/* decoder: a transformer block run over a growing sequence, three ways.
 *
 *   build/samples/decoder [DEVICE ...] [--max N] [--mode symbolic|fixed|padded] [--profile]
 *
 * For each device (default: CPU and VK), the block of samples/models.h (pre-LN,
 * width 256, 4 heads, a GELU MLP of 1024) runs on the first `len` tokens of
 * a fixed input, for len = 1 .. N (default 256), as a decoder that re-reads
 * its whole prefix each step would:
 *  - symbolic: the tokens are a size variable `seq` in [1, N] (tvk.h,
 *    "symbolic sizes"), bound to len each step: one set of kernels for every
 *    length;
 *  - fixed: the shapes are the number len: new kernels for every length;
 *  - padded: always N tokens (the causal mask keeps the first len rows
 *    exact), of which the first len rows are read.
 * Each prints the total time of the N steps (graph building, scheduling,
 * compiles, the kernels and the copy back of each step), the kernels
 * compiled (tvk_stats: code generated, read from the disk cache, or
 * compiled), the median step, and the largest error of any result against
 * the plain double-precision loops of models.h, and the device time of the
 * kernels of one warm step at N/2 and at N tokens (median of 7, after the
 * kernels' optimised builds are done): a symbolic kernel against the same
 * kernel compiled for the number. The total includes what an app sees
 * first: on the CPU a kernel runs from a quick build (TinyCC) while the
 * optimised one compiles in the background. --profile prints where the
 * device time of the probes at N went, kernel by kernel. A run with an
 * error above 1e-3 fails (exit 1).
 *
 * The kernel cache on disk makes a second run of `fixed` faster than its
 * first; TVK_NO_DISK_CACHE=1 measures what a fresh machine sees. Exit 77
 * when none of the devices exists. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "models.h"
#include "tvk.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef enum { M_SYMBOLIC, M_FIXED, M_PADDED, M_COUNT } Mode;
static bool show_profile; /* --profile: the kernels of the probes at N, per mode */
static const char *const mode_names[M_COUNT] = {"symbolic", "fixed", "padded"};

enum { PROBES = 7 }; /* repeats of a probed length, for the median of its kernel time */

typedef struct {
  double total_ms, median_ms, worst;
  uint64_t builds;
  double kernel_ms[2]; /* median device time of one step at len N/2 and N */
} Result;

static uint64_t builds(tvk_ctx *ctx) {
  tvk_stats s;
  tvk_stats_get(ctx, &s);
  return s.kernels_generated + s.kernels_stored + s.kernels_compiled;
}

/* The device time of every launch timed so far (the profile's total). */
static double kernel_total(tvk_ctx *ctx) {
  const tvk_profile_entry *rows;
  int n = tvk_profile_entries(ctx, &rows);
  double t = 0;
  for (int i = 0; i < n; i++) t += rows[i].total_ms;
  return t;
}

/* One step of mode m at len tokens (seq: the size variable of symbolic
 * mode): the block's result into out. */
static bool one_step(tvk_ctx *ctx, Weights *w, tvk_tensor *tri, int max, Mode m, int64_t seq,
                     int len, float *out) {
  size_t scope = tvk_scope_begin(ctx);
  int64_t T = m == M_SYMBOLIC ? seq : m == M_FIXED ? len : max;
  bool ok = m != M_SYMBOLIC || tvk_bind(ctx, seq, len) == TVK_OK;
  tvk_tensor *x = T == max ? w->w[0] : tvk_shrink(w->w[0], (const int64_t[][2]){{0, T}, {0, BD}});
  tvk_tensor *mask = T == max ? tri : tvk_shrink(tri, (const int64_t[][2]){{0, T}, {0, T}});
  tvk_tensor *y = block_forward_on(w->w, x, T, mask);
  ok = ok && tvk_to_host(y, out, sizeof(float) * (size_t)max * BD) == TVK_OK;
  if (!ok) fprintf(stderr, "decoder: %s, len %d: %s\n", mode_names[m], len, tvk_ctx_error(ctx));
  tvk_scope_end(ctx, scope, 0, NULL);
  return ok;
}

/* One mode on ctx: the N steps, each checked against ref (the block at N
 * tokens: causal, so its first len rows are the block at len tokens); then
 * the kernel time of a step at N/2 and N tokens, warm. */
static bool run_mode(tvk_ctx *ctx, Weights *w, tvk_tensor *tri, const double *ref, int max, Mode m,
                     Result *r) {
  int64_t seq = m == M_SYMBOLIC ? tvk_size_var(ctx, "seq", 1, max) : 0;
  float *out = malloc(sizeof(float) * (size_t)max * BD);
  double *step = malloc(sizeof(double) * (size_t)max);
  uint64_t b0 = builds(ctx);
  double t0 = now_ms();
  r->worst = 0;
  bool ok = out && step && seq != -1; /* a size variable is a negative number */
  for (int len = 1; ok && len <= max; len++) {
    double s0 = now_ms();
    ok = one_step(ctx, w, tri, max, m, seq, len, out);
    step[len - 1] = now_ms() - s0;
    for (int i = 0; ok && i < len * BD; i++) {
      double e = fabs(out[i] - ref[i]) / (1 + fabs(ref[i]));
      r->worst = e > r->worst ? e : r->worst;
    }
  }
  r->total_ms = now_ms() - t0;
  r->builds = builds(ctx) - b0;
  if (ok) {
    qsort(step, (size_t)max, sizeof *step, cmp_double);
    r->median_ms = step[max / 2];
  }
  for (int p = 0; ok && p < 2; p++) {
    int len = p == 0 ? (max + 1) / 2 : max;
    double k[PROBES];
    /* the length's kernels built, in their optimised tier (the CPU runs a
     * quick build first): the kernels themselves compared */
    ok = one_step(ctx, w, tri, max, m, seq, len, out) && tvk_ctx_wait_compiles(ctx) == TVK_OK;
    if (p == 1 && show_profile) tvk_profile_reset(ctx); /* the probes at N alone */
    for (int i = 0; ok && i < PROBES; i++) {
      double k0 = kernel_total(ctx);
      ok = one_step(ctx, w, tri, max, m, seq, len, out);
      k[i] = kernel_total(ctx) - k0;
    }
    qsort(k, PROBES, sizeof *k, cmp_double);
    r->kernel_ms[p] = k[PROBES / 2];
  }
  if (ok && show_profile)
    printf("%s, %d steps at %d tokens:\n%s", mode_names[m], PROBES, max, tvk_profile_summary(ctx));
  free(out), free(step);
  return ok;
}

/* Each mode in a context of its own (its own compiles), on the same
 * weights (the same seed). */
static int run_device(const char *device, int max, int only) {
  BT = max;
  uint8_t *tri = malloc((size_t)max * (size_t)max);
  for (int r = 0; tri && r < max; r++)
    for (int c = 0; c < max; c++) tri[r * max + c] = c <= r;
  double *ref = NULL;
  int failed = 0;
  for (int m = 0; m < M_COUNT; m++) {
    if (only >= 0 && m != only) continue;
    tvk_ctx *ctx = NULL;
    tvk_ctx_options o = {.device = device, .profile = 1}; /* each launch timed on the device */
    if (tvk_ctx_create_opts(&o, &ctx) != TVK_OK) {
      fprintf(stderr, "decoder: %s: %s\n", device, tvk_last_create_error());
      failed = -1; /* a missing device is not a failure */
      break;
    }
    rng_state = 42;
    Weights w = {ctx, 0, {0}, {0}};
    block_weights(&w);
    tvk_tensor *mask = tvk_from_data(ctx, TVK_BOOL, 2, (int64_t[]){max, max}, tri);
    if (!ref) {
      ref = block_ref(w.host);
      printf("decoder: the block (width %d, %d heads, MLP %d) over seq = 1..%d on %s\n", BD, BHEADS,
             BF, max, tvk_ctx_device(ctx));
      printf("  %-9s %9s %8s %12s %14s %14s %9s\n", "mode", "total s", "kernels", "median step",
             "kernels @N/2", "kernels @N", "max err");
    }
    Result r = {0};
    bool ok = run_mode(ctx, &w, mask, ref, max, (Mode)m, &r);
    bool exact = ok && r.worst <= 1e-3;
    printf("  %-9s %9.2f %8llu %9.2f ms %11.3f ms %11.3f ms %9.1e%s\n", mode_names[m],
           r.total_ms / 1e3, (unsigned long long)r.builds, r.median_ms, r.kernel_ms[0],
           r.kernel_ms[1], r.worst,
           !ok      ? "  FAILED"
           : !exact ? "  WRONG"
                    : "");
    failed += !exact;
    for (int i = 0; i < w.nw; i++) free(w.host[i]);
    tvk_ctx_destroy(ctx);
  }
  free(ref), free(tri);
  return failed;
}

int main(int argc, char **argv) {
  const char *devices[8];
  int ndev = 0, max = 256, only = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--max") && i + 1 < argc) {
      max = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
      const char *m = argv[++i];
      for (int k = 0; k < M_COUNT; k++)
        if (!strcmp(m, mode_names[k])) only = k;
      if (only < 0) {
        fprintf(stderr, "decoder: unknown mode %s\n", m);
        return 2;
      }
    } else if (!strcmp(argv[i], "--profile")) {
      show_profile = true;
    } else if (argv[i][0] != '-' && ndev < 8) {
      devices[ndev++] = argv[i];
    } else {
      fprintf(stderr,
              "usage: %s [DEVICE ...] [--max N] [--mode symbolic|fixed|padded] [--profile]\n",
              argv[0]);
      return 2;
    }
  }
  if (max < 1 || max > 4096) {
    fprintf(stderr, "decoder: --max %d is outside 1..4096\n", max);
    return 2;
  }
  if (ndev == 0) devices[ndev++] = "CPU", devices[ndev++] = "VK";
  int failed = 0, missing = 0;
  for (int d = 0; d < ndev; d++) {
    int f = run_device(devices[d], max, only);
    missing += f<0, failed += f> 0;
  }
  return failed ? 1 : missing == ndev ? 77 : 0; /* 77: no device to run on (ctest: skipped) */
}
