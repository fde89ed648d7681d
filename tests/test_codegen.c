/* Tests of codegen (src/codegen/): kernel ASTs built by hand are turned into C,
 * compiled and run on the CPU device with one and with two threads, and the
 * results are compared with plain loops written here (in double precision for
 * floats, exact integer math for ints). Integer and float ALU results are also
 * checked against the IR's constant evaluation (alu_exec), which the generated
 * code must match. Golden tests pin the exact source of two tiny kernels. The
 * kernels go to the build tree's cache (test_cache_dir), so a second run
 * compiles none; the UB check's programs go to a fresh directory, removed at
 * the end. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
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

#include "codegen/codegen.h"
#include "codegen/kernel.h"
#include "codegen/render.h"
#include "ir/alu.h"
#include "ir/symbolic.h"
#include "ir/view.h"
#include "runtime/device.h"
#include "test_util.h"

typedef struct {
  char root[256]; /* scratch for the UB check's programs */
  Device *dev[3]; /* 1, 2 and 5 threads: 5 splits axes unevenly */
  UCtx *c;
} Suite;

/* ---------------------------------------------------------------- helpers */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(double lo, double hi) {
  return lo + (hi - lo) * (double)(xorshift64(&rng) >> 11) / 9007199254740992.0;
}

/* ---- AST builders: tests/test_util.h ---- */
static UOp *cf(UCtx *c, double v) { return uop_const_float(c, DT(FLOAT32), v); }

/* ---- running kernels ---- */

typedef struct {
  void *data;
  size_t bytes;
} HostBuf;

/* Generates C for sink, compiles it on d, copies every buffer in, launches,
 * copies every buffer out. */
static void run_on(Device *d, UOp *sink, int nb, HostBuf *hb, int nv, const int32_t *vals) {
  KernelSource ks;
  tvk_status s = codegen_kernel(sink, NULL, &ks);
  if (s != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  assert_int_equal(ks.nbufs, nb);
  assert_int_equal(ks.nvars, nv);
  DevProgram *p = NULL;
  bool hit;
  if (d->ops->compile(d, ks.name, ks.src, &p, &hit, NULL) != TVK_OK)
    fail_msg("compile: %s\n%s", d->err.msg, ks.src);
  DevBuffer *bufs[32];
  for (int i = 0; i < nb; i++) {
    assert_int_equal(d->ops->alloc(d, hb[i].bytes, &bufs[i]), TVK_OK);
    assert_int_equal(d->ops->copy_in(d, bufs[i], 0, hb[i].data, hb[i].bytes), TVK_OK);
  }
  if (d->ops->launch(d, p, bufs, nb, vals, nv, NULL) != TVK_OK) fail_msg("launch: %s", d->err.msg);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  for (int i = 0; i < nb; i++) {
    assert_int_equal(d->ops->copy_out(d, bufs[i], 0, hb[i].data, hb[i].bytes), TVK_OK);
    d->ops->free(d, bufs[i]);
  }
  d->ops->program_free(d, p);
  kernel_source_free(&ks);
}

/* Runs on 1, 2 and 5 threads; the results must agree bit for bit. The last
 * run's results are left in hb. */
static void run(Suite *s, UOp *sink, int nb, HostBuf *hb, int nv, const int32_t *vals) {
  void *before[32], *first[32];
  for (int i = 0; i < nb; i++) {
    before[i] = malloc(hb[i].bytes + 1), first[i] = malloc(hb[i].bytes + 1);
    memcpy(before[i], hb[i].data, hb[i].bytes);
  }
  for (int d = 0; d < 3; d++) {
    if (d)
      for (int i = 0; i < nb; i++) memcpy(hb[i].data, before[i], hb[i].bytes);
    run_on(s->dev[d], sink, nb, hb, nv, vals);
    for (int i = 0; i < nb; i++) {
      if (d == 0)
        memcpy(first[i], hb[i].data, hb[i].bytes);
      else if (memcmp(first[i], hb[i].data, hb[i].bytes) != 0)
        fail_msg("buffer %d differs between 1 and %d threads", i, s->dev[d]->limits.cores);
    }
  }
  for (int i = 0; i < nb; i++) free(before[i]), free(first[i]);
}

static char *source_of(UOp *sink) {
  KernelSource ks;
  if (codegen_kernel(sink, NULL, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  char *src = strdup(ks.src);
  kernel_source_free(&ks);
  return src;
}

/* |got - want| <= tol * (1 + |want|), NaNs and infinities equal. */
static void check_close(double got, double want, double tol, const char *what, int64_t i) {
  if (isnan(want) && isnan(got)) return;
  if (isinf(want) && got == want) return;
  if (fabs(got - want) <= tol * (1 + fabs(want))) return;
  fail_msg("%s[%lld]: got %.9g, want %.9g", what, (long long)i, got, want);
}

/* ---- float16 reference: nearest of all finite halves, ties to even ---- */

static double half_value(uint16_t h) {
  int e = h >> 10 & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return h >> 15 ? -v : v;
}

static uint16_t half_round(double x) {
  if (isnan(x)) return 0x7e00;
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff; /* largest finite */
  while (lo < hi) {             /* the first half >= a */
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (half_value(mid) < a)
      lo = (uint16_t)(mid + 1);
    else
      hi = mid;
  }
  uint16_t best = lo;
  if (lo > 0) {
    double up = half_value(lo) - a, down = a - half_value((uint16_t)(lo - 1));
    if (down < up || (down == up && ((lo - 1) & 1) == 0)) best = (uint16_t)(lo - 1);
  }
  return sign | best;
}

/* ---------------------------------------------------------------- fixtures */

static int suite_setup(void **state) {
  Suite *s = calloc(1, sizeof *s);
  if (!s || !temp_dir(s->root, sizeof s->root, "test-codegen")) return -1;
  Error err;
  const int threads[3] = {1, 2, 5};
  for (int d = 0; d < 3; d++) {
    DeviceOptions o = {.cache_dir = test_cache_dir(), .threads = threads[d]};
    if (cpu_device_create(&o, &s->dev[d], &err) != TVK_OK) {
      fprintf(stderr, "cpu device: %s\n", err.msg);
      return -1;
    }
  }
  *state = s;
  return 0;
}

static int suite_teardown(void **state) {
  Suite *s = *state;
  for (int d = 0; d < 3; d++) s->dev[d]->ops->destroy(s->dev[d]);
  rm_rf(s->root);
  free(s);
  return 0;
}

static int test_setup(void **state) { return uctx_setup(&((Suite *)*state)->c); }
static int test_teardown(void **state) { return uctx_teardown(&((Suite *)*state)->c); }

#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)

/* ---- undefined behaviour check ----
 * The kernel is compiled once more with UBSan (and float-cast-overflow) into a
 * program that runs it on the test's inputs with 1, 2 and 3 cores; any
 * undefined behaviour aborts it. Skipped when there is no `cc` or it cannot
 * build sanitized programs. */
static void ub_check(Suite *s, UOp *sink, int nb, const HostBuf *hb) {
  KernelSource ks;
  if (codegen_kernel(sink, NULL, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  char path[400], exe[400], cmd[1200];
  snprintf(path, sizeof path, "%s/ub_%s.c", s->root, ks.name);
  snprintf(exe, sizeof exe, "%s/ub_%s", s->root, ks.name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%s#include <stdlib.h>\n#include <string.h>\n", ks.src);
  for (int i = 0; i < nb; i++) {
    fprintf(f, "static const unsigned char in%d[%zu] = {", i, hb[i].bytes + 1);
    for (size_t j = 0; j < hb[i].bytes; j++)
      fprintf(f, "%s%u", j ? "," : "", ((unsigned char *)hb[i].data)[j]);
    fprintf(f, "%s0};\n", hb[i].bytes ? "," : "");
  }
  fprintf(f, "int main(void) {\n  void *bufs[%d];\n  const int32_t vals[1] = {0};\n", nb);
  for (int i = 0; i < nb; i++)
    fprintf(f, "  bufs[%d] = malloc(%zu + 1); memcpy(bufs[%d], in%d, %zu);\n", i, hb[i].bytes, i, i,
            hb[i].bytes);
  fprintf(f, "  for (int n = 1; n <= 3; n++) for (int c = 0; c < n; c++) %s(bufs, vals, c, n);\n",
          ks.name);
  fprintf(f, "  for (int i = 0; i < %d; i++) free(bufs[i]);\n  return 0;\n}\n", nb);
  fclose(f);
  const char *flags = "-std=c11 -O1 -Wall -Wextra -Werror -Wno-unused-function";
  snprintf(cmd, sizeof cmd,
           "cc %s -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all -o %s %s -lm",
           flags, exe, path);
  if (system(cmd) != 0) {
    snprintf(cmd, sizeof cmd, "cc %s -o %s %s -lm", flags, exe, path);
    if (system(cmd) != 0) fail_msg("the generated source does not compile cleanly:\n%s", ks.src);
    kernel_source_free(&ks);
    return; /* no sanitizer runtime here: the warnings check is what we can do */
  }
  snprintf(cmd, sizeof cmd, "UBSAN_OPTIONS=print_stacktrace=1 %s", exe);
  int rc = system(cmd);
  if (rc != 0) fail_msg("undefined behaviour in %s (exit %d):\n%s", ks.name, rc, ks.src);
  kernel_source_free(&ks);
}

/* ---------------------------------------------------------------- elementwise */

static const int64_t sizes[] = {1, 7, 1000, 100003};

/* out = ((a + b) * a + b * b) * 0.5 - a, float32 */
static void test_float_chain(void **state) {
  Suite *s = *state;
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t n = sizes[k];
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *out = calloc((size_t)n, 4);
    for (int64_t i = 0; i < n; i++) a[i] = (float)urand(-2, 2), b[i] = (float)urand(-2, 2);
    UCtx *c = s->c;
    UOp *A = ld(c, 1, DT_FLOAT32, shp(1, n)), *B = ld(c, 2, DT_FLOAT32, shp(1, n));
    UOp *x = uop_add(uop_mul(uop_mul(uop_add(A, B), A), cf(c, 1)), uop_mul(B, B));
    x = uop_alu2(OP_SUB, uop_mul(x, cf(c, 0.5)), A);
    HostBuf hb[3] = {{out, (size_t)n * 4}, {a, (size_t)n * 4}, {b, (size_t)n * 4}};
    run(s, sink1(store(c, 0, DT_FLOAT32, shp(1, n), x)), 3, hb, 0, NULL);
    for (int64_t i = 0; i < n; i++) {
      double A_ = a[i], B_ = b[i];
      check_close(out[i], ((A_ + B_) * A_ + B_ * B_) * 0.5 - A_, 1e-6, "float chain", i);
    }
    free(a), free(b), free(out);
  }
}

/* out = (a + b) * a - b * 3 + 0x7fffffff, int32 wrapping; the reference wraps through uint32. */
static void test_int_chain(void **state) {
  Suite *s = *state;
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t n = sizes[k];
    int32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *out = calloc((size_t)n, 4);
    for (int64_t i = 0; i < n; i++)
      a[i] = (int32_t)xorshift64(&rng), b[i] = (int32_t)(xorshift64(&rng) % 2001) - 1000;
    UCtx *c = s->c;
    UOp *A = ld(c, 1, DT_INT32, shp(2, (int64_t)1, n)),
        *B = ld(c, 2, DT_INT32, shp(2, (int64_t)1, n));
    UOp *x = uop_add_c(uop_sub(uop_mul(uop_add(A, B), A), uop_mul_c(B, 3)), INT32_MAX);
    HostBuf hb[3] = {{out, (size_t)n * 4}, {a, (size_t)n * 4}, {b, (size_t)n * 4}};
    run(s, sink1(store(c, 0, DT_INT32, shp(2, (int64_t)1, n), x)), 3, hb, 0, NULL);
    for (int64_t i = 0; i < n; i++) {
      uint32_t A_ = (uint32_t)a[i], B_ = (uint32_t)b[i];
      uint32_t want = (A_ + B_) * A_ - B_ * 3u + 0x7fffffffu;
      if ((uint32_t)out[i] != want)
        fail_msg("int chain[%lld]: got %d want %d", (long long)i, out[i], (int32_t)want);
    }
    free(a), free(b), free(out);
  }
}

/* ---------------------------------------------------------------- every integer op */

/* The test's own integer semantics (alu.h): values as int64, wrapped to `bits`. */
static int64_t wrap(int64_t v, int bits, bool uns) {
  if (bits == 64) return v;
  uint64_t m = (1ull << bits) - 1, u = (uint64_t)v & m;
  if (uns || !(u >> (bits - 1))) return (int64_t)u;
  return (int64_t)(u | ~m);
}

static bool ref_int(Op op, int64_t a, int64_t b, int bits, bool uns, int64_t *r) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case OP_ADD: *r = wrap((int64_t)(ua + ub), bits, uns); return true;
  case OP_SUB: *r = wrap((int64_t)(ua - ub), bits, uns); return true;
  case OP_MUL: *r = wrap((int64_t)(ua * ub), bits, uns); return true;
  case OP_NEG: *r = wrap((int64_t)(0 - ua), bits, uns); return true;
  case OP_IDIV:
    if (b == 0)
      *r = 0;
    else if (bits == 64 && a == INT64_MIN && b == -1)
      *r = INT64_MIN;
    else
      *r = wrap(a / b, bits, uns); /* C truncates toward zero */
    return true;
  case OP_MOD:
    if (b == 0 || b == -1)
      *r = 0;
    else
      *r = a % b; /* C: the sign of the dividend */
    return true;
  case OP_MAX: *r = a > b ? a : b; return true;
  case OP_CMPLT: *r = a < b; return true;
  case OP_CMPNE: *r = a != b; return true;
  case OP_AND: *r = a & b; return true;
  case OP_OR: *r = a | b; return true;
  case OP_XOR: *r = a ^ b; return true;
  case OP_SHL:
    if (b < 0) return false;
    *r = b >= bits ? 0 : wrap((int64_t)(ua << b), bits, uns);
    return true;
  case OP_SHR:
    if (b < 0) return false;
    if (b >= bits)
      *r = a < 0 ? -1 : 0;
    else
      *r = a < 0 ? ~(~a >> b) : a >> b; /* floor */
    return true;
  default: return false;
  }
}

static const Op int_ops[] = {OP_ADD,   OP_SUB,   OP_MUL, OP_NEG, OP_IDIV, OP_MOD, OP_MAX,
                             OP_CMPLT, OP_CMPNE, OP_AND, OP_OR,  OP_XOR,  OP_SHL, OP_SHR};
enum { NINT_OPS = sizeof int_ops / sizeof *int_ops };

/* Interesting operands of a type of `bits` bits. */
static int int_values(int bits, bool uns, int64_t *v) {
  int64_t max = bits == 64 ? INT64_MAX
                : uns      ? (int64_t)((1ull << bits) - 1)
                           : (int64_t)((1ull << (bits - 1)) - 1);
  int64_t min = uns ? 0 : bits == 64 ? INT64_MIN : -max - 1;
  int64_t base[] = {0,  1,  2,  3,  7,   -1,   -2,  -7,  13,      -13,    31,
                    32, 33, 63, 64, 100, -100, max, min, max - 1, min + 1};
  int n = 0;
  for (size_t i = 0; i < sizeof base / sizeof *base; i++) v[n++] = wrap(base[i], bits, uns);
  for (int i = 0; i < 11; i++) v[n++] = wrap((int64_t)xorshift64(&rng), bits, uns);
  return n;
}

/* A multi-output kernel with one store per op over every pair of operands,
 * checked against ref_int and against alu_exec. */
static void check_int_ops(Suite *s, ScalarType t) {
  DType dt = dt_make(t);
  int bits = dt_bits(dt);
  bool uns = dt_is_unsigned(dt);
  size_t isz = dt_scalar_size(t);
  int64_t vals[64];
  int nv = int_values(bits, uns, vals);
  int64_t n = (int64_t)nv * nv;
  void *a = malloc((size_t)n * isz), *b = malloc((size_t)n * isz);
  for (int64_t i = 0; i < n; i++) {
    int64_t x = vals[i / nv], y = vals[i % nv];
    memcpy((char *)a + i * (int64_t)isz, &x, isz); /* little endian: the low bytes */
    memcpy((char *)b + i * (int64_t)isz, &y, isz);
  }
  UCtx *c = s->c;
  UOp *A = ld(c, 0, t, shp(1, n)), *B = ld(c, 1, t, shp(1, n)), *stores[NINT_OPS];
  HostBuf hb[2 + NINT_OPS] = {{a, (size_t)n * isz}, {b, (size_t)n * isz}};
  for (int k = 0; k < NINT_OPS; k++) {
    Op op = int_ops[k];
    bool cmp = op == OP_CMPLT || op == OP_CMPNE;
    /* shift amounts stay in [0, 2*bits) so every case is defined */
    UOp *rhs = op == OP_SHL || op == OP_SHR
                   ? uop_mod(uop_max(B, uop_neg(B)), uop_const_int(c, dt, 2 * bits))
                   : B;
    UOp *x = op == OP_NEG ? uop_neg(A) : uop_alu2(op, A, rhs);
    ScalarType ot = cmp ? DT_BOOL : t;
    stores[k] = store(c, 2 + k, ot, shp(1, n), x);
    hb[2 + k] = (HostBuf){calloc((size_t)n, 8), (size_t)n * dt_scalar_size(ot)};
  }
  UOp *sink = uop_sink(c, NINT_OPS, stores);
  if (t == DT_INT32 || t == DT_INT8 || t == DT_INT64 || t == DT_UINT16)
    ub_check(s, sink, 2 + NINT_OPS, hb);
  run(s, sink, 2 + NINT_OPS, hb, 0, NULL);
  for (int k = 0; k < NINT_OPS; k++) {
    Op op = int_ops[k];
    bool cmp = op == OP_CMPLT || op == OP_CMPNE;
    for (int64_t i = 0; i < n; i++) {
      int64_t x = vals[i / nv], y = vals[i % nv], want, got = 0;
      if (op == OP_SHL ||
          op == OP_SHR) { /* y = max(y, -y) % (2 * bits), as the kernel computes it */
        int64_t neg = wrap((int64_t)(0 - (uint64_t)y), bits, uns);
        y = (neg > y ? neg : y) % (2 * bits); /* only a MIN stays negative, and MIN % 2^k is 0 */
      }
      if (!ref_int(op, x, y, bits, uns, &want))
        continue; /* a negative shift: not defined by alu.h */
      memcpy(&got, (char *)hb[2 + k].data + i * (int64_t)(cmp ? 1 : isz), cmp ? 1 : isz);
      got = cmp ? got : wrap(got, bits, uns);
      if (got != want)
        fail_msg("%s %s(%lld, %lld): got %lld want %lld", dt_scalar_name(t), op_name(op),
                 (long long)x, (long long)y, (long long)got, (long long)want);
      CVal in[2] = {{.i = x}, {.i = y}}, res;
      if (alu_exec(op, cmp ? DT_BOOL : t, t, in, &res) && res.i != got)
        fail_msg("%s %s(%lld, %lld): alu_exec says %lld, the kernel %lld", dt_scalar_name(t),
                 op_name(op), (long long)x, (long long)y, (long long)res.i, (long long)got);
    }
  }
  for (int k = 0; k < 2 + NINT_OPS; k++) free(hb[k].data);
}

static void test_int32_ops(void **state) { check_int_ops(*state, DT_INT32); }
static void test_small_int_ops(void **state) {
  check_int_ops(*state, DT_INT8);
  check_int_ops(*state, DT_UINT8);
  check_int_ops(*state, DT_INT16);
  check_int_ops(*state, DT_UINT16);
}
static void test_wide_int_ops(void **state) {
  check_int_ops(*state, DT_INT64);
  check_int_ops(*state, DT_UINT32);
}

/* bool math is integer math truncated to bool (alu.h): + is or, * is and, - is xor. */
static void test_bool_ops(void **state) {
  Suite *s = *state;
  static const Op ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_MAX,  OP_CMPLT, OP_CMPNE,
                           OP_AND, OP_OR,  OP_XOR, OP_IDIV, OP_NEG};
  enum { NO = sizeof ops / sizeof *ops };
  uint8_t a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1}, out[NO][4], w[4];
  UCtx *c = s->c;
  UOp *A = ld(c, 0, DT_BOOL, shp(1, (int64_t)4)), *B = ld(c, 1, DT_BOOL, shp(1, (int64_t)4)),
      *st[NO + 1];
  HostBuf hb[3 + NO] = {{a, 4}, {b, 4}};
  for (int k = 0; k < NO; k++) {
    st[k] = store(c, 2 + k, DT_BOOL, shp(1, (int64_t)4),
                  ops[k] == OP_NEG ? uop_neg(A) : uop_alu2(ops[k], A, B));
    hb[2 + k] = (HostBuf){out[k], 4};
  }
  st[NO] = store(c, 2 + NO, DT_BOOL, shp(1, (int64_t)4),
                 uop_where(A, B, uop_ne(B, uop_const_int(c, DT(BOOL), 1))));
  hb[2 + NO] = (HostBuf){w, 4};
  run(s, uop_sink(c, NO + 1, st), 3 + NO, hb, 0, NULL);
  for (int i = 0; i < 4; i++) {
    int x = a[i], y = b[i];
    const int want[NO] = {x | y, x ^ y, x & y, x | y, !x && y, x != y,
                          x & y, x | y, x ^ y, x & y, x};
    for (int k = 0; k < NO; k++) {
      if (out[k][i] != want[k])
        fail_msg("bool %s(%d, %d): got %d want %d", op_name(ops[k]), x, y, out[k][i], want[k]);
      CVal in[2] = {{.i = x}, {.i = y}}, r;
      if (alu_exec(ops[k], DT_BOOL, DT_BOOL, in, &r) && r.i != out[k][i])
        fail_msg("bool %s(%d, %d): alu_exec %lld", op_name(ops[k]), x, y, (long long)r.i);
    }
    assert_int_equal(w[i], x ? y : !y);
  }
}

