/* ONNX's recurrent layers: RNN, GRU and LSTM, forward, reverse or
 * bidirectional. The input projection of every time step is one matmul (X @
 * W^T for the whole sequence); the recurrence is unrolled over the sequence,
 * whose length the graph knows, as a chain of small matmuls and gate math. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

typedef enum {
  A_SIGMOID,
  A_TANH,
  A_RELU,
  A_HARD_SIGMOID,
  A_LEAKY_RELU,
  A_SOFTSIGN,
  A_SOFTPLUS
} act_kind;

typedef struct {
  act_kind kind;
  double alpha, beta;
} act;

static tvk_tensor *apply(onnx_run_ctx *c, const act *a, tvk_tensor *x) {
  tvk_dtype dt = tvk_dtype_of(x);
  switch (a->kind) {
  case A_SIGMOID: return tvk_sigmoid(x);
  case A_TANH: return tvk_tanh(x);
  case A_RELU: return tvk_relu(x);
  case A_HARD_SIGMOID: {
    tvk_tensor *y = tvk_add(tvk_mul(x, onnx_scalar(c, dt, a->alpha)), onnx_scalar(c, dt, a->beta));
    return tvk_minimum(tvk_maximum(y, onnx_scalar(c, dt, 0)), onnx_scalar(c, dt, 1));
  }
  case A_LEAKY_RELU:
    return tvk_where(tvk_ge(x, onnx_scalar(c, dt, 0)), x, tvk_mul(x, onnx_scalar(c, dt, a->alpha)));
  case A_SOFTSIGN: return tvk_div(x, tvk_add(onnx_scalar(c, dt, 1), tvk_abs(x)));
  default: return tvk_log(tvk_add(onnx_scalar(c, dt, 1), tvk_exp(x)));
  }
}

/* The node's activations (n per direction), or the defaults. */
static tvk_status read_acts(onnx_run_ctx *c, int n, int ndir, const act_kind *dflt, act *out) {
  const Onnx__AttributeProto *a = onnx_attr(c, "activations");
  float alpha[16], beta[16];
  int na = onnx_attr_floats(c, "activation_alpha", alpha, 16);
  int nb = onnx_attr_floats(c, "activation_beta", beta, 16);
  if (a && (int)a->n_strings != n * ndir)
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "%zu activations; it takes %d", a->n_strings,
                          n * ndir);
  static const char *const names[] = {"Sigmoid",   "Tanh",     "Relu",    "HardSigmoid",
                                      "LeakyRelu", "Softsign", "Softplus"};
  for (int i = 0; i < n * ndir; i++) {
    out[i].kind = dflt[i % n];
    out[i].alpha = out[i].kind == A_HARD_SIGMOID ? 0.2 : 0.01;
    out[i].beta = 0.5;
    if (a) {
      char name[32];
      size_t len = a->strings[i].len < 31 ? a->strings[i].len : 31;
      memcpy(name, a->strings[i].data, len);
      name[len] = 0;
      int k = 0;
      while (k < 7 && strcmp(name, names[k])) k++;
      if (k == 7)
        return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "activation '%s' is not supported", name);
      out[i].kind = (act_kind)k;
      out[i].alpha = k == A_HARD_SIGMOID ? 0.2 : 0.01;
    }
    if (i < na) out[i].alpha = alpha[i];
    if (i < nb) out[i].beta = beta[i];
  }
  return TVK_OK;
}

/* rows [k*h, (k+1)*h) of a 2-D (G*h, n) tensor, or elements of a 1-D one */
static tvk_tensor *gate(tvk_tensor *t, int k, int64_t h) {
  int64_t r[2][2] = {{k * h, (k + 1) * h}, {0, tvk_ndim(t) > 1 ? tvk_shape(t)[1] : 0}};
  return tvk_shrink(t, r); /* a 1-D t reads only the first range */
}

/* columns [k*h, (k+1)*h) of a (B, G*h) tensor */
static tvk_tensor *cols(tvk_tensor *t, int k, int64_t h) {
  int64_t r[2][2] = {{0, tvk_shape(t)[0]}, {k * h, (k + 1) * h}};
  return tvk_shrink(t, r);
}

/* direction d of a (ndir, ...) input, without its first dim */
static tvk_tensor *dir_of(tvk_tensor *t, int d) {
  int nd = tvk_ndim(t);
  int64_t r[TVK_MAX_DIMS][2];
  for (int i = 0; i < nd; i++) r[i][0] = 0, r[i][1] = tvk_shape(t)[i];
  r[0][0] = d, r[0][1] = d + 1;
  return tvk_squeeze(tvk_shrink(t, r), 1, (int[]){0});
}

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

