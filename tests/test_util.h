/* Helpers shared by the internal test suites: a fixed-seed PRNG, temporary
 * directories and the build tree's kernel cache, the environment, and building
 * kernel ASTs by hand. Include after <cmocka.h> and the ir/ headers.
 * Everything is static inline so a suite pays only for what it uses.
 *
 * The outside-user suites (test_ops, test_nn) see only tvk.h: their helpers
 * are in ref.h and nn_util.h instead. */
#ifndef TVK_TESTS_TEST_UTIL_H
#define TVK_TESTS_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/uop.h"
#include "ir/view.h"

/* ---- a fixed-seed PRNG ---- */

/* xorshift64 (Marsaglia's 13, 7, 17): the next value of *state, which must not
 * be 0. Each suite keeps its own state and seed, so a failure reproduces. */
static inline uint64_t xorshift64(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* ---- files and directories ---- */

/* rm -rf path (no links followed). */
static inline void rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *dir = opendir(path);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[1024];
      int k = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      if (k > 0 && (size_t)k < sizeof sub) rm_rf(sub); /* a longer path is not ours */
    }
    if (dir) closedir(dir);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* mkdir -p path (mode 0700 for what it creates). 0, or -1 with errno set. */
static inline int mkdir_p(const char *path) {
  char buf[1024];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return errno = ENAMETOOLONG, -1;
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* A fresh directory $TMPDIR/tvk-<tag>-XXXXXX (/tmp without TMPDIR) into buf.
 * False when it cannot be made. The caller removes it with rm_rf. */
static inline bool temp_dir(char *buf, size_t n, const char *tag) {
  const char *tmp = getenv("TMPDIR");
  int k = snprintf(buf, n, "%s/tvk-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
  return k > 0 && (size_t)k < n && mkdtemp(buf) != NULL;
}

/* The entries of dir whose name ends in suffix (every entry but . and .. when
 * suffix is NULL); -1 when dir cannot be read. */
static inline int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  size_t sl = suffix ? strlen(suffix) : 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (!suffix || (len >= sl && !strcmp(e->d_name + len - sl, suffix))) n++;
  }
  closedir(d);
  return n;
}

/* A fingerprint of what dir holds: every entry's name, inode, size and
 * modification time, in any order. Two equal answers mean nothing was added,
 * removed, replaced (a rename gives a new inode) or written in between. 0 when
 * dir cannot be read. */
