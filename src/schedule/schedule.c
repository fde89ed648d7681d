/* The scheduler's driver: collect the graph, decide what is materialised
 * (decide.c), build one kernel per materialised node (kernelize.c), order the
 * kernels, allocate the new buffers; and printing and freeing schedules. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ir/vec.h"
#include "schedule/schedule_internal.h"

const char *sched_why_name(SchedWhy why) {
  static const char *const names[] = {
      [WHY_NONE] = "not materialised",
      [WHY_OUTPUT] = "requested",
      [WHY_CONTIGUOUS] = "contiguous",
      [WHY_VIEW_BLOCKED] = "a view over it cannot be pushed through it",
      [WHY_UNSAFE_PAD] = "padded, and an op below does not keep 0",
      [WHY_REDUCE_NESTED] = "reduce inside another reduce's input",
      [WHY_REDUCE_SHARED] = "reduce read by two kernels (computed once)",
      [WHY_REDUCE_MISMATCH] = "reduce of other axes than the kernel's reduce",
      [WHY_EXPAND] = "expanded by a view (computed once, not per copy)",
      [WHY_ASSIGN] = "assign (written in place)",
      [WHY_BUFFER_LIMIT] = "split off: one kernel would bind more buffers than the device allows",
      [WHY_KERNEL_SIZE] = "split off: one kernel would fuse too many ops to compile well",
      [WHY_COPY] = "copy to another device",
      [WHY_COPY_SOURCE] = "read by a copy to another device",
  };
  return (unsigned)why < sizeof names / sizeof *names ? names[why] : "?";
}

int sched_add_buf(Schedule *s, const SchedBuf *b) {
  if (!VEC_RESERVE(s->bufs, s->capbufs, (size_t)s->nbufs + 1)) return -1;
  s->bufs[s->nbufs] = *b;
  return s->nbufs++;
}

/* One output buffer per materialised node, in graph order. */
static tvk_status add_outputs(SchedGraph *g, Schedule *s) {
  for (size_t i = 0; i < g->n; i++) {
    if (!sched_realized(g, (int64_t)i)) continue;
    UOp *u = g->topo[i];
    SchedBuf b = {.node = u,
                  .dtype = (ScalarType)u->dtype.scalar,
                  .numel = 1,
                  .why = g->info[i].why,
                  .culprit = g->info[i].culprit,
                  .device = g->info[i].device};
    b.ndim = graph_shape(u, b.shape);
    for (int d = 0; d < b.ndim; d++) b.numel = sint_mul(b.numel, b.shape[d]);
    /* An assign writes the target's buffer: nothing to allocate. */
    if (u->op == OP_ASSIGN) b.buffer = u->src[0]->src[0];
    int at = sched_add_buf(s, &b);
    if (at < 0) return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    uop_retain(u);
    uop_retain(b.buffer);
    g->info[i].buf = at;
  }
  return TVK_OK;
}

/* The "runs before" edges between items, as a growable list of pairs. */
typedef struct {
  struct Edge {
    int from, to;
  } * e;
  size_t n, cap;
} Edges;

static bool edge_add(Edges *E, int from, int to) {
  return VEC_PUSH(E->e, E->n, E->cap, ((struct Edge){from, to}));
}

/* An item runs after the items writing its inputs (read after write), and an
 * assign's item runs after every other item reading its target's old value
 * (write after read: that is what "old" means). */
static bool collect_edges(const Schedule *s, const ScheduleItem *items, int n, Edges *E) {
  int *producer = malloc((size_t)(s->nbufs ? s->nbufs : 1) * sizeof *producer);
  PtrMap assigner = {0}; /* BUFFER UOp an assign item writes -> that item */
  bool ok = producer != NULL;
  for (int b = 0; ok && b < s->nbufs; b++) producer[b] = -1;
  for (int i = 0; ok && i < n; i++)
    for (int o = 0; ok && o < items[i].nout; o++) {
      const SchedBuf *sb = &s->bufs[items[i].bufs[o]];
      producer[items[i].bufs[o]] = i;
      if (sb->buffer) ok = ptrmap_put(&assigner, sb->buffer, i); /* only assigns have one now */
    }
  for (int j = 0; ok && j < n; j++)
    for (int k = items[j].nout; ok && k < items[j].nbufs; k++) {
      int b = items[j].bufs[k], p = producer[b];
      if (p >= 0) ok = edge_add(E, p, j);
      /* the old value of a buffer: read before the assign to it */
      int64_t a = s->bufs[b].node ? -1 : ptrmap_get(&assigner, s->bufs[b].buffer);
      if (ok && a >= 0 && a != j) ok = edge_add(E, j, (int)a);
    }
  free(producer);
  ptrmap_free(&assigner);
  return ok;
}

/* Kahn's toposort of the items by in-degree over collect_edges. Fills
 * order[0..n-1]. A cycle -- only assigns make one: two assigns each reading
 * the other's old value -- is an error, never looped on. */
/* An item's rank among those ready to run (SchedCtx.background_devices):
 * what feeds a background device first (a copy to it: it waits for the
 * device's queue, so before the queue fills), then its kernels (queued, so
 * the host goes on), then the host's kernels (they run while the queue
 * does), then copies out of a device (they wait for it). */
