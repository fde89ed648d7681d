/* vmin/vmax: value bounds of integer and bool UOps (the seed's _min_max), with
 * overflow-safe arithmetic.
 *
 * Soundness argument used throughout: each op's candidate bounds are computed in
 * exact (int64) arithmetic from the sources' bounds. If the candidate overflows
 * int64, or leaves the dtype's range, the value may have wrapped, so the result is
 * the dtype's full range instead. A candidate inside the dtype's range means the
 * IR's wrapping arithmetic did not wrap, so the exact bounds hold.
 *
 * Cache: UOp.mm_state is 0 (not computed), 1 (exact: a proven fact) or 2 (the
 * dtype's reported range, which is not a fact: floats, pointers, uint64 values
 * that may exceed INT64_MAX).
 *
 * sym_infer, at the end, evaluates an expression with its unbound variables at
 * their lower bounds. */
#include <assert.h>
#include <stdlib.h>

#include "alu.h"
#include "ir/vec.h"
#include "symbolic.h"

enum { MM_UNKNOWN = 0, MM_EXACT = 1, MM_LOOSE = 2 };

typedef struct {
  int64_t lo, hi;
  bool exact;
} Bounds;

static bool is_intlike(DType d) { return !dt_is_ptr(d) && (dt_is_int(d) || dt_is_bool(d)); }

/* What is known without looking at the op: the dtype's range. */
static Bounds full_of(DType d) {
  if (!is_intlike(d)) return (Bounds){INT64_MIN, INT64_MAX, false};
  return (Bounds){dt_min_i(d), dt_max_i(d), d.scalar != DT_UINT64};
}

/* Candidate [lo, hi] computed without int64 overflow (ok): kept if inside the
 * dtype's range, else the full range (the value may have wrapped). */
static Bounds fit(DType d, bool ok, int64_t lo, int64_t hi) {
  if (!is_intlike(d)) return full_of(d);
  if (!ok || lo > hi || lo < dt_min_i(d) || hi > dt_max_i(d)) return full_of(d);
  return (Bounds){lo, hi, true};
}

