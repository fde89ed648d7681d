/* Neural-network ONNX ops: MatMul, Gemm, Conv, the pools, the norms,
 * Softmax, the reductions, ArgMax/ArgMin, CumSum, Dropout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

static const char *axis_text(int64_t a) {
  static _Thread_local char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)a);
  return buf;
}

/* ---- matrix products ---- */

static tvk_status op_matmul(onnx_run_ctx *c) {
  return onnx_set_out(c, 0, tvk_matmul(IN(0), IN(1)));
}

static tvk_status op_gemm(onnx_run_ctx *c) {
  tvk_tensor *a = IN(0), *b = IN(1);
  if (onnx_attr_int(c, "transA", 0)) a = tvk_transpose(a, 0, 1);
  if (onnx_attr_int(c, "transB", 0)) b = tvk_transpose(b, 0, 1);
  double alpha = onnx_attr_float(c, "alpha", 1.0), beta = onnx_attr_float(c, "beta", 1.0);
  tvk_tensor *y = tvk_matmul(a, b);
  if (alpha != 1.0) y = tvk_mul(y, onnx_scalar(c, tvk_dtype_of(y), alpha));
  if (onnx_has_in(c, 2)) {
    tvk_tensor *cc = IN(2);
    if (beta != 1.0) cc = tvk_mul(cc, onnx_scalar(c, tvk_dtype_of(cc), beta));
    y = tvk_add(y, cc);
  }
  return onnx_set_out(c, 0, y);
}

/* ---- windows: conv and pools share kernel, strides, pads, dilations ---- */

typedef struct {
  int nsp; /* spatial dims: 1, 2 or 3 */
  int64_t k[3], s[3], d[3];
  int64_t pad[3][2]; /* per spatial dim: {begin, end} */
} window;

/* Reads kernel_shape (or takes kshape), strides, dilations, pads and
 * auto_pad for a window over the last nsp dims of in_shape. */
static tvk_status read_window(onnx_run_ctx *c, int nsp, const int64_t *in_sp, const int64_t *kshape,
                              window *w) {
  memset(w, 0, sizeof *w);
  w->nsp = nsp;
  int64_t v[8];
  int n = onnx_attr_ints(c, "kernel_shape", v, 8);
  for (int i = 0; i < nsp; i++) w->k[i] = n == nsp ? v[i] : kshape ? kshape[i] : 0;
  if (n >= 0 && n != nsp)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "kernel_shape has %d values for %d spatial dims", n,
                          nsp);
  for (int i = 0; i < nsp; i++)
    if (w->k[i] <= 0) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "no kernel_shape");
  n = onnx_attr_ints(c, "strides", v, 8);
  if (n >= 0 && n != nsp)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "strides has %d values for %d spatial dims", n, nsp);
  for (int i = 0; i < nsp; i++) w->s[i] = n > 0 ? v[i] : 1;
  n = onnx_attr_ints(c, "dilations", v, 8);
  if (n >= 0 && n != nsp)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "dilations has %d values for %d spatial dims", n, nsp);
  for (int i = 0; i < nsp; i++) w->d[i] = n > 0 ? v[i] : 1;
  n = onnx_attr_ints(c, "pads", v, 8);
  if (n >= 0 && n != 2 * nsp)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "pads has %d values for %d spatial dims", n, nsp);
  for (int i = 0; i < nsp; i++) {
    w->pad[i][0] = n > 0 ? v[i] : 0;
    w->pad[i][1] = n > 0 ? v[i + nsp] : 0;
  }
  char buf[16];
  const char *ap = onnx_attr_string(c, "auto_pad", "NOTSET", buf, sizeof buf);
  if (!strcmp(ap, "VALID")) {
    memset(w->pad, 0, sizeof w->pad);
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (int i = 0; i < nsp; i++) {
      int64_t out = (in_sp[i] + w->s[i] - 1) / w->s[i];
      int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in_sp[i];
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      w->pad[i][0] = ap[5] == 'U' ? small : big;
      w->pad[i][1] = ap[5] == 'U' ? big : small;
    }
  } else if (strcmp(ap, "NOTSET")) {
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "auto_pad '%s'", ap);
  }
  for (int i = 0; i < nsp; i++)
    if (w->s[i] <= 0 || w->d[i] <= 0 || w->pad[i][0] < 0 || w->pad[i][1] < 0)
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "strides, dilations and pads must be positive");
  return TVK_OK;
}

/* (N, C, L) -> (N, C, 1, L) for the 1-D forms; 2-D stays. */
static tvk_tensor *to_2d(tvk_tensor *x, int nsp) {
  if (nsp == 2) return x;
  const int64_t *sh = tvk_shape(x);
  int64_t s[4] = {sh[0], sh[1], 1, sh[2]};
  return tvk_reshape(x, 4, s);
}

static tvk_tensor *from_2d(tvk_tensor *y, int nsp) {
  if (nsp == 2) return y;
  const int64_t *sh = tvk_shape(y);
  int64_t s[3] = {sh[0], sh[1], sh[3]};
  return tvk_reshape(y, 3, s);
}

static void window_2d(const window *w, int64_t k[2], int64_t s[2], int64_t d[2], int64_t pad[4]) {
  int o = w->nsp == 1; /* the 1-D window is the W of (1, L) */
  k[0] = o ? 1 : w->k[0], k[1] = w->k[1 - o];
  s[0] = o ? 1 : w->s[0], s[1] = w->s[1 - o];
  d[0] = o ? 1 : w->d[0], d[1] = w->d[1 - o];
  pad[0] = o ? 0 : w->pad[0][0], pad[1] = o ? 0 : w->pad[0][1];
  pad[2] = w->pad[1 - o][0], pad[3] = w->pad[1 - o][1];
}

static int spatial_dims(onnx_run_ctx *c, int input) {
  int nd = onnx_in_ndim(c, input);
  if (nd < 3 || nd > 5) {
    onnx_node_fail(c, TVK_ERR_SHAPE,
                   "%d dims: windows take (N, C, L), (N, C, H, W) or (N, C, D, H, W)", nd);
    return -1;
  }
  return nd - 2;
}

/* Out positions of a window along one spatial dim (padding included). */
static int64_t window_out(const window *w, int i, int64_t in) {
  int64_t span = in + w->pad[i][0] + w->pad[i][1] - w->d[i] * (w->k[i] - 1) - 1;
  return span < 0 ? 0 : span / w->s[i] + 1;
}

/* A pool through views, for what tvk's 2-D pools do not take (3-D windows,
 * dilation): the input padded (max: -inf, avg: 0), one strided view per
 * kernel offset, combined by maximum or sum; an average divides by the same
 * sum over ones padded with 1 (count_include_pad) or 0. extra: ceil_mode's
 * end padding, which never counts. */
