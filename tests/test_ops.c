/* The op suite: every op of tvk.h on one device, checked against references
 * computed here by plain loops in double / 64-bit integer arithmetic (ref.c),
 * never against tvk's own output.
 *
 *   test_ops CPU               (ctest ops_cpu)
 *   test_ops VK                (ctest ops_vk: the same suite on Vulkan)
 *   test_ops CPU 'test_cast*'  (only the tests whose name matches)
 *
 * It is an outside user's test: it includes only tvk.h (and ref.h) and links the
 * library. Each test gets a fresh context on the device named on the command
 * line. A mismatch does not stop a test: every check prints a FAIL line naming
 * the op, dtypes, shape, the first failing index, got and expected, and the
 * test fails at its end, so one run lists every broken case. Inputs come from a
 * fixed-seed PRNG; the first elements of every input are special values (edges
 * of the dtype, zeros, halves, NaN/inf where the op defines them) and, for
 * binary ops, every pair of them. Exit status 77: the device does not exist. */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_suite.h"
#include "ref.h"
#include "tvk.h"

/* ---------------------------------------------------------------- tolerances
 *
 * Integers and bool are always compared exactly. For floats a result passes
 * when |got - expected| <= atol + rtol * |expected|, with the expected value
 * computed in double and rounded once to the result dtype.
 *
 * ARITH (+ - * /, maximum, casts to float, pad values): the result is one
 * correctly rounded operation, so one ulp of the result dtype is enough even for
 * an implementation that computes float16 in float32 and rounds, or converts int
 * operands to float32 before dividing (three roundings: 1.5 ulp in the worst
 * case, hence two for float32).
 *
 * MATH (exp log sin ... and sigmoid tanh gelu silu pow composed of them): libm
 * or the device's own approximations are a few ulps from the correctly rounded
 * value; exp is often exp2(x * log2 e), whose product rounding costs |x| * eps
 * relative (2e-6 at |x| = 16 in float32, hence the domains below); the atol
 * part covers results near zero (sin near pi, tanh via sigmoid near 0). In
 * float16/bfloat16 a composed op may round every step to the 16-bit type, so
 * those allow a few of their (coarse) ulps and their domains are narrower. */
static const Tol TOL_ARITH_F64 = {5e-16, 0, false};     /* 2 ulps of 2^-52 */
static const Tol TOL_ARITH_F32 = {2.5e-7, 0, false};    /* 2 ulps of 2^-23 */
static const Tol TOL_ARITH_F16 = {1e-3, 6e-8, false};   /* 1 ulp of 2^-10; atol: least subnormal */
static const Tol TOL_ARITH_BF16 = {8e-3, 0, false};     /* 1 ulp of 2^-7 */
static const Tol TOL_MATH_F64 = {1e-13, 1e-15, false};  /* a few hundred ulps: own polynomials */
static const Tol TOL_MATH_F32 = {2e-6, 1e-6, false};    /* ~16 ulps; see exp above */
static const Tol TOL_MATH_F16 = {4e-3, 2e-3, false};    /* ~4 ulps of float16, rounded per step */
static const Tol TOL_MATH_BF16 = {2.5e-2, 2e-2, false}; /* ~3 ulps of bfloat16, rounded per step */
static const Tol TOL_EXACT = {0, 0, false}; /* casts to floats from floats: RNE exactly */
static const Tol TOL_BITS = {0, 0, true};   /* exact, and a zero's sign too */

static Tol tol_arith(tvk_dtype dt) {
  switch (dt) {
  case TVK_FLOAT64: return TOL_ARITH_F64;
  case TVK_FLOAT16: return TOL_ARITH_F16;
  case TVK_BFLOAT16: return TOL_ARITH_BF16;
  default: return TOL_ARITH_F32;
  }
}

static Tol tol_math(tvk_dtype dt) {
  switch (dt) {
  case TVK_FLOAT64: return TOL_MATH_F64;
  case TVK_FLOAT16: return TOL_MATH_F16;
  case TVK_BFLOAT16: return TOL_MATH_BF16;
  default: return TOL_MATH_F32;
  }
}

/* ---------------------------------------------------------------- suite */

typedef struct {
  const char *device; /* from the command line */
  tvk_ctx *ctx;       /* fresh for every test */
  int fails;          /* failed checks in the current test */
  Rng rng;
} Suite;

static int setup(void **state) {
  Suite *s = *state;
  tvk_status st = tvk_ctx_create(s->device, &s->ctx);
  if (st != TVK_OK) {
    fprintf(stderr, "tvk_ctx_create(%s): %s: %s\n", s->device, tvk_status_name(st),
            tvk_last_create_error());
    return -1;
  }
  s->fails = 0;
  s->rng.s = 0x9e3779b97f4a7c15ULL; /* fixed seed: every run draws the same inputs */
  return 0;
}

/* A Vulkan validation message (TVK_VALIDATE=1; each is printed) fails the test. */
static int teardown(void **state) {
  Suite *s = *state;
  return api_ctx_close_checked(&s->ctx, s->device);
}

/* Ends a test: fails it when any check failed (each printed its FAIL line). */
static void finish(Suite *s) {
  if (s->fails) fail_msg("%d check(s) failed on %s; see the FAIL lines above", s->fails, s->device);
}

static void failf(Suite *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(Suite *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  s->fails++;
}

/* ---------------------------------------------------------------- dtypes */

#define M(dt) (1u << (dt))
#define MB M(TVK_BOOL)
#define MI8 M(TVK_INT8)
#define MU8 M(TVK_UINT8)
#define MI16 M(TVK_INT16)
#define MU16 M(TVK_UINT16)
#define MI32 M(TVK_INT32)
#define MU32 M(TVK_UINT32)
#define MI64 M(TVK_INT64)
#define MU64 M(TVK_UINT64)
#define MF16 M(TVK_FLOAT16)
#define MBF16 M(TVK_BFLOAT16)
#define MF32 M(TVK_FLOAT32)
#define MF64 M(TVK_FLOAT64)
#define M_ALL ((1u << REF_NDT) - 1)
#define M_FLT (MF16 | MBF16 | MF32 | MF64)
#define M_INT (M_ALL & ~M_FLT & ~MB)
#define M_NUM (M_INT | M_FLT)
/* The dtypes the issue names as the least each op is tested with; the others
 * are added where they exercise something new (a width that wraps, a sign, a
 * 16-bit float path): every (op, dtype, shape) is a kernel to compile, and a
 * cold cache pays for each (see docs/testing.md). */
#define M_CORE (MF32 | MF16 | MI32 | MU8 | MB | MI64)

static const tvk_dtype ALL_DTYPES[REF_NDT] = {
    TVK_BOOL,  TVK_INT8,   TVK_UINT8,   TVK_INT16,    TVK_UINT16,  TVK_INT32,  TVK_UINT32,
    TVK_INT64, TVK_UINT64, TVK_FLOAT16, TVK_BFLOAT16, TVK_FLOAT32, TVK_FLOAT64};

static const char *shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
  return ref_shape_str(ndim, shape, buf, n);
}

static RArr gen(Suite *s, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *d) {
  return ref_gen(&s->rng, dt, ndim, shape, d);
}

static void gen_pair(Suite *s, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *da,
                     const Dom *db, RArr *a, RArr *b) {
  ref_gen_pair(&s->rng, dt, ndim, shape, da, db, a, b);
}

/* A tensor holding a's values. */
static tvk_tensor *mk(Suite *s, const RArr *a) {
  void *bytes = ref_pack(a);
  tvk_tensor *t = tvk_from_data(s->ctx, a->dt, a->ndim, a->shape, bytes);
  free(bytes);
  return t;
}

/* ---------------------------------------------------------------- checking */

/* Checks t against exp: status OK, exp's dtype and shape, and the values (tol,
 * plus extra[i] per element when not NULL). ins (arrays of exp's shape) are
 * printed at the failing index. Records and prints a failure; never stops. */
static bool expect(Suite *s, const char *what, tvk_tensor *t, const RArr *exp, Tol tol,
                   const double *extra, int nin, const RArr *const *ins) {
  char sh[128], sh2[128];
  if (!t) return failf(s, "%s: returned NULL", what), false;
  if (tvk_status_of(t) != TVK_OK) {
    failf(s, "%s: error tensor %s: %s", what, tvk_status_name(tvk_status_of(t)), tvk_error_of(t));
    return false;
  }
  if (tvk_dtype_of(t) != exp->dt) {
    failf(s, "%s: dtype %s, expected %s", what, ref_dt(tvk_dtype_of(t)), ref_dt(exp->dt));
    return false;
  }
  bool same = tvk_ndim(t) == exp->ndim;
  for (int d = 0; same && d < exp->ndim; d++) same = tvk_shape(t)[d] == exp->shape[d];
  if (!same) {
    failf(s, "%s: shape %s, expected %s", what, shape_str(tvk_shape(t), tvk_ndim(t), sh, sizeof sh),
          shape_str(exp->shape, exp->ndim, sh2, sizeof sh2));
    return false;
  }
  size_t nbytes = (size_t)exp->n * tvk_dtype_size(exp->dt);
  void *buf = malloc(nbytes ? nbytes : 1);
  tvk_status st = tvk_to_host(t, buf, nbytes);
  if (st != TVK_OK) {
    failf(s, "%s: tvk_to_host: %s: %s", what, tvk_status_name(st), tvk_ctx_error(s->ctx));
    free(buf);
    return false;
  }
  RArr got = ref_new(exp->dt, exp->ndim, exp->shape);
  ref_unpack(&got, buf);
  free(buf);
  bool ok = ref_compare(what, &got, exp, tol, extra, nin, ins);
  if (!ok) s->fails++;
  ref_free(&got);
  return ok;
}

/* Expects t to be an error tensor with status want (or also want2 when not
 * TVK_OK) and a message containing every string of words (NULL-terminated). */
static void expect_error(Suite *s, const char *what, tvk_tensor *t, tvk_status want,
                         tvk_status want2, const char *const *words) {
  if (!t) {
    failf(s, "%s: returned NULL, expected an error tensor", what);
    return;
  }
  tvk_status st = tvk_status_of(t);
  if (st != want && (want2 == TVK_OK || st != want2)) {
    failf(s, "%s: status %s, expected %s%s%s", what, tvk_status_name(st), tvk_status_name(want),
          want2 ? " or " : "", want2 ? tvk_status_name(want2) : "");
    return;
  }
  for (int k = 0; words && words[k]; k++)
    if (!strstr(tvk_error_of(t), words[k]))
      failf(s, "%s: message \"%s\" does not name \"%s\"", what, tvk_error_of(t), words[k]);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---------------------------------------------------------------- op semantics
 *
 * Each op's meaning per tvk.h, as two plain functions: on doubles (float
 * operands; the result is rounded to the result dtype afterwards) and on 64-bit
 * integers (int and bool operands, sign- or zero-extended; the result is wrapped
 * to the result dtype afterwards, which is how "integer arithmetic wraps around
 * at the dtype's width" holds for every width). */

typedef enum { OUT_SAME, OUT_BOOL, OUT_FLOAT } OutKind; /* FLOAT: ints and bool give float32 */

static bool u64(tvk_dtype dt) { return dt == TVK_UINT64; }

static double f_add(double a, double b) { return a + b; }
static double f_sub(double a, double b) { return a - b; }
static double f_mul(double a, double b) { return a * b; }
static double f_div(double a, double b) { return a / b; }
/* maximum/minimum: NaN when either input is NaN (tvk.h) */
static double f_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double f_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double f_lt(double a, double b) { return a < b; } /* IEEE: false with a NaN */
static double f_le(double a, double b) { return a <= b; }
static double f_gt(double a, double b) { return a > b; }
static double f_ge(double a, double b) { return a >= b; }
static double f_eq(double a, double b) { return a == b; }
static double f_ne(double a, double b) { return a != b; }             /* true with a NaN */
static double f_land(double a, double b) { return a != 0 && b != 0; } /* NaN != 0 */
static double f_lor(double a, double b) { return a != 0 || b != 0; }

static int64_t i_add(tvk_dtype dt, int64_t a, int64_t b) {
  (void)dt;
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t i_sub(tvk_dtype dt, int64_t a, int64_t b) {
  (void)dt;
  return (int64_t)((uint64_t)a - (uint64_t)b);
}
static int64_t i_mul(tvk_dtype dt, int64_t a, int64_t b) {
  (void)dt;
  return (int64_t)((uint64_t)a * (uint64_t)b);
}
static int64_t i_max(tvk_dtype dt, int64_t a, int64_t b) { return ref_lt_int(dt, a, b) ? b : a; }
static int64_t i_min(tvk_dtype dt, int64_t a, int64_t b) { return ref_lt_int(dt, b, a) ? b : a; }
static int64_t i_lt(tvk_dtype dt, int64_t a, int64_t b) { return ref_lt_int(dt, a, b); }
static int64_t i_le(tvk_dtype dt, int64_t a, int64_t b) { return !ref_lt_int(dt, b, a); }
static int64_t i_gt(tvk_dtype dt, int64_t a, int64_t b) { return ref_lt_int(dt, b, a); }
static int64_t i_ge(tvk_dtype dt, int64_t a, int64_t b) { return !ref_lt_int(dt, a, b); }
static int64_t i_eq(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a == b; }
static int64_t i_ne(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a != b; }
static int64_t i_land(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a != 0 && b != 0; }
static int64_t i_lor(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a != 0 || b != 0; }
static int64_t i_and(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a & b; }
static int64_t i_or(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a | b; }
static int64_t i_xor(tvk_dtype dt, int64_t a, int64_t b) { return (void)dt, a ^ b; }
static int64_t i_shl(tvk_dtype dt, int64_t a, int64_t b) {
  (void)dt;
  return (int64_t)((uint64_t)a << b);
}
/* Arithmetic for signed (the value is sign-extended, so this is floor(a / 2^b)),
 * logical for unsigned (zero-extended; uint64 as its bit pattern). */
static int64_t i_shr(tvk_dtype dt, int64_t a, int64_t b) {
  if (ref_is_unsigned(dt)) return (int64_t)((uint64_t)a >> b);
  return a < 0 ? ~(~a >> b) : a >> b;
}
/* C division: truncates toward zero; by zero gives 0; INT64_MIN / -1 wraps. */
static int64_t i_idiv(tvk_dtype dt, int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (u64(dt)) return (int64_t)((uint64_t)a / (uint64_t)b);
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  return a / b;
}
/* C remainder: the dividend's sign; by zero gives 0. */
static int64_t i_mod(tvk_dtype dt, int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (u64(dt)) return (int64_t)((uint64_t)a % (uint64_t)b);
  if (b == -1) return 0;
  return a % b;
}

typedef struct {
  const char *name;
  tvk_tensor *(*fn)(tvk_tensor *, tvk_tensor *);
  unsigned dts; /* input dtypes tested (each is a kernel to compile: see docs/testing.md) */
  OutKind out;
  bool math;                                  /* MATH tolerance, else ARITH */
  double (*ff)(double, double);               /* NULL: the op takes no floats */
  int64_t (*fi)(tvk_dtype, int64_t, int64_t); /* NULL: ints are converted to float32 */
  Dom da, db;
} BinOp;

/* Domains: floats in [-100, 100) with every special the op defines; ints over
 * their whole range with their edges, so wrap-around is hit for every width. */
/* clang-format off */
#define D_WIDE { .lo = -100, .hi = 100, .sp = SP_FIN | SP_EDGE | SP_NAN | SP_INF | SP_NEGZ }
#define D_SHIFT { .shift = true, .sp = SP_FIN }
/* pow: a**b with bases > 0 (a negative base is a separate edge test). In
 * float16 a pow through exp2(b*log2(a)) rounds the product: |b*log2 a| <= 4. */
#define D_POWA { .lo = 0.1, .hi = 4, .lo16 = 0.25, .hi16 = 4, .ilo = 1, .ihi = 5, .sp = SP_FIN }
#define D_POWB { .lo = -3, .hi = 3, .lo16 = -2, .hi16 = 2, .ilo = -3, .ihi = 3, .sp = SP_FIN }
/* clang-format on */

#define M_CMP_ALL (M_ALL)
static const BinOp BINOPS[] = {
    {"add", tvk_add, M_NUM, OUT_SAME, false, f_add, i_add, D_WIDE, D_WIDE},
    {"sub", tvk_sub, M_CORE | MI8, /* bool: a != b */ OUT_SAME, false, f_sub, i_sub, D_WIDE,
     D_WIDE},
    {"mul", tvk_mul, M_NUM, OUT_SAME, false, f_mul, i_mul, D_WIDE, D_WIDE},
    {"div", tvk_div, M_CORE | MF64, OUT_FLOAT, false, f_div, NULL, D_WIDE, D_WIDE},
    {"pow", tvk_pow, MF32 | MF16 | MI32 | MU8 | MI64, OUT_FLOAT, true, pow, NULL, D_POWA, D_POWB},
    {"maximum", tvk_maximum, M_CORE | MI8, OUT_SAME, false, f_max, i_max, D_WIDE, D_WIDE},
    {"minimum", tvk_minimum, M_CORE | MU64, OUT_SAME, false, f_min, i_min, D_WIDE, D_WIDE},
    {"lt", tvk_lt, M_CORE | MI8 | MU64, OUT_BOOL, false, f_lt, i_lt, D_WIDE, D_WIDE},
    {"le", tvk_le, M_CORE, OUT_BOOL, false, f_le, i_le, D_WIDE, D_WIDE},
    {"gt", tvk_gt, M_CORE, OUT_BOOL, false, f_gt, i_gt, D_WIDE, D_WIDE},
    {"ge", tvk_ge, M_CORE, OUT_BOOL, false, f_ge, i_ge, D_WIDE, D_WIDE},
    {"eq", tvk_eq, M_CORE | MBF16, OUT_BOOL, false, f_eq, i_eq, D_WIDE, D_WIDE},
    {"ne", tvk_ne, M_CORE, OUT_BOOL, false, f_ne, i_ne, D_WIDE, D_WIDE},
    {"logical_and", tvk_logical_and, M_CORE, OUT_BOOL, false, f_land, i_land, D_WIDE, D_WIDE},
    {"logical_or", tvk_logical_or, M_CORE, OUT_BOOL, false, f_lor, i_lor, D_WIDE, D_WIDE},
    {"bitwise_and", tvk_bitwise_and, M_INT | MB, OUT_SAME, false, NULL, i_and, D_WIDE, D_WIDE},
    {"bitwise_or", tvk_bitwise_or, MI32 | MU8 | MB | MI64, OUT_SAME, false, NULL, i_or, D_WIDE,
     D_WIDE},
    {"bitwise_xor", tvk_bitwise_xor, MI32 | MU8 | MB | MI64, OUT_SAME, false, NULL, i_xor, D_WIDE,
     D_WIDE},
    {"shl", tvk_shl, MI8 | MU8 | MI32 | MI64 | MU64, OUT_SAME, false, NULL, i_shl, D_WIDE, D_SHIFT},
    {"shr", tvk_shr, MI8 | MU8 | MI16 | MI32 | MI64 | MU64, OUT_SAME, false, NULL, i_shr, D_WIDE,
     D_SHIFT},
    {"idiv", tvk_idiv, M_INT, OUT_SAME, false, NULL, i_idiv, D_WIDE, D_WIDE},
    {"mod", tvk_mod, M_INT, OUT_SAME, false, NULL, i_mod, D_WIDE, D_WIDE},
};
#define NBINOPS ((int)(sizeof BINOPS / sizeof *BINOPS))

static tvk_dtype out_dtype(OutKind k, tvk_dtype in) {
  if (k == OUT_BOOL) return TVK_BOOL;
  if (k == OUT_FLOAT && !ref_is_float(in)) return TVK_FLOAT32;
  return in;
}

/* One element of a binary op: a and b of dtype in, the result of dtype out. */
static RVal bin_elem(const BinOp *op, tvk_dtype in, tvk_dtype out, RVal a, RVal b) {
  RVal r;
  if (ref_is_float(in) || !op->fi) {
    double x = op->ff(ref_as_double(in, a), ref_as_double(in, b));
    if (ref_is_float(out))
      r.f = ref_round(out, x);
    else
      r.i = (int64_t)x; /* bool results */
  } else {
    r.i = ref_wrap(out, (uint64_t)op->fi(in, a.i, b.i));
  }
  return r;
}

/* The expected result of op on a and b (one shape, one dtype). */
static RArr ref_binop(const BinOp *op, const RArr *a, const RArr *b) {
  tvk_dtype out = out_dtype(op->out, a->dt);
  RArr r = ref_new(out, a->ndim, a->shape);
  for (int64_t i = 0; i < r.n; i++) r.v[i] = bin_elem(op, a->dt, out, a->v[i], b->v[i]);
  return r;
}

static Tol op_tol(bool math, tvk_dtype out) {
  if (!ref_is_float(out)) return TOL_EXACT;
  return math ? tol_math(out) : tol_arith(out);
}

static const BinOp *binop(const char *name) {
  for (int k = 0; k < NBINOPS; k++)
    if (!strcmp(BINOPS[k].name, name)) return &BINOPS[k];
  return NULL;
}

/* Unary ops. */
static double f_neg(double x) { return -x; }
static double f_rsqrt(double x) { return 1.0 / sqrt(x); }
static double f_recip(double x) { return 1.0 / x; }
static double f_sign(double x) { return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0; }
static double f_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0; } /* keeps NaN */
static double f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double f_gelu(double x) { /* the tanh approximation, as tvk.h says */
  return 0.5 * x *
         (1.0 + tanh(0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x)));
}
static double f_silu(double x) { return x / (1.0 + exp(-x)); }
static double f_round(double x) { return nearbyint(x); } /* default mode: halves to even */
static double f_lnot(double x) { return x == 0; }

