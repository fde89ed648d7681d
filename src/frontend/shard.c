/* Sharded tensors (tvk_shard, docs/devices.md): MULTI(parts) in the tensor
 * graph, the parts on their devices. Ops build their nodes over a MULTI as
 * over any tensor, in the whole tensor's shape; before a realize,
 * shard_split turns each graph over MULTIs into per-device graphs, bottom
 * up, the seed's MultiLazyBuffer rules:
 *
 *   elementwise            per part, when the sharded inputs are cut alike;
 *                          a replicated input or a constant is cut to each
 *                          part's rows; inputs cut otherwise are gathered
 *   VIEW                   per part when the view keeps the sharded axis whole
 *                          (a permute, an expand, a reshape or pad of the
 *                          other axes: view_per_part); else gathered first
 *   REDUCE_AXIS            per part; over the sharded axis the partial
 *                          results are all-reduced through copies (each
 *                          device adds every part's), the result replicated
 *   CONTIGUOUS             per part
 *
 * A gather (shard_gather) copies every part to one device and puts them in
 * place (padded with zeros and added: the parts do not overlap). */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/ptrmap.h"
#include "ir/vec.h"

/* A node as parts: n parts (0: not sharded, `whole` is the node), cut along
 * axis (-1: each part the whole, replicated), part k on device dev[k] with
 * rows [lo[k], hi[k]) of the axis. */
typedef struct {
  int n, axis;
  UOp *part[CTX_MAX_DEVICES];
  int dev[CTX_MAX_DEVICES];
  int64_t lo[CTX_MAX_DEVICES], hi[CTX_MAX_DEVICES];
  UOp *whole;
} Parts;

static Parts parts_of_multi(UOp *m) {
  Parts p = {.n = (int)m->nsrc, .axis = (int)m->arg.i};
  int64_t at = 0, shape[TVK_MAX_DIMS];
  for (int k = 0; k < p.n; k++) {
    p.part[k] = m->src[k];
    p.dev[k] = m->src[k]->device;
    int64_t len = 0;
    if (p.axis >= 0) graph_shape(m->src[k], shape), len = shape[p.axis];
    p.lo[k] = at, p.hi[k] = at + len, at += len;
  }
  return p;
}

/* a and b have their parts on the same devices, in order. */
static bool same_devices(const Parts *a, const Parts *b) {
  return a->n == b->n && !memcmp(a->dev, b->dev, (size_t)a->n * sizeof *a->dev);
}

static bool same_cut(const Parts *a, const Parts *b) {
  if (!same_devices(a, b) || a->axis != b->axis) return false;
  for (int k = 0; k < a->n; k++)
    if (a->lo[k] != b->lo[k] || a->hi[k] != b->hi[k]) return false;
  return true;
}

/* VIEW(x, st) (autoreleased), st freed; NULL when either is. */
static UOp *view_by(UOp *x, ShapeTracker *st) {
  UOp *v = st ? graph_view(x, st) : NULL;
  st_free(st);
  return v;
}

/* Rows [lo, hi) of x's axis. */
static UOp *rows(UOp *x, int axis, int64_t lo, int64_t hi) {
  int64_t shape[TVK_MAX_DIMS], r[TVK_MAX_DIMS][2];
  int nd = graph_shape(x, shape);
  if (lo == 0 && hi == shape[axis]) return x; /* all of it */
  for (int d = 0; d < nd; d++) r[d][0] = 0, r[d][1] = shape[d];
  r[axis][0] = lo, r[axis][1] = hi;
  ShapeTracker *st0 = st_from_shape(nd, shape);
  ShapeTracker *st = st0 ? st_shrink(st0, (const sint(*)[2])r) : NULL;
  st_free(st0);
  return view_by(x, st);
}

/* x on device `to`: x itself when it is there (or of no device), else a copy. */
static UOp *on(UOp *x, int to) { return x->device == to || x->device < 0 ? x : front_copy(x, to); }

