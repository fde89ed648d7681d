/* sint expressions: the out-of-line half of sint.h.
 *
 * A module of its own so that sint.h (the type and its inline helpers, which
 * view.h needs) includes nothing: the UOps the expressions are made of sit
 * above views (a VIEW's arg is a ShapeTracker), so the header is the interface
 * below both and this file the implementation above them.
 *
 * Expressions are UOps of one private context: int64 DEFINE_VARs, CONSTs and
 * ADD / MUL / MAX / IDIV / MOD over them; sums and products in a polynomial
 * normal form (below), the rest simplified by the symbolic rules (symbolic.h),
 * and interned in a table whose index is the handle. A UOp is already
 * hash-consed, so interning the normal form makes equal expressions equal
 * handles. Everything here runs under one mutex: the
 * context is not thread safe, and tvk contexts on several threads share it. */
#include "sint_expr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrmap.h"
#include "symbolic.h"
#include "uop.h"
#include "vec.h"

#define SINT_NAME_MAX 32
#define SINT_VARS_MAX 4    /* variables bounds_of enumerates */
#define SINT_ENUM_MAX 4096 /* combinations of their values it enumerates */

static struct {
  pthread_mutex_t mu;
  UCtx *ctx;
  UOp **byid; /* handle - SINT_HANDLE_FIRST -> its expression (one reference each) */
  struct SintBounds {
    bool known;
    int64_t lo, hi;
  } * bounds; /* beside byid: its bounds, once asked for */
  size_t n, cap, bcap;
  PtrMap ids; /* expression -> index in byid */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static DType i64(void) { return dt_make(DT_INT64); }

/* Under the lock. false on out of memory. */
static bool ready(void) {
  if (!g.ctx) g.ctx = uctx_new();
  return g.ctx != NULL;
}

/* Under the lock: the expression of handle s, NULL for anything else. */
static UOp *lookup(sint s) {
  return sint_is_sym(s) && (size_t)(s - SINT_HANDLE_FIRST) < g.n ? g.byid[s - SINT_HANDLE_FIRST]
                                                                 : NULL;
}

/* s as an expression of the context (autoreleased); NULL for SINT_NONE. */
static UOp *expr(sint s) {
  if (s == SINT_NONE) return NULL;
  if (sint_is_sym(s)) return lookup(s);
  return uop_const_int(g.ctx, i64(), s);
}

/* The sint of a simplified expression: a CONST is its integer, anything else
 * its interned handle. */
static sint intern(UOp *u) {
  if (!u) return SINT_NONE;
  if (u->op == OP_CONST) return (sint)uop_const_val(u).i;
  int64_t id = ptrmap_get(&g.ids, u);
  if (id >= 0) return SINT_HANDLE_FIRST + id;
  size_t nb = g.n;
  if ((int64_t)g.n >= SINT_HANDLE_COUNT ||
      !VEC_PUSH(g.bounds, nb, g.bcap, ((struct SintBounds){false, 0, 0})) ||
      !VEC_PUSH(g.byid, g.n, g.cap, u))
    return SINT_NONE;
  if (!ptrmap_put(&g.ids, u, (int64_t)(g.n - 1))) {
    g.n--;
    return SINT_NONE;
  }
  uop_retain(u);
  return SINT_HANDLE_FIRST + (int64_t)(g.n - 1);
}

/* ---------------------------------------------------------------- normal form
 *
 * The simplifier collects like terms of a sum but does not expand products of
 * sums or order the factors of a product, so (2n)((n+1)n) and ((2n)(n+1))n
 * would be two expressions. Sums and products are therefore kept in a normal
 * form: a polynomial whose monomials are a coefficient times atoms (variables,
 * and the IDIV / MOD / MAX nodes the polynomial cannot look into), atoms in
 * a fixed order inside a monomial, monomials in a fixed order in the sum. The
 * order comes from a structural key, so the same expression is built (and
 * renders) the same way in every run. */

#define POLY_TERMS 24
#define POLY_ATOMS 6

typedef struct {
  int64_t coef;
  int n;
  UOp *atom[POLY_ATOMS]; /* sorted by atom_cmp */
} Mono;

typedef struct {
  int n;
  Mono m[POLY_TERMS]; /* sorted by mono_cmp, no zero coefficient; the constant is a monomial of no
                         atoms */
} Poly;

static uint64_t mix64(uint64_t h, uint64_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

/* A key from the structure only (node hashes mix source pointers). */
static uint64_t skey(UOp *u) {
  uint64_t h = mix64(mix64(0x5171u, u->op), arg_hash(&u->arg));
  for (uint32_t i = 0; i < u->nsrc; i++) h = mix64(h, skey(u->src[i]));
  return h;
}

static int atom_cmp(UOp *a, UOp *b) {
  if (a == b) return 0;
  uint64_t x = skey(a), y = skey(b);
  return x < y ? -1 : x > y ? 1 : (uintptr_t)a < (uintptr_t)b ? -1 : 1;
}

/* Higher degree first, then atom by atom; the constant last. */
static int mono_cmp(const Mono *a, const Mono *b) {
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  for (int i = 0; i < a->n; i++) {
    int c = atom_cmp(a->atom[i], b->atom[i]);
    if (c) return c;
  }
  return 0;
}

/* Adds c * m to p (keeping it sorted); false when it does not fit. */
static bool poly_add_mono(Poly *p, const Mono *m) {
  if (m->coef == 0) return true;
  int i = 0, c = 1;
  while (i < p->n && (c = mono_cmp(&p->m[i], m)) < 0) i++;
  if (i < p->n && c == 0) {
    p->m[i].coef += m->coef;
    if (p->m[i].coef == 0) memmove(&p->m[i], &p->m[i + 1], (size_t)(--p->n - i) * sizeof *p->m);
    return true;
  }
  if (p->n == POLY_TERMS) return false;
  memmove(&p->m[i + 1], &p->m[i], (size_t)(p->n - i) * sizeof *p->m);
  p->m[i] = *m;
  p->n++;
  return true;
}

static bool mono_mul(const Mono *a, const Mono *b, Mono *r) {
  if (a->n + b->n > POLY_ATOMS) return false;
  r->coef = a->coef * b->coef;
  r->n = 0;
  int i = 0, j = 0;
  while (i < a->n || j < b->n)
    r->atom[r->n++] = j >= b->n || (i < a->n && atom_cmp(a->atom[i], b->atom[j]) <= 0)
                          ? a->atom[i++]
                          : b->atom[j++];
  return true;
}

/* u as a polynomial: ADD, MUL and CONST are looked into, anything else is an atom. */
static bool poly_of(UOp *u, Poly *p) {
  p->n = 0;
  if (u->op == OP_CONST) {
    Mono c = {.coef = uop_const_val(u).i, .n = 0};
    return poly_add_mono(p, &c);
  }
  if (u->op == OP_ADD || u->op == OP_MUL) {
    Poly a, b;
    if (!poly_of(u->src[0], &a) || !poly_of(u->src[1], &b)) return false;
    for (int i = 0; i < a.n; i++)
      for (int j = u->op == OP_ADD ? -1 : 0; j < (u->op == OP_ADD ? 0 : b.n); j++) {
        Mono m;
        if (j < 0)
          m = a.m[i];
        else if (!mono_mul(&a.m[i], &b.m[j], &m))
          return false;
        if (!poly_add_mono(p, &m)) return false;
      }
    for (int j = 0; u->op == OP_ADD && j < b.n; j++)
      if (!poly_add_mono(p, &b.m[j])) return false;
    return true;
  }
  Mono m = {.coef = 1, .n = 1, .atom = {u}};
  return poly_add_mono(p, &m);
}

/* The one UOp of a polynomial: monomials in order, each its atoms in order
 * times its coefficient, summed left to right. Built with uop_new, not the
 * simplifier, so the order stays. */
static UOp *uop_of_poly(const Poly *p) {
  UOp *sum = NULL;
  for (int i = 0; i < p->n; i++) {
    const Mono *m = &p->m[i];
    UOp *t = NULL;
    for (int k = 0; k < m->n; k++)
      t = t ? uop_new(g.ctx, OP_MUL, i64(), 2, (UOp *[]){t, m->atom[k]}, arg_none()) : m->atom[k];
    UOp *c = uop_const_int(g.ctx, i64(), m->coef);
    if (!t)
      t = c;
    else if (m->coef != 1)
      t = t && c ? uop_new(g.ctx, OP_MUL, i64(), 2, (UOp *[]){t, c}, arg_none()) : NULL;
    sum = !sum       ? t
          : sum && t ? uop_new(g.ctx, OP_ADD, i64(), 2, (UOp *[]){sum, t}, arg_none())
                     : NULL;
    if (!sum) return NULL;
  }
  return sum ? sum : uop_const_int(g.ctx, i64(), 0);
}

/* u in normal form; NULL when it does not fit the polynomial's room. */
static UOp *normal(UOp *u) {
  Poly p;
  return u && poly_of(u, &p) ? uop_of_poly(&p) : NULL;
}

/* op(a, b) built, simplified and interned. */
static sint binary(Op op, sint a, sint b) {
  if (a == SINT_NONE || b == SINT_NONE) return SINT_NONE;
  pthread_mutex_lock(&g.mu);
  sint r = SINT_NONE;
  if (ready()) {
    size_t mark = uop_pool_mark(g.ctx);
    UOp *x = expr(a), *y = expr(b);
    UOp *e = x && y ? uop_alu2(op, x, y) : NULL;
    /* sums and products need no simplifier: the normal form is one */
    if (e && op != OP_ADD && op != OP_MUL) e = uop_simplify(e);
    r = intern(normal(e));
    uop_pool_drain(g.ctx, mark);
  }
  pthread_mutex_unlock(&g.mu);
  return r;
}

sint sint_var(const char *name, int64_t lo, int64_t hi) {
  if (!name || !name[0] || strlen(name) >= SINT_NAME_MAX || lo < 0 || lo > hi || hi > INT32_MAX)
    return SINT_NONE;
  pthread_mutex_lock(&g.mu);
  sint r = SINT_NONE;
  if (ready()) {
    size_t mark = uop_pool_mark(g.ctx);
    r = intern(uop_new(g.ctx, OP_DEFINE_VAR, i64(), 0, NULL, arg_var(name, lo, hi)));
    uop_pool_drain(g.ctx, mark);
  }
  pthread_mutex_unlock(&g.mu);
  return r;
}

bool sint_var_info(sint v, const char **name, int64_t *lo, int64_t *hi) {
  if (!sint_is_sym(v)) return false;
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(v);
  bool ok = u && u->op == OP_DEFINE_VAR;
  if (ok) {
    if (name) *name = u->arg.var.name;
    if (lo) *lo = u->arg.var.lo;
    if (hi) *hi = u->arg.var.hi;
  }
  pthread_mutex_unlock(&g.mu);
  return ok;
}

sint sint_add_sym(sint a, sint b) { return binary(OP_ADD, a, b); }
sint sint_mul_sym(sint a, sint b) { return binary(OP_MUL, a, b); }
/* The simplifier folds max(a, b) when the bounds of a and b do not overlap;
 * their difference decides more (max(n + 1, n + 2) for any n). min(a, b) is
 * -max(-a, -b): the IR has no MIN. */
sint sint_max_sym(sint a, sint b) {
  if (sint_proven_le(b, a)) return a;
  if (sint_proven_le(a, b)) return b;
  return binary(OP_MAX, a, b);
}
sint sint_min_sym(sint a, sint b) {
  if (sint_proven_le(a, b)) return a;
  if (sint_proven_le(b, a)) return b;
  return sint_neg(binary(OP_MAX, sint_neg(a), sint_neg(b)));
}

/* The IR's IDIV and MOD truncate; they are floor's where a >= 0 < b. */
static bool floor_is_trunc(sint a, sint b) { return sint_vmin(a) >= 0 && sint_vmin(b) > 0; }

sint sint_fdiv_sym(sint a, sint b) {
  return floor_is_trunc(a, b) ? binary(OP_IDIV, a, b) : SINT_NONE;
}
sint sint_fmod_sym(sint a, sint b) {
  return floor_is_trunc(a, b) ? binary(OP_MOD, a, b) : SINT_NONE;
}

/* Adds u's variables (their DEFINE_VARs) to vars[0..n), each once, and
 * returns the new count; -1 when there are more than max. */
static int vars_of(UOp *u, UOp **vars, int n, int max) {
  if (n < 0) return n;
  if (u->op == OP_DEFINE_VAR) {
    for (int i = 0; i < n; i++)
      if (vars[i] == u) return n;
    return n < max ? (vars[n] = u, n + 1) : -1;
  }
  for (uint32_t i = 0; i < u->nsrc && n >= 0; i++) n = vars_of(u->src[i], vars, n, max);
  return n;
}

/* Bounds of expression u. Interval arithmetic (uop_vmin) is loose on
 * polynomials: n*n*2 - n*2 for n in [1, 6] gets [-10, 70] where the values
 * are [0, 60], and a dim that is not proven >= 0 is refused. Where the
 * variables take at most SINT_ENUM_MAX combinations of values, the bounds are
 * exact, from every combination; otherwise the intervals. */
static void bounds_of(UOp *u, int64_t *lo, int64_t *hi) {
  UOp *vars[SINT_VARS_MAX];
  int nv = vars_of(u, vars, 0, SINT_VARS_MAX);
  int64_t count = nv >= 0 ? 1 : SINT_ENUM_MAX + 1;
  for (int i = 0; i < nv && count <= SINT_ENUM_MAX; i++)
    count *= vars[i]->arg.var.hi - vars[i]->arg.var.lo + 1;
  if (count > SINT_ENUM_MAX) {
    *lo = uop_vmin(u), *hi = uop_vmax(u);
    return;
  }
  int64_t val[SINT_VARS_MAX];
  for (int i = 0; i < nv; i++) val[i] = vars[i]->arg.var.lo;
  *lo = INT64_MAX, *hi = INT64_MIN;
  for (int64_t k = 0; k < count; k++) {
    int64_t x = sym_infer(u, nv, vars, val);
    *lo = x < *lo ? x : *lo, *hi = x > *hi ? x : *hi;
    for (int i = 0; i < nv; i++) { /* the next combination */
      if (val[i] < vars[i]->arg.var.hi) {
        val[i]++;
        break;
      }
      val[i] = vars[i]->arg.var.lo;
    }
  }
}

static int64_t bound(sint s, bool lo) {
  if (s == SINT_NONE) return lo ? INT64_MIN : INT64_MAX;
  pthread_mutex_lock(&g.mu);
  size_t id = (size_t)(s - SINT_HANDLE_FIRST);
  int64_t r = lo ? INT64_MIN : INT64_MAX;
  if (lookup(s)) {
    if (!g.bounds[id].known) {
      bounds_of(g.byid[id], &g.bounds[id].lo, &g.bounds[id].hi);
      g.bounds[id].known = true;
    }
    r = lo ? g.bounds[id].lo : g.bounds[id].hi;
  }
  pthread_mutex_unlock(&g.mu);
  return r;
}

int64_t sint_vmin_sym(sint s) { return bound(s, true); }
int64_t sint_vmax_sym(sint s) { return bound(s, false); }

bool sint_proven_eq_sym(sint a, sint b) {
  sint d = sint_sub(a, b);
  return d == 0 || (d != SINT_NONE && sint_vmin(d) == 0 && sint_vmax(d) == 0);
}

sint sint_eval(sint s, int nvars, const sint *vars, const int64_t *vals) {
  if (!sint_is_sym(s)) return s;
  UOp *bind[16];
  sint r = SINT_NONE;
  if (nvars < 0 || nvars > 16) return r;
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(s);
  bool ok = u != NULL;
  for (int i = 0; ok && i < nvars; i++) ok = (bind[i] = lookup(vars[i])) != NULL;
  if (ok) r = sym_infer(u, nvars, bind, vals);
  pthread_mutex_unlock(&g.mu);
  return r;
}

int sint_str(sint s, char *buf, size_t n) {
  if (s == SINT_NONE) return snprintf(buf, n, "<none>");
  if (!sint_is_sym(s)) return snprintf(buf, n, "%lld", (long long)s);
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(s);
  char *txt = u ? uop_render_raw(u) : NULL;
  pthread_mutex_unlock(&g.mu);
  int len = snprintf(buf, n, "%s", txt ? txt : "<?>");
  free(txt);
  return len;
}

/* u rebuilt in ctx with dtype dt, sources first (expressions are small). */
static UOp *rebuild(UCtx *ctx, DType dt, UOp *u) {
  if (u->op == OP_CONST) return uop_const_int(ctx, dt, uop_const_val(u).i);
  if (u->op == OP_DEFINE_VAR) {
    UOp *var = uop_var(ctx, u->arg.var.name, u->arg.var.lo, u->arg.var.hi);
    return var ? uop_cast(var, dt) : NULL;
  }
  UOp *src[3];
  if (u->nsrc > 3) return NULL;
  for (uint32_t i = 0; i < u->nsrc; i++)
    if (!(src[i] = rebuild(ctx, dt, u->src[i]))) return NULL;
  return uop_alu((Op)u->op, (int)u->nsrc, src);
}

int sint_vars(sint s, sint *out, int n, int max) {
  if (!sint_is_sym(s)) return s == SINT_NONE ? -1 : n;
  if (n < 0 || n > max) return -1;
  UOp *found[64];
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(s);
  int nf = u ? vars_of(u, found, 0, 64) : -1;
  for (int i = 0; i < nf && n >= 0; i++) { /* each by its handle (interned when made) */
    sint h = intern(found[i]);
    bool have = false;
    for (int j = 0; j < n && !have; j++) have = out[j] == h;
    if (!have) n = n < max && h != SINT_NONE ? (out[n] = h, n + 1) : -1;
  }
  pthread_mutex_unlock(&g.mu);
  return nf < 0 ? -1 : n;
}

sint sint_eval_named(sint s, int nvars, const char *const *names, const int64_t *vals) {
  if (!sint_is_sym(s)) return s;
  UOp *found[16], *bind[16];
  int64_t v[16];
  sint r = SINT_NONE;
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(s);
  int nf = u ? vars_of(u, found, 0, 16) : -1;
  bool ok = nf >= 0;
  for (int i = 0; ok && i < nf; i++) { /* each variable's value, by its name */
    int j = 0;
    while (j < nvars && strcmp(names[j], found[i]->arg.var.name) != 0) j++;
    ok = j < nvars;
    if (ok) bind[i] = found[i], v[i] = vals[j];
  }
  if (ok) r = sym_infer(u, nf, bind, v);
  pthread_mutex_unlock(&g.mu);
  return r;
}

UOp *sint_uop(UCtx *ctx, DType dt, sint s) {
  if (s == SINT_NONE) return NULL;
  if (!sint_is_sym(s)) return uop_const_int(ctx, dt, s);
  pthread_mutex_lock(&g.mu);
  UOp *u = lookup(s);
  UOp *r = u ? rebuild(ctx, dt, u) : NULL;
  pthread_mutex_unlock(&g.mu);
  return r;
}
