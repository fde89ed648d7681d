/* Index-built ONNX ops: Trilu, EyeLike, OneHot, Hardmax, GatherND. Each
 * compares positions (tvk_arange along one axis) instead of indexing, so it
 * fuses into its neighbours. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

static tvk_status op_trilu(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  if (nd < 2) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (at least 2)", nd);
  int64_t k;
  if (!onnx_in_int(c, 1, 0, &k)) return TVK_ERR_SHAPE;
  const int64_t *sh = onnx_in_shape(c, 0);
  tvk_tensor *x = IN(0);
  tvk_tensor *d =
      tvk_sub(onnx_iota(c, sh[nd - 1], 2, 1), onnx_iota(c, sh[nd - 2], 2, 0)); /* col - row */
  tvk_tensor *kk = onnx_scalar(c, TVK_INT64, (double)k);
  tvk_tensor *keep = onnx_attr_int(c, "upper", 1) ? tvk_ge(d, kk) : tvk_le(d, kk);
  return onnx_set_out(c, 0, tvk_where(keep, x, onnx_scalar(c, tvk_dtype_of(x), 0)));
}

static tvk_status op_eye_like(onnx_run_ctx *c) {
  if (onnx_in_ndim(c, 0) != 2)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (2)", onnx_in_ndim(c, 0));
  tvk_dtype dt = onnx_in_dtype(c, 0);
  const Onnx__AttributeProto *a = onnx_attr(c, "dtype");
  if (a && !onnx_dtype_to_tvk((int32_t)a->i, &dt))
    return onnx_node_fail(c, TVK_ERR_DTYPE, "dtype %s", onnx_dtype_name((int32_t)a->i));
  const int64_t *sh = onnx_in_shape(c, 0);
  tvk_tensor *d = tvk_sub(onnx_iota(c, sh[1], 2, 1), onnx_iota(c, sh[0], 2, 0));
  tvk_tensor *on = tvk_eq(d, onnx_scalar(c, TVK_INT64, (double)onnx_attr_int(c, "k", 0)));
  return onnx_set_out(c, 0, tvk_cast(on, dt));
}