static UOp *shard_gather_parts(const Parts *p, int to) {
  if (p->n == 0) return on(p->whole, to);
  if (p->axis < 0) { /* replicated: the copy on `to`, or any one copied there */
    for (int k = 0; k < p->n; k++)
      if (p->dev[k] == to) return p->part[k];
    return on(p->part[0], to);
  }
  int64_t total = p->hi[p->n - 1];
  bool is_bool = p->part[0]->dtype.scalar == DT_BOOL;
  UOp *sum = NULL;
  bool ok = true; /* a NULL (out of memory) part makes the whole NULL, never a sum without it */
  for (int k = 0; ok && k < p->n; k++) {
    if (p->hi[k] == p->lo[k]) continue; /* an empty part adds nothing */
    int64_t shape[TVK_MAX_DIMS], pads[TVK_MAX_DIMS][2] = {{0}};
    int nd = graph_shape(p->part[k], shape);
    pads[p->axis][0] = p->lo[k], pads[p->axis][1] = total - p->hi[k];
    ShapeTracker *st0 = st_from_shape(nd, shape);
    ShapeTracker *st = st0 ? st_pad(st0, (const sint(*)[2])pads) : NULL;
    st_free(st0);
    UOp *placed = view_by(on(p->part[k], to), st);
    sum = !sum || !placed ? placed : uop_alu2(is_bool ? OP_OR : OP_ADD, sum, placed);
    ok = sum != NULL;
  }
  if (!ok) return NULL;
  /* every part empty: the whole is empty too, as the first part is */
  return sum ? sum : on(p->part[0], to);
}

/* ---------------------------------------------------------------- views per part */

/* The view st of a sharded x (shape S, cut along axis a) as a view of each
 * part: when the view reads the axis in order into one or more of its own
 * axes (the axis whole, or split by a reshape into pieces whose outermost
 * one, *j, each part's rows divide into), and each of its other axes walks
 * input axes on one side of a only (a permute, an expand, a reshape or a pad
 * of the other axes), the part's view is the same with its length along *j
 * and the strides and offset above a rescaled to the part's size. *inner:
 * the rows of a one step along *j covers (1 unless a reshape split a).
 * *out_st[k] for each part (caller frees); false otherwise. */
static bool view_per_part(const ShapeTracker *st, int nds, const int64_t *S, int a, const Parts *p,
                          int *j, int64_t *inner, ShapeTracker **out_st) {
  if (st->nviews != 1 || st_is_symbolic(st) || S[a] == 0) return false;
  const View *v = &st->views[0];
  int64_t R[TVK_MAX_DIMS], block = 1; /* row-major strides of S */
  for (int c = nds - 1; c >= 0; c--) R[c] = block, block *= S[c];
  int64_t above = R[a] * S[a]; /* an address's part in the axes >= a is below this */
  int64_t off_lo = v->offset % above, off_hi = v->offset - off_lo;
  if (off_lo >= R[a]) return false; /* the view starts inside the sharded axis */
  /* the pieces of axis a: output axes stepping a multiple of R[a] below `above` */
  int piece[TVK_MAX_DIMS], npieces = 0;
  for (int d = 0; d < v->ndim; d++) {
    int64_t t = v->strides[d], span = t * (v->shape[d] - 1);
    if (t == 0) continue; /* broadcast or a dim of 1 */
    if (t >= R[a] && t < above) {
      bool masked = v->has_mask && (v->mask[d][0] != 0 || v->mask[d][1] != v->shape[d]);
      if (t % R[a] || masked) return false;
      piece[npieces++] = d;
      continue;
    }
    /* any other axis walks only input axes above a, or only those below */
    bool high = t >= above && t % above == 0, low = t < R[a] && off_lo + span < R[a];
    if (!high && !low) return false;
  }
  /* the pieces tile the axis in order, innermost one step of R[a] */
  int64_t step = 1;
  for (int done = 0; done < npieces; done++) {
    int at = -1;
    for (int i = 0; i < npieces && at < 0; i++)
      if (v->strides[piece[i]] == step * R[a]) at = piece[i];
    if (at < 0) return false;
    *j = at, *inner = step;
    step *= v->shape[at];
  }
  if (npieces == 0 || step != S[a]) return false;
  for (int k = 0; k < p->n; k++)
    if ((p->hi[k] - p->lo[k]) % *inner) return false;
  for (int k = 0; k < p->n; k++) {
    int64_t len = p->hi[k] - p->lo[k];
    sint strides[TVK_MAX_DIMS], shape[TVK_MAX_DIMS], mask[TVK_MAX_DIMS][2];
    for (int d = 0; d < v->ndim; d++) {
      int64_t t = v->strides[d];
      shape[d] = d == *j ? len / *inner : v->shape[d];
      strides[d] = t >= above ? t / S[a] * len : t;
      mask[d][0] = v->has_mask ? v->mask[d][0] : 0;
      mask[d][1] = v->has_mask ? v->mask[d][1] : v->shape[d];
      if (d == *j) mask[d][0] = 0, mask[d][1] = shape[d];
    }
    sint off = off_hi / S[a] * len + off_lo;
    View w = view_make(v->ndim, shape, strides, off, v->has_mask ? (const sint(*)[2])mask : NULL);
    if (!(out_st[k] = st_from_view(&w))) {
      for (int i = 0; i < k; i++) st_free(out_st[i]);
      return false;
    }
  }
  return true;
}

