/* Kernel optimisation plans (opt.c): how one kernel's axes are split before
 * lowering. A plan (OptPlan, kernel.h) is data — a short list of (kind, axis,
 * amount) steps — so it can be printed with the kernel, named in its source
 * (and so in the program-cache key), replayed and searched. Lowering
 * (lower.c) follows it and decides nothing about performance itself.
 *
 *   OPT_UPCAST  axis a, amount u: an output axis of size n (u divides n) is
 *               split into n/u blocks, and each invocation / loop iteration
 *               computes the u elements of a block: the kernel body is copied
 *               u times with the axis index block*u + 0..u-1. Copies share
 *               what does not depend on the axis (a load of A's row in a
 *               matmul is made once for the u columns of B), and each keeps
 *               its own accumulator, so two upcast axes make a register tile.
 *
 *   OPT_SPREAD  axis a, amount u: as OPT_UPCAST, u copies of the body, but
 *               copy j takes element j*(n/u) + block of the axis: the copies
 *               lie n/u apart and neighbouring blocks (on a GPU, neighbouring
 *               invocations) take neighbouring elements, so each load of a
 *               warp is one run of memory (coalesced) where UPCAST's are u
 *               elements apart. GPU elementwise kernels use it.
 *               With an UPCAST of the same axis by r (the one axis two steps
 *               may split), the copies are u runs of r neighbours: copy
 *               (j, l) takes element j*(n/u) + block*r + l, so a run is one
 *               4-wide access (vectorize.c) and neighbouring invocations take
 *               neighbouring runs: 16-byte loads, coalesced.
 *
 *   OPT_GROUP   axis a, amount L (grid mode): a reduce axis is split across
 *               the L invocations of a work group, one work group per output
 *               element (of the kernel's output blocks). Invocation l reduces
 *               elements l, l + L, l + 2L, ... (blocked, as any float sum),
 *               stores its partial in work-group memory, and after a barrier
 *               every invocation combines the L partials in order (a float
 *               sum in two levels of 16 through a second array, lower.c;
 *               or, where the device reduces across subgroups, each
 *               subgroup's total, CodegenOpts.subgroup); invocation 0
 *               stores. A long reduce with
 *               few outputs then runs on a work group instead of one
 *               invocation, and an invocation's loops shrink by L. With a
 *               LOCAL of an output axis by P, the work group takes P
 *               neighbouring outputs along that axis, each on L lanes, each
 *               output's additions as without it; the two axes in axis
 *               order, the later one's index fastest: local_id = slot * L +
 *               lane for a LOCAL axis before the grouped one (a GPU's row
 *               reduce as a warp per row), lane * P + slot for one after it
 *               (a column sum, a warp on 32 neighbouring columns). With
 *               UPCAST or SPREAD of output axes, each lane takes the copies'
 *               outputs (each combined through arrays of its own); a LOCAL
 *               then places the axis's blocks.
 *
 *   OPT_LOCAL   axis a, amount L (grid mode): the output axis's blocks (what
 *               its upcast leaves; L divides them) are split into tiles of L
 *               blocks taken by the invocations of one work group: block =
 *               tile * L + the invocation's index along a. The LOCAL axes
 *               make the work group (their amounts multiplied: its size),
 *               the last axis's index fastest, and the other output axes
 *               and the tiles number the work groups. Two LOCAL axes make a
 *               2-D work-group tile (a matmul's 64 x 64 outputs on 16 x 16
 *               invocations of 4 x 4), whose invocations share the rows of
 *               A and the columns of B they read, in the cache and, later,
 *               in work-group memory.
 *
 *   OPT_STAGE   axis a, amount b (grid mode, with LOCAL): the kernel's one
 *               reduced axis walked in blocks of b elements (b: the innermost
 *               loop lowering makes of it) through work-group memory. Each
 *               load that walks the axis gets a block of its elements: per
 *               axis it walks, the b elements of the reduce and the work
 *               group's elements of each output axis (a LOCAL tile, an
 *               upcast block). The invocations fill it together, lanes on
 *               neighbouring elements, between two barriers, and every copy
 *               then reads its element from it: a matmul's 64 x 64 tile
 *               reads each element of A's and B's 64 x b blocks from global
 *               memory once instead of 16 times. The additions and their
 *               order do not change. A load whose block does not fit (4096
 *               elements) or divide among the invocations reads global
 *               memory as before.
 *
 *   OPT_UNROLL  axis a, amount u: a reduce axis of size n (u divides n) is
 *               split into u lanes, lane l taking elements l, l + u, ...,
 *               each with accumulators of its own; after the loops the u
 *               results are combined in lane order. The lanes are copies of
 *               the reduce body at neighbouring elements, so a reduce along
 *               a contiguous axis becomes vector loads and u independent
 *               accumulators (the CPU's vectoriser packs them). With a GROUP
 *               of the same axis by L, grouped lane g's unroll lane l takes
 *               elements (j * L + g) * u + l: each grouped lane runs of u
 *               neighbours, neighbouring lanes neighbouring runs (a GPU's
 *               quad loads, coalesced); its u results combined first, then
 *               the L lanes' as GROUP does.
 *
 *   OPT_CACHE   axis a, amount P (cores mode): the output axis's blocks (what
 *               its upcast leaves; P divides them) are cut into runs of P
 *               blocks. The runs are the kernel's outermost loop (the one
 *               split across cores), the other output axes' loops follow in
 *               order, and a run's P blocks are the innermost output loop.
 *               What the loops inside read along the other axes is then
 *               fetched from memory once per run instead of once per block,
 *               and used P times from the cache: a matmul cached along A's
 *               rows reads each column panel of B for P row tiles in a row,
 *               while the run's rows of A stay in the core's L2 cache.
 *               Where the blocks of a run lie changes; what each computes
 *               and the order of its reduce do not.
 *
 * Upcasting never changes what a kernel computes or the order in which a
 * reduce adds: an optimised kernel gives the same bits as the unoptimised one.
 * Grouping and unrolling change the order of a float sum (not its accuracy
 * class).
 */
