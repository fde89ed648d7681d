/* The scheduler's view of a tensor graph: its nodes in topological order, a
 * map from node to index, and per-node facts the passes fill in. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/vec.h"
#include "schedule/schedule_internal.h"

/* ---------------------------------------------------------------- SStack */

bool sstack_push(SStack *s, int64_t idx, int state) {
  return VEC_PUSH(s->v, s->n, s->cap, idx << 1 | (state & 1));
}

void sstack_free(SStack *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- the graph */

/* SchedNode.device of every node, readers first: a node's own device, else
 * (constants and what is computed from them alone) the device of what reads
 * it, so that a kernel computing it runs where its result is needed. */
static void assign_devices(SchedGraph *g) {
  for (size_t i = 0; i < g->n; i++) g->info[i].device = UOP_DEVICE_NONE;
  for (size_t i = g->n; i-- > 0;) {
    UOp *u = g->topo[i];
    SchedNode *in = &g->info[i];
    if (u->device >= 0) in->device = u->device;
    if (in->device < 0) in->device = 0; /* read by nothing on a device: the first */
    for (uint32_t k = 0; k < u->nsrc; k++) {
      if (u->src[k]->device != UOP_DEVICE_NONE) continue;
      SchedNode *s = &g->info[sched_index(g, u->src[k])];
      if (s->device == UOP_DEVICE_NONE)
        s->device = in->device;
      else if (s->device != in->device)
        s->device_clash = true;
    }
  }
}

tvk_status sched_graph_init(SchedGraph *g, const SchedCtx *sc, int n, UOp *const *roots) {
  memset(g, 0, sizeof *g);
  g->sc = sc;
  UOp *sink = uop_sink(sc->u, n, roots);
  size_t cnt = 0;
  g->topo = sink ? uop_toposort(sink, &cnt) : NULL;
  if (!g->topo)
    return err_set(sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory collecting the graph");
  g->n = cnt - 1; /* the SINK is last: not a node of the graph */
  g->info = calloc(g->n ? g->n : 1, sizeof *g->info);
  bool ok = g->info && ptrmap_init(&g->index, g->n);
  for (size_t i = 0; ok && i < g->n; i++) {
    g->info[i].owner = -1;
    g->info[i].buf = -1;
    g->info[i].kred = -1;
    g->info[i].red = -1;
    g->info[i].parent = -1;
    g->info[i].group = (int32_t)i;
    ok = ptrmap_put(&g->index, g->topo[i], (int64_t)i);
  }
  for (size_t i = 0; ok && i < g->n; i++)
    for (uint32_t k = 0; k < g->topo[i]->nsrc; k++) {
      SchedNode *s = &g->info[sched_index(g, g->topo[i]->src[k])];
      s->nparents++, s->parent = (int32_t)i;
    }
  if (!ok) {
    sched_graph_free(g);
    return err_set(sc->err, TVK_ERR_OUT_OF_MEMORY, "schedule: out of memory indexing the graph");
  }
  assign_devices(g);
  return TVK_OK;
}

void sched_graph_free(SchedGraph *g) {
  free(g->topo);
  free(g->info);
  ptrmap_free(&g->index);
  ptrmap_free(&g->inputs);
  memset(g, 0, sizeof *g);
}

bool sched_mark(SchedGraph *g, int64_t i, SchedWhy why, Op culprit) {
  if (g->info[i].why != WHY_NONE) return false;
  g->info[i].why = why;
  g->info[i].culprit = culprit;
  return true;
}

/* The most buffers one kernel may bind: the device's limit, and the kernel
 * AST's (codegen's CG_MAX_BUFS) on every device. */
int sched_buffer_limit(const SchedGraph *g) {
  int lim = g->sc->max_kernel_buffers;
  return lim > 0 && lim < CG_MAX_BUFS ? lim : CG_MAX_BUFS;
}

/* ---------------------------------------------------------------- helpers */