/* ---------------------------------------------------------------- float ops */

static const Op fbin_ops[] = {OP_ADD,   OP_SUB,   OP_MUL,  OP_FDIV, OP_MAX,
                              OP_CMPLT, OP_CMPNE, OP_IDIV, OP_MOD,  OP_POW};
static const Op fun_ops[] = {OP_NEG, OP_SQRT, OP_RECIP, OP_EXP2, OP_LOG2, OP_SIN};
static const ScalarType fcasts[] = {DT_INT32, DT_UINT8, DT_INT64, DT_BOOL, DT_FLOAT64};
enum {
  NFB = sizeof fbin_ops / sizeof *fbin_ops,
  NFU = sizeof fun_ops / sizeof *fun_ops,
  NFC = sizeof fcasts / sizeof *fcasts
};

static double float_cast_ref(double x, ScalarType to) { /* C cast semantics, wrapping */
  if (to == DT_BOOL) return x != 0;
  if (to == DT_FLOAT64) return x;
  if (isnan(x) || isinf(x)) return 0;
  double t = fmod(trunc(x), 18446744073709551616.0);
  uint64_t u = t < 0 ? 0 - (uint64_t)(-t) : (uint64_t)t;
  return (double)wrap((int64_t)u, (int)dt_scalar_size(to) * 8, dt_is_unsigned(dt_make(to)));
}

static double load_as_double(const void *p, int64_t i, ScalarType t) {
  switch (t) {
  case DT_BOOL: return ((const uint8_t *)p)[i];
  case DT_UINT8: return ((const uint8_t *)p)[i];
  case DT_INT32: return ((const int32_t *)p)[i];
  case DT_INT64: return (double)((const int64_t *)p)[i];
  case DT_FLOAT32: return ((const float *)p)[i];
  case DT_FLOAT64: return ((const double *)p)[i];
  default: fail_msg("type %d", t);
  }
  return 0;
}

static void test_float_ops(void **state) {
  Suite *s = *state;
  const float base[] = {0.0f,  -0.0f,    1,         -1,  0.5f,  -2.5f,  3.7f,   -3.7f,
                        7,     -7,       2,         100, 1e10f, -1e10f, 1e-40f, 65504,
                        3e38f, INFINITY, -INFINITY, NAN, 0.1f,  -0.3f};
  enum { NB = sizeof base / sizeof *base };
  int64_t n = NB * NB;
  float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) a[i] = base[i / NB], b[i] = base[i % NB];
  UCtx *c = s->c;
  UOp *A = ld(c, 0, DT_FLOAT32, shp(1, n)), *B = ld(c, 1, DT_FLOAT32, shp(1, n));
  UOp *stores[NFB + NFU + NFC];
  HostBuf hb[2 + NFB + NFU + NFC] = {{a, (size_t)n * 4}, {b, (size_t)n * 4}};
  int k = 0;
  for (int j = 0; j < NFB; j++, k++) {
    bool cmp = fbin_ops[j] == OP_CMPLT || fbin_ops[j] == OP_CMPNE;
    stores[k] = store(c, 2 + k, cmp ? DT_BOOL : DT_FLOAT32, shp(1, n), uop_alu2(fbin_ops[j], A, B));
    hb[2 + k] = (HostBuf){calloc((size_t)n, 8), (size_t)n * (cmp ? 1 : 4)};
  }
  for (int j = 0; j < NFU; j++, k++) {
    stores[k] = store(c, 2 + k, DT_FLOAT32, shp(1, n), uop_alu1(fun_ops[j], A));
    hb[2 + k] = (HostBuf){calloc((size_t)n, 8), (size_t)n * 4};
  }
  for (int j = 0; j < NFC; j++, k++) {
    stores[k] = store(c, 2 + k, fcasts[j], shp(1, n), uop_cast(A, dt_make(fcasts[j])));
    hb[2 + k] = (HostBuf){calloc((size_t)n, 8), (size_t)n * dt_scalar_size(fcasts[j])};
  }
  UOp *sink = uop_sink(c, k, stores);
  ub_check(s, sink, 2 + k, hb);
  run(s, sink, 2 + k, hb, 0, NULL);
  for (int64_t i = 0; i < n; i++) {
    double x = a[i], y = b[i];
    k = 0;
    for (int j = 0; j < NFB; j++, k++) {
      Op op = fbin_ops[j];
      bool cmp = op == OP_CMPLT || op == OP_CMPNE;
      double got = load_as_double(hb[2 + k].data, i, cmp ? DT_BOOL : DT_FLOAT32);
      double want = op == OP_ADD     ? (float)(x + y)
                    : op == OP_SUB   ? (float)(x - y)
                    : op == OP_MUL   ? (float)(x * y)
                    : op == OP_FDIV  ? (float)(x / y)
                    : op == OP_MAX   ? (y > x ? y : x)
                    : op == OP_CMPLT ? x < y
                    : op == OP_CMPNE ? x != y
                                     : NAN;
      if (!isnan(want) || op == OP_ADD || op == OP_SUB || op == OP_MUL || op == OP_FDIV ||
          op == OP_MAX)
        check_close(got, want, 0, op_name(op), i);
      CVal in[2] = {{.f = x}, {.f = y}}, res;
      if (alu_exec(op, cmp ? DT_BOOL : DT_FLOAT32, DT_FLOAT32, in, &res)) {
        double r = cmp ? (double)res.i : res.f;
        if (!(isnan(r) && isnan(got)) && memcmp(&r, &got, sizeof r) != 0)
          fail_msg("%s(%g, %g): alu_exec %.9g, kernel %.9g", op_name(op), x, y, r, got);
      }
    }
    for (int j = 0; j < NFU; j++, k++) {
      Op op = fun_ops[j];
      double got = load_as_double(hb[2 + k].data, i, DT_FLOAT32);
      double want = op == OP_NEG     ? -x
                    : op == OP_SQRT  ? (x >= 0 ? sqrt(x) : NAN)
                    : op == OP_RECIP ? (x != 0 ? 1 / x : copysign(INFINITY, x))
                    : op == OP_EXP2  ? exp2(x)
                    : op == OP_LOG2  ? (x > 0    ? log2(x)
                                        : x == 0 ? -INFINITY
                                                 : NAN)
                                     : (isinf(x) ? NAN : sin(x));
      if (op == OP_EXP2 && want > 3.4028234663852886e38) want = INFINITY; /* float overflow */
      if (op == OP_EXP2 && want < 1e-45)
        continue; /* float underflow: flush or subnormal, either ok */
      check_close(got, (float)want, op == OP_SIN && fabs(x) > 1e4 ? 1e-3 : 3e-7, op_name(op), i);
      if (signbit(got) != signbit(want) && !isnan(want) && want == 0)
        fail_msg("%s(%g): the sign of zero", op_name(op), x);
    }
    for (int j = 0; j < NFC; j++, k++) {
      double got = load_as_double(hb[2 + k].data, i, fcasts[j]);
      check_close(got, float_cast_ref(x, fcasts[j]), 0, "cast", i);
      CVal r = cval_cast((CVal){.f = x}, DT_FLOAT32, fcasts[j]);
      double ir = fcasts[j] == DT_FLOAT64 ? r.f : (double)r.i;
      if (!(isnan(ir) && isnan(got)) && ir != got)
        fail_msg("cast %g to %s: IR %g, kernel %g", x, dt_scalar_name(fcasts[j]), ir, got);
    }
  }
  for (k = 0; k < 2 + NFB + NFU + NFC; k++) free(hb[k].data);
}

/* int -> float casts, int64 -> int8 wrap, bool -> int, uint8 -> float64 */
static void test_int_casts(void **state) {
  Suite *s = *state;
  const int32_t base[] = {0,    1,        -1,        127,       128,       255,    256,
                          -129, 16777217, -16777217, INT32_MAX, INT32_MIN, 1000000};
  enum { N = sizeof base / sizeof *base };
  int32_t a[N];
  memcpy(a, base, sizeof a);
  float f[N];
  int8_t i8[N];
  uint8_t bl[N];
  double d[N];
  int64_t i64[N];
  UCtx *c = s->c;
  UOp *A = ld(c, 0, DT_INT32, shp(1, (int64_t)N));
  UOp *st[5] = {
      store(c, 1, DT_FLOAT32, shp(1, (int64_t)N), uop_cast(A, DT(FLOAT32))),
      store(c, 2, DT_INT8, shp(1, (int64_t)N), uop_cast(uop_cast(A, DT(INT64)), DT(INT8))),
      store(c, 3, DT_BOOL, shp(1, (int64_t)N), uop_cast(A, DT(BOOL))),
      store(c, 4, DT_FLOAT64, shp(1, (int64_t)N), uop_cast(uop_cast(A, DT(UINT8)), DT(FLOAT64))),
      store(c, 5, DT_INT64, shp(1, (int64_t)N), uop_cast(uop_cast(A, DT(BOOL)), DT(INT64)))};
  HostBuf hb[6] = {{a, sizeof a},   {f, sizeof f}, {i8, sizeof i8},
                   {bl, sizeof bl}, {d, sizeof d}, {i64, sizeof i64}};
  run(s, uop_sink(c, 5, st), 6, hb, 0, NULL);
  for (int i = 0; i < N; i++) {
    assert_true(f[i] == (float)base[i]);
    assert_int_equal(i8[i], wrap(base[i], 8, false));
    assert_int_equal(bl[i], base[i] != 0);
    assert_true(d[i] == (double)(uint8_t)wrap(base[i], 8, true));
    assert_int_equal(i64[i], base[i] != 0);
  }
}

