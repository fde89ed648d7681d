/* UOp interning, reference counts, autorelease pools and builders: see uop.h. */
#include "uop.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ptrmap.h"
#include "ir/strbuf.h"
#include "ir/vec.h"
#include "view.h"

struct UCtx {
  UOp **buckets; /* intern table: chains through UOp.chain */
  size_t nbuckets, live;
  UOp **pool; /* autorelease pool: each entry owns one reference */
  size_t npool, cappool;
  void (*buffer_hook)(void *user, UOp *buffer);
  void *hook_user;
  uint64_t failures; /* nodes uop_new could not allocate (uctx_alloc_failures) */
};

/* ---------------------------------------------------------------- args */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s; s++) h = mix(h, (unsigned char)*s);
  return h;
}

static uint64_t hash_ints(uint64_t h, int n, const int64_t *v) {
  h = mix(h, (uint64_t)n);
  for (int i = 0; i < n; i++) h = mix(h, (uint64_t)v[i]);
  return h;
}

uint64_t arg_hash(const Arg *a) {
  uint64_t h = mix(0, a->kind);
  uint64_t bits;
  switch ((ArgKind)a->kind) {
  case ARG_NONE: return h;
  case ARG_INT: return mix(h, (uint64_t)a->i);
  case ARG_FLOAT: memcpy(&bits, &a->f, sizeof bits); return mix(h, bits);
  case ARG_INTS: return hash_ints(h, a->ints.n, a->ints.v);
  case ARG_VAR: return mix(mix(hash_str(h, a->var.name), (uint64_t)a->var.lo), (uint64_t)a->var.hi);
  case ARG_REDUCE: return hash_ints(mix(h, a->red.op), a->red.n, a->red.axes);
  case ARG_ST: return mix(h, st_hash(a->st));
  }
  return h;
}

static bool ints_eq(int n, const int64_t *a, int m, const int64_t *b) {
  return n == m && (n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0);
}

bool arg_eq(const Arg *a, const Arg *b) {
  if (a->kind != b->kind) return false;
  switch ((ArgKind)a->kind) {
  case ARG_NONE: return true;
  case ARG_INT: return a->i == b->i;
  case ARG_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0; /* NaN == NaN, 0.0 != -0.0 */
  case ARG_INTS: return ints_eq(a->ints.n, a->ints.v, b->ints.n, b->ints.v);
  case ARG_VAR:
    return strcmp(a->var.name, b->var.name) == 0 && a->var.lo == b->var.lo &&
           a->var.hi == b->var.hi;
  case ARG_REDUCE:
    return a->red.op == b->red.op && ints_eq(a->red.n, a->red.axes, b->red.n, b->red.axes);
  case ARG_ST: return st_eq(a->st, b->st);
  }
  return false;
}

static int64_t *dup_ints(int n, const int64_t *v, bool *ok) {
  if (n == 0) return NULL;
  int64_t *r = malloc((size_t)n * sizeof *r);
  if (!r)
    *ok = false;
  else
    memcpy(r, v, (size_t)n * sizeof *r);
  return r;
}

static char *dup_str(const char *s, bool *ok) {
  char *r = strdup(s);
  if (!r) *ok = false;
  return r;
}

/* Deep copy of the pointed-to data, so the UOp owns its arg. */
static bool arg_copy(Arg *dst, const Arg *src) {
  bool ok = true;
  *dst = *src;
  switch ((ArgKind)src->kind) {
  case ARG_INTS: dst->ints.v = dup_ints(src->ints.n, src->ints.v, &ok); break;
  case ARG_VAR: dst->var.name = dup_str(src->var.name, &ok); break;
  case ARG_REDUCE: dst->red.axes = dup_ints(src->red.n, src->red.axes, &ok); break;
  case ARG_ST:
    dst->st = st_clone(src->st);
    ok = dst->st != NULL;
    break;
  default: break;
  }
  return ok;
}

static void arg_release(Arg *a) {
  switch ((ArgKind)a->kind) {
  case ARG_INTS: free((void *)a->ints.v); break;
  case ARG_VAR: free((void *)a->var.name); break;
  case ARG_REDUCE: free((void *)a->red.axes); break;
  case ARG_ST: st_free((ShapeTracker *)a->st); break;
  default: break;
  }
}

