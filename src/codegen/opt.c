/* Optimisation plans (opt.h): checking, naming, and the heuristic that picks
 * one from the kernel's shape without timing anything. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

#define CORES (1u << CG_MODE_CORES)
#define GRID (1u << CG_MODE_GRID)
#define NO_GROUPS "the device has no work groups"
/* name, modes, why not elsewhere, reduced axis, shares an axis, once, search: modes, amounts */
static const OptKindInfo kinds[OPT_KINDS] = {
    [OPT_UPCAST] = {"UPCAST", CORES | GRID, NULL, false, false, false, CORES | GRID, 2, 32},
    [OPT_GROUP] = {"GROUP", GRID, NO_GROUPS, true, false, true, GRID, 16, OPT_MAX_GROUP},
    [OPT_UNROLL] = {"UNROLL", CORES | GRID, NULL, true, false, true, CORES | GRID, 4, 32},
    [OPT_SPREAD] = {"SPREAD", CORES | GRID, NULL, false, false, false, GRID, 2, 32},
    [OPT_LOCAL] = {"LOCAL", GRID, NO_GROUPS, false, true, false, GRID, 4, 16},
    [OPT_STAGE] = {"STAGE", GRID, NO_GROUPS, true, true, true, 0, 0, 0},
    [OPT_CACHE] = {"CACHE", CORES, "the device runs no loops over outputs", false, true, true,
                   CORES, 4, 16},
};

const OptKindInfo *opt_kind_info(int k) { return k >= 0 && k < OPT_KINDS ? &kinds[k] : NULL; }

static bool is_output_axis(const KernelDesc *kd, int d) { return !(kd->reduce_axes >> d & 1); }

#define OPT_MAX_GROUP_STR "256"
_Static_assert(OPT_MAX_GROUP == 256, "OPT_MAX_GROUP_STR spells it");
#define OPT_MAX_UNROLL_STR "64"
_Static_assert(OPT_MAX_UNROLL == 64, "OPT_MAX_UNROLL_STR spells it");
/* A reduce with fewer outputs than this is grouped (its axis read with stride
 * 1 or not): so few invocations cannot keep a device busy. Measured on
 * lavapipe, grouping the 256 outputs of a 16M-element sum's first stage was
 * 6x slower than an invocation per output, so more outputs are left alone
 * until a timed search can tell per device. */
#define OPT_GROUP_MAX_OUTPUTS 64
/* A GPU work group of a grouped reduce has at least this many invocations
 * where its outputs allow (two warps of 32, one wave of 64). */
#define OPT_GPU_MIN_LOCAL 64
/* Invocations that keep a GPU busy: a reduce with fewer outputs than this
 * splits its reduce across lanes too (columns_plan). A large GPU holds some
 * 2^17 to 2^18 invocations at once (an H100: 132 SMs of 2048); 2^16 keeps
 * enough loads in flight to near its memory bandwidth. */
#define OPT_GPU_FILL 65536
/* What the upcast copies of a CPU reduce across rows may weigh in all
 * (body_weight): a column sum (weight ~7) takes 128 copies. */
#define OPT_CPU_ROWS_BUDGET 2048
/* Elements of an elementwise kernel per GPU invocation, at most. */
#define OPT_GRID_ELEMENTS 8
/* What a GPU invocation's upcast copies of an elementwise body may weigh in
 * all (body_weight): a*b+c (weight 10), exp (30) and softmax's last kernel
 * (about 45) are upcast by 8, sin (114) by 2, two sins or more not at all.
 * Each copy inlines every math helper again, and a compiler's time grows
 * faster than the code (lavapipe, a chain of sin, mul, sin, mul over 4096
 * floats: 8.5 s to compile upcast by 8, 0.5 s not); lavapipe's softmax
 * 4096^2 ran as fast as before at 384 and 30% slower at 96 (upcast 2). */
#define OPT_GRID_BODY_BUDGET 384
/* A GPU reduce axis this long or longer is unrolled (opt_heuristic). */
#define OPT_GRID_UNROLL_FROM 1024
/* An emulated device's matmul tile (emulated_tile): at most 16 x 16, its
 * copies weighing at most this in all (body_weight; a plain matmul weighs 7,
 * one with a GELU after it 47: its 16 x 16 tile took 3.6 s to compile on
 * lavapipe, 16 x 8 0.65-1.1 s, a plain 16 x 16 0.47 s) */
#define OPT_EMULATED_TILE_BUDGET 6144
/* ... and leaving at least this many invocations (16 work groups of 64) for
 * the device's threads. */
#define OPT_EMULATED_MIN_INVOCATIONS 1024

/* What GROUP needs of the kernel's reduces: all reduce one axis set (returned
 * in *axes; *nred counts them), none is nested in another, all of 32-bit
 * dtypes if need32 (work-group memory holds 32-bit values). NULL when it
 * can, else why not. */
static const char *group_blocker(UOp *norm, bool need32, uint32_t *axes, int *nred) {
  size_t n = 0;
  UOp **t = uop_toposort(norm, &n);
  if (!t) return "out of memory";
  const char *why = NULL;
  *axes = 0, *nred = 0;
  for (size_t i = 0; i < n && !why; i++) {
    const UOp *u = t[i];
    if (u->op != OP_REDUCE_AXIS) continue;
    ++*nred;
    uint32_t m = 0;
    for (int k = 0; k < u->arg.red.n; k++) m |= 1u << u->arg.red.axes[k];
    if (*axes && m != *axes) why = "its reduces reduce different axes";
    *axes = m;
    if (need32 && dt_bits(u->dtype) != 32) why = "a reduce is not of a 32-bit dtype";
    size_t nb = 0;
    UOp **b = uop_toposort(u->src[0], &nb);
    for (size_t j = 0; b && j < nb && !why; j++)
      if (b[j]->op == OP_REDUCE_AXIS) why = "a reduce is nested in another";
    if (!b) why = "out of memory";
    free(b);
  }
  free(t);
  return why;
}

static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static const char *stage_blocker(UOp *norm, const KernelDesc *kd, const OptStep *s, uint32_t local,
                                 int groups, int unrolls, uint32_t spread);
static int step_of(const OptPlan *plan, OptKind kind, int64_t *amount);

void opt_target(const CodegenOpts *o, OptTarget *t) {
  int local = o && o->local_size > 0 ? o->local_size : 64;
  *t = (OptTarget){.mode = o ? o->mode : CG_MODE_CORES,
                   .vector_floats = o && o->vector_floats ? o->vector_floats : 8,
                   .vector_regs = o && o->vector_regs ? o->vector_regs : 16,
                   .max_local = o && o->max_local > 0 ? o->max_local : local,
                   .shared_bytes = o ? o->shared_bytes : 0,
                   .emulated = o && o->emulated,
                   .cache_bytes = o ? o->cache_bytes : 0};
}

