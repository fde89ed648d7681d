/* The codegen passes, in pipeline order (pipeline.c runs them):
 *
 *   kernel_verify      check the AST, infer shapes, drop size-1 reduce axes
 *   lower_kernel       views -> index math, axes -> RANGE, reduce -> accumulator
 *   uop_simplify       symbolic.h: fold and simplify the index and value math
 *   legalize_dtypes    math on storage-only dtypes (float16 in C) goes through
 *                      the language's compute type
 *   linearize          order the graph into RANGE ... ENDRANGE blocks
 *   render_program     render.h: the linear program -> source text
 *
 * ---- The lowered graph (what lower_kernel returns) ----
 *
 *   SINK(STORE, ...)
 *   STORE(INDEX, value [, gate])      `if (gate) buf[idx] = value`
 *   LOAD(INDEX [, alt, gate])         `gate ? buf[idx] : alt` (memory untouched when
 *                                     the gate is false)
 *   INDEX(DEFINE_GLOBAL, idx)         the place buf[idx]; dtype: the buffer pointer
 *   RANGE(end) arg_int(axis)          a loop over [0, end); int32
 *   SPECIAL arg_var("core_id"|"n_cores", lo, hi)   which core runs this call, of how many
 *   SPECIAL arg_var("group_id"|"local_id", lo, hi) grid mode: the work group (its
 *                                     linear id) and the invocation in it
 *   DEFINE_ACC(identity, RANGE...)    arg_int(n): accumulator n, reset to identity
 *                                     before the loops over its RANGEs
 *   ASSIGN(acc, value)                acc = value inside those loops; users of the
 *                                     ASSIGN read the final value after the loops
 *   DEFINE_LOCAL arg_ints(id, n)      grid mode: work-group memory of n elements
 *   STORE(INDEX(local, i), value)     into it (no ranges, no gate)
 *   BARRIER(STORE...)                 every invocation of the group has stored
 *   LOAD(INDEX(local, i), BARRIER)    reads after the barrier
 *   ALU ops, CAST, CONST, DEFINE_VAR  as in the AST
 *
 * Loop nesting is implied by the graph (linearize.c): RANGEs that no
 * accumulator owns ("output" ranges) nest in order of their axis, outermost
 * first, and every STORE sits inside all of them; an accumulator's RANGEs nest,
 * in their DEFINE_ACC order, inside the outermost output range (the parallel
 * one) and inside whatever other ranges its ASSIGN depends on. Every other UOp
 * goes in the innermost loop whose ranges it depends on, so loop-invariant code
 * is hoisted; a user of an ASSIGN depends on the loops that enclose its
 * accumulator's loops (the value is there once they close), not on those loops.
 */
#ifndef TVK_CODEGEN_CODEGEN_H
#define TVK_CODEGEN_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/kernel.h"
#include "ir/uop.h"
#include "ir/view.h"
#include "tvk.h"

/* Every pass reports into an Error (ir/error.h) with err_first: the first
 * failure is the precise one, later "out of memory" or "failed" keep it. */

/* ---- kernel_verify.c ---- */

#define CG_MAX_BUFS 256 /* buffers of one kernel */
#define CG_MAX_VARS 64  /* DEFINE_VARs of one kernel */

/* What kernel_verify finds out about a kernel. */
typedef struct {
  int ndim;
  int64_t full[TVK_MAX_DIMS]; /* the full shape (loads inside reduces) */
  int64_t out[TVK_MAX_DIMS];  /* the output shape: 1 at reduced axes */
  uint32_t reduce_axes;       /* bit d: some REDUCE_AXIS reduces axis d */
  int nbufs;
  KernelBuf bufs[CG_MAX_BUFS]; /* by DEFINE_GLOBAL index */
  int nvars;
  UOp *vars[CG_MAX_VARS]; /* the AST's DEFINE_VARs sorted by name: the vals[] order */
  bool index64; /* some view or the output needs indices past int32: index math in int64 */
  /* Symbolic sizes (views over sint expressions, ir/sint.h): bit d of
   * sym_axes says axis d has one, sym[d] is its expression (0 elsewhere),
   * and full[d] / out[d] hold its largest value, a bound for the decisions
   * that only size things. Loops take sym[d] (lowering); no plan step
   * touches such an axis. */
  uint32_t sym_axes;
  sint sym[TVK_MAX_DIMS];
} KernelDesc;

/* Checks `ast` against the contract of kernel.h and describes it. On
 * success *norm is the AST with every REDUCE_AXIS reducing only axes of size
 * other than 1 in its input (sorted; a reduce left with none is replaced by its
 * input), autoreleased. */
