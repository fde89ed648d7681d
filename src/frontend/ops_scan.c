/* cumsum, argmax and argmin (tvk.h "neural-network ops"), composed from
 * public ops so the scheduler fuses them. docs/ops_norm.md describes the
 * graphs and the kernels they become.
 *
 * cumsum is tinygrad's: the axis (moved last) is padded with n - 1 zeros in
 * front and every output sums a window of n elements; the windows are a view
 * (pad, expand, reshape, pad, reshape, shrink), so the reads are a strided walk
 * of the input and no window is materialised. The work is n per output, so an
 * axis longer than CUMSUM_DIRECT is split into blocks of B: a windowed cumsum
 * within each block, plus an exclusive cumsum of the block totals (recursive)
 * added to every element of the block: n * B + (n / B)^2-ish work.
 *
 * argmax/argmin take the first position holding the max (min): where(x == max,
 * n - i, 0) along the axis (n - i a descending arange, a leaf), its max is
 * n - first, so first = n - that. A NaN counts as the largest (and smallest)
 * value, as torch: max is NaN when the axis holds a NaN, and x != x then marks
 * the NaNs, so the index of the first NaN is returned. */
#include <math.h>
#include <stdint.h>

#include "frontend/ops_common.h"

#define CUMSUM_DIRECT 256 /* the longest axis summed by windows of its full length */

static bool is_float(tvk_dtype d) { return dt_is_float(dt_make(dt_from_tvk(d))); }

/* tvk_sum's result dtype. */
static tvk_dtype sum_dtype(tvk_dtype d) { return dt_to_tvk(dt_sum_result(dt_from_tvk(d))); }

/* ---------------------------------------------------------------- cumsum */

/* Sum over the last dim (halves summed in float32: the sum keeps float32). */
static tvk_tensor *sum_last(tvk_tensor *w) {
  int last = -1;
  ScalarType acc = dt_acc(dt_from_tvk(w->dtype));
  if (acc != dt_from_tvk(w->dtype)) w = tvk_cast(w, dt_to_tvk(acc));
  return tvk_sum(w, 1, &last, false);
}

/* Running sum along the last dim of y (..., n) by windows: W (..., n, n) with
 * W[i][j] = P[i + j], P = y padded with n - 1 zeros in front, so sum_j W[i][j]
 * = y[0] + ... + y[i]. W is built by views only: P (..., L) with L = 2n - 1 is
 * expanded to (..., n, L), flattened to n L elements, padded by n to n (L + 1)
 * and seen as (..., n, L + 1): row i starts at i (L + 1) = i L + i, so element
 * (i, j) is P[i + j] for j < n, which a shrink to (..., n, n) keeps. */
static tvk_tensor *cumsum_windows(tvk_tensor *y) {
  int nd = y->ndim;
  int64_t n = y->shape[nd - 1], l = 2 * n - 1, s[TVK_MAX_DIMS + 1];
  int64_t pads[TVK_MAX_DIMS + 1][2] = {{0}}, ranges[TVK_MAX_DIMS + 1][2];
  pads[nd - 1][0] = n - 1;
  tvk_tensor *p = tvk_pad(y, pads, 0);
  for (int d = 0; d < nd - 1; d++) s[d] = y->shape[d];
  s[nd - 1] = 1, s[nd] = l;
  p = tvk_reshape(p, nd + 1, s);
  s[nd - 1] = n;
  p = tvk_expand(p, nd + 1, s);
  s[nd - 1] = n * l;
  p = tvk_reshape(p, nd, s);
  pads[nd - 1][0] = 0, pads[nd - 1][1] = n;
  p = tvk_pad(p, pads, 0);
  s[nd - 1] = n, s[nd] = l + 1;
  p = tvk_reshape(p, nd + 1, s);
  for (int d = 0; d <= nd; d++) ranges[d][0] = 0, ranges[d][1] = s[d];
  ranges[nd][1] = n;
  return sum_last(tvk_shrink(p, ranges));
}

/* The block length for an axis of n > CUMSUM_DIRECT: about sqrt(n), a power of
 * two, at most CUMSUM_DIRECT. */
static int64_t block_len(int64_t n) {
  int64_t b = 16;
  while (b < CUMSUM_DIRECT && b * b < n) b *= 2;
  return b;
}

/* Running sum along the last dim of y; floats stay in their dtype (halves give
 * float32), ints follow tvk_sum. */
