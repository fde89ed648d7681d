/* tvk_resize (tvk.h "neural-network ops"): nearest, linear and cubic
 * resampling of any axes, with ONNX's (and torch's) coordinate conventions.
 *
 * Resampling is separable: each resized axis in turn. Its weights depend only
 * on the sizes, so they are computed here on the host, once per call, as an
 * (in, out) matrix M whose column o holds output o's taps (edge indices
 * clamped, as the reference pads by repeating the edge); the axis is then
 * x @ M with the axis moved last, one matmul kernel. A nearest resize whose
 * index map is an integer upsampling (o -> o / s) or a stride (o -> o * s +
 * c) is a view instead (reshape and expand, or shrink), with no arithmetic;
 * any other nearest map gathers its indices (exact for every dtype).
 * docs/ops_linalg.md has the formulas. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "frontend/ops_common.h"

/* The source coordinate of output o along an axis of in elements. outw is
 * the output's length as the scale gives it, in * scale (not rounded: ONNX's
 * align_corners with a scale of 0.6 on 4 elements divides by 2.4 - 1). */
static double src_coord(const tvk_resize_options *o, int64_t i, int64_t in, double outw,
                        double scale, const double *roi) {
  double x = (double)i;
  if (roi) { /* tf_crop_and_resize: the window [roi0, roi1] of the input */
    double span = (roi[1] - roi[0]) * (double)(in - 1);
    return roi[0] * (double)(in - 1) + (outw == 1 ? span / 2 : x * span / (outw - 1));
  }
  switch (o->coord) {
  case TVK_RESIZE_ALIGN_CORNERS: return outw == 1 ? 0 : x * (double)(in - 1) / (outw - 1);
  case TVK_RESIZE_ASYMMETRIC: return x / scale;
  case TVK_RESIZE_PYTORCH_HALF_PIXEL: return outw == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  case TVK_RESIZE_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
  default: return (x + 0.5) / scale - 0.5;
  }
}

/* Output o's taps: n indices from first, with weights w (n <= 4). The base
 * is the input index at or just left of x (x - 1 when x is an integer), so
 * that the ratio r = x - base lies in (0, 1], as ONNX's reference takes it. */