static int64_t i_neg(tvk_dtype dt, int64_t x) { return (void)dt, (int64_t)(0 - (uint64_t)x); }
static int64_t i_abs(tvk_dtype dt, int64_t x) {
  return ref_is_signed(dt) && x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
}
static int64_t i_sign(tvk_dtype dt, int64_t x) {
  return ref_is_signed(dt) ? (x > 0) - (x < 0) : x != 0;
}
static int64_t i_relu(tvk_dtype dt, int64_t x) { return ref_is_signed(dt) && x < 0 ? 0 : x; }
static int64_t i_same(tvk_dtype dt, int64_t x) { return (void)dt, x; }
static int64_t i_lnot(tvk_dtype dt, int64_t x) { return (void)dt, x == 0; }

typedef struct {
  const char *name;
  tvk_tensor *(*fn)(tvk_tensor *);
  unsigned dts;
  OutKind out;
  bool math;
  double (*ff)(double);
  int64_t (*fi)(tvk_dtype, int64_t); /* NULL: ints are converted to float32 */
  Dom d;
} UnOp;

/* clang-format off */
#define SP_ALLF (SP_FIN | SP_NAN | SP_INF)
/* Domains of the float-valued ops: where the float32 (and, narrower, the
 * 16-bit) tolerance holds; see the tolerance comment. Ints draw from ilo..ihi. */
#define D_EXP { -16, 16, -4, 4, -16, 16, SP_ALLF, false }
#define D_EXP2 { -20, 20, -10, 10, -20, 20, SP_ALLF, false }
#define D_LOG { 1e-3, 100, 0, 0, 0, 100, SP_ALLF | SP_OUT, false }
#define D_SQRT { 0, 100, 0, 0, -1, 100, SP_ALLF | SP_OUT, false }
#define D_RSQRT { 1e-3, 100, 0, 0, 0, 100, SP_FIN | SP_NAN | SP_INF | SP_OUT, false }
#define D_RECIP { -100, 100, 0, 0, -100, 100, SP_FIN | SP_NAN | SP_INF, false }
#define D_TRIG { -10, 10, 0, 0, -10, 10, SP_FIN | SP_NAN, false }
#define D_SIGM { -20, 20, -8, 8, -20, 20, SP_ALLF, false }
#define D_TANH { -10, 10, -4, 4, -10, 10, SP_ALLF, false }
#define D_GELU { -6, 6, -4, 4, -6, 6, SP_FIN | SP_NAN, false }
#define D_SILU { -16, 16, -4, 4, -16, 16, SP_FIN | SP_NAN, false }
#define D_ERF { -6, 6, -4, 4, -6, 6, SP_ALLF, false }
#define D_ATAN { -50, 50, -8, 8, -50, 50, SP_ALLF, false }
#define D_ASIN { -1, 1, -1, 1, -1, 1, SP_FIN | SP_NAN | SP_OUT, false }
#define D_ANY { -100, 100, 0, 0, 0, 0, SP_ALLF | SP_EDGE | SP_NEGZ, false }
/* clang-format on */

/* Float-valued ops: float32, float16 and int32 (ints and bool give float32)
 * always; bfloat16 and float64 for a representative few (M_MATH2); the other
 * int dtypes and bool through exp and sqrt, as the int -> float path is the
 * same cast in front of every op. */
#define M_MATH (MF32 | MF16 | MI32)
#define M_MATH2 (M_MATH | MBF16 | MF64)
static const UnOp UNOPS[] = {
    {"neg", tvk_neg, MF32 | MF16 | MI8 | MI32 | MI64 | MU8 | MU64, OUT_SAME, false, f_neg, i_neg,
     D_ANY},
    {"exp", tvk_exp, M_MATH2 | MB | MU8 | MI64, OUT_FLOAT, true, exp, NULL, D_EXP},
    {"exp2", tvk_exp2, M_MATH, OUT_FLOAT, true, exp2, NULL, D_EXP2},
    {"log", tvk_log, M_MATH2, OUT_FLOAT, true, log, NULL, D_LOG},
    {"log2", tvk_log2, M_MATH, OUT_FLOAT, true, log2, NULL, D_LOG},
    {"sqrt", tvk_sqrt, M_MATH | MU8 | MB | MI64, OUT_FLOAT, true, sqrt, NULL, D_SQRT},
    {"rsqrt", tvk_rsqrt, M_MATH, OUT_FLOAT, true, f_rsqrt, NULL, D_RSQRT},
    {"recip", tvk_recip, M_MATH, OUT_FLOAT, true, f_recip, NULL, D_RECIP},
    {"sin", tvk_sin, M_MATH2, OUT_FLOAT, true, sin, NULL, D_TRIG},
    {"cos", tvk_cos, M_MATH, OUT_FLOAT, true, cos, NULL, D_TRIG},
    {"abs", tvk_abs, MF32 | MF16 | MI8 | MI32 | MI64 | MU8 | MB, OUT_SAME, false, fabs, i_abs,
     D_ANY},
    {"sign", tvk_sign, M_CORE, OUT_SAME, false, f_sign, i_sign, D_ANY},
    {"relu", tvk_relu, M_CORE, OUT_SAME, false, f_relu, i_relu, D_ANY},
    {"sigmoid", tvk_sigmoid, M_MATH2, OUT_FLOAT, true, f_sigmoid, NULL, D_SIGM},
    {"tanh", tvk_tanh, M_MATH, OUT_FLOAT, true, tanh, NULL, D_TANH},
    {"gelu", tvk_gelu, M_MATH | MBF16 | MF64, OUT_FLOAT, true, f_gelu, NULL, D_GELU},
    {"silu", tvk_silu, M_MATH, OUT_FLOAT, true, f_silu, NULL, D_SILU},
    {"erf", tvk_erf, M_MATH | MBF16, OUT_FLOAT, true, erf, NULL, D_ERF},
    {"atan", tvk_atan, M_MATH, OUT_FLOAT, true, atan, NULL, D_ATAN},
    {"asin", tvk_asin, M_MATH, OUT_FLOAT, true, asin, NULL, D_ASIN},
    {"acos", tvk_acos, M_MATH, OUT_FLOAT, true, acos, NULL, D_ASIN},
    {"floor", tvk_floor, M_MATH | MU8, OUT_SAME, false, floor, i_same, D_ANY},
    {"ceil", tvk_ceil, M_MATH | MI64, OUT_SAME, false, ceil, i_same, D_ANY},
    {"round", tvk_round, M_MATH | MBF16, OUT_SAME, false, f_round, i_same, D_ANY},
    {"trunc", tvk_trunc, M_MATH, OUT_SAME, false, trunc, i_same, D_ANY},
    {"logical_not", tvk_logical_not, M_CORE, OUT_BOOL, false, f_lnot, i_lnot, D_ANY},
};
#define NUNOPS ((int)(sizeof UNOPS / sizeof *UNOPS))

static RVal un_elem(const UnOp *op, tvk_dtype in, tvk_dtype out, RVal a) {
  RVal r;
  if (ref_is_float(in) || !op->fi) {
    double x = op->ff(ref_as_double(in, a));
    if (ref_is_float(out))
      r.f = ref_round(out, x);
    else
      r.i = (int64_t)x;
  } else {
    r.i = ref_wrap(out, (uint64_t)op->fi(in, a.i));
  }
  return r;
}

static RArr ref_unop(const UnOp *op, const RArr *a) {
  tvk_dtype out = out_dtype(op->out, a->dt);
  RArr r = ref_new(out, a->ndim, a->shape);
  for (int64_t i = 0; i < r.n; i++) r.v[i] = un_elem(op, a->dt, out, a->v[i]);
  return r;
}

static const UnOp *unop(const char *name) {
  for (int k = 0; k < NUNOPS; k++)
    if (!strcmp(UNOPS[k].name, name)) return &UNOPS[k];
  return NULL;
}

typedef struct {
  const char *name;
  tvk_tensor *(*fn)(tvk_tensor *, int, const int *, bool);
} RedOp;

static const RedOp REDOPS[] = {
    [R_SUM] = {"sum", tvk_sum}, [R_PROD] = {"prod", tvk_prod}, [R_MAX] = {"max", tvk_max},
    [R_MIN] = {"min", tvk_min}, [R_MEAN] = {"mean", tvk_mean},
};

/* ================================================================ tests */

/* The reference's own conversions against values worked out by hand, so the
 * rest of the suite stands on checked ground. */
static void test_reference_helpers(void **state) {
  (void)state;
  /* float16: ties to even, overflow at 65520, subnormals down to 2^-24 */
  assert_true(ref_round(TVK_FLOAT16, 1 + ldexp(1, -11)) == 1.0);
  assert_true(ref_round(TVK_FLOAT16, 1 + 3 * ldexp(1, -11)) == 1 + ldexp(1, -9));
  assert_true(ref_round(TVK_FLOAT16, 65519) == 65504);
  assert_true(isinf(ref_round(TVK_FLOAT16, 65520)));
  assert_true(ref_round(TVK_FLOAT16, ldexp(1, -25)) == 0);
  assert_true(ref_round(TVK_FLOAT16, 3 * ldexp(1, -25)) == ldexp(1, -23));
  assert_true(ref_round(TVK_FLOAT16, 1.0 / 3) == 0.333251953125);
  /* bfloat16 and float32 */
  assert_true(ref_round(TVK_BFLOAT16, 1 + ldexp(1, -8)) == 1.0);
  assert_true(ref_round(TVK_BFLOAT16, 1 + 3 * ldexp(1, -8)) == 1 + ldexp(1, -6));
  assert_true(ref_round(TVK_FLOAT32, 0.1) == (double)0.1f);
  assert_true(ref_round(TVK_FLOAT32, 1 + ldexp(1, -24)) == 1.0);
  /* integers rounded once: 2^60 + 2^36 + 1 is above the float32 midpoint */
  int64_t big = ((int64_t)1 << 60) + ((int64_t)1 << 36) + 1;
  assert_true(ref_round_int(TVK_FLOAT32, big, false) == ldexp(1, 60) + ldexp(1, 37));
  assert_true(ref_round_int(TVK_FLOAT32, -big, false) == -(ldexp(1, 60) + ldexp(1, 37)));
  assert_true(ref_round_int(TVK_FLOAT64, -1, true) == ldexp(1, 64));
  assert_true(isinf(ref_round_int(TVK_FLOAT16, 70000, false)));
  /* wrapping */
  assert_int_equal(ref_wrap(TVK_INT8, 128), -128);
  assert_int_equal(ref_wrap(TVK_UINT16, (uint64_t)-1), 65535);
  assert_int_equal(ref_wrap(TVK_INT32, 0x80000000u), INT32_MIN);
  assert_int_equal(ref_wrap(TVK_BOOL, 256), 1);
  /* storage round trip of 16-bit floats */
  RArr a = ref_new(TVK_FLOAT16, 1, (int64_t[]){4});
  a.v[0].f = 65504, a.v[1].f = -ldexp(1, -24), a.v[2].f = INFINITY, a.v[3].f = 0.333251953125;
  uint16_t *bits = ref_pack(&a);
  assert_int_equal(bits[0], 0x7bff);
  assert_int_equal(bits[1], 0x8001);
  assert_int_equal(bits[2], 0x7c00);
  assert_int_equal(bits[3], 0x3555);
  RArr b = ref_new(TVK_FLOAT16, 1, (int64_t[]){4});
  ref_unpack(&b, bits);
  for (int i = 0; i < 4; i++) assert_true(b.v[i].f == a.v[i].f);
  free(bits);
  ref_free(&a), ref_free(&b);
}

/* Creation and inspection: every dtype round-trips its bytes. */
static void test_create_and_inspect(void **state) {
  Suite *s = *state;
  assert_string_equal(tvk_status_name(TVK_ERR_SHAPE), "TVK_ERR_SHAPE");
  assert_string_equal(tvk_dtype_name(TVK_BFLOAT16), "bfloat16");
  assert_string_equal(tvk_dtype_name((tvk_dtype)99), "invalid");
  assert_int_equal(tvk_dtype_size((tvk_dtype)99), 0);
  assert_true(tvk_ctx_device(s->ctx) && tvk_ctx_device(s->ctx)[0]);
  assert_string_equal(tvk_ctx_error(s->ctx), "");
  for (int k = 0; k < REF_NDT; k++) {
    tvk_dtype dt = ALL_DTYPES[k];
    assert_int_equal(tvk_dtype_size(dt), (size_t)ref_bits(dt) / 8);
    Dom d = D_WIDE;
    RArr a = gen(s, dt, 3, (int64_t[]){2, 3, 5}, &d);
    tvk_tensor *t = mk(s, &a);
    char what[64];
    snprintf(what, sizeof what, "from_data(%s)", ref_dt(dt));
    assert_int_equal(tvk_numel(t), 30);
    assert_true(tvk_ctx_of(t) == s->ctx);
    expect(s, what, t, &a, TOL_EXACT, NULL, 0, NULL);
    tvk_release(t);
    ref_free(&a);
  }
  finish(s);
}

/* Realizes n tensors in one schedule (so a device may compile their kernels
 * together); a failure is recorded, and each tensor is then checked alone. */
static void realize_all(Suite *s, const char *what, tvk_dtype dt, int n, tvk_tensor **ts) {
  tvk_status st = tvk_realize(n, ts);
  if (st != TVK_OK)
    failf(s, "realize of %d %s on %s: %s: %s", n, what, ref_dt(dt), tvk_status_name(st),
          tvk_ctx_error(s->ctx));
}

/* One tensor per op that takes dtype dt, realized together, each compared. */
static void binary_dtype(Suite *s, tvk_dtype dt, int ndim, const int64_t *shape) {
  tvk_tensor *outs[NBINOPS] = {0};
  RArr as[NBINOPS], bs[NBINOPS];
  const BinOp *ops[NBINOPS];
  int n = 0;
  for (int k = 0; k < NBINOPS; k++) {
    if (!(BINOPS[k].dts & M(dt))) continue;
    ops[n] = &BINOPS[k];
    gen_pair(s, dt, ndim, shape, &ops[n]->da, &ops[n]->db, &as[n], &bs[n]);
    tvk_tensor *a = mk(s, &as[n]), *b = mk(s, &bs[n]);
    outs[n] = ops[n]->fn(a, b);
    n++;
    tvk_release(a), tvk_release(b); /* the results keep what they need */
  }
  realize_all(s, "binary ops", dt, n, outs);
  for (int k = 0; k < n; k++) {
    char what[96];
    snprintf(what, sizeof what, "%s(%s, %s)", ops[k]->name, ref_dt(dt), ref_dt(dt));
    RArr e = ref_binop(ops[k], &as[k], &bs[k]);
    expect(s, what, outs[k], &e, op_tol(ops[k]->math, e.dt), NULL, 2,
           (const RArr *const[]){&as[k], &bs[k]});
    ref_free(&e), ref_free(&as[k]), ref_free(&bs[k]);
    tvk_release(outs[k]);
  }
}

/* Every binary op with every dtype it is tested on: 437 elements (odd), all
 * pairs of specials first (edges: wrap-around; NaN/inf; zero divisors). */
static void test_binary_dtypes(void **state) {
  Suite *s = *state;
  for (int k = 0; k < REF_NDT; k++) binary_dtype(s, ALL_DTYPES[k], 2, (int64_t[]){19, 23});
  finish(s);
}

/* Every unary op on its dtypes; one schedule per dtype, as for binary ops. */
static void test_unary_dtypes(void **state) {
  Suite *s = *state;
  for (int k = 0; k < REF_NDT; k++) {
    tvk_dtype dt = ALL_DTYPES[k];
    tvk_tensor *outs[NUNOPS];
    RArr as[NUNOPS];
    const UnOp *ops[NUNOPS];
    int n = 0;
    for (int j = 0; j < NUNOPS; j++) {
      if (!(UNOPS[j].dts & M(dt))) continue;
      ops[n] = &UNOPS[j];
      as[n] = gen(s, dt, 2, (int64_t[]){19, 23}, &ops[n]->d);
      tvk_tensor *ta = mk(s, &as[n]);
      outs[n] = ops[n]->fn(ta);
      tvk_release(ta);
      n++;
    }
    realize_all(s, "unary ops", dt, n, outs);
    for (int j = 0; j < n; j++) {
      RArr e = ref_unop(ops[j], &as[j]);
      char what[96];
      snprintf(what, sizeof what, "%s(%s)", ops[j]->name, ref_dt(dt));
      expect(s, what, outs[j], &e, op_tol(ops[j]->math, e.dt), NULL, 1,
             (const RArr *const[]){&as[j]});
      tvk_release(outs[j]);
      ref_free(&as[j]), ref_free(&e);
    }
  }
  finish(s);
}