static tvk_tensor *view_pool(onnx_run_ctx *c, tvk_tensor *x, const window *w, const int64_t *extra,
                             bool is_max, bool include) {
  int nd = tvk_ndim(x);
  tvk_dtype dt = tvk_dtype_of(x);
  int64_t pads[TVK_MAX_DIMS][2] = {{0}}, out[3];
  for (int i = 0; i < w->nsp; i++) {
    pads[2 + i][0] = w->pad[i][0];
    pads[2 + i][1] = w->pad[i][1] + extra[i];
  }
  /* max pads with the dtype's lowest value */
  double lowest = dt == TVK_INT8    ? -128.0
                  : dt == TVK_INT16 ? -32768.0
                  : dt == TVK_INT32 ? -2147483648.0
                  : dt == TVK_INT64 ? -9223372036854775808.0
                                    : 0;
  double fill = is_max ? (onnx_is_float(dt) ? -INFINITY : lowest) : 0;
  tvk_tensor *xp = tvk_pad(x, pads, fill), *ones = NULL;
  if (!is_max) {
    int64_t real[TVK_MAX_DIMS][2] = {{0}}, ext[TVK_MAX_DIMS][2] = {{0}};
    for (int i = 0; i < w->nsp; i++) {
      real[2 + i][0] = w->pad[i][0], real[2 + i][1] = w->pad[i][1];
      ext[2 + i][1] = extra[i];
    }
    ones = tvk_pad(tvk_pad(tvk_full(CTX, dt, nd, tvk_shape(x), 1), real, include ? 1 : 0), ext, 0);
  }
  window we = *w; /* ceil_mode's extra positions count as outputs */
  for (int i = 0; i < w->nsp; i++) {
    we.pad[i][1] += extra[i];
    out[i] = window_out(&we, i, tvk_shape(x)[2 + i]);
  }
  tvk_tensor *acc = NULL, *cnt = NULL;
  int64_t o[3] = {0, 0, 0}, taps = 1;
  for (int i = 0; i < w->nsp; i++) taps *= w->k[i];
  if (taps > 64) { /* one view per tap: past this many, a kernel would not fuse them */
    onnx_node_fail(c, TVK_ERR_SHAPE, "a 3-D or dilated pool window of %lld taps (at most 64)",
                   (long long)taps);
    return NULL;
  }
  for (;;) {
    tvk_tensor *v = xp, *u = ones;
    for (int i = 0; i < w->nsp; i++) {
      v = onnx_slice_axis(v, 2 + i, o[i] * w->d[i], w->s[i], out[i]);
      if (u) u = onnx_slice_axis(u, 2 + i, o[i] * w->d[i], w->s[i], out[i]);
    }
    acc = !acc ? v : is_max ? tvk_maximum(acc, v) : tvk_add(acc, v);
    if (u) cnt = cnt ? tvk_add(cnt, u) : u;
    int i = w->nsp - 1;
    while (i >= 0 && ++o[i] == w->k[i]) o[i--] = 0;
    if (i < 0) break;
  }
  return is_max ? acc : tvk_div(acc, cnt);
}

/* Conv over (N, C, D, H, W): the depth taps as kd 2-D convolutions of depth
 * slices (each (N Do, C, H, W) against w[:, :, a]), summed. */
static tvk_tensor *conv3d(tvk_tensor *x, tvk_tensor *wt, tvk_tensor *bias, const window *w,
                          int64_t groups) {
  const int64_t *xs = tvk_shape(x), *ws = tvk_shape(wt);
  int64_t N = xs[0], C = xs[1], Co = ws[0], Do = window_out(w, 0, xs[2]);
  int64_t dpad[TVK_MAX_DIMS][2] = {{0}};
  dpad[2][0] = w->pad[0][0], dpad[2][1] = w->pad[0][1];
  tvk_tensor *xp = tvk_pad(x, dpad, 0), *sum = NULL;
  int64_t st[2] = {w->s[1], w->s[2]}, dl[2] = {w->d[1], w->d[2]};
  int64_t pad[4] = {w->pad[1][0], w->pad[1][1], w->pad[2][0], w->pad[2][1]};
  for (int64_t a = 0; a < w->k[0]; a++) {
    tvk_tensor *v = onnx_slice_axis(xp, 2, a * w->d[0], w->s[0], Do); /* (N, C, Do, H, W) */
    v = tvk_permute(v, (int[]){0, 2, 1, 3, 4});
    v = tvk_reshape(v, 4, (int64_t[]){N * Do, C, xs[3], xs[4]});
    int64_t r[5][2] = {{0, Co}, {0, ws[1]}, {a, a + 1}, {0, ws[3]}, {0, ws[4]}};
    tvk_tensor *wa = tvk_reshape(tvk_shrink(wt, r), 4, (int64_t[]){Co, ws[1], ws[3], ws[4]});
    tvk_tensor *y = tvk_conv2d(v, wa, NULL, st, pad, dl, groups); /* (N Do, Co, Ho, Wo) */
    sum = sum ? tvk_add(sum, y) : y;
  }
  const int64_t *ys = tvk_shape(sum);
  tvk_tensor *y = tvk_reshape(sum, 5, (int64_t[]){N, Do, Co, ys[2], ys[3]});
  y = tvk_permute(y, (int[]){0, 2, 1, 3, 4});
  if (bias) y = tvk_add(y, tvk_reshape(bias, 4, (int64_t[]){Co, 1, 1, 1}));
  return y;
}

/* The node's convolution of x (shaped as input xi) by w (as input wi), with
 * its window attributes; NULL with the node failed. */
static tvk_tensor *conv_of(onnx_run_ctx *c, int xi, int wi, tvk_tensor *x, tvk_tensor *wt,
                           tvk_tensor *bias) {
  int nsp = spatial_dims(c, xi);
  if (nsp < 0) return NULL;
  if (onnx_in_ndim(c, wi) != nsp + 2) {
    onnx_node_fail(c, TVK_ERR_SHAPE, "weight has %d dims", onnx_in_ndim(c, wi));
    return NULL;
  }
  window w;
  if (read_window(c, nsp, onnx_in_shape(c, xi) + 2, onnx_in_shape(c, wi) + 2, &w) != TVK_OK)
    return NULL;
  int64_t groups = onnx_attr_int(c, "group", 1);
  if (nsp == 3) return conv3d(x, wt, bias, &w, groups);
  int64_t k[2], st[2], d[2], pad[4];
  window_2d(&w, k, st, d, pad);
  return from_2d(tvk_conv2d(to_2d(x, nsp), to_2d(wt, nsp), bias, st, pad, d, groups), nsp);
}

static tvk_status op_conv(onnx_run_ctx *c) {
  tvk_tensor *y = conv_of(c, 0, 1, IN(0), IN(1), onnx_has_in(c, 2) ? IN(2) : NULL);
  return y ? onnx_set_out(c, 0, y) : TVK_ERR_SHAPE;
}

/* x - zero point in int32; a 1-D zero point of w is per output channel. */
static tvk_tensor *int_centred(onnx_run_ctx *c, int in, int zp, bool per_channel) {
  tvk_tensor *x = tvk_cast(IN(in), TVK_INT32);
  if (!onnx_has_in(c, zp)) return x;
  tvk_tensor *z = tvk_cast(IN(zp), TVK_INT32);
  int nd = tvk_ndim(x);
  if (per_channel && tvk_ndim(z) == 1 && tvk_shape(z)[0] > 1) {
    int64_t shape[TVK_MAX_DIMS];
    shape[0] = tvk_shape(z)[0];
    for (int i = 1; i < nd; i++) shape[i] = 1;
    z = tvk_reshape(z, nd, shape);
  }
  return tvk_sub(x, z);
}

