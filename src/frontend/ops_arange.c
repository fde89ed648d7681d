/* tvk_arange and the ARANGE leaf it stands on.
 *
 * An arange is not data: it is VIEW(ARANGE) (element i is i, int32), scaled and
 * shifted by elementwise ops. Kernels that read it compute the index in place
 * (codegen lowers ARANGE(VIEW) to the view's index), so comparisons against an
 * arange -- one_hot, gather, embedding, causal masks, argmax -- never
 * materialise an index tensor, and an expand of an arange costs nothing. */
#include <math.h>
#include <stdint.h>

#include "frontend/frontend.h"

/* VIEW(ARANGE) of shape (n,): 0, 1, ..., n-1 in int32 (autoreleased); n
 * may be a symbolic size (its view is, and the index is computed over it). */
static UOp *graph_arange(tvk_ctx *ctx, sint n) {
  UOp *a = uop_new(ctx->u, OP_ARANGE, dt_make(DT_INT32), 0, NULL, arg_none());
  ShapeTracker *st = a ? st_from_shape(1, &n) : NULL;
  UOp *v = st ? uop_new(ctx->u, OP_VIEW, a->dtype, 1, &a, arg_st(st)) : NULL;
  st_free(st);
  return v;
}

tvk_tensor *front_arange(tvk_ctx *ctx, sint n) {
  size_t m = FRONT_BEGIN(ctx);
  UOp *idx = graph_arange(ctx, n);
  tvk_tensor *t = idx ? tensor_new(ctx, idx, TVK_INT32, 1, &n) : NULL;
  return FRONT_END(ctx, m,
                   t ? t : tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "arange: out of memory"));
}

tvk_tensor *tvk_arange(tvk_ctx *ctx, tvk_dtype dt, double start, double stop, double step) {
  if (!ctx) return NULL;
  if (!tvk_dtype_valid(dt) || dt == TVK_BOOL)
    return tensor_error(ctx, TVK_ERR_DTYPE, "arange: dtype %s (%d) is not a numeric tvk_dtype",
                        tvk_dtype_name(dt), (int)dt);
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "arange: start %g, stop %g, step %g: step must be nonzero and all finite",
                        start, stop, step);
  double count = ceil((stop - start) / step);
  if (count > (double)INT32_MAX)
    return tensor_error(
        ctx, TVK_ERR_INVALID_ARG,
        "arange: start %g, stop %g, step %g gives %.0f elements, more than 2^31 - 1", start, stop,
        step, count);
  int64_t n = count > 0 ? (int64_t)count : 0;
  size_t m = FRONT_BEGIN(ctx);
  UOp *idx = graph_arange(ctx, n);
  tvk_tensor *t = idx ? tensor_new(ctx, idx, TVK_INT32, 1, &n) : NULL;
  if (!t) {
    uop_pool_drain(ctx->u, m);
    return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "arange: out of memory");
  }
  if (dt == TVK_INT32 && step == 1 && start == 0) return FRONT_END(ctx, m, t);
  /* start + i * step, computed in dt */
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r = tvk_cast(t, dt);
  if (step != 1) r = tvk_mul(r, front_const(ctx, dt, step));
  if (start != 0) r = tvk_add(r, front_const(ctx, dt, start));
  tvk_scope_end(ctx, sc, 1, &r);
  tvk_release(t);
  return FRONT_END(ctx, m, r);
}
