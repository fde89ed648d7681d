/* ctx_realize (frontend.h): schedule the graphs of the tensors, run the
 * kernels, and make every live tensor read the results from memory. */
#include <stdlib.h>
#include <string.h>

#include "ir/pattern.h"
#include "runtime/run.h"
#include "schedule/smap.h"

/* A node that is data already: realizing it costs nothing. */
static bool is_data(const UOp *u) {
  const UOp *b = u->op == OP_VIEW ? u->src[0] : u;
  return b->op == OP_BUFFER || b->op == OP_CONST; /* not ARANGE: it is computed */
}

/* ---------------------------------------------------------------- replacing realized nodes */

/* What each node the schedule computed (or aliased) becomes: a VIEW of memory. */
typedef struct {
  SMap index; /* node -> index in with[] */
  UOp **with; /* autoreleased */
} Repl;

enum { X = 1, V };

/* x computed by the schedule -> VIEW(BUFFER(x), row-major) */
static UOp *repl_node(void *ctx, UOp **c) {
  Repl *r = ctx;
  int64_t i = smap_get(&r->index, c[X]);
  return i < 0 ? NULL : r->with[i];
}

/* VIEW(x, st), x computed -> VIEW(BUFFER(x), st): composed, no VIEW on a VIEW */
static UOp *repl_view(void *ctx, UOp **c) {
  Repl *r = ctx;
  int64_t i = smap_get(&r->index, c[X]);
  return i < 0 ? NULL : graph_view(r->with[i], c[V]->arg.st);
}

static const Rule repl_rules[] = {
    /* VIEW(x, st) -> VIEW(BUFFER(x), st) */
    {PAT_OP(OP_VIEW, V, PAT_ANY(X)), repl_view},
    /* x -> VIEW(BUFFER(x), row-major) */
    {PAT_ANY(X), repl_node},
};

/* VIEW(BUFFER) of schedule buffer b, row-major in its node's shape. */
static UOp *buffer_view(tvk_ctx *ctx, const SchedBuf *b) {
  ShapeTracker *st = st_from_shape(b->ndim, b->shape);
  UOp *v = st ? uop_new(ctx->u, OP_VIEW, b->buffer->dtype, 1, (UOp *const *)&b->buffer, arg_st(st))
              : NULL;
  st_free(st);
  return v;
}

static bool repl_build(tvk_ctx *ctx, const Schedule *s, Repl *r) {
  int n = s->nbufs + s->naliases;
  if (!(r->with = calloc((size_t)(n ? n : 1), sizeof *r->with)) || !smap_init(&r->index, (size_t)n))
    return false;
  for (int i = 0; i < s->nbufs; i++) {
    if (!s->bufs[i].node) continue;
    if (!(r->with[i] = buffer_view(ctx, &s->bufs[i])) || !smap_put(&r->index, s->bufs[i].node, i))
      return false;
  }
  /* an alias is VIEW(y, st): y a BUFFER already, or computed (and in the map) */
  for (int a = 0; a < s->naliases; a++) {
    UOp *v = s->aliases[a].view, *y = v->src[0];
    int64_t yi = smap_get(&r->index, y);
    UOp *w = y->op == OP_BUFFER ? v : yi >= 0 ? graph_view(r->with[yi], v->arg.st) : NULL;
    if (!w || !smap_put(&r->index, s->aliases[a].node, s->nbufs + a)) return false;
    r->with[s->nbufs + a] = w;
  }
  return true;
}

/* Rewrites the node of every live tensor in one pass, top of the graph first,
 * so that what a computed node was built from is not visited at all. */
