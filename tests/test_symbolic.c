/* Tests of the symbolic module (src/ir/symbolic*.c): vmin/vmax, the simplifier,
 * sym_infer and the renderer.
 *
 * References are independent of the code under test: a brute-force evaluator
 * written here (int32 wrap-around, truncating division, x/0 = x%0 = 0) checks
 * thousands of random expressions before and after simplification, and the
 * bounds of every subexpression; fixed cases compare with graphs built by hand
 * (interning makes pointer equality structural equality). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/symbolic.h"
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */

static UOp *ci(UTest *t, int64_t v) { return uop_const_int(t->ctx, DT(INT32), v); }
static UOp *cb(UTest *t, bool v) { return uop_const_int(t->ctx, DT(BOOL), v); }
static UOp *var(UTest *t, const char *name, int64_t lo, int64_t hi) {
  return uop_var(t->ctx, name, lo, hi);
}
static UOp *var_dt(UTest *t, DType d, const char *name, int64_t lo, int64_t hi) {
  return uop_new(t->ctx, OP_DEFINE_VAR, d, 0, NULL, arg_var(name, lo, hi));
}
static UOp *cast_raw(UOp *x, DType d) { return uop_new(x->ctx, OP_CAST, d, 1, &x, arg_none()); }
static UOp *not_(UTest *t, UOp *b) { return uop_ne(b, cb(t, true)); }

static void print_both(const char *what, UOp *in, UOp *got, UOp *want) {
  char *a = uop_render_raw(in), *b = uop_render_raw(got), *c = want ? uop_render_raw(want) : NULL;
  fprintf(stderr, "%s\n  input:    %s\n  got:      %s\n", what, a, b);
  if (c) fprintf(stderr, "  expected: %s\n", c);
  free(a), free(b), free(c);
}

/* uop_simplify(in) must be exactly want. */
#define CHECK_SIMP(in, want) check_simp(in, want, __LINE__)
static void check_simp(UOp *in, UOp *want, int line) {
  UOp *got = uop_simplify(in);
  assert_non_null(got);
  if (got != want) {
    char what[64];
    snprintf(what, sizeof what, "simplify mismatch (line %d)", line);
    print_both(what, in, got, want);
    fail();
  }
}

/* uop_render(u) must be exactly want. */
#define CHECK_RENDER(u, want) check_render(u, want, __LINE__)
static void check_render(UOp *u, const char *want, int line) {
  char *s = uop_render(u);
  assert_non_null(s);
  if (strcmp(s, want) != 0)
    fprintf(stderr, "render (line %d): got '%s', want '%s'\n", line, s, want);
  assert_string_equal(s, want);
  free(s);
}

#define CHECK_BOUNDS(u, lo, hi)                                                                    \
  do {                                                                                             \
    UOp *u_ = (u);                                                                                 \
    assert_int_equal(uop_vmin(u_), (lo));                                                          \
    assert_int_equal(uop_vmax(u_), (hi));                                                          \
  } while (0)

/* ---------------------------------------------------------------- reference evaluator */

/* Signed integer arithmetic as the IR defines it (int8/16/32, wrapping),
 * written independently of alu.c: exact in int64, then wrapped to the width. */
static int64_t wrap_to(DType d, int64_t v) {
  int bits = d.scalar == DT_INT8 ? 8 : d.scalar == DT_INT16 ? 16 : 32;
  uint64_t m = (1ull << bits) - 1, u = (uint64_t)v & m;
  return u >> (bits - 1) ? (int64_t)u - (int64_t)(m + 1) : (int64_t)u;
}

static int64_t ref_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
static int64_t ref_mod(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }

/* Value of node i from the values of its sources (indices into vals). */
typedef struct {
  UOp **nodes;
  size_t n;
  int (*src)[3]; /* source indices */
  int64_t *vals;
} Prog;

static int find(UOp **nodes, size_t n, UOp *u) {
  for (size_t i = 0; i < n; i++)
    if (nodes[i] == u) return (int)i;
  return -1;
}

static bool prog_make(Prog *p, UOp *root) {
  p->nodes = uop_toposort(root, &p->n);
  if (!p->nodes) return false;
  p->src = calloc(p->n, sizeof *p->src);
  p->vals = calloc(p->n, sizeof *p->vals);
  for (size_t i = 0; i < p->n; i++)
    for (uint32_t j = 0; j < p->nodes[i]->nsrc && j < 3; j++)
      p->src[i][j] = find(p->nodes, i, p->nodes[i]->src[j]);
  return p->src && p->vals;
}

static void prog_free(Prog *p) { free(p->nodes), free(p->src), free(p->vals); }

/* Evaluates every node; variables get vals from (vars, vv). */
static void prog_run(Prog *p, UOp *const *vars, const int64_t *vv, int nv) {
  for (size_t i = 0; i < p->n; i++) {
    UOp *u = p->nodes[i];
    int64_t a = u->nsrc > 0 ? p->vals[p->src[i][0]] : 0;
    int64_t b = u->nsrc > 1 ? p->vals[p->src[i][1]] : 0;
    int64_t c = u->nsrc > 2 ? p->vals[p->src[i][2]] : 0, r = 0;
    switch ((Op)u->op) {
    case OP_CONST: r = u->arg.i; break;
    case OP_DEFINE_VAR:
    case OP_RANGE:
      for (int k = 0; k < nv; k++)
        if (vars[k] == u) r = vv[k];
      break;
    case OP_ADD: r = a + b; break;
    case OP_SUB: r = a - b; break;
    case OP_MUL: r = a * b; break;
    case OP_NEG: r = -a; break;
    case OP_IDIV: r = ref_div(a, b); break;
    case OP_MOD: r = ref_mod(a, b); break;
    case OP_MAX: r = a > b ? a : b; break;
    case OP_CMPLT: r = a < b; break;
    case OP_CMPNE: r = a != b; break;
    case OP_AND: r = a & b; break;
    case OP_OR: r = a | b; break;
    case OP_XOR: r = a ^ b; break;
    case OP_WHERE: r = a ? b : c; break;
    default: fail_msg("reference evaluator: op %s", op_name((Op)u->op));
    }
    p->vals[i] = dt_is_bool(u->dtype) ? r != 0 : wrap_to(u->dtype, r);
  }
}

