/* Running a schedule on a device: code generation, the compiled-program cache,
 * launches, stats and the TVK_DEBUG output (docs/runtime.md).
 *
 * The runtime sees the schedule, the device and what a Runner gives it; the
 * frontend, which owns the buffers, says which device buffer each schedule
 * buffer is. */
#ifndef TVK_RUNTIME_RUN_H
#define TVK_RUNTIME_RUN_H

#include "codegen/kernel.h"
#include "ir/error.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tvk.h"

/* Compiled programs by source text, for one device (the device adds its
 * on-disk cache below it), and the kernels already prepared, by AST. */
typedef struct ProgCache ProgCache;

/* What one launch of a program does (KernelSource.flops / .bytes) and the
 * plan it was made with, as text (opt_plan_str; "" for none). */
typedef struct {
  double flops, bytes;
  char plan[96];
} ProgCost;
/* The cost of prog, a program of the cache: true and *out, or false for a
 * program the cache does not hold (a BEAM candidate). c NULL ok. */
bool progcache_cost(const ProgCache *c, const DevProgram *prog, ProgCost *out);

/* Frees every program (through dev) and the cache; NULL ok. */
void progcache_free(ProgCache *c, Device *dev);
/* Forgets the kernels prepared from ASTs (and their references to the ASTs);
 * the programs stay, found again by source. NULL ok. */
void progcache_forget_kernels(ProgCache *c);

typedef struct {
  Device *dev;          /* the device of item device 0 */
  ProgCache **programs; /* the cache of each device, made at its first compile (NULL before) */
  /* The devices the items name (ScheduleItem.device, SchedBuf.device):
   * devs[0..ndevs); NULL: only dev. */
  Device *const *devs;
  int ndevs;
  int debug;             /* TVK_DEBUG level */
  bool progress;         /* TVK_PROGRESS: report long batches of compiles as they go */
  const char *graph;     /* TVK_GRAPH: write each schedule as DOT there ("%d": its number) */
  bool noopt;            /* TVK_NOOPT: kernels without optimisation plans */
  bool gpu_rules;        /* TVK_GPU_RULES: GPU plans on an emulated device too */
  bool no_chains;        /* TVK_NO_CHAINS: every kernel launched by itself (chain.h) */
  int beam;              /* TVK_BEAM: > 0, plans are searched on the device (search.h) */
  const char *cache_dir; /* the kernel cache directory asked for (NULL: the default) */
  bool no_disk;          /* no cache directory at all: searched plans are not stored */
  bool cache_readonly;   /* the cache is only read: nothing is stored in it */
  tvk_stats *stats;      /* kernels compiled, cache hits, kernels run, schedules are counted */
  const LogSink *log;    /* where TVK_DEBUG output goes (NULL: stderr) */
  struct Trace *trace;   /* TVK_TRACE: codegen, compile and wait spans go there (NULL: none) */
  /* Called after each launch that succeeded, with the item's index in the
   * schedule and what was launched (tvk_jit's capture): the kernel (its
   * variables in vals order, its grid over size variables), its values and
   * geometry. NULL: none. */
  void (*on_launch)(void *user, const Schedule *s, int item, const KernelSource *ks,
                    DevProgram *prog, const int32_t *vals, int nvals, const LaunchDims *dims);
  /* Called after each copy between devices that succeeded (item s->items[item]). */
  void (*on_copy)(void *user, const Schedule *s, int item);
  /* Called after items first..first+n-1 ran as one chain in `parts` parts
   * (chain.h), after on_launch of each. NULL: none. */
  void (*on_chain)(void *user, const Schedule *s, int first, int n, int parts);
  void *launch_user;
  /* The values of the size variables (tvk_size_var) by name: a kernel over a
   * symbolic size takes its variable's value at launch. */
  int nsizes;
  const char *const *size_names;
  const int64_t *size_vals;
  Error *err; /* where a failure is reported */
} Runner;

/* Generates, compiles (through the program caches) and launches every item
 * of s in order, each on its device, copies between devices (through host
 * memory), then waits for the devices. bufs[i] is the device buffer of
 * s->bufs[i] (NULL only for a buffer of no elements). On error returns the
 * status with r->err naming the kernel; kernels before the failing one have
 * run. */
tvk_status run_schedule(const Runner *r, const Schedule *s, DevBuffer *const *bufs);

/* nbytes of `from` (on src) into `to` (on dst), from offset 0: both devices
 * waited for first, then straight out of or into a CPU buffer where one is
 * (DeviceOps.host_ptr), else through host memory. On error the status with
 * err naming both devices. */
tvk_status run_copy_bytes(Device *src, DevBuffer *from, Device *dst, DevBuffer *to, size_t nbytes,
                          Error *err);

#endif