#ifndef TVK_CODEGEN_OPT_H
#define TVK_CODEGEN_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "ir/error.h"
#include "ir/uop.h"

/* What the heuristic may assume of the device. */
typedef struct {
  CgMode mode;
  int vector_floats;   /* float32 lanes worth filling on the CPU (its widest SIMD) */
  int vector_regs;     /* CPU: SIMD registers of that width, for a register tile's size */
  int max_local;       /* grid: invocations of one work group at most */
  size_t shared_bytes; /* grid: work-group memory of one work group */
  /* grid: a GPU API device that runs on the CPU (lavapipe): the rules
   * measured there (few grouped reduces: its lanes gather) rather than the
   * GPU ones (coalesced accesses first) */
  bool emulated;
  /* CPU: the cache one core may fill with a kernel's working set (its L2), in
   * bytes; 0: unknown (then nothing is cached by OPT_CACHE) */
  size_t cache_bytes;
} OptTarget;

/* The target of codegen options (NULL: the CPU's defaults), with their
 * defaults filled in: the one place the heuristic's, the search's and
 * lowering's view of the device is made. */
void opt_target(const CodegenOpts *o, OptTarget *t);

/* GROUP amounts: powers of two up to this (the combine is two levels of 16). */
#define OPT_MAX_GROUP 256
/* UNROLL amounts: up to this many lanes. */
#define OPT_MAX_UNROLL 64

/* What every plan kind is, in one table (opt.c): opt_check's common checks,
 * names and the search's candidates read it; a kind's own rules (what its
 * amount must divide, what it combines with) and its lowering stay with it. */