/* ---------------------------------------------------------------- views */

/* out (R x C, contiguous) = f(a) for a load of `a` through st; want(r, c) gives
 * the expected value. */
typedef double (*Want)(const float *a, int64_t r, int64_t c);

static void check_view_load(Suite *s, ShapeTracker *st, int64_t asize, Want want,
                            const char *what) {
  int64_t R = st_shape(st)[0], C = st_shape(st)[1];
  float *a = malloc((size_t)asize * 4 + 4), *out = malloc((size_t)(R * C) * 4 + 4);
  for (int64_t i = 0; i < asize; i++) a[i] = (float)(i + 1);
  for (int64_t i = 0; i < R * C; i++) out[i] = -12345;
  UCtx *c = s->c;
  UOp *x = uop_add(ld(c, 1, DT_FLOAT32, st), cf(c, 0.25));
  HostBuf hb[2] = {{out, (size_t)(R * C) * 4}, {a, (size_t)asize * 4}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, R, C), x)), 2, hb, 0, NULL);
  for (int64_t r = 0; r < R; r++)
    for (int64_t k = 0; k < C; k++)
      check_close(out[r * C + k], want(a, r, k) + 0.25, 0, what, r * C + k);
  free(a), free(out);
}

static double want_T(const float *a, int64_t r, int64_t c) { return a[c * 7 + r]; } /* a is 5 x 7 */
static void test_permute(void **state) {
  ShapeTracker *base = shp(2, (int64_t)5, (int64_t)7);
  ShapeTracker *st = st_permute(base, (const int[]){1, 0});
  st_free(base);
  check_view_load(*state, st, 35, want_T, "permute");
}

/* a is 4 x 5, padded by (1, 2) rows and (3, 0) columns: 7 x 8, zeros outside */
static double want_pad(const float *a, int64_t r, int64_t c) {
  return r < 1 || r >= 5 || c < 3 ? 0 : a[(r - 1) * 5 + (c - 3)];
}
static void test_pad(void **state) {
  ShapeTracker *base = shp(2, (int64_t)4, (int64_t)5);
  ShapeTracker *st = st_pad(base, (const sint[][2]){{1, 2}, {3, 0}});
  st_free(base);
  check_view_load(*state, st, 20, want_pad, "pad");
}

/* a is 4 x 5, columns flipped */
static double want_flip(const float *a, int64_t r, int64_t c) { return a[r * 5 + (4 - c)]; }
static void test_flip(void **state) {
  ShapeTracker *base = shp(2, (int64_t)4, (int64_t)5);
  ShapeTracker *st = st_flip(base, (const bool[]){false, true});
  st_free(base);
  check_view_load(*state, st, 20, want_flip, "flip");
}

/* KernelSource.flops / .bytes (estimate.c), against counts by hand: an ALU op
 * per element of its shape and a fold per reduced element; per buffer the
 * elements its view reaches (a broadcast reaches its source's, a shrink
 * its window's), for loads and stores. */
static void test_cost_estimate(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  KernelSource ks;
  /* out (4, 5) = a * b + 0.5 with b (1, 5) broadcast over rows */
  ShapeTracker *row = shp(2, (int64_t)1, (int64_t)5);
  ShapeTracker *bcast = st_expand(row, (const int64_t[]){4, 5});
  st_free(row);
  UOp *e = uop_add(
      uop_mul(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5)), ld(c, 2, DT_FLOAT32, bcast)),
      cf(c, 0.5));
  assert_int_equal(
      codegen_kernel(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), e)), NULL, &ks),
      TVK_OK);
  assert_true(ks.flops == 40 && ks.bytes == 4 * (20 + 20 + 5));
  kernel_source_free(&ks);
  /* out (4, 1) = sum over axis 1 of a * a (one load of a, used twice) */
  UOp *a = ld(c, 1, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5));
  UOp *r = reduce(uop_mul(a, a), OP_ADD, 1, (const int64_t[]){1});
  assert_int_equal(
      codegen_kernel(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)1), r)), NULL, &ks),
      TVK_OK);
  assert_true(ks.flops == 20 + 20 && ks.bytes == 4 * (20 + 4));
  kernel_source_free(&ks);
  /* out (2, 3) = a[1:3, 2:5] + 1 of a (4, 5) float64: the window's 6 elements */
  ShapeTracker *whole = shp(2, (int64_t)4, (int64_t)5);
  ShapeTracker *win = st_shrink(whole, (const sint[][2]){{1, 3}, {2, 5}});
  st_free(whole);
  UOp *w = uop_add(ld(c, 1, DT_FLOAT64, win), uop_const_float(c, dt_make(DT_FLOAT64), 1));
  assert_int_equal(
      codegen_kernel(sink1(store(c, 0, DT_FLOAT64, shp(2, (int64_t)2, (int64_t)3), w)), NULL, &ks),
      TVK_OK);
  assert_true(ks.flops == 6 && ks.bytes == 8 * (6 + 6));
  kernel_source_free(&ks);
}

/* a is 4 x 5, rows 1..3 and columns 2..5 */
static double want_shrink(const float *a, int64_t r, int64_t c) { return a[(r + 1) * 5 + (c + 2)]; }
static void test_shrink(void **state) {
  ShapeTracker *base = shp(2, (int64_t)4, (int64_t)5);
  ShapeTracker *st = st_shrink(base, (const sint[][2]){{1, 3}, {2, 5}});
  st_free(base);
  check_view_load(*state, st, 20, want_shrink, "shrink");
}

/* a 6-vector reshaped to 6 x 1 and expanded to 6 x 9 */
static double want_expand(const float *a, int64_t r, int64_t c) { return (void)c, a[r]; }
static void test_expand(void **state) {
  ShapeTracker *base = shp(2, (int64_t)6, (int64_t)1);
  ShapeTracker *st = st_expand(base, (const sint[]){6, 9});
  st_free(base);
  check_view_load(*state, st, 6, want_expand, "expand");
}

/* A padded, flipped, then permuted view of a reshaped buffer: several views
 * composed into one ShapeTracker. */
static double want_combo(const float *a, int64_t r, int64_t c) {
  /* a: 12 elements as 3 x 4; pad to 5 x 4 ((1, 1), (0, 0)); flip rows; permute -> 4 x 5 */
  int64_t row = 4 - c, col = r; /* flipped row index in the padded 5 x 4 */
  return row < 1 || row > 3 ? 0 : a[(row - 1) * 4 + col];
}
static void test_combined_views(void **state) {
  ShapeTracker *s0 = shp(1, (int64_t)12), *s1 = st_reshape(s0, 2, (const sint[]){3, 4});
  ShapeTracker *s2 = st_pad(s1, (const sint[][2]){{1, 1}, {0, 0}});
  ShapeTracker *s3 = st_flip(s2, (const bool[]){true, false});
  ShapeTracker *s4 = st_permute(s3, (const int[]){1, 0});
  st_free(s0), st_free(s1), st_free(s2), st_free(s3);
  check_view_load(*state, s4, 12, want_combo, "combined");
}

/* A masked CONST(VIEW): 1.5 inside the padded region's valid part, 0 outside. */
static void test_masked_const(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)2, (int64_t)3),
               *st = st_pad(b0, (const sint[][2]){{1, 0}, {0, 2}});
  st_free(b0);
  UOp *k = uop_new(c, OP_CONST, DT(FLOAT32), 1, (UOp *[]){view(c, st)}, arg_float(1.5));
  float out[3 * 5];
  HostBuf hb[1] = {{out, sizeof out}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)5), k)), 1, hb, 0, NULL);
  for (int r = 0; r < 3; r++)
    for (int q = 0; q < 5; q++)
      check_close(out[r * 5 + q], r >= 1 && q < 3 ? 1.5 : 0, 0, "masked const", r * 5 + q);
}

/* Size-1 dims everywhere, and a 0-d kernel. */
static void test_unit_dims(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float a[7], out[7];
  for (int i = 0; i < 7; i++) a[i] = (float)i * 2, out[i] = 0;
  UOp *x = uop_mul(ld(c, 1, DT_FLOAT32, shp(4, (int64_t)1, (int64_t)7, (int64_t)1, (int64_t)1)),
                   cf(c, 3));
  HostBuf hb[2] = {{out, sizeof out}, {a, sizeof a}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(4, (int64_t)1, (int64_t)7, (int64_t)1, (int64_t)1), x)),
      2, hb, 0, NULL);
  for (int i = 0; i < 7; i++) check_close(out[i], a[i] * 3, 0, "unit dims", i);
  float sc = 0, in = 4;
  HostBuf hs[2] = {{&sc, 4}, {&in, 4}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(0), uop_add(ld(c, 1, DT_FLOAT32, shp(0)), cf(c, 1)))), 2,
      hs, 0, NULL);
  check_close(sc, 5, 0, "0-d", 0);
}

/* ---------------------------------------------------------------- reduces */

/* Sum of an R x C float32 matrix over `axes` (bit 0: rows, bit 1: columns). */
static void check_sum(Suite *s, int64_t R, int64_t C, int axes) {
  float *a = malloc((size_t)(R * C) * 4);
  for (int64_t i = 0; i < R * C; i++) a[i] = (float)urand(-1, 1);
  int64_t oR = axes & 1 ? 1 : R, oC = axes & 2 ? 1 : C, ax[2], nax = 0;
  if (axes & 1) ax[nax++] = 0;
  if (axes & 2) ax[nax++] = 1;
  float *out = calloc((size_t)(oR * oC), 4);
  UCtx *c = s->c;
  UOp *r = reduce(ld(c, 1, DT_FLOAT32, shp(2, R, C)), OP_ADD, (int)nax, ax);
  HostBuf hb[2] = {{out, (size_t)(oR * oC) * 4}, {a, (size_t)(R * C) * 4}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, oR, oC), r)), 2, hb, 0, NULL);
  for (int64_t i = 0; i < oR; i++) {
    for (int64_t j = 0; j < oC; j++) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < R; p++)
        for (int64_t q = 0; q < C; q++)
          if ((oR == 1 || p == i) && (oC == 1 || q == j))
            want += a[p * C + q], mag += fabs(a[p * C + q]);
      if (fabs(out[i * oC + j] - want) > 1e-6 * (1 + mag))
        fail_msg("sum %lldx%lld axes %d [%lld, %lld]: got %.9g want %.9g", (long long)R,
                 (long long)C, axes, (long long)i, (long long)j, out[i * oC + j], want);
    }
  }
  free(a), free(out);
}

static void test_sum_last_axis(void **state) {
  check_sum(*state, 7, 1000, 2);
  check_sum(*state, 1, 100003, 2);
  check_sum(*state, 13, 1, 2); /* a reduce over a size-1 axis is the identity map */
}
static void test_sum_first_axis(void **state) {
  check_sum(*state, 1000, 7, 1);
  check_sum(*state, 3, 5, 1);
}
static void test_sum_all_axes(void **state) {
  check_sum(*state, 37, 29, 3);
  check_sum(*state, 1, 1, 3);
  check_sum(*state, 1, 7, 3);
}

/* max over rows of negative numbers (float32 and int32): the identity is the
 * dtype's minimum, not 0. */
static void test_max_negative(void **state) {
  Suite *s = *state;
  enum { R = 5, C = 333 };
  float a[R * C], out[R];
  int32_t ia[R * C], iout[R];
  for (int i = 0; i < R * C; i++)
    a[i] = (float)urand(-100, -1), ia[i] = -1 - (int32_t)(xorshift64(&rng) % 100000);
  UCtx *c = s->c;
  const int64_t ax[] = {1};
  UOp *m = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)C)), OP_MAX, 1, ax);
  UOp *mi = reduce(ld(c, 3, DT_INT32, shp(2, (int64_t)R, (int64_t)C)), OP_MAX, 1, ax);
  UOp *st[2] = {store(c, 0, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1), m),
                store(c, 2, DT_INT32, shp(2, (int64_t)R, (int64_t)1), mi)};
  HostBuf hb[4] = {{out, sizeof out}, {a, sizeof a}, {iout, sizeof iout}, {ia, sizeof ia}};
  run(s, uop_sink(c, 2, st), 4, hb, 0, NULL);
  for (int r = 0; r < R; r++) {
    float want = -INFINITY;
    int32_t iwant = INT32_MIN;
    for (int q = 0; q < C; q++) {
      if (a[r * C + q] > want) want = a[r * C + q];
      if (ia[r * C + q] > iwant) iwant = ia[r * C + q];
    }
    check_close(out[r], want, 0, "max", r);
    assert_int_equal(iout[r], iwant);
  }
}

/* sum(a * b) over everything, fused into one kernel; and a product reduce. */
static void test_fused_dot(void **state) {
  Suite *s = *state;
  enum { N = 1000 };
  float a[N], b[N], out = 0, prod = 0;
  for (int i = 0; i < N; i++) a[i] = (float)urand(-1, 1), b[i] = (float)urand(-1, 1);
  UCtx *c = s->c;
  const int64_t ax[] = {0};
  UOp *A = ld(c, 1, DT_FLOAT32, shp(1, (int64_t)N)), *B = ld(c, 2, DT_FLOAT32, shp(1, (int64_t)N));
  UOp *dot = reduce(uop_mul(A, B), OP_ADD, 1, ax);
  UOp *pr = reduce(uop_add(cf(c, 1), uop_mul(A, cf(c, 0.001))), OP_MUL, 1, ax);
  UOp *st[2] = {store(c, 0, DT_FLOAT32, shp(1, (int64_t)1), dot),
                store(c, 3, DT_FLOAT32, shp(1, (int64_t)1), pr)};
  HostBuf hb[4] = {{&out, 4}, {a, sizeof a}, {b, sizeof b}, {&prod, 4}};
  run(s, uop_sink(c, 2, st), 4, hb, 0, NULL);
  double want = 0, mag = 0, pwant = 1;
  for (int i = 0; i < N; i++)
    want += (double)a[i] * b[i], mag += fabs((double)a[i] * b[i]), pwant *= 1 + a[i] * 0.001;
  if (fabs(out - want) > 1e-6 * (1 + mag)) fail_msg("dot: got %.9g want %.9g", out, want);
  check_close(prod, pwant, 1e-4, "prod", 0);
}

/* A matmul as a kernel: C[i, j] = sum_k A[i, k] * B[k, j], full shape (M, N, K)
 * with expanded views of both operands. */
