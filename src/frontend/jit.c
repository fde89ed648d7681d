/* tvk_jit: a computation captured once as the list of its kernel launches,
 * then replayed on new inputs without building a graph, scheduling or
 * looking anything up (tvk.h says what an app may rely on).
 *
 * The capture call runs the app's function and realizes its outputs with
 * Runner.on_launch set: each launch is kept as its program, its launch values
 * and geometry, and per buffer either the input it is (by position) or a
 * BUFFER the jit retains (intermediates, outputs, weights, assign targets).
 * A replay binds the inputs' memory in the inputs' places and launches the
 * list in order. Programs belong to the context's program cache, which frees
 * them only at tvk_ctx_destroy, after every jit is gone.
 *
 * On a device with graphs (Vulkan) the list is recorded once as a graph, one
 * submission per replay, and recorded again only when a buffer it binds is
 * another than last time: the inputs' buffers are retained while the graph
 * binds them, so an unchanged pointer is the same live memory.
 *
 * Size variables (tvk_size_var): a launch's values that are a variable's
 * are taken from the bound values at each replay, and so is its grid where
 * that is an expression of them (KernelSource.groups). A kept buffer whose
 * size is an expression is grown (a new BUFFER, the outputs' views moved to
 * it) when the values bound need more than it has, and records the values
 * its contents are for after each replay. A graph is recorded again when
 * a launch's values or grid change (they are in its push constants and
 * dispatches). */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/log.h"
#include "ir/vec.h"
#include "runtime/run.h"
#include "schedule/schedule.h"

typedef struct {
  DevProgram *prog; /* NULL for a copy */
  int device;       /* the context's device it runs on (a copy's destination) */
  int from_device;  /* a copy: its source's device */
  int nbufs;        /* a copy: 2, the destination first */
  int *slot;        /* per buffer: >= 0 a kept BUFFER; < 0 input -1 - slot */
  int32_t vals[SCHED_MAX_VALUES];
  int nvals;
  /* per value: the size variable it is (an index into ctx->sizes), or -1 */
  int8_t size_at[SCHED_MAX_VALUES];
  sint groups;        /* KernelSource.groups: global[0] over the variables, or 0 */
  int64_t max_groups; /* its largest value (KernelSource.global[0]) */
  LaunchDims dims;
  /* The first launch of a chain (DeviceOps.launch_parts): the chain's
   * launches (this and the next chain - 1) and its parts; 0 elsewhere. What
   * the chain's kernels write is the jit's own memory, the same at every
   * replay, so the capture's check holds for new inputs, which are read. */
  int chain, parts;
} JitLaunch;

typedef struct {
  tvk_dtype dtype;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
} Sig;

struct tvk_jit {
  tvk_ctx *ctx;
  tvk_jit_fn fn;
  void *user;
  tvk_jit *prev, *next; /* the context's jits */
  int nin, nout;        /* of the first call: every call passes as many */
  int runs;             /* calls since the inputs last changed shape */
  bool captured;
  bool direct;      /* the function's outputs cannot be replayed (one is an input): always run it */
  bool failed;      /* out of memory while capturing */
  Sig *sig;         /* the inputs' dtypes and shapes of the captured call */
  UOp **in_buf;     /* during the capture: the inputs' BUFFERs (not retained) */
  UOp **kept;       /* retained BUFFERs the launches use */
  sint *kept_numel; /* the elements each needs: an expression for a symbolic output, else 0 */
  size_t nkept, capkept, capkn;
  bool sized; /* some launch takes a size variable's value */
  bool multi; /* some launch runs on another device than the first, or copies */
  JitLaunch *l;
  size_t nl, capl;
  UOp **out; /* retained: the outputs' nodes after the capture */
  /* the device graph of the launches and what it binds: every launch's
   * buffers in order (nbound of them), and the inputs' BUFFERs, retained;
   * cur is the same list for this call, compared with bound */
  DevGraph *graph;
  DevBuffer **bound, **cur;
  size_t nbound;
  UOp **graph_in; /* nin of them; NULL entries while no graph */
};