/* ---------------------------------------------------------------- tables
 * Small cases with the expected values written out by hand: they do not
 * depend on the op semantics above, so a shared misreading of tvk.h by the
 * reference and the implementation still shows here. */

static RArr arr_f(tvk_dtype dt, int n, const double *v) {
  RArr a = ref_new(dt, 1, (int64_t[]){n});
  for (int i = 0; i < n; i++) a.v[i].f = v[i];
  return a;
}

static RArr arr_i(tvk_dtype dt, int n, const int64_t *v) {
  RArr a = ref_new(dt, 1, (int64_t[]){n});
  for (int i = 0; i < n; i++) a.v[i].i = v[i];
  return a;
}

/* A table repeated to fill the (19,23) shape the dtype tests use, so its
 * kernel is the one those tests compiled (flat index i is row i % n). */
static RArr tile(const RArr *t) {
  RArr r = ref_new(t->dt, 2, (int64_t[]){19, 23});
  for (int64_t i = 0; i < r.n; i++) r.v[i] = t->v[i % t->n];
  return r;
}

/* Checks fn(in) == want for a 1-D table; fn NULL: tvk_cast to want's dtype. */
static void table_unary(Suite *s, const char *name, tvk_tensor *(*fn)(tvk_tensor *), const RArr *in,
                        const RArr *want, Tol tol) {
  char what[96];
  snprintf(what, sizeof what, "table %s(%s)", name, ref_dt(in->dt));
  RArr ti = tile(in), tw = tile(want);
  tvk_tensor *a = mk(s, &ti), *t = fn ? fn(a) : tvk_cast(a, want->dt);
  expect(s, what, t, &tw, tol, NULL, 1, (const RArr *const[]){&ti});
  tvk_release(a), tvk_release(t);
  ref_free(&ti), ref_free(&tw);
}

static void table_binary_tol(Suite *s, const char *name,
                             tvk_tensor *(*fn)(tvk_tensor *, tvk_tensor *), const RArr *a,
                             const RArr *b, const RArr *want, Tol tol) {
  char what[96];
  snprintf(what, sizeof what, "table %s(%s, %s)", name, ref_dt(a->dt), ref_dt(b->dt));
  RArr ta_ = tile(a), tb_ = tile(b), tw = tile(want);
  tvk_tensor *ta = mk(s, &ta_), *tb = mk(s, &tb_), *t = fn(ta, tb);
  expect(s, what, t, &tw, tol, NULL, 2, (const RArr *const[]){&ta_, &tb_});
  tvk_release(ta), tvk_release(tb), tvk_release(t);
  ref_free(&ta_), ref_free(&tb_), ref_free(&tw);
}

static void table_binary(Suite *s, const char *name, tvk_tensor *(*fn)(tvk_tensor *, tvk_tensor *),
                         const RArr *a, const RArr *b, const RArr *want) {
  table_binary_tol(s, name, fn, a, b, want, TOL_EXACT);
}

/* Division by a zero the compiler can see (a constant, or x - x): IEEE's
 * answers, as for a zero read from memory. GLSL leaves it undefined and
 * glslang folds a literal x / 0.0 to 0, so both the simplifier (x / 0 ->
 * x * inf) and the GLSL division helper must get it right. */
static void test_div_by_known_zero(void **state) {
  Suite *s = *state;
  static const tvk_dtype fdt[] = {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT16};
  const double x[5] = {1, -2, 0, INFINITY, NAN};
  for (int k = 0; k < 3; k++) {
    int64_t n = 5;
    RArr in = arr_f(fdt[k], 5, x);
    tvk_tensor *a = mk(s, &in);
    for (int z = 0; z < 3; z++) {
      tvk_tensor *zero = z == 0   ? tvk_scalar(s->ctx, fdt[k], 0.0)
                         : z == 1 ? tvk_scalar(s->ctx, fdt[k], -0.0)
                                  : tvk_sub(a, a); /* 0 for finite x, NaN otherwise */
      tvk_tensor *q = tvk_div(a, zero);
      double got[5];
      tvk_tensor *q64 = tvk_cast(q, TVK_FLOAT64);
      tvk_status st = tvk_to_host(q64, got, sizeof got);
      if (st != TVK_OK) failf(s, "div by zero (%s): %s", ref_dt(fdt[k]), tvk_ctx_error(s->ctx));
      /* x - x is a zero divisor only for finite x: inf - inf is NaN in IEEE, but
       * a Vulkan compiler may fold x - x to 0 without SignedZeroInfNanPreserve
       * (lavapipe does), which is another matter than division */
      for (int i = 0; st == TVK_OK && i < (z == 2 ? 3 : n); i++) {
        double d = z == 2 ? x[i] - x[i] : z == 1 ? -0.0 : 0.0, want = x[i] / d;
        bool ok = isnan(want) ? isnan(got[i]) : got[i] == want;
        if (!ok)
          failf(s, "%s: %g / %s = %g, want %g", ref_dt(fdt[k]), x[i],
                z == 0   ? "0"
                : z == 1 ? "-0"
                         : "(x - x)",
                got[i], want);
      }
      tvk_release(zero), tvk_release(q), tvk_release(q64);
    }
    tvk_release(a);
    ref_free(&in);
  }
  finish(s);
}

/* idiv truncates toward zero, mod takes the dividend's sign, by zero both give
 * 0, and MIN idiv -1 wraps to MIN (int8/int16 here; the 32/64-bit case is the
 * last test: a C kernel that divides there traps). */
static void test_table_int_division(void **state) {
  Suite *s = *state;
  static const tvk_dtype sdt[] = {TVK_INT8, TVK_INT16, TVK_INT32, TVK_INT64};
  for (int k = 0; k < 4; k++) {
    tvk_dtype dt = sdt[k];
    int64_t mn = ref_int_min(dt), mx = (int64_t)ref_int_max(dt);
    bool narrow = ref_bits(dt) < 32;
    int64_t a[] = {7, -7, 7, -7, 0, 5, -5, -6, 1, -1, mx, mx, mn, mn + 1, narrow ? mn : 9};
    int64_t b[] = {2, 2, -2, -2, 3, 0, 0, 3, -7, 7, -1, 0, 1, 2, narrow ? -1 : 4};
    int64_t q[] = {3, -3, -3, 3, 0, 0, 0, -2, 0, 0, -mx, 0, mn, mn / 2 + 1, narrow ? mn : 2};
    int64_t r[] = {1, -1, 1, -1, 0, 0, 0, 0, 1, -1, 0, 0, 0, -1, narrow ? 0 : 1};
    int n = (int)(sizeof a / sizeof *a);
    RArr ta = arr_i(dt, n, a), tb = arr_i(dt, n, b), tq = arr_i(dt, n, q), tr = arr_i(dt, n, r);
    table_binary(s, "idiv", tvk_idiv, &ta, &tb, &tq);
    table_binary(s, "mod", tvk_mod, &ta, &tb, &tr);
    ref_free(&ta), ref_free(&tb), ref_free(&tq), ref_free(&tr);
  }
  static const tvk_dtype udt[] = {TVK_UINT8, TVK_UINT16, TVK_UINT32, TVK_UINT64};
  for (int k = 0; k < 4; k++) {
    tvk_dtype dt = udt[k];
    int64_t mx = ref_wrap(dt, ref_int_max(dt));
    uint64_t umx = ref_int_max(dt);
    int64_t a[] = {200, 5, 0, mx, mx, 7};
    int64_t b[] = {7, 0, 5, 2, mx, 1};
    int64_t q[] = {28, 0, 0, ref_wrap(dt, umx / 2), 1, 7};
    int64_t r[] = {4, 0, 0, 1, 0, 0};
    RArr ta = arr_i(dt, 6, a), tb = arr_i(dt, 6, b), tq = arr_i(dt, 6, q), tr = arr_i(dt, 6, r);
    table_binary(s, "idiv", tvk_idiv, &ta, &tb, &tq);
    table_binary(s, "mod", tvk_mod, &ta, &tb, &tr);
    ref_free(&ta), ref_free(&tb), ref_free(&tq), ref_free(&tr);
  }
  finish(s);
}

/* Wrap-around at every integer width: MAX+1, MIN-1, MAX*2, MIN*-1, -MIN, |MIN|. */
static void test_table_int_wrap(void **state) {
  Suite *s = *state;
  for (int k = 0; k < REF_NDT; k++) {
    tvk_dtype dt = ALL_DTYPES[k];
    if (!ref_is_int(dt)) continue;
    int64_t mn = ref_wrap(dt, (uint64_t)ref_int_min(dt)), mx = ref_wrap(dt, ref_int_max(dt));
    bool sg = ref_is_signed(dt);
    /* unsigned: MIN is 0, MAX*2 = MAX-1, 0-1 = MAX */
    int64_t a[] = {mx, mn, mx, mn, 3};
    int64_t b[] = {1, 1, 2, sg ? -1 : 0, 4};
    int64_t add[] = {mn, mn + 1, sg ? mn + 1 : 1, sg ? mx : 0, 7};
    int64_t sub[] = {mx - 1, mx, mx - 2, sg ? mn + 1 : 0, sg ? -1 : mx};
    int64_t mul[] = {mx, mn, sg ? -2 : mx - 1, sg ? mn : 0, 12};
    RArr ta = arr_i(dt, 5, a), tb = arr_i(dt, 5, b);
    RArr ea = arr_i(dt, 5, add), es = arr_i(dt, 5, sub), em = arr_i(dt, 5, mul);
    table_binary(s, "add", tvk_add, &ta, &tb, &ea);
    table_binary(s, "sub", tvk_sub, &ta, &tb, &es);
    table_binary(s, "mul", tvk_mul, &ta, &tb, &em);
    if (sg) { /* -MIN and |MIN| are MIN again */
      int64_t x[] = {mn, mx, -1, 0}, neg[] = {mn, -mx, 1, 0}, abs_[] = {mn, mx, 1, 0};
      RArr tx = arr_i(dt, 4, x), en = arr_i(dt, 4, neg), eb = arr_i(dt, 4, abs_);
      table_unary(s, "neg", tvk_neg, &tx, &en, TOL_EXACT);
      table_unary(s, "abs", tvk_abs, &tx, &eb, TOL_EXACT);
      ref_free(&tx), ref_free(&en), ref_free(&eb);
    }
    ref_free(&ta), ref_free(&tb), ref_free(&ea), ref_free(&es), ref_free(&em);
  }
  finish(s);
}

/* The float specials tvk.h defines, in float32. */
static void test_table_float_specials(void **state) {
  Suite *s = *state;
  const double E = exp(1.0);
  static const struct {
    const char *op;
    int n;
    double in[8], out[8];
  } T[] = {
      {"log", 6, {0, -1, 1, INFINITY, NAN, 0}, {-INFINITY, NAN, 0, INFINITY, NAN, -INFINITY}},
      {"log2", 5, {0, 8, 0.5, -2, 1024}, {-INFINITY, 3, -1, NAN, 10}},
      {"exp", 4, {-INFINITY, INFINITY, 0, NAN}, {0, INFINITY, 1, NAN}},
      {"exp2", 4, {3, -1, -INFINITY, 10}, {8, 0.5, 0, 1024}},
      {"sqrt", 4, {-1, 0, 4, INFINITY}, {NAN, 0, 2, INFINITY}},
      {"rsqrt", 4, {0, 4, INFINITY, -1}, {INFINITY, 0.5, 0, NAN}},
      {"recip", 4, {0, 4, INFINITY, -2}, {INFINITY, 0.25, 0, -0.5}},
      {"sign", 5, {-3, 0, 2.5, NAN, -INFINITY}, {-1, 0, 1, NAN, -1}},
      {"round", 8, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6}, {0, 2, 2, 0, -2, -2, 2, -3}},
      {"floor", 4, {-2.5, 2.5, -0.0, INFINITY}, {-3, 2, 0, INFINITY}},
      {"ceil", 4, {-2.5, 2.5, 0.25, -INFINITY}, {-2, 3, 1, -INFINITY}},
      {"trunc", 4, {-2.75, 2.75, -0.25, NAN}, {-2, 2, 0, NAN}},
      {"tanh", 3, {INFINITY, -INFINITY, 0}, {1, -1, 0}},
      {"sigmoid", 3, {INFINITY, -INFINITY, 0}, {1, 0, 0.5}},
      {"erf", 5, {INFINITY, -INFINITY, 0, NAN, -2.5}, {1, -1, 0, NAN, -0.999593047982555}},
      {"atan",
       5,
       {INFINITY, -INFINITY, 0, NAN, 1},
       {1.5707963267948966, -1.5707963267948966, 0, NAN, 0.7853981633974483}},
      {"asin", 5, {1, -1, 0, 1.5, NAN}, {1.5707963267948966, -1.5707963267948966, 0, NAN, NAN}},
      {"acos",
       5,
       {1, -1, 0, -2, 0.5},
       {0, 3.141592653589793, 1.5707963267948966, NAN, 1.0471975511965979}},
      {"relu", 4, {-1, 2, -INFINITY, INFINITY}, {0, 2, 0, INFINITY}},
      {"neg", 3, {INFINITY, NAN, 2}, {-INFINITY, NAN, -2}},
      {"abs", 3, {-INFINITY, NAN, -2}, {INFINITY, NAN, 2}},
  };
  for (size_t k = 0; k < sizeof T / sizeof *T; k++) {
    RArr in = arr_f(TVK_FLOAT32, T[k].n, T[k].in), want = arr_f(TVK_FLOAT32, T[k].n, T[k].out);
    table_unary(s, T[k].op, unop(T[k].op)->fn, &in, &want, TOL_MATH_F32);
    ref_free(&in), ref_free(&want);
  }
  RArr in = arr_f(TVK_FLOAT32, 1, (double[]){ref_round(TVK_FLOAT32, E)});
  RArr want = arr_f(TVK_FLOAT32, 1, (double[]){1});
  table_unary(s, "log", tvk_log, &in, &want, TOL_MATH_F32);
  ref_free(&in), ref_free(&want);
  /* erf near 0, relative only: its series keeps the digits 1 - erfc(x) would
   * cancel (TOL_MATH_F32's atol would hide that) */
  in = arr_f(TVK_FLOAT32, 4, (double[]){1e-6, -3e-4, 0.4999, 1e-30});
  want = arr_f(TVK_FLOAT32, 4,
               (double[]){1.1283791670955126e-6, -3.385137399732415e-4, 0.5204119951613866,
                          1.1283791670955126e-30});
  table_unary(s, "erf", tvk_erf, &in, &want, (Tol){1e-6, 0, false});
  ref_free(&in), ref_free(&want);
  /* acos near 1 and atan of tiny x, relative only (no atol to hide a
   * cancellation); atan on both sides of its reduction points */
  in = arr_f(TVK_FLOAT32, 2, (double[]){0.9999990463256836, -0.9999990463256836});
  want = arr_f(TVK_FLOAT32, 2, (double[]){0.0013810680417624171, 3.1402115855480307});
  table_unary(s, "acos", tvk_acos, &in, &want, (Tol){1e-6, 0, false});
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT32, 3, (double[]){1e-20, 0.27, 3.7});
  want = arr_f(TVK_FLOAT32, 3, (double[]){1e-20, 0.26371183446226615, 1.3068326031691921});
  table_unary(s, "atan", tvk_atan, &in, &want, (Tol){1e-6, 0, false});
  ref_free(&in), ref_free(&want);
  /* logical_not: x == 0, NaN is not 0 */
  in = arr_f(TVK_FLOAT32, 4, (double[]){0, NAN, -0.0, 3});
  want = arr_i(TVK_BOOL, 4, (int64_t[]){1, 0, 1, 0});
  table_unary(s, "logical_not", tvk_logical_not, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  /* div: IEEE true division */
  RArr a = arr_f(TVK_FLOAT32, 4, (double[]){1, -1, 0, 7});
  RArr b = arr_f(TVK_FLOAT32, 4, (double[]){0, 0, 0, 2});
  want = arr_f(TVK_FLOAT32, 4, (double[]){INFINITY, -INFINITY, NAN, 3.5});
  table_binary(s, "div", tvk_div, &a, &b, &want);
  ref_free(&a), ref_free(&b), ref_free(&want);
  /* int / int -> float32 */
  a = arr_i(TVK_INT32, 3, (int64_t[]){7, -7, 1});
  b = arr_i(TVK_INT32, 3, (int64_t[]){2, 2, 0});
  want = arr_f(TVK_FLOAT32, 3, (double[]){3.5, -3.5, INFINITY});
  table_binary(s, "div", tvk_div, &a, &b, &want);
  ref_free(&a), ref_free(&b), ref_free(&want);
  /* comparisons with NaN: all false but ne */
  a = arr_f(TVK_FLOAT32, 3, (double[]){NAN, 1, NAN});
  b = arr_f(TVK_FLOAT32, 3, (double[]){1, NAN, NAN});
  RArr f3 = arr_i(TVK_BOOL, 3, (int64_t[]){0, 0, 0}), t3 = arr_i(TVK_BOOL, 3, (int64_t[]){1, 1, 1});
  table_binary(s, "lt", tvk_lt, &a, &b, &f3);
  table_binary(s, "ge", tvk_ge, &a, &b, &f3);
  table_binary(s, "eq", tvk_eq, &a, &b, &f3);
  table_binary(s, "ne", tvk_ne, &a, &b, &t3);
  ref_free(&a), ref_free(&b), ref_free(&f3), ref_free(&t3);
  finish(s);
}

/* pow in floating point, edges as C's pow: a negative base with an integer
 * exponent, 0**0, 0**-1, and a negative base with a fractional one. */
