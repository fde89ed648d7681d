/* Convolution and pooling (tvk.h "neural-network ops"): tvk_conv2d,
 * tvk_conv_transpose2d, tvk_max_pool2d, tvk_avg_pool2d. All three see their input through one
 * windowed view, (..., H, W) -> (..., Ho, Wo, kh, kw), made of movement ops
 * only (pad, shrink, reshape, expand, permute), so the windows cost no memory
 * and a convolution is one multiply-and-reduce kernel reading x and w
 * directly. docs/ops_linalg.md derives the index arithmetic. */
#include <math.h>
#include <stdio.h>

#include "frontend/ops_common.h"

/* ---------------------------------------------------------------- windows */

/* How window_axis makes (o, k) windows of a dim of size i (stride s, dilation
 * d): the sizes it passes through, so check_window can refuse what would not
 * fit before anything is built. */
typedef enum {
  WIN_ONE,   /* o == 1: the k elements t[j*d], a strided slice */
  WIN_SPLIT, /* d == 1, k <= s: windows do not overlap; cut or pad to o*s, reshape (o, s) */
  WIN_TILE,  /* otherwise: the dim repeated R times and read as (k, L) rows */
} WinPath;

typedef struct {
  WinPath path;
  int64_t o;   /* windows: (i - d*(k-1) - 1) / s + 1 >= 1 */
  int64_t len; /* the longest the dim gets on the way (k*d, o*s or R*i) */
  int64_t L, R;
} WinPlan;

/* The plan for a dim, or false when a size on the way does not fit in int64
 * (the caller has checked that the window fits in i: d*(k-1) < i). */
static bool win_plan(int64_t i, int64_t k, int64_t s, int64_t d, WinPlan *p) {
  p->o = (i - d * (k - 1) - 1) / s + 1;
  if (p->o == 1) {
    p->path = WIN_ONE;
    if (__builtin_mul_overflow(k, d, &p->len)) return false;
    if (p->len < i) p->len = i;
    return true;
  }
  /* o >= 2 means s <= i - d*(k-1) - 1 < i, so o*s < 2*i (which may still pass
   * int64 when i is near 2^62) */
  int64_t os;
  if (__builtin_mul_overflow(p->o, s, &os)) return false;
  if (d == 1 && k <= s) {
    p->path = WIN_SPLIT;
    p->len = os > i ? os : i;
    return true;
  }
  p->path = WIN_TILE;
  int64_t t = os - d, m = t / i + (t % i != 0); /* rows of L >= o*s: ceil((o*s - d) / i) */
  if (m < 1) m = 1;
  int64_t ki;
  if (__builtin_mul_overflow(m, i, &p->L) || __builtin_add_overflow(p->L, d, &p->L) ||
      __builtin_mul_overflow(k, p->L, &ki) || __builtin_add_overflow(ki, i - 1, &ki))
    return false;
  p->R = ki / i;
  return !__builtin_mul_overflow(p->R, i, &p->len);
}

/* Replaces dim `ax` (size i) of t by two dims (o, k):
 *   out[..., p, j, ...] = t[..., p*s + j*d, ...],  o = (i - d*(k-1) - 1) / s + 1 >= 1.
 * One window (o == 1): the elements j*d, j < k, are a strided slice: cut or
 * pad the dim to k*d, reshape to (k, d) and keep column 0. When d == 1 and
 * k <= s the windows do not overlap: cut t to o*s elements, reshape to (o, s)
 * and keep the first k of each row. Otherwise the dim is tiled: repeated R
 * times (an expand of a new dim, then a reshape) and read as rows of length
 * L = d + m*i; element (j, b) of that (k, L) matrix is t[(j*L + b) mod i] =
 * t[(b + j*d) mod i] = t[b + j*d] for the b + j*d < i we keep. Rows are then
 * cut to o*s, reshaped to (o, s) and the first of each s kept: (k, o) holding
 * t[p*s + j*d]; a permute makes it (o, k). */
