/* Tests of the scheduler and the runtime (src/schedule/, src/runtime/run.c,
 * realize.c): how many kernels a graph becomes (read from tvk_stats), why
 * nodes are materialised (the schedule itself, through the internal API; some
 * on graphs of UOps built by hand, with no context or device at all), the
 * program cache, the debug output, memory, and the values computed, checked
 * against plain loops in double precision written here. A fixed-seed random
 * test builds graphs of elementwise ops, movement ops and reduces and compares
 * them with a reference that does the same by index loops.
 *
 * The suite compiles into the build tree's kernel cache (test_cache_dir), so
 * a second run compiles nothing; the test of the cache itself uses a fresh
 * directory. */
#define _XOPEN_SOURCE 700

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "json_mini.h"
#include "runtime/kernel_store.h"
#include "runtime/run.h"
#include "runtime/trace.h"
#include "schedule/schedule.h"
#include "test_util.h"
#include "tvk.h"

/* ---------------------------------------------------------------- suite state */

static const char *g_dir; /* the kernel cache of the suite: the build tree's */

static int suite_setup(void **state) {
  (void)state;
  g_dir = test_cache_dir();
  return 0;
}

static tvk_ctx *open_ctx_in(const char *dir, int debug) {
  tvk_ctx_options o = {.device = "CPU", .cache_dir = dir, .debug = debug};
  tvk_ctx *ctx = NULL;
  tvk_status st = tvk_ctx_create_opts(&o, &ctx);
  if (st != TVK_OK) print_error("tvk_ctx_create: %s\n", tvk_last_create_error());
  assert_int_equal(st, TVK_OK);
  return ctx;
}

static tvk_ctx *open_ctx(void) { return open_ctx_in(g_dir, 0); }

/* Every tensor released: no UOp and no device byte is left (once the program
 * cache lets go of the kernel ASTs it keeps to skip codegen). */
static void close_ctx_clean(tvk_ctx *ctx) {
  while (ctx->head) tvk_release(ctx->head);
  progcache_forget_kernels(ctx->programs[0]);
  sched_cache_free(ctx->sched_cache); /* kept schedules hold their kernel ASTs too */
  ctx->sched_cache = NULL;
  assert_int_equal(uctx_live(ctx->u), 0);
  tvk_stats s;
  tvk_stats_get(ctx, &s);
  assert_int_equal(s.bytes_now, 0);
  tvk_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------- helpers */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static int rnd_int(int n) { return (int)(xorshift64(&g_rng) % (uint64_t)n); }
/* A float32 value in [-1, 1]. */
static float rnd_float(void) {
  return (float)((double)(xorshift64(&g_rng) >> 11) / 9007199254740992.0 * 2 - 1);
}

static int64_t numel_of(int nd, const int64_t *sh) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= sh[d];
  return n;
}

/* A float32 tensor of random values; host (numel floats) gets a copy. */
static tvk_tensor *rand_tensor(tvk_ctx *ctx, int nd, const int64_t *sh, float *host) {
  int64_t n = numel_of(nd, sh);
  for (int64_t i = 0; i < n; i++) host[i] = rnd_float();
  tvk_tensor *t = tvk_from_data(ctx, TVK_FLOAT32, nd, sh, host);
  assert_int_equal(tvk_status_of(t), TVK_OK);
  return t;
}

/* Kernels launched by realizing ts. */
static uint64_t realize_count(tvk_ctx *ctx, int n, tvk_tensor *const *ts) {
  tvk_stats a, b;
  tvk_stats_get(ctx, &a);
  tvk_status st = tvk_realize(n, ts);
  if (st != TVK_OK) print_error("realize: %s\n", tvk_ctx_error(ctx));
  assert_int_equal(st, TVK_OK);
  tvk_stats_get(ctx, &b);
  return b.kernels_run - a.kernels_run;
}

static uint64_t kernels_for(tvk_tensor *t) { return realize_count(tvk_ctx_of(t), 1, &t); }

/* Kernels launched by tvk_to_host(t) (realize + contiguous copy if needed). */
static uint64_t read_count(tvk_tensor *t, float *out) {
  tvk_ctx *ctx = tvk_ctx_of(t);
  tvk_stats a, b;
  tvk_stats_get(ctx, &a);
  tvk_status st = tvk_to_host(t, out, (size_t)tvk_numel(t) * sizeof *out);
  if (st != TVK_OK) print_error("to_host: %s\n", tvk_ctx_error(ctx));
  assert_int_equal(st, TVK_OK);
  tvk_stats_get(ctx, &b);
  return b.kernels_run - a.kernels_run;
}

static void read_f32(tvk_tensor *t, float *out) { read_count(t, out); }

/* got (float32) against want (double): |got - want| <= tol * (1 + |want|);
 * infinities and NaNs must match exactly. Prints the first mismatch. */
static void check_close(const char *what, const float *got, const double *want, int64_t n,
                        double tol) {
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= tol * (1 + fabs(w));
    if (!ok) {
      print_error("%s: element %lld is %.9g, want %.9g\n", what, (long long)i, g, w);
      fail();
    }
  }
}

static int64_t idx2(const int64_t *sh, int64_t i, int64_t j) { return i * sh[1] + j; }

/* ---------------------------------------------------------------- fusion counts */

/* (a+b)*c is one kernel. */
static void test_add_mul_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {7, 13};
  float a[91], b[91], c[91], out[91];
  double want[91];
  tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b),
             *C = rand_tensor(ctx, 2, sh, c);
  tvk_tensor *ab = tvk_add(A, B), *y = tvk_mul(ab, C);
  assert_int_equal(kernels_for(y), 1);
  assert_int_equal(read_count(y, out), 0); /* realized already: a plain copy out */
  for (int i = 0; i < 91; i++) want[i] = ((double)a[i] + b[i]) * c[i];
  check_close("(a+b)*c", out, want, 91, 1e-6);
  close_ctx_clean(ctx);
}

/* sum(a*b) is one kernel: the product is computed inside the reduce's loop;
 * so is a row sum. */
static void test_sum_mul_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {9, 31};
  float a[279], b[279], out[9];
  tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
  tvk_tensor *p = tvk_mul(A, B), *s = tvk_sum(p, 0, NULL, false);
  float got;
  assert_int_equal(read_count(s, &got), 1); /* to_host of a fresh reduce: one kernel */
  double want = 0;
  for (int i = 0; i < 279; i++) want += (double)a[i] * b[i];
  check_close("sum(a*b)", &got, &want, 1, 1e-5);

  int ax = 1;
  tvk_tensor *rows = tvk_sum(p, 1, &ax, false);
  assert_int_equal(kernels_for(rows), 1);
  read_f32(rows, out);
  double wrow[9] = {0};
  for (int i = 0; i < 9; i++)
    for (int j = 0; j < 31; j++) wrow[i] += (double)a[idx2(sh, i, j)] * b[idx2(sh, i, j)];
  check_close("row sums of a*b", out, wrow, 9, 1e-5);
  close_ctx_clean(ctx);
}

/* A chain of 20 elementwise ops is one kernel. */
static void test_chain20_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[1] = {1000};
  float *a = malloc(1000 * sizeof *a), *b = malloc(1000 * sizeof *b),
        *out = malloc(1000 * sizeof *out);
  double *want = malloc(1000 * sizeof *want);
  tvk_tensor *A = rand_tensor(ctx, 1, sh, a), *B = rand_tensor(ctx, 1, sh, b);
  tvk_tensor *x = A;
  for (int k = 0; k < 20; k++) {
    tvk_tensor *nx = k % 4 == 0   ? tvk_add(x, B)
                     : k % 4 == 1 ? tvk_mul(x, B)
                     : k % 4 == 2 ? tvk_maximum(x, B)
                                  : tvk_sub(x, B);
    if (x != A) tvk_release(x); /* inputs are not consumed: the graph keeps them */
    x = nx;
  }
  assert_int_equal(kernels_for(x), 1);
  read_f32(x, out);
  for (int i = 0; i < 1000; i++) {
    double v = a[i], w = b[i];
    for (int k = 0; k < 20; k++)
      v = k % 4 == 0   ? (float)(v + w)
          : k % 4 == 1 ? (float)(v * w)
          : k % 4 == 2 ? fmax(v, w)
                       : (float)(v - w);
    want[i] = v;
  }
  check_close("chain of 20", out, want, 1000, 1e-5);
  free(a), free(b), free(out), free(want);
  close_ctx_clean(ctx);
}

/* What a log callback collected. */
typedef struct {
  int calls, info, debug;
  bool kernel_line, schedule_line, source, no_disk_warning;
  char last[512];
} LogSeen;

static void collect(void *user, tvk_log_level level, const char *message) {
  LogSeen *ls = user;
  ls->calls++;
  ls->info += level == TVK_LOG_INFO;
  ls->debug += level == TVK_LOG_DEBUG;
  ls->kernel_line |= strncmp(message, "tvk kernel", 10) == 0;
  ls->schedule_line |= strncmp(message, "tvk schedule", 12) == 0;
  ls->source |= strncmp(message, "tvk source of", 13) == 0 && strstr(message, "void ") != NULL;
  ls->no_disk_warning |= level == TVK_LOG_WARN && strstr(message, "without a disk cache") != NULL;
  snprintf(ls->last, sizeof ls->last, "%s", message);
}

/* Counts files under dir (recursively); -1 if it cannot be opened. */
static int files_under(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    struct stat sb;
    int k = stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode) ? files_under(sub) : 1;
    n += k > 0 ? k : 0;
  }
  closedir(d);
  return n;
}

/* out = exp(a + a) for a random (2, 3) a, on `device` with the options o
 * (device and log set here), asserting nothing. *made: the context was
 * created (false: the device is missing). The status of the computation. */
static tvk_status exp_compute(tvk_ctx_options o, const char *device, LogSeen *seen, float a[6],
                              float out[6], bool *made) {
  o.device = device;
  o.log = collect, o.log_user = seen;
  tvk_ctx *ctx = NULL;
  tvk_status st = tvk_ctx_create_opts(&o, &ctx);
  *made = st == TVK_OK;
  if (!*made) return st;
  tvk_tensor *A = rand_tensor(ctx, 2, (int64_t[]){2, 3}, a);
  st = tvk_to_host(tvk_exp(tvk_add(A, A)), out, sizeof(float[6]));
  if (st != TVK_OK) print_error("%s: %s\n", device, tvk_ctx_error(ctx));
  tvk_ctx_destroy(ctx);
  return st;
}

static void exp_check(const float a[6], const float out[6]) {
  for (int i = 0; i < 6; i++) {
    double w = exp(2.0 * a[i]);
    check_close("exp(a + a)", &out[i], &w, 1, 1e-6);
  }
}

/* exp_compute, checked. TVK_OK, or the status when the device is missing. */
static tvk_status exp_run(tvk_ctx_options o, const char *device, LogSeen *seen) {
  float a[6], out[6];
  bool made;
  tvk_status st = exp_compute(o, device, seen, a, out, &made);
  if (!made) return st;
  assert_int_equal(st, TVK_OK);
  exp_check(a, out);
  return TVK_OK;
}

/* With a log callback, TVK_DEBUG's output (levels 1 to 3 here) reaches the
 * callback as whole messages and nothing is written to stderr. */
static void test_log_callback(void **state) {
  (void)state;
  LogSeen seen = {0};
  float a[6], out[6];
  bool made;
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile(); /* stderr while tvk runs; nothing may land there */
  assert_true(saved >= 0 && tmp);
  dup2(fileno(tmp), 2);
  tvk_status st =
      exp_compute((tvk_ctx_options){.cache_dir = g_dir, .debug = 3}, "CPU", &seen, a, out, &made);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long written = fseek(tmp, 0, SEEK_END) == 0 ? ftell(tmp) : -1;
  fclose(tmp);
  assert_int_equal(st, TVK_OK);
  exp_check(a, out);
  if (written != 0) fail_msg("%ld bytes went to stderr with a log callback", written);
  if (!seen.kernel_line || !seen.schedule_line || !seen.source || seen.info < 2 || seen.debug < 1)
    fail_msg("the callback saw %d messages (%d info, %d debug; kernel %d, schedule %d, source "
             "%d), the last: %s",
             seen.calls, seen.info, seen.debug, seen.kernel_line, seen.schedule_line, seen.source,
             seen.last);
}

/* no_disk_cache: nothing lands in the cache directory, on either device; and
 * a cache directory that cannot be made is no error for Vulkan (one warning),
 * which compiles in memory. */
static void test_no_disk_cache(void **state) {
  (void)state;
  char dir[256];
  assert_true(temp_dir(dir, sizeof dir, "nodisk"));
  for (int k = 0; k < 2; k++) {
    const char *dev = k ? "VK" : "CPU";
    LogSeen seen = {0};
    tvk_status st = exp_run((tvk_ctx_options){.cache_dir = dir, .no_disk_cache = 1}, dev, &seen);
    if (st != TVK_OK) { /* no Vulkan device */
      if (vk_required()) fail_msg("TVK_REQUIRE_VK, but no Vulkan device");
      continue;
    }
    if (files_under(dir) != 0)
      fail_msg("%s: %d files in the cache directory", dev, files_under(dir));
  }
  rm_rf(dir);
  /* a path under a regular file cannot be a directory */
  char file[300], bad[320];
  assert_true(temp_dir(dir, sizeof dir, "nodir"));
  snprintf(file, sizeof file, "%s/file", dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(bad, sizeof bad, "%s/cache", file);
  LogSeen seen = {0};
  tvk_status st = exp_run((tvk_ctx_options){.cache_dir = bad}, "VK", &seen);
  if (st == TVK_OK && !seen.no_disk_warning)
    fail_msg("Vulkan without a cache directory gave no warning (%d messages, the last: %s)",
             seen.calls, seen.last);
  if (st != TVK_OK && vk_required()) fail_msg("TVK_REQUIRE_VK, but no Vulkan device");
  rm_rf(dir);
}

/* A second identical run compiles nothing: in the same context the program
 * cache hits, and in a new context the device's disk cache does. */
static void test_second_run_compiles_nothing(void **state) {
  (void)state;
  char dir[256];
  assert_true(temp_dir(dir, sizeof dir, "sched2"));
  int64_t sh[2] = {5, 6};
  float a[30], b[30], out[30];
  for (int round = 0; round < 2; round++) {
    tvk_ctx *ctx = open_ctx_in(dir, 0);
    for (int again = 0; again < 2; again++) {
      tvk_stats_reset(ctx);
      tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
      int ax = 0;
      tvk_tensor *y = tvk_sum(tvk_mul(tvk_add(A, B), B), 1, &ax, true);
      read_f32(y, out);
      tvk_stats s;
      tvk_stats_get(ctx, &s);
      assert_int_equal(s.kernels_run, 1);
      assert_int_equal(s.schedules, 1);
      if (round == 0 && again == 0) {
        assert_int_equal(s.kernels_compiled, 1); /* a fresh cache: the compiler ran */
        assert_int_equal(s.cache_hits, 0);
      } else {
        assert_int_equal(s.kernels_compiled, 0);
        assert_int_equal(s.cache_hits, 1);
      }
      /* new tensors, the same kernel: its code is made once per context, and
       * the second context reads it from the disk (the kernel store) */
      assert_int_equal(s.kernels_generated, round == 0 && again == 0 ? 1 : 0);
      assert_int_equal(s.kernels_stored, round == 1 && again == 0 ? 1 : 0);
      for (int j = 0; j < 6; j++) {
        double w = 0;
        for (int i = 0; i < 5; i++)
          w += ((double)a[idx2(sh, i, j)] + b[idx2(sh, i, j)]) * b[idx2(sh, i, j)];
        check_close("sum((a+b)*b, axis 0)", &out[j], &w, 1, 1e-5);
      }
    }
    /* The CPU's optimised build runs in the background; the disk has it once
     * it is done (a context that closes first drops the builds not begun). */
    assert_int_equal(tvk_ctx_wait_compiles(ctx), TVK_OK);
    close_ctx_clean(ctx);
  }
  rm_rf(dir);
}

/* A read-only cache through tvk_ctx_options.cache_readonly, as a packaged
 * application ships one: a kernel it holds is a hit, one it lacks is compiled
 * and runs, and the directory is left exactly as it was. */
static void test_readonly_cache_option(void **state) {
  (void)state;
  char dir[256];
  assert_true(temp_dir(dir, sizeof dir, "sched-ro"));
  int64_t sh[2] = {4, 7};
  float a[28], b[28], out[28];
  tvk_ctx *ctx = open_ctx_in(dir, 0);
  tvk_tensor *y = tvk_mul(rand_tensor(ctx, 2, sh, a), rand_tensor(ctx, 2, sh, b));
  read_f32(y, out);
  assert_int_equal(tvk_ctx_wait_compiles(ctx), TVK_OK); /* the optimised build, into dir */
  close_ctx_clean(ctx);
  uint64_t before = dir_state(dir);

  tvk_ctx_options o = {.device = "CPU", .cache_dir = dir, .cache_readonly = 1};
  assert_int_equal(tvk_ctx_create_opts(&o, &ctx), TVK_OK);
  for (int op = 0; op < 2; op++) {
    tvk_stats_reset(ctx);
    tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
    read_f32(op == 0 ? tvk_mul(A, B) : tvk_sub(A, B), out);
    tvk_stats s;
    tvk_stats_get(ctx, &s);
    assert_int_equal(s.kernels_compiled, op); /* mul: in the cache; sub: not */
    assert_int_equal(s.cache_hits, 1 - op);
    for (int i = 0; i < 28; i++) {
      double w = op == 0 ? (double)a[i] * b[i] : (double)a[i] - b[i];
      check_close(op == 0 ? "a*b" : "a-b", &out[i], &w, 1, 1e-6);
    }
  }
  close_ctx_clean(ctx);
  assert_true(dir_state(dir) == before);
  rm_rf(dir);
}

/* sum(x) + x is two kernels: the reduce is materialised, not recomputed per
 * element of the expand. */
static void test_sum_plus_x_two_kernels(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {6, 10};
  float x[60], out[60];
  double want[60];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x);
  tvk_tensor *s = tvk_sum(X, 0, NULL, false), *y = tvk_add(s, X);
  assert_int_equal(kernels_for(y), 2);
  read_f32(y, out);
  double tot = 0;
  for (int i = 0; i < 60; i++) tot += x[i];
  for (int i = 0; i < 60; i++) want[i] = tot + x[i];
  check_close("sum(x)+x", out, want, 60, 1e-5);

  int ax = 1;
  tvk_tensor *r = tvk_sum(X, 1, &ax, true), *z = tvk_mul(X, r);
  assert_int_equal(kernels_for(z), 2);
  read_f32(z, out);
  for (int i = 0; i < 6; i++) {
    double rs = 0;
    for (int j = 0; j < 10; j++) rs += x[idx2(sh, i, j)];
    for (int j = 0; j < 10; j++) want[idx2(sh, i, j)] = rs * x[idx2(sh, i, j)];
  }
  check_close("x * sum(x, 1, keepdim)", out, want, 60, 1e-5);
  close_ctx_clean(ctx);
}

