/* Tests of the tensor ops (src/frontend/ops_*.c, ops_common.c) that need no
 * kernel to run: result shapes and dtypes, error kinds and messages, error
 * propagation, NULL inputs, the graphs the ops build, and flat memory over
 * many iterations. Values come from evaluating the graph of 0-d tensors with
 * the IR's own evaluator (uop_eval, the semantics every backend renders) and
 * are compared with libm in double; movement ops are checked through their
 * ShapeTracker against index formulas written in the test. End-to-end values
 * on a device are the op suite's (tests/test_ops_*.c). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv, strdup (test_util.h) */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/alu.h"
#include "test_util.h"
#include "tvk.h"

static tvk_ctx *C; /* the context of the running test (setup / teardown) */

static int setup(void **state) {
  (void)state;
  tvk_status s = tvk_ctx_create("CPU", &C);
  if (s != TVK_OK) fprintf(stderr, "tvk_ctx_create: %s\n", tvk_last_create_error());
  return s == TVK_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  tvk_ctx_destroy(C);
  C = NULL;
  return 0;
}

/* ---------------------------------------------------------------- helpers */

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* A constant tensor of dtype dt and the given shape (no memory). */
#define FULL(dt, ...) tvk_full(C, dt, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__), 1.0)
#define SCALAR(dt) tvk_full(C, dt, 0, NULL, 1.0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return xorshift64(&rng); }

static void expect_shape(const tvk_tensor *t, int nd, const int64_t *shape) {
  assert_int_equal(tvk_status_of(t), TVK_OK);
  assert_int_equal(tvk_ndim(t), nd);
  for (int d = 0; d < nd; d++) assert_int_equal(tvk_shape(t)[d], shape[d]);
}
#define EXPECT_SHAPE(t, ...) expect_shape(t, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))
#define EXPECT_SCALAR_SHAPE(t) expect_shape(t, 0, NULL)

/* t is an error tensor of status st whose message holds every given piece. */
static void expect_error(tvk_tensor *t, tvk_status st, int n, const char *const *pieces) {
  assert_non_null(t);
  if (tvk_status_of(t) != st)
    fprintf(stderr, "status %s, message \"%s\"\n", tvk_status_name(tvk_status_of(t)),
            tvk_error_of(t));
  assert_int_equal(tvk_status_of(t), st);
  assert_int_equal(tvk_ndim(t), 0);
  for (int i = 0; i < n; i++) {
    if (!strstr(tvk_error_of(t), pieces[i]))
      fprintf(stderr, "message \"%s\" lacks \"%s\"\n", tvk_error_of(t), pieces[i]);
    assert_non_null(strstr(tvk_error_of(t), pieces[i]));
  }
  assert_string_equal(tvk_ctx_error(t->ctx), tvk_error_of(t));
}
#define EXPECT_ERROR(t, st, ...)                                                                   \
  expect_error(t, st, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *)),               \
               (const char *[]){__VA_ARGS__})

/* ---------------------------------------------------------------- scalar evaluation */

/* A copy of the graph without VIEWs: on 0-d tensors every VIEW is an identity
 * over one element, so what is left is scalar math for uop_eval. A VALUE
 * (tvk_scalar's float32: a kernel gets it at launch) becomes the CONST of its
 * value. */
typedef struct {
  UOp *from[512], *to[512];
  int n;
} Memo;

static UOp *strip(Memo *m, UOp *u) {
  for (int i = 0; i < m->n; i++)
    if (m->from[i] == u) return m->to[i];
  UOp *r = u;
  if (u->op == OP_VALUE) {
    uint32_t bits = graph_value_bits(u);
    float f;
    memcpy(&f, &bits, sizeof f);
    r = uop_const_float(u->ctx, dt_make(DT_FLOAT32), f);
  } else if (u->op == OP_VIEW) {
    r = strip(m, u->src[0]);
  } else if (u->nsrc) {
    UOp *src[4];
    assert_true(u->nsrc <= 4);
    for (uint32_t i = 0; i < u->nsrc; i++) src[i] = strip(m, u->src[i]);
    r = uop_replace_src(u, (int)u->nsrc, src);
  }
  assert_true(m->n < 512);
  m->from[m->n] = u;
  m->to[m->n++] = r;
  return r;
}

/* The value of a 0-d tensor built from constants, as a double. */
static double value_of(tvk_tensor *t) {
  assert_int_equal(tvk_status_of(t), TVK_OK);
  size_t mark = uop_pool_mark(C->u);
  Memo m = {.n = 0};
  CVal v;
  bool ok = uop_eval(strip(&m, t->uop), 0, NULL, NULL, &v);
  uop_pool_drain(C->u, mark);
  if (!ok) uop_print(stderr, t->uop);
  assert_true(ok);
  return cval_to_double(v, dt_from_tvk(tvk_dtype_of(t)));
}

typedef tvk_tensor *(*Un)(tvk_tensor *);
typedef tvk_tensor *(*Bin)(tvk_tensor *, tvk_tensor *);

static double ev1(Un f, tvk_dtype dt, double x) {
  tvk_tensor *a = tvk_scalar(C, dt, x), *r = f(a);
  double v = value_of(r);
  tvk_release(a);
  tvk_release(r);
  return v;
}

static double ev2(Bin f, tvk_dtype dt, double x, double y) {
  tvk_tensor *a = tvk_scalar(C, dt, x), *b = tvk_scalar(C, dt, y), *r = f(a, b);
  double v = value_of(r);
  tvk_release(a);
  tvk_release(b);
  tvk_release(r);
  return v;
}

/* Same value, NaN equal to NaN and the sign of zero significant. */
static bool same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

static void expect_same(const char *what, double x, double got, double want) {
  if (!same(got, want)) fprintf(stderr, "%s(%.17g) = %.17g, want %.17g\n", what, x, got, want);
  assert_true(same(got, want));
}

/* |got - want| <= atol + rtol |want|, NaN and inf exact. */
static void expect_close(const char *what, double x, double got, double want, double rtol,
                         double atol) {
  bool ok = isfinite(want) ? fabs(got - want) <= atol + rtol * fabs(want) : same(got, want);
  if (!ok) fprintf(stderr, "%s(%.9g) = %.17g, want %.17g\n", what, x, got, want);
  assert_true(ok);
}

/* ---------------------------------------------------------------- broadcasting */

static void test_broadcast_table(void **state) {
  (void)state;
  static const struct {
    int na, nb, nr;
    int64_t a[4], b[4], r[4];
  } cases[] = {
      {2, 1, 2, {2, 3}, {3}, {2, 3}},
      {2, 2, 2, {4, 1}, {1, 5}, {4, 5}},
      {0, 1, 1, {0}, {2}, {2}},
      {0, 0, 0, {0}, {0}, {0}},
      {2, 2, 2, {0, 3}, {1, 3}, {0, 3}},
      {1, 1, 1, {1}, {0}, {0}},
      {3, 2, 3, {5, 1, 4}, {3, 1}, {5, 3, 4}},
      {4, 1, 4, {1, 2, 1, 3}, {1}, {1, 2, 1, 3}},
      {1, 4, 4, {7}, {2, 1, 3, 1}, {2, 1, 3, 7}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tvk_tensor *a = tvk_full(C, TVK_FLOAT32, cases[i].na, cases[i].a, 1);
    tvk_tensor *b = tvk_full(C, TVK_FLOAT32, cases[i].nb, cases[i].b, 2);
    tvk_tensor *r = tvk_add(a, b), *r2 = tvk_mul(b, a);
    expect_shape(r, cases[i].nr, cases[i].r);
    expect_shape(r2, cases[i].nr, cases[i].r);
    /* the graph: both operands of the ALU already have the result shape */
    int64_t s[TVK_MAX_DIMS];
    assert_int_equal(r->uop->op, OP_ADD);
    for (int k = 0; k < 2; k++) {
      assert_int_equal(graph_shape(r->uop->src[k], s), cases[i].nr);
      assert_memory_equal(s, cases[i].r, (size_t)cases[i].nr * sizeof(int64_t));
    }
    tvk_release(a);
    tvk_release(b);
    tvk_release(r);
    tvk_release(r2);
  }
}

/* Random shapes made to broadcast: each operand takes the target size or 1 at
 * each dim, and may drop leading dims; the result dim is the target unless
 * every operand has 1 there. */
static void test_broadcast_random(void **state) {
  (void)state;
  for (int iter = 0; iter < 500; iter++) {
    int nd = (int)(rnd() % 6);
    int64_t target[6], sh[3][6], want[6];
    int n[3];
    for (int d = 0; d < nd; d++) target[d] = (int64_t)(rnd() % 5);
    for (int k = 0; k < 3; k++) {
      n[k] = nd - (int)(rnd() % (unsigned)(nd + 1));
      for (int d = 0; d < n[k]; d++) sh[k][d] = rnd() % 2 ? target[nd - n[k] + d] : 1;
    }
    for (int d = 0; d < nd; d++) {
      want[d] = 1;
      for (int k = 0; k < 3; k++)
        if (d >= nd - n[k] && sh[k][d - (nd - n[k])] != 1) want[d] = target[d];
    }
    int nw = 0;
    for (int k = 0; k < 3; k++) nw = n[k] > nw ? n[k] : nw;
    tvk_tensor *t[3];
    for (int k = 0; k < 3; k++) t[k] = tvk_full(C, k == 0 ? TVK_BOOL : TVK_INT32, n[k], sh[k], 1);
    tvk_tensor *w = tvk_where(t[0], t[1], t[2]), *s = tvk_sub(t[1], t[2]);
    expect_shape(w, nw, want + (nd - nw));
    assert_int_equal(tvk_dtype_of(w), TVK_INT32);
    int64_t ws[6];
    int ns = 0;
    for (int d = 0; d < nd; d++) {
      bool in = false;
      for (int k = 1; k < 3; k++)
        if (d >= nd - n[k]) in = true;
      if (!in) continue;
      ws[ns] = 1;
      for (int k = 1; k < 3; k++)
        if (d >= nd - n[k] && sh[k][d - (nd - n[k])] != 1) ws[ns] = target[d];
      ns++;
    }
    expect_shape(s, ns, ws);
    for (int k = 0; k < 3; k++) tvk_release(t[k]);
    tvk_release(w);
    tvk_release(s);
  }
}

/* ---------------------------------------------------------------- dtypes */

static void test_promotion_table(void **state) {
  (void)state;
  static const tvk_dtype cases[][3] = {
      {TVK_INT8, TVK_UINT8, TVK_INT16},        {TVK_UINT8, TVK_INT16, TVK_INT16},
      {TVK_INT32, TVK_UINT32, TVK_INT64},      {TVK_INT64, TVK_UINT64, TVK_FLOAT16},
      {TVK_UINT64, TVK_INT8, TVK_FLOAT16},     {TVK_BOOL, TVK_UINT8, TVK_UINT8},
      {TVK_BOOL, TVK_FLOAT16, TVK_FLOAT16},    {TVK_FLOAT16, TVK_BFLOAT16, TVK_FLOAT32},
      {TVK_INT64, TVK_FLOAT16, TVK_FLOAT16},   {TVK_UINT32, TVK_INT8, TVK_INT64},
      {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT64}, {TVK_INT32, TVK_FLOAT32, TVK_FLOAT32},
      {TVK_UINT16, TVK_INT16, TVK_INT32},      {TVK_UINT16, TVK_UINT32, TVK_UINT32},
      {TVK_BOOL, TVK_BOOL, TVK_BOOL},          {TVK_BFLOAT16, TVK_INT32, TVK_BFLOAT16},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int swap = 0; swap < 2; swap++) {
      tvk_tensor *a = FULL(cases[i][swap], 2), *b = FULL(cases[i][1 - swap], 2);
      tvk_tensor *r = tvk_add(a, b), *m = tvk_maximum(a, b), *w = tvk_where(a, a, b);
      assert_int_equal(tvk_dtype_of(r), cases[i][2]);
      assert_int_equal(tvk_dtype_of(m), cases[i][2]);
      assert_int_equal(tvk_dtype_of(w), cases[i][2]);
      assert_int_equal(r->uop->dtype.scalar, dt_from_tvk(cases[i][2]));
      tvk_release(a);
      tvk_release(b);
      tvk_release(r);
      tvk_release(m);
      tvk_release(w);
    }
  }
}