tvk_status kernel_verify(UOp *ast, UOp **norm, KernelDesc *ks, Error *err);
/* The product of ks->full over the axes in the mask (bit d: axis d): loop
 * iterations, 0 when an axis is empty, INT64_MAX past it. */
int64_t kernel_iterations(const KernelDesc *ks, uint32_t axes);
/* E_<full shape> or r_<full shape> into buf (n bytes). */
void kernel_default_name(const KernelDesc *ks, char *buf, size_t n);
/* A symbolic size spelt for a kernel name (n*2+1 -> n_2_1) into buf (n
 * bytes); returns its length. */
size_t kernel_sym_name(sint size, char *buf, size_t n);

/* ---- estimate.c ---- */

/* One launch's arithmetic ops and bytes of global memory, counted on the
 * verified AST (estimate.c says how). false (and zeros) on out of memory. */
bool kernel_estimate(UOp *norm, const KernelDesc *kd, double *flops, double *bytes);

/* ---- bands.c ---- */

/* For each buffer of the kernel, band[b]: R > 0 when every load and store of
 * b reaches, at index r of full-shape axis `axis`, only elements
 * [r R, r R + R) (one view of whole numbers; bands.c), else 0. All 0 for
 * axis -1 (and when out of memory). band has kd->nbufs entries. */
void kernel_bands(UOp *norm, const KernelDesc *kd, int axis, int64_t *band);

/* ---- view_index.c ---- */

/* A view's index arithmetic: given one index UOp per visible dim of st (of the
 * index dtype idt: int32, or int64 where a kernel needs it), the (index,
 * valid) UOps of the element they address, simplified with uop_simplify
 * (autoreleased, in ctx). index is of idt, valid is bool. false on out of
 * memory. */
bool st_to_indexed_uops(const ShapeTracker *st, UCtx *ctx, DType idt, UOp *const *idxs, UOp **index,
                        UOp **valid);

/* ---- lower.c ---- */

/* Largest core count the lowered code is correct for (the bounds of the
 * core_id and n_cores SPECIALs). */
#define CG_MAX_CORES 4096
/* Cores mode: an outermost output axis of fewer blocks than this is split
 * across cores together with the next output axis (lower.c). */
#define CG_SPLIT_MERGE 64

/* Float sums accumulate in blocks (lower.c): a reduce axis longer than
 * CG_SUM_BLOCK is split into nested loops ("digits") of at most that many
 * iterations (factors of the length where it has them), and the loops are
 * grouped, innermost first, into levels of at most CG_SUM_BLOCK iterations, each with an
 * accumulator of its own that is added to the next level's when its loops close. A sum of N float32
 * values then rounds like a few short sums, not one of N terms: 2^25 ones sum
 * exactly and same-sign data keeps a few 1e-7 relative accuracy at any
 * length. Exact reduces (integers, max) keep one accumulator. Both lowerings
 * add in the same order, so sums agree bit for bit across devices. */
#define CG_SUM_BLOCK 16
#define CG_MAX_DIGITS 16 /* loops one reduce axis may be split into (16^16 = 2^64) */

/* Cores mode: a register tile whose vector lanes run along a symbolic axis
 * is made twice (lower.c, "peeling"): its full blocks without masks, then
 * the last block, masked. The two loop nests are siblings: every RANGE of
 * copy v (1 or 2) has id + v * CG_RANGE_VERSION, and the linearizer nests a
 * range in another only when the other's copy is 0 (shared) or the same. */
#define CG_RANGE_VERSION 10000

/* The launch of a kernel: work groups and their size per dimension (grid
 * mode); in cores mode global[0] is the extent of the axis split across cores
 * (at most that many have work), global[1] the kernel's loop iterations per
 * index of it (its size as work, saturating), the rest 1. */
typedef struct {
  int64_t global[3], local[3];
  /* Symbolic sizes: global[0] as an expression of the kernel's variables
   * (grid mode: the work groups a launch needs; cores mode: the split axis's
   * extent), global[0] being its largest value; 0 where global is the launch. */
  sint groups;
  /* Cores mode: the full-shape axis split across cores when it is split
   * alone, as whole blocks of its upcast (no merged pair, CACHE or symbolic
   * size): core c of n runs blocks [c ceil(B/n), ...) of its B = global[0]
   * blocks. -1 otherwise (and in grid mode). */
  int row_axis;
} CgLaunch;

/* Lowers a verified AST (kernel_verify's *norm) to the graph described above,
 * following `plan` (opt.h), which must have passed opt_check for the mode.
 * The outermost output axis of size other than 1 is split across cores (with
 * no such axis, a one-iteration loop that only core 0 runs). Fills *launch.
 * Autoreleased. */
