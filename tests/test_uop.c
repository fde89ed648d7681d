/* Suite `uop`: dtypes, float16/bfloat16, constant evaluation (alu.h), and the
 * UOp itself: interning, reference counts, pools, toposort and the printer.
 * Every expected value comes from an independent reference: C's own casts and
 * arithmetic, frexp/ldexp rounding, hand-written tables, or brute force. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv, strdup (test_util.h) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/alu.h"
#include "ir/dtype.h"
#include "ir/uop.h"
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */

typedef struct {
  uint64_t s;
} Rng;
static uint64_t rng_next(Rng *r) { return xorshift64(&r->s); }

/* Fail with the case printed. */
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      print_message("FAILED %s at %s:%d: ", #cond, __FILE__, __LINE__);                            \
      print_message(__VA_ARGS__);                                                                  \
      print_message("\n");                                                                         \
      fail();                                                                                      \
    }                                                                                              \
  } while (0)

static uint64_t dbits(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}
static uint32_t fbits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}
static float bitsf(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
static double bitsd(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

/* Same value, same sign of zero, or both NaN. */
static bool same_value(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

static const ScalarType INT_TYPES[] = {DT_INT8,  DT_UINT8,  DT_INT16, DT_UINT16,
                                       DT_INT32, DT_UINT32, DT_INT64, DT_UINT64};
#define N_INT_TYPES ((int)(sizeof INT_TYPES / sizeof INT_TYPES[0]))

/* C's own conversion to the fixed-width type (modular on every compiler tvk
 * supports), as the reference for wrapping. */
static int64_t ccast(ScalarType t, int64_t v) {
  switch (t) {
  case DT_BOOL: return v != 0;
  case DT_INT8: return (int8_t)v;
  case DT_UINT8: return (uint8_t)v;
  case DT_INT16: return (int16_t)v;
  case DT_UINT16: return (uint16_t)v;
  case DT_INT32: return (int32_t)v;
  case DT_UINT32: return (uint32_t)v;
  default: return v;
  }
}

/* A random value of an integer type: fully random bits, or near an edge. */
static int64_t rand_int(Rng *r, ScalarType t) {
  uint64_t x = rng_next(r);
  switch (x % 4) {
  case 0: return ccast(t, (int64_t)(rng_next(r) % 17) - 8);
  case 1: return ccast(t, dt_max_i(dt_make(t)) - (int64_t)(rng_next(r) % 4));
  default: return ccast(t, (int64_t)rng_next(r));
  }
}

/* Reference rounding of x to a binary format with `mbits` stored mantissa bits
 * and normal exponents emin..emax, written with frexp/ldexp/nearbyint. */
static double ref_round(double x, int mbits, int emin, int emax) {
  if (isnan(x) || isinf(x) || x == 0) return x;
  int e;
  frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
  int lead = e - 1 < emin ? emin : e - 1;
  double quantum = ldexp(1.0, lead - mbits);
  double r = nearbyint(fabs(x) / quantum) * quantum; /* ties to even */
  if (r >= ldexp(1.0, emax + 1)) r = INFINITY;
  return copysign(r, x);
}
static double ref_f16(double x) { return ref_round(x, 10, -14, 15); }
static double ref_bf16(double x) { return ref_round(x, 7, -126, 127); }
static double ref_f32(double x) { return ref_round(x, 23, -126, 127); }

/* ================================================================ op facts */

/* The facts ops.def claims of ALU ops hold for the IR's own semantics
 * (alu_exec), checked on int32 and float32 values. */
static bool exec_i(Op op, int64_t a, int64_t b, int64_t *r) {
  CVal res, src[3] = {{.i = a}, {.i = b}, {.i = 0}};
  ScalarType out = op == OP_CMPLT || op == OP_CMPNE ? DT_BOOL : DT_INT32;
  if (!alu_exec(op, out, DT_INT32, src, &res)) return false;
  *r = res.i;
  return true;
}

static void test_op_facts(void **state) {
  (void)state;
  const int64_t vals[] = {0, 1, -1, 2, 7, -13, 1000, INT32_MAX, INT32_MIN};
  const int nv = (int)(sizeof vals / sizeof vals[0]);
  for (int o = 1; o < OP_COUNT; o++) {
    Op op = (Op)o;
    uint32_t g = op_groups(op);
    int kinds = !!(g & G_UNARY) + !!(g & G_BINARY) + !!(g & G_TERNARY);
    assert_int_equal(kinds, (g & G_ALU) ? 1 : 0);
    assert_int_equal(op_arity(op), (g & G_UNARY)     ? 1
                                   : (g & G_BINARY)  ? 2
                                   : (g & G_TERNARY) ? 3
                                                     : 0);
    if (g & G_ALU) assert_true(g & G_ELEMENTWISE);
    if (g & G_ELEMENTWISE) assert_true((g & G_AST_VALUE) && (g & G_AST));
    if (g & G_REDUCE_OP) assert_true(g & G_BINARY && g & G_COMMUTATIVE && g & G_ASSOCIATIVE);
    if ((g & G_KEEPS_ZERO) && (g & G_ALU)) { /* f(0, ..) is +0 or -0 on ints and floats */
      CVal zi[3] = {{.i = 0}, {.i = 0}, {.i = 0}}, zf[3] = {{.f = 0}, {.f = 0}, {.f = 0}}, r;
      ScalarType oi = op == OP_CMPLT || op == OP_CMPNE ? DT_BOOL : DT_INT32;
      if (alu_exec(op, oi, DT_INT32, zi, &r))
        CHECK(r.i == 0, "%s(0, 0) = %lld", op_name(op), (long long)r.i);
      ScalarType of = oi == DT_BOOL ? DT_BOOL : DT_FLOAT32;
      if (alu_exec(op, of, DT_FLOAT32, op == OP_WHERE ? zi : zf, &r))
        CHECK(of == DT_BOOL ? r.i == 0 : r.f == 0, "%s(0.0, 0.0) is not 0", op_name(op));
    }
    if (!(g & G_BINARY)) continue;
    for (int i = 0; i < nv; i++)
      for (int j = 0; j < nv; j++) {
        int64_t ab = 0, ba = 0, aa = 0;
        if (!exec_i(op, vals[i], vals[j], &ab)) continue;
        if (g & G_COMMUTATIVE) {
          assert_true(exec_i(op, vals[j], vals[i], &ba));
          CHECK(ab == ba, "%s(%lld, %lld) != %s(%lld, %lld)", op_name(op), (long long)vals[i],
                (long long)vals[j], op_name(op), (long long)vals[j], (long long)vals[i]);
        }
        if ((g & G_IDEMPOTENT) && exec_i(op, vals[i], vals[i], &aa))
          CHECK(aa == vals[i], "%s(x, x) != x for %lld", op_name(op), (long long)vals[i]);
        for (int k = 0; (g & G_ASSOCIATIVE) && k < nv; k++) {
          int64_t l = 0, r = 0, bc = 0;
          assert_true(exec_i(op, ab, vals[k], &l) && exec_i(op, vals[j], vals[k], &bc) &&
                      exec_i(op, vals[i], bc, &r));
          CHECK(l == r, "%s is not associative at %lld %lld %lld", op_name(op), (long long)vals[i],
                (long long)vals[j], (long long)vals[k]);
        }
      }
  }
}

/* ================================================================ dtypes */

static void test_dtype_sizes_names(void **state) {
  (void)state;
  static const struct {
    ScalarType t;
    size_t size;
    const char *name;
  } tab[] = {
      {DT_VOID, 0, "void"},       {DT_BOOL, 1, "bool"},       {DT_INT8, 1, "int8"},
      {DT_UINT8, 1, "uint8"},     {DT_INT16, 2, "int16"},     {DT_UINT16, 2, "uint16"},
      {DT_INT32, 4, "int32"},     {DT_UINT32, 4, "uint32"},   {DT_INT64, 8, "int64"},
      {DT_UINT64, 8, "uint64"},   {DT_FLOAT16, 2, "float16"}, {DT_BFLOAT16, 2, "bfloat16"},
      {DT_FLOAT32, 4, "float32"}, {DT_FLOAT64, 8, "float64"},
  };
  assert_int_equal(sizeof tab / sizeof tab[0], DT_COUNT);
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
    DType d = dt_make(tab[i].t);
    assert_int_equal(dt_scalar_size(tab[i].t), tab[i].size);
    assert_int_equal(dt_itemsize(d), tab[i].size);
    assert_int_equal(dt_itemsize(dt_vec(d, 4)), 4 * tab[i].size);
    assert_int_equal(dt_itemsize(dt_ptr(dt_vec(d, 3), ADDR_GLOBAL)), 3 * tab[i].size);
    assert_int_equal(dt_bits(dt_vec(d, 4)), 8 * (int)tab[i].size);
    assert_string_equal(dt_scalar_name(tab[i].t), tab[i].name);
    bool is_uint = tab[i].t == DT_UINT8 || tab[i].t == DT_UINT16 || tab[i].t == DT_UINT32 ||
                   tab[i].t == DT_UINT64;
    assert_int_equal(dt_is_unsigned(d), is_uint);
  }
  char buf[48];
  assert_string_equal(dt_str(DT(FLOAT32), buf), "float32");
  assert_string_equal(dt_str(dt_vec(DT(FLOAT32), 4), buf), "float32.vec(4)");
  assert_string_equal(dt_str(dt_ptr(DT(FLOAT16), ADDR_GLOBAL), buf), "float16.ptr");
  assert_string_equal(dt_str(dt_ptr(dt_vec(DT(INT8), 2), ADDR_LOCAL), buf),
                      "int8.vec(2).ptr(local)");
  assert_string_equal(dt_str(dt_ptr(dt_vec(DT(BFLOAT16), 255), ADDR_LOCAL), buf),
                      "bfloat16.vec(255).ptr(local)");
}

/* The seed's promotion lattice, typed as edges (child -> parent). */
static const ScalarType LATTICE[][2] = {
    {DT_BOOL, DT_INT8},       {DT_BOOL, DT_UINT8},       {DT_INT8, DT_INT16},
    {DT_INT16, DT_INT32},     {DT_INT32, DT_INT64},      {DT_INT64, DT_FLOAT16},
    {DT_INT64, DT_BFLOAT16},  {DT_UINT8, DT_INT16},      {DT_UINT8, DT_UINT16},
    {DT_UINT16, DT_INT32},    {DT_UINT16, DT_UINT32},    {DT_UINT32, DT_INT64},
    {DT_UINT32, DT_UINT64},   {DT_UINT64, DT_FLOAT16},   {DT_UINT64, DT_BFLOAT16},
    {DT_FLOAT16, DT_FLOAT32}, {DT_BFLOAT16, DT_FLOAT32}, {DT_FLOAT32, DT_FLOAT64},
};

static bool reaches(ScalarType from, ScalarType to) { /* from <= to in the lattice */
  if (from == to) return true;
  for (size_t i = 0; i < sizeof LATTICE / sizeof LATTICE[0]; i++)
    if (LATTICE[i][0] == from && reaches(LATTICE[i][1], to)) return true;
  return false;
}

static void test_dtype_promote(void **state) {
  (void)state;
  for (int a = DT_BOOL; a < DT_COUNT; a++) {
    for (int b = DT_BOOL; b < DT_COUNT; b++) {
      int want = -1; /* lowest-priority common upper bound, as the seed's min() */
      for (int c = DT_BOOL; c < DT_COUNT && want < 0; c++)
        if (reaches((ScalarType)a, (ScalarType)c) && reaches((ScalarType)b, (ScalarType)c))
          want = c;
      ScalarType got = dt_promote((ScalarType)a, (ScalarType)b);
      CHECK((int)got == want, "promote(%s, %s) = %s, want %s", dt_scalar_name((ScalarType)a),
            dt_scalar_name((ScalarType)b), dt_scalar_name(got), dt_scalar_name((ScalarType)want));
    }
  }
  /* spot checks typed by hand from tinygrad's behaviour */
  assert_int_equal(dt_promote(DT_INT8, DT_UINT8), DT_INT16);
  assert_int_equal(dt_promote(DT_INT32, DT_UINT32), DT_INT64);
  assert_int_equal(dt_promote(DT_INT64, DT_UINT64), DT_FLOAT16);
  assert_int_equal(dt_promote(DT_UINT64, DT_INT8), DT_FLOAT16);
  assert_int_equal(dt_promote(DT_FLOAT16, DT_BFLOAT16), DT_FLOAT32);
  assert_int_equal(dt_promote(DT_BOOL, DT_BOOL), DT_BOOL);
  assert_int_equal(dt_promote(DT_BOOL, DT_FLOAT32), DT_FLOAT32);
  assert_int_equal(dt_promote(DT_UINT8, DT_UINT16), DT_UINT16);
  assert_int_equal(dt_promote(DT_INT16, DT_UINT16), DT_INT32);
  assert_int_equal(dt_promote(DT_INT64, DT_FLOAT64), DT_FLOAT64);
  assert_int_equal(dt_promote(DT_VOID, DT_INT32), DT_VOID);
}

/* The reduction rules, written out per dtype (tvk.h documents them per op). */
static void test_dtype_reduce_rules(void **state) {
  (void)state;
  static const struct {
    ScalarType s, sum, flt, acc;
  } rows[] = {
      {DT_BOOL, DT_INT32, DT_FLOAT32, DT_BOOL},
      {DT_INT8, DT_INT32, DT_FLOAT32, DT_INT8},
      {DT_UINT8, DT_UINT32, DT_FLOAT32, DT_UINT8},
      {DT_INT16, DT_INT32, DT_FLOAT32, DT_INT16},
      {DT_UINT16, DT_UINT32, DT_FLOAT32, DT_UINT16},
      {DT_INT32, DT_INT32, DT_FLOAT32, DT_INT32},
      {DT_UINT32, DT_UINT32, DT_FLOAT32, DT_UINT32},
      {DT_INT64, DT_INT64, DT_FLOAT32, DT_INT64},
      {DT_UINT64, DT_UINT64, DT_FLOAT32, DT_UINT64},
      {DT_FLOAT16, DT_FLOAT16, DT_FLOAT16, DT_FLOAT32},
      {DT_BFLOAT16, DT_BFLOAT16, DT_BFLOAT16, DT_FLOAT32},
      {DT_FLOAT32, DT_FLOAT32, DT_FLOAT32, DT_FLOAT32},
      {DT_FLOAT64, DT_FLOAT64, DT_FLOAT64, DT_FLOAT64},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    assert_int_equal(dt_sum_result(rows[i].s), rows[i].sum);
    assert_int_equal(dt_float_result(rows[i].s), rows[i].flt);
    assert_int_equal(dt_acc(rows[i].s), rows[i].acc);
  }
}

static void test_dtype_bounds(void **state) {
  (void)state;
  static const struct {
    ScalarType t;
    int64_t lo, hi;
  } tab[] = {
      {DT_BOOL, 0, 1},
      {DT_INT8, -128, 127},
      {DT_UINT8, 0, 255},
      {DT_INT16, -32768, 32767},
      {DT_UINT16, 0, 65535},
      {DT_INT32, -2147483647 - 1, 2147483647},
      {DT_UINT32, 0, 4294967295},
      {DT_INT64, INT64_MIN, INT64_MAX},
      {DT_UINT64, 0, INT64_MAX}, /* clamped, as documented */
  };
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
    DType d = dt_make(tab[i].t);
    CHECK(dt_min_i(d) == tab[i].lo && dt_max_i(d) == tab[i].hi, "%s", dt_scalar_name(tab[i].t));
    CHECK(dt_min_f(d) == (double)tab[i].lo, "%s", dt_scalar_name(tab[i].t));
    if (tab[i].t != DT_UINT64)
      CHECK(dt_max_f(d) == (double)tab[i].hi, "%s", dt_scalar_name(tab[i].t));
    /* vectors have the bounds of their scalar */
    CHECK(dt_min_i(dt_vec(d, 4)) == tab[i].lo && dt_max_i(dt_vec(d, 4)) == tab[i].hi, "vec");
  }
  assert_true(dt_max_f(DT(UINT64)) == 18446744073709551615.0);
  for (int t = DT_FLOAT16; t <= DT_FLOAT64; t++) {
    assert_true(dt_min_f(dt_make((ScalarType)t)) == -INFINITY);
    assert_true(dt_max_f(dt_make((ScalarType)t)) == INFINITY);
  }
}

static void test_dtype_truncate_int(void **state) {
  (void)state;
  Rng r = {0x1234567};
  for (int k = 0; k < 20000; k++) {
    int64_t v = (int64_t)rng_next(&r);
    if (k % 3 == 0) v = (int64_t)(rng_next(&r) % 600) - 300;
    for (int i = 0; i < N_INT_TYPES; i++)
      CHECK(dt_truncate_i(INT_TYPES[i], v) == ccast(INT_TYPES[i], v), "%s %" PRId64,
            dt_scalar_name(INT_TYPES[i]), v);
    CHECK(dt_truncate_i(DT_BOOL, v) == (v != 0), "bool %" PRId64, v);
  }
  assert_int_equal(dt_truncate_i(DT_INT8, 128), -128);
  assert_int_equal(dt_truncate_i(DT_INT8, 255), -1);
  assert_int_equal(dt_truncate_i(DT_UINT8, -1), 255);
  assert_int_equal(dt_truncate_i(DT_INT16, 40000), 40000 - 65536);
  assert_int_equal(dt_truncate_i(DT_UINT32, -2), 4294967294);
  assert_int_equal(dt_truncate_i(DT_INT32, 0x180000000ll), INT32_MIN);
  assert_int_equal(dt_truncate_i(DT_BOOL, 256), 1);
}

/* float32 truncation is C's double -> float; half and bfloat16 the frexp reference. */
static void test_dtype_truncate_float(void **state) {
  (void)state;
  Rng r = {0xabcdef};
  for (int k = 0; k < 200000; k++) {
    uint64_t b = rng_next(&r);
    if (k % 2) /* exponents around the small formats' ranges */
      b = (b & 0x800fffffffffffffull) | (uint64_t)(1023 - 140 + (int)(rng_next(&r) % 280)) << 52;
    double x = bitsd(b);
    double f32 = dt_truncate_f(DT_FLOAT32, x);
    if (fabs(x) <= FLT_MAX) CHECK(same_value(f32, (double)(float)x), "f32 %a", x);
    CHECK(same_value(f32, ref_f32(x)), "f32 %a -> %a want %a", x, f32, ref_f32(x));
    CHECK(same_value(dt_truncate_f(DT_FLOAT16, x), ref_f16(x)), "f16 %a -> %a want %a", x,
          dt_truncate_f(DT_FLOAT16, x), ref_f16(x));
    CHECK(same_value(dt_truncate_f(DT_BFLOAT16, x), ref_bf16(x)), "bf16 %a -> %a want %a", x,
          dt_truncate_f(DT_BFLOAT16, x), ref_bf16(x));
    CHECK(dbits(dt_truncate_f(DT_FLOAT64, x)) == b, "f64 %a", x);
  }
  /* one rounding, not two: 1 + 2^-11 + 2^-40 is above the half-way point of
   * half's 1 and 1 + 2^-10, but rounds to the tie 1 + 2^-11 in float32 first */
  assert_true(dt_truncate_f(DT_FLOAT16, 1 + ldexp(1, -11) + ldexp(1, -40)) == 1 + ldexp(1, -10));
  assert_true(dt_truncate_f(DT_FLOAT16, 1 + ldexp(1, -11)) == 1.0); /* tie to even */
  assert_true(dt_truncate_f(DT_FLOAT16, 1 + 3 * ldexp(1, -11)) == 1 + ldexp(1, -9));
  assert_true(dt_truncate_f(DT_FLOAT16, 65519.99) == 65504.0);
  assert_true(dt_truncate_f(DT_FLOAT16, 65520.0) == INFINITY); /* tie at max: rounds up */
  assert_true(dt_truncate_f(DT_FLOAT16, -1e10) == -INFINITY);
  assert_true(dt_truncate_f(DT_FLOAT16, ldexp(1, -24)) == ldexp(1, -24)); /* min subnormal */
  assert_true(dt_truncate_f(DT_FLOAT16, ldexp(1, -25)) == 0.0);           /* tie to even 0 */
  assert_true(dt_truncate_f(DT_FLOAT16, ldexp(1.5, -25)) == ldexp(1, -24));
  assert_true(signbit(dt_truncate_f(DT_FLOAT16, -ldexp(1, -30))));
  assert_true(dt_truncate_f(DT_BFLOAT16, 1 + ldexp(1, -8)) == 1.0);
  assert_true(dt_truncate_f(DT_BFLOAT16, 1 + 3 * ldexp(1, -8)) == 1 + ldexp(1, -6));
  assert_true(dt_truncate_f(DT_BFLOAT16, 3.4e38) == INFINITY);
  assert_true(dt_truncate_f(DT_FLOAT32, 3.4028235677973366e38) == INFINITY); /* 2^128 - 2^103 */
  assert_true(dt_truncate_f(DT_FLOAT32, 3.4028235677973362e38) == FLT_MAX);
  assert_true(isnan(dt_truncate_f(DT_FLOAT16, NAN)) && isnan(dt_truncate_f(DT_BFLOAT16, NAN)));
  assert_true(isnan(dt_truncate_f(DT_FLOAT32, -NAN)) && signbit(dt_truncate_f(DT_FLOAT32, -NAN)));
  assert_true(dt_truncate_f(DT_FLOAT16, -INFINITY) == -INFINITY);
}

/* ================================================================ half and bfloat16 */

static double ref_decode(uint16_t h, int ebits, int mbits) {
  int e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
  int bias = (1 << (ebits - 1)) - 1;
  double sign = (h >> 15) ? -1.0 : 1.0;
  if (e == (1 << ebits) - 1) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexp(m, 1 - bias - mbits);
  return sign * ldexp((1 << mbits) + m, e - bias - mbits);
}

static void test_half_exhaustive(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = f16_to_f32((uint16_t)h), g = bf16_to_f32((uint16_t)h);
    double want_f = ref_decode((uint16_t)h, 5, 10), want_g = ref_decode((uint16_t)h, 8, 7);
    CHECK(same_value(f, want_f) || (isnan(f) && isnan(want_f)), "f16 %04x -> %a", h, (double)f);
    CHECK(same_value(g, want_g) || (isnan(g) && isnan(want_g)), "bf16 %04x -> %a", h, (double)g);
    CHECK(!!signbit(f) == (h >> 15) && !!signbit(g) == (h >> 15), "sign %04x", h);
    if (isnan(f)) CHECK((fbits(f) >> 13 & 0x3ff) == (h & 0x3ff), "f16 NaN payload %04x", h);
    /* every pattern round-trips, NaN payloads included */
    CHECK(f32_to_f16(f) == h, "f16 %04x -> %a -> %04x", h, (double)f, f32_to_f16(f));
    CHECK(f32_to_bf16(g) == h, "bf16 %04x -> %a -> %04x", h, (double)g, f32_to_bf16(g));
  }
}

