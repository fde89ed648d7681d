/* Schedules kept by the structure of their graph (schedule.h: SchedCache).
 *
 * An app runs the same computation again and again on new data: the graph is
 * then the same but for its leaves, new BUFFERs of the same dtype and new
 * VALUEs (tvk_scalar). The key is the graph in a canonical form, its
 * nodes in the order a depth-first walk from the roots first finishes them:
 * per node its op, dtype, sources (as earlier positions) and arg, except that
 * a BUFFER counts only by its dtype, its device and whether it is empty
 * (its views say what is read) and a VALUE not at all. Equal
 * keys mean equal graphs up to those leaves, so the scheduler's decisions
 * (which depend on the graph and the device's buffer limit, nothing else)
 * are the same. A hit rebuilds the Schedule from the kept one, with every
 * node the schedule names (outputs, inputs, aliases, each kernel's VALUEs)
 * taken from the new graph at the same position. The key is compared whole,
 * never by hash alone: a wrong schedule would be a wrong answer.
 *
 * What is kept holds no graph node: only the canonical form, positions, and
 * the kernel ASTs (which name no buffer, only DEFINE_GLOBAL indices). So a
 * cached schedule never keeps a tensor's memory alive. */
#include <stdlib.h>
#include <string.h>

#include "ir/hash.h"
#include "ir/ptrmap.h"
#include "ir/strbuf.h"
#include "ir/ustack.h"
#include "ir/vec.h"
#include "schedule/schedule.h"

/* A schedule with positions of the canonical form in place of nodes. */
typedef struct {
  int node, buffer; /* -1: none */
  ScalarType dtype;
  int64_t numel;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
  SchedWhy why;
  Op culprit;
  int device;
} KeptBuf;

typedef struct {
  UOp *ast; /* retained; NULL for a copy */
  int device;
  bool copy;
  int nbufs, nout, nvals;
  int *bufs;
  int *vals; /* positions of the VALUEs */
} KeptItem;

typedef struct {
  uint64_t hash;
  char *key;
  size_t len;
  uint64_t used; /* the cache's clock at the last hit: the oldest entry goes first */
  KeptBuf *bufs;
  int nbufs;
  int *alias_node, *alias_view;
  int naliases;
  KeptItem *items;
  int nitems;
} Entry;

struct SchedCache {
  Entry e[SCHED_CACHE_ENTRIES];
  int n;
  uint64_t clock;
};

/* ---------------------------------------------------------------- the canonical form */

typedef struct {
  Str key;
  PtrMap pos; /* node -> position */
  UOp **nodes;
  size_t n, cap;
} Canon;

static void put(Str *s, const void *p, size_t n) { str_addn(s, (const char *)p, n); }
static void put_i64(Str *s, int64_t v) { put(s, &v, sizeof v); }

static void put_arg(Str *s, const UOp *u) {
  const Arg *a = &u->arg;
  put(s, &a->kind, 1);
  switch ((ArgKind)a->kind) {
  case ARG_NONE: break;
  case ARG_INT: put_i64(s, a->i); break;
  case ARG_FLOAT: put(s, &a->f, sizeof a->f); break;
  case ARG_INTS:
    if (u->op == OP_BUFFER) { /* (id, numel, device): whether it has elements, its device */
      /* The views over a buffer say what is read; its size decides nothing
       * but an empty buffer's loads (constant 0). Data made for each value of
       * a size variable is a buffer of another size under the same symbolic
       * view, and keeps its schedule. */
      put_i64(s, graph_buffer_numel(u) != 0);
      put_i64(s, u->device);
      break;
    }
    if (u->op == OP_VALUE) break; /* (serial, bits): neither */
    put_i64(s, a->ints.n);
    put(s, a->ints.v, (size_t)a->ints.n * sizeof *a->ints.v);
    break;
  case ARG_VAR:
    put_i64(s, (int64_t)strlen(a->var.name));
    put(s, a->var.name, strlen(a->var.name));
    put_i64(s, a->var.lo), put_i64(s, a->var.hi);
    break;
  case ARG_REDUCE:
    put(s, &a->red.op, 1);
    put_i64(s, a->red.n);
    put(s, a->red.axes, (size_t)a->red.n * sizeof *a->red.axes);
    break;
  case ARG_ST:
    put_i64(s, a->st->nviews);
    for (int i = 0; i < a->st->nviews; i++) {
      const View *v = &a->st->views[i];
      size_t nd = (size_t)v->ndim;
      put_i64(s, v->ndim), put_i64(s, v->offset), put(s, &v->has_mask, 1);
      put(s, v->shape, nd * sizeof *v->shape);
      put(s, v->strides, nd * sizeof *v->strides);
      if (v->has_mask) put(s, v->mask, nd * sizeof *v->mask);
    }
    break;
  }
}

static bool canon_add(Canon *c, UOp *u) {
  if (!VEC_RESERVE(c->nodes, c->cap, c->n + 1) || !ptrmap_put(&c->pos, u, (int64_t)c->n))
    return false;
  c->nodes[c->n++] = u;
  Str *s = &c->key;
  put(s, &u->op, 1), put(s, &u->dtype, sizeof u->dtype);
  put_i64(s, u->nsrc);
  for (uint32_t k = 0; k < u->nsrc; k++) put_i64(s, ptrmap_get(&c->pos, u->src[k]));
  put_arg(s, u);
  return !s->oom;
}

