/* Movement ops (tvk.h): each checks its arguments, applies the matching
 * ShapeTracker op to a tracker of the input's shape and puts the result on
 * the input's node with graph_view (which composes views), so a chain of them
 * is one VIEW and costs nothing at run time. contiguous is the exception: a
 * CONTIGUOUS node the scheduler materialises. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/ops_common.h"

/* A user-given dim count and shape pointer: NULL or an error tensor. */
static tvk_tensor *check_dims(const char *op, const tvk_tensor *a, int ndim, const void *arr,
                              const char *arr_name) {
  if (ndim < 0 || ndim > TVK_MAX_DIMS)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: ndim %d is outside 0..%d", op, ndim,
                        TVK_MAX_DIMS);
  if (ndim > 0 && !arr)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: %s is NULL for %d dims", op, arr_name,
                        ndim);
  return NULL;
}

/* A new tensor for a's node seen through a movement (NULL u: out of memory). */
static tvk_tensor *moved(tvk_tensor *a, const char *op, size_t mark, UOp *u, int nd,
                         const int64_t *shape) {
  return FRONT_END(a->ctx, mark, bc_result(a->ctx, op, u, dt_from_tvk(a->dtype), nd, shape));
}

/* ---------------------------------------------------------------- reshape */

/* The product of a shape as a sint (an expression where a dim is symbolic). */
static sint sym_numel(int ndim, const int64_t *shape) {
  sint n = 1;
  for (int d = 0; d < ndim; d++) n = sint_mul(n, shape[d]);
  return n;
}

/* The target shape of a reshape whose input or target has a symbolic dim,
 * its -1 inferred: the counts must be equal for every value of the
 * variables (the sint normal form makes seq*4*64 and seq*256 one size). */
static tvk_tensor *infer_sym_shape(const tvk_tensor *a, int ndim, int infer, int64_t *out,
                                   const char *want, const char *have) {
  sint numel = sym_numel(a->ndim, a->shape);
  if (infer >= 0) {
    out[infer] = 1;
    sint known = sym_numel(ndim, out);
    sint q = known != 0 && numel != SINT_NONE && known != SINT_NONE ? sint_fdiv(numel, known)
                                                                    : SINT_NONE;
    if (q == SINT_NONE || !sint_proven_eq(sint_mul(q, known), numel))
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "reshape: cannot infer the -1 of %s for %s: the other dims do not "
                          "divide its count for every value of its size variables",
                          want, have);
    out[infer] = q;
  }
  if (!sint_proven_eq(sym_numel(ndim, out), numel))
    return tensor_error(a->ctx, TVK_ERR_SHAPE,
                        "reshape: cannot reshape %s into %s: the counts are not equal for every "
                        "value of the size variables (a symbolic size comes from tvk_from_data, "
                        "tvk_shrink or tvk_expand)",
                        have, want);
  return NULL;
}

/* The target shape with its -1 inferred; NULL or an error tensor. */
static tvk_tensor *infer_shape(const tvk_tensor *a, int ndim, const int64_t *shape, int64_t *out) {
  char want[BC_SHAPE_STR_MAX], have[BC_SHAPE_STR_MAX];
  bc_shape_str(ndim, shape, want, sizeof want);
  bc_shape_str(a->ndim, a->shape, have, sizeof have);
  int infer = -1;
  bool sym = shape_first_sym(a->ndim, a->shape) >= 0;
  for (int d = 0; d < ndim; d++) {
    out[d] = shape[d];
    if (sint_is_sym(shape[d])) {
      char what[16];
      snprintf(what, sizeof what, "dim %d", d);
      tvk_tensor *err = front_check_size(a->ctx, "reshape", what, shape[d]);
      if (err) return err;
      sym = true;
      continue;
    }
    if (shape[d] >= 0) continue;
    if (shape[d] != -1)
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "reshape: shape %s has a negative dim", want);
    if (infer >= 0)
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "reshape: shape %s has more than one -1", want);
    infer = d;
  }
  if (sym) return infer_sym_shape(a, ndim, infer, out, want, have);
  int64_t numel = bc_numel(a->ndim, a->shape);
  if (infer >= 0) {
    out[infer] = 1;
    int64_t known = bc_numel(ndim, out);
    if (known <= 0 || numel % known != 0)
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "reshape: cannot infer the -1 of %s for %s (%" PRId64 " elements)", want,
                          have, numel);
    out[infer] = numel / known;
  }
  int64_t n = bc_numel(ndim, out);
  if (n != numel)
    return tensor_error(a->ctx, TVK_ERR_SHAPE,
                        "reshape: cannot reshape %s (%" PRId64 " elements) into %s (%s elements)",
                        have, numel, want, n < 0 ? "too many" : "a different number of");
  return NULL;
}

