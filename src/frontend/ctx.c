/* Contexts and the tensor lifecycle: creation, errors, scopes, stats, buffers,
 * reading results. See frontend.h for the tensor graph. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/vec.h"
#include "runtime/run.h"
#include "runtime/trace.h"
#include "schedule/schedule.h"

/* Only the declarations: the library's src/ includes no Vulkan header. */
#define TVK_VULKAN_DECLS_ONLY
#include "tvk_vulkan.h"

/* ---------------------------------------------------------------- dtypes */

static const ScalarType scalar_of[] = {
    [TVK_BOOL] = DT_BOOL,       [TVK_INT8] = DT_INT8,         [TVK_UINT8] = DT_UINT8,
    [TVK_INT16] = DT_INT16,     [TVK_UINT16] = DT_UINT16,     [TVK_INT32] = DT_INT32,
    [TVK_UINT32] = DT_UINT32,   [TVK_INT64] = DT_INT64,       [TVK_UINT64] = DT_UINT64,
    [TVK_FLOAT16] = DT_FLOAT16, [TVK_BFLOAT16] = DT_BFLOAT16, [TVK_FLOAT32] = DT_FLOAT32,
    [TVK_FLOAT64] = DT_FLOAT64,
};

bool tvk_dtype_valid(tvk_dtype dt) { return (unsigned)dt <= (unsigned)TVK_FLOAT64; }

ScalarType dt_from_tvk(tvk_dtype dt) { return tvk_dtype_valid(dt) ? scalar_of[dt] : DT_VOID; }

tvk_dtype dt_to_tvk(ScalarType s) {
  for (int i = 0; i <= (int)TVK_FLOAT64; i++)
    if (scalar_of[i] == s) return (tvk_dtype)i;
  return TVK_FLOAT32; /* unreachable for tensor dtypes */
}

const char *tvk_dtype_name(tvk_dtype dt) {
  return tvk_dtype_valid(dt) ? dt_scalar_name(scalar_of[dt]) : "invalid";
}

size_t tvk_dtype_size(tvk_dtype dt) {
  return tvk_dtype_valid(dt) ? dt_scalar_size(scalar_of[dt]) : 0;
}

/* ---------------------------------------------------------------- errors */

/* Errors with no context to hold them (tvk_last_create_error, tvk_last_error):
 * per thread. A failed create records in both. */
static _Thread_local Error create_err, no_ctx_err;

const char *tvk_last_create_error(void) { return create_err.msg; }
const char *tvk_last_error(void) { return no_ctx_err.msg; }

tvk_status front_no_ctx_error(tvk_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(&no_ctx_err, st, fmt, ap);
  va_end(ap);
  return st;
}

const char *tvk_ctx_error(const tvk_ctx *ctx) { return ctx ? ctx->err.msg : ""; }
void tvk_ctx_clear_error(tvk_ctx *ctx) {
  if (ctx) err_clear(&ctx->err);
}

/* ---------------------------------------------------------------- tensors */

static tvk_tensor *tensor_alloc(tvk_ctx *ctx) {
  tvk_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ctx = ctx;
  t->seq = ctx->next_seq++;
  t->prev = ctx->tail;
  if (ctx->tail)
    ctx->tail->next = t;
  else
    ctx->head = t;
  ctx->tail = t;
  return t;
}

static void tensor_unlink_free(tvk_tensor *t) {
  tvk_ctx *ctx = t->ctx;
  if (t->prev)
    t->prev->next = t->next;
  else
    ctx->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    ctx->tail = t->prev;
  uop_release(t->uop);
  free(t->msg);
  free(t);
}

/* ctx's out-of-memory tensor (tvk_ctx.oom_tensor), with the message in
 * ctx's error too. */
static tvk_tensor *tensor_oom(tvk_ctx *ctx) {
  err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s", ctx->oom_tensor.msg);
  return &ctx->oom_tensor;
}

/* Two devices a node of UOP_DEVICE_MIXED combines (UOp.device): found by
 * going down to the first node whose sources disagree. */
static void mixed_devices(const UOp *u, int *a, int *b) {
  *a = *b = UOP_DEVICE_NONE;
  while (u && u->device == UOP_DEVICE_MIXED) {
    const UOp *down = NULL;
    for (uint32_t k = 0; k < u->nsrc; k++) {
      int d = u->src[k]->device;
      if (d == UOP_DEVICE_MIXED) down = u->src[k];
      if (d < 0) continue;
      if (*a < 0)
        *a = d;
      else if (d != *a)
        *b = d;
    }
    if (*b >= 0) return;
    *a = UOP_DEVICE_NONE;
    u = down;
  }
}