tvk_status opt_check(UOp *norm, const KernelDesc *kd, const OptPlan *plan, const OptTarget *t,
                     Error *err) {
  if (plan->n < 0 || plan->n > OPT_MAX_STEPS)
    return err_set(err, TVK_ERR_INVALID_ARG, "opt: a plan of %d steps (at most %d)", plan->n,
                   OPT_MAX_STEPS);
  /* On a GPU the numbering of work groups, tiles and lanes is counted when
   * the kernel is made, from sizes a symbolic kernel does not have: such a
   * kernel takes the steps that keep one invocation per output block. */
  for (int i = 0; kd->sym_axes && t->mode == CG_MODE_GRID && i < plan->n; i++)
    if (plan->step[i].kind != OPT_UPCAST && plan->step[i].kind != OPT_UNROLL)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: %s: a GPU kernel with symbolic sizes (axes 0x%x) takes "
                     "UPCAST and UNROLL only",
                     i, plan->step[i].kind < OPT_KINDS ? kinds[plan->step[i].kind].name : "?",
                     kd->sym_axes);
  /* A symbolic axis takes one UPCAST, its last block masked, or when it is
   * the kernel's one reduced axis one UNROLL, the elements past its full
   * blocks in a loop of their own (lowering); other kinds count blocks, runs
   * or tiles when the kernel is made. */
  for (int i = 0; i < plan->n; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind >= OPT_KINDS || s->axis >= kd->ndim || !(kd->sym_axes >> s->axis & 1))
      continue; /* (a bad kind or axis: the checks below say so) */
    bool once = true;
    for (int j = 0; j < i; j++) once &= plan->step[j].axis != s->axis;
    if (s->kind == OPT_UNROLL && once && kd->reduce_axes == 1u << s->axis) continue;
    if (s->kind != OPT_UPCAST || !once || !is_output_axis(kd, s->axis) || s->amount < 2 ||
        s->amount > OPT_MAX_COPIES)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: %s(%d, %" PRId32
                     "): the axis has a symbolic size: one UPCAST of 2 to %d is all it takes, "
                     "or one UNROLL when it is the only reduced axis",
                     i, kinds[s->kind].name, s->axis, s->amount, OPT_MAX_COPIES);
  }
  int64_t copies = 1;
  uint32_t seen = 0, spread = 0, upcast = 0; /* axes split by any step, by SPREAD, by UPCAST */
  uint32_t local = 0;                        /* axes split by LOCAL */
  uint32_t grouped = 0, unrolled = 0;        /* by GROUP, by UNROLL */
  int64_t unroll_lanes = 1;
  int64_t split[TVK_MAX_DIMS]; /* per axis: what SPREAD and UPCAST split it by so far */
  for (int d = 0; d < TVK_MAX_DIMS; d++) split[d] = 1;
  size_t group_bytes = 0; /* a GROUP's work-group memory per copy of the body */
  int group_step = -1;
  int count[OPT_KINDS] = {0}; /* steps of each kind so far */
  for (int i = 0; i < plan->n; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind >= OPT_KINDS)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d has kind %d", i, s->kind);
    const OptKindInfo *ki = &kinds[s->kind];
    const char *k = ki->name;
    if (s->axis >= kd->ndim)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: %s of axis %d of a %d-dim kernel", i,
                     k, s->axis, kd->ndim);
    /* what the table says of every kind: where it applies, which axes, how often */
    const char *why = !(ki->modes >> t->mode & 1)                    ? ki->no_mode
                      : ki->reduced && is_output_axis(kd, s->axis)   ? "the axis is not reduced"
                      : !ki->reduced && !is_output_axis(kd, s->axis) ? "the axis is reduced"
                      : ki->once && count[s->kind]                   ? "the plan has another"
                                                                     : NULL;
    if (why)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: %s(%d, %" PRId32 "): %s%s%s", i, k,
                     s->axis, s->amount, why, ki->once && count[s->kind] ? " " : "",
                     ki->once && count[s->kind] ? k : "");
    count[s->kind]++;
    if (s->kind == OPT_STAGE || s->kind == OPT_CACHE) continue; /* checked below */
    if (s->kind == OPT_LOCAL) { /* checked below, against the axis's blocks */
      if (local >> s->axis & 1)
        return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: axis %d is split twice", i,
                       s->axis);
      local |= 1u << s->axis;
      continue;
    }
    /* one step per axis, but for a SPREAD and an UPCAST of one axis (spread
     * quads) and a GROUP and an UNROLL of one (runs of neighbours per lane) */
    bool pair = (s->kind == OPT_SPREAD && (upcast & ~spread) >> s->axis & 1) ||
                (s->kind == OPT_UPCAST && (spread & ~upcast) >> s->axis & 1) ||
                (s->kind == OPT_GROUP && (unrolled & ~grouped) >> s->axis & 1) ||
                (s->kind == OPT_UNROLL && (grouped & ~unrolled) >> s->axis & 1);
    if (seen >> s->axis & 1 && !pair)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: axis %d is split twice", i, s->axis);
    seen |= 1u << s->axis;
    if (s->kind == OPT_SPREAD) spread |= 1u << s->axis;
    if (s->kind == OPT_UPCAST) upcast |= 1u << s->axis;
    if (s->kind == OPT_GROUP) grouped |= 1u << s->axis;
    if (s->kind == OPT_UNROLL) unrolled |= 1u << s->axis, unroll_lanes = s->amount;
    int64_t n = kd->full[s->axis];
    if (s->kind == OPT_GROUP) {
      uint32_t axes = 0;
      int nred = 0;
      why = group_blocker(norm, true, &axes, &nred);
      if (!why && !(axes >> s->axis & 1)) why = "the axis is not reduced";
      if (!why && (!pow2(s->amount) || s->amount < 2 || s->amount > OPT_MAX_GROUP))
        why = "the amount must be a power of two from 2 to " OPT_MAX_GROUP_STR;
      /* with a LOCAL of an output axis, slots outputs of `amount` lanes each */
      int64_t slots = 1;
      for (int j = 0; j < plan->n; j++)
        if (plan->step[j].kind == OPT_LOCAL && plan->step[j].amount > 1)
          slots *= plan->step[j].amount;
      if (!why && s->amount * slots > t->max_local) why = "more invocations than a work group has";
      if (why)
        return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: GROUP(%d, %" PRId32 "): %s", i,
                       s->axis, s->amount, why);
      /* two arrays of partials per reduce and upcast copy: checked below */
      group_bytes = (size_t)(s->amount * slots) * 8 * (size_t)nred, group_step = i;
      continue;
    }
    if (s->kind == OPT_UNROLL) {
      uint32_t axes = 0;
      int nred = 0;
      why = group_blocker(norm, false, &axes, &nred);
      if (!why && !(axes >> s->axis & 1)) why = "the axis is not reduced";
      bool sym = kd->sym_axes >> s->axis & 1; /* (its tail loops on its own) */
      if (!why && (s->amount < 2 || s->amount > OPT_MAX_UNROLL || (!sym && n % s->amount != 0)))
        why = "the amount must divide the axis and be from 2 to " OPT_MAX_UNROLL_STR;
      if (why)
        return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: UNROLL(%d, %" PRId32 "): %s", i,
                       s->axis, s->amount, why);
      copies *= s->amount;
      if (copies > OPT_MAX_COPIES)
        return err_set(err, TVK_ERR_INVALID_ARG,
                       "opt: step %d: the plan makes %" PRId64 " copies of the body (at most %d)",
                       i, copies, OPT_MAX_COPIES);
      continue;
    }
    /* UPCAST, SPREAD (a symbolic axis's UPCAST: its tail is masked) */
    bool masked = kd->sym_axes >> s->axis & 1;
    if (s->amount < 1 || s->amount > OPT_MAX_COPIES ||
        (!masked && n % (split[s->axis] * s->amount) != 0))
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: %s(%d, %" PRId32 ") of an axis of size %" PRId64
                     " (the amounts on the axis must divide it)",
                     i, k, s->axis, s->amount, n);
    split[s->axis] *= s->amount;
    copies *= s->amount;
    if (copies > OPT_MAX_COPIES)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: the upcasts make %" PRId64 " copies of the body (at most %d)",
                     i, copies, OPT_MAX_COPIES);
  }
  int groups = count[OPT_GROUP], unrolls = count[OPT_UNROLL];
  /* (an UNROLL's lanes are combined before the GROUP's: one array per copy) */
  int64_t up_copies = copies / unroll_lanes;
  if (groups && group_bytes * (size_t)up_copies > t->shared_bytes) {
    const OptStep *s = &plan->step[group_step];
    return err_set(err, TVK_ERR_INVALID_ARG,
                   "opt: step %d: GROUP(%d, %" PRId32 "): the partials of %" PRId64
                   " copies do not fit the work-group memory (%zu of %zu bytes)",
                   group_step, s->axis, s->amount, up_copies, group_bytes * (size_t)up_copies,
                   t->shared_bytes);
  }
  for (int i = 0; i < plan->n && count[OPT_STAGE]; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind != OPT_STAGE) continue;
    const char *why = stage_blocker(norm, kd, s, local, groups, unrolls, spread);
    if (why)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: STAGE(%d, %" PRId32 "): %s", i,
                     s->axis, s->amount, why);
  }
  /* CACHE: runs of the axis's blocks (what the upcasts leave) */
  for (int i = 0; i < plan->n && count[OPT_CACHE]; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind != OPT_CACHE) continue;
    int64_t blocks = kd->full[s->axis] / split[s->axis];
    const char *why = s->amount < 2 || blocks % s->amount
                          ? "the amount must be from 2 and divide the axis's blocks"
                          : NULL;
    if (why)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: CACHE(%d, %" PRId32 ") of %" PRId64 " blocks: %s", i, s->axis,
                     s->amount, blocks, why);
  }
  /* LOCAL: the axis's blocks (what the upcasts leave) across the work group;
   * with a GROUP, one LOCAL axis: its outputs side by side, each on the
   * GROUP's lanes */
  int64_t invocations = 1;
  int locals = 0;
  for (int i = 0; i < plan->n && local; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind != OPT_LOCAL) continue;
    int64_t blocks = kd->full[s->axis] / split[s->axis];
    locals += s->amount > 1;
    const char *why = groups && locals > 1 ? "a grouped reduce takes one LOCAL axis"
                      : s->amount < 1 || blocks % s->amount
                          ? "the amount must divide the axis's blocks"
                          : NULL;
    if (!why && (invocations *= s->amount) > t->max_local)
      why = "more invocations than a work group has";
    if (why)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: LOCAL(%d, %" PRId32 ") of %" PRId64 " blocks: %s", i, s->axis,
                     s->amount, blocks, why);
  }
  return TVK_OK;
}