static int taps(const tvk_resize_options *o, double x, int64_t *first, double *w) {
  double base = ceil(x) - 1, r = x - base;
  double a = o->cubic_a != 0 ? o->cubic_a : -0.75;
  switch (o->mode) {
  case TVK_RESIZE_NEAREST: {
    bool right = r == 1                                       ? true
                 : o->nearest == TVK_RESIZE_ROUND_PREFER_CEIL ? r >= 0.5
                 : o->nearest == TVK_RESIZE_FLOOR             ? false
                 : o->nearest == TVK_RESIZE_CEIL              ? true
                                                              : r > 0.5;
    *first = (int64_t)base + right;
    w[0] = 1;
    return 1;
  }
  case TVK_RESIZE_LINEAR:
    *first = (int64_t)base;
    w[0] = 1 - r, w[1] = r;
    return 2;
  default: { /* Keys' cubic convolution with parameter a */
    double s = r + 1, t = 1 - r, u = 2 - r;
    w[0] = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
    w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    w[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
    w[3] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
    *first = (int64_t)base - 1;
    return 4;
  }
  }
}

/* One axis: the (in, out) matrix, whether any output lies outside a roi (its
 * column is 0 and `outside` says where), and the nearest index map. */
typedef struct {
  double *m;        /* in * out, row-major (in, out) */
  uint8_t *outside; /* out flags, NULL without a roi */
  int64_t *pick;    /* nearest: out source indices */
} AxisPlan;

static bool plan_axis(const tvk_resize_options *o, int64_t in, int64_t out, double scale,
                      const double *roi, AxisPlan *p) {
  p->m = calloc((size_t)(in * out), sizeof *p->m);
  p->pick = calloc((size_t)out, sizeof *p->pick);
  p->outside = roi ? calloc((size_t)out, 1) : NULL;
  if (!p->m || !p->pick || (roi && !p->outside)) return false;
  for (int64_t i = 0; i < out; i++) {
    double x = src_coord(o, i, in, (double)in * scale, scale, roi), w[4];
    if (roi && (x < 0 || x > (double)(in - 1))) {
      p->outside[i] = 1;
      continue;
    }
    int64_t first;
    int n = taps(o, x, &first, w);
    double total = 0;
    if (o->exclude_outside) { /* taps off the input drop out, the rest renormalised */
      for (int t = 0; t < n; t++)
        if (first + t < 0 || first + t >= in) w[t] = 0;
      for (int t = 0; t < n; t++) total += w[t];
      for (int t = 0; t < n && total != 0; t++) w[t] /= total;
    }
    for (int t = 0; t < n; t++) {
      int64_t j = first + t;
      j = j < 0 ? 0 : j >= in ? in - 1 : j; /* the edge repeats */
      p->m[j * out + i] += w[t];
      if (t == 0) p->pick[i] = j;
    }
  }
  return true;
}

static void free_plan(AxisPlan *p) { free(p->m), free(p->pick), free(p->outside); }

/* Nearest as a view when it can be: o -> o / s (upsampling by s) or o -> o *
 * s + c (a stride). NULL otherwise. */
static tvk_tensor *nearest_view(tvk_tensor *x, int axis, int64_t in, int64_t out,
                                const int64_t *pick) {
  int nd = tvk_ndim(x);
  int64_t shape[TVK_MAX_DIMS + 1];
  if (out % in == 0) {
    int64_t s = out / in;
    bool up = true;
    for (int64_t i = 0; i < out && up; i++) up = pick[i] == i / s;
    if (up) { /* (.., in, 1, ..) expanded to (.., in, s, ..) */
      for (int d = 0, k = 0; d < nd; d++) {
        shape[k++] = tvk_shape(x)[d];
        if (d == axis) shape[k++] = 1;
      }
      tvk_tensor *v = tvk_reshape(x, nd + 1, shape);
      shape[axis + 1] = s;
      v = tvk_expand(v, nd + 1, shape);
      for (int d = 0; d < nd; d++) shape[d] = d == axis ? out : tvk_shape(x)[d];
      return tvk_reshape(v, nd, shape);
    }
  }
  int64_t c = pick[0], s = out > 1 ? pick[1] - pick[0] : 1;
  bool strided = s >= 1;
  for (int64_t i = 0; i < out && strided; i++) strided = pick[i] == c + i * s;
  if (!strided) return NULL;
  int64_t r[TVK_MAX_DIMS][2];
  for (int d = 0; d < nd; d++) r[d][0] = 0, r[d][1] = tvk_shape(x)[d];
  r[axis][0] = c;
  r[axis][1] = c + (out - 1) * s + 1;
  tvk_tensor *v = tvk_shrink(x, r);
  if (s == 1) return v;
  /* every s-th: pad to out * s, view (out, s), keep column 0 */
  int64_t pads[TVK_MAX_DIMS][2] = {{0}};
  pads[axis][1] = out * s - (r[axis][1] - r[axis][0]);
  v = tvk_pad(v, pads, 0);
  for (int d = 0, k = 0; d < nd; d++) {
    if (d == axis) {
      shape[k++] = out;
      shape[k++] = s;
    } else {
      shape[k++] = tvk_shape(x)[d];
    }
  }
  v = tvk_reshape(v, nd + 1, shape);
  int64_t r2[TVK_MAX_DIMS + 1][2];
  for (int d = 0; d < nd + 1; d++) r2[d][0] = 0, r2[d][1] = shape[d];
  r2[axis + 1][1] = 1;
  v = tvk_shrink(v, r2);
  for (int d = 0; d < nd; d++) shape[d] = d == axis ? out : tvk_shape(x)[d];
  return tvk_reshape(v, nd, shape);
}

/* x resampled along one axis by the plan's matrix: the axis moved last, x @ M,
 * moved back; outside a roi the value is `extrapolation`. */
static tvk_tensor *apply_matrix(tvk_tensor *x, int axis, int64_t in, int64_t out, const AxisPlan *p,
                                double extrapolation) {
  tvk_ctx *ctx = x->ctx;
  int nd = tvk_ndim(x);
  tvk_dtype dt = tvk_dtype_of(x);
  /* the weights go up as float32 unless x is float64: a device without
   * float64 (most phones) must not need it for a float32 resize */
  tvk_tensor *m;
  if (dt == TVK_FLOAT64) {
    m = tvk_from_data(ctx, TVK_FLOAT64, 2, (int64_t[]){in, out}, p->m);
  } else {
    float *w32 = malloc(sizeof(float) * (size_t)(in * out));
    if (!w32) return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "resize: out of memory");
    for (int64_t i = 0; i < in * out; i++) w32[i] = (float)p->m[i];
    m = tvk_cast(tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){in, out}, w32), dt);
    free(w32);
  }
  int order[TVK_MAX_DIMS], back[TVK_MAX_DIMS];
  for (int d = 0, k = 0; d < nd; d++)
    if (d != axis) order[k++] = d;
  order[nd - 1] = axis;
  for (int d = 0; d < nd; d++) back[order[d]] = d;
  tvk_tensor *y = tvk_permute(tvk_matmul(tvk_permute(x, order), m), back);
  if (p->outside) {
    int64_t shape[TVK_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == axis ? out : 1;
    tvk_tensor *mask = tvk_from_data(ctx, TVK_BOOL, nd, shape, p->outside);
    y = tvk_where(mask, tvk_full(ctx, dt, 0, NULL, extrapolation), y);
  }
  return y;
}

/* Nearest along one axis in general: gathers the picked indices (any dtype,
 * exact). */