/* Permuted, flipped, padded, shrunk and expanded inputs fuse into one kernel:
 * the views go to the loads. */
static void test_views_fuse_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sa[2] = {3, 4}, sb[2] = {4, 3}, sc[2] = {2, 3}, sd[2] = {6, 5}, se[1] = {3};
  float a[12], b[12], c[6], d[30], e[3], out[12];
  double want[12];
  tvk_tensor *A = rand_tensor(ctx, 2, sa, a), *B = rand_tensor(ctx, 2, sb, b),
             *C = rand_tensor(ctx, 2, sc, c);
  tvk_tensor *D = rand_tensor(ctx, 2, sd, d), *E = rand_tensor(ctx, 1, se, e);
  int perm[2] = {1, 0}, fl = 0;
  int64_t pads[2][2] = {{1, 1}, {0, 0}}, rng[2][2] = {{1, 5}, {2, 5}};
  tvk_tensor *at = tvk_permute(A, perm); /* (4,3): a[j][i] */
  tvk_tensor *bf = tvk_flip(B, 1, &fl);  /* (4,3): b[3-i][j] */
  tvk_tensor *cp = tvk_pad(C, pads, 0);  /* (4,3): c[i-1][j] for 1 <= i < 3, else 0 */
  tvk_tensor *ds = tvk_shrink(D, rng);   /* (4,3): d[i+1][j+2] */
  tvk_tensor *y = tvk_add(tvk_add(tvk_mul(at, bf), tvk_sub(cp, ds)), E); /* E broadcast over rows */
  assert_int_equal(kernels_for(y), 1);
  read_f32(y, out);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      double pv = i >= 1 && i < 3 ? c[(i - 1) * 3 + j] : 0;
      want[i * 3 + j] =
          (double)a[j * 4 + i] * b[(3 - i) * 3 + j] + (pv - d[(i + 1) * 5 + j + 2]) + e[j];
    }
  check_close("views fused", out, want, 12, 1e-5);
  close_ctx_clean(ctx);
}

/* A pad fuses when every op between it and memory keeps f(0) = 0; otherwise
 * the padded input is materialised. */
static void test_pad_safe_and_unsafe(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[1] = {5};
  int64_t pads[1][2] = {{2, 1}};
  float a[5], b[5], out[8];
  double want[8];
  tvk_tensor *A = rand_tensor(ctx, 1, sh, a), *B = rand_tensor(ctx, 1, sh, b);

  tvk_tensor *p1 = tvk_pad(tvk_add(A, B), pads, 0); /* add keeps 0: one kernel */
  assert_int_equal(kernels_for(p1), 1);
  read_f32(p1, out);
  for (int i = 0; i < 8; i++) want[i] = i >= 2 && i < 7 ? (double)a[i - 2] + b[i - 2] : 0;
  check_close("pad(a+b)", out, want, 8, 1e-6);

  tvk_tensor *p2 =
      tvk_exp(tvk_pad(A, pads, 0)); /* pad of memory, then exp: one kernel, exp(0) = 1 at pads */
  assert_int_equal(kernels_for(p2), 1);
  read_f32(p2, out);
  for (int i = 0; i < 8; i++) want[i] = exp(i >= 2 && i < 7 ? (double)a[i - 2] : 0);
  check_close("exp(pad(a))", out, want, 8, 1e-5);

  tvk_tensor *p3 = tvk_pad(tvk_exp(A), pads, 0); /* realized: exp(a), then a padded view of it */
  assert_int_equal(kernels_for(p3), 1);
  assert_int_equal(p3->uop->src[0]->op, OP_BUFFER);
  read_f32(p3, out);
  for (int i = 0; i < 8; i++) want[i] = i >= 2 && i < 7 ? exp((double)a[i - 2]) : 0;
  check_close("pad(exp(a))", out, want, 8, 1e-5);

  tvk_tensor *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *p5 =
      tvk_add(tvk_pad(tvk_exp(A), pads, 0), one); /* exp does not keep 0: exp(a) is materialised */
  assert_int_equal(kernels_for(p5), 2);
  read_f32(p5, out);
  for (int i = 0; i < 8; i++) want[i] = (i >= 2 && i < 7 ? exp((double)a[i - 2]) : 0) + 1;
  check_close("pad(exp(a))+1", out, want, 8, 1e-5);

  tvk_tensor *p6 = tvk_add(tvk_pad(tvk_mul(A, B), pads, 0), one); /* mul keeps 0: one kernel */
  assert_int_equal(kernels_for(p6), 1);
  read_f32(p6, out);
  for (int i = 0; i < 8; i++) want[i] = (i >= 2 && i < 7 ? (double)a[i - 2] * b[i - 2] : 0) + 1;
  check_close("pad(a*b)+1", out, want, 8, 1e-5);

  tvk_tensor *half = tvk_scalar(ctx, TVK_FLOAT32, 0.5);
  tvk_tensor *p4 = tvk_pad(tvk_lt(A, half), pads, 0); /* a < 0.5 is false at the pads: one kernel */
  assert_int_equal(kernels_for(p4), 1);
  uint8_t bits[8];
  assert_int_equal(tvk_to_host(p4, bits, sizeof bits), TVK_OK);
  for (int i = 0; i < 8; i++) assert_int_equal(bits[i], i >= 2 && i < 7 ? a[i - 2] < 0.5f : 0);
  close_ctx_clean(ctx);
}

/* Elementwise ops after a reduce are stored by the reduce's kernel. */
static void test_reduce_then_elementwise_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {4, 9};
  float x[36], out[4];
  double want[4];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x);
  int ax = 1;
  tvk_tensor *two = tvk_scalar(ctx, TVK_FLOAT32, 2), *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *y = tvk_add(tvk_mul(tvk_sum(X, 1, &ax, true), two), one);
  assert_int_equal(kernels_for(y), 1);
  read_f32(y, out);
  for (int i = 0; i < 4; i++) {
    double s = 0;
    for (int j = 0; j < 9; j++) s += x[idx2(sh, i, j)];
    want[i] = 2 * s + 1;
  }
  check_close("sum(x, 1)*2+1", out, want, 4, 1e-5);

  tvk_tensor *m = tvk_max(X, 1, &ax, true), *e = tvk_exp(m);
  assert_int_equal(kernels_for(e), 1);
  read_f32(e, out);
  for (int i = 0; i < 4; i++) {
    double mx = -INFINITY;
    for (int j = 0; j < 9; j++) mx = fmax(mx, x[idx2(sh, i, j)]);
    want[i] = exp(mx);
  }
  check_close("exp(max(x, 1))", out, want, 4, 1e-5);

  tvk_tensor *full = tvk_add(tvk_sum(tvk_mul(X, X), 0, NULL, true), one); /* no output axis left */
  assert_int_equal(kernels_for(full), 1);
  read_f32(full, out);
  double ss = 1;
  for (int i = 0; i < 36; i++) ss += (double)x[i] * x[i];
  check_close("sum(x*x)+1", out, &ss, 1, 1e-5);

  tvk_tensor *mexp = tvk_max(tvk_exp(X), 0, NULL, false); /* max of a computed input */
  read_f32(mexp, out);
  double me = -INFINITY;
  for (int i = 0; i < 36; i++) me = fmax(me, exp((double)x[i]));
  check_close("max(exp(x))", out, &me, 1, 1e-5);

  tvk_tensor *mean = tvk_mean(X, 1, &ax, false);
  read_f32(mean, out);
  for (int i = 0; i < 4; i++) {
    double s = 0;
    for (int j = 0; j < 9; j++) s += x[idx2(sh, i, j)];
    want[i] = s / 9;
  }
  check_close("mean(x, 1)", out, want, 4, 1e-5);
  close_ctx_clean(ctx);
}

/* A reduce two requested tensors read is computed once: the two become one
 * multi-output kernel (the seed's output groups). Requested elementwise
 * tensors of one shape share a kernel too; an elementwise node read by two
 * kernels that cannot share one is recomputed by each (it costs a load either
 * way). */
static void test_shared_nodes(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {3, 8};
  float x[24], y[24], o1[24], o2[24];
  double w1[24], w2[24];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x), *Y = rand_tensor(ctx, 2, sh, y);
  int ax = 1;
  tvk_tensor *two = tvk_scalar(ctx, TVK_FLOAT32, 2), *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *s = tvk_sum(X, 1, &ax, true);
  tvk_tensor *r[2] = {tvk_mul(s, two), tvk_add(s, one)};
  assert_int_equal(realize_count(ctx, 2, r), 1);
  read_f32(r[0], o1);
  read_f32(r[1], o2);
  for (int i = 0; i < 3; i++) {
    double t = 0;
    for (int j = 0; j < 8; j++) t += x[idx2(sh, i, j)];
    w1[i] = 2 * t, w2[i] = t + 1;
  }
  check_close("sum*2", o1, w1, 3, 1e-5);
  check_close("sum+1", o2, w2, 3, 1e-5);

  tvk_tensor *e = tvk_add(X, Y);
  tvk_tensor *q[2] = {tvk_mul(e, two), tvk_sub(e, one)};
  assert_int_equal(realize_count(ctx, 2, q), 1);
  read_f32(q[0], o1);
  read_f32(q[1], o2);
  for (int i = 0; i < 24; i++) w1[i] = 2 * ((double)x[i] + y[i]), w2[i] = (double)x[i] + y[i] - 1;
  check_close("(x+y)*2", o1, w1, 24, 1e-5);
  check_close("(x+y)-1", o2, w2, 24, 1e-5);

  /* two reduces of the same rows, neither reading the other: one kernel, one loop */
  tvk_tensor *sm[2] = {tvk_sum(X, 1, &ax, true), tvk_max(X, 1, &ax, true)};
  assert_int_equal(realize_count(ctx, 2, sm), 1);
  read_f32(sm[0], o1);
  read_f32(sm[1], o2);
  for (int i = 0; i < 3; i++) {
    w1[i] = 0, w2[i] = -INFINITY;
    for (int j = 0; j < 8; j++) w1[i] += x[idx2(sh, i, j)], w2[i] = fmax(w2[i], x[idx2(sh, i, j)]);
  }
  check_close("sum(x)", o1, w1, 3, 1e-5);
  check_close("max(x)", o2, w2, 3, 0);

  tvk_tensor *f = tvk_add(X, Y); /* (3, 8) and a (3, 1) reduce of it: two kernels */
  tvk_tensor *u[2] = {tvk_neg(f), tvk_sum(f, 1, &ax, true)};
  assert_int_equal(realize_count(ctx, 2, u), 2);
  read_f32(u[0], o1);
  read_f32(u[1], o2);
  for (int i = 0; i < 24; i++) w1[i] = -((double)x[i] + y[i]);
  for (int i = 0; i < 3; i++) {
    w2[i] = 0;
    for (int j = 0; j < 8; j++) w2[i] += (double)x[idx2(sh, i, j)] + y[idx2(sh, i, j)];
  }
  check_close("-(x+y)", o1, w1, 24, 1e-5);
  check_close("sum(x+y)", o2, w2, 3, 1e-5);
  close_ctx_clean(ctx);
}

/* A reduce inside another reduce's input, and reduces of other axes in one
 * kernel, are materialised. */
static void test_reduce_nesting(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sa[2] = {4, 5}, sb[2] = {4, 7};
  float a[20], b[28], out[4];
  double want[4];
  tvk_tensor *A = rand_tensor(ctx, 2, sa, a), *B = rand_tensor(ctx, 2, sb, b);
  int ax0 = 0, ax1 = 1;
  tvk_tensor *inner = tvk_sum(A, 1, &ax1, true),
             *outer = tvk_sum(tvk_mul(inner, inner), 1, &ax0, true);
  assert_int_equal(kernels_for(outer), 2);
  read_f32(outer, out);
  double sq = 0;
  for (int i = 0; i < 4; i++) {
    double s = 0;
    for (int j = 0; j < 5; j++) s += a[idx2(sa, i, j)];
    sq += s * s;
  }
  check_close("sum(sum(a,1)^2, 0)", out, &sq, 1, 1e-5);

  tvk_tensor *y =
      tvk_add(tvk_sum(A, 1, &ax1, true), tvk_sum(B, 1, &ax1, true)); /* (4,5) and (4,7) rows */
  assert_int_equal(kernels_for(y), 2);
  read_f32(y, out);
  for (int i = 0; i < 4; i++) {
    want[i] = 0;
    for (int j = 0; j < 5; j++) want[i] += a[idx2(sa, i, j)];
    for (int j = 0; j < 7; j++) want[i] += b[idx2(sb, i, j)];
  }
  check_close("sum(a,1)+sum(b,1)", out, want, 4, 1e-5);

  tvk_tensor *z =
      tvk_sub(tvk_sum(A, 1, &ax1, true), tvk_max(A, 1, &ax1, true)); /* same axes: one kernel */
  assert_int_equal(kernels_for(z), 1);
  read_f32(z, out);
  for (int i = 0; i < 4; i++) {
    double s = 0, m = -INFINITY;
    for (int j = 0; j < 5; j++) s += a[idx2(sa, i, j)], m = fmax(m, a[idx2(sa, i, j)]);
    want[i] = s - m;
  }
  check_close("sum(a,1)-max(a,1)", out, want, 4, 1e-5);
  close_ctx_clean(ctx);
}

/* Realized tensors are read from memory and never recomputed. */
static void test_realized_reused(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[1] = {17};
  float a[17], b[17], out[17];
  double want[17];
  tvk_tensor *A = rand_tensor(ctx, 1, sh, a), *B = rand_tensor(ctx, 1, sh, b);
  tvk_tensor *t = tvk_add(A, B), *two = tvk_scalar(ctx, TVK_FLOAT32, 2);
  tvk_tensor *u = tvk_mul(t, two); /* built before t is realized: its graph is updated too */
  assert_int_equal(kernels_for(t), 1);
  assert_int_equal(kernels_for(t), 0);
  assert_int_equal(t->uop->op, OP_VIEW);
  assert_int_equal(t->uop->src[0]->op, OP_BUFFER);
  assert_int_equal(kernels_for(u), 1);
  assert_int_equal(read_count(u, out), 0);
  for (int i = 0; i < 17; i++) want[i] = 2 * ((double)a[i] + b[i]);
  check_close("(a+b)*2", out, want, 17, 1e-6);
  assert_int_equal(read_count(t, out), 0);
  close_ctx_clean(ctx);
}

/* tvk_to_host and contiguous: a view of memory is copied by one kernel, a
 * reshape of memory needs none, a constant is materialised, and a contiguous
 * that is only a reshape of something computed costs no extra kernel. */
static void test_contiguous_and_to_host(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {3, 5}, flat[1] = {15};
  float a[15], b[15], out[15];
  double want[15];
  tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
  int perm[2] = {1, 0};
  tvk_tensor *at = tvk_permute(A, perm);
  assert_int_equal(read_count(at, out), 1);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++) want[i * 3 + j] = a[j * 5 + i];
  check_close("permute(a)", out, want, 15, 0);

  assert_int_equal(read_count(tvk_reshape(A, 1, flat), out), 0);
  for (int i = 0; i < 15; i++) want[i] = a[i];
  check_close("reshape(a)", out, want, 15, 0);

  tvk_tensor *c = tvk_contiguous(tvk_permute(A, perm)), *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *y = tvk_add(c, one);
  assert_int_equal(kernels_for(y), 2); /* the contiguous copy, then y reading it */
  read_f32(y, out);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++) want[i * 3 + j] = a[j * 5 + i] + 1.0;
  check_close("contiguous(permute(a))+1", out, want, 15, 1e-6);

  tvk_tensor *r = tvk_contiguous(tvk_reshape(tvk_add(A, B), 1, flat));
  assert_int_equal(kernels_for(r), 1);
  read_f32(r, out);
  for (int i = 0; i < 15; i++) want[i] = (double)a[i] + b[i];
  check_close("contiguous(reshape(a+b))", out, want, 15, 1e-6);
  assert_int_equal(kernels_for(tvk_contiguous(tvk_reshape(A, 1, flat))), 0);

  tvk_tensor *f = tvk_full(ctx, TVK_FLOAT32, 2, sh, 2.5);
  assert_int_equal(kernels_for(f), 0); /* a constant is data already */
  assert_int_equal(read_count(f, out), 1);
  for (int i = 0; i < 15; i++) want[i] = 2.5;
  check_close("full", out, want, 15, 0);
  close_ctx_clean(ctx);
}