static tvk_tensor *cumsum_last(tvk_tensor *y) {
  int nd = y->ndim;
  int64_t n = y->shape[nd - 1];
  if (n <= CUMSUM_DIRECT) return cumsum_windows(y);
  int64_t b = block_len(n), nb = (n + b - 1) / b, s[TVK_MAX_DIMS + 1];
  int64_t pads[TVK_MAX_DIMS][2] = {{0}}, ranges[TVK_MAX_DIMS + 1][2];
  /* (..., n) -> (..., nb * b) -> (..., nb, b): a view of y */
  pads[nd - 1][1] = nb * b - n;
  for (int d = 0; d < nd - 1; d++) s[d] = y->shape[d];
  s[nd - 1] = nb, s[nd] = b;
  tvk_tensor *blocks = tvk_reshape(tvk_pad(y, pads, 0), nd + 1, s);
  tvk_tensor *within = cumsum_windows(blocks);
  /* totals (..., nb), their running sum shifted right by one: the sum of all
   * blocks before each block */
  tvk_tensor *incl = cumsum_last(sum_last(blocks));
  pads[nd - 1][0] = 1, pads[nd - 1][1] = 0;
  for (int d = 0; d < nd; d++) ranges[d][0] = 0, ranges[d][1] = s[d];
  tvk_tensor *before = tvk_shrink(tvk_pad(incl, pads, 0), ranges);
  s[nd] = 1;
  tvk_tensor *r = tvk_add(within, tvk_reshape(before, nd + 1, s));
  s[nd - 1] = nb * b;
  r = tvk_reshape(r, nd, s);
  ranges[nd - 1][1] = n;
  return tvk_shrink(r, ranges);
}

tvk_tensor *tvk_cumsum(tvk_tensor *a, int axis) {
  bool bad;
  int ax;
  tvk_tensor *err = bc_check_axis("cumsum", a, axis, &ax, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  tvk_dtype res = sum_dtype(a->dtype);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r;
  if (tvk_numel(a) == 0) {
    r = tvk_cast(a, res);
  } else {
    int nd = a->ndim > 0 ? a->ndim : 1;
    tvk_tensor *y = a->ndim > 0 ? a : tvk_reshape(a, 1, (const int64_t[]){1});
    y = tvk_transpose(y, ax, nd - 1); /* the axis last: a view of the leaf */
    int64_t ts[TVK_MAX_DIMS];
    for (int d = 0; d < nd; d++) ts[d] = tvk_shape(y)[d];
    /* the windows add two dims: merge the leading ones when there is no room */
    if (nd > TVK_MAX_DIMS - 2) y = tvk_reshape(y, 2, (const int64_t[]){-1, ts[nd - 1]});
    r = tvk_reshape(cumsum_last(y), nd, ts);
    r = tvk_transpose(r, ax, nd - 1);
    r = tvk_reshape(tvk_cast(r, res), a->ndim, a->shape);
  }
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- argmax, argmin */

static tvk_tensor *arg_extreme(const char *op, bool is_max, tvk_tensor *a, int axis, bool keepdim) {
  bool bad;
  int ax;
  tvk_tensor *err = bc_check_axis(op, a, axis, &ax, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  int nd = a->ndim > 0 ? a->ndim : 1;
  int64_t n = a->ndim > 0 ? a->shape[ax] : 1;
  if (n == 0)
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: axis %d has size 0: no element to pick", op, axis);
  if (n > INT32_MAX)
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: axis %d has %lld elements: indices are int32", op,
                        axis, (long long)n);
  int64_t s[TVK_MAX_DIMS];
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x = a->ndim > 0 ? a : tvk_reshape(a, 1, (const int64_t[]){1});
  tvk_tensor *ext = is_max ? tvk_max(x, 1, &ax, true) : tvk_min(x, 1, &ax, true);
  tvk_tensor *hit = tvk_eq(x, ext);
  if (is_float(a->dtype)) hit = tvk_logical_or(hit, tvk_ne(x, x)); /* NaNs: see the top */
  /* n - i along the axis: a leaf expanded to x's shape */
  for (int d = 0; d < nd; d++) s[d] = d == ax ? n : 1;
  tvk_tensor *desc = tvk_reshape(tvk_arange(ctx, TVK_INT32, (double)n, 0, -1), nd, s);
  desc = tvk_expand(desc, nd, x->shape);
  tvk_tensor *best = tvk_max(tvk_where(hit, desc, front_const(ctx, TVK_INT32, 0)), 1, &ax, keepdim);
  tvk_tensor *r = tvk_sub(front_const(ctx, TVK_INT32, (double)n), best);
  if (a->ndim == 0) r = tvk_reshape(r, 0, NULL);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_argmax(tvk_tensor *a, int axis, bool keepdim) {
  return arg_extreme("argmax", true, a, axis, keepdim);
}

tvk_tensor *tvk_argmin(tvk_tensor *a, int axis, bool keepdim) {
  return arg_extreme("argmin", false, a, axis, keepdim);
}
