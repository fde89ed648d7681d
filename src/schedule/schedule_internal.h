/* Shared state of the scheduler's passes (decide.c, kernelize.c, schedule.c).
 * Not part of the scheduler's interface: see schedule.h. */
#ifndef TVK_SCHEDULE_SCHEDULE_INTERNAL_H
#define TVK_SCHEDULE_SCHEDULE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ptrmap.h"
#include "schedule/schedule.h"

/* What the passes know about one node of the graph. */
typedef struct {
  SchedWhy why;      /* != WHY_NONE: the node is materialised into a buffer */
  Op culprit;        /* see SchedBuf.culprit */
  int32_t owner;     /* a reduce: the kernel (root index) it is fused into; -1 none */
  uint32_t seen[2];  /* walk stamps, one per walk state */
  int32_t buf;       /* index into Schedule.bufs of its output; -1 */
  bool alias;        /* a CONTIGUOUS that is a no-op (sched_contiguous_noop): never materialised */
  bool mem;          /* its value reads memory or a reduce (not only constants and aranges) */
  int32_t kred;      /* a materialised node whose kernel runs in the shape of a reduce it
                        reaches through a reshape (decide.c): that reduce's index; -1 */
  bool kperm;        /* with kred: the node is CONTIGUOUS(VIEW(reduce, a permutation)), stored
                        through the inverse permutation (the seed's contiguous child) */
  int32_t nparents;  /* how many nodes of the graph use it as a source */
  int32_t parent;    /* one of them (the last in topo order); -1 when none */
  uint32_t direct;   /* walk stamp: reached from the kernel's root through elementwise ops only */
  int32_t group;     /* a materialised node: the first (lowest index) node of the multi-output
                        kernel it is stored by; itself when alone (decide.c) */
  int32_t red;       /* a materialised node: the first reduce its kernel fuses; -1 none */
  int16_t device;    /* the device a kernel computing it runs on: UOp.device, or for a
                        node of no device that of what reads it (0 when nothing does) */
  bool device_clash; /* a node of no device read on two devices */
  int32_t level;     /* the longest chain of kernels its value depends on (its own included
                        when materialised): a kernel depends only on kernels of lower level */
} SchedNode;

/* A growable stack of (node index, state) for the iterative walks: graphs can
 * be deeper than the C stack allows recursion. */
typedef struct {
  int64_t *v;
  size_t n, cap;
} SStack;

bool sstack_push(SStack *s, int64_t idx, int state);
static inline bool sstack_pop(SStack *s, int64_t *idx, int *state) {
  if (!s->n) return false;
  int64_t e = s->v[--s->n];
  *idx = e >> 1;
  *state = (int)(e & 1);
  return true;
}
void sstack_free(SStack *s);

/* The graph being scheduled: every node reachable from the roots, sources first. */
typedef struct {
  const SchedCtx *sc;
  UOp **topo; /* malloc'd; nodes are kept alive by the roots */
  size_t n;
  PtrMap index; /* node -> index in topo */
  SchedNode *info;
  uint32_t stamp;
  PtrMap inputs; /* a BUFFER UOp read by some kernel -> its index in Schedule.bufs */
} SchedGraph;

static inline int64_t sched_index(const SchedGraph *g, const UOp *u) {
  return ptrmap_get(&g->index, u);
}
static inline bool sched_realized(const SchedGraph *g, int64_t i) {
  return g->info[i].why != WHY_NONE;
}
/* CONTIGUOUS(VIEW(y, st)) where st reads all of y in row-major order (a
 * reshape): once y is in memory, it is row-major already, so the CONTIGUOUS
 * needs no kernel of its own; y is materialised instead and the CONTIGUOUS
 * becomes a view of y's buffer (the seed's contiguous() of a contiguous view). */
bool sched_contiguous_noop(const UOp *u);
static inline bool sched_alias(const SchedGraph *g, int64_t i) { return g->info[i].alias; }
/* Marks node i as materialised; false if it already was. */
bool sched_mark(SchedGraph *g, int64_t i, SchedWhy why, Op culprit);
/* A fresh walk: no node is seen. */
static inline uint32_t sched_new_walk(SchedGraph *g) { return ++g->stamp; }
/* True the first time (i, state) is visited in the current walk. */
static inline bool sched_visit(SchedGraph *g, int64_t i, int state) {
  if (g->info[i].seen[state] == g->stamp) return false;
  g->info[i].seen[state] = g->stamp;
  return true;
}

tvk_status sched_graph_init(SchedGraph *g, const SchedCtx *sc, int n, UOp *const *roots);
void sched_graph_free(SchedGraph *g);

/* ---- decide.c: which nodes are materialised ---- */
tvk_status sched_decide(SchedGraph *g, int n, UOp *const *roots);
/* VIEW(x, st) where st reorders x's dims (one unmasked view reading all of x,
 * each dim of size > 1 one of x's with its row-major stride; size-1 dims may
 * come and go): out_strides[d] is the stride of x's dim d in a row-major
 * buffer of st's shape, so a view of that buffer in x's shape with these
 * strides is st's inverse. False when st is anything else. */
bool sched_view_inverse(UOp *v, int64_t *out_strides);
/* VIEW(x, st) that changes nothing: x's shape, row-major, no mask. */
bool sched_view_is_identity(const UOp *v);
/* Two reduces can share a kernel: the same axes of the same shape. */
bool sched_same_reduce(UOp *a, UOp *b);

/* The node a COPY reads from memory: its source, through a no-op CONTIGUOUS
 * and a VIEW of a row-major prefix; NULL for a source of no device (the COPY
 * is then a kernel computing it on the COPY's device). */
UOp *sched_copy_source(const UOp *copy);
/* A COPY that is a copy item (it has a source in memory), not a kernel. */
static inline bool sched_is_copy(const UOp *u) {
  return u->op == OP_COPY && sched_copy_source(u) != NULL;
}

/* ---- graph.c ---- */
/* The most buffers one kernel may bind: the device's limit and codegen's. */
int sched_buffer_limit(const SchedGraph *g);

/* ---- group.c: multi-output kernels ---- */
/* The kernel node i is stored by: SchedNode.group, followed to its end. */
int64_t sched_group(SchedGraph *g, int64_t i);
/* SchedNode.level of every node. */
void sched_levels(SchedGraph *g);
/* Makes the groups of a and b one kernel if they can be (same kernel shape and
 * reduce, independent, assigns that read their targets safely, within the
 * buffer limit); true if they are. */
bool sched_try_group(SchedGraph *g, int64_t a, int64_t b);
/* Groups materialised siblings (after the passes). */
void sched_group_siblings(SchedGraph *g);
/* Groups an assign with the assigns whose results it reads at its own
 * element (after the siblings): an optimiser's state and parameter updates. */
void sched_group_chains(SchedGraph *g);

/* ---- kernelize.c: the kernel AST of one materialised node ---- */
/* Builds the AST computing the materialised nodes roots[0..nroots-1] (indices of g,
 * one multi-output group) into their buffers, filling item (ast retained, bufs
 * in DEFINE_GLOBAL order: the outputs in the order given, then the inputs). */
tvk_status sched_kernelize(SchedGraph *g, Schedule *s, const int64_t *roots, int nroots,
                           ScheduleItem *item);

/* The copy item of materialised COPY node `copy` (sched_is_copy), filling
 * item (bufs: its output, then the buffer its source is in). */
tvk_status sched_copy_item(SchedGraph *g, Schedule *s, int64_t copy, ScheduleItem *item);

/* Adds buffer entries to s; returns the index or -1 on out of memory. */
int sched_add_buf(Schedule *s, const SchedBuf *b);

#endif