/* ---------------------------------------------------------------- random expressions */

typedef struct {
  uint64_t s;
} Rng;

static uint64_t rnd(Rng *r) { return xorshift64(&r->s); }
static int64_t rint_in(Rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd(r) % (uint64_t)(hi - lo + 1));
}
static bool chance(Rng *r, int percent) { return (int)(rnd(r) % 100) < percent; }

typedef struct {
  UTest *t;
  Rng *r;
  UOp **vars;
  int nv;
  DType dt; /* of the integer expressions */
} Gen;

static UOp *gc(Gen *g, int64_t v) { return uop_const_int(g->t->ctx, g->dt, v); }

static UOp *gen_int(Gen *g, int depth);

static UOp *gen_linear(Gen *g);

static UOp *gen_bool(Gen *g, int depth) {
  UOp *a = chance(g->r, 40) ? gen_linear(g) : gen_int(g, depth - 1);
  switch (rint_in(g->r, 0, 5)) {
  case 0:
  case 1: return uop_lt(a, chance(g->r, 60) ? gc(g, rint_in(g->r, -6, 10)) : gen_int(g, depth - 1));
  case 2: return uop_lt(gc(g, rint_in(g->r, -6, 10)), a);
  case 3: return uop_ne(a, chance(g->r, 60) ? gc(g, rint_in(g->r, -3, 6)) : gen_int(g, depth - 1));
  case 4: return not_(g->t, depth > 1 ? gen_bool(g, depth - 1) : uop_lt(a, gc(g, 2)));
  default: {
    UOp *b = depth > 1 ? gen_bool(g, depth - 1) : uop_lt(gen_int(g, 0), gc(g, 3));
    UOp *c = depth > 1 ? gen_bool(g, depth - 1) : uop_lt(gc(g, 1), gen_int(g, 0));
    return chance(g->r, 60) ? uop_and(b, c) : uop_alu2(OP_OR, b, c);
  }
  }
}

/* sum(var * k) + k0: the shape of index arithmetic */
static UOp *gen_linear(Gen *g) {
  UOp *acc = NULL;
  int n = (int)rint_in(g->r, 1, 3);
  for (int i = 0; i < n; i++) {
    UOp *v = g->vars[rint_in(g->r, 0, g->nv - 1)];
    int64_t k = chance(g->r, 70) ? rint_in(g->r, 1, 12) : rint_in(g->r, -6, 6);
    UOp *term = k == 1 ? v : uop_mul_c(v, k);
    acc = acc ? uop_add(acc, term) : term;
  }
  return chance(g->r, 60) ? uop_add_c(acc, rint_in(g->r, -4, 12)) : acc;
}

static UOp *gen_divisor(Gen *g, int depth) {
  if (chance(g->r, 80)) {
    static const int64_t ks[] = {2, 3, 4, 4, 6, 8, 12, 1, -1, -2, -3, 0, 5, 16};
    return gc(g, ks[rint_in(g->r, 0, (int64_t)(sizeof ks / sizeof ks[0]) - 1)]);
  }
  return gen_int(g, depth - 1);
}

static UOp *gen_int(Gen *g, int depth) {
  if (depth <= 0 || chance(g->r, 15)) {
    if (chance(g->r, 65)) return g->vars[rint_in(g->r, 0, g->nv - 1)];
    return gc(g, rint_in(g->r, -6, 9));
  }
  int d = depth - 1;
  switch (rint_in(g->r, 0, 11)) {
  case 0: return uop_add(gen_int(g, d), gen_int(g, d));
  case 1:
    return uop_mul(gen_int(g, d), chance(g->r, 70) ? gc(g, rint_in(g->r, -4, 8)) : gen_int(g, d));
  case 2:
  case 3: return uop_idiv(chance(g->r, 50) ? gen_linear(g) : gen_int(g, d), gen_divisor(g, d));
  case 4:
  case 5: return uop_mod(chance(g->r, 50) ? gen_linear(g) : gen_int(g, d), gen_divisor(g, d));
  case 6:
    return uop_max(gen_int(g, d), chance(g->r, 50) ? gc(g, rint_in(g->r, -3, 6)) : gen_int(g, d));
  case 7: return chance(g->r, 50) ? uop_neg(gen_int(g, d)) : uop_mul_c(gen_int(g, d), -1);
  case 8: return uop_where(gen_bool(g, d), gen_int(g, d), gen_int(g, d));
  case 9: return uop_sub(gen_int(g, d), gen_int(g, d));
  case 10: return gen_linear(g);
  default: {
    /* (linear // c1) % c2, as views produce */
    UOp *x = uop_idiv_c(gen_linear(g), rint_in(g->r, 1, 8));
    return chance(g->r, 70) ? uop_mod_c(x, rint_in(g->r, 1, 6)) : x;
  }
  }
}

/* Every int/bool node of p must have vmin <= value <= vmax. */
static bool bounds_hold(Prog *p, UOp **bad) {
  for (size_t i = 0; i < p->n; i++) {
    UOp *u = p->nodes[i];
    if (!(dt_is_int(u->dtype) || dt_is_bool(u->dtype))) continue;
    if (p->vals[i] < uop_vmin(u) || p->vals[i] > uop_vmax(u)) {
      *bad = u;
      return false;
    }
  }
  return true;
}

static void report(const char *what, UOp *orig, UOp *simp, UOp *const *vars, const int64_t *vv,
                   int nv, UOp *bad, int64_t bad_val) {
  print_both(what, orig, simp, NULL);
  for (int k = 0; k < nv; k++)
    fprintf(stderr, "  %s = %lld\n", vars[k]->op == OP_RANGE ? "ridx0" : vars[k]->arg.var.name,
            (long long)vv[k]);
  if (bad) {
    char *s = uop_render_raw(bad);
    fprintf(stderr, "  node %s = %lld outside [%lld, %lld]\n", s, (long long)bad_val,
            (long long)uop_vmin(bad), (long long)uop_vmax(bad));
    free(s);
  }
}

