/* Optimisers (tvk.h: tvk_optim_*): SGD with momentum, Nesterov and weight
 * decay; Adam and AdamW with bias correction, in PyTorch's formulation.
 *
 * A step is built from tensor ops and tvk_assign: each parameter and its
 * state (momentum, first and second moments) get an assign, and the realize
 * the app runs after it (of the updated parameters, usually with the loss)
 * computes the whole step in as few kernels as the scheduler makes. The
 * per-step numbers (the learning rate, Adam's bias corrections) are float32
 * tvk_scalar values, given to the kernels at launch: a step compiles nothing
 * the first one did not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

struct tvk_optim {
  tvk_ctx *ctx;
  tvk_optim *prev, *next; /* the context's optimisers */
  tvk_optim_options o;
  int n;
  tvk_tensor **params; /* the app's */
  tvk_tensor **m, **v; /* state, ours: momentum / first moment, second moment (Adam) */
  uint64_t t;          /* steps taken */
};

/* A zero tensor with memory of its own, shaped and placed as p (on its
 * device, or cut and on the devices of its parts). */
static tvk_tensor *state_like(tvk_tensor *p) {
  tvk_tensor *zero = tvk_full(p->ctx, p->dtype, p->ndim, p->shape, 0);
  tvk_tensor *placed = front_shard_like(zero, p);
  tvk_release(zero);
  tvk_tensor *z = tvk_contiguous(placed);
  tvk_release(placed);
  return z && tvk_realize(1, &z) == TVK_OK ? z : (tvk_release(z), NULL);
}

static tvk_status check_options(tvk_ctx *ctx, tvk_optim_options *o) {
  if (o->kind < TVK_OPTIM_SGD || o->kind > TVK_OPTIM_ADAMW)
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "optim_create: kind %d is not a tvk_optim_kind",
                   (int)o->kind);
  if (o->kind != TVK_OPTIM_SGD) { /* PyTorch's defaults */
    if (o->beta1 == 0) o->beta1 = 0.9;
    if (o->beta2 == 0) o->beta2 = 0.999;
    if (o->eps == 0) o->eps = 1e-8;
  }
  const char *bad = !(o->lr >= 0)                            ? "lr"
                    : !(o->momentum >= 0 && o->momentum < 1) ? "momentum"
                    : !(o->weight_decay >= 0)                ? "weight_decay"
                    : !(o->beta1 >= 0 && o->beta1 < 1)       ? "beta1"
                    : !(o->beta2 >= 0 && o->beta2 < 1)       ? "beta2"
                    : !(o->eps >= 0)                         ? "eps"
                    : o->nesterov && o->momentum == 0        ? "nesterov (needs momentum)"
                                                             : NULL;
  if (!bad) return TVK_OK;
  return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                 "optim_create: %s is out of range (lr %g, momentum %g, weight_decay %g, beta1 "
                 "%g, beta2 %g, eps %g)",
                 bad, o->lr, o->momentum, o->weight_decay, o->beta1, o->beta2, o->eps);
}

void tvk_optim_destroy(tvk_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    if (o->m) tvk_release(o->m[i]);
    if (o->v) tvk_release(o->v[i]);
  }
  free(o->params), free(o->m), free(o->v);
  if (o->prev)
    o->prev->next = o->next;
  else
    o->ctx->optims = o->next;
  if (o->next) o->next->prev = o->prev;
  free(o);
}

void optim_free_all(tvk_ctx *ctx) {
  while (ctx->optims) tvk_optim_destroy(ctx->optims);
}

tvk_optim *tvk_optim_create_sized(tvk_ctx *ctx, int n, tvk_tensor *const *params,
                                  const tvk_optim_options *opts, size_t opts_size) {
  if (!ctx) return NULL;
  tvk_optim_options o = {0};
  if (opts) memcpy(&o, opts, opts_size < sizeof o ? opts_size : sizeof o);
  if (!opts || n < 1 || !params) {
    err_set(&ctx->err, TVK_ERR_INVALID_ARG,
            "optim_create: bad arguments (opts %p, n %d, params %p)", (const void *)opts, n,
            (const void *)params);
    return NULL;
  }
  if (check_options(ctx, &o) != TVK_OK) return NULL;
  for (int i = 0; i < n; i++) {
    const tvk_tensor *p = params[i];
    if (!p || p->ctx != ctx || p->status != TVK_OK ||
        !dt_is_float(dt_make(dt_from_tvk(p->dtype)))) {
      err_set(&ctx->err, TVK_ERR_INVALID_ARG, "optim_create: parameter %d is %s", i,
              !p                    ? "NULL"
              : p->ctx != ctx       ? "of another context"
              : p->status != TVK_OK ? "an error tensor"
                                    : "not of a float dtype");
      return NULL;
    }
  }
  tvk_optim *op = calloc(1, sizeof *op);
  bool moments = o.kind != TVK_OPTIM_SGD, state = moments || o.momentum > 0;
  if (op) {
    op->params = malloc((size_t)n * sizeof *op->params);
    if (state) op->m = calloc((size_t)n, sizeof *op->m);
    if (moments) op->v = calloc((size_t)n, sizeof *op->v);
  }
  if (!op || !op->params || (state && !op->m) || (moments && !op->v)) {
    if (op) free(op->params), free(op->m), free(op->v);
    free(op);
    err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "optim_create: out of memory");
    return NULL;
  }
  *op = (tvk_optim){ctx, NULL, ctx->optims, o, n, op->params, op->m, op->v, 0};
  if (ctx->optims) ctx->optims->prev = op;
  ctx->optims = op;
  memcpy(op->params, params, (size_t)n * sizeof *params);
  for (int i = 0; i < n; i++) {
    if ((op->m && !(op->m[i] = state_like(params[i]))) ||
        (op->v && !(op->v[i] = state_like(params[i])))) {
      tvk_optim_destroy(op);
      if (!*tvk_ctx_error(ctx))
        err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "optim_create: out of memory");
      return NULL;
    }
  }
  return op;
}

