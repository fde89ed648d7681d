/* Reference helpers for the op suites: see ref.h. Plain loops, double and
 * 64-bit integer arithmetic, written from tvk.h's semantics only. */
#include "ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- dtypes */

bool ref_is_float(tvk_dtype dt) {
  return dt == TVK_FLOAT16 || dt == TVK_BFLOAT16 || dt == TVK_FLOAT32 || dt == TVK_FLOAT64;
}
bool ref_is_signed(tvk_dtype dt) {
  return dt == TVK_INT8 || dt == TVK_INT16 || dt == TVK_INT32 || dt == TVK_INT64;
}
bool ref_is_unsigned(tvk_dtype dt) {
  return dt == TVK_UINT8 || dt == TVK_UINT16 || dt == TVK_UINT32 || dt == TVK_UINT64;
}
bool ref_is_int(tvk_dtype dt) { return ref_is_signed(dt) || ref_is_unsigned(dt); }

int ref_bits(tvk_dtype dt) {
  switch (dt) {
  case TVK_BOOL:
  case TVK_INT8:
  case TVK_UINT8: return 8;
  case TVK_INT16:
  case TVK_UINT16:
  case TVK_FLOAT16:
  case TVK_BFLOAT16: return 16;
  case TVK_INT32:
  case TVK_UINT32:
  case TVK_FLOAT32: return 32;
  default: return 64;
  }
}

int64_t ref_int_min(tvk_dtype dt) {
  if (!ref_is_signed(dt)) return 0;
  return ref_bits(dt) == 64 ? INT64_MIN : -((int64_t)1 << (ref_bits(dt) - 1));
}

uint64_t ref_int_max(tvk_dtype dt) {
  if (dt == TVK_BOOL) return 1;
  int b = ref_bits(dt) - (ref_is_signed(dt) ? 1 : 0);
  return b == 64 ? UINT64_MAX : ((uint64_t)1 << b) - 1;
}

/* Mantissa bits (without the implicit one), least normal exponent, largest
 * exponent of each float dtype. */
static void float_format(tvk_dtype dt, int *mant, int *emin, int *emax) {
  switch (dt) {
  case TVK_FLOAT16: *mant = 10, *emin = -14, *emax = 15; return;
  case TVK_BFLOAT16: *mant = 7, *emin = -126, *emax = 127; return;
  case TVK_FLOAT32: *mant = 23, *emin = -126, *emax = 127; return;
  default: *mant = 52, *emin = -1022, *emax = 1023; return;
  }
}

double ref_float_max(tvk_dtype dt) {
  int m, lo, hi;
  float_format(dt, &m, &lo, &hi);
  return ldexp(2.0 - ldexp(1.0, -m), hi);
}

double ref_eps(tvk_dtype dt) {
  int m, lo, hi;
  float_format(dt, &m, &lo, &hi);
  return ldexp(1.0, -m);
}

const char *ref_dt(tvk_dtype dt) { return tvk_dtype_name(dt); }

/* ---------------------------------------------------------------- conversions */

int64_t ref_wrap(tvk_dtype dt, uint64_t x) {
  if (dt == TVK_BOOL) return x != 0;
  int b = ref_bits(dt);
  if (b == 64) return (int64_t)x;
  uint64_t m = x & (((uint64_t)1 << b) - 1);
  if (ref_is_signed(dt) && (m >> (b - 1))) m |= ~(((uint64_t)1 << b) - 1); /* sign-extend */
  return (int64_t)m;
}

double ref_round(tvk_dtype dt, double x) {
  if (dt == TVK_FLOAT64 || isnan(x) || isinf(x) || x == 0) return x;
  int mant, emin, emax;
  float_format(dt, &mant, &emin, &emax);
  int e = ilogb(x);
  if (e < emin) e = emin; /* subnormals share the least normal exponent's quantum */
  double q = ldexp(1.0, e - mant);
  double r = nearbyint(x / q) * q; /* x/q is exact: q is a power of two */
  return fabs(r) > ref_float_max(dt) ? copysign(INFINITY, x) : r;
}

