/* Optimisation plans (opt.h): checking, naming, and the heuristic that picks
 * one from the kernel's shape without timing anything. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

static const char *const kind_name[OPT_KINDS] = {"UPCAST"};

static bool is_output_axis(const KernelDesc *kd, int d) { return !(kd->reduce_axes >> d & 1); }

tvk_status opt_check(const KernelDesc *kd, const OptPlan *plan, Error *err) {
  if (plan->n < 0 || plan->n > OPT_MAX_STEPS)
    return err_set(err, TVK_ERR_INVALID_ARG, "opt: a plan of %d steps (at most %d)", plan->n,
                   OPT_MAX_STEPS);
  int64_t copies = 1;
  uint32_t seen = 0;
  for (int i = 0; i < plan->n; i++) {
    const OptStep *s = &plan->step[i];
    if (s->kind >= OPT_KINDS)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d has kind %d", i, s->kind);
    const char *k = kind_name[s->kind];
    if (s->axis >= kd->ndim)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: %s of axis %d of a %d-dim kernel", i,
                     k, s->axis, kd->ndim);
    if (!is_output_axis(kd, s->axis))
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: %s of axis %d, which is reduced", i,
                     k, s->axis);
    if (seen >> s->axis & 1)
      return err_set(err, TVK_ERR_INVALID_ARG, "opt: step %d: axis %d is split twice", i, s->axis);
    int64_t n = kd->full[s->axis];
    if (s->amount < 1 || n % s->amount != 0)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: %s(%d, %" PRId32 ") of an axis of size %" PRId64
                     " (the amount must divide it)",
                     i, k, s->axis, s->amount, n);
    copies *= s->amount;
    if (copies > OPT_MAX_COPIES)
      return err_set(err, TVK_ERR_INVALID_ARG,
                     "opt: step %d: the upcasts make %" PRId64 " copies of the body (at most %d)",
                     i, copies, OPT_MAX_COPIES);
    seen |= 1u << s->axis;
  }
  return TVK_OK;
}

void opt_upcasts(const KernelDesc *kd, const OptPlan *plan, int64_t up[TVK_MAX_DIMS]) {
  for (int d = 0; d < TVK_MAX_DIMS; d++) up[d] = 1;
  for (int i = 0; i < plan->n; i++)
    if (plan->step[i].kind == OPT_UPCAST && plan->step[i].axis < kd->ndim)
      up[plan->step[i].axis] = plan->step[i].amount;
}

void opt_plan_str(const OptPlan *plan, char *buf, size_t n) {
  size_t at = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < plan->n && at < n; i++) {
    const OptStep *s = &plan->step[i];
    at += (size_t)snprintf(buf + at, n - at, "%s%s(%d,%" PRId32 ")", i ? " " : "",
                           s->kind < OPT_KINDS ? kind_name[s->kind] : "?", s->axis, s->amount);
  }
}

void opt_kernel_name(const KernelDesc *kd, const OptPlan *plan, char *buf, size_t n) {
  int64_t up[TVK_MAX_DIMS];
  opt_upcasts(kd, plan, up);
  size_t at = (size_t)snprintf(buf, n, "%s", kd->reduce_axes ? "r" : "E");
  for (int d = 0; d < kd->ndim && at < n; d++) {
    if (up[d] > 1)
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64 "u%" PRId64, kd->full[d] / up[d], up[d]);
    else
      at += (size_t)snprintf(buf + at, n - at, "_%" PRId64, kd->full[d]);
  }
  if (kd->ndim == 0 && at < n) snprintf(buf + at, n - at, "_1");
}

/* ---------------------------------------------------------------- the heuristic */

/* What the heuristic looks at in the AST. */
typedef struct {
  bool reduce;      /* some REDUCE_AXIS */
  bool matmul_like; /* some ADD reduce of a product of two loads */
  int contiguous;   /* the output axis the first store's view walks with stride 1; -1: none */
} Shape;

static const UOp *skip_casts(const UOp *u) {
  while (u->op == OP_CAST) u = u->src[0];
  return u;
}

static void scan(UOp *norm, const KernelDesc *kd, Shape *sh) {
  *sh = (Shape){.contiguous = -1};
  size_t n = 0;
  UOp **t = uop_toposort(norm, &n);
  for (size_t i = 0; t && i < n; i++) {
    const UOp *u = t[i];
    if (u->op == OP_REDUCE_AXIS) {
      sh->reduce = true;
      const UOp *x = skip_casts(u->src[0]);
      if (u->arg.red.op == OP_ADD && x->op == OP_MUL && skip_casts(x->src[0])->op == OP_LOAD &&
          skip_casts(x->src[1])->op == OP_LOAD)
        sh->matmul_like = true;
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

void opt_heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan) {
  plan->n = 0;
  Shape sh;
  scan(norm, kd, &sh);
  int last = -1; /* the last output axis of size > 1 */
  for (int d = 0; d < kd->ndim; d++)
    if (is_output_axis(kd, d) && kd->full[d] > 1) last = d;
  if (last < 0) return;
  int vec = sh.contiguous >= 0 ? sh.contiguous : last;
  bool grid = t->mode == CG_MODE_GRID;
  int32_t lanes = grid ? 4 : (t->vector_floats >= 4 ? t->vector_floats : 4);
  if (sh.matmul_like) {
    /* a register tile: lanes of the contiguous axis times 4 of another */
    push(plan, OPT_UPCAST, vec, dividing(kd->full[vec], lanes));
    int other = -1;
    for (int d = 0; d < kd->ndim; d++)
      if (d != vec && is_output_axis(kd, d) && kd->full[d] % 4 == 0) other = d;
    if (other >= 0) push(plan, OPT_UPCAST, other, 4);
    return;
  }
  /* elementwise, and reduces with outputs: fill the lanes along the
   * contiguous axis (the CPU's vectoriser packs the copies) */
  if (!grid) push(plan, OPT_UPCAST, vec, dividing(kd->full[vec], lanes));
}