/* ---------------------------------------------------------------- the split */

typedef struct {
  PtrMap at; /* node -> index in ps */
  Parts *ps;
  size_t n, cap;
  const char *fail; /* what could not be split */
} Split;

static const Parts *parts_at(const Split *s, UOp *u) { return &s->ps[ptrmap_get(&s->at, u)]; }

static Parts whole(UOp *u) { return (Parts){.whole = u}; }

/* u over its sources' new wholes (a MULTI below it was gathered). */
static Parts rebuilt(const Split *s, UOp *u) {
  UOp *src[8];
  bool changed = false;
  for (uint32_t i = 0; i < u->nsrc; i++) {
    src[i] = parts_at(s, u->src[i])->whole;
    changed |= src[i] != u->src[i];
  }
  return whole(changed ? uop_replace_src(u, (int)u->nsrc, src) : u);
}

/* u's sources as part k (a sharded or replicated source's part k, a
 * constant cut to part k's rows of `cut`) into src; false on out of memory. */
static bool sources_of_part(const Split *s, UOp *u, const Parts *cut, int k, UOp **src) {
  for (uint32_t i = 0; i < u->nsrc; i++) {
    const Parts *q = parts_at(s, u->src[i]);
    UOp *x = q->n ? q->part[k] : q->whole;
    if ((!q->n || q->axis < 0) && cut->axis >= 0 && x)
      x = rows(x, cut->axis, cut->lo[k], cut->hi[k]);
    if (!(src[i] = x)) return false;
  }
  return true;
}

static Parts split_elementwise(Split *s, UOp *u) {
  const Parts *cut = NULL; /* the first sharded source; else the first replicated one */
  for (uint32_t i = 0; i < u->nsrc; i++) {
    const Parts *q = parts_at(s, u->src[i]);
    if (q->n && (!cut || (cut->axis < 0 && q->axis >= 0))) cut = q;
  }
  if (!cut) return rebuilt(s, u);
  Parts r = *cut;
  /* sources cut otherwise are gathered onto the first device, and so is u */
  for (uint32_t i = 0; i < u->nsrc; i++) {
    const Parts *q = parts_at(s, u->src[i]);
    bool fits = !q->n || (q->axis < 0 && same_devices(q, cut)) || same_cut(q, cut);
    if (!fits) {
      UOp *src[8];
      for (uint32_t m = 0; m < u->nsrc; m++)
        src[m] = shard_gather_parts(parts_at(s, u->src[m]), cut->dev[0]);
      return whole(uop_replace_src(u, (int)u->nsrc, src));
    }
  }
  for (int k = 0; k < r.n; k++) {
    UOp *src[8];
    r.part[k] = sources_of_part(s, u, cut, k, src) ? uop_replace_src(u, (int)u->nsrc, src) : NULL;
  }
  return r;
}

