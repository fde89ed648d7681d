/* var, std, layernorm and batchnorm (inference and training forms; tvk.h
 * "neural-network ops"), composed from public ops so the scheduler fuses
 * them. docs/ops_norm.md describes the graphs and the kernels they become.
 *
 * var is two-pass: the mean, then the sum of squared deviations from it,
 * divided by max(0, n - correction) as torch does. n - correction <= 0 thus
 * divides by 0: inf where the deviations are not all 0, NaN where they are
 * (one element, or a constant row); written as a product with inf, which
 * every device computes as IEEE says. Zero elements give NaN (the mean is NaN). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "frontend/ops_common.h"

/* Results are floats (dt_float_result), computed in dt_acc of that and
 * rounded once at the end. */
static tvk_dtype res_dtype(tvk_dtype d) { return dt_to_tvk(dt_float_result(dt_from_tvk(d))); }
static tvk_dtype comp_dtype(tvk_dtype d) { return dt_to_tvk(dt_acc(dt_from_tvk(res_dtype(d)))); }

/* ---------------------------------------------------------------- var, std */

static tvk_tensor *variance(const char *op, bool sd, tvk_tensor *a, int naxes, const int *axes,
                            bool keepdim, double correction) {
  bool bad;
  tvk_tensor *err = bc_check_sym(op, 1, &a, &bad);
  if (bad) return err;
  BcAxes ax;
  if ((err = bc_reduce_axes(op, a, naxes, axes, keepdim, &ax))) return err;
  if ((err = front_check_sym_reduce(op, a, &ax))) return err;
  if (!isfinite(correction))
    return tensor_error(a->ctx, TVK_ERR_INVALID_ARG, "%s: correction %g is not finite", op,
                        correction);
  tvk_ctx *ctx = a->ctx;
  tvk_dtype cdt = comp_dtype(a->dtype);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *x = tvk_cast(a, cdt);
  tvk_tensor *d = tvk_sub(x, tvk_mean(x, naxes, axes, true));
  tvk_tensor *ss = tvk_sum(tvk_mul(d, d), naxes, axes, keepdim);
  tvk_tensor *div;
  if (!sint_is_sym(ax.count)) {
    div = front_const(ctx, cdt, fmax(0.0, (double)ax.count - correction));
  } else { /* counted, as mean counts a symbolic axis: a sum of ones */
    tvk_tensor *n = tvk_sum(tvk_full(ctx, cdt, a->ndim, a->shape, 1), naxes, axes, keepdim);
    div = tvk_maximum(tvk_sub(n, front_const(ctx, cdt, correction)), front_const(ctx, cdt, 0));
  }
  tvk_tensor *r = tvk_div(ss, div); /* div 0: inf, or NaN for ss 0 */
  if (sd) r = tvk_sqrt(r);
  r = tvk_cast(r, res_dtype(a->dtype));
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_var(tvk_tensor *a, int naxes, const int *axes, bool keepdim, double correction) {
  return variance("var", false, a, naxes, axes, keepdim, correction);
}

tvk_tensor *tvk_std(tvk_tensor *a, int naxes, const int *axes, bool keepdim, double correction) {
  return variance("std", true, a, naxes, axes, keepdim, correction);
}

/* ---------------------------------------------------------------- layernorm */

/* An error tensor when p is given and its shape is not (nd, shape); else NULL. */
static tvk_tensor *check_shape(const char *op, const char *name, tvk_tensor *p, tvk_tensor *x,
                               int nd, const int64_t *shape, const char *what) {
  if (!p) return NULL;
  bool ok = p->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = p->shape[d] == shape[d];
  if (ok) return NULL;
  char ps[BC_SHAPE_STR_MAX], want[BC_SHAPE_STR_MAX], xs[BC_SHAPE_STR_MAX];
  return tensor_error(
      x->ctx, TVK_ERR_SHAPE, "%s: %s has shape %s: expected %s (%s) for x of shape %s", op, name,
      bc_shape_str(p->ndim, p->shape, ps, sizeof ps), bc_shape_str(nd, shape, want, sizeof want),
      what, bc_shape_str(x->ndim, x->shape, xs, sizeof xs));
}

/* The result dtype of a normalisation: x's float dtype promoted with the
 * parameters' dtypes (NULL entries skipped). */
static tvk_dtype norm_dtype(tvk_tensor *x, int n, tvk_tensor *const *ps) {
  ScalarType s = dt_from_tvk(res_dtype(x->dtype));
  for (int i = 0; i < n; i++)
    if (ps[i]) s = dt_promote(s, dt_from_tvk(ps[i]->dtype));
  return dt_to_tvk(dt_float_result(s));
}

/* The given tensors among ts (n of them), for bc_check. */
static int present(int n, tvk_tensor *const *ts, tvk_tensor **out) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (ts[i]) out[k++] = ts[i];
  return k;
}