tvk_tensor *tensor_new(tvk_ctx *ctx, UOp *u, tvk_dtype dt, int ndim, const int64_t *shape) {
  if (!u) return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "out of memory building the graph");
  if (u->device == UOP_DEVICE_MIXED) { /* what tensor_check_inputs did not see */
    int a, b;
    mixed_devices(u, &a, &b);
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "an op combines tensors of device %d (%s) and device %d (%s); copy one "
                        "to the other's device first (tvk_to_device)",
                        a, ctx_device_name(ctx, a), b, ctx_device_name(ctx, b));
  }
  tvk_tensor *t = tensor_alloc(ctx);
  if (!t) return tensor_oom(ctx);
  t->uop = uop_retain(u);
  t->dtype = dt;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  return t;
}

tvk_tensor *tensor_from_uop(tvk_ctx *ctx, UOp *u) {
  if (!u) return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "out of memory building the graph");
  int64_t shape[TVK_MAX_DIMS];
  int nd = graph_shape(u, shape);
  return tensor_new(ctx, u, dt_to_tvk((ScalarType)u->dtype.scalar), nd, shape);
}

void tensor_set_uop(tvk_tensor *t, UOp *nu) {
  uop_retain(nu);
  uop_release(t->uop);
  t->uop = nu;
}

static tvk_tensor *tensor_error_msg(tvk_ctx *ctx, tvk_status status, const char *msg) {
  tvk_tensor *t = tensor_alloc(ctx);
  if (!t) return tensor_oom(ctx);
  t->status = status;
  t->msg = strdup(msg); /* NULL on OOM: the status still tells */
  t->dtype = TVK_FLOAT32;
  return t;
}

tvk_tensor *tensor_error(tvk_ctx *ctx, tvk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(&ctx->err, status, fmt, ap);
  va_end(ap);
  return tensor_error_msg(ctx, status, ctx->err.msg);
}

tvk_tensor *tensor_error_from(const tvk_tensor *src) {
  return tensor_error_msg(src->ctx, src->status, src->msg ? src->msg : "");
}

tvk_tensor *tensor_check_inputs(const char *op, int n, tvk_tensor *const *ts) {
  tvk_ctx *ctx = NULL;
  for (int i = 0; i < n && !ctx; i++)
    if (ts[i]) ctx = ts[i]->ctx;
  if (!ctx) return NULL; /* every input NULL: nothing to attach an error to */
  for (int i = 0; i < n; i++) {
    if (!ts[i])
      return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: tensor argument %d is NULL", op, i + 1);
    if (ts[i]->ctx != ctx)
      return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                          "%s: tensor arguments belong to different contexts", op);
    if (ts[i]->status != TVK_OK) return tensor_error_from(ts[i]);
  }
  return front_check_devices(op, n, ts);
}

void tvk_release(tvk_tensor *t) {
  if (!t || t == &t->ctx->oom_tensor) return;
  tvk_ctx *ctx = t->ctx;
  size_t m = FRONT_BEGIN(ctx);
  tensor_unlink_free(t);
  uop_pool_drain(ctx->u, m);
}

int tvk_ndim(const tvk_tensor *t) { return t ? t->ndim : 0; }
const int64_t *tvk_shape(const tvk_tensor *t) { return t ? t->shape : NULL; }
tvk_dtype tvk_dtype_of(const tvk_tensor *t) { return t ? t->dtype : TVK_FLOAT32; }
tvk_status tvk_status_of(const tvk_tensor *t) { return t ? t->status : TVK_ERR_INVALID_ARG; }
const char *tvk_error_of(const tvk_tensor *t) {
  if (!t) return "tensor is NULL";
  return t->msg ? t->msg : "";
}
tvk_ctx *tvk_ctx_of(const tvk_tensor *t) { return t ? t->ctx : NULL; }

int64_t tvk_numel(const tvk_tensor *t) {
  if (!t) return 0;
  int64_t n;
  return ctx_bound_numel(t->ctx, NULL, "", t->ndim, t->shape, &n) == TVK_OK ? n : -1;
}

/* ---------------------------------------------------------------- scopes, stats */

size_t tvk_scope_begin(tvk_ctx *ctx) { return ctx ? (size_t)ctx->next_seq : 0; }

void tvk_scope_end(tvk_ctx *ctx, size_t scope, int nkeep, tvk_tensor *const *keep) {
  if (!ctx) return;
  size_t m = FRONT_BEGIN(ctx);
  for (tvk_tensor *t = ctx->tail, *prev; t && t->seq >= scope; t = prev) {
    prev = t->prev;
    bool kept = false;
    for (int i = 0; keep && i < nkeep && !kept; i++) kept = keep[i] == t;
    if (!kept) tensor_unlink_free(t);
  }
  uop_pool_drain(ctx->u, m);
  /* Kept tensors now belong to the enclosing scope: they take the mark of the
   * scope that ended, so the end of any enclosing scope (whose mark is <= it,
   * equal when this scope began first thing in it) releases them unless kept
   * again, and a later sibling scope (a higher mark) does not. The list stays
   * ordered by seq: everything after them in it was just released. */
  for (int i = 0; keep && i < nkeep; i++) {
    tvk_tensor *t = keep[i];
    if (t && t->ctx == ctx && t->seq >= scope) t->seq = scope;
  }
}

