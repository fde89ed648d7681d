/* The symbolic rule tables (tinygrad's symbolic_simple and symbolic) and
 * uop_simplify. Each rule carries its algebra; "int" means the rule is only used
 * on integer dtypes, "exact" that it relies on proven bounds (uop_bounds_exact).
 * Integer ADD and MUL form a ring under wrap-around, so rules that only
 * reassociate, commute or distribute them need no bounds; everything involving
 * division, order or magnitude does (see symbolic_divmod.c). */
#include <math.h>
#include <pthread.h>

#include "alu.h"
#include "symbolic_internal.h"

/* capture slots */
enum { R = 1, X, Y, C1, C2 };

#define INTS DT_BITS_INT
#define INTB (DT_BITS_INT | DT_BIT(DT_BOOL))
#define BOOLS DT_BIT(DT_BOOL)

/* x (any), an int x, a bool x, a CONST */
#define V(s) PAT_ANY(s)
#define VI(s) UPAT(.slot = (s), .dtypes = INTS)
#define VB(s) UPAT(.slot = (s), .dtypes = BOOLS)
#define K(s) PAT_CONST(s)
/* op o captured as R, restricted to dtypes dts (0: any), sources in order / any order */
#define ROOT(o, dts) UPAT(.ops = P_OPS(o), .dtypes = (dts), .slot = R)
#define OP2(o, dts, a, b)                                                                          \
  UPAT(.ops = P_OPS(o), .dtypes = (dts), .slot = R, .kind = UPAT_SRC_TUPLE, .src = P_SRC(a, b),    \
       .nsrc = 2)
#define COMM2(o, dts, a, b)                                                                        \
  UPAT(.ops = P_OPS(o), .dtypes = (dts), .slot = R, .kind = UPAT_SRC_PERM, .src = P_SRC(a, b),     \
       .nsrc = 2)

/* ---------------------------------------------------------------- helpers */

static bool scalar(const UOp *u) { return u->dtype.count == 1 && !dt_is_ptr(u->dtype); }
static UOp *bool_const(UOp *like, bool v) { return uop_const_int(like->ctx, DT(BOOL), v); }
static int64_t ring_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Truncating division when it does not overflow. */
static bool tdiv(int64_t a, int64_t b, int64_t *q) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  *q = a / b;
  return true;
}

/* ---------------------------------------------------------------- symbolic_simple */

/* op(CONST...) -> CONST, with the IR's ALU semantics */
static UOp *fold_consts(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R];
  CVal v[3], out;
  if (!scalar(u) || u->nsrc > 3) return NULL;
  for (uint32_t i = 0; i < u->nsrc; i++) v[i] = uop_const_val(u->src[i]);
  DType in = u->src[u->op == OP_WHERE ? 1 : 0]->dtype;
  if (!alu_exec((Op)u->op, (ScalarType)u->dtype.scalar, (ScalarType)in.scalar, v, &out))
    return NULL;
  return uop_const(u->ctx, u->dtype, out);
}

static UOp *ret_x(void *ctx, UOp **c) { return (void)ctx, c[X]; }
/* x + c -> x when c is -0.0 (x + -0.0 is x for every x, -0.0 included) */
static UOp *ret_x_plus_neg_zero(void *ctx, UOp **c) {
  (void)ctx;
  const UOp *k = c[R]->src[0] == c[X] ? c[R]->src[1] : c[R]->src[0];
  return k->op == OP_CONST && signbit(k->arg.f) ? c[X] : NULL;
}
/* Whether every loop of accumulator acc runs at least once (constant ends). */
static bool acc_loops_run(const UOp *acc) {
  for (uint32_t i = 1; i < acc->nsrc; i++) {
    const UOp *end = acc->src[i]->nsrc ? acc->src[i]->src[0] : NULL;
    if (acc->src[i]->op != OP_RANGE || !end || end->op != OP_CONST || end->arg.i < 1) return false;
  }
  return true;
}
static UOp *assign_noop(void *ctx, UOp **c) { return (void)ctx, c[X]->src[0]; }
static UOp *assign_max_const(void *ctx, UOp **c) {
  (void)ctx;
  return acc_loops_run(c[X]) ? uop_alu2(OP_MAX, c[X]->src[0], c[C1]) : NULL;
}
static UOp *ret_zero(void *ctx, UOp **c) {
  return (void)ctx, scalar(c[R]) ? uop_const_like(c[R], 0) : NULL;
}
static UOp *ret_false(void *ctx, UOp **c) {
  return (void)ctx, scalar(c[R]) ? bool_const(c[R], false) : NULL;
}
static UOp *ret_true(void *ctx, UOp **c) {
  return (void)ctx, scalar(c[R]) ? bool_const(c[R], true) : NULL;
}
static UOp *neg_x(void *ctx, UOp **c) {
  return (void)ctx, scalar(c[X]) ? uop_mul_c(c[X], -1) : NULL;
}

