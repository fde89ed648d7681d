/* Symbolic sizes (tvk.h, "symbolic sizes"): the context's size variables and
 * the values bound to them, and what the rest of the frontend asks of them.
 *
 * A size is a sint (ir/sint.h): a plain number, or a handle to an expression
 * over variables, interned process-wide. What is per context is which
 * variables the context made (so a name has one range in it: kernels bind
 * values by name) and the value each is bound to now. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/sint.h"

static bool name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n >= 32 || (name[0] >= '0' && name[0] <= '9')) return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return sched_value_index(name) < 0; /* s<digits> names a tvk_scalar's launch value */
}

static SizeVar *find_var(const tvk_ctx *ctx, sint v) {
  for (int i = 0; i < ctx->nsizes; i++)
    if (ctx->sizes[i].var == v) return &ctx->sizes[i];
  return NULL;
}

int64_t tvk_size_var(tvk_ctx *ctx, const char *name, int64_t min, int64_t max) {
  if (!ctx) return -1;
  if (!name || !name_ok(name)) {
    err_set(&ctx->err, TVK_ERR_INVALID_ARG,
            "size_var: name \"%.40s\" is not letters, digits and '_' under 32 bytes "
            "(not starting with a digit, not s<digits>)",
            name ? name : "(null)");
    return -1;
  }
  if (min < 1 || min > max || max > INT32_MAX) {
    err_set(&ctx->err, TVK_ERR_INVALID_ARG,
            "size_var: range [%lld, %lld] of '%s' is not within 1 <= min <= max <= %d",
            (long long)min, (long long)max, name, INT32_MAX);
    return -1;
  }
  for (int i = 0; i < ctx->nsizes; i++) {
    const SizeVar *s = &ctx->sizes[i];
    if (strcmp(s->name, name) != 0) continue;
    if (s->lo == min && s->hi == max) return s->var;
    err_set(&ctx->err, TVK_ERR_INVALID_ARG,
            "size_var: '%s' is already a variable of range [%lld, %lld] in this context, "
            "not [%lld, %lld]",
            name, (long long)s->lo, (long long)s->hi, (long long)min, (long long)max);
    return -1;
  }
  sint v = sint_var(name, min, max);
  if (v == SINT_NONE) {
    err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "size_var: out of memory");
    return -1;
  }
  if (ctx->nsizes == ctx->capsizes) {
    int cap = ctx->capsizes ? 2 * ctx->capsizes : 8;
    SizeVar *g = realloc(ctx->sizes, (size_t)cap * sizeof *g);
    if (!g) {
      err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "size_var: out of memory");
      return -1;
    }
    ctx->sizes = g, ctx->capsizes = cap;
  }
  const char *kept = NULL;
  sint_var_info(v, &kept, NULL, NULL); /* the name lives as long as the process */
  ctx->sizes[ctx->nsizes++] = (SizeVar){.var = v, .name = kept, .lo = min, .hi = max};
  return v;
}

/* A size as the sint helpers take it: a handle, or a number >= 0. */
static bool size_ok(int64_t s) { return sint_is_sym(s) || s >= 0; }

int64_t tvk_size_add(int64_t a, int64_t b) {
  /* b may be a negative number (n + -1), a may not: a failed size (-1) stays
   * one; the result may not be negative either */
  if (!size_ok(a) || !(sint_is_sym(b) || sint_is_int(b))) return -1;
  if (!sint_any_sym(a, b) && ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < -INT64_MAX - b)))
    return -1;
  sint r = sint_add(a, b);
  return r == SINT_NONE || sint_vmin(r) < 0 ? -1 : r;
}

int64_t tvk_size_mul(int64_t a, int64_t b) {
  if (!size_ok(a) || !size_ok(b)) return -1;
  if (!sint_any_sym(a, b) && b != 0 && a > INT64_MAX / b) return -1;
  sint r = sint_mul(a, b);
  return r == SINT_NONE ? -1 : r;
}

bool tvk_size_is_symbolic(int64_t size) { return sint_is_sym(size); }

tvk_status tvk_bind(tvk_ctx *ctx, int64_t var, int64_t value) {
  if (!ctx) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "bind: ctx is NULL");
  SizeVar *s = sint_is_sym(var) ? find_var(ctx, var) : NULL;
  if (!s) {
    char t[64];
    sint_str(var, t, sizeof t);
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "bind: %s is not a size variable of this context (tvk_size_var)", t);
  }
  if (value < s->lo || value > s->hi)
    return err_set(&ctx->err, TVK_ERR_SHAPE,
                   "bind: %lld for '%s' is outside its range [%lld, %lld]", (long long)value,
                   s->name, (long long)s->lo, (long long)s->hi);
  s->value = value, s->bound = true;
  return TVK_OK;
}

int ctx_size_bindings(const tvk_ctx *ctx, const char **names, int64_t *vals, int max) {
  int n = 0;
  for (int i = 0; i < ctx->nsizes && n < max; i++)
    if (ctx->sizes[i].bound) names[n] = ctx->sizes[i].name, vals[n++] = ctx->sizes[i].value;
  return n;
}

