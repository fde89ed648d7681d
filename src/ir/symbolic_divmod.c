/* Linear-combination view of integer expressions, and the folds built on it:
 * x // c, x % c (tinygrad's div_and_mod_folding) and comparisons x < c, c < x
 * (lt_folding), all proven with exact bounds.
 *
 * The IR's IDIV and MOD truncate toward zero. Every div/mod fold below first
 * proves that the dividend is >= 0, where truncation and floor division agree,
 * and then reasons with floor division (fdiv/fmod). Each emitted IDIV/MOD has a
 * dividend proven >= 0 as well, and each emitted expression either has its exact
 * value inside the dtype's range (so wrap-around cannot change it) or is the
 * argument of such an expression's IDIV/MOD only after the same proof. */
#include <assert.h>

#include "symbolic_internal.h"

/* ---------------------------------------------------------------- helpers */

static int64_t min2(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* Floor division and modulo by b > 0 (the result of fmod is in [0, b)). */
static int64_t fdiv(int64_t a, int64_t b) {
  assert(b > 0);
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
static int64_t fmod_pos(int64_t a, int64_t b) {
  assert(b > 0);
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}
/* Ceiling division by b > 0. */
static int64_t cdiv(int64_t a, int64_t b) { return fdiv(a, b) + (fmod_pos(a, b) != 0); }

static int64_t gcd64(int64_t a, int64_t b) { /* of magnitudes; a, b > INT64_MIN */
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

bool sym_const(const UOp *u, int64_t *v) {
  if (u->op != OP_CONST || u->arg.kind != ARG_INT) return false;
  if (u->dtype.scalar == DT_UINT64 && u->arg.i < 0) return false;
  *v = u->arg.i;
  return true;
}

/* ---------------------------------------------------------------- sums */

static bool sum_add(SymSum *s, UOp *v, int64_t f) {
  for (int i = 0; i < s->n; i++)
    if (s->t[i].v == v) return !__builtin_add_overflow(s->t[i].f, f, &s->t[i].f);
  if (s->n == SYM_MAX_TERMS) return false;
  s->t[s->n++] = (SymTerm){v, f};
  return true;
}

/* One summand: v * f with a constant f on either side, a constant, or v * 1. */
static bool add_term(SymSum *s, UOp *u) {
  int64_t f;
  if (sym_const(u, &f)) return !__builtin_add_overflow(s->k, f, &s->k);
  if (u->op == OP_MUL && sym_const(u->src[1], &f)) return sum_add(s, u->src[0], f);
  if (u->op == OP_MUL && sym_const(u->src[0], &f)) return sum_add(s, u->src[1], f);
  return sum_add(s, u, 1);
}

bool sym_split(UOp *x, SymSum *s) {
  enum { STACK = 2 * SYM_MAX_TERMS };
  UOp *stack[STACK];
  int n = 0;
  s->n = 0, s->k = 0;
  stack[n++] = x;
  while (n > 0) {
    UOp *u = stack[--n];
    if (u->op == OP_ADD && dt_eq(u->dtype, x->dtype)) {
      if (n + 2 > STACK) return false;
      stack[n++] = u->src[1]; /* left operand first: terms keep their order */
      stack[n++] = u->src[0];
    } else if (!add_term(s, u)) {
      return false;
    }
  }
  return true;
}

bool sym_range(DType d, const SymSum *s, int64_t *lo, int64_t *hi) {
  int64_t l = s->k, h = s->k;
  for (int i = 0; i < s->n; i++) {
    UOp *v = s->t[i].v;
    int64_t f = s->t[i].f, a, b;
    if (f == 0) continue;
    if (!uop_bounds_exact(v)) return false;
    if (__builtin_mul_overflow(uop_vmin(v), f, &a) || __builtin_mul_overflow(uop_vmax(v), f, &b))
      return false;
    if (__builtin_add_overflow(l, min2(a, b), &l) || __builtin_add_overflow(h, max2(a, b), &h))
      return false;
  }
  if (!sym_fits(d, l) || !sym_fits(d, h)) return false;
  *lo = l, *hi = h;
  return true;
}

UOp *sym_build(UOp *like, const SymSum *s) {
  UOp *acc = NULL;
  for (int i = 0; i < s->n; i++) {
    if (s->t[i].f == 0) continue;
    UOp *t = s->t[i].f == 1 ? s->t[i].v : uop_mul_c(s->t[i].v, s->t[i].f);
    acc = acc ? uop_add(acc, t) : t;
  }
  if (!acc) return uop_const_like(like, s->k);
  return s->k ? uop_add_c(acc, s->k) : acc;
}

/* ---------------------------------------------------------------- x // c, x % c */

/* Whole fold: write each f = q*c + r with r in [0, c) (or, symmetric, in
 * (-c/2, c/2]), so x = c*Q + R with R = sum(r*v) + k%c. When R's range lies in
 * one period [m*c, m*c + c): x // c = Q + m and x % c = R - m*c. R itself is
 * never computed by the IR, so its range only has to fit int64. */
static UOp *fold_whole(UOp *x, const SymSum *s, int64_t c, bool mod, bool symmetric) {
  SymSum rem = {.n = s->n, .k = fmod_pos(s->k, c)}, quo = {.n = s->n, .k = fdiv(s->k, c)};
  for (int i = 0; i < s->n; i++) {
    int64_t r = fmod_pos(s->t[i].f, c);
    if (symmetric && r > c / 2) r -= c;
    int64_t fr;
    if (__builtin_sub_overflow(s->t[i].f, r, &fr)) return NULL;
    rem.t[i] = (SymTerm){s->t[i].v, r};
    quo.t[i] = (SymTerm){s->t[i].v, fr / c}; /* exact: c divides f - r */
  }
  int64_t lo, hi, mc;
  if (!sym_range(DT(INT64), &rem, &lo, &hi)) return NULL;
  int64_t m = fdiv(lo, c);
  if (fdiv(hi, c) != m) return NULL;
  if (mod) {
    if (__builtin_mul_overflow(m, c, &mc) || __builtin_sub_overflow(rem.k, mc, &rem.k)) return NULL;
    return sym_build(x, &rem);
  }
  if (__builtin_add_overflow(quo.k, m, &quo.k)) return NULL;
  return sym_build(x, &quo);
}

/* One term whose variable takes two values v0, v0+1: the result is linear in v
 * through the two values, a + (b - a)*(v - v0). */
static UOp *fold_two_values(UOp *x, const SymSum *s, int64_t c, bool mod) {
  if (s->n != 1) return NULL;
  UOp *v = s->t[0].v;
  int64_t f = s->t[0].f, v0 = uop_vmin(v), e0, e1, d, k;
  if (!uop_bounds_exact(v) || uop_vmax(v) != v0 + 1) return NULL;
  /* e0, e1 are values of x (>= 0, in range) since x's range was proven */
  if (__builtin_mul_overflow(f, v0, &e0) || __builtin_add_overflow(e0, s->k, &e0) ||
      __builtin_add_overflow(e0, f, &e1))
    return NULL;
  int64_t a = mod ? e0 % c : e0 / c, b = mod ? e1 % c : e1 / c;
  d = b - a; /* |d| < c or a difference of quotients of in-range values */
  if (__builtin_mul_overflow(d, v0, &k) || __builtin_sub_overflow(a, k, &k)) return NULL;
  SymSum r = {.n = 1, .t = {{v, d}}, .k = k};
  return sym_build(x, &r);
}

/* In a mod by c, a term (w % c2) with c dividing c2 is congruent to w:
 * (w % c2)*f + y = w*f + y (mod c), so x % c = x' % c when x' >= 0 too. */
static UOp *drop_inner_mods(UOp *x, const SymSum *s, int64_t c) {
  SymSum t = *s;
  bool changed = false;
  int64_t c2, lo, hi;
  for (int i = 0; i < t.n; i++) {
    UOp *v = t.t[i].v;
    if (v->op == OP_MOD && sym_const(v->src[1], &c2) && c2 != 0 && c2 % c == 0)
      t.t[i].v = v->src[0], changed = true;
  }
  if (!changed || !sym_range(x->dtype, &t, &lo, &hi) || lo < 0) return NULL;
  return uop_mod_c(sym_build(x, &t), c);
}

/* Pull whole multiples of c out: f = q*c + r, r in [0, c), R = sum(r*v) + k%c.
 * x // c = sum(q*v) + k//c + R // c and x % c = R % c, when R >= 0 (then its
 * truncating IDIV/MOD is the floor one); R's value must be exact in the dtype. */
static UOp *pull_quotients(UOp *x, const SymSum *s, int64_t c, bool mod) {
  SymSum rem = {.n = s->n, .k = fmod_pos(s->k, c)}, quo = {.n = s->n, .k = fdiv(s->k, c)};
  bool changed = quo.k != 0;
  for (int i = 0; i < s->n; i++) {
    rem.t[i] = (SymTerm){s->t[i].v, fmod_pos(s->t[i].f, c)};
    quo.t[i] = (SymTerm){s->t[i].v, fdiv(s->t[i].f, c)};
    changed |= quo.t[i].f != 0;
  }
  int64_t lo, hi;
  if (!changed || !sym_range(x->dtype, &rem, &lo, &hi) || lo < 0) return NULL;
  if (mod) return uop_mod_c(sym_build(x, &rem), c);
  if (quo.n == SYM_MAX_TERMS) return NULL;
  quo.t[quo.n++] = (SymTerm){uop_idiv_c(sym_build(x, &rem), c), 1};
  return sym_build(x, &quo);
}

/* A common factor g of c and every coefficient: x = g*B + k%g with
 * B = sum((f/g)*v) + k//g >= 0, so x // c = B // (c/g) and
 * x % c = (B % (c/g))*g + k%g. */
static UOp *divide_gcd(UOp *x, const SymSum *s, int64_t c, bool mod) {
  int64_t g = c, lo, hi;
  for (int i = 0; i < s->n && g > 1; i++) {
    if (s->t[i].f == INT64_MIN) return NULL;
    g = gcd64(g, s->t[i].f);
  }
  if (g <= 1) return NULL;
  SymSum b = {.n = s->n, .k = fdiv(s->k, g)};
  for (int i = 0; i < s->n; i++) b.t[i] = (SymTerm){s->t[i].v, s->t[i].f / g};
  if (!sym_range(x->dtype, &b, &lo, &hi) || lo < 0) return NULL;
  UOp *bu = sym_build(x, &b);
  if (!mod) return uop_idiv_c(bu, c / g);
  SymSum r = {.n = 1, .t = {{uop_mod_c(bu, c / g), g}}, .k = fmod_pos(s->k, g)};
  return sym_build(x, &r);
}

static UOp *fold_complete(UOp *x, const SymSum *s, int64_t c, bool mod) {
  UOp *r = fold_whole(x, s, c, mod, true);
  if (!r) r = fold_whole(x, s, c, mod, false);
  if (!r) r = fold_two_values(x, s, c, mod);
  return r;
}

/* x // c = (x // d) // (c/d) for x >= 0 and d | c; used when x // d folds
 * completely for the smallest coefficient d with 1 < d < c dividing c. */
static UOp *nested_div(UOp *x, const SymSum *s, int64_t c) {
  int64_t d = 0;
  for (int i = 0; i < s->n; i++) {
    int64_t f = s->t[i].f;
    if (f > 1 && f < c && c % f == 0 && (d == 0 || f < d)) d = f;
  }
  if (d == 0) return NULL;
  UOp *inner = fold_complete(x, s, d, false);
  return inner ? uop_idiv_c(inner, c / d) : NULL;
}

static UOp *fold_divmod(UOp *x, int64_t c, bool mod) {
  SymSum s;
  int64_t lo, hi;
  if (c <= 1 || !sym_is_int(x)) return NULL;
  if (!sym_split(x, &s) || !sym_range(x->dtype, &s, &lo, &hi) || lo < 0) return NULL;
  UOp *r = fold_complete(x, &s, c, mod);
  if (!r && mod) r = drop_inner_mods(x, &s, c);
  if (!r) r = pull_quotients(x, &s, c, mod);
  if (!r) r = divide_gcd(x, &s, c, mod);
  if (!r && !mod) r = nested_div(x, &s, c);
  return r;
}

UOp *sym_fold_div(UOp *x, int64_t c) { return fold_divmod(x, c, false); }
UOp *sym_fold_mod(UOp *x, int64_t c) { return fold_divmod(x, c, true); }

/* ---------------------------------------------------------------- x < c, c < x */

static UOp *lt_const(UOp *x, int64_t c) { /* x < c, NULL when c does not fit */
  return sym_fits(x->dtype, c) ? uop_lt_c(x, c) : NULL;
}
static UOp *gt_const(int64_t c, UOp *x) { /* c < x */
  return sym_fits(x->dtype, c) ? uop_lt(uop_const_like(x, c), x) : NULL;
}

/* w // d < c for d > 0: c > 0: w < c*d; c <= 0: w < d*(c-1) + 1 (truncation
 * rounds negative quotients up). True for every w. */
static UOp *lt_of_div(UOp *w, int64_t d, int64_t c) {
  int64_t b;
  if (c > 0) return __builtin_mul_overflow(c, d, &b) ? NULL : lt_const(w, b);
  if (__builtin_sub_overflow(c, 1, &b) || __builtin_mul_overflow(b, d, &b) ||
      __builtin_add_overflow(b, 1, &b))
    return NULL;
  return lt_const(w, b);
}

/* The Sum without its constant, when that part's exact value fits the dtype. */
static UOp *without_const(UOp *x, SymSum *s) {
  int64_t lo, hi;
  s->k = 0;
  return sym_range(x->dtype, s, &lo, &hi) ? sym_build(x, s) : NULL;
}

/* gcd step (tinygrad's lt_folding): S = g*A + P with 0 <= P < g, g | e:
 * S < e  <=>  A < e/g. Terms with |f| == 1 make P; g divides every other
 * coefficient, the constant and e. */
static UOp *lt_gcd(UOp *x, const SymSum *s, int64_t e, SymSum *a, int64_t *eg) {
  SymSum p = {.n = 0, .k = 0};
  int64_t g = e, lo, hi;
  a->n = 0, a->k = s->k;
  if (e == INT64_MIN || s->k == INT64_MIN) return NULL;
  g = gcd64(g, s->k);
  for (int i = 0; i < s->n; i++) {
    int64_t f = s->t[i].f;
    if (f == INT64_MIN) return NULL;
    if (f == 1 || f == -1)
      p.t[p.n++] = s->t[i];
    else
      a->t[a->n++] = s->t[i], g = gcd64(g, f);
  }
  if (a->n == 0 || g <= 1 || !sym_range(DT(INT64), &p, &lo, &hi) || lo < 0 || hi >= g) return NULL;
  for (int i = 0; i < a->n; i++) a->t[i].f /= g;
  a->k /= g;
  *eg = e / g;
  return sym_range(x->dtype, a, &lo, &hi) ? sym_build(x, a) : NULL;
}

UOp *sym_fold_lt(UOp *x, int64_t c) {
  SymSum s, a;
  int64_t lo, hi, d, b;
  if (!sym_is_int(x) || !sym_fits(x->dtype, c)) return NULL;
  if (x->op == OP_IDIV && sym_const(x->src[1], &d) && d > 0) return lt_of_div(x->src[0], d, c);
  if (!sym_split(x, &s) || s.n == 0 || !sym_range(x->dtype, &s, &lo, &hi)) return NULL;
  /* y + k < c  <=>  y < c - k   (no wrap: the sum is exact) */
  if (s.k != 0 && !__builtin_sub_overflow(c, s.k, &b) && sym_fits(x->dtype, b)) {
    UOp *y = without_const(x, &s);
    return y ? uop_lt_c(y, b) : NULL;
  }
  if (s.n == 1 && s.k == 0 && s.t[0].f != 1 && s.t[0].f != INT64_MIN) {
    int64_t f = s.t[0].f;
    UOp *v = s.t[0].v;
    if (f > 0) return lt_const(v, cdiv(c, f));                     /* v*f < c  <=>  v < ceil(c/f) */
    if (f < 0 && c != INT64_MIN) return gt_const(fdiv(-c, -f), v); /* v*f < c <=> -c/-f < v */
    return NULL;
  }
  UOp *y = lt_gcd(x, &s, c, &a, &b);
  return y ? uop_lt_c(y, b) : NULL;
}

UOp *sym_fold_gt(int64_t c, UOp *x) {
  SymSum s, a;
  int64_t lo, hi, d, b, e;
  if (!sym_is_int(x) || !sym_fits(x->dtype, c) || c == INT64_MAX) return NULL;
  e = c + 1; /* c < x  <=>  !(x < e) */
  if (x->op == OP_IDIV && sym_const(x->src[1], &d) && d > 0) {
    /* !(w//d < e): e > 0: w >= e*d; e <= 0: w >= d*(e-1) + 1 */
    if (e > 0) return __builtin_mul_overflow(e, d, &b) ? NULL : gt_const(b - 1, x->src[0]);
    return __builtin_mul_overflow(e - 1, d, &b) ? NULL : gt_const(b, x->src[0]);
  }
  if (!sym_split(x, &s) || s.n == 0 || !sym_range(x->dtype, &s, &lo, &hi)) return NULL;
  /* c < y + k  <=>  c - k < y */
  if (s.k != 0 && !__builtin_sub_overflow(c, s.k, &b) && sym_fits(x->dtype, b)) {
    UOp *y = without_const(x, &s);
    return y ? gt_const(b, y) : NULL;
  }
  if (s.n == 1 && s.k == 0 && s.t[0].f != 1 && s.t[0].f != INT64_MIN) {
    int64_t f = s.t[0].f;
    UOp *v = s.t[0].v;
    if (f > 0) return gt_const(fdiv(c, f), v);                     /* c < v*f <=> c/f < v */
    if (f < 0 && c != INT64_MIN) return lt_const(v, cdiv(-c, -f)); /* c < v*f <=> v < -c/-f */
    return NULL;
  }
  /* S >= e  <=>  A >= e/g  <=>  e/g - 1 < A */
  UOp *y = lt_gcd(x, &s, e, &a, &b);
  return y ? gt_const(b - 1, y) : NULL;
}