void tvk_stats_get_sized(const tvk_ctx *ctx, tvk_stats *out, size_t out_size) {
  if (!out) return;
  tvk_stats s = {0};
  if (ctx) {
    s = ctx->stats;
    for (int i = 0; i < ctx->ndevs; i++)
      s.validation_messages += vk_validation_messages(ctx->devs[i]);
  }
  memcpy(out, &s, out_size < sizeof s ? out_size : sizeof s);
}

void tvk_stats_reset(tvk_ctx *ctx) {
  if (!ctx) return;
  uint64_t now = ctx->stats.bytes_now;
  memset(&ctx->stats, 0, sizeof ctx->stats);
  ctx->stats.bytes_now = now;
  ctx->stats.bytes_peak = now;
}

/* ---------------------------------------------------------------- buffers */

static void buffer_release(tvk_ctx *ctx, int64_t id) {
  Buffer *b = ctx->bufs[id];
  if (!b) return;
  /* The app may reuse its memory once release is called: no kernel that
   * reads or writes it may still be pending then. A failed sync (a lost
   * device) runs nothing more either. */
  Device *d = ctx->devs[b->device];
  if (b->foreign) (void)d->ops->sync(d);
  d->ops->free(d, b->dev);
  if (!b->foreign) ctx->stats.bytes_now -= b->nbytes;
  if (b->release) b->release(b->release_user);
  free(b);
  ctx->bufs[id] = NULL;
}

void ctx_buffer_discard(tvk_ctx *ctx, int64_t id) {
  Buffer *b = ctx_buffer(ctx, id);
  if (b) b->release = NULL;
  buffer_release(ctx, id);
}

/* The UCtx calls this when the last reference to a BUFFER goes. */
static void on_buffer_freed(void *user, UOp *buffer) {
  buffer_release(user, graph_buffer_id(buffer));
}

/* A free slot of the buffer table with a record in it, or -1 with *st set. */
static int64_t buffer_slot(tvk_ctx *ctx, tvk_status *st) {
  int64_t id = 0;
  while (id < ctx->nbufs && ctx->bufs[id]) id++;
  if (!VEC_RESERVE(ctx->bufs, ctx->capbufs, (size_t)id + 1)) {
    *st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "out of memory for the buffer table");
    return -1;
  }
  Buffer *b = calloc(1, sizeof *b);
  if (!b) {
    *st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "out of memory for a buffer record");
    return -1;
  }
  if (id == ctx->nbufs) ctx->nbufs++;
  ctx->bufs[id] = b;
  return id;
}

int64_t ctx_buffer_wrap(tvk_ctx *ctx, ScalarType s, int64_t numel, const DevForeign *m,
                        void (*release)(void *), void *user, tvk_status *st) {
  if (!ctx->dev->ops->wrap) {
    *st = err_set(&ctx->err, TVK_ERR_DEVICE, "%s cannot use memory the app owns",
                  ctx->dev->ops->name(ctx->dev));
    return -1;
  }
  int64_t id = buffer_slot(ctx, st);
  if (id < 0) return -1;
  Buffer *b = ctx->bufs[id];
  *b = (Buffer){.nbytes = m->nbytes, .dtype = s, .numel = numel, .foreign = true};
  tvk_status ds = ctx->dev->ops->wrap(ctx->dev, m, &b->dev);
  if (ds != TVK_OK) {
    free(b);
    ctx->bufs[id] = NULL;
    *st = err_set(&ctx->err, ds, "%s", ctx->dev->err.msg);
    return -1;
  }
  b->release = release;
  b->release_user = user;
  *st = TVK_OK;
  return id;
}

int64_t ctx_buffer_new_on(tvk_ctx *ctx, int device, ScalarType s, int64_t numel, tvk_status *st) {
  Device *dev = ctx->devs[device];
  size_t size = dt_scalar_size(s);
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / 2 / size) {
    *st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "buffer of %lld %s elements is too large",
                  (long long)numel, dt_scalar_name(s));
    return -1;
  }
  /* What the device cannot index is refused here, where the tensor is made,
   * not in the first kernel that would read it. */
  size_t most = dev->limits.max_buffer_bytes;
  if ((size_t)numel * size > most) {
    *st = err_set(&ctx->err, TVK_ERR_DEVICE,
                  "a buffer of %lld %s elements (%zu bytes) is larger than %s's kernels can "
                  "address (%zu bytes: the device's largest storage buffer, Vulkan's "
                  "maxStorageBufferRange); split the tensor into parts of at most %zu "
                  "elements, or use a device with a larger limit (\"CPU\" has none)",
                  (long long)numel, dt_scalar_name(s), (size_t)numel * size, dev->ops->name(dev),
                  most, most / size);
    return -1;
  }
  int64_t id = buffer_slot(ctx, st);
  if (id < 0) return -1;
  Buffer *b = ctx->bufs[id];
  b->nbytes = (size_t)numel * size;
  b->dtype = s;
  b->numel = numel;
  b->device = device;
  tvk_status ds = dev->ops->alloc(dev, b->nbytes, &b->dev);
  if (ds != TVK_OK) {
    free(b);
    ctx->bufs[id] = NULL;
    *st = err_set(&ctx->err, ds, "%s", dev->err.msg);
    return -1;
  }
  ctx->stats.bytes_now += b->nbytes;
  if (ctx->stats.bytes_now > ctx->stats.bytes_peak) ctx->stats.bytes_peak = ctx->stats.bytes_now;
  *st = TVK_OK;
  return id;
}

