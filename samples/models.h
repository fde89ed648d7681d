/* The samples' models (coldstart, overhead): their weights as fixed
 * pseudo-random host data uploaded with tvk_from_data, their forward pass in
 * tvk, and the same forward as plain double-precision loops, which each
 * sample checks its results against.
 *  - mlp: a batch of 64 through 784-512-512-10, ReLU, log_softmax;
 *  - block: one pre-norm transformer block, BT tokens (64 unless a sample
 *    sets it first) of width 256, 4 heads, causal attention, a GELU MLP of
 *    width 1024, residuals. */
#ifndef TVK_SAMPLES_MODELS_H
#define TVK_SAMPLES_MODELS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tvk.h"

static uint64_t rng_state;
static float uniform_pm(double scale) { /* in [-scale, scale) */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)(((double)(rng_state >> 11) * 0x1p-53 * 2 - 1) * scale);
}
static float *host_rand(size_t n, double scale) {
  float *p = malloc(n * sizeof *p);
  for (size_t i = 0; p && i < n; i++) p[i] = uniform_pm(scale);
  return p;
}

/* ---- the models, in tvk and as plain loops ---- */

enum { MB = 64, MI = 784, MH = 512, MO = 10 };
enum { BD = 256, BHEADS = 4, BF = 1024 };
static int BT = 64; /* the block's tokens */

typedef struct {
  tvk_ctx *ctx;
  int nw;
  float *host[16];
  tvk_tensor *w[16];
} Weights;

static tvk_tensor *upload(Weights *w, int64_t rows, int64_t cols, double scale) {
  size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
  int64_t shape[2] = {rows, cols};
  float *h = host_rand(n, scale);
  w->host[w->nw] = h;
  return w->w[w->nw++] = tvk_from_data(w->ctx, TVK_FLOAT32, cols ? 2 : 1, shape, h);
}

static void mlp_weights(Weights *w) {
  upload(w, MB, MI, 1.0);                                 /* 0: x */
  upload(w, MH, MI, 1 / sqrt(MI)), upload(w, MH, 0, 0.1); /* 1, 2 */
  upload(w, MH, MH, 1 / sqrt(MH)), upload(w, MH, 0, 0.1); /* 3, 4 */
  upload(w, MO, MH, 1 / sqrt(MH)), upload(w, MO, 0, 0.1); /* 5, 6 */
}

static tvk_tensor *mlp_forward(tvk_tensor **w) {
  tvk_tensor *h = tvk_relu(tvk_linear(w[0], w[1], w[2]));
  h = tvk_relu(tvk_linear(h, w[3], w[4]));
  return tvk_log_softmax(tvk_linear(h, w[5], w[6]), 1);
}

