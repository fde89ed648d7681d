/* Lowering: kernel AST -> UOps with explicit loops (codegen.h). One graph_rewrite
 * pass turns loads, stores, shaped constants and reduces into index math over
 * the kernel's RANGEs, the way the seed's lowerer does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/opt.h"
#include "ir/pattern.h"
#include "ir/sint_expr.h"
#include "ir/symbolic.h"

/* The most reduce loops one kernel has (digits of every reduced axis). */
#define MAX_LOOPS (CG_MAX_DIGITS * TVK_MAX_DIMS)

typedef struct {
  UCtx *ctx;
  const KernelDesc *ks;
  UOp *axis[TVK_MAX_DIMS]; /* the index of each axis: a RANGE, split start + RANGE, or 0 */
  /* The plan's upcasts (opt.h): amount per axis (1: none) and, for an
   * upcast axis, the index of its block; each copy of the body sets axis[d]
   * to block * amount + its lane, or for a spread one lane * blocks + block. */
  int64_t up[TVK_MAX_DIMS];
  uint32_t spread;           /* bit d: axis d's copies lie full/up apart (OPT_SPREAD) */
  int64_t run[TVK_MAX_DIMS]; /* a spread axis's runs of neighbours (opt_spread_run) */
  int64_t loc[TVK_MAX_DIMS]; /* the plan's LOCAL amounts (1: none) */
  /* The plan's STAGE (opt.h): the reduce axis walked in blocks through
   * work-group memory (-1: none), its block, the work group's first element
   * along each LOCAL axis, the invocation (local_id; a GROUP's too) and the
   * group's size, the loads staged so far (their VIEWs, the arrays' ids) and
   * the barrier that opens each block. */
  int saxis;
  int64_t sblock;
  UOp *tbase[TVK_MAX_DIMS];
  UOp *inv;
  int64_t ninv;
  UOp *sview[16];
  int64_t sid[16];
  int nstaged;
  UOp *bar0;
  UOp *block[TVK_MAX_DIMS];
  /* The plan's GROUP (grid mode): the reduce axis split across the work
   * group (-1: none), its lanes, the invocation's lane, and the number of
   * work-group arrays made so far. */
  int gaxis;
  int64_t glanes;
  UOp *lane;
  int nlocal;
  /* GROUP with LOCAL (opt.h): the work group holds gslots outputs of L
   * lanes each, local_id = slot * L + lane, or lane * P + slot where the
   * LOCAL axis comes after the grouped one (slots_fast); the invocation's
   * slot (NULL: one output per work group). */
  int64_t gslots;
  UOp *gslot;
  bool slots_fast;
  int subgroup; /* the combine may reduce across subgroups of this many (> 1) */
  /* The plan's UNROLL: the reduce axis split into lanes (-1: none), their
   * number, and the placeholder of the lane in its index (each lane's copy
   * of the reduce body has it replaced by a constant). */
  int uaxis;
  int64_t ulanes;
  UOp *ulane;
  /* An UNROLL of a symbolic axis of size n: the lanes' loop runs the full
   * blocks, [0, n / u), unmasked; the elements left, n - u * (n / u), run in
   * a loop of their own. Its end (n / u) and that loop's RANGE; else NULL. */
  UOp *ufull, *uleft;
  /* The plan's CACHE (cores mode): the output axis whose blocks run in runs
   * of crun (-1: none). */
  int caxis;
  int64_t crun;
  /* Peeling (codegen.h, CG_RANGE_VERSION): the symbolic upcast axis whose
   * full blocks are made without masks (-1: none), the copy being made (1:
   * the full blocks, 2: the last one; 0 when not peeling), and the tag added
   * to the ids of the RANGEs being made (ranges of that copy only). */
  int peel;
  int version;
  int64_t tag;
  /* Each symbolic axis upcast (its last block masked): the current copy's
   * index before the clamp, which the stores' gate compares with the size;
   * NULL elsewhere. */
  UOp *tail[TVK_MAX_DIMS];
  sint split_sym; /* cores mode: the split axis's blocks where its size is symbolic; else 0 */
  int row_axis;   /* cores mode: the axis split alone, whole blocks (CgLaunch.row_axis); or -1 */
  UOp *outer[TVK_MAX_DIMS + 2]; /* the output (non-reduce) RANGEs, outermost first */
  /* Each reduced axis: its loops (the digits of its index, innermost first; one
   * RANGE unless split), and, when the digits cover more than the axis, its
   * unclamped index (the axis index is clamped for the loads, and what lies
   * past the end becomes the reduce's identity). */
  UOp *dig[TVK_MAX_DIMS][CG_MAX_DIGITS];
  int ndig[TVK_MAX_DIMS];
  UOp *past[TVK_MAX_DIMS];
  uint32_t split;   /* bit d: a long axis d is split into digits */
  int64_t split_n;  /* cores mode: the extent of the axis split across cores */
  int64_t range_id; /* the next axis id for a digit RANGE */
  int nouter;
  DType idt; /* the index dtype: int32, or int64 when the kernel needs it (KernelDesc.index64) */
  UOp *zero; /* 0 of idt, the index of size-1 dims */
  int nacc;  /* accumulators made so far */
  Error *err;
} LowerCtx;

/* Builders that pass NULL (out of memory) through. */
static UOp *b2(Op op, UOp *a, UOp *b) { return a && b ? uop_alu2(op, a, b) : NULL; }
static UOp *b_min(UOp *a, UOp *b) {
  UOp *lt = b2(OP_CMPLT, a, b);
  return lt ? uop_where(lt, a, b) : NULL;
}
static UOp *b_c(LowerCtx *lc, int64_t v) { return uop_const_int(lc->ctx, lc->idt, v); }
/* A RANGE over [0, n) of the index dtype. */
static UOp *b_range(LowerCtx *lc, int64_t n, int64_t id) {
  UOp *end = b_c(lc, n);
  return end ? uop_range(lc->ctx, end, id + lc->tag) : NULL;
}
/* The blocks of a symbolic axis d: its size, or for an upcast by u
 * ceil(size / u), the last one masked (lower_copies, lower_store). */
static sint sym_blocks(const LowerCtx *lc, int d) {
  sint size = lc->ks->sym[d], u = lc->up[d];
  return u > 1 ? sint_fdiv(sint_add(size, u - 1), u) : size;
}
/* The extent of axis d, n: where the size is symbolic (KernelDesc.sym), its
 * blocks as an expression over the launch's variables. */
static UOp *b_extent(LowerCtx *lc, int d, int64_t n) {
  return lc->ks->sym_axes >> d & 1 ? sint_uop(lc->ctx, lc->idt, sym_blocks(lc, d)) : b_c(lc, n);
}
/* The blocks of output axis d (its size over its upcast): for a symbolic
 * one the most there can be, ceil(largest / u), its last block masked. */
static int64_t axis_blocks(const LowerCtx *lc, int d) {
  int64_t n = lc->ks->full[d], u = lc->up[d];
  return lc->ks->sym_axes >> d & 1 ? (n + u - 1) / u : n / u;
}
static UOp *b_axis_range(LowerCtx *lc, int d, int64_t n, int64_t id) {
  UOp *end = b_extent(lc, d, n);
  return end ? uop_range(lc->ctx, end, id + lc->tag) : NULL;
}
/* A peeled axis d (upcast by u, size n): its full blocks, n / u, and the
 * blocks left, ceil(n / u) - n / u (0 or 1). false: out of memory. */
static bool peel_counts(LowerCtx *lc, int d, UOp **full, UOp **left) {
  UOp *n = sint_uop(lc->ctx, lc->idt, lc->ks->sym[d]), *u = b_c(lc, lc->up[d]);
  UOp *all = b2(OP_IDIV, b2(OP_ADD, n, b_c(lc, lc->up[d] - 1)), u);
  *full = b2(OP_IDIV, n, u);
  *left = all && *full ? uop_sub(all, *full) : NULL;
  return *left != NULL;
}
/* The peeled axis d's blocks: copy 1 runs the full ones, [0, n / u); copy 2
 * the one left, n / u + [0, ceil(n / u) - n / u) (none when u divides n). */
static UOp *peel_blocks(LowerCtx *lc, int d, int64_t id) {
  UOp *full, *left;
  if (!peel_counts(lc, d, &full, &left)) return NULL;
  UOp *r = uop_range(lc->ctx, lc->version == 1 ? full : left, id + lc->tag);
  lc->outer[lc->nouter++] = r;
  return lc->version == 1 ? r : b2(OP_ADD, full, r);
}
/* A SPECIAL (int32 in every kernel ABI) as an index. */
static UOp *b_special(LowerCtx *lc, Arg arg) {
  UOp *s = uop_new(lc->ctx, OP_SPECIAL, DT(INT32), 0, NULL, arg);
  return s ? uop_cast(s, lc->idt) : NULL;
}

/* ---------------------------------------------------------------- axes */

static UOp *split_axis_of(LowerCtx *lc, int64_t n, UOp *sym, int64_t axis_id);