typedef struct {
  const char *name;
  Bin f;
} NamedBin;

static const NamedBin binaries[] = {
    {"add", tvk_add},
    {"sub", tvk_sub},
    {"mul", tvk_mul},
    {"div", tvk_div},
    {"pow", tvk_pow},
    {"maximum", tvk_maximum},
    {"minimum", tvk_minimum},
    {"lt", tvk_lt},
    {"le", tvk_le},
    {"gt", tvk_gt},
    {"ge", tvk_ge},
    {"eq", tvk_eq},
    {"ne", tvk_ne},
    {"logical_and", tvk_logical_and},
    {"logical_or", tvk_logical_or},
    {"bitwise_and", tvk_bitwise_and},
    {"bitwise_or", tvk_bitwise_or},
    {"bitwise_xor", tvk_bitwise_xor},
    {"shl", tvk_shl},
    {"shr", tvk_shr},
    {"idiv", tvk_idiv},
    {"mod", tvk_mod},
};
#define NBIN (sizeof binaries / sizeof binaries[0])

/* The result dtype of binary op i on operands of dtype dt (TVK_ERR_DTYPE:
 * -1), written from tvk.h's table. */
static int binary_result(int i, tvk_dtype dt) {
  const char *n = binaries[i].name;
  bool is_f = dt >= TVK_FLOAT16, is_b = dt == TVK_BOOL;
  if (!strcmp(n, "div") || !strcmp(n, "pow")) return is_f ? (int)dt : TVK_FLOAT32;
  if (n[0] == 'l' || n[0] == 'g' || !strcmp(n, "eq") || !strcmp(n, "ne")) return TVK_BOOL;
  if (!strncmp(n, "bitwise", 7)) return is_f ? -1 : (int)dt;
  if (!strcmp(n, "shl") || !strcmp(n, "shr") || !strcmp(n, "idiv") || !strcmp(n, "mod"))
    return is_f || is_b ? -1 : (int)dt;
  return dt;
}

static void test_binary_dtypes(void **state) {
  (void)state;
  for (size_t i = 0; i < NBIN; i++) {
    for (int dt = TVK_BOOL; dt <= TVK_FLOAT64; dt++) {
      tvk_tensor *a = FULL((tvk_dtype)dt, 3, 1), *b = FULL((tvk_dtype)dt, 4),
                 *r = binaries[i].f(a, b);
      int want = binary_result((int)i, (tvk_dtype)dt);
      if (want < 0) {
        EXPECT_ERROR(r, TVK_ERR_DTYPE, binaries[i].name, tvk_dtype_name((tvk_dtype)dt));
      } else {
        EXPECT_SHAPE(r, 3, 4);
        assert_int_equal(tvk_dtype_of(r), want);
        assert_int_equal(r->uop->dtype.scalar, dt_from_tvk((tvk_dtype)want));
      }
      tvk_release(a);
      tvk_release(b);
      tvk_release(r);
    }
  }
}

/* Mixed dtypes that promote to one an op does not take name all three. */
static void test_binary_dtype_mixed_error(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_INT32, 2), *b = FULL(TVK_FLOAT16, 2), *r = tvk_mod(a, b);
  EXPECT_ERROR(r, TVK_ERR_DTYPE, "mod", "int32", "float16", "integer");
  tvk_tensor *s = tvk_shl(b, a);
  EXPECT_ERROR(s, TVK_ERR_DTYPE, "shl", "float16");
  tvk_release(a);
  tvk_release(b);
  tvk_release(r);
  tvk_release(s);
}

typedef struct {
  const char *name;
  Un f;
  char kind; /* k: keeps the dtype, f: float (ints -> float32), r: rounding, b: bool */
} NamedUn;

static const NamedUn unaries[] = {
    {"neg", tvk_neg, 'k'},     {"exp", tvk_exp, 'f'},
    {"exp2", tvk_exp2, 'f'},   {"log", tvk_log, 'f'},
    {"log2", tvk_log2, 'f'},   {"sqrt", tvk_sqrt, 'f'},
    {"rsqrt", tvk_rsqrt, 'f'}, {"recip", tvk_recip, 'f'},
    {"sin", tvk_sin, 'f'},     {"cos", tvk_cos, 'f'},
    {"abs", tvk_abs, 'k'},     {"sign", tvk_sign, 'k'},
    {"relu", tvk_relu, 'k'},   {"sigmoid", tvk_sigmoid, 'f'},
    {"tanh", tvk_tanh, 'f'},   {"gelu", tvk_gelu, 'f'},
    {"silu", tvk_silu, 'f'},   {"floor", tvk_floor, 'r'},
    {"ceil", tvk_ceil, 'r'},   {"round", tvk_round, 'r'},
    {"trunc", tvk_trunc, 'r'}, {"logical_not", tvk_logical_not, 'b'},
};
#define NUN (sizeof unaries / sizeof unaries[0])

static void test_unary_dtypes(void **state) {
  (void)state;
  for (size_t i = 0; i < NUN; i++) {
    for (int dt = TVK_BOOL; dt <= TVK_FLOAT64; dt++) {
      tvk_tensor *a = FULL((tvk_dtype)dt, 2, 0, 3), *r = unaries[i].f(a);
      bool is_f = dt >= TVK_FLOAT16;
      if (unaries[i].f == tvk_neg && dt == TVK_BOOL) {
        EXPECT_ERROR(r, TVK_ERR_DTYPE, "neg", "bool", "logical_not");
      } else {
        int want = unaries[i].kind == 'f'   ? (is_f ? dt : TVK_FLOAT32)
                   : unaries[i].kind == 'b' ? TVK_BOOL
                                            : dt;
        EXPECT_SHAPE(r, 2, 0, 3);
        assert_int_equal(tvk_dtype_of(r), want);
        assert_int_equal(r->uop->dtype.scalar, dt_from_tvk((tvk_dtype)want));
        /* rounding integers changes nothing: a new tensor on the same node */
        if (unaries[i].kind == 'r' && !is_f) {
          assert_ptr_not_equal(r, a);
          assert_ptr_equal(r->uop, a->uop);
        }
      }
      tvk_release(a);
      tvk_release(r);
    }
  }
}

static void test_cast(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2, 3);
  for (int dt = TVK_BOOL; dt <= TVK_FLOAT64; dt++) {
    tvk_tensor *r = tvk_cast(a, (tvk_dtype)dt);
    EXPECT_SHAPE(r, 2, 3);
    assert_int_equal(tvk_dtype_of(r), dt);
    if (dt == TVK_FLOAT32) assert_ptr_equal(r->uop, a->uop);
    tvk_release(r);
  }
  tvk_tensor *bad = tvk_cast(a, (tvk_dtype)99);
  EXPECT_ERROR(bad, TVK_ERR_DTYPE, "cast", "99");
  tvk_release(bad);
  tvk_release(a);
  /* values: float -> int truncates toward zero, -> bool is x != 0 */
  static const double xs[] = {-2.7, -0.5, 0.0, 0.25, 2.7, 127.9};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    tvk_tensor *x = tvk_scalar(C, TVK_FLOAT32, xs[i]);
    tvk_tensor *ti = tvk_cast(x, TVK_INT32), *tb = tvk_cast(x, TVK_BOOL);
    expect_same("cast_i32", xs[i], value_of(ti), trunc((float)xs[i]) + 0.0);
    expect_same("cast_bool", xs[i], value_of(tb), (float)xs[i] != 0);
    tvk_release(x);
    tvk_release(ti);
    tvk_release(tb);
  }
}

/* ---------------------------------------------------------------- binary values */

static double ref_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double ref_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }

static void test_binary_values_float(void **state) {
  (void)state;
  static const double v[] = {-INFINITY, -3.5, -2, -1, -0.0, 0.0, 0.5, 1, 2, 3, INFINITY, NAN};
  const size_t n = sizeof v / sizeof v[0];
  for (int k = 0; k < 2; k++) {
    tvk_dtype dt = k ? TVK_FLOAT64 : TVK_FLOAT32;
    for (size_t i = 0; i < n; i++) {
      for (size_t j = 0; j < n; j++) {
        double a = v[i], b = v[j];
        /* references in double, rounded to the dtype once */
#define R(x) (k ? (double)(x) : (double)(float)(x))
        expect_same("add", a, ev2(tvk_add, dt, a, b), R(a + b));
        expect_same("sub", a, ev2(tvk_sub, dt, a, b), R(a - b));
        expect_same("mul", a, ev2(tvk_mul, dt, a, b), R(a * b));
        expect_same("div", a, ev2(tvk_div, dt, a, b), R(a / b));
        expect_same("pow", a, ev2(tvk_pow, dt, a, b), R(pow(a, b))); /* C's: (-0)**-1 = -inf */
        double mx = ev2(tvk_maximum, dt, a, b), mn = ev2(tvk_minimum, dt, a, b);
        bool zeros = a == 0 && b == 0; /* max(-0, 0): either zero */
        if (zeros) {
          assert_true(mx == 0 && mn == 0);
        } else {
          expect_same("maximum", a, mx, ref_max(a, b));
          expect_same("minimum", a, mn, ref_min(a, b));
        }
        expect_same("lt", a, ev2(tvk_lt, dt, a, b), a < b);
        expect_same("le", a, ev2(tvk_le, dt, a, b), a <= b);
        expect_same("gt", a, ev2(tvk_gt, dt, a, b), a > b);
        expect_same("ge", a, ev2(tvk_ge, dt, a, b), a >= b);
        expect_same("eq", a, ev2(tvk_eq, dt, a, b), a == b);
        expect_same("ne", a, ev2(tvk_ne, dt, a, b), a != b);
        expect_same("logical_and", a, ev2(tvk_logical_and, dt, a, b), a != 0 && b != 0);
        expect_same("logical_or", a, ev2(tvk_logical_or, dt, a, b), a != 0 || b != 0);
#undef R
      }
    }
  }
}

static void test_binary_values_int(void **state) {
  (void)state;
  /* C semantics: truncating division, the remainder with the dividend's sign */
  static const double iv[] = {-128, -7, -2, -1, 0, 1, 2, 7, 127};
  const size_t n = sizeof iv / sizeof iv[0];
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      int a = (int)iv[i], b = (int)iv[j];
      int8_t wrap_add = (int8_t)(uint8_t)(a + b), wrap_sub = (int8_t)(uint8_t)(a - b);
      int8_t wrap_mul = (int8_t)(uint8_t)(a * b);
      expect_same("add_i8", a, ev2(tvk_add, TVK_INT8, a, b), wrap_add);
      expect_same("sub_i8", a, ev2(tvk_sub, TVK_INT8, a, b), wrap_sub);
      expect_same("mul_i8", a, ev2(tvk_mul, TVK_INT8, a, b), wrap_mul);
      expect_same("maximum_i8", a, ev2(tvk_maximum, TVK_INT8, a, b), a > b ? a : b);
      expect_same("minimum_i8", a, ev2(tvk_minimum, TVK_INT8, a, b), a < b ? a : b);
      expect_same("le_i8", a, ev2(tvk_le, TVK_INT8, a, b), a <= b);
      expect_same("ge_i8", a, ev2(tvk_ge, TVK_INT8, a, b), a >= b);
      expect_same("eq_i8", a, ev2(tvk_eq, TVK_INT8, a, b), a == b);
      expect_same("xor_i8", a, ev2(tvk_bitwise_xor, TVK_INT8, a, b), (int8_t)(a ^ b));
      int q = b == 0 ? 0 : (int8_t)(uint8_t)(a / b), r = b == 0 ? 0 : a % b;
      expect_same("idiv_i8", a, ev2(tvk_idiv, TVK_INT8, a, b), q);
      expect_same("mod_i8", a, ev2(tvk_mod, TVK_INT8, a, b), r);
      expect_same("div_i8", a, ev2(tvk_div, TVK_INT8, a, b), (double)((float)a / (float)b));
      /* uint8 views of the same bits */
      unsigned ua = (uint8_t)a, ub = (uint8_t)b;
      expect_same("minimum_u8", ua, ev2(tvk_minimum, TVK_UINT8, ua, ub), ua < ub ? ua : ub);
      expect_same("maximum_u8", ua, ev2(tvk_maximum, TVK_UINT8, ua, ub), ua > ub ? ua : ub);
      expect_same("sub_u8", ua, ev2(tvk_sub, TVK_UINT8, ua, ub), (uint8_t)(ua - ub));
    }
  }
  /* int32 minimum at the bottom of the range (negation would wrap) */
  expect_same("minimum_i32", 0, ev2(tvk_minimum, TVK_INT32, INT32_MIN, 5), INT32_MIN);
  expect_same("shl_i32", 3, ev2(tvk_shl, TVK_INT32, 3, 4), 48);
  expect_same("shr_i32", -16, ev2(tvk_shr, TVK_INT32, -16, 2), -4);
  expect_same("shr_u32", 4294967280.0, ev2(tvk_shr, TVK_UINT32, 4294967280.0, 4), 268435455);
  /* bool: arithmetic truncated to bool */
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      expect_same("add_b", a, ev2(tvk_add, TVK_BOOL, a, b), a | b);
      expect_same("sub_b", a, ev2(tvk_sub, TVK_BOOL, a, b), a ^ b);
      expect_same("mul_b", a, ev2(tvk_mul, TVK_BOOL, a, b), a & b);
      expect_same("minimum_b", a, ev2(tvk_minimum, TVK_BOOL, a, b), a & b);
      expect_same("maximum_b", a, ev2(tvk_maximum, TVK_BOOL, a, b), a | b);
      expect_same("le_b", a, ev2(tvk_le, TVK_BOOL, a, b), a <= b);
      expect_same("pow_b", a, ev2(tvk_pow, TVK_BOOL, a, b), pow(a, b));
    }
}

static void test_where_values(void **state) {
  (void)state;
  static const double conds[] = {0, 1, -2, NAN, 0.0};
  for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
    tvk_tensor *c = tvk_scalar(C, TVK_FLOAT32, conds[i]);
    tvk_tensor *a = tvk_scalar(C, TVK_INT8, -5), *b = tvk_scalar(C, TVK_UINT8, 200);
    tvk_tensor *r = tvk_where(c, a, b);
    assert_int_equal(tvk_dtype_of(r), TVK_INT16);
    expect_same("where", conds[i], value_of(r), conds[i] != 0 ? -5 : 200);
    tvk_release(c);
    tvk_release(a);
    tvk_release(b);
    tvk_release(r);
  }
}

/* ---------------------------------------------------------------- unary values */

static double ref_round(double x) { return nearbyint(x); } /* default mode: halves to even */
static double ref_sign(double x) { return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : x; }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
/* 0.5 x (1 + tanh z) written as x / (1 + e^(-2z)): in double the first form
 * cancels to 0 for x < -8 where the function is still ~1e-29 */
static double ref_gelu(double x) {
  double z = sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
  return x / (1 + exp(-2 * z));
}

/* Rounding is exact: every dtype, across the integer limit, signed zeros. */
static void test_rounding(void **state) {
  (void)state;
  static const double v[] = {0.0,
                             -0.0,
                             0.25,
                             -0.25,
                             0.5,
                             -0.5,
                             1.5,
                             -1.5,
                             2.5,
                             -2.5,
                             3.5,
                             -3.5,
                             0.49999997,
                             -0.49999997,
                             2.3,
                             -3.7,
                             1023.5,
                             -1023.5,
                             127.5,
                             8388607.5,
                             -8388607.5,
                             8388608,
                             16777215,
                             1e10,
                             -1e10,
                             4503599627370495.5,
                             -4503599627370495.5,
                             1e300,
                             INFINITY,
                             -INFINITY,
                             NAN};
  static const tvk_dtype dts[] = {TVK_FLOAT16, TVK_BFLOAT16, TVK_FLOAT32, TVK_FLOAT64};
  for (size_t k = 0; k < 4; k++) {
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
      /* the input as the dtype holds it */
      tvk_tensor *t = tvk_scalar(C, dts[k], v[i]);
      double x = value_of(t);
      tvk_release(t);
      expect_same("floor", x, ev1(tvk_floor, dts[k], x), floor(x));
      expect_same("ceil", x, ev1(tvk_ceil, dts[k], x), ceil(x));
      expect_same("trunc", x, ev1(tvk_trunc, dts[k], x), trunc(x));
      expect_same("round", x, ev1(tvk_round, dts[k], x), ref_round(x));
    }
  }
}

static void test_sign_abs_relu(void **state) {
  (void)state;
  static const double v[] = {-INFINITY, -3, -0.5, -0.0, 0.0, 0.5, 3, INFINITY, NAN};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    double x = v[i];
    expect_same("abs", x, ev1(tvk_abs, TVK_FLOAT32, x), fabs(x));
    expect_same("neg", x, ev1(tvk_neg, TVK_FLOAT32, x), -x);
    expect_same("sign", x, ev1(tvk_sign, TVK_FLOAT32, x), ref_sign(x));
    expect_same("relu", x, ev1(tvk_relu, TVK_FLOAT32, x), isnan(x) ? x : x < 0 ? 0.0 : x);
    expect_same("logical_not", x, ev1(tvk_logical_not, TVK_FLOAT32, x), x == 0);
  }
  static const double iv[] = {-128, -3, 0, 3, 127};
  for (size_t i = 0; i < sizeof iv / sizeof iv[0]; i++) {
    double x = iv[i];
    expect_same("abs_i8", x, ev1(tvk_abs, TVK_INT8, x), x == -128 ? -128 : fabs(x));
    expect_same("neg_i8", x, ev1(tvk_neg, TVK_INT8, x), x == -128 ? -128 : -x + 0.0);
    expect_same("sign_i8", x, ev1(tvk_sign, TVK_INT8, x), ref_sign(x) + 0.0);
    expect_same("relu_i8", x, ev1(tvk_relu, TVK_INT8, x), x < 0 ? 0 : x);
    double u = (uint8_t)(int)x;
    expect_same("sign_u8", u, ev1(tvk_sign, TVK_UINT8, u), u > 0);
    expect_same("abs_u8", u, ev1(tvk_abs, TVK_UINT8, u), u);
  }
}