static int64_t min2(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* Truncating division, false on the one overflowing case (INT64_MIN / -1). */
static bool tdiv(int64_t x, int64_t y, int64_t *q) {
  assert(y != 0);
  if (x == INT64_MIN && y == -1) return false;
  *q = x / y;
  return true;
}

/* Floor division by a positive number (for SHR and MOD refinement). */
static int64_t fdiv_pos(int64_t x, int64_t y) {
  int64_t q = x / y;
  return (x % y != 0 && x < 0) ? q - 1 : q;
}

static Bounds get(UOp *u) {
  assert(u->mm_state != MM_UNKNOWN);
  return (Bounds){u->vmin, u->vmax, u->mm_state == MM_EXACT};
}

/* ---- per-op bounds; a and b are the sources' bounds, known exact ---- */

static Bounds b_add(DType d, Bounds a, Bounds b) {
  int64_t lo = 0, hi = 0;
  bool ok = !__builtin_add_overflow(a.lo, b.lo, &lo) && !__builtin_add_overflow(a.hi, b.hi, &hi);
  return fit(d, ok, lo, hi);
}

static Bounds b_sub(DType d, Bounds a, Bounds b) {
  int64_t lo = 0, hi = 0;
  bool ok = !__builtin_sub_overflow(a.lo, b.hi, &lo) && !__builtin_sub_overflow(a.hi, b.lo, &hi);
  return fit(d, ok, lo, hi);
}

static Bounds b_mul(DType d, Bounds a, Bounds b) {
  int64_t p[4];
  bool ok =
      !__builtin_mul_overflow(a.lo, b.lo, &p[0]) && !__builtin_mul_overflow(a.lo, b.hi, &p[1]) &&
      !__builtin_mul_overflow(a.hi, b.lo, &p[2]) && !__builtin_mul_overflow(a.hi, b.hi, &p[3]);
  if (!ok) return full_of(d);
  return fit(d, true, min2(min2(p[0], p[1]), min2(p[2], p[3])),
             max2(max2(p[0], p[1]), max2(p[2], p[3])));
}

static Bounds b_neg(DType d, Bounds a) {
  if (a.lo == INT64_MIN) return full_of(d);
  return fit(d, true, -a.hi, -a.lo);
}

/* Shifts by a constant amount only (seed): x << s = x * 2^s, x >> s = floor(x / 2^s). */
static Bounds b_shift(DType d, bool left, Bounds a, Bounds b) {
  if (b.lo != b.hi || b.lo < 0 || b.lo >= 63) return full_of(d);
  int64_t p = INT64_C(1) << b.lo, lo = 0, hi = 0;
  if (!left) return fit(d, true, fdiv_pos(a.lo, p), fdiv_pos(a.hi, p));
  bool ok = !__builtin_mul_overflow(a.lo, p, &lo) && !__builtin_mul_overflow(a.hi, p, &hi);
  return fit(d, ok, lo, hi);
}

/* Truncating x / y over x in a, y in [ylo, yhi] (one sign, no zero): the extremes
 * of x/y over a box where y keeps its sign lie at the corners, and truncation is
 * monotone, so the corners bound the integer quotient too. */
static bool div_corners(Bounds a, int64_t ylo, int64_t yhi, int64_t *lo, int64_t *hi) {
  int64_t q[4];
  if (!tdiv(a.lo, ylo, &q[0]) || !tdiv(a.lo, yhi, &q[1]) || !tdiv(a.hi, ylo, &q[2]) ||
      !tdiv(a.hi, yhi, &q[3]))
    return false;
  *lo = min2(min2(q[0], q[1]), min2(q[2], q[3]));
  *hi = max2(max2(q[0], q[1]), max2(q[2], q[3]));
  return true;
}

/* IDIV: negative and positive divisors separately; a zero divisor gives 0. */
static Bounds b_idiv(DType d, Bounds a, Bounds b) {
  int64_t lo = INT64_MAX, hi = INT64_MIN, l, h;
  if (b.lo <= -1) {
    if (!div_corners(a, b.lo, min2(b.hi, -1), &l, &h)) return full_of(d);
    lo = min2(lo, l), hi = max2(hi, h);
  }
  if (b.hi >= 1) {
    if (!div_corners(a, max2(b.lo, 1), b.hi, &l, &h)) return full_of(d);
    lo = min2(lo, l), hi = max2(hi, h);
  }
  if (b.lo <= 0 && b.hi >= 0) lo = min2(lo, 0), hi = max2(hi, 0);
  return fit(d, true, lo, hi);
}

/* MOD (sign of the dividend, |x % y| < |y|, |x % y| <= |x|); x % 0 is 0 (alu.h). */
static Bounds b_mod(DType d, Bounds a, Bounds b) {
  if (b.lo == 0 && b.hi == 0) return fit(d, true, 0, 0);
  /* m: the largest |x % y| over the divisor's range, |y| - 1 at its ends */
  int64_t m = max2(b.lo == INT64_MIN ? INT64_MAX : (b.lo < 0 ? -b.lo : b.lo) - 1,
                   (b.hi < 0 ? -b.hi : b.hi) - 1);
  int64_t lo = a.lo >= 0 ? 0 : max2(a.lo, -m);
  int64_t hi = a.hi <= 0 ? 0 : min2(a.hi, m);
  /* a constant divisor and a dividend within one period: x % c is monotone there */
  if (b.lo == b.hi && b.lo != INT64_MIN && a.lo >= 0) {
    int64_t c = b.lo < 0 ? -b.lo : b.lo;
    if (fdiv_pos(a.lo, c) == fdiv_pos(a.hi, c)) lo = a.lo % c, hi = a.hi % c;
  }
  if (b.lo <= 0 && b.hi >= 0) lo = min2(lo, 0), hi = max2(hi, 0);
  return fit(d, true, lo, hi);
}

static int64_t pow2_above(int64_t x) { /* smallest 2^k - 1 >= x, for x >= 0 */
  int64_t m = 0;
  while (m < x) m = (m << 1) | 1;
  return m;
}

static Bounds b_bitwise(DType d, Op op, Bounds a, Bounds b) {
  if (dt_is_bool(d)) {
    if (op == OP_AND) return fit(d, true, a.lo && b.lo, a.hi && b.hi);
    if (op == OP_OR) return fit(d, true, a.lo || b.lo, a.hi || b.hi);
    if (a.lo == a.hi && b.lo == b.hi) return fit(d, true, a.lo ^ b.lo, a.lo ^ b.lo);
    return fit(d, true, 0, 1);
  }
  if (a.lo < 0 || b.lo < 0) return full_of(d);
  if (op == OP_AND) return fit(d, true, 0, min2(a.hi, b.hi)); /* no bit beyond either */
  int64_t top = pow2_above(max2(a.hi, b.hi));                 /* no bit beyond both */
  return fit(d, true, op == OP_OR ? max2(a.lo, b.lo) : 0, top);
}

static Bounds b_cmp(Op op, Bounds a, Bounds b) {
  DType d = DT(BOOL);
  if (!a.exact || !b.exact) return fit(d, true, 0, 1);
  if (op == OP_CMPLT) return fit(d, true, a.hi < b.lo, a.lo < b.hi);
  bool never_eq = a.hi < b.lo || b.hi < a.lo;
  bool always_eq = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
  return fit(d, true, never_eq, !always_eq);
}

static Bounds b_cast(DType to, Bounds a) {
  if (!is_intlike(to) || !a.exact) return full_of(to);
  if (dt_is_bool(to)) return fit(to, true, a.lo > 0 || a.hi < 0, !(a.lo == 0 && a.hi == 0));
  return fit(to, true, a.lo, a.hi); /* out of the target's range: it may wrap */
}

static Bounds hull(Bounds a, Bounds b) {
  return (Bounds){min2(a.lo, b.lo), max2(a.hi, b.hi), a.exact && b.exact};
}

/* ALU ops whose dtype is int/bool; every source is computed. */
static Bounds b_alu(UOp *u) {
  DType d = u->dtype;
  Op op = (Op)u->op;
  Bounds a = get(u->src[0]);
  if (op == OP_WHERE) {
    Bounds t = get(u->src[1]), f = get(u->src[2]);
    if (a.exact && a.lo == a.hi) return a.lo ? t : f;
    /* (x < y ? x : y) is min(x, y), (x < y ? y : x) is max(x, y): tighter than the hull */
    const UOp *c = u->src[0];
    if (c->op == OP_CMPLT && t.exact && f.exact) {
      if (c->src[0] == u->src[1] && c->src[1] == u->src[2])
        return fit(d, true, min2(t.lo, f.lo), min2(t.hi, f.hi));
      if (c->src[0] == u->src[2] && c->src[1] == u->src[1])
        return fit(d, true, max2(t.lo, f.lo), max2(t.hi, f.hi));
    }
    Bounds h = hull(t, f);
    return h.exact ? fit(d, true, h.lo, h.hi) : full_of(d);
  }
  if (op == OP_CMPLT || op == OP_CMPNE) return b_cmp(op, a, get(u->src[1]));
  if (!is_intlike(d) || !a.exact) return full_of(d);
  if (op == OP_NEG) return b_neg(d, a);
  if (u->nsrc < 2) return full_of(d);
  Bounds b = get(u->src[1]);
  if (!b.exact) return full_of(d);
  switch (op) {
  case OP_ADD: return b_add(d, a, b);
  case OP_SUB: return b_sub(d, a, b);
  case OP_MUL: return b_mul(d, a, b);
  case OP_SHL: return b_shift(d, true, a, b);
  case OP_SHR: return b_shift(d, false, a, b);
  case OP_IDIV: return b_idiv(d, a, b);
  case OP_MOD: return b_mod(d, a, b);
  case OP_MAX: return fit(d, true, max2(a.lo, b.lo), max2(a.hi, b.hi));
  case OP_AND:
  case OP_OR:
  case OP_XOR: return b_bitwise(d, op, a, b);
  case OP_MULACC: {
    Bounds c = get(u->src[2]), p = b_mul(d, a, b);
    return p.exact && c.exact ? b_add(d, p, c) : full_of(d);
  }
  default: return full_of(d);
  }
}

static Bounds b_var(DType d, const Arg *arg) {
  if (arg->kind != ARG_VAR || !is_intlike(d)) return full_of(d);
  /* a declared range is a fact, uint64's included (its hi is at most INT64_MAX) */
  return fit(d, true, max2(arg->var.lo, dt_min_i(d)), min2(arg->var.hi, dt_max_i(d)));
}

static Bounds b_const(UOp *u) {
  if (!is_intlike(u->dtype) || u->arg.kind != ARG_INT) return full_of(u->dtype);
  return fit(u->dtype, true, u->arg.i, u->arg.i); /* a uint64 >= 2^63 is not in range */
}

static Bounds compute(UOp *u) {
  DType d = u->dtype;
  switch ((Op)u->op) {
  case OP_CONST: return b_const(u);
  case OP_VCONST: {
    if (!is_intlike(d) || u->arg.kind != ARG_INTS || u->arg.ints.n == 0) return full_of(d);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < u->arg.ints.n; i++)
      lo = min2(lo, u->arg.ints.v[i]), hi = max2(hi, u->arg.ints.v[i]);
    return fit(d, true, lo, hi);
  }
  case OP_DEFINE_VAR:
  case OP_SPECIAL: return b_var(d, &u->arg);
  case OP_RANGE: {
    Bounds e = get(u->src[0]);
    if (!e.exact || e.hi == INT64_MIN) return fit(d, true, 0, dt_max_i(d));
    return fit(d, true, 0, max2(e.hi - 1, 0));
  }
  case OP_CAST: return b_cast(d, get(u->src[0]));
  case OP_GEP: {
    Bounds a = get(u->src[0]);
    return a.exact && is_intlike(d) ? fit(d, true, a.lo, a.hi) : full_of(d);
  }
  case OP_VECTORIZE: {
    Bounds h = get(u->src[0]);
    for (uint32_t i = 1; i < u->nsrc; i++) h = hull(h, get(u->src[i]));
    return h.exact && is_intlike(d) ? fit(d, true, h.lo, h.hi) : full_of(d);
  }
  default: break;
  }
  if (op_in((Op)u->op, G_ALU)) return b_alu(u);
  return full_of(d);
}