int64_t ctx_buffer_new(tvk_ctx *ctx, ScalarType s, int64_t numel, tvk_status *st) {
  return ctx_buffer_new_on(ctx, 0, s, numel, st);
}

Buffer *ctx_buffer(const tvk_ctx *ctx, int64_t id) {
  return id >= 0 && id < ctx->nbufs ? ctx->bufs[id] : NULL;
}

/* ---------------------------------------------------------------- graph helpers */

UOp *graph_buffer_view(tvk_ctx *ctx, int64_t id, int ndim, const int64_t *shape) {
  Buffer *b = ctx_buffer(ctx, id);
  UOp *buf = graph_buffer_on(ctx->u, b->dtype, id, b->numel, b->device);
  ShapeTracker *st = st_from_shape(ndim, shape);
  if (!buf || !st) {
    st_free(st);
    return NULL;
  }
  UOp *v = uop_new(ctx->u, OP_VIEW, buf->dtype, 1, &buf, arg_st(st));
  st_free(st);
  return v;
}

UOp *graph_const(tvk_ctx *ctx, ScalarType s, double value, int ndim, const int64_t *shape) {
  UOp *c = uop_const_float(ctx->u, dt_make(s), value);
  ShapeTracker *st0 = st_from_shape(0, NULL);
  if (!c || !st0) {
    st_free(st0);
    return NULL;
  }
  int64_t ones[TVK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) ones[i] = 1;
  ShapeTracker *st1 = st_reshape(st0, ndim, ones);
  ShapeTracker *st = st1 ? st_expand(st1, shape) : NULL;
  UOp *v = st ? uop_new(ctx->u, OP_VIEW, c->dtype, 1, &c, arg_st(st)) : NULL;
  st_free(st0);
  st_free(st1);
  st_free(st);
  return v;
}

/* ---------------------------------------------------------------- creation */

/* A shape given to a creation function: *numel its count (a symbolic dim at
 * its largest value). Symbolic dims only where sym (then checked as sizes of
 * the context). */
static tvk_status check_shape_sym(tvk_ctx *ctx, const char *op, int ndim, const int64_t *shape,
                                  int64_t *numel, bool sym) {
  if (ndim < 0 || ndim > TVK_MAX_DIMS)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "%s: ndim %d is out of range 0..%d", op, ndim,
                   TVK_MAX_DIMS);
  if (ndim > 0 && !shape)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "%s: shape is NULL with ndim %d", op, ndim);
  *numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (sint_is_sym(shape[i]) && sym) {
      char what[16];
      snprintf(what, sizeof what, "dim %d", i);
      tvk_status st = ctx_check_size(ctx, op, what, shape[i]);
      if (st != TVK_OK) return st;
      int64_t hi = sint_vmax(shape[i]);
      if (hi && *numel > INT64_MAX / 8 / hi)
        return err_set(&ctx->err, TVK_ERR_SHAPE, "%s: shape has too many elements", op);
      *numel *= hi;
      continue;
    }
    if (sint_is_sym(shape[i])) {
      char t[64];
      sint_str(shape[i], t, sizeof t);
      return err_set(&ctx->err, TVK_ERR_SHAPE,
                     "%s: dim %d is the symbolic size %s; %s does not take symbolic sizes yet", op,
                     i, t, op);
    }
    if (shape[i] < 0)
      return err_set(&ctx->err, TVK_ERR_SHAPE, "%s: dim %d has negative size %lld", op, i,
                     (long long)shape[i]);
    if (shape[i] && *numel > INT64_MAX / 8 / shape[i])
      return err_set(&ctx->err, TVK_ERR_SHAPE, "%s: shape has too many elements", op);
    *numel *= shape[i];
  }
  return TVK_OK;
}

static tvk_status check_shape(tvk_ctx *ctx, const char *op, int ndim, const int64_t *shape,
                              int64_t *numel) {
  return check_shape_sym(ctx, op, ndim, shape, numel, false);
}

tvk_tensor *ctx_check_shape(tvk_ctx *ctx, const char *op, int ndim, const int64_t *shape,
                            int64_t *numel) {
  tvk_status st = check_shape(ctx, op, ndim, shape, numel);
  return st == TVK_OK ? NULL : tensor_error_ctx(ctx, st);
}

