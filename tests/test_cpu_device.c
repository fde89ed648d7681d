/* Tests of the CPU device (backend_cpu/): buffers, the compiler driver and its
 * on-disk cache, the thread pool, and the errors of each. Every kernel's result
 * is checked against a plain loop here. Kernels go to the build tree's cache
 * (test_cache_dir), so a second run compiles none, except in the tests of the
 * cache itself: those use a fresh directory (mkdtemp), removed at the end. */
#define _GNU_SOURCE /* POSIX 2008, realpath, and unshare for the read-only mount test */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend_cpu/cpu_internal.h" /* cpu_program_fn, cpu_tcc_available */
#include "runtime/cache.h"
#include "runtime/device.h"
#include "test_util.h"

/* The OOM test asks for SIZE_MAX/2 bytes: under ASan that must fail like
 * malloc does, not abort the process. Unused without ASan. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

typedef struct {
  char root[256];  /* the mkdtemp directory; everything the suite writes is below */
  char cache[300]; /* root/cache: the cache of the tests that check what it holds */
} Suite;

/* ---- helpers ---- */

/* The name of a .so in dir, into out. */
static bool find_so(const char *dir, char *out, size_t outn) {
  DIR *d = opendir(dir);
  bool found = false;
  struct dirent *e;
  while (d && !found && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 3, ".so")) continue;
    snprintf(out, outn, "%s", e->d_name);
    found = true;
  }
  if (d) closedir(d);
  return found;
}

/* A device with its kernel cache in cache_dir. The system compiler only: most
 * tests here are of it (the tiers have their own, below). */
static Device *make_dev_in(int threads, const char *cache_dir) {
  DeviceOptions opt = {
      .threads = threads, .cache_dir = cache_dir, .cpu_tiers = TVK_CPU_TIERS_OPTIMISED};
  Device *d = NULL;
  Error err;
  tvk_status st = cpu_device_create(&opt, &d, &err);
  if (st != TVK_OK) fail_msg("cpu_device_create: %s", err.msg);
  return d;
}

/* A device on the build tree's cache: for tests that do not look at it. */
static Device *make_dev(int threads) { return make_dev_in(threads, test_cache_dir()); }

static DevProgram *must_compile(Device *d, const char *name, const char *src, bool *hit) {
  DevProgram *p = NULL;
  bool h = false;
  tvk_status st = d->ops->compile(d, name, src, &p, &h, NULL);
  if (st != TVK_OK) fail_msg("compile %s: %s: %s", name, tvk_status_name(st), d->err.msg);
  if (hit) *hit = h;
  return p;
}

static DevBuffer *must_alloc(Device *d, size_t n) {
  DevBuffer *b = NULL;
  tvk_status st = d->ops->alloc(d, n, &b);
  if (st != TVK_OK) fail_msg("alloc %zu: %s", n, d->err.msg);
  return b;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in message: %s", needle, hay);
}

/* c[i] = a[i] * b[i] + vals[1] for i < vals[0], split into n_cores chunks. */
static const char mul_add_src[] =
    "#include <stdint.h>\n"
    "void mul_add(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  float *c = bufs[0];\n"
    "  const float *a = bufs[1], *b = bufs[2];\n"
    "  int64_t n = vals[0], per = (n + n_cores - 1) / n_cores;\n"
    "  int64_t lo = core_id * per, hi = lo + per < n ? lo + per : n;\n"
    "  for (int64_t i = lo; i < hi; i++) c[i] = a[i] * b[i] + (float)vals[1];\n"
    "}\n";

/* Each core counts its calls, records n_cores, and ORs the misalignment of
 * the vals[0] buffers after the first. */
static const char cores_src[] =
    "#include <stdint.h>\n"
    "void cores(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  int32_t *hits = bufs[0];\n"
    "  uintptr_t mis = 0;\n"
    "  for (int32_t i = 1; i <= vals[0]; i++) mis |= (uintptr_t)bufs[i] % 64;\n"
    "  hits[core_id] += 1;\n"
    "  hits[64 + core_id] = n_cores;\n"
    "  hits[128 + core_id] = (int32_t)mis;\n"
    "}\n";

/* A small kernel whose source differs by `tag`, for cache tests. */
static void tagged_src(char *out, size_t n, const char *name, int tag) {
  snprintf(out, n,
           "#include <stdint.h>\n"
           "void %s(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
           "  (void)vals; (void)n_cores;\n"
           "  if (core_id == 0) ((int32_t *)bufs[0])[0] = %d;\n"
           "}\n",
           name, tag);
}

/* Runs a tagged kernel on d and returns what it wrote. */
static int32_t run_tagged(Device *d, DevProgram *p) {
  DevBuffer *b = must_alloc(d, 4);
  int32_t v = -1;
  assert_int_equal(d->ops->copy_in(d, b, 0, &v, 4), TVK_OK);
  assert_int_equal(d->ops->launch(d, p, &b, 1, NULL, 0, NULL), TVK_OK);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b, 0, &v, 4), TVK_OK);
  d->ops->free(d, b);
  return v;
}

/* ---- suite setup ---- */

static int suite_setup(void **state) {
  Suite *s = calloc(1, sizeof *s);
  if (!s) return -1;
  if (!temp_dir(s->root, sizeof s->root, "cpu-test")) {
    free(s);
    return -1;
  }
  snprintf(s->cache, sizeof s->cache, "%s/cache", s->root);
  test_cache_dir(); /* before a test changes $TVK_CACHE_DIR */
  *state = s;
  return 0;
}

static int suite_teardown(void **state) {
  Suite *s = *state;
  rm_rf(s->root);
  free(s);
  return 0;
}

/* ---- tests ---- */

static void test_create(void **state) {
  (void)state;
  Device *d = make_dev(3);
  assert_int_equal(d->limits.cores, 3);
  assert_true(d->limits.max_buffer_bytes == SIZE_MAX / 2);
  const char *name = d->ops->name(d);
  assert_true(strncmp(name, "CPU (", 5) == 0);
  assert_contains(name, "3 threads)");
  d->ops->destroy(d);

  long online = sysconf(_SC_NPROCESSORS_ONLN);
  d = make_dev(0); /* one per core */
  assert_int_equal(d->limits.cores, online < 1 ? 1 : online > 1024 ? 1024 : online);
  /* the L2 size the optimiser sizes CACHE runs with: what sysfs says of
   * cpu0's level-2 cache, read here on its own ("1024K"), where it says it */
  size_t l2 = 0;
  for (int i = 0; i < 8 && !l2; i++) {
    char path[96], lv[16] = "", ty[32] = "", sz[32] = "";
    FILE *f;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    if (!(f = fopen(path, "r"))) break;
    if (!fgets(lv, sizeof lv, f)) lv[0] = 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if ((f = fopen(path, "r"))) {
      if (!fgets(ty, sizeof ty, f)) ty[0] = 0;
      fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (lv[0] != '2' || !strncmp(ty, "Instruction", 11) || !(f = fopen(path, "r"))) continue;
    char unit = 0;
    unsigned long v = 0;
    if (fgets(sz, sizeof sz, f) && sscanf(sz, "%lu%c", &v, &unit) >= 1)
      l2 = v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
    fclose(f);
  }
  if (l2) assert_int_equal(d->limits.cache_bytes, l2);
  fprintf(stderr, "L2: sysfs %zu bytes, the device %zu\n", l2, d->limits.cache_bytes);
  d->ops->destroy(d);

  DeviceOptions bad = {.threads = -2};
  Error err;
  d = (Device *)&bad; /* must be reset to NULL */
  assert_int_equal(cpu_device_create(&bad, &d, &err), TVK_ERR_INVALID_ARG);
  assert_null(d);
  assert_contains(err.msg, "-2");
}

static void test_buffer_round_trip(void **state) {
  (void)state;
  Device *d = make_dev(1);
  enum { N = 1000 };
  unsigned char in[N], out[N], want[N];
  for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 37 + 11);
  DevBuffer *b = must_alloc(d, N);
  assert_int_equal(d->ops->copy_in(d, b, 0, in, N), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b, 0, out, N), TVK_OK);
  assert_memory_equal(in, out, N);

  /* A partial write lands at its offset and nowhere else. */
  unsigned char patch[50];
  memset(patch, 0xAB, sizeof patch);
  memcpy(want, in, N);
  memset(want + 100, 0xAB, 50);
  assert_int_equal(d->ops->copy_in(d, b, 100, patch, 50), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b, 0, out, N), TVK_OK);
  assert_memory_equal(want, out, N);
  assert_int_equal(d->ops->copy_out(d, b, 990, out, 10), TVK_OK);
  assert_memory_equal(want + 990, out, 10);
  assert_int_equal(d->ops->copy_in(d, b, N, NULL, 0), TVK_OK); /* empty at the end */
  d->ops->free(d, b);

  DevBuffer *z = must_alloc(d, 0);
  assert_int_equal(d->ops->copy_in(d, z, 0, in, 0), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, z, 0, out, 0), TVK_OK);
  d->ops->free(d, z);
  d->ops->free(d, NULL);
  d->ops->destroy(d);
}