static void test_matmul(void **state) {
  Suite *s = *state;
  enum { M = 9, N = 11, K = 17 };
  float a[M * K], b[K * N], out[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)urand(-1, 1);
  for (int i = 0; i < K * N; i++) b[i] = (float)urand(-1, 1);
  UCtx *c = s->c;
  ShapeTracker *a0 = shp(3, (int64_t)M, (int64_t)1, (int64_t)K),
               *av = st_expand(a0, (const sint[]){M, N, K});
  ShapeTracker *b0 = shp(2, (int64_t)K, (int64_t)N), *b1 = st_permute(b0, (const int[]){1, 0});
  ShapeTracker *b2 = st_reshape(b1, 3, (const sint[]){1, N, K}),
               *bv = st_expand(b2, (const sint[]){M, N, K});
  st_free(a0), st_free(b0), st_free(b1), st_free(b2);
  const int64_t ax[] = {2};
  UOp *r = reduce(uop_mul(ld(c, 1, DT_FLOAT32, av), ld(c, 2, DT_FLOAT32, bv)), OP_ADD, 1, ax);
  HostBuf hb[3] = {{out, sizeof out}, {a, sizeof a}, {b, sizeof b}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(3, (int64_t)M, (int64_t)N, (int64_t)1), r)), 3, hb, 0,
      NULL);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += (double)a[i * K + k] * b[k * N + j];
      if (fabs(out[i * N + j] - want) > 1e-5)
        fail_msg("matmul[%d, %d]: got %.9g want %.9g", i, j, out[i * N + j], want);
    }
}

/* A reduce whose result feeds elementwise ops with another load of the output
 * shape: out = sum_j(a[i, j]) * b[i] + 1. */
static void test_reduce_then_elementwise(void **state) {
  Suite *s = *state;
  enum { R = 6, C = 50 };
  float a[R * C], b[R], out[R];
  for (int i = 0; i < R * C; i++) a[i] = (float)urand(-1, 1);
  for (int i = 0; i < R; i++) b[i] = (float)urand(-1, 1);
  UCtx *c = s->c;
  const int64_t ax[] = {1};
  UOp *r = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)C)), OP_ADD, 1, ax);
  UOp *x = uop_add(uop_mul(r, ld(c, 2, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1))), cf(c, 1));
  HostBuf hb[3] = {{out, sizeof out}, {a, sizeof a}, {b, sizeof b}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1), x)), 3, hb, 0, NULL);
  for (int i = 0; i < R; i++) {
    double sum = 0;
    for (int j = 0; j < C; j++) sum += a[i * C + j];
    check_close(out[i], sum * b[i] + 1, 1e-5, "reduce then elementwise", i);
  }
}

/* Nested reduces over different axes: out = sum over rows of (max over columns). */
static void test_nested_reduce(void **state) {
  Suite *s = *state;
  enum { R = 9, C = 31 };
  float a[R * C], out = 0;
  for (int i = 0; i < R * C; i++) a[i] = (float)urand(-5, 5);
  UCtx *c = s->c;
  const int64_t ax0[] = {0}, ax1[] = {1};
  UOp *m = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)C)), OP_MAX, 1, ax1);
  UOp *x = reduce(uop_mul(m, cf(c, 2)), OP_ADD, 1, ax0);
  HostBuf hb[2] = {{&out, 4}, {a, sizeof a}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1), x)), 2, hb, 0, NULL);
  double want = 0;
  for (int i = 0; i < R; i++) {
    float mx = -INFINITY;
    for (int j = 0; j < C; j++) mx = a[i * C + j] > mx ? a[i * C + j] : mx;
    want += 2.0 * mx;
  }
  check_close(out, want, 1e-6, "nested reduce", 0);
}

/* A reduce that does not depend on the output axis (its input is expanded
 * along it) still runs inside that loop, the parallel one (outside it, every
 * core would repeat it); and a reduce over an axis where its
 * input has size 1 is its input: out[i] = sum_j b[j] + sum_j d[i] with b
 * expanded over rows and d of size 1 along the reduced axis. */
static void test_hoisted_reduce(void **state) {
  Suite *s = *state;
  enum { R = 5, C = 40 };
  float b[C], d[R], out[R];
  for (int i = 0; i < C; i++) b[i] = (float)urand(-1, 1);
  for (int i = 0; i < R; i++) d[i] = (float)urand(-1, 1);
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)1, (int64_t)C), *bv = st_expand(b0, (const sint[]){R, C});
  st_free(b0);
  const int64_t ax1[] = {1};
  UOp *sb = reduce(ld(c, 1, DT_FLOAT32, bv), OP_ADD, 1, ax1);
  UOp *sd = reduce(ld(c, 2, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1)), OP_ADD, 1, ax1);
  HostBuf hb[3] = {{out, sizeof out}, {b, sizeof b}, {d, sizeof d}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1), uop_add(sb, sd))), 3, hb, 0,
      NULL);
  double sum = 0, mag = 0;
  for (int j = 0; j < C; j++) sum += b[j], mag += fabs(b[j]);
  for (int i = 0; i < R; i++)
    if (fabs(out[i] - (sum + d[i])) > 1e-6 * (1 + mag))
      fail_msg("hoisted[%d]: got %.9g want %.9g", i, out[i], sum + d[i]);
}

/* A store through a padded view writes only the valid part: out has 4
 * elements, the view 6 (one invalid at each end). */
static void test_masked_store(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float a[6] = {10, 11, 12, 13, 14, 15}, out[4] = {-1, -1, -1, -1};
  ShapeTracker *b0 = shp(1, (int64_t)4), *sv = st_pad(b0, (const sint[][2]){{1, 1}});
  st_free(b0);
  HostBuf hb[2] = {{out, sizeof out}, {a, sizeof a}};
  run(s, sink1(store(c, 0, DT_FLOAT32, sv, ld(c, 1, DT_FLOAT32, shp(1, (int64_t)6)))), 2, hb, 0,
      NULL);
  for (int i = 0; i < 4; i++) check_close(out[i], a[i + 1], 0, "masked store", i);
}

/* A store through a permuted view: out (5 x 7 in memory) gets a transposed. */
static void test_permuted_store(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float a[7 * 5], out[5 * 7];
  for (int i = 0; i < 35; i++) a[i] = (float)i;
  ShapeTracker *b0 = shp(2, (int64_t)5, (int64_t)7), *sv = st_permute(b0, (const int[]){1, 0});
  st_free(b0);
  HostBuf hb[2] = {{out, sizeof out}, {a, sizeof a}};
  run(s, sink1(store(c, 0, DT_FLOAT32, sv, ld(c, 1, DT_FLOAT32, shp(2, (int64_t)7, (int64_t)5)))),
      2, hb, 0, NULL);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 7; j++)
      check_close(out[i * 7 + j], a[j * 5 + i], 0, "permuted store", i * 7 + j);
}

/* Dims of size 0: nothing is written, and a sum over an empty axis is 0 (max: -inf). */
static void test_zero_size(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float dummy[1] = {7}, out[3] = {-1, -1, -1}, mx[3] = {0, 0, 0};
  HostBuf hb[2] = {{dummy, 0}, {dummy, 0}};
  run(s,
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)0, (int64_t)5),
                  ld(c, 1, DT_FLOAT32, shp(2, (int64_t)0, (int64_t)5)))),
      2, hb, 0, NULL);
  const int64_t ax1[] = {1};
  UOp *A = ld(c, 2, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)0));
  UOp *st[2] = {store(c, 0, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)1), reduce(A, OP_ADD, 1, ax1)),
                store(c, 1, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)1), reduce(A, OP_MAX, 1, ax1))};
  HostBuf hr[3] = {{out, sizeof out}, {mx, sizeof mx}, {dummy, 0}};
  run(s, uop_sink(c, 2, st), 3, hr, 0, NULL);
  for (int i = 0; i < 3; i++) {
    check_close(out[i], 0, 0, "empty sum", i);
    check_close(mx[i], -INFINITY, 0, "empty max", i);
  }
}

/* ---------------------------------------------------------------- loop structure */

/* What the structure check knows of a program: its ranges, and per DEFINE_ACC
 * the loops open where it is declared (those enclosing its own loops). */
typedef struct {
  UOp *ranges[64];
  int nr;
  UOp *acc[64];
  uint64_t acc_open[64];
  int nacc;
  UOp **memo_u;
  uint64_t *memo_m;
  int nm;
} Structure;

static uint64_t range_bit(const Structure *st, const UOp *u) {
  for (int r = 0; r < st->nr; r++)
    if (st->ranges[r] == u) return 1ull << r;
  return 0;
}

/* The ranges u depends on, computed here from the graph: a source RANGE and its
 * dependencies. An ASSIGN's value is read after its accumulator's loops close:
 * its users depend on the loops around them (so they must be inside those), not
 * on the accumulator's own ranges. */
static uint64_t deps_of(Structure *st, UOp *u) {
  for (int i = 0; i < st->nm; i++)
    if (st->memo_u[i] == u) return st->memo_m[i];
  uint64_t m = 0;
  for (uint32_t k = 0; k < u->nsrc; k++) {
    UOp *x = u->src[k];
    uint64_t d = deps_of(st, x) | range_bit(st, x);
    if (x->op == OP_ASSIGN) {
      for (uint32_t j = 1; j < x->src[0]->nsrc; j++) d &= ~range_bit(st, x->src[0]->src[j]);
      for (int i = 0; i < st->nacc; i++)
        if (st->acc[i] == x->src[0]) d |= st->acc_open[i];
    }
    m |= d;
  }
  st->memo_u[st->nm] = u, st->memo_m[st->nm++] = m;
  return m;
}

/* Lowers and linearizes sink, then checks the program: each UOp comes after its
 * sources, inside every loop it depends on, and (values) in no loop it does not
 * depend on: loop-invariant code is hoisted. Returns the deepest nesting. */
static int check_structure(UOp *sink) {
  KernelDesc *kd = calloc(1, sizeof *kd);
  Error err = {0};
  UOp *norm, *low, *legal;
  LinearProgram lp;
  assert_int_equal(kernel_verify(sink, &norm, kd, &err), TVK_OK);
  CgLaunch launch;
  assert_int_equal(lower_kernel(norm, kd, &(OptPlan){0}, &low, &launch, &err), TVK_OK);
  assert_int_equal(legalize_dtypes(uop_simplify(low), &lang_c, false, &legal, &err), TVK_OK);
  if (linearize(legal, &lp, &err) != TVK_OK) fail_msg("linearize: %s", err.msg);
  Structure *st = calloc(1, sizeof *st);
  st->memo_u = calloc(lp.n * 4 + 64, sizeof *st->memo_u);
  st->memo_m = calloc(lp.n * 4 + 64, sizeof *st->memo_m);
  int open[64], nopen = 0, deepest = 0;
  for (size_t p = 0; p < lp.n; p++) {
    UOp *u = lp.uops[p];
    if (u->op == OP_RANGE) st->ranges[st->nr++] = u, open[nopen++] = st->nr - 1;
    if (u->op == OP_ENDRANGE) nopen--;
    if (u->op == OP_DEFINE_ACC) {
      st->acc[st->nacc] = u;
      for (int i = 0; i < nopen; i++) st->acc_open[st->nacc] |= 1ull << open[i];
      st->nacc++;
    }
  }
  assert_int_equal(nopen, 0);
  for (size_t p = 0; p < lp.n; p++) {
    UOp *u = lp.uops[p];
    for (uint32_t k = 0; k < u->nsrc && u->op != OP_DEFINE_ACC; k++) {
      bool seen = false;
      for (size_t q = 0; q < p && !seen; q++) seen = lp.uops[q] == u->src[k];
      if (!seen)
        fail_msg("%s at %zu uses a %s defined later", op_name((Op)u->op), p,
                 op_name((Op)u->src[k]->op));
    }
    if (u->op == OP_ENDRANGE) {
      assert_true(nopen > 0 && st->ranges[open[nopen - 1]] == u->src[0]);
      nopen--;
      continue;
    }
    uint64_t d = deps_of(st, u), inside = 0;
    for (int i = 0; i < nopen; i++) inside |= 1ull << open[i];
    if (u->op != OP_DEFINE_ACC && (d & ~inside)) /* an accumulator is set before its loops */
      fail_msg("%s at %zu is outside a loop it depends on", op_name((Op)u->op), p);
    bool value =
        op_in((Op)u->op, G_ALU) || u->op == OP_CAST || u->op == OP_LOAD || u->op == OP_INDEX;
    if (value && nopen && !(d >> open[nopen - 1] & 1))
      fail_msg("%s at %zu is in a loop it does not depend on", op_name((Op)u->op), p);
    if (u->op == OP_RANGE) {
      for (int r = 0; r < st->nr; r++)
        if (st->ranges[r] == u) open[nopen++] = r;
      deepest = nopen > deepest ? nopen : deepest;
    }
  }
  assert_int_equal(nopen, 0);
  linear_free(&lp);
  free(st->memo_u), free(st->memo_m), free(st), free(kd);
  return deepest;
}

static void test_loop_structure(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t ax0[] = {0}, ax1[] = {1}, ax2[] = {2};
  /* a matmul: the row of A is addressed outside the k loops (K = 64: two
   * loops, 16 x 4, the inner a level of the blocked sum); i (8 rows, fewer
   * than CG_SPLIT_MERGE) and j are one loop split across cores */
  ShapeTracker *a0 = shp(3, (int64_t)8, (int64_t)1, (int64_t)64),
               *av = st_expand(a0, (const sint[]){8, 4, 64});
  ShapeTracker *b0 = shp(3, (int64_t)1, (int64_t)4, (int64_t)64),
               *bv = st_expand(b0, (const sint[]){8, 4, 64});
  st_free(a0), st_free(b0);
  UOp *mm = reduce(uop_mul(ld(c, 1, DT_FLOAT32, av), ld(c, 2, DT_FLOAT32, bv)), OP_ADD, 1, ax2);
  assert_int_equal(check_structure(sink1(
                       store(c, 0, DT_FLOAT32, shp(3, (int64_t)8, (int64_t)4, (int64_t)1), mm))),
                   3);
  /* nested reduces: three levels (the core range, rows, columns) */
  UOp *A = ld(c, 1, DT_FLOAT32, shp(2, (int64_t)9, (int64_t)31));
  UOp *nest = reduce(reduce(A, OP_MAX, 1, ax1), OP_ADD, 1, ax0);
  assert_int_equal(
      check_structure(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1), nest))), 3);
  /* a padded, permuted load in a reduce, plus an elementwise tail: the float
   * sum of 7 is short (CG_SUM_BLOCK): one loop in the core range */
  ShapeTracker *p0 = shp(2, (int64_t)5, (int64_t)6),
               *p1 = st_pad(p0, (const sint[][2]){{1, 1}, {2, 0}});
  ShapeTracker *p2 = st_permute(p1, (const int[]){1, 0});
  st_free(p0), st_free(p1);
  UOp *r = reduce(uop_alu1(OP_EXP2, ld(c, 1, DT_FLOAT32, p2)), OP_ADD, 1, ax1);
  assert_int_equal(check_structure(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)8, (int64_t)1),
                                               uop_add(r, cf(c, 1))))),
                   2);
  /* a long float sum accumulates in levels: 1000 = 10 x 10 x 10 digits, three
   * loops nested in the core range */
  UOp *L = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)1000)), OP_ADD, 1, ax1);
  assert_int_equal(
      check_structure(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)3, (int64_t)1), L))), 4);
}

/* ---- full reduces, and reduces no output axis feeds, then elementwise ops ----
 * A kernel whose output has no axis of size other than 1 runs in a one-iteration
 * loop that only core 0 enters: the reduce loops go in it, and so must every op
 * after the reduce, although such an op depends on no range at all. */