/* Transcendentals on float32 and float64 inputs against libm in double.
 * float32 error bounds: exp's argument x*log2(e) is rounded, so its error
 * grows with |x| (relative 6e-8 |x|); the others stay within a few ulps. */
static void test_transcendentals(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    tvk_dtype dt = k ? TVK_FLOAT64 : TVK_FLOAT32;
    double eps = k ? DBL_EPSILON : FLT_EPSILON;
/* a reference rounded to the dtype (float32 overflows to inf where double does not) */
#define IN_DT(w) (k ? (double)(w) : (double)(float)(w))
    for (int i = 0; i < 2000; i++) {
      /* log-uniform magnitudes from 1e-6 to 1e2, both signs */
      double u = (double)(rnd() % 1000000) / 1000000.0;
      double x = (rnd() % 2 ? -1 : 1) * pow(10, -6 + 8 * u);
      if (!k) x = (float)x;
      double ax = fabs(x);
      /* results near the smallest normal lose precision or flush to 0: sigmoid
       * is 1/(1 + 2^-x log2(e)) = 0 once 2^128 overflows (x < -88.7), where
       * the true value is below 1e-38 (silu's below 1e-36) */
      double tiny = k ? 1e-300 : 1e-36;
      expect_close("exp", x, ev1(tvk_exp, dt, x), IN_DT(exp(x)), 4 * eps * (1 + ax), tiny);
      expect_close("exp2", x, ev1(tvk_exp2, dt, x), IN_DT(exp2(x)), 2 * eps, 0);
      expect_close("log", ax, ev1(tvk_log, dt, ax), IN_DT(log(ax)), 4 * eps, 0);
      expect_close("log2", ax, ev1(tvk_log2, dt, ax), IN_DT(log2(ax)), 2 * eps, 0);
      expect_close("sqrt", ax, ev1(tvk_sqrt, dt, ax), IN_DT(sqrt(ax)), eps, 0);
      expect_close("rsqrt", ax, ev1(tvk_rsqrt, dt, ax), IN_DT(1 / sqrt(ax)), 2 * eps, 0);
      expect_close("recip", x, ev1(tvk_recip, dt, x), IN_DT(1 / x), eps, 0);
      expect_close("sin", x, ev1(tvk_sin, dt, x), IN_DT(sin(x)), eps, 2 * eps);
      expect_close("cos", x, ev1(tvk_cos, dt, x), IN_DT(cos(x)), 2 * eps, 4 * eps);
      expect_close("sigmoid", x, ev1(tvk_sigmoid, dt, x), IN_DT(ref_sigmoid(x)), 4 * eps * (1 + ax),
                   tiny);
      /* tanh: relative below the series threshold, else 2 sigmoid(2x) - 1 is
       * good to a few ulps of 1 */
      double tanh_atol = ax < (k ? 1.0 / 32 : 0.25) ? 0 : 4 * eps;
      expect_close("tanh", x, ev1(tvk_tanh, dt, x), IN_DT(tanh(x)), 8 * eps, tanh_atol);
      expect_close("silu", x, ev1(tvk_silu, dt, x), IN_DT(x * ref_sigmoid(x)), 4 * eps * (1 + ax),
                   tiny);
      expect_close("gelu", x, ev1(tvk_gelu, dt, x), IN_DT(ref_gelu(x)), 8 * eps * (1 + ax * ax),
                   tiny);
    }
  }
#undef IN_DT
  /* large arguments of cos keep their accuracy (x/2 is exact) */
  for (double x = 1000.25; x < 1e6; x *= 3.7) {
    double xf = (float)x;
    expect_close("cos", xf, ev1(tvk_cos, TVK_FLOAT32, xf), cos(xf), 0, 4 * FLT_EPSILON);
  }
}

static void test_special_values(void **state) {
  (void)state;
  expect_same("log", 0, ev1(tvk_log, TVK_FLOAT32, 0), -INFINITY);
  expect_same("log", -1, ev1(tvk_log, TVK_FLOAT32, -1), NAN);
  expect_same("sqrt", -1, ev1(tvk_sqrt, TVK_FLOAT32, -1), NAN);
  expect_same("recip", 0, ev1(tvk_recip, TVK_FLOAT32, 0), INFINITY);
  expect_same("exp", -INFINITY, ev1(tvk_exp, TVK_FLOAT32, -INFINITY), 0);
  expect_same("exp", INFINITY, ev1(tvk_exp, TVK_FLOAT32, INFINITY), INFINITY);
  expect_same("sigmoid", -INFINITY, ev1(tvk_sigmoid, TVK_FLOAT32, -INFINITY), 0);
  expect_same("sigmoid", INFINITY, ev1(tvk_sigmoid, TVK_FLOAT32, INFINITY), 1);
  expect_same("tanh", INFINITY, ev1(tvk_tanh, TVK_FLOAT32, INFINITY), 1);
  expect_same("tanh", -INFINITY, ev1(tvk_tanh, TVK_FLOAT32, -INFINITY), -1);
  expect_same("tanh", 0, ev1(tvk_tanh, TVK_FLOAT32, 0), 0);
  expect_same("gelu", INFINITY, ev1(tvk_gelu, TVK_FLOAT32, INFINITY), INFINITY);
  const Un nan_in[] = {tvk_exp,     tvk_log,  tvk_sin,  tvk_cos,
                       tvk_sigmoid, tvk_tanh, tvk_gelu, tvk_silu};
  for (size_t i = 0; i < sizeof nan_in / sizeof nan_in[0]; i++)
    assert_true(isnan(ev1(nan_in[i], TVK_FLOAT32, NAN)));
  /* integers go through float32 */
  expect_close("exp_i32", 2, ev1(tvk_exp, TVK_INT32, 2), exp(2), 4 * FLT_EPSILON, 0);
  expect_close("sqrt_u8", 200, ev1(tvk_sqrt, TVK_UINT8, 200), sqrtf(200), FLT_EPSILON, 0);
  /* float16 composites compute in float32 and round once */
  tvk_tensor *h = tvk_scalar(C, TVK_FLOAT16, 3.0), *e = tvk_exp(h);
  expect_same("exp_f16", 3, value_of(e), f16_to_f32(f32_to_f16((float)exp(3.0))));
  tvk_release(h);
  tvk_release(e);
}

/* ---------------------------------------------------------------- reductions */

typedef tvk_tensor *(*Red)(tvk_tensor *, int, const int *, bool);

static void test_reduce_shapes(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2, 3, 4);
  const Red reds[] = {tvk_sum, tvk_prod, tvk_max, tvk_min, tvk_mean};
  for (size_t i = 0; i < 5; i++) {
    tvk_tensor *r1 = reds[i](a, 1, (const int[]){1}, true);
    tvk_tensor *r2 = reds[i](a, 1, (const int[]){1}, false);
    tvk_tensor *r3 = reds[i](a, 2, (const int[]){-1, 0}, false);
    tvk_tensor *r4 = reds[i](a, 0, NULL, false), *r5 = reds[i](a, 0, NULL, true);
    tvk_tensor *r6 = reds[i](a, 3, (const int[]){2, 0, 1}, false);
    EXPECT_SHAPE(r1, 2, 1, 4);
    EXPECT_SHAPE(r2, 2, 4);
    EXPECT_SHAPE(r3, 3);
    EXPECT_SCALAR_SHAPE(r4);
    EXPECT_SHAPE(r5, 1, 1, 1);
    EXPECT_SCALAR_SHAPE(r6);
    tvk_release(r1);
    tvk_release(r2);
    tvk_release(r3);
    tvk_release(r4);
    tvk_release(r5);
    tvk_release(r6);
  }
  /* a 0-d tensor reduces to itself */
  tvk_tensor *s = SCALAR(TVK_INT8), *ss = tvk_sum(s, 0, NULL, true);
  EXPECT_SCALAR_SHAPE(ss);
  assert_int_equal(tvk_dtype_of(ss), TVK_INT32);
  tvk_release(s);
  tvk_release(ss);
  tvk_release(a);
}

/* The REDUCE_AXIS under a reduction: its op and its axes. */
static UOp *find_reduce(UOp *u) {
  if (u->op == OP_REDUCE_AXIS) return u;
  for (uint32_t i = 0; i < u->nsrc; i++) {
    UOp *r = find_reduce(u->src[i]);
    if (r) return r;
  }
  return NULL;
}

static void test_reduce_graph(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_INT32, 2, 3, 4), *r = tvk_sum(a, 2, (const int[]){2, 0}, false);
  UOp *red = find_reduce(r->uop);
  assert_non_null(red);
  assert_int_equal(red->arg.kind, ARG_REDUCE);
  assert_int_equal(red->arg.red.op, OP_ADD);
  assert_int_equal(red->arg.red.n, 2);
  assert_int_equal(red->arg.red.axes[0], 0);
  assert_int_equal(red->arg.red.axes[1], 2);
  int64_t s[TVK_MAX_DIMS];
  assert_int_equal(graph_shape(red, s), 3);
  assert_memory_equal(s, SHAPE(1, 3, 1), sizeof(int64_t[3]));
  /* the result node itself has the result shape */
  assert_int_equal(graph_shape(r->uop, s), 1);
  assert_int_equal(s[0], 3);
  tvk_release(r);
  const Red reds[] = {tvk_prod, tvk_max, tvk_min};
  const Op ops[] = {OP_MUL, OP_MAX, OP_MAX};
  for (int i = 0; i < 3; i++) {
    r = reds[i](a, 1, (const int[]){1}, true);
    red = find_reduce(r->uop);
    assert_non_null(red);
    assert_int_equal(red->arg.red.op, ops[i]);
    tvk_release(r);
  }
  tvk_release(a);
}

