/* Tests of the rewrite engine (src/ir/pattern.c): matching, rule tables,
 * graph_rewrite in both orders, memoisation, deep graphs, substitution.
 *
 * Expected graphs are built by hand with the uop.h builders; interning makes
 * pointer equality structural equality, so a comparison is exact. The random
 * test checks the matcher against a second matcher written here the seed's
 * way (lists of capture sets), which shares no code with the engine. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ir/pattern.h"
#include "test_util.h"

enum { X = 1, Y, Z, C, D };

/* ---------------------------------------------------------------- helpers */

static UOp *ci(UTest *t, int64_t v) { return uop_const_int(t->ctx, DT(INT32), v); }
static UOp *var(UTest *t, const char *name) { return uop_var(t->ctx, name, 0, 100); }

static bool matches(const UPat *p, UOp *u) {
  UOp *caps[UPAT_SLOTS];
  return upat_match(p, u, caps);
}

/* A rule context that counts calls. */
typedef struct {
  int calls;
  int calls_b;
} Count;

/* ---------------------------------------------------------------- matching */

static void test_match_single_op(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y");
  UOp *add = uop_add(x, y), *mul = uop_mul(x, y);
  UOp *caps[UPAT_SLOTS];
  assert_true(upat_match(PAT_OP0(OP_ADD, X), add, caps));
  assert_ptr_equal(caps[0], add);
  assert_ptr_equal(caps[X], add);
  for (int s = 2; s < UPAT_SLOTS; s++) assert_null(caps[s]);
  assert_false(matches(PAT_OP0(OP_ADD, X), mul));
  assert_true(matches(PAT_ANY(0), mul));
  assert_true(matches(PAT_ANY(0), x));
  /* sources in order, each captured */
  assert_true(upat_match(PAT_OP(OP_MUL, Z, PAT_ANY(X), PAT_ANY(Y)), mul, caps));
  assert_ptr_equal(caps[X], x);
  assert_ptr_equal(caps[Y], y);
  assert_ptr_equal(caps[Z], mul);
  /* a source pattern of the wrong op */
  assert_false(matches(PAT_OP(OP_MUL, 0, PAT_CONST(C), PAT_ANY(Y)), mul));
  /* TUPLE without any_len: exact source count */
  assert_false(matches(PAT_OP(OP_MUL, 0, PAT_ANY(X)), mul));
  assert_false(matches(PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_ANY(Y), PAT_ANY(Z)), mul));
  ut_end(&t);
}

static void test_match_op_list_and_groups(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y");
  UOp *add = uop_add(x, y), *mul = uop_mul(x, y), *mx = uop_max(x, y), *dv = uop_idiv(x, y);
  UOp *neg = uop_neg(x), *lt = uop_lt(x, y);
  const UPat *add_mul = UPAT(.ops = P_OPS(OP_ADD, OP_MUL));
  assert_true(matches(add_mul, add));
  assert_true(matches(add_mul, mul));
  assert_false(matches(add_mul, mx));
  const UPat *comm = UPAT(.groups = G_COMMUTATIVE);
  assert_true(matches(comm, add));
  assert_true(matches(comm, mx));
  assert_false(matches(comm, dv));
  assert_false(matches(comm, lt));
  /* an op list and groups together accept the union */
  const UPat *either = UPAT(.ops = P_OPS(OP_IDIV), .groups = G_UNARY);
  assert_true(matches(either, dv));
  assert_true(matches(either, neg));
  assert_false(matches(either, add));
  /* G_ALU is derived from unary|binary|ternary */
  assert_true(matches(UPAT(.groups = G_ALU), uop_where(lt, x, y)));
  assert_false(matches(UPAT(.groups = G_ALU), x));
  ut_end(&t);
}

static void test_match_dtype(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *i32 = ci(&t, 1);
  UOp *i64 = uop_const_int(t.ctx, DT(INT64), 1);
  UOp *f32 = uop_const_float(t.ctx, DT(FLOAT32), 1.0);
  UOp *b = uop_const_int(t.ctx, DT(BOOL), 1);
  const UPat *fl = UPAT(.dtypes = DT_BIT(DT_FLOAT32));
  const UPat *ints = UPAT(.dtypes = DT_BITS_INT);
  assert_true(matches(fl, f32));
  assert_false(matches(fl, i32));
  assert_true(matches(ints, i32));
  assert_true(matches(ints, i64));
  assert_false(matches(ints, b));
  assert_true(matches(UPAT(.dtypes = DT_BIT(DT_BOOL) | DT_BIT(DT_INT64)), b));
  /* a vector and a pointer match by their scalar type */
  UOp *vec =
      uop_new(t.ctx, OP_VECTORIZE, dt_vec(DT(FLOAT32), 2), 2, (UOp *[]){f32, f32}, arg_none());
  UOp *ptr =
      uop_new(t.ctx, OP_DEFINE_GLOBAL, dt_ptr(DT(FLOAT32), ADDR_GLOBAL), 0, NULL, arg_int(0));
  assert_true(matches(fl, vec));
  assert_true(matches(fl, ptr));
  assert_false(matches(ints, vec));
  /* the dtype of a source pattern */
  const UPat *add_f = PAT_OP(OP_ADD, 0, UPAT(.dtypes = DT_BITS_FLOAT), PAT_ANY(0));
  UOp *fx = uop_new(t.ctx, OP_DEFINE_VAR, DT(FLOAT32), 0, NULL, arg_var("fx", 0, 1));
  assert_true(matches(add_f, uop_add(fx, f32)));
  assert_false(matches(add_f, uop_add(i32, i32)));
  ut_end(&t);
}

static void test_match_arg(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *r3 = uop_range_n(t.ctx, 10, 3), *r4 = uop_range_n(t.ctx, 10, 4);
  const UPat *p3 = UPAT(.ops = P_OPS(OP_RANGE), .arg = &(const Arg){.kind = ARG_INT, .i = 3});
  assert_true(matches(p3, r3));
  assert_false(matches(p3, r4));
  /* an arg of another kind never equals */
  const UPat *pf = UPAT(.arg = &(const Arg){.kind = ARG_FLOAT, .f = 3.0});
  assert_false(matches(pf, r3));
  /* tuples and strings compare by value, not by pointer */
  int64_t order[] = {1, 0, 2}, other[] = {1, 0, 2};
  UOp *x = var(&t, "x");
  UOp *perm = uop_new(t.ctx, OP_VCONST, DT(INT32), 1, &x, arg_ints(3, order));
  const UPat *pp =
      UPAT(.ops = P_OPS(OP_VCONST), .arg = &(const Arg){.kind = ARG_INTS, .ints = {3, other}});
  assert_true(matches(pp, perm));
  const UPat *pv = UPAT(.arg = &(const Arg){.kind = ARG_VAR, .var = {"x", 0, 100}});
  assert_true(matches(pv, x));
  assert_false(matches(pv, var(&t, "y")));
  ut_end(&t);
}