/* Brute force over every assignment: simplified == original, bounds hold. */
static void check_equivalent(UOp *orig, UOp *simp, UOp *const *vars, int nv) {
  Prog po, ps;
  assert_true(prog_make(&po, orig));
  assert_true(prog_make(&ps, simp));
  int64_t lo[3], hi[3], vv[3];
  for (int k = 0; k < nv; k++) lo[k] = uop_vmin(vars[k]), hi[k] = uop_vmax(vars[k]), vv[k] = lo[k];
  for (;;) {
    prog_run(&po, vars, vv, nv);
    prog_run(&ps, vars, vv, nv);
    int64_t a = po.vals[po.n - 1], b = ps.vals[ps.n - 1];
    UOp *bad = NULL;
    if (a != b) {
      report("simplified value differs", orig, simp, vars, vv, nv, NULL, 0);
      fprintf(stderr, "  original = %lld, simplified = %lld\n", (long long)a, (long long)b);
      fail();
    }
    if (!bounds_hold(&po, &bad) || !bounds_hold(&ps, &bad)) {
      int i = find(po.nodes, po.n, bad);
      report("bounds violated", orig, simp, vars, vv, nv, bad,
             i >= 0 ? po.vals[i] : ps.vals[find(ps.nodes, ps.n, bad)]);
      fail();
    }
    int k = 0;
    while (k < nv && vv[k] == hi[k]) vv[k] = lo[k], k++;
    if (k == nv) break;
    vv[k]++;
  }
  prog_free(&po);
  prog_free(&ps);
}

/* n random expressions of dtype d over x in [-3, 5], y in [0, 7], ridx0 in [0, 4). */
static void random_equivalence(DType d, int n, uint64_t seed) {
  UTest t = ut_begin();
  Rng r = {seed};
  UOp *vars[3] = {var_dt(&t, d, "x", -3, 5), var_dt(&t, d, "y", 0, 7),
                  uop_range(t.ctx, uop_const_int(t.ctx, d, 4), 0)};
  int shrunk = 0;
  const int N = n;
  for (int i = 0; i < N; i++) {
    size_t mark = uop_pool_mark(t.ctx);
    int nv = 2 + (int)(i % 2);
    Gen g = {&t, &r, vars, nv, d};
    UOp *e =
        chance(&r, 80) ? gen_int(&g, (int)rint_in(&r, 1, 4)) : gen_bool(&g, (int)rint_in(&r, 1, 3));
    UOp *s = uop_simplify(e);
    assert_non_null(s);
    check_equivalent(e, s, vars, nv);
    size_t ne = 0, ns = 0;
    free(uop_toposort(e, &ne));
    free(uop_toposort(s, &ns));
    shrunk += ns < ne;
    uop_pool_drain(t.ctx, mark);
  }
  /* not a correctness property, but a simplifier that does nothing passes the rest */
  assert_true(shrunk > N / 3);
  ut_end(&t);
}

static void test_random_equivalence(void **state) {
  (void)state;
  random_equivalence(DT(INT32), 6000, 0x9e3779b97f4a7c15ull);
}

/* int8 wraps at 128: index-like sums overflow often, and every fold that needs
 * exact bounds must notice. */
static void test_random_equivalence_int8(void **state) {
  (void)state;
  random_equivalence(DT(INT8), 4000, 0x2545f4914f6cdd1dull);
}

/* ---------------------------------------------------------------- bounds */

static void test_bounds_leaves(void **state) {
  (void)state;
  UTest t = ut_begin();
  CHECK_BOUNDS(ci(&t, -7), -7, -7);
  CHECK_BOUNDS(cb(&t, true), 1, 1);
  CHECK_BOUNDS(var(&t, "x", -3, 5), -3, 5);
  CHECK_BOUNDS(uop_range_n(t.ctx, 10, 0), 0, 9);
  CHECK_BOUNDS(uop_range(t.ctx, var(&t, "n", 1, 32), 1), 0, 31);
  CHECK_BOUNDS(uop_new(t.ctx, OP_SPECIAL, DT(INT32), 0, NULL, arg_var("gidx0", 0, 15)), 0, 15);
  /* a var whose bounds exceed its dtype is clamped to it */
  CHECK_BOUNDS(var_dt(&t, DT(INT8), "b", -1000, 5), -128, 5);
  /* no information: the dtype's range */
  UOp *ld = uop_new(t.ctx, OP_LOAD, DT(INT16), 0, NULL, arg_none());
  CHECK_BOUNDS(ld, INT16_MIN, INT16_MAX);
  assert_true(uop_bounds_exact(ld));
  UOp *f = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 0, NULL, arg_none());
  assert_false(uop_bounds_exact(f));
  ut_end(&t);
}

static void test_bounds_arith(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -3, 5), *y = var(&t, "y", 2, 7);
  CHECK_BOUNDS(uop_add(x, y), -1, 12);
  CHECK_BOUNDS(uop_sub(x, y), -10, 3);
  CHECK_BOUNDS(uop_alu2(OP_SUB, x, y), -10, 3);
  CHECK_BOUNDS(uop_mul(x, y), -21, 35);
  CHECK_BOUNDS(uop_mul_c(x, -2), -10, 6);
  CHECK_BOUNDS(uop_neg(x), -5, 3);
  CHECK_BOUNDS(uop_max(x, y), 2, 7);
  CHECK_BOUNDS(uop_max(x, ci(&t, 0)), 0, 5);
  CHECK_BOUNDS(uop_alu2(OP_SHL, y, ci(&t, 3)), 16, 56);
  CHECK_BOUNDS(uop_alu2(OP_SHR, x, ci(&t, 1)), -2, 2);        /* floor shift */
  CHECK_BOUNDS(uop_alu2(OP_SHL, y, x), INT32_MIN, INT32_MAX); /* shift by a variable */
  CHECK_BOUNDS(uop_alu3(OP_MULACC, x, y, ci(&t, 1)), -20, 36);
  ut_end(&t);
}