static void test_reduce_dtypes(void **state) {
  (void)state;
  /* {input, sum/prod, mean} from tvk.h; max/min keep the dtype */
  static const tvk_dtype cases[][3] = {
      {TVK_BOOL, TVK_INT32, TVK_FLOAT32},         {TVK_INT8, TVK_INT32, TVK_FLOAT32},
      {TVK_UINT8, TVK_UINT32, TVK_FLOAT32},       {TVK_INT16, TVK_INT32, TVK_FLOAT32},
      {TVK_UINT16, TVK_UINT32, TVK_FLOAT32},      {TVK_INT32, TVK_INT32, TVK_FLOAT32},
      {TVK_UINT32, TVK_UINT32, TVK_FLOAT32},      {TVK_INT64, TVK_INT64, TVK_FLOAT32},
      {TVK_UINT64, TVK_UINT64, TVK_FLOAT32},      {TVK_FLOAT16, TVK_FLOAT16, TVK_FLOAT16},
      {TVK_BFLOAT16, TVK_BFLOAT16, TVK_BFLOAT16}, {TVK_FLOAT32, TVK_FLOAT32, TVK_FLOAT32},
      {TVK_FLOAT64, TVK_FLOAT64, TVK_FLOAT64},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tvk_tensor *a = FULL(cases[i][0], 5, 6);
    tvk_tensor *r[5] = {
        tvk_sum(a, 1, (const int[]){0}, false), tvk_prod(a, 1, (const int[]){0}, false),
        tvk_mean(a, 1, (const int[]){0}, false), tvk_max(a, 1, (const int[]){0}, false),
        tvk_min(a, 1, (const int[]){0}, false)};
    const tvk_dtype want[5] = {cases[i][1], cases[i][1], cases[i][2], cases[i][0], cases[i][0]};
    for (int k = 0; k < 5; k++) {
      EXPECT_SHAPE(r[k], 6);
      assert_int_equal(tvk_dtype_of(r[k]), want[k]);
      assert_int_equal(r[k]->uop->dtype.scalar, dt_from_tvk(want[k]));
      tvk_release(r[k]);
    }
    /* half floats accumulate in float32 */
    if (cases[i][0] == TVK_FLOAT16 || cases[i][0] == TVK_BFLOAT16) {
      tvk_tensor *s = tvk_sum(a, 0, NULL, false);
      UOp *red = find_reduce(s->uop);
      assert_int_equal(red->dtype.scalar, DT_FLOAT32);
      tvk_release(s);
    }
    tvk_release(a);
  }
}

/* The node of a constant result: its CONST. */
static UOp *const_of(const tvk_tensor *t) {
  UOp *u = t->uop;
  if (u->op == OP_VIEW) u = u->src[0];
  assert_int_equal(u->op, OP_CONST);
  return u;
}

/* Reducing zero elements gives the identity, with no REDUCE_AXIS to run. */
static void test_reduce_empty(void **state) {
  (void)state;
  tvk_tensor *f = FULL(TVK_FLOAT32, 3, 0), *i64 = FULL(TVK_INT64, 0, 2);
  tvk_tensor *u64 = FULL(TVK_UINT64, 0), *b = FULL(TVK_BOOL, 4, 0);
  struct {
    tvk_tensor *r;
    double want;
  } fc[] = {
      {tvk_sum(f, 1, (const int[]){1}, false), 0.0},
      {tvk_prod(f, 1, (const int[]){1}, false), 1.0},
      {tvk_max(f, 1, (const int[]){-1}, false), -INFINITY},
      {tvk_min(f, 1, (const int[]){-1}, false), INFINITY},
      {tvk_mean(f, 1, (const int[]){1}, false), NAN},
  };
  for (size_t k = 0; k < sizeof fc / sizeof fc[0]; k++) {
    EXPECT_SHAPE(fc[k].r, 3);
    assert_null(find_reduce(fc[k].r->uop));
    expect_same("empty", (double)k, uop_const_double(const_of(fc[k].r)), fc[k].want);
    tvk_release(fc[k].r);
  }
  tvk_tensor *mx = tvk_max(i64, 1, (const int[]){0}, true),
             *mn = tvk_min(i64, 1, (const int[]){0}, true);
  EXPECT_SHAPE(mx, 1, 2);
  assert_int_equal(uop_const_val(const_of(mx)).i, INT64_MIN);
  assert_int_equal(uop_const_val(const_of(mn)).i, INT64_MAX);
  tvk_tensor *um = tvk_min(u64, 0, NULL, false), *ux = tvk_max(u64, 0, NULL, false);
  EXPECT_SCALAR_SHAPE(um);
  assert_int_equal((uint64_t)uop_const_val(const_of(um)).i, UINT64_MAX);
  assert_int_equal(uop_const_val(const_of(ux)).i, 0);
  tvk_tensor *bm = tvk_min(b, 1, (const int[]){1}, false),
             *bs = tvk_sum(b, 1, (const int[]){1}, false);
  assert_int_equal(uop_const_val(const_of(bm)).i, 1);
  assert_int_equal(tvk_dtype_of(bs), TVK_INT32);
  assert_int_equal(uop_const_val(const_of(bs)).i, 0);
  /* a non-reduced zero dim: an empty result */
  tvk_tensor *e = tvk_sum(i64, 1, (const int[]){1}, false);
  EXPECT_SHAPE(e, 0);
  tvk_tensor *all[] = {f, i64, u64, b, mx, mn, um, ux, bm, bs, e};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) tvk_release(all[k]);
}

/* ---------------------------------------------------------------- movement */

static void test_movement_shapes(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2, 3, 4);
  tvk_tensor *r[] = {
      tvk_reshape(a, 2, SHAPE(6, -1)),
      tvk_reshape(a, 1, SHAPE(-1)),
      tvk_reshape(a, 4, SHAPE(1, 24, 1, 1)),
      tvk_permute(a, (const int[]){2, 0, 1}),
      tvk_permute(a, (const int[]){-1, 0, 1}),
      tvk_expand(tvk_reshape(a, 4, SHAPE(2, 1, 3, 4)), 5, SHAPE(7, 2, 5, -1, 4)),
      tvk_pad(a, (const int64_t[][2]){{1, 2}, {0, 0}, {3, 0}}, 0),
      tvk_shrink(a, (const int64_t[][2]){{1, 2}, {0, 3}, {1, 3}}),
      tvk_flip(a, 2, (const int[]){0, -1}),
      tvk_transpose(a, 0, -1),
      tvk_contiguous(a),
  };
  EXPECT_SHAPE(r[0], 6, 4);
  EXPECT_SHAPE(r[1], 24);
  EXPECT_SHAPE(r[2], 1, 24, 1, 1);
  EXPECT_SHAPE(r[3], 4, 2, 3);
  EXPECT_SHAPE(r[4], 4, 2, 3);
  EXPECT_SHAPE(r[5], 7, 2, 5, 3, 4);
  EXPECT_SHAPE(r[6], 5, 3, 7);
  EXPECT_SHAPE(r[7], 1, 3, 2);
  EXPECT_SHAPE(r[8], 2, 3, 4);
  EXPECT_SHAPE(r[9], 4, 3, 2);
  EXPECT_SHAPE(r[10], 2, 3, 4);
  assert_int_equal(r[10]->uop->op, OP_CONTIGUOUS);
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
    assert_int_equal(tvk_dtype_of(r[i]), TVK_FLOAT32);
    tvk_release(r[i]);
  }
  /* a reshape of zero elements: -1 is inferred unless other dims are 0 too
   * (then any size would do: an error, as numpy) */
  tvk_tensor *z = FULL(TVK_INT8, 0, 5), *z1 = tvk_reshape(z, 3, SHAPE(5, 1, -1));
  EXPECT_SHAPE(z1, 5, 1, 0);
  tvk_tensor *z2 = tvk_reshape(z, 3, SHAPE(5, 0, -1));
  EXPECT_ERROR(z2, TVK_ERR_SHAPE, "reshape", "(5, 0, -1)", "(0, 5)", "infer");
  tvk_release(z);
  tvk_release(z1);
  tvk_release(z2);
  /* the inner reshape of r[5] is still alive in the context: released with it */
  tvk_release(a);
}

/* Movement ops compose into one view whose index map matches the formulas:
 * a (3,4,5) buffer, permuted, flipped, shrunk, padded and reshaped. */
static void test_movement_index(void **state) {
  (void)state;
  float data[60];
  for (int i = 0; i < 60; i++) data[i] = (float)i;
  tvk_tensor *a = tvk_from_data(C, TVK_FLOAT32, 3, SHAPE(3, 4, 5), data);
  tvk_tensor *p = tvk_permute(a, (const int[]){2, 0, 1}); /* (5,3,4): p[i,j,k] = a[j,k,i] */
  tvk_tensor *f = tvk_flip(p, 1, (const int[]){1});       /* f[i,j,k] = p[i,2-j,k] */
  tvk_tensor *s =
      tvk_shrink(f, (const int64_t[][2]){{1, 4}, {0, 3}, {1, 3}}); /* (3,3,2): +1, +0, +1 */
  tvk_tensor *d = tvk_pad(s, (const int64_t[][2]){{0, 1}, {2, 0}, {0, 0}}, 0); /* (4,5,2) */
  tvk_tensor *t = tvk_transpose(d, 0, 2); /* (2,5,4): t[i,j,k] = d[k,j,i] */
  EXPECT_SHAPE(t, 2, 5, 4);
  assert_int_equal(t->uop->op, OP_VIEW);
  assert_int_equal(t->uop->src[0]->op, OP_BUFFER); /* one view on the buffer */
  const ShapeTracker *st = t->uop->arg.st;
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 5; j++)
      for (int64_t k = 0; k < 4; k++) {
        /* t[i,j,k] = d[k,j,i]; d[x,y,z] = s[x, y-2, z] when x < 3 and y >= 2 */
        int64_t x = k, y = j - 2, z = i;
        bool valid = x < 3 && y >= 0;
        int64_t off = -1;
        if (valid) {
          int64_t pi = x + 1, pj = 2 - y, pk = z + 1; /* s -> f -> p */
          off = pj * 20 + pk * 5 + pi;                /* p[i,j,k] = a[j,k,i] */
        }
        sint got;
        bool gv = st_index_int(st, (const sint[]){i, j, k}, &got);
        assert_int_equal(gv, valid);
        if (valid) assert_int_equal(got, off);
      }
  tvk_tensor *all[] = {a, p, f, s, d, t};
  for (size_t k = 0; k < 6; k++) tvk_release(all[k]);
}