static UOp *sub_to_add(void *ctx, UOp **c) {
  (void)ctx;
  return scalar(c[X]) ? uop_add(c[X], uop_mul_c(c[Y], -1)) : NULL;
}

static UOp *where_const(void *ctx, UOp **c) {
  (void)ctx;
  return uop_const_double(c[C1]) != 0 ? c[X] : c[Y];
}

/* A gated load (index, value where off, gate) whose gate is a constant: the
 * plain load, or the value. An unrolled lane's gate folds to a constant,
 * and a GPU compiler rejects an index past the buffer that folded to a
 * constant (-1 at a pad) even where the gate keeps it from being read. */
static UOp *load_const_gate(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R];
  if (uop_const_double(c[C1]) == 0) return c[Y];
  return uop_new(u->ctx, OP_LOAD, u->dtype, 1, &c[X], arg_none());
}

/* x < 0 ? y : (0 < x ? x : x * 0) -> x < 0 ? y : x   (floats)
 * The form tvk_relu builds so that its derivative is 0 at +-0 (grad.c
 * differentiates the tensor graph; kernels are made after). Where x < 0 is
 * false, x is positive (the inner select gives x), a zero (x * +0 is that
 * zero, its sign kept) or NaN (x * +0 is NaN): x in every case. The
 * simpler select matters on the CPU: nested as it was, gcc's vectoriser
 * left one row of a matmul tile scalar under relu (104 vs 250 GFLOP/s). */
static UOp *relu_select(void *ctx, UOp **c) {
  (void)ctx;
  if (signbit(uop_const_double(c[C1]))) return NULL; /* x * -0 turns +0 into -0 */
  return uop_where(c[R]->src[0], c[Y], c[X]);
}

static UOp *not_x(void *ctx, UOp **c) { return (void)ctx, uop_ne(c[X], bool_const(c[X], true)); }

/* c op x -> x op c: constants second, so equal expressions intern equal */
static UOp *const_second(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R];
  if (u->nsrc != 2 || u->src[0]->op != OP_CONST || u->src[1]->op == OP_CONST) return NULL;
  return uop_alu2((Op)u->op, u->src[1], u->src[0]);
}

/* cast(c) or bitcast(c) -> c converted (bitcast: its bits read as the other dtype) */
static UOp *cast_const(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R], *k = u->src[0];
  if (!scalar(u)) return NULL;
  ScalarType from = (ScalarType)k->dtype.scalar, to = (ScalarType)u->dtype.scalar;
  CVal v = uop_const_val(k);
  return uop_const(u->ctx, u->dtype,
                   u->op == OP_BITCAST ? cval_bitcast(v, from, to) : cval_cast(v, from, to));
}

static UOp *cast_noop(void *ctx, UOp **c) {
  (void)ctx;
  return dt_eq(c[R]->dtype, c[X]->dtype) ? c[X] : NULL;
}

/* x / ±0 -> x * ±inf   (floats): the same IEEE result for every x (0 and NaN
 * give NaN, others ±inf), but no division by a literal zero, which GLSL leaves
 * undefined and glslang folds to 0. */
static UOp *fdiv_zero(void *ctx, UOp **c) {
  (void)ctx;
  UOp *k = c[C1];
  if (!scalar(c[R]) || !dt_is_float(k->dtype)) return NULL;
  double z = uop_const_double(k);
  return uop_alu2(OP_MUL, c[X],
                  uop_const_float(k->ctx, k->dtype, signbit(z) ? -INFINITY : INFINITY));
}