static void drop_graph(tvk_jit *j) {
  Device *d = j->ctx->dev;
  if (j->graph) d->ops->graph_free(d, j->graph);
  j->graph = NULL;
  for (int i = 0; j->graph_in && i < j->nin; i++) {
    uop_release(j->graph_in[i]);
    j->graph_in[i] = NULL;
  }
}

static void drop_capture(tvk_jit *j) {
  drop_graph(j);
  free(j->bound), free(j->cur), free(j->graph_in);
  j->bound = j->cur = NULL, j->graph_in = NULL, j->nbound = 0;
  for (size_t i = 0; i < j->nkept; i++) uop_release(j->kept[i]);
  for (size_t i = 0; i < j->nl; i++) free(j->l[i].slot);
  for (int i = 0; j->out && i < j->nout; i++) uop_release(j->out[i]);
  free(j->kept), free(j->kept_numel), free(j->l), free(j->out);
  j->kept = NULL, j->kept_numel = NULL, j->l = NULL, j->out = NULL;
  j->nkept = j->capkept = j->capkn = j->nl = j->capl = 0;
  j->captured = j->direct = j->failed = j->sized = j->multi = false;
}

/* The index in ctx->sizes of the variable named name, or -1. */
static int size_index(const tvk_ctx *ctx, const char *name) {
  for (int i = 0; i < ctx->nsizes; i++)
    if (!strcmp(ctx->sizes[i].name, name)) return i;
  return -1;
}

/* l's buffers as slots: an input's place, or a BUFFER the jit keeps (a new
 * one added). false (and j->failed) on out of memory. */
static bool record_bufs(tvk_jit *j, const Schedule *s, const ScheduleItem *it, JitLaunch *l) {
  if (!(l->slot = malloc((size_t)(it->nbufs ? it->nbufs : 1) * sizeof *l->slot))) {
    j->failed = true;
    return false;
  }
  for (int k = 0; k < it->nbufs; k++) {
    UOp *b = s->bufs[it->bufs[k]].buffer;
    int slot = INT32_MIN;
    for (int i = 0; i < j->nin && slot == INT32_MIN; i++)
      if (j->in_buf[i] == b) slot = -1 - i;
    for (size_t i = 0; i < j->nkept && slot == INT32_MIN; i++)
      if (j->kept[i] == b) slot = (int)i;
    if (slot == INT32_MIN) {
      if (!b || !VEC_RESERVE(j->kept, j->capkept, j->nkept + 1) ||
          !VEC_RESERVE(j->kept_numel, j->capkn, j->nkept + 1)) {
        free(l->slot);
        j->failed = true;
        return false;
      }
      /* a new output of a symbolic shape needs what its count says */
      const SchedBuf *sb = &s->bufs[it->bufs[k]];
      j->kept_numel[j->nkept] = sb->node && sint_is_sym(sb->numel) ? sb->numel : 0;
      j->kept[j->nkept] = uop_retain(b);
      slot = (int)j->nkept++;
    }
    l->slot[k] = slot;
  }
  return true;
}

/* Runner.on_launch while capturing. */
void jit_on_launch(void *user, const Schedule *s, int item, const KernelSource *ks,
                   DevProgram *prog, const int32_t *vals, int nvals, const LaunchDims *dims) {
  tvk_jit *j = user;
  const ScheduleItem *it = &s->items[item];
  if (j->failed) return;
  if (nvals > SCHED_MAX_VALUES || ks->nvars != nvals || !VEC_RESERVE(j->l, j->capl, j->nl + 1)) {
    j->failed = true;
    return;
  }
  JitLaunch *l = &j->l[j->nl];
  j->multi |= it->device != 0;
  *l = (JitLaunch){.prog = prog,
                   .device = it->device,
                   .nbufs = it->nbufs,
                   .nvals = nvals,
                   .groups = ks->groups,
                   .max_groups = ks->global[0],
                   .dims = *dims};
  if (nvals) memcpy(l->vals, vals, (size_t)nvals * sizeof *vals);
  for (int v = 0; v < nvals; v++) { /* tvk_scalar's values are "s<k>"; the rest size variables */
    const char *name = ks->vars[v].name;
    bool scalar = sched_value_index(name) >= 0;
    l->size_at[v] = (int8_t)(scalar ? -1 : size_index(j->ctx, name));
    if (!scalar && l->size_at[v] < 0) {
      j->failed = true;
      return;
    }
    j->sized |= !scalar;
  }
  if (!record_bufs(j, s, it, l)) return;
  j->nl++;
}