/* A freed buffer is reused by the next allocation of its size (no fresh pages
 * to fault in); other sizes get their own; the cache is bounded, and what it
 * holds is freed with the device (the sanitizer build checks for leaks). */
static void test_buffer_reuse(void **state) {
  (void)state;
  Device *d = make_dev(1);
  DevBuffer *a = must_alloc(d, 4096), *b = must_alloc(d, 4096);
  unsigned char in[64] = {7}, out[64];
  assert_int_equal(d->ops->copy_in(d, b, 0, in, sizeof in), TVK_OK);
  d->ops->free(d, a);
  DevBuffer *c = must_alloc(d, 4096);
  assert_ptr_equal(c, a);
  DevBuffer *e = must_alloc(d, 8192); /* another size: not a */
  assert_ptr_not_equal(e, a);
  assert_int_equal(d->ops->copy_out(d, b, 0, out, sizeof out), TVK_OK); /* b untouched */
  assert_memory_equal(in, out, sizeof in);
  enum { K = 40 };
  DevBuffer *many[K];
  for (int i = 0; i < K; i++) many[i] = must_alloc(d, 1000 + (size_t)i);
  for (int i = 0; i < K; i++) d->ops->free(d, many[i]); /* more than the cache keeps */
  DevBuffer *last = must_alloc(d, 1000 + K - 1), *first = must_alloc(d, 1000);
  assert_ptr_equal(last, many[K - 1]); /* the most recent ones are kept */
  d->ops->free(d, last), d->ops->free(d, first);
  d->ops->free(d, b), d->ops->free(d, c), d->ops->free(d, e);
  d->ops->destroy(d);
}

static void test_buffer_bounds(void **state) {
  (void)state;
  Device *d = make_dev(1);
  unsigned char tmp[16] = {0};
  DevBuffer *b = must_alloc(d, 10);
  assert_int_equal(d->ops->copy_in(d, b, 9, tmp, 2), TVK_ERR_INVALID_ARG);
  assert_contains(d->err.msg, "offset 9");
  assert_contains(d->err.msg, "size 2");
  assert_contains(d->err.msg, "10 bytes");
  assert_int_equal(d->ops->copy_out(d, b, 11, tmp, 0), TVK_ERR_INVALID_ARG);
  assert_contains(d->err.msg, "copy_out");
  /* offset + size overflows size_t: still an error, not a wrap-around. */
  assert_int_equal(d->ops->copy_out(d, b, 2, tmp, SIZE_MAX), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, b, SIZE_MAX, tmp, 2), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, b, 0, NULL, 1), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, NULL, 0, tmp, 1), TVK_ERR_INVALID_ARG);

  DevBuffer *z = must_alloc(d, 0);
  assert_int_equal(d->ops->copy_in(d, z, 0, tmp, 1), TVK_ERR_INVALID_ARG);
  assert_contains(d->err.msg, "0 bytes");
  d->ops->free(d, z);
  d->ops->free(d, b);
  d->ops->destroy(d);
}

static void test_alloc_too_big(void **state) {
  (void)state;
  Device *d = make_dev(1);
  DevBuffer *b = (DevBuffer *)d; /* must be reset to NULL */
  size_t max = d->limits.max_buffer_bytes;
  char want[64];
  snprintf(want, sizeof want, "%zu", max);
  assert_int_equal(d->ops->alloc(d, max, &b), TVK_ERR_OUT_OF_MEMORY);
  assert_null(b);
  assert_contains(d->err.msg, want);
  assert_int_equal(d->ops->alloc(d, max + 1, &b), TVK_ERR_INVALID_ARG);
  assert_null(b);
  d->ops->destroy(d);
}

/* mul_add on 1, 2 and 7 threads and several sizes, against a loop here. */
static void test_kernel_mul_add(void **state) {
  Suite *s0 = *state;
  static const int threads[] = {1, 2, 7};
  static const int32_t sizes[] = {0, 1, 1000, 1000003};
  for (size_t t = 0; t < 3; t++) {
    Device *d = make_dev_in(threads[t], s0->cache); /* fresh: the first compile is a miss */
    bool hit = true;
    DevProgram *p = must_compile(d, "mul_add", mul_add_src, &hit);
    assert_int_equal(hit, t > 0); /* the first device compiles, the others reuse */
    for (size_t s = 0; s < 4; s++) {
      int32_t n = sizes[s];
      size_t bytes = (size_t)n * sizeof(float);
      float *a = malloc(bytes + 4), *bv = malloc(bytes + 4), *c = malloc(bytes + 4);
      assert_non_null(a), assert_non_null(bv), assert_non_null(c);
      for (int32_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000); /* small integers: every product is exact */
        bv[i] = (float)(i % 7 - 3);
        c[i] = -1234.0f;
      }
      DevBuffer *bufs[3] = {must_alloc(d, bytes), must_alloc(d, bytes), must_alloc(d, bytes)};
      assert_int_equal(d->ops->copy_in(d, bufs[0], 0, c, bytes), TVK_OK);
      assert_int_equal(d->ops->copy_in(d, bufs[1], 0, a, bytes), TVK_OK);
      assert_int_equal(d->ops->copy_in(d, bufs[2], 0, bv, bytes), TVK_OK);
      int32_t vals[2] = {n, 5};
      LaunchDims dims = {{n, 1, 1}, {1, 1, 1}}; /* n elements, each of work 1 */
      assert_int_equal(d->ops->launch(d, p, bufs, 3, vals, 2, &dims), TVK_OK);
      assert_int_equal(d->ops->sync(d), TVK_OK);
      assert_int_equal(d->ops->copy_out(d, bufs[0], 0, c, bytes), TVK_OK);
      for (int32_t i = 0; i < n; i++) {
        float want = (float)(i % 1000) * (float)(i % 7 - 3) + 5.0f;
        if (c[i] != want)
          fail_msg("threads %d n %d: c[%d] = %g, want %g", threads[t], n, i, c[i], want);
      }
      for (int k = 0; k < 3; k++) d->ops->free(d, bufs[k]);
      free(a), free(bv), free(c);
    }
    d->ops->program_free(d, p);
    d->ops->destroy(d);
  }
}

/* Every launch calls each core it uses exactly once with the right n_cores,
 * and buffers are 64-byte aligned. Many launches stress the pool's hand-off.
 * The cores used: all without a geometry; as many as the split axis has
 * indices (global[0]); one for a kernel of little work (global[0] *
 * global[1] below CPU_SERIAL_WORK), without overflow for huge sizes. */
static void test_each_core_once(void **state) {
  (void)state;
  enum { LAUNCHES = 300 };
  static const int threads[] = {1, 2, 7};
  static const struct {
    bool geometry;
    int64_t chunks, per;
    int most; /* cores it may use; 0: all */
  } cases[] = {{false, 0, 0, 0},      {true, 1000, 1000, 0}, {true, 1, INT64_C(1) << 30, 1},
               {true, 5, 1 << 20, 5}, {true, 100, 10, 1},    {true, 4, INT64_MAX / 2, 4}};
  for (size_t t = 0; t < 3; t++) {
    Device *d = make_dev(threads[t]);
    DevProgram *p = must_compile(d, "cores", cores_src, NULL);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      int32_t hits[192] = {0};
      DevBuffer *bufs[4] = {must_alloc(d, sizeof hits), must_alloc(d, 0), must_alloc(d, 3),
                            must_alloc(d, 1001)};
      assert_int_equal(d->ops->copy_in(d, bufs[0], 0, hits, sizeof hits), TVK_OK);
      int32_t vals[1] = {3};
      LaunchDims dims = {{cases[k].chunks, cases[k].per, 1}, {1, 1, 1}};
      for (int i = 0; i < LAUNCHES; i++)
        assert_int_equal(d->ops->launch(d, p, bufs, 4, vals, 1, cases[k].geometry ? &dims : NULL),
                         TVK_OK);
      assert_int_equal(d->ops->copy_out(d, bufs[0], 0, hits, sizeof hits), TVK_OK);
      int used = cases[k].most && cases[k].most < threads[t] ? cases[k].most : threads[t];
      for (int c = 0; c < 64; c++) {
        int want = c < used ? LAUNCHES : 0;
        if (hits[c] != want)
          fail_msg("threads %d, case %zu: core %d ran %d times, want %d", threads[t], k, c, hits[c],
                   want);
        assert_int_equal(hits[64 + c], c < used ? used : 0);
        assert_int_equal(hits[128 + c], 0); /* misalignment */
      }
      for (int b = 0; b < 4; b++) d->ops->free(d, bufs[b]);
    }
    d->ops->program_free(d, p);
    d->ops->destroy(d);
  }
}

/* Each call appends kernel * 10000 + part to a log (bufs[0]: a count, then
 * the entries; vals[0] the kernel) and counts itself per part, with the
 * n_cores it got, in bufs[1]. */