/* Ops whose bounds are computed from their sources' bounds. */
static bool needs_src(UOp *u) {
  switch ((Op)u->op) {
  case OP_RANGE:
  case OP_CAST:
  case OP_GEP:
  case OP_VECTORIZE: return u->nsrc > 0;
  default: return op_in((Op)u->op, G_ALU);
  }
}

static void store(UOp *u) {
  Bounds b = needs_src(u) || u->nsrc == 0 ? compute(u) : full_of(u->dtype);
  u->vmin = b.lo;
  u->vmax = b.hi;
  u->mm_state = b.exact ? MM_EXACT : MM_LOOSE;
}

/* The first source whose bounds are not computed yet, or NULL. */
static UOp *pending_src(UOp *u) {
  if (!needs_src(u)) return NULL;
  for (uint32_t i = 0; i < u->nsrc; i++)
    if (u->src[i]->mm_state == MM_UNKNOWN) return u->src[i];
  return NULL;
}

/* Compute bounds for u and whatever under it is not cached yet, sources first,
 * with an explicit stack so that deep graphs do not recurse deeply. On out of
 * memory the node gets its dtype's range (always true, never exact). */
static void ensure(UOp *u) {
  if (u->mm_state != MM_UNKNOWN) return;
  if (!pending_src(u)) {
    store(u);
    return;
  }
  size_t n = 0, cap = 0;
  UOp **stack = NULL;
  if (!VEC_PUSH(stack, n, cap, u)) goto oom;
  while (n > 0) {
    UOp *t = stack[n - 1], *s;
    if (t->mm_state != MM_UNKNOWN) {
      n--;
    } else if ((s = pending_src(t)) != NULL) {
      if (!VEC_PUSH(stack, n, cap, s)) {
        free(stack);
        goto oom;
      }
    } else {
      store(t);
      n--;
    }
  }
  free(stack);
  return;
oom:;
  Bounds f = full_of(u->dtype);
  u->vmin = f.lo, u->vmax = f.hi;
  u->mm_state = MM_LOOSE; /* not cached as exact: a retry may do better, but stays sound */
}

