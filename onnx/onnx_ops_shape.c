/* Shape and movement ONNX ops: Shape, Reshape, Transpose, (Un)Squeeze,
 * Concat, Split, Slice, Gather, Expand, Pad, Tile, ConstantOfShape, Range.
 * Each computes on the host when its inputs are host values (shape
 * arithmetic folds that way) and maps onto tvk's free movement ops otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

/* Host results are kept below this many elements; bigger ones go to the device. */
enum { HOST_MAX = 4096 };

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* A copy of host value a with another shape of the same element count. */
static tvk_status host_reshape(onnx_run_ctx *c, const onnx_host *a, int ndim,
                               const int64_t *shape) {
  onnx_host r;
  tvk_status s = onnx_host_alloc(&r, a->dt, ndim, shape);
  if (s != TVK_OK) return onnx_node_fail(c, s, "%s", tvk_onnx_last_error());
  if (r.numel) memcpy(r.data, a->data, (size_t)r.numel * tvk_dtype_size(r.dt));
  return onnx_set_out_host(c, 0, &r);
}

/* Output i as a reshape of input 0 (on the host when it is there). */
static tvk_status set_reshaped(onnx_run_ctx *c, int ndim, const int64_t *shape) {
  if (onnx_all_host(c) &&
      numel_of(ndim, shape) == numel_of(onnx_in_ndim(c, 0), onnx_in_shape(c, 0))) {
    const onnx_host *a = onnx_in_host(c, 0);
    if (a) return host_reshape(c, a, ndim, shape);
  }
  return onnx_set_out(c, 0, tvk_reshape(IN(0), ndim, shape));
}

static tvk_status op_shape(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t start = onnx_attr_int(c, "start", 0), end = onnx_attr_int(c, "end", nd);
  if (start < 0) start += nd;
  if (end < 0) end += nd;
  start = start < 0 ? 0 : start > nd ? nd : start;
  end = end < start ? start : end > nd ? nd : end;
  int64_t n = end - start;
  onnx_host r;
  tvk_status s = onnx_host_alloc(&r, TVK_INT64, 1, &n);
  if (s != TVK_OK) return onnx_node_fail(c, s, "%s", tvk_onnx_last_error());
  for (int64_t i = 0; i < n; i++) ((int64_t *)r.data)[i] = sh[start + i];
  return onnx_set_out_host(c, 0, &r);
}

static tvk_status op_size(onnx_run_ctx *c) {
  onnx_host r;
  tvk_status s = onnx_host_alloc(&r, TVK_INT64, 0, NULL);
  if (s != TVK_OK) return onnx_node_fail(c, s, "%s", tvk_onnx_last_error());
  ((int64_t *)r.data)[0] = numel_of(onnx_in_ndim(c, 0), onnx_in_shape(c, 0));
  return onnx_set_out_host(c, 0, &r);
}

static tvk_status op_reshape(onnx_run_ctx *c) {
  int64_t shape[TVK_MAX_DIMS];
  int n = c->node->opset < 5 ? onnx_attr_ints(c, "shape", shape, TVK_MAX_DIMS)
                             : onnx_in_ints(c, 1, shape, TVK_MAX_DIMS, "the shape");
  if (n < 0)
    return c->node->opset < 5 ? onnx_node_fail(c, TVK_ERR_INVALID_ARG, "no shape") : TVK_ERR_SHAPE;
  if (n > TVK_MAX_DIMS)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (at most %d)", n, TVK_MAX_DIMS);
  bool allowzero = onnx_attr_int(c, "allowzero", 0) != 0;
  const int64_t *in = onnx_in_shape(c, 0);
  int nd = onnx_in_ndim(c, 0), infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= nd)
        return onnx_node_fail(c, TVK_ERR_SHAPE, "dim %d is 0 (copy) but the input has %d dims", i,
                              nd);
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return onnx_node_fail(c, TVK_ERR_SHAPE, "two dims are -1");
      infer = i;
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    int64_t total = numel_of(nd, in);
    if (known == 0 || total % known)
      return onnx_node_fail(c, TVK_ERR_SHAPE,
                            "cannot infer the -1 dim: %lld elements, the others multiply to %lld",
                            (long long)total, (long long)known);
    shape[infer] = total / known;
  }
  return set_reshaped(c, n, shape);
}

