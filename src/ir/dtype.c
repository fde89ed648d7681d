/* Scalar dtypes: names, sizes, bounds, promotion, truncation and casts of
 * constants, and exact float16 / bfloat16 conversions. See dtype.h. */
#include "dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- names and sizes */

static const struct {
  const char *name;
  uint8_t size;
} scalar_info[DT_COUNT] = {
    [DT_VOID] = {"void", 0},       [DT_BOOL] = {"bool", 1},       [DT_INT8] = {"int8", 1},
    [DT_UINT8] = {"uint8", 1},     [DT_INT16] = {"int16", 2},     [DT_UINT16] = {"uint16", 2},
    [DT_INT32] = {"int32", 4},     [DT_UINT32] = {"uint32", 4},   [DT_INT64] = {"int64", 8},
    [DT_UINT64] = {"uint64", 8},   [DT_FLOAT16] = {"float16", 2}, [DT_BFLOAT16] = {"bfloat16", 2},
    [DT_FLOAT32] = {"float32", 4}, [DT_FLOAT64] = {"float64", 8},
};

static bool valid_scalar(int s) { return s >= 0 && s < DT_COUNT; }

bool dt_is_unsigned(DType d) {
  return d.scalar == DT_UINT8 || d.scalar == DT_UINT16 || d.scalar == DT_UINT32 ||
         d.scalar == DT_UINT64;
}

size_t dt_scalar_size(ScalarType s) { return valid_scalar(s) ? scalar_info[s].size : 0; }

int dt_bits(DType d) { return 8 * (int)dt_scalar_size((ScalarType)d.scalar); }

const char *dt_scalar_name(ScalarType s) { return valid_scalar(s) ? scalar_info[s].name : "?"; }

const char *dt_str(DType d, char buf[48]) {
  int n = snprintf(buf, 48, "%s", dt_scalar_name((ScalarType)d.scalar));
  if (d.count != 1 && n < 48) n += snprintf(buf + n, 48 - (size_t)n, ".vec(%d)", d.count);
  if (d.addr != ADDR_NONE && n < 48)
    snprintf(buf + n, 48 - (size_t)n, d.addr == ADDR_LOCAL ? ".ptr(local)" : ".ptr");
  return buf;
}

/* ---------------------------------------------------------------- bounds */

int64_t dt_min_i(DType d) {
  switch (d.scalar) {
  case DT_INT8: return INT8_MIN;
  case DT_INT16: return INT16_MIN;
  case DT_INT32: return INT32_MIN;
  case DT_INT64: return INT64_MIN;
  case DT_BOOL:
  case DT_UINT8:
  case DT_UINT16:
  case DT_UINT32:
  case DT_UINT64: return 0;
  default: return INT64_MIN; /* floats and void: no integer bound */
  }
}

int64_t dt_max_i(DType d) {
  switch (d.scalar) {
  case DT_BOOL: return 1;
  case DT_INT8: return INT8_MAX;
  case DT_UINT8: return UINT8_MAX;
  case DT_INT16: return INT16_MAX;
  case DT_UINT16: return UINT16_MAX;
  case DT_INT32: return INT32_MAX;
  case DT_UINT32: return UINT32_MAX;
  default: return INT64_MAX; /* int64, uint64 (clamped), floats, void */
  }
}

double dt_min_f(DType d) { return dt_is_float(d) ? -INFINITY : (double)dt_min_i(d); }

double dt_max_f(DType d) {
  if (dt_is_float(d)) return INFINITY;
  if (d.scalar == DT_UINT64) return (double)UINT64_MAX; /* 2^64 after rounding */
  return (double)dt_max_i(d);
}

/* ---------------------------------------------------------------- promotion */

/* The seed's promo_lattice: the types each type promotes to directly. Every
 * parent has a higher priority (enum value) than its child. */
