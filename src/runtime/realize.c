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
  return b->op == OP_BUFFER || b->op == OP_CONST;
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

/* ---------------------------------------------------------------- ctx_realize */

tvk_status ctx_realize(tvk_ctx *ctx, int n, tvk_tensor *const *ts) {
  const tvk_tensor *first_bad = NULL;
  UOp **roots = malloc((size_t)(n > 0 ? n : 1) * sizeof *roots);
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
  tvk_status st = TVK_OK;
  if (nr > 0) {
    size_t mark = uop_pool_mark(ctx->u);
    Schedule s;
    st = schedule_create(ctx, nr, roots, &s);
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