typedef struct {
  const char *name;     /* "UPCAST" */
  uint8_t modes;        /* bit CG_MODE_CORES, bit CG_MODE_GRID: where it applies */
  const char *no_mode;  /* why not, elsewhere ("the device has no work groups") */
  bool reduced;         /* it splits a reduced axis (else an output axis) */
  bool shares_axis;     /* may split an axis another step splits (LOCAL, STAGE, CACHE) */
  bool once;            /* at most one step of the kind per plan */
  uint8_t search_modes; /* where the search offers it (SPREAD: only where it coalesces) */
  int32_t search_lo;    /* the search's amounts: powers of two in [lo, hi]; 0: none */
  int32_t search_hi;    /*   (STAGE's amount is the axis's innermost loop: search.c) */
} OptKindInfo;

/* The facts of kind k (< OPT_KINDS). */
const OptKindInfo *opt_kind_info(int k);

/* The plan the heuristic picks for a verified kernel (kernel_verify's norm and
 * desc) on target t. Always valid (opt_check passes); empty where nothing
 * pays. */
void opt_heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan);

/* Whether `plan` can be applied to the verified kernel (norm, kd) on target
 * t: known kinds, axes in range, no axis split twice (but by one SPREAD and
 * one UPCAST); UPCAST and SPREAD of output axes by amounts >= 1 whose
 * product divides the axis, at most OPT_MAX_COPIES copies; one GROUP, in
 * grid mode, of an axis every reduce of the kernel reduces (reduces not
 * nested, of 32-bit dtypes), by a power of two in [2, OPT_MAX_GROUP] within
 * the work-group size (times a LOCAL's outputs) and its memory (times
 * those and the upcast copies) and at most one LOCAL axis; LOCAL of
 * output axes in grid mode by amounts dividing the axis's blocks, their
 * product within the work-group size; one UNROLL, of an
 * axis every (non-nested) reduce reduces, by an amount from 2 to
 * OPT_MAX_UNROLL dividing it, its lanes counted as copies; one CACHE, in
 * cores mode, of an output axis by an amount from 2 dividing its blocks.
 * TVK_ERR_INVALID_ARG naming the step otherwise. */
tvk_status opt_check(UOp *norm, const KernelDesc *kd, const OptPlan *plan, const OptTarget *t,
                     Error *err);

/* The grouped reduce axis of a checked plan and its lanes; -1 and 1 if none. */
int opt_group(const OptPlan *plan, int64_t *lanes);
/* The unrolled reduce axis of a checked plan and its lanes; -1 and 1 if none. */
int opt_unroll(const OptPlan *plan, int64_t *lanes);

/* The cached output axis of a checked plan and its run (blocks); -1 and 1 if
 * none. */
int opt_cache(const OptPlan *plan, int64_t *run);
/* The staged reduce axis of a checked plan and its block; -1 and 1 if none. */
int opt_stage(const OptPlan *plan, int64_t *block);
/* The LOCAL amount of every axis (1: none) of a checked plan. */
void opt_locals(const OptPlan *plan, int64_t loc[TVK_MAX_DIMS]);
/* The upcast amount of every axis (1: none) of a checked plan, UPCAST and
 * SPREAD alike. */
void opt_upcasts(const KernelDesc *kd, const OptPlan *plan, int64_t up[TVK_MAX_DIMS]);
/* Bit d: axis d is spread (OPT_SPREAD) rather than upcast. */
uint32_t opt_spread_axes(const OptPlan *plan);
/* A spread axis's run: the UPCAST amount of the same axis (1: none, or the
 * axis is not spread). */
int64_t opt_spread_run(const OptPlan *plan, int axis);

/* "UPCAST(1,16) UPCAST(0,4)"; "" for an empty plan. */
void opt_plan_str(const OptPlan *plan, char *buf, size_t n);

/* The kernel's name under a plan: E_ or r_ and the full shape, an upcast
 * axis written <blocks>u<amount> (r_64u4_16u16_1024), a grouped one
 * <per invocation>g<lanes> (r_256g256 for 65536 elements on 256 lanes), an
 * unrolled one <per lane>r<lanes> (r_16_256r16), a cached one
 * <runs>c<run> before its upcast (r_32c8u8_128u16_2048). */
void opt_kernel_name(const KernelDesc *kd, const OptPlan *plan, char *buf, size_t n);

#endif