/* The axis of size n split across cores: core c of nc runs the chunk
 * [lo, lo + count) with chunk = ceil(n / nc), lo = min(c * chunk, n) and
 * count = min(n - lo, chunk); no intermediate exceeds n + nc. */
static UOp *split_axis(LowerCtx *lc, int64_t n, int64_t axis_id) {
  return split_axis_of(lc, n, NULL, axis_id);
}

/* The same for an axis whose size is the expression sym (at most n). */
static UOp *split_axis_of(LowerCtx *lc, int64_t n, UOp *sym, int64_t axis_id) {
  UCtx *c = lc->ctx;
  lc->split_n = n;
  UOp *cid = b_special(lc, arg_var("core_id", 0, CG_MAX_CORES - 1));
  UOp *nc = b_special(lc, arg_var("n_cores", 1, CG_MAX_CORES));
  UOp *num = sym ? sym : b_c(lc, n);
  UOp *chunk =
      b2(OP_ADD, b2(OP_IDIV, sym ? uop_sub(sym, b_c(lc, 1)) : b_c(lc, n - 1), nc), b_c(lc, 1));
  /* core_id * chunk in int64: bounds cannot see that core_id < n_cores, so
   * in int32 the product may seem to overflow, and every index built on it
   * would be rendered with wrap-around casts the vectorisers cannot see
   * through; min(., n) brings it back in range */
  DType i64 = dt_make(DT_INT64);
  UOp *wide = cid && chunk ? b2(OP_MUL, uop_cast(cid, i64), uop_cast(chunk, i64)) : NULL;
  UOp *n64 = sym ? uop_cast(sym, i64) : uop_const_int(c, i64, n);
  UOp *lo = wide && n64 ? b_min(wide, n64) : NULL;
  lo = lo ? uop_cast(lo, lc->idt) : NULL;
  UOp *rest = lo && num ? uop_sub(num, lo) : NULL;
  UOp *count = b_min(rest, chunk);
  UOp *r = count ? uop_range(c, count, axis_id) : NULL;
  lc->outer[lc->nouter++] = r;
  return b2(OP_ADD, lo, r);
}

/* s^k, or something above cap once it passes cap (no overflow). */
static int64_t pow_sat(int64_t s, int k, int64_t cap) {
  int64_t p = 1;
  for (int j = 0; j < k && p <= cap; j++) p *= s;
  return p;
}

/* The loops of a reduce axis of n iterations: one RANGE (axis id `id`), or
 * when split and n > CG_SUM_BLOCK, nested RANGEs of at most CG_SUM_BLOCK
 * iterations whose digits make the index: factors of n where it has them,
 * else k digits of ceil(n^(1/k)) with an outer one of what remains, so the
 * loops waste little past n. Fills lc->dig / ndig / past of axis d; returns the index (clamped to
 * n - 1 when the digits cover more). */
/* The digits of a blocked reduce axis of n > CG_SUM_BLOCK elements,
 * innermost first; returns how many. Factors of n, each the largest divisor
 * of what remains up to the block (no clamp, no wasted iteration), where n
 * has them; else k equal digits with an outer one of what remains, the
 * index clamped. */
static int reduce_digits(int64_t n, int64_t f[CG_MAX_DIGITS]) {
  int64_t rest = n;
  int k = 0;
  while (rest > CG_SUM_BLOCK && k < CG_MAX_DIGITS - 1) {
    int64_t s = CG_SUM_BLOCK;
    while (s > 1 && rest % s) s--;
    if (s < 2) break;
    f[k++] = s, rest /= s;
  }
  if (rest <= CG_SUM_BLOCK) {
    f[k++] = rest;
    return k;
  }
  /* no such digits (a large prime factor): equal ones */
  k = 1;
  for (int64_t cover = CG_SUM_BLOCK; cover < n; cover *= CG_SUM_BLOCK) k++;
  int64_t s = 2; /* the smallest digit size with s^k >= n (at most CG_SUM_BLOCK) */
  while (pow_sat(s, k, n) < n) s++;
  int64_t inner = 1;
  for (int j = 0; j < k - 1; j++) f[j] = s, inner *= s;
  f[k - 1] = (n + inner - 1) / inner;
  return k;
}

int64_t cg_reduce_trips(int64_t n) {
  if (n <= CG_SUM_BLOCK) return n;
  int64_t f[CG_MAX_DIGITS], cover = 1;
  int k = reduce_digits(n, f);
  for (int j = 0; j < k; j++) cover *= f[j];
  return cover;
}

int64_t cg_reduce_inner(int64_t n, bool sum) {
  if (!sum || n <= CG_SUM_BLOCK) return n;
  int64_t f[CG_MAX_DIGITS], cover = 1;
  int k = reduce_digits(n, f);
  for (int j = 0; j < k; j++) cover *= f[j];
  return cover == n ? f[0] : 0;
}

static UOp *reduce_loops(LowerCtx *lc, int d, int64_t n, int64_t id) {
  /* a symbolic size is one loop: digits need to know n (n is its bound here) */
  if (!(lc->split >> d & 1) || n <= CG_SUM_BLOCK || lc->ks->sym_axes >> d & 1) {
    lc->ndig[d] = 1;
    return lc->dig[d][0] = b_axis_range(lc, d, n, id);
  }
  int64_t f[CG_MAX_DIGITS];
  int k = reduce_digits(n, f);
  UOp *idx = NULL;
  int64_t cover = 1;
  lc->ndig[d] = k;
  for (int j = k - 1; j >= 0; j--) { /* outermost digit first: idx = (... d_k-1) * f_j + d_j */
    UOp *r = b_range(lc, f[j], j == 0 ? id : lc->range_id++);
    lc->dig[d][j] = r;
    idx = !idx ? r : b2(OP_ADD, b2(OP_MUL, idx, b_c(lc, f[j])), r);
    cover *= f[j];
  }
  if (cover == n) return idx;
  lc->past[d] = idx;
  return b_min(idx, b_c(lc, n - 1));
}

/* A reduce axis d of n elements taken by `lanes` lanes (UNROLL's lane
 * placeholder, GROUP's invocation): lane l takes elements l, l + lanes, ...
 * over loops of ceil(n / lanes) iterations (digits, as any reduce), index
 * j * lanes + lane; where that runs past n it is clamped for the loads and
 * what lies past is the identity (lc->past). */
static UOp *laned_axis(LowerCtx *lc, int d, int64_t n, int64_t lanes, UOp *lane) {
  int64_t m = (n + lanes - 1) / lanes;
  UOp *j = lc->zero;
  if (m > 1)
    j = reduce_loops(lc, d, m, d);
  else
    lc->ndig[d] = 0;
  if (!j || !lane) return NULL;
  UOp *ju = lc->past[d] ? lc->past[d] : j;
  UOp *iu = b2(OP_ADD, b2(OP_MUL, ju, b_c(lc, lanes)), lane);
  if (!lc->past[d] && m * lanes == n) return iu;
  lc->past[d] = iu;
  return b_min(iu, b_c(lc, n - 1));
}

/* The UNROLL axis (opt.h): its lane is a placeholder that each lane's copy of
 * the reduce body replaces by its constant. */
static UOp *unroll_axis(LowerCtx *lc, int d, int64_t n) {
  lc->ulane =
      uop_new(lc->ctx, OP_SPECIAL, lc->idt, 0, NULL, arg_var("unroll_lane", 0, lc->ulanes - 1));
  if (!(lc->ks->sym_axes >> d & 1)) return laned_axis(lc, d, n, lc->ulanes, lc->ulane);
  /* A symbolic size: clamping and masking each lane (laned_axis) would
   * leave the lanes' loads apart and their values selected, which no C
   * compiler widens; the full blocks need neither (lc->ufull). */
  UOp *size = sint_uop(lc->ctx, lc->idt, lc->ks->sym[d]), *u = b_c(lc, lc->ulanes);
  lc->ufull = b2(OP_IDIV, size, u);
  UOp *left = b2(OP_MOD, size, u);
  UOp *j = lc->ufull ? uop_range(lc->ctx, lc->ufull, d + lc->tag) : NULL;
  lc->uleft = left ? uop_range(lc->ctx, left, lc->range_id++ + lc->tag) : NULL;
  lc->ndig[d] = 1;
  lc->dig[d][0] = j;
  return lc->uleft ? b2(OP_ADD, b2(OP_MUL, j, u), lc->ulane) : NULL;
}

/* A reduce axis's index: its loops, or an UNROLL's. */
static UOp *reduce_axis(LowerCtx *lc, int d, int64_t n) {
  return d == lc->uaxis ? unroll_axis(lc, d, n) : reduce_loops(lc, d, n, d);
}

/* The outermost output axis of more than one block is split across cores;
 * when it has fewer than CG_SPLIT_MERGE blocks and another output axis
 * follows, the two are split together (their blocks flattened, each core a
 * run of them in the same order): a batch of 3 on 2 cores, or of 8 on 16,
 * would leave cores idle or uneven. Sets *a0 and *a1 (-1: none). */