/* What STAGE needs: one STAGE, with LOCAL, no GROUP, UNROLL or SPREAD, of
 * the kernel's one reduced axis, whose reduces are all float sums or all
 * exact, by the innermost loop lowering makes of it (cg_reduce_inner), with
 * nothing past the axis's end. NULL when it can, else why not. */
static const char *stage_blocker(UOp *norm, const KernelDesc *kd, const OptStep *s, uint32_t local,
                                 int groups, int unrolls, uint32_t spread) {
  if (!local) return "the plan has no LOCAL (no invocations to share the block)";
  if (groups || unrolls || spread) return "the plan groups, unrolls or spreads (not supported)";
  if (kd->reduce_axes != 1u << s->axis) return "the axis is not the kernel's one reduced axis";
  size_t n = 0;
  UOp **t = uop_toposort(norm, &n);
  if (!t) return "out of memory";
  int sums = 0, exact = 0;
  for (size_t i = 0; i < n; i++)
    if (t[i]->op == OP_REDUCE_AXIS)
      t[i]->arg.red.op == OP_ADD &&dt_is_float(t[i]->dtype) ? sums++ : exact++;
  free(t);
  if (sums && exact) return "its reduces are float sums and exact ones";
  int64_t len = kd->full[s->axis], inner = cg_reduce_inner(len, sums > 0);
  if (inner <= 0 || s->amount != inner) return "the amount must be the axis's innermost loop";
  return NULL;
}

int opt_stage(const OptPlan *plan, int64_t *block) { return step_of(plan, OPT_STAGE, block); }
int opt_cache(const OptPlan *plan, int64_t *run) { return step_of(plan, OPT_CACHE, run); }

void opt_locals(const OptPlan *plan, int64_t loc[TVK_MAX_DIMS]) {
  for (int d = 0; d < TVK_MAX_DIMS; d++) loc[d] = 1;
  for (int i = 0; i < plan->n; i++)
    if (plan->step[i].kind == OPT_LOCAL && plan->step[i].axis < TVK_MAX_DIMS)
      loc[plan->step[i].axis] = plan->step[i].amount;
}

static int step_of(const OptPlan *plan, OptKind kind, int64_t *amount) {
  *amount = 1;
  for (int i = 0; i < plan->n; i++)
    if (plan->step[i].kind == kind) {
      *amount = plan->step[i].amount;
      return plan->step[i].axis;
    }
  return -1;
}

int opt_group(const OptPlan *plan, int64_t *lanes) { return step_of(plan, OPT_GROUP, lanes); }
int opt_unroll(const OptPlan *plan, int64_t *lanes) { return step_of(plan, OPT_UNROLL, lanes); }

static bool copies_axis(uint8_t kind) { return kind == OPT_UPCAST || kind == OPT_SPREAD; }

void opt_upcasts(const KernelDesc *kd, const OptPlan *plan, int64_t up[TVK_MAX_DIMS]) {
  for (int d = 0; d < TVK_MAX_DIMS; d++) up[d] = 1;
  for (int i = 0; i < plan->n; i++)
    if (copies_axis(plan->step[i].kind) && plan->step[i].axis < kd->ndim)
      up[plan->step[i].axis] *= plan->step[i].amount;
}