double ref_round_int(tvk_dtype dt, int64_t v, bool is_unsigned) {
  bool neg = !is_unsigned && v < 0;
  uint64_t m = is_unsigned ? (uint64_t)v : neg ? 0 - (uint64_t)v : (uint64_t)v;
  if (m == 0) return 0;
  int mant, emin, emax;
  float_format(dt, &mant, &emin, &emax);
  int top = 63 - __builtin_clzll(m);
  double r;
  if (top <= mant) {
    r = (double)m; /* fits the mantissa: exact */
  } else {
    int shift = top - mant;
    uint64_t q = m >> shift, rem = m & (((uint64_t)1 << shift) - 1);
    uint64_t half = (uint64_t)1 << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    r = ldexp((double)q, shift);
  }
  if (r > ref_float_max(dt)) r = INFINITY;
  return neg ? -r : r;
}

double ref_as_double(tvk_dtype dt, RVal v) {
  if (ref_is_float(dt)) return v.f;
  if (dt == TVK_UINT64) return (double)(uint64_t)v.i;
  return (double)v.i;
}

/* ---------------------------------------------------------------- storage */

static uint16_t half_bits(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (isnan(v)) return sign | 0x7e00;
  if (isinf(v)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e = ilogb(a);
  if (e < -14) return sign | (uint16_t)(a * 16777216.0); /* subnormal: a / 2^-24 */
  uint16_t mant = (uint16_t)((ldexp(a, -e) - 1.0) * 1024.0);
  return sign | (uint16_t)((e + 15) << 10) | mant;
}

static double half_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_bits(double v) {
  float f = (float)v; /* exact: v is a bfloat16 value */
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(v)) return (uint16_t)((u >> 16) | 0x7fc0);
  return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void store(tvk_dtype dt, RVal v, unsigned char *p) {
  int64_t i = v.i;
  switch (dt) {
  case TVK_BOOL: *p = i != 0; break;
  case TVK_INT8:
  case TVK_UINT8: *p = (unsigned char)i; break;
  case TVK_INT16:
  case TVK_UINT16: {
    uint16_t x = (uint16_t)i;
    memcpy(p, &x, 2);
  } break;
  case TVK_INT32:
  case TVK_UINT32: {
    uint32_t x = (uint32_t)i;
    memcpy(p, &x, 4);
  } break;
  case TVK_INT64:
  case TVK_UINT64: memcpy(p, &i, 8); break;
  case TVK_FLOAT16: {
    uint16_t x = half_bits(v.f);
    memcpy(p, &x, 2);
  } break;
  case TVK_BFLOAT16: {
    uint16_t x = bf16_bits(v.f);
    memcpy(p, &x, 2);
  } break;
  case TVK_FLOAT32: {
    float x = (float)v.f;
    memcpy(p, &x, 4);
  } break;
  case TVK_FLOAT64: memcpy(p, &v.f, 8); break;
  }
}

static RVal load(tvk_dtype dt, const unsigned char *p) {
  RVal v = {.i = 0};
  uint16_t h;
  uint32_t w;
  uint64_t q;
  switch (dt) {
  case TVK_BOOL: v.i = *p; break; /* raw byte: a bool that is not 0/1 shows as such */
  case TVK_INT8:
  case TVK_UINT8: v.i = ref_wrap(dt, *p); break;
  case TVK_INT16:
  case TVK_UINT16: memcpy(&h, p, 2), v.i = ref_wrap(dt, h); break;
  case TVK_INT32:
  case TVK_UINT32: memcpy(&w, p, 4), v.i = ref_wrap(dt, w); break;
  case TVK_INT64:
  case TVK_UINT64: memcpy(&q, p, 8), v.i = (int64_t)q; break;
  case TVK_FLOAT16: memcpy(&h, p, 2), v.f = half_value(h); break;
  case TVK_BFLOAT16: memcpy(&h, p, 2), v.f = bf16_value(h); break;
  case TVK_FLOAT32: {
    float f;
    memcpy(&f, p, 4);
    v.f = f;
  } break;
  case TVK_FLOAT64: memcpy(&v.f, p, 8); break;
  }
  return v;
}

/* ---------------------------------------------------------------- arrays */

RArr ref_new(tvk_dtype dt, int ndim, const int64_t *shape) {
  RArr a = {.dt = dt, .ndim = ndim, .n = 1};
  for (int d = 0; d < ndim; d++) a.shape[d] = shape[d], a.n *= shape[d];
  a.v = calloc((size_t)(a.n > 0 ? a.n : 1), sizeof(RVal));
  return a;
}

void ref_free(RArr *a) {
  free(a->v);
  a->v = NULL;
}

void *ref_pack(const RArr *a) {
  size_t es = tvk_dtype_size(a->dt);
  unsigned char *p = calloc((size_t)(a->n > 0 ? a->n : 1), es);
  for (int64_t i = 0; i < a->n; i++) store(a->dt, a->v[i], p + (size_t)i * es);
  return p;
}

void ref_unpack(RArr *a, const void *bytes) {
  size_t es = tvk_dtype_size(a->dt);
  for (int64_t i = 0; i < a->n; i++) a->v[i] = load(a->dt, (const unsigned char *)bytes + i * es);
}

const char *ref_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "", shape[d]);
  if (k < n) snprintf(buf + k, n - k, ")");
  return buf;
}