static void split_axes(const LowerCtx *lc, int *a0, int *a1) {
  const KernelDesc *ks = lc->ks;
  *a0 = *a1 = -1;
  for (int d = 0; d < ks->ndim; d++) {
    if (ks->reduce_axes >> d & 1 || axis_blocks(lc, d) == 1) continue;
    bool sym = ks->sym_axes >> d & 1; /* split alone: its size is not a constant to flatten by */
    if (*a0 < 0) {
      *a0 = d;
      if (sym || axis_blocks(lc, d) >= CG_SPLIT_MERGE) return;
    } else if (sym || ks->sym_axes >> *a0 & 1) {
      return;
    } else {
      *a1 = d;
      return;
    }
  }
}

/* Sets lc->axis: the first output axis of size other than 1 is split across
 * cores (with the next, split_axes), the other output axes and the reduced
 * axes get a RANGE each (axis id = the dim), size-1 axes the constant 0. An
 * upcast axis is this over its blocks (lc->block), its lanes set per copy.
 * With no output axis to split, a one-iteration range (axis id ndim) keeps
 * every core but the first idle.
 * With a CACHE (opt.h) of axis c, c's blocks run in runs of P: the runs are
 * split instead, the other output axes follow in order, then the P blocks of
 * a run. Loops nest by their RANGE's axis id (linearize.c), so the runs take
 * c's own id, the smallest of the output loops then, the other output axes
 * ids ndim + 1 + d and a run's blocks 2 * ndim + 1: all unused by reduce
 * loops (ids d of reduced axes, then digits from 2 * ndim + 2). */
static bool make_axes(LowerCtx *lc) {
  const KernelDesc *ks = lc->ks;
  int c = lc->caxis, a0 = -1, a1 = -1;
  bool split = c >= 0;
  UOp *runs = split ? split_axis(lc, ks->full[c] / lc->up[c] / lc->crun, c) : NULL;
  int64_t ids = split ? ks->ndim + 1 : 0; /* added to an output axis's RANGE id */
  if (!split) split_axes(lc, &a0, &a1);
  for (int d = 0; d < ks->ndim; d++) {
    bool red = ks->reduce_axes >> d & 1;
    int64_t n = red ? ks->full[d] : axis_blocks(lc, d); /* blocks of an upcast axis */
    if (d == a1 || d == c) continue;                    /* made with a0, after the loop */
    /* a peeled copy's own loops: the peeled axis, the output axes inside it,
     * every reduce */
    lc->tag = lc->version && (red || d >= lc->peel) ? lc->version * CG_RANGE_VERSION : 0;
    if (d == lc->peel && lc->version) {
      lc->axis[d] = peel_blocks(lc, d, ids + d);
    } else if (n == 1) {
      lc->axis[d] = lc->zero;
    } else if (d == a0 && a1 >= 0) { /* the two axes' blocks flattened, split */
      int64_t n1 = ks->full[a1] / lc->up[a1];
      UOp *i = split_axis(lc, n * n1, d), *c1 = b_c(lc, n1);
      lc->axis[d] = b2(OP_IDIV, i, c1);
      lc->axis[a1] = lc->block[a1] = b2(OP_MOD, i, c1);
      if (!lc->axis[a1]) return false;
      split = true;
    } else if (!red && !split) {
      UOp *sym = NULL;
      if (ks->sym_axes >> d & 1)
        sym = sint_uop(lc->ctx, lc->idt, lc->split_sym = sym_blocks(lc, d));
      lc->axis[d] = split_axis_of(lc, n, sym, d), split = true;
      if (!sym && !lc->version) lc->row_axis = d;
    } else if (red)
      lc->axis[d] = reduce_axis(lc, d, n);
    else
      lc->outer[lc->nouter++] = lc->axis[d] = b_axis_range(lc, d, n, ids + d);
    if (!(lc->block[d] = lc->axis[d])) return false;
  }
  lc->tag = 0;
  if (c >= 0) { /* a run's blocks, the innermost output loop */
    UOp *in = b_range(lc, lc->crun, 2 * (int64_t)ks->ndim + 1);
    lc->outer[lc->nouter++] = in;
    if (!(lc->axis[c] = lc->block[c] = b2(OP_ADD, b2(OP_MUL, runs, b_c(lc, lc->crun)), in)))
      return false;
  }
  if (!split) {
    split_axis(lc, 1, ks->ndim);
    /* The split is the outermost loop: keep it first in the list. */
    UOp *s = lc->outer[lc->nouter - 1];
    memmove(lc->outer + 1, lc->outer, (size_t)(lc->nouter - 1) * sizeof *lc->outer);
    lc->outer[0] = s;
  }
  for (int i = 0; i < lc->nouter; i++)
    if (!lc->outer[i]) return false;
  return true;
}

/* Grid mode: the reduce loops of one invocation may run CG_GRID_LOOP_BUDGET
 * iterations in all (their trips multiplied; a GROUP's lanes share theirs).
 * The frontend splits longer reduces into kernels that fit (ops_reduce.c);
 * a kernel still over the budget is refused, never cut short. */
static tvk_status check_budget(LowerCtx *lc) {
  const KernelDesc *ks = lc->ks;
  int64_t total = 1;
  for (int d = 0; d < ks->ndim; d++)
    for (int j = 0; ks->reduce_axes >> d & 1 && j < lc->ndig[d]; j++) {
      /* a symbolic axis's one loop: its largest trip */
      int64_t t = ks->sym_axes >> d & 1 ? ks->full[d] : lc->dig[d][j]->src[0]->arg.i;
      total = total > INT64_MAX / (t ? t : 1) ? INT64_MAX : total * t;
    }
  if (total <= CG_GRID_LOOP_BUDGET) return TVK_OK;
  return err_first(lc->err, TVK_ERR_INVALID_ARG,
                   "lowering: a work item would run %lld reduce iterations, more than the %d one "
                   "invocation may (tvk's reduces are split to fit: ops_reduce.c)",
                   (long long)total, CG_GRID_LOOP_BUDGET);
}

/* Whether a GROUP's combine goes through subgroups (CodegenOpts.subgroup =
 * S): S divides the lanes, and the lanes are the work group's fastest index
 * (slots_fast not set), so a subgroup holds one slot's lanes only. */
static bool via_subgroups(const LowerCtx *lc) {
  return lc->subgroup > 1 && lc->glanes >= lc->subgroup && lc->glanes % lc->subgroup == 0 &&
         !lc->slots_fast;
}

/* Grid mode with a GROUP (opt.h): one work group per output element, the
 * grouped axis taken by its invocations (laned_axis); with a LOCAL of an
 * output axis by P, P outputs per work group, neighbouring ones along that
 * axis, each on L lanes: the work group's two axes in axis order, the later
 * one's index fastest (local_id = slot * L + lane when the grouped axis is
 * the later, lane * P + slot when the LOCAL one is). */
static bool make_axes_group(LowerCtx *lc, int64_t total, CgLaunch *launch) {
  const KernelDesc *ks = lc->ks;
  int64_t L = lc->glanes, P = 1, S = lc->subgroup;
  int slot_axis = -1;
  for (int d = 0; d < ks->ndim; d++)
    if (lc->loc[d] > 1) slot_axis = d, P = lc->loc[d];
  int64_t groups = total / P;
  lc->gslots = P;
  lc->slots_fast = P > 1 && slot_axis > lc->gaxis;
  *launch = (CgLaunch){{groups, 1, 1}, {P * L, 1, 1}, 0, -1};
  UOp *flat = b_special(lc, arg_var("group_id", 0, groups > 1 ? groups - 1 : 0));
  /* Where the combine goes through subgroups, the invocation's index is
   * subgroup_id * S + subgroup_lane: Vulkan relates subgroups to nothing
   * else, and on full subgroups (the backend asks for them) that index
   * covers the work group, each subgroup S neighbouring entries. */
  UOp *inv = NULL;
  if (via_subgroups(lc)) {
    UOp *sid = b_special(lc, arg_var("subgroup_id", 0, P * L / S - 1));
    UOp *sl = b_special(lc, arg_var("subgroup_lane", 0, S - 1));
    inv = sid && sl ? b2(OP_ADD, b2(OP_MUL, sid, b_c(lc, S)), sl) : NULL;
  } else {
    inv = b_special(lc, arg_var("local_id", 0, P * L - 1));
  }
  if (!flat || !inv) return false;
  lc->inv = inv, lc->ninv = P * L;
  if (P == 1)
    lc->lane = inv, lc->gslot = NULL;
  else if (lc->slots_fast)
    lc->lane = b2(OP_IDIV, inv, b_c(lc, P)), lc->gslot = b2(OP_MOD, inv, b_c(lc, P));
  else
    lc->lane = b2(OP_MOD, inv, b_c(lc, L)), lc->gslot = b2(OP_IDIV, inv, b_c(lc, L));
  if (!lc->lane || (P > 1 && !lc->gslot)) return false;
  int64_t stride = 1;
  for (int d = ks->ndim - 1; d >= 0; d--) {
    bool red = ks->reduce_axes >> d & 1;
    int64_t n = red ? ks->full[d] : axis_blocks(lc, d); /* blocks of an upcast axis */
    if (d == lc->gaxis && d == lc->uaxis) { /* lane l's runs of u neighbours, L * u apart */
      int64_t u = lc->ulanes;
      lc->ulane = uop_new(lc->ctx, OP_SPECIAL, lc->idt, 0, NULL, arg_var("unroll_lane", 0, u - 1));
      UOp *at = lc->ulane ? b2(OP_ADD, b2(OP_MUL, lc->lane, b_c(lc, u)), lc->ulane) : NULL;
      lc->axis[d] = at ? laned_axis(lc, d, n, L * u, at) : NULL;
    } else if (d == lc->gaxis) {
      lc->axis[d] = laned_axis(lc, d, n, L, lc->lane);
    } else if (n == 1) {
      lc->axis[d] = lc->zero;
    } else if (red) {
      lc->axis[d] = reduce_axis(lc, d, n);
    } else if (d == slot_axis) { /* tiles of P along the axis, the slot within */
      UOp *tile = b2(OP_MOD, b2(OP_IDIV, flat, b_c(lc, stride)), b_c(lc, n / P));
      lc->axis[d] = b2(OP_ADD, b2(OP_MUL, tile, b_c(lc, P)), lc->gslot);
      stride *= n / P;
    } else {
      lc->axis[d] = b2(OP_MOD, b2(OP_IDIV, flat, b_c(lc, stride)), b_c(lc, n));
      stride *= n;
    }
    if (!(lc->block[d] = lc->axis[d])) return false;
  }
  return true;
}