int64_t opt_spread_run(const OptPlan *plan, int axis) {
  bool spread = false;
  int64_t run = 1;
  for (int i = 0; i < plan->n; i++) {
    if (plan->step[i].axis != axis) continue;
    spread |= plan->step[i].kind == OPT_SPREAD;
    if (plan->step[i].kind == OPT_UPCAST) run = plan->step[i].amount;
  }
  return spread ? run : 1;
}

uint32_t opt_spread_axes(const OptPlan *plan) {
  uint32_t m = 0;
  for (int i = 0; i < plan->n; i++)
    if (plan->step[i].kind == OPT_SPREAD && plan->step[i].axis < 32) m |= 1u << plan->step[i].axis;
  return m;
}

void opt_plan_str(const OptPlan *plan, char *buf, size_t n) {
  size_t at = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < plan->n && at < n; i++) {
    const OptStep *s = &plan->step[i];
    at += (size_t)snprintf(buf + at, n - at, "%s%s(%d,%" PRId32 ")", i ? " " : "",
                           s->kind < OPT_KINDS ? kinds[s->kind].name : "?", s->axis, s->amount);
  }
}

void opt_kernel_name(const KernelDesc *kd, const OptPlan *plan, char *buf, size_t n) {
  int64_t up[TVK_MAX_DIMS], loc[TVK_MAX_DIMS], lanes, ulanes;
  opt_upcasts(kd, plan, up);
  opt_locals(plan, loc);
  int64_t sblock, crun;
  int g = opt_group(plan, &lanes), un = opt_unroll(plan, &ulanes), sa = opt_stage(plan, &sblock);
  int ca = opt_cache(plan, &crun);
  uint32_t spread = opt_spread_axes(plan);
  size_t at = (size_t)snprintf(buf, n, "%s", kd->reduce_axes ? "r" : "E");
  for (int d = 0; d < kd->ndim && at < n; d++) {
    int64_t run = opt_spread_run(plan, d); /* > 1: spread runs */
    if (kd->sym_axes >> d & 1) {           /* its expression, then u<amount> of a masked upcast */
      at += (size_t)snprintf(buf + at, n - at, "_");
      if (at < n) at += kernel_sym_name(kd->sym[d], buf + at, n - at);
      if (up[d] > 1 && at < n) at += (size_t)snprintf(buf + at, n - at, "u%" PRId64, up[d]);
      if (d == un && at < n) at += (size_t)snprintf(buf + at, n - at, "r%" PRId64, ulanes);
    } else if (d == g && d == un) /* runs of an UNROLL's lanes on each grouped lane */
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "g%" PRId64 "r%" PRId64,
                             (kd->full[d] + lanes * ulanes - 1) / (lanes * ulanes), lanes, ulanes);
    else if (d == g)
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "g%" PRId64,
                             (kd->full[d] + lanes - 1) / lanes, lanes);
    else if (d == sa) /* staged in blocks: _<blocks>t<block> */
      at +=
          (size_t)snprintf(buf + at, n - at, "_%" PRId64 "t%" PRId64, kd->full[d] / sblock, sblock);
    else if (d == un)
      at +=
          (size_t)snprintf(buf + at, n - at, "_%" PRId64 "r%" PRId64, kd->full[d] / ulanes, ulanes);
    else if (d == ca) { /* _<runs>c<run>, then u<amount> of an upcast */
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "c%" PRId64, kd->full[d] / up[d] / crun,
                             crun);
      if (up[d] > 1 && at < n)
        at += (size_t)snprintf(buf + at, n - at, "%c%" PRId64, spread >> d & 1 ? 's' : 'u', up[d]);
    } else if (loc[d] > 1) { /* _<tiles>l<local>, then u<amount> or s<amount> of an upcast */
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "l%" PRId64,
                             kd->full[d] / up[d] / loc[d], loc[d]);
      if (up[d] > 1 && at < n)
        at += (size_t)snprintf(buf + at, n - at, "%c%" PRId64, spread >> d & 1 ? 's' : 'u', up[d]);
    } else if (run > 1) /* spread runs: _<blocks>s<runs>u<run> */
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "s%" PRId64 "u%" PRId64,
                             kd->full[d] / up[d], up[d] / run, run);
    else if (up[d] > 1)
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "%c%" PRId64, kd->full[d] / up[d],
                             spread >> d & 1 ? 's' : 'u', up[d]);
    else
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64, kd->full[d]);
  }
  if (kd->ndim == 0 && at < n) snprintf(buf + at, n - at, "_1");
}

/* ---------------------------------------------------------------- the heuristic */

/* What the heuristic looks at in the AST. */
typedef struct {
  bool reduce;         /* some REDUCE_AXIS */
  bool matmul_like;    /* some ADD reduce of a product of two loads */
  int contiguous;      /* the output axis the first store's view walks with stride 1; -1: none */
  uint32_t unit_loads; /* bit d: some load's view walks axis d with stride 1 */
  /* The two loads of the first matmul-like product: per axis, whether each
   * walks it (a stride other than 0). */
  uint32_t walks[2];
  int64_t esize[2]; /* their elements' sizes in bytes */
  int64_t body;     /* the kernel's code, in weighted ops (body_weight) */
  /* Bit d: runs of 4 along axis d are aligned quads of 32-bit elements for
   * every access (vectorize.c can make them 4-wide), or one element of a load
   * that does not walk d (or a store, of a reduced d). */
  uint32_t quads;
  bool float_sum; /* some reduce is a float sum (its loops are a blocked sum's digits) */
} Shape;

/* Whether 4 neighbours along axis d of a view of 32-bit elements are one
 * aligned quad (or, for a load that does not walk d, one element). */
static bool quad_view(const UOp *view, int d, bool store, ScalarType t) {
  if (view->op != OP_VIEW || view->arg.st->nviews != 1 || dt_scalar_size(t) != 4) return false;
  const View *v = st_top(view->arg.st);
  if (d >= v->ndim) return false;
  if (v->strides[d] == 0 && !store) return true;
  if (v->strides[d] != 1 || v->has_mask || v->offset % 4) return false;
  for (int e = 0; e < v->ndim; e++)
    if (e != d && v->strides[e] % 4) return false;
  return true;
}

/* Roughly how many operations op costs in a kernel's code: the size of the
 * helper that spells it in GLSL (shaders/math_f32.glsl and the integer
 * helpers; float64's are about twice those), 1 for an op the hardware has.
 * A load or store counts 2 for its index arithmetic. */