/* Runs a kernel whose nst stores write one float each (buffers 0..nst-1) and
 * whose inputs are buffers nst... */
static void run_scalars(Suite *s, int nst, UOp **st, float *out, int nin, const HostBuf *in) {
  HostBuf hb[8];
  for (int i = 0; i < nst; i++) out[i] = -12345, hb[i] = (HostBuf){&out[i], 4};
  for (int i = 0; i < nin; i++) hb[nst + i] = in[i];
  run(s, uop_sink(s->c, nst, st), nst + nin, hb, 0, NULL);
}

/* sum(x) * 2 alone; then one kernel with five stores: sum * 2, max + 1, min as
 * -max(-x), mean as sum * (1/n), the sum itself; and int32 sum * 3 - 1 and min. */
static void test_reduce_all_then_elementwise(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t ax[] = {0};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t n = sizes[k];
    float *x = malloc((size_t)n * 4), out[5];
    int32_t *xi = malloc((size_t)n * 4), iout[2] = {-1, -1};
    double sum = 0, mag = 0, mx = -INFINITY, mn = INFINITY;
    int64_t isum = 0, imin = INT32_MAX;
    for (int64_t i = 0; i < n; i++) {
      x[i] = (float)urand(-1, 1), xi[i] = (int32_t)(xorshift64(&rng) % 2001) - 1000;
      sum += x[i], mag += fabs(x[i]), mx = fmax(mx, x[i]), mn = fmin(mn, x[i]);
      isum += xi[i], imin = xi[i] < imin ? xi[i] : imin;
    }
    double tol = 1e-6 * (1 + mag);
    HostBuf in = {x, (size_t)n * 4};
    UOp *alone = store(c, 0, DT_FLOAT32, shp(1, (int64_t)1),
                       uop_mul(reduce(ld(c, 1, DT_FLOAT32, shp(1, n)), OP_ADD, 1, ax), cf(c, 2)));
    run_scalars(s, 1, &alone, out, 1, &in);
    if (fabs(out[0] - 2 * sum) > 2 * tol)
      fail_msg("n %lld: sum * 2 alone = %.9g, want %.9g", (long long)n, out[0], 2 * sum);
    UOp *X = ld(c, 5, DT_FLOAT32, shp(1, n)), *S = reduce(X, OP_ADD, 1, ax);
    UOp *v[5] = {uop_mul(S, cf(c, 2)), uop_add(reduce(X, OP_MAX, 1, ax), cf(c, 1)),
                 uop_neg(reduce(uop_neg(X), OP_MAX, 1, ax)), uop_mul(S, cf(c, 1.0 / (double)n)), S};
    UOp *st[5];
    for (int i = 0; i < 5; i++) st[i] = store(c, i, DT_FLOAT32, shp(1, (int64_t)1), v[i]);
    run_scalars(s, 5, st, out, 1, &in);
    if (fabs(out[0] - 2 * sum) > 2 * tol)
      fail_msg("n %lld: sum * 2 = %.9g, want %.9g", (long long)n, out[0], 2 * sum);
    check_close(out[1], (double)(float)mx + 1, 1e-7, "max + 1", n);
    check_close(out[2], mn, 0, "min", n);
    if (fabs(out[3] - sum / (double)n) > tol / (double)n + 1e-7)
      fail_msg("n %lld: mean = %.9g, want %.9g", (long long)n, out[3], sum / (double)n);
    if (fabs(out[4] - sum) > tol)
      fail_msg("n %lld: sum = %.9g, want %.9g", (long long)n, out[4], sum);
    UOp *XI = ld(c, 2, DT_INT32, shp(1, n));
    UOp *ist[2] = {
        store(c, 0, DT_INT32, shp(1, (int64_t)1),
              uop_add_c(uop_mul_c(reduce(XI, OP_ADD, 1, ax), 3), -1)),
        store(c, 1, DT_INT32, shp(1, (int64_t)1), uop_neg(reduce(uop_neg(XI), OP_MAX, 1, ax)))};
    HostBuf hi[3] = {{&iout[0], 4}, {&iout[1], 4}, {xi, (size_t)n * 4}};
    run(s, uop_sink(c, 2, ist), 3, hi, 0, NULL);
    assert_int_equal(iout[0], isum * 3 - 1);
    assert_int_equal(iout[1], imin);
    free(x), free(xi);
  }
}

/* Reduces over every axis of 2-d and 3-d inputs with an elementwise tail,
 * stored keepdim (a buffer of shape (1, 1)) and not (a 0-d or (1,) buffer
 * reshaped to the output shape), from plain and permuted, padded views. */
static void test_reduce_all_keepdim(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  enum { R = 6, C = 9, P = 3, Q = 5, K = 7 };
  float a[R * C], b[P * Q * K], out[3];
  double sa = 0, ma = -INFINITY, sb = 0, mb = 0; /* mb: the padding reads 0 */
  for (int i = 0; i < R * C; i++) a[i] = (float)urand(-3, 3), sa += a[i], ma = fmax(ma, a[i]);
  for (int i = 0; i < P * Q * K; i++) b[i] = (float)urand(-3, 3), sb += b[i], mb = fmax(mb, b[i]);
  const int64_t ax2[] = {0, 1}, ax3[] = {0, 1, 2};
  UOp *A = ld(c, 3, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)C));
  ShapeTracker *z0 = shp(0), *flat2 = st_reshape(z0, 2, (const sint[]){1, 1});
  UOp *st[3] = {
      store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1),
            uop_add(uop_mul(reduce(A, OP_MAX, 2, ax2), cf(c, 0.5)), cf(c, 1))),
      store(c, 1, DT_FLOAT32, flat2, uop_mul(reduce(A, OP_ADD, 2, ax2), cf(c, 1.0 / (R * C)))),
      store(c, 2, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1), reduce(A, OP_ADD, 2, ax2)),
  };
  HostBuf in = {a, sizeof a};
  run_scalars(s, 3, st, out, 1, &in);
  check_close(out[0], ma * 0.5 + 1, 1e-7, "max * 0.5 + 1, keepdim", 0);
  check_close(out[1], sa / (R * C), 1e-5, "mean, not keepdim", 0);
  check_close(out[2], sa, 1e-5, "sum, keepdim", 0);
  /* b read as (K, Q + 2, P): permuted, and padded with a zero row at each end of Q */
  ShapeTracker *b0 = shp(3, (int64_t)P, (int64_t)Q, (int64_t)K),
               *b1 = st_permute(b0, (const int[]){2, 1, 0}),
               *b2 = st_pad(b1, (const sint[][2]){{0, 0}, {1, 1}, {0, 0}});
  ShapeTracker *o0 = shp(1, (int64_t)1), *flat3 = st_reshape(o0, 3, (const sint[]){1, 1, 1});
  st_free(z0), st_free(b0), st_free(b1), st_free(o0);
  UOp *B = uop_new(c, OP_LOAD, DT(FLOAT32), 2, (UOp *[]){glob(c, 2, DT_FLOAT32), view(c, b2)},
                   arg_none());
  UOp *st3[2] = {
      store(c, 0, DT_FLOAT32, flat3, uop_sub(reduce(B, OP_ADD, 3, ax3), cf(c, 4))),
      store(c, 1, DT_FLOAT32, shp(3, (int64_t)1, (int64_t)1, (int64_t)1),
            uop_mul(reduce(B, OP_MAX, 3, ax3), cf(c, 2))),
  };
  HostBuf in3 = {b, sizeof b};
  run_scalars(s, 2, st3, out, 1, &in3);
  check_close(out[0], sb - 4, 1e-5, "sum - 4 of a padded, permuted view, not keepdim", 0);
  check_close(out[1], mb * 2, 0, "max * 2 of a padded, permuted view, keepdim", 0);
}

/* Reduces that verification drops (no axis of size other than 1): over a 0-d
 * input, over a (1,) and a (1, 1) one; with elementwise ops after them. */
static void test_reduce_all_0d(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float x = 1.75f, out[3];
  const int64_t none[] = {0}, ax1[] = {0}, ax2[] = {0, 1};
  UOp *X0 = ld(c, 3, DT_FLOAT32, shp(0));
  UOp *st0[3] = {
      store(c, 0, DT_FLOAT32, shp(0),
            uop_add(uop_mul(reduce(X0, OP_ADD, 0, none), cf(c, 2)), cf(c, 1))),
      store(c, 1, DT_FLOAT32, shp(0), uop_sub(reduce(X0, OP_MAX, 0, none), cf(c, 3))),
      store(c, 2, DT_FLOAT32, shp(0), reduce(uop_mul(X0, X0), OP_MUL, 0, none)),
  };
  HostBuf in = {&x, 4};
  run_scalars(s, 3, st0, out, 1, &in);
  check_close(out[0], 4.5, 0, "0-d sum * 2 + 1", 0);
  check_close(out[1], -1.25, 0, "0-d max - 3", 0);
  check_close(out[2], 1.75 * 1.75, 0, "0-d prod of x * x", 0);
  UOp *X1 = ld(c, 1, DT_FLOAT32, shp(1, (int64_t)1));
  UOp *X2 = ld(c, 2, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1));
  UOp *st1 =
      store(c, 0, DT_FLOAT32, shp(1, (int64_t)1), uop_mul(reduce(X1, OP_ADD, 1, ax1), cf(c, -2)));
  UOp *st2 = store(c, 1, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1),
                   uop_add(reduce(X2, OP_MAX, 2, ax2), cf(c, 0.25)));
  run_scalars(s, 1, &st1, out, 1, &in);
  check_close(out[0], -3.5, 0, "(1,) sum * -2", 0);
  UOp *st2b[2] = {store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1), uop_neg(X2)), st2};
  run_scalars(s, 2, st2b, out, 1, &in);
  check_close(out[0], -1.75, 0, "(1, 1) neg", 0);
  check_close(out[1], 2.0, 0, "(1, 1) max + 0.25", 0);
}

/* Reduces whose value depends on no output axis, followed by elementwise ops:
 * their loops still run inside the parallel loop, and so must the ops after
 * them. (1) out[i] = sum_j b[j] * 2 with b expanded over rows; (2) three dims
 * where two reduces share the k loop: out[p, q] = sum_k b[k] * 2 + sum_k a[p, q, k];
 * (3) nested: out = sum_i (max_j b[j]) * 2 with b expanded over rows. */
static void test_unfed_reduce_then_elementwise(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  enum { R = 5, C = 40, P = 3, Q = 4, K = 10 };
  float b[C], a[P * Q * K], out[P * Q];
  double sb = 0, mx = -INFINITY, mag = 0;
  for (int j = 0; j < C; j++) b[j] = (float)urand(-1, 1), sb += b[j], mx = fmax(mx, b[j]);
  for (int j = 0; j < C; j++) mag += fabs(b[j]);
  for (int i = 0; i < P * Q * K; i++) a[i] = (float)urand(-1, 1);
  const int64_t ax0[] = {0}, ax1[] = {1}, ax2[] = {2};
  /* (1) */
  ShapeTracker *e0 = shp(2, (int64_t)1, (int64_t)C), *ev = st_expand(e0, (const sint[]){R, C});
  UOp *sum_b = reduce(ld(c, 1, DT_FLOAT32, ev), OP_ADD, 1, ax1);
  UOp *k1 =
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)1), uop_mul(sum_b, cf(c, 2))));
  assert_int_equal(check_structure(k1), 3); /* the core range and C = 40 = 10 x 4 */
  HostBuf h1[2] = {{out, R * 4}, {b, sizeof b}};
  run(s, k1, 2, h1, 0, NULL);
  for (int i = 0; i < R; i++)
    if (fabs(out[i] - 2 * sb) > 2e-6 * (1 + mag))
      fail_msg("(1)[%d]: %.9g, want %.9g", i, out[i], 2 * sb);
  /* (2) */
  ShapeTracker *f0 = shp(3, (int64_t)1, (int64_t)1, (int64_t)K),
               *fv = st_expand(f0, (const sint[]){P, Q, K});
  UOp *sbk = reduce(ld(c, 1, DT_FLOAT32, fv), OP_ADD, 1, ax2);
  UOp *sa =
      reduce(ld(c, 2, DT_FLOAT32, shp(3, (int64_t)P, (int64_t)Q, (int64_t)K)), OP_ADD, 1, ax2);
  UOp *k2 = sink1(store(c, 0, DT_FLOAT32, shp(3, (int64_t)P, (int64_t)Q, (int64_t)1),
                        uop_add(uop_mul(sbk, cf(c, 2)), sa)));
  /* the core range over p and q (P = 3 is split with Q), and one k loop for
   * both sums */
  assert_int_equal(check_structure(k2), 2);
  HostBuf h2[3] = {{out, sizeof out}, {b, K * 4}, {a, sizeof a}};
  run(s, k2, 3, h2, 0, NULL);
  double sk = 0;
  for (int k = 0; k < K; k++) sk += b[k];
  for (int i = 0; i < P * Q; i++) {
    double want = 2 * sk;
    for (int k = 0; k < K; k++) want += a[i * K + k];
    check_close(out[i], want, 1e-5, "(2)", i);
  }
  /* (3) */
  ShapeTracker *g0 = shp(2, (int64_t)1, (int64_t)C), *gv = st_expand(g0, (const sint[]){R, C});
  st_free(e0), st_free(f0), st_free(g0);
  UOp *mb = reduce(ld(c, 1, DT_FLOAT32, gv), OP_MAX, 1, ax1);
  UOp *k3 = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1),
                        reduce(uop_mul(mb, cf(c, 2)), OP_ADD, 1, ax0)));
  assert_int_equal(check_structure(k3), 2); /* the max is not recomputed per row */
  HostBuf h3[2] = {{out, 4}, {b, sizeof b}};
  run(s, k3, 2, h3, 0, NULL);
  check_close(out[0], R * 2 * mx, 1e-6, "(3)", 0);
}

/* ---------------------------------------------------------------- vars, float16 */

/* out = a * float(n) + float(m - n), and where(a < float(m), 1, 0) in a second
 * output; vars come in vals[] sorted by name (m before n). */
static void test_define_var(void **state) {
  Suite *s = *state;
  enum { N = 100 };
  float a[N], out[N];
  int32_t flag[N];
  for (int i = 0; i < N; i++) a[i] = (float)(i - 50);
  UCtx *c = s->c;
  UOp *n = uop_var(c, "n", 1, 1000), *m = uop_var(c, "m", -100, 100);
  UOp *A = ld(c, 1, DT_FLOAT32, shp(1, (int64_t)N));
  UOp *x = uop_add(uop_mul(A, uop_cast(n, DT(FLOAT32))), uop_cast(uop_sub(m, n), DT(FLOAT32)));
  UOp *f = uop_where(uop_lt(A, uop_cast(m, DT(FLOAT32))), uop_const_int(c, DT(INT32), 1),
                     uop_const_int(c, DT(INT32), 0));
  UOp *st[2] = {store(c, 0, DT_FLOAT32, shp(1, (int64_t)N), x),
                store(c, 2, DT_INT32, shp(1, (int64_t)N), f)};
  UOp *sink = uop_sink(c, 2, st);
  KernelSource ks;
  assert_int_equal(codegen_kernel(sink, NULL, &ks), TVK_OK);
  assert_int_equal(ks.nvars, 2);
  assert_string_equal(ks.vars[0].name, "m");
  assert_string_equal(ks.vars[1].name, "n");
  assert_true(ks.vars[1].lo == 1 && ks.vars[1].hi == 1000);
  kernel_source_free(&ks);
  const int32_t vals[2] = {7, 3}; /* m = 7, n = 3 */
  HostBuf hb[3] = {{out, sizeof out}, {a, sizeof a}, {flag, sizeof flag}};
  run(s, sink, 3, hb, 2, vals);
  for (int i = 0; i < N; i++) {
    check_close(out[i], a[i] * 3.0 + 4.0, 0, "var", i);
    assert_int_equal(flag[i], a[i] < 7);
  }
}

