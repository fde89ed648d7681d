/* Reference helpers for the op suites (tests/test_ops.c).
 *
 * Everything here is written from tvk.h's semantics alone, with plain loops in
 * double (floats) or 64-bit integer (ints) arithmetic; nothing calls into tvk
 * except the enums and tvk_dtype_name/tvk_dtype_size. The pieces:
 * - dtype facts (float / signed / unsigned, width, range, epsilon);
 * - exact conversions: rounding a double or a 64-bit integer to the nearest
 *   value of a float dtype (ties to even, overflow to inf), wrapping an integer
 *   to a width, and packing/unpacking tvk's storage format (float16/bfloat16 as
 *   16-bit patterns, bool as one byte);
 * - RArr: values with a shape, and the movement ops and broadcasting done by
 *   index loops;
 * - casts and reductions as tvk.h defines them (result dtypes, identities);
 * - a fixed-seed PRNG (xorshift64*) and input generation: special values of a
 *   domain first, random values after;
 * - the comparison that prints the first mismatch with its index and inputs.
 * The elementwise ops' meanings sit next to their op tables in test_ops.c. */
#ifndef TVK_TESTS_REF_H
#define TVK_TESTS_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tvk.h"

#define REF_NDT 13 /* dtypes in tvk_dtype */

/* ---------------------------------------------------------------- dtypes */

bool ref_is_float(tvk_dtype dt);
bool ref_is_signed(tvk_dtype dt);   /* int8..int64 (not bool, not floats) */
bool ref_is_unsigned(tvk_dtype dt); /* uint8..uint64 (not bool) */
bool ref_is_int(tvk_dtype dt);      /* signed or unsigned, not bool */
int ref_bits(tvk_dtype dt);         /* storage width in bits (bool: 8) */
int64_t ref_int_min(tvk_dtype dt);  /* ints and bool */
uint64_t ref_int_max(tvk_dtype dt); /* ints and bool */
double ref_float_max(tvk_dtype dt); /* largest finite value of a float dtype */
double ref_eps(tvk_dtype dt);       /* 2^-mantissa bits: the spacing just above 1 */
const char *ref_dt(tvk_dtype dt);   /* short name for messages */

/* ---------------------------------------------------------------- conversions */

/* x wrapped to dt's width: two's complement for signed, modulo for unsigned;
 * bool: x != 0. The result is the value, uint64 as its bit pattern. */
int64_t ref_wrap(tvk_dtype dt, uint64_t x);
/* The float dtype's value nearest x (ties to even; beyond the largest finite
 * value by at least half an ulp: inf). NaN and inf pass through. */
double ref_round(tvk_dtype dt, double x);
/* The same for an integer (the exact value, not via double: no double rounding). */
double ref_round_int(tvk_dtype dt, int64_t v, bool is_unsigned);

/* One element: f for float dtypes, i for ints and bool (uint64 as bit pattern). */
typedef union {
  double f;
  int64_t i;
} RVal;

/* An element as a double (uint64 read as unsigned). */
double ref_as_double(tvk_dtype dt, RVal v);

/* ---------------------------------------------------------------- arrays */

typedef struct {
  tvk_dtype dt;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
  int64_t n; /* number of elements */
  RVal *v;   /* row-major */
} RArr;

RArr ref_new(tvk_dtype dt, int ndim, const int64_t *shape);
void ref_free(RArr *a);
/* tvk's storage bytes of a (malloc'd; at least 1 byte so it is never NULL). */
void *ref_pack(const RArr *a);
/* Values from tvk's storage bytes into a (dtype and shape already set). */
void ref_unpack(RArr *a, const void *bytes);
/* Shape as "(3,4)" into buf. */
const char *ref_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
/* Element as text ("nan", "-3", "0x7c00 (inf)" style for 16-bit floats). */
const char *ref_val_str(tvk_dtype dt, RVal v, char *buf, size_t n);

/* Movement ops by index loops; each returns a new array (free it). */
RArr ref_reshape(const RArr *a, int ndim, const int64_t *shape);
RArr ref_permute(const RArr *a, const int *order);
RArr ref_expand(const RArr *a, int ndim, const int64_t *shape);
RArr ref_pad(const RArr *a, const int64_t (*pads)[2], RVal value);
RArr ref_shrink(const RArr *a, const int64_t (*ranges)[2]);
RArr ref_flip(const RArr *a, int naxes, const int *axes);

/* numpy broadcast shape of n shapes; false when they do not broadcast. */
bool ref_broadcast(int n, const RArr *const *xs, int *ndim, int64_t *shape);

/* ---------------------------------------------------------------- casts */