static tvk_status op_flatten(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int64_t axis = onnx_attr_int(c, "axis", 1);
  if (axis < 0) axis += nd;
  if (axis < 0 || axis > nd)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 1), nd);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t shape[2] = {numel_of((int)axis, sh), numel_of(nd - (int)axis, sh + axis)};
  return set_reshaped(c, 2, shape);
}

static tvk_status op_transpose(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int64_t perm[TVK_MAX_DIMS];
  int n = onnx_attr_ints(c, "perm", perm, TVK_MAX_DIMS);
  if (n < 0) {
    n = nd;
    for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
  }
  if (n != nd) return onnx_node_fail(c, TVK_ERR_SHAPE, "perm has %d entries for %d dims", n, nd);
  int order[TVK_MAX_DIMS];
  for (int i = 0; i < nd; i++) order[i] = (int)perm[i];
  return onnx_set_out(c, 0, tvk_permute(IN(0), order));
}

/* Axes from the attribute (before opset 13) or input 1; n = -1: none given. */
static int axes_of(onnx_run_ctx *c, int64_t *axes, int input_from_opset) {
  if (c->node->opset < input_from_opset) return onnx_attr_ints(c, "axes", axes, TVK_MAX_DIMS);
  if (!onnx_has_in(c, 1)) return -1;
  return onnx_in_ints(c, 1, axes, TVK_MAX_DIMS, "axes");
}

static tvk_status op_squeeze(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t axes[TVK_MAX_DIMS], shape[TVK_MAX_DIMS];
  int na = axes_of(c, axes, 13);
  if (na < -1) return TVK_ERR_SHAPE;
  bool drop[TVK_MAX_DIMS] = {false};
  for (int i = 0; i < nd && na < 0; i++) drop[i] = sh[i] == 1;
  for (int i = 0; i < na; i++) {
    int a = onnx_axis(axes[i], nd);
    if (a < 0 || sh[a] != 1)
      return onnx_node_fail(c, TVK_ERR_SHAPE, "axis %lld is not a size-1 dim of %d dims",
                            (long long)axes[i], nd);
    drop[a] = true;
  }
  int n = 0;
  for (int i = 0; i < nd; i++)
    if (!drop[i]) shape[n++] = sh[i];
  return set_reshaped(c, n, shape);
}

static tvk_status op_unsqueeze(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t axes[TVK_MAX_DIMS], shape[TVK_MAX_DIMS];
  int na = axes_of(c, axes, 13);
  if (na < 0) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "no axes");
  int out = nd + na;
  if (out > TVK_MAX_DIMS)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (at most %d)", out, TVK_MAX_DIMS);
  bool ins[TVK_MAX_DIMS] = {false};
  for (int i = 0; i < na; i++) {
    int a = onnx_axis(axes[i], out);
    if (a < 0 || ins[a])
      return onnx_node_fail(c, TVK_ERR_SHAPE, "axis %lld for %d output dims", (long long)axes[i],
                            out);
    ins[a] = true;
  }
  for (int i = 0, k = 0; i < out; i++) shape[i] = ins[i] ? 1 : sh[k++];
  return set_reshaped(c, out, shape);
}

