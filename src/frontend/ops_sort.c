/* topk and sort (tvk.h "neural-network ops") by ranks, composed from public
 * ops so that each stage is one fused reduce and nothing depends on data for
 * its address:
 *
 *   rank[i] = #{ j : x[j] comes before x[i] }      (..., n) from (..., n, n)
 *   out[r]  = the x[i] with rank[i] == r, r < k    (..., k) from (..., k, n)
 *
 * "Comes before" is a total order: larger first (largest) or smaller first,
 * a NaN after every number either way (as the largest value, as numpy sorts),
 * and of equal values the lower index first, so the ranks are a permutation
 * and each r picks exactly one element. The cost is n^2 compares per row for
 * the ranks and k n for the pick: fine for the rows models sort (top-5 of
 * 1000 logits, a few thousand boxes), not for a million elements. */
#include <stdint.h>

#include "frontend/ops_common.h"

tvk_tensor *tvk_topk(tvk_tensor *a, int64_t k, int axis, bool largest, tvk_tensor **indices) {
  const char *op = "topk";
  if (indices) *indices = NULL;
  bool bad;
  tvk_tensor *err = bc_check(op, 1, &a, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  int nd = a->ndim, ax = nd ? bc_axis(axis, nd) : -1;
  if (ax < 0)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: axis %d out of range for %d dims", op, axis,
                        nd);
  int64_t n = a->shape[ax];
  if (k < 0 || k > n)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: k %lld for an axis of %lld elements", op,
                        (long long)k, (long long)n);
  if (nd + 1 > TVK_MAX_DIMS || n > INT32_MAX || bc_numel(nd, a->shape) < 0 ||
      bc_numel(nd, a->shape) > INT64_MAX / (n ? n : 1))
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: an axis of %lld elements in %d dims is too large",
                        op, (long long)n, nd);
  size_t sc = tvk_scope_begin(ctx);
  /* the axis last: x (..., n) */
  int order[TVK_MAX_DIMS], back[TVK_MAX_DIMS];
  for (int d = 0, q = 0; d < nd; d++)
    if (d != ax) order[q++] = d;
  order[nd - 1] = ax;
  for (int d = 0; d < nd; d++) back[order[d]] = d;
  tvk_tensor *x = tvk_permute(a, order);
  /* xi (..., n, 1) against xj (..., 1, n) */
  tvk_tensor *xi = tvk_unsqueeze(x, nd), *xj = tvk_unsqueeze(x, nd - 1);
  tvk_tensor *ni = tvk_ne(xi, xi), *nj = tvk_ne(xj, xj); /* NaNs */
  tvk_tensor *firstj = largest ? tvk_gt(xj, xi) : tvk_lt(xj, xi);
  firstj = tvk_logical_and(tvk_logical_or(firstj, ni), tvk_logical_not(nj));
  tvk_tensor *same = tvk_logical_or(tvk_eq(xj, xi), tvk_logical_and(ni, nj));
  tvk_tensor *pos = tvk_arange(ctx, TVK_INT32, 0, (double)n, 1);
  int64_t col[2] = {n, 1}, row[2] = {1, n};
  tvk_tensor *lower = tvk_lt(tvk_reshape(pos, 2, row), tvk_reshape(pos, 2, col)); /* j < i */
  tvk_tensor *before = tvk_logical_or(firstj, tvk_logical_and(same, lower));
  int last = nd;
  tvk_tensor *rank = tvk_sum(tvk_cast(before, TVK_INT32), 1, &last, false); /* (..., n) */
  /* pick: (..., k, n), rank[i] == r */
  int64_t ks[2] = {k, 1};
  tvk_tensor *hit = tvk_eq(tvk_unsqueeze(rank, nd - 1),
                           tvk_reshape(tvk_arange(ctx, TVK_INT32, 0, (double)k, 1), 2, ks));
  tvk_tensor *zero = tvk_full(ctx, a->dtype, 0, NULL, 0);
  tvk_tensor *vals = tvk_sum(tvk_where(hit, tvk_unsqueeze(x, nd - 1), zero), 1, &last, false);
  vals = tvk_permute(tvk_cast(vals, a->dtype), back);
  tvk_tensor *keep[2] = {vals, NULL};
  if (indices) {
    tvk_tensor *idx =
        tvk_sum(tvk_where(hit, tvk_reshape(pos, 2, row), tvk_full(ctx, TVK_INT32, 0, NULL, 0)), 1,
                &last, false);
    keep[1] = tvk_permute(tvk_cast(idx, TVK_INT64), back);
  }
  tvk_scope_end(ctx, sc, indices ? 2 : 1, keep);
  if (indices) *indices = keep[1];
  return keep[0];
}

tvk_tensor *tvk_sort(tvk_tensor *a, int axis, bool descending, tvk_tensor **indices) {
  if (indices) *indices = NULL;
  if (!a) return tvk_topk(a, 0, axis, descending, indices);
  int ax = a->ndim ? bc_axis(axis, a->ndim) : -1;
  return tvk_topk(a, ax >= 0 ? a->shape[ax] : 0, axis, descending, indices);
}