static const char parts_src[] =
    "#include <stdint.h>\n"
    "void parts(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  int32_t *log = bufs[0], *hits = bufs[1];\n"
    "  int32_t at = __atomic_fetch_add(&log[0], 1, __ATOMIC_RELAXED);\n"
    "  log[1 + at] = vals[0] * 10000 + core_id;\n"
    "  __atomic_fetch_add(&hits[vals[0] * 64 + core_id], 1, __ATOMIC_RELAXED);\n"
    "  hits[512 + vals[0] * 64 + core_id] = n_cores;\n"
    "}\n";

static void on_time_count(void *user, const LaunchTime *t) {
  int *n = user;
  if (t->ms >= 0 && t->end_ns >= t->start_ns) n[0]++;
}

/* launch_parts calls part p of every launch, in launch order, before the
 * next part on that core: with one thread the log is k0 p0, k1 p0, k2 p0,
 * k0 p1, ...; with more, every (launch, part) runs once with n_cores =
 * parts. Each launch's time is reported once. Bad counts are refused. */
static void test_launch_parts(void **state) {
  (void)state;
  enum { PARTS = 40, KERNELS = 3 };
  static const int threads[] = {1, 2, 7};
  for (size_t t = 0; t < 3; t++) {
    Device *d = make_dev(threads[t]);
    int timed = 0;
    d->on_time = on_time_count, d->time_user = &timed;
    DevProgram *p = must_compile(d, "parts", parts_src, NULL);
    int32_t log[1 + PARTS * KERNELS] = {0}, hits[1024] = {0};
    DevBuffer *bufs[2] = {must_alloc(d, sizeof log), must_alloc(d, sizeof hits)};
    assert_int_equal(d->ops->copy_in(d, bufs[0], 0, log, sizeof log), TVK_OK);
    assert_int_equal(d->ops->copy_in(d, bufs[1], 0, hits, sizeof hits), TVK_OK);
    int32_t vals[KERNELS] = {0, 1, 2};
    LaunchDims dims = {{PARTS * 4, 1 << 20, 1}, {1, 1, 1}};
    DevLaunch l[KERNELS];
    for (int k = 0; k < KERNELS; k++) l[k] = (DevLaunch){p, bufs, 2, &vals[k], 1, &dims};
    assert_int_equal(d->ops->launch_parts(d, l, KERNELS, PARTS), TVK_OK);
    assert_int_equal(d->ops->copy_out(d, bufs[0], 0, log, sizeof log), TVK_OK);
    assert_int_equal(d->ops->copy_out(d, bufs[1], 0, hits, sizeof hits), TVK_OK);
    assert_int_equal(log[0], PARTS * KERNELS);
    for (int k = 0; k < KERNELS; k++)
      for (int q = 0; q < PARTS; q++) {
        if (hits[k * 64 + q] != 1)
          fail_msg("threads %d: kernel %d part %d ran %d times", threads[t], k, q,
                   hits[k * 64 + q]);
        assert_int_equal(hits[512 + k * 64 + q], PARTS);
      }
    /* on one core, in order; on any, a part's kernels in launch order */
    int32_t last[PARTS];
    for (int q = 0; q < PARTS; q++) last[q] = -1;
    for (int i = 0; i < PARTS * KERNELS; i++) {
      int32_t k = log[1 + i] / 10000, q = log[1 + i] % 10000;
      if (threads[t] == 1) assert_int_equal(log[1 + i], (i % KERNELS) * 10000 + i / KERNELS);
      assert_int_equal(k, last[q] + 1);
      last[q] = k;
    }
    assert_int_equal(timed, KERNELS);
    assert_int_equal(d->ops->launch_parts(d, l, 0, PARTS), TVK_ERR_INVALID_ARG);
    assert_int_equal(d->ops->launch_parts(d, l, KERNELS, 0), TVK_ERR_INVALID_ARG);
    assert_int_equal(d->ops->launch_parts(d, l, KERNELS, DEV_MAX_PARTS + 1), TVK_ERR_INVALID_ARG);
    assert_non_null(strstr(d->err.msg, "parts"));
    for (int b = 0; b < 2; b++) d->ops->free(d, bufs[b]);
    d->ops->program_free(d, p);
    d->ops->destroy(d);
  }
}

/* More buffers than the launch keeps on its stack. */
static void test_many_buffers(void **state) {
  (void)state;
  enum { NB = 40 };
  static const char src[] =
      "#include <stdint.h>\n"
      "void many(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
      "  (void)n_cores;\n"
      "  if (core_id == 0) for (int32_t i = 0; i < vals[0]; i++) *(int32_t *)bufs[i] = i * "
      "vals[1];\n"
      "}\n";
  Device *d = make_dev(2);
  DevProgram *p = must_compile(d, "many", src, NULL);
  DevBuffer *bufs[NB];
  for (int i = 0; i < NB; i++) bufs[i] = must_alloc(d, 4);
  int32_t vals[2] = {NB, 3};
  assert_int_equal(d->ops->launch(d, p, bufs, NB, vals, 2, NULL), TVK_OK);
  for (int i = 0; i < NB; i++) {
    int32_t v = -1;
    assert_int_equal(d->ops->copy_out(d, bufs[i], 0, &v, 4), TVK_OK);
    assert_int_equal(v, i * 3);
    d->ops->free(d, bufs[i]);
  }
  d->ops->program_free(d, p);
  d->ops->destroy(d);
}

