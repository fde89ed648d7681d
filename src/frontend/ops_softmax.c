/* softmax, log_softmax, logsumexp and cross_entropy (tvk.h "neural-network
 * ops"), composed from public ops so the scheduler fuses them: a max along the
 * axis, a sum of exp(x - max) along it, and the elementwise tail.
 * docs/ops_norm.md describes the graphs and the kernels they become.
 *
 * -inf and NaN (all as torch):
 * - softmax / log_softmax subtract the plain max: a row of all -inf gives
 *   x - max = -inf - -inf = NaN everywhere; a row holding +inf gives NaN too.
 * - logsumexp subtracts max only when it is finite (else 0): a row of all -inf
 *   gives log(0) = -inf, a row holding +inf gives +inf.
 * - a NaN anywhere in a row makes that row's results NaN.
 * - cross_entropy: a label outside [0, C) selects no logit; its row's loss is
 *   NaN, so the mean is NaN (torch raises an error instead). */
#include <math.h>
#include <stdint.h>

#include "codegen/kernel.h" /* CG_MODE_GRID */
#include "frontend/ops_common.h"

static bool is_int(tvk_dtype d) {
  return d == TVK_INT8 || d == TVK_UINT8 || d == TVK_INT16 || d == TVK_UINT16 || d == TVK_INT32 ||
         d == TVK_UINT32 || d == TVK_INT64 || d == TVK_UINT64;
}

/* The result dtype of a float op (integers and bool give float32) and the dtype
 * it is computed in (float16 / bfloat16: float32, rounded once at the end). */
static tvk_dtype res_dtype(tvk_dtype d) { return dt_to_tvk(dt_float_result(dt_from_tvk(d))); }
static tvk_dtype comp_dtype(tvk_dtype d) { return dt_to_tvk(dt_acc(dt_from_tvk(res_dtype(d)))); }

/* a as a compute-dtype tensor of at least one dim (0-d becomes (1,)). */
static tvk_tensor *prepare(tvk_tensor *a) {
  tvk_tensor *x = tvk_cast(a, comp_dtype(a->dtype));
  if (a->ndim == 0) x = tvk_reshape(x, 1, (const int64_t[]){1});
  return x;
}

/* r cast to the result dtype and reshaped to (ndim, shape). */
static tvk_tensor *finish(tvk_tensor *r, tvk_dtype dt, int ndim, const int64_t *shape) {
  return tvk_reshape(tvk_cast(r, dt), ndim, shape);
}

typedef enum { SM_SOFTMAX, SM_LOG_SOFTMAX } SmKind;

/* On the CPU softmax's exp(x - max) is materialised: its sum and the
 * division read it, and the division writes the result over it (the memory
 * planner's in place, schedule/plan.c). exp then runs once per element,
 * not twice (in the sum and in the division), and it is exp's arithmetic
 * that bounds softmax on a CPU; over rows past a core's cache the runtime
 * runs the four kernels part by part (runtime/chain.c), so e is read back
 * from the cache. 4096 x 4096 float32 on Zen 5, 2 threads: see
 * docs/ops_norm.md. Not below 2^18 elements, where a fourth launch costs
 * more than the exps it saves; not on a GPU, where computing exp again
 * costs less than a round trip of e through memory; not with symbolic
 * sizes. */
static bool materialise_exp(const tvk_tensor *x) {
  for (int d = 0; d < x->ndim; d++)
    if (sint_is_sym(x->shape[d])) return false;
  return bc_numel(x->ndim, x->shape) >= (int64_t)1 << 18 &&
         front_device(x)->codegen_mode != CG_MODE_GRID;
}

