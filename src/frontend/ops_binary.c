/* Binary elementwise ops and where (tvk.h): broadcast, promote, then one
 * ALU op or a few, all elementwise so that they fuse into one kernel. How each
 * composite is built, and why, is in docs/frontend.md. */
#include <stdio.h>

#include "frontend/ops_common.h"

/* Dtype sets an op takes (of the promoted dtype). */
#define TAKES_ALL (DT_BIT(DT_BOOL) | DT_BITS_INT | DT_BITS_FLOAT)
#define TAKES_INTB (DT_BIT(DT_BOOL) | DT_BITS_INT)
#define TAKES_INT DT_BITS_INT

/* How operands are prepared before the op's builder sees them. */
typedef enum {
  PREP_PROMOTE, /* both cast to the promoted dtype */
  PREP_FLOAT,   /* promoted, then float32 unless already a float */
  PREP_TRUTH,   /* each tested != 0 (bool), no promotion */
} Prep;

/* Builds the op on two broadcast operands of the prepared dtype. */
typedef UOp *(*BinFn)(const Ew *e, UOp *a, UOp *b);

typedef struct {
  const char *name;
  uint32_t takes;   /* DT_BITs of promoted dtypes accepted */
  const char *what; /* the accepted dtypes in words, for the error */
  Prep prep;
  BinFn fn;
} BinOp;

static bool is_float(UOp *x) { return dt_is_float(x->dtype); }
static bool is_bool(UOp *x) { return dt_is_bool(x->dtype); }

/* ---------------------------------------------------------------- builders */

static UOp *b_add(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_add(a, b);
}
static UOp *b_mul(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_mul(a, b);
}

/* bool: (a - b) truncated to bool is a != b; ints: a + b*-1 (wraps exactly, the
 * IR's canonical form); floats: SUB (a + (-b) is the same IEEE result). */
static UOp *b_sub(const Ew *e, UOp *a, UOp *b) {
  if (is_bool(a)) return ew_ne(a, b);
  if (!is_float(a)) return ew_add(a, ew_mulc(e, b, -1));
  return ew_alu2(OP_SUB, a, b);
}

/* FDIV is IEEE division (exact rounding), rendered by every language. */
static UOp *b_div(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_FDIV, a, b);
}

/* POW is C's pow with its IEEE 754 special cases: negative bases with integer
 * exponents get their sign from the parity, (-0) ** -1 = -inf, 0**0 = 1. */
static UOp *b_pow(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_POW, a, b);
}

/* MAX keeps its first operand unless the second is greater, so a NaN only
 * wins in first place, and sources of a commutative op may be reordered:
 * NaN in either operand is made to win with a + b (NaN then). */
static UOp *max_nan(UOp *a, UOp *b) {
  UOp *nan = ew_alu2(OP_OR, ew_isnan(a), ew_isnan(b));
  return ew_where(nan, ew_add(a, b), ew_alu2(OP_MAX, a, b));
}

static UOp *b_maximum(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return is_float(a) ? max_nan(a, b) : ew_alu2(OP_MAX, a, b);
}

/* floats: -max(-a, -b) (negation is exact); ints: a < b ? a : b (negation
 * would wrap at the minimum); bool: a & b. */
static UOp *b_minimum(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  if (is_bool(a)) return ew_alu2(OP_AND, a, b);
  if (!is_float(a)) return ew_where(ew_lt(a, b), a, b);
  return ew_alu1(OP_NEG, max_nan(ew_alu1(OP_NEG, a), ew_alu1(OP_NEG, b)));
}

static UOp *b_lt(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_lt(a, b);
}
static UOp *b_gt(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_lt(b, a);
}

/* a <= b: not (b < a) would be true at NaN, so floats use (a < b) | (a == b). */
static UOp *b_le(const Ew *e, UOp *a, UOp *b) {
  if (!is_float(a)) return ew_not(e, ew_lt(b, a));
  return ew_alu2(OP_OR, ew_lt(a, b), ew_not(e, ew_ne(a, b)));
}
static UOp *b_ge(const Ew *e, UOp *a, UOp *b) { return b_le(e, b, a); }