static Parts split_view(Split *s, UOp *u) {
  const Parts *x = parts_at(s, u->src[0]);
  if (!x->n) return rebuilt(s, u);
  Parts r = *x;
  if (x->axis < 0) {
    for (int k = 0; k < r.n; k++) r.part[k] = graph_view(x->part[k], u->arg.st);
    return r;
  }
  int64_t S[TVK_MAX_DIMS], inner;
  int nds = graph_shape(u->src[0], S), j;
  ShapeTracker *st[CTX_MAX_DEVICES];
  if (!view_per_part(u->arg.st, nds, S, x->axis, x, &j, &inner, st))
    return whole(graph_view(shard_gather_parts(x, x->dev[0]), u->arg.st));
  r.axis = j;
  for (int k = 0; k < r.n; k++) {
    r.lo[k] = x->lo[k] / inner, r.hi[k] = x->hi[k] / inner;
    r.part[k] = graph_view(x->part[k], st[k]);
    st_free(st[k]);
  }
  return r;
}

static Parts split_reduce(Split *s, UOp *u) {
  const Parts *x = parts_at(s, u->src[0]);
  if (!x->n) return rebuilt(s, u);
  Parts r = *x;
  bool across = false;
  for (int i = 0; i < u->arg.red.n; i++) across |= u->arg.red.axes[i] == x->axis;
  for (int k = 0; k < r.n; k++) r.part[k] = uop_replace_src(u, 1, &x->part[k]);
  if (!across) return r;
  /* all-reduce: each device combines every part's partial result, its own
   * first, then the others' in order (copied to it) */
  Parts a = r;
  a.axis = -1;
  Op op = (Op)u->arg.red.op;
  for (int t = 0; t < r.n; t++) {
    UOp *acc = NULL;
    bool ok = true;                       /* NULL (out of memory) stays NULL: parts_ok reports it */
    for (int k = 0; ok && k < r.n; k++) { /* an empty part's partial is the identity */
      UOp *x_k = r.part[k] ? on(r.part[k], r.dev[t]) : NULL;
      acc = !acc || !x_k ? x_k : uop_alu2(op, acc, x_k);
      ok = acc != NULL;
    }
    a.part[t] = acc;
    a.lo[t] = a.hi[t] = 0;
  }
  return a;
}

static Parts split_node(Split *s, UOp *u) {
  if (u->device != UOP_DEVICE_MULTI) return whole(u);
  switch ((Op)u->op) {
  case OP_MULTI: return parts_of_multi(u);
  case OP_VIEW: return split_view(s, u);
  case OP_REDUCE_AXIS: return split_reduce(s, u);
  case OP_CONTIGUOUS: return split_elementwise(s, u);
  default:
    if (op_in((Op)u->op, G_ELEMENTWISE)) return split_elementwise(s, u);
    s->fail = op_name((Op)u->op);
    return whole(u);
  }
}

static bool parts_ok(const Parts *p) {
  if (!p->n) return p->whole != NULL;
  for (int k = 0; k < p->n; k++)
    if (!p->part[k]) return false;
  return true;
}

/* The per-device form of every node under root (sources first); the root's. */
static tvk_status split(tvk_ctx *ctx, Split *s, UOp *root, Parts *out) {
  size_t n = 0;
  UOp **topo = uop_toposort(root, &n);
  bool ok = topo && VEC_RESERVE(s->ps, s->cap, s->n + n);
  for (size_t i = 0; ok && !s->fail && i < n; i++) {
    if (ptrmap_get(&s->at, topo[i]) >= 0) continue;
    Parts p = split_node(s, topo[i]);
    ok = parts_ok(&p) && ptrmap_put(&s->at, topo[i], (int64_t)s->n);
    s->ps[s->n++] = p;
  }
  free(topo);
  if (s->fail)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "realize: a sharded tensor (tvk_shard) reaches a %s, which does not run on "
                   "parts yet; gather it first (tvk_to_device)",
                   s->fail);
  if (!ok) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory sharding");
  *out = *parts_at(s, root);
  return TVK_OK;
}

tvk_status shard_split(tvk_ctx *ctx, UOp *root, UOp **out) {
  Split s = {0};
  Parts p;
  tvk_status st = ptrmap_init(&s.at, 64)
                      ? split(ctx, &s, root, &p)
                      : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  if (st == TVK_OK) {
    *out = p.n ? graph_multi(p.n, p.part, p.axis) : p.whole;
    if (!*out) st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "realize: out of memory");
  }
  ptrmap_free(&s.at);
  free(s.ps);
  return st;
}