/* Zero-element tensors need no kernel; a reduce over an empty axis gives the
 * identity, and a pad of an empty tensor reads 0. */
static void test_zero_size(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {0, 3};
  tvk_tensor *X = tvk_from_data(ctx, TVK_FLOAT32, 2, sh, NULL),
             *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *y = tvk_add(X, one);
  assert_int_equal(kernels_for(y), 0);
  assert_int_equal(tvk_to_host(y, NULL, 0), TVK_OK);
  int ax = 0;
  float out[6];
  double want[6] = {0, 0, 0, 1, 1, 1};
  assert_int_equal(read_count(tvk_sum(X, 1, &ax, false), out), 1);
  check_close("sum over an empty axis", out, want, 3, 0);
  int64_t pads[2][2] = {{1, 1}, {0, 0}};
  tvk_tensor *p = tvk_add(tvk_pad(X, pads, 0), one); /* (2,3): 0 + 1 */
  read_f32(p, out);
  check_close("pad(empty)+1", out, want + 3, 3, 0);
  close_ctx_clean(ctx);
}

/* ctx_realize skips a tensor in an error state, realizes the others and
 * returns the error's status and message; the context stays usable. */
static void test_error_tensor(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t s1[1] = {3}, s2[1] = {4};
  float a[4], b[4], out[3];
  tvk_tensor *A = rand_tensor(ctx, 1, s1, a), *B = rand_tensor(ctx, 1, s2, b);
  tvk_tensor *bad = tvk_add(A, B), *good = tvk_add(A, A);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_SHAPE);
  tvk_tensor *both[2] = {good, bad};
  assert_int_equal(ctx_realize(ctx, 2, both), TVK_ERR_SHAPE);
  assert_string_equal(tvk_ctx_error(ctx), tvk_error_of(bad));
  assert_int_equal(good->uop->op, OP_VIEW);
  assert_int_equal(good->uop->src[0]->op, OP_BUFFER);
  assert_int_equal(tvk_realize(2, both), TVK_ERR_SHAPE);
  read_f32(good, out);
  double want[3] = {2.0 * a[0], 2.0 * a[1], 2.0 * a[2]};
  check_close("a+a after an error", out, want, 3, 0);
  close_ctx_clean(ctx);
}

/* Intermediate buffers die with the schedule; a loop that realizes and
 * releases runs in flat memory. */
static void test_memory(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[1] = {256};
  float x[256], out[256];
  double want[256];
  tvk_tensor *X = rand_tensor(ctx, 1, sh, x);
  tvk_tensor *s = tvk_sum(X, 0, NULL, false),
             *y = tvk_add(s, X); /* the sum is an intermediate buffer */
  tvk_release(s);
  assert_int_equal(kernels_for(y), 2);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.bytes_now, 2 * 256 * sizeof(float)); /* X and y; the sum's 4 bytes are gone */

  tvk_tensor *half = tvk_scalar(ctx, TVK_FLOAT32, 0.5), *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *v = X;
  size_t live0 = 0;
  for (int it = 0; it < 200; it++) {
    tvk_tensor *mul = tvk_mul(v, half), *nv = tvk_add(mul, one);
    assert_int_equal(kernels_for(nv), 1);
    tvk_release(mul); /* a live tensor keeps what its graph reads */
    if (v != X) tvk_release(v);
    v = nv;
    tvk_stats_get(ctx, &st);
    if (it == 0) live0 = uctx_live(ctx->u);
    assert_int_equal(st.bytes_now, 3 * 256 * sizeof(float));
    assert_int_equal(uctx_live(ctx->u), live0);
  }
  read_f32(v, out);
  for (int i = 0; i < 256; i++) { /* v_n = 2 + (x - 2) / 2^n */
    double w = x[i];
    for (int it = 0; it < 200; it++) w = (float)((float)(w * 0.5) + 1);
    want[i] = w;
  }
  check_close("200 steps of v*0.5+1", out, want, 256, 1e-6);
  close_ctx_clean(ctx);
}

/* Several tensors of one schedule that depend on each other run in order. */
static void test_multi_tensor_order(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {5, 4};
  float a[20], o1[5], o2[20], o3;
  tvk_tensor *A = rand_tensor(ctx, 2, sh, a);
  int ax = 1;
  tvk_tensor *t1 = tvk_sum(A, 1, &ax, true);
  tvk_tensor *t2 = tvk_add(t1, A);
  tvk_tensor *t3 = tvk_sum(tvk_mul(t2, t2), 0, NULL, false);
  tvk_tensor *all[3] = {t3, t2, t1};
  assert_int_equal(realize_count(ctx, 3, all), 3);
  read_f32(t1, o1);
  read_f32(t2, o2);
  read_f32(t3, &o3);
  double w1[5], w2[20], w3 = 0;
  for (int i = 0; i < 5; i++) {
    w1[i] = 0;
    for (int j = 0; j < 4; j++) w1[i] += a[idx2(sh, i, j)];
    for (int j = 0; j < 4; j++)
      w2[idx2(sh, i, j)] = w1[i] + a[idx2(sh, i, j)], w3 += w2[idx2(sh, i, j)] * w2[idx2(sh, i, j)];
  }
  check_close("t1", o1, w1, 5, 1e-5);
  check_close("t2", o2, w2, 20, 1e-5);
  check_close("t3", &o3, &w3, 1, 1e-5);
  close_ctx_clean(ctx);
}

/* ---------------------------------------------------------------- the schedule itself */

/* Schedules the graphs of ctx's tensors as realize does, without running. */
static tvk_status schedule_roots(tvk_ctx *ctx, int n, UOp *const *roots, Schedule *s) {
  SchedCtx sc = {ctx->u, ctx->dev->limits.max_kernel_buffers, &ctx->err, 0};
  return schedule_create(&sc, n, roots, s);
}

/* Schedules t's graph without running it; the caller frees. */
static void schedule_of(tvk_tensor *t, Schedule *s) {
  tvk_status st = schedule_roots(t->ctx, 1, &t->uop, s);
  if (st != TVK_OK) print_error("schedule_create: %s\n", tvk_ctx_error(t->ctx));
  assert_int_equal(st, TVK_OK);
}

/* The output of item i: why it is materialised. */
static const SchedBuf *out_of(const Schedule *s, int i) { return &s->bufs[s->items[i].bufs[0]]; }

/* Two devices, the second one's launches queued (SchedCtx.background_devices):
 * a copy feeding it comes first, then its kernel, then the first device's
 * (overlapping it), then the copy back; without the bit, the order of the
 * graph. Every item names its device, and buffers theirs. */
static void test_schedule_devices(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int second;
  assert_int_equal(tvk_ctx_add_device(ctx, "CPU", &second), TVK_OK);
  int64_t sh[1] = {64};
  float x[64];
  tvk_tensor *X = rand_tensor(ctx, 1, sh, x);
  tvk_tensor *b = tvk_sum(tvk_exp(X), 0, NULL, true); /* device 0, a kernel of its own */
  tvk_tensor *a = tvk_exp(tvk_to_device(X, 1));       /* device 1 */
  tvk_tensor *c = tvk_add(tvk_to_device(a, 0), b);    /* back on 0 */
  size_t m = uop_pool_mark(ctx->u);
  for (int bg = 0; bg < 2; bg++) {
    Schedule s;
    SchedCtx sc = {ctx->u, 0, &ctx->err, bg ? 2u : 0u};
    assert_int_equal(schedule_create(&sc, 1, &c->uop, &s), TVK_OK);
    assert_int_equal(s.nitems, 5);
    int copies = 0;
    for (int i = 0; i < s.nitems; i++) {
      const ScheduleItem *it = &s.items[i];
      copies += it->copy;
      assert_int_equal(it->device, out_of(&s, i)->device);
      if (it->copy) assert_int_not_equal(s.bufs[it->bufs[1]].device, it->device);
    }
    assert_int_equal(copies, 2);
    if (bg) { /* copy to 1, kernel on 1, kernel on 0, copy to 0, the add on 0 */
      const int dev[5] = {1, 1, 0, 0, 0}, copy[5] = {1, 0, 0, 1, 0};
      for (int i = 0; i < 5; i++) {
        assert_int_equal(s.items[i].device, dev[i]);
        assert_int_equal(s.items[i].copy, copy[i]);
      }
    }
    schedule_free(&s);
  }
  uop_pool_drain(ctx->u, m);
  close_ctx_clean(ctx);
}

/* Why nodes are materialised, and the order of the kernels. */
static void test_schedule_reasons(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {4, 6}, pads[2][2] = {{1, 0}, {0, 2}};
  float x[24], y[24];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x), *Y = rand_tensor(ctx, 2, sh, y);
  int ax0 = 0, ax1 = 1;
  size_t m = uop_pool_mark(ctx->u);
  Schedule s;

  schedule_of(tvk_add(tvk_sum(X, 1, &ax1, true), X), &s); /* sum + x */
  assert_int_equal(s.nitems, 2);
  assert_int_equal(out_of(&s, 0)->why, WHY_VIEW_BLOCKED);
  assert_int_equal(out_of(&s, 0)->culprit, OP_REDUCE_AXIS);
  assert_int_equal(out_of(&s, 1)->why, WHY_OUTPUT);
  assert_int_equal(s.items[1].nbufs, 3); /* out, the sum, x */
  assert_int_equal(s.items[1].bufs[1], s.items[0].bufs[0]);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  schedule_print(f, &s, NULL);
  fclose(f);
  assert_non_null(strstr(text, "2 kernels"));
  assert_non_null(strstr(text, "a view over it cannot be pushed"));
  assert_non_null(strstr(text, "requested"));
  free(text);
  schedule_free(&s);

  schedule_of(tvk_neg(tvk_pad(tvk_exp2(X), pads, 0)), &s); /* a pad over exp2, read by a kernel */
  assert_int_equal(s.nitems, 2);
  assert_int_equal(out_of(&s, 0)->why, WHY_UNSAFE_PAD);
  assert_int_equal(out_of(&s, 0)->culprit, OP_EXP2);
  schedule_free(&s);

  schedule_of(tvk_neg(tvk_pad(tvk_sum(tvk_add(X, Y), 1, &ax1, true), pads, 0)),
              &s); /* a pad over a reduce */
  assert_int_equal(s.nitems, 2);
  assert_int_equal(out_of(&s, 0)->why, WHY_VIEW_BLOCKED);
  schedule_free(&s);

  tvk_tensor *inner = tvk_sum(X, 1, &ax1, true);
  schedule_of(tvk_sum(tvk_mul(inner, inner), 1, &ax0, true), &s); /* nested reduces */
  assert_int_equal(s.nitems, 2);
  assert_int_equal(out_of(&s, 0)->why, WHY_REDUCE_NESTED);
  schedule_free(&s);

  tvk_tensor *sx = tvk_sum(X, 1, &ax1, true), *sy = tvk_sum(tvk_transpose(Y, 0, 1), 1, &ax1, true);
  int64_t four[2] = {4, 1};
  schedule_of(
      tvk_add(sx, tvk_reshape(tvk_shrink(sy, (const int64_t[2][2]){{0, 4}, {0, 1}}), 2, four)), &s);
  assert_true(s.nitems >= 2); /* sy reduces a (6,4) input: another kernel */
  schedule_free(&s);

  tvk_tensor *ss = tvk_sum(X, 1, &ax1, true);
  UOp *roots[2] = {tvk_exp(ss)->uop, tvk_neg(ss)->uop};
  assert_int_equal(schedule_roots(ctx, 2, roots, &s),
                   TVK_OK); /* one reduce, two outputs of its shape: one kernel */
  assert_int_equal(s.nitems, 1);
  assert_int_equal(s.items[0].nout, 2);
  schedule_free(&s);

  /* the second output reads the first: they cannot share a kernel, so the
   * reduce both read is computed once, into a buffer of its own */
  tvk_tensor *e = tvk_exp(ss);
  UOp *dep[2] = {e->uop, tvk_add(e, tvk_neg(ss))->uop};
  assert_int_equal(schedule_roots(ctx, 2, dep, &s), TVK_OK);
  assert_int_equal(s.nitems, 3);
  assert_int_equal(out_of(&s, 0)->why, WHY_REDUCE_SHARED);
  schedule_free(&s);

  schedule_of(tvk_contiguous(tvk_permute(X, (const int[]){1, 0})), &s);
  assert_int_equal(s.nitems, 1);
  assert_int_equal(out_of(&s, 0)->why, WHY_CONTIGUOUS);
  assert_int_equal(s.naliases, 0);
  schedule_free(&s);

  schedule_of(tvk_contiguous(tvk_reshape(tvk_add(X, Y), 1, (const int64_t[]){24})), &s);
  assert_int_equal(s.nitems, 1);
  assert_int_equal(s.naliases, 1);
  assert_int_equal(out_of(&s, 0)->node->op, OP_ADD);
  schedule_free(&s);
  uop_pool_drain(ctx->u, m);
  close_ctx_clean(ctx);
}

/* TVK_DEBUG levels: 1 kernels with timings, 2 the schedule, 3 the source,
 * 4 the UOps; all on stderr. */
static void test_debug_output(void **state) {
  (void)state;
  char dir[256], path[300];
  assert_true(temp_dir(dir, sizeof dir, "sched-debug"));
  snprintf(path, sizeof path, "%s/stderr.txt", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), saved = dup(2);
  assert_true(fd >= 0 && saved >= 0);
  fflush(stderr);
  dup2(fd, 2);
  tvk_ctx *ctx = open_ctx_in(g_dir, 4);
  int64_t sh[1] = {8};
  float a[8], out[8];
  tvk_tensor *A = rand_tensor(ctx, 1, sh, a);
  read_f32(tvk_sum(tvk_mul(A, A), 0, NULL, true), out);
  close_ctx_clean(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  rm_rf(dir);
  assert_non_null(strstr(text, "tvk schedule: 1 kernel"));
  assert_non_null(strstr(text, "tvk kernel   0  r_8"));
  assert_non_null(strstr(text, " ms"));
  assert_non_null(strstr(text, "tvk source of r_8"));
  assert_non_null(strstr(text, "void r_8("));
  assert_non_null(strstr(text, "tvk uops of r_8"));
  assert_non_null(strstr(text, "RANGE"));
}

/* ---------------------------------------------------------------- a graph built by hand */

/* The scheduler needs no context and no device: a tensor graph of UOps
 * (ir/graph.h) in a bare UCtx, scheduled with a SchedCtx, compiles nothing. */
typedef struct {
  UCtx *u;
  Error err;
  SchedCtx sc;
  Schedule s;
} Hand;

static Hand *hand_new(int max_kernel_buffers) {
  Hand *h = calloc(1, sizeof *h);
  assert_non_null(h);
  h->u = uctx_new();
  assert_non_null(h->u);
  h->sc = (SchedCtx){h->u, max_kernel_buffers, &h->err, 0};
  return h;
}

/* Everything the schedule and the graph held is gone with them. */
static void hand_free(Hand *h) {
  schedule_free(&h->s);
  uop_pool_drain(h->u, 0);
  assert_int_equal(uctx_live(h->u), 0);
  uctx_free(h->u);
  free(h);
}

/* VIEW(BUFFER id), a float32 row-major (rows, cols) buffer. */
static UOp *hbuf(Hand *h, int64_t id, int64_t rows, int64_t cols) {
  UOp *b = graph_buffer(h->u, DT_FLOAT32, id, rows * cols);
  ShapeTracker *st = st_from_shape(2, (const int64_t[]){rows, cols});
  UOp *v = uop_new(h->u, OP_VIEW, b->dtype, 1, &b, arg_st(st));
  st_free(st);
  return v;
}

static UOp *hview(UOp *x, ShapeTracker *st) { /* takes st */
  UOp *v = graph_view(x, st);
  st_free(st);
  return v;
}

static void hschedule(Hand *h, int n, UOp *const *roots) {
  tvk_status st = schedule_create(&h->sc, n, roots, &h->s);
  if (st != TVK_OK) print_error("schedule_create: %s\n", h->err.msg);
  assert_int_equal(st, TVK_OK);
}

/* a*b + c over three buffers: one kernel binding four buffers. */
static void test_hand_elementwise(void **state) {
  (void)state;
  Hand *h = hand_new(0);
  UOp *r = uop_add(uop_mul(hbuf(h, 0, 4, 5), hbuf(h, 1, 4, 5)), hbuf(h, 2, 4, 5));
  hschedule(h, 1, &r);
  assert_int_equal(h->s.nitems, 1);
  assert_int_equal(h->s.items[0].nbufs, 4);
  assert_int_equal(h->s.items[0].nout, 1);
  assert_int_equal(out_of(&h->s, 0)->why, WHY_OUTPUT);
  assert_int_equal(out_of(&h->s, 0)->numel, 20);
  /* an input's size comes from its BUFFER node */
  assert_int_equal(h->s.bufs[h->s.items[0].bufs[1]].numel, 20);
  hand_free(h);
}

/* x + sum(x, 1) broadcast back: the reduce cannot be recomputed per element
 * of the expand, so it is a kernel of its own. */
static void test_hand_reduce_expand(void **state) {
  (void)state;
  Hand *h = hand_new(0);
  UOp *x = hbuf(h, 0, 4, 5);
  UOp *sum =
      uop_new(h->u, OP_REDUCE_AXIS, x->dtype, 1, &x, arg_reduce(OP_ADD, 1, (const int64_t[]){1}));
  ShapeTracker *one = st_from_shape(2, (const int64_t[]){4, 1});
  UOp *r = uop_add(x, hview(sum, st_expand(one, (const int64_t[]){4, 5})));
  st_free(one);
  hschedule(h, 1, &r);
  assert_int_equal(h->s.nitems, 2);
  assert_int_equal(out_of(&h->s, 0)->why, WHY_VIEW_BLOCKED);
  assert_int_equal(out_of(&h->s, 0)->culprit, OP_REDUCE_AXIS);
  assert_int_equal(out_of(&h->s, 1)->why, WHY_OUTPUT);
  hand_free(h);
}

/* pad(f) + z: the pad fuses over an f that keeps 0 (ADD) and not over one
 * that does not (EXP2: exp2(0) = 1 would show in the padding). */
static void test_hand_pad(void **state) {
  (void)state;
  const int64_t pads[2][2] = {{1, 1}, {0, 2}};
  for (int k = 0; k < 2; k++) {
    Hand *h = hand_new(0);
    UOp *x = hbuf(h, 0, 4, 5), *y = hbuf(h, 1, 4, 5);
    UOp *f = k == 0 ? uop_add(x, y) : uop_alu1(OP_EXP2, x);
    ShapeTracker *st = st_from_shape(2, (const int64_t[]){4, 5});
    UOp *r = uop_add(hview(f, st_pad(st, pads)), hbuf(h, 2, 6, 7));
    st_free(st);
    hschedule(h, 1, &r);
    assert_int_equal(h->s.nitems, k == 0 ? 1 : 2);
    if (k == 1) {
      assert_int_equal(out_of(&h->s, 0)->why, WHY_UNSAFE_PAD);
      assert_int_equal(out_of(&h->s, 0)->culprit, OP_EXP2);
    }
    hand_free(h);
  }
}

/* A sum of six buffers on a device that binds four per kernel is split, and no
 * kernel binds more than the device allows. */
static void test_hand_buffer_limit(void **state) {
  (void)state;
  Hand *h = hand_new(4);
  UOp *r = hbuf(h, 0, 3, 3);
  for (int64_t i = 1; i < 6; i++) r = uop_add(r, hbuf(h, i, 3, 3));
  hschedule(h, 1, &r);
  assert_true(h->s.nitems >= 2);
  bool split = false;
  for (int i = 0; i < h->s.nitems; i++) {
    assert_true(h->s.items[i].nbufs <= 4);
    split |= out_of(&h->s, i)->why == WHY_BUFFER_LIMIT;
  }
  assert_true(split);
  hand_free(h);
}

/* A chain of 10,000 fused elementwise ops is split into kernels of at most
 * SCHED_MAX_KERNEL_OPS nodes: compilers take superlinear time on one huge
 * function. */
static void test_hand_kernel_size(void **state) {
  (void)state;
  Hand *h = hand_new(0);
  UOp *r = hbuf(h, 0, 2, 3), *one = uop_const_float(h->u, DT(FLOAT32), 1);
  ShapeTracker *st0 = st_from_shape(0, NULL), *st1 = st_reshape(st0, 2, (const int64_t[]){1, 1});
  UOp *ones = hview(one, st_expand(st1, (const int64_t[]){2, 3}));
  st_free(st0), st_free(st1);
  for (int i = 0; i < 10000; i++) r = i % 2 ? uop_mul(r, ones) : uop_add(r, ones);
  hschedule(h, 1, &r);
  assert_true(h->s.nitems >= 10000 / SCHED_MAX_KERNEL_OPS + 1);
  for (int i = 0; i < h->s.nitems; i++) {
    size_t n = 0;
    UOp **t = uop_toposort(h->s.items[i].ast, &n);
    free(t);
    assert_true(n <= SCHED_MAX_KERNEL_OPS + 16); /* the chain's part, its loads and store */
    if (i + 1 < h->s.nitems) assert_int_equal(out_of(&h->s, i)->why, WHY_KERNEL_SIZE);
  }
  hand_free(h);
}

/* ---------------------------------------------------------------- random graphs */

/* A reference array next to the tensor it should equal. */
typedef struct {
  int nd;
  int64_t sh[3];
  double *v;
  tvk_tensor *t;
} Pair;

static int64_t flat3(const int64_t *sh, int nd, const int64_t *ix) {
  int64_t f = 0;
  for (int d = 0; d < nd; d++) f = f * sh[d] + ix[d];
  return f;
}

static bool next_ix(const int64_t *sh, int nd, int64_t *ix) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++ix[d] < sh[d]) return true;
    ix[d] = 0;
  }
  return false;
}