static tvk_status op_concat(onnx_run_ctx *c) {
  int n = c->node->nin, nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 0), nd);
  if (onnx_all_host(c)) {
    int64_t shape[TVK_MAX_DIMS];
    memcpy(shape, onnx_in_shape(c, 0), sizeof(int64_t) * (size_t)nd);
    shape[axis] = 0;
    bool ok = true;
    for (int i = 0; i < n; i++) {
      const onnx_host *h = onnx_in_host(c, i);
      ok = ok && h && h->ndim == nd && h->dt == onnx_in_dtype(c, 0);
      for (int d = 0; ok && d < nd; d++) ok = d == axis || h->shape[d] == shape[d];
      if (ok) shape[axis] += h->shape[axis];
    }
    onnx_host r;
    if (ok && numel_of(nd, shape) <= HOST_MAX &&
        onnx_host_alloc(&r, onnx_in_dtype(c, 0), nd, shape) == TVK_OK) {
      size_t es = tvk_dtype_size(r.dt);
      int64_t outer = numel_of(axis, shape), inner = numel_of(nd - axis - 1, shape + axis + 1);
      char *dst = r.data;
      for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
          const onnx_host *h = onnx_in_host(c, i);
          size_t bytes = (size_t)(h->shape[axis] * inner) * es;
          if (bytes) memcpy(dst, (const char *)h->data + (size_t)o * bytes, bytes);
          dst += bytes;
        }
      return onnx_set_out_host(c, 0, &r);
    }
  }
  tvk_tensor *small[16];
  tvk_tensor **ts = n <= 16 ? small : malloc(sizeof *ts * (size_t)n);
  if (!ts) return onnx_node_fail(c, TVK_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < n; i++) ts[i] = IN(i);
  tvk_status s = onnx_set_out(c, 0, tvk_cat(n, ts, axis));
  if (ts != small) free(ts);
  return s;
}

static tvk_status op_split(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0), nout = c->node->nout;
  const int64_t *sh = onnx_in_shape(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 0), nd);
  int64_t sizes[256];
  int ns = -1;
  if (nout > 256) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "%d outputs (at most 256)", nout);
  if (c->node->opset < 13)
    ns = onnx_attr_ints(c, "split", sizes, 256);
  else if (onnx_has_in(c, 1) && (ns = onnx_in_ints(c, 1, sizes, 256, "split")) < 0)
    return TVK_ERR_SHAPE;
  if (ns < 0) { /* equal parts; the last smaller when the dim does not divide */
    int64_t part = (sh[axis] + nout - 1) / nout;
    for (int i = 0; i < nout; i++) {
      int64_t left = sh[axis] - part * i;
      sizes[i] = left < 0 ? 0 : left < part ? left : part;
    }
    ns = nout;
  }
  int64_t total = 0;
  for (int i = 0; i < ns; i++) total += sizes[i];
  if (ns != nout || total != sh[axis])
    return onnx_node_fail(c, TVK_ERR_SHAPE, "%d sizes adding to %lld for %d outputs of dim %lld",
                          ns, (long long)total, nout, (long long)sh[axis]);
  int64_t ranges[TVK_MAX_DIMS][2];
  for (int d = 0; d < nd; d++) ranges[d][0] = 0, ranges[d][1] = sh[d];
  tvk_tensor *x = IN(0);
  for (int i = 0, at = 0; i < nout; at += (int)sizes[i], i++) {
    ranges[axis][0] = at;
    ranges[axis][1] = at + sizes[i];
    tvk_status s = onnx_set_out(c, i, tvk_shrink(x, ranges));
    if (s != TVK_OK) return s;
  }
  return TVK_OK;
}