static void test_bounds_divmod(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -7, 9), *p = var(&t, "p", 3, 10), *y = var(&t, "y", -2, 3);
  CHECK_BOUNDS(uop_idiv_c(x, 2), -3, 4); /* truncating: -7/2 = -3 */
  CHECK_BOUNDS(uop_idiv_c(x, -2), -4, 3);
  CHECK_BOUNDS(uop_idiv(x, p), -2, 3);
  CHECK_BOUNDS(uop_idiv(x, y), -9, 9); /* y = +-1 and y = 0 (gives 0) included */
  CHECK_BOUNDS(uop_idiv_c(p, 0), 0, 0);
  CHECK_BOUNDS(uop_mod_c(p, 4), 0, 3);
  CHECK_BOUNDS(uop_mod_c(x, 4), -3, 3); /* sign of the dividend */
  CHECK_BOUNDS(uop_mod_c(x, -4), -3, 3);
  CHECK_BOUNDS(uop_mod_c(var(&t, "q", 8, 10), 4), 0, 2); /* one period: monotone */
  CHECK_BOUNDS(uop_mod_c(var(&t, "q", 2, 3), 100), 2, 3);
  CHECK_BOUNDS(uop_mod(p, y), 0, 2); /* |p % y| < |y| <= 3; p % 0 = 0 */
  CHECK_BOUNDS(uop_mod_c(x, 0), 0, 0);
  ut_end(&t);
}

static void test_bounds_logic(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 5), *y = var(&t, "y", 6, 9);
  CHECK_BOUNDS(uop_lt(x, y), 1, 1);
  CHECK_BOUNDS(uop_lt(y, x), 0, 0);
  CHECK_BOUNDS(uop_lt_c(x, 3), 0, 1);
  CHECK_BOUNDS(uop_ne(x, y), 1, 1);
  CHECK_BOUNDS(uop_ne(ci(&t, 4), ci(&t, 4)), 0, 0);
  CHECK_BOUNDS(uop_ne(x, ci(&t, 3)), 0, 1);
  UOp *bt = uop_lt(x, y), *bu = uop_lt_c(x, 3), *bf = uop_lt(y, x);
  CHECK_BOUNDS(uop_and(bt, bu), 0, 1);
  CHECK_BOUNDS(uop_and(bf, bu), 0, 0);
  CHECK_BOUNDS(uop_alu2(OP_OR, bt, bu), 1, 1);
  CHECK_BOUNDS(uop_alu2(OP_XOR, bt, bf), 1, 1);
  CHECK_BOUNDS(uop_where(bu, x, y), 0, 9);
  CHECK_BOUNDS(uop_where(bt, x, y), 0, 5); /* condition known */
  /* min and max spelled as where: tighter than the hull of the branches */
  UOp *w = var(&t, "w", 0, 1000), *k = ci(&t, 256);
  CHECK_BOUNDS(uop_where(uop_lt(w, k), w, k), 0, 256);    /* min(w, 256) */
  CHECK_BOUNDS(uop_where(uop_lt(w, k), k, w), 256, 1000); /* max(w, 256) */
  CHECK_BOUNDS(uop_where(uop_lt(k, w), w, k), 256, 1000); /* max(k, w) */
  CHECK_BOUNDS(uop_and(x, ci(&t, 3)), 0, 3);
  CHECK_BOUNDS(uop_alu2(OP_OR, x, ci(&t, 8)), 8, 15);
  /* comparisons of floats know nothing */
  UOp *f = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 0, NULL, arg_none());
  CHECK_BOUNDS(uop_lt(f, f), 0, 1);
  ut_end(&t);
}

static void test_bounds_cast(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -3, 100), *w = var(&t, "w", 0, 1000);
  CHECK_BOUNDS(uop_cast(x, DT(INT8)), -3, 100);
  CHECK_BOUNDS(uop_cast(w, DT(INT8)), INT8_MIN, INT8_MAX); /* may wrap */
  CHECK_BOUNDS(uop_cast(x, DT(UINT8)), 0, UINT8_MAX);
  CHECK_BOUNDS(uop_cast(x, DT(INT64)), -3, 100);
  CHECK_BOUNDS(uop_cast(x, DT(BOOL)), 0, 1);
  CHECK_BOUNDS(uop_cast(var(&t, "p", 1, 4), DT(BOOL)), 1, 1);
  UOp *f = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 0, NULL, arg_none());
  CHECK_BOUNDS(uop_cast(f, DT(INT16)), INT16_MIN, INT16_MAX);
  ut_end(&t);
}

/* When exact bounds would leave the dtype (the value may wrap) or int64, the
 * result is the dtype's full range. */