static tvk_status op_conv_integer(onnx_run_ctx *c) {
  tvk_tensor *y = conv_of(c, 0, 1, int_centred(c, 0, 2, false), int_centred(c, 1, 3, true), NULL);
  return y ? onnx_set_out(c, 0, tvk_cast(y, TVK_INT32)) : TVK_ERR_SHAPE;
}

/* QLinearConv: the integer convolution (+ the int32 bias), scaled once by
 * x_scale w_scale / y_scale (w_scale per output channel or one), rounded,
 * shifted by y's zero point and saturated to its type. */
static tvk_status op_qlinear_conv(onnx_run_ctx *c) {
  tvk_tensor *acc = conv_of(c, 0, 3, int_centred(c, 0, 2, false), int_centred(c, 3, 5, true),
                            onnx_has_in(c, 8) ? tvk_cast(IN(8), TVK_INT32) : NULL);
  if (!acc) return TVK_ERR_SHAPE;
  int nd = tvk_ndim(acc);
  tvk_tensor *ws = IN(4);
  if (tvk_ndim(ws) == 1 && tvk_shape(ws)[0] > 1) {
    int64_t shape[TVK_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) shape[i] = i == 0 ? tvk_shape(ws)[0] : 1;
    ws = tvk_reshape(ws, nd - 1, shape); /* (Cout, 1, ...) against (N, Cout, ...) */
  }
  tvk_tensor *scale = tvk_cast(tvk_div(tvk_mul(IN(1), ws), IN(6)), TVK_FLOAT32);
  tvk_dtype zdt = onnx_in_dtype(c, 7);
  double lo = zdt == TVK_INT8 ? -128 : 0, hi = zdt == TVK_INT8 ? 127 : 255;
  tvk_tensor *v =
      tvk_add(tvk_round(tvk_mul(tvk_cast(acc, TVK_FLOAT32), scale)), tvk_cast(IN(7), TVK_FLOAT32));
  v = tvk_minimum(tvk_maximum(v, onnx_scalar(c, TVK_FLOAT32, lo)), onnx_scalar(c, TVK_FLOAT32, hi));
  return onnx_set_out(c, 0, tvk_cast(v, zdt));
}

/* 3-D ConvTranspose as tvk_conv_transpose2d is built: x with stride - 1
 * zeros between its elements in each spatial dim (movement ops), its border
 * padded by d (k - 1) - pad (cut where negative, output_padding added at the
 * end), then a stride-1 3-D conv (conv3d) with the kernel flipped and its
 * channel dims swapped per group. */
static tvk_tensor *conv_transpose3d(onnx_run_ctx *c, tvk_tensor *x, tvk_tensor *wt,
                                    tvk_tensor *bias, const window *w, const int64_t *outpad,
                                    int64_t G) {
  int64_t xs[5], ws[5];
  memcpy(xs, tvk_shape(x), sizeof xs), memcpy(ws, tvk_shape(wt), sizeof ws);
  if (G < 1 || xs[1] % G || ws[0] != xs[1]) {
    onnx_node_fail(c, TVK_ERR_SHAPE, "groups %lld for %lld channels and a weight of %lld",
                   (long long)G, (long long)xs[1], (long long)ws[0]);
    return NULL;
  }
  for (int i = 0; i < 3; i++) { /* zeros between the elements of dim 2 + i */
    int64_t len = tvk_shape(x)[2 + i], s = w->s[i], sh[6], r[5][2];
    int nd = 0;
    for (int q = 0; q < 5; q++) {
      sh[nd++] = tvk_shape(x)[q];
      if (q == 2 + i) sh[nd++] = 1;
    }
    x = tvk_reshape(x, 6, sh);
    int64_t gaps[6][2] = {{0}};
    gaps[3 + i][1] = s - 1;
    x = tvk_pad(x, gaps, 0);
    int64_t back[5];
    for (int q = 0; q < 5; q++)
      back[q] = q == 2 + i ? len * s : tvk_shape(x)[q < 3 + i ? q : q + 1];
    x = tvk_reshape(x, 5, back);
    for (int q = 0; q < 5; q++) r[q][0] = 0, r[q][1] = tvk_shape(x)[q];
    r[2 + i][1] = (len - 1) * s + 1;
    x = tvk_shrink(x, r);
  }
  int64_t grow[5][2] = {{0}}, cut[5][2];
  for (int q = 0; q < 5; q++) cut[q][0] = 0, cut[q][1] = tvk_shape(x)[q];
  for (int i = 0; i < 3; i++) {
    int64_t lo = w->d[i] * (w->k[i] - 1) - w->pad[i][0];
    int64_t hi = w->d[i] * (w->k[i] - 1) - w->pad[i][1] + outpad[i];
    grow[2 + i][0] = lo > 0 ? lo : 0, grow[2 + i][1] = hi > 0 ? hi : 0;
    cut[2 + i][0] = lo < 0 ? -lo : 0;
    cut[2 + i][1] -= hi < 0 ? -hi : 0;
  }
  x = tvk_pad(tvk_shrink(x, cut), grow, 0);
  int64_t Cg = xs[1] / G, Og = ws[1];
  tvk_tensor *wf = tvk_reshape(wt, 6, (int64_t[]){G, Cg, Og, ws[2], ws[3], ws[4]});
  wf = tvk_permute(wf, (int[]){0, 2, 1, 3, 4, 5});
  wf = tvk_reshape(wf, 5, (int64_t[]){G * Og, Cg, ws[2], ws[3], ws[4]});
  wf = tvk_flip(wf, 3, (int[]){2, 3, 4});
  window unit = *w;
  for (int i = 0; i < 3; i++) unit.s[i] = 1, unit.pad[i][0] = unit.pad[i][1] = 0;
  return conv3d(x, wf, bias, &unit, G);
}