static int64_t op_weight(const UOp *u) {
  bool f64 = u->dtype.scalar == DT_FLOAT64, fl = dt_is_float(u->dtype);
  int64_t w = 1;
  switch ((Op)u->op) {
  case OP_SIN: w = 110; break;
  case OP_POW: w = fl ? 80 : 10; break;
  case OP_LOG2: w = 40; break;
  case OP_EXP2: w = 25; break;
  case OP_IDIV:
  case OP_MOD:
  case OP_FDIV: w = 10; break;
  case OP_RECIP: w = 8; break;
  case OP_SQRT: w = 4; break;
  case OP_LOAD:
  case OP_STORE: w = 2; break;
  default: return op_in((Op)u->op, G_ALU) ? 1 : 0;
  }
  return f64 ? 2 * w : w;
}

static const UOp *skip_casts(const UOp *u) {
  while (u->op == OP_CAST) u = u->src[0];
  return u;
}

static void scan(UOp *norm, const KernelDesc *kd, Shape *sh) {
  *sh = (Shape){.contiguous = -1, .quads = ~0u};
  size_t n = 0;
  UOp **t = uop_toposort(norm, &n);
  for (size_t i = 0; t && i < n; i++) {
    const UOp *u = t[i];
    sh->body += op_weight(u);
    if (u->op == OP_LOAD || u->op == OP_STORE)
      for (int d = 0; d < kd->ndim; d++) /* (a store does not walk a reduced axis) */
        if (!quad_view(u->src[1], d, u->op == OP_STORE, (ScalarType)u->src[0]->dtype.scalar) &&
            (u->op == OP_LOAD || is_output_axis(kd, d)))
          sh->quads &= ~(1u << d);
    if (u->op == OP_REDUCE_AXIS) {
      sh->reduce = true;
      sh->float_sum |= u->arg.red.op == OP_ADD && dt_is_float(u->dtype);
      const UOp *x = skip_casts(u->src[0]);
      if (!sh->matmul_like && u->arg.red.op == OP_ADD && x->op == OP_MUL &&
          skip_casts(x->src[0])->op == OP_LOAD && skip_casts(x->src[1])->op == OP_LOAD) {
        sh->matmul_like = true;
        for (int k = 0; k < 2; k++) {
          const UOp *ld = skip_casts(x->src[k]);
          const View *v = ld->src[1]->op == OP_VIEW ? st_top(ld->src[1]->arg.st) : NULL;
          sh->esize[k] = dt_scalar_size((ScalarType)ld->src[0]->dtype.scalar);
          for (int d = 0; v && d < v->ndim && d < kd->ndim; d++)
            if (v->strides[d] != 0 || v->shape[d] == 1) sh->walks[k] |= 1u << d;
        }
      }
    }
    if (u->op == OP_LOAD && u->src[1]->op == OP_VIEW && u->src[1]->arg.st->nviews == 1) {
      const View *v = st_top(u->src[1]->arg.st);
      for (int d = 0; d < v->ndim && d < kd->ndim; d++)
        if (v->strides[d] == 1) sh->unit_loads |= 1u << d;
    }
    if (u->op == OP_STORE && sh->contiguous < 0 && u->src[1]->op == OP_VIEW) {
      const ShapeTracker *st = u->src[1]->arg.st;
      const View *v = st_top(st);
      for (int d = 0; st->nviews == 1 && d < v->ndim && d < kd->ndim; d++)
        if (v->strides[d] == 1 && is_output_axis(kd, d) && kd->full[d] > 1) sh->contiguous = d;
    }
  }
  free(t);
}

/* The largest of want, want/2, ... 2 that divides n; 1 if none. */
static int32_t dividing(int64_t n, int32_t want) {
  for (int32_t a = want; a >= 2; a /= 2)
    if (n % a == 0) return a;
  return 1;
}

static void push(OptPlan *p, OptKind k, int axis, int32_t amount) {
  if (amount > 1 && p->n < OPT_MAX_STEPS)
    p->step[p->n++] = (OptStep){(uint8_t)k, (uint8_t)axis, amount};
}

/* The longest reduced axis (the first of equals), -1 if none. */
static int longest_reduce_axis(const KernelDesc *kd) {
  int axis = -1;
  for (int d = 0; d < kd->ndim; d++)
    if (!is_output_axis(kd, d) && (axis < 0 || kd->full[d] > kd->full[axis])) axis = d;
  return axis;
}

/* The plan UNROLL(axis, u) alone, when opt_check takes it. */
static bool try_unroll(UOp *norm, const KernelDesc *kd, const OptTarget *t, int axis, int32_t u,
                       OptPlan *plan) {
  OptPlan p = {1, {{OPT_UNROLL, (uint8_t)axis, u}}};
  Error err = {0};
  if (opt_check(norm, kd, &p, t, &err) != TVK_OK) return false;
  *plan = p;
  return true;
}

/* The CPU, a reduce whose longest axis some load walks with stride 1: that
 * axis unrolled into the SIMD lanes (OPT_UNROLL). */
static bool unroll_plan(UOp *norm, const KernelDesc *kd, const Shape *sh, const OptTarget *t,
                        int32_t lanes, OptPlan *plan) {
  int axis = longest_reduce_axis(kd);
  if (axis < 0 || !(sh->unit_loads >> axis & 1)) return false;
  int32_t u = dividing(kd->full[axis], lanes);
  if (u < 4 || kd->full[axis] / u < 4) return false;
  return try_unroll(norm, kd, t, axis, u, plan);
}

/* Grid mode: a reduce's longest axis across a work group (OPT_GROUP), when
 * the lanes get a few elements each and either read neighbouring elements
 * (a load walks the axis with stride 1) or the outputs are too few to keep
 * the device busy any other way. Lanes of a strided axis would gather where
 * invocations per output read in step (neighbouring outputs, neighbouring
 * elements).
 * On a GPU a contiguous axis is grouped whatever the outputs: a warp's
 * lanes then read one run of memory, where an invocation per output reads
 * a row each, rows apart. Many outputs get 64 lanes (the combine reads
 * every lane's partial), few up to 256. Rows too short for 64 lanes go
 * several to a work group (a LOCAL of an output axis before the grouped
 * one, so each row's lanes stay neighbours): OPT_GPU_MIN_LOCAL invocations
 * or more, as a work group of 16 would leave most of a warp idle. On an
 * emulated device (lavapipe) only few outputs are grouped: grouping the 256
 * outputs of a 16M-element sum's first stage was 6x slower there than an
 * invocation per output. */