/* y[r][o] = sum_i x[r][i] w[o][i] + b[o] */
static void ref_linear(const double *x, const float *w, const float *b, int rows, int in, int out,
                       double *y) {
  for (int r = 0; r < rows; r++)
    for (int o = 0; o < out; o++) {
      double s = b ? b[o] : 0;
      for (int i = 0; i < in; i++) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
}

static double *to_double(const float *p, size_t n) {
  double *d = malloc(n * sizeof *d);
  for (size_t i = 0; i < n; i++) d[i] = p[i];
  return d;
}

static double *mlp_ref(float **h) {
  double *x = to_double(h[0], (size_t)MB * MI), *a = malloc(sizeof(double) * MB * MH),
         *b = malloc(sizeof(double) * MB * MH), *y = malloc(sizeof(double) * MB * MO);
  ref_linear(x, h[1], h[2], MB, MI, MH, a);
  for (int i = 0; i < MB * MH; i++) a[i] = a[i] > 0 ? a[i] : 0;
  ref_linear(a, h[3], h[4], MB, MH, MH, b);
  for (int i = 0; i < MB * MH; i++) b[i] = b[i] > 0 ? b[i] : 0;
  ref_linear(b, h[5], h[6], MB, MH, MO, y);
  for (int r = 0; r < MB; r++) {
    double m = -INFINITY, s = 0;
    for (int o = 0; o < MO; o++) m = fmax(m, y[r * MO + o]);
    for (int o = 0; o < MO; o++) s += exp(y[r * MO + o] - m);
    for (int o = 0; o < MO; o++) y[r * MO + o] -= m + log(s);
  }
  free(x), free(a), free(b);
  return y;
}

static void block_weights(Weights *w) {
  upload(w, BT, BD, 1.0);                                         /* 0: x */
  upload(w, BD, 0, 0.1), upload(w, BD, 0, 0.1);                   /* 1, 2: ln1 weight (+1), bias */
  upload(w, 3 * BD, BD, 1 / sqrt(BD)), upload(w, 3 * BD, 0, 0.1); /* 3, 4: qkv */
  upload(w, BD, BD, 1 / sqrt(BD)), upload(w, BD, 0, 0.1);         /* 5, 6: attention out */
  upload(w, BD, 0, 0.1), upload(w, BD, 0, 0.1);                   /* 7, 8: ln2 */
  upload(w, BF, BD, 1 / sqrt(BD)), upload(w, BF, 0, 0.1);         /* 9, 10: mlp up */
  upload(w, BD, BF, 1 / sqrt(BF)), upload(w, BD, 0, 0.1);         /* 11, 12: mlp down */
}

/* The block on x of T tokens (T a number or a size variable, tvk.h): with a
 * (T, T) bool mask for the attention, or causal (mask NULL). */
static tvk_tensor *block_forward_on(tvk_tensor **w, tvk_tensor *x, int64_t T, tvk_tensor *mask) {
  tvk_ctx *ctx = tvk_ctx_of(w[0]);
  tvk_tensor *one = tvk_scalar(ctx, TVK_FLOAT32, 1);
  tvk_tensor *h = tvk_layernorm(x, 1, tvk_add(w[1], one), w[2], 1e-5);
  tvk_tensor *qkv = tvk_linear(h, w[3], w[4]); /* (T, 3D) */
  tvk_tensor *part[3];
  for (int i = 0; i < 3; i++) {
    int64_t r[2][2] = {{0, T}, {(int64_t)i * BD, (int64_t)(i + 1) * BD}};
    int64_t heads[3] = {T, BHEADS, BD / BHEADS};
    int order[3] = {1, 0, 2};
    part[i] = tvk_permute(tvk_reshape(tvk_shrink(qkv, r), 3, heads), order); /* (H, T, E) */
  }
  tvk_tensor *att = tvk_scaled_dot_product_attention(part[0], part[1], part[2], mask, !mask);
  int order[3] = {1, 0, 2};
  int64_t flat[2] = {T, BD};
  att = tvk_reshape(tvk_permute(att, order), 2, flat);
  x = tvk_add(x, tvk_linear(att, w[5], w[6]));
  h = tvk_layernorm(x, 1, tvk_add(w[7], one), w[8], 1e-5);
  h = tvk_linear(tvk_gelu(tvk_linear(h, w[9], w[10])), w[11], w[12]);
  return tvk_add(x, h);
}

static tvk_tensor *block_forward(tvk_tensor **w) { return block_forward_on(w, w[0], BT, NULL); }

static void ref_layernorm(const double *x, const float *w, const float *b, double *y) {
  for (int t = 0; t < BT; t++) {
    double m = 0, v = 0;
    for (int i = 0; i < BD; i++) m += x[t * BD + i];
    m /= BD;
    for (int i = 0; i < BD; i++) v += (x[t * BD + i] - m) * (x[t * BD + i] - m);
    v /= BD;
    for (int i = 0; i < BD; i++)
      y[t * BD + i] = (x[t * BD + i] - m) / sqrt(v + 1e-5) * (w[i] + 1.0) + b[i];
  }
}

static double *block_ref(float **hw) {
  const int E = BD / BHEADS;
  double *x = to_double(hw[0], (size_t)BT * BD), *h = malloc(sizeof(double) * BT * BD),
         *qkv = malloc(sizeof(double) * BT * 3 * BD), *att = malloc(sizeof(double) * BT * BD),
         *o = malloc(sizeof(double) * BT * BD), *up = malloc(sizeof(double) * BT * BF);
  ref_layernorm(x, hw[1], hw[2], h);
  ref_linear(h, hw[3], hw[4], BT, BD, 3 * BD, qkv);
  for (int hd = 0; hd < BHEADS; hd++)
    for (int i = 0; i < BT; i++) {
      double *s = malloc(sizeof(double) * (size_t)BT), m = -INFINITY, z = 0;
      for (int j = 0; j <= i; j++) {
        double d = 0;
        for (int e = 0; e < E; e++)
          d += qkv[i * 3 * BD + hd * E + e] * qkv[j * 3 * BD + BD + hd * E + e];
        s[j] = d / sqrt(E);
        m = fmax(m, s[j]);
      }
      for (int j = 0; j <= i; j++) z += s[j] = exp(s[j] - m);
      for (int e = 0; e < E; e++) {
        double a = 0;
        for (int j = 0; j <= i; j++) a += s[j] / z * qkv[j * 3 * BD + 2 * BD + hd * E + e];
        att[i * BD + hd * E + e] = a;
      }
      free(s);
    }
  ref_linear(att, hw[5], hw[6], BT, BD, BD, o);
  for (int i = 0; i < BT * BD; i++) x[i] += o[i];
  ref_layernorm(x, hw[7], hw[8], h);
  ref_linear(h, hw[9], hw[10], BT, BD, BF, up);
  for (int i = 0; i < BT * BF; i++) {
    double v = up[i];
    up[i] = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  ref_linear(up, hw[11], hw[12], BT, BF, BD, o);
  for (int i = 0; i < BT * BD; i++) x[i] += o[i];
  free(h), free(qkv), free(att), free(o), free(up);
  return x;
}

typedef struct {
  const char *name;
  void (*weights)(Weights *);
  tvk_tensor *(*forward)(tvk_tensor **);
  double *(*ref)(float **);
} Model;

static const Model models[] = {
    {"mlp", mlp_weights, mlp_forward, mlp_ref},
    {"block", block_weights, block_forward, block_ref},
};

#endif
