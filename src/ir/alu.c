/* Constant evaluation of ALU ops (the seed's python_alu / exec_alu) and of
 * UOp graphs. See alu.h for the semantics. */
#include "alu.h"

#include "ir/ptrmap.h"
#include "ir/vec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- integers */

/* An integer operand: the two's complement bits and whether the dtype is
 * uint64 (the only type whose bits, read signed, are not its value). */
static bool alu_is_neg(int64_t v, bool u64) { return !u64 && v < 0; }
static uint64_t alu_mag(int64_t v, bool u64) {
  return alu_is_neg(v, u64) ? 0 - (uint64_t)v : (uint64_t)v;
}
static bool alu_lt(int64_t a, int64_t b, bool u64) {
  return u64 ? (uint64_t)a < (uint64_t)b : a < b;
}

static uint64_t alu_pow_u(uint64_t x, uint64_t y) { /* x**y mod 2^64 */
  uint64_t r = 1;
  for (; y; y >>= 1, x *= x)
    if (y & 1) r *= x;
  return r;
}

/* Floor shift right of the exact value by amt >= 0. */
static uint64_t alu_shr(int64_t x, uint64_t amt, bool u64) {
  if (!alu_is_neg(x, u64)) return amt >= 64 ? 0 : (uint64_t)x >> amt;
  return amt >= 64 ? ~0ull : ~(~(uint64_t)x >> amt); /* floor(x / 2^amt) for x < 0 */
}

/* Integer ops on exact values; the result modulo 2^64 in *r. */
static bool alu_int(Op op, bool u64, const int64_t *s, uint64_t *r) {
  uint64_t a = (uint64_t)s[0], b = (uint64_t)(op_in(op, G_UNARY) ? 0 : s[1]);
  switch (op) {
  case OP_NEG: *r = 0 - a; return true;
  case OP_ADD: *r = a + b; return true;
  case OP_SUB: *r = a - b; return true;
  case OP_MUL: *r = a * b; return true;
  case OP_MULACC: *r = a * b + (uint64_t)s[2]; return true;
  case OP_AND: *r = a & b; return true;
  case OP_OR: *r = a | b; return true;
  case OP_XOR: *r = a ^ b; return true;
  case OP_CMPLT: *r = alu_lt(s[0], s[1], u64); return true;
  case OP_CMPNE: *r = a != b; return true;
  case OP_MAX: *r = alu_lt(s[0], s[1], u64) ? b : a; return true;
  case OP_IDIV: {
    if (b == 0) return *r = 0, true;
    uint64_t q = alu_mag(s[0], u64) / alu_mag(s[1], u64);
    *r = alu_is_neg(s[0], u64) != alu_is_neg(s[1], u64) ? 0 - q : q;
    return true;
  }
  case OP_MOD: {
    uint64_t m = alu_mag(s[1], u64);
    if (m == 0) return *r = 0, true; /* Python raises; we define x % 0 = 0 */
    uint64_t q = alu_mag(s[0], u64) % m;
    *r = alu_is_neg(s[0], u64) ? 0 - q : q;
    return true;
  }
  case OP_SHL:
    if (alu_is_neg(s[1], u64)) return false;
    *r = b >= 64 ? 0 : a << b;
    return true;
  case OP_SHR:
    if (alu_is_neg(s[1], u64)) return false;
    *r = alu_shr(s[0], b, u64);
    return true;
  case OP_POW:
    if (alu_is_neg(s[1], u64)) return false; /* a float in Python; no int result */
    *r = alu_pow_u(a, b);
    return true;
  default: return false; /* transcendental ops, FDIV, THREEFRY */
  }
}

/* ---------------------------------------------------------------- floats */

/* Python's a // b for a, b >= 0 (CPython's float_floor_div). */
static double alu_floordiv_pos(double a, double b) {
  double mod = fmod(a, b), div = (a - mod) / b;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  return div - fl > 0.5 ? fl + 1.0 : fl;
}

static double alu_log2(double x) { return x > 0 ? log2(x) : x == 0 ? -INFINITY : NAN; }
static double alu_sqrt(double x) { return x >= 0 ? sqrt(x) : NAN; }
static double alu_recip(double x) { return x != 0 ? 1.0 / x : copysign(INFINITY, x); }
static double alu_sin(double x) { return isinf(x) ? NAN : sin(x); }

/* C's pow, which has IEEE 754's special cases: (+-0)**y for a negative odd
 * integer y is +-inf (the sign of the zero survives, as in torch), +inf for
 * other negative y; negative ** non-integer is NaN; 1**y and x**0 are 1. */
static double alu_pow_f(double x, double y) { return pow(x, y); }