static Pair pair_new(int nd, const int64_t *sh) {
  Pair p = {.nd = nd};
  memcpy(p.sh, sh, (size_t)nd * sizeof *sh);
  p.v = calloc((size_t)numel_of(nd, sh) + 1, sizeof *p.v);
  return p;
}

static void pair_free(Pair *p) {
  free(p->v);
  tvk_release(p->t);
}

/* For every index of the result, f gives the value from the child. */
typedef double (*IndexFn)(const Pair *c, const int64_t *ix, const void *arg);

static Pair pair_map(const Pair *c, int nd, const int64_t *sh, IndexFn fn, const void *arg,
                     tvk_tensor *t) {
  Pair r = pair_new(nd, sh);
  r.t = t;
  int64_t ix[3] = {0, 0, 0};
  if (numel_of(nd, sh) > 0) do
      r.v[flat3(sh, nd, ix)] = fn(c, ix, arg);
    while (next_ix(sh, nd, ix));
  return r;
}

static double at_permute(const Pair *c, const int64_t *ix, const void *arg) {
  const int *perm = arg;
  int64_t cx[3];
  for (int d = 0; d < c->nd; d++) cx[perm[d]] = ix[d];
  return c->v[flat3(c->sh, c->nd, cx)];
}

static double at_flip(const Pair *c, const int64_t *ix, const void *arg) {
  int ax = *(const int *)arg;
  int64_t cx[3];
  memcpy(cx, ix, sizeof cx);
  cx[ax] = c->sh[ax] - 1 - ix[ax];
  return c->v[flat3(c->sh, c->nd, cx)];
}

static double at_pad(const Pair *c, const int64_t *ix, const void *arg) {
  const int64_t(*pads)[2] = arg;
  int64_t cx[3];
  for (int d = 0; d < c->nd; d++) {
    cx[d] = ix[d] - pads[d][0];
    if (cx[d] < 0 || cx[d] >= c->sh[d]) return 0;
  }
  return c->v[flat3(c->sh, c->nd, cx)];
}

static double at_shrink(const Pair *c, const int64_t *ix, const void *arg) {
  const int64_t(*rng)[2] = arg;
  int64_t cx[3];
  for (int d = 0; d < c->nd; d++) cx[d] = ix[d] + rng[d][0];
  return c->v[flat3(c->sh, c->nd, cx)];
}

static double at_sum(const Pair *c, const int64_t *ix, const void *arg) {
  int ax = *(const int *)arg;
  int64_t cx[3];
  memcpy(cx, ix, sizeof cx);
  double s = 0;
  for (cx[ax] = 0; cx[ax] < c->sh[ax]; cx[ax]++) s += c->v[flat3(c->sh, c->nd, cx)];
  return s;
}

static double at_expand(const Pair *c, const int64_t *ix, const void *arg) {
  (void)arg;
  int64_t cx[3];
  for (int d = 0; d < c->nd; d++) cx[d] = c->sh[d] == 1 ? 0 : ix[d];
  return c->v[flat3(c->sh, c->nd, cx)];
}

/* A random graph of the given shape and its reference. */
static Pair gen(tvk_ctx *ctx, int nd, const int64_t *sh, int depth) {
  int kind = depth == 0 || rnd_int(6) == 0 ? -1 : rnd_int(11);
  int64_t csh[3];
  memcpy(csh, sh, (size_t)nd * sizeof *sh);
  int d = rnd_int(nd);
  switch (kind) {
  case 0:
  case 1: { /* binary */
    Pair a = gen(ctx, nd, sh, depth - 1), b = gen(ctx, nd, sh, depth - 1);
    int op = rnd_int(4);
    tvk_tensor *t = op == 0   ? tvk_add(a.t, b.t)
                    : op == 1 ? tvk_mul(a.t, b.t)
                    : op == 2 ? tvk_maximum(a.t, b.t)
                              : tvk_sub(a.t, b.t);
    Pair r = pair_new(nd, sh);
    r.t = t;
    for (int64_t i = 0; i < numel_of(nd, sh); i++)
      r.v[i] = op == 0   ? a.v[i] + b.v[i]
               : op == 1 ? a.v[i] * b.v[i]
               : op == 2 ? fmax(a.v[i], b.v[i])
                         : a.v[i] - b.v[i];
    pair_free(&a), pair_free(&b);
    return r;
  }
  case 2: { /* unary: neg, or exp (which does not keep 0) of a bounded input */
    Pair a = gen(ctx, nd, sh, depth - 1);
    bool e = rnd_int(2);
    tvk_tensor *t = e ? tvk_exp(tvk_maximum(tvk_minimum(a.t, tvk_scalar(ctx, TVK_FLOAT32, 2)),
                                            tvk_scalar(ctx, TVK_FLOAT32, -2)))
                      : tvk_neg(a.t);
    Pair r = pair_new(nd, sh);
    r.t = t;
    for (int64_t i = 0; i < numel_of(nd, sh); i++)
      r.v[i] = e ? exp(fmax(fmin(a.v[i], 2), -2)) : -a.v[i];
    pair_free(&a);
    return r;
  }
  case 3: { /* permute: result dim i is child dim perm[i] */
    int perm[3] = {0, 1, 2};
    for (int i = nd - 1; i > 0; i--) {
      int j = rnd_int(i + 1), tmp = perm[i];
      perm[i] = perm[j], perm[j] = tmp;
    }
    for (int i = 0; i < nd; i++) csh[perm[i]] = sh[i];
    Pair c = gen(ctx, nd, csh, depth - 1);
    Pair r = pair_map(&c, nd, sh, at_permute, perm, tvk_permute(c.t, perm));
    pair_free(&c);
    return r;
  }
  case 4: { /* flip */
    Pair c = gen(ctx, nd, sh, depth - 1);
    Pair r = pair_map(&c, nd, sh, at_flip, &d, tvk_flip(c.t, 1, &d));
    pair_free(&c);
    return r;
  }
  case 5: { /* pad: the child is smaller */
    int64_t pads[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    if (sh[d] < 2) break;
    pads[d][0] = rnd_int((int)sh[d]);
    pads[d][1] = rnd_int((int)(sh[d] - pads[d][0]));
    csh[d] = sh[d] - pads[d][0] - pads[d][1];
    Pair c = gen(ctx, nd, csh, depth - 1);
    Pair r = pair_map(&c, nd, sh, at_pad, pads, tvk_pad(c.t, pads, 0));
    pair_free(&c);
    return r;
  }
  case 6: { /* shrink: the child is larger */
    int64_t rng[3][2];
    for (int i = 0; i < nd; i++) rng[i][0] = 0, rng[i][1] = sh[i];
    int lo = rnd_int(3);
    csh[d] = sh[d] + lo + rnd_int(3);
    rng[d][0] = lo, rng[d][1] = lo + sh[d];
    Pair c = gen(ctx, nd, csh, depth - 1);
    Pair r = pair_map(&c, nd, sh, at_shrink, rng, tvk_shrink(c.t, rng));
    pair_free(&c);
    return r;
  }
  case 7: { /* a sum over axis d with keepdim, expanded back when the size is not 1 */
    csh[d] = 1 + rnd_int(5);
    Pair c = gen(ctx, nd, csh, depth - 1);
    int64_t ssh[3];
    memcpy(ssh, sh, sizeof ssh);
    ssh[d] = 1;
    Pair s = pair_map(&c, nd, ssh, at_sum, &d, tvk_sum(c.t, 1, &d, true));
    pair_free(&c);
    if (sh[d] == 1) return s;
    Pair r = pair_map(&s, nd, sh, at_expand, NULL, tvk_expand(s.t, nd, sh));
    pair_free(&s);
    return r;
  }
  case 8: { /* a sum without keepdim (a reshape over the reduce), reshaped back, expanded */
    csh[d] = 1 + rnd_int(5);
    Pair c = gen(ctx, nd, csh, depth - 1);
    int64_t ssh[3], dsh[3];
    memcpy(ssh, sh, sizeof ssh);
    ssh[d] = 1;
    for (int i = 0, k = 0; i < nd; i++)
      if (i != d) dsh[k++] = sh[i];
    tvk_tensor *sum = tvk_sum(c.t, 1, &d, false);
    tvk_tensor *back = tvk_reshape(sum, nd, ssh);
    tvk_release(sum);
    Pair s = pair_map(&c, nd, ssh, at_sum, &d, back);
    pair_free(&c);
    (void)dsh;
    if (sh[d] == 1) return s;
    Pair r = pair_map(&s, nd, sh, at_expand, NULL, tvk_expand(s.t, nd, sh));
    pair_free(&s);
    return r;
  }
  case 10: { /* contiguous(permute(child)): over a reduce, its contiguous child */
    int perm[3] = {0, 1, 2};
    for (int i = nd - 1; i > 0; i--) {
      int j = rnd_int(i + 1), tmp = perm[i];
      perm[i] = perm[j], perm[j] = tmp;
    }
    for (int i = 0; i < nd; i++) csh[perm[i]] = sh[i];
    Pair c = gen(ctx, nd, csh, depth - 1);
    tvk_tensor *pt = tvk_permute(c.t, perm);
    Pair r = pair_map(&c, nd, sh, at_permute, perm, tvk_contiguous(pt));
    tvk_release(pt);
    pair_free(&c);
    return r;
  }
  case 9: { /* an elementwise computation expanded along d (materialised once) */
    csh[d] = 1;
    Pair a = gen(ctx, nd, csh, depth - 1), b = gen(ctx, nd, csh, depth - 1);
    Pair m = pair_new(nd, csh);
    m.t = tvk_mul(a.t, b.t);
    for (int64_t i = 0; i < numel_of(nd, csh); i++) m.v[i] = a.v[i] * b.v[i];
    pair_free(&a), pair_free(&b);
    Pair r = pair_map(&m, nd, sh, at_expand, NULL, tvk_expand(m.t, nd, sh));
    pair_free(&m);
    return r;
  }
  default: break;
  }
  Pair r = pair_new(nd, sh); /* a leaf */
  int64_t n = numel_of(nd, sh);
  float *host = malloc((size_t)(n + 1) * sizeof *host);
  r.t = rand_tensor(ctx, nd, sh, host);
  for (int64_t i = 0; i < n; i++) r.v[i] = host[i];
  free(host);
  return r;
}

/* Random graphs of elementwise ops, movement ops and reduces against the
 * reference; every case is also a check that the schedule is valid. On the
 * CPU, and a shorter run on Vulkan (with validation) when a device exists:
 * multi-output kernels and kernels in a reduce's shape are generated code too. */
static void random_graphs_on(tvk_ctx *ctx, int cases) {
  g_rng = 0x2545f4914f6cdd1dull;
  for (int c = 0; c < cases; c++) {
    int nd = 1 + rnd_int(3);
    int64_t sh[3];
    for (int d = 0; d < nd; d++) sh[d] = 1 + rnd_int(5);
    uint64_t seed = g_rng;
    Pair p = gen(ctx, nd, sh, 4);
    if (tvk_status_of(p.t) != TVK_OK) print_error("case %d: %s\n", c, tvk_error_of(p.t));
    assert_int_equal(tvk_status_of(p.t), TVK_OK);
    int64_t n = numel_of(nd, sh);
    float *out = malloc((size_t)n * sizeof *out);
    double *want = malloc((size_t)n * sizeof *want);
    /* two consumers realized together (a multi-output kernel when p ends in a
     * reduce), then p itself */
    tvk_tensor *r[2] = {tvk_add(p.t, tvk_scalar(ctx, TVK_FLOAT32, 1)),
                        tvk_mul(p.t, tvk_scalar(ctx, TVK_FLOAT32, 3))};
    tvk_status st = tvk_realize(2, r);
    for (int k = 0; k < 3 && st == TVK_OK; k++) {
      tvk_tensor *t = k < 2 ? r[k] : p.t;
      st = tvk_to_host(t, out, (size_t)n * sizeof *out);
      if (st != TVK_OK) break;
      for (int64_t i = 0; i < n; i++) want[i] = k == 0 ? p.v[i] + 1 : k == 1 ? p.v[i] * 3 : p.v[i];
      char what[80];
      snprintf(what, sizeof what, "random case %d (seed %llx), output %d", c,
               (unsigned long long)seed, k);
      check_close(what, out, want, n, 1e-4);
    }
    if (st != TVK_OK)
      print_error("case %d (seed %llx): %s\n", c, (unsigned long long)seed, tvk_ctx_error(ctx));
    assert_int_equal(st, TVK_OK);
    tvk_release(r[0]), tvk_release(r[1]);
    free(out), free(want);
    pair_free(&p);
  }
}

static void test_random_graphs(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  random_graphs_on(ctx, 80);
  close_ctx_clean(ctx);
  tvk_ctx_options o = {.device = "VK", .cache_dir = g_dir, .validate = 1};
  if (tvk_ctx_create_opts(&o, &ctx) != TVK_OK) {
    if (vk_required())
      fail_msg("TVK_REQUIRE_VK, but no Vulkan device: %s", tvk_last_create_error());
    return; /* no Vulkan device: the CPU run stands */
  }
  random_graphs_on(ctx, 24);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.validation_messages, 0);
  close_ctx_clean(ctx);
}

/* ---------------------------------------------------------------- NN fusion (issue 5) */

/* out[i][j] = sum_k a[i][k] * b[k][j] in double. */
static void ref_matmul(const float *a, const float *b, double *out, int m, int k, int n) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double t = 0;
      for (int q = 0; q < k; q++) t += (double)a[i * k + q] * b[q * n + j];
      out[i * n + j] = t;
    }
}