/* v of dtype from as dtype to, per tvk_cast: floats truncate toward zero into
 * ints (callers keep inputs in range: out of range is unspecified), ints wrap,
 * anything -> bool is x != 0 (NaN too), to floats rounds to nearest even (from
 * ints exactly, with no detour through double). */
RVal ref_cast_elem(tvk_dtype from, tvk_dtype to, RVal v);
RArr ref_cast(const RArr *a, tvk_dtype to);
/* a < b for values of dt (uint64 compared unsigned). */
bool ref_lt_int(tvk_dtype dt, int64_t a, int64_t b);

/* ---------------------------------------------------------------- reductions */

typedef enum { R_SUM, R_PROD, R_MAX, R_MIN, R_MEAN } RKind;

/* Result dtype per tvk.h: sum/prod widen bool and narrow ints to 32 bits, mean
 * of non-floats is float32, max/min keep the dtype. */
tvk_dtype ref_reduce_dtype(RKind k, tvk_dtype dt);
/* A float sum over n elements may be accumulated in any order (threads, tree):
 * each of its additions rounds in the accumulator's precision (float32 for
 * float16/bfloat16/float32 inputs, double for float64). Random rounding errors
 * grow like sqrt(n); the allowance is twice (1 + sqrt(n)) accumulator epsilons
 * times sum |x|, about ten standard deviations at a million elements. */
double ref_sum_allowance(tvk_dtype in, int64_t n, double sum_abs);
/* The expected reduction of a over axes (naxes 0: all; negative from the end),
 * identities for empty reductions, and per-element allowances for float
 * summation order (sum, mean) and rounding (prod) into *allow (malloc'd). */
RArr ref_reduce(RKind k, const RArr *a, int naxes, const int *axes, bool keepdim, double **allow);

/* ---------------------------------------------------------------- PRNG */

typedef struct {
  uint64_t s;
} Rng;

uint64_t rng_next(Rng *r);
/* Uniform in [lo, hi] for integers; [lo, hi) for doubles. */
int64_t rng_int(Rng *r, int64_t lo, int64_t hi);
double rng_unif(Rng *r, double lo, double hi);

/* ---------------------------------------------------------------- comparison */

/* |got - exp| <= atol + rtol * |exp| (+ extra[i] when extra is not NULL: a
 * per-element allowance, e.g. for summation error). NaN matches only NaN, an
 * infinity only itself; with zero_sign a zero only a zero of the same sign.
 * Integers and bool compare exactly whatever the tol. */
typedef struct {
  double rtol, atol;
  bool zero_sign;
} Tol;

/* Compares got with exp element by element. On a mismatch prints
 *   FAIL <what>: <dtype> <shape>: <k> of <n> differ; first at flat i [i0,i1,..]:
 *        got G, expected E (inputs: ...)
 * naming each input at that index (ins: arrays of exp's shape, or NULL), and
 * returns false. */
bool ref_compare(const char *what, const RArr *got, const RArr *exp, Tol tol, const double *extra,
                 int nin, const RArr *const *ins);

/* ---------------------------------------------------------------- inputs */

/* Special values put first in an input (see ref_specials). */
enum {
  SP_FIN = 1,   /* floats: 0 +-1 +-0.5 +-1.5 +-2.5 3 -7 1e-3 100 in range; ints: 0 +-1 +-2 +-7 */
  SP_EDGE = 2,  /* floats: +-largest finite, +-least normal; ints: min, max and neighbours */
  SP_NAN = 4,   /* NaN */
  SP_INF = 8,   /* +inf and -inf */
  SP_NEGZ = 16, /* -0.0 */
  SP_OUT = 32,  /* 0, -1, -0.5 even outside the range: the header defines f there (log, sqrt) */
};

typedef struct {
  double lo, hi;     /* floats: uniform in [lo, hi) */
  double lo16, hi16; /* float16/bfloat16 instead, when lo16 < hi16 */
  int64_t ilo, ihi;  /* ints: uniform in [ilo, ihi] clamped to the dtype; ilo == ihi: all */
  unsigned sp;       /* SP_* */
  bool shift;        /* ints: [0, bits - 1] (shift amounts) */
} Dom;

/* The special values of dt under d, into out (at most max); returns how many. */
int ref_specials(tvk_dtype dt, const Dom *d, RVal *out, int max);
/* An array of dt and shape: the specials of d first, random values after. */
RArr ref_gen(Rng *r, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *d);
/* Two arrays of one shape: every pair of specials first, random pairs after. */
void ref_gen_pair(Rng *r, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *da,
                  const Dom *db, RArr *a, RArr *b);

#endif