/* ---- symbolic sizes: one kernel for every value of a variable ---- */

#define SYM_MAX 64

/* A (n, 5) tracker of float32, row-major, with n symbolic. */
static ShapeTracker *sym_rows(sint n, int64_t cols) { return st_from_shape(2, (sint[]){n, cols}); }
/* A (1, cols) row broadcast to (n, cols). */
static ShapeTracker *sym_bcast(sint n, int64_t cols) {
  ShapeTracker *row = shp(2, (int64_t)1, cols), *r = st_expand(row, (sint[]){n, cols});
  st_free(row);
  return r;
}

typedef struct {
  int nb;
  size_t bytes[4]; /* per buffer, for a given n: filled by the case */
  void (*sizes)(int64_t n, size_t *bytes);
  void (*want)(int64_t n, const float *a, const float *b, double *out, int64_t *count);
  int64_t hi;                 /* n's largest value: SYM_MAX when 0 */
  int64_t (*rows)(int64_t n); /* the rows of the output for n (NULL: n) */
} SymCase;

static int64_t rows_pad(int64_t n) { return n + 2; }
static int64_t rows_shrink(int64_t n) { return n - 1; }

/* Compiles the kernel once per device and runs it for several n, each
 * against the case's double-precision reference; with the heuristic's plan
 * (which leaves the symbolic axis whole), or plan, or none (noopt). Returns
 * the number of steps of the plan used. */
static int run_symbolic_with(Suite *s, UOp *sink, const SymCase *sc, const char *name_part,
                             const OptPlan *plan, bool noopt) {
  KernelSource ks;
  CodegenOpts o = {.plan = plan, .noopt = noopt};
  if (codegen_kernel_opts(sink, NULL, &o, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  assert_int_equal(ks.nvars, 1);
  assert_string_equal(ks.vars[0].name, "n");
  int64_t hi = sc->hi ? sc->hi : SYM_MAX;
  assert_true(ks.vars[0].lo == 1 && ks.vars[0].hi == hi);
  if (!strstr(ks.name, name_part)) fail_msg("kernel name %s has no %s", ks.name, name_part);
  int steps = ks.plan.n;
  for (int d = 0; d < 3; d++) {
    Device *dev = s->dev[d];
    DevProgram *p = NULL;
    bool hit;
    if (dev->ops->compile(dev, ks.name, ks.src, &p, &hit, NULL) != TVK_OK)
      fail_msg("compile: %s\n%s", dev->err.msg, ks.src);
    static const int64_t ns[] = {1, 2, 3, 7, 9, 12, 16, 31, 33, SYM_MAX};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
      int64_t n = ns[k];
      if (n > hi) continue;
      size_t bytes[4];
      sc->sizes(n, bytes);
      float *host[4];
      DevBuffer *bufs[4];
      for (int i = 0; i < sc->nb; i++) {
        host[i] = malloc(bytes[i] ? bytes[i] : 4);
        for (size_t e = 0; e < bytes[i] / 4; e++)
          host[i][e] = i == 0 ? -1e30f : (float)urand(-2, 2);
        assert_int_equal(dev->ops->alloc(dev, bytes[i] ? bytes[i] : 4, &bufs[i]), TVK_OK);
        assert_int_equal(dev->ops->copy_in(dev, bufs[i], 0, host[i], bytes[i]), TVK_OK);
      }
      const int32_t val = (int32_t)n;
      /* the launch counts the rows' blocks split across cores from n */
      int64_t u = 1;
      for (int i = 0; i < ks.plan.n; i++)
        if (ks.plan.step[i].axis == 0 && ks.plan.step[i].kind == OPT_UPCAST)
          u = ks.plan.step[i].amount;
      LaunchDims dims = {{kernel_groups(&ks, &val), ks.global[1], ks.global[2]},
                         {ks.local[0], ks.local[1], ks.local[2]}};
      int64_t rows = sc->rows ? sc->rows(n) : n;
      assert_int_equal(dims.global[0], ks.groups ? (rows + u - 1) / u : ks.global[0]);
      if (dev->ops->launch(dev, p, bufs, sc->nb, &val, 1, &dims) != TVK_OK)
        fail_msg("launch: %s", dev->err.msg);
      assert_int_equal(dev->ops->sync(dev), TVK_OK);
      assert_int_equal(dev->ops->copy_out(dev, bufs[0], 0, host[0], bytes[0]), TVK_OK);
      double want[SYM_MAX * 64];
      int64_t count = 0;
      sc->want(n, host[1], sc->nb > 2 ? host[2] : NULL, want, &count);
      assert_int_equal((int64_t)(bytes[0] / 4), count);
      for (int64_t e = 0; e < count; e++) check_close(host[0][e], want[e], 1e-5, name_part, e);
      for (int i = 0; i < sc->nb; i++) dev->ops->free(dev, bufs[i]), free(host[i]);
    }
    dev->ops->program_free(dev, p);
  }
  kernel_source_free(&ks);
  return steps;
}

static void run_symbolic(Suite *s, UOp *sink, const SymCase *sc, const char *name_part) {
  run_symbolic_with(s, sink, sc, name_part, NULL, true);
  run_symbolic_with(s, sink, sc, name_part, NULL, false);
}

/* out (n, 32) = a (n, 64) @ b (64, 32) */
static void sz_mm(int64_t n, size_t *b) {
  b[0] = (size_t)n * 32 * 4, b[1] = (size_t)n * 64 * 4, b[2] = 64 * 32 * 4;
}
static void want_mm(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 32; j++) {
      double acc = 0;
      for (int k = 0; k < 64; k++) acc += (double)a[i * 64 + k] * b[k * 32 + j];
      out[i * 32 + j] = acc;
    }
  *count = n * 32;
}

/* out (32, n) = a (32, 64) @ b (64, n): the symbolic axis is the tile's lanes */
static void sz_mm_cols(int64_t n, size_t *b) {
  b[0] = (size_t)n * 32 * 4, b[1] = 32 * 64 * 4, b[2] = (size_t)n * 64 * 4;
}
static void want_mm_cols(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  for (int i = 0; i < 32; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int k = 0; k < 64; k++) acc += (double)a[i * 64 + k] * b[k * n + j];
      out[i * n + j] = acc;
    }
  *count = n * 32;
}

/* out (n, 5) = a (n, 5) * 2 + b (1, 5) */
static void sz_ew(int64_t n, size_t *b) { b[0] = b[1] = (size_t)n * 5 * 4, b[2] = 5 * 4; }
static void want_ew(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  for (int64_t i = 0; i < n * 5; i++) out[i] = (double)a[i] * 2 + b[i % 5];
  *count = n * 5;
}
/* out (n, 1) = the sum of each row of a (n, 5) */
static void sz_rows(int64_t n, size_t *b) { b[0] = (size_t)n * 4, b[1] = (size_t)n * 5 * 4; }
static void want_rows(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  (void)b;
  for (int64_t i = 0; i < n; i++) {
    out[i] = 0;
    for (int k = 0; k < 5; k++) out[i] += a[i * 5 + k];
  }
  *count = n;
}
/* out (1, 5) = the max of each column of a (n, 5): the reduce over n */
static void sz_cols(int64_t n, size_t *b) { b[0] = 5 * 4, b[1] = (size_t)n * 5 * 4; }
static void want_cols(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  (void)b;
  for (int k = 0; k < 5; k++) {
    out[k] = a[k];
    for (int64_t i = 1; i < n; i++) out[k] = a[i * 5 + k] > out[k] ? a[i * 5 + k] : out[k];
  }
  *count = 5;
}
/* out (1, 5) = the sum of each column of a (n, 5) */
static void want_col_sums(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  (void)b;
  for (int k = 0; k < 5; k++) {
    out[k] = 0;
    for (int64_t i = 0; i < n; i++) out[k] += a[i * 5 + k];
  }
  *count = 5;
}
/* out (5, 1) = the sum of each row of a (5, n): the reduce over n, contiguous */
static void sz_5n(int64_t n, size_t *b) { b[0] = 5 * 4, b[1] = (size_t)n * 5 * 4; }
static void want_5n(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  (void)b;
  for (int r = 0; r < 5; r++) {
    out[r] = 0;
    for (int64_t i = 0; i < n; i++) out[r] += a[r * n + i];
  }
  *count = 5;
}
/* out (n + 2, 5) = a padded with a row of zeros above and below, plus 1 */
static void sz_pad(int64_t n, size_t *b) {
  b[0] = (size_t)(n + 2) * 5 * 4, b[1] = (size_t)n * 5 * 4;
}
static void want_pad_rows(int64_t n, const float *a, const float *b, double *out, int64_t *count) {
  (void)b;
  for (int64_t i = 0; i < (n + 2) * 5; i++) {
    int64_t r = i / 5;
    out[i] = (r >= 1 && r <= n ? (double)a[(r - 1) * 5 + i % 5] : 0.0) + 1;
  }
  *count = (n + 2) * 5;
}
/* out (n - 1, 5) = a's rows after the first, transposed on the way: a is read
 * as its (5, n) transpose's shrink, then permuted back */
static void sz_shrink(int64_t n, size_t *b) {
  b[0] = (size_t)(n - 1) * 5 * 4, b[1] = (size_t)n * 5 * 4;
}
static void want_shrink_rows(int64_t n, const float *a, const float *b, double *out,
                             int64_t *count) {
  (void)b;
  for (int64_t i = 0; i < (n - 1) * 5; i++) out[i] = a[i + 5];
  *count = (n - 1) * 5;
}

static void test_symbolic_sizes(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  sint n = sint_var("n", 1, SYM_MAX);
  ShapeTracker *bcast = sym_bcast(n, 5);
  UOp *ew = store(c, 0, DT_FLOAT32, sym_rows(n, 5),
                  uop_add(uop_mul(ld(c, 1, DT_FLOAT32, sym_rows(n, 5)), cf(c, 2.0)),
                          ld(c, 2, DT_FLOAT32, bcast)));
  run_symbolic(s, sink1(ew), &(SymCase){.nb = 3, .sizes = sz_ew, .want = want_ew}, "E_n");

  int64_t ax1 = 1, ax0 = 0;
  UOp *rows = store(c, 0, DT_FLOAT32, sym_rows(n, 1),
                    reduce(ld(c, 1, DT_FLOAT32, sym_rows(n, 5)), OP_ADD, 1, &ax1));
  run_symbolic(s, sink1(rows), &(SymCase){.nb = 2, .sizes = sz_rows, .want = want_rows}, "r_n");

  UOp *cols = store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)5),
                    reduce(ld(c, 1, DT_FLOAT32, sym_rows(n, 5)), OP_MAX, 1, &ax0));
  run_symbolic(s, sink1(cols), &(SymCase){.nb = 2, .sizes = sz_cols, .want = want_cols}, "r_n");

  ShapeTracker *a = sym_rows(n, 5);
  ShapeTracker *padded = st_pad(a, (const sint(*)[2])(sint[][2]){{1, 1}, {0, 0}});
  st_free(a);
  UOp *pad = store(c, 0, DT_FLOAT32, sym_rows(sint_add(n, 2), 5),
                   uop_add(ld(c, 1, DT_FLOAT32, padded), cf(c, 1.0)));
  run_symbolic(s, sink1(pad),
               &(SymCase){.nb = 2, .sizes = sz_pad, .want = want_pad_rows, .rows = rows_pad},
               "E_n_2");

  ShapeTracker *rows5 = sym_rows(n, 5), *t = st_permute(rows5, (int[]){1, 0}); /* (5, n) */
  st_free(rows5);
  ShapeTracker *ts = st_shrink(t, (const sint(*)[2])(sint[][2]){{0, 5}, {1, n}});
  ShapeTracker *back = st_permute(ts, (int[]){1, 0}); /* (n - 1, 5) */
  st_free(t), st_free(ts);
  UOp *shr = store(c, 0, DT_FLOAT32, sym_rows(sint_sub(n, 1), 5), ld(c, 1, DT_FLOAT32, back));
  run_symbolic(
      s, sink1(shr),
      &(SymCase){.nb = 2, .sizes = sz_shrink, .want = want_shrink_rows, .rows = rows_shrink},
      "E_n_1");

  /* a matmul of n rows: the heuristic tiles the other axes (the rows stay one
   * loop, split across cores), and explicit plans of every CPU kind on them */
  UOp *mm = matmul_sink(c, DT_FLOAT32, n, 32, 64);
  SymCase mmc = {.nb = 3, .sizes = sz_mm, .want = want_mm};
  run_symbolic_with(s, mm, &mmc, "r_n", NULL, true);
  assert_true(run_symbolic_with(s, mm, &mmc, "r_n", NULL, false) > 0);
  /* (the rows' UPCAST masks its last block: n = 1, 2, 3, 7, 33 leave lanes
   * past the end) */
  const OptPlan plans[] = {
      {2, {{OPT_UPCAST, 1, 8}, {OPT_UNROLL, 2, 4}}},
      {2, {{OPT_SPREAD, 1, 4}, {OPT_UPCAST, 1, 2}}},
      {2, {{OPT_UPCAST, 1, 4}, {OPT_CACHE, 1, 2}}},
      {2, {{OPT_UPCAST, 0, 8}, {OPT_UPCAST, 1, 16}}},
      {3, {{OPT_UPCAST, 0, 3}, {OPT_UNROLL, 2, 4}, {OPT_CACHE, 1, 2}}},
      {1, {{OPT_UPCAST, 0, 5}}},
  };
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++)
    run_symbolic_with(s, mm, &mmc, "r_n", &plans[i], false);

  /* a tile whose lanes run along n (16 columns of the output) is peeled
   * (lower.c): full blocks unmasked, then the last one masked, two loop nests
   * whose range ids are offset by 1 and 2 x CG_RANGE_VERSION (the tail's
   * loops render as ridx2000<k>). n = 12
   * has no full block, 33 a tail of 1, 64 no tail. Where n stays below 16
   * there is no full block for any n, and nothing is peeled. */
  OptPlan lanes_n = {2, {{OPT_UPCAST, 0, 4}, {OPT_UPCAST, 1, 16}}};
  UOp *mmc_n = matmul_sink(c, DT_FLOAT32, 32, n, 64);
  run_symbolic_with(s, mmc_n, &(SymCase){.nb = 3, .sizes = sz_mm_cols, .want = want_mm_cols},
                    "r_8u4_nu16", &lanes_n, false);
  sint n12 = sint_var("n", 1, 12);
  UOp *mmc_12 = matmul_sink(c, DT_FLOAT32, 32, n12, 64);
  for (int k = 0; k < 2; k++) {
    CodegenOpts po = {.plan = &lanes_n};
    KernelSource pk;
    assert_int_equal(codegen_kernel_opts(k ? mmc_12 : mmc_n, NULL, &po, &pk), TVK_OK);
    bool peeled = strstr(pk.src, "ridx2000") != NULL;
    if (peeled != !k) fail_msg("%s: peeled %d, want %d:\n%s", pk.name, peeled, !k, pk.src);
    kernel_source_free(&pk);
  }

  /* n in [1, 12] upcast by 8: at most 2 blocks, though 12 / 8 rounds to 1 */
  UOp *ew12 = store(c, 0, DT_FLOAT32, sym_rows(n12, 5),
                    uop_add(uop_mul(ld(c, 1, DT_FLOAT32, sym_rows(n12, 5)), cf(c, 2.0)),
                            ld(c, 2, DT_FLOAT32, sym_bcast(n12, 5))));
  OptPlan up8 = {1, {{OPT_UPCAST, 0, 8}}};
  run_symbolic_with(s, sink1(ew12), &(SymCase){.nb = 3, .sizes = sz_ew, .want = want_ew, .hi = 12},
                    "E_nu8", &up8, false);
  OptPlan up4 = {1, {{OPT_UPCAST, 0, 4}}};
  run_symbolic_with(s, sink1(ew), &(SymCase){.nb = 3, .sizes = sz_ew, .want = want_ew}, "E_nu4",
                    &up4, false);

  /* a reduce over n unrolled into u lanes: the lanes' loop runs the full
   * blocks unmasked, then the n % u elements left run in a loop of their own
   * (lower.c). n = 1..12 has no full block of 16, 16 no tail, 31 a tail of
   * 15 (of 3 for 4 lanes); a float sum and a max (keyed, docs/codegen.md). */
  UOp *csum = store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)5),
                    reduce(ld(c, 1, DT_FLOAT32, sym_rows(n, 5)), OP_ADD, 1, &ax0));
  for (int32_t u = 4; u <= 16; u += 12) {
    OptPlan un = {1, {{OPT_UNROLL, 0, u}}};
    char part[16];
    snprintf(part, sizeof part, "_nr%d_5", u);
    run_symbolic_with(s, sink1(csum), &(SymCase){.nb = 2, .sizes = sz_cols, .want = want_col_sums},
                      part, &un, false);
    run_symbolic_with(s, sink1(cols), &(SymCase){.nb = 2, .sizes = sz_cols, .want = want_cols},
                      part, &un, false);
  }
  /* the heuristic unrolls a float sum along a contiguous symbolic axis; an
   * exact reduce stays a loop (the C compiler widens it, reordered) */
  ShapeTracker *r5 = st_from_shape(2, (sint[]){5, n});
  UOp *x5 = ld(c, 1, DT_FLOAT32, r5);
  UOp *sum5 = store(c, 0, DT_FLOAT32, shp(2, (int64_t)5, (int64_t)1), reduce(x5, OP_ADD, 1, &ax1));
  UOp *max5 = store(c, 0, DT_FLOAT32, shp(2, (int64_t)5, (int64_t)1), reduce(x5, OP_MAX, 1, &ax1));
  run_symbolic_with(s, sink1(sum5), &(SymCase){.nb = 2, .sizes = sz_5n, .want = want_5n}, "_nr",
                    NULL, false);
  KernelSource hk;
  assert_int_equal(codegen_kernel_opts(sink1(max5), NULL, &(CodegenOpts){0}, &hk), TVK_OK);
  if (strstr(hk.name, "_nr")) fail_msg("%s: an exact reduce over n unrolled", hk.name);
  kernel_source_free(&hk);

  /* a step on the symbolic axis other than one UPCAST (or an UNROLL of the
   * kernel's one reduced axis) is refused with the reason */
  KernelSource ks;
  OptPlan plan = {1, {{OPT_SPREAD, 0, 2}}};
  CodegenOpts o = {.plan = &plan};
  assert_int_equal(codegen_kernel_opts(sink1(ew), NULL, &o, &ks), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(ks.err.msg, "symbolic"));
  kernel_source_free(&ks);
  int64_t both[2] = {0, 1};
  UOp *all = store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1),
                   reduce(ld(c, 1, DT_FLOAT32, sym_rows(n, 5)), OP_ADD, 2, both));
  plan = (OptPlan){1, {{OPT_UNROLL, 0, 4}}};
  assert_int_equal(codegen_kernel_opts(sink1(all), NULL, &o, &ks), TVK_ERR_INVALID_ARG);
  if (!strstr(ks.err.msg, "only reduced axis")) fail_msg("the message: %s", ks.err.msg);
  kernel_source_free(&ks);
}