static int render_ints(char *buf, size_t n, int cnt, const int64_t *v) {
  int len = snprintf(buf, n, "(");
  for (int i = 0; i < cnt; i++) {
    size_t at = (size_t)len < n ? (size_t)len : n;
    len += snprintf(buf + at, n - at, "%s%" PRId64, i ? ", " : "", v[i]);
  }
  size_t at = (size_t)len < n ? (size_t)len : n;
  return len + snprintf(buf + at, n - at, cnt == 1 ? ",)" : ")");
}

int arg_str_render(const Arg *a, char *buf, size_t n) {
  switch ((ArgKind)a->kind) {
  case ARG_NONE: return snprintf(buf, n, "None");
  case ARG_INT: return snprintf(buf, n, "%" PRId64, a->i);
  case ARG_FLOAT: return snprintf(buf, n, "%.9g", a->f);
  case ARG_INTS: return render_ints(buf, n, a->ints.n, a->ints.v);
  case ARG_VAR:
    return snprintf(buf, n, "('%s', %" PRId64 ", %" PRId64 ")", a->var.name, a->var.lo, a->var.hi);
  case ARG_REDUCE: {
    int len = snprintf(buf, n, "(%s, ", op_name((Op)a->red.op));
    size_t at = (size_t)len < n ? (size_t)len : n;
    len += render_ints(buf + at, n - at, a->red.n, a->red.axes);
    at = (size_t)len < n ? (size_t)len : n;
    return len + snprintf(buf + at, n - at, ")");
  }
  case ARG_ST: {
    const View *v = st_top(a->st);
    int len = snprintf(buf, n, "ShapeTracker(views=%d, shape=", a->st->nviews);
    size_t at = (size_t)len < n ? (size_t)len : n;
    len += render_ints(buf + at, n - at, v->ndim, v->shape);
    at = (size_t)len < n ? (size_t)len : n;
    return len + snprintf(buf + at, n - at, ")");
  }
  }
  return snprintf(buf, n, "?");
}

/* ---------------------------------------------------------------- context */

UCtx *uctx_new(void) {
  UCtx *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->nbuckets = 1024;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets) {
    free(c);
    return NULL;
  }
  return c;
}

size_t uctx_live(const UCtx *ctx) { return ctx->live; }

void uctx_set_buffer_hook(UCtx *ctx, void (*fn)(void *user, UOp *buffer), void *user) {
  ctx->buffer_hook = fn;
  ctx->hook_user = user;
}

static void unlink_node(UCtx *c, UOp *u) {
  UOp **p = &c->buckets[u->hash & (c->nbuckets - 1)];
  while (*p != u) p = &(*p)->chain;
  *p = u->chain;
  c->live--;
}

/* Frees u and releases its sources; iterative so that long chains do not
 * overflow the C stack. The `chain` field of dead nodes links the work list. */
static void destroy(UOp *u) {
  UOp *work = u;
  u->chain = NULL;
  while (work) {
    UOp *n = work;
    work = n->chain;
    for (uint32_t i = 0; i < n->nsrc; i++) {
      UOp *s = n->src[i];
      if (--s->refs == 0) {
        unlink_node(s->ctx, s);
        s->chain = work;
        work = s;
      }
    }
    if (n->op == OP_BUFFER && n->ctx->buffer_hook) n->ctx->buffer_hook(n->ctx->hook_user, n);
    arg_release(&n->arg);
    free(n);
  }
}

void uctx_free(UCtx *ctx) {
  if (!ctx) return;
  uop_pool_drain(ctx, 0);
  /* What is left is held by references the caller forgot; free it anyway. */
  for (size_t b = 0; b < ctx->nbuckets; b++) {
    for (UOp *u = ctx->buckets[b], *next; u; u = next) {
      next = u->chain;
      arg_release(&u->arg);
      free(u);
    }
  }
  free(ctx->buckets);
  free(ctx->pool);
  free(ctx);
}

/* ---------------------------------------------------------------- refs and pools */

UOp *uop_retain(UOp *u) {
  if (u) u->refs++;
  return u;
}

void uop_release(UOp *u) {
  if (!u) return;
  assert(u->refs > 0);
  if (--u->refs == 0) {
    unlink_node(u->ctx, u);
    destroy(u);
  }
}

size_t uop_pool_mark(UCtx *ctx) { return ctx->npool; }

void uop_pool_drain(UCtx *ctx, size_t mark) {
  assert(mark <= ctx->npool);
  while (ctx->npool > mark) uop_release(ctx->pool[--ctx->npool]);
}

