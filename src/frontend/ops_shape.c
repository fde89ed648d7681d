/* Shape ops (tvk.h "shape and indexing"): squeeze, unsqueeze, cat, stack and
 * repeat, composed from the movement ops, so that they cost nothing at run
 * time except cat's one elementwise add of padded inputs (which fuses into the
 * consumer's kernel, or is one copy kernel when realized on its own). See
 * docs/ops_index.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ops_common.h"

/* ---------------------------------------------------------------- squeeze, unsqueeze */

tvk_tensor *tvk_squeeze(tvk_tensor *a, int naxes, const int *axes) {
  bool bad;
  tvk_tensor *err = bc_check_sym("squeeze", 1, &a, &bad);
  if (bad) return err;
  if (naxes < 0)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "squeeze: naxes %d is negative", naxes);
  if (naxes > 0 && !axes)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "squeeze: axes is NULL for %d axes", naxes);
  bool drop[TVK_MAX_DIMS] = {false};
  char s[BC_SHAPE_STR_MAX];
  if (naxes == 0) {
    for (int d = 0; d < a->ndim; d++) drop[d] = a->shape[d] == 1;
  }
  for (int i = 0; i < naxes; i++) {
    int d = bc_axis(axes[i], a->ndim);
    if (d < 0)
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "squeeze: axis %d out of range for %d dims",
                          axes[i], a->ndim);
    if (drop[d])
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "squeeze: dim %d is listed twice", d);
    if (a->shape[d] != 1) {
      char size[64];
      sint_str(a->shape[d], size, sizeof size); /* a number or an expression */
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "squeeze: dim %d of %s has size %s, not 1", d,
                          bc_shape_str(a->ndim, a->shape, s, sizeof s), size);
    }
    drop[d] = true;
  }
  int64_t out[TVK_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < a->ndim; d++)
    if (!drop[d]) out[nd++] = a->shape[d];
  return tvk_reshape(a, nd, out);
}

tvk_tensor *tvk_unsqueeze(tvk_tensor *a, int axis) {
  bool bad;
  tvk_tensor *err = bc_check_sym("unsqueeze", 1, &a, &bad);
  if (bad) return err;
  if (a->ndim >= TVK_MAX_DIMS)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "unsqueeze: a has %d dims already (the most)",
                        a->ndim);
  int at = axis < 0 ? axis + a->ndim + 1 : axis;
  if (at < 0 || at > a->ndim)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                        "unsqueeze: axis %d is outside [%d, %d] for %d dims", axis, -a->ndim - 1,
                        a->ndim, a->ndim);
  int64_t out[TVK_MAX_DIMS];
  for (int d = 0, k = 0; d <= a->ndim; d++) out[d] = d == at ? 1 : a->shape[k++];
  return tvk_reshape(a, a->ndim + 1, out);
}

/* ---------------------------------------------------------------- cat, stack */

/* Checks cat's inputs: the common dims, the normalised axis and the joined
 * size; NULL or an error tensor. */
static tvk_tensor *cat_check(const char *op, int n, tvk_tensor *const *ts, int axis, int *ax,
                             sint *total) {
  tvk_tensor *a = ts[0];
  char s0[BC_SHAPE_STR_MAX], si[BC_SHAPE_STR_MAX];
  if (a->ndim == 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "%s: tensors are 0-d: there is no axis to join", op);
  *ax = bc_axis(axis, a->ndim);
  if (*ax < 0)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: axis %d out of range for %d dims", op,
                        axis, a->ndim);
  *total = 0;
  for (int i = 0; i < n; i++) {
    const tvk_tensor *t = ts[i];
    bool same = t->ndim == a->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = d == *ax || t->shape[d] == a->shape[d];
    if (!same)
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "%s: tensor %d has shape %s, tensor 0 %s: all dims but %d must agree", op,
                          i, bc_shape_str(t->ndim, t->shape, si, sizeof si),
                          bc_shape_str(a->ndim, a->shape, s0, sizeof s0), *ax);
    /* a symbolic length counts as its largest value */
    if (sint_vmax(t->shape[*ax]) > INT64_MAX / 4 - sint_vmax(*total))
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "%s: the joined dim is too large", op);
    *total = sint_add(*total, t->shape[*ax]);
  }
  int64_t out[TVK_MAX_DIMS];
  memcpy(out, a->shape, sizeof out);
  out[*ax] = *total;
  if (bc_numel(a->ndim, out) < 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "%s: the result has too many elements", op);
  return NULL;
}