static void test_match_cval(void **state) {
  (void)state;
  UTest t = ut_begin();
  const UPat *zero = PAT_CONST_VAL(0);
  assert_true(matches(zero, ci(&t, 0)));
  assert_true(matches(zero, uop_const_float(t.ctx, DT(FLOAT32), 0.0)));
  assert_true(matches(zero, uop_const_float(t.ctx, DT(FLOAT64), -0.0)));
  assert_true(matches(zero, uop_const_int(t.ctx, DT(BOOL), 0)));
  assert_true(matches(zero, uop_const_int(t.ctx, DT(UINT8), 256))); /* wraps to 0 */
  assert_false(matches(zero, ci(&t, 1)));
  assert_false(matches(zero, var(&t, "x"))); /* not a CONST */
  /* a cval on a pattern of any op still requires a CONST */
  assert_false(matches(UPAT(.cval = &(const CVal){.f = 0}), uop_range_n(t.ctx, 0, 0)));
  const UPat *half = PAT_CONST_VAL(2.5);
  assert_true(matches(half, uop_const_float(t.ctx, DT(FLOAT32), 2.5)));
  assert_false(matches(half, ci(&t, 2)));
  const UPat *m1 = PAT_CONST_VAL(-1);
  assert_true(matches(m1, ci(&t, -1)));
  assert_true(matches(m1, uop_const_float(t.ctx, DT(FLOAT16), -1.0)));
  assert_false(matches(m1, uop_const_int(t.ctx, DT(UINT8), -1))); /* uint8 -1 is 255 */
  assert_true(matches(PAT_CONST_VAL(1), uop_const_int(t.ctx, DT(BOOL), 1)));
  ut_end(&t);
}

static void test_capture_repeated(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y");
  const UPat *xx = PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_ANY(X));
  UOp *caps[UPAT_SLOTS];
  assert_true(upat_match(xx, uop_add(x, x), caps));
  assert_ptr_equal(caps[X], x);
  assert_false(matches(xx, uop_add(x, y)));
  /* the same slot at different depths: (x*c) + x */
  const UPat *deep = PAT_OP(OP_ADD, 0, PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_CONST(C)), PAT_ANY(X));
  assert_true(upat_match(deep, uop_add(uop_mul_c(x, 3), x), caps));
  assert_ptr_equal(caps[X], x);
  assert_ptr_equal(caps[C], ci(&t, 3));
  assert_false(matches(deep, uop_add(uop_mul_c(x, 3), y)));
  /* a slot on the root and in a source can only agree on a cycle: never */
  assert_false(matches(PAT_OP(OP_NEG, X, PAT_ANY(X)), uop_neg(x)));
  ut_end(&t);
}

static void test_commutative_both_orders(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *one = ci(&t, 1);
  const UPat *comm = PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_CONST(C));
  const UPat *ordered = PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_CONST(C));
  UOp *caps[UPAT_SLOTS];
  assert_true(upat_match(comm, uop_add(x, one), caps));
  assert_ptr_equal(caps[X], x);
  assert_ptr_equal(caps[C], one);
  assert_true(upat_match(comm, uop_add(one, x), caps));
  assert_ptr_equal(caps[X], x);
  assert_ptr_equal(caps[C], one);
  assert_true(matches(ordered, uop_add(x, one)));
  assert_false(matches(ordered, uop_add(one, x)));
  /* three sources in any order */
  UOp *lt = uop_lt(x, one);
  const UPat *w = UPAT(.ops = P_OPS(OP_WHERE), .kind = UPAT_SRC_PERM,
                       .src = P_SRC(PAT_CONST(C), PAT_OP0(OP_CMPLT, Y), PAT_ANY(X)), .nsrc = 3);
  assert_true(upat_match(w, uop_where(lt, x, one), caps));
  assert_ptr_equal(caps[Y], lt);
  assert_ptr_equal(caps[C], one);
  assert_ptr_equal(caps[X], x);
  ut_end(&t);
}

static void test_repeat_and_any_len(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *c1 = ci(&t, 1), *c2 = ci(&t, 2);
  const UPat *all_const =
      UPAT(.ops = P_OPS(OP_SINK), .kind = UPAT_SRC_REPEAT, .src = P_SRC(PAT_CONST(0)), .nsrc = 1);
  assert_true(matches(all_const, uop_sink(t.ctx, 3, (UOp *[]){c1, c2, c1})));
  assert_true(matches(all_const, uop_sink(t.ctx, 1, &c2)));
  assert_true(matches(all_const, uop_sink(t.ctx, 0, NULL)));
  assert_false(matches(all_const, uop_sink(t.ctx, 2, (UOp *[]){c1, x})));
  /* REPEAT with a capture: every source must be the same node */
  const UPat *same = UPAT(.kind = UPAT_SRC_REPEAT, .src = P_SRC(PAT_ANY(X)), .nsrc = 1);
  UOp *caps[UPAT_SLOTS];
  assert_true(upat_match(same, uop_sink(t.ctx, 3, (UOp *[]){x, x, x}), caps));
  assert_ptr_equal(caps[X], x);
  assert_false(matches(same, uop_sink(t.ctx, 3, (UOp *[]){x, x, c1})));
  /* any_len: a prefix */
  const UPat *prefix = UPAT(.ops = P_OPS(OP_SINK), .kind = UPAT_SRC_TUPLE, .any_len = true,
                            .src = P_SRC(PAT_CONST(C)), .nsrc = 1);
  assert_true(upat_match(prefix, uop_sink(t.ctx, 3, (UOp *[]){c2, x, x}), caps));
  assert_ptr_equal(caps[C], c2);
  assert_true(matches(prefix, uop_sink(t.ctx, 1, &c1)));
  assert_false(matches(prefix, uop_sink(t.ctx, 2, (UOp *[]){x, c1})));
  assert_false(matches(prefix, uop_sink(t.ctx, 0, NULL))); /* fewer sources than patterns */
  assert_false(matches(PAT_OP(OP_SINK, 0, PAT_CONST(C)), uop_sink(t.ctx, 2, (UOp *[]){c1, c2})));
  ut_end(&t);
}