static bool alu_float(Op op, const double *s, double *r) {
  double a = s[0], b = op_in(op, G_UNARY) ? 0 : s[1];
  switch (op) {
  case OP_EXP2: *r = pow(2.0, a); return true;
  case OP_LOG2: *r = alu_log2(a); return true;
  case OP_SIN: *r = alu_sin(a); return true;
  case OP_SQRT: *r = alu_sqrt(a); return true;
  case OP_RECIP: *r = alu_recip(a); return true;
  case OP_NEG: *r = -a; return true;
  case OP_ADD: *r = a + b; return true;
  case OP_SUB: *r = a - b; return true;
  case OP_MUL: *r = a * b; return true;
  case OP_MULACC: *r = fma(a, b, s[2]); return true;
  case OP_FDIV: *r = a / b; return true;
  case OP_POW: *r = alu_pow_f(a, b); return true;
  case OP_MAX: *r = b > a ? b : a; return true;
  case OP_IDIV:
    if (b == 0) return *r = 0.0, true;
    *r = alu_floordiv_pos(fabs(a), fabs(b));
    if (a * b < 0) *r = -*r;
    return true;
  case OP_MOD: {
    if (!isfinite(a) || !isfinite(b)) return false; /* int() raises in Python */
    double m = trunc(fabs(b));
    double q = m == 0 ? 0.0 : fmod(trunc(fabs(a)), m); /* exact on integers */
    *r = a < 0 && q != 0 ? -q : q;                     /* an int 0 has no sign */
    return true;
  }
  default: return false; /* bitwise ops, shifts, comparisons (see alu_exec) */
  }
}

/* ---------------------------------------------------------------- dispatch */

static bool alu_is_float(ScalarType s) { return (DT_BITS_FLOAT >> s) & 1u; }
static bool alu_is_intlike(ScalarType s) { return s == DT_BOOL || ((DT_BITS_INT >> s) & 1u); }

static int64_t alu_u2i(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)~u - 1;
}

/* Truncate a float result to `out` (exec_alu's truncate); bool is Python's bool(). */
static bool alu_put_float(ScalarType out, double r, CVal *res) {
  if (out == DT_BOOL)
    res->i = r != 0;
  else if (alu_is_float(out))
    res->f = dt_truncate_f(out, r);
  else
    return false; /* ctypes int of a float: TypeError in the seed */
  return true;
}

/* Truncate an integer result (mod 2^64) to `out`. */
static bool alu_put_int(ScalarType out, uint64_t r, CVal *res) {
  if (!alu_is_intlike(out)) return false;
  res->i = dt_truncate_i(out, alu_u2i(r));
  return true;
}

bool alu_exec(Op op, ScalarType out, ScalarType in, const CVal *src, CVal *res) {
  if (op <= OP_NONE || op >= OP_COUNT || !op_in(op, G_ALU) || out >= DT_COUNT || in >= DT_COUNT)
    return false;
  bool fin = alu_is_float(in);
  if (!fin && !alu_is_intlike(in)) return false;
  /* On bool the IR has logic, not arithmetic: MOD, POW, the shifts and MULACC
   * of bools are not ops (the frontend promotes first, and no renderer spells
   * them), so they are not folded either. */
  if (in == DT_BOOL &&
      (op == OP_MOD || op == OP_POW || op == OP_SHL || op == OP_SHR || op == OP_MULACC))
    return false;
  if (op == OP_WHERE) {
    CVal pick = src[0].i ? src[1] : src[2];
    return fin ? alu_put_float(out, pick.f, res) : alu_put_int(out, (uint64_t)pick.i, res);
  }
  int n = op_arity(op);
  if (fin && (op == OP_CMPLT || op == OP_CMPNE)) { /* IEEE: NaN < x false, NaN != NaN */
    bool c = op == OP_CMPLT ? src[0].f < src[1].f : src[0].f != src[1].f;
    return alu_put_int(out, c, res);
  }
  if (fin) {
    double v[3] = {0, 0, 0}, r;
    for (int i = 0; i < n; i++) v[i] = src[i].f;
    return alu_float(op, v, &r) && alu_put_float(out, r, res);
  }
  int64_t v[3] = {0, 0, 0};
  uint64_t r;
  for (int i = 0; i < n; i++) v[i] = src[i].i;
  return alu_int(op, in == DT_UINT64, v, &r) && alu_put_int(out, r, res);
}

/* ---------------------------------------------------------------- graph evaluation */

/* Memo of evaluated nodes: open addressing on pointers. `done` is false while a
 * node's sources are still being evaluated. */
typedef struct {
  UOp *u;
  bool done;
  CVal v;
} EvalSlot;