/* The canonical form of the graph under roots: each node after its sources
 * (post-order of a depth-first walk, sources in order), then the roots. */
static bool canon_build(Canon *c, int n, UOp *const *roots) {
  UStack st = {0};
  PtrMap entered = {0};
  bool ok = true;
  for (int r = 0; ok && r < n; r++) {
    ok = ustack_push(&st, roots[r]);
    while (ok && st.n) {
      UOp *u = st.v[st.n - 1];
      if (ptrmap_get(&c->pos, u) >= 0) { /* done before */
        st.n--;
        continue;
      }
      bool added = false;
      if (!ptrmap_insert(&entered, u, 1, &added)) {
        ok = false;
        break;
      }
      if (!added) { /* its sources are done: finish it */
        st.n--;
        ok = canon_add(c, u);
        continue;
      }
      for (uint32_t k = u->nsrc; ok && k-- > 0;)
        if (ptrmap_get(&c->pos, u->src[k]) < 0) ok = ustack_push(&st, u->src[k]);
    }
  }
  for (int r = 0; ok && r < n; r++) put_i64(&c->key, ptrmap_get(&c->pos, roots[r]));
  free(st.v);
  ptrmap_free(&entered);
  return ok && !c->key.oom;
}

static void canon_free(Canon *c) {
  free(c->key.p);
  ptrmap_free(&c->pos);
  free(c->nodes);
}

/* ---------------------------------------------------------------- entries */

static void entry_free(Entry *e) {
  for (int i = 0; i < e->nitems; i++) {
    uop_release(e->items[i].ast);
    free(e->items[i].bufs);
    free(e->items[i].vals);
  }
  free(e->items);
  free(e->bufs);
  free(e->alias_node);
  free(e->alias_view);
  free(e->key);
  memset(e, 0, sizeof *e);
}

void sched_cache_free(SchedCache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) entry_free(&c->e[i]);
  free(c);
}

static int pos_of(const Canon *c, const UOp *u) {
  int64_t p = u ? ptrmap_get(&c->pos, u) : -1;
  return p < 0 || p > INT32_MAX ? -1 : (int)p;
}

/* s kept by position into e; false when some node of it is not in the
 * graph's canonical form (then it is not kept) or out of memory. */
static bool entry_make(Entry *e, const Canon *c, const Schedule *s) {
  memset(e, 0, sizeof *e);
  e->bufs = calloc((size_t)(s->nbufs ? s->nbufs : 1), sizeof *e->bufs);
  e->alias_node = calloc((size_t)(s->naliases ? s->naliases : 1), sizeof *e->alias_node);
  e->alias_view = calloc((size_t)(s->naliases ? s->naliases : 1), sizeof *e->alias_view);
  e->items = calloc((size_t)(s->nitems ? s->nitems : 1), sizeof *e->items);
  e->key = malloc(c->key.len ? c->key.len : 1);
  if (!e->bufs || !e->alias_node || !e->alias_view || !e->items || !e->key) return false;
  memcpy(e->key, c->key.p, c->key.len);
  e->len = c->key.len;
  e->hash = hash_fnv1a(c->key.p, c->key.len);
  e->nbufs = s->nbufs, e->naliases = s->naliases;
  for (int i = 0; i < s->nbufs; i++) {
    const SchedBuf *b = &s->bufs[i];
    KeptBuf *k = &e->bufs[i];
    *k = (KeptBuf){pos_of(c, b->node),
                   pos_of(c, b->buffer),
                   b->dtype,
                   b->numel,
                   b->ndim,
                   {0},
                   b->why,
                   b->culprit,
                   b->device};
    memcpy(k->shape, b->shape, sizeof k->shape);
    if ((b->node && k->node < 0) || (b->buffer && k->buffer < 0)) return false;
  }
  for (int a = 0; a < s->naliases; a++) {
    e->alias_node[a] = pos_of(c, s->aliases[a].node);
    e->alias_view[a] = pos_of(c, s->aliases[a].view);
    if (e->alias_node[a] < 0 || e->alias_view[a] < 0) return false;
  }
  for (int i = 0; i < s->nitems; i++) {
    const ScheduleItem *it = &s->items[i];
    if (it->values_folded) return false; /* its AST holds this call's values */
    KeptItem *k = &e->items[e->nitems];
    k->bufs = malloc((size_t)(it->nbufs ? it->nbufs : 1) * sizeof *k->bufs);
    k->vals = malloc((size_t)(it->nvals ? it->nvals : 1) * sizeof *k->vals);
    if (!k->bufs || !k->vals) {
      free(k->bufs), free(k->vals);
      return false;
    }
    k->ast = uop_retain(it->ast), e->nitems++;
    k->nbufs = it->nbufs, k->nout = it->nout, k->nvals = it->nvals;
    k->device = it->device, k->copy = it->copy;
    memcpy(k->bufs, it->bufs, (size_t)it->nbufs * sizeof *k->bufs);
    for (int v = 0; v < it->nvals; v++)
      if ((k->vals[v] = pos_of(c, it->val_nodes[v])) < 0) return false;
  }
  return true;
}