static const Rule simple_rules[] = {
    /* op(c1, c2, ...) -> the constant it computes */
    {UPAT(.groups = G_ALU, .slot = R, .kind = UPAT_SRC_REPEAT, .src = P_SRC(K(0)), .nsrc = 1),
     fold_consts},
    /* c op x -> x op c for commutative ops */
    {UPAT(.groups = G_COMMUTATIVE, .slot = R, .kind = UPAT_SRC_TUPLE, .src = P_SRC(K(0), V(0)),
          .nsrc = 2),
     const_second},
    /* x + 0 -> x   (int, bool; a float x + 0.0 is +0.0 for x = -0.0: only x + -0.0 is x) */
    {COMM2(OP_ADD, INTB, V(X), PAT_CONST_VAL(0)), ret_x},
    {COMM2(OP_ADD, DT_BITS_FLOAT, V(X), PAT_CONST_VAL(0)), ret_x_plus_neg_zero},
    /* x * 1 -> x */
    {COMM2(OP_MUL, 0, V(X), PAT_CONST_VAL(1)), ret_x},
    /* x * 0 -> 0   (int, bool; not floats: NaN * 0 is NaN) */
    {COMM2(OP_MUL, INTB, V(X), PAT_CONST_VAL(0)), ret_zero},
    /* x - y -> x + y*-1   (int: the seed's canonical form, so sums see it) */
    {OP2(OP_SUB, INTS, V(X), V(Y)), sub_to_add},
    /* -x -> x*-1   (int) */
    {UPAT(.ops = P_OPS(OP_NEG), .dtypes = INTS, .slot = R, .kind = UPAT_SRC_TUPLE,
          .src = P_SRC(V(X)), .nsrc = 1),
     neg_x},
    /* -(-x) -> x */
    {UPAT(.ops = P_OPS(OP_NEG), .kind = UPAT_SRC_TUPLE, .nsrc = 1,
          .src = P_SRC(
              UPAT(.ops = P_OPS(OP_NEG), .kind = UPAT_SRC_TUPLE, .nsrc = 1, .src = P_SRC(V(X))))),
     ret_x},
    /* x / 0 -> x * inf   (floats) */
    {OP2(OP_FDIV, 0, V(X), UPAT(.ops = P_OPS(OP_CONST), .cval = &(const CVal){.f = 0}, .slot = C1)),
     fdiv_zero},
    /* x // 1 -> x   (int) */
    {OP2(OP_IDIV, INTS, V(X), PAT_CONST_VAL(1)), ret_x},
    /* x // -1 -> x*-1   (int; both wrap the same way at the minimum) */
    {OP2(OP_IDIV, INTS, V(X), PAT_CONST_VAL(-1)), neg_x},
    /* x % 1 -> 0, x % -1 -> 0   (int) */
    {OP2(OP_MOD, INTS, V(X), PAT_CONST_VAL(1)), ret_zero},
    {OP2(OP_MOD, INTS, V(X), PAT_CONST_VAL(-1)), ret_zero},
    /* x // 0 -> 0, x % 0 -> 0   (int: the IR defines both as 0) */
    {OP2(OP_IDIV, INTS, V(X), PAT_CONST_VAL(0)), ret_zero},
    {OP2(OP_MOD, INTS, V(X), PAT_CONST_VAL(0)), ret_zero},
    /* x % x -> 0   (int; x % 0 is 0 too) */
    {OP2(OP_MOD, INTS, V(X), V(X)), ret_zero},
    /* max(x, x) -> x, x & x -> x, x | x -> x */
    {UPAT(.groups = G_IDEMPOTENT, .kind = UPAT_SRC_TUPLE, .src = P_SRC(V(X), V(X)), .nsrc = 2),
     ret_x},
    /* an accumulator whose update is idempotent in its loops: acc = acc -> its
     * start, acc = max(acc, c) -> max(start, c) (lavapipe miscompiles the
     * loop form of the second into the start value) */
    {PAT_OP(OP_ASSIGN, 0, PAT_OP0(OP_DEFINE_ACC, X), V(X)), assign_noop},
    {PAT_OP(OP_ASSIGN, 0, PAT_OP0(OP_DEFINE_ACC, X), COMM2(OP_MAX, 0, V(X), K(C1))),
     assign_max_const},
    /* x < x -> false   (floats too: NaN < NaN is false) */
    {OP2(OP_CMPLT, 0, V(X), V(X)), ret_false},
    /* x != x -> false   (int, bool; not floats: NaN != NaN) */
    {OP2(OP_CMPNE, 0, UPAT(.slot = X, .dtypes = INTB), V(X)), ret_false},
    /* x & 0 -> 0, x & false -> false   (int, bool) */
    {COMM2(OP_AND, INTB, V(X), PAT_CONST_VAL(0)), ret_zero},
    /* x | 0 -> x, x ^ 0 -> x, x | false -> x   (int, bool) */
    {COMM2(OP_OR, INTB, V(X), PAT_CONST_VAL(0)), ret_x},
    {COMM2(OP_XOR, INTB, V(X), PAT_CONST_VAL(0)), ret_x},
    /* x & true -> x, x | true -> true   (bool) */
    {COMM2(OP_AND, BOOLS, V(X), PAT_CONST_VAL(1)), ret_x},
    {COMM2(OP_OR, BOOLS, V(X), PAT_CONST_VAL(1)), ret_true},
    /* x != false -> x   (bool) */
    {COMM2(OP_CMPNE, 0, VB(X), PAT_CONST_VAL(0)), ret_x},
    /* (c ? x : y) with a constant c -> x or y */
    {PAT_OP(OP_WHERE, 0, K(C1), V(X), V(Y)), where_const},
    /* a gated load with a constant gate -> the load, or its value when off */
    {PAT_OP(OP_LOAD, R, V(X), V(Y), K(C1)), load_const_gate},
    /* x < 0 ? y : (0 < x ? x : x * +0) -> x < 0 ? y : x   (floats: relu) */
    {UPAT(.ops = P_OPS(OP_WHERE), .dtypes = DT_BITS_FLOAT, .slot = R, .kind = UPAT_SRC_TUPLE,
          .nsrc = 3,
          .src = P_SRC(PAT_OP(OP_CMPLT, 0, V(X), PAT_CONST_VAL(0)), V(Y),
                       PAT_OP(OP_WHERE, 0, PAT_OP(OP_CMPLT, 0, PAT_CONST_VAL(0), V(X)), V(X),
                              PAT_OP(OP_MUL, 0, V(X), K(C1))))),
     relu_select},
    /* (c ? x : x) -> x */
    {PAT_OP(OP_WHERE, 0, V(0), V(X), V(X)), ret_x},
    /* (c ? true : false) -> c, (c ? false : true) -> not c */
    {PAT_OP(OP_WHERE, 0, V(X), PAT_CONST_VAL(1),
            UPAT(.ops = P_OPS(OP_CONST), .dtypes = BOOLS, .cval = &(const CVal){.f = 0})),
     ret_x},
    {PAT_OP(OP_WHERE, 0, V(X), PAT_CONST_VAL(0),
            UPAT(.ops = P_OPS(OP_CONST), .dtypes = BOOLS, .cval = &(const CVal){.f = 1})),
     not_x},
    /* cast(c) -> c converted */
    {UPAT(.ops = P_OPS(OP_CAST), .slot = R, .kind = UPAT_SRC_TUPLE, .src = P_SRC(K(0)), .nsrc = 1),
     cast_const},
    /* bitcast(c) -> c's bits as the other dtype */
    {UPAT(.ops = P_OPS(OP_BITCAST), .slot = R, .kind = UPAT_SRC_TUPLE, .src = P_SRC(K(0)),
          .nsrc = 1),
     cast_const},
    /* cast(x) to x's own dtype -> x */
    {UPAT(.ops = P_OPS(OP_CAST), .slot = R, .kind = UPAT_SRC_TUPLE, .src = P_SRC(V(X)), .nsrc = 1),
     cast_noop},
};