void jit_on_copy(void *user, const Schedule *s, int item) {
  tvk_jit *j = user;
  const ScheduleItem *it = &s->items[item];
  if (j->failed) return;
  if (!VEC_RESERVE(j->l, j->capl, j->nl + 1)) {
    j->failed = true;
    return;
  }
  JitLaunch *l = &j->l[j->nl];
  *l = (JitLaunch){.device = it->device, .from_device = s->bufs[it->bufs[1]].device, .nbufs = 2};
  if (!record_bufs(j, s, it, l)) return;
  j->multi = true;
  j->nl++;
}

void jit_on_chain(void *user, const Schedule *s, int first, int n, int parts) {
  tvk_jit *j = user;
  (void)s, (void)first;
  if (j->failed) return;
  if (n < 2 || (size_t)n > j->nl) { /* each of its launches was recorded first */
    j->failed = true;
    return;
  }
  JitLaunch *l = &j->l[j->nl - (size_t)n];
  l->chain = n, l->parts = parts;
}

tvk_jit *tvk_jit_create(tvk_ctx *ctx, tvk_jit_fn fn, void *user) {
  if (!ctx) return NULL;
  if (!fn) {
    err_set(&ctx->err, TVK_ERR_INVALID_ARG, "jit_create: fn is NULL");
    return NULL;
  }
  tvk_jit *j = calloc(1, sizeof *j);
  if (!j) {
    err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit_create: out of memory");
    return NULL;
  }
  *j = (tvk_jit){.ctx = ctx, .fn = fn, .user = user, .nin = -1, .next = ctx->jits};
  if (ctx->jits) ctx->jits->prev = j;
  ctx->jits = j;
  return j;
}

void tvk_jit_destroy(tvk_jit *j) {
  if (!j) return;
  drop_capture(j);
  if (j->prev)
    j->prev->next = j->next;
  else
    j->ctx->jits = j->next;
  if (j->next) j->next->prev = j->prev;
  free(j->sig);
  free(j->in_buf);
  free(j);
}

static void sig_of(const tvk_tensor *t, Sig *s) {
  *s = (Sig){t->dtype, t->ndim, {0}};
  memcpy(s->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
}

static bool sig_eq(const Sig *a, const Sig *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape);
}

/* The function, then one realize of its outputs; while capturing, with the
 * launches recorded. Its other tensors go with its scope. */
