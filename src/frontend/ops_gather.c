/* Indexing ops (tvk.h "shape and indexing" and "more creation"): one_hot, eye,
 * gather, embedding and scatter. None of them reads memory at a data-dependent address:
 * an index is compared with tvk_arange along a new axis, and the match selects
 * (tvk_where) the candidate values, which a sum over the new axis collapses.
 * Every leaf (the index, the aranges, the values) is viewed at the full shape
 * (..., n) BEFORE anything is computed, so the comparison is elementwise work
 * inside the reduce's kernel and is never materialised. See docs/ops_index.md.
 *
 * Index dtypes: any integer dtype. The comparison runs in int32 for int8..int16
 * and uint8..uint16 indices (widened at the full shape by the comparison's
 * promotion), and in the index's own dtype for int32, uint32, int64 and uint64
 * (widened to int64 only when the arange would not fit): no index is ever
 * narrowed, so a value out of [0, n) never wraps onto a valid one; it matches
 * nothing and gives 0. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "frontend/ops_common.h"

static bool is_int_dtype(tvk_dtype dt) { return dt >= TVK_INT8 && dt <= TVK_UINT64; }

/* The dtype of an arange 0..n-1 compared with an index of dtype idx. */
static tvk_dtype arange_dtype(tvk_dtype idx, int64_t n) {
  switch (idx) {
  case TVK_UINT64:
  case TVK_INT64: return idx;
  case TVK_UINT32: return n - 1 <= (int64_t)UINT32_MAX ? idx : TVK_INT64;
  default: return n - 1 <= INT32_MAX ? TVK_INT32 : TVK_INT64;
  }
}

/* An error tensor unless index is an integer tensor. */
static tvk_tensor *check_index(const char *op, const tvk_tensor *index) {
  if (is_int_dtype(index->dtype)) return NULL;
  return tensor_error(index->ctx, TVK_ERR_DTYPE,
                      "%s: index has dtype %s: expected an integer dtype", op,
                      tvk_dtype_name(index->dtype));
}

/* idx == arange(n) along axis `axis` of the full shape (nd, full), where idx is
 * already viewed at the full shape. The arange is reshaped and expanded to the
 * full shape before the comparison. Call inside a scope. */
static tvk_tensor *match(tvk_tensor *idx, int nd, const int64_t *full, int axis, int64_t n) {
  tvk_ctx *ctx = tvk_ctx_of(idx);
  int64_t line[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) line[d] = d == axis ? n : 1;
  tvk_tensor *ar = tvk_arange(ctx, arange_dtype(tvk_dtype_of(idx), n), 0, (double)n, 1);
  ar = tvk_expand(tvk_reshape(ar, nd, line), nd, full);
  return tvk_eq(idx, ar);
}

/* x (of shape (nd, shape)) with `extra` size-1 dims appended and expanded to
 * extra_sizes: a view. */
static tvk_tensor *append_dim(tvk_tensor *x, int nd, const int64_t *shape, int extra,
                              const int64_t *extra_sizes) {
  int64_t ones[TVK_MAX_DIMS], full[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) ones[d] = full[d] = shape[d];
  for (int i = 0; i < extra; i++) ones[nd + i] = 1, full[nd + i] = extra_sizes[i];
  return tvk_expand(tvk_reshape(x, nd + extra, ones), nd + extra, full);
}

/* sum over the last axis of where(m, vals, 0), back in vals' dtype (a sum of one
 * value and zeros is exact; narrow ints and bool come back from int32). */
static tvk_tensor *select_sum(tvk_tensor *m, tvk_tensor *vals) {
  tvk_dtype dt = tvk_dtype_of(vals);
  tvk_tensor *w = tvk_where(m, vals, front_const(tvk_ctx_of(vals), dt, 0));
  int last = -1;
  return tvk_cast(tvk_sum(w, 1, &last, false), dt);
}

/* ---------------------------------------------------------------- one_hot, eye */