static void check_f32_to_small(float x) {
  double hx = f16_to_f32(f32_to_f16(x)), bx = bf16_to_f32(f32_to_bf16(x));
  CHECK(same_value(hx, ref_f16(x)), "f16(%a) = %a want %a", (double)x, hx, ref_f16(x));
  CHECK(same_value(bx, ref_bf16(x)), "bf16(%a) = %a want %a", (double)x, bx, ref_bf16(x));
  if (isnan(x)) CHECK(!signbit(hx) == !signbit(x) && !signbit(bx) == !signbit(x), "NaN sign");
}

static void test_half_rounding(void **state) {
  (void)state;
  Rng r = {42};
  for (int k = 0; k < 1000000; k++) {
    uint32_t b = (uint32_t)rng_next(&r);
    if (k % 2) /* exponents where half is normal, subnormal or overflows */
      b = (b & 0x807fffffu) | (uint32_t)(127 - 30 + (int)(rng_next(&r) % 50)) << 23;
    check_f32_to_small(bitsf(b));
  }
  /* every half-way point and its neighbours between consecutive halves */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = ref_decode((uint16_t)h, 5, 10), hi = ref_decode((uint16_t)(h + 1), 5, 10);
    float mid = (float)((lo + hi) / 2); /* exact in float: 12 significant bits */
    check_f32_to_small(mid);
    check_f32_to_small(-mid);
    check_f32_to_small(nextafterf(mid, 0));
    check_f32_to_small(nextafterf(mid, INFINITY));
  }
  for (uint32_t g = 0; g < 0x7f80; g++) {
    uint32_t mid = (g << 16) | 0x8000; /* bfloat16 half-way points are float32 values */
    check_f32_to_small(bitsf(mid));
    check_f32_to_small(bitsf(mid + 1));
    check_f32_to_small(bitsf(mid - 1));
    check_f32_to_small(bitsf(mid | 0x80000000u));
  }
  assert_int_equal(f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(f32_to_f16(ldexpf(1, -24)), 0x0001);
  assert_int_equal(f32_to_f16(ldexpf(1, -14)), 0x0400);
  assert_int_equal(f32_to_f16(-0.0f), 0x8000);
  assert_int_equal(f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(f32_to_bf16(FLT_MAX), 0x7f80); /* rounds up to inf */
  assert_int_equal(f32_to_bf16(bitsf(0x7f7f7fffu)), 0x7f7f);
  assert_true((f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (f32_to_f16(NAN) & 0x3ff) != 0);
  /* a NaN whose payload lives only in the low bits stays a NaN */
  assert_true(isnan(f16_to_f32(f32_to_f16(bitsf(0x7f800001u)))));
  assert_true(isnan(bf16_to_f32(f32_to_bf16(bitsf(0xff800001u)))));
  assert_true(f32_to_bf16(bitsf(0xff800001u)) >> 15);
}

/* ================================================================ casts */

/* C's float -> integer conversion where it is defined (in range). */
static int64_t c_float_to_int(ScalarType t, double x) {
  switch (t) {
  case DT_INT8: return (int8_t)x;
  case DT_UINT8: return (uint8_t)x;
  case DT_INT16: return (int16_t)x;
  case DT_UINT16: return (uint16_t)x;
  case DT_INT32: return (int32_t)x;
  case DT_UINT32: return (uint32_t)x;
  case DT_INT64: return (int64_t)x;
  default: { /* uint64: bits of the unsigned value */
    uint64_t u = (uint64_t)x;
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
  }
  }
}

static bool in_c_range(ScalarType t, double x) { /* C's conversion is defined */
  double tx = trunc(x);
  if (t == DT_UINT64) return tx >= 0 && tx < 18446744073709551616.0;
  return tx >= (double)dt_min_i(dt_make(t)) && tx < (double)dt_max_i(dt_make(t)) + 1.0;
}

static void test_cval_cast(void **state) {
  (void)state;
  Rng r = {7};
  for (int k = 0; k < 50000; k++) {
    ScalarType from = INT_TYPES[rng_next(&r) % N_INT_TYPES];
    ScalarType to = INT_TYPES[rng_next(&r) % N_INT_TYPES];
    int64_t v = rand_int(&r, from);
    /* int -> int: C's conversion of the value (uint64 read unsigned) */
    CVal c = cval_cast((CVal){.i = v}, from, to);
    CHECK(c.i == ccast(to, v), "%s %" PRId64 " -> %s", dt_scalar_name(from), v, dt_scalar_name(to));
    /* int -> float: one rounding of the exact value */
    double want64 = from == DT_UINT64 ? (double)(uint64_t)v : (double)v;
    float want32 = from == DT_UINT64 ? (float)(uint64_t)v : (float)v;
    CHECK(cval_cast((CVal){.i = v}, from, DT_FLOAT64).f == want64, "%" PRId64 " f64", v);
    CHECK(cval_cast((CVal){.i = v}, from, DT_FLOAT32).f == (double)want32, "%" PRId64 " f32", v);
    if (fabs(want64) < 0x1p53) { /* an exact double: the reference rounds once */
      CHECK(same_value(cval_cast((CVal){.i = v}, from, DT_FLOAT16).f, ref_f16(want64)),
            "f16 %" PRId64 ": %a want %a", v, cval_cast((CVal){.i = v}, from, DT_FLOAT16).f,
            ref_f16(want64));
      CHECK(same_value(cval_cast((CVal){.i = v}, from, DT_BFLOAT16).f, ref_bf16(want64)), "bf");
    }
    CHECK(cval_to_double((CVal){.i = v}, from) == want64, "to_double %" PRId64, v);
    CHECK(cval_cast((CVal){.i = v}, from, DT_BOOL).i == (v != 0), "bool");
    /* float -> int: truncation toward zero, C where C defines it */
    double x = ldexp((double)(int64_t)rng_next(&r), -(int)(rng_next(&r) % 70));
    CVal ci = cval_cast((CVal){.f = x}, DT_FLOAT64, to);
    if (in_c_range(to, x)) CHECK(ci.i == c_float_to_int(to, x), "%a -> %s", x, dt_scalar_name(to));
    CHECK(cval_from_double(x, to).i == ci.i, "from_double %a", x);
  }
  /* out of range wraps modulo 2^64, NaN and inf give 0 (documented) */
  assert_int_equal(cval_cast((CVal){.f = -1.0}, DT_FLOAT32, DT_UINT32).i, 4294967295);
  assert_int_equal(cval_cast((CVal){.f = -1.0}, DT_FLOAT32, DT_UINT64).i, -1);
  assert_int_equal(cval_cast((CVal){.f = 300.7}, DT_FLOAT32, DT_INT8).i, 44);
  assert_int_equal(cval_cast((CVal){.f = -300.7}, DT_FLOAT64, DT_UINT8).i, 212);
  assert_int_equal(cval_cast((CVal){.f = 18446744073709551616.0 + 4096}, DT_FLOAT64, DT_INT64).i,
                   4096);
  assert_int_equal(cval_cast((CVal){.f = 9223372036854775808.0}, DT_FLOAT64, DT_INT64).i,
                   INT64_MIN);
  assert_int_equal(cval_cast((CVal){.f = 1e300}, DT_FLOAT64, DT_INT32).i, 0);
  assert_int_equal(cval_cast((CVal){.f = NAN}, DT_FLOAT64, DT_INT32).i, 0);
  assert_int_equal(cval_cast((CVal){.f = -INFINITY}, DT_FLOAT64, DT_INT64).i, 0);
  assert_int_equal(cval_cast((CVal){.f = -0.99}, DT_FLOAT64, DT_INT32).i, 0);
  assert_int_equal(cval_cast((CVal){.f = -2.5}, DT_FLOAT16, DT_INT16).i, -2);
  /* -> bool is != 0; NaN is true, -0.0 false */
  assert_int_equal(cval_cast((CVal){.f = NAN}, DT_FLOAT32, DT_BOOL).i, 1);
  assert_int_equal(cval_cast((CVal){.f = -0.0}, DT_FLOAT32, DT_BOOL).i, 0);
  assert_int_equal(cval_cast((CVal){.f = 1e-300}, DT_FLOAT64, DT_BOOL).i, 1);
  assert_int_equal(cval_cast((CVal){.i = 256}, DT_INT32, DT_BOOL).i, 1);
  /* bool -> anything is 0/1 */
  assert_true(cval_cast((CVal){.i = 1}, DT_BOOL, DT_FLOAT16).f == 1.0);
  assert_int_equal(cval_cast((CVal){.i = 1}, DT_BOOL, DT_INT64).i, 1);
  /* float -> float rounds once to the target */
  assert_true(cval_cast((CVal){.f = 0.1}, DT_FLOAT64, DT_FLOAT32).f == (double)0.1f);
  assert_true(cval_cast((CVal){.f = 70000}, DT_FLOAT32, DT_FLOAT16).f == INFINITY);
  assert_true(cval_cast((CVal){.f = 70000}, DT_FLOAT32, DT_BFLOAT16).f == 70144);
  assert_true(cval_cast((CVal){.f = 2049}, DT_FLOAT16, DT_FLOAT64).f == 2049); /* no rounding up */
  /* int -> float rounds once: 2^24 + 1 ties to even in float32 */
  assert_true(cval_cast((CVal){.i = (1 << 24) + 1}, DT_INT32, DT_FLOAT32).f == 16777216.0);
  assert_true(cval_cast((CVal){.i = (1 << 24) + 3}, DT_INT32, DT_FLOAT32).f == 16777220.0);
  assert_true(cval_cast((CVal){.i = 65519}, DT_INT32, DT_FLOAT16).f == 65504.0);
  assert_true(cval_cast((CVal){.i = 65520}, DT_INT32, DT_FLOAT16).f == INFINITY);
  assert_true(cval_cast((CVal){.i = -1}, DT_UINT64, DT_FLOAT64).f == 18446744073709551616.0);
  assert_true(cval_to_double((CVal){.i = -1}, DT_UINT64) == 18446744073709551616.0);
  assert_true(cval_to_double((CVal){.i = 5}, DT_BOOL) == 1.0);
  assert_true(cval_to_double((CVal){.f = -2.5}, DT_FLOAT16) == -2.5);
  assert_true(cval_from_double(0.1, DT_FLOAT16).f == ref_f16(0.1));
  assert_int_equal(cval_from_double(-3.9, DT_INT8).i, -3);
  /* equality by representation */
  assert_true(cval_eq((CVal){.f = NAN}, (CVal){.f = NAN}, DT_FLOAT32));
  assert_false(cval_eq((CVal){.f = 0.0}, (CVal){.f = -0.0}, DT_FLOAT32));
  assert_true(cval_eq((CVal){.i = -1}, (CVal){.i = -1}, DT_UINT64));
  assert_false(cval_eq((CVal){.i = 1}, (CVal){.i = 2}, DT_INT8));
}

/* ================================================================ constant evaluation */

static ScalarType out_of(Op op, ScalarType in) {
  return op == OP_CMPLT || op == OP_CMPNE ? DT_BOOL : in;
}

static int64_t ai(Op op, ScalarType t, int n, const int64_t *v) {
  CVal s[3] = {{.i = 0}, {.i = 0}, {.i = 0}}, r;
  for (int i = 0; i < n; i++) s[i].i = v[i];
  bool ok = alu_exec(op, out_of(op, t), t, s, &r);
  CHECK(ok, "%s %s not evaluated", op_name(op), dt_scalar_name(t));
  return r.i;
}
static int64_t ai1(Op op, ScalarType t, int64_t a) { return ai(op, t, 1, (int64_t[]){a}); }
static int64_t ai2(Op op, ScalarType t, int64_t a, int64_t b) {
  return ai(op, t, 2, (int64_t[]){a, b});
}

static double af(Op op, ScalarType t, int n, const double *v) {
  CVal s[3] = {{.f = 0}, {.f = 0}, {.f = 0}}, r;
  for (int i = 0; i < n; i++) s[i].f = v[i];
  bool ok = alu_exec(op, t, t, s, &r);
  CHECK(ok, "%s %s not evaluated", op_name(op), dt_scalar_name(t));
  return r.f;
}
static double af1(Op op, ScalarType t, double a) { return af(op, t, 1, (double[]){a}); }
static double af2(Op op, ScalarType t, double a, double b) {
  return af(op, t, 2, (double[]){a, b});
}
static bool fcmp(Op op, double a, double b) {
  CVal r;
  assert_true(alu_exec(op, DT_BOOL, DT_FLOAT32, (CVal[]){{.f = a}, {.f = b}}, &r));
  return r.i;
}

/* Floor of a / 2^k, written with division (the implementation shifts). */
static int64_t ref_floor_shr(int64_t a, int k) {
  if (k >= 63) return a < 0 ? -1 : 0;
  int64_t p = (int64_t)1 << k, q = a / p;
  return (a % p != 0 && a < 0) ? q - 1 : q;
}

/* Reference for widths <= 32: the exact result in int64 (or uint64 for
 * products), then C's conversion. */
static bool ref_small(Op op, ScalarType t, int64_t a, int64_t b, int64_t c, int64_t *r) {
  bool u = dt_is_unsigned(dt_make(t));
  switch (op) {
  case OP_NEG: *r = -a; break;
  case OP_ADD: *r = a + b; break;
  case OP_SUB: *r = a - b; break;
  case OP_MUL: *r = u ? (int64_t)((uint64_t)a * (uint64_t)b) : a * b; break;
  case OP_MULACC: *r = u ? (int64_t)((uint64_t)a * (uint64_t)b + (uint64_t)c) : a * b + c; break;
  case OP_IDIV: *r = b == 0 ? 0 : a / b; break;
  case OP_MOD: *r = b == 0 ? 0 : a % b; break;
  case OP_MAX: *r = a > b ? a : b; break;
  case OP_CMPLT: *r = a < b; return true;
  case OP_CMPNE: *r = a != b; return true;
  case OP_AND: *r = a & b; break;
  case OP_OR: *r = a | b; break;
  case OP_XOR: *r = a ^ b; break;
  case OP_SHL:
    if (b < 0) return false;
    *r = b >= 64 ? 0 : (int64_t)((uint64_t)a << b);
    break;
  case OP_SHR:
    if (b < 0) return false;
    *r = ref_floor_shr(a, (int)(b > 63 ? 63 : b));
    break;
  default: return false;
  }
  *r = ccast(t, *r);
  return true;
}

static void test_alu_int_random(void **state) {
  (void)state;
  static const Op ops[] = {OP_NEG,   OP_ADD,   OP_SUB, OP_MUL, OP_MULACC, OP_IDIV, OP_MOD, OP_MAX,
                           OP_CMPLT, OP_CMPNE, OP_AND, OP_OR,  OP_XOR,    OP_SHL,  OP_SHR};
  Rng r = {99};
  for (int ti = 0; ti < 6; ti++) { /* int8 .. uint32 */
    ScalarType t = INT_TYPES[ti];
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
      for (int k = 0; k < 3000; k++) {
        Op op = ops[oi];
        int64_t a = rand_int(&r, t), b = rand_int(&r, t), c = rand_int(&r, t), want = 0;
        if ((op == OP_SHL || op == OP_SHR) && k % 2) b = (int64_t)(rng_next(&r) % 80);
        if ((op == OP_IDIV || op == OP_MOD) && k % 5 == 0) b = 0;
        CVal res = {.i = 0};
        bool ok = alu_exec(op, out_of(op, t), t, (CVal[]){{.i = a}, {.i = b}, {.i = c}}, &res);
        bool want_ok = ref_small(op, t, a, b, c, &want);
        CHECK(ok == want_ok && (!ok || res.i == want),
              "%s %s (%" PRId64 ", %" PRId64 ", %" PRId64 ") = %" PRId64 " want %" PRId64,
              op_name(op), dt_scalar_name(t), a, b, c, res.i, want);
      }
    }
  }
}

/* int64 and uint64 against C's 64-bit arithmetic. */
static void test_alu_int64_random(void **state) {
  (void)state;
  Rng r = {1234};
  for (int k = 0; k < 100000; k++) {
    int64_t a = rand_int(&r, DT_INT64), b = rand_int(&r, DT_INT64);
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (k % 7 == 0) b = 0, ub = 0;
    CHECK((uint64_t)ai2(OP_ADD, DT_INT64, a, b) == ua + ub, "add %" PRId64 " %" PRId64, a, b);
    CHECK((uint64_t)ai2(OP_MUL, DT_INT64, a, b) == ua * ub, "mul %" PRId64 " %" PRId64, a, b);
    CHECK((uint64_t)ai2(OP_SUB, DT_UINT64, a, b) == ua - ub, "sub");
    CHECK(ai2(OP_CMPLT, DT_INT64, a, b) == (a < b), "lt %" PRId64 " %" PRId64, a, b);
    CHECK(ai2(OP_CMPLT, DT_UINT64, a, b) == (ua < ub), "ult %" PRIu64 " %" PRIu64, ua, ub);
    CHECK(ai2(OP_MAX, DT_UINT64, a, b) == (int64_t)(ua > ub ? ua : ub), "umax");
    CHECK(ai2(OP_MAX, DT_INT64, a, b) == (a > b ? a : b), "max");
    int64_t q = b == 0 ? 0 : (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
    int64_t m = b == 0 || b == -1 ? 0 : a % b;
    CHECK(ai2(OP_IDIV, DT_INT64, a, b) == q, "idiv %" PRId64 " %" PRId64, a, b);
    CHECK(ai2(OP_MOD, DT_INT64, a, b) == m, "mod %" PRId64 " %" PRId64, a, b);
    CHECK((uint64_t)ai2(OP_IDIV, DT_UINT64, a, b) == (ub ? ua / ub : 0), "udiv");
    CHECK((uint64_t)ai2(OP_MOD, DT_UINT64, a, b) == (ub ? ua % ub : 0), "umod");
    int sh = (int)(rng_next(&r) % 70);
    CHECK((uint64_t)ai2(OP_SHR, DT_UINT64, a, sh) == (sh >= 64 ? 0 : ua >> sh), "ushr");
    CHECK(ai2(OP_SHR, DT_INT64, a, sh) == ref_floor_shr(a, sh), "shr %" PRId64 " %d", a, sh);
    CHECK((uint64_t)ai2(OP_SHL, DT_INT64, a, sh) == (sh >= 64 ? 0 : ua << sh), "shl");
  }
}

static void test_alu_int_edges(void **state) {
  (void)state;
  /* division and modulo truncate toward zero; the sign of MOD is the dividend's */
  static const int64_t divs[][4] = {
      /* a, b, a // b, a % b */
      {-7, 2, -3, -1}, {7, -2, -3, 1}, {-7, -2, 3, -1}, {7, 2, 3, 1},
      {7, 0, 0, 0},    {-7, 0, 0, 0},  {0, 0, 0, 0},    {0, -3, 0, 0},
      {1, 3, 0, 1},    {-1, 3, 0, -1}, {6, -3, -2, 0},  {-6, -3, 2, 0},
  };
  for (int ti = 0; ti < N_INT_TYPES; ti++) {
    ScalarType t = INT_TYPES[ti];
    bool u = dt_is_unsigned(dt_make(t));
    for (size_t i = 0; i < sizeof divs / sizeof divs[0]; i++) {
      if (u && (divs[i][0] < 0 || divs[i][1] < 0)) continue;
      CHECK(ai2(OP_IDIV, t, divs[i][0], divs[i][1]) == divs[i][2], "%s idiv %" PRId64 " %" PRId64,
            dt_scalar_name(t), divs[i][0], divs[i][1]);
      CHECK(ai2(OP_MOD, t, divs[i][0], divs[i][1]) == divs[i][3], "%s mod %" PRId64 " %" PRId64,
            dt_scalar_name(t), divs[i][0], divs[i][1]);
    }
    /* overflow wraps at every width: max + 1 = min, min - 1 = max, -min = min */
    int64_t lo = t == DT_UINT64 ? 0 : dt_min_i(dt_make(t));
    int64_t hi = t == DT_UINT64 ? -1 : dt_max_i(dt_make(t));
    CHECK(ai2(OP_ADD, t, hi, 1) == lo, "%s max+1", dt_scalar_name(t));
    CHECK(ai2(OP_SUB, t, lo, 1) == hi, "%s min-1", dt_scalar_name(t));
    CHECK(ai1(OP_NEG, t, lo) == lo, "%s -min", dt_scalar_name(t));
    CHECK(ai2(OP_MUL, t, hi, hi) == (u ? 1 : 1), "%s max*max", dt_scalar_name(t));
    CHECK(ai2(OP_MUL, t, hi, 2) == ccast(t, u ? -2 : -2), "%s max*2", dt_scalar_name(t));
    CHECK(ai(OP_MULACC, t, 3, (int64_t[]){hi, 2, 3}) == (u ? 1 : 1), "%s max*2+3",
          dt_scalar_name(t));
    if (!u) { /* min // -1 = min (|min| wraps), min % -1 = 0 */
      CHECK(ai2(OP_IDIV, t, lo, -1) == lo, "%s min/-1", dt_scalar_name(t));
      CHECK(ai2(OP_MOD, t, lo, -1) == 0, "%s min%%-1", dt_scalar_name(t));
      CHECK(ai2(OP_IDIV, t, lo, 2) == lo / 2, "%s min/2", dt_scalar_name(t));
      CHECK(ai2(OP_SHR, t, -1, 1000) == -1, "%s -1>>1000", dt_scalar_name(t));
    }
    /* shifts: past the width the value is gone; negative amounts are not evaluated */
    CHECK(ai2(OP_SHL, t, 1, 64) == 0 && ai2(OP_SHL, t, 1, 200) == 0, "%s 1<<64", dt_scalar_name(t));
    CHECK(ai2(OP_SHR, t, hi, 64) == (u ? 0 : 0), "%s max>>64", dt_scalar_name(t));
    int w = dt_bits(dt_make(t));
    int64_t top_bit = u && w < 64 ? (int64_t)1 << (w - 1) : lo; /* 2^(w-1) as stored */
    if (t == DT_UINT64) top_bit = INT64_MIN;
    CHECK(ai2(OP_SHL, t, 1, w - 1) == top_bit, "%s 1<<(w-1)", dt_scalar_name(t));
    CVal res;
    if (!u)
      CHECK(!alu_exec(OP_SHL, t, t, (CVal[]){{.i = 1}, {.i = -1}}, &res), "%s <<-1",
            dt_scalar_name(t));
  }
  /* uint64 beyond INT64_MAX: compared, divided and shifted as unsigned */
  const int64_t U64MAX = -1, TWO63 = INT64_MIN;
  assert_int_equal(ai2(OP_CMPLT, DT_UINT64, 1, TWO63), 1);
  assert_int_equal(ai2(OP_CMPLT, DT_UINT64, U64MAX, 1), 0);
  assert_int_equal(ai2(OP_MAX, DT_UINT64, 1, U64MAX), U64MAX);
  assert_int_equal(ai2(OP_IDIV, DT_UINT64, U64MAX, 3), 6148914691236517205);
  assert_int_equal(ai2(OP_MOD, DT_UINT64, U64MAX, 10), 5);
  assert_int_equal(ai2(OP_IDIV, DT_UINT64, U64MAX, 2), INT64_MAX);
  assert_int_equal(ai2(OP_SHR, DT_UINT64, U64MAX, 60), 15);
  assert_int_equal(ai2(OP_SHR, DT_UINT64, TWO63, 63), 1);
  assert_int_equal(ai2(OP_ADD, DT_UINT64, U64MAX, 2), 1);
  assert_int_equal(ai2(OP_SHL, DT_UINT64, 1, TWO63), 0); /* amount 2^63 is not negative */
  /* int64 extremes */
  assert_int_equal(ai2(OP_IDIV, DT_INT64, INT64_MIN, -1), INT64_MIN);
  assert_int_equal(ai2(OP_MOD, DT_INT64, INT64_MIN, 3), -2); /* -9223372036854775808 % 3 */
  assert_int_equal(ai2(OP_SHR, DT_INT64, INT64_MIN, 63), -1);
  assert_int_equal(ai2(OP_SHR, DT_INT64, -7, 1), -4); /* floor, as Python's >> */
  /* small widths */
  assert_int_equal(ai2(OP_SHL, DT_INT8, 1, 7), -128);
  assert_int_equal(ai2(OP_SHL, DT_UINT8, 255, 1), 254);
  assert_int_equal(ai2(OP_ADD, DT_INT8, 100, 100), -56);
  assert_int_equal(ai2(OP_MUL, DT_INT16, 300, 300), 90000 - 65536);
  assert_int_equal(ai2(OP_MUL, DT_INT16, 200, 200), 40000 - 65536);
  assert_int_equal(ai2(OP_SUB, DT_UINT32, 0, 1), 4294967295);
  assert_int_equal(ai2(OP_IDIV, DT_INT8, -128, -1), -128);
  /* integer POW: the exact power wrapped; negative exponents are not evaluated */
  assert_int_equal(ai2(OP_POW, DT_INT32, 3, 4), 81);
  assert_int_equal(ai2(OP_POW, DT_INT32, -2, 3), -8);
  assert_int_equal(ai2(OP_POW, DT_INT32, 0, 0), 1);
  assert_int_equal(ai2(OP_POW, DT_INT32, 2, 31), INT32_MIN);
  assert_int_equal(ai2(OP_POW, DT_INT64, 2, 64), 0);
  assert_int_equal(ai2(OP_POW, DT_UINT8, 3, 5), 243);
  assert_int_equal(ai2(OP_POW, DT_INT8, 3, 5), 243 - 256);
  CVal res;
  assert_false(alu_exec(OP_POW, DT_INT32, DT_INT32, (CVal[]){{.i = 2}, {.i = -1}}, &res));
  /* bool arithmetic: computed on 0/1, truncated to bool */
  assert_int_equal(ai2(OP_ADD, DT_BOOL, 1, 1), 1);
  assert_int_equal(ai2(OP_MUL, DT_BOOL, 1, 0), 0);
  assert_int_equal(ai1(OP_NEG, DT_BOOL, 1), 1);
  assert_int_equal(ai2(OP_XOR, DT_BOOL, 1, 1), 0);
  assert_int_equal(ai2(OP_OR, DT_BOOL, 0, 1), 1);
  assert_int_equal(ai2(OP_AND, DT_BOOL, 1, 0), 0);
  assert_int_equal(ai2(OP_CMPLT, DT_BOOL, 0, 1), 1);
  assert_int_equal(ai2(OP_CMPNE, DT_BOOL, 1, 1), 0);
  assert_int_equal(ai2(OP_MAX, DT_BOOL, 0, 1), 1);
  /* WHERE picks and truncates to the output */
  assert_true(alu_exec(OP_WHERE, DT_INT8, DT_INT8, (CVal[]){{.i = 1}, {.i = -5}, {.i = 9}}, &res));
  assert_int_equal(res.i, -5);
  assert_true(alu_exec(OP_WHERE, DT_INT8, DT_INT8, (CVal[]){{.i = 0}, {.i = -5}, {.i = 9}}, &res));
  assert_int_equal(res.i, 9);
  assert_true(
      alu_exec(OP_WHERE, DT_UINT64, DT_UINT64, (CVal[]){{.i = 1}, {.i = -1}, {.i = 0}}, &res));
  assert_int_equal(res.i, -1);
  /* not evaluated: float-only ops on ints, non-ALU ops */
  assert_false(alu_exec(OP_SQRT, DT_INT32, DT_INT32, (CVal[]){{.i = 4}}, &res));
  assert_false(alu_exec(OP_FDIV, DT_INT32, DT_INT32, (CVal[]){{.i = 4}, {.i = 2}}, &res));
  assert_false(alu_exec(OP_CONST, DT_INT32, DT_INT32, (CVal[]){{.i = 4}}, &res));
  assert_false(alu_exec(OP_CAST, DT_INT32, DT_INT32, (CVal[]){{.i = 4}}, &res));
  assert_false(alu_exec(OP_ADD, DT_FLOAT32, DT_INT32, (CVal[]){{.i = 4}, {.i = 2}}, &res));
  assert_false(alu_exec(OP_ADD, DT_VOID, DT_VOID, (CVal[]){{.i = 4}, {.i = 2}}, &res));
}

static void test_alu_float_edges(void **state) {
  (void)state;
  const ScalarType F32 = DT_FLOAT32, F64 = DT_FLOAT64;
  /* NaN propagates through arithmetic; comparisons are IEEE */
  assert_true(isnan(af2(OP_ADD, F32, NAN, 1)) && isnan(af2(OP_MUL, F64, 0, NAN)));
  assert_true(isnan(af1(OP_NEG, F32, NAN)) && isnan(af2(OP_SUB, F32, INFINITY, INFINITY)));
  assert_true(isnan(af2(OP_MUL, F32, 0, INFINITY)));
  assert_false(fcmp(OP_CMPLT, NAN, 1));
  assert_false(fcmp(OP_CMPLT, 1, NAN));
  assert_true(fcmp(OP_CMPNE, NAN, NAN));
  assert_false(fcmp(OP_CMPNE, 0.0, -0.0));
  assert_false(fcmp(OP_CMPLT, -0.0, 0.0));
  assert_true(fcmp(OP_CMPLT, -INFINITY, -1e300));
  /* MAX is Python's max(a, b): a unless b > a */
  assert_true(isnan(af2(OP_MAX, F32, NAN, 1)));
  assert_true(af2(OP_MAX, F32, 1, NAN) == 1);
  assert_true(signbit(af2(OP_MAX, F32, -0.0, 0.0)));
  assert_false(signbit(af2(OP_MAX, F32, 0.0, -0.0)));
  assert_true(af2(OP_MAX, F64, -3, 2) == 2 && af2(OP_MAX, F64, 3, -INFINITY) == 3);
  /* LOG2 */
  assert_true(af1(OP_LOG2, F32, 0.0) == -INFINITY && af1(OP_LOG2, F32, -0.0) == -INFINITY);
  assert_true(isnan(af1(OP_LOG2, F32, -1)) && isnan(af1(OP_LOG2, F32, NAN)));
  assert_true(isnan(af1(OP_LOG2, F32, -INFINITY)));
  assert_true(af1(OP_LOG2, F32, 8) == 3 && af1(OP_LOG2, F32, INFINITY) == INFINITY);
  assert_true(af1(OP_LOG2, F64, ldexp(1, -1074)) == -1074);
  /* SQRT */
  assert_true(isnan(af1(OP_SQRT, F32, -1)) && isnan(af1(OP_SQRT, F32, -INFINITY)));
  assert_true(af1(OP_SQRT, F32, -0.0) == 0 && signbit(af1(OP_SQRT, F32, -0.0)));
  assert_true(af1(OP_SQRT, F32, 4) == 2 && af1(OP_SQRT, F32, INFINITY) == INFINITY);
  assert_true(af1(OP_SQRT, F32, 2) == (double)sqrtf(2.0f));
  /* RECIP */
  assert_true(af1(OP_RECIP, F32, 0.0) == INFINITY && af1(OP_RECIP, F32, -0.0) == -INFINITY);
  assert_true(af1(OP_RECIP, F32, 4) == 0.25 && af1(OP_RECIP, F32, -INFINITY) == 0);
  assert_true(signbit(af1(OP_RECIP, F32, -INFINITY)) && isnan(af1(OP_RECIP, F32, NAN)));
  assert_true(af1(OP_RECIP, DT_FLOAT16, ldexp(1, -24)) == INFINITY); /* 2^24 overflows half */
  /* SIN */
  assert_true(isnan(af1(OP_SIN, F32, INFINITY)) && isnan(af1(OP_SIN, F32, -INFINITY)));
  assert_true(isnan(af1(OP_SIN, F32, NAN)));
  assert_true(af1(OP_SIN, F64, 0) == 0 && signbit(af1(OP_SIN, F64, -0.0)));
  assert_true(af1(OP_SIN, F32, 1) == (double)(float)sin(1.0));
  /* EXP2 */
  assert_true(af1(OP_EXP2, F32, 3) == 8 && af1(OP_EXP2, F64, -1) == 0.5);
  assert_true(af1(OP_EXP2, F64, 2000) == INFINITY && af1(OP_EXP2, F64, -2000) == 0);
  assert_true(af1(OP_EXP2, F32, -INFINITY) == 0 && af1(OP_EXP2, F32, INFINITY) == INFINITY);
  assert_true(af1(OP_EXP2, F32, 128) == INFINITY && af1(OP_EXP2, F32, 127) == ldexp(1, 127));
  assert_true(af1(OP_EXP2, DT_FLOAT16, 16) == INFINITY && af1(OP_EXP2, DT_FLOAT16, 15) == 32768);
  assert_true(af1(OP_EXP2, DT_FLOAT16, -25) == 0 && isnan(af1(OP_EXP2, F32, NAN)));
  /* FDIV is IEEE */
  assert_true(af2(OP_FDIV, F32, 1, 0) == INFINITY && af2(OP_FDIV, F32, -1, 0) == -INFINITY);
  assert_true(af2(OP_FDIV, F32, 1, -0.0) == -INFINITY && isnan(af2(OP_FDIV, F32, 0, 0)));
  assert_true(af2(OP_FDIV, F32, 1, 3) == (double)(1.0f / 3.0f));
  /* POW: C's pow. 0 ** negative is +inf, but -0 ** (odd negative) is -inf (IEEE
   * 754); negative ** non-integer is NaN */
  assert_true(af2(OP_POW, F32, 0, -1) == INFINITY && af2(OP_POW, F32, -0.0, -1) == -INFINITY);
  assert_true(af2(OP_POW, F32, -0.0, -2) == INFINITY && af2(OP_POW, F32, 0, -0.5) == INFINITY);
  assert_true(isnan(af2(OP_POW, F32, -8, 1.0 / 3)));
  assert_true(af2(OP_POW, F32, 2, 10) == 1024 && af2(OP_POW, F32, -2, 3) == -8);
  assert_true(af2(OP_POW, F32, 1, NAN) == 1 && af2(OP_POW, F32, NAN, 0) == 1);
  assert_true(af2(OP_POW, F64, 10, 400) == INFINITY && af2(OP_POW, F32, 0, 0) == 1);
  /* IDIV on floats: |a| // |b| with the sign of a*b; by zero it is 0 */
  assert_true(af2(OP_IDIV, F32, 7.5, 2) == 3 && af2(OP_IDIV, F32, -7.5, 2) == -3);
  assert_true(af2(OP_IDIV, F32, 7.5, -2) == -3 && af2(OP_IDIV, F32, -7.5, -2) == 3);
  assert_true(af2(OP_IDIV, F32, 7, 0) == 0 && af2(OP_IDIV, F32, 7, -0.0) == 0);
  assert_true(af2(OP_IDIV, F64, 1, 0.1) == 9); /* Python: 1 // 0.1 == 9.0 */
  assert_true(af2(OP_IDIV, F32, 0.5, 2) == 0 && signbit(af2(OP_IDIV, F32, -0.5, 2)));
  assert_true(isnan(af2(OP_IDIV, F32, NAN, 2)) && isnan(af2(OP_IDIV, F32, INFINITY, 2)));
  assert_true(af2(OP_IDIV, F32, 5, INFINITY) == 0);
  /* MOD on floats: trunc'd to ints first (Python's int()), sign of the dividend */
  assert_true(af2(OP_MOD, F32, 7.5, 2) == 1 && af2(OP_MOD, F32, -7.5, 2) == -1);
  assert_true(af2(OP_MOD, F32, 7.9, 2.9) == 1 && af2(OP_MOD, F32, 7, -2) == 1);
  assert_true(af2(OP_MOD, F32, 5, 0.5) == 0 && af2(OP_MOD, F32, 5, 0) == 0);
  assert_true(af2(OP_MOD, F32, -0.5, 2) == 0 && !signbit(af2(OP_MOD, F32, -4, 2)));
  assert_true(af2(OP_MOD, F64, 1e300, 7) == fmod(1e300, 7)); /* exact: int(1e300) % 7 */
  CVal res;
  assert_false(alu_exec(OP_MOD, F32, F32, (CVal[]){{.f = NAN}, {.f = 2}}, &res));
  assert_false(alu_exec(OP_MOD, F32, F32, (CVal[]){{.f = 2}, {.f = INFINITY}}, &res));
  /* bitwise ops and shifts are for ints */
  assert_false(alu_exec(OP_AND, F32, F32, (CVal[]){{.f = 1}, {.f = 1}}, &res));
  assert_false(alu_exec(OP_SHL, F32, F32, (CVal[]){{.f = 1}, {.f = 1}}, &res));
  assert_false(alu_exec(OP_ADD, DT_INT32, F32, (CVal[]){{.f = 1}, {.f = 1}}, &res));
  /* MULACC on floats is fma(x, y, z), one rounding: x * y = 1 - 2^-60 exactly,
   * which two roundings would make 1 (and the result 0) */
  double x = 1 + ldexp(1, -30), y = 1 - ldexp(1, -30);
  assert_true(af(OP_MULACC, F64, 3, (double[]){x, y, -1}) == -ldexp(1, -60));
  assert_true(af(OP_MULACC, F32, 3, (double[]){2, 3, 4}) == 10);
  /* results round to the output type */
  assert_true(af2(OP_ADD, F32, 1, ldexp(1, -30)) == 1 && af2(OP_ADD, F64, 1, ldexp(1, -30)) > 1);
  assert_true(af2(OP_MUL, F32, 1e38, 10) == INFINITY);
  assert_true(af2(OP_ADD, DT_FLOAT16, 65504, 16) == INFINITY);
  assert_true(af2(OP_ADD, DT_FLOAT16, 65504, 15.9) == 65504);
  assert_true(af2(OP_ADD, DT_FLOAT16, 2048, 1) == 2048); /* tie to even */
  assert_true(af2(OP_ADD, DT_BFLOAT16, 1, ldexp(1, -8)) == 1);
  assert_true(af2(OP_ADD, DT_BFLOAT16, 256, 3) == 260);
  /* WHERE on floats keeps the picked value (NaN, -0.0) */
  assert_true(alu_exec(OP_WHERE, F32, F32, (CVal[]){{.i = 1}, {.f = -0.0}, {.f = 1}}, &res));
  assert_true(res.f == 0 && signbit(res.f));
  assert_true(alu_exec(OP_WHERE, F32, F32, (CVal[]){{.i = 0}, {.f = -0.0}, {.f = NAN}}, &res));
  assert_true(isnan(res.f));
  assert_true(alu_exec(OP_WHERE, DT_FLOAT16, F64, (CVal[]){{.i = 1}, {.f = 0.1}, {.f = 1}}, &res));
  assert_true(res.f == ref_f16(0.1));
  /* a bool output tests != 0 (Python's bool()) */
  assert_true(alu_exec(OP_ADD, DT_BOOL, F32, (CVal[]){{.f = 0.5}, {.f = -0.5}}, &res));
  assert_int_equal(res.i, 0);
  assert_true(alu_exec(OP_ADD, DT_BOOL, F32, (CVal[]){{.f = NAN}, {.f = 0}}, &res));
  assert_int_equal(res.i, 1);
}

/* Random float arithmetic against C's native float and double arithmetic, and
 * the frexp reference for half and bfloat16. */
static void test_alu_float_random(void **state) {
  (void)state;
  Rng r = {2024};
  for (int k = 0; k < 100000; k++) {
    float a = bitsf((uint32_t)rng_next(&r)), b = bitsf((uint32_t)rng_next(&r));
    if (k % 2)
      a = ldexpf((float)((int64_t)(rng_next(&r) % 2001) - 1000), -(int)(rng_next(&r) % 12));
    if (k % 3)
      b = ldexpf((float)((int64_t)(rng_next(&r) % 2001) - 1000), -(int)(rng_next(&r) % 12));
    double da = a, db = b;
    CHECK(same_value(af2(OP_ADD, DT_FLOAT32, da, db), a + b), "%a + %a", da, db);
    CHECK(same_value(af2(OP_SUB, DT_FLOAT32, da, db), a - b), "%a - %a", da, db);
    CHECK(same_value(af2(OP_MUL, DT_FLOAT32, da, db), a * b), "%a * %a", da, db);
    CHECK(same_value(af2(OP_FDIV, DT_FLOAT32, da, db), a / b), "%a / %a", da, db);
    CHECK(same_value(af1(OP_SQRT, DT_FLOAT32, da), a >= 0 || isnan(a) ? sqrtf(a) : NAN), "sqrt");
    CHECK(same_value(af2(OP_MAX, DT_FLOAT32, da, db), b > a ? b : a), "max %a %a", da, db);
    CHECK(fcmp(OP_CMPLT, da, db) == (a < b) && fcmp(OP_CMPNE, da, db) == (a != b), "cmp");
    CHECK(same_value(af2(OP_ADD, DT_FLOAT64, da, db), da + db), "f64 add");
    CHECK(same_value(af2(OP_MUL, DT_FLOAT64, da, db), da * db), "f64 mul");
    /* half and bfloat16 operands are values of their type */
    double ha = ref_f16(da), hb = ref_f16(db), ba = ref_bf16(da), bb = ref_bf16(db);
    CHECK(same_value(af2(OP_ADD, DT_FLOAT16, ha, hb), ref_f16(ha + hb)), "f16 %a + %a", ha, hb);
    CHECK(same_value(af2(OP_MUL, DT_FLOAT16, ha, hb), ref_f16(ha * hb)), "f16 %a * %a", ha, hb);
    CHECK(same_value(af2(OP_ADD, DT_BFLOAT16, ba, bb), ref_bf16(ba + bb)), "bf16 %a + %a", ba, bb);
    CHECK(same_value(af2(OP_FDIV, DT_BFLOAT16, ba, bb), ref_bf16(ba / bb)), "bf16 %a / %a", ba, bb);
  }
}

/* ================================================================ uop_eval */

static void test_eval_basic(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  assert_non_null(ctx);
  UOp *x = uop_var(ctx, "x", -100, 100);
  /* ((x*3 + 7) // 2) % 5 for every x, against C on int32 */
  UOp *e = uop_mod_c(uop_idiv_c(uop_add_c(uop_mul_c(x, 3), 7), 2), 5);
  for (int64_t v = -100; v <= 100; v++) {
    CVal out;
    assert_true(uop_eval(e, 1, &x, &(CVal){.i = v}, &out));
    CHECK(out.i == ((v * 3 + 7) / 2) % 5, "x=%" PRId64 " -> %" PRId64, v, out.i);
  }
  /* an unbound variable fails; a constant needs no binding */
  CVal out;
  assert_false(uop_eval(e, 0, NULL, NULL, &out));
  UOp *c = uop_const_int(ctx, DT(INT8), 300);
  assert_true(uop_eval(c, 0, NULL, NULL, &out));
  assert_int_equal(out.i, 44);
  /* variables are truncated to their dtype */
  assert_true(uop_eval(uop_add_c(x, 1), 1, &x, &(CVal){.i = 0x100000005ll}, &out));
  assert_int_equal(out.i, 6);
  /* RANGE and SPECIAL bind like variables; the RANGE's end is not evaluated */
  UOp *n = uop_var(ctx, "n", 1, 10);
  UOp *rng = uop_range(ctx, n, 0);
  UOp *sp = uop_new(ctx, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("gidx0", 0, 15));
  UOp *e2 = uop_add(uop_mul_c(sp, 10), rng);
  assert_true(uop_eval(e2, 2, (UOp *[]){rng, sp}, (CVal[]){{.i = 4}, {.i = 3}}, &out));
  assert_int_equal(out.i, 34);
  assert_false(uop_eval(e2, 1, &rng, (CVal[]){{.i = 4}}, &out));
  assert_true(uop_eval(rng, 1, &rng, (CVal[]){{.i = 4}}, &out)); /* the root itself bound */
  assert_int_equal(out.i, 4);
  /* CAST, comparisons, WHERE and float ops */
  UOp *xf = uop_cast(x, DT(FLOAT32));
  UOp *half = uop_const_float(ctx, DT(FLOAT32), 0.5);
  UOp *lt = uop_lt(xf, uop_const_float(ctx, DT(FLOAT32), 0));
  UOp *w = uop_where(lt, uop_neg(xf), uop_mul(xf, half));
  UOp *s = uop_alu1(OP_SQRT, w);
  for (int64_t v = -100; v <= 100; v += 7) {
    assert_true(uop_eval(s, 1, &x, &(CVal){.i = v}, &out));
    float want = v < 0 ? sqrtf((float)-v) : sqrtf((float)v * 0.5f);
    CHECK(out.f == (double)want, "x=%" PRId64 ": %a want %a", v, out.f, (double)want);
  }
  UOp *back = uop_cast(uop_mul(xf, uop_const_float(ctx, DT(FLOAT32), 2.75)), DT(INT16));
  assert_true(uop_eval(back, 1, &x, &(CVal){.i = -3}, &out));
  assert_int_equal(out.i, -8); /* trunc(-8.25) */
  /* ops uop_eval does not evaluate */
  UOp *vec = uop_new(ctx, OP_VECTORIZE, dt_vec(DT(INT32), 2), 2, (UOp *[]){x, x}, arg_none());
  assert_false(uop_eval(vec, 1, &x, &(CVal){.i = 1}, &out));
  UOp *sink = uop_sink(ctx, 1, &e);
  assert_false(uop_eval(sink, 1, &x, &(CVal){.i = 1}, &out));
  uctx_free(ctx);
}

/* A graph with 2^300 paths: evaluation must visit each node once. */
static void test_eval_shared(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  UOp *x = uop_var(ctx, "x", 0, 1000);
  UOp *a = x;
  for (int i = 0; i < 300; i++) a = uop_add(uop_mul(a, a), uop_add_c(a, i)); /* a*a + (a+i) */
  uint32_t want = 0;
  for (int64_t v = 0; v < 5; v++) {
    uint32_t ref = (uint32_t)v;
    for (uint32_t i = 0; i < 300; i++) ref = ref * ref + (ref + i);
    want = ref;
    CVal out;
    assert_true(uop_eval(a, 1, &x, &(CVal){.i = v}, &out));
    CHECK(out.i == (int32_t)want, "x=%" PRId64 ": %" PRId64 " want %" PRId32, v, out.i,
          (int32_t)want);
  }
  /* a long chain: evaluation is not recursive */
  UOp *c = x;
  for (int i = 0; i < 100000; i++) c = uop_add_c(c, 1);
  CVal out;
  assert_true(uop_eval(c, 1, &x, &(CVal){.i = 5}, &out));
  assert_int_equal(out.i, 100005);
  uctx_free(ctx);
}

/* ================================================================ interning */

static void test_intern_consts_and_args(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  /* same inputs, same pointer */
  assert_ptr_equal(uop_const_int(ctx, DT(INT32), 5), uop_const_int(ctx, DT(INT32), 5));
  assert_ptr_equal(uop_const_int(ctx, DT(FLOAT32), 1), uop_const_float(ctx, DT(FLOAT32), 1.0));
  assert_ptr_equal(uop_const_int(ctx, DT(INT8), 300), uop_const_int(ctx, DT(INT8), 44));
  assert_ptr_equal(uop_const_float(ctx, DT(FLOAT16), 0.1),
                   uop_const_float(ctx, DT(FLOAT16), ref_f16(0.1)));
  /* different value or dtype, different node */
  assert_ptr_not_equal(uop_const_int(ctx, DT(INT32), 5), uop_const_int(ctx, DT(INT32), 6));
  assert_ptr_not_equal(uop_const_int(ctx, DT(INT32), 5), uop_const_int(ctx, DT(INT64), 5));
  assert_ptr_not_equal(uop_const_int(ctx, DT(INT32), 1), uop_const_int(ctx, DT(BOOL), 1));
  assert_ptr_not_equal(uop_const_int(ctx, DT(INT32), 1), uop_const_int(ctx, DT(FLOAT32), 1));
  /* float args by bit pattern: NaN with NaN, -0.0 apart from 0.0 */
  assert_ptr_equal(uop_const_float(ctx, DT(FLOAT32), NAN), uop_const_float(ctx, DT(FLOAT32), NAN));
  assert_ptr_equal(uop_const_float(ctx, DT(FLOAT64), NAN), uop_const_float(ctx, DT(FLOAT64), NAN));
  assert_ptr_not_equal(uop_const_float(ctx, DT(FLOAT32), 0.0),
                       uop_const_float(ctx, DT(FLOAT32), -0.0));
  assert_ptr_equal(uop_const_float(ctx, DT(FLOAT32), -0.0),
                   uop_const_float(ctx, DT(FLOAT32), -0.0));
  /* constants are stored truncated to the dtype */
  assert_int_equal(uop_const_val(uop_const_int(ctx, DT(UINT8), -1)).i, 255);
  assert_true(uop_const_val(uop_const_float(ctx, DT(FLOAT32), 0.1)).f == (double)0.1f);
  assert_true(uop_const_double(uop_const_int(ctx, DT(UINT64), -1)) == 18446744073709551616.0);

  /* int tuples compare by value, from distinct (stack) arrays */
  int64_t p1[3] = {2, 0, 1}, p2[3] = {2, 0, 1}, p3[3] = {2, 1, 0};
  UOp *x = uop_var(ctx, "x", 0, 10);
  UOp *a = uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(3, p1));
  assert_ptr_equal(a, uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(3, p2)));
  assert_ptr_not_equal(a, uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(3, p3)));
  assert_ptr_not_equal(a, uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(2, p1)));
  assert_ptr_not_equal(uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(0, p1)),
                       uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_none()));
  /* the node owns a copy of its arg */
  p1[0] = 99;
  assert_int_equal(a->arg.ints.v[0], 2);
  assert_ptr_equal(a, uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(3, p2)));
  /* variables: name, lo and hi all count */
  char vn[4] = "x";
  assert_ptr_equal(x, uop_var(ctx, vn, 0, 10));
  assert_ptr_not_equal(x, uop_var(ctx, "y", 0, 10));
  assert_ptr_not_equal(x, uop_var(ctx, "x", 1, 10));
  assert_ptr_not_equal(x, uop_var(ctx, "x", 0, 11));
  /* reduce args: op and axes */
  int64_t ax[2] = {0, 2}, ax2[2] = {0, 2};
  UOp *r1 = uop_new(ctx, OP_REDUCE_AXIS, DT(INT32), 1, &x, arg_reduce(OP_ADD, 2, ax));
  assert_ptr_equal(r1, uop_new(ctx, OP_REDUCE_AXIS, DT(INT32), 1, &x, arg_reduce(OP_ADD, 2, ax2)));
  assert_ptr_not_equal(r1,
                       uop_new(ctx, OP_REDUCE_AXIS, DT(INT32), 1, &x, arg_reduce(OP_MAX, 2, ax)));
  assert_ptr_not_equal(r1,
                       uop_new(ctx, OP_REDUCE_AXIS, DT(INT32), 1, &x, arg_reduce(OP_ADD, 1, ax)));
  /* an int arg is not an equal-valued float arg */
  assert_ptr_not_equal(uop_new(ctx, OP_CONST, DT(INT32), 0, NULL, arg_int(1)),
                       uop_new(ctx, OP_CONST, DT(INT32), 0, NULL, arg_float(1.0)));
  /* arg_eq / arg_hash agree with interning */
  Arg f1 = arg_float(NAN), f2 = arg_float(NAN), z1 = arg_float(0.0), z2 = arg_float(-0.0);
  assert_true(arg_eq(&f1, &f2) && arg_hash(&f1) == arg_hash(&f2));
  assert_false(arg_eq(&z1, &z2));
  Arg i1 = arg_ints(3, p2), i2 = arg_ints(3, (int64_t[]){2, 0, 1});
  assert_true(arg_eq(&i1, &i2) && arg_hash(&i1) == arg_hash(&i2));
  uctx_free(ctx);
}