static void test_bounds_overflow(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *big = var(&t, "big", 0, INT32_MAX), *neg = var(&t, "neg", INT32_MIN, 0);
  CHECK_BOUNDS(uop_add_c(big, 1), INT32_MIN, INT32_MAX);
  CHECK_BOUNDS(uop_add_c(big, -1), -1, INT32_MAX - 1);
  CHECK_BOUNDS(uop_mul_c(big, 2), INT32_MIN, INT32_MAX);
  CHECK_BOUNDS(uop_neg(neg), INT32_MIN, INT32_MAX); /* -INT32_MIN wraps */
  CHECK_BOUNDS(uop_idiv_c(neg, -1), INT32_MIN, INT32_MAX);
  CHECK_BOUNDS(uop_idiv_c(neg, -2), 0, 1 << 30);
  CHECK_BOUNDS(uop_alu2(OP_SHL, big, ci(&t, 1)), INT32_MIN, INT32_MAX);
  /* int64: the bound arithmetic itself would overflow */
  UOp *L = var_dt(&t, DT(INT64), "L", 0, INT64_MAX), *M = var_dt(&t, DT(INT64), "M", INT64_MIN, -1);
  UOp *two = uop_const_int(t.ctx, DT(INT64), 2);
  CHECK_BOUNDS(uop_mul(L, two), INT64_MIN, INT64_MAX);
  CHECK_BOUNDS(uop_add(L, L), INT64_MIN, INT64_MAX);
  CHECK_BOUNDS(uop_sub(M, L), INT64_MIN, INT64_MAX);
  CHECK_BOUNDS(uop_neg(M), INT64_MIN, INT64_MAX);
  CHECK_BOUNDS(uop_idiv(M, uop_const_int(t.ctx, DT(INT64), -1)), INT64_MIN, INT64_MAX);
  CHECK_BOUNDS(uop_idiv(L, two), 0, INT64_MAX / 2);
  /* uint64: the reported range is clamped and is not a fact */
  UOp *u64 = uop_new(t.ctx, OP_LOAD, DT(UINT64), 0, NULL, arg_none());
  CHECK_BOUNDS(u64, 0, INT64_MAX);
  assert_false(uop_bounds_exact(u64));
  assert_false(uop_bounds_exact(uop_idiv(u64, uop_const_int(t.ctx, DT(UINT64), 1ll << 62))));
  CHECK_BOUNDS(uop_lt(uop_idiv(u64, uop_const_int(t.ctx, DT(UINT64), 1ll << 62)),
                      uop_const_int(t.ctx, DT(UINT64), 2)),
               0, 1);
  assert_false(uop_bounds_exact(uop_const_int(t.ctx, DT(UINT64), -1)));
  UOp *u64v = var_dt(&t, DT(UINT64), "u", 0, 10);
  CHECK_BOUNDS(uop_add(u64v, uop_const_int(t.ctx, DT(UINT64), 5)), 5, 15);
  assert_true(uop_bounds_exact(u64v));
  ut_end(&t);
}

/* A deep chain is handled without deep recursion. */
static void test_bounds_deep(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 1);
  for (int i = 0; i < 100000; i++) x = uop_add_c(x, 1);
  CHECK_BOUNDS(x, 100000, 100001);
  ut_end(&t);
}

/* ---------------------------------------------------------------- fixed simplifications */

static void test_simp_identities(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -10, 10), *y = var(&t, "y", 0, 3);
  CHECK_SIMP(uop_add(x, ci(&t, 0)), x);
  CHECK_SIMP(uop_add(ci(&t, 0), x), x);
  CHECK_SIMP(uop_mul_c(x, 1), x);
  CHECK_SIMP(uop_mul_c(x, 0), ci(&t, 0));
  CHECK_SIMP(uop_idiv_c(x, 1), x);
  CHECK_SIMP(uop_idiv_c(x, -1), uop_mul_c(x, -1));
  CHECK_SIMP(uop_mod_c(x, 1), ci(&t, 0));
  CHECK_SIMP(uop_mod(x, x), ci(&t, 0));
  CHECK_SIMP(uop_max(x, x), x);
  CHECK_SIMP(uop_lt(x, x), cb(&t, false));
  CHECK_SIMP(uop_ne(x, x), cb(&t, false));
  UOp *b = uop_lt(x, y);
  CHECK_SIMP(uop_and(b, b), b);
  CHECK_SIMP(uop_and(b, cb(&t, true)), b);
  CHECK_SIMP(uop_where(b, x, x), x);
  CHECK_SIMP(uop_where(cb(&t, true), x, y), x);
  CHECK_SIMP(uop_where(cb(&t, false), x, y), y);
  /* the condition folds from bounds first */
  CHECK_SIMP(uop_where(uop_lt_c(y, 4), x, y), x);
  CHECK_SIMP(uop_sub(x, x), ci(&t, 0));
  CHECK_SIMP(uop_neg(uop_neg(x)), x);
  /* x * 0 stays for floats (NaN * 0 is NaN) */
  UOp *f = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 0, NULL, arg_none());
  UOp *f0 = uop_mul(f, uop_const_float(t.ctx, DT(FLOAT32), 0));
  CHECK_SIMP(f0, f0);
  /* x != x stays for floats (NaN != NaN) */
  CHECK_SIMP(uop_ne(f, f), uop_ne(f, f));
  /* relu's form (x < 0 ? 0 : (0 < x ? x : x * 0)) is x where x < 0 fails:
   * one select, which the CPU's vectoriser widens; not with x * -0, which
   * turns +0 into -0 */
  UOp *fz = uop_const_float(t.ctx, DT(FLOAT32), 0),
      *fnz = uop_const_float(t.ctx, DT(FLOAT32), -0.0);
  UOp *neg = uop_lt(f, fz);
  CHECK_SIMP(uop_where(neg, fz, uop_where(uop_lt(fz, f), f, uop_mul(f, fz))),
             uop_where(neg, fz, f));
  UOp *keep = uop_where(neg, fz, uop_where(uop_lt(fz, f), f, uop_mul(f, fnz)));
  CHECK_SIMP(keep, keep);

  /* a gated load whose gate folds: the plain load, or its value when off
   * (where the index may be a constant outside the buffer, -1 at a pad) */
  UOp *at = uop_new(t.ctx, OP_INDEX, DT(INT32), 1, (UOp *[]){ci(&t, -1)}, arg_none());
  UOp *plain = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 1, &at, arg_none());
  UOp *zero = uop_const_float(t.ctx, DT(FLOAT32), 0);
  UOp *gated_on =
      uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 3, (UOp *[]){at, zero, uop_lt_c(y, 4)}, arg_none());
  CHECK_SIMP(gated_on, plain);
  UOp *gated_off =
      uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 3, (UOp *[]){at, zero, cb(&t, false)}, arg_none());
  CHECK_SIMP(gated_off, zero);
  UOp *gated = uop_new(t.ctx, OP_LOAD, DT(FLOAT32), 3, (UOp *[]){at, zero, uop_lt_c(y, 2)},
                       arg_none()); /* a gate that depends on y stays */
  CHECK_SIMP(gated, gated);
  ut_end(&t);
}

