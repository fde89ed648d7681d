/* Memory the app owns, used in place: host memory on the CPU (tvk.h's
 * tvk_from_host_ptr) and storage buffers on the app's own Vulkan device
 * (tvk_vulkan.h); and the Vulkan buffer that holds a result. The device does
 * the device-specific part (DeviceOps.wrap, vk_buffer_export); see
 * docs/vulkan.md, "Interop". */
#include <stdint.h>
#include <string.h>

#include "frontend/frontend.h"
/* Only the declarations: the library's src/ includes no Vulkan header. */
#define TVK_VULKAN_DECLS_ONLY
#include "tvk_vulkan.h"

/* A tensor of dt and shape over the app's memory m (its nbytes filled in
 * here); op names the caller in messages. release is called only once a
 * BUFFER UOp owns the memory. */
static tvk_tensor *foreign_tensor(tvk_ctx *ctx, const char *op, tvk_dtype dt, int ndim,
                                  const int64_t *shape, DevForeign *m, void (*release)(void *),
                                  void *user) {
  int64_t numel;
  tvk_tensor *bad = ctx_check_shape(ctx, op, ndim, shape, &numel);
  if (bad) return bad;
  ScalarType s = dt_from_tvk(dt);
  size_t size = dt_scalar_size(s);
  if ((uint64_t)numel > SIZE_MAX / 2 / size)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: %lld %s elements are too many bytes", op,
                        (long long)numel, tvk_dtype_name(dt));
  m->nbytes = (size_t)numel * size;
  if (m->nbytes > ctx->dev->limits.max_buffer_bytes)
    return tensor_error(ctx, TVK_ERR_DEVICE,
                        "%s: %lld %s elements (%zu bytes) are more than %s's kernels can address "
                        "(%zu bytes: Vulkan's maxStorageBufferRange); wrap at most %zu elements "
                        "at a time",
                        op, (long long)numel, tvk_dtype_name(dt), m->nbytes,
                        ctx->dev->ops->name(ctx->dev), ctx->dev->limits.max_buffer_bytes,
                        ctx->dev->limits.max_buffer_bytes / size);
  size_t mark = FRONT_BEGIN(ctx);
  tvk_status st;
  int64_t id = ctx_buffer_wrap(ctx, s, numel, m, release, user, &st);
  if (id < 0) {
    char why[sizeof ctx->err.msg];
    memcpy(why, ctx->err.msg, sizeof why);
    return FRONT_END(ctx, mark, tensor_error(ctx, st, "%s: %s", op, why));
  }
  UOp *v = graph_buffer_view(ctx, id, ndim, shape);
  if (!v) { /* no UOp owns the buffer yet: the memory goes back untouched */
    ctx_buffer_discard(ctx, id);
    return FRONT_END(ctx, mark, tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op));
  }
  return FRONT_END(ctx, mark, tensor_new(ctx, v, dt, ndim, shape));
}

tvk_tensor *tvk_from_host_ptr(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                              void *data, void (*release)(void *user), void *user) {
  if (!ctx) return NULL;
  if (!tvk_dtype_valid(dt))
    return tensor_error(ctx, TVK_ERR_DTYPE, "from_host_ptr: dtype %d is not a tvk_dtype", (int)dt);
  /* the device checks the pointer: whether it can use host memory at all, and how aligned */
  DevForeign m = {.host = data, .elem_bytes = tvk_dtype_size(dt), .dtype_name = tvk_dtype_name(dt)};
  return foreign_tensor(ctx, "from_host_ptr", dt, ndim, shape, &m, release, user);
}

tvk_tensor *tvk_from_vulkan_buffer_u64(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                                       uint64_t buffer, uint64_t offset, uint64_t size,
                                       void (*release)(void *user), void *user) {
  if (!ctx) return NULL;
  if (!tvk_dtype_valid(dt))
    return tensor_error(ctx, TVK_ERR_DTYPE, "from_vulkan_buffer: dtype %d is not a tvk_dtype",
                        (int)dt);
  if (!buffer)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "from_vulkan_buffer: buffer is VK_NULL_HANDLE");
  DevForeign m = {.handle = buffer,
                  .offset = offset,
                  .size = size,
                  .elem_bytes = tvk_dtype_size(dt),
                  .dtype_name = tvk_dtype_name(dt)};
  return foreign_tensor(ctx, "from_vulkan_buffer", dt, ndim, shape, &m, release, user);
}

tvk_status tvk_vulkan_buffer_u64(tvk_tensor *t, uint64_t *buffer, uint64_t *offset,
                                 uint64_t *size) {
  uint64_t h = 0, o = 0, s = 0;
  tvk_status st = TVK_ERR_INVALID_ARG;
  if (!t) {
    front_no_ctx_error(st, "vulkan_buffer: t is NULL");
  } else if (t->status != TVK_OK) {
    st = err_set(&t->ctx->err, t->status, "%s", tvk_error_of(t));
  } else if ((st = vk_buffer_export(t->ctx->dev, NULL, &h, &o)) != TVK_OK) {
    /* not a Vulkan context: said before any work is done */
    err_set(&t->ctx->err, st, "vulkan_buffer: %s", t->ctx->dev->err.msg);
  } else {
    tvk_ctx *ctx = t->ctx;
    size_t mark = FRONT_BEGIN(ctx);
    Buffer *b = ctx_materialize(t, "vulkan_buffer", &st);
    if (b && b->nbytes > 0) {
      st = vk_buffer_export(ctx->dev, b->dev, &h, &o);
      /* the app reads it next: what tvk wrote must be done */
      if (st == TVK_OK) st = ctx->dev->ops->sync(ctx->dev);
      if (st == TVK_OK) s = b->nbytes;
      if (st != TVK_OK) err_set(&ctx->err, st, "vulkan_buffer: %s", ctx->dev->err.msg);
    }
    uop_pool_drain(ctx->u, mark);
  }
  if (st != TVK_OK) h = o = s = 0;
  if (buffer) *buffer = h;
  if (offset) *offset = o;
  if (size) *size = s;
  return st;
}