tvk_tensor *tvk_layernorm(tvk_tensor *x, int nlast, tvk_tensor *weight, tvk_tensor *bias,
                          double eps) {
  const char *op = "layernorm";
  bool bad;
  tvk_tensor *given[3];
  int ng = present(3, (tvk_tensor *[]){x, weight, bias}, given);
  if (ng == 0) return NULL;                            /* no context to attach an error to */
  tvk_tensor *err = bc_check_sym(op, ng, given, &bad); /* mean refuses a symbolic count */
  if (bad) return err;
  if (!x) return tensor_error(given[0]->ctx, TVK_ERR_INVALID_ARG, "%s: x is NULL", op);
  if (nlast < 1 || nlast > x->ndim)
    return tensor_error(x->ctx, TVK_ERR_INVALID_ARG,
                        "%s: nlast %d is outside 1..%d for x of %d dims", op, nlast, x->ndim,
                        x->ndim);
  if (!isfinite(eps) || eps < 0)
    return tensor_error(x->ctx, TVK_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op, eps);
  const int64_t *ns = x->shape + (x->ndim - nlast);
  if ((err = check_shape(op, "weight", weight, x, nlast, ns, "the normalised shape")) ||
      (err = check_shape(op, "bias", bias, x, nlast, ns, "the normalised shape")))
    return err;

  tvk_ctx *ctx = x->ctx;
  tvk_dtype res = norm_dtype(x, 2, (tvk_tensor *[]){weight, bias}), cdt = comp_dtype(res);
  int axes[TVK_MAX_DIMS];
  for (int i = 0; i < nlast; i++) axes[i] = x->ndim - nlast + i;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *xf = tvk_cast(x, cdt);
  tvk_tensor *d = tvk_sub(xf, tvk_mean(xf, nlast, axes, true));
  tvk_tensor *v = tvk_mean(tvk_mul(d, d), nlast, axes, true);
  tvk_tensor *r = tvk_mul(d, tvk_rsqrt(tvk_add(v, front_const(ctx, cdt, eps))));
  /* weight and bias are leaves: the binary ops broadcast them, then convert */
  if (weight) r = tvk_mul(r, weight);
  if (bias) r = tvk_add(r, bias);
  r = tvk_cast(r, res);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- group_norm */

/* x (N, C, ...) as (N, G, C/G * the rest): each group normalised as
 * layernorm normalises its last dim, then the per-channel affine. */
tvk_tensor *tvk_group_norm(tvk_tensor *x, int64_t groups, tvk_tensor *weight, tvk_tensor *bias,
                           double eps) {
  const char *op = "group_norm";
  bool bad;
  tvk_tensor *given[3];
  int ng = present(3, (tvk_tensor *[]){x, weight, bias}, given);
  if (ng == 0) return NULL;
  tvk_tensor *err = bc_check(op, ng, given, &bad);
  if (bad) return err;
  if (!x) return tensor_error(given[0]->ctx, TVK_ERR_INVALID_ARG, "%s: x is NULL", op);
  char xs[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, xs, sizeof xs);
  if (x->ndim < 2)
    return tensor_error(x->ctx, TVK_ERR_SHAPE, "%s: x has shape %s: expected (N, C, ...)", op, xs);
  int64_t N = x->shape[0], C = x->shape[1];
  if (groups < 1 || C % groups)
    return tensor_error(x->ctx, TVK_ERR_INVALID_ARG,
                        "%s: groups %lld must be >= 1 and divide the %lld channels of x %s", op,
                        (long long)groups, (long long)C, xs);
  if (!isfinite(eps) || eps < 0)
    return tensor_error(x->ctx, TVK_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op, eps);
  if ((err = check_shape(op, "weight", weight, x, 1, &C, "the channels")) ||
      (err = check_shape(op, "bias", bias, x, 1, &C, "the channels")))
    return err;
  tvk_ctx *ctx = x->ctx;
  tvk_dtype res = norm_dtype(x, 2, (tvk_tensor *[]){weight, bias}), cdt = comp_dtype(res);
  size_t sc = tvk_scope_begin(ctx);
  /* the elements of one sample's group: C / groups channels times the rest */
  int64_t per = C / groups * bc_numel(x->ndim - 2, x->shape + 2);
  int64_t g3[3] = {N, groups, per};
  int last = 2;
  tvk_tensor *xf = tvk_reshape(tvk_cast(x, cdt), 3, g3);
  tvk_tensor *d = tvk_sub(xf, tvk_mean(xf, 1, &last, true));
  tvk_tensor *v = tvk_mean(tvk_mul(d, d), 1, &last, true);
  tvk_tensor *r =
      tvk_reshape(tvk_mul(d, tvk_rsqrt(tvk_add(v, front_const(ctx, cdt, eps)))), x->ndim, x->shape);
  int64_t cs[TVK_MAX_DIMS];
  cs[0] = C;
  for (int i = 1; i < x->ndim - 1; i++) cs[i] = 1;
  if (weight) r = tvk_mul(r, tvk_reshape(weight, x->ndim - 1, cs));
  if (bias) r = tvk_add(r, tvk_reshape(bias, x->ndim - 1, cs));
  r = tvk_cast(r, res);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_instance_norm(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias, double eps) {
  return tvk_group_norm(x, x && x->ndim >= 2 ? x->shape[1] : 1, weight, bias, eps);
}

/* ---------------------------------------------------------------- batchnorm */

/* p (C,) seen as x's shape: reshaped to (1, C, 1, ...) and expanded, so the
 * elementwise tail reads the leaf through a view (no (C,) temporary). */
static tvk_tensor *per_channel(tvk_tensor *p, tvk_tensor *x) {
  int64_t s[TVK_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) s[d] = d == 1 ? x->shape[1] : 1;
  return tvk_expand(tvk_reshape(p, x->ndim, s), x->ndim, x->shape);
}

tvk_tensor *tvk_batchnorm(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias, tvk_tensor *mean,
                          tvk_tensor *var, double eps) {
  const char *op = "batchnorm";
  bool bad;
  tvk_tensor *all[5] = {x, weight, bias, mean, var}, *given[5];
  int ng = present(5, all, given);
  if (ng == 0) return NULL; /* no context to attach an error to */
  tvk_tensor *err = bc_check(op, ng, given, &bad);
  if (bad) return err;
  tvk_ctx *ctx = given[0]->ctx;
  if (!x || !mean || !var)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: %s is NULL (x, mean and var are required)",
                        op,
                        !x      ? "x"
                        : !mean ? "mean"
                                : "var");
  char xs[BC_SHAPE_STR_MAX];
  if (x->ndim < 2)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s: expected (N, C, ...), 2 dims or more", op,
                        bc_shape_str(x->ndim, x->shape, xs, sizeof xs));
  if (!isfinite(eps) || eps < 0)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op, eps);
  const char *names[5] = {"x", "weight", "bias", "mean", "var"};
  for (int i = 1; i < 5; i++)
    if ((err = check_shape(op, names[i], all[i], x, 1, &x->shape[1], "one per channel")))
      return err;

  tvk_dtype res = norm_dtype(x, 4, all + 1), cdt = comp_dtype(res);
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *m = tvk_cast(per_channel(mean, x), cdt), *v = tvk_cast(per_channel(var, x), cdt);
  tvk_tensor *r = tvk_sub(tvk_cast(x, cdt), m);
  r = tvk_mul(r, tvk_rsqrt(tvk_add(v, front_const(ctx, cdt, eps))));
  if (weight) r = tvk_mul(r, per_channel(weight, x));
  if (bias) r = tvk_add(r, per_channel(bias, x));
  r = tvk_cast(r, res);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