static tvk_tensor *window_axis(tvk_tensor *t, int ax, int64_t k, int64_t s, int64_t d) {
  int nd = tvk_ndim(t);
  int64_t sh[TVK_MAX_DIMS];
  for (int q = 0; q < nd; q++) sh[q] = tvk_shape(t)[q];
  int64_t i = sh[ax];
  WinPlan p;
  if (!win_plan(i, k, s, d, &p)) /* check_window refused such sizes */
    return tensor_error(t->ctx, TVK_ERR_INTERNAL, "windows: sizes overflow");
  int64_t o = p.o, v[TVK_MAX_DIMS], rg[TVK_MAX_DIMS][2];
  int post = nd - ax - 1; /* dims after ax */
  /* v[] = sh with dim ax replaced by the n given sizes */
#define SET_V(n, ...)                                                                              \
  do {                                                                                             \
    const int64_t mid_[] = {__VA_ARGS__};                                                          \
    for (int q = 0; q < ax; q++) v[q] = sh[q];                                                     \
    for (int q = 0; q < (n); q++) v[ax + q] = mid_[q];                                             \
    for (int q = 0; q < post; q++) v[ax + (n) + q] = sh[ax + 1 + q];                               \
  } while (0)
  /* rg[] = the full range of every dim of a tensor of shape v with nd2 dims */
#define FULL_RANGES(nd2)                                                                           \
  for (int q = 0; q < (nd2); q++) rg[q][0] = 0, rg[q][1] = v[q]
  /* the dim cut or padded (the pad is never read) to n elements */
#define CUT_OR_PAD(n)                                                                              \
  do {                                                                                             \
    SET_V(1, i);                                                                                   \
    if ((n) > i) {                                                                                 \
      int64_t pads[TVK_MAX_DIMS][2] = {{0}};                                                       \
      pads[ax][1] = (n)-i;                                                                         \
      t = tvk_pad(t, pads, 0);                                                                     \
    } else if ((n) < i) {                                                                          \
      FULL_RANGES(nd);                                                                             \
      rg[ax][1] = (n);                                                                             \
      t = tvk_shrink(t, rg);                                                                       \
    }                                                                                              \
  } while (0)

  if (p.path == WIN_ONE) {
    CUT_OR_PAD(k * d);
    SET_V(2, k, d);
    t = tvk_reshape(t, nd + 1, v);
    FULL_RANGES(nd + 1);
    rg[ax + 1][1] = 1;
    t = tvk_shrink(t, rg);
    SET_V(2, 1, k);
    return tvk_reshape(t, nd + 1, v); /* (..., 1, k, ...) */
  }
  if (p.path == WIN_SPLIT) {
    CUT_OR_PAD(o * s);
    SET_V(2, o, s);
    t = tvk_reshape(t, nd + 1, v);
    FULL_RANGES(nd + 1);
    rg[ax + 1][1] = k;
    return tvk_shrink(t, rg); /* (..., o, k, ...) */
  }

  int64_t L = p.L, R = p.R;
  SET_V(2, 1, i);
  t = tvk_reshape(t, nd + 1, v);
  SET_V(2, R, i);
  t = tvk_expand(t, nd + 1, v);
  SET_V(1, R * i);
  t = tvk_reshape(t, nd, v);
  FULL_RANGES(nd);
  rg[ax][1] = k * L;
  t = tvk_shrink(t, rg);
  SET_V(2, k, L);
  t = tvk_reshape(t, nd + 1, v);
  FULL_RANGES(nd + 1);
  rg[ax + 1][1] = o * s;
  t = tvk_shrink(t, rg);
  SET_V(3, k, o, s);
  t = tvk_reshape(t, nd + 2, v);
  FULL_RANGES(nd + 2);
  rg[ax + 2][1] = 1;
  t = tvk_shrink(t, rg);
  SET_V(2, k, o);
  t = tvk_reshape(t, nd + 1, v);
  int order[TVK_MAX_DIMS];
  for (int q = 0; q < nd + 1; q++) order[q] = q;
  order[ax] = ax + 1, order[ax + 1] = ax;
  return tvk_permute(t, order); /* (..., o, k, ...) */
#undef SET_V
#undef FULL_RANGES
#undef CUT_OR_PAD
}

