/* Code generation for one kernel: kernel AST -> lowered UOps -> linear program
 * -> source text. This header is the contract between the scheduler (which
 * builds kernel ASTs) and codegen. docs/codegen.md walks through an example.
 *
 * ---- The kernel AST (tinygrad 0.10's kernel ASTs) ----
 *
 *   SINK(STORE, ...)                    one or more stores (multi-output kernels)
 *   STORE(DEFINE_GLOBAL, VIEW, value)   write `value` through the view
 *   LOAD(DEFINE_GLOBAL, VIEW)           read through the view; masked (padded)
 *                                       positions read 0 and touch no memory
 *   CONST(VIEW)                         a scalar constant with a shape; 0 outside
 *                                       the view's mask (valid ? c : 0)
 *   CONST                               (no source) a scalar broadcast anywhere
 *   DEFINE_VAR                          an int32 symbolic value (arg_var(name, lo, hi)),
 *                                       passed at launch in vals[] (see vars below)
 *   ALU ops (G_ALU) and CAST            elementwise, with numpy-style broadcasting
 *                                       of size-1 dims
 *   REDUCE_AXIS(x)                      arg_reduce(op, axes), op ADD, MUL or MAX: the
 *                                       result has size 1 at `axes`
 *
 * DEFINE_GLOBAL has a pointer dtype dt_ptr(dt, ADDR_GLOBAL) and arg_int(i), the
 * index of the buffer in the kernel's buffer list; indices must be 0..n-1, each
 * with one element type. VIEW has arg_st(ShapeTracker) and no sources.
 *
 * Shapes: every view in a kernel has the same number of dims. The *full shape*
 * is, per dim, the one size other than 1 that some view has there (or 1). Loads
 * inside a reduce see the full shape; the stores' views all have the *output
 * shape*: the full shape with 1 at every reduced axis. A size-1 dim of any view
 * broadcasts. Two REDUCE_AXIS of one kernel reduce either the same axes or
 * disjoint ones, and a reduce nested in another's input reduces other axes
 * (same-axis nesting needs the inner result materialised: two kernels).
 *
 * ---- The generated kernel ----
 *
 * The C kernel ABI is the CPU device's:
 *   void <name>(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores)
 * bufs[i] is buffer i's data, vals[j] the value of vars[j]. Every core runs the
 * whole kernel; the outermost output loop is split into n_cores contiguous
 * chunks by core_id, so the calls write disjoint parts of the outputs.
 * Indices are int32, or int64 in a kernel where a view reaches 2^31 - 8192
 * elements or more or the output has that many (KernelDesc.index64).
 *
 * Ownership: codegen never keeps or releases the caller's UOps; every UOp it
 * makes is dropped before it returns (uctx_live is back where it was).
 * Errors come back as a status and a message in KernelSource.err; nothing
 * aborts on a bad AST.
 */
#ifndef TVK_CODEGEN_KERNEL_H
#define TVK_CODEGEN_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/error.h"
#include "ir/uop.h"
#include "ir/view.h"
#include "tvk.h"

typedef struct Lang Lang; /* render.h: a language table */

typedef struct {
  uint8_t dtype; /* ScalarType of the elements */
  bool read;     /* loaded from by the kernel */
  bool written;  /* stored to by the kernel */
  /* In KernelSource, where it has rows: R > 0 when index r of the split axis
   * reads and writes only elements [r R, r R + R) of the buffer; else 0. */
  int64_t band;
} KernelBuf;

typedef struct {
  char *name; /* as in arg_var */
  int64_t lo, hi;
} KernelVar;

/* An optimisation plan: steps applied to the kernel's axes before lowering
 * (opt.h says what each kind does). */
/* (new kinds go last: stored plans keep their numbers) */
typedef enum {
  OPT_UPCAST,
  OPT_GROUP,
  OPT_UNROLL,
  OPT_SPREAD,
  OPT_LOCAL,
  OPT_STAGE,
  OPT_CACHE,
  OPT_KINDS
} OptKind;

typedef struct {
  uint8_t kind; /* OptKind */
  uint8_t axis; /* a dim of the kernel's full shape */
  int32_t amount;
} OptStep;

#define OPT_MAX_STEPS 8
/* Copies of the kernel body one plan may make (the upcast amounts multiplied):
 * more would only spill registers and grow the source. */
#define OPT_MAX_COPIES 256

typedef struct {
  int n;
  OptStep step[OPT_MAX_STEPS];
} OptPlan;