static tvk_status op_conv_transpose(onnx_run_ctx *c) {
  int nsp = spatial_dims(c, 0);
  if (nsp < 0) return TVK_ERR_SHAPE;
  if (onnx_in_ndim(c, 1) != nsp + 2)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "weight has %d dims", onnx_in_ndim(c, 1));
  const int64_t *sp = onnx_in_shape(c, 0) + 2;
  char buf[16];
  const char *ap = onnx_attr_string(c, "auto_pad", "NOTSET", buf, sizeof buf);
  bool same = !strncmp(ap, "SAME", 4);
  window w;
  /* read_window would pad SAME as a conv; the transpose pads from the output */
  tvk_status s = read_window(c, nsp, sp, onnx_in_shape(c, 1) + 2, &w);
  if (s != TVK_OK) return s;
  int64_t outpad[3] = {0, 0, 0}, want[TVK_MAX_DIMS];
  int n = onnx_attr_ints(c, "output_padding", want, TVK_MAX_DIMS);
  if (n >= 0 && n != nsp)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "output_padding has %d values", n);
  for (int i = 0; i < n; i++) outpad[i] = want[i];
  n = onnx_attr_ints(c, "output_shape", want, TVK_MAX_DIMS);
  if (n >= 0 || same) {
    if (n >= 0 && n < nsp) return onnx_node_fail(c, TVK_ERR_SHAPE, "output_shape has %d values", n);
    for (int i = 0; i < nsp; i++) {
      int64_t o = n >= 0 ? want[n - nsp + i] : sp[i] * w.s[i];
      int64_t total = w.s[i] * (sp[i] - 1) + outpad[i] + (w.k[i] - 1) * w.d[i] + 1 - o;
      if (total < 0) { /* the output is longer: more rows at the end */
        outpad[i] -= total;
        total = 0;
      }
      bool upper = !strcmp(ap, "SAME_UPPER");
      w.pad[i][0] = upper ? total / 2 : total - total / 2;
      w.pad[i][1] = upper ? total - total / 2 : total / 2;
    }
  }
  if (nsp == 3) {
    tvk_tensor *y = conv_transpose3d(c, IN(0), IN(1), onnx_has_in(c, 2) ? IN(2) : NULL, &w, outpad,
                                     onnx_attr_int(c, "group", 1));
    return y ? onnx_set_out(c, 0, y) : TVK_ERR_SHAPE;
  }
  int64_t k[2], st[2], d[2], pad[4], op2[2] = {nsp == 2 ? outpad[0] : 0, outpad[nsp - 1]};
  window_2d(&w, k, st, d, pad);
  tvk_tensor *y =
      tvk_conv_transpose2d(to_2d(IN(0), nsp), to_2d(IN(1), nsp), onnx_has_in(c, 2) ? IN(2) : NULL,
                           st, pad, op2, d, onnx_attr_int(c, "group", 1));
  return onnx_set_out(c, 0, from_2d(y, nsp));
}

/* Extra end padding so that ceil_mode's last window fits; a window must
 * start inside the input or its begin padding (as the reference). */
static void ceil_extra(const window *w, const int64_t *in_sp, int64_t extra[3]) {
  for (int i = 0; i < w->nsp; i++) {
    int64_t span = in_sp[i] + w->pad[i][0] + w->pad[i][1] - ((w->k[i] - 1) * w->d[i] + 1);
    int64_t out = span < 0 ? 0 : (span + w->s[i] - 1) / w->s[i] + 1;
    if ((out - 1) * w->s[i] >= in_sp[i] + w->pad[i][0]) out--;
    int64_t need = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1;
    int64_t have = in_sp[i] + w->pad[i][0] + w->pad[i][1];
    extra[i] = need > have ? need - have : 0;
  }
}

/* A pool's window over input 0 and ceil_mode's extra end padding. */
static tvk_status pool_window(onnx_run_ctx *c, int *nsp, window *w, int64_t extra[3]) {
  *nsp = spatial_dims(c, 0);
  if (*nsp < 0) return TVK_ERR_SHAPE;
  const int64_t *sp = onnx_in_shape(c, 0) + 2;
  tvk_status s = read_window(c, *nsp, sp, NULL, w);
  if (s != TVK_OK) return s;
  extra[0] = extra[1] = extra[2] = 0;
  if (onnx_attr_int(c, "ceil_mode", 0)) ceil_extra(w, sp, extra);
  return TVK_OK;
}

/* MaxPool's Indices: per window the flat position (row-major over N, C,
 * H, W; column-major over H, W with storage_order 1) of its first maximum.
 * One strided view per tap, as view_pool, keeping the value and position of
 * the best so far; padding is -inf and never wins. */
static tvk_status max_pool_indices(onnx_run_ctx *c, const window *w, const int64_t *extra) {
  tvk_tensor *x = IN(0);
  int nd = tvk_ndim(x);
  if (nd != 4)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "the Indices output takes (N, C, H, W) input");
  const int64_t *xs = tvk_shape(x);
  int64_t pads[TVK_MAX_DIMS][2] = {{0}}, out[2];
  window we = *w;
  for (int i = 0; i < 2; i++) {
    pads[2 + i][0] = w->pad[i][0];
    pads[2 + i][1] = w->pad[i][1] + extra[i];
    we.pad[i][1] += extra[i];
    out[i] = window_out(&we, i, xs[2 + i]);
  }
  tvk_tensor *xp = tvk_pad(x, pads, onnx_is_float(tvk_dtype_of(x)) ? -INFINITY : 0);
  bool col_major = onnx_attr_int(c, "storage_order", 0) != 0;
  /* flat position of (n, c) and, per tap, of the window's element */
  tvk_tensor *nc = tvk_reshape(tvk_arange(CTX, TVK_INT64, 0, (double)(xs[0] * xs[1]), 1), 4,
                               (int64_t[]){xs[0], xs[1], 1, 1});
  nc = tvk_mul(nc, onnx_scalar(c, TVK_INT64, (double)(xs[2] * xs[3])));
  tvk_tensor *best = NULL, *at = NULL;
  for (int64_t a = 0; a < w->k[0]; a++)
    for (int64_t b = 0; b < w->k[1]; b++) {
      tvk_tensor *v = onnx_slice_axis(xp, 2, a * w->d[0], w->s[0], out[0]);
      v = onnx_slice_axis(v, 3, b * w->d[1], w->s[1], out[1]);
      double r0 = (double)(a * w->d[0] - w->pad[0][0]), c0 = (double)(b * w->d[1] - w->pad[1][0]);
      tvk_tensor *rows = tvk_reshape(
          tvk_arange(CTX, TVK_INT64, r0, r0 + (double)(out[0] * w->s[0]), (double)w->s[0]), 4,
          (int64_t[]){1, 1, out[0], 1});
      tvk_tensor *cols = tvk_reshape(
          tvk_arange(CTX, TVK_INT64, c0, c0 + (double)(out[1] * w->s[1]), (double)w->s[1]), 4,
          (int64_t[]){1, 1, 1, out[1]});
      tvk_tensor *pos =
          col_major ? tvk_add(tvk_mul(cols, onnx_scalar(c, TVK_INT64, (double)xs[2])), rows)
                    : tvk_add(tvk_mul(rows, onnx_scalar(c, TVK_INT64, (double)xs[3])), cols);
      pos = tvk_add(nc, pos);
      if (!best) {
        best = v, at = pos;
        continue;
      }
      tvk_tensor *better = tvk_gt(v, best);
      best = tvk_where(better, v, best);
      at = tvk_where(better, pos, at);
    }
  tvk_status s = onnx_set_out(c, 0, best);
  if (s == TVK_OK) s = onnx_set_out(c, 1, tvk_expand(at, 4, tvk_shape(best)));
  return s;
}