/* The windows of x (..., H, W) padded with zeros by pad {top, bottom, left,
 * right}: (..., Ho, Wo, kh, kw), element [p, q, a, b] = xpad[p*sh + a*dh,
 * q*sw + b*dw]. The caller has checked that Ho, Wo >= 1. */
static tvk_tensor *windows(tvk_tensor *x, const int64_t k[2], const int64_t s[2],
                           const int64_t pad[4], const int64_t dil[2]) {
  int nd = tvk_ndim(x);
  if (pad[0] || pad[1] || pad[2] || pad[3]) {
    int64_t pads[TVK_MAX_DIMS][2] = {{0}};
    pads[nd - 2][0] = pad[0], pads[nd - 2][1] = pad[1];
    pads[nd - 1][0] = pad[2], pads[nd - 1][1] = pad[3];
    x = tvk_pad(x, pads, 0);
  }
  x = window_axis(x, nd - 1, k[1], s[1], dil[1]); /* (..., H, Wo, kw) */
  x = window_axis(x, nd - 2, k[0], s[0], dil[0]); /* (..., Ho, kh, Wo, kw) */
  int order[TVK_MAX_DIMS];
  for (int q = 0; q < nd + 2; q++) order[q] = q;
  order[nd - 1] = nd, order[nd] = nd - 1;
  return tvk_permute(x, order);
}

/* a * b, or -1 when it does not fit in int64 (the most elements a tensor has). */
static int64_t mul_fit(int64_t a, int64_t b) {
  int64_t r;
  return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? -1 : r;
}

/* Checks the window arguments shared by conv and pools, with every size
 * computed without overflow, and reports what does not fit as `op` with the
 * argument's values: the ops the windows are built from never see a bad
 * size. `per_window` multiplies the windows' element count for what the
 * caller expands them to (conv: Cout / groups). NULL or an error tensor. */
static tvk_tensor *check_window(const char *op, tvk_tensor *x, const int64_t k[2],
                                const int64_t s[2], const int64_t pad[4], const int64_t dil[2],
                                int64_t per_window) {
  tvk_ctx *ctx = x->ctx;
  for (int q = 0; q < 2; q++) {
    if (k[q] < 1)
      return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: kernel size (%lld, %lld) must be >= 1", op,
                          (long long)k[0], (long long)k[1]);
    if (s[q] < 1)
      return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: stride (%lld, %lld) must be >= 1", op,
                          (long long)s[0], (long long)s[1]);
    if (dil[q] < 1)
      return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: dilation (%lld, %lld) must be >= 1", op,
                          (long long)dil[0], (long long)dil[1]);
  }
  for (int q = 0; q < 4; q++)
    if (pad[q] < 0)
      return tensor_error(
          ctx, TVK_ERR_INVALID_ARG, "%s: padding (%lld, %lld, %lld, %lld) must be >= 0", op,
          (long long)pad[0], (long long)pad[1], (long long)pad[2], (long long)pad[3]);
  int nd = x->ndim;
  char sx[BC_SHAPE_STR_MAX];
  bc_shape_str(nd, x->shape, sx, sizeof sx);
  int64_t lead = bc_numel(nd - 2, x->shape), in[2], out[2];
  WinPlan plan[2];
  for (int q = 0; q < 2; q++) {
    int64_t i = x->shape[nd - 2 + q];
    if (__builtin_add_overflow(i, pad[2 * q], &in[q]) ||
        __builtin_add_overflow(in[q], pad[2 * q + 1], &in[q]))
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x has shape %s: padding (%lld, %lld, %lld, %lld) makes dim %d "
                          "larger than 2^63",
                          op, sx, (long long)pad[0], (long long)pad[1], (long long)pad[2],
                          (long long)pad[3], nd - 2 + q);
  }
  for (int q = 0; q < 2; q++) {
    int64_t span; /* d*(k-1): the window reaches span + 1 elements */
    if (__builtin_mul_overflow(dil[q], k[q] - 1, &span) || span >= in[q])
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x has shape %s: the kernel (%lld, %lld) with dilation (%lld, %lld) "
                          "spans more than the padded input (%lld, %lld)",
                          op, sx, (long long)k[0], (long long)k[1], (long long)dil[0],
                          (long long)dil[1], (long long)in[0], (long long)in[1]);
    if (!win_plan(in[q], k[q], s[q], dil[q], &plan[q])) plan[q].len = -1; /* too many */
    out[q] = plan[q].o;
  }
  /* What the windows pass through, in order: the padded input, dim W made
   * windows (its longest form), then dim H; and the windows themselves,
   * times what the caller expands them by. */
  int64_t sizes[] = {
      mul_fit(mul_fit(lead, in[0]), in[1]),
      plan[1].len < 0 ? -1 : mul_fit(mul_fit(lead, in[0]), plan[1].len),
      plan[0].len < 0 ? -1 : mul_fit(mul_fit(mul_fit(lead, plan[0].len), out[1]), k[1]),
      mul_fit(mul_fit(mul_fit(mul_fit(mul_fit(lead, out[0]), out[1]), k[0]), k[1]), per_window),
  };
  for (size_t q = 0; q < sizeof sizes / sizeof *sizes; q++)
    if (sizes[q] < 0)
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x has shape %s: with kernel (%lld, %lld), stride (%lld, %lld), "
                          "padding (%lld, %lld, %lld, %lld) and dilation (%lld, %lld) the %s "
                          "has more than 2^63 elements",
                          op, sx, (long long)k[0], (long long)k[1], (long long)s[0],
                          (long long)s[1], (long long)pad[0], (long long)pad[1], (long long)pad[2],
                          (long long)pad[3], (long long)dil[0], (long long)dil[1],
                          q == 0 ? "padded input" : "window view");
  return NULL;
}