/* matmul is one kernel, and so is relu(x @ w + b): the reshape that drops the
 * reduced axis does not stop the bias and relu from fusing with the reduce. */
static void test_matmul_bias_relu_one_kernel(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sx[2] = {8, 16}, sw[2] = {16, 32}, sb[1] = {32};
  float x[128], w[512], b[32], out[256];
  double want[256];
  tvk_tensor *X = rand_tensor(ctx, 2, sx, x), *W = rand_tensor(ctx, 2, sw, w),
             *B = rand_tensor(ctx, 1, sb, b);
  tvk_tensor *mm = tvk_matmul(X, W);
  assert_int_equal(kernels_for(mm), 1);
  read_f32(mm, out);
  ref_matmul(x, w, want, 8, 16, 32);
  check_close("x @ w", out, want, 256, 1e-5);
  tvk_tensor *y = tvk_relu(tvk_add(tvk_matmul(X, W), B));
  assert_int_equal(kernels_for(y), 1);
  read_f32(y, out);
  for (int i = 0; i < 256; i++) want[i] = fmax(want[i] + b[i % 32], 0);
  check_close("relu(x @ w + b)", out, want, 256, 1e-5);
  close_ctx_clean(ctx);
}

/* A 2-layer MLP forward: each layer is at most 2 kernels (here 1: the hidden
 * activations are materialised because the second matmul expands them). */
static void test_mlp_two_layers(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { N = 4, I = 8, H = 16, O = 3 };
  int64_t sx[2] = {N, I}, sw1[2] = {H, I}, sb1[1] = {H}, sw2[2] = {O, H}, sb2[1] = {O};
  float x[N * I], w1[H * I], b1[H], w2[O * H], b2[O], out[N * O];
  double h[N * H], want[N * O];
  tvk_tensor *X = rand_tensor(ctx, 2, sx, x), *W1 = rand_tensor(ctx, 2, sw1, w1),
             *B1 = rand_tensor(ctx, 1, sb1, b1), *W2 = rand_tensor(ctx, 2, sw2, w2),
             *B2 = rand_tensor(ctx, 1, sb2, b2);
  tvk_tensor *y = tvk_linear(tvk_relu(tvk_linear(X, W1, B1)), W2, B2);
  assert_true(kernels_for(y) <= 4);
  read_f32(y, out);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < H; j++) {
      double t = b1[j];
      for (int i = 0; i < I; i++) t += (double)x[n * I + i] * w1[j * I + i];
      h[n * H + j] = fmax(t, 0);
    }
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++) {
      double t = b2[o];
      for (int j = 0; j < H; j++) t += h[n * H + j] * w2[o * H + j];
      want[n * O + o] = t;
    }
  check_close("mlp", out, want, N * O, 1e-5);
  close_ctx_clean(ctx);
}

/* softmax over the last axis: max, sum of exp, normalise: at most 3 kernels. */
static void test_softmax_three_kernels(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[2] = {5, 7};
  float x[35], out[35];
  double want[35];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x);
  tvk_tensor *y = tvk_softmax(X, -1);
  assert_true(kernels_for(y) <= 3);
  read_f32(y, out);
  for (int i = 0; i < 5; i++) {
    double m = -INFINITY, t = 0;
    for (int j = 0; j < 7; j++) m = fmax(m, x[i * 7 + j]);
    for (int j = 0; j < 7; j++) t += exp(x[i * 7 + j] - m);
    for (int j = 0; j < 7; j++) want[i * 7 + j] = exp(x[i * 7 + j] - m) / t;
  }
  check_close("softmax", out, want, 35, 1e-6);
  close_ctx_clean(ctx);
}

/* An expanded computation that reads memory is computed once (WHY_EXPAND);
 * an expanded comparison of aranges (a causal mask) is recomputed in place. */
static void test_expand_materialises(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sc[2] = {6, 1}, sb[3] = {2, 6, 6}, e3[3] = {2, 6, 6};
  float c[6], z[72], out[72];
  double want[72];
  tvk_tensor *C = rand_tensor(ctx, 2, sc, c), *Z = rand_tensor(ctx, 3, sb, z);
  Schedule s;
  tvk_tensor *y = tvk_add(tvk_expand(tvk_exp(C), 3, e3), Z);
  schedule_of(y, &s);
  assert_int_equal(s.nitems, 2);
  assert_int_equal(out_of(&s, 0)->why, WHY_EXPAND);
  schedule_free(&s);
  read_f32(y, out);
  for (int i = 0; i < 72; i++) want[i] = exp(c[(i / 6) % 6]) + z[i];
  check_close("expand(exp(c)) + z", out, want, 72, 1e-6);

  int64_t col[2] = {6, 1}, row[2] = {1, 6};
  tvk_tensor *i = tvk_reshape(tvk_arange(ctx, TVK_INT32, 0, 6, 1), 2, col);
  tvk_tensor *j = tvk_reshape(tvk_arange(ctx, TVK_INT32, 0, 6, 1), 2, row);
  tvk_tensor *mask = tvk_expand(tvk_ge(i, j), 3, e3);
  tvk_tensor *m = tvk_where(mask, Z, tvk_scalar(ctx, TVK_FLOAT32, 0));
  assert_int_equal(kernels_for(m), 1);
  read_f32(m, out);
  for (int k = 0; k < 72; k++) want[k] = (k / 6) % 6 >= k % 6 ? z[k] : 0;
  check_close("causal mask", out, want, 72, 0);
  close_ctx_clean(ctx);
}

/* Embedding by comparison with an arange: the (N, V) comparison is never
 * stored; the only device memory the realize adds is the output. */
static void test_embedding_no_index_tensor(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { V = 1000, D = 8, N = 64 };
  int64_t sw[2] = {V, D}, si[1] = {N};
  float *w = malloc(sizeof(float) * V * D), out[N * D];
  int32_t idx[N];
  for (int n = 0; n < N; n++) idx[n] = rnd_int(V);
  tvk_tensor *W = rand_tensor(ctx, 2, sw, w), *I = tvk_from_data(ctx, TVK_INT32, 1, si, idx);
  tvk_tensor *e = tvk_embedding(W, I);
  tvk_stats before, after;
  tvk_stats_reset(ctx);
  tvk_stats_get(ctx, &before);
  assert_int_equal(kernels_for(e), 1);
  tvk_stats_get(ctx, &after);
  assert_int_equal(after.bytes_peak, before.bytes_now + sizeof(float) * N * D);
  read_f32(e, out);
  for (int n = 0; n < N; n++)
    for (int d = 0; d < D; d++)
      if (out[n * D + d] != w[idx[n] * D + d]) {
        print_error("embedding[%d][%d] = %g, want %g\n", n, d, out[n * D + d], w[idx[n] * D + d]);
        fail();
      }
  free(w);
  close_ctx_clean(ctx);
}

/* Ten materialised intermediates in a chain: the planner gives dead ones'
 * memory to later ones, so the peak is the input, two intermediates and the
 * output -- not eleven buffers. A tensor the user still holds is not reused.
 * On the CPU each step reads the last one element by element and writes in
 * place (plan.c): the input and two buffers, one up to the kept 5th and one
 * after it. */
static void planner_chain_on(tvk_ctx *ctx, bool in_place) {
  int64_t n = 1 << 18;
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *out = malloc(bytes);
  tvk_tensor *X = rand_tensor(ctx, 1, &n, x);
  tvk_tensor *one = tvk_scalar(ctx, TVK_FLOAT32, 1), *kept = NULL;
  size_t scope = tvk_scope_begin(ctx);
  tvk_tensor *y = X;
  for (int i = 0; i < 10; i++) {
    y = tvk_contiguous(tvk_mul(tvk_add(y, one), tvk_scalar(ctx, TVK_FLOAT32, 0.5)));
    if (i == 4) kept = y;
  }
  tvk_tensor *keep[2] = {y, kept};
  tvk_scope_end(ctx, scope, 2, keep);
  tvk_stats a, b;
  tvk_stats_reset(ctx);
  tvk_stats_get(ctx, &a);
  assert_int_equal(kernels_for(y), 10);
  tvk_stats_get(ctx, &b);
  /* the output, the kept 5th, and at most two live intermediates at a time */
  assert_true(b.bytes_peak <= a.bytes_now + (in_place ? 2 : 4) * bytes);
  double *want = malloc(sizeof(double) * (size_t)n);
  for (int r = 0; r < 2; r++) {
    int steps = r == 0 ? 10 : 5;
    read_f32(r == 0 ? y : kept, out);
    for (int64_t i = 0; i < n; i++) {
      double v = x[i];
      for (int k = 0; k < steps; k++) v = (v + 1) * 0.5;
      want[i] = v;
    }
    check_close(r == 0 ? "chain" : "kept intermediate", out, want, n, 1e-6);
  }
  free(x), free(out), free(want);
}

/* On the CPU, and on Vulkan (validation on) where memory taken over by a later
 * kernel in the same batch needs its write-after-read barrier. */
static void test_planner_chain(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  planner_chain_on(ctx, true);
  close_ctx_clean(ctx);
  tvk_ctx_options o = {.device = "VK", .cache_dir = g_dir, .validate = 1};
  if (tvk_ctx_create_opts(&o, &ctx) != TVK_OK) {
    if (vk_required())
      fail_msg("TVK_REQUIRE_VK, but no Vulkan device: %s", tvk_last_create_error());
    return; /* no Vulkan device: the CPU run stands */
  }
  planner_chain_on(ctx, false);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.validation_messages, 0);
  close_ctx_clean(ctx);
}

/* In place only through the same view: y = x + 1 materialised, then
 * flip(y) * 2 (y's last reader) reads element n - 1 - i where it writes i,
 * and y * 3 + y (its own) reads i; the first gets memory of its own, the
 * second writes over y. Both give the double-precision values. */
static void test_planner_in_place_views(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t n = 1 << 16;
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *out = malloc(bytes);
  double *want = malloc(sizeof(double) * (size_t)n);
  tvk_tensor *X = rand_tensor(ctx, 1, &n, x);
  const int axis0[1] = {0};
  for (int c = 0; c < 2; c++) {
    size_t scope = tvk_scope_begin(ctx);
    tvk_tensor *y = tvk_contiguous(tvk_add(X, tvk_scalar(ctx, TVK_FLOAT32, 1)));
    tvk_tensor *z = c == 0 ? tvk_mul(tvk_flip(y, 1, axis0), tvk_scalar(ctx, TVK_FLOAT32, 2))
                           : tvk_add(tvk_mul(y, tvk_scalar(ctx, TVK_FLOAT32, 3)), y);
    tvk_scope_end(ctx, scope, 1, &z);
    tvk_stats a, b;
    tvk_stats_reset(ctx);
    tvk_stats_get(ctx, &a);
    assert_int_equal(kernels_for(z), 2);
    tvk_stats_get(ctx, &b);
    assert_int_equal(b.bytes_peak - a.bytes_now, (c == 0 ? 2 : 1) * bytes);
    read_f32(z, out);
    for (int64_t i = 0; i < n; i++)
      want[i] = c == 0 ? ((double)x[n - 1 - i] + 1) * 2 : ((double)x[i] + 1) * 4;
    check_close(c == 0 ? "flip(y) * 2" : "y * 3 + y", out, want, n, 1e-6);
    tvk_release(z);
  }
  free(x), free(out), free(want);
  close_ctx_clean(ctx);
}

/* tvk_assign: kernels reading the old value run before the write; a tensor
 * made from the target before the assign keeps the old value; the value
 * broadcasts and casts; bad targets and self-reads through another view are
 * refused; two assigns reading each other's old value are a cycle, an error. */