static void test_simp_constants(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -10, 10), *y = var(&t, "y", 0, 3);
  CHECK_SIMP(uop_add(ci(&t, 3), ci(&t, 4)), ci(&t, 7));
  CHECK_SIMP(uop_idiv(ci(&t, -7), ci(&t, 2)), ci(&t, -3));
  CHECK_SIMP(uop_mod(ci(&t, -7), ci(&t, 2)), ci(&t, -1));
  CHECK_SIMP(uop_idiv(ci(&t, 5), ci(&t, 0)), ci(&t, 0));
  CHECK_SIMP(uop_add_c(ci(&t, INT32_MAX), 1), ci(&t, INT32_MIN)); /* wraps */
  CHECK_SIMP(uop_add_c(uop_add_c(x, 3), 5), uop_add_c(x, 8));
  CHECK_SIMP(uop_mul_c(uop_mul_c(x, 3), 5), uop_mul_c(x, 15));
  CHECK_SIMP(uop_add(uop_add_c(x, 3), y), uop_add_c(uop_add(x, y), 3));
  CHECK_SIMP(uop_add(ci(&t, 2), uop_add(x, ci(&t, -2))), x);
  CHECK_SIMP(uop_mul(ci(&t, 4), x), uop_mul_c(x, 4));
  /* like terms */
  CHECK_SIMP(uop_add(uop_mul_c(x, 2), uop_mul_c(x, 3)), uop_mul_c(x, 5));
  CHECK_SIMP(uop_add(x, x), uop_mul_c(x, 2));
  CHECK_SIMP(uop_add(uop_add(uop_mul_c(x, 2), y), uop_mul_c(x, -2)), y);
  CHECK_SIMP(uop_mul_c(uop_add_c(x, 1), 4), uop_add_c(uop_mul_c(x, 4), 4));
  /* (x//c)*c + x%c -> x */
  CHECK_SIMP(uop_add(uop_mul_c(uop_idiv_c(x, 4), 4), uop_mod_c(x, 4)), x);
  /* bitcasts of constants: IEEE bits (-1.5f is 0xbfc00000), and back */
  UOp *mf = uop_const_float(t.ctx, DT(FLOAT32), -1.5);
  UOp *bits = uop_new(t.ctx, OP_BITCAST, DT(INT32), 1, &mf, arg_none());
  CHECK_SIMP(bits, ci(&t, (int32_t)0xbfc00000u));
  UOp *ub = uop_const_int(t.ctx, DT(UINT32), 0x7f800000);
  UOp *inf = uop_new(t.ctx, OP_BITCAST, DT(FLOAT32), 1, &ub, arg_none());
  CHECK_SIMP(inf, uop_const_float(t.ctx, DT(FLOAT32), INFINITY));
  UOp *d = uop_const_float(t.ctx, DT(FLOAT64), 1.0);
  UOp *dbits = uop_new(t.ctx, OP_BITCAST, DT(UINT64), 1, &d, arg_none());
  CHECK_SIMP(dbits, uop_const_int(t.ctx, DT(UINT64), 0x3ff0000000000000ll));
  ut_end(&t);
}

static void test_simp_divmod(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 100), *y = var(&t, "y", 0, 3), *s = var(&t, "s", -50, 50);
  CHECK_SIMP(uop_idiv_c(uop_add(uop_mul_c(x, 4), y), 4), x);
  CHECK_SIMP(uop_mod_c(uop_add(uop_mul_c(x, 4), y), 4), y);
  CHECK_SIMP(uop_idiv_c(uop_idiv_c(x, 2), 3), uop_idiv_c(x, 6));
  CHECK_SIMP(uop_idiv_c(uop_idiv_c(s, 2), 3), uop_idiv_c(s, 6)); /* nests for any sign */
  CHECK_SIMP(uop_mod_c(y, 4), y);
  UOp *z = var(&t, "z", 0, 7);
  CHECK_SIMP(uop_idiv_c(z, 8), ci(&t, 0));
  CHECK_SIMP(uop_mod_c(uop_mod_c(x, 12), 4), uop_mod_c(x, 4));
  CHECK_SIMP(uop_idiv_c(var(&t, "q", 8, 11), 4), ci(&t, 2));
  CHECK_SIMP(uop_mod_c(var(&t, "q", 8, 11), 4), uop_add_c(var(&t, "q", 8, 11), -8));
  /* pulled-out quotients, gcd */
  CHECK_SIMP(uop_idiv_c(uop_add_c(uop_mul_c(x, 6), 3), 6), x);
  CHECK_SIMP(uop_mod_c(uop_add(uop_mul_c(x, 8), uop_mul_c(y, 2)), 4),
             uop_mul_c(uop_mod_c(y, 2), 2));
  CHECK_SIMP(uop_idiv_c(uop_add(uop_mul_c(x, 5), y), 5), x);
  CHECK_SIMP(uop_idiv_c(uop_add(uop_mul_c(x, 12), uop_add(uop_mul_c(y, 4), z)), 4),
             uop_add(uop_add(uop_mul_c(x, 3), y), uop_idiv_c(z, 4)));
  /* a sign the folds cannot assume: (s*4 + y) // 4 with s < 0 possible stays */
  UOp *neg = uop_idiv_c(uop_add(uop_mul_c(s, 4), y), 4);
  CHECK_SIMP(neg, neg);
  /* negative divisors */
  CHECK_SIMP(uop_mod_c(x, -4), uop_mod_c(x, 4));
  CHECK_SIMP(uop_idiv_c(x, -4), uop_mul_c(uop_idiv_c(x, 4), -1));
  ut_end(&t);
}