tvk_tensor *tvk_one_hot(tvk_tensor *index, int64_t num_classes) {
  bool bad;
  tvk_tensor *err = bc_check("one_hot", 1, &index, &bad);
  if (bad) return err;
  if ((err = check_index("one_hot", index))) return err;
  if (num_classes < 0)
    return tensor_error(index->ctx, TVK_ERR_INVALID_ARG,
                        "one_hot: num_classes %" PRId64 " is negative", num_classes);
  int nd = index->ndim;
  if (nd + 1 > TVK_MAX_DIMS)
    return tensor_error(index->ctx, TVK_ERR_SHAPE,
                        "one_hot: index has %d dims: the result would have more than %d", nd,
                        TVK_MAX_DIMS);
  int64_t full[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) full[d] = index->shape[d];
  full[nd] = num_classes;
  if (bc_numel(nd + 1, full) < 0)
    return tensor_error(index->ctx, TVK_ERR_SHAPE, "one_hot: the result has too many elements");
  tvk_ctx *ctx = index->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *idx = append_dim(index, nd, index->shape, 1, &num_classes);
  tvk_tensor *r = tvk_cast(match(idx, nd + 1, full, nd, num_classes), TVK_INT32);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_eye(tvk_ctx *ctx, tvk_dtype dt, int64_t n, int64_t m) {
  if (!ctx) return NULL;
  if (!tvk_dtype_valid(dt))
    return tensor_error(ctx, TVK_ERR_DTYPE, "eye: dtype %d is not a tvk_dtype", (int)dt);
  if (m < 0) m = n;
  if (n < 0) return tensor_error(ctx, TVK_ERR_INVALID_ARG, "eye: n %" PRId64 " is negative", n);
  int64_t full[2] = {n, m};
  if (bc_numel(2, full) < 0)
    return tensor_error(ctx, TVK_ERR_SHAPE, "eye: %" PRId64 " x %" PRId64 " has too many elements",
                        n, m);
  size_t sc = tvk_scope_begin(ctx);
  tvk_dtype at = arange_dtype(TVK_INT32, n > m ? n : m);
  tvk_tensor *rows = tvk_arange(ctx, at, 0, (double)n, 1);
  rows = tvk_expand(tvk_reshape(rows, 2, (int64_t[]){n, 1}), 2, full);
  tvk_tensor *r = tvk_cast(match(rows, 2, full, 1, m), dt);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- gather */

/* Full shape F = index.shape + (dim,), dim = t.shape[axis]. At (i..., k):
 *   index[i...] (expanded along k) == k        the match
 *   t[i with k at axis] (expanded along axis)   the candidate
 * and the sum over k keeps the matched candidate. */
tvk_tensor *tvk_gather(tvk_tensor *t, int axis, tvk_tensor *index) {
  tvk_tensor *in[2] = {t, index};
  bool bad;
  tvk_tensor *err = bc_check("gather", 2, in, &bad);
  if (bad) return err;
  if ((err = check_index("gather", index))) return err;
  char ts[BC_SHAPE_STR_MAX], is[BC_SHAPE_STR_MAX];
  bc_shape_str(t->ndim, t->shape, ts, sizeof ts);
  bc_shape_str(index->ndim, index->shape, is, sizeof is);
  int nd = t->ndim;
  if (nd == 0 || nd + 1 > TVK_MAX_DIMS)
    return tensor_error(t->ctx, TVK_ERR_SHAPE, "gather: t has %d dims: expected 1..%d", nd,
                        TVK_MAX_DIMS - 1);
  int ax = bc_axis(axis, nd);
  if (ax < 0)
    return tensor_error(t->ctx, TVK_ERR_INVALID_ARG, "gather: axis %d out of range for %d dims",
                        axis, nd);
  if (index->ndim != nd)
    return tensor_error(t->ctx, TVK_ERR_SHAPE,
                        "gather: index has shape %s, t %s: expected as many dims", is, ts);
  for (int d = 0; d < nd; d++)
    if (d != ax && index->shape[d] > t->shape[d])
      return tensor_error(t->ctx, TVK_ERR_SHAPE,
                          "gather: index has shape %s, t %s: dim %d of index is larger than "
                          "t's (only axis %d may be)",
                          is, ts, d, ax);
  int64_t dim = t->shape[ax], full[TVK_MAX_DIMS], ranges[TVK_MAX_DIMS][2], cand[TVK_MAX_DIMS];
  int order[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) full[d] = index->shape[d];
  full[nd] = dim;
  if (bc_numel(nd + 1, full) < 0)
    return tensor_error(t->ctx, TVK_ERR_SHAPE, "gather: index %s and t %s are too large", is, ts);
  for (int d = 0, k = 0; d < nd; d++) {
    ranges[d][0] = 0;
    ranges[d][1] = d == ax ? dim : index->shape[d];
    cand[d] = d == ax ? 1 : index->shape[d];
    if (d != ax) order[k++] = d;
  }
  order[nd - 1] = ax;
  cand[nd] = dim;

  tvk_ctx *ctx = t->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *idx = append_dim(index, nd, index->shape, 1, &dim);
  /* t's axis moved last, a 1 left in its place, then expanded along it */
  tvk_tensor *vals = tvk_permute(tvk_shrink(t, (const int64_t(*)[2])ranges), order);
  vals = tvk_expand(tvk_reshape(vals, nd + 1, cand), nd + 1, full);
  tvk_tensor *r = select_sum(match(idx, nd + 1, full, nd, dim), vals);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- embedding */

/* Full shape F = index.shape + (D, V). At (i..., d, v):
 *   index[i...] == v      the match (index expanded along d and v)
 *   weight[v, d]          the candidate (weight^T expanded along i...)
 * summed over v. */
tvk_tensor *tvk_embedding(tvk_tensor *weight, tvk_tensor *index) {
  tvk_tensor *in[2] = {weight, index};
  bool bad;
  tvk_tensor *err = bc_check("embedding", 2, in, &bad);
  if (bad) return err;
  if ((err = check_index("embedding", index))) return err;
  char ws[BC_SHAPE_STR_MAX];
  if (weight->ndim != 2)
    return tensor_error(weight->ctx, TVK_ERR_SHAPE,
                        "embedding: weight has shape %s: expected 2 dims (V, D)",
                        bc_shape_str(weight->ndim, weight->shape, ws, sizeof ws));
  int nd = index->ndim;
  if (nd + 2 > TVK_MAX_DIMS)
    return tensor_error(weight->ctx, TVK_ERR_SHAPE,
                        "embedding: index has %d dims: expected at most %d", nd, TVK_MAX_DIMS - 2);
  int64_t V = weight->shape[0], D = weight->shape[1], full[TVK_MAX_DIMS], lead[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) full[d] = index->shape[d];
  full[nd] = D;
  full[nd + 1] = V;
  if (bc_numel(nd + 2, full) < 0)
    return tensor_error(weight->ctx, TVK_ERR_SHAPE, "embedding: index and weight are too large");
  for (int d = 0; d < nd; d++) lead[d] = 1;
  lead[nd] = D;
  lead[nd + 1] = V;

  tvk_ctx *ctx = weight->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *idx = append_dim(index, nd, index->shape, 2, full + nd);
  tvk_tensor *vals = tvk_reshape(tvk_transpose(weight, 0, 1), nd + 2, lead);
  vals = tvk_expand(vals, nd + 2, full);
  tvk_tensor *r = select_sum(match(idx, nd + 2, full, nd + 1, V), vals);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- scatter */

/* out = t with src's elements written where index says along axis. As
 * gather, no data-dependent address: over the full shape (index's dims with
 * the target position p of t's axis inserted after axis) the match
 * index[.., j, ..] == p selects src[.., j, ..], and a reduce over j combines
 * what lands on each p; dims of index smaller than t's are padded back to
 * t's shape with "nothing lands here". NONE keeps the last j (the order a
 * loop would write in): the max over j of the matching j's, then that one's
 * value. */
tvk_tensor *tvk_scatter(tvk_tensor *t, int axis, tvk_tensor *index, tvk_tensor *src,
                        tvk_scatter_reduce reduce) {
  tvk_tensor *in[3] = {t, index, src};
  bool bad;
  tvk_tensor *err = bc_check("scatter", 3, in, &bad);
  if (bad) return err;
  if ((err = check_index("scatter", index))) return err;
  char ts[BC_SHAPE_STR_MAX], is[BC_SHAPE_STR_MAX], ss[BC_SHAPE_STR_MAX];
  bc_shape_str(t->ndim, t->shape, ts, sizeof ts);
  bc_shape_str(index->ndim, index->shape, is, sizeof is);
  bc_shape_str(src->ndim, src->shape, ss, sizeof ss);
  int nd = t->ndim, ax = bc_axis(axis, nd);
  if (nd == 0 || nd + 1 > TVK_MAX_DIMS)
    return tensor_error(t->ctx, TVK_ERR_SHAPE, "scatter: t has %d dims: expected 1..%d", nd,
                        TVK_MAX_DIMS - 1);
  if (ax < 0)
    return tensor_error(t->ctx, TVK_ERR_INVALID_ARG, "scatter: axis %d out of range for %d dims",
                        axis, nd);
  if ((unsigned)reduce > TVK_SCATTER_MIN)
    return tensor_error(t->ctx, TVK_ERR_INVALID_ARG,
                        "scatter: reduce %d is not a tvk_scatter_reduce", (int)reduce);
  bool same = index->ndim == nd && src->ndim == nd;
  for (int d = 0; same && d < nd; d++)
    same = index->shape[d] == src->shape[d] && (d == ax || index->shape[d] <= t->shape[d]);
  if (!same)
    return tensor_error(t->ctx, TVK_ERR_SHAPE,
                        "scatter: t %s, index %s, src %s: index and src must have one shape, of "
                        "t's dims, no larger than t's but along axis %d",
                        ts, is, ss, ax);
  tvk_ctx *ctx = t->ctx;
  size_t sc = tvk_scope_begin(ctx);
  /* over index's dims with P (t's axis length) inserted after the axis */
  int64_t P = t->shape[ax], J = index->shape[ax], shape[TVK_MAX_DIMS];
  for (int d = 0; d <= nd; d++) shape[d] = d == ax + 1 ? P : 1;
  tvk_dtype idt = index->dtype == TVK_INT64 || index->dtype == TVK_UINT64 ? TVK_INT64 : TVK_INT32;
  tvk_tensor *pos = tvk_reshape(tvk_arange(ctx, idt, 0, (double)P, 1), nd + 1, shape);
  tvk_tensor *hot = tvk_eq(tvk_unsqueeze(tvk_cast(index, idt), ax + 1), pos);
  tvk_tensor *val = tvk_unsqueeze(src, ax + 1);
  tvk_dtype dt = t->dtype;
  tvk_tensor *lands = tvk_max(tvk_cast(hot, TVK_INT32), 1, &ax, false); /* 1 where any j lands */
  tvk_tensor *got;
  switch (reduce) {
  case TVK_SCATTER_ADD:
    got = tvk_sum(tvk_where(hot, val, tvk_full(ctx, dt, 0, NULL, 0)), 1, &ax, false);
    break;
  case TVK_SCATTER_MUL:
    got = tvk_prod(tvk_where(hot, val, tvk_full(ctx, dt, 0, NULL, 1)), 1, &ax, false);
    break;
  case TVK_SCATTER_MAX:
  case TVK_SCATTER_MIN: {
    bool mx = reduce == TVK_SCATTER_MAX;
    bool fl = dt == TVK_FLOAT16 || dt == TVK_BFLOAT16 || dt == TVK_FLOAT32 || dt == TVK_FLOAT64;
    double none = fl ? (mx ? -INFINITY : INFINITY) : 0;
    tvk_tensor *cand = tvk_where(hot, val, tvk_full(ctx, dt, 0, NULL, none));
    if (!fl)
      cand = tvk_where(hot, val, mx ? tvk_min(src, 0, NULL, false) : tvk_max(src, 0, NULL, false));
    got = (mx ? tvk_max : tvk_min)(cand, 1, &ax, false);
    break;
  }
  default: { /* the last j that lands on p, then its value */
    for (int d = 0; d <= nd; d++) shape[d] = d == ax ? J : 1;
    tvk_tensor *j = tvk_reshape(tvk_arange(ctx, TVK_INT32, 0, (double)J, 1), nd + 1, shape);
    tvk_tensor *last =
        tvk_max(tvk_where(hot, j, tvk_full(ctx, TVK_INT32, 0, NULL, -1)), 1, &ax, true);
    tvk_tensor *pick = tvk_logical_and(hot, tvk_eq(j, last));
    got = tvk_sum(tvk_where(pick, val, tvk_full(ctx, dt, 0, NULL, 0)), 1, &ax, false);
    break;
  }
  }
  got = tvk_cast(got, dt);
  /* index's other dims may be smaller than t's: nothing lands past them */
  int64_t pads[TVK_MAX_DIMS][2];
  bool pad = false;
  for (int d = 0; d < nd; d++) {
    pads[d][0] = 0;
    pads[d][1] = d == ax ? 0 : t->shape[d] - index->shape[d];
    pad = pad || pads[d][1];
  }
  if (pad) got = tvk_pad(got, pads, 0), lands = tvk_pad(lands, pads, 0);
  tvk_tensor *landed = tvk_ne(lands, tvk_full(ctx, TVK_INT32, 0, NULL, 0));
  tvk_tensor *r;
  switch (reduce) {
  case TVK_SCATTER_ADD: r = tvk_cast(tvk_add(t, got), dt); break;
  case TVK_SCATTER_MUL: r = tvk_where(landed, tvk_cast(tvk_mul(t, got), dt), t); break;
  case TVK_SCATTER_MAX: r = tvk_where(landed, tvk_maximum(t, got), t); break;
  case TVK_SCATTER_MIN: r = tvk_where(landed, tvk_minimum(t, got), t); break;
  default: r = tvk_where(landed, got, t); break;
  }
  r = tvk_cast(r, dt);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