UOp *shard_gather(UOp *multi, int to) {
  Parts p = parts_of_multi(multi);
  return shard_gather_parts(&p, to);
}

UOp *shard_rows_on(UOp *g, int axis, UOp *multi, int k) {
  Parts m = parts_of_multi(multi);
  Parts p = g->op == OP_MULTI ? parts_of_multi(g) : whole(g);
  UOp *on_k = shard_gather_parts(&p, m.dev[k]);
  return on_k && axis >= 0 ? rows(on_k, axis, m.lo[k], m.hi[k]) : on_k;
}

/* ---------------------------------------------------------------- like another, assign */

tvk_tensor *front_shard_like(tvk_tensor *t, tvk_tensor *like) {
  tvk_ctx *ctx = t->ctx;
  if (t->status != TVK_OK || like->status != TVK_OK) return tensor_error_from(t->status ? t : like);
  if (like->uop->device >= 0) return tvk_to_device(t, like->uop->device);
  if (like->uop->device != UOP_DEVICE_MULTI) return tensor_from_uop(ctx, t->uop);
  size_t m = FRONT_BEGIN(ctx);
  UOp *sp = NULL;
  tvk_status st = shard_split(ctx, like->uop, &sp);
  if (st != TVK_OK) return FRONT_END(ctx, m, tensor_error_ctx(ctx, st));
  if (sp->op != OP_MULTI) return FRONT_END(ctx, m, tvk_to_device(t, sp->device));
  Parts p = parts_of_multi(sp);
  UOp *parts[CTX_MAX_DEVICES];
  for (int k = 0; k < p.n; k++) {
    UOp *x = p.axis >= 0 ? rows(t->uop, p.axis, p.lo[k], p.hi[k]) : t->uop;
    parts[k] = x ? (x->device == p.dev[k] ? x : front_copy(x, p.dev[k])) : NULL;
  }
  return FRONT_END(ctx, m, tensor_from_uop(ctx, graph_multi(p.n, parts, p.axis)));
}

/* Part k of the value v (split already) for a target cut as tp, or NULL
 * (with *why) when v is not cut alike, replicated on the same devices, or a
 * constant. */
static UOp *value_part(UOp *v, const Parts *tp, int k, const char **why) {
  if (v->op != OP_MULTI) {
    if (v->device >= 0) *why = "lives on one device; the target is sharded";
    return v->device >= 0 ? NULL : tp->axis >= 0 ? rows(v, tp->axis, tp->lo[k], tp->hi[k]) : v;
  }
  Parts vp = parts_of_multi(v);
  if (same_cut(&vp, tp)) return vp.part[k];
  if (vp.axis < 0 && same_devices(&vp, tp))
    return tp->axis >= 0 ? rows(vp.part[k], tp->axis, tp->lo[k], tp->hi[k]) : vp.part[k];
  *why = "is sharded otherwise than the target";
  return NULL;
}

/* t (a view of a buffer) made a buffer of its own on its device, holding
 * its values: the part an assign writes must not be another tensor's memory
 * (a CONTIGUOUS of a row-major prefix would be that memory again). */
static tvk_status own_copy(tvk_tensor *t) {
  tvk_ctx *ctx = t->ctx;
  int64_t numel;
  tvk_status st = ctx_bound_numel(ctx, &ctx->err, "assign", t->ndim, t->shape, &numel);
  int64_t id =
      st == TVK_OK ? ctx_buffer_new_on(ctx, t->uop->device, dt_from_tvk(t->dtype), numel, &st) : -1;
  if (id < 0) return st;
  UOp *v = graph_buffer_view(ctx, id, t->ndim, t->shape);
  if (!v) {
    ctx_buffer_discard(ctx, id);
    return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "assign: out of memory");
  }
  tvk_tensor *own = tensor_from_uop(ctx, v);
  st = tvk_assign(own, t);
  if (st == TVK_OK) st = tvk_realize(1, &own);
  if (st == TVK_OK) tensor_set_uop(t, own->uop);
  tvk_release(own);
  return st;
}