static void test_assign(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t s4[1] = {4}, s22[2] = {2, 2};
  float a0[4] = {1, 2, 3, 4}, b0[4] = {10, 20, 30, 40}, out[4];
  double want[4];
  tvk_tensor *A = tvk_from_data(ctx, TVK_FLOAT32, 1, s4, a0);
  tvk_tensor *old2 = tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, 2)); /* pending, reads old A */
  size_t sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(A, tvk_add(A, tvk_scalar(ctx, TVK_FLOAT32, 10))), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  tvk_tensor *new3 = tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, 3)); /* made after: new A */
  Schedule s;
  schedule_of(A, &s); /* the assign alone: one kernel writing A's own buffer */
  assert_int_equal(s.nitems, 1);
  assert_int_equal(out_of(&s, 0)->why, WHY_ASSIGN);
  assert_ptr_equal(out_of(&s, 0)->buffer, A->uop->src[0]->src[0]);
  schedule_free(&s);
  /* realizing it first copies A for the pending reader of the old value */
  assert_int_equal(kernels_for(A), 2);
  read_f32(A, out);
  for (int i = 0; i < 4; i++) want[i] = a0[i] + 10;
  check_close("assigned", out, want, 4, 0);
  read_f32(old2, out);
  for (int i = 0; i < 4; i++) want[i] = 2 * a0[i];
  check_close("read before the assign", out, want, 4, 0);
  read_f32(new3, out);
  for (int i = 0; i < 4; i++) want[i] = 3 * (a0[i] + 10);
  check_close("read after the assign", out, want, 4, 0);

  /* broadcast + cast: an int32 scalar into a float32 vector, then a[i] += i */
  assert_int_equal(tvk_assign(A, tvk_scalar(ctx, TVK_INT32, 7)), TVK_OK);
  tvk_tensor *ar = tvk_arange(ctx, TVK_FLOAT32, 0, 4, 1);
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(A, tvk_add(A, ar)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  read_f32(A, out);
  for (int i = 0; i < 4; i++) want[i] = 7 + i;
  check_close("broadcast assign then +=", out, want, 4, 0);

  /* a += a.T reads elements other invocations overwrite: refused */
  tvk_tensor *M = tvk_from_data(ctx, TVK_FLOAT32, 2, s22, a0);
  tvk_tensor *MT = tvk_transpose(M, 0, 1);
  assert_int_equal(tvk_assign(M, tvk_add(M, MT)), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_ctx_error(ctx), "another view"));
  assert_int_equal(tvk_assign(MT, tvk_scalar(ctx, TVK_FLOAT32, 0)), TVK_ERR_INVALID_ARG);
  read_f32(M, out); /* untouched */
  for (int i = 0; i < 4; i++) want[i] = a0[i];
  check_close("refused assigns change nothing", out, want, 4, 0);
  assert_int_equal(tvk_assign(M, tvk_scalar(ctx, TVK_FLOAT32, 1)), TVK_OK);
  assert_int_equal(tvk_status_of(tvk_assign(NULL, M) == TVK_ERR_INVALID_ARG ? M : NULL), TVK_OK);

  /* a, b = -b, -a through views made before the assigns. Realized one at a
   * time, the pending assign to Q reads P's old value from a copy taken before
   * P is overwritten: a correct swap. Realized together, each kernel must run
   * before the other: a cycle, reported as an error. */
  tvk_tensor *P = tvk_from_data(ctx, TVK_FLOAT32, 1, s4, a0),
             *Q = tvk_from_data(ctx, TVK_FLOAT32, 1, s4, b0);
  tvk_tensor *Pv = tvk_reshape(P, 1, s4), *Qv = tvk_reshape(Q, 1, s4);
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(P, tvk_neg(Qv)), TVK_OK);
  assert_int_equal(tvk_assign(Q, tvk_neg(Pv)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  assert_int_equal(kernels_for(P), 2); /* the copy of P, then the assign */
  read_f32(P, out);
  for (int i = 0; i < 4; i++) want[i] = -b0[i];
  check_close("swap: P", out, want, 4, 0);
  read_f32(Q, out);
  for (int i = 0; i < 4; i++) want[i] = -a0[i];
  check_close("swap: Q", out, want, 4, 0);

  tvk_tensor *R = tvk_from_data(ctx, TVK_FLOAT32, 1, s4, a0),
             *S = tvk_from_data(ctx, TVK_FLOAT32, 1, s4, b0);
  tvk_tensor *Rv = tvk_reshape(R, 1, s4), *Sv = tvk_reshape(S, 1, s4);
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(R, tvk_neg(Sv)), TVK_OK);
  assert_int_equal(tvk_assign(S, tvk_neg(Rv)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  tvk_tensor *both[2] = {R, S};
  assert_int_equal(tvk_realize(2, both), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_ctx_error(ctx), "cycle"));
  close_ctx_clean(ctx);
}

/* Assigns in one realize share a kernel where no invocation can read an
 * element another has overwritten (group.c): independent assigns of one
 * shape, and an assign reading another's new value at its own element (an
 * optimiser: the state, then the parameter from it). Reads of a target
 * through a flip keep the kernels apart, and every result is the loops'. */
static void test_assign_groups(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { N = 6 };
  const int64_t sh[2] = {2, 3};
  float p0[N], b0[N], x0[N], out[N];
  double want[N], wantb[N];
  tvk_tensor *P = rand_tensor(ctx, 2, sh, p0), *B = rand_tensor(ctx, 2, sh, b0),
             *X = rand_tensor(ctx, 2, sh, x0);
  const int ax[2] = {0, 1};

  /* siblings: P = P + X, B = B * X -> one kernel (the values are released,
   * so no copy of the old P and B is needed) */
  size_t sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(P, tvk_add(P, X)), TVK_OK);
  assert_int_equal(tvk_assign(B, tvk_mul(B, X)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  tvk_tensor *both[2] = {P, B};
  assert_int_equal(realize_count(ctx, 2, both), 1);
  for (int i = 0; i < N; i++) want[i] = (double)p0[i] + x0[i], wantb[i] = (double)b0[i] * x0[i];
  read_f32(P, out);
  check_close("siblings: P", out, want, N, 1e-6);
  read_f32(B, out);
  check_close("siblings: B", out, wantb, N, 1e-6);
  for (int i = 0; i < N; i++) p0[i] = (float)want[i], b0[i] = (float)wantb[i];

  /* a chain: B = 0.5 B + X, then P = P - 2 B (the new B) -> one kernel */
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(B, tvk_add(tvk_mul(B, tvk_scalar(ctx, TVK_FLOAT32, 0.5)), X)),
                   TVK_OK);
  assert_int_equal(tvk_assign(P, tvk_sub(P, tvk_mul(B, tvk_scalar(ctx, TVK_FLOAT32, 2)))), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  assert_int_equal(kernels_for(P), 1);
  for (int i = 0; i < N; i++) {
    wantb[i] = (double)(0.5f * b0[i]) + x0[i];
    want[i] = p0[i] - 2 * (double)(float)wantb[i];
  }
  read_f32(P, out);
  check_close("chain: P", out, want, N, 1e-6);
  read_f32(B, out);
  check_close("chain: B", out, wantb, N, 1e-6);
  for (int i = 0; i < N; i++) p0[i] = (float)want[i], b0[i] = (float)wantb[i];

  /* P = P + flip(B) reads B where another invocation writes it: two kernels */
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(P, tvk_add(P, tvk_flip(B, 2, ax))), TVK_OK);
  assert_int_equal(tvk_assign(B, tvk_mul(B, X)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  assert_int_equal(realize_count(ctx, 2, both), 2);
  for (int i = 0; i < N; i++)
    want[i] = (double)p0[i] + b0[N - 1 - i], wantb[i] = (double)b0[i] * x0[i];
  read_f32(P, out);
  check_close("flipped sibling: P", out, want, N, 1e-6);
  read_f32(B, out);
  check_close("flipped sibling: B", out, wantb, N, 1e-6);
  for (int i = 0; i < N; i++) p0[i] = (float)want[i], b0[i] = (float)wantb[i];

  /* P = P + flip(new B): not at its own element, so B's kernel runs first */
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(B, tvk_add(B, X)), TVK_OK);
  assert_int_equal(tvk_assign(P, tvk_add(P, tvk_flip(B, 2, ax))), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  assert_int_equal(kernels_for(P), 2);
  for (int i = 0; i < N; i++) wantb[i] = (double)b0[i] + x0[i];
  for (int i = 0; i < N; i++) want[i] = (double)p0[i] + (double)(float)wantb[N - 1 - i];
  read_f32(P, out);
  check_close("flipped chain: P", out, want, N, 1e-6);
  read_f32(B, out);
  check_close("flipped chain: B", out, wantb, N, 1e-6);
  for (int i = 0; i < N; i++) p0[i] = (float)want[i], b0[i] = (float)wantb[i];

  /* a live tensor reads the old P, none the old B: only P is copied (one
   * new buffer of N floats), and L keeps P's old value */
  tvk_tensor *L = tvk_mul(P, X);
  sc = tvk_scope_begin(ctx);
  assert_int_equal(tvk_assign(P, tvk_add(P, X)), TVK_OK);
  assert_int_equal(tvk_assign(B, tvk_mul(B, X)), TVK_OK);
  tvk_scope_end(ctx, sc, 0, NULL);
  tvk_stats st0, st1;
  tvk_stats_reset(ctx);
  tvk_stats_get(ctx, &st0);
  assert_int_equal(realize_count(ctx, 2, both), 2); /* the copy, the assigns */
  tvk_stats_get(ctx, &st1);
  assert_int_equal(st1.bytes_peak - st0.bytes_now, N * sizeof(float));
  read_f32(L, out);
  for (int i = 0; i < N; i++) want[i] = (double)p0[i] * x0[i];
  check_close("old value: L", out, want, N, 1e-6);
  close_ctx_clean(ctx);
}

/* The contiguous child of a reduce (a transpose of it made contiguous, or read
 * back with tvk_to_host) is computed by one kernel storing the reduce through
 * the inverse view, not the reduce and then a copy; a reduce something else
 * also reads is still stored and copied. */
static void test_contiguous_child_of_reduce(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  int64_t sh[3] = {3, 4, 5};
  float x[60], out[12];
  double want[12];
  tvk_tensor *X = rand_tensor(ctx, 3, sh, x);
  int ax = 2;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) {
      want[j * 3 + i] = 0;
      for (int k = 0; k < 5; k++) want[j * 3 + i] += x[(i * 4 + j) * 5 + k];
    }
  tvk_tensor *r = tvk_sum(X, 1, &ax, true);                               /* (3, 4, 1) */
  tvk_tensor *t = tvk_contiguous(tvk_permute(r, (const int[]){2, 1, 0})); /* (1, 4, 3) */
  assert_int_equal(kernels_for(t), 1);
  read_f32(t, out);
  check_close("contiguous(permute(sum))", out, want, 12, 1e-5);
  tvk_tensor *r2 = tvk_sum(X, 1, &ax, false); /* (3, 4) */
  assert_int_equal(read_count(tvk_transpose(r2, 0, 1), out), 1);
  check_close("to_host(transpose(sum))", out, want, 12, 1e-5);
  tvk_tensor *r3 = tvk_sum(X, 1, &ax, false);
  tvk_tensor *both[2] = {tvk_contiguous(tvk_transpose(r3, 0, 1)), tvk_neg(r3)};
  /* the reduce has two readers: it is stored, then copied and negated */
  assert_int_equal(realize_count(ctx, 2, both), 3);
  read_f32(both[0], out);
  check_close("shared reduce, transposed", out, want, 12, 1e-5);
  close_ctx_clean(ctx);
}

/* Many outputs of one shape realized together are grouped into kernels that
 * each bind at most what a kernel AST can (256 buffers): 300 outputs need two.
 * A chain of 300 layers is scheduled too (it used to take seconds: grouping
 * compared every pair of kernels). */
static void test_wide_and_deep(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { W = 300 };
  int64_t sh[2] = {4, 6};
  float x[24], out[4];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x), *o[W];
  int ax = 1;
  for (int i = 0; i < W; i++)
    o[i] = tvk_sum(tvk_mul(X, tvk_scalar(ctx, TVK_FLOAT32, i)), 1, &ax, true);
  assert_int_equal(realize_count(ctx, W, o), 2);
  for (int i = 0; i < W; i += 37) {
    double want[4];
    read_f32(o[i], out);
    for (int r = 0; r < 4; r++) {
      want[r] = 0;
      for (int c = 0; c < 6; c++) want[r] += (double)x[r * 6 + c] * i;
    }
    check_close("wide output", out, want, 4, 1e-5);
  }
  for (int i = 0; i < W; i++) tvk_release(o[i]);

  int64_t sw[2] = {6, 6};
  float w[36], h_out[24];
  tvk_tensor *Wt = rand_tensor(ctx, 2, sw, w), *h = X;
  size_t sc = tvk_scope_begin(ctx);
  for (int l = 0; l < W; l++) h = tvk_tanh(tvk_matmul(h, Wt));
  tvk_scope_end(ctx, sc, 1, &h);
  assert_int_equal(kernels_for(h), W);
  read_f32(h, h_out);
  double ref[24], nxt[24];
  for (int i = 0; i < 24; i++) ref[i] = x[i];
  for (int l = 0; l < W; l++) {
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 6; c++) {
        double t = 0;
        for (int k = 0; k < 6; k++) t += ref[r * 6 + k] * w[k * 6 + c];
        nxt[r * 6 + c] = tanh(t);
      }
    memcpy(ref, nxt, sizeof ref);
  }
  check_close("300 layers", h_out, ref, 24, 1e-4);
  close_ctx_clean(ctx);
}

/* ---------------------------------------------------------------- the kernel store */

/* The key is the AST's structure: the same kernel built in two contexts (other
 * addresses) has one key; another constant, dtype, view or option, another. */
static void test_kernel_store_key(void **state) {
  (void)state;
  CodegenOpts o = {.mode = CG_MODE_CORES};
  char keys[6][KSTORE_KEY_LEN + 1];
  UCtx *c[2] = {uctx_new(), uctx_new()};
  for (int k = 0; k < 5; k++) {
    UCtx *u = c[k == 1];
    size_t m = uop_pool_mark(u);
    int64_t cols = k == 3 ? 6 : 5;
    UOp *x = ld(u, 1, DT_FLOAT32, shp(2, (int64_t)4, cols));
    UOp *y = uop_mul(x, uop_const_float(u, DT(FLOAT32), k == 2 ? 3.0 : 2.0));
    UOp *ast = sink1(store(u, 0, DT_FLOAT32, shp(2, (int64_t)4, cols), y));
    CodegenOpts ok = o;
    if (k == 4) ok.vector_floats = 4;
    assert_true(kstore_key(ast, &ok, "CPU (test)", 0, keys[k]));
    if (k == 0) assert_true(kstore_key(ast, &o, "CPU (other)", 0, keys[5]));
    uop_pool_drain(u, m);
  }
  assert_string_equal(keys[0], keys[1]);
  for (int k = 2; k < 6; k++) assert_string_not_equal(keys[0], keys[k]);
  uctx_free(c[0]);
  uctx_free(c[1]);
}

/* A new context on the same cache reads the kernels it generated before
 * (none is generated again, results as before); a damaged record is
 * generated again and rewritten; a read-only cache is read and not written. */
static void test_kernel_store_across_contexts(void **state) {
  (void)state;
  char dir[256], kernels[300];
  assert_true(temp_dir(dir, sizeof dir, "kstore"));
  snprintf(kernels, sizeof kernels, "%s/kernels", dir);
  int64_t sh[2] = {3, 9};
  float a[27], b[27], out[27];
  for (int round = 0; round < 4; round++) {
    tvk_ctx_options opt = {.device = "CPU", .cache_dir = dir, .cache_readonly = round == 3};
    tvk_ctx *ctx = NULL;
    assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
    tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
    read_f32(tvk_sub(tvk_mul(A, B), A), out);
    for (int i = 0; i < 27; i++) {
      double w = (double)a[i] * b[i] - a[i];
      check_close("a*b-a", &out[i], &w, 1, 1e-6);
    }
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    /* 0: generated and stored; 1: read; 2: its record damaged, generated
     * again; 3: read from the repaired record, read-only */
    assert_int_equal(st.kernels_generated, round == 0 || round == 2);
    assert_int_equal(st.kernels_stored, round == 1 || round == 3);
    assert_int_equal(tvk_ctx_wait_compiles(ctx), TVK_OK);
    close_ctx_clean(ctx);
    assert_int_equal(count_files(kernels, ".kernel"), 1);
    if (round == 1) { /* cut the record short */
      DIR *dd = opendir(kernels);
      struct dirent *e;
      while ((e = readdir(dd)))
        if (strstr(e->d_name, ".kernel")) {
          char path[600];
          snprintf(path, sizeof path, "%s/%s", kernels, e->d_name);
          assert_int_equal(truncate(path, 20), 0);
        }
      closedir(dd);
    }
  }
  /* no disk cache: no store either */
  tvk_ctx_options opt = {.device = "CPU", .cache_dir = dir, .no_disk_cache = 1};
  tvk_ctx *ctx = NULL;
  assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
  read_f32(tvk_sub(tvk_mul(rand_tensor(ctx, 2, sh, a), rand_tensor(ctx, 2, sh, b)),
                   rand_tensor(ctx, 2, sh, a)),
           out);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.kernels_stored, 0);
  close_ctx_clean(ctx);
  rm_rf(dir);
}

/* ---------------------------------------------------------------- compiles all at once */

/* One schedule of several kernels compiles them together (run.c's
 * get_programs), each result right. With no way to build (no compiler, the
 * system compiler's tier only), the error names the first kernel in
 * schedule order, and nothing ran. */
static void test_schedule_compiles_at_once(void **state) {
  (void)state;
  char dir[256];
  assert_true(temp_dir(dir, sizeof dir, "batch"));
  int64_t sh[1] = {300}, sh2[2] = {20, 15};
  float a[300], b[300], c[300], out[300];
  tvk_ctx_options opt = {.device = "CPU", .cache_dir = dir, .cpu_tiers = TVK_CPU_TIERS_OPTIMISED};
  tvk_ctx *ctx = NULL;
  assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
  tvk_tensor *A = rand_tensor(ctx, 1, sh, a), *B = rand_tensor(ctx, 1, sh, b),
             *C = rand_tensor(ctx, 2, sh2, c);
  int ax = 0;
  /* the two sums are one kernel (siblings), the product and exp one each */
  tvk_tensor *ys[4] = {tvk_sum(A, 1, &ax, false), tvk_sum(B, 1, &ax, false), tvk_mul(A, B),
                       tvk_exp(C)};
  tvk_stats_reset(ctx);
  assert_int_equal(tvk_realize(4, ys), TVK_OK);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.kernels_run, 3);
  assert_int_equal(st.kernels_compiled, 3);
  assert_int_equal(st.cache_hits, 0);
  for (int k = 0; k < 2; k++) {
    double w = 0;
    for (int i = 0; i < 300; i++) w += k ? b[i] : a[i];
    read_f32(ys[k], out);
    check_close("sum", out, &w, 1, 1e-5);
  }
  for (int k = 2; k < 4; k++) {
    read_f32(ys[k], out);
    for (int i = 0; i < 300; i++) {
      double w = k == 2 ? (double)a[i] * b[i] : exp((double)c[i]);
      check_close(k == 2 ? "a*b" : "exp", &out[i], &w, 1, 1e-6);
    }
  }
  close_ctx_clean(ctx);
  rm_rf(dir);

  assert_true(temp_dir(dir, sizeof dir, "batch-fail"));
  opt = (tvk_ctx_options){.device = "CPU",
                          .cache_dir = dir,
                          .cc = "/nonexistent/cc",
                          .cpu_tiers = TVK_CPU_TIERS_OPTIMISED};
  assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
  A = rand_tensor(ctx, 1, sh, a), B = rand_tensor(ctx, 1, sh, b);
  C = rand_tensor(ctx, 2, sh2, c);
  tvk_tensor *zs[2] = {tvk_sub(A, B), tvk_exp(C)};
  tvk_stats_reset(ctx);
  assert_int_equal(tvk_realize(2, zs), TVK_ERR_DEVICE);
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.kernels_run, 0);
  const char *msg = tvk_ctx_error(ctx);
  if (!strstr(msg, "not in the kernel cache") || !strstr(msg, "/nonexistent/cc"))
    fail_msg("unexpected message: %s", msg);
  /* the first kernel of the schedule is named: the one computing zs[0] */
  char first[64];
  if (sscanf(msg, "kernel %63s", first) != 1) fail_msg("no kernel named: %s", msg);
  tvk_ctx_clear_error(ctx);
  tvk_tensor *only = tvk_sub(A, B);
  assert_int_equal(tvk_realize(1, &only), TVK_ERR_DEVICE);
  char alone[64];
  assert_int_equal(sscanf(tvk_ctx_error(ctx), "kernel %63s", alone), 1);
  assert_string_equal(first, alone);
  close_ctx_clean(ctx);
  rm_rf(dir);
}

/* Compile progress (tvk_ctx_options.progress): a batch of 16 kernels is
 * reported as it goes and when done, through the log callback at INFO; with
 * progress off nothing is said. */
static void test_compile_progress(void **state) {
  (void)state;
  enum { K = 16 };
  for (int on = 0; on < 2; on++) {
    char dir[256];
    assert_true(temp_dir(dir, sizeof dir, "progress"));
    LogSeen seen = {0};
    tvk_ctx_options opt = {
        .device = "CPU", .cache_dir = dir, .progress = on, .log = collect, .log_user = &seen};
    tvk_ctx *ctx = NULL;
    assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
    tvk_tensor *ys[K];
    float host[K + 1];
    for (int k = 0; k < K; k++) { /* other lengths: other kernels, none fused */
      int64_t sh[1] = {k + 1};
      ys[k] = tvk_exp(rand_tensor(ctx, 1, sh, host));
    }
    tvk_stats_reset(ctx);
    assert_int_equal(tvk_realize(K, ys), TVK_OK);
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.kernels_run, K);
    if (on) {
      assert_true(seen.info >= 2);
      if (strncmp(seen.last, "tvk: compiled 16 kernels in ", 28) != 0)
        fail_msg("the last message: %s", seen.last);
    } else {
      assert_int_equal(seen.calls, 0);
    }
    assert_int_equal(tvk_ctx_wait_compiles(ctx), TVK_OK);
    close_ctx_clean(ctx);
    rm_rf(dir);
  }
}

/* tvk_profile_summary: with profile on, every launch is in it (its header
 * counts kernels_run, each row's calls add up), the rows by total time; a
 * reset empties it; with profile off it is empty. On the CPU, and on Vulkan
 * when there is a device (timestamps). */