static tvk_status op_slice(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t starts[TVK_MAX_DIMS], ends[TVK_MAX_DIMS], axes[TVK_MAX_DIMS], steps[TVK_MAX_DIMS];
  int n, ne, na = -1, nst = -1;
  if (c->node->opset < 10) {
    n = onnx_attr_ints(c, "starts", starts, TVK_MAX_DIMS);
    ne = onnx_attr_ints(c, "ends", ends, TVK_MAX_DIMS);
    na = onnx_attr_ints(c, "axes", axes, TVK_MAX_DIMS);
  } else {
    if ((n = onnx_in_ints(c, 1, starts, TVK_MAX_DIMS, "starts")) < 0) return TVK_ERR_SHAPE;
    if ((ne = onnx_in_ints(c, 2, ends, TVK_MAX_DIMS, "ends")) < 0) return TVK_ERR_SHAPE;
    if (onnx_has_in(c, 3) && (na = onnx_in_ints(c, 3, axes, TVK_MAX_DIMS, "axes")) < 0)
      return TVK_ERR_SHAPE;
    if (onnx_has_in(c, 4) && (nst = onnx_in_ints(c, 4, steps, TVK_MAX_DIMS, "steps")) < 0)
      return TVK_ERR_SHAPE;
  }
  if (n < 0 || n != ne || (na >= 0 && na != n) || (nst >= 0 && nst != n))
    return onnx_node_fail(c, TVK_ERR_SHAPE,
                          "starts, ends, axes and steps differ in length (%d, %d, %d, %d)", n, ne,
                          na, nst);
  /* Per dim: first index, step, count. */
  int64_t first[TVK_MAX_DIMS], step[TVK_MAX_DIMS], count[TVK_MAX_DIMS];
  bool seen[TVK_MAX_DIMS] = {false};
  for (int d = 0; d < nd; d++) first[d] = 0, step[d] = 1, count[d] = sh[d];
  for (int i = 0; i < n; i++) {
    int a = onnx_axis(na >= 0 ? axes[i] : i, nd);
    if (a < 0 || seen[a])
      return onnx_node_fail(c, TVK_ERR_SHAPE, "axis %lld for %d dims",
                            (long long)(na >= 0 ? axes[i] : i), nd);
    seen[a] = true;
    int64_t dim = sh[a], st = nst >= 0 ? steps[i] : 1, b = starts[i], e = ends[i];
    if (st == 0) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "step 0 on axis %d", a);
    if (b < 0) b += dim;
    if (e < 0 && e > INT64_MIN / 2) e += dim;
    if (st > 0) {
      b = b < 0 ? 0 : b > dim ? dim : b;
      e = e < 0 ? 0 : e > dim ? dim : e;
      count[a] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      count[a] = b > e ? (b - e + (-st) - 1) / (-st) : 0;
    }
    first[a] = b;
    step[a] = st;
  }
  if (onnx_all_host(c) && numel_of(nd, count) <= HOST_MAX) {
    const onnx_host *h = onnx_in_host(c, 0);
    onnx_host r;
    if (h && onnx_host_alloc(&r, h->dt, nd, count) == TVK_OK) {
      for (int64_t i = 0; i < r.numel; i++) {
        int64_t rem = i, src = 0, stride = 1;
        for (int d = nd - 1; d >= 0; d--) {
          int64_t idx = rem % count[d];
          rem /= count[d];
          src += (first[d] + idx * step[d]) * stride;
          stride *= sh[d];
        }
        onnx_host_set(&r, i, onnx_host_get(h, src));
        if (h->dt == TVK_INT64) ((int64_t *)r.data)[i] = ((const int64_t *)h->data)[src];
      }
      return onnx_set_out_host(c, 0, &r);
    }
  }
  tvk_tensor *x = IN(0);
  for (int d = 0; d < nd; d++)
    if (first[d] != 0 || step[d] != 1 || count[d] != sh[d])
      x = onnx_slice_axis(x, d, first[d], step[d], count[d]);
  return onnx_set_out(c, 0, x);
}

/* indices with negative entries counted from the end of a dim of size dim */
static tvk_tensor *wrap_indices(onnx_run_ctx *c, tvk_tensor *idx, int64_t dim) {
  tvk_dtype dt = tvk_dtype_of(idx);
  tvk_tensor *zero = onnx_scalar(c, dt, 0);
  return tvk_where(tvk_lt(idx, zero), tvk_add(idx, onnx_scalar(c, dt, (double)dim)), idx);
}

