/* Allocation failures (test_oom DEVICE): a small MLP's forward on a fresh
 * kernel cache is run once for every allocation it makes, with that one
 * allocation failing. Each run must end with TVK_OK and the right result, or
 * TVK_ERR_OUT_OF_MEMORY and a message; the context must then compute the
 * right result, and so must a new context on the same cache, so nothing
 * wrong was kept in memory or written to disk.
 *
 * The failing allocator: the executable is linked with --wrap for malloc,
 * calloc, realloc, strdup and posix_memalign (CMakeLists.txt), so every call
 * the library's objects make goes through the __wrap_ functions below, which
 * count calls and fail the armed one. Allocations inside other libraries
 * (libc's own, the Vulkan driver's) are not counted, nor are TinyCC's, which
 * is linked in: libtcc ends the process when an allocation fails outside a
 * compile (its tcc_malloc calls exit), which no caller can catch, so its
 * entry points are wrapped too and allocations made inside them pass.
 *
 *   test_oom DEVICE [STRIDE]
 *
 * DEVICE may name two devices, "CPU+VK": the forward then runs with x's
 * rows cut over both (tvk_shard) and the weights replicated, so allocations
 * fail in the middle of copies, all-reduces and the second device's work.
 *
 * fails every STRIDE-th allocation (default 1: each), times
 * $TVK_OOM_STRIDE when that is set (the sanitizer builds' quicker sweep);
 * $TVK_OOM_AT=k fails only allocation k (to debug it). */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_suite.h"
#include "tvk.h"

/* ---------------------------------------------------------------- the failing allocator */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

static atomic_long calls;        /* allocations since the count was reset */
static atomic_long fail_at = -1; /* the call that fails; -1: none */
static atomic_bool failed;       /* the armed call happened */

static _Thread_local int in_tcc; /* inside a libtcc call */

static bool fail_now(void) {
  if (in_tcc) return false;
  long k = atomic_fetch_add(&calls, 1);
  if (k != atomic_load(&fail_at)) return false;
  atomic_store(&failed, true);
  return true;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *r = fail_now() ? NULL : __real_malloc(n);
  return r ? memcpy(r, s, n) : NULL;
}
int __wrap_posix_memalign(void **p, size_t align, size_t n) {
  return fail_now() ? ENOMEM : __real_posix_memalign(p, align, n);
}

#ifdef TVK_OOM_TCC
/* libtcc's entry points that tvk calls (backend_cpu/cpu_tcc.c) */
typedef struct TCCState TCCState;
#define PASS(ret, f, params, args)                                                                 \
  ret __real_##f params;                                                                           \
  ret __wrap_##f params {                                                                          \
    in_tcc++;                                                                                      \
    ret r = __real_##f args;                                                                       \
    in_tcc--;                                                                                      \
    return r;                                                                                      \
  }
PASS(TCCState *, tcc_new, (void), ())
PASS(int, tcc_set_options, (TCCState * s, const char *o), (s, o))
PASS(int, tcc_set_output_type, (TCCState * s, int t), (s, t))
PASS(int, tcc_compile_string, (TCCState * s, const char *src), (s, src))
PASS(int, tcc_add_symbol, (TCCState * s, const char *n, const void *v), (s, n, v))
PASS(int, tcc_relocate, (TCCState * s, void *p), (s, p))
PASS(void *, tcc_get_symbol, (TCCState * s, const char *n), (s, n))
#endif

static void arm(long k) {
  atomic_store(&failed, false);
  atomic_store(&calls, 0);
  atomic_store(&fail_at, k);
}
static long disarm(void) {
  atomic_store(&fail_at, -1);
  return atomic_load(&calls);
}

/* ---------------------------------------------------------------- the workload */

enum { B = 4, I = 8, H = 16, O = 3 };
static float x[B * I], w1[I * H], b1[H], w2[H * O];
static double want[B * O];