tvk_tensor *tensor_error_ctx(tvk_ctx *ctx, tvk_status st) {
  return tensor_error_msg(ctx, st, ctx->err.msg);
}

/* A copy's span in the trace, with its size. */
static void trace_copy(tvk_ctx *ctx, const char *name, int64_t t0, size_t nbytes) {
  char args[48];
  snprintf(args, sizeof args, "\"bytes\": %zu", nbytes);
  trace_span(ctx->trace, false, "copy", name, t0, trace_now_ns(), args);
}

tvk_tensor *tvk_from_data(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                          const void *data) {
  if (!ctx) return NULL;
  int64_t numel;
  tvk_status st = check_shape_sym(ctx, "from_data", ndim, shape, &numel, true);
  /* a symbolic shape: the data has the length of the bound values (at most
   * the count just checked) */
  if (st == TVK_OK) st = ctx_bound_numel(ctx, &ctx->err, "from_data", ndim, shape, &numel);
  if (st != TVK_OK) return tensor_error_ctx(ctx, st);
  if (!tvk_dtype_valid(dt))
    return tensor_error(ctx, TVK_ERR_DTYPE, "from_data: dtype %d is not a tvk_dtype", (int)dt);
  if (!data && numel > 0) return tensor_error(ctx, TVK_ERR_INVALID_ARG, "from_data: data is NULL");
  size_t m = FRONT_BEGIN(ctx);
  int64_t id = ctx_buffer_new(ctx, dt_from_tvk(dt), numel, &st);
  if (id < 0) return FRONT_END(ctx, m, tensor_error_ctx(ctx, st));
  Buffer *b = ctx_buffer(ctx, id);
  UOp *v = graph_buffer_view(ctx, id, ndim, shape);
  if (v && ctx_buffer_record_sizes(ctx, b, ndim, shape) != TVK_OK) v = NULL;
  if (!v) { /* buffer not yet owned by a UOp */
    buffer_release(ctx, id);
    return FRONT_END(ctx, m, tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "from_data: out of memory"));
  }
  tvk_tensor *t = tensor_new(ctx, v, dt, ndim, shape);
  int64_t t0 = ctx->trace ? trace_now_ns() : 0;
  tvk_status cs = b->nbytes ? ctx->dev->ops->copy_in(ctx->dev, b->dev, 0, data, b->nbytes) : TVK_OK;
  if (ctx->trace && b->nbytes) trace_copy(ctx, "copy to the device", t0, b->nbytes);
  if (cs != TVK_OK) {
    tvk_release(t);
    return FRONT_END(ctx, m, tensor_error(ctx, TVK_ERR_DEVICE, "from_data: %s", ctx->dev->err.msg));
  }
  return FRONT_END(ctx, m, t);
}

/* tvk_full and tvk_scalar: errors name the op the user called. */
static tvk_tensor *full_op(tvk_ctx *ctx, const char *op, tvk_dtype dt, int ndim,
                           const int64_t *shape, double value) {
  if (!ctx) return NULL;
  int64_t numel;
  tvk_status st = check_shape_sym(ctx, op, ndim, shape, &numel, true);
  if (st != TVK_OK) return tensor_error_ctx(ctx, st);
  if (!tvk_dtype_valid(dt))
    return tensor_error(ctx, TVK_ERR_DTYPE, "%s: dtype %d is not a tvk_dtype", op, (int)dt);
  size_t m = FRONT_BEGIN(ctx);
  UOp *c = graph_const(ctx, dt_from_tvk(dt), value, ndim, shape);
  return FRONT_END(ctx, m, tensor_new(ctx, c, dt, ndim, shape));
}

tvk_tensor *tvk_full(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape, double value) {
  return full_op(ctx, "full", dt, ndim, shape, value);
}

tvk_tensor *tvk_scalar(tvk_ctx *ctx, tvk_dtype dt, double value) {
  if (!ctx || dt != TVK_FLOAT32) return full_op(ctx, "scalar", dt, 0, NULL, value);
  size_t m = FRONT_BEGIN(ctx);
  UOp *v = graph_value(ctx->u, ctx->next_value++, (float)value);
  return FRONT_END(ctx, m, tensor_new(ctx, v, dt, 0, NULL));
}

/* ---------------------------------------------------------------- running */