/* pad with a value other than 0 selects the value where a padded mask is false. */
static void test_pad_value(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_INT32, 2);
  tvk_tensor *z = tvk_pad(a, (const int64_t[][2]){{1, 1}}, 0);
  tvk_tensor *v = tvk_pad(a, (const int64_t[][2]){{1, 1}}, 7);
  tvk_tensor *n = tvk_pad(a, (const int64_t[][2]){{0, 0}}, 7);
  EXPECT_SHAPE(z, 4);
  EXPECT_SHAPE(v, 4);
  assert_int_equal(z->uop->op, OP_VIEW);
  assert_int_equal(v->uop->op, OP_WHERE);
  assert_int_equal(v->uop->src[0]->dtype.scalar, DT_BOOL);
  assert_int_equal(uop_const_val(v->uop->src[2]->src[0]).i, 7);
  assert_ptr_equal(n->uop, a->uop); /* nothing padded */
  tvk_tensor *all[] = {a, z, v, n};
  for (size_t k = 0; k < 4; k++) tvk_release(all[k]);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2, 3), *b = FULL(TVK_FLOAT32, 4), *i = FULL(TVK_INT32, 2, 3);
  tvk_tensor *c = FULL(TVK_FLOAT32, 5);
  tvk_tensor *e[32];
  int n = 0;
#define ERR(expr, st, ...)                                                                         \
  do {                                                                                             \
    e[n] = (expr);                                                                                 \
    EXPECT_ERROR(e[n], st, __VA_ARGS__);                                                           \
    n++;                                                                                           \
  } while (0)
  ERR(tvk_add(a, b), TVK_ERR_SHAPE, "add", "(2, 3)", "(4,)", "broadcast");
  ERR(tvk_where(b, a, c), TVK_ERR_SHAPE, "where", "(4,)", "(2, 3)", "(5,)");
  ERR(tvk_mod(a, a), TVK_ERR_DTYPE, "mod", "float32");
  ERR(tvk_bitwise_or(a, i), TVK_ERR_DTYPE, "bitwise_or", "float32", "int32");
  ERR(tvk_sum(a, 1, (const int[]){3}, false), TVK_ERR_INVALID_ARG, "sum", "axis 3", "2 dims");
  ERR(tvk_max(a, 1, (const int[]){-3}, false), TVK_ERR_INVALID_ARG, "max", "axis -3", "2 dims");
  ERR(tvk_mean(a, 2, (const int[]){1, 1}, false), TVK_ERR_INVALID_ARG, "mean", "axis 1", "twice");
  ERR(tvk_min(a, 2, (const int[]){1, -1}, false), TVK_ERR_INVALID_ARG, "min", "1", "-1", "dim 1");
  ERR(tvk_prod(a, -1, NULL, false), TVK_ERR_INVALID_ARG, "prod", "-1");
  ERR(tvk_reshape(a, 2, SHAPE(4, 2)), TVK_ERR_SHAPE, "reshape", "(2, 3)", "(4, 2)", "6");
  ERR(tvk_reshape(a, 2, SHAPE(-1, -1)), TVK_ERR_SHAPE, "reshape", "(-1, -1)", "-1");
  ERR(tvk_reshape(a, 2, SHAPE(-1, 4)), TVK_ERR_SHAPE, "reshape", "(-1, 4)", "(2, 3)");
  ERR(tvk_reshape(a, 2, SHAPE(-2, -3)), TVK_ERR_SHAPE, "reshape", "(-2, -3)", "negative");
  ERR(tvk_reshape(a, 17, SHAPE(1)), TVK_ERR_INVALID_ARG, "reshape", "17");
  ERR(tvk_reshape(a, 2, NULL), TVK_ERR_INVALID_ARG, "reshape", "NULL");
  ERR(tvk_permute(a, (const int[]){0, 0}), TVK_ERR_INVALID_ARG, "permute", "(0, 0)", "permutation");
  ERR(tvk_permute(a, NULL), TVK_ERR_INVALID_ARG, "permute", "NULL");
  ERR(tvk_expand(a, 2, SHAPE(4, 3)), TVK_ERR_SHAPE, "expand", "(2, 3)", "(4, 3)", "dim 0");
  ERR(tvk_expand(a, 1, SHAPE(3)), TVK_ERR_SHAPE, "expand", "(2, 3)", "(3,)");
  ERR(tvk_expand(a, 3, SHAPE(-1, 2, 3)), TVK_ERR_SHAPE, "expand", "(-1, 2, 3)", "-1");
  ERR(tvk_pad(a, (const int64_t[][2]){{0, 0}, {-1, 2}}, 0), TVK_ERR_INVALID_ARG, "pad", "(-1, 2)");
  ERR(tvk_shrink(a, (const int64_t[][2]){{0, 2}, {2, 5}}), TVK_ERR_INVALID_ARG, "shrink", "(2, 5)",
      "dim 1");
  ERR(tvk_shrink(a, (const int64_t[][2]){{1, 0}, {0, 3}}), TVK_ERR_INVALID_ARG, "shrink", "(1, 0)");
  ERR(tvk_flip(a, 2, (const int[]){1, -1}), TVK_ERR_INVALID_ARG, "flip", "dim 1", "twice");
  ERR(tvk_flip(a, 1, (const int[]){2}), TVK_ERR_INVALID_ARG, "flip", "axis 2", "2 dims");
  ERR(tvk_transpose(a, 0, 2), TVK_ERR_INVALID_ARG, "transpose", "dim 2", "2 dims");
  ERR(tvk_neg(tvk_cast(a, TVK_BOOL)), TVK_ERR_DTYPE, "neg", "bool");
#undef ERR
  for (int k = 0; k < n; k++) tvk_release(e[k]);
  tvk_tensor *ok = tvk_add(a, a); /* the context stays usable */
  EXPECT_SHAPE(ok, 2, 3);
  tvk_release(ok);
  tvk_release(a);
  tvk_release(b);
  tvk_release(c);
  tvk_release(i);
}

/* Ops on an error tensor return its status and message, through chains. */
static void test_error_propagation(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2, 3), *b = FULL(TVK_FLOAT32, 4);
  tvk_tensor *bad = tvk_add(a, b);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", tvk_error_of(bad));
  tvk_tensor *chain[] = {
      tvk_exp(bad),
      tvk_mul(a, bad),
      tvk_where(bad, a, a),
      tvk_where(a, a, bad),
      tvk_sum(bad, 0, NULL, false),
      tvk_reshape(bad, 1, SHAPE(-1)),
      tvk_permute(bad, NULL),
      tvk_pad(bad, NULL, 1),
      tvk_contiguous(bad),
      tvk_cast(bad, TVK_INT8),
      tvk_flip(bad, 0, NULL),
  };
  for (size_t k = 0; k < sizeof chain / sizeof chain[0]; k++) {
    tvk_tensor *t = tvk_relu(tvk_transpose(chain[k], 0, 1)); /* deeper still */
    EXPECT_ERROR(chain[k], TVK_ERR_SHAPE, msg);
    EXPECT_ERROR(t, TVK_ERR_SHAPE, msg);
  }
  tvk_ctx_clear_error(C);
  tvk_release(a);
  tvk_release(b);
  tvk_release(bad);
  /* chain's members and their intermediates go with the context */
}

static void test_null_inputs(void **state) {
  (void)state;
  tvk_tensor *a = FULL(TVK_FLOAT32, 2);
  for (int k = 0; k < 4; k++) {
    tvk_tensor *r = k == 0   ? tvk_add(a, NULL)
                    : k == 1 ? tvk_add(NULL, a)
                    : k == 2 ? tvk_where(a, NULL, a)
                             : tvk_where(NULL, a, a);
    EXPECT_ERROR(r, TVK_ERR_INVALID_ARG, k < 2 ? "add" : "where", "NULL");
    tvk_release(r);
  }
  /* no context to attach an error to: NULL */
  assert_null(tvk_add(NULL, NULL));
  assert_null(tvk_exp(NULL));
  assert_null(tvk_sum(NULL, 0, NULL, false));
  assert_null(tvk_reshape(NULL, 0, NULL));
  assert_null(tvk_where(NULL, NULL, NULL));
  assert_null(tvk_cast(NULL, TVK_INT8));
  tvk_release(a);
}

static void test_two_contexts(void **state) {
  (void)state;
  tvk_ctx *other;
  assert_int_equal(tvk_ctx_create("CPU", &other), TVK_OK);
  tvk_tensor *a = FULL(TVK_FLOAT32, 2), *b = tvk_full(other, TVK_FLOAT32, 1, SHAPE(2), 1);
  tvk_tensor *r = tvk_add(a, b);
  EXPECT_ERROR(r, TVK_ERR_INVALID_ARG, "add", "context");
  tvk_release(r);
  tvk_release(a);
  tvk_ctx_destroy(other);
}

/* ---------------------------------------------------------------- memory */

/* One step of a loop that builds a graph with every kind of op, releasing
 * what it made. */