static inline uint64_t dir_state(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  uint64_t sum = 1;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[1024];
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a of the name, then the facts */
    for (const char *c = e->d_name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3u;
    if (lstat(path, &st) == 0) {
      uint64_t facts[4] = {(uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                           (uint64_t)st.st_mtim.tv_nsec};
      for (int i = 0; i < 4; i++) h = (h ^ facts[i]) * 0x100000001b3u;
    }
    sum += h * 0x9e3779b97f4a7c15u; /* order-free: a sum of mixed entries */
  }
  closedir(d);
  return sum;
}

/* ---- the build tree's kernel cache ---- */

#ifndef TVK_TEST_CACHE_DIR /* CMake defines it: <build tree>/test-cache */
#define TVK_TEST_CACHE_DIR "test-cache"
#endif

/* The kernel cache that every run of the suites in one build tree shares, so a
 * second ctest compiles nothing: $TVK_CACHE_DIR as the process started with it
 * (ctest sets it to the build tree's test-cache), else TVK_TEST_CACHE_DIR (the
 * same directory, for a suite run by hand). Created if missing; no test
 * deletes it. A test of the cache itself (hits, misses, damaged files, where
 * it goes) must not use it: other suites write to it at the same time, and
 * what it holds depends on earlier runs. Those use a fresh temp_dir.
 * The answer of the first call is kept, so a test that changes $TVK_CACHE_DIR
 * does not move it; call it once in the suite's setup. */
static inline const char *test_cache_dir(void) {
  static char dir[1024];
  if (!dir[0]) {
    const char *env = getenv("TVK_CACHE_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : TVK_TEST_CACHE_DIR);
    if (mkdir_p(dir) != 0)
      fprintf(stderr, "cannot create the cache '%s': %s\n", dir, strerror(errno));
  }
  return dir;
}

/* ---- Vulkan required or not ---- */

/* True when $TVK_REQUIRE_VK is set and not "0" (.ci/run sets it: CI installs a
 * Vulkan device, so a test that would skip the Vulkan part for want of one
 * fails instead). */
static inline bool vk_required(void) {
  const char *req = getenv("TVK_REQUIRE_VK");
  return req && *req && strcmp(req, "0") != 0;
}

/* ---- the environment ---- */

/* A copy of $name (NULL when unset), for env_restore. */
static inline char *env_save(const char *name) {
  const char *v = getenv(name);
  return v ? strdup(v) : NULL;
}

/* Sets $name back to what env_save returned, and frees that. */
static inline void env_restore(const char *name, char *saved) {
  if (saved)
    setenv(name, saved, 1);
  else
    unsetenv(name);
  free(saved);
}

/* ---- a UCtx per test ---- */

/* A test's own UCtx and its pool's mark at the start: what the test builds is
 * autoreleased, and ut_end drains it all and checks that no UOp is left. */
typedef struct {
  UCtx *ctx;
  size_t mark;
} UTest;

static inline UTest ut_begin(void) {
  UTest t = {uctx_new(), 0};
  assert_non_null(t.ctx);
  t.mark = uop_pool_mark(t.ctx);
  return t;
}

static inline void ut_end(UTest *t) {
  uop_pool_drain(t->ctx, t->mark);
  assert_int_equal(uctx_live(t->ctx), 0);
  uctx_free(t->ctx);
}

/* The same as a cmocka setup/teardown pair, for suites whose fixture holds the
 * UCtx (the pool is drained to empty). */

static inline int uctx_setup(UCtx **c) {
  *c = uctx_new();
  return *c ? 0 : -1;
}

/* Every UOp made in a test is gone once its pool is drained. */
static inline int uctx_teardown(UCtx **c) {
  uop_pool_drain(*c, 0);
  size_t live = uctx_live(*c);
  uctx_free(*c);
  *c = NULL;
  if (live != 0) fprintf(stderr, "%zu UOps still alive\n", live);
  return live == 0 ? 0 : -1;
}

/* ---- kernel AST builders (src/codegen/kernel.h) ---- */

/* A contiguous tracker of nd int64_t dims (pass them as int64_t). */
static inline ShapeTracker *shp(int nd, ...) {
  int64_t s[TVK_MAX_DIMS];
  va_list ap;
  va_start(ap, nd);
  for (int i = 0; i < nd; i++) s[i] = va_arg(ap, int64_t);
  va_end(ap);
  return st_from_shape(nd, s);
}

static inline UOp *view(UCtx *c, ShapeTracker *st) { /* takes st */
  assert_non_null(st);
  UOp *v = uop_new(c, OP_VIEW, dt_make(DT_VOID), 0, NULL, arg_st(st));
  st_free(st);
  return v;
}
static inline UOp *glob(UCtx *c, int i, ScalarType t) {
  return uop_new(c, OP_DEFINE_GLOBAL, dt_ptr(dt_make(t), ADDR_GLOBAL), 0, NULL, arg_int(i));
}
static inline UOp *ld(UCtx *c, int i, ScalarType t, ShapeTracker *st) {
  return uop_new(c, OP_LOAD, dt_make(t), 2, (UOp *[]){glob(c, i, t), view(c, st)}, arg_none());
}
static inline UOp *store(UCtx *c, int i, ScalarType t, ShapeTracker *st, UOp *x) {
  return uop_new(c, OP_STORE, dt_make(DT_VOID), 3, (UOp *[]){glob(c, i, t), view(c, st), x},
                 arg_none());
}
static inline UOp *sink1(UOp *s) { return uop_sink(s->ctx, 1, &s); }
static inline UOp *reduce(UOp *x, Op op, int n, const int64_t *axes) {
  return uop_new(x->ctx, OP_REDUCE_AXIS, x->dtype, 1, &x, arg_reduce(op, n, axes));
}

/* The kernel of C = A B for row-major A (M, K) in buffer 1 and B (K, N) in
 * buffer 2 into C (M, N) in buffer 0: a sum over the last axis of the full
 * shape (M, N, K) of A broadcast along N times B read transposed. */
static inline UOp *matmul_sink(UCtx *c, ScalarType t, int64_t M, int64_t N, int64_t K) {
  const int64_t full[3] = {M, N, K};
  ShapeTracker *a0 = shp(3, M, (int64_t)1, K), *b0 = shp(3, K, N, (int64_t)1);
  ShapeTracker *b1 = st_permute(b0, (const int[]){2, 1, 0});
  UOp *mm = reduce(uop_mul(ld(c, 1, t, st_expand(a0, full)), ld(c, 2, t, st_expand(b1, full))),
                   OP_ADD, 1, (const int64_t[]){2});
  st_free(a0), st_free(b0), st_free(b1);
  return sink1(store(c, 0, t, shp(3, M, N, (int64_t)1), mm));
}

/* render_c.c's prelude: the golden C sources of test_codegen and test_opt
 * start with it. */
#define C_PRELUDE                                                                                  \
  "typedef signed char int8_t;\n"                                                                  \
  "typedef unsigned char uint8_t;\n"                                                               \
  "typedef short int16_t;\n"                                                                       \
  "typedef unsigned short uint16_t;\n"                                                             \
  "typedef int int32_t;\n"                                                                         \
  "typedef unsigned int uint32_t;\n"                                                               \
  "typedef long long int64_t;\n"                                                                   \
  "typedef unsigned long long uint64_t;\n"                                                         \
  "#if !defined(__STDC_VERSION__) || __STDC_VERSION__ < 202311L\n"                                 \
  "typedef _Bool bool;\n"                                                                          \
  "#define true 1\n"                                                                               \
  "#define false 0\n"                                                                              \
  "#endif\n"                                                                                       \
  "#if defined(__GNUC__) || defined(__clang__)\n"                                                  \
  "#define TVK_INF __builtin_inf()\n"                                                              \
  "#define TVK_NAN __builtin_nan(\"\")\n"                                                          \
  "#define TVK_INLINE static inline __attribute__((always_inline))\n"                              \
  "#else\n"                                                                                        \
  "#define TVK_INLINE static inline\n"                                                             \
  "#define TVK_INF (1e300 * 1e300)\n"                                                              \
  "#define TVK_NAN (((union { uint64_t u; double d; }){0x7ff8000000000000ull}).d)\n"               \
  "#endif\n"                                                                                       \
  "double exp2(double); float exp2f(float); double log2(double); float log2f(float);\n"            \
  "double sin(double); float sinf(float); double sqrt(double); float sqrtf(float);\n"              \
  "double floor(double); float floorf(float); double trunc(double); double rint(double);\n"        \
  "double fabs(double); double fmod(double, double); double copysign(double, double);\n"           \
  "double pow(double, double); double ldexp(double, int); double frexp(double, int *);\n"

#endif