/* ---------------------------------------------------------------- batchnorm_train */

/* running_mean or running_var (named `name`) as tvk_assign writes it: its own
 * buffer, made before any of this call's graph exists. A pending update of an
 * earlier call (or a constant) is realized here, so that this realize cannot
 * turn the batch statistics of this call's graph into data, as it could in
 * the middle of tvk_assign. NULL, or the error tensor. */
static tvk_tensor *running_buffer(const char *op, const char *name, tvk_tensor *r) {
  if (!r) return NULL;
  tvk_status st = front_own_buffer(r);
  if (st == TVK_OK) return NULL;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", tvk_ctx_error(r->ctx));
  return tensor_error(r->ctx, st, "%s: %s: %s", op, name, msg);
}

/* run = (1 - momentum) * run + momentum * stat * scale, assigned lazily;
 * computed in the float dtype of the two (the stat (C,) is this call's). */
static tvk_status update_running(tvk_tensor *run, tvk_tensor *stat, double momentum, double scale) {
  tvk_ctx *ctx = run->ctx;
  tvk_dtype cdt = comp_dtype(norm_dtype(run, 1, &stat));
  tvk_tensor *s = tvk_cast(stat, cdt);
  if (scale != 1) s = tvk_mul(s, front_const(ctx, cdt, scale));
  tvk_tensor *v = tvk_add(tvk_mul(tvk_cast(run, cdt), front_const(ctx, cdt, 1 - momentum)),
                          tvk_mul(s, front_const(ctx, cdt, momentum)));
  return tvk_assign(run, v);
}