static void test_intern_sources(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  UOp *x = uop_var(ctx, "x", 0, 10), *y = uop_var(ctx, "y", 0, 10);
  UOp *xy = uop_add(x, y);
  assert_ptr_equal(xy, uop_add(x, y));
  assert_ptr_not_equal(xy, uop_add(y, x)); /* source order matters */
  assert_ptr_not_equal(xy, uop_mul(x, y)); /* op matters */
  assert_ptr_not_equal(xy, uop_add(x, x));
  assert_ptr_equal(uop_add(xy, xy), uop_add(uop_add(x, y), uop_add(x, y))); /* deep */
  assert_ptr_not_equal(uop_sink(ctx, 1, &x), uop_sink(ctx, 2, (UOp *[]){x, x}));
  /* replace_* builds the same node as building it directly */
  assert_ptr_equal(uop_replace_src(xy, 2, (UOp *[]){y, x}), uop_add(y, x));
  assert_ptr_equal(uop_replace_src(xy, 2, (UOp *[]){x, y}), xy);
  assert_ptr_equal(uop_replace_dtype(xy, DT(INT32)), xy);
  assert_ptr_not_equal(uop_replace_dtype(xy, DT(INT64)), xy);
  assert_ptr_equal(uop_replace_arg(x, arg_var("x", 0, 10)), x);
  assert_ptr_equal(uop_replace_arg(x, arg_var("y", 0, 10)), y);
  assert_ptr_equal(uop_cast(x, DT(INT32)), x);
  assert_ptr_equal(uop_cast(x, DT(FLOAT32)), uop_cast(x, DT(FLOAT32)));
  /* ALU result dtypes: bool for comparisons, else the last source's */
  assert_true(dt_eq(uop_lt(x, y)->dtype, DT(BOOL)));
  assert_true(dt_eq(uop_where(uop_lt(x, y), x, y)->dtype, DT(INT32)));
  /* two contexts never share nodes */
  UCtx *ctx2 = uctx_new();
  UOp *x2 = uop_var(ctx2, "x", 0, 10);
  assert_ptr_not_equal(x, x2);
  assert_ptr_equal(x2, uop_var(ctx2, "x", 0, 10));
  uctx_free(ctx2);
  uctx_free(ctx);
}