static void step(tvk_tensor *x, tvk_tensor *y) {
  tvk_tensor *t[16];
  int n = 0;
#define PUSH(expr)                                                                                 \
  do {                                                                                             \
    tvk_tensor *r_ = expr;                                                                         \
    t[n++] = r_;                                                                                   \
  } while (0)
#define LAST t[n - 1]
  PUSH(tvk_add(x, y));
  PUSH(tvk_gelu(LAST));
  PUSH(tvk_where(tvk_lt(x, y), LAST, x)); /* the lt tensor: released by the scope */
  PUSH(tvk_round(LAST));
  PUSH(tvk_transpose(LAST, 0, 1));
  PUSH(tvk_pad(LAST, (const int64_t[][2]){{1, 0}, {0, 2}}, 3));
  PUSH(tvk_max(LAST, 1, (const int[]){0}, false));
  PUSH(tvk_mean(LAST, 0, NULL, true));
  PUSH(tvk_add(x, tvk_reshape(tvk_expand(LAST, 2, SHAPE(1, 1)), 1, SHAPE(1))));
  PUSH(tvk_contiguous(LAST));
  PUSH(tvk_add(x, y)); /* the same graph again: shared nodes */
#undef PUSH
#undef LAST
  for (int k = 0; k < n; k++) {
    assert_int_equal(tvk_status_of(t[k]), TVK_OK);
    tvk_release(t[k]);
  }
}

/* A scope that begins first thing inside another and keeps its result (as the
 * NN ops do internally) hands it to the enclosing scope, whose end releases it;
 * it used to escape both, and stop the outer end from releasing anything older. */
/* An app built with an older, shorter tvk_ctx_options: the library reads only
 * the bytes it was given, whatever lies after them, and uses the defaults for
 * the rest (the 0xff bytes past the end would be refused: threads -1). */
static void test_options_size(void **state) {
  (void)state;
  union {
    tvk_ctx_options o;
    unsigned char bytes[sizeof(tvk_ctx_options)];
  } u;
  memset(u.bytes, 0xff, sizeof u.bytes);
  u.o.device = "CPU";
  u.o.debug = 0;
  size_t old = offsetof(tvk_ctx_options, cache_dir);
  tvk_ctx *ctx = NULL;
  tvk_status st = tvk_ctx_create_sized(&u.o, old, &ctx);
  if (st != TVK_OK) fail_msg("create: %s", tvk_last_create_error());
  float x[3] = {1, 2, 3}, y[3];
  tvk_tensor *t = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){3}, x);
  assert_int_equal(tvk_to_host(tvk_add(t, t), y, sizeof y), TVK_OK);
  for (int i = 0; i < 3; i++) assert_true(y[i] == 2 * x[i]);
  tvk_ctx_destroy(ctx);
  /* the whole struct with the same bytes (its pointers NULL) is read, and refused */
  u.o.cache_dir = NULL, u.o.cc = NULL, u.o.log = NULL, u.o.graph = NULL, u.o.trace = NULL;
  st = tvk_ctx_create_sized(&u.o, sizeof u.o, &ctx);
  assert_int_equal(st, TVK_ERR_INVALID_ARG);
  assert_null(ctx);
}

/* tvk_stats_get_sized writes only the bytes the caller's struct has: an app
 * built with an older, shorter tvk_stats keeps what lies after it. */
static void test_stats_size(void **state) {
  (void)state;
  float x[2] = {1, 2}, y[2];
  tvk_tensor *t = tvk_from_data(C, TVK_FLOAT32, 1, SHAPE(2), x);
  assert_int_equal(tvk_to_host(tvk_add(t, t), y, sizeof y), TVK_OK);
  union {
    tvk_stats s;
    unsigned char bytes[sizeof(tvk_stats)];
  } u;
  memset(u.bytes, 0xab, sizeof u.bytes);
  size_t old = offsetof(tvk_stats, kernels_generated);
  tvk_stats_get_sized(C, &u.s, old);
  assert_true(u.s.kernels_run >= 1);
  for (size_t i = old; i < sizeof u.bytes; i++) assert_int_equal(u.bytes[i], 0xab);
  tvk_stats full;
  tvk_stats_get(C, &full);
  assert_int_equal(full.kernels_run, u.s.kernels_run);
  tvk_stats_get_sized(NULL, &u.s, sizeof u.s); /* NULL ctx: zeros */
  assert_int_equal(u.s.kernels_run, 0);
  tvk_release(t);
}

/* ---------------------------------------------------------------- chains */

/* Kernels over the same rows run part by part on the CPU (runtime/chain.c)
 * when what they share exceeds a core's cache: 16 MiB does on every CPU
 * seen (the largest L2 was 2 MiB). */
enum { CH_ROWS = 1024, CH_COLS = 4096 };

static float *chain_input(void) {
  float *x = malloc(sizeof(float) * CH_ROWS * CH_COLS);
  assert_non_null(x);
  for (int64_t i = 0; i < (int64_t)CH_ROWS * CH_COLS; i++)
    x[i] = (float)((i * 7919) % 1000) / 100.0f - 5.0f + (float)(i / CH_COLS) * 1e-3f;
  return x;
}

typedef enum {
  CH_SOFTMAX,
  CH_LAYERNORM,
  CH_SUB_MAX,
  CH_HALF_SUB_MAX, /* 0.5 a tvk_scalar: a launch value of the second kernel */
  CH_SUB_FLIPPED_MAX,
  CH_OPS
} ChainOp;

static tvk_tensor *chain_op(ChainOp op, tvk_tensor *x) {
  int ax = 1, rows = 0;
  switch (op) {
  case CH_SOFTMAX: return tvk_softmax(x, 1);
  case CH_LAYERNORM: return tvk_layernorm(x, 1, NULL, NULL, 1e-5);
  case CH_SUB_MAX: return tvk_sub(x, tvk_max(x, 1, &ax, true));
  case CH_HALF_SUB_MAX:
    return tvk_sub(tvk_mul(x, tvk_scalar(tvk_ctx_of(x), TVK_FLOAT32, 0.5)),
                   tvk_max(x, 1, &ax, true));
  default: /* row r less the max of row R - 1 - r: the second kernel reads another row's max */
    return tvk_sub(x, tvk_flip(tvk_max(x, 1, &ax, true), 1, &rows));
  }
}

/* The op over rows of x in double precision, into out. */
static void chain_ref(ChainOp op, const float *x, double *out) {
  for (int r = 0; r < CH_ROWS; r++) {
    const float *row = x + (int64_t)r * CH_COLS, *other = x + (int64_t)(CH_ROWS - 1 - r) * CH_COLS;
    double *o = out + (int64_t)r * CH_COLS;
    const float *mrow = op == CH_SUB_FLIPPED_MAX ? other : row;
    double m = -INFINITY, sum = 0, mean = 0, var = 0;
    for (int c = 0; c < CH_COLS; c++) m = fmax(m, mrow[c]), mean += row[c];
    mean /= CH_COLS;
    for (int c = 0; c < CH_COLS; c++)
      sum += exp(row[c] - m), var += (row[c] - mean) * (row[c] - mean);
    var /= CH_COLS;
    for (int c = 0; c < CH_COLS; c++)
      o[c] = op == CH_SOFTMAX        ? exp(row[c] - m) / sum
             : op == CH_LAYERNORM    ? (row[c] - mean) / sqrt(var + 1e-5)
             : op == CH_HALF_SUB_MAX ? 0.5 * row[c] - m
                                     : row[c] - m;
  }
}

/* Each op gives the same bits chained and one kernel at a time (the same
 * kernels, each element computed by one core either way), and the double
 * reference's values; softmax, layernorm, x - max(x) and 0.5 x - max(x)
 * (a kernel with a launch value) run as one chain,
 * and x less the flipped max runs unchained (its kernel reads the max of
 * another row, which another part computes). */
static void test_chains(void **state) {
  (void)state;
  tvk_ctx *unchained;
  tvk_ctx_options o = {.device = "CPU", .no_chains = 1};
  assert_int_equal(tvk_ctx_create_opts(&o, &unchained), TVK_OK);
  float *x = chain_input();
  size_t n = (size_t)CH_ROWS * CH_COLS;
  float *got = malloc(n * sizeof *got), *plain = malloc(n * sizeof *plain);
  double *want = malloc(n * sizeof *want);
  assert_true(got && plain && want);
  const int64_t shape[2] = {CH_ROWS, CH_COLS};
  tvk_tensor *a = tvk_from_data(C, TVK_FLOAT32, 2, shape, x);
  tvk_tensor *b = tvk_from_data(unchained, TVK_FLOAT32, 2, shape, x);
  for (ChainOp op = 0; op < CH_OPS; op++) {
    tvk_stats before, after, other;
    tvk_stats_get(C, &before);
    assert_int_equal(tvk_to_host(chain_op(op, a), got, n * sizeof *got), TVK_OK);
    tvk_stats_get(C, &after);
    assert_int_equal(tvk_to_host(chain_op(op, b), plain, n * sizeof *plain), TVK_OK);
    tvk_stats_get(unchained, &other);
    assert_memory_equal(got, plain, n * sizeof *got);
    assert_int_equal(other.chains_run, 0);
    assert_int_equal(after.chains_run - before.chains_run, op == CH_SUB_FLIPPED_MAX ? 0 : 1);
    chain_ref(op, x, want);
    double tol = op == CH_SOFTMAX ? 1e-5 : 2e-5; /* relative to the row's largest |value| */
    for (size_t i = 0; i < n; i++) {
      double scale = op == CH_SOFTMAX ? want[i] + 1e-7 : 1 + fabs(want[i]);
      if (fabs(got[i] - want[i]) > tol * scale)
        fail_msg("op %d: [%zu] = %.9g, want %.9g", op, i, got[i], want[i]);
    }
  }
  free(x), free(got), free(plain), free(want);
  tvk_ctx_destroy(unchained);
}