static bool group_plan(UOp *norm, const KernelDesc *kd, const Shape *sh, const OptTarget *t,
                       OptPlan *plan) {
  int64_t outputs = kernel_iterations(kd, ~kd->reduce_axes);
  int axis = longest_reduce_axis(kd);
  bool unit = axis >= 0 && sh->unit_loads >> axis & 1, few = outputs <= OPT_GROUP_MAX_OUTPUTS;
  if (axis < 0 || (!few && (t->emulated || !unit))) return false;
  if (!unit && outputs > 16) return false; /* lanes would gather */
  int64_t most = few ? OPT_MAX_GROUP : 64, lanes = 1;
  while (lanes * 2 <= most && lanes * 2 <= t->max_local && lanes * 2 * 4 <= kd->full[axis])
    lanes *= 2;
  if (lanes < 16) return false;
  OptPlan p = {1, {{OPT_GROUP, (uint8_t)axis, (int32_t)lanes}}};
  Error err = {0};
  if (opt_check(norm, kd, &p, t, &err) != TVK_OK) return false;
  *plan = p;
  /* on a GPU, each lane's elements in runs of 4 neighbours (UNROLL of the
   * grouped axis) where they are aligned quads of every access and each lane
   * gets two runs or more: one 16-byte load per run, neighbouring lanes on
   * neighbouring runs, and 4 accumulators per lane */
  if (!t->emulated && unit && sh->quads >> axis & 1 && kd->full[axis] % 4 == 0 &&
      kd->full[axis] >= lanes * 8) {
    p.step[p.n++] = (OptStep){OPT_UNROLL, (uint8_t)axis, 4};
    if (opt_check(norm, kd, &p, t, &err) == TVK_OK)
      *plan = p;
    else
      p = *plan;
  }
  int rows = -1; /* the last output axis of more than one element before the grouped one */
  for (int d = 0; d < axis; d++)
    if (is_output_axis(kd, d) && kd->full[d] > 1) rows = d;
  if (t->emulated || few || lanes >= OPT_GPU_MIN_LOCAL || rows < 0) return true;
  OptStep loc = {OPT_LOCAL, (uint8_t)rows,
                 dividing(kd->full[rows], (int32_t)(OPT_GPU_MIN_LOCAL / lanes))};
  p.step[p.n++] = loc;
  if (loc.amount > 1 && opt_check(norm, kd, &p, t, &err) == TVK_OK) *plan = p;
  return true;
}

/* A GPU, a reduce along a strided axis (a column sum) whose outputs lie
 * along an axis the store and a load walk with stride 1, after the reduced
 * one, and are too few to fill the device (OPT_GPU_FILL invocations): the
 * reduce also across a work group of 32 neighbouring outputs (LOCAL, the
 * work group's fastest index: a warp reads 32 neighbouring elements of one
 * row, 128 bytes) times L lanes (GROUP), each lane taking every L-th row.
 * L: as many as keep the work group within 256 invocations, the outputs'
 * invocations within OPT_GPU_FILL and each lane 16 rows or more. A column
 * sum of a 4096 x 4096 matrix then runs on 32768 invocations, not 4096
 * (a bias's gradient, a batch norm's statistics). */
static bool columns_plan(UOp *norm, const KernelDesc *kd, const Shape *sh, const OptTarget *t,
                         OptPlan *plan) {
  int axis = longest_reduce_axis(kd), c = sh->contiguous;
  int64_t outputs = kernel_iterations(kd, ~kd->reduce_axes);
  if (t->emulated || axis < 0 || c <= axis || sh->unit_loads >> axis & 1 ||
      !(sh->unit_loads >> c & 1) || outputs >= OPT_GPU_FILL)
    return false;
  int32_t P = dividing(kd->full[c], 32);
  int64_t room = t->max_local < 256 ? t->max_local : 256, lanes = 1;
  if (P < 16) return false; /* a warp would read 4 rows' runs of 32 bytes or more */
  while (P * lanes * 2 <= room && outputs * lanes * 2 <= OPT_GPU_FILL &&
         kd->full[axis] / (lanes * 2) >= 16 && kd->full[axis] % (lanes * 2) == 0)
    lanes *= 2;
  if (lanes < 2) return false;
  OptPlan p = {2, {{OPT_GROUP, (uint8_t)axis, (int32_t)lanes}, {OPT_LOCAL, (uint8_t)c, P}}};
  Error err = {0};
  if (opt_check(norm, kd, &p, t, &err) != TVK_OK) return false;
  *plan = p;
  return true;
}

/* The levels of a blocked float sum over the kernel's reduce (codegen.h,
 * CG_SUM_BLOCK), each of which keeps accumulators of its own live in the
 * loops; 1 for an exact reduce (float_sum false). */
static int sum_levels(const KernelDesc *kd, bool float_sum) {
  int64_t k = kernel_iterations(kd, kd->reduce_axes);
  int levels = 1;
  for (int64_t b = CG_SUM_BLOCK; float_sum && b < k && levels < CG_MAX_DIGITS; b *= CG_SUM_BLOCK)
    levels++;
  return levels;
}

/* The CPU, a reduce across rows (no load walks its longest reduced axis
 * with stride 1) whose outputs lie along a contiguous axis `vec` (a column
 * sum): that axis upcast by as many vectors of lanes as the accumulators'
 * registers allow (each level of a blocked sum keeps its own), so that each
 * row step reads a run of whole cache lines instead of one vector 16 KiB
 * from the last. Halved while it leaves fewer than 8 blocks for the cores or
 * its copies weigh more than OPT_CPU_ROWS_BUDGET. A column sum of 4096 x
 * 4096 on the 2-vCPU Zen 5 (AVX-512, 3 levels): upcast 16 9.7 ms, 32 5.1,
 * 64 3.6, 128 2.9 (8 vectors, 24 accumulators of 32 registers), 256 3.2
 * (spilled). */
static bool rows_plan(const KernelDesc *kd, const Shape *sh, const OptTarget *t, int vec,
                      int32_t lanes, OptPlan *plan) {
  int axis = longest_reduce_axis(kd);
  if (axis < 0 || sh->unit_loads >> axis & 1 || !(sh->unit_loads >> vec & 1)) return false;
  int levels = sum_levels(kd, sh->float_sum), nvec = 1;
  while (nvec * 2 <= 8 && nvec * 2 * levels + 4 <= t->vector_regs) nvec *= 2;
  int32_t u = dividing(kd->full[vec], lanes * nvec);
  while (u > lanes && (kd->full[vec] / u < 8 || u * sh->body > OPT_CPU_ROWS_BUDGET)) u /= 2;
  if (u <= lanes) return false;
  push(plan, OPT_UPCAST, vec, u);
  return true;
}

/* The rows of a CPU register tile `cols` lanes wide: 8 when its accumulators
 * fit in the SIMD registers with room for the operands, else 4. A row holds
 * one register per vector of lanes for each level of a blocked float sum
 * (codegen.h: CG_SUM_BLOCK; all levels stay live in the k loop). With 4 rows
 * an 8 x 16 tile spilled on AVX2's 16 registers; with 32 (AVX-512) 8 rows ran
 * matmul 1024 at 2.4x the GFLOP/s of 4 (bench, 2 vCPU EPYC). On a GPU a tile
 * is 4 rows: its registers are per invocation and shared by many. */
static int32_t tile_rows(const KernelDesc *kd, const OptTarget *t, int32_t cols) {
  if (t->mode == CG_MODE_GRID) return 4;
  int levels = sum_levels(kd, true); /* (a matmul's reduce, counted as a float sum) */
  int per_row = t->vector_floats > 0 && cols > t->vector_floats ? cols / t->vector_floats : 1;
  return 8 * per_row * levels + 4 <= t->vector_regs ? 8 : 4;
}