const char *ref_val_str(tvk_dtype dt, RVal v, char *buf, size_t n) {
  unsigned char raw[8];
  uint16_t h;
  switch (dt) {
  case TVK_FLOAT16:
  case TVK_BFLOAT16:
    store(dt, v, raw), memcpy(&h, raw, 2);
    snprintf(buf, n, "%.9g (0x%04x)", v.f, h);
    break;
  case TVK_FLOAT32: snprintf(buf, n, "%.9g", v.f); break;
  case TVK_FLOAT64: snprintf(buf, n, "%.17g", v.f); break;
  case TVK_UINT64: snprintf(buf, n, "%" PRIu64, (uint64_t)v.i); break;
  default: snprintf(buf, n, "%" PRId64, v.i); break;
  }
  return buf;
}

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
}

static int64_t ravel(const int64_t *idx, int ndim, const int64_t *shape) {
  int64_t flat = 0;
  for (int d = 0; d < ndim; d++) flat = flat * shape[d] + idx[d];
  return flat;
}

RArr ref_reshape(const RArr *a, int ndim, const int64_t *shape) {
  RArr r = ref_new(a->dt, ndim, shape);
  memcpy(r.v, a->v, (size_t)(a->n < r.n ? a->n : r.n) * sizeof(RVal));
  return r;
}