/* REPEAT over a node with 100,000 sources: the matcher loops over them rather
 * than nesting a C call per source. */
static void test_repeat_wide(void **state) {
  (void)state;
  UTest t = ut_begin();
  enum { N = 100000 };
  UOp **src = malloc(N * sizeof *src);
  assert_non_null(src);
  for (int i = 0; i < N; i++) src[i] = ci(&t, i % 7);
  UOp *sink = uop_sink(t.ctx, N, src);
  const UPat *all_const =
      UPAT(.ops = P_OPS(OP_SINK), .kind = UPAT_SRC_REPEAT, .src = P_SRC(PAT_CONST(0)), .nsrc = 1);
  assert_true(matches(all_const, sink));
  src[N - 1] = var(&t, "x");
  assert_false(matches(all_const, uop_sink(t.ctx, N, src)));
  free(src);
  ut_end(&t);
}

static void test_alt(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y"), *c = ci(&t, 5);
  const UPat *am = PAT_ALT(PAT_OP0(OP_ADD, X), PAT_OP0(OP_MUL, X));
  UOp *caps[UPAT_SLOTS];
  assert_true(upat_match(am, uop_add(x, y), caps));
  assert_ptr_equal(caps[X], uop_add(x, y));
  assert_true(matches(am, uop_mul(x, y)));
  assert_false(matches(am, uop_max(x, y)));
  /* ALT as a source: (const or var) - the first alternative that fits wins */
  const UPat *src_alt =
      PAT_OP(OP_ADD, 0, PAT_ALT(PAT_CONST(C), PAT_OP0(OP_DEFINE_VAR, Z)), PAT_ANY(Y));
  assert_true(upat_match(src_alt, uop_add(c, y), caps));
  assert_ptr_equal(caps[C], c);
  assert_null(caps[Z]);
  assert_true(upat_match(src_alt, uop_add(x, y), caps));
  assert_null(caps[C]);
  assert_ptr_equal(caps[Z], x);
  assert_false(matches(src_alt, uop_add(uop_neg(x), y)));
  /* an alternative that fits but fails later backtracks into the next one:
   * on a + b, ALT's first choice binds X = a, then the second source b is not
   * X; the second choice binds Y = a and X = b. */
  const UPat *later = PAT_OP(OP_ADD, 0, PAT_ALT(PAT_ANY(X), PAT_ANY(Y)), PAT_ANY(X));
  assert_true(upat_match(later, uop_add(x, y), caps));
  assert_ptr_equal(caps[X], y);
  assert_ptr_equal(caps[Y], x);
  assert_true(upat_match(later, uop_add(x, x), caps)); /* here the first choice fits */
  assert_ptr_equal(caps[X], x);
  assert_null(caps[Y]);
  ut_end(&t);
}

static void test_backtracking(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *a = var(&t, "a"), *b = var(&t, "b");
  UOp *caps[UPAT_SLOTS];
  /* x + x*c in any order, on (a*2) + a: the first order binds X = a*2 and then
   * fails on the second source; X must be unbound before the second order. */
  const UPat *p1 = PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_CONST(C)));
  assert_true(upat_match(p1, uop_add(uop_mul_c(a, 2), a), caps));
  assert_ptr_equal(caps[X], a);
  assert_ptr_equal(caps[C], ci(&t, 2));
  /* backtracking into an earlier sibling: (x*y) + y with MUL commutative, on
   * (a*b) + a. Order x=a,y=b of the MUL fails on the ADD's second source; the
   * matcher must go back and try x=b,y=a. */
  const UPat *p2 = PAT_OP(OP_ADD, 0, PAT_COMM(OP_MUL, 0, PAT_ANY(X), PAT_ANY(Y)), PAT_ANY(Y));
  assert_true(upat_match(p2, uop_add(uop_mul(a, b), a), caps));
  assert_ptr_equal(caps[X], b);
  assert_ptr_equal(caps[Y], a);
  assert_true(upat_match(p2, uop_add(uop_mul(a, b), b), caps));
  assert_ptr_equal(caps[X], a);
  assert_ptr_equal(caps[Y], b);
  assert_false(matches(p2, uop_add(uop_mul(a, b), ci(&t, 1))));
  /* a failed match leaves no stale capture: slots of the failed branch are NULL */
  const UPat *p3 = PAT_ALT(PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_CONST(C)),
                           PAT_OP(OP_ADD, 0, PAT_ANY(Y), PAT_ANY(Z)));
  assert_true(upat_match(p3, uop_add(a, b), caps));
  assert_null(caps[X]);
  assert_ptr_equal(caps[Y], a);
  assert_ptr_equal(caps[Z], b);
  ut_end(&t);
}

/* ---------------------------------------------------------------- rules */

/* Records each call's captures (X and C) and returns NULL until the n-th. */
typedef struct {
  int calls, succeed_at;
  UOp *seen_x[8], *seen_c[8];
} Trace;

static UOp *trace_rule(void *ctx, UOp **c) {
  Trace *tr = ctx;
  if (tr->calls < 8) tr->seen_x[tr->calls] = c[X], tr->seen_c[tr->calls] = c[C];
  return ++tr->calls == tr->succeed_at ? c[X] : NULL;
}
static UOp *count_rule(void *ctx, UOp **c) {
  (void)c;
  ((Count *)ctx)->calls++;
  return NULL;
}
static UOp *count_b_rule(void *ctx, UOp **c) {
  ((Count *)ctx)->calls_b++;
  return uop_neg(c[X]);
}

static const Rule trace_rules[] = {
    /* x + c in any order: records, returns x on the succeed_at-th match */
    {PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_CONST(C)), trace_rule},
};