static void test_simp_index(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *r0 = uop_range_n(t.ctx, 5, 0), *r1 = uop_range_n(t.ctx, 3, 1),
      *r2 = uop_range_n(t.ctx, 4, 2);
  UOp *flat = uop_add(uop_add(uop_mul_c(r0, 12), uop_mul_c(r1, 4)), r2);
  CHECK_SIMP(uop_mod_c(uop_idiv_c(flat, 4), 3), r1);
  CHECK_SIMP(uop_idiv_c(flat, 12), r0);
  CHECK_SIMP(uop_mod_c(flat, 4), r2);
  CHECK_SIMP(uop_mod_c(flat, 12), uop_add(uop_mul_c(r1, 4), r2));
  /* A (2,3,4) buffer with strides (1, 8, 2) (permuted), viewed through a reshape
   * to (6, 4): for the outer index (a, b), flat = a*4 + b unravels into the
   * inner shape, and the offset is
   * ((flat//12)%2)*1 + ((flat//4)%3)*8 + (flat%4)*2
   * which a person writes a//3 + (a%3)*8 + b*2. */
  UOp *a = uop_range_n(t.ctx, 6, 0), *b = uop_range_n(t.ctx, 4, 1);
  UOp *fl = uop_add(uop_mul_c(a, 4), b);
  UOp *off = uop_add(
      uop_add(uop_mod_c(uop_idiv_c(fl, 12), 2), uop_mul_c(uop_mod_c(uop_idiv_c(fl, 4), 3), 8)),
      uop_mul_c(uop_mod_c(fl, 4), 2));
  CHECK_SIMP(off,
             uop_add(uop_add(uop_idiv_c(a, 3), uop_mul_c(uop_mod_c(a, 3), 8)), uop_mul_c(b, 2)));
  /* valid masks: (r < 5) & (r >= 1) with r in [0, 4) */
  UOp *r = uop_range_n(t.ctx, 4, 3);
  UOp *valid = uop_and(uop_lt_c(r, 5), not_(&t, uop_lt_c(r, 1)));
  CHECK_SIMP(valid, uop_lt(ci(&t, 0), r));
  /* a padded view's mask on a sum: 1 <= a*4 + b < 21 */
  UOp *m2 = uop_and(not_(&t, uop_lt_c(fl, 1)), uop_lt_c(fl, 21));
  CHECK_SIMP(m2, uop_and(uop_lt(ci(&t, 0), fl), uop_lt_c(fl, 21)));
  ut_end(&t);
}

static void test_simp_compare(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 9), *y = var(&t, "y", 0, 3);
  CHECK_SIMP(uop_lt_c(x, 10), cb(&t, true));
  CHECK_SIMP(uop_lt_c(x, 0), cb(&t, false));
  CHECK_SIMP(uop_ne(x, ci(&t, -1)), cb(&t, true));
  CHECK_SIMP(uop_lt(uop_add_c(x, 3), ci(&t, 5)), uop_lt_c(x, 2));
  CHECK_SIMP(uop_lt(uop_mul_c(x, 4), ci(&t, 9)), uop_lt_c(x, 3));
  CHECK_SIMP(uop_lt(uop_add(uop_mul_c(x, 4), y), ci(&t, 8)), uop_lt_c(x, 2));
  CHECK_SIMP(uop_lt(uop_idiv_c(x, 4), ci(&t, 2)), uop_lt_c(x, 8));
  CHECK_SIMP(not_(&t, uop_lt_c(x, 3)), uop_lt(ci(&t, 2), x));
  CHECK_SIMP(uop_lt(ci(&t, 2), uop_add_c(x, 1)), uop_lt(ci(&t, 1), x));
  CHECK_SIMP(uop_lt(ci(&t, 0), uop_idiv_c(x, 4)), uop_lt(ci(&t, 3), x));
  /* truncation: w//4 < 0 <=> w <= -4, and -1 < w//4 <=> w > -4 */
  UOp *w = var(&t, "w", -10, 10);
  CHECK_SIMP(uop_lt(uop_idiv_c(w, 4), ci(&t, 0)), uop_lt_c(w, -3));
  CHECK_SIMP(uop_lt(ci(&t, -1), uop_idiv_c(w, 4)), uop_lt(ci(&t, -4), w));
  CHECK_SIMP(uop_lt(uop_idiv_c(w, 4), ci(&t, -1)), uop_lt_c(w, -7));
  CHECK_SIMP(uop_lt(ci(&t, -2), uop_idiv_c(w, 4)), uop_lt(ci(&t, -8), w));
  CHECK_SIMP(uop_max(x, ci(&t, 0)), x);
  CHECK_SIMP(uop_max(x, ci(&t, 12)), ci(&t, 12));
  /* a compare of a widened int is the narrow int's (int64 masks of int32 indices) */
  UOp *x64 = uop_cast(x, DT(INT64)), *m5 = uop_mod_c(x, 5);
  CHECK_SIMP(uop_lt(x64, uop_const_int(t.ctx, DT(INT64), 4)), uop_lt_c(x, 4));
  CHECK_SIMP(uop_lt(uop_const_int(t.ctx, DT(INT64), 0), uop_cast(m5, DT(INT64))),
             uop_lt(ci(&t, 0), m5));
  /* not through a cast that lost values: w in [0, 1000] as int8 wraps */
  UOp *w8 = uop_cast(var(&t, "v", 0, 1000), DT(INT8));
  UOp *lossy = uop_lt(w8, uop_const_int(t.ctx, DT(INT8), 3));
  CHECK_SIMP(lossy, lossy);
  ut_end(&t);
}

static void test_simp_cast(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 100), *w = var(&t, "w", 0, 1000);
  CHECK_SIMP(uop_cast(ci(&t, 300), DT(UINT8)), uop_const_int(t.ctx, DT(UINT8), 44));
  CHECK_SIMP(uop_cast(ci(&t, 3), DT(FLOAT32)), uop_const_float(t.ctx, DT(FLOAT32), 3.0));
  CHECK_SIMP(cast_raw(x, DT(INT32)), x);
  CHECK_SIMP(uop_cast(uop_cast(x, DT(INT8)), DT(INT64)), uop_cast(x, DT(INT64)));
  UOp *lossy = uop_cast(uop_cast(w, DT(INT8)), DT(INT64));
  CHECK_SIMP(lossy, lossy);
  CHECK_SIMP(uop_cast(uop_cast(x, DT(INT16)), DT(INT32)), x);
  CHECK_SIMP(uop_cast(var(&t, "p", 1, 5), DT(BOOL)), cb(&t, true));
  ut_end(&t);
}