tvk_status shard_assign(tvk_tensor *target, tvk_tensor *value) {
  tvk_ctx *ctx = target->ctx;
  /* the target's parts in memory, each a buffer of its own */
  tvk_status st = tvk_realize(1, &target);
  if (st != TVK_OK) return st;
  if (target->uop->op != OP_MULTI)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "assign: the sharded target's graph gathers its parts onto one device; "
                   "assign to a tensor in parts (tvk_shard)");
  size_t m = FRONT_BEGIN(ctx);
  size_t sc = tvk_scope_begin(ctx);
  Parts tp = parts_of_multi(target->uop);
  tvk_tensor *v = value;
  if (v->dtype != target->dtype) v = tvk_cast(v, target->dtype);
  if (v->ndim != target->ndim || memcmp(v->shape, target->shape, sizeof(int64_t) * (size_t)v->ndim))
    v = tvk_expand(v, target->ndim, target->shape);
  st = v->status != TVK_OK ? err_set(&ctx->err, v->status, "assign: %s", tvk_error_of(v)) : TVK_OK;
  UOp *vs = v->uop, *assigned[CTX_MAX_DEVICES];
  if (st == TVK_OK && vs->device == UOP_DEVICE_MULTI) st = shard_split(ctx, vs, &vs);
  for (int k = 0; st == TVK_OK && k < tp.n; k++) {
    const char *why = "ran out of memory";
    UOp *vk = value_part(vs, &tp, k, &why);
    tvk_tensor *pk = tensor_from_uop(ctx, tp.part[k]);
    tvk_tensor *val = vk ? tensor_from_uop(ctx, vk) : NULL;
    UOp *pu = pk->uop;
    if (pu && pu->op == OP_VIEW && pu->src[0]->op == OP_BUFFER &&
        (!st_contiguous(pu->arg.st) ||
         !sint_proven_eq(st_numel(pu->arg.st), graph_buffer_numel(pu->src[0])))) {
      st = own_copy(pk); /* a view of another's memory: a copy of its own */
    }
    if (st == TVK_OK && !val)
      st = err_set(&ctx->err, TVK_ERR_INVALID_ARG, "assign: the value %s (tvk_shard)", why);
    if (st == TVK_OK) st = tvk_assign(pk, val);
    if (st == TVK_OK) assigned[k] = uop_autorelease(uop_retain(pk->uop));
  }
  UOp *multi = st == TVK_OK ? graph_multi(tp.n, assigned, tp.axis) : NULL;
  if (st == TVK_OK && !multi)
    st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "assign: out of memory");
  if (st == TVK_OK) tensor_set_uop(target, multi);
  tvk_scope_end(ctx, sc, 0, NULL);
  uop_pool_drain(ctx->u, m);
  return st;
}

/* ---------------------------------------------------------------- the API */