static void test_null_tries_next_match(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(trace_rules, RULES_N(trace_rules));
  UOp *c1 = ci(&t, 1), *c2 = ci(&t, 2);
  /* 1 + 2 matches x + c twice: (x=1, c=2) then (x=2, c=1), in permutation order */
  Trace tr = {.succeed_at = 2};
  assert_ptr_equal(pm_rewrite(pm, uop_add(c1, c2), &tr), c2);
  assert_int_equal(tr.calls, 2);
  assert_ptr_equal(tr.seen_x[0], c1);
  assert_ptr_equal(tr.seen_c[0], c2);
  assert_ptr_equal(tr.seen_x[1], c2);
  assert_ptr_equal(tr.seen_c[1], c1);
  /* the first non-NULL result stops the enumeration */
  tr = (Trace){.succeed_at = 1};
  assert_ptr_equal(pm_rewrite(pm, uop_add(c1, c2), &tr), c1);
  assert_int_equal(tr.calls, 1);
  /* all NULL: no rewrite, every match tried */
  tr = (Trace){.succeed_at = 99};
  assert_null(pm_rewrite(pm, uop_add(c1, c2), &tr));
  assert_int_equal(tr.calls, 2);
  pm_free(pm);
  /* x + x in any order: the two orders of identical sub-patterns are one match
   * (the seed dedupes them); x + y in any order matches x + x twice */
  UOp *x = var(&t, "x");
  Rule same[] = {{PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_ANY(X)), trace_rule}};
  Rule diff[] = {{PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_ANY(C)), trace_rule}};
  pm = pm_new(same, 1);
  tr = (Trace){.succeed_at = 99};
  assert_null(pm_rewrite(pm, uop_add(x, x), &tr));
  assert_int_equal(tr.calls, 1);
  pm_free(pm);
  pm = pm_new(diff, 1);
  tr = (Trace){.succeed_at = 99};
  assert_null(pm_rewrite(pm, uop_add(x, x), &tr));
  assert_int_equal(tr.calls, 2);
  pm_free(pm);
  ut_end(&t);
}

static const Rule order_rules[] = {
    /* any ADD: counts, never rewrites */
    {PAT_OP0(OP_ADD, X), count_rule},
    /* any ADD -> -ADD (counts in calls_b) */
    {PAT_OP0(OP_ADD, X), count_b_rule},
    /* never reached for ADD: the rule above always answers */
    {PAT_OP0(OP_ADD, X), count_rule},
};

static void test_rule_order(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(order_rules, RULES_N(order_rules));
  UOp *x = var(&t, "x"), *add = uop_add(x, x);
  Count cnt = {0};
  assert_ptr_equal(pm_rewrite(pm, add, &cnt), uop_neg(add));
  assert_int_equal(cnt.calls, 1);
  assert_int_equal(cnt.calls_b, 1);
  /* no rule for MUL */
  assert_null(pm_rewrite(pm, uop_mul(x, x), &cnt));
  assert_int_equal(cnt.calls, 1);
  /* pm_concat: a's rules first, then b's */
  PatternMatcher *first = pm_new(order_rules + 1, 1), *second = pm_new(order_rules, 1);
  PatternMatcher *cat = pm_concat(second, first);
  cnt = (Count){0};
  assert_ptr_equal(pm_rewrite(cat, add, &cnt), uop_neg(add));
  assert_int_equal(cnt.calls, 1);
  assert_int_equal(cnt.calls_b, 1);
  PatternMatcher *cat2 = pm_concat(first, second);
  cnt = (Count){0};
  assert_ptr_equal(pm_rewrite(cat2, add, &cnt), uop_neg(add));
  assert_int_equal(cnt.calls, 0);
  pm_free(cat2);
  pm_free(cat);
  pm_free(first);
  pm_free(second);
  pm_free(pm);
  pm_free(NULL);
  ut_end(&t);
}

/* Returns the node itself: that is "no change", so the next rule runs. */
static UOp *self_rule(void *ctx, UOp **c) {
  ((Count *)ctx)->calls++;
  return c[0];
}

static const Rule self_rules[] = {
    /* x -> x: no change */
    {PAT_OP0(OP_NEG, 0), self_rule},
    /* -x -> x * -1 */
    {PAT_OP(OP_NEG, 0, PAT_ANY(X)), count_b_rule},
};

static void test_rule_returning_itself(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(self_rules, RULES_N(self_rules));
  UOp *x = var(&t, "x");
  Count cnt = {0};
  /* count_b_rule returns -x for -x: itself again, so no rewrite at all */
  assert_null(pm_rewrite(pm, uop_neg(x), &cnt));
  assert_int_equal(cnt.calls, 1);
  assert_int_equal(cnt.calls_b, 1);
  assert_ptr_equal(graph_rewrite(uop_neg(x), pm, &cnt, false), uop_neg(x));
  assert_ptr_equal(graph_rewrite(uop_neg(x), pm, &cnt, true), uop_neg(x));
  pm_free(pm);
  ut_end(&t);
}

static const Rule reject_rules[] = {
    /* SINK whose sources are all STOREs: counts */
    {UPAT(.ops = P_OPS(OP_SINK), .kind = UPAT_SRC_REPEAT, .src = P_SRC(PAT_OP0(OP_STORE, 0)),
          .nsrc = 1),
     count_rule},
    /* ADD(MUL, anything): counts */
    {PAT_OP(OP_ADD, 0, PAT_OP0(OP_MUL, 0), PAT_ANY(0)), count_rule},
    /* rules for any op (root without an op) run for every node: counts in calls_b */
    {PAT_ALT(PAT_OP0(OP_NEG, 0), PAT_ANY(X)), count_b_rule},
};

static void test_early_reject(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(reject_rules, 2);
  /* The seed's early reject: a rule whose source patterns name single ops
   * needs those ops among the node's sources. A REPEAT over zero sources
   * matches structurally, yet the rule is never tried on an empty SINK. */
  UOp *empty = uop_sink(t.ctx, 0, NULL);
  assert_true(matches(reject_rules[0].pat, empty));
  Count cnt = {0};
  assert_null(pm_rewrite(pm, empty, &cnt));
  assert_int_equal(cnt.calls, 0);
  /* a MUL among the sources lets the rule be tried */
  UOp *x = var(&t, "x");
  assert_null(pm_rewrite(pm, uop_add(uop_mul(x, x), x), &cnt));
  assert_int_equal(cnt.calls, 1);
  assert_null(pm_rewrite(pm, uop_add(x, uop_mul(x, x)), &cnt)); /* tried, does not match */
  assert_int_equal(cnt.calls, 1);
  pm_free(pm);
  /* an any-op root is indexed under every op */
  PatternMatcher *any = pm_new(reject_rules + 2, 1);
  cnt = (Count){0};
  assert_ptr_equal(pm_rewrite(any, x, &cnt), uop_neg(x));
  assert_ptr_equal(pm_rewrite(any, empty, &cnt), uop_neg(empty));
  assert_int_equal(cnt.calls_b, 2);
  pm_free(any);
  ut_end(&t);
}

/* ---------------------------------------------------------------- graph_rewrite */