static void test_launch_errors(void **state) {
  (void)state;
  Device *d = make_dev(2), *other = make_dev(1);
  char src[512];
  tagged_src(src, sizeof src, "launch_err", 1);
  DevProgram *p = must_compile(d, "launch_err", src, NULL);
  DevBuffer *b = must_alloc(d, 4);
  DevBuffer *two[2] = {b, NULL};
  assert_int_equal(d->ops->launch(d, NULL, &b, 1, NULL, 0, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->launch(d, p, two, 2, NULL, 0, NULL), TVK_ERR_INVALID_ARG);
  assert_contains(d->err.msg, "buffer 1");
  assert_int_equal(d->ops->launch(d, p, NULL, 1, NULL, 0, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->launch(d, p, &b, 1, NULL, 2, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(other->ops->launch(other, p, &b, 1, NULL, 0, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(run_tagged(d, p), 1);
  d->ops->free(d, b);
  d->ops->program_free(d, p);
  d->ops->destroy(d);
  other->ops->destroy(other);
}

/* The second compile of a source loads the cached .so and runs no compiler;
 * a different source is a miss; only .so files stay in the cache. */
static void test_cache_hit_and_miss(void **state) {
  Suite *s = *state;
  char src1[512], src2[512];
  tagged_src(src1, sizeof src1, "tag", 101);
  tagged_src(src2, sizeof src2, "tag", 102);
  Device *d = make_dev_in(2, s->cache);
  int before = count_files(s->cache, ".so");
  bool hit = true;
  DevProgram *p1 = must_compile(d, "tag", src1, &hit);
  assert_false(hit);
  assert_int_equal(count_files(s->cache, ".so"), before + 1);

  DevProgram *p2 = must_compile(d, "tag", src1, &hit);
  assert_true(hit);
  assert_int_equal(count_files(s->cache, ".so"), before + 1);
  assert_int_equal(run_tagged(d, p2), 101);
  d->ops->program_free(d, p2);
  assert_int_equal(run_tagged(d, p1), 101); /* still loaded after the other handle went */

  /* A new device (as a new process would) finds it too. */
  Device *d2 = make_dev_in(1, s->cache);
  DevProgram *p3 = must_compile(d2, "tag", src1, &hit);
  assert_true(hit);
  assert_int_equal(count_files(s->cache, ".so"), before + 1);

  DevProgram *p4 = must_compile(d2, "tag", src2, &hit);
  assert_false(hit);
  assert_int_equal(count_files(s->cache, ".so"), before + 2);
  assert_int_equal(run_tagged(d2, p4), 102);
  assert_int_equal(run_tagged(d2, p3), 101);
  /* No temp source or half-written .so left behind. */
  assert_int_equal(count_files(s->cache, NULL), count_files(s->cache, ".so"));
  d->ops->program_free(d, p1);
  d2->ops->program_free(d2, p3);
  d2->ops->program_free(d2, p4);
  d->ops->destroy(d);
  d2->ops->destroy(d2);
}

/* A cached .so that cannot be loaded (say, truncated by a crash) is rebuilt. */
static void test_cache_corrupt_rebuilt(void **state) {
  Suite *s = *state;
  char src[512], priv[512], so[256], path[1024];
  Error err;
  tagged_src(src, sizeof src, "corrupt", 7);
  snprintf(priv, sizeof priv, "%s/corrupt-dir", s->root);
  DeviceOptions opt = {.cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cache_dir = priv};
  Device *d = NULL;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_OK);
  DevProgram *p = must_compile(d, "corrupt", src, NULL);
  d->ops->program_free(d, p); /* unloaded, so the next dlopen reads the file */
  d->ops->destroy(d);
  assert_true(find_so(priv, so, sizeof so));
  snprintf(path, sizeof path, "%s/%s", priv, so);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not an ELF file", f);
  fclose(f);

  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_OK);
  bool hit = true;
  p = must_compile(d, "corrupt", src, &hit);
  assert_false(hit);
  assert_int_equal(run_tagged(d, p), 7);
  assert_int_equal(count_files(priv, NULL), 1);
  d->ops->program_free(d, p);
  d->ops->destroy(d);
}

static void test_compile_error(void **state) {
  Suite *s = *state;
  static const char src[] =
      "#include <stdint.h>\n"
      "void broken(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
      "  this is not C;\n"
      "}\n";
  Device *d = make_dev_in(1, s->cache);          /* its files are counted */
  must_compile(d, "mul_add", mul_add_src, NULL); /* freed by destroy */
  int n0 = count_files(s->cache, NULL);
  DevProgram *p = (DevProgram *)d;
  bool hit = true;
  assert_int_equal(d->ops->compile(d, "broken", src, &p, &hit, NULL), TVK_ERR_COMPILE);
  assert_null(p);
  assert_false(hit);
  assert_contains(d->err.msg, "broken");
  assert_contains(d->err.msg, "error");              /* the compiler's own words */
  assert_int_equal(count_files(s->cache, NULL), n0); /* no .so, no temp file */
  d->ops->destroy(d);
}

static void test_missing_symbol_and_bad_names(void **state) {
  Suite *s = *state;
  char src[512];
  tagged_src(src, sizeof src, "present", 3);
  Device *d = make_dev_in(1, s->cache); /* fresh, so the first round compiles */
  DevProgram *p = (DevProgram *)d;
  for (int round = 0; round < 2; round++) { /* a miss, then from the cache */
    assert_int_equal(d->ops->compile(d, "absent", src, &p, NULL, NULL), TVK_ERR_COMPILE);
    assert_null(p);
    assert_contains(d->err.msg, "'absent'");
  }
  assert_int_equal(d->ops->compile(d, "1abc", src, &p, NULL, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->compile(d, "a b", src, &p, NULL, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->compile(d, "", src, &p, NULL, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->compile(d, NULL, src, &p, NULL, NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->compile(d, "present", NULL, &p, NULL, NULL), TVK_ERR_INVALID_ARG);
  p = must_compile(d, "present", src, NULL);
  assert_int_equal(run_tagged(d, p), 3);
  d->ops->program_free(d, p);
  d->ops->program_free(d, NULL);
  d->ops->destroy(d);
}

static void test_no_compiler(void **state) {
  Suite *s = *state;
  static const char *const bad = "/nonexistent dir/no-such-cc";
  char *saved = env_save("CC");
  setenv("CC", bad, 1);
  char dir[512];
  snprintf(dir, sizeof dir, "%s/no-cc-cache", s->root); /* empty: nothing to load */
  Device *d = make_dev_in(1, dir);                      /* creating works; compiling says why not */
  DevProgram *p = (DevProgram *)d;
  assert_int_equal(d->ops->compile(d, "mul_add", mul_add_src, &p, NULL, NULL), TVK_ERR_DEVICE);
  assert_null(p);
  assert_contains(d->err.msg, "no C compiler found");
  assert_contains(d->err.msg, bad);
  assert_contains(d->err.msg, "set CC");
  d->ops->destroy(d);
  env_restore("CC", saved);

  /* The option wins over $CC. */
  DeviceOptions opt = {
      .threads = 1, .cc = bad, .cache_dir = dir, .cpu_tiers = TVK_CPU_TIERS_OPTIMISED};
  Error err;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_OK);
  assert_int_equal(d->ops->compile(d, "mul_add", mul_add_src, &p, NULL, NULL), TVK_ERR_DEVICE);
  assert_contains(d->err.msg, bad);
  d->ops->destroy(d);
}

/* Compiles one tagged kernel on a new device and returns its status. */
static tvk_status compile_once(const DeviceOptions *opt, int tag, char *msg, size_t msgn) {
  Device *d = NULL;
  Error err;
  char src[512];
  tvk_status st = cpu_device_create(opt, &d, &err);
  if (st != TVK_OK) fail_msg("create: %s", err.msg);
  tagged_src(src, sizeof src, "where", tag);
  DevProgram *p = NULL;
  st = d->ops->compile(d, "where", src, &p, NULL, NULL);
  snprintf(msg, msgn, "%s", d->err.msg);
  if (st == TVK_OK) {
    assert_int_equal(run_tagged(d, p), tag);
    d->ops->program_free(d, p);
  }
  d->ops->destroy(d);
  return st;
}

/* Where the cache goes: the option, $TVK_CACHE_DIR, $XDG_CACHE_HOME/tvk, and a
 * private temp dir when the home cannot be written. */
static void test_cache_locations(void **state) {
  Suite *s = *state;
  char *saved[4] = {env_save("TVK_CACHE_DIR"), env_save("XDG_CACHE_HOME"), env_save("HOME"),
                    env_save("TMPDIR")};
  char dir[512], msg[1024];
  DeviceOptions opt = {.cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1};

  snprintf(dir, sizeof dir, "%s/with space/nested dir", s->root);
  opt.cache_dir = dir; /* created with its parents; spaces are fine */
  assert_int_equal(compile_once(&opt, 201, msg, sizeof msg), TVK_OK);
  assert_int_equal(count_files(dir, ".so"), 1);
  opt.cache_dir = NULL;

  unsetenv("TVK_CACHE_DIR");
  snprintf(dir, sizeof dir, "%s/xdg", s->root);
  setenv("XDG_CACHE_HOME", dir, 1);
  assert_int_equal(compile_once(&opt, 202, msg, sizeof msg), TVK_OK);
  snprintf(dir, sizeof dir, "%s/xdg/tvk", s->root);
  assert_int_equal(count_files(dir, ".so"), 1);

  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/proc/tvk-no-home", 1); /* cannot be created, even by root */
  snprintf(dir, sizeof dir, "%s/tmp", s->root);
  mkdir(dir, 0700);
  setenv("TMPDIR", dir, 1);
  assert_int_equal(compile_once(&opt, 203, msg, sizeof msg), TVK_OK);
  snprintf(dir, sizeof dir, "%s/tmp/tvk-%lu", s->root, (unsigned long)getuid());
  assert_int_equal(count_files(dir, ".so"), 1);

  setenv("TVK_CACHE_DIR", "/proc/tvk-no-cache", 1); /* explicit: no fallback */
  assert_int_equal(compile_once(&opt, 204, msg, sizeof msg), TVK_ERR_DEVICE);
  assert_contains(msg, "/proc/tvk-no-cache");

  env_restore("TVK_CACHE_DIR", saved[0]);
  env_restore("XDG_CACHE_HOME", saved[1]);
  env_restore("HOME", saved[2]);
  env_restore("TMPDIR", saved[3]);
}

/* Writes an empty file at dir/name whose times are `age` seconds old. */
static void touch_aged(const char *dir, const char *name, time_t age) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static bool exists_in(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* A process killed while writing the cache leaves "<file>-XXXXXX"
 * temporaries; the first device opening the cache removes those over an hour
 * old, in the directory and its subdirectories, and nothing else: not a
 * fresh temporary (a live writer's), not a published file. */
static void test_cache_stale_temporaries(void **state) {
  Suite *s = *state;
  char dir[512], sub[600], msg[1024];
  snprintf(dir, sizeof dir, "%s/stale", s->root);
  snprintf(sub, sizeof sub, "%s/kernels", dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  const time_t old = 2 * 3600, young = 60;
  touch_aged(dir, "0a1b.c-Ab12Cd", old);
  touch_aged(dir, "0a1b-77aa.so-Zz99yy", old);
  touch_aged(sub, "0a1b.kernel-Qw12er", old);
  touch_aged(dir, "0a1b.so-Fresh1", young);
  touch_aged(dir, "0a1b.spv", old);
  touch_aged(dir, "00408a4f-9386ff7832312af6.so", old);
  touch_aged(sub, "0a1b.kernel", old);
  DeviceOptions opt = {.cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cache_dir = dir};
  assert_int_equal(compile_once(&opt, 205, msg, sizeof msg), TVK_OK);
  assert_false(exists_in(dir, "0a1b.c-Ab12Cd"));
  assert_false(exists_in(dir, "0a1b-77aa.so-Zz99yy"));
  assert_false(exists_in(sub, "0a1b.kernel-Qw12er"));
  assert_true(exists_in(dir, "0a1b.so-Fresh1"));
  assert_true(exists_in(dir, "0a1b.spv"));
  assert_true(exists_in(dir, "00408a4f-9386ff7832312af6.so"));
  assert_true(exists_in(sub, "0a1b.kernel"));
}

/* The distinct files under dir that this process has mapped (/proc/self/maps):
 * the kernels loaded from a cache directory; -1 if the map cannot be read. */
static int mapped_files_under(const char *dir) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[4096], seen[16][1024];
  int n = 0;
  size_t dl = strlen(dir);
  while (fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/'); /* the pathname is the only field with a '/' */
    if (!path || strncmp(path, dir, dl) || path[dl] != '/') continue;
    path[strcspn(path, "\n")] = 0;
    bool dup = false;
    for (int i = 0; i < n && !dup; i++) dup = !strcmp(seen[i], path);
    if (!dup && n < 16) snprintf(seen[n++], sizeof seen[0], "%s", path);
  }
  fclose(f);
  return n;
}

/* Programs still alive at destroy are closed by it: both kernels' .so files are
 * mapped before and none is after (and under ASan, LSan finds nothing of the
 * programs left). The cache is the test's own, so only its kernels are there. */
static void test_destroy_with_live_programs(void **state) {
  Suite *s = *state;
  char dir[512], real[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/live-programs", s->root);
  Device *d = make_dev_in(2, dir);
  DevBuffer *b = must_alloc(d, 64);
  must_compile(d, "mul_add", mul_add_src, NULL);
  must_compile(d, "cores", cores_src, NULL);
  d->ops->free(d, b);
  assert_non_null(realpath(dir, real)); /* as the map names it */
  assert_int_equal(mapped_files_under(real), 2);
  d->ops->destroy(d);
  assert_int_equal(mapped_files_under(real), 0);
}

/* ---- damaged cache files ---- */

/* cache.c's seal: a sealed file reads back as written; cut to any shorter
 * length, or with any one byte changed, or written without a seal, it is
 * refused (EBADMSG), never returned. */
static void test_cache_seal(void **state) {
  Suite *s = *state;
  char path[512];
  enum { N = 1000 };
  unsigned char data[N];
  uint64_t rng = 0x2545f4914f6cdd1du;
  for (int i = 0; i < N; i++) data[i] = (unsigned char)xorshift64(&rng);
  snprintf(path, sizeof path, "%s/seal-test", s->root);
  assert_int_equal(cache_file_write_sealed(path, data, N, 0755), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, N + CACHE_SEAL_BYTES);
  assert_int_equal(st.st_mode & 0777, 0755);
  void *back;
  size_t n;
  assert_int_equal(cache_file_read_sealed(path, &back, &n), 0);
  assert_int_equal(n, N);
  assert_memory_equal(back, data, N);
  free(back);

  void *whole;
  size_t wn;
  assert_int_equal(cache_file_read(path, &whole, &wn), 0);
  unsigned char *w = whole;
  for (size_t len = 0; len < wn; len++) { /* every truncation */
    assert_int_equal(truncate(path, (off_t)len), 0);
    back = (void *)1;
    if (cache_file_read_sealed(path, &back, &n) != EBADMSG) fail_msg("cut to %zu: accepted", len);
    assert_null(back);
  }
  for (size_t i = 0; i < wn; i++) { /* every flipped byte, payload and seal */
    w[i] ^= 0x10;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w, 1, wn, f), wn);
    fclose(f);
    w[i] ^= 0x10;
    if (cache_file_read_sealed(path, &back, &n) != EBADMSG)
      fail_msg("byte %zu flipped: accepted", i);
  }
  FILE *f = fopen(path, "wb"); /* the payload alone: no seal */
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, N, f), N);
  fclose(f);
  assert_int_equal(cache_file_read_sealed(path, &back, &n), EBADMSG);
  free(whole);
  unlink(path);
  assert_int_equal(cache_file_read_sealed(path, &back, &n), ENOENT);
  assert_int_equal(cache_file_write_sealed(path, data, 0, 0600), 0); /* empty payloads too */
  assert_int_equal(cache_file_read_sealed(path, &back, &n), 0);
  assert_int_equal(n, 0);
  free(back);
  unlink(path);
}

/* Damages the one .so of dir: `cut` truncates it to half its size (what a full
 * disk or a copy cut short leaves), else one byte in its middle is flipped.
 * Returns the inode of the damaged file. */
static ino_t damage_so(const char *dir, bool cut, off_t *size) {
  char so[256], path[1024];
  struct stat st;
  assert_true(find_so(dir, so, sizeof so));
  snprintf(path, sizeof path, "%s/%s", dir, so);
  assert_int_equal(stat(path, &st), 0);
  *size = st.st_size;
  if (cut) {
    assert_int_equal(truncate(path, st.st_size / 2), 0);
  } else {
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, st.st_size / 2), 1);
    c ^= 0x01;
    assert_int_equal(pwrite(fd, &c, 1, st.st_size / 2), 1);
    close(fd);
  }
  return st.st_ino;
}

/* A cached .so cut to half its size made every later run die of SIGBUS inside
 * dlopen (it maps the file past its end). Now the seal refuses it: the kernel
 * is rebuilt (a miss), runs, and the file is replaced by a whole one. The same
 * for a byte flipped in the middle, which dlopen might have taken. */
static void test_cache_damaged_so_rebuilt(void **state) {
  Suite *s = *state;
  for (int cut = 1; cut >= 0; cut--) {
    char src[512], dir[512], so[256], path[1024];
    snprintf(dir, sizeof dir, "%s/damaged-%d", s->root, cut);
    tagged_src(src, sizeof src, "damaged", 40 + cut);
    Device *d = make_dev_in(1, dir);
    DevProgram *p = must_compile(d, "damaged", src, NULL);
    d->ops->destroy(d); /* the .so is unloaded, so the next dlopen reads the file */
    off_t size;
    ino_t old = damage_so(dir, cut, &size);

    d = make_dev_in(1, dir); /* as the next run of the program would */
    bool hit = true;
    p = must_compile(d, "damaged", src, &hit);
    assert_false(hit);
    assert_int_equal(run_tagged(d, p), 40 + cut);
    d->ops->destroy(d);
    assert_true(find_so(dir, so, sizeof so));
    snprintf(path, sizeof path, "%s/%s", dir, so);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_ino != old);      /* published anew */
    assert_int_equal(st.st_size, size); /* whole again */
    assert_int_equal(count_files(dir, NULL), 1);

    d = make_dev_in(1, dir); /* and the new file is a hit */
    p = must_compile(d, "damaged", src, &hit);
    assert_true(hit);
    assert_int_equal(run_tagged(d, p), 40 + cut);
    d->ops->destroy(d);
  }
}

/* ---- read-only caches ---- */

/* Fills dir with the kernel of tag `have` (a normal, writable device). */
static void fill_cache(const char *dir, int have) {
  char src[512];
  tagged_src(src, sizeof src, "ro", have);
  Device *d = make_dev_in(1, dir);
  bool hit = true;
  must_compile(d, "ro", src, &hit);
  assert_false(hit);
  d->ops->destroy(d);
}

/* The checks of a read-only cache dir that holds kernel `have` and not
 * `lacks`, on a device made with `opt` (its cache_dir is dir): the hit is
 * served, the miss compiles and runs, a second compile of the miss is served
 * from the device's own build directory, and nothing in dir changes. The
 * build directory goes under tmpdir and is gone after destroy. Returns NULL or
 * what went wrong: it runs in a child process too, where cmocka cannot. */
static const char *readonly_checks(const DeviceOptions *opt, const char *tmpdir, int have,
                                   int lacks) {
  static char why[1200];
  char src_have[512], src_lacks[512];
  tagged_src(src_have, sizeof src_have, "ro", have);
  tagged_src(src_lacks, sizeof src_lacks, "ro", lacks);
  uint64_t before = dir_state(opt->cache_dir);
  char *saved = env_save("TMPDIR");
  setenv("TMPDIR", tmpdir, 1);
  Device *d = NULL;
  Error err;
  const char *bad = NULL;
  if (cpu_device_create(opt, &d, &err) != TVK_OK) {
    snprintf(why, sizeof why, "create: %s", err.msg);
    env_restore("TMPDIR", saved);
    return why;
  }
  DevProgram *p[3] = {NULL, NULL, NULL};
  const bool hit[3] = {true, false, true}; /* served, built, served from the build dir */
  const char *srcs[3] = {src_have, src_lacks, src_lacks};
  const int tags[3] = {have, lacks, lacks};
  for (int i = 0; i < 3 && !bad; i++) {
    bool h = !hit[i];
    if (d->ops->compile(d, "ro", srcs[i], &p[i], &h, NULL) != TVK_OK) {
      snprintf(why, sizeof why, "compile %d: %s", i, d->err.msg);
      bad = why;
    } else if (h != hit[i]) {
      snprintf(why, sizeof why, "compile %d: cache_hit %d, expected %d", i, h, hit[i]);
      bad = why;
    } else {
      DevBuffer *b = NULL;
      int32_t v = -1;
      if (d->ops->alloc(d, 4, &b) != TVK_OK || d->ops->copy_in(d, b, 0, &v, 4) != TVK_OK ||
          d->ops->launch(d, p[i], &b, 1, NULL, 0, NULL) != TVK_OK ||
          d->ops->copy_out(d, b, 0, &v, 4) != TVK_OK || v != tags[i]) {
        snprintf(why, sizeof why, "run %d: got %d, expected %d (%s)", i, v, tags[i], d->err.msg);
        bad = why;
      }
      if (b) d->ops->free(d, b);
    }
  }
  if (!bad && count_files(tmpdir, NULL) != 1) {
    snprintf(why, sizeof why, "expected one build directory in '%s', found %d", tmpdir,
             count_files(tmpdir, NULL));
    bad = why;
  }
  d->ops->destroy(d);
  env_restore("TMPDIR", saved);
  if (!bad && count_files(tmpdir, NULL) != 0) bad = "the build directory outlived the device";
  if (!bad && dir_state(opt->cache_dir) != before) bad = "the read-only cache was written";
  return bad;
}

/* A read-only cache through the option (DeviceOptions.cache_readonly, what
 * $TVK_CACHE_READONLY sets): served, never written, even where the directory
 * could be written; and a damaged file in it is not replaced but worked around. */
static void test_cache_readonly_option(void **state) {
  Suite *s = *state;
  char dir[512], tmp[512];
  snprintf(dir, sizeof dir, "%s/ro-option", s->root);
  snprintf(tmp, sizeof tmp, "%s/ro-option-tmp", s->root);
  assert_int_equal(mkdir(tmp, 0700), 0);
  fill_cache(dir, 501);
  DeviceOptions opt = {
      .cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cache_dir = dir, .cache_readonly = 1};
  const char *bad = readonly_checks(&opt, tmp, 501, 502);
  if (bad) fail_msg("%s", bad);

  /* The same through the environment. */
  char *saved = env_save("TVK_CACHE_READONLY");
  setenv("TVK_CACHE_READONLY", "1", 1);
  opt.cache_readonly = 0;
  bad = readonly_checks(&opt, tmp, 501, 503);
  env_restore("TVK_CACHE_READONLY", saved);
  if (bad) fail_msg("%s", bad);

  /* A damaged file is a miss that is built privately; the file stays as it was. */
  off_t size;
  damage_so(dir, true, &size);
  uint64_t damaged = dir_state(dir);
  char src[512];
  tagged_src(src, sizeof src, "ro", 501);
  opt.cache_readonly = 1;
  Device *d = make_dev_in(1, dir);
  d->ops->destroy(d);
  Error err;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_OK);
  bool hit = true;
  DevProgram *p = must_compile(d, "ro", src, &hit);
  assert_false(hit);
  assert_int_equal(run_tagged(d, p), 501);
  d->ops->destroy(d);
  assert_true(dir_state(dir) == damaged);

  /* Read-only and missing: nothing to serve, and nothing is created. */
  snprintf(dir, sizeof dir, "%s/ro-missing", s->root);
  char msg[1024];
  assert_int_equal(compile_once(&opt, 504, msg, sizeof msg), TVK_ERR_DEVICE);
  assert_contains(msg, dir);
  assert_contains(msg, "read-only");
  assert_int_equal(access(dir, F_OK), -1);
}

/* Makes dir read-only in a new mount namespace of this (child) process: a
 * read-only bind mount of dir onto itself. Root ignores permission bits but
 * not a read-only mount. False when not permitted. */
static bool mount_read_only(const char *dir) {
  if (unshare(CLONE_NEWNS) != 0) return false;
  /* Private first, so that the bind mount does not propagate to the parent's
   * namespace (on systemd machines / is shared). */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return false;
  if (mount(dir, dir, NULL, MS_BIND, NULL) != 0) return false;
  return mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0;
}

/* A cache directory the process cannot write, with no option set: the reported
 * defect (`cannot use kernel cache directory ...: Permission denied`). Such a
 * directory is now detected (access(W_OK) fails) and used read-only. For a
 * user other than root, permission bits make it read-only; root, who ignores
 * them, gets a read-only bind mount in a child process with its own mount
 * namespace, which needs CAP_SYS_ADMIN: without it the test says so and
 * checks the permission-bit case only where it applies. */
static void test_cache_readonly_dir(void **state) {
  Suite *s = *state;
  char dir[512], tmp[512];
  snprintf(dir, sizeof dir, "%s/ro-dir", s->root);
  snprintf(tmp, sizeof tmp, "%s/ro-dir-tmp", s->root);
  assert_int_equal(mkdir(tmp, 0700), 0);
  fill_cache(dir, 601);
  DeviceOptions opt = {.cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cache_dir = dir};
  if (geteuid() != 0) {
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_not_equal(access(dir, W_OK), 0);
    const char *bad = readonly_checks(&opt, tmp, 601, 602);
    chmod(dir, 0700);
    if (bad) fail_msg("%s", bad);
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (!mount_read_only(dir)) _exit(77);
    if (access(dir, W_OK) == 0) {
      fprintf(stderr, "the read-only mount of '%s' is writable\n", dir);
      _exit(1);
    }
    const char *bad = readonly_checks(&opt, tmp, 601, 602);
    if (bad) fprintf(stderr, "read-only mount: %s\n", bad);
    fflush(stderr);
    _exit(bad ? 1 : 0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws));
  if (WEXITSTATUS(ws) == 77)
    fprintf(stderr, "test_cache_readonly_dir: no read-only bind mount possible "
                    "(needs CAP_SYS_ADMIN); that case was not run\n");
  else
    assert_int_equal(WEXITSTATUS(ws), 0);
}

/* ---- a compiler that fails or hangs ---- */

/* An executable shell script in the suite's directory, path into out. */
static void write_script(const Suite *s, const char *name, const char *body, char *out,
                         size_t outn) {
  snprintf(out, outn, "%s/%s", s->root, name);
  FILE *f = fopen(out, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s", body);
  fclose(f);
  assert_int_equal(chmod(out, 0755), 0);
}

/* A compiler that fails --version with a screenful: the message keeps the
 * first line and the exit status, not all of it. */
static void test_cc_version_fails(void **state) {
  Suite *s = *state;
  char cc[512];
  write_script(s, "fail-version-cc",
               "echo 'fake-cc: licence expired'\n"
               "echo 'second line of the explanation'\n"
               "echo 'third line'\n"
               "exit 1\n",
               cc, sizeof cc);
  DeviceOptions opt = {
      .cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cc = cc, .cache_dir = s->cache};
  char msg[1024];
  assert_int_equal(compile_once(&opt, 1, msg, sizeof msg), TVK_ERR_DEVICE);
  assert_contains(msg, cc);
  assert_contains(msg, "--version");
  assert_contains(msg, "exit status 1");
  assert_contains(msg, "fake-cc: licence expired");
  if (strstr(msg, "second line") || strchr(msg, '\n')) fail_msg("more than one line: %s", msg);
}

/* -march=native only where the compiler builds for this machine: a wrapper
 * of cc that claims another target in -dumpmachine (as a cross compiler
 * does) is never given it; one that claims this machine's is (x86_64 and
 * aarch64, where the CPU model is known). Every argument list is logged. */
static void test_native_only_for_native_cc(void **state) {
  Suite *s = *state;
  for (int native = 0; native < 2; native++) {
    char cc[512], log[600], body[1400], dir[600];
    snprintf(log, sizeof log, "%s/cc-args-%d.log", s->root, native);
    snprintf(dir, sizeof dir, "%s/native-cache-%d", s->root, native);
    unlink(log);
#if defined(__x86_64__)
    const char *here = "x86_64-linux-gnu";
#elif defined(__aarch64__)
    const char *here = "aarch64-linux-gnu";
#else
    const char *here = NULL;
#endif
    if (native && !here) continue;
    snprintf(body, sizeof body,
             "if [ \"$1\" = -dumpmachine ]; then echo %s; exit 0; fi\n"
             "echo \"$@\" >> %s\n"
             "exec cc \"$@\"\n",
             native ? here : "riscv32-unknown-elf", log);
    write_script(s, native ? "native-cc" : "cross-cc", body, cc, sizeof cc);
    DeviceOptions opt = {
        .cpu_tiers = TVK_CPU_TIERS_OPTIMISED, .threads = 1, .cc = cc, .cache_dir = dir};
    char msg[1024];
    assert_int_equal(compile_once(&opt, 40 + native, msg, sizeof msg), TVK_OK);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char args[4096] = {0};
    size_t n = fread(args, 1, sizeof args - 1, f);
    fclose(f);
    args[n] = 0;
    bool has = strstr(args, "-march=native") != NULL;
    bool cpu_known = access("/proc/cpuinfo", R_OK) == 0;
    if (!native && has) fail_msg("a cross compiler was given -march=native: %s", args);
    if (native && cpu_known && !has) fail_msg("a native compiler lost -march=native: %s", args);
  }
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* True once process pid is gone or a zombie (a killed grandchild is reaped by
 * init, not by us), waiting up to 5 s. */
static bool process_dead(long pid) {
  for (int i = 0; i < 500; i++) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the state follows the command's name */
    if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X')) return true;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* A hung compiler blocked tvk_realize forever. With a timeout of 1 s the
 * compile returns TVK_ERR_COMPILE naming the compiler, the kernel and the
 * timeout, within a few seconds; the compiler and the process it started are
 * killed, the compiler is reaped (no child of ours is left), and no temp file
 * stays in the cache. One that hangs on -dumpmachine (the probe after
 * --version) is not run again for the kernel: one timeout, not two. */
static void test_cc_timeout(void **state) {
  Suite *s = *state;
  char cc[512], pids[512], calls[512], body[2048], dir[512];
  snprintf(pids, sizeof pids, "%s/hung-cc.pids", s->root);
  snprintf(calls, sizeof calls, "%s/hung-cc.calls", s->root);
  snprintf(body, sizeof body,
           "if [ \"$1\" = --version ]; then echo 'hung-cc 1.0'; exit 0; fi\n"
           "echo \"$1\" >> '%s'\n"
           "echo $$ > '%s'\n"
           "sleep 1000 &\n"
           "echo $! >> '%s'\n"
           "wait\n",
           calls, pids, pids);
  write_script(s, "hung-cc", body, cc, sizeof cc);
  snprintf(dir, sizeof dir, "%s/hung-cache", s->root);
  DeviceOptions opt = {.cpu_tiers = TVK_CPU_TIERS_OPTIMISED,
                       .threads = 1,
                       .cc = cc,
                       .cache_dir = dir,
                       .cc_timeout = 1};
  Device *d = NULL;
  Error err;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_OK);
  char src[512];
  tagged_src(src, sizeof src, "hangs", 1);
  DevProgram *p = (DevProgram *)d;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(d->ops->compile(d, "hangs", src, &p, NULL, NULL), TVK_ERR_COMPILE);
  double took = seconds_since(&t0);
  assert_null(p);
  assert_contains(d->err.msg, cc);
  assert_contains(d->err.msg, "'hangs'");
  assert_contains(d->err.msg, "1 s");
  assert_contains(d->err.msg, "TVK_CC_TIMEOUT");
  if (took < 0.9 || took > 10) fail_msg("the compile took %.2f s with a 1 s timeout", took);
  /* No child of ours left, running or a zombie. */
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
  FILE *f = fopen(pids, "r");
  assert_non_null(f);
  long sh = 0, sleeper = 0;
  assert_int_equal(fscanf(f, "%ld %ld", &sh, &sleeper), 2);
  fclose(f);
  assert_true(process_dead(sh));
  assert_true(process_dead(sleeper));          /* the compiler's own child too */
  assert_int_equal(count_files(dir, NULL), 0); /* no temp source or output left */
  f = fopen(calls, "r");
  assert_non_null(f);
  char line[256];
  int runs = 0;
  while (fgets(line, sizeof line, f)) runs++;
  fclose(f);
  if (runs != 1) fail_msg("the hung compiler ran %d times after --version (1: -dumpmachine)", runs);
  d->ops->destroy(d);

  /* One that hangs on --version, with the timeout from the environment. */
  write_script(s, "hung-version-cc", "sleep 1000\n", cc, sizeof cc);
  char *saved = env_save("TVK_CC_TIMEOUT");
  setenv("TVK_CC_TIMEOUT", "1", 1);
  opt.cc_timeout = 0;
  char msg[1024];
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(compile_once(&opt, 2, msg, sizeof msg), TVK_ERR_COMPILE);
  took = seconds_since(&t0);
  assert_contains(msg, cc);
  assert_contains(msg, "--version");
  assert_contains(msg, "1 s");
  if (took > 10) fail_msg("the probe took %.2f s with a 1 s timeout", took);
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);

  /* A timeout that is not a number of seconds is refused, naming it. */
  setenv("TVK_CC_TIMEOUT", "2m", 1);
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_ERR_INVALID_ARG);
  assert_null(d);
  assert_contains(err.msg, "TVK_CC_TIMEOUT");
  assert_contains(err.msg, "'2m'");
  env_restore("TVK_CC_TIMEOUT", saved);
  opt.cc_timeout = -1;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_ERR_INVALID_ARG);
  assert_contains(err.msg, "-1");
}

/* ---- the compile tiers (cpu_program.c, cpu_tcc.c) ---- */

/* o[i] = a[i] * 3 + vals[1] for i < vals[0], cores interleaved. No header:
 * TinyCC's tier compiles with none (as render_c.c's prelude does). `tag`
 * makes sources distinct for the cache. */
static void fast_src(char *out, size_t n, const char *name, int tag) {
  snprintf(out, n,
           "typedef int int32_t;\n"
           "void %s(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
           "  float *o = bufs[0];\n"
           "  const float *a = bufs[1];\n"
           "  for (int32_t i = core_id; i < vals[0]; i += n_cores) o[i] = a[i] * 3.0f + "
           "(float)vals[1]; /* %d */\n"
           "}\n",
           name, tag);
}

/* Launches p on n elements and checks every one against a plain loop. */
static void run_fast(Device *d, DevProgram *p, int32_t n, int32_t add) {
  float *a = malloc((size_t)n * sizeof *a), *o = malloc((size_t)n * sizeof *o);
  assert_non_null(a), assert_non_null(o);
  for (int32_t i = 0; i < n; i++) a[i] = (float)(i % 97) - 40.5f;
  DevBuffer *b[2] = {must_alloc(d, (size_t)n * 4), must_alloc(d, (size_t)n * 4)};
  assert_int_equal(d->ops->copy_in(d, b[1], 0, a, (size_t)n * 4), TVK_OK);
  const int32_t vals[2] = {n, add};
  assert_int_equal(d->ops->launch(d, p, b, 2, vals, 2, NULL), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b[0], 0, o, (size_t)n * 4), TVK_OK);
  for (int32_t i = 0; i < n; i++)
    if (o[i] != (float)((double)a[i] * 3.0 + add))
      fail_msg("element %d: %g, expected %g", i, o[i], (double)a[i] * 3.0 + add);
  d->ops->free(d, b[0]);
  d->ops->free(d, b[1]);
  free(a);
  free(o);
}

