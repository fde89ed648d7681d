/* sint expressions: see sint.h.
 *
 * Expressions are UOps of one private context: int64 DEFINE_VARs, CONSTs and
 * ADD / MUL / MAX / IDIV / MOD over them, simplified by the symbolic rules
 * (symbolic.h) and interned in a table whose index is the handle. A UOp is
 * already hash-consed, so interning the simplified node makes equal
 * expressions equal handles. Everything here runs under one mutex: the
 * context is not thread safe, and tvk contexts on several threads share it. */
#include "sint.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrmap.h"
#include "symbolic.h"
#include "uop.h"
#include "vec.h"

#define SINT_NAME_MAX 32

static struct {
  pthread_mutex_t mu;
  UCtx *ctx;
  UOp **byid; /* handle - SINT_HANDLE_FIRST -> its expression (one reference each) */
  size_t n, cap;
  PtrMap ids; /* expression -> index in byid */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static DType i64(void) { return dt_make(DT_INT64); }

/* Under the lock. false on out of memory. */
static bool ready(void) {
  if (!g.ctx) g.ctx = uctx_new();
  return g.ctx != NULL;
}

/* s as an expression of the context (autoreleased); NULL for SINT_NONE. */
static UOp *expr(sint s) {
  if (s == SINT_NONE) return NULL;
  if (sint_is_sym(s)) return g.byid[s - SINT_HANDLE_FIRST];
  return uop_const_int(g.ctx, i64(), s);
}

/* The sint of a simplified expression: a CONST is its integer, anything else
 * its interned handle. */
static sint intern(UOp *u) {
  if (!u) return SINT_NONE;
  if (u->op == OP_CONST) return (sint)uop_const_val(u).i;
  int64_t id = ptrmap_get(&g.ids, u);
  if (id >= 0) return SINT_HANDLE_FIRST + id;
  if ((int64_t)g.n >= SINT_HANDLE_COUNT || !VEC_PUSH(g.byid, g.n, g.cap, u)) return SINT_NONE;
  if (!ptrmap_put(&g.ids, u, (int64_t)(g.n - 1))) {
    g.n--;
    return SINT_NONE;
  }
  uop_retain(u);
  return SINT_HANDLE_FIRST + (int64_t)(g.n - 1);
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
    r = intern(e ? uop_simplify(e) : NULL);
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
  bool ok = (size_t)(v - SINT_HANDLE_FIRST) < g.n;
  UOp *u = ok ? g.byid[v - SINT_HANDLE_FIRST] : NULL;
  ok = ok && u->op == OP_DEFINE_VAR;
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
sint sint_max_sym(sint a, sint b) { return binary(OP_MAX, a, b); }
/* min(a, b) = -max(-a, -b): the IR has no MIN. */
sint sint_min_sym(sint a, sint b) { return sint_neg(binary(OP_MAX, sint_neg(a), sint_neg(b))); }

/* The IR's IDIV and MOD truncate; they are floor's where a >= 0 < b. */
static bool floor_is_trunc(sint a, sint b) { return sint_vmin(a) >= 0 && sint_vmin(b) > 0; }

sint sint_fdiv_sym(sint a, sint b) {
  return floor_is_trunc(a, b) ? binary(OP_IDIV, a, b) : SINT_NONE;
}
sint sint_fmod_sym(sint a, sint b) {
  return floor_is_trunc(a, b) ? binary(OP_MOD, a, b) : SINT_NONE;
}

static int64_t bound(sint s, bool lo) {
  if (s == SINT_NONE) return lo ? INT64_MIN : INT64_MAX;
  pthread_mutex_lock(&g.mu);
  UOp *u = (size_t)(s - SINT_HANDLE_FIRST) < g.n ? g.byid[s - SINT_HANDLE_FIRST] : NULL;
  int64_t r = !u ? (lo ? INT64_MIN : INT64_MAX) : lo ? uop_vmin(u) : uop_vmax(u);
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
  bool ok = (size_t)(s - SINT_HANDLE_FIRST) < g.n;
  for (int i = 0; ok && i < nvars; i++) {
    ok = sint_is_sym(vars[i]) && (size_t)(vars[i] - SINT_HANDLE_FIRST) < g.n;
    if (ok) bind[i] = g.byid[vars[i] - SINT_HANDLE_FIRST];
  }
  if (ok) r = sym_infer(g.byid[s - SINT_HANDLE_FIRST], nvars, bind, vals);
  pthread_mutex_unlock(&g.mu);
  return r;
}

int sint_str(sint s, char *buf, size_t n) {
  if (s == SINT_NONE) return snprintf(buf, n, "<none>");
  if (!sint_is_sym(s)) return snprintf(buf, n, "%lld", (long long)s);
  pthread_mutex_lock(&g.mu);
  char *txt =
      (size_t)(s - SINT_HANDLE_FIRST) < g.n ? uop_render_raw(g.byid[s - SINT_HANDLE_FIRST]) : NULL;
  pthread_mutex_unlock(&g.mu);
  int len = snprintf(buf, n, "%s", txt ? txt : "<?>");
  free(txt);
  return len;
}