static UOp *ret_x(void *ctx, UOp **c) {
  (void)ctx;
  return c[X];
}
/* (x + y) * c -> x*c + y*c */
static UOp *distribute(void *ctx, UOp **c) {
  (void)ctx;
  return uop_add(uop_mul(c[X], c[C]), uop_mul(c[Y], c[C]));
}

static const Rule td_bu_rules[] = {
    /* x + 0 -> x */
    {PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_CONST_VAL(0)), ret_x},
    /* (x + y) * c -> x*c + y*c */
    {PAT_OP(OP_MUL, 0, PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_ANY(Y)), PAT_CONST(C)), distribute},
};

/* The graph (v + 0) * 3 under "x + 0 -> x" and "(x + y) * c -> x*c + y*c".
 *
 * Top-down rewrites sources first: v + 0 becomes v, the MUL is rebuilt as
 * v * 3, and the distribution rule no longer sees an ADD: the result is v * 3.
 *
 * Bottom-up tries the rules on the root first: it distributes into
 * v*3 + 0*3. "x + 0" does not fire on that ADD, since 0*3 is a MUL and no rule
 * folds it; the sources v*3 and 0*3 have no rules either: the result is
 * v*3 + 0*3. */
static void test_top_down_vs_bottom_up(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(td_bu_rules, RULES_N(td_bu_rules));
  UOp *v = var(&t, "v"), *c0 = ci(&t, 0), *c3 = ci(&t, 3);
  UOp *g = uop_mul(uop_add(v, c0), c3);
  assert_ptr_equal(graph_rewrite(g, pm, NULL, false), uop_mul(v, c3));
  assert_ptr_equal(graph_rewrite(g, pm, NULL, true), uop_add(uop_mul(v, c3), uop_mul(c0, c3)));
  pm_free(pm);
  ut_end(&t);
}

static UOp *fold_add(void *ctx, UOp **c) {
  (void)ctx;
  return uop_const_like(c[C], uop_const_val(c[C]).i + uop_const_val(c[D]).i);
}
static UOp *fold_mul(void *ctx, UOp **c) {
  (void)ctx;
  return uop_const_like(c[C], uop_const_val(c[C]).i * uop_const_val(c[D]).i);
}
static UOp *neg_to_mul(void *ctx, UOp **c) {
  (void)ctx;
  return uop_mul_c(c[X], -1);
}
/* (x * c) * d -> x * (c*d) */
static UOp *mul_mul(void *ctx, UOp **c) {
  (void)ctx;
  return uop_mul_c(c[X], uop_const_val(c[C]).i * uop_const_val(c[D]).i);
}

static const Rule fold_rules[] = {
    /* c + d -> the constant */
    {PAT_OP(OP_ADD, 0, PAT_CONST(C), PAT_CONST(D)), fold_add},
    /* c * d -> the constant */
    {PAT_OP(OP_MUL, 0, PAT_CONST(C), PAT_CONST(D)), fold_mul},
    /* x + 0 -> x */
    {PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_CONST_VAL(0)), ret_x},
    /* x * 1 -> x */
    {PAT_COMM(OP_MUL, 0, PAT_ANY(X), PAT_CONST_VAL(1)), ret_x},
    /* -x -> x * -1 */
    {PAT_OP(OP_NEG, 0, PAT_ANY(X)), neg_to_mul},
    /* (x * c) * d -> x * (c*d) */
    {PAT_OP(OP_MUL, 0, PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_CONST(C)), PAT_CONST(D)), mul_mul},
    /* (x + y) * c -> x*c + y*c */
    {PAT_OP(OP_MUL, 0, PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_ANY(Y)), PAT_CONST(C)), distribute},
};

static void test_fixed_point(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(fold_rules, RULES_N(fold_rules));
  UOp *v = var(&t, "v");
  for (int bu = 0; bu < 2; bu++) {
    /* -(v*3): NEG becomes (v*3)*-1, which the MUL-MUL rule then folds */
    assert_ptr_equal(graph_rewrite(uop_neg(uop_mul_c(v, 3)), pm, NULL, bu), uop_mul_c(v, -3));
    /* v*1 + (2+3)*0 -> v + 5*0 -> v + 0 -> v */
    UOp *g = uop_add(uop_mul_c(v, 1), uop_mul(uop_add(ci(&t, 2), ci(&t, 3)), ci(&t, 0)));
    assert_ptr_equal(graph_rewrite(g, pm, NULL, bu), v);
    /* (v + 0) * 3: with folding, bottom-up's v*3 + 0*3 also reaches v*3 */
    assert_ptr_equal(graph_rewrite(uop_mul(uop_add(v, ci(&t, 0)), ci(&t, 3)), pm, NULL, bu),
                     uop_mul_c(v, 3));
    /* a chain of folds: ((1 + 2) + 3) + ... + 100 = 5050 */
    UOp *s = ci(&t, 1);
    for (int i = 2; i <= 100; i++) s = uop_add(s, ci(&t, i));
    assert_ptr_equal(graph_rewrite(s, pm, NULL, bu), ci(&t, 5050));
    /* nothing applies: the same pointer comes back */
    UOp *plain = uop_add(v, uop_mul(v, v));
    assert_ptr_equal(graph_rewrite(plain, pm, NULL, bu), plain);
  }
  pm_free(pm);
  ut_end(&t);
}

static UOp *fold_chain(void *ctx, UOp **c) {
  ((Count *)ctx)->calls++;
  return uop_add_c(c[X], uop_const_val(c[C]).i + uop_const_val(c[D]).i);
}
static const Rule chain_rules[] = {
    /* (x + c) + d -> x + (c+d) */
    {PAT_OP(OP_ADD, 0, PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_CONST(C)), PAT_CONST(D)), fold_chain},
};

/* A chain of 100,000 ADDs: (((x + 1) + 1) + ...) + 1 -> x + 100000. Both
 * orders call the rule once per level but the first: top-down folds each
 * level into x + k as it climbs; bottom-up folds the root down the chain,
 * (L[n-1] + 1) -> L[n-2] + 2 -> ... -> x + n, never visiting the old levels. */