static tvk_status replace_realized(tvk_ctx *ctx, const Schedule *s) {
  int n = 0;
  for (tvk_tensor *t = ctx->head; t; t = t->next) n += t->uop != NULL;
  if (n == 0) return TVK_OK;
  UOp **us = malloc((size_t)n * sizeof *us);
  PatternMatcher *pm = pm_new(repl_rules, RULES_N(repl_rules));
  Repl r = {0};
  UOp *out = NULL;
  if (us && pm && repl_build(ctx, s, &r)) {
    int i = 0;
    for (tvk_tensor *t = ctx->head; t; t = t->next)
      if (t->uop) us[i++] = t->uop;
    UOp *sink = uop_sink(ctx->u, n, us);
    out = sink ? graph_rewrite(sink, pm, &r, true) : NULL;
  }
  if (out) {
    int i = 0;
    for (tvk_tensor *t = ctx->head; t; t = t->next)
      if (t->uop) tensor_set_uop(t, out->src[i++]);
  }
  free(us);
  free(r.with);
  smap_free(&r.index);
  pm_free(pm);
  return out ? TVK_OK
             : ctx_fail(ctx, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory updating tensors");
}

/* ---------------------------------------------------------------- assigns */

typedef struct {
  UOp **v;
  size_t n, cap;
} UStack;

static bool upush(UStack *st, UOp *u) {
  if (st->n == st->cap) {
    size_t cap = st->cap ? 2 * st->cap : 64;
    UOp **nv = realloc(st->v, cap * sizeof *nv);
    if (!nv) return false;
    st->v = nv, st->cap = cap;
  }
  st->v[st->n++] = u;
  return true;
}


/* Walks the graph under u down to data, calling f on every node; below an
 * ASSIGN only its value is walked (its target is the buffer it writes, not a
 * read of the old value). false on out of memory. */
static bool walk_graph(UOp *u, SMap *seen, bool (*f)(UOp *, void *), void *arg) {
  UStack st = {0};
  bool ok = upush(&st, u);
  while (ok && st.n) {
    UOp *x = st.v[--st.n];
    if (smap_get(seen, x) >= 0) continue;
    ok = smap_put(seen, x, 1) && f(x, arg);
    for (uint32_t k = x->op == OP_ASSIGN ? 1 : 0; ok && k < x->nsrc; k++) ok = upush(&st, x->src[k]);
  }
  free(st.v);
  return ok;
}

typedef struct {
  SMap targets; /* BUFFER UOps some ASSIGN in the roots writes */
  bool hit;     /* the walked graph reads one of them */
} Assigns;

static bool find_assign(UOp *u, void *arg) {
  Assigns *a = arg;
  return u->op != OP_ASSIGN || smap_put(&a->targets, u->src[0]->src[0], 1);
}

static bool find_read(UOp *u, void *arg) {
  Assigns *a = arg;
  if (u->op == OP_BUFFER && smap_get(&a->targets, u) >= 0) a->hit = true;
  return true;
}

/* Live tensors not being realized that still read the old value of a buffer
 * an assign in the roots overwrites are realized in the same schedule, before
 * the write (tvk_assign's promise). Appends them to roots (capacity: every
 * live tensor). */
static tvk_status add_old_readers(tvk_ctx *ctx, UOp **roots, int *nr) {
  Assigns a = {0};
  SMap seen = {0};
  bool ok = true;
  for (int i = 0; ok && i < *nr; i++) ok = walk_graph(roots[i], &seen, find_assign, &a);
  smap_free(&seen);
  for (tvk_tensor *t = ctx->head; ok && a.targets.n && t; t = t->next) {
    if (!t->uop || is_data(t->uop)) continue;
    bool in = false;
    for (int i = 0; i < *nr && !in; i++) in = roots[i] == t->uop;
    if (in) continue;
    SMap s2 = {0};
    a.hit = false;
    ok = walk_graph(t->uop, &s2, find_read, &a);
    smap_free(&s2);
    if (a.hit) roots[(*nr)++] = t->uop;
  }
  smap_free(&a.targets);
  return ok ? TVK_OK : ctx_fail(ctx, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
}

/* ---------------------------------------------------------------- what tensors will see */

/* keep[b]: after the run some live tensor refers to buffer b (replace_realized
 * stops at the first computed node of each tensor's graph, top down). The
 * planner may give the other buffers' memory to later buffers. */
static tvk_status find_kept(tvk_ctx *ctx, const Schedule *s, bool *keep) {
  SMap computed = {0}, seen = {0}; /* computed: node -> buffer; an alias node -> -2 - alias */
  UStack st = {0};
  bool ok = smap_init(&computed, (size_t)(s->nbufs + s->naliases));
  for (int i = 0; ok && i < s->nbufs; i++)
    if (s->bufs[i].node) ok = smap_put(&computed, s->bufs[i].node, i);
  for (int a = 0; ok && a < s->naliases; a++) ok = smap_put(&computed, s->aliases[a].node, -2 - a);
  for (tvk_tensor *t = ctx->head; ok && t; t = t->next) {
    if (t->uop) ok = upush(&st, t->uop);
    while (ok && st.n) {
      UOp *x = st.v[--st.n];
      if (smap_get(&seen, x) >= 0) continue;
      ok = smap_put(&seen, x, 1);
      int64_t c = smap_get(&computed, x);
      if (c >= 0) keep[c] = true;
      if (c <= -2) { /* an alias: the tensor will view its source's buffer */
        int64_t y = smap_get(&computed, s->aliases[-2 - c].view->src[0]);
        if (y >= 0) keep[y] = true;
      }
      if (c != -1 || is_data(x)) continue;
      for (uint32_t k = 0; ok && k < x->nsrc; k++) ok = upush(&st, x->src[k]);
    }
  }
  free(st.v);
  smap_free(&seen);
  smap_free(&computed);
  return ok ? TVK_OK : ctx_fail(ctx, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
}

/* ---------------------------------------------------------------- ctx_realize */

tvk_status ctx_realize(tvk_ctx *ctx, int n, tvk_tensor *const *ts) {
  const tvk_tensor *first_bad = NULL;
  int nlive = 0;
  for (tvk_tensor *t = ctx->head; t; t = t->next) nlive++;
  UOp **roots = malloc((size_t)(n + nlive + 1) * sizeof *roots);
  if (!roots) return ctx_fail(ctx, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  int nr = 0;
  for (int i = 0; i < n; i++) {
    const tvk_tensor *t = ts[i];
    if (!t || t->status != TVK_OK || !t->uop) {
      if (!first_bad && t) first_bad = t;
      if (!t) {
        free(roots);
        return ctx_fail(ctx, TVK_ERR_INVALID_ARG, "realize: tensor %d of %d is NULL", i, n);
      }
      continue;
    }
    if (!is_data(t->uop)) roots[nr++] = t->uop;
  }
  tvk_status st = nr > 0 ? add_old_readers(ctx, roots, &nr) : TVK_OK;
  if (st == TVK_OK && nr > 0) {
    size_t mark = uop_pool_mark(ctx->u);
    Schedule s;
    st = schedule_create(ctx, nr, roots, &s);
    bool *keep = st == TVK_OK ? calloc((size_t)(s.nbufs ? s.nbufs : 1), sizeof *keep) : NULL;
    if (st == TVK_OK && !keep) st = ctx_fail(ctx, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
    if (st == TVK_OK) st = find_kept(ctx, &s, keep);
    if (st == TVK_OK) schedule_plan(&s, keep);
    free(keep);
    if (st == TVK_OK) st = schedule_alloc(ctx, &s);
    if (st == TVK_OK) st = run_schedule(ctx, &s);
    if (st == TVK_OK) st = replace_realized(ctx, &s);
    schedule_free(&s);
    uop_pool_drain(ctx->u, mark);
  }
  free(roots);
  if (first_bad) /* the tensor's own error wins over what happened after it */
    return ctx_fail(ctx, first_bad->status != TVK_OK ? first_bad->status : TVK_ERR_INVALID_ARG,
                    "%s", first_bad->msg ? first_bad->msg : "realize: a tensor has no graph");
  return st;
}