UOp *uop_autorelease(UOp *u) {
  if (!u) return NULL;
  UCtx *c = u->ctx;
  /* Out of memory: keeping the reference leaks one node until uctx_free,
   * which is better than freeing a node the caller is about to use. */
  (void)VEC_PUSH(c->pool, c->npool, c->cappool, u);
  return u;
}

UOp *uop_pool_drain_keep(UCtx *ctx, size_t mark, UOp *keep) {
  uop_retain(keep);
  uop_pool_drain(ctx, mark);
  return uop_autorelease(keep);
}

/* ---------------------------------------------------------------- interning */

static uint64_t node_hash(Op op, DType dt, int nsrc, UOp *const *src, const Arg *arg) {
  uint64_t h = mix(mix(0x51ed27u, op), dt_key(dt));
  for (int i = 0; i < nsrc; i++) h = mix(h, (uint64_t)(uintptr_t)src[i]);
  return mix(h, arg_hash(arg));
}

static bool node_eq(const UOp *u, Op op, DType dt, int nsrc, UOp *const *src, const Arg *arg) {
  if (u->op != op || !dt_eq(u->dtype, dt) || u->nsrc != (uint32_t)nsrc) return false;
  for (int i = 0; i < nsrc; i++)
    if (u->src[i] != src[i]) return false;
  return arg_eq(&u->arg, arg);
}

static void grow_table(UCtx *c) {
  size_t n = c->nbuckets * 2;
  UOp **b = calloc(n, sizeof *b);
  if (!b) return; /* longer chains, still correct */
  for (size_t i = 0; i < c->nbuckets; i++) {
    for (UOp *u = c->buckets[i], *next; u; u = next) {
      next = u->chain;
      u->chain = b[u->hash & (n - 1)];
      b[u->hash & (n - 1)] = u;
    }
  }
  free(c->buckets);
  c->buckets = b;
  c->nbuckets = n;
}

/* UOp.device of a new node (uop.h): a BUFFER's is the third of its ints
 * (graph_buffer_on), a COPY's its arg. */
static int16_t node_device(const UOp *u) {
  if (u->op == OP_BUFFER)
    return (int16_t)(u->arg.kind == ARG_INTS && u->arg.ints.n > 2 ? u->arg.ints.v[2] : 0);
  if (u->op == OP_COPY) return (int16_t)u->arg.i;
  if (u->op == OP_MULTI) return UOP_DEVICE_MULTI;
  int16_t d = UOP_DEVICE_NONE;
  for (uint32_t k = 0; k < u->nsrc; k++) {
    int16_t s = u->src[k]->device;
    if (s == UOP_DEVICE_NONE) continue;
    if (d != UOP_DEVICE_NONE && s != d) return UOP_DEVICE_MIXED;
    d = s;
  }
  return d;
}

UOp *uop_new(UCtx *ctx, Op op, DType dtype, int nsrc, UOp *const *src, Arg arg) {
  assert(op > OP_NONE && op < OP_COUNT && nsrc >= 0);
  for (int i = 0; i < nsrc; i++) {
    if (!src[i]) return NULL; /* a source that ran out of memory */
    assert(src[i]->ctx == ctx);
  }
  uint64_t h = node_hash(op, dtype, nsrc, src, &arg);
  for (UOp *u = ctx->buckets[h & (ctx->nbuckets - 1)]; u; u = u->chain)
    if (u->hash == h && node_eq(u, op, dtype, nsrc, src, &arg))
      return uop_autorelease(uop_retain(u));

  UOp *u = calloc(1, sizeof *u + (size_t)nsrc * sizeof(UOp *));
  if (!u) return ctx->failures++, NULL;
  if (!arg_copy(&u->arg, &arg)) {
    arg_release(&u->arg);
    free(u);
    return ctx->failures++, NULL;
  }
  u->op = (uint8_t)op;
  u->dtype = dtype;
  u->nsrc = (uint32_t)nsrc;
  u->src = (UOp **)(u + 1);
  u->ctx = ctx;
  u->hash = h;
  u->refs = 1;
  for (int i = 0; i < nsrc; i++) u->src[i] = uop_retain(src[i]);
  u->device = node_device(u);
  if (ctx->live >= ctx->nbuckets) grow_table(ctx);
  UOp **bucket = &ctx->buckets[h & (ctx->nbuckets - 1)];
  u->chain = *bucket;
  *bucket = u;
  ctx->live++;
  return uop_autorelease(u);
}

uint64_t uctx_alloc_failures(const UCtx *ctx) { return ctx->failures; }