static void test_deep_chain(void **state) {
  (void)state;
  enum { N = 100000 };
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(chain_rules, RULES_N(chain_rules));
  UOp *x = var(&t, "x"), *e = x;
  for (int i = 0; i < N; i++) e = uop_add_c(e, 1);
  size_t live_in = uctx_live(t.ctx); /* x, the const 1, N ADDs */
  assert_int_equal(live_in, N + 2);
  for (int bu = 0; bu < 2; bu++) {
    Count cnt = {0};
    UOp *r = graph_rewrite(e, pm, &cnt, bu);
    assert_ptr_equal(r, uop_add_c(x, N));
    assert_int_equal(cnt.calls, N - 1);
    /* temporaries are gone: the input, plus the result's ADD and constant */
    assert_int_equal(uctx_live(t.ctx), live_in + 2);
  }
  pm_free(pm);
  ut_end(&t);
}

static UOp *double_to_mul(void *ctx, UOp **c) {
  ((Count *)ctx)->calls_b++;
  return uop_mul_c(c[X], 2);
}
static const Rule share_rules[] = {
    /* every node: counts how often rules are tried */
    {PAT_ANY(0), count_rule},
    /* x + x -> x * 2 */
    {PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_ANY(X)), double_to_mul},
};

/* 60 levels of x = x + x: 61 nodes, 2^60 paths. Memoisation makes the rewrite
 * visit each node once (without it this test would not finish). */
static void test_memo_sharing(void **state) {
  (void)state;
  enum { L = 60 };
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(share_rules, RULES_N(share_rules));
  UOp *x = var(&t, "x"), *e = x, *want = x;
  for (int i = 0; i < L; i++) e = uop_add(e, e), want = uop_mul_c(want, 2);
  /* Top-down, with m[0] = x and m[i] = m[i-1]*2: x and the constant 2 are
   * tried once each. l[1] = x + x is tried and becomes m[1], tried too. For
   * i > 1 the sources of l[i] changed, so l[i] itself is not tried: it is
   * rebuilt as m[i-1] + m[i-1], which is tried and becomes m[i], tried too.
   * That is 2 + 2L tries. */
  Count cnt = {0};
  assert_ptr_equal(graph_rewrite(e, pm, &cnt, false), want);
  assert_int_equal(cnt.calls_b, L);
  assert_int_equal(cnt.calls, 2 + 2 * L);
  /* Bottom-up: each l[i] is tried and becomes l[i-1]*2, tried too; that node
   * is rebuilt as m[i-1]*2 once its source changed (all levels but the first),
   * and tried again; plus x and 2: 2L + (L-1) + 2 tries. */
  cnt = (Count){0};
  assert_ptr_equal(graph_rewrite(e, pm, &cnt, true), want);
  assert_int_equal(cnt.calls_b, L);
  assert_int_equal(cnt.calls, 2 * L + (L - 1) + 2);
  pm_free(pm);
  ut_end(&t);
}

/* A wide, shared DAG: a grid where node (i, j) = (i-1, j) + (i, j-1); with
 * an empty rule table the result is the input, and every node was visited
 * once (counted by an any-op rule). */
static void test_grid_dag(void **state) {
  (void)state;
  enum { W = 40 };
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(share_rules, 1);
  UOp *row[W];
  for (int j = 0; j < W; j++) row[j] = ci(&t, j);
  for (int i = 1; i < W; i++) {
    row[0] = uop_add(row[0], ci(&t, -i));
    for (int j = 1; j < W; j++) row[j] = uop_add(row[j], row[j - 1]);
  }
  size_t n;
  UOp **all = uop_toposort(row[W - 1], &n);
  assert_non_null(all);
  free(all);
  for (int bu = 0; bu < 2; bu++) {
    Count cnt = {0};
    assert_ptr_equal(graph_rewrite(row[W - 1], pm, &cnt, bu), row[W - 1]);
    assert_int_equal(cnt.calls, (int)n);
  }
  pm_free(pm);
  ut_end(&t);
}

static UOp *swap_rule(void *ctx, UOp **c) {
  (void)ctx;
  return uop_add(c[Y], c[X]);
}
static const Rule cycle_rules[] = {
    /* x + y -> y + x: a rule table bug, it never reaches a fixed point */
    {PAT_OP(OP_ADD, 0, PAT_ANY(X), PAT_ANY(Y)), swap_rule},
};

/* Rules that loop (a -> b -> a) are a bug in a rule table: graph_rewrite
 * asserts. Without asserts (NDEBUG) it stops at the repeated node rather than
 * hanging. Run in a child process so the abort does not end the suite. */
static void test_rule_cycle(void **state) {
  (void)state;
  for (int bu = 0; bu < 2; bu++) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      alarm(20);
      if (!freopen("/dev/null", "w", stderr)) _exit(4); /* the expected assert message */
      UCtx *ctx = uctx_new();
      PatternMatcher *pm = pm_new(cycle_rules, RULES_N(cycle_rules));
      UOp *a = uop_var(ctx, "a", 0, 1), *b = uop_var(ctx, "b", 0, 1);
      UOp *r = graph_rewrite(uop_add(a, b), pm, NULL, bu);
      _exit(r == uop_add(a, b) || r == uop_add(b, a) ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef NDEBUG
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
#else
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
#endif
  }
}

static void test_empty_matcher(void **state) {
  (void)state;
  UTest t = ut_begin();
  PatternMatcher *pm = pm_new(NULL, 0);
  assert_non_null(pm);
  UOp *g = uop_add(var(&t, "x"), ci(&t, 0));
  assert_ptr_equal(graph_rewrite(g, pm, NULL, false), g);
  assert_ptr_equal(graph_rewrite(g, pm, NULL, true), g);
  assert_null(pm_rewrite(pm, g, NULL));
  pm_free(pm);
  ut_end(&t);
}

/* ---------------------------------------------------------------- substitute */

static void test_substitute(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y"), *z = var(&t, "z");
  UOp *e = uop_add(uop_mul_c(x, 2), y);
  /* simultaneous: x -> y + 1 and y -> x, the new y + 1 is not substituted */
  UOp *from[] = {x, y}, *to[] = {uop_add_c(y, 1), x};
  assert_ptr_equal(uop_substitute(e, 2, from, to), uop_add(uop_mul_c(uop_add_c(y, 1), 2), x));
  /* a target containing its key: x -> x + 1 */
  UOp *sq = uop_mul(x, x), *x1 = uop_add_c(x, 1);
  assert_ptr_equal(uop_substitute(sq, 1, &x, &x1), uop_mul(x1, x1));
  /* the root itself */
  assert_ptr_equal(uop_substitute(x, 1, &x, &z), z);
  /* a whole subtree */
  UOp *sub = uop_mul_c(x, 2);
  assert_ptr_equal(uop_substitute(e, 1, &sub, &z), uop_add(z, y));
  /* no key present: the same pointer */
  assert_ptr_equal(uop_substitute(e, 1, &z, &x), e);
  assert_ptr_equal(uop_substitute(e, 0, NULL, NULL), e);
  /* a key given twice: the last pair wins */
  UOp *from2[] = {y, y}, *to2[] = {x, z};
  assert_ptr_equal(uop_substitute(e, 2, from2, to2), uop_add(uop_mul_c(x, 2), z));
  ut_end(&t);
}