/* Grid mode with LOCAL axes (opt.h): the work group is their tile of
 * blocks, the invocation's index along each a digit of local_id (the last
 * axis fastest); the work groups number the tiles and the other axes'
 * blocks row-major. The tiles divide the blocks: no bounds check. */
static bool make_axes_local(LowerCtx *lc, int64_t total, CgLaunch *launch) {
  const KernelDesc *ks = lc->ks;
  int64_t local = 1;
  for (int d = 0; d < ks->ndim; d++) local *= lc->loc[d];
  int64_t groups = total / local;
  *launch = (CgLaunch){{groups, 1, 1}, {local, 1, 1}, 0, -1};
  UOp *grp = b_special(lc, arg_var("group_id", 0, groups > 1 ? groups - 1 : 0));
  UOp *lane = b_special(lc, arg_var("local_id", 0, local - 1));
  if (!grp || !lane) return false;
  lc->inv = lane, lc->ninv = local;
  int64_t gstride = 1, lstride = 1;
  for (int d = ks->ndim - 1; d >= 0; d--) {
    bool red = ks->reduce_axes >> d & 1;
    int64_t n = red ? ks->full[d] : ks->full[d] / lc->up[d], l = lc->loc[d];
    if (n == 1) {
      lc->axis[d] = lc->zero;
    } else if (red) {
      lc->axis[d] = reduce_axis(lc, d, n);
    } else {
      UOp *tile = b2(OP_MOD, b2(OP_IDIV, grp, b_c(lc, gstride)), b_c(lc, n / l));
      gstride *= n / l;
      lc->tbase[d] = b2(OP_MUL, tile, b_c(lc, l * lc->up[d])); /* the tile's first element */
      if (l > 1) {
        UOp *in = b2(OP_MOD, b2(OP_IDIV, lane, b_c(lc, lstride)), b_c(lc, l));
        lstride *= l;
        tile = b2(OP_ADD, b2(OP_MUL, tile, b_c(lc, l)), in);
      }
      lc->axis[d] = tile;
    }
    if (!(lc->block[d] = lc->axis[d])) return false;
  }
  return true;
}

/* Grid mode (codegen.h, lower_kernel_grid), no GROUP or LOCAL: the output
 * elements (the blocks of upcast axes) numbered row-major, one per invocation gid = group_id *
 * local + local_id; the output axes are the digits of min(gid, total - 1); when the last group runs
 * past the end, a RANGE of (gid < total ? 1 : 0) iterations is the bounds check that holds the
 * stores and the reduces. */
static bool make_axes_grid(LowerCtx *lc, int local_size, CgLaunch *launch) {
  const KernelDesc *ks = lc->ks;
  UCtx *c = lc->ctx;
  int64_t total = 1, locals = 1; /* invocations: the output's blocks (the most) */
  for (int d = 0; d < ks->ndim; d++) {
    if (!(ks->reduce_axes >> d & 1)) total *= axis_blocks(lc, d);
    locals *= lc->loc[d];
  }
  if (lc->gaxis >= 0) return make_axes_group(lc, total, launch);
  if (locals > 1) return make_axes_local(lc, total, launch);
  int64_t local = total < local_size ? (total > 1 ? total : 1) : local_size;
  int64_t groups = (total + local - 1) / local; /* 0 for an empty output: nothing runs */
  *launch = (CgLaunch){{groups, 1, 1}, {local, 1, 1}, 0, -1};
  /* Symbolic output sizes: total, groups and the bound above are the largest
   * values; the count of work groups a launch needs is an expression of the
   * launch's values (CgLaunch.groups), and the bounds check is always there. */
  bool sym = ks->sym_axes & ~ks->reduce_axes;
  sint total_s = 1;
  for (int d = 0; sym && d < ks->ndim; d++)
    if (!(ks->reduce_axes >> d & 1))
      total_s = sint_mul(total_s, ks->sym_axes >> d & 1 ? sym_blocks(lc, d) : axis_blocks(lc, d));
  if (sym && (launch->groups = sint_fdiv(sint_add(total_s, local - 1), local)) == SINT_NONE)
    return false;
  UOp *grp = b_special(lc, arg_var("group_id", 0, groups > 1 ? groups - 1 : 0));
  UOp *lane = b_special(lc, arg_var("local_id", 0, local - 1));
  UOp *gid = b2(OP_ADD, b2(OP_MUL, grp, b_c(lc, local)), lane), *flat = gid;
  if (sym || groups * local != total) { /* the last group runs past the end */
    UOp *tot = sym ? sint_uop(c, lc->idt, total_s) : b_c(lc, total);
    flat = b_min(gid, sym ? uop_sub(tot, b_c(lc, 1)) : b_c(lc, total > 1 ? total - 1 : 0));
    UOp *in = b2(OP_CMPLT, gid, tot), *one = b_c(lc, 1);
    UOp *r = in && one ? uop_range(c, uop_where(in, one, lc->zero), ks->ndim) : NULL;
    if (!r) return false;
    lc->outer[lc->nouter++] = r;
  }
  if (!flat) return false;
  sint stride = 1; /* of axis d in the numbering: the output axes after it */
  for (int d = ks->ndim - 1; d >= 0; d--) {
    bool red = ks->reduce_axes >> d & 1;
    int64_t n = red ? ks->full[d] : axis_blocks(lc, d);
    if (n == 1)
      lc->axis[d] = lc->zero;
    else if (red)
      lc->axis[d] = reduce_axis(lc, d, n);
    else {
      UOp *q = b2(OP_IDIV, flat, sint_uop(c, lc->idt, stride));
      lc->axis[d] = b2(OP_MOD, q, b_extent(lc, d, n));
      stride = sint_mul(stride, ks->sym_axes >> d & 1 ? sym_blocks(lc, d) : n); /* its blocks */
    }
    if (!(lc->block[d] = lc->axis[d])) return false;
  }
  return true;
}

/* (index, valid) of the element of st at the axis indices `at`: size-1
 * dims of the view are indexed by 0. */
static bool index_at(LowerCtx *lc, const ShapeTracker *st, UOp *const *at, UOp **idx, UOp **valid) {
  UOp *idxs[TVK_MAX_DIMS];
  for (int d = 0; d < st_ndim(st); d++) idxs[d] = st_shape(st)[d] == 1 ? lc->zero : at[d];
  return st_to_indexed_uops(st, lc->ctx, lc->idt, idxs, idx, valid);
}

/* The same at the kernel's axes (lc->axis). */
static bool view_index(LowerCtx *lc, UOp *view, UOp **idx, UOp **valid) {
  return index_at(lc, view->arg.st, lc->axis, idx, valid);
}

static bool is_true(const UOp *u) { return u->op == OP_CONST && u->arg.i != 0; }
static bool is_false(const UOp *u) { return u->op == OP_CONST && u->arg.i == 0; }