static void test_table_pow(void **state) {
  Suite *s = *state;
  RArr a = arr_f(TVK_FLOAT32, 6, (double[]){-2, -2, 0, 0, -8, 2});
  RArr b = arr_f(TVK_FLOAT32, 6, (double[]){3, 2, 0, -1, 0.5, 10});
  RArr want = arr_f(TVK_FLOAT32, 6, (double[]){-8, 4, 1, INFINITY, NAN, 1024});
  table_binary_tol(s, "pow", tvk_pow, &a, &b, &want, TOL_MATH_F32);
  ref_free(&a), ref_free(&b), ref_free(&want);
  /* IEEE 754's (and C's) special cases, exact with the sign of zeros: a zero
   * or -inf keeps its sign under an odd integer exponent; 1**y and x**0 are 1
   * even for NaN; |x| < 1 and |x| > 1 under +-inf; (-1)**(+-inf) = 1. */
  static const double I = INFINITY;
  static const double pa[] = {-0.0, 0.0,  -0.0, 0.0,  -0.0, -0.0, 0.0, -0.0, 0.0, -0.0,
                              -0.0, -0.0, 0.0,  -0.0, -I,   -I,   -I,  -I,   -I,  I,
                              I,    1,    1,    1,    NAN,  NAN,  -1,  -1,   0.5, 0.5,
                              2,    2,    -0.5, -2,   NAN,  2,    -2,  -8,   -2,  -2};
  static const double pb[] = {-1, -1, -2, -2, -0.5, -I,   -I, 1,   1,   2,       0.5, 3,    I, I,
                              -1, -2, 3,  2,  0.5,  -0.5, 2,  NAN, I,   -I,      0.0, -0.0, I, -I,
                              I,  -I, I,  -I, I,    -I,   1,  NAN, 0.5, 1.0 / 3, 3,   -3};
  static const double pw[] = {
      -I, I, I, I, I, I, I, -0.0, 0.0, 0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, -I,  I,   I,  0.0,
      I,  1, 1, 1, 1, 1, 1, 1,    0.0, I,   I,   0.0,  0.0, 0.0, NAN,  NAN, NAN, NAN, -8, -0.125};
  int np = (int)(sizeof pa / sizeof *pa);
  for (int i = 0; i < np; i++) /* the table agrees with C's pow */
    if (!(isnan(pw[i])
              ? isnan(pow(pa[i], pb[i]))
              : pow(pa[i], pb[i]) == pw[i] && !signbit(pow(pa[i], pb[i])) == !signbit(pw[i])))
      failf(s, "pow table row %d: C's pow(%g, %g) = %g, the table says %g", i, pa[i], pb[i],
            pow(pa[i], pb[i]), pw[i]);
  static const tvk_dtype pdt[] = {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT16};
  for (int k = 0; k < 3; k++) {
    a = arr_f(pdt[k], np, pa), b = arr_f(pdt[k], np, pb), want = arr_f(pdt[k], np, pw);
    if (pdt[k] == TVK_FLOAT16) a.v[37].f = -8, b.v[37].f = ref_round(TVK_FLOAT16, 1.0 / 3);
    table_binary_tol(s, "pow", tvk_pow, &a, &b, &want, TOL_BITS);
    ref_free(&a), ref_free(&b), ref_free(&want);
  }
  finish(s);
}

/* The sign of zero, inf and NaN through ops whose IEEE answer a compiler may
 * "simplify" away: 0 - x is not -x at x = +0, x * 0 is not 0 at inf or NaN,
 * x - x is not 0 there either, and rounding to zero keeps x's sign (C's floor,
 * ceil, round, trunc). A Vulkan compiler gets them wrong without the
 * SignedZeroInfNanPreserve execution mode, and lavapipe also with a literal
 * +0.0 operand. Every float dtype (16-bit ones compute in float32 and round),
 * zeros compared with their sign. */
static tvk_tensor *e_self_sub(tvk_tensor *t) { return tvk_sub(t, t); }
static tvk_tensor *e_mul_zero(tvk_tensor *t) {
  return tvk_mul(t, tvk_scalar(tvk_ctx_of(t), tvk_dtype_of(t), 0.0));
}
static tvk_tensor *e_mul_negzero(tvk_tensor *t) {
  return tvk_mul(t, tvk_scalar(tvk_ctx_of(t), tvk_dtype_of(t), -0.0));
}
static tvk_tensor *e_zero_sub(tvk_tensor *t) {
  return tvk_sub(tvk_scalar(tvk_ctx_of(t), tvk_dtype_of(t), 0.0), t);
}
static tvk_tensor *e_log_self_sub(tvk_tensor *t) { return e_self_sub(tvk_log(t)); }
static tvk_tensor *e_recip_round(tvk_tensor *t) { return tvk_recip(tvk_round(t)); }

static void test_table_signed_zeros(void **state) {
  Suite *s = *state;
  static const struct {
    const char *op;
    tvk_tensor *(*fn)(tvk_tensor *);
    int n;
    double in[8], out[8];
  } T[] = {
      {"abs", tvk_abs, 6, {0.0, -0.0, -INFINITY, NAN, -2, 3}, {0.0, 0.0, INFINITY, NAN, 2, 3}},
      {"neg", tvk_neg, 3, {0.0, -0.0, INFINITY}, {-0.0, 0.0, -INFINITY}},
      {"floor", tvk_floor, 6, {-0.0, 0.0, -0.5, 0.5, 0.75, -1.5}, {-0.0, 0.0, -1, 0.0, 0.0, -2}},
      {"ceil", tvk_ceil, 6, {-0.5, -0.0, 0.0, 0.5, -0.75, 1.5}, {-0.0, -0.0, 0.0, 1, -0.0, 2}},
      {"round",
       tvk_round,
       7,
       {-0.5, -0.25, 0.25, -0.0, 0.5, 0.0, -1.5},
       {-0.0, -0.0, 0.0, -0.0, 0.0, 0.0, -2}},
      {"trunc",
       tvk_trunc,
       6,
       {-0.5, -0.75, 0.5, -0.0, 0.0, -1.5},
       {-0.0, -0.0, 0.0, -0.0, 0.0, -1}},
      {"sqrt", tvk_sqrt, 3, {-0.0, 0.0, INFINITY}, {-0.0, 0.0, INFINITY}},
      {"recip", tvk_recip, 4, {0.0, -0.0, INFINITY, -INFINITY}, {INFINITY, -INFINITY, 0.0, -0.0}},
      {"rsqrt", tvk_rsqrt, 5, {0.0, -0.0, INFINITY, -1, NAN}, {INFINITY, -INFINITY, 0.0, NAN, NAN}},
      {"recip(round)",
       e_recip_round,
       4,
       {-0.25, 0.25, -0.0, 0.5},
       {-INFINITY, INFINITY, -INFINITY, INFINITY}},
      {"x - x",
       e_self_sub,
       6,
       {INFINITY, -INFINITY, NAN, 1, -0.0, 0.0},
       {NAN, NAN, NAN, 0.0, 0.0, 0.0}},
      {"x * 0",
       e_mul_zero,
       6,
       {INFINITY, -INFINITY, NAN, -1, -0.0, 2},
       {NAN, NAN, NAN, -0.0, -0.0, 0.0}},
      {"x * -0", e_mul_negzero, 5, {INFINITY, NAN, -1, 0.0, 2}, {NAN, NAN, 0.0, -0.0, -0.0}},
      {"0 - x",
       e_zero_sub,
       6,
       {INFINITY, -INFINITY, NAN, 0.0, -0.0, 2},
       {-INFINITY, INFINITY, NAN, 0.0, 0.0, -2}},
      {"log(x) - log(x)", e_log_self_sub, 5, {0.0, 1, 2, -1, INFINITY}, {NAN, 0.0, 0.0, NAN, NAN}},
  };
  static const tvk_dtype fdt[] = {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT16, TVK_BFLOAT16};
  for (int k = 0; k < 4; k++) {
    for (size_t j = 0; j < sizeof T / sizeof *T; j++) {
      RArr in = arr_f(fdt[k], T[j].n, T[j].in), want = arr_f(fdt[k], T[j].n, T[j].out);
      table_unary(s, T[j].op, T[j].fn, &in, &want, TOL_BITS);
      ref_free(&in), ref_free(&want);
    }
  }
  finish(s);
}

/* ---------------------------------------------------------------- accuracy
 *
 * The error bounds tvk.h documents, asserted on sweeps that put the inputs
 * where a formulation loses accuracy: log and log2 at 1 + k 2^-23 and
 * 1 - k 2^-24 (the device's log2 alone is only accurate to an absolute 2^-21
 * there), cos at the floats nearest its zeros (k + 1/2) pi, exp and sigmoid
 * over their whole range. References are the C library's double functions of
 * the float input; errors are relative to the reference. */

/* fn(x) for n float values of x (as float32, or float64 when f64); NULL on a
 * failure, which is recorded. */
static double *eval_f(Suite *s, tvk_tensor *(*fn)(tvk_tensor *), const double *x, int64_t n,
                      bool f64) {
  tvk_dtype dt = f64 ? TVK_FLOAT64 : TVK_FLOAT32;
  RArr in = ref_new(dt, 1, &n);
  for (int64_t i = 0; i < n; i++) in.v[i].f = f64 ? x[i] : (double)(float)x[i];
  tvk_tensor *a = mk(s, &in), *r = fn(a), *r64 = tvk_cast(r, TVK_FLOAT64);
  double *out = malloc((size_t)n * sizeof *out);
  tvk_status st = tvk_to_host(r64, out, (size_t)n * sizeof *out);
  if (st != TVK_OK) {
    failf(s, "accuracy: tvk_to_host: %s: %s", tvk_status_name(st), tvk_ctx_error(s->ctx));
    free(out), out = NULL;
  }
  tvk_release(a), tvk_release(r), tvk_release(r64);
  ref_free(&in);
  return out;
}

/* Checks |fn(x) - ref(x)| <= (rel + per_x |x|) |ref(x)| + abs_ for every x;
 * prints the worst ratio of the error to that bound either way. */
static void check_accuracy(Suite *s, const char *name, tvk_tensor *(*fn)(tvk_tensor *),
                           double (*ref)(double), const double *x, int64_t n, bool f64, double rel,
                           double per_x, double abs_) {
  double *got = eval_f(s, fn, x, n, f64);
  if (!got) return;
  double worst = 0, wx = 0, wg = 0, wr = 0;
  for (int64_t i = 0; i < n; i++) {
    double xi = f64 ? x[i] : (double)(float)x[i], want = ref(xi);
    double err = fabs(got[i] - want), bound = (rel + per_x * fabs(xi)) * fabs(want) + abs_;
    double q = err / bound;
    if (!(q <= worst)) worst = q, wx = xi, wg = got[i], wr = want;
  }
  printf("  %-34s %s: worst error %.3g of the bound (x %.17g: got %.17g, want %.17g)\n", name,
         f64 ? "float64" : "float32", worst, wx, wg, wr);
  if (!(worst <= 1))
    failf(s,
          "%s (%s): error %.3g times the bound %g + %g |x| relative + %g at x = %.17g: got "
          "%.17g, want %.17g",
          name, f64 ? "float64" : "float32", worst, rel, per_x, abs_, wx, wg, wr);
  free(got);
}

static void test_accuracy_log(void **state) {
  Suite *s = *state;
  enum { K = 1 << 14 };
  double *x = malloc(4 * K * sizeof *x);
  for (int k = 0; k < K; k++) {
    x[4 * k] = 1 + (k + 1) * 0x1p-23, x[4 * k + 1] = 1 - (k + 1) * 0x1p-24;
    x[4 * k + 2] = 1 + (k + 1) * 0x1p-13, x[4 * k + 3] = ldexp(1 + k / (double)K, k % 250 - 125);
  }
  check_accuracy(s, "log near 1, and wide", tvk_log, log, x, 4 * K, false, 2e-7, 0, 0);
  check_accuracy(s, "log2 near 1, and wide", tvk_log2, log2, x, 4 * K, false, 2e-7, 0, 0);
  for (int k = 0; k < K; k++)
    x[4 * k] = 1 + (k + 1) * 0x1p-52, x[4 * k + 1] = 1 - (k + 1) * 0x1p-53;
  check_accuracy(s, "log near 1, and wide", tvk_log, log, x, 4 * K, true, 1e-14, 0, 0);
  free(x);
  finish(s);
}

/* The floats nearest (j + 1/2) pi and two more on each side, for j up to the
 * limit of the exact reduction (|x| < 6433 in float32), and their negatives;
 * past it tvk.h promises an absolute error only. */
static void test_accuracy_cos(void **state) {
  Suite *s = *state;
  enum { J = 2047, W = 5 };
  double *x = malloc(2 * J * W * sizeof *x);
  int64_t n = 0;
  for (int j = 0; j < J; j++) {
    float c = (float)((j + 0.5) * 3.14159265358979323846);
    for (int w = -2; w <= 2; w++) {
      float v = c;
      for (int t = 0; t < abs(w); t++) v = nextafterf(v, w < 0 ? 0.0f : 1e9f);
      x[n++] = v, x[n++] = -v;
    }
  }
  check_accuracy(s, "cos near its zeros", tvk_cos, cos, x, n, false, 2.4e-7, 0, 0);
  for (int64_t i = 0; i < n; i++) x[i] = -6433 + 12866.0 * (double)i / (double)n;
  check_accuracy(s, "cos on [-6433, 6433]", tvk_cos, cos, x, n, false, 2.4e-7, 0, 0);
  for (int64_t i = 0; i < n; i++) x[i] = 6433 + 1e7 * (double)i / (double)n;
  check_accuracy(s, "cos on [6433, 1e7]", tvk_cos, cos, x, n, false, 0, 0, 4e-7);
  n = 0;
  for (int j = 0; j < J; j++) { /* float64: the nearest doubles, out to 1.6e6 */
    double c = (j * 245 + 0.5) * 3.14159265358979323846;
    for (int w = -2; w <= 2; w++) x[n++] = c + w * (c * 0x1p-52);
  }
  check_accuracy(s, "cos near its zeros", tvk_cos, cos, x, n, true, 1e-14, 0, 0);
  free(x);
  finish(s);
}

static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }

/* exp and sigmoid over their range: the error of exp2 plus the rounding of
 * x log2(e), which grows with |x| (tvk.h). */
static void test_accuracy_exp(void **state) {
  Suite *s = *state;
  enum { N = 200001 };
  double *x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = -87.3 + 175.9 * i / (N - 1);
  check_accuracy(s, "exp", tvk_exp, exp, x, N, false, 1e-7, 7.5e-8, 0);
  check_accuracy(s, "sigmoid", tvk_sigmoid, ref_sigmoid, x, N, false, 2.2e-7, 7.5e-8, 0);
  for (int i = 0; i < N; i++) x[i] = -125.9 + 253.8 * i / (N - 1);
  check_accuracy(s, "exp2", tvk_exp2, exp2, x, N, false, 1e-7, 0, 0);
  /* into the denormals and past them to 0: rounded once, to the nearest
   * multiple of 2^-149 */
  for (int i = 0; i < N; i++) x[i] = -160 + 34.1 * i / (N - 1);
  check_accuracy(s, "exp2 to denormals and 0", tvk_exp2, exp2, x, N, false, 1e-7, 0, 0x1p-150);
  free(x);
  finish(s);
}

/* ---------------------------------------------------------------- broadcasting */

/* op on a of shape sa and b of shape sb, checked against the op on both
 * inputs expanded to the broadcast shape by index loops. */
static void bcast_case(Suite *s, const char *name, tvk_dtype dt, int na, const int64_t *sa, int nb,
                       const int64_t *sb) {
  const BinOp *op = binop(name);
  RArr a = gen(s, dt, na, sa, &op->da), b = gen(s, dt, nb, sb, &op->db);
  int nd;
  int64_t shape[TVK_MAX_DIMS];
  assert_true(ref_broadcast(2, (const RArr *const[]){&a, &b}, &nd, shape));
  RArr ea = ref_expand(&a, nd, shape), eb = ref_expand(&b, nd, shape);
  RArr e = ref_binop(op, &ea, &eb);
  char what[160], s1[64], s2[64];
  snprintf(what, sizeof what, "%s(%s %s, %s)", name, ref_dt(dt), shape_str(sa, na, s1, sizeof s1),
           shape_str(sb, nb, s2, sizeof s2));
  tvk_tensor *ta = mk(s, &a), *tb = mk(s, &b), *t = op->fn(ta, tb);
  expect(s, what, t, &e, op_tol(op->math, e.dt), NULL, 2, (const RArr *const[]){&ea, &eb});
  tvk_release(ta), tvk_release(tb), tvk_release(t);
  ref_free(&a), ref_free(&b), ref_free(&ea), ref_free(&eb), ref_free(&e);
}

/* numpy broadcasting: 0-d and size-1 dims, (3,1)x(1,4), (5,)x(2,5), zero-size. */
static void test_broadcast(void **state) {
  Suite *s = *state;
  static const struct {
    int na, nb;
    int64_t sa[4], sb[4];
  } P[] = {
      {2, 2, {3, 1}, {1, 4}}, {1, 2, {5}, {2, 5}},       {0, 2, {0}, {2, 3}},
      {2, 0, {2, 3}, {0}},    {3, 2, {2, 1, 3}, {4, 1}}, {1, 1, {1}, {7}},
      {2, 1, {1, 1}, {1}},    {2, 2, {0, 3}, {1, 3}},    {4, 4, {6, 1, 1, 5}, {1, 4, 3, 1}},
      {1, 0, {1}, {0}},
  };
  for (size_t k = 0; k < sizeof P / sizeof *P; k++)
    bcast_case(s, "add", TVK_FLOAT32, P[k].na, P[k].sa, P[k].nb, P[k].sb);
  static const struct {
    const char *op;
    tvk_dtype dt;
  } O[] = {
      {"sub", TVK_INT32},       {"mul", TVK_FLOAT16}, {"lt", TVK_FLOAT32},
      {"maximum", TVK_INT64},   {"idiv", TVK_INT32},  {"bitwise_xor", TVK_UINT8},
      {"logical_or", TVK_BOOL}, {"div", TVK_UINT8},   {"eq", TVK_BOOL},
  };
  for (size_t k = 0; k < sizeof O / sizeof *O; k++) {
    bcast_case(s, O[k].op, O[k].dt, 2, (int64_t[]){3, 1}, 2, (int64_t[]){1, 4});
    bcast_case(s, O[k].op, O[k].dt, 1, (int64_t[]){5}, 2, (int64_t[]){2, 5});
  }
  finish(s);
}

/* ---------------------------------------------------------------- casts */

/* Where float inputs must stay for a cast to dt to be specified: inside dt's
 * range by a margin (a float32 near INT32_MAX rounds past it), 64-bit targets
 * within 1e15 (exact integers in every source float). */
static Dom cast_dom(tvk_dtype from, tvk_dtype to) {
  Dom d = D_WIDE;
  if (!ref_is_float(from) || !ref_is_int(to)) return d;
  double hi = ref_bits(to) == 64 ? 1e15 : 0.99 * (double)ref_int_max(to);
  double lo = ref_is_unsigned(to) ? 0 : -hi;
  if (ref_bits(to) == 8) /* below 128.0/256.0 even after rounding to bfloat16 */
    hi = ref_is_unsigned(to) ? 255.4 : 127.4, lo = ref_is_unsigned(to) ? 0 : -128.4;
  return (Dom){.lo = lo, .hi = hi, .sp = SP_FIN | SP_NEGZ};
}

/* The pairs the matrix tests: all among the core dtypes; each other dtype to
 * and from float32, to bool, to and from int64 (widening, narrowing); float64
 * to the 16-bit floats and to ints; float16 <-> bfloat16. */
static bool cast_tested(tvk_dtype from, tvk_dtype to) {
  const unsigned core = M_CORE;
  if (from == to) return false;
  if ((core & M(from)) && (core & M(to))) return true;
  if (from == TVK_FLOAT32 || to == TVK_FLOAT32 || to == TVK_BOOL) return true;
  if ((from == TVK_INT64 && ref_is_int(to)) || (to == TVK_INT64 && ref_is_int(from))) return true;
  if (from == TVK_FLOAT64 &&
      (to == TVK_FLOAT16 || to == TVK_BFLOAT16 || to == TVK_INT32 || to == TVK_UINT8))
    return true;
  return (from == TVK_FLOAT16 && to == TVK_BFLOAT16) || (from == TVK_BFLOAT16 && to == TVK_FLOAT16);
}