static tvk_status run_fn(tvk_jit *j, tvk_tensor *const *in, tvk_tensor **out, bool capture) {
  tvk_ctx *ctx = j->ctx;
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  size_t scope = tvk_scope_begin(ctx);
  if (capture) ctx->capture = j;
  tvk_status st = j->fn(j->user, ctx, j->nin, in, j->nout, out);
  for (int i = 0; st == TVK_OK && i < j->nout; i++) {
    if (!out[i] || out[i]->ctx != ctx)
      st = err_set(&ctx->err, TVK_ERR_INVALID_ARG, "jit: the function's output %d of %d is %s", i,
                   j->nout, out[i] ? "of another context" : "NULL");
    else if (out[i]->seq < scope) /* an input or a weight: the caller gets a tensor of its own */
      if ((out[i] = tensor_from_uop(ctx, out[i]->uop))->status != TVK_OK)
        st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  if (st == TVK_OK) st = tvk_realize(j->nout, out);
  ctx->capture = NULL;
  tvk_scope_end(ctx, scope, st == TVK_OK ? j->nout : 0, out);
  if (st != TVK_OK)
    for (int i = 0; i < j->nout; i++) out[i] = NULL;
  return st;
}

/* After a capture call: keep the outputs' nodes, or fall back to running the
 * function every call when an output reads an input's memory (a replay
 * would hand back the captured call's input). */
static void finish_capture(tvk_jit *j, tvk_tensor **out) {
  if (j->failed) {
    drop_capture(j);
    return;
  }
  if (!(j->out = calloc((size_t)(j->nout ? j->nout : 1), sizeof *j->out))) {
    drop_capture(j);
    return;
  }
  for (int i = 0; i < j->nout; i++) {
    UOp *u = out[i]->uop, *b = u->op == OP_VIEW ? u->src[0] : u;
    for (int k = 0; k < j->nin; k++) j->direct |= b == j->in_buf[k];
    j->out[i] = uop_retain(u);
  }
  j->captured = true;
}

/* Buffer k of launch l: an input's, or one the jit keeps. */
static const Buffer *slot_buffer(tvk_jit *j, const JitLaunch *l, Buffer *const *in, int k) {
  return l->slot[k] < 0 ? in[-1 - l->slot[k]]
                        : ctx_buffer(j->ctx, graph_buffer_id(j->kept[l->slot[k]]));
}

/* Launch l's device buffers, with the inputs' memory in their places. */
static void launch_bufs(tvk_jit *j, const JitLaunch *l, Buffer *const *in, DevBuffer **bufs) {
  for (int k = 0; k < l->nbufs; k++) {
    const Buffer *b = slot_buffer(j, l, in, k);
    bufs[k] = b ? b->dev : NULL;
  }
}

/* No input of launches i..i+n-1 is memory one of them binds as the jit's
 * own (an output of the last replay passed back in): the chain's check was
 * made with the captured inputs, which were not. */
static bool inputs_apart(tvk_jit *j, Buffer *const *in, size_t i, int n) {
  const JitLaunch *l = &j->l[i];
  for (int a = 0; a < n; a++)
    for (int x = 0; x < l[a].nbufs; x++) {
      const Buffer *input = l[a].slot[x] < 0 ? slot_buffer(j, &l[a], in, x) : NULL;
      for (int b = 0; input && b < n; b++)
        for (int y = 0; y < l[b].nbufs; y++) {
          const Buffer *own = l[b].slot[y] >= 0 ? slot_buffer(j, &l[b], in, y) : NULL;
          if (own && own->dev == input->dev) return false;
        }
    }
  return true;
}

/* Launches i.. of a chain (JitLaunch.chain) as one, on device d. */
static tvk_status replay_chain(tvk_jit *j, Buffer *const *in, size_t i, Device *d) {
  const JitLaunch *first = &j->l[i];
  int n = first->chain;
  DevLaunch *dl = calloc((size_t)n, sizeof *dl);
  DevBuffer ***bufs = calloc((size_t)n, sizeof *bufs);
  tvk_status st = dl && bufs ? TVK_OK : TVK_ERR_OUT_OF_MEMORY;
  for (int k = 0; k < n && st == TVK_OK; k++) {
    const JitLaunch *l = &j->l[i + (size_t)k];
    if (!(bufs[k] = malloc((size_t)(l->nbufs ? l->nbufs : 1) * sizeof **bufs))) {
      st = TVK_ERR_OUT_OF_MEMORY;
      break;
    }
    launch_bufs(j, l, in, bufs[k]);
    dl[k] = (DevLaunch){l->prog, bufs[k], l->nbufs, l->nvals ? l->vals : NULL, l->nvals, &l->dims};
  }
  if (st != TVK_OK)
    st = err_set(&j->ctx->err, st, "jit: out of memory");
  else if ((st = d->ops->launch_parts(d, dl, n, first->parts)) != TVK_OK)
    st = err_set(&j->ctx->err, st, "jit: launches %zu to %zu in %d parts: %s", i, i + (size_t)n - 1,
                 first->parts, d->err.msg);
  for (int k = 0; bufs && k < n; k++) free(bufs[k]);
  free(bufs);
  free(dl);
  if (st == TVK_OK) j->ctx->stats.kernels_run += (uint64_t)n, j->ctx->stats.chains_run++;
  return st;
}

/* After the kernel at i on d: d starts its queued work when the next step
 * is another device's or a copy. */
static tvk_status flush_at_handover(tvk_jit *j, size_t i, Device *d) {
  const JitLaunch *next = i + 1 < j->nl ? &j->l[i + 1] : NULL;
  bool handover = next && (!next->prog || next->device != j->l[i].device);
  tvk_status st = handover && d->ops->flush ? d->ops->flush(d) : TVK_OK;
  return st == TVK_OK ? st : err_set(&j->ctx->err, st, "jit: %s", d->err.msg);
}

/* The launches one by one (a device without graphs, or several devices),
 * each on its device, copies between them as captured, a chain as one
 * launch; a device's queued work is started when the next step is
 * another's. */
static tvk_status replay_launches(tvk_jit *j, Buffer *const *in) {
  tvk_ctx *ctx = j->ctx;
  DevBuffer *stack[16];
  tvk_status st = TVK_OK;
  for (size_t i = 0; i < j->nl && st == TVK_OK; i++) {
    const JitLaunch *l = &j->l[i];
    Device *d = ctx->devs[l->device];
    if (l->chain > 1 && d->ops->launch_parts && inputs_apart(j, in, i, l->chain)) {
      st = replay_chain(j, in, i, d);
      i += (size_t)l->chain - 1;
      if (st == TVK_OK) st = flush_at_handover(j, i, d);
      continue;
    }
    DevBuffer **bufs = l->nbufs <= 16 ? stack : malloc((size_t)l->nbufs * sizeof *bufs);
    if (!bufs) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
    launch_bufs(j, l, in, bufs);
    if (!l->prog) { /* a copy: as many bytes as both buffers hold */
      const Buffer *to = slot_buffer(j, l, in, 0), *from = slot_buffer(j, l, in, 1);
      size_t n = to && from ? (to->nbytes < from->nbytes ? to->nbytes : from->nbytes) : 0;
      st =
          n ? run_copy_bytes(ctx->devs[l->from_device], bufs[1], d, bufs[0], n, &ctx->err) : TVK_OK;
      ctx->stats.copies_run += st == TVK_OK;
    } else {
      st =
          d->ops->launch(d, l->prog, bufs, l->nbufs, l->nvals ? l->vals : NULL, l->nvals, &l->dims);
      if (st != TVK_OK)
        st = err_set(&ctx->err, st, "jit: launch %zu of %zu: %s", i, j->nl, d->err.msg);
      if (st == TVK_OK) ctx->stats.kernels_run++;
      if (st == TVK_OK) st = flush_at_handover(j, i, d);
    }
    if (bufs != stack) free(bufs);
  }
  return st;
}

/* The launches as the device's graph: recorded again when what they bind
 * changed (*recorded), then one launch of it. */
static tvk_status replay_graph(tvk_jit *j, Buffer *const *in, bool *recorded) {
  tvk_ctx *ctx = j->ctx;
  Device *d = ctx->dev;
  if (!j->bound) { /* the first replay of this capture: room for the lists */
    for (size_t i = 0; i < j->nl; i++) j->nbound += (size_t)j->l[i].nbufs;
    size_t n = j->nbound ? j->nbound : 1;
    j->bound = malloc(n * sizeof *j->bound), j->cur = malloc(n * sizeof *j->cur);
    j->graph_in = calloc((size_t)(j->nin ? j->nin : 1), sizeof *j->graph_in);
    if (!j->bound || !j->cur || !j->graph_in) {
      free(j->bound), free(j->cur), free(j->graph_in);
      j->bound = j->cur = NULL, j->graph_in = NULL, j->nbound = 0;
      return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
    }
  }
  for (size_t i = 0, at = 0; i < j->nl; at += (size_t)j->l[i++].nbufs)
    launch_bufs(j, &j->l[i], in, j->cur + at);
  *recorded = !j->graph || memcmp(j->cur, j->bound, j->nbound * sizeof *j->cur);
  if (*recorded) {
    drop_graph(j);
    DevLaunch *dl = malloc((j->nl ? j->nl : 1) * sizeof *dl);
    if (!dl) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
    for (size_t i = 0, at = 0; i < j->nl; at += (size_t)j->l[i++].nbufs) {
      const JitLaunch *l = &j->l[i];
      dl[i] = (DevLaunch){l->prog,  j->cur + at, l->nbufs, l->nvals ? l->vals : NULL,
                          l->nvals, &l->dims};
    }
    tvk_status st = d->ops->graph_create(d, dl, (int)j->nl, &j->graph);
    free(dl);
    if (st != TVK_OK)
      return err_set(&ctx->err, st, "jit: recording %zu launches: %s", j->nl, d->err.msg);
    for (int i = 0; i < j->nin; i++) j->graph_in[i] = uop_retain(j->in_buf[i]);
    DevBuffer **t = j->bound;
    j->bound = j->cur, j->cur = t;
    ctx->stats.jit_graphs_recorded++;
  }
  tvk_status st = d->ops->graph_launch(d, j->graph);
  if (st != TVK_OK) return err_set(&ctx->err, st, "jit: %s", d->err.msg);
  ctx->stats.kernels_run += j->nl;
  return TVK_OK;
}

/* Kept buffer k is grown to need elements: a new BUFFER in its place, and
 * the outputs that view the old one view the new one (the old one lives on
 * while tensors of earlier calls hold it). */
static tvk_status grow_kept(tvk_jit *j, size_t k, int64_t need) {
  tvk_ctx *ctx = j->ctx;
  UOp *old = j->kept[k];
  ScalarType dt = (ScalarType)old->dtype.scalar;
  tvk_status st;
  size_t mark = uop_pool_mark(ctx->u);
  int64_t id = ctx_buffer_new(ctx, dt, need, &st);
  if (id < 0) return st;
  UOp *nb = graph_buffer(ctx->u, dt, id, need);
  if (!nb) {
    ctx_buffer_discard(ctx, id);
    uop_pool_drain(ctx->u, mark);
    return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  UOp *outs[64], **moved = j->nout <= 64 ? outs : malloc((size_t)j->nout * sizeof *moved);
  bool ok = moved != NULL;
  for (int i = 0; ok && i < j->nout; i++) {
    UOp *o = j->out[i];
    moved[i] = o->op == OP_VIEW && o->src[0] == old ? uop_replace_src(o, 1, &nb)
               : o == old                           ? nb
                                                    : o;
    ok = moved[i] != NULL;
  }
  for (int i = 0; ok && i < j->nout; i++) {
    uop_retain(moved[i]);
    uop_release(j->out[i]);
    j->out[i] = moved[i];
  }
  if (ok) {
    j->kept[k] = uop_retain(nb);
    uop_release(old);
  }
  if (moved != outs) free(moved);
  uop_pool_drain(ctx->u, mark);
  return ok ? TVK_OK : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
}

/* Before a replay over size variables: each launch's values and grid for
 * the values bound now, the inputs made for those values, every kept buffer
 * of a symbolic size large enough; *changed: the values differ from those
 * the device graph was recorded with. */
static tvk_status size_replay(tvk_jit *j, tvk_tensor *const *in, Buffer *const *bufs,
                              bool *changed) {
  tvk_ctx *ctx = j->ctx;
  *changed = false;
  for (int i = 0; i < j->nin; i++) {
    int64_t n = 0;
    tvk_status st = ctx_buffer_check_sizes(ctx, "jit_run", bufs[i]);
    if (st == TVK_OK)
      st = ctx_bound_numel(ctx, &ctx->err, "jit_run", in[i]->ndim, in[i]->shape, &n);
    if (st == TVK_OK && n > bufs[i]->numel)
      st = err_set(&ctx->err, TVK_ERR_SHAPE,
                   "jit_run: input %d has %lld elements with the bound sizes, its buffer %lld", i,
                   (long long)n, (long long)bufs[i]->numel);
    if (st != TVK_OK) return st;
  }
  for (size_t i = 0; i < j->nl; i++) {
    JitLaunch *l = &j->l[i];
    const char *names[SCHED_MAX_VALUES];
    int64_t vals[SCHED_MAX_VALUES];
    int n = 0;
    for (int v = 0; v < l->nvals; v++) {
      if (l->size_at[v] < 0) continue;
      const SizeVar *sv = &ctx->sizes[l->size_at[v]];
      if (!sv->bound)
        return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                       "jit_run: size variable '%s' has no value: bind one with tvk_bind",
                       sv->name);
      *changed |= l->vals[v] != (int32_t)sv->value;
      l->vals[v] = (int32_t)sv->value; /* within its range: fits */
      names[n] = sv->name, vals[n++] = sv->value;
    }
    if (l->groups) {
      sint g = sint_eval_named(l->groups, n, names, vals);
      g = g == SINT_NONE || g < 0 ? 0 : g > l->max_groups ? l->max_groups : g;
      *changed |= l->dims.global[0] != g;
      l->dims.global[0] = g;
    }
  }
  for (size_t k = 0; k < j->nkept; k++) {
    if (!j->kept_numel[k]) continue;
    int64_t need;
    tvk_status st = ctx_size_eval(ctx, &ctx->err, "jit_run", j->kept_numel[k], &need);
    const Buffer *b = st == TVK_OK ? ctx_buffer(ctx, graph_buffer_id(j->kept[k])) : NULL;
    if (st == TVK_OK && b && b->numel < need) st = grow_kept(j, k, need);
    if (st != TVK_OK) return st;
  }
  return TVK_OK;
}

/* After a replay over size variables: each kept buffer of a symbolic size
 * holds what the bound values made. */
static tvk_status size_record(tvk_jit *j) {
  tvk_ctx *ctx = j->ctx;
  for (size_t k = 0; k < j->nkept; k++) {
    if (!j->kept_numel[k]) continue;
    Buffer *b = ctx_buffer(ctx, graph_buffer_id(j->kept[k]));
    tvk_status st = b ? ctx_buffer_record_sizes(ctx, b, 1, &j->kept_numel[k]) : TVK_OK;
    if (st != TVK_OK) return st;
  }
  return TVK_OK;
}

/* The captured launches on the inputs' memory, then one wait. */
static tvk_status replay(tvk_jit *j, tvk_tensor *const *ins, Buffer *const *in, tvk_tensor **out,
                         bool *recorded) {
  tvk_ctx *ctx = j->ctx;
  Device *d = ctx->dev;
  *recorded = false;
  bool changed = false;
  if (j->sized) {
    tvk_status st = size_replay(j, ins, in, &changed);
    if (st != TVK_OK) return st;
    if (changed) drop_graph(j); /* its push constants and dispatches are the old values' */
  }
  tvk_status st = d->ops->graph_create && j->nl > 0 && !j->multi ? replay_graph(j, in, recorded)
                                                                 : replay_launches(j, in);
  if (st == TVK_OK && j->nl > 0 && j->multi) {
    st = ctx_sync_devices(ctx, "jit");
  } else if (st == TVK_OK && j->nl > 0) {
    st = d->ops->sync(d);
    if (st != TVK_OK) st = err_set(&ctx->err, st, "jit: %s", d->err.msg);
  }
  if (st == TVK_OK && j->sized) st = size_record(j);
  for (int i = 0; i < j->nout; i++) {
    out[i] = st == TVK_OK ? tensor_from_uop(ctx, j->out[i]) : NULL;
    if (st == TVK_OK && !out[i])
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  return st;
}

tvk_status tvk_jit_run(tvk_jit *j, int nin, tvk_tensor *const *in, int nout, tvk_tensor **out) {
  if (!j) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "jit_run: jit is NULL");
  tvk_ctx *ctx = j->ctx;
  if (nin < 0 || nout < 1 || (nin > 0 && !in) || !out)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "jit_run: bad arguments (nin %d, in %p, nout %d, out %p): nout must be at "
                   "least 1",
                   nin, (const void *)in, nout, (void *)out);
  if (j->nin >= 0 && (nin != j->nin || nout != j->nout))
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "jit_run: %d inputs and %d outputs, but the first call had %d and %d", nin, nout,
                   j->nin, j->nout);
  for (int i = 0; i < nin; i++) {
    if (!in[i] || in[i]->ctx != ctx)
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "jit_run: input %d of %d is %s", i, nin,
                     in[i] ? "of another context" : "NULL");
    if (in[i]->status != TVK_OK)
      return err_set(&ctx->err, in[i]->status, "jit_run: input %d: %s", i, tvk_error_of(in[i]));
    if (in[i]->uop->device == UOP_DEVICE_MULTI)
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                     "jit_run: input %d is sharded (tvk_shard); pass tensors that live on one "
                     "device (shard them inside the function, or pass each part: "
                     "tvk_shard_part)",
                     i);
  }
  if (j->nin < 0) {
    j->nin = nin, j->nout = nout;
    j->sig = calloc((size_t)(nin ? nin : 1), sizeof *j->sig);
    j->in_buf = calloc((size_t)(nin ? nin : 1), sizeof *j->in_buf);
    if (!j->sig || !j->in_buf)
      return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
  }
  /* every input its own row-major buffer: what the kernels were made to read */
  Buffer *stackb[16], **bufs = nin <= 16 ? stackb : malloc((size_t)nin * sizeof *bufs);
  if (!bufs) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "jit: out of memory");
  tvk_status st = TVK_OK;
  bool same = true;
  for (int i = 0; i < nin && st == TVK_OK; i++) {
    if (!(bufs[i] = ctx_materialize(in[i], "jit_run", &st))) break;
    Sig s;
    sig_of(in[i], &s);
    same &= j->runs > 0 && sig_eq(&s, &j->sig[i]);
    j->sig[i] = s;
    j->in_buf[i] = in[i]->uop->src[0];
  }
  if (st == TVK_OK && !same) { /* the first call, or new shapes: start again */
    drop_capture(j);
    j->runs = 0;
  }
  if (st == TVK_OK && j->captured && !j->direct) {
    bool recorded;
    st = replay(j, in, bufs, out, &recorded);
    ctx->stats.jit_replays += st == TVK_OK;
    if (st == TVK_OK && ctx->opt.debug >= 1)
      log_msg(&ctx->log, TVK_LOG_INFO, "tvk jit: replayed %zu kernels%s", j->nl,
              !ctx->dev->ops->graph_create ? ""
              : recorded                   ? " (recorded as one command buffer)"
                                           : " (one command buffer, as recorded)");
  } else if (st == TVK_OK) {
    /* the first call compiles; the second is captured, its kernels all known */
    bool capture = j->runs == 1 && !j->direct;
    if (capture) drop_capture(j);
    st = run_fn(j, in, out, capture);
    if (capture && st == TVK_OK) {
      finish_capture(j, out);
      ctx->stats.jit_captures += j->captured;
      if (j->captured && ctx->opt.debug >= 1)
        log_msg(&ctx->log, TVK_LOG_INFO, "tvk jit: captured %zu kernels%s", j->nl,
                j->direct ? " (an output is an input: the function runs every call)" : "");
    } else if (capture) {
      drop_capture(j);
    }
    j->runs++;
  }
  if (bufs != stackb) free(bufs);
  return st;
}

void jit_free_all(tvk_ctx *ctx) {
  while (ctx->jits) tvk_jit_destroy(ctx->jits);
}