static tvk_status op_max_pool(onnx_run_ctx *c) {
  int nsp;
  window w;
  int64_t extra[3];
  tvk_status s = pool_window(c, &nsp, &w, extra);
  if (s != TVK_OK) return s;
  if (c->node->nout > 1 && c->node->out[1] >= 0) return max_pool_indices(c, &w, extra);
  if (onnx_attr_int(c, "storage_order", 0))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                          "storage_order applies to the Indices output only");
  if (nsp == 3) {
    tvk_tensor *y = view_pool(c, IN(0), &w, extra, true, false);
    return y ? onnx_set_out(c, 0, y) : TVK_ERR_SHAPE;
  }
  for (int i = 0; i < nsp; i++) w.pad[i][1] += extra[i];
  int64_t k[2], st[2], d[2], pad[4];
  window_2d(&w, k, st, d, pad);
  tvk_tensor *x = to_2d(IN(0), nsp);
  return onnx_set_out(c, 0, from_2d(tvk_max_pool2d_dilated(x, k, st, pad, d), nsp));
}

static tvk_status op_average_pool(onnx_run_ctx *c) {
  int nsp;
  window w;
  int64_t extra[3];
  tvk_status s = pool_window(c, &nsp, &w, extra);
  if (s != TVK_OK) return s;
  bool dilated = false;
  for (int i = 0; i < nsp; i++) dilated = dilated || w.d[i] != 1;
  if (nsp == 3 || dilated) {
    tvk_tensor *y =
        view_pool(c, IN(0), &w, extra, false, onnx_attr_int(c, "count_include_pad", 0) != 0);
    return y ? onnx_set_out(c, 0, y) : TVK_ERR_SHAPE;
  }
  bool include = onnx_attr_int(c, "count_include_pad", 0) != 0;
  int64_t k[2], st[2], d[2], pad[4];
  window_2d(&w, k, st, d, pad);
  tvk_tensor *x = to_2d(IN(0), nsp);
  bool padded = pad[0] || pad[1] || pad[2] || pad[3] || extra[0] || extra[1];
  if (!padded) return onnx_set_out(c, 0, from_2d(tvk_avg_pool2d(x, k, st, NULL), nsp));
  /* sum over the window / the elements counted: the input's, plus the pads'
   * when count_include_pad (ceil_mode's extra never counts) */
  int64_t p4[TVK_MAX_DIMS][2] = {{0}}, e4[TVK_MAX_DIMS][2] = {{0}};
  p4[2][0] = pad[0], p4[2][1] = pad[1], p4[3][0] = pad[2], p4[3][1] = pad[3];
  e4[2][1] = nsp == 2 ? extra[0] : 0, e4[3][1] = nsp == 2 ? extra[1] : extra[0];
  tvk_tensor *xs = tvk_pad(tvk_pad(x, p4, 0), e4, 0);
  tvk_tensor *ones = tvk_full(CTX, tvk_dtype_of(x), 4, tvk_shape(x), 1);
  tvk_tensor *cnt = tvk_pad(tvk_pad(ones, p4, include ? 1 : 0), e4, 0);
  tvk_tensor *y = tvk_div(tvk_avg_pool2d(xs, k, st, NULL), tvk_avg_pool2d(cnt, k, st, NULL));
  return onnx_set_out(c, 0, from_2d(y, nsp));
}

static tvk_status global_pool(onnx_run_ctx *c,
                              tvk_tensor *(*f)(tvk_tensor *, int, const int *, bool)) {
  int nd = onnx_in_ndim(c, 0);
  if (nd < 3) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (N, C, spatial...)", nd);
  int axes[TVK_MAX_DIMS];
  for (int i = 2; i < nd; i++) axes[i - 2] = i;
  return onnx_set_out(c, 0, f(IN(0), nd - 2, axes, true));
}
static tvk_status op_global_average_pool(onnx_run_ctx *c) { return global_pool(c, tvk_mean); }
static tvk_status op_global_max_pool(onnx_run_ctx *c) { return global_pool(c, tvk_max); }

/* ---- norms ---- */

static tvk_status op_batch_norm(onnx_run_ctx *c) {
  double eps = onnx_attr_float(c, "epsilon", 1e-5);
  tvk_tensor *x = IN(0);
  if (!onnx_attr_int(c, "training_mode", 0)) {
    if (c->node->nout > 1 && (c->node->out[1] >= 0 || (c->node->nout > 2 && c->node->out[2] >= 0)))
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "inference mode has one output");
    tvk_tensor *y = tvk_batchnorm(x, IN(1), IN(2), IN(3), IN(4), eps);
    return onnx_set_out(c, 0, tvk_cast(y, tvk_dtype_of(x)));
  }
  /* training mode: the batch's statistics (over every axis but 1, the
   * variance a population one), and the running ones moved toward them:
   * running = running * momentum + batch * (1 - momentum), ONNX's way round */
  int nd = tvk_ndim(x), axes[TVK_MAX_DIMS], na = 0;
  if (nd < 2) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (N, C, ...)", nd);
  for (int i = 0; i < nd; i++)
    if (i != 1) axes[na++] = i;
  double mom = onnx_attr_float(c, "momentum", 0.9);
  tvk_tensor *mean = tvk_mean(x, na, axes, false), *var = tvk_var(x, na, axes, false, 0);
  int64_t cs[TVK_MAX_DIMS];
  cs[0] = tvk_shape(x)[1];
  for (int i = 1; i < nd - 1; i++) cs[i] = 1;
  tvk_tensor *m = tvk_reshape(mean, nd - 1, cs), *v = tvk_reshape(var, nd - 1, cs);
  tvk_tensor *y = tvk_mul(tvk_sub(x, m), tvk_rsqrt(tvk_add(v, onnx_fconst(c, x, eps))));
  y = tvk_add(tvk_mul(y, tvk_reshape(IN(1), nd - 1, cs)), tvk_reshape(IN(2), nd - 1, cs));
  tvk_tensor *keep = onnx_fconst(c, x, mom), *take = onnx_fconst(c, x, 1 - mom);
  tvk_status s = onnx_set_out(c, 0, tvk_cast(y, tvk_dtype_of(x)));
  if (s == TVK_OK && c->node->nout > 1)
    s = onnx_set_out(c, 1, tvk_add(tvk_mul(IN(3), keep), tvk_mul(mean, take)));
  if (s == TVK_OK && c->node->nout > 2)
    s = onnx_set_out(c, 2, tvk_add(tvk_mul(IN(4), keep), tvk_mul(var, take)));
  return s;
}

static tvk_status op_instance_norm(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  tvk_tensor *y = tvk_instance_norm(x, IN(1), IN(2), onnx_attr_float(c, "epsilon", 1e-5));
  return onnx_set_out(c, 0, tvk_cast(y, tvk_dtype_of(x)));
}

static tvk_status op_layer_norm(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", -1), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims",
                          axis_text(onnx_attr_int(c, "axis", -1)), nd);
  double eps = onnx_attr_float(c, "epsilon", 1e-5);
  tvk_tensor *x = IN(0);
  if (c->node->nout == 1)
    return onnx_set_out(c, 0,
                        tvk_layernorm(x, nd - axis, IN(1), onnx_has_in(c, 2) ? IN(2) : NULL, eps));
  int axes[TVK_MAX_DIMS];
  for (int i = axis; i < nd; i++) axes[i - axis] = i;
  tvk_tensor *mean = tvk_mean(x, nd - axis, axes, true);
  tvk_tensor *inv =
      tvk_rsqrt(tvk_add(tvk_var(x, nd - axis, axes, true, 0), onnx_fconst(c, x, eps)));
  tvk_tensor *y = tvk_mul(tvk_mul(tvk_sub(x, mean), inv), IN(1));
  if (onnx_has_in(c, 2)) y = tvk_add(y, IN(2));
  tvk_status s = onnx_set_out(c, 0, y);
  if (s == TVK_OK) s = onnx_set_out(c, 1, mean);
  if (s == TVK_OK && c->node->nout > 2) s = onnx_set_out(c, 2, inv);
  return s;
}