/* ---------------------------------------------------------------- symbolic */

/* any int/bool op whose bounds are one value -> that value   (exact) */
static UOp *fold_bounds(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R];
  if (!scalar(u) || !uop_bounds_exact(u) || uop_vmin(u) != uop_vmax(u)) return NULL;
  return uop_const_int(u->ctx, u->dtype, uop_vmin(u));
}

/* In a Sum: (x//c)*c*g + (x%c)*g -> x*g (C's x == (x/c)*c + x%c, any x, c != 0),
 * and ((x//c0)%c1)*c0*g + (x%c0)*g -> (x%(c0*c1))*g (mixed radix: both sides are
 * sign(x) times the same digits, c0, c1 > 0). */
static bool merge_pair(UOp *like, SymTerm *hi, SymTerm *lo) {
  UOp *m = lo->v, *d = hi->v;
  int64_t c, c1, f;
  if (m->op != OP_MOD || !sym_const(m->src[1], &c) || c == 0) return false;
  if (__builtin_mul_overflow(c, lo->f, &f) || f != hi->f) return false;
  if (d->op == OP_IDIV && d->src[0] == m->src[0] && d->src[1] == m->src[1]) {
    lo->v = m->src[0], hi->f = 0;
    return true;
  }
  if (d->op == OP_MOD && sym_const(d->src[1], &c1) && c1 > 0 && c > 0 && d->src[0]->op == OP_IDIV &&
      d->src[0]->src[0] == m->src[0] && d->src[0]->src[1] == m->src[1] &&
      !__builtin_mul_overflow(c, c1, &f) && sym_fits(like->dtype, f)) {
    lo->v = uop_mod_c(m->src[0], f), hi->f = 0;
    return true;
  }
  return false;
}

