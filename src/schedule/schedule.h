/* The scheduler: from the tensor graphs of the tensors to realize, decide which
 * nodes are materialised into buffers and group the rest into kernels, one
 * ScheduleItem per kernel (docs/schedule.md).
 *
 *   schedule_create   realize decisions (decide.c), kernel ASTs (kernelize.c),
 *                     kernel order (toposort by in-degree)
 *   schedule_plan     the memory planner: which new buffers share memory
 *
 * The caller (the frontend's realize) then allocates the new buffers and runs
 * the items (runtime/run.h). The scheduler sees only the tensor graph of
 * ir/graph.h and what SchedCtx gives it: no context, no device.
 *
 * A Schedule lists its buffers once (Schedule.bufs): the buffers the kernels
 * compute (node != NULL) and the buffers that existed before and are read
 * (node == NULL). Items refer to them by index.
 *
 * Ownership: every UOp a Schedule points to is retained by it and released by
 * schedule_free; a BUFFER UOp owns its device buffer, so buffers that nothing
 * else references are freed with the schedule.
 */
#ifndef TVK_SCHEDULE_SCHEDULE_H
#define TVK_SCHEDULE_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/uop.h"

/* Why a node is materialised (printed at TVK_DEBUG >= 2). */
typedef enum {
  WHY_NONE = 0,
  WHY_OUTPUT,          /* a tensor asked for (tvk_realize, tvk_to_host) */
  WHY_CONTIGUOUS,      /* an explicit contiguous */
  WHY_VIEW_BLOCKED,    /* a view over it cannot be pushed through it to the loads */
  WHY_UNSAFE_PAD,      /* a padded view over it, and an op below does not keep f(0) = 0 */
  WHY_REDUCE_NESTED,   /* a reduce inside another reduce's input */
  WHY_REDUCE_SHARED,   /* a reduce read by two kernels: computed once, not twice */
  WHY_REDUCE_MISMATCH, /* a reduce of other axes than the kernel's first reduce */
  WHY_EXPAND,          /* a view expands it: computed once, not once per copy */
  WHY_ASSIGN,          /* tvk_assign: written into the target's own buffer */
  WHY_BUFFER_LIMIT,    /* its kernel's consumer would bind more buffers than the device allows */
  WHY_KERNEL_SIZE,     /* its consumer's kernel would fuse more than SCHED_MAX_KERNEL_OPS nodes */
  WHY_COPY,            /* a COPY: the value in another device's memory */
  WHY_COPY_SOURCE      /* a COPY reads it from memory */
} SchedWhy;

/* The most tensor-graph nodes one kernel fuses: past it a kernel is split,
 * since compile time grows faster than the kernel (decide.c). */
#define SCHED_MAX_KERNEL_OPS 4096

/* "output", "contiguous", ... */
const char *sched_why_name(SchedWhy why);

typedef struct {
  UOp *node; /* retained: the graph node computed into the buffer; NULL for an input that existed */
  UOp *buffer; /* retained BUFFER UOp; NULL for a new output until the caller allocates it */
  ScalarType dtype;
  sint numel; /* a count over size variables for an output of a symbolic shape */
  int ndim;   /* the node's shape (new outputs); the buffer is row-major in it */
  sint shape[TVK_MAX_DIMS];
  SchedWhy why; /* new outputs: why the node is materialised */
  Op culprit;   /* the op the reason is about (the unsafe op, the blocked op), or OP_NONE */
  int reuse;    /* the memory planner: 1 + the index of the buffer whose memory this one
                   takes over (its lifetime ended before this one's began); 0: its own */
  int device;   /* whose memory holds it: an index of the caller's devices (UOp.device) */
} SchedBuf;

typedef struct {
  UOp *ast; /* retained: SINK(STORE ...), the kernel AST of codegen/kernel.h */
  int nbufs;
  int *bufs; /* indices into Schedule.bufs in DEFINE_GLOBAL order: outputs first */
  int nout;  /* the first nout of bufs are written */
  /* The launch values of the AST's float32 DEFINE_VARs: "s<k>" is vals[k],
   * the bits of a tvk_scalar (a VALUE of the tensor graph). Values are not in
   * the AST, so the same computation with new scalars is the same kernel. */
  int nvals;
  uint32_t *vals;
  UOp **val_nodes;    /* retained: the VALUE of each (schedule_cache.c finds them again) */
  bool values_folded; /* more VALUEs than SCHED_MAX_VALUES: the rest are in the AST */
  int device;         /* the device it runs on (the devices of its outputs) */
  /* A copy between devices, not a kernel (ast NULL): bufs[1], on its own
   * device, into bufs[0] (nbufs 2, nout 1), as many bytes as bufs[0] holds
   * (a row-major prefix of bufs[1]). */
  bool copy;
} ScheduleItem;