static bool in_background(int device, uint32_t background) {
  return device >= 0 && device < 32 && (background >> device & 1);
}

static int item_rank(const Schedule *s, const ScheduleItem *it, uint32_t background) {
  if (it->copy) return in_background(s->bufs[it->bufs[0]].device, background) ? 0 : 3;
  return in_background(it->device, background) ? 1 : 2;
}

static tvk_status order_items(Error *err, const Schedule *s, const ScheduleItem *items, int n,
                              uint32_t background, int *order) {
  Edges E = {0};
  int *indeg = calloc((size_t)n + 1, sizeof *indeg);
  int *first =
      calloc((size_t)n + 2, sizeof *first); /* item p's successors: succ[first[p]..first[p+1]) */
  int *succ = NULL;
  tvk_status st = TVK_OK;
  if (!indeg || !first || !collect_edges(s, items, n, &E) ||
      !(succ = malloc((E.n ? E.n : 1) * sizeof *succ))) {
    st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory ordering kernels");
    goto done;
  }
  for (size_t e = 0; e < E.n; e++) first[E.e[e].from + 2]++, indeg[E.e[e].to]++;
  for (int p = 0; p < n; p++) first[p + 2] += first[p + 1];
  for (size_t e = 0; e < E.n; e++) succ[first[E.e[e].from + 1]++] = E.e[e].to;
  int head = 0, tail = 0;
  for (int i = 0; i < n; i++)
    if (indeg[i] == 0) order[tail++] = i;
  /* several devices: the ready item of the lowest rank first (the order
   * among equals kept) */
  bool ranked = false;
  for (int i = 1; i < n && !ranked; i++)
    ranked = items[i].copy || items[i].device != items[0].device;
  while (head < tail) {
    if (ranked) {
      int best = head;
      for (int q = head + 1; q < tail; q++)
        if (item_rank(s, &items[order[q]], background) <
            item_rank(s, &items[order[best]], background))
          best = q;
      int pick = order[best];
      memmove(order + head + 1, order + head, (size_t)(best - head) * sizeof *order);
      order[head] = pick;
    }
    int p = order[head++];
    for (int e = first[p]; e < first[p + 1]; e++)
      if (--indeg[succ[e]] == 0) order[tail++] = succ[e];
  }
  if (tail != n)
    st = err_set(err, TVK_ERR_INVALID_ARG,
                 "schedule: the kernels form a cycle (%d of %d could be ordered): assigns in "
                 "this realize each read a buffer that another one overwrites (e.g. a and b "
                 "swapped by two assigns); realize one of the values first",
                 tail, n);
done:
  free(E.e), free(indeg), free(first), free(succ);
  return st;
}

static tvk_status build_items(SchedGraph *g, Schedule *s) {
  ScheduleItem *tmp = calloc(g->n ? g->n : 1, sizeof *tmp);
  int *order = malloc((g->n ? g->n : 1) * sizeof *order);
  if (!tmp || !order) {
    free(tmp), free(order);
    return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  }
  int n = 0;
  tvk_status st = TVK_OK;
  int64_t *roots = malloc((g->n ? g->n : 1) * sizeof *roots);
  if (!roots) st = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  for (size_t i = 0; i < g->n && st == TVK_OK; i++) {
    int b = g->info[i].buf;
    if (b < 0 || s->bufs[b].numel == 0) continue; /* not materialised, or nothing to compute */
    if (sched_group(g, (int64_t)i) != (int64_t)i) continue; /* stored by its group's kernel */
    int nr = 0;
    for (size_t j = i; j < g->n; j++) /* the group: its first node, then the others in order */
      if (g->info[j].buf >= 0 && s->bufs[g->info[j].buf].numel &&
          sched_group(g, (int64_t)j) == (int64_t)i)
        roots[nr++] = (int64_t)j;
    st = sched_is_copy(g->topo[i]) ? sched_copy_item(g, s, (int64_t)i, &tmp[n])
                                   : sched_kernelize(g, s, roots, nr, &tmp[n]);
    if (st == TVK_OK) n++;
  }
  free(roots);
  if (st == TVK_OK) st = order_items(g->sc->err, s, tmp, n, g->sc->background_devices, order);
  if (st == TVK_OK && !(s->items = malloc((size_t)(n ? n : 1) * sizeof *s->items)))
    st = err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  if (st == TVK_OK) {
    for (int i = 0; i < n; i++) s->items[i] = tmp[order[i]];
    s->nitems = n;
  } else {
    for (int i = 0; i < n; i++) {
      uop_release(tmp[i].ast), free(tmp[i].bufs), free(tmp[i].vals);
      for (int v = 0; v < tmp[i].nvals; v++) uop_release(tmp[i].val_nodes[v]);
      free(tmp[i].val_nodes);
    }
  }
  free(tmp), free(order);
  return st;
}