/* Sums of int terms: x + x -> x*2, x*a + x*b -> x*(a+b), (x + c1) + c2 -> x + (c1+c2),
 * (x + c) + y -> (x + y) + c, x + 0 -> x, and the div/mod pairs above. The result
 * is left-associated, terms in first-seen order, the constant last.   (int: ring) */
static UOp *collect_terms(void *ctx, UOp **c) {
  (void)ctx;
  UOp *u = c[R];
  SymSum s;
  if (!sym_is_int(u) || !sym_split(u, &s)) return NULL;
  for (int i = 0; i < s.n; i++)
    for (int j = 0; j < s.n; j++)
      if (i != j && s.t[i].f != 0 && s.t[j].f != 0) merge_pair(u, &s.t[i], &s.t[j]);
  UOp *r = sym_build(u, &s);
  return r == u ? NULL : r;
}

/* (x * c1) * c2 -> x * (c1*c2)   (int: ring) */
static UOp *mul_consts(void *ctx, UOp **c) {
  (void)ctx;
  int64_t a, b;
  if (!sym_is_int(c[R]) || !sym_const(c[C1], &a) || !sym_const(c[C2], &b)) return NULL;
  return uop_mul_c(c[X], ring_mul(a, b));
}

/* (x * c) * y -> (x * y) * c   (int: ring; constants to the top of products) */
static UOp *mul_const_out(void *ctx, UOp **c) {
  (void)ctx;
  if (!sym_is_int(c[R]) || c[Y]->op == OP_CONST) return NULL;
  return uop_mul(uop_mul(c[X], c[Y]), c[C1]);
}

/* (x + y) * c -> x*c + y*c   (int: ring) */
static UOp *distribute(void *ctx, UOp **c) {
  (void)ctx;
  if (!sym_is_int(c[R])) return NULL;
  return uop_add(uop_mul(c[X], c[C1]), uop_mul(c[Y], c[C1]));
}

/* x // c: c < 0 -> (x // -c) * -1 (truncation is odd); (x // a) // b -> x // (a*b)
 * (truncation nests, a, b != 0); else the folds of symbolic_divmod.c   (int) */
static UOp *fold_idiv(void *ctx, UOp **c) {
  (void)ctx;
  UOp *x = c[X];
  int64_t k, a, ab;
  if (!sym_is_int(x) || !sym_const(c[C1], &k)) return NULL;
  if (k < -1 && sym_fits(x->dtype, -k)) return uop_mul_c(uop_idiv_c(x, -k), -1);
  if (x->op == OP_IDIV && sym_const(x->src[1], &a) && a != 0 && k != 0 &&
      !__builtin_mul_overflow(a, k, &ab) && sym_fits(x->dtype, ab))
    return uop_idiv_c(x->src[0], ab);
  return k > 1 ? sym_fold_div(x, k) : NULL;
}