static void make_data(void) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  float *all[] = {x, w1, b1, w2};
  size_t n[] = {B * I, I * H, H, H * O};
  for (int a = 0; a < 4; a++)
    for (size_t i = 0; i < n[a]; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      all[a][i] = (float)((double)(s >> 11) * 0x1p-53 * 2 - 1);
    }
  for (int b = 0; b < B; b++) /* relu(x w1 + b1) w2 in double */
    for (int o = 0; o < O; o++) {
      double acc = 0;
      for (int h = 0; h < H; h++) {
        double z = b1[h];
        for (int i = 0; i < I; i++) z += (double)x[b * I + i] * w1[i * H + h];
        acc += (z > 0 ? z : 0) * w2[h * O + o];
      }
      want[b * O + o] = acc;
    }
}

/* The forward, from host data to host data; TVK_OK only with the result
 * right. The tensors live in a scope, so a failed run leaves nothing. */
static tvk_status forward(tvk_ctx *ctx, bool *right) {
  size_t scope = tvk_scope_begin(ctx);
  tvk_tensor *tx = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){B, I}, x);
  tvk_tensor *t1 = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){I, H}, w1);
  tvk_tensor *tb = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){H}, b1);
  tvk_tensor *t2 = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){H, O}, w2);
  if (tvk_ctx_device_count(ctx) > 1) { /* the rows over two devices, the weights on both */
    const int both[2] = {0, 1};
    tx = tvk_shard(tx, 2, both, 0);
    t1 = tvk_shard(t1, 2, both, -1);
    tb = tvk_shard(tb, 2, both, -1);
    t2 = tvk_shard(t2, 2, both, -1);
  }
  tvk_tensor *y = tvk_matmul(tvk_relu(tvk_add(tvk_matmul(tx, t1), tb)), t2);
  float got[B * O];
  tvk_status st = tvk_to_host(y, got, sizeof got);
  tvk_scope_end(ctx, scope, 0, NULL);
  *right = st == TVK_OK;
  for (int i = 0; st == TVK_OK && i < B * O; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])))) *right = false;
  return st;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static tvk_status open_one(const char *device, const char *cache, tvk_ctx **ctx) {
  tvk_ctx_options o = {.device = device, .cache_dir = cache, .threads = 1};
  /* TinyCC alone where it is built in: compiles in-process, on the calling
   * thread, so the allocations come in the same order every run */
  if (!strcmp(device, "CPU")) o.cpu_tiers = TVK_CPU_TIERS_FAST;
  tvk_status st = tvk_ctx_create_opts(&o, ctx);
  if (st != TVK_OK && !strcmp(device, "CPU")) { /* no TinyCC: the system compiler */
    o.cpu_tiers = TVK_CPU_TIERS_OPTIMISED;
    st = tvk_ctx_create_opts(&o, ctx);
  }
  return st;
}

/* A context on DEVICE, or on its two devices ("CPU+VK"; the second opened
 * with the first's options). */
static tvk_status open_ctx(const char *device, const char *cache, tvk_ctx **ctx) {
  char first[32];
  const char *plus = strchr(device, '+');
  snprintf(first, sizeof first, "%.*s", plus ? (int)(plus - device) : 31, device);
  tvk_status st = open_one(first, cache, ctx);
  int idx;
  if (st == TVK_OK && plus && (st = tvk_ctx_add_device(*ctx, plus + 1, &idx)) != TVK_OK) {
    fprintf(stderr, "test_oom: %s\n", tvk_ctx_error(*ctx));
    tvk_ctx_destroy(*ctx);
    *ctx = NULL;
  }
  return st;
}