/* The value index k of a kernel variable named "s<k>" (the name kernelize
 * gives a tvk_scalar's launch value), or -1 for any other name (a size
 * variable's). */
int sched_value_index(const char *name);

/* Most scalar values one kernel takes at launch; further VALUEs become
 * constants of its source (Vulkan passes the values as push constants: 128
 * bytes on most devices, 12 of them the grid). */
enum { SCHED_MAX_VALUES = 16 };

/* A node needing no kernel: a no-op CONTIGUOUS, replaced after the run by
 * `view` (VIEW(y, st)) with y's buffer in place of y. */
typedef struct {
  UOp *node; /* retained */
  UOp *view; /* retained: VIEW(y, st), y a BUFFER or a node this schedule computes */
} SchedAlias;

typedef struct {
  SchedBuf *bufs;
  int nbufs;
  size_t capbufs;
  SchedAlias *aliases;
  int naliases;
  ScheduleItem *items; /* in run order: an item runs after the items writing its inputs */
  int nitems;
} Schedule;

/* What the scheduler needs from its caller. */
typedef struct {
  UCtx *u;                /* the graph's context: kernel ASTs are built in it */
  int max_kernel_buffers; /* the most buffers one kernel may bind on the device; 0: no limit */
  Error *err;             /* where a failure is reported */
  /* Bit d: device d runs its launches in the background (a Vulkan queue).
   * Among the items ready to run, copies to such a device come first, then
   * its kernels, then the other devices' kernels, then the other copies, so
   * that the host's work overlaps the queued work and a copy out of a
   * device waits as late as it can (schedule.c item_rank). */
  uint32_t background_devices;
} SchedCtx;

/* Schedules the graphs under roots[0..n-1] (tensor-graph nodes of sc->u).
 * Nothing is allocated. On error returns the status with sc->err set and *out
 * empty. */
tvk_status schedule_create(const SchedCtx *sc, int n, UOp *const *roots, Schedule *out);
/* Schedules kept by their graph's structure (schedule_cache.c): a graph equal
 * to one scheduled before but for its BUFFERs (same dtype, empty or not) and
 * VALUEs reuses that schedule instead of deciding and building kernels again.
 * One per context (its graphs' UCtx and device limits); NULL until the first
 * schedule_create_cached. */
typedef struct SchedCache SchedCache;
enum { SCHED_CACHE_ENTRIES = 32 }; /* the least recently used goes past this */
/* schedule_create through *cache (made here at the first call): *hit tells
 * whether the schedule came from it. Errors as schedule_create's. */
tvk_status schedule_create_cached(const SchedCtx *sc, SchedCache **cache, int n, UOp *const *roots,
                                  Schedule *out, bool *hit);
/* Releases the kept schedules (their kernel ASTs); NULL ok. */
void sched_cache_free(SchedCache *c);

/* The memory planner (plan.c): new outputs that no tensor will refer to after
 * the run (keep[i] false) and whose lifetimes in the item order do not
 * overlap share memory, matched by dtype and element count as the seed's LRU
 * planner does. On the devices of in_place (bit d: device d's kernels may
 * read and write the same memory through two buffers: C without restrict,
 * not a shader compiler that may assume buffers do not alias), an output
 * may also take over, in place, what its kernel reads for the last time
 * element by element. Sets SchedBuf.reuse; returns how many buffers take
 * over another's memory. */
int schedule_plan(Schedule *s, const bool *keep, uint32_t in_place);
/* The buffer whose memory new output i takes: SchedBuf.reuse followed to a
 * buffer of its own (i itself when it has its own memory). */
int schedule_owner(const Schedule *s, int i);
/* The schedule as text: the kernels with their inputs and outputs, and why each
 * output is materialised. `names` (may be NULL) gives each item's kernel name. */
void schedule_print(FILE *f, const Schedule *s, const char *const *names);
/* Writes "buf 3 float32 (4, 1)" for buffer i into buf. */
void schedule_buf_str(const Schedule *s, int i, char *buf, size_t n);
/* Writes why new output i is materialised ("REDUCE_AXIS: a view over it
 * cannot be pushed through it (REDUCE_AXIS)") into buf. */
void schedule_why_str(const Schedule *s, int i, char *buf, size_t n);
/* The schedule as a Graphviz digraph (schedule_dot.c): each kernel a cluster
 * holding the buffers it writes (bold, with why each is materialised), the
 * buffers that existed before outside, an edge from each buffer to every
 * kernel that reads it. `names` as for schedule_print. */
void schedule_dot(FILE *f, const Schedule *s, const char *const *names);
/* Releases everything the schedule holds and empties it; NULL ok. */
void schedule_free(Schedule *s);

#endif