static UOp *b_eq(const Ew *e, UOp *a, UOp *b) { return ew_not(e, ew_ne(a, b)); }
static UOp *b_ne(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_ne(a, b);
}

static UOp *b_and(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_AND, a, b);
}
static UOp *b_or(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_OR, a, b);
}
static UOp *b_xor(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_XOR, a, b);
}
static UOp *b_shl(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_SHL, a, b);
}
static UOp *b_shr(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_SHR, a, b);
}
static UOp *b_idiv(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_IDIV, a, b);
}
static UOp *b_mod(const Ew *e, UOp *a, UOp *b) {
  (void)e;
  return ew_alu2(OP_MOD, a, b);
}

/* ---------------------------------------------------------------- the table */

static const char any_dtype[] = "any dtype";
static const char intb_dtypes[] = "integer and bool dtypes only";
static const char int_dtypes[] = "integer dtypes only";

static const BinOp op_add = {"add", TAKES_ALL, any_dtype, PREP_PROMOTE, b_add};
static const BinOp op_sub = {"sub", TAKES_ALL, any_dtype, PREP_PROMOTE, b_sub};
static const BinOp op_mul = {"mul", TAKES_ALL, any_dtype, PREP_PROMOTE, b_mul};
static const BinOp op_div = {"div", TAKES_ALL, any_dtype, PREP_FLOAT, b_div};
static const BinOp op_pow = {"pow", TAKES_ALL, any_dtype, PREP_FLOAT, b_pow};
static const BinOp op_maximum = {"maximum", TAKES_ALL, any_dtype, PREP_PROMOTE, b_maximum};
static const BinOp op_minimum = {"minimum", TAKES_ALL, any_dtype, PREP_PROMOTE, b_minimum};
static const BinOp op_lt = {"lt", TAKES_ALL, any_dtype, PREP_PROMOTE, b_lt};
static const BinOp op_le = {"le", TAKES_ALL, any_dtype, PREP_PROMOTE, b_le};
static const BinOp op_gt = {"gt", TAKES_ALL, any_dtype, PREP_PROMOTE, b_gt};
static const BinOp op_ge = {"ge", TAKES_ALL, any_dtype, PREP_PROMOTE, b_ge};
static const BinOp op_eq = {"eq", TAKES_ALL, any_dtype, PREP_PROMOTE, b_eq};
static const BinOp op_ne = {"ne", TAKES_ALL, any_dtype, PREP_PROMOTE, b_ne};
static const BinOp op_land = {"logical_and", TAKES_ALL, any_dtype, PREP_TRUTH, b_and};
static const BinOp op_lor = {"logical_or", TAKES_ALL, any_dtype, PREP_TRUTH, b_or};
static const BinOp op_band = {"bitwise_and", TAKES_INTB, intb_dtypes, PREP_PROMOTE, b_and};
static const BinOp op_bor = {"bitwise_or", TAKES_INTB, intb_dtypes, PREP_PROMOTE, b_or};
static const BinOp op_bxor = {"bitwise_xor", TAKES_INTB, intb_dtypes, PREP_PROMOTE, b_xor};
static const BinOp op_shl = {"shl", TAKES_INT, int_dtypes, PREP_PROMOTE, b_shl};
static const BinOp op_shr = {"shr", TAKES_INT, int_dtypes, PREP_PROMOTE, b_shr};
static const BinOp op_idiv = {"idiv", TAKES_INT, int_dtypes, PREP_PROMOTE, b_idiv};
static const BinOp op_mod = {"mod", TAKES_INT, int_dtypes, PREP_PROMOTE, b_mod};

/* ---------------------------------------------------------------- driver */

static tvk_tensor *shape_error(const char *op, int n, tvk_tensor *const *ts) {
  char s[3][BC_SHAPE_STR_MAX];
  for (int i = 0; i < n; i++) bc_shape_str(ts[i]->ndim, ts[i]->shape, s[i], sizeof s[i]);
  if (n == 2)
    return tensor_error(ts[0]->ctx, TVK_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                        s[0], s[1]);
  return tensor_error(ts[0]->ctx, TVK_ERR_SHAPE, "%s: shapes %s, %s and %s do not broadcast", op,
                      s[0], s[1], s[2]);
}