/* Local response normalisation across channels: x / (bias + alpha / size *
 * the sum of x^2 over the size channels around) ^ beta. The window sum is an
 * average pool over the channel axis of (N, 1, C, rest). */
static tvk_status op_lrn(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  if (nd < 3) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d dims (N, C, spatial...)", nd);
  int64_t size = onnx_attr_int(c, "size", 0);
  if (size <= 0) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "size %lld", (long long)size);
  double alpha = onnx_attr_float(c, "alpha", 1e-4), beta = onnx_attr_float(c, "beta", 0.75);
  double bias = onnx_attr_float(c, "bias", 1.0);
  tvk_tensor *x = IN(0);
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t rest = 1;
  for (int i = 2; i < nd; i++) rest *= sh[i];
  int64_t s4[4] = {sh[0], 1, sh[1], rest};
  int64_t k[2] = {size, 1}, st[2] = {1, 1}, pad[4] = {(size - 1) / 2, size / 2, 0, 0};
  tvk_tensor *sum = tvk_avg_pool2d(tvk_reshape(tvk_mul(x, x), 4, s4), k, st, pad);
  sum = tvk_reshape(sum, nd, sh);
  tvk_tensor *den =
      tvk_add(onnx_fconst(c, x, bias), tvk_mul(sum, onnx_fconst(c, x, alpha))); /* mean * size */
  return onnx_set_out(c, 0, tvk_div(x, tvk_pow(den, onnx_fconst(c, x, beta))));
}

/* ---- Resize, Upsample ---- */

static bool pick_string(const char *s, const char *const *names, int n, int *out) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return *out = i, true;
  return false;
}

/* Resize (opset 10+) and Upsample: the output sizes from scales or sizes, the
 * modes from the attributes, then tvk_resize over the axes that change. */
static tvk_status resize(onnx_run_ctx *c, bool upsample) {
  int nd = onnx_in_ndim(c, 0);
  const int64_t *sh = onnx_in_shape(c, 0);
  char mbuf[32], cbuf[32], nbuf[32];
  const char *mode = onnx_attr_string(c, "mode", "nearest", mbuf, sizeof mbuf);
  bool legacy = upsample || c->node->opset < 11; /* Upsample's conventions */
  const char *coord = onnx_attr_string(c, "coordinate_transformation_mode",
                                       legacy ? "asymmetric" : "half_pixel", cbuf, sizeof cbuf);
  const char *near = onnx_attr_string(c, "nearest_mode", legacy ? "floor" : "round_prefer_floor",
                                      nbuf, sizeof nbuf);
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const coords[] = {"half_pixel",           "align_corners",
                                       "asymmetric",           "pytorch_half_pixel",
                                       "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const char *const nears[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int mi, ci, ni;
  if (!strcmp(mode, "bilinear")) mode = "linear"; /* Upsample-7's name */
  if (!pick_string(mode, modes, 3, &mi) || !pick_string(coord, coords, 6, &ci) ||
      !pick_string(near, nears, 4, &ni))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                          "mode '%s', coordinate_transformation_mode '%s' or nearest_mode '%s' is "
                          "not supported",
                          mode, coord, near);
  double scales[TVK_MAX_DIMS];
  int64_t sizes[TVK_MAX_DIMS];
  bool have_scales = false;
  const onnx_host *sc = NULL, *sz = NULL;
  int scales_in = upsample || c->node->opset < 11 ? 1 : 2;
  if (upsample && c->node->opset < 9) {
    float f[TVK_MAX_DIMS];
    int n = onnx_attr_floats(c, "scales", f, TVK_MAX_DIMS);
    if (n != nd) return onnx_node_fail(c, TVK_ERR_SHAPE, "%d scales for %d dims", n, nd);
    for (int i = 0; i < nd; i++) scales[i] = f[i];
    have_scales = true;
  } else {
    if (onnx_has_in(c, scales_in) && !(sc = onnx_in_host(c, scales_in))) return TVK_ERR_INVALID_ARG;
    if (!upsample && onnx_has_in(c, 3) && !(sz = onnx_in_host(c, 3))) return TVK_ERR_INVALID_ARG;
    if (sc && sc->numel > 0) {
      if (sc->numel != nd)
        return onnx_node_fail(c, TVK_ERR_SHAPE, "%lld scales for %d dims", (long long)sc->numel,
                              nd);
      for (int i = 0; i < nd; i++) scales[i] = onnx_host_get(sc, i);
      have_scales = true;
    } else if (sz && sz->numel > 0) {
      if (sz->numel != nd)
        return onnx_node_fail(c, TVK_ERR_SHAPE, "%lld sizes for %d dims", (long long)sz->numel, nd);
      for (int i = 0; i < nd; i++) sizes[i] = onnx_host_get_int(sz, i);
    } else {
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "neither scales nor sizes is given");
    }
  }
  if (have_scales)
    for (int i = 0; i < nd; i++) {
      if (!(scales[i] > 0))
        return onnx_node_fail(c, TVK_ERR_SHAPE, "scale %g on dim %d", scales[i], i);
      sizes[i] = (int64_t)floor((double)sh[i] * scales[i]);
    }
  bool crop = ci == 5;
  double roi[2 * TVK_MAX_DIMS];
  if (crop) {
    const onnx_host *r = onnx_has_in(c, 1) ? onnx_in_host(c, 1) : NULL;
    if (!r || r->numel != 2 * nd)
      return onnx_node_fail(c, TVK_ERR_SHAPE, "tf_crop_and_resize needs a roi of %d values",
                            2 * nd);
  }
  int axes[TVK_MAX_DIMS], na = 0;
  int64_t asz[TVK_MAX_DIMS];
  double asc[TVK_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    if (!crop && sizes[i] == sh[i] && (!have_scales || scales[i] == 1)) continue;
    axes[na] = i;
    asz[na] = sizes[i];
    asc[na++] = have_scales ? scales[i] : (double)sizes[i] / (double)sh[i];
  }
  if (crop) {
    const onnx_host *r = onnx_in_host(c, 1);
    for (int k = 0; k < na; k++) {
      roi[k] = onnx_host_get(r, axes[k]);
      roi[na + k] = onnx_host_get(r, nd + axes[k]);
    }
  }
  tvk_resize_options o = {
      .mode = (tvk_resize_mode)mi,
      .coord = (tvk_resize_coord)(crop ? 0 : ci),
      .nearest = (tvk_resize_nearest)ni,
      .cubic_a = onnx_attr_float(c, "cubic_coeff_a", -0.75),
      .exclude_outside = onnx_attr_int(c, "exclude_outside", 0) != 0,
      .scales = asc,
      .roi = crop ? roi : NULL,
      .extrapolation = onnx_attr_float(c, "extrapolation_value", 0),
  };
  return onnx_set_out(c, 0, tvk_resize(IN(0), na, axes, asz, &o));
}
static tvk_status op_resize(onnx_run_ctx *c) { return resize(c, false); }
static tvk_status op_upsample(onnx_run_ctx *c) { return resize(c, true); }