tvk_tensor *tvk_batchnorm_train(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias,
                                tvk_tensor *running_mean, tvk_tensor *running_var, double momentum,
                                double eps) {
  const char *op = "batchnorm_train";
  bool bad;
  tvk_tensor *all[5] = {x, weight, bias, running_mean, running_var}, *given[5];
  int ng = present(5, all, given);
  if (ng == 0) return NULL; /* no context to attach an error to */
  tvk_tensor *err = bc_check(op, ng, given, &bad);
  if (bad) return err;
  tvk_ctx *ctx = given[0]->ctx;
  if (!x) return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: x is NULL", op);
  char xs[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, xs, sizeof xs);
  if (x->ndim < 2)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s: expected (N, C, ...), 2 dims or more", op, xs);
  if (!(momentum >= 0 && momentum <= 1)) /* NaN too */
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: momentum %g is outside [0, 1]", op,
                        momentum);
  if (!isfinite(eps) || eps < 0)
    return tensor_error(ctx, TVK_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op, eps);
  const char *names[5] = {"x", "weight", "bias", "running_mean", "running_var"};
  for (int i = 1; i < 5; i++)
    if ((err = check_shape(op, names[i], all[i], x, 1, &x->shape[1], "one per channel")))
      return err;
  for (int i = 3; i < 5; i++)
    if (all[i] && !dt_is_float(all[i]->uop->dtype))
      return tensor_error(ctx, TVK_ERR_DTYPE,
                          "%s: %s has dtype %s: the running statistics need a float dtype", op,
                          names[i], tvk_dtype_name(all[i]->dtype));
  int64_t n = 1; /* elements per channel */
  for (int d = 0; d < x->ndim; d++)
    if (d != 1) n *= x->shape[d];
  if (running_var && n < 2)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s, %lld value(s) per channel: running_var needs 2 or "
                        "more (its unbiased variance divides by n - 1)",
                        op, xs, (long long)n);
  if (running_mean && n < 1)
    return tensor_error(ctx, TVK_ERR_SHAPE,
                        "%s: x has shape %s, no values per channel: running_mean needs 1 or more",
                        op, xs);
  if ((err = running_buffer(op, "running_mean", running_mean)) ||
      (err = running_buffer(op, "running_var", running_var)))
    return err;
  if (running_mean && running_var && running_mean->uop->src[0] == running_var->uop->src[0])
    return tensor_error(ctx, TVK_ERR_INVALID_ARG,
                        "%s: running_mean and running_var are one buffer: each needs its own", op);

  tvk_dtype res = norm_dtype(x, 2, all + 1), cdt = comp_dtype(res);
  int axes[TVK_MAX_DIMS], nax = 0;
  for (int d = 0; d < x->ndim; d++)
    if (d != 1) axes[nax++] = d;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *xf = tvk_cast(x, cdt);
  tvk_tensor *mean = tvk_mean(xf, nax, axes, false); /* (C,) */
  tvk_tensor *d = tvk_sub(xf, per_channel(mean, x));
  tvk_tensor *var = tvk_mean(tvk_mul(d, d), nax, axes, false); /* (C,), biased */
  tvk_tensor *r = tvk_mul(d, tvk_rsqrt(tvk_add(per_channel(var, x), front_const(ctx, cdt, eps))));
  if (weight) r = tvk_mul(r, per_channel(weight, x));
  if (bias) r = tvk_add(r, per_channel(bias, x));
  r = tvk_cast(r, res);
  /* the updates read the batch statistics; r reads neither running tensor */
  tvk_status st = r->status;
  if (st == TVK_OK && running_mean) st = update_running(running_mean, mean, momentum, 1);
  if (st == TVK_OK && running_var) {
    st = update_running(running_var, var, momentum, (double)n / (double)(n - 1));
    if (st != TVK_OK && running_mean) /* undo: nothing is assigned on an error */
      tensor_set_uop(running_mean, running_mean->uop->src[0]);
  }
  char msg[512] = "";
  if (st != TVK_OK)
    snprintf(msg, sizeof msg, "%s", r->status != TVK_OK ? tvk_error_of(r) : tvk_ctx_error(ctx));
  tvk_scope_end(ctx, sc, st == TVK_OK, &r);
  return st == TVK_OK ? r : tensor_error(ctx, st, "%s: %s", op, msg);
}