static tvk_status op_one_hot(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  const onnx_host *dh = onnx_in_host(c, 1), *vh = dh ? onnx_in_host(c, 2) : NULL;
  if (!dh || !vh) return TVK_ERR_INVALID_ARG;
  if (dh->numel != 1 || vh->numel != 2)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "depth has %lld values (one), values %lld (two)",
                          (long long)dh->numel, (long long)vh->numel);
  int64_t depth = (int64_t)onnx_host_get(dh, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", -1), nd + 1);
  if (axis < 0 || depth < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld, depth %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", -1), (long long)depth, nd);
  tvk_tensor *idx = tvk_cast(IN(0), TVK_INT64);
  /* negative indices count from depth */
  tvk_tensor *zero = onnx_scalar(c, TVK_INT64, 0);
  idx = tvk_where(tvk_lt(idx, zero), tvk_add(idx, onnx_scalar(c, TVK_INT64, (double)depth)), idx);
  tvk_tensor *hot = tvk_eq(tvk_unsqueeze(idx, axis), onnx_iota(c, depth, nd + 1, axis));
  tvk_tensor *on = onnx_scalar(c, vh->dt, onnx_host_get(vh, 1));
  tvk_tensor *off = onnx_scalar(c, vh->dt, onnx_host_get(vh, 0));
  return onnx_set_out(c, 0, tvk_where(hot, on, off));
}

static tvk_status op_hardmax(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int64_t dflt = c->node->opset < 13 ? 1 : -1;
  int axis = onnx_axis(onnx_attr_int(c, "axis", dflt), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", dflt), nd);
  tvk_tensor *x = IN(0);
  const int64_t *sh = onnx_in_shape(c, 0);
  tvk_dtype dt = tvk_dtype_of(x);
  if (c->node->opset < 13) { /* over the input flattened to 2-D at axis */
    int64_t rows = 1, cols = 1;
    for (int i = 0; i < nd; i++) *(i < axis ? &rows : &cols) *= sh[i];
    int64_t s2[2] = {rows, cols};
    tvk_tensor *am = tvk_cast(tvk_argmax(tvk_reshape(x, 2, s2), 1, true), TVK_INT64);
    tvk_tensor *y = tvk_cast(tvk_eq(am, onnx_iota(c, cols, 2, 1)), dt);
    return onnx_set_out(c, 0, tvk_reshape(y, nd, sh));
  }
  tvk_tensor *am = tvk_cast(tvk_argmax(x, axis, true), TVK_INT64);
  return onnx_set_out(c, 0, tvk_cast(tvk_eq(am, onnx_iota(c, sh[axis], nd, axis)), dt));
}

/* GatherND: each row of indices' last dim (k values) picks a slice of data
 * after batch_dims leading dims: flattened to one row number into data
 * viewed as (rows, rest), then tvk_embedding. */
static tvk_status op_gather_nd(onnx_run_ctx *c) {
  int r = onnx_in_ndim(c, 0), q = onnx_in_ndim(c, 1);
  const int64_t *ds = onnx_in_shape(c, 0), *is = onnx_in_shape(c, 1);
  int64_t b = onnx_attr_int(c, "batch_dims", 0);
  if (q < 1 || b < 0 || b >= q || b >= r)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "batch_dims %lld for data of %d dims, indices of %d",
                          (long long)b, r, q);
  int64_t k = is[q - 1];
  if (k < 1 || b + k > r)
    return onnx_node_fail(c, TVK_ERR_SHAPE,
                          "index rows of %lld for data of %d dims after %lld batch dims",
                          (long long)k, r, (long long)b);
  int64_t strides[TVK_MAX_DIMS], span = 1, batch = 1, rest = 1;
  for (int64_t j = k - 1; j >= 0; j--) {
    strides[j] = span;
    span *= ds[b + j];
  }
  for (int64_t j = 0; j < b; j++) batch *= ds[j];
  for (int j = (int)(b + k); j < r; j++) rest *= ds[j];
  tvk_tensor *idx = tvk_cast(IN(1), TVK_INT64);
  /* negative entries count from their dim's end */
  int64_t dims_k[TVK_MAX_DIMS];
  for (int64_t j = 0; j < k; j++) dims_k[j] = ds[b + j];
  tvk_tensor *dk = tvk_from_data(CTX, TVK_INT64, 1, &k, dims_k);
  idx = tvk_where(tvk_lt(idx, onnx_scalar(c, TVK_INT64, 0)), tvk_add(idx, dk), idx);
  tvk_tensor *st = tvk_from_data(CTX, TVK_INT64, 1, &k, strides);
  int last = q - 1;
  tvk_tensor *row = tvk_sum(tvk_mul(idx, st), 1, &last, false); /* indices.shape[:-1] */
  if (b > 0) { /* the row's batch: its position in the leading b dims, times span */
    int64_t bshape[TVK_MAX_DIMS];
    for (int j = 0; j < q - 1; j++) bshape[j] = j < b ? is[j] : 1;
    tvk_tensor *bi = tvk_reshape(tvk_arange(CTX, TVK_INT64, 0, (double)batch, 1), (int)b, is);
    bi = tvk_reshape(bi, q - 1, bshape);
    row = tvk_add(row, tvk_mul(bi, onnx_scalar(c, TVK_INT64, (double)span)));
  }
  int64_t d2[2] = {batch * span, rest};
  tvk_tensor *g = tvk_embedding(tvk_reshape(IN(0), 2, d2), row); /* indices.shape[:-1] + (rest,) */
  int64_t oshape[TVK_MAX_DIMS];
  int on = 0;
  for (int j = 0; j < q - 1; j++) oshape[on++] = is[j];
  for (int j = (int)(b + k); j < r; j++) oshape[on++] = ds[j];
  if (on > TVK_MAX_DIMS) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims", on);
  return onnx_set_out(c, 0, tvk_reshape(g, on, oshape));
}

/* The reduction attribute of the scatters; false with the node failed. */
static bool scatter_reduction(onnx_run_ctx *c, tvk_scatter_reduce *out) {
  char buf[16];
  const char *r = onnx_attr_string(c, "reduction", "none", buf, sizeof buf);
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(r, names[i])) return *out = (tvk_scatter_reduce)i, true;
  onnx_node_fail(c, TVK_ERR_INVALID_ARG, "reduction '%s' (none, add, mul, max or min)", r);
  return false;
}

static tvk_status op_scatter_elements(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  tvk_scatter_reduce red;
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 0), nd);
  if (!scatter_reduction(c, &red)) return TVK_ERR_INVALID_ARG;
  tvk_tensor *idx = tvk_cast(IN(1), TVK_INT64);
  tvk_tensor *dim = onnx_scalar(c, TVK_INT64, (double)onnx_in_shape(c, 0)[axis]);
  idx = tvk_where(tvk_lt(idx, onnx_scalar(c, TVK_INT64, 0)), tvk_add(idx, dim), idx);
  return onnx_set_out(c, 0, tvk_scatter(IN(0), axis, idx, IN(2), red));
}

/* ScatterND: each row of indices' last dim (k values) names a slice of data
 * (its first k dims); as rows of data viewed (rows, rest), a scatter along
 * axis 0 of updates viewed (n, rest). */