/* The operand checks conv2d and conv_transpose2d share: x, w (and bias)
 * usable tensors of one context, x (N, Cin, H, W) and w 4-D, as w_layout
 * says. true when they hold; else false and *err is the tensor to return
 * (NULL as bc_check's). */
static bool conv_operands(const char *op, tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias,
                          const char *w_layout, tvk_tensor **err) {
  bool bad;
  *err = bc_check(op, 2, (tvk_tensor *[]){x, w}, &bad);
  if (bad) return false;
  if (bias && (*err = bc_check(op, 3, (tvk_tensor *[]){x, w, bias}, &bad))) return false;
  char s[BC_SHAPE_STR_MAX];
  if (x->ndim != 4)
    *err = tensor_error(x->ctx, TVK_ERR_SHAPE, "%s: x has shape %s: expected 4 dims (N, Cin, H, W)",
                        op, bc_shape_str(x->ndim, x->shape, s, sizeof s));
  else if (w->ndim != 4)
    *err = tensor_error(x->ctx, TVK_ERR_SHAPE, "%s: w has shape %s: expected 4 dims %s", op,
                        bc_shape_str(w->ndim, w->shape, s, sizeof s), w_layout);
  return *err == NULL;
}

/* ---------------------------------------------------------------- conv2d */

/* On a CPU whose kernels use 64-byte vectors (AVX-512; built for AVX2 the
 * same convolutions ran as fast packed or not), the float32 weight (Cout,
 * Cg, kh, kw) of a convolution over many positions is copied into panels of MM_PANEL output
 * channels (each group's Og a multiple of it) where an output channel's weights lie under 4 KiB
 * apart: the register tile's output channels at one (c, i, j) are then
 * neighbours, read by FMAs with a broadcast from memory, where gcc read
 * each with a full vector load and a register broadcast (as for matmul's A,
 * ops_matmul.c). Medians of 15 (Zen 5, 2 threads), 3x3 over 32 x 32, 8
 * images, 64 outputs: 16 / 32 / 64 inputs 2.29 / 4.60 / 9.2-9.4 ms plain,
 * 1.85 / 3.69 / 7.5 packed; 1x1 over 32 x 32 from 64, 0.82-1.02 -> 0.59-0.60;
 * 1x1 over 16 x 16, 256 to 256, 2.9-3.9 -> 2.2; 3x3 from 128 (4.5 KiB apart)
 * unchanged, so not packed. The copy is the weight's size, read once for
 * every one of the N * Ho * Wo positions: at least 256 of them. */