typedef struct {
  int warnings;
  char last[1024];
} Warned;

static void on_log(void *user, tvk_log_level level, const char *msg) {
  Warned *w = user;
  if (level == TVK_LOG_WARN) w->warnings++;
  snprintf(w->last, sizeof w->last, "%s", msg);
}

static Device *tier_dev(const char *dir, int tiers, const char *cc, Warned *w) {
  DeviceOptions opt = {.threads = 2, .cache_dir = dir, .cpu_tiers = tiers, .cc = cc};
  if (w) opt.log = (LogSink){on_log, w};
  Device *d = NULL;
  Error err;
  if (cpu_device_create(&opt, &d, &err) != TVK_OK) fail_msg("cpu_device_create: %s", err.msg);
  return d;
}

/* Fast then optimised: TinyCC's code runs at once, the system compiler's
 * replaces it while launches go on (each checked), and lands in the cache,
 * where a new device finds it. */
static void test_tiers_fast_then_optimised(void **state) {
  Suite *s = *state;
  if (!cpu_tcc_available()) skip();
  char dir[512], src[1024];
  snprintf(dir, sizeof dir, "%s/tiers-cache", s->root);
  fast_src(src, sizeof src, "tiered", 1);
  Warned w = {0};
  Device *d = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, NULL, &w);
  bool hit = true;
  DevProgram *p = must_compile(d, "tiered", src, &hit);
  assert_false(hit);
  CpuKernelFn fast = cpu_program_fn(p);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int launches = 0;
  while (cpu_program_fn(p) == fast && seconds_since(&t0) < 120) {
    run_fast(d, p, 4099, launches % 7);
    launches++;
  }
  if (cpu_program_fn(p) == fast) fail_msg("no optimised build after %d launches", launches);
  run_fast(d, p, 4099, 5);
  assert_int_equal(d->ops->wait_compiles(d), TVK_OK);
  assert_int_equal(count_files(dir, ".so"), 1);
  assert_int_equal(count_files(dir, NULL), 1); /* no temp file left */
  assert_int_equal(w.warnings, 0);
  d->ops->program_free(d, p);
  d->ops->destroy(d);

  Device *d2 = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, NULL, NULL);
  p = must_compile(d2, "tiered", src, &hit);
  assert_true(hit); /* the next process starts optimised */
  run_fast(d2, p, 100, 1);
  d2->ops->destroy(d2);
}