RArr ref_permute(const RArr *a, const int *order) {
  int64_t shape[TVK_MAX_DIMS], idx[TVK_MAX_DIMS], src[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[order[d]];
  RArr r = ref_new(a->dt, a->ndim, shape);
  for (int64_t i = 0; i < r.n; i++) {
    unravel(i, r.ndim, r.shape, idx);
    for (int d = 0; d < a->ndim; d++) src[order[d]] = idx[d];
    r.v[i] = a->v[ravel(src, a->ndim, a->shape)];
  }
  return r;
}

RArr ref_expand(const RArr *a, int ndim, const int64_t *shape) {
  int64_t idx[TVK_MAX_DIMS], src[TVK_MAX_DIMS];
  RArr r = ref_new(a->dt, ndim, shape);
  int lead = ndim - a->ndim;
  for (int64_t i = 0; i < r.n; i++) {
    unravel(i, ndim, shape, idx);
    for (int d = 0; d < a->ndim; d++) src[d] = a->shape[d] == 1 ? 0 : idx[lead + d];
    r.v[i] = a->v[ravel(src, a->ndim, a->shape)];
  }
  return r;
}

RArr ref_pad(const RArr *a, const int64_t (*pads)[2], RVal value) {
  int64_t shape[TVK_MAX_DIMS], idx[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[d] + pads[d][0] + pads[d][1];
  RArr r = ref_new(a->dt, a->ndim, shape);
  for (int64_t i = 0; i < r.n; i++) {
    unravel(i, r.ndim, r.shape, idx);
    bool inside = true;
    for (int d = 0; d < a->ndim; d++) {
      idx[d] -= pads[d][0];
      inside = inside && idx[d] >= 0 && idx[d] < a->shape[d];
    }
    r.v[i] = inside ? a->v[ravel(idx, a->ndim, a->shape)] : value;
  }
  return r;
}

RArr ref_shrink(const RArr *a, const int64_t (*ranges)[2]) {
  int64_t shape[TVK_MAX_DIMS], idx[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) shape[d] = ranges[d][1] - ranges[d][0];
  RArr r = ref_new(a->dt, a->ndim, shape);
  for (int64_t i = 0; i < r.n; i++) {
    unravel(i, r.ndim, r.shape, idx);
    for (int d = 0; d < a->ndim; d++) idx[d] += ranges[d][0];
    r.v[i] = a->v[ravel(idx, a->ndim, a->shape)];
  }
  return r;
}

RArr ref_flip(const RArr *a, int naxes, const int *axes) {
  int64_t idx[TVK_MAX_DIMS];
  bool flip[TVK_MAX_DIMS] = {0};
  for (int k = 0; k < naxes; k++) flip[axes[k] < 0 ? axes[k] + a->ndim : axes[k]] = true;
  RArr r = ref_new(a->dt, a->ndim, a->shape);
  for (int64_t i = 0; i < r.n; i++) {
    unravel(i, r.ndim, r.shape, idx);
    for (int d = 0; d < a->ndim; d++)
      if (flip[d]) idx[d] = a->shape[d] - 1 - idx[d];
    r.v[i] = a->v[ravel(idx, a->ndim, a->shape)];
  }
  return r;
}

bool ref_broadcast(int n, const RArr *const *xs, int *ndim, int64_t *shape) {
  int nd = 0;
  for (int k = 0; k < n; k++) nd = xs[k]->ndim > nd ? xs[k]->ndim : nd;
  for (int d = 0; d < nd; d++) {
    int64_t s = 1;
    for (int k = 0; k < n; k++) {
      int kd = d - (nd - xs[k]->ndim);
      int64_t e = kd >= 0 ? xs[k]->shape[kd] : 1;
      if (e == 1) continue;
      if (s != 1 && s != e) return false;
      s = e;
    }
    shape[d] = s;
  }
  *ndim = nd;
  return true;
}

/* ---------------------------------------------------------------- casts */

RVal ref_cast_elem(tvk_dtype from, tvk_dtype to, RVal v) {
  RVal r;
  if (to == TVK_BOOL) {
    r.i = ref_is_float(from) ? v.f != 0 : v.i != 0; /* NaN != 0 */
  } else if (ref_is_float(to)) {
    r.f = ref_is_float(from) ? ref_round(to, v.f)
                             : ref_round_int(to, v.i, ref_is_unsigned(from) || from == TVK_BOOL);
  } else if (ref_is_float(from)) {
    double t = trunc(v.f);
    r.i = ref_wrap(to, t >= 0x1p63 ? (uint64_t)t : (uint64_t)(int64_t)t);
  } else {
    r.i = ref_wrap(to, (uint64_t)v.i);
  }
  return r;
}

RArr ref_cast(const RArr *a, tvk_dtype to) {
  RArr r = ref_new(to, a->ndim, a->shape);
  for (int64_t i = 0; i < a->n; i++) r.v[i] = ref_cast_elem(a->dt, to, a->v[i]);
  return r;
}

bool ref_lt_int(tvk_dtype dt, int64_t a, int64_t b) {
  return dt == TVK_UINT64 ? (uint64_t)a < (uint64_t)b : a < b;
}

/* ---------------------------------------------------------------- reductions */

double ref_sum_allowance(tvk_dtype in, int64_t n, double sum_abs) {
  double acc_eps = in == TVK_FLOAT64 ? ref_eps(TVK_FLOAT64) : ref_eps(TVK_FLOAT32);
  return 2.0 * (1.0 + sqrt((double)n)) * acc_eps * sum_abs;
}

tvk_dtype ref_reduce_dtype(RKind k, tvk_dtype dt) {
  if (k == R_MAX || k == R_MIN) return dt;
  if (k == R_MEAN) return ref_is_float(dt) ? dt : TVK_FLOAT32;
  if (dt == TVK_BOOL || dt == TVK_INT8 || dt == TVK_INT16) return TVK_INT32;
  if (dt == TVK_UINT8 || dt == TVK_UINT16) return TVK_UINT32;
  return dt;
}

typedef struct {
  double s, sabs, p; /* float sum, sum |x|, product */
  uint64_t is, ip;   /* integer sum and product, wrapping */
  RVal mx, mn;
  int64_t n;
} Acc;

RArr ref_reduce(RKind k, const RArr *a, int naxes, const int *axes, bool keepdim, double **allow) {
  bool red[TVK_MAX_DIMS] = {0};
  for (int j = 0; j < (naxes ? naxes : a->ndim); j++)
    red[naxes ? (axes[j] < 0 ? axes[j] + a->ndim : axes[j]) : j] = true;
  int64_t kshape[TVK_MAX_DIMS], oshape[TVK_MAX_DIMS];
  int ond = 0;
  for (int d = 0; d < a->ndim; d++) {
    kshape[d] = red[d] ? 1 : a->shape[d];
    if (keepdim || !red[d]) oshape[ond++] = kshape[d];
  }
  tvk_dtype out = ref_reduce_dtype(k, a->dt);
  RArr r = ref_new(out, ond, oshape);
  Acc *acc = calloc((size_t)(r.n ? r.n : 1), sizeof *acc);
  for (int64_t o = 0; o < r.n; o++) acc[o].p = 1, acc[o].ip = 1;
  for (int64_t i = 0; i < a->n; i++) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = a->ndim - 1; d >= 0; d--) { /* the output index of element i */
      int64_t id = rem % a->shape[d];
      rem /= a->shape[d];
      if (!red[d]) o += id * mul, mul *= kshape[d];
    }
    Acc *c = &acc[o];
    RVal v = a->v[i];
    if (ref_is_float(a->dt)) {
      c->s += v.f, c->sabs += fabs(v.f), c->p *= v.f;
      /* max/min: NaN once any input is NaN (tvk.h) */
      if (c->n == 0 || (!isnan(c->mx.f) && (isnan(v.f) || v.f > c->mx.f))) c->mx = v;
      if (c->n == 0 || (!isnan(c->mn.f) && (isnan(v.f) || v.f < c->mn.f))) c->mn = v;
    } else {
      c->is += (uint64_t)v.i, c->ip *= (uint64_t)v.i, c->sabs += fabs(ref_as_double(a->dt, v));
      if (c->n == 0 || ref_lt_int(a->dt, c->mx.i, v.i)) c->mx = v;
      if (c->n == 0 || ref_lt_int(a->dt, v.i, c->mn.i)) c->mn = v;
    }
    c->n++;
  }
  *allow = calloc((size_t)(r.n ? r.n : 1), sizeof **allow);
  for (int64_t o = 0; o < r.n; o++) {
    Acc *c = &acc[o];
    bool f = ref_is_float(a->dt);
    double sum = f ? c->s : a->dt == TVK_UINT64 ? (double)c->is : (double)(int64_t)c->is;
    switch (k) {
    case R_SUM:
      if (f)
        r.v[o].f = ref_round(out, sum), (*allow)[o] = ref_sum_allowance(a->dt, c->n, c->sabs);
      else
        r.v[o].i = ref_wrap(out, c->is);
      break;
    case R_PROD:
      if (f) {
        r.v[o].f = ref_round(out, c->p);
        double eps = a->dt == TVK_FLOAT64 ? ref_eps(TVK_FLOAT64) : ref_eps(TVK_FLOAT32);
        (*allow)[o] = 2.0 * (double)c->n * eps * fabs(c->p); /* n roundings */
      } else {
        r.v[o].i = ref_wrap(out, c->ip);
      }
      break;
    case R_MEAN: /* ints: exact sum (inputs keep it in range) over n; empty: NaN */
      r.v[o].f = c->n ? ref_round(out, sum / (double)c->n) : NAN;
      if (f && c->n) (*allow)[o] = ref_sum_allowance(a->dt, c->n, c->sabs) / (double)c->n;
      break;
    case R_MAX:
    case R_MIN: {
      bool mx = k == R_MAX;
      if (c->n)
        r.v[o] = mx ? c->mx : c->mn;
      else if (f)
        r.v[o].f = mx ? -INFINITY : INFINITY;
      else
        r.v[o].i = mx ? ref_wrap(out, (uint64_t)ref_int_min(out)) : ref_wrap(out, ref_int_max(out));
    } break;
    }
  }
  free(acc);
  return r;
}