/* Casts between dtypes (cast_tested): 437 values each, specials first. Casts between
 * floats are exact (round to nearest even); int -> float allows one ulp (tvk.h
 * names no rounding there, and via float32 is a second rounding). */
static void test_cast_matrix(void **state) {
  Suite *s = *state;
  for (int i = 0; i < REF_NDT; i++) {
    tvk_dtype from = ALL_DTYPES[i], tos[REF_NDT];
    tvk_tensor *outs[REF_NDT];
    RArr as[REF_NDT];
    int n = 0;
    for (int j = 0; j < REF_NDT; j++) {
      if (!cast_tested(from, ALL_DTYPES[j])) continue;
      tos[n] = ALL_DTYPES[j];
      Dom d = cast_dom(from, tos[n]);
      as[n] = gen(s, from, 2, (int64_t[]){19, 23}, &d);
      tvk_tensor *ta = mk(s, &as[n]);
      outs[n] = tvk_cast(ta, tos[n]);
      tvk_release(ta);
      n++;
    }
    realize_all(s, "casts", from, n, outs);
    for (int j = 0; j < n; j++) {
      RArr e = ref_cast(&as[j], tos[j]);
      char what[64];
      snprintf(what, sizeof what, "cast(%s -> %s)", ref_dt(from), ref_dt(tos[j]));
      Tol tol = ref_is_float(from) || !ref_is_float(tos[j]) ? TOL_EXACT : tol_arith(tos[j]);
      expect(s, what, outs[j], &e, tol, NULL, 1, (const RArr *const[]){&as[j]});
      tvk_release(outs[j]);
      ref_free(&as[j]), ref_free(&e);
    }
  }
  finish(s);
}

/* Casts with the expected bits worked out by hand: ties to even into float16,
 * bfloat16 and float32, overflow to inf, subnormals; truncation; wrapping. */