UOp *uop_replace_src(UOp *u, int nsrc, UOp *const *src) {
  return uop_new(u->ctx, (Op)u->op, u->dtype, nsrc, src, u->arg);
}
UOp *uop_replace_arg(UOp *u, Arg arg) {
  return uop_new(u->ctx, (Op)u->op, u->dtype, (int)u->nsrc, u->src, arg);
}
UOp *uop_replace_dtype(UOp *u, DType dt) {
  return uop_new(u->ctx, (Op)u->op, dt, (int)u->nsrc, u->src, u->arg);
}

/* ---------------------------------------------------------------- builders */

UOp *uop_const(UCtx *ctx, DType dt, CVal v) {
  assert(dt.count == 1 && !dt_is_ptr(dt) && dt.scalar != DT_VOID);
  ScalarType s = (ScalarType)dt.scalar;
  Arg a = dt_is_float(dt) ? arg_float(dt_truncate_f(s, v.f)) : arg_int(dt_truncate_i(s, v.i));
  return uop_new(ctx, OP_CONST, dt, 0, NULL, a);
}

UOp *uop_const_int(UCtx *ctx, DType dt, int64_t v) {
  return uop_const(ctx, dt, cval_cast((CVal){.i = v}, DT_INT64, (ScalarType)dt.scalar));
}

UOp *uop_const_float(UCtx *ctx, DType dt, double v) {
  return uop_const(ctx, dt, cval_cast((CVal){.f = v}, DT_FLOAT64, (ScalarType)dt.scalar));
}

UOp *uop_const_like(UOp *u, int64_t v) {
  return u ? uop_const_int(u->ctx, dt_scalar(u->dtype), v) : NULL;
}

CVal uop_const_val(const UOp *u) {
  assert(u->op == OP_CONST);
  return u->arg.kind == ARG_FLOAT ? (CVal){.f = u->arg.f} : (CVal){.i = u->arg.i};
}

double uop_const_double(const UOp *u) {
  return cval_to_double(uop_const_val(u), (ScalarType)u->dtype.scalar);
}

UOp *uop_var(UCtx *ctx, const char *name, int64_t lo, int64_t hi) {
  return uop_new(ctx, OP_DEFINE_VAR, DT(INT32), 0, NULL, arg_var(name, lo, hi));
}

UOp *uop_range(UCtx *ctx, UOp *end, int64_t axis_id) {
  return end ? uop_new(ctx, OP_RANGE, end->dtype, 1, &end, arg_int(axis_id)) : NULL;
}

UOp *uop_range_n(UCtx *ctx, int64_t end, int64_t axis_id) {
  return uop_range(ctx, uop_const_int(ctx, DT(INT32), end), axis_id);
}

UOp *uop_alu(Op op, int nsrc, UOp *const *src) {
  assert(op_in(op, G_ALU) && nsrc >= 1);
  for (int i = 0; i < nsrc; i++)
    if (!src[i]) return NULL;
  DType dt = (op == OP_CMPLT || op == OP_CMPNE) ? dt_vec(DT(BOOL), src[0]->dtype.count)
                                                : src[nsrc - 1]->dtype;
  return uop_new(src[0]->ctx, op, dt, nsrc, src, arg_none());
}

UOp *uop_alu1(Op op, UOp *a) { return uop_alu(op, 1, &a); }
UOp *uop_alu2(Op op, UOp *a, UOp *b) { return uop_alu(op, 2, (UOp *[]){a, b}); }
UOp *uop_alu3(Op op, UOp *a, UOp *b, UOp *c) { return uop_alu(op, 3, (UOp *[]){a, b, c}); }

UOp *uop_add_c(UOp *a, int64_t c) { return uop_add(a, uop_const_like(a, c)); }
UOp *uop_mul_c(UOp *a, int64_t c) { return uop_mul(a, uop_const_like(a, c)); }
UOp *uop_idiv_c(UOp *a, int64_t c) { return uop_idiv(a, uop_const_like(a, c)); }
UOp *uop_mod_c(UOp *a, int64_t c) { return uop_mod(a, uop_const_like(a, c)); }
UOp *uop_lt_c(UOp *a, int64_t c) { return uop_lt(a, uop_const_like(a, c)); }

/* As the seed: a - b is a + b*(-1), exact for ints under wrap-around and for floats. */
UOp *uop_sub(UOp *a, UOp *b) { return uop_add(a, uop_mul_c(b, -1)); }