/* ================================================================ refcounts and pools */

/* A random expression over x with ~n nodes. */
static UOp *random_expr(UOp *x, Rng *r, int n) {
  UOp **pool = malloc((size_t)n * sizeof *pool);
  int have = 0;
  pool[have++] = x;
  while (have < n) {
    UOp *a = pool[rng_next(r) % (uint64_t)have], *b = pool[rng_next(r) % (uint64_t)have];
    switch (rng_next(r) % 4) {
    case 0: pool[have++] = uop_add(a, b); break;
    case 1: pool[have++] = uop_mul(a, b); break;
    case 2: pool[have++] = uop_add_c(a, (int64_t)(rng_next(r) % 50)); break;
    default: pool[have++] = uop_max(a, b); break;
    }
  }
  UOp *root = pool[n - 1];
  free(pool);
  return root;
}

static void test_refcount_pools(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  assert_int_equal(uctx_live(ctx), 0);
  /* x + 1: three nodes, alive while the pool holds them */
  size_t m = uop_pool_mark(ctx);
  UOp *x = uop_var(ctx, "x", 0, 10);
  UOp *e = uop_add_c(x, 1);
  assert_int_equal(uctx_live(ctx), 3);
  uop_retain(e);
  uop_pool_drain(ctx, m);
  assert_int_equal(uctx_live(ctx), 3); /* e keeps x and 1 */
  assert_int_equal(e->refs, 1);
  uop_release(e);
  assert_int_equal(uctx_live(ctx), 0); /* released all the way down */

  /* a big graph, built and drained many times, returns to the baseline */
  Rng r = {5};
  for (int round = 0; round < 20; round++) {
    m = uop_pool_mark(ctx);
    UOp *v = uop_var(ctx, "v", 0, 100);
    UOp *root = random_expr(v, &r, 2000);
    assert_non_null(root);
    assert_true(uctx_live(ctx) > 100);
    uop_pool_drain(ctx, m);
    CHECK(uctx_live(ctx) == 0, "round %d: %zu live", round, uctx_live(ctx));
  }

  /* nested pools: the inner drain keeps what the outer pool holds */
  size_t outer = uop_pool_mark(ctx);
  UOp *y = uop_var(ctx, "y", 0, 10);
  size_t inner = uop_pool_mark(ctx);
  UOp *t = uop_mul_c(uop_add_c(y, 2), 3);
  UOp *kept = uop_pool_drain_keep(ctx, inner, t);
  assert_ptr_equal(kept, t);
  assert_int_equal(uctx_live(ctx), 5);                /* y, 2, y+2, 3, (y+2)*3 */
  assert_ptr_equal(uop_mul_c(uop_add_c(y, 2), 3), t); /* still interned */
  size_t inner2 = uop_pool_mark(ctx);
  UOp *tmp = uop_add(t, t);
  assert_int_equal(uctx_live(ctx), 6);
  uop_pool_drain(ctx, inner2);
  assert_int_equal(uctx_live(ctx), 5);
  (void)tmp;
  /* a node retained across pools outlives the outer drain */
  UOp *held = uop_retain(uop_add_c(t, 7));
  uop_pool_drain(ctx, outer);
  assert_int_equal(uctx_live(ctx), 7); /* held, 7, and t's five */
  /* rebuilding a held node gives the same pointer and one more reference */
  m = uop_pool_mark(ctx);
  UOp *y2 = uop_var(ctx, "y", 0, 10);
  assert_ptr_equal(uop_add_c(uop_mul_c(uop_add_c(y2, 2), 3), 7), held);
  assert_int_equal(held->refs, 2);
  uop_pool_drain(ctx, m);
  assert_int_equal(held->refs, 1);
  uop_release(held);
  assert_int_equal(uctx_live(ctx), 0);
  /* release and retain accept NULL */
  uop_release(NULL);
  assert_null(uop_retain(NULL));
  uctx_free(ctx);
  uctx_free(NULL);
}