static void test_substitute_deep(void **state) {
  (void)state;
  enum { N = 100000 };
  UTest t = ut_begin();
  UOp *x = var(&t, "x"), *y = var(&t, "y"), *e = x, *want = y;
  for (int i = 0; i < N; i++) e = uop_add_c(e, 1), want = uop_add_c(want, 1);
  assert_ptr_equal(uop_substitute(e, 1, &x, &y), want);
  ut_end(&t);
}

/* ---------------------------------------------------------------- random matching
 *
 * Random patterns against random graphs. The reference below is the seed's
 * UPat.match written out: a match returns the list of all capture sets, a
 * source tuple extends every set of the previous source. The engine must call
 * a rule function with exactly these sets, in this order. */

typedef struct {
  UOp *c[UPAT_SLOTS];
} Caps;

typedef struct {
  Caps *v;
  int n, cap;
} CapsList;

static void cl_push(CapsList *l, const Caps *c) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 8;
    l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
    assert_non_null(l->v);
  }
  l->v[l->n++] = *c;
}

static bool ref_same(const UPat *a, const UPat *b) {
  if (a == b) return true;
  if (a->kind != b->kind || a->slot != b->slot || a->nsrc != b->nsrc || a->groups != b->groups ||
      a->dtypes != b->dtypes || a->any_len != b->any_len || a->arg || b->arg || a->cval || b->cval)
    return false;
  if ((a->ops == NULL) != (b->ops == NULL)) return false;
  if (a->ops) {
    int i = 0;
    while (a->ops[i] != OP_NONE && a->ops[i] == b->ops[i]) i++;
    if (a->ops[i] != b->ops[i]) return false;
  }
  for (int i = 0; i < a->nsrc; i++)
    if (!ref_same(a->src[i], b->src[i])) return false;
  return true;
}

static bool ref_node(const UPat *p, const UOp *u) {
  bool op = !p->ops && !p->groups;
  if (p->groups & op_groups((Op)u->op)) op = true;
  for (const uint8_t *o = p->ops; o && *o; o++) op |= *o == u->op;
  return op && (!p->dtypes || (p->dtypes & DT_BIT(u->dtype.scalar)));
}

static CapsList ref_match(const UPat *p, UOp *u, Caps store);

/* All sets from matching srcs[i] against pats[i] in turn, from `start`. */
static CapsList ref_tuple(const UPat *const *pats, bool repeat, UOp *const *srcs, int n,
                          Caps start) {
  CapsList cur = {0};
  cl_push(&cur, &start);
  for (int i = 0; i < n; i++) {
    CapsList next = {0};
    for (int s = 0; s < cur.n; s++) {
      CapsList m = ref_match(pats[repeat ? 0 : i], srcs[i], cur.v[s]);
      for (int k = 0; k < m.n; k++) cl_push(&next, &m.v[k]);
      free(m.v);
    }
    free(cur.v);
    cur = next;
  }
  return cur;
}

static CapsList ref_match(const UPat *p, UOp *u, Caps store) {
  CapsList out = {0};
  if (!ref_node(p, u)) return out;
  if (p->slot) {
    if (store.c[p->slot] && store.c[p->slot] != u) return out;
    store.c[p->slot] = u;
  }
  int n = p->nsrc;
  bool len = p->any_len ? (int)u->nsrc >= n : (int)u->nsrc == n;
  switch ((UPatSrcKind)p->kind) {
  case UPAT_SRC_ANY: cl_push(&out, &store); return out;
  case UPAT_ALT:
    for (int i = 0; i < n; i++) {
      CapsList m = ref_match(p->src[i], u, store);
      for (int k = 0; k < m.n; k++) cl_push(&out, &m.v[k]);
      free(m.v);
    }
    return out;
  case UPAT_SRC_REPEAT: return ref_tuple(p->src, true, u->src, (int)u->nsrc, store);
  case UPAT_SRC_TUPLE: return len ? ref_tuple(p->src, false, u->src, n, store) : out;
  case UPAT_SRC_PERM: break;
  }
  if (!len) return out;
  bool same = true;
  for (int i = 1; i < n; i++) same &= ref_same(p->src[0], p->src[i]);
  /* permutations in lexicographic order of indices, by brute force over n^n */
  int total = 1;
  for (int i = 0; i < n; i++) total *= n;
  for (int code = 0; code < (same ? 1 : total); code++) {
    int idx[4], used = 0, c = code;
    for (int i = n - 1; i >= 0; i--) idx[i] = same ? i : c % n, c /= n;
    for (int i = 0; i < n; i++) used |= 1 << idx[i];
    if (used != (1 << n) - 1) continue;
    const UPat *order[4];
    for (int i = 0; i < n; i++) order[i] = p->src[idx[i]];
    CapsList m = ref_tuple(order, false, u->src, n, store);
    for (int k = 0; k < m.n; k++) cl_push(&out, &m.v[k]);
    free(m.v);
  }
  return out;
}

static uint64_t rng_state;
static uint64_t rng(void) { return xorshift64(&rng_state); }
static int rnd(int n) { return (int)(rng() % (uint64_t)n); }

/* Random patterns live in an arena so they can point at each other. */
typedef struct {
  UPat pats[256];
  const UPat *srcs[1024];
  int npat, nsrc;
} Arena;

static const uint8_t OPS_ADD[] = {OP_ADD, OP_NONE}, OPS_MUL[] = {OP_MUL, OP_NONE},
                     OPS_SINK[] = {OP_SINK, OP_NONE}, OPS_CONST[] = {OP_CONST, OP_NONE},
                     OPS_VAR[] = {OP_DEFINE_VAR, OP_NONE}, OPS_AM[] = {OP_ADD, OP_MUL, OP_NONE};