int64_t uop_vmin(UOp *u) {
  ensure(u);
  return u->vmin;
}

int64_t uop_vmax(UOp *u) {
  ensure(u);
  return u->vmax;
}

bool uop_bounds_exact(UOp *u) {
  ensure(u);
  return u->mm_state == MM_EXACT;
}

/* ---------------------------------------------------------------- sym_infer */

static bool is_var(const UOp *u) { return op_in((Op)u->op, G_IRREDUCIBLE) && u->op != OP_CONST; }

int64_t sym_infer(UOp *u, int nvars, UOp *const *vars, const int64_t *vals) {
  size_t n = 0;
  UOp **order = uop_toposort(u, &n);
  if (!order) return 0;
  /* the given bindings, then every other variable at its vmin */
  UOp **vs = malloc((n + (size_t)nvars) * sizeof *vs);
  CVal *cv = malloc((n + (size_t)nvars) * sizeof *cv);
  int64_t result = 0;
  if (vs && cv) {
    int m = 0;
    for (int i = 0; i < nvars; i++) vs[m] = vars[i], cv[m++].i = vals[i];
    for (size_t i = 0; i < n; i++) {
      bool bound = false;
      for (int j = 0; j < nvars && !bound; j++) bound = vars[j] == order[i];
      if (is_var(order[i]) && !bound) vs[m] = order[i], cv[m++].i = uop_vmin(order[i]);
    }
    CVal out;
    bool intlike = dt_is_int(u->dtype) || dt_is_bool(u->dtype);
    if (intlike && uop_eval(u, m, vs, cv, &out)) result = out.i;
  }
  free(vs);
  free(cv);
  free(order);
  return result;
}