static const uint16_t lattice_up[DT_COUNT] = {
    [DT_BOOL] = DT_BIT(DT_INT8) | DT_BIT(DT_UINT8),
    [DT_INT8] = DT_BIT(DT_INT16),
    [DT_INT16] = DT_BIT(DT_INT32),
    [DT_INT32] = DT_BIT(DT_INT64),
    [DT_INT64] = DT_BIT(DT_FLOAT16) | DT_BIT(DT_BFLOAT16),
    [DT_UINT8] = DT_BIT(DT_INT16) | DT_BIT(DT_UINT16),
    [DT_UINT16] = DT_BIT(DT_INT32) | DT_BIT(DT_UINT32),
    [DT_UINT32] = DT_BIT(DT_INT64) | DT_BIT(DT_UINT64),
    [DT_UINT64] = DT_BIT(DT_FLOAT16) | DT_BIT(DT_BFLOAT16),
    [DT_FLOAT16] = DT_BIT(DT_FLOAT32),
    [DT_BFLOAT16] = DT_BIT(DT_FLOAT32),
    [DT_FLOAT32] = DT_BIT(DT_FLOAT64),
};

/* s and every type it promotes to, transitively. */
static uint32_t ancestors(ScalarType s) {
  uint32_t set = DT_BIT(s);
  for (int t = s; t < DT_COUNT; t++) /* parents come later in the enum */
    if (set & DT_BIT(t)) set |= lattice_up[t];
  return set;
}

ScalarType dt_sum_result(ScalarType s) {
  switch (s) {
  case DT_BOOL:
  case DT_INT8:
  case DT_INT16: return DT_INT32;
  case DT_UINT8:
  case DT_UINT16: return DT_UINT32;
  default: return s;
  }
}

ScalarType dt_float_result(ScalarType s) { return (DT_BITS_FLOAT >> s) & 1u ? s : DT_FLOAT32; }

ScalarType dt_acc(ScalarType s) { return s == DT_FLOAT16 || s == DT_BFLOAT16 ? DT_FLOAT32 : s; }

ScalarType dt_promote(ScalarType a, ScalarType b) {
  if (!valid_scalar(a) || !valid_scalar(b) || a == DT_VOID || b == DT_VOID) return DT_VOID;
  uint32_t common = ancestors(a) & ancestors(b);
  for (int t = 0; t < DT_COUNT; t++) /* least priority = least upper bound */
    if (common & DT_BIT(t)) return (ScalarType)t;
  return DT_VOID; /* unreachable: float64 is above everything */
}

/* ---------------------------------------------------------------- float formats */

/* A binary float format: exponent and stored mantissa bits. */
typedef struct {
  int ebits, mbits;
} Fmt;

static const Fmt FMT_F16 = {5, 10}, FMT_BF16 = {8, 7}, FMT_F32 = {8, 23}, FMT_F64 = {11, 52};

static int msb64(uint64_t x) { /* x != 0 */
  int n = 0;
  while (x >>= 1) n++;
  return n;
}

/* Round the value (-1)^neg * sig * 2^e to `f`, to nearest even, and return its
 * encoding. Overflow gives inf, underflow gives a subnormal or signed zero. */
static uint64_t fmt_round(Fmt f, bool neg, uint64_t sig, int e) {
  uint64_t sign = (uint64_t)neg << (f.ebits + f.mbits);
  if (sig == 0) return sign;
  int bias = (1 << (f.ebits - 1)) - 1, emax_field = (1 << f.ebits) - 1;
  int top = msb64(sig) + e;                   /* exponent of the leading bit */
  int texp = top < 1 - bias ? 1 - bias : top; /* subnormals share the minimum exponent */
  int shift = texp - f.mbits - e;             /* bits of sig below the last kept bit */
  uint64_t q;
  if (shift <= 0) {
    q = sig << -shift; /* exact: fewer significant bits than the format keeps */
  } else if (shift > 64) {
    q = 0; /* sig < 2^64 < half of the last kept bit */
  } else {
    uint64_t rem = shift == 64 ? sig : sig & ((1ull << shift) - 1);
    uint64_t half = 1ull << (shift - 1);
    q = shift == 64 ? 0 : sig >> shift;
    if (rem > half || (rem == half && (q & 1))) q++;
  }
  /* q holds the implicit bit at 2^mbits for normals; rounding may carry it one
   * place up (next binade) or, from a subnormal, into the minimum normal. */
  if (q >> (f.mbits + 1)) {
    q >>= 1;
    texp++;
  }
  if (q < (1ull << f.mbits)) return sign | q; /* subnormal or zero: exponent field 0 */
  int field = texp + bias;
  if (field >= emax_field) return sign | (uint64_t)emax_field << f.mbits; /* inf */
  return sign | (uint64_t)field << f.mbits | (q - (1ull << f.mbits));
}