static tvk_status op_gather(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0), ni = onnx_in_ndim(c, 1);
  const int64_t *sh = onnx_in_shape(c, 0), *ish = onnx_in_shape(c, 1);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 0), nd);
  int ond = nd - 1 + ni;
  if (ond > TVK_MAX_DIMS)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (at most %d)", ond, TVK_MAX_DIMS);
  int64_t oshape[TVK_MAX_DIMS];
  for (int d = 0; d < axis; d++) oshape[d] = sh[d];
  for (int d = 0; d < ni; d++) oshape[axis + d] = ish[d];
  for (int d = axis + 1; d < nd; d++) oshape[d - 1 + ni] = sh[d];
  if (onnx_all_host(c) && numel_of(ond, oshape) <= HOST_MAX) {
    const onnx_host *h = onnx_in_host(c, 0), *ix = onnx_in_host(c, 1);
    onnx_host r;
    if (h && ix && onnx_host_alloc(&r, h->dt, ond, oshape) == TVK_OK) {
      int64_t inner = numel_of(nd - axis - 1, sh + axis + 1), outer = numel_of(axis, sh);
      size_t es = tvk_dtype_size(h->dt);
      char *dst = r.data;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < ix->numel; k++) {
          int64_t j = onnx_host_get_int(ix, k);
          if (j < 0) j += sh[axis];
          if (j < 0 || j >= sh[axis]) {
            onnx_host_free(&r);
            return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "index %lld out of [%lld, %lld)",
                                  (long long)onnx_host_get_int(ix, k), (long long)-sh[axis],
                                  (long long)sh[axis]);
          }
          memcpy(dst, (const char *)h->data + (size_t)((o * sh[axis] + j) * inner) * es,
                 (size_t)inner * es);
          dst += (size_t)inner * es;
        }
      return onnx_set_out_host(c, 0, &r);
    }
  }
  /* data (A..., V, B...) -> (V, A... B...) as rows, picked by tvk_embedding,
   * then the index dims put back where the axis was. */
  tvk_tensor *x = IN(0), *idx = wrap_indices(c, IN(1), sh[axis]);
  int order[TVK_MAX_DIMS];
  order[0] = axis;
  for (int d = 0, k = 1; d < nd; d++)
    if (d != axis) order[k++] = d;
  int64_t rows[2] = {sh[axis], numel_of(nd, sh) / (sh[axis] ? sh[axis] : 1)};
  if (sh[axis] == 0) rows[1] = 0;
  x = tvk_reshape(tvk_permute(x, order), 2, rows);
  tvk_tensor *g = tvk_embedding(x, idx); /* idx dims + (A... B...) */
  int64_t shape[TVK_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < ni; d++) shape[k++] = ish[d];
  for (int d = 0; d < nd; d++)
    if (d != axis) shape[k++] = sh[d];
  g = tvk_reshape(g, ond, shape);
  /* (I..., A..., B...) -> (A..., I..., B...) */
  int perm[TVK_MAX_DIMS];
  k = 0;
  for (int d = 0; d < axis; d++) perm[k++] = ni + d;
  for (int d = 0; d < ni; d++) perm[k++] = d;
  for (int d = axis + 1; d < nd; d++) perm[k++] = ni + d - 1;
  return onnx_set_out(c, 0, tvk_permute(g, perm));
}

static tvk_status op_gather_elements(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %lld for %d dims",
                          (long long)onnx_attr_int(c, "axis", 0), nd);
  tvk_tensor *idx = wrap_indices(c, IN(1), onnx_in_shape(c, 0)[axis]);
  return onnx_set_out(c, 0, tvk_gather(IN(0), axis, idx));
}

static tvk_status op_expand(onnx_run_ctx *c) {
  int64_t want[TVK_MAX_DIMS], shape[TVK_MAX_DIMS];
  int n = onnx_in_ints(c, 1, want, TVK_MAX_DIMS, "the shape");
  if (n < 0) return TVK_ERR_SHAPE;
  int nd = onnx_in_ndim(c, 0), out = n > nd ? n : nd;
  const int64_t *sh = onnx_in_shape(c, 0);
  /* both ways: a size-1 dim of either side takes the other's size */
  for (int d = 0; d < out; d++) {
    int64_t a = d - (out - nd) >= 0 ? sh[d - (out - nd)] : 1,
            b = d - (out - n) >= 0 ? want[d - (out - n)] : 1;
    if (a != b && a != 1 && b != 1)
      return onnx_node_fail(c, TVK_ERR_SHAPE, "dim %d: the input's %lld does not broadcast to %lld",
                            d, (long long)a, (long long)b);
    shape[d] = a == 1 ? b : a;
  }
  return onnx_set_out(c, 0, tvk_expand(IN(0), out, shape));
}