static tvk_tensor *packed_weight(tvk_tensor *w, int64_t Og, int64_t positions) {
  const Device *dev = front_device(w);
  if (dev->codegen_mode == CG_MODE_GRID || dev->limits.vector_bytes < 64 || front_on_devices(w) ||
      Og % MM_PANEL || positions < 256)
    return w;
  for (int d = 0; d < 4; d++)
    if (sint_is_sym(w->shape[d])) return w;
  int64_t Cout = w->shape[0], row = w->shape[1] * w->shape[2] * w->shape[3];
  if (w->dtype != TVK_FLOAT32 || row * 4 >= 4096) return w;
  tvk_tensor *p = mm_row_panels(tvk_reshape(w, 2, (int64_t[]){Cout, row}));
  return tvk_reshape(p, 4, w->shape);
}

tvk_tensor *tvk_conv2d(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias, const int64_t stride[2],
                       const int64_t padding[4], const int64_t dilation[2], int64_t groups) {
  const char *op = "conv2d";
  tvk_tensor *err;
  if (!conv_operands(op, x, w, bias, "(Cout, Cin / groups, kh, kw)", &err)) return err;
  tvk_ctx *ctx = x->ctx;
  char sx[BC_SHAPE_STR_MAX], sw[BC_SHAPE_STR_MAX], sb[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, sx, sizeof sx);
  bc_shape_str(w->ndim, w->shape, sw, sizeof sw);
  int64_t N = x->shape[0], Cin = x->shape[1], Cout = w->shape[0], Cg = w->shape[1];
  if (groups < 1 || Cin % groups || Cout % groups)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: groups %lld must be >= 1 and divide Cin %lld and Cout %lld", op,
                        (long long)groups, (long long)Cin, (long long)Cout);
  if (Cg * groups != Cin)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s and w %s: w's dim 1 must be Cin / groups = %lld", op,
                        sx, sw, (long long)(Cin / groups));
  if (bias && !(bias->ndim == 1 && bias->shape[0] == Cout))
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: bias has shape %s: expected (%lld,)", op,
                        bc_shape_str(bias->ndim, bias->shape, sb, sizeof sb), (long long)Cout);
  const int64_t one[2] = {1, 1}, zero[4] = {0, 0, 0, 0};
  const int64_t *st = stride ? stride : one, *pd = padding ? padding : zero,
                *dl = dilation ? dilation : one, k[2] = {w->shape[2], w->shape[3]};
  if ((err = check_window(op, x, k, st, pd, dl, Cout / groups))) return err;

  ScalarType res = bc_promote(2, (tvk_tensor *[]){x, w});
  tvk_dtype rt = dt_to_tvk(res), ct = dt_to_tvk(dt_acc(res));
  size_t sc = tvk_scope_begin(ctx);
  int64_t G = groups, Og = Cout / G;
  tvk_tensor *xw = windows(x, k, st, pd, dl); /* (N, Cin, Ho, Wo, kh, kw) */
  int64_t Ho = tvk_shape(xw)[2], Wo = tvk_shape(xw)[3];
  /* x: (N, G, Cg, Ho, Wo, kh, kw) -> (N, G, 1, Ho, Wo, Cg, kh, kw) -> expand Og */
  xw = tvk_reshape(xw, 7, (int64_t[]){N, G, Cg, Ho, Wo, k[0], k[1]});
  xw = tvk_permute(xw, (int[]){0, 1, 3, 4, 2, 5, 6});
  xw = tvk_reshape(xw, 8, (int64_t[]){N, G, 1, Ho, Wo, Cg, k[0], k[1]});
  const int64_t full[8] = {N, G, Og, Ho, Wo, Cg, k[0], k[1]};
  xw = tvk_expand(xw, 8, full);
  w = packed_weight(w, Og, N * Ho * Wo);
  /* w: (Cout, Cg, kh, kw) -> (1, G, Og, 1, 1, Cg, kh, kw) -> expand */
  tvk_tensor *ww = tvk_reshape(w, 8, (int64_t[]){1, G, Og, 1, 1, Cg, k[0], k[1]});
  ww = tvk_expand(ww, 8, full);
  if (tvk_dtype_of(xw) != ct) xw = tvk_cast(xw, ct);
  if (tvk_dtype_of(ww) != ct) ww = tvk_cast(ww, ct);
  tvk_tensor *r = tvk_sum(tvk_mul(xw, ww), 3, (int[]){5, 6, 7}, false); /* (N, G, Og, Ho, Wo) */
  if (tvk_dtype_of(r) != rt) r = tvk_cast(r, rt);
  r = tvk_reshape(r, 4, (int64_t[]){N, Cout, Ho, Wo});
  if (bias) r = tvk_add(r, tvk_reshape(bias, 3, (int64_t[]){Cout, 1, 1}));
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- conv_transpose2d */