tvk_tensor *tvk_reshape(tvk_tensor *a, int ndim, const int64_t *shape) {
  bool bad;
  tvk_tensor *err = bc_check_sym("reshape", 1, &a, &bad);
  if (bad) return err;
  if ((err = check_dims("reshape", a, ndim, shape, "shape"))) return err;
  int64_t out[TVK_MAX_DIMS];
  if ((err = infer_shape(a, ndim, shape, out))) return err;
  if (ndim == a->ndim && memcmp(out, a->shape, (size_t)ndim * sizeof *out) == 0) return bc_same(a);
  size_t m = FRONT_BEGIN(a->ctx);
  return moved(a, "reshape", m, bc_reshape(a->uop, a->ndim, a->shape, ndim, out), ndim, out);
}

/* ---------------------------------------------------------------- permute, transpose */

static tvk_tensor *permute_checked(tvk_tensor *a, const char *op, const int *order) {
  int64_t shape[TVK_MAX_DIMS];
  bool identity = true;
  for (int d = 0; d < a->ndim; d++) {
    shape[d] = a->shape[order[d]];
    identity = identity && order[d] == d;
  }
  if (identity) return bc_same(a);
  size_t m = FRONT_BEGIN(a->ctx);
  return moved(a, op, m, bc_permute(a->uop, a->ndim, a->shape, order), a->ndim, shape);
}

tvk_tensor *tvk_permute(tvk_tensor *a, const int *order) {
  bool bad;
  tvk_tensor *err = bc_check_sym("permute", 1, &a, &bad);
  if (bad) return err;
  if ((err = check_dims("permute", a, a->ndim, order, "order"))) return err;
  int norm[TVK_MAX_DIMS];
  bool seen[TVK_MAX_DIMS] = {false};
  for (int d = 0; d < a->ndim; d++) {
    norm[d] = bc_axis(order[d], a->ndim);
    if (norm[d] < 0 || seen[norm[d]]) {
      char s[TVK_MAX_DIMS * 13 + 4];
      int64_t o[TVK_MAX_DIMS];
      for (int i = 0; i < a->ndim; i++) o[i] = order[i];
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                          "permute: order %s is not a permutation of 0..%d",
                          bc_shape_str(a->ndim, o, s, sizeof s), a->ndim - 1);
    }
    seen[norm[d]] = true;
  }
  return permute_checked(a, "permute", norm);
}

tvk_tensor *tvk_transpose(tvk_tensor *a, int dim0, int dim1) {
  bool bad;
  tvk_tensor *err = bc_check_sym("transpose", 1, &a, &bad);
  if (bad) return err;
  int d0 = bc_axis(dim0, a->ndim), d1 = bc_axis(dim1, a->ndim);
  if (d0 < 0 || d1 < 0)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "transpose: dim %d out of range for %d dims",
                        d0 < 0 ? dim0 : dim1, a->ndim);
  int order[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) order[d] = d;
  order[d0] = d1;
  order[d1] = d0;
  return permute_checked(a, "transpose", order);
}

/* ---------------------------------------------------------------- expand */