static tvk_status op_tile(onnx_run_ctx *c) {
  int64_t reps[TVK_MAX_DIMS];
  int n = onnx_in_ints(c, 1, reps, TVK_MAX_DIMS, "repeats");
  if (n < 0) return TVK_ERR_SHAPE;
  return onnx_set_out(c, 0, tvk_repeat(IN(0), n, reps));
}

static tvk_status op_constant_of_shape(onnx_run_ctx *c) {
  int64_t shape[TVK_MAX_DIMS];
  int n = onnx_in_ints(c, 0, shape, TVK_MAX_DIMS, "the shape");
  if (n < 0) return TVK_ERR_SHAPE;
  const Onnx__AttributeProto *a = onnx_attr(c, "value");
  onnx_host v = {0};
  v.dt = TVK_FLOAT32;
  double value = 0;
  if (a && a->t) {
    tvk_status s = onnx_tensor_decode(a->t, NULL, "value", false, &v);
    if (s != TVK_OK) return onnx_node_fail(c, s, "%s", tvk_onnx_last_error());
    if (v.numel != 1) {
      onnx_host_free(&v);
      return onnx_node_fail(c, TVK_ERR_SHAPE, "value has %lld elements (one)", (long long)v.numel);
    }
    value = onnx_host_get(&v, 0);
  }
  tvk_dtype dt = v.dt;
  onnx_host r;
  if (numel_of(n, shape) <= HOST_MAX && onnx_host_alloc(&r, dt, n, shape) == TVK_OK) {
    size_t es = tvk_dtype_size(dt);
    for (int64_t i = 0; i < r.numel; i++)
      if (v.data) memcpy((char *)r.data + (size_t)i * es, v.data, es);
    onnx_host_free(&v);
    return onnx_set_out_host(c, 0, &r);
  }
  onnx_host_free(&v);
  return onnx_set_out(c, 0, tvk_full(CTX, dt, n, shape, value));
}

static tvk_status op_range(onnx_run_ctx *c) {
  const onnx_host *h[3];
  for (int i = 0; i < 3; i++)
    if (!(h[i] = onnx_in_host(c, i))) return TVK_ERR_INVALID_ARG;
  double start = onnx_host_get(h[0], 0), limit = onnx_host_get(h[1], 0),
         delta = onnx_host_get(h[2], 0);
  if (delta == 0) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "delta is 0");
  double cnt = ceil((limit - start) / delta);
  int64_t n = cnt > 0 ? (int64_t)cnt : 0;
  tvk_dtype dt = h[0]->dt;
  onnx_host r;
  if (n <= HOST_MAX && onnx_host_alloc(&r, dt, 1, &n) == TVK_OK) {
    for (int64_t i = 0; i < n; i++) {
      if (dt == TVK_INT64)
        ((int64_t *)r.data)[i] = onnx_host_get_int(h[0], 0) + i * onnx_host_get_int(h[2], 0);
      else
        onnx_host_set(&r, i, start + (double)i * delta);
    }
    return onnx_set_out_host(c, 0, &r);
  }
  return onnx_set_out(c, 0, tvk_arange(CTX, dt, start, start + (double)n * delta, delta));
}