UOp *uop_cast(UOp *a, DType dt) {
  if (!a || dt_eq(a->dtype, dt)) return a;
  return uop_new(a->ctx, OP_CAST, dt, 1, &a, arg_none());
}

UOp *uop_sink(UCtx *ctx, int nsrc, UOp *const *src) {
  return uop_new(ctx, OP_SINK, (DType){DT_VOID, 1, 0, 0}, nsrc, src, arg_none());
}

/* ---------------------------------------------------------------- traversal */

/* Iterative post-order DFS: an explicit stack of (node, next source index). */
UOp **uop_toposort(UOp *root, size_t *n) {
  typedef struct {
    UOp *u;
    uint32_t next;
  } Frame;
  Frame *stack = NULL;
  UOp **out = NULL;
  size_t cap = 0, depth = 0, cnt = 0, outcap = 0;
  PtrMap seen = {0};
  bool ok = ptrmap_put(&seen, root, 0) && VEC_PUSH(stack, depth, cap, ((Frame){root, 0}));
  while (ok && depth) {
    Frame *f = &stack[depth - 1];
    if (f->next < f->u->nsrc) {
      UOp *s = f->u->src[f->next++];
      bool added = false;
      ok = ptrmap_insert(&seen, s, 0, &added) != NULL;
      if (ok && added) ok = VEC_PUSH(stack, depth, cap, ((Frame){s, 0}));
      continue;
    }
    ok = VEC_PUSH(out, cnt, outcap, f->u);
    depth--;
  }
  free(stack);
  ptrmap_free(&seen);
  if (!ok) {
    free(out);
    return NULL;
  }
  *n = cnt;
  return out;
}

/* ---------------------------------------------------------------- printing */

/* Per-node print state for the pretty printer. */
typedef struct {
  int uses; /* how many edges point at the node (1 for the root) */
  int id;   /* order of first discovery, printed as x<id> */
  bool printed;
} PState;

typedef struct {
  UOp **nodes; /* toposorted */
  size_t n;
  PState *st;
  PtrMap index; /* node -> its position in nodes */
} Printer;

static PState *printer_state(const Printer *p, const UOp *u) {
  int64_t i = ptrmap_get(&p->index, u);
  assert(i >= 0);
  return &p->st[i];
}

static void print_node(Printer *p, Str *s, UOp *u, int depth) {
  PState *ps = printer_state(p, u);
  if (ps->printed) {
    str_printf(s, "%*s x%d", depth, "", ps->id);
    return;
  }
  ps->printed = true;
  char dt[48], arg[256];
  arg_str_render(&u->arg, arg, sizeof arg);
  str_printf(s, "%*s", depth, "");
  if (ps->uses > 1) str_printf(s, "x%d:=", ps->id);
  str_printf(s, "UOp(Ops.%s, dtypes.%s, arg=%s, src=(", op_name((Op)u->op), dt_str(u->dtype, dt),
             arg);
  for (uint32_t i = 0; i < u->nsrc; i++) {
    str_printf(s, "\n");
    print_node(p, s, u->src[i], depth + 2);
    str_printf(s, ",");
  }
  str_printf(s, "))");
}

char *uop_pretty(UOp *root) {
  Printer p = {0};
  p.nodes = uop_toposort(root, &p.n);
  if (!p.nodes) return NULL;
  p.st = calloc(p.n, sizeof *p.st);
  Str s = {0};
  bool ok = p.st && ptrmap_init(&p.index, p.n);
  for (size_t i = 0; ok && i < p.n; i++) ok = ptrmap_put(&p.index, p.nodes[i], (int64_t)i);
  if (!ok)
    s.oom = true;
  else {
    /* ids in order of first discovery from the root, as the seed numbers them */
    p.st[p.n - 1].uses = 1;
    int next_id = 1;
    for (size_t i = p.n; i-- > 0;) {
      UOp *u = p.nodes[i];
      for (uint32_t k = 0; k < u->nsrc; k++) {
        PState *cs = printer_state(&p, u->src[k]);
        if (cs->uses++ == 0) cs->id = next_id++;
      }
    }
    print_node(&p, &s, root, 0);
  }
  free(p.st);
  ptrmap_free(&p.index);
  free(p.nodes);
  return str_take(&s);
}

void uop_print(FILE *f, UOp *root) {
  char *txt = uop_pretty(root);
  fprintf(f, "%s\n", txt ? txt : "<out of memory>");
  free(txt);
}