static void test_profile_summary(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    const char *dev = k == 2 ? "VK" : "CPU";
    tvk_ctx_options opt = {.device = dev, .cache_dir = g_dir, .profile = k != 1};
    tvk_ctx *ctx = NULL;
    if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
      if (k == 2 && !vk_required()) continue;
      fail_msg("%s: %s", dev, tvk_last_create_error());
    }
    int64_t sh[2] = {16, 33};
    float a[16 * 33], b[16 * 33], out[16 * 33];
    int ax = 1;
    for (int rep = 0; rep < 3; rep++) {
      tvk_tensor *A = rand_tensor(ctx, 2, sh, a), *B = rand_tensor(ctx, 2, sh, b);
      read_f32(tvk_sum(tvk_mul(A, B), 1, &ax, false), out);
      read_f32(tvk_add(A, B), out);
    }
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    const char *text = tvk_profile_summary(ctx);
    if (k == 1) {
      assert_string_equal(text, "");
    } else {
      unsigned kernels = 0;
      unsigned long long launches = 0, rows = 0;
      double total = -1;
      if (sscanf(text, "tvk profile: %u kernel%*[s], %llu launch%*[es], %lf ms", &kernels,
                 &launches, &total) != 3)
        fail_msg("%s: header: %s", dev, text);
      assert_int_equal(launches, st.kernels_run);
      assert_true(kernels >= 2 && total > 0);
      const char *line = strchr(strchr(text, '\n') + 1, '\n') + 1; /* past the column names */
      double prev = 1e300;
      for (unsigned r = 0; r < kernels; r++) {
        char name[64];
        unsigned long long calls;
        double tot, mean, gflops, gbytes, share;
        if (sscanf(line, " %63s %llu %lf %lf %lf %lf %lf%%", name, &calls, &tot, &mean, &gflops,
                   &gbytes, &share) != 7)
          fail_msg("%s: row %u: %s", dev, r, line);
        assert_true(gflops >= 0 && gbytes >= 0);
        assert_true(tot <= prev + 1e-9); /* the largest first */
        prev = tot;
        rows += calls;
        line = strchr(line, '\n') + 1;
      }
      assert_int_equal(rows, launches);
      const tvk_profile_entry *pe;
      int np = tvk_profile_entries(ctx, &pe);
      assert_int_equal(np, kernels);
      for (int i = 0; i < np; i++) /* every kernel moves bytes; the rate is what it says */
        assert_true(pe[i].bytes > 0 && pe[i].total_ms > 0 &&
                    fabs(pe[i].gbytes * pe[i].total_ms * 1e6 - pe[i].bytes * (double)pe[i].calls) <=
                        1e-9 * pe[i].bytes * (double)pe[i].calls);
      tvk_profile_reset(ctx);
      assert_int_equal(tvk_profile_entries(ctx, &pe), 0);
      assert_string_equal(tvk_profile_summary(ctx), "");
    }
    tvk_ctx_destroy(ctx);
  }
}

/* tvk_scalar of float32 is a launch value (a VALUE: the kernel's float32
 * DEFINE_VAR), so new values compile nothing: 100 values of s in x * s - s
 * generate and compile one kernel, and each result is the float32 formula.
 * Under a pad the value reads 0 outside (the view's mask), two scalars equal
 * at first stay two values, more than SCHED_MAX_VALUES in one kernel fold the
 * rest into its source, a scalar alone reads back, and other dtypes stay
 * constants. On the CPU and on Vulkan. */
static void test_scalar_values(void **state) {
  (void)state;
  enum { N = 37, STEPS = 100, MANY = SCHED_MAX_VALUES + 5 };
  for (int k = 0; k < 2; k++) {
    const char *dev = k ? "VK" : "CPU";
    tvk_ctx_options opt = {.device = dev, .no_disk_cache = 1};
    tvk_ctx *ctx = NULL;
    if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
      if (k == 1 && !vk_required()) continue;
      fail_msg("%s: %s", dev, tvk_last_create_error());
    }
    float x[N], y[N + 3];
    tvk_tensor *X = rand_tensor(ctx, 1, (int64_t[]){N}, x);
    for (int i = 0; i < STEPS; i++) {
      float sv = 0.37f + 0.25f * (float)i;
      size_t mark = tvk_scope_begin(ctx);
      tvk_tensor *r = tvk_pad(
          tvk_sub(tvk_mul(X, tvk_scalar(ctx, TVK_FLOAT32, sv)), tvk_scalar(ctx, TVK_FLOAT32, sv)),
          (const int64_t[][2]){{1, 2}}, 0.0);
      read_f32(r, y);
      tvk_scope_end(ctx, mark, 0, NULL);
      for (int j = 0; j < N + 3; j++) {
        float want = j < 1 || j > N ? 0.0f : x[j - 1] * sv - sv;
        if (y[j] != want) fail_msg("%s: step %d, y[%d] = %.9g, want %.9g", dev, i, j, y[j], want);
      }
    }
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.kernels_generated, 1);
    assert_int_equal(st.kernels_compiled, 1);
    assert_int_equal(st.kernels_run, STEPS);
    /* equal values, then different ones: two values from the start */
    for (int i = 0; i < 2; i++) {
      tvk_tensor *a = tvk_scalar(ctx, TVK_FLOAT32, 2.5),
                 *b = tvk_scalar(ctx, TVK_FLOAT32, i ? -7 : 2.5);
      read_f32(tvk_add(tvk_mul(X, a), b), y);
      for (int j = 0; j < N; j++) assert_true(y[j] == x[j] * 2.5f + (i ? -7.0f : 2.5f));
      tvk_release(a), tvk_release(b);
    }
    /* more values than one kernel takes at launch: the rest are its constants */
    tvk_tensor *acc = X;
    double want[N];
    for (int j = 0; j < N; j++) want[j] = x[j];
    for (int m = 0; m < MANY; m++) {
      acc = tvk_add(acc, tvk_mul(X, tvk_scalar(ctx, TVK_FLOAT32, 0.125 * (m + 1))));
      for (int j = 0; j < N; j++) want[j] += (double)x[j] * 0.125 * (m + 1);
    }
    read_f32(acc, y);
    for (int j = 0; j < N; j++) assert_true(fabs(y[j] - want[j]) <= 1e-5 * (fabs(want[j]) + 1));
    /* a value alone; a float64 scalar is a constant */
    float one;
    read_f32(tvk_scalar(ctx, TVK_FLOAT32, 3.25), &one);
    assert_true(one == 3.25f);
    tvk_tensor *d = tvk_scalar(ctx, TVK_FLOAT64, 1.5);
    assert_int_equal((d->uop->op == OP_VIEW ? d->uop->src[0] : d->uop)->op, OP_CONST);
    close_ctx_clean(ctx);
  }
}

/* Schedules kept by graph structure (schedule_cache.c): the same computation
 * on new buffers and new scalar values reuses its schedule, with every result
 * that of its own inputs; a graph of another structure (a shape, an op, one
 * buffer read twice instead of two) is scheduled anew; an assign loop reuses
 * its step; more than SCHED_CACHE_ENTRIES structures cycle through the cache
 * with right answers; a kernel whose scalars did not all fit in its launch
 * values (so its source holds them) is never reused with other values. */
static void test_schedule_reuse(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { N = 24, MANY = SCHED_MAX_VALUES + 3 };
  float a[N], b[N], out[N];
  tvk_stats st;
  uint64_t reused = 0;
  for (int rep = 0; rep < 3; rep++) { /* the same structure: new buffers, new value */
    tvk_tensor *A = rand_tensor(ctx, 1, (int64_t[]){N}, a),
               *B = rand_tensor(ctx, 1, (int64_t[]){N}, b);
    float s = 0.5f + (float)rep;
    read_f32(tvk_add(tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, s)), tvk_exp(B)), out);
    for (int i = 0; i < N; i++)
      assert_true(fabs(out[i] - (a[i] * s + exp(b[i]))) <= 1e-5 * (1 + fabs(out[i])));
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.schedules_reused, reused + (rep > 0));
    reused = st.schedules_reused;
    tvk_release(A), tvk_release(B);
  }
  { /* one buffer read twice is another structure than two buffers */
    tvk_tensor *A = rand_tensor(ctx, 1, (int64_t[]){N}, a);
    read_f32(tvk_add(tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, 2)), tvk_exp(A)), out);
    for (int i = 0; i < N; i++)
      assert_true(fabs(out[i] - (a[i] * 2 + exp(a[i]))) <= 1e-5 * (1 + fabs(out[i])));
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.schedules_reused, reused);
    /* nor is another size */
    tvk_tensor *C = rand_tensor(ctx, 1, (int64_t[]){N - 1}, b);
    read_f32(tvk_add(tvk_mul(C, tvk_scalar(ctx, TVK_FLOAT32, 2)), tvk_exp(C)), out);
    for (int i = 0; i < N - 1; i++)
      assert_true(fabs(out[i] - (b[i] * 2 + exp(b[i]))) <= 1e-5 * (1 + fabs(out[i])));
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.schedules_reused, reused);
    tvk_release(A), tvk_release(C);
  }
  { /* an assign loop: w -= lr * w, its step reused from the second on */
    float w0[N], w[N];
    tvk_tensor *W = rand_tensor(ctx, 1, (int64_t[]){N}, w0);
    double want[N];
    for (int i = 0; i < N; i++) want[i] = w0[i];
    tvk_stats_get(ctx, &st);
    uint64_t before = st.schedules_reused;
    for (int step = 0; step < 5; step++) {
      float lr = 0.1f * (float)(step + 1);
      assert_int_equal(tvk_assign(W, tvk_sub(W, tvk_mul(W, tvk_scalar(ctx, TVK_FLOAT32, lr)))),
                       TVK_OK);
      assert_int_equal(tvk_realize(1, &W), TVK_OK);
      for (int i = 0; i < N; i++) want[i] = (float)(want[i] - (float)(want[i] * lr));
    }
    read_f32(W, w);
    for (int i = 0; i < N; i++) assert_true(fabs(w[i] - want[i]) <= 1e-6 * (1 + fabs(want[i])));
    tvk_stats_get(ctx, &st);
    assert_true(st.schedules_reused >= before + 4);
    tvk_release(W);
  }
  /* more structures than the cache keeps, twice round: every answer right */
  for (int round = 0; round < 2; round++)
    for (int n = 1; n <= SCHED_CACHE_ENTRIES + 8; n++) {
      float big[SCHED_CACHE_ENTRIES + 8];
      tvk_tensor *A = rand_tensor(ctx, 1, (int64_t[]){n}, big);
      float s;
      read_f32(tvk_sum(tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, 3)), 0, NULL, false), &s);
      double want = 0;
      for (int i = 0; i < n; i++) want += 3.0 * big[i];
      assert_true(fabs(s - want) <= 1e-5 * (1 + fabs(want)));
      tvk_release(A);
    }
  /* too many scalars for one kernel: its source holds some, so it is not kept */
  tvk_stats_get(ctx, &st);
  reused = st.schedules_reused;
  tvk_tensor *A = rand_tensor(ctx, 1, (int64_t[]){N}, a);
  for (int rep = 0; rep < 2; rep++) {
    tvk_tensor *acc = A;
    double want[N] = {0};
    for (int i = 0; i < N; i++) want[i] = a[i];
    for (int m = 0; m < MANY; m++) {
      double v = 0.25 * (m + 1) + rep;
      acc = tvk_add(acc, tvk_mul(A, tvk_scalar(ctx, TVK_FLOAT32, v)));
      for (int i = 0; i < N; i++) want[i] += (double)a[i] * v;
    }
    read_f32(acc, out);
    for (int i = 0; i < N; i++) assert_true(fabs(out[i] - want[i]) <= 1e-5 * (fabs(want[i]) + 1));
  }
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.schedules_reused, reused);
  close_ctx_clean(ctx);
}

/* tvk_jit: the function runs twice (the second call captured), then its
 * launches replay on new inputs: 50 calls of relu(x @ w + b) * 2 with new x
 * each give the reference's answers and compile nothing after the second;
 * new input shapes capture again; a replayed assign updates its target every
 * call; an output that is an input runs the function every call; bad calls
 * are errors; a jit left alive is freed with its context. */
typedef struct {
  tvk_tensor *w, *b, *acc;
} JitModel;

static tvk_status jit_dense(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                            tvk_tensor **out) {
  JitModel *m = user;
  (void)nin, (void)nout;
  out[0] =
      tvk_mul(tvk_relu(tvk_add(tvk_matmul(in[0], m->w), m->b)), tvk_scalar(ctx, TVK_FLOAT32, 2));
  return TVK_OK;
}

static tvk_status jit_accumulate(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                                 tvk_tensor **out) {
  JitModel *m = user;
  (void)ctx, (void)nin, (void)nout;
  tvk_status st =
      tvk_assign(m->acc, tvk_add(tvk_mul(m->acc, tvk_full(ctx, TVK_FLOAT32, 0, NULL, 0.5)), in[0]));
  out[0] = tvk_sum(m->acc, 0, NULL, false);
  return st;
}

static tvk_status jit_identity(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                               tvk_tensor **out) {
  (void)user, (void)ctx, (void)nin, (void)nout;
  out[0] = in[0];
  return TVK_OK;
}

static tvk_status jit_softmax(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                              tvk_tensor **out) {
  (void)user, (void)ctx, (void)nin, (void)nout;
  out[0] = tvk_softmax(in[0], 1);
  return TVK_OK;
}

/* A replayed softmax over rows past a core's cache runs its kernels as one
 * chain (runtime/chain.c) as the capture did, with the same bits as a
 * plain realize; an output of the last replay passed back as the input
 * (memory the chain writes) runs the kernels one by one, and is right too. */
static void test_jit_chain(void **state) {
  (void)state;
  tvk_ctx *ctx = open_ctx();
  enum { R = 1024, C = 4096, CALLS = 5 };
  const int64_t sh[2] = {R, C};
  size_t n = (size_t)R * C;
  float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got),
        *want = malloc(n * sizeof *want);
  assert_true(x && got && want);
  tvk_jit *jit = tvk_jit_create(ctx, jit_softmax, NULL);
  tvk_tensor *prev = NULL;
  for (int call = 0; call < CALLS + 1; call++) {
    bool back = call == CALLS; /* the last call: the previous output as the input */
    tvk_tensor *X = back ? prev : rand_tensor(ctx, 2, sh, x), *Y = NULL;
    if (back) read_f32(prev, x);
    tvk_stats a, b;
    tvk_stats_get(ctx, &a);
    assert_int_equal(tvk_jit_run(jit, 1, &X, 1, &Y), TVK_OK);
    tvk_stats_get(ctx, &b);
    if (call >= 2) assert_int_equal(b.jit_replays - a.jit_replays, 1);
    assert_int_equal(b.chains_run - a.chains_run, back ? 0 : 1);
    read_f32(Y, got);
    tvk_tensor *copy = tvk_from_data(ctx, TVK_FLOAT32, 2, sh, x);
    read_f32(tvk_softmax(copy, 1), want);
    if (memcmp(got, want, n * sizeof *got) != 0) fail_msg("call %d: not softmax's bits", call);
    if (prev && prev != X) tvk_release(prev); /* the last output, not passed back */
    tvk_release(X);
    tvk_release(copy);
    prev = Y;
  }
  tvk_release(prev);
  tvk_jit_destroy(jit);
  free(x), free(got), free(want);
  close_ctx_clean(ctx);
}

static void test_jit(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    const char *dev = k ? "VK" : "CPU";
    tvk_ctx_options opt = {.device = dev, .cache_dir = g_dir};
    tvk_ctx *ctx = NULL;
    if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
      if (k == 1 && !vk_required()) continue;
      fail_msg("%s: %s", dev, tvk_last_create_error());
    }
    enum { B = 5, I = 7, O = 6, CALLS = 50 };
    float w[I * O], b[O], x[9 * I], y[9 * O];
    JitModel m = {rand_tensor(ctx, 2, (int64_t[]){I, O}, w), rand_tensor(ctx, 1, (int64_t[]){O}, b),
                  NULL};
    tvk_jit *jit = tvk_jit_create(ctx, jit_dense, &m);
    assert_non_null(jit);
    tvk_stats st;
    uint64_t compiled = 0;
    for (int call = 0; call < CALLS + 2; call++) {
      int rows = call < CALLS ? B : 9; /* the last two: new shapes, captured again */
      tvk_tensor *X = rand_tensor(ctx, 2, (int64_t[]){rows, I}, x), *Y = NULL;
      assert_int_equal(tvk_jit_run(jit, 1, &X, 1, &Y), TVK_OK);
      read_f32(Y, y);
      for (int r = 0; r < rows; r++)
        for (int o = 0; o < O; o++) {
          double v = b[o];
          for (int i = 0; i < I; i++) v += (double)x[r * I + i] * w[i * O + o];
          double want = v > 0 ? 2 * v : 0;
          if (fabs(y[r * O + o] - want) > 1e-5 * (1 + fabs(want)))
            fail_msg("%s: call %d, y[%d][%d] = %g, want %g", dev, call, r, o, y[r * O + o], want);
        }
      tvk_release(X), tvk_release(Y);
      tvk_stats_get(ctx, &st);
      if (call == 1) compiled = st.kernels_compiled + st.cache_hits;
      if (call >= 2 && call < CALLS)
        assert_int_equal(st.kernels_compiled + st.cache_hits,
                         compiled); /* replays look up nothing */
    }
    assert_int_equal(st.jit_captures, 2);
    assert_int_equal(st.jit_replays, CALLS - 2);
    /* a replayed assign: acc = acc / 2 + x, every call */
    float a0[4], xs[4], s;
    m.acc = rand_tensor(ctx, 1, (int64_t[]){4}, a0);
    tvk_jit *acc = tvk_jit_create(ctx, jit_accumulate, &m);
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = a0[i];
    for (int call = 0; call < 6; call++) {
      tvk_tensor *X = rand_tensor(ctx, 1, (int64_t[]){4}, xs), *S = NULL;
      assert_int_equal(tvk_jit_run(acc, 1, &X, 1, &S), TVK_OK);
      read_f32(S, &s);
      double sum = 0;
      for (int i = 0; i < 4; i++) sum += want[i] = (float)(want[i] * 0.5f) + xs[i];
      assert_true(fabs(s - sum) <= 1e-5 * (1 + fabs(sum)));
      tvk_release(X), tvk_release(S);
    }
    /* an output that is an input: the function runs every call */
    tvk_jit *id = tvk_jit_create(ctx, jit_identity, NULL);
    for (int call = 0; call < 4; call++) {
      tvk_tensor *X = rand_tensor(ctx, 1, (int64_t[]){4}, xs), *Y = NULL;
      assert_int_equal(tvk_jit_run(id, 1, &X, 1, &Y), TVK_OK);
      read_f32(Y, y);
      for (int i = 0; i < 4; i++) assert_true(y[i] == xs[i]);
      tvk_release(X), tvk_release(Y);
    }
    /* bad calls */
    tvk_tensor *X = rand_tensor(ctx, 1, (int64_t[]){4}, xs), *Y = NULL, *two[2] = {X, X};
    assert_int_equal(tvk_jit_run(id, 2, two, 1, &Y), TVK_ERR_INVALID_ARG);
    assert_non_null(strstr(tvk_ctx_error(ctx), "first call had 1"));
    assert_int_equal(tvk_jit_run(id, 1, &X, 0, &Y), TVK_ERR_INVALID_ARG);
    assert_int_equal(tvk_jit_run(NULL, 1, &X, 1, &Y), TVK_ERR_INVALID_ARG);
    assert_null(tvk_jit_create(ctx, NULL, NULL));
    tvk_jit_destroy(jit);
    tvk_jit_destroy(id);
    tvk_jit_destroy(NULL);
    tvk_ctx_destroy(ctx); /* acc is still alive: the context frees it (the ASan build checks) */
  }
}