tvk_tensor *tvk_expand(tvk_tensor *a, int ndim, const int64_t *shape) {
  bool bad;
  tvk_tensor *err = bc_check_sym("expand", 1, &a, &bad);
  if (bad) return err;
  if ((err = check_dims("expand", a, ndim, shape, "shape"))) return err;
  char have[BC_SHAPE_STR_MAX], want[BC_SHAPE_STR_MAX];
  bc_shape_str(a->ndim, a->shape, have, sizeof have);
  bc_shape_str(ndim, shape, want, sizeof want);
  if (ndim < a->ndim)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "expand: cannot expand %s to %s: fewer dims", have,
                        want);
  int64_t out[TVK_MAX_DIMS];
  int off = ndim - a->ndim;
  for (int d = 0; d < ndim; d++) {
    int64_t src = d >= off ? a->shape[d - off] : 1;
    out[d] = shape[d] == -1 && d >= off ? src : shape[d];
    if (sint_is_sym(out[d])) {
      char what[16];
      snprintf(what, sizeof what, "dim %d", d);
      if ((err = front_check_size(a->ctx, "expand", what, out[d]))) return err;
    } else if (out[d] < 0)
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "expand: cannot expand %s to %s: dim %d is negative%s", have, want, d,
                          d < off ? " (-1 keeps a size only in existing dims)" : "");
    if (src != 1 && out[d] != src) {
      char size[64];
      sint_str(src, size, sizeof size); /* a number or an expression */
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "expand: cannot expand %s to %s: dim %d has size %s, only size-1 dims "
                          "stretch",
                          have, want, d, size);
    }
  }
  if (bc_numel(ndim, out) < 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "expand: %s has too many elements", want);
  size_t m = FRONT_BEGIN(a->ctx);
  return moved(a, "expand", m, bc_to_shape(a->uop, a->ndim, a->shape, ndim, out), ndim, out);
}

/* ---------------------------------------------------------------- pad, shrink */

/* Padding with a value other than +0 selects it where a padded all-true mask
 * reads false (padding of the tensor graph reads 0). */
tvk_tensor *tvk_pad(tvk_tensor *a, const int64_t (*pads)[2], double value) {
  bool bad;
  tvk_tensor *err = bc_check_sym("pad", 1, &a, &bad);
  if (bad) return err;
  if ((err = check_dims("pad", a, a->ndim, pads, "pads"))) return err;
  int64_t out[TVK_MAX_DIMS];
  bool none = true;
  for (int d = 0; d < a->ndim; d++) {
    int64_t lo = pads[d][0], hi = pads[d][1];
    /* a size (never negative for any value: cat's place for an input after
     * one of symbolic length), or a number >= 0 */
    char what[32];
    snprintf(what, sizeof what, "pads[%d]", d);
    if ((sint_is_sym(lo) && (err = front_check_size(a->ctx, "pad", what, lo))) ||
        (sint_is_sym(hi) && (err = front_check_size(a->ctx, "pad", what, hi))))
      return err;
    if ((!sint_is_sym(lo) && lo < 0) || (!sint_is_sym(hi) && hi < 0)) {
      char p[2][64];
      sint_str(lo, p[0], sizeof p[0]);
      sint_str(hi, p[1], sizeof p[1]);
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "pad: pads[%d] = (%s, %s) is negative", d,
                          p[0], p[1]);
    }
    int64_t dim = sint_vmax(a->shape[d]), vlo = sint_vmax(lo), vhi = sint_vmax(hi);
    if (vlo > INT64_MAX - dim || vhi > INT64_MAX - dim - vlo)
      return tensor_error(a->ctx, TVK_ERR_SHAPE, "pad: pads[%d] make dim %d too large", d, d);
    out[d] = sint_add(sint_add(a->shape[d], lo), hi);
    none = none && lo == 0 && hi == 0;
  }
  if (bc_numel(a->ndim, out) < 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "pad: the result has too many elements");
  if (none) return bc_same(a);

  ScalarType s = dt_from_tvk(a->dtype);
  CVal v = cval_from_double(value, s);
  bool zero = (DT_BITS_FLOAT & DT_BIT(s)) ? v.f == 0 && !signbit(v.f) : v.i == 0;
  size_t m = FRONT_BEGIN(a->ctx);
  UOp *x = bc_pad(a->uop, a->ndim, a->shape, pads);
  if (!zero) {
    Ew ein = ew_frame(a->ctx, a->ndim, a->shape), eout = ew_frame(a->ctx, a->ndim, out);
    UOp *mask = bc_pad(ew_const(&ein, DT_BOOL, 1), a->ndim, a->shape, pads);
    x = ew_where(mask, x, ew_const_val(&eout, s, v));
  }
  return moved(a, "pad", m, x, a->ndim, out);
}