static UOp *oom(LowerCtx *lc) {
  err_first(lc->err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  return NULL;
}

/* ---------------------------------------------------------------- rules */

enum { X = 1, B, V, Y };

/* The value of buf at the element the view maps idxs to: LOAD(INDEX(buf,
 * idx)), or gated where the view is masked (0 outside), or 0. */
static UOp *load_at(LowerCtx *lc, UOp *x, UOp *buf, const ShapeTracker *st, UOp *const *idxs) {
  UOp *idx, *valid;
  if (!index_at(lc, st, idxs, &idx, &valid)) return NULL;
  UOp *zero = uop_const_int(lc->ctx, x->dtype, 0);
  if (!zero || is_false(valid)) return zero;
  UOp *index = uop_new(lc->ctx, OP_INDEX, buf->dtype, 2, (UOp *[]){buf, idx}, arg_none());
  if (!index) return NULL;
  if (is_true(valid)) return uop_new(lc->ctx, OP_LOAD, x->dtype, 1, &index, arg_none());
  return uop_new(lc->ctx, OP_LOAD, x->dtype, 3, (UOp *[]){index, zero, valid}, arg_none());
}

/* Most elements one staged load's block may hold in work-group memory. */
#define STAGE_MAX_ELEMENTS 4096

/* A load of a STAGE plan (opt.h) through work-group memory, or NULL (then
 * read from global memory) where the view does not walk the staged axis,
 * walks a spread axis, or its block does not fit or divide among the
 * invocations. The block: per axis the view walks, the staged axis's
 * block of elements and the work group's elements of each output axis
 * (a LOCAL axis's tile, another's upcast block); laid out row-major with
 * the view's smallest stride fastest, so the fill's neighbouring
 * invocations read neighbouring elements. Each invocation fills elements
 * lane, lane + P, ... (P: the group's size), after the barrier that opens
 * the block (the reads of the last block are done); a barrier after the
 * fill; then each copy reads its element. The fill uses no copy's lanes, so
 * the copies share it. */
static UOp *staged_load(LowerCtx *lc, UOp **c) {
  const KernelDesc *ks = lc->ks;
  const ShapeTracker *st = c[V]->arg.st;
  const View *v = st->nviews == 1 ? st_top(st) : NULL;
  int k = lc->saxis, nd = ks->ndim, order[TVK_MAX_DIMS];
  int64_t ext[TVK_MAX_DIMS], lstride[TVK_MAX_DIMS], elems = 1;
  bool walks[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    walks[d] = st_shape(st)[d] > 1 && (!v || v->strides[d] != 0 || v->has_mask);
    bool red = ks->reduce_axes >> d & 1;
    ext[d] = !walks[d] ? 1 : red ? lc->sblock : lc->loc[d] * lc->up[d];
    if (walks[d] && !red && lc->spread >> d & 1) return NULL;
    elems *= ext[d];
    order[d] = d;
  }
  if (!walks[k] || elems > STAGE_MAX_ELEMENTS || elems % lc->ninv || lc->nstaged >= 16) return NULL;
  for (int i = 1; i < nd && v; i++) /* by stride, largest first (insertion sort) */
    for (int j = i; j > 0; j--) {
      sint a = v->strides[order[j - 1]], b = v->strides[order[j]];
      if ((a < 0 ? -a : a) >= (b < 0 ? -b : b)) break;
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (int i = nd - 1, s = 1; i >= 0; i--) lstride[order[i]] = s, s *= (int)ext[order[i]];
  /* the block's first element per axis, and this copy's place in it */
  UOp *base[TVK_MAX_DIMS], *pos = lc->zero;
  for (int d = 0; d < nd; d++) {
    bool red = ks->reduce_axes >> d & 1;
    UOp *ki = lc->dig[k][0], *z = lc->zero;
    base[d] = !walks[d]        ? lc->axis[d]
              : red            ? uop_substitute(lc->axis[d], 1, &ki, &z)
              : lc->loc[d] > 1 ? lc->tbase[d]
                               : b2(OP_MUL, lc->block[d], b_c(lc, lc->up[d]));
    if (!base[d]) return oom(lc);
    if (walks[d]) {
      UOp *off = red ? lc->dig[k][0] : uop_sub(lc->axis[d], base[d]);
      pos = b2(OP_ADD, pos, b2(OP_MUL, off, b_c(lc, lstride[d])));
    }
  }
  int id = -1;
  for (int i = 0; i < lc->nstaged; i++)
    if (lc->sview[i] == c[V]) id = (int)lc->sid[i];
  if (id < 0) {
    id = lc->nlocal++;
    lc->sview[lc->nstaged] = c[V], lc->sid[lc->nstaged++] = id;
  }
  int64_t ids[2] = {id, elems};
  UOp *mem =
      uop_new(lc->ctx, OP_DEFINE_LOCAL, dt_ptr(c[X]->dtype, ADDR_LOCAL), 0, NULL, arg_ints(2, ids));
  if (!mem || !pos) return oom(lc);
  UOp *stores[STAGE_MAX_ELEMENTS / 16];
  int64_t per = elems / lc->ninv;
  if (per > (int64_t)(sizeof stores / sizeof *stores)) return NULL;
  for (int64_t i = 0; i < per; i++) {
    UOp *e = b2(OP_ADD, lc->inv, b_c(lc, i * lc->ninv)), *at[TVK_MAX_DIMS];
    for (int d = 0; d < nd; d++)
      at[d] = !walks[d] ? base[d]
                        : b2(OP_ADD, base[d],
                             b2(OP_MOD, b2(OP_IDIV, e, b_c(lc, lstride[d])), b_c(lc, ext[d])));
    UOp *val = load_at(lc, c[X], c[B], st, at);
    UOp *place =
        e && val ? uop_new(lc->ctx, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, e}, arg_none()) : NULL;
    UOp *src[3] = {place, val, lc->bar0};
    stores[i] =
        place ? uop_new(lc->ctx, OP_STORE, dt_make(DT_VOID), lc->bar0 ? 3 : 2, src, arg_none())
              : NULL;
    if (!stores[i]) return oom(lc);
  }
  UOp *bar1 = uop_new(lc->ctx, OP_BARRIER, dt_make(DT_VOID), (int)per, stores, arg_none());
  UOp *place =
      bar1 ? uop_new(lc->ctx, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, pos}, arg_none()) : NULL;
  return place ? uop_new(lc->ctx, OP_LOAD, c[X]->dtype, 2, (UOp *[]){place, bar1}, arg_none())
               : oom(lc);
}

/* LOAD(buf, VIEW) -> LOAD(INDEX(buf, idx))  or  LOAD(INDEX(buf, idx), 0, valid) */
static UOp *lower_load(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  if (lc->saxis >= 0) {
    UOp *s = staged_load(lc, c);
    if (s || lc->err->status != TVK_OK) return s;
  }
  UOp *r = load_at(lc, c[X], c[B], c[V]->arg.st, lc->axis);
  return r ? r : oom(lc);
}

/* STORE(buf, VIEW, x) -> STORE(INDEX(buf, idx), x, [valid,] output RANGEs...): the
 * ranges say the store runs once per output element even where its index does
 * not depend on them (the one-iteration core range). */
static UOp *lower_store(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid, *src[3 + TVK_MAX_DIMS + 1];
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *index = uop_new(lc->ctx, OP_INDEX, c[B]->dtype, 2, (UOp *[]){c[B], idx}, arg_none());
  if (!index) return oom(lc);
  if (lc->lane) { /* a grouped kernel: every lane has the value, lane 0 stores it */
    UOp *first = b2(OP_CMPLT, lc->lane, b_c(lc, 1));
    valid = is_true(valid) ? first : b2(OP_AND, valid, first);
    if (!valid) return oom(lc);
  }
  for (int d = 0; d < lc->ks->ndim; d++) { /* a masked upcast's lanes past the size */
    if (!lc->tail[d]) continue;
    UOp *in = b2(OP_CMPLT, lc->tail[d], sint_uop(lc->ctx, lc->idt, lc->ks->sym[d]));
    if (!(valid = is_true(valid) ? in : b2(OP_AND, valid, in))) return oom(lc);
  }
  int n = 0;
  src[n++] = index;
  src[n++] = c[Y];
  if (!is_true(valid)) src[n++] = valid;
  for (int i = 0; i < lc->nouter; i++) src[n++] = lc->outer[i];
  return uop_new(lc->ctx, OP_STORE, dt_make(DT_VOID), n, src, arg_none());
}

/* CONST(VIEW) -> c  or  valid ? c : 0 */
static UOp *lower_const(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid;
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  UOp *k = uop_new(lc->ctx, OP_CONST, c[X]->dtype, 0, NULL, c[X]->arg);
  UOp *zero = uop_const_int(lc->ctx, c[X]->dtype, 0);
  if (!k || !zero) return oom(lc);
  if (is_true(valid)) return k;
  if (is_false(valid)) return zero;
  return uop_where(valid, k, zero);
}

/* ARANGE(VIEW) -> idx  or  valid ? idx : 0 (the view's index into its base) */
static UOp *lower_arange(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *idx, *valid;
  if (!view_index(lc, c[V], &idx, &valid)) return oom(lc);
  /* in an int64 kernel, back to the leaf's int32 (an arange has < 2^31 elements) */
  UOp *zero = uop_const_int(lc->ctx, c[X]->dtype, 0);
  if (!zero || !(idx = uop_cast(idx, c[X]->dtype))) return oom(lc);
  if (is_true(valid)) return idx;
  if (is_false(valid)) return zero;
  return uop_where(valid, idx, zero);
}

/* The identity of a reduce op: 0 for ADD, 1 for MUL, the dtype's minimum for MAX. */
static UOp *identity(LowerCtx *lc, Op op, DType dt) {
  if (op == OP_ADD) return uop_const_int(lc->ctx, dt, 0);
  if (op == OP_MUL) return uop_const_int(lc->ctx, dt, 1);
  if (dt_is_float(dt)) return uop_const_float(lc->ctx, dt, -INFINITY);
  return uop_const_int(lc->ctx, dt, dt_min_i(dt));
}