/* No-op CONTIGUOUS nodes: replaced by their source view once y is in memory. */
static tvk_status add_aliases(SchedGraph *g, Schedule *s) {
  int n = 0;
  for (size_t i = 0; i < g->n; i++) n += g->info[i].alias;
  if (n == 0) return TVK_OK;
  if (!(s->aliases = calloc((size_t)n, sizeof *s->aliases)))
    return err_set(g->sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory");
  for (size_t i = 0; i < g->n; i++) {
    if (!g->info[i].alias) continue;
    UOp *u = g->topo[i];
    s->aliases[s->naliases++] = (SchedAlias){uop_retain(u), uop_retain(u->src[0])};
  }
  return TVK_OK;
}

tvk_status schedule_create(const SchedCtx *sc, int n, UOp *const *roots, Schedule *out) {
  memset(out, 0, sizeof *out);
  SchedGraph g;
  size_t mark = uop_pool_mark(sc->u);
  tvk_status st = sched_graph_init(&g, sc, n, roots);
  if (st != TVK_OK) return st;
  st = sched_decide(&g, n, roots);
  if (st == TVK_OK) st = add_outputs(&g, out);
  if (st == TVK_OK) st = add_aliases(&g, out);
  if (st == TVK_OK) st = build_items(&g, out);
  sched_graph_free(&g);
  uop_pool_drain(sc->u, mark); /* temporaries of the passes; the schedule retains what it keeps */
  if (st != TVK_OK) schedule_free(out);
  return st;
}

int schedule_owner(const Schedule *s, int i) {
  while (s->bufs[i].reuse) i = s->bufs[i].reuse - 1;
  return i;
}

void schedule_buf_str(const Schedule *s, int i, char *buf, size_t n) {
  const SchedBuf *b = &s->bufs[i];
  int at = b->buffer ? snprintf(buf, n, "buf %" PRId64, graph_buffer_id(b->buffer))
                     : snprintf(buf, n, "buf ?");
  if (b->device != 0) /* on the first device unless said */
    at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, " @%d", b->device);
  at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, " %s ", dt_scalar_name(b->dtype));
  if (!b->node) {
    at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, "[");
    at += sint_str(b->numel, buf + at, n > (size_t)at ? n - (size_t)at : 0);
    snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, "]");
    return;
  }
  at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, "(");
  for (int d = 0; d < b->ndim; d++) {
    at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, "%s", d ? ", " : "");
    at += sint_str(b->shape[d], buf + at, n > (size_t)at ? n - (size_t)at : 0);
  }
  snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, "%s)", b->ndim == 1 ? "," : "");
}

void schedule_why_str(const Schedule *s, int i, char *buf, size_t n) {
  const SchedBuf *b = &s->bufs[i];
  int at = snprintf(buf, n, "%s: %s", op_name((Op)b->node->op), sched_why_name(b->why));
  if (b->culprit != OP_NONE && b->why != WHY_OUTPUT && b->why != WHY_CONTIGUOUS && at >= 0 &&
      (size_t)at < n)
    snprintf(buf + at, n - (size_t)at, " (%s)", op_name(b->culprit));
}

static void print_why(FILE *f, const Schedule *s, int i) {
  char why[256];
  schedule_why_str(s, i, why, sizeof why);
  fputs(why, f);
}

void schedule_print(FILE *f, const Schedule *s, const char *const *names) {
  char text[400];
  fprintf(f, "tvk schedule: %d kernel%s, %d buffer%s\n", s->nitems, s->nitems == 1 ? "" : "s",
          s->nbufs, s->nbufs == 1 ? "" : "s");
  for (int i = 0; i < s->nitems; i++) {
    const ScheduleItem *it = &s->items[i];
    fprintf(f, "  [%d] %s\n", i, names && names[i] ? names[i] : "kernel");
    for (int k = 0; k < it->nbufs; k++) {
      schedule_buf_str(s, it->bufs[k], text, sizeof text);
      fprintf(f, "      %s %d: %s", k < it->nout ? "out" : "in ", k, text);
      if (k < it->nout) fprintf(f, "  <- "), print_why(f, s, it->bufs[k]);
      fputc('\n', f);
    }
  }
  for (int i = 0; i < s->nbufs; i++) {
    if (!s->bufs[i].node || s->bufs[i].numel != 0) continue;
    schedule_buf_str(s, i, text, sizeof text);
    fprintf(f, "  (no kernel) %s  <- ", text);
    print_why(f, s, i);
    fputc('\n', f);
  }
}

void schedule_free(Schedule *s) {
  if (!s) return;
  for (int i = 0; i < s->nitems; i++) {
    uop_release(s->items[i].ast);
    free(s->items[i].bufs);
    free(s->items[i].vals);
    for (int v = 0; s->items[i].val_nodes && v < s->items[i].nvals; v++)
      uop_release(s->items[i].val_nodes[v]);
    free(s->items[i].val_nodes);
  }
  for (int i = 0; i < s->nbufs; i++) {
    uop_release(s->bufs[i].node);
    uop_release(s->bufs[i].buffer);
  }
  for (int i = 0; i < s->naliases; i++) {
    uop_release(s->aliases[i].node);
    uop_release(s->aliases[i].view);
  }
  free(s->aliases);
  free(s->items);
  free(s->bufs);
  memset(s, 0, sizeof *s);
}