/* MeanVarianceNormalization: (x - mean) / sqrt(var + 1e-9) over axes
 * (default N, H, W), as ONNX's function body writes it. */
static tvk_status op_mvn(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int64_t ax[TVK_MAX_DIMS] = {0, 2, 3};
  int na = onnx_attr_ints(c, "axes", ax, TVK_MAX_DIMS);
  if (na < 0) na = 3;
  int axes[TVK_MAX_DIMS];
  for (int i = 0; i < na; i++)
    if ((axes[i] = onnx_axis(ax[i], nd)) < 0)
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims", axis_text(ax[i]), nd);
  tvk_tensor *x = IN(0);
  tvk_tensor *d = tvk_sub(x, tvk_mean(x, na, axes, true));
  tvk_tensor *v = tvk_mean(tvk_mul(d, d), na, axes, true);
  return onnx_set_out(c, 0, tvk_div(d, tvk_sqrt(tvk_add(v, onnx_fconst(c, x, 1e-9)))));
}

/* ---- softmax ---- */

static tvk_status softmax(onnx_run_ctx *c, tvk_tensor *(*f)(tvk_tensor *, int)) {
  int nd = onnx_in_ndim(c, 0);
  int64_t dflt = c->node->opset < 13 ? 1 : -1;
  int axis = onnx_axis(onnx_attr_int(c, "axis", dflt), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims",
                          axis_text(onnx_attr_int(c, "axis", dflt)), nd);
  tvk_tensor *x = IN(0);
  if (c->node->opset >= 13) return onnx_set_out(c, 0, f(x, axis));
  /* before opset 13: over the input flattened to 2-D at axis */
  const int64_t *sh = onnx_in_shape(c, 0);
  int64_t rows = 1, cols = 1;
  for (int i = 0; i < nd; i++) *(i < axis ? &rows : &cols) *= sh[i];
  int64_t s2[2] = {rows, cols};
  return onnx_set_out(c, 0, tvk_reshape(f(tvk_reshape(x, 2, s2), 1), nd, sh));
}
static tvk_status op_softmax(onnx_run_ctx *c) { return softmax(c, tvk_softmax); }
static tvk_status op_log_softmax(onnx_run_ctx *c) { return softmax(c, tvk_log_softmax); }

/* ---- reductions ---- */

typedef enum {
  R_SUM,
  R_MEAN,
  R_MAX,
  R_MIN,
  R_PROD,
  R_L1,
  R_L2,
  R_LOGSUM,
  R_LOGSUMEXP,
  R_SUMSQUARE
} reduce_kind;

static tvk_status reduce(onnx_run_ctx *c, reduce_kind k) {
  int nd = onnx_in_ndim(c, 0);
  bool keep = onnx_attr_int(c, "keepdims", 1) != 0;
  int64_t ax[TVK_MAX_DIMS];
  int na;
  /* axes became an input: ReduceSum in opset 13, the others in 18 */
  int from = k == R_SUM ? 13 : 18;
  if (c->node->opset < from) {
    na = onnx_attr_ints(c, "axes", ax, TVK_MAX_DIMS);
  } else if (onnx_has_in(c, 1)) {
    if ((na = onnx_in_ints(c, 1, ax, TVK_MAX_DIMS, "axes")) < 0) return TVK_ERR_SHAPE;
  } else {
    na = -1;
  }
  tvk_tensor *x = IN(0);
  tvk_dtype dt = tvk_dtype_of(x);
  if (na <= 0 && onnx_attr_int(c, "noop_with_empty_axes", 0)) return onnx_set_out(c, 0, x);
  int axes[TVK_MAX_DIMS];
  bool seen[TVK_MAX_DIMS] = {false};
  for (int i = 0; i < na; i++) {
    axes[i] = onnx_axis(ax[i], nd);
    if (axes[i] < 0 || seen[axes[i]])
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims", axis_text(ax[i]), nd);
    seen[axes[i]] = true;
  }
  if (na < 0) na = 0; /* every axis */
  tvk_tensor *y;
  switch (k) {
  case R_SUM: y = tvk_sum(x, na, axes, keep); break;
  case R_MEAN: y = tvk_mean(x, na, axes, keep); break;
  case R_MAX: y = tvk_max(x, na, axes, keep); break;
  case R_MIN: y = tvk_min(x, na, axes, keep); break;
  case R_PROD: y = tvk_prod(x, na, axes, keep); break;
  case R_L1: y = tvk_sum(tvk_abs(x), na, axes, keep); break;
  case R_L2: y = tvk_sqrt(tvk_sum(tvk_mul(x, x), na, axes, keep)); break;
  case R_SUMSQUARE: y = tvk_sum(tvk_mul(x, x), na, axes, keep); break;
  case R_LOGSUM: y = tvk_log(tvk_sum(x, na, axes, keep)); break;
  case R_LOGSUMEXP: {
    tvk_tensor *m = tvk_max(x, na, axes, true);
    /* an all -inf row keeps -inf rather than nan */
    m = tvk_where(tvk_eq(m, onnx_fconst(c, x, -INFINITY)), onnx_fconst(c, x, 0), m);
    y = tvk_add(tvk_log(tvk_sum(tvk_exp(tvk_sub(x, m)), na, axes, true)), m);
    if (!keep) y = tvk_squeeze(y, na ? na : 0, na ? axes : NULL);
    if (!keep && !na) {
      int64_t none[1];
      y = tvk_reshape(y, 0, none);
    }
    break;
  }
  }
  return onnx_set_out(c, 0, tvk_cast(y, dt));
}
static tvk_status op_reduce_sum(onnx_run_ctx *c) { return reduce(c, R_SUM); }
static tvk_status op_reduce_mean(onnx_run_ctx *c) { return reduce(c, R_MEAN); }
static tvk_status op_reduce_max(onnx_run_ctx *c) { return reduce(c, R_MAX); }
static tvk_status op_reduce_min(onnx_run_ctx *c) { return reduce(c, R_MIN); }
static tvk_status op_reduce_prod(onnx_run_ctx *c) { return reduce(c, R_PROD); }
static tvk_status op_reduce_l1(onnx_run_ctx *c) { return reduce(c, R_L1); }
static tvk_status op_reduce_l2(onnx_run_ctx *c) { return reduce(c, R_L2); }
static tvk_status op_reduce_log_sum(onnx_run_ctx *c) { return reduce(c, R_LOGSUM); }
static tvk_status op_reduce_log_sum_exp(onnx_run_ctx *c) { return reduce(c, R_LOGSUMEXP); }
static tvk_status op_reduce_sum_square(onnx_run_ctx *c) { return reduce(c, R_SUMSQUARE); }