/* Pad: constant, edge and reflect modes; negative pads crop. */
static tvk_status op_pad(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int64_t pads[2 * TVK_MAX_DIMS], axes[TVK_MAX_DIMS];
  int np, na = -1;
  double value = 0;
  char buf[16];
  const char *mode = onnx_attr_string(c, "mode", "constant", buf, sizeof buf);
  if (c->node->opset < 11) {
    np = onnx_attr_ints(c, "pads", pads, 2 * TVK_MAX_DIMS);
    value = onnx_attr_float(c, "value", 0);
  } else {
    if ((np = onnx_in_ints(c, 1, pads, 2 * TVK_MAX_DIMS, "pads")) < 0) return TVK_ERR_SHAPE;
    if (onnx_has_in(c, 2)) {
      const onnx_host *v = onnx_in_host(c, 2);
      if (!v) return TVK_ERR_INVALID_ARG;
      if (v->numel) value = onnx_host_get(v, 0);
    }
    if (onnx_has_in(c, 3) && (na = onnx_in_ints(c, 3, axes, TVK_MAX_DIMS, "axes")) < 0)
      return TVK_ERR_SHAPE;
  }
  if (na < 0) {
    na = nd;
    for (int i = 0; i < nd; i++) axes[i] = i;
  }
  if (np != 2 * na) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d pads for %d axes", np, na);
  int64_t p[TVK_MAX_DIMS][2] = {{0}};
  for (int i = 0; i < na; i++) {
    int a = onnx_axis(axes[i], nd);
    if (a < 0)
      return onnx_node_fail(c, TVK_ERR_SHAPE, "axis %lld for %d dims", (long long)axes[i], nd);
    p[a][0] = pads[i];
    p[a][1] = pads[i + na];
  }
  tvk_tensor *x = IN(0);
  /* crops first */
  int64_t ranges[TVK_MAX_DIMS][2];
  bool crop = false;
  for (int d = 0; d < nd; d++) {
    int64_t dim = tvk_shape(x)[d];
    ranges[d][0] = p[d][0] < 0 ? -p[d][0] : 0;
    ranges[d][1] = p[d][1] < 0 ? dim + p[d][1] : dim;
    if (p[d][0] < 0 || p[d][1] < 0) crop = true;
    if (p[d][0] < 0) p[d][0] = 0;
    if (p[d][1] < 0) p[d][1] = 0;
  }
  if (crop) x = tvk_shrink(x, ranges);
  if (!strcmp(mode, "constant")) return onnx_set_out(c, 0, tvk_pad(x, p, value));
  bool edge = !strcmp(mode, "edge");
  if (!edge && strcmp(mode, "reflect"))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "mode '%s' (constant, reflect or edge)", mode);
  for (int d = 0; d < nd; d++) {
    int64_t dim = tvk_shape(x)[d];
    if (!p[d][0] && !p[d][1]) continue;
    if (dim == 0 || (!edge && (p[d][0] >= dim || p[d][1] >= dim)))
      return onnx_node_fail(c, TVK_ERR_SHAPE, "%s pads of %lld and %lld on dim %d of size %lld",
                            mode, (long long)p[d][0], (long long)p[d][1], d, (long long)dim);
    tvk_tensor *parts[3];
    int k = 0;
    for (int side = 0; side < 2; side++) {
      if (!p[d][side]) continue;
      int64_t r[TVK_MAX_DIMS][2];
      for (int e = 0; e < nd; e++) r[e][0] = 0, r[e][1] = tvk_shape(x)[e];
      tvk_tensor *part;
      if (edge) {
        r[d][0] = side ? dim - 1 : 0;
        r[d][1] = r[d][0] + 1;
        int64_t shape[TVK_MAX_DIMS];
        memcpy(shape, tvk_shape(x), sizeof(int64_t) * (size_t)nd);
        shape[d] = p[d][side];
        part = tvk_expand(tvk_shrink(x, r), nd, shape);
      } else { /* the elements next to the border, mirrored, border excluded */
        r[d][0] = side ? dim - 1 - p[d][1] : 1;
        r[d][1] = side ? dim - 1 : 1 + p[d][0];
        part = tvk_flip(tvk_shrink(x, r), 1, &d);
      }
      if (side == 0)
        parts[k++] = part;
      else {
        parts[k++] = x;
        parts[k++] = part;
      }
    }
    if (!p[d][1]) parts[k++] = x;
    x = tvk_cat(k, parts, d);
  }
  return onnx_set_out(c, 0, x);
}