/* The Schedule of e over the graph whose canonical form is c. */
static tvk_status entry_use(const Entry *e, const Canon *c, Schedule *s, Error *err) {
  memset(s, 0, sizeof *s);
  s->bufs = calloc((size_t)(e->nbufs ? e->nbufs : 1), sizeof *s->bufs);
  s->aliases = e->naliases ? calloc((size_t)e->naliases, sizeof *s->aliases) : NULL;
  s->items = calloc((size_t)(e->nitems ? e->nitems : 1), sizeof *s->items);
  bool ok = s->bufs && s->items && (s->aliases || !e->naliases);
  if (ok) s->capbufs = (size_t)(e->nbufs ? e->nbufs : 1);
  for (int i = 0; ok && i < e->nbufs; i++) {
    const KeptBuf *k = &e->bufs[i];
    SchedBuf *b = &s->bufs[s->nbufs++];
    *b = (SchedBuf){.node = k->node >= 0 ? uop_retain(c->nodes[k->node]) : NULL,
                    .buffer = k->buffer >= 0 ? uop_retain(c->nodes[k->buffer]) : NULL,
                    .dtype = k->dtype,
                    .numel = k->numel,
                    .ndim = k->ndim,
                    .why = k->why,
                    .culprit = k->culprit,
                    .device = k->device};
    memcpy(b->shape, k->shape, sizeof b->shape);
  }
  for (int a = 0; ok && a < e->naliases; a++)
    s->aliases[s->naliases++] = (SchedAlias){uop_retain(c->nodes[e->alias_node[a]]),
                                             uop_retain(c->nodes[e->alias_view[a]])};
  for (int i = 0; ok && i < e->nitems; i++) {
    const KeptItem *k = &e->items[i];
    ScheduleItem *it = &s->items[s->nitems];
    it->bufs = malloc((size_t)(k->nbufs ? k->nbufs : 1) * sizeof *it->bufs);
    it->vals = k->nvals ? malloc((size_t)k->nvals * sizeof *it->vals) : NULL;
    it->val_nodes = k->nvals ? calloc((size_t)k->nvals, sizeof *it->val_nodes) : NULL;
    if (!it->bufs || (k->nvals && (!it->vals || !it->val_nodes))) {
      free(it->bufs), free(it->vals), free(it->val_nodes);
      ok = false;
      break;
    }
    it->ast = uop_retain(k->ast), s->nitems++;
    it->nbufs = k->nbufs, it->nout = k->nout, it->nvals = k->nvals;
    it->device = k->device, it->copy = k->copy;
    memcpy(it->bufs, k->bufs, (size_t)k->nbufs * sizeof *it->bufs);
    for (int v = 0; v < k->nvals; v++) {
      UOp *value = c->nodes[k->vals[v]];
      it->vals[v] = graph_value_bits(value);
      it->val_nodes[v] = uop_retain(value);
    }
  }
  if (ok) return TVK_OK;
  schedule_free(s);
  return err_set(err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
}

/* ---------------------------------------------------------------- the cache */

tvk_status schedule_create_cached(const SchedCtx *sc, SchedCache **cache, int n, UOp *const *roots,
                                  Schedule *out, bool *hit) {
  *hit = false;
  if (!*cache && !(*cache = calloc(1, sizeof **cache))) return schedule_create(sc, n, roots, out);
  SchedCache *sch = *cache;
  Canon c = {0};
  if (!canon_build(&c, n, roots)) { /* out of memory: schedule without the cache */
    canon_free(&c);
    return schedule_create(sc, n, roots, out);
  }
  uint64_t h = hash_fnv1a(c.key.p, c.key.len);
  sch->clock++;
  for (int i = 0; i < sch->n; i++) {
    Entry *e = &sch->e[i];
    if (e->hash != h || e->len != c.key.len || memcmp(e->key, c.key.p, c.key.len) != 0) continue;
    e->used = sch->clock;
    tvk_status st = entry_use(e, &c, out, sc->err);
    canon_free(&c);
    *hit = st == TVK_OK;
    return st;
  }
  tvk_status st = schedule_create(sc, n, roots, out);
  if (st == TVK_OK) {
    int slot = sch->n < SCHED_CACHE_ENTRIES ? sch->n : 0;
    for (int i = 1; slot < sch->n && i < sch->n; i++) /* full: the least recently used */
      if (sch->e[i].used < sch->e[slot].used) slot = i;
    if (slot < sch->n) entry_free(&sch->e[slot]);
    if (entry_make(&sch->e[slot], &c, out)) {
      sch->e[slot].used = sch->clock;
      if (slot == sch->n) sch->n++;
    } else { /* not kept: a node it names is not in the graph, or out of memory */
      entry_free(&sch->e[slot]);
      if (slot < sch->n) sch->e[slot] = sch->e[--sch->n];
    }
  }
  canon_free(&c);
  return st;
}