/* The register tile of a matmul on an emulated device (lavapipe), at most
 * cols x rows. Each of its loads is a loop over the SIMD lanes, one scalar
 * access per lane and component (its gathers), while the multiply-adds are
 * vector instructions over the lanes; a tile of r x c does r + c loads per
 * r * c multiply-adds, so it pays to grow the tile far beyond a GPU's: 16 x
 * 16 ran matmul 1024 in 107-115 ms against 168-223 for 8 x 8 and 305 for 4 x
 * 4, 512 in 14 ms against 22-24 and 42-56 (lavapipe on 2 vCPU EPYC Zen 5,
 * alternating runs). Halved, the longer side first, while the copies weigh
 * more than OPT_EMULATED_TILE_BUDGET or leave fewer than
 * OPT_EMULATED_MIN_INVOCATIONS invocations, down to 4 x 4. */
static void emulated_tile(const KernelDesc *kd, const Shape *sh, int vec, int32_t *cols,
                          int32_t *rows) {
  int32_t c = dividing(kd->full[vec], 16), r = 16;
  int64_t outputs = kernel_iterations(kd, ~kd->reduce_axes);
  while ((int64_t)c * r > 16 && ((int64_t)c * r * sh->body > OPT_EMULATED_TILE_BUDGET ||
                                 outputs / ((int64_t)c * r) < OPT_EMULATED_MIN_INVOCATIONS)) {
    if (r >= c && r > 4)
      r /= 2;
    else if (c > 4)
      c /= 2;
    else
      r /= 2;
  }
  *cols = c, *rows = r;
}

/* A GPU matmul's work-group tile: LOCAL of the register tile's two axes,
 * up to 16 x 16 invocations (a 64 x 64 tile of outputs from 4 x 4 ones),
 * as many as divide the blocks and fit the work group, the lanes' axis
 * first: a warp's invocations then share A's rows and B's columns, and
 * neighbouring ones still take neighbouring quads of B and C. */
static void tile_locals(UOp *norm, const KernelDesc *kd, const Shape *sh, const OptTarget *t,
                        int vec, int32_t cols, int other, int32_t rows, OptPlan *plan) {
  int64_t most = t->max_local < 256 ? t->max_local : 256;
  int32_t lv = dividing(kd->full[vec] / cols, 16);
  while (lv > 1 && lv > most) lv /= 2;
  int32_t lo = dividing(kd->full[other] / rows, 16);
  while (lo > 1 && (int64_t)lv * lo > most) lo /= 2;
  push(plan, OPT_LOCAL, vec, lv);
  push(plan, OPT_LOCAL, other, lo);
  /* and the kernel's one reduced axis staged through work-group memory in
   * blocks of its innermost loop, where opt_check takes it */
  uint32_t red = kd->reduce_axes;
  if (lv * lo == 1 || plan->n >= OPT_MAX_STEPS || !red || (red & (red - 1))) return;
  int d = __builtin_ctz(red);
  int64_t b = cg_reduce_inner(kd->full[d], sh->float_sum);
  if (b < 2 || b > INT32_MAX) return;
  OptPlan p = *plan;
  p.step[p.n++] = (OptStep){OPT_STAGE, (uint8_t)d, (int32_t)b};
  Error err = {0};
  if (opt_check(norm, kd, &p, t, &err) == TVK_OK) *plan = p;
}

/* The bytes of a matmul-like kernel's load k that the loops inside one
 * index of output axis `other` read: the sizes of the axes after it that
 * the load walks (reduce axes included: their loops are innermost). */
static int64_t inner_bytes(const KernelDesc *kd, const Shape *sh, int k, int other) {
  int64_t b = sh->esize[k] > 0 ? sh->esize[k] : 4;
  for (int d = other + 1; d < kd->ndim; d++)
    if (sh->walks[k] >> d & 1 && (b *= kd->full[d]) > ((int64_t)1 << 40)) break;
  return b;
}

/* Runs of a CPU register tile's row blocks (OPT_CACHE) when the operand
 * along the lanes (B of a matmul), read whole for each row block, does not
 * fit the L2 cache: with runs of P row blocks it is read from memory once
 * per run, each of its panels then serving P tiles from the cache, while
 * the run's rows of the other operand (A) stay in L2. P: the largest power
 * of two up to 64 whose rows of A fill at most half of L2, leaving at
 * least 16 runs to share among the cores. Matmul 2048 on the 2-vCPU EPYC
 * (Zen 5, 1 MiB L2): B is 16 MiB, A's 8-row blocks 64 KiB each, P = 8. */
static void cache_runs(const KernelDesc *kd, const Shape *sh, const OptTarget *t, int vec,
                       int other, int32_t rows, OptPlan *plan) {
  if (!t->cache_bytes || plan->n >= OPT_MAX_STEPS) return;
  int along = sh->walks[0] >> vec & 1 ? 0 : 1;
  int64_t swept = inner_bytes(kd, sh, along, other);
  int64_t run_row = rows * inner_bytes(kd, sh, 1 - along, other);
  if (swept <= (int64_t)t->cache_bytes) return;
  int64_t blocks = kd->full[other] / rows;
  int32_t p = 64;
  while (p >= 2 && (blocks % p || p * run_row > (int64_t)t->cache_bytes / 2 || blocks / p < 16))
    p /= 2;
  push(plan, OPT_CACHE, other, p);
}

static void heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan);

/* With symbolic sizes, the plan for the kernel whose symbolic axes have
 * their largest size rounded up to a multiple of 16 (so the usual amounts
 * divide it): the other axes get their steps (lanes, unrolls, runs), a
 * symbolic axis keeps an UPCAST (its tail masked: a matmul's 8-row tile over
 * n rows; on the CPU only in a kernel with a reduce) or an UNROLL (where it
 * is the one reduced axis: a softmax's row sum over seq keys) and loses any
 * other step; on a GPU only the upcasts and unrolls stay (opt_check). Then
 * the plan is checked. */