typedef struct {
  char *name; /* kernel function name (a C identifier) */
  char *src;  /* the complete source text */
  char *uops; /* the linear program, one UOp a line (only if asked for) */
  int nbufs;
  KernelBuf *bufs; /* bufs[i]: DEFINE_GLOBAL arg i */
  int nvars;
  KernelVar *vars; /* in vals[] order: sorted by name */
  int ndim;
  int64_t full_shape[TVK_MAX_DIMS];
  int64_t out_shape[TVK_MAX_DIMS];
  /* The launch (LaunchDims): work-group count and size per dimension; in
   * cores mode the split axis's extent and the work per index of it
   * (CgLaunch, codegen.h). */
  int64_t global[3], local[3];
  /* Symbolic sizes: global[0] (grid mode: the work groups; cores mode: the
   * extent of the axis split across cores) as an expression of the
   * variables, which kernel_groups evaluates for a launch; global[0] is its
   * largest value. 0 otherwise. */
  sint groups;
  /* Cores mode: the extent of the full-shape axis split across cores when
   * it is split alone in whole blocks (CgLaunch.row_axis), for running
   * kernels part by part (DeviceOps.launch_parts); the blocks are
   * global[0], each rows / global[0] indices of the axis. 0: not such a
   * split (and in grid mode, and with symbolic sizes). bufs[i].band says
   * what one index of it touches. */
  int64_t rows;
  OptPlan plan; /* the plan the kernel was made with */
  /* What one launch does (estimate.c): arithmetic ops, and bytes of global
   * memory read plus written; for GFLOP/s and GB/s in profiles and traces. */
  double flops, bytes;
  Error err; /* the status and message when a call returned an error; empty otherwise */
} KernelSource;

/* How a kernel's work is spread over parallel invocations (lower.c). */
typedef enum {
  CG_MODE_CORES = 0, /* CPU: the outermost output loop is split by core_id / n_cores */
  CG_MODE_GRID,      /* GPU: one invocation per output element, on a 1-D grid of work
                      * groups (SPECIALs group_id and local_id) */
} CgMode;

typedef struct {
  const Lang *lang; /* NULL: C (lang_c) */
  bool want_uops;   /* fill KernelSource.uops (TVK_DEBUG >= 4) */
  CgMode mode;
  int local_size; /* GRID: invocations per work group (0: 64); fewer for small kernels */
  /* The plan: `plan` when not NULL (checked; a bad one is TVK_ERR_INVALID_ARG),
   * else none when noopt, else the heuristic's for this target. */
  const OptPlan *plan;
  bool noopt;
  int vector_floats;   /* CPU: float32 lanes of its widest SIMD (0: 8) */
  int vector_regs;     /* CPU: SIMD registers of that width (0: 16) */
  int max_local;       /* GRID: the most invocations of one work group (0: local_size) */
  size_t shared_bytes; /* GRID: work-group memory of one work group (0: none) */
  bool fma;            /* a reduce's float acc + a * b becomes MULACC (legalize.c) */
  bool emulated;       /* GRID: the device runs on the CPU (DeviceLimits.emulated): its rules */
  size_t cache_bytes;  /* CPU: a core's L2 cache (DeviceLimits.cache_bytes; 0: unknown) */
  /* GRID: the subgroup size when a GROUP's combine may reduce across
   * subgroups (DeviceLimits.subgroup_reduce); 0: through memory only */
  int subgroup;
} CodegenOpts;

/* Generates the kernel for `ast` (a SINK as above) in C. `name` is the function
 * name, or NULL for a name made from the shape: E_<full shape> for elementwise
 * kernels, r_<full shape> for kernels with a reduce (E_4_1000, r_64_1024); the
 * same AST always gives the same source, so on-disk caches hit.
 * On success fills *out (free with kernel_source_free) and returns TVK_OK. On
 * error returns TVK_ERR_INVALID_ARG (a malformed AST, with what was wrong and
 * where), TVK_ERR_DTYPE (a dtype or op the language cannot express),
 * TVK_ERR_OUT_OF_MEMORY or TVK_ERR_INTERNAL; out->err says which, and every
 * other field of *out is empty. */
tvk_status codegen_kernel(UOp *ast, const char *name, KernelSource *out);
/* The same with options (another language table, the UOp listing). opts may be NULL. */
tvk_status codegen_kernel_opts(UOp *ast, const char *name, const CodegenOpts *opts,
                               KernelSource *out);
/* Frees what *ks holds and empties it; NULL ok. */
void kernel_source_free(KernelSource *ks);
/* global[0] for a launch with these vals (vars' order): KernelSource.groups
 * evaluated where the kernel has it (at most global[0]), else global[0]. */
int64_t kernel_groups(const KernelSource *ks, const int32_t *vals);

#endif