static tvk_tensor *apply_pick(tvk_tensor *x, int axis, int64_t out, const AxisPlan *p,
                              double extrapolation) {
  tvk_ctx *ctx = x->ctx;
  int nd = tvk_ndim(x);
  int64_t shape[TVK_MAX_DIMS], full[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    shape[d] = d == axis ? out : 1;
    full[d] = d == axis ? out : tvk_shape(x)[d];
  }
  /* int32 positions (an axis is at most 2^24 long here): no int64 on the device */
  int32_t *pick = malloc(sizeof(int32_t) * (size_t)(out ? out : 1));
  if (!pick) return tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "resize: out of memory");
  for (int64_t i = 0; i < out; i++) pick[i] = (int32_t)p->pick[i];
  tvk_tensor *idx = tvk_from_data(ctx, TVK_INT32, nd, shape, pick);
  free(pick);
  tvk_tensor *y = tvk_gather(x, axis, tvk_expand(idx, nd, full));
  if (p->outside) {
    tvk_tensor *mask = tvk_from_data(ctx, TVK_BOOL, nd, shape, p->outside);
    y = tvk_where(mask, tvk_full(ctx, tvk_dtype_of(x), 0, NULL, extrapolation), y);
  }
  return y;
}

tvk_tensor *tvk_resize(tvk_tensor *x, int naxes, const int *axes, const int64_t *sizes,
                       const tvk_resize_options *opts) {
  const char *op = "resize";
  bool bad;
  tvk_tensor *err = bc_check(op, 1, &x, &bad);
  if (bad) return err;
  tvk_ctx *ctx = x->ctx;
  tvk_resize_options o = {0};
  if (opts) o = *opts;
  if (naxes < 0 || naxes > x->ndim || (naxes && (!axes || !sizes)))
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: %d axes for %d dims (axes and sizes must be given)", op, naxes,
                        x->ndim);
  if ((unsigned)o.mode > TVK_RESIZE_CUBIC || (unsigned)o.coord > TVK_RESIZE_TF_HALF_PIXEL_FOR_NN ||
      (unsigned)o.nearest > TVK_RESIZE_CEIL)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: mode %d, coord %d or nearest %d is not one of the enum's", op,
                        (int)o.mode, (int)o.coord, (int)o.nearest);
  if (!(x->dtype == TVK_FLOAT16 || x->dtype == TVK_BFLOAT16 || x->dtype == TVK_FLOAT32 ||
        x->dtype == TVK_FLOAT64) &&
      o.mode != TVK_RESIZE_NEAREST)
    return tensor_error(ctx, TVK_ERR_DTYPE, "%s: %s input: linear and cubic take floats", op,
                        tvk_dtype_name(x->dtype));
  bool seen[TVK_MAX_DIMS] = {false};
  int ax[TVK_MAX_DIMS];
  char sx[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, sx, sizeof sx);
  for (int i = 0; i < naxes; i++) {
    ax[i] = bc_axis(axes[i], x->ndim);
    if (ax[i] < 0 || seen[ax[i]])
      return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: axis %d of x %s is out of range or twice",
                          op, axes[i], sx);
    seen[ax[i]] = true;
    double sc = o.scales ? o.scales[i] : 0;
    if (sizes[i] < 1 || x->shape[ax[i]] < 1 || (o.scales && !(sc > 0 && isfinite(sc))))
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x %s: axis %d to size %lld (scale %g): sizes and scales must be "
                          "positive, and the axis not empty",
                          op, sx, ax[i], (long long)sizes[i], sc);
    if (x->shape[ax[i]] > (1 << 24) || sizes[i] > (1 << 24) ||
        x->shape[ax[i]] * sizes[i] > (int64_t)1 << 28)
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x %s: axis %d from %lld to %lld elements is more than tvk resizes "
                          "(its weights are an in x out matrix, at most 2^28)",
                          op, sx, ax[i], (long long)x->shape[ax[i]], (long long)sizes[i]);
  }
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *y = x;
  for (int i = 0; i < naxes && tvk_status_of(y) == TVK_OK; i++) {
    int64_t in = tvk_shape(y)[ax[i]], out = sizes[i];
    double scale = o.scales ? o.scales[i] : (double)out / (double)in;
    AxisPlan p = {0};
    if (!plan_axis(&o, in, out, scale, o.roi ? (double[]){o.roi[i], o.roi[naxes + i]} : NULL, &p)) {
      free_plan(&p);
      y = tensor_error(ctx, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
      break;
    }
    tvk_tensor *v =
        o.mode == TVK_RESIZE_NEAREST && !p.outside ? nearest_view(y, ax[i], in, out, p.pick) : NULL;
    if (v)
      y = v;
    else if (o.mode == TVK_RESIZE_NEAREST)
      y = apply_pick(y, ax[i], out, &p, o.extrapolation);
    else
      y = apply_matrix(y, ax[i], in, out, &p, o.extrapolation);
    free_plan(&p);
  }
  if (y == x) y = bc_same(x);
  tvk_scope_end(ctx, sc, 1, &y);
  return y;
}