/* Re-encode `bits` of format `from` into the narrower format `to`. NaNs keep the
 * sign and the top payload bits, and stay NaNs. */
static uint64_t fmt_convert(Fmt from, Fmt to, uint64_t bits) {
  bool neg = (bits >> (from.ebits + from.mbits)) & 1;
  int ef = (int)((bits >> from.mbits) & ((1u << from.ebits) - 1));
  uint64_t man = bits & ((1ull << from.mbits) - 1);
  uint64_t sign = (uint64_t)neg << (to.ebits + to.mbits);
  uint64_t inf = sign | ((1ull << to.ebits) - 1) << to.mbits;
  if (ef == (1 << from.ebits) - 1) {
    if (man == 0) return inf;
    uint64_t payload = man >> (from.mbits - to.mbits);
    return inf | (payload ? payload : 1ull << (to.mbits - 1));
  }
  int bias = (1 << (from.ebits - 1)) - 1;
  if (ef == 0) return fmt_round(to, neg, man, 1 - bias - from.mbits);
  return fmt_round(to, neg, man | 1ull << from.mbits, ef - bias - from.mbits);
}

static uint32_t f32_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}
static float bits_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
static uint64_t f64_bits(double f) {
  uint64_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}
static double bits_f64(uint64_t b) {
  double f;
  memcpy(&f, &b, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) { return (uint16_t)fmt_convert(FMT_F32, FMT_F16, f32_bits(f)); }
uint16_t f32_to_bf16(float f) { return (uint16_t)fmt_convert(FMT_F32, FMT_BF16, f32_bits(f)); }
float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, ef = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (ef == 0x1f) return bits_f32(sign | 0x7f800000u | man << 13);
  if (ef != 0) return bits_f32(sign | (ef - 15 + 127) << 23 | man << 13);
  if (man == 0) return bits_f32(sign);
  /* subnormal half: man * 2^-24, a normal float; put its leading bit in place */
  int top = msb64(man);
  return bits_f32(sign | (uint32_t)(top - 24 + 127) << 23 | (man << (23 - top) & 0x7fffffu));
}

/* Round a double to the given format and back; one rounding step. */
static double round_to(Fmt f, double v) {
  uint64_t b = fmt_convert(FMT_F64, f, f64_bits(v));
  if (f.mbits == FMT_F32.mbits) return (double)bits_f32((uint32_t)b);
  if (f.ebits == FMT_F16.ebits) return (double)f16_to_f32((uint16_t)b);
  return (double)bf16_to_f32((uint16_t)b);
}

/* ---------------------------------------------------------------- truncation */