tvk_status tvk_realize(int n, tvk_tensor *const *ts) {
  if (n == 0) return TVK_OK;
  if (n < 0) return err_set(&no_ctx_err, TVK_ERR_INVALID_ARG, "realize: n is %d (must be >= 0)", n);
  if (!ts) return err_set(&no_ctx_err, TVK_ERR_INVALID_ARG, "realize: ts is NULL with n %d", n);
  tvk_ctx *ctx = NULL;
  for (int i = 0; i < n && !ctx; i++)
    if (ts[i]) ctx = ts[i]->ctx;
  if (!ctx) return err_set(&no_ctx_err, TVK_ERR_INVALID_ARG, "realize: all %d tensors are NULL", n);
  for (int i = 0; i < n; i++) {
    if (!ts[i])
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "realize: tensor %d of %d is NULL", i, n);
    if (ts[i]->ctx != ctx)
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                     "realize: tensors belong to different contexts");
    if (ts[i]->status != TVK_OK)
      return err_set(&ctx->err, ts[i]->status, "%s", tvk_error_of(ts[i]));
  }
  size_t m = FRONT_BEGIN(ctx);
  tvk_status st = ctx_realize(ctx, n, ts);
  uop_pool_drain(ctx->u, m);
  return st;
}

tvk_status tvk_sync(tvk_ctx *ctx) {
  return ctx ? ctx_sync_devices(ctx, "sync") : TVK_ERR_INVALID_ARG;
}

tvk_status tvk_ctx_wait_compiles(tvk_ctx *ctx) {
  if (!ctx) return TVK_ERR_INVALID_ARG;
  for (int i = 0; i < ctx->ndevs; i++) {
    Device *d = ctx->devs[i];
    tvk_status st = d->ops->wait_compiles ? d->ops->wait_compiles(d) : TVK_OK;
    if (st != TVK_OK) return err_set(&ctx->err, st, "wait_compiles: %s", d->err.msg);
  }
  return TVK_OK;
}

/* A realized tensor is VIEW(BUFFER) with a contiguous tracker of its shape. */
static bool is_plain_buffer(const tvk_tensor *t) {
  const UOp *u = t->uop;
  return u->op == OP_VIEW && u->src[0]->op == OP_BUFFER && st_contiguous(u->arg.st);
}

Buffer *ctx_materialize(tvk_tensor *t, const char *op, tvk_status *st) {
  tvk_ctx *ctx = t->ctx;
  /* An assign is realized in place: its target's buffer is then t's. */
  *st = t->uop->op == OP_ASSIGN ? tvk_realize(1, &t) : TVK_OK;
  if (*st == TVK_OK && !is_plain_buffer(t)) {
    /* A view of a buffer (or a graph) is made contiguous first, so the copy is one block. */
    UOp *c = uop_new(ctx->u, OP_CONTIGUOUS, t->uop->dtype, 1, &t->uop, arg_none());
    tvk_tensor *tmp = tensor_new(ctx, c, t->dtype, t->ndim, t->shape);
    *st = tvk_realize(1, &tmp);
    if (*st == TVK_OK) tensor_set_uop(t, tmp->uop);
    tvk_release(tmp);
  }
  if (*st == TVK_OK && !is_plain_buffer(t))
    *st = err_set(&ctx->err, TVK_ERR_INTERNAL,
                  "%s: tensor is not a contiguous buffer after realize", op);
  Buffer *b = *st == TVK_OK ? ctx_buffer(ctx, graph_buffer_id(t->uop->src[0])) : NULL;
  if (*st == TVK_OK && !b)
    *st = err_set(&ctx->err, TVK_ERR_INTERNAL, "%s: the tensor's buffer is gone", op);
  return b;
}

tvk_status tvk_to_host(tvk_tensor *t, void *dst, size_t nbytes) {
  if (!t) return TVK_ERR_INVALID_ARG;
  tvk_ctx *ctx = t->ctx;
  if (t->status != TVK_OK) return err_set(&ctx->err, t->status, "%s", tvk_error_of(t));
  int64_t numel; /* a symbolic shape: the count with the bound values */
  tvk_status bs = ctx_bound_numel(ctx, &ctx->err, "to_host", t->ndim, t->shape, &numel);
  if (bs != TVK_OK) return bs;
  size_t need = (size_t)numel * tvk_dtype_size(t->dtype);
  if (nbytes < need)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "to_host: nbytes %zu is less than the %zu bytes of the tensor", nbytes, need);
  if (need == 0) return TVK_OK;
  if (!dst) return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "to_host: dst is NULL");
  size_t m = FRONT_BEGIN(ctx);
  tvk_status st;
  tvk_tensor *gathered = NULL; /* a sharded tensor: assembled on the first device */
  if (t->uop->device == UOP_DEVICE_MULTI) {
    gathered = tvk_to_device(t, 0);
    if (gathered->status != TVK_OK) {
      st = err_set(&ctx->err, gathered->status, "%s", tvk_error_of(gathered));
      tvk_release(gathered);
      uop_pool_drain(ctx->u, m);
      return st;
    }
    t = gathered;
  }
  Buffer *b = ctx_materialize(t, "to_host", &st);
  if (b && (st = ctx_buffer_check_sizes(ctx, "to_host", b)) != TVK_OK) b = NULL;
  if (b && b->nbytes < need)
    st = err_set(&ctx->err, TVK_ERR_SHAPE,
                 "to_host: with the bound sizes the tensor has %zu bytes, its buffer %zu (a "
                 "tensor made for smaller sizes)",
                 need, b->nbytes),
    b = NULL;
  if (b) {
    Device *d = ctx->devs[b->device];
    st = d->ops->sync(d);
    int64_t t0 = ctx->trace ? trace_now_ns() : 0;
    if (st == TVK_OK) st = d->ops->copy_out(d, b->dev, 0, dst, need);
    if (ctx->trace) trace_copy(ctx, "copy to the host", t0, need);
    if (st != TVK_OK) st = err_set(&ctx->err, st, "to_host: %s", d->err.msg);
  }
  tvk_release(gathered);
  uop_pool_drain(ctx->u, m);
  return st;
}