/* Each input, cast to the common dtype, is padded with zeros into its place
 * along the axis, and the padded inputs are added: every position holds one
 * input's value plus zeros. The add keeps 0, so the pads of the inputs fuse
 * into one kernel (each load is masked to its range). Symbolic lengths make
 * symbolic places (a cache of seq rows and a new one: (seq + 1, d), the new
 * row at seq). */
tvk_tensor *tvk_cat(int n, tvk_tensor *const *ts, int axis) {
  if (n < 1 || !ts) {
    tvk_tensor *any = NULL;
    for (int i = 0; ts && i < n && !any; i++) any = ts[i];
    return any ? tensor_error(any->ctx, TVK_ERR_INVALID_ARG, "cat: n is %d with ts %s", n,
                              ts ? "given" : "NULL")
               : NULL;
  }
  bool bad;
  tvk_tensor *err = bc_check_sym("cat", n, ts, &bad);
  if (bad) return err;
  int ax = 0;
  sint total = 0;
  if ((err = cat_check("cat", n, ts, axis, &ax, &total))) return err;
  if (n == 1) return bc_same(ts[0]);

  tvk_ctx *ctx = ts[0]->ctx;
  tvk_dtype dt = dt_to_tvk(bc_promote(n, ts));
  int nd = ts[0]->ndim;
  int64_t out[TVK_MAX_DIMS];
  memcpy(out, ts[0]->shape, sizeof out);
  out[ax] = total;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r = NULL;
  sint at = 0;
  for (int i = 0; i < n; i++) {
    sint len = ts[i]->shape[ax];
    if (len == 0) continue; /* adds nothing */
    int64_t pads[TVK_MAX_DIMS][2] = {{0}};
    pads[ax][0] = at;
    at = sint_add(at, len);
    pads[ax][1] = sint_sub(total, at);
    tvk_tensor *p = tvk_pad(tvk_cast(ts[i], dt), pads, 0);
    r = r ? tvk_add(r, p) : p;
  }
  /* every input empty along the axis: the result has no elements */
  if (!r) r = tvk_full(ctx, dt, nd, out, 0);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_stack(int n, tvk_tensor *const *ts, int axis) {
  if (n < 1 || !ts) {
    tvk_tensor *any = NULL;
    for (int i = 0; ts && i < n && !any; i++) any = ts[i];
    return any ? tensor_error(any->ctx, TVK_ERR_INVALID_ARG, "stack: n is %d with ts %s", n,
                              ts ? "given" : "NULL")
               : NULL;
  }
  bool bad;
  tvk_tensor *err = bc_check_sym("stack", n, ts, &bad);
  if (bad) return err;
  tvk_tensor *a = ts[0];
  char s0[BC_SHAPE_STR_MAX], si[BC_SHAPE_STR_MAX];
  for (int i = 1; i < n; i++)
    if (ts[i]->ndim != a->ndim ||
        memcmp(ts[i]->shape, a->shape, (size_t)a->ndim * sizeof a->shape[0]) != 0)
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "stack: tensor %d has shape %s, tensor 0 %s: all must be equal", i,
                          bc_shape_str(ts[i]->ndim, ts[i]->shape, si, sizeof si),
                          bc_shape_str(a->ndim, a->shape, s0, sizeof s0));
  if (a->ndim >= TVK_MAX_DIMS)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "stack: tensors have %d dims already (the most)",
                        a->ndim);
  int at = axis < 0 ? axis + a->ndim + 1 : axis;
  if (at < 0 || at > a->ndim)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                        "stack: axis %d is outside [%d, %d] for %d dims", axis, -a->ndim - 1,
                        a->ndim, a->ndim);
  tvk_ctx *ctx = a->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *local[16], **us = n <= 16 ? local : malloc((size_t)n * sizeof *us);
  tvk_tensor *r;
  if (!us) {
    r = tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "stack: out of memory");
  } else {
    for (int i = 0; i < n; i++) us[i] = tvk_unsqueeze(ts[i], at);
    r = tvk_cat(n, us, at);
    if (us != local) free(us);
  }
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- repeat */