static void test_scope_nested_same_mark(void **state) {
  (void)state;
  tvk_tensor *x = tvk_full(C, TVK_FLOAT32, 1, SHAPE(4), 1);
  size_t live = uctx_live(C->u);
  int before = 0;
  for (tvk_tensor *t = C->head; t; t = t->next) before++;
  size_t outer = tvk_scope_begin(C);
  size_t inner = tvk_scope_begin(C);
  assert_int_equal(inner, outer);
  tvk_tensor *r = tvk_add(x, x);
  tvk_tensor *tmp = tvk_mul(r, r);
  (void)tmp;
  tvk_scope_end(C, inner, 1, &r);
  tvk_tensor *r2 = tvk_mul(r, x);
  assert_int_equal(tvk_status_of(r2), TVK_OK);
  size_t inner2 = tvk_scope_begin(C); /* a later sibling does not release r */
  tvk_scope_end(C, inner2, 0, NULL);
  assert_int_equal(tvk_status_of(r), TVK_OK);
  tvk_scope_end(C, outer, 0, NULL);
  int after = 0;
  for (tvk_tensor *t = C->head; t; t = t->next) after++;
  assert_int_equal(after, before);
  assert_int_equal(uctx_live(C->u), live);
  tvk_release(x);
}

/* Bad calls found by trying tvk as a user would: each gives a clear status
 * and message, and the context works afterwards. */
static void test_bad_call_regressions(void **state) {
  (void)state;
  tvk_tensor *x = tvk_full(C, TVK_FLOAT32, 1, SHAPE(4), 2);
  int before = 0;
  for (tvk_tensor *t = C->head; t; t = t->next) before++;
  /* keep NULL with nkeep > 0 keeps nothing (it was read as an array) */
  size_t sc = tvk_scope_begin(C);
  tvk_add(x, x);
  tvk_mul(x, x);
  tvk_scope_end(C, sc, 2, NULL);
  int after = 0;
  for (tvk_tensor *t = C->head; t; t = t->next) after++;
  assert_int_equal(after, before);
  /* realize with no context to report to: the message is tvk_last_error's */
  tvk_tensor *none[2] = {NULL, NULL};
  assert_int_equal(tvk_realize(-1, none), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_last_error(), "n is -1"));
  assert_int_equal(tvk_realize(2, NULL), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_last_error(), "ts is NULL"));
  assert_int_equal(tvk_realize(2, none), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_last_error(), "all 2 tensors are NULL"));
  /* tvk_scalar's errors name scalar, not the full it is built on */
  tvk_tensor *bad = tvk_scalar(C, (tvk_dtype)99, 1);
  assert_int_equal(tvk_status_of(bad), TVK_ERR_DTYPE);
  assert_int_equal(strncmp(tvk_error_of(bad), "scalar: ", 8), 0);
  tvk_release(bad);
  /* stats of no context are zero, not left as they were */
  tvk_stats st;
  memset(&st, 0xff, sizeof st);
  tvk_stats_get(NULL, &st);
  assert_int_equal(st.kernels_run, 0);
  assert_int_equal(st.bytes_peak, 0);
  assert_int_equal(st.validation_messages, 0);
  /* the context still builds graphs (this suite runs no kernel) */
  tvk_tensor *y = tvk_add(x, x);
  assert_int_equal(tvk_status_of(y), TVK_OK);
  assert_int_equal(tvk_shape(y)[0], 4);
  tvk_release(y);
  tvk_release(x);
}

static void test_flat_memory(void **state) {
  (void)state;
  float data[12] = {0};
  tvk_tensor *x = tvk_from_data(C, TVK_FLOAT32, 2, SHAPE(3, 4), data);
  tvk_tensor *y = tvk_full(C, TVK_FLOAT32, 1, SHAPE(4), 2);
  size_t scope = tvk_scope_begin(C);
  step(x, y);
  tvk_scope_end(C, scope, 0, NULL);
  size_t live = uctx_live(C->u);
  for (int i = 0; i < 10000; i++) {
    scope = tvk_scope_begin(C);
    step(x, y);
    tvk_scope_end(C, scope, 0, NULL);
    if (uctx_live(C->u) != live)
      fprintf(stderr, "iteration %d: %zu UOps live, %zu before\n", i, uctx_live(C->u), live);
    assert_int_equal(uctx_live(C->u), live);
  }
  /* errors make no UOps */
  for (int i = 0; i < 1000; i++) {
    tvk_tensor *e = tvk_add(x, tvk_full(C, TVK_FLOAT32, 1, SHAPE(5), 1));
    tvk_release(e);
  }
  tvk_release(x);
  tvk_release(y);
  assert_true(uctx_live(C->u) < live);
}

/* The device list: Vulkan devices as VK:n in order, then the CPU; one
 * default, the device tvk_ctx_create(NULL) opens, never a software one; every usable entry opens
 * under its name; bad calls are errors with a message; a smaller struct (an
 * older app) gets only the fields it knows. */
static void test_device_list(void **state) {
  (void)state;
  int n = tvk_device_count();
  assert_true(n >= 1);
  assert_int_equal(tvk_device_count(), n);
  int defaults = 0, vk = 0;
  char *saved = env_save("TVK_DEVICE");
  unsetenv("TVK_DEVICE");
  for (int i = 0; i < n; i++) {
    tvk_device_info d;
    assert_int_equal(tvk_device_get_info(i, &d), TVK_OK);
    defaults += d.is_default;
    if (i == n - 1) {
      assert_string_equal(d.name, "CPU");
      assert_int_equal(d.kind, TVK_DEVICE_KIND_CPU);
      assert_true(d.cores >= 1 && d.memory_bytes > 0 && d.subgroup_size >= 4);
    } else {
      char want[32];
      snprintf(want, sizeof want, "VK:%d", i);
      assert_string_equal(d.name, want);
      assert_true(d.kind != TVK_DEVICE_KIND_CPU && d.api_version != 0);
      vk += d.usable;
      if (d.usable) assert_true(d.subgroup_size >= 1 && d.memory_bytes > 0);
    }
    if (!d.usable) {
      assert_true(d.unusable_reason[0] != '\0');
      continue;
    }
    tvk_ctx *ctx = NULL;
    assert_int_equal(tvk_ctx_create(d.name, &ctx), TVK_OK);
    if (!strstr(tvk_ctx_device(ctx), d.description))
      fail_msg("%s opens as '%s', listed as '%s'", d.name, tvk_ctx_device(ctx), d.description);
    tvk_ctx_destroy(ctx);
    if (d.is_default) {
      /* a software Vulkan device (lavapipe) never: it runs on this CPU, slower */
      if (d.kind == TVK_DEVICE_KIND_SOFTWARE)
        fail_msg("the default is %s, a software device", d.name);
      assert_int_equal(tvk_ctx_create(NULL, &ctx), TVK_OK);
      if (!strstr(tvk_ctx_device(ctx), d.description))
        fail_msg("the default opens as '%s', listed as %s '%s'", tvk_ctx_device(ctx), d.name,
                 d.description);
      tvk_ctx_destroy(ctx);
    }
  }
  env_restore("TVK_DEVICE", saved);
  assert_int_equal(defaults, 1);
  if (vk_required() && vk == 0) fail_msg("TVK_REQUIRE_VK, but no usable Vulkan device is listed");

  tvk_device_info d;
  assert_int_equal(tvk_device_get_info(n, &d), TVK_ERR_INVALID_ARG);
  if (!strstr(tvk_last_error(), "does not exist")) fail_msg("message: %s", tvk_last_error());
  assert_int_equal(tvk_device_get_info(-1, &d), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_device_get_info(0, NULL), TVK_ERR_INVALID_ARG);
  memset(&d, 0x5a, sizeof d);
  assert_int_equal(tvk_device_info_sized(n - 1, &d, offsetof(tvk_device_info, kind)), TVK_OK);
  assert_string_equal(d.name, "CPU");
  const unsigned char *rest = (const unsigned char *)&d + offsetof(tvk_device_info, kind);
  for (size_t k = 0; k < sizeof d - offsetof(tvk_device_info, kind); k++)
    assert_int_equal(rest[k], 0x5a);
  assert_string_equal(tvk_device_kind_name(TVK_DEVICE_KIND_SOFTWARE), "software");
}

/* Movement ops over a symbolic view stay one view: the split of heads in
 * attention (shrink, reshape, permute, transpose, reshape, expand) of the
 * first n rows of a buffer. Composed as separate trackers, each step kept a
 * view of its own (view.c merges general views with integer digits only),
 * and the kernels paid a division by n per index; the results were right,
 * so only the tracker shows it. */
static void test_symbolic_views_stay_one(void **state) {
  (void)state;
  static float data[16 * 96];
  int64_t n = tvk_size_var(C, "n", 1, 16);
  tvk_tensor *buf = tvk_from_data(C, TVK_FLOAT32, 2, (int64_t[]){16, 96}, data);
  tvk_tensor *x = tvk_shrink(buf, (const int64_t[][2]){{0, n}, {32, 64}}); /* (n, 32) */
  tvk_tensor *h = tvk_permute(tvk_reshape(x, 3, (int64_t[]){n, 4, 8}), (int[]){1, 0, 2});
  tvk_tensor *t = tvk_transpose(h, -1, -2); /* (4, 8, n) */
  tvk_tensor *e =
      tvk_expand(tvk_reshape(t, 4, (int64_t[]){4, 1, 8, n}), 4, (int64_t[]){4, n, 8, n});
  tvk_tensor *all[] = {x, h, t, e};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(tvk_status_of(all[i]), TVK_OK);
    assert_int_equal(all[i]->uop->op, OP_VIEW);
    assert_int_equal(all[i]->uop->src[0]->op, OP_BUFFER);
    assert_int_equal(all[i]->uop->arg.st->nviews, 1);
  }
  for (int i = 0; i < 4; i++) tvk_release(all[i]);
  tvk_release(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_list),
      cmocka_unit_test_setup_teardown(test_symbolic_views_stay_one, setup, teardown),
      cmocka_unit_test_setup_teardown(test_broadcast_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_broadcast_random, setup, teardown),
      cmocka_unit_test_setup_teardown(test_promotion_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_dtype_mixed_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unary_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_values_float, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_values_int, setup, teardown),
      cmocka_unit_test_setup_teardown(test_where_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rounding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sign_abs_relu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transcendentals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_special_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce_graph, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_movement_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_movement_index, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_value, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_propagation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_null_inputs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_contexts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scope_nested_same_mark, setup, teardown),
      cmocka_unit_test(test_options_size),
      cmocka_unit_test_setup_teardown(test_stats_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chains, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_call_regressions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flat_memory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
