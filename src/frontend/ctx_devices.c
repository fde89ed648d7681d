/* A context's devices beyond its first (docs/devices.md): opening more
 * (tvk_ctx_add_device), lazy copies between them (tvk_to_device, front_copy)
 * and the check that keeps an op's inputs on one device. */
#include <string.h>

#include "frontend/frontend.h"
#include "runtime/trace.h"

tvk_tensor *front_check_devices(const char *op, int n, tvk_tensor *const *ts) {
  tvk_ctx *ctx = n > 0 ? ts[0]->ctx : NULL;
  /* one pass: the first sharded input, the first on a single device, and
   * the first on another device than that one */
  int multi = -1, one = -1, other = -1;
  for (int i = 0; i < n; i++) {
    int d = ts[i]->uop ? ts[i]->uop->device : UOP_DEVICE_NONE;
    if (d == UOP_DEVICE_MULTI && multi < 0) multi = i;
    if (d >= 0 && one < 0) one = i;
    if (d >= 0 && other < 0 && d != ts[one]->uop->device) other = i;
  }
  if (multi >= 0 && one >= 0)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: tensor argument %d is sharded (tvk_shard) and argument %d is on "
                        "device %d (%s) alone; shard or replicate it too (tvk_shard, axis -1), "
                        "or gather the sharded one (tvk_to_device)",
                        op, multi + 1, one + 1, ts[one]->uop->device,
                        ctx_device_name(ctx, ts[one]->uop->device));
  /* constants (of no device) go where they are used */
  if (other >= 0) {
    int f = ts[one]->uop->device, d = ts[other]->uop->device;
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: tensor argument %d is on device %d (%s) and argument %d on device "
                        "%d (%s); copy one to the other's device first (tvk_to_device)",
                        op, one + 1, f, ctx_device_name(ctx, f), other + 1, d,
                        ctx_device_name(ctx, d));
  }
  return NULL;
}

tvk_status ctx_sync_devices(tvk_ctx *ctx, const char *what) {
  for (int i = 0; i < ctx->ndevs; i++) {
    Device *d = ctx->devs[i];
    tvk_status st = d->ops->sync(d);
    if (st != TVK_OK) return what ? err_set(&ctx->err, st, "%s: %s", what, d->err.msg) : st;
  }
  return TVK_OK;
}

tvk_status tvk_ctx_add_device(tvk_ctx *ctx, const char *device, int *index) {
  if (index) *index = -1;
  if (!ctx) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "ctx_add_device: ctx is NULL");
  if (!index) return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "ctx_add_device: index is NULL");
  if (ctx->ndevs >= CTX_MAX_DEVICES)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "ctx_add_device: the context has %d devices already, the most one may have",
                   ctx->ndevs);
  Device *d = NULL;
  Error e;
  err_clear(&e);
  tvk_status st = ctx_open_device(ctx, device, NULL, 0, &d, &e);
  if (st != TVK_OK)
    return err_set(&ctx->err, st, "ctx_add_device(\"%s\"): %s", device ? device : "(default)",
                   e.msg);
  *index = ctx->ndevs;
  ctx->devs[ctx->ndevs++] = d;
  trace_name_device(ctx->trace, *index, d->ops->name(d));
  return TVK_OK;
}

int tvk_ctx_device_count(const tvk_ctx *ctx) { return ctx ? ctx->ndevs : 0; }

const char *ctx_device_name(const tvk_ctx *ctx, int i) {
  return i >= 0 && i < ctx->ndevs ? ctx->devs[i]->ops->name(ctx->devs[i]) : "no device";
}

const char *tvk_ctx_device_name(const tvk_ctx *ctx, int index) {
  return ctx && index >= 0 && index < ctx->ndevs ? ctx_device_name(ctx, index) : "";
}

int tvk_device_of(const tvk_tensor *t) {
  return t && t->status == TVK_OK && t->uop && t->uop->device >= 0 ? t->uop->device : -1;
}

UOp *front_copy(UOp *x, int device) {
  /* A view that is not plain memory is made so on its own device first: a
   * copy moves one block of bytes. */
  if (x && x->device >= 0 && x->op == OP_VIEW && !st_contiguous(x->arg.st))
    x = uop_new(x->ctx, OP_CONTIGUOUS, x->dtype, 1, &x, arg_none());
  return x ? graph_copy(x, device) : NULL;
}

tvk_tensor *tvk_to_device(tvk_tensor *t, int device) {
  tvk_tensor *bad = tensor_check_inputs("to_device", 1, &t);
  if (bad || !t) return bad;
  tvk_ctx *ctx = t->ctx;
  if (device < 0 || device >= ctx->ndevs)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "to_device: device %d is not one of the context's %d (0 to %d; "
                        "tvk_ctx_add_device opens more)",
                        device, ctx->ndevs, ctx->ndevs - 1);
  size_t m = FRONT_BEGIN(ctx);
  UOp *x = t->uop;
  if (x->device == UOP_DEVICE_MULTI) { /* sharded: its parts gathered on the device */
    UOp *sp = NULL;
    tvk_status st = shard_split(ctx, x, &sp);
    if (st != TVK_OK) return FRONT_END(ctx, m, tensor_error_ctx(ctx, st));
    x = sp->op == OP_MULTI ? shard_gather(sp, device) : sp;
    if (!x)
      return FRONT_END(ctx, m,
                       tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "to_device: out of memory"));
  }
  UOp *c = x && x->device != device ? front_copy(x, device) : x;
  return FRONT_END(ctx, m, tensor_new(ctx, c, t->dtype, t->ndim, t->shape));
}