/* float16 in and out: out = a * b + a (each op rounds to half), a float32 copy
 * of a, and the float16 sum of each row of a. */
static void test_float16(void **state) {
  Suite *s = *state;
  enum { R = 4, C = 257 };
  uint16_t a[R * C], b[R * C], out[R * C], rs[R];
  float af[R * C];
  for (int i = 0; i < R * C; i++) {
    a[i] = half_round(urand(-4, 4)), b[i] = half_round(urand(-4, 4));
    if (i == 3) a[i] = 0x7c00; /* inf */
    if (i == 5) a[i] = 0x0001; /* the smallest subnormal */
    if (i == 6) b[i] = 0x7bff; /* 65504: * 4 overflows to inf */
    if (i == 7) a[i] = 0xfe00; /* -NaN */
  }
  UCtx *c = s->c;
  UOp *A = ld(c, 1, DT_FLOAT16, shp(2, (int64_t)R, (int64_t)C)),
      *B = ld(c, 2, DT_FLOAT16, shp(2, (int64_t)R, (int64_t)C));
  const int64_t ax[] = {1};
  UOp *st[2] = {store(c, 0, DT_FLOAT16, shp(2, (int64_t)R, (int64_t)C), uop_add(uop_mul(A, B), A)),
                store(c, 3, DT_FLOAT32, shp(2, (int64_t)R, (int64_t)C), uop_cast(A, DT(FLOAT32)))};
  HostBuf hb[4] = {{out, sizeof out}, {a, sizeof a}, {b, sizeof b}, {af, sizeof af}};
  run(s, uop_sink(c, 2, st), 4, hb, 0, NULL);
  /* the row sums: another kernel (its output shape differs) */
  UOp *sum = store(c, 0, DT_FLOAT16, shp(2, (int64_t)R, (int64_t)1),
                   reduce(ld(c, 1, DT_FLOAT16, shp(2, (int64_t)R, (int64_t)C)), OP_ADD, 1, ax));
  HostBuf hs[2] = {{rs, sizeof rs}, {a, sizeof a}};
  run(s, sink1(sum), 2, hs, 0, NULL);
  for (int i = 0; i < R * C; i++) {
    double x = half_value(a[i]), y = half_value(b[i]);
    uint16_t want = half_round(half_value(half_round(x * y)) + x);
    bool nan = isnan(half_value(want)) && isnan(half_value(out[i]));
    if (out[i] != want && !nan)
      fail_msg("half[%d]: %g * %g + %g: got 0x%04x want 0x%04x", i, x, y, x, out[i], want);
    if (!(isnan(x) && isnan(af[i])) && af[i] != x)
      fail_msg("half->float[%d]: got %g want %g", i, af[i], x);
  }
  /* A float sum accumulates in blocks (lower.c), so no fixed order of half
   * roundings is the reference: the exact sum instead, within the bound of any
   * order of C - 1 half additions, (C - 1) 2^-11 sum |a|, plus the final
   * rounding; inf and NaN where a row has them. */
  for (int r = 0; r < R; r++) {
    double exact = 0, mag = 0;
    for (int q = 0; q < C; q++)
      exact += half_value(a[r * C + q]), mag += fabs(half_value(a[r * C + q]));
    double got = half_value(rs[r]);
    bool same = isnan(exact) ? isnan(got)
                : isinf(exact)
                    ? got == exact
                    : fabs(got - exact) <= (C - 1) * 0x1p-11 * mag + fabs(exact) * 0x1p-11;
    if (!same) fail_msg("half row sum %d: got %g want %g (sum |a| %g)", r, got, exact, mag);
  }
}

/* bfloat16 and float64 -> float16 casts round once, to nearest even. */
static void test_half_casts(void **state) {
  Suite *s = *state;
  enum { N = 4096 };
  double d[N];
  uint16_t h[N], bf[N];
  for (int i = 0; i < N; i++)
    d[i] = i < 8 ? (double[]){0.0,           -0.0,    1.0 + ldexp(1, -11) + ldexp(1, -30),
                              65519.99,      65520.0, ldexp(1, -25),
                              ldexp(3, -26), NAN}[i]
                 : urand(-70000, 70000) * (i % 3 ? 1 : 1e-6);
  UCtx *c = s->c;
  UOp *D = ld(c, 0, DT_FLOAT64, shp(1, (int64_t)N));
  UOp *st[2] = {store(c, 1, DT_FLOAT16, shp(1, (int64_t)N), uop_cast(D, DT(FLOAT16))),
                store(c, 2, DT_BFLOAT16, shp(1, (int64_t)N),
                      uop_cast(uop_cast(D, DT(FLOAT32)), DT(BFLOAT16)))};
  HostBuf hb[3] = {{d, sizeof d}, {h, sizeof h}, {bf, sizeof bf}};
  run(s, uop_sink(c, 2, st), 3, hb, 0, NULL);
  for (int i = 0; i < N; i++) {
    uint16_t want = half_round(d[i]);
    if (h[i] != want && !(isnan(d[i]) && (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff)))
      fail_msg("f64 -> f16 [%d] %.17g: got 0x%04x want 0x%04x", i, d[i], h[i], want);
    /* bfloat16: the top 16 bits of the float, rounded to nearest even */
    float f = (float)d[i];
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t rem = u & 0xffff, q = u >> 16;
    if (rem > 0x8000 || (rem == 0x8000 && (q & 1))) q++;
    if (!isnan(f) && bf[i] != q)
      fail_msg("f32 -> bf16 [%d] %.9g: got 0x%04x want 0x%04x", i, f, bf[i], q);
  }
}

/* ---------------------------------------------------------------- long expressions */

enum { DEEP_N = 37, DEEP_STEPS = 200 };

/* The deepest nesting of brackets within a line of src. */
static int max_nesting(const char *src) {
  int d = 0, most = 0;
  for (const char *p = src; *p; p++) {
    if (*p == '(' || *p == '[' || *p == '{') most = ++d > most ? d : most;
    if (*p == ')' || *p == ']' || *p == '}') d--;
    if (*p == '\n') d = 0;
  }
  return most;
}

/* The chains, reading buffer in and storing to buffer out. kind 0: float32
 * x = (x + c_k) * 0.5; kind 1: the same in float16 after a cast from float32
 * (each op rounds to half); kind 2: int32 x = x * 3 + k (wrapping). */
static UOp *deep_chain(UCtx *c, int kind, int out, int in) {
  UOp *x = ld(c, in, kind == 2 ? DT_INT32 : DT_FLOAT32, shp(1, (int64_t)DEEP_N));
  DType dt = kind == 1 ? DT(FLOAT16) : x->dtype;
  x = uop_cast(x, dt);
  for (int k = 0; k < DEEP_STEPS; k++) {
    if (kind == 2)
      x = uop_add_c(uop_mul_c(x, 3), k);
    else
      x = uop_mul(uop_add(x, uop_const_float(c, dt, k % 5 - 2)), uop_const_float(c, dt, 0.5));
  }
  return store(c, out, (ScalarType)dt.scalar, shp(1, (int64_t)DEEP_N), x);
}

/* Checks the outputs of the chains against plain loops. */
static void deep_check(int kind, const void *in, const void *got) {
  for (int i = 0; i < DEEP_N; i++) {
    if (kind == 2) {
      uint32_t r = (uint32_t)((const int32_t *)in)[i];
      for (int k = 0; k < DEEP_STEPS; k++) r = r * 3u + (uint32_t)k;
      assert_int_equal(((const int32_t *)got)[i], (int32_t)r);
      continue;
    }
    float a = ((const float *)in)[i];
    if (kind == 0) {
      float r = a;
      for (int k = 0; k < DEEP_STEPS; k++) r = (float)((double)r + (k % 5 - 2)), r = r * 0.5f;
      check_close(((const float *)got)[i], r, 1e-6, "float32 chain", i);
    } else {
      uint16_t r = half_round(a);
      for (int k = 0; k < DEEP_STEPS; k++)
        r = half_round(half_value(r) + (k % 5 - 2)), r = half_round(half_value(r) * 0.5);
      if (((const uint16_t *)got)[i] != r)
        fail_msg("float16 chain[%d]: got 0x%04x want 0x%04x", i, ((const uint16_t *)got)[i], r);
    }
  }
}

/* Kernels with one long chain of single-use ops (200 steps, 400 ops), each
 * alone and all three in one kernel. The source must compile (it was once cut
 * at 256 characters per expression), give the values of plain loops, and nest
 * brackets no deeper than compilers accept (clang: 256). */
static void test_deep_expression(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  float a[DEEP_N], out[DEEP_N];
  uint16_t h[DEEP_N];
  int32_t ia[DEEP_N], iout[DEEP_N];
  for (int i = 0; i < DEEP_N; i++)
    a[i] = (float)urand(-100, 100), ia[i] = (int32_t)(xorshift64(&rng) % 2000001) - 1000000;
  HostBuf outs[3] = {{out, sizeof out}, {h, sizeof h}, {iout, sizeof iout}};
  HostBuf ins[3] = {{a, sizeof a}, {a, sizeof a}, {ia, sizeof ia}};
  for (int kind = 0; kind < 4; kind++) { /* each chain alone, then all three */
    UOp *st[3];
    HostBuf hb[6];
    int nst = kind < 3 ? 1 : 3;
    for (int k = 0; k < nst; k++) {
      int which = kind < 3 ? kind : k;
      st[k] = deep_chain(c, which, 2 * k, 2 * k + 1);
      hb[2 * k] = outs[which], hb[2 * k + 1] = ins[which];
      memset(outs[which].data, 0, outs[which].bytes);
    }
    UOp *sink = uop_sink(c, nst, st);
    char *src = source_of(sink);
    if (max_nesting(src) > 64) fail_msg("brackets nest %d deep:\n%s", max_nesting(src), src);
    free(src);
    run(s, sink, 2 * nst, hb, 0, NULL);
    for (int k = 0; k < nst; k++)
      deep_check(kind < 3 ? kind : k, ins[kind < 3 ? kind : k].data,
                 outs[kind < 3 ? kind : k].data);
  }
  /* the int chain has no undefined behaviour (and compiles warning-free) */
  HostBuf hu[2] = {outs[2], ins[2]};
  ub_check(s, sink1(deep_chain(c, 2, 0, 1)), 2, hu);
}

