/* Helpers shared by the internal test suites: removing a temp directory tree
 * and building kernel ASTs by hand. Include after <cmocka.h> and the ir/
 * headers. Everything is static inline so a suite pays only for what it uses. */
#ifndef TVK_TESTS_TEST_UTIL_H
#define TVK_TESTS_TEST_UTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/uop.h"
#include "ir/view.h"

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

/* ---- a UCtx per test ---- */

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

#endif