static void test_table_casts(void **state) {
  Suite *s = *state;
  const double t11 = ldexp(1, -11), t8 = ldexp(1, -8), t24 = ldexp(1, -24);
  RArr in = arr_f(TVK_FLOAT32, 8,
                  (double[]){1 + t11, 1 + 3 * t11, 65519, 65520, ldexp(1, -25), 3 * ldexp(1, -25),
                             (double)(-1.0f / 3), 1e-8});
  RArr want =
      arr_f(TVK_FLOAT16, 8,
            (double[]){1, 1 + 4 * t11, 65504, INFINITY, 0, ldexp(1, -23), -0.333251953125, 0});
  table_unary(s, "cast_f16", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT32, 4, (double[]){1 + t8, 1 + 3 * t8, 1 + t8 + ldexp(1, -20), -2});
  want = arr_f(TVK_BFLOAT16, 4, (double[]){1, 1 + 4 * t8, 1 + 2 * t8, -2});
  table_unary(s, "cast_bf16", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT64, 5,
             (double[]){1 + t24, 1 + 3 * t24, 1 + t24 + ldexp(1, -40), 3.5e38, 1e-46});
  want = arr_f(TVK_FLOAT32, 5, (double[]){1, 1 + 4 * t24, 1 + 2 * t24, INFINITY, 0});
  table_unary(s, "cast_f32", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT32, 6, (double[]){2.75, -2.75, -0.5, 0.5, 2147483520.0, -2147483648.0});
  want = arr_i(TVK_INT32, 6, (int64_t[]){2, -2, 0, 0, 2147483520, INT32_MIN});
  table_unary(s, "cast_i32", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT32, 3, (double[]){255.75, 0.5, 17.99});
  want = arr_i(TVK_UINT8, 3, (int64_t[]){255, 0, 17});
  table_unary(s, "cast_u8", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_f(TVK_FLOAT32, 5, (double[]){0, -0.0, NAN, 0.125, -INFINITY});
  want = arr_i(TVK_BOOL, 5, (int64_t[]){0, 0, 1, 1, 1});
  table_unary(s, "cast_bool", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_i(TVK_INT32, 6, (int64_t[]){127, 128, 255, 256, -129, -1});
  want = arr_i(TVK_INT8, 6, (int64_t[]){127, -128, -1, 0, 127, -1});
  table_unary(s, "cast_i8", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_i(TVK_INT64, 3, (int64_t[]){((int64_t)1 << 32) + 5, -((int64_t)1 << 31) - 1, -1});
  want = arr_i(TVK_UINT32, 3, (int64_t[]){5, 2147483647, 4294967295});
  table_unary(s, "cast_u32", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  in = arr_i(TVK_INT32, 3, (int64_t[]){16777217, 16777219, -16777217});
  want = arr_f(TVK_FLOAT32, 3, (double[]){16777216, 16777220, -16777216});
  table_unary(s, "cast_f32", NULL, &in, &want, TOL_EXACT);
  ref_free(&in), ref_free(&want);
  finish(s);
}

/* ---------------------------------------------------------------- reductions */

/* Inputs per reduction: sums and products of ints over the whole range (they
 * wrap in the result dtype); float products near 1 so they stay finite; means
 * of ints small enough that no implementation's sum overflows. */
static Dom red_dom(RKind k) {
  switch (k) {
  case R_SUM: return (Dom){.lo = -10, .hi = 10, .sp = SP_FIN};
  case R_PROD: return (Dom){.lo = -2, .hi = 2, .sp = SP_FIN};
  case R_MEAN: return (Dom){.lo = -10, .hi = 10, .ilo = -100, .ihi = 100, .sp = SP_FIN};
  default: return (Dom){.lo = -100, .hi = 100, .sp = SP_FIN | SP_EDGE | SP_INF | SP_NAN};
  }
}

static void red_check(Suite *s, RKind k, const RArr *a, int naxes, const int *axes, bool keepdim,
                      const char *tag) {
  char what[160], sh[64], ax[64] = "all";
  size_t n = 0;
  for (int j = 0; j < naxes; j++)
    n += (size_t)snprintf(ax + n, sizeof ax - n, "%s%d", j ? "," : "", axes[j]);
  snprintf(what, sizeof what, "%s(%s %s%s, axes %s%s)", REDOPS[k].name, ref_dt(a->dt), tag,
           shape_str(a->shape, a->ndim, sh, sizeof sh), ax, keepdim ? ", keepdim" : "");
  double *allow = NULL;
  RArr e = ref_reduce(k, a, naxes, axes, keepdim, &allow);
  tvk_tensor *ta = mk(s, a), *t = REDOPS[k].fn(ta, naxes, axes, keepdim);
  bool exact = k == R_MAX || k == R_MIN;
  expect(s, what, t, &e, exact ? TOL_EXACT : tol_arith(e.dt), exact ? NULL : allow, 0, NULL);
  tvk_release(ta), tvk_release(t);
  ref_free(&e);
  free(allow);
}

static void red_case(Suite *s, RKind k, tvk_dtype dt, int ndim, const int64_t *shape, int naxes,
                     const int *axes, bool keepdim) {
  Dom d = red_dom(k);
  RArr a = gen(s, dt, ndim, shape, &d);
  red_check(s, k, &a, naxes, axes, keepdim, "");
  ref_free(&a);
}

/* Each axis, several axes (in any order), negative axes, all axes, keepdim. */
static void test_reduce_axes(void **state) {
  Suite *s = *state;
  static const struct {
    int n;
    int axes[3];
    bool keep;
  } V[] = {{1, {1}, false},    {0, {0}, false}, {1, {0}, true},    {1, {-1}, false},
           {2, {0, 2}, false}, {0, {0}, true},  {2, {2, 0}, true}, {3, {0, 1, 2}, false}};
  const int64_t shape[] = {3, 5, 7};
  for (int v = 0; v < 8; v++) {
    red_case(s, R_SUM, TVK_FLOAT32, 3, shape, V[v].n, V[v].axes, V[v].keep);
    if (v < 4) red_case(s, R_MAX, TVK_FLOAT32, 3, shape, V[v].n, V[v].axes, V[v].keep);
    if (v < 4) red_case(s, R_SUM, TVK_INT32, 3, shape, V[v].n, V[v].axes, V[v].keep);
    if (v < 2) red_case(s, R_MAX, TVK_INT32, 3, shape, V[v].n, V[v].axes, V[v].keep);
  }
  for (int k = R_PROD; k <= R_MEAN; k++) {
    if (k == R_MAX) continue;
    red_case(s, (RKind)k, TVK_FLOAT32, 3, shape, 1, (int[]){-2}, false);
    red_case(s, (RKind)k, TVK_FLOAT32, 3, shape, 0, NULL, false);
  }
  /* 0-d input: reducing all axes of a scalar is the scalar */
  red_case(s, R_SUM, TVK_FLOAT32, 0, NULL, 0, NULL, false);
  red_case(s, R_MAX, TVK_INT32, 0, NULL, 0, NULL, true);
  finish(s);
}

/* The reductions on the dtypes they are tested with (result dtypes per tvk.h):
 * sum on every dtype, as its result dtype depends on the width. */
static void test_reduce_dtypes(void **state) {
  Suite *s = *state;
  static const unsigned dts[] = {
      [R_SUM] = M_ALL,  [R_PROD] = M_CORE | MI8,  [R_MAX] = M_CORE | MBF16 | MI8 | MU64,
      [R_MIN] = M_CORE, [R_MEAN] = M_CORE | MF64,
  };
  for (int k = R_SUM; k <= R_MEAN; k++)
    for (int j = 0; j < REF_NDT; j++)
      if (dts[k] & M(ALL_DTYPES[j]))
        red_case(s, (RKind)k, ALL_DTYPES[j], 3, (int64_t[]){3, 5, 7}, 1, (int[]){1}, false);
  finish(s);
}

/* Reducing zero elements gives the identity: sum 0, prod 1, max -inf or the
 * dtype's minimum, min +inf or its maximum, mean NaN. */
static void test_reduce_empty(void **state) {
  Suite *s = *state;
  const int64_t shape[] = {3, 0, 4};
  for (int k = R_SUM; k <= R_MEAN; k++) {
    red_case(s, (RKind)k, TVK_FLOAT32, 3, shape, 1, (int[]){1}, false);
    red_case(s, (RKind)k, TVK_FLOAT32, 3, shape, 0, NULL, false);
  }
  static const tvk_dtype dts[] = {TVK_INT32, TVK_UINT8, TVK_BOOL};
  for (size_t j = 0; j < sizeof dts / sizeof *dts; j++) {
    red_case(s, R_MAX, dts[j], 3, shape, 1, (int[]){1}, false);
    red_case(s, R_MIN, dts[j], 3, shape, 1, (int[]){1}, false);
  }
  red_case(s, R_SUM, TVK_BOOL, 3, shape, 1, (int[]){1}, false);
  red_case(s, R_MEAN, TVK_INT32, 3, shape, 1, (int[]){1}, false);
  red_case(s, R_SUM, TVK_FLOAT32, 3, shape, 1, (int[]){0}, true); /* (1,0,4): nothing to do */
  red_case(s, R_MAX, TVK_INT64, 1, (int64_t[]){0}, 0, NULL, false);
  red_case(s, R_MIN, TVK_INT8, 1, (int64_t[]){0}, 0, NULL, false);
  finish(s);
}

/* Reads float32 a (n values), reduced by fn over all axes, into *out. */
static bool reduce_scalar(Suite *s, tvk_tensor *(*fn)(tvk_tensor *, int, const int *, bool), int n,
                          const double *vals, double *out) {
  RArr a = arr_f(TVK_FLOAT32, n, vals);
  tvk_tensor *ta = mk(s, &a), *t = fn(ta, 0, NULL, false);
  float f = 0;
  tvk_status st = tvk_to_host(t, &f, sizeof f);
  tvk_release(ta), tvk_release(t);
  ref_free(&a);
  *out = f;
  return st == TVK_OK;
}

/* max/min with only negative (or only positive) values: an accumulator that
 * starts at 0 shows here. NaN: per tvk.h a NaN in the input of max/min gives
 * NaN, as does a NaN operand of maximum/minimum (the device's compare-select
 * must not drop it). Sums propagate NaN and inf as IEEE addition does. */
static void test_reduce_negative_and_nan(void **state) {
  Suite *s = *state;
  static const tvk_dtype dts[] = {TVK_FLOAT32, TVK_INT32, TVK_INT8, TVK_FLOAT16, TVK_INT64};
  for (size_t j = 0; j < sizeof dts / sizeof *dts; j++) {
    Dom neg = {.lo = -100, .hi = -1, .ilo = -1000, .ihi = -1};
    Dom pos = {.lo = 1, .hi = 100, .ilo = 1, .ihi = 1000};
    const int64_t sh[] = {3, 5, 7}; /* the shape of the other reduction tests: same kernels */
    RArr a = gen(s, dts[j], 3, sh, &neg), b = gen(s, dts[j], 3, sh, &pos);
    red_check(s, R_MAX, &a, 1, (int[]){1}, false, "negative ");
    red_check(s, R_MAX, &a, 0, NULL, false, "negative ");
    red_check(s, R_MIN, &b, 1, (int[]){1}, false, "positive ");
    red_check(s, R_MIN, &b, 0, NULL, false, "positive ");
    ref_free(&a), ref_free(&b);
  }
  /* max/min: a NaN anywhere gives NaN; maximum/minimum: NaN when either is */
  static const struct {
    int n;
    double v[3];
  } N[] = {{3, {1, NAN, 3}},  {3, {NAN, NAN, NAN}},   {3, {-1, -2, NAN}}, {2, {NAN, 5}},
           {3, {1, -NAN, 3}}, {2, {-NAN, -INFINITY}}, {3, {-NAN, NAN, 2}}}; /* sign bit set too */
  for (size_t k = 0; k < sizeof N / sizeof *N; k++) {
    double mx, mn;
    if (!reduce_scalar(s, tvk_max, N[k].n, N[k].v, &mx) ||
        !reduce_scalar(s, tvk_min, N[k].n, N[k].v, &mn))
      failf(s, "max/min with NaN: %s", tvk_ctx_error(s->ctx));
    else if (!isnan(mx) || !isnan(mn))
      failf(s, "max/min(float32 (%g,%g,%g)): got %g/%g, expected NaN", N[k].v[0], N[k].v[1],
            N[k].n > 2 ? N[k].v[2] : 0.0, mx, mn);
  }
  /* float32 max reduces compare keys (codegen's lower.c): signed zeros order
   * -0 < +0, and a NaN far along a row of 4099 (unrolled lanes, a tail) still
   * wins; the row's maximum is -0 when every element is a zero of either
   * sign but one +0 */
  static const struct {
    int n;
    double v[4], mx, mn;
  } Z[] = {{3, {-0.0, 0.0, -0.0}, 0.0, -0.0},
           {2, {0.0, -0.0}, 0.0, -0.0},
           {2, {-0.0, -0.0}, -0.0, -0.0},
           {2, {-INFINITY, -INFINITY}, -INFINITY, -INFINITY},
           {4, {-3, -INFINITY, -0.0, -1e-45}, -0.0, -INFINITY}};
  for (size_t k = 0; k < sizeof Z / sizeof *Z; k++) {
    double mx, mn;
    if (!reduce_scalar(s, tvk_max, Z[k].n, Z[k].v, &mx) ||
        !reduce_scalar(s, tvk_min, Z[k].n, Z[k].v, &mn))
      failf(s, "max/min of zeros: %s", tvk_ctx_error(s->ctx));
    else if (mx != Z[k].mx || signbit(mx) != signbit(Z[k].mx) || mn != Z[k].mn ||
             signbit(mn) != signbit(Z[k].mn))
      failf(s, "max/min(float32 case %zu): got %g/%g, expected %g/%g", k, mx, mn, Z[k].mx, Z[k].mn);
  }
  double *row = malloc(4099 * sizeof *row);
  for (int pos = 0; row && pos < 2; pos++) {
    for (int i = 0; i < 4099; i++) row[i] = -(double)(i % 97) - 0.5;
    row[pos ? 4098 : 2049] = pos ? -NAN : NAN;
    double mx, mn;
    if (!reduce_scalar(s, tvk_max, 4099, row, &mx) || !reduce_scalar(s, tvk_min, 4099, row, &mn))
      failf(s, "max/min of a long row: %s", tvk_ctx_error(s->ctx));
    else if (!isnan(mx) || !isnan(mn))
      failf(s, "max/min of 4099 with a NaN at %d: got %g/%g", pos ? 4098 : 2049, mx, mn);
  }
  free(row);
  RArr a = arr_f(TVK_FLOAT32, 3, (double[]){NAN, 1, NAN});
  RArr b = arr_f(TVK_FLOAT32, 3, (double[]){1, NAN, NAN});
  RArr want = arr_f(TVK_FLOAT32, 3, (double[]){NAN, NAN, NAN});
  table_binary(s, "maximum", tvk_maximum, &a, &b, &want);
  table_binary(s, "minimum", tvk_minimum, &a, &b, &want);
  ref_free(&a), ref_free(&b), ref_free(&want);
  /* sums: NaN and inf propagate */
  static const struct {
    double v[3], sum;
  } F[] = {{{1, NAN, 2}, NAN}, {{1, INFINITY, 2}, INFINITY}, {{INFINITY, -INFINITY, 0}, NAN}};
  for (size_t k = 0; k < sizeof F / sizeof *F; k++) {
    double got;
    if (!reduce_scalar(s, tvk_sum, 3, F[k].v, &got))
      failf(s, "sum: %s", tvk_ctx_error(s->ctx));
    else if (!(isnan(F[k].sum) ? isnan(got) : got == F[k].sum))
      failf(s, "sum(%g,%g,%g): got %g, expected %g", F[k].v[0], F[k].v[1], F[k].v[2], got,
            F[k].sum);
  }
  finish(s);
}

/* ---------------------------------------------------------------- movement */

typedef enum {
  V_RESHAPE,
  V_PERMUTE,
  V_EXPAND,
  V_PAD,
  V_SHRINK,
  V_FLIP,
  V_TRANSPOSE,
  V_CONTIG
} VKind;

/* One movement step; shapes may hold -1 (reshape, expand) as tvk.h allows. */
typedef struct {
  VKind k;
  int n;            /* reshape/expand: ndim; flip: naxes; transpose: the two dims in ax */
  int64_t shape[6]; /* reshape, expand */
  int ax[6];        /* permute order, flip axes, transpose dims */
  int64_t pr[6][2]; /* pad (before, after), shrink [start, end) */
  double value;     /* pad */
} VStep;

static const char *VNAMES[] = {"reshape", "permute", "expand",    "pad",
                               "shrink",  "flip",    "transpose", "contiguous"};

/* Applies st to *t and *a (replacing both). */
static void apply_step(tvk_tensor **t, RArr *a, const VStep *st) {
  tvk_tensor *nt = NULL;
  RArr na;
  int64_t shape[6];
  int order[TVK_MAX_DIMS];
  switch (st->k) {
  case V_RESHAPE: {
    int64_t known = 1;
    for (int d = 0; d < st->n; d++) known *= st->shape[d] < 0 ? 1 : st->shape[d];
    for (int d = 0; d < st->n; d++) shape[d] = st->shape[d] < 0 ? a->n / known : st->shape[d];
    nt = tvk_reshape(*t, st->n, st->shape), na = ref_reshape(a, st->n, shape);
  } break;
  case V_PERMUTE: /* negative entries count from the end */
    for (int d = 0; d < a->ndim; d++) order[d] = st->ax[d] < 0 ? st->ax[d] + a->ndim : st->ax[d];
    nt = tvk_permute(*t, st->ax), na = ref_permute(a, order);
    break;
  case V_EXPAND:
    for (int d = 0; d < st->n; d++)
      shape[d] = st->shape[d] < 0 ? a->shape[d - (st->n - a->ndim)] : st->shape[d];
    nt = tvk_expand(*t, st->n, st->shape), na = ref_expand(a, st->n, shape);
    break;
  case V_PAD:
    nt = tvk_pad(*t, st->pr, st->value);
    na = ref_pad(a, st->pr, ref_cast_elem(TVK_FLOAT64, a->dt, (RVal){.f = st->value}));
    break;
  case V_SHRINK: nt = tvk_shrink(*t, st->pr), na = ref_shrink(a, st->pr); break;
  case V_FLIP: nt = tvk_flip(*t, st->n, st->ax), na = ref_flip(a, st->n, st->ax); break;
  case V_TRANSPOSE: {
    int d0 = st->ax[0] < 0 ? st->ax[0] + a->ndim : st->ax[0];
    int d1 = st->ax[1] < 0 ? st->ax[1] + a->ndim : st->ax[1];
    for (int d = 0; d < a->ndim; d++) order[d] = d == d0 ? d1 : d == d1 ? d0 : d;
    nt = tvk_transpose(*t, st->ax[0], st->ax[1]), na = ref_permute(a, order);
  } break;
  case V_CONTIG: nt = tvk_contiguous(*t), na = ref_reshape(a, a->ndim, a->shape); break;
  }
  tvk_release(*t);
  ref_free(a);
  *t = nt, *a = na;
}

typedef struct {
  const char *name;
  int ndim;
  int64_t shape[6]; /* of the base */
  int nsteps;
  VStep steps[6];
} Chain;

/* Movement chains, each from a base of random values. */
static const Chain CHAINS[] = {
    {"permute", 3, {3, 4, 5}, 1, {{.k = V_PERMUTE, .ax = {2, 0, 1}}}},
    {"transpose", 3, {3, 4, 5}, 1, {{.k = V_TRANSPOSE, .ax = {0, -1}}}},
    {"expand", 3, {3, 1, 5}, 1, {{.k = V_EXPAND, .n = 4, .shape = {2, 3, 4, 5}}}},
    {"expand -1", 3, {3, 1, 5}, 1, {{.k = V_EXPAND, .n = 3, .shape = {-1, 6, -1}}}},
    {"pad 0", 3, {3, 4, 5}, 1, {{.k = V_PAD, .pr = {{1, 2}, {0, 0}, {3, 1}}}}},
    {"pad value", 3, {3, 4, 5}, 1, {{.k = V_PAD, .pr = {{0, 1}, {2, 0}, {1, 1}}, .value = 7.25}}},
    {"shrink", 3, {3, 4, 5}, 1, {{.k = V_SHRINK, .pr = {{1, 3}, {0, 4}, {2, 5}}}}},
    {"flip 0,2", 3, {3, 4, 5}, 1, {{.k = V_FLIP, .n = 2, .ax = {0, 2}}}},
    {"flip -1", 3, {3, 4, 5}, 1, {{.k = V_FLIP, .n = 1, .ax = {-1}}}},
    {"flip none", 3, {3, 4, 5}, 1, {{.k = V_FLIP, .n = 0}}},
    {"permute negative", 3, {3, 4, 5}, 1, {{.k = V_PERMUTE, .ax = {-1, 0, -2}}}},
    {"permute+reshape",
     3,
     {3, 4, 5},
     2,
     {{.k = V_PERMUTE, .ax = {2, 0, 1}}, {.k = V_RESHAPE, .n = 2, .shape = {5, 12}}}},
    {"chain",
     3,
     {3, 4, 5},
     6,
     {{.k = V_PERMUTE, .ax = {1, 0, 2}},
      {.k = V_PAD, .pr = {{1, 0}, {0, 2}, {1, 1}}, .value = 3}, /* unsigned too */
      {.k = V_FLIP, .n = 1, .ax = {1}},
      {.k = V_SHRINK, .pr = {{0, 4}, {1, 5}, {0, 6}}},
      {.k = V_RESHAPE, .n = 3, .shape = {4, -1, 3}},
      {.k = V_PERMUTE, .ax = {2, 0, 1}}}},
    {"0-d expand", 1, {1}, 2, {{.k = V_RESHAPE, .n = 0}, {.k = V_EXPAND, .n = 2, .shape = {3, 4}}}},
    {"size-1 dims",
     3,
     {3, 4, 5},
     2,
     {{.k = V_RESHAPE, .n = 5, .shape = {3, 1, 4, 5, 1}}, {.k = V_PERMUTE, .ax = {4, 2, 1, 0, 3}}}},
    {"shrink empty", 3, {3, 4, 5}, 1, {{.k = V_SHRINK, .pr = {{1, 1}, {0, 4}, {0, 5}}}}},
    {"flip+expand+pad",
     3,
     {3, 1, 5},
     3,
     {{.k = V_FLIP, .n = 1, .ax = {0}},
      {.k = V_EXPAND, .n = 3, .shape = {3, 4, 5}},
      {.k = V_PAD, .pr = {{1, 1}, {0, 1}, {2, 0}}, .value = 1}}},
    {"pad+shrink",
     3,
     {3, 4, 5},
     2,
     {{.k = V_PAD, .pr = {{2, 2}, {2, 2}, {2, 2}}, .value = 2},
      {.k = V_SHRINK, .pr = {{0, 3}, {1, 6}, {5, 9}}}}},
    {"contiguous+reshape",
     3,
     {3, 4, 5},
     3,
     {{.k = V_TRANSPOSE, .ax = {0, 2}},
      {.k = V_CONTIG},
      {.k = V_RESHAPE, .n = 2, .shape = {10, 6}}}},
};
#define NCHAINS ((int)(sizeof CHAINS / sizeof *CHAINS))

static void chain_name(const Chain *c, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s [", c->name);
  for (int i = 0; i < c->nsteps && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? " " : "", VNAMES[c->steps[i].k]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* The view itself (read back), and the view as the input of a fused op
 * (x + x, or logical_not for bool), which must read it in place. */
static void chain_case(Suite *s, const Chain *c, tvk_dtype dt, bool direct, bool fused) {
  Dom d = {.lo = -100, .hi = 100, .ilo = -1000, .ihi = 1000, .sp = SP_FIN};
  RArr a = gen(s, dt, c->ndim, c->shape, &d);
  tvk_tensor *t = mk(s, &a);
  for (int i = 0; i < c->nsteps; i++) apply_step(&t, &a, &c->steps[i]);
  char what[200], nm[128];
  chain_name(c, nm, sizeof nm);
  if (direct) {
    snprintf(what, sizeof what, "view %s of %s", nm, ref_dt(dt));
    expect(s, what, t, &a, TOL_EXACT, NULL, 0, NULL);
  }
  if (fused) {
    const BinOp *add = binop("add");
    tvk_tensor *u = dt == TVK_BOOL ? tvk_logical_not(t) : tvk_add(t, t);
    RArr e = dt == TVK_BOOL ? ref_unop(unop("logical_not"), &a) : ref_binop(add, &a, &a);
    snprintf(what, sizeof what, "%s(view %s) of %s", dt == TVK_BOOL ? "logical_not" : "x+x", nm,
             ref_dt(dt));
    expect(s, what, u, &e, tol_arith(e.dt), NULL, 1, (const RArr *const[]){&a});
    tvk_release(u);
    ref_free(&e);
  }
  tvk_release(t);
  ref_free(&a);
}

static void test_views(void **state) {
  Suite *s = *state;
  for (int k = 0; k < NCHAINS; k++) {
    chain_case(s, &CHAINS[k], TVK_INT32, true, false);
    chain_case(s, &CHAINS[k], TVK_FLOAT32, false, true);
  }
  /* the pad value and chains in other dtypes */
  static const tvk_dtype dts[] = {TVK_FLOAT16, TVK_BFLOAT16, TVK_FLOAT64, TVK_UINT8,
                                  TVK_BOOL,    TVK_INT64,    TVK_INT8};
  for (size_t j = 0; j < sizeof dts / sizeof *dts; j++) {
    chain_case(s, &CHAINS[5], dts[j], true, false); /* pad value 7.25 */
    chain_case(s, &CHAINS[10], dts[j], false, true);
  }
  finish(s);
}

/* Binary ops and reductions whose inputs are views of different layouts. */
static void test_view_inputs(void **state) {
  Suite *s = *state;
  Dom d = {.lo = -10, .hi = 10, .sp = SP_FIN};
  RArr a = gen(s, TVK_FLOAT32, 3, (int64_t[]){3, 4, 5}, &d);
  RArr b = gen(s, TVK_FLOAT32, 3, (int64_t[]){4, 5, 3}, &d);
  tvk_tensor *ta = mk(s, &a), *tb = mk(s, &b);
  /* permute(a) (4,5,3) * flip(b, {0,2}) (4,5,3) */
  RArr pa = ref_permute(&a, (int[]){1, 2, 0}), fb = ref_flip(&b, 2, (int[]){0, 2});
  tvk_tensor *tpa = tvk_permute(ta, (int[]){1, 2, 0}), *tfb = tvk_flip(tb, 2, (int[]){0, 2});
  tvk_tensor *m = tvk_mul(tpa, tfb);
  RArr e = ref_binop(binop("mul"), &pa, &fb);
  expect(s, "mul(permute, flip)", m, &e, TOL_ARITH_F32, NULL, 2, (const RArr *const[]){&pa, &fb});
  /* sums over the views, along each axis */
  for (int ax = 0; ax < 3; ax++) {
    char what[64];
    snprintf(what, sizeof what, "sum(mul(permute, flip), axis %d)", ax);
    double *allow;
    RArr er = ref_reduce(R_SUM, &e, 1, &ax, false, &allow);
    tvk_tensor *r = tvk_sum(m, 1, &ax, false);
    expect(s, what, r, &er, TOL_ARITH_F32, allow, 0, NULL);
    tvk_release(r);
    ref_free(&er);
    free(allow);
  }
  ref_free(&e);
  /* reductions of a padded, a flipped, an expanded and a shrunk view */
  const VStep steps[] = {
      {.k = V_PAD, .pr = {{1, 2}, {0, 1}, {2, 0}}, .value = 1.5},
      {.k = V_FLIP, .n = 2, .ax = {0, -1}},
      {.k = V_SHRINK, .pr = {{1, 3}, {1, 4}, {0, 5}}},
  };
  for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
    for (int rk = R_SUM; rk <= R_MAX; rk += 2) {
      RArr v = ref_reshape(&a, a.ndim, a.shape);
      tvk_tensor *tv = tvk_contiguous(ta);
      apply_step(&tv, &v, &steps[k]);
      char tag[32];
      snprintf(tag, sizeof tag, "%s of ", VNAMES[steps[k].k]);
      double *allow;
      RArr er = ref_reduce((RKind)rk, &v, 1, (int[]){1}, true, &allow);
      tvk_tensor *r = REDOPS[rk].fn(tv, 1, (int[]){1}, true);
      char what[96];
      snprintf(what, sizeof what, "%s(%s(float32 (3,4,5)), axis 1)", REDOPS[rk].name, tag);
      expect(s, what, r, &er, TOL_ARITH_F32, rk == R_SUM ? allow : NULL, 0, NULL);
      tvk_release(r), tvk_release(tv);
      ref_free(&er), ref_free(&v);
      free(allow);
    }
  }
  /* sum over an expanded axis: n copies */
  RArr x = gen(s, TVK_INT32, 2, (int64_t[]){3, 1}, &d);
  tvk_tensor *tx = mk(s, &x), *ex = tvk_expand(tx, 3, (int64_t[]){2, 3, 1000}),
             *r = tvk_sum(ex, 2, (int[]){0, 2}, false);
  RArr xe = ref_expand(&x, 3, (int64_t[]){2, 3, 1000});
  double *allow;
  RArr er = ref_reduce(R_SUM, &xe, 2, (int[]){0, 2}, false, &allow);
  expect(s, "sum(expand(int32 (3,1) -> (2,3,1000)), axes 0,2)", r, &er, TOL_EXACT, NULL, 0, NULL);
  tvk_release(tx), tvk_release(ex), tvk_release(r);
  ref_free(&x), ref_free(&xe), ref_free(&er);
  free(allow);
  tvk_release(ta), tvk_release(tb), tvk_release(tpa), tvk_release(tfb), tvk_release(m);
  ref_free(&a), ref_free(&b), ref_free(&pa), ref_free(&fb);
  finish(s);
}

/* ---------------------------------------------------------------- where, promotion */

/* The promoted dtype of a and b per tvk.h's lattice, for the pairs tested. */
static void where_case(Suite *s, tvk_dtype cdt, int nc, const int64_t *sc, tvk_dtype adt, int na,
                       const int64_t *sa, tvk_dtype bdt, int nb, const int64_t *sb, tvk_dtype out) {
  Dom d = {.lo = -100, .hi = 100, .ilo = -100, .ihi = 100, .sp = SP_FIN | SP_NAN | SP_NEGZ};
  RArr c = gen(s, cdt, nc, sc, &d), a = gen(s, adt, na, sa, &d), b = gen(s, bdt, nb, sb, &d);
  int nd;
  int64_t shape[TVK_MAX_DIMS];
  assert_true(ref_broadcast(3, (const RArr *const[]){&c, &a, &b}, &nd, shape));
  RArr ec = ref_expand(&c, nd, shape), ea = ref_expand(&a, nd, shape),
       eb = ref_expand(&b, nd, shape);
  RArr e = ref_new(out, nd, shape);
  for (int64_t i = 0; i < e.n; i++) {
    bool take_a = ref_is_float(cdt) ? ec.v[i].f != 0 : ec.v[i].i != 0; /* NaN is not 0 */
    e.v[i] = take_a ? ref_cast_elem(adt, out, ea.v[i]) : ref_cast_elem(bdt, out, eb.v[i]);
  }
  char what[160], s1[32], s2[32], s3[32];
  snprintf(what, sizeof what, "where(%s %s, %s %s, %s %s)", ref_dt(cdt),
           shape_str(sc, nc, s1, sizeof s1), ref_dt(adt), shape_str(sa, na, s2, sizeof s2),
           ref_dt(bdt), shape_str(sb, nb, s3, sizeof s3));
  tvk_tensor *tc = mk(s, &c), *ta = mk(s, &a), *tb = mk(s, &b), *t = tvk_where(tc, ta, tb);
  expect(s, what, t, &e, TOL_EXACT, NULL, 3, (const RArr *const[]){&ec, &ea, &eb});
  tvk_release(tc), tvk_release(ta), tvk_release(tb), tvk_release(t);
  ref_free(&c), ref_free(&a), ref_free(&b), ref_free(&ec), ref_free(&ea), ref_free(&eb);
  ref_free(&e);
}

static void test_where(void **state) {
  Suite *s = *state;
  const int64_t m[] = {19, 23}, c31[] = {3, 1}, r14[] = {1, 4}, v5[] = {5}, m25[] = {2, 5};
  where_case(s, TVK_BOOL, 2, c31, TVK_FLOAT32, 2, r14, TVK_FLOAT32, 0, NULL, TVK_FLOAT32);
  where_case(s, TVK_INT32, 2, m, TVK_INT32, 2, m, TVK_INT32, 2, m, TVK_INT32);
  where_case(s, TVK_FLOAT32, 2, m, TVK_UINT8, 2, m, TVK_UINT8, 2, m, TVK_UINT8); /* NaN, -0 */
  where_case(s, TVK_BOOL, 2, m, TVK_INT32, 2, m, TVK_FLOAT32, 2, m, TVK_FLOAT32);
  where_case(s, TVK_BOOL, 2, m, TVK_FLOAT16, 2, m, TVK_FLOAT16, 2, m, TVK_FLOAT16);
  where_case(s, TVK_BOOL, 2, m, TVK_BOOL, 2, m, TVK_BOOL, 2, m, TVK_BOOL);
  where_case(s, TVK_BOOL, 1, v5, TVK_INT64, 2, m25, TVK_INT64, 1, v5, TVK_INT64);
  where_case(s, TVK_UINT8, 2, m, TVK_BFLOAT16, 0, NULL, TVK_FLOAT64, 2, m, TVK_FLOAT64);
  finish(s);
}

/* Mixed dtypes promote to the smallest type both fit (tvk.h's lattice). The
 * pairs avoid the corners numpy and others disagree on (int64 with uint64). */
static void test_promotion(void **state) {
  Suite *s = *state;
  static const struct {
    tvk_dtype a, b, out;
  } P[] = {
      {TVK_INT8, TVK_UINT8, TVK_INT16},         {TVK_BOOL, TVK_INT8, TVK_INT8},
      {TVK_UINT8, TVK_INT32, TVK_INT32},        {TVK_INT32, TVK_UINT32, TVK_INT64},
      {TVK_UINT16, TVK_INT16, TVK_INT32},       {TVK_INT32, TVK_FLOAT16, TVK_FLOAT16},
      {TVK_FLOAT16, TVK_BFLOAT16, TVK_FLOAT32}, {TVK_FLOAT16, TVK_FLOAT32, TVK_FLOAT32},
      {TVK_INT64, TVK_FLOAT32, TVK_FLOAT32},    {TVK_FLOAT32, TVK_FLOAT64, TVK_FLOAT64},
      {TVK_BOOL, TVK_FLOAT32, TVK_FLOAT32},     {TVK_UINT8, TVK_UINT16, TVK_UINT16},
      {TVK_UINT32, TVK_UINT64, TVK_UINT64},     {TVK_INT8, TVK_INT64, TVK_INT64},
      {TVK_UINT8, TVK_BFLOAT16, TVK_BFLOAT16},
  };
  const BinOp *add = binop("add");
  for (size_t k = 0; k < sizeof P / sizeof *P; k++) {
    bool mixed = ref_is_float(P[k].a) != ref_is_float(P[k].b);
    /* ints over their whole range (no wrap when the promotion is right), or
     * small next to a float, so the sum is exact in the promoted float */
    Dom d = {.lo = -100,
             .hi = 100,
             .ilo = mixed ? -1000 : 0,
             .ihi = mixed ? 1000 : 0,
             .sp = SP_FIN | SP_EDGE};
    if (mixed) d.sp = SP_FIN;
    int64_t sa[] = {7, 9}, sb[] = {9};
    RArr a = gen(s, P[k].a, 2, sa, &d), b = gen(s, P[k].b, 1, sb, &d);
    RArr ea = ref_expand(&a, 2, sa), eb = ref_expand(&b, 2, sa);
    RArr ca = ref_cast(&ea, P[k].out), cb = ref_cast(&eb, P[k].out);
    RArr e = ref_binop(add, &ca, &cb);
    char what[96];
    snprintf(what, sizeof what, "add(%s (7,9), %s (9,))", ref_dt(P[k].a), ref_dt(P[k].b));
    tvk_tensor *ta = mk(s, &a), *tb = mk(s, &b), *t = tvk_add(ta, tb);
    expect(s, what, t, &e, tol_arith(P[k].out), NULL, 2, (const RArr *const[]){&ea, &eb});
    tvk_release(ta), tvk_release(tb), tvk_release(t);
    ref_free(&a), ref_free(&b), ref_free(&ea), ref_free(&eb), ref_free(&ca), ref_free(&cb);
    ref_free(&e);
  }
  /* a comparison promotes before comparing: int8 -1 < uint8 255 */
  RArr a = arr_i(TVK_INT8, 3, (int64_t[]){-1, 127, -128}),
       b = arr_i(TVK_UINT8, 3, (int64_t[]){255, 128, 0});
  RArr want = arr_i(TVK_BOOL, 3, (int64_t[]){1, 1, 1});
  table_binary(s, "lt", tvk_lt, &a, &b, &want);
  ref_free(&a), ref_free(&b), ref_free(&want);
  finish(s);
}

/* ---------------------------------------------------------------- creation */

static void test_full_and_scalar(void **state) {
  Suite *s = *state;
  static const struct {
    tvk_dtype dt;
    double value;
  } F[] = {{TVK_FLOAT32, 1.0 / 3},   {TVK_FLOAT16, 1.0 / 3}, {TVK_BFLOAT16, -2.75},
           {TVK_INT32, -7.9},        {TVK_UINT8, 200.5},     {TVK_BOOL, 0.5},
           {TVK_INT64, 1e15},        {TVK_FLOAT64, 0.1},     {TVK_FLOAT32, NAN},
           {TVK_FLOAT32, -INFINITY}, {TVK_BOOL, 0}};
  for (size_t k = 0; k < sizeof F / sizeof *F; k++) {
    const int64_t shape[] = {3, 1, 4};
    tvk_tensor *t = tvk_full(s->ctx, F[k].dt, 3, shape, F[k].value);
    RArr e = ref_new(F[k].dt, 3, shape);
    RVal v = ref_cast_elem(TVK_FLOAT64, F[k].dt, (RVal){.f = F[k].value}); /* "as by tvk_cast" */
    for (int64_t i = 0; i < e.n; i++) e.v[i] = v;
    char what[64];
    snprintf(what, sizeof what, "full(%s, %g)", ref_dt(F[k].dt), F[k].value);
    expect(s, what, t, &e, TOL_EXACT, NULL, 0, NULL);
    tvk_release(t);
    if (k % 3) { /* a 0-d tensor of the same value, for a few */
      ref_free(&e);
      continue;
    }
    tvk_tensor *sc = tvk_scalar(s->ctx, F[k].dt, F[k].value);
    RArr e0 = ref_new(F[k].dt, 0, NULL);
    e0.v[0] = v;
    snprintf(what, sizeof what, "scalar(%s, %g)", ref_dt(F[k].dt), F[k].value);
    expect(s, what, sc, &e0, TOL_EXACT, NULL, 0, NULL);
    tvk_release(sc);
    ref_free(&e), ref_free(&e0);
  }
  /* zero elements: shape kept, nothing to read */
  tvk_tensor *z = tvk_full(s->ctx, TVK_FLOAT32, 2, (int64_t[]){0, 3}, 1);
  tvk_tensor *z2 = tvk_add(z, z);
  assert_int_equal(tvk_numel(z2), 0);
  char dummy[4];
  assert_int_equal(tvk_to_host(z2, dummy, 0), TVK_OK);
  tvk_tensor *zd = tvk_from_data(s->ctx, TVK_INT32, 1, (int64_t[]){0}, NULL); /* NULL ok: empty */
  assert_int_equal(tvk_status_of(zd), TVK_OK);
  tvk_release(z), tvk_release(z2), tvk_release(zd);
  /* scalar + tensor */
  Dom d = {.lo = -10, .hi = 10, .sp = SP_FIN};
  RArr a = gen(s, TVK_FLOAT32, 2, (int64_t[]){2, 3}, &d);
  tvk_tensor *ta = mk(s, &a), *c = tvk_scalar(s->ctx, TVK_FLOAT32, 2.5), *t = tvk_mul(c, ta);
  RArr e = ref_new(TVK_FLOAT32, 2, a.shape);
  for (int64_t i = 0; i < e.n; i++) e.v[i].f = ref_round(TVK_FLOAT32, 2.5 * a.v[i].f);
  expect(s, "mul(scalar 2.5, float32 (2,3))", t, &e, TOL_ARITH_F32, NULL, 1,
         (const RArr *const[]){&a});
  tvk_release(ta), tvk_release(c), tvk_release(t);
  ref_free(&a), ref_free(&e);
  finish(s);
}

/* ---------------------------------------------------------------- sizes */

/* Sizes 1 to over a million, odd ones included, for a few cheap ops: the
 * kernels' loop split across threads and its remainder. */
static void test_sizes(void **state) {
  Suite *s = *state;
  static const int64_t N[] = {1, 7, 1000, 100003, 1048579};
  Dom d = {.lo = -10, .hi = 10, .sp = SP_FIN};
  const BinOp *add = binop("add"), *mul = binop("mul");
  for (size_t k = 0; k < sizeof N / sizeof *N; k++) {
    int64_t n = N[k];
    RArr a, b;
    gen_pair(s, TVK_FLOAT32, 1, &n, &d, &d, &a, &b);
    tvk_tensor *ta = mk(s, &a), *tb = mk(s, &b), *t = tvk_add(ta, tb);
    RArr e = ref_binop(add, &a, &b);
    char what[64];
    snprintf(what, sizeof what, "add(float32 (%" PRId64 ",))", n);
    expect(s, what, t, &e, TOL_ARITH_F32, NULL, 2, (const RArr *const[]){&a, &b});
    tvk_release(t);
    ref_free(&e);
    if (n >= 7) { /* sum and max of the whole tensor */
      red_check(s, R_SUM, &a, 0, NULL, false, "");
      red_check(s, R_MAX, &a, 0, NULL, false, "");
    }
    if (n == 100003 || n == 7) { /* int32 mul (wraps) and a cast to float16 */
      RArr ia, ib;
      Dom full = {.sp = SP_FIN | SP_EDGE};
      gen_pair(s, TVK_INT32, 1, &n, &full, &full, &ia, &ib);
      tvk_tensor *tia = mk(s, &ia), *tib = mk(s, &ib), *tm = tvk_mul(tia, tib);
      RArr em = ref_binop(mul, &ia, &ib);
      snprintf(what, sizeof what, "mul(int32 (%" PRId64 ",))", n);
      expect(s, what, tm, &em, TOL_EXACT, NULL, 2, (const RArr *const[]){&ia, &ib});
      red_check(s, R_SUM, &ia, 0, NULL, false, "");
      tvk_tensor *tc = tvk_cast(ta, TVK_FLOAT16);
      RArr ec = ref_cast(&a, TVK_FLOAT16);
      snprintf(what, sizeof what, "cast(float32 (%" PRId64 ",) -> float16)", n);
      expect(s, what, tc, &ec, TOL_EXACT, NULL, 1, (const RArr *const[]){&a});
      tvk_release(tia), tvk_release(tib), tvk_release(tm), tvk_release(tc);
      ref_free(&ia), ref_free(&ib), ref_free(&em), ref_free(&ec);
    }
    tvk_release(ta), tvk_release(tb);
    ref_free(&a), ref_free(&b);
  }
  /* a 2-D reduction over each axis of ~a million elements */
  RArr a = gen(s, TVK_FLOAT32, 2, (int64_t[]){1025, 1023}, &d);
  red_check(s, R_SUM, &a, 1, (int[]){0}, false, "");
  red_check(s, R_SUM, &a, 1, (int[]){1}, false, "");
  ref_free(&a);
  finish(s);
}

/* Whether n is prime (trial division; n below 2^27). */
static bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; d++)
    if (n % d == 0) return false;
  return true;
}

/* The first prime at or above n. */
static int64_t prime_from(int64_t n) {
  while (!is_prime(n)) n++;
  return n;
}

/* A reduce of any length works on every device: the frontend splits a long
 * one into kernels whose loops fit one GPU invocation (ops_reduce.c), also
 * where a length has no divisor to split by (primes: padded) and where a float
 * sum's loops cover more than the length (16305 = 3 * 5 * 1087 loops 17280
 * times). Lengths drawn from the seeded rng in four kinds, up to 2^26: primes,
 * a prime times a small factor, powers of two give or take a little, and
 * uniform ones; and the issue's. Summed over tvk_full (no memory; the sum of
 * ones is exact below 2^24, within float rounding of its last combine above),
 * and summed and maxed over random data for the lengths up to 2^21 against
 * double-precision loops. */
static void test_reduce_lengths(void **state) {
  Suite *s = *state;
  enum { NLEN = 40 };
  int64_t len[NLEN] = {16305, 1500007, 2000003, 3000017, 16777259, 16778216, 1087 * 3 * 5 * 7};
  int n = 7;
  while (n < NLEN) {
    int kind = n % 4;
    int64_t k = rng_int(&s->rng, 14, 26), base = (int64_t)1 << k;
    if (kind == 0) len[n++] = prime_from(rng_int(&s->rng, 16385, (int64_t)1 << 26));
    if (kind == 1) len[n++] = prime_from(rng_int(&s->rng, 1100, 1 << 22)) * rng_int(&s->rng, 2, 15);
    if (kind == 2) len[n++] = base + rng_int(&s->rng, -5, 5);
    if (kind == 3) len[n++] = rng_int(&s->rng, 16385, (int64_t)1 << 26);
  }
  for (int i = 0; i < NLEN; i++) {
    if (len[i] > ((int64_t)1 << 26)) len[i] = ((int64_t)1 << 26) - 3;
    int64_t m = len[i];
    tvk_tensor *sum = tvk_sum(tvk_full(s->ctx, TVK_FLOAT32, 1, &m, 1.0), 0, NULL, false);
    float got = 0;
    tvk_status st = tvk_to_host(sum, &got, sizeof got);
    /* exact below 2^24; above, the combine of the partials rounds: a few ulps */
    double tol = m < (1 << 24) ? 0 : 16.0 * (double)m * 0x1p-24;
    if (st != TVK_OK)
      failf(s, "sum(full(%" PRId64 ", 1.0)): %s: %s", m, tvk_status_name(st),
            tvk_ctx_error(s->ctx));
    else if (!(fabs((double)got - (double)m) <= tol))
      failf(s, "sum(full(%" PRId64 ", 1.0)) = %.1f", m, (double)got);
    tvk_release(sum);
    if (m <= (1 << 21)) {
      Dom d = {.lo = -1, .hi = 1, .sp = SP_FIN};
      RArr a = gen(s, TVK_FLOAT32, 1, &m, &d);
      red_check(s, R_SUM, &a, 0, NULL, false, "");
      red_check(s, R_MAX, &a, 0, NULL, false, "");
      ref_free(&a);
    }
  }
  /* several reduced axes, each of a prime length: their loops multiply */
  static const int64_t two[][2] = {{127, 131}, {1021, 1031}, {4099, 4093}, {131, 1}};
  for (size_t i = 0; i < sizeof two / sizeof *two; i++) {
    tvk_tensor *sum = tvk_sum(tvk_full(s->ctx, TVK_FLOAT32, 2, two[i], 1.0), 0, NULL, false);
    float got = 0;
    tvk_status st = tvk_to_host(sum, &got, sizeof got);
    if (st != TVK_OK || got != (float)(two[i][0] * two[i][1]))
      failf(s, "sum(full((%" PRId64 ", %" PRId64 "), 1.0)) = %.1f: %s", two[i][0], two[i][1],
            (double)got, st ? tvk_ctx_error(s->ctx) : "wrong");
    tvk_release(sum);
  }
  Dom d = {.lo = -1, .hi = 1, .sp = SP_FIN};
  RArr a = gen(s, TVK_FLOAT32, 2, (int64_t[]){1021, 1031}, &d);
  red_check(s, R_SUM, &a, 0, NULL, false, "");
  red_check(s, R_SUM, &a, 1, (int[]){1}, false, "");
  ref_free(&a);
  finish(s);
}

/* ---------------------------------------------------------------- realize */

/* Several outputs in one schedule, shared work, realized twice, n == 0. */
static void test_realize(void **state) {
  Suite *s = *state;
  assert_int_equal(tvk_realize(0, NULL), TVK_OK);
  Dom d = {.lo = -10, .hi = 10, .sp = SP_FIN};
  RArr a = gen(s, TVK_FLOAT32, 2, (int64_t[]){8, 9}, &d),
       b = gen(s, TVK_FLOAT32, 2, (int64_t[]){8, 9}, &d);
  tvk_tensor *ta = mk(s, &a), *tb = mk(s, &b);
  tvk_tensor *p = tvk_mul(ta, tb), *q = tvk_add(p, ta), *r = tvk_sum(p, 1, (int[]){1}, false);
  tvk_tensor *outs[] = {q, r, p};
  assert_int_equal(tvk_realize(3, outs), TVK_OK);
  tvk_stats st0, st1;
  tvk_stats_get(s->ctx, &st0);
  assert_int_equal(tvk_realize(3, outs), TVK_OK); /* already realized: nothing runs */
  tvk_stats_get(s->ctx, &st1);
  if (st1.kernels_run != st0.kernels_run)
    failf(s, "realize of realized tensors ran %" PRIu64 " kernels",
          st1.kernels_run - st0.kernels_run);
  RArr ep = ref_binop(binop("mul"), &a, &b), eq = ref_binop(binop("add"), &ep, &a);
  double *allow;
  RArr er = ref_reduce(R_SUM, &ep, 1, (int[]){1}, false, &allow);
  expect(s, "realize: a*b", p, &ep, TOL_ARITH_F32, NULL, 0, NULL);
  expect(s, "realize: a*b+a", q, &eq, TOL_ARITH_F32, NULL, 0, NULL);
  expect(s, "realize: sum(a*b, 1)", r, &er, TOL_ARITH_F32, allow, 0, NULL);
  /* inputs released before the results are read: the results kept them */
  tvk_tensor *u = tvk_sub(ta, tb);
  tvk_release(ta), tvk_release(tb);
  RArr eu = ref_binop(binop("sub"), &a, &b);
  expect(s, "sub after releasing its inputs", u, &eu, TOL_ARITH_F32, NULL, 0, NULL);
  tvk_release(p), tvk_release(q), tvk_release(r), tvk_release(u);
  ref_free(&a), ref_free(&b), ref_free(&ep), ref_free(&eq), ref_free(&er), ref_free(&eu);
  free(allow);
  finish(s);
}

/* ---------------------------------------------------------------- errors */

/* After an error: ops on the error tensor give the same status and message,
 * realize and to_host return the status with the message in tvk_ctx_error,
 * and the context still computes a valid expression correctly. */
static void check_propagation(Suite *s, const char *what, tvk_tensor *err) {
  tvk_status st = tvk_status_of(err);
  if (st == TVK_OK) return; /* already reported */
  const char *msg = tvk_error_of(err);
  tvk_tensor *one = tvk_scalar(s->ctx, TVK_FLOAT32, 1);
  tvk_tensor *chain[] = {tvk_mul(err, one),
                         tvk_neg(err),
                         tvk_sum(err, 0, NULL, false),
                         tvk_reshape(err, 0, NULL),
                         tvk_cast(err, TVK_INT32),
                         tvk_where(one, err, one)};
  for (size_t k = 0; k < sizeof chain / sizeof *chain; k++) {
    if (!chain[k] || tvk_status_of(chain[k]) != st || strcmp(tvk_error_of(chain[k]), msg))
      failf(s, "%s: op %zu on the error tensor gave %s \"%s\", expected %s \"%s\"", what, k,
            chain[k] ? tvk_status_name(tvk_status_of(chain[k])) : "NULL",
            chain[k] ? tvk_error_of(chain[k]) : "", tvk_status_name(st), msg);
    tvk_release(chain[k]);
  }
  tvk_ctx_clear_error(s->ctx);
  tvk_status rs = tvk_realize(1, &err);
  if (rs != st)
    failf(s, "%s: realize gave %s, expected %s", what, tvk_status_name(rs), tvk_status_name(st));
  if (!strstr(tvk_ctx_error(s->ctx), msg))
    failf(s, "%s: after realize tvk_ctx_error is \"%s\", expected \"%s\"", what,
          tvk_ctx_error(s->ctx), msg);
  char buf[64];
  tvk_ctx_clear_error(s->ctx);
  tvk_status hs = tvk_to_host(err, buf, sizeof buf);
  if (hs != st)
    failf(s, "%s: to_host gave %s, expected %s", what, tvk_status_name(hs), tvk_status_name(st));
  if (!strstr(tvk_ctx_error(s->ctx), msg))
    failf(s, "%s: after to_host tvk_ctx_error is \"%s\"", what, tvk_ctx_error(s->ctx));
  if (tvk_ndim(err) != 0)
    failf(s, "%s: an error tensor has ndim %d, expected 0", what, tvk_ndim(err));
  tvk_release(one);
  /* still usable: a valid computation in the same context */
  RArr a = arr_f(TVK_FLOAT32, 3, (double[]){1, 2, 3}),
       e = arr_f(TVK_FLOAT32, 3, (double[]){2, 4, 6});
  tvk_tensor *ta = mk(s, &a), *t = tvk_add(ta, ta);
  char ok[128];
  snprintf(ok, sizeof ok, "valid add after: %s", what);
  expect(s, ok, t, &e, TOL_EXACT, NULL, 0, NULL);
  tvk_release(ta), tvk_release(t);
  ref_free(&a), ref_free(&e);
}

static tvk_tensor *ft(Suite *s, int ndim, const int64_t *shape) {
  return tvk_full(s->ctx, TVK_FLOAT32, ndim, shape, 1);
}

static void test_error_shapes(void **state) {
  Suite *s = *state;
  tvk_tensor *a = ft(s, 1, (int64_t[]){3}), *b = ft(s, 1, (int64_t[]){4});
  tvk_tensor *c = ft(s, 2, (int64_t[]){2, 3}), *d = ft(s, 2, (int64_t[]){3, 2});
  tvk_tensor *e = tvk_add(a, b);
  expect_error(s, "add((3,), (4,))", e, TVK_ERR_SHAPE, TVK_OK, WORDS("add", "3", "4"));
  check_propagation(s, "add((3,), (4,))", e);
  tvk_tensor *e2 = tvk_mul(c, d);
  expect_error(s, "mul((2,3), (3,2))", e2, TVK_ERR_SHAPE, TVK_OK, WORDS("mul", "2", "3"));
  tvk_tensor *e3 = tvk_where(a, c, b);
  expect_error(s, "where((3,), (2,3), (4,))", e3, TVK_ERR_SHAPE, TVK_OK, WORDS("where", "4"));
  tvk_tensor *e4 = tvk_reshape(c, 1, (int64_t[]){5});
  expect_error(s, "reshape((2,3) -> (5,))", e4, TVK_ERR_SHAPE, TVK_OK, WORDS("reshape", "5"));
  check_propagation(s, "reshape((2,3) -> (5,))", e4);
  tvk_tensor *e5 = tvk_reshape(c, 2, (int64_t[]){4, -1});
  expect_error(s, "reshape((2,3) -> (4,-1))", e5, TVK_ERR_SHAPE, TVK_OK, WORDS("reshape", "4"));
  tvk_tensor *e6 = tvk_reshape(c, 2, (int64_t[]){-1, -1});
  expect_error(s, "reshape((2,3) -> (-1,-1))", e6, TVK_ERR_SHAPE, TVK_ERR_INVALID_ARG,
               WORDS("reshape"));
  tvk_tensor *z = tvk_full(s->ctx, TVK_FLOAT32, 2, (int64_t[]){0, 3}, 1);
  tvk_tensor *e6b = tvk_reshape(z, 2, (int64_t[]){-1, 0}); /* -1 cannot be inferred */
  expect_error(s, "reshape((0,3) -> (-1,0))", e6b, TVK_ERR_SHAPE, TVK_ERR_INVALID_ARG,
               WORDS("reshape"));
  tvk_release(z), tvk_release(e6b);
  tvk_tensor *e7 = tvk_expand(c, 2, (int64_t[]){4, 3});
  expect_error(s, "expand((2,3) -> (4,3))", e7, TVK_ERR_SHAPE, TVK_OK, WORDS("expand", "4"));
  tvk_tensor *e8 = tvk_expand(c, 1, (int64_t[]){3});
  expect_error(s, "expand((2,3) -> (3,))", e8, TVK_ERR_SHAPE, TVK_ERR_INVALID_ARG, WORDS("expand"));
  tvk_tensor *e9 = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){-2}, (float[]){1});
  expect_error(s, "from_data(shape (-2,))", e9, TVK_ERR_SHAPE, TVK_OK, WORDS("-2"));
  tvk_tensor *all[] = {a, b, c, d, e, e2, e3, e4, e5, e6, e7, e8, e9};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tvk_release(all[k]);
  finish(s);
}

static void test_error_axes(void **state) {
  Suite *s = *state;
  tvk_tensor *c = ft(s, 3, (int64_t[]){2, 3, 4});
  tvk_tensor *e1 = tvk_sum(c, 1, (int[]){3}, false);
  expect_error(s, "sum(axis 3 of 3 dims)", e1, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("sum", "3"));
  check_propagation(s, "sum(axis 3 of 3 dims)", e1);
  tvk_tensor *e2 = tvk_max(c, 1, (int[]){-4}, true);
  expect_error(s, "max(axis -4 of 3 dims)", e2, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("max", "-4"));
  tvk_tensor *e3 = tvk_mean(c, 2, (int[]){1, -2}, false);
  expect_error(s, "mean(axes 1,-2: twice)", e3, TVK_ERR_INVALID_ARG, TVK_ERR_SHAPE, WORDS("mean"));
  tvk_tensor *e4 = tvk_permute(c, (int[]){0, 0, 1});
  expect_error(s, "permute(0,0,1)", e4, TVK_ERR_INVALID_ARG, TVK_ERR_SHAPE, WORDS("permute"));
  tvk_tensor *e5 = tvk_flip(c, 1, (int[]){5});
  expect_error(s, "flip(axis 5)", e5, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("flip", "5"));
  tvk_tensor *e6 = tvk_transpose(c, 0, 3);
  expect_error(s, "transpose(0, 3)", e6, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("transpose", "3"));
  tvk_tensor *e7 = tvk_pad(c, (const int64_t[][2]){{0, 0}, {-1, 0}, {0, 0}}, 0);
  expect_error(s, "pad(-1)", e7, TVK_ERR_INVALID_ARG, TVK_ERR_SHAPE, WORDS("pad", "-1"));
  tvk_tensor *e8 = tvk_shrink(c, (const int64_t[][2]){{0, 2}, {2, 1}, {0, 4}});
  expect_error(s, "shrink([2,1))", e8, TVK_ERR_INVALID_ARG, TVK_ERR_SHAPE, WORDS("shrink"));
  tvk_tensor *e9 = tvk_shrink(c, (const int64_t[][2]){{0, 2}, {0, 3}, {0, 5}});
  expect_error(s, "shrink(end 5 > 4)", e9, TVK_ERR_INVALID_ARG, TVK_ERR_SHAPE,
               WORDS("shrink", "5"));
  tvk_tensor *e10 = tvk_from_data(s->ctx, TVK_FLOAT32, TVK_MAX_DIMS + 1,
                                  (int64_t[TVK_MAX_DIMS + 1]){0}, (float[]){1});
  expect_error(s, "from_data(17 dims)", e10, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("17"));
  tvk_tensor *all[] = {c, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tvk_release(all[k]);
  finish(s);
}

static void test_error_null(void **state) {
  Suite *s = *state;
  tvk_tensor *a = ft(s, 1, (int64_t[]){3});
  tvk_tensor *e1 = tvk_add(NULL, a);
  expect_error(s, "add(NULL, a)", e1, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("add"));
  check_propagation(s, "add(NULL, a)", e1);
  tvk_tensor *e2 = tvk_where(a, NULL, a);
  expect_error(s, "where(a, NULL, a)", e2, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("where"));
  /* no context to be found: NULL, and nothing crashes */
  assert_null(tvk_add(NULL, NULL));
  assert_null(tvk_neg(NULL));
  assert_null(tvk_sum(NULL, 0, NULL, false));
  assert_null(tvk_reshape(NULL, 0, NULL));
  assert_null(tvk_cast(NULL, TVK_INT32));
  tvk_tensor *e3 = tvk_from_data(NULL, TVK_FLOAT32, 0, NULL, (float[]){1});
  if (e3) expect_error(s, "from_data(NULL ctx)", e3, TVK_ERR_INVALID_ARG, TVK_OK, NULL);
  tvk_tensor *e4 = tvk_from_data(s->ctx, TVK_FLOAT32, 1, (int64_t[]){3}, NULL);
  expect_error(s, "from_data(NULL data)", e4, TVK_ERR_INVALID_ARG, TVK_OK, NULL);
  tvk_tensor *e5 = tvk_permute(a, NULL);
  expect_error(s, "permute(NULL order)", e5, TVK_ERR_INVALID_ARG, TVK_OK, WORDS("permute"));
  tvk_tensor *e6 = tvk_cast(a, (tvk_dtype)99);
  expect_error(s, "cast(invalid dtype)", e6, TVK_ERR_DTYPE, TVK_OK, WORDS("cast"));
  assert_int_equal(tvk_status_of(NULL), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_ndim(NULL), 0);
  assert_null(tvk_shape(NULL));
  assert_null(tvk_ctx_of(NULL));
  tvk_release(NULL);
  tvk_ctx_destroy(NULL);
  assert_int_equal(tvk_ctx_create("CPU", NULL), TVK_ERR_INVALID_ARG);
  tvk_ctx *bad = (tvk_ctx *)1;
  assert_int_equal(tvk_ctx_create("NO_SUCH_DEVICE", &bad), TVK_ERR_DEVICE);
  assert_null(bad);
  assert_true(tvk_last_create_error()[0] != '\0');
  assert_int_equal(tvk_realize(1, (tvk_tensor *[]){NULL}), TVK_ERR_INVALID_ARG);
  float f;
  assert_int_equal(tvk_to_host(NULL, &f, sizeof f), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_to_host(a, NULL, 12), TVK_ERR_INVALID_ARG);
  tvk_tensor *all[] = {a, e1, e2, e3, e4, e5, e6};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tvk_release(all[k]);
  finish(s);
}

/* Ops refuse dtypes tvk.h says they do not take, naming the op and dtype. */
static void test_error_dtypes(void **state) {
  Suite *s = *state;
  tvk_tensor *f = ft(s, 1, (int64_t[]){3});
  tvk_tensor *h = tvk_full(s->ctx, TVK_FLOAT16, 1, (int64_t[]){3}, 1);
  tvk_tensor *b = tvk_full(s->ctx, TVK_BOOL, 1, (int64_t[]){3}, 1);
  static const struct {
    const char *op;
    int which; /* 0: float32, 1: float16, 2: bool */
  } C[] = {{"idiv", 0},        {"mod", 1}, {"bitwise_and", 0}, {"bitwise_or", 1},
           {"bitwise_xor", 0}, {"shl", 0}, {"shr", 1},         {"shl", 2}};
  tvk_tensor *in[] = {f, h, b};
  for (size_t k = 0; k < sizeof C / sizeof *C; k++) {
    tvk_tensor *x = in[C[k].which], *e = binop(C[k].op)->fn(x, x);
    char what[64];
    snprintf(what, sizeof what, "%s(%s)", C[k].op, ref_dt(tvk_dtype_of(x)));
    expect_error(s, what, e, TVK_ERR_DTYPE, TVK_OK, WORDS(C[k].op, ref_dt(tvk_dtype_of(x))));
    if (k == 0) check_propagation(s, what, e);
    tvk_release(e);
  }
  tvk_tensor *e = tvk_neg(b);
  expect_error(s, "neg(bool)", e, TVK_ERR_DTYPE, TVK_OK, WORDS("neg", "bool"));
  tvk_release(e);
  tvk_release(f), tvk_release(h), tvk_release(b);
  finish(s);
}

/* to_host: nbytes too small is refused naming both sizes; exactly numel *
 * size bytes are written when more room is given. */
static void test_error_to_host(void **state) {
  Suite *s = *state;
  RArr a = arr_i(TVK_INT32, 3, (int64_t[]){1, -2, 3});
  tvk_tensor *t = mk(s, &a);
  int32_t buf[4] = {7, 7, 7, 7};
  tvk_status st = tvk_to_host(t, buf, 11);
  if (st != TVK_ERR_INVALID_ARG) failf(s, "to_host(11 of 12 bytes): %s", tvk_status_name(st));
  const char *msg = tvk_ctx_error(s->ctx);
  if (!strstr(msg, "11") || !strstr(msg, "12"))
    failf(s, "to_host message \"%s\" lacks 11 and 12", msg);
  if (buf[0] != 7) failf(s, "to_host wrote into a too small buffer");
  assert_int_equal(tvk_to_host(t, buf, sizeof buf), TVK_OK);
  if (buf[0] != 1 || buf[1] != -2 || buf[2] != 3 || buf[3] != 7)
    failf(s, "to_host(16 bytes): got %d %d %d %d, expected 1 -2 3 7 (the 4th untouched)", buf[0],
          buf[1], buf[2], buf[3]);
  /* the context still works, and the error can be cleared */
  tvk_ctx_clear_error(s->ctx);
  assert_string_equal(tvk_ctx_error(s->ctx), "");
  tvk_tensor *u = tvk_neg(t);
  RArr e = arr_i(TVK_INT32, 3, (int64_t[]){-1, 2, -3});
  expect(s, "neg after a to_host error", u, &e, TOL_EXACT, NULL, 0, NULL);
  tvk_release(t), tvk_release(u);
  ref_free(&a), ref_free(&e);
  finish(s);
}

/* ---------------------------------------------------------------- ownership */

/* A training-loop shape: 10,000 iterations, each creating an input, computing
 * a loss-like sum and a new state from the old one, reading the sum, and
 * releasing everything it no longer needs. Device memory must stay flat
 * (bytes_now bounded by a few of the loop's small buffers), and return to the
 * starting point once everything is released; LSan (the sanitizer build)
 * checks host memory. The state after n steps of +1 is n exactly. */
#define LOOP_ITERS 10000
#define LOOP_N 16
static void test_ownership_loop(void **state) {
  Suite *s = *state;
  tvk_stats st;
  tvk_stats_get(s->ctx, &st);
  uint64_t base = st.bytes_now;
  float w[LOOP_N], x[LOOP_N];
  for (int i = 0; i < LOOP_N; i++) w[i] = (float)(i % 5) - 2, x[i] = 0.5f * (float)i;
  const int64_t shape[] = {LOOP_N};
  tvk_tensor *tw = tvk_from_data(s->ctx, TVK_FLOAT32, 1, shape, w);
  tvk_tensor *one = tvk_scalar(s->ctx, TVK_FLOAT32, 1);
  tvk_tensor *stt = tvk_full(s->ctx, TVK_FLOAT32, 1, shape, 0);
  uint64_t bound = 0;
  for (int it = 0; it < LOOP_ITERS; it++) {
    tvk_tensor *tx = tvk_from_data(s->ctx, TVK_FLOAT32, 1, shape, x);
    tvk_tensor *y = tvk_add(tx, tw), *z = tvk_mul(y, y), *loss = tvk_sum(z, 0, NULL, false);
    tvk_tensor *next = tvk_add(stt, one);
    tvk_status rs = tvk_realize(2, (tvk_tensor *[]){loss, next});
    if (rs != TVK_OK) {
      failf(s, "loop iteration %d: %s: %s", it, tvk_status_name(rs), tvk_ctx_error(s->ctx));
      tvk_release(tx), tvk_release(y), tvk_release(z), tvk_release(loss), tvk_release(next);
      break;
    }
    if (it % 1000 == 0) {
      float l = 0;
      double ref = 0;
      for (int i = 0; i < LOOP_N; i++) ref += ((double)x[i] + w[i]) * ((double)x[i] + w[i]);
      if (tvk_to_host(loss, &l, sizeof l) != TVK_OK || fabs(l - ref) > 1e-5 * ref)
        failf(s, "loop iteration %d: loss %g, expected %g", it, l, ref);
      tvk_stats_get(s->ctx, &st);
      if (it == 1000) bound = st.bytes_now + 4096; /* after warm-up: must not grow */
      if (bound && st.bytes_now > bound)
        failf(s, "loop iteration %d: %" PRIu64 " device bytes live, was %" PRIu64 " at 1000", it,
              st.bytes_now, bound - 4096);
    }
    tvk_release(tx), tvk_release(y), tvk_release(z), tvk_release(loss);
    tvk_release(stt);
    stt = next;
  }
  float got[LOOP_N];
  if (tvk_to_host(stt, got, sizeof got) != TVK_OK || got[0] != LOOP_ITERS ||
      got[LOOP_N - 1] != LOOP_ITERS)
    failf(s, "loop state: got %g, expected %d", got[0], LOOP_ITERS);
  tvk_release(stt), tvk_release(tw), tvk_release(one);
  tvk_stats_get(s->ctx, &st);
  if (st.bytes_now != base)
    failf(s, "after releasing everything %" PRIu64 " device bytes are live, %" PRIu64 " before",
          st.bytes_now, base);
  finish(s);
}

/* The same with scopes: everything made inside a scope but the kept state is
 * released at its end. */
static void test_scope_loop(void **state) {
  Suite *s = *state;
  tvk_stats st;
  tvk_stats_get(s->ctx, &st);
  uint64_t base = st.bytes_now, bound = 0;
  tvk_tensor *stt = tvk_full(s->ctx, TVK_INT32, 2, (int64_t[]){4, 4}, 0);
  for (int it = 0; it < 1000; it++) {
    size_t sc = tvk_scope_begin(s->ctx);
    tvk_tensor *inc = tvk_full(s->ctx, TVK_INT32, 2, (int64_t[]){4, 4}, 3);
    tvk_tensor *next = tvk_add(tvk_mul(stt, tvk_scalar(s->ctx, TVK_INT32, 1)), inc);
    tvk_realize(1, &next);
    tvk_scope_end(s->ctx, sc, 1, &next);
    tvk_release(stt);
    stt = next;
    tvk_stats_get(s->ctx, &st);
    if (it == 100) bound = st.bytes_now + 4096;
    if (bound && st.bytes_now > bound) {
      failf(s, "scope loop iteration %d: %" PRIu64 " device bytes live", it, st.bytes_now);
      break;
    }
  }
  int32_t got[16];
  if (tvk_to_host(stt, got, sizeof got) != TVK_OK || got[0] != 3000 || got[15] != 3000)
    failf(s, "scope loop state: got %d, expected 3000", got[0]);
  tvk_release(stt);
  tvk_stats_get(s->ctx, &st);
  if (st.bytes_now != base)
    failf(s, "after the scope loop %" PRIu64 " device bytes live", st.bytes_now);
  finish(s);
}

/* MIN idiv -1 and MIN mod -1 in 32 and 64 bits wrap (MIN and 0) as tvk.h's
 * "integer arithmetic wraps" says; a kernel that divides there natively traps
 * (SIGFPE on x86), so this runs last. */
static void test_idiv_min_by_minus_one(void **state) {
  Suite *s = *state;
  static const tvk_dtype dts[] = {TVK_INT32, TVK_INT64};
  for (int k = 0; k < 2; k++) {
    int64_t mn = ref_int_min(dts[k]);
    RArr a = arr_i(dts[k], 2, (int64_t[]){mn, mn}), b = arr_i(dts[k], 2, (int64_t[]){-1, -1});
    RArr q = arr_i(dts[k], 2, (int64_t[]){mn, mn}), r = arr_i(dts[k], 2, (int64_t[]){0, 0});
    table_binary(s, "idiv", tvk_idiv, &a, &b, &q);
    table_binary(s, "mod", tvk_mod, &a, &b, &r);
    ref_free(&a), ref_free(&b), ref_free(&q), ref_free(&r);
  }
  finish(s);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  Suite suite = {.device = argc > 1 ? argv[1] : "CPU"};
  if (argc > 2) cmocka_set_test_filter(argv[2]); /* e.g. "test_reduce_*" */
  if (api_device_missing("test_ops", suite.device)) return 77;
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, &suite)
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_helpers),
      T(test_create_and_inspect),
      T(test_binary_dtypes),
      T(test_unary_dtypes),
      T(test_table_int_division),
      T(test_table_int_wrap),
      T(test_table_float_specials),
      T(test_div_by_known_zero),
      T(test_table_pow),
      T(test_table_signed_zeros),
      T(test_accuracy_log),
      T(test_accuracy_cos),
      T(test_accuracy_exp),
      T(test_broadcast),
      T(test_promotion),
      T(test_where),
      T(test_cast_matrix),
      T(test_table_casts),
      T(test_reduce_axes),
      T(test_reduce_dtypes),
      T(test_reduce_empty),
      T(test_reduce_negative_and_nan),
      T(test_views),
      T(test_view_inputs),
      T(test_full_and_scalar),
      T(test_sizes),
      T(test_reduce_lengths),
      T(test_realize),
      T(test_error_shapes),
      T(test_error_axes),
      T(test_error_null),
      T(test_error_dtypes),
      T(test_error_to_host),
      T(test_ownership_loop),
      T(test_scope_loop),
      T(test_idiv_min_by_minus_one),
  };
#undef T
  char name[64];
  snprintf(name, sizeof name, "ops on %s", suite.device);
  return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof *tests, NULL, NULL);
}