/* uctx_free frees what is still alive: retained nodes, undrained pools (ASan
 * reports a leak if not). */
static void test_refcount_free_live(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  Rng r = {77};
  UOp *x = uop_var(ctx, "x", 0, 9);
  uop_retain(random_expr(x, &r, 500));
  uop_retain(uop_retain(uop_add_c(x, 1000)));
  int64_t p[2] = {1, 0};
  uop_retain(uop_new(ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(2, p)));
  uop_retain(uop_var(ctx, "an owned name", 0, 1));
  size_t m = uop_pool_mark(ctx);
  (void)m; /* never drained */
  random_expr(x, &r, 300);
  assert_true(uctx_live(ctx) > 0);
  uctx_free(ctx);
}

/* ================================================================ toposort */

/* Position of u in order[0..n), or -1. */
static long pos_of(UOp **order, size_t n, const UOp *u) {
  for (size_t i = 0; i < n; i++)
    if (order[i] == u) return (long)i;
  return -1;
}

/* Reachable nodes by plain recursion (small graphs), counted into seen[]. */
static void mark_reachable(UOp *u, UOp **seen, size_t *nseen) {
  for (size_t i = 0; i < *nseen; i++)
    if (seen[i] == u) return;
  seen[(*nseen)++] = u;
  for (uint32_t i = 0; i < u->nsrc; i++) mark_reachable(u->src[i], seen, nseen);
}