/* ---------------------------------------------------------------- PRNG */

uint64_t rng_next(Rng *r) { /* xorshift64* */
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ULL;
}

int64_t rng_int(Rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo;
  uint64_t x = rng_next(r);
  return (int64_t)((uint64_t)lo + (span == UINT64_MAX ? x : x % (span + 1)));
}

double rng_unif(Rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(rng_next(r) >> 11) * 0x1.0p-53);
}

/* ---------------------------------------------------------------- comparison */

static bool close_enough(double got, double exp, Tol tol, double extra) {
  if (isnan(exp) || isnan(got)) return isnan(exp) && isnan(got);
  if (isinf(exp) || isinf(got)) return got == exp;
  if (tol.zero_sign && exp == 0 && got == 0) return signbit(got) == signbit(exp);
  return fabs(got - exp) <= tol.atol + tol.rtol * fabs(exp) + extra;
}

bool ref_compare(const char *what, const RArr *got, const RArr *exp, Tol tol, const double *extra,
                 int nin, const RArr *const *ins) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < exp->n; i++) {
    bool ok = ref_is_float(exp->dt)
                  ? close_enough(got->v[i].f, exp->v[i].f, tol, extra ? extra[i] : 0)
                  : got->v[i].i == exp->v[i].i;
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return true;
  char sh[128], g[64], e[64], v[64];
  int64_t idx[TVK_MAX_DIMS];
  unravel(first, exp->ndim, exp->shape, idx);
  fprintf(stderr, "FAIL %s: %s %s: %" PRId64 " of %" PRId64 " differ; first at flat %" PRId64 " [",
          what, ref_dt(exp->dt), ref_shape_str(exp->ndim, exp->shape, sh, sizeof sh), bad, exp->n,
          first);
  for (int d = 0; d < exp->ndim; d++) fprintf(stderr, "%s%" PRId64, d ? "," : "", idx[d]);
  fprintf(stderr, "]: got %s, expected %s", ref_val_str(got->dt, got->v[first], g, sizeof g),
          ref_val_str(exp->dt, exp->v[first], e, sizeof e));
  if (ref_is_float(exp->dt))
    fprintf(stderr, " (rtol %g, atol %g%s)", tol.rtol, tol.atol, extra ? " + sum allowance" : "");
  for (int k = 0; k < nin; k++)
    if (ins[k] && ins[k]->n == exp->n)
      fprintf(stderr, "%s%s %s", k ? ", " : "; inputs: ", ref_dt(ins[k]->dt),
              ref_val_str(ins[k]->dt, ins[k]->v[first], v, sizeof v));
  fprintf(stderr, "\n");
  return false;
}

