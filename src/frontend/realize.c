/* ctx_realize (frontend.h): schedule the graphs of the tensors
 * (schedule/schedule.h), allocate the buffers the schedule computes, run the
 * kernels (runtime/run.h), and make every live tensor read the results from
 * memory. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/pattern.h"
#include "ir/ptrmap.h"
#include "ir/ustack.h"
#include "runtime/cache.h"
#include "runtime/run.h"
#include "runtime/trace.h"
#include "schedule/schedule.h"

/* A node that is data already: realizing it costs nothing. */
static bool is_data(const UOp *u) {
  const UOp *b = u->op == OP_VIEW ? u->src[0] : u;
  /* not ARANGE: it is computed */
  return b->op == OP_BUFFER || b->op == OP_CONST || b->op == OP_VALUE;
}

/* ---------------------------------------------------------------- replacing realized nodes */

/* What each node the schedule computed (or aliased) becomes: a VIEW of memory. */
typedef struct {
  PtrMap index; /* node -> index in with[] */
  UOp **with;   /* autoreleased */
} Repl;

enum { X = 1, V };

/* x computed by the schedule -> VIEW(BUFFER(x), row-major) */
static UOp *repl_node(void *ctx, UOp **c) {
  Repl *r = ctx;
  int64_t i = ptrmap_get(&r->index, c[X]);
  return i < 0 ? NULL : r->with[i];
}