/* ---------------------------------------------------------------- create / destroy */

static int env_int(const char *name, int given) {
  if (given) return given;
  const char *v = getenv(name);
  return v ? atoi(v) : 0;
}

static const char *env_str(const char *name, const char *given) {
  if (given) return given;
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* TVK_TRACE: a file that cannot be made is a warning, as for TVK_GRAPH; the
 * context then runs untraced (its launches are still timed, for the profile). */
static void open_trace(tvk_ctx *ctx) {
  Error e;
  err_clear(&e);
  if (trace_open(ctx->trace_path, ctx->dev->ops->name(ctx->dev), &ctx->trace, &e) != TVK_OK)
    log_msg(&ctx->log, TVK_LOG_WARN, "tvk: no trace (TVK_TRACE): %s", e.msg);
}

/* $TVK_CACHE_READONLY, $TVK_CC_TIMEOUT and $TVK_CPU_TIERS are read by the devices, for a
 * field left 0, as $CC is. */
/* vk_app: a tvk_vulkan_device (tvk_vulkan.h) of vk_size bytes to run on
 * instead of a device by name. */
tvk_status ctx_open_device(tvk_ctx *ctx, const char *name, const void *vk_app, size_t vk_size,
                           Device **out, Error *err) {
  DeviceOptions dopt = {.cache_dir = ctx->cache_dir,
                        .cc = ctx->cc,
                        .threads = ctx->opt.threads,
                        .debug = ctx->opt.debug,
                        .validate = ctx->opt.validate,
                        .cache_readonly = ctx->opt.cache_readonly,
                        .no_disk_cache = ctx->opt.no_disk_cache,
                        .cc_timeout = ctx->opt.cc_timeout,
                        .log = ctx->log,
                        .cpu_tiers = (int)ctx->opt.cpu_tiers,
                        .profile = ctx->opt.profile > 0 || ctx->trace_path};
  tvk_status st = vk_app ? vk_device_create_app(&dopt, vk_app, vk_size, out, err)
                         : device_open(name, &dopt, out, err);
  if (st == TVK_OK && (ctx->opt.profile > 0 || ctx->opt.debug >= 1 || ctx->trace_path)) {
    (*out)->on_time = profile_on_time;
    (*out)->time_user = ctx;
  }
  return st;
}

static tvk_status ctx_create(const tvk_ctx_options *opts, const void *vk_app, size_t vk_size,
                             tvk_ctx **out) {
  err_clear(&create_err);
  const char *fn = vk_app ? "tvk_ctx_create_vulkan" : "tvk_ctx_create";
  if (!out) return err_set(&create_err, TVK_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  tvk_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return err_set(&create_err, TVK_ERR_OUT_OF_MEMORY, "tvk_ctx_create: out of memory");
  /* never unlinked, so its message is never freed */
  static char oom_msg[] = "out of memory making a tensor";
  ctx->oom_tensor = (tvk_tensor){
      .ctx = ctx, .status = TVK_ERR_OUT_OF_MEMORY, .msg = oom_msg, .dtype = TVK_FLOAT32};
  tvk_ctx_options o = opts ? *opts : (tvk_ctx_options){0};
  ctx->log = (LogSink){o.log, o.log_user};
  o.debug = env_int("TVK_DEBUG", o.debug);
  o.progress = env_int("TVK_PROGRESS", o.progress);
  o.profile = env_int("TVK_PROFILE", o.profile);
  o.validate = env_int("TVK_VALIDATE", o.validate);
  o.noopt = env_int("TVK_NOOPT", o.noopt);
  o.gpu_rules = env_int("TVK_GPU_RULES", o.gpu_rules);
  o.no_chains = env_int("TVK_NO_CHAINS", o.no_chains);
  o.beam = env_int("TVK_BEAM", o.beam);
  o.no_disk_cache = env_int("TVK_NO_DISK_CACHE", o.no_disk_cache);
  const char *graph = env_str("TVK_GRAPH", o.graph), *trace = env_str("TVK_TRACE", o.trace);
  ctx->graph = graph ? strdup(graph) : NULL;
  o.graph = ctx->graph;
  ctx->trace_path = trace ? strdup(trace) : NULL;
  o.trace = ctx->trace_path;
  const char *cache = env_str("TVK_CACHE_DIR", o.cache_dir),
             *cc = o.cc; /* CC: the CPU device reads it */
  ctx->cache_dir = cache ? strdup(cache) : NULL;
  ctx->cc = cc ? strdup(cc) : NULL;
  o.cache_dir = ctx->cache_dir;
  o.cc = ctx->cc;
  o.device = NULL; /* not kept: the caller's string */
  ctx->opt = o;
  ctx->u = uctx_new();
  tvk_status st =
      ctx->u ? TVK_OK
             : err_set(&create_err, TVK_ERR_OUT_OF_MEMORY, "tvk_ctx_create: out of memory");
  /* An app's own Vulkan device is the device: $TVK_DEVICE does not apply. */
  if (st == TVK_OK)
    st = ctx_open_device(ctx, vk_app ? NULL : env_str("TVK_DEVICE", opts ? opts->device : NULL),
                         vk_app, vk_size, &ctx->dev, &create_err);
  if (st == TVK_OK) {
    ctx->devs[0] = ctx->dev, ctx->ndevs = 1;
    if (ctx->trace_path) open_trace(ctx);
  }
  if (st != TVK_OK) {
    tvk_ctx_destroy(ctx);
    return st;
  }
  uctx_set_buffer_hook(ctx->u, on_buffer_freed, ctx);
  *out = ctx;
  return TVK_OK;
}

tvk_status tvk_ctx_create_sized(const tvk_ctx_options *opts, size_t opts_size, tvk_ctx **out) {
  /* the fields the caller knows; the rest keep their zero defaults */
  tvk_ctx_options o = {0};
  if (opts) memcpy(&o, opts, opts_size < sizeof o ? opts_size : sizeof o);
  tvk_status st = ctx_create(opts ? &o : NULL, NULL, 0, out);
  if (st != TVK_OK) no_ctx_err = create_err;
  return st;
}

tvk_status tvk_ctx_create_vulkan_sized(const struct tvk_vulkan_device *vk, size_t vk_size,
                                       const tvk_ctx_options *opts, size_t opts_size,
                                       tvk_ctx **out) {
  tvk_ctx_options o = {0};
  if (opts) memcpy(&o, opts, opts_size < sizeof o ? opts_size : sizeof o);
  tvk_status st;
  if (!vk) {
    if (out) *out = NULL;
    st = err_set(&create_err, TVK_ERR_INVALID_ARG, "tvk_ctx_create_vulkan: vk is NULL");
  } else {
    st = ctx_create(opts ? &o : NULL, vk, vk_size, out);
  }
  if (st != TVK_OK) no_ctx_err = create_err;
  return st;
}

tvk_status tvk_ctx_create(const char *device, tvk_ctx **out) {
  tvk_ctx_options o = {.device = device};
  return tvk_ctx_create_opts(&o, out);
}

const char *tvk_ctx_device(const tvk_ctx *ctx) {
  return ctx && ctx->dev ? ctx->dev->ops->name(ctx->dev) : "";
}

void tvk_ctx_destroy(tvk_ctx *ctx) {
  if (!ctx) return;
  if (ctx->dev && ctx->opt.debug >= 1) { /* where the time went, last */
    const char *t = tvk_profile_summary(ctx);
    if (*t) log_msg(&ctx->log, TVK_LOG_INFO, "%s", t);
  }
  if (ctx->trace) { /* with the spans of launches still pending */
    (void)ctx_sync_devices(ctx, NULL);
    if (!trace_close(ctx->trace))
      log_msg(&ctx->log, TVK_LOG_WARN, "tvk: writing the trace '%s' failed (TVK_TRACE)",
              ctx->trace_path);
    ctx->trace = NULL;
  }
  for (int i = 0; i < ctx->ndevs; i++) /* what completes while it goes is not counted */
    ctx->devs[i]->on_time = NULL;
  jit_free_all(ctx); /* they hold buffers, and programs of the cache freed below */
  optim_free_all(ctx);
  while (ctx->head) tensor_unlink_free(ctx->head);
  if (ctx->u) {
    uop_pool_drain(ctx->u, 0);
    uctx_set_buffer_hook(ctx->u, NULL, NULL); /* buffers are freed below, all at once */
  }
  for (int i = 0; i < ctx->ndevs; i++) /* they hold kernel ASTs: before uctx_free */
    progcache_free(ctx->programs[i], ctx->devs[i]);
  sched_cache_free(ctx->sched_cache); /* so does this */
  uctx_free(ctx->u);
  for (int64_t i = 0; ctx->ndevs && i < ctx->nbufs; i++) buffer_release(ctx, i);
  for (int i = ctx->ndevs; i-- > 0;) ctx->devs[i]->ops->destroy(ctx->devs[i]);
  free(ctx->bufs);
  free(ctx->sizes);
  free(ctx->cache_dir);
  free(ctx->cc);
  free(ctx->graph);
  free(ctx->trace_path);
  profile_free(ctx);
  free(ctx);
}