static tvk_status rnn(onnx_run_ctx *c, rnn_kind kind) {
  int G = kind == K_RNN ? 1 : kind == K_GRU ? 3 : 4;
  int64_t H = onnx_attr_int(c, "hidden_size", 0);
  char buf[32];
  const char *dir = onnx_attr_string(c, "direction", "forward", buf, sizeof buf);
  bool batch_first = onnx_attr_int(c, "layout", 0) != 0;
  int ndir = !strcmp(dir, "bidirectional") ? 2 : 1;
  bool reverse = !strcmp(dir, "reverse");
  if (!reverse && ndir == 1 && strcmp(dir, "forward"))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "direction '%s'", dir);
  if (onnx_attr_int(c, "input_forget", 0))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "input_forget is not supported");
  if (onnx_in_ndim(c, 0) != 3 || onnx_in_ndim(c, 1) != 3)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "X and W take 3 dims");
  tvk_tensor *x = IN(0);
  if (batch_first) x = tvk_permute(x, (int[]){1, 0, 2});
  int64_t S = tvk_shape(x)[0], B = tvk_shape(x)[1], I = tvk_shape(x)[2];
  if (H <= 0) H = onnx_in_shape(c, 1)[1] / G;
  tvk_dtype dt = tvk_dtype_of(x);
  if (onnx_has_in(c, 4)) { /* sequence_lens: only the full length */
    const onnx_host *sl = onnx_in_host(c, 4);
    if (!sl) return TVK_ERR_INVALID_ARG;
    for (int64_t b = 0; b < sl->numel; b++)
      if (onnx_host_get_int(sl, b) != S)
        return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                              "sequence_lens shorter than the sequence (%lld) are not supported",
                              (long long)S);
  }
  static const act_kind d_rnn[] = {A_TANH}, d_gru[] = {A_SIGMOID, A_TANH},
                        d_lstm[] = {A_SIGMOID, A_TANH, A_TANH};
  int nact = kind == K_RNN ? 1 : kind == K_GRU ? 2 : 3;
  act acts[6];
  tvk_status s = read_acts(c, nact, ndir,
                           kind == K_RNN   ? d_rnn
                           : kind == K_GRU ? d_gru
                                           : d_lstm,
                           acts);
  if (s != TVK_OK) return s;
  const Onnx__AttributeProto *clip_attr = onnx_attr(c, "clip");
  double clip = clip_attr ? clip_attr->f : 0;
  bool lbr = onnx_attr_int(c, "linear_before_reset", 0) != 0;

  tvk_tensor *ys[2] = {NULL, NULL}, *hs[2], *cs[2] = {NULL, NULL};
  tvk_tensor *steps[4096];
  if (S > 4096)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "a sequence of %lld steps (at most 4096)",
                          (long long)S);
  for (int d = 0; d < ndir; d++) {
    bool back = reverse || d == 1;
    tvk_tensor *w = dir_of(IN(1), d), *r = dir_of(IN(2), d); /* (G*H, I), (G*H, H) */
    /* the input projection of every step at once: (S, B, G*H) */
    int64_t flat[2] = {S * B, I}, seq[3] = {S, B, G * H};
    tvk_tensor *xw =
        tvk_reshape(tvk_matmul(tvk_reshape(x, 2, flat), tvk_transpose(w, 0, 1)), 3, seq);
    tvk_tensor *wb = NULL, *rb = NULL;
    if (onnx_has_in(c, 3)) {
      tvk_tensor *bias = dir_of(IN(3), d); /* (2*G*H,) */
      int64_t r0[1][2] = {{0, G * H}}, r1[1][2] = {{G * H, 2 * G * H}};
      wb = tvk_shrink(bias, r0), rb = tvk_shrink(bias, r1);
      xw = tvk_add(xw, wb);
    }
    tvk_tensor *h =
        onnx_has_in(c, 5) ? dir_of(IN(5), d) : tvk_full(CTX, dt, 2, (int64_t[]){B, H}, 0);
    tvk_tensor *cell =
        kind == K_LSTM
            ? (onnx_has_in(c, 6) ? dir_of(IN(6), d) : tvk_full(CTX, dt, 2, (int64_t[]){B, H}, 0))
            : NULL;
    tvk_tensor *peep =
        kind == K_LSTM && onnx_has_in(c, 7) ? dir_of(IN(7), d) : NULL; /* (3H,) iof */
    tvk_tensor *rt = tvk_transpose(r, 0, 1);                           /* (H, G*H) */
    const act *f = &acts[d * nact], *g = nact > 1 ? &acts[d * nact + 1] : NULL,
              *ha = nact > 2 ? &acts[d * nact + 2] : NULL;
    for (int64_t step = 0; step < S; step++) {
      int64_t t = back ? S - 1 - step : step;
      int64_t pick[3][2] = {{t, t + 1}, {0, B}, {0, G * H}};
      tvk_tensor *xt = tvk_reshape(tvk_shrink(xw, pick), 2, (int64_t[]){B, G * H});
      tvk_tensor *hr = tvk_matmul(h, rt); /* (B, G*H) */
      if (rb && !(kind == K_GRU && lbr)) hr = tvk_add(hr, rb);
      if (kind == K_RNN) {
        tvk_tensor *a = tvk_add(xt, hr);
        if (clip > 0)
          a = tvk_minimum(tvk_maximum(a, onnx_scalar(c, dt, -clip)), onnx_scalar(c, dt, clip));
        h = apply(c, f, a);
      } else if (kind == K_GRU) {
        tvk_tensor *hz = cols(hr, 0, H), *hrr = cols(hr, 1, H);
        tvk_tensor *z = tvk_add(cols(xt, 0, H), hz), *rr = tvk_add(cols(xt, 1, H), hrr);
        if (lbr && rb) z = tvk_add(z, gate(rb, 0, H)), rr = tvk_add(rr, gate(rb, 1, H));
        if (clip > 0) {
          tvk_tensor *lo = onnx_scalar(c, dt, -clip), *hi = onnx_scalar(c, dt, clip);
          z = tvk_minimum(tvk_maximum(z, lo), hi), rr = tvk_minimum(tvk_maximum(rr, lo), hi);
        }
        z = apply(c, f, z), rr = apply(c, f, rr);
        tvk_tensor *cand;
        if (lbr) { /* r * (H R_h^T + Rb_h) */
          tvk_tensor *hh = cols(hr, 2, H);
          if (rb) hh = tvk_add(hh, gate(rb, 2, H));
          cand = tvk_add(cols(xt, 2, H), tvk_mul(rr, hh));
        } else { /* (r * H) R_h^T + Rb_h */
          tvk_tensor *rh = tvk_matmul(tvk_mul(rr, h), tvk_transpose(gate(r, 2, H), 0, 1));
          if (rb) rh = tvk_add(rh, gate(rb, 2, H));
          cand = tvk_add(cols(xt, 2, H), rh);
        }
        if (clip > 0)
          cand =
              tvk_minimum(tvk_maximum(cand, onnx_scalar(c, dt, -clip)), onnx_scalar(c, dt, clip));
        cand = apply(c, g, cand);
        tvk_tensor *one = onnx_scalar(c, dt, 1);
        h = tvk_add(tvk_mul(tvk_sub(one, z), cand), tvk_mul(z, h));
      } else { /* LSTM, gates i o f c */
        tvk_tensor *pre = tvk_add(xt, hr), *gi = cols(pre, 0, H), *go = cols(pre, 1, H),
                   *gf = cols(pre, 2, H), *gc = cols(pre, 3, H);
        if (peep)
          gi = tvk_add(gi, tvk_mul(gate(peep, 0, H), cell)),
          gf = tvk_add(gf, tvk_mul(gate(peep, 2, H), cell));
        if (clip > 0) {
          tvk_tensor *lo = onnx_scalar(c, dt, -clip), *hi = onnx_scalar(c, dt, clip);
          gi = tvk_minimum(tvk_maximum(gi, lo), hi), gf = tvk_minimum(tvk_maximum(gf, lo), hi);
          gc = tvk_minimum(tvk_maximum(gc, lo), hi);
        }
        tvk_tensor *i = apply(c, f, gi), *fg = apply(c, f, gf), *cc = apply(c, g, gc);
        cell = tvk_add(tvk_mul(fg, cell), tvk_mul(i, cc));
        if (peep) go = tvk_add(go, tvk_mul(gate(peep, 1, H), cell));
        if (clip > 0)
          go = tvk_minimum(tvk_maximum(go, onnx_scalar(c, dt, -clip)), onnx_scalar(c, dt, clip));
        h = tvk_mul(apply(c, f, go), apply(c, ha, cell));
      }
      steps[t] = h;
    }
    ys[d] = tvk_stack((int)S, steps, 0); /* (S, B, H) */
    hs[d] = h;
    cs[d] = cell;
  }
  /* Y (S, ndir, B, H), Y_h and Y_c (ndir, B, H); batch first with layout 1 */
  tvk_tensor *y = ndir == 2 ? tvk_stack(2, ys, 1) : tvk_unsqueeze(ys[0], 1);
  tvk_tensor *yh = ndir == 2 ? tvk_stack(2, hs, 0) : tvk_unsqueeze(hs[0], 0);
  tvk_tensor *yc =
      kind == K_LSTM ? (ndir == 2 ? tvk_stack(2, cs, 0) : tvk_unsqueeze(cs[0], 0)) : NULL;
  if (batch_first) {
    y = tvk_permute(y, (int[]){2, 0, 1, 3});
    yh = tvk_permute(yh, (int[]){1, 0, 2});
    if (yc) yc = tvk_permute(yc, (int[]){1, 0, 2});
  }
  s = onnx_set_out(c, 0, y);
  if (s == TVK_OK && c->node->nout > 1) s = onnx_set_out(c, 1, yh);
  if (s == TVK_OK && c->node->nout > 2 && yc) s = onnx_set_out(c, 2, yc);
  return s;
}

static tvk_status op_rnn(onnx_run_ctx *c) { return rnn(c, K_RNN); }
static tvk_status op_gru(onnx_run_ctx *c) { return rnn(c, K_GRU); }
static tvk_status op_lstm(onnx_run_ctx *c) { return rnn(c, K_LSTM); }

#define RNN_ATTRS "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"
const onnx_op onnx_ops_rnn[] = {
    {"GRU", RNN_ATTRS ",linear_before_reset", 3, 6, 0, 2, op_gru},
    {"LSTM", RNN_ATTRS ",input_forget", 3, 8, 0, 3, op_lstm},
    {"RNN", RNN_ATTRS, 3, 6, 0, 2, op_rnn},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