static tvk_status arg(onnx_run_ctx *c, tvk_tensor *(*f)(tvk_tensor *, int, bool)) {
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", 0), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims",
                          axis_text(onnx_attr_int(c, "axis", 0)), nd);
  bool keep = onnx_attr_int(c, "keepdims", 1) != 0;
  tvk_tensor *x = IN(0);
  if (!onnx_attr_int(c, "select_last_index", 0))
    return onnx_set_out(c, 0, tvk_cast(f(x, axis, keep), TVK_INT64));
  /* the last of equal extremes: the first in the flipped axis, counted back */
  tvk_tensor *i = tvk_cast(f(tvk_flip(x, 1, &axis), axis, keep), TVK_INT64);
  tvk_tensor *last = onnx_scalar(c, TVK_INT64, (double)(onnx_in_shape(c, 0)[axis] - 1));
  return onnx_set_out(c, 0, tvk_sub(last, i));
}
static tvk_status op_topk(onnx_run_ctx *c) {
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(onnx_attr_int(c, "axis", -1), nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims",
                          axis_text(onnx_attr_int(c, "axis", -1)), nd);
  int64_t k = onnx_attr_int(c, "k", -1);
  if (c->node->opset >= 10 && !onnx_in_int(c, 1, k, &k)) return TVK_ERR_SHAPE;
  tvk_tensor *idx;
  tvk_tensor *v = tvk_topk(IN(0), k, axis, onnx_attr_int(c, "largest", 1) != 0, &idx);
  tvk_status s = onnx_set_out(c, 0, v);
  if (s == TVK_OK)
    s = onnx_set_out(c, 1, idx);
  else
    tvk_release(idx);
  return s;
}

static tvk_status op_argmax(onnx_run_ctx *c) { return arg(c, tvk_argmax); }
static tvk_status op_argmin(onnx_run_ctx *c) { return arg(c, tvk_argmin); }

static tvk_status op_cumsum(onnx_run_ctx *c) {
  int64_t a;
  if (!onnx_in_int(c, 1, 0, &a)) return TVK_ERR_SHAPE;
  int nd = onnx_in_ndim(c, 0);
  int axis = onnx_axis(a, nd);
  if (axis < 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "axis %s for %d dims", axis_text(a), nd);
  tvk_tensor *x = IN(0);
  tvk_dtype dt = tvk_dtype_of(x);
  bool rev = onnx_attr_int(c, "reverse", 0) != 0;
  if (rev) x = tvk_flip(x, 1, &axis);
  tvk_tensor *y = tvk_cumsum(x, axis);
  if (onnx_attr_int(c, "exclusive", 0)) y = tvk_sub(y, x);
  if (rev) y = tvk_flip(y, 1, &axis);
  return onnx_set_out(c, 0, tvk_cast(y, dt));
}

/* Dropout: the identity in inference; in training only with ratio 0 (a
 * random mask could not match anyone's bits). The mask output is all true. */
static tvk_status op_dropout(onnx_run_ctx *c) {
  bool training = false;
  double ratio = onnx_attr_float(c, "ratio", 0.5);
  if (onnx_has_in(c, 2)) {
    const onnx_host *t = onnx_in_host(c, 2);
    if (!t) return TVK_ERR_INVALID_ARG;
    training = t->numel && onnx_host_get(t, 0) != 0;
  }
  if (onnx_has_in(c, 1)) {
    const onnx_host *r = onnx_in_host(c, 1);
    if (!r) return TVK_ERR_INVALID_ARG;
    if (r->numel) ratio = onnx_host_get(r, 0);
  }
  if (c->node->opset < 7 && onnx_attr_int(c, "is_test", 0) == 0) training = true;
  if (training && ratio != 0)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                          "training mode with ratio %g: random masks are not supported", ratio);
  tvk_tensor *x = IN(0);
  tvk_status s = onnx_set_out(c, 0, x);
  if (s == TVK_OK && c->node->nout > 1)
    s = onnx_set_out(c, 1, tvk_full(CTX, TVK_BOOL, tvk_ndim(x), tvk_shape(x), 1));
  return s;
}

const onnx_op onnx_ops_nn[] = {
    {"ArgMax", "axis,keepdims,select_last_index", 1, 1, 1, 1, op_argmax},
    {"ArgMin", "axis,keepdims,select_last_index", 1, 1, 1, 1, op_argmin},
    {"AveragePool", "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides", 1,
     1, 1, 1, op_average_pool},
    {"BatchNormalization", "epsilon,momentum,training_mode,spatial,is_test,consumed_inputs", 5, 5,
     1, 3, op_batch_norm},
    {"Conv", "auto_pad,dilations,group,kernel_shape,pads,strides", 2, 3, 1, 1, op_conv},
    {"ConvInteger", "auto_pad,dilations,group,kernel_shape,pads,strides", 2, 4, 1, 1,
     op_conv_integer},
    {"ConvTranspose",
     "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides", 2, 3, 1, 1,
     op_conv_transpose},
    {"CumSum", "exclusive,reverse", 2, 2, 1, 1, op_cumsum},
    {"Dropout", "ratio,seed,is_test", 1, 3, 1, 2, op_dropout},
    {"Gemm", "alpha,beta,broadcast,transA,transB", 2, 3, 1, 1, op_gemm},
    {"GlobalAveragePool", "", 1, 1, 1, 1, op_global_average_pool},
    {"GlobalMaxPool", "", 1, 1, 1, 1, op_global_max_pool},
    {"InstanceNormalization", "epsilon", 3, 3, 1, 1, op_instance_norm},
    {"LayerNormalization", "axis,epsilon,stash_type", 2, 3, 1, 3, op_layer_norm},
    {"LogSoftmax", "axis", 1, 1, 1, 1, op_log_softmax},
    {"LRN", "alpha,beta,bias,size", 1, 1, 1, 1, op_lrn},
    {"MatMul", "", 2, 2, 1, 1, op_matmul},
    {"MeanVarianceNormalization", "axes", 1, 1, 1, 1, op_mvn},
    {"MaxPool", "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides", 1, 1, 1, 2,
     op_max_pool},
    {"ReduceL1", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_l1},
    {"ReduceL2", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_l2},
    {"ReduceLogSum", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_log_sum},
    {"ReduceLogSumExp", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_log_sum_exp},
    {"ReduceMax", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_max},
    {"ReduceMean", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_mean},
    {"ReduceMin", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_min},
    {"ReduceProd", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_prod},
    {"ReduceSum", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_sum},
    {"ReduceSumSquare", "axes,keepdims,noop_with_empty_axes", 1, 2, 1, 1, op_reduce_sum_square},
    {"QLinearConv", "auto_pad,dilations,group,kernel_shape,pads,strides", 8, 9, 1, 1,
     op_qlinear_conv},
    {"Resize",
     "coordinate_transformation_mode,cubic_coeff_a,exclude_outside,extrapolation_value,mode,"
     "nearest_mode",
     1, 4, 1, 1, op_resize},
    {"Softmax", "axis", 1, 1, 1, 1, op_softmax},
    {"TopK", "axis,k,largest,sorted", 1, 2, 2, 2, op_topk},
    {"Upsample", "mode,scales", 1, 2, 1, 1, op_upsample},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