/* One run with allocation k failing; 0 when all is as it must be. */
static int run_failing(const char *device, long k, bool *hit) {
  char dir[] = "/tmp/tvk-oom-XXXXXX";
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  int bad = 0;
  tvk_ctx *ctx = NULL;
  if (open_ctx(device, dir, &ctx) != TVK_OK) {
    fprintf(stderr, "k=%ld: %s\n", k, tvk_last_create_error());
    bad = 1;
  }
  bool right = false;
  if (!bad) {
    arm(k);
    tvk_status st = forward(ctx, &right);
    disarm();
    *hit = atomic_load(&failed);
    const char *msg = tvk_ctx_error(ctx);
    if (st == TVK_OK ? !right : st != TVK_ERR_OUT_OF_MEMORY || !*hit || !msg || !*msg) {
      fprintf(stderr, "allocation %ld failing: %s (%s) %s\n", k, tvk_status_name(st),
              msg ? msg : "(no message)", st == TVK_OK ? "a wrong result" : "");
      bad = 1;
    }
    tvk_ctx_clear_error(ctx);
    /* the context is still usable */
    st = forward(ctx, &right);
    if (!right) {
      fprintf(stderr, "allocation %ld failed; the next run on the context: %s (%s)%s\n", k,
              tvk_status_name(st), tvk_ctx_error(ctx), st == TVK_OK ? " a wrong result" : "");
      bad = 1;
    }
  }
  if (ctx && api_ctx_close_checked(&ctx, device)) bad = 1;
  /* nothing wrong was cached: a new context on the same cache is right */
  if (open_ctx(device, dir, &ctx) != TVK_OK) {
    fprintf(stderr, "k=%ld: reopening: %s\n", k, tvk_last_create_error());
    bad = 1;
  } else {
    tvk_status st = forward(ctx, &right);
    if (!right) {
      fprintf(stderr, "allocation %ld failed; a new context on its cache: %s (%s)%s\n", k,
              tvk_status_name(st), tvk_ctx_error(ctx), st == TVK_OK ? " a wrong result" : "");
      bad = 1;
    }
    if (api_ctx_close_checked(&ctx, device)) bad = 1;
  }
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return bad;
}

int main(int argc, char **argv) {
  const char *device = argc > 1 ? argv[1] : "CPU";
  const char *plus = strchr(device, '+');
  char one[32];
  snprintf(one, sizeof one, "%.*s", plus ? (int)(plus - device) : 31, device);
  int missing = api_device_missing("test_oom", one);
  if (!missing && plus) missing = api_device_missing("test_oom", plus + 1);
  if (missing) return missing;
  make_data();
  const char *s = getenv("TVK_OOM_STRIDE");
  long stride = argc > 2 && atol(argv[2]) > 0 ? atol(argv[2]) : 1;
  if (s && atol(s) > 0) stride *= atol(s);
  /* how many allocations a run makes on a fresh cache, the second time: the
   * first also fills what a process does once (the compiler's probe) */
  long total = 0;
  tvk_status st = TVK_OK;
  bool right = false;
  for (int pass = 0; pass < 2 && st == TVK_OK; pass++) {
    char dir[] = "/tmp/tvk-oom-XXXXXX";
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    tvk_ctx *ctx = NULL;
    if (open_ctx(device, dir, &ctx) != TVK_OK) {
      fprintf(stderr, "test_oom: %s\n", tvk_last_create_error());
      return 1;
    }
    arm(-1);
    st = forward(ctx, &right);
    total = disarm();
    api_ctx_close_checked(&ctx, device);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  if (!right) {
    fprintf(stderr, "test_oom: the forward without failures: %s\n", tvk_status_name(st));
    return 1;
  }
  printf("test_oom %s: %ld allocations in a run on a fresh cache; failing each", device, total);
  if (stride > 1) printf(" %ld-th", stride);
  printf("\n");
  int failures = 0;
  long tried = 0, hits = 0, first = 0;
  const char *at = getenv("TVK_OOM_AT");
  if (at && *at) first = atol(at), total = first + 1;
  for (long k = first; k < total; k += stride, tried++) {
    bool hit = false;
    failures += run_failing(device, k, &hit);
    hits += hit;
    if (failures >= 10) {
      fprintf(stderr, "test_oom: stopping after 10 failures\n");
      break;
    }
  }
  printf("test_oom %s: %ld runs, %ld with the failing allocation reached, %d wrong\n", device,
         tried, hits, failures);
  return failures ? 1 : 0;
}