/* ---------------------------------------------------------------- inputs */

static void int_range(tvk_dtype dt, const Dom *d, int64_t *lo, uint64_t *hi) {
  *lo = ref_int_min(dt), *hi = ref_int_max(dt);
  if (d->shift) {
    *lo = 0, *hi = (uint64_t)ref_bits(dt) - 1;
  } else if (d->ilo != d->ihi) {
    if (d->ilo > *lo) *lo = d->ilo;
    if (d->ihi < 0 || (uint64_t)d->ihi < *hi) *hi = (uint64_t)(d->ihi < 0 ? 0 : d->ihi);
  }
}

static void float_range(tvk_dtype dt, const Dom *d, double *lo, double *hi) {
  bool narrow = (dt == TVK_FLOAT16 || dt == TVK_BFLOAT16) && d->lo16 < d->hi16;
  *lo = narrow ? d->lo16 : d->lo, *hi = narrow ? d->hi16 : d->hi;
  double m = ref_float_max(dt);
  *lo = *lo < -m ? -m : *lo, *hi = *hi > m ? m : *hi;
}

int ref_specials(tvk_dtype dt, const Dom *d, RVal *out, int max) {
  int n = 0;
#define PUT(field, x) (n < max ? (void)(out[n++] = (RVal){.field = (x)}) : (void)0)
  if (dt == TVK_BOOL) {
    PUT(i, 0), PUT(i, 1);
  } else if (ref_is_float(dt)) {
    static const double fin[] = {0, 1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3, -7, 1e-3, 100};
    double lo, hi, m = ref_float_max(dt), tiny = ldexp(1.0, dt == TVK_FLOAT16 ? -14 : -126);
    float_range(dt, d, &lo, &hi);
    if (dt == TVK_FLOAT64) tiny = ldexp(1.0, -1022);
    for (size_t k = 0; (d->sp & SP_FIN) && k < sizeof fin / sizeof *fin; k++)
      if (fin[k] >= lo && fin[k] <= hi) PUT(f, ref_round(dt, fin[k]));
    if (d->sp & SP_EDGE) PUT(f, m), PUT(f, -m), PUT(f, tiny), PUT(f, -tiny);
    if (d->sp & SP_OUT) PUT(f, 0.0), PUT(f, -1.0), PUT(f, -0.5);
    if (d->sp & SP_NAN) PUT(f, NAN);
    if (d->sp & SP_INF) PUT(f, INFINITY), PUT(f, -INFINITY);
    if (d->sp & SP_NEGZ) PUT(f, -0.0);
  } else {
    static const int64_t fin[] = {0, 1, -1, 2, -2, 7, -7};
    int64_t lo, mn = ref_int_min(dt);
    uint64_t hi, mx = ref_int_max(dt);
    int_range(dt, d, &lo, &hi);
    bool uns = ref_is_unsigned(dt);
    for (size_t k = 0; (d->sp & SP_FIN) && k < sizeof fin / sizeof *fin; k++)
      if (fin[k] >= lo && (fin[k] < 0 || (uint64_t)fin[k] <= hi)) PUT(i, fin[k]);
    if ((d->sp & SP_EDGE) && d->ilo == d->ihi && !d->shift) {
      PUT(i, ref_wrap(dt, (uint64_t)mn)), PUT(i, ref_wrap(dt, (uint64_t)mn + 1));
      PUT(i, ref_wrap(dt, mx)), PUT(i, ref_wrap(dt, mx - 1));
      PUT(i, ref_wrap(dt, mx / 2)), PUT(i, ref_wrap(dt, mx / 2 + 1));
    }
    if (d->sp & SP_OUT) {
      PUT(i, 0);
      if (!uns) PUT(i, -1);
    }
  }
#undef PUT
  return n;
}