/* Evaluated (and pending) nodes: the map gives each node's slot. */
typedef struct {
  PtrMap index;
  EvalSlot *slots;
  size_t n, cap;
} EvalMemo;

/* The slot of u, inserted (not done) if new; NULL on out of memory. Valid
 * until the next insert. */
static EvalSlot *eval_slot(EvalMemo *m, UOp *u) {
  bool added = false;
  int64_t *i = ptrmap_insert(&m->index, u, (int64_t)m->n, &added);
  if (!i) return NULL;
  if (added && !VEC_PUSH(m->slots, m->n, m->cap, ((EvalSlot){u, false, {.i = 0}}))) {
    ptrmap_free(&m->index); /* the map names a slot that does not exist: unusable */
    return NULL;
  }
  return &m->slots[*i];
}

static CVal eval_value(const EvalMemo *m, const UOp *u) {
  return m->slots[ptrmap_get(&m->index, u)].v;
}

static bool eval_scalar(DType d) {
  return d.count == 1 && d.addr == ADDR_NONE && d.scalar != DT_VOID;
}

static CVal eval_truncate(ScalarType s, CVal v) {
  if ((DT_BITS_FLOAT >> s) & 1u) return (CVal){.f = dt_truncate_f(s, v.f)};
  return (CVal){.i = dt_truncate_i(s, v.i)};
}

/* Value of u from its (evaluated) sources. */
static bool eval_node(EvalMemo *m, UOp *u, CVal *out) {
  if (!eval_scalar(u->dtype)) return false;
  ScalarType dt = (ScalarType)u->dtype.scalar;
  if (u->op == OP_CONST) return *out = uop_const_val(u), true;
  CVal s[3];
  if (u->nsrc > 3) return false;
  for (uint32_t i = 0; i < u->nsrc; i++) {
    if (!eval_scalar(u->src[i]->dtype)) return false;
    s[i] = eval_value(m, u->src[i]);
  }
  if (u->op == OP_CAST && u->nsrc == 1)
    return *out = cval_cast(s[0], (ScalarType)u->src[0]->dtype.scalar, dt), true;
  if (u->op == OP_BITCAST && u->nsrc == 1)
    return *out = cval_bitcast(s[0], (ScalarType)u->src[0]->dtype.scalar, dt), true;
  if (!op_in((Op)u->op, G_ALU) || u->nsrc == 0) return false;
  ScalarType in = (ScalarType)u->src[u->nsrc - 1]->dtype.scalar;
  return alu_exec((Op)u->op, dt, in, s, out);
}

/* Variables, and ops whose sources are not operands, are leaves. */
static bool eval_is_leaf(const UOp *u) { return op_in((Op)u->op, G_IRREDUCIBLE); }

/* Iterative post-order walk: an explicit stack of (node, next source). */
static bool eval_walk(EvalMemo *m, UOp *root, CVal *out) {
  typedef struct {
    UOp *u;
    uint32_t next;
  } Frame;
  size_t cap = 0, depth = 0;
  Frame *stack = NULL;
  EvalSlot *rs = eval_slot(m, root);
  bool ok = rs != NULL;
  if (ok && !rs->done) /* else root is a bound variable */
    ok = VEC_PUSH(stack, depth, cap, ((Frame){root, 0}));
  while (ok && depth) {
    Frame *f = &stack[depth - 1];
    if (!eval_is_leaf(f->u) && f->next < f->u->nsrc) {
      EvalSlot *s = eval_slot(m, f->u->src[f->next++]);
      if (!s)
        ok = false;
      else if (!s->done) /* new: a DAG never meets a node still on the stack */
        ok = VEC_PUSH(stack, depth, cap, ((Frame){s->u, 0}));
      continue;
    }
    CVal v;
    ok = eval_node(m, f->u, &v); /* unbound variables fail here */
    if (ok) {
      EvalSlot *s = &m->slots[ptrmap_get(&m->index, f->u)];
      s->v = v, s->done = true;
      depth--;
    }
  }
  free(stack);
  if (ok) *out = eval_value(m, root);
  return ok;
}

bool uop_eval(UOp *u, int nvars, UOp *const *vars, const CVal *vals, CVal *out) {
  EvalMemo m = {0};
  bool ok = true;
  for (int i = 0; ok && i < nvars; i++) { /* bound variables are evaluated up front */
    EvalSlot *s = eval_slot(&m, vars[i]);
    ok = s != NULL && eval_scalar(vars[i]->dtype);
    if (ok) s->v = eval_truncate((ScalarType)vars[i]->dtype.scalar, vals[i]), s->done = true;
  }
  ok = ok && eval_walk(&m, u, out);
  ptrmap_free(&m.index);
  free(m.slots);
  return ok;
}