static tvk_status op_depth_to_space(onnx_run_ctx *c) {
  const int64_t *sh = onnx_in_shape(c, 0);
  if (onnx_in_ndim(c, 0) != 4) return onnx_node_fail(c, TVK_ERR_SHAPE, "takes 4 dims");
  int64_t b = onnx_attr_int(c, "blocksize", 0), n = sh[0], ch = sh[1], h = sh[2], w = sh[3];
  if (b <= 0 || ch % (b * b))
    return onnx_node_fail(c, TVK_ERR_SHAPE, "blocksize %lld for %lld channels", (long long)b,
                          (long long)ch);
  char buf[8];
  bool crd = !strcmp(onnx_attr_string(c, "mode", "DCR", buf, sizeof buf), "CRD");
  int64_t s6[6], out[4] = {n, ch / (b * b), h * b, w * b};
  int perm[6];
  if (crd) {
    int64_t t[6] = {n, ch / (b * b), b, b, h, w};
    int p[6] = {0, 1, 4, 2, 5, 3};
    memcpy(s6, t, sizeof t), memcpy(perm, p, sizeof p);
  } else {
    int64_t t[6] = {n, b, b, ch / (b * b), h, w};
    int p[6] = {0, 3, 4, 1, 5, 2};
    memcpy(s6, t, sizeof t), memcpy(perm, p, sizeof p);
  }
  return onnx_set_out(c, 0, tvk_reshape(tvk_permute(tvk_reshape(IN(0), 6, s6), perm), 4, out));
}

static tvk_status op_space_to_depth(onnx_run_ctx *c) {
  const int64_t *sh = onnx_in_shape(c, 0);
  if (onnx_in_ndim(c, 0) != 4) return onnx_node_fail(c, TVK_ERR_SHAPE, "takes 4 dims");
  int64_t b = onnx_attr_int(c, "blocksize", 0), n = sh[0], ch = sh[1], h = sh[2], w = sh[3];
  if (b <= 0 || h % b || w % b)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "blocksize %lld for %lldx%lld", (long long)b,
                          (long long)h, (long long)w);
  int64_t s6[6] = {n, ch, h / b, b, w / b, b}, out[4] = {n, ch * b * b, h / b, w / b};
  int perm[6] = {0, 3, 5, 1, 2, 4};
  return onnx_set_out(c, 0, tvk_reshape(tvk_permute(tvk_reshape(IN(0), 6, s6), perm), 4, out));
}

const onnx_op onnx_ops_shape[] = {
    {"Concat", "axis", 1, 1024, 1, 1, op_concat},
    {"ConstantOfShape", "value", 1, 1, 1, 1, op_constant_of_shape},
    {"DepthToSpace", "blocksize,mode", 1, 1, 1, 1, op_depth_to_space},
    {"Expand", "", 2, 2, 1, 1, op_expand},
    {"Flatten", "axis", 1, 1, 1, 1, op_flatten},
    {"Gather", "axis", 2, 2, 1, 1, op_gather},
    {"GatherElements", "axis", 2, 2, 1, 1, op_gather_elements},
    {"Pad", "mode,pads,value", 1, 4, 1, 1, op_pad},
    {"Range", "", 3, 3, 1, 1, op_range},
    {"Reshape", "allowzero,shape", 1, 2, 1, 1, op_reshape},
    {"Shape", "start,end", 1, 1, 1, 1, op_shape},
    {"Size", "", 1, 1, 1, 1, op_size},
    {"Slice", "starts,ends,axes", 1, 5, 1, 1, op_slice},
    {"SpaceToDepth", "blocksize", 1, 1, 1, 1, op_space_to_depth},
    {"Split", "axis,split", 1, 2, 1, 256, op_split},
    {"Squeeze", "axes", 1, 2, 1, 1, op_squeeze},
    {"Tile", "", 2, 2, 1, 1, op_tile},
    {"Transpose", "perm", 1, 1, 1, 1, op_transpose},
    {"Unsqueeze", "axes", 1, 2, 1, 1, op_unsqueeze},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