/* Iterations of a reduce loop (its end is a constant). */
static int64_t trips(const UOp *range) {
  const UOp *end = range->src[0];
  return end->op == OP_CONST ? end->arg.i : INT64_MAX / CG_SUM_BLOCK;
}

/* ident op v[0] op v[1] ...: what a loop over them adds, in its order. */
static UOp *fold(Op op, UOp *ident, UOp *const *v, int n) {
  UOp *r = ident;
  for (int i = 0; r && i < n; i++) r = b2(op, r, v[i]);
  return r;
}

/* Index k of the invocation's slot in a work-group array of `per` entries
 * per slot (GROUP with LOCAL), laid out as the invocations are: slot * per +
 * k, or k * P + slot where the slots are fastest (per = L there: a warp then
 * stores and reads P neighbouring entries, no two in one memory bank); k
 * where one output has the work group. So an invocation's own entry (its
 * lane's) is local_id. */
static UOp *slot_base(LowerCtx *lc, UOp *k, int64_t per) {
  if (!lc->gslot) return k;
  if (lc->slots_fast) return b2(OP_ADD, b2(OP_MUL, k, b_c(lc, lc->gslots)), lc->gslot);
  return b2(OP_ADD, b2(OP_MUL, lc->gslot, b_c(lc, per)), k);
}

/* The combine through subgroups (CodegenOpts.subgroup = S dividing L): each
 * subgroup reduces its S partials at once (SUBGROUP_REDUCE, in an order the
 * device chooses); its first invocation stores the total in work-group
 * memory at the subgroup's id; after a barrier every lane combines the L/S
 * totals in subgroup order. Each lane reads L/S values instead of 16 + L/16
 * (2 on a GPU with 32-wide subgroups and 64 lanes). Where L = S (a warp per
 * output) the subgroup's total is the result: no work-group memory, no
 * barrier. */
static UOp *subgroup_combine(LowerCtx *lc, Op op, UOp *ident, UOp *v) {
  UCtx *c = lc->ctx;
  int64_t S = lc->subgroup, n = lc->glanes / S, P = lc->gslots, ids[2] = {lc->nlocal++, P * n};
  DType dt = v->dtype;
  UOp *tot = uop_new(c, OP_SUBGROUP_REDUCE, dt, 1, &v, arg_int(op));
  if (n == 1) return tot; /* one subgroup per output: its total, no barrier */
  UOp *sid = b_special(lc, arg_var("subgroup_id", 0, P * n - 1));
  UOp *sl = b_special(lc, arg_var("subgroup_lane", 0, S - 1));
  UOp *first = b2(OP_CMPLT, sl, b_c(lc, 1));
  UOp *mem = uop_new(c, OP_DEFINE_LOCAL, dt_ptr(dt, ADDR_LOCAL), 0, NULL, arg_ints(2, ids));
  UOp *place =
      mem && sid ? uop_new(c, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, sid}, arg_none()) : NULL;
  UOp *st = place && tot && first ? uop_new(c, OP_STORE, dt_make(DT_VOID), 3,
                                            (UOp *[]){place, tot, first}, arg_none())
                                  : NULL;
  UOp *bar = st ? uop_new(c, OP_BARRIER, dt_make(DT_VOID), 1, &st, arg_none()) : NULL;
  UOp *r = bar ? b_range(lc, n, lc->range_id++) : NULL;
  UOp *k = r ? slot_base(lc, r, n) : NULL; /* this slot's subgroups */
  UOp *at = k ? uop_new(c, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, k}, arg_none()) : NULL;
  UOp *ld = at ? uop_new(c, OP_LOAD, dt, 2, (UOp *[]){at, bar}, arg_none()) : NULL;
  UOp *acc = ld ? uop_new(c, OP_DEFINE_ACC, dt, 2, (UOp *[]){ident, r}, arg_int(lc->nacc++)) : NULL;
  UOp *upd = acc ? b2(op, acc, ld) : NULL;
  return upd ? uop_new(c, OP_ASSIGN, dt, 2, (UOp *[]){acc, upd}, arg_none()) : NULL;
}

/* A grouped reduce's second stage (opt.h, OPT_GROUP): each lane's partial v
 * goes to work-group memory; after a barrier every lane combines the L
 * partials in lane order. A float sum of more than 16 partials goes in two
 * levels: lane b < L/16 sums block b (partials 16b .. 16b+15) into a second
 * array, and after another barrier every lane sums the L/16 block sums in
 * order: the same additions as one lane doing both levels, but each lane
 * reads 16 + L/16 partials instead of L. (Lanes past L/16 sum a block too,
 * the last, into their own slot: every lane stores, no two to one place.)
 * Through subgroups instead where the device reduces across them. */
static UOp *group_combine(LowerCtx *lc, Op op, UOp *ident, UOp *v, bool sum) {
  UCtx *c = lc->ctx;
  if (via_subgroups(lc)) return subgroup_combine(lc, op, ident, v);
  int64_t L = lc->glanes, P = lc->gslots, ids[2] = {lc->nlocal++, P * L};
  DType dt = v->dtype;
  UOp *mem = uop_new(c, OP_DEFINE_LOCAL, dt_ptr(dt, ADDR_LOCAL), 0, NULL, arg_ints(2, ids));
  UOp *mine = lc->inv; /* the invocation's own entry (slot_base) */
  UOp *place = mem ? uop_new(c, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, mine}, arg_none()) : NULL;
  UOp *st =
      place ? uop_new(c, OP_STORE, dt_make(DT_VOID), 2, (UOp *[]){place, v}, arg_none()) : NULL;
  UOp *bar = st ? uop_new(c, OP_BARRIER, dt_make(DT_VOID), 1, &st, arg_none()) : NULL;
  if (!bar) return NULL;
  int64_t inner = sum && L > CG_SUM_BLOCK ? CG_SUM_BLOCK : L, outer = L / inner;
  UOp *ri = b_range(lc, inner, lc->range_id++);
  if (!ri) return NULL;
  /* the block this lane sums: its own, or past the blocks the last */
  UOp *blk = outer > 1 ? b_min(lc->lane, b_c(lc, outer - 1)) : NULL;
  UOp *k = blk ? b2(OP_ADD, b2(OP_MUL, blk, b_c(lc, inner)), ri) : ri;
  k = k ? slot_base(lc, k, L) : NULL;
  UOp *at = k ? uop_new(c, OP_INDEX, mem->dtype, 2, (UOp *[]){mem, k}, arg_none()) : NULL;
  UOp *ld = at ? uop_new(c, OP_LOAD, dt, 2, (UOp *[]){at, bar}, arg_none()) : NULL;
  UOp *acc =
      ld ? uop_new(c, OP_DEFINE_ACC, dt, 2, (UOp *[]){ident, ri}, arg_int(lc->nacc++)) : NULL;
  UOp *r = acc ? b2(op, acc, ld) : NULL;
  r = r ? uop_new(c, OP_ASSIGN, dt, 2, (UOp *[]){acc, r}, arg_none()) : NULL;
  if (!r || outer == 1) return r;
  /* the block sums, through a second array, summed in order */
  int64_t ids2[2] = {lc->nlocal++, P * L};
  UOp *mem2 = uop_new(c, OP_DEFINE_LOCAL, dt_ptr(dt, ADDR_LOCAL), 0, NULL, arg_ints(2, ids2));
  UOp *p2 = mem2 ? uop_new(c, OP_INDEX, mem2->dtype, 2, (UOp *[]){mem2, mine}, arg_none()) : NULL;
  UOp *st2 = p2 ? uop_new(c, OP_STORE, dt_make(DT_VOID), 2, (UOp *[]){p2, r}, arg_none()) : NULL;
  UOp *bar2 = st2 ? uop_new(c, OP_BARRIER, dt_make(DT_VOID), 1, &st2, arg_none()) : NULL;
  UOp *ro = bar2 ? b_range(lc, outer, lc->range_id++) : NULL;
  UOp *ko = ro ? slot_base(lc, ro, L) : NULL;
  UOp *at2 = ko ? uop_new(c, OP_INDEX, mem2->dtype, 2, (UOp *[]){mem2, ko}, arg_none()) : NULL;
  UOp *ld2 = at2 ? uop_new(c, OP_LOAD, dt, 2, (UOp *[]){at2, bar2}, arg_none()) : NULL;
  UOp *acc2 =
      ld2 ? uop_new(c, OP_DEFINE_ACC, dt, 2, (UOp *[]){ident, ro}, arg_int(lc->nacc++)) : NULL;
  UOp *r2 = acc2 ? b2(op, acc2, ld2) : NULL;
  return r2 ? uop_new(c, OP_ASSIGN, dt, 2, (UOp *[]){acc2, r2}, arg_none()) : NULL;
}

/* The accumulation of x over loops[0..nl) (innermost first), in levels for a
 * float sum: the ASSIGN whose value is the reduce's once the loops close.
 * NULL: out of memory. */