static const UPat *rand_pat(Arena *a, int depth) {
  assert_true(a->npat < 256 && a->nsrc < 1000);
  UPat *p = &a->pats[a->npat++];
  *p = (UPat){.slot = (uint8_t)rnd(4)}; /* slots 0..3: 0 captures nothing */
  static const uint8_t *const opts[] = {NULL,      OPS_ADD, OPS_MUL, OPS_SINK,
                                        OPS_CONST, OPS_VAR, OPS_AM};
  p->ops = rnd(2) ? NULL : opts[rnd(7)]; /* any op half the time: more matches */
  if (rnd(6) == 0) p->ops = NULL, p->groups = G_COMMUTATIVE;
  if (rnd(8) == 0) p->dtypes = DT_BIT(rnd(2) ? DT_INT32 : DT_VOID);
  if (depth == 0 || rnd(3) == 0) return p;
  int kind = rnd(5);
  p->kind = (uint8_t)kind;
  int n = kind == UPAT_SRC_REPEAT ? 1 : 1 + rnd(3);
  if (kind == UPAT_SRC_ANY) return p;
  if (kind == UPAT_ALT) p->ops = NULL, p->groups = 0;
  if (kind == UPAT_SRC_TUPLE) p->any_len = rnd(4) == 0;
  const UPat **s = &a->srcs[a->nsrc];
  a->nsrc += n;
  const UPat *first = rand_pat(a, depth - 1);
  s[0] = first;
  for (int i = 1; i < n; i++) s[i] = rnd(4) == 0 ? first : rand_pat(a, depth - 1); /* shared too */
  p->src = s;
  p->nsrc = (uint8_t)n;
  return p;
}

/* A random int32 expression over the leaves; a SINK only at the root. */
static UOp *rand_uop(UTest *t, UOp **leaves, int depth, bool root) {
  if (depth == 0 || rnd(4) == 0) return leaves[rnd(4)];
  UOp *a = rand_uop(t, leaves, depth - 1, false), *b = rand_uop(t, leaves, depth - 1, false);
  switch (rnd(root ? 3 : 2)) {
  case 0: return uop_add(a, b);
  case 1: return uop_mul(a, b);
  default: {
    UOp *s[3] = {a, b, rand_uop(t, leaves, depth - 1, false)};
    return uop_sink(t->ctx, rnd(4), s);
  }
  }
}

/* The seed's early reject, recomputed: source patterns naming exactly one op
 * need that op among u's sources. */
static bool ref_rejected(const UPat *p, const UOp *u) {
  int n = p->kind == UPAT_SRC_TUPLE || p->kind == UPAT_SRC_PERM ? p->nsrc
          : p->kind == UPAT_SRC_REPEAT                          ? 1
                                                                : 0;
  for (int i = 0; i < n; i++) {
    const UPat *s = p->src[i];
    if (s->kind == UPAT_ALT || s->groups || !s->ops || s->ops[0] == OP_NONE || s->ops[1] != OP_NONE)
      continue;
    bool present = false;
    for (uint32_t j = 0; j < u->nsrc; j++) present |= u->src[j]->op == s->ops[0];
    if (!present) return true;
  }
  return false;
}

static CapsList seen;
static UOp *record_rule(void *ctx, UOp **c) {
  (void)ctx;
  Caps k;
  memcpy(k.c, c, sizeof k.c);
  cl_push(&seen, &k);
  return NULL;
}

static void test_random_matching(void **state) {
  (void)state;
  rng_state = 0x9e3779b97f4a7c15ull;
  UTest t = ut_begin();
  UOp *leaves[4] = {var(&t, "a"), var(&t, "b"), ci(&t, 1), ci(&t, 2)};
  int total_matches = 0, multi = 0;
  for (int iter = 0; iter < 10000; iter++) {
    size_t mark = uop_pool_mark(t.ctx);
    Arena arena = {0};
    const UPat *p = rand_pat(&arena, 3);
    UOp *u = rand_uop(&t, leaves, 3, true);
    Caps root = {{u}};
    CapsList want = ref_match(p, u, root);
    /* upat_match gives the first match */
    UOp *caps[UPAT_SLOTS];
    bool got = upat_match(p, u, caps);
    if (got != (want.n > 0))
      print_error("iteration %d: upat_match %d, reference %d\n", iter, got, want.n);
    assert_int_equal(got, want.n > 0);
    if (got) assert_memory_equal(caps, want.v[0].c, sizeof caps);
    /* a rule returning NULL sees every match, in order, unless the early
     * reject skips the rule */
    Rule r[] = {{p, record_rule}};
    PatternMatcher *pm = pm_new(r, 1);
    seen.n = 0;
    assert_null(pm_rewrite(pm, u, NULL));
    int expect = ref_rejected(p, u) ? 0 : want.n;
    if (seen.n != expect)
      print_error("iteration %d: %d matches, reference %d\n", iter, seen.n, expect);
    assert_int_equal(seen.n, expect);
    for (int k = 0; k < expect; k++) assert_memory_equal(seen.v[k].c, want.v[k].c, sizeof(Caps));
    total_matches += want.n;
    multi += want.n > 1;
    pm_free(pm);
    free(want.v);
    uop_pool_drain(t.ctx, mark);
  }
  free(seen.v);
  seen = (CapsList){0};
  assert_true(total_matches > 3000 && multi > 150); /* the generator is not vacuous */
  ut_end(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_single_op),
      cmocka_unit_test(test_match_op_list_and_groups),
      cmocka_unit_test(test_match_dtype),
      cmocka_unit_test(test_match_arg),
      cmocka_unit_test(test_match_cval),
      cmocka_unit_test(test_capture_repeated),
      cmocka_unit_test(test_commutative_both_orders),
      cmocka_unit_test(test_repeat_and_any_len),
      cmocka_unit_test(test_repeat_wide),
      cmocka_unit_test(test_alt),
      cmocka_unit_test(test_backtracking),
      cmocka_unit_test(test_null_tries_next_match),
      cmocka_unit_test(test_rule_order),
      cmocka_unit_test(test_rule_returning_itself),
      cmocka_unit_test(test_early_reject),
      cmocka_unit_test(test_top_down_vs_bottom_up),
      cmocka_unit_test(test_fixed_point),
      cmocka_unit_test(test_deep_chain),
      cmocka_unit_test(test_memo_sharing),
      cmocka_unit_test(test_grid_dag),
      cmocka_unit_test(test_rule_cycle),
      cmocka_unit_test(test_empty_matcher),
      cmocka_unit_test(test_substitute),
      cmocka_unit_test(test_substitute_deep),
      cmocka_unit_test(test_random_matching),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