tvk_status ctx_size_eval(const tvk_ctx *ctx, Error *err, const char *op, sint s, int64_t *out) {
  if (!sint_is_sym(s)) return *out = s, TVK_OK;
  sint vars[SIZE_VARS_MAX];
  int64_t vals[SIZE_VARS_MAX];
  int nv = sint_vars(s, vars, 0, SIZE_VARS_MAX);
  for (int i = 0; i < nv; i++) {
    const SizeVar *v = find_var(ctx, vars[i]);
    if (!v || !v->bound) {
      const char *name = "?";
      sint_var_info(vars[i], &name, NULL, NULL);
      return err ? err_set(err, TVK_ERR_INVALID_ARG,
                           "%s: size variable '%s' has no value: bind one with tvk_bind", op, name)
                 : TVK_ERR_INVALID_ARG;
    }
    vals[i] = v->value;
  }
  sint r = nv >= 0 ? sint_eval(s, nv, vars, vals) : SINT_NONE;
  if (r == SINT_NONE)
    return err ? err_set(err, TVK_ERR_INTERNAL, "%s: a size could not be evaluated", op)
               : TVK_ERR_INTERNAL;
  *out = r;
  return TVK_OK;
}

tvk_status ctx_bound_numel(const tvk_ctx *ctx, Error *err, const char *op, int ndim,
                           const int64_t *shape, int64_t *out) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t v;
    tvk_status st = ctx_size_eval(ctx, err, op, shape[d], &v);
    if (st != TVK_OK) return st;
    n *= v;
  }
  *out = n;
  return TVK_OK;
}

int64_t tvk_size_value(const tvk_ctx *ctx, int64_t size) {
  int64_t v;
  if (!ctx) return sint_is_sym(size) ? -1 : size;
  return ctx_size_eval(ctx, NULL, "", size, &v) == TVK_OK ? v : -1;
}

int tvk_size_str(int64_t size, char *buf, size_t n) { return sint_str(size, buf, n); }

tvk_status ctx_buffer_check_sizes(tvk_ctx *ctx, const char *op, const Buffer *b) {
  for (int i = 0; i < b->nsizes; i++) {
    int64_t now;
    tvk_status st = ctx_size_eval(ctx, &ctx->err, op, b->size_vars[i], &now);
    if (st != TVK_OK) return st;
    if (now == b->size_vals[i]) continue;
    const char *name = "?";
    sint_var_info(b->size_vars[i], &name, NULL, NULL);
    return err_set(&ctx->err, TVK_ERR_SHAPE,
                   "%s: a tensor read here was made for %s = %lld, and %s is bound to %lld now "
                   "(compute it again, or bind %lld)",
                   op, name, (long long)b->size_vals[i], name, (long long)now,
                   (long long)b->size_vals[i]);
  }
  return TVK_OK;
}

int shape_first_sym(int ndim, const int64_t *shape) {
  for (int d = 0; d < ndim; d++)
    if (sint_is_sym(shape[d])) return d;
  return -1;
}

tvk_tensor *front_refuse_symbolic(const char *op, int n, tvk_tensor *const *ts) {
  for (int i = 0; i < n; i++) {
    int d = ts[i] ? shape_first_sym(ts[i]->ndim, ts[i]->shape) : -1;
    if (d < 0) continue;
    char t[64];
    sint_str(ts[i]->shape[d], t, sizeof t);
    if (n == 1)
      return tensor_error(ts[i]->ctx, TVK_ERR_SHAPE,
                          "%s: dim %d of the input has the symbolic size %s; %s does not take "
                          "symbolic sizes yet",
                          op, d, t, op);
    return tensor_error(ts[i]->ctx, TVK_ERR_SHAPE,
                        "%s: dim %d of input %d has the symbolic size %s; %s does not take "
                        "symbolic sizes yet",
                        op, d, i, t, op);
  }
  return NULL;
}

tvk_status ctx_check_size(tvk_ctx *ctx, const char *op, const char *what, sint s) {
  if (!sint_is_sym(s))
    return s >= 0 ? TVK_OK
                  : err_set(&ctx->err, TVK_ERR_SHAPE, "%s: %s is negative (%lld)", op, what,
                            (long long)s);
  sint vars[SIZE_VARS_MAX];
  int nv = sint_vars(s, vars, 0, SIZE_VARS_MAX);
  if (nv < 0)
    return err_set(&ctx->err, TVK_ERR_SHAPE, "%s: %s uses more than %d size variables", op, what,
                   SIZE_VARS_MAX);
  for (int i = 0; i < nv; i++) {
    if (find_var(ctx, vars[i])) continue;
    const char *name = "?";
    sint_var_info(vars[i], &name, NULL, NULL);
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "%s: %s uses '%s', which is not a size variable of this context", op, what,
                   name);
  }
  if (sint_vmin(s) < 0) {
    char t[64];
    sint_str(s, t, sizeof t);
    return err_set(&ctx->err, TVK_ERR_SHAPE, "%s: %s %s can be negative", op, what, t);
  }
  return TVK_OK;
}

tvk_tensor *front_check_size(tvk_ctx *ctx, const char *op, const char *what, sint s) {
  tvk_status st = ctx_check_size(ctx, op, what, s);
  return st == TVK_OK ? NULL : tensor_error_ctx(ctx, st);
}

tvk_status ctx_buffer_record_sizes(tvk_ctx *ctx, Buffer *b, int ndim, const int64_t *shape) {
  int n = 0;
  for (int d = 0; d < ndim && n >= 0; d++)
    if (sint_is_sym(shape[d])) n = sint_vars(shape[d], b->size_vars, n, BUFFER_SIZES_MAX);
  if (n < 0)
    return err_set(&ctx->err, TVK_ERR_SHAPE, "a shape of more than %d size variables",
                   BUFFER_SIZES_MAX);
  for (int i = 0; i < n; i++) {
    const SizeVar *v = find_var(ctx, b->size_vars[i]);
    if (!v || !v->bound)
      return err_set(&ctx->err, TVK_ERR_INTERNAL, "a buffer's size variable has no value");
    b->size_vals[i] = v->value;
  }
  b->nsizes = n;
  return TVK_OK;
}