static tvk_tensor *dtype_error(const BinOp *op, const tvk_tensor *a, const tvk_tensor *b,
                               ScalarType dt) {
  if (a->dtype == b->dtype)
    return tensor_error(a->ctx, TVK_ERR_DTYPE, "%s: dtype %s is not supported (%s)", op->name,
                        dt_scalar_name(dt), op->what);
  return tensor_error(
      a->ctx, TVK_ERR_DTYPE, "%s: dtypes %s and %s promote to %s, which is not supported (%s)",
      op->name, tvk_dtype_name(a->dtype), tvk_dtype_name(b->dtype), dt_scalar_name(dt), op->what);
}

static tvk_tensor *binary(const BinOp *op, tvk_tensor *a, tvk_tensor *b) {
  tvk_tensor *ts[2] = {a, b};
  bool bad;
  tvk_tensor *err = bc_check_sym(op->name, 2, ts, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  int nd;
  int64_t shape[TVK_MAX_DIMS];
  if (!bc_broadcast_shape(2, ts, &nd, shape)) return shape_error(op->name, 2, ts);
  ScalarType dt = bc_promote(2, ts);
  if (!(op->takes & DT_BIT(dt))) return dtype_error(op, a, b, dt);
  if (op->prep == PREP_FLOAT && !(DT_BITS_FLOAT & DT_BIT(dt))) dt = DT_FLOAT32;

  size_t m = FRONT_BEGIN(ctx);
  Ew e = ew_frame(ctx, nd, shape);
  UOp *x = bc_to_shape(a->uop, a->ndim, a->shape, nd, shape);
  UOp *y = bc_to_shape(b->uop, b->ndim, b->shape, nd, shape);
  if (op->prep == PREP_TRUTH) {
    x = ew_truth(&e, x);
    y = ew_truth(&e, y);
  } else {
    x = ew_cast(x, dt);
    y = ew_cast(y, dt);
  }
  UOp *r = x && y ? op->fn(&e, x, y) : NULL;
  ScalarType rt = r ? (ScalarType)r->dtype.scalar : dt;
  return FRONT_END(ctx, m, bc_result(ctx, op->name, r, rt, nd, shape));
}

tvk_tensor *tvk_add(tvk_tensor *a, tvk_tensor *b) { return binary(&op_add, a, b); }
tvk_tensor *tvk_sub(tvk_tensor *a, tvk_tensor *b) { return binary(&op_sub, a, b); }
tvk_tensor *tvk_mul(tvk_tensor *a, tvk_tensor *b) { return binary(&op_mul, a, b); }
tvk_tensor *tvk_div(tvk_tensor *a, tvk_tensor *b) { return binary(&op_div, a, b); }
tvk_tensor *tvk_pow(tvk_tensor *a, tvk_tensor *b) { return binary(&op_pow, a, b); }
tvk_tensor *tvk_maximum(tvk_tensor *a, tvk_tensor *b) { return binary(&op_maximum, a, b); }
tvk_tensor *tvk_minimum(tvk_tensor *a, tvk_tensor *b) { return binary(&op_minimum, a, b); }
tvk_tensor *tvk_lt(tvk_tensor *a, tvk_tensor *b) { return binary(&op_lt, a, b); }
tvk_tensor *tvk_le(tvk_tensor *a, tvk_tensor *b) { return binary(&op_le, a, b); }
tvk_tensor *tvk_gt(tvk_tensor *a, tvk_tensor *b) { return binary(&op_gt, a, b); }
tvk_tensor *tvk_ge(tvk_tensor *a, tvk_tensor *b) { return binary(&op_ge, a, b); }
tvk_tensor *tvk_eq(tvk_tensor *a, tvk_tensor *b) { return binary(&op_eq, a, b); }
tvk_tensor *tvk_ne(tvk_tensor *a, tvk_tensor *b) { return binary(&op_ne, a, b); }
tvk_tensor *tvk_logical_and(tvk_tensor *a, tvk_tensor *b) { return binary(&op_land, a, b); }
tvk_tensor *tvk_logical_or(tvk_tensor *a, tvk_tensor *b) { return binary(&op_lor, a, b); }
tvk_tensor *tvk_bitwise_and(tvk_tensor *a, tvk_tensor *b) { return binary(&op_band, a, b); }
tvk_tensor *tvk_bitwise_or(tvk_tensor *a, tvk_tensor *b) { return binary(&op_bor, a, b); }
tvk_tensor *tvk_bitwise_xor(tvk_tensor *a, tvk_tensor *b) { return binary(&op_bxor, a, b); }
tvk_tensor *tvk_shl(tvk_tensor *a, tvk_tensor *b) { return binary(&op_shl, a, b); }
tvk_tensor *tvk_shr(tvk_tensor *a, tvk_tensor *b) { return binary(&op_shr, a, b); }
tvk_tensor *tvk_idiv(tvk_tensor *a, tvk_tensor *b) { return binary(&op_idiv, a, b); }
tvk_tensor *tvk_mod(tvk_tensor *a, tvk_tensor *b) { return binary(&op_mod, a, b); }

/* cond ? a : b: a and b promote together, cond is tested != 0, all three
 * broadcast to one shape. */
tvk_tensor *tvk_where(tvk_tensor *cond, tvk_tensor *a, tvk_tensor *b) {
  tvk_tensor *ts[3] = {cond, a, b};
  bool bad;
  tvk_tensor *err = bc_check_sym("where", 3, ts, &bad);
  if (bad) return err;
  tvk_ctx *ctx = a->ctx;
  int nd;
  int64_t shape[TVK_MAX_DIMS];
  if (!bc_broadcast_shape(3, ts, &nd, shape)) return shape_error("where", 3, ts);
  ScalarType dt = bc_promote(2, ts + 1);

  size_t m = FRONT_BEGIN(ctx);
  Ew e = ew_frame(ctx, nd, shape);
  UOp *c = ew_truth(&e, bc_to_shape(cond->uop, cond->ndim, cond->shape, nd, shape));
  UOp *x = ew_cast(bc_to_shape(a->uop, a->ndim, a->shape, nd, shape), dt);
  UOp *y = ew_cast(bc_to_shape(b->uop, b->ndim, b->shape, nd, shape), dt);
  return FRONT_END(ctx, m, bc_result(ctx, "where", ew_where(c, x, y), dt, nd, shape));
}

/* Bounds converted to a's dtype, so that clip never changes it; each bound
 * must broadcast to a's shape (the result keeps it). */
tvk_tensor *tvk_clip(tvk_tensor *a, tvk_tensor *lo, tvk_tensor *hi) {
  bool bad;
  tvk_tensor *err = bc_check_sym("clip", 1, &a, &bad);
  if (bad) return err;
  tvk_tensor *bounds[2] = {lo, hi};
  for (int i = 0; i < 2; i++) {
    if (!bounds[i]) continue;
    if ((err = bc_check_sym("clip", 2, (tvk_tensor *[]){a, bounds[i]}, &bad))) return err;
    int nd;
    int64_t shape[TVK_MAX_DIMS];
    bool same = bc_broadcast_shape(2, (tvk_tensor *[]){a, bounds[i]}, &nd, shape) && nd == a->ndim;
    for (int d = 0; same && d < nd; d++) same = shape[d] == a->shape[d];
    if (!same) {
      char as[BC_SHAPE_STR_MAX], bs[BC_SHAPE_STR_MAX];
      return tensor_error(
          a->ctx, TVK_ERR_SHAPE, "clip: %s has shape %s, which does not broadcast to a's %s",
          i ? "hi" : "lo", bc_shape_str(bounds[i]->ndim, bounds[i]->shape, bs, sizeof bs),
          bc_shape_str(a->ndim, a->shape, as, sizeof as));
    }
  }
  tvk_ctx *ctx = a->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r = a;
  if (lo) r = tvk_maximum(r, tvk_cast(lo, a->dtype));
  if (hi) r = tvk_minimum(r, tvk_cast(hi, a->dtype));
  if (r == a) r = bc_same(a);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