/* FAST writes nothing to the cache; OPTIMISED has its build there before
 * compile returns; a destroyed device drops the builds it has not begun. */
static void test_tiers_fast_and_optimised_only(void **state) {
  Suite *s = *state;
  if (!cpu_tcc_available()) skip();
  char dir[512], src[1024];
  snprintf(dir, sizeof dir, "%s/tiers-only", s->root);
  fast_src(src, sizeof src, "only", 2);
  Device *d = tier_dev(dir, TVK_CPU_TIERS_FAST, NULL, NULL);
  DevProgram *p = must_compile(d, "only", src, NULL);
  run_fast(d, p, 1000, 3);
  assert_int_equal(d->ops->wait_compiles(d), TVK_OK);
  assert_int_equal(count_files(dir, ".so"), 0);
  d->ops->destroy(d);

  d = tier_dev(dir, TVK_CPU_TIERS_OPTIMISED, NULL, NULL);
  p = must_compile(d, "only", src, NULL);
  assert_int_equal(count_files(dir, ".so"), 1);
  run_fast(d, p, 1000, 3);
  d->ops->destroy(d);

  /* Many kernels queued for the background, then the device goes at once:
   * no crash, no leak (the sanitizer build), and no temp files left. */
  d = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, NULL, NULL);
  for (int k = 0; k < 12; k++) {
    fast_src(src, sizeof src, "many", 100 + k);
    p = must_compile(d, "many", src, NULL);
    run_fast(d, p, 64, k);
    if (k % 3 == 0) d->ops->program_free(d, p); /* some freed while queued or building */
  }
  d->ops->destroy(d);
  assert_int_equal(count_files(dir, NULL), count_files(dir, ".so"));
}