static void check_topo(UOp *root) {
  size_t n = 0;
  UOp **order = uop_toposort(root, &n);
  assert_non_null(order);
  UOp **seen = malloc(4096 * sizeof *seen);
  size_t nseen = 0;
  mark_reachable(root, seen, &nseen);
  CHECK(n == nseen, "toposort has %zu nodes, %zu reachable", n, nseen);
  assert_ptr_equal(order[n - 1], root);
  for (size_t i = 0; i < n; i++) {
    CHECK(pos_of(seen, nseen, order[i]) >= 0, "node %zu not reachable", i);
    CHECK(pos_of(order, n, order[i]) == (long)i, "node %zu listed twice", i);
    for (uint32_t k = 0; k < order[i]->nsrc; k++) {
      long p = pos_of(order, n, order[i]->src[k]);
      CHECK(p >= 0 && p < (long)i, "source %u of node %zu at %ld", k, i, p);
    }
  }
  free(seen);
  free(order);
}

static void test_toposort(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  /* a single node */
  UOp *x = uop_var(ctx, "x", 0, 10);
  size_t n;
  UOp **order = uop_toposort(x, &n);
  assert_int_equal(n, 1);
  assert_ptr_equal(order[0], x);
  free(order);
  /* a diamond: d = (x+1) * (x*2); x listed once, before both arms */
  UOp *b = uop_add_c(x, 1), *c = uop_mul_c(x, 2), *d = uop_mul(b, c);
  check_topo(d);
  order = uop_toposort(d, &n);
  assert_int_equal(n, 6); /* x, 1, b, 2, c, d */
  assert_true(pos_of(order, n, x) < pos_of(order, n, b) &&
              pos_of(order, n, x) < pos_of(order, n, c));
  free(order);
  /* a node that is both a direct and an indirect source */
  check_topo(uop_add(x, uop_add(x, x)));
  /* random DAGs of distinct nodes with 0..3 random earlier sources */
  Rng r = {31337};
  for (int round = 0; round < 30; round++) {
    size_t m = uop_pool_mark(ctx);
    UOp *nodes[400];
    int cnt = 0;
    for (int i = 0; i < 400; i++) {
      int ns = cnt ? (int)(rng_next(&r) % 4) : 0;
      UOp *src[3];
      for (int k = 0; k < ns; k++) src[k] = nodes[rng_next(&r) % (uint64_t)cnt];
      nodes[cnt++] = uop_new(ctx, OP_SINK, DT(INT32), ns, src, arg_int(i));
    }
    UOp *roots[5];
    for (int k = 0; k < 5; k++) roots[k] = nodes[400 - 1 - (int)(rng_next(&r) % 50)];
    check_topo(uop_sink(ctx, 5, roots));
    uop_pool_drain(ctx, m);
  }
  /* a deep chain: the sort is not recursive */
  UOp *chain = x;
  for (int i = 0; i < 200000; i++) chain = uop_alu1(OP_NEG, chain);
  order = uop_toposort(chain, &n);
  assert_non_null(order);
  assert_int_equal(n, 200001);
  assert_ptr_equal(order[0], x);
  assert_ptr_equal(order[1]->src[0], x);
  free(order);
  uctx_free(ctx);
}