static RVal random_val(Rng *r, tvk_dtype dt, const Dom *d) {
  RVal v;
  if (dt == TVK_BOOL) {
    v.i = (int64_t)(rng_next(r) >> 63);
  } else if (ref_is_float(dt)) {
    double lo, hi;
    float_range(dt, d, &lo, &hi);
    v.f = ref_round(dt, rng_unif(r, lo, hi));
  } else {
    int64_t lo;
    uint64_t hi;
    int_range(dt, d, &lo, &hi);
    uint64_t span = hi - (uint64_t)lo;
    uint64_t x = rng_next(r);
    v.i = ref_wrap(dt, (uint64_t)lo + (span == UINT64_MAX ? x : x % (span + 1)));
  }
  return v;
}

RArr ref_gen(Rng *r, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *d) {
  RArr a = ref_new(dt, ndim, shape);
  RVal sp[64];
  int ns = ref_specials(dt, d, sp, 64);
  for (int64_t i = 0; i < a.n; i++) a.v[i] = i < ns ? sp[i] : random_val(r, dt, d);
  return a;
}

void ref_gen_pair(Rng *r, tvk_dtype dt, int ndim, const int64_t *shape, const Dom *da,
                  const Dom *db, RArr *a, RArr *b) {
  *a = ref_gen(r, dt, ndim, shape, da);
  *b = ref_gen(r, dt, ndim, shape, db);
  RVal sa[64], sb[64];
  int na = ref_specials(dt, da, sa, 64), nb = ref_specials(dt, db, sb, 64);
  for (int64_t k = 0; k < (int64_t)na * nb && k < a->n; k++)
    a->v[k] = sa[k / nb], b->v[k] = sb[k % nb];
}