/* The transpose of conv2d as a conv2d: x with stride - 1 zeros between its
 * elements (a reshape to (.., H, 1, W, 1), a pad to (.., H, sh, W, sw), a
 * reshape back and a shrink: movement ops only), padded by dilation * (k - 1)
 * minus the padding, convolved with stride 1 by the kernel flipped in both
 * spatial dims and with its channel dims swapped per group. */
tvk_tensor *tvk_conv_transpose2d(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias,
                                 const int64_t stride[2], const int64_t padding[4],
                                 const int64_t output_padding[2], const int64_t dilation[2],
                                 int64_t groups) {
  const char *op = "conv_transpose2d";
  tvk_tensor *err;
  if (!conv_operands(op, x, w, bias, "(Cin, Cout / groups, kh, kw)", &err)) return err;
  tvk_ctx *ctx = x->ctx;
  char sx[BC_SHAPE_STR_MAX], sw[BC_SHAPE_STR_MAX], sb[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, sx, sizeof sx);
  bc_shape_str(w->ndim, w->shape, sw, sizeof sw);
  int64_t N = x->shape[0], Cin = x->shape[1], Og = w->shape[1], G = groups;
  if (w->shape[0] != Cin)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s and w %s: w's dim 0 must be Cin %lld", op, sx, sw,
                        (long long)Cin);
  if (G < 1 || Cin % G)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: groups %lld must be >= 1 and divide Cin %lld", op, (long long)G,
                        (long long)Cin);
  int64_t Cout = Og * G, Cg = Cin / G;
  if (bias && !(bias->ndim == 1 && bias->shape[0] == Cout))
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: bias has shape %s: expected (%lld,)", op,
                        bc_shape_str(bias->ndim, bias->shape, sb, sizeof sb), (long long)Cout);
  const int64_t one[2] = {1, 1}, zero[4] = {0, 0, 0, 0};
  const int64_t *st = stride ? stride : one, *pd = padding ? padding : zero,
                *op2 = output_padding ? output_padding : zero, *dl = dilation ? dilation : one;
  int64_t k[2] = {w->shape[2], w->shape[3]}, out[2], lo[2], hi[2];
  for (int q = 0; q < 2; q++) {
    if (st[q] < 1 || dl[q] < 1 || pd[2 * q] < 0 || pd[2 * q + 1] < 0 || op2[q] < 0 ||
        (op2[q] >= st[q] && op2[q] >= dl[q]))
      return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                          "%s: stride (%lld, %lld) and dilation (%lld, %lld) must be >= 1, "
                          "padding (%lld, %lld, %lld, %lld) >= 0, output_padding (%lld, %lld) >= 0 "
                          "and below the stride or the dilation",
                          op, (long long)st[0], (long long)st[1], (long long)dl[0],
                          (long long)dl[1], (long long)pd[0], (long long)pd[1], (long long)pd[2],
                          (long long)pd[3], (long long)op2[0], (long long)op2[1]);
    int64_t i = x->shape[2 + q];
    if (i > INT64_MAX / 4 / st[q] || k[q] > INT64_MAX / 4 / dl[q])
      return tensor_error(ctx, TVK_ERR_SHAPE, "%s: x has shape %s: the output is too large", op,
                          sx);
    out[q] = (i - 1) * st[q] - pd[2 * q] - pd[2 * q + 1] + dl[q] * (k[q] - 1) + op2[q] + 1;
    lo[q] = dl[q] * (k[q] - 1) - pd[2 * q]; /* < 0: cut */
    hi[q] = dl[q] * (k[q] - 1) - pd[2 * q + 1] + op2[q];
    if (i < 1 || out[q] < 1)
      return tensor_error(ctx, TVK_ERR_SHAPE,
                          "%s: x has shape %s, w %s: with this padding the output has dim %lld", op,
                          sx, sw, (long long)out[q]);
  }
  size_t sc = tvk_scope_begin(ctx);
  int64_t H = x->shape[2], W = x->shape[3];
  /* zeros between the elements */
  tvk_tensor *xd = tvk_reshape(x, 6, (int64_t[]){N, Cin, H, 1, W, 1});
  int64_t gaps[6][2] = {{0, 0}, {0, 0}, {0, 0}, {0, st[0] - 1}, {0, 0}, {0, st[1] - 1}};
  xd = tvk_pad(xd, gaps, 0);
  xd = tvk_reshape(xd, 4, (int64_t[]){N, Cin, H * st[0], W * st[1]});
  int64_t keep[4][2] = {{0, N}, {0, Cin}, {0, (H - 1) * st[0] + 1}, {0, (W - 1) * st[1] + 1}};
  xd = tvk_shrink(xd, keep);
  /* the border: pad where positive, cut where negative */
  int64_t grow[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, cut[4][2];
  for (int q = 0; q < 2; q++) {
    int64_t len = tvk_shape(xd)[2 + q];
    grow[2 + q][0] = lo[q] > 0 ? lo[q] : 0;
    grow[2 + q][1] = hi[q] > 0 ? hi[q] : 0;
    cut[2 + q][0] = lo[q] < 0 ? -lo[q] : 0;
    cut[2 + q][1] = len - (hi[q] < 0 ? -hi[q] : 0);
  }
  cut[0][0] = 0, cut[0][1] = N, cut[1][0] = 0, cut[1][1] = Cin;
  xd = tvk_pad(tvk_shrink(xd, cut), grow, 0);
  /* w (Cin, Og, kh, kw) = (G, Cg, Og, ..) -> (G, Og, Cg, ..) -> (Cout, Cg, kh, kw), flipped */
  tvk_tensor *wt = tvk_reshape(w, 5, (int64_t[]){G, Cg, Og, k[0], k[1]});
  wt = tvk_permute(wt, (int[]){0, 2, 1, 3, 4});
  wt = tvk_flip(tvk_reshape(wt, 4, (int64_t[]){Cout, Cg, k[0], k[1]}), 2, (int[]){2, 3});
  tvk_tensor *r = tvk_conv2d(xd, wt, bias, NULL, NULL, dl, G);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- pools */

/* Checks a pool's arguments and flattens x's leading dims: x (..., H, W) is
 * seen as (B, H, W) so the windows never run out of dims. */
static tvk_tensor *pool_args(const char *op, tvk_tensor *x, const int64_t kernel[2],
                             const int64_t stride[2], const int64_t padding[4],
                             const int64_t dilation[2], const int64_t **st, const int64_t **pd) {
  static const int64_t zero[4] = {0, 0, 0, 0}, one[2] = {1, 1};
  const int64_t *dl = dilation ? dilation : one;
  /* Set before any check, so the outputs are defined on every return (the
   * callers read them only when there is no error, which gcc cannot prove). */
  *st = stride ? stride : kernel;
  *pd = padding ? padding : zero;
  bool bad;
  tvk_tensor *err = bc_check(op, 1, &x, &bad);
  if (bad) return err;
  if (!kernel) return tensor_error(x->ctx, TVK_ERR_INVALID_ARG, "%s: kernel is NULL", op);
  if (x->ndim < 2) {
    char sx[BC_SHAPE_STR_MAX];
    return tensor_error(x->ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s: expected at least 2 dims (..., H, W)", op,
                        bc_shape_str(x->ndim, x->shape, sx, sizeof sx));
  }
  return check_window(op, x, kernel, *st, *pd, dl, 1);
}

/* The windows of x (..., H, W) as (B, Ho, Wo, kh, kw); out[] gets the
 * result's shape (..., Ho, Wo). */
static tvk_tensor *pool_windows(tvk_tensor *x, const int64_t kernel[2], const int64_t st[2],
                                const int64_t pd[4], const int64_t dl[2], int64_t *out) {
  int nd = x->ndim;
  int64_t B = 1;
  for (int q = 0; q < nd - 2; q++) B *= x->shape[q], out[q] = x->shape[q];
  tvk_tensor *x3 = tvk_reshape(x, 3, (int64_t[]){B, x->shape[nd - 2], x->shape[nd - 1]});
  tvk_tensor *xw = windows(x3, kernel, st, pd, dl);
  out[nd - 2] = tvk_shape(xw)[1], out[nd - 1] = tvk_shape(xw)[2];
  return xw;
}

/* The smallest value of a dtype: what a max pool pads with. */
static double lowest(tvk_dtype dt) {
  DType d = dt_make(dt_from_tvk(dt));
  if (dt_is_float(d)) return -INFINITY;
  if (dt == TVK_BOOL || dt_is_unsigned(d)) return 0;
  return (double)dt_min_i(d); /* -2^(bits-1): exact in a double */
}

static const int64_t no_dilation[2] = {1, 1};

tvk_tensor *tvk_max_pool2d(tvk_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[4]) {
  return tvk_max_pool2d_dilated(x, kernel, stride, padding, NULL);
}

tvk_tensor *tvk_max_pool2d_dilated(tvk_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                   const int64_t padding[4], const int64_t dilation[2]) {
  const int64_t *st, *pd, *dl = dilation ? dilation : no_dilation;
  tvk_tensor *err = pool_args("max_pool2d", x, kernel, stride, padding, dl, &st, &pd);
  if (err || !x) return err;
  tvk_ctx *ctx = x->ctx;
  size_t sc = tvk_scope_begin(ctx);
  int64_t out[TVK_MAX_DIMS];
  tvk_tensor *xw = pool_windows(x, kernel, st, pd, dl, out);
  if (pd[0] || pd[1] || pd[2] || pd[3]) {
    /* the padding reads 0 in xw; a window of a padded all-true mask (a
     * constant, free) says where the data is, and the rest becomes the lowest
     * value. Padding x with -inf directly would make the pad an op on x that
     * the windows' expand would materialise. */
    const int64_t *s = tvk_shape(x);
    int nd = x->ndim;
    tvk_tensor *valid = tvk_full(ctx, TVK_BOOL, 3, (int64_t[]){1, s[nd - 2], s[nd - 1]}, 1);
    tvk_tensor *vw = windows(valid, kernel, st, pd, dl);
    xw = tvk_where(vw, xw, front_const(ctx, x->dtype, lowest(x->dtype)));
  }
  tvk_tensor *r = tvk_max(xw, 2, (int[]){-2, -1}, false);
  r = tvk_reshape(r, x->ndim, out);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_avg_pool2d(tvk_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[4]) {
  const int64_t *st, *pd;
  tvk_tensor *err = pool_args("avg_pool2d", x, kernel, stride, padding, NULL, &st, &pd);
  if (err || !x) return err;
  tvk_ctx *ctx = x->ctx;
  size_t sc = tvk_scope_begin(ctx);
  int64_t out[TVK_MAX_DIMS];
  tvk_tensor *xw =
      pool_windows(x, kernel, st, pd, no_dilation, out); /* the padding's zeros count */
  tvk_tensor *r = tvk_mean(xw, 2, (int[]){-2, -1}, false);
  r = tvk_reshape(r, x->ndim, out);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