tvk_status tvk_optim_set_lr(tvk_optim *o, double lr) {
  if (!o) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "optim_set_lr: optim is NULL");
  if (!(lr >= 0)) return err_set(&o->ctx->err, TVK_ERR_INVALID_ARG, "optim_set_lr: lr %g < 0", lr);
  o->o.lr = lr;
  return TVK_OK;
}

/* a * s as a launch value (a changing number compiles nothing) */
static tvk_tensor *times(tvk_tensor *a, double s) {
  return tvk_mul(a, tvk_scalar(a->ctx, TVK_FLOAT32, s));
}

tvk_status tvk_optim_step(tvk_optim *o, tvk_tensor *const *grads) {
  if (!o) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "optim_step: optim is NULL");
  tvk_ctx *ctx = o->ctx;
  if (!grads) return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "optim_step: grads is NULL");
  for (int i = 0; i < o->n; i++) {
    const tvk_tensor *g = grads[i], *p = o->params[i];
    if (!g || g->ctx != ctx)
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "optim_step: gradient %d is %s", i,
                     g ? "of another context" : "NULL");
    if (g->status != TVK_OK)
      return err_set(&ctx->err, g->status, "optim_step: gradient %d: %s", i, tvk_error_of(g));
    if (g->ndim != p->ndim || memcmp(g->shape, p->shape, (size_t)p->ndim * sizeof *p->shape))
      return err_set(&ctx->err, TVK_ERR_SHAPE,
                     "optim_step: gradient %d's shape is not parameter %d's", i, i);
  }
  o->t++;
  const tvk_optim_options *op = &o->o;
  double b1t = 1 - pow(op->beta1, (double)o->t), b2t = 1 - pow(op->beta2, (double)o->t);
  tvk_status st = TVK_OK;
  for (int i = 0; i < o->n && st == TVK_OK; i++) {
    size_t scope = tvk_scope_begin(ctx);
    tvk_tensor *p = o->params[i], *g = grads[i];
    if (op->weight_decay > 0 && op->kind != TVK_OPTIM_ADAMW) /* L2: into the gradient */
      g = tvk_add(g, times(p, op->weight_decay));
    tvk_tensor *step;
    if (op->kind == TVK_OPTIM_SGD) {
      step = g;
      if (o->m) { /* buf = momentum * buf + g (the first step: g) */
        st = tvk_assign(o->m[i], tvk_add(times(o->m[i], op->momentum), g));
        step = op->nesterov ? tvk_add(g, times(o->m[i], op->momentum)) : o->m[i];
      }
    } else {
      st = tvk_assign(o->m[i], tvk_add(times(o->m[i], op->beta1), times(g, 1 - op->beta1)));
      if (st == TVK_OK)
        st = tvk_assign(o->v[i],
                        tvk_add(times(o->v[i], op->beta2), times(tvk_mul(g, g), 1 - op->beta2)));
      /* m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) */
      tvk_tensor *den =
          tvk_add(tvk_sqrt(times(o->v[i], 1 / b2t)), tvk_scalar(ctx, TVK_FLOAT32, op->eps));
      step = tvk_div(times(o->m[i], 1 / b1t), den);
      if (op->kind == TVK_OPTIM_ADAMW && op->weight_decay > 0) /* decoupled */
        step = tvk_add(step, times(p, op->weight_decay));
    }
    if (st == TVK_OK) st = tvk_assign(p, tvk_sub(p, times(step, op->lr)));
    tvk_scope_end(ctx, scope, 0, NULL);
  }
  return st;
}
