/* Scaled dot-product attention (tvk.h "neural-network ops"):
 *
 *   s = (q @ k^T) * 1/sqrt(E)                       (..., L, S)
 *   s = where(mask, s, -inf)  or  s + mask           (a bool / other mask)
 *   s = where(j <= i, s, -inf)                       (is_causal)
 *   out = softmax(s, -1) @ v                         (..., L, Ev)
 *
 * The scale is applied to the scores, not to q: q * c is an op on a buffer,
 * and the matmul's expand would then materialise it. The causal mask is a
 * comparison of two aranges, (L, 1) >= (1, S), never an L x S buffer. */
#include <math.h>
#include <stdio.h>

#include "frontend/ops_common.h"

/* Does shape (nd, s) broadcast to (tnd, t) without growing it? */
static bool broadcasts_to(int nd, const int64_t *s, int tnd, const int64_t *t) {
  if (nd > tnd) return false;
  for (int q = 0; q < nd; q++) {
    int64_t a = s[nd - 1 - q], b = t[tnd - 1 - q];
    if (a != b && a != 1) return false;
  }
  return true;
}

/* The broadcast batch shape of q, k, v (all dims but the last two); false
 * when they do not broadcast. */
static bool batch_shape(tvk_tensor *const *t, int *nd, int64_t *out) {
  *nd = 0;
  for (int i = 0; i < 3; i++)
    if (t[i]->ndim - 2 > *nd) *nd = t[i]->ndim - 2;
  for (int q = 0; q < *nd; q++) out[q] = 1;
  for (int i = 0; i < 3; i++) {
    int n = t[i]->ndim - 2;
    for (int q = 0; q < n; q++) {
      int64_t d = t[i]->shape[q], *o = &out[*nd - n + q];
      if (d == *o || d == 1) continue;
      if (*o != 1) return false;
      *o = d;
    }
  }
  return true;
}

static tvk_tensor *check_attention(tvk_tensor *q, tvk_tensor *k, tvk_tensor *v, tvk_tensor *mask,
                                   int *snd, int64_t *sshape) {
  const char *op = "scaled_dot_product_attention";
  tvk_ctx *ctx = q->ctx;
  char sq[BC_SHAPE_STR_MAX], sk[BC_SHAPE_STR_MAX], sv[BC_SHAPE_STR_MAX], sm[BC_SHAPE_STR_MAX];
  bc_shape_str(q->ndim, q->shape, sq, sizeof sq);
  bc_shape_str(k->ndim, k->shape, sk, sizeof sk);
  bc_shape_str(v->ndim, v->shape, sv, sizeof sv);
  if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: q %s, k %s, v %s: each needs at least 2 dims (..., L or S, E)", op, sq,
                        sk, sv);
  int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
  int64_t S = k->shape[k->ndim - 2];
  if (k->shape[k->ndim - 1] != E || v->shape[v->ndim - 2] != S)
    return tensor_error(
        ctx, TVK_ERR_SHAPE,
        "%s: q %s, k %s, v %s: expected q (..., L, E), k (..., S, E), v (..., S, Ev)", op, sq, sk,
        sv);
  int nb;
  if (!batch_shape((tvk_tensor *[]){q, k, v}, &nb, sshape) || nb + 3 > TVK_MAX_DIMS)
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: q %s, k %s, v %s: batch dims do not broadcast", op,
                        sq, sk, sv);
  sshape[nb] = L, sshape[nb + 1] = S, *snd = nb + 2;
  if (mask && !broadcasts_to(mask->ndim, mask->shape, *snd, sshape)) {
    char ss[BC_SHAPE_STR_MAX];
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: mask has shape %s, which does not broadcast to the scores' %s", op,
                        bc_shape_str(mask->ndim, mask->shape, sm, sizeof sm),
                        bc_shape_str(*snd, sshape, ss, sizeof ss));
  }
  return NULL;
}

tvk_tensor *tvk_scaled_dot_product_attention(tvk_tensor *q, tvk_tensor *k, tvk_tensor *v,
                                             tvk_tensor *mask, bool is_causal) {
  const char *op = "scaled_dot_product_attention";
  bool bad;
  tvk_tensor *err = bc_check_sym(op, 3, (tvk_tensor *[]){q, k, v}, &bad);
  if (bad) return err;
  if (mask && (err = bc_check_sym(op, 4, (tvk_tensor *[]){q, k, v, mask}, &bad))) return err;
  int snd = 0;
  int64_t ss[TVK_MAX_DIMS];
  if ((err = check_attention(q, k, v, mask, &snd, ss))) return err;
  tvk_ctx *ctx = q->ctx;
  int64_t L = ss[snd - 2], S = ss[snd - 1], E = q->shape[q->ndim - 1];
  /* the scale is built from a number */
  if (sint_is_sym(E))
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: the embedding dim of q is symbolic; its scale "
                        "1/sqrt(E) needs a number",
                        op);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *s = tvk_matmul(q, tvk_transpose(k, -1, -2)); /* (..., L, S) */
  tvk_dtype sdt = dt_to_tvk(dt_float_result(dt_from_tvk(tvk_dtype_of(s))));
  s = tvk_mul(s, front_const(ctx, sdt, E > 0 ? 1.0 / sqrt((double)E) : 1.0));
  tvk_tensor *ninf = front_const(ctx, sdt, -INFINITY);
  if (mask) s = tvk_dtype_of(mask) == TVK_BOOL ? tvk_where(mask, s, ninf) : tvk_add(s, mask);
  if (is_causal) {
    /* L and S may be symbolic sizes: the aranges are views over them */
    tvk_tensor *row = tvk_reshape(front_arange(ctx, L), 2, (int64_t[]){L, 1});
    tvk_tensor *col = tvk_reshape(front_arange(ctx, S), 2, (int64_t[]){1, S});
    s = tvk_where(tvk_le(col, row), s, ninf); /* keeps j <= i */
  }
  tvk_tensor *r = tvk_matmul(tvk_softmax(s, -1), v);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