/* x % c: c < 0 -> x % -c (the sign is the dividend's); x % c -> x - q*c when
 * x // c is the constant q over x's range (exact); (x % a) % b -> x % b when b
 * divides a; else the folds of symbolic_divmod.c   (int) */
static UOp *fold_mod(void *ctx, UOp **c) {
  (void)ctx;
  UOp *x = c[X];
  int64_t k, a, qlo, qhi, qk;
  if (!sym_is_int(x) || !sym_const(c[C1], &k) || k == 0) return NULL;
  if (k < 0) return k != INT64_MIN && sym_fits(x->dtype, -k) ? uop_mod_c(x, -k) : NULL;
  if (uop_bounds_exact(x) && tdiv(uop_vmin(x), k, &qlo) && tdiv(uop_vmax(x), k, &qhi) &&
      qlo == qhi && !__builtin_mul_overflow(qlo, k, &qk))
    return qk == 0 ? x : uop_add_c(x, -qk);
  if (x->op == OP_MOD && sym_const(x->src[1], &a) && a != 0 && a % k == 0)
    return uop_mod_c(x->src[0], k);
  return sym_fold_mod(x, k);
}

/* x // x -> 1 when x is never 0   (int, exact) */
static UOp *div_self(void *ctx, UOp **c) {
  (void)ctx;
  UOp *x = c[X];
  if (!sym_is_int(x) || !uop_bounds_exact(x) || (uop_vmin(x) <= 0 && uop_vmax(x) >= 0)) return NULL;
  return uop_const_like(x, 1);
}

/* The int y of x = cast(y) when the cast kept y's value (a widening), else
 * NULL: a compare of x with a constant that fits y's dtype is y's compare.
 * Indices are int32 and tensor data often int64 (ONNX's), so this keeps
 * masks such as col - row >= k (Trilu) in 32 bits, which GPUs do natively;
 * lavapipe 22.3 also miscompiled 0 < int64(x % 5) (always true). */
static UOp *widened(UOp *x, int64_t k) {
  if (x->op != OP_CAST || !scalar(x) || !dt_is_int(x->dtype)) return NULL;
  UOp *y = x->src[0];
  if (!scalar(y) || !dt_is_int(y->dtype) || !uop_bounds_exact(y) || !sym_fits(y->dtype, k) ||
      !sym_fits(x->dtype, uop_vmin(y)) || !sym_fits(x->dtype, uop_vmax(y)))
    return NULL;
  return y;
}

/* x < c and c < x: on the narrower int when x widens one (widened), else
 * see sym_fold_lt / sym_fold_gt   (int, exact) */
static UOp *lt_x_c(void *ctx, UOp **c) {
  (void)ctx;
  int64_t k;
  if (c[X]->op == OP_CONST || !sym_const(c[C1], &k)) return NULL;
  UOp *y = widened(c[X], k);
  return y ? uop_lt_c(y, k) : sym_fold_lt(c[X], k);
}
static UOp *lt_c_x(void *ctx, UOp **c) {
  (void)ctx;
  int64_t k;
  if (c[X]->op == OP_CONST || !sym_const(c[C1], &k)) return NULL;
  UOp *y = widened(c[X], k);
  return y ? uop_lt(uop_const_like(y, k), y) : sym_fold_gt(k, c[X]);
}

/* not (x < c) -> c-1 < x ; not (c < x) -> x < c+1   (int) */
static UOp *not_lt(void *ctx, UOp **c) {
  (void)ctx;
  UOp *lt = c[Y], *a = lt->src[0], *b = lt->src[1];
  int64_t k;
  if (!sym_is_int(a) || !scalar(c[R])) return NULL;
  if (sym_const(b, &k) && k > dt_min_i(b->dtype)) return uop_lt(uop_const_like(a, k - 1), a);
  if (sym_const(a, &k) && k < dt_max_i(a->dtype)) return uop_lt_c(b, k + 1);
  return NULL;
}

/* max(x, y) -> x when x >= y everywhere   (int, exact) */
static UOp *max_bounds(void *ctx, UOp **c) {
  (void)ctx;
  UOp *x = c[X], *y = c[Y];
  if (!sym_is_int(x) || !uop_bounds_exact(x) || !uop_bounds_exact(y)) return NULL;
  return uop_vmin(x) >= uop_vmax(y) ? x : NULL;
}

