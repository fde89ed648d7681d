/* tvk_assign: an in-place update of a tensor's own buffer.
 *
 * The target's node becomes ASSIGN(VIEW(BUFFER b), value). The scheduler
 * always materialises an ASSIGN into b itself (no new buffer), runs every
 * kernel that reads b's old value before it (schedule.c), and ctx_realize
 * brings live tensors that still read the old value into the same schedule
 * (runtime/realize.c), so they keep seeing it. */
#include <stdlib.h>
#include <string.h>

#include "frontend/ops_common.h"
#include "ir/ptrmap.h"
#include "ir/ustack.h"

/* The target's node as its own contiguous buffer (frontend.h). */
tvk_status front_own_buffer(tvk_tensor *t) {
  tvk_ctx *ctx = t->ctx;
  UOp *u = t->uop;
  if (u->op != OP_VIEW || u->src[0]->op != OP_BUFFER) {
    const UOp *b = u->op == OP_VIEW ? u->src[0] : u;
    bool memoryless = graph_is_leaf(b) && b->op != OP_BUFFER; /* a constant, arange, value */
    tvk_tensor *c = memoryless ? tvk_contiguous(t) : t;
    tvk_status st = c ? tvk_realize(1, &c) : TVK_ERR_OUT_OF_MEMORY;
    if (st == TVK_OK && c != t) tensor_set_uop(t, c->uop);
    if (c != t) tvk_release(c);
    if (st != TVK_OK) return st;
    u = t->uop;
  }
  Buffer *b = u->op == OP_VIEW && u->src[0]->op == OP_BUFFER
                  ? ctx_buffer(ctx, graph_buffer_id(u->src[0]))
                  : NULL;
  if (!b || !st_contiguous(u->arg.st) || st_numel(u->arg.st) != b->numel) {
    char shape[BC_SHAPE_STR_MAX];
    bc_shape_str(t->ndim, t->shape, shape, sizeof shape);
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "assign: the target %s is a view (a transpose, slice, pad or expand) of "
                   "another tensor's memory, not a contiguous tensor of its own; assign to a "
                   "tvk_contiguous copy instead",
                   shape);
  }
  return TVK_OK;
}

/* The value may read the target's buffer only through the target's own view:
 * element i of the kernel writing b then reads only element i of b. (A reduce
 * or a contiguous in between is checked again when scheduled, where it is
 * known whether it runs in a kernel of its own.) */
static bool reads_self_elsewhere(UOp *value, UOp *target) {
  PtrMap seen = {0};
  UStack st = {0};
  bool bad = false, ok = ustack_push(&st, value);
  while (ok && st.n && !bad) {
    UOp *u = st.v[--st.n];
    if (ptrmap_get(&seen, u) >= 0) continue;
    ok = ptrmap_put(&seen, u, 1);
    bad = u->op == OP_VIEW && u->src[0] == target->src[0] && !st_eq(u->arg.st, target->arg.st);
    if (u->op == OP_REDUCE_AXIS || u->op == OP_CONTIGUOUS || u->op == OP_ASSIGN) continue;
    for (uint32_t k = 0; ok && k < u->nsrc; k++) ok = ustack_push(&st, u->src[k]);
  }
  free(st.v);
  ptrmap_free(&seen);
  return bad;
}

tvk_status tvk_assign(tvk_tensor *target, tvk_tensor *value) {
  tvk_tensor *ins[2] = {target, value};
  tvk_tensor *bad = tensor_check_inputs("assign", 2, ins);
  if (!bad) bad = front_refuse_symbolic("assign", 2, ins);
  if (!target && !value) return TVK_ERR_INVALID_ARG;
  tvk_ctx *ctx = target ? target->ctx : value->ctx;
  if (bad) {
    tvk_status st = bad->status;
    err_set(&ctx->err, st, "%s", bad->msg ? bad->msg : "assign: bad argument");
    tvk_release(bad);
    return st;
  }
  if (target->uop->device == UOP_DEVICE_MULTI) return shard_assign(target, value);
  if (value->uop->device == UOP_DEVICE_MULTI)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "assign: the value is sharded (tvk_shard) and the target is not: shard the "
                   "target alike, or gather the value (tvk_to_device)");
  tvk_status st = front_own_buffer(target);
  if (st != TVK_OK) return st;
  size_t m = FRONT_BEGIN(ctx);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *v = value;
  if (v->dtype != target->dtype) v = tvk_cast(v, target->dtype);
  if (v->ndim != target->ndim || memcmp(v->shape, target->shape, sizeof(int64_t) * (size_t)v->ndim))
    v = tvk_expand(v, target->ndim, target->shape);
  st = v->status;
  if (st != TVK_OK) {
    char have[BC_SHAPE_STR_MAX], want[BC_SHAPE_STR_MAX];
    bc_shape_str(value->ndim, value->shape, have, sizeof have);
    bc_shape_str(target->ndim, target->shape, want, sizeof want);
    err_set(&ctx->err, st, "assign: a value of shape %s does not broadcast to the target's %s: %s",
            have, want, v->msg ? v->msg : "");
  } else if (reads_self_elsewhere(v->uop, target->uop)) {
    st = err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                 "assign: the value reads the target through another view (a transpose, "
                 "shift or flip of it), so it would read elements the update has already "
                 "overwritten; make that operand a copy first (tvk_contiguous + tvk_realize)");
  } else {
    UOp *a = uop_new(ctx->u, OP_ASSIGN, target->uop->dtype, 2, (UOp *[]){target->uop, v->uop},
                     arg_none());
    if (a)
      tensor_set_uop(target, a);
    else
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "assign: out of memory");
  }
  tvk_scope_end(ctx, sc, 0, NULL);
  uop_pool_drain(ctx->u, m);
  return st;
}