/* Bool and other dtypes: rules that must not fire. */
static void test_simp_keeps(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", -3, 5), *y = var(&t, "y", -2, 2);
  UOp *e1 = uop_idiv(x, y);
  CHECK_SIMP(e1, e1);
  UOp *e2 = uop_mod_c(x, 4);
  CHECK_SIMP(e2, e2);
  UOp *e3 = uop_idiv_c(uop_add_c(x, 3), 4); /* x + 3 >= 0: (x+3)//4 is 0 or 1 */
  assert_int_equal(uop_vmin(uop_simplify(e3)), 0);
  assert_int_equal(uop_vmax(uop_simplify(e3)), 2);
  ut_end(&t);
}

/* ---------------------------------------------------------------- sym_infer, render */

static void test_infer(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 100), *y = var(&t, "y", -5, 5);
  UOp *e = uop_add(uop_mul_c(uop_idiv_c(x, 3), 7), uop_mod(y, ci(&t, 4)));
  UOp *vars[] = {x, y};
  for (int64_t a = 0; a <= 100; a += 7)
    for (int64_t b = -5; b <= 5; b++) {
      int64_t want = (a / 3) * 7 + b % 4;
      assert_int_equal(sym_infer(e, 2, vars, (int64_t[]){a, b}), want);
    }
  /* an unbound variable takes its vmin */
  assert_int_equal(sym_infer(e, 1, vars, (int64_t[]){9}), 21 + (-5 % 4));
  assert_int_equal(sym_infer(uop_lt_c(x, 4), 1, vars, (int64_t[]){3}), 1);
  ut_end(&t);
}

static void test_render(void **state) {
  (void)state;
  UTest t = ut_begin();
  UOp *x = var(&t, "x", 0, 100), *y = var(&t, "y", 0, 3), *r = uop_range_n(t.ctx, 5, 2);
  CHECK_RENDER(uop_add(uop_mul_c(x, 4), y), "x*4+y");
  CHECK_RENDER(uop_mul_c(uop_add(x, y), 3), "x*3+y*3");
  CHECK_RENDER(uop_idiv_c(uop_add(x, y), 3), "(x+y)//3");
  CHECK_RENDER(uop_mod_c(uop_idiv_c(x, 4), 3), "x//4%3");
  CHECK_RENDER(uop_sub(x, y), "x-y");
  CHECK_RENDER(uop_sub(x, uop_mul_c(y, 2)), "x-y*2");
  CHECK_RENDER(uop_add_c(x, -5), "x-5");
  CHECK_RENDER(uop_mul_c(r, -1), "-ridx2");
  CHECK_RENDER(uop_max(x, ci(&t, 7)), "max(x, 7)");
  CHECK_RENDER(uop_where(uop_lt_c(x, 5), y, r), "y if x<5 else ridx2");
  CHECK_RENDER(uop_and(uop_lt_c(x, 5), uop_lt(y, x)), "(x<5)&(y<x)");
  CHECK_RENDER(uop_add(uop_where(uop_lt_c(x, 5), y, r), ci(&t, 1)), "(y if x<5 else ridx2)+1");
  CHECK_RENDER(uop_lt(uop_lt_c(x, 5), uop_lt(y, x)), "(x<5)<(y<x)");
  CHECK_RENDER(uop_cast(x, DT(INT64)), "int64(x)");
  CHECK_RENDER(uop_alu2(OP_SHL, x, y), "x<<y");
  CHECK_RENDER(uop_lt_c(x, 200), "True");
  CHECK_RENDER(ci(&t, -3), "-3");
  /* raw rendering keeps the input as built */
  char *s = uop_render_raw(uop_add(uop_add(x, ci(&t, 0)), uop_mul_c(x, 1)));
  assert_string_equal(s, "x+0+x*1");
  free(s);
  s = uop_render_raw(uop_ne(uop_lt_c(x, 5), cb(&t, true)));
  assert_string_equal(s, "not x<5");
  free(s);
  s = uop_render_raw(uop_sub(x, uop_add(y, r)));
  assert_string_equal(s, "x-(y+ridx2)");
  free(s);
  s = uop_render_raw(uop_const_float(t.ctx, DT(FLOAT32), 2.0));
  assert_string_equal(s, "2.0");
  free(s);
  ut_end(&t);
}

/* Simplifying twice changes nothing (a fixed point), on index expressions. */
static void test_fixed_point(void **state) {
  (void)state;
  UTest t = ut_begin();
  Rng r = {12345};
  UOp *vars[3] = {var(&t, "x", -3, 5), var(&t, "y", 0, 7), uop_range_n(t.ctx, 4, 0)};
  for (int i = 0; i < 500; i++) {
    size_t mark = uop_pool_mark(t.ctx);
    Gen g = {&t, &r, vars, 3, DT(INT32)};
    UOp *s1 = uop_simplify(gen_int(&g, 3));
    UOp *s2 = uop_simplify(s1);
    if (s1 != s2) {
      print_both("not a fixed point", s1, s2, NULL);
      fail();
    }
    uop_pool_drain(t.ctx, mark);
  }
  ut_end(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounds_leaves),
      cmocka_unit_test(test_bounds_arith),
      cmocka_unit_test(test_bounds_divmod),
      cmocka_unit_test(test_bounds_logic),
      cmocka_unit_test(test_bounds_cast),
      cmocka_unit_test(test_bounds_overflow),
      cmocka_unit_test(test_bounds_deep),
      cmocka_unit_test(test_simp_identities),
      cmocka_unit_test(test_simp_constants),
      cmocka_unit_test(test_simp_divmod),
      cmocka_unit_test(test_simp_index),
      cmocka_unit_test(test_simp_compare),
      cmocka_unit_test(test_simp_cast),
      cmocka_unit_test(test_simp_keeps),
      cmocka_unit_test(test_infer),
      cmocka_unit_test(test_render),
      cmocka_unit_test(test_fixed_point),
      cmocka_unit_test(test_random_equivalence),
      cmocka_unit_test(test_random_equivalence_int8),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