tvk_status lower_kernel(UOp *ast, const KernelDesc *ks, const OptPlan *plan, UOp **out,
                        CgLaunch *launch, Error *err);

/* Grid mode: the loop iterations one invocation may run in its reduces (their
 * trips multiplied): lavapipe ends an invocation's loops after 65535
 * iterations in all. The frontend splits longer reduces into kernels that fit
 * (ops_reduce.c, SPLIT_CHUNK); lowering refuses a kernel over it, never cuts
 * it short. */
#define CG_GRID_LOOP_BUDGET 16384

/* The loop iterations a reduce axis of n elements costs one invocation at
 * most: n, or more where a float sum's digits (CG_SUM_BLOCK) cannot factor
 * n and cover a little past it (16305 = 3 * 5 * 1087 loops 17280 times). The
 * frontend's split sizes its parts with it. */
int64_t cg_reduce_trips(int64_t n);
/* The trips of the innermost loop lowering makes of a reduce axis of n
 * elements (a float sum's first digit, else the axis), or 0 when its loops
 * cover more than n (the index is clamped): OPT_STAGE's block. */
int64_t cg_reduce_inner(int64_t n, bool sum);

/* Grid mode (CG_MODE_GRID): the output elements, numbered row-major over the
 * output axes, map to invocations gid = group_id * local + local_id of a 1-D
 * grid, local = min(local_size, elements) (at least 1), one element each. The
 * axes are the digits of min(gid, elements - 1), so every index is in bounds
 * even in code hoisted out of the bounds check; the bounds check, when the
 * last work group runs past the elements, is the one output RANGE, of (gid <
 * elements ? 1 : 0) iterations (axis id ndim), which holds the stores and the
 * reduce loops. subgroup > 1: a GROUP's combine may reduce across subgroups
 * of that many invocations (SUBGROUP_REDUCE; CodegenOpts.subgroup). Fills
 * *launch. Autoreleased. */
tvk_status lower_kernel_grid(UOp *ast, const KernelDesc *ks, const OptPlan *plan, int local_size,
                             int subgroup, UOp **out, CgLaunch *launch, Error *err);

/* ---- legalize.c ---- */

/* Rewrites ALU ops and casts on the dtypes `lang` only stores (float16,
 * bfloat16 in C) so their math is done in lang's compute type, rounding back
 * after each op, which matches the IR's per-op rounding; spells integer
 * x + y * -1 as x - y; and with fma, makes a reduce's float acc + a * b a
 * MULACC (fused where the target can). Autoreleased. */
tvk_status legalize_dtypes(UOp *sink, const Lang *lang, bool fma, UOp **out, Error *err);

/* ---- vectorize.c ---- */

/* Where `lang` has 4-vectors (Lang.vec_type), turns aligned quads of scalar
 * loads of one read-only buffer into a 4-wide LOAD and GEPs of its lanes,
 * and quads of ungated stores to a write-only buffer into one STORE of a
 * VECTORIZE (vectorize.c says when). *out is sink itself where nothing
 * changes. Autoreleased. */
tvk_status vectorize_memory(UOp *sink, const Lang *lang, const KernelDesc *kd, UOp **out,
                            Error *err);
/* Where `lang` has 4-vectors: an accumulator's innermost loop of a constant
 * trip that is a multiple of 4, along which some global load reads
 * neighbouring, aligned elements, is unrolled by 4 in order (loop r over T
 * becomes r' over T/4 with the update applied for 4r', 4r'+1, 4r'+2,
 * 4r'+3, each on the value the previous left): the same additions in the
 * same order, and vectorize_memory then sees the loads' quads (a matmul's
 * row of A along k). Runs before legalize_dtypes, which makes the chain's
 * multiply-adds MULACCs. Not for an emulated device (CodegenOpts.emulated:
 * lavapipe's matmul 2048 ran slower unrolled). *out is sink where nothing
 * changes. Autoreleased. */
tvk_status unroll_for_quads(UOp *sink, const Lang *lang, const KernelDesc *kd, UOp **out,
                            Error *err);

/* ---- linearize.c ---- */

typedef struct {
  UOp **uops; /* retained; in program order, ENDRANGE after each loop body */
  size_t n;
} LinearProgram;

/* Orders the lowered graph under sink (see above). Definitions (DEFINE_GLOBAL,
 * DEFINE_VAR, SPECIAL, CONST) come first; SINK itself is not in the list. */
tvk_status linearize(UOp *sink, LinearProgram *out, Error *err);
void linear_free(LinearProgram *lp); /* releases the UOps; NULL ok */
/* One line per UOp: "  12 RANGE  int32  [3]  2", malloc'd (caller frees). */
char *linear_dump(const LinearProgram *lp);

#endif