static int64_t u64_to_i64(uint64_t u) { /* two's complement reinterpretation, no UB */
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

int64_t dt_truncate_i(ScalarType s, int64_t v) {
  uint64_t u = (uint64_t)v;
  switch (s) {
  case DT_BOOL: return v != 0;
  case DT_INT8: return (u & 0x80) ? (int64_t)(u & 0xff) - 0x100 : (int64_t)(u & 0xff);
  case DT_UINT8: return (int64_t)(u & 0xff);
  case DT_INT16: return (u & 0x8000) ? (int64_t)(u & 0xffff) - 0x10000 : (int64_t)(u & 0xffff);
  case DT_UINT16: return (int64_t)(u & 0xffff);
  case DT_INT32:
    return (u & 0x80000000u) ? (int64_t)(u & 0xffffffffu) - 0x100000000ll
                             : (int64_t)(u & 0xffffffffu);
  case DT_UINT32: return (int64_t)(u & 0xffffffffu);
  default: return v; /* int64, uint64 (bit pattern), and non-integer types */
  }
}

double dt_truncate_f(ScalarType s, double v) {
  switch (s) {
  case DT_FLOAT16: return round_to(FMT_F16, v);
  case DT_BFLOAT16: return round_to(FMT_BF16, v);
  case DT_FLOAT32: return round_to(FMT_F32, v);
  default: return v;
  }
}

/* ---------------------------------------------------------------- casts */

static bool is_float_t(ScalarType s) { return (DT_BITS_FLOAT >> s) & 1u; }

static Fmt fmt_of(ScalarType s) {
  switch (s) {
  case DT_FLOAT16: return FMT_F16;
  case DT_BFLOAT16: return FMT_BF16;
  case DT_FLOAT32: return FMT_F32;
  default: return FMT_F64;
  }
}

static double decode(Fmt f, uint64_t b) {
  if (f.mbits == FMT_F64.mbits) return bits_f64(b);
  if (f.mbits == FMT_F32.mbits) return (double)bits_f32((uint32_t)b);
  if (f.ebits == FMT_F16.ebits) return (double)f16_to_f32((uint16_t)b);
  return (double)bf16_to_f32((uint16_t)b);
}

/* An integer value (uint64 read unsigned, others signed) rounded once to a float type. */
static double int_to_float(int64_t v, bool is_u64, ScalarType to) {
  bool neg = !is_u64 && v < 0;
  uint64_t mag = neg ? 0 - (uint64_t)v : (uint64_t)v;
  Fmt f = fmt_of(to);
  return decode(f, fmt_round(f, neg, mag, 0));
}

/* Truncate toward zero, then wrap modulo 2^64 (NaN and inf give 0). */
static int64_t float_to_int(double x) {
  if (isnan(x) || isinf(x)) return 0;
  double m = fmod(trunc(fabs(x)), 18446744073709551616.0); /* exact: an integer < 2^64 */
  uint64_t u = (uint64_t)m;
  return u64_to_i64(x < 0 ? 0 - u : u);
}

CVal cval_cast(CVal v, ScalarType from, ScalarType to) {
  CVal r = {.i = 0};
  bool ffrom = is_float_t(from), fto = is_float_t(to);
  if (to == DT_BOOL)
    r.i = ffrom ? v.f != 0 : v.i != 0; /* NaN != 0: true, as C */
  else if (ffrom && fto)
    r.f = dt_truncate_f(to, v.f);
  else if (ffrom)
    r.i = dt_truncate_i(to, float_to_int(v.f));
  else if (fto)
    r.f = int_to_float(from == DT_BOOL ? v.i != 0 : v.i, from == DT_UINT64, to);
  else
    r.i = dt_truncate_i(to, v.i);
  return r;
}

CVal cval_bitcast(CVal v, ScalarType from, ScalarType to) {
  uint64_t bits = (uint64_t)v.i;
  if (from == DT_FLOAT32) {
    float f = (float)v.f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    bits = u;
  } else if (from == DT_FLOAT64) {
    memcpy(&bits, &v.f, sizeof bits);
  }
  CVal r = {.i = 0};
  if (to == DT_FLOAT32) {
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, sizeof f);
    r.f = f;
  } else if (to == DT_FLOAT64) {
    memcpy(&r.f, &bits, sizeof r.f);
  } else {
    r.i = dt_truncate_i(to, (int64_t)bits);
  }
  return r;
}

double cval_to_double(CVal v, ScalarType s) {
  if (is_float_t(s)) return v.f;
  if (s == DT_BOOL) return v.i != 0;
  return int_to_float(v.i, s == DT_UINT64, DT_FLOAT64);
}

CVal cval_from_double(double x, ScalarType s) { return cval_cast((CVal){.f = x}, DT_FLOAT64, s); }

bool cval_eq(CVal a, CVal b, ScalarType s) {
  if (is_float_t(s)) return f64_bits(a.f) == f64_bits(b.f);
  return a.i == b.i;
}