/* cast(cast(x, mid), to) -> cast(x, to) when x's range fits mid: the inner cast
 * kept the value   (int/bool x and mid, exact) */
static UOp *cast_cast(void *ctx, UOp **c) {
  (void)ctx;
  UOp *to = c[R], *mid = c[Y], *x = c[X];
  if (!scalar(to) || !scalar(x) || !(dt_is_int(x->dtype) || dt_is_bool(x->dtype))) return NULL;
  if (!uop_bounds_exact(x) || !sym_fits(mid->dtype, uop_vmin(x)) ||
      !sym_fits(mid->dtype, uop_vmax(x)))
    return NULL;
  return uop_cast(x, to->dtype);
}

static const Rule sym_rules[] = {
    /* an int/bool op or cast whose bounds are a single value -> that value */
    {UPAT(.groups = G_ALU, .dtypes = INTB, .slot = R), fold_bounds},
    {ROOT(OP_CAST, INTB), fold_bounds},
    /* sums: like terms, constants last, div/mod pairs   (see collect_terms) */
    {ROOT(OP_ADD, INTS), collect_terms},
    /* (x * c1) * c2 -> x * (c1*c2) */
    {COMM2(OP_MUL, INTS, PAT_COMM(OP_MUL, 0, V(X), K(C1)), K(C2)), mul_consts},
    /* (x * c) * y -> (x * y) * c */
    {COMM2(OP_MUL, INTS, PAT_COMM(OP_MUL, 0, V(X), K(C1)), V(Y)), mul_const_out},
    /* (x + y) * c -> x*c + y*c */
    {COMM2(OP_MUL, INTS, PAT_OP(OP_ADD, 0, V(X), V(Y)), K(C1)), distribute},
    /* x // c: sign, nesting, div folding */
    {OP2(OP_IDIV, INTS, V(X), K(C1)), fold_idiv},
    /* x % c: sign, one period, nesting, mod folding */
    {OP2(OP_MOD, INTS, V(X), K(C1)), fold_mod},
    /* x // x -> 1 when 0 is outside x's range */
    {OP2(OP_IDIV, INTS, V(X), V(X)), div_self},
    /* x < c, c < x: a widening cast dropped, constants to one side, divide by
     * factors, fold division */
    {OP2(OP_CMPLT, 0, VI(X), K(C1)), lt_x_c},
    {OP2(OP_CMPLT, 0, K(C1), VI(X)), lt_c_x},
    /* (x < y) != true  ->  y-1 < x  or  y < x+1 */
    {COMM2(OP_CMPNE, BOOLS, PAT_OP(OP_CMPLT, Y, V(0), V(0)), PAT_CONST_VAL(1)), not_lt},
    /* max(x, y) -> x when x.vmin >= y.vmax */
    {COMM2(OP_MAX, INTS, V(X), V(Y)), max_bounds},
    /* cast(cast(x)) -> cast(x) when the inner cast was lossless */
    {UPAT(.ops = P_OPS(OP_CAST), .slot = R, .kind = UPAT_SRC_TUPLE, .nsrc = 1,
          .src = P_SRC(UPAT(.ops = P_OPS(OP_CAST), .slot = Y, .kind = UPAT_SRC_TUPLE, .nsrc = 1,
                            .src = P_SRC(V(X))))),
     cast_cast},
};

/* ---------------------------------------------------------------- matchers */

static PatternMatcher *g_simple, *g_sym;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Immutable after this runs once; never freed (process lifetime). */
static void build_matchers(void) {
  g_simple = pm_new(simple_rules, RULES_N(simple_rules));
  PatternMatcher *sym = pm_new(sym_rules, RULES_N(sym_rules));
  if (g_simple && sym) g_sym = pm_concat(g_simple, sym);
  pm_free(sym);
}

const PatternMatcher *sym_simple_matcher(void) {
  pthread_once(&g_once, build_matchers);
  return g_simple;
}

const PatternMatcher *sym_matcher(void) {
  pthread_once(&g_once, build_matchers);
  return g_sym;
}

UOp *uop_simplify(UOp *u) {
  const PatternMatcher *pm = sym_matcher();
  return pm ? graph_rewrite(u, pm, NULL, false) : NULL;
}