static tvk_status op_scatter_nd(onnx_run_ctx *c) {
  int r = onnx_in_ndim(c, 0), q = onnx_in_ndim(c, 1);
  const int64_t *ds = onnx_in_shape(c, 0), *is = onnx_in_shape(c, 1);
  tvk_scatter_reduce red;
  if (!scatter_reduction(c, &red)) return TVK_ERR_INVALID_ARG;
  int64_t k = q ? is[q - 1] : 0;
  if (q < 1 || k < 1 || k > r)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "index rows of %lld for data of %d dims", (long long)k,
                          r);
  int64_t strides[TVK_MAX_DIMS], dims[TVK_MAX_DIMS], span = 1, rest = 1, n = 1;
  for (int64_t j = k - 1; j >= 0; j--) strides[j] = span, span *= ds[j], dims[j] = ds[j];
  for (int j = (int)k; j < r; j++) rest *= ds[j];
  for (int j = 0; j < q - 1; j++) n *= is[j];
  tvk_tensor *idx = tvk_cast(IN(1), TVK_INT64);
  tvk_tensor *dk = tvk_from_data(CTX, TVK_INT64, 1, &k, dims);
  idx = tvk_where(tvk_lt(idx, onnx_scalar(c, TVK_INT64, 0)), tvk_add(idx, dk), idx);
  int last = q - 1;
  tvk_tensor *row =
      tvk_sum(tvk_mul(idx, tvk_from_data(CTX, TVK_INT64, 1, &k, strides)), 1, &last, false);
  int64_t d2[2] = {span, rest}, u2[2] = {n, rest}, i2[2] = {n, 1};
  tvk_tensor *rows = tvk_expand(tvk_reshape(row, 2, i2), 2, u2);
  tvk_tensor *y = tvk_scatter(tvk_reshape(IN(0), 2, d2), 0, rows, tvk_reshape(IN(2), 2, u2), red);
  return onnx_set_out(c, 0, tvk_reshape(y, r, ds));
}

/* NonZero: the positions of the nonzero elements, (ndim, count) int64. The
 * count is data, so the input is read back to the host (a realize mid-graph,
 * as ONNX's data-dependent shapes need). */
static tvk_status op_nonzero(onnx_run_ctx *c) {
  const onnx_host *h = onnx_in_host(c, 0);
  if (!h) return TVK_ERR_INVALID_ARG;
  int64_t n = 0;
  for (int64_t i = 0; i < h->numel; i++) n += onnx_host_get(h, i) != 0;
  int nd = h->ndim ? h->ndim : 1;
  int64_t shape[2] = {nd, n};
  onnx_host r;
  tvk_status s = onnx_host_alloc(&r, TVK_INT64, 2, shape);
  if (s != TVK_OK) return onnx_node_fail(c, s, "%s", tvk_onnx_last_error());
  for (int64_t i = 0, k = 0; i < h->numel; i++) {
    if (onnx_host_get(h, i) == 0) continue;
    int64_t rem = i;
    for (int d = h->ndim - 1; d >= 0; d--) {
      ((int64_t *)r.data)[d * n + k] = rem % h->shape[d];
      rem /= h->shape[d];
    }
    if (!h->ndim) ((int64_t *)r.data)[k] = 0;
    k++;
  }
  return onnx_set_out_host(c, 0, &r);
}

/* Compress: the slices along axis (or the elements of x flattened) where the
 * condition (read back to the host: it shapes the result) is true. */
static tvk_status op_compress(onnx_run_ctx *c) {
  const onnx_host *cond = onnx_in_host(c, 1);
  if (!cond) return TVK_ERR_INVALID_ARG;
  tvk_tensor *x = IN(0);
  const Onnx__AttributeProto *ax = onnx_attr(c, "axis");
  if (!ax) {
    int64_t all = tvk_numel(x);
    x = tvk_reshape(x, 1, &all);
  }
  int nd = tvk_ndim(x), axis = ax ? onnx_axis(ax->i, nd) : 0;
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims", (long long)ax->i, nd);
  int64_t dim = tvk_shape(x)[axis], keep = 0;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(dim + 1));
  if (!idx) return onnx_node_fail(c, TVK_ERR_OUT_OF_MEMORY, "out of memory");
  for (int64_t i = 0; i < cond->numel && i < dim; i++)
    if (onnx_host_get(cond, i) != 0) idx[keep++] = i;
  int64_t shape[TVK_MAX_DIMS], full[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    shape[d] = d == axis ? keep : 1;
    full[d] = d == axis ? keep : tvk_shape(x)[d];
  }
  tvk_tensor *it = tvk_from_data(CTX, TVK_INT64, nd, shape, idx);
  free(idx);
  return onnx_set_out(c, 0, tvk_gather(x, axis, tvk_expand(it, nd, full)));
}

const onnx_op onnx_ops_index[] = {
    {"Compress", "axis", 2, 2, 1, 1, op_compress},
    {"EyeLike", "dtype,k", 1, 1, 1, 1, op_eye_like},
    {"GatherND", "batch_dims", 2, 2, 1, 1, op_gather_nd},
    {"Hardmax", "axis", 1, 1, 1, 1, op_hardmax},
    {"NonZero", "", 1, 1, 1, 1, op_nonzero},
    {"OneHot", "axis", 3, 3, 1, 1, op_one_hot},
    {"Scatter", "axis", 3, 3, 1, 1, op_scatter_elements},
    {"ScatterElements", "axis,reduction", 3, 3, 1, 1, op_scatter_elements},
    {"ScatterND", "reduction", 3, 3, 1, 1, op_scatter_nd},
    {"Trilu", "upper", 1, 2, 1, 1, op_trilu},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