tvk_tensor *tvk_shard(tvk_tensor *t, int n, const int *devices, int axis) {
  tvk_tensor *bad = tensor_check_inputs("shard", 1, &t);
  if (bad || !t) return bad;
  tvk_ctx *ctx = t->ctx;
  if (n < 1 || n > ctx->ndevs || !devices)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "shard: n is %d (must be 1 to the context's %d devices)%s", n, ctx->ndevs,
                        devices ? "" : ", devices is NULL");
  if (axis < -1 || axis >= t->ndim)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "shard: axis %d is not -1 (replicated) or an axis of the tensor's %d", axis,
                        t->ndim);
  for (int k = 0; k < n; k++) {
    if (devices[k] < 0 || devices[k] >= ctx->ndevs)
      return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                          "shard: devices[%d] is %d, not a device of the context (0 to %d)", k,
                          devices[k], ctx->ndevs - 1);
    for (int m = 0; m < k; m++)
      if (devices[m] == devices[k])
        return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                            "shard: device %d is named twice (devices[%d] and [%d])", devices[k], m,
                            k);
  }
  if (t->uop->device == UOP_DEVICE_MULTI)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "shard: the tensor is sharded already; gather it first (tvk_to_device)");
  if (axis >= 0 && shape_first_sym(t->ndim, t->shape) >= 0)
    return front_refuse_symbolic("shard", 1, &t);
  size_t m = FRONT_BEGIN(ctx);
  UOp *parts[CTX_MAX_DEVICES];
  /* as the seed cuts: ceil(size / n) each, the last ones shorter or empty */
  int64_t size = axis >= 0 ? t->shape[axis] : 0, each = (size + n - 1) / n;
  bool ok = true;
  for (int k = 0; ok && k < n; k++) {
    tvk_tensor *piece = t;
    if (axis >= 0) {
      int64_t r[TVK_MAX_DIMS][2];
      for (int d = 0; d < t->ndim; d++) r[d][0] = 0, r[d][1] = t->shape[d];
      r[axis][0] = each * k < size ? each * k : size;
      r[axis][1] = each * (k + 1) < size ? each * (k + 1) : size;
      piece = tvk_shrink(t, (const int64_t(*)[2])r);
    }
    tvk_tensor *c = tvk_to_device(piece, devices[k]);
    ok = c->status == TVK_OK; /* on devices[k]: a constant's part is computed there */
    /* A part on the device t lives on is a copy too: the parts are the
     * sharded tensor's own memory, which an assign into them (an
     * optimiser's step) writes without touching t. */
    if (ok) parts[k] = c->uop == piece->uop ? front_copy(c->uop, devices[k]) : c->uop;
    ok = ok && parts[k] != NULL;
    if (ok) uop_autorelease(uop_retain(parts[k])); /* alive after c goes */
    if (piece != t) tvk_release(piece);
    if (!ok)
      bad = c->status != TVK_OK ? tensor_error_from(c)
                                : tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "shard: out of memory");
    tvk_release(c);
  }
  if (!ok) return FRONT_END(ctx, m, bad);
  return FRONT_END(ctx, m,
                   tensor_new(ctx, graph_multi(n, parts, axis), t->dtype, t->ndim, t->shape));
}

tvk_tensor *tvk_shard_part(tvk_tensor *t, int k) {
  tvk_tensor *bad = tensor_check_inputs("shard_part", 1, &t);
  if (bad || !t) return bad;
  tvk_ctx *ctx = t->ctx;
  if (t->uop->device != UOP_DEVICE_MULTI)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "shard_part: the tensor is not sharded");
  size_t m = FRONT_BEGIN(ctx);
  UOp *sp = NULL;
  tvk_status st = shard_split(ctx, t->uop, &sp);
  if (st != TVK_OK) return FRONT_END(ctx, m, tensor_error_ctx(ctx, st));
  int n = sp->op == OP_MULTI ? (int)sp->nsrc : 0;
  if (n == 0)
    return FRONT_END(ctx, m,
                     tensor_error(ctx, TVK_ERR_INVALID_ARG,
                                  "shard_part: the tensor's graph gathers its parts onto one "
                                  "device: it has none"));
  if (k < 0 || k >= n)
    return FRONT_END(ctx, m,
                     tensor_error(ctx, TVK_ERR_INVALID_ARG,
                                  "shard_part: part %d of a tensor of %d parts (0 to %d)", k, n,
                                  n - 1));
  return FRONT_END(ctx, m, tensor_from_uop(ctx, sp->src[k]));
}

int tvk_shard_info(const tvk_tensor *t, int *axis) {
  if (axis) *axis = 0;
  if (!t || t->status != TVK_OK || !t->uop || t->uop->device != UOP_DEVICE_MULTI) return 0;
  /* a graph over parts: as its realize will cut it (not computed here) */
  UOp *u = t->uop;
  if (u->op != OP_MULTI) {
    UOp *split_root = NULL;
    tvk_ctx *ctx = t->ctx;
    size_t m = uop_pool_mark(ctx->u);
    Error saved = ctx->err;
    if (shard_split(ctx, u, &split_root) != TVK_OK || split_root->op != OP_MULTI) {
      ctx->err = saved;
      uop_pool_drain(ctx->u, m);
      return 0;
    }
    int n = (int)split_root->nsrc;
    if (axis) *axis = (int)split_root->arg.i;
    uop_pool_drain(ctx->u, m);
    return n;
  }
  if (axis) *axis = (int)u->arg.i;
  return (int)u->nsrc;
}