/* A warm cache needs no compiler: with none on PATH (and one that does not
 * exist as the option) a device loads the build made for this machine. A
 * kernel not in the cache is then TinyCC's, or, with the system compiler
 * only, an error that says what is missing. */
static void test_warm_cache_without_compiler(void **state) {
  Suite *s = *state;
  char dir[512], src[1024], other[1024];
  snprintf(dir, sizeof dir, "%s/warm-no-cc", s->root);
  fast_src(src, sizeof src, "warm", 3);
  fast_src(other, sizeof other, "warm", 4);
  Device *d = tier_dev(dir, TVK_CPU_TIERS_OPTIMISED, NULL, NULL);
  d->ops->program_free(d, must_compile(d, "warm", src, NULL));
  d->ops->destroy(d);

  char *path = env_save("PATH"), *cc = env_save("CC");
  setenv("PATH", "", 1);
  unsetenv("CC");
  for (int round = 0; round < 2; round++) {
    d = tier_dev(dir, TVK_CPU_TIERS_OPTIMISED, round ? "/nonexistent/cc" : NULL, NULL);
    bool hit = false;
    DevProgram *p = must_compile(d, "warm", src, &hit);
    assert_true(hit);
    run_fast(d, p, 500, 2);
    p = (DevProgram *)d;
    assert_int_equal(d->ops->compile(d, "warm", other, &p, NULL, NULL), TVK_ERR_DEVICE);
    assert_null(p);
    assert_contains(d->err.msg, "'warm' is not in the kernel cache");
    assert_contains(d->err.msg, "no C compiler found");
    d->ops->destroy(d);
  }
  if (cpu_tcc_available()) {
    Warned w = {0};
    d = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, NULL, &w);
    DevProgram *p = must_compile(d, "warm", other, NULL);
    run_fast(d, p, 500, 4);
    assert_int_equal(d->ops->wait_compiles(d), TVK_OK); /* nothing queued: no compiler */
    assert_int_equal(w.warnings, 0);
    d->ops->destroy(d);
  }
  env_restore("PATH", path);
  env_restore("CC", cc);
  assert_int_equal(count_files(dir, ".so"), 1);
}