/* tvk_jit on a device with graphs (Vulkan, under synchronization
 * validation): the launches are recorded once as a command buffer and
 * submitted as they are while the input is the same tensor, whose contents
 * tvk_assign changes between calls; a new input tensor each call records
 * again, also when the last one was released at once (the graph keeps it
 * alive while it binds it). Each result is checked against loops; on the CPU
 * nothing is recorded. */
enum { JG_LAYERS = 4, JG_B = 3, JG_W = 8 };
typedef struct {
  tvk_tensor *w[JG_LAYERS];
  float host[JG_LAYERS][JG_W * JG_W];
} JitChain;

static tvk_status jit_chain(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                            tvk_tensor **out) {
  JitChain *m = user;
  (void)ctx, (void)nin, (void)nout;
  tvk_tensor *h = in[0];
  for (int l = 0; l < JG_LAYERS; l++) h = tvk_tanh(tvk_matmul(h, m->w[l]));
  out[0] = h;
  return TVK_OK;
}

static void jit_chain_check(const char *dev, int call, const JitChain *m, const float *x,
                            const float *y) {
  double h[JG_B * JG_W], t[JG_B * JG_W];
  for (int i = 0; i < JG_B * JG_W; i++) h[i] = x[i];
  for (int l = 0; l < JG_LAYERS; l++) {
    for (int r = 0; r < JG_B; r++)
      for (int o = 0; o < JG_W; o++) {
        double v = 0;
        for (int i = 0; i < JG_W; i++) v += h[r * JG_W + i] * m->host[l][i * JG_W + o];
        t[r * JG_W + o] = tanh(v);
      }
    memcpy(h, t, sizeof h);
  }
  for (int i = 0; i < JG_B * JG_W; i++)
    if (fabs(y[i] - h[i]) > 1e-5)
      fail_msg("%s: call %d, y[%d] = %g, want %g", dev, call, i, y[i], h[i]);
}

static void test_jit_graph(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    const char *dev = k ? "VK" : "CPU";
    tvk_ctx_options opt = {.device = dev, .cache_dir = g_dir, .validate = 2};
    tvk_ctx *ctx = NULL;
    if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
      if (k == 1 && !vk_required()) continue;
      fail_msg("%s: %s", dev, tvk_last_create_error());
    }
    JitChain m;
    for (int l = 0; l < JG_LAYERS; l++)
      m.w[l] = rand_tensor(ctx, 2, (int64_t[]){JG_W, JG_W}, m.host[l]);
    tvk_jit *jit = tvk_jit_create(ctx, jit_chain, &m);
    int64_t shape[2] = {JG_B, JG_W};
    float x[JG_B * JG_W], y[JG_B * JG_W];
    tvk_tensor *X = rand_tensor(ctx, 2, shape, x);
    tvk_stats st;
    enum { SAME = 20, FRESH = 4 };
    for (int call = 0; call < SAME + FRESH; call++) {
      tvk_tensor *in = X;
      if (call >= SAME) { /* a new tensor each call */
        in = rand_tensor(ctx, 2, shape, x);
      } else if (call > 0) { /* new contents, same buffer */
        tvk_tensor *v = rand_tensor(ctx, 2, shape, x);
        assert_int_equal(tvk_assign(X, v), TVK_OK);
        assert_int_equal(tvk_realize(1, &X), TVK_OK);
        tvk_release(v);
      }
      tvk_tensor *Y = NULL;
      assert_int_equal(tvk_jit_run(jit, 1, &in, 1, &Y), TVK_OK);
      if (in != X) tvk_release(in); /* before the result is read: the graph keeps it */
      read_f32(Y, y);
      jit_chain_check(dev, call, &m, x, y);
      tvk_release(Y);
    }
    tvk_stats_get(ctx, &st);
    assert_int_equal(st.jit_captures, 1);
    assert_int_equal(st.jit_replays, SAME + FRESH - 2);
    /* recorded at the first replay, then once per new input tensor */
    assert_int_equal(st.jit_graphs_recorded, k ? 1 + FRESH : 0);
    assert_int_equal(st.validation_messages, 0);
    tvk_release(X);
    if (k == 0) tvk_jit_destroy(jit); /* on Vulkan the context frees it, and its graph */
    tvk_ctx_destroy(ctx);
  }
}

/* A whole file as a string; NULL if it cannot be read. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *s = malloc(cap);
  for (size_t got; s && (got = fread(s + len, 1, cap - len, f)) > 0;) {
    len += got;
    char *g = len == cap ? realloc(s, cap *= 2) : s;
    if (!g) free(s);
    s = g;
  }
  fclose(f);
  *n = len;
  return s;
}

/* A span of a trace, as the test reads it. */
typedef struct {
  const char *cat, *name;
  double ts, dur, tid, flops, bytes;
} Span;

static int by_ts(const void *a, const void *b) {
  const Span *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

/* TVK_TRACE (tvk_ctx_options.trace): the file is JSON (parsed strictly
 * here), in the trace-event form viewers load, and its spans agree with
 * tvk_stats: one kernel span per launch, one codegen span per kernel
 * generated, one compile span per kernel compiled, a realize and a wait
 * span per schedule. Each kernel's span lies inside the realize that ran it
 * (the device's clock mapped onto the host's), and its FLOPs and bytes are
 * the closed forms of the computation: 2n and 4n + 4 for sum(x * x) over n
 * floats, 2mkn and 4(mk + kn + mn) for an (m, k) @ (k, n) matmul. */
static void test_trace_file(void **state) {
  (void)state;
  char dir[256], path[320];
  assert_true(temp_dir(dir, sizeof dir, "trace"));
  snprintf(path, sizeof path, "%s/trace.json", dir);
  enum { N = 4096, M = 8, K = 16, P = 12 };
  for (int k = 0; k < 2; k++) {
    const char *dev = k ? "VK" : "CPU";
    tvk_ctx_options opt = {.device = dev, .no_disk_cache = 1, .trace = path};
    tvk_ctx *ctx = NULL;
    if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
      if (k == 1 && !vk_required()) continue;
      fail_msg("%s: %s", dev, tvk_last_create_error());
    }
    static float x[N], a[M * K], b[K * P], out[M * P];
    float s;
    for (int rep = 0; rep < 2; rep++) { /* the second realize generates and compiles nothing */
      tvk_tensor *X = rand_tensor(ctx, 1, (int64_t[]){N}, x);
      read_f32(tvk_sum(tvk_mul(X, X), 0, NULL, false), &s);
    }
    tvk_tensor *A = rand_tensor(ctx, 2, (int64_t[]){M, K}, a);
    tvk_tensor *B = rand_tensor(ctx, 2, (int64_t[]){K, P}, b);
    read_f32(tvk_matmul(A, B), out);
    const tvk_profile_entry *pe;
    int np = tvk_profile_entries(ctx, &pe);
    uint64_t calls = 0;
    bool sum_row = false;
    for (int i = 0; i < np; i++) {
      calls += pe[i].calls;
      if (pe[i].flops == 2.0 * N && pe[i].bytes == 4.0 * N + 4)
        sum_row = true, assert_int_equal(pe[i].calls, 2);
    }
    tvk_stats st;
    tvk_stats_get(ctx, &st);
    assert_int_equal(calls, st.kernels_run);
    assert_true(sum_row);
    close_ctx_clean(ctx); /* ends the file */

    size_t n = 0;
    char *text = slurp(path, &n);
    assert_non_null(text);
    JsVal root;
    if (!js_parse(text, n, &root)) fail_msg("%s: the trace is not JSON:\n%.400s", dev, text);
    free(text);
    const JsVal *ev = js_get(&root, "traceEvents");
    assert_true(ev && ev->kind == JS_ARR);
    Span *sp = calloc((size_t)ev->n + 1, sizeof *sp);
    int nsp = 0, nkernel = 0, ncodegen = 0, ncompile = 0, nrealize = 0, nwait = 0;
    bool saw_sum = false, saw_matmul = false;
    for (int i = 0; i < ev->n; i++) {
      const JsVal *e = &ev->items[i], *ph = js_get(e, "ph");
      assert_true(ph && ph->kind == JS_STR);
      if (!strcmp(ph->str, "M")) continue; /* track names */
      assert_string_equal(ph->str, "X");
      const JsVal *cat = js_get(e, "cat"), *name = js_get(e, "name"), *ts = js_get(e, "ts"),
                  *dur = js_get(e, "dur"), *tid = js_get(e, "tid"), *args = js_get(e, "args");
      assert_true(cat && cat->kind == JS_STR && name && name->kind == JS_STR && *name->str);
      assert_true(ts && ts->kind == JS_NUM && ts->num >= 0 && dur && dur->kind == JS_NUM &&
                  dur->num >= 0 && tid && tid->kind == JS_NUM && args && args->kind == JS_OBJ);
      Span *x = &sp[nsp++];
      *x = (Span){cat->str, name->str, ts->num, dur->num, tid->num, -1, -1};
      if (!strcmp(cat->str, "kernel")) {
        const JsVal *fl = js_get(args, "flops"), *by = js_get(args, "bytes");
        assert_true(fl && fl->kind == JS_NUM && by && by->kind == JS_NUM);
        x->flops = fl->num, x->bytes = by->num;
        assert_true(x->tid == TRACE_DEVICE_TRACK);
        saw_sum |= x->flops == 2.0 * N && x->bytes == 4.0 * N + 4;
        saw_matmul |= x->flops == 2.0 * M * K * P && x->bytes == 4.0 * (M * K + K * P + M * P);
        nkernel++;
      } else {
        assert_true(x->tid != TRACE_DEVICE_TRACK);
      }
      ncodegen += !strcmp(cat->str, "codegen");
      ncompile += !strcmp(cat->str, "compile");
      nrealize += !strcmp(cat->str, "realize");
      nwait += !strcmp(cat->str, "wait");
    }
    assert_int_equal(nkernel, st.kernels_run);
    assert_int_equal(ncodegen, st.kernels_generated + st.kernels_stored);
    assert_int_equal(ncompile, st.kernels_compiled);
    assert_int_equal(nrealize, st.schedules);
    assert_int_equal(nwait, st.schedules);
    assert_true(saw_sum && saw_matmul);
    /* every kernel inside a realize: the realize spans do not overlap, so the
     * last one starting before the kernel is the only candidate */
    qsort(sp, (size_t)nsp, sizeof *sp, by_ts);
    const Span *in = NULL;
    for (int i = 0; i < nsp; i++) {
      if (!strcmp(sp[i].cat, "realize")) in = &sp[i];
      if (strcmp(sp[i].cat, "kernel")) continue;
      double slack = 2; /* us: ns rounding of the two clocks' readings */
      if (!in || sp[i].ts + sp[i].dur > in->ts + in->dur + slack)
        fail_msg("%s: kernel %s at %.3f us (+%.3f) is outside every realize", dev, sp[i].name,
                 sp[i].ts, sp[i].dur);
    }
    free(sp);
    js_free(&root);
  }
  /* a trace that cannot be written: a warning, and the context works */
  LogSeen seen = {0};
  char bad[400];
  snprintf(bad, sizeof bad, "%s/no-such-dir/trace.json", dir);
  tvk_ctx_options opt = {.device = "CPU", .trace = bad, .log = collect, .log_user = &seen};
  tvk_ctx *ctx = NULL;
  assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
  assert_non_null(strstr(seen.last, "TVK_TRACE"));
  assert_non_null(strstr(seen.last, bad));
  float two[2];
  read_f32(tvk_full(ctx, TVK_FLOAT32, 1, (int64_t[]){2}, 3.0), two);
  assert_true(two[0] == 3.0f && two[1] == 3.0f);
  tvk_ctx_destroy(ctx);
  unlink(path);
  rm_rf(dir);
  /* the escaping of names and plans */
  char esc[32];
  assert_string_equal(trace_json_str("a\"b\\c\n", esc, sizeof esc), "a\\\"b\\\\c\\u000a");
}

/* TVK_GRAPH (tvk_ctx_options.graph): each realize writes its schedule as
 * DOT, "%d" numbering them; one cluster per kernel, the reason of each
 * materialised buffer; and it renders with Graphviz's dot where that is
 * installed (CI installs it). */
static void test_schedule_graph(void **state) {
  (void)state;
  char dir[256], pattern[300], path[320];
  assert_true(temp_dir(dir, sizeof dir, "graph"));
  snprintf(pattern, sizeof pattern, "%s/s%%d.dot", dir);
  tvk_ctx_options opt = {.device = "CPU", .cache_dir = g_dir, .graph = pattern};
  tvk_ctx *ctx = NULL;
  assert_int_equal(tvk_ctx_create_opts(&opt, &ctx), TVK_OK);
  int64_t sh[2] = {6, 10};
  float x[60], out[60];
  tvk_tensor *X = rand_tensor(ctx, 2, sh, x);
  int ax = 1;
  read_f32(tvk_mul(X, tvk_sum(X, 1, &ax, true)), out); /* schedule 0: two kernels */
  read_f32(tvk_exp(X), out);                           /* schedule 1: one */
  tvk_ctx_destroy(ctx);
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/s%d.dot", dir, k);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("no %s", path);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_true(strncmp(text, "digraph tvk_schedule {", 22) == 0);
    int clusters = 0;
    for (const char *c = text; (c = strstr(c, "subgraph cluster_")); c++) clusters++;
    assert_int_equal(clusters, k == 0 ? 2 : 1);
    if (k == 0 && !strstr(text, "REDUCE_AXIS: ")) fail_msg("no reason in:\n%s", text);
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "command -v dot >/dev/null 2>&1 || exit 77; dot -Tsvg '%s' -o '%s.svg'", path, path);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) continue; /* no Graphviz here */
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  }
  rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_elementwise),
      cmocka_unit_test(test_hand_reduce_expand),
      cmocka_unit_test(test_hand_pad),
      cmocka_unit_test(test_hand_buffer_limit),
      cmocka_unit_test(test_hand_kernel_size),
      cmocka_unit_test(test_add_mul_one_kernel),
      cmocka_unit_test(test_sum_mul_one_kernel),
      cmocka_unit_test(test_chain20_one_kernel),
      cmocka_unit_test(test_second_run_compiles_nothing),
      cmocka_unit_test(test_kernel_store_key),
      cmocka_unit_test(test_kernel_store_across_contexts),
      cmocka_unit_test(test_schedule_compiles_at_once),
      cmocka_unit_test(test_compile_progress),
      cmocka_unit_test(test_profile_summary),
      cmocka_unit_test(test_trace_file),
      cmocka_unit_test(test_scalar_values),
      cmocka_unit_test(test_schedule_reuse),
      cmocka_unit_test(test_jit),
      cmocka_unit_test(test_jit_chain),
      cmocka_unit_test(test_jit_graph),
      cmocka_unit_test(test_schedule_graph),
      cmocka_unit_test(test_readonly_cache_option),
      cmocka_unit_test(test_log_callback),
      cmocka_unit_test(test_no_disk_cache),
      cmocka_unit_test(test_sum_plus_x_two_kernels),
      cmocka_unit_test(test_views_fuse_one_kernel),
      cmocka_unit_test(test_pad_safe_and_unsafe),
      cmocka_unit_test(test_reduce_then_elementwise_one_kernel),
      cmocka_unit_test(test_shared_nodes),
      cmocka_unit_test(test_reduce_nesting),
      cmocka_unit_test(test_realized_reused),
      cmocka_unit_test(test_contiguous_and_to_host),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_error_tensor),
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_multi_tensor_order),
      cmocka_unit_test(test_schedule_reasons),
      cmocka_unit_test(test_schedule_devices),
      cmocka_unit_test(test_debug_output),
      cmocka_unit_test(test_random_graphs),
      cmocka_unit_test(test_matmul_bias_relu_one_kernel),
      cmocka_unit_test(test_mlp_two_layers),
      cmocka_unit_test(test_softmax_three_kernels),
      cmocka_unit_test(test_expand_materialises),
      cmocka_unit_test(test_embedding_no_index_tensor),
      cmocka_unit_test(test_planner_chain),
      cmocka_unit_test(test_planner_in_place_views),
      cmocka_unit_test(test_assign),
      cmocka_unit_test(test_assign_groups),
      cmocka_unit_test(test_wide_and_deep),
      cmocka_unit_test(test_contiguous_child_of_reduce),
  };
  return cmocka_run_group_tests(tests, suite_setup, NULL);
}