/* ================================================================ printer */

static size_t count_substr(const char *s, const char *needle) {
  size_t c = 0, len = strlen(needle);
  for (const char *p = strstr(s, needle); p; p = strstr(p + len, needle)) c++;
  return c;
}

/* References "xN" that are not the definition "xN:=": preceded by a space, not
 * followed by a digit or ':'. Returns how many; *first gets the first one. */
static size_t count_refs(const char *s, int id, const char **first) {
  char tok[16];
  snprintf(tok, sizeof tok, " x%d", id);
  size_t c = 0, len = strlen(tok);
  *first = NULL;
  for (const char *p = strstr(s, tok); p; p = strstr(p + 1, tok)) {
    char next = p[len];
    if (next == ':' || (next >= '0' && next <= '9')) continue;
    if (!c++) *first = p;
  }
  return c;
}

static void test_printer(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  UOp *x = uop_var(ctx, "x", 0, 10);
  UOp *s = uop_add_c(x, 1); /* used three times below */
  UOp *root = uop_mul(uop_mul(s, s), uop_max(s, uop_const_int(ctx, DT(INT32), 7)));
  char *txt = uop_pretty(root);
  assert_non_null(txt);
  size_t n;
  UOp **order = uop_toposort(root, &n);
  /* every node printed once */
  CHECK(count_substr(txt, "UOp(") == n, "%zu nodes printed, %zu in graph:\n%s",
        count_substr(txt, "UOp("), n, txt);
  free(order);
  assert_int_equal(count_substr(txt, "Ops.ADD"), 1);
  assert_int_equal(count_substr(txt, "Ops.MUL"), 2);
  assert_int_equal(count_substr(txt, "Ops.DEFINE_VAR"), 1);
  assert_int_equal(count_substr(txt, "Ops.CONST"), 2);
  /* the shared ADD is named at its definition and referred to twice after */
  const char *def = strstr(txt, ":=UOp(Ops.ADD");
  assert_non_null(def);
  const char *p = def;
  while (p > txt && p[-1] >= '0' && p[-1] <= '9') p--;
  assert_true(p > txt && p[-1] == 'x');
  int id = atoi(p);
  const char *first;
  size_t refs = count_refs(txt, id, &first);
  CHECK(refs == 2, "x%d referred to %zu times:\n%s", id, refs, txt);
  assert_true(first > def); /* references come after the definition */
  /* nodes used once are not named */
  assert_int_equal(count_substr(txt, ":="), 1);
  free(txt);

  /* a tree with no sharing names nothing */
  txt = uop_pretty(uop_add(uop_var(ctx, "a", 0, 1), uop_var(ctx, "b", 0, 1)));
  assert_non_null(txt);
  assert_int_equal(count_substr(txt, ":="), 0);
  assert_int_equal(count_substr(txt, "UOp("), 3);
  assert_non_null(strstr(txt, "'a'"));
  free(txt);
  uctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_facts),
      cmocka_unit_test(test_dtype_sizes_names),
      cmocka_unit_test(test_dtype_promote),
      cmocka_unit_test(test_dtype_reduce_rules),
      cmocka_unit_test(test_dtype_bounds),
      cmocka_unit_test(test_dtype_truncate_int),
      cmocka_unit_test(test_dtype_truncate_float),
      cmocka_unit_test(test_half_exhaustive),
      cmocka_unit_test(test_half_rounding),
      cmocka_unit_test(test_cval_cast),
      cmocka_unit_test(test_alu_int_random),
      cmocka_unit_test(test_alu_int64_random),
      cmocka_unit_test(test_alu_int_edges),
      cmocka_unit_test(test_alu_float_edges),
      cmocka_unit_test(test_alu_float_random),
      cmocka_unit_test(test_eval_basic),
      cmocka_unit_test(test_eval_shared),
      cmocka_unit_test(test_intern_consts_and_args),
      cmocka_unit_test(test_intern_sources),
      cmocka_unit_test(test_refcount_pools),
      cmocka_unit_test(test_refcount_free_live),
      cmocka_unit_test(test_toposort),
      cmocka_unit_test(test_printer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