/* A compiler whose --version says something new makes its own entries: the
 * build of another compiler is not taken for its own. */
static void test_new_compiler_new_entries(void **state) {
  Suite *s = *state;
  char dir[512], src[1024], cc[512];
  snprintf(dir, sizeof dir, "%s/new-cc", s->root);
  fast_src(src, sizeof src, "newcc", 5);
  write_script(s, "newer-cc",
               "if [ \"$1\" = --version ]; then echo 'newer-cc 99.1'; exit 0; fi\n"
               "exec cc \"$@\"\n",
               cc, sizeof cc);
  bool hit = true;
  for (int round = 0; round < 3; round++) {
    Device *d = tier_dev(dir, TVK_CPU_TIERS_OPTIMISED, round == 1 ? cc : NULL, NULL);
    DevProgram *p = must_compile(d, "newcc", src, &hit);
    assert_int_equal(hit, round == 2); /* the first compiler's build is still there */
    assert_int_equal(count_files(dir, ".so"), round == 0 ? 1 : 2);
    run_fast(d, p, 300, round);
    d->ops->destroy(d);
  }
}

/* TinyCC rejects a kernel (here: it includes a header, and TinyCC compiles
 * with none): the system compiler builds it, with one warning per device.
 * An optimised build that fails leaves TinyCC's code running, with a
 * warning that says so. */
static void test_tiers_fallbacks(void **state) {
  Suite *s = *state;
  if (!cpu_tcc_available()) skip();
  char dir[512], src[1024], cc[512];
  snprintf(dir, sizeof dir, "%s/fallback", s->root);
  Warned w = {0};
  Device *d = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, NULL, &w);
  for (int k = 0; k < 2; k++) {
    tagged_src(src, sizeof src, "with_header", 40 + k);
    DevProgram *p = must_compile(d, "with_header", src, NULL);
    assert_int_equal(run_tagged(d, p), 40 + k);
  }
  assert_int_equal(w.warnings, 1);
  assert_contains(w.last, "with_header");
  assert_contains(w.last, "stdint.h");
  assert_int_equal(count_files(dir, ".so"), 2); /* built at once, by the system compiler */
  d->ops->destroy(d);

  write_script(s, "broken-cc",
               "if [ \"$1\" = --version ]; then echo 'broken-cc 1'; exit 0; fi\n"
               "echo 'broken-cc: cannot build today' >&2; exit 1\n",
               cc, sizeof cc);
  memset(&w, 0, sizeof w);
  d = tier_dev(dir, TVK_CPU_TIERS_FAST_THEN_OPTIMISED, cc, &w);
  fast_src(src, sizeof src, "stays_fast", 6);
  DevProgram *p = must_compile(d, "stays_fast", src, NULL);
  CpuKernelFn fast = cpu_program_fn(p);
  assert_int_equal(d->ops->wait_compiles(d), TVK_OK);
  assert_true(cpu_program_fn(p) == fast);
  assert_int_equal(w.warnings, 1);
  assert_contains(w.last, "stays_fast");
  assert_contains(w.last, "cannot build today");
  run_fast(d, p, 700, 6);
  d->ops->destroy(d);
}

/* The tiers from $TVK_CPU_TIERS, and the errors for values that name none. */
static void test_tiers_setting(void **state) {
  Suite *s = *state;
  char dir[512], src[1024];
  snprintf(dir, sizeof dir, "%s/tiers-env", s->root);
  char *saved = env_save("TVK_CPU_TIERS");
  setenv("TVK_CPU_TIERS", "optimised", 1);
  Device *d = tier_dev(dir, 0, NULL, NULL);
  fast_src(src, sizeof src, "envtier", 7);
  d->ops->program_free(d, must_compile(d, "envtier", src, NULL));
  assert_int_equal(count_files(dir, ".so"), 1); /* synchronous: the system compiler */
  d->ops->destroy(d);
  setenv("TVK_CPU_TIERS", "fastest", 1);
  DeviceOptions opt = {.threads = 1, .cache_dir = dir};
  Error err;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_ERR_INVALID_ARG);
  assert_null(d);
  assert_contains(err.msg, "TVK_CPU_TIERS");
  assert_contains(err.msg, "'fastest'");
  env_restore("TVK_CPU_TIERS", saved);
  opt.cpu_tiers = 9;
  assert_int_equal(cpu_device_create(&opt, &d, &err), TVK_ERR_INVALID_ARG);
  assert_contains(err.msg, "cpu_tiers is 9");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create),
      cmocka_unit_test(test_buffer_round_trip),
      cmocka_unit_test(test_buffer_reuse),
      cmocka_unit_test(test_buffer_bounds),
      cmocka_unit_test(test_alloc_too_big),
      cmocka_unit_test(test_kernel_mul_add),
      cmocka_unit_test(test_each_core_once),
      cmocka_unit_test(test_launch_parts),
      cmocka_unit_test(test_many_buffers),
      cmocka_unit_test(test_launch_errors),
      cmocka_unit_test(test_cache_hit_and_miss),
      cmocka_unit_test(test_cache_corrupt_rebuilt),
      cmocka_unit_test(test_compile_error),
      cmocka_unit_test(test_missing_symbol_and_bad_names),
      cmocka_unit_test(test_no_compiler),
      cmocka_unit_test(test_cache_locations),
      cmocka_unit_test(test_cache_stale_temporaries),
      cmocka_unit_test(test_destroy_with_live_programs),
      cmocka_unit_test(test_cache_seal),
      cmocka_unit_test(test_cache_damaged_so_rebuilt),
      cmocka_unit_test(test_cache_readonly_option),
      cmocka_unit_test(test_cache_readonly_dir),
      cmocka_unit_test(test_cc_version_fails),
      cmocka_unit_test(test_native_only_for_native_cc),
      cmocka_unit_test(test_cc_timeout),
      cmocka_unit_test(test_tiers_fast_then_optimised),
      cmocka_unit_test(test_tiers_fast_and_optimised_only),
      cmocka_unit_test(test_warm_cache_without_compiler),
      cmocka_unit_test(test_new_compiler_new_entries),
      cmocka_unit_test(test_tiers_fallbacks),
      cmocka_unit_test(test_tiers_setting),
  };
  return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