/* VIEW(x, st), x computed -> VIEW(BUFFER(x), st): composed, no VIEW on a VIEW */
static UOp *repl_view(void *ctx, UOp **c) {
  Repl *r = ctx;
  int64_t i = ptrmap_get(&r->index, c[X]);
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
  if (!(r->with = calloc((size_t)(n ? n : 1), sizeof *r->with)) ||
      !ptrmap_init(&r->index, (size_t)n))
    return false;
  for (int i = 0; i < s->nbufs; i++) {
    if (!s->bufs[i].node) continue;
    if (!(r->with[i] = buffer_view(ctx, &s->bufs[i])) || !ptrmap_put(&r->index, s->bufs[i].node, i))
      return false;
  }
  /* an alias is VIEW(y, st): y a BUFFER already, or computed (and in the map) */
  for (int a = 0; a < s->naliases; a++) {
    UOp *v = s->aliases[a].view, *y = v->src[0];
    int64_t yi = ptrmap_get(&r->index, y);
    UOp *w = y->op == OP_BUFFER ? v : yi >= 0 ? graph_view(r->with[yi], v->arg.st) : NULL;
    if (!w || !ptrmap_put(&r->index, s->aliases[a].node, s->nbufs + a)) return false;
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
  ptrmap_free(&r.index);
  pm_free(pm);
  return out ? TVK_OK
             : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory updating tensors");
}

/* ---------------------------------------------------------------- assigns */

/* Walks the graph under u down to data, calling f on every node. Below an
 * ASSIGN only its value is walked (its target is the buffer it writes, not a
 * read of the old value) when into_assign or when the ASSIGN is u itself (a
 * pending assign computes its value from what it reads); otherwise nothing
 * below it: a reader of an ASSIGN reads the new value. false on out of memory. */
static bool walk_graph(UOp *u, PtrMap *seen, bool into_assign, bool (*f)(UOp *, void *),
                       void *arg) {
  UStack st = {0};
  bool ok = ustack_push(&st, u);
  while (ok && st.n) {
    UOp *x = st.v[--st.n];
    if (ptrmap_get(seen, x) >= 0) continue;
    ok = ptrmap_put(seen, x, 1) && f(x, arg);
    uint32_t from = x->op != OP_ASSIGN ? 0 : into_assign || x == u ? 1 : x->nsrc;
    for (uint32_t k = from; ok && k < x->nsrc; k++) ok = ustack_push(&st, x->src[k]);
  }
  free(st.v);
  return ok;
}

typedef struct {
  PtrMap assigns; /* ASSIGN nodes under the roots: computed by this schedule */
  PtrMap targets; /* BUFFER UOps those ASSIGNs write */
  PtrMap copy_of; /* target -> index of its copy in copy_old_values' copies */
  UOp **hits;     /* the targets the walked graph reads (nhits; room for all) */
  size_t nhits;
} Assigns;

static bool find_assign(UOp *u, void *arg) {
  Assigns *a = arg;
  if (u->op != OP_ASSIGN) return true;
  return ptrmap_put(&a->assigns, u, 1) && ptrmap_put(&a->targets, u->src[0]->src[0], 1);
}

static bool find_read(UOp *u, void *arg) {
  Assigns *a = arg;
  if (u->op == OP_BUFFER && ptrmap_get(&a->targets, u) >= 0) a->hits[a->nhits++] = u;
  return true;
}

/* u's graph with every read of an assigned buffer b (VIEW(BUFFER b, st)) made a
 * read of b's copy (VIEW(copy, st)); the ASSIGNs being computed are kept as
 * they are. Autoreleased; NULL on out of memory. */
static UOp *read_copies(UOp *u, const Assigns *a, UOp *const *copies) {
  size_t n = 0;
  UOp **topo = uop_toposort(u, &n);
  PtrMap at = {0};
  UOp **res = topo ? malloc(n * sizeof *res) : NULL;
  bool ok = res && ptrmap_init(&at, n);
  for (size_t i = 0; ok && i < n; i++) {
    UOp *x = topo[i], *src[8];
    res[i] = x;
    ok = ptrmap_put(&at, x, (int64_t)i);
    if (!ok || ptrmap_get(&a->assigns, x) >= 0) continue;
    int64_t c = x->op == OP_VIEW ? ptrmap_get(&a->copy_of, x->src[0]) : -1;
    if (c >= 0) {
      ok = (res[i] = graph_view(copies[c], x->arg.st)) != NULL;
      continue;
    }
    bool changed = false;
    assert(x->nsrc <= 8); /* tensor-graph nodes have at most 3 sources */
    for (uint32_t k = 0; k < x->nsrc; k++)
      changed |= (src[k] = res[ptrmap_get(&at, x->src[k])]) != x->src[k];
    if (changed) ok = (res[i] = uop_replace_src(x, (int)x->nsrc, src)) != NULL;
  }
  UOp *out = ok ? res[n - 1] : NULL;
  free(topo), free(res);
  ptrmap_free(&at);
  return out;
}

/* tvk_assign's promise: tensors made from the target before the assign keep the
 * old value. When the roots assign to a buffer b that a live tensor not being
 * realized still reads, b is first copied (a CONTIGUOUS of it, which the
 * scheduler makes a real copy because b is assigned) in the same schedule, and
 * that tensor's graph is rewritten to read the copy: it stays lazy and fused,
 * and only b's bytes are copied -- and only the targets such tensors read
 * (an optimiser's state usually is not). The copies join the roots (*roots
 * grows). */
static tvk_status copy_old_values(tvk_ctx *ctx, UOp ***roots, int *nr) {
  Assigns a = {0};
  PtrMap seen = {0};
  UOp **copies = NULL;
  int ncopies = 0;
  bool ok = true;
  PtrMap is_root = {0}; /* the tensors being realized: computed now, before any write */
  for (int i = 0; ok && i < *nr; i++)
    ok = walk_graph((*roots)[i], &seen, true, find_assign, &a) &&
         ptrmap_put(&is_root, (*roots)[i], i);
  ptrmap_free(&seen);
  for (tvk_tensor *t = ctx->head; ok && a.targets.n && t; t = t->next) {
    /* an assign computed here (an optimiser's state read by its parameter's
     * update) is data after the run: it reads nothing later */
    if (!t->uop || is_data(t->uop) || ptrmap_get(&is_root, t->uop) >= 0 ||
        ptrmap_get(&a.assigns, t->uop) >= 0)
      continue;
    if (!copies) { /* room for a copy of every target, made on first need */
      UOp **nr2 = realloc(*roots, (size_t)(*nr) * sizeof **roots + a.targets.n * sizeof **roots);
      if (nr2) *roots = nr2;
      ok = nr2 && (copies = calloc(a.targets.n, sizeof *copies)) != NULL &&
           (a.hits = malloc(a.targets.n * sizeof *a.hits)) != NULL;
      if (!ok) break;
    }
    PtrMap s2 = {0};
    a.nhits = 0;
    ok = walk_graph(t->uop, &s2, false, find_read, &a);
    ptrmap_free(&s2);
    if (!ok || !a.nhits) continue;
    /* a copy of each target t reads, once per target: only those */
    for (size_t k = 0; ok && k < a.nhits; k++) {
      const UOp *b = a.hits[k];
      if (ptrmap_get(&a.copy_of, b) >= 0) continue;
      UOp *v =
          graph_buffer_view(ctx, graph_buffer_id(b), 1, (const int64_t[]){graph_buffer_numel(b)});
      UOp *c = v ? uop_new(ctx->u, OP_CONTIGUOUS, b->dtype, 1, &v, arg_none()) : NULL;
      ok = c && ptrmap_put(&a.copy_of, b, ncopies);
      if (ok) (*roots)[(*nr)++] = copies[ncopies++] = c;
    }
    UOp *nu = ok ? read_copies(t->uop, &a, copies) : NULL;
    if (nu) tensor_set_uop(t, nu);
    ok = nu != NULL;
  }
  free(copies);
  free(a.hits);
  ptrmap_free(&is_root);
  ptrmap_free(&a.assigns);
  ptrmap_free(&a.targets);
  ptrmap_free(&a.copy_of);
  return ok ? TVK_OK : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
}

/* ---------------------------------------------------------------- what tensors will see */

/* keep[b]: after the run some live tensor refers to buffer b (replace_realized
 * stops at the first computed node of each tensor's graph, top down). The
 * planner may give the other buffers' memory to later buffers. */
static tvk_status find_kept(tvk_ctx *ctx, const Schedule *s, bool *keep) {
  PtrMap computed = {0}, seen = {0}; /* computed: node -> buffer; an alias node -> -2 - alias */
  UStack st = {0};
  bool ok = ptrmap_init(&computed, (size_t)(s->nbufs + s->naliases));
  for (int i = 0; ok && i < s->nbufs; i++)
    if (s->bufs[i].node) ok = ptrmap_put(&computed, s->bufs[i].node, i);
  for (int a = 0; ok && a < s->naliases; a++)
    ok = ptrmap_put(&computed, s->aliases[a].node, -2 - a);
  for (tvk_tensor *t = ctx->head; ok && t; t = t->next) {
    if (t->uop) ok = ustack_push(&st, t->uop);
    while (ok && st.n) {
      UOp *x = st.v[--st.n];
      if (ptrmap_get(&seen, x) >= 0) continue;
      ok = ptrmap_put(&seen, x, 1);
      int64_t c = ptrmap_get(&computed, x);
      if (c >= 0) keep[c] = true;
      if (c <= -2) { /* an alias: the tensor will view its source's buffer */
        int64_t y = ptrmap_get(&computed, s->aliases[-2 - c].view->src[0]);
        if (y >= 0) keep[y] = true;
      }
      if (c != -1 || is_data(x)) continue;
      for (uint32_t k = 0; ok && k < x->nsrc; k++) ok = ustack_push(&st, x->src[k]);
    }
  }
  free(st.v);
  ptrmap_free(&seen);
  ptrmap_free(&computed);
  return ok ? TVK_OK : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
}

/* ---------------------------------------------------------------- symbolic sizes */

typedef struct {
  tvk_ctx *ctx;
  tvk_status st;
} SizeCheck;

/* One node of a graph being realized: its views' variables are bound, a
 * buffer read was made for the values bound now, and a symbolic view of a
 * buffer stays inside it for those values. */
static bool check_node_sizes(UOp *u, void *arg) {
  SizeCheck *c = arg;
  tvk_ctx *ctx = c->ctx;
  if (u->op != OP_VIEW) return true;
  const ShapeTracker *st = u->arg.st;
  UOp *x = u->src[0];
  Buffer *b = x->op == OP_BUFFER ? ctx_buffer(ctx, graph_buffer_id(x)) : NULL;
  if (b && (c->st = ctx_buffer_check_sizes(ctx, "realize", b)) != TVK_OK) return false;
  if (!st_is_symbolic(st)) return true;
  sint vars[SIZE_VARS_MAX];
  int64_t vals[SIZE_VARS_MAX];
  int nv = st_vars(st, vars, 0, SIZE_VARS_MAX);
  if (nv < 0) {
    c->st = err_set(&ctx->err, TVK_ERR_SHAPE, "realize: a view uses more than %d size variables",
                    SIZE_VARS_MAX);
    return false;
  }
  for (int i = 0; i < nv; i++)
    if ((c->st = ctx_size_eval(ctx, &ctx->err, "realize", vars[i], &vals[i])) != TVK_OK)
      return false;
  if (!b) return true;
  ShapeTracker *at = st_substitute(st, nv, vars, vals);
  int64_t need = at ? st_real_size(at) : -1;
  st_free(at);
  if (need < 0) {
    c->st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
    return false;
  }
  if (need > b->numel) {
    c->st = err_set(&ctx->err, TVK_ERR_SHAPE,
                    "realize: with the bound sizes a view reads %lld elements of a buffer of "
                    "%lld (a tensor made for smaller sizes)",
                    (long long)need, (long long)b->numel);
    return false;
  }
  return true;
}

/* With size variables in the context, every graph to realize is checked
 * (check_node_sizes) before anything runs. */
static tvk_status check_sizes(tvk_ctx *ctx, UOp *const *roots, int n) {
  if (ctx->nsizes == 0) return TVK_OK; /* nothing symbolic can exist */
  PtrMap seen = {0};
  SizeCheck c = {ctx, TVK_OK};
  bool ok = true;
  for (int i = 0; ok && i < n; i++) ok = walk_graph(roots[i], &seen, true, check_node_sizes, &c);
  ptrmap_free(&seen);
  if (c.st != TVK_OK) return c.st;
  return ok ? TVK_OK : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
}

/* ---------------------------------------------------------------- buffers and the run */

/* A buffer for every new output of the schedule (BUFFER UOps, retained; each
 * owns its device memory); one the planner pointed at another's memory shares
 * that BUFFER. */
static tvk_status alloc_outputs(tvk_ctx *ctx, Schedule *s) {
  for (int i = 0; i < s->nbufs; i++) {
    SchedBuf *b = &s->bufs[i];
    if (!b->node || b->buffer || b->reuse) continue;
    int64_t numel; /* a symbolic shape's count with the bound values */
    tvk_status st = ctx_size_eval(ctx, &ctx->err, "realize", b->numel, &numel);
    if (st != TVK_OK) return st;
    int64_t id = ctx_buffer_new_on(ctx, b->device, b->dtype, numel, &st);
    if (id < 0) return st;
    if ((st = ctx_buffer_record_sizes(ctx, ctx_buffer(ctx, id), b->ndim, b->shape)) != TVK_OK) {
      ctx_buffer_discard(ctx, id);
      return st;
    }
    if (!(b->buffer = uop_retain(graph_buffer_on(ctx->u, b->dtype, id, numel, b->device))))
      return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory for a BUFFER");
  }
  for (int i = 0; i < s->nbufs; i++)
    if (s->bufs[i].reuse && !s->bufs[i].buffer)
      s->bufs[i].buffer = uop_retain(s->bufs[schedule_owner(s, i)].buffer);
  return TVK_OK;
}

/* Runs the schedule on the context's device, each schedule buffer bound to
 * the device memory of its BUFFER. */
static tvk_status run(tvk_ctx *ctx, const Schedule *s) {
  DevBuffer **bufs = calloc((size_t)(s->nbufs ? s->nbufs : 1), sizeof *bufs);
  if (!bufs) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  for (int i = 0; i < s->nbufs; i++) {
    const Buffer *rec =
        s->bufs[i].buffer ? ctx_buffer(ctx, graph_buffer_id(s->bufs[i].buffer)) : NULL;
    bufs[i] = rec ? rec->dev : NULL;
  }
  int nsizes = ctx->nsizes;
  const char **size_names = nsizes ? malloc((size_t)nsizes * sizeof *size_names) : NULL;
  int64_t *size_vals = nsizes ? malloc((size_t)nsizes * sizeof *size_vals) : NULL;
  if (nsizes && (!size_names || !size_vals)) {
    free(size_names), free(size_vals), free(bufs);
    return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  }
  nsizes = ctx_size_bindings(ctx, size_names, size_vals, nsizes);
  Runner r = {.dev = ctx->dev,
              .programs = ctx->programs,
              .devs = ctx->devs,
              .ndevs = ctx->ndevs,
              .debug = ctx->opt.debug,
              .progress = ctx->opt.progress > 0 || ctx->opt.debug >= 1,
              .graph = ctx->opt.graph,
              .noopt = ctx->opt.noopt != 0,
              .gpu_rules = ctx->opt.gpu_rules != 0,
              .no_chains = ctx->opt.no_chains != 0,
              .beam = ctx->opt.beam > 0 ? ctx->opt.beam : 0,
              .cache_dir = ctx->cache_dir,
              .no_disk = ctx->opt.no_disk_cache > 0,
              .cache_readonly = cache_readonly_wanted(ctx->opt.cache_readonly),
              .stats = &ctx->stats,
              .log = &ctx->log,
              .trace = ctx->trace,
              .on_launch = ctx->capture ? jit_on_launch : NULL,
              .on_copy = ctx->capture ? jit_on_copy : NULL,
              .on_chain = ctx->capture ? jit_on_chain : NULL,
              .launch_user = ctx->capture,
              .nsizes = nsizes,
              .size_names = size_names,
              .size_vals = size_vals,
              .err = &ctx->err};
  tvk_status st = run_schedule(&r, s, bufs);
  free(bufs);
  free(size_names), free(size_vals);
  return st;
}

/* ---------------------------------------------------------------- ctx_realize */

/* The most buffers one kernel may bind on every device of the context. */
static int max_kernel_buffers(const tvk_ctx *ctx) {
  int most = 0;
  for (int i = 0; i < ctx->ndevs; i++) {
    int m = ctx->devs[i]->limits.max_kernel_buffers;
    if (m > 0 && (most == 0 || m < most)) most = m;
  }
  return most;
}

tvk_status ctx_realize(tvk_ctx *ctx, int n, tvk_tensor *const *ts) {
  const tvk_tensor *first_bad = NULL;
  /* room for every part of a sharded tensor */
  UOp **roots = malloc((size_t)(n > 0 ? n : 1) * CTX_MAX_DEVICES * sizeof *roots);
  if (!roots) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  int nr = 0;
  for (int i = 0; i < n; i++) {
    tvk_tensor *t = ts[i];
    if (!t || t->status != TVK_OK || !t->uop) {
      if (!first_bad && t) first_bad = t;
      if (!t) {
        free(roots);
        return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "realize: tensor %d of %d is NULL", i, n);
      }
      continue;
    }
    if (t->uop->device == UOP_DEVICE_MULTI) {
      /* a graph over sharded tensors: from now on its per-device graphs,
       * each part a root */
      UOp *sp = NULL;
      tvk_status ss = shard_split(ctx, t->uop, &sp);
      if (ss != TVK_OK) {
        free(roots);
        return ss;
      }
      tensor_set_uop(t, sp);
      for (uint32_t k = 0; sp->op == OP_MULTI && k < sp->nsrc; k++)
        if (!is_data(sp->src[k])) roots[nr++] = sp->src[k];
      if (sp->op == OP_MULTI) continue;
    }
    if (!is_data(t->uop)) roots[nr++] = t->uop;
  }
  int64_t t_realize = ctx->trace ? trace_now_ns() : 0;
  tvk_status st = nr > 0 ? check_sizes(ctx, roots, nr) : TVK_OK;
  if (st == TVK_OK && nr > 0) st = copy_old_values(ctx, &roots, &nr);
  if (st == TVK_OK && nr > 0) {
    size_t mark = uop_pool_mark(ctx->u);
    Schedule s;
    SchedCtx sc = {ctx->u, max_kernel_buffers(ctx), &ctx->err, 0};
    for (int d = 0; d < ctx->ndevs; d++) /* a device whose launches are queued */
      if (ctx->devs[d]->ops->flush) sc.background_devices |= 1u << d;
    int64_t t0 = ctx->trace ? trace_now_ns() : 0;
    bool reused = false;
    st = schedule_create_cached(&sc, &ctx->sched_cache, nr, roots, &s, &reused);
    ctx->stats.schedules_reused += reused;
    bool *keep = st == TVK_OK ? calloc((size_t)(s.nbufs ? s.nbufs : 1), sizeof *keep) : NULL;
    if (st == TVK_OK && !keep)
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
    if (st == TVK_OK) st = find_kept(ctx, &s, keep);
    uint32_t in_place = 0; /* C kernels: no restrict, so two buffers may share memory */
    for (int d = 0; d < ctx->ndevs && d < 32; d++)
      if (ctx->devs[d]->codegen_mode != CG_MODE_GRID) in_place |= 1u << d;
    if (st == TVK_OK) schedule_plan(&s, keep, in_place);
    if (ctx->trace) {
      char args[64];
      snprintf(args, sizeof args, "\"kernels\": %d, \"buffers\": %d, \"reused\": %s",
               st == TVK_OK ? s.nitems : 0, st == TVK_OK ? s.nbufs : 0, reused ? "true" : "false");
      trace_span(ctx->trace, false, "schedule", "schedule", t0, trace_now_ns(), args);
    }
    free(keep);
    if (st == TVK_OK) st = alloc_outputs(ctx, &s);
    if (st == TVK_OK) st = run(ctx, &s);
    if (st == TVK_OK) st = replace_realized(ctx, &s);
    schedule_free(&s);
    uop_pool_drain(ctx->u, mark);
    if (ctx->trace) {
      char args[96];
      snprintf(args, sizeof args, "\"tensors\": %d, \"status\": \"%s\"", nr, tvk_status_name(st));
      trace_span(ctx->trace, false, "realize", "realize", t_realize, trace_now_ns(), args);
    }
  }
  free(roots);
  if (first_bad) /* the tensor's own error wins over what happened after it */
    return err_set(&ctx->err, first_bad->status != TVK_OK ? first_bad->status : TVK_ERR_INVALID_ARG,
                   "%s", first_bad->msg ? first_bad->msg : "realize: a tensor has no graph");
  return st;
}
