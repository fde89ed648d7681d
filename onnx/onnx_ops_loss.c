/* ONNX's losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
 * with class weights, ignore_index and the three reductions. The class a
 * target picks is a one-hot comparison along the class axis, so the loss
 * fuses with the log-softmax before it. */
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

/* input (N, C, d...) of log-probabilities, target (N, d...) of class indices,
 * weight (C,) or NULL: the loss, reduced as the node says. */
static tvk_status nll(onnx_run_ctx *c, tvk_tensor *input, tvk_tensor *target, tvk_tensor *weight) {
  int nd = tvk_ndim(input);
  if (nd < 2 || tvk_ndim(target) != nd - 1)
    return onnx_node_fail(c, TVK_ERR_SHAPE,
                          "input of %d dims and target of %d (N, C, d...) and (N, d...)", nd,
                          tvk_ndim(target));
  int64_t ncls = tvk_shape(input)[1];
  tvk_dtype dt = tvk_dtype_of(input);
  char buf[16];
  const char *red = onnx_attr_string(c, "reduction", "mean", buf, sizeof buf);
  if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean"))
    return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "reduction '%s' (none, sum or mean)", red);
  int64_t cshape[TVK_MAX_DIMS];
  for (int i = 0; i < nd; i++) cshape[i] = i == 1 ? ncls : 1;
  tvk_tensor *classes = onnx_iota(c, ncls, nd, 1);
  tvk_tensor *t = tvk_cast(target, TVK_INT64);
  tvk_tensor *hot = tvk_eq(tvk_unsqueeze(t, 1), classes); /* (N, C, d...) */
  tvk_tensor *zero = onnx_scalar(c, dt, 0);
  int axis1 = 1;
  tvk_tensor *picked = tvk_neg(tvk_sum(tvk_where(hot, input, zero), 1, &axis1, false));
  tvk_tensor *w = NULL; /* per element, NULL: 1 */
  if (weight) w = tvk_sum(tvk_where(hot, tvk_reshape(weight, nd, cshape), zero), 1, &axis1, false);
  const Onnx__AttributeProto *ii = onnx_attr(c, "ignore_index");
  if (ii) {
    tvk_tensor *keep = tvk_ne(t, onnx_scalar(c, TVK_INT64, (double)ii->i));
    w = tvk_where(keep, w ? w : onnx_scalar(c, dt, 1), zero);
  }
  tvk_tensor *loss = w ? tvk_mul(picked, w) : picked;
  if (!strcmp(red, "none")) return onnx_set_out(c, 0, loss);
  tvk_tensor *total = tvk_sum(loss, 0, NULL, false);
  if (!strcmp(red, "sum")) return onnx_set_out(c, 0, total);
  /* mean: over the weights (the count, without weights or ignored ones) */
  if (!w) return onnx_set_out(c, 0, tvk_mean(loss, 0, NULL, false));
  w = tvk_expand(w, tvk_ndim(loss), tvk_shape(loss));
  return onnx_set_out(c, 0, tvk_div(total, tvk_sum(w, 0, NULL, false)));
}

static tvk_status op_nll_loss(onnx_run_ctx *c) {
  return nll(c, IN(0), IN(1), onnx_has_in(c, 2) ? IN(2) : NULL);
}

static tvk_status op_softmax_cross_entropy(onnx_run_ctx *c) {
  tvk_tensor *logp = tvk_log_softmax(IN(0), 1);
  tvk_status s = nll(c, logp, IN(1), onnx_has_in(c, 2) ? IN(2) : NULL);
  if (s == TVK_OK && c->node->nout > 1) s = onnx_set_out(c, 1, logp);
  return s;
}

const onnx_op onnx_ops_loss[] = {
    {"NegativeLogLikelihoodLoss", "ignore_index,reduction", 2, 3, 1, 1, op_nll_loss},
    {"SoftmaxCrossEntropyLoss", "ignore_index,reduction", 2, 3, 1, 2, op_softmax_cross_entropy},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