static UOp *levels(LowerCtx *lc, Op op, UOp *ident, UOp *x, UOp *const *loops, int nl, bool sum) {
  UOp *v = x; /* the value of the levels so far, once their loops close */
  for (int at = 0; at < nl;) {
    /* the level: loops [at, end), as many as multiply to at most the block
     * (at least one); exact: all */
    int end = at + 1;
    if (!sum) {
      end = nl;
    } else {
      for (int64_t it = trips(loops[at]); end < nl && it * trips(loops[end]) <= CG_SUM_BLOCK;)
        it *= trips(loops[end++]);
    }
    UOp *src[1 + MAX_LOOPS];
    int ns = 0;
    src[ns++] = ident;
    for (int q = end - 1; q >= at; q--) src[ns++] = loops[q]; /* outermost first */
    UOp *acc = uop_new(lc->ctx, OP_DEFINE_ACC, ident->dtype, ns, src, arg_int(lc->nacc++));
    UOp *upd = acc ? b2(op, acc, v) : NULL;
    v = upd ? uop_new(lc->ctx, OP_ASSIGN, ident->dtype, 2, (UOp *[]){acc, upd}, arg_none()) : NULL;
    if (!v) return NULL;
    at = end;
  }
  return v;
}

/* A float32's bits as an int32 that orders as the float does: the magnitude
 * bits flipped where the sign is set (u ^ (u >> 31) * 0x7fffffff, in
 * uint32 so that no shift is of a negative value). The same map turns a key
 * back into the float's bits. -0 keys below +0, a NaN above +inf (below
 * -inf with its sign bit set). */
static UOp *float_key(LowerCtx *lc, UOp *x, DType to) {
  UCtx *c = lc->ctx;
  DType u32 = dt_make(DT_UINT32);
  UOp *u = uop_new(c, OP_BITCAST, u32, 1, &x, arg_none());
  UOp *s = u ? b2(OP_SHR, u, uop_const_int(c, u32, 31)) : NULL;
  UOp *k = b2(OP_XOR, u, b2(OP_MUL, s, uop_const_int(c, u32, 0x7fffffff)));
  return k ? uop_new(c, OP_BITCAST, to, 1, &k, arg_none()) : NULL;
}

/* A float32 MAX accumulates in keys (float_key), an int32 max: gcc
 * vectorises an int max but not the float select (b > a ? b : a) the IR's
 * MAX is, so the softmax 4096^2 row max ran scalar (1.5-2.5 ms against
 * 3-6.5 in a harness, 2 threads). The maximum is the same number; ties of
 * -0 and +0 give +0, and a NaN wins over every number unless its sign bit
 * is set, which loses even to the identity, -inf (the float select let
 * through whichever NaN came first). tvk_max relies on a NaN winning: it
 * clears the sign of its NaNs first (ops_reduce.c). true when x is keyed. */
static bool keyed_reduce(LowerCtx *lc, const UOp *r, UOp **x, Op op) {
  if (op != OP_MAX || r->dtype.scalar != DT_FLOAT32 || r->dtype.count != 1) return false;
  *x = float_key(lc, *x, dt_make(DT_INT32));
  return true;
}

/* REDUCE_AXIS(x) -> ASSIGN(acc, acc op x), acc = DEFINE_ACC(identity, the reduce's loops).
 *
 * A float sum accumulates in levels (CG_SUM_BLOCK): its loops, innermost
 * first, are grouped into levels of at most CG_SUM_BLOCK iterations, each
 * with an accumulator of its own; level L + 1 adds level L's total each time
 * level L's loops close. (Level 0 is a plain loop, not a tree of adds: a
 * register tile of loop-carried accumulators is what compilers vectorise.) An exact reduce
 * (integers, max, product) has one level over every loop. Elements past an
 * axis's end (its digits cover more) are the identity.
 *
 * Both lowerings make the same loops, so they add the same numbers in the
 * same order. */
static UOp *lower_reduce(void *ctx, UOp **c) {
  LowerCtx *lc = ctx;
  UOp *r = c[X], *x = r->src[0], *loops[MAX_LOOPS];
  Op op = (Op)r->arg.red.op;
  bool sum = op == OP_ADD && dt_is_float(r->dtype);
  int nl = 0; /* loops, innermost first */
  bool keyed = keyed_reduce(lc, r, &x, op);
  /* keys: -inf's (0xff800000 ^ 0x7fffffff), so an empty max is still -inf */
  UOp *ident = keyed ? uop_const_int(lc->ctx, dt_make(DT_INT32), (int32_t)0x807fffff)
                     : identity(lc, op, r->dtype);
  if (!x || !ident) return oom(lc);
  for (int i = r->arg.red.n - 1; i >= 0; i--) {
    int d = (int)r->arg.red.axes[i];
    for (int j = 0; j < lc->ndig[d]; j++) loops[nl++] = lc->dig[d][j];
    if (lc->past[d]) { /* past the axis's end: the identity */
      UOp *in = b2(OP_CMPLT, lc->past[d], b_c(lc, lc->ks->full[d]));
      if (!in || !(x = uop_where(in, x, ident))) return oom(lc);
    }
  }
  bool lanes = false;
  for (int i = 0; i < r->arg.red.n; i++) lanes |= (int)r->arg.red.axes[i] == lc->uaxis;
  UOp *v = NULL;
  if (!lanes) {
    v = levels(lc, op, ident, x, loops, nl, sum);
  } else { /* UNROLL: a chain of levels per lane, combined in lane order */
    UOp *lane[OPT_MAX_UNROLL];
    for (int64_t l = 0; l < lc->ulanes; l++) {
      UOp *k = b_c(lc, l), *xl = k ? uop_substitute(x, 1, &lc->ulane, &k) : NULL;
      if (!xl || !(lane[l] = levels(lc, op, ident, xl, loops, nl, sum))) return oom(lc);
    }
    v = fold(op, lane[0], lane + 1, (int)lc->ulanes - 1);
    if (lc->ufull && v) { /* a symbolic axis: the elements left, lane 0 at n / u, ... */
      UOp *j = lc->dig[lc->uaxis][0], *from[2] = {lc->ulane, j}, *to[2] = {lc->uleft, lc->ufull};
      UOp *xt = uop_substitute(x, 2, from, to), *tl[MAX_LOOPS];
      for (int i = 0; i < nl; i++) tl[i] = loops[i] == j ? lc->uleft : loops[i];
      v = xt ? b2(op, v, levels(lc, op, ident, xt, tl, nl, sum)) : NULL;
    }
  }
  if (!v) return oom(lc);
  bool grouped = false;
  for (int i = 0; i < r->arg.red.n; i++) grouped |= (int)r->arg.red.axes[i] == lc->gaxis;
  if (grouped && !(v = group_combine(lc, op, ident, v, sum))) return oom(lc);
  if (keyed) v = float_key(lc, v, r->dtype);
  return v ? v : oom(lc);
}

#define P_GLOBAL PAT_OP0(OP_DEFINE_GLOBAL, B)
#define P_VIEW PAT_OP0(OP_VIEW, V)

static const Rule lower_rules[] = {
    /* LOAD(buf, VIEW) -> LOAD(INDEX(buf, idx) [, 0, valid]) */
    {PAT_OP(OP_LOAD, X, P_GLOBAL, P_VIEW), lower_load},
    /* STORE(buf, VIEW, x) -> STORE(INDEX(buf, idx), x [, valid], ranges) */
    {PAT_OP(OP_STORE, X, P_GLOBAL, P_VIEW, PAT_ANY(Y)), lower_store},
    /* CONST(VIEW) -> valid ? c : 0 */
    {PAT_OP(OP_CONST, X, P_VIEW), lower_const},
    /* ARANGE(VIEW) -> valid ? idx : 0 */
    {PAT_OP(OP_ARANGE, X, P_VIEW), lower_arange},
    /* REDUCE_AXIS(x) -> ASSIGN(acc, acc op x) */
    {PAT_OP0(OP_REDUCE_AXIS, X), lower_reduce},
};

/* The rewrite, once the axes are made. */
static tvk_status lower_rewrite(UOp *ast, LowerCtx *lc, UOp **out, Error *err) {
  PatternMatcher *pm = pm_new(lower_rules, RULES_N(lower_rules));
  if (!pm) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  UOp *res = graph_rewrite(ast, pm, lc, false);
  pm_free(pm);
  if (err->status != TVK_OK) return err->status;
  if (!res) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  *out = res;
  return TVK_OK;
}

/* The rewrite once per copy of the body (the lanes of the upcast axes,
 * row-major: the last axis's lanes fastest), the stores of every copy in one
 * SINK. Copies share the loops and whatever does not depend on a lane
 * (hash-consing); each has accumulators of its own (lc->nacc goes on). */