static tvk_tensor *softmax_like(const char *op, SmKind k, tvk_tensor *a, int axis) {
  bool bad;
  int ax;
  tvk_tensor *err = bc_check_axis_sym(op, a, axis, &ax, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x = prepare(a);
  tvk_tensor *d = tvk_sub(x, tvk_detach(tvk_max(x, 1, &ax, true)));
  tvk_tensor *e = tvk_exp(d);
  if (k == SM_SOFTMAX && materialise_exp(x)) e = tvk_contiguous(e);
  tvk_tensor *s = tvk_sum(e, 1, &ax, true);
  tvk_tensor *r = k == SM_SOFTMAX ? tvk_div(e, s) : tvk_sub(d, tvk_log(s));
  r = finish(r, res_dtype(a->dtype), a->ndim, a->shape);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_softmax(tvk_tensor *a, int axis) {
  return softmax_like("softmax", SM_SOFTMAX, a, axis);
}

tvk_tensor *tvk_log_softmax(tvk_tensor *a, int axis) {
  return softmax_like("log_softmax", SM_LOG_SOFTMAX, a, axis);
}

/* The max along ax (kept as size 1) where it is finite, else 0: the shift of
 * logsumexp, so that rows of all -inf (or with +inf) give -inf (+inf), not NaN. */
static tvk_tensor *finite_max(tvk_tensor *x, int ax) {
  tvk_ctx *ctx = x->ctx;
  tvk_tensor *m = tvk_max(x, 1, &ax, true);
  tvk_tensor *inf = tvk_eq(tvk_abs(m), front_const(ctx, x->dtype, INFINITY));
  return tvk_detach(tvk_where(inf, front_const(ctx, x->dtype, 0), m));
}

tvk_tensor *tvk_logsumexp(tvk_tensor *a, int axis, bool keepdim) {
  bool bad;
  int ax;
  tvk_tensor *err = bc_check_axis_sym("logsumexp", a, axis, &ax, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  int nd = 0;
  int64_t out[TVK_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++)
    if (d != ax || keepdim) out[nd++] = d == ax ? 1 : a->shape[d];
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x = prepare(a);
  tvk_tensor *m = finite_max(x, ax);
  tvk_tensor *s = tvk_sum(tvk_exp(tvk_sub(x, m)), 1, &ax, true);
  tvk_tensor *r = finish(tvk_add(tvk_log(s), m), res_dtype(a->dtype), nd, out);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- cross entropy */

/* The dtype of the class index arange compared with labels of dtype ld: one
 * that promotes with ld to an integer type holding every class index (uint64
 * labels with a signed arange would promote to a float). */
static tvk_dtype class_dtype(tvk_dtype ld, int64_t c) {
  if (ld == TVK_UINT64) return TVK_UINT64;
  return c <= INT32_MAX ? TVK_INT32 : TVK_INT64;
}

/* 0 <= label < c as bool (n, 1), compared in the labels' own dtype (another
 * would promote uint64 with int64 to a float); no reduction over the classes. */
static tvk_tensor *in_range(tvk_tensor *labels, int64_t n, int64_t c) {
  static const struct {
    tvk_dtype dt;
    bool is_signed;
    double max;
  } lim[] = {
      {TVK_INT8, true, INT8_MAX},   {TVK_UINT8, false, UINT8_MAX},
      {TVK_INT16, true, INT16_MAX}, {TVK_UINT16, false, UINT16_MAX},
      {TVK_INT32, true, INT32_MAX}, {TVK_UINT32, false, UINT32_MAX},
      {TVK_INT64, true, 0x1p63},    {TVK_UINT64, false, 0x1p64},
  };
  tvk_ctx *ctx = labels->ctx;
  tvk_dtype ld = labels->dtype;
  bool is_signed = true;
  double max = 0;
  for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
    if (lim[i].dt == ld) is_signed = lim[i].is_signed, max = lim[i].max;
  tvk_tensor *lab = tvk_reshape(labels, 2, (const int64_t[]){n, 1});
  tvk_tensor *ok = is_signed ? tvk_ge(lab, front_const(ctx, ld, 0))
                             : tvk_full(ctx, TVK_BOOL, 2, (const int64_t[]){n, 1}, 1);
  if ((double)c <= max) ok = tvk_logical_and(ok, tvk_lt(lab, front_const(ctx, ld, (double)c)));
  return ok;
}

tvk_tensor *tvk_cross_entropy(tvk_tensor *logits, tvk_tensor *labels) {
  const char *op = "cross_entropy";
  bool bad;
  tvk_tensor *err = bc_check(op, 2, (tvk_tensor *[]){logits, labels}, &bad);
  if (bad) return err;
  tvk_ctx *ctx = logits->ctx;
  char ls[BC_SHAPE_STR_MAX], bs[BC_SHAPE_STR_MAX];
  bc_shape_str(logits->ndim, logits->shape, ls, sizeof ls);
  bc_shape_str(labels->ndim, labels->shape, bs, sizeof bs);
  if (logits->ndim != 2)
    return tensor_error(ctx, TVK_ERR_SHAPE, "%s: logits have shape %s: expected 2 dims (N, C)", op,
                        ls);
  if (labels->ndim != 1 || labels->shape[0] != logits->shape[0])
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: labels have shape %s: expected (%lld,) for logits of shape %s", op, bs,
                        (long long)logits->shape[0], ls);
  if (!is_int(labels->dtype))
    return tensor_error(ctx, TVK_ERR_DTYPE, "%s: labels are %s: expected an integer dtype", op,
                        tvk_dtype_name(labels->dtype));
  if (logits->dtype == TVK_BOOL)
    return tensor_error(ctx, TVK_ERR_DTYPE, "%s: logits are bool: expected a number dtype", op);

  int64_t n = logits->shape[0], c = logits->shape[1];
  const int64_t nc[2] = {n, c};
  int one = 1;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x = tvk_cast(logits, comp_dtype(logits->dtype));
  /* loss_i = log(sum_c exp(x_ic - m_i)) - (x_i,label_i - m_i); m_i is
   * detached: the loss does not depend on it, so its gradient is zero */
  tvk_tensor *m = tvk_detach(tvk_max(x, 1, &one, true));
  tvk_tensor *lse = tvk_log(tvk_sum(tvk_exp(tvk_sub(x, m)), 1, &one, true));
  /* the label selection: labels and the class index, both leaves, expanded to
   * (N, C) and compared; no one-hot tensor is materialised */
  tvk_tensor *lab = tvk_expand(tvk_reshape(labels, 2, (const int64_t[]){n, 1}), 2, nc);
  tvk_tensor *cls =
      tvk_expand(tvk_reshape(tvk_arange(ctx, class_dtype(labels->dtype, c), 0, (double)c, 1), 2,
                             (const int64_t[]){1, c}),
                 2, nc);
  tvk_tensor *hit = tvk_eq(lab, cls);
  tvk_tensor *picked = tvk_sum(tvk_where(hit, x, front_const(ctx, x->dtype, 0)), 1, &one, true);
  tvk_tensor *loss = tvk_sub(lse, tvk_sub(picked, m));
  loss = tvk_where(in_range(labels, n, c), loss, front_const(ctx, x->dtype, NAN));
  tvk_tensor *r = tvk_cast(tvk_mean(loss, 0, NULL, false), res_dtype(logits->dtype));
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