/* A var with a long name keeps all of it in the source and the UOp listing. */
static void test_long_var_name(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  char name[201];
  for (int i = 0; i < 200; i++) name[i] = (char)('a' + i % 26);
  name[200] = 0;
  name[150] = '.'; /* not an identifier character: spelled '_' */
  enum { N = 9 };
  float a[N], out[N];
  for (int i = 0; i < N; i++) a[i] = (float)i;
  UOp *v = uop_var(c, name, 0, 100);
  UOp *x = uop_mul(ld(c, 1, DT_FLOAT32, shp(1, (int64_t)N)), uop_cast(v, DT(FLOAT32)));
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(1, (int64_t)N), x));
  KernelSource ks;
  CodegenOpts o = {.want_uops = true};
  assert_int_equal(codegen_kernel_opts(sink, NULL, &o, &ks), TVK_OK);
  char want[210];
  snprintf(want, sizeof want, "v0_%s", name);
  want[3 + 150] = '_';
  if (!strstr(ks.src, want)) fail_msg("'%s' is not in:\n%s", want, ks.src);
  if (!strstr(ks.uops, name)) fail_msg("'%s' is not in:\n%s", name, ks.uops);
  kernel_source_free(&ks);
  HostBuf hb[2] = {{out, sizeof out}, {a, sizeof a}};
  const int32_t vals[1] = {7};
  run(s, sink, 2, hb, 1, vals);
  for (int i = 0; i < N; i++) check_close(out[i], 7.0 * i, 0, "long var", i);
}

/* ---------------------------------------------------------------- golden sources */

/* The exact source of two tiny kernels, to catch unintended changes to the
 * generated code. When a change is intended, regenerate them on purpose:
 *   TVK_GOLDEN_PRINT=1 ./test_codegen 2>&1 | less
 * prints each kernel's source; review it, then paste it here. */
static void check_golden(UOp *sink, const char *want) {
  char *got = source_of(sink);
  if (getenv("TVK_GOLDEN_PRINT")) fprintf(stderr, "---- golden ----\n%s----\n", got);
  if (strcmp(got, want) != 0) fail_msg("generated source changed:\n%s", got);
  free(got);
}

static const char golden_add[] = C_PRELUDE
    "void E_4(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  int32_t *data0 = (int32_t *)bufs[0];\n"
    "  const int32_t *data1 = (const int32_t *)bufs[1];\n"
    "  const int32_t *data2 = (const int32_t *)bufs[2];\n"
    "  (void)vals;\n"
    "  int32_t alu0 = ((3/n_cores)+1);\n"
    "  int64_t alu1 = (((int64_t)core_id)*((int64_t)alu0));\n"
    "  int32_t cast0 = ((int32_t)((alu1<4LL)?alu1:4LL));\n"
    "  int32_t alu2 = (4-cast0);\n"
    "  int32_t alu3 = ((alu2<alu0)?alu2:alu0);\n"
    "  for (int32_t ridx0 = 0; ridx0 < alu3; ridx0++) {\n"
    "    int32_t alu4 = (cast0+ridx0);\n"
    "    int32_t val0 = data1[alu4];\n"
    "    int32_t val1 = data2[alu4];\n"
    "    data0[alu4] = "
    "((int32_t)((uint32_t)val0+(uint32_t)((int32_t)((uint32_t)val1*(uint32_t)3))));\n"
    "  }\n"
    "}\n";

static const char golden_sum[] = C_PRELUDE
    "#ifdef TVK_SEL_MASK\n"
    "TVK_INLINE float tvk_sel_f32(bool c, float a, float b) {\n"
    "  union { float f; uint32_t u; } x = {a}, y = {b};\n"
    "  uint32_t m = 0u - (uint32_t)c;\n"
    "  x.u = (x.u & m) | (y.u & ~m);\n"
    "  return x.f;\n"
    "}\n"
    "#else\n"
    "TVK_INLINE float tvk_sel_f32(bool c, float a, float b) { return c ? a : b; }\n"
    "#endif\n"
    "TVK_INLINE float tvk_max_f32(float a, float b) { return tvk_sel_f32(b > a, b, a); }\n"
    "void r_2_3(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  float *data0 = (float *)bufs[0];\n"
    "  const float *data1 = (const float *)bufs[1];\n"
    "  (void)vals;\n"
    "  int32_t alu0 = ((1/n_cores)+1);\n"
    "  int64_t alu1 = (((int64_t)core_id)*((int64_t)alu0));\n"
    "  int32_t cast0 = ((int32_t)((alu1<2LL)?alu1:2LL));\n"
    "  int32_t alu2 = (2-cast0);\n"
    "  int32_t alu3 = ((alu2<alu0)?alu2:alu0);\n"
    "  for (int32_t ridx0 = 0; ridx0 < alu3; ridx0++) {\n"
    "    int32_t alu4 = (cast0+ridx0);\n"
    "    float acc0 = 0.0f;\n"
    "    for (int32_t ridx1 = 0; ridx1 < 3; ridx1++) {\n"
    "      float val0 = data1[(alu4+(ridx1*2))];\n"
    "      acc0 = (acc0+val0);\n"
    "    }\n"
    "    data0[alu4] = tvk_max_f32(acc0, 0.0f);\n"
    "  }\n"
    "}\n";

/* out[i] = a[i] + b[i] * 3, int32, 4 elements */
static void test_golden_add(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  UOp *x = uop_add(ld(c, 1, DT_INT32, shp(1, (int64_t)4)),
                   uop_mul_c(ld(c, 2, DT_INT32, shp(1, (int64_t)4)), 3));
  check_golden(sink1(store(c, 0, DT_INT32, shp(1, (int64_t)4), x)), golden_add);
}

/* out[i] = max(0, sum_j a[i, j]) for a 2 x 3 float32 matrix read transposed */
static void test_golden_sum(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)3, (int64_t)2), *st = st_permute(b0, (const int[]){1, 0});
  st_free(b0);
  const int64_t ax[] = {1};
  UOp *x = uop_max(reduce(ld(c, 1, DT_FLOAT32, st), OP_ADD, 1, ax), cf(c, 0));
  check_golden(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)1), x)), golden_sum);
}

/* The same AST, built twice and in another context, renders the same source
 * (so the device's disk cache hits across runs). */
static void test_deterministic(void **state) {
  Suite *s = *state;
  char *src[3];
  for (int k = 0; k < 3; k++) {
    UCtx *c = k == 2 ? uctx_new() : s->c;
    const int64_t ax[] = {0};
    UOp *A = ld(c, 1, DT_FLOAT32, shp(2, (int64_t)10, (int64_t)20));
    UOp *x = reduce(uop_mul(A, uop_alu1(OP_EXP2, A)), OP_ADD, 1, ax);
    src[k] = source_of(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)20), x)));
    if (k == 2) uctx_free(c);
  }
  assert_string_equal(src[0], src[1]);
  assert_string_equal(src[0], src[2]);
  for (int k = 0; k < 3; k++) free(src[k]);
}

/* ---------------------------------------------------------------- errors */

static void expect_error(UOp *sink, tvk_status want, const char *needle) {
  KernelSource ks;
  tvk_status st = codegen_kernel(sink, NULL, &ks);
  if (st != want)
    fail_msg("status %s, want %s (%s)", tvk_status_name(st), tvk_status_name(want), ks.err.msg);
  if (!strstr(ks.err.msg, needle))
    fail_msg("message '%s' does not mention '%s'", ks.err.msg, needle);
  assert_null(ks.src);
  assert_null(ks.name);
}

/* Indices are int32: what must fit is the index values a view computes, not
 * its element count. A 2048^3 matmul expands (M,1,K) and (1,N,K) to (M,N,K):
 * 2^33 logical elements, yet every index stays below M*K. A view reaching
 * 50000*50000 elements of memory, or a store of 2^31 elements, is refused. */
static void test_int32_index_limits(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t n = 2048, full[3] = {n, n, n}, ax1[] = {1}, ax2[] = {2};
  ShapeTracker *a0 = shp(3, n, (int64_t)1, n), *b0 = shp(3, (int64_t)1, n, n);
  ShapeTracker *a = st_expand(a0, full), *b = st_expand(b0, full);
  st_free(a0), st_free(b0);
  UOp *mm = reduce(uop_mul(ld(c, 1, DT_FLOAT32, a), ld(c, 2, DT_FLOAT32, b)), OP_ADD, 1, ax2);
  KernelSource ks = {0};
  UOp *ast = sink1(store(c, 0, DT_FLOAT32, shp(3, n, n, (int64_t)1), mm));
  assert_int_equal(codegen_kernel(ast, NULL, &ks), TVK_OK);
  kernel_source_free(&ks);
  /* Past int32, the kernel's index math is int64: a view reaching 2.5e9
   * elements, and an output of 2.5e9 elements. */
  const int64_t big = 50000;
  UOp *far = ld(c, 1, DT_FLOAT32, shp(2, big, big));
  UOp *asts[2] = {
      sink1(store(c, 0, DT_FLOAT32, shp(2, big, (int64_t)1), reduce(far, OP_ADD, 1, ax1))),
      sink1(store(c, 0, DT_FLOAT32, shp(2, big, big),
                  uop_new(c, OP_CONST, DT(FLOAT32), 1, (UOp *[]){view(c, shp(2, big, big))},
                          arg_float(1)))),
  };
  for (int k = 0; k < 2; k++) {
    assert_int_equal(codegen_kernel(asts[k], NULL, &ks), TVK_OK);
    assert_non_null(strstr(ks.src, "int64_t ridx"));
    kernel_source_free(&ks);
  }
  /* past what int64 index math leaves room for: refused */
  View hv = view_make(2, (const int64_t[]){4, 3}, NULL, INT64_MAX - 100, NULL);
  ShapeTracker *huge = st_from_view(&hv);
  expect_error(
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)3), ld(c, 1, DT_FLOAT32, huge))),
      TVK_ERR_INVALID_ARG, "2^63");
}

/* An int64 index computed and used: a view whose rows are 2^33 elements apart,
 * of which only row 0 is valid (a pad), so no memory past the first row is
 * touched, but the index of row 1 (2^33) must not wrap into row 0's. */
static void test_int64_index_run(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t far = (int64_t)1 << 33;
  View w = view_make(2, (const int64_t[]){2, 5}, (const int64_t[]){far, 1}, 0,
                     (const int64_t[][2]){{0, 1}, {0, 5}});
  UOp *x = ld(c, 1, DT_FLOAT32, st_from_view(&w));
  float in[5] = {1, 2, 3, 4, 5}, out[10];
  HostBuf hb[2] = {{out, sizeof out}, {in, sizeof in}};
  run(s, sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)5), uop_add(x, cf(c, 1)))), 2,
      hb, 0, NULL);
  for (int i = 0; i < 10; i++) check_close(out[i], i < 5 ? in[i] + 1 : 1, 0, "int64 view", i);
}

static void test_errors(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  UOp *A = ld(c, 1, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5));
  expect_error(NULL, TVK_ERR_INVALID_ARG, "NULL");
  /* not a SINK */
  expect_error(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), A), TVK_ERR_INVALID_ARG,
               "SINK");
  /* a store through a view of another shape than the value */
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)1), A)),
               TVK_ERR_INVALID_ARG, "shape");
  /* views that disagree on a dim */
  UOp *B = ld(c, 2, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)6));
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), uop_add(A, B))),
               TVK_ERR_INVALID_ARG, "at dim 1");
  /* views of different ranks */
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(1, (int64_t)20), A)), TVK_ERR_INVALID_ARG, "dims");
  /* a reduce with SUB */
  const int64_t ax1[] = {1}, ax9[] = {9};
  expect_error(
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)1), reduce(A, OP_SUB, 1, ax1))),
      TVK_ERR_INVALID_ARG, "SUB");
  /* an axis out of range */
  expect_error(
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)1), reduce(A, OP_ADD, 1, ax9))),
      TVK_ERR_INVALID_ARG, "axis 9");
  /* a store of the full shape after a reduce */
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5),
                           uop_add(A, reduce(A, OP_ADD, 1, ax1)))),
               TVK_ERR_INVALID_ARG, "reduced");
  /* a reduce over an axis inside a reduce over the same axis */
  UOp *inner = reduce(A, OP_MAX, 1, ax1);
  UOp *nested = reduce(uop_add(A, inner), OP_ADD, 1, ax1);
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)1), nested)),
               TVK_ERR_INVALID_ARG, "two kernels");
  /* a load with a dtype other than its buffer's */
  UOp *bad = uop_new(c, OP_LOAD, DT(INT32), 2,
                     (UOp *[]){glob(c, 1, DT_FLOAT32), view(c, shp(2, (int64_t)4, (int64_t)5))},
                     arg_none());
  expect_error(sink1(store(c, 0, DT_INT32, shp(2, (int64_t)4, (int64_t)5), bad)),
               TVK_ERR_INVALID_ARG, "int32");
  /* buffer 1 used as two dtypes */
  UOp *I = ld(c, 1, DT_INT32, shp(2, (int64_t)4, (int64_t)5));
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5),
                           uop_add(A, uop_cast(I, DT(FLOAT32))))),
               TVK_ERR_INVALID_ARG, "two dtypes");
  /* a gap in the buffer numbers */
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5),
                           ld(c, 2, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5)))),
               TVK_ERR_INVALID_ARG, "buffer 1");
  /* an op codegen does not take in an AST */
  UOp *ptr = uop_new(c, OP_ASSIGN, DT(FLOAT32), 1, &A, arg_none());
  expect_error(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), ptr)),
               TVK_ERR_INVALID_ARG, "ASSIGN");
  /* an op the C renderer cannot spell: bitwise XOR on floats */
  UOp *A2 = ld(c, 2, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5));
  expect_error(
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), uop_alu2(OP_XOR, A, A2))),
      TVK_ERR_DTYPE, "XOR");
  /* one var name with two bounds */
  UOp *v1 = uop_cast(uop_var(c, "k", 0, 5), DT(FLOAT32)),
      *v2 = uop_cast(uop_var(c, "k", 0, 6), DT(FLOAT32));
  expect_error(
      sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), uop_add(A, uop_add(v1, v2)))),
      TVK_ERR_INVALID_ARG, "'k'");
  /* a kernel name that is not an identifier */
  KernelSource ks;
  assert_int_equal(codegen_kernel(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), A)),
                                  "no good", &ks),
                   TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(ks.err.msg, "no good"));
  /* a good one is used as given */
  assert_int_equal(codegen_kernel(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)4, (int64_t)5), A)),
                                  "my_copy", &ks),
                   TVK_OK);
  assert_string_equal(ks.name, "my_copy");
  assert_non_null(strstr(ks.src, "void my_copy("));
  kernel_source_free(&ks);
  kernel_source_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_float_chain),
      T(test_int_chain),
      T(test_int32_ops),
      T(test_small_int_ops),
      T(test_wide_int_ops),
      T(test_bool_ops),
      T(test_float_ops),
      T(test_int_casts),
      T(test_permute),
      T(test_pad),
      T(test_flip),
      T(test_shrink),
      T(test_cost_estimate),
      T(test_expand),
      T(test_combined_views),
      T(test_masked_const),
      T(test_unit_dims),
      T(test_sum_last_axis),
      T(test_sum_first_axis),
      T(test_sum_all_axes),
      T(test_max_negative),
      T(test_fused_dot),
      T(test_matmul),
      T(test_reduce_then_elementwise),
      T(test_nested_reduce),
      T(test_hoisted_reduce),
      T(test_loop_structure),
      T(test_reduce_all_then_elementwise),
      T(test_reduce_all_keepdim),
      T(test_reduce_all_0d),
      T(test_unfed_reduce_then_elementwise),
      T(test_masked_store),
      T(test_permuted_store),
      T(test_zero_size),
      T(test_define_var),
      T(test_symbolic_sizes),
      T(test_float16),
      T(test_half_casts),
      T(test_deep_expression),
      T(test_long_var_name),
      T(test_golden_add),
      T(test_golden_sum),
      T(test_deterministic),
      T(test_errors),
      T(test_int32_index_limits),
      T(test_int64_index_run),
  };
  return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