tvk_tensor *tvk_shrink(tvk_tensor *a, const int64_t (*ranges)[2]) {
  bool bad;
  tvk_tensor *err = bc_check_sym("shrink", 1, &a, &bad);
  if (bad) return err;
  if ((err = check_dims("shrink", a, a->ndim, ranges, "ranges"))) return err;
  int64_t out[TVK_MAX_DIMS];
  bool none = true;
  for (int d = 0; d < a->ndim; d++) {
    int64_t lo = ranges[d][0], hi = ranges[d][1];
    char what[32];
    snprintf(what, sizeof what, "the range of dim %d", d);
    if ((sint_is_sym(lo) && (err = front_check_size(a->ctx, "shrink", what, lo))) ||
        (sint_is_sym(hi) && (err = front_check_size(a->ctx, "shrink", what, hi))))
      return err;
    /* for every value of the variables: 0 <= lo <= hi <= dim */
    if (!sint_proven_le(0, lo) || !sint_proven_le(lo, hi) || !sint_proven_le(hi, a->shape[d])) {
      char r[2][64], dim[64];
      sint_str(lo, r[0], sizeof r[0]);
      sint_str(hi, r[1], sizeof r[1]);
      sint_str(a->shape[d], dim, sizeof dim);
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG,
                          "shrink: range (%s, %s) of dim %d is not within 0..%s with start <= "
                          "end%s",
                          r[0], r[1], d, dim,
                          sint_any_sym(lo, hi) || sint_is_sym(a->shape[d])
                              ? " for every value of the size variables"
                              : "");
    }
    out[d] = sint_sub(hi, lo);
    none = none && lo == 0 && hi == a->shape[d];
  }
  if (none) return bc_same(a);
  size_t m = FRONT_BEGIN(a->ctx);
  return moved(a, "shrink", m, bc_shrink(a->uop, a->ndim, a->shape, ranges), a->ndim, out);
}

/* ---------------------------------------------------------------- flip */

tvk_tensor *tvk_flip(tvk_tensor *a, int naxes, const int *axes) {
  bool bad;
  tvk_tensor *err = bc_check_sym("flip", 1, &a, &bad);
  if (bad) return err;
  if (naxes < 0)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "flip: naxes %d is negative", naxes);
  if (naxes > 0 && !axes)
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "flip: axes is NULL for %d axes", naxes);
  bool flip[TVK_MAX_DIMS] = {false}, any = false;
  for (int i = 0; i < naxes; i++) {
    int d = bc_axis(axes[i], a->ndim);
    if (d < 0)
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "flip: axis %d out of range for %d dims",
                          axes[i], a->ndim);
    if (flip[d])
      return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "flip: dim %d is listed twice", d);
    flip[d] = true;
    any = any || !sint_proven_le(a->shape[d], 1); /* reversing 0 or 1 element changes nothing */
  }
  if (!any) return bc_same(a);
  size_t m = FRONT_BEGIN(a->ctx);
  return moved(a, "flip", m, bc_flip(a->uop, a->ndim, a->shape, flip), a->ndim, a->shape);
}

/* ---------------------------------------------------------------- contiguous */

tvk_tensor *tvk_contiguous(tvk_tensor *a) {
  bool bad;
  tvk_tensor *err = bc_check_sym("contiguous", 1, &a, &bad);
  if (bad) return err;
  if (a->uop->op == OP_CONTIGUOUS) return bc_same(a);
  size_t m = FRONT_BEGIN(a->ctx);
  UOp *x = a->uop;
  return moved(a, "contiguous", m, uop_new(a->ctx->u, OP_CONTIGUOUS, x->dtype, 1, &x, arg_none()),
               a->ndim, a->shape);
}