static tvk_status lower_copies(UOp *ast, LowerCtx *lc, UOp **out, Error *err) {
  const KernelDesc *ks = lc->ks;
  int64_t copies = 1;
  for (int d = 0; d < ks->ndim; d++) copies *= lc->up[d];
  if (copies == 1) return lower_rewrite(ast, lc, out, err);
  size_t cap = (size_t)copies * ast->nsrc, n = 0;
  UOp **stores = malloc(cap * sizeof *stores);
  if (!stores) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  tvk_status st = TVK_OK;
  for (int64_t c = 0; c < copies && st == TVK_OK; c++) {
    int64_t rest = c;
    for (int d = ks->ndim - 1; d >= 0; d--) {
      if (lc->up[d] == 1) continue;
      int64_t lane = rest % lc->up[d];
      rest /= lc->up[d];
      if (lc->spread >> d & 1) {
        /* runs of r neighbours n/(up/r) apart: run lane / r starts at
         * (lane / r) * n / (up / r), and block b's elements in it are
         * b * r + lane % r; with r = 1, neighbouring blocks are neighbours */
        int64_t r = lc->run[d], seg = ks->full[d] / (lc->up[d] / r);
        UOp *k = b_c(lc, lane / r * seg + lane % r);
        lc->axis[d] = r > 1 ? b2(OP_ADD, b2(OP_MUL, lc->block[d], b_c(lc, r)), k)
                            : b2(OP_ADD, lc->block[d], k);
      } else { /* block * up + lane */
        UOp *k = b_c(lc, lane), *a = b_c(lc, lc->up[d]);
        lc->axis[d] = b2(OP_ADD, b2(OP_MUL, lc->block[d], a), k);
        /* a symbolic axis: the last block's lanes past the size are clamped
         * and not stored, except in a peeled kernel's full blocks */
        bool full = d == lc->peel && lc->version == 1;
        if (ks->sym_axes >> d & 1 && !full) {
          UOp *size = sint_uop(lc->ctx, lc->idt, ks->sym[d]);
          lc->tail[d] = lc->axis[d];
          lc->axis[d] = size ? b_min(lc->axis[d], uop_sub(size, b_c(lc, 1))) : NULL;
        }
      }
      if (!lc->axis[d]) st = err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
    }
    UOp *res = NULL;
    if (st == TVK_OK && (st = lower_rewrite(ast, lc, &res, err)) == TVK_OK)
      for (uint32_t i = 0; res && i < res->nsrc && n < cap; i++) stores[n++] = res->src[i];
  }
  if (st == TVK_OK && !(*out = uop_sink(lc->ctx, (int)n, stores)))
    st = err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  free(stores);
  return st;
}

/* What lowering needs to know of the AST's reduces before making the axes:
 * the axes float sums reduce (split into digits). */
static bool scan_reduces(UOp *ast, uint32_t *sum_axes) {
  size_t n = 0;
  UOp **t = uop_toposort(ast, &n);
  if (!t) return false;
  *sum_axes = 0;
  for (size_t i = 0; i < n; i++)
    if (t[i]->op == OP_REDUCE_AXIS && t[i]->arg.red.op == OP_ADD && dt_is_float(t[i]->dtype))
      for (int k = 0; k < t[i]->arg.red.n; k++) *sum_axes |= 1u << t[i]->arg.red.axes[k];
  free(t);
  return true;
}

static bool lower_init(LowerCtx *lc, UOp *ast, const KernelDesc *ks, const OptPlan *plan,
                       Error *err) {
  *lc = (LowerCtx){.ctx = ast->ctx, .ks = ks, .err = err, .peel = -1, .row_axis = -1, .gslots = 1};
  opt_upcasts(ks, plan, lc->up);
  lc->spread = opt_spread_axes(plan);
  for (int d = 0; d < TVK_MAX_DIMS; d++) lc->run[d] = opt_spread_run(plan, d);
  opt_locals(plan, lc->loc);
  lc->saxis = opt_stage(plan, &lc->sblock);
  lc->gaxis = opt_group(plan, &lc->glanes);
  lc->uaxis = opt_unroll(plan, &lc->ulanes);
  lc->caxis = opt_cache(plan, &lc->crun);
  lc->idt = ks->index64 ? dt_make(DT_INT64) : dt_make(DT_INT32);
  lc->range_id = 2 * ks->ndim + 2; /* after the axes and the bounds range */
  lc->zero = b_c(lc, 0);
  return lc->zero && scan_reduces(ast, &lc->split);
}

/* Cores mode's launch: how many cores can have work (the split axis's
 * extent) and the loop iterations of the kernel per index of that axis, so
 * a device can run a small kernel on one core rather than wake the others.
 * A symbolic split axis's extent is counted from the values at launch
 * (groups; global[0] its largest value). */
static void cores_launch(const LowerCtx *lc, CgLaunch *launch) {
  int64_t total = kernel_iterations(lc->ks, ~0u);
  int64_t n = lc->split_n > 0 ? lc->split_n : 1;
  *launch = (CgLaunch){{n, total / n, 1}, {1, 1, 1}, lc->split_sym, lc->row_axis};
}

/* The axis to peel (CG_RANGE_VERSION), or -1: in a register tile (an
 * upcast around a reduce), the innermost symbolic output axis upcast in
 * blocks, which is not split across cores and has no runs. Its lanes are
 * then the vector lanes, and masked they are not vectors: each lane's
 * store has a gate of its own and its index a clamp (a decoder's attention
 * scores over seq x seq ran 8x slower than the kernel for the number). A
 * masked row axis of a tile whose lanes run along a fixed axis costs
 * little (the gates are the same along a row) and is not peeled. */
static int peel_axis(LowerCtx *lc) {
  const KernelDesc *ks = lc->ks;
  int a0, a1;
  split_axes(lc, &a0, &a1);
  if (!ks->reduce_axes || !ks->sym_axes || lc->caxis >= 0 || a0 < 0 || a1 >= 0) return -1;
  int inner = -1; /* the innermost upcast output axis */
  for (int d = 0; d < ks->ndim; d++)
    if (!(ks->reduce_axes >> d & 1) && lc->up[d] > 1) inner = d;
  if (inner <= a0 || !(ks->sym_axes >> inner & 1) || lc->spread >> inner & 1) return -1;
  /* Both copies must be able to run: a loop whose count is 0 for every
   * value has its RANGE folded away, and what it held would be hoisted out
   * and run unmasked (full blocks when the size is always below u; a tail
   * when u divides every size). */
  UOp *full, *left;
  if (!peel_counts(lc, inner, &full, &left)) return -1;
  full = uop_simplify(full), left = uop_simplify(left);
  return full && left && uop_vmax(full) >= 1 && uop_vmax(left) >= 1 ? inner : -1;
}

/* The kernel made twice, its full blocks unmasked then its last one masked,
 * the stores of both in one SINK; each copy makes its axes from lc as
 * lower_init left it, the second numbering its accumulators on. */
static tvk_status lower_peeled(UOp *ast, LowerCtx *lc, UOp **out, Error *err) {
  LowerCtx start = *lc;
  UOp *part[2] = {NULL, NULL};
  tvk_status st = TVK_OK;
  for (int v = 1; v <= 2 && st == TVK_OK; v++) {
    int nacc = lc->nacc;
    *lc = start;
    lc->nacc = nacc, lc->version = v;
    if (!make_axes(lc)) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
    st = lower_copies(ast, lc, &part[v - 1], err);
  }
  if (st != TVK_OK) return st;
  size_t n = part[0]->nsrc + part[1]->nsrc;
  UOp **stores = malloc(n * sizeof *stores);
  if (!stores) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  memcpy(stores, part[0]->src, part[0]->nsrc * sizeof *stores);
  memcpy(stores + part[0]->nsrc, part[1]->src, part[1]->nsrc * sizeof *stores);
  *out = uop_sink(lc->ctx, (int)n, stores);
  free(stores);
  return *out ? TVK_OK : err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
}

tvk_status lower_kernel(UOp *ast, const KernelDesc *ks, const OptPlan *plan, UOp **out,
                        CgLaunch *launch, Error *err) {
  *out = NULL;
  LowerCtx lc;
  if (!lower_init(&lc, ast, ks, plan, err))
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  if ((lc.peel = peel_axis(&lc)) >= 0) {
    tvk_status st = lower_peeled(ast, &lc, out, err);
    cores_launch(&lc, launch); /* the split is the same in both copies */
    return st;
  }
  if (!make_axes(&lc)) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  cores_launch(&lc, launch);
  return lower_copies(ast, &lc, out, err);
}

tvk_status lower_kernel_grid(UOp *ast, const KernelDesc *ks, const OptPlan *plan, int local_size,
                             int subgroup, UOp **out, CgLaunch *launch, Error *err) {
  *out = NULL;
  if (local_size < 1)
    return err_first(err, TVK_ERR_INVALID_ARG, "lowering: work-group size %d", local_size);
  LowerCtx lc;
  if (!lower_init(&lc, ast, ks, plan, err))
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  lc.subgroup = subgroup;
  if (!make_axes_grid(&lc, local_size, launch))
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  if (lc.saxis >= 0 && lc.ndig[lc.saxis] > 1) { /* the barrier opening each staged block */
    int k = lc.saxis;
    lc.bar0 =
        uop_new(lc.ctx, OP_BARRIER, dt_make(DT_VOID), lc.ndig[k] - 1, lc.dig[k] + 1, arg_none());
    if (!lc.bar0) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "lowering: out of memory");
  }
  if (check_budget(&lc) != TVK_OK) return err->status;
  return lower_copies(ast, &lc, out, err);
}