void opt_heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan) {
  plan->n = 0;
  if (!kd->sym_axes) {
    heuristic(norm, kd, t, plan);
    return;
  }
  KernelDesc *shown = malloc(sizeof *shown);
  if (!shown) return;
  *shown = *kd;
  for (int d = 0; d < kd->ndim; d++)
    if (kd->sym_axes >> d & 1) {
      shown->full[d] = (kd->full[d] + 15) / 16 * 16;
      if (!(kd->reduce_axes >> d & 1)) shown->out[d] = shown->full[d];
    }
  shown->sym_axes = 0;
  OptPlan p;
  heuristic(norm, shown, t, &p);
  free(shown);
  Shape sh;
  bool scanned = false; /* sh, made when a step needs it */
  bool grid = t->mode == CG_MODE_GRID;
  for (int i = 0; i < p.n; i++) {
    OptKind k = (OptKind)p.step[i].kind;
    bool sym = kd->sym_axes >> p.step[i].axis & 1;
    if (grid && k != OPT_UPCAST && k != OPT_UNROLL) continue;
    /* On the CPU a kernel without a reduce leaves its symbolic axes to the C
     * compiler's loop vectoriser (render.h: open_loops), which widens the
     * loop and runs the remainder scalar: a masked upcast gates each lane's
     * store on its own, which no vectoriser widens (a decoder's causal
     * softmax, E_4_seq_seq over 256 tokens: 0.68 ms upcast, 0.10 ms not). */
    if (sym && !grid && !kd->reduce_axes) continue;
    /* An exact reduce (a max, an integer sum) over a symbolic axis is a loop
     * the loop vectoriser widens, reordering it; a float sum's order is
     * kept, and only lanes make it wide (the peeled UNROLL of lowering): a
     * decoder's softmax row sum over 256 keys, 1.1 ms as a loop, 0.46 with
     * 16 lanes (4 x 256 rows on one Zen 5 core); its row max 0.04 as a loop,
     * 0.06 with lanes. */
    if (sym && !grid && k == OPT_UNROLL) {
      if (!scanned) scan(norm, kd, &sh), scanned = true;
      if (!sh.float_sum) continue;
    }
    if (!sym || k == OPT_UPCAST || k == OPT_UNROLL) plan->step[plan->n++] = p.step[i];
  }
  Error err = {0};
  if (opt_check(norm, kd, plan, t, &err) == TVK_OK) return;
  /* without an UNROLL of a symbolic axis (it takes one only when it is the
   * kernel's one reduced axis) */
  int n = 0;
  for (int i = 0; i < plan->n; i++)
    if (plan->step[i].kind != OPT_UNROLL || !(kd->sym_axes >> plan->step[i].axis & 1))
      plan->step[n++] = plan->step[i];
  plan->n = n;
  if (opt_check(norm, kd, plan, t, &err) != TVK_OK) plan->n = 0;
}

static void heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan) {
  plan->n = 0;
  Shape sh;
  scan(norm, kd, &sh);
  if (t->mode == CG_MODE_GRID && sh.reduce && !sh.matmul_like &&
      (group_plan(norm, kd, &sh, t, plan) || columns_plan(norm, kd, &sh, t, plan)))
    return;
  int last = -1; /* the last output axis of size > 1 */
  for (int d = 0; d < kd->ndim; d++)
    if (is_output_axis(kd, d) && kd->full[d] > 1) last = d;
  if (last < 0) return;
  int vec = sh.contiguous >= 0 ? sh.contiguous : last;
  bool grid = t->mode == CG_MODE_GRID;
  int32_t lanes = grid ? 4 : (t->vector_floats >= 4 ? t->vector_floats : 4);
  if (sh.matmul_like) {
    /* a register tile: lanes of the contiguous axis times 4 of another,
     * preferably one the operand varying along the lanes does not walk (B of
     * a matmul along its rows, a conv's input along its output channels), so
     * each of its loads serves the 4 */
    int32_t cols, most_rows;
    if (grid && t->emulated)
      emulated_tile(kd, &sh, vec, &cols, &most_rows);
    else
      cols = dividing(kd->full[vec], lanes), most_rows = tile_rows(kd, t, cols);
    push(plan, OPT_UPCAST, vec, cols);
    uint32_t along = sh.walks[0] >> vec & 1 ? sh.walks[0] : sh.walks[1];
    for (int32_t rows = most_rows; rows >= 4; rows /= 2) {
      int other = -1, reuse = -1;
      for (int d = 0; d < kd->ndim; d++) {
        if (d == vec || !is_output_axis(kd, d) || kd->full[d] % rows != 0) continue;
        other = d;
        if (!(along >> d & 1)) reuse = d;
      }
      if (reuse >= 0) other = reuse;
      if (other >= 0) {
        push(plan, OPT_UPCAST, other, rows);
        if (grid && !t->emulated) tile_locals(norm, kd, &sh, t, vec, cols, other, rows, plan);
        if (!grid) cache_runs(kd, &sh, t, vec, other, rows, plan);
        return;
      }
    }
    return;
  }
  /* a reduce along a contiguous axis on the CPU: that axis into lanes with
   * accumulators of their own (vector loads, independent adds); a reduce
   * across rows: runs of whole cache lines per row */
  if (!grid && sh.reduce && unroll_plan(norm, kd, &sh, t, lanes, plan)) return;
  if (!grid && sh.reduce && rows_plan(kd, &sh, t, vec, lanes, plan)) return;
  /* elementwise, and reduces with outputs: fill the lanes along the
   * contiguous axis (the CPU's vectoriser packs the copies) */
  if (!grid) push(plan, OPT_UPCAST, vec, dividing(kd->full[vec], lanes));
  /* an elementwise kernel on a GPU: up to 8 elements per invocation
   * (lavapipe, a*b+c over 16M: 106 -> 66 ms; reduces with outputs were
   * slower upcast, 11 -> 44 ms for a long sum's first kernel), fewer as the
   * body grows, none for a heavy one; spread n/8 apart, so that neighbouring
   * invocations take neighbouring elements (coalesced loads on a GPU) */
  if (grid && !sh.reduce) {
    int32_t most = OPT_GRID_ELEMENTS;
    while (most > 1 && most * sh.body > OPT_GRID_BODY_BUDGET) most /= 2;
    /* on an emulated device, runs of 8 neighbours: one 32-byte access each
     * where aligned (vectorize.c, VKFEAT_WIDE; its accesses cost per
     * instruction, and coalescing does not apply); elsewhere, where every
     * access's runs of 4 are aligned quads, spread runs of 4, each one
     * 16-byte access (lavapipe, a*b+c over 16M: 36 -> 26 ms, as its gathers
     * cost per instruction; a GPU issues a quarter of the loads) */
    if (t->emulated) {
      push(plan, OPT_UPCAST, vec, dividing(kd->full[vec], most));
    } else if (most >= 4 && sh.quads >> vec & 1 && kd->full[vec] % 4 == 0) {
      push(plan, OPT_UPCAST, vec, 4);
      push(plan, OPT_SPREAD, vec, dividing(kd->full[vec] / 4, most / 4));
    } else {
      push(plan, OPT_SPREAD, vec, dividing(kd->full[vec], most));
    }
  }
  /* a long reduce on a GPU, one invocation per output: its longest axis
   * unrolled by 8 into accumulators of their own, which spares a loop's
   * overhead per element (lavapipe: a sum of 2^27 computed int32 values
   * 0.17 -> 0.12 s, a 16M float sum 12.9-13.5 -> 11.6-11.8 ms) */
  int axis = grid && sh.reduce ? longest_reduce_axis(kd) : -1;
  int32_t u = axis >= 0 && kd->full[axis] >= OPT_GRID_UNROLL_FROM ? dividing(kd->full[axis], 8) : 1;
  if (u > 1) try_unroll(norm, kd, t, axis, u, plan);
}