/* numpy.tile: a gets leading 1s up to nrep dims; then each dim d with r = reps[d]
 * != 1 becomes (r, s) by a reshape that inserts a 1 before it and an expand of
 * that 1 to r, and the pair is merged back to r * s by a reshape. All views: a
 * tiled buffer is read with index mod s. A dim of size 1 needs no extra dim
 * (an expand in place). When the inserted dims would pass TVK_MAX_DIMS, the
 * dims are tiled in several rounds of views (which compose into one). */
tvk_tensor *tvk_repeat(tvk_tensor *a, int nrep, const int64_t *repeats) {
  bool bad;
  tvk_tensor *err = bc_check("repeat", 1, &a, &bad);
  if (bad) return err;
  if (nrep < a->ndim || nrep > TVK_MAX_DIMS)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                        "repeat: nrep %d is outside [%d, %d] (a has %d dims)", nrep, a->ndim,
                        TVK_MAX_DIMS, a->ndim);
  if (nrep > 0 && !repeats)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "repeat: repeats is NULL for %d dims", nrep);
  int64_t cur[TVK_MAX_DIMS], out[TVK_MAX_DIMS];
  int lead = nrep - a->ndim;
  for (int d = 0; d < nrep; d++) {
    cur[d] = d < lead ? 1 : a->shape[d - lead];
    if (repeats[d] < 0)
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                          "repeat: repeats[%d] = %" PRId64 " is negative", d, repeats[d]);
    if (cur[d] > 0 && repeats[d] > INT64_MAX / cur[d])
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "repeat: dim %d is too large", d);
    out[d] = cur[d] * repeats[d];
  }
  if (bc_numel(nrep, out) < 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "repeat: the result has too many elements");
  if (bc_numel(nrep, out) == 0) return tvk_full(a->ctx, a->dtype, nrep, out, 0);
  /* a dim of size 1 is tiled by an expand in place; others need a spare dim */
  int need = 0;
  for (int d = 0; d < nrep; d++) need += repeats[d] != 1 && cur[d] != 1;
  if (need > 0 && nrep == TVK_MAX_DIMS)
    return tensor_error(
        a->ctx, TVK_ERR_SHAPE,
        "repeat: tiling a dim of size > 1 in %d dims needs a spare dim (at most %d)", nrep,
        TVK_MAX_DIMS - 1);

  tvk_ctx *ctx = a->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r = tvk_reshape(a, nrep, cur);
  int room = TVK_MAX_DIMS - nrep, d0 = 0;
  while (d0 < nrep) {
    /* dims d0..d1-1 this round: at most `room` of them get a spare dim */
    int d1 = d0, used = 0;
    while (d1 < nrep && (used < room || repeats[d1] == 1 || cur[d1] == 1))
      used += repeats[d1] != 1 && cur[d1] != 1, d1++;
    int64_t split[TVK_MAX_DIMS], wide[TVK_MAX_DIMS];
    int k = 0;
    bool any = false;
    for (int d = 0; d < nrep; d++) {
      bool rep = d >= d0 && d < d1 && repeats[d] != 1;
      any = any || rep;
      if (rep && cur[d] != 1) {
        split[k] = 1;
        wide[k++] = repeats[d];
      }
      split[k] = cur[d];
      wide[k++] = rep && cur[d] == 1 ? repeats[d] : cur[d];
      if (rep) cur[d] *= repeats[d];
    }
    if (any) {
      r = tvk_reshape(r, k, split);
      r = tvk_expand(r, k, wide);
      r = tvk_reshape(r, nrep, cur);
    }
    d0 = d1;
  }
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
